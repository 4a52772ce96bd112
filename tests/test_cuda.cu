/* CUDA backend tests: every linrec method and the decay scan, forward and backward, in f32,
   f16 and bf16, contiguous and strided device views, against the f64 CPU reference backend
   (itself checked against independent f64 oracles and finite differences by the CPU suite,
   which this binary runs first: the harness and suites are shared, linked from the tests' C files).
   Bad input (host pointers, wrong device, misaligned data, overlaps) must return its error and
   leave outputs untouched. Last line: "N passed, N failed". */
#define SSM_CUDA_IMPLEMENTATION
#include "../ssm_cuda.h"
extern "C" {
#include "test.h"
int ssm_test_cpu_main(void);
}
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <vector>

/* ---- device buffers with the layouts of tb_new, poisoned with 0xFF ---- */
struct dbuf {
    ssm_tensor t;
    void *mem;
    size_t bytes;
};
static dbuf db_new(ssm_dtype dt, int ndim, const int64_t *shape, int layout) {
    tbuf h = tb_new(SSM_F32, ndim, shape, layout); /* only for its strides */
    dbuf b;
    size_t es = dt.bits / 8;
    int64_t span = 1;
    int i;
    for (i = 0; i < ndim; ++i) span += (shape[i] > 0 ? shape[i] - 1 : 0) * h.t.strides[i];
    b.bytes = (size_t)(span + 1) * es;
    cudaMalloc(&b.mem, b.bytes);
    cudaMemset(b.mem, 0xFF, b.bytes);
    b.t = ssm_tensor_make(b.mem, dt, ssm_cuda_device(0), ndim, shape, h.t.strides);
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

/* decay_kernel: 0 = by shape, 2 = the tiled decay kernel forced (ssm_cuda_config). */
static ssm_ctx *cuda_ctx(int decay_kernel = 0) {
    ssm_ctx *ctx = NULL;
    ssm_ctx_config cfg = ssm_ctx_config_init();
    ssm_cuda_config cc = ssm_cuda_config_init();
    cc.decay_kernel = decay_kernel;
    cfg.backend = ssm_cuda_backend();
    cfg.backend_config = &cc;
    if (ssm_ctx_create(&cfg, &ctx) != SSM_OK) test_fail(__FILE__, __LINE__, "CUDA context creation failed");
    return ctx;
}
static ssm_ctx *ref_ctx(void) {
    ssm_ctx *ctx = NULL;
    ssm_ctx_config cfg = ssm_ctx_config_init();
    ssm_ctx_create(&cfg, &ctx);
    return ctx;
}
static double tol_of(ssm_dtype dt) { return dt.bits == 32 ? 2e-4 : (dt.code == SSM_DTYPE_BFLOAT ? 6e-2 : 1.5e-2); }

/* ---- dense recurrence ---- */
struct lr_case {
    ssm_dtype dt;
    ssm_linrec_method method;
    int64_t S, T, n, m, chunk;
    int layout, use_h0, use_hT, reverse;
};

static void linrec_case(ssm_ctx *cu, ssm_ctx *ref, const lr_case *c, int backward) {
    char name[200];
    int64_t sA[4] = {c->S, c->T, c->n, c->n}, sb[4] = {c->S, c->T, c->n, c->m}, s0[3] = {c->S, c->n, c->m};
    int rb = c->m == 1 && c->layout == LAYOUT_PADDED ? 3 : 4, r0 = rb - 1;
    std::vector<double> A, b, h0, dh, dhT;
    snprintf(name, sizeof name, "cuda linrec %s %s %s S%lld T%lld n%lld m%lld c%lld layout%d h0%d hT%d rev%d",
             backward ? "bwd" : "fwd", ssm_linrec_method_name(c->method), ssm_dtype_name(c->dt), (long long)c->S,
             (long long)c->T, (long long)c->n, (long long)c->m, (long long)c->chunk, c->layout, c->use_h0, c->use_hT,
             c->reverse);
    test_begin(name);
    /* stable transitions: entries in [-rho/sqrt(n), rho/sqrt(n)] */
    dbuf dA_ = db_random(c->dt, 4, sA, c->layout, 0.9 / sqrt((double)c->n), A);
    dbuf db_ = db_random(c->dt, rb, sb, c->layout, 1.0, b);
    dbuf dh0_ = db_random(c->dt, r0, s0, c->layout, 1.0, h0);
    dbuf dh_ = db_new(c->dt, rb, sb, c->layout), dhT_ = db_new(c->dt, r0, s0, c->layout);
    ssm_linrec_desc d = ssm_linrec_desc_init();
    d.method = c->method, d.chunk = c->chunk, d.reverse = c->reverse;
    std::vector<double> rh(b.size()), rT(h0.size());
    ssm_tensor tA = host_f64(A, 4, sA), tb = host_f64(b, 4, sb), t0 = host_f64(h0, 3, s0), th = host_f64(rh, 4, sb),
               tT = host_f64(rT, 3, s0);
    ssm_linrec_desc dref = ssm_linrec_desc_init();
    dref.reverse = c->reverse;
    CHECK_OK(ssm_linrec_forward(ref, &dref, &tA, &tb, c->use_h0 ? &t0 : NULL, &th, c->use_hT ? &tT : NULL), ref);
    CHECK_OK(ssm_linrec_forward(cu, &d, &dA_.t, &db_.t, c->use_h0 ? &dh0_.t : NULL, &dh_.t, c->use_hT ? &dhT_.t : NULL), cu);
    {
        std::vector<double> gh = db_get(&dh_);
        double e = rel_err(gh.data(), rh.data(), (int64_t)rh.size());
        CHECK(e < tol_of(c->dt), "h rel err %.3g", e);
        CHECK(db_outside_untouched(&dh_), "h written outside its view");
        if (c->use_hT) {
            std::vector<double> gT = db_get(&dhT_);
            double eT = rel_err(gT.data(), rT.data(), (int64_t)rT.size());
            CHECK(eT < tol_of(c->dt), "hT rel err %.3g", eT);
        }
    }
    if (backward) {
        std::vector<double> hs = db_get(&dh_), g1, g2;
        dbuf ddh = db_random(c->dt, rb, sb, c->layout, 1.0, g1), ddT = db_random(c->dt, r0, s0, c->layout, 1.0, g2);
        dbuf ddA = db_new(c->dt, 4, sA, c->layout), ddb = db_new(c->dt, rb, sb, c->layout), dd0 = db_new(c->dt, r0, s0, c->layout);
        std::vector<double> rA(A.size()), rbv(b.size()), r0v(h0.size());
        ssm_tensor thh = host_f64(hs, 4, sb), tdh = host_f64(g1, 4, sb), tdT = host_f64(g2, 3, s0);
        ssm_tensor trA = host_f64(rA, 4, sA), trb = host_f64(rbv, 4, sb), tr0 = host_f64(r0v, 3, s0);
        CHECK_OK(ssm_linrec_backward(ref, &dref, &tA, c->use_h0 ? &t0 : NULL, &thh, &tdh, c->use_hT ? &tdT : NULL, &trA, &trb,
                                     c->use_h0 ? &tr0 : NULL), ref);
        CHECK_OK(ssm_linrec_backward(cu, &d, &dA_.t, c->use_h0 ? &dh0_.t : NULL, &dh_.t, &ddh.t, c->use_hT ? &ddT.t : NULL,
                                     &ddA.t, &ddb.t, c->use_h0 ? &dd0.t : NULL), cu);
        std::vector<double> gA = db_get(&ddA), gb = db_get(&ddb);
        double eA = rel_err(gA.data(), rA.data(), (int64_t)rA.size()), eb = rel_err(gb.data(), rbv.data(), (int64_t)rbv.size());
        CHECK(eA < 2 * tol_of(c->dt), "dA rel err %.3g", eA);
        CHECK(eb < 2 * tol_of(c->dt), "db rel err %.3g", eb);
        CHECK(db_outside_untouched(&ddA) && db_outside_untouched(&ddb), "dA/db written outside the view");
        if (c->use_h0) {
            std::vector<double> g0 = db_get(&dd0);
            double e0 = rel_err(g0.data(), r0v.data(), (int64_t)r0v.size());
            CHECK(e0 < 2 * tol_of(c->dt), "dh0 rel err %.3g", e0);
        }
        { /* dA = NULL: db alone, the same values */
            dbuf ddb2 = db_new(c->dt, rb, sb, c->layout);
            CHECK_OK(ssm_linrec_backward(cu, &d, &dA_.t, c->use_h0 ? &dh0_.t : NULL, &dh_.t, &ddh.t, c->use_hT ? &ddT.t : NULL,
                                         NULL, &ddb2.t, NULL), cu);
            std::vector<double> gb2 = db_get(&ddb2);
            double e2 = rel_err(gb2.data(), gb.data(), (int64_t)gb.size());
            CHECK(e2 <= 1e-6, "db without dA differs: %.3g", e2);
            db_free(&ddb2);
        }
        db_free(&ddh), db_free(&ddT), db_free(&ddA), db_free(&ddb), db_free(&dd0);
    }
    db_free(&dA_), db_free(&db_), db_free(&dh0_), db_free(&dh_), db_free(&dhT_);
    test_end();
}

static void suite_cuda_linrec(ssm_ctx *cu, ssm_ctx *ref) {
    static const int64_t Ts[7] = {1, 2, 3, 7, 64, 100, 1000}, ns[3] = {1, 4, 32};
    const ssm_dtype dts[3] = {SSM_F32, SSM_F16, SSM_BF16};
    int mi, ti, ni, k = 0;
    for (mi = 0; mi < SSM_LINREC_METHOD_COUNT; ++mi)
        for (ti = 0; ti < 7; ++ti)
            for (ni = 0; ni < 3; ++ni, ++k) {
                lr_case c;
                c.dt = dts[k % 3];
                c.method = (ssm_linrec_method)mi;
                c.S = 1 + k % 3, c.T = Ts[ti], c.n = ns[ni], c.m = (k % 4 == 1) ? 3 : 1;
                c.chunk = mi == SSM_LINREC_CHUNKED && k % 2 ? 5 : 0;
                c.layout = k % 5 == 2 ? LAYOUT_PADDED : LAYOUT_CONTIGUOUS;
                c.use_h0 = k % 2, c.use_hT = k % 3 != 0, c.reverse = k % 4 == 3;
                if (c.T * c.n * c.n * c.S > 3000000) continue;
                linrec_case(cu, ref, &c, c.T <= 100);
                if (c.dt.bits != 32 && ti == 6) { /* long sequences in f32 too */
                    c.dt = SSM_F32;
                    linrec_case(cu, ref, &c, 0);
                }
            }
    { /* the fused chunked kernel with a partial tail, m = n, and the per-step fallback (n=128, m=128) */
        lr_case c = {SSM_F32, SSM_LINREC_CHUNKED, 2, 203, 16, 16, 16, LAYOUT_CONTIGUOUS, 1, 1, 0};
        linrec_case(cu, ref, &c, 1);
        c.reverse = 1, c.layout = LAYOUT_PADDED;
        linrec_case(cu, ref, &c, 1);
        lr_case big = {SSM_F16, SSM_LINREC_CHUNKED, 1, 40, 128, 128, 8, LAYOUT_CONTIGUOUS, 1, 1, 0};
        linrec_case(cu, ref, &big, 1);
        big.method = SSM_LINREC_AUTO, big.T = 300, big.m = 1, big.dt = SSM_BF16;
        linrec_case(cu, ref, &big, 0);
    }
    { /* the tensor-core chunked path (16-bit inputs, n = 64, m = 1): chunk lengths, partial tail
         chunks, a single chunk, h0 / hT, reverse, padded (fallback) layout, and the backward
         pass through the transposed view of A */
        static const int64_t Ts[6] = {2, 3, 17, 65, 300, 1000}, Cs[4] = {0, 16, 37, 1};
        int k = 0;
        for (int ti = 0; ti < 6; ++ti)
            for (int ci = 0; ci < 4; ++ci, ++k) {
                lr_case c = {k % 2 ? SSM_BF16 : SSM_F16, k % 5 == 4 ? SSM_LINREC_AUTO : SSM_LINREC_CHUNKED, 1 + k % 3,
                             Ts[ti], 64, 1, Cs[ci], k % 7 == 3 ? LAYOUT_PADDED : LAYOUT_CONTIGUOUS, k % 2, k % 3 != 0,
                             k % 4 >= 2};
                if (Cs[ci] == 1 && Ts[ti] > 65) continue;
                linrec_case(cu, ref, &c, Ts[ti] <= 300);
            }
    }
}

/* More than 65535 sequences (the grid's y limit): every linrec kernel family loops over the
   rest (fused recurrence kernel: seq, chunked; tiled gemm: cr; tensor-core chunked path). */
static void suite_cuda_many_sequences(ssm_ctx *cu, ssm_ctx *ref) {
    const int64_t S = 65537;
    lr_case seq = {SSM_F32, SSM_LINREC_SEQUENTIAL, S, 3, 2, 1, 0, LAYOUT_CONTIGUOUS, 1, 1, 0};
    lr_case chk = {SSM_BF16, SSM_LINREC_CHUNKED, S, 9, 2, 2, 2, LAYOUT_CONTIGUOUS, 1, 1, 1};
    lr_case cr = {SSM_F16, SSM_LINREC_CR, S, 5, 3, 1, 0, LAYOUT_PADDED, 0, 1, 0};
    lr_case tc = {SSM_F16, SSM_LINREC_CHUNKED, S, 2, 64, 1, 1, LAYOUT_CONTIGUOUS, 1, 1, 0};
    linrec_case(cu, ref, &seq, 1);
    linrec_case(cu, ref, &chk, 1);
    linrec_case(cu, ref, &cr, 1);
    linrec_case(cu, ref, &tc, 0);
}

/* ---- decay scan ---- */
struct dk_case {
    ssm_dtype dt;
    int64_t B, T, R, C;
    int per_step, layout, use_h0, use_hT;
    double strength;
};
static void decay_case(ssm_ctx *cu, ssm_ctx *ref, const dk_case *c) {
    char name[200];
    int64_t sx[4] = {c->B, c->T, c->R, c->C}, sl[3] = {c->B, c->T, c->R}, s0[3] = {c->B, c->R, c->C};
    std::vector<double> ld((size_t)(c->B * c->T * c->R)), x, h0, dout, dhT;
    int64_t b, t, r;
    snprintf(name, sizeof name, "cuda decay %s B%lld T%lld R%lld C%lld %s layout%d h0%d hT%d", ssm_dtype_name(c->dt),
             (long long)c->B, (long long)c->T, (long long)c->R, (long long)c->C, c->per_step ? "per-step" : "cumulative",
             c->layout, c->use_h0, c->use_hT);
    test_begin(name);
    for (b = 0; b < c->B; ++b)
        for (r = 0; r < c->R; ++r) {
            double run = 0;
            for (t = 0; t < c->T; ++t) {
                double a = -c->strength * test_uniform(0.0, 1.0);
                run += a;
                ld[(size_t)((b * c->T + t) * c->R + r)] = c->per_step ? a : run;
            }
        }
    dbuf dl = db_new(c->dt, 3, sl, c->layout);
    db_set(&dl, ld.data());
    dbuf dx = db_random(c->dt, 4, sx, c->layout, 1.0, x), d0 = db_random(c->dt, 3, s0, c->layout, 1.0, h0);
    dbuf dout_ = db_new(c->dt, 4, sx, c->layout), dT = db_new(c->dt, 3, s0, c->layout);
    ssm_decay_desc d = ssm_decay_desc_init();
    d.input = c->per_step ? SSM_DECAY_PER_STEP : SSM_DECAY_CUMULATIVE;
    std::vector<double> ro(x.size()), rT(h0.size());
    ssm_tensor tl = host_f64(ld, 3, sl), tx = host_f64(x, 4, sx), t0 = host_f64(h0, 3, s0), to = host_f64(ro, 4, sx),
               tT = host_f64(rT, 3, s0);
    CHECK_OK(ssm_decay_forward(ref, &d, &tl, &tx, c->use_h0 ? &t0 : NULL, &to, c->use_hT ? &tT : NULL), ref);
    CHECK_OK(ssm_decay_forward(cu, &d, &dl.t, &dx.t, c->use_h0 ? &d0.t : NULL, &dout_.t, c->use_hT ? &dT.t : NULL), cu);
    std::vector<double> go = db_get(&dout_);
    double e = rel_err(go.data(), ro.data(), (int64_t)ro.size());
    CHECK(e < tol_of(c->dt), "out rel err %.3g", e);
    CHECK(db_outside_untouched(&dout_), "out written outside its view");
    if (c->use_hT) {
        std::vector<double> gT = db_get(&dT);
        double eT = rel_err(gT.data(), rT.data(), (int64_t)rT.size());
        CHECK(eT < tol_of(c->dt), "hT rel err %.3g", eT);
    }
    /* backward from the GPU's own forward output */
    {
        std::vector<double> g1, g2;
        dbuf ddo = db_random(c->dt, 4, sx, c->layout, 1.0, g1), ddT = db_random(c->dt, 3, s0, c->layout, 1.0, g2);
        dbuf ddx = db_new(c->dt, 4, sx, c->layout), ddl = db_new(c->dt, 3, sl, c->layout), dd0 = db_new(c->dt, 3, s0, c->layout);
        std::vector<double> rx(x.size()), rl(ld.size()), r0(h0.size());
        ssm_tensor tgo = host_f64(go, 4, sx), tdo = host_f64(g1, 4, sx), tdT = host_f64(g2, 3, s0);
        ssm_tensor trx = host_f64(rx, 4, sx), trl = host_f64(rl, 3, sl), tr0 = host_f64(r0, 3, s0);
        CHECK_OK(ssm_decay_backward(ref, &d, &tl, c->use_h0 ? &t0 : NULL, &tgo, &tdo, c->use_hT ? &tdT : NULL, &trx, &trl,
                                    c->use_h0 ? &tr0 : NULL), ref);
        CHECK_OK(ssm_decay_backward(cu, &d, &dl.t, c->use_h0 ? &d0.t : NULL, &dout_.t, &ddo.t, c->use_hT ? &ddT.t : NULL,
                                    &ddx.t, &ddl.t, c->use_h0 ? &dd0.t : NULL), cu);
        std::vector<double> gx = db_get(&ddx), gl = db_get(&ddl);
        double ex = rel_err(gx.data(), rx.data(), (int64_t)rx.size()), el = rel_err(gl.data(), rl.data(), (int64_t)rl.size());
        CHECK(ex < tol_of(c->dt), "dx rel err %.3g", ex);
        CHECK(el < 4 * tol_of(c->dt), "dlog_decay rel err %.3g", el);
        if (c->use_h0) {
            std::vector<double> g0 = db_get(&dd0);
            double e0 = rel_err(g0.data(), r0.data(), (int64_t)r0.size());
            CHECK(e0 < tol_of(c->dt), "dh0 rel err %.3g", e0);
        }
        CHECK(db_outside_untouched(&ddx) && db_outside_untouched(&ddl), "dx/dlog written outside the view");
        db_free(&ddo), db_free(&ddT), db_free(&ddx), db_free(&ddl), db_free(&dd0);
    }
    db_free(&dl), db_free(&dx), db_free(&d0), db_free(&dout_), db_free(&dT);
    test_end();
}

/* More than 65535 batch entries, on each decay kernel (by shape, tiled, look-back). */
static void suite_cuda_many_batches(ssm_ctx *ref) {
    for (int kernel = 0; kernel < 3; ++kernel) {
        ssm_ctx *cu = cuda_ctx(kernel);
        dk_case many = {SSM_F32, 65537, 3, 1, 8, 1, LAYOUT_CONTIGUOUS, 1, 1, 0.5};
        decay_case(cu, ref, &many);
        many.dt = SSM_F16, many.C = 5, many.per_step = 0;
        decay_case(cu, ref, &many);
        ssm_ctx_destroy(cu);
    }
}

static void suite_cuda_decay(ssm_ctx *cu, ssm_ctx *ref) {
    static const int64_t Ts[6] = {1, 2, 7, 64, 100, 1000};
    const ssm_dtype dts[3] = {SSM_F32, SSM_F16, SSM_BF16};
    int ti, k = 0, di;
    for (di = 0; di < 3; ++di)
        for (ti = 0; ti < 6; ++ti)
            for (int ps = 0; ps < 2; ++ps, ++k) {
                dk_case c = {dts[di], 1 + k % 3, Ts[ti], (k % 2) ? 3 : 4, (k % 3 == 0) ? 8 : (k % 3 == 1 ? 16 : 5), ps,
                             k % 4 == 1 ? LAYOUT_PADDED : LAYOUT_CONTIGUOUS, k % 2, k % 3 != 2, 0.5};
                decay_case(cu, ref, &c);
            }
    { /* long and strong: stability, and many look-back chunks */
        dk_case c = {SSM_F32, 2, 20000, 3, 8, 1, LAYOUT_CONTIGUOUS, 1, 1, 3.0};
        decay_case(cu, ref, &c);
        c.per_step = 0, c.strength = 0.05;
        decay_case(cu, ref, &c);
        dk_case w = {SSM_F16, 2, 300, 64, 64, 0, LAYOUT_CONTIGUOUS, 1, 1, 0.1};
        decay_case(cu, ref, &w);
        dk_case v = {SSM_F32, 2, 300, 64, 64, 1, LAYOUT_CONTIGUOUS, 1, 1, 0.1};
        decay_case(cu, ref, &v);
        dk_case u = {SSM_BF16, 3, 1000, 5, 96, 0, LAYOUT_CONTIGUOUS, 1, 1, 0.1};
        decay_case(cu, ref, &u);
    }
}

/* ---- bad input ---- */
static void suite_cuda_errors(ssm_ctx *cu) {
    int64_t sA[4] = {1, 8, 4, 4}, sb[4] = {1, 8, 4, 1};
    test_begin("cuda errors: host pointer, wrong device, misaligned, overlap, cpu device type");
    {
        std::vector<double> va, vb;
        dbuf A = db_random(SSM_F32, 4, sA, LAYOUT_CONTIGUOUS, 0.3, va), b = db_random(SSM_F32, 4, sb, LAYOUT_CONTIGUOUS, 1, vb);
        dbuf h = db_new(SSM_F32, 4, sb, LAYOUT_CONTIGUOUS);
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
        CHECK(db_untouched(&h), "an output was written by a failing call");
        {
            ssm_decay_desc dd = ssm_decay_desc_init();
            int64_t sx[4] = {1, 8, 4, 4}, sl[3] = {1, 8, 4};
            std::vector<double> vx, vl;
            dbuf x = db_random(SSM_F16, 4, sx, LAYOUT_CONTIGUOUS, 1, vx), l = db_random(SSM_F16, 3, sl, LAYOUT_CONTIGUOUS, 0.1, vl);
            dbuf o = db_new(SSM_F16, 4, sx, LAYOUT_CONTIGUOUS);
            ssm_tensor bx = x.t;
            bx.data = hostmem;
            r = ssm_decay_forward(cu, &dd, &l.t, &bx, NULL, &o.t, NULL);
            CHECK(r == SSM_ERROR_INVALID_DEVICE, "decay host x -> %s", ssm_result_string(r));
            bx = l.t;
            bx.dtype = SSM_F32;
            r = ssm_decay_forward(cu, &dd, &bx, &x.t, NULL, &o.t, NULL);
            CHECK(r == SSM_ERROR_INVALID_DTYPE, "decay mixed dtypes -> %s", ssm_result_string(r));
            CHECK(db_untouched(&o), "decay output written by a failing call");
            db_free(&x), db_free(&l), db_free(&o);
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
        db_free(&A), db_free(&b), db_free(&h);
    }
    test_end();
    test_begin("cuda caller-owned workspace too small");
    {
        ssm_ctx *c2 = NULL;
        ssm_ctx_config cfg = ssm_ctx_config_init();
        ssm_cuda_config cc = ssm_cuda_config_init();
        void *w = NULL;
        int64_t sA2[4] = {1, 64, 8, 8}, sb2[4] = {1, 64, 8, 1};
        std::vector<double> va, vb;
        cudaMalloc(&w, 256);
        cc.workspace = w, cc.workspace_bytes = 256;
        cfg.backend = ssm_cuda_backend();
        cfg.backend_config = &cc;
        CHECK_OK(ssm_ctx_create(&cfg, &c2), c2);
        dbuf A = db_random(SSM_F32, 4, sA2, LAYOUT_CONTIGUOUS, 0.3, va), b = db_random(SSM_F32, 4, sb2, LAYOUT_CONTIGUOUS, 1, vb);
        dbuf h = db_new(SSM_F32, 4, sb2, LAYOUT_CONTIGUOUS);
        ssm_linrec_desc d = ssm_linrec_desc_init();
        d.method = SSM_LINREC_SCAN_HS;
        ssm_result r = ssm_linrec_forward(c2, &d, &A.t, &b.t, NULL, &h.t, NULL);
        CHECK(r == SSM_ERROR_WORKSPACE_TOO_SMALL, "-> %s", ssm_result_string(r));
        CHECK(db_untouched(&h), "output written");
        ssm_ctx_destroy(c2);
        cudaFree(w);
        db_free(&A), db_free(&b), db_free(&h);
    }
    test_end();
}

/* Workspace through ssm.h's generic calls: the size queries answer device bytes, a
   caller-owned device workspace of exactly that size runs the call, reserve grows device memory. */
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
            ssm_ctx *c2 = NULL;
            ssm_ctx_config cfg = ssm_ctx_config_init();
            ssm_cuda_config cc = ssm_cuda_config_init();
            int64_t sA[4] = {cs[k].S, cs[k].T, cs[k].n, cs[k].n}, sb[4] = {cs[k].S, cs[k].T, cs[k].n, cs[k].m_};
            std::vector<double> va, vb;
            d.method = cs[k].m;
            CHECK_OK(ssm_linrec_workspace_size(cu, &d, cs[k].dt, cs[k].S, cs[k].T, cs[k].n, cs[k].m_, 0, &fwd), cu);
            CHECK_OK(ssm_linrec_workspace_size(cu, &d, cs[k].dt, cs[k].S, cs[k].T, cs[k].n, cs[k].m_, 1, &bwd), cu);
            need = fwd > bwd ? fwd : bwd;
            CHECK(need > 0, "%s needs device scratch", ssm_linrec_method_name(cs[k].m));
            cudaMalloc(&w, need);
            cc.workspace = w, cc.workspace_bytes = need;
            cfg.backend = ssm_cuda_backend();
            cfg.backend_config = &cc;
            CHECK_OK(ssm_ctx_create(&cfg, &c2), c2);
            dbuf A = db_random(cs[k].dt, 4, sA, LAYOUT_CONTIGUOUS, 0.3 / sqrt((double)cs[k].n), va);
            dbuf b = db_random(cs[k].dt, 4, sb, LAYOUT_CONTIGUOUS, 1, vb);
            dbuf h = db_new(cs[k].dt, 4, sb, LAYOUT_CONTIGUOUS), g = db_new(cs[k].dt, 4, sb, LAYOUT_CONTIGUOUS);
            CHECK_OK(ssm_linrec_forward(c2, &d, &A.t, &b.t, NULL, &h.t, NULL), c2);
            CHECK_OK(ssm_linrec_backward(c2, &d, &A.t, NULL, &h.t, &b.t, NULL, NULL, &g.t, NULL), c2);
            ssm_ctx_destroy(c2);
            cudaFree(w);
            db_free(&A), db_free(&b), db_free(&h), db_free(&g);
        }
    }
    {
        ssm_decay_desc d = ssm_decay_desc_init();
        int64_t sx[4] = {1, 5000, 2, 8}, sl[3] = {1, 5000, 2};
        size_t need = 0;
        void *w = NULL;
        ssm_ctx *c2 = NULL;
        ssm_ctx_config cfg = ssm_ctx_config_init();
        ssm_cuda_config cc = ssm_cuda_config_init();
        std::vector<double> vx, vl;
        CHECK_OK(ssm_decay_workspace_size(cu, &d, SSM_F32, 1, 5000, 2, 8, 1, &need), cu);
        CHECK(need > 0, "the look-back decay scan needs device scratch");
        cudaMalloc(&w, need);
        cc.workspace = w, cc.workspace_bytes = need;
        cfg.backend = ssm_cuda_backend();
        cfg.backend_config = &cc;
        CHECK_OK(ssm_ctx_create(&cfg, &c2), c2);
        dbuf x = db_random(SSM_F32, 4, sx, LAYOUT_CONTIGUOUS, 1, vx), l = db_random(SSM_F32, 3, sl, LAYOUT_CONTIGUOUS, 0.01, vl);
        dbuf o = db_new(SSM_F32, 4, sx, LAYOUT_CONTIGUOUS), dx = db_new(SSM_F32, 4, sx, LAYOUT_CONTIGUOUS);
        dbuf dl = db_new(SSM_F32, 3, sl, LAYOUT_CONTIGUOUS);
        CHECK_OK(ssm_decay_forward(c2, &d, &l.t, &x.t, NULL, &o.t, NULL), c2);
        CHECK_OK(ssm_decay_backward(c2, &d, &l.t, NULL, &o.t, &x.t, NULL, &dx.t, &dl.t, NULL), c2);
        ssm_ctx_destroy(c2);
        cudaFree(w);
        db_free(&x), db_free(&l), db_free(&o), db_free(&dx), db_free(&dl);
    }
    test_end();
}

int main(void) {
    int count = 0;
    /* SSM_TEST_CUDA_ONLY=decay|linrec|many runs that CUDA suite (and the error and workspace
       suites) alone (many: more than 65535 sequences per call): the
       short runs under compute-sanitizer. Unset: the shared CPU suites first, then every CUDA
       suite; the tally below counts both. */
    const char *only = getenv("SSM_TEST_CUDA_ONLY");
    const int decay = !only || !strcmp(only, "decay"), linrec = !only || !strcmp(only, "linrec");
    if (!only) ssm_test_cpu_main();
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
        printf("no CUDA device: CUDA tests not run\n%d passed, %d failed\n", test_passed, test_failed);
        return test_failed ? 1 : 0;
    }
    {
        ssm_ctx *cu = cuda_ctx(), *ref = ref_ctx();
        suite_cuda_errors(cu);
        /* the decay scan's two kernels: by shape (mostly look-back at these sizes), then the
           tiled kernel forced on every case */
        if (decay) {
            ssm_ctx *tiled = cuda_ctx(2), *lookback = cuda_ctx(1);
            suite_cuda_decay(cu, ref);
            suite_cuda_decay(tiled, ref);
            suite_cuda_decay(lookback, ref);
            ssm_ctx_destroy(tiled);
            ssm_ctx_destroy(lookback);
        }
        if (linrec) suite_cuda_linrec(cu, ref);
        if (!only || !strcmp(only, "many")) {
            suite_cuda_many_sequences(cu, ref);
            suite_cuda_many_batches(ref);
        }
        suite_cuda_workspace(cu);
        ssm_ctx_destroy(cu);
        ssm_ctx_destroy(ref);
    }
    printf("%d passed, %d failed\n", test_passed, test_failed);
    return test_failed ? 1 : 0;
}
