/* Decay scan: the special-purpose checks. Forward and backward in both input forms, long
   sequences with strong decays, and finite differences are rows of the case table
   (tests/cases.h). */
#include "test.h"

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

/* ---- context parallelism: ranks as threads (tests/test.h's cp_world) ------------------------- */
typedef struct dk_rank {
    cp_peer peer;
    ssm_ctx *ctx;
    ssm_linrec_cp cp;
    const ssm_decay_desc *d;
    int backward;
    ssm_tensor *ld, *x, *h0, *out, *hT, *hin, *dout, *dhT, *dx, *dld, *dh0;
    ssm_result r;
    char msg[256];
} dk_rank;

static void *dk_rank_main(void *arg) {
    dk_rank *rk = (dk_rank *)arg;
    if (!rk->backward)
        rk->r = ssm_decay_forward_cp(rk->ctx, rk->d, &rk->cp, rk->ld, rk->x, rk->h0, rk->out, rk->hT, rk->hin);
    else
        rk->r = ssm_decay_backward_cp(rk->ctx, rk->d, &rk->cp, rk->ld, rk->hin, rk->out, rk->dout, rk->dhT, rk->dx,
                                      rk->dld, rk->dh0);
    snprintf(rk->msg, sizeof rk->msg, "%s", ssm_ctx_last_error(rk->ctx));
    return NULL;
}

/* A buffer holding `v` (rounded to dt: v is updated to the stored values). */
static tbuf dk_buf(ssm_dtype dt, int ndim, const int64_t *shape, int layout, double *v) {
    tbuf b = tb_new(dt, ndim, shape, layout);
    tb_set(&b, v), tb_get(&b, v);
    return b;
}

/* One configuration: R ranks on spans `len` of a T-step sequence, forward then backward, against
   one per-step call on the whole sequence. Every rank passes a dhT (the gradient of its hT: on the
   whole sequence, extra dout at its last step). Cumulative ranks pass their own cumsum of a; their
   dlog_decay is da_t - da_{t+1} inside the span. resets: some per-step decays are -inf. */
static void dk_cp_case(ssm_dtype dt, ssm_decay_input input, int64_t B, int64_t Rw, int64_t C, int R,
                       const int64_t *len, int layout, int resets, double tol) {
    int64_t T = 0, t0s[8], r, b, t, i, j;
    int64_t sx[4], sl[3], s0[3];
    double *va, *vx, *v0, *vdo, *vdT[8], *ref_out, *ref_dx, *ref_da, *ref_d0, *got, *want;
    tbuf wa, wx, w0, wo, wdo, wdT, wdx, wda, wd0;
    tbuf rl[8], rx[8], ro[8], rhT[8], rhin[8], rdo[8], rdT[8], rdx[8], rdl[8], rd0[8];
    cp_world w;
    dk_rank rk[8];
    pthread_t th[8];
    ssm_ctx *ctx = test_ctx();
    ssm_decay_desc ref = ssm_decay_desc_init(), d = ssm_decay_desc_init();
    int pass;
    for (r = 0; r < R; ++r) t0s[r] = T, T += len[r];
    sx[0] = B, sx[1] = T, sx[2] = Rw, sx[3] = C;
    sl[0] = B, sl[1] = T, sl[2] = Rw;
    s0[0] = B, s0[1] = Rw, s0[2] = C;
    ref.input = SSM_DECAY_PER_STEP, d.input = input;
    va = (double *)malloc(sizeof(double) * (size_t)(B * T * Rw));
    for (i = 0; i < B * T * Rw; ++i)
        va[i] = resets && test_uniform(0, 1) < 0.01 ? -INFINITY : test_uniform(-0.3, 0.05);
    wa = dk_buf(dt, 3, sl, LAYOUT_CONTIGUOUS, va);
    wx = tb_random(dt, 4, sx, LAYOUT_CONTIGUOUS, 1.0, &vx);
    w0 = tb_random(dt, 3, s0, LAYOUT_CONTIGUOUS, 1.0, &v0);
    wdo = tb_random(dt, 4, sx, LAYOUT_CONTIGUOUS, 1.0, &vdo);
    for (r = 0; r < R; ++r) rdT[r] = tb_random(dt, 3, s0, LAYOUT_CONTIGUOUS, 1.0, &vdT[r]);
    /* the whole sequence: dout plus each inner rank's dhT at its last step, the last rank's as dhT */
    for (r = 0; r + 1 < R; ++r)
        for (b = 0; b < B; ++b)
            for (i = 0; i < Rw * C; ++i) vdo[(b * T + t0s[r] + len[r] - 1) * Rw * C + i] += vdT[r][b * Rw * C + i];
    tb_set(&wdo, vdo);
    wdT = tb_new(dt, 3, s0, LAYOUT_CONTIGUOUS), tb_set(&wdT, vdT[R - 1]);
    wo = tb_new(dt, 4, sx, LAYOUT_CONTIGUOUS), wdx = tb_new(dt, 4, sx, LAYOUT_CONTIGUOUS);
    wda = tb_new(dt, 3, sl, LAYOUT_CONTIGUOUS), wd0 = tb_new(dt, 3, s0, LAYOUT_CONTIGUOUS);
    CHECK_OK(ssm_decay_forward(ctx, &ref, &wa.t, &wx.t, &w0.t, &wo.t, NULL), ctx);
    CHECK_OK(ssm_decay_backward(ctx, &ref, &wa.t, &w0.t, &wo.t, &wdo.t, &wdT.t, &wdx.t, &wda.t, &wd0.t), ctx);
    ref_out = (double *)malloc(sizeof(double) * (size_t)(B * T * Rw * C));
    ref_dx = (double *)malloc(sizeof(double) * (size_t)(B * T * Rw * C));
    ref_da = (double *)malloc(sizeof(double) * (size_t)(B * T * Rw));
    ref_d0 = (double *)malloc(sizeof(double) * (size_t)(B * Rw * C));
    got = (double *)malloc(sizeof(double) * (size_t)(B * T * Rw * C));
    want = (double *)malloc(sizeof(double) * (size_t)(B * T * Rw * C));
    tb_get(&wo, ref_out), tb_get(&wdx, ref_dx), tb_get(&wda, ref_da), tb_get(&wd0, ref_d0);
    tb_get(&wdo, vdo); /* dout as the ranks get it: without the dhT terms */
    for (r = 0; r + 1 < R; ++r)
        for (b = 0; b < B; ++b)
            for (i = 0; i < Rw * C; ++i) vdo[(b * T + t0s[r] + len[r] - 1) * Rw * C + i] -= vdT[r][b * Rw * C + i];
    cp_world_init(&w, R, ((dt.bits == 64 ? 8u : 4u) * (size_t)(B * Rw * (C + 1)) + 255u) & ~(size_t)255u);
    for (r = 0; r < R; ++r) {
        int64_t rs[4] = {B, len[r], Rw, C}, rls[3] = {B, len[r], Rw};
        double *tmp = (double *)malloc(sizeof(double) * (size_t)(B * len[r] * Rw * C));
        cp_slice(va, tmp, B, T, t0s[r], len[r], Rw, 0);
        if (input == SSM_DECAY_CUMULATIVE) /* this span's own cumsum */
            for (b = 0; b < B; ++b)
                for (t = 1; t < len[r]; ++t)
                    for (j = 0; j < Rw; ++j) tmp[(b * len[r] + t) * Rw + j] += tmp[(b * len[r] + t - 1) * Rw + j];
        rl[r] = tb_new(dt, 3, rls, layout), tb_set(&rl[r], tmp);
        cp_slice(vx, tmp, B, T, t0s[r], len[r], Rw * C, 0);
        rx[r] = tb_new(dt, 4, rs, r % 2 ? LAYOUT_CONTIGUOUS : layout), tb_set(&rx[r], tmp);
        cp_slice(vdo, tmp, B, T, t0s[r], len[r], Rw * C, 0);
        rdo[r] = tb_new(dt, 4, rs, layout), tb_set(&rdo[r], tmp);
        ro[r] = tb_new(dt, 4, rs, layout), rdx[r] = tb_new(dt, 4, rs, r % 2 ? layout : LAYOUT_CONTIGUOUS);
        rdl[r] = tb_new(dt, 3, rls, layout);
        rhT[r] = tb_new(dt, 3, s0, layout), rhin[r] = tb_new(dt, 3, s0, LAYOUT_CONTIGUOUS);
        rd0[r] = tb_new(dt, 3, s0, layout);
        free(tmp);
        memset(&rk[r], 0, sizeof rk[r]);
        rk[r].peer.w = &w, rk[r].peer.rank = (int)r, rk[r].ctx = r == 0 ? ctx : test_ctx(), rk[r].d = &d;
        rk[r].cp.rank = (int)r, rk[r].cp.nranks = R, rk[r].cp.allgather = cp_allgather, rk[r].cp.user = &rk[r].peer;
        rk[r].ld = &rl[r].t, rk[r].x = &rx[r].t, rk[r].h0 = r == 0 ? &w0.t : NULL, rk[r].out = &ro[r].t;
        rk[r].hT = &rhT[r].t, rk[r].hin = &rhin[r].t, rk[r].dout = &rdo[r].t, rk[r].dhT = &rdT[r].t;
        rk[r].dx = &rdx[r].t, rk[r].dld = &rdl[r].t, rk[r].dh0 = &rd0[r].t;
    }
    for (pass = 0; pass < 2; ++pass) {
        for (r = 0; r < R; ++r) rk[r].backward = pass, pthread_create(&th[r], NULL, dk_rank_main, &rk[r]);
        for (r = 0; r < R; ++r) pthread_join(th[r], NULL);
        for (r = 0; r < R; ++r) CHECK(rk[r].r == SSM_OK, "rank %d %s: %s (%s)", (int)r, pass ? "backward" : "forward",
                                      ssm_result_string(rk[r].r), rk[r].msg);
    }
    CHECK(!w.bad, "the ranks exchanged different sizes");
    for (r = 0; r < R; ++r) {
        const int64_t t0 = t0s[r], L = len[r], row = Rw * C;
        double e;
        cp_slice(ref_out, want, B, T, t0, L, row, 0), tb_get(&ro[r], got);
        e = rel_err(got, want, B * L * row);
        CHECK(e <= tol, "rank %d of %d: out rel err %.3e", (int)r, R, e);
        cp_slice(ref_out, want, B, T, t0 + L - 1, 1, row, 0), tb_get(&rhT[r], got);
        e = rel_err(got, want, B * row);
        CHECK(e <= tol, "rank %d of %d: hT rel err %.3e", (int)r, R, e);
        if (r == 0) memcpy(want, v0, sizeof(double) * (size_t)(B * row));
        else cp_slice(ref_out, want, B, T, t0 - 1, 1, row, 0);
        tb_get(&rhin[r], got), e = rel_err(got, want, B * row);
        CHECK(e <= tol, "rank %d of %d: hin rel err %.3e", (int)r, R, e);
        cp_slice(ref_dx, want, B, T, t0, L, row, 0), tb_get(&rdx[r], got);
        e = rel_err(got, want, B * L * row);
        CHECK(e <= tol, "rank %d of %d: dx rel err %.3e", (int)r, R, e);
        cp_slice(ref_da, want, B, T, t0, L, Rw, 0);
        if (input == SSM_DECAY_CUMULATIVE)
            for (b = 0; b < B; ++b)
                for (t = 0; t + 1 < L; ++t)
                    for (j = 0; j < Rw; ++j) want[(b * L + t) * Rw + j] -= want[(b * L + t + 1) * Rw + j];
        tb_get(&rdl[r], got), e = rel_err(got, want, B * L * Rw);
        CHECK(e <= tol, "rank %d of %d: dlog_decay rel err %.3e", (int)r, R, e);
        if (r == 0) memcpy(want, ref_d0, sizeof(double) * (size_t)(B * row));
        else /* the gradient of the state entering the span: exp(a_t0) g_t0 */
            for (b = 0; b < B; ++b)
                for (i = 0; i < row; ++i)
                    want[b * row + i] = exp(va[(b * T + t0) * Rw + i / C]) * ref_dx[(b * T + t0) * row + i];
        tb_get(&rd0[r], got), e = rel_err(got, want, B * row);
        CHECK(e <= tol, "rank %d of %d: dh0 rel err %.3e", (int)r, R, e);
        CHECK(tb_outside_untouched(&ro[r]) && tb_outside_untouched(&rdx[r]) && tb_outside_untouched(&rdl[r]),
              "rank %d: writes outside out / dx / dlog_decay", (int)r);
        if (r) ssm_ctx_destroy(rk[r].ctx);
        tb_free(&rl[r]), tb_free(&rx[r]), tb_free(&ro[r]), tb_free(&rhT[r]), tb_free(&rhin[r]), tb_free(&rdo[r]);
        tb_free(&rdT[r]), tb_free(&rdx[r]), tb_free(&rdl[r]), tb_free(&rd0[r]), free(vdT[r]);
    }
    if (test_failures_in_case)
        printf("  (%s %s B %lld R %lld C %lld, %d ranks, %s%s)\n", dt.bits == 16 ? "16-bit" : dt.bits == 32 ? "f32" : "f64",
               input == SSM_DECAY_CUMULATIVE ? "cumulative" : "per-step", (long long)B, (long long)Rw, (long long)C, R,
               layout_name(layout), resets ? ", resets" : "");
    cp_world_free(&w);
    free(va), free(vx), free(v0), free(vdo), free(ref_out), free(ref_dx), free(ref_da), free(ref_d0), free(got), free(want);
    tb_free(&wa), tb_free(&wx), tb_free(&w0), tb_free(&wo), tb_free(&wdo), tb_free(&wdT), tb_free(&wdx), tb_free(&wda);
    tb_free(&wd0);
    ssm_ctx_destroy(ctx);
}

static void context_parallel(void) {
    static const int64_t spans[4][4] = {{23, 0, 0, 0}, {11, 12, 0, 0}, {1, 13, 9, 0}, {6, 1, 9, 7}};
    static const int64_t longer[2] = {2300, 2100}, lone[3] = {64, 1, 65};
    const int gpu = test_backend->device_type != SSM_DEVICE_CPU;
    const ssm_dtype base = gpu ? SSM_F32 : SSM_F64;
    const double tight = gpu ? 1e-5 : 1e-12; /* f32: a span's cumsum rounds to f32 (the reference runs per step) */
    int R, in;
    test_begin("decay context parallel: ranks' spans against one call on the whole sequence, fwd and bwd");
    for (R = 1; R <= 4; ++R)
        for (in = 0; in < 2; ++in) {
            dk_cp_case(base, (ssm_decay_input)in, 2, 3, 5, R, spans[R - 1], LAYOUT_PADDED, 0, tight);
            dk_cp_case(base, (ssm_decay_input)in, 1, 2, 16, R, spans[R - 1], LAYOUT_CONTIGUOUS, in, tight);
        }
    /* long spans: many chunks of the device map, folded by every lane; a span of one step */
    dk_cp_case(base, gpu ? SSM_DECAY_PER_STEP : SSM_DECAY_CUMULATIVE, 1, 2, 8, 2, longer, LAYOUT_CONTIGUOUS, 0, tight);
    dk_cp_case(base, SSM_DECAY_PER_STEP, 2, 1, 3, 3, lone, LAYOUT_NEGATIVE, 1, tight);
    if (!gpu) dk_cp_case(SSM_F32, SSM_DECAY_PER_STEP, 1, 2, 7, 3, spans[2], LAYOUT_CONTIGUOUS, 0, 2e-6);
    else { /* 16-bit: the carry crosses in f32 */
        dk_cp_case(SSM_F16, SSM_DECAY_PER_STEP, 2, 3, 16, 2, longer, LAYOUT_CONTIGUOUS, 1, 4e-3);
        dk_cp_case(SSM_BF16, SSM_DECAY_PER_STEP, 1, 4, 24, 3, lone, LAYOUT_CONTIGUOUS, 0, 2e-2);
        dk_cp_case(SSM_BF16, SSM_DECAY_PER_STEP, 1, 3, 5, 4, spans[3], LAYOUT_PADDED, 1, 2e-2);
    }
    test_end();
}

/* Bad _cp arguments answer their codes and write nothing; a failing hook is reported. */
static ssm_result dk_failing_hook(void *user, const void *send, void *recv, size_t bytes) {
    (void)user, (void)send, (void)recv, (void)bytes;
    return SSM_ERROR_BACKEND;
}
static void context_parallel_errors(void) {
    ssm_ctx *ctx = test_ctx();
    const ssm_dtype dt = test_backend->device_type != SSM_DEVICE_CPU ? SSM_F32 : SSM_F64;
    int64_t sx[4] = {1, 7, 2, 3}, sl[3] = {1, 7, 2}, s0[3] = {1, 2, 3};
    tbuf tl = tb_random(dt, 3, sl, LAYOUT_CONTIGUOUS, 0.3, NULL), tx = tb_random(dt, 4, sx, LAYOUT_CONTIGUOUS, 1.0, NULL);
    tbuf to = tb_new(dt, 4, sx, LAYOUT_CONTIGUOUS), t0 = tb_random(dt, 3, s0, LAYOUT_CONTIGUOUS, 1.0, NULL);
    tbuf tin = tb_new(dt, 3, s0, LAYOUT_CONTIGUOUS), tdl = tb_new(dt, 3, sl, LAYOUT_CONTIGUOUS);
    ssm_decay_desc d = ssm_decay_desc_init();
    ssm_linrec_cp cp;
    size_t bytes = 0;
    test_begin("decay context parallel: argument errors write nothing, a failing hook is reported");
    memset(&cp, 0, sizeof cp);
    CHECK(ssm_decay_forward_cp(ctx, &d, NULL, &tl.t, &tx.t, NULL, &to.t, NULL, NULL) == SSM_ERROR_NULL_ARGUMENT, "cp NULL");
    cp.rank = 2, cp.nranks = 2, cp.allgather = dk_failing_hook;
    CHECK(ssm_decay_forward_cp(ctx, &d, &cp, &tl.t, &tx.t, NULL, &to.t, NULL, NULL) == SSM_ERROR_INVALID_VALUE, "rank 2 of 2");
    cp.rank = 0, cp.allgather = NULL;
    CHECK(ssm_decay_forward_cp(ctx, &d, &cp, &tl.t, &tx.t, NULL, &to.t, NULL, NULL) == SSM_ERROR_NULL_ARGUMENT, "no hook");
    cp.rank = 1, cp.allgather = dk_failing_hook;
    CHECK(ssm_decay_forward_cp(ctx, &d, &cp, &tl.t, &tx.t, &t0.t, &to.t, NULL, NULL) == SSM_ERROR_INVALID_VALUE, "h0 on rank 1");
    CHECK(ssm_decay_forward_cp(ctx, &d, &cp, &tl.t, &tx.t, NULL, &to.t, &tin.t, &tin.t) == SSM_ERROR_ALIASING,
          "hT and hin the same buffer");
    CHECK(ssm_decay_backward_cp(ctx, &d, &cp, &tl.t, NULL, &to.t, &tx.t, NULL, &to.t, &tdl.t, NULL) == SSM_ERROR_ALIASING,
          "dx aliasing out");
    CHECK(tb_untouched(&to) && tb_untouched(&tin) && tb_untouched(&tdl), "a refused call wrote an output");
    CHECK(ssm_decay_forward_cp(ctx, &d, &cp, &tl.t, &tx.t, NULL, &to.t, NULL, NULL) == SSM_ERROR_BACKEND, "failing hook");
    CHECK(strstr(ssm_ctx_last_error(ctx), "allgather") != NULL, "message: %s", ssm_ctx_last_error(ctx));
    CHECK(ssm_decay_cp_workspace_size(ctx, &d, NULL, SSM_F32, 1, 7, 2, 3, 0, &bytes) == SSM_ERROR_NULL_ARGUMENT, "no cp");
    CHECK(ssm_decay_cp_workspace_size(ctx, &d, &cp, SSM_F32, 1, -7, 2, 3, 0, &bytes) == SSM_ERROR_INVALID_SHAPE, "T < 0");
    cp.nranks = 0;
    CHECK(ssm_decay_cp_workspace_size(ctx, &d, &cp, SSM_F32, 1, 7, 2, 3, 0, &bytes) == SSM_ERROR_INVALID_VALUE, "0 ranks");
    cp.rank = 0, cp.nranks = 1 << 30, cp.allgather = dk_failing_hook;
    CHECK(ssm_decay_cp_workspace_size(ctx, &d, &cp, SSM_F32, 1 << 20, 7, 1 << 20, 1 << 20, 1, &bytes) == SSM_ERROR_INVALID_SHAPE,
          "a workspace past size_t");
    { /* one rank on an exact caller-owned workspace: the call as ssm_decay_forward / backward */
        ssm_ctx *own = NULL;
        ssm_ctx_config cfg = ssm_ctx_config_init();
        size_t fb = 0, bb = 0;
        void *buf;
        cp.rank = 0, cp.nranks = 1, cp.allgather = NULL;
        CHECK_OK(ssm_decay_cp_workspace_size(ctx, &d, &cp, dt, 1, 7, 2, 3, 0, &fb), ctx);
        CHECK_OK(ssm_decay_cp_workspace_size(ctx, &d, &cp, dt, 1, 7, 2, 3, 1, &bb), ctx);
        bytes = fb > bb ? fb : bb;
        buf = test_mem ? test_mem->alloc(bytes) : malloc(bytes);
        cfg.backend = test_backend, cfg.backend_config = test_backend_config, cfg.workspace = buf, cfg.workspace_bytes = bytes;
        CHECK_OK(ssm_ctx_create(&cfg, &own), own);
        if (own) {
            CHECK_OK(ssm_decay_forward_cp(own, &d, &cp, &tl.t, &tx.t, &t0.t, &to.t, NULL, &tin.t), own);
            tbuf tdx = tb_new(dt, 4, sx, LAYOUT_CONTIGUOUS);
            CHECK_OK(ssm_decay_backward_cp(own, &d, &cp, &tl.t, &tin.t, &to.t, &tx.t, NULL, &tdx.t, &tdl.t, NULL), own);
            tb_free(&tdx);
            ssm_ctx_destroy(own);
        }
        if (test_mem) test_mem->release(buf);
        else free(buf);
    }
    tb_free(&tl), tb_free(&tx), tb_free(&to), tb_free(&t0), tb_free(&tin), tb_free(&tdl);
    ssm_ctx_destroy(ctx);
    test_end();
}

void suite_decay_cp(void) {
    context_parallel();
    context_parallel_errors();
}

void suite_decay(void) {
    reset_step();
    workspace_query();
    suite_decay_cp();
}
