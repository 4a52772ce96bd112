/* Dense-recurrence variants side by side (dev harness for ssm_cuda.h's recurrence kernels):
   every method, the tensor-core chunked path at several chunk lengths, with and without the
   hi/lo split of the running product (ssm_cuda_config.linrec_tc_split), its chunk products on
   wgmma (the sm_90a default) and on mma.sync (linrec_tc_prod = 1), forward and backward;
   floor = A read once + b read + h written, over the D2D copy bandwidth of this run. Also the
   relative difference of each result against cyclic reduction on the same inputs.
     build/dev_linrec_variants          the default rows
     build/dev_linrec_variants full     + scan_hs and seq
     build/dev_linrec_variants prof     one forward + backward of the first variant (for ncu)
     build/dev_linrec_variants prof32   the same of auto at S32 T4096 n32 f16 (the padded n < 64 path)
     build/dev_linrec_variants chunks   chunk lengths 16..128 and auto, f32 and f16, n = 16 / 32 / 64
                                        (CHUNKS_N=n: one n)
   nvcc -O3 -arch=sm_90 -I. -std=c++17 dev/cuda/linrec_variants.cu tests/cuda_impl.cu -lcublas \
     -o build/dev_linrec_variants   (or make build/dev_linrec_variants) */
#define SSM_IMPLEMENTATION
#include "ssm_cuda.h"
#include "bench/cuda_common.h"
#include <string.h>
#include <algorithm>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <vector>

static double g_bw;
static int g_prof;
static std::vector<float> to_host(const void *p, ssm_dtype dt, int64_t n) {
    std::vector<float> o((size_t)n);
    if (dt.bits == 32) {
        cudaMemcpy(o.data(), p, (size_t)n * 4, cudaMemcpyDeviceToHost);
        return o;
    }
    std::vector<unsigned short> u((size_t)n);
    cudaMemcpy(u.data(), p, (size_t)n * 2, cudaMemcpyDeviceToHost);
    for (int64_t i = 0; i < n; ++i) {
        unsigned v = (unsigned)u[i];
        if (dt.code == SSM_DTYPE_BFLOAT) { unsigned w = v << 16; memcpy(&o[i], &w, 4); }
        else { __half_raw r; r.x = (unsigned short)v; o[i] = __half2float(__half(r)); }
    }
    return o;
}
static double rel(const std::vector<float> &a, const std::vector<float> &b) {
    double num = 0, den = 0;
    for (size_t i = 0; i < a.size(); ++i) num += (double)(a[i] - b[i]) * (a[i] - b[i]), den += (double)b[i] * b[i];
    return sqrt(num / (den > 0 ? den : 1));
}

/* split: ssm_cuda_config.linrec_tc_split (0 by dtype, 1 off, 2 on); prod: linrec_tc_prod (0 by
   device, 1 mma.sync, 2 wgmma) */
struct variant { const char *name; ssm_linrec_method m; int64_t chunk; int split; int prod; };

static void rows(ssm_ctx *ctx, ssm_dtype dt, int64_t S, int64_t T, int64_t n, const std::vector<variant> &vs, int bwd) {
    int64_t sa[4] = {S, T, n, n}, sb[4] = {S, T, n, 1};
    void *A = dev_random(dt, S * T * n * n, 0.9f / sqrtf((float)n), 1), *b = dev_random(dt, S * T * n, 1.f, 2);
    void *h = dev_random(dt, S * T * n, 0.f, 3), *dh = dev_random(dt, S * T * n, 1.f, 4);
    void *dA = dev_random(dt, S * T * n * n, 0.f, 5), *db = dev_random(dt, S * T * n, 0.f, 6);
    ssm_tensor tA = ssm_tensor_make(A, dt, ssm_cuda_device(0), 4, sa, NULL), tb = ssm_tensor_make(b, dt, ssm_cuda_device(0), 4, sb, NULL);
    ssm_tensor th = ssm_tensor_make(h, dt, ssm_cuda_device(0), 4, sb, NULL), tdh = ssm_tensor_make(dh, dt, ssm_cuda_device(0), 4, sb, NULL);
    ssm_tensor tdA = ssm_tensor_make(dA, dt, ssm_cuda_device(0), 4, sa, NULL), tdb = ssm_tensor_make(db, dt, ssm_cuda_device(0), 4, sb, NULL);
    double es = dt.bits / 8, floor_ms = es * (S * T * n * n + 2.0 * S * T * n) / g_bw;
    double bfloor = es * (2.0 * S * T * n * n + 3.0 * S * T * n) / g_bw;
    std::vector<float> refh, refdb;
    if (g_prof) { /* one forward + one backward of the first variant, for ncu */
        ssm_linrec_desc d = ssm_linrec_desc_init();
        d.method = vs[0].m, d.chunk = vs[0].chunk;
        ssm_linrec_forward(ctx, &d, &tA, &tb, NULL, &th, NULL);
        ssm_linrec_backward(ctx, &d, &tA, NULL, &th, &tdh, NULL, &tdA, &tdb, NULL);
        cudaDeviceSynchronize();
        return;
    }
    { /* reference: cyclic reduction */
        ssm_linrec_desc d = ssm_linrec_desc_init();
        d.method = SSM_LINREC_CR;
        ssm_linrec_forward(ctx, &d, &tA, &tb, NULL, &th, NULL);
        refh = to_host(h, dt, S * T * n);
        if (bwd) ssm_linrec_backward(ctx, &d, &tA, NULL, &th, &tdh, NULL, &tdA, &tdb, NULL), refdb = to_host(db, dt, S * T * n);
    }
    printf("-- %s S%lld T%lld n%lld m1: floor fwd %.3f ms (A once), bwd %.3f ms\n", ssm_dtype_name(dt), (long long)S,
           (long long)T, (long long)n, floor_ms, bfloor);
    for (const variant &v : vs) {
        ssm_linrec_desc d = ssm_linrec_desc_init();
        ssm_linrec_stats st;
        ssm_ctx *base = ctx, *vctx = ctx;
        if (v.split || v.prod)
            vctx = ctx_with([&](ssm_cuda_config &c) { c.linrec_tc_split = v.split, c.linrec_tc_prod = v.prod; });
        d.method = v.m, d.chunk = v.chunk, d.stats = &st;
        ctx = vctx;
        cudaMemset(h, 0xff, S * T * n * es);
        ssm_result r = ssm_linrec_forward(ctx, &d, &tA, &tb, NULL, &th, NULL);
        cudaError_t ce = cudaDeviceSynchronize();
        if (r != SSM_OK || ce != cudaSuccess) {
            printf("  %-14s FAILED %s %s\n", v.name, ssm_ctx_last_error(ctx), cudaGetErrorString(ce));
            if (vctx != base) ssm_ctx_destroy(vctx);
            ctx = base;
            continue;
        }
        double e = rel(to_host(h, dt, S * T * n), refh);
        double ms = time_ms([&] { ssm_linrec_forward(ctx, &d, &tA, &tb, NULL, &th, NULL); }, v.m == SSM_LINREC_SEQUENTIAL || v.m == SSM_LINREC_SCAN_HS ? 3 : 20, 20.0);
        printf("  %-14s fwd %8.3f ms  x%6.2f floor  (-> %s)  relerr vs cr %.2e", v.name, ms, ms / floor_ms, ssm_linrec_method_name(st.method), e);
        if (bwd) {
            cudaMemset(db, 0xff, S * T * n * es);
            ssm_linrec_backward(ctx, &d, &tA, NULL, &th, &tdh, NULL, &tdA, &tdb, NULL);
            cudaDeviceSynchronize();
            double eb = rel(to_host(db, dt, S * T * n), refdb);
            double bms = time_ms([&] { ssm_linrec_backward(ctx, &d, &tA, NULL, &th, &tdh, NULL, &tdA, &tdb, NULL); }, v.m == SSM_LINREC_SEQUENTIAL || v.m == SSM_LINREC_SCAN_HS ? 3 : 10, 20.0);
            printf("  | bwd %8.3f ms  x%6.2f floor  bwd/fwd %.2f  db relerr %.2e", bms, bms / bfloor, bms / ms, eb);
        }
        printf("\n");
        fflush(stdout);
        if (vctx != base) ssm_ctx_destroy(vctx);
        ctx = base;
    }
    cudaFree(A), cudaFree(b), cudaFree(h), cudaFree(dh), cudaFree(dA), cudaFree(db);
}

int main(int argc, char **argv) {
    cudaDeviceProp prop;
    ssm_ctx *ctx;
    ssm_ctx_config cfg = ssm_ctx_config_init();
    ssm_cuda_config cc = ssm_cuda_config_init();
    int full = argc > 1 && !strcmp(argv[1], "full");
    g_prof = argc > 1 && (!strcmp(argv[1], "prof") || !strcmp(argv[1], "prof32"));
    if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) { printf("no CUDA device\n"); return 1; }
    cfg.backend = ssm_cuda_backend();
    cfg.backend_config = &cc;
    if (ssm_ctx_create(&cfg, &ctx) != SSM_OK) return 1;
    g_bw = copy_bandwidth(20, 20.0);
    printf("device %s, copy bandwidth %.0f GB/s\n", prop.name, g_bw * 1e-6);
    std::vector<variant> big = {
        {"chunked_tc64", SSM_LINREC_CHUNKED, 64, 0, 0}, {"tc64_mma", SSM_LINREC_CHUNKED, 64, 0, 1},
        {"chunked_tc32", SSM_LINREC_CHUNKED, 32, 0, 0}, {"tc32_mma", SSM_LINREC_CHUNKED, 32, 0, 1},
        {"chunked_tc128", SSM_LINREC_CHUNKED, 128, 0, 0}, {"tc64_split", SSM_LINREC_CHUNKED, 64, 2, 0},
        {"tc64_split_mma", SSM_LINREC_CHUNKED, 64, 2, 1}, {"tc64_nosplit", SSM_LINREC_CHUNKED, 64, 1, 0},
        {"auto", SSM_LINREC_AUTO, 0, 0, 0}, {"cr", SSM_LINREC_CR, 0, 0, 0}, {"cr_mma", SSM_LINREC_CR, 0, 0, 1},
        {"blelloch", SSM_LINREC_BLELLOCH, 0, 0, 0}};
    if (full) big.push_back({"scan_hs", SSM_LINREC_SCAN_HS, 0, 0, 0}), big.push_back({"seq", SSM_LINREC_SEQUENTIAL, 0, 0, 0});
    if (!strcmp(argc > 1 ? argv[1] : "", "chunks")) { /* the chunk length on the tensor-core path, f32 and f16, S so that A >= 256 MB */
        std::vector<variant> cs;
        static char names[8][16];
        const int64_t lens[8] = {16, 24, 32, 48, 64, 96, 128, 0};
        for (int i = 0; i < 8; ++i) {
            snprintf(names[i], sizeof names[i], lens[i] ? "chunk%lld" : "auto", (long long)lens[i]);
            cs.push_back({names[i], lens[i] ? SSM_LINREC_CHUNKED : SSM_LINREC_AUTO, lens[i], 0, 0});
        }
        const struct { ssm_dtype dt; int64_t T, n; } sh[] = {
            {SSM_F32, 1024, 64}, {SSM_F32, 4096, 64}, {SSM_F32, 1024, 32}, {SSM_F32, 4096, 32}, {SSM_F32, 4096, 16},
            {SSM_F16, 1024, 32}, {SSM_F16, 4096, 32}, {SSM_F16, 1024, 64}, {SSM_F16, 4096, 64}, {SSM_F16, 1024, 16}};
        const char *only = getenv("CHUNKS_N");
        for (const auto &x : sh) {
            const int64_t S = grid_seqs(x.dt, x.T, x.n);
            if (only && atoll(only) != x.n) continue;
            rows(ctx, x.dt, S, x.T, x.n, cs, 1);
        }
        rows(ctx, SSM_F16, 16, 4096, 64, cs, 1); /* the target row */
        return 0;
    }
    if (!strcmp(argc > 1 ? argv[1] : "", "prof32")) {
        rows(ctx, SSM_F16, 32, 4096, 32, {{"auto", SSM_LINREC_AUTO, 0, 0, 0}}, 1);
        return 0;
    }
    rows(ctx, SSM_F16, 16, 4096, 64, big, 1);
    std::vector<variant> lat = {{"chunked_tc64", SSM_LINREC_CHUNKED, 64, 0, 0}, {"tc64_mma", SSM_LINREC_CHUNKED, 64, 0, 1},
                                {"chunked_tc32", SSM_LINREC_CHUNKED, 32, 0, 0}, {"chunked_tc16", SSM_LINREC_CHUNKED, 16, 0, 0},
                                {"auto", SSM_LINREC_AUTO, 0, 0, 0}, {"cr", SSM_LINREC_CR, 0, 0, 0}};
    if (g_prof) return 0;
    if (full) lat.push_back({"seq", SSM_LINREC_SEQUENTIAL, 0, 0, 0});
    rows(ctx, SSM_F16, 1, 8192, 64, lat, 1);
    std::vector<variant> bf = {{"chunked_tc64", SSM_LINREC_CHUNKED, 64, 0, 0}, {"tc64_mma", SSM_LINREC_CHUNKED, 64, 0, 1},
                               {"auto", SSM_LINREC_AUTO, 0, 0, 0}};
    rows(ctx, SSM_BF16, 16, 4096, 64, bf, 1);
    ssm_ctx_destroy(ctx);
    return 0;
}
