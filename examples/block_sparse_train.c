/* cc -std=c99 -O2 -march=native examples/block_sparse_train.c -lm -o block_sparse_train

   Trains a block-sparse MLP (640 -> 2560 -> 640, 50% density, 16 x 16 tiles, ReLU)
   with Adam on a synthetic 640-way classification task (x = class prototype + noise), next to
   its dense twin (the same layer at full density, K = C, no topology updates). Every 100
   steps the sparse layers update their topology (prune 10% of each row's tiles, grow as
   many; Adam's m and v move with their tiles and start at zero for grown ones). Prints loss,
   accuracy and topology churn per update. Usage: block_sparse_train [steps (300)] */
#define SSM_IMPLEMENTATION
#include "../ssm.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define D_IN 640
#define D_HID 2560
#define NCLASS 640
#define BATCH 16
#define TILE 16

static uint64_t rng = 88172645463325252ull;
static double uniform(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}
static double normal(void) { return sqrt(-2.0 * log(uniform() + 1e-300)) * cos(6.283185307179586 * uniform()); }

static float *fnew(size_t n) { return (float *)calloc(n, sizeof(float)); }

typedef struct layer {
    int64_t R, C, K;
    float *w, *b, *dw, *db, *mw, *vw, *mb, *vb;
    int32_t *col, *toff, *tslot;
    ssm_tensor tw, tcol, ttoff, ttslot, tb, tdw, tdb, tmw, tvw;
    ssm_bell_topology *topo; /* NULL: static (the dense twin) */
} layer;

static void layer_init(ssm_ctx *ctx, layer *L, int64_t in, int64_t out, double density, int dynamic, uint64_t id) {
    int64_t r, k, j, sv[4], sc[2], so[1], ss[1], sb[1], n;
    int32_t *perm;
    L->R = out / TILE, L->C = in / TILE, L->K = (int64_t)(density * (double)L->C + 0.5);
    n = L->R * L->K * TILE * TILE;
    L->w = fnew((size_t)n), L->dw = fnew((size_t)n), L->mw = fnew((size_t)n), L->vw = fnew((size_t)n);
    L->b = fnew((size_t)out), L->db = fnew((size_t)out), L->mb = fnew((size_t)out), L->vb = fnew((size_t)out);
    L->col = (int32_t *)malloc(sizeof(int32_t) * (size_t)(L->R * L->K));
    L->toff = (int32_t *)malloc(sizeof(int32_t) * (size_t)(L->C + 1));
    L->tslot = (int32_t *)malloc(sizeof(int32_t) * (size_t)(L->R * L->K));
    perm = (int32_t *)malloc(sizeof(int32_t) * (size_t)L->C);
    for (r = 0; r < L->R; ++r) { /* K random columns per row, sorted */
        for (j = 0; j < L->C; ++j) perm[j] = 0;
        for (k = 0; k < L->K;) {
            j = (int64_t)(uniform() * (double)L->C);
            if (!perm[j]) perm[j] = 1, ++k;
        }
        for (j = 0, k = 0; j < L->C; ++j)
            if (perm[j]) L->col[r * L->K + k++] = (int32_t)j;
    }
    free(perm);
    for (j = 0; j < n; ++j) L->w[j] = (float)(normal() * sqrt(2.0 / (double)(L->K * TILE))); /* He, active fan-in */
    sv[0] = L->R, sv[1] = L->K, sv[2] = TILE, sv[3] = TILE, sc[0] = L->R, sc[1] = L->K;
    so[0] = L->C + 1, ss[0] = L->R * L->K, sb[0] = out;
    L->tw = ssm_tensor_make(L->w, SSM_F32, ssm_cpu(), 4, sv, NULL);
    L->tdw = ssm_tensor_make(L->dw, SSM_F32, ssm_cpu(), 4, sv, NULL);
    L->tmw = ssm_tensor_make(L->mw, SSM_F32, ssm_cpu(), 4, sv, NULL);
    L->tvw = ssm_tensor_make(L->vw, SSM_F32, ssm_cpu(), 4, sv, NULL);
    L->tcol = ssm_tensor_make(L->col, SSM_I32, ssm_cpu(), 2, sc, NULL);
    L->ttoff = ssm_tensor_make(L->toff, SSM_I32, ssm_cpu(), 1, so, NULL);
    L->ttslot = ssm_tensor_make(L->tslot, SSM_I32, ssm_cpu(), 1, ss, NULL);
    L->tb = ssm_tensor_make(L->b, SSM_F32, ssm_cpu(), 1, sb, NULL);
    L->tdb = ssm_tensor_make(L->db, SSM_F32, ssm_cpu(), 1, sb, NULL);
    if (ssm_bell_transpose_index(ctx, &L->tcol, &L->ttoff, &L->ttslot) != SSM_OK) {
        fprintf(stderr, "transpose_index: %s\n", ssm_ctx_last_error(ctx));
        exit(1);
    }
    L->topo = NULL;
    if (dynamic) {
        ssm_bell_topology_config cfg = ssm_bell_topology_config_init(); /* the RigL-style defaults */
        cfg.seed = 2025, cfg.layer_id = id;
        if (ssm_bell_topology_create(ctx, &cfg, L->R, L->C, L->K, &L->topo) != SSM_OK) exit(1);
    }
}

static void layer_free(layer *L) {
    free(L->w), free(L->dw), free(L->mw), free(L->vw), free(L->b), free(L->db), free(L->mb), free(L->vb);
    free(L->col), free(L->toff), free(L->tslot);
    ssm_bell_topology_destroy(L->topo);
}

static void adam(float *p, const float *g, float *m, float *v, int64_t n, double lr, int64_t t) {
    double c1 = 1.0 - pow(0.9, (double)t), c2 = 1.0 - pow(0.999, (double)t);
    int64_t i;
    for (i = 0; i < n; ++i) {
        m[i] = 0.9f * m[i] + 0.1f * g[i];
        v[i] = 0.999f * v[i] + 0.001f * g[i] * g[i];
        p[i] -= (float)(lr * (m[i] / c1) / (sqrt(v[i] / c2) + 1e-8));
    }
}

#define OK(expr)                                                                                \
    do {                                                                                        \
        ssm_result r_ = (expr);                                                                 \
        if (r_ != SSM_OK) {                                                                     \
            fprintf(stderr, "%s: %s (%s)\n", #expr, ssm_result_string(r_), ssm_ctx_last_error(ctx)); \
            exit(1);                                                                            \
        }                                                                                       \
    } while (0)

typedef struct model {
    layer l1, l2;
    float *h, *dh, *out, *dout;
    ssm_tensor th, tdh, tout, tdout;
} model;

static void model_init(ssm_ctx *ctx, model *M, double density, int dynamic) {
    int64_t sh[2] = {BATCH, D_HID}, so[2] = {BATCH, NCLASS};
    layer_init(ctx, &M->l1, D_IN, D_HID, density, dynamic, 1);
    layer_init(ctx, &M->l2, D_HID, NCLASS, density, dynamic, 2);
    M->h = fnew(BATCH * D_HID), M->dh = fnew(BATCH * D_HID), M->out = fnew(BATCH * NCLASS), M->dout = fnew(BATCH * NCLASS);
    M->th = ssm_tensor_make(M->h, SSM_F32, ssm_cpu(), 2, sh, NULL);
    M->tdh = ssm_tensor_make(M->dh, SSM_F32, ssm_cpu(), 2, sh, NULL);
    M->tout = ssm_tensor_make(M->out, SSM_F32, ssm_cpu(), 2, so, NULL);
    M->tdout = ssm_tensor_make(M->dout, SSM_F32, ssm_cpu(), 2, so, NULL);
}

/* Forward (+ backward and Adam when train): returns the batch loss, counts correct. */
static double model_step(ssm_ctx *ctx, model *M, const ssm_tensor *x, const int *label, int train, int64_t t, int *correct) {
    int64_t n, j;
    double loss = 0;
    OK(ssm_bell_forward(ctx, x, &M->l1.tw, &M->l1.tcol, &M->l1.tb, &M->th));
    for (j = 0; j < BATCH * D_HID; ++j) M->h[j] = M->h[j] > 0 ? M->h[j] : 0; /* ReLU in place: h > 0 <=> pre > 0 */
    OK(ssm_bell_forward(ctx, &M->th, &M->l2.tw, &M->l2.tcol, &M->l2.tb, &M->tout));
    for (n = 0; n < BATCH; ++n) { /* softmax cross-entropy */
        float *o = M->out + n * NCLASS, *d = M->dout + n * NCLASS, mx = o[0];
        double s = 0;
        int64_t best = 0;
        for (j = 0; j < NCLASS; ++j) {
            if (o[j] > mx) mx = o[j];
            if (o[j] > o[best]) best = j;
        }
        for (j = 0; j < NCLASS; ++j) s += exp((double)(o[j] - mx));
        loss += log(s) - (double)(o[label[n]] - mx);
        *correct += best == label[n];
        for (j = 0; j < NCLASS; ++j) d[j] = (float)((exp((double)(o[j] - mx)) / s - (j == label[n])) / BATCH);
    }
    if (train) {
        OK(ssm_bell_backward(ctx, &M->th, &M->l2.tw, &M->l2.tcol, &M->l2.ttoff, &M->l2.ttslot, &M->tdout, &M->tdh,
                             &M->l2.tdw, &M->l2.tdb));
        for (j = 0; j < BATCH * D_HID; ++j) M->dh[j] = M->h[j] > 0 ? M->dh[j] : 0;
        OK(ssm_bell_backward(ctx, x, &M->l1.tw, &M->l1.tcol, NULL, NULL, &M->tdh, NULL, &M->l1.tdw, &M->l1.tdb));
        if (M->l1.topo) {
            OK(ssm_bell_topology_observe(ctx, M->l1.topo, x, &M->tdh, &M->l1.tdw));
            OK(ssm_bell_topology_observe(ctx, M->l2.topo, &M->th, &M->tdout, &M->l2.tdw));
        }
        adam(M->l1.w, M->l1.dw, M->l1.mw, M->l1.vw, M->l1.R * M->l1.K * TILE * TILE, 1e-3, t);
        adam(M->l1.b, M->l1.db, M->l1.mb, M->l1.vb, D_HID, 1e-3, t);
        adam(M->l2.w, M->l2.dw, M->l2.mw, M->l2.vw, M->l2.R * M->l2.K * TILE * TILE, 1e-3, t);
        adam(M->l2.b, M->l2.db, M->l2.mb, M->l2.vb, NCLASS, 1e-3, t);
    }
    return loss / BATCH;
}

static void batch(const float *proto, float *x, int *label) {
    int64_t n, j;
    for (n = 0; n < BATCH; ++n) {
        label[n] = (int)(uniform() * NCLASS);
        for (j = 0; j < D_IN; ++j) x[n * D_IN + j] = proto[label[n] * D_IN + j] + (float)normal();
    }
}

int main(int argc, char **argv) {
    int64_t steps = argc > 1 ? atoll(argv[1]) : 300, t, j, sx[2] = {BATCH, D_IN};
    float *proto = fnew(NCLASS * D_IN), *x = fnew(BATCH * D_IN);
    int label[BATCH], cs = 0, cd = 0, e, win = 0;
    double ls = 0, ld = 0, churn_total = 0;
    ssm_tensor tx = ssm_tensor_make(x, SSM_F32, ssm_cpu(), 2, sx, NULL);
    ssm_ctx *ctx;
    model S, Dn;
    if (ssm_ctx_create(NULL, &ctx) != SSM_OK) return 1;
    for (j = 0; j < NCLASS * D_IN; ++j) proto[j] = (float)normal();
    model_init(ctx, &S, 0.5, 1);
    model_init(ctx, &Dn, 1.0, 0);
    printf("block-sparse MLP %d -> %d -> %d, B=%d: sparse K = %lld/%lld, %lld/%lld (50%%), dense twin K = C; batch %d, Adam 1e-3\n",
           D_IN, D_HID, NCLASS, TILE, (long long)S.l1.K, (long long)S.l1.C, (long long)S.l2.K, (long long)S.l2.C, BATCH);
    printf("%6s %11s %11s %9s %9s | %-38s | %-38s\n", "step", "loss_sparse", "loss_dense", "acc_sp", "acc_dn",
           "fc1: grown (explored) rejected churn", "fc2: grown (explored) rejected churn");
    for (t = 1; t <= steps; ++t) {
        batch(proto, x, label);
        ls += model_step(ctx, &S, &tx, label, 1, t, &cs);
        ld += model_step(ctx, &Dn, &tx, label, 1, t, &cd);
        ++win;
        {
            ssm_bell_topology_report r1, r2;
            ssm_tensor *o1[2], *o2[2];
            o1[0] = &S.l1.tmw, o1[1] = &S.l1.tvw, o2[0] = &S.l2.tmw, o2[1] = &S.l2.tvw;
            OK(ssm_bell_topology_step(ctx, S.l1.topo, t, &S.l1.tw, &S.l1.tcol, &S.l1.ttoff, &S.l1.ttslot, o1, 2, &r1));
            OK(ssm_bell_topology_step(ctx, S.l2.topo, t, &S.l2.tw, &S.l2.tcol, &S.l2.ttoff, &S.l2.ttslot, o2, 2, &r2));
            if (r1.updated || t % 50 == 0 || t == steps) { /* averages over the steps since the last row */
                double w = (double)win;
                churn_total += r1.churn + r2.churn;
                printf("%6lld %11.4f %11.4f %8.1f%% %8.1f%% | %5lld (%3lld) %5lld %8.4f %9s | %5lld (%3lld) %5lld %8.4f %9s\n",
                       (long long)t, ls / w, ld / w, 100.0 * cs / (w * BATCH),
                       100.0 * cd / (w * BATCH), (long long)r1.grown, (long long)r1.explored, (long long)r1.rejected,
                       r1.churn, "", (long long)r2.grown, (long long)r2.explored, (long long)r2.rejected, r2.churn, "");
                ls = ld = 0, cs = cd = 0, win = 0;
                fflush(stdout);
                OK(ssm_bell_validate(ctx, &S.l1.tw, &S.l1.tcol, S.l1.C)); /* K fixed, indices valid */
                OK(ssm_bell_validate(ctx, &S.l2.tw, &S.l2.tcol, S.l2.C));
            }
        }
    }
    for (e = 0, cs = cd = 0, ls = ld = 0; e < 20; ++e) { /* held-out batches */
        batch(proto, x, label);
        ls += model_step(ctx, &S, &tx, label, 0, 0, &cs);
        ld += model_step(ctx, &Dn, &tx, label, 0, 0, &cd);
    }
    printf("held-out (320 samples): sparse loss %.4f acc %.1f%% | dense loss %.4f acc %.1f%% | total churn %.4f, "
           "sparse layers hold %.0f%% of the dense weights\n",
           ls / 20, 100.0 * cs / (20.0 * BATCH), ld / 20, 100.0 * cd / (20.0 * BATCH), churn_total,
           100.0 * (double)(S.l1.K * S.l1.R + S.l2.K * S.l2.R) / (double)(Dn.l1.K * Dn.l1.R + Dn.l2.K * Dn.l2.R));
    layer_free(&S.l1), layer_free(&S.l2), layer_free(&Dn.l1), layer_free(&Dn.l2);
    free(S.h), free(S.dh), free(S.out), free(S.dout), free(Dn.h), free(Dn.dh), free(Dn.out), free(Dn.dout);
    free(proto), free(x);
    ssm_ctx_destroy(ctx);
    return 0;
}
