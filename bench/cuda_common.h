/* Shared by the CUDA benchmark programs: event-timed medians and random device inputs. */
#ifndef SSM_CUDA_BENCH_COMMON_H
#define SSM_CUDA_BENCH_COMMON_H
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <algorithm>
#include <stdio.h>
#include <string.h>
#include <vector>

/* Median of `reps` event-timed calls after two warm-ups; stops after three calls when one
   takes longer than long_ms (the 3-repeat rule for slow rows). `before` runs ahead of each call,
   outside the timed span (e.g. a write that evicts the inputs from L2). */
template <typename F, typename B> static double time_ms(F f, B before, int reps = 10, double long_ms = 1000.0) {
    cudaEvent_t a, b;
    std::vector<float> v;
    cudaEventCreate(&a), cudaEventCreate(&b);
    before(), f(), before(), f();
    cudaDeviceSynchronize();
    for (int i = 0; i < reps; ++i) {
        before();
        cudaEventRecord(a);
        f();
        cudaEventRecord(b);
        cudaEventSynchronize(b);
        float ms;
        cudaEventElapsedTime(&ms, a, b);
        v.push_back(ms);
        if (i == 2 && ms > long_ms) break;
    }
    std::sort(v.begin(), v.end());
    cudaEventDestroy(a), cudaEventDestroy(b);
    return v[v.size() / 2];
}
template <typename F> static double time_ms(F f, int reps = 10, double long_ms = 1000.0) {
    return time_ms(f, [] {}, reps, long_ms);
}

/* Copy bandwidth in bytes per ms: a 1 GiB device-to-device copy, bytes read + written,
   timed as time_ms(reps, long_ms). The floor column of every CUDA benchmark divides by it. */
static inline double copy_bandwidth(int reps = 10, double long_ms = 1000.0) {
    size_t nb = (size_t)1 << 30;
    void *a, *b;
    cudaMalloc(&a, nb), cudaMalloc(&b, nb);
    cudaMemset(a, 1, nb);
    double ms = time_ms([&] { cudaMemcpyAsync(b, a, nb, cudaMemcpyDeviceToDevice); }, reps, long_ms);
    cudaFree(a), cudaFree(b);
    return 2.0 * (double)nb / ms;
}

/* dt: 0 f32, 1 f16, 2 bf16. Hash-based uniform values in [-scale, scale] (never zeros). */
__global__ void fill_kernel(void *p, int dt, int64_t n, float scale, unsigned seed) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        unsigned x = (unsigned)(i * 2654435761u) ^ seed;
        x ^= x >> 13, x *= 0x5bd1e995u, x ^= x >> 15;
        float v = ((x & 0xFFFFFF) / 16777216.f - 0.5f) * 2.f * scale;
        if (dt == 0) ((float *)p)[i] = v;
        else if (dt == 1) ((__half *)p)[i] = __float2half(v);
        else ((__nv_bfloat16 *)p)[i] = __float2bfloat16(v);
    }
}
static int dtc(ssm_dtype dt) { return dt.bits == 32 ? 0 : (dt.code == SSM_DTYPE_BFLOAT ? 2 : 1); }
static inline void *dev_random(ssm_dtype dt, int64_t n, float scale, unsigned seed) {
    void *p = NULL;
    if (cudaMalloc(&p, (size_t)n * dt.bits / 8) != cudaSuccess) return NULL;
    fill_kernel<<<4096, 256>>>(p, dtc(dt), n, scale, seed);
    return p;
}

/* The linrec grids' sequence count: the fewest S whose A (S T n^2 elements) holds >= 256 MB. */
static inline int64_t grid_seqs(ssm_dtype dt, int64_t T, int64_t n) {
    const int64_t per = T * n * n * (dt.bits / 8);
    return ((256ll << 20) + per - 1) / per;
}

#ifdef SSM_CUDA_H_INCLUDED
/* A context on the CUDA backend with the default knobs as `set` changes them (a variant's rows
   beside the default's). */
template <class F> static ssm_ctx *ctx_with(F set) {
    ssm_ctx_config cfg = ssm_ctx_config_init();
    ssm_cuda_config c = ssm_cuda_config_init();
    ssm_ctx *x = NULL;
    if (getenv("BENCH_LINREC_MAT")) c.linrec_mat = atoi(getenv("BENCH_LINREC_MAT")); /* A/B runs: 1 = CUDA cores */
    set(c);
    cfg.backend = ssm_cuda_backend();
    cfg.backend_config = &c;
    return ssm_ctx_create(&cfg, &x) == SSM_OK ? x : NULL;
}
#endif
/* max |a - b| / max |b| over n elements of type dt, on the GPU (NaN counts as huge): the dev
   harnesses' check of a variant against its reference */
__global__ void max_diff_kernel(const void *a, const void *b, int dt, int64_t n, float *mx) {
    float d = 0.f, m = 0.f;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        float x, y;
        if (dt == 0) x = ((const float *)a)[i], y = ((const float *)b)[i];
        else if (dt == 1) x = __half2float(((const __half *)a)[i]), y = __half2float(((const __half *)b)[i]);
        else x = __bfloat162float(((const __nv_bfloat16 *)a)[i]), y = __bfloat162float(((const __nv_bfloat16 *)b)[i]);
        float e = fabsf(x - y);
        if (x != x && y != y) e = 0.f; /* NaN in both (e.g. the same poison left unwritten) */
        if (!(e <= 1e30f)) e = 1e30f; /* NaN in one -> huge */
        d = fmaxf(d, e), m = fmaxf(m, y == y ? fabsf(y) : 0.f);
    }
    atomicMax((int *)mx, __float_as_int(d));
    atomicMax((int *)mx + 1, __float_as_int(m));
}
static inline double max_rel_diff(const void *a, const void *b, int dt, int64_t n) { /* dt as fill_kernel's */
    float *m, h[2];
    cudaMalloc(&m, 8), cudaMemset(m, 0, 8);
    max_diff_kernel<<<1024, 256>>>(a, b, dt, n, m);
    cudaMemcpy(h, m, 8, cudaMemcpyDeviceToHost);
    cudaFree(m);
    return h[0] / (h[1] > 0 ? h[1] : 1);
}
static inline double max_rel_diff(const void *a, const void *b, ssm_dtype dt, int64_t n) { return max_rel_diff(a, b, dtc(dt), n); }

/* The dev harnesses' variant filter: no arguments = every variant, else those whose names
   contain one of the arguments */
static inline int dev_want(int argc, char **argv, const char *name) {
    if (argc < 2) return 1;
    for (int i = 1; i < argc; ++i)
        if (strstr(name, argv[i])) return 1;
    return 0;
}
/* After a harness's shape: a pending CUDA error, said once */
static inline void dev_sync_check() {
    const cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) printf("CUDA error: %s\n", cudaGetErrorString(e));
}

/* The dev harnesses' copies of ssm_cuda.h's kernels address operands as the backend does: a batch
   of matrices (ssm__cu_op) and elements of type dt (0 f32, 1 f16, 2 bf16) read and written as floats */
struct dev_op {
    void *p;
    int dt;
    int64_t rs, cs, bs, ss;
};
__device__ __forceinline__ float dev_ld(const void *p, int dt, int64_t i) {
    if (dt == 0) return ((const float *)p)[i];
    if (dt == 1) return __half2float(((const __half *)p)[i]);
    return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
}
__device__ __forceinline__ void dev_st(void *p, int dt, int64_t i, float v) {
    if (dt == 0) ((float *)p)[i] = v;
    else if (dt == 1) ((__half *)p)[i] = __float2half_rn(v);
    else ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn(v);
}

#endif
