/* CUDA backend tests: the op case table (tests/cases.h) on the CUDA backend in f32, f16 and
   bf16, every tensor in device memory (contiguous, padded, transposed and negative-stride
   views with poisoned guards), against the same independent f64 oracles the CPU backends
   meet; then the CUDA-specific checks: bad input (host pointers, wrong device, misaligned
   data, overlaps) returns its error and leaves outputs untouched, and a caller-owned device
   workspace that is too small is refused. The CPU suites run first (shared harness, linked
   from the tests' C files). Last line: "N passed, N failed". */
#define SSM_CUDA_IMPLEMENTATION
#include "../ssm_cuda.h"
extern "C" {
#include "cases.h"
int ssm_test_cpu_main(void);
}
#include <cuda_runtime.h>

/* ---- test buffers in device memory (the harness keeps a host shadow) ---- */
static void *cu_alloc(size_t n) {
    void *p = NULL;
    return cudaMalloc(&p, n) == cudaSuccess ? p : NULL;
}
static void cu_release(void *p) { cudaFree(p); }
static void cu_upload(void *dst, const void *src, size_t n) {
    cudaDeviceSynchronize();
    cudaMemcpy(dst, src, n, cudaMemcpyHostToDevice);
}
static void cu_download(void *dst, const void *src, size_t n) {
    cudaDeviceSynchronize();
    cudaMemcpy(dst, src, n, cudaMemcpyDeviceToHost);
}
static const test_memory cuda_memory = {{SSM_DEVICE_CUDA, 0}, cu_alloc, cu_release, cu_upload, cu_download};

/* The decay scan's kernel: 0 = by shape, 1 = look-back, 2 = tiled (contexts made after). */
static void force_decay_kernel(ssm_cuda_config *cc, int kernel) { cc->decay_kernel = kernel; }

/* ---- bad input ---- */
static void suite_cuda_errors(ssm_ctx *cu) {
    int64_t sA[4] = {1, 8, 4, 4}, sb[4] = {1, 8, 4, 1};
    test_begin("cuda errors: host pointer, wrong device, misaligned, overlap, cpu device type");
    {
        tbuf A = tb_random(SSM_F32, 4, sA, LAYOUT_CONTIGUOUS, 0.3, NULL), b = tb_random(SSM_F32, 4, sb, LAYOUT_CONTIGUOUS, 1, NULL);
        tbuf h = tb_new(SSM_F32, 4, sb, LAYOUT_CONTIGUOUS);
        ssm_linrec_desc d = ssm_linrec_desc_init();
        float *hostmem = (float *)malloc(sizeof(float) * 200);
        ssm_tensor bad = b.t;
        ssm_result r;
        bad.data = hostmem;
        r = ssm_linrec_forward(cu, &d, &A.t, &bad, NULL, &h.t, NULL);
        CHECK(r == SSM_ERROR_INVALID_DEVICE, "host pointer -> %s (%s)", ssm_result_string(r), ssm_ctx_last_error(cu));
        CHECK(strstr(ssm_ctx_last_error(cu), "host") != NULL, "message names host memory: %s", ssm_ctx_last_error(cu));
        bad = b.t;
        bad.device.id = 7;
        r = ssm_linrec_forward(cu, &d, &A.t, &bad, NULL, &h.t, NULL);
        CHECK(r == SSM_ERROR_INVALID_DEVICE, "wrong device id -> %s", ssm_result_string(r));
        bad = b.t;
        bad.device = ssm_cpu();
        r = ssm_linrec_forward(cu, &d, &A.t, &bad, NULL, &h.t, NULL);
        CHECK(r == SSM_ERROR_INVALID_DEVICE, "cpu device type -> %s", ssm_result_string(r));
        bad = b.t;
        bad.data = (char *)b.t.data + 1;
        r = ssm_linrec_forward(cu, &d, &A.t, &bad, NULL, &h.t, NULL);
        CHECK(r == SSM_ERROR_INVALID_STRIDE, "misaligned -> %s", ssm_result_string(r));
        r = ssm_linrec_forward(cu, &d, &A.t, &b.t, NULL, &b.t, NULL);
        CHECK(r == SSM_ERROR_ALIASING, "h overlapping b -> %s", ssm_result_string(r));
        bad = h.t;
        bad.data = hostmem;
        r = ssm_linrec_forward(cu, &d, &A.t, &b.t, NULL, &bad, NULL);
        CHECK(r == SSM_ERROR_INVALID_DEVICE, "host output -> %s", ssm_result_string(r));
        CHECK(tb_untouched(&h), "an output was written by a failing call");
        {
            ssm_decay_desc dd = ssm_decay_desc_init();
            int64_t sx[4] = {1, 8, 4, 4}, sl[3] = {1, 8, 4};
                        tbuf x = tb_random(SSM_F16, 4, sx, LAYOUT_CONTIGUOUS, 1, NULL), l = tb_random(SSM_F16, 3, sl, LAYOUT_CONTIGUOUS, 0.1, NULL);
            tbuf o = tb_new(SSM_F16, 4, sx, LAYOUT_CONTIGUOUS);
            ssm_tensor bx = x.t;
            bx.data = hostmem;
            r = ssm_decay_forward(cu, &dd, &l.t, &bx, NULL, &o.t, NULL);
            CHECK(r == SSM_ERROR_INVALID_DEVICE, "decay host x -> %s", ssm_result_string(r));
            bx = l.t;
            bx.dtype = SSM_F32;
            r = ssm_decay_forward(cu, &dd, &bx, &x.t, NULL, &o.t, NULL);
            CHECK(r == SSM_ERROR_INVALID_DTYPE, "decay mixed dtypes -> %s", ssm_result_string(r));
            CHECK(tb_untouched(&o), "decay output written by a failing call");
            tb_free(&x), tb_free(&l), tb_free(&o);
        }
        {
            ssm_ctx *c2 = NULL;
            ssm_ctx_config cfg = ssm_ctx_config_init();
            ssm_cuda_config cc = ssm_cuda_config_init();
            cc.device = 99;
            cfg.backend = ssm_cuda_backend();
            cfg.backend_config = &cc;
            r = ssm_ctx_create(&cfg, &c2);
            CHECK(r == SSM_ERROR_INVALID_DEVICE && c2 == NULL, "context on device 99 -> %s", ssm_result_string(r));
        }
        free(hostmem);
        tb_free(&A), tb_free(&b), tb_free(&h);
    }
    test_end();
    test_begin("cuda caller-owned workspace too small");
    {
        ssm_ctx *c2 = NULL;
        ssm_ctx_config cfg = ssm_ctx_config_init();
        ssm_cuda_config cc = ssm_cuda_config_init();
        void *w = NULL;
        int64_t sA2[4] = {1, 64, 8, 8}, sb2[4] = {1, 64, 8, 1};
        cudaMalloc(&w, 256);
        cc.workspace = w, cc.workspace_bytes = 256;
        cfg.backend = ssm_cuda_backend();
        cfg.backend_config = &cc;
        CHECK_OK(ssm_ctx_create(&cfg, &c2), c2);
        tbuf A = tb_random(SSM_F32, 4, sA2, LAYOUT_CONTIGUOUS, 0.3, NULL), b = tb_random(SSM_F32, 4, sb2, LAYOUT_CONTIGUOUS, 1, NULL);
        tbuf h = tb_new(SSM_F32, 4, sb2, LAYOUT_CONTIGUOUS);
        ssm_linrec_desc d = ssm_linrec_desc_init();
        d.method = SSM_LINREC_SCAN_HS;
        ssm_result r = ssm_linrec_forward(c2, &d, &A.t, &b.t, NULL, &h.t, NULL);
        CHECK(r == SSM_ERROR_WORKSPACE_TOO_SMALL, "-> %s", ssm_result_string(r));
        CHECK(tb_untouched(&h), "output written");
        ssm_ctx_destroy(c2);
        cudaFree(w);
        tb_free(&A), tb_free(&b), tb_free(&h);
    }
    test_end();
}

/* Workspace through ssm.h's generic calls: the size queries answer device bytes, a
   caller-owned device workspace of exactly that size runs the call (backward without dA
   too), reserve grows device memory. */
static ssm_ctx *cuda_ctx_owning(void *w, size_t bytes) {
    ssm_ctx *c2 = NULL;
    ssm_ctx_config cfg = ssm_ctx_config_init();
    ssm_cuda_config cc = ssm_cuda_config_init();
    cc.workspace = w, cc.workspace_bytes = bytes;
    cfg.backend = ssm_cuda_backend();
    cfg.backend_config = &cc;
    CHECK_OK(ssm_ctx_create(&cfg, &c2), c2);
    return c2;
}

static void suite_cuda_workspace(ssm_ctx *cu) {
    test_begin("cuda workspace: queries in device bytes, exact caller-owned workspace, reserve");
    {
        ssm_linrec_desc d = ssm_linrec_desc_init();
        ssm_decay_desc dd = ssm_decay_desc_init();
        size_t bytes = 0;
        CHECK_OK(ssm_ctx_reserve_workspace(cu, 1 << 20), cu);
        CHECK(ssm_ctx_workspace_capacity(cu) >= (1 << 20), "capacity %zu after reserving 1 MiB", ssm_ctx_workspace_capacity(cu));
        CHECK(ssm_linrec_workspace_size(cu, &d, SSM_F64, 1, 8, 2, 1, 0, &bytes) == SSM_ERROR_INVALID_DTYPE, "f64 on CUDA");
        CHECK(ssm_decay_workspace_size(cu, &dd, SSM_F64, 1, 8, 2, 1, 0, &bytes) == SSM_ERROR_INVALID_DTYPE, "decay f64 on CUDA");
        CHECK(ssm_linrec_workspace_size(cu, &d, SSM_BF16, -3, 8, 2, 1, 0, &bytes) == SSM_ERROR_INVALID_SHAPE, "S < 0");
    }
    {
        struct { ssm_dtype dt; ssm_linrec_method m; int64_t S, T, n, m_; } cs[3] = {
            {SSM_F16, SSM_LINREC_CHUNKED, 3, 300, 64, 1}, {SSM_F32, SSM_LINREC_SCAN_HS, 2, 37, 4, 3}, {SSM_BF16, SSM_LINREC_CR, 2, 37, 5, 1}};
        for (int k = 0; k < 3; ++k) {
            ssm_linrec_desc d = ssm_linrec_desc_init();
            size_t fwd = 0, bwd = 0, need;
            void *w = NULL;
            int64_t sA[4] = {cs[k].S, cs[k].T, cs[k].n, cs[k].n}, sb[4] = {cs[k].S, cs[k].T, cs[k].n, cs[k].m_};
            d.method = cs[k].m;
            CHECK_OK(ssm_linrec_workspace_size(cu, &d, cs[k].dt, cs[k].S, cs[k].T, cs[k].n, cs[k].m_, 0, &fwd), cu);
            CHECK_OK(ssm_linrec_workspace_size(cu, &d, cs[k].dt, cs[k].S, cs[k].T, cs[k].n, cs[k].m_, 1, &bwd), cu);
            need = fwd > bwd ? fwd : bwd;
            CHECK(need > 0, "%s needs device scratch", ssm_linrec_method_name(cs[k].m));
            cudaMalloc(&w, need);
            ssm_ctx *c2 = cuda_ctx_owning(w, need);
            tbuf A = tb_random(cs[k].dt, 4, sA, LAYOUT_CONTIGUOUS, 0.3 / sqrt((double)cs[k].n), NULL);
            tbuf b = tb_random(cs[k].dt, 4, sb, LAYOUT_CONTIGUOUS, 1, NULL);
            tbuf h = tb_new(cs[k].dt, 4, sb, LAYOUT_CONTIGUOUS), g = tb_new(cs[k].dt, 4, sb, LAYOUT_CONTIGUOUS);
            if (c2) {
                CHECK_OK(ssm_linrec_forward(c2, &d, &A.t, &b.t, NULL, &h.t, NULL), c2);
                CHECK_OK(ssm_linrec_backward(c2, &d, &A.t, NULL, &h.t, &b.t, NULL, NULL, &g.t, NULL), c2);
                ssm_ctx_destroy(c2);
            }
            cudaFree(w);
            tb_free(&A), tb_free(&b), tb_free(&h), tb_free(&g);
        }
    }
    {
        ssm_decay_desc d = ssm_decay_desc_init();
        int64_t sx[4] = {1, 5000, 2, 8}, sl[3] = {1, 5000, 2};
        size_t need = 0;
        void *w = NULL;
        CHECK_OK(ssm_decay_workspace_size(cu, &d, SSM_F32, 1, 5000, 2, 8, 1, &need), cu);
        CHECK(need > 0, "the look-back decay scan needs device scratch");
        cudaMalloc(&w, need);
        ssm_ctx *c2 = cuda_ctx_owning(w, need);
        tbuf x = tb_random(SSM_F32, 4, sx, LAYOUT_CONTIGUOUS, 1, NULL), l = tb_random(SSM_F32, 3, sl, LAYOUT_CONTIGUOUS, 0.01, NULL);
        tbuf o = tb_new(SSM_F32, 4, sx, LAYOUT_CONTIGUOUS), dx = tb_new(SSM_F32, 4, sx, LAYOUT_CONTIGUOUS);
        tbuf dl = tb_new(SSM_F32, 3, sl, LAYOUT_CONTIGUOUS);
        if (c2) {
            CHECK_OK(ssm_decay_forward(c2, &d, &l.t, &x.t, NULL, &o.t, NULL), c2);
            CHECK_OK(ssm_decay_backward(c2, &d, &l.t, NULL, &o.t, &x.t, NULL, &dx.t, &dl.t, NULL), c2);
            ssm_ctx_destroy(c2);
        }
        cudaFree(w);
        tb_free(&x), tb_free(&l), tb_free(&o), tb_free(&dx), tb_free(&dl);
    }
    test_end();
}

int main(void) {
    int count = 0;
    ssm_cuda_config cc = ssm_cuda_config_init();
    /* SSM_TEST_CUDA_ONLY=decay|linrec runs the table's rows of that op on CUDA (and the
       error suite) alone: the short runs under compute-sanitizer. Unset: the CPU suites and
       table first, then every CUDA suite; the tally below counts both. */
    const char *only = getenv("SSM_TEST_CUDA_ONLY");
    const int decay = !only || !strcmp(only, "decay"), linrec = !only || !strcmp(only, "linrec");
    if (!only) ssm_test_cpu_main();
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
        printf("no CUDA device: CUDA tests not run\n%d passed, %d failed\n", test_passed, test_failed);
        return test_failed ? 1 : 0;
    }
    {
        cudaDeviceProp prop;
        cudaGetDeviceProperties(&prop, 0);
        fprintf(stderr, "== backend: cuda (%s, sm_%d%d)\n", prop.name, prop.major, prop.minor);
    }
    test_backend = ssm_cuda_backend();
    test_backend_config = &cc;
    test_mem = &cuda_memory;
    cases_gpu = 1;
    {
        ssm_ctx *cu = test_ctx();
        suite_cuda_errors(cu);
        suite_cuda_workspace(cu);
        ssm_ctx_destroy(cu);
    }
    /* the decay scan's two kernels: by shape (mostly look-back at these sizes), then the
       tiled kernel forced on every row */
    if (decay) {
        cases_run(CASE_CUDA_DTYPES, CASE_DECAY);
        force_decay_kernel(&cc, 2);
        cases_label = "tiled";
        cases_run(CASE_CUDA_DTYPES, CASE_DECAY);
        force_decay_kernel(&cc, 1);
        cases_label = "look-back";
        cases_run(CASE_CUDA_DTYPES, CASE_DECAY);
        cases_label = NULL;
        force_decay_kernel(&cc, 0);
    }
    if (linrec) cases_run(CASE_CUDA_DTYPES, CASE_LINREC);
    if (!only) { /* ops without CUDA kernels yet: every row declines (skipped) until they land */
        cases_run(CASE_CUDA_DTYPES, CASE_BELL);
        cases_run(CASE_CUDA_DTYPES, CASE_PROJ);
        cases_run(CASE_CUDA_DTYPES, CASE_OUTCHAIN);
        cases_run(CASE_CUDA_DTYPES, CASE_DELTA);
    }
    if (test_skipped) printf("%d skipped (the backend declined the op)\n", test_skipped);
    printf("%d passed, %d failed\n", test_passed, test_failed);
    return test_failed ? 1 : 0;
}
