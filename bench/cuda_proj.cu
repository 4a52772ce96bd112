/* CUDA benchmark of the projection and output chains (make bench-cuda). Each row: ours
   (FUSED: one cuBLAS GEMM over the whole width + one epilogue pass; fused_tile: the mma.sync
   GEMM with every segment's epilogue in its tile) beside, on the same inputs in
   the same run, the same GEMM alone in cuBLAS (the floor: FLOPs over the rate cuBLAS reaches
   on that very shape) and the unfused schedule (a cuBLAS GEMM per segment, then separate
   activation and L2 kernels: ours:unfused, what eager layer code runs). fwd+bwd rows: the
   forward with SAVE_PRE, then the backward; their floor is the three cuBLAS GEMMs (y, dX, dW)
   alone. Also our GEMM with the identity epilogue against cuBLAS at 8192^3 (TFLOP/s), and
   the epilogue the vendor fuses: cuBLASLt's GELU + bias epilogue on the layer's GEMM beside
   ours with one GELU (tanh) segment with bias (peer:cublaslt_gelu).
   JSON lines: bench/results/cuda_proj.jsonl (the row format of bench/bench.h). BENCH_QUICK=1
   trims the grid; BENCH_PROJ_FB=M[:K] only calls the layer's forward + backward (for a profiler). */
#define SSM_IMPLEMENTATION
#include "../ssm_cuda.h"
#include "cuda_common.h"
#include <cublas_v2.h>
#include <cublasLt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <math.h>
#include <functional>

#ifndef SSM_BENCH_COMMIT
#define SSM_BENCH_COMMIT "unknown"
#endif
static char g_dev[256], g_date[32];
static cublasHandle_t g_h;

static FILE *open_jsonl(const char *name) {
    char path[256];
    snprintf(path, sizeof path, "bench/results/%s.jsonl", name);
    FILE *f = fopen(path, "a");
    if (!f) f = fopen(name, "a");
    return f;
}

static cudaDataType cty(ssm_dtype dt) { return dt.bits == 32 ? CUDA_R_32F : dt.code == SSM_DTYPE_BFLOAT ? CUDA_R_16BF : CUDA_R_16F; }

/* Row-major C[m, n] = A[m, k] B[n, k]^T (ta = 0) or A[m, k] B[k, n] (ta = 1), column-major in cuBLAS. */
static void gemm_nt(ssm_dtype dt, int64_t m, int64_t n, int64_t k, const void *A, const void *B, void *C) {
    const float one = 1.f, zero = 0.f;
    cublasGemmEx(g_h, CUBLAS_OP_T, CUBLAS_OP_N, (int)n, (int)m, (int)k, &one, B, cty(dt), (int)k, A, cty(dt), (int)k, &zero,
                 C, cty(dt), (int)n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}
static void gemm_nn(ssm_dtype dt, int64_t m, int64_t n, int64_t k, const void *A, const void *B, void *C) {
    const float one = 1.f, zero = 0.f;
    cublasGemmEx(g_h, CUBLAS_OP_N, CUBLAS_OP_N, (int)n, (int)m, (int)k, &one, B, cty(dt), (int)n, A, cty(dt), (int)k, &zero,
                 C, cty(dt), (int)n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}
/* C[m, n] = A[k, m]^T B[k, n] */
static void gemm_tn(ssm_dtype dt, int64_t m, int64_t n, int64_t k, const void *A, const void *B, void *C) {
    const float one = 1.f, zero = 0.f;
    cublasGemmEx(g_h, CUBLAS_OP_N, CUBLAS_OP_T, (int)n, (int)m, (int)k, &one, B, cty(dt), (int)n, A, cty(dt), (int)m, &zero,
                 C, cty(dt), (int)n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

static void row_json(FILE *js, const char *op, const char *impl, const char *backend, ssm_dtype dt, const char *shape,
                     double ms, double floor_ms, size_t ws) {
    fprintf(js, "{\"op\":\"%s\",\"impl\":\"%s\",\"backend\":\"%s\",\"dtype\":\"%s\",\"shape\":%s,\"ms\":%.5f,\"floor_ms\":%.5f,"
                "\"peak_mem_bytes\":%zu,\"relerr\":null,\"device\":\"%s\",\"date\":\"%s\",\"commit\":\"%s\"}\n",
            op, impl, backend, ssm_dtype_name(dt), shape, ms, floor_ms, ws, g_dev, g_date, SSM_BENCH_COMMIT);
    fflush(js);
}

/* the chains: 0 DeltaNet-like at d = 1024 (8 heads of 128; q, k with L2 per 64 and 128),
   1 Gated DeltaNet at d = 2048 (16 heads of 128: q, k, v, g, beta, a; N = 8224) */
static ssm_proj_desc chain(int which, int64_t *d) {
    ssm_proj_desc c = ssm_proj_desc_init();
    if (which == 0) {
        *d = 1024;
        ssm_proj_desc_add(&c, 1024, SSM_PROJ_SILU, 0, 0, 64);
        ssm_proj_desc_add(&c, 1024, SSM_PROJ_SILU, 0, 0, 128);
        ssm_proj_desc_add(&c, 1024, SSM_PROJ_SILU, 0, 0, 0);
        ssm_proj_desc_add(&c, 1024, SSM_PROJ_NONE, 0, 0, 0);
        ssm_proj_desc_add(&c, 8, SSM_PROJ_SIGMOID, 0, 0, 0);
    } else {
        *d = 2048;
        ssm_proj_desc_add(&c, 2048, SSM_PROJ_SILU, 0, 0, 128);
        ssm_proj_desc_add(&c, 2048, SSM_PROJ_SILU, 0, 0, 128);
        ssm_proj_desc_add(&c, 2048, SSM_PROJ_SILU, 0, 0, 0);
        ssm_proj_desc_add(&c, 2048, SSM_PROJ_NONE, 0, 0, 0);
        ssm_proj_desc_add(&c, 16, SSM_PROJ_SIGMOID, 0, 0, 0);
        ssm_proj_desc_add(&c, 16, SSM_PROJ_DECAY_GATE, 0, 1, 0);
    }
    return c;
}

static ssm_ctx *g_tile; /* a context with the tile-fused kernel forced (proj_kernel = 2) */
static ssm_ctx *g_k1, *g_k3; /* FUSED forward kernel forced: 1 cuBLAS + one pass (the old default), 3 sm_90a wgmma */
static int g_gdn; /* BENCH_PROJ_GDN: the Gated DeltaNet rows only (M 2048 / 8192 / 32768), fused paths only;
                     BENCH_PROJ_OUTCHAIN: the output chain rows only; BENCH_PROJ_GEMM: the GEMM rows only */

/* A projection layer's buffers (random inputs, zeroed outputs and gradients) and their tensors:
   x [M, K], W [N, K], bias [N], A_log [G], y and pre [M, N], and the gradients. */
struct proj_layer {
    void *x, *W, *b, *al, *y, *pre, *dy, *dx, *dW, *db, *dal;
    ssm_tensor tx, tW, tb, tal, ty, tpre, tdy, tdx, tdW, tdb, tdal;
    int ok; /* every buffer allocated */
};
static proj_layer proj_layer_make(ssm_dtype dt, int64_t M, int64_t K, int64_t N, int64_t G) {
    proj_layer L;
    const int64_t sx[2] = {M, K}, sW[2] = {N, K}, sy[2] = {M, N}, sN[1] = {N}, sG[1] = {G};
    const ssm_device dev = ssm_cuda_device(0);
    L.x = dev_random(dt, M * K, 1.f, 1), L.W = dev_random(dt, N * K, 0.03f, 2), L.b = dev_random(dt, N, 0.5f, 3);
    L.al = dev_random(dt, G, 0.5f, 4), L.y = dev_random(dt, M * N, 0.f, 5), L.pre = dev_random(dt, M * N, 0.f, 6);
    L.dy = dev_random(dt, M * N, 1.f, 7), L.dx = dev_random(dt, M * K, 0.f, 8), L.dW = dev_random(dt, N * K, 0.f, 9);
    L.db = dev_random(dt, N, 0.f, 10), L.dal = dev_random(dt, G, 0.f, 11);
    L.ok = L.x && L.W && L.b && L.al && L.y && L.pre && L.dy && L.dx && L.dW && L.db && L.dal;
    L.tx = ssm_tensor_make(L.x, dt, dev, 2, sx, NULL), L.tW = ssm_tensor_make(L.W, dt, dev, 2, sW, NULL);
    L.tb = ssm_tensor_make(L.b, dt, dev, 1, sN, NULL), L.tal = ssm_tensor_make(L.al, dt, dev, 1, sG, NULL);
    L.ty = ssm_tensor_make(L.y, dt, dev, 2, sy, NULL), L.tpre = ssm_tensor_make(L.pre, dt, dev, 2, sy, NULL);
    L.tdy = ssm_tensor_make(L.dy, dt, dev, 2, sy, NULL), L.tdx = ssm_tensor_make(L.dx, dt, dev, 2, sx, NULL);
    L.tdW = ssm_tensor_make(L.dW, dt, dev, 2, sW, NULL), L.tdb = ssm_tensor_make(L.db, dt, dev, 1, sN, NULL);
    L.tdal = ssm_tensor_make(L.dal, dt, dev, 1, sG, NULL);
    if (!L.ok) cudaGetLastError(); /* clear the failed allocation's error */
    return L;
}
static void proj_layer_free(proj_layer *L) {
    cudaFree(L->x), cudaFree(L->W), cudaFree(L->b), cudaFree(L->al), cudaFree(L->y), cudaFree(L->pre), cudaFree(L->dy);
    cudaFree(L->dx), cudaFree(L->dW), cudaFree(L->db), cudaFree(L->dal);
}

static void proj_rows(ssm_ctx *ctx, FILE *js, ssm_dtype dt, int which, int64_t M) {
    int64_t K;
    ssm_proj_desc d = chain(which, &K);
    ssm_ctx *const c0 = ctx;
    const int64_t N = ssm_proj_desc_width(&d), G = which ? 16 : 1;
    proj_layer L = proj_layer_make(dt, M, K, N, G);
    char shape[128];
    size_t wsf = 0, wsb = 0;
    if (!L.ok) {
        printf("  (skipped M%lld: out of memory)\n", (long long)M);
    } else {
        const ssm_tensor *palog = which ? &L.tal : NULL;
        ssm_tensor *pdal = which ? &L.tdal : NULL;
        double gf = time_ms([&] { gemm_nt(dt, M, N, K, L.x, L.W, L.y); });
        double gx = time_ms([&] { gemm_nn(dt, M, K, N, L.dy, L.W, L.dx); });
        double gw = time_ms([&] { gemm_tn(dt, N, K, M, L.dy, L.x, L.dW); });
        double floor_f = gf, floor_fb = gf + gx + gw, flops = 2.0 * M * N * K;
        snprintf(shape, sizeof shape, "{\"M\":%lld,\"d\":%lld,\"N\":%lld}", (long long)M, (long long)K, (long long)N);
        printf("  proj %-4s M%-6lld d%-5lld N%-5lld  cublas gemm %8.3f ms (%6.1f TFLOP/s)  dX %8.3f  dW %8.3f\n",
               ssm_dtype_name(dt), (long long)M, (long long)K, (long long)N, gf, flops / gf * 1e-9, gx, gw);
        row_json(js, "proj_fwd", "peer:cublas_gemm", "cublas", dt, shape, gf, floor_f, 0);
        row_json(js, "proj_fwdbwd", "peer:cublas_gemm", "cublas", dt, shape, floor_fb, floor_fb, 0);
        /* BENCH_PROJ_GDN: the forward of each fused kernel timed in 3 rounds interleaved across
           the kernels, in a rotated order (median of the rounds; with a fixed order the default
           followed kernel 3 and the forced kernel 3 followed the lighter kernel 1: 1.94 vs 1.81 ms
           at M 32768 for the same kernel, bench/results/cuda_proj_dd621b0.log). The SM clock
           under the 700 W cap depends on what ran just before: after the same cuBLAS GEMM loop
           one H200 read 1680 or 1980 MHz, and the same kernel 3 took 2.10-2.27 ms at M 32768 accordingly; timed once, right after
           the cuBLAS loops, the default looked 5-13% slower than the identical forced kernel
           (ncu: same grid, registers, shared memory, duration; dev/cuda/proj_wgmma.cu order,
           bench/results/cuda_proj_wgmma_f3e19ab.log). */
        double fr[5] = {0, 0, 0, 0, 0};
        if (g_gdn) {
            std::vector<double> v[5];
            const int order[3][3] = {{0, 3, 4}, {0, 4, 3}, {3, 0, 4}}; /* each one after each other one at least once */
            for (int round = 0; round < 3; ++round)
                for (int j = 0; j < 3; ++j) {
                    const int path = order[round][j];
                    ssm_ctx *cx = path == 3 ? g_k1 : path == 4 ? g_k3 : c0;
                    d.path = SSM_PROJ_FUSED, d.save = SSM_PROJ_SAVE_NONE;
                    v[path].push_back(time_ms([&] { ssm_proj_forward(cx, &d, &L.tx, &L.tW, &L.tb, palog, &L.ty, NULL); }));
                }
            for (int path = 0; path < 5; ++path)
                if (!v[path].empty()) std::sort(v[path].begin(), v[path].end()), fr[path] = v[path][v[path].size() / 2];
        }
        for (int path = 0; path < 5; ++path) {
            const char *impl = path == 1 ? "ours:unfused" : path == 2 ? "ours:fused_tile" : path == 3 ? "ours:fused_k1"
                             : path == 4 ? "ours:fused_k3" : "ours:fused";
            ssm_result r;
            if (path >= 2 && dt.bits == 32) continue; /* the tile and wgmma kernels are 16-bit only */
            if (g_gdn && (path == 1 || path == 2)) continue;
            ctx = path == 2 ? g_tile : path == 3 ? g_k1 : path == 4 ? g_k3 : c0;
            d.path = path == 1 ? SSM_PROJ_UNFUSED : SSM_PROJ_FUSED;
            d.save = SSM_PROJ_SAVE_NONE;
            ssm_proj_workspace_size(ctx, &d, dt, M, K, 0, &wsf);
            r = ssm_proj_forward(ctx, &d, &L.tx, &L.tW, &L.tb, palog, &L.ty, NULL);
            if (r != SSM_OK) { printf("  %s: %s\n", impl, ssm_ctx_last_error(ctx)); continue; }
            double f = fr[path] > 0 ? fr[path] : time_ms([&] { ssm_proj_forward(ctx, &d, &L.tx, &L.tW, &L.tb, palog, &L.ty, NULL); });
            d.save = SSM_PROJ_SAVE_PRE;
            ssm_proj_workspace_size(ctx, &d, dt, M, K, 1, &wsb);
            r = ssm_proj_backward(ctx, &d, &L.tx, &L.tW, &L.tb, palog, &L.tpre, &L.tdy, &L.tdx, &L.tdW, &L.tdb, pdal);
            if (r != SSM_OK) { printf("  %s bwd: %s\n", impl, ssm_ctx_last_error(ctx)); continue; }
            double fb = time_ms([&] {
                ssm_proj_forward(ctx, &d, &L.tx, &L.tW, &L.tb, palog, &L.ty, &L.tpre);
                ssm_proj_backward(ctx, &d, &L.tx, &L.tW, &L.tb, palog, &L.tpre, &L.tdy, &L.tdx, &L.tdW, &L.tdb, pdal);
            });
            printf("    %-13s fwd %8.3f ms  floor %8.3f  x%5.2f  (%6.1f TFLOP/s)   fwd+bwd %8.3f ms  floor %8.3f  x%5.2f  ws %.1f MB\n",
                   impl, f, floor_f, f / floor_f, flops / f * 1e-9, fb, floor_fb, fb / floor_fb, wsb / 1e6);
            row_json(js, "proj_fwd", impl, "cuda", dt, shape, f, floor_f, wsf);
            row_json(js, "proj_fwdbwd", impl, "cuda", dt, shape, fb, floor_fb, wsb);
        }
        if (g_gdn) { /* the floor again, after the fused kernels: clocks drift under the power cap */
            double g2 = time_ms([&] { gemm_nt(dt, M, N, K, L.x, L.W, L.y); });
            printf("    cublas gemm again %8.3f ms\n", g2);
        }
        fflush(stdout);
    }
    proj_layer_free(&L);
}

/* The callables fs timed in 3 interleaved rounds, round r in the order rotated by r (so each one
   follows each other one): every callable's 3 times, sorted ([1] the median). The SM clock under
   the power cap follows what ran just before (see proj_rows). */
static std::vector<std::vector<double>> time_rotated(const std::vector<std::function<void()>> &fs) {
    const size_t n = fs.size();
    std::vector<std::vector<double>> v(n);
    for (size_t round = 0; round < 3; ++round)
        for (size_t j = 0; j < n; ++j) {
            const size_t k = (j + round) % n;
            v[k].push_back(time_ms(fs[k]));
        }
    for (size_t k = 0; k < n; ++k) std::sort(v[k].begin(), v[k].end());
    return v;
}

/* What the vendor fuses: y = GELU(x W^T + b) as one cuBLASLt matmul (epilogue GELU_BIAS, the
   tanh form) beside ours (one GELU_TANH segment with bias; default context) and the cuBLAS GEMM
   alone, on the same inputs, interleaved in 3 rotated rounds (medians); the two outputs are
   compared (max |ours - cuBLASLt| over max |cuBLASLt|). */
static void gelu_row(ssm_ctx *ctx, FILE *js, ssm_dtype dt, int64_t M, int64_t K, int64_t N) {
    ssm_proj_desc d = ssm_proj_desc_init();
    const int64_t sx[2] = {M, K}, sW[2] = {N, K}, sy[2] = {M, N}, sN[1] = {N};
    void *x = dev_random(dt, M * K, 1.f, 51), *W = dev_random(dt, N * K, 0.03f, 52), *b = dev_random(dt, N, 0.5f, 53);
    void *y = dev_random(dt, M * N, 0.f, 54), *ylt = dev_random(dt, M * N, 0.f, 55), *lws = NULL;
    const size_t lws_bytes = (size_t)32 << 20;
    cublasLtHandle_t lt = NULL;
    cublasLtMatmulDesc_t op = NULL;
    cublasLtMatrixLayout_t la = NULL, lb = NULL, lc = NULL;
    cublasLtMatmulPreference_t pref = NULL;
    cublasLtMatmulHeuristicResult_t heur;
    int nres = 0;
    char shape[128];
    ssm_proj_desc_add(&d, N, SSM_PROJ_GELU_TANH, 0, 1, 0);
    if (!x || !W || !b || !y || !ylt || cudaMalloc(&lws, lws_bytes) != cudaSuccess) {
        printf("  (gelu M%lld skipped: out of memory)\n", (long long)M);
        cudaGetLastError();
        goto done;
    }
    {
        /* column-major as cuBLAS sees it: C[N, M] = op(W)[N, K] x[K, M], W stored [K, N] (ld K), transposed */
        const cudaDataType ty = cty(dt);
        const cublasOperation_t tA = CUBLAS_OP_T, tB = CUBLAS_OP_N;
        const cublasLtEpilogue_t ep = CUBLASLT_EPILOGUE_GELU_BIAS;
        const float one = 1.f, zero = 0.f;
        cublasLtCreate(&lt);
        cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &tA, sizeof tA);
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tB, sizeof tB);
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof ep);
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &b, sizeof b);
        cublasLtMatrixLayoutCreate(&la, ty, (uint64_t)K, (uint64_t)N, K);
        cublasLtMatrixLayoutCreate(&lb, ty, (uint64_t)K, (uint64_t)M, K);
        cublasLtMatrixLayoutCreate(&lc, ty, (uint64_t)N, (uint64_t)M, N);
        cublasLtMatmulPreferenceCreate(&pref);
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &lws_bytes, sizeof lws_bytes);
        if (cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, 1, &heur, &nres) != CUBLAS_STATUS_SUCCESS || nres < 1) {
            printf("  cuBLASLt: no algorithm for the GELU_BIAS epilogue\n");
            goto done;
        }
        ssm_tensor tx = ssm_tensor_make(x, dt, ssm_cuda_device(0), 2, sx, NULL), tW = ssm_tensor_make(W, dt, ssm_cuda_device(0), 2, sW, NULL);
        ssm_tensor tb = ssm_tensor_make(b, dt, ssm_cuda_device(0), 1, sN, NULL), ty2 = ssm_tensor_make(y, dt, ssm_cuda_device(0), 2, sy, NULL);
        auto lt_call = [&] { cublasLtMatmul(lt, op, &one, W, la, x, lb, &zero, ylt, lc, ylt, lc, &heur.algo, lws, lws_bytes, 0); };
        auto ours = [&] { ssm_proj_forward(ctx, &d, &tx, &tW, &tb, NULL, &ty2, NULL); };
        if (ssm_proj_forward(ctx, &d, &tx, &tW, &tb, NULL, &ty2, NULL) != SSM_OK) {
            printf("  gelu: %s\n", ssm_ctx_last_error(ctx));
            goto done;
        }
        lt_call();
        cudaDeviceSynchronize();
        /* agreement of the two outputs */
        std::vector<uint16_t> ha((size_t)(M * N)), hb((size_t)(M * N));
        cudaMemcpy(ha.data(), y, ha.size() * 2, cudaMemcpyDeviceToHost), cudaMemcpy(hb.data(), ylt, hb.size() * 2, cudaMemcpyDeviceToHost);
        double dmax = 0, vmax = 0;
        for (size_t i = 0; i < ha.size(); ++i) {
            const double u = dtc(dt) == 2 ? (double)__bfloat162float(*(__nv_bfloat16 *)&ha[i]) : (double)__half2float(*(__half *)&ha[i]);
            const double v = dtc(dt) == 2 ? (double)__bfloat162float(*(__nv_bfloat16 *)&hb[i]) : (double)__half2float(*(__half *)&hb[i]);
            dmax = fabs(u - v) > dmax ? fabs(u - v) : dmax, vmax = fabs(v) > vmax ? fabs(v) : vmax;
        }
        const std::vector<std::vector<double>> v = time_rotated({[&] { gemm_nt(dt, M, N, K, x, W, y); }, lt_call, ours});
        const double g = v[0][1], l = v[1][1], o = v[2][1];
        snprintf(shape, sizeof shape, "{\"M\":%lld,\"d\":%lld,\"N\":%lld}", (long long)M, (long long)K, (long long)N);
        printf("  gelu+bias %-4s M%-6lld d%-5lld N%-5lld  cublas gemm alone %7.3f ms | cublaslt GELU_BIAS %7.3f ms (x%4.2f) | ours %7.3f ms (x%4.2f)"
               "  ours / cublaslt %4.2f  max|diff| / max|y| %.1e\n",
               ssm_dtype_name(dt), (long long)M, (long long)K, (long long)N, g, l, l / g, o, o / g, o / l, dmax / (vmax > 0 ? vmax : 1));
        row_json(js, "proj_fwd", "peer:cublaslt_gelu", "cublas", dt, shape, l, g, lws_bytes);
        row_json(js, "proj_fwd", "ours:fused_gelu", "cuda", dt, shape, o, g, 0);
    }
done:
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (lc) cublasLtMatrixLayoutDestroy(lc);
    if (op) cublasLtMatmulDescDestroy(op);
    if (lt) cublasLtDestroy(lt);
    cudaFree(x), cudaFree(W), cudaFree(b), cudaFree(y), cudaFree(ylt), cudaFree(lws);
}

/* our GEMM (the fused kernel with one identity segment) against cuBLAS on a square shape */
static void gemm_row(ssm_ctx *ctx, FILE *js, ssm_dtype dt, int64_t n) {
    ssm_proj_desc d = ssm_proj_desc_init();
    const int64_t s2[2] = {n, n};
    void *a = dev_random(dt, n * n, 1.f, 21), *w = dev_random(dt, n * n, 0.02f, 22), *y = dev_random(dt, n * n, 0.f, 23);
    char shape[128];
    ssm_proj_desc_add(&d, n, SSM_PROJ_NONE, 0, 0, 0);
    if (a && w && y) {
        ssm_tensor ta = ssm_tensor_make(a, dt, ssm_cuda_device(0), 2, s2, NULL), tw = ssm_tensor_make(w, dt, ssm_cuda_device(0), 2, s2, NULL);
        ssm_tensor ty = ssm_tensor_make(y, dt, ssm_cuda_device(0), 2, s2, NULL);
        /* cuBLAS, the default, kernel 3 and kernel 1, rotated rounds (medians) */
        auto ours = [&](ssm_ctx *cx) { return [&, cx] { ssm_proj_forward(cx, &d, &ta, &tw, NULL, NULL, &ty, NULL); }; };
        const std::vector<std::vector<double>> v = time_rotated({[&] { gemm_nt(dt, n, n, n, a, w, y); }, ours(ctx), ours(g_k3), ours(g_k1)});
        const double g = v[0][1], e = v[1][1], k3 = v[2][1], k1 = v[3][1], g2 = v[0][2];
        double o = time_ms([&] { ssm_proj_forward(g_tile, &d, &ta, &tw, NULL, NULL, &ty, NULL); });
        double fl = 2.0 * n * n * n;
        snprintf(shape, sizeof shape, "{\"M\":%lld,\"d\":%lld,\"N\":%lld}", (long long)n, (long long)n, (long long)n);
        printf("  gemm %-4s %lld^3, identity epilogue (medians of 3 interleaved rounds): cublas %7.3f ms (%6.1f TFLOP/s; slowest round %7.3f)\n"
               "    ours:fused (default) %7.3f ms (%6.1f TFLOP/s) %3.0f%% of cuBLAS | fused_k3 (sm_90a wgmma) %7.3f ms (%6.1f TFLOP/s) %3.0f%%"
               " | fused_tile (mma.sync) %7.3f ms (%6.1f TFLOP/s) %3.0f%% | fused_k1 (cuBLAS + epilogue pass) %7.3f ms\n",
               ssm_dtype_name(dt), (long long)n, g, fl / g * 1e-9, g2, e, fl / e * 1e-9, 100.0 * g / e, k3, fl / k3 * 1e-9,
               100.0 * g / k3, o, fl / o * 1e-9, 100.0 * g / o, k1);
        row_json(js, "proj_fwd", "peer:cublas_gemm", "cublas", dt, shape, g, g, 0);
        row_json(js, "proj_fwd", "ours:fused_tile", "cuda", dt, shape, o, g, 0);
        row_json(js, "proj_fwd", "ours:fused_k3", "cuda", dt, shape, k3, g, 0);
        row_json(js, "proj_fwd", "ours:fused_k1", "cuda", dt, shape, k1, g, 0);
        row_json(js, "proj_fwd", "ours:fused", "cuda", dt, shape, e, g, 0);
    }
    cudaFree(a), cudaFree(w), cudaFree(y);
}

static void outchain_rows(ssm_ctx *ctx, FILE *js, ssm_dtype dt, int64_t M, int64_t D, int64_t hd, int64_t dout) {
    const int64_t so[2] = {M, D}, sw[1] = {hd}, sWo[2] = {dout, D}, sy[2] = {M, dout}, sr[2] = {M, D / hd};
    void *o = dev_random(dt, M * D, 1.f, 31), *g = dev_random(dt, M * D, 2.f, 32), *w = dev_random(dt, hd, 1.f, 33);
    void *Wo = dev_random(dt, dout * D, 0.03f, 34), *y = dev_random(dt, M * dout, 0.f, 35), *rs = dev_random(dt, M * D / hd, 0.f, 36);
    void *dy = dev_random(dt, M * dout, 1.f, 37), *dO = dev_random(dt, M * D, 0.f, 38), *dg = dev_random(dt, M * D, 0.f, 39);
    void *dw = dev_random(dt, hd, 0.f, 40), *dWo = dev_random(dt, dout * D, 0.f, 41);
    char shape[160];
    size_t wsf = 0, wsb = 0;
    if (o && g && w && Wo && y && rs && dy && dO && dg && dw && dWo) {
        ssm_tensor to = ssm_tensor_make(o, dt, ssm_cuda_device(0), 2, so, NULL), tg = ssm_tensor_make(g, dt, ssm_cuda_device(0), 2, so, NULL);
        ssm_tensor tw = ssm_tensor_make(w, dt, ssm_cuda_device(0), 1, sw, NULL), tWo = ssm_tensor_make(Wo, dt, ssm_cuda_device(0), 2, sWo, NULL);
        ssm_tensor ty = ssm_tensor_make(y, dt, ssm_cuda_device(0), 2, sy, NULL), tr = ssm_tensor_make(rs, dt, ssm_cuda_device(0), 2, sr, NULL);
        ssm_tensor tdy = ssm_tensor_make(dy, dt, ssm_cuda_device(0), 2, sy, NULL), tdo = ssm_tensor_make(dO, dt, ssm_cuda_device(0), 2, so, NULL);
        ssm_tensor tdg = ssm_tensor_make(dg, dt, ssm_cuda_device(0), 2, so, NULL), tdw = ssm_tensor_make(dw, dt, ssm_cuda_device(0), 1, sw, NULL);
        ssm_tensor tdWo = ssm_tensor_make(dWo, dt, ssm_cuda_device(0), 2, sWo, NULL);
        ssm_outchain_desc d = ssm_outchain_desc_init();
        d.head_dim = hd;
        ssm_outchain_workspace_size(ctx, &d, dt, M, D, dout, 0, &wsf);
        ssm_outchain_workspace_size(ctx, &d, dt, M, D, dout, 1, &wsb);
        double gf = time_ms([&] { gemm_nt(dt, M, dout, D, o, Wo, y); });
        double gx = time_ms([&] { gemm_nn(dt, M, D, dout, dy, Wo, dO); });
        double gw = time_ms([&] { gemm_tn(dt, dout, D, M, dy, o, dWo); });
        ssm_result r = ssm_outchain_forward(ctx, &d, &to, &tg, &tw, &tWo, &ty, &tr);
        if (r != SSM_OK) { printf("  outchain: %s\n", ssm_ctx_last_error(ctx)); goto done; }
        r = ssm_outchain_backward(ctx, &d, &to, &tg, &tw, &tWo, &tr, &tdy, &tdo, &tdg, &tdw, &tdWo);
        if (r != SSM_OK) { printf("  outchain bwd: %s\n", ssm_ctx_last_error(ctx)); goto done; }
        {
            double f = time_ms([&] { ssm_outchain_forward(ctx, &d, &to, &tg, &tw, &tWo, &ty, &tr); });
            double fb = time_ms([&] {
                ssm_outchain_forward(ctx, &d, &to, &tg, &tw, &tWo, &ty, &tr);
                ssm_outchain_backward(ctx, &d, &to, &tg, &tw, &tWo, &tr, &tdy, &tdo, &tdg, &tdw, &tdWo);
            });
            snprintf(shape, sizeof shape, "{\"M\":%lld,\"D\":%lld,\"hd\":%lld,\"d_out\":%lld}", (long long)M, (long long)D,
                     (long long)hd, (long long)dout);
            printf("  outchain %-4s M%-6lld D%-5lld hd%-4lld dout%-5lld fwd %8.3f ms floor %8.3f x%5.2f   fwd+bwd %8.3f ms floor %8.3f x%5.2f\n",
                   ssm_dtype_name(dt), (long long)M, (long long)D, (long long)hd, (long long)dout, f, gf, f / gf, fb,
                   gf + gx + gw, fb / (gf + gx + gw));
            row_json(js, "outchain_fwd", "peer:cublas_gemm", "cublas", dt, shape, gf, gf, 0);
            row_json(js, "outchain_fwdbwd", "peer:cublas_gemm", "cublas", dt, shape, gf + gx + gw, gf + gx + gw, 0);
            row_json(js, "outchain_fwd", "ours:fused", "cuda", dt, shape, f, gf, wsf);
            row_json(js, "outchain_fwdbwd", "ours:fused", "cuda", dt, shape, fb, gf + gx + gw, wsb);
        }
    } else {
        printf("  (outchain M%lld skipped: out of memory)\n", (long long)M);
        cudaGetLastError();
    }
done:
    cudaFree(o), cudaFree(g), cudaFree(w), cudaFree(Wo), cudaFree(y), cudaFree(rs), cudaFree(dy), cudaFree(dO), cudaFree(dg);
    cudaFree(dw), cudaFree(dWo);
}

/* BENCH_PROJ_FB=M[:K]: three forward (SAVE_PRE) + backward calls of the Gated DeltaNet layer at M
   rows (and K inputs, default 2048) on the default context, untimed: the program to put under
   ncu or compute-sanitizer. */
static int fb_calls(ssm_ctx *ctx, ssm_dtype dt, const char *arg) {
    int64_t K, M = atoll(arg);
    ssm_proj_desc d = chain(1, &K);
    if (strchr(arg, ':')) K = atoll(strchr(arg, ':') + 1);
    const int64_t N = ssm_proj_desc_width(&d), G = 16;
    proj_layer L = proj_layer_make(dt, M, K, N, G);
    int bad = !L.ok;
    d.path = SSM_PROJ_FUSED, d.save = SSM_PROJ_SAVE_PRE;
    for (int i = 0; i < 3 && !bad; ++i)
        bad = ssm_proj_forward(ctx, &d, &L.tx, &L.tW, &L.tb, &L.tal, &L.ty, &L.tpre) != SSM_OK ||
              ssm_proj_backward(ctx, &d, &L.tx, &L.tW, &L.tb, &L.tal, &L.tpre, &L.tdy, &L.tdx, &L.tdW, &L.tdb, &L.tdal) != SSM_OK;
    cudaDeviceSynchronize();
    printf("BENCH_PROJ_FB M %lld K %lld: %s\n", (long long)M, (long long)K,
           !L.ok ? "out of device memory" : bad ? ssm_ctx_last_error(ctx) : "3 forward + backward calls done");
    proj_layer_free(&L);
    return bad;
}

int main(void) {
    cudaDeviceProp prop;
    ssm_ctx *ctx;
    ssm_ctx_config cfg = ssm_ctx_config_init();
    ssm_cuda_config cc = ssm_cuda_config_init();
    int quick = getenv("BENCH_QUICK") != NULL;
    time_t now = time(NULL);
    if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) { printf("no CUDA device\n"); return 1; }
    snprintf(g_dev, sizeof g_dev, "%s", prop.name);
    strftime(g_date, sizeof g_date, "%Y-%m-%d", gmtime(&now));
    cfg.backend = ssm_cuda_backend();
    cfg.backend_config = &cc;
    if (ssm_ctx_create(&cfg, &ctx) != SSM_OK) return 1;
    cublasCreate(&g_h);
    {
        ssm_cuda_config c2 = ssm_cuda_config_init();
        ssm_ctx_config cfg2 = ssm_ctx_config_init();
        c2.proj_kernel = 2;
        cfg2.backend = ssm_cuda_backend();
        cfg2.backend_config = &c2;
        if (ssm_ctx_create(&cfg2, &g_tile) != SSM_OK) return 1;
        c2.proj_kernel = 1;
        if (ssm_ctx_create(&cfg2, &g_k1) != SSM_OK) return 1;
        c2.proj_kernel = 3;
        if (ssm_ctx_create(&cfg2, &g_k3) != SSM_OK) return 1;
    }
    if (getenv("BENCH_PROJ_FB")) return fb_calls(ctx, SSM_BF16, getenv("BENCH_PROJ_FB"));
    g_gdn = getenv("BENCH_PROJ_GDN") != NULL;
    FILE *js = open_jsonl("cuda_proj");
    if (g_gdn) {
        printf("device %s  date %s  commit %s\n== Gated DeltaNet projection (bf16, d 2048, N 8224): fused forward by kernel vs the cuBLAS GEMM alone\n"
               "   ours:fused = the default, ours:fused_k1 = cuBLAS GEMM + one epilogue pass (the old default), ours:fused_k3 = sm_90a wgmma;\n"
               "   fwd: median of 3 rounds interleaved across the three, rotated order\n",
               g_dev, g_date, SSM_BENCH_COMMIT);
        const int64_t Mg[3] = {2048, 8192, 32768};
        for (int i = 0; i < 3; ++i) proj_rows(ctx, js, SSM_BF16, 1, Mg[i]);
        fclose(js);
        return 0;
    }
    if (getenv("BENCH_PROJ_GEMM")) { /* the GEMM rows alone (identity epilogue, 8192^3, bf16 and f16) */
        printf("device %s  date %s  commit %s\n== GEMM alone: ours (identity epilogue) vs cuBLAS\n", g_dev, g_date, SSM_BENCH_COMMIT);
        gemm_row(ctx, js, SSM_BF16, 8192);
        gemm_row(ctx, js, SSM_F16, 8192);
        fclose(js);
        return 0;
    }
    if (getenv("BENCH_PROJ_GELU")) { /* the cuBLASLt GELU + bias epilogue rows alone */
        printf("device %s  date %s  commit %s\n== GELU + bias epilogue: cuBLASLt vs ours on the Gated DeltaNet layer's GEMM\n", g_dev,
               g_date, SSM_BENCH_COMMIT);
        gelu_row(ctx, js, SSM_BF16, 8192, 2048, 8224);
        gelu_row(ctx, js, SSM_BF16, 32768, 2048, 8224);
        fclose(js);
        return 0;
    }
    if (getenv("BENCH_PROJ_OUTCHAIN")) { /* the output chain rows alone */
        printf("device %s  date %s  commit %s\n== output chain: RMSNorm-gate + o_proj vs the cuBLAS GEMM alone (floor)\n", g_dev,
               g_date, SSM_BENCH_COMMIT);
        outchain_rows(ctx, js, SSM_BF16, 8192, 2048, 128, 2048);
        outchain_rows(ctx, js, SSM_BF16, 32768, 2048, 128, 2048);
        fclose(js);
        return 0;
    }
    printf("device %s\n== GEMM alone: ours (identity epilogue) vs cuBLAS\n", g_dev);
    gemm_row(ctx, js, SSM_BF16, 8192);
    printf("== projection chains: fused vs unfused vs the cuBLAS GEMM alone (floor)\n");
    {
        const int64_t Ma[2] = {4096, 16384}, Mb[2] = {8192, 32768};
        for (int i = 0; i < 2; ++i) {
            if (quick && i) continue;
            proj_rows(ctx, js, SSM_BF16, 0, Ma[i]);
            proj_rows(ctx, js, SSM_F32, 0, Ma[i]);
        }
        for (int i = 0; i < 2; ++i) {
            if (quick && i) continue;
            proj_rows(ctx, js, SSM_BF16, 1, Mb[i]);
        }
    }
    printf("== GELU + bias epilogue: cuBLASLt (what the vendor fuses) vs ours\n");
    gelu_row(ctx, js, SSM_BF16, 8192, 2048, 8224);
    printf("== output chain: RMSNorm-gate + o_proj vs the cuBLAS GEMM alone (floor)\n");
    outchain_rows(ctx, js, SSM_BF16, 8192, 2048, 128, 2048);
    if (!quick) outchain_rows(ctx, js, SSM_BF16, 32768, 2048, 128, 2048);
    fclose(js);
    cublasDestroy(g_h);
    ssm_ctx_destroy(g_tile);
    ssm_ctx_destroy(g_k1);
    ssm_ctx_destroy(g_k3);
    ssm_ctx_destroy(ctx);
    return 0;
}
