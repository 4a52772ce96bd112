/* Delta-rule benchmark (make bench-cuda): DeltaNet and Gated DeltaNet forward and forward+backward
   through the public calls (ssm_delta_forward / ssm_delta_backward, chunked, bf16) on the shapes
   of the delta-rule issue, DeltaProduct (n_h = 2) at the first shape, and the decode step
   (ssm_delta_step, B64 H16 K=V=128, bf16 state in place). Floor per row: max(bytes of q, k, v, o once
   (+ dout, dq, dk, dv backward) / copy bandwidth, FLOPs of the chunked form / bf16 GEMM rate),
   both measured in this run. Forward+backward as in training: the forward keeps its chunk
   quantities (desc.saved) and the backward reads them; the time without (the backward runs the
   chunk preparation again) is printed beside it. JSON lines: bench/results/cuda_delta.jsonl (the row format of bench/bench.h).
   fla side by side, same inputs: with DELTA_PEER_DIR set (make bench-cuda sets it when fla
   imports), each shape's inputs are written there as raw bf16 and bench/peers/fla_peer.py
   --from DIR times chunk_delta_rule / chunk_gated_delta_rule / chunk_gated_delta_product on
   them right after, printing both columns and the ratio. DELTA_GRID=quick: the first shape;
   DELTA_SHAPES=0,1,4: those shapes of the grid (indices); p: the DeltaProduct row; c: the dense
   recurrence on the materialized transitions at the first shape (dense_rows). */
#define SSM_IMPLEMENTATION
#include "../ssm_cuda.h"
#include "cuda_common.h"
#include "bench.h"
#include <cublas_v2.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef SSM_BENCH_COMMIT
#define SSM_BENCH_COMMIT "unknown"
#endif
static const char *JS = "bench/results/cuda_delta.jsonl";
static double g_bw, g_rate; /* bytes per ms, FLOPs per ms */
static char g_dev[256];     /* the GPU's own name (bench.h's bench_json names the CPU) */

static void jrow(const char *op, const char *impl, const char *shape, double ms, double floor_ms, double ws) {
    FILE *f = getenv("BENCH_NO_JSON") ? NULL : fopen(JS, "a");
    if (!f) return;
    fprintf(f, "{\"op\":\"%s\",\"impl\":\"%s\",\"backend\":\"cuda\",\"dtype\":\"bf16\",\"shape\":%s,\"ms\":%.6g,"
               "\"floor_ms\":%.6g,\"peak_mem_bytes\":%.0f,\"relerr\":null,\"device\":\"%s\",\"date\":\"%s\",\"commit\":\"%s\"}\n",
            op, impl, shape, ms, floor_ms, ws, g_dev, bench_date(), SSM_BENCH_COMMIT);
    fclose(f);
}

__global__ void fill_range_kernel(void *p, int dt, int64_t n, float lo, float hi, unsigned seed) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        unsigned x = (unsigned)(i * 2654435761u) ^ seed;
        x ^= x >> 13, x *= 0x5bd1e995u, x ^= x >> 15;
        float v = lo + (hi - lo) * ((x & 0xFFFFFF) / 16777216.f);
        if (dt == 0) ((float *)p)[i] = v;
        else ((__nv_bfloat16 *)p)[i] = __float2bfloat16(v);
    }
}
static void *dev_range(int64_t n, float lo, float hi, unsigned seed) {
    void *p = NULL;
    if (cudaMalloc(&p, (size_t)n * 2) != cudaSuccess) return NULL;
    fill_range_kernel<<<4096, 256>>>(p, 2, n, lo, hi, seed);
    return p;
}
static double gemm_rate(void) { /* bf16, 8192^3, f32 accumulation */
    const int n = 8192;
    void *a = dev_range((int64_t)n * n, -1, 1, 1), *b = dev_range((int64_t)n * n, -1, 1, 2), *c = dev_range((int64_t)n * n, -1, 1, 3);
    cublasHandle_t h;
    cublasCreate(&h);
    const float one = 1.f, zero = 0.f;
    double ms = time_ms([&] {
        cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, CUDA_R_16BF, n, b, CUDA_R_16BF, n, &zero, c, CUDA_R_16BF, n,
                     CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    });
    cublasDestroy(h);
    cudaFree(a), cudaFree(b), cudaFree(c);
    return 2.0 * n * (double)n * n / ms;
}
static void dump(FILE *f, const void *p, int64_t n) { /* raw bf16, for the peer */
    std::vector<char> h((size_t)n * 2);
    cudaMemcpy(h.data(), p, h.size(), cudaMemcpyDeviceToHost);
    fwrite(h.data(), 1, h.size(), f);
}
static void row(const char *op, const char *shape, double ms, double floor_ms, size_t ws) {
    printf("%-20s %-50s %9.4f ms  floor %8.4f  x%6.1f\n", op, shape, ms, floor_ms, ms / floor_ms);
    jrow(op, "ours:chunked", shape, ms, floor_ms, (double)ws);
    fflush(stdout);
}

/* One shape: DeltaNet and Gated DeltaNet, forward and forward+backward (DeltaProduct with nh = 2:
   k, v, beta in fla's interleaved layout, memory [B, T nh, H, D], or with `tok` the token-major
   [B,T,H,nh,D], which the library runs through sub-token copies). */
static void shape_rows(ssm_ctx *cu, int B, int T, int H, int D, int seqs, int nh, FILE *peer, int tok = 0) {
    const ssm_dtype bf = SSM_BF16;
    const int64_t ntok = (int64_t)B * T * H, nk = ntok * nh * D;
    void *q = dev_range(ntok * D, -1, 1, 11), *k = dev_range(nk, -sqrtf(3.f / D), sqrtf(3.f / D), 12);
    void *v = dev_range(nk, -1, 1, 13), *be = dev_range(ntok * nh, 0.05f, 1.f, 14), *g = dev_range(ntok, -0.5f, 0.f, 15);
    void *dout = dev_range(ntok * D, -1, 1, 16), *o, *dq, *dk, *dv, *db, *dg;
    cudaMalloc(&o, ntok * D * 2), cudaMalloc(&dq, ntok * D * 2), cudaMalloc(&dk, nk * 2), cudaMalloc(&dv, nk * 2);
    cudaMalloc(&db, ntok * nh * 2), cudaMalloc(&dg, ntok * 2);
    int64_t sd[5] = {B, T, H, D}, sf[5] = {B, T, H, nh, D}, sb[4] = {B, T, H, nh};
    const int r = nh > 1 ? 1 : 0;
    /* interleaved: time stride nh H D, head D, factor H D (beta: nh H, 1, H) */
    const int64_t il[5] = {(int64_t)T * nh * H * D, (int64_t)nh * H * D, D, (int64_t)H * D, 1};
    const int64_t ilb[4] = {(int64_t)T * nh * H, (int64_t)nh * H, 1, H};
    const int64_t *fst = r && !tok ? il : NULL, *bst = r && !tok ? ilb : NULL;
    ssm_tensor tq = ssm_tensor_make(q, bf, ssm_cuda_device(0), 4, sd, NULL), to = ssm_tensor_make(o, bf, ssm_cuda_device(0), 4, sd, NULL);
    ssm_tensor tk = ssm_tensor_make(k, bf, ssm_cuda_device(0), 4 + r, r ? sf : sd, fst);
    ssm_tensor tv = ssm_tensor_make(v, bf, ssm_cuda_device(0), 4 + r, r ? sf : sd, fst);
    ssm_tensor tb = ssm_tensor_make(be, bf, ssm_cuda_device(0), 3 + r, sb, bst), tg = ssm_tensor_make(g, bf, ssm_cuda_device(0), 3, sb, NULL);
    ssm_tensor tdo = ssm_tensor_make(dout, bf, ssm_cuda_device(0), 4, sd, NULL), tdq = ssm_tensor_make(dq, bf, ssm_cuda_device(0), 4, sd, NULL);
    ssm_tensor tdk = ssm_tensor_make(dk, bf, ssm_cuda_device(0), 4 + r, r ? sf : sd, fst);
    ssm_tensor tdv = ssm_tensor_make(dv, bf, ssm_cuda_device(0), 4 + r, r ? sf : sd, fst);
    ssm_tensor tdb = ssm_tensor_make(db, bf, ssm_cuda_device(0), 3 + r, sb, bst), tdg = ssm_tensor_make(dg, bf, ssm_cuda_device(0), 3, sb, NULL);
    int64_t *cud = NULL, ncu = seqs + 1;
    ssm_tensor tcu;
    std::vector<int64_t> c(seqs + 1);
    if (seqs) { /* uneven lengths summing to T (the peer uses the same offsets) */
        for (int i = 0; i <= seqs; ++i) c[i] = (int64_t)T * i / seqs + (i > 0 && i < seqs ? (i % 2 ? 1000 : -1000) : 0);
        cudaMalloc(&cud, c.size() * 8);
        cudaMemcpy(cud, c.data(), c.size() * 8, cudaMemcpyHostToDevice);
        ssm_dtype i64 = ssm_dtype_i32();
        i64.bits = 64;
        tcu = ssm_tensor_make(cud, i64, ssm_cuda_device(0), 1, &ncu, NULL);
    }
    char shape[160];
    snprintf(shape, sizeof shape, "{\"B\":%d,\"T\":%d,\"H\":%d,\"K\":%d,\"V\":%d%s%s%s}", B, T, H, D, D,
             seqs ? ",\"seqs\":8" : "", nh > 1 ? ",\"n_h\":2" : "", tok ? ",\"layout\":\"BTHnD\"" : "");
    ssm_delta_desc d = ssm_delta_desc_init();
    d.method = SSM_DELTA_CHUNKED;
    const double C = 64, nch = (double)ntok * nh / C;
    const double fl_fwd = nch * (6 * C * C * D + 3 * C * C * D + 6 * C * D * (double)D);
    const double fl_bwd = fl_fwd + nch * (2 * C * C * D + 6 * C * D * (double)D) + nch * (14 * C * C * D + 4 * C * C * C + 6 * C * D * (double)D);
    const double by = 2.0 * (2 * ntok * D + 2 * nk), byb = by + 2.0 * (2 * ntok * D + 2 * nk);
    size_t wf = 0, wb = 0, keep = 0;
    ssm_delta_workspace_size(cu, &d, bf, seqs ? 1 : B, T, H, D, D, nh, 0, &wf);
    ssm_delta_workspace_size(cu, &d, bf, seqs ? 1 : B, T, H, D, D, nh, 1, &wb);
    /* the query knows no cu_seqlens: seqs more chunks bound the varlen slots */
    ssm_delta_workspace_size(cu, &d, bf, seqs ? 1 : B, seqs ? T + 64 * seqs : T, H, D, D, nh, 3, &keep);
    void *kept = NULL;
    cudaMalloc(&kept, keep ? keep : 16);
    int64_t nkeep = (int64_t)keep;
    ssm_tensor tkeep = ssm_tensor_make(kept, ssm_dtype_u8(), ssm_cuda_device(0), 1, &nkeep, NULL);
    ssm_delta_desc dk_ = d;
    dk_.saved = &tkeep;
    for (int gated = 0; gated < 2; ++gated) {
        const ssm_tensor *gg = gated ? &tg : NULL, *cc = seqs ? &tcu : NULL;
        ssm_result rc = SSM_OK;
        double ms = time_ms([&] { rc = ssm_delta_forward(cu, &d, &tq, &tk, &tv, &tb, gg, NULL, cc, &to, NULL); });
        if (rc != SSM_OK) {
            printf("forward failed: %s\n", ssm_ctx_last_error(cu));
            break;
        }
        double msr = time_ms([&] {
            ssm_delta_forward(cu, &d, &tq, &tk, &tv, &tb, gg, NULL, cc, &to, NULL);
            rc = ssm_delta_backward(cu, &d, &tq, &tk, &tv, &tb, gg, NULL, cc, &tdo, NULL, &tdq, &tdk, &tdv, &tdb,
                                    gated ? &tdg : NULL, NULL);
        });
        double msb = time_ms([&] {
            rc = ssm_delta_forward(cu, &dk_, &tq, &tk, &tv, &tb, gg, NULL, cc, &to, NULL);
            if (rc == SSM_OK)
                rc = ssm_delta_backward(cu, &dk_, &tq, &tk, &tv, &tb, gg, NULL, cc, &tdo, NULL, &tdq, &tdk, &tdv, &tdb,
                                        gated ? &tdg : NULL, NULL);
        });
        if (rc != SSM_OK) printf("backward failed: %s\n", ssm_ctx_last_error(cu));
        else printf("%-20s %-50s %9.4f ms  (backward without saved chunk quantities; %zu bytes kept)\n", "", "", msr, keep);
        const char *base = nh > 1 ? (gated ? "gated_delta_product" : "delta_product") : (gated ? "gated_delta" : "delta");
        char op[64];
        snprintf(op, sizeof op, "%s_fwd", base);
        row(op, shape, ms, std::max(by / g_bw, fl_fwd / g_rate), wf);
        snprintf(op, sizeof op, "%s_fwdbwd", base);
        if (rc == SSM_OK) row(op, shape, msb, std::max(byb / g_bw, (fl_fwd + fl_bwd) / g_rate), std::max(wf, wb) + keep);
        if (peer) fprintf(peer, "{\"op\": \"%s\", \"shape\": %s, \"ms\": %.5f}\n", op, shape, msb),
                  fprintf(peer, "{\"op\": \"%s_fwd\", \"shape\": %s, \"ms\": %.5f}\n", base, shape, ms);
    }
    if (tok) peer = NULL; /* fla takes the interleaved layout only */
    if (peer) { /* the inputs, for the peer: q k v beta g dout as raw bf16 (k, v, beta interleaved), then the offsets */
        char path[512];
        /* one file per row: the varlen row has the same sizes as its whole-batch twin */
        snprintf(path, sizeof path, "%s/B%d_T%d_H%d_D%d_nh%d_s%d.bin", getenv("DELTA_PEER_DIR"), B, T, H, D, nh, seqs);
        FILE *f = fopen(path, "wb");
        if (f) {
            dump(f, q, ntok * D), dump(f, k, nk), dump(f, v, nk), dump(f, be, ntok * nh), dump(f, g, ntok), dump(f, dout, ntok * D);
            fclose(f);
        }
        fprintf(peer, "{\"input\": \"%s\", \"B\": %d, \"T\": %d, \"H\": %d, \"D\": %d, \"nh\": %d, \"cu\": [", path, B, T, H, D, nh);
        for (int i = 0; seqs && i <= seqs; ++i) fprintf(peer, "%s%lld", i ? ", " : "", (long long)c[i]);
        fprintf(peer, "], \"shape\": %s}\n", shape);
        fflush(peer);
    }
    cudaFree(q), cudaFree(k), cudaFree(v), cudaFree(be), cudaFree(g), cudaFree(dout), cudaFree(o);
    cudaFree(dq), cudaFree(dk), cudaFree(dv), cudaFree(db), cudaFree(dg), cudaFree(cud), cudaFree(kept);
}

/* The plan the delta rule replaces: DeltaNet as a dense matrix-state recurrence (ssm_linrec_forward)
   on the materialized A_t = I - beta_t k_t k_t^T and b_t = beta_t k_t v_t^T, S = B H sequences,
   n = K, m = V, on the inputs of the first shape (the same generated values). Timed: building A and b, then the
   solve by CR and by AUTO; the readout o_t = S_t^T q_t is left out (it would only add time). */
__global__ void dense_ab_kernel(const __nv_bfloat16 *k, const __nv_bfloat16 *v, const __nv_bfloat16 *be, __nv_bfloat16 *A,
                                __nv_bfloat16 *b, int T, int H, int D) {
    const int64_t tok = blockIdx.x; /* (b, t, h) in the [B,T,H] order of the inputs */
    const int64_t bb = tok / ((int64_t)T * H), t = tok / H % T, h = tok % H, s = bb * H + h;
    const float beta = __bfloat162float(be[tok]);
    const __nv_bfloat16 *kt = k + tok * D, *vt = v + tok * D;
    __nv_bfloat16 *At = A + (s * T + t) * D * D, *bt = b + (s * T + t) * D * D;
    for (int e = threadIdx.x; e < D * D; e += blockDim.x) {
        const int i = e / D, j = e % D;
        const float ki = __bfloat162float(kt[i]);
        At[e] = __float2bfloat16_rn((i == j ? 1.f : 0.f) - beta * ki * __bfloat162float(kt[j]));
        bt[e] = __float2bfloat16_rn(beta * ki * __bfloat162float(vt[j]));
    }
}
static void dense_rows(ssm_ctx *cu, int B, int T, int H, int D) {
    const int64_t ntok = (int64_t)B * T * H, S = (int64_t)B * H, nel = ntok * D * D;
    void *k = dev_range(ntok * D, -sqrtf(3.f / D), sqrtf(3.f / D), 12), *v = dev_range(ntok * D, -1, 1, 13);
    void *be = dev_range(ntok, 0.05f, 1.f, 14), *A = NULL, *b = NULL, *h = NULL;
    cudaMalloc(&A, nel * 2), cudaMalloc(&b, nel * 2), cudaMalloc(&h, nel * 2);
    char shape[128];
    snprintf(shape, sizeof shape, "{\"B\":%d,\"T\":%d,\"H\":%d,\"K\":%d,\"V\":%d}", B, T, H, D, D);
    if (!A || !b || !h) {
        printf("dense rows skipped: out of memory\n");
        cudaGetLastError();
    } else {
        const double build = time_ms([&] {
            dense_ab_kernel<<<(unsigned)ntok, 256>>>((const __nv_bfloat16 *)k, (const __nv_bfloat16 *)v, (const __nv_bfloat16 *)be,
                                                    (__nv_bfloat16 *)A, (__nv_bfloat16 *)b, T, H, D);
        });
        int64_t sa[4] = {S, T, D, D};
        ssm_tensor tA = ssm_tensor_make(A, SSM_BF16, ssm_cuda_device(0), 4, sa, NULL);
        ssm_tensor tb = ssm_tensor_make(b, SSM_BF16, ssm_cuda_device(0), 4, sa, NULL);
        ssm_tensor th = ssm_tensor_make(h, SSM_BF16, ssm_cuda_device(0), 4, sa, NULL);
        const ssm_linrec_method ms_[2] = {SSM_LINREC_CR, SSM_LINREC_AUTO};
        for (ssm_linrec_method m : ms_) {
            ssm_linrec_desc d = ssm_linrec_desc_init();
            d.method = m;
            size_t ws = 0;
            ssm_linrec_workspace_size(cu, &d, SSM_BF16, S, T, D, D, 0, &ws);
            ssm_result rc = ssm_linrec_forward(cu, &d, &tA, &tb, NULL, &th, NULL);
            if (rc != SSM_OK) {
                printf("dense %s: %s\n", ssm_linrec_method_name(m), ssm_ctx_last_error(cu));
                continue;
            }
            const double solve = time_ms([&] { ssm_linrec_forward(cu, &d, &tA, &tb, NULL, &th, NULL); }, 5);
            const double fl = 3.0 * nel * 2 / g_bw; /* A and b read, h written, once */
            char impl[64];
            snprintf(impl, sizeof impl, "peer:dense_%s", ssm_linrec_method_name(m));
            printf("%-20s %-50s %9.4f ms  floor %8.4f  x%6.1f  (%s: A, b built %.3f ms + solve %.3f ms; no readout)\n", "delta_fwd",
                   shape, build + solve, fl, (build + solve) / fl, impl, build, solve);
            jrow("delta_fwd", impl, shape, build + solve, fl, (double)ws + 3.0 * nel * 2);
        }
    }
    cudaFree(k), cudaFree(v), cudaFree(be), cudaFree(A), cudaFree(b), cudaFree(h);
}

static void decode_row(ssm_ctx *cu, FILE *peer) {
    const int B = 64, H = 16, D = 128;
    const int64_t n = (int64_t)B * H;
    const ssm_dtype bf = SSM_BF16;
    void *q = dev_range(n * D, -1, 1, 21), *k = dev_range(n * D, -0.15f, 0.15f, 22), *v = dev_range(n * D, -1, 1, 23);
    void *be = dev_range(n, 0.05f, 1.f, 24), *o, *S = dev_range(n * D * D, -1, 1, 25); /* the state in bf16 too */
    cudaMalloc(&o, n * D * 2);
    int64_t s3[3] = {B, H, D}, s2[2] = {B, H}, s4[4] = {B, H, D, D};
    ssm_tensor tq = ssm_tensor_make(q, bf, ssm_cuda_device(0), 3, s3, NULL), tk = ssm_tensor_make(k, bf, ssm_cuda_device(0), 3, s3, NULL);
    ssm_tensor tv = ssm_tensor_make(v, bf, ssm_cuda_device(0), 3, s3, NULL), tb = ssm_tensor_make(be, bf, ssm_cuda_device(0), 2, s2, NULL);
    ssm_tensor to = ssm_tensor_make(o, bf, ssm_cuda_device(0), 3, s3, NULL), tS = ssm_tensor_make(S, bf, ssm_cuda_device(0), 4, s4, NULL);
    ssm_delta_desc d = ssm_delta_desc_init();
    ssm_result rc = SSM_OK;
    double ms = time_ms([&] { rc = ssm_delta_step(cu, &d, &tq, &tk, &tv, &tb, NULL, &tS, &to); }, 50);
    if (rc != SSM_OK) printf("step failed: %s\n", ssm_ctx_last_error(cu));
    char shape[96];
    snprintf(shape, sizeof shape, "{\"B\":%d,\"T\":1,\"H\":%d,\"K\":%d,\"V\":%d}", B, H, D, D);
    const double fl = 2.0 * n * D * D * 2 / g_bw; /* the state read once and written once */
    printf("%-20s %-50s %9.4f ms  floor %8.4f  x%6.1f\n", "delta_decode", shape, ms, fl, ms / fl);
    jrow("delta_decode", "ours:recurrent", shape, ms, fl, 0);
    if (peer) fprintf(peer, "{\"op\": \"delta_decode\", \"shape\": %s, \"ms\": %.5f}\n", shape, ms);
    cudaFree(q), cudaFree(k), cudaFree(v), cudaFree(be), cudaFree(o), cudaFree(S);
}

int main(void) {
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
        printf("no CUDA device\n");
        return 0;
    }
    snprintf(g_dev, sizeof g_dev, "%s", prop.name);
    ssm_ctx *cu = NULL;
    ssm_ctx_config cfg = ssm_ctx_config_init();
    ssm_cuda_config cc = ssm_cuda_config_init();
    cfg.backend = ssm_cuda_backend();
    cfg.backend_config = &cc;
    if (ssm_ctx_create(&cfg, &cu) != SSM_OK) {
        printf("CUDA context failed\n");
        return 1;
    }
    g_bw = copy_bandwidth(), g_rate = gemm_rate();
    const char *grid = getenv("DELTA_GRID"), *pd = getenv("DELTA_PEER_DIR");
    const int quick = grid && !strcmp(grid, "quick");
    printf("delta rule on %s, commit %s: copy %.0f GB/s, bf16 GEMM %.0f TFLOP/s\n", prop.name, SSM_BENCH_COMMIT, g_bw / 1e6,
           g_rate / 1e9);
    FILE *peer = NULL;
    if (pd && *pd) {
        char path[512];
        snprintf(path, sizeof path, "%s/ours.jsonl", pd);
        peer = fopen(path, "w");
    }
    static const int shapes[5][5] = {{8, 4096, 16, 64, 0}, {4, 8192, 16, 128, 0}, {1, 32768, 32, 128, 0},
                                     {1, 32768, 32, 128, 8}, {32, 2048, 8, 32, 0}};
    const char *pick = getenv("DELTA_SHAPES"); /* e.g. "0,1,4": a subset of the shapes (indices); p: DeltaProduct */
    for (int i = 0; i < (quick ? 1 : 5); ++i) {
        if (!pick || strchr(pick, '0' + i))
            shape_rows(cu, shapes[i][0], shapes[i][1], shapes[i][2], shapes[i][3], shapes[i][4], 1, peer);
        if (i == 0 && (!pick || strchr(pick, 'c'))) dense_rows(cu, 8, 4096, 16, 64);
        if (i == 0 && (!pick || strchr(pick, 'p'))) { /* DeltaProduct, n_h = 2: fla's layout, then token-major */
            shape_rows(cu, 8, 4096, 16, 64, 0, 2, peer);
            shape_rows(cu, 8, 4096, 16, 64, 0, 2, peer, 1);
        }
    }
    decode_row(cu, peer);
    if (peer) fclose(peer);
    ssm_ctx_destroy(cu);
    return 0;
}
