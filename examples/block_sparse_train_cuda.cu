/* nvcc -O3 -arch=sm_90 examples/block_sparse_train_cuda.cu -lcublas -o block_sparse_train_cuda

   The GPU twin of examples/block_sparse_train.c: a block-sparse MLP (640 -> 2560 -> 640, 50%
   density, B x B tiles, ReLU) trained with Adam on the same synthetic 640-way task (x = class
   prototype + noise), next to its dense twin on cuBLAS (the same shapes at full density). The
   sparse layers run ssm_bell_forward / ssm_bell_backward and update their topology on the
   device every 100 steps (scores observed by kernels, Adam's m and v moved with their tiles).
   Prints loss, accuracy, tokens/s of each model and the churn of each update.
   Usage: block_sparse_train_cuda [B = 16|32|64 (16)] [steps (300)] [gpus (1)]
   gpus = 2 (data parallel on cuda:0 and cuda:1, a thread per rank; build with NCCL:
     nvcc -O3 -arch=sm_90 -DSSM_NCCL examples/block_sparse_train_cuda.cu -lcublas -lnccl -o block_sparse_train_cuda)
   averages gradients with ncclAllReduce and the topology scores with ssm_cuda_nccl_allreduce,
   and checks after every update that both ranks hold the same topology (checksums). */
#define SSM_IMPLEMENTATION
#define SSM_CUDA_IMPLEMENTATION
#include "../ssm_cuda.h"
#include <cublas_v2.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <thread>

#define D_IN 640
#define D_HID 2560
#define NCLASS 640
#define BATCH 512 /* tokens per step and rank */

static int TILE = 16;

static uint64_t rng_next(uint64_t *s) {
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return *s;
}
static double uniform(uint64_t *s) { return (double)(rng_next(s) >> 11) / 9007199254740992.0; }
static double normal(uint64_t *s) { return sqrt(-2.0 * log(uniform(s) + 1e-300)) * cos(6.283185307179586 * uniform(s)); }

#define CK(call)                                                                                 \
    do {                                                                                         \
        cudaError_t e_ = (call);                                                                 \
        if (e_ != cudaSuccess) {                                                                 \
            fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(e_));                          \
            exit(1);                                                                             \
        }                                                                                        \
    } while (0)
#define OK(ctx, expr)                                                                            \
    do {                                                                                         \
        ssm_result r_ = (expr);                                                                  \
        if (r_ != SSM_OK) {                                                                      \
            fprintf(stderr, "%s: %s (%s)\n", #expr, ssm_result_string(r_), ssm_ctx_last_error(ctx)); \
            exit(1);                                                                             \
        }                                                                                        \
    } while (0)

static float *dnew(size_t n) {
    float *p = NULL;
    CK(cudaMalloc((void **)&p, n * sizeof(float)));
    CK(cudaMemset(p, 0, n * sizeof(float)));
    return p;
}

/* ---- small kernels: ReLU, its mask, bias, softmax cross-entropy, Adam ---- */
__global__ void relu_kernel(float *h, int64_t n, const float *bias, int64_t width) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        float v = h[i] + (bias ? bias[i % width] : 0.f);
        h[i] = v > 0.f ? v : 0.f;
    }
}
__global__ void bias_kernel(float *y, int64_t n, const float *bias, int64_t width) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        y[i] += bias[i % width];
}
__global__ void mask_kernel(float *dh, const float *h, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        if (h[i] <= 0.f) dh[i] = 0.f;
}
/* a block per row: loss, argmax hit, dout = (softmax - onehot) / batch */
__global__ void xent_kernel(const float *out, const int *label, float *dout, float *loss, int *hit, int width, float scale) {
    __shared__ float red[256];
    __shared__ int arg[256];
    const float *o = out + (int64_t)blockIdx.x * width;
    float *d = dout + (int64_t)blockIdx.x * width;
    float mx = -INFINITY;
    int best = 0;
    for (int j = threadIdx.x; j < width; j += blockDim.x)
        if (o[j] > mx) mx = o[j], best = j;
    red[threadIdx.x] = mx, arg[threadIdx.x] = best;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s && (red[threadIdx.x + s] > red[threadIdx.x] ||
                                (red[threadIdx.x + s] == red[threadIdx.x] && arg[threadIdx.x + s] < arg[threadIdx.x])))
            red[threadIdx.x] = red[threadIdx.x + s], arg[threadIdx.x] = arg[threadIdx.x + s];
        __syncthreads();
    }
    mx = red[0], best = arg[0];
    __syncthreads();
    float sum = 0.f;
    for (int j = threadIdx.x; j < width; j += blockDim.x) sum += expf(o[j] - mx);
    red[threadIdx.x] = sum;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
        __syncthreads();
    }
    sum = red[0];
    const int lab = label[blockIdx.x];
    for (int j = threadIdx.x; j < width; j += blockDim.x) d[j] = (expf(o[j] - mx) / sum - (j == lab)) * scale;
    if (threadIdx.x == 0) loss[blockIdx.x] = logf(sum) - (o[lab] - mx), hit[blockIdx.x] = best == lab;
}
__global__ void colsum_kernel(const float *d, int64_t rows, int64_t width, float *db) {
    for (int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; c < width; c += (int64_t)gridDim.x * blockDim.x) {
        float s = 0.f;
        for (int64_t r = 0; r < rows; ++r) s += d[r * width + c];
        db[c] = s;
    }
}
__global__ void adam_kernel(float *p, const float *g, float *m, float *v, int64_t n, float lr, float c1, float c2) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        m[i] = 0.9f * m[i] + 0.1f * g[i];
        v[i] = 0.999f * v[i] + 0.001f * g[i] * g[i];
        p[i] -= lr * (m[i] / c1) / (sqrtf(v[i] / c2) + 1e-8f);
    }
}
static unsigned blocks(int64_t n) { return (unsigned)((n + 255) / 256 < 4096 ? (n + 255) / 256 : 4096); }

/* ---- a layer: block-ELL (sparse) or a dense cuBLAS matrix W [out, in] ---- */
typedef struct layer {
    int sparse;
    int64_t in, out, R, C, K, nw;
    float *w, *b, *dw, *db, *mw, *vw, *mb, *vb;
    int32_t *col, *toff, *tslot;
    ssm_tensor tw, tcol, ttoff, ttslot, tb, tdw, tdb, tmw, tvw;
    ssm_bell_topology *topo;
} layer;

static void layer_init(ssm_ctx *ctx, ssm_ctx *cpu, layer *L, int dev, int64_t in, int64_t out, int sparse, uint64_t id,
                       ssm_bell_allreduce_fn hook, void *hook_user) {
    uint64_t s = 88172645463325252ull + 1000 * id; /* the same initial layer on every rank */
    ssm_device d = ssm_cuda_device(dev);
    L->sparse = sparse, L->in = in, L->out = out, L->topo = NULL;
    L->R = out / TILE, L->C = in / TILE, L->K = sparse ? (L->C + 1) / 2 : L->C;
    L->nw = sparse ? L->R * L->K * TILE * TILE : in * out;
    float *hw = (float *)malloc(sizeof(float) * (size_t)L->nw);
    for (int64_t j = 0; j < L->nw; ++j) hw[j] = (float)(normal(&s) * sqrt(2.0 / (double)(L->K * TILE))); /* He, active fan-in */
    L->w = dnew((size_t)L->nw), L->dw = dnew((size_t)L->nw), L->mw = dnew((size_t)L->nw), L->vw = dnew((size_t)L->nw);
    L->b = dnew((size_t)out), L->db = dnew((size_t)out), L->mb = dnew((size_t)out), L->vb = dnew((size_t)out);
    CK(cudaMemcpy(L->w, hw, sizeof(float) * (size_t)L->nw, cudaMemcpyHostToDevice));
    free(hw);
    if (!sparse) return;
    int64_t sv[4] = {L->R, L->K, TILE, TILE}, sc[2] = {L->R, L->K}, so = L->C + 1, ss = L->R * L->K, sb = out;
    int32_t *col = (int32_t *)malloc(4 * (size_t)(L->R * L->K)), *toff = (int32_t *)malloc(4 * (size_t)(L->C + 1));
    int32_t *tsl = (int32_t *)malloc(4 * (size_t)(L->R * L->K));
    char *used = (char *)malloc((size_t)L->C);
    for (int64_t r = 0; r < L->R; ++r) { /* K random columns per row, sorted */
        memset(used, 0, (size_t)L->C);
        for (int64_t k = 0; k < L->K;) {
            int64_t j = (int64_t)(uniform(&s) * (double)L->C);
            if (!used[j]) used[j] = 1, ++k;
        }
        for (int64_t j = 0, k = 0; j < L->C; ++j)
            if (used[j]) col[r * L->K + k++] = (int32_t)j;
    }
    ssm_tensor hc = ssm_tensor_make(col, SSM_I32, ssm_cpu(), 2, sc, NULL), ho = ssm_tensor_make(toff, SSM_I32, ssm_cpu(), 1, &so, NULL);
    ssm_tensor hs = ssm_tensor_make(tsl, SSM_I32, ssm_cpu(), 1, &ss, NULL);
    OK(cpu, ssm_bell_transpose_index(cpu, &hc, &ho, &hs));
    CK(cudaMalloc((void **)&L->col, 4 * (size_t)ss));
    CK(cudaMalloc((void **)&L->toff, 4 * (size_t)so));
    CK(cudaMalloc((void **)&L->tslot, 4 * (size_t)ss));
    CK(cudaMemcpy(L->col, col, 4 * (size_t)ss, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(L->toff, toff, 4 * (size_t)so, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(L->tslot, tsl, 4 * (size_t)ss, cudaMemcpyHostToDevice));
    free(col), free(toff), free(tsl), free(used);
    L->tw = ssm_tensor_make(L->w, SSM_F32, d, 4, sv, NULL), L->tdw = ssm_tensor_make(L->dw, SSM_F32, d, 4, sv, NULL);
    L->tmw = ssm_tensor_make(L->mw, SSM_F32, d, 4, sv, NULL), L->tvw = ssm_tensor_make(L->vw, SSM_F32, d, 4, sv, NULL);
    L->tcol = ssm_tensor_make(L->col, SSM_I32, d, 2, sc, NULL), L->ttoff = ssm_tensor_make(L->toff, SSM_I32, d, 1, &so, NULL);
    L->ttslot = ssm_tensor_make(L->tslot, SSM_I32, d, 1, &ss, NULL);
    L->tb = ssm_tensor_make(L->b, SSM_F32, d, 1, &sb, NULL), L->tdb = ssm_tensor_make(L->db, SSM_F32, d, 1, &sb, NULL);
    ssm_bell_topology_config cfg = ssm_bell_topology_config_init(); /* the RigL-style defaults */
    cfg.seed = 2025, cfg.layer_id = id;
    cfg.allreduce = hook, cfg.allreduce_user = hook_user;
    OK(ctx, ssm_bell_topology_create(ctx, &cfg, L->R, L->C, L->K, &L->topo));
}

static void layer_free(layer *L) {
    cudaFree(L->w), cudaFree(L->dw), cudaFree(L->mw), cudaFree(L->vw);
    cudaFree(L->b), cudaFree(L->db), cudaFree(L->mb), cudaFree(L->vb);
    if (L->sparse) cudaFree(L->col), cudaFree(L->toff), cudaFree(L->tslot);
    ssm_bell_topology_destroy(L->topo);
}

/* y [n, out] = x [n, in] W^T + b */
static void layer_forward(ssm_ctx *ctx, cublasHandle_t cb, cudaStream_t st, layer *L, const float *x, float *y, int relu) {
    const int64_t n = BATCH;
    if (L->sparse) {
        int64_t sx[2] = {n, L->in}, sy[2] = {n, L->out};
        ssm_device d = L->tw.device;
        ssm_tensor tx = ssm_tensor_make((void *)x, SSM_F32, d, 2, sx, NULL), ty = ssm_tensor_make(y, SSM_F32, d, 2, sy, NULL);
        OK(ctx, ssm_bell_forward(ctx, &tx, &L->tw, &L->tcol, &L->tb, &ty));
        if (relu) relu_kernel<<<blocks(n * L->out), 256, 0, st>>>(y, n * L->out, NULL, L->out);
    } else {
        const float one = 1.f, zero = 0.f; /* column-major: y^T [out, n] = W [out, in] (row-major = W^T col-major) x^T */
        cublasSgemm(cb, CUBLAS_OP_T, CUBLAS_OP_N, (int)L->out, (int)n, (int)L->in, &one, L->w, (int)L->in, x, (int)L->in, &zero,
                    y, (int)L->out);
        if (relu) relu_kernel<<<blocks(n * L->out), 256, 0, st>>>(y, n * L->out, L->b, L->out);
        else bias_kernel<<<blocks(n * L->out), 256, 0, st>>>(y, n * L->out, L->b, L->out);
    }
}
/* dW, db from dy [n, out] and x; dx [n, in] when wanted */
static void layer_backward(ssm_ctx *ctx, cublasHandle_t cb, cudaStream_t st, layer *L, const float *x, const float *dy,
                           float *dx) {
    const int64_t n = BATCH;
    if (L->sparse) {
        int64_t sx[2] = {n, L->in}, sy[2] = {n, L->out};
        ssm_device d = L->tw.device;
        ssm_tensor tx = ssm_tensor_make((void *)x, SSM_F32, d, 2, sx, NULL), tdy = ssm_tensor_make((void *)dy, SSM_F32, d, 2, sy, NULL);
        ssm_tensor tdx = ssm_tensor_make(dx, SSM_F32, d, 2, sx, NULL);
        OK(ctx, ssm_bell_backward(ctx, &tx, &L->tw, &L->tcol, &L->ttoff, &L->ttslot, &tdy, dx ? &tdx : NULL, &L->tdw, &L->tdb));
        OK(ctx, ssm_bell_topology_observe(ctx, L->topo, &tx, &tdy, &L->tdw));
    } else {
        const float one = 1.f, zero = 0.f;
        /* dW [out, in] row-major = dW^T col-major [in, out] = x^T [in, n] dy [n, out] */
        cublasSgemm(cb, CUBLAS_OP_N, CUBLAS_OP_T, (int)L->in, (int)L->out, (int)n, &one, x, (int)L->in, dy, (int)L->out, &zero,
                    L->dw, (int)L->in);
        colsum_kernel<<<blocks(L->out), 256, 0, st>>>(dy, n, L->out, L->db);
        if (dx) /* dx^T [in, n] = W^T [in, out] dy^T [out, n] */
            cublasSgemm(cb, CUBLAS_OP_N, CUBLAS_OP_N, (int)L->in, (int)n, (int)L->out, &one, L->w, (int)L->in, dy, (int)L->out,
                        &zero, dx, (int)L->in);
    }
}

typedef struct model {
    layer l1, l2;
    float *h, *dh, *out, *dout, *loss;
    int *hit;
} model;

typedef struct rank_ctx {
    int rank, nranks, tile;
    int64_t steps;
    void *comm; /* ncclComm_t (SSM_NCCL) */
    int failed;
} rank_ctx;

static void run(rank_ctx *rc) {
    const int dev = rc->rank;
    CK(cudaSetDevice(dev));
    cudaStream_t st;
    CK(cudaStreamCreate(&st));
    cublasHandle_t cb;
    cublasCreate(&cb);
    cublasSetStream(cb, st);
    cublasSetMathMode(cb, CUBLAS_DEFAULT_MATH); /* f32 stays f32 (no TF32), as the block-ELL kernels */
    ssm_cuda_config cc = ssm_cuda_config_init();
    cc.device = dev, cc.stream = st;
    ssm_ctx_config cfg = ssm_ctx_config_init();
    cfg.backend = ssm_cuda_backend(), cfg.backend_config = &cc;
    ssm_ctx *ctx = NULL, *cpu = NULL;
    if (ssm_ctx_create(&cfg, &ctx) != SSM_OK || ssm_ctx_create(NULL, &cpu) != SSM_OK) {
        fprintf(stderr, "no CUDA context on cuda:%d\n", dev);
        rc->failed = 1;
        return;
    }
    ssm_bell_allreduce_fn hook = NULL;
    void *hook_user = NULL;
#ifdef SSM_NCCL
    ssm_cuda_nccl nh;
    memset(&nh, 0, sizeof nh);
    if (rc->nranks > 1) {
        OK(ctx, ssm_cuda_nccl_init(&nh, (ncclComm_t)rc->comm, st));
        hook = ssm_cuda_nccl_allreduce, hook_user = &nh;
    }
#endif
    model S, Dn, *M[2] = {&S, &Dn};
    for (int i = 0; i < 2; ++i) {
        layer_init(ctx, cpu, &M[i]->l1, dev, D_IN, D_HID, i == 0, 1, hook, hook_user);
        layer_init(ctx, cpu, &M[i]->l2, dev, D_HID, NCLASS, i == 0, 2, hook, hook_user);
        M[i]->h = dnew(BATCH * D_HID), M[i]->dh = dnew(BATCH * D_HID), M[i]->out = dnew(BATCH * NCLASS);
        M[i]->dout = dnew(BATCH * NCLASS), M[i]->loss = dnew(BATCH);
        CK(cudaMalloc((void **)&M[i]->hit, BATCH * sizeof(int)));
    }
    /* the task: the same prototypes everywhere; each rank draws its own samples */
    uint64_t sp = 12345, sd = 777 + 1000003ull * (uint64_t)rc->rank;
    float *proto = (float *)malloc(sizeof(float) * NCLASS * D_IN), *hx = (float *)malloc(sizeof(float) * BATCH * D_IN);
    int *lab = (int *)malloc(sizeof(int) * BATCH), *dlab;
    float *dx = dnew(BATCH * D_IN), hl[BATCH];
    int hh[BATCH];
    CK(cudaMalloc((void **)&dlab, sizeof(int) * BATCH));
    for (int j = 0; j < NCLASS * D_IN; ++j) proto[j] = (float)normal(&sp);
    cudaEvent_t e0, e1, e2;
    cudaEventCreate(&e0), cudaEventCreate(&e1), cudaEventCreate(&e2);
    double ls[2] = {0, 0}, ms[2] = {0, 0}, churn_total = 0;
    int64_t cor[2] = {0, 0}, win = 0;
    if (rc->rank == 0) {
        printf("block-sparse MLP %d -> %d -> %d, B=%d: sparse K = %lld/%lld, %lld/%lld (50%%) vs dense cuBLAS twin; f32, "
               "%d tokens per step%s, Adam 1e-3, %d GPU(s)\n",
               D_IN, D_HID, NCLASS, TILE, (long long)S.l1.K, (long long)S.l1.C, (long long)S.l2.K, (long long)S.l2.C, BATCH,
               rc->nranks > 1 ? " and rank" : "", rc->nranks);
        printf("%6s %11s %11s %8s %8s %12s %12s | %-30s | %-30s\n", "step", "loss_sparse", "loss_dense", "acc_sp", "acc_dn",
               "tok/s_sparse", "tok/s_dense", "fc1: grown (explored) churn", "fc2: grown (explored) churn");
    }
    for (int64_t t = 1; t <= rc->steps; ++t) {
        for (int n = 0; n < BATCH; ++n) {
            lab[n] = (int)(uniform(&sd) * NCLASS);
            for (int j = 0; j < D_IN; ++j) hx[n * D_IN + j] = proto[lab[n] * D_IN + j] + (float)normal(&sd);
        }
        CK(cudaMemcpyAsync(dx, hx, sizeof(float) * BATCH * D_IN, cudaMemcpyHostToDevice, st));
        CK(cudaMemcpyAsync(dlab, lab, sizeof(int) * BATCH, cudaMemcpyHostToDevice, st));
        ssm_bell_topology_report r1, r2;
        memset(&r1, 0, sizeof r1), memset(&r2, 0, sizeof r2);
        for (int i = 0; i < 2; ++i) {
            model *m = M[i];
            const float c1 = (float)(1.0 - pow(0.9, (double)t)), c2 = (float)(1.0 - pow(0.999, (double)t));
            cudaEventRecord(e0, st);
            layer_forward(ctx, cb, st, &m->l1, dx, m->h, 1);
            layer_forward(ctx, cb, st, &m->l2, m->h, m->out, 0);
            xent_kernel<<<BATCH, 256, 0, st>>>(m->out, dlab, m->dout, m->loss, m->hit, NCLASS, 1.f / (float)(BATCH * rc->nranks));
            layer_backward(ctx, cb, st, &m->l2, m->h, m->dout, m->dh);
            mask_kernel<<<blocks(BATCH * D_HID), 256, 0, st>>>(m->dh, m->h, BATCH * D_HID);
            layer_backward(ctx, cb, st, &m->l1, dx, m->dh, NULL);
#ifdef SSM_NCCL
            if (rc->nranks > 1) { /* gradients are means over all ranks' tokens: sum them (the scale is in dout) */
                ncclGroupStart();
                ncclAllReduce(m->l1.dw, m->l1.dw, (size_t)m->l1.nw, ncclFloat, ncclSum, (ncclComm_t)rc->comm, st);
                ncclAllReduce(m->l1.db, m->l1.db, (size_t)m->l1.out, ncclFloat, ncclSum, (ncclComm_t)rc->comm, st);
                ncclAllReduce(m->l2.dw, m->l2.dw, (size_t)m->l2.nw, ncclFloat, ncclSum, (ncclComm_t)rc->comm, st);
                ncclAllReduce(m->l2.db, m->l2.db, (size_t)m->l2.out, ncclFloat, ncclSum, (ncclComm_t)rc->comm, st);
                ncclGroupEnd();
            }
#endif
            layer *ls_[2] = {&m->l1, &m->l2};
            for (int l = 0; l < 2; ++l) {
                adam_kernel<<<blocks(ls_[l]->nw), 256, 0, st>>>(ls_[l]->w, ls_[l]->dw, ls_[l]->mw, ls_[l]->vw, ls_[l]->nw, 1e-3f, c1, c2);
                adam_kernel<<<blocks(ls_[l]->out), 256, 0, st>>>(ls_[l]->b, ls_[l]->db, ls_[l]->mb, ls_[l]->vb, ls_[l]->out, 1e-3f, c1, c2);
            }
            if (i == 0) {
                ssm_tensor *o1[2] = {&S.l1.tmw, &S.l1.tvw}, *o2[2] = {&S.l2.tmw, &S.l2.tvw};
                OK(ctx, ssm_bell_topology_step(ctx, S.l1.topo, t, &S.l1.tw, &S.l1.tcol, &S.l1.ttoff, &S.l1.ttslot, o1, 2, &r1));
                OK(ctx, ssm_bell_topology_step(ctx, S.l2.topo, t, &S.l2.tw, &S.l2.tcol, &S.l2.ttoff, &S.l2.ttslot, o2, 2, &r2));
            }
            cudaEventRecord(e1, st);
            CK(cudaMemcpyAsync(hl, m->loss, sizeof hl, cudaMemcpyDeviceToHost, st));
            CK(cudaMemcpyAsync(hh, m->hit, sizeof hh, cudaMemcpyDeviceToHost, st));
            CK(cudaStreamSynchronize(st));
            float ms_ = 0;
            cudaEventElapsedTime(&ms_, e0, e1);
            if (t > 1) ms[i] += ms_; /* the first step warms up */
            for (int n = 0; n < BATCH; ++n) ls[i] += hl[n], cor[i] += hh[n];
        }
        ++win;
#ifdef SSM_NCCL
        if (rc->nranks > 1 && r1.updated) { /* every rank holds the same topology */
            OK(ctx, ssm_cuda_nccl_check_checksum(ctx, &nh, r1.checksum));
            OK(ctx, ssm_cuda_nccl_check_checksum(ctx, &nh, r2.checksum));
        }
#endif
        if (r1.updated || t % 50 == 0 || t == rc->steps) {
            const double w = (double)win * BATCH, steps_timed = (double)(t > 1 ? t - 1 : 1);
            churn_total += r1.churn + r2.churn;
            if (rc->rank == 0)
                printf("%6lld %11.4f %11.4f %7.1f%% %7.1f%% %12.0f %12.0f | %5lld (%3lld) %8.4f        | %5lld (%3lld) %8.4f\n",
                       (long long)t, ls[0] / w, ls[1] / w, 100.0 * (double)cor[0] / w, 100.0 * (double)cor[1] / w,
                       ms[0] > 0 ? BATCH * rc->nranks * steps_timed / (ms[0] * 1e-3) : 0.0,
                       ms[1] > 0 ? BATCH * rc->nranks * steps_timed / (ms[1] * 1e-3) : 0.0, (long long)r1.grown,
                       (long long)r1.explored, r1.churn, (long long)r2.grown, (long long)r2.explored,
                       r2.churn);
            fflush(stdout);
            ls[0] = ls[1] = 0, cor[0] = cor[1] = 0, win = 0;
        }
    }
    if (rc->rank == 0)
        printf("done: total churn %.4f; tokens/s are averages over all steps so far (sparse includes observe and the "
               "topology updates%s)\n",
               churn_total, rc->nranks > 1 ? ", both include the gradient all-reduce" : "");
    for (int i = 0; i < 2; ++i) {
        layer_free(&M[i]->l1), layer_free(&M[i]->l2);
        cudaFree(M[i]->h), cudaFree(M[i]->dh), cudaFree(M[i]->out), cudaFree(M[i]->dout), cudaFree(M[i]->loss), cudaFree(M[i]->hit);
    }
#ifdef SSM_NCCL
    if (rc->nranks > 1) ssm_cuda_nccl_free(&nh);
#endif
    cudaFree(dx), cudaFree(dlab), free(proto), free(hx), free(lab);
    cublasDestroy(cb);
    ssm_ctx_destroy(ctx), ssm_ctx_destroy(cpu);
    cudaStreamDestroy(st);
}

int main(int argc, char **argv) {
    int gpus = argc > 3 ? atoi(argv[3]) : 1, n = 0;
    int64_t steps = argc > 2 ? atoll(argv[2]) : 300;
    TILE = argc > 1 ? atoi(argv[1]) : 16;
    if (TILE != 16 && TILE != 32 && TILE != 64) {
        fprintf(stderr, "B must be 16, 32 or 64\n");
        return 1;
    }
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < gpus) {
        fprintf(stderr, "needs %d GPU(s), found %d\n", gpus, n);
        return 1;
    }
    rank_ctx rc[2];
    memset(rc, 0, sizeof rc);
    if (gpus == 1) {
        rc[0].nranks = 1, rc[0].steps = steps;
        run(&rc[0]);
        return rc[0].failed;
    }
#ifdef SSM_NCCL
    if (gpus == 2) {
        ncclComm_t comms[2];
        int devs[2] = {0, 1};
        if (ncclCommInitAll(comms, 2, devs) != ncclSuccess) {
            fprintf(stderr, "ncclCommInitAll failed\n");
            return 1;
        }
        for (int r = 0; r < 2; ++r) rc[r].rank = r, rc[r].nranks = 2, rc[r].steps = steps, rc[r].comm = comms[r];
        std::thread t0(run, &rc[0]), t1(run, &rc[1]);
        t0.join(), t1.join();
        ncclCommDestroy(comms[0]), ncclCommDestroy(comms[1]);
        return rc[0].failed || rc[1].failed;
    }
#endif
    fprintf(stderr, "gpus = %d: 1, or 2 with a build with -DSSM_NCCL\n", gpus);
    return 1;
}
