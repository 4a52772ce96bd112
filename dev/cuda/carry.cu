/* Pass 2 of the tensor-core chunked recurrence (ssm_cuda.h's ssm__cu_tc_carry_kernel: X_0 = h_0,
   X_{c+1} = P_c X_c + e_c, one CTA a sequence) side by side with variants, on the chunk maps of
   the grid's rows (f32 W x W maps, W = 64 or 128, written just before as pass 1 writes them,
   then L2 flushed so they come from HBM as after pass 1's stream of A). Outputs are compared
   bit for bit with the first variant's.
     build/dev_carry              every variant on every shape
     build/dev_carry NAME...      the variants whose names contain NAME
   nvcc -O3 -arch=sm_90a -I. -std=c++17 dev/cuda/carry.cu -o build/dev_carry
   Variants:
     regs    the library's kernel before this harness: the next CD maps' row pieces in registers
             (CD = 8 at W = 64, 2 at W = 128), an L2 prefetch 4 CD maps ahead
     ring/K  the maps through a cp.async ring of K maps in shared memory (rows padded by 16
             floats: conflict-free float4 pieces), e_c with them; each carry waits for its map,
             reads its pieces from shared memory and issues the copy of map c + K - 1 */
#define SSM_IMPLEMENTATION /* ssm.h's implementation here: the program links the CUDA one (mk/cuda.mk) */
#include "ssm.h"
#include "bench/cuda_common.h"
#include <stdio.h>
#include <string.h>

template <int W> struct cfg { static constexpr int CD = W == 128 ? 2 : 8, T3 = 4 * W; };

__device__ __forceinline__ unsigned sa(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void cp16(void *dst, const void *src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(sa(dst)), "l"(src));
}
__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void wait_cp() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

/* (P_c x)_row from the pieces j = q mod 4 of the row (pr) and x: pairwise sums, then the row's
   four threads (the library's order) */
template <int Q4> __device__ __forceinline__ float row_dot(const float4 (&pr)[Q4], const float *x, int q) {
    const float4 *x4 = (const float4 *)(x + 4 * q);
    float v4[Q4];
#pragma unroll
    for (int i = 0; i < Q4; ++i) {
        const float4 x = x4[4 * i];
        v4[i] = pr[i].x * x.x + pr[i].y * x.y + pr[i].z * x.z + pr[i].w * x.w;
    }
#pragma unroll
    for (int w = Q4 / 2; w >= 1; w /= 2)
#pragma unroll
        for (int i = 0; i < w; ++i) v4[i] = v4[2 * i] + v4[2 * i + 1];
    float v = v4[0];
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    v += __shfl_xor_sync(0xffffffffu, v, 2);
    return v;
}

/* ---- regs: the library's kernel (h0 as f32 rows here) ---- */
template <int W>
__global__ void __launch_bounds__(cfg<W>::T3) regs_kernel(int64_t nc, int64_t seg, int n, const float *P, const float *E,
                                                          const float *h0, float *X) {
    constexpr int D = cfg<W>::CD, Q4 = W / 16;
    constexpr int64_t WW = (int64_t)W * W;
    __shared__ __align__(16) float xs[2][W];
    const int tid = threadIdx.x, row = tid >> 2, q = tid & 3;
    const int64_t s = blockIdx.x, g = blockIdx.y, c0 = g * seg, np = nc - 1 - c0 < seg ? nc - 1 - c0 : seg;
    const float *Ps = P + (s * (nc - 1) + c0) * WW + row * W + 4 * q;
    const float *Es = E + (s * (nc - 1) + c0) * W + row;
    float *Xs = X + (s * nc + c0) * W;
    float4 pr[D][Q4];
    float er[D];
    auto fetch = [&](int d, int64_t c) {
        const float4 *p4 = (const float4 *)(Ps + c * WW);
#pragma unroll
        for (int i = 0; i < Q4; ++i) pr[d][i] = p4[4 * i];
        er[d] = Es[c * W];
    };
    if (tid < W) {
        float v = tid < n ? h0[s * W + tid] : 0.f;
        xs[0][tid] = v;
        if (g == 0) Xs[tid] = v;
    }
#pragma unroll
    for (int d = 0; d < D; ++d)
        if (d < np) fetch(d, d);
    __syncthreads();
    for (int64_t c0 = 0; c0 < np; c0 += D) {
#pragma unroll
        for (int d = 0; d < D; ++d) {
            const int64_t c = c0 + d;
            if (c < np) {
                const float v = row_dot<Q4>(pr[d], xs[c & 1], q) + er[d];
                if (c + 4 * D < np) asm volatile("prefetch.global.L2 [%0];\n" ::"l"(Ps + (c + 4 * D) * WW));
                if (c + D < np) fetch(d, c + D);
                if (q == 0) {
                    xs[(c + 1) & 1][row] = v;
                    Xs[(c + 1) * W + row] = v;
                }
                __syncthreads();
            }
        }
    }
}

/* ---- ring/K ---- */
template <int W> __host__ __device__ constexpr int ring_ld() { return W + 16; }
template <int W> constexpr size_t ring_smem(int K) { return (size_t)K * (W * ring_ld<W>() + W) * 4; }
template <int W, int K>
__global__ void __launch_bounds__(cfg<W>::T3) ring_kernel(int64_t nc, int64_t seg, int n, const float *P, const float *E,
                                                          const float *h0, float *X) {
    constexpr int Q4 = W / 16, LD = ring_ld<W>(), SLOT = W * LD + W, NT = cfg<W>::T3;
    constexpr int64_t WW = (int64_t)W * W;
    extern __shared__ __align__(16) float ring[]; /* K slots: a map's rows (LD apart), then its e */
    __shared__ __align__(16) float xs[2][W];
    const int tid = threadIdx.x, row = tid >> 2, q = tid & 3;
    const int64_t s = blockIdx.x, g = blockIdx.y, c0 = g * seg, np = nc - 1 - c0 < seg ? nc - 1 - c0 : seg;
    const float *Pg = P + (s * (nc - 1) + c0) * WW, *Eg = E + (s * (nc - 1) + c0) * W;
    float *Xs = X + (s * nc + c0) * W;
    auto issue = [&](int64_t c) { /* map c and e_c into slot c % K (always one group, maybe empty) */
        if (c < np) {
            float *d = ring + (c % K) * SLOT;
            const float *src = Pg + c * WW;
#pragma unroll
            for (int k = 0; k < W * W / 4 / NT; ++k) {
                const int id = tid + NT * k, r = id / (W / 4), c4 = (id % (W / 4)) * 4;
                cp16(d + r * LD + c4, src + r * W + c4);
            }
            if (tid < W / 4) cp16(d + W * LD + 4 * tid, Eg + c * W + 4 * tid);
        }
        commit();
    };
#pragma unroll
    for (int k = 0; k < K - 1; ++k) issue(k);
    if (tid < W) {
        float v = tid < n ? h0[s * W + tid] : 0.f;
        xs[0][tid] = v;
        if (g == 0) Xs[tid] = v;
    }
    for (int64_t c = 0; c < np; ++c) {
        wait_cp<K - 2>(); /* map c landed (this thread's copies) */
        __syncthreads();  /* everyone's copies, x_c, and slot (c - 1) % K free */
        issue(c + K - 1);
        const float *m = ring + (c % K) * SLOT;
        const float4 *p4 = (const float4 *)(m + row * LD + 4 * q);
        float4 pr[Q4];
#pragma unroll
        for (int i = 0; i < Q4; ++i) pr[i] = p4[4 * i];
        const float v = row_dot<Q4>(pr, xs[c & 1], q) + m[W * LD + row];
        if (q == 0) {
            xs[(c + 1) & 1][row] = v;
            Xs[(c + 1) * W + row] = v;
        }
    }
}


__global__ void scale_kernel(float *p, int64_t n, float a) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) p[i] *= a;
}

template <int W> static void run_shape(int argc, char **argv, int64_t S, int64_t nc, int n, void *flush) {
    const int64_t np = S * (nc - 1);
    float *P, *E, *h0, *X, *ref;
    cudaMalloc(&P, np * W * W * 4), cudaMalloc(&E, np * W * 4), cudaMalloc(&h0, S * W * 4);
    cudaMalloc(&X, S * nc * W * 4), cudaMalloc(&ref, S * nc * W * 4);
    fill_kernel<<<4096, 256>>>(P, 0, np * W * W, 1.f, 21u);
    scale_kernel<<<4096, 256>>>(P, np * W * W, 1.5f / W); /* a contraction-ish map: |P x| ~ |x| */
    fill_kernel<<<4096, 256>>>(E, 0, np * W, 1.f, 22u);
    fill_kernel<<<64, 256>>>(h0, 0, S * W, 1.f, 23u);
    printf("## W%d n%d S%lld, %lld chunks a sequence: %lld carries a chain, maps %.1f MB\n", W, n, (long long)S, (long long)nc,
           (long long)(nc - 1), np * W * W * 4 / 1e6);
    int have = 0;
    auto evict = [&] { cudaMemsetAsync(flush, 1, (size_t)256 << 20); }; /* a 256 MB write before each launch: the maps from HBM */
    auto check = [&](const char *name, double ms) {
        double d = 0;
        if (!have) cudaMemcpy(ref, X, S * nc * W * 4, cudaMemcpyDeviceToDevice), have = 1;
        else d = max_rel_diff(X, ref, 0, S * nc * W);
        printf("  %-8s %8.2f us  %6.3f us a carry  max|diff|/max|ref| %.1e\n", name, ms * 1e3, ms * 1e3 / (nc - 1), d);
    };
    cudaMemset(X, 0xff, S * nc * W * 4);
    check("regs", time_ms([&] { regs_kernel<W><<<(unsigned)S, cfg<W>::T3>>>(nc, nc - 1, n, P, E, h0, X); }, evict));
    auto ring = [&](auto kfn, int K) {
        char name[16];
        snprintf(name, sizeof name, "ring/%d", K);
        if (!dev_want(argc, argv, name)) return;
        const size_t sm = ring_smem<W>(K);
        if (cudaFuncSetAttribute(kfn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sm) != cudaSuccess) {
            printf("  %-8s %zu bytes of shared memory: refused\n", name, sm);
            cudaGetLastError();
            return;
        }
        cudaMemset(X, 0xff, S * nc * W * 4);
        check(name, time_ms([&] { kfn<<<(unsigned)S, cfg<W>::T3, sm>>>(nc, nc - 1, n, P, E, h0, X); }, evict));
    };
    if constexpr (W <= 64) {
        ring(ring_kernel<W, 4>, 4);
        ring(ring_kernel<W, 8>, 8);
        ring(ring_kernel<W, 10>, 10);
    } else {
        ring(ring_kernel<W, 2>, 2);
        ring(ring_kernel<W, 3>, 3);
    }
    dev_sync_check();
    cudaFree(P), cudaFree(E), cudaFree(h0), cudaFree(X), cudaFree(ref);
}

int main(int argc, char **argv) {
    cudaDeviceProp pr;
    cudaGetDeviceProperties(&pr, 0);
    void *flush;
    cudaMalloc(&flush, (size_t)256 << 20);
    printf("# dev_carry on %s (%d SMs), maps from HBM (L2 flushed before each launch)\n", pr.name, pr.multiProcessorCount);
    run_shape<64>(argc, argv, 16, 64, 64, flush);  /* S16 T4096 at 64 steps a chunk (the headline row) */
    run_shape<64>(argc, argv, 8, 64, 64, flush);   /* S8 T4096 */
    run_shape<64>(argc, argv, 1, 128, 64, flush);  /* S1 T8192 */
    run_shape<32>(argc, argv, 128, 16, 32, flush); /* S128 T1024 n32 (n <= 32: the 32 x 32 tiles) */
    run_shape<32>(argc, argv, 16, 128, 32, flush); /* S16 T8192 n32 */
    run_shape<128>(argc, argv, 8, 16, 128, flush); /* S8 T1024 n128 */
    run_shape<128>(argc, argv, 1, 128, 128, flush); /* S1 T8192 n128 */
    return 0;
}
