/* Dense linear recurrence: the special-purpose checks. Every method's forward and backward
   against the f64 oracle and finite differences are rows of the case table (tests/cases.h). */
#include "test.h"

/* Product counts, made checkable: CR does ~6x fewer products than the HS scan at T=1024. */
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

void suite_linrec(void) { product_counts(); }
