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
    d.method = SSM_LINREC_SCAN_HS, d.chunk = 0; /* scratch past size_t: refused, not wrapped */
    CHECK(ssm_linrec_workspace_size(ctx, &d, SSM_F32, 3, INT64_MAX / 4, 1, 1, 0, &bytes) == SSM_ERROR_INVALID_SHAPE,
          "T = 2^61 scan scratch");
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

/* dA = NULL: the backward still gives db and dh0, the same values as with dA, and every
   method agrees. */
static void backward_without_dA(void) {
    int mi;
    test_begin("linrec backward with dA = NULL: db and dh0 as with dA");
    for (mi = 1; mi < SSM_LINREC_METHOD_COUNT; ++mi) {
        ssm_ctx *ctx = test_ctx();
        int64_t sA[4] = {2, 23, 3, 3}, sb[4] = {2, 23, 3, 2}, s0[3] = {2, 3, 2};
        int64_t nb = 2 * 23 * 3 * 2, n0 = 2 * 3 * 2;
        tbuf tA = tb_random(SSM_F64, 4, sA, LAYOUT_CONTIGUOUS, 0.4, NULL), tb = tb_random(SSM_F64, 4, sb, LAYOUT_PADDED, 1.0, NULL);
        tbuf th0 = tb_random(SSM_F64, 3, s0, LAYOUT_CONTIGUOUS, 1.0, NULL), th = tb_new(SSM_F64, 4, sb, LAYOUT_CONTIGUOUS);
        tbuf tdA = tb_new(SSM_F64, 4, sA, LAYOUT_CONTIGUOUS), tdb = tb_new(SSM_F64, 4, sb, LAYOUT_CONTIGUOUS);
        tbuf tdb2 = tb_new(SSM_F64, 4, sb, LAYOUT_PADDED), td0 = tb_new(SSM_F64, 3, s0, LAYOUT_CONTIGUOUS);
        tbuf td02 = tb_new(SSM_F64, 3, s0, LAYOUT_CONTIGUOUS);
        double *g1 = (double *)malloc(sizeof(double) * (size_t)nb), *g2 = (double *)malloc(sizeof(double) * (size_t)nb);
        double *z1 = (double *)malloc(sizeof(double) * (size_t)n0), *z2 = (double *)malloc(sizeof(double) * (size_t)n0);
        ssm_linrec_desc d = ssm_linrec_desc_init();
        d.method = (ssm_linrec_method)mi, d.chunk = 5;
        CHECK_OK(ssm_linrec_forward(ctx, &d, &tA.t, &tb.t, &th0.t, &th.t, NULL), ctx);
        CHECK_OK(ssm_linrec_backward(ctx, &d, &tA.t, &th0.t, &th.t, &tb.t, NULL, &tdA.t, &tdb.t, &td0.t), ctx);
        CHECK_OK(ssm_linrec_backward(ctx, &d, &tA.t, &th0.t, &th.t, &tb.t, NULL, NULL, &tdb2.t, &td02.t), ctx);
        tb_get(&tdb, g1), tb_get(&tdb2, g2), tb_get(&td0, z1), tb_get(&td02, z2);
        CHECK(rel_err(g2, g1, nb) <= 1e-13, "%s: db without dA %.3e", ssm_linrec_method_name(d.method), rel_err(g2, g1, nb));
        CHECK(rel_err(z2, z1, n0) <= 1e-13, "%s: dh0 without dA %.3e", ssm_linrec_method_name(d.method), rel_err(z2, z1, n0));
        CHECK(tb_outside_untouched(&tdb2), "writes outside db (dA NULL)");
        free(g1), free(g2), free(z1), free(z2);
        tb_free(&tA), tb_free(&tb), tb_free(&th0), tb_free(&th), tb_free(&tdA), tb_free(&tdb), tb_free(&tdb2);
        tb_free(&td0), tb_free(&td02);
        ssm_ctx_destroy(ctx);
    }
    test_end();
}

void suite_linrec(void) {
    product_counts();
    workspace_queries();
    backward_without_dA();
}
