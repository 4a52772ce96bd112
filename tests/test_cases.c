/* The op case table and its runners (see tests/cases.h): every op direction on every
   backend in the build against independent f64 oracles (plain loops over contiguous
   arrays, written without ssm.h), guard-poisoned outputs, gradients against the oracle's
   adjoint and finite differences. */
#include "cases.h"
#include <stdarg.h>

int cases_gpu;
const char *cases_label;
int cases_variant = -1;
int cases_shard, cases_shards;
const char *cases_exclude;
const char *cases_match;

/* ---- shared helpers ---- */
static double *vec(int64_t n) { return (double *)calloc((size_t)(n > 0 ? n : 1), sizeof(double)); }

static ssm_dtype dtype_of(unsigned bit) {
    return bit == CASE_F64 ? SSM_F64 : bit == CASE_F32 ? SSM_F32 : bit == CASE_F16 ? SSM_F16 : SSM_BF16;
}

/* Inputs must come back byte for byte (and the bytes around them): snapshots taken before
   a call (a NULL-terminated list of buffers), compared by call_ok after it. */
typedef struct snaps {
    const tbuf *b[16];
    unsigned char *copy[16];
    int n;
} snaps;
static void snap_inputs(snaps *s, const tbuf *first, ...) {
    va_list ap;
    const tbuf *b = first;
    s->n = 0;
    va_start(ap, first);
    for (; b && s->n < 16; b = va_arg(ap, const tbuf *)) {
        tb_untouched(b); /* pulls the device copy into the host shadow */
        s->b[s->n] = b;
        s->copy[s->n] = (unsigned char *)malloc(b->bytes);
        memcpy(s->copy[s->n++], b->mem, b->bytes);
    }
    va_end(ap);
}

/* Ends the case as skipped when the backend declines the op; any other error fails it. */
static int call_ok(ssm_result r, ssm_ctx *ctx, const char *what, snaps *in) {
    int i;
    for (i = 0; i < in->n; ++i) {
        tb_untouched(in->b[i]);
        CHECK(!memcmp(in->copy[i], in->b[i]->mem, in->b[i]->bytes), "%s changed input %d", what, i);
        free(in->copy[i]);
    }
    if (r == SSM_ERROR_UNSUPPORTED) {
        test_skip();
        return 0;
    }
    if (r != SSM_OK) test_fail(__FILE__, __LINE__, "%s -> %s (%s)", what, ssm_result_string(r), ssm_ctx_last_error(ctx));
    return r == SSM_OK;
}

/* An output against its oracle values, and nothing written outside its view. A 16-bit
   result whose exact value is ill-conditioned may also use `allow`, the spread of the exact
   result under input perturbations at the dtype's precision (a gradient like
   exp(g)(1 - beta k.k) dS cancels as beta k.k -> 1, and the kernels' 16-bit intermediates are
   rounded at that precision; the result is then as good as its inputs); 0 elsewhere. */
static void check_out_allow(const char *what, const tbuf *b, const double *ref, double allow, double tol) {
    int64_t n = tb_numel(b), i;
    double *got = vec(n), e, den = 0;
    tb_get(b, got);
    e = rel_err(got, ref, n);
    for (i = 0; i < n; ++i) den += ref[i] * ref[i];
    den = den > 1e-300 ? sqrt(den) : 1.0; /* rel_err's rule: an exact zero makes the error absolute */
    CHECK(e <= tol + allow / den, "%s rel err %.3e > %.1e + conditioning %.3e", what, e, tol, allow / den);
    CHECK(tb_outside_untouched(b), "%s: bytes outside the view were written", what);
    free(got);
}
static void check_out(const char *what, const tbuf *b, const double *ref, double tol) {
    check_out_allow(what, b, ref, 0.0, tol);
}

/* Central differences of loss(u) w.r.t. every entry of x, against grad (f64 only). */
static void check_fd(const char *what, double (*loss)(void *), void *u, double *x, int64_t n, const double *grad) {
    double *fd = vec(n), e;
    int64_t i;
    for (i = 0; i < n; ++i) {
        double keep = x[i], lp, lm, eps = 1e-6;
        x[i] = keep + eps;
        lp = loss(u);
        x[i] = keep - eps;
        lm = loss(u);
        x[i] = keep;
        fd[i] = (lp - lm) / (2 * eps);
    }
    e = rel_err(grad, fd, n);
    CHECK(e <= 1e-6, "%s vs finite differences: %.3e", what, e);
    free(fd);
}

static double dot(const double *a, const double *b, int64_t n) {
    double s = 0;
    int64_t i;
    for (i = 0; i < n; ++i) s += a[i] * b[i];
    return s;
}

/* ==== linrec: h_t = A_t h_{t-1} + b_t ==== */
static void ref_linrec(int64_t S, int64_t T, int64_t n, int64_t m, const double *A, const double *b, const double *h0,
                       int reverse, double *h, double *hT) {
    int64_t s, k, t, i, j, c;
    for (s = 0; s < S; ++s)
        for (k = 0; k < T; ++k) {
            t = reverse ? T - 1 - k : k;
            for (i = 0; i < n; ++i)
                for (c = 0; c < m; ++c) {
                    double acc = b[((s * T + t) * n + i) * m + c];
                    for (j = 0; j < n; ++j) {
                        double prev;
                        if (k == 0) prev = h0 ? h0[(s * n + j) * m + c] : 0.0;
                        else prev = h[((s * T + (reverse ? t + 1 : t - 1)) * n + j) * m + c];
                        acc += A[((s * T + t) * n + i) * n + j] * prev;
                    }
                    h[((s * T + t) * n + i) * m + c] = acc;
                }
            if (k == T - 1 && hT) memcpy(hT + s * n * m, h + (s * T + t) * n * m, sizeof(double) * (size_t)(n * m));
        }
}

/* Adjoint of ref_linrec for the loss sum(dh .* h) + sum(dhT .* hT). */
static void ref_linrec_adjoint(int64_t S, int64_t T, int64_t n, int64_t m, const double *A, const double *h0,
                               const double *h, const double *dh, const double *dhT, int reverse, double *dA,
                               double *db, double *dh0) {
    int64_t s, k, t, i, j, c;
    double *g = vec(n * m), *gn = vec(n * m);
    for (s = 0; s < S; ++s) {
        for (i = 0; i < n * m; ++i) g[i] = dhT ? dhT[s * n * m + i] : 0.0;
        for (k = T - 1; k >= 0; --k) {
            t = reverse ? T - 1 - k : k;
            for (i = 0; i < n * m; ++i) g[i] += dh[(s * T + t) * n * m + i];
            memcpy(db + (s * T + t) * n * m, g, sizeof(double) * (size_t)(n * m));
            for (i = 0; i < n; ++i)
                for (j = 0; j < n; ++j) {
                    double acc = 0;
                    for (c = 0; c < m; ++c) {
                        double prev;
                        if (k == 0) prev = h0 ? h0[(s * n + j) * m + c] : 0.0;
                        else prev = h[((s * T + (reverse ? t + 1 : t - 1)) * n + j) * m + c];
                        acc += g[i * m + c] * prev;
                    }
                    dA[((s * T + t) * n + i) * n + j] = acc;
                }
            for (j = 0; j < n; ++j)
                for (c = 0; c < m; ++c) {
                    double acc = 0;
                    for (i = 0; i < n; ++i) acc += A[((s * T + t) * n + i) * n + j] * g[i * m + c];
                    gn[j * m + c] = acc;
                }
            memcpy(g, gn, sizeof(double) * (size_t)(n * m));
        }
        if (dh0) memcpy(dh0 + s * n * m, g, sizeof(double) * (size_t)(n * m));
    }
    free(g);
    free(gn);
}

/* Transitions with spectral norm about rho (power iteration on G^T G). */
static void random_transitions(int64_t count, int64_t n, double rho, double *A) {
    int64_t k, i, j, it;
    double *v = vec(n), *w = vec(n);
    for (k = 0; k < count; ++k) {
        double *G = A + k * n * n, norm = 0;
        for (i = 0; i < n * n; ++i) G[i] = test_normal();
        for (i = 0; i < n; ++i) v[i] = 1.0;
        for (it = 0; it < 30; ++it) {
            double s = 0;
            for (i = 0; i < n; ++i) { w[i] = 0; for (j = 0; j < n; ++j) w[i] += G[i * n + j] * v[j]; }
            for (j = 0; j < n; ++j) { v[j] = 0; for (i = 0; i < n; ++i) v[j] += G[i * n + j] * w[i]; }
            for (j = 0; j < n; ++j) s += v[j] * v[j];
            s = sqrt(s);
            norm = sqrt(s);
            for (j = 0; j < n; ++j) v[j] /= s > 0 ? s : 1;
        }
        for (i = 0; i < n * n; ++i) G[i] *= rho / (norm > 0 ? norm : 1);
    }
    free(v);
    free(w);
}

typedef struct lr_loss {
    const op_case *c;
    double *A, *b, *h0, *W, *WT, *h, *hT;
} lr_loss;
static double lr_loss_fn(void *u) {
    lr_loss *L = (lr_loss *)u;
    const op_case *c = L->c;
    int64_t S = c->dim[0], T = c->dim[1], n = c->dim[2], m = c->dim[3];
    ref_linrec(S, T, n, m, L->A, L->b, (c->flags & CASE_H0) ? L->h0 : NULL, (c->flags & CASE_REVERSE) != 0, L->h, L->hT);
    return dot(L->W, L->h, S * T * n * m) + ((c->flags & CASE_HT) ? dot(L->WT, L->hT, S * n * m) : 0.0);
}

/* A of shape sA; CASE_SLICED: a view of [S, T, n, n + 1] without its first column, so its rows
   start at odd element offsets (every other row for even n, every row for odd n), the poisoned
   column beside each row */
static tbuf lr_new_A(ssm_dtype dt, const int64_t *sA, int layout, int sliced) {
    const int64_t wide[4] = {sA[0], sA[1], sA[2], sA[3] + 1};
    tbuf t;
    if (!sliced) return tb_new(dt, 4, sA, layout);
    t = tb_new(dt, 4, wide, layout);
    t.base += (size_t)t.t.strides[3];
    t.t.data = (unsigned char *)t.t.data + t.t.strides[3] * (int64_t)(dt.bits / 8);
    t.t.shape[3] = sA[3];
    return t;
}

static void run_linrec(const op_case *c, ssm_dtype dt) {
    const int64_t S = c->dim[0], T = c->dim[1], n = c->dim[2], m = c->dim[3];
    const int64_t sA[4] = {S, T, n, n}, sb[4] = {S, T, n, m}, s0[3] = {S, n, m};
    const int64_t nA = S * T * n * n, nb = S * T * n * m, n0 = S * n * m;
    const int rank = m == 1 && (c->flags & CASE_RANK3) ? 3 : 4, use_h0 = (c->flags & CASE_H0) != 0,
              use_hT = (c->flags & CASE_HT) != 0, rev = (c->flags & CASE_REVERSE) != 0;
    const double tol = case_tol(c, dt);
    ssm_ctx *ctx = test_ctx();
    ssm_linrec_desc d = ssm_linrec_desc_init();
    ssm_linrec_stats st;
    double *A = vec(nA), *b, *h0, *href = vec(nb), *hTref = vec(n0);
    tbuf tA = lr_new_A(dt, sA, c->layout, (c->flags & CASE_SLICED) != 0), tb, th0, th, thT;
    random_transitions(S * T, n, c->param, A);
    tb_set(&tA, A);
    tb_get(&tA, A); /* as stored */
    tb = tb_random(dt, rank, sb, c->layout, 1.0, &b);
    th0 = tb_random(dt, rank - 1, s0, c->layout, 1.0, &h0);
    th = tb_new(dt, rank, sb, c->layout);
    thT = tb_new(dt, rank - 1, s0, c->layout);
    ref_linrec(S, T, n, m, A, b, use_h0 ? h0 : NULL, rev, href, hTref);
    d.method = (ssm_linrec_method)c->variant;
    d.chunk = c->chunk;
    d.reverse = rev;
    d.stats = &st;
    memset(&st, 0, sizeof st);
    if (c->dir == CASE_FWD) {
        snaps in;
        snap_inputs(&in, &tA, &tb, &th0, (const tbuf *)NULL);
        if (call_ok(ssm_linrec_forward(ctx, &d, &tA.t, &tb.t, use_h0 ? &th0.t : NULL, &th.t, use_hT ? &thT.t : NULL), ctx,
                    "ssm_linrec_forward", &in)) {
            check_out("h", &th, href, tol);
            if (use_hT) check_out("hT", &thT, hTref, tol);
            else CHECK(tb_untouched(&thT), "hT written though not requested");
            if (!test_mem) { /* stats: host backends */
                CHECK(c->variant == SSM_LINREC_AUTO || st.method == (ssm_linrec_method)c->variant, "stats.method");
                CHECK(T == 0 || S == 0 || st.mat_state >= T - 1, "stats: %lld matrix-state products for T=%lld",
                      (long long)st.mat_state, (long long)T);
            }
        }
    } else {
        /* loss = sum(W .* h) + sum(WT .* hT); the op gets the oracle's h (rounded to dt) */
        double *W, *WT, *rA = vec(nA), *rb = vec(nb), *r0 = vec(n0);
        tbuf tW = tb_random(dt, rank, sb, c->layout, 1.0, &W), tWT = tb_random(dt, rank - 1, s0, c->layout, 1.0, &WT);
        tbuf tdA = tb_new(dt, 4, sA, c->layout), tdb = tb_new(dt, rank, sb, c->layout), tdh0 = tb_new(dt, rank - 1, s0, c->layout);
        tb_set(&th, href);
        ref_linrec_adjoint(S, T, n, m, A, use_h0 ? h0 : NULL, href, W, use_hT ? WT : NULL, rev, rA, rb, r0);
        snaps in;
        snap_inputs(&in, &tA, &th0, &th, &tW, &tWT, (const tbuf *)NULL);
        if (call_ok(ssm_linrec_backward(ctx, &d, &tA.t, use_h0 ? &th0.t : NULL, &th.t, &tW.t, use_hT ? &tWT.t : NULL,
                                        &tdA.t, &tdb.t, &tdh0.t), ctx, "ssm_linrec_backward", &in)) {
            check_out("dA", &tdA, rA, tol);
            check_out("db", &tdb, rb, tol);
            check_out("dh0", &tdh0, r0, tol);
            if ((c->flags & CASE_FD) && dt.bits == 64) {
                lr_loss L;
                double *g = vec(nA > nb ? nA : nb);
                L.c = c, L.A = A, L.b = b, L.h0 = h0, L.W = W, L.WT = WT, L.h = vec(nb), L.hT = vec(n0);
                tb_get(&tdA, g);
                check_fd("dA", lr_loss_fn, &L, A, nA, g);
                tb_get(&tdb, g);
                check_fd("db", lr_loss_fn, &L, b, nb, g);
                if (use_h0) {
                    tb_get(&tdh0, g);
                    check_fd("dh0", lr_loss_fn, &L, h0, n0, g);
                }
                free(g), free(L.h), free(L.hT);
            }
        }
        tb_free(&tW), tb_free(&tWT), tb_free(&tdA), tb_free(&tdb), tb_free(&tdh0);
        free(W), free(WT), free(rA), free(rb), free(r0);
    }
    tb_free(&tA), tb_free(&tb), tb_free(&th0), tb_free(&th), tb_free(&thT);
    free(A), free(b), free(h0), free(href), free(hTref);
    ssm_ctx_destroy(ctx);
}

/* ==== decay: h_t = exp(a_t) h_{t-1} + x_t, out_t = h_t ====
   a_t = cA_t - cA_{t-1} (cA_{-1} = 0) for cumulative log decays, a_t itself per step
   (-inf: a full reset); the sequential recurrence in f64, independent of the O(T) scan. */
static void decay_steps(const op_case *c, const double *ld, int64_t b, int64_t r, double *a) {
    const int64_t T = c->dim[1], R = c->dim[2];
    int64_t t;
    for (t = 0; t < T; ++t) {
        double v = ld[(b * T + t) * R + r];
        a[t] = (c->flags & CASE_PER_STEP) ? v : v - (t ? ld[(b * T + t - 1) * R + r] : 0.0);
    }
}
static void ref_decay(const op_case *c, const double *ld, const double *x, const double *h0, double *out, double *hT) {
    const int64_t B = c->dim[0], T = c->dim[1], R = c->dim[2], C = c->dim[3];
    int64_t b, t, r, k;
    double *a = vec(T);
    for (b = 0; b < B; ++b)
        for (r = 0; r < R; ++r) {
            decay_steps(c, ld, b, r, a);
            for (k = 0; k < C; ++k) {
                double h = h0 ? h0[(b * R + r) * C + k] : 0.0;
                for (t = 0; t < T; ++t) {
                    h = exp(a[t]) * h + x[((b * T + t) * R + r) * C + k];
                    out[((b * T + t) * R + r) * C + k] = h;
                }
                if (hT && T > 0) hT[(b * R + r) * C + k] = h;
            }
        }
    free(a);
}
/* Adjoint for loss sum(W .* out) + sum(WT .* hT): g_t = G_t + exp(a_{t+1}) g_{t+1}, dx = g,
   dh0 = exp(a_0) g_0, da_t = exp(a_t) <g_t, h_{t-1}>; cumulative: dcA_t = da_t - da_{t+1}. */
static void ref_decay_adjoint(const op_case *c, const double *ld, const double *h0, const double *out,
                              const double *W, const double *WT, double *dx, double *dld, double *dh0) {
    const int64_t B = c->dim[0], T = c->dim[1], R = c->dim[2], C = c->dim[3];
    int64_t b, t, r, k;
    double *a = vec(T), *da = vec(T);
    for (b = 0; b < B; ++b)
        for (r = 0; r < R; ++r) {
            decay_steps(c, ld, b, r, a);
            for (t = 0; t < T; ++t) da[t] = 0;
            for (k = 0; k < C; ++k) {
                double g = WT ? WT[(b * R + r) * C + k] : 0.0;
                for (t = T - 1; t >= 0; --t) {
                    const int64_t i = ((b * T + t) * R + r) * C + k;
                    double prev = t ? out[i - R * C] : (h0 ? h0[(b * R + r) * C + k] : 0.0);
                    g = (t == T - 1 ? g : exp(a[t + 1]) * g) + W[i];
                    dx[i] = g;
                    if (exp(a[t]) != 0.0) da[t] += exp(a[t]) * g * prev;
                }
                dh0[(b * R + r) * C + k] = T > 0 ? exp(a[0]) * g : (WT ? WT[(b * R + r) * C + k] : 0.0);
            }
            for (t = 0; t < T; ++t)
                dld[(b * T + t) * R + r] = (c->flags & CASE_PER_STEP) ? da[t] : da[t] - (t + 1 < T ? da[t + 1] : 0.0);
        }
    free(a), free(da);
}

/* log decays of a case: per-step values in [-strength, 0], or their running sum. */
static void random_log_decay(const op_case *c, double *ld) {
    const int64_t B = c->dim[0], T = c->dim[1], R = c->dim[2];
    int64_t b, t, r;
    for (b = 0; b < B; ++b)
        for (r = 0; r < R; ++r) {
            double run = 0;
            for (t = 0; t < T; ++t) {
                double a = -c->param * test_uniform(0.0, 1.0);
                run += a;
                ld[(b * T + t) * R + r] = (c->flags & CASE_PER_STEP) ? a : run;
            }
        }
}

typedef struct dk_loss {
    const op_case *c;
    double *ld, *x, *h0, *W, *WT, *out, *hT;
} dk_loss;
static double dk_loss_fn(void *u) {
    dk_loss *L = (dk_loss *)u;
    const op_case *c = L->c;
    const int64_t nx = c->dim[0] * c->dim[1] * c->dim[2] * c->dim[3], n0 = c->dim[0] * c->dim[2] * c->dim[3];
    ref_decay(c, L->ld, L->x, (c->flags & CASE_H0) ? L->h0 : NULL, L->out, L->hT);
    return dot(L->W, L->out, nx) + ((c->flags & CASE_HT) ? dot(L->WT, L->hT, n0) : 0.0);
}

static void run_decay(const op_case *c, ssm_dtype dt) {
    const int64_t B = c->dim[0], T = c->dim[1], R = c->dim[2], C = c->dim[3];
    const int64_t sx[4] = {B, T, R, C}, sl[3] = {B, T, R}, s0[3] = {B, R, C};
    const int64_t nx = B * T * R * C, nl = B * T * R, n0 = B * R * C;
    const int use_h0 = (c->flags & CASE_H0) != 0, use_hT = (c->flags & CASE_HT) != 0;
    const double tol = case_tol(c, dt);
    ssm_ctx *ctx = test_ctx();
    ssm_decay_desc d = ssm_decay_desc_init();
    double *ld = vec(nl), *x, *h0, *ref = vec(nx), *refT = vec(n0);
    tbuf tl = tb_new(dt, 3, sl, c->layout), tx, th0, tout, thT;
    random_log_decay(c, ld);
    tb_set(&tl, ld);
    tb_get(&tl, ld);
    tx = tb_random(dt, 4, sx, c->layout, 1.0, &x);
    th0 = tb_random(dt, 3, s0, c->layout, 1.0, &h0);
    tout = tb_new(dt, 4, sx, c->layout);
    thT = tb_new(dt, 3, s0, c->layout);
    ref_decay(c, ld, x, use_h0 ? h0 : NULL, ref, refT);
    d.input = (c->flags & CASE_PER_STEP) ? SSM_DECAY_PER_STEP : SSM_DECAY_CUMULATIVE;
    if (c->dir == CASE_FWD) {
        snaps in;
        snap_inputs(&in, &tl, &tx, &th0, (const tbuf *)NULL);
        if (call_ok(ssm_decay_forward(ctx, &d, &tl.t, &tx.t, use_h0 ? &th0.t : NULL, &tout.t, use_hT ? &thT.t : NULL), ctx,
                    "ssm_decay_forward", &in)) {
            check_out("out", &tout, ref, tol);
            if (use_hT) check_out("hT", &thT, refT, tol);
            else CHECK(tb_untouched(&thT), "hT written though not requested");
        }
    } else {
        double *W, *WT, *rx = vec(nx), *rl = vec(nl), *r0 = vec(n0);
        tbuf tW = tb_random(dt, 4, sx, c->layout, 1.0, &W), tWT = tb_random(dt, 3, s0, c->layout, 1.0, &WT);
        tbuf tdx = tb_new(dt, 4, sx, c->layout), tdl = tb_new(dt, 3, sl, c->layout), td0 = tb_new(dt, 3, s0, c->layout);
        tb_set(&tout, ref);
        tb_get(&tout, ref); /* the forward output as the op reads it */
        ref_decay_adjoint(c, ld, use_h0 ? h0 : NULL, ref, W, use_hT ? WT : NULL, rx, rl, r0);
        snaps in;
        snap_inputs(&in, &tl, &th0, &tout, &tW, &tWT, (const tbuf *)NULL);
        if (call_ok(ssm_decay_backward(ctx, &d, &tl.t, use_h0 ? &th0.t : NULL, &tout.t, &tW.t, use_hT ? &tWT.t : NULL,
                                       &tdx.t, &tdl.t, &td0.t), ctx, "ssm_decay_backward", &in)) {
            check_out("dx", &tdx, rx, tol);
            check_out("dlog_decay", &tdl, rl, 4 * tol);
            check_out("dh0", &td0, r0, tol);
            if ((c->flags & CASE_FD) && dt.bits == 64) {
                dk_loss L;
                double *g = vec(nx);
                L.c = c, L.ld = ld, L.x = x, L.h0 = h0, L.W = W, L.WT = WT, L.out = vec(nx), L.hT = vec(n0);
                tb_get(&tdx, g);
                check_fd("dx", dk_loss_fn, &L, x, nx, g);
                tb_get(&tdl, g);
                check_fd("dlog_decay", dk_loss_fn, &L, ld, nl, g);
                if (use_h0) {
                    tb_get(&td0, g);
                    check_fd("dh0", dk_loss_fn, &L, h0, n0, g);
                }
                free(g), free(L.out), free(L.hT);
            }
        }
        tb_free(&tW), tb_free(&tWT), tb_free(&tdx), tb_free(&tdl), tb_free(&td0);
        free(W), free(WT), free(rx), free(rl), free(r0);
    }
    tb_free(&tl), tb_free(&tx), tb_free(&th0), tb_free(&tout), tb_free(&thT);
    free(ld), free(x), free(h0), free(ref), free(refT);
    ssm_ctx_destroy(ctx);
}

/* ==== bell: y = x W^T + bias, W block-ELL ==== */
/* K distinct random columns per row, in random order (the ops must not assume sorted rows). */
static void random_cols(int64_t R, int64_t C, int64_t K, double *cols) {
    int64_t r, k, j;
    int64_t *p = (int64_t *)malloc(sizeof(int64_t) * (size_t)(C > 0 ? C : 1));
    for (r = 0; r < R; ++r) {
        for (j = 0; j < C; ++j) p[j] = j;
        for (j = C - 1; j > 0; --j) {
            int64_t q = (int64_t)test_uniform(0.0, (double)(j + 1)), t;
            if (q > j) q = j;
            t = p[j], p[j] = p[q], p[q] = t;
        }
        for (k = 0; k < K; ++k) cols[r * K + k] = (double)p[k];
    }
    free(p);
}
/* Dense W [R*B, C*B] from tiles [R,K,B,B] and columns. */
static void bell_dense(int64_t R, int64_t C, int64_t K, int64_t B, const double *v, const double *cols, double *W) {
    int64_t r, k, i, j, ncol = C * B;
    memset(W, 0, sizeof(double) * (size_t)(R * B * ncol > 0 ? R * B * ncol : 1));
    for (r = 0; r < R; ++r)
        for (k = 0; k < K; ++k)
            for (i = 0; i < B; ++i)
                for (j = 0; j < B; ++j) W[(r * B + i) * ncol + (int64_t)cols[r * K + k] * B + j] = v[((r * K + k) * B + i) * B + j];
}
static void ref_bell(int64_t N, int64_t nin, int64_t nout, const double *x, const double *W, const double *bias, double *y) {
    int64_t n, o, i;
    for (n = 0; n < N; ++n)
        for (o = 0; o < nout; ++o) {
            double acc = bias ? bias[o] : 0.0;
            for (i = 0; i < nin; ++i) acc += x[n * nin + i] * W[o * nin + i];
            y[n * nout + o] = acc;
        }
}
typedef struct bl_loss {
    int64_t N, R, C, K, B;
    double *x, *v, *cols, *bias, *dy, *W, *y;
} bl_loss;
static double bl_loss_fn(void *u) {
    bl_loss *L = (bl_loss *)u;
    bell_dense(L->R, L->C, L->K, L->B, L->v, L->cols, L->W);
    ref_bell(L->N, L->C * L->B, L->R * L->B, L->x, L->W, L->bias, L->y);
    return dot(L->dy, L->y, L->N * L->R * L->B);
}

static void run_bell(const op_case *c, ssm_dtype dt) {
    const int64_t N = c->dim[0], R = c->dim[1], C = c->dim[2], K = c->dim[3], B = c->dim[4], nin = C * B, nout = R * B;
    const int64_t sx[2] = {N, nin}, sy[2] = {N, nout}, sv[4] = {R, K, B, B}, sc[2] = {R, K}, sb[1] = {nout};
    const int64_t so[1] = {C + 1}, ss[1] = {R * K}, nv = R * K * B * B;
    const int use_bias = (c->flags & CASE_BIAS) != 0;
    const double tol = case_tol(c, dt);
    ssm_ctx *ctx = test_ctx();
    double *x, *v, *bias, *cols = vec(R * K), *W = vec(nout * nin), *yr = vec(N * nout), *offs = vec(C + 1),
                          *slots = vec(R * K);
    tbuf tx = tb_random(dt, 2, sx, c->layout, 1.0, &x), tv = tb_random(dt, 4, sv, c->layout, 1.0, &v);
    tbuf tbias = tb_random(dt, 1, sb, c->layout, 1.0, &bias), tci = tb_new(SSM_I32, 2, sc, c->layout);
    tbuf toff = tb_new(SSM_I32, 1, so, c->layout), tsl = tb_new(SSM_I32, 1, ss, c->layout), ty = tb_new(dt, 2, sy, c->layout);
    int64_t r, k, col, pos;
    random_cols(R, C, K, cols);
    tb_set(&tci, cols);
    /* the transposed index, built here: slots ascending per column */
    for (pos = 0, col = 0; col < C; ++col) {
        offs[col] = (double)pos;
        for (r = 0; r < R; ++r)
            for (k = 0; k < K; ++k)
                if ((int64_t)cols[r * K + k] == col) slots[pos++] = (double)(r * K + k);
    }
    offs[C] = (double)pos;
    tb_set(&toff, offs), tb_set(&tsl, slots);
    bell_dense(R, C, K, B, v, cols, W);
    ref_bell(N, nin, nout, x, W, use_bias ? bias : NULL, yr);
    if (c->dir == CASE_FWD) {
        snaps in;
        snap_inputs(&in, &tx, &tv, &tci, &tbias, (const tbuf *)NULL);
        if (call_ok(ssm_bell_forward(ctx, &tx.t, &tv.t, &tci.t, use_bias ? &tbias.t : NULL, &ty.t), ctx, "ssm_bell_forward",
                    &in))
            check_out("y", &ty, yr, tol);
    } else {
        double *dy, *dxr = vec(N * nin), *dvr = vec(nv), *dbr = vec(nout);
        tbuf tdy = tb_random(dt, 2, sy, c->layout, 1.0, &dy), tdx = tb_new(dt, 2, sx, c->layout);
        tbuf tdv = tb_new(dt, 4, sv, c->layout), tdb = tb_new(dt, 1, sb, c->layout);
        int64_t n, i, o, a, b2;
        for (n = 0; n < N; ++n)
            for (i = 0; i < nin; ++i) {
                double acc = 0;
                for (o = 0; o < nout; ++o) acc += dy[n * nout + o] * W[o * nin + i];
                dxr[n * nin + i] = acc;
            }
        for (r = 0; r < R; ++r)
            for (k = 0; k < K; ++k)
                for (a = 0; a < B; ++a)
                    for (b2 = 0; b2 < B; ++b2) {
                        double acc = 0;
                        for (n = 0; n < N; ++n) acc += dy[n * nout + r * B + a] * x[n * nin + (int64_t)cols[r * K + k] * B + b2];
                        dvr[((r * K + k) * B + a) * B + b2] = acc;
                    }
        for (o = 0; o < nout; ++o)
            for (n = 0; n < N; ++n) dbr[o] += dy[n * nout + o];
        snaps in;
        snap_inputs(&in, &tx, &tv, &tci, &toff, &tsl, &tdy, (const tbuf *)NULL);
        if (call_ok(ssm_bell_backward(ctx, &tx.t, &tv.t, &tci.t, &toff.t, &tsl.t, &tdy.t, &tdx.t, &tdv.t, &tdb.t), ctx,
                    "ssm_bell_backward", &in)) {
            tbuf tdx2 = tb_new(dt, 2, sx, c->layout);
            check_out("dx", &tdx, dxr, tol);
            check_out("dvalues", &tdv, dvr, tol);
            check_out("dbias", &tdb, dbr, tol);
            /* dx runs in a fixed order through the transposed index: bitwise reproducible */
            CHECK_OK(ssm_bell_backward(ctx, &tx.t, &tv.t, &tci.t, &toff.t, &tsl.t, &tdy.t, &tdx2.t, NULL, NULL), ctx);
            tb_get(&tdx2, dxr);
            CHECK(!memcmp(tdx.mem, tdx2.mem, tdx.bytes), "dx not bitwise reproducible");
            if ((c->flags & CASE_FD) && dt.bits == 64) {
                bl_loss L;
                double *g = vec(N * nin > nv ? N * nin : nv);
                L.N = N, L.R = R, L.C = C, L.K = K, L.B = B, L.x = x, L.v = v, L.cols = cols, L.bias = bias, L.dy = dy;
                L.W = vec(nout * nin), L.y = vec(N * nout);
                tb_get(&tdx, g);
                check_fd("dx", bl_loss_fn, &L, x, N * nin, g);
                tb_get(&tdv, g);
                check_fd("dvalues", bl_loss_fn, &L, v, nv, g);
                tb_get(&tdb, g);
                check_fd("dbias", bl_loss_fn, &L, bias, nout, g);
                free(g), free(L.W), free(L.y);
            }
            tb_free(&tdx2);
        }
        tb_free(&tdy), tb_free(&tdx), tb_free(&tdv), tb_free(&tdb);
        free(dy), free(dxr), free(dvr), free(dbr);
    }
    tb_free(&tx), tb_free(&tv), tb_free(&tbias), tb_free(&tci), tb_free(&toff), tb_free(&tsl), tb_free(&ty);
    free(x), free(v), free(bias), free(cols), free(W), free(yr), free(offs), free(slots);
    ssm_ctx_destroy(ctx);
}

/* ==== proj: y_seg = act(x W_seg^T + bias_seg), optional per-head L2 norm ==== */
static double ref_act(ssm_proj_act a, double p, double alog, double z) {
    switch (a) {
    case SSM_PROJ_NONE: return z;
    case SSM_PROJ_SILU: return z / (1.0 + exp(-z));
    case SSM_PROJ_SIGMOID: return 1.0 / (1.0 + exp(-z));
    case SSM_PROJ_SIGMOID2: return 2.0 / (1.0 + exp(-z));
    case SSM_PROJ_LOGSIGMOID: return log(1.0 / (1.0 + exp(-z))) / (p ? p : 1.0);
    case SSM_PROJ_SOFTPLUS: return log(1.0 + exp(z));
    case SSM_PROJ_RELU: return z > 0 ? z : 0.0;
    case SSM_PROJ_GELU_TANH: return 0.5 * z * (1.0 + tanh(sqrt(2.0 / 3.141592653589793) * (z + 0.044715 * z * z * z)));
    case SSM_PROJ_DECAY_GATE: return -exp(alog) * log(1.0 + exp(z));
    case SSM_PROJ_SOFTCAP: return (p ? p : 15.0) * tanh(z / (p ? p : 15.0));
    }
    return NAN;
}

/* chain 0: every activation, with and without bias, L2 heads of several sizes;
   chain 1: a Gated-DeltaNet-like chain (q, k, v, g, a, b);
   chain 2: the same at GPU tile scale (heads of 64 and 128 on 128-column boundaries);
   chain 3: segments off tile boundaries, heads of 8, 48, 100 and 256 (cut by the tiles). */
static ssm_proj_desc proj_chain(int chain) {
    ssm_proj_desc d = ssm_proj_desc_init();
    if (chain == 2) {
        ssm_proj_desc_add(&d, 256, SSM_PROJ_SILU, 0, 0, 64);
        ssm_proj_desc_add(&d, 256, SSM_PROJ_SILU, 0, 0, 128);
        ssm_proj_desc_add(&d, 192, SSM_PROJ_SILU, 0, 0, 0);
        ssm_proj_desc_add(&d, 64, SSM_PROJ_NONE, 0, 1, 0);
        ssm_proj_desc_add(&d, 4, SSM_PROJ_SIGMOID2, 0, 0, 0);
        ssm_proj_desc_add(&d, 4, SSM_PROJ_DECAY_GATE, 0, 1, 0);
        return d;
    }
    if (chain == 3) {
        ssm_proj_desc_add(&d, 40, SSM_PROJ_GELU_TANH, 0, 1, 8);
        ssm_proj_desc_add(&d, 96, SSM_PROJ_SILU, 0, 0, 48);
        ssm_proj_desc_add(&d, 200, SSM_PROJ_SOFTPLUS, 0, 0, 100);
        ssm_proj_desc_add(&d, 256, SSM_PROJ_NONE, 0, 1, 256);
        ssm_proj_desc_add(&d, 5, SSM_PROJ_LOGSIGMOID, 16, 0, 0);
        ssm_proj_desc_add(&d, 3, SSM_PROJ_DECAY_GATE, 0, 1, 0);
        return d;
    }
    if (chain == 1) {
        ssm_proj_desc_add(&d, 8, SSM_PROJ_SILU, 0, 0, 4);
        ssm_proj_desc_add(&d, 8, SSM_PROJ_SILU, 0, 0, 4);
        ssm_proj_desc_add(&d, 12, SSM_PROJ_SILU, 0, 0, 0);
        ssm_proj_desc_add(&d, 12, SSM_PROJ_NONE, 0, 0, 0);
        ssm_proj_desc_add(&d, 2, SSM_PROJ_DECAY_GATE, 0, 1, 0);
        ssm_proj_desc_add(&d, 2, SSM_PROJ_SIGMOID2, 0, 0, 0);
        return d;
    }
    ssm_proj_desc_add(&d, 4, SSM_PROJ_NONE, 0, 1, 2);
    ssm_proj_desc_add(&d, 6, SSM_PROJ_SILU, 0, 0, 3);
    ssm_proj_desc_add(&d, 3, SSM_PROJ_SIGMOID, 0, 1, 0);
    ssm_proj_desc_add(&d, 2, SSM_PROJ_SIGMOID2, 0, 0, 0);
    ssm_proj_desc_add(&d, 5, SSM_PROJ_LOGSIGMOID, 16, 0, 0);
    ssm_proj_desc_add(&d, 3, SSM_PROJ_SOFTPLUS, 0, 1, 0);
    ssm_proj_desc_add(&d, 4, SSM_PROJ_RELU, 0, 0, 4);
    ssm_proj_desc_add(&d, 5, SSM_PROJ_GELU_TANH, 0, 1, 5);
    ssm_proj_desc_add(&d, 3, SSM_PROJ_DECAY_GATE, 0, 1, 0);
    ssm_proj_desc_add(&d, 2, SSM_PROJ_SOFTCAP, 0.7, 0, 0);
    ssm_proj_desc_add(&d, 2, SSM_PROJ_SOFTCAP, 0, 1, 2);
    ssm_proj_desc_add(&d, 2, SSM_PROJ_DECAY_GATE, 0, 0, 0);
    return d;
}
static int64_t proj_gates(const ssm_proj_desc *d) {
    int64_t G = 0;
    int s;
    for (s = 0; s < d->nseg; ++s) if (d->seg[s].act == SSM_PROJ_DECAY_GATE) G += d->seg[s].width;
    return G;
}

typedef struct pj_loss {
    const ssm_proj_desc *d;
    int64_t M, dim, N;
    double *x, *W, *b, *al, *dy, *y;
} pj_loss;
static void ref_proj(const pj_loss *p, double *y, double *pre) {
    int64_t r, c, k, c0 = 0, g0 = 0, h;
    int s;
    for (s = 0; s < p->d->nseg; ++s) {
        const ssm_proj_segment *g = &p->d->seg[s];
        for (r = 0; r < p->M; ++r) {
            for (c = c0; c < c0 + g->width; ++c) {
                double z = g->bias ? p->b[c] : 0.0;
                for (k = 0; k < p->dim; ++k) z += p->x[r * p->dim + k] * p->W[c * p->dim + k];
                if (pre) pre[r * p->N + c] = z;
                y[r * p->N + c] = ref_act(g->act, g->param, g->act == SSM_PROJ_DECAY_GATE ? p->al[g0 + c - c0] : 0, z);
            }
            if (g->l2_head > 0)
                for (h = c0; h < c0 + g->width; h += g->l2_head) {
                    double ss = 0;
                    for (c = h; c < h + g->l2_head; ++c) ss += y[r * p->N + c] * y[r * p->N + c];
                    for (c = h; c < h + g->l2_head; ++c) y[r * p->N + c] /= sqrt(ss + 1e-6);
                }
        }
        if (g->act == SSM_PROJ_DECAY_GATE) g0 += g->width;
        c0 += g->width;
    }
}
static double pj_loss_fn(void *u) {
    pj_loss *p = (pj_loss *)u;
    ref_proj(p, p->y, NULL);
    return dot(p->dy, p->y, p->M * p->N);
}

static void run_proj(const op_case *c, ssm_dtype dt) {
    ssm_proj_desc d = proj_chain(c->chain);
    const int64_t M = c->dim[0], dim = c->dim[1], N = ssm_proj_desc_width(&d), G = proj_gates(&d);
    const int64_t sx[2] = {M, dim}, sW[2] = {N, dim}, sy[2] = {M, N}, sN[1] = {N}, sG[1] = {G};
    const int save = (c->flags & CASE_SAVE) != 0;
    const double tol = case_tol(c, dt);
    ssm_ctx *ctx = test_ctx();
    ssm_proj_stats st;
    pj_loss p;
    double *yr = vec(M * N), *pr = vec(M * N);
    tbuf tx, tW, tb, tal, tdy, ty = tb_new(dt, 2, sy, c->layout), tpre = tb_new(dt, 2, sy, c->layout);
    p.d = &d, p.M = M, p.dim = dim, p.N = N, p.y = vec(M * N);
    tx = tb_random(dt, 2, sx, c->layout, 1.0, &p.x);
    tW = tb_random(dt, 2, sW, c->layout, 0.6, &p.W);
    tb = tb_random(dt, 1, sN, c->layout, 0.5, &p.b);
    tal = tb_random(dt, 1, sG, c->layout, 1.0, &p.al);
    tdy = tb_random(dt, 2, sy, c->layout, 1.0, &p.dy);
    d.path = (ssm_proj_path)c->variant;
    d.save = save ? SSM_PROJ_SAVE_PRE : SSM_PROJ_SAVE_NONE;
    d.block_rows = c->chunk;
    d.stats = &st;
    ref_proj(&p, yr, pr);
    if (c->dir == CASE_FWD) {
        snaps in;
        snap_inputs(&in, &tx, &tW, &tb, &tal, (const tbuf *)NULL);
        if (call_ok(ssm_proj_forward(ctx, &d, &tx.t, &tW.t, &tb.t, &tal.t, &ty.t, save ? &tpre.t : NULL), ctx,
                    "ssm_proj_forward", &in)) {
            check_out("y", &ty, yr, tol);
            if (save) check_out("pre", &tpre, pr, tol);
            else CHECK(tb_untouched(&tpre), "pre written under SAVE_NONE");
            if (!test_mem && M > 0)
                CHECK(st.gemm_calls == (d.path == SSM_PROJ_FUSED ? (cases_gpu && dt.bits < 64 ? 1 : (c->chunk ? (M + c->chunk - 1) / c->chunk : 1)) : d.nseg),
                      "forward made %lld GEMM calls", (long long)st.gemm_calls);
        }
    } else { /* gradients against finite differences of the oracle (f64), for every dtype */
        tbuf tdx = tb_new(dt, 2, sx, c->layout), tdW = tb_new(dt, 2, sW, c->layout), tdb = tb_new(dt, 1, sN, c->layout);
        tbuf tdal = tb_new(dt, 1, sG, c->layout);
        double *g = vec(N * dim > M * dim ? N * dim : M * dim), *fd, e;
        int64_t i, k;
        if (save) tb_set(&tpre, pr);
        snaps in;
        snap_inputs(&in, &tx, &tW, &tb, &tal, &tpre, &tdy, (const tbuf *)NULL);
        if (call_ok(ssm_proj_backward(ctx, &d, &tx.t, &tW.t, &tb.t, &tal.t, save ? &tpre.t : NULL, &tdy.t, &tdx.t, &tdW.t,
                                      &tdb.t, &tdal.t), ctx, "ssm_proj_backward", &in)) {
            if (!test_mem && M > 0)
                CHECK(st.gemm_calls == (d.path == SSM_PROJ_FUSED ? 2 : 2 * d.nseg) + (save ? 0 : 1),
                      "backward made %lld GEMM calls", (long long)st.gemm_calls);
            for (k = 0; k < 4; ++k) {
                const tbuf *out = k == 0 ? &tdx : k == 1 ? &tdW : k == 2 ? &tdb : &tdal;
                double *xv = k == 0 ? p.x : k == 1 ? p.W : k == 2 ? p.b : p.al;
                int64_t n = tb_numel(out);
                fd = vec(n);
                for (i = 0; i < n; ++i) {
                    double keep = xv[i], lp, lm;
                    xv[i] = keep + 1e-6, lp = pj_loss_fn(&p);
                    xv[i] = keep - 1e-6, lm = pj_loss_fn(&p);
                    xv[i] = keep, fd[i] = (lp - lm) / 2e-6;
                }
                tb_get(out, g);
                e = rel_err(g, fd, n);
                CHECK(e <= tol, "%s vs finite differences: %.3e > %.1e", k == 0 ? "dx" : k == 1 ? "dW" : k == 2 ? "dbias" : "dA_log",
                      e, tol);
                CHECK(tb_outside_untouched(out), "bytes outside an output view written");
                free(fd);
            }
        }
        tb_free(&tdx), tb_free(&tdW), tb_free(&tdb), tb_free(&tdal);
        free(g);
    }
    tb_free(&tx), tb_free(&tW), tb_free(&tb), tb_free(&tal), tb_free(&tdy), tb_free(&ty), tb_free(&tpre);
    free(p.x), free(p.W), free(p.b), free(p.al), free(p.dy), free(p.y), free(yr), free(pr);
    ssm_ctx_destroy(ctx);
}

/* ==== outchain: z = RMSNorm_head(o) * weight * gate(g), y = z W_o^T ==== */
typedef struct oc_loss {
    int64_t M, D, hd, dout;
    int gate, use_w;
    double *o, *g, *w, *Wo, *dy, *y;
} oc_loss;
static void ref_outchain(const oc_loss *q, double *y, double *rstd) {
    int64_t r, h, c, j;
    double *z = vec(q->D);
    for (r = 0; r < q->M; ++r) {
        for (h = 0; h < q->D / q->hd; ++h) {
            double ss = 0, rs;
            for (c = h * q->hd; c < (h + 1) * q->hd; ++c) ss += q->o[r * q->D + c] * q->o[r * q->D + c];
            rs = 1.0 / sqrt(ss / (double)q->hd + 1e-6);
            if (rstd) rstd[r * (q->D / q->hd) + h] = rs;
            for (c = h * q->hd; c < (h + 1) * q->hd; ++c) {
                double gv = q->g[r * q->D + c], gt = q->gate ? 1.0 / (1.0 + exp(-gv)) : gv / (1.0 + exp(-gv));
                z[c] = q->o[r * q->D + c] * rs * (q->use_w ? q->w[c - h * q->hd] : 1.0) * gt;
            }
        }
        for (j = 0; j < q->dout; ++j) {
            double acc = 0;
            for (c = 0; c < q->D; ++c) acc += z[c] * q->Wo[j * q->D + c];
            y[r * q->dout + j] = acc;
        }
    }
    free(z);
}
static double oc_loss_fn(void *u) {
    oc_loss *q = (oc_loss *)u;
    ref_outchain(q, q->y, NULL);
    return dot(q->dy, q->y, q->M * q->dout);
}

static void run_outchain(const op_case *c, ssm_dtype dt) {
    const int64_t M = c->dim[0], D = c->dim[1], hd = c->dim[2] ? c->dim[2] : D, dout = c->dim[3];
    const int64_t so[2] = {M, D}, sw[1] = {hd}, sWo[2] = {dout, D}, sy[2] = {M, dout}, sr[2] = {M, D / hd};
    const int use_w = (c->flags & CASE_WEIGHT) != 0, use_r = (c->flags & CASE_RSTD) != 0;
    const double tol = case_tol(c, dt);
    ssm_ctx *ctx = test_ctx();
    ssm_outchain_desc d = ssm_outchain_desc_init();
    oc_loss q;
    double *yr = vec(M * dout), *rr = vec(M * D / hd);
    tbuf to, tg, tw, tWo, tdy, ty = tb_new(dt, 2, sy, c->layout), tr = tb_new(dt, 2, sr, c->layout);
    q.M = M, q.D = D, q.hd = hd, q.dout = dout, q.gate = c->variant, q.use_w = use_w, q.y = vec(M * dout);
    d.gate = c->variant ? SSM_OUTCHAIN_SIGMOID : SSM_OUTCHAIN_SILU;
    d.head_dim = c->dim[2];
    d.block_rows = c->chunk;
    to = tb_random(dt, 2, so, c->layout, 1.5, &q.o);
    tg = tb_random(dt, 2, so, c->layout, 2.0, &q.g);
    tw = tb_random(dt, 1, sw, c->layout, 1.0, &q.w);
    tWo = tb_random(dt, 2, sWo, c->layout, 0.5, &q.Wo);
    tdy = tb_random(dt, 2, sy, c->layout, 1.0, &q.dy);
    ref_outchain(&q, yr, rr);
    if (c->dir == CASE_FWD) {
        snaps in;
        snap_inputs(&in, &to, &tg, &tw, &tWo, (const tbuf *)NULL);
        if (call_ok(ssm_outchain_forward(ctx, &d, &to.t, &tg.t, use_w ? &tw.t : NULL, &tWo.t, &ty.t, use_r ? &tr.t : NULL),
                    ctx, "ssm_outchain_forward", &in)) {
            check_out("y", &ty, yr, tol);
            if (use_r) check_out("rstd", &tr, rr, tol);
            else CHECK(tb_untouched(&tr), "rstd written though not requested");
        }
    } else {
        tbuf tdo = tb_new(dt, 2, so, c->layout), tdg = tb_new(dt, 2, so, c->layout), tdw = tb_new(dt, 1, sw, c->layout);
        tbuf tdWo = tb_new(dt, 2, sWo, c->layout);
        double *g = vec(M * D > dout * D ? M * D : dout * D), *fd, e;
        int64_t i, k;
        snaps in;
        if (use_r) tb_set(&tr, rr);
        snap_inputs(&in, &to, &tg, &tw, &tWo, &tr, &tdy, (const tbuf *)NULL);
        if (call_ok(ssm_outchain_backward(ctx, &d, &to.t, &tg.t, use_w ? &tw.t : NULL, &tWo.t, use_r ? &tr.t : NULL, &tdy.t,
                                          &tdo.t, &tdg.t, use_w ? &tdw.t : NULL, &tdWo.t), ctx, "ssm_outchain_backward", &in)) {
            for (k = 0; k < 4; ++k) {
                const tbuf *out = k == 0 ? &tdo : k == 1 ? &tdg : k == 2 ? &tdWo : &tdw;
                double *xv = k == 0 ? q.o : k == 1 ? q.g : k == 2 ? q.Wo : q.w;
                int64_t n = tb_numel(out);
                if (k == 3 && !use_w) {
                    CHECK(tb_untouched(&tdw), "dweight written without a weight");
                    continue;
                }
                fd = vec(n);
                for (i = 0; i < n; ++i) {
                    double keep = xv[i], lp, lm;
                    xv[i] = keep + 1e-6, lp = oc_loss_fn(&q);
                    xv[i] = keep - 1e-6, lm = oc_loss_fn(&q);
                    xv[i] = keep, fd[i] = (lp - lm) / 2e-6;
                }
                tb_get(out, g);
                e = rel_err(g, fd, n);
                CHECK(e <= tol, "%s vs finite differences: %.3e > %.1e", k == 0 ? "do" : k == 1 ? "dg" : k == 2 ? "dW_o" : "dweight",
                      e, tol);
                CHECK(tb_outside_untouched(out), "bytes outside an output view written");
                free(fd);
            }
        }
        tb_free(&tdo), tb_free(&tdg), tb_free(&tdw), tb_free(&tdWo);
        free(g);
    }
    tb_free(&to), tb_free(&tg), tb_free(&tw), tb_free(&tWo), tb_free(&tdy), tb_free(&ty), tb_free(&tr);
    free(q.o), free(q.g), free(q.w), free(q.Wo), free(q.dy), free(q.y), free(yr), free(rr);
    ssm_ctx_destroy(ctx);
}

/* ==== delta rule: S <- alpha (I - beta k k^T) S + beta k v^T per factor, o = scale S^T q ====
   dims B, T, H, K, V; chain = n_h (0: DeltaNet's rank-4 k/v, n_h = 1); param = gate strength
   (g in [-param, 0]; 0 = no g); CASE_VARLEN: dim[0] sequences cut from one batch row. */
typedef struct dl_prob {
    int64_t B, T, H, K, V, nh, N;
    const int64_t *cu; /* NULL: B independent sequences */
    double scale;
    double *q, *k, *v, *beta, *g, *s0; /* g, s0: NULL when absent */
} dl_prob;

/* Forward token by token; with dout (and dsT) also the adjoint of the loss
   sum(dout .* o) + sum(dsT .* sT) into gq..gs0 (every sub-step's state kept). */
static void ref_delta(const dl_prob *P, double *o, double *sT, const double *dout, const double *dsT, double *gq,
                      double *gk, double *gv, double *gb, double *gg, double *gs0) {
    const int64_t K = P->K, V = P->V, H = P->H, nh = P->nh, KV = K * V;
    int64_t n, h, t, j, i, c, r;
    double *kd = vec(V), *rr = vec(V);
    for (n = 0; n < P->N; ++n)
        for (h = 0; h < H; ++h) {
            int64_t b = P->cu ? 0 : n, t0 = P->cu ? P->cu[n] : 0, t1 = P->cu ? P->cu[n + 1] : P->T, L = (t1 - t0) * nh;
            double *S = vec((L + 1) * KV), *dS = vec(KV);
            for (i = 0; i < KV; ++i) S[i] = P->s0 ? P->s0[(n * H + h) * KV + i] : 0.0;
            for (t = t0; t < t1; ++t) {
                int64_t tok = (b * P->T + t) * H + h;
                for (j = 0; j < nh; ++j) {
                    const double *Sp = S + ((t - t0) * nh + j) * KV, *kk = P->k + (tok * nh + j) * K,
                                 *vv = P->v + (tok * nh + j) * V;
                    double *Sn = S + ((t - t0) * nh + j + 1) * KV, bt = P->beta[tok * nh + j];
                    double a = P->g && j == 0 ? exp(P->g[tok]) : 1.0;
                    for (c = 0; c < V; ++c) {
                        double kS = 0;
                        for (r = 0; r < K; ++r) kS += kk[r] * Sp[r * V + c];
                        for (i = 0; i < K; ++i) Sn[i * V + c] = a * (Sp[i * V + c] - bt * kk[i] * kS) + bt * kk[i] * vv[c];
                    }
                }
                for (c = 0; c < V; ++c) {
                    double acc = 0;
                    const double *Sc = S + (t - t0 + 1) * nh * KV;
                    for (r = 0; r < K; ++r) acc += Sc[r * V + c] * P->q[tok * K + r];
                    o[tok * V + c] = P->scale * acc;
                }
            }
            if (sT) memcpy(sT + (n * H + h) * KV, S + L * KV, sizeof(double) * (size_t)KV);
            if (dout) {
                for (i = 0; i < KV; ++i) dS[i] = dsT ? dsT[(n * H + h) * KV + i] : 0.0;
                for (t = t1 - 1; t >= t0; --t) {
                    int64_t tok = (b * P->T + t) * H + h;
                    const double *Sc = S + (t - t0 + 1) * nh * KV, *dob = dout + tok * V;
                    for (r = 0; r < K; ++r) {
                        double acc = 0;
                        for (c = 0; c < V; ++c) acc += Sc[r * V + c] * dob[c], dS[r * V + c] += P->scale * P->q[tok * K + r] * dob[c];
                        gq[tok * K + r] = P->scale * acc;
                    }
                    for (j = nh - 1; j >= 0; --j) {
                        const double *Sp = S + ((t - t0) * nh + j) * KV, *kk = P->k + (tok * nh + j) * K,
                                     *vv = P->v + (tok * nh + j) * V;
                        double bt = P->beta[tok * nh + j], a = P->g && j == 0 ? exp(P->g[tok]) : 1.0, da = 0, db = 0;
                        for (c = 0; c < V; ++c) {
                            kd[c] = rr[c] = 0;
                            for (i = 0; i < K; ++i) kd[c] += kk[i] * dS[i * V + c], rr[c] += kk[i] * Sp[i * V + c];
                            da -= bt * kd[c] * rr[c];
                            db += kd[c] * (vv[c] - a * rr[c]);
                            gv[(tok * nh + j) * V + c] = bt * kd[c];
                        }
                        for (i = 0; i < KV; ++i) da += dS[i] * Sp[i];
                        for (i = 0; i < K; ++i) {
                            double acc = 0;
                            for (c = 0; c < V; ++c) acc += bt * dS[i * V + c] * (vv[c] - a * rr[c]) - a * bt * Sp[i * V + c] * kd[c];
                            gk[(tok * nh + j) * K + i] = acc;
                        }
                        gb[tok * nh + j] = db;
                        if (P->g && j == 0) gg[tok] = a * da;
                        for (i = 0; i < K; ++i)
                            for (c = 0; c < V; ++c) dS[i * V + c] = a * (dS[i * V + c] - bt * kk[i] * kd[c]);
                    }
                }
                memcpy(gs0 + (n * H + h) * KV, dS, sizeof(double) * (size_t)KV);
            }
            free(S), free(dS);
        }
    free(kd), free(rr);
}

typedef struct dl_loss {
    dl_prob *P;
    const double *Wo, *Ws;
    double *o, *sT;
    int64_t no, ns;
} dl_loss;
static double dl_loss_fn(void *u) {
    dl_loss *L = (dl_loss *)u;
    ref_delta(L->P, L->o, L->sT, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
    return dot(L->Wo, L->o, L->no) + (L->Ws ? dot(L->Ws, L->sT, L->ns) : 0.0);
}

/* Finite differences with an absolute floor for their rounding noise (about 1e-10 an entry):
   gradients behind strong gates are themselves tiny. */
static void dl_check_fd(const char *what, dl_loss *L, double *x, int64_t n, const double *grad) {
    double *fd = vec(n), num = 0, den = 0;
    int64_t i;
    for (i = 0; i < n; ++i) {
        double keep = x[i], lp, lm, eps = 1e-6;
        x[i] = keep + eps;
        lp = dl_loss_fn(L);
        x[i] = keep - eps;
        lm = dl_loss_fn(L);
        x[i] = keep;
        fd[i] = (lp - lm) / (2 * eps);
        num += (grad[i] - fd[i]) * (grad[i] - fd[i]), den += fd[i] * fd[i];
    }
    CHECK(sqrt(num) <= 1e-6 * sqrt(den) + 1e-8 * sqrt((double)n), "%s vs finite differences: |err| %.3e, |fd| %.3e",
          what, sqrt(num), sqrt(den));
    free(fd);
}

/* A view of random values drawn by kind (0: [-1,1], 1: unit rows of the last dim, 2: beta
   in [0.05, 1], 3: g in [-gate, 0]); *vals gets them as stored. */
static tbuf dl_input(ssm_dtype dt, int ndim, const int64_t *shape, int layout, int kind, double gate, double **vals) {
    tbuf b = tb_new(dt, ndim, shape, layout);
    int64_t n = tb_numel(&b), i, j, D = ndim > 0 ? shape[ndim - 1] : 1;
    double *x = vec(n);
    for (i = 0; i < n; ++i)
        x[i] = kind == 0 || kind == 1 ? test_normal() * (kind ? 1.0 : 0.5) : kind == 2 ? test_uniform(0.05, 1.0) : test_uniform(-gate, 0.0);
    if (kind == 1)
        for (i = 0; i + D <= n && D > 0; i += D) {
            double nrm = 1e-12;
            for (j = 0; j < D; ++j) nrm += x[i + j] * x[i + j];
            for (j = 0; j < D; ++j) x[i + j] /= sqrt(nrm);
        }
    tb_set(&b, x);
    tb_get(&b, x); /* as stored */
    *vals = x;
    return b;
}

static void run_delta(const op_case *c, ssm_dtype dt) {
    const int varlen = (c->flags & CASE_VARLEN) != 0, fac = c->chain > 0, use_s0 = (c->flags & CASE_H0) != 0,
              use_sT = (c->flags & CASE_HT) != 0, gated = c->param > 0;
    const int64_t N = c->dim[0], B = varlen ? 1 : N, T = c->dim[1], H = c->dim[2], K = c->dim[3], V = c->dim[4];
    const int64_t nh = fac ? c->chain : 1;
    const int64_t sq[4] = {B, T, H, K}, sk[5] = {B, T, H, nh, K}, sv[5] = {B, T, H, nh, V}, sbt[4] = {B, T, H, nh},
                  so[4] = {B, T, H, V}, ss[4] = {N, H, K, V};
    const int64_t nq = B * T * H * K, nk = nq * nh, nv = B * T * H * nh * V, nb = B * T * H * nh, ng = B * T * H,
                  no = B * T * H * V, ns = N * H * K * V, ncu = N + 1;
    const double tol = case_tol(c, dt);
    ssm_ctx *ctx = test_ctx();
    ssm_delta_desc d = ssm_delta_desc_init();
    ssm_delta_stats st;
    dl_prob P;
    int64_t *cu = NULL, i;
    void *cumem = NULL;
    ssm_tensor tcu;
    double *q, *k, *v, *beta, *g, *s0, *oref = vec(no), *sTref = vec(ns);
    tbuf tq = dl_input(dt, 4, sq, c->layout, 0, 0, &q), tk = dl_input(dt, fac ? 5 : 4, fac ? sk : sq, c->layout, 1, 0, &k);
    tbuf tv = fac ? dl_input(dt, 5, sv, c->layout, 0, 0, &v) : dl_input(dt, 4, so, c->layout, 0, 0, &v);
    tbuf tbeta = dl_input(dt, fac ? 4 : 3, sbt, c->layout, 2, 0, &beta), tg = dl_input(dt, 3, sbt, c->layout, 3, c->param, &g);
    tbuf ts0 = dl_input(dt, 4, ss, c->layout, 0, 0, &s0), to, tsT;
    if (varlen) { /* random cut points (empty sequences allowed), in host memory on every backend */
        int bits = (c->flags & CASE_CU64) ? 64 : 32;
        int64_t j;
        cu = (int64_t *)calloc((size_t)ncu, sizeof(int64_t));
        cu[N] = T;
        for (i = 1; i < N; ++i) cu[i] = (int64_t)test_uniform(0, (double)T + 0.999);
        for (i = 2; i < N; ++i)
            for (j = i; j > 1 && cu[j - 1] > cu[j]; --j) { int64_t x = cu[j]; cu[j] = cu[j - 1]; cu[j - 1] = x; }
        cumem = calloc((size_t)ncu, 8);
        for (i = 0; i < ncu; ++i) {
            if (bits == 64) ((int64_t *)cumem)[i] = cu[i];
            else ((int32_t *)cumem)[i] = (int32_t)cu[i];
        }
        {
            ssm_dtype it = ssm_dtype_i32();
            it.bits = (uint8_t)bits;
            tcu = ssm_tensor_make(cumem, it, ssm_cpu(), 1, &ncu, NULL);
        }
    }
    P.B = B, P.T = T, P.H = H, P.K = K, P.V = V, P.nh = nh, P.N = N, P.cu = cu;
    P.scale = 1.0 / sqrt((double)K);
    P.q = q, P.k = k, P.v = v, P.beta = beta, P.g = gated ? g : NULL, P.s0 = use_s0 ? s0 : NULL;
    ref_delta(&P, oref, sTref, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
    d.method = (ssm_delta_method)c->variant;
    d.chunk = c->chunk;
    d.stats = &st;
    memset(&st, 0, sizeof st);
    to = tb_new(dt, 4, so, c->layout);
    tsT = tb_new(dt, 4, ss, c->layout);
#define DL_IN &tq.t, &tk.t, &tv.t, &tbeta.t, gated ? &tg.t : NULL, use_s0 ? &ts0.t : NULL, varlen ? &tcu : NULL
    if (c->dir == CASE_FWD) {
        snaps in;
        snap_inputs(&in, &tq, &tk, &tv, &tbeta, &tg, &ts0, (const tbuf *)NULL);
        if (call_ok(ssm_delta_forward(ctx, &d, DL_IN, &to.t, use_sT ? &tsT.t : NULL), ctx, "ssm_delta_forward", &in)) {
            check_out("o", &to, oref, tol);
            if (use_sT) check_out("sT", &tsT, sTref, tol);
            else CHECK(tb_untouched(&tsT), "sT written though not requested");
            CHECK(c->variant == SSM_DELTA_AUTO || st.method == (ssm_delta_method)c->variant, "stats.method %d", (int)st.method);
        }
    } else {
        static const char *names[6] = {"dq", "dk", "dv", "dbeta", "dg", "ds0"};
        double *Wo, *Ws, *ref[6], *vals[6];
        int64_t cnt[6];
        tbuf tWo = tb_random(dt, 4, so, c->layout, 1.0, &Wo), tWs = tb_random(dt, 4, ss, c->layout, 1.0, &Ws), tgr[6], tgr2[6];
        int a, rep;
        snaps in;
        cnt[0] = nq, cnt[1] = nk, cnt[2] = nv, cnt[3] = nb, cnt[4] = ng, cnt[5] = ns;
        vals[0] = q, vals[1] = k, vals[2] = v, vals[3] = beta, vals[4] = g, vals[5] = s0;
        double allow[6] = {0, 0, 0, 0, 0, 0};
        for (a = 0; a < 6; ++a) ref[a] = vec(cnt[a]);
        ref_delta(&P, oref, sTref, Wo, use_sT ? Ws : NULL, ref[0], ref[1], ref[2], ref[3], ref[4], ref[5]);
        if (dt.bits == 16) { /* the exact gradients' spread under +-1 ulp input perturbations (two sign patterns) */
            const double u = dt.code == SSM_DTYPE_BFLOAT ? 1.0 / 256 : 1.0 / 2048;
            double *src[8] = {q, k, v, beta, g, s0, Wo, Ws}, *cp[8], *part[6];
            const int64_t len[8] = {nq, nk, nv, nb, ng, ns, no, ns};
            dl_prob Pp = P;
            int pass, e;
            for (pass = 0; pass < 2; ++pass) {
                for (e = 0; e < 8; ++e) {
                    cp[e] = vec(len[e]);
                    for (i = 0; i < len[e]; ++i) /* a fixed hash pattern: the test's random stream is left alone */
                        cp[e][i] = src[e][i] * (1.0 + u * (((((uint64_t)(i + 7 * e) * 2654435761u) >> 9) + pass) % 2 ? 1 : -1));
                }
                Pp.q = cp[0], Pp.k = cp[1], Pp.v = cp[2], Pp.beta = cp[3], Pp.g = gated ? cp[4] : NULL, Pp.s0 = use_s0 ? cp[5] : NULL;
                for (a = 0; a < 6; ++a) part[a] = vec(cnt[a]);
                ref_delta(&Pp, oref, sTref, cp[6], use_sT ? cp[7] : NULL, part[0], part[1], part[2], part[3], part[4], part[5]);
                for (a = 0; a < 6; ++a) {
                    double d2 = 0;
                    for (i = 0; i < cnt[a]; ++i) d2 += (part[a][i] - ref[a][i]) * (part[a][i] - ref[a][i]);
                    if (sqrt(d2) > allow[a]) allow[a] = sqrt(d2);
                    free(part[a]);
                }
                for (e = 0; e < 8; ++e) free(cp[e]);
            }
            for (a = 0; a < 6; ++a) allow[a] *= 2.0;
            ref_delta(&P, oref, sTref, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL); /* oref, sTref as before */
        }
        for (rep = 0; rep < 2; ++rep) { /* twice: the gradients are deterministic */
            tbuf *t = rep ? tgr2 : tgr;
            t[0] = tb_new(dt, 4, sq, c->layout), t[1] = tb_new(dt, fac ? 5 : 4, fac ? sk : sq, c->layout);
            t[2] = tb_new(dt, fac ? 5 : 4, fac ? sv : so, c->layout), t[3] = tb_new(dt, fac ? 4 : 3, sbt, c->layout);
            t[4] = tb_new(dt, 3, sbt, c->layout), t[5] = tb_new(dt, 4, ss, c->layout);
        }
        snap_inputs(&in, &tq, &tk, &tv, &tbeta, &tg, &ts0, &tWo, &tWs, (const tbuf *)NULL);
        if (call_ok(ssm_delta_backward(ctx, &d, DL_IN, &tWo.t, use_sT ? &tWs.t : NULL, &tgr[0].t, &tgr[1].t, &tgr[2].t,
                                       &tgr[3].t, gated ? &tgr[4].t : NULL, &tgr[5].t),
                    ctx, "ssm_delta_backward", &in)) {
            /* the second call reads what a forward kept (desc.saved; nothing on host backends):
               bitwise the first. The query knows no cu_seqlens: N more chunks bound the slots. */
            ssm_delta_desc ds = d;
            size_t sb = 0;
            int64_t nsb;
            tbuf tsv;
            ds.stats = NULL;
            CHECK_OK(ssm_delta_workspace_size(ctx, &ds, dt, varlen ? 1 : B, varlen ? T + N * 64 : T, H, K, V, nh, 3, &sb),
                     ctx);
            nsb = (int64_t)sb;
            tsv = tb_new(ssm_dtype_u8(), 1, &nsb, LAYOUT_CONTIGUOUS);
            ds.saved = &tsv.t;
            CHECK_OK(ssm_delta_forward(ctx, &ds, DL_IN, &to.t, NULL), ctx);
            CHECK(tb_outside_untouched(&tsv), "the forward wrote outside saved");
            CHECK_OK(ssm_delta_backward(ctx, &ds, DL_IN, &tWo.t, use_sT ? &tWs.t : NULL, &tgr2[0].t, &tgr2[1].t,
                                        &tgr2[2].t, &tgr2[3].t, gated ? &tgr2[4].t : NULL, &tgr2[5].t),
                     ctx);
            tb_free(&tsv);
            for (a = 0; a < 6; ++a) {
                tb_untouched(&tgr[a]), tb_untouched(&tgr2[a]); /* pull device copies */
                CHECK(!memcmp(tgr[a].mem, tgr2[a].mem, tgr[a].bytes), "%s differs between the calls without and with saved",
                      names[a]);
                if (a == 4 && !gated) CHECK(tb_untouched(&tgr[a]), "dg written without g");
                else check_out_allow(names[a], &tgr[a], ref[a], allow[a], tol);
            }
            if ((c->flags & CASE_FD) && dt.bits == 64) {
                dl_loss L;
                double *got = vec(nv > nk ? (nv > ns ? nv : ns) : (nk > ns ? nk : ns));
                L.P = &P, L.Wo = Wo, L.Ws = use_sT ? Ws : NULL, L.o = vec(no), L.sT = vec(ns), L.no = no, L.ns = ns;
                for (a = 0; a < 6; ++a) {
                    if ((a == 4 && !gated) || (a == 5 && !use_s0)) continue; /* ds0 at s0 = 0: the adjoint above */
                    tb_get(&tgr[a], got);
                    dl_check_fd(names[a], &L, vals[a], cnt[a], got);
                }
                free(got), free(L.o), free(L.sT);
            }
        }
        for (a = 0; a < 6; ++a) tb_free(&tgr[a]), tb_free(&tgr2[a]), free(ref[a]);
        tb_free(&tWo), tb_free(&tWs), free(Wo), free(Ws);
    }
#undef DL_IN
    if (!test_mem && (st.method == SSM_DELTA_RECURRENT || st.method == SSM_DELTA_CHUNKED)) { /* the query answers what the call used */
        size_t wsb = 0;
        d.stats = NULL;
        CHECK_OK(ssm_delta_workspace_size(ctx, &d, dt, B, T, H, K, V, nh, c->dir, &wsb), ctx);
        CHECK(varlen ? wsb >= st.workspace_bytes : wsb == st.workspace_bytes, "workspace_size %zu, the call used %zu", wsb,
              st.workspace_bytes);
    }
    tb_free(&tq), tb_free(&tk), tb_free(&tv), tb_free(&tbeta), tb_free(&tg), tb_free(&ts0), tb_free(&to), tb_free(&tsT);
    free(q), free(k), free(v), free(beta), free(g), free(s0), free(oref), free(sTref), free(cu), free(cumem);
    ssm_ctx_destroy(ctx);
}

const case_op_info case_ops[CASE_OP_COUNT] = {
    {"linrec", {"S", "T", "n", "m", NULL}, run_linrec},
    {"decay", {"B", "T", "R", "C", NULL}, run_decay},
    {"bell", {"N", "R", "C", "K", "B"}, run_bell},
    {"proj", {"M", "d", NULL, NULL, NULL}, run_proj},
    {"outchain", {"M", "D", "hd", "dout", NULL}, run_outchain},
    {"delta", {"B", "T", "H", "K", "V"}, run_delta},
};

/* Relative error bounds: [op][dir][f64, f32 CPU, f32 GPU, f16, bf16]. The GPU's f32 kernels
   sum in other orders (and use exp2f); 16-bit rows store inputs and outputs in 16 bits with
   f32 state. Gradients of proj and outchain are checked against finite differences. The f32
   projection forward: a short dot product can cancel and activations amplify relative error
   (2.6e-6 was seen once on a 13 x 7 problem), hence 1e-5 rather than a few ulps. */
double case_tol(const op_case *c, ssm_dtype dt) {
    static const double tol[CASE_OP_COUNT][2][5] = {
        {{1e-10, 2e-4, 2e-4, 1.5e-2, 6e-2}, {1e-9, 5e-4, 4e-4, 3e-2, 1.2e-1}}, /* linrec   */
        {{1e-11, 1e-5, 2e-4, 1.5e-2, 6e-2}, {1e-10, 1e-5, 2e-4, 1.5e-2, 6e-2}}, /* decay    */
        {{1e-12, 2e-5, 2e-4, 1.5e-2, 6e-2}, {1e-12, 2e-5, 2e-4, 1.5e-2, 6e-2}}, /* bell     */
        {{1e-12, 1e-5, 2e-4, 1.5e-2, 6e-2}, {1e-6, 1e-4, 2e-4, 3e-2, 1.2e-1}},  /* proj     */
        {{1e-12, 1e-5, 2e-4, 1.5e-2, 6e-2}, {1e-6, 1e-4, 2e-4, 3e-2, 1.2e-1}},  /* outchain */
        {{1e-10, 2e-4, 5e-4, 2e-2, 8e-2}, {1e-9, 5e-4, 1e-3, 3e-2, 1.2e-1}},   /* delta    */
    };
    int col = dt.bits == 64 ? 0 : dt.bits == 32 ? (cases_gpu ? 2 : 1) : dt.code == SSM_DTYPE_BFLOAT ? 4 : 3;
    return tol[c->op][c->dir][col];
}

/* ==== the table ==== */
#define CASES_MAX 2048
static op_case table[CASES_MAX];
static int table_n;

static op_case *row(case_op op, int dir, unsigned dtypes, int layout, int64_t d0, int64_t d1, int64_t d2, int64_t d3,
                    int64_t d4) {
    op_case *c = &table[table_n < CASES_MAX - 1 ? table_n++ : table_n];
    memset(c, 0, sizeof *c);
    c->op = op, c->dir = dir, c->dtypes = dtypes, c->layout = layout;
    c->dim[0] = d0, c->dim[1] = d1, c->dim[2] = d2, c->dim[3] = d3, c->dim[4] = d4;
    return c;
}
static op_case *lr_row(int dir, unsigned dt, int layout, int method, int64_t S, int64_t T, int64_t n, int64_t m,
                       int64_t chunk, double rho, unsigned flags) {
    op_case *c = row(CASE_LINREC, dir, dt, layout, S, T, n, m, 0);
    c->variant = method, c->chunk = chunk, c->param = rho, c->flags = flags;
    return c;
}
/* `rows` tensor-core rows over the n in ns: T, chunk, method, dtype (d0 / d1) and flags cycle
   so that each n meets several of each, forward and (T <= 300) backward */
static void lr_tc_sweep(const int64_t *ns, int nn, int rows, unsigned d0, unsigned d1, unsigned extra) {
    static const int64_t Tp[4] = {65, 300, 1000, 2}, Cp[3] = {0, 16, 37};
    int k;
    for (k = 0; k < rows; ++k) {
        const int64_t T = Tp[k % 4], C = Cp[(k / 4) % 3];
        const int method = k % 3 == 2 ? SSM_LINREC_AUTO : k % 3 == 1 ? SSM_LINREC_CR : SSM_LINREC_CHUNKED;
        const unsigned flags = (k % 2 ? CASE_H0 : 0) | (k % 5 ? CASE_HT : 0) | (k % 7 >= 4 ? CASE_REVERSE : 0) | extra;
        lr_row(CASE_FWD, k % 2 ? d0 : d1, LAYOUT_CONTIGUOUS, method, 1 + k % 3, T, ns[k % nn], 1, C, 0.9, flags);
        if (T <= 300)
            lr_row(CASE_BWD, k % 2 ? d1 : d0, LAYOUT_CONTIGUOUS, method, 1 + k % 3, T, ns[(k + 3) % nn], 1, C, 0.9, flags);
    }
}
static op_case *dk_row(int dir, unsigned dt, int layout, int64_t B, int64_t T, int64_t R, int64_t C, double strength,
                       unsigned flags) {
    op_case *c = row(CASE_DECAY, dir, dt, layout, B, T, R, C, 0);
    c->param = strength, c->flags = flags;
    return c;
}
static void dk_rows(unsigned dt, int layout, int64_t B, int64_t T, int64_t R, int64_t C, double strength, unsigned flags,
                    int with_bwd) {
    dk_row(CASE_FWD, dt, layout, B, T, R, C, strength, flags);
    if (with_bwd) dk_row(CASE_BWD, dt, layout, B, T, R, C, strength, flags);
}
static void bell_rows(unsigned dt, int layout, int64_t N, int64_t R, int64_t C, int64_t K, int64_t B, unsigned flags) {
    row(CASE_BELL, CASE_FWD, dt, layout, N, R, C, K, B)->flags = flags;
    row(CASE_BELL, CASE_BWD, dt, layout, N, R, C, K, B)->flags = flags;
}
static op_case *pj_row(int dir, unsigned dt, int layout, int64_t M, int64_t dim, int path, int chain, unsigned flags,
                       int64_t block_rows) {
    op_case *c = row(CASE_PROJ, dir, dt, layout, M, dim, 0, 0, 0);
    c->variant = path, c->chain = chain, c->flags = flags, c->chunk = block_rows;
    return c;
}
static void oc_rows(unsigned dt, int layout, int64_t M, int64_t D, int64_t hd, int64_t dout, int gate, unsigned flags,
                    int64_t block_rows) {
    int dir;
    for (dir = 0; dir < 2; ++dir) {
        op_case *c = row(CASE_OUTCHAIN, dir, dt, layout, M, D, hd, dout, 0);
        c->variant = gate, c->flags = flags, c->chunk = block_rows;
    }
}

static void dl_row(int dir, unsigned dt, int layout, int method, int64_t B, int64_t T, int64_t H, int64_t K, int64_t V,
                   int nh, double gate, int64_t chunk, unsigned flags) {
    op_case *c = row(CASE_DELTA, dir, dt, layout, B, T, H, K, V);
    c->variant = method, c->chain = nh, c->param = gate, c->chunk = chunk, c->flags = flags;
}

static void build(void) {
    static const int64_t Ts[7] = {1, 2, 3, 7, 64, 100, 1000}, ns[3] = {1, 4, 32};
    int mi, ti, ni, v, k, l, path, save, gate;
    /* linrec forward: every method x T (1, primes, powers of two, 1000) x n, two variants per
       shape covering dtypes, layouts, m, h0/hT, reverse and radius; 16-bit runs on CUDA */
    for (mi = 0; mi < SSM_LINREC_METHOD_COUNT; ++mi)
        for (ti = 0; ti < 7; ++ti)
            for (ni = 0; ni < 3; ++ni)
                for (v = 0; v < 2; ++v) {
                    int layout = v ? (ti % 2 ? LAYOUT_PADDED : LAYOUT_REVERSED) : (ni == 1 ? LAYOUT_PADDED : LAYOUT_CONTIGUOUS);
                    int64_t m = v ? 3 : 1, S = ns[ni] == 32 && Ts[ti] == 1000 && mi == SSM_LINREC_SCAN_HS && v ? 1 : 2;
                    unsigned flags = ((ti + ni + v) % 2 ? CASE_H0 : 0) | ((ti + v) % 2 == 0 || ni == 2 ? CASE_HT : 0) |
                                     ((ti + ni) % 3 == 1 ? CASE_REVERSE : 0) | (m == 1 && layout ? CASE_RANK3 : 0);
                    unsigned dt = v ? CASE_F32 : CASE_F64 | ((mi + ti + ni) % 2 ? CASE_BF16 : CASE_F16);
                    lr_row(CASE_FWD, dt, layout, mi, S, Ts[ti], ns[ni], m, ti < 4 ? 3 : (v ? 7 : 0), (ti + v) % 2 ? 0.99 : 0.5,
                           flags);
                }
    /* linrec backward: small f64 shapes with finite differences; larger f32 ones, padded */
    for (mi = 0; mi < SSM_LINREC_METHOD_COUNT; ++mi)
        for (ti = 0; ti < 5; ++ti) {
            static const int64_t Tb[5] = {1, 2, 3, 7, 12};
            unsigned flags = (ti != 1 ? CASE_H0 : 0) | (ti % 2 == 0 ? CASE_HT : 0) | (ti == 3 || ti == 4 ? CASE_REVERSE : 0);
            lr_row(CASE_BWD, CASE_F64 | CASE_BF16, ti % 3, mi, 2, Tb[ti], 3, ti % 2 ? 2 : 1, ti == 4 ? 5 : 3, 0.9, flags | CASE_FD);
            lr_row(CASE_BWD, CASE_F32 | (ti % 2 ? CASE_F16 : 0), LAYOUT_PADDED, mi, 2, ti == 4 ? 1000 : 37 * (ti + 1),
                   ti % 2 ? 4 : 5, 3 - ti % 2, 7, 0.9, flags);
        }
    /* linrec on the GEMM routes of BLIS (n = 70 beyond its small-kernel bound), negative
       strides, size-1 everything, and prime sizes, forward and backward */
    for (mi = 0; mi < SSM_LINREC_METHOD_COUNT; ++mi)
        for (v = 0; v < 2; ++v) {
            lr_row(v, CASE_F32, LAYOUT_PADDED, mi, 2, 100, 32, 1, 16, 0.9, CASE_H0);
            lr_row(v, CASE_F64, LAYOUT_REVERSED, mi, 1, 77, 8, 3, 16, 0.9, CASE_H0 | CASE_REVERSE);
            lr_row(v, CASE_F32, LAYOUT_CONTIGUOUS, mi, 1, 40, 70, 2, 16, 0.9, CASE_H0);
            lr_row(v, CASE_F64 | CASE_F32, LAYOUT_NEGATIVE, mi, 3, 31, 5, 2, 4, 0.95, CASE_H0 | CASE_HT | (v ? 0 : CASE_REVERSE));
            lr_row(v, CASE_F64 | CASE_F32, LAYOUT_CONTIGUOUS, mi, 1, 1, 1, 1, 0, 0.5, CASE_H0 | CASE_HT | (v ? CASE_FD : 0));
            lr_row(v, CASE_F64, LAYOUT_PADDED, mi, 2, 131, 7, 5, 11, 0.97, CASE_HT);
        }
    /* linrec on CUDA: the fused Hillis-Steele levels at the tensor-core tile sizes the rows above
       miss (n = 64 and 128, n not a multiple of 8, m past one 8-column tile), forward and backward */
    for (v = 0; v < 2; ++v) {
        lr_row(v, CASE_F16 | CASE_F32, LAYOUT_CONTIGUOUS, SSM_LINREC_SCAN_HS, 3, 300, 64, 1, 0, 0.9, CASE_H0 | CASE_HT);
        lr_row(v, CASE_BF16, LAYOUT_PADDED, SSM_LINREC_SCAN_HS, 2, 100, 128, 5, 0, 0.9, CASE_H0);
        lr_row(v, CASE_F16 | CASE_F32, LAYOUT_REVERSED, SSM_LINREC_SCAN_HS, 2, 129, 50, 9, 0, 0.95, CASE_HT | CASE_REVERSE);
    }
    /* linrec on CUDA: the fused chunked kernel (partial tail, m = n), the per-step fallback
       (n = m = 128), and the tensor-core path (16-bit, n = 64, m = 1) over chunk lengths; above
       n = 64 its carries by cyclic reduction (f32 n = 96 on the CUDA-core chunks, 16-bit n = m = 72
       on the matrix-state kernel, a partial last chunk) */
    for (v = 0; v < 2; ++v) {
        lr_row(v, CASE_F32, LAYOUT_CONTIGUOUS, SSM_LINREC_CHUNKED, 2, 203, 16, 16, 16, 0.9, CASE_H0 | CASE_HT);
        lr_row(v, CASE_F32, LAYOUT_PADDED, SSM_LINREC_CHUNKED, 2, 203, 16, 16, 16, 0.9, CASE_H0 | CASE_HT | CASE_REVERSE);
        lr_row(v, CASE_F16, LAYOUT_CONTIGUOUS, SSM_LINREC_CHUNKED, 1, 40, 128, 128, 8, 0.9, CASE_H0 | CASE_HT);
        lr_row(v, CASE_F32, LAYOUT_PADDED, SSM_LINREC_CHUNKED, 2, 101, 96, 3, 8, 0.9, CASE_H0 | CASE_HT | CASE_REVERSE);
        lr_row(v, CASE_BF16, LAYOUT_CONTIGUOUS, SSM_LINREC_CHUNKED, 2, 77, 72, 72, 8, 0.95, CASE_HT);
    }
    lr_row(CASE_FWD, CASE_BF16, LAYOUT_CONTIGUOUS, SSM_LINREC_AUTO, 1, 300, 128, 1, 8, 0.9, CASE_H0 | CASE_HT);
    {
        static const int64_t Tt[6] = {2, 3, 17, 65, 300, 1000}, Cs[4] = {0, 16, 37, 1};
        for (k = 0, ti = 0; ti < 6; ++ti)
            for (v = 0; v < 4; ++v, ++k) {
                int layout = k % 7 == 3 ? LAYOUT_PADDED : LAYOUT_CONTIGUOUS;
                unsigned flags = (k % 2 ? CASE_H0 : 0) | (k % 3 ? CASE_HT : 0) | (k % 4 >= 2 ? CASE_REVERSE : 0) |
                                 (layout ? CASE_RANK3 : 0);
                int method = k % 5 == 4 ? SSM_LINREC_AUTO : SSM_LINREC_CHUNKED;
                if (Cs[v] == 1 && Tt[ti] > 65) continue;
                lr_row(CASE_FWD, k % 2 ? CASE_BF16 : CASE_F16, layout, method, 1 + k % 3, Tt[ti], 64, 1, Cs[v], 0.9, flags);
                if (Tt[ti] <= 300)
                    lr_row(CASE_BWD, k % 2 ? CASE_BF16 : CASE_F16, layout, method, 1 + k % 3, Tt[ti], 64, 1, Cs[v], 0.9, flags);
            }
    }
    /* the tensor-core path on zero-filled tiles: n = 16..56 by 8 (64-wide tiles) and n = 72..128
       by 8 (128-wide), 16-bit and f32, through chunked, cyclic reduction (spans + reduced
       carries) and auto, forward and backward (the adjoint's transposed A), chunks 0 / 16 / 37 */
    {
        static const int64_t Np[6] = {16, 24, 32, 40, 48, 56}, Nw[8] = {128, 72, 80, 88, 96, 104, 112, 120};
        static const int64_t Nf[7] = {64, 16, 24, 32, 40, 48, 56};
        lr_tc_sweep(Np, 6, 18, CASE_F16, CASE_BF16, 0);
        lr_tc_sweep(Nw, 8, 16, CASE_F16, CASE_BF16, 0);
        lr_tc_sweep(Nf, 7, 14, CASE_F32, CASE_F32, 0); /* f32 (3xTF32) */
        lr_tc_sweep(Nw, 8, 16, CASE_F32, CASE_F32, 0);
    }
    /* ragged tiles (n % 8 != 0, every tile width; odd n: 16-bit rows at even and odd halfs), f32
       and 16-bit; A sliced off its first column (rows at odd element offsets, off 16-byte
       boundaries at any n, n = 64 / 128 / 32 too); padded rows and a reversed view */
    {
        static const int64_t Nr[6] = {100, 17, 127, 36, 90, 61}, Ns[6] = {64, 100, 17, 128, 36, 32};
        lr_tc_sweep(Nr, 6, 12, CASE_F16, CASE_BF16, 0);
        lr_tc_sweep(Nr, 6, 12, CASE_F32, CASE_F32, 0);
        lr_tc_sweep(Ns, 6, 12, CASE_F16, CASE_BF16, CASE_SLICED);
        lr_tc_sweep(Ns, 6, 12, CASE_F32, CASE_F32, CASE_SLICED);
        for (v = 0; v < 2; ++v) {
            lr_row(v, CASE_F16 | CASE_F32, LAYOUT_PADDED, SSM_LINREC_CHUNKED, 2, 150, 100, 1, 16, 0.9, CASE_H0 | CASE_HT);
            lr_row(v, CASE_BF16, LAYOUT_REVERSED, SSM_LINREC_CHUNKED, 2, 99, 45, 1, 0, 0.9, CASE_HT | CASE_REVERSE);
        }
    }
    /* matrix states (m >= 8) on CUDA's tensor-core recurrence kernel: 16-bit n = 8..128 by 8
       (tiles of 32, 64 and 128 columns, zero-filled past n), f32 n = 8..64 by 4 (3xTF32), m from
       8 to past one CTA's columns, the chunk products in the same kernel; sequential, chunked
       and auto, forward and backward (the adjoint's transposed A). Odd n and m stay on the CUDA
       cores (rows above). */
    {
        static const int64_t n16[8] = {64, 8, 24, 128, 40, 96, 16, 72}, n32[5] = {32, 12, 64, 44, 8};
        static const int64_t ms[5] = {8, 16, 0 /* m = n */, 21, 136}, Tm[5] = {65, 300, 2, 1000, 129}, Cm[3] = {0, 16, 37};
        static const int methods[4] = {SSM_LINREC_CHUNKED, SSM_LINREC_SEQUENTIAL, SSM_LINREC_AUTO, SSM_LINREC_CHUNKED};
        for (k = 0; k < 30; ++k) {
            const unsigned dt = k % 3 == 0 ? CASE_F16 : k % 3 == 1 ? CASE_BF16 : CASE_F32;
            const int64_t n = dt == CASE_F32 ? n32[k % 5] : n16[k % 8], m = ms[k % 5] ? ms[k % 5] : n;
            const int64_t T = n * m > 64 * 64 && Tm[(k / 2) % 5] > 300 ? 129 : Tm[(k / 2) % 5];
            const unsigned flags = (k % 2 ? CASE_H0 : 0) | (k % 5 != 1 ? CASE_HT : 0) | (k % 7 >= 4 ? CASE_REVERSE : 0);
            const int layout = k % 6 == 5 ? LAYOUT_REVERSED : LAYOUT_CONTIGUOUS;
            lr_row(CASE_FWD, dt, layout, methods[k % 4], 1 + k % 3, T, n, m, Cm[(k / 4) % 3], 0.9, flags);
            if (T <= 300) lr_row(CASE_BWD, dt, layout, methods[(k + 1) % 4], 1 + k % 3, T, n, m, Cm[(k / 3) % 3], 0.9, flags);
        }
    }
    /* cyclic reduction and Blelloch of matrix states (16-bit, m > 8) on CUDA's task kernel: their
       first levels read b itself (16-byte rows by cp.async where m % 8 == 0, the last 16-column
       product half past m at m = 24; rows of 4-element vectors at m = 100; element by element at
       m = 21) or, for other views, a copy of it; at n > 64 a state wider than 64 columns is staged
       in 64-column blocks (two at m = 128, the second partial at m = 100); forward and backward
       (transposed A) */
    {
        static const int64_t nb[6] = {128, 72, 128, 100, 40, 64}, mb[6] = {128, 100, 21, 72, 24, 64};
        static const int64_t Tb[6] = {33, 64, 7, 18, 50, 129};
        for (k = 0; k < 12; ++k) {
            const int i = k / 2, method = k % 2 ? SSM_LINREC_BLELLOCH : SSM_LINREC_CR;
            const unsigned flags = (k % 3 ? CASE_H0 : 0) | (k % 4 != 1 ? CASE_HT : 0) | (k == 2 || k == 7 ? CASE_REVERSE : 0);
            const int layout = i == 3 ? LAYOUT_REVERSED : LAYOUT_CONTIGUOUS;
            lr_row(CASE_FWD, k % 4 < 2 ? CASE_F16 : CASE_BF16, layout, method, 2, Tb[i], nb[i], mb[i], 0, 0.9, flags);
            lr_row(CASE_BWD, k % 4 < 2 ? CASE_BF16 : CASE_F16, layout, method, 2, Tb[i], nb[i], mb[i], 0, 0.9, flags);
        }
    }
    /* Blelloch of vector states (16-bit) where the adjoint's transposed A is staged as stored and
       its products kept transposed (n % 8 == 0: 16-byte rows), and where it is not (n = 20);
       f32 above n = 64: m = 1 on the tensor-core chunks, m = 2..8 where auto takes Blelloch for
       2 <= S < 40 and seq from S = 40 */
    for (v = 0; v < 2; ++v) {
        lr_row(v, CASE_F16, LAYOUT_CONTIGUOUS, SSM_LINREC_BLELLOCH, 2, 131, 64, 1, 0, 0.9, CASE_H0 | CASE_HT);
        lr_row(v, CASE_BF16, LAYOUT_REVERSED, SSM_LINREC_BLELLOCH, 3, 100, 32, 1, 0, 0.95, CASE_HT | CASE_REVERSE);
        lr_row(v, CASE_F16, LAYOUT_PADDED, SSM_LINREC_BLELLOCH, 2, 77, 128, 4, 0, 0.9, CASE_H0 | CASE_REVERSE);
        lr_row(v, CASE_BF16, LAYOUT_CONTIGUOUS, SSM_LINREC_BLELLOCH, 1, 64, 20, 1, 0, 0.9, CASE_H0 | CASE_HT);
        lr_row(v, CASE_F32, LAYOUT_CONTIGUOUS, SSM_LINREC_AUTO, 2, 300, 128, 1, 0, 0.9, CASE_H0 | CASE_HT);
        lr_row(v, CASE_F32, LAYOUT_PADDED, SSM_LINREC_AUTO, 3, 101, 96, 3, 0, 0.9, CASE_HT | CASE_REVERSE);
        lr_row(v, CASE_F32, LAYOUT_CONTIGUOUS, SSM_LINREC_AUTO, 41, 70, 72, 2, 0, 0.9, CASE_H0); /* seq from S = 40 */
    }
    /* Hillis-Steele's first level on the adjoint's transposed 16-bit A, staged as stored, its
       products written back untransposed for the chains after it (m <= 8) or the task kernel */
    for (v = 0; v < 2; ++v) {
        lr_row(v, CASE_F16, LAYOUT_CONTIGUOUS, SSM_LINREC_SCAN_HS, 2, 77, 32, 16, 0, 0.9, CASE_H0 | CASE_HT);
        lr_row(v, CASE_BF16, LAYOUT_REVERSED, SSM_LINREC_SCAN_HS, 3, 45, 128, 1, 0, 0.95, CASE_HT | CASE_REVERSE);
        lr_row(v, CASE_F16, LAYOUT_PADDED, SSM_LINREC_SCAN_HS, 1, 130, 64, 4, 0, 0.9, CASE_H0);
    }
    /* the tensor-core path's two-level carries (from 128 chunk maps a sequence, in groups of 8 up to 1279;
       the last group partial: 140 maps at T = 2250, chunks of 16; or a single map: 137 at
       T = 2200, 129 at T = 8300 with the default 64), every tile width, forward and backward */
    lr_row(CASE_FWD, CASE_F16, LAYOUT_CONTIGUOUS, SSM_LINREC_CHUNKED, 2, 2200, 64, 1, 16, 0.9, CASE_H0 | CASE_HT);
    lr_row(CASE_BWD, CASE_BF16, LAYOUT_CONTIGUOUS, SSM_LINREC_AUTO, 2, 2200, 24, 1, 16, 0.9, CASE_H0 | CASE_HT | CASE_REVERSE);
    lr_row(CASE_FWD, CASE_F16, LAYOUT_CONTIGUOUS, SSM_LINREC_AUTO, 1, 2250, 128, 1, 16, 0.9, CASE_HT | CASE_REVERSE);
    lr_row(CASE_BWD, CASE_F16, LAYOUT_CONTIGUOUS, SSM_LINREC_CHUNKED, 1, 2250, 120, 1, 16, 0.9, CASE_H0);
    lr_row(CASE_FWD, CASE_F32, LAYOUT_CONTIGUOUS, SSM_LINREC_CHUNKED, 3, 2200, 32, 1, 16, 0.9, CASE_H0 | CASE_HT);
    lr_row(CASE_BWD, CASE_F32, LAYOUT_CONTIGUOUS, SSM_LINREC_AUTO, 2, 2250, 56, 1, 16, 0.9, CASE_HT | CASE_REVERSE);
    lr_row(CASE_FWD, CASE_F16, LAYOUT_CONTIGUOUS, SSM_LINREC_AUTO, 1, 8300, 64, 1, 0, 0.9, CASE_H0 | CASE_HT);
    /* groups of 16 from 1280 maps: 1287 at T = 20600, chunks of 16, the last group 7 maps */
    lr_row(CASE_FWD, CASE_F16, LAYOUT_CONTIGUOUS, SSM_LINREC_AUTO, 1, 20600, 64, 1, 16, 0.9, CASE_HT);
    /* more than 65535 sequences (the CUDA grid's y limit) in every kernel family: seq,
       chunked, cr, the tensor-core path */
    for (v = 0; v < 2; ++v) {
        lr_row(v, CASE_F32, LAYOUT_CONTIGUOUS, SSM_LINREC_SEQUENTIAL, 65537, 3, 2, 1, 0, 0.9, CASE_H0 | CASE_HT | CASE_GPU_ONLY);
        lr_row(v, CASE_BF16, LAYOUT_CONTIGUOUS, SSM_LINREC_CHUNKED, 65537, 9, 2, 2, 2, 0.9,
               CASE_H0 | CASE_HT | CASE_REVERSE | CASE_GPU_ONLY);
        lr_row(v, CASE_F16, LAYOUT_PADDED, SSM_LINREC_CR, 65537, 5, 3, 1, 0, 0.9, CASE_HT | CASE_RANK3 | CASE_GPU_ONLY);
    }
    lr_row(CASE_FWD, CASE_F16, LAYOUT_CONTIGUOUS, SSM_LINREC_CHUNKED, 65537, 2, 64, 1, 1, 0.9, CASE_H0 | CASE_HT | CASE_GPU_ONLY);
    /* cyclic reduction on CUDA: tensor-core spans with the carries reduced (16-bit, n = 64,
       m = 1; T not a multiple of the span, spans 16 / 37 / 64 / 128), and the level kernels
       (odd n, m = 1 and m = n, n = 128, every R of the product tiles) */
    {
        static const int64_t Tc[5] = {2, 65, 300, 1000, 4099}, Cc[4] = {0, 16, 37, 128};
        for (k = 0, ti = 0; ti < 5; ++ti)
            for (v = 0; v < 4; ++v, ++k) {
                int layout = k % 5 == 3 ? LAYOUT_PADDED : LAYOUT_CONTIGUOUS;
                unsigned flags = (k % 2 ? CASE_H0 : 0) | (k % 3 ? CASE_HT : 0) | (k % 4 >= 2 ? CASE_REVERSE : 0) |
                                 (layout ? CASE_RANK3 : 0) | (Tc[ti] > 1000 ? CASE_GPU_ONLY : 0);
                if (Tc[ti] > 1000 && v != 0) continue;
                lr_row(CASE_FWD, k % 2 ? CASE_BF16 : CASE_F16, layout, SSM_LINREC_CR, 1 + k % 3, Tc[ti], 64, 1, Cc[v], 0.9, flags);
                if (Tc[ti] <= 300)
                    lr_row(CASE_BWD, k % 2 ? CASE_F16 : CASE_BF16, layout, SSM_LINREC_CR, 1 + k % 3, Tc[ti], 64, 1, Cc[v], 0.9, flags);
            }
    }
    /* Blelloch on CUDA's tensor-core shapes: spans reduced on tensor cores and the sweeps over
       their carries (T not a multiple of the span; spans 16 / 37 / 64, so 1 to 256 carries; 16-bit
       n = 64 / 48 / 128 / 32, f32 n = 64 / 48 / 32 / 16); forward and backward (the adjoint's
       transposed A) */
    {
        static const int64_t Tb[4] = {66, 300, 1000, 4099}, Cb[3] = {0, 16, 37};
        static const int64_t nb16[4] = {64, 48, 128, 32}, nb32[4] = {64, 48, 32, 16};
        for (k = 0; k < 12; ++k) {
            const unsigned dt = k % 3 == 0 ? CASE_F32 : k % 3 == 1 ? CASE_F16 : CASE_BF16;
            const int64_t T = Tb[k % 4], n = dt == CASE_F32 ? nb32[(k / 3) % 4] : nb16[(k / 3) % 4];
            const int layout = k % 5 == 3 ? LAYOUT_PADDED : LAYOUT_CONTIGUOUS;
            const unsigned flags = (k % 2 ? CASE_H0 : 0) | (k % 3 != 1 ? CASE_HT : 0) | (k % 4 >= 2 ? CASE_REVERSE : 0) |
                                   (layout ? CASE_RANK3 : 0) | (T > 1000 ? CASE_GPU_ONLY : 0);
            lr_row(CASE_FWD, dt, layout, SSM_LINREC_BLELLOCH, 1 + k % 3, T, n, 1, Cb[(k / 4) % 3], 0.9, flags);
            if (T <= 300) lr_row(CASE_BWD, dt, layout, SSM_LINREC_BLELLOCH, 1 + k % 3, T, n, 1, Cb[(k / 2) % 3], 0.9, flags);
        }
    }
    for (v = 0; v < 2; ++v) {
        lr_row(v, CASE_F32 | CASE_BF16, LAYOUT_PADDED, SSM_LINREC_CR, 2, 203, 33, 33, 0, 0.9, CASE_H0 | CASE_HT | CASE_REVERSE);
        lr_row(v, CASE_F16, LAYOUT_CONTIGUOUS, SSM_LINREC_CR, 1, 40, 128, 128, 0, 0.9, CASE_H0 | CASE_HT);
        lr_row(v, CASE_F32 | CASE_F16, LAYOUT_REVERSED, SSM_LINREC_CR, 2, 77, 127, 1, 0, 0.9, CASE_HT | CASE_RANK3);
        lr_row(v, CASE_F32, LAYOUT_NEGATIVE, SSM_LINREC_CR, 3, 129, 17, 5, 0, 0.95, CASE_H0 | (v ? 0 : CASE_REVERSE));
        lr_row(v, CASE_BF16, LAYOUT_CONTIGUOUS, SSM_LINREC_CR, 2, 300, 64, 64, 0, 0.9, CASE_H0 | CASE_HT);
        /* f32 at a tensor-core shape, padded: CUDA's spans decline the view (the CUDA-core chunks) */
        lr_row(v, CASE_F32, LAYOUT_PADDED, SSM_LINREC_CR, 2, 129, 32, 1, 0, 0.9, CASE_H0 | CASE_HT);
        /* CUDA's level kernels on tiles of vector rows (m % 4 == 0, aligned; the backward's
           transposed A loaded along its columns): R = 8 and 4, 16-bit A and b in 8-byte pieces */
        lr_row(v, CASE_F32, LAYOUT_CONTIGUOUS, SSM_LINREC_CR, 2, 100, 128, 128, 0, 0.9, CASE_H0 | CASE_HT);
        lr_row(v, CASE_F32, LAYOUT_CONTIGUOUS, SSM_LINREC_CR, 3, 77, 64, 20, 0, 0.9, CASE_HT | CASE_REVERSE);
        lr_row(v, CASE_F16 | CASE_BF16, LAYOUT_CONTIGUOUS, SSM_LINREC_CR, 2, 150, 24, 4, 0, 0.9, CASE_H0 | CASE_HT);
        lr_row(v, CASE_F32, LAYOUT_PADDED, SSM_LINREC_CR, 2, 65, 40, 8, 0, 0.9, CASE_H0);
        /* R = 8 on the tensor cores: cr in two column blocks at n < 64 < m (the second block has
           only state columns; n % 8 != 0: the zeroed k-slab), HS / Blelloch in two row blocks at
           n = 100, m = 70 (the second block 36 rows; Blelloch's up-sweep writes its rows of M_t
           in place) */
        lr_row(v, CASE_F32, LAYOUT_CONTIGUOUS, SSM_LINREC_CR, 2, 50, 37, 90, 0, 0.9, CASE_H0 | CASE_HT);
        lr_row(v, CASE_F32, LAYOUT_REVERSED, SSM_LINREC_SCAN_HS, 2, 41, 100, 70, 0, 0.9, CASE_H0 | CASE_HT);
        lr_row(v, CASE_F32, LAYOUT_CONTIGUOUS, SSM_LINREC_BLELLOCH, 1, 45, 100, 70, 0, 0.9, CASE_HT | CASE_REVERSE);
    }
    /* wide states (m > 8) on CUDA's tensor-core task kernel: Hillis-Steele, Blelloch and cyclic
       reduction, v rows by vectors (m % 4 == 0, contiguous) and element by element (padded,
       reversed, odd m), T odd and even, forward and backward */
    for (v = 0; v < 2; ++v) {
        lr_row(v, CASE_F16, LAYOUT_CONTIGUOUS, SSM_LINREC_SCAN_HS, 2, 300, 64, 64, 0, 0.9, CASE_H0 | CASE_HT);
        lr_row(v, CASE_BF16, LAYOUT_CONTIGUOUS, SSM_LINREC_BLELLOCH, 2, 301, 64, 64, 0, 0.9, CASE_H0 | CASE_HT | CASE_REVERSE);
        lr_row(v, CASE_F16 | CASE_BF16, LAYOUT_PADDED, SSM_LINREC_BLELLOCH, 2, 129, 48, 36, 0, 0.9, CASE_HT);
        lr_row(v, CASE_F16, LAYOUT_CONTIGUOUS, SSM_LINREC_CR, 3, 257, 32, 32, 0, 0.9, CASE_H0 | CASE_HT);
        lr_row(v, CASE_BF16, LAYOUT_REVERSED, SSM_LINREC_CR, 2, 100, 40, 24, 0, 0.9, CASE_H0 | CASE_HT | CASE_REVERSE);
        lr_row(v, CASE_F16, LAYOUT_CONTIGUOUS, SSM_LINREC_CR, 1, 1000, 16, 20, 0, 0.95, CASE_H0);
        lr_row(v, CASE_BF16, LAYOUT_PADDED, SSM_LINREC_CR, 2, 64, 24, 13, 0, 0.9, CASE_HT | CASE_REVERSE);
        lr_row(v, CASE_F16, LAYOUT_CONTIGUOUS, SSM_LINREC_CR, 2, 2, 16, 16, 0, 0.9, CASE_H0 | CASE_HT);
        lr_row(v, CASE_BF16, LAYOUT_CONTIGUOUS, SSM_LINREC_CR, 3, 3, 32, 12, 0, 0.9, CASE_HT | CASE_REVERSE);
        lr_row(v, CASE_F16, LAYOUT_PADDED, SSM_LINREC_CR, 2, 77, 32, 20, 0, 0.9, CASE_H0 | CASE_HT); /* h padded: no fold */
    }
    /* linrec with no sequences: nothing to do, nothing written */
    lr_row(CASE_FWD, CASE_F64 | CASE_F32, LAYOUT_CONTIGUOUS, SSM_LINREC_AUTO, 0, 5, 3, 2, 0, 0.5, CASE_H0 | CASE_HT);
    lr_row(CASE_BWD, CASE_F64 | CASE_F32, LAYOUT_CONTIGUOUS, SSM_LINREC_AUTO, 0, 5, 3, 2, 0, 0.5, CASE_H0 | CASE_HT);

    /* decay: T in {1, 2, 7, 64, 100}, both input forms, odd R and C, every layout */
    for (ti = 0; ti < 5; ++ti)
        for (v = 0; v < 4; ++v) {
            static const int64_t Td[5] = {1, 2, 7, 64, 100};
            unsigned flags = (v / 2 ? CASE_PER_STEP : 0) | ((ti + v) % 2 ? CASE_H0 : 0) | (v != 1 ? CASE_HT : 0);
            unsigned dt = v % 2 ? CASE_F32 : CASE_F64 | CASE_F16;
            dk_rows(dt, (ti + v) % 3, 2, Td[ti], 3 + v, 5 - v % 3, ti % 2 ? 3.0 : 0.1, flags, 0);
            if (!(v % 2) && Td[ti] <= 64)
                dk_row(CASE_BWD, CASE_F64, (ti + v) % 3, 2, Td[ti] > 9 ? 9 : Td[ti], 2, 3, ti % 2 ? 3.0 : 0.1, flags | CASE_FD);
        }
    /* T = 65536 with decays up to -8 per step: cA reaches -2.6e5 (exp(cA) underflows) */
    dk_rows(CASE_F32, LAYOUT_CONTIGUOUS, 1, 65536, 2, 3, 8.0, CASE_H0 | CASE_HT, 0);
    dk_rows(CASE_F32, LAYOUT_CONTIGUOUS, 1, 65536, 2, 3, 8.0, CASE_H0 | CASE_HT | CASE_PER_STEP, 0);
    /* forward and backward over T up to 1000 in every CUDA dtype (f32 on the CPU too) */
    for (k = 0, v = 0; v < 3; ++v)
        for (ti = 0; ti < 6; ++ti)
            for (l = 0; l < 2; ++l, ++k) {
                static const int64_t Td[6] = {1, 2, 7, 64, 100, 1000};
                unsigned flags = (l ? CASE_PER_STEP : 0) | (k % 2 ? CASE_H0 : 0) | (k % 3 != 2 ? CASE_HT : 0);
                dk_rows(v == 0 ? CASE_F32 : v == 1 ? CASE_F16 : CASE_BF16, k % 4 == 1 ? LAYOUT_PADDED : LAYOUT_CONTIGUOUS,
                        1 + k % 3, Td[ti], k % 2 ? 3 : 4, k % 3 == 0 ? 8 : (k % 3 == 1 ? 16 : 5), 0.5, flags, 1);
            }
    /* long and strong (many look-back chunks on CUDA), wide rows, transposed and negative
       strides, size-1 dims, no batches */
    dk_rows(CASE_F32, LAYOUT_CONTIGUOUS, 2, 20000, 3, 8, 3.0, CASE_H0 | CASE_HT | CASE_PER_STEP, 1);
    dk_rows(CASE_F32, LAYOUT_CONTIGUOUS, 2, 20000, 3, 8, 0.05, CASE_H0 | CASE_HT, 1);
    dk_rows(CASE_F16, LAYOUT_CONTIGUOUS, 2, 300, 64, 64, 0.1, CASE_H0 | CASE_HT, 1);
    dk_rows(CASE_F32, LAYOUT_CONTIGUOUS, 2, 300, 64, 64, 0.1, CASE_H0 | CASE_HT | CASE_PER_STEP, 1);
    dk_rows(CASE_BF16, LAYOUT_CONTIGUOUS, 3, 1000, 5, 96, 0.1, CASE_H0 | CASE_HT, 1);
    dk_rows(CASE_F32, LAYOUT_CONTIGUOUS, 65537, 3, 1, 8, 0.5, CASE_H0 | CASE_HT | CASE_PER_STEP | CASE_GPU_ONLY, 1);
    dk_rows(CASE_F16, LAYOUT_CONTIGUOUS, 65537, 3, 1, 5, 0.5, CASE_H0 | CASE_HT | CASE_GPU_ONLY, 1);
    dk_rows(CASE_F64 | CASE_F32, LAYOUT_REVERSED, 3, 97, 5, 7, 0.7, CASE_H0 | CASE_HT | CASE_PER_STEP, 1);
    dk_rows(CASE_F64 | CASE_F32, LAYOUT_NEGATIVE, 2, 53, 3, 4, 0.7, CASE_H0 | CASE_HT, 1);
    dk_rows(CASE_F64 | CASE_F32, LAYOUT_NEGATIVE, 2, 11, 2, 3, 0.4, CASE_H0 | CASE_HT | CASE_PER_STEP | CASE_FD, 1);
    dk_rows(CASE_F64 | CASE_F32, LAYOUT_CONTIGUOUS, 1, 1, 1, 1, 0.5, CASE_H0 | CASE_HT | CASE_FD, 1);
    dk_rows(CASE_F64 | CASE_F32, LAYOUT_PADDED, 1, 13, 1, 1, 0.5, CASE_HT | CASE_PER_STEP | CASE_FD, 1);
    dk_rows(CASE_F64 | CASE_F32, LAYOUT_CONTIGUOUS, 0, 7, 3, 2, 0.5, CASE_H0 | CASE_HT, 1);

    /* bell: odd sizes in every layout, B in {16, 32, 64}, size 1, finite differences */
    for (l = 0; l < LAYOUT_COUNT; ++l) {
        bell_rows(CASE_F64, l, 7, 3, 5, 2, 3, l != 1 ? CASE_BIAS : 0);
        bell_rows(CASE_F32, l, 5, 2, 4, 4, 5, CASE_BIAS);
    }
    bell_rows(CASE_F64, LAYOUT_CONTIGUOUS, 1, 1, 1, 1, 1, CASE_BIAS);
    bell_rows(CASE_F32, LAYOUT_CONTIGUOUS, 9, 3, 4, 2, 16, CASE_BIAS);
    bell_rows(CASE_F64, LAYOUT_PADDED, 3, 2, 3, 2, 32, CASE_BIAS);
    bell_rows(CASE_F32, LAYOUT_CONTIGUOUS, 2, 2, 2, 1, 64, 0);
    /* 16-bit with aligned rows, where CUDA takes its TMA + wgmma kernels on an H100 / H200: B = 64
       with more tokens than a 256-token tile and an odd R (a half pair), B = 32 with a group of 4
       block-rows cut short; padded rows for the kernels those fall back to */
    bell_rows(CASE_F16 | CASE_BF16, LAYOUT_CONTIGUOUS, 300, 3, 5, 2, 64, CASE_BIAS);
    bell_rows(CASE_F16 | CASE_BF16, LAYOUT_CONTIGUOUS, 259, 5, 6, 3, 32, CASE_BIAS);
    bell_rows(CASE_BF16, LAYOUT_PADDED, 70, 2, 3, 2, 64, 0);
    bell_rows(CASE_F64, LAYOUT_PADDED, 4, 3, 5, 3, 2, CASE_BIAS | CASE_FD);
    row(CASE_BELL, CASE_FWD, CASE_F64 | CASE_F32, LAYOUT_CONTIGUOUS, 0, 2, 3, 2, 2)->flags = CASE_BIAS;

    /* proj: the chain of every activation, both paths and save modes, every layout;
       backward against finite differences; a GDN-like chain; size 1; no rows */
    for (l = 0; l < LAYOUT_COUNT; ++l)
        for (path = 0; path < 2; ++path)
            for (save = 0; save < 2; ++save) {
                if (l == LAYOUT_NEGATIVE && save) continue;
                pj_row(CASE_FWD, CASE_F32, l, 13, 7, path, 0, save ? CASE_SAVE : 0, 4);
                pj_row(CASE_FWD, CASE_F64, l, 13, 7, path, 0, save ? CASE_SAVE : 0, 4);
            }
    for (path = 0; path < 2; ++path)
        for (save = 0; save < 2; ++save) {
            pj_row(CASE_BWD, CASE_F64, (path + save) % 3, 5, 6, path, 0, save ? CASE_SAVE : 0, 0);
            pj_row(CASE_BWD, CASE_F32, (path + 2 * save + 1) % 3, 5, 6, path, 0, save ? CASE_SAVE : 0, 0);
            pj_row(CASE_BWD, CASE_F64, LAYOUT_NEGATIVE, 4, 5, path, 1, save ? CASE_SAVE : 0, 0);
        }
    for (v = 0; v < 2; ++v) {
        pj_row(v, CASE_F64 | CASE_F32, LAYOUT_PADDED, 37, 24, SSM_PROJ_FUSED, 1, CASE_SAVE, 8);
        pj_row(v, CASE_F64 | CASE_F32, LAYOUT_CONTIGUOUS, 1, 1, SSM_PROJ_UNFUSED, 0, 0, 0);
        pj_row(v, CASE_F64 | CASE_F32, LAYOUT_CONTIGUOUS, 0, 5, SSM_PROJ_FUSED, 1, CASE_SAVE, 0);
    }

    /* proj at GPU tile scale (the fused kernel: 16-bit, K % 8 == 0, K-contiguous x and W):
       several row tiles with a ragged last one, heads inside and across the 128-column
       tiles, SAVE_PRE and SAVE_NONE; the same chains on the fallback paths (UNFUSED, padded
       layouts, K % 8 != 0); backward of the tile-scale chain against finite differences */
    pj_row(CASE_FWD, CASE_CUDA_DTYPES, LAYOUT_CONTIGUOUS, 133, 64, SSM_PROJ_FUSED, 2, CASE_SAVE, 0);
    pj_row(CASE_FWD, CASE_CUDA_DTYPES, LAYOUT_CONTIGUOUS, 257, 40, SSM_PROJ_FUSED, 3, 0, 0);
    pj_row(CASE_FWD, CASE_CUDA_DTYPES, LAYOUT_CONTIGUOUS, 257, 40, SSM_PROJ_FUSED, 3, CASE_SAVE, 0);
    pj_row(CASE_FWD, CASE_CUDA_DTYPES, LAYOUT_CONTIGUOUS, 13, 8, SSM_PROJ_FUSED, 0, CASE_SAVE, 0);
    pj_row(CASE_FWD, CASE_CUDA_DTYPES, LAYOUT_CONTIGUOUS, 61, 64, SSM_PROJ_UNFUSED, 2, CASE_SAVE, 0);
    pj_row(CASE_FWD, CASE_CUDA_DTYPES, LAYOUT_PADDED, 67, 24, SSM_PROJ_FUSED, 3, CASE_SAVE, 0);
    pj_row(CASE_FWD, CASE_CUDA_DTYPES, LAYOUT_NEGATIVE, 29, 16, SSM_PROJ_FUSED, 2, 0, 0);
    pj_row(CASE_FWD, CASE_CUDA_DTYPES, LAYOUT_CONTIGUOUS, 31, 7, SSM_PROJ_FUSED, 0, 0, 0);
    pj_row(CASE_FWD, CASE_CUDA_DTYPES, LAYOUT_CONTIGUOUS, 0, 16, SSM_PROJ_FUSED, 2, CASE_SAVE, 0);
    pj_row(CASE_BWD, CASE_CUDA_DTYPES, LAYOUT_CONTIGUOUS, 5, 8, SSM_PROJ_FUSED, 2, CASE_SAVE, 0);
    pj_row(CASE_BWD, CASE_CUDA_DTYPES, LAYOUT_PADDED, 3, 8, SSM_PROJ_FUSED, 3, 0, 0);
    pj_row(CASE_BWD, CASE_CUDA_DTYPES, LAYOUT_CONTIGUOUS, 4, 6, SSM_PROJ_UNFUSED, 0, CASE_SAVE, 0);
    pj_row(CASE_BWD, CASE_CUDA_DTYPES, LAYOUT_NEGATIVE, 5, 5, SSM_PROJ_FUSED, 1, 0, 0);
    pj_row(CASE_BWD, CASE_CUDA_DTYPES, LAYOUT_CONTIGUOUS, 0, 8, SSM_PROJ_FUSED, 2, 0, 0);

    /* outchain: both gates, with/without weight and rstd, every layout, whole-width norm */
    for (gate = 0; gate < 2; ++gate)
        for (l = 0; l < 3; ++l) {
            oc_rows(CASE_F64, l, 7, 12, 4, 5, gate, (l != 1 ? CASE_WEIGHT : 0) | (l != 2 ? CASE_RSTD : 0), 3);
            oc_rows(CASE_F32, (l + 1) % 3, 7, 12, 4, 5, gate, (l != 2 ? CASE_WEIGHT : 0) | (l != 0 ? CASE_RSTD : 0), 3);
        }
    oc_rows(CASE_F64 | CASE_F32, LAYOUT_NEGATIVE, 5, 9, 3, 4, 0, CASE_WEIGHT | CASE_RSTD, 2);
    oc_rows(CASE_F64 | CASE_F32, LAYOUT_PADDED, 6, 10, 0, 3, 1, CASE_WEIGHT, 0);
    oc_rows(CASE_F64 | CASE_F32, LAYOUT_CONTIGUOUS, 1, 3, 3, 1, 0, CASE_WEIGHT | CASE_RSTD, 0);
    oc_rows(CASE_F64 | CASE_F32, LAYOUT_CONTIGUOUS, 0, 8, 4, 3, 0, CASE_WEIGHT | CASE_RSTD, 0);
    /* outchain in every GPU dtype: heads of 64 and 32, a whole-width 48, odd M */
    oc_rows(CASE_CUDA_DTYPES, LAYOUT_CONTIGUOUS, 3, 128, 64, 5, 0, CASE_WEIGHT | CASE_RSTD, 0);
    oc_rows(CASE_CUDA_DTYPES, LAYOUT_PADDED, 5, 64, 32, 7, 1, CASE_WEIGHT, 0);
    oc_rows(CASE_CUDA_DTYPES, LAYOUT_NEGATIVE, 3, 48, 0, 4, 0, CASE_RSTD, 0);
    oc_rows(CASE_CUDA_DTYPES, LAYOUT_CONTIGUOUS, 0, 64, 64, 4, 0, CASE_WEIGHT | CASE_RSTD, 0);
    /* 16-bit with aligned rows (CUDA's vector passes): a last step of 256 columns half used,
       heads of 128, 256 and 8, more rows than one block of the backward's dweight partials
       (small widths: the backward is checked by finite differences of every element) */
    oc_rows(CASE_F16 | CASE_BF16, LAYOUT_CONTIGUOUS, 3, 384, 128, 3, 1, CASE_WEIGHT | CASE_RSTD, 0);
    oc_rows(CASE_F16 | CASE_BF16, LAYOUT_CONTIGUOUS, 5, 512, 256, 3, 0, CASE_WEIGHT, 0);
    oc_rows(CASE_BF16, LAYOUT_CONTIGUOUS, 130, 24, 8, 3, 0, CASE_WEIGHT | CASE_RSTD, 0);
    oc_rows(CASE_F16, LAYOUT_CONTIGUOUS, 150, 16, 8, 2, 1, CASE_WEIGHT, 0);

    /* delta: DeltaNet (rank-4 and rank-5 k/v), Gated DeltaNet, DeltaProduct (n_h = 2), both
       methods (and AUTO), T from 0 to 131 across chunk boundaries, odd K != V, every layout */
    {
        static const int64_t Tl[7] = {0, 1, 2, 17, 64, 67, 131}, KV[6][2] = {{5, 3}, {17, 33}, {33, 17}, {16, 16}, {8, 5}, {5, 17}};
        static const int64_t Cs[4] = {0, 16, 5, 1};
        static const int64_t Tb[4] = {0, 1, 2, 17}, KVb[3][2] = {{5, 3}, {3, 4}, {4, 5}}, Cb[4] = {4, 3, 0, 1};
        static const int64_t Tw[3] = {64, 67, 131}, KVw[3][2] = {{17, 33}, {33, 17}, {5, 17}};
        int fam, m;
        for (k = 0, ti = 0; ti < 7; ++ti)
            for (fam = 0; fam < 3; ++fam)
                for (m = 0; m < 2; ++m, ++k) {
                    int method = k % 5 == 4 ? SSM_DELTA_AUTO : m ? SSM_DELTA_CHUNKED : SSM_DELTA_RECURRENT;
                    int nh = fam == 2 ? 2 : fam == 0 && k % 3 == 0 ? 1 : 0;
                    double gate = fam == 1 ? (k % 2 ? 1.0 : 3.0) : fam == 2 && k % 2 ? 0.5 : 0.0;
                    unsigned flags = (k % 2 ? CASE_H0 : 0) | (k % 3 != 1 ? CASE_HT : 0);
                    dl_row(CASE_FWD, CASE_HOST_DTYPES | CASE_CUDA_DTYPES, k % 4, method, 2, Tl[ti], 2, KV[k % 6][0],
                           KV[k % 6][1], nh, gate, Cs[k % 4], flags);
                }
        /* gradients: small shapes against finite differences too, larger ones against the adjoint */
        for (k = 0, ti = 0; ti < 4; ++ti)
            for (fam = 0; fam < 3; ++fam)
                for (m = 0; m < 2; ++m, ++k) {
                    int nh = fam == 2 ? 2 : fam == 0 && k % 3 == 0 ? 1 : 0;
                    unsigned flags = (k % 4 != 1 ? CASE_H0 : 0) | (k % 3 != 2 ? CASE_HT : 0) | CASE_FD;
                    dl_row(CASE_BWD, CASE_HOST_DTYPES | CASE_CUDA_DTYPES, k % 4, m ? SSM_DELTA_CHUNKED : SSM_DELTA_RECURRENT,
                           2, Tb[ti], 2, KVb[k % 3][0], KVb[k % 3][1], nh, fam == 1 || (fam == 2 && k % 2) ? 1.0 : 0.0,
                           Cb[k % 4], flags);
                }
        for (k = 0, ti = 0; ti < 3; ++ti)
            for (fam = 0; fam < 3; ++fam)
                for (m = 0; m < 2; ++m, ++k) {
                    unsigned flags = (k % 2 ? CASE_H0 : 0) | (k % 3 != 1 ? CASE_HT : 0);
                    dl_row(CASE_BWD, CASE_HOST_DTYPES | CASE_CUDA_DTYPES, (k + 1) % 4,
                           k % 5 == 4 ? SSM_DELTA_AUTO : m ? SSM_DELTA_CHUNKED : SSM_DELTA_RECURRENT, 2, Tw[ti], 2,
                           KVw[k % 3][0], KVw[k % 3][1], fam == 2 ? 2 : 0, fam ? 0.5 : 0.0, k % 2 ? 16 : 0, flags);
                }
        /* varlen (empty sequences allowed), i32 and i64 offsets, forward and backward */
        for (k = 0; k < 12; ++k) {
            static const int64_t Tv[6] = {17, 67, 131, 64, 2, 0};
            int fam2 = k % 3, dir = k / 6;
            unsigned flags = CASE_VARLEN | (k % 2 ? CASE_CU64 : 0) | (k % 4 != 3 ? CASE_H0 : 0) | (k % 3 != 2 ? CASE_HT : 0);
            int64_t T = dir ? (k % 6 < 3 ? 13 : Tv[k % 6]) : Tv[k % 6];
            dl_row(dir, CASE_HOST_DTYPES | CASE_CUDA_DTYPES, k % 4, k % 4 < 2 ? SSM_DELTA_CHUNKED : SSM_DELTA_RECURRENT,
                   3 + k % 3, T, 2, dir ? 4 : 17, dir ? 3 : 33, fam2 == 2 ? 2 : 0, fam2 ? 1.0 : 0.0, 3 + k % 5,
                   flags | (dir && T <= 13 ? CASE_FD : 0));
        }
        /* strong gates (g down to -20: exp(G_i - G_j) underflows), many chunks (several
           16-chunk segments of the chunked backward), one sequence of one head */
        dl_row(CASE_FWD, CASE_HOST_DTYPES | CASE_CUDA_DTYPES, LAYOUT_CONTIGUOUS, SSM_DELTA_CHUNKED, 2, 131, 2, 8, 6, 0, 20.0, 64,
               CASE_H0 | CASE_HT);
        dl_row(CASE_BWD, CASE_F64, LAYOUT_PADDED, SSM_DELTA_CHUNKED, 2, 9, 2, 3, 4, 0, 20.0, 4, CASE_H0 | CASE_HT | CASE_FD);
        dl_row(CASE_BWD, CASE_F64, LAYOUT_NEGATIVE, SSM_DELTA_CHUNKED, 1, 40, 1, 3, 2, 0, 1.0, 1, CASE_H0 | CASE_HT | CASE_FD);
        dl_row(CASE_BWD, CASE_HOST_DTYPES | CASE_CUDA_DTYPES, LAYOUT_REVERSED, SSM_DELTA_CHUNKED, 2, 131, 2, 5, 3, 2, 1.0, 2,
               CASE_H0 | CASE_HT);
        dl_row(CASE_FWD, CASE_HOST_DTYPES | CASE_CUDA_DTYPES, LAYOUT_CONTIGUOUS, SSM_DELTA_AUTO, 1, 1, 1, 1, 1, 0, 0.0, 0,
               CASE_H0 | CASE_HT);
        dl_row(CASE_BWD, CASE_HOST_DTYPES | CASE_CUDA_DTYPES, LAYOUT_CONTIGUOUS, SSM_DELTA_AUTO, 1, 1, 1, 1, 1, 0, 0.5, 0,
               CASE_H0 | CASE_HT | CASE_FD);
        dl_row(CASE_FWD, CASE_HOST_DTYPES | CASE_CUDA_DTYPES, LAYOUT_CONTIGUOUS, SSM_DELTA_AUTO, 0, 5, 2, 3, 2, 0, 0.5, 0,
               CASE_H0 | CASE_HT);
    }
}

const op_case *cases_table(int *count) {
    if (!table_n) build();
    if (count) *count = table_n;
    return table;
}

static void case_name(const op_case *c, ssm_dtype dt, char *buf, size_t cap) {
    static const char *flag_names[] = {"h0", "hT", "rev", "per-step", "bias", "save", "weight", "rstd", "fd", "rank3", "gpu-limit", "varlen", "cu64", "sliced"};
    const case_op_info *info = &case_ops[c->op];
    size_t len;
    int i;
    len = (size_t)snprintf(buf, cap, "%s%s%s %s %s", cases_label ? cases_label : "", cases_label ? ": " : "", info->name, c->dir ? "bwd" : "fwd", ssm_dtype_name(dt));
    if (c->op == CASE_LINREC) len += (size_t)snprintf(buf + len, cap - len, " %s", ssm_linrec_method_name((ssm_linrec_method)c->variant));
    if (c->op == CASE_PROJ) len += (size_t)snprintf(buf + len, cap - len, " %s chain%d", c->variant ? "unfused" : "fused", c->chain);
    if (c->op == CASE_OUTCHAIN) len += (size_t)snprintf(buf + len, cap - len, " %s", c->variant ? "sigmoid" : "silu");
    if (c->op == CASE_DELTA)
        len += (size_t)snprintf(buf + len, cap - len, " %s %s%s", ssm_delta_method_name((ssm_delta_method)c->variant),
                                c->chain > 1 ? "DeltaProduct" : c->param > 0 ? "GatedDeltaNet" : "DeltaNet",
                                c->chain == 1 ? " rank5" : "");
    if (c->op == CASE_DELTA && c->chain > 1) len += (size_t)snprintf(buf + len, cap - len, " nh%d", c->chain);
    for (i = 0; i < 5 && info->dims[i] && len < cap; ++i)
        len += (size_t)snprintf(buf + len, cap - len, " %s%lld", info->dims[i], (long long)c->dim[i]);
    if (len < cap) len += (size_t)snprintf(buf + len, cap - len, " %s", layout_name(c->layout));
    if (c->chunk && len < cap) len += (size_t)snprintf(buf + len, cap - len, " chunk%lld", (long long)c->chunk);
    if (c->param != 0 && len < cap) len += (size_t)snprintf(buf + len, cap - len, " p%g", c->param);
    for (i = 0; i < (int)(sizeof flag_names / sizeof *flag_names) && len < cap; ++i)
        if (c->flags & (1u << i)) len += (size_t)snprintf(buf + len, cap - len, " %s", flag_names[i]);
}

/* whether name holds one of the comma-separated pieces of list */
static int name_matches(const char *name, const char *list) {
    char piece[128];
    while (*list) {
        size_t k = strcspn(list, ",");
        if (k && k < sizeof piece) {
            memcpy(piece, list, k), piece[k] = 0;
            if (strstr(name, piece)) return 1;
        }
        list += k + (list[k] == ',');
    }
    return 0;
}

void cases_run(unsigned dtypes, int op) {
    int n, i;
    unsigned bit;
    const op_case *rows = cases_table(&n);
    char name[256];
    static long seen; /* (row, dtype) pairs met so far, over every call: the shard index */
    for (i = 0; i < n; ++i) {
        if (op >= 0 && (int)rows[i].op != op) continue;
        if (cases_variant >= 0 && rows[i].variant != cases_variant) continue;
        if ((rows[i].flags & CASE_GPU_ONLY) && !test_mem) continue;
        for (bit = 1; bit <= CASE_BF16; bit <<= 1) {
            ssm_dtype dt = dtype_of(bit);
            if (!(rows[i].dtypes & dtypes & bit)) continue;
            if (cases_shards > 1 && seen++ % cases_shards != cases_shard) continue;
            case_name(&rows[i], dt, name, sizeof name);
            if (cases_exclude && name_matches(name, cases_exclude)) continue;
            if (cases_match && !name_matches(name, cases_match)) continue;
            test_begin(name);
            case_ops[rows[i].op].run(&rows[i], dt);
            test_end();
        }
    }
}

void suite_cases(void) { cases_run(CASE_HOST_DTYPES, -1); }
