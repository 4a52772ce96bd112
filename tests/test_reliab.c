/* Regressions of what a hostile caller found (one case per finding, in the order of the
   report): BLIS operands whose unused unit-dimension strides are negative or huge, thread
   counts, NULL and corrupt arguments, sizes whose products overflow, empty inputs, a failing
   all-reduce hook, workspace queries, undefined behaviour in views, and error codes that say
   what they mean. Views live in guard-padded, poisoned buffers: a case also fails when a
   byte outside the view's elements changes. */
#include "test.h"
#include <stdint.h>
#ifdef SSM_TEST_BLAS
#include "../ssm_blas.h"
#endif

/* ---- a view with any strides (negative included) inside a poisoned, guarded buffer ---- */
#define GV_GUARD 64
typedef struct gview {
    ssm_tensor t;
    unsigned char *mem;
    size_t bytes;
} gview;

static gview gv_new(ssm_dtype dt, int ndim, const int64_t *shape, const int64_t *strides) {
    gview v;
    int64_t lo = 0, hi = 0, es = dt.bits / 8;
    int i;
    for (i = 0; i < ndim; ++i) {
        int64_t span = shape[i] > 0 ? (shape[i] - 1) * strides[i] : 0;
        if (span < 0) lo += span;
        else hi += span;
    }
    v.bytes = (size_t)((hi - lo + 1) * es) + 2 * GV_GUARD;
    v.mem = (unsigned char *)malloc(v.bytes);
    memset(v.mem, 0xFF, v.bytes);
    v.t = ssm_tensor_make(v.mem + GV_GUARD - lo * es, dt, ssm_cpu(), ndim, shape, strides);
    return v;
}
static void gv_free(gview *v) { free(v->mem); v->mem = NULL; }
static int64_t gv_numel(const gview *v) { return ssm_tensor_numel(&v->t); }
/* Byte offset of logical element i (row-major over the view's shape). */
static int64_t gv_off(const gview *v, int64_t i) {
    int64_t off = 0;
    int d;
    for (d = v->t.ndim - 1; d >= 0; --d) {
        off += (i % v->t.shape[d]) * v->t.strides[d];
        i /= v->t.shape[d];
    }
    return off * (int64_t)(v->t.dtype.bits / 8);
}
static void gv_set(gview *v, const double *x) {
    int64_t i, n = gv_numel(v);
    for (i = 0; i < n; ++i) {
        char *p = (char *)v->t.data + gv_off(v, i);
        if (v->t.dtype.bits == 64) *(double *)p = x[i];
        else *(float *)p = (float)x[i];
    }
}
static void gv_get(const gview *v, double *x) {
    int64_t i, n = gv_numel(v);
    for (i = 0; i < n; ++i) {
        const char *p = (const char *)v->t.data + gv_off(v, i);
        x[i] = v->t.dtype.bits == 64 ? *(const double *)p : (double)*(const float *)p;
    }
}
static gview gv_random(ssm_dtype dt, int ndim, const int64_t *shape, const int64_t *strides) {
    gview v = gv_new(dt, ndim, shape, strides);
    int64_t i, n = gv_numel(&v);
    double *x = (double *)malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (i = 0; i < n; ++i) x[i] = test_uniform(-1.0, 1.0);
    gv_set(&v, x);
    free(x);
    return v;
}
/* Every byte outside the view's elements still poison. */
static int gv_outside_ok(const gview *v) {
    unsigned char *in = (unsigned char *)calloc(v->bytes, 1);
    int64_t i, n = gv_numel(v), es = v->t.dtype.bits / 8;
    size_t b;
    int ok = 1;
    for (i = 0; i < n; ++i) memset(in + ((unsigned char *)v->t.data - v->mem) + gv_off(v, i), 1, (size_t)es);
    for (b = 0; b < v->bytes; ++b)
        if (!in[b] && v->mem[b] != 0xFF) ok = 0;
    free(in);
    return ok;
}
static int gv_untouched(const gview *v) {
    size_t b;
    for (b = 0; b < v->bytes; ++b)
        if (v->mem[b] != 0xFF) return 0;
    return 1;
}
static int msg_has(ssm_ctx *ctx, const char *s) { return strstr(ssm_ctx_last_error(ctx), s) != NULL; }
static void i32_fill(gview *v, const int32_t *x) {
    int64_t i, n = gv_numel(v);
    for (i = 0; i < n; ++i) *(int32_t *)((char *)v->t.data + gv_off(v, i)) = x[i];
}

#define EXPECT_CODE(expr, code, what)                                                                        \
    do {                                                                                                     \
        ssm_result e_ = (expr);                                                                              \
        CHECK(e_ == (code), "%s: got %s (%s), expected %s", what, ssm_result_string(e_), ssm_ctx_last_error(ctx), \
              ssm_result_string(code));                                                                      \
        CHECK(e_ == SSM_OK || ssm_ctx_last_error(ctx)[0] != 0, "%s: an error without a message", what);      \
    } while (0)

#ifdef SSM_TEST_BLAS
/* ||a - b|| / max(||b||, 1): a single dot product that cancels to ~0 must not turn f32
   rounding into a failure; wrong layouts give errors of order 1. */
static double gv_relerr(const gview *a, const gview *b) {
    int64_t n = gv_numel(a), i;
    double *x = (double *)malloc(sizeof(double) * (size_t)(n ? n : 1)), *y = (double *)malloc(sizeof(double) * (size_t)(n ? n : 1));
    double num = 0.0, den = 0.0;
    gv_get(a, x);
    gv_get(b, y);
    for (i = 0; i < n; ++i) {
        if (x[i] != x[i]) num = INFINITY;
        num += (x[i] - y[i]) * (x[i] - y[i]);
        den += y[i] * y[i];
    }
    free(x);
    free(y);
    return sqrt(num) / (den > 1.0 ? sqrt(den) : 1.0);
}

static ssm_ctx *blis_ctx(int threads, int small_gemm) {
    ssm_ctx *ctx = NULL;
    ssm_ctx_config cfg = ssm_ctx_config_init();
    ssm_blas_config bc = ssm_blas_config_init();
    bc.small_gemm = small_gemm;
    cfg.backend = ssm_blas_backend();
    cfg.threads = threads;
    cfg.backend_config = &bc;
    if (ssm_ctx_create(&cfg, &ctx) != SSM_OK) test_fail(__FILE__, __LINE__, "blis ssm_ctx_create failed");
    return ctx;
}

/* 1. GEMM outputs (and operands) with one row or one column whose unused stride is negative
   or huge: BLIS must get what was checked. First the primitive on every route, then the
   reproductions through the ops. */
static void blis_unit_dim_strides(void) {
    static const int64_t odd[] = {-1, -7, 0, 100000000};
    int64_t shapes[][3] = {{1, 40, 37}, {40, 1, 37}, {1, 1, 50}, {37, 40, 1}, {1, 70, 1}, {70, 1, 1}, {33, 65, 1}};
    int si, oi, small, which;
    ssm_ctx *ref = NULL;
    ssm_ctx_config rc = ssm_ctx_config_init();
    test_begin("reliab 1: blis gemm, unit dimensions with negative / huge unused strides");
    ssm_ctx_create(&rc, &ref);
    for (small = -1; small <= 0; ++small) {
        ssm_ctx *bl = blis_ctx(1, small);
        for (si = 0; si < (int)(sizeof shapes / sizeof shapes[0]); ++si)
            for (oi = 0; oi < 4; ++oi)
                for (which = 0; which < 3; ++which) { /* which operand gets the odd stride */
                    int64_t M = shapes[si][0], N = shapes[si][1], K = shapes[si][2], sh[2], st[2];
                    gview A, B, C1, C2;
                    ssm_matrix_batch a, b, c1, c2;
                    int f64 = (oi + si) & 1;
                    ssm_dtype dt = f64 ? SSM_F64 : SSM_F32;
                    sh[0] = M, sh[1] = K, st[0] = K, st[1] = 1;
                    if (which == 0 && M == 1) st[0] = odd[oi];
                    if (which == 0 && K == 1) st[1] = odd[oi], st[0] = 1;
                    A = gv_random(dt, 2, sh, st);
                    sh[0] = K, sh[1] = N, st[0] = N, st[1] = 1;
                    if (which == 1 && K == 1) st[0] = odd[oi];
                    if (which == 1 && N == 1) st[1] = odd[oi], st[0] = 1;
                    B = gv_random(dt, 2, sh, st);
                    sh[0] = M, sh[1] = N, st[0] = N, st[1] = 1;
                    if (which == 2 && M == 1) st[0] = odd[oi] == 0 ? -3 : odd[oi];
                    if (which == 2 && N == 1) st[1] = odd[oi] == 0 ? -3 : odd[oi], st[0] = 1;
                    C1 = gv_new(dt, 2, sh, st);
                    C2 = gv_new(dt, 2, sh, st);
                    a.ptr = A.t.data, a.rs = A.t.strides[0], a.cs = A.t.strides[1], a.bs = 0;
                    b.ptr = B.t.data, b.rs = B.t.strides[0], b.cs = B.t.strides[1], b.bs = 0;
                    c1.ptr = C1.t.data, c1.rs = C1.t.strides[0], c1.cs = C1.t.strides[1], c1.bs = 0;
                    c2 = c1, c2.ptr = C2.t.data;
                    CHECK_OK(ssm_ctx_gemm(ref, dt, 1, M, N, K, 1.0, a, b, 0.0, c1), ref);
                    CHECK_OK(ssm_ctx_gemm(bl, dt, 1, M, N, K, 1.0, a, b, 0.0, c2), bl);
                    CHECK(gv_relerr(&C2, &C1) < (f64 ? 1e-12 : 1e-4), "%lldx%lldx%lld stride %lld on operand %d small %d: wrong values",
                          (long long)M, (long long)N, (long long)K, (long long)odd[oi], which, small);
                    CHECK(gv_outside_ok(&C2), "%lldx%lldx%lld stride %lld on operand %d small %d: wrote outside C",
                          (long long)M, (long long)N, (long long)K, (long long)odd[oi], which, small);
                    gv_free(&A), gv_free(&B), gv_free(&C1), gv_free(&C2);
                }
        ssm_ctx_destroy(bl);
    }
    ssm_ctx_destroy(ref);
    test_end();
}

/* Runs one op on the reference backend and on BLIS (same inputs, fresh poisoned outputs)
   and compares every output: the op is a callback over (ctx, outputs). */
typedef ssm_result (*op2_fn)(ssm_ctx *ctx, void *user, gview *out);
static void compare_backends(const char *name, op2_fn fn, void *user, gview *out_ref, gview *out_bl, int nout,
                             int small_gemm, double tol) {
    ssm_ctx *ref = NULL, *bl = blis_ctx(1, small_gemm);
    ssm_ctx_config rc = ssm_ctx_config_init();
    int i;
    ssm_ctx_create(&rc, &ref);
    CHECK_OK(fn(ref, user, out_ref), ref);
    CHECK_OK(fn(bl, user, out_bl), bl);
    for (i = 0; i < nout; ++i) {
        double e = gv_relerr(&out_bl[i], &out_ref[i]);
        CHECK(e < tol, "%s: output %d differs from the reference (rel err %.3g)", name, i, e);
        CHECK(gv_outside_ok(&out_bl[i]), "%s: output %d: BLIS wrote outside the view", name, i);
        CHECK(gv_outside_ok(&out_ref[i]), "%s: output %d: the reference wrote outside the view", name, i);
    }
    ssm_ctx_destroy(ref);
    ssm_ctx_destroy(bl);
}

typedef struct proj_case {
    ssm_proj_desc d;
    gview x, W, dy;
} proj_case;
static ssm_result proj_fwd_fn(ssm_ctx *ctx, void *u, gview *out) {
    proj_case *p = (proj_case *)u;
    return ssm_proj_forward(ctx, &p->d, &p->x.t, &p->W.t, NULL, NULL, &out[0].t, NULL);
}
static ssm_result proj_bwd_fn(ssm_ctx *ctx, void *u, gview *out) {
    proj_case *p = (proj_case *)u;
    return ssm_proj_backward(ctx, &p->d, &p->x.t, &p->W.t, NULL, NULL, NULL, &p->dy.t, &out[0].t, &out[1].t, NULL, NULL);
}

static void blis_proj_repros(void) {
    proj_case p;
    gview o1[2], o2[2];
    int64_t sh[2], st[2];
    test_begin("reliab 1: blis proj_forward UNFUSED, y [40,2] strides {2,-1}, f64");
    p.d = ssm_proj_desc_init();
    p.d.path = SSM_PROJ_UNFUSED;
    ssm_proj_desc_add(&p.d, 1, SSM_PROJ_NONE, 0, 0, 0);
    ssm_proj_desc_add(&p.d, 1, SSM_PROJ_NONE, 0, 0, 0);
    sh[0] = 40, sh[1] = 4, st[0] = 4, st[1] = 1;
    p.x = gv_random(SSM_F64, 2, sh, st);
    sh[0] = 2, st[0] = 4;
    p.W = gv_random(SSM_F64, 2, sh, st);
    sh[0] = 40, sh[1] = 2, st[0] = 2, st[1] = -1;
    o1[0] = gv_new(SSM_F64, 2, sh, st), o2[0] = gv_new(SSM_F64, 2, sh, st);
    compare_backends("proj_forward", proj_fwd_fn, &p, o1, o2, 1, -1, 1e-12);
    gv_free(&p.x), gv_free(&p.W), gv_free(&o1[0]), gv_free(&o2[0]);
    test_end();

    test_begin("reliab 1: blis proj_backward M=12 d=1 N=10, dW [10,1] strides {2,-1}, small_gemm=0");
    p.d = ssm_proj_desc_init();
    ssm_proj_desc_add(&p.d, 10, SSM_PROJ_SILU, 0, 0, 0);
    sh[0] = 12, sh[1] = 1, st[0] = 1, st[1] = 1;
    p.x = gv_random(SSM_F32, 2, sh, st);
    sh[0] = 10;
    p.W = gv_random(SSM_F32, 2, sh, st);
    sh[0] = 12, sh[1] = 10, st[0] = 10, st[1] = 1;
    p.dy = gv_random(SSM_F32, 2, sh, st);
    sh[0] = 12, sh[1] = 1, st[0] = 1, st[1] = 1;
    o1[0] = gv_new(SSM_F32, 2, sh, st), o2[0] = gv_new(SSM_F32, 2, sh, st);
    sh[0] = 10, sh[1] = 1, st[0] = 2, st[1] = -1;
    o1[1] = gv_new(SSM_F32, 2, sh, st), o2[1] = gv_new(SSM_F32, 2, sh, st);
    compare_backends("proj_backward", proj_bwd_fn, &p, o1, o2, 2, 0, 1e-4);
    gv_free(&p.x), gv_free(&p.W), gv_free(&p.dy);
    gv_free(&o1[0]), gv_free(&o2[0]), gv_free(&o1[1]), gv_free(&o2[1]);
    test_end();
}

typedef struct bell_case {
    gview x, v, ci, toff, tsl, dy;
} bell_case;
static ssm_result bell_bwd_fn(ssm_ctx *ctx, void *u, gview *out) {
    bell_case *b = (bell_case *)u;
    return ssm_bell_backward(ctx, &b->x.t, &b->v.t, &b->ci.t, &b->toff.t, &b->tsl.t, &b->dy.t, &out[0].t, NULL, NULL);
}

static void blis_bell_repro(void) {
    bell_case b;
    gview o1, o2;
    int64_t sh[4], st[4];
    int32_t zero = 0, offs[2] = {0, 1};
    test_begin("reliab 1: blis bell_backward B=128 N=129, dx a reversed-row view {-1, 129}");
    sh[0] = 129, sh[1] = 128, st[0] = 128, st[1] = 1;
    b.x = gv_random(SSM_F32, 2, sh, st);
    b.dy = gv_random(SSM_F32, 2, sh, st);
    sh[0] = 1, sh[1] = 1, sh[2] = 128, sh[3] = 128, st[0] = 128 * 128, st[1] = 128 * 128, st[2] = 128, st[3] = 1;
    b.v = gv_random(SSM_F32, 4, sh, st);
    sh[0] = 1, sh[1] = 1, st[0] = 1, st[1] = 1;
    b.ci = gv_new(SSM_I32, 2, sh, st);
    i32_fill(&b.ci, &zero);
    sh[0] = 2, st[0] = 1;
    b.toff = gv_new(SSM_I32, 1, sh, st);
    i32_fill(&b.toff, offs);
    sh[0] = 1;
    b.tsl = gv_new(SSM_I32, 1, sh, st);
    i32_fill(&b.tsl, &zero);
    sh[0] = 129, sh[1] = 128, st[0] = -1, st[1] = 129;
    o1 = gv_new(SSM_F32, 2, sh, st), o2 = gv_new(SSM_F32, 2, sh, st);
    compare_backends("bell_backward", bell_bwd_fn, &b, &o1, &o2, 1, -1, 1e-4);
    gv_free(&b.x), gv_free(&b.dy), gv_free(&b.v), gv_free(&b.ci), gv_free(&b.toff), gv_free(&b.tsl);
    gv_free(&o1), gv_free(&o2);
    test_end();
}

typedef struct oc_case {
    ssm_outchain_desc d;
    gview o, g, W, dy;
} oc_case;
static ssm_result oc_fwd_fn(ssm_ctx *ctx, void *u, gview *out) {
    oc_case *c = (oc_case *)u;
    return ssm_outchain_forward(ctx, &c->d, &c->o.t, &c->g.t, NULL, &c->W.t, &out[0].t, NULL);
}
static ssm_result oc_bwd_fn(ssm_ctx *ctx, void *u, gview *out) {
    oc_case *c = (oc_case *)u;
    return ssm_outchain_backward(ctx, &c->d, &c->o.t, &c->g.t, NULL, &c->W.t, NULL, &c->dy.t, &out[0].t, &out[1].t, NULL,
                                 &out[2].t);
}

/* 1 (through the output chain) and 2: M = 1 with a transposed W_o and dy strides {1e8, 1}. */
static void blis_outchain_repros(void) {
    oc_case c;
    gview o1[3], o2[3];
    int64_t sh[2], st[2];
    int i;
    test_begin("reliab 1: blis outchain_forward M=1, y strides {-1, 1}");
    c.d = ssm_outchain_desc_init();
    sh[0] = 1, sh[1] = 77, st[0] = 77, st[1] = 1;
    c.o = gv_random(SSM_F32, 2, sh, st);
    c.g = gv_random(SSM_F32, 2, sh, st);
    sh[0] = 40, sh[1] = 77, st[0] = 1, st[1] = 40; /* W_o [40, 77] transposed */
    c.W = gv_random(SSM_F32, 2, sh, st);
    sh[0] = 1, sh[1] = 40, st[0] = -1, st[1] = 1;
    o1[0] = gv_new(SSM_F32, 2, sh, st), o2[0] = gv_new(SSM_F32, 2, sh, st);
    compare_backends("outchain_forward", oc_fwd_fn, &c, o1, o2, 1, 0, 1e-4);
    gv_free(&c.W), gv_free(&o1[0]), gv_free(&o2[0]);
    test_end();

    test_begin("reliab 2: blis outchain_backward M=1 D=77 d_out=2, W_o {1,2}, dy strides {1e8, 1}");
    sh[0] = 2, sh[1] = 77, st[0] = 1, st[1] = 2;
    c.W = gv_random(SSM_F32, 2, sh, st);
    sh[0] = 1, sh[1] = 2, st[0] = 100000000, st[1] = 1;
    c.dy = gv_random(SSM_F32, 2, sh, st);
    sh[0] = 1, sh[1] = 77, st[0] = 77, st[1] = 1;
    for (i = 0; i < 2; ++i) o1[i] = gv_new(SSM_F32, 2, sh, st), o2[i] = gv_new(SSM_F32, 2, sh, st);
    sh[0] = 2, st[0] = 77;
    o1[2] = gv_new(SSM_F32, 2, sh, st), o2[2] = gv_new(SSM_F32, 2, sh, st);
    compare_backends("outchain_backward", oc_bwd_fn, &c, o1, o2, 3, 0, 1e-4);
    compare_backends("outchain_backward (small kernels)", oc_bwd_fn, &c, o1, o2, 3, -1, 1e-4);
    for (i = 0; i < 3; ++i) gv_free(&o1[i]), gv_free(&o2[i]);
    gv_free(&c.o), gv_free(&c.g), gv_free(&c.W), gv_free(&c.dy);
    test_end();
}

/* 3. Thread counts past SSM_BLAS_MAX_THREADS fail at create, with a message. */
static void blis_threads(void) {
    ssm_ctx *ctx = NULL;
    ssm_ctx_config cfg = ssm_ctx_config_init();
    ssm_blas_config bc = ssm_blas_config_init();
    char msg[256];
    ssm_result r;
    test_begin("reliab 3: blis threads = 100000 is refused at create");
    cfg.backend = ssm_blas_backend();
    cfg.threads = 100000;
    r = ssm_ctx_create_ex(&cfg, &ctx, msg, sizeof msg);
    CHECK(r == SSM_ERROR_INVALID_VALUE && !ctx, "threads 100000 -> %s", ssm_result_string(r));
    CHECK(strstr(msg, "100000") != NULL, "message names the count: \"%s\"", msg);
    cfg.threads = 0;
    bc.threads = SSM_BLAS_MAX_THREADS + 1;
    cfg.backend_config = &bc;
    r = ssm_ctx_create_ex(&cfg, &ctx, msg, sizeof msg);
    CHECK(r == SSM_ERROR_INVALID_VALUE && !ctx, "ssm_blas_config.threads past the limit -> %s", ssm_result_string(r));
    test_end();
}
#endif /* SSM_TEST_BLAS */

/* 4-6: block-ELL arguments. */
static void bell_cases(void) {
    ssm_ctx *ctx = test_ctx();
    int64_t sh[4], st[4];
    gview x, v, ci, toff, tsl, dy, dv, y;
    int32_t cols[2] = {0, 0}, offs[3] = {0, 3, 2}, slots[2] = {0, 1};
    double *vals;
    int64_t i, n;
    test_begin("reliab 4: bell_forward with NULL values");
    sh[0] = 3, sh[1] = 4, st[0] = 4, st[1] = 1;
    x = gv_random(SSM_F32, 2, sh, st);
    y = gv_new(SSM_F32, 2, sh, st);
    sh[0] = 1, sh[1] = 1, st[0] = 1, st[1] = 1;
    ci = gv_new(SSM_I32, 2, sh, st);
    EXPECT_CODE(ssm_bell_forward(ctx, &x.t, NULL, &ci.t, NULL, &y.t), SSM_ERROR_NULL_ARGUMENT, "values NULL");
    CHECK(gv_untouched(&y), "y written");
    gv_free(&x), gv_free(&y), gv_free(&ci);
    test_end();

    test_begin("reliab 5: bell_backward with a corrupt transposed index (offsets past R*K)");
    sh[0] = 2, sh[1] = 1, sh[2] = 2, sh[3] = 2, st[0] = 4, st[1] = 4, st[2] = 2, st[3] = 1; /* R=2 K=1 B=2 */
    v = gv_random(SSM_F32, 4, sh, st);
    dv = gv_new(SSM_F32, 4, sh, st);
    sh[0] = 2, sh[1] = 1, st[0] = 1, st[1] = 1;
    ci = gv_new(SSM_I32, 2, sh, st);
    i32_fill(&ci, cols);
    sh[0] = 3, st[0] = 1;
    toff = gv_new(SSM_I32, 1, sh, st);
    i32_fill(&toff, offs);
    /* exactly 2 slots in their own allocation: a read of slot 2 is out of bounds (ASan) */
    sh[0] = 2;
    tsl = gv_new(SSM_I32, 1, sh, st);
    i32_fill(&tsl, slots);
    sh[0] = 5, sh[1] = 4, st[0] = 4, st[1] = 1; /* C=2 B=2: x [5, 4]; R*B = 4: dy [5, 4] */
    x = gv_random(SSM_F32, 2, sh, st);
    dy = gv_random(SSM_F32, 2, sh, st);
    y = gv_new(SSM_F32, 2, sh, st); /* dx */
    EXPECT_CODE(ssm_bell_backward(ctx, &x.t, &v.t, &ci.t, &toff.t, &tsl.t, &dy.t, &y.t, &dv.t, NULL),
                SSM_ERROR_INVALID_VALUE, "t_offsets {0,3,2}");
    CHECK(gv_untouched(&y) && gv_untouched(&dv), "an output was written");
    gv_free(&x), gv_free(&dy), gv_free(&y), gv_free(&toff), gv_free(&tsl);
    test_end();

    test_begin("reliab 6: bell_backward with N = 0 zeroes every tile of dvalues");
    sh[0] = 0, sh[1] = 4, st[0] = 4, st[1] = 1;
    x = gv_new(SSM_F32, 2, sh, st);
    dy = gv_new(SSM_F32, 2, sh, st);
    x.t.data = dy.t.data = NULL; /* empty tensors may have NULL data */
    cols[0] = 1, cols[1] = 0;
    i32_fill(&ci, cols);
    CHECK_OK(ssm_bell_backward(ctx, &x.t, &v.t, &ci.t, NULL, NULL, &dy.t, NULL, &dv.t, NULL), ctx);
    n = gv_numel(&dv);
    vals = (double *)malloc(sizeof(double) * (size_t)n);
    gv_get(&dv, vals);
    for (i = 0; i < n; ++i) CHECK(vals[i] == 0.0, "dvalues[%lld] = %g, expected 0", (long long)i, vals[i]);
    CHECK(gv_outside_ok(&dv), "wrote outside dvalues");
    free(vals);
    gv_free(&x), gv_free(&dy), gv_free(&v), gv_free(&dv), gv_free(&ci);
    test_end();
    ssm_ctx_destroy(ctx);
}

/* 7. Sizes whose products overflow: refused, nothing written. */
static void overflow_cases(void) {
    ssm_ctx *ctx = test_ctx();
    ssm_bell_topology_config tc = ssm_bell_topology_config_init();
    ssm_bell_topology *topo = NULL;
    ssm_proj_desc pd = ssm_proj_desc_init();
    ssm_outchain_desc od = ssm_outchain_desc_init();
    ssm_decay_desc dd = ssm_decay_desc_init();
    int64_t sh[8], st[8], huge = (int64_t)1 << 61;
    ssm_tensor x, W, dy, dx, dW, o, g, Wo, dyo, d_o, dg, dWo, ld, out, ci;
    uint64_t sum = 0;
    float one = 1.0f;
    int i;

    test_begin("reliab 7: bell_topology_create with C = 2^61");
    EXPECT_CODE(ssm_bell_topology_create(ctx, &tc, 1, huge, 1, &topo), SSM_ERROR_INVALID_SHAPE, "C = 2^61");
    CHECK(topo == NULL, "a topology came back");
    EXPECT_CODE(ssm_bell_topology_create(ctx, &tc, huge, 4, 2, &topo), SSM_ERROR_INVALID_SHAPE, "R = 2^61");
    test_end();

    test_begin("reliab 7: proj_backward with a segment width 2^61 + 8 and M = 0");
    ssm_proj_desc_add(&pd, huge + 8, SSM_PROJ_NONE, 0, 0, 0);
    sh[0] = 0, sh[1] = 0;
    x = ssm_tensor_make(NULL, SSM_F32, ssm_cpu(), 2, sh, NULL);
    dx = x;
    sh[0] = huge + 8;
    W = ssm_tensor_make(NULL, SSM_F32, ssm_cpu(), 2, sh, NULL);
    dW = W;
    sh[0] = 0, sh[1] = huge + 8;
    dy = ssm_tensor_make(NULL, SSM_F32, ssm_cpu(), 2, sh, NULL);
    EXPECT_CODE(ssm_proj_backward(ctx, &pd, &x, &W, NULL, NULL, NULL, &dy, &dx, &dW, NULL, NULL), SSM_ERROR_INVALID_SHAPE,
                "width 2^61 + 8");
    /* two widths that sum past int64 */
    pd = ssm_proj_desc_init();
    ssm_proj_desc_add(&pd, INT64_MAX - 1, SSM_PROJ_NONE, 0, 0, 0);
    ssm_proj_desc_add(&pd, 4, SSM_PROJ_NONE, 0, 0, 0);
    CHECK(ssm_proj_desc_width(&pd) == -1, "desc width of an overflowing sum: %lld", (long long)ssm_proj_desc_width(&pd));
    EXPECT_CODE(ssm_proj_forward(ctx, &pd, &x, &W, NULL, NULL, &dy, NULL), SSM_ERROR_INVALID_SHAPE, "widths overflow");
    test_end();

    test_begin("reliab 7: outchain_backward with M = 0, D = 2^61 + 1");
    sh[0] = 0, sh[1] = huge + 1;
    o = ssm_tensor_make(NULL, SSM_F32, ssm_cpu(), 2, sh, NULL);
    g = o, d_o = o, dg = o;
    sh[0] = 0;
    Wo = ssm_tensor_make(NULL, SSM_F32, ssm_cpu(), 2, sh, NULL);
    dWo = Wo;
    sh[0] = 0, sh[1] = 0;
    dyo = ssm_tensor_make(NULL, SSM_F32, ssm_cpu(), 2, sh, NULL);
    EXPECT_CODE(ssm_outchain_backward(ctx, &od, &o, &g, NULL, &Wo, NULL, &dyo, &d_o, &dg, NULL, &dWo),
                SSM_ERROR_INVALID_SHAPE, "D = 2^61 + 1");
    test_end();

    test_begin("reliab 7: ssm_tensor_numel overflow and ndim out of range");
    sh[0] = sh[1] = (int64_t)1 << 32, sh[2] = sh[3] = 1;
    x = ssm_tensor_make(NULL, SSM_F32, ssm_cpu(), 4, sh, NULL);
    CHECK(ssm_tensor_numel(&x) == -1, "numel of [2^32, 2^32, 1, 1] = %lld", (long long)ssm_tensor_numel(&x));
    sh[2] = 0;
    x = ssm_tensor_make(NULL, SSM_F32, ssm_cpu(), 4, sh, NULL);
    CHECK(ssm_tensor_numel(&x) == 0, "numel with a 0 = %lld", (long long)ssm_tensor_numel(&x));
    x.ndim = 100;
    CHECK(ssm_tensor_numel(&x) == -1, "numel with ndim 100");
    x.ndim = -3;
    CHECK(ssm_tensor_numel(&x) == -1, "numel with ndim -3");
    test_end();

    test_begin("reliab 7: decay_forward on x [2^32, 2^32, 1, 1] with NULL data");
    sh[0] = sh[1] = (int64_t)1 << 32, sh[2] = sh[3] = 1;
    x = ssm_tensor_make(NULL, SSM_F32, ssm_cpu(), 4, sh, NULL);
    out = x;
    ld = ssm_tensor_make(NULL, SSM_F32, ssm_cpu(), 3, sh, NULL);
    {
        ssm_result r = ssm_decay_forward(ctx, &dd, &ld, &x, NULL, &out, NULL);
        CHECK(r != SSM_OK, "accepted");
        CHECK(ssm_ctx_last_error(ctx)[0] != 0, "no message");
    }
    test_end();

    test_begin("reliab 7: views whose byte range leaves the address space");
    sh[0] = huge / 2, sh[1] = 4; /* 2^62 elements count in int64; 2^64 bytes do not fit */
    st[0] = 4, st[1] = 1;
    x = ssm_tensor_make(&one, SSM_F32, ssm_cpu(), 2, sh, st);
    sh[0] = 1, sh[1] = 4;
    W = ssm_tensor_make(&one, SSM_F32, ssm_cpu(), 2, sh, NULL);
    pd = ssm_proj_desc_init();
    ssm_proj_desc_add(&pd, 1, SSM_PROJ_NONE, 0, 0, 0);
    sh[0] = huge, sh[1] = 1;
    dy = ssm_tensor_make(&one, SSM_F32, ssm_cpu(), 2, sh, NULL);
    EXPECT_CODE(ssm_proj_forward(ctx, &pd, &x, &W, NULL, NULL, &dy, NULL), SSM_ERROR_INVALID_STRIDE, "x [2^60, 4]");
    st[0] = INT64_MIN, st[1] = 1;
    sh[0] = 2, sh[1] = 4;
    x = ssm_tensor_make(&one, SSM_F32, ssm_cpu(), 2, sh, st);
    EXPECT_CODE(ssm_proj_forward(ctx, &pd, &x, &W, NULL, NULL, &dy, NULL), SSM_ERROR_INVALID_STRIDE, "stride INT64_MIN");
    test_end();

    test_begin("reliab 7: bell_checksum of col_idx [2^62, 0] returns at once");
    sh[0] = (int64_t)1 << 62, sh[1] = 0;
    ci = ssm_tensor_make(NULL, SSM_I32, ssm_cpu(), 2, sh, NULL);
    CHECK_OK(ssm_bell_checksum(ctx, &ci, &sum), ctx);
    sh[1] = 1, st[0] = 0, st[1] = 1; /* a broadcast [2^62, 1] view: valid memory, no valid index */
    ci = ssm_tensor_make(&one, SSM_I32, ssm_cpu(), 2, sh, st);
    EXPECT_CODE(ssm_bell_checksum(ctx, &ci, &sum), SSM_ERROR_INVALID_SHAPE, "col_idx [2^62, 1] broadcast");
    test_end();

    test_begin("reliab 7/12: tensors with ndim outside [0, 8] are refused by the op, with a message");
    for (i = 0; i < 8; ++i) sh[i] = 1;
    x = ssm_tensor_make(&one, SSM_F32, ssm_cpu(), 100, sh, NULL);
    CHECK(x.ndim == 100, "ssm_tensor_make kept ndim %d", (int)x.ndim);
    pd = ssm_proj_desc_init();
    ssm_proj_desc_add(&pd, 1, SSM_PROJ_NONE, 0, 0, 0);
    W = ssm_tensor_make(&one, SSM_F32, ssm_cpu(), 2, sh, NULL);
    EXPECT_CODE(ssm_proj_forward(ctx, &pd, &x, &W, NULL, NULL, &W, NULL), SSM_ERROR_INVALID_SHAPE, "ndim 100");
    CHECK(msg_has(ctx, "ndim 100"), "message: %s", ssm_ctx_last_error(ctx));
    x = ssm_tensor_make(&one, SSM_F32, ssm_cpu(), -1, sh, NULL);
    EXPECT_CODE(ssm_proj_forward(ctx, &pd, &x, &W, NULL, NULL, &W, NULL), SSM_ERROR_INVALID_SHAPE, "ndim -1");
    CHECK(!ssm_tensor_is_contiguous(&x), "a tensor with ndim -1 is not contiguous");
    test_end();
    ssm_ctx_destroy(ctx);
}

/* 8. A failing all-reduce hook. */
static int hook_calls;
static ssm_result bad_hook(void *user, double *data, int64_t count) {
    (void)user, (void)data, (void)count;
    ++hook_calls;
    return (ssm_result)42;
}
static void allreduce_case(void) {
    ssm_ctx *ctx = test_ctx();
    ssm_bell_topology_config tc = ssm_bell_topology_config_init();
    ssm_bell_topology *topo = NULL;
    int64_t sh[4], st[4];
    gview v, ci, toff, tsl;
    int32_t cols[4] = {0, 1, 1, 2}, offs[4] = {0, 1, 3, 4}, slots[4] = {0, 1, 2, 3};
    unsigned char before[64];
    test_begin("reliab 8: bell_topology_step with a failing all-reduce hook");
    hook_calls = 0;
    tc.period = 1, tc.allreduce = bad_hook;
    CHECK_OK(ssm_bell_topology_create(ctx, &tc, 2, 3, 2, &topo), ctx);
    sh[0] = 2, sh[1] = 2, sh[2] = 2, sh[3] = 2, st[0] = 8, st[1] = 4, st[2] = 2, st[3] = 1;
    v = gv_random(SSM_F32, 4, sh, st);
    sh[0] = 2, sh[1] = 2, st[0] = 2, st[1] = 1;
    ci = gv_new(SSM_I32, 2, sh, st);
    i32_fill(&ci, cols);
    sh[0] = 4, st[0] = 1;
    toff = gv_new(SSM_I32, 1, sh, st);
    i32_fill(&toff, offs);
    tsl = gv_new(SSM_I32, 1, sh, st);
    i32_fill(&tsl, slots);
    memcpy(before, v.t.data, 64);
    if (topo) {
        ssm_result r = ssm_bell_topology_step(ctx, topo, 1, &v.t, &ci.t, &toff.t, &tsl.t, NULL, 0, NULL);
        CHECK(r == SSM_ERROR_BACKEND, "hook returning 42 -> %d (%s)", (int)r, ssm_result_string(r));
        CHECK(msg_has(ctx, "42"), "message carries the hook's code: \"%s\"", ssm_ctx_last_error(ctx));
        CHECK(hook_calls == 1, "hook called %d times", hook_calls);
        CHECK(!memcmp(before, v.t.data, 64), "values changed");
    }
    ssm_bell_topology_destroy(topo);
    gv_free(&v), gv_free(&ci), gv_free(&toff), gv_free(&tsl);
    test_end();
    ssm_ctx_destroy(ctx);
}

/* 9. Workspace queries validate what they are given. */
static void workspace_queries(void) {
    ssm_ctx *ctx = test_ctx();
    ssm_proj_desc pd = ssm_proj_desc_init();
    ssm_outchain_desc od = ssm_outchain_desc_init();
    ssm_bell_topology_config tc = ssm_bell_topology_config_init();
    ssm_bell_topology *topo = NULL;
    size_t bytes = 12345;
    test_begin("reliab 9: proj / outchain / topology workspace queries validate");
    ssm_proj_desc_add(&pd, 8, SSM_PROJ_SILU, 0, 0, 4);
    EXPECT_CODE(ssm_proj_workspace_size(ctx, &pd, SSM_F32, 16, -2, 1, &bytes), SSM_ERROR_INVALID_SHAPE, "proj d = -2");
    EXPECT_CODE(ssm_proj_workspace_size(ctx, &pd, SSM_F32, -1, 4, 0, &bytes), SSM_ERROR_INVALID_SHAPE, "proj M = -1");
    EXPECT_CODE(ssm_proj_workspace_size(ctx, &pd, SSM_BF16, 16, 4, 0, &bytes), SSM_ERROR_INVALID_DTYPE, "proj bf16 on CPU");
    EXPECT_CODE(ssm_proj_workspace_size(ctx, &pd, SSM_F32, 16, 4, 2, &bytes), SSM_ERROR_INVALID_VALUE, "proj backward = 2");
    pd.seg[0].l2_head = 3;
    EXPECT_CODE(ssm_proj_workspace_size(ctx, &pd, SSM_F32, 16, 4, 0, &bytes), SSM_ERROR_INVALID_SHAPE, "proj head 3 of 8");
    pd.seg[0].l2_head = 4, pd.path = (ssm_proj_path)6;
    EXPECT_CODE(ssm_proj_workspace_size(ctx, &pd, SSM_F32, 16, 4, 0, &bytes), SSM_ERROR_INVALID_VALUE, "proj path 6");
    pd.path = SSM_PROJ_FUSED;
    pd.seg[0].width = (int64_t)1 << 61;
    EXPECT_CODE(ssm_proj_workspace_size(ctx, &pd, SSM_F64, (int64_t)1 << 20, 4, 1, &bytes), SSM_ERROR_INVALID_SHAPE,
                "proj bytes overflow");
    pd.seg[0].width = 8;
    CHECK(bytes == 12345, "a failed query wrote bytes");
    CHECK_OK(ssm_proj_workspace_size(ctx, &pd, SSM_F32, 16, 4, 1, &bytes), ctx);
    od.head_dim = 5;
    EXPECT_CODE(ssm_outchain_workspace_size(ctx, &od, SSM_F32, 4, 12, 3, 0, &bytes), SSM_ERROR_INVALID_SHAPE,
                "outchain head_dim 5 of 12");
    od.head_dim = 4;
    EXPECT_CODE(ssm_outchain_workspace_size(ctx, &od, SSM_F32, 4, 12, -3, 0, &bytes), SSM_ERROR_INVALID_SHAPE,
                "outchain d_out -3");
    EXPECT_CODE(ssm_outchain_workspace_size(ctx, &od, SSM_BF16, 4, 12, 3, 0, &bytes), SSM_ERROR_INVALID_DTYPE,
                "outchain bf16 on CPU");
    od.gate = (ssm_outchain_gate)6;
    EXPECT_CODE(ssm_outchain_workspace_size(ctx, &od, SSM_F32, 4, 12, 3, 0, &bytes), SSM_ERROR_INVALID_VALUE,
                "outchain gate 6");
    od.gate = SSM_OUTCHAIN_SILU;
    CHECK_OK(ssm_outchain_workspace_size(ctx, &od, SSM_F32, 4, 12, 3, 1, &bytes), ctx);
    CHECK_OK(ssm_bell_topology_create(ctx, &tc, 2, 4, 2, &topo), ctx);
    CHECK(ssm_bell_topology_workspace_size(topo, 4, SSM_BF16, &bytes) == SSM_ERROR_INVALID_DTYPE, "topology bf16");
    CHECK(ssm_bell_topology_workspace_size(topo, 0, SSM_F32, &bytes) == SSM_ERROR_INVALID_SHAPE, "topology B = 0");
    CHECK(ssm_bell_topology_workspace_size(topo, (int64_t)1 << 40, SSM_F32, &bytes) == SSM_ERROR_INVALID_SHAPE,
          "topology B = 2^40");
    ssm_bell_topology_destroy(topo);
    test_end();
    ssm_ctx_destroy(ctx);
}

/* 10 and 12: views, DLPack, dtype names, contexts and what each code means. */
static ssm_result null_init(ssm_ctx *ctx, const ssm_ctx_config *cfg, void **state) {
    (void)cfg, (void)state;
    return ssm_ctx_error(ctx, SSM_ERROR_BACKEND, "test backend: device 7 is not there");
}
static void views_and_codes(void) {
    ssm_ctx *ctx = test_ctx(), *c2 = NULL;
    ssm_ctx_config cfg = ssm_ctx_config_init();
    ssm_backend be;
    ssm_dlpack_tensor dl;
    ssm_tensor t, W, y;
    ssm_proj_desc pd = ssm_proj_desc_init();
    int64_t sh[2] = {3, 4}, st[2];
    double buf[64];
    char msg[256];
    ssm_result r;
    test_begin("reliab 10: misaligned CPU data is SSM_ERROR_MISALIGNED");
    ssm_proj_desc_add(&pd, 2, SSM_PROJ_NONE, 0, 0, 0);
    t = ssm_tensor_make((char *)buf + 2, SSM_F32, ssm_cpu(), 2, sh, NULL);
    sh[0] = 2;
    W = ssm_tensor_make(buf + 10, SSM_F32, ssm_cpu(), 2, sh, NULL);
    sh[0] = 3, sh[1] = 2;
    y = ssm_tensor_make(buf + 20, SSM_F32, ssm_cpu(), 2, sh, NULL);
    EXPECT_CODE(ssm_proj_forward(ctx, &pd, &t, &W, NULL, NULL, &y, NULL), SSM_ERROR_MISALIGNED, "x 2 bytes off");
    test_end();

    test_begin("reliab 10: DLPack byte_offset not a multiple of the element size");
    memset(&dl, 0, sizeof dl);
    sh[0] = 3, sh[1] = 4;
    dl.data = buf, dl.device = ssm_cpu(), dl.ndim = 2, dl.dtype = SSM_F32, dl.shape = sh, dl.byte_offset = 6;
    CHECK(ssm_tensor_from_dlpack(&dl, &t) == SSM_ERROR_MISALIGNED, "byte_offset 6 for f32");
    dl.byte_offset = 8;
    CHECK(ssm_tensor_from_dlpack(&dl, &t) == SSM_OK && t.data == (char *)buf + 8, "byte_offset 8");
    dl.dtype.bits = 12;
    CHECK(ssm_tensor_from_dlpack(&dl, &t) == SSM_ERROR_INVALID_DTYPE, "12-bit elements");
    test_end();

    test_begin("reliab 10: an unknown dtype's message prints its code, bits and lanes");
    sh[0] = 3, sh[1] = 4;
    t = ssm_tensor_make(buf, SSM_F32, ssm_cpu(), 2, sh, NULL);
    t.dtype.code = 7, t.dtype.bits = 24, t.dtype.lanes = 3;
    EXPECT_CODE(ssm_proj_forward(ctx, &pd, &t, &W, NULL, NULL, &y, NULL), SSM_ERROR_INVALID_DTYPE, "dtype 7/24/3");
    CHECK(msg_has(ctx, "code=7") && msg_has(ctx, "bits=24") && msg_has(ctx, "lanes=3"), "message: %s",
          ssm_ctx_last_error(ctx));
    test_end();

    test_begin("reliab 10/12: ssm_ctx_create refuses a backend without gemm, and says why");
    memset(&be, 0, sizeof be);
    be.name = "no-gemm", be.device_type = SSM_DEVICE_CPU;
    cfg.backend = &be;
    r = ssm_ctx_create_ex(&cfg, &c2, msg, sizeof msg);
    CHECK(r == SSM_ERROR_INVALID_VALUE && c2 == NULL, "backend without gemm -> %s", ssm_result_string(r));
    CHECK(strstr(msg, "no-gemm") != NULL && strstr(msg, "gemm") != NULL, "message: \"%s\"", msg);
    CHECK(ssm_ctx_create(&cfg, &c2) == SSM_ERROR_INVALID_VALUE && c2 == NULL, "plain create");
    be.gemm = ssm_reference_backend()->gemm, be.init = null_init;
    r = ssm_ctx_create_ex(&cfg, &c2, msg, sizeof msg);
    CHECK(r == SSM_ERROR_BACKEND && c2 == NULL, "failing init -> %s", ssm_result_string(r));
    CHECK(strstr(msg, "device 7") != NULL, "the init's message comes back: \"%s\"", msg);
    cfg = ssm_ctx_config_init();
    cfg.threads = -2;
    r = ssm_ctx_create_ex(&cfg, &c2, msg, sizeof msg);
    CHECK(r == SSM_ERROR_INVALID_VALUE && strstr(msg, "threads") != NULL, "threads -2: %s \"%s\"", ssm_result_string(r), msg);
    cfg.threads = 0;
    r = ssm_ctx_create_ex(&cfg, &c2, msg, sizeof msg);
    CHECK(r == SSM_OK && c2 && msg[0] == 0, "a good create leaves the message empty");
    ssm_ctx_destroy(c2);
    CHECK(ssm_ctx_create_ex(&cfg, NULL, msg, sizeof msg) == SSM_ERROR_NULL_ARGUMENT && msg[0], "NULL out");
    test_end();

    test_begin("reliab 12: self-overlap, aliasing and misalignment have their own codes");
    sh[0] = 3, sh[1] = 4;
    t = ssm_tensor_make(buf, SSM_F32, ssm_cpu(), 2, sh, NULL);
    sh[0] = 3, sh[1] = 2, st[0] = 1, st[1] = 1; /* (0,1) and (1,0) are one element */
    y = ssm_tensor_make(buf + 20, SSM_F32, ssm_cpu(), 2, sh, st);
    EXPECT_CODE(ssm_proj_forward(ctx, &pd, &t, &W, NULL, NULL, &y, NULL), SSM_ERROR_INVALID_STRIDE, "y overlaps itself");
    y = ssm_tensor_make(buf + 9, SSM_F32, ssm_cpu(), 2, sh, NULL); /* overlaps W */
    EXPECT_CODE(ssm_proj_forward(ctx, &pd, &t, &W, NULL, NULL, &y, NULL), SSM_ERROR_ALIASING, "y overlaps W");
    y = ssm_tensor_make((char *)(buf + 20) + 1, SSM_F32, ssm_cpu(), 2, sh, NULL);
    EXPECT_CODE(ssm_proj_forward(ctx, &pd, &t, &W, NULL, NULL, &y, NULL), SSM_ERROR_MISALIGNED, "y misaligned");
    CHECK(strcmp(ssm_result_string(SSM_ERROR_MISALIGNED), "misaligned data") == 0, "result string");
    test_end();
    ssm_ctx_destroy(ctx);
}

void suite_reliab(void) {
    bell_cases();
    overflow_cases();
    allreduce_case();
    workspace_queries();
    views_and_codes();
#ifdef SSM_TEST_BLAS
    if (test_backend == ssm_blas_backend()) {
        blis_unit_dim_strides();
        blis_proj_repros();
        blis_bell_repro();
        blis_outchain_repros();
        blis_threads();
    }
#endif
}
