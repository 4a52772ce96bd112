/* Block-ELL sparse linear layer: dense conversion, the transposed index, every topology rule
   in isolation, and every validation error path (outputs untouched). Forward and backward
   against the dense masked f64 reference and finite differences are rows of the case table
   (tests/cases.h). */
#include "test.h"

/* ---- helpers: i32 views and a random layer ---- */
static void idx_set(tbuf *b, const int32_t *v) {
    int64_t i, j, n0 = b->t.shape[0], n1 = b->t.ndim > 1 ? b->t.shape[1] : 1;
    int64_t s1 = b->t.ndim > 1 ? b->t.strides[1] : 0;
    for (i = 0; i < n0; ++i)
        for (j = 0; j < n1; ++j) ((int32_t *)b->t.data)[i * b->t.strides[0] + j * s1] = v[i * n1 + j];
}
static void idx_get(const tbuf *b, int32_t *v) {
    int64_t i, j, n0 = b->t.shape[0], n1 = b->t.ndim > 1 ? b->t.shape[1] : 1;
    int64_t s1 = b->t.ndim > 1 ? b->t.strides[1] : 0;
    for (i = 0; i < n0; ++i)
        for (j = 0; j < n1; ++j) v[i * n1 + j] = ((int32_t *)b->t.data)[i * b->t.strides[0] + j * s1];
}
/* K distinct random columns per row, in random order (the ops must not assume sorted rows). */
static void random_cols(int64_t R, int64_t C, int64_t K, int32_t *cols) {
    int64_t r, k, j;
    int32_t *p = (int32_t *)malloc(sizeof(int32_t) * (size_t)C);
    for (r = 0; r < R; ++r) {
        for (j = 0; j < C; ++j) p[j] = (int32_t)j;
        for (j = C - 1; j > 0; --j) {
            int64_t q = (int64_t)test_uniform(0.0, (double)(j + 1));
            int32_t t = p[j];
            if (q > j) q = j;
            p[j] = p[q];
            p[q] = t;
        }
        for (k = 0; k < K; ++k) cols[r * K + k] = p[k];
    }
    free(p);
}
typedef struct layer {
    int64_t R, C, K, B, N;
    tbuf x, v, ci, bias, toff, tsl;
    double *xv, *vv, *bv;
    int32_t *cols;
} layer;

static layer layer_new(ssm_ctx *ctx, ssm_dtype dt, int64_t N, int64_t R, int64_t C, int64_t K, int64_t B, int layout) {
    layer L;
    int64_t sx[2], sv[4], sc[2], sb[1], so[1], ss[1];
    L.R = R, L.C = C, L.K = K, L.B = B, L.N = N;
    sx[0] = N, sx[1] = C * B;
    sv[0] = R, sv[1] = K, sv[2] = B, sv[3] = B;
    sc[0] = R, sc[1] = K;
    sb[0] = R * B, so[0] = C + 1, ss[0] = R * K;
    L.x = tb_random(dt, 2, sx, layout, 1.0, &L.xv);
    L.v = tb_random(dt, 4, sv, layout, 1.0, &L.vv);
    L.bias = tb_random(dt, 1, sb, layout, 1.0, &L.bv);
    L.ci = tb_new(SSM_I32, 2, sc, layout);
    L.toff = tb_new(SSM_I32, 1, so, layout);
    L.tsl = tb_new(SSM_I32, 1, ss, layout);
    L.cols = (int32_t *)malloc(sizeof(int32_t) * (size_t)(R * K));
    random_cols(R, C, K, L.cols);
    idx_set(&L.ci, L.cols);
    CHECK_OK(ssm_bell_transpose_index(ctx, &L.ci.t, &L.toff.t, &L.tsl.t), ctx);
    return L;
}
static void layer_free(layer *L) {
    tb_free(&L->x), tb_free(&L->v), tb_free(&L->ci), tb_free(&L->bias), tb_free(&L->toff), tb_free(&L->tsl);
    free(L->xv), free(L->vv), free(L->bv), free(L->cols);
}

static void test_dense_roundtrip(void) {
    ssm_ctx *ctx = test_ctx();
    int64_t R = 3, C = 5, K = 2, B = 3, sd[2] = {9, 15}, sm[2] = {3, 5}, r, c;
    double *dv, *back = (double *)malloc(sizeof(double) * 135), *vv = (double *)malloc(sizeof(double) * 54);
    int32_t mask[15] = {0, 1, 0, 1, 0, 1, 0, 0, 0, 1, 0, 0, 1, 1, 0}, cols[6], offs[6], slots[6];
    tbuf dense, tm = tb_new(SSM_I32, 2, sm, LAYOUT_CONTIGUOUS), out = tb_new(SSM_F64, 2, sd, LAYOUT_REVERSED);
    layer L = layer_new(ctx, SSM_F64, 1, R, C, K, B, LAYOUT_PADDED);
    test_begin("bell dense <-> block-ELL conversion and the transposed index");
    dense = tb_random(SSM_F64, 2, sd, LAYOUT_CONTIGUOUS, 1.0, &dv);
    idx_set(&tm, mask);
    CHECK_OK(ssm_bell_from_dense(ctx, &dense.t, &tm.t, &L.v.t, &L.ci.t), ctx);
    idx_get(&L.ci, cols);
    CHECK(cols[0] == 1 && cols[1] == 3 && cols[2] == 0 && cols[3] == 4 && cols[4] == 2 && cols[5] == 3, "cols from the mask");
    CHECK_OK(ssm_bell_to_dense(ctx, &L.v.t, &L.ci.t, &out.t), ctx);
    tb_get(&out, back);
    for (r = 0; r < 9; ++r)
        for (c = 0; c < 15; ++c) {
            double want = mask[(r / 3) * 5 + c / 3] ? dv[r * 15 + c] : 0.0;
            CHECK(back[r * 15 + c] == want, "to_dense(from_dense) at %lld,%lld", (long long)r, (long long)c);
        }
    tb_get(&L.v, vv);
    CHECK(vv[0] == dv[3], "tile (0,0) holds dense block (0,1)");
    CHECK_OK(ssm_bell_transpose_index(ctx, &L.ci.t, &L.toff.t, &L.tsl.t), ctx);
    idx_get(&L.toff, offs), idx_get(&L.tsl, slots);
    /* columns: 0 <- slot 2; 1 <- 0; 2 <- 4; 3 <- 1, 5; 4 <- 3 */
    CHECK(offs[0] == 0 && offs[1] == 1 && offs[2] == 2 && offs[3] == 3 && offs[4] == 5 && offs[5] == 6, "t_offsets");
    CHECK(slots[0] == 2 && slots[1] == 0 && slots[2] == 4 && slots[3] == 1 && slots[4] == 5 && slots[5] == 3, "t_slots");
    test_end();
    tb_free(&dense), tb_free(&tm), tb_free(&out), free(dv), free(back), free(vv);
    layer_free(&L);
    ssm_ctx_destroy(ctx);
}

/* ---- dynamic topology: each rule in isolation ---- */
typedef struct topo_fix {
    ssm_ctx *ctx;
    ssm_bell_topology *topo;
    layer L;
    tbuf m, v2; /* two optimizer states (Adam m, v) */
    ssm_tensor *opt[2];
} topo_fix;

static topo_fix fix_new(const ssm_bell_topology_config *cfg, int64_t R, int64_t C, int64_t K, int64_t B, const int32_t *cols) {
    topo_fix f;
    int64_t sv[4];
    double *tmp;
    sv[0] = R, sv[1] = K, sv[2] = B, sv[3] = B;
    f.ctx = test_ctx();
    f.L = layer_new(f.ctx, SSM_F64, 2, R, C, K, B, LAYOUT_CONTIGUOUS);
    if (cols) {
        memcpy(f.L.cols, cols, sizeof(int32_t) * (size_t)(R * K));
        idx_set(&f.L.ci, cols);
        CHECK_OK(ssm_bell_transpose_index(f.ctx, &f.L.ci.t, &f.L.toff.t, &f.L.tsl.t), f.ctx);
    }
    f.m = tb_random(SSM_F64, 4, sv, LAYOUT_CONTIGUOUS, 1.0, &tmp), free(tmp);
    f.v2 = tb_random(SSM_F32, 4, sv, LAYOUT_PADDED, 1.0, &tmp), free(tmp);
    f.topo = NULL;
    CHECK_OK(ssm_bell_topology_create(f.ctx, cfg, R, C, K, &f.topo), f.ctx);
    return f;
}
static void fix_free(topo_fix *f) {
    ssm_bell_topology_destroy(f->topo);
    tb_free(&f->m), tb_free(&f->v2);
    layer_free(&f->L);
    ssm_ctx_destroy(f->ctx);
}
static ssm_result fix_step(topo_fix *f, int64_t step, ssm_bell_topology_report *rep) {
    f->opt[0] = &f->m.t, f->opt[1] = &f->v2.t;
    return ssm_bell_topology_step(f->ctx, f->topo, step, &f->L.v.t, &f->L.ci.t, &f->L.toff.t, &f->L.tsl.t, f->opt, 2, rep);
}
/* The transposed index after a step equals a fresh build. */
static int tindex_fresh(topo_fix *f) {
    int64_t so[1], ss[1];
    tbuf o, s;
    int ok;
    so[0] = f->L.C + 1, ss[0] = f->L.R * f->L.K;
    o = tb_new(SSM_I32, 1, so, LAYOUT_CONTIGUOUS), s = tb_new(SSM_I32, 1, ss, LAYOUT_CONTIGUOUS);
    ssm_bell_transpose_index(f->ctx, &f->L.ci.t, &o.t, &s.t);
    ok = !memcmp(o.t.data, f->L.toff.t.data, sizeof(int32_t) * (size_t)so[0]) && !memcmp(s.t.data, f->L.tsl.t.data, sizeof(int32_t) * (size_t)ss[0]);
    tb_free(&o), tb_free(&s);
    return ok;
}
static int tile_is(const tbuf *t, int64_t K, int64_t B, int64_t r, int64_t k, const double *ref, int64_t rr, int64_t kk) {
    double *v = (double *)malloc(sizeof(double) * (size_t)tb_numel(t));
    int64_t i, ok = 1;
    tb_get(t, v);
    for (i = 0; i < B * B; ++i) {
        double want = ref ? ref[(rr * K + kk) * B * B + i] : 0.0;
        if (v[(r * K + k) * B * B + i] != want) ok = 0;
    }
    free(v);
    return (int)ok;
}

static void test_topo_threshold(void) {
    ssm_bell_topology_config cfg = ssm_bell_topology_config_init();
    int32_t cols[6] = {0, 1, 2, 2, 3, 5}, got[6];
    double keep[6] = {2, 1, 3, 5, 1, 4}, grow0[6] = {0, 0, 0, 1.49, 1.0, 0.5}, grow1[6] = {1.6, 1.2, 0, 0, 1.5, 0};
    double v0[24], m0[24], s0[24];
    topo_fix f;
    ssm_bell_topology_report rep;
    uint64_t sum;
    test_begin("bell topology: swap threshold, K fixed, optimizer state moved/zeroed, report");
    cfg.period = 1, cfg.epsilon = 0.0, cfg.prune_frac = 1.0 / 3.0;
    f = fix_new(&cfg, 2, 6, 3, 2, cols);
    memcpy(f.topo->keep_score, keep, sizeof keep);
    memcpy(f.topo->grow_score, grow0, sizeof grow0);
    memcpy(f.topo->grow_score + 6, grow1, sizeof grow1);
    tb_get(&f.L.v, v0), tb_get(&f.m, m0), tb_get(&f.v2, s0);
    CHECK_OK(fix_step(&f, 7, &rep), f.ctx);
    idx_get(&f.L.ci, got);
    /* row 0: best candidate 1.49 < 1.5 x 1.0: kept. row 1: slot 1 (col 3, score 1) -> col 0 (1.6), re-sorted */
    CHECK(got[0] == 0 && got[1] == 1 && got[2] == 2, "row 0 must not change (1.49 < 1.5)");
    CHECK(got[3] == 0 && got[4] == 2 && got[5] == 5, "row 1 must become {0,2,5}, got {%d,%d,%d}", got[3], got[4], got[5]);
    CHECK(rep.updated == 1 && rep.grown == 1 && rep.pruned == 1 && rep.rejected == 1 && rep.explored == 0 && rep.rows_changed == 1,
          "report grown %lld rejected %lld explored %lld", (long long)rep.grown, (long long)rep.rejected, (long long)rep.explored);
    CHECK(fabs(rep.churn - 1.0 / 6.0) < 1e-15, "churn %g", rep.churn);
    CHECK(tile_is(&f.L.v, 3, 2, 0, 0, v0, 0, 0) && tile_is(&f.L.v, 3, 2, 0, 1, v0, 0, 1) && tile_is(&f.L.v, 3, 2, 0, 2, v0, 0, 2),
          "row 0 values must stay");
    CHECK(tile_is(&f.L.v, 3, 2, 1, 0, NULL, 0, 0), "the grown tile starts at zero");
    CHECK(tile_is(&f.L.v, 3, 2, 1, 1, v0, 1, 0) && tile_is(&f.L.v, 3, 2, 1, 2, v0, 1, 2), "kept tiles move with their column");
    CHECK(tile_is(&f.m, 3, 2, 1, 0, NULL, 0, 0) && tile_is(&f.m, 3, 2, 1, 1, m0, 1, 0) && tile_is(&f.m, 3, 2, 1, 2, m0, 1, 2),
          "optimizer state m moved/zeroed with the tiles");
    CHECK(tile_is(&f.v2, 3, 2, 1, 0, NULL, 0, 0) && tile_is(&f.v2, 3, 2, 1, 1, s0, 1, 0) && tb_outside_untouched(&f.v2),
          "optimizer state v (f32, padded) moved/zeroed");
    CHECK(f.topo->keep_score[3] == 1.6 && f.topo->keep_score[4] == 5 && f.topo->keep_score[5] == 4, "keep scores move; grown inherits 1.6");
    CHECK(tindex_fresh(&f), "the transposed index is rebuilt");
    CHECK_OK(ssm_bell_checksum(f.ctx, &f.L.ci.t, &sum), f.ctx);
    CHECK(sum == rep.checksum, "report checksum = ssm_bell_checksum");
    CHECK_OK(ssm_bell_validate(f.ctx, &f.L.v.t, &f.L.ci.t, 6), f.ctx);
    test_end();
    fix_free(&f);
}

static void test_topo_schedule(void) {
    ssm_bell_topology_config cfg = ssm_bell_topology_config_init();
    topo_fix f;
    ssm_bell_topology_report rep;
    int32_t c0[8], c1[8];
    test_begin("bell topology: period, stop step, cosine decay, defaults");
    CHECK(cfg.period == 100 && cfg.prune_frac == 0.1 && cfg.swap_ratio == 1.5 && cfg.epsilon == 0.05 &&
          cfg.keep_alpha == 0.95 && cfg.grow_alpha == 0.99 && cfg.drop_score == SSM_BELL_DROP_GRAD_EMA, "seed defaults");
    cfg.period = 10, cfg.stop_step = 30, cfg.cosine_decay = 1, cfg.epsilon = 1.0, cfg.prune_frac = 1.0;
    f = fix_new(&cfg, 2, 8, 4, 1, NULL);
    idx_get(&f.L.ci, c0);
    CHECK_OK(fix_step(&f, 0, &rep), f.ctx);
    CHECK(!rep.updated, "step 0 is no update");
    CHECK_OK(fix_step(&f, 15, &rep), f.ctx);
    CHECK(!rep.updated, "step 15 is off period");
    idx_get(&f.L.ci, c1);
    CHECK(!memcmp(c0, c1, sizeof c0), "no change off period");
    CHECK_OK(fix_step(&f, 10, &rep), f.ctx);
    CHECK(rep.updated && fabs(rep.prune_frac - 0.75) < 1e-12, "cosine: frac at 10/30 is 0.75, got %g", rep.prune_frac);
    CHECK(rep.grown == 2 * 3 && rep.explored == 6, "round(0.75 x 4) = 3 per row (epsilon 1), got %lld", (long long)rep.grown);
    CHECK_OK(fix_step(&f, 30, &rep), f.ctx);
    CHECK(!rep.updated, "no update at stop_step");
    test_end();
    fix_free(&f);
}

static void test_topo_epsilon(void) {
    ssm_bell_topology_config cfg = ssm_bell_topology_config_init();
    topo_fix f;
    ssm_bell_topology_report rep;
    int64_t step, r, k, j, explored = 0, trials = 0;
    int32_t before[1600], after[1600];
    double sigma;
    test_begin("bell topology: epsilon-greedy rate within 5 sigma, explores unused columns only");
    cfg.period = 1, cfg.epsilon = 0.2, cfg.prune_frac = 0.25, cfg.swap_ratio = 1e300;
    f = fix_new(&cfg, 400, 8, 4, 1, NULL);
    for (step = 1; step <= 5; ++step) {
        idx_get(&f.L.ci, before);
        CHECK_OK(fix_step(&f, step, &rep), f.ctx);
        idx_get(&f.L.ci, after);
        explored += rep.explored, trials += 400;
        CHECK(rep.grown == rep.explored && rep.grown + rep.rejected == 400, "only exploration swaps here");
        for (r = 0; r < 400; ++r) {
            int64_t fresh = 0;
            for (k = 0; k < 4; ++k) {
                int found = 0;
                for (j = 0; j < 4; ++j) found |= after[r * 4 + k] == before[r * 4 + j];
                fresh += !found;
            }
            CHECK(fresh <= 1, "at most one new column per row");
        }
        CHECK_OK(ssm_bell_validate(f.ctx, &f.L.v.t, &f.L.ci.t, 8), f.ctx);
    }
    sigma = sqrt((double)trials * 0.2 * 0.8);
    CHECK(fabs((double)explored - 0.2 * (double)trials) < 5 * sigma, "explored %lld of %lld (expected %g)", (long long)explored,
          (long long)trials, 0.2 * (double)trials);
    test_end();
    fix_free(&f);
}

static void test_topo_determinism(void) {
    ssm_bell_topology_config cfg = ssm_bell_topology_config_init();
    topo_fix a, b;
    ssm_bell_topology_report ra, rb;
    int32_t cols[800];
    int64_t i;
    test_begin("bell topology: same (seed, step, layer) -> same topology bitwise; another layer id differs");
    cfg.period = 1, cfg.epsilon = 0.5, cfg.seed = 1234, cfg.prune_frac = 0.25;
    a = fix_new(&cfg, 200, 8, 4, 2, NULL);
    idx_get(&a.L.ci, cols);
    cfg.layer_id = 1;
    b = fix_new(&cfg, 200, 8, 4, 2, cols);
    for (i = 0; i < 800; ++i) a.topo->keep_score[i] = b.topo->keep_score[i] = test_uniform(0, 1);
    for (i = 0; i < 1600; ++i) a.topo->grow_score[i] = b.topo->grow_score[i] = test_uniform(0, 3);
    CHECK_OK(fix_step(&a, 42, &ra), a.ctx);
    CHECK_OK(fix_step(&b, 42, &rb), b.ctx);
    CHECK(ra.checksum != rb.checksum, "layer ids must key the generator");
    b.topo->config.layer_id = 0; /* now the same key: rerun both from the same state */
    idx_set(&a.L.ci, cols), idx_set(&b.L.ci, cols);
    for (i = 0; i < 800; ++i) a.topo->keep_score[i] = b.topo->keep_score[i] = (double)(i % 7) * 0.1;
    for (i = 0; i < 1600; ++i) a.topo->grow_score[i] = b.topo->grow_score[i] = (double)(i % 11) * 0.2;
    CHECK_OK(fix_step(&a, 43, &ra), a.ctx);
    CHECK_OK(fix_step(&b, 43, &rb), b.ctx);
    CHECK(ra.checksum == rb.checksum && !memcmp(a.L.ci.mem, b.L.ci.mem, a.L.ci.bytes), "same key, same topology");
    CHECK(ra.grown > 0 && ra.explored > 0, "the update did something (grown %lld)", (long long)ra.grown);
    test_end();
    fix_free(&a), fix_free(&b);
}

/* Two simulated ranks: the hook replaces a buffer with the average of both ranks' snapshots
   (what an all-reduce AVG delivers). */
typedef struct avg_hook {
    double *keep[2], *grow[2];
    int64_t nk, ng;
    int calls;
} avg_hook;
static ssm_result avg_reduce(void *user, double *data, int64_t count) {
    avg_hook *h = (avg_hook *)user;
    double **src = count == h->nk ? h->keep : h->grow;
    int64_t i;
    if (count != h->nk && count != h->ng) return SSM_ERROR_INVALID_VALUE;
    for (i = 0; i < count; ++i) data[i] = 0.5 * (src[0][i] + src[1][i]);
    ++h->calls;
    return SSM_OK;
}
static void rank_observe(topo_fix *f, int rank) {
    int64_t N = 6, sx[2], sy[2], sv[4], i, n;
    double *xv, *dyv;
    tbuf x, dy, dv;
    sx[0] = N, sx[1] = f->L.C * f->L.B, sy[0] = N, sy[1] = f->L.R * f->L.B;
    sv[0] = f->L.R, sv[1] = f->L.K, sv[2] = f->L.B, sv[3] = f->L.B;
    x = tb_random(SSM_F64, 2, sx, LAYOUT_CONTIGUOUS, 1.0, &xv);
    for (n = 0; n < N; ++n) /* rank 0 sees energy in the low columns, rank 1 in the high ones */
        for (i = 0; i < sx[1]; ++i) xv[n * sx[1] + i] *= (i < sx[1] / 2) == (rank == 0) ? 4.0 : 0.25;
    tb_set(&x, xv);
    dy = tb_random(SSM_F64, 2, sy, LAYOUT_CONTIGUOUS, 1.0, &dyv);
    dv = tb_new(SSM_F64, 4, sv, LAYOUT_CONTIGUOUS);
    CHECK_OK(ssm_bell_backward(f->ctx, &x.t, &f->L.v.t, &f->L.ci.t, NULL, NULL, &dy.t, NULL, &dv.t, NULL), f->ctx);
    CHECK_OK(ssm_bell_topology_observe(f->ctx, f->topo, &x.t, &dy.t, &dv.t), f->ctx);
    tb_free(&x), tb_free(&dy), tb_free(&dv), free(xv), free(dyv);
}
static void test_topo_ranks(void) {
    ssm_bell_topology_config cfg = ssm_bell_topology_config_init();
    topo_fix f[2], g[2];
    avg_hook h;
    ssm_bell_topology_report rep[2], loc[2];
    int32_t cols[32];
    int i, t;
    test_begin("bell topology: two ranks with different local scores agree through an averaging hook");
    cfg.period = 1, cfg.swap_ratio = 0.0, cfg.prune_frac = 0.25;
    h.nk = 8 * 4, h.ng = 8 * 8, h.calls = 0;
    cfg.allreduce = avg_reduce, cfg.allreduce_user = &h;
    f[0] = fix_new(&cfg, 8, 8, 4, 2, NULL);
    idx_get(&f[0].L.ci, cols);
    f[1] = fix_new(&cfg, 8, 8, 4, 2, cols);
    cfg.allreduce = NULL;
    g[0] = fix_new(&cfg, 8, 8, 4, 2, cols), g[1] = fix_new(&cfg, 8, 8, 4, 2, cols);
    tb_set(&f[1].L.v, f[0].L.vv), tb_set(&g[0].L.v, f[0].L.vv), tb_set(&g[1].L.v, f[0].L.vv);
    for (i = 0; i < 2; ++i)
        for (t = 0; t < 3; ++t) rank_observe(&f[i], i);
    for (i = 0; i < 2; ++i) { /* the same local scores on the ranks that do not reduce */
        memcpy(g[i].topo->keep_score, f[i].topo->keep_score, sizeof(double) * 32);
        memcpy(g[i].topo->grow_score, f[i].topo->grow_score, sizeof(double) * 64);
        h.keep[i] = (double *)malloc(sizeof(double) * 32), h.grow[i] = (double *)malloc(sizeof(double) * 64);
        memcpy(h.keep[i], f[i].topo->keep_score, sizeof(double) * 32);
        memcpy(h.grow[i], f[i].topo->grow_score, sizeof(double) * 64);
    }
    CHECK(memcmp(h.grow[0], h.grow[1], sizeof(double) * 64) != 0, "local scores differ");
    for (i = 0; i < 2; ++i) {
        CHECK_OK(fix_step(&f[i], 100, &rep[i]), f[i].ctx);
        CHECK_OK(fix_step(&g[i], 100, &loc[i]), g[i].ctx);
    }
    CHECK(h.calls == 4, "the hook runs on keep and grow scores on each rank (%d calls)", h.calls);
    CHECK(rep[0].grown > 0, "the update changed something");
    CHECK(rep[0].checksum == rep[1].checksum && !memcmp(f[0].L.ci.mem, f[1].L.ci.mem, f[0].L.ci.bytes), "ranks agree with the hook");
    CHECK(loc[0].checksum != loc[1].checksum, "without the hook the local choices differ");
    test_end();
    for (i = 0; i < 2; ++i) fix_free(&f[i]), fix_free(&g[i]), free(h.keep[i]), free(h.grow[i]);
}

static void test_topo_scores(void) {
    ssm_bell_topology_config cfg = ssm_bell_topology_config_init();
    int32_t cols[2] = {0, 1}, got[2];
    topo_fix f;
    ssm_bell_topology_report rep;
    double big[16] = {3, 3, 3, 3, 0.1, 0.1, 0.1, 0.1, 0, 0, 0, 0, 0, 0, 0, 0}, xv[8], dyv[4], dvv[8], vals[8];
    int64_t sx[2] = {2, 4}, sy[2] = {2, 2}, sv[4] = {1, 2, 2, 2}, i;
    tbuf x = tb_new(SSM_F64, 2, sx, LAYOUT_PADDED), dy = tb_new(SSM_F64, 2, sy, LAYOUT_REVERSED), dv = tb_new(SSM_F64, 4, sv, LAYOUT_CONTIGUOUS);
    test_begin("bell topology: EMA scores from observe; magnitude drop score");
    cfg.period = 1, cfg.epsilon = 0.0, cfg.prune_frac = 0.5, cfg.drop_score = SSM_BELL_DROP_MAGNITUDE;
    f = fix_new(&cfg, 1, 2, 2, 2, cols);
    for (i = 0; i < 8; ++i) xv[i] = (double)(i + 1), dvv[i] = i < 4 ? 1.0 : 2.0;
    for (i = 0; i < 4; ++i) dyv[i] = 0.5 * (double)(i + 1);
    tb_set(&x, xv), tb_set(&dy, dyv), tb_set(&dv, dvv);
    CHECK_OK(ssm_bell_topology_observe(f.ctx, f.topo, &x.t, &dy.t, &dv.t), f.ctx);
    CHECK_OK(ssm_bell_topology_observe(f.ctx, f.topo, &x.t, &dy.t, &dv.t), f.ctx);
    /* keep: (1 - 0.95^2) ||dW_k||; grow(0, c): (1 - 0.99^2) ||x_c|| ||dy_0|| */
    CHECK(fabs(f.topo->keep_score[0] - (1 - 0.95 * 0.95) * 2.0) < 1e-12 && fabs(f.topo->keep_score[1] - (1 - 0.95 * 0.95) * 4.0) < 1e-12,
          "keep EMA %g %g", f.topo->keep_score[0], f.topo->keep_score[1]);
    CHECK(fabs(f.topo->grow_score[0] - (1 - 0.99 * 0.99) * sqrt(1 + 4 + 25 + 36) * sqrt(0.25 + 1 + 2.25 + 4)) < 1e-12, "grow EMA");
    CHECK(f.topo->observations == 2, "observation count");
    fix_free(&f);
    /* magnitude: slot 1 has the smaller |W| (and the larger keep score): it is the one dropped */
    f = fix_new(&cfg, 1, 4, 2, 2, cols);
    tb_set(&f.L.v, big);
    f.topo->keep_score[0] = f.topo->keep_score[1] = 0.1;
    for (i = 0; i < 4; ++i) f.topo->grow_score[i] = i == 3 ? 1.0 : 0.2;
    CHECK_OK(fix_step(&f, 1, &rep), f.ctx);
    idx_get(&f.L.ci, got);
    tb_get(&f.L.v, vals);
    CHECK(got[0] == 0 && got[1] == 3 && vals[0] == 3 && vals[4] == 0, "magnitude drops the small tile: cols {%d,%d}", got[0], got[1]);
    test_end();
    fix_free(&f);
    tb_free(&x), tb_free(&dy), tb_free(&dv);
}

/* ---- validation: every error path returns its code and writes nothing ---- */
#define EXPECT_ERR(expr, code, what)                                                                   \
    do {                                                                                               \
        ssm_result e_ = (expr);                                                                        \
        CHECK(e_ == (code), "%s: got %s, expected %s", what, ssm_result_string(e_), ssm_result_string(code)); \
        CHECK(tb_untouched(&y) && tb_untouched(&dx) && tb_untouched(&dv), "%s: an output was written", what); \
    } while (0)

static void test_errors(void) {
    ssm_ctx *ctx = test_ctx(), *fake_ctx = NULL;
    layer L = layer_new(ctx, SSM_F64, 3, 4, 4, 2, 2, LAYOUT_CONTIGUOUS), L32;
    int64_t sy[2] = {3, 8}, sv[4] = {4, 2, 2, 2}, sbad[4] = {4, 5, 2, 2}, s0[4] = {4, 2, 0, 0}, sc5[2] = {4, 5}, sm[2] = {4, 4};
    tbuf y = tb_new(SSM_F64, 2, sy, LAYOUT_CONTIGUOUS), dx = tb_new(SSM_F64, 2, sy, LAYOUT_CONTIGUOUS);
    tbuf dv = tb_new(SSM_F64, 4, sv, LAYOUT_CONTIGUOUS), dy, vbad = tb_new(SSM_F64, 4, sbad, LAYOUT_CONTIGUOUS);
    tbuf cbad = tb_new(SSM_I32, 2, sc5, LAYOUT_CONTIGUOUS), v0 = tb_new(SSM_F64, 4, s0, LAYOUT_CONTIGUOUS), mask = tb_new(SSM_I32, 2, sm, LAYOUT_CONTIGUOUS);
    int32_t cols[8], bad[8], mk[16] = {0}, t5[20] = {0};
    ssm_tensor t, alias;
    ssm_backend fake;
    ssm_ctx_config cfg = ssm_ctx_config_init();
    ssm_bell_topology_config tc = ssm_bell_topology_config_init();
    ssm_bell_topology *topo = NULL, *topo_other = NULL;
    unsigned char *snap_v, *snap_c;
    double *dyv;
    int i;
    test_begin("bell validation errors leave outputs untouched");
    dy = tb_random(SSM_F64, 2, sy, LAYOUT_CONTIGUOUS, 1.0, &dyv);
    L32 = layer_new(ctx, SSM_F32, 3, 4, 4, 2, 2, LAYOUT_CONTIGUOUS);
    idx_get(&L.ci, cols);
    EXPECT_ERR(ssm_bell_forward(NULL, &L.x.t, &L.v.t, &L.ci.t, NULL, &y.t), SSM_ERROR_NULL_ARGUMENT, "NULL ctx");
    EXPECT_ERR(ssm_bell_forward(ctx, NULL, &L.v.t, &L.ci.t, NULL, &y.t), SSM_ERROR_NULL_ARGUMENT, "NULL x");
    EXPECT_ERR(ssm_bell_forward(ctx, &L.x.t, &L.v.t, NULL, NULL, &y.t), SSM_ERROR_NULL_ARGUMENT, "NULL col_idx");
    t = L.x.t, t.data = NULL;
    EXPECT_ERR(ssm_bell_forward(ctx, &t, &L.v.t, &L.ci.t, NULL, &y.t), SSM_ERROR_NULL_ARGUMENT, "NULL x data");
    EXPECT_ERR(ssm_bell_forward(ctx, &L32.x.t, &L.v.t, &L.ci.t, NULL, &y.t), SSM_ERROR_INVALID_DTYPE, "x f32, values f64");
    EXPECT_ERR(ssm_bell_forward(ctx, &L.x.t, &L.v.t, &L.ci.t, &L32.bias.t, &y.t), SSM_ERROR_INVALID_DTYPE, "bias f32");
    EXPECT_ERR(ssm_bell_forward(ctx, &L.x.t, &L.v.t, &L.v.t, NULL, &y.t), SSM_ERROR_INVALID_SHAPE, "col_idx of the wrong rank");
    t = L.ci.t, t.dtype = SSM_F32;
    EXPECT_ERR(ssm_bell_forward(ctx, &L.x.t, &L.v.t, &t, NULL, &y.t), SSM_ERROR_INVALID_DTYPE, "col_idx not i32");
    t = L.x.t, t.device = ssm_cuda_device(0);
    EXPECT_ERR(ssm_bell_forward(ctx, &t, &L.v.t, &L.ci.t, NULL, &y.t), SSM_ERROR_INVALID_DEVICE, "x on a GPU");
    t = y.t, t.shape[1] = 6;
    EXPECT_ERR(ssm_bell_forward(ctx, &L.x.t, &L.v.t, &L.ci.t, NULL, &t), SSM_ERROR_INVALID_SHAPE, "y too narrow");
    t = L.x.t, t.shape[1] = 7;
    EXPECT_ERR(ssm_bell_forward(ctx, &t, &L.v.t, &L.ci.t, NULL, &y.t), SSM_ERROR_INVALID_SHAPE, "x width not a multiple of B");
    alias = L.x.t; /* y written over x (same [3, 8] shape) */
    EXPECT_ERR(ssm_bell_forward(ctx, &L.x.t, &L.v.t, &L.ci.t, NULL, &alias), SSM_ERROR_ALIASING, "y aliases x");
    t = y.t, t.strides[0] = 0;
    EXPECT_ERR(ssm_bell_forward(ctx, &L.x.t, &L.v.t, &L.ci.t, NULL, &t), SSM_ERROR_INVALID_STRIDE, "y overlaps itself");
    EXPECT_ERR(ssm_bell_forward(ctx, &L.x.t, &v0.t, &L.ci.t, NULL, &y.t), SSM_ERROR_INVALID_SHAPE, "B = 0");
    EXPECT_ERR(ssm_bell_forward(ctx, &L.x.t, &vbad.t, &cbad.t, NULL, &y.t), SSM_ERROR_INVALID_SHAPE, "K = 5 > C = 4");
    memcpy(bad, cols, sizeof bad), bad[3] = 4, idx_set(&L.ci, bad);
    EXPECT_ERR(ssm_bell_forward(ctx, &L.x.t, &L.v.t, &L.ci.t, NULL, &y.t), SSM_ERROR_INVALID_VALUE, "col_idx out of range");
    bad[3] = -1, idx_set(&L.ci, bad);
    EXPECT_ERR(ssm_bell_forward(ctx, &L.x.t, &L.v.t, &L.ci.t, NULL, &y.t), SSM_ERROR_INVALID_VALUE, "col_idx negative");
    bad[3] = bad[2], idx_set(&L.ci, bad);
    EXPECT_ERR(ssm_bell_forward(ctx, &L.x.t, &L.v.t, &L.ci.t, NULL, &y.t), SSM_ERROR_INVALID_VALUE, "duplicate column in a row");
    EXPECT_ERR(ssm_bell_validate(ctx, &L.v.t, &L.ci.t, 4), SSM_ERROR_INVALID_VALUE, "validate: duplicate");
    idx_set(&L.ci, cols);
    CHECK_OK(ssm_bell_validate(ctx, &L.v.t, &L.ci.t, 4), ctx);
    /* backward: a stale transposed index, dx without one, wrong dvalues */
    memcpy(bad, cols, sizeof bad);
    for (i = 0; i < 4; ++i) /* row 0 moves to a column it does not use (the index is now stale) */
        if (i != bad[0] && i != bad[1]) { bad[0] = i; break; }
    idx_set(&L.ci, bad);
    EXPECT_ERR(ssm_bell_backward(ctx, &L.x.t, &L.v.t, &L.ci.t, &L.toff.t, &L.tsl.t, &dy.t, &dx.t, &dv.t, NULL),
               SSM_ERROR_INVALID_VALUE, "stale transposed index");
    idx_set(&L.ci, cols);
    EXPECT_ERR(ssm_bell_backward(ctx, &L.x.t, &L.v.t, &L.ci.t, NULL, &L.tsl.t, &dy.t, &dx.t, &dv.t, NULL),
               SSM_ERROR_NULL_ARGUMENT, "dx without t_offsets");
    EXPECT_ERR(ssm_bell_backward(ctx, &L.x.t, &L.v.t, &L.ci.t, &L.toff.t, &L.tsl.t, &dy.t, &dx.t, &vbad.t, NULL),
               SSM_ERROR_INVALID_SHAPE, "dvalues of the wrong shape");
    EXPECT_ERR(ssm_bell_backward(ctx, &L.x.t, &L.v.t, &L.ci.t, &L.toff.t, &L.tsl.t, &dy.t, &dx.t, &dx.t, NULL),
               SSM_ERROR_INVALID_SHAPE, "dvalues given dx");
    alias = dv.t, alias.data = dx.mem, alias.ndim = 4;
    EXPECT_ERR(ssm_bell_backward(ctx, &L.x.t, &L.v.t, &L.ci.t, &L.toff.t, &L.tsl.t, &dy.t, &dx.t, &alias, NULL),
               SSM_ERROR_ALIASING, "dvalues overlaps dx");
    /* conversion */
    EXPECT_ERR(ssm_bell_from_dense(ctx, &L.x.t, &mask.t, &dv.t, &L.ci.t), SSM_ERROR_INVALID_SHAPE, "dense of the wrong shape");
    {
        int64_t sd[2] = {8, 8};
        tbuf dense = tb_new(SSM_F64, 2, sd, LAYOUT_CONTIGUOUS);
        memset(dense.mem, 0, dense.bytes);
        mk[0] = mk[1] = mk[4] = mk[5] = mk[8] = mk[9] = mk[12] = 1; /* row 3 has one block, K = 2 */
        idx_set(&mask, mk);
        EXPECT_ERR(ssm_bell_from_dense(ctx, &dense.t, &mask.t, &dv.t, &L.ci.t), SSM_ERROR_INVALID_VALUE, "mask row with != K blocks");
        CHECK(!memcmp(cols, L.ci.t.data, sizeof cols), "col_idx untouched");
        EXPECT_ERR(ssm_bell_to_dense(ctx, &L.v.t, &L.ci.t, &y.t), SSM_ERROR_INVALID_SHAPE, "to_dense into [3, 8]");
        tb_free(&dense);
    }
    EXPECT_ERR(ssm_bell_transpose_index(ctx, &L.ci.t, &L.tsl.t, &L.tsl.t), SSM_ERROR_ALIASING, "t_offsets aliases t_slots");
    EXPECT_ERR(ssm_bell_transpose_index(ctx, &L.ci.t, &L.toff.t, &L.toff.t), SSM_ERROR_INVALID_SHAPE, "t_slots of the wrong size");
    /* a backend that is not a CPU one */
    memset(&fake, 0, sizeof fake);
    fake.name = "fake-gpu", fake.device_type = SSM_DEVICE_CUDA;
    fake.gemm = ssm_reference_backend()->gemm; /* never reached: the ops refuse first */
    cfg.backend = &fake;
    CHECK_OK(ssm_ctx_create(&cfg, &fake_ctx), fake_ctx);
    EXPECT_ERR(ssm_bell_forward(fake_ctx, &L.x.t, &L.v.t, &L.ci.t, NULL, &y.t), SSM_ERROR_UNSUPPORTED, "non-CPU backend");
    EXPECT_ERR(ssm_bell_backward(fake_ctx, &L.x.t, &L.v.t, &L.ci.t, &L.toff.t, &L.tsl.t, &dy.t, &dx.t, &dv.t, NULL),
               SSM_ERROR_UNSUPPORTED, "non-CPU backend (backward)");
    ssm_ctx_destroy(fake_ctx);
    /* topology */
    tc.period = 0;
    EXPECT_ERR(ssm_bell_topology_create(ctx, &tc, 4, 4, 2, &topo), SSM_ERROR_INVALID_VALUE, "period 0");
    tc.period = 1, tc.cosine_decay = 1;
    EXPECT_ERR(ssm_bell_topology_create(ctx, &tc, 4, 4, 2, &topo), SSM_ERROR_INVALID_VALUE, "cosine without stop_step");
    tc.cosine_decay = 0, tc.epsilon = 1.5;
    EXPECT_ERR(ssm_bell_topology_create(ctx, &tc, 4, 4, 2, &topo), SSM_ERROR_INVALID_VALUE, "epsilon > 1");
    tc.epsilon = 1.0;
    EXPECT_ERR(ssm_bell_topology_create(ctx, &tc, 4, 2, 4, &topo), SSM_ERROR_INVALID_SHAPE, "K > C");
    CHECK(topo == NULL, "no topology on failure");
    CHECK_OK(ssm_bell_topology_create(ctx, &tc, 4, 4, 2, &topo), ctx);
    CHECK_OK(ssm_bell_topology_create(ctx, &tc, 4, 8, 2, &topo_other), ctx);
    snap_v = (unsigned char *)malloc(L.v.bytes), snap_c = (unsigned char *)malloc(L.ci.bytes);
    memcpy(snap_v, L.v.mem, L.v.bytes), memcpy(snap_c, L.ci.mem, L.ci.bytes);
    EXPECT_ERR(ssm_bell_topology_step(ctx, topo_other, 1, &L.v.t, &L.ci.t, &L.toff.t, &L.tsl.t, NULL, 0, NULL),
               SSM_ERROR_INVALID_SHAPE, "topology of another layer");
    {
        ssm_tensor *opt[1];
        opt[0] = &dx.t;
        EXPECT_ERR(ssm_bell_topology_step(ctx, topo, 1, &L.v.t, &L.ci.t, &L.toff.t, &L.tsl.t, opt, 1, NULL),
                   SSM_ERROR_INVALID_SHAPE, "optimizer state of the wrong shape");
        opt[0] = &L.v.t;
        EXPECT_ERR(ssm_bell_topology_step(ctx, topo, 1, &L.v.t, &L.ci.t, &L.toff.t, &L.tsl.t, opt, 1, NULL),
                   SSM_ERROR_ALIASING, "optimizer state aliases values");
        EXPECT_ERR(ssm_bell_topology_step(ctx, topo, 1, &L.v.t, &L.ci.t, &L.toff.t, &L.tsl.t, NULL, 1, NULL),
                   SSM_ERROR_INVALID_VALUE, "n_opt without states");
    }
    idx_set(&cbad, t5), memcpy(bad, cols, sizeof bad), bad[5] = bad[4], idx_set(&L.ci, bad);
    memcpy(snap_c, L.ci.mem, L.ci.bytes);
    EXPECT_ERR(ssm_bell_topology_step(ctx, topo, 1, &L.v.t, &L.ci.t, &L.toff.t, &L.tsl.t, NULL, 0, NULL),
               SSM_ERROR_INVALID_VALUE, "step with a duplicate column");
    EXPECT_ERR(ssm_bell_topology_observe(ctx, topo, &L.x.t, &dy.t, &vbad.t), SSM_ERROR_INVALID_SHAPE, "observe: dvalues of another K");
    CHECK(!memcmp(snap_v, L.v.mem, L.v.bytes) && !memcmp(snap_c, L.ci.mem, L.ci.bytes), "topology errors leave the layer untouched");
    for (i = 0; i < 8; ++i) CHECK(topo->keep_score[i] == 0.0, "scores untouched");
    test_end();
    ssm_bell_topology_destroy(topo), ssm_bell_topology_destroy(topo_other);
    free(snap_v), free(snap_c), free(dyv);
    tb_free(&y), tb_free(&dx), tb_free(&dv), tb_free(&dy), tb_free(&vbad), tb_free(&cbad), tb_free(&v0), tb_free(&mask);
    layer_free(&L), layer_free(&L32);
    ssm_ctx_destroy(ctx);
}

void suite_bell(void) {
    test_dense_roundtrip();
    test_topo_threshold();
    test_topo_schedule();
    test_topo_epsilon();
    test_topo_determinism();
    test_topo_ranks();
    test_topo_scores();
    test_errors();
}
