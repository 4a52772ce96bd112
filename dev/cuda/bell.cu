/* Dev harness for the block-ELL kernels of ssm_cuda.h (llm.c style): tile-shape variants of
   the forward gather-GEMM in bf16 or f32 (3xTF32), each checked against an f64 CPU reference
   and timed on a large shape beside the library's default and dense cuBLAS.
     make build/dev_bell   (a link to build/dev_whole: dev/cuda/whole.cu compiles this harness with
                            delta.cu and proj_wgmma.cu, the implementation once; ./build/dev_whole bell
                            [variant] runs the same) or alone:
     nvcc -O3 -arch=sm_90 -std=c++17 -I. dev/cuda/bell.cu -lcublas -o build/dev_bell
     ./build/dev_bell [variant [bf16|f32]] | prof B
       variants: default e1s2 e1s3 e1s4 e2s2 e2s3 e4s2 nw8e1s2 nw8e1s3 nw8e2s2 all (default: all, bf16);
       eE sS: E input blocks a stage, S stages; nw8: 8 warps (256 tokens a CTA); a variant whose
       ring does not fit in shared memory is skipped */
#define SSM_IMPLEMENTATION
#define SSM_CUDA_IMPLEMENTATION
#include "../../ssm_cuda.h"
#include "../../bench/cuda_common.h"
#include <stdio.h>
#include <string.h>
#include <vector>

namespace dev_bell { /* one namespace a harness: dev/cuda/whole.cu compiles three together */

typedef cudaError_t (*mm_fn)(cudaStream_t, int64_t, int, int, int, int, ssm__bl_mat, ssm__bl_vals, const int *,
                             const int *, const int *, ssm__bl_mat, ssm__bl_mat, int);
template <int MT, int B, int NW, int NST, int EPS> static mm_fn shape() {
    if constexpr (ssm__bl_mm_smem<MT, B, NW, NST, EPS, 0>() <= 227u * 1024) return ssm__bl_mm_launch<MT, B, NW, NST, EPS, 0, 1>;
    else return NULL;
}
template <int MT, int B> static mm_fn variant(const char *name) {
    if (!strcmp(name, "default")) return ssm__bl_mm_go<MT, B, 0, 1>;
    if (!strcmp(name, "e1s2")) return shape<MT, B, 4, 2, 1>();
    if (!strcmp(name, "e1s3")) return shape<MT, B, 4, 3, 1>();
    if (!strcmp(name, "e1s4")) return shape<MT, B, 4, 4, 1>();
    if (!strcmp(name, "e2s2")) return shape<MT, B, 4, 2, 2>();
    if (!strcmp(name, "e2s3")) return shape<MT, B, 4, 3, 2>();
    if (!strcmp(name, "e4s2")) return shape<MT, B, 4, 2, 4>();
    if (!strcmp(name, "nw8e1s2")) return shape<MT, B, 8, 2, 1>();
    if (!strcmp(name, "nw8e1s3")) return shape<MT, B, 8, 3, 1>();
    if (!strcmp(name, "nw8e2s2")) return shape<MT, B, 8, 2, 2>();
    return NULL;
}
template <int MT> static mm_fn variant_b(int B, const char *name) {
    return B == 16 ? variant<MT, 16>(name) : B == 32 ? variant<MT, 32>(name) : variant<MT, 64>(name);
}

struct layer {
    ssm_dtype dt;
    int64_t N, in, out, B, R, C, K;
    std::vector<int32_t> ci;
    int *dci, *tab, *list, *count;
    void *x, *v, *y;
};
static void layer_make(layer &L, ssm_dtype dt, int64_t N, int64_t in, int64_t out, int64_t B, double dens, unsigned seed) {
    L.dt = dt, L.N = N, L.in = in, L.out = out, L.B = B, L.R = out / B, L.C = in / B, L.K = (int64_t)(dens * L.C + 0.5);
    L.ci.resize((size_t)(L.R * L.K));
    srand(seed);
    for (int64_t r = 0; r < L.R; ++r) {
        std::vector<int32_t> p((size_t)L.C);
        for (int64_t q = 0; q < L.C; ++q) p[(size_t)q] = (int32_t)q;
        for (int64_t q = L.C - 1; q > 0; --q) std::swap(p[(size_t)q], p[(size_t)(rand() % (q + 1))]);
        for (int64_t k = 0; k < L.K; ++k) L.ci[(size_t)(r * L.K + k)] = p[(size_t)k];
    }
    const int G = SSM__BL_BN / (int)B, ngr = (int)((L.R + G - 1) / G);
    cudaMalloc(&L.dci, L.ci.size() * 4);
    cudaMemcpy(L.dci, L.ci.data(), L.ci.size() * 4, cudaMemcpyHostToDevice);
    cudaMalloc(&L.tab, (size_t)ngr * L.C * G * 4), cudaMalloc(&L.list, (size_t)ngr * L.C * 4), cudaMalloc(&L.count, ngr * 4);
    ssm_bell_plan p;
    memset(&p, 0, sizeof p);
    p.N = N, p.R = L.R, p.K = L.K, p.B = B, p.C = L.C;
    int64_t sci[2] = {L.R, L.K};
    ssm_tensor tci = ssm_tensor_make(L.dci, SSM_I32, ssm_cuda_device(0), 2, sci, NULL);
    ssm__bl_tables(0, &p, 0, &tci, NULL, NULL, L.tab, (size_t)ngr * L.C * G * 4, L.list, L.count, NULL);
    L.x = dev_random(dt, N * in, 1.f, seed + 1), L.v = dev_random(dt, L.R * L.K * B * B, 0.1f, seed + 2);
    L.y = dev_random(dt, N * out, 0.f, seed + 3);
}
static void layer_free(layer &L) {
    cudaFree(L.dci), cudaFree(L.tab), cudaFree(L.list), cudaFree(L.count), cudaFree(L.x), cudaFree(L.v), cudaFree(L.y);
}
static cudaError_t run(mm_fn f, layer &L) {
    const int G = SSM__BL_BN / (int)L.B, ngr = (int)((L.R + G - 1) / G);
    ssm__bl_mat in = {L.x, L.in, 1}, none = {NULL, 0, 0}, out = {L.y, L.out, 1};
    ssm__bl_vals w = {L.v, L.K * L.B * L.B, L.B * L.B, L.B, 1};
    return f(0, L.N, (int)L.C, (int)L.K, (int)L.R, ngr, in, w, L.tab, L.list, L.count, none, out, 1);
}
static std::vector<float> dl(const void *p, int64_t n, ssm_dtype dt) {
    std::vector<float> f((size_t)n);
    if (dt.bits == 32) {
        cudaMemcpy(f.data(), p, (size_t)n * 4, cudaMemcpyDeviceToHost);
        return f;
    }
    std::vector<__nv_bfloat16> h((size_t)n);
    cudaMemcpy(h.data(), p, (size_t)n * 2, cudaMemcpyDeviceToHost);
    for (int64_t i = 0; i < n; ++i) f[(size_t)i] = __bfloat162float(h[(size_t)i]);
    return f;
}
static double check(mm_fn f, ssm_dtype dt, int64_t B) {
    layer L;
    layer_make(L, dt, 1031, 640, 2560, B, 0.5, 7);
    run(f, L);
    cudaDeviceSynchronize();
    std::vector<float> x = dl(L.x, L.N * L.in, dt), v = dl(L.v, L.R * L.K * B * B, dt), y = dl(L.y, L.N * L.out, dt);
    double num = 0, den = 0;
    for (int64_t n = 0; n < L.N; ++n)
        for (int64_t r = 0; r < L.R; ++r)
            for (int64_t i = 0; i < B; ++i) {
                double s = 0;
                for (int64_t k = 0; k < L.K; ++k) {
                    const int64_t c = L.ci[(size_t)(r * L.K + k)];
                    for (int64_t j = 0; j < B; ++j)
                        s += (double)x[(size_t)(n * L.in + c * B + j)] * v[(size_t)(((r * L.K + k) * B + i) * B + j)];
                }
                const double g = y[(size_t)(n * L.out + r * B + i)];
                num += (g - s) * (g - s), den += s * s;
            }
    layer_free(L);
    return sqrt(num / den);
}

/* "prof B": one library forward and backward (dx, dvalues) at 2048 -> 8192, N = 32768, bf16,
   50% density: the launches to profile under ncu. */
static int prof(int64_t B) {
    layer L;
    layer_make(L, SSM_BF16, 32768, 2048, 8192, B, 0.5, 3);
    ssm_ctx *cu = NULL, *host = NULL;
    ssm_ctx_config cfg = ssm_ctx_config_init();
    ssm_cuda_config cc = ssm_cuda_config_init();
    ssm_ctx_create(&cfg, &host);
    cfg.backend = ssm_cuda_backend(), cfg.backend_config = &cc;
    ssm_ctx_create(&cfg, &cu);
    std::vector<int32_t> toff((size_t)L.C + 1), tsl(L.ci.size());
    int64_t sci[2] = {L.R, L.K}, sto = L.C + 1, sts = L.R * L.K, sv[4] = {L.R, L.K, B, B}, sx[2] = {L.N, L.in},
            sy[2] = {L.N, L.out};
    ssm_tensor hci = ssm_tensor_make(L.ci.data(), SSM_I32, ssm_cpu(), 2, sci, NULL);
    ssm_tensor hto = ssm_tensor_make(toff.data(), SSM_I32, ssm_cpu(), 1, &sto, NULL);
    ssm_tensor hts = ssm_tensor_make(tsl.data(), SSM_I32, ssm_cpu(), 1, &sts, NULL);
    ssm_bell_transpose_index(host, &hci, &hto, &hts);
    int *dto, *dts;
    cudaMalloc(&dto, toff.size() * 4), cudaMalloc(&dts, tsl.size() * 4);
    cudaMemcpy(dto, toff.data(), toff.size() * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(dts, tsl.data(), tsl.size() * 4, cudaMemcpyHostToDevice);
    void *dy = dev_random(SSM_BF16, L.N * L.out, 1.f, 5), *dx = dev_random(SSM_BF16, L.N * L.in, 0.f, 6);
    void *dv = dev_random(SSM_BF16, L.R * L.K * B * B, 0.f, 7);
    ssm_device d0 = ssm_cuda_device(0);
    ssm_tensor tx = ssm_tensor_make(L.x, SSM_BF16, d0, 2, sx, NULL), tv = ssm_tensor_make(L.v, SSM_BF16, d0, 4, sv, NULL);
    ssm_tensor ty = ssm_tensor_make(L.y, SSM_BF16, d0, 2, sy, NULL), tdy = ssm_tensor_make(dy, SSM_BF16, d0, 2, sy, NULL);
    ssm_tensor tdx = ssm_tensor_make(dx, SSM_BF16, d0, 2, sx, NULL), tdv = ssm_tensor_make(dv, SSM_BF16, d0, 4, sv, NULL);
    ssm_tensor tci = ssm_tensor_make(L.dci, SSM_I32, d0, 2, sci, NULL), tto = ssm_tensor_make(dto, SSM_I32, d0, 1, &sto, NULL);
    ssm_tensor tts = ssm_tensor_make(dts, SSM_I32, d0, 1, &sts, NULL);
    ssm_result r = ssm_bell_forward(cu, &tx, &tv, &tci, NULL, &ty);
    if (r == SSM_OK) r = ssm_bell_backward(cu, &tx, &tv, &tci, &tto, &tts, &tdy, &tdx, &tdv, NULL);
    cudaDeviceSynchronize();
    printf("prof B%lld: %s\n", (long long)B, r == SSM_OK ? "ok" : ssm_ctx_last_error(cu));
    ssm_ctx_destroy(cu), ssm_ctx_destroy(host);
    return 0;
}

static int harness(int argc, char **argv) {
    const char *names[] = {"default", "e1s2", "e1s3", "e1s4", "e2s2", "e2s3", "e4s2", "nw8e1s2", "nw8e1s3", "nw8e2s2"};
    const char *want = argc > 1 ? argv[1] : "all";
    if (!strcmp(want, "prof")) return prof(argc > 2 ? atoll(argv[2]) : 16);
    const int f32 = argc > 2 && !strcmp(argv[2], "f32");
    const ssm_dtype dt = f32 ? SSM_F32 : SSM_BF16;
    const cudaDataType_t ct = f32 ? CUDA_R_32F : CUDA_R_16BF;
    cublasHandle_t h;
    cublasCreate(&h);
    static const int64_t shapes[2][3] = {{32768, 2048, 8192}, {8192, 4096, 4096}};
    for (int64_t B : {16, 32, 64})
        for (int si = 0; si < 2; ++si) {
            layer L;
            const int64_t N = shapes[si][0], in = shapes[si][1], out = shapes[si][2];
            layer_make(L, dt, N, in, out, B, 0.5, 3);
            void *Wd = dev_random(dt, in * out, 0.1f, 9);
            const float one = 1.f, zero = 0.f;
            double dms = time_ms([&] {
                cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)out, (int)N, (int)in, &one, Wd, ct, (int)in, L.x, ct, (int)in,
                             &zero, L.y, ct, (int)out, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
            });
            const double useful = 2.0 * N * in * out * (double)L.K / L.C;
            printf("B%-3lld N%lld %lld->%lld %s d0.5: cuBLAS dense %.3f ms (%.0f TFLOP/s dense)\n", (long long)B,
                   (long long)N, (long long)in, (long long)out, f32 ? "f32 (3xTF32; cuBLAS SGEMM)" : "bf16", dms,
                   2.0 * N * in * out / dms / 1e9);
            for (const char *nm : names) {
                if (strcmp(want, "all") && strcmp(want, nm)) continue;
                mm_fn f = f32 ? variant_b<3>((int)B, nm) : variant_b<1>((int)B, nm);
                if (!f) continue;
                double err = si == 0 ? check(f, dt, B) : -1;
                cudaError_t e = run(f, L);
                if (e != cudaSuccess) {
                    printf("  %-8s %s\n", nm, cudaGetErrorString(e));
                    continue;
                }
                double ms = time_ms([&] { run(f, L); });
                printf("  %-8s %8.3f ms  %6.0f TFLOP/s useful  %.2fx dense  relerr %.2e\n", nm, ms, useful / ms / 1e9, dms / ms, err);
            }
            cudaFree(Wd);
            layer_free(L);
        }
    cublasDestroy(h);
    return 0;
}
} // namespace dev_bell

#ifndef SSM_DEV_WHOLE /* alone: nvcc ... dev/cuda/bell.cu */
int main(int argc, char **argv) { return dev_bell::harness(argc, argv); }
#endif
