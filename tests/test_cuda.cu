/* CUDA backend tests: every linrec method, the decay scan and the block-ELL layer, forward and backward, in f32,
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

static ssm_ctx *cuda_ctx(void) {
    ssm_ctx *ctx = NULL;
    ssm_ctx_config cfg = ssm_ctx_config_init();
    ssm_cuda_config cc = ssm_cuda_config_init();
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

/* ---- block-ELL layer ---- */
/* A [rows, cols] device matrix with row stride rs and column stride cs (poisoned outside). */
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
};

static void bell_case_run(ssm_ctx *cu, ssm_ctx *ref, const bell_case *c) {
    char name[200];
    const int64_t N = c->N, R = c->R, C = c->C, K = c->K, B = c->B;
    int64_t sv[4] = {R, K, B, B}, sci[2] = {R, K}, sto = C + 1, sts = R * K, sb = R * B;
    int64_t sx[2] = {N, C * B}, sy[2] = {N, R * B};
    snprintf(name, sizeof name, "cuda bell %s N%lld R%lld C%lld K%lld B%lld layout%d bias%d", ssm_dtype_name(c->dt),
             (long long)N, (long long)R, (long long)C, (long long)K, (long long)B, c->layout, c->bias);
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
    dbuf dv = db_random(c->dt, 4, sv, LAYOUT_CONTIGUOUS, 0.25, v);
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
    CHECK(e < tol_of(c->dt), "y rel err %.3g", e);
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
        CHECK(e1 < tol_of(c->dt), "dx rel err %.3g", e1);
        CHECK(e2 < tol_of(c->dt), "dvalues rel err %.3g", e2);
        CHECK(e3 < tol_of(c->dt), "dbias rel err %.3g", e3);
        CHECK(db_outside_untouched(&gdx), "dx written outside its view");
        /* determinism: a second run gives the same bits */
        CHECK_OK(ssm_bell_backward(cu, &dx.t, &dv.t, &dci.t, &dto.t, &dts.t, &dyb.t, &gdx.t, &gdv.t, &gdb.t), cu);
        CHECK(db_bytes(&gdx) == b1 && db_bytes(&gdv) == b2, "second backward differs in its bits");
        db_free(&gdx), db_free(&gdv), db_free(&gdb);
    }
    db_free(&dci), db_free(&dto), db_free(&dts), db_free(&dv), db_free(&db), db_free(&dx), db_free(&dyb), db_free(&dout);
    test_end();
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

int main(void) {
    int count = 0;
    /* SSM_TEST_CUDA_ONLY=decay|linrec|bell runs that CUDA suite (and the error suite) alone: the
       short runs under compute-sanitizer. Unset: the shared CPU suites first, then every CUDA
       suite; the tally below counts both. */
    const char *only = getenv("SSM_TEST_CUDA_ONLY");
    const int decay = !only || !strcmp(only, "decay"), linrec = !only || !strcmp(only, "linrec");
    const int bell = !only || !strcmp(only, "bell");
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
            ssm__cu_dk_path = 0;
            suite_cuda_decay(cu, ref);
            ssm__cu_dk_path = 2;
            suite_cuda_decay(cu, ref);
            ssm__cu_dk_path = 0;
        }
        if (linrec) suite_cuda_linrec(cu, ref);
        if (bell) suite_cuda_bell(cu, ref);
        ssm_ctx_destroy(cu);
        ssm_ctx_destroy(ref);
    }
    printf("%d passed, %d failed\n", test_passed, test_failed);
    return test_failed ? 1 : 0;
}
