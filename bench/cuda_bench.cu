/* CUDA benchmark (make bench-cuda): every linrec method and the decay scan on the GPU, with the
   floor (bytes read once + written once over the device-to-device copy bandwidth measured in
   this run), the ratio to it, TFLOP/s and workspace. Median of CUDA-event timings, warm.
   JSON lines: bench/results/cuda_linrec.jsonl, cuda_decay.jsonl (the row format of bench/bench.h).
   bench/peers/torch_peers.py runs the PyTorch peers on the same shapes and prints the side by
   side table from these rows (PEER_GRID=1: the grid's, with the target table). BENCH_QUICK=1 trims
   the grid; `cuda_bench grid` runs the grid alone (BENCH_GRID_DT / _N / _T / _MAT / _METHOD: a part). `cuda_bench cr` runs the cyclic
   reduction rows alone: the default (tensor-core spans / level kernels), the level kernels
   forced (ours:cr-levels) and ssm.h's generic levels on cuBLAS (ours:cr-generic) side by side,
   with chunked, auto and the scans at the target shapes. `cuda_bench scan` runs the scans
   (Hillis-Steele, Blelloch) alone, ours against ssm.h's generic levels; `cuda_bench decay` the
   decay-scan rows alone; `cuda_bench mat` the matrix-state grid (m = n, every T and dtype,
   forward and backward; BENCH_MAT_N / _T / _DT pick one shape, BENCH_MAT_METHOD one method,
   BENCH_CHUNK sets the chunk); `cuda_bench f32wide` f32 above n = 64 over S (auto's rule there);
   `cuda_bench ragged` n % 8 != 0 (the ragged tensor-core tiles) beside the next multiple of 8, and A
   sliced off its first column (rows at odd element offsets). */
#define SSM_IMPLEMENTATION
#include "../ssm_cuda.h"
#include "cuda_common.h"
#include <cuda_profiler_api.h>
#include <algorithm>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <vector>

#ifndef SSM_BENCH_COMMIT
#define SSM_BENCH_COMMIT "unknown"
#endif
static char g_dev[256], g_date[32];
static double g_bw; /* bytes/ms */

static FILE *open_jsonl(const char *name) {
    char path[256];
    snprintf(path, sizeof path, "bench/results/%s.jsonl", name);
    FILE *f = fopen(path, "a");
    if (!f) { /* not run from the repository root: next to the binary's working directory */
        snprintf(path, sizeof path, "%s.jsonl", name);
        f = fopen(path, "a");
    }
    return f;
}

/* the modes' dtype loops, in the grid's order: f16, bf16, f32 */
static ssm_dtype grid_dtype(int di) { return di == 0 ? SSM_F16 : di == 1 ? SSM_BF16 : SSM_F32; }

static void linrec_rows(ssm_ctx *ctx, FILE *js, ssm_dtype dt, int64_t S, int64_t T, int64_t n, int64_t m,
                        const std::vector<ssm_linrec_method> &methods, int bwd, const char *variant = NULL, int sliced = 0) {
    /* sliced: A a view of [S, T, n, n + 1] without its first column (rows at odd element offsets) */
    int64_t sa[4] = {S, T, n, n}, sb[4] = {S, T, n, m}, ssl[4] = {T * n * (n + 1), n * (n + 1), n + 1, 1};
    size_t es = dt.bits / 8;
    void *A = dev_random(dt, S * T * n * (n + !!sliced), 0.9f / sqrtf((float)n), 1), *b = dev_random(dt, S * T * n * m, 1.f, 2);
    void *h = dev_random(dt, S * T * n * m, 0.f, 3), *dh = dev_random(dt, S * T * n * m, 1.f, 4);
    void *dA = dev_random(dt, S * T * n * n, 0.f, 5), *db = dev_random(dt, S * T * n * m, 0.f, 6);
    if (!A || !b || !h || !dh || !dA || !db) {
        printf("  (skipped S%lld T%lld n%lld m%lld: out of memory)\n", (long long)S, (long long)T, (long long)n, (long long)m);
        cudaGetLastError();
        cudaFree(A), cudaFree(b), cudaFree(h), cudaFree(dh), cudaFree(dA), cudaFree(db);
        return;
    }
    ssm_tensor tA = ssm_tensor_make(sliced && A ? (char *)A + es : A, dt, ssm_cuda_device(0), 4, sa, sliced ? ssl : NULL), tb = ssm_tensor_make(b, dt, ssm_cuda_device(0), 4, sb, NULL);
    ssm_tensor th = ssm_tensor_make(h, dt, ssm_cuda_device(0), 4, sb, NULL), tdh = ssm_tensor_make(dh, dt, ssm_cuda_device(0), 4, sb, NULL);
    ssm_tensor tdA = ssm_tensor_make(dA, dt, ssm_cuda_device(0), 4, sa, NULL), tdb = ssm_tensor_make(db, dt, ssm_cuda_device(0), 4, sb, NULL);
    for (ssm_linrec_method meth : methods) {
        ssm_linrec_desc d = ssm_linrec_desc_init();
        ssm_linrec_stats st;
        size_t ws = 0;
        d.method = meth;
        d.stats = &st;
        if (getenv("BENCH_CHUNK")) d.chunk = atoll(getenv("BENCH_CHUNK")); /* the chunk (span) length, by shape when unset */
        ssm_linrec_workspace_size(ctx, &d, dt, S, T, n, m, 0, &ws);
        /* BENCH_PROFILE=fwd or bwd: the first (untimed) call of that direction between cudaProfilerStart / Stop, so
           `ncu --profile-from-start off` captures exactly one forward or backward */
        const char *prof = getenv("BENCH_PROFILE");
        const int pf = prof && !strcmp(prof, "fwd"), pb = prof && !strcmp(prof, "bwd");
        if (pf) cudaProfilerStart();
        ssm_result r = ssm_linrec_forward(ctx, &d, &tA, &tb, NULL, &th, NULL);
        if (pf) cudaProfilerStop();
        if (r != SSM_OK) { printf("  %s: %s\n", ssm_linrec_method_name(meth), ssm_ctx_last_error(ctx)); continue; }
        double ms = time_ms([&] { ssm_linrec_forward(ctx, &d, &tA, &tb, NULL, &th, NULL); }, T * S > 100000 && meth == SSM_LINREC_SEQUENTIAL ? 3 : 10);
        double bytes = (double)es * (S * T * n * n + 2.0 * S * T * n * m), floor_ms = bytes / g_bw;
        char mnb[64];
        snprintf(mnb, sizeof mnb, "%s%s%s", ssm_linrec_method_name(meth), variant ? "-" : "", variant ? variant : "");
        const char *mn = mnb;
        printf("  %-6s %-4s S%-4lld T%-5lld n%-4lld m%-4lld %-9s %9.3f ms  floor %7.3f  x%6.2f  %7.2f TFLOP/s  ws %8.1f MB%s%s\n",
               "linrec", ssm_dtype_name(dt), (long long)S, (long long)T, (long long)n, (long long)m, mn, ms, floor_ms,
               ms / floor_ms, st.flops / ms * 1e-9, ws / 1e6, meth == SSM_LINREC_AUTO ? " -> " : "",
               meth == SSM_LINREC_AUTO ? ssm_linrec_method_name(st.method) : "");
        fprintf(js, "{\"op\":\"linrec\",\"impl\":\"ours:%s\",\"backend\":\"cuda\",\"dtype\":\"%s\",\"shape\":{\"S\":%lld,\"T\":%lld,\"n\":%lld,\"m\":%lld},"
                    "\"ms\":%.5f,\"floor_ms\":%.5f,\"peak_mem_bytes\":%zu,\"tflops\":%.3f,\"resolved\":\"%s\",\"relerr\":null,\"device\":\"%s\",\"date\":\"%s\",\"commit\":\"%s\"}\n",
                mn, ssm_dtype_name(dt), (long long)S, (long long)T, (long long)n, (long long)m, ms, floor_ms, ws,
                st.flops / ms * 1e-9, ssm_linrec_method_name(st.method), g_dev, g_date, SSM_BENCH_COMMIT);
        if (bwd) {
            if (pb) cudaProfilerStart();
            r = ssm_linrec_backward(ctx, &d, &tA, NULL, &th, &tdh, NULL, &tdA, &tdb, NULL);
            if (pb) cudaProfilerStop();
            if (r != SSM_OK) { printf("  bwd: %s\n", ssm_ctx_last_error(ctx)); continue; }
            double bms = time_ms([&] { ssm_linrec_backward(ctx, &d, &tA, NULL, &th, &tdh, NULL, &tdA, &tdb, NULL); }, 5);
            double bb = (double)es * (2.0 * S * T * n * n + 3.0 * S * T * n * m), bf = bb / g_bw;
            printf("  %-6s %-4s S%-4lld T%-5lld n%-4lld m%-4lld %-9s %9.3f ms  floor %7.3f  x%6.2f  bwd/fwd %.2f\n", "lr_bwd",
                   ssm_dtype_name(dt), (long long)S, (long long)T, (long long)n, (long long)m, mn, bms, bf, bms / bf, bms / ms);
            fprintf(js, "{\"op\":\"linrec_bwd\",\"impl\":\"ours:%s\",\"backend\":\"cuda\",\"dtype\":\"%s\",\"shape\":{\"S\":%lld,\"T\":%lld,\"n\":%lld,\"m\":%lld},"
                        "\"ms\":%.5f,\"floor_ms\":%.5f,\"peak_mem_bytes\":%zu,\"relerr\":null,\"device\":\"%s\",\"date\":\"%s\",\"commit\":\"%s\"}\n",
                    mn, ssm_dtype_name(dt), (long long)S, (long long)T, (long long)n, (long long)m, bms, bf, ws, g_dev, g_date,
                    SSM_BENCH_COMMIT);
        }
        fflush(stdout);
    }
    cudaFree(A), cudaFree(b), cudaFree(h), cudaFree(dh), cudaFree(dA), cudaFree(db);
}

static void decay_rows(ssm_ctx *ctx, FILE *js, ssm_dtype dt, int64_t B, int64_t T, int64_t D) {
    int64_t sx[4] = {B, T, D, D}, sl[3] = {B, T, D};
    size_t es = dt.bits / 8, ws = 0;
    void *x = dev_random(dt, B * T * D * D, 1.f, 7), *ld = dev_random(dt, B * T * D, T > 8192 ? 0.01f : 0.05f, 8), *o = dev_random(dt, B * T * D * D, 0, 9);
    void *dout = dev_random(dt, B * T * D * D, 1.f, 10), *dx = dev_random(dt, B * T * D * D, 0, 11), *dl = dev_random(dt, B * T * D, 0, 12);
    ssm_tensor tx = ssm_tensor_make(x, dt, ssm_cuda_device(0), 4, sx, NULL), tl = ssm_tensor_make(ld, dt, ssm_cuda_device(0), 3, sl, NULL);
    ssm_tensor to = ssm_tensor_make(o, dt, ssm_cuda_device(0), 4, sx, NULL), tdo = ssm_tensor_make(dout, dt, ssm_cuda_device(0), 4, sx, NULL);
    ssm_tensor tdx = ssm_tensor_make(dx, dt, ssm_cuda_device(0), 4, sx, NULL), tdl = ssm_tensor_make(dl, dt, ssm_cuda_device(0), 3, sl, NULL);
    ssm_decay_desc d = ssm_decay_desc_init();
    d.input = SSM_DECAY_PER_STEP; /* per-step log decays in [-0.05, 0.05] ([-0.01, 0.01] past T 8192: finite in f16) */
    ssm_decay_workspace_size(ctx, &d, dt, B, T, D, D, 0, &ws);
    ssm_result r = ssm_decay_forward(ctx, &d, &tl, &tx, NULL, &to, NULL);
    if (r != SSM_OK) { printf("  decay: %s\n", ssm_ctx_last_error(ctx)); return; }
    double ms = time_ms([&] { ssm_decay_forward(ctx, &d, &tl, &tx, NULL, &to, NULL); });
    double bytes = (double)es * (2.0 * B * T * D * D + B * T * D), fl = bytes / g_bw;
    double bms = time_ms([&] { ssm_decay_backward(ctx, &d, &tl, NULL, &to, &tdo, NULL, &tdx, &tdl, NULL); });
    double bb = (double)es * (3.0 * B * T * D * D + 2.0 * B * T * D), bfl = bb / g_bw;
    printf("  decay  %-4s B%-3lld T%-5lld D%-4lld fwd %8.3f ms floor %7.3f x%5.2f (%.0f%% of copy bw)  bwd %8.3f ms floor %7.3f x%5.2f  ws %.1f MB\n",
           ssm_dtype_name(dt), (long long)B, (long long)T, (long long)D, ms, fl, ms / fl, 100 * fl / ms, bms, bfl, bms / bfl, ws / 1e6);
    fprintf(js, "{\"op\":\"decay\",\"impl\":\"ours:scan\",\"backend\":\"cuda\",\"dtype\":\"%s\",\"shape\":{\"B\":%lld,\"T\":%lld,\"D\":%lld},\"ms\":%.5f,\"floor_ms\":%.5f,\"peak_mem_bytes\":%zu,\"relerr\":null,\"device\":\"%s\",\"date\":\"%s\",\"commit\":\"%s\"}\n",
            ssm_dtype_name(dt), (long long)B, (long long)T, (long long)D, ms, fl, ws, g_dev, g_date, SSM_BENCH_COMMIT);
    fprintf(js, "{\"op\":\"decay_bwd\",\"impl\":\"ours:scan\",\"backend\":\"cuda\",\"dtype\":\"%s\",\"shape\":{\"B\":%lld,\"T\":%lld,\"D\":%lld},\"ms\":%.5f,\"floor_ms\":%.5f,\"peak_mem_bytes\":%zu,\"relerr\":null,\"device\":\"%s\",\"date\":\"%s\",\"commit\":\"%s\"}\n",
            ssm_dtype_name(dt), (long long)B, (long long)T, (long long)D, bms, bfl, ws, g_dev, g_date, SSM_BENCH_COMMIT);
    fflush(stdout);
    cudaFree(x), cudaFree(ld), cudaFree(o), cudaFree(dout), cudaFree(dx), cudaFree(dl);
}

/* Cyclic reduction: ours by shape, the level kernels forced and the generic levels, same inputs. */
static void cr_rows(ssm_ctx *ctx, ssm_ctx *lev, ssm_ctx *gen, FILE *jl, ssm_dtype dt, int64_t S, int64_t T, int64_t n,
                    int64_t m, int bwd, int others) {
    std::vector<ssm_linrec_method> cr = {SSM_LINREC_CR};
    std::vector<ssm_linrec_method> rest = {SSM_LINREC_CHUNKED, SSM_LINREC_AUTO, SSM_LINREC_SCAN_HS};
    if (others == 2) rest.pop_back();
    linrec_rows(ctx, jl, dt, S, T, n, m, cr, bwd);
    linrec_rows(lev, jl, dt, S, T, n, m, cr, bwd, "levels");
    linrec_rows(gen, jl, dt, S, T, n, m, cr, bwd, "generic");
    if (others) linrec_rows(ctx, jl, dt, S, T, n, m, rest, bwd);
}

/* `cuda_bench scan`: the scans at the target shapes, ours (the fused level kernels) against
   ssm.h's generic levels (linrec_scan = 1, the code main ran before), same inputs, with each
   method's floor over the copy bandwidth (HS: every level reads two and writes one M of the
   input type, ceil(log2 T) levels x 3 S T n^2 elements; Blelloch: 3 per up-sweep task, 1 per
   down-sweep task; and per task v_{t-d} and v_t read and v_t written, n m floats each) and the
   largest |h_ours - h_generic| / max|h|. */
static void scan_rows(ssm_ctx *ctx, ssm_ctx *gen, ssm_ctx *pt, FILE *js, ssm_dtype dt, int64_t S, int64_t T, int64_t n, int64_t m) {
    int64_t sa[4] = {S, T, n, n}, sb[4] = {S, T, n, m};
    size_t es = dt.bits / 8, nh = (size_t)(S * T * n * m);
    void *A = dev_random(dt, S * T * n * n, 0.9f / sqrtf((float)n), 1), *b = dev_random(dt, S * T * n * m, 1.f, 2);
    void *h1 = dev_random(dt, S * T * n * m, 0.f, 3), *h2 = dev_random(dt, S * T * n * m, 0.f, 3);
    if (!A || !b || !h1 || !h2) { printf("  (skipped: out of memory)\n"); cudaGetLastError(); return; }
    ssm_tensor tA = ssm_tensor_make(A, dt, ssm_cuda_device(0), 4, sa, NULL), tb = ssm_tensor_make(b, dt, ssm_cuda_device(0), 4, sb, NULL);
    ssm_tensor th1 = ssm_tensor_make(h1, dt, ssm_cuda_device(0), 4, sb, NULL), th2 = ssm_tensor_make(h2, dt, ssm_cuda_device(0), 4, sb, NULL);
    int K = 0;
    for (int64_t d = 1; d < T; d *= 2) ++K;
    /* and every task reads v_{t-d}, v_t and writes v_t in f32 */
    double hs_floor = 3.0 * K * S * T * ((double)es * n * n + 4.0 * n * m) / g_bw, bl_mats = 0, bl_tasks = 0;
    { /* Blelloch: up-sweep level s reads M_k, M_{k-s} and writes M_k per task; down-sweep reads M_k */
        int64_t top = 0;
        for (int64_t s = 1; 2 * s <= T; s *= 2) {
            const double k = (double)((T - 2 * s) / (2 * s) + 1);
            top = s, bl_mats += 3.0 * k, bl_tasks += k;
        }
        for (int64_t s = top; s >= 1; s /= 2)
            if (3 * s - 1 < T) {
                const double k = (double)((T - 3 * s) / (2 * s) + 1);
                bl_mats += k, bl_tasks += k;
            }
    }
    double bl_floor = ((double)es * bl_mats * n * n + 12.0 * bl_tasks * n * m) * S / g_bw;
    ssm_linrec_method ms_[2] = {SSM_LINREC_SCAN_HS, SSM_LINREC_BLELLOCH};
    for (int mi = 0; mi < 2; ++mi) {
        ssm_linrec_desc d = ssm_linrec_desc_init();
        d.method = ms_[mi];
        double t[3] = {0, 0, 0}, fl = mi ? bl_floor : hs_floor;
        for (int w = 2; w >= 0; --w) { /* 2: HS one task per warp group (linrec_scan = 2); 1: generic; 0: ours */
            if (w == 2 && mi) continue;
            ssm_ctx *c = w == 2 ? pt : w ? gen : ctx;
            ssm_tensor *th = w == 1 ? &th2 : &th1;
            ssm_result r = ssm_linrec_forward(c, &d, &tA, &tb, NULL, th, NULL);
            if (r != SSM_OK) { printf("  %s: %s\n", ssm_linrec_method_name(d.method), ssm_ctx_last_error(c)); t[w] = 0; continue; }
            t[w] = time_ms([&] { ssm_linrec_forward(c, &d, &tA, &tb, NULL, th, NULL); }, 10);
        }
        std::vector<unsigned short> x1, x2;
        std::vector<float> f1, f2;
        double mx = 0, md = 0;
        if (es == 2) {
            x1.resize(nh), x2.resize(nh);
            cudaMemcpy(x1.data(), h1, nh * 2, cudaMemcpyDeviceToHost), cudaMemcpy(x2.data(), h2, nh * 2, cudaMemcpyDeviceToHost);
            for (size_t i = 0; i < nh; ++i) {
                unsigned u1 = dt.code == SSM_DTYPE_BFLOAT ? (unsigned)x1[i] << 16 : 0, u2 = dt.code == SSM_DTYPE_BFLOAT ? (unsigned)x2[i] << 16 : 0;
                float a1, a2;
                if (dt.code == SSM_DTYPE_BFLOAT) memcpy(&a1, &u1, 4), memcpy(&a2, &u2, 4);
                else a1 = __half2float(*(__half *)&x1[i]), a2 = __half2float(*(__half *)&x2[i]);
                mx = std::max(mx, (double)fabsf(a2)), md = std::max(md, (double)fabsf(a1 - a2));
            }
        } else {
            f1.resize(nh), f2.resize(nh);
            cudaMemcpy(f1.data(), h1, nh * 4, cudaMemcpyDeviceToHost), cudaMemcpy(f2.data(), h2, nh * 4, cudaMemcpyDeviceToHost);
            for (size_t i = 0; i < nh; ++i) mx = std::max(mx, (double)fabsf(f2[i])), md = std::max(md, (double)fabsf(f1[i] - f2[i]));
        }
        printf("  scan   %-4s S%-4lld T%-5lld n%-4lld m%-4lld %-9s ours %9.3f ms  generic %9.3f ms  x%5.2f  floor %7.3f (ours x%5.2f)  maxdiff/max %.2e  pertask %.3f ms\n",
               ssm_dtype_name(dt), (long long)S, (long long)T, (long long)n, (long long)m, ssm_linrec_method_name(d.method),
               t[0], t[1], t[0] > 0 ? t[1] / t[0] : 0, fl, t[0] / fl, mx > 0 ? md / mx : md, t[2]);
        for (int w = 0; w < 2; ++w)
            fprintf(js, "{\"op\":\"linrec\",\"impl\":\"ours:%s%s\",\"backend\":\"cuda\",\"dtype\":\"%s\",\"shape\":{\"S\":%lld,\"T\":%lld,\"n\":%lld,\"m\":%lld},"
                        "\"ms\":%.5f,\"floor_ms\":%.5f,\"peak_mem_bytes\":0,\"relerr\":null,\"device\":\"%s\",\"date\":\"%s\",\"commit\":\"%s\"}\n",
                    ssm_linrec_method_name(d.method), w ? "-generic" : "", ssm_dtype_name(dt), (long long)S, (long long)T, (long long)n,
                    (long long)m, t[w], fl, g_dev, g_date, SSM_BENCH_COMMIT);
        fflush(stdout);
    }
    cudaFree(A), cudaFree(b), cudaFree(h1), cudaFree(h2);
}

/* The dense-recurrence grid: n in {32, 64, 128} x T in {1024, 2048, 4096, 8192} x {f16, bf16, f32}
   x m in {1, n}, S so that A holds >= 256 MB, every method forward and backward, S1 T8192 n64 and
   (f16) the headline row S16 T4096 n64 m1.
   BENCH_GRID_DT (0 f16, 1 bf16, 2 f32), _N, _T, _MAT (0: m = 1, 1: m = n) pick a part (runs split over
   calls, profiles), BENCH_GRID_METHOD one method (its number in ssm_linrec_method);
   BENCH_QUICK: T 1024 and 4096 at n = 64. torch_peers.py's PEER_GRID=1 runs its peers on the same
   shapes (grid_seqs there is the same formula). */
static void grid_rows(ssm_ctx *ctx, FILE *jl, int quick) {
    std::vector<ssm_linrec_method> all = {SSM_LINREC_SEQUENTIAL, SSM_LINREC_SCAN_HS, SSM_LINREC_BLELLOCH,
                                          SSM_LINREC_CR,         SSM_LINREC_CHUNKED, SSM_LINREC_AUTO};
    const int64_t ns[3] = {32, 64, 128}, Ts[4] = {1024, 2048, 4096, 8192};
    const char *pick_dt = getenv("BENCH_GRID_DT"), *pick_n = getenv("BENCH_GRID_N"), *pick_t = getenv("BENCH_GRID_T");
    const char *pick_mat = getenv("BENCH_GRID_MAT"), *pick_method = getenv("BENCH_GRID_METHOD");
    if (pick_method) all = {(ssm_linrec_method)atoi(pick_method)};
    printf("== dense recurrence grid (S so that A >= 256 MB), every method, fwd and bwd\n");
    for (int di = 0; di < 3; ++di) {
        const ssm_dtype dt = grid_dtype(di);
        if (pick_dt && atoi(pick_dt) != di) continue;
        for (int ni = 0; ni < 3; ++ni)
            for (int ti = 0; ti < 4; ++ti)
                for (int mi = 0; mi < 2; ++mi) {
                    const int64_t n = ns[ni], T = Ts[ti], S = grid_seqs(dt, T, n);
                    if ((pick_n && atoll(pick_n) != n) || (pick_t && atoll(pick_t) != T) || (pick_mat && atoi(pick_mat) != mi)) continue;
                    if (quick && (ti % 2 || ni != 1)) continue;
                    linrec_rows(ctx, jl, dt, S, T, n, mi ? n : 1, all, 1);
                }
        if ((pick_n && atoll(pick_n) != 64) || (pick_mat && atoi(pick_mat) != 0)) continue;
        if (!pick_t || atoll(pick_t) == 8192) linrec_rows(ctx, jl, dt, 1, 8192, 64, 1, all, 1);
        if (di == 0 && (!pick_t || atoll(pick_t) == 4096)) linrec_rows(ctx, jl, dt, 16, 4096, 64, 1, all, 1); /* the headline row */
    }
}

int main(int argc, char **argv) {
    cudaDeviceProp prop;
    ssm_ctx *ctx;
    int quick = getenv("BENCH_QUICK") != NULL;
    time_t now = time(NULL);
    if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) { printf("no CUDA device\n"); return 1; }
    snprintf(g_dev, sizeof g_dev, "%s", prop.name);
    strftime(g_date, sizeof g_date, "%Y-%m-%d", gmtime(&now));
    if (!(ctx = ctx_with([](ssm_cuda_config &) {}))) return 1;
    g_bw = copy_bandwidth(); /* 1 GiB device-to-device, read + write counted */
    printf("device %s, copy bandwidth %.0f GB/s (1 GiB D2D, read+write)\n", g_dev, g_bw * 1e-6);
    FILE *jl = open_jsonl("cuda_linrec"), *jd = open_jsonl("cuda_decay");
    if (argc > 1 && !strcmp(argv[1], "grid")) { /* the grid alone */
        grid_rows(ctx, jl, quick);
        fclose(jl), fclose(jd);
        ssm_ctx_destroy(ctx);
        return 0;
    }
    if (argc > 1 && !strcmp(argv[1], "scan")) {
        ssm_ctx *gen = ctx_with([](ssm_cuda_config &c) { c.linrec_scan = 1; });
        ssm_ctx *pt = ctx_with([](ssm_cuda_config &c) { c.linrec_scan = 2; });
        if (!gen || !pt) return 1;
        printf("== scans (targets; the grid rows of torch_peers.py)\n");
        scan_rows(ctx, gen, pt, jl, SSM_F16, 16, 4096, 64, 1);
        scan_rows(ctx, gen, pt, jl, SSM_F16, 8, 1024, 128, 1);
        scan_rows(ctx, gen, pt, jl, SSM_F16, 128, 1024, 32, 1);
        scan_rows(ctx, gen, pt, jl, SSM_F16, 1, 8192, 64, 1);
        scan_rows(ctx, gen, pt, jl, SSM_F16, 32, 1024, 64, 1);
        scan_rows(ctx, gen, pt, jl, SSM_BF16, 16, 4096, 64, 1);
        scan_rows(ctx, gen, pt, jl, SSM_F32, 8, 1024, 64, 1);
        scan_rows(ctx, gen, pt, jl, SSM_F16, 8, 1024, 64, 64);
        printf("== scans, matrix states (m = n, the grid rows of `cuda_bench cr`)\n");
        scan_rows(ctx, gen, pt, jl, SSM_F16, 128, 1024, 32, 32);
        scan_rows(ctx, gen, pt, jl, SSM_F16, 32, 1024, 64, 64);
        scan_rows(ctx, gen, pt, jl, SSM_BF16, 32, 1024, 64, 64);
        scan_rows(ctx, gen, pt, jl, SSM_F16, 8, 1024, 128, 128);
        fclose(jl), fclose(jd);
        ssm_ctx_destroy(gen), ssm_ctx_destroy(pt), ssm_ctx_destroy(ctx);
        return 0;
    }
    if (argc > 1 && !strcmp(argv[1], "cr")) {
        ssm_ctx *lev = ctx_with([](ssm_cuda_config &c) { c.linrec_cr = 2; });
        ssm_ctx *gen = ctx_with([](ssm_cuda_config &c) { c.linrec_cr = 1; });
        if (!lev || !gen) return 1;
        printf("== cyclic reduction (targets)\n");
        if (!getenv("BENCH_CR_MN")) {
            cr_rows(ctx, lev, gen, jl, SSM_F16, 16, 4096, 64, 1, 1, 1);
            cr_rows(ctx, lev, gen, jl, SSM_F16, 8, 1024, 128, 1, 1, 1);
            cr_rows(ctx, lev, gen, jl, SSM_F16, 1, 8192, 64, 1, 1, 1);
        }
        printf("== cyclic reduction grid (S so that A >= 256 MB)\n");
        const int64_t ns[3] = {32, 64, 128}, Ts[2] = {1024, 4096};
        for (int di = 0; di < 3; ++di) {
            ssm_dtype dt = grid_dtype(di);
            for (int ni = 0; ni < 3; ++ni)
                for (int ti = 0; ti < 2; ++ti) {
                    int64_t n = ns[ni], T = Ts[ti], S = grid_seqs(dt, T, n);
                    if (di == 1 && n != 64) continue;
                    if (getenv("BENCH_CR_N") && atoll(getenv("BENCH_CR_N")) != n) continue; /* one n (profiles) */
                    if (!getenv("BENCH_CR_MN")) cr_rows(ctx, lev, gen, jl, dt, S, T, n, 1, 0, 0); /* BENCH_CR_MN=1: the m = n rows alone */
                    if (ti == 0 && di != 1) cr_rows(ctx, lev, gen, jl, dt, S, T, n, n, getenv("BENCH_CR_MN") != NULL, 2);
                }
        }
        fclose(jl), fclose(jd);
        ssm_ctx_destroy(lev), ssm_ctx_destroy(gen), ssm_ctx_destroy(ctx);
        return 0;
    }
    if (argc > 1 && !strcmp(argv[1], "mat")) { /* matrix states (m = n): the issue's grid, every method that runs them fast */
        ssm_ctx *cores = ctx_with([](ssm_cuda_config &c) { c.linrec_mat = 1; });
        if (!cores) return 1;
        std::vector<ssm_linrec_method> ms = {SSM_LINREC_AUTO, SSM_LINREC_SEQUENTIAL, SSM_LINREC_CHUNKED, SSM_LINREC_CR};
        std::vector<ssm_linrec_method> chunked = {SSM_LINREC_CHUNKED};
        const int64_t ns[3] = {32, 64, 128}, Ts[4] = {1024, 2048, 4096, 8192};
        printf("== matrix states, m = n (S so that A >= 256 MB); fwd and bwd\n");
        for (int di = 0; di < 3; ++di) {
            ssm_dtype dt = grid_dtype(di);
            for (int ni = 0; ni < 3; ++ni)
                for (int ti = 0; ti < 4; ++ti) {
                    int64_t n = ns[ni], T = Ts[ti], S = grid_seqs(dt, T, n);
                    if (getenv("BENCH_MAT_N") && atoll(getenv("BENCH_MAT_N")) != n) continue; /* one shape (profiles) */
                    if (getenv("BENCH_MAT_T") && atoll(getenv("BENCH_MAT_T")) != T) continue;
                    if (getenv("BENCH_MAT_DT") && atoi(getenv("BENCH_MAT_DT")) != di) continue;
                    if (getenv("BENCH_MAT_METHOD")) { /* one method, forward only (profiles; BENCH_MAT_BWD=1: and backward) */
                        std::vector<ssm_linrec_method> one = {(ssm_linrec_method)atoi(getenv("BENCH_MAT_METHOD"))};
                        linrec_rows(ctx, jl, dt, S, T, n, n, one, getenv("BENCH_MAT_BWD") != NULL);
                        continue;
                    }
                    linrec_rows(ctx, jl, dt, S, T, n, n, ms, 1);
                    if (ti == 0) linrec_rows(cores, jl, dt, S, T, n, n, chunked, 1, "cudacores"); /* the CUDA-core kernel beside it */
                    if (ti == 0 && di == 2) /* and the f32 level kernels' FMA products beside their 3xTF32 ones */
                        linrec_rows(cores, jl, dt, S, T, n, n, {SSM_LINREC_CR, SSM_LINREC_BLELLOCH}, 1, "cudacores");
                }
        }
        fclose(jl), fclose(jd);
        ssm_ctx_destroy(cores), ssm_ctx_destroy(ctx);
        return 0;
    }
    if (argc > 1 && !strcmp(argv[1], "narrow")) { /* the tensor-core path below n = 64 (padded tiles) */
        std::vector<ssm_linrec_method> ms = {SSM_LINREC_SEQUENTIAL, SSM_LINREC_CR, SSM_LINREC_CHUNKED, SSM_LINREC_AUTO};
        const int64_t ns[5] = {16, 24, 32, 48, 64}, Ts[3] = {1024, 4096, 8192};
        ssm_ctx *w = ctx_with([](ssm_cuda_config &c) { c.linrec_tc_prod = 2; });
        if (!w) return 1;
        printf("== dense recurrence below n = 64 (S so that A >= 256 MB)\n");
        for (int di = 0; di < 2; ++di)
            for (int ni = 0; ni < 5; ++ni)
                for (int ti = 0; ti < 3; ++ti) {
                    ssm_dtype dt = grid_dtype(di);
                    int64_t n = ns[ni], T = Ts[ti], S = grid_seqs(dt, T, n);
                    if (di && (ni < 2 || ni > 3 || ti == 2)) continue;
                    if (getenv("BENCH_NARROW_N") && atoll(getenv("BENCH_NARROW_N")) != n) continue; /* one n (A/B runs) */
                    linrec_rows(ctx, jl, dt, S, T, n, 1, ms, 1);
                    if (di) linrec_rows(w, jl, dt, S, T, n, 1, {SSM_LINREC_CHUNKED}, 1, "wgmma"); /* the products forced */
                }
        fclose(jl), fclose(jd);
        ssm_ctx_destroy(w), ssm_ctx_destroy(ctx);
        return 0;
    }
    if (argc > 1 && !strcmp(argv[1], "f32")) { /* f32 on the tensor cores (3xTF32), plain TF32 beside it */
        std::vector<ssm_linrec_method> ms = {SSM_LINREC_SEQUENTIAL, SSM_LINREC_CR, SSM_LINREC_CHUNKED, SSM_LINREC_AUTO};
        const int64_t ns[4] = {32, 64, 16, 48}, Ts[3] = {1024, 4096, 8192};
        ssm_ctx *tf = ctx_with([](ssm_cuda_config &c) { c.linrec_tc_split = 1; });
        if (!tf) return 1;
        printf("== dense recurrence, f32 (S so that A >= 256 MB)\n");
        for (int ni = 0; ni < 4; ++ni)
            for (int ti = 0; ti < 3; ++ti) {
                int64_t n = ns[ni], T = Ts[ti], S = grid_seqs(SSM_F32, T, n);
                if (ni >= 2 && ti != 1) continue;
                if (getenv("BENCH_NARROW_N") && atoll(getenv("BENCH_NARROW_N")) != n) continue;
                linrec_rows(ctx, jl, SSM_F32, S, T, n, 1, ms, 1);
                linrec_rows(tf, jl, SSM_F32, S, T, n, 1, {SSM_LINREC_CHUNKED}, 1, "tf32");
            }
        fclose(jl), fclose(jd);
        ssm_ctx_destroy(tf), ssm_ctx_destroy(ctx);
        return 0;
    }
    if (argc > 1 && !strcmp(argv[1], "f32wide")) { /* f32 above n = 64 (no tensor-core chunked path): auto's rule over S */
        std::vector<ssm_linrec_method> ms = {SSM_LINREC_SEQUENTIAL, SSM_LINREC_BLELLOCH, SSM_LINREC_CR, SSM_LINREC_CHUNKED, SSM_LINREC_AUTO};
        const int64_t Ss[5] = {1, 2, 8, 32, 128};
        printf("== dense recurrence, f32 above n = 64, T 1024, S 1..128\n");
        for (int si = 0; si < 5; ++si) {
            linrec_rows(ctx, jl, SSM_F32, Ss[si], 1024, 128, 1, ms, 1);
            linrec_rows(ctx, jl, SSM_F32, Ss[si], 1024, 128, 4, ms, 1);
            linrec_rows(ctx, jl, SSM_F32, Ss[si], 1024, 96, 1, ms, 1);
        }
        fclose(jl), fclose(jd);
        ssm_ctx_destroy(ctx);
        return 0;
    }
    if (argc > 1 && !strcmp(argv[1], "ragged")) { /* the tensor-core path at n % 8 != 0 (ragged tiles) beside the next multiple of 8 */
        std::vector<ssm_linrec_method> ms = {SSM_LINREC_CR, SSM_LINREC_CHUNKED, SSM_LINREC_AUTO};
        const int64_t ns[8] = {100, 104, 127, 128, 61, 64, 17, 24}, T = 4096;
        /* cyclic reduction on its level kernels (one of the paths such n took before the ragged tiles) */
        ssm_ctx *lev = ctx_with([](ssm_cuda_config &c) { c.linrec_cr = 2; });
        if (!lev) return 1;
        printf("== dense recurrence at n %% 8 != 0 (ragged tiles) beside the next multiple of 8, T 4096 (S so that A >= 256 MB)\n");
        for (int di = 0; di < 3; ++di)
            for (int ni = 0; ni < 8; ++ni) {
                const ssm_dtype dt = grid_dtype(di);
                const int64_t n = ns[ni], S = grid_seqs(dt, T, n);
                linrec_rows(ctx, jl, dt, S, T, n, 1, ms, 1);
                if (ni % 2 == 0) linrec_rows(lev, jl, dt, S, T, n, 1, {SSM_LINREC_CR}, 1, "levels");
            }
        /* A sliced off its first column: rows at odd offsets, so off 16-byte boundaries at any n */
        printf("== the same, A a view of [S, T, n, n + 1] without its first column (rows at odd element offsets)\n");
        for (int di = 0; di < 3; ++di)
            for (int64_t n : {64, 128, 127}) {
                const ssm_dtype dt = grid_dtype(di);
                if (di == 1 && n != 64) continue;
                const int64_t S = grid_seqs(dt, T, n);
                linrec_rows(ctx, jl, dt, S, T, n, 1, {SSM_LINREC_CHUNKED, SSM_LINREC_AUTO}, 1, "sliced", 1);
                linrec_rows(lev, jl, dt, S, T, n, 1, {SSM_LINREC_CR}, 1, "sliced-levels", 1);
            }
        fclose(jl), fclose(jd);
        ssm_ctx_destroy(lev), ssm_ctx_destroy(ctx);
        return 0;
    }
    if (argc > 1 && !strcmp(argv[1], "wide")) { /* the tensor-core path on 128 x 128 tiles (n = 72..128) */
        std::vector<ssm_linrec_method> ms = {SSM_LINREC_CR, SSM_LINREC_CHUNKED, SSM_LINREC_AUTO};
        const int64_t ns[4] = {128, 96, 80, 112}, Ts[3] = {1024, 4096, 8192};
        /* cyclic reduction on its level kernels (the method for these n before the 128-wide tiles) */
        ssm_ctx *lev = ctx_with([](ssm_cuda_config &c) { c.linrec_cr = 2; });
        if (!lev) return 1;
        printf("== dense recurrence above n = 64 (S so that A >= 256 MB)\n");
        for (int di = 0; di < 2; ++di)
            for (int ni = 0; ni < 4; ++ni)
                for (int ti = 0; ti < 3; ++ti) {
                    ssm_dtype dt = grid_dtype(di);
                    int64_t n = ns[ni], T = Ts[ti], S = grid_seqs(dt, T, n);
                    if ((di || ni > 1) && ti != 1) continue;
                    if (di && ni) continue;
                    if (getenv("BENCH_WIDE_N") && atoll(getenv("BENCH_WIDE_N")) != n) continue; /* one shape (profiles) */
                    if (getenv("BENCH_WIDE_T") && atoll(getenv("BENCH_WIDE_T")) != T) continue;
                    linrec_rows(ctx, jl, dt, S, T, n, 1, ms, 1);
                    if (ni == 0) linrec_rows(lev, jl, dt, S, T, n, 1, {SSM_LINREC_CR}, 1, "levels");
                }
        fclose(jl), fclose(jd);
        ssm_ctx_destroy(lev), ssm_ctx_destroy(ctx);
        return 0;
    }
    printf("== decay scan\n");
    const int decay_only = argc > 1 && !strcmp(argv[1], "decay"); /* `cuda_bench decay`: this section alone */
    decay_rows(ctx, jd, SSM_F32, 8, 4096, 64);
    decay_rows(ctx, jd, SSM_F32, 2, 1024, 64);
    decay_rows(ctx, jd, SSM_F16, 8, 4096, 64);
    decay_rows(ctx, jd, SSM_BF16, 2, 1024, 64);
    decay_rows(ctx, jd, SSM_F16, 1, 65536, 64); /* long, few columns: the chunked scan */
    decay_rows(ctx, jd, SSM_F32, 1, 65536, 64);
    if (decay_only) {
        fclose(jl), fclose(jd);
        ssm_ctx_destroy(ctx);
        return 0;
    }
    grid_rows(ctx, jl, quick);
    fclose(jl), fclose(jd);
    ssm_ctx_destroy(ctx);
    return 0;
}
