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

/* ---- context parallelism: ranks as threads (tests/test.h's cp_world) ------------------------- */
typedef struct cp_rank {
    cp_peer peer;
    ssm_ctx *ctx;
    ssm_linrec_cp cp;
    const ssm_linrec_desc *d;
    int backward;
    ssm_tensor *A, *b, *h0, *h, *hT, *hin, *dh, *dhT, *dA, *db, *dh0;
    ssm_result r;
    char msg[256];
} cp_rank;

static void *cp_rank_main(void *arg) {
    cp_rank *rk = (cp_rank *)arg;
    if (!rk->backward)
        rk->r = ssm_linrec_forward_cp(rk->ctx, rk->d, &rk->cp, rk->A, rk->b, rk->h0, rk->h, rk->hT, rk->hin);
    else
        rk->r = ssm_linrec_backward_cp(rk->ctx, rk->d, &rk->cp, rk->A, rk->hin, rk->h, rk->dh, rk->dhT, rk->dA, rk->db, rk->dh0);
    snprintf(rk->msg, sizeof rk->msg, "%s", ssm_ctx_last_error(rk->ctx));
    return NULL;
}
/* One configuration: R ranks on spans `len` of a T-step sequence, forward then backward, against
   a one-rank call on the whole sequence (same backend and method): h, every rank's hT and hin,
   dA, db, the first rank's dh0 (of h0) and the others' (of hin: g - dh one step before the span). */
static void cp_case(ssm_dtype dt, ssm_linrec_method method, int64_t chunk, int reverse, int64_t S, int64_t n, int64_t m,
                    int R, const int64_t *len, double tol) {
    int64_t T = 0, t0s[8], r;
    int64_t sA[4], sb[4], s0[3] = {0, 0, 0};
    double *vA, *vb, *v0, *vdh, *vdT, *ref_h, *ref_dA, *ref_db, *ref_d0, *got;
    tbuf wA, wb, w0, wh, wdh, wdT, wdA, wdb, wd0;
    tbuf rA[8], rb[8], rh[8], rhT[8], rhin[8], rdh[8], rdA[8], rdb[8], rd0[8];
    cp_world w;
    cp_rank rk[8];
    pthread_t th[8];
    ssm_ctx *ctx = test_ctx();
    ssm_linrec_desc d = ssm_linrec_desc_init();
    const int first = reverse ? R - 1 : 0, last = reverse ? 0 : R - 1;
    int pass;
    for (r = 0; r < R; ++r) t0s[r] = T, T += len[r];
    sA[0] = S, sA[1] = T, sA[2] = n, sA[3] = n;
    sb[0] = S, sb[1] = T, sb[2] = n, sb[3] = m;
    s0[0] = S, s0[1] = n, s0[2] = m;
    d.method = method, d.chunk = chunk, d.reverse = reverse;
    wA = tb_random(dt, 4, sA, LAYOUT_CONTIGUOUS, 1.4 / sqrt((double)n), &vA);
    wb = tb_random(dt, 4, sb, LAYOUT_CONTIGUOUS, 1.0, &vb);
    w0 = tb_random(dt, 3, s0, LAYOUT_CONTIGUOUS, 1.0, &v0);
    wdh = tb_random(dt, 4, sb, LAYOUT_CONTIGUOUS, 1.0, &vdh);
    wdT = tb_random(dt, 3, s0, LAYOUT_CONTIGUOUS, 1.0, &vdT);
    wh = tb_new(dt, 4, sb, LAYOUT_CONTIGUOUS), wdA = tb_new(dt, 4, sA, LAYOUT_CONTIGUOUS);
    wdb = tb_new(dt, 4, sb, LAYOUT_CONTIGUOUS), wd0 = tb_new(dt, 3, s0, LAYOUT_CONTIGUOUS);
    CHECK_OK(ssm_linrec_forward(ctx, &d, &wA.t, &wb.t, &w0.t, &wh.t, NULL), ctx);
    CHECK_OK(ssm_linrec_backward(ctx, &d, &wA.t, &w0.t, &wh.t, &wdh.t, &wdT.t, &wdA.t, &wdb.t, &wd0.t), ctx);
    ref_h = (double *)malloc(sizeof(double) * (size_t)(S * T * n * m));
    ref_db = (double *)malloc(sizeof(double) * (size_t)(S * T * n * m));
    ref_dA = (double *)malloc(sizeof(double) * (size_t)(S * T * n * n));
    ref_d0 = (double *)malloc(sizeof(double) * (size_t)(S * n * m));
    got = (double *)malloc(sizeof(double) * (size_t)(S * T * n * (n + m)));
    tb_get(&wh, ref_h), tb_get(&wdb, ref_db), tb_get(&wdA, ref_dA), tb_get(&wd0, ref_d0);
    /* the exchanged size: a rank's maps in the work dtype (f64 or f32), 256-byte aligned */
    cp_world_init(&w, R, ((dt.bits == 64 ? 8u : 4u) * (size_t)(S * n * (n + m)) + 255u) & ~(size_t)255u);
    for (r = 0; r < R; ++r) {
        int64_t ra[4] = {S, len[r], n, n}, rbs[4] = {S, len[r], n, m};
        double *tmp = (double *)malloc(sizeof(double) * (size_t)(S * len[r] * n * (n > m ? n : m)));
        rA[r] = tb_new(dt, 4, ra, r % 2 ? LAYOUT_PADDED : LAYOUT_CONTIGUOUS);
        cp_slice(vA, tmp, S, T, t0s[r], len[r], n * n, 0), tb_set(&rA[r], tmp);
        rb[r] = tb_new(dt, 4, rbs, r % 2 ? LAYOUT_CONTIGUOUS : LAYOUT_PADDED);
        cp_slice(vb, tmp, S, T, t0s[r], len[r], n * m, 0), tb_set(&rb[r], tmp);
        rdh[r] = tb_new(dt, 4, rbs, LAYOUT_CONTIGUOUS);
        cp_slice(vdh, tmp, S, T, t0s[r], len[r], n * m, 0), tb_set(&rdh[r], tmp);
        rh[r] = tb_new(dt, 4, rbs, LAYOUT_CONTIGUOUS), rdb[r] = tb_new(dt, 4, rbs, LAYOUT_PADDED);
        rdA[r] = tb_new(dt, 4, ra, LAYOUT_CONTIGUOUS);
        rhT[r] = tb_new(dt, 3, s0, LAYOUT_CONTIGUOUS), rhin[r] = tb_new(dt, 3, s0, LAYOUT_CONTIGUOUS);
        rd0[r] = tb_new(dt, 3, s0, LAYOUT_CONTIGUOUS);
        free(tmp);
        memset(&rk[r], 0, sizeof rk[r]);
        rk[r].peer.w = &w, rk[r].peer.rank = (int)r, rk[r].ctx = r == 0 ? ctx : test_ctx(), rk[r].d = &d;
        rk[r].cp.rank = (int)r, rk[r].cp.nranks = R, rk[r].cp.allgather = cp_allgather, rk[r].cp.user = &rk[r].peer;
        rk[r].A = &rA[r].t, rk[r].b = &rb[r].t, rk[r].h0 = r == first ? &w0.t : NULL, rk[r].h = &rh[r].t;
        rk[r].hT = &rhT[r].t, rk[r].hin = &rhin[r].t, rk[r].dh = &rdh[r].t, rk[r].dhT = r == last ? &wdT.t : NULL;
        rk[r].dA = &rdA[r].t, rk[r].db = &rdb[r].t, rk[r].dh0 = &rd0[r].t;
    }
    for (pass = 0; pass < 2; ++pass) {
        for (r = 0; r < R; ++r) rk[r].backward = pass, pthread_create(&th[r], NULL, cp_rank_main, &rk[r]);
        for (r = 0; r < R; ++r) pthread_join(th[r], NULL);
        for (r = 0; r < R; ++r) CHECK(rk[r].r == SSM_OK, "rank %d %s: %s (%s)", (int)r, pass ? "backward" : "forward",
                                      ssm_result_string(rk[r].r), rk[r].msg);
    }
    CHECK(!w.bad, "the ranks exchanged different sizes");
    for (r = 0; r < R; ++r) {
        double *want = (double *)malloc(sizeof(double) * (size_t)(S * len[r] * n * n)), e;
        const int64_t ts = reverse ? t0s[r] : t0s[r] + len[r] - 1;          /* the span's last processed step */
        const int64_t tp = reverse ? t0s[r] + len[r] : t0s[r] - 1;          /* the step processed before it */
        int64_t s;
        cp_slice(ref_h, want, S, T, t0s[r], len[r], n * m, 0), tb_get(&rh[r], got);
        e = rel_err(got, want, S * len[r] * n * m);
        CHECK(e <= tol, "rank %d of %d: h rel err %.3e", (int)r, R, e);
        cp_slice(ref_h, want, S, T, ts, 1, n * m, 0), tb_get(&rhT[r], got);
        e = rel_err(got, want, S * n * m);
        CHECK(e <= tol, "rank %d of %d: hT rel err %.3e", (int)r, R, e);
        if (r == first) tb_get(&w0, want);
        else cp_slice(ref_h, want, S, T, tp, 1, n * m, 0);
        tb_get(&rhin[r], got), e = rel_err(got, want, S * n * m);
        CHECK(e <= tol, "rank %d of %d: hin rel err %.3e", (int)r, R, e);
        cp_slice(ref_dA, want, S, T, t0s[r], len[r], n * n, 0), tb_get(&rdA[r], got);
        e = rel_err(got, want, S * len[r] * n * n);
        CHECK(e <= tol, "rank %d of %d: dA rel err %.3e", (int)r, R, e);
        cp_slice(ref_db, want, S, T, t0s[r], len[r], n * m, 0), tb_get(&rdb[r], got);
        e = rel_err(got, want, S * len[r] * n * m);
        CHECK(e <= tol, "rank %d of %d: db rel err %.3e", (int)r, R, e);
        if (r == first) memcpy(want, ref_d0, sizeof(double) * (size_t)(S * n * m));
        else {
            double *dhp = (double *)malloc(sizeof(double) * (size_t)(S * n * m));
            cp_slice(ref_db, want, S, T, tp, 1, n * m, 0), cp_slice(vdh, dhp, S, T, tp, 1, n * m, 0);
            for (s = 0; s < S * n * m; ++s) want[s] -= dhp[s];
            free(dhp);
        }
        tb_get(&rd0[r], got), e = rel_err(got, want, S * n * m);
        CHECK(e <= tol, "rank %d of %d: dh0 rel err %.3e", (int)r, R, e);
        CHECK(tb_outside_untouched(&rh[r]) && tb_outside_untouched(&rdb[r]), "rank %d: writes outside h / db", (int)r);
        free(want);
        if (r) ssm_ctx_destroy(rk[r].ctx);
        tb_free(&rA[r]), tb_free(&rb[r]), tb_free(&rh[r]), tb_free(&rhT[r]), tb_free(&rhin[r]), tb_free(&rdh[r]);
        tb_free(&rdA[r]), tb_free(&rdb[r]), tb_free(&rd0[r]);
    }
    if (test_failures_in_case)
        printf("  (%s %s chunk %lld reverse %d S %lld n %lld m %lld, %d ranks)\n", dt.bits == 16 ? "16-bit" : "f32/f64",
               ssm_linrec_method_name(method), (long long)chunk, reverse, (long long)S, (long long)n, (long long)m, R);
    cp_world_free(&w);
    free(vA), free(vb), free(v0), free(vdh), free(vdT), free(ref_h), free(ref_db), free(ref_dA), free(ref_d0), free(got);
    tb_free(&wA), tb_free(&wb), tb_free(&w0), tb_free(&wh), tb_free(&wdh), tb_free(&wdT), tb_free(&wdA), tb_free(&wdb), tb_free(&wd0);
    ssm_ctx_destroy(ctx);
}

static void context_parallel(void) {
    static const int64_t spans[4][4] = {{23, 0, 0, 0}, {11, 12, 0, 0}, {1, 13, 9, 0}, {6, 1, 9, 7}};
    static const int64_t wide[2][3] = {{150, 151, 0}, {100, 1, 200}}, longer[2] = {2300, 2100};
    static const int64_t full[2] = {2065, 977}; /* whole last chunks of 16 (2064 and 976 steps past the first), each way */
    static const int64_t halves[2] = {4096, 4096};
    const int gpu = test_backend->device_type != SSM_DEVICE_CPU;
    int mi, R, rev, k;
    test_begin("linrec context parallel: ranks' spans against one call on the whole sequence, fwd and bwd");
    for (mi = 0; mi < SSM_LINREC_METHOD_COUNT; ++mi)
        for (R = 1; R <= 4; ++R)
            for (rev = 0; rev < 2; ++rev)
                cp_case(gpu ? SSM_F32 : SSM_F64, (ssm_linrec_method)mi, 5, rev, 2, 3, 2, R, spans[R - 1], gpu ? 2e-5 : 1e-12);
    /* the tensor-core chunked shapes (n a multiple of 8, m = 1): the split path on a GPU */
    for (k = 0; k < 2; ++k)
        for (rev = 0; rev < 2; ++rev) {
            cp_case(SSM_F32, SSM_LINREC_CHUNKED, 0, rev, 2, 16, 1, k + 2, wide[k], gpu ? 2e-3 : 1e-5);
            if (gpu) {
                cp_case(SSM_F16, SSM_LINREC_CHUNKED, 0, rev, 2, 16, 1, k + 2, wide[k], 4e-3);
                cp_case(SSM_BF16, SSM_LINREC_CR, 0, rev, 3, 24, 1, k + 2, wide[k], 2e-2);
            }
        }
    /* chunks of 16 over long spans: the two-level carries on a GPU, split around the exchange */
    cp_case(SSM_F32, SSM_LINREC_CHUNKED, 16, 0, 1, 32, 1, 2, longer, gpu ? 2e-3 : 1e-5);
    if (gpu) cp_case(SSM_F16, SSM_LINREC_AUTO, 16, 1, 2, 64, 1, 2, longer, 4e-3);
    /* a span's end from its last chunk's map, that chunk whole (above, it is cut short) */
    cp_case(SSM_F32, SSM_LINREC_CHUNKED, 16, 0, 1, 32, 1, 2, full, gpu ? 2e-3 : 1e-5);
    if (gpu) cp_case(SSM_BF16, SSM_LINREC_AUTO, 16, 0, 2, 64, 1, 2, full, 2e-2);
    if (gpu) cp_case(SSM_F16, SSM_LINREC_CHUNKED, 32, 0, 1, 64, 1, 2, halves, 4e-3); /* bench/cuda_cp's T8192 row */
    test_end();
}

/* Bad _cp arguments answer their codes and write nothing; a failing hook is reported. */
static ssm_result cp_failing_hook(void *user, const void *send, void *recv, size_t bytes) {
    (void)user, (void)send, (void)recv, (void)bytes;
    return SSM_ERROR_BACKEND;
}
static void context_parallel_errors(void) {
    ssm_ctx *ctx = test_ctx();
    int64_t sA[4] = {1, 7, 2, 2}, sb[4] = {1, 7, 2, 1}, s0[2] = {1, 2};
    tbuf tA = tb_random(SSM_F32, 4, sA, LAYOUT_CONTIGUOUS, 0.5, NULL), tb = tb_random(SSM_F32, 4, sb, 0, 1.0, NULL);
    tbuf th = tb_new(SSM_F32, 4, sb, LAYOUT_CONTIGUOUS), th0 = tb_random(SSM_F32, 2, s0, 0, 1.0, NULL);
    ssm_linrec_desc d = ssm_linrec_desc_init();
    ssm_linrec_cp cp;
    size_t bytes = 0;
    test_begin("linrec context parallel: argument errors write nothing, a failing hook is reported");
    memset(&cp, 0, sizeof cp);
    CHECK(ssm_linrec_forward_cp(ctx, &d, NULL, &tA.t, &tb.t, NULL, &th.t, NULL, NULL) == SSM_ERROR_NULL_ARGUMENT, "cp NULL");
    cp.rank = 2, cp.nranks = 2, cp.allgather = cp_failing_hook;
    CHECK(ssm_linrec_forward_cp(ctx, &d, &cp, &tA.t, &tb.t, NULL, &th.t, NULL, NULL) == SSM_ERROR_INVALID_VALUE, "rank 2 of 2");
    cp.rank = 0, cp.allgather = NULL;
    CHECK(ssm_linrec_forward_cp(ctx, &d, &cp, &tA.t, &tb.t, NULL, &th.t, NULL, NULL) == SSM_ERROR_NULL_ARGUMENT, "no hook");
    cp.rank = 1, cp.allgather = cp_failing_hook;
    CHECK(ssm_linrec_forward_cp(ctx, &d, &cp, &tA.t, &tb.t, &th0.t, &th.t, NULL, NULL) == SSM_ERROR_INVALID_VALUE,
          "h0 on rank 1");
    CHECK(ssm_linrec_backward_cp(ctx, &d, &cp, &tA.t, NULL, &th.t, &tb.t, NULL, NULL, &th.t, NULL) == SSM_ERROR_ALIASING,
          "db aliasing h");
    CHECK(tb_untouched(&th), "a refused call wrote h");
    CHECK(ssm_linrec_forward_cp(ctx, &d, &cp, &tA.t, &tb.t, NULL, &th.t, NULL, NULL) == SSM_ERROR_BACKEND, "failing hook");
    CHECK(strstr(ssm_ctx_last_error(ctx), "allgather") != NULL, "message: %s", ssm_ctx_last_error(ctx));
    CHECK(ssm_linrec_cp_workspace_size(ctx, &d, &cp, SSM_F32, 1, -7, 2, 1, 0, &bytes) == SSM_ERROR_INVALID_SHAPE, "T < 0");
    cp.nranks = 0;
    CHECK(ssm_linrec_cp_workspace_size(ctx, &d, &cp, SSM_F32, 1, 7, 2, 1, 0, &bytes) == SSM_ERROR_INVALID_VALUE, "0 ranks");
    { /* one rank on an exact caller-owned workspace: the call as ssm_linrec_forward */
        ssm_ctx *own = NULL;
        ssm_ctx_config cfg = ssm_ctx_config_init();
        void *buf;
        cp.rank = 0, cp.nranks = 1, cp.allgather = NULL;
        CHECK_OK(ssm_linrec_cp_workspace_size(ctx, &d, &cp, SSM_F32, 1, 7, 2, 1, 0, &bytes), ctx);
        buf = test_mem ? test_mem->alloc(bytes) : malloc(bytes);
        cfg.backend = test_backend, cfg.backend_config = test_backend_config, cfg.workspace = buf, cfg.workspace_bytes = bytes;
        CHECK_OK(ssm_ctx_create(&cfg, &own), own);
        if (own) {
            CHECK_OK(ssm_linrec_forward_cp(own, &d, &cp, &tA.t, &tb.t, &th0.t, &th.t, NULL, NULL), own);
            ssm_ctx_destroy(own);
        }
        if (test_mem) test_mem->release(buf);
        else free(buf);
    }
    tb_free(&tA), tb_free(&tb), tb_free(&th), tb_free(&th0);
    ssm_ctx_destroy(ctx);
    test_end();
}

void suite_linrec_cp(void) {
    context_parallel();
    context_parallel_errors();
}

void suite_linrec(void) {
    product_counts();
    workspace_queries();
    backward_without_dA();
    suite_linrec_cp();
}
