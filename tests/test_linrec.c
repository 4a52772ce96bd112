/* Dense linear recurrence: every method against an independent f64 sequential oracle
   (forward and adjoint), finite-difference gradients, product counts. */
#include "test.h"

/* ---- the oracle: plain loops over contiguous f64 arrays, written independently ---- */
static void ref_forward(int64_t S, int64_t T, int64_t n, int64_t m, const double *A, const double *b,
                        const double *h0, int reverse, double *h, double *hT) {
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

/* Adjoint of ref_forward for the loss sum(dh .* h) + sum(dhT .* hT). */
static void ref_backward(int64_t S, int64_t T, int64_t n, int64_t m, const double *A, const double *h0,
                         const double *h, const double *dh, const double *dhT, int reverse, double *dA,
                         double *db, double *dh0) {
    int64_t s, k, t, i, j, c;
    double *g = (double *)calloc((size_t)(n * m), sizeof(double)), *gn = (double *)calloc((size_t)(n * m), sizeof(double));
    for (s = 0; s < S; ++s) {
        for (i = 0; i < n * m; ++i) g[i] = dhT ? dhT[s * n * m + i] : 0.0;
        for (k = T - 1; k >= 0; --k) {
            t = reverse ? T - 1 - k : k;
            /* g (incoming from the later step, already multiplied) + dh_t */
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
            /* propagate: gn = A_t^T g */
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
    double *v = (double *)malloc(sizeof(double) * (size_t)n), *w = (double *)malloc(sizeof(double) * (size_t)n);
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

typedef struct lr_case {
    ssm_linrec_method method;
    ssm_dtype dt;
    int64_t S, T, n, m, chunk;
    double rho;
    int layout, use_h0, use_hT, reverse;
} lr_case;

static void forward_case(const lr_case *c) {
    char name[200];
    ssm_ctx *ctx;
    int64_t sA[4] = {c->S, c->T, c->n, c->n}, sb[4] = {c->S, c->T, c->n, c->m}, s0[3] = {c->S, c->n, c->m};
    int rank = c->m == 1 && c->layout != LAYOUT_CONTIGUOUS ? 3 : 4; /* m = 1 also as [S,T,n] */
    int64_t nA = c->S * c->T * c->n * c->n, nb = c->S * c->T * c->n * c->m, n0 = c->S * c->n * c->m;
    double *A = (double *)malloc(sizeof(double) * (size_t)nA), *b, *h0 = NULL, *href, *hTref, *got, *gotT;
    tbuf tA, tb, th0, th, thT;
    ssm_linrec_desc d = ssm_linrec_desc_init();
    ssm_linrec_stats st;
    double tol = c->dt.bits == 64 ? 1e-10 : 2e-4, e, eT = 0;
    sprintf(name, "linrec fwd %s %s S%lld T%lld n%lld m%lld rho%.2f layout%d h0%d hT%d rev%d chunk%lld",
            ssm_linrec_method_name(c->method), ssm_dtype_name(c->dt), (long long)c->S, (long long)c->T,
            (long long)c->n, (long long)c->m, c->rho, c->layout, c->use_h0, c->use_hT, c->reverse,
            (long long)c->chunk);
    test_begin(name);
    ctx = test_ctx();
    random_transitions(c->S * c->T, c->n, c->rho, A);
    tA = tb_new(c->dt, 4, sA, c->layout);
    tb_set(&tA, A);
    tb_get(&tA, A);
    tb = tb_random(c->dt, rank, sb, c->layout, 1.0, &b);
    th0 = tb_random(c->dt, rank - 1, s0, c->layout, 1.0, &h0);
    th = tb_new(c->dt, rank, sb, c->layout);
    thT = tb_new(c->dt, rank - 1, s0, c->layout);
    href = (double *)malloc(sizeof(double) * (size_t)nb);
    got = (double *)malloc(sizeof(double) * (size_t)nb);
    hTref = (double *)malloc(sizeof(double) * (size_t)n0);
    gotT = (double *)malloc(sizeof(double) * (size_t)n0);
    ref_forward(c->S, c->T, c->n, c->m, A, b, c->use_h0 ? h0 : NULL, c->reverse, href, hTref);
    d.method = c->method;
    d.chunk = c->chunk;
    d.reverse = c->reverse;
    d.stats = &st;
    CHECK_OK(ssm_linrec_forward(ctx, &d, &tA.t, &tb.t, c->use_h0 ? &th0.t : NULL, &th.t, c->use_hT ? &thT.t : NULL), ctx);
    tb_get(&th, got);
    e = rel_err(got, href, nb);
    if (c->use_hT) {
        tb_get(&thT, gotT);
        eT = rel_err(gotT, hTref, n0);
    } else {
        CHECK(tb_untouched(&thT), "hT written though not requested");
    }
    CHECK(e <= tol, "h rel err %.3e > %.1e", e, tol);
    CHECK(eT <= tol, "hT rel err %.3e > %.1e", eT, tol);
    CHECK(tb_outside_untouched(&th), "h: bytes outside the view were written");
    CHECK(st.method == (c->method == SSM_LINREC_AUTO ? st.method : c->method), "stats.method");
    CHECK(st.mat_state >= c->T - 1, "stats: %lld matrix-state products for T=%lld", (long long)st.mat_state, (long long)c->T);
    tb_free(&tA); tb_free(&tb); tb_free(&th0); tb_free(&th); tb_free(&thT);
    free(A); free(b); free(h0); free(href); free(got); free(hTref); free(gotT);
    ssm_ctx_destroy(ctx);
    test_end();
}

/* Loss for finite differences: sum(W .* h) + sum(WT .* hT) through the oracle. */
static double fd_loss(const lr_case *c, const double *A, const double *b, const double *h0, const double *W,
                      const double *WT, double *hbuf, double *hTbuf) {
    int64_t nb = c->S * c->T * c->n * c->m, n0 = c->S * c->n * c->m, i;
    double L = 0;
    ref_forward(c->S, c->T, c->n, c->m, A, b, c->use_h0 ? h0 : NULL, c->reverse, hbuf, hTbuf);
    for (i = 0; i < nb; ++i) L += W[i] * hbuf[i];
    if (c->use_hT) for (i = 0; i < n0; ++i) L += WT[i] * hTbuf[i];
    return L;
}

static double fd_check(const lr_case *c, double *x, int64_t count, const double *grad, double *A, double *b,
                       double *h0, const double *W, const double *WT, double *hb, double *hTb) {
    int64_t i;
    double *fd = (double *)malloc(sizeof(double) * (size_t)count), e;
    for (i = 0; i < count; ++i) {
        double keep = x[i], lp, lm, eps = 1e-6;
        x[i] = keep + eps;
        lp = fd_loss(c, A, b, h0, W, WT, hb, hTb);
        x[i] = keep - eps;
        lm = fd_loss(c, A, b, h0, W, WT, hb, hTb);
        x[i] = keep;
        fd[i] = (lp - lm) / (2 * eps);
    }
    e = rel_err(grad, fd, count);
    free(fd);
    return e;
}

/* Backward of the library vs central finite differences (f64), and vs the oracle adjoint. */
static void backward_case(const lr_case *c, int finite_differences) {
    char name[200];
    ssm_ctx *ctx;
    int64_t sA[4] = {c->S, c->T, c->n, c->n}, sb[4] = {c->S, c->T, c->n, c->m}, s0[3] = {c->S, c->n, c->m};
    int64_t nA = c->S * c->T * c->n * c->n, nb = c->S * c->T * c->n * c->m, n0 = c->S * c->n * c->m;
    double *A = (double *)malloc(sizeof(double) * (size_t)nA), *b, *h0, *W, *WT, *h;
    double *gA = (double *)malloc(sizeof(double) * (size_t)nA), *gb = (double *)malloc(sizeof(double) * (size_t)nb);
    double *g0 = (double *)malloc(sizeof(double) * (size_t)n0), *rA = (double *)malloc(sizeof(double) * (size_t)nA);
    double *rb = (double *)malloc(sizeof(double) * (size_t)nb), *r0 = (double *)malloc(sizeof(double) * (size_t)n0);
    double *hb = (double *)malloc(sizeof(double) * (size_t)nb), *hTb = (double *)malloc(sizeof(double) * (size_t)n0);
    tbuf tA, tb, th0, th, tW, tWT, tdA, tdb, tdh0;
    ssm_linrec_desc d = ssm_linrec_desc_init();
    double tol = c->dt.bits == 64 ? 1e-9 : 5e-4, e;
    sprintf(name, "linrec bwd%s %s %s S%lld T%lld n%lld m%lld layout%d h0%d hT%d rev%d chunk%lld",
            finite_differences ? "+fd" : "", ssm_linrec_method_name(c->method), ssm_dtype_name(c->dt), (long long)c->S,
            (long long)c->T, (long long)c->n, (long long)c->m, c->layout, c->use_h0, c->use_hT, c->reverse,
            (long long)c->chunk);
    test_begin(name);
    ctx = test_ctx();
    random_transitions(c->S * c->T, c->n, c->rho, A);
    tA = tb_new(c->dt, 4, sA, c->layout);
    tb_set(&tA, A);
    tb_get(&tA, A);
    tb = tb_random(c->dt, 4, sb, c->layout, 1.0, &b);
    th0 = tb_random(c->dt, 3, s0, c->layout, 1.0, &h0);
    tW = tb_random(c->dt, 4, sb, c->layout, 1.0, &W);
    tWT = tb_random(c->dt, 3, s0, c->layout, 1.0, &WT);
    th = tb_new(c->dt, 4, sb, c->layout);
    tdA = tb_new(c->dt, 4, sA, c->layout);
    tdb = tb_new(c->dt, 4, sb, c->layout);
    tdh0 = tb_new(c->dt, 3, s0, c->layout);
    h = (double *)malloc(sizeof(double) * (size_t)nb);
    d.method = c->method;
    d.chunk = c->chunk;
    d.reverse = c->reverse;
    CHECK_OK(ssm_linrec_forward(ctx, &d, &tA.t, &tb.t, c->use_h0 ? &th0.t : NULL, &th.t, NULL), ctx);
    tb_get(&th, h);
    CHECK_OK(ssm_linrec_backward(ctx, &d, &tA.t, c->use_h0 ? &th0.t : NULL, &th.t, &tW.t, c->use_hT ? &tWT.t : NULL,
                                 &tdA.t, &tdb.t, &tdh0.t), ctx);
    tb_get(&tdA, gA);
    tb_get(&tdb, gb);
    tb_get(&tdh0, g0);
    /* the oracle adjoint runs on the oracle's own forward states */
    ref_forward(c->S, c->T, c->n, c->m, A, b, c->use_h0 ? h0 : NULL, c->reverse, hb, hTb);
    ref_backward(c->S, c->T, c->n, c->m, A, c->use_h0 ? h0 : NULL, hb, W, c->use_hT ? WT : NULL, c->reverse, rA, rb, r0);
    e = rel_err(gA, rA, nA);
    CHECK(e <= tol, "dA vs oracle adjoint: %.3e", e);
    e = rel_err(gb, rb, nb);
    CHECK(e <= tol, "db vs oracle adjoint: %.3e", e);
    e = rel_err(g0, r0, n0);
    CHECK(e <= tol, "dh0 vs oracle adjoint: %.3e", e);
    CHECK(tb_outside_untouched(&tdA) && tb_outside_untouched(&tdb), "writes outside dA/db views");
    { /* dA = NULL: only db and dh0, the same values */
        tbuf tdb2 = tb_new(c->dt, 4, sb, c->layout), tdh02 = tb_new(c->dt, 3, s0, c->layout);
        double *gb2 = (double *)malloc(sizeof(double) * (size_t)nb), *g02 = (double *)malloc(sizeof(double) * (size_t)n0);
        CHECK_OK(ssm_linrec_backward(ctx, &d, &tA.t, c->use_h0 ? &th0.t : NULL, &th.t, &tW.t, c->use_hT ? &tWT.t : NULL,
                                     NULL, &tdb2.t, &tdh02.t), ctx);
        tb_get(&tdb2, gb2);
        tb_get(&tdh02, g02);
        CHECK(rel_err(gb2, gb, nb) <= tol * 1e-3, "db without dA: %.3e", rel_err(gb2, gb, nb));
        CHECK(rel_err(g02, g0, n0) <= tol * 1e-3, "dh0 without dA: %.3e", rel_err(g02, g0, n0));
        CHECK(tb_outside_untouched(&tdb2), "writes outside db (dA NULL)");
        tb_free(&tdb2); tb_free(&tdh02);
        free(gb2); free(g02);
    }
    if (finite_differences) {
        e = fd_check(c, A, nA, gA, A, b, h0, W, WT, hb, hTb);
        CHECK(e <= 1e-6, "dA vs finite differences: %.3e", e);
        e = fd_check(c, b, nb, gb, A, b, h0, W, WT, hb, hTb);
        CHECK(e <= 1e-6, "db vs finite differences: %.3e", e);
        if (c->use_h0) {
            e = fd_check(c, h0, n0, g0, A, b, h0, W, WT, hb, hTb);
            CHECK(e <= 1e-6, "dh0 vs finite differences: %.3e", e);
        }
    }
    tb_free(&tA); tb_free(&tb); tb_free(&th0); tb_free(&th); tb_free(&tW); tb_free(&tWT);
    tb_free(&tdA); tb_free(&tdb); tb_free(&tdh0);
    free(A); free(b); free(h0); free(W); free(WT); free(h); free(gA); free(gb); free(g0);
    free(rA); free(rb); free(r0); free(hb); free(hTb);
    ssm_ctx_destroy(ctx);
    test_end();
}

/* The seed's claim, made checkable: CR does ~6x fewer products than the HS scan at T=1024. */
static void product_counts(void) {
    static const int64_t Ts[3] = {64, 1000, 1024};
    int k;
    test_begin("linrec product counts: seq = T-1, CR ~ 3T, HS ~ 2T log T");
    for (k = 0; k < 3; ++k) {
        ssm_ctx *ctx = test_ctx();
        int64_t T = Ts[k], sh[4] = {1, T, 2, 2}, sv[4] = {1, T, 2, 1};
        tbuf tA = tb_random(SSM_F64, 4, sh, LAYOUT_CONTIGUOUS, 0.5, NULL), tb = tb_random(SSM_F64, 4, sv, 0, 1.0, NULL);
        tbuf th = tb_new(SSM_F64, 4, sv, LAYOUT_CONTIGUOUS);
        ssm_linrec_stats seq, cr, hs;
        ssm_linrec_desc d = ssm_linrec_desc_init();
        d.stats = &seq;
        d.method = SSM_LINREC_SEQUENTIAL;
        CHECK_OK(ssm_linrec_forward(ctx, &d, &tA.t, &tb.t, NULL, &th.t, NULL), ctx);
        d.stats = &cr;
        d.method = SSM_LINREC_CR;
        CHECK_OK(ssm_linrec_forward(ctx, &d, &tA.t, &tb.t, NULL, &th.t, NULL), ctx);
        d.stats = &hs;
        d.method = SSM_LINREC_SCAN_HS;
        CHECK_OK(ssm_linrec_forward(ctx, &d, &tA.t, &tb.t, NULL, &th.t, NULL), ctx);
        CHECK(seq.mat_mat == 0 && seq.mat_state == T - 1, "seq counts %lld %lld", (long long)seq.mat_mat, (long long)seq.mat_state);
        CHECK(cr.mat_mat < T && cr.mat_state < 2 * T, "cr counts %lld %lld", (long long)cr.mat_mat, (long long)cr.mat_state);
        if (T == 1024)
            CHECK((double)(hs.mat_mat + hs.mat_state) / (double)(cr.mat_mat + cr.mat_state) > 5.5,
                  "HS/CR product ratio %.2f", (double)(hs.mat_mat + hs.mat_state) / (double)(cr.mat_mat + cr.mat_state));
        CHECK(cr.flops < hs.flops, "CR flops %.3g >= HS flops %.3g", cr.flops, hs.flops);
        tb_free(&tA); tb_free(&tb); tb_free(&th);
        ssm_ctx_destroy(ctx);
    }
    test_end();
}

/* The size query validates like the op and answers what the op takes: negative sizes, an
   unknown method, chunk < 0 and a dtype the backend cannot compute in are errors; a
   caller-owned workspace of exactly the answered size runs every method. */
static void workspace_queries(void) {
    ssm_ctx *ctx = test_ctx();
    ssm_linrec_desc d = ssm_linrec_desc_init();
    size_t bytes = 1;
    int mi;
    test_begin("linrec workspace_size: validation, and an exact caller-owned workspace");
    CHECK(ssm_linrec_workspace_size(ctx, &d, SSM_F32, -1, 8, 2, 1, 0, &bytes) == SSM_ERROR_INVALID_SHAPE, "S < 0");
    CHECK(ssm_linrec_workspace_size(ctx, &d, SSM_F32, 1, 0, 2, 1, 0, &bytes) == SSM_ERROR_INVALID_SHAPE, "T = 0");
    CHECK(ssm_linrec_workspace_size(ctx, &d, SSM_F32, 1, 8, -2, 1, 1, &bytes) == SSM_ERROR_INVALID_SHAPE, "n < 0");
    CHECK(ssm_linrec_workspace_size(ctx, &d, SSM_BF16, 1, 8, 2, 1, 0, &bytes) == SSM_ERROR_INVALID_DTYPE, "bf16 on a CPU");
    CHECK(ssm_linrec_workspace_size(ctx, &d, SSM_I32, 1, 8, 2, 1, 0, &bytes) == SSM_ERROR_INVALID_DTYPE, "i32");
    d.method = (ssm_linrec_method)SSM_LINREC_METHOD_COUNT;
    CHECK(ssm_linrec_workspace_size(ctx, &d, SSM_F32, 1, 8, 2, 1, 0, &bytes) == SSM_ERROR_INVALID_VALUE, "method 6");
    d.method = SSM_LINREC_CHUNKED, d.chunk = -1;
    CHECK(ssm_linrec_workspace_size(ctx, &d, SSM_F32, 1, 8, 2, 1, 0, &bytes) == SSM_ERROR_INVALID_VALUE, "chunk < 0");
    CHECK(bytes == 0, "a failed query leaves 0 bytes");
    CHECK(strlen(ssm_ctx_last_error(ctx)) > 0, "a failed query sets the message");
    ssm_ctx_destroy(ctx);
    for (mi = 0; mi < SSM_LINREC_METHOD_COUNT; ++mi) {
        int64_t sA[4] = {3, 37, 4, 4}, sb[4] = {3, 37, 4, 2};
        ssm_ctx *probe = test_ctx(), *own = NULL;
        ssm_ctx_config cfg = ssm_ctx_config_init();
        size_t fwd = 0, bwd = 0;
        void *buf;
        tbuf tA = tb_random(SSM_F32, 4, sA, LAYOUT_CONTIGUOUS, 0.4, NULL), tb = tb_random(SSM_F32, 4, sb, 0, 1.0, NULL);
        tbuf th = tb_new(SSM_F32, 4, sb, LAYOUT_CONTIGUOUS), tdb = tb_new(SSM_F32, 4, sb, LAYOUT_CONTIGUOUS);
        d = ssm_linrec_desc_init();
        d.method = (ssm_linrec_method)mi, d.chunk = 5;
        CHECK_OK(ssm_linrec_workspace_size(probe, &d, SSM_F32, 3, 37, 4, 2, 0, &fwd), probe);
        CHECK_OK(ssm_linrec_workspace_size(probe, &d, SSM_F32, 3, 37, 4, 2, 1, &bwd), probe);
        cfg.workspace_bytes = fwd > bwd ? fwd : bwd;
        buf = malloc(cfg.workspace_bytes ? cfg.workspace_bytes : 1);
        cfg.backend = test_backend;
        cfg.workspace = cfg.workspace_bytes ? buf : NULL;
        CHECK_OK(ssm_ctx_create(&cfg, &own), own);
        if (own) {
            CHECK_OK(ssm_linrec_forward(own, &d, &tA.t, &tb.t, NULL, &th.t, NULL), own);
            CHECK_OK(ssm_linrec_backward(own, &d, &tA.t, NULL, &th.t, &tb.t, NULL, NULL, &tdb.t, NULL), own);
            ssm_ctx_destroy(own);
        }
        free(buf);
        tb_free(&tA); tb_free(&tb); tb_free(&th); tb_free(&tdb);
        ssm_ctx_destroy(probe);
    }
    test_end();
}

void suite_linrec(void) {
    static const int64_t Ts[7] = {1, 2, 3, 7, 64, 100, 1000}, ns[3] = {1, 4, 32};
    int mi, ti, ni, v;
    for (mi = 0; mi < SSM_LINREC_METHOD_COUNT; ++mi)
        for (ti = 0; ti < 7; ++ti)
            for (ni = 0; ni < 3; ++ni)
                for (v = 0; v < 2; ++v) {
                    /* two variants per shape cover dtypes, layouts, m, h0/hT, reverse, radius */
                    lr_case c;
                    c.method = (ssm_linrec_method)mi;
                    c.dt = v ? SSM_F32 : SSM_F64;
                    c.S = 2;
                    c.T = Ts[ti];
                    c.n = ns[ni];
                    c.m = v ? 3 : 1;
                    c.rho = (ti + v) % 2 ? 0.99 : 0.5;
                    c.layout = v ? (ti % 2 ? LAYOUT_PADDED : LAYOUT_REVERSED) : (ni == 1 ? LAYOUT_PADDED : LAYOUT_CONTIGUOUS);
                    c.use_h0 = (ti + ni + v) % 2;
                    c.use_hT = (ti + v) % 2 == 0 || ni == 2;
                    c.reverse = (ti + ni) % 3 == 1;
                    c.chunk = ti < 4 ? 3 : (v ? 7 : 0);
                    if (c.n == 32 && c.T == 1000 && c.method == SSM_LINREC_SCAN_HS && v) c.S = 1;
                    forward_case(&c);
                }
    for (mi = 0; mi < SSM_LINREC_METHOD_COUNT; ++mi)
        for (ti = 0; ti < 5; ++ti) {
            static const int64_t Tb[5] = {1, 2, 3, 7, 12};
            lr_case c;
            c.method = (ssm_linrec_method)mi;
            c.dt = SSM_F64;
            c.S = 2;
            c.T = Tb[ti];
            c.n = 3;
            c.m = ti % 2 ? 2 : 1;
            c.rho = 0.9;
            c.layout = ti % 3;
            c.use_h0 = ti != 1;
            c.use_hT = ti % 2 == 0;
            c.reverse = ti == 3 || ti == 4;
            c.chunk = ti == 4 ? 5 : 3;
            backward_case(&c, 1);
            /* larger, f32, strided: against the oracle adjoint */
            c.dt = SSM_F32;
            c.T = ti == 4 ? 1000 : 37 * (ti + 1);
            c.n = ti % 2 ? 4 : 5;
            c.m = 3 - ti % 2;
            c.layout = LAYOUT_PADDED;
            c.chunk = 7;
            backward_case(&c, 0);
        }
    product_counts();
    workspace_queries();
}
