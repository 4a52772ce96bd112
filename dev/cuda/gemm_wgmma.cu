/* Dev harness: a Hopper (sm_90a) GEMM for the projection path (issue #11), y = x W^T, checked
   against and timed beside cuBLAS (llm.c style: variants picked by argv).
     nvcc -O3 -std=c++17 -I. -Xcompiler -Wall -gencode arch=compute_90a,code=sm_90a \
          dev/cuda/gemm_wgmma.cu -lcublas -o build/dev_gemm_wgmma     (make build/dev_gemm_wgmma)
     ./build/dev_gemm_wgmma                        the whole table (every variant and shape)
     ./build/dev_gemm_wgmma VARIANT M N K DTYPE [EPI]   one row; DTYPE bf16 | f16; EPI 0 | 1
   x [M, K] row-major (K contiguous), W [N, K] row-major (the nn.Linear layout, "TN"), y [M, N]
   row-major (ldy = N), bf16 / f16 in and out, f32 accumulation. (q128 with the library's whole
   epilogue in accurate f32 math, as ssm_cuda.h's proj_kernel = 3: dev/cuda/proj_wgmma.patch.) Requires K % 8 == 0 (TMA row
   pitch a multiple of 16 bytes) and N even; M and N need not be multiples of the tile (TMA
   zero-fills out-of-bounds loads, the epilogue masks its stores).

   Kernel (every variant): 3 warpgroups, 384 threads. Warpgroup 0 is the producer (setmaxnreg
   down to 40; one thread issues TMA loads of x and W tiles, 64-wide K slices in the 128-byte
   swizzle, into a ring of ST shared-memory stages, each guarded by a "full" mbarrier with the
   byte count and an "empty" mbarrier that the 8 consumer warps arrive on). Warpgroups 1 and 2
   are consumers (setmaxnreg up to 232): each owns 64 rows of the 128-row tile and issues
   wgmma.mma_async m64nBNk16 (A and B from shared memory by descriptor) four times per stage,
   keeps one wgmma group in flight (wait_group 1) and frees a stage when the group that read it
   has completed. Epilogue straight from the f32 accumulators in registers to global memory
   (bf16x2 / f16x2 stores, masked at the M and N edges).
   Variants:
     n256  tile 128 x 256 x 64, 4 stages (192 KB), one CTA per tile (grid = #tiles)
     n128  tile 128 x 128 x 64, 6 stages (192 KB), one CTA per tile
     p256  as n256, persistent: grid = #SMs, each CTA walks tiles t, t + grid, ...; the producer
           runs ahead into the next tile while the consumers store the previous one
     p128  as n128, persistent
     q128  ping-pong (gemm_pp_kernel): persistent, each consumer warpgroup owns a whole 128 x 128
           tile (two m64n128k16 per k16, 128 f32 accumulators a thread) and the two alternate,
           one in its mainloop while the other runs its epilogue; one shared 6-stage ring, order
           mbarriers between the warpgroups keep every parity wait one phase ahead at most
     c128  q128 in clusters of 2 CTAs along M, the W tile's halves TMA-multicast to both
           (gemm_ppc_kernel), remote empty-barrier arrivals with .release.cluster: ~2.7x slower
           than q128, a fixed ~1 us a k-step (the cluster-scope release fence stalls each
           consumer warp; ssm_cuda.h's kernel 3 met the same at aaa908b / 6478d29)
     k128  clusters of 2, no multicast (each CTA loads its whole W tile): q128's speed, so the
           cluster launch itself costs nothing
     c128r c128 with the remote arrivals at the default .cta release (as CUTLASS's cluster
           barriers arrive): the identity GEMM 13-16% faster than q128 at K 2048
     c128f c128r, q128f q128 with the epilogue's loops specialized to a tile's one activation
           (no per-column segment search): no change, so the instruction count is not it
     c128s c128r with the output staged in shared memory (128-byte swizzle, conflict-free) and
           written by two TMA stores a tile, 5 ring stages (2 x 32 KB staging): the direct
           stores write half sectors (ncu: 50% excess sectors); the fused layer ~8% faster
           than q128, 1.14-1.17x cuBLAS at M 8192 (q128 1.24-1.30x)
     c128s4 c128s with 4 ring stages (room for a kernel's own static shared memory)
     c128q c128r with 16-byte stores from a quad transpose (store_q16), no staging; s128q at
           cluster size 1
     s128s c128s at cluster size 1: q128's speed (the stores alone do not pay; with pairs
           they do)
   c128s4 loses most of c128s's gain (M 8192 0.423-0.426, M 32768 1.74 ms): the ring wants 5 stages
   beside the 64 KB of staging, which leaves a kernel ~2 KB of static shared memory (ssm_cuda.h's
   kernel 3 keeps ~5 KB of per-tile column data). c128q is the best identity GEMM (M 8192
   0.375-0.380 ms, 1.07x cuBLAS; no staging) but fused it trails c128s (M 8192 0.416-0.418,
   M 32768 1.77-1.79: the transpose's shuffles sit in the epilogue, the TMA store does not).
   H200, GDN shape (N 8224, K 2048), EPI 1, ms (bench/results/cuda_gemm_wgmma_clusters_6e5f90f.log;
   cuBLAS 0.350 / 1.37-1.65 / 0.092): M 8192 q128 0.437-0.456, c128r 0.424-0.433, c128s
   0.400-0.414; M 32768 q128 1.72-1.87, c128r 1.66-1.83, c128s 1.57-1.70; M 2048 q128 0.119-0.122,
   c128s 0.110-0.114. Identity (EPI 0) c128s: M 8192 0.386-0.389 (1.10x cuBLAS).
   Tiles are numbered in groups of 16 row-tiles (row-tile fastest) so CTAs running together
   share W and x slices in L2.
   Measured on an H200 (bench/results/cuda_gemm_wgmma_a1e065f.log, _be90f18.log; ours and cuBLAS
   timed alternately in each row, so read the ratio; clocks drift under the 700 W cap and move
   both columns by up to ~15% between rows). ours/cuBLAS rate, identity epilogue:
     8192^3 bf16: n256 0.94-0.96 (653-754 TF/s), p256 0.94-0.97 (680-754); f16 n256/p256 0.94-0.97
     M 8192 / 32768 / 2048, N 8224, K 2048 bf16: q128 0.925 / 0.87-0.88 / 0.87-0.88 (a1e065f),
       p256 0.83-0.85 / 0.83-0.84 / 0.80-0.81, n256 0.75-0.79 / 0.78-0.79 / 0.73-0.77
   EPI 1 (fused, against the cuBLAS GEMM alone): q128 8192^3 0.98-1.00 (time 1.00-1.02x);
     N 8224 K 2048: M 8192 time 1.15x, M 32768 1.15-1.17x, M 2048 1.20-1.23x (a1e065f): the
     epilogue hides under the other warpgroup's mainloop; what is left is the mainloop's gap.
     n256 / p256 / n128 / p128 store while no MMA runs: 1.48-1.65x at K 2048.
   The first epilogue (expf, IEEE division and 1 / sqrtf per element, unrolled, with a runtime
   activation switch) made the fused rows of n256 / p256 1.7-2.0x their own identity time
   (likely instruction-cache misses on the long unrolled body; not profiled); the branch-free
   __expf / __fdividef / rsqrtf form below costs a few f32 ulps and took n256's fused row at
   M 8192, N 8224, K 2048 from 1.03 ms to 0.63-0.67 ms (identity 0.53-0.57 ms); the rest of the
   gap is the store, which only q128 overlaps with MMA work.
   EPI 1: the projection epilogue in registers before the single store (f32 accumulators):
   per column segment bias + activation (SiLU / sigmoid / identity, as ssm__pj_act) and, for
   segments marked L2, a / sqrt(sum a^2 + eps) per head of 128 columns (eps = 1e-6, the library
   default; a head never straddles a tile since tiles start at multiples of 128). Checked against
   cuBLAS (f32 output) + a reference epilogue kernel; timed against the cuBLAS GEMM alone. */
#include "../../ssm.h"
#include "../../bench/cuda_common.h"
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cublas_v2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <math.h>
#include <string>
#include <vector>
#include <type_traits>
#include <time.h>
#include <unistd.h>

#ifndef SSM_BENCH_COMMIT
#define SSM_BENCH_COMMIT "unknown"
#endif

#define CK(x)                                                                                            \
    do {                                                                                                 \
        cudaError_t e_ = (x);                                                                            \
        if (e_ != cudaSuccess) {                                                                         \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));         \
            exit(1);                                                                                     \
        }                                                                                                \
    } while (0)
#define CKB(x)                                                                                           \
    do {                                                                                                 \
        cublasStatus_t s_ = (x);                                                                         \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                               \
            fprintf(stderr, "%s:%d: %s: cublas status %d\n", __FILE__, __LINE__, #x, (int)s_);           \
            exit(1);                                                                                     \
        }                                                                                                \
    } while (0)

/* ---- epilogue description ---------------------------------------------------------------- */
#define EPI_MAXSEG 4
enum { ACT_NONE = 0, ACT_SILU = 1, ACT_SIGMOID = 2 };
struct epi_params {
    int on;                  /* 0: identity epilogue */
    int nseg;                /* segments [c0[s], c0[s + 1]) */
    int c0[EPI_MAXSEG + 1];
    int act;                 /* segment s: ACT_* in bits 4s .. 4s + 3 */
    int l2;                  /* bit s: L2 norm per head of 128 columns (c0[s] % 128 == 0) */
    const void *bias;        /* [N], the output type, or NULL */
    float eps;
};
__device__ __forceinline__ float act_f(int a, float z) {
    if (a == ACT_SILU) return z / (1.f + expf(-z));
    if (a == ACT_SIGMOID) return 1.f / (1.f + expf(-z));
    return z;
}
/* The fused epilogue's activation: one sigmoid by __expf / __fdividef (MUFU ex2 + rcp, a few
   f32 ulps from expf and IEEE division; far under the bf16 / f16 output rounding) and selects,
   no branches or slow-path calls: the unrolled epilogue stays small (instruction cache). For
   z < -87, __expf(-z) = inf and rcp(inf) = 0, so SiLU gives -0 and sigmoid 0, as expf would. */
__device__ __forceinline__ float act_fast(int a, float z) {
    const float sg = __fdividef(1.f, 1.f + __expf(-z));
    return a == ACT_SILU ? z * sg : a == ACT_SIGMOID ? sg : z;
}
__device__ __forceinline__ int seg_of(const epi_params &ep, int c) {
    int s = 0;
#pragma unroll
    for (int i = 1; i < EPI_MAXSEG; ++i)
        if (i < ep.nseg && c >= ep.c0[i]) s = i;
    return s;
}
__device__ __forceinline__ int seg_act(const epi_params &ep, int s) { return (ep.act >> (4 * s)) & 15; }
__device__ __forceinline__ int seg_l2(const epi_params &ep, int s) { return (ep.l2 >> s) & 1; }
template <typename T> __device__ __forceinline__ float ldf(const void *p, long i);
template <> __device__ __forceinline__ float ldf<__nv_bfloat16>(const void *p, long i) {
    return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
}
template <> __device__ __forceinline__ float ldf<__half>(const void *p, long i) { return __half2float(((const __half *)p)[i]); }
template <typename T> __device__ __forceinline__ void st2(T *p, float a, float b);
template <> __device__ __forceinline__ void st2<__nv_bfloat16>(__nv_bfloat16 *p, float a, float b) {
    *(__nv_bfloat162 *)p = __floats2bfloat162_rn(a, b);
}
template <> __device__ __forceinline__ void st2<__half>(__half *p, float a, float b) { *(__half2 *)p = __floats2half2_rn(a, b); }
template <typename T> union T2u {
    T t[2];
    uint32_t u;
};

/* ---- sm_90a primitives --------------------------------------------------------------------- */
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define GW_SM90A 1
#endif
#ifdef GW_SM90A
__device__ __forceinline__ uint32_t smem_u32(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void mbar_init(uint64_t *b, int count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(b)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(uint64_t *b, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(b)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t *b) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_u32(b)) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t *b, int phase) {
    uint32_t done;
    do {
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done)
                     : "r"(smem_u32(b)), "r"(phase)
                     : "memory");
    } while (!done);
}
__device__ __forceinline__ void tma_load_2d(void *dst, const CUtensorMap *map, uint64_t *bar, int c0, int c1) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];\n" ::"r"(
                     smem_u32(dst)),
                 "l"((uint64_t)map), "r"(smem_u32(bar)), "r"(c0), "r"(c1)
                 : "memory");
}
/* The same box into the same shared-memory offset of every CTA in cta_mask; complete_tx on
   the mbarrier at bar's offset in each of them. */
__device__ __forceinline__ void tma_load_2d_mc(void *dst, const CUtensorMap *map, uint64_t *bar, int c0, int c1, uint16_t cta_mask) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {%3, %4}], [%2], %5;\n" ::"r"(
                     smem_u32(dst)),
                 "l"((uint64_t)map), "r"(smem_u32(bar)), "r"(c0), "r"(c1), "h"(cta_mask)
                 : "memory");
}
/* shared -> global through the tensor map (a box at columns c0, rows c1; TMA clips at the edges) */
__device__ __forceinline__ void tma_store_2d(const CUtensorMap *map, const void *src, int c0, int c1) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];\n" ::"l"((uint64_t)map),
                 "r"(smem_u32(src)), "r"(c0), "r"(c1)
                 : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
__device__ __forceinline__ void bulk_wait_read() { asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory"); }
__device__ __forceinline__ void fence_async_smem() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
template <int REL = 1> __device__ __forceinline__ void mbar_arrive_remote(uint64_t *b, uint32_t cta) { /* b's twin in CTA cta of the cluster */
    uint32_t ra;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(ra) : "r"(smem_u32(b)), "r"(cta));
    if (REL) asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(ra) : "memory");
    else asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(ra) : "memory"); /* release at CTA scope (the default) */
}
__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
__device__ __forceinline__ uint32_t sreg_cluster_rank() {
    uint32_t r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
    return r;
}
__device__ __forceinline__ uint32_t sreg_cluster_id() {
    uint32_t r;
    asm volatile("mov.u32 %0, %%clusterid.x;\n" : "=r"(r));
    return r;
}
__device__ __forceinline__ uint32_t sreg_ncluster() {
    uint32_t r;
    asm volatile("mov.u32 %0, %%nclusterid.x;\n" : "=r"(r));
    return r;
}
/* K-major operand, 128-byte swizzle: 8-row core groups 1024 bytes apart (SBO), LBO unused (1). */
__device__ __forceinline__ uint64_t sdesc(const void *p) {
    return (uint64_t)((smem_u32(p) & 0x3FFFF) >> 4) | (1ull << 16) | (64ull << 32) | (1ull << 62);
}
__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void wg_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory"); }
__device__ __forceinline__ void reg_fence(float &r) { asm volatile("" : "+f"(r)::"memory"); }
__device__ __forceinline__ void wgmma_n128_bf16(float *d, uint64_t da, uint64_t db, int sd) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
                 "}, %64, %65, p, 1, 1, 0, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
                   "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
                   "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                   "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
                   "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                 : "l"(da), "l"(db), "r"(sd));
}
__device__ __forceinline__ void wgmma_n128_f16(float *d, uint64_t da, uint64_t db, int sd) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {"
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
                 "}, %64, %65, p, 1, 1, 0, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
                   "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
                   "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                   "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
                   "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                 : "l"(da), "l"(db), "r"(sd));
}
__device__ __forceinline__ void wgmma_n256_bf16(float *d, uint64_t da, uint64_t db, int sd) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63,"
                 "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79,"
                 "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95,"
                 "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111,"
                 "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
                 "}, %128, %129, p, 1, 1, 0, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
                   "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
                   "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                   "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
                   "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
                   "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
                   "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
                   "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
                   "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
                   "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
                   "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
                   "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
                   "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
                 : "l"(da), "l"(db), "r"(sd));
}
__device__ __forceinline__ void wgmma_n256_f16(float *d, uint64_t da, uint64_t db, int sd) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 {"
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63,"
                 "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79,"
                 "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95,"
                 "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111,"
                 "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
                 "}, %128, %129, p, 1, 1, 0, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
                   "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
                   "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                   "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
                   "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
                   "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
                   "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
                   "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
                   "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
                   "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
                   "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
                   "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
                   "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
                 : "l"(da), "l"(db), "r"(sd));
}
template <int BN, typename T> __device__ __forceinline__ void wgmma_tile(float *d, uint64_t da, uint64_t db, int sd);
template <> __device__ __forceinline__ void wgmma_tile<128, __nv_bfloat16>(float *d, uint64_t da, uint64_t db, int sd) {
    wgmma_n128_bf16(d, da, db, sd);
}
template <> __device__ __forceinline__ void wgmma_tile<256, __nv_bfloat16>(float *d, uint64_t da, uint64_t db, int sd) {
    wgmma_n256_bf16(d, da, db, sd);
}
template <> __device__ __forceinline__ void wgmma_tile<128, __half>(float *d, uint64_t da, uint64_t db, int sd) {
    wgmma_n128_f16(d, da, db, sd);
}
template <> __device__ __forceinline__ void wgmma_tile<256, __half>(float *d, uint64_t da, uint64_t db, int sd) {
    wgmma_n256_f16(d, da, db, sd);
}
#endif /* GW_SM90A */

#define BM 128
#define BK 64
#define GROUP_M 16
template <int BN, int ST> constexpr int smem_bytes() { return ST * (BM + BN) * BK * 2 + 2 * BN * 4 + 2 * ST * 8 + 1024; }

__device__ __forceinline__ void tile_coords(int t, int ntm, int ntn, int &tm, int &tn) {
    const int per = GROUP_M * ntn, g = t / per, first = g * GROUP_M, r = t - g * per;
    const int gs = ntm - first < GROUP_M ? ntm - first : GROUP_M;
    tm = first + r % gs, tn = r / gs;
}

/* The epilogue on one consumer thread's accumulators: d[4j + {0,1}] are row r0, columns
   n0 + 8j + 2q + {0,1}; d[4j + {2,3}] row r0 + 8, the same columns (wgmma's m64nN f32 layout). */
/* EPI 2 (variants c128f, q128f): a tile inside one segment (every tile of the layer but the last
   column tile) takes a loop specialized to its activation, no per-column segment search or
   selects: the epilogue runs on one warp a scheduler, latency-bound, so its instruction count
   is its time (ncu, c128r EPI 1 at M 8192: ~2300 instructions a warp a tile, longer than the
   other warpgroup's mainloop). */
template <int A, int BN> __device__ __forceinline__ void epi_act(float *d, const float *sbias, int q) {
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
        const float2 b = *(const float2 *)(sbias + 8 * j + 2 * q);
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const float z = d[4 * j + e] + ((e & 1) ? b.y : b.x);
            if (A == ACT_NONE) d[4 * j + e] = z;
            else {
                const float sg = __fdividef(1.f, 1.f + __expf(-z));
                d[4 * j + e] = A == ACT_SILU ? z * sg : sg;
            }
        }
    }
}
template <int BN, int EPI>
__device__ __forceinline__ void epi_math(float *d, int N, int n0, int q, const epi_params &ep, const float *sbias) {
    int uni = 0;
    if (EPI == 2) { /* the whole tile in one segment (warp-uniform) */
        const int last = (n0 + BN < N ? n0 + BN : N) - 1, sg = seg_of(ep, n0);
        if (sg == seg_of(ep, last) && last - n0 + 1 == BN) {
            uni = 1;
            switch (seg_act(ep, sg)) {
            case ACT_SILU: epi_act<ACT_SILU, BN>(d, sbias, q); break;
            case ACT_SIGMOID: epi_act<ACT_SIGMOID, BN>(d, sbias, q); break;
            default: epi_act<ACT_NONE, BN>(d, sbias, q); break;
            }
        }
    }
    if (EPI && !uni) { /* sbias: the tile's BN bias values (f32, 0 past N), staged in shared memory */
#pragma unroll
        for (int j = 0; j < BN / 8; ++j) {
            const int c = n0 + 8 * j + 2 * q;
            asm volatile("" ::: "memory"); /* keep the bias loads next to their use (register pressure) */
            const float2 b = *(const float2 *)(sbias + 8 * j + 2 * q);
            if (c < N) { /* N even: c + 1 < N too */
                const int a = seg_act(ep, seg_of(ep, c));
                d[4 * j + 0] = act_fast(a, d[4 * j + 0] + b.x), d[4 * j + 1] = act_fast(a, d[4 * j + 1] + b.y);
                d[4 * j + 2] = act_fast(a, d[4 * j + 2] + b.x), d[4 * j + 3] = act_fast(a, d[4 * j + 3] + b.y);
            } else
                d[4 * j + 0] = d[4 * j + 1] = d[4 * j + 2] = d[4 * j + 3] = 0.f;
        }
    }
    if (EPI) {
#pragma unroll
        for (int h = 0; h < BN / 128; ++h) {
            const int c = n0 + 128 * h;
            if (c >= N || !seg_l2(ep, seg_of(ep, c))) continue; /* uniform across the warp */
            float s0 = 0.f, s1 = 0.f;
#pragma unroll
            for (int j = 16 * h; j < 16 * h + 16; ++j)
                s0 += d[4 * j] * d[4 * j] + d[4 * j + 1] * d[4 * j + 1], s1 += d[4 * j + 2] * d[4 * j + 2] + d[4 * j + 3] * d[4 * j + 3];
            s0 += __shfl_xor_sync(0xffffffffu, s0, 1), s1 += __shfl_xor_sync(0xffffffffu, s1, 1);
            s0 += __shfl_xor_sync(0xffffffffu, s0, 2), s1 += __shfl_xor_sync(0xffffffffu, s1, 2);
            s0 = rsqrtf(s0 + ep.eps), s1 = rsqrtf(s1 + ep.eps); /* MUFU rsq, ~2 ulp */
#pragma unroll
            for (int j = 16 * h; j < 16 * h + 16; ++j) d[4 * j] *= s0, d[4 * j + 1] *= s0, d[4 * j + 2] *= s1, d[4 * j + 3] *= s1;
        }
    }
}
/* SO (variant c128s): the thread's 16 x 2 row pieces into the warpgroup's staging tile in shared
   memory, two 64-column boxes of 128 rows in the 128-byte swizzle (16-byte chunk k of row r at
   chunk k ^ (r & 7): a warp's 32 stores of one column pair hit 32 distinct banks), which
   the TMA store then writes to y as whole lines (the direct stores write half sectors). rr: the
   thread's first row in the 128-row tile. */
template <typename T> __device__ __forceinline__ void epi_stage(const float *d, unsigned char *so, int rr, int q) {
#pragma unroll
    for (int j = 0; j < 16; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int r = rr + 8 * h;
            T2u<T> v;
            st2<T>(&v.t[0], d[4 * j + 2 * h], d[4 * j + 2 * h + 1]);
            *(uint32_t *)(so + (j >> 3) * 16384 + r * 128 + ((((j & 7) ^ r) & 7) << 4) + 4 * q) = v.u;
        }
}
/* SO 3 (variants c128q, q128q): 16-byte stores without staging. For a fixed row, the quad's 4
   lanes hold 4 k-slabs j = 4g..4g+3 of 2 columns each (column 8j + 2q); a 4 x 4 transpose across the
   quad (two shuffle stages, xor 2 then xor 1) leaves lane q with the 8 contiguous columns of slab
   4g + q, stored as one 16-byte vector: a warp's store then writes whole 32-byte sectors of 8 rows
   instead of half sectors. (Needs 16-byte aligned rows: ldy % 8 == 0 and an aligned base.) */
template <typename T>
__device__ __forceinline__ void store_q16(const float *d, T *y, long ldy, int M, int N, int r0, int n0, int q) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int r = r0 + 8 * h;
#pragma unroll
        for (int g = 0; g < 4; ++g) {
            uint32_t v[4];
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                T2u<T> u;
                st2<T>(&u.t[0], d[4 * (4 * g + k) + 2 * h], d[4 * (4 * g + k) + 2 * h + 1]);
                v[k] = u.u;
            }
            { /* xor 2: lanes with bit 1 clear take the partner's slabs 0, 1 into 2, 3 and give their 2, 3 */
                const bool up = q & 2;
                const uint32_t x0 = up ? v[0] : v[2], x1 = up ? v[1] : v[3];
                const uint32_t r0_ = __shfl_xor_sync(0xffffffffu, x0, 2), r1_ = __shfl_xor_sync(0xffffffffu, x1, 2);
                if (up) v[0] = r0_, v[1] = r1_;
                else v[2] = r0_, v[3] = r1_;
            }
            { /* xor 1 */
                const bool up = q & 1;
                const uint32_t x0 = up ? v[0] : v[1], x1 = up ? v[2] : v[3];
                const uint32_t r0_ = __shfl_xor_sync(0xffffffffu, x0, 1), r1_ = __shfl_xor_sync(0xffffffffu, x1, 1);
                if (up) v[0] = r0_, v[2] = r1_;
                else v[1] = r0_, v[3] = r1_;
            }
            const int c = n0 + 8 * (4 * g + q);
            if (r < M && c < N) {
                if (c + 8 <= N) *(uint4 *)(y + (long)r * ldy + c) = make_uint4(v[0], v[1], v[2], v[3]);
                else
                    for (int k = 0; k < 4 && c + 2 * k < N; ++k) *(uint32_t *)(y + (long)r * ldy + c + 2 * k) = v[k];
            }
        }
    }
}
template <int BN, int EPI, typename T>
__device__ __forceinline__ void epilogue(float *d, T *y, long ldy, int M, int N, int r0, int n0, int q, const epi_params &ep,
                                         const float *sbias) {
    epi_math<BN, EPI>(d, N, n0, q, ep, sbias);
    const bool ok0 = r0 < M, ok1 = r0 + 8 < M;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
        const int c = n0 + 8 * j + 2 * q;
        if (c < N) {
            if (ok0) st2<T>(y + (long)r0 * ldy + c, d[4 * j], d[4 * j + 1]);
            if (ok1) st2<T>(y + (long)(r0 + 8) * ldy + c, d[4 * j + 2], d[4 * j + 3]);
        }
    }
}

template <int BN, int ST, int EPI, typename T>
__global__ void __launch_bounds__(384, 1) gemm_kernel(const __grid_constant__ CUtensorMap ta, const __grid_constant__ CUtensorMap tb,
                                                      T *y, long ldy, int M, int N, int K, const epi_params ep) {
#ifdef GW_SM90A
    extern __shared__ unsigned char smem_raw[];
    unsigned char *base = (unsigned char *)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
    T *sA = (T *)base;               /* ST x [128][64], 128-byte swizzle */
    T *sB = sA + ST * BM * BK;       /* ST x [BN][64] */
    float *sbias = (float *)(sB + ST * BN * BK); /* 2 x [BN]: one per consumer warpgroup */
    uint64_t *full = (uint64_t *)(sbias + 2 * BN), *empty = full + ST;
    const int wg = threadIdx.x / 128, tid = threadIdx.x % 128;
    const int ntm = (M + BM - 1) / BM, ntn = (N + BN - 1) / BN, ntiles = ntm * ntn, nk = (K + BK - 1) / BK;
    if (threadIdx.x == 0) {
        for (int s = 0; s < ST; ++s) mbar_init(&full[s], 1), mbar_init(&empty[s], 8);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    if (wg == 0) { /* producer */
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
        if (tid == 0) {
            int s = 0, ph = 0;
            for (int t = blockIdx.x; t < ntiles; t += gridDim.x) {
                int tm, tn;
                tile_coords(t, ntm, ntn, tm, tn);
                for (int kb = 0; kb < nk; ++kb) {
                    mbar_wait(&empty[s], ph ^ 1);
                    mbar_expect_tx(&full[s], (BM + BN) * BK * (int)sizeof(T));
                    tma_load_2d(sA + s * BM * BK, &ta, &full[s], kb * BK, tm * BM);
                    tma_load_2d(sB + s * BN * BK, &tb, &full[s], kb * BK, tn * BN);
                    if (++s == ST) s = 0, ph ^= 1;
                }
            }
        }
    } else { /* consumers: warpgroup wg owns rows (wg - 1) * 64 ... + 63 of the tile */
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
        float d[BN / 2];
        const int warp = tid / 32, lane = tid % 32;
        int s = 0, ph = 0;
        for (int t = blockIdx.x; t < ntiles; t += gridDim.x) {
            int tm, tn;
            tile_coords(t, ntm, ntn, tm, tn);
#pragma unroll
            for (int i = 0; i < BN / 2; ++i) d[i] = 0.f;
            int prev = -1;
            for (int kb = 0; kb < nk; ++kb) {
                mbar_wait(&full[s], ph);
#pragma unroll
                for (int i = 0; i < BN / 2; ++i) reg_fence(d[i]);
                wg_fence();
                const T *a = sA + s * BM * BK + (wg - 1) * 64 * BK, *b = sB + s * BN * BK;
#pragma unroll
                for (int k = 0; k < BK / 16; ++k) wgmma_tile<BN, T>(d, sdesc(a + 16 * k), sdesc(b + 16 * k), 1);
                wg_commit();
                wg_wait<1>();
#pragma unroll
                for (int i = 0; i < BN / 2; ++i) reg_fence(d[i]);
                if (prev >= 0 && lane == 0) mbar_arrive(&empty[prev]);
                prev = s;
                if (++s == ST) s = 0, ph ^= 1;
            }
            wg_wait<0>();
#pragma unroll
            for (int i = 0; i < BN / 2; ++i) reg_fence(d[i]);
            if (prev >= 0 && lane == 0) mbar_arrive(&empty[prev]);
            float *sb = sbias + (wg - 1) * BN;
            if (EPI) { /* this warpgroup's copy of the tile's bias (named barrier 1 + wg, 128 threads) */
                asm volatile("bar.sync %0, 128;\n" ::"r"(wg) : "memory");
                for (int i = tid; i < BN; i += 128) {
                    const int c = tn * BN + i;
                    sb[i] = ep.bias && c < N ? ldf<T>(ep.bias, c) : 0.f;
                }
                asm volatile("bar.sync %0, 128;\n" ::"r"(wg) : "memory");
            }
            epilogue<BN, EPI, T>(d, y, ldy, M, N, tm * BM + (wg - 1) * 64 + warp * 16 + lane / 4, tn * BN, lane % 4, ep, sb);
        }
    }
#endif
}

/* Ping-pong (variant q128): tile 128 x 128 per consumer warpgroup, persistent. A CTA's tiles
   t = blockIdx.x + i * gridDim.x go to consumer warpgroup 1 + (i & 1); the producer loads them in
   order into one ring (ring slot g = i * nk + kb), so one warpgroup's mainloop runs while the
   other stores its tile: the epilogue hides under the tensor cores' work. Each warpgroup issues
   two m64n128k16 per k16 (rows 0-63 and 64-127 of its tile, 128 f32 accumulators a thread). */
template <int ST, int EPI, typename T>
__global__ void __launch_bounds__(384, 1) gemm_pp_kernel(const __grid_constant__ CUtensorMap ta, const __grid_constant__ CUtensorMap tb,
                                                         T *y, long ldy, int M, int N, int K, const epi_params ep) {
#ifdef GW_SM90A
    constexpr int BN = 128;
    extern __shared__ unsigned char smem_raw[];
    unsigned char *base = (unsigned char *)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
    T *sA = (T *)base;         /* ST x [128][64], 128-byte swizzle */
    T *sB = sA + ST * BM * BK; /* ST x [128][64] */
    float *sbias = (float *)(sB + ST * BN * BK);
    uint64_t *full = (uint64_t *)(sbias + 2 * BN), *empty = full + ST, *order = empty + ST;
    const int wg = threadIdx.x / 128, tid = threadIdx.x % 128;
    const int ntm = (M + BM - 1) / BM, ntn = (N + BN - 1) / BN, ntiles = ntm * ntn, nk = (K + BK - 1) / BK;
    if (threadIdx.x == 0) {
        for (int s = 0; s < ST; ++s) mbar_init(&full[s], 1), mbar_init(&empty[s], 4);
        mbar_init(&order[0], 4), mbar_init(&order[1], 4);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    if (wg == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
        if (tid == 0) {
            int s = 0, ph = 0;
            for (int t = blockIdx.x; t < ntiles; t += gridDim.x) {
                int tm, tn;
                tile_coords(t, ntm, ntn, tm, tn);
                for (int kb = 0; kb < nk; ++kb) {
                    mbar_wait(&empty[s], ph ^ 1);
                    mbar_expect_tx(&full[s], (BM + BN) * BK * (int)sizeof(T));
                    tma_load_2d(sA + s * BM * BK, &ta, &full[s], kb * BK, tm * BM);
                    tma_load_2d(sB + s * BN * BK, &tb, &full[s], kb * BK, tn * BN);
                    if (++s == ST) s = 0, ph ^= 1;
                }
            }
        }
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
        float d0[BN / 2], d1[BN / 2];
        const int warp = tid / 32, lane = tid % 32, c = wg - 1;
        float *sb = sbias + c * BN;
        for (int i = c;; i += 2) {
            const int t = blockIdx.x + i * gridDim.x;
            if (t >= ntiles) break;
            int tm, tn;
            tile_coords(t, ntm, ntn, tm, tn);
#pragma unroll
            for (int r = 0; r < BN / 2; ++r) d0[r] = 0.f, d1[r] = 0.f;
            /* A parity wait is only sound one phase ahead: wait until the other warpgroup has seen
               every full barrier of tile i - 1 (its ((i - 2 + c) / 2)-th signal on order[c]), so the
               ring's barriers are at most one phase behind this tile's slots. */
            if (i >= 1) mbar_wait(&order[c], ((i - 2 + c) / 2) & 1);
            long g = (long)i * nk;
            int s = (int)(g % ST), ph = (int)((g / ST) & 1), prev = -1;
            for (int kb = 0; kb < nk; ++kb) {
                mbar_wait(&full[s], ph);
#pragma unroll
                for (int r = 0; r < BN / 2; ++r) reg_fence(d0[r]), reg_fence(d1[r]);
                wg_fence();
                const T *a = sA + s * BM * BK, *b = sB + s * BN * BK;
#pragma unroll
                for (int k = 0; k < BK / 16; ++k) {
                    wgmma_tile<BN, T>(d0, sdesc(a + 16 * k), sdesc(b + 16 * k), 1);
                    wgmma_tile<BN, T>(d1, sdesc(a + 64 * BK + 16 * k), sdesc(b + 16 * k), 1);
                }
                wg_commit();
                wg_wait<1>();
#pragma unroll
                for (int r = 0; r < BN / 2; ++r) reg_fence(d0[r]), reg_fence(d1[r]);
                if (prev >= 0 && lane == 0) mbar_arrive(&empty[prev]);
                prev = s;
                if (++s == ST) s = 0, ph ^= 1;
            }
            if (lane == 0) mbar_arrive(&order[c ^ 1]); /* this tile's full barriers all seen */
            wg_wait<0>();
#pragma unroll
            for (int r = 0; r < BN / 2; ++r) reg_fence(d0[r]), reg_fence(d1[r]);
            if (prev >= 0 && lane == 0) mbar_arrive(&empty[prev]);
            if (EPI) {
                asm volatile("bar.sync %0, 128;\n" ::"r"(wg) : "memory");
                for (int q = tid; q < BN; q += 128) {
                    const int cc = tn * BN + q;
                    sb[q] = ep.bias && cc < N ? ldf<T>(ep.bias, cc) : 0.f;
                }
                asm volatile("bar.sync %0, 128;\n" ::"r"(wg) : "memory");
            }
            const int r0 = tm * BM + warp * 16 + lane / 4;
            epilogue<BN, EPI, T>(d0, y, ldy, M, N, r0, tn * BN, lane % 4, ep, sb);
            epilogue<BN, EPI, T>(d1, y, ldy, M, N, r0 + 64, tn * BN, lane % 4, ep, sb);
        }
    }
#endif
}

/* gemm_ppc_kernel: gemm_pp_kernel (above) with a cluster size CL (variant c128 runs CL = 2).
   Ping-pong: tile 128 x 128 per consumer warpgroup, persistent. A CTA's tiles
   t = blockIdx.x + i * gridDim.x go to consumer warpgroup 1 + (i & 1); the producer loads them in
   order into one ring (ring slot g = i * nk + kb), so one warpgroup's mainloop runs while the
   other stores its tile: the epilogue hides under the tensor cores' work. Each warpgroup issues
   two m64n128k16 per k16 (rows 0-63 and 64-127 of its tile, 128 f32 accumulators a thread).
   CL = 2 (variant c128): clusters of 2 CTAs along M; the pair works on row tiles 2 pm and
   2 pm + 1 of one column tile, and each CTA loads half of the shared W tile (64 rows) with TMA
   multicast into both CTAs' shared memory: W's reads from L2 halve. A ring slot is refilled only
   when the consumers of both CTAs have freed it (empty barriers count 8: 4 local warps + 4
   remote arrivals). */
/* Output modes SO: 0 direct stores, 1 staged in shared memory + TMA stores (5 ring stages),
   2 the same with 4 stages, 3 16-byte stores from a quad transpose. */
template <int SO> __host__ __device__ constexpr bool staged_output() { return SO == 1 || SO == 2; }
template <int ST, int EPI, int CL, typename T, int MC = CL - 1, int SO = 0>
__global__ void __launch_bounds__(384, 1) gemm_ppc_kernel(const __grid_constant__ CUtensorMap ta, const __grid_constant__ CUtensorMap tb,
                                                         const __grid_constant__ CUtensorMap ty, T *y, long ldy, int M, int N, int K,
                                                         const epi_params ep) {
#ifdef GW_SM90A
    constexpr int BN = 128;
    extern __shared__ unsigned char smem_raw[];
    unsigned char *base = (unsigned char *)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
    T *sA = (T *)base;         /* ST x [128][64], 128-byte swizzle */
    T *sB = sA + ST * BM * BK; /* ST x [128][64] */
    unsigned char *sO = (unsigned char *)(sB + ST * BN * BK); /* SO 1, 2: 2 x 32 KB staging tiles, one a consumer warpgroup */
    float *sbias = (float *)(sO + (staged_output<SO>() ? 2 * 32768 : 0));
    uint64_t *full = (uint64_t *)(sbias + 2 * BN), *empty = full + ST, *order = empty + ST;
    const int wg = threadIdx.x / 128, tid = threadIdx.x % 128;
    const int ntm = (M + BM - 1) / BM, ntn = (N + BN - 1) / BN, nk = (K + BK - 1) / BK;
    const uint32_t rank = CL > 1 ? sreg_cluster_rank() : 0;
    const int cid = CL > 1 ? (int)sreg_cluster_id() : (int)blockIdx.x, ncl = CL > 1 ? (int)sreg_ncluster() : (int)gridDim.x;
    const int ntm2 = (ntm + CL - 1) / CL, npairs = ntm2 * ntn; /* units of CL row tiles x 1 column tile */
    if (threadIdx.x == 0) {
        for (int s = 0; s < ST; ++s) mbar_init(&full[s], 1), mbar_init(&empty[s], MC ? 4 * CL : 4);
        mbar_init(&order[0], 4), mbar_init(&order[1], 4);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    if (CL > 1) cluster_sync();
    else __syncthreads();
    if (wg == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
        if (tid == 0) {
            int s = 0, ph = 0;
            for (int pt = cid; pt < npairs; pt += ncl) {
                int tm, tn;
                tile_coords(pt, ntm2, ntn, tm, tn);
                tm = tm * CL + (int)rank;
                for (int kb = 0; kb < nk; ++kb) {
                    mbar_wait(&empty[s], ph ^ 1);
                    mbar_expect_tx(&full[s], (BM + BN) * BK * (int)sizeof(T));
                    tma_load_2d(sA + s * BM * BK, &ta, &full[s], kb * BK, tm * BM);
                    if (MC)
                        tma_load_2d_mc(sB + s * BN * BK + rank * (BN / 2) * BK, &tb, &full[s], kb * BK, tn * BN + (int)rank * (BN / 2),
                                       (uint16_t)3);
                    else
                        tma_load_2d(sB + s * BN * BK, &tb, &full[s], kb * BK, tn * BN);
                    if (++s == ST) s = 0, ph ^= 1;
                }
            }
        }
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
        float d0[BN / 2], d1[BN / 2];
        const int warp = tid / 32, lane = tid % 32, c = wg - 1;
        float *sb = sbias + c * BN;
        for (int i = c;; i += 2) {
            const int pt = cid + i * ncl;
            if (pt >= npairs) break;
            int tm, tn;
            tile_coords(pt, ntm2, ntn, tm, tn);
            tm = tm * CL + (int)rank;
#pragma unroll
            for (int r = 0; r < BN / 2; ++r) d0[r] = 0.f, d1[r] = 0.f;
            /* A parity wait is only sound one phase ahead: wait until the other warpgroup has seen
               every full barrier of tile i - 1 (its ((i - 2 + c) / 2)-th signal on order[c]), so the
               ring's barriers are at most one phase behind this tile's slots. */
            if (i >= 1) mbar_wait(&order[c], ((i - 2 + c) / 2) & 1);
            long g = (long)i * nk;
            int s = (int)(g % ST), ph = (int)((g / ST) & 1), prev = -1;
            for (int kb = 0; kb < nk; ++kb) {
                mbar_wait(&full[s], ph);
#pragma unroll
                for (int r = 0; r < BN / 2; ++r) reg_fence(d0[r]), reg_fence(d1[r]);
                wg_fence();
                const T *a = sA + s * BM * BK, *b = sB + s * BN * BK;
#pragma unroll
                for (int k = 0; k < BK / 16; ++k) {
                    wgmma_tile<BN, T>(d0, sdesc(a + 16 * k), sdesc(b + 16 * k), 1);
                    wgmma_tile<BN, T>(d1, sdesc(a + 64 * BK + 16 * k), sdesc(b + 16 * k), 1);
                }
                wg_commit();
                wg_wait<1>();
#pragma unroll
                for (int r = 0; r < BN / 2; ++r) reg_fence(d0[r]), reg_fence(d1[r]);
                if (prev >= 0 && lane == 0) {
                    mbar_arrive(&empty[prev]);
                    if (MC) mbar_arrive_remote<MC == 1>(&empty[prev], rank ^ 1);
                }
                prev = s;
                if (++s == ST) s = 0, ph ^= 1;
            }
            if (lane == 0) mbar_arrive(&order[c ^ 1]); /* this tile's full barriers all seen */
            wg_wait<0>();
#pragma unroll
            for (int r = 0; r < BN / 2; ++r) reg_fence(d0[r]), reg_fence(d1[r]);
            if (prev >= 0 && lane == 0) {
                mbar_arrive(&empty[prev]);
                if (MC) mbar_arrive_remote<MC == 1>(&empty[prev], rank ^ 1);
            }
            if (EPI) {
                asm volatile("bar.sync %0, 128;\n" ::"r"(wg) : "memory");
                for (int q = tid; q < BN; q += 128) {
                    const int cc = tn * BN + q;
                    sb[q] = ep.bias && cc < N ? ldf<T>(ep.bias, cc) : 0.f;
                }
                asm volatile("bar.sync %0, 128;\n" ::"r"(wg) : "memory");
            }
            const int r0 = tm * BM + warp * 16 + lane / 4;
            if (staged_output<SO>()) {
                unsigned char *so = sO + c * 32768;
                epi_math<BN, EPI>(d0, N, tn * BN, lane % 4, ep, sb);
                epi_math<BN, EPI>(d1, N, tn * BN, lane % 4, ep, sb);
                if (tid == 0) bulk_wait_read(); /* this warpgroup's previous tile has left the staging tile */
                asm volatile("bar.sync %0, 128;\n" ::"r"(wg) : "memory");
                epi_stage<T>(d0, so, warp * 16 + lane / 4, lane % 4);
                epi_stage<T>(d1, so, 64 + warp * 16 + lane / 4, lane % 4);
                fence_async_smem();
                asm volatile("bar.sync %0, 128;\n" ::"r"(wg) : "memory");
                if (tid == 0) {
                    tma_store_2d(&ty, so, tn * BN, tm * BM);
                    tma_store_2d(&ty, so + 16384, tn * BN + 64, tm * BM);
                    bulk_commit();
                }
            } else if (SO == 3) {
                epi_math<BN, EPI>(d0, N, tn * BN, lane % 4, ep, sb);
                epi_math<BN, EPI>(d1, N, tn * BN, lane % 4, ep, sb);
                store_q16<T>(d0, y, ldy, M, N, r0, tn * BN, lane % 4);
                store_q16<T>(d1, y, ldy, M, N, r0 + 64, tn * BN, lane % 4);
            } else {
                epilogue<BN, EPI, T>(d0, y, ldy, M, N, r0, tn * BN, lane % 4, ep, sb);
                epilogue<BN, EPI, T>(d1, y, ldy, M, N, r0 + 64, tn * BN, lane % 4, ep, sb);
            }
        }
        if (staged_output<SO>() && tid == 0) bulk_wait_read(); /* the staging tile stays until the last store has read it */
    }
    __syncwarp(); /* the producer warp's lane 0 rejoins its warp before the .aligned cluster barrier */
    if (CL > 1) cluster_sync(); /* the peer may still multicast into this CTA or arrive on its barriers */
#endif
}

/* 1 in *f when this binary's device code is the sm_90a build (else the kernels above are empty) */
__global__ void probe_kernel(int *f) {
#ifdef GW_SM90A
    *f = 1;
#else
    *f = 0;
#endif
}

/* ---- reference epilogue (f32, on cuBLAS's f32 output): a thread per (row, 128-column head) --- */
template <typename T> __global__ void ref_epi_kernel(float *z, int M, int N, epi_params ep) {
    const long w = (long)blockIdx.x * blockDim.x + threadIdx.x, nh = (N + 127) / 128;
    if (w >= (long)M * nh) return;
    const long r = w / nh;
    const int h0 = (int)(w % nh) * 128, h1 = h0 + 128 < N ? h0 + 128 : N;
    float *row = z + r * N;
    for (int c = h0; c < h1; ++c) row[c] = act_f(seg_act(ep, seg_of(ep, c)), row[c] + (ep.bias ? ldf<T>(ep.bias, c) : 0.f));
    if (seg_l2(ep, seg_of(ep, h0))) {
        float ss = 0.f;
        for (int c = h0; c < h1; ++c) ss += row[c] * row[c];
        ss = 1.f / sqrtf(ss + ep.eps);
        for (int c = h0; c < h1; ++c) row[c] *= ss;
    }
}

/* Compare y (T) with ref (f32): sum (y - ref)^2, sum ref^2, max |y - ref|, max |ref|, #NaN,
   #elements off by more than one ulp of T at ref's magnitude. */
struct cmp_acc {
    double se, sr, maxd, maxr;
    unsigned long long nan, ulp;
};
__device__ double atomicMaxPos(double *a, double v) {
    unsigned long long *p = (unsigned long long *)a, old = *p;
    while (__longlong_as_double((long long)old) < v) {
        unsigned long long prev = atomicCAS(p, old, (unsigned long long)__double_as_longlong(v));
        if (prev == old) break;
        old = prev;
    }
    return __longlong_as_double((long long)old);
}
template <typename T> __global__ void cmp_kernel(const T *y, const float *ref, long n, int mant, cmp_acc *acc) {
    double se = 0, sr = 0, md = 0, mr = 0;
    unsigned long long nn = 0, nu = 0;
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
        const float v = ldf<T>(y, i), r = ref[i];
        if (!(v == v)) {
            ++nn;
            continue;
        }
        const double dd = fabs((double)v - r);
        se += dd * dd, sr += (double)r * r, md = fmax(md, dd), mr = fmax(mr, fabs((double)r));
        int ex;
        frexpf(fabsf(r) > 1e-30f ? r : 1e-30f, &ex);
        if (dd > ldexp(1.0, ex - mant)) ++nu; /* one ulp of T: 2^(e - 1 - (mant - 1)) */
    }
    for (int o = 16; o > 0; o >>= 1) {
        se += __shfl_xor_sync(0xffffffffu, se, o), sr += __shfl_xor_sync(0xffffffffu, sr, o);
        md = fmax(md, __shfl_xor_sync(0xffffffffu, md, o)), mr = fmax(mr, __shfl_xor_sync(0xffffffffu, mr, o));
        nn += __shfl_xor_sync(0xffffffffu, nn, o), nu += __shfl_xor_sync(0xffffffffu, nu, o);
    }
    if ((threadIdx.x & 31) == 0) {
        atomicAdd(&acc->se, se), atomicAdd(&acc->sr, sr), atomicMaxPos(&acc->maxd, md), atomicMaxPos(&acc->maxr, mr);
        atomicAdd(&acc->nan, nn), atomicAdd(&acc->ulp, nu);
    }
}

/* ---- host ------------------------------------------------------------------------------------ */
static PFN_cuTensorMapEncodeTiled_v12000 encode_fn() {
    static PFN_cuTensorMapEncodeTiled_v12000 f = NULL;
    if (!f) {
        cudaDriverEntryPointQueryResult q;
        void *p = NULL;
        CK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q));
        if (q != cudaDriverEntryPointSuccess || !p) {
            fprintf(stderr, "cuTensorMapEncodeTiled not found\n");
            exit(1);
        }
        f = (PFN_cuTensorMapEncodeTiled_v12000)p;
    }
    return f;
}
/* [rows, K] row-major, K contiguous; boxes of box_rows x 64 elements, 128-byte swizzle, zero fill */
static CUtensorMap make_map(const void *p, int bf16, long rows, long K, int box_rows) {
    CUtensorMap m;
    cuuint64_t dims[2] = {(cuuint64_t)K, (cuuint64_t)rows}, strides[1] = {(cuuint64_t)K * 2};
    cuuint32_t box[2] = {BK, (cuuint32_t)box_rows}, es[2] = {1, 1};
    CUresult r = encode_fn()(&m, bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, (void *)p, dims,
                             strides, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                             CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) {
        fprintf(stderr, "cuTensorMapEncodeTiled failed: %d\n", (int)r);
        exit(1);
    }
    return m;
}

struct variant {
    const char *name;
    int bn, persistent; /* persistent 2: ping-pong, 3: ping-pong in clusters of 2 (W multicast), 4: the same without multicast, 5: gemm_ppc_kernel at cluster size 1 */
};
static const variant VARIANTS[] = {{"n256", 256, 0}, {"p256", 256, 1}, {"q128", 128, 2}, {"c128", 128, 3}, {"k128", 128, 4}, {"c128r", 128, 6}, {"c128f", 128, 7}, {"q128f", 128, 8}, {"c128s", 128, 9}, {"c128s4", 128, 11}, {"c128q", 128, 12}, {"s128q", 128, 13}, {"s128s", 128, 10}, {"s128", 128, 5}, {"n128", 128, 0}, {"p128", 128, 1}};
static int g_sms = 132;

template <int BN, int ST, int EPI, typename T>
static void launch_t(const variant &v, const void *x, const void *w, T *y, int M, int N, int K, const epi_params &ep, cudaStream_t st) {
    static bool attr = false;
    if (!attr) {
        CK(cudaFuncSetAttribute(gemm_kernel<BN, ST, EPI, T>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes<BN, ST>()));
        attr = true;
    }
    const int is_bf = std::is_same<T, __nv_bfloat16>::value;
    const CUtensorMap ta = make_map(x, is_bf, M, K, BM), tb = make_map(w, is_bf, N, K, BN);
    const int tiles = ((M + BM - 1) / BM) * ((N + BN - 1) / BN);
    const int grid = v.persistent ? (tiles < g_sms ? tiles : g_sms) : tiles;
    gemm_kernel<BN, ST, EPI, T><<<grid, 384, smem_bytes<BN, ST>(), st>>>(ta, tb, y, (long)N, M, N, K, ep);
}
template <int EPI, typename T>
static void launch_pp(const variant &v, const void *x, const void *w, T *y, int M, int N, int K, const epi_params &ep, cudaStream_t st) {
    constexpr int ST = 6, SMEM = smem_bytes<128, ST>() + 16;
    static bool attr = false;
    if (!attr) {
        CK(cudaFuncSetAttribute(gemm_pp_kernel<ST, EPI, T>, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM));
        attr = true;
    }
    const int is_bf = std::is_same<T, __nv_bfloat16>::value;
    const CUtensorMap ta = make_map(x, is_bf, M, K, BM), tb = make_map(w, is_bf, N, K, 128);
    const int tiles = ((M + BM - 1) / BM) * ((N + 127) / 128);
    const int grid = (tiles + 1) / 2 < g_sms ? (tiles + 1) / 2 : g_sms;
    gemm_pp_kernel<ST, EPI, T><<<grid, 384, SMEM, st>>>(ta, tb, y, (long)N, M, N, K, ep);
    (void)v;
}
template <int EPI, int CL, typename T, int MC = CL - 1, int SO = 0>
static void launch_ppc(const void *x, const void *w, T *y, int M, int N, int K, const epi_params &ep, cudaStream_t st) {
    constexpr int ST = SO == 2 ? 4 : SO == 1 ? 5 : 6, SMEM = smem_bytes<128, ST>() + 16 + (staged_output<SO>() ? 65536 : 0);
    static int max_units = 0; /* CTAs (CL = 1) or clusters (CL = 2) that fit at once */
    auto kern = gemm_ppc_kernel<ST, EPI, CL, T, MC, SO>;
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = CL, at[0].val.clusterDim.y = 1, at[0].val.clusterDim.z = 1;
    cfg.blockDim = dim3(384), cfg.dynamicSmemBytes = SMEM, cfg.stream = st, cfg.attrs = at, cfg.numAttrs = 1;
    if (!max_units) {
        CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM));
        if (CL > 1) {
            cfg.gridDim = dim3(g_sms / CL * CL);
            CK(cudaOccupancyMaxActiveClusters(&max_units, kern, &cfg));
            printf("  (%s: %d clusters of 2 fit at once)\n", MC == 2 ? (SO == 3 ? "c128q" : SO ? (SO == 2 ? "c128s4" : "c128s") : EPI == 2 ? "c128f" : "c128r") : MC ? "c128" : "k128", max_units);
        } else
            max_units = g_sms;
    }
    const int is_bf = std::is_same<T, __nv_bfloat16>::value;
    const CUtensorMap ta = make_map(x, is_bf, M, K, BM), tb = make_map(w, is_bf, N, K, MC ? 128 / CL : 128);
    const int ntm2 = ((M + BM - 1) / BM + CL - 1) / CL, units = ntm2 * ((N + 127) / 128);
    const int want = (units + 1) / 2; /* each CTA keeps two tiles in flight */
    cfg.gridDim = dim3((want < max_units ? want : max_units) * CL);
    CUtensorMap tyy = ta; /* SO: y as [M, N] in 64-column x 128-row boxes */
    if (staged_output<SO>()) tyy = make_map(y, is_bf, M, N, 128);
    CK(cudaLaunchKernelEx(&cfg, kern, ta, tb, tyy, y, (long)N, M, N, K, ep));
}
/* launch_ppc with epilogue EON when the epilogue is on, else the identity one */
template <int EON, int CL, int MC, int SO, typename T>
static void launch_ppc_ep(const void *x, const void *w, T *y, int M, int N, int K, const epi_params &ep, cudaStream_t st) {
    if (ep.on) launch_ppc<EON, CL, T, MC, SO>(x, w, y, M, N, K, ep, st);
    else launch_ppc<0, CL, T, MC, SO>(x, w, y, M, N, K, ep, st);
}
template <typename T>
static void launch(const variant &v, const void *x, const void *w, T *y, int M, int N, int K, const epi_params &ep, cudaStream_t st) {
    if (v.persistent == 2) {
        if (ep.on) launch_pp<1, T>(v, x, w, y, M, N, K, ep, st);
        else launch_pp<0, T>(v, x, w, y, M, N, K, ep, st);
    } else if (v.persistent == 8) {
        if (ep.on) launch_pp<2, T>(v, x, w, y, M, N, K, ep, st);
        else launch_pp<0, T>(v, x, w, y, M, N, K, ep, st);
    } else if (v.persistent >= 3) { /* gemm_ppc_kernel: cluster size, multicast, output store by variant */
        switch (v.persistent) {
        case 3: launch_ppc_ep<1, 2, 1, 0>(x, w, y, M, N, K, ep, st); break;  /* c128 */
        case 4: launch_ppc_ep<1, 2, 0, 0>(x, w, y, M, N, K, ep, st); break;  /* k128 */
        case 5: launch_ppc_ep<1, 1, 0, 0>(x, w, y, M, N, K, ep, st); break;  /* s128 */
        case 6: launch_ppc_ep<1, 2, 2, 0>(x, w, y, M, N, K, ep, st); break;  /* c128r */
        case 7: launch_ppc_ep<2, 2, 2, 0>(x, w, y, M, N, K, ep, st); break;  /* c128f */
        case 9: launch_ppc_ep<1, 2, 2, 1>(x, w, y, M, N, K, ep, st); break;  /* c128s */
        case 10: launch_ppc_ep<1, 1, 0, 1>(x, w, y, M, N, K, ep, st); break; /* s128s */
        case 11: launch_ppc_ep<1, 2, 2, 2>(x, w, y, M, N, K, ep, st); break; /* c128s4 */
        case 12: launch_ppc_ep<1, 2, 2, 3>(x, w, y, M, N, K, ep, st); break; /* c128q */
        case 13: launch_ppc_ep<1, 1, 0, 3>(x, w, y, M, N, K, ep, st); break; /* s128q */
        }
    } else if (v.bn == 256) {
        if (ep.on) launch_t<256, 4, 1, T>(v, x, w, y, M, N, K, ep, st);
        else launch_t<256, 4, 0, T>(v, x, w, y, M, N, K, ep, st);
    } else {
        if (ep.on) launch_t<128, 6, 1, T>(v, x, w, y, M, N, K, ep, st);
        else launch_t<128, 6, 0, T>(v, x, w, y, M, N, K, ep, st);
    }
}

/* Gated DeltaNet input projection (d_model 2048, 16 heads of 128): q, k (SiLU + L2), v (SiLU),
   beta (sigmoid), the gate pre-activation (identity) = 8224 columns; other N: one SiLU + L2 segment. */
static epi_params make_epi(int on, int N, const void *bias) {
    epi_params ep;
    memset(&ep, 0, sizeof ep);
    ep.on = on, ep.bias = bias, ep.eps = 1e-6f;
    if (N == 8224) {
        ep.nseg = 4;
        const int c0[5] = {0, 4096, 8192, 8208, 8224};
        memcpy(ep.c0, c0, sizeof c0);
        ep.act = ACT_SILU | ACT_SILU << 4 | ACT_SIGMOID << 8 | ACT_NONE << 12, ep.l2 = 1;
    } else {
        ep.nseg = 1, ep.c0[0] = 0, ep.c0[1] = N, ep.act = ACT_SILU, ep.l2 = N % 128 == 0;
    }
    return ep;
}

static const int REPS = 25;
/* Medians of REPS event-timed calls of f and of g, alternating f, g, f, g ... after 3 warm-ups
   of each, so clock and thermal drift during a row hits both alike. */
template <typename F, typename G> static void time_pair(F f, G g, double &tf, double &tg) {
    cudaEvent_t e[3];
    for (auto &x : e) CK(cudaEventCreate(&x));
    std::vector<float> vf, vg;
    for (int i = 0; i < 3; ++i) f(), g();
    CK(cudaDeviceSynchronize());
    for (int i = 0; i < REPS; ++i) {
        float a, b;
        CK(cudaEventRecord(e[0]));
        f();
        CK(cudaEventRecord(e[1]));
        g();
        CK(cudaEventRecord(e[2]));
        CK(cudaEventSynchronize(e[2]));
        CK(cudaEventElapsedTime(&a, e[0], e[1]));
        CK(cudaEventElapsedTime(&b, e[1], e[2]));
        vf.push_back(a), vg.push_back(b);
    }
    std::sort(vf.begin(), vf.end()), std::sort(vg.begin(), vg.end());
    tf = vf[REPS / 2], tg = vg[REPS / 2];
    for (auto &x : e) cudaEventDestroy(x);
}
template <typename T> static int run_row(const variant &v, int M, int N, int K, int epi, cublasHandle_t hb) {
    const int is_bf = std::is_same<T, __nv_bfloat16>::value;
    const ssm_dtype dt = is_bf ? ssm_dtype{SSM_DTYPE_BFLOAT, 16, 1} : ssm_dtype{SSM_DTYPE_FLOAT, 16, 1};
    const cudaDataType cdt = is_bf ? CUDA_R_16BF : CUDA_R_16F;
    void *x = dev_random(dt, (int64_t)M * K, 1.f, 1234u + M), *w = dev_random(dt, (int64_t)N * K, 1.f, 777u + N);
    void *bias = dev_random(dt, N, 1.f, 99u);
    T *y = NULL, *yb = NULL;
    float *ref = NULL;
    cmp_acc *acc = NULL;
    CK(cudaMalloc(&y, (size_t)M * N * sizeof(T)));
    CK(cudaMalloc(&yb, (size_t)M * N * sizeof(T)));
    CK(cudaMalloc(&ref, (size_t)M * N * sizeof(float)));
    CK(cudaMalloc(&acc, sizeof(cmp_acc)));
    if (!x || !w || !bias) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    const epi_params ep = make_epi(epi, N, bias);
    const float one = 1.f, zero = 0.f;
    /* reference: cuBLAS with f32 output (f32 accumulation), then the epilogue in f32 */
    CKB(cublasGemmEx(hb, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &one, w, cdt, K, x, cdt, K, &zero, ref, CUDA_R_32F, N,
                     CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    if (epi) {
        const long nw = (long)M * ((N + 127) / 128);
        ref_epi_kernel<T><<<(unsigned)((nw + 255) / 256), 256>>>(ref, M, N, ep);
        CK(cudaGetLastError());
    }
    CK(cudaMemset(y, 0xFF, (size_t)M * N * sizeof(T))); /* poison: NaN */
    launch<T>(v, x, w, y, M, N, K, ep, 0);
    CK(cudaGetLastError());
    { /* watchdog: a hung kernel ends the program with a message instead of the whole run */
        cudaEvent_t ev;
        CK(cudaEventCreate(&ev));
        CK(cudaEventRecord(ev));
        const time_t t0 = time(NULL);
        while (cudaEventQuery(ev) == cudaErrorNotReady)
            if (time(NULL) - t0 > 10) {
                printf("%-5s %s M=%d N=%d K=%d epi=%d: HANG (no completion after 10 s)\n", v.name, is_bf ? "bf16" : "f16", M, N, K, epi);
                fflush(stdout);
                _exit(2);
            }
        cudaEventDestroy(ev);
    }
    CK(cudaDeviceSynchronize());
    CK(cudaMemset(acc, 0, sizeof(cmp_acc)));
    cmp_kernel<T><<<1024, 256>>>(y, ref, (long)M * N, is_bf ? 8 : 11, acc);
    CK(cudaGetLastError());
    cmp_acc h;
    CK(cudaMemcpy(&h, acc, sizeof h, cudaMemcpyDeviceToHost));
    const double rel = sqrt(h.se / h.sr), rmax = h.maxd / h.maxr;
    /* pass: no NaN (every element written), output-rounding-level error; >1ulp is information */
    const bool ok = h.nan == 0 && rel < (is_bf ? 4e-3 : 6e-4) && rmax < (is_bf ? 8e-3 : 1e-3);
    /* timing: ours, then cuBLAS with the same output type */
    double t_ours, t_cb;
    time_pair([&] { launch<T>(v, x, w, y, M, N, K, ep, 0); },
              [&] {
                  cublasGemmEx(hb, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &one, w, cdt, K, x, cdt, K, &zero, yb, cdt, N,
                               CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
              },
              t_ours, t_cb);
    CK(cudaGetLastError());
    const double fl = 2.0 * M * N * (double)K;
    printf("%-5s %-4s epi=%d M=%6d N=%5d K=%5d | ours %8.3f ms %6.1f TF/s | cuBLAS %8.3f ms %6.1f TF/s | ours/cuBLAS rate %5.3f  time %5.3fx"
           " | relL2 %.2e maxabs/max %.2e nan %llu >1ulp %llu %s\n",
           v.name, is_bf ? "bf16" : "f16", epi, M, N, K, t_ours, fl / t_ours * 1e-9, t_cb, fl / t_cb * 1e-9, t_cb / t_ours,
           t_ours / t_cb, rel, rmax, h.nan, h.ulp, ok ? "OK" : "FAIL");
    fflush(stdout);
    cudaFree(x), cudaFree(w), cudaFree(bias), cudaFree(y), cudaFree(yb), cudaFree(ref), cudaFree(acc);
    return ok ? 0 : 1;
}

static const variant *find_variant(const char *n) {
    for (const variant &v : VARIANTS)
        if (!strcmp(v.name, n)) return &v;
    return NULL;
}
static int row(const char *vn, int M, int N, int K, const char *dts, int epi, cublasHandle_t hb) {
    const variant *v = find_variant(vn);
    if (!v || (N & 1) || K % 8) {
        fprintf(stderr, "bad row: %s %d %d %d (a variant of VARIANTS; N even, K %% 8 == 0)\n", vn, M, N, K);
        return 1;
    }
    return strcmp(dts, "f16") ? run_row<__nv_bfloat16>(*v, M, N, K, epi, hb) : run_row<__half>(*v, M, N, K, epi, hb);
}

int main(int argc, char **argv) {
    (void)copy_bandwidth, (void)time_ms<void (*)()>; /* cuda_common.h's, unused here */
    cudaDeviceProp pr;
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&pr, dev) != cudaSuccess) {
        printf("gemm_wgmma: no CUDA device\n");
        return 0;
    }
    if (pr.major != 9 || pr.minor != 0) {
        printf("gemm_wgmma: needs sm_90a (a Hopper GPU); this is %s, sm_%d%d\n", pr.name, pr.major, pr.minor);
        return 0;
    }
    int *pf = NULL, hf = 0;
    CK(cudaMalloc(&pf, sizeof(int)));
    CK(cudaMemset(pf, 0, sizeof(int)));
    probe_kernel<<<1, 1>>>(pf);
    const cudaError_t pe = cudaDeviceSynchronize();
    if (pe == cudaSuccess) CK(cudaMemcpy(&hf, pf, sizeof(int), cudaMemcpyDeviceToHost));
    cudaFree(pf);
    (void)cudaGetLastError();
    if (pe != cudaSuccess || !hf) {
        printf("gemm_wgmma: needs sm_90a machine code (build with -gencode arch=compute_90a,code=sm_90a)\n");
        return 0;
    }
    g_sms = pr.multiProcessorCount;
    time_t now = time(NULL);
    char date[64];
    strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", gmtime(&now));
    printf("gemm_wgmma: %s, %d SMs, commit %s, %s, %d reps (median)\n", pr.name, g_sms, SSM_BENCH_COMMIT, date, REPS);
    cublasHandle_t hb;
    CKB(cublasCreate(&hb));
    int fails = 0;
    if (argc >= 6) {
        fails += row(argv[1], atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), argv[5], argc > 6 ? atoi(argv[6]) : 0, hb);
    } else {
        const char *only = argc > 1 ? argv[1] : NULL; /* a variant name, or none: every variant */
        struct shp {
            int M, N, K;
            const char *dt;
        } shapes[] = {{8192, 8192, 8192, "bf16"}, {8192, 8192, 8192, "f16"}, {8192, 8224, 2048, "bf16"},
                      {32768, 8224, 2048, "bf16"}, {2048, 8224, 2048, "bf16"}, {1000, 8224, 2040, "bf16"}};
        for (const variant &v : VARIANTS) {
            if (only && strcmp(only, v.name)) continue;
            for (const shp &s : shapes) fails += row(v.name, s.M, s.N, s.K, s.dt, 0, hb);
        }
        for (const variant &v : VARIANTS) {
            if (only && strcmp(only, v.name)) continue;
            for (const shp &s : shapes)
                if (!strcmp(s.dt, "bf16")) fails += row(v.name, s.M, s.N, s.K, s.dt, 1, hb);
        }
    }
    cublasDestroy(hb);
    printf("gemm_wgmma: %d failed rows\n", fails);
    return fails ? 1 : 0;
}
