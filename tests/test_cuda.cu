/* CUDA backend tests: the op case table (tests/cases.h) on the CUDA backend in f32, f16 and
   bf16, every tensor in device memory (contiguous, padded, transposed and negative-stride
   views with poisoned guards), against the same independent f64 oracles the CPU backends
   meet; then the CUDA-specific checks: the block-ELL kernels on odd strides and their
   determinism (two backward runs, identical bits), the delta rule against the f64 CPU reference
   (chunked and recurrent, varlen, decode steps, bitwise-repeatable backward), the block-ELL
   topology on device scores bit for bit against the CPU reference, bad input (host pointers, wrong device, misaligned
   data, overlaps) returns its error and leaves outputs untouched, and a caller-owned device
   workspace that is too small is refused. The CPU suites run first (shared harness, linked
   from the tests' C files). Last line: "N passed, N failed". */
#include "../ssm_cuda.h"
extern "C" {
#include "cases.h"
int ssm_test_cpu_main(void);
}
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <vector>

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

/* The decay scan's kernel: 0 = by shape, 1 = look-back, 2 = tiled, 3 = chunked (contexts made after). */
static void force_decay_kernel(ssm_cuda_config *cc, int kernel) { cc->decay_kernel = kernel; }

/* ---- block-ELL layer ---- */
/* A [rows, cols] device matrix with row stride rs and column stride cs (poisoned outside). */
/* ---- block-ELL suite: device buffers with explicit row/column strides (odd row strides,
   column stride 2), poisoned with 0xFF; the f64 CPU reference backend as the oracle ---- */
struct dbuf {
    ssm_tensor t;
    void *mem;
    size_t bytes;
};
/* A device tensor over exactly its span (plus one element), poisoned. */
static dbuf db_strided(ssm_dtype dt, int ndim, const int64_t *shape, const int64_t *strides) {
    dbuf b;
    int64_t span = 1;
    for (int i = 0; i < ndim; ++i) span += (shape[i] > 0 ? shape[i] - 1 : 0) * strides[i];
    b.bytes = (size_t)(span + 1) * (dt.bits / 8);
    cudaMalloc(&b.mem, b.bytes);
    cudaMemset(b.mem, 0xFF, b.bytes);
    b.t = ssm_tensor_make(b.mem, dt, ssm_cuda_device(0), ndim, shape, strides);
    return b;
}
static dbuf db_new(ssm_dtype dt, int ndim, const int64_t *shape, int layout) {
    tbuf h = tb_new(SSM_F32, ndim, shape, layout); /* only for its strides */
    dbuf b = db_strided(dt, ndim, shape, h.t.strides);
    tb_free(&h);
    return b;
}
static void db_free(dbuf *b) { cudaFree(b->mem); }
static double h_get(ssm_dtype dt, const unsigned char *p, int64_t off) {
    if (dt.bits == 32) return ((const float *)p)[off];
    if (dt.code == SSM_DTYPE_BFLOAT) return __bfloat162float(((const __nv_bfloat16 *)p)[off]);
    return __half2float(((const __half *)p)[off]);
}
static void h_put(ssm_dtype dt, unsigned char *p, int64_t off, double v) {
    if (dt.bits == 32) ((float *)p)[off] = (float)v;
    else if (dt.code == SSM_DTYPE_BFLOAT) ((__nv_bfloat16 *)p)[off] = __float2bfloat16((float)v);
    else ((__half *)p)[off] = __float2half((float)v);
}
/* Visits every element: logical index k, element offset off. */
template <typename F> static void db_each(const dbuf *b, F f) {
    int64_t idx[SSM_MAX_DIMS] = {0}, n = ssm_tensor_numel(&b->t), k, off;
    int d;
    for (k = 0; k < n; ++k) {
        off = 0;
        for (d = 0; d < b->t.ndim; ++d) off += idx[d] * b->t.strides[d];
        f(k, off);
        for (d = b->t.ndim - 1; d >= 0; --d) {
            if (++idx[d] < b->t.shape[d]) break;
            idx[d] = 0;
        }
    }
}
static std::vector<unsigned char> db_download(const dbuf *b) {
    std::vector<unsigned char> h(b->bytes);
    cudaDeviceSynchronize();
    cudaMemcpy(h.data(), b->mem, b->bytes, cudaMemcpyDeviceToHost);
    return h;
}
/* Writes values (rounded to dtype) and returns them as stored. */
static void db_set(dbuf *b, double *v) {
    std::vector<unsigned char> h = db_download(b);
    ssm_dtype dt = b->t.dtype;
    db_each(b, [&](int64_t k, int64_t off) { h_put(dt, h.data(), off, v[k]); v[k] = h_get(dt, h.data(), off); });
    cudaMemcpy(b->mem, h.data(), b->bytes, cudaMemcpyHostToDevice);
}
static std::vector<double> db_get(const dbuf *b) {
    std::vector<unsigned char> h = db_download(b);
    std::vector<double> v((size_t)ssm_tensor_numel(&b->t));
    db_each(b, [&](int64_t k, int64_t off) { v[(size_t)k] = h_get(b->t.dtype, h.data(), off); });
    return v;
}
static int db_outside_untouched(const dbuf *b) {
    std::vector<unsigned char> h = db_download(b), in(b->bytes, 0);
    size_t es = b->t.dtype.bits / 8, i;
    db_each(b, [&](int64_t, int64_t off) { memset(&in[(size_t)off * es], 1, es); });
    for (i = 0; i < b->bytes; ++i)
        if (!in[i] && h[i] != 0xFF) return 0;
    return 1;
}
static int db_untouched(const dbuf *b) {
    std::vector<unsigned char> h = db_download(b);
    for (size_t i = 0; i < h.size(); ++i)
        if (h[i] != 0xFF) return 0;
    return 1;
}
static dbuf db_random(ssm_dtype dt, int ndim, const int64_t *shape, int layout, double scale, std::vector<double> &v) {
    dbuf b = db_new(dt, ndim, shape, layout);
    v.resize((size_t)ssm_tensor_numel(&b.t));
    for (auto &x : v) x = test_uniform(-scale, scale);
    db_set(&b, v.data());
    return b;
}
/* f64 host tensor (contiguous) over a vector. */
static ssm_tensor host_f64(std::vector<double> &v, int ndim, const int64_t *shape) {
    return ssm_tensor_make(v.data(), SSM_F64, ssm_cpu(), ndim, shape, NULL);
}

static ssm_ctx *cuda_ctx_with(ssm_cuda_config cc) {
    ssm_ctx *ctx = NULL;
    ssm_ctx_config cfg = ssm_ctx_config_init();
    cfg.backend = ssm_cuda_backend();
    cfg.backend_config = &cc;
    if (ssm_ctx_create(&cfg, &ctx) != SSM_OK) test_fail(__FILE__, __LINE__, "CUDA context creation failed");
    return ctx;
}
static ssm_ctx *cuda_ctx(void) { return cuda_ctx_with(ssm_cuda_config_init()); }
static ssm_ctx *ref_ctx(void) {
    ssm_ctx *ctx = NULL;
    ssm_ctx_config cfg = ssm_ctx_config_init();
    ssm_ctx_create(&cfg, &ctx);
    return ctx;
}
static double tol_of(ssm_dtype dt) { return dt.bits == 32 ? 2e-4 : (dt.code == SSM_DTYPE_BFLOAT ? 6e-2 : 1.5e-2); }

static dbuf db_new2(ssm_dtype dt, int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
    dbuf b;
    int64_t shape[2] = {rows, cols}, strides[2] = {rs, cs};
    size_t es = dt.bits / 8;
    b.bytes = (size_t)((rows > 0 ? (rows - 1) * rs : 0) + (cols - 1) * cs + 1 + 8) * es;
    cudaMalloc(&b.mem, b.bytes);
    cudaMemset(b.mem, 0xFF, b.bytes);
    b.t = ssm_tensor_make(b.mem, dt, ssm_cuda_device(0), 2, shape, strides);
    return b;
}
static dbuf db_matrix(ssm_dtype dt, int64_t rows, int64_t cols, int layout) {
    /* 0 contiguous, 1 aligned padded rows (+8), 2 odd row stride (+3), 3 column stride 2 */
    if (layout == 1) return db_new2(dt, rows, cols, cols + 8, 1);
    if (layout == 2) return db_new2(dt, rows, cols, cols + 3, 1);
    if (layout == 3) return db_new2(dt, rows, cols, 2 * cols + 1, 2);
    return db_new2(dt, rows, cols, cols, 1);
}
static dbuf db_i32(const std::vector<int32_t> &v, int ndim, const int64_t *shape) {
    dbuf b;
    b.bytes = v.size() * 4;
    cudaMalloc(&b.mem, b.bytes ? b.bytes : 4);
    cudaMemcpy(b.mem, v.data(), b.bytes, cudaMemcpyHostToDevice);
    b.t = ssm_tensor_make(b.mem, SSM_I32, ssm_cuda_device(0), ndim, shape, NULL);
    return b;
}
#define BELL_EXPECT(expr, code, what)                                                                   \
    do {                                                                                               \
        ssm_result e_ = (expr);                                                                        \
        CHECK(e_ == (code), "%s: got %s, expected %s", what, ssm_result_string(e_), ssm_result_string(code)); \
    } while (0)
static std::vector<unsigned char> db_bytes(const dbuf *b) { return db_download(b); }

struct bell_case {
    ssm_dtype dt;
    int64_t N, R, C, K, B;
    int layout, bias;
    int64_t vpad; /* > 0: the tiles' rows padded to B + vpad elements (values not packed) */
    double tol;   /* > 0: the relative error allowed (plain TF32), else tol_of(dt) */
};

static void bell_case_run(ssm_ctx *cu, ssm_ctx *ref, const bell_case *c) {
    char name[200];
    const int64_t N = c->N, R = c->R, C = c->C, K = c->K, B = c->B;
    int64_t sv[4] = {R, K, B, B}, sci[2] = {R, K}, sto = C + 1, sts = R * K, sb = R * B;
    int64_t sx[2] = {N, C * B}, sy[2] = {N, R * B};
    const double tol = c->tol > 0 ? c->tol : tol_of(c->dt);
    snprintf(name, sizeof name, "cuda bell %s N%lld R%lld C%lld K%lld B%lld layout%d bias%d vpad%lld%s", ssm_dtype_name(c->dt),
             (long long)N, (long long)R, (long long)C, (long long)K, (long long)B, c->layout, c->bias, (long long)c->vpad,
             c->tol > 0 ? " (tolerance of TF32)" : "");
    test_begin(name);
    /* random distinct columns per row (shuffled order: the kernels must not assume sorted rows) */
    std::vector<int32_t> ci((size_t)(R * K)), toff((size_t)(C + 1)), tsl((size_t)(R * K));
    for (int64_t r = 0; r < R; ++r) {
        std::vector<int32_t> perm((size_t)C);
        for (int64_t q = 0; q < C; ++q) perm[(size_t)q] = (int32_t)q;
        for (int64_t q = C - 1; q > 0; --q) std::swap(perm[(size_t)q], perm[(size_t)(test_uniform(0.0, 1.0) * (q + 1)) % (size_t)(q + 1)]);
        for (int64_t k = 0; k < K; ++k) ci[(size_t)(r * K + k)] = perm[(size_t)k];
    }
    ssm_tensor hci = ssm_tensor_make(ci.data(), SSM_I32, ssm_cpu(), 2, sci, NULL);
    ssm_tensor hto = ssm_tensor_make(toff.data(), SSM_I32, ssm_cpu(), 1, &sto, NULL);
    ssm_tensor hts = ssm_tensor_make(tsl.data(), SSM_I32, ssm_cpu(), 1, &sts, NULL);
    CHECK_OK(ssm_bell_transpose_index(ref, &hci, &hto, &hts), ref);
    dbuf dci = db_i32(ci, 2, sci), dto = db_i32(toff, 1, &sto), dts = db_i32(tsl, 1, &sts);
    std::vector<double> v, x, bias, dy;
    dbuf dv;
    if (c->vpad > 0) {
        const int64_t rp = B + c->vpad, svs[4] = {K * B * rp, B * rp, rp, 1};
        dv = db_strided(c->dt, 4, sv, svs);
        v.resize((size_t)(R * K * B * B));
        for (auto &e : v) e = test_uniform(-0.25, 0.25);
        db_set(&dv, v.data());
    } else {
        dv = db_random(c->dt, 4, sv, LAYOUT_CONTIGUOUS, 0.25, v);
    }
    dbuf db = db_random(c->dt, 1, &sb, LAYOUT_CONTIGUOUS, 1.0, bias);
    dbuf dx = db_matrix(c->dt, N, C * B, c->layout), dyb = db_matrix(c->dt, N, R * B, c->layout);
    dbuf dout = db_matrix(c->dt, N, R * B, (c->layout + 1) % 4);
    x.resize((size_t)(N * C * B)), dy.resize((size_t)(N * R * B));
    for (auto &e : x) e = test_uniform(-1.0, 1.0);
    for (auto &e : dy) e = test_uniform(-1.0, 1.0);
    db_set(&dx, x.data()), db_set(&dyb, dy.data());
    std::vector<double> ry((size_t)(N * R * B)), rdx(x.size()), rdv(v.size()), rdb(bias.size());
    ssm_tensor tv = host_f64(v, 4, sv), tx = host_f64(x, 2, sx), tb = host_f64(bias, 1, &sb), ty = host_f64(ry, 2, sy);
    ssm_tensor tdy = host_f64(dy, 2, sy), tdx = host_f64(rdx, 2, sx), tdv = host_f64(rdv, 4, sv), tdb = host_f64(rdb, 1, &sb);
    CHECK_OK(ssm_bell_forward(ref, &tx, &tv, &hci, c->bias ? &tb : NULL, &ty), ref);
    CHECK_OK(ssm_bell_forward(cu, &dx.t, &dv.t, &dci.t, c->bias ? &db.t : NULL, &dout.t), cu);
    std::vector<double> gy = db_get(&dout);
    double e = N ? rel_err(gy.data(), ry.data(), (int64_t)ry.size()) : 0.0;
    CHECK(e < tol, "y rel err %.3g", e);
    CHECK(db_outside_untouched(&dout), "y written outside its view");
    {
        dbuf gdx = db_matrix(c->dt, N, C * B, (c->layout + 2) % 4), gdv = db_new(c->dt, 4, sv, LAYOUT_CONTIGUOUS);
        dbuf gdb = db_new(c->dt, 1, &sb, LAYOUT_CONTIGUOUS);
        CHECK_OK(ssm_bell_backward(ref, &tx, &tv, &hci, &hto, &hts, &tdy, &tdx, &tdv, &tdb), ref);
        CHECK_OK(ssm_bell_backward(cu, &dx.t, &dv.t, &dci.t, &dto.t, &dts.t, &dyb.t, &gdx.t, &gdv.t, &gdb.t), cu);
        std::vector<double> g1 = db_get(&gdx), g2 = db_get(&gdv), g3 = db_get(&gdb);
        std::vector<unsigned char> b1 = db_bytes(&gdx), b2 = db_bytes(&gdv);
        double e1 = N ? rel_err(g1.data(), rdx.data(), (int64_t)rdx.size()) : 0.0;
        double e2 = rel_err(g2.data(), rdv.data(), (int64_t)rdv.size()), e3 = rel_err(g3.data(), rdb.data(), (int64_t)rdb.size());
        CHECK(e1 < tol, "dx rel err %.3g", e1);
        CHECK(e2 < tol, "dvalues rel err %.3g", e2);
        CHECK(e3 < tol, "dbias rel err %.3g", e3);
        CHECK(db_outside_untouched(&gdx), "dx written outside its view");
        /* determinism: a second run gives the same bits */
        CHECK_OK(ssm_bell_backward(cu, &dx.t, &dv.t, &dci.t, &dto.t, &dts.t, &dyb.t, &gdx.t, &gdv.t, &gdb.t), cu);
        CHECK(db_bytes(&gdx) == b1 && db_bytes(&gdv) == b2, "second backward differs in its bits");
        db_free(&gdx), db_free(&gdv), db_free(&gdb);
    }
    db_free(&dci), db_free(&dto), db_free(&dts), db_free(&dv), db_free(&db), db_free(&dx), db_free(&dyb), db_free(&dout);
    test_end();
}

/* Under SSM_TEST_CUDA_SHARD=i/n (main) the suites and cases outside the table are dealt out in
   turn like the table's rows: the next one is this process's when shard_take() says so. */
static int shard_take(void) {
    static long seen;
    return cases_shards <= 1 || seen++ % cases_shards == cases_shard;
}

static void suite_cuda_bell(ssm_ctx *cu, ssm_ctx *ref) {
    const ssm_dtype dts[3] = {SSM_F32, SSM_F16, SSM_BF16};
    static const int64_t Ns[3] = {1, 37, 1031}, Bs[3] = {16, 32, 64};
    int k = 0;
    for (int di = 0; di < 3; ++di)
        for (int bi = 0; bi < 3; ++bi)
            for (int ni = 0; ni < 3; ++ni, ++k) {
                /* R, C not multiples of the group size (128 / B blocks): partial groups */
                bell_case c = {dts[di], Ns[ni], 5, 7, 3, Bs[bi], k % 4, k % 2};
                bell_case_run(cu, ref, &c);
            }
    { /* many groups, lists and regions; K = C (dense); columns no row uses (dx = 0 there) */
        bell_case a = {SSM_BF16, 300, 20, 24, 12, 16, 1, 1};
        bell_case_run(cu, ref, &a);
        bell_case b = {SSM_F16, 129, 9, 6, 6, 32, 0, 1};
        bell_case_run(cu, ref, &b);
        bell_case d = {SSM_F32, 77, 12, 20, 1, 16, 0, 0};
        bell_case_run(cu, ref, &d);
        bell_case e = {SSM_BF16, 2000, 6, 9, 4, 64, 0, 1}; /* token splits of dvalues */
        bell_case_run(cu, ref, &e);
        bell_case f = {SSM_F32, 0, 3, 4, 2, 16, 0, 1}; /* no tokens: zero gradients */
        bell_case_run(cu, ref, &f);
        /* B = 64, 16-bit, aligned rows: the wgmma kernel (on an sm_90a device). More token tiles
           than SMs (the persistent loop) with an odd R (a group of one member), padded input rows
           and element stores of y; union lists longer than the producer's 32-entry staging, in
           the forward (C 40, K 30) and in dx (R 70 rows over 3 columns) */
        bell_case g = {SSM_BF16, 9001, 11, 13, 7, 64, 1, 1};
        bell_case_run(cu, ref, &g);
        bell_case h = {SSM_F16, 300, 3, 40, 30, 64, 0, 1};
        bell_case_run(cu, ref, &h);
        bell_case i = {SSM_BF16, 333, 70, 3, 2, 64, 0, 0};
        bell_case_run(cu, ref, &i);
        /* B = 32 forward on wgmma (the union kernel): every activity pattern of 4 members, more
           token tiles than SMs, union lists past 32 entries, odd R (a partial group) */
        bell_case b32a = {SSM_BF16, 5001, 13, 40, 17, 32, 1, 1};
        bell_case_run(cu, ref, &b32a);
        bell_case b32b = {SSM_F16, 300, 6, 37, 9, 32, 0, 0};
        bell_case_run(cu, ref, &b32b);
        /* tiles with padded rows: the wgmma kernels' weights through the 4-D TMA map */
        bell_case p64 = {SSM_BF16, 700, 7, 9, 4, 64, 0, 1, 8}, p32 = {SSM_F16, 400, 9, 11, 5, 32, 1, 0, 8};
        bell_case_run(cu, ref, &p64);
        bell_case_run(cu, ref, &p32);
    }
    { /* the mma.sync kernels on cases the wgmma ones take by default (ssm_cuda_config.bell_kernel = 1) */
        ssm_cuda_config cc = ssm_cuda_config_init();
        cc.bell_kernel = 1;
        ssm_ctx *mm = cuda_ctx_with(cc);
        bell_case a = {SSM_BF16, 1031, 5, 7, 3, 64, 0, 1}, b = {SSM_F16, 517, 9, 10, 5, 64, 1, 0};
        bell_case_run(mm, ref, &a);
        bell_case_run(mm, ref, &b);
        ssm_ctx_destroy(mm);
    }
    /* f32 on its other two paths (the default, 3xTF32, runs the rows above): the CUDA-core
       kernels (bell_f32 = 1) and plain TF32 (bell_f32 = 2, its own tolerance: products of
       operands rounded to 10 bits). Each B, partial groups, element loads (layout 3: column
       stride 2), token splits of dvalues, padded tiles. */
    for (int mode = 1; mode <= 2; ++mode) {
        ssm_cuda_config cc = ssm_cuda_config_init();
        cc.bell_f32 = mode;
        ssm_ctx *f = cuda_ctx_with(cc);
        const double t = mode == 2 ? 3e-3 : 0.0;
        bell_case rows[6] = {{SSM_F32, 1031, 5, 7, 3, 16, 0, 1, 0, t}, {SSM_F32, 37, 9, 10, 5, 32, 3, 0, 0, t},
                             {SSM_F32, 2000, 6, 9, 4, 64, 1, 1, 0, t}, {SSM_F32, 300, 3, 40, 30, 64, 2, 0, 0, t},
                             {SSM_F32, 129, 13, 6, 6, 32, 0, 1, 8, t}, {SSM_F32, 1, 4, 5, 2, 64, 3, 1, 0, t}};
        for (const bell_case &c : rows) bell_case_run(f, ref, &c);
        ssm_ctx_destroy(f);
    }
    { /* refusals: B outside 16/32/64, host index */
        int64_t sv[4] = {2, 1, 8, 8}, sci[2] = {2, 1}, sx[2] = {4, 16}, sy[2] = {4, 16};
        std::vector<double> v, x;
        std::vector<int32_t> ci = {0, 1};
        test_begin("cuda bell refusals");
        dbuf dv = db_random(SSM_F32, 4, sv, LAYOUT_CONTIGUOUS, 1.0, v), dx = db_random(SSM_F32, 2, sx, LAYOUT_CONTIGUOUS, 1.0, x);
        dbuf dy = db_new(SSM_F32, 2, sy, LAYOUT_CONTIGUOUS), dci = db_i32(ci, 2, sci);
        BELL_EXPECT(ssm_bell_forward(cu, &dx.t, &dv.t, &dci.t, NULL, &dy.t), SSM_ERROR_UNSUPPORTED, "B = 8 on CUDA");
        CHECK(db_untouched(&dy), "y untouched");
        ssm_tensor hci = ssm_tensor_make(ci.data(), SSM_I32, ssm_cpu(), 2, sci, NULL);
        BELL_EXPECT(ssm_bell_validate(cu, &dv.t, &dci.t, 2), SSM_ERROR_UNSUPPORTED, "validate on CUDA");
        BELL_EXPECT(ssm_bell_forward(cu, &dx.t, &dv.t, &hci, NULL, &dy.t), SSM_ERROR_INVALID_DEVICE, "host col_idx");
        db_free(&dv), db_free(&dx), db_free(&dy), db_free(&dci);
        test_end();
    }
}

/* ---- block-ELL topology on the device: observe kernels and the device step against the CPU
   reference fed the same inputs (16-bit data held exactly in f64 on the host): scores, index,
   transposed index, values and optimizer states must agree bit for bit, every step ---- */
static int topo_same(const std::vector<double> &a, const std::vector<double> &b) {
    return a.size() == b.size() && (a.empty() || !memcmp(a.data(), b.data(), a.size() * sizeof(double)));
}
static std::vector<double> topo_scores(const double *dev, int64_t n) {
    std::vector<double> h((size_t)n);
    cudaDeviceSynchronize();
    cudaMemcpy(h.data(), dev, (size_t)n * sizeof(double), cudaMemcpyDeviceToHost);
    return h;
}
static std::vector<int32_t> topo_i32(const dbuf *b) {
    std::vector<int32_t> h(b->bytes / 4);
    cudaDeviceSynchronize();
    cudaMemcpy(h.data(), b->mem, b->bytes, cudaMemcpyDeviceToHost);
    return h;
}
static void topo_index(int64_t R, int64_t C, int64_t K, std::vector<int32_t> &ci) {
    ci.assign((size_t)(R * K), 0);
    for (int64_t r = 0; r < R; ++r) { /* random distinct columns, shuffled order */
        std::vector<int32_t> perm((size_t)C);
        for (int64_t q = 0; q < C; ++q) perm[(size_t)q] = (int32_t)q;
        for (int64_t q = C - 1; q > 0; --q) std::swap(perm[(size_t)q], perm[(size_t)(test_uniform(0.0, 1.0) * (q + 1)) % (size_t)(q + 1)]);
        for (int64_t k = 0; k < K; ++k) ci[(size_t)(r * K + k)] = perm[(size_t)k];
    }
}

static void topo_case(ssm_ctx *cu, ssm_ctx *ref, ssm_dtype dt, int64_t B, int64_t R, int64_t C, int64_t K, int64_t N,
                      int magnitude, int layout) {
    char name[200];
    int64_t sv[4] = {R, K, B, B}, sci[2] = {R, K}, sto = C + 1, sts = R * K, sx[2] = {N, C * B}, sy[2] = {N, R * B};
    int64_t grown = 0;
    snprintf(name, sizeof name, "cuda bell topology %s B%lld R%lld C%lld K%lld N%lld %s layout%d", ssm_dtype_name(dt),
             (long long)B, (long long)R, (long long)C, (long long)K, (long long)N, magnitude ? "magnitude" : "grad-ema", layout);
    test_begin(name);
    std::vector<int32_t> ci, toff((size_t)(C + 1)), tsl((size_t)(R * K));
    topo_index(R, C, K, ci);
    ssm_tensor hci = ssm_tensor_make(ci.data(), SSM_I32, ssm_cpu(), 2, sci, NULL);
    ssm_tensor hto = ssm_tensor_make(toff.data(), SSM_I32, ssm_cpu(), 1, &sto, NULL);
    ssm_tensor hts = ssm_tensor_make(tsl.data(), SSM_I32, ssm_cpu(), 1, &sts, NULL);
    CHECK_OK(ssm_bell_transpose_index(ref, &hci, &hto, &hts), ref);
    dbuf dci = db_i32(ci, 2, sci), dto = db_i32(toff, 1, &sto), dts = db_i32(tsl, 1, &sts);
    std::vector<double> v, m, w;
    dbuf dv = db_random(dt, 4, sv, layout, 0.25, v), dm = db_random(SSM_F32, 4, sv, (layout + 1) % 3, 0.1, m);
    dbuf dw = db_random(SSM_F32, 4, sv, LAYOUT_CONTIGUOUS, 0.1, w);
    ssm_tensor hv = host_f64(v, 4, sv), hm = host_f64(m, 4, sv), hw = host_f64(w, 4, sv);
    ssm_bell_topology_config cfg = ssm_bell_topology_config_init();
    cfg.period = 2, cfg.prune_frac = 0.5, cfg.epsilon = 0.2, cfg.swap_ratio = 0.5, cfg.seed = 1234 + (uint64_t)B;
    cfg.layer_id = 7, cfg.drop_score = magnitude ? SSM_BELL_DROP_MAGNITUDE : SSM_BELL_DROP_GRAD_EMA;
    ssm_bell_topology *tc = NULL, *tr = NULL;
    CHECK_OK(ssm_bell_topology_create(cu, &cfg, R, C, K, &tc), cu);
    CHECK_OK(ssm_bell_topology_create(ref, &cfg, R, C, K, &tr), ref);
    if (tc && tr) {
        size_t ws = 1;
        CHECK(tc->device_type == SSM_DEVICE_CUDA, "the CUDA topology's scores are on device type %d", (int)tc->device_type);
        CHECK_OK(ssm_bell_topology_workspace_size(tc, B, dt, &ws), cu);
        CHECK(ws == 0, "a device topology takes no workspace (%zu)", ws);
        for (int64_t step = 1; step <= 7; ++step) {
            std::vector<double> x, dy, g;
            dbuf dx = db_matrix(dt, N, C * B, (int)(step + layout) % 4), dyb = db_matrix(dt, N, R * B, (int)(step + 1) % 4);
            x.resize((size_t)(N * C * B)), dy.resize((size_t)(N * R * B));
            for (auto &e : x) e = test_uniform(-1.0, 1.0);
            for (auto &e : dy) e = test_uniform(-1.0, 1.0);
            db_set(&dx, x.data()), db_set(&dyb, dy.data());
            dbuf dg = db_random(dt, 4, sv, (int)step % 3, 0.5, g);
            ssm_tensor hx = host_f64(x, 2, sx), hdy = host_f64(dy, 2, sy), hg = host_f64(g, 4, sv);
            CHECK_OK(ssm_bell_topology_observe(cu, tc, &dx.t, &dyb.t, &dg.t), cu);
            CHECK_OK(ssm_bell_topology_observe(ref, tr, &hx, &hdy, &hg), ref);
            CHECK(topo_same(topo_scores(tc->keep_score, R * K), std::vector<double>(tr->keep_score, tr->keep_score + R * K)),
                  "step %lld: keep scores differ after observe", (long long)step);
            CHECK(topo_same(topo_scores(tc->grow_score, R * C), std::vector<double>(tr->grow_score, tr->grow_score + R * C)),
                  "step %lld: grow scores differ after observe", (long long)step);
            ssm_tensor *ocu[2] = {&dm.t, &dw.t}, *oref[2] = {&hm, &hw};
            ssm_bell_topology_report rc, rr;
            memset(&rc, 0x55, sizeof rc), memset(&rr, 0x33, sizeof rr);
            CHECK_OK(ssm_bell_topology_step(cu, tc, step, &dv.t, &dci.t, &dto.t, &dts.t, ocu, 2, &rc), cu);
            CHECK_OK(ssm_bell_topology_step(ref, tr, step, &hv, &hci, &hto, &hts, oref, 2, &rr), ref);
            CHECK(rc.updated == rr.updated && rc.grown == rr.grown && rc.pruned == rr.pruned && rc.explored == rr.explored &&
                      rc.rejected == rr.rejected && rc.rows_changed == rr.rows_changed && rc.churn == rr.churn &&
                      rc.checksum == rr.checksum,
                  "step %lld: reports differ (grown %lld/%lld explored %lld/%lld rejected %lld/%lld checksum %016llx/%016llx)",
                  (long long)step, (long long)rc.grown, (long long)rr.grown, (long long)rc.explored, (long long)rr.explored,
                  (long long)rc.rejected, (long long)rr.rejected, (unsigned long long)rc.checksum, (unsigned long long)rr.checksum);
            grown += rr.grown;
            CHECK(topo_i32(&dci) == ci, "step %lld: col_idx differs", (long long)step);
            CHECK(topo_i32(&dto) == toff && topo_i32(&dts) == tsl, "step %lld: the transposed index differs", (long long)step);
            CHECK(topo_same(db_get(&dv), v), "step %lld: values differ", (long long)step);
            CHECK(topo_same(db_get(&dm), m) && topo_same(db_get(&dw), w), "step %lld: optimizer states differ", (long long)step);
            CHECK(db_outside_untouched(&dv) && db_outside_untouched(&dm), "step %lld: written outside the views", (long long)step);
            CHECK(topo_same(topo_scores(tc->keep_score, R * K), std::vector<double>(tr->keep_score, tr->keep_score + R * K)),
                  "step %lld: keep scores differ after the step", (long long)step);
            db_free(&dx), db_free(&dyb), db_free(&dg);
        }
        CHECK(grown > 0, "no tile was ever regrown: the case tests nothing");
    }
    ssm_bell_topology_destroy(tc), ssm_bell_topology_destroy(tr);
    db_free(&dci), db_free(&dto), db_free(&dts), db_free(&dv), db_free(&dm), db_free(&dw);
    test_end();
}

static ssm_result topo_hook_fail(void *u, double *d, int64_t n) { (void)u, (void)d, (void)n; return (ssm_result)42; }

static void suite_cuda_bell_topology(ssm_ctx *cu, ssm_ctx *ref) {
    const ssm_dtype dts[2] = {SSM_F32, SSM_BF16};
    static const int64_t Bs[3] = {16, 32, 64};
    int k = 0;
    for (int di = 0; di < 2; ++di)
        for (int bi = 0; bi < 3; ++bi, ++k) /* N > SSM_BELL_OBS_LANES: lanes hold several tokens */
            topo_case(cu, ref, dts[di], Bs[bi], bi == 2 ? 4 : 7, bi == 2 ? 7 : 11, bi == 2 ? 3 : 5, k % 2 ? 300 : 97, k % 3 == 2, k % 3);
    topo_case(cu, ref, SSM_F16, 16, 20, 24, 12, 1031, 0, 0); /* a bigger layer, f16 */
    topo_case(cu, ref, SSM_BF16, 32, 9, 10, 9, 40, 1, 1);    /* K = C - 1: one free column per row */
    test_begin("cuda bell topology: bad input errors, outputs untouched");
    {
        const int64_t R = 3, C = 5, K = 2, B = 16, N = 8;
        int64_t sv[4] = {R, K, B, B}, sci[2] = {R, K}, sto = C + 1, sts = R * K, sx[2] = {N, C * B};
        std::vector<int32_t> ci = {0, 2, 1, 3, 4, 4}, toff = {0, 1, 2, 3, 4, 6}, tsl = {0, 2, 1, 3, 4, 5}; /* row 2 repeats 4 */
        std::vector<double> v, x, dy, g;
        dbuf dci = db_i32(ci, 2, sci), dto = db_i32(toff, 1, &sto), dts = db_i32(tsl, 1, &sts);
        dbuf dv = db_random(SSM_F32, 4, sv, LAYOUT_CONTIGUOUS, 1.0, v), dg = db_random(SSM_F32, 4, sv, LAYOUT_CONTIGUOUS, 1.0, g);
        dbuf dx = db_matrix(SSM_F32, N, C * B, 0), dyb = db_matrix(SSM_F32, N, R * B, 0);
        x.assign((size_t)(N * C * B), 0.5), dy.assign((size_t)(N * R * B), 0.25);
        db_set(&dx, x.data()), db_set(&dyb, dy.data());
        std::vector<float> xf(x.begin(), x.end());
        ssm_tensor hx = host_f64(x, 2, sx), hxf = ssm_tensor_make(xf.data(), SSM_F32, ssm_cpu(), 2, sx, NULL);
        ssm_tensor short_slots = dts.t;
        ssm_bell_topology_config cfg = ssm_bell_topology_config_init();
        ssm_bell_topology *tc = NULL, *tr = NULL;
        ssm_bell_topology_report rep;
        short_slots.shape[0] = R * K - 1;
        cfg.period = 1, cfg.prune_frac = 1.0, cfg.swap_ratio = 0.0;
        CHECK_OK(ssm_bell_topology_create(cu, &cfg, R, C, K, &tc), cu);
        CHECK_OK(ssm_bell_topology_create(ref, &cfg, R, C, K, &tr), ref);
        if (tc && tr) {
            std::vector<unsigned char> b0 = db_bytes(&dv), c0 = db_bytes(&dci), t0 = db_bytes(&dto), s0 = db_bytes(&dts);
            CHECK_OK(ssm_bell_topology_observe(cu, tc, &dx.t, &dyb.t, &dg.t), cu);
            std::vector<double> k0 = topo_scores(tc->keep_score, R * K), g0 = topo_scores(tc->grow_score, R * C);
            BELL_EXPECT(ssm_bell_topology_observe(cu, tc, &hxf, &dyb.t, &dg.t), SSM_ERROR_INVALID_DEVICE, "host x");
            BELL_EXPECT(ssm_bell_topology_observe(ref, tc, &hx, &hx, &hx), SSM_ERROR_INVALID_DEVICE, "device scores, CPU context");
            BELL_EXPECT(ssm_bell_topology_observe(cu, tr, &dx.t, &dyb.t, &dg.t), SSM_ERROR_UNSUPPORTED, "host scores, CUDA context");
            BELL_EXPECT(ssm_bell_topology_observe(cu, tc, &dyb.t, &dyb.t, &dg.t), SSM_ERROR_INVALID_SHAPE, "x of the wrong width");
            CHECK(topo_same(topo_scores(tc->keep_score, R * K), k0) && topo_same(topo_scores(tc->grow_score, R * C), g0),
                  "a refused observe changed the scores");
            BELL_EXPECT(ssm_bell_topology_step(cu, tc, 1, &dv.t, &dci.t, &dto.t, &dts.t, NULL, 0, &rep), SSM_ERROR_INVALID_VALUE,
                        "a row with a repeated column");
            BELL_EXPECT(ssm_bell_topology_step(cu, tc, 1, &dv.t, &hx, &dto.t, &dts.t, NULL, 0, &rep), SSM_ERROR_INVALID_DTYPE,
                        "col_idx of the wrong dtype");
            BELL_EXPECT(ssm_bell_topology_step(cu, tc, 1, &dv.t, &dci.t, &dto.t, &short_slots, NULL, 0, &rep), SSM_ERROR_INVALID_SHAPE,
                        "t_slots of the wrong length");
            ci[5] = 1;
            cudaMemcpy(dci.mem, ci.data(), 4 * ci.size(), cudaMemcpyHostToDevice);
            c0 = db_bytes(&dci);
            tc->config.allreduce = topo_hook_fail;
            BELL_EXPECT(ssm_bell_topology_step(cu, tc, 1, &dv.t, &dci.t, &dto.t, &dts.t, NULL, 0, &rep), SSM_ERROR_BACKEND,
                        "a failing all-reduce hook");
            tc->config.allreduce = NULL;
            CHECK(db_bytes(&dv) == b0 && db_bytes(&dci) == c0 && db_bytes(&dto) == t0 && db_bytes(&dts) == s0,
                  "a refused step changed the layer");
            CHECK(topo_same(topo_scores(tc->keep_score, R * K), k0), "a refused step changed the keep scores");
        }
        ssm_bell_topology_destroy(tc), ssm_bell_topology_destroy(tr);
        db_free(&dci), db_free(&dto), db_free(&dts), db_free(&dv), db_free(&dg), db_free(&dx), db_free(&dyb);
    }
    test_end();
}

/* ---- delta rule (DeltaNet, Gated DeltaNet) ---- */
struct dl_case {
    ssm_dtype dt;
    ssm_delta_method method;
    int64_t B, T, H, K, V;
    int gated, use_s0, use_sT, layout, cu_dev; /* cu_dev: cu_seqlens on the device (i32), else host (i64) */
    std::vector<int64_t> lens;                 /* varlen: sequence lengths (B = 1) */
    double gmin;
    int64_t nh = 1; /* DeltaProduct: Householder factors per token (k, v [B,T,H,nh,D], beta [B,T,H,nh]) */
    int interleaved = 0; /* k, v, beta and their gradients in fla's layout: memory [B,T,nh,H(,D)] */
};

/* A factored DeltaProduct operand [B,T,H,nh(,D)] over memory [B,T,nh,H(,D)] (fla's interleaved
   layout: time stride = nh x factor stride), poisoned. */
static dbuf db_interleaved(ssm_dtype dt, int ndim, const int64_t *shape) {
    const int64_t D = ndim == 5 ? shape[4] : 1, H = shape[2], nh = shape[3];
    const int64_t st[5] = {shape[1] * nh * H * D, nh * H * D, D, H * D, 1};
    return db_strided(dt, ndim, shape, st);
}

static ssm_dtype dl_i64(void) {
    ssm_dtype d = ssm_dtype_i32();
    d.bits = 64;
    return d;
}
/* One case: the forward (o, sT) and the backward (every gradient) on CUDA against the f64 CPU
   reference on the same values; the backward twice, bitwise equal (the second from the chunk
   quantities a forward kept, desc.saved); outputs' padding untouched; chunked against recurrent
   forward. */
static void delta_case(ssm_ctx *cu, ssm_ctx *ref, const dl_case *c) {
    char name[256];
    const int64_t N = c->lens.empty() ? c->B : (int64_t)c->lens.size(), B = c->lens.empty() ? c->B : 1;
    int64_t T = c->T;
    if (!c->lens.empty()) {
        T = 0;
        for (int64_t l : c->lens) T += l;
    }
    const int64_t nh = c->nh;
    snprintf(name, sizeof name, "cuda delta %s %s B%lld T%lld H%lld K%lld V%lld n_h%lld g%d s0%d sT%d layout%d%s seqs%lld%s",
             ssm_dtype_name(c->dt), ssm_delta_method_name(c->method), (long long)B, (long long)T, (long long)c->H,
             (long long)c->K, (long long)c->V, (long long)nh, c->gated, c->use_s0, c->use_sT, c->layout,
             c->interleaved ? " interleaved" : "", (long long)c->lens.size(), c->cu_dev ? " cu-dev" : "");
    test_begin(name);
    /* k, v, beta carry the factor dimension when n_h > 1 (rank 5 / 4) */
    const int rf = nh > 1 ? 1 : 0;
    int64_t sq[4] = {B, T, c->H, c->K}, sv[4] = {B, T, c->H, c->V}, sb[3] = {B, T, c->H}, ss[4] = {N, c->H, c->K, c->V};
    int64_t skf[5] = {B, T, c->H, nh, c->K}, svf[5] = {B, T, c->H, nh, c->V}, sbf[4] = {B, T, c->H, nh};
    int64_t *sk = rf ? skf : sq, *svv = rf ? svf : sv, *sbb = rf ? sbf : sb;
    std::vector<double> q, k, v, beta, g, s0;
    const auto fac_buf = [&](int ndim, const int64_t *shape) {
        return c->interleaved ? db_interleaved(c->dt, ndim, shape) : db_new(c->dt, ndim, shape, c->layout);
    };
    dbuf dq_ = db_random(c->dt, 4, sq, c->layout, 1.0, q), dk_ = fac_buf(4 + rf, sk);
    dbuf dv_ = fac_buf(4 + rf, svv), db_ = fac_buf(3 + rf, sbb);
    v.resize((size_t)ssm_tensor_numel(&dv_.t));
    for (auto &x : v) x = test_uniform(-1, 1);
    db_set(&dv_, v.data());
    dbuf dg_ = db_new(c->dt, 3, sb, c->layout), ds0 = db_random(c->dt, 4, ss, c->layout, 1.0, s0);
    k.resize((size_t)(B * T * c->H * nh * c->K)), beta.resize((size_t)(B * T * c->H * nh)), g.resize((size_t)(B * T * c->H));
    for (size_t r = 0; r < beta.size(); ++r) { /* L2-normalised keys, beta in (0, 1), log gates <= 0 */
        double nk = 0;
        for (int64_t i = 0; i < c->K; ++i) k[r * c->K + i] = test_uniform(-1, 1), nk += k[r * c->K + i] * k[r * c->K + i];
        for (int64_t i = 0; i < c->K; ++i) k[r * c->K + i] /= sqrt(nk);
        beta[r] = test_uniform(0.05, 1.0);
    }
    for (size_t r = 0; r < g.size(); ++r) g[r] = test_uniform(c->gmin, 0.0);
    db_set(&dk_, k.data()), db_set(&db_, beta.data()), db_set(&dg_, g.data());
    /* cu_seqlens: host i64 for both contexts; the CUDA call may take a device i32 copy */
    std::vector<int64_t> cuv;
    int32_t *cud = NULL;
    ssm_tensor tcu_h, tcu_d;
    int64_t ncu = N + 1;
    if (!c->lens.empty()) {
        cuv.push_back(0);
        for (int64_t l : c->lens) cuv.push_back(cuv.back() + l);
        tcu_h = ssm_tensor_make(cuv.data(), dl_i64(), ssm_cpu(), 1, &ncu, NULL);
        std::vector<int32_t> c32(cuv.begin(), cuv.end());
        cudaMalloc(&cud, c32.size() * 4);
        cudaMemcpy(cud, c32.data(), c32.size() * 4, cudaMemcpyHostToDevice);
        tcu_d = ssm_tensor_make(cud, ssm_dtype_i32(), ssm_cuda_device(0), 1, &ncu, NULL);
    }
    const ssm_tensor *tcu_ref = cuv.empty() ? NULL : &tcu_h, *tcu_cu = cuv.empty() ? NULL : (c->cu_dev ? &tcu_d : &tcu_h);
    ssm_tensor hq = host_f64(q, 4, sq), hk = host_f64(k, 4 + rf, sk), hv = host_f64(v, 4 + rf, svv), hb = host_f64(beta, 3 + rf, sbb);
    ssm_tensor hg = host_f64(g, 3, sb), hs0 = host_f64(s0, 4, ss);
    std::vector<double> ro((size_t)(B * T * c->H * c->V)), rT(s0.size());
    ssm_tensor hro = host_f64(ro, 4, sv), hrT = host_f64(rT, 4, ss);
    ssm_delta_desc dref = ssm_delta_desc_init(), d = ssm_delta_desc_init();
    d.method = c->method;
    CHECK_OK(ssm_delta_forward(ref, &dref, &hq, &hk, &hv, &hb, c->gated ? &hg : NULL, c->use_s0 ? &hs0 : NULL, tcu_ref, &hro,
                               c->use_sT ? &hrT : NULL), ref);
    dbuf dout = db_new(c->dt, 4, sv, c->layout), dsT = db_new(c->dt, 4, ss, c->layout);
    CHECK_OK(ssm_delta_forward(cu, &d, &dq_.t, &dk_.t, &dv_.t, &db_.t, c->gated ? &dg_.t : NULL, c->use_s0 ? &ds0.t : NULL,
                               tcu_cu, &dout.t, c->use_sT ? &dsT.t : NULL), cu);
    const double tol = tol_of(c->dt);
    {
        std::vector<double> go = db_get(&dout);
        double e = rel_err(go.data(), ro.data(), (int64_t)ro.size());
        CHECK(e < tol, "o rel err %.3g", e);
        CHECK(db_outside_untouched(&dout), "o written outside its view");
        if (c->use_sT) {
            std::vector<double> gT = db_get(&dsT);
            double eT = rel_err(gT.data(), rT.data(), (int64_t)rT.size());
            CHECK(eT < tol, "sT rel err %.3g", eT);
        }
    }
    if (c->method == SSM_DELTA_CHUNKED) { /* the token loop on the same inputs */
        dbuf o2 = db_new(c->dt, 4, sv, c->layout);
        ssm_delta_desc dr = ssm_delta_desc_init();
        dr.method = SSM_DELTA_RECURRENT;
        CHECK_OK(ssm_delta_forward(cu, &dr, &dq_.t, &dk_.t, &dv_.t, &db_.t, c->gated ? &dg_.t : NULL,
                                   c->use_s0 ? &ds0.t : NULL, tcu_cu, &o2.t, NULL), cu);
        std::vector<double> a1 = db_get(&dout), a2 = db_get(&o2);
        double e = rel_err(a1.data(), a2.data(), (int64_t)a1.size());
        CHECK(e < tol, "chunked vs recurrent rel err %.3g", e);
        db_free(&o2);
    }
    /* backward */
    std::vector<double> vdo, vdT;
    dbuf ddo = db_random(c->dt, 4, sv, c->layout, 1.0, vdo), ddT = db_random(c->dt, 4, ss, c->layout, 1.0, vdT);
    std::vector<double> rq(q.size()), rk(k.size()), rv(v.size()), rb(beta.size()), rg(g.size()), r0(s0.size());
    ssm_tensor hdo = host_f64(vdo, 4, sv), hdT = host_f64(vdT, 4, ss);
    ssm_tensor hrq = host_f64(rq, 4, sq), hrk = host_f64(rk, 4 + rf, sk), hrv = host_f64(rv, 4 + rf, svv), hrb = host_f64(rb, 3 + rf, sbb);
    ssm_tensor hrg = host_f64(rg, 3, sb), hr0 = host_f64(r0, 4, ss);
    CHECK_OK(ssm_delta_backward(ref, &dref, &hq, &hk, &hv, &hb, c->gated ? &hg : NULL, c->use_s0 ? &hs0 : NULL, tcu_ref,
                                &hdo, c->use_sT ? &hdT : NULL, &hrq, &hrk, &hrv, &hrb, c->gated ? &hrg : NULL, &hr0), ref);
    dbuf gq = db_new(c->dt, 4, sq, c->layout), gk = fac_buf(4 + rf, sk), gv = fac_buf(4 + rf, svv);
    dbuf gb = fac_buf(3 + rf, sbb), gg = db_new(c->dt, 3, sb, c->layout), g0 = db_new(c->dt, 4, ss, c->layout);
    std::vector<unsigned char> first[6];
    dbuf *outs[6] = {&gq, &gk, &gv, &gb, &gg, &g0};
    /* desc.saved: the chunk quantities a forward keeps (the query knows no cu_seqlens: N more
       chunks bound the slots); the backward that reads them gives the same bits */
    size_t keep = 0;
    const int varlen = !c->lens.empty();
    CHECK_OK(ssm_delta_workspace_size(cu, &d, c->dt, varlen ? 1 : B, varlen ? T + N * 64 : T, c->H, c->K, c->V, nh, 3, &keep),
             cu);
    CHECK(c->method != SSM_DELTA_CHUNKED || (c->dt.bits == 32 && c->K > 128) || keep > 0, "a chunked forward keeps nothing");
    unsigned char *svm = NULL;
    if (keep) cudaMalloc(&svm, keep);
    int64_t nsb = (int64_t)keep;
    ssm_tensor tsv = ssm_tensor_make(svm, ssm_dtype_u8(), ssm_cuda_device(0), 1, &nsb, NULL);
    ssm_delta_desc ds = d;
    ds.saved = &tsv;
    if (keep > 1 && !varlen) { /* one byte short: refused, nothing written */
        ssm_tensor small = tsv;
        small.shape[0] = nsb - 1;
        ds.saved = &small;
        std::vector<unsigned char> before = db_download(&dout);
        ssm_result r = ssm_delta_forward(cu, &ds, &dq_.t, &dk_.t, &dv_.t, &db_.t, c->gated ? &dg_.t : NULL,
                                         c->use_s0 ? &ds0.t : NULL, tcu_cu, &dout.t, NULL);
        CHECK(r == SSM_ERROR_INVALID_SHAPE && db_download(&dout) == before, "a short saved -> %s", ssm_result_string(r));
        ds.saved = &tsv;
    }
    for (int rep = 0; rep < 2; ++rep) {
        if (rep == 1) /* the forward again, keeping its chunk quantities (o to a used buffer) */
            CHECK_OK(ssm_delta_forward(cu, &ds, &dq_.t, &dk_.t, &dv_.t, &db_.t, c->gated ? &dg_.t : NULL,
                                       c->use_s0 ? &ds0.t : NULL, tcu_cu, &dout.t, NULL), cu);
        CHECK_OK(ssm_delta_backward(cu, rep ? &ds : &d, &dq_.t, &dk_.t, &dv_.t, &db_.t, c->gated ? &dg_.t : NULL,
                                    c->use_s0 ? &ds0.t : NULL, tcu_cu, &ddo.t, c->use_sT ? &ddT.t : NULL, &gq.t, &gk.t,
                                    &gv.t, &gb.t, c->gated ? &gg.t : NULL, &g0.t), cu);
        for (int i = 0; i < 6; ++i) {
            std::vector<unsigned char> raw = db_download(outs[i]);
            if (rep == 0) first[i] = raw;
            else CHECK(raw == first[i], "backward output %d differs without and with saved", i);
        }
    }
    if (svm) cudaFree(svm);
    {
        const char *nm[6] = {"dq", "dk", "dv", "dbeta", "dg", "ds0"};
        std::vector<double> *rr[6] = {&rq, &rk, &rv, &rb, &rg, &r0};
        for (int i = 0; i < 6; ++i) {
            if (i == 4 && !c->gated) continue;
            std::vector<double> got = db_get(outs[i]);
            double e = rel_err(got.data(), rr[i]->data(), (int64_t)got.size());
            CHECK(e < 2 * tol, "%s rel err %.3g", nm[i], e);
            CHECK(db_outside_untouched(outs[i]), "%s written outside its view", nm[i]);
        }
    }
    for (int i = 0; i < 6; ++i) db_free(outs[i]);
    db_free(&ddo), db_free(&ddT), db_free(&dout), db_free(&dsT);
    db_free(&dq_), db_free(&dk_), db_free(&dv_), db_free(&db_), db_free(&dg_), db_free(&ds0);
    if (cud) cudaFree(cud);
    test_end();
}

/* The decode step against the CPU reference's step, the state updated in place. */
static void delta_step_case(ssm_ctx *cu, ssm_ctx *ref, ssm_dtype dt, int64_t B, int64_t H, int64_t K, int64_t V, int gated,
                            int state_layout) {
    char name[160];
    snprintf(name, sizeof name, "cuda delta step %s B%lld H%lld K%lld V%lld g%d %s", ssm_dtype_name(dt), (long long)B,
             (long long)H, (long long)K, (long long)V, gated, layout_name(state_layout));
    test_begin(name);
    int64_t sq[3] = {B, H, K}, sv[3] = {B, H, V}, sb[2] = {B, H}, ss[4] = {B, H, K, V};
    std::vector<double> q, k, v, beta, g, S;
    dbuf dq_ = db_random(dt, 3, sq, LAYOUT_CONTIGUOUS, 1.0, q), dk_ = db_random(dt, 3, sq, LAYOUT_CONTIGUOUS, 0.15, k);
    dbuf dv_ = db_random(dt, 3, sv, LAYOUT_CONTIGUOUS, 1.0, v), db_ = db_random(dt, 2, sb, LAYOUT_CONTIGUOUS, 0.5, beta);
    dbuf dg_ = db_random(dt, 2, sb, LAYOUT_CONTIGUOUS, 0.5, g), dS = db_random(dt, 4, ss, state_layout, 1.0, S);
    for (auto &x : beta) x = fabs(x);
    for (auto &x : g) x = -fabs(x);
    db_set(&db_, beta.data()), db_set(&dg_, g.data());
    std::vector<double> ro((size_t)(B * H * V));
    ssm_tensor hq = host_f64(q, 3, sq), hk = host_f64(k, 3, sq), hv = host_f64(v, 3, sv), hb = host_f64(beta, 2, sb);
    ssm_tensor hg = host_f64(g, 2, sb), hS = host_f64(S, 4, ss), hro = host_f64(ro, 3, sv);
    ssm_delta_desc d = ssm_delta_desc_init();
    CHECK_OK(ssm_delta_step(ref, &d, &hq, &hk, &hv, &hb, gated ? &hg : NULL, &hS, &hro), ref);
    dbuf dout = db_new(dt, 3, sv, LAYOUT_CONTIGUOUS);
    CHECK_OK(ssm_delta_step(cu, &d, &dq_.t, &dk_.t, &dv_.t, &db_.t, gated ? &dg_.t : NULL, &dS.t, &dout.t), cu);
    std::vector<double> go = db_get(&dout), gS = db_get(&dS);
    double eo = rel_err(go.data(), ro.data(), (int64_t)ro.size()), eS = rel_err(gS.data(), S.data(), (int64_t)S.size());
    CHECK(eo < tol_of(dt), "o rel err %.3g", eo);
    CHECK(eS < tol_of(dt), "state rel err %.3g", eS);
    CHECK(db_outside_untouched(&dS), "state written outside its view");
    db_free(&dq_), db_free(&dk_), db_free(&dv_), db_free(&db_), db_free(&dg_), db_free(&dS), db_free(&dout);
    test_end();
}

static void suite_cuda_delta(ssm_ctx *cu, ssm_ctx *ref) {
    const ssm_dtype dts[3] = {SSM_F32, SSM_F16, SSM_BF16};
    /* the fast sizes (32, 64, 128, 256) and others through the padded tiles */
    static const int64_t KV[][2] = {{32, 32}, {64, 64}, {128, 128}, {256, 256}, {16, 16}, {48, 80}, {100, 17}, {64, 200}};
    int k = 0;
    for (int di = 0; di < 3; ++di)
        for (int s = 0; s < 8; ++s, ++k) {
            dl_case c;
            c.dt = dts[di], c.method = SSM_DELTA_CHUNKED;
            c.B = 1 + k % 2, c.T = (k % 3 == 0) ? 130 : (k % 3 == 1 ? 64 : 77), c.H = 2;
            c.K = KV[s][0], c.V = KV[s][1];
            if (c.dt.bits == 32 && c.K > 128) continue; /* no f32 tiles that large: declined */
            c.gated = k % 2, c.use_s0 = k % 3 != 1, c.use_sT = k % 4 != 2;
            c.layout = k % 5 == 3 ? LAYOUT_PADDED : LAYOUT_CONTIGUOUS, c.cu_dev = 0, c.gmin = -0.5;
            if (c.K * c.V > 64 * 64 && c.T > 100) c.T = 70;
            if (shard_take()) delta_case(cu, ref, &c);
        }
    for (int di = 0; di < 3; ++di) { /* varlen (host i64 and device i32 offsets), strong gates, recurrent */
        dl_case c;
        c.dt = dts[di], c.method = SSM_DELTA_CHUNKED, c.B = 1, c.T = 0, c.H = 2, c.K = 64, c.V = 64;
        c.gated = 1, c.use_s0 = 1, c.use_sT = 1, c.layout = LAYOUT_CONTIGUOUS, c.cu_dev = di == 1, c.gmin = -0.5;
        c.lens = {17, 100, 1, 64, 130};
        if (shard_take()) delta_case(cu, ref, &c);
        c.lens.clear(), c.B = 1, c.T = 128, c.gmin = -20; /* strong gates stay finite */
        if (di != 1 && shard_take()) delta_case(cu, ref, &c);
        c.gmin = -0.5, c.method = SSM_DELTA_RECURRENT, c.T = 90, c.K = 32, c.V = 96, c.layout = LAYOUT_PADDED;
        if (shard_take()) delta_case(cu, ref, &c);
    }
    for (int di = 0; di < 3; ++di) { /* DeltaProduct: n_h = 2, 3 sub-tokens per token; varlen; recurrent */
        dl_case c;
        c.dt = dts[di], c.method = SSM_DELTA_CHUNKED, c.B = 2, c.T = 77, c.H = 2, c.K = 64, c.V = 48, c.nh = 2;
        c.gated = di != 1, c.use_s0 = 1, c.use_sT = 1, c.layout = di == 2 ? LAYOUT_PADDED : LAYOUT_CONTIGUOUS;
        c.cu_dev = 0, c.gmin = -0.5;
        if (shard_take()) delta_case(cu, ref, &c);
        c.nh = 3, c.B = 1, c.T = 0, c.K = 32, c.V = 32, c.lens = {40, 5, 33}, c.cu_dev = di == 0;
        if (shard_take()) delta_case(cu, ref, &c);
        c.lens.clear(), c.B = 2, c.T = 9, c.method = SSM_DELTA_RECURRENT, c.K = 48, c.V = 40;
        if (shard_take()) delta_case(cu, ref, &c);
    }
    for (int di = 0; di < 3; ++di) { /* DeltaProduct in place: fla's interleaved k, v, beta */
        dl_case c;
        c.dt = dts[di], c.method = SSM_DELTA_CHUNKED, c.B = 2, c.T = 77, c.H = 2, c.K = 64, c.V = 48, c.nh = 2;
        c.gated = di != 2, c.use_s0 = 1, c.use_sT = 1, c.layout = di == 1 ? LAYOUT_PADDED : LAYOUT_CONTIGUOUS;
        c.cu_dev = 0, c.gmin = -0.5, c.interleaved = 1;
        if (shard_take()) delta_case(cu, ref, &c);
        /* chunks that split tokens (n_h = 3), varlen */
        c.nh = 3, c.B = 1, c.T = 0, c.K = 32, c.V = 32, c.lens = {40, 5, 33}, c.cu_dev = di == 0, c.gated = 1;
        if (shard_take()) delta_case(cu, ref, &c);
        /* odd K (element loads), n_h = 4, one token */
        c.lens.clear(), c.nh = 4, c.B = 1, c.T = di == 2 ? 1 : 50, c.H = 3, c.K = 33, c.V = 20, c.use_s0 = di != 0;
        if (shard_take()) delta_case(cu, ref, &c);
    }
    for (int di = 0; di < 3; ++di) {
        /* padded states take the per-element path, contiguous ones (V % 4 == 0) the 4-column accesses */
        if (shard_take()) delta_step_case(cu, ref, dts[di], 5, 3, 128, 128, 1, LAYOUT_PADDED);
        if (shard_take()) delta_step_case(cu, ref, dts[di], 3, 2, 40, 100, 0, LAYOUT_PADDED);
        if (shard_take()) delta_step_case(cu, ref, dts[di], 4, 3, 128, 128, 1, LAYOUT_CONTIGUOUS);
        if (shard_take()) delta_step_case(cu, ref, dts[di], 3, 5, 40, 100, 0, LAYOUT_CONTIGUOUS);
    }
}

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
        CHECK(r == SSM_ERROR_MISALIGNED, "misaligned -> %s", ssm_result_string(r));
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
        for (int f = 0; f < 13; ++f) { /* each kernel-choice field one past its range */
            ssm_ctx *c2 = NULL;
            ssm_ctx_config cfg = ssm_ctx_config_init();
            ssm_cuda_config cc = ssm_cuda_config_init();
            int *knob[13] = {&cc.decay_kernel, &cc.decay_tile_cols, &cc.decay_tile_steps, &cc.decay_tile_vec,
                             &cc.decay_prefetch, &cc.linrec_tc_split, &cc.proj_kernel, &cc.linrec_cr, &cc.bell_kernel,
                             &cc.linrec_tc_prod, &cc.linrec_scan, &cc.linrec_mat, &cc.bell_f32};
            *knob[f] = f == 6 || f == 0 || f == 10 || f == 7 ? 4 : f == 1 ? 5 : 3;
            cfg.backend = ssm_cuda_backend();
            cfg.backend_config = &cc;
            r = ssm_ctx_create(&cfg, &c2);
            CHECK(r == SSM_ERROR_INVALID_VALUE && c2 == NULL, "kernel-choice field %d out of range -> %s", f, ssm_result_string(r));
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

/* Chunked's chunk 0 runs on the context's side stream beside the products (a fork from the
   context's stream and a join back). On a caller's non-blocking stream the forward and backward
   match the sequential method, and captured into a CUDA graph and replayed they give the first
   run's bits; results are read only after that stream's sync. Matrix states on the tensor-core
   kernel (f16 n = m = 32), CUDA-core states (f32 n = 16, m = 2), a short last chunk in both. */
static void suite_cuda_side_stream(void) {
    test_begin("cuda chunked beside the caller's stream, captured and replayed");
    struct { ssm_dtype dt; int64_t S, T, n, m; double tol; } cs[2] = {{SSM_F16, 3, 300, 32, 32, 2e-2}, {SSM_F32, 2, 301, 16, 2, 1e-5}};
    for (int k = 0; k < 2; ++k) {
        cudaStream_t st = NULL;
        cudaGraph_t gr = NULL;
        cudaGraphExec_t ge = NULL;
        ssm_ctx *c2 = NULL;
        ssm_ctx_config cfg = ssm_ctx_config_init();
        ssm_cuda_config cc = ssm_cuda_config_init();
        int64_t sA[4] = {cs[k].S, cs[k].T, cs[k].n, cs[k].n}, sb[4] = {cs[k].S, cs[k].T, cs[k].n, cs[k].m};
        cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
        cc.stream = st;
        cfg.backend = ssm_cuda_backend();
        cfg.backend_config = &cc;
        CHECK_OK(ssm_ctx_create(&cfg, &c2), c2);
        if (!c2) continue;
        tbuf A = tb_random(cs[k].dt, 4, sA, LAYOUT_CONTIGUOUS, 0.9 / sqrt((double)cs[k].n), NULL);
        tbuf b = tb_random(cs[k].dt, 4, sb, LAYOUT_CONTIGUOUS, 1, NULL), dh = tb_random(cs[k].dt, 4, sb, LAYOUT_CONTIGUOUS, 1, NULL);
        tbuf h[3], db[3], dA[3]; /* chunked, sequential, chunked replayed */
        for (int i = 0; i < 3; ++i) h[i] = tb_new(cs[k].dt, 4, sb, LAYOUT_CONTIGUOUS), db[i] = tb_new(cs[k].dt, 4, sb, LAYOUT_CONTIGUOUS),
                                    dA[i] = tb_new(cs[k].dt, 4, sA, LAYOUT_CONTIGUOUS);
        const int64_t nh = tb_numel(&h[0]), na = tb_numel(&dA[0]);
        std::vector<double> v[3][3];
        for (int i = 0; i < 2; ++i) {
            ssm_linrec_desc d = ssm_linrec_desc_init();
            d.method = i ? SSM_LINREC_SEQUENTIAL : SSM_LINREC_CHUNKED;
            CHECK_OK(ssm_linrec_forward(c2, &d, &A.t, &b.t, NULL, &h[i].t, NULL), c2);
            CHECK_OK(ssm_linrec_backward(c2, &d, &A.t, NULL, &h[i].t, &dh.t, NULL, &dA[i].t, &db[i].t, NULL), c2);
        }
        {
            ssm_linrec_desc d = ssm_linrec_desc_init();
            ssm_result r1, r2;
            d.method = SSM_LINREC_CHUNKED;
            cudaStreamSynchronize(st);
            tb_poison(&h[2]), tb_poison(&db[2]), tb_poison(&dA[2]);
            CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal) == cudaSuccess, "begin capture");
            r1 = ssm_linrec_forward(c2, &d, &A.t, &b.t, NULL, &h[2].t, NULL);
            r2 = ssm_linrec_backward(c2, &d, &A.t, NULL, &h[2].t, &dh.t, NULL, &dA[2].t, &db[2].t, NULL);
            CHECK(cudaStreamEndCapture(st, &gr) == cudaSuccess && gr, "end capture (every branch joined)");
            CHECK(r1 == SSM_OK && r2 == SSM_OK, "captured calls: %s, %s", ssm_result_string(r1), ssm_result_string(r2));
            CHECK(gr && cudaGraphInstantiate(&ge, gr, 0) == cudaSuccess, "instantiate");
            CHECK(tb_untouched(&h[2]) && tb_untouched(&db[2]), "capture ran nothing");
            if (ge) CHECK(cudaGraphLaunch(ge, st) == cudaSuccess, "replay");
            cudaStreamSynchronize(st);
        }
        for (int i = 0; i < 3; ++i) {
            v[i][0].resize(nh), v[i][1].resize(nh), v[i][2].resize(na);
            tb_get(&h[i], v[i][0].data()), tb_get(&db[i], v[i][1].data()), tb_get(&dA[i], v[i][2].data());
        }
        const char *what[3] = {"h", "db", "dA"};
        for (int q = 0; q < 3; ++q) {
            const double e = rel_err(v[0][q].data(), v[1][q].data(), (int64_t)v[0][q].size());
            CHECK(e <= cs[k].tol, "%s %s: chunked vs sequential rel err %.3g", ssm_dtype_name(cs[k].dt), what[q], e);
            CHECK(!memcmp(v[0][q].data(), v[2][q].data(), v[0][q].size() * sizeof(double)), "%s %s: replay differs from the first run",
                  ssm_dtype_name(cs[k].dt), what[q]);
        }
        if (ge) cudaGraphExecDestroy(ge);
        if (gr) cudaGraphDestroy(gr);
        for (int i = 0; i < 3; ++i) tb_free(&h[i]), tb_free(&db[i]), tb_free(&dA[i]);
        tb_free(&A), tb_free(&b), tb_free(&dh);
        ssm_ctx_destroy(c2);
        cudaStreamDestroy(st);
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

/* The backend's gemm slot called directly: outer > 1 with uneven batch strides and operands of
   mixed dtypes (what ssm.h's generic recurrence asks for: 16-bit inputs beside f32 work), which
   cuBLAS does not take, so every tile kernel runs: k-contiguous slabs on the tensor cores (64- and
   32-tiles, each dtype pair), others on the FMA kernels. f64 reference of the stored values; C
   read (beta) and written in place, every byte outside its elements left as poisoned. */
/* A [outer, batch, rows, cols] operand (db_strided: poisoned around its elements) with uneven
   batch strides, rounded up to multiples of al elements, filled with random values (v: as stored) */
static dbuf gemm_operand(ssm_dtype dt, int64_t outer, int64_t batch, int64_t rows, int64_t cols, int64_t rs, int64_t cs,
                         int64_t al, std::vector<double> &v) {
    const int64_t bs = ((rows - 1) * rs + (cols - 1) * cs + 1 + 5 + al - 1) / al * al, ss = (batch * bs + 7 + al - 1) / al * al;
    const int64_t shape[4] = {outer, batch, rows, cols}, strides[4] = {ss, bs, rs, cs};
    dbuf d = db_strided(dt, 4, shape, strides);
    v.resize((size_t)(outer * batch * rows * cols));
    for (auto &x : v) x = test_uniform(-1, 1);
    db_set(&d, v.data());
    return d;
}
static ssm_matrix_batch gemm_mb(const dbuf &d) {
    ssm_matrix_batch m;
    m.ptr = d.mem, m.ss = d.t.strides[0], m.bs = d.t.strides[1], m.rs = d.t.strides[2], m.cs = d.t.strides[3];
    m.dtype = d.t.dtype;
    return m;
}
/* cvec: C's rows contiguous and 16-byte aligned, beta = 0 (the outer product's vector stores at
   K = 1, as the adjoint's dA_t = g_t h_{t-1}^T writes them) */
static void gemm_case(ssm_ctx *cu, ssm_dtype da, ssm_dtype db, ssm_dtype dc, int64_t M, int64_t N, int64_t K, int kvec,
                      int cvec = 0) {
    const int64_t outer = 3, batch = 5;
    const double alpha = 0.75, beta = cvec ? 0.0 : 0.5;
    char name[160];
    snprintf(name, sizeof name, "cuda gemm slot mixed A %s B %s C %s %lldx%lldx%lld %s%s", ssm_dtype_name(da), ssm_dtype_name(db),
             ssm_dtype_name(dc), (long long)M, (long long)N, (long long)K, kvec ? "k-contiguous" : "strided",
             cvec ? ", C rows contiguous, beta 0" : "");
    test_begin(name);
    /* k-contiguous: rows of A and columns of B along k, 16-byte multiples apart (the tensor-core
       tiles' 16-byte copies: batch strides in whole 16-byte pieces too); else A transposed, B row-major */
    const int64_t va = da.bits == 32 ? 4 : 8, vb = db.bits == 32 ? 4 : 8;
    std::vector<double> a, b, c;
    dbuf A = kvec ? gemm_operand(da, outer, batch, M, K, K + 8, 1, va, a) : gemm_operand(da, outer, batch, M, K, 1, M + 1, 1, a);
    dbuf B = kvec ? gemm_operand(db, outer, batch, K, N, 1, K + 8, vb, b) : gemm_operand(db, outer, batch, K, N, N + 3, 1, 1, b);
    dbuf C = cvec ? gemm_operand(dc, outer, batch, M, N, N, 1, dc.bits == 32 ? 4 : 8, c) : gemm_operand(dc, outer, batch, M, N, N + 3, 1, 1, c);
    CHECK_OK(ssm_cuda_backend()->gemm(cu, SSM_F32, outer, batch, M, N, K, alpha, gemm_mb(A), gemm_mb(B), beta, gemm_mb(C)), cu);
    const std::vector<double> got = db_get(&C);
    const double rel = dc.bits == 32 ? 1e-5 : dc.code == SSM_DTYPE_BFLOAT ? 8e-3 : 1e-3;
    /* f16 C: below its smallest normal (2^-14) the spacing is fixed, so the error is measured
       against that (a K = 1 product with beta 0 lands there; its relative rounding exceeds 1e-3) */
    const double tiny = dc.bits == 16 && dc.code != SSM_DTYPE_BFLOAT ? 6.103515625e-05 : 1e-30;
    double worst = 0;
    for (int64_t ob = 0; ob < outer * batch; ++ob)
        for (int64_t i = 0; i < M; ++i)
            for (int64_t j = 0; j < N; ++j) {
                double sum = 0, mag = 0;
                for (int64_t q = 0; q < K; ++q) {
                    const double p = a[(size_t)((ob * M + i) * K + q)] * b[(size_t)((ob * K + q) * N + j)];
                    sum += p, mag += fabs(p);
                }
                const size_t e = (size_t)((ob * M + i) * N + j);
                const double err = fabs(got[e] - (alpha * sum + beta * c[e])) / (alpha * mag + beta * fabs(c[e]) + tiny);
                if (!(err <= worst)) worst = err;
            }
    CHECK(worst <= rel, "worst relative error %.3g (tolerance %.1g)", worst, rel);
    CHECK(db_outside_untouched(&C), "bytes outside C changed");
    db_free(&A), db_free(&B), db_free(&C);
    test_end();
}
static void suite_cuda_gemm(ssm_ctx *cu) {
    const ssm_dtype f32 = SSM_F32, f16 = SSM_F16, bf16 = SSM_BF16;
    const ssm_dtype pairs[][3] = {{f16, f32, f32}, {bf16, f32, f32}, {f32, f16, f32}, {f16, bf16, f32},
                                  {f32, f32, f16}, {bf16, bf16, bf16}};
    const int64_t shapes[][3] = {{67, 70, 40}, {128, 64, 72}, {32, 32, 32}, {29, 17, 24}, {31, 45, 72}, {5, 40, 8}};
    for (const auto &d : pairs)
        for (const auto &sh : shapes)
            for (int kvec = 1; kvec >= 0; --kvec) gemm_case(cu, d[0], d[1], d[2], sh[0], sh[1], sh[2], kvec);
    /* K = 1 with vector stores: rows of a column vector a thread, items shorter and longer than the
       block's rows (M 3 and 5 against 128 / 64 rows a pass; 130 against 16), 16 items an iteration */
    const ssm_dtype outs[][3] = {{f32, f16, f16}, {f32, bf16, bf16}, {f32, f32, f32}};
    const int64_t kone[][2] = {{37, 64}, {5, 128}, {130, 32}, {3, 16}, {64, 8}};
    for (const auto &d : outs)
        for (const auto &sh : kone) gemm_case(cu, d[0], d[1], d[2], sh[0], sh[1], 1, 1, 1);
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
        /* sizes near 2^63 (a broadcast view carries them): AUTO's chunk rule once looped forever
           on T = INT64_MAX and the chunked scratch product wrapped; now the query answers
           (saturated, or refused), and an empty batch of such sequences runs */
        for (int k = 0; k < 4; ++k) {
            ssm_linrec_desc dh = ssm_linrec_desc_init();
            ssm_result r;
            dh.method = k < 2 ? SSM_LINREC_AUTO : SSM_LINREC_CHUNKED;
            bytes = 0;
            r = ssm_linrec_workspace_size(cu, &dh, k & 1 ? SSM_F16 : SSM_F32, 1 + (k & 1) * ((int64_t)1 << 40), INT64_MAX,
                                          64, 1, k & 1, &bytes);
            CHECK(r == SSM_ERROR_INVALID_SHAPE || (r == SSM_OK && bytes > ((size_t)1 << 40)),
                  "huge T, case %d: %s, %zu bytes", k, ssm_result_string(r), bytes);
        }
        {
            int64_t sA[4] = {0, INT64_MAX, 6, 6}, sb[4] = {0, INT64_MAX, 6, 1};
            int64_t stA[4] = {INT64_MAX, 36, 6, 1}, stb[4] = {INT64_MAX, 6, 1, 1};
            float *dev = NULL;
            cudaMalloc((void **)&dev, 256);
            ssm_tensor A = ssm_tensor_make(dev, SSM_F32, ssm_cuda_device(0), 4, sA, stA);
            ssm_tensor h = ssm_tensor_make(dev, SSM_F32, ssm_cuda_device(0), 4, sb, stb);
            ssm_tensor dA = ssm_tensor_make(dev + 8, SSM_F32, ssm_cuda_device(0), 4, sA, stA);
            ssm_tensor db = ssm_tensor_make(dev + 16, SSM_F32, ssm_cuda_device(0), 4, sb, stb);
            CHECK_OK(ssm_linrec_backward(cu, &d, &A, NULL, &h, &h, NULL, &dA, &db, NULL), cu);
            CHECK_OK(ssm_linrec_forward(cu, &d, &A, &h, NULL, &db, NULL), cu);
            cudaFree(dev);
        }
    }
    {
        /* then cyclic reduction of 16-bit wide states (tensor-core levels, 16-bit M scratch), and at a
           tensor-core shape on spans, with an A the spans' kernels take and one they do not (padded:
           the CUDA-core chunks in the spans' figure) */
        struct { ssm_dtype dt; ssm_linrec_method m; int64_t S, T, n, m_; int layout; } cs[6] = {
            {SSM_F16, SSM_LINREC_CHUNKED, 3, 300, 64, 1, LAYOUT_CONTIGUOUS}, {SSM_F32, SSM_LINREC_SCAN_HS, 2, 37, 4, 3, LAYOUT_CONTIGUOUS},
            {SSM_BF16, SSM_LINREC_CR, 2, 37, 5, 1, LAYOUT_CONTIGUOUS}, {SSM_F16, SSM_LINREC_CR, 3, 67, 16, 16, LAYOUT_CONTIGUOUS},
            {SSM_F16, SSM_LINREC_CR, 2, 300, 64, 1, LAYOUT_CONTIGUOUS}, {SSM_F16, SSM_LINREC_CR, 2, 300, 64, 1, LAYOUT_PADDED}};
        const size_t guard = 4096; /* bytes past the figure, which no call may write */
        for (int k = 0; k < 6; ++k) {
            ssm_linrec_desc d = ssm_linrec_desc_init();
            size_t fwd = 0, bwd = 0, need;
            void *w = NULL;
            int64_t sA[4] = {cs[k].S, cs[k].T, cs[k].n, cs[k].n}, sb[4] = {cs[k].S, cs[k].T, cs[k].n, cs[k].m_};
            std::vector<unsigned char> tail(guard);
            d.method = cs[k].m;
            CHECK_OK(ssm_linrec_workspace_size(cu, &d, cs[k].dt, cs[k].S, cs[k].T, cs[k].n, cs[k].m_, 0, &fwd), cu);
            CHECK_OK(ssm_linrec_workspace_size(cu, &d, cs[k].dt, cs[k].S, cs[k].T, cs[k].n, cs[k].m_, 1, &bwd), cu);
            need = fwd > bwd ? fwd : bwd;
            CHECK(need > 0, "%s needs device scratch", ssm_linrec_method_name(cs[k].m));
            if (k >= 4) { /* on spans: the chunks' order of scratch, not the whole-sequence levels' (~40x here) */
                ssm_linrec_desc dc = ssm_linrec_desc_init();
                size_t chunked = 0;
                dc.method = SSM_LINREC_CHUNKED;
                CHECK_OK(ssm_linrec_workspace_size(cu, &dc, cs[k].dt, cs[k].S, cs[k].T, cs[k].n, cs[k].m_, 1, &chunked), cu);
                CHECK(need <= 2 * chunked, "cr on spans: %zu bytes of workspace, chunked %zu", need, chunked);
            }
            cudaMalloc(&w, need + guard);
            cudaMemset((char *)w + need, 0xa5, guard);
            ssm_ctx *c2 = cuda_ctx_owning(w, need);
            tbuf A = tb_random(cs[k].dt, 4, sA, cs[k].layout, 0.3 / sqrt((double)cs[k].n), NULL);
            tbuf b = tb_random(cs[k].dt, 4, sb, LAYOUT_CONTIGUOUS, 1, NULL);
            tbuf h = tb_new(cs[k].dt, 4, sb, LAYOUT_CONTIGUOUS), g = tb_new(cs[k].dt, 4, sb, LAYOUT_CONTIGUOUS);
            if (c2) {
                CHECK_OK(ssm_linrec_forward(c2, &d, &A.t, &b.t, NULL, &h.t, NULL), c2);
                CHECK_OK(ssm_linrec_backward(c2, &d, &A.t, NULL, &h.t, &b.t, NULL, NULL, &g.t, NULL), c2);
                ssm_ctx_destroy(c2);
            }
            cudaMemcpy(tail.data(), (char *)w + need, guard, cudaMemcpyDeviceToHost);
            CHECK(std::count(tail.begin(), tail.end(), 0xa5) == (std::ptrdiff_t)guard, "%s %s %s: written past the %zu-byte workspace",
                  ssm_linrec_method_name(cs[k].m), ssm_dtype_name(cs[k].dt), layout_name(cs[k].layout), need);
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
    /* SSM_TEST_CUDA_SHARD=i/n runs shard i of n (every n-th table row, from row i; the other suites
       dealt out the same way) and skips the CPU half: n processes side by side under
       compute-sanitizer cover every CUDA row once, in about 1/n of the time. */
    const char *shard = getenv("SSM_TEST_CUDA_SHARD");
    if (shard && (sscanf(shard, "%d/%d", &cases_shard, &cases_shards) != 2 || cases_shards < 1 || cases_shard < 0 ||
                  cases_shard >= cases_shards)) {
        fprintf(stderr, "SSM_TEST_CUDA_SHARD=%s: expected i/n with 0 <= i < n\n", shard);
        return 2;
    }
    /* SSM_TEST_CUDA_ONLY=decay|linrec|bell|delta|proj (or a comma list) runs the table's rows of those ops on CUDA (and the
       error suite) alone: the short runs under compute-sanitizer. Unset: the CPU suites and
       table first, then every CUDA suite; the tally below counts both. */
    const char *only = getenv("SSM_TEST_CUDA_ONLY");
    const int decay = !only || strstr(only, "decay"), linrec = !only || strstr(only, "linrec");
    const int bell = !only || strstr(only, "bell");
    const int delta = !only || strstr(only, "delta");
    const int proj = !only || strstr(only, "proj");
    if (!only && !shard) ssm_test_cpu_main();
    cases_exclude = getenv("SSM_TEST_CUDA_EXCLUDE"); /* e.g. gpu-limit: the 65537-block grids, hours under racecheck */
    cases_match = getenv("SSM_TEST_CUDA_MATCH");     /* e.g. " n127 ,sliced": a few rows under racecheck */
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
        if (shard_take()) suite_cuda_errors(cu);
        if (shard_take()) suite_cuda_workspace(cu);
        ssm_ctx_destroy(cu);
    }
    /* the decay scan's kernels: by shape, then the tiled, look-back and chunked scans forced on
       every row */
    if (decay) {
        cases_run(CASE_CUDA_DTYPES, CASE_DECAY);
        force_decay_kernel(&cc, 2);
        cases_label = "tiled";
        cases_run(CASE_CUDA_DTYPES, CASE_DECAY);
        force_decay_kernel(&cc, 1);
        cases_label = "look-back";
        cases_run(CASE_CUDA_DTYPES, CASE_DECAY);
        force_decay_kernel(&cc, 3);
        cases_label = "chunked";
        cases_run(CASE_CUDA_DTYPES, CASE_DECAY);
        cases_label = NULL;
        force_decay_kernel(&cc, 0);
        /* ranks as threads on this GPU, the allgather through a host stage (a _cp call runs the
           chunked scan); the one-rank references by shape, then on the look-back kernel */
        if (shard_take()) suite_decay_cp();
        force_decay_kernel(&cc, 1);
        if (shard_take()) suite_decay_cp();
        force_decay_kernel(&cc, 0);
    }
    if (linrec) { /* then the chunked rows with each kind of the tensor-core path's chunk products
                     forced (by default wgmma for bf16 on sm_90a, mma.sync for f16), the
                     cyclic-reduction rows with the level kernels forced (tensor-core shapes, n > 64) */
        cases_run(CASE_CUDA_DTYPES, CASE_LINREC);
        if (shard_take()) suite_linrec_cp(); /* ranks as threads on this GPU, the allgather through a host stage */
        if (shard_take()) suite_cuda_side_stream();
        if (shard_take()) { /* the gemm slot's tile kernels, which the recurrences' products run on */
            ssm_ctx *cu = cuda_ctx();
            suite_cuda_gemm(cu);
            ssm_ctx_destroy(cu);
        }
        cases_variant = SSM_LINREC_CHUNKED;
        cc.linrec_tc_prod = 1;
        cases_label = "tc-mma.sync";
        cases_run(CASE_CUDA_DTYPES, CASE_LINREC);
        cc.linrec_tc_prod = 2;
        cases_label = "tc-wgmma";
        cases_run(CASE_CUDA_DTYPES, CASE_LINREC);
        cc.linrec_tc_prod = 0;
        cc.linrec_cr = 2;
        cases_label = "cr-levels";
        cases_variant = SSM_LINREC_CR;
        cases_run(CASE_CUDA_DTYPES, CASE_LINREC);
        cc.linrec_cr = 3; /* the levels by shape, no spans (16-bit wide states: the tensor-core levels) */
        cases_label = "cr-levels-by-shape";
        cases_run(CASE_CUDA_DTYPES, CASE_LINREC);
        cc.linrec_cr = 0;
        cc.linrec_scan = 1; /* and the scan rows on ssm.h's generic levels */
        cases_label = "scan-generic";
        cases_variant = SSM_LINREC_SCAN_HS;
        cases_run(CASE_CUDA_DTYPES, CASE_LINREC);
        cc.linrec_scan = 2; /* HS one task per warp group instead of the chains */
        cases_label = "scan-pertask";
        cases_run(CASE_CUDA_DTYPES, CASE_LINREC);
        cc.linrec_scan = 3; /* Blelloch's levels over the whole sequence on the tensor-core shapes too */
        cases_label = "blelloch-levels";
        cases_variant = SSM_LINREC_BLELLOCH;
        cases_run(CASE_CUDA_DTYPES, CASE_LINREC);
        cc.linrec_scan = 0;
        cc.linrec_mat = 1; /* matrix states on the CUDA-core kernel instead of the tensor-core one, */
        cases_label = "mat-cuda-cores";
        cases_variant = SSM_LINREC_SEQUENTIAL;
        cases_run(CASE_CUDA_DTYPES, CASE_LINREC);
        cases_variant = SSM_LINREC_CHUNKED;
        cases_run(CASE_CUDA_DTYPES, CASE_LINREC);
        cc.linrec_cr = 2; /* and the f32 level kernels' products (R >= 4) on FMAs instead of 3xTF32 */
        cases_variant = SSM_LINREC_CR;
        cases_run(CASE_CUDA_DTYPES, CASE_LINREC);
        cc.linrec_cr = 0;
        cases_variant = SSM_LINREC_BLELLOCH;
        cases_run(CASE_CUDA_DTYPES, CASE_LINREC);
        cases_variant = SSM_LINREC_SCAN_HS;
        cases_run(CASE_CUDA_DTYPES, CASE_LINREC);
        cc.linrec_mat = 0;
        cases_variant = -1;
        cases_label = NULL;
    }
    if (delta) {
        ssm_ctx *cu = cuda_ctx(), *ref = ref_ctx();
        suite_cuda_delta(cu, ref); /* its cases are dealt out one by one */
        ssm_ctx_destroy(cu);
        ssm_ctx_destroy(ref);
    }
    if (bell) {
        ssm_ctx *cu = cuda_ctx(), *ref = ref_ctx();
        cases_run(CASE_CUDA_DTYPES, CASE_BELL); /* rows with B outside 16/32/64 are declined (skipped) */
        if (shard_take()) suite_cuda_bell(cu, ref);
        if (shard_take()) suite_cuda_bell_topology(cu, ref);
        ssm_ctx_destroy(cu);
        ssm_ctx_destroy(ref);
    }
    if (proj) { /* projection and output chains (by default the sm_90a wgmma kernel 3 where it applies);
                   proj again with each FUSED forward kernel forced: 1 cuBLAS + pass, 2 mma.sync tile, 3 wgmma */
        cases_run(CASE_CUDA_DTYPES, CASE_PROJ);
        cases_run(CASE_CUDA_DTYPES, CASE_OUTCHAIN);
        cc.proj_kernel = 1;
        cases_label = "cublas";
        cases_run(CASE_CUDA_DTYPES, CASE_PROJ);
        cc.proj_kernel = 2;
        cases_label = "tile";
        cases_run(CASE_CUDA_DTYPES, CASE_PROJ);
        cc.proj_kernel = 3;
        cases_label = "wgmma";
        cases_run(CASE_CUDA_DTYPES, CASE_PROJ);
        cases_label = NULL;
        cc.proj_kernel = 0;
    }
    if (delta) cases_run(CASE_CUDA_DTYPES, CASE_DELTA);
    if (test_skipped) printf("%d skipped (the backend declined the op)\n", test_skipped);
    printf("%d passed, %d failed\n", test_passed, test_failed);
    return test_failed ? 1 : 0;
}
