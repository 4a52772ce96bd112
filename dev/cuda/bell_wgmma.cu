/* Dev harness: block-ELL forward on Hopper (sm_90a), TMA + wgmma (issue #10), checked against
   and timed beside dense cuBLAS on the densified weight (llm.c style: variants picked by argv).
     nvcc -O3 -std=c++17 -I. -gencode arch=compute_90a,code=sm_90a dev/cuda/bell_wgmma.cu \
          -lcublas -o build/dev_bell_wgmma                  (make build/dev_bell_wgmma)
     ./build/dev_bell_wgmma                          the whole table (every variant and shape)
     ./build/dev_bell_wgmma VARIANT                  one variant over the table
     ./build/dev_bell_wgmma VARIANT N IN OUT B DENS DTYPE   one row (DTYPE bf16 | f16)
   Layout as ssm.h's ssm_bell_*: values [R,K,B,B] (tile k of block-row r is W[r*B.., c*B..],
   c = col_idx[r,k], row-major, input features contiguous), x [N, C*B], y [N, R*B], bias [R*B];
   y = x W^T + bias, 16-bit in and out, f32 accumulation. Requires IN % 8 == 0 (TMA row pitch);
   any N (TMA zero-fills rows past N, the epilogue masks its stores).

   Kernel (every variant): the library's grouping (ssm_cuda.h >>bell): a CTA owns BM tokens and a
   group of G = NF / B block-rows (NF output features) and walks the ascending union of the
   input blocks its G rows use; per union entry it loads the BM x B box of x once (TMA, at
   column e * B) and the active members' B x B tiles (TMA over values seen as [R*K*B, B]), and
   issues wgmma m64nBk16 for the active members only (per member accumulators). The members'
   activity pattern picks one of 2^SG - 1 straight-line blocks (fence, wgmmas, commit, wait<0>)
   per subgroup of SG <= 4 members (ent_mm below): a run-time test around each member's
   wgmmas made ptxas serialize them (C7520 on a plain condition; with __any_sync a gsb0 closed
   a group at every branch merge, SASS of db8cb6b; C7515 with a group in flight across the
   branches). x traffic is then that of a dense GEMM with NF-wide
   tiles whatever B is, and the MMA work is the useful work. Rows of x and of the tiles are 2B
   bytes, so each uses the matching TMA swizzle (128 / 64 / 32 bytes for B = 64 / 32 / 16) and
   the wgmma descriptors name the same mode.
   Warp specialization as dev/cuda/gemm_wgmma.cu (its device helpers are copied here, since
   this harness includes ssm.h only): warpgroup 0 produces (setmaxnreg 40; its first warp
   stages 32 union entries at a time in shared memory, lane 0 issues the TMA loads into a ring
   of ST stages with full / empty mbarriers and writes each stage's member mask beside it),
   warpgroups 1 and 2 consume (setmaxnreg 232), each owning 64 * MW tokens of the tile.
   RS = 1: the x operand goes to registers (ldmatrix through the swizzle) and wgmma reads
   only the tile from shared memory: with N = B = 16 / 32, an m64nBk16 that reads A from shared
   memory moves 2 KB of A for B / 2 tensor-core cycles, more than shared memory delivers.
   Variants (NF output features a CTA, MW m64 slabs a consumer warpgroup, BM = 128 * MW tokens):
     w128  NF 128, MW 2 (BM 256), A in registers    pw128  w128 persistent (grid = #SMs, tiles
           t, t + grid, ...); s128 (A from shared memory), r128 / p128 (MW 1), r256 / p256
           (NF 256) ran at db8cb6b and 742ccbf and lost at every B; dropped since
     t64 / pt64 (B = 64 only): roles swapped, m64n256k16 with the W tile as A and 256 tokens as
           N (bell_fwd_t_kernel), one wgmma group in flight across entries; t64w0 / pt64w0: the
           same with wait<0> after every entry (as the union kernel)
     c64 / pc64 (B = 64 only): t64 in clusters of 2 CTAs, x multicast (bell_fwd_c_kernel);
           c64x4 / pc64x4: clusters of 4
   (p: persistent.)
   Tiles are numbered group-fastest, so CTAs running together read the same x rows (L2) and
   the whole W (50% of 2048 x 8192 bf16 = 16 MB) stays in L2.
   The union tables (per group: ascending input blocks with the slot of each member, -1 when
   inactive) are built on the host here; the library builds the same on the device.
   The winner (pt64) is in the library since 40d7a8e as ssm_cuda.h's ssm__blw_kernel (forward,
   and dx through wgmma's transpose of A), beside a wgmma dvalues kernel; this harness stays for
   the variants. Measured side by side under ncu (locked clocks, 2048->8192, N = 32768, bf16):
   this pt64 1.17 ms, the library's kernel 1.29 ms, with the same registers (168), L2 hit rate
   and traffic; the 10% is not explained yet (bench/results/cuda_bell_b64_e426cd2.log has the
   library's rows).

   Measured on an H200 (bench/results/cuda_bell_wgmma_742ccbf.log; ours and cuBLAS timed
   alternately in each row; cuBLAS's own time for one shape spreads by up to 20% between rows,
   e.g. 1.26-1.54 ms at N 32768 4096->4096, so read several rows). bf16, 50% density, speedup =
   dense cuBLAS time / ours:
     B 64, pt64w0: 2048->8192 N 8192 / 32768: 1.35x / 1.34x; 4096->4096: 1.38x / 1.46x;
       640->2560 N 8192: 0.99x (t64w0 1.24-1.30x / 0.89x); 25% density 2.13x / 2.41x, 75% 1.06x /
       1.12x (N 32768); f16 1.41x. The union kernel at B 64 (pw128): 0.92-1.04x.
     B 32, pw128: 0.56-0.58x (640->2560: 0.48x).   B 16, pw128: 0.20-0.24x.
     Against the library's mma.sync kernels (bench/results/cuda_bell.log, 508d6a1), N 32768
     2048->8192: B 64 3.90 -> 0.96 ms, B 32 5.41 -> 2.30 ms, B 16 8.02 -> 6.49 ms.
   Why the targets (1.5x / 1.2x / 1.0x) are missed (ncu, bench/results/cuda_bell_wgmma_ncu_c8f7582.txt):
     - pt64 (c8f7582: wait<0> per entry, element stores): tensor pipe 65% of elapsed cycles, L2
       at 67% of its peak, and only 13% slower at ncu's 1.31 GHz than at 1.98 GHz: bound by
       L2 -> SM traffic (x is re-read for every pair of rows: 75% of it per pair at 50% density,
       2 / (64 x 1.33) bytes a MAC, against 2 / 256 for a dense 256-wide tile), plus a drain
       per entry. c64 / c64x4 (x multicast across 2 / 4 CTAs) and t64 (a group in flight) are
       meant to cut both; they hung at 742ccbf (a deadlock in the skip path, fixed since in
       the source and in a model of the ring, NOT yet re-run on a GPU).
     - union kernel at B 16 / 32 (pw128 B 16): issue- and latency-bound, 23% of issue slots busy,
       0.3 eligible warps a scheduler, stalls on L1TEX (ldmatrix) and fixed-latency
       dependencies; each union entry carries B / 2 tensor cycles per member (m64n16k16 = 8)
       against ~1000-1600 cycles per entry measured (a wait<0> per pattern block, since a wgmma
       group cannot stay in flight across the activity branches without ptxas serializing,
       plus a 2B-byte-wide TMA box per entry). */
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
#include <vector>
#include <algorithm>
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

/* ---- sm_90a primitives (as dev/cuda/gemm_wgmma.cu) ------------------------------------------ */
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define BW_SM90A 1
#endif
#ifdef BW_SM90A
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
__device__ __forceinline__ void tma_load_2d_mc(void *dst, const CUtensorMap *map, uint64_t *bar, int c0, int c1, uint16_t cta_mask) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {%3, %4}], [%2], %5;\n" ::"r"(
                     smem_u32(dst)),
                 "l"((uint64_t)map), "r"(smem_u32(bar)), "r"(c0), "r"(c1), "h"(cta_mask)
                 : "memory");
}
/* b's twin in CTA cta of the cluster; REL 1: .release.cluster, 0: the default .release.cta (the
   consumer's reads of the stage are wgmma's, retired before the arrival) */
template <int REL> __device__ __forceinline__ void mbar_arrive_remote(uint64_t *b, uint32_t cta) {
    uint32_t ra;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(ra) : "r"(smem_u32(b)), "r"(cta));
    if (REL) asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(ra) : "memory");
    else asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(ra) : "memory");
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
/* K-major operand in shared memory, rows of 2B bytes in the 2B-byte swizzle (TMA's): 8-row
   core groups 16B bytes apart (SBO), LBO unused (1); layout 1 = 128 B, 2 = 64 B, 3 = 32 B. */
template <int B> __device__ __forceinline__ uint64_t sdesc(const void *p) {
    constexpr uint64_t lay = B == 64 ? 1 : B == 32 ? 2 : 3;
    return (uint64_t)((smem_u32(p) & 0x3FFFF) >> 4) | (1ull << 16) | ((uint64_t)B << 32) /* SBO 16B bytes, in 16-byte units */ | (lay << 62);
}
__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void wg_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory"); }
__device__ __forceinline__ void reg_fence(float &r) { asm volatile("" : "+f"(r)::"memory"); }
__device__ __forceinline__ void reg_fence_u(uint32_t &r) { asm volatile("" : "+r"(r)::"memory"); }
__device__ __forceinline__ void ldsm_x4(uint32_t *a, uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3])
                 : "r"(addr)
                 : "memory");
}
/* wgmma m64nNk16, f32 accumulators d[N / 2]: ss (A and B by descriptor) and rs (A from four
   registers, the m16n8k16 A fragment of the warp's 16 rows). */
template <int N, typename T> struct wgmma_op;
template <> struct wgmma_op<16, __nv_bfloat16> {
    static __device__ __forceinline__ void ss(float *d, uint64_t da, uint64_t db) {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, p, 1, 1, 0, 0;\n}\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
                     : "l"(da), "l"(db), "r"(1));
    }
    static __device__ __forceinline__ void rs(float *d, const uint32_t *a, uint64_t db) {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %13, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7}, {%8, %9, %10, %11}, %12, p, 1, 1, 0;\n}\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
    }
};
template <> struct wgmma_op<16, __half> {
    static __device__ __forceinline__ void ss(float *d, uint64_t da, uint64_t db) {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, p, 1, 1, 0, 0;\n}\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
                     : "l"(da), "l"(db), "r"(1));
    }
    static __device__ __forceinline__ void rs(float *d, const uint32_t *a, uint64_t db) {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %13, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7}, {%8, %9, %10, %11}, %12, p, 1, 1, 0;\n}\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
    }
};
template <> struct wgmma_op<32, __nv_bfloat16> {
    static __device__ __forceinline__ void ss(float *d, uint64_t da, uint64_t db) {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, %17, p, 1, 1, 0, 0;\n}\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
                     : "l"(da), "l"(db), "r"(1));
    }
    static __device__ __forceinline__ void rs(float *d, const uint32_t *a, uint64_t db) {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, {%16, %17, %18, %19}, %20, p, 1, 1, 0;\n}\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
    }
};
template <> struct wgmma_op<32, __half> {
    static __device__ __forceinline__ void ss(float *d, uint64_t da, uint64_t db) {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, %17, p, 1, 1, 0, 0;\n}\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
                     : "l"(da), "l"(db), "r"(1));
    }
    static __device__ __forceinline__ void rs(float *d, const uint32_t *a, uint64_t db) {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, {%16, %17, %18, %19}, %20, p, 1, 1, 0;\n}\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
    }
};
template <> struct wgmma_op<64, __nv_bfloat16> {
    static __device__ __forceinline__ void ss(float *d, uint64_t da, uint64_t db) {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                     : "l"(da), "l"(db), "r"(1));
    }
    static __device__ __forceinline__ void rs(float *d, const uint32_t *a, uint64_t db) {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1, 0;\n}\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
    }
};
template <> struct wgmma_op<64, __half> {
    static __device__ __forceinline__ void ss(float *d, uint64_t da, uint64_t db) {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                     : "l"(da), "l"(db), "r"(1));
    }
    static __device__ __forceinline__ void rs(float *d, const uint32_t *a, uint64_t db) {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1, 0;\n}\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
    }
};
template <> struct wgmma_op<128, __nv_bfloat16> {
    static __device__ __forceinline__ void ss(float *d, uint64_t da, uint64_t db) {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 0;\n}\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                     : "l"(da), "l"(db), "r"(1));
    }
};
template <> struct wgmma_op<128, __half> {
    static __device__ __forceinline__ void ss(float *d, uint64_t da, uint64_t db) {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 0;\n}\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                     : "l"(da), "l"(db), "r"(1));
    }
};
template <> struct wgmma_op<256, __nv_bfloat16> {
    static __device__ __forceinline__ void ss(float *d, uint64_t da, uint64_t db) {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, p, 1, 1, 0, 0;\n}\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
                     : "l"(da), "l"(db), "r"(1));
    }
};
template <> struct wgmma_op<256, __half> {
    static __device__ __forceinline__ void ss(float *d, uint64_t da, uint64_t db) {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, p, 1, 1, 0, 0;\n}\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
                     : "l"(da), "l"(db), "r"(1));
    }
};
#endif /* BW_SM90A */

/* Per-variant constants. Stage: the x box [BM][B] then G tiles [B][B]; every piece starts at a
   multiple of its swizzle atom (8 rows of 2B bytes) and the ring at 1024 bytes. */
template <int B, int NF, int MW> struct cfg {
    static constexpr int G = NF / B, BM = 128 * MW, XB = BM * B * 2, TB = B * B * 2, SB = XB + G * TB;
    static constexpr int ST0 = (200 * 1024) / SB, ST = ST0 > 32 ? 32 : ST0;
    static constexpr int E = 1 + G;                                   /* ints per union entry */
    static constexpr int SMEM = ST * SB + 32 * E * 4 + ST * 4 + 2 * ST * 8 + 1024;
};

/* The wgmmas of one union entry for the members M0 .. M0 + SG - 1, whose activity pattern PT
   (bit m: member M0 + m active) is a compile-time constant: each pattern is its own
   straight-line block with its own fence, commit and wait, picked by a chain of uniform
   compares. A run-time test around each member's wgmmas made ptxas close a wgmma group at
   every branch merge (gsb0 per member in SASS) so that the wait after the entry waited for
   all of its work: no overlap between entries, ~1000 cycles an entry (first H200 run). */
template <typename T, int B, int MW, int RS, int G> struct ent_mm {
    static constexpr int KS = B / 16, TB = B * B * 2, SG = G < 4 ? G : 4;
    typedef float acc_t[G][MW][B / 2];
    typedef uint32_t frag_t[MW][KS][4];
    template <int M0, int PT>
    static __device__ __forceinline__ void issue(acc_t &acc, const frag_t &a, const unsigned char *xa, const unsigned char *tiles) {
#ifdef BW_SM90A
        wg_fence();
#pragma unroll
        for (int m = 0; m < SG; ++m) {
            if (!(PT >> m & 1)) continue;
            const int mm = M0 + m < G ? M0 + m : 0;
            const unsigned char *tile = tiles + (M0 + m) * TB;
#pragma unroll
            for (int w = 0; w < MW; ++w)
#pragma unroll
                for (int k = 0; k < KS; ++k) {
                    if (RS)
                        wgmma_op<B, T>::rs(acc[mm][w], a[w][k], sdesc<B>(tile + 32 * k));
                    else
                        wgmma_op<B, T>::ss(acc[mm][w], sdesc<B>(xa + w * 64 * 2 * B + 32 * k), sdesc<B>(tile + 32 * k));
                }
        }
        wg_commit();
        wg_wait<0>();
#endif
    }
    template <int M0, int PT>
    static __device__ __forceinline__ void dispatch(int pm, acc_t &acc, const frag_t &a, const unsigned char *xa, const unsigned char *tiles) {
        if constexpr (PT < (1 << SG)) {
            if (pm == PT) issue<M0, PT>(acc, a, xa, tiles);
            else dispatch<M0, PT + 1>(pm, acc, a, xa, tiles);
        }
    }
    /* every subgroup of SG members, its pattern from the entry's mask */
    template <int M0 = 0> static __device__ __forceinline__ void entry(int mask, acc_t &acc, const frag_t &a, const unsigned char *xa,
                                                                        const unsigned char *tiles) {
        if constexpr (M0 < G) {
            const int pm = (mask >> M0) & ((1 << SG) - 1);
            dispatch<M0, 1>(pm, acc, a, xa, tiles);
            entry<M0 + SG>(mask, acc, a, xa, tiles);
        }
    }
};

/* The producer warp (as dev/cuda/gemm_wgmma.cu's, one lane issuing): tiles t = blockIdx.x,
   + gridDim.x, ...; per union entry the x box [BM][B] at (e * B, tt * BM) and the active
   members' tiles, into the ring; the member mask beside each stage. */
template <int B, int G, int BM>
__device__ __forceinline__ void produce(const CUtensorMap &tx, const CUtensorMap &tw, const int *ent, const int *count, int C, int ngr,
                                        int ntiles, unsigned char *ring, int *sent, int *smask, uint64_t *full, uint64_t *empty,
                                        int lane) {
#ifdef BW_SM90A
    constexpr int XB = BM * B * 2, TB = B * B * 2, SB = XB + G * TB, ST0 = (200 * 1024) / SB, ST = ST0 > 32 ? 32 : ST0, E = 1 + G;
    int s = 0, ph = 0;
    for (int t = blockIdx.x; t < ntiles; t += gridDim.x) {
        const int grp = t % ngr, tt = t / ngr, cnt = count[grp];
        const int *en = ent + (long)grp * C * E;
        for (int i0 = 0; i0 < cnt; i0 += 32) {
            /* 32 entries' table reads in flight at once (one thread's dependent loads
               took longer than a B = 16 entry's MMA work) */
            __syncwarp();
            for (int q = lane; q < 32 * E; q += 32) sent[q] = i0 * E + q < cnt * E ? en[i0 * E + q] : -1;
            __syncwarp();
            const int n = cnt - i0 < 32 ? cnt - i0 : 32;
            if (lane == 0)
                for (int j = 0; j < n; ++j) {
                    const int *sj = sent + j * E;
                    int mask = 0, na = 0;
#pragma unroll
                    for (int m = 0; m < G; ++m)
                        if (sj[1 + m] >= 0) mask |= 1 << m, ++na;
                    mbar_wait(&empty[s], ph ^ 1);
                    unsigned char *st = ring + s * SB;
                    smask[s] = mask; /* published by the arrive below (release) */
                    mbar_expect_tx(&full[s], XB + na * TB);
                    tma_load_2d(st, &tx, &full[s], sj[0] * B, tt * BM);
#pragma unroll
                    for (int m = 0; m < G; ++m)
                        if (sj[1 + m] >= 0) tma_load_2d(st + XB + m * TB, &tw, &full[s], 0, sj[1 + m] * B);
                    if (++s == ST) s = 0, ph ^= 1;
                }
        }
    }
#endif
}

/* ent[(grp * C + i) * E ..]: union entry i of group grp = {input block e, slot of member 0 ..
   G - 1 (-1: inactive)}, i < count[grp], ascending e. */
template <typename T, int B, int NF, int MW, int RS>
__global__ void __launch_bounds__(384, 1) bell_fwd_kernel(const __grid_constant__ CUtensorMap tx, const __grid_constant__ CUtensorMap tw,
                                                          const int *ent, const int *count, int C, const T *bias, T *y,
                                                          long ldy, int N, int R, int ngr, int ntiles) {
#ifdef BW_SM90A
    typedef cfg<B, NF, MW> K_;
    constexpr int G = K_::G, BM = K_::BM, XB = K_::XB, SB = K_::SB, ST = K_::ST, E = K_::E;
    constexpr int KS = B / 16; /* k16 steps per entry */
    extern __shared__ unsigned char smem_raw[];
    unsigned char *ring = (unsigned char *)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
    int *sent = (int *)(ring + ST * SB); /* [32][E]: the producer warp's staged entries */
    int *smask = sent + 32 * E;          /* [ST] member mask of each stage */
    uint64_t *full = (uint64_t *)(((uintptr_t)(smask + ST) + 7) & ~(uintptr_t)7), *empty = full + ST;
    const int wg = threadIdx.x / 128, tid = threadIdx.x % 128, warp = tid / 32, lane = tid % 32;
    if (threadIdx.x == 0) {
        for (int s = 0; s < ST; ++s) mbar_init(&full[s], 1), mbar_init(&empty[s], 8);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    if (wg == 0) { /* producer */
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
        if (warp == 0) produce<B, G, BM>(tx, tw, ent, count, C, ngr, ntiles, ring, sent, smask, full, empty, lane);
    } else { /* consumers: warpgroup wg owns tokens (wg - 1) * 64 * MW ... of the tile */
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
        float acc[G][MW][B / 2];
        uint32_t a[2][MW][KS][4]; /* RS: x fragments, two entries' worth */
        (void)a;
        int s = 0, ph = 0;
        for (int t = blockIdx.x; t < ntiles; t += gridDim.x) {
            const int grp = t % ngr, tt = t / ngr, cnt = count[grp];
#pragma unroll
            for (int m = 0; m < G; ++m)
#pragma unroll
                for (int w = 0; w < MW; ++w)
#pragma unroll
                    for (int i = 0; i < B / 2; ++i) acc[m][w][i] = 0.f;
            int prev = -1;
            /* one union entry with x fragment buffer P (RS) */
            auto step = [&](auto Pc) {
                constexpr int P = decltype(Pc)::value;
                mbar_wait(&full[s], ph);
                const int mask = *(volatile int *)&smask[s];
                const unsigned char *st = ring + s * SB;
                if (RS) {
#pragma unroll
                    for (int w = 0; w < MW; ++w)
#pragma unroll
                        for (int k = 0; k < KS; ++k) {
                            /* lanes 0-15: rows 0-15 at k, lanes 16-31: the same rows at k + 8 */
                            const uint32_t off = (uint32_t)((((wg - 1) * MW + w) * 64 + warp * 16 + (lane & 15)) * (2 * B) + k * 32 +
                                                            (lane >> 4) * 16);
                            constexpr uint32_t sw = B == 64 ? 7 : B == 32 ? 3 : 1;
                            ldsm_x4(a[P][w][k], smem_u32(st) + (off ^ (((off >> 7) & sw) << 4)));
                        }
                }
#pragma unroll
                for (int m = 0; m < G; ++m)
#pragma unroll
                    for (int w = 0; w < MW; ++w)
#pragma unroll
                        for (int i = 0; i < B / 2; ++i) reg_fence(acc[m][w][i]);
                ent_mm<T, B, MW, RS, G>::entry(mask, acc, a[P], st + ((wg - 1) * MW) * 64 * 2 * B, st + XB);
#pragma unroll
                for (int m = 0; m < G; ++m)
#pragma unroll
                    for (int w = 0; w < MW; ++w)
#pragma unroll
                        for (int i = 0; i < B / 2; ++i) reg_fence(acc[m][w][i]);
                if (prev >= 0 && lane == 0) mbar_arrive(&empty[prev]);
                prev = s;
                if (++s == ST) s = 0, ph ^= 1;
            };
            int i = 0;
            for (; i + 1 < cnt; i += 2) step(std::integral_constant<int, 0>()), step(std::integral_constant<int, 1>());
            if (i < cnt) step(std::integral_constant<int, 0>());
            wg_wait<0>();
#pragma unroll
            for (int m = 0; m < G; ++m)
#pragma unroll
                for (int w = 0; w < MW; ++w)
#pragma unroll
                    for (int i2 = 0; i2 < B / 2; ++i2) reg_fence(acc[m][w][i2]);
            if (prev >= 0 && lane == 0) mbar_arrive(&empty[prev]);
            /* epilogue: d[4j + {0,1}] row r0, columns 8j + 2q + {0,1}; d[4j + {2,3}] row r0 + 8 */
            const int q = lane % 4;
#pragma unroll
            for (int m = 0; m < G; ++m) {
                const int r = grp * G + m;
                if (r >= R) break;
#pragma unroll
                for (int w = 0; w < MW; ++w) {
                    const int r0 = tt * BM + ((wg - 1) * MW + w) * 64 + warp * 16 + lane / 4;
                    const bool ok0 = r0 < N, ok1 = r0 + 8 < N;
#pragma unroll
                    for (int j = 0; j < B / 8; ++j) {
                        const int c = r * B + 8 * j + 2 * q;
                        const float b0 = bias ? ldf<T>(bias, c) : 0.f, b1 = bias ? ldf<T>(bias, c + 1) : 0.f;
                        const float *d = acc[m][w];
                        if (ok0) st2<T>(y + (long)r0 * ldy + c, d[4 * j] + b0, d[4 * j + 1] + b1);
                        if (ok1) st2<T>(y + (long)(r0 + 8) * ldy + c, d[4 * j + 2] + b0, d[4 * j + 3] + b1);
                    }
                }
            }
        }
    }
#endif
}

/* Swapped roles (variants t64, pt64; B = 64 only): the output tile transposed, y^T = W x^T,
   with the tile's 64 output features as wgmma's M and 256 tokens as its N: m64n256k16 with
   A = the W tile and B = the x box, both K-major in the 128-byte swizzle, so every wgmma is a
   full-width one (m64n64k16 moves as many operand bytes per FLOP as a 64-wide dense tile).
   A CTA owns 256 tokens and a group of TG block-rows; consumer warpgroup j owns block-row
   grp * TG + j - 1 (128 f32 accumulators a thread) and walks the group's union entries,
   skipping those where its row is inactive: the branch holds a whole fence / wgmma / commit /
   wait<0> step, so no wgmma is in flight across it (ptxas keeps the wgmmas asynchronous).
   Epilogue: element stores (each thread holds 2 features x 64 tokens). */
template <typename T, int TG, int WD>
__global__ void __launch_bounds__(128 * (TG + 1), 1) bell_fwd_t_kernel(const __grid_constant__ CUtensorMap tx, const __grid_constant__ CUtensorMap tw,
                                                                       const int *ent, const int *count, int C, const T *bias, T *y,
                                                                       long ldy, int N, int R, int ngr, int ntiles) {
#ifdef BW_SM90A
    typedef cfg<64, 64 * TG, 2> K_;
    constexpr int B = 64, BM = 256, XB = K_::XB, TB = K_::TB, SB = K_::SB, ST = K_::ST, E = K_::E;
    static_assert(XB == BM * B * 2, "stage layout");
    /* TG = 3 (x shared by more rows) would need 512 threads: ptxas then caps every thread at 128
       registers, fewer than the 128 accumulators need (C7602) */
    static_assert(TG == 2, "two consumer warpgroups");
    extern __shared__ unsigned char smem_raw[];
    unsigned char *ring = (unsigned char *)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
    int *sent = (int *)(ring + ST * SB);
    int *smask = sent + 32 * E;
    uint64_t *full = (uint64_t *)(((uintptr_t)(smask + ST) + 7) & ~(uintptr_t)7), *empty = full + ST;
    const int wg = threadIdx.x / 128, tid = threadIdx.x % 128, warp = tid / 32, lane = tid % 32;
    if (threadIdx.x == 0) {
        for (int s = 0; s < ST; ++s) mbar_init(&full[s], 1), mbar_init(&empty[s], 4 * TG);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    if (wg == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
        if (warp == 0) produce<B, TG, BM>(tx, tw, ent, count, C, ngr, ntiles, ring, sent, smask, full, empty, lane);
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
        const int j = wg - 1;
        float d[128];
        int s = 0, ph = 0;
        for (int t = blockIdx.x; t < ntiles; t += gridDim.x) {
            const int grp = t % ngr, tt = t / ngr, cnt = count[grp];
#pragma unroll
            for (int i = 0; i < 128; ++i) d[i] = 0.f;
            if (WD == 0) {
                for (int i = 0; i < cnt; ++i) {
                    mbar_wait(&full[s], ph);
                    const int mask = *(volatile int *)&smask[s];
                    if (__any_sync(0xffffffffu, mask >> j & 1)) {
                        const unsigned char *st = ring + s * SB;
#pragma unroll
                        for (int q = 0; q < 128; ++q) reg_fence(d[q]);
                        wg_fence();
#pragma unroll
                        for (int k = 0; k < 4; ++k) wgmma_op<256, T>::ss(d, sdesc<64>(st + XB + j * TB + 32 * k), sdesc<64>(st + 32 * k));
                        wg_commit();
                        wg_wait<0>();
#pragma unroll
                        for (int q = 0; q < 128; ++q) reg_fence(d[q]);
                    }
                    if (lane == 0) mbar_arrive(&empty[s]);
                    if (++s == ST) s = 0, ph ^= 1;
                }
            } else { /* one wgmma group in flight across entries: skip inactive entries in an inner
                        loop, so the wgmma block itself is not under a branch. The stage of the
                        group in flight (pend) is released when the next active entry's wait<1>
                        retires it, or at once (after wait<0>) when an entry is skipped: held across
                        skipped entries it deadlocked (742ccbf: every WD = 1 variant hung, the ring
                        came back around to pend while its owner waited for a later stage) */
                int i = 0, pend = -1;
                for (;;) {
                    for (; i < cnt; ++i) {
                        mbar_wait(&full[s], ph);
                        const int mask = *(volatile int *)&smask[s];
                        if (__any_sync(0xffffffffu, mask >> j & 1)) break;
                        if (pend >= 0) { /* see the note above the loop */
                            wg_wait<0>();
                            if (lane == 0) mbar_arrive(&empty[pend]);
                            pend = -1;
                        }
                        if (lane == 0) mbar_arrive(&empty[s]);
                        if (++s == ST) s = 0, ph ^= 1;
                    }
                    if (i >= cnt) break;
                    const unsigned char *st = ring + s * SB;
#pragma unroll
                    for (int q = 0; q < 128; ++q) reg_fence(d[q]);
                    wg_fence();
#pragma unroll
                    for (int k = 0; k < 4; ++k) wgmma_op<256, T>::ss(d, sdesc<64>(st + XB + j * TB + 32 * k), sdesc<64>(st + 32 * k));
                    wg_commit();
                    wg_wait<1>();
#pragma unroll
                    for (int q = 0; q < 128; ++q) reg_fence(d[q]);
                    if (pend >= 0 && lane == 0) mbar_arrive(&empty[pend]);
                    pend = s;
                    if (++s == ST) s = 0, ph ^= 1;
                    ++i;
                }
                wg_wait<0>();
#pragma unroll
                for (int q = 0; q < 128; ++q) reg_fence(d[q]);
                if (pend >= 0 && lane == 0) mbar_arrive(&empty[pend]);
            }
            /* d[4i + {0,1}]: feature f0, tokens 8i + 2q + {0,1}; d[4i + {2,3}]: feature f0 + 8. Lanes
               l and l ^ 4 hold features f and f + 1 of the same two tokens: one exchange gives
               each a feature pair of one token (4-byte stores, half as many) */
            const int r = grp * TG + j;
            if (r < R) {
                const int odd = (lane >> 2) & 1, q = lane % 4;
                const int fa = r * B + warp * 16 + (lane / 4 & ~1); /* the pair's first feature */
                const float ba0 = bias ? ldf<T>(bias, fa) : 0.f, ba1 = bias ? ldf<T>(bias, fa + 1) : 0.f;
                const float bb0 = bias ? ldf<T>(bias, fa + 8) : 0.f, bb1 = bias ? ldf<T>(bias, fa + 9) : 0.f;
#pragma unroll
                for (int i = 0; i < 32; ++i) {
                    /* even lane keeps token n (its d[.0]) and takes the odd lane's token-n value;
                       odd lane keeps token n + 1 (its d[.1]) and takes the even lane's */
                    const float x0 = __shfl_xor_sync(0xffffffffu, odd ? d[4 * i] : d[4 * i + 1], 4);
                    const float x1 = __shfl_xor_sync(0xffffffffu, odd ? d[4 * i + 2] : d[4 * i + 3], 4);
                    const int n = tt * BM + 8 * i + 2 * q + odd;
                    if (n < N) {
                        const float lo0 = odd ? x0 : d[4 * i], hi0 = odd ? d[4 * i + 1] : x0;
                        const float lo1 = odd ? x1 : d[4 * i + 2], hi1 = odd ? d[4 * i + 3] : x1;
                        st2<T>(y + (long)n * ldy + fa, lo0 + ba0, hi0 + ba1);
                        st2<T>(y + (long)n * ldy + fa + 8, lo1 + bb0, hi1 + bb1);
                    }
                }
            }
        }
    }
#endif
}

/* Cluster variants (c64, pc64: CL = 2; c64x4, pc64x4: CL = 4; B = 64): bell_fwd_t_kernel's
   roles in clusters of CL CTAs that share a token tile. The cluster walks the union of its
   2 CL block-rows (2 a CTA); each CTA loads 1 / CL of every x box (256 / CL of the 256 token
   rows) and multicasts it to all, so x crosses L2 once per cluster: at 50% density 94% (CL 2)
   or 99.6% (CL 4) of the input blocks per cluster, against 75% per independent CTA of 2 rows.
   A stage is refilled only when the consumers of every CTA have released it (empty barriers
   count 8 CL warps: 8 local arrivals, the rest remote). */
#ifdef BW_SM90A
__device__ __forceinline__ void mbar_wait_cluster(uint64_t *b, int phase) {
    uint32_t done;
    do {
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done)
                     : "r"(smem_u32(b)), "r"(phase)
                     : "memory");
    } while (!done);
}
#endif
/* a stage is released in every CTA of the cluster (each multicast into it) */
template <int CL, int REL> __device__ __forceinline__ void release_all(uint64_t *b, uint32_t rank) {
#ifdef BW_SM90A
    mbar_arrive(b);
#pragma unroll
    for (int c = 1; c < CL; ++c) mbar_arrive_remote<REL>(b, (rank + c) % CL);
#endif
}
template <typename T, int CL, int REL>
__global__ void __launch_bounds__(384, 1) bell_fwd_c_kernel(const __grid_constant__ CUtensorMap tx, const __grid_constant__ CUtensorMap tw,
                                                            const int *ent, const int *count, int C, const T *bias, T *y, long ldy,
                                                            int N, int R, int ngr, int nunits) {
#ifdef BW_SM90A
    typedef cfg<64, 128, 2> K_;
    constexpr int B = 64, BM = 256, XB = K_::XB, TB = K_::TB, SB = K_::SB, ST = K_::ST, E = 1 + 2 * CL; /* entries of 2 CL rows */
    extern __shared__ unsigned char smem_raw[];
    unsigned char *ring = (unsigned char *)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
    int *sent = (int *)(ring + ST * SB);
    int *smask = sent + 32 * E;
    uint64_t *full = (uint64_t *)(((uintptr_t)(smask + ST) + 7) & ~(uintptr_t)7), *empty = full + ST;
    const int wg = threadIdx.x / 128, tid = threadIdx.x % 128, warp = tid / 32, lane = tid % 32;
    const uint32_t rank = sreg_cluster_rank();
    const int cid = (int)sreg_cluster_id(), ncl = (int)sreg_ncluster();
    if (threadIdx.x == 0) {
        for (int s = 0; s < ST; ++s) mbar_init(&full[s], 1), mbar_init(&empty[s], 8 * CL);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    cluster_sync(); /* the peer's barriers exist before anything is multicast or arrived on */
    if (wg == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
        if (warp == 0) {
            int s = 0, ph = 0;
            for (int u = cid; u < nunits; u += ncl) {
                const int gp = u % ngr, tt = u / ngr, cnt = count[gp];
                const int *en = ent + (long)gp * C * E;
                for (int i0 = 0; i0 < cnt; i0 += 32) {
                    __syncwarp();
                    for (int q = lane; q < 32 * E; q += 32) sent[q] = i0 * E + q < cnt * E ? en[i0 * E + q] : -1;
                    __syncwarp();
                    const int n = cnt - i0 < 32 ? cnt - i0 : 32;
                    if (lane == 0)
                        for (int j = 0; j < n; ++j) {
                            const int *sj = sent + j * E;
                            const int s0 = sj[1 + 2 * rank], s1 = sj[2 + 2 * rank];
                            const int mask = (s0 >= 0) | (s1 >= 0) << 1, na = (s0 >= 0) + (s1 >= 0);
                            if (REL) mbar_wait_cluster(&empty[s], ph ^ 1);
                            else mbar_wait(&empty[s], ph ^ 1);
                            unsigned char *st = ring + s * SB;
                            smask[s] = mask;
                            mbar_expect_tx(&full[s], XB + na * TB);
                            tma_load_2d_mc(st + rank * (XB / CL), &tx, &full[s], sj[0] * B, tt * BM + (int)rank * (BM / CL), (uint16_t)((1 << CL) - 1));
                            if (s0 >= 0) tma_load_2d(st + XB, &tw, &full[s], 0, s0 * B);
                            if (s1 >= 0) tma_load_2d(st + XB + TB, &tw, &full[s], 0, s1 * B);
                            if (++s == ST) s = 0, ph ^= 1;
                        }
                }
            }
        }
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
        const int j = wg - 1;
        float d[128];
        int s = 0, ph = 0;
        for (int u = cid; u < nunits; u += ncl) {
            const int gp = u % ngr, tt = u / ngr, cnt = count[gp];
#pragma unroll
            for (int i = 0; i < 128; ++i) d[i] = 0.f;
            int i = 0, pend = -1;
            for (;;) {
                for (; i < cnt; ++i) {
                    mbar_wait(&full[s], ph);
                    const int mask = *(volatile int *)&smask[s];
                    if (__any_sync(0xffffffffu, mask >> j & 1)) break;
                    if (pend >= 0) { /* as bell_fwd_t_kernel: never hold a stage across skipped entries */
                        wg_wait<0>();
                        if (lane == 0) release_all<CL, REL>(&empty[pend], rank);
                        pend = -1;
                    }
                    if (lane == 0) release_all<CL, REL>(&empty[s], rank);
                    if (++s == ST) s = 0, ph ^= 1;
                }
                if (i >= cnt) break;
                const unsigned char *st = ring + s * SB;
#pragma unroll
                for (int q = 0; q < 128; ++q) reg_fence(d[q]);
                wg_fence();
#pragma unroll
                for (int k = 0; k < 4; ++k) wgmma_op<256, T>::ss(d, sdesc<64>(st + XB + j * TB + 32 * k), sdesc<64>(st + 32 * k));
                wg_commit();
                wg_wait<1>();
#pragma unroll
                for (int q = 0; q < 128; ++q) reg_fence(d[q]);
                if (pend >= 0 && lane == 0) release_all<CL, REL>(&empty[pend], rank);
                pend = s;
                if (++s == ST) s = 0, ph ^= 1;
                ++i;
            }
            wg_wait<0>();
#pragma unroll
            for (int q = 0; q < 128; ++q) reg_fence(d[q]);
            if (pend >= 0 && lane == 0) release_all<CL, REL>(&empty[pend], rank);
            const int r = gp * 2 * CL + (int)rank * 2 + j; /* as bell_fwd_t_kernel's epilogue */
            if (r < R) {
                const int odd = (lane >> 2) & 1, q = lane % 4;
                const int fa = r * B + warp * 16 + (lane / 4 & ~1);
                const float ba0 = bias ? ldf<T>(bias, fa) : 0.f, ba1 = bias ? ldf<T>(bias, fa + 1) : 0.f;
                const float bb0 = bias ? ldf<T>(bias, fa + 8) : 0.f, bb1 = bias ? ldf<T>(bias, fa + 9) : 0.f;
#pragma unroll
                for (int i2 = 0; i2 < 32; ++i2) {
                    const float x0 = __shfl_xor_sync(0xffffffffu, odd ? d[4 * i2] : d[4 * i2 + 1], 4);
                    const float x1 = __shfl_xor_sync(0xffffffffu, odd ? d[4 * i2 + 2] : d[4 * i2 + 3], 4);
                    const int n = tt * BM + 8 * i2 + 2 * q + odd;
                    if (n < N) {
                        const float lo0 = odd ? x0 : d[4 * i2], hi0 = odd ? d[4 * i2 + 1] : x0;
                        const float lo1 = odd ? x1 : d[4 * i2 + 2], hi1 = odd ? d[4 * i2 + 3] : x1;
                        st2<T>(y + (long)n * ldy + fa, lo0 + ba0, hi0 + ba1);
                        st2<T>(y + (long)n * ldy + fa + 8, lo1 + bb0, hi1 + bb1);
                    }
                }
            }
        }
    }
    __syncwarp(); /* the producer warp's lane 0 rejoins its warp before the .aligned cluster barrier */
    cluster_sync(); /* the peer may still multicast into this CTA or arrive on its barriers */
#endif
}

/* 1 in *f when this binary's device code is the sm_90a build (else the kernels above are empty) */
__global__ void probe_kernel(int *f) {
#ifdef BW_SM90A
    *f = 1;
#else
    *f = 0;
#endif
}

/* ---- reference and comparison ---------------------------------------------------------------- */
/* Wd[r*B + i][c*B + j] = values[r, k, i, j] for c = col_idx[r, k] (Wd zeroed before). */
template <typename T> __global__ void densify_kernel(const T *v, const int *ci, int R, int K, int B, long in, T *wd) {
    const long n = (long)R * K * B * B;
    for (long q = blockIdx.x * (long)blockDim.x + threadIdx.x; q < n; q += (long)gridDim.x * blockDim.x) {
        const long slot = q / (B * B);
        const int i = (int)(q / B % B), j = (int)(q % B), r = (int)(slot / K);
        wd[((long)r * B + i) * in + (long)ci[slot] * B + j] = v[q];
    }
}
template <typename T> __global__ void add_bias_kernel(float *z, const T *bias, long N, int out) {
    for (long q = blockIdx.x * (long)blockDim.x + threadIdx.x; q < N * out; q += (long)gridDim.x * blockDim.x)
        z[q] += ldf<T>(bias, q % out);
}
/* Compare y (T) with ref (f32): sum (y - ref)^2, sum ref^2, max |y - ref|, max |ref|, #NaN. */
struct cmp_acc {
    double se, sr, maxd, maxr;
    unsigned long long nan;
};
__device__ void atomicMaxPos(double *a, double v) {
    unsigned long long *p = (unsigned long long *)a, old = *p;
    while (__longlong_as_double((long long)old) < v) {
        unsigned long long prev = atomicCAS(p, old, (unsigned long long)__double_as_longlong(v));
        if (prev == old) break;
        old = prev;
    }
}
template <typename T> __global__ void cmp_kernel(const T *y, const float *ref, long n, cmp_acc *acc) {
    double se = 0, sr = 0, md = 0, mr = 0;
    unsigned long long nn = 0;
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
        const float v = ldf<T>(y, i), r = ref[i];
        if (!(v == v)) {
            ++nn;
            continue;
        }
        const double dd = fabs((double)v - r);
        se += dd * dd, sr += (double)r * r, md = fmax(md, dd), mr = fmax(mr, fabs((double)r));
    }
    for (int o = 16; o > 0; o >>= 1) {
        se += __shfl_xor_sync(0xffffffffu, se, o), sr += __shfl_xor_sync(0xffffffffu, sr, o);
        md = fmax(md, __shfl_xor_sync(0xffffffffu, md, o)), mr = fmax(mr, __shfl_xor_sync(0xffffffffu, mr, o));
        nn += __shfl_xor_sync(0xffffffffu, nn, o);
    }
    if ((threadIdx.x & 31) == 0)
        atomicAdd(&acc->se, se), atomicAdd(&acc->sr, sr), atomicMaxPos(&acc->maxd, md), atomicMaxPos(&acc->maxr, mr),
            atomicAdd(&acc->nan, nn);
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
/* [rows, cols] row-major with row pitch ld elements; boxes of box_rows x B, the 2B-byte swizzle */
static CUtensorMap make_map(const void *p, int bf16, long rows, long cols, long ld, int B, int box_rows) {
    CUtensorMap m;
    cuuint64_t dims[2] = {(cuuint64_t)cols, (cuuint64_t)rows}, strides[1] = {(cuuint64_t)ld * 2};
    cuuint32_t box[2] = {(cuuint32_t)B, (cuuint32_t)box_rows}, es[2] = {1, 1};
    const CUtensorMapSwizzle sw = B == 64 ? CU_TENSOR_MAP_SWIZZLE_128B : B == 32 ? CU_TENSOR_MAP_SWIZZLE_64B : CU_TENSOR_MAP_SWIZZLE_32B;
    CUresult r = encode_fn()(&m, bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, (void *)p, dims,
                             strides, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE, sw, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                             CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) {
        fprintf(stderr, "cuTensorMapEncodeTiled failed: %d\n", (int)r);
        exit(1);
    }
    return m;
}

struct variant {
    const char *name;
    int nf, mw, rs, persistent;
    int swapped; /* bell_fwd_t_kernel (B = 64, 256 tokens, 2 rows): 1 with wait<0> per entry, 2 with a group in flight;
                    3 / 4: bell_fwd_c_kernel (clusters of 2 / 4, 4 / 8 rows); 5: 3 with .cta-scope arrivals */
};
/* s128 (SS, NF 128), r128 / p128 (RS, NF 128, MW 1) and r256 / p256 (RS, NF 256) lost to w128 /
   pw128 at every B (bench/results/cuda_bell_wgmma_742ccbf.log) and were dropped after it: each
   instantiation set costs ~10 s of CI compile (compile-cuda builds every dev/cuda harness). */
static const variant VARIANTS[] = {{"w128", 128, 2, 1, 0, 0},    {"pw128", 128, 2, 1, 1, 0},   {"t64w0", 128, 2, 0, 0, 1},
                                   {"pt64w0", 128, 2, 0, 1, 1},  {"t64", 128, 2, 0, 0, 2},     {"pt64", 128, 2, 0, 1, 2},
                                   {"c64", 256, 2, 0, 0, 3},     {"pc64", 256, 2, 0, 1, 3},    {"c64x4", 512, 2, 0, 0, 4},
                                   {"pc64x4", 512, 2, 0, 1, 4},  {"pc64r", 256, 2, 0, 1, 5}};
static int g_sms = 132;

/* A layer on the device: col_idx (distinct random columns per row), values, x, bias, and the
   union tables for one grouping G. */
struct layer {
    long N, in, out;
    int B, R, C, K;
    std::vector<int> ci;
    int *dci = NULL;
    void *x = NULL, *v = NULL, *bias = NULL;
};
struct tables {
    int G = 0, ngr = 0;
    int *ent = NULL, *count = NULL;
};
static void tables_make(const layer &L, int G, tables &tb) {
    const int ngr = (L.R + G - 1) / G, E = 1 + G;
    std::vector<int> ent((size_t)ngr * L.C * E, -1), count((size_t)ngr, 0), slot_of((size_t)L.C * G);
    for (int g = 0; g < ngr; ++g) {
        std::fill(slot_of.begin(), slot_of.end(), -1);
        for (int m = 0; m < G && g * G + m < L.R; ++m) {
            const int r = g * G + m;
            for (int k = 0; k < L.K; ++k) slot_of[(size_t)L.ci[(size_t)r * L.K + k] * G + m] = r * L.K + k;
        }
        int n = 0;
        for (int e = 0; e < L.C; ++e) {
            bool any = false;
            for (int m = 0; m < G; ++m) any |= slot_of[(size_t)e * G + m] >= 0;
            if (!any) continue;
            int *p = &ent[((size_t)g * L.C + n) * E];
            p[0] = e;
            for (int m = 0; m < G; ++m) p[1 + m] = slot_of[(size_t)e * G + m];
            ++n;
        }
        count[(size_t)g] = n;
    }
    tb.G = G, tb.ngr = ngr;
    CK(cudaMalloc(&tb.ent, ent.size() * 4));
    CK(cudaMalloc(&tb.count, count.size() * 4));
    CK(cudaMemcpy(tb.ent, ent.data(), ent.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(tb.count, count.data(), count.size() * 4, cudaMemcpyHostToDevice));
}
static void tables_free(tables &tb) { cudaFree(tb.ent), cudaFree(tb.count), tb = tables(); }

template <typename T, int B, int NF, int MW, int RS>
static void launch_t(const variant &vr, const layer &L, const tables &tb, const CUtensorMap &mx, const CUtensorMap &mw, T *y,
                     cudaStream_t st) {
    typedef cfg<B, NF, MW> K_;
    auto kern = bell_fwd_kernel<T, B, NF, MW, RS>;
    static bool attr = false;
    if (!attr) {
        CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, K_::SMEM));
        attr = true;
    }
    const int ntiles = (int)((L.N + K_::BM - 1) / K_::BM) * tb.ngr;
    const int grid = vr.persistent ? (ntiles < g_sms ? ntiles : g_sms) : ntiles;
    kern<<<grid, 384, K_::SMEM, st>>>(mx, mw, tb.ent, tb.count, L.C, (const T *)L.bias, y, L.out, (int)L.N, L.R, tb.ngr, ntiles);
}
template <typename T, int B>
static void launch_b(const variant &vr, const layer &L, const tables &tb, const CUtensorMap &mx, const CUtensorMap &mw, T *y,
                     cudaStream_t st) {
    launch_t<T, B, 128, 2, 1>(vr, L, tb, mx, mw, y, st); /* the one union configuration kept (w128 / pw128) */
}
template <typename T, int WD>
static void launch_swapped(const variant &vr, const layer &L, const tables &tb, const CUtensorMap &mx, const CUtensorMap &mw, T *y,
                           cudaStream_t st) {
    typedef cfg<64, 128, 2> K_;
    auto kern = bell_fwd_t_kernel<T, 2, WD>;
    static bool attr = false;
    if (!attr) {
        CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, K_::SMEM));
        attr = true;
    }
    const int ntiles = (int)((L.N + 255) / 256) * tb.ngr;
    const int grid = vr.persistent ? (ntiles < g_sms ? ntiles : g_sms) : ntiles;
    kern<<<grid, 384, K_::SMEM, st>>>(mx, mw, tb.ent, tb.count, L.C, (const T *)L.bias, y, L.out, (int)L.N, L.R, tb.ngr, ntiles);
}
template <typename T, int CL, int REL>
static void launch_cluster(const variant &vr, const layer &L, const tables &tb, const CUtensorMap &mx, const CUtensorMap &mw, T *y,
                           cudaStream_t st) {
    typedef cfg<64, 128, 2> K_;
    auto kern = bell_fwd_c_kernel<T, CL, REL>;
    static int max_cl = 0; /* clusters of CL that fit at once */
    cudaLaunchConfig_t lc = {};
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = CL, at[0].val.clusterDim.y = 1, at[0].val.clusterDim.z = 1;
    lc.blockDim = dim3(384), lc.dynamicSmemBytes = K_::SMEM, lc.stream = st, lc.attrs = at, lc.numAttrs = 1;
    if (!max_cl) {
        CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, K_::SMEM));
        lc.gridDim = dim3(g_sms / CL * CL);
        CK(cudaOccupancyMaxActiveClusters(&max_cl, kern, &lc));
        printf("  (%d clusters of %d fit at once)\n", max_cl, CL);
    }
    const int nunits = (int)((L.N + 255) / 256) * tb.ngr; /* tb: groups of 2 CL rows */
    lc.gridDim = dim3(CL * (vr.persistent ? (nunits < max_cl ? nunits : max_cl) : nunits));
    CK(cudaLaunchKernelEx(&lc, kern, mx, mw, (const int *)tb.ent, (const int *)tb.count, L.C, (const T *)L.bias, y, (long)L.out,
                          (int)L.N, L.R, tb.ngr, nunits));
}
template <typename T>
static void launch(const variant &vr, const layer &L, const tables &tb, const CUtensorMap &mx, const CUtensorMap &mw, T *y,
                   cudaStream_t st) {
    if (vr.swapped == 1) launch_swapped<T, 0>(vr, L, tb, mx, mw, y, st);
    else if (vr.swapped == 2) launch_swapped<T, 1>(vr, L, tb, mx, mw, y, st);
    else if (vr.swapped == 3) launch_cluster<T, 2, 1>(vr, L, tb, mx, mw, y, st);
    else if (vr.swapped == 4) launch_cluster<T, 4, 1>(vr, L, tb, mx, mw, y, st);
    else if (vr.swapped == 5) launch_cluster<T, 2, 0>(vr, L, tb, mx, mw, y, st);
    else if (L.B == 16) launch_b<T, 16>(vr, L, tb, mx, mw, y, st);
    else if (L.B == 32) launch_b<T, 32>(vr, L, tb, mx, mw, y, st);
    else launch_b<T, 64>(vr, L, tb, mx, mw, y, st);
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

/* One row: variant vr on a fresh layer; check against cuBLAS (f32 out) on the densified W
   plus the bias, then time ours (with bias) beside cuBLAS dense (same dtype out, no bias). */
template <typename T>
static int run_row(const variant &vr, long N, long in, long out, int B, double dens, cublasHandle_t hb, int timed) {
    const int is_bf = std::is_same<T, __nv_bfloat16>::value;
    const ssm_dtype dt = is_bf ? ssm_dtype{SSM_DTYPE_BFLOAT, 16, 1} : ssm_dtype{SSM_DTYPE_FLOAT, 16, 1};
    const cudaDataType cdt = is_bf ? CUDA_R_16BF : CUDA_R_16F;
    layer L;
    L.N = N, L.in = in, L.out = out, L.B = B, L.R = (int)(out / B), L.C = (int)(in / B);
    L.K = (int)(dens * L.C + 0.5);
    if (L.K < 1) L.K = 1;
    L.ci.resize((size_t)L.R * L.K);
    srand(1234u + (unsigned)(B * 7 + L.K));
    for (int r = 0; r < L.R; ++r) { /* K distinct columns, in random order */
        std::vector<int> p((size_t)L.C);
        for (int q = 0; q < L.C; ++q) p[(size_t)q] = q;
        for (int q = L.C - 1; q > 0; --q) std::swap(p[(size_t)q], p[(size_t)(rand() % (q + 1))]);
        for (int k = 0; k < L.K; ++k) L.ci[(size_t)r * L.K + k] = p[(size_t)k];
    }
    CK(cudaMalloc(&L.dci, L.ci.size() * 4));
    CK(cudaMemcpy(L.dci, L.ci.data(), L.ci.size() * 4, cudaMemcpyHostToDevice));
    const long nv = (long)L.R * L.K * B * B;
    L.x = dev_random(dt, N * in, 1.f, 1234u + (unsigned)N), L.v = dev_random(dt, nv, 0.1f, 777u + (unsigned)out);
    L.bias = dev_random(dt, out, 1.f, 99u);
    T *y = NULL, *yd = NULL, *wd = NULL;
    float *ref = NULL;
    cmp_acc *acc = NULL;
    CK(cudaMalloc(&y, (size_t)N * out * sizeof(T)));
    CK(cudaMalloc(&yd, (size_t)N * out * sizeof(T)));
    CK(cudaMalloc(&wd, (size_t)out * in * sizeof(T)));
    CK(cudaMalloc(&ref, (size_t)N * out * sizeof(float)));
    CK(cudaMalloc(&acc, sizeof(cmp_acc)));
    if (!L.x || !L.v || !L.bias) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    CK(cudaMemset(wd, 0, (size_t)out * in * sizeof(T)));
    densify_kernel<T><<<2048, 256>>>((const T *)L.v, L.dci, L.R, L.K, B, in, wd);
    CK(cudaGetLastError());
    const float one = 1.f, zero = 0.f;
    CKB(cublasGemmEx(hb, CUBLAS_OP_T, CUBLAS_OP_N, (int)out, (int)N, (int)in, &one, wd, cdt, (int)in, L.x, cdt, (int)in, &zero, ref,
                     CUDA_R_32F, (int)out, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    add_bias_kernel<T><<<2048, 256>>>(ref, (const T *)L.bias, N, (int)out);
    CK(cudaGetLastError());
    tables tb;
    const int ccl = vr.swapped == 4 ? 4 : vr.swapped == 3 || vr.swapped == 5 ? 2 : 1; /* cluster CTAs */
    tables_make(L, vr.swapped ? 2 * ccl : vr.nf / B, tb);
    const CUtensorMap mx = make_map(L.x, is_bf, N, in, in, B, vr.swapped ? 256 / ccl : 128 * vr.mw), mw = make_map(L.v, is_bf, (long)L.R * L.K * B, B, B, B, B);
    CK(cudaMemset(y, 0xFF, (size_t)N * out * sizeof(T))); /* poison: NaN */
    launch<T>(vr, L, tb, mx, mw, y, 0);
    CK(cudaGetLastError());
    { /* watchdog: a hung kernel ends the program with a message instead of the whole run */
        cudaEvent_t ev;
        CK(cudaEventCreate(&ev));
        CK(cudaEventRecord(ev));
        const time_t t0 = time(NULL);
        while (cudaEventQuery(ev) == cudaErrorNotReady)
            if (time(NULL) - t0 > 10) {
                printf("%-5s %s N=%ld %ld->%ld B%d: HANG (no completion after 10 s)\n", vr.name, is_bf ? "bf16" : "f16", N, in, out, B);
                fflush(stdout);
                _exit(2);
            }
        cudaEventDestroy(ev);
    }
    CK(cudaDeviceSynchronize());
    CK(cudaMemset(acc, 0, sizeof(cmp_acc)));
    cmp_kernel<T><<<1024, 256>>>(y, ref, N * out, acc);
    CK(cudaGetLastError());
    cmp_acc h;
    CK(cudaMemcpy(&h, acc, sizeof h, cudaMemcpyDeviceToHost));
    const double rel = sqrt(h.se / h.sr), rmax = h.maxd / h.maxr;
    /* pass: no NaN (every element written), output-rounding-level error */
    const bool ok = h.nan == 0 && rel < (is_bf ? 4e-3 : 6e-4) && rmax < (is_bf ? 8e-3 : 1e-3);
    const double fl = 2.0 * N * (double)L.R * L.K * B * B; /* useful FLOPs */
    printf("%-5s %-4s N%6ld %5ld->%-5ld B%-2d d%.2f", vr.name, is_bf ? "bf16" : "f16", N, in, out, B, (double)L.K / L.C);
    if (timed) {
        double t_ours, t_cb;
        time_pair([&] { launch<T>(vr, L, tb, mx, mw, y, 0); },
                  [&] {
                      cublasGemmEx(hb, CUBLAS_OP_T, CUBLAS_OP_N, (int)out, (int)N, (int)in, &one, wd, cdt, (int)in, L.x, cdt, (int)in,
                                   &zero, yd, cdt, (int)out, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
                  },
                  t_ours, t_cb);
        CK(cudaGetLastError());
        printf(" | ours %7.3f ms %6.1f TF/s | dense %7.3f ms %6.1f TF/s | speedup %5.2fx", t_ours, fl / t_ours * 1e-9, t_cb,
               2.0 * N * in * out / t_cb * 1e-9, t_cb / t_ours);
    }
    printf(" | relL2 %.2e maxabs/max %.2e nan %llu %s\n", rel, rmax, h.nan, ok ? "OK" : "FAIL");
    fflush(stdout);
    tables_free(tb);
    cudaFree(L.dci), cudaFree(L.x), cudaFree(L.v), cudaFree(L.bias), cudaFree(y), cudaFree(yd), cudaFree(wd), cudaFree(ref),
        cudaFree(acc);
    return ok ? 0 : 1;
}

static const variant *find_variant(const char *n) {
    for (const variant &v : VARIANTS)
        if (!strcmp(v.name, n)) return &v;
    return NULL;
}
static int row(const variant &v, long N, long in, long out, int B, double dens, const char *dts, cublasHandle_t hb, int timed) {
    if ((B != 16 && B != 32 && B != 64) || in % B || out % B || in % 8) {
        fprintf(stderr, "bad row: B %d in %ld out %ld (B = 16 | 32 | 64 dividing in and out)\n", B, in, out);
        return 1;
    }
    if (v.swapped && B != 64) return 0; /* B = 64 only */
    return strcmp(dts, "f16") ? run_row<__nv_bfloat16>(v, N, in, out, B, dens, hb, timed)
                              : run_row<__half>(v, N, in, out, B, dens, hb, timed);
}

int main(int argc, char **argv) {
    (void)copy_bandwidth, (void)time_ms<void (*)()>; /* cuda_common.h's, unused here */
    cudaDeviceProp pr;
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&pr, dev) != cudaSuccess) {
        printf("bell_wgmma: no CUDA device\n");
        return 0;
    }
    if (pr.major != 9 || pr.minor != 0) {
        printf("bell_wgmma: needs sm_90a (a Hopper GPU); this is %s, sm_%d%d\n", pr.name, pr.major, pr.minor);
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
        printf("bell_wgmma: needs sm_90a machine code (build with -gencode arch=compute_90a,code=sm_90a)\n");
        return 0;
    }
    g_sms = pr.multiProcessorCount;
    time_t now = time(NULL);
    char date[64];
    strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", gmtime(&now));
    printf("bell_wgmma: %s, %d SMs, commit %s, %s, %d reps (median), speedup = dense cuBLAS time / ours\n", pr.name, g_sms,
           SSM_BENCH_COMMIT, date, REPS);
    cublasHandle_t hb;
    CKB(cublasCreate(&hb));
    int fails = 0;
    if (argc >= 8) {
        const variant *v = find_variant(argv[1]);
        if (!v) {
            fprintf(stderr, "unknown variant %s\n", argv[1]);
            return 1;
        }
        fails += row(*v, atol(argv[2]), atol(argv[3]), atol(argv[4]), atoi(argv[5]), atof(argv[6]), argv[7], hb, 1);
    } else {
        const char *only = argc > 1 ? argv[1] : NULL; /* a variant name, or none: every variant */
        struct shp {
            long N, in, out;
        } shapes[] = {{8192, 2048, 8192}, {32768, 2048, 8192}, {8192, 4096, 4096}, {32768, 4096, 4096}, {8192, 640, 2560}};
        const int Bs[3] = {64, 32, 16};
        for (const variant &v : VARIANTS) {
            if (only && strcmp(only, v.name)) continue;
            printf("== %s: correctness (odd N, bias, f16, rows not a multiple of the group)\n", v.name);
            for (int B : Bs) {
                fails += row(v, 1031, 640, 2560, B, 0.5, "bf16", hb, 0);
                fails += row(v, 1031, 640, 2560, B, 0.5, "f16", hb, 0);
                fails += row(v, 200, 1024, 768, B, 0.25, "bf16", hb, 0);
                fails += row(v, 333, 512, 384, B, 0.5, "bf16", hb, 0);
            }
            printf("== %s: 50%% density, bf16\n", v.name);
            for (int B : Bs)
                for (const shp &s : shapes) fails += row(v, s.N, s.in, s.out, B, 0.5, "bf16", hb, 1);
            printf("== %s: 25%% / 75%% density, bf16; 50%% f16\n", v.name);
            for (int B : Bs)
                for (int q = 1; q < 4; q += 2) {
                    const shp &s = shapes[q]; /* N 32768: 2048->8192, 4096->4096 */
                    fails += row(v, s.N, s.in, s.out, B, 0.25, "bf16", hb, 1);
                    fails += row(v, s.N, s.in, s.out, B, 0.75, "bf16", hb, 1);
                    if (q == 3) fails += row(v, s.N, s.in, s.out, B, 0.5, "f16", hb, 1);
                }
        }
    }
    cublasDestroy(hb);
    printf("bell_wgmma: %d failed rows\n", fails);
    return fails ? 1 : 0;
}
