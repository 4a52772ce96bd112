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

void suite_decay(void) { reset_step(); }
