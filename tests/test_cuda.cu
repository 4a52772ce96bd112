/* CUDA backend tests: every linrec method, the decay scan and the delta rule, forward and backward, in f32,
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

/* ---- delta rule (DeltaNet, Gated DeltaNet) ---- */
struct dl_case {
    ssm_dtype dt;
    ssm_delta_method method;
    int64_t B, T, H, K, V;
    int gated, use_s0, use_sT, layout, cu_dev; /* cu_dev: cu_seqlens on the device (i32), else host (i64) */
    std::vector<int64_t> lens;                 /* varlen: sequence lengths (B = 1) */
    double gmin;
};

static ssm_dtype dl_i64(void) {
    ssm_dtype d = ssm_dtype_i32();
    d.bits = 64;
    return d;
}
/* One case: the forward (o, sT) and the backward (every gradient) on CUDA against the f64 CPU
   reference on the same values; the backward twice, bitwise equal (deterministic); outputs'
   padding untouched; chunked against recurrent forward. */
static void delta_case(ssm_ctx *cu, ssm_ctx *ref, const dl_case *c) {
    char name[256];
    const int64_t N = c->lens.empty() ? c->B : (int64_t)c->lens.size(), B = c->lens.empty() ? c->B : 1;
    int64_t T = c->T;
    if (!c->lens.empty()) {
        T = 0;
        for (int64_t l : c->lens) T += l;
    }
    snprintf(name, sizeof name, "cuda delta %s %s B%lld T%lld H%lld K%lld V%lld g%d s0%d sT%d layout%d seqs%lld%s",
             ssm_dtype_name(c->dt), ssm_delta_method_name(c->method), (long long)B, (long long)T, (long long)c->H,
             (long long)c->K, (long long)c->V, c->gated, c->use_s0, c->use_sT, c->layout, (long long)c->lens.size(),
             c->cu_dev ? " cu-dev" : "");
    test_begin(name);
    int64_t sq[4] = {B, T, c->H, c->K}, sv[4] = {B, T, c->H, c->V}, sb[3] = {B, T, c->H}, ss[4] = {N, c->H, c->K, c->V};
    std::vector<double> q, k, v, beta, g, s0;
    dbuf dq_ = db_random(c->dt, 4, sq, c->layout, 1.0, q), dk_ = db_new(c->dt, 4, sq, c->layout);
    dbuf dv_ = db_random(c->dt, 4, sv, c->layout, 1.0, v), db_ = db_new(c->dt, 3, sb, c->layout);
    dbuf dg_ = db_new(c->dt, 3, sb, c->layout), ds0 = db_random(c->dt, 4, ss, c->layout, 1.0, s0);
    k.resize((size_t)(B * T * c->H * c->K)), beta.resize((size_t)(B * T * c->H)), g.resize(beta.size());
    for (size_t r = 0; r < beta.size(); ++r) { /* L2-normalised keys, beta in (0, 1), log gates <= 0 */
        double nk = 0;
        for (int64_t i = 0; i < c->K; ++i) k[r * c->K + i] = test_uniform(-1, 1), nk += k[r * c->K + i] * k[r * c->K + i];
        for (int64_t i = 0; i < c->K; ++i) k[r * c->K + i] /= sqrt(nk);
        beta[r] = test_uniform(0.05, 1.0), g[r] = test_uniform(c->gmin, 0.0);
    }
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
    ssm_tensor hq = host_f64(q, 4, sq), hk = host_f64(k, 4, sq), hv = host_f64(v, 4, sv), hb = host_f64(beta, 3, sb);
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
    ssm_tensor hrq = host_f64(rq, 4, sq), hrk = host_f64(rk, 4, sq), hrv = host_f64(rv, 4, sv), hrb = host_f64(rb, 3, sb);
    ssm_tensor hrg = host_f64(rg, 3, sb), hr0 = host_f64(r0, 4, ss);
    CHECK_OK(ssm_delta_backward(ref, &dref, &hq, &hk, &hv, &hb, c->gated ? &hg : NULL, c->use_s0 ? &hs0 : NULL, tcu_ref,
                                &hdo, c->use_sT ? &hdT : NULL, &hrq, &hrk, &hrv, &hrb, c->gated ? &hrg : NULL, &hr0), ref);
    dbuf gq = db_new(c->dt, 4, sq, c->layout), gk = db_new(c->dt, 4, sq, c->layout), gv = db_new(c->dt, 4, sv, c->layout);
    dbuf gb = db_new(c->dt, 3, sb, c->layout), gg = db_new(c->dt, 3, sb, c->layout), g0 = db_new(c->dt, 4, ss, c->layout);
    std::vector<unsigned char> first[6];
    dbuf *outs[6] = {&gq, &gk, &gv, &gb, &gg, &g0};
    for (int rep = 0; rep < 2; ++rep) {
        CHECK_OK(ssm_delta_backward(cu, &d, &dq_.t, &dk_.t, &dv_.t, &db_.t, c->gated ? &dg_.t : NULL,
                                    c->use_s0 ? &ds0.t : NULL, tcu_cu, &ddo.t, c->use_sT ? &ddT.t : NULL, &gq.t, &gk.t,
                                    &gv.t, &gb.t, c->gated ? &gg.t : NULL, &g0.t), cu);
        for (int i = 0; i < 6; ++i) {
            std::vector<unsigned char> raw = db_download(outs[i]);
            if (rep == 0) first[i] = raw;
            else CHECK(raw == first[i], "backward output %d differs between two runs", i);
        }
    }
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
static void delta_step_case(ssm_ctx *cu, ssm_ctx *ref, ssm_dtype dt, int64_t B, int64_t H, int64_t K, int64_t V, int gated) {
    char name[160];
    snprintf(name, sizeof name, "cuda delta step %s B%lld H%lld K%lld V%lld g%d", ssm_dtype_name(dt), (long long)B,
             (long long)H, (long long)K, (long long)V, gated);
    test_begin(name);
    int64_t sq[3] = {B, H, K}, sv[3] = {B, H, V}, sb[2] = {B, H}, ss[4] = {B, H, K, V};
    std::vector<double> q, k, v, beta, g, S;
    dbuf dq_ = db_random(dt, 3, sq, LAYOUT_CONTIGUOUS, 1.0, q), dk_ = db_random(dt, 3, sq, LAYOUT_CONTIGUOUS, 0.15, k);
    dbuf dv_ = db_random(dt, 3, sv, LAYOUT_CONTIGUOUS, 1.0, v), db_ = db_random(dt, 2, sb, LAYOUT_CONTIGUOUS, 0.5, beta);
    dbuf dg_ = db_random(dt, 2, sb, LAYOUT_CONTIGUOUS, 0.5, g), dS = db_random(dt, 4, ss, LAYOUT_PADDED, 1.0, S);
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
            if (c.dt.bits == 32 && c.K > 64) c.method = SSM_DELTA_RECURRENT; /* no f32 tiles that large: NOT_MINE */
            if (c.dt.bits == 32 && c.K > 64) continue;
            c.gated = k % 2, c.use_s0 = k % 3 != 1, c.use_sT = k % 4 != 2;
            c.layout = k % 5 == 3 ? LAYOUT_PADDED : LAYOUT_CONTIGUOUS, c.cu_dev = 0, c.gmin = -0.5;
            if (c.K * c.V > 64 * 64 && c.T > 100) c.T = 70;
            delta_case(cu, ref, &c);
        }
    for (int di = 0; di < 3; ++di) { /* varlen (host i64 and device i32 offsets), strong gates, recurrent */
        dl_case c;
        c.dt = dts[di], c.method = SSM_DELTA_CHUNKED, c.B = 1, c.T = 0, c.H = 2, c.K = 64, c.V = 64;
        c.gated = 1, c.use_s0 = 1, c.use_sT = 1, c.layout = LAYOUT_CONTIGUOUS, c.cu_dev = di == 1, c.gmin = -0.5;
        c.lens = {17, 100, 1, 64, 130};
        delta_case(cu, ref, &c);
        c.lens.clear(), c.B = 1, c.T = 128, c.gmin = -20; /* strong gates stay finite */
        if (di != 1) delta_case(cu, ref, &c);
        c.gmin = -0.5, c.method = SSM_DELTA_RECURRENT, c.T = 90, c.K = 32, c.V = 96, c.layout = LAYOUT_PADDED;
        delta_case(cu, ref, &c);
    }
    for (int di = 0; di < 3; ++di) {
        delta_step_case(cu, ref, dts[di], 5, 3, 128, 128, 1);
        delta_step_case(cu, ref, dts[di], 3, 2, 40, 100, 0);
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
    /* SSM_TEST_CUDA_ONLY=decay|linrec runs that CUDA suite (and the error suite) alone: the
       short runs under compute-sanitizer. Unset: the shared CPU suites first, then every CUDA
       suite; the tally below counts both. */
    const char *only = getenv("SSM_TEST_CUDA_ONLY");
    const int decay = !only || !strcmp(only, "decay"), linrec = !only || !strcmp(only, "linrec");
    const int delta = !only || !strcmp(only, "delta");
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
        if (delta) suite_cuda_delta(cu, ref);
        ssm_ctx_destroy(cu);
        ssm_ctx_destroy(ref);
    }
    printf("%d passed, %d failed\n", test_passed, test_failed);
    return test_failed ? 1 : 0;
}
