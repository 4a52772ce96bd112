/* Decay scan: against the O(T^2) definition in f64, finite-difference gradients in both
   input forms, stability at T = 65536 with strong decays. */
#include "test.h"

/* out[b,t,r,c] = sum_{j<=t} exp(cA_t - cA_j) x_j + exp(cA_t) h0, straight from the
   definition (cA from per-step a by summation, cA_{-1} = 0); window: terms with
   cA_t - cA_j < -60 are below 1e-26 of their x and are skipped. */
static void ref_decay(int64_t B, int64_t T, int64_t R, int64_t C, const double *ld, int per_step,
                      const double *x, const double *h0, double *out, double *hT) {
    int64_t b, t, j, r, c;
    double *cA = (double *)malloc(sizeof(double) * (size_t)(T));
    for (b = 0; b < B; ++b)
        for (r = 0; r < R; ++r) {
            double run = 0;
            for (t = 0; t < T; ++t) {
                double v = ld[(b * T + t) * R + r];
                run = per_step ? run + v : v;
                cA[t] = run;
            }
            for (t = 0; t < T; ++t)
                for (c = 0; c < C; ++c) {
                    double acc = h0 ? exp(cA[t]) * h0[(b * R + r) * C + c] : 0.0;
                    for (j = t; j >= 0; --j) {
                        double dl = cA[t] - cA[j];
                        if (dl < -60) break;
                        acc += exp(dl) * x[((b * T + j) * R + r) * C + c];
                    }
                    out[((b * T + t) * R + r) * C + c] = acc;
                    if (hT && t == T - 1) hT[(b * R + r) * C + c] = acc;
                }
        }
    free(cA);
}

typedef struct dk_case {
    ssm_dtype dt;
    int64_t B, T, R, C;
    int per_step, layout, use_h0, use_hT;
    double strength; /* per-step log decays in [-strength, 0] */
} dk_case;

/* log decays for a case: per-step values, or their running sum. */
static void make_log_decay(const dk_case *c, double *ld) {
    int64_t b, t, r;
    for (b = 0; b < c->B; ++b)
        for (r = 0; r < c->R; ++r) {
            double run = 0;
            for (t = 0; t < c->T; ++t) {
                double a = -c->strength * test_uniform(0.0, 1.0);
                run += a;
                ld[(b * c->T + t) * c->R + r] = c->per_step ? a : run;
            }
        }
}

static void forward_case(const dk_case *c) {
    char name[160];
    ssm_ctx *ctx;
    int64_t sx[4] = {c->B, c->T, c->R, c->C}, sl[3] = {c->B, c->T, c->R}, s0[3] = {c->B, c->R, c->C};
    int64_t nx = c->B * c->T * c->R * c->C, nl = c->B * c->T * c->R, n0 = c->B * c->R * c->C;
    double *ld = (double *)malloc(sizeof(double) * (size_t)nl), *x, *h0, *ref, *refT, *got, *gotT;
    tbuf tl, tx, th0, tout, thT;
    ssm_decay_desc d = ssm_decay_desc_init();
    double tol = c->dt.bits == 64 ? 1e-11 : 1e-5, e;
    sprintf(name, "decay fwd %s B%lld T%lld R%lld C%lld %s layout%d h0%d hT%d strength%g", ssm_dtype_name(c->dt),
            (long long)c->B, (long long)c->T, (long long)c->R, (long long)c->C, c->per_step ? "per-step" : "cumulative",
            c->layout, c->use_h0, c->use_hT, c->strength);
    test_begin(name);
    ctx = test_ctx();
    make_log_decay(c, ld);
    tl = tb_new(c->dt, 3, sl, c->layout);
    tb_set(&tl, ld);
    tb_get(&tl, ld);
    tx = tb_random(c->dt, 4, sx, c->layout, 1.0, &x);
    th0 = tb_random(c->dt, 3, s0, c->layout, 1.0, &h0);
    tout = tb_new(c->dt, 4, sx, c->layout);
    thT = tb_new(c->dt, 3, s0, c->layout);
    ref = (double *)malloc(sizeof(double) * (size_t)nx);
    got = (double *)malloc(sizeof(double) * (size_t)nx);
    refT = (double *)malloc(sizeof(double) * (size_t)n0);
    gotT = (double *)malloc(sizeof(double) * (size_t)n0);
    ref_decay(c->B, c->T, c->R, c->C, ld, c->per_step, x, c->use_h0 ? h0 : NULL, ref, refT);
    d.input = c->per_step ? SSM_DECAY_PER_STEP : SSM_DECAY_CUMULATIVE;
    CHECK_OK(ssm_decay_forward(ctx, &d, &tl.t, &tx.t, c->use_h0 ? &th0.t : NULL, &tout.t, c->use_hT ? &thT.t : NULL), ctx);
    tb_get(&tout, got);
    e = rel_err(got, ref, nx);
    CHECK(e <= tol, "out rel err %.3e", e);
    if (c->use_hT) {
        tb_get(&thT, gotT);
        e = rel_err(gotT, refT, n0);
        CHECK(e <= tol, "hT rel err %.3e", e);
    }
    CHECK(tb_outside_untouched(&tout), "writes outside the out view");
    tb_free(&tl); tb_free(&tx); tb_free(&th0); tb_free(&tout); tb_free(&thT);
    free(ld); free(x); free(h0); free(ref); free(got); free(refT); free(gotT);
    ssm_ctx_destroy(ctx);
    test_end();
}

/* loss = sum(W .* out) + sum(WT .* hT) through the reference definition */
static double dk_loss(const dk_case *c, const double *ld, const double *x, const double *h0, const double *W,
                      const double *WT, double *ob, double *oT) {
    int64_t nx = c->B * c->T * c->R * c->C, n0 = c->B * c->R * c->C, i;
    double L = 0;
    ref_decay(c->B, c->T, c->R, c->C, ld, c->per_step, x, c->use_h0 ? h0 : NULL, ob, oT);
    for (i = 0; i < nx; ++i) L += W[i] * ob[i];
    if (c->use_hT) for (i = 0; i < n0; ++i) L += WT[i] * oT[i];
    return L;
}

static void backward_case(const dk_case *c) {
    char name[160];
    ssm_ctx *ctx;
    int64_t sx[4] = {c->B, c->T, c->R, c->C}, sl[3] = {c->B, c->T, c->R}, s0[3] = {c->B, c->R, c->C};
    int64_t nx = c->B * c->T * c->R * c->C, nl = c->B * c->T * c->R, n0 = c->B * c->R * c->C, i, k;
    double *ld = (double *)malloc(sizeof(double) * (size_t)nl), *x, *h0, *W, *WT;
    double *gx = (double *)malloc(sizeof(double) * (size_t)nx), *gl = (double *)malloc(sizeof(double) * (size_t)nl);
    double *g0 = (double *)malloc(sizeof(double) * (size_t)n0), *ob = (double *)malloc(sizeof(double) * (size_t)nx);
    double *oT = (double *)malloc(sizeof(double) * (size_t)n0);
    tbuf tl, tx, th0, tout, tW, tWT, tdx, tdl, td0;
    ssm_decay_desc d = ssm_decay_desc_init();
    sprintf(name, "decay bwd+fd %s B%lld T%lld R%lld C%lld %s layout%d h0%d hT%d", ssm_dtype_name(c->dt),
            (long long)c->B, (long long)c->T, (long long)c->R, (long long)c->C, c->per_step ? "per-step" : "cumulative",
            c->layout, c->use_h0, c->use_hT);
    test_begin(name);
    ctx = test_ctx();
    make_log_decay(c, ld);
    tl = tb_new(c->dt, 3, sl, c->layout);
    tb_set(&tl, ld);
    tx = tb_random(c->dt, 4, sx, c->layout, 1.0, &x);
    th0 = tb_random(c->dt, 3, s0, c->layout, 1.0, &h0);
    tW = tb_random(c->dt, 4, sx, c->layout, 1.0, &W);
    tWT = tb_random(c->dt, 3, s0, c->layout, 1.0, &WT);
    tout = tb_new(c->dt, 4, sx, c->layout);
    tdx = tb_new(c->dt, 4, sx, c->layout);
    tdl = tb_new(c->dt, 3, sl, c->layout);
    td0 = tb_new(c->dt, 3, s0, c->layout);
    d.input = c->per_step ? SSM_DECAY_PER_STEP : SSM_DECAY_CUMULATIVE;
    CHECK_OK(ssm_decay_forward(ctx, &d, &tl.t, &tx.t, c->use_h0 ? &th0.t : NULL, &tout.t, NULL), ctx);
    CHECK_OK(ssm_decay_backward(ctx, &d, &tl.t, c->use_h0 ? &th0.t : NULL, &tout.t, &tW.t, c->use_hT ? &tWT.t : NULL,
                                &tdx.t, &tdl.t, &td0.t), ctx);
    tb_get(&tdx, gx);
    tb_get(&tdl, gl);
    tb_get(&td0, g0);
    for (k = 0; k < 3; ++k) { /* x, log_decay, h0 */
        double *v = k == 0 ? x : k == 1 ? ld : h0, *g = k == 0 ? gx : k == 1 ? gl : g0;
        int64_t cnt = k == 0 ? nx : k == 1 ? nl : n0;
        double *fd = (double *)malloc(sizeof(double) * (size_t)cnt), e;
        if (k == 2 && !c->use_h0) { free(fd); continue; }
        for (i = 0; i < cnt; ++i) {
            double keep = v[i], lp, lm, eps = 1e-6;
            v[i] = keep + eps;
            lp = dk_loss(c, ld, x, h0, W, WT, ob, oT);
            v[i] = keep - eps;
            lm = dk_loss(c, ld, x, h0, W, WT, ob, oT);
            v[i] = keep;
            fd[i] = (lp - lm) / (2 * eps);
        }
        e = rel_err(g, fd, cnt);
        CHECK(e <= 1e-6, "%s vs finite differences: %.3e", k == 0 ? "dx" : k == 1 ? "dlog_decay" : "dh0", e);
        free(fd);
    }
    tb_free(&tl); tb_free(&tx); tb_free(&th0); tb_free(&tout); tb_free(&tW); tb_free(&tWT);
    tb_free(&tdx); tb_free(&tdl); tb_free(&td0);
    free(ld); free(x); free(h0); free(W); free(WT); free(gx); free(gl); free(g0); free(ob); free(oT);
    ssm_ctx_destroy(ctx);
    test_end();
}

/* T = 65536, decays up to -8 per step: cA reaches about -2.6e5, where exp(cA) underflows
   and exp(-cA) overflows; the scan must stay finite and match the windowed definition. */
static void long_sequence(int per_step) {
    dk_case c;
    c.dt = SSM_F32;
    c.B = 1, c.T = 65536, c.R = 2, c.C = 3;
    c.per_step = per_step;
    c.layout = LAYOUT_CONTIGUOUS;
    c.use_h0 = 1, c.use_hT = 1;
    c.strength = 8.0;
    forward_case(&c);
}

/* A -inf per-step decay is a full reset: the state restarts from x_t. */
static void reset_step(void) {
    ssm_ctx *ctx;
    int64_t sx[4] = {1, 3, 1, 1}, sl[3] = {1, 3, 1};
    double ld[3] = {-0.5, -INFINITY, -0.25}, x[3] = {1.0, 2.0, 3.0}, out[3];
    tbuf tl = tb_new(SSM_F64, 3, sl, LAYOUT_CONTIGUOUS), tx = tb_new(SSM_F64, 4, sx, LAYOUT_CONTIGUOUS);
    tbuf to = tb_new(SSM_F64, 4, sx, LAYOUT_CONTIGUOUS);
    ssm_decay_desc d = ssm_decay_desc_init();
    test_begin("decay per-step -inf resets the state");
    ctx = test_ctx();
    tb_set(&tl, ld);
    tb_set(&tx, x);
    d.input = SSM_DECAY_PER_STEP;
    CHECK_OK(ssm_decay_forward(ctx, &d, &tl.t, &tx.t, NULL, &to.t, NULL), ctx);
    tb_get(&to, out);
    CHECK(out[0] == 1.0 && out[1] == 2.0 && fabs(out[2] - (3.0 + exp(-0.25) * 2.0)) < 1e-15, "reset: %g %g %g", out[0],
          out[1], out[2]);
    tb_free(&tl); tb_free(&tx); tb_free(&to);
    ssm_ctx_destroy(ctx);
    test_end();
}

/* ssm_decay_workspace_size validates like the op and answers what the op takes: a
   caller-owned workspace of that size runs forward and backward. */
static void workspace_query(void) {
    ssm_ctx *ctx = test_ctx(), *own = NULL;
    ssm_ctx_config cfg = ssm_ctx_config_init();
    ssm_decay_desc d = ssm_decay_desc_init();
    int64_t sx[4] = {2, 9, 3, 5}, sl[3] = {2, 9, 3}, s0[3] = {2, 3, 5};
    size_t fwd = 1, bwd = 0;
    void *buf;
    test_begin("decay workspace_size: validation, and an exact caller-owned workspace");
    CHECK(ssm_decay_workspace_size(ctx, &d, SSM_F32, -1, 9, 3, 5, 0, &fwd) == SSM_ERROR_INVALID_SHAPE, "B < 0");
    CHECK(ssm_decay_workspace_size(ctx, &d, SSM_F32, 2, 9, 0, 5, 0, &fwd) == SSM_ERROR_INVALID_SHAPE, "R = 0");
    CHECK(ssm_decay_workspace_size(ctx, &d, SSM_F16, 2, 9, 3, 5, 0, &fwd) == SSM_ERROR_INVALID_DTYPE, "f16 on a CPU");
    d.input = (ssm_decay_input)7;
    CHECK(ssm_decay_workspace_size(ctx, &d, SSM_F32, 2, 9, 3, 5, 0, &fwd) == SSM_ERROR_INVALID_VALUE, "input kind 7");
    CHECK(ssm_decay_workspace_size(ctx, &d, SSM_F32, 2, 9, 3, 5, 0, NULL) == SSM_ERROR_NULL_ARGUMENT, "NULL bytes");
    CHECK(fwd == 0, "a failed query leaves 0 bytes");
    d.input = SSM_DECAY_PER_STEP;
    CHECK_OK(ssm_decay_workspace_size(ctx, &d, SSM_F64, 2, 9, 3, 5, 0, &fwd), ctx);
    CHECK_OK(ssm_decay_workspace_size(ctx, &d, SSM_F64, 2, 9, 3, 5, 1, &bwd), ctx);
    CHECK(fwd > 0 && bwd > 0, "the scan keeps a state: %zu / %zu bytes", fwd, bwd);
    cfg.workspace_bytes = fwd > bwd ? fwd : bwd;
    buf = malloc(cfg.workspace_bytes);
    cfg.workspace = buf;
    cfg.backend = test_backend;
    CHECK_OK(ssm_ctx_create(&cfg, &own), own);
    if (own) {
        tbuf tl = tb_random(SSM_F64, 3, sl, LAYOUT_CONTIGUOUS, 0.3, NULL), tx = tb_random(SSM_F64, 4, sx, LAYOUT_CONTIGUOUS, 1.0, NULL);
        tbuf to = tb_new(SSM_F64, 4, sx, LAYOUT_CONTIGUOUS), tdx = tb_new(SSM_F64, 4, sx, LAYOUT_CONTIGUOUS);
        tbuf tdl = tb_new(SSM_F64, 3, sl, LAYOUT_CONTIGUOUS), tT = tb_new(SSM_F64, 3, s0, LAYOUT_CONTIGUOUS);
        CHECK_OK(ssm_decay_forward(own, &d, &tl.t, &tx.t, NULL, &to.t, &tT.t), own);
        CHECK_OK(ssm_decay_backward(own, &d, &tl.t, NULL, &to.t, &tx.t, NULL, &tdx.t, &tdl.t, NULL), own);
        tb_free(&tl); tb_free(&tx); tb_free(&to); tb_free(&tdx); tb_free(&tdl); tb_free(&tT);
        ssm_ctx_destroy(own);
    }
    free(buf);
    ssm_ctx_destroy(ctx);
    test_end();
}

void suite_decay(void) {
    static const int64_t Ts[5] = {1, 2, 7, 64, 100};
    int ti, v;
    for (ti = 0; ti < 5; ++ti)
        for (v = 0; v < 4; ++v) {
            dk_case c;
            c.dt = v % 2 ? SSM_F32 : SSM_F64;
            c.B = 2, c.T = Ts[ti], c.R = 3 + v, c.C = 5 - v % 3;
            c.per_step = v / 2;
            c.layout = (ti + v) % 3;
            c.use_h0 = (ti + v) % 2;
            c.use_hT = v != 1;
            c.strength = ti % 2 ? 3.0 : 0.1;
            forward_case(&c);
            if (c.dt.bits == 64 && c.T <= 64) {
                c.T = c.T > 9 ? 9 : c.T;
                c.R = 2, c.C = 3;
                backward_case(&c);
            }
        }
    long_sequence(0);
    long_sequence(1);
    reset_step();
    workspace_query();
}
