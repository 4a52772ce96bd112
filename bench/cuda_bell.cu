/* Block-ELL layer benchmark (make bench-cuda): y = x W^T with W in block-ELL, forward and
   forward+backward (dx, dvalues), against the same-shape dense GEMMs on cuBLAS (forward 1
   GEMM, forward+backward 3) and cuSPARSE Blocked-ELL SpMM (forward; it has no transposed
   path), same inputs, same run. Floor: useful FLOPs (density x dense) over the dense GEMM
   rate measured in this run (cuBLAS, 8192^3, per dtype). JSON lines:
   bench/results/cuda_bell.jsonl (the row format of bench/bench.h).
   BELL_GRID=prio (default): 50% density, bf16, then f16 and f32; BELL_GRID=full adds 25% and
   75% density in bf16; BELL_GRID=quick: one N; BELL_B / BELL_N / BELL_IN / BELL_DT (bf16, f16,
   f32): only those rows. f32 rows run ours by default (3xTF32) beside cuBLAS SGEMM, and again on
   plain TF32 (ours:bell_tf32, ssm_cuda_config.bell_f32 = 2) beside cuBLAS on TF32
   (peer:cublas_dense_tf32), with the floor at the TF32 GEMM rate. PyTorch BSR (to_sparse_bsr's layout, W @ x^T)
   on the same inputs: with BELL_PEER_DIR set (make bench-cuda sets it when torch imports) each
   row's inputs go there and bench/peers/torch_bsr.py --from DIR times them after this run. */
#define SSM_IMPLEMENTATION
#include "../ssm_cuda.h"
#include "cuda_common.h"
#include <cublas_v2.h>
#include <cusparse.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <vector>

#ifndef SSM_BENCH_COMMIT
#define SSM_BENCH_COMMIT "unknown"
#endif
static char g_dev[256], g_date[32];
static FILE *g_js;
static cublasHandle_t g_cublas;
static cusparseHandle_t g_cusparse;
static FILE *g_peer; /* BELL_PEER_DIR/ours.jsonl: our rows and the inputs' files, for torch_bsr.py */

static cudaDataType cuda_type(ssm_dtype dt) {
    return dt.bits == 32 ? CUDA_R_32F : (dt.code == SSM_DTYPE_BFLOAT ? CUDA_R_16BF : CUDA_R_16F);
}
/* Row-major y[N,out] = x[N,in] W^T, W [out,in] (column-major view: Y^T = W^T^T X^T). ct: cuBLAS's
   compute type (CUBLAS_COMPUTE_32F_FAST_TF32 for the f32 rows' TF32 peer). */
static cublasStatus_t gemm_fwd(ssm_dtype dt, int64_t N, int64_t in, int64_t out, const void *x, const void *W, void *y,
                               cublasComputeType_t ct = CUBLAS_COMPUTE_32F) {
    const float one = 1.f, zero = 0.f;
    return cublasGemmEx(g_cublas, CUBLAS_OP_T, CUBLAS_OP_N, (int)out, (int)N, (int)in, &one, W, cuda_type(dt), (int)in, x,
                        cuda_type(dt), (int)in, &zero, y, cuda_type(dt), (int)out, ct, CUBLAS_GEMM_DEFAULT);
}
/* dx[N,in] = dy[N,out] W; dW[out,in] = dy^T x. */
static void gemm_bwd(ssm_dtype dt, int64_t N, int64_t in, int64_t out, const void *x, const void *W, const void *dy,
                     void *dx, void *dW, cublasComputeType_t ct = CUBLAS_COMPUTE_32F) {
    const float one = 1.f, zero = 0.f;
    cublasGemmEx(g_cublas, CUBLAS_OP_N, CUBLAS_OP_N, (int)in, (int)N, (int)out, &one, W, cuda_type(dt), (int)in, dy,
                 cuda_type(dt), (int)out, &zero, dx, cuda_type(dt), (int)in, ct, CUBLAS_GEMM_DEFAULT);
    cublasGemmEx(g_cublas, CUBLAS_OP_N, CUBLAS_OP_T, (int)in, (int)out, (int)N, &one, x, cuda_type(dt), (int)in, dy,
                 cuda_type(dt), (int)out, &zero, dW, cuda_type(dt), (int)in, ct, CUBLAS_GEMM_DEFAULT);
}

static double g_peak[3], g_peak_tf32; /* dense GEMM FLOP/ms by dtype code (0 f32, 1 f16, 2 bf16); f32 on TF32 */
static double peak_rate(ssm_dtype dt, cublasComputeType_t ct = CUBLAS_COMPUTE_32F) {
    const int64_t n = 8192;
    void *a = dev_random(dt, n * n, 1.f, 11), *b = dev_random(dt, n * n, 1.f, 12), *c = dev_random(dt, n * n, 0.f, 13);
    double ms = time_ms([&] { gemm_fwd(dt, n, n, n, a, b, c, ct); });
    cudaFree(a), cudaFree(b), cudaFree(c);
    return 2.0 * n * n * n / ms;
}

static void row(const char *op, const char *impl, const char *backend, ssm_dtype dt, int64_t N, int64_t in, int64_t out,
                int64_t B, double density, double ms, double floor_ms, double dense_ms) {
    printf("  %-12s %-20s %-5s N%-6lld %5lld->%-5lld B%-3lld d%.2f  %9.3f ms  floor %8.3f  x%5.2f  vs dense %5.2fx\n", op,
           impl, ssm_dtype_name(dt), (long long)N, (long long)in, (long long)out, (long long)B, density, ms, floor_ms,
           ms / floor_ms, dense_ms / ms);
    if (g_js) {
        fprintf(g_js,
                "{\"op\":\"%s\",\"impl\":\"%s\",\"backend\":\"%s\",\"dtype\":\"%s\",\"shape\":{\"N\":%lld,\"in\":%lld,\"out\":%lld,"
                "\"B\":%lld,\"density\":%.2f},\"ms\":%.5f,\"floor_ms\":%.5f,\"speedup_vs_dense\":%.4f,\"device\":\"%s\","
                "\"date\":\"%s\",\"commit\":\"%s\"}\n",
                op, impl, backend, ssm_dtype_name(dt), (long long)N, (long long)in, (long long)out, (long long)B, density, ms,
                floor_ms, dense_ms / ms, g_dev, g_date, SSM_BENCH_COMMIT);
        fflush(g_js);
    }
}

/* One row's inputs for the BSR peer: col_idx (i32), the tiles and x (raw, the row's dtype), and a
   JSON line naming the file with the sizes, our forward time and the dense GEMM's. */
static void peer_inputs(ssm_dtype dt, int64_t N, int64_t in, int64_t out, int64_t B, int64_t K, double density,
                        const std::vector<int32_t> &ci, const void *v, const void *x, double ours_ms, double dense_ms,
                        double floor_ms) {
    char path[600];
    snprintf(path, sizeof path, "%s/%s_N%lld_%lld_%lld_B%lld_K%lld.bin", getenv("BELL_PEER_DIR"), ssm_dtype_name(dt),
             (long long)N, (long long)in, (long long)out, (long long)B, (long long)K);
    FILE *f = fopen(path, "wb");
    if (!f) return;
    const size_t es = (size_t)dt.bits / 8, nv = (size_t)(out / B * K * B * B), nx = (size_t)(N * in);
    std::vector<char> h(std::max(nv, nx) * es);
    fwrite(ci.data(), 4, ci.size(), f);
    cudaMemcpy(h.data(), v, nv * es, cudaMemcpyDeviceToHost), fwrite(h.data(), es, nv, f);
    cudaMemcpy(h.data(), x, nx * es, cudaMemcpyDeviceToHost), fwrite(h.data(), es, nx, f);
    fclose(f);
    fprintf(g_peer,
            "{\"input\": \"%s\", \"dtype\": \"%s\", \"shape\": {\"N\": %lld, \"in\": %lld, \"out\": %lld, \"B\": %lld, "
            "\"density\": %.2f}, \"K\": %lld, \"ours_ms\": %.5f, \"dense_ms\": %.5f, \"floor_ms\": %.5f}\n",
            path, ssm_dtype_name(dt), (long long)N, (long long)in, (long long)out, (long long)B, density, (long long)K, ours_ms,
            dense_ms, floor_ms);
    fflush(g_peer);
}

static unsigned long long g_rng = 0x9E3779B97F4A7C15ull;
static unsigned rnd(void) {
    g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
    return (unsigned)(g_rng >> 11);
}

/* tf: a context with bell_f32 = 2 (f32 rows: ours again on plain TF32), else NULL */
static void bell_rows(ssm_ctx *cu, ssm_ctx *tf, ssm_ctx *host, ssm_dtype dt, int64_t N, int64_t in, int64_t out, int64_t B,
                      double density) {
    const int64_t R = out / B, C = in / B, K = (int64_t)(density * C + 0.5);
    const double dense_flop = 2.0 * N * in * out, useful = dense_flop * (double)K / (double)C;
    const double peak = g_peak[dtc(dt)];
    std::vector<int32_t> ci((size_t)(R * K)), toff((size_t)(C + 1)), tsl((size_t)(R * K)), perm((size_t)C);
    for (int64_t r = 0; r < R; ++r) {
        for (int64_t q = 0; q < C; ++q) perm[(size_t)q] = (int32_t)q;
        for (int64_t q = C - 1; q > 0; --q) std::swap(perm[(size_t)q], perm[rnd() % (size_t)(q + 1)]);
        std::sort(perm.begin(), perm.begin() + K); /* ascending per row, as ssm_bell_from_dense makes them */
        for (int64_t k = 0; k < K; ++k) ci[(size_t)(r * K + k)] = perm[(size_t)k];
    }
    int64_t sci[2] = {R, K}, sto = C + 1, sts = R * K, sv[4] = {R, K, B, B}, sx[2] = {N, in}, sy[2] = {N, out};
    ssm_tensor hci = ssm_tensor_make(ci.data(), SSM_I32, ssm_cpu(), 2, sci, NULL);
    ssm_tensor hto = ssm_tensor_make(toff.data(), SSM_I32, ssm_cpu(), 1, &sto, NULL);
    ssm_tensor hts = ssm_tensor_make(tsl.data(), SSM_I32, ssm_cpu(), 1, &sts, NULL);
    ssm_bell_transpose_index(host, &hci, &hto, &hts);
    int32_t *dci, *dto, *dts;
    cudaMalloc(&dci, ci.size() * 4), cudaMalloc(&dto, toff.size() * 4), cudaMalloc(&dts, tsl.size() * 4);
    cudaMemcpy(dci, ci.data(), ci.size() * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(dto, toff.data(), toff.size() * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(dts, tsl.data(), tsl.size() * 4, cudaMemcpyHostToDevice);
    void *x = dev_random(dt, N * in, 1.f, 1), *v = dev_random(dt, R * K * B * B, 0.05f, 2), *y = dev_random(dt, N * out, 0.f, 3);
    void *dy = dev_random(dt, N * out, 1.f, 4), *dx = dev_random(dt, N * in, 0.f, 5), *dv = dev_random(dt, R * K * B * B, 0.f, 6);
    void *Wd = dev_random(dt, out * in, 0.05f, 7), *dWd = dev_random(dt, out * in, 0.f, 8);
    if (!x || !v || !y || !dy || !dx || !dv || !Wd || !dWd) {
        printf("  (skipped: out of memory)\n");
        cudaGetLastError();
    } else {
        ssm_device d0 = ssm_cuda_device(0);
        ssm_tensor tx = ssm_tensor_make(x, dt, d0, 2, sx, NULL), tv = ssm_tensor_make(v, dt, d0, 4, sv, NULL);
        ssm_tensor ty = ssm_tensor_make(y, dt, d0, 2, sy, NULL), tdy = ssm_tensor_make(dy, dt, d0, 2, sy, NULL);
        ssm_tensor tdx = ssm_tensor_make(dx, dt, d0, 2, sx, NULL), tdv = ssm_tensor_make(dv, dt, d0, 4, sv, NULL);
        ssm_tensor tci = ssm_tensor_make(dci, SSM_I32, d0, 2, sci, NULL), tto = ssm_tensor_make(dto, SSM_I32, d0, 1, &sto, NULL);
        ssm_tensor tts = ssm_tensor_make(dts, SSM_I32, d0, 1, &sts, NULL);
        ssm_result r1 = ssm_bell_forward(cu, &tx, &tv, &tci, NULL, &ty);
        ssm_result r2 = ssm_bell_backward(cu, &tx, &tv, &tci, &tto, &tts, &tdy, &tdx, &tdv, NULL);
        if (r1 != SSM_OK || r2 != SSM_OK) {
            printf("  ours failed: %s\n", ssm_ctx_last_error(cu));
        } else {
            /* dense forward, dense forward + backward (cuBLAS compute type ct), ours (context c) the same */
            auto timings = [&](ssm_ctx *c, cublasComputeType_t ct, double t[4]) {
                t[0] = time_ms([&] { gemm_fwd(dt, N, in, out, x, Wd, y, ct); });
                t[1] = time_ms([&] {
                    gemm_fwd(dt, N, in, out, x, Wd, y, ct);
                    gemm_bwd(dt, N, in, out, x, Wd, dy, dx, dWd, ct);
                });
                t[2] = time_ms([&] { ssm_bell_forward(c, &tx, &tv, &tci, NULL, &ty); });
                t[3] = time_ms([&] {
                    ssm_bell_forward(c, &tx, &tv, &tci, NULL, &ty);
                    ssm_bell_backward(c, &tx, &tv, &tci, &tto, &tts, &tdy, &tdx, &tdv, NULL);
                });
            };
            double t32[4];
            timings(cu, CUBLAS_COMPUTE_32F, t32);
            const double dfwd = t32[0], dfb = t32[1], ofwd = t32[2], ofb = t32[3];
            row("bell_fwd", "ours:bell", "cuda", dt, N, in, out, B, (double)K / C, ofwd, useful / peak, dfwd);
            row("bell_fwd", "peer:cublas_dense", "cublas", dt, N, in, out, B, (double)K / C, dfwd, useful / peak, dfwd);
            double sms = 0.0; /* cuSPARSE's time, 0 if it failed */
            /* cuSPARSE Blocked-ELL: W [out, in] (ell values row-major [out, K*B]) times X^T [in, N] column-major */
            {
                cusparseSpMatDescr_t A = NULL;
                cusparseDnMatDescr_t Bm = NULL, Cm = NULL;
                size_t bytes = 0;
                void *buf = NULL;
                const float one = 1.f, zero = 0.f;
                cusparseStatus_t s = cusparseCreateBlockedEll(&A, out, in, B, K * B, dci, v, CUSPARSE_INDEX_32I,
                                                              CUSPARSE_INDEX_BASE_ZERO, cuda_type(dt));
                if (s == CUSPARSE_STATUS_SUCCESS) s = cusparseCreateDnMat(&Bm, in, N, in, x, cuda_type(dt), CUSPARSE_ORDER_COL);
                if (s == CUSPARSE_STATUS_SUCCESS) s = cusparseCreateDnMat(&Cm, out, N, out, y, cuda_type(dt), CUSPARSE_ORDER_COL);
                if (s == CUSPARSE_STATUS_SUCCESS)
                    s = cusparseSpMM_bufferSize(g_cusparse, CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_NON_TRANSPOSE,
                                                &one, A, Bm, &zero, Cm, CUDA_R_32F, CUSPARSE_SPMM_BLOCKED_ELL_ALG1, &bytes);
                if (s == CUSPARSE_STATUS_SUCCESS && bytes) cudaMalloc(&buf, bytes);
                if (s == CUSPARSE_STATUS_SUCCESS)
                    s = cusparseSpMM(g_cusparse, CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, A,
                                     Bm, &zero, Cm, CUDA_R_32F, CUSPARSE_SPMM_BLOCKED_ELL_ALG1, buf);
                if (s == CUSPARSE_STATUS_SUCCESS) {
                    sms = time_ms([&] {
                        cusparseSpMM(g_cusparse, CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, A,
                                     Bm, &zero, Cm, CUDA_R_32F, CUSPARSE_SPMM_BLOCKED_ELL_ALG1, buf);
                    });
                    row("bell_fwd", "peer:cusparse_bell", "cusparse", dt, N, in, out, B, (double)K / C, sms, useful / peak, dfwd);
                    printf("  %-12s ours vs cuSPARSE: %.2fx\n", "", sms / ofwd);
                } else {
                    printf("  peer:cusparse_bell: %s\n", cusparseGetErrorString(s));
                }
                if (A) cusparseDestroySpMat(A);
                if (Bm) cusparseDestroyDnMat(Bm);
                if (Cm) cusparseDestroyDnMat(Cm);
                cudaFree(buf);
            }
            if (g_peer) peer_inputs(dt, N, in, out, B, K, (double)K / C, ci, v, x, ofwd, dfwd, useful / peak);
            row("bell_fwdbwd", "ours:bell", "cuda", dt, N, in, out, B, (double)K / C, ofb, 3 * useful / peak, dfb);
            row("bell_fwdbwd", "peer:cublas_dense", "cublas", dt, N, in, out, B, (double)K / C, dfb, 3 * useful / peak, dfb);
            { /* where the backward's time goes: dx alone, dvalues alone */
                const double odx = time_ms([&] { ssm_bell_backward(cu, &tx, &tv, &tci, &tto, &tts, &tdy, &tdx, NULL, NULL); });
                const double odv = time_ms([&] { ssm_bell_backward(cu, &tx, &tv, &tci, &tto, &tts, &tdy, NULL, &tdv, NULL); });
                printf("  %-12s fwd+bwd / fwd = %.2f (backward parts: dx %.3f ms, dvalues %.3f ms)\n", "", ofb / ofwd, odx, odv);
            }
            if (tf) { /* plain TF32 on both sides; the floor at the TF32 GEMM rate */
                double t[4];
                timings(tf, CUBLAS_COMPUTE_32F_FAST_TF32, t);
                const double tdf = t[0], tdfb = t[1], tfwd = t[2], tfb = t[3];
                row("bell_fwd", "ours:bell_tf32", "cuda", dt, N, in, out, B, (double)K / C, tfwd, useful / g_peak_tf32, tdf);
                row("bell_fwd", "peer:cublas_dense_tf32", "cublas", dt, N, in, out, B, (double)K / C, tdf, useful / g_peak_tf32, tdf);
                if (sms > 0) printf("  %-12s ours (TF32) vs cuSPARSE: %.2fx\n", "", sms / tfwd);
                row("bell_fwdbwd", "ours:bell_tf32", "cuda", dt, N, in, out, B, (double)K / C, tfb, 3 * useful / g_peak_tf32, tdfb);
                row("bell_fwdbwd", "peer:cublas_dense_tf32", "cublas", dt, N, in, out, B, (double)K / C, tdfb,
                    3 * useful / g_peak_tf32, tdfb);
            }
        }
    }
    cudaFree(x), cudaFree(v), cudaFree(y), cudaFree(dy), cudaFree(dx), cudaFree(dv), cudaFree(Wd), cudaFree(dWd);
    cudaFree(dci), cudaFree(dto), cudaFree(dts);
}

int main(void) {
    cudaDeviceProp prop;
    const char *grid = getenv("BELL_GRID");
    const int full = grid && !strcmp(grid, "full"), quick = grid && !strcmp(grid, "quick");
    /* BELL_B=64, BELL_N=32768, BELL_IN=2048: only those rows (e.g. for a profiler) */
    const int64_t only_B = getenv("BELL_B") ? atoll(getenv("BELL_B")) : 0;
    const int64_t only_N = getenv("BELL_N") ? atoll(getenv("BELL_N")) : 0, only_in = getenv("BELL_IN") ? atoll(getenv("BELL_IN")) : 0;
    const char *only_dt = getenv("BELL_DT");
    time_t now = time(NULL);
    if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
        printf("no CUDA device\n");
        return 0;
    }
    snprintf(g_dev, sizeof g_dev, "%s", prop.name);
    strftime(g_date, sizeof g_date, "%Y-%m-%d", gmtime(&now));
    g_js = fopen("bench/results/cuda_bell.jsonl", "a");
    if (!g_js) g_js = fopen("cuda_bell.jsonl", "a");
    if (getenv("BELL_PEER_DIR")) {
        char path[600];
        snprintf(path, sizeof path, "%s/ours.jsonl", getenv("BELL_PEER_DIR"));
        g_peer = fopen(path, "w");
    }
    cublasCreate(&g_cublas);
    cusparseCreate(&g_cusparse);
    ssm_ctx *cu = NULL, *host = NULL;
    ssm_ctx_config cfg = ssm_ctx_config_init();
    ssm_cuda_config cc = ssm_cuda_config_init();
    ssm_ctx_create(&cfg, &host);
    cfg.backend = ssm_cuda_backend();
    cfg.backend_config = &cc;
    ssm_ctx *tf = NULL;
    if (ssm_ctx_create(&cfg, &cu) != SSM_OK) {
        printf("CUDA context failed\n");
        return 1;
    }
    cc.bell_f32 = 2;
    if (ssm_ctx_create(&cfg, &tf) != SSM_OK) {
        printf("CUDA context (TF32) failed\n");
        return 1;
    }
    const ssm_dtype dts[3] = {SSM_BF16, SSM_F16, SSM_F32};
    for (int i = 0; i < 3; ++i) g_peak[dtc(dts[i])] = peak_rate(dts[i]);
    g_peak_tf32 = peak_rate(SSM_F32, CUBLAS_COMPUTE_32F_FAST_TF32);
    printf("block-ELL on %s, commit %s: dense GEMM 8192^3 rate bf16 %.0f f16 %.0f f32 %.1f (TF32 %.0f) TFLOP/s\n", g_dev,
           SSM_BENCH_COMMIT, g_peak[2] / 1e9, g_peak[1] / 1e9, g_peak[0] / 1e9, g_peak_tf32 / 1e9);
    static const int64_t shapes[3][2] = {{640, 2560}, {2048, 8192}, {4096, 4096}};
    static const int64_t Ns[2] = {8192, 32768}, Bs[3] = {16, 32, 64};
    for (int di = 0; di < 3; ++di)
        for (int si = 0; si < 3; ++si)
            for (int ni = 0; ni < (quick ? 1 : 2); ++ni)
                for (int bi = 0; bi < 3; ++bi) {
                    if (dts[di].bits == 32 && ni == 1) continue; /* f32: N = 8192 only */
                    if ((only_B && Bs[bi] != only_B) || (only_N && Ns[ni] != only_N) || (only_in && shapes[si][0] != only_in)) continue;
                    if (only_dt && strcmp(only_dt, ssm_dtype_name(dts[di]))) continue;
                    bell_rows(cu, dts[di].bits == 32 ? tf : NULL, host, dts[di], Ns[ni], shapes[si][0], shapes[si][1], Bs[bi], 0.5);
                }
    if (full)
        for (double dens : {0.25, 0.75})
            for (int si = 0; si < 3; ++si)
                for (int bi = 0; bi < 3; ++bi) bell_rows(cu, NULL, host, SSM_BF16, 8192, shapes[si][0], shapes[si][1], Bs[bi], dens);
    ssm_ctx_destroy(cu), ssm_ctx_destroy(tf), ssm_ctx_destroy(host);
    cublasDestroy(g_cublas), cusparseDestroy(g_cusparse);
    if (g_js) fclose(g_js);
    if (g_peer) fclose(g_peer);
    return 0;
}
