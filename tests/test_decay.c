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

void suite_decay(void) {
    reset_step();
    workspace_query();
}
