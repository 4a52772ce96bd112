/* ssm_cuda.h - v0.2.0 - CUDA backend of ssm.h (dense linear recurrences, decay scans, block-ELL
   layers, the delta rule) - MIT license

   CONTENTS (grep '>>name'; the same markers, in the same order, as ssm.h and ssm_blas.h)
     >>core        configuration, declarations, context state
     >>validation  supports and check_tensor (what ssm.h asks before it dispatches)
     >>primitives  device helpers, the gemm (cuBLAS / tiled kernel) and copy slots
     >>linrec      dense linear recurrence: fused kernel, tensor-core chunked path, slots
     >>decay       decay scan: look-back and tiled kernels
     >>bell        block-ELL sparse linear layer: gather-GEMM forward / dx, SDDMM dvalues
     >>proj        projection chains: the epilogue-fused GEMM, the backward passes
     >>outchain    output chain: norm-and-gate pass, cuBLAS o_proj
     >>delta       delta rule: chunked WY/UT forward / backward, recurrent, decode step
     >>backend     the backend table

   USAGE
     In exactly one .cu file (compiled by nvcc), after ssm.h's implementation lives somewhere
     in the program (a .c file with SSM_IMPLEMENTATION, or this same file):
         #define SSM_IMPLEMENTATION        // optional: here or in another file
         #define SSM_CUDA_IMPLEMENTATION
         #include "ssm_cuda.h"
     Everywhere else (C or C++) just #include "ssm_cuda.h": the declarations are plain C.
     Build:  nvcc -O3 -arch=sm_90 app.cu -lcublas      (sm_90 = H100/H200)

   REQUIREMENTS
     Minimum architecture sm_80 (A100): the kernels use cp.async and mma.sync with bf16
     operands, which older architectures lack (an sm_75 or sm_70 build fails to compile).
     The library is compiled for sm_80 in CI (make lib builds sm_80 code) and built and
     tested for sm_90 (H100 / H200).

         ssm_cuda_config cc = ssm_cuda_config_init();   // device 0, default stream
         cc.stream = my_stream;                          // optional: run on the caller's stream
         ssm_ctx_config cfg = ssm_ctx_config_init();
         cfg.backend = ssm_cuda_backend();
         cfg.backend_config = &cc;
         ssm_ctx *ctx; ssm_ctx_create(&cfg, &ctx);
         // tensors: ssm_tensor_make(dev_ptr, SSM_F16, ssm_cuda_device(0), ...)
         ssm_linrec_forward(ctx, &desc, &A, &b, NULL, &h, NULL);   // async on the stream

   WHAT IT DOES
     Every op of ssm.h's linrec / decay families runs on the GPU: f32, f16 and bf16 inputs,
     f32 accumulation and f32 state. The block-ELL layer's forward and backward run on the GPU
     for B = 16, 32, 64 (f16/bf16 on tensor cores; f32 on them in 3xTF32, or in plain TF32 or
     on CUDA cores by ssm_cuda_config.bell_f32; the index ops
     read col_idx on the host and need a CPU context). Its dynamic topology runs on device
     scores when created with a CUDA context (observe as kernels, selection on the host by
     ssm.h's rule, tiles moved and the transposed index rebuilt on the device; B <= 64), and
     across GPUs with the NCCL hook (-DSSM_NCCL). The delta rule runs on
     the GPU for DeltaNet, Gated DeltaNet and DeltaProduct (n_h > 1, as DeltaNet over T n_h
     sub-tokens; f32, f16, bf16); the f32 backward with K > 128 answers SSM_ERROR_UNSUPPORTED.
     Projection chains (16-bit, FUSED) run on sm_90a builds on Hopper as our TMA + wgmma GEMM
     with every segment's epilogue in its registers (proj_kernel 3), elsewhere as cuBLAS GEMMs
     with the epilogue in one pass (an in-tile mma.sync variant behind
     ssm_cuda_config.proj_kernel), output chains as a norm pass
     + cuBLAS (the proj and outchain sections below). Calls are asynchronous on the context's stream; errors
     that can be found before launch (shapes, dtypes, host pointers, wrong device, misaligned
     data) return an error and write nothing. CUDA / cuBLAS failures return SSM_ERROR_BACKEND
     with the native error string in ssm_ctx_last_error().
     Device scratch comes from a device workspace: the caller's (ssm_cuda_config.workspace),
     or one the context grows through the device allocator hooks (default cudaMalloc) only
     when a call needs more than it holds; ssm_ctx_reserve_workspace() grows it up front and
     ssm_linrec_workspace_size() / ssm_decay_workspace_size() say how much a call needs (device
     bytes on a CUDA context). Log decays are not checked for NaN / +inf on the GPU (that would
     need a device sync).

   HOW IT PLUGS IN
     ssm.h validates each call (this backend's check_tensor slot checks residency, device and
     alignment), resolves AUTO through linrec_pick, sizes the workspace through workspace_size
     and runs its generic recurrence driver and methods (scan_hs, blelloch, cr, chunked and
     sequential where no kernel below fits) on this backend's gemm (cuBLAS strided-batched
     where a layout allows, else a tiled kernel; an outer-product kernel for K = 1) and copy
     kernel. This file keeps only the specialised kernels:
       linrec   the fused recurrence kernel (sequential, chunked), the tensor-core chunked
                path, cyclic reduction as two kernels per level, Hillis-Steele and Blelloch as
                one kernel per level (on the tensor-core shapes cyclic reduction and Blelloch
                take tensor-core spans and run their levels over the span carries)
       decay    the look-back kernel (time split across blocks, carries passed back) and the
                tiled one-pass kernel
       bell     gather-GEMM forward and dx, SDDMM dvalues (deterministic)
       delta    chunked WY/UT forward and backward on tensor cores, the recurrent (token by
                token) form, the single-token decode step; DeltaProduct through them on the
                T n_h sub-tokens

   LIMITS
     Any S, T, B (grid-stride loops / 2-D grids); n * m and n * n in shared memory for the
     fused recurrence kernel (else the generic per-step path); the decay scan's blocks
     (B * R * ceil(C / columns per block), or B * slices * ceil(T / 16) for the look-back
     kernel) must stay below 2^31 (else SSM_ERROR_UNSUPPORTED); f64 is not supported.

   METHODS (dense recurrence) and where each wins
     seq       one kernel, one block per sequence, time loop inside: least work, depth T.
               Best when S alone fills the GPU (S >= ~2 x SMs) or T is small.
     chunked   three kernels: every chunk runs locally from zero and forms its transition
               product (n^3 per step), a carry recurrence over chunk ends, a fix-up pass.
               Best when S*n*m cannot fill the GPU: time is split across blocks.
               Inputs with m = 1, n = 16..128 and a unit stride along the rows of A (or of
               A^T, the adjoint's view; 16-byte aligned rows where n is a multiple of 8, other n
               on ragged tiles copied 4 or 2 bytes at a time) take a tensor-core version
               (16-bit: mma.sync m16n8k16 or wgmma; f32: m16n8k8 3xTF32; f32 accumulation;
               the running product stays in registers, transposed, as
               the next step's operand; 64 x 64 tiles up to n = 64, 128 x 128 above, zero-filled
               past n): H200, S16 T4096 n64 f16: 0.36 ms forward (2.75x the floor of reading A
               once), 0.53 ms backward, vs 6.4 / 9.1 ms on CUDA cores; n32 0.47 ms (6.9x), n48
               0.34 ms (4.9x); n128 S8 T1024 0.32 ms (4.9x; 5.5 ms on cyclic reduction's CUDA-
               core levels before), S1 T8192 0.44 ms (6.8x: the carry chain, 127 hops of a
               64 KB P through one SM, is a third of it); f32 n128 S4 T1024 0.49 ms (7.5x; 1.94
               on Blelloch's levels before; its 3xTF32 chunk products, one CTA an SM, bound it:
               the chunk is the fewest steps that fill one wave). It reads A
               twice (products, then the re-run from the true carries), so it cannot go under
               ~2x the floor; the product pass is issue-bound (mma.sync + fragment conversion)
               and the carry chain over T/64 chunks is latency-bound (~0.4 us a hop at n <= 64,
               its maps through a shared-memory ring; ~1-1.25 us at n > 64). Reaching
               1.5x would need one pass over A: each chunk's A kept in shared memory while a
               decoupled look-back brings its carry (T/L serial hops per sequence), or an
               L2-resident wave scheme where the second read hits L2 (50 MB on H200).
               Matrix states (m >= 8; 16-bit n = 8..128 by 8, f32 n = 8..64 by 4, rows or
               columns of A contiguous and 16-byte aligned) run seq and chunked on a
               tensor-core kernel (mma.sync; the state transposed in registers as hi + lo
               16-bit parts, f32 on 3xTF32; chunk 0 from h_0 on a side stream beside the other
               chunks' products): H200, m = n, A of 256 MB, chunked f32 n64 S16 T1024 0.78 ms,
               f16 n32 S128 T1024 0.92, f16 n64 S32 T1024 0.75 (cr on the same spans 0.79, on
               levels over the whole sequence 1.80; the CUDA-core kernel: 2.7-12 ms). Other
               shapes use CUDA cores.
     cr        cyclic reduction, one batched product per level (O(T n^3), memory <= scan); on the
               tensor-core and matrix-state shapes over spans (a span's product in one pass),
               cyclic reduction over the span carries.
     scan_hs / blelloch   prefix scans (Hillis-Steele 1986, Blelloch 1990), a fused kernel per level;
               Blelloch on cr's span shapes as cr, its sweeps over the span carries (H200,
               f16 S8 T4096 n64: 0.31 ms, 0.81 with its levels over the whole sequence).
     auto      chunked (chunk 64) for the tensor-core shapes above when T > 64 (f32 at n > 64:
               below S = 128, chunk 16, 32 or 64, the fewest steps that fill one wave); otherwise seq
               when S >= 2*SMs or T <= 64; chunked on the matrix-state kernel (every shape it
               takes; chunk 64, 128 at n <= 32 for f32 or T >= 4096: H200, f16 S4 T8192
               n = m = 64 1.19 ms against cr's 1.86); cr when S <= SMs/8
               (cr 1.34 ms vs chunked 2.7 at S1 T8192 n64, CUDA cores) or for other matrix
               states (m >= n, n <= 64), else chunked with chunk ~ sqrt(T).

   BLOCK-ELL (ssm_bell_forward / ssm_bell_backward; the bell section below says how)
     H200, 50% density, ratio to cuBLAS dense of the same shape (forward / fwd+bwd;
     bench/results/cuda_bell_tma2d.log): 16-bit B=64 on sm_90a (TMA + wgmma: forward, dx and
     dvalues) 1.28-1.53x / 1.12-1.25x at 2048->8192 and 4096->4096, 1.00-1.07x / 0.73-0.90x at
     640->2560, 1.55-2.64x faster than cuSPARSE Blocked-ELL (forward); 16-bit B=32 (forward and
     dx on the wgmma union kernel, dvalues on the B=64 dvalues kernel's wgmma schedule, a 64 x 32
     product holding two block-rows' tiles; bench/results/cuda_bell_b32_dw.log) 0.49-0.68x /
     0.58-0.79x at the two large shapes (0.39-0.50x fwd+bwd at 640->2560); B=16
     (bench/results/cuda_bell_475ce63.log, mma.sync, 8 warps an SM: L2-to-SM traffic and low
     occupancy bound it) 0.17-0.25x / 0.18-0.24x. The B=64 forward is L2-bound (x read again for
     every pair of block-rows: L2 64% busy, tensor pipe 59%, ncu at locked clocks), dvalues too
     (L2 81%: units of 2 block-rows x 4 input blocks load dy and x once per 64 tokens).

   PROJECTION CHAINS (ssm_proj_*; the proj section below says how)
     H200, bf16, Gated DeltaNet input projections at d = 2048 (N = 8224; bench/cuda_proj.cu
     BENCH_PROJ_GDN=1, bench/results/cuda_proj_f5fa895.log): FUSED forward (kernel 3) 1.29x
     the cuBLAS GEMM alone at M = 8192, 1.26x at M = 32768; forward+backward 1.52 / 6.21 ms,
     1.79x / 1.45x faster than PyTorch eager (2.73 / 9.00 ms). The forward's rest is kernel
     3's 128 x 128 ping-pong mainloop (identity epilogue 1.13-1.16x). Before (kernel 1, cuBLAS
     + one epilogue pass, bench/results/cuda_proj_run2.log): 2.06x / 2.39x. f32: 1.15x
     the SGEMM. The tile-fused mma.sync variant
     (proj_kernel = 2): 233 TFLOP/s at 8192^3 against cuBLAS's 797. Output chain (D = 2048,
     heads of 128, d_out = 2048; bench/results/cuda_outchain_vec_a897593.log): forward 1.38x /
     1.40x the GEMM alone at M 8192 / 32768, 2.9x faster than PyTorch eager, 1.38x faster than
     torch.compile (M 32768).

   VERSION HISTORY
     0.2.0  block-ELL forward and backward (gather-GEMM, SDDMM dvalues), deterministic;
            the delta rule (DeltaNet, Gated DeltaNet); the backend interface II slots
     0.1.0  first version: linrec (all methods) and decay scan, forward and backward
*/
#ifndef SSM_CUDA_H_INCLUDED
#define SSM_CUDA_H_INCLUDED

#include "ssm.h"

#define SSM_CUDA_VERSION_STRING "0.2.0"

#ifdef __cplusplus
extern "C" {
#endif

/* >>core ---- configuration and declarations ----------------------------------------------- */
/* Device memory hooks (e.g. PyTorch's caching allocator). `stream` is the cudaStream_t. */
typedef struct ssm_cuda_allocator {
    void *user;
    void *(*alloc)(void *user, size_t bytes, void *stream); /* NULL fields = cudaMalloc/cudaFree */
    void (*free)(void *user, void *ptr, void *stream);
} ssm_cuda_allocator;

typedef struct ssm_cuda_config {
    int device;                   /* CUDA device ordinal; tensors must have device.id == this */
    void *stream;                 /* cudaStream_t every op runs on; NULL = the default stream
                                     (chunked recurrences fork part of their work onto a private
                                     stream of the context and join it back before returning)  */
    void *cublas;                 /* borrowed cublasHandle_t; NULL = the context creates one  */
    ssm_cuda_allocator allocator; /* device workspace growth                                  */
    void *workspace;              /* optional caller-owned device workspace (never grown)     */
    size_t workspace_bytes;
    /* Kernel choices, 0 = by shape (the measured defaults). Other values force a variant, for
       the kernel-variant harnesses in dev/cuda/ and the tests; results depend on them only
       through rounding, except the two that trade accuracy for speed (linrec_tc_split = 1 on
       f32, bell_f32 = 2: plain TF32). */
    int decay_kernel;     /* 1 = look-back (time split across blocks), 2 = tiled (whole time
                             axis per block; needs B*R*ceil(C/cols) < 2^31), 3 = chunked
                             (reduce, carries, rescan: x read twice, no chunk waits)          */
    int decay_tile_cols;  /* tiled: threads per row segment, 4, 8 or 16 (vector loads only)   */
    int decay_tile_steps; /* tiled: steps per thread and tile, 4 or 8 (vector loads only)     */
    int decay_tile_vec;   /* tiled, 16-bit: 4 = 8-byte vectors instead of 16-byte ones         */
    int decay_prefetch;   /* tiled forward: 1 = no cp.async ring for x, 2 = the ring           */
    int linrec_tc_split;  /* tensor-core chunked: 1 = plain 16-bit running product (f32 A:
                             plain TF32), 2 = hi/lo split (~f32 accurate; f32 A: 3xTF32); by
                             shape: split for bf16 and f32, plain for f16. The f32 level
                             kernels' tensor-core products (cr, HS, Blelloch at n or m > 32):
                             3xTF32 unless 1 (plain TF32, ~2^-11 relative a product)         */
    int proj_kernel;      /* projection chain, FUSED forward: 1 = cuBLAS GEMM + one epilogue
                             pass, 2 = the tile-fused mma.sync kernel (16-bit, K-contiguous x
                             and W), 3 = the sm_90a TMA + wgmma kernel with the epilogue in
                             registers (16-bit, K-contiguous x and W with 16-byte rows, N
                             even, a cc 9.0 GPU running this binary's sm_90a code; by default
                             where it applies and L2 heads have >= 16 columns); calls a
                             forced kernel does not fit take 1                                 */
    int linrec_cr;        /* cyclic reduction: 1 = ssm.h's generic levels on gemm + copy,
                             2 = the fused f32 level kernels over the whole sequence (no
                             tensor cores), 3 = the levels over the whole sequence by shape
                             (no spans); by shape: spans of the chunk length reduced on tensor
                             cores (m = 1, n = 16..128; matrix states, m >= 8,
                             on the matrix-state kernel), the levels on tensor cores for other
                             16-bit wide states (m > 8; M levels in the input type), else the
                             f32 level kernels                                                 */
    int linrec_scan;      /* Hillis-Steele and Blelloch: 1 = ssm.h's generic levels on gemm +
                             copy, 2 = HS levels one task per warp group (no chains), 3 =
                             Blelloch's levels over the whole sequence on the tensor-core
                             shapes too; by shape (n, m <= 128): a fused kernel per level
                             (mma.sync for 16-bit inputs, HS by chains where rows take 16-byte
                             copies; FMAs for f32), Blelloch on cyclic reduction's span shapes
                             (m = 1 and matrix states) over spans (its workspace the spans')  */
    int bell_kernel;      /* block-ELL: 1 = the mma.sync kernels, 2 = the sm_90a TMA + wgmma
                             ones (16-bit; B = 64: forward, dx, dvalues; B = 32: forward, dx; unit
                             column stride and 16-byte aligned rows of the operands and weight
                             tiles; a cc 9.0 GPU running this binary's sm_90a code); by default
                             the wgmma ones where they apply; calls they do not fit take 1    */
    int linrec_tc_prod;   /* tensor-core chunked, the chunk products: 1 = mma.sync, 2 = wgmma
                             (a cc 9.0 GPU running this binary's sm_90a code; elsewhere 1);
                             by default wgmma for the hi/lo split products (bf16) at n = 64
                             where it runs, mma.sync for the plain ones (f16) and for n < 64
                             (it skips the zero blocks), as measured faster                   */
    int linrec_mat;       /* sequential and chunked recurrences with m >= 8 state columns:
                             1 = the f32 CUDA-core kernel; by default the tensor-core kernel
                             (16-bit A, n = 8..128 by 8; f32 A on 3xTF32, n = 8..64 by 4;
                             rows or columns of A contiguous and 16-byte aligned). 1 also
                             keeps the f32 level kernels' products (cr, HS, Blelloch at n or
                             m > 32) on FMAs instead of 3xTF32 on the tensor cores            */
    int bell_f32;         /* block-ELL with f32 operands: by default 3xTF32 on the tensor cores
                             (each product as hi hi + hi lo + lo hi of TF32 parts, ~2^-21
                             relative; f32 sums); 1 = f32 FMAs on the CUDA cores (exact
                             products); 2 = plain TF32 (operands rounded to 10-bit mantissas,
                             ~2^-11 relative a product; one MMA a product instead of three) */
} ssm_cuda_config;

SSMDEF ssm_cuda_config ssm_cuda_config_init(void);
SSMDEF const ssm_backend *ssm_cuda_backend(void);
/* Switch the stream of a CUDA context (e.g. to torch.cuda.current_stream() per call). */
SSMDEF ssm_result ssm_cuda_set_stream(ssm_ctx *ctx, void *stream);


#ifdef __cplusplus
}
#endif

#ifdef SSM_NCCL
#include <nccl.h>
/* One block-ELL topology across data-parallel ranks over NCCL (build with -DSSM_NCCL, link
   libnccl). One per rank: ssm_cuda_nccl_init(&h, comm, stream) with the context's stream, then
   cfg.allreduce = ssm_cuda_nccl_allreduce, cfg.allreduce_user = &h before
   ssm_bell_topology_create. The hook averages the device score buffers in double (ncclAllReduce
   sum, then times 1/nranks) on that stream, so every rank selects from the same scores and
   picks the same topology. ssm_cuda_nccl_check_checksum gathers every rank's checksum (the
   report's) and answers SSM_ERROR_INVALID_VALUE, with the ranks in ctx's message, when they
   disagree. Both are collectives: every rank calls them in the same order. With several ranks
   in one process, load every kernel before the first collective (CUDA_MODULE_LOADING=EAGER): a
   module loaded lazily while an NCCL kernel waits on another rank can deadlock. So can a call
   that waits for all of a device's work (cudaMemcpyPeer, cudaDeviceSynchronize) made by one
   rank while another rank's collective is pending on that device. */
#ifdef __cplusplus
extern "C" { /* nccl.h (it includes cuda_fp16.h's C++ operators) stays outside */
#endif
typedef struct ssm_cuda_nccl {
    ncclComm_t comm;
    void *stream;               /* cudaStream_t: the context's stream */
    int nranks, rank, device;
    unsigned long long *sums;   /* device [nranks] checksums */
    unsigned long long *host;   /* pinned host [nranks]     */
} ssm_cuda_nccl;
SSMDEF ssm_result ssm_cuda_nccl_init(ssm_cuda_nccl *h, ncclComm_t comm, void *stream);
SSMDEF void ssm_cuda_nccl_free(ssm_cuda_nccl *h);
SSMDEF ssm_result ssm_cuda_nccl_allreduce(void *user, double *data, int64_t count);
SSMDEF ssm_result ssm_cuda_nccl_check_checksum(ssm_ctx *ctx, ssm_cuda_nccl *h, uint64_t checksum);
/* The allgather hook of ssm_linrec_cp, for ssm_linrec_*_cp and ssm_decay_*_cp (cp.allgather =
   ssm_cuda_nccl_allgather, cp.user = &h, cp.rank and cp.nranks from h): ncclAllGather of the
   bytes on h's stream, the context's. */
SSMDEF ssm_result ssm_cuda_nccl_allgather(void *user, const void *send, void *recv, size_t bytes);
#ifdef __cplusplus
}
#endif
#endif /* SSM_NCCL */
#endif /* SSM_CUDA_H_INCLUDED */

/* ========================================================================================== */
#ifdef SSM_CUDA_IMPLEMENTATION
#ifndef SSM_CUDA_IMPLEMENTATION_DONE
#define SSM_CUDA_IMPLEMENTATION_DONE

#ifndef __CUDACC__
#error "SSM_CUDA_IMPLEMENTATION must be compiled by nvcc (a .cu file)"
#endif

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda.h> /* CUtensorMap (proj_kernel 3) */
#include <cuda_runtime.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* >>core ---- context state (implementation) ----------------------------------------------- */
/* ---- context state ------------------------------------------------------------------------ */

typedef struct ssm__cu_state {
    int device, sms;
    size_t smem_optin;
    cudaStream_t stream;
    cudaStream_t side, main;   /* work beside the stream (ssm__cu_side_begin / _end), and the stream meanwhile */
    cudaEvent_t fork, join;    /* where the stream stood, what the side stream took */
    cublasHandle_t cublas;
    int cublas_owned;
    ssm_cuda_allocator allocator;
    void *ws;
    size_t ws_bytes;
    int ws_owned;
    ssm_cuda_config knobs; /* the kernel-choice fields of the config */
    int pjw;               /* proj_kernel 3 runs here: 0 not yet asked, 1 yes, 2 no */
    int blw;               /* the block-ELL wgmma kernel runs here: 0 not yet asked, 1 yes, 2 no */
    int blw_dw_fit;        /* clusters of block-ELL's dvalues kernel resident at once (0 not yet asked) */
    int lrw;               /* the recurrence's wgmma chunk products run here: 0 not yet asked, 1 yes, 2 no */
} ssm__cu_state;

static ssm__cu_state *ssm__cu_st(const ssm_ctx *ctx) { return (ssm__cu_state *)ssm_ctx_backend_state(ctx); }

#define SSM__CU_CHECK(ctx, call)                                                                  \
    do {                                                                                          \
        cudaError_t e_ = (call);                                                                  \
        if (e_ != cudaSuccess)                                                                    \
            return ssm_ctx_error(ctx, SSM_ERROR_BACKEND, "CUDA: %s failed: %s (%s)", #call,      \
                                 cudaGetErrorString(e_), cudaGetErrorName(e_));                   \
    } while (0)
/* After a kernel launch. */
#define SSM__CU_LAUNCHED(ctx, what)                                                               \
    do {                                                                                          \
        cudaError_t e_ = cudaGetLastError();                                                      \
        if (e_ != cudaSuccess)                                                                    \
            return ssm_ctx_error(ctx, SSM_ERROR_BACKEND, "CUDA: launch of %s failed: %s (%s)",   \
                                 what, cudaGetErrorString(e_), cudaGetErrorName(e_));             \
    } while (0)
/* Grid y / z dimensions stop at 65535: kernels loop over the rest (grid-stride). */
#define SSM__CU_GRID_Y(n) ((unsigned)((n) < 65535 ? (n) : 65535))
/* Blocks of 256 threads for `threads` work items of a grid-stride kernel. */
static unsigned ssm__cu_blocks(int64_t threads) {
    int64_t b = (threads + 255) / 256;
    return (unsigned)(b < 1 ? 1 : b > 1048576 ? 1048576 : b);
}

/* Makes the context's device current for a scope and restores the caller's. */
struct ssm__cu_device_guard {
    int prev, ok;
    ssm__cu_device_guard(int dev) : prev(-1), ok(0) {
        if (cudaGetDevice(&prev) != cudaSuccess) prev = -1;
        else if (prev == dev) prev = -1, ok = 1; /* already current: nothing to switch or restore */
        else ok = cudaSetDevice(dev) == cudaSuccess;
    }
    ~ssm__cu_device_guard() {
        if (prev >= 0) cudaSetDevice(prev);
    }
};

extern "C" SSMDEF ssm_cuda_config ssm_cuda_config_init(void) {
    ssm_cuda_config c;
    memset(&c, 0, sizeof c);
    return c;
}

static void ssm__cu_shutdown(ssm_ctx *ctx, void *state);
static ssm_result ssm__cu_init(ssm_ctx *ctx, const ssm_ctx_config *cfg, void **state) {
    ssm_cuda_config cc = cfg->backend_config ? *(const ssm_cuda_config *)cfg->backend_config : ssm_cuda_config_init();
    ssm__cu_state *s;
    int count = 0, v = 0;
    cudaError_t e;
    *state = NULL;
    if ((cc.allocator.alloc == NULL) != (cc.allocator.free == NULL))
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_VALUE, "ssm_cuda: allocator needs both alloc and free");
    if (cc.workspace_bytes > 0 && !cc.workspace)
        return ssm_ctx_error(ctx, SSM_ERROR_NULL_ARGUMENT, "ssm_cuda: workspace_bytes without workspace");
    if (cc.decay_kernel < 0 || cc.decay_kernel > 3 || (cc.decay_tile_cols && cc.decay_tile_cols != 4 &&
        cc.decay_tile_cols != 8 && cc.decay_tile_cols != 16) || (cc.decay_tile_steps && cc.decay_tile_steps != 4 &&
        cc.decay_tile_steps != 8) || (cc.decay_tile_vec && cc.decay_tile_vec != 4) || cc.decay_prefetch < 0 ||
        cc.decay_prefetch > 2 || cc.linrec_tc_split < 0 || cc.linrec_tc_split > 2 || cc.proj_kernel < 0 ||
        cc.proj_kernel > 3 || cc.linrec_cr < 0 || cc.linrec_cr > 3 || cc.linrec_scan < 0 || cc.linrec_scan > 3 ||
        cc.bell_kernel < 0 || cc.bell_kernel > 2 || cc.linrec_tc_prod < 0 || cc.linrec_tc_prod > 2 ||
        cc.linrec_mat < 0 || cc.linrec_mat > 1 || cc.bell_f32 < 0 || cc.bell_f32 > 2)
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_VALUE, "ssm_cuda: a kernel-choice field of the config is out of range");
    e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess)
        return ssm_ctx_error(ctx, SSM_ERROR_BACKEND, "ssm_cuda: no usable CUDA device: %s", cudaGetErrorString(e));
    if (cc.device < 0 || cc.device >= count)
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_DEVICE, "ssm_cuda: device %d does not exist (%d devices)",
                             cc.device, count);
    s = (ssm__cu_state *)calloc(1, sizeof *s);
    if (!s) return ssm_ctx_error(ctx, SSM_ERROR_OUT_OF_MEMORY, "ssm_cuda: context state");
    s->device = cc.device;
    s->stream = (cudaStream_t)cc.stream;
    s->allocator = cc.allocator;
    s->ws = cc.workspace;
    s->ws_bytes = cc.workspace ? cc.workspace_bytes : 0;
    s->ws_owned = cc.workspace ? 0 : 1;
    s->knobs = cc;
    cudaDeviceGetAttribute(&s->sms, cudaDevAttrMultiProcessorCount, cc.device);
    cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, cc.device);
    s->smem_optin = (size_t)v;
    if (cc.cublas) {
        s->cublas = (cublasHandle_t)cc.cublas;
    } else {
        ssm__cu_device_guard g(cc.device);
        cublasStatus_t cs = cublasCreate(&s->cublas);
        if (cs != CUBLAS_STATUS_SUCCESS) {
            free(s);
            return ssm_ctx_error(ctx, SSM_ERROR_BACKEND, "ssm_cuda: cublasCreate failed: %s", cublasGetStatusString(cs));
        }
        s->cublas_owned = 1;
    }
    {
        ssm__cu_device_guard g(cc.device);
        e = cudaStreamCreateWithFlags(&s->side, cudaStreamNonBlocking); /* never in step with the legacy stream */
        if (e == cudaSuccess) e = cudaEventCreateWithFlags(&s->fork, cudaEventDisableTiming);
        if (e == cudaSuccess) e = cudaEventCreateWithFlags(&s->join, cudaEventDisableTiming);
    }
    if (e != cudaSuccess) {
        ssm__cu_shutdown(ctx, s);
        return ssm_ctx_error(ctx, SSM_ERROR_BACKEND, "ssm_cuda: a side stream and its events: %s", cudaGetErrorString(e));
    }
    *state = s;
    return SSM_OK;
}

static void ssm__cu_shutdown(ssm_ctx *ctx, void *state) {
    ssm__cu_state *s = (ssm__cu_state *)state;
    (void)ctx;
    if (!s) return;
    {
        ssm__cu_device_guard g(s->device);
        if (s->ws_owned && s->ws) {
            if (s->allocator.free) s->allocator.free(s->allocator.user, s->ws, (void *)s->stream);
            else cudaFree(s->ws);
        }
        if (s->cublas_owned) cublasDestroy(s->cublas);
        if (s->join) cudaEventDestroy(s->join);
        if (s->fork) cudaEventDestroy(s->fork);
        if (s->side) cudaStreamDestroy(s->side);
    }
    free(s);
}

/* Work beside the context's stream, as a fork and a join (a graph capture takes both branches):
   _begin marks where the stream stands and points the context's launches at the side stream,
   which waits for that mark; _end points them back and marks what the side stream took;
   _wait makes the stream wait for it. */
static ssm_result ssm__cu_side_begin(ssm_ctx *ctx) {
    ssm__cu_state *s = ssm__cu_st(ctx);
    SSM__CU_CHECK(ctx, cudaEventRecord(s->fork, s->stream));
    SSM__CU_CHECK(ctx, cudaStreamWaitEvent(s->side, s->fork, 0));
    s->main = s->stream, s->stream = s->side;
    return SSM_OK;
}
static ssm_result ssm__cu_side_end(ssm_ctx *ctx) {
    ssm__cu_state *s = ssm__cu_st(ctx);
    s->stream = s->main;
    SSM__CU_CHECK(ctx, cudaEventRecord(s->join, s->side));
    return SSM_OK;
}
static ssm_result ssm__cu_side_wait(ssm_ctx *ctx) {
    SSM__CU_CHECK(ctx, cudaStreamWaitEvent(ssm__cu_st(ctx)->stream, ssm__cu_st(ctx)->join, 0));
    return SSM_OK;
}

extern "C" SSMDEF ssm_result ssm_cuda_set_stream(ssm_ctx *ctx, void *stream) {
    if (!ctx || !ssm__cu_st(ctx)) return SSM_ERROR_NULL_ARGUMENT;
    ssm__cu_st(ctx)->stream = (cudaStream_t)stream;
    return SSM_OK;
}

/* The workspace_reserve slot: ssm_ctx_reserve_workspace / ssm_ctx_workspace on a CUDA context
   grow this device buffer (256-byte multiples). */
static ssm_result ssm__cu_workspace_reserve(ssm_ctx *ctx, size_t bytes, void **ptr, size_t *capacity) {
    ssm__cu_state *s = ssm__cu_st(ctx);
    void *p = NULL;
    *ptr = s->ws, *capacity = s->ws_bytes;
    if (bytes <= s->ws_bytes) return SSM_OK;
    if (bytes > SIZE_MAX - 255) /* the ops' sizing saturates here when sizes overflow */
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_SHAPE, "ssm_cuda: workspace: the sizes overflow size_t");
    if (!s->ws_owned)
        return ssm_ctx_error(ctx, SSM_ERROR_WORKSPACE_TOO_SMALL,
                             "ssm_cuda: workspace: %zu bytes needed, the caller's buffer has %zu", bytes, s->ws_bytes);
    bytes = (bytes + 255) & ~(size_t)255;
    {
        ssm__cu_device_guard g(s->device);
        if (s->allocator.alloc) {
            p = s->allocator.alloc(s->allocator.user, bytes, (void *)s->stream);
            if (!p)
                return ssm_ctx_error(ctx, SSM_ERROR_OUT_OF_MEMORY, "ssm_cuda: allocator hook returned NULL for %zu bytes",
                                     bytes);
        } else {
            cudaError_t e = cudaMalloc(&p, bytes);
            if (e != cudaSuccess) {
                cudaGetLastError();
                return ssm_ctx_error(ctx, SSM_ERROR_OUT_OF_MEMORY, "ssm_cuda: cudaMalloc(%zu) failed: %s", bytes,
                                     cudaGetErrorString(e));
            }
        }
        if (s->ws) {
            if (s->allocator.free) s->allocator.free(s->allocator.user, s->ws, (void *)s->stream);
            else {
                cudaStreamSynchronize(s->stream); /* the old buffer may still be in use */
                cudaFree(s->ws);
            }
        }
    }
    s->ws = p;
    s->ws_bytes = bytes;
    *ptr = p, *capacity = bytes;
    return SSM_OK;
}

/* >>validation ---- supports and check_tensor ---------------------------------------------- */
/* ---- what ssm.h asks: support, tensor checks ------------------------------------------------- */

static size_t ssm__cu_esize(ssm_dtype t) { return (size_t)t.bits / 8u; }
static int ssm__cu_dt(ssm_dtype t) { return t.bits == 32 ? 0 : (t.code == SSM_DTYPE_BFLOAT ? 2 : 1); }

/* linrec (any method: the generic ones run on gemm + copy) and the decay scan. */
static int ssm__cu_supports(const ssm_ctx *ctx, ssm_op op, const void *plan) {
    (void)ctx;
    return op == SSM_OP_LINREC_FORWARD || op == SSM_OP_LINREC_BACKWARD || op == SSM_OP_DECAY_FORWARD ||
           op == SSM_OP_DECAY_BACKWARD || op == SSM_OP_BELL_FORWARD || op == SSM_OP_BELL_BACKWARD ||
           op == SSM_OP_DELTA_FORWARD || op == SSM_OP_DELTA_BACKWARD || op == SSM_OP_DELTA_STEP ||
           (op == SSM_OP_BELL_TOPOLOGY && plan) || /* observe / step; the host-only index tools ask with NULL */
           ((op == SSM_OP_PROJ_FORWARD || op == SSM_OP_PROJ_BACKWARD) && plan &&
            ((const ssm_proj_plan *)plan)->dtype.bits != 64) ||
           ((op == SSM_OP_OUTCHAIN_FORWARD || op == SSM_OP_OUTCHAIN_BACKWARD) && plan &&
            ((const ssm_outchain_plan *)plan)->dtype.bits != 64);
}

/* The check_tensor slot: device id, element alignment, and device (or managed) memory. */
static ssm_result ssm__cu_check_tensor(ssm_ctx *ctx, const char *op, const char *name, const ssm_tensor *t) {
    ssm__cu_state *s = ssm__cu_st(ctx);
    cudaPointerAttributes at;
    cudaError_t e;
    if (!t || !t->data || ssm_tensor_numel(t) == 0) return SSM_OK;
    if (t->device.type != SSM_DEVICE_CUDA) { /* host-resident (cu_seqlens): ssm.h reads it on the host */
        e = cudaPointerGetAttributes(&at, t->data);
        if (e != cudaSuccess) cudaGetLastError();
        else if (at.type == cudaMemoryTypeDevice)
            return ssm_ctx_error(ctx, SSM_ERROR_INVALID_DEVICE, "%s: %s (%p) is device memory tagged as device type %d",
                                 op, name, t->data, (int)t->device.type);
        return SSM_OK;
    }
    if (t->device.id != s->device)
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_DEVICE, "%s: %s is on cuda:%d, the context works on cuda:%d", op,
                             name, (int)t->device.id, s->device);
    if ((uintptr_t)t->data % ssm__cu_esize(t->dtype))
        return ssm_ctx_error(ctx, SSM_ERROR_MISALIGNED, "%s: %s data %p is not aligned to its %s elements", op,
                             name, t->data, ssm_dtype_name(t->dtype));
    e = cudaPointerGetAttributes(&at, t->data);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_DEVICE, "%s: %s: cudaPointerGetAttributes failed: %s", op, name,
                             cudaGetErrorString(e));
    }
    if (at.type != cudaMemoryTypeDevice && at.type != cudaMemoryTypeManaged)
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_DEVICE,
                             "%s: %s (%p) is %s memory, the CUDA backend needs device memory", op, name, t->data,
                             at.type == cudaMemoryTypeHost ? "pinned host" : "pageable host");
    if (at.type == cudaMemoryTypeDevice && at.device != s->device)
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_DEVICE, "%s: %s lives on GPU %d, the context works on GPU %d", op,
                             name, at.device, s->device);
    return SSM_OK;
}

/* >>primitives ---- device helpers, gemm and copy ------------------------------------------ */
/* Dynamic shared memory past 48 KB needs the kernel's attribute raised, and that attribute is
   the process's, not the context's: set to each call's own size, it can be lowered by a context
   in another thread between this call's set and its launch (a launch failure; the threaded
   context-parallel test met it). So it is raised to the device's whole opt-in, less the
   kernel's static shared memory: the same value from every call. `bytes` is the launch's. */
static cudaError_t ssm__cu_smem_allow(const void *kernel, size_t bytes, size_t optin) {
    cudaFuncAttributes fa;
    cudaError_t e = cudaFuncGetAttributes(&fa, kernel);
    if (e != cudaSuccess) return e;
    if (fa.sharedSizeBytes + bytes > optin) return cudaErrorInvalidValue;
    return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)(optin - fa.sharedSizeBytes));
}
/* ---- device helpers ------------------------------------------------------------------------ */

__device__ __forceinline__ float ssm__cu_ld(const void *p, int dt, int64_t i) {
    if (dt == 0) return ((const float *)p)[i];
    if (dt == 1) return __half2float(((const __half *)p)[i]);
    return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
}
__device__ __forceinline__ void ssm__cu_stv(void *p, int dt, int64_t i, float v) {
    if (dt == 0) ((float *)p)[i] = v;
    else if (dt == 1) ((__half *)p)[i] = __float2half_rn(v);
    else ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn(v);
}
/* four consecutive elements (f32: 16-byte aligned; 16-bit: 8-byte aligned) */
__device__ __forceinline__ float4 ssm__cu_ld4(const void *p, int dt, int64_t i) {
    if (dt == 0) return *(const float4 *)((const float *)p + i);
    const uint2 u = *(const uint2 *)((const unsigned short *)p + i);
    float2 a, b;
    if (dt == 1) a = __half22float2(*(const __half2 *)&u.x), b = __half22float2(*(const __half2 *)&u.y);
    else a = __bfloat1622float2(*(const __nv_bfloat162 *)&u.x), b = __bfloat1622float2(*(const __nv_bfloat162 *)&u.y);
    return make_float4(a.x, a.y, b.x, b.y);
}
/* two consecutive elements (f32: 8-byte aligned; 16-bit: 4-byte aligned) */
__device__ __forceinline__ float2 ssm__cu_ld2(const void *p, int dt, int64_t i) {
    if (dt == 0) return *(const float2 *)((const float *)p + i);
    const unsigned u = *(const unsigned *)((const unsigned short *)p + i);
    if (dt == 1) return __half22float2(*(const __half2 *)&u);
    return __bfloat1622float2(*(const __nv_bfloat162 *)&u);
}
__device__ __forceinline__ void ssm__cu_st2(void *p, int dt, int64_t i, float2 v) {
    if (dt == 0) { *(float2 *)((float *)p + i) = v; return; }
    if (dt == 1) { __half2 h = __floats2half2_rn(v.x, v.y); *(__half2 *)((unsigned short *)p + i) = h; return; }
    __nv_bfloat162 h = __floats2bfloat162_rn(v.x, v.y);
    *(__nv_bfloat162 *)((unsigned short *)p + i) = h;
}
__device__ __forceinline__ void ssm__cu_st4(void *p, int dt, int64_t i, float4 v) {
    if (dt == 0) { *(float4 *)((float *)p + i) = v; return; }
    uint2 u;
    if (dt == 1) {
        __half2 a = __floats2half2_rn(v.x, v.y), b = __floats2half2_rn(v.z, v.w);
        u.x = *(unsigned *)&a, u.y = *(unsigned *)&b;
    } else {
        __nv_bfloat162 a = __floats2bfloat162_rn(v.x, v.y), b = __floats2bfloat162_rn(v.z, v.w);
        u.x = *(unsigned *)&a, u.y = *(unsigned *)&b;
    }
    *(uint2 *)((unsigned short *)p + i) = u;
}

/* ---- warp-level tensor-core primitives (sm_80: cp.async, ldmatrix, mma.sync) --------------- */
/* Shared by the recurrence, block-ELL, projection and delta-rule kernels, and by the Hopper
   section below. */
__device__ __forceinline__ unsigned ssm__tc_sa(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void ssm__tc_cp16(void *dst, const void *src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(ssm__tc_sa(dst)), "l"(src));
}
/* 4 bytes (the ragged tiles of the recurrence: rows of any length) */
__device__ __forceinline__ void ssm__tc_cp4(void *dst, const void *src) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(ssm__tc_sa(dst)), "l"(src));
}
/* the same, zero-filled (no read) when !ok */
__device__ __forceinline__ void ssm__tc_cp16z(void *dst, const void *src, bool ok) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(ssm__tc_sa(dst)), "l"(src), "r"(ok ? 16 : 0) : "memory");
}
__device__ __forceinline__ void ssm__tc_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void ssm__tc_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }
/* ldmatrix .x4 (four 8 x 8 b16 matrices: an m16n8k16 A fragment of 16 rows) at a shared-memory
   address (the Hopper kernels' swizzled operands), or at a pointer */
__device__ __forceinline__ void ssm__tc_ldm4a(unsigned r[4], unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
__device__ __forceinline__ void ssm__tc_ldm4(unsigned r[4], const void *p) { ssm__tc_ldm4a(r, ssm__tc_sa(p)); }
__device__ __forceinline__ void ssm__tc_ldm4t(unsigned r[4], const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(ssm__tc_sa(p)));
}
/* mma.sync with f32 accumulators: c += a b (SSM__TC_MMA) or c = a b (SSM__TC_MMA0: the zero
   accumulator in, no clearing), INSTR the shape and operand types. */
#define SSM__TC_MMA(INSTR, c, a, b0, b1)                                                                      \
    asm volatile(INSTR " {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"                            \
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])                                             \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1))
#define SSM__TC_MMA0(INSTR, c, a, b0, b1)                                                                     \
    asm volatile(INSTR " {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%10,%10,%10};\n"                        \
                 : "=f"(c[0]), "=f"(c[1]), "=f"(c[2]), "=f"(c[3])                                             \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(0.f))
#define SSM__TC_BF16 "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"
#define SSM__TC_F16 "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
#define SSM__TC_TF32 "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"
/* Tile widths and limits of the tensor-core recurrence kernels (>>linrec: the chunked passes, the
   matrix-state kernel) */
#define SSM__TC_NS 32 /* the small tile */
#define SSM__TC_N 64 /* the narrow tile (and the only one of the wgmma products) */
#define SSM__TC_NMAX 128
#define SSM__TC_LMAX 128 /* longest chunk (b of the chunk is staged in shared memory) */
#define SSM__TC_NMIN 16 /* n = 16 already runs at 21x its floor on the padded tiles; smaller n stays on the CUDA cores */
template <int BF> __device__ __forceinline__ void ssm__tc_mma(float c[4], const unsigned a[4], unsigned b0, unsigned b1) {
    if (BF) SSM__TC_MMA(SSM__TC_BF16, c, a, b0, b1);
    else SSM__TC_MMA(SSM__TC_F16, c, a, b0, b1);
}
template <int BF> __device__ __forceinline__ void ssm__tc_mma0(float c[4], const unsigned a[4], unsigned b0, unsigned b1) {
    if (BF) SSM__TC_MMA0(SSM__TC_BF16, c, a, b0, b1);
    else SSM__TC_MMA0(SSM__TC_F16, c, a, b0, b1);
}
/* Two 8-column tiles, c0 and c1, from one A fragment and the B fragments b[0..1], b[2..3] of an
   ldmatrix.x4; first: the first k-slab, accumulators start from zero. */
template <int BF>
__device__ __forceinline__ void ssm__tc_mma16(float c0[4], float c1[4], const unsigned a[4], const unsigned b[4], int first) {
    if (first) {
        ssm__tc_mma0<BF>(c0, a, b[0], b[1]);
        ssm__tc_mma0<BF>(c1, a, b[2], b[3]);
    } else {
        ssm__tc_mma<BF>(c0, a, b[0], b[1]);
        ssm__tc_mma<BF>(c1, a, b[2], b[3]);
    }
}
/* f32 on the tensor cores (3xTF32): x = hi + lo, hi = x rounded to TF32 (10-bit mantissa), and
   a product a b ~ a_hi b_hi + a_hi b_lo + a_lo b_hi on m16n8k8 (the dropped a_lo b_lo is ~2^-22
   of it): near-f32 accuracy at three MMAs; plain TF32 (hi only) is 2^-11. The rounding is an
   add and a mask (cvt.rna.tf32.f32 is emulated on sm_90, ~10 instructions); lo goes to the MMA
   as an f32 pattern, whose low 13 bits the tensor cores do not use (an error of 2^-10 of lo,
   ~2^-21 of x). */
__device__ __forceinline__ unsigned ssm__tc_tf32(float x) { return (__float_as_uint(x) + 0x1000u) & 0xffffe000u; }
__device__ __forceinline__ void ssm__tc_split32(float x, unsigned *hi, unsigned *lo) {
    *hi = ssm__tc_tf32(x);
    *lo = __float_as_uint(x - __uint_as_float(*hi));
}
/* c (+)= a b, m16n8k8 TF32; first: the accumulator starts from zero */
__device__ __forceinline__ void ssm__tc_mma8(float c[4], const unsigned a[4], unsigned b0, unsigned b1, int first) {
    if (first) SSM__TC_MMA0(SSM__TC_TF32, c, a, b0, b1);
    else SSM__TC_MMA(SSM__TC_TF32, c, a, b0, b1);
}
/* An f32 operand of m16n8k8 for SPLIT = 1 (3xTF32: hi and lo) or 0 (plain TF32: hi, rounded) */
template <int SPLIT> __device__ __forceinline__ void ssm__tc_tf32_op(float x, unsigned *hi, unsigned *lo) {
    if (SPLIT) ssm__tc_split32(x, hi, lo);
    else *hi = ssm__tc_tf32(x), *lo = 0u;
}
/* c += a b from such operands: lo hi + hi lo + hi hi (3xTF32) or hi hi */
template <int SPLIT>
__device__ __forceinline__ void ssm__tc_mma8x(float c[4], const unsigned ah[4], const unsigned al[4], unsigned bh0,
                                              unsigned bh1, unsigned bl0, unsigned bl1) {
    if (SPLIT) {
        SSM__TC_MMA(SSM__TC_TF32, c, al, bh0, bh1);
        SSM__TC_MMA(SSM__TC_TF32, c, ah, bl0, bl1);
    }
    SSM__TC_MMA(SSM__TC_TF32, c, ah, bh0, bh1);
}

/* An ssm_matrix_batch on the device: element (s, k, i, j) at p[s*ss + k*bs + i*rs + j*cs] of
   dtype dt (0 f32, 1 f16, 2 bf16). */
typedef struct ssm__cu_op {
    void *p;
    int dt;
    int64_t rs, cs, bs, ss;
} ssm__cu_op;

static ssm__cu_op ssm__cu_op_of(ssm_matrix_batch m, ssm_dtype call) {
    ssm__cu_op o;
    o.p = m.ptr, o.dt = ssm__cu_dt(m.dtype.bits ? m.dtype : call);
    o.rs = m.rs, o.cs = m.cs, o.bs = m.bs, o.ss = m.ss;
    return o;
}

/* C = alpha A B + beta C over nbatch = outer*count (s = idx / count, k = idx % count).
   32x32 output tiles, 32-deep K slabs in shared memory, f32 accumulation. */
__global__ void ssm__cu_mm_kernel(int64_t nbatch, int64_t count, int M, int N, int K, float alpha, float beta,
                                  ssm__cu_op A, ssm__cu_op B, ssm__cu_op C) {
    __shared__ float As[32][33], Bs[32][33];
    const int tilesN = (N + 31) / 32;
    const int tm = blockIdx.x / tilesN, tn = blockIdx.x % tilesN;
    const int tx = threadIdx.x, ty = threadIdx.y;
    for (int64_t bi = blockIdx.y; bi < nbatch; bi += gridDim.y) {
        const int64_t s = bi / count, k = bi % count;
        const int64_t a0 = s * A.ss + k * A.bs, b0 = s * B.ss + k * B.bs, c0 = s * C.ss + k * C.bs;
        float acc[4] = {0.f, 0.f, 0.f, 0.f};
        for (int k0 = 0; k0 < K; k0 += 32) {
#pragma unroll
            for (int r = 0; r < 4; ++r) {
                int i = tm * 32 + ty + 8 * r, kk = k0 + tx;
                As[ty + 8 * r][tx] = (i < M && kk < K) ? ssm__cu_ld(A.p, A.dt, a0 + i * A.rs + kk * A.cs) : 0.f;
                int kr = k0 + ty + 8 * r, j = tn * 32 + tx;
                Bs[ty + 8 * r][tx] = (kr < K && j < N) ? ssm__cu_ld(B.p, B.dt, b0 + kr * B.rs + j * B.cs) : 0.f;
            }
            __syncthreads();
#pragma unroll 8
            for (int kk = 0; kk < 32; ++kk) {
                float bv = Bs[kk][tx];
#pragma unroll
                for (int r = 0; r < 4; ++r) acc[r] += As[ty + 8 * r][kk] * bv;
            }
            __syncthreads();
        }
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            int i = tm * 32 + ty + 8 * r, j = tn * 32 + tx;
            if (i < M && j < N) {
                int64_t ci = c0 + i * C.rs + j * C.cs;
                float v = alpha * acc[r];
                if (beta != 0.f) v += beta * ssm__cu_ld(C.p, C.dt, ci);
                ssm__cu_stv(C.p, C.dt, ci, v);
            }
        }
    }
}

/* The same product on 64 x 64 tiles for M, N >= 64 whose slabs are not 16-byte copies (else
   ssm__cu_mmtc_kernel below): 256 threads, a 4 x 4 block of C each, from k-slabs of 16 staged as
   floats (A transposed, so a thread's four rows and four columns are one float4 read each: 16
   FMAs per two shared loads, against 4 FMAs per five in the 32 x 32 kernel). In ssm.h's generic
   chunked method at f32 n = m = 128 (h_{t-1} row-major: not k-contiguous) it ran 7.7 ms where a
   tensor-core kernel loading such slabs element by element ran 11.2
   (bench/results/cuda_cr_rowblocks_s51.log). */
__global__ void __launch_bounds__(256) ssm__cu_mm64f_kernel(int64_t nbatch, int64_t count, int M, int N, int K, float alpha,
                                                           float beta, ssm__cu_op A, ssm__cu_op B, ssm__cu_op C) {
    __shared__ __align__(16) float At[16][68], Bs[16][68];
    const int tilesN = (N + 63) / 64, tm = blockIdx.x / tilesN, tn = blockIdx.x % tilesN;
    const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
    for (int64_t bi = blockIdx.y; bi < nbatch; bi += gridDim.y) {
        const int64_t s = bi / count, k = bi % count;
        const int64_t a0 = s * A.ss + k * A.bs, b0 = s * B.ss + k * B.bs, c0 = s * C.ss + k * C.bs;
        float acc[4][4] = {{0.f}};
        for (int k0 = 0; k0 < K; k0 += 16) {
#pragma unroll
            for (int q = 0; q < 4; ++q) {
                const int e = tid + 256 * q, ka = e & 15, ia = e >> 4, jb = e & 63, kb = e >> 6;
                const int i = tm * 64 + ia, j = tn * 64 + jb;
                At[ka][ia] = (i < M && k0 + ka < K) ? ssm__cu_ld(A.p, A.dt, a0 + i * A.rs + (int64_t)(k0 + ka) * A.cs) : 0.f;
                Bs[kb][jb] = (k0 + kb < K && j < N) ? ssm__cu_ld(B.p, B.dt, b0 + (int64_t)(k0 + kb) * B.rs + j * B.cs) : 0.f;
            }
            __syncthreads();
#pragma unroll
            for (int kk = 0; kk < 16; ++kk) {
                const float4 a = *(const float4 *)&At[kk][4 * ty], b = *(const float4 *)&Bs[kk][4 * tx];
                const float av[4] = {a.x, a.y, a.z, a.w}, bv[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
                for (int r = 0; r < 4; ++r)
#pragma unroll
                    for (int c = 0; c < 4; ++c) acc[r][c] = fmaf(av[r], bv[c], acc[r][c]);
            }
            __syncthreads();
        }
#pragma unroll
        for (int r = 0; r < 4; ++r)
#pragma unroll
            for (int c = 0; c < 4; ++c) {
                const int i = tm * 64 + 4 * ty + r, j = tn * 64 + 4 * tx + c;
                if (i < M && j < N) {
                    const int64_t ci = c0 + i * C.rs + j * C.cs;
                    float v = alpha * acc[r][c];
                    if (beta != 0.f) v += beta * ssm__cu_ld(C.p, C.dt, ci);
                    ssm__cu_stv(C.p, C.dt, ci, v);
                }
            }
    }
}

/* The same product on the tensor cores where both operands have unit stride along k and 16-byte
   rows (ssm__cu_mm_kvec), on TILE x TILE tiles: 64 (M, N >= 64; 4 warps, a warp 32 x 32 of C) or
   32 (2 warps, a warp 16 x 32). m16n8k8 TF32, an f32 operand split hi + lo (3xTF32, ~f32 accurate; a 16-bit
   operand (A16, B16) is exact in TF32, so its lo products are skipped). k-slabs of 32 staged
   k-contiguous by cp.async copies of the input type, [row][k] with rows 4 banks apart
   (conflict-free fragment loads), two slabs in a ring: the next slab, of this item or the CTA's
   next one, in flight while this one multiplies. The adjoint's dA_t = g_t h_{t-1}^T (both
   operands k-contiguous) at f32 n = m = 128, under ncu: 1.77 ms on ssm__cu_mm64f_kernel's FMAs,
   1.46 with the slabs staged through registers (228 registers; slower than the FMAs for 16-bit
   h), 0.72 by cp.async. At n = m = 32 a quarter-used 64-tile ran dA slower than the 32 x 32 FMA
   kernel (f32 S64 T1024 backward 1.38 -> 1.62 ms, bench/results/cuda_cr_rowblocks_s51.log);
   the 32-tiles, a CTA taking many items in a row, replace both there. The kernel is issue-bound
   (ncu, dA of f16 S8 T1024 n = m = 128: issue slots 57% busy, ALU the busiest pipe, ~20
   instructions an MMA), so: each thread's fragment elements k = q and q + 4 come from the staged
   k = 2q, 2q + 1 (a permutation of k within the k-step, the same for both operands: one shared
   load for two elements, f32 rows 8 words apart so the 64-bit loads are conflict-free); a slab's
   item bases are kept from slab to slab (a 64-bit division and modulo per slab, twice, were a
   third of the instructions); C is stored two columns at a time where its rows allow. H200,
   dev/cuda/mmtc.cu, the grid's dA: f16 n = m = 128 1.20 -> 0.88 ms, 64 0.77 -> 0.57, 32 0.61 ->
   0.39; f32 64 0.41 -> 0.32, 128 0.67 -> 0.53. A warp's 32 rows instead of 16 at TILE 64 (each B
   fragment, loaded and converted once, serves two row blocks; 4 warps a CTA instead of 8), the
   same sums and bits: f16 128 0.89 -> 0.63, 64 0.57 -> 0.39, bf16 64 0.58 -> 0.39, f32 64 0.32 ->
   0.23, 128 0.53 -> 0.39 (bench/results/cuda_mmtc_w32.log; 16-bit products with g split into
   hi + lo of h's type ran 0.37 at f16 64, not worth f16's range). */
#define SSM__MM_KS 32
/* a warp's rows of C: 32 at TILE 64 (each B fragment serves two row blocks), 16 at 32; its columns 32 */
__host__ __device__ constexpr int ssm__mmtc_wm(int TILE) { return TILE == 64 ? 32 : 16; }
__host__ __device__ constexpr int ssm__mmtc_threads(int TILE) { return TILE * TILE / (ssm__mmtc_wm(TILE) * 32) * 32; }
template <int A16, int B16, int TILE>
__global__ void __launch_bounds__(ssm__mmtc_threads(TILE)) ssm__cu_mmtc_kernel(int64_t nbatch, int64_t count, int M, int N, int K,
                                                                       float alpha, float beta, ssm__cu_op A, ssm__cu_op B,
                                                                       ssm__cu_op C) {
    constexpr int KS = SSM__MM_KS, LDF = KS + 8, LDH = KS + 8; /* row strides: f32 words, 16-bit elements */
    constexpr int WM = ssm__mmtc_wm(TILE), RB = WM / 16, NT = ssm__mmtc_threads(TILE); /* 4 warps at TILE 64, 2 at 32 */
    constexpr int AW = TILE * (A16 ? LDH / 2 : LDF), BW = TILE * (B16 ? LDH / 2 : LDF), SW = AW + BW; /* words a slab */
    __shared__ __align__(16) float sm[2 * SW];
    const int tilesN = (N + TILE - 1) / TILE, tm = blockIdx.x / tilesN, tn = blockIdx.x % tilesN;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, q = lane & 3;
    const int wi = warp / (TILE / 32) * WM, wj = warp % (TILE / 32) * 32, nslab = K > 0 ? (K + KS - 1) / KS : 1;
    /* this CTA's items blockIdx.y + j gridDim.y as one stream of (item, k-slab) steps: the next
       step, of this item or the next, in flight while this one multiplies */
    const int64_t nitem = nbatch > blockIdx.y ? (nbatch - 1 - blockIdx.y) / gridDim.y + 1 : 0, nstep = nitem * nslab;
    /* a staged operand's elements (r, k), (r, k + 1) as TF32 pairs: 16-bit exact (lo 0), f32 split */
    auto frag2 = [&](const float *base, int s16, int dt, int r, int k, unsigned *hi, unsigned *lo) {
        if (!s16) {
            const float2 v = *(const float2 *)(base + r * LDF + k);
            ssm__tc_split32(v.x, &hi[0], &lo[0]), ssm__tc_split32(v.y, &hi[1], &lo[1]);
            return;
        }
        const unsigned w = *(const unsigned *)((const unsigned short *)base + r * LDH + k);
        const float2 f = dt == 1 ? __half22float2(*(const __half2 *)&w) : __bfloat1622float2(*(const __nv_bfloat162 *)&w);
        hi[0] = __float_as_uint(f.x), hi[1] = __float_as_uint(f.y), lo[0] = lo[1] = 0u;
    };
    /* the next slab to stage (item sbi, k-slab sks) and its item's bases */
    int64_t sbi = blockIdx.y, sa0 = 0, sb0 = 0;
    int sks = 0;
    auto bases = [&](int64_t bi) {
        const int64_t s = bi / count, kb = bi - s * count;
        sa0 = s * A.ss + kb * A.bs, sb0 = s * B.ss + kb * B.bs;
    };
    if (nstep > 0) bases(sbi);
    /* the next slab into ring slot st: rows of A (tile rows) and of B^T (tile columns), k-contiguous */
    auto stage = [&](int st) {
        const int64_t a0 = sa0, b0 = sb0;
        const int k0 = sks * KS;
        if (++sks == nslab) {
            sks = 0, sbi += gridDim.y;
            if (sbi < nbatch) bases(sbi);
        }
        float *as = sm + st * SW, *bs = as + AW;
        constexpr int EA = A16 ? 2 : 4, EB = B16 ? 2 : 4, CA = KS * EA / 16, CB = KS * EB / 16; /* 16-byte pieces a row */
        for (int c = tid; c < TILE * CA; c += NT) {
            const int r = c / CA, k = (c % CA) * (16 / EA), ig = tm * TILE + r, kg = k0 + k;
            const bool ok = ig < M && kg < K;
            ssm__tc_cp16z((char *)as + r * (A16 ? 2 * LDH : 4 * LDF) + k * EA,
                          (const char *)A.p + (ok ? (a0 + ig * A.rs + kg) * EA : 0), ok);
        }
        for (int c = tid; c < TILE * CB; c += NT) {
            const int r = c / CB, k = (c % CB) * (16 / EB), jg = tn * TILE + r, kg = k0 + k;
            const bool ok = jg < N && kg < K;
            ssm__tc_cp16z((char *)bs + r * (B16 ? 2 * LDH : 4 * LDF) + k * EB,
                          (const char *)B.p + (ok ? (b0 + jg * B.cs + kg) * EB : 0), ok);
        }
        ssm__tc_commit();
    };
    float acc[RB][4][4];
#pragma unroll
    for (int r = 0; r < RB; ++r)
#pragma unroll
        for (int t = 0; t < 4; ++t)
#pragma unroll
            for (int z = 0; z < 4; ++z) acc[r][t][z] = 0.f;
    if (nstep > 0) stage(0);
    int64_t cbi = blockIdx.y; /* the item being multiplied, and its k-slab */
    int cks = 0;
    for (int64_t step = 0; step < nstep; ++step) {
        const int st = (int)(step & 1);
        if (step + 1 < nstep) stage(st ^ 1), ssm__tc_wait<1>();
        else ssm__tc_wait<0>();
        __syncthreads();
        const float *as = sm + st * SW, *bs = as + AW;
#pragma unroll
        for (int kk = 0; kk < KS; kk += 8) {
            /* the MMA's k-columns q and q + 4 are the staged k = 2q and 2q + 1 */
            unsigned bh[4][2], bl[4][2];
#pragma unroll
            for (int t = 0; t < 4; ++t) frag2(bs, B16, B.dt, wj + 8 * t + g, kk + 2 * q, bh[t], bl[t]);
#pragma unroll
            for (int r = 0; r < RB; ++r) {
                unsigned ah[4], al[4];
#pragma unroll
                for (int z = 0; z < 2; ++z) { /* a[z], a[z + 2]: row g + 8 z of row block r */
                    unsigned h2[2], l2[2];
                    frag2(as, A16, A.dt, wi + 16 * r + g + 8 * z, kk + 2 * q, h2, l2);
                    ah[z] = h2[0], ah[z + 2] = h2[1], al[z] = l2[0], al[z + 2] = l2[1];
                }
                /* the products as passes over the four tiles: no MMA waits on the one before it */
                if (!A16)
#pragma unroll
                    for (int t = 0; t < 4; ++t) SSM__TC_MMA(SSM__TC_TF32, acc[r][t], al, bh[t][0], bh[t][1]);
                if (!B16)
#pragma unroll
                    for (int t = 0; t < 4; ++t) SSM__TC_MMA(SSM__TC_TF32, acc[r][t], ah, bl[t][0], bl[t][1]);
#pragma unroll
                for (int t = 0; t < 4; ++t) SSM__TC_MMA(SSM__TC_TF32, acc[r][t], ah, bh[t][0], bh[t][1]);
            }
        }
        __syncthreads();
        if (++cks < nslab) continue;
        cks = 0;
        /* the item's last slab: acc[r][t][z] is row wi + 16 r + g + 8 (z >> 1), column wj + 8 t + 2 q + (z & 1) of C */
        const int64_t bi = cbi, c0 = bi / count * C.ss + bi % count * C.bs;
        cbi += gridDim.y;
        if (beta == 0.f && C.cs == 1 && !((c0 | C.rs) & 1) && !((uintptr_t)C.p & (C.dt ? 3 : 7))) { /* columns 2q, 2q + 1 at once */
#pragma unroll
            for (int r = 0; r < RB; ++r)
#pragma unroll
                for (int t = 0; t < 4; ++t)
#pragma unroll
                    for (int z = 0; z < 4; z += 2) {
                        const int i = tm * TILE + wi + 16 * r + g + 8 * (z >> 1), j = tn * TILE + wj + 8 * t + 2 * q;
                        const float x = alpha * acc[r][t][z], y = alpha * acc[r][t][z + 1];
                        if (i < M && j + 1 < N) {
                            const int64_t ci = c0 + i * C.rs + j;
                            if (C.dt == 0) *(float2 *)((float *)C.p + ci) = make_float2(x, y);
                            else if (C.dt == 1) *(__half2 *)((unsigned short *)C.p + ci) = __floats2half2_rn(x, y);
                            else *(__nv_bfloat162 *)((unsigned short *)C.p + ci) = __floats2bfloat162_rn(x, y);
                        } else if (i < M && j < N) {
                            ssm__cu_stv(C.p, C.dt, c0 + i * C.rs + j, x);
                        }
                        acc[r][t][z] = acc[r][t][z + 1] = 0.f;
                    }
            continue;
        }
#pragma unroll
        for (int r = 0; r < RB; ++r)
#pragma unroll
            for (int t = 0; t < 4; ++t)
#pragma unroll
                for (int z = 0; z < 4; ++z) {
                    const int i = tm * TILE + wi + 16 * r + g + 8 * (z >> 1), j = tn * TILE + wj + 8 * t + 2 * q + (z & 1);
                    if (i < M && j < N) {
                        const int64_t ci = c0 + i * C.rs + j * C.cs;
                        float v = alpha * acc[r][t][z];
                        if (beta != 0.f) v += beta * ssm__cu_ld(C.p, C.dt, ci);
                        ssm__cu_stv(C.p, C.dt, ci, v);
                    }
                    acc[r][t][z] = 0.f;
                }
    }
}

/* C = alpha a b^T (+ beta C) for K = 1 (a column of M, a row of N; dA_t = g_t h_{t-1}^T of the
   recurrence's adjoint): G consecutive (s, k) per block iteration (ssm__cu_outer_group: ~2048
   stores an iteration, so small products, n = 16..32, keep every thread busy between the
   barriers), a bandwidth-bound outer product. Each item's offsets into A, B and C are computed
   once in shared memory (a 64-bit division per loaded element made the f32 backward 7-9%
   slower). vec: 16-byte stores (8 16-bit values or 4 floats) where C's rows are contiguous
   and aligned; where a row's vectors (N / ve) divide the block, each thread keeps one column
   vector of b in registers and walks the iteration's (item, row) pairs 256 / (N / ve) apart
   (ssm__cu_outer_rows): with a division per store the kernel was issue-bound (~140
   instructions a 16-byte store, SM 84% busy, DRAM 46%; H200, dev/cuda/outer.cu, dA of S16
   T4096 n64 f16 0.187 -> 0.154 ms, 1.40 -> 1.16x its floor, n32 0.109 -> 0.090,
   n128 0.092 -> 0.078, f32 n64 0.160 -> 0.149; bench/results/cuda_outer_carry_*.log). */
static int ssm__cu_outer_ve(const ssm__cu_op &c, int64_t N, double beta) { /* elements a store: 4 / 8 (16 bytes) or 1 */
    const int64_t ve = c.dt == 0 ? 4 : 8;
    return c.cs == 1 && N % ve == 0 && beta == 0.0 && !((uintptr_t)c.p & 15) && !(c.bs % ve) && !(c.ss % ve) && !(c.rs % ve)
               ? (int)ve : 1;
}
static int ssm__cu_outer_group(int64_t M, int64_t N, int ve) { /* M, N <= 4096; ve: elements a store */
    const int64_t per = M * (N / ve), smem_cap = 12288 / (M + N); /* 48 KB of a and b */
    int64_t g = 2048 / (per > 0 ? per : 1);
    if (g > 16) g = 16;
    if (g > smem_cap) g = smem_cap;
    return g < 1 ? 1 : (int)g;
}
template <int VE> /* the (item, row) pairs g_n x M of an iteration, a column vector a thread (256 % (N / VE) == 0) */
__device__ __forceinline__ void ssm__cu_outer_rows(const float *sm, const int64_t *base_c, int g_n, int M, int N, float alpha,
                                                   const ssm__cu_op &C) {
    const int NV = N / VE, MN = M + N, RP = 256 / NV, r0 = threadIdx.x / NV, j = (threadIdx.x % NV) * VE;
    float bv[VE];
    for (int g = r0 / M, i = r0 % M, gl = -1; g < g_n;) {
        const float *as = sm + g * MN;
        if (g != gl) { /* b's values of this thread's vector, once an item */
#pragma unroll
            for (int q = 0; q < VE; ++q) bv[q] = alpha * as[M + j + q];
            gl = g;
        }
        const float gi = as[i];
        const int64_t ci = base_c[g] + (int64_t)i * C.rs + j;
        if (VE == 4) {
            *(float4 *)((float *)C.p + ci) = make_float4(gi * bv[0], gi * bv[1 % VE], gi * bv[2 % VE], gi * bv[3 % VE]);
        } else {
            unsigned w[4];
#pragma unroll
            for (int q = 0; q < 4; ++q) {
                const float x = gi * bv[(2 * q) % VE], y = gi * bv[(2 * q + 1) % VE];
                if (C.dt == 1) { __half2 v = __floats2half2_rn(x, y); w[q] = *(unsigned *)&v; }
                else { __nv_bfloat162 v = __floats2bfloat162_rn(x, y); w[q] = *(unsigned *)&v; }
            }
            *(uint4 *)((unsigned short *)C.p + ci) = make_uint4(w[0], w[1], w[2], w[3]);
        }
        for (i += RP; i >= M; i -= M) ++g;
    }
}
__global__ void __launch_bounds__(256) ssm__cu_outer_kernel(int64_t nbatch, int64_t count, int M, int N, int G, float alpha,
                                                            float beta, ssm__cu_op A, ssm__cu_op B, ssm__cu_op C, int ve) {
    extern __shared__ float ssm__ou_sm[];
    __shared__ int64_t base_a[16], base_b[16], base_c[16];
    const int NV = N / ve, per = M * NV, MN = M + N;
    for (int64_t b0 = blockIdx.x * (int64_t)G; b0 < nbatch; b0 += (int64_t)gridDim.x * G) {
        const int g_n = nbatch - b0 < G ? (int)(nbatch - b0) : G;
        __syncthreads();
        if (threadIdx.x < g_n) {
            const int64_t bi = b0 + threadIdx.x, s = bi / count, k = bi - s * count;
            base_a[threadIdx.x] = s * A.ss + k * A.bs;
            base_b[threadIdx.x] = s * B.ss + k * B.bs;
            base_c[threadIdx.x] = s * C.ss + k * C.bs;
        }
        __syncthreads();
        for (int e = threadIdx.x; e < g_n * MN; e += blockDim.x) { /* item g: a at g MN, b after it */
            const int g = e / MN, r = e - g * MN;
            ssm__ou_sm[e] = r < M ? ssm__cu_ld(A.p, A.dt, base_a[g] + r * A.rs) : ssm__cu_ld(B.p, B.dt, base_b[g] + (r - M) * B.cs);
        }
        __syncthreads();
        if (ve > 1 && 256 % NV == 0) {
            if (ve == 4) ssm__cu_outer_rows<4>(ssm__ou_sm, base_c, g_n, M, N, alpha, C);
            else ssm__cu_outer_rows<8>(ssm__ou_sm, base_c, g_n, M, N, alpha, C);
            continue;
        }
        for (int e = threadIdx.x; e < g_n * per; e += blockDim.x) {
            const int g = G == 1 ? 0 : e / per, r = e - g * per, i = r / NV, j = (r - i * NV) * ve;
            const int64_t ci = base_c[g] + i * C.rs + j * C.cs;
            const float *as = ssm__ou_sm + g * MN, *bs = as + M, gi = alpha * as[i];
            if (ve == 4) {
                *(float4 *)((float *)C.p + ci) = make_float4(gi * bs[j], gi * bs[j + 1], gi * bs[j + 2], gi * bs[j + 3]);
            } else if (ve == 8) {
                unsigned w[4];
#pragma unroll
                for (int q = 0; q < 4; ++q) {
                    float x = gi * bs[j + 2 * q], y = gi * bs[j + 2 * q + 1];
                    if (C.dt == 1) { __half2 v = __floats2half2_rn(x, y); w[q] = *(unsigned *)&v; }
                    else { __nv_bfloat162 v = __floats2bfloat162_rn(x, y); w[q] = *(unsigned *)&v; }
                }
                *(uint4 *)((unsigned short *)C.p + ci) = make_uint4(w[0], w[1], w[2], w[3]);
            } else {
                float v = gi * bs[j];
                if (beta != 0.f) v += beta * ssm__cu_ld(C.p, C.dt, ci);
                ssm__cu_stv(C.p, C.dt, ci, v);
            }
        }
    }
}

/* dst = src (+ dst), or dst = 0 when src.p is NULL; rows x cols per batch entry. Work items are
   pieces of up to 1024 elements of one entry, each walked by a group of G lanes (32, or the
   piece rounded up to a power of two), so the 64-bit divisions that place a piece are paid once
   per piece and an element (four, when rows are unit-stride, cols % 4 == 0 and every stride and
   base allows 16-byte f32 / 8-byte 16-bit vectors) costs one 32-bit division. (Dividing a 64-bit
   index five times per element held a 16-bit -> f32 copy of 134M elements to 1.21 ms on an H200,
   ~0.66 TB/s.) */
__global__ void ssm__cu_copy_kernel(int64_t total, int64_t count, int rows, int cols, ssm__cu_op src,
                                    ssm__cu_op dst, int accumulate) {
    const int64_t E = (int64_t)rows * cols, gid = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (E <= 0) return;
    if (E > 2147483647) { /* entries past int range: element by element */
        for (int64_t idx = gid; idx < total; idx += (int64_t)gridDim.x * blockDim.x) {
            int64_t j = idx % cols, i = (idx / cols) % rows, bi = idx / E;
            int64_t s = bi / count, k = bi % count;
            int64_t di = s * dst.ss + k * dst.bs + i * dst.rs + j * dst.cs;
            float v = src.p ? ssm__cu_ld(src.p, src.dt, s * src.ss + k * src.bs + i * src.rs + j * src.cs) : 0.f;
            if (accumulate) v += ssm__cu_ld(dst.p, dst.dt, di);
            ssm__cu_stv(dst.p, dst.dt, di, v);
        }
        return;
    }
    const int al_s = src.dt == 0 ? 15 : 7, al_d = dst.dt == 0 ? 15 : 7;
    const int V = src.p && src.cs == 1 && dst.cs == 1 && cols % 4 == 0 && !((src.rs | src.bs | src.ss | dst.rs | dst.bs | dst.ss) & 3) &&
                          !((uintptr_t)src.p & al_s) && !((uintptr_t)dst.p & al_d)
                      ? 4
                      : 1;
    const int U = (int)(E / V), cu = cols / V;               /* units (of V elements) an entry, a row */
    const int CH = U < 1024 / V ? U : 1024 / V, npc = (U + CH - 1) / CH; /* units a piece, pieces an entry */
    const int G = CH >= 32 ? 32 : CH <= 1 ? 1 : 1 << (32 - __clz(CH - 1)), sub = (int)(gid & (G - 1));
    const int64_t items = total / E * npc, step = (int64_t)gridDim.x * blockDim.x / G;
    for (int64_t it = gid / G; it < items; it += step) {
        const int64_t bi = it / npc, s = bi / count, k = bi - s * count;
        const int u0 = (int)(it - bi * npc) * CH, u1 = u0 + CH < U ? u0 + CH : U;
        const int64_t so = s * src.ss + k * src.bs, dof = s * dst.ss + k * dst.bs;
        for (int u = u0 + sub; u < u1; u += G) {
            const int i = u / cu, j = (u - i * cu) * V;
            const int64_t di = dof + i * dst.rs + j * dst.cs;
            if (V == 4) {
                float4 v = ssm__cu_ld4(src.p, src.dt, so + i * src.rs + j);
                if (accumulate) {
                    const float4 w = ssm__cu_ld4(dst.p, dst.dt, di);
                    v.x += w.x, v.y += w.y, v.z += w.z, v.w += w.w;
                }
                ssm__cu_st4(dst.p, dst.dt, di, v);
                continue;
            }
            float v = src.p ? ssm__cu_ld(src.p, src.dt, so + i * src.rs + j * src.cs) : 0.f;
            if (accumulate) v += ssm__cu_ld(dst.p, dst.dt, di);
            ssm__cu_stv(dst.p, dst.dt, di, v);
        }
    }
}

/* ---- the backend's primitives: gemm (cuBLAS where a layout allows, else the kernels above)
   and copy ------------------------------------------------------------------------------------ */

/* 1 when operand o's slabs go by 16-byte copies (ssm__cu_mmtc_kernel): unit stride along k
   (kstride), and its other strides, K and the base in whole 16-byte pieces */
static int ssm__cu_mm_kvec(const ssm__cu_op &o, int64_t kstride, int64_t other, int64_t K) {
    const int64_t ve = o.dt == 0 ? 4 : 8;
    return kstride == 1 && !((other | o.bs | o.ss | K) & (ve - 1)) && !((uintptr_t)o.p & 15);
}
static ssm_result ssm__cu_mm_launch(ssm_ctx *ctx, int64_t outer, int64_t count, int64_t M, int64_t N, int64_t K,
                                    float alpha, float beta, ssm__cu_op A, ssm__cu_op B, ssm__cu_op C) {
    typedef void (*mm_fn)(int64_t, int64_t, int, int, int, float, float, ssm__cu_op, ssm__cu_op, ssm__cu_op);
    const int64_t nb = outer * count;
    if (nb <= 0 || M <= 0 || N <= 0) return SSM_OK;
    const int tc = ssm__cu_mm_kvec(A, A.cs, A.rs, K) && ssm__cu_mm_kvec(B, B.rs, B.cs, K), big = M >= 64 && N >= 64;
    const cudaStream_t st = ssm__cu_st(ctx)->stream;
    if (tc) { /* 64-tiles one item a CTA; 32-tiles (small products) ~16 CTAs an SM, each a run of items */
        const int T = big ? 64 : 32;
        const int64_t tiles = ((M + T - 1) / T) * ((N + T - 1) / T), per = 16 * (int64_t)ssm__cu_st(ctx)->sms / tiles + 1;
        mm_fn k = A.dt ? (B.dt ? ssm__cu_mmtc_kernel<1, 1, 64> : ssm__cu_mmtc_kernel<1, 0, 64>)
                       : (B.dt ? ssm__cu_mmtc_kernel<0, 1, 64> : ssm__cu_mmtc_kernel<0, 0, 64>);
        if (!big)
            k = A.dt ? (B.dt ? ssm__cu_mmtc_kernel<1, 1, 32> : ssm__cu_mmtc_kernel<1, 0, 32>)
                     : (B.dt ? ssm__cu_mmtc_kernel<0, 1, 32> : ssm__cu_mmtc_kernel<0, 0, 32>);
        k<<<dim3((unsigned)tiles, SSM__CU_GRID_Y(big || nb < per ? nb : per)), ssm__mmtc_threads(T), 0, st>>>(
            nb, count, (int)M, (int)N, (int)K, alpha, beta, A, B, C);
        SSM__CU_LAUNCHED(ctx, "ssm__cu_mmtc_kernel");
        return SSM_OK;
    }
    if (big) {
        dim3 grid((unsigned)(((M + 63) / 64) * ((N + 63) / 64)), SSM__CU_GRID_Y(nb));
        ssm__cu_mm64f_kernel<<<grid, 256, 0, st>>>(nb, count, (int)M, (int)N, (int)K, alpha, beta, A, B, C);
        SSM__CU_LAUNCHED(ctx, "ssm__cu_mm64f_kernel");
        return SSM_OK;
    }
    dim3 grid((unsigned)(((M + 31) / 32) * ((N + 31) / 32)), SSM__CU_GRID_Y(nb)), block(32, 8);
    ssm__cu_mm_kernel<<<grid, block, 0, st>>>(nb, count, (int)M, (int)N, (int)K, alpha, beta, A, B, C);
    SSM__CU_LAUNCHED(ctx, "ssm__cu_mm_kernel");
    return SSM_OK;
}

/* cuBLAS strided-batched GEMM for one batch level in one dtype (column-major: C = op(A) op(B)
   when C is column-major; a row-major C is C^T = B^T A^T, operands swapped and every view
   transposed). Returns SSM__NOT_MINE where the layout does not fit. */
static ssm_result ssm__cu_cublas(ssm_ctx *ctx, ssm_dtype dtype, int64_t batch, int64_t M, int64_t N, int64_t K,
                                 double alpha, ssm_matrix_batch a, ssm_matrix_batch b, double beta, ssm_matrix_batch c) {
    ssm__cu_state *s = ssm__cu_st(ctx);
    const int64_t big = 2147483647;
    int64_t m_ = M, n_ = N, lda, ldb;
    cublasOperation_t oa, ob;
    if (c.rs != 1 && c.cs == 1) {
        ssm_matrix_batch t = a;
        a = b, b = t;
        m_ = N, n_ = M;
        { int64_t x = a.rs; a.rs = a.cs; a.cs = x; }
        { int64_t x = b.rs; b.rs = b.cs; b.cs = x; }
        { int64_t x = c.rs; c.rs = c.cs; c.cs = x; }
    }
    if (c.rs != 1 || c.cs < m_ || K <= 0 || batch >= big || m_ >= big || n_ >= big || K >= big) return SSM__NOT_MINE;
    if (a.bs < 0 || b.bs < 0 || c.bs < 0 || (batch > 1 && c.bs < c.cs * n_)) return SSM__NOT_MINE;
    if (a.rs == 1 && a.cs >= m_) oa = CUBLAS_OP_N, lda = a.cs;
    else if (a.cs == 1 && a.rs >= K) oa = CUBLAS_OP_T, lda = a.rs;
    else return SSM__NOT_MINE;
    if (b.rs == 1 && b.cs >= K) ob = CUBLAS_OP_N, ldb = b.cs;
    else if (b.cs == 1 && b.rs >= n_) ob = CUBLAS_OP_T, ldb = b.rs;
    else return SSM__NOT_MINE;
    if (lda <= 0 || ldb <= 0 || lda >= big || ldb >= big || c.cs >= big) return SSM__NOT_MINE;
    {
        int dt = ssm__cu_dt(dtype);
        cudaDataType ty = dt == 0 ? CUDA_R_32F : (dt == 1 ? CUDA_R_16F : CUDA_R_16BF);
        float al = (float)alpha, be = (float)beta;
        cublasStatus_t st = cublasSetStream(s->cublas, s->stream);
        if (st == CUBLAS_STATUS_SUCCESS)
            st = cublasGemmStridedBatchedEx(s->cublas, oa, ob, (int)m_, (int)n_, (int)K, &al, a.ptr, ty, (int)lda, a.bs,
                                            b.ptr, ty, (int)ldb, b.bs, &be, c.ptr, ty, (int)c.cs, c.bs, (int)batch,
                                            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        if (st != CUBLAS_STATUS_SUCCESS)
            return ssm_ctx_error(ctx, SSM_ERROR_BACKEND, "cuBLAS: cublasGemmStridedBatchedEx failed: %s",
                                 cublasGetStatusString(st));
    }
    return SSM_OK;
}

static int ssm__cu_same_dtype(ssm_dtype call, ssm_matrix_batch m) { return !m.dtype.bits || ssm_dtype_equal(m.dtype, call); }

static ssm_result ssm__cu_gemm(ssm_ctx *ctx, ssm_dtype dtype, int64_t outer, int64_t batch, int64_t M, int64_t N,
                               int64_t K, double alpha, ssm_matrix_batch A, ssm_matrix_batch B, double beta,
                               ssm_matrix_batch C) {
    ssm__cu_state *s = ssm__cu_st(ctx);
    ssm__cu_device_guard g(s->device);
    ssm__cu_op a = ssm__cu_op_of(A, dtype), b = ssm__cu_op_of(B, dtype), c = ssm__cu_op_of(C, dtype);
    if (outer <= 0 || batch <= 0 || M <= 0 || N <= 0) return SSM_OK;
    if (dtype.bits == 64) return ssm_ctx_error(ctx, SSM_ERROR_INVALID_DTYPE, "ssm_cuda gemm: f64 is not supported");
    if (K == 1 && M <= 4096 && N <= 4096) { /* an outer product: bandwidth-bound, its own kernel */
        int64_t nb = outer * batch;
        const int ve = ssm__cu_outer_ve(c, N, beta), G = ssm__cu_outer_group(M, N, ve);
        const int64_t blocks = (nb + G - 1) / G;
        ssm__cu_outer_kernel<<<(unsigned)(blocks < 65536 * 4 ? blocks : 65536 * 4), 256, (size_t)G * (M + N) * 4u, s->stream>>>(
            nb, batch, (int)M, (int)N, G, (float)alpha, (float)beta, a, b, c, ve);
        SSM__CU_LAUNCHED(ctx, "ssm__cu_outer_kernel");
        return SSM_OK;
    }
    if (ssm__cu_same_dtype(dtype, A) && ssm__cu_same_dtype(dtype, B) && ssm__cu_same_dtype(dtype, C) &&
        (outer == 1 || (A.ss == batch * A.bs && B.ss == batch * B.bs && C.ss == batch * C.bs))) {
        ssm_result r = ssm__cu_cublas(ctx, dtype, outer * batch, M, N, K, alpha, A, B, beta, C);
        if (r != SSM__NOT_MINE) return r;
    }
    return ssm__cu_mm_launch(ctx, outer, batch, M, N, K, (float)alpha, (float)beta, a, b, c);
}

static ssm_result ssm__cu_copy(ssm_ctx *ctx, ssm_dtype dtype, int64_t outer, int64_t batch, int64_t rows, int64_t cols,
                               ssm_matrix_batch src, ssm_matrix_batch dst, int accumulate) {
    ssm__cu_state *s = ssm__cu_st(ctx);
    ssm__cu_device_guard g(s->device);
    int64_t total = outer * batch * rows * cols, blocks;
    if (total <= 0) return SSM_OK;
    blocks = (total + 255) / 256;
    if (blocks > 65536) blocks = 65536;
    ssm__cu_copy_kernel<<<(unsigned)blocks, 256, 0, s->stream>>>(total, batch, (int)rows, (int)cols,
                                                                 ssm__cu_op_of(src, dtype), ssm__cu_op_of(dst, dtype),
                                                                 accumulate);
    SSM__CU_LAUNCHED(ctx, "ssm__cu_copy_kernel");
    return SSM_OK;
}

/* >>sm90 ---- Hopper (sm_90a) primitives: mbarriers, TMA, wgmma ------------------------------ */
/* Shared by the kernels that run on wgmma (block-ELL's gather-GEMM, projection kernel 3, the
   dense recurrence's chunk products).
   Device code only in sm_90a builds (__CUDA_ARCH_FEAT_SM90_ALL): other targets compile those
   kernels as empty stubs, which the host tells apart by their static shared memory (the real
   kernels have some, a stub none). The tensor-map encoder is the driver's entry point, fetched
   through the runtime (CUDA 12.5+). */
#if CUDART_VERSION >= 12050 /* cudaGetDriverEntryPointByVersion */
#define SSM__SM90_HAVE 1
/* The 16-bit element type of BF (1 bf16, 0 f16) and a store of two adjacent elements. */
template <int BF> struct ssm__sm90_ty { typedef __half T; };
template <> struct ssm__sm90_ty<1> { typedef __nv_bfloat16 T; };
template <int BF> __device__ __forceinline__ void ssm__sm90_st2(void *p, int64_t i, float a, float b) {
    if (BF) *(__nv_bfloat162 *)((__nv_bfloat16 *)p + i) = __floats2bfloat162_rn(a, b);
    else *(__half2 *)((__half *)p + i) = __floats2half2_rn(a, b);
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
__device__ __forceinline__ void ssm__sm90_bar_init(uint64_t *b, int count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(ssm__tc_sa(b)), "r"(count) : "memory");
}
__device__ __forceinline__ void ssm__sm90_expect_tx(uint64_t *b, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(ssm__tc_sa(b)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void ssm__sm90_arrive(uint64_t *b) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(ssm__tc_sa(b)) : "memory");
}
__device__ __forceinline__ void ssm__sm90_wait(uint64_t *b, int phase) {
    uint32_t done;
    do {
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done)
                     : "r"(ssm__tc_sa(b)), "r"(phase)
                     : "memory");
    } while (!done);
}
__device__ __forceinline__ void ssm__sm90_tma2(void *dst, const CUtensorMap *map, uint64_t *bar, int c0, int c1) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];\n" ::"r"(
                     ssm__tc_sa(dst)),
                 "l"((uint64_t)map), "r"(ssm__tc_sa(bar)), "r"(c0), "r"(c1)
                 : "memory");
}
__device__ __forceinline__ void ssm__sm90_tma4(void *dst, const CUtensorMap *map, uint64_t *bar, int c0, int c1, int c2, int c3) {
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, %6}], [%2];\n" ::"r"(
                     ssm__tc_sa(dst)),
                 "l"((uint64_t)map), "r"(ssm__tc_sa(bar)), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
                 : "memory");
}
/* ssm__sm90_tma2 into the same offset of every CTA of the cluster in mask (bit = rank), each
   CTA's barrier at bar's offset taking the bytes. */
__device__ __forceinline__ void ssm__sm90_tma2_mc(void *dst, const CUtensorMap *map, uint64_t *bar, int c0, int c1, uint16_t mask) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {%3, %4}], [%2], %5;\n" ::"r"(
                     ssm__tc_sa(dst)),
                 "l"((uint64_t)map), "r"(ssm__tc_sa(bar)), "r"(c0), "r"(c1), "h"(mask)
                 : "memory");
}
/* An arrival on bar's twin in CTA rank of the cluster, at the default (CTA-scope) release: the
   .release.cluster form stalls each arriving warp ~1 us (dev/cuda/gemm_wgmma.cu, c128 vs c128r). */
__device__ __forceinline__ void ssm__sm90_arrive_at(uint64_t *bar, uint32_t rank) {
    uint32_t ra;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(ra) : "r"(ssm__tc_sa(bar)), "r"(rank));
    asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(ra) : "memory");
}
__device__ __forceinline__ void ssm__sm90_cluster_sync(void) {
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
__device__ __forceinline__ uint32_t ssm__sm90_cluster_rank(void) {
    uint32_t r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
    return r;
}
/* An operand in shared memory in TMA's swizzle of its row width RB (128, 64 or 32 bytes): 8-row
   groups 8 RB bytes apart (SBO), LBO unused (1). The same descriptor serves a K-major operand
   (rows along M or N, K contiguous; k16 steps 32 bytes along a row) and, with trans-a / trans-b,
   an MN-major one of one swizzle atom's width (rows along K; k16 steps 16 rows). */
template <int RB = 128> __device__ __forceinline__ uint64_t ssm__sm90_desc(const void *p) {
    constexpr uint64_t layout = RB == 128 ? 1 : RB == 64 ? 2 : 3;
    return (uint64_t)((ssm__tc_sa(p) & 0x3FFFF) >> 4) | (1ull << 16) | ((uint64_t)(RB / 2) << 32) | (layout << 62);
}
/* The 1024-byte aligned start of a kernel's dynamic shared memory (the 128-byte swizzle's atom). */
__device__ __forceinline__ unsigned char *ssm__sm90_ring(void *smem) {
    return (unsigned char *)(((uintptr_t)smem + 1023) & ~(uintptr_t)1023);
}
/* Thread 0 of a warp-specialised CTA: a ring of ST stages, full[s] completed by the producer's
   TMA bytes (one arrival), empty[s] by `consumers` arrivals; then every thread syncs. Barriers
   a kernel adds (order[] in projection kernel 3) are initialised by its thread 0 beforehand. */
__device__ __forceinline__ void ssm__sm90_ring_init(uint64_t *full, uint64_t *empty, int ST, int consumers) {
    if (threadIdx.x == 0) {
        for (int s = 0; s < ST; ++s) ssm__sm90_bar_init(&full[s], 1), ssm__sm90_bar_init(&empty[s], consumers);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
}
/* Register budgets of the roles: the producer warpgroup gives registers up (40 a thread), the two
   consumer warpgroups take them (232 a thread) for their accumulators. */
__device__ __forceinline__ void ssm__sm90_producer_regs(void) { asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n"); }
__device__ __forceinline__ void ssm__sm90_consumer_regs(void) { asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n"); }
/* Keeps the compiler from moving accumulator reads or writes across a wgmma fence / wait. */
__device__ __forceinline__ void ssm__sm90_rf(float &r) { asm volatile("" : "+f"(r)::"memory"); }
/* The same for a register A operand: the wgmma reads it after its instruction has issued, so it
   must stay live (its register not reused) until the wait. */
__device__ __forceinline__ void ssm__sm90_ra(uint32_t &r) { asm volatile("" : "+r"(r)::"memory"); }
__device__ __forceinline__ void ssm__sm90_fence(void) { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void ssm__sm90_commit(void) { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void ssm__sm90_wait_mma(void) {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
/* wgmma m64nNk16, A and B by descriptor, f32 accumulators d[N / 2]; TA = 1: A is M-major, TB = 1:
   B is N-major (both otherwise K-major). */
#define SSM__SM90_MMA64(TY)                                                               \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"                                                              \
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " {"                                              \
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"                                   \
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"                          \
                 "}, %32, %33, p, 1, 1, %35, %36;\n}\n"                                                                      \
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),         \
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),   \
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])  \
                 : "l"(da), "l"(db), "r"(1), "n"(TA), "n"(TB))
#define SSM__SM90_MMA128(TY)                                                              \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"                                                              \
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32." TY "." TY " {"                                             \
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"                                   \
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"                         \
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"                         \
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"                          \
                 "}, %64, %65, p, 1, 1, %67, %68;\n}\n"                                                                      \
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),         \
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),   \
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
                   "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
                   "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
                   "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
                   "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])  \
                 : "l"(da), "l"(db), "r"(1), "n"(TA), "n"(TB))
#define SSM__SM90_MMA256(TY)                                                              \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"                                                                     \
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32." TY "." TY " {"                                                     \
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"                                           \
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"                                 \
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"                                 \
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63,"                                 \
                 "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79,"                                 \
                 "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95,"                                 \
                 "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111,"                     \
                 "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"                  \
                 "}, %128, %129, p, 1, 1, %131, %132;\n}\n"                                                                           \
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),                 \
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),           \
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),         \
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),         \
                   "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),         \
                   "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),         \
                   "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),         \
                   "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),         \
                   "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),         \
                   "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),         \
                   "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),         \
                   "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),         \
                   "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),     \
                   "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), \
                   "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), \
                   "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])  \
                 : "l"(da), "l"(db), "r"(1), "n"(TA), "n"(TB))
#define SSM__SM90_MMA32(TY)                                                                                       \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"                                                   \
                 "wgmma.mma_async.sync.aligned.m64n32k16.f32." TY "." TY " {"                                    \
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"                          \
                 "}, %16, %17, p, 1, 1, %19, %20;\n}\n"                                                          \
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),       \
                   "+f"(d[15])                                                                                    \
                 : "l"(da), "l"(db), "r"(1), "n"(TA), "n"(TB))
template <int N, int BF, int TA, int TB> struct ssm__sm90_mma;
template <int TA, int TB> struct ssm__sm90_mma<32, 1, TA, TB> {
    static __device__ __forceinline__ void run(float *d, uint64_t da, uint64_t db) { SSM__SM90_MMA32("bf16"); }
};
template <int TA, int TB> struct ssm__sm90_mma<32, 0, TA, TB> {
    static __device__ __forceinline__ void run(float *d, uint64_t da, uint64_t db) { SSM__SM90_MMA32("f16"); }
};
template <int TA, int TB> struct ssm__sm90_mma<64, 1, TA, TB> {
    static __device__ __forceinline__ void run(float *d, uint64_t da, uint64_t db) { SSM__SM90_MMA64("bf16"); }
};
template <int TA, int TB> struct ssm__sm90_mma<64, 0, TA, TB> {
    static __device__ __forceinline__ void run(float *d, uint64_t da, uint64_t db) { SSM__SM90_MMA64("f16"); }
};
template <int TA, int TB> struct ssm__sm90_mma<128, 1, TA, TB> {
    static __device__ __forceinline__ void run(float *d, uint64_t da, uint64_t db) { SSM__SM90_MMA128("bf16"); }
};
template <int TA, int TB> struct ssm__sm90_mma<128, 0, TA, TB> {
    static __device__ __forceinline__ void run(float *d, uint64_t da, uint64_t db) { SSM__SM90_MMA128("f16"); }
};
template <int TA, int TB> struct ssm__sm90_mma<256, 1, TA, TB> {
    static __device__ __forceinline__ void run(float *d, uint64_t da, uint64_t db) { SSM__SM90_MMA256("bf16"); }
};
template <int TA, int TB> struct ssm__sm90_mma<256, 0, TA, TB> {
    static __device__ __forceinline__ void run(float *d, uint64_t da, uint64_t db) { SSM__SM90_MMA256("f16"); }
};
#undef SSM__SM90_MMA32
#undef SSM__SM90_MMA64
#undef SSM__SM90_MMA128
#undef SSM__SM90_MMA256
/* wgmma m64n32k16 with A from registers (each warp's 16 rows as the m16n8k16 A fragment), B by
   descriptor (TB = 1: N-major, else K-major). */
#define SSM__SM90_MMA32RS(TY)                                                                                     \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"                                                   \
                 "wgmma.mma_async.sync.aligned.m64n32k16.f32." TY "." TY " {"                                    \
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"                          \
                 "}, {%16, %17, %18, %19}, %20, p, 1, 1, %22;\n}\n"                                             \
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),       \
                   "+f"(d[15])                                                                                    \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1), "n"(TB))
template <int BF, int TB> struct ssm__sm90_mma32rs {
    static __device__ __forceinline__ void run(float *d, const uint32_t *a, uint64_t db) { SSM__SM90_MMA32RS("f16"); }
};
template <int TB> struct ssm__sm90_mma32rs<1, TB> {
    static __device__ __forceinline__ void run(float *d, const uint32_t *a, uint64_t db) { SSM__SM90_MMA32RS("bf16"); }
};
#undef SSM__SM90_MMA32RS
/* wgmma m64n64k16 with A from registers, B by descriptor (TB = 1: N-major); acc = 0: d = A B
   (the accumulators' old values are not read). */
#define SSM__SM90_MMA64RS(TY)                                                                                              \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"                                                            \
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " {"                                             \
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"                                   \
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"                          \
                 "}, {%32, %33, %34, %35}, %36, p, 1, 1, %38;\n}\n"                                                       \
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),         \
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),   \
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])  \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(acc), "n"(TB))
template <int BF, int TB> struct ssm__sm90_mma64rs {
    static __device__ __forceinline__ void run(float *d, const uint32_t *a, uint64_t db, int acc) { SSM__SM90_MMA64RS("f16"); }
};
template <int TB> struct ssm__sm90_mma64rs<1, TB> {
    static __device__ __forceinline__ void run(float *d, const uint32_t *a, uint64_t db, int acc) { SSM__SM90_MMA64RS("bf16"); }
};
#undef SSM__SM90_MMA64RS
#endif /* __CUDA_ARCH_FEAT_SM90_ALL */

typedef CUresult (*ssm__sm90_encode_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *,
                                        const cuuint64_t *, const cuuint32_t *, const cuuint32_t *, CUtensorMapInterleave,
                                        CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
static ssm__sm90_encode_fn ssm__sm90_encoder(void) {
    static ssm__sm90_encode_fn f = NULL; /* the driver's entry point: the same value for every caller */
    if (!f) {
        cudaDriverEntryPointQueryResult q;
        void *fp = NULL;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fp, 12000, cudaEnableDefault, &q) == cudaSuccess &&
            q == cudaDriverEntryPointSuccess)
            f = (ssm__sm90_encode_fn)fp;
        else
            cudaGetLastError();
    }
    return f;
}
/* A TMA map of a 16-bit tensor (bf: bf16, else f16) of rank dims, dims[0] contiguous, pitch[i]
   the byte stride of dim i + 1, boxes of box[] elements with the swizzle of a box row's width
   (128, 64 or 32 bytes), zero fill past the edges: 1 when the driver encoded it. */
static int ssm__sm90_map(CUtensorMap *m, int bf, const void *p, int rank, const cuuint64_t *dims, const cuuint64_t *pitch,
                         const cuuint32_t *box, CUtensorMapL2promotion l2) {
    const cuuint32_t es[5] = {1, 1, 1, 1, 1};
    const int rb = (int)box[0] * 2;
    const CUtensorMapSwizzle sw = rb == 128 ? CU_TENSOR_MAP_SWIZZLE_128B : rb == 64 ? CU_TENSOR_MAP_SWIZZLE_64B : CU_TENSOR_MAP_SWIZZLE_32B;
    return ssm__sm90_encoder()(m, bf ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, (cuuint32_t)rank,
                               (void *)p, dims, pitch, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE, sw, l2,
                               CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}
/* 1 when the context's device has compute capability 9.0 (the sm_90a code runs there only). */
static int ssm__sm90_device(const ssm__cu_state *st) {
    int major = 0, minor = 0;
    return cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, st->device) == cudaSuccess &&
           cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, st->device) == cudaSuccess && major == 9 &&
           minor == 0 && ssm__sm90_encoder() != NULL;
}
/* 1 when f (an sm_90a kernel) is the real one in this binary (a stub has no static shared
   memory) and dyn bytes of dynamic shared memory fit beside its static ones; raises its limit. */
static int ssm__sm90_kernel_ok(const ssm__cu_state *st, const void *f, size_t dyn) {
    cudaFuncAttributes fa;
    return cudaFuncGetAttributes(&fa, f) == cudaSuccess && fa.sharedSizeBytes > 0 && fa.sharedSizeBytes + dyn <= st->smem_optin &&
           cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)dyn) == cudaSuccess;
}
#endif /* CUDART_VERSION >= 12050 */

/* >>linrec ---- dense linear recurrence ---------------------------------------------------- */
/* ---- dense linear recurrence: the specialised kernels -----------------------------------------
   ssm.h's driver folds h_0, keeps 16-bit inputs' states in an f32 work buffer (plan.work) and
   calls linrec_steps for steps 1..T-1 of all S sequences (plan.group = S); the kernels below
   take the sequential and chunked methods where they fit, everything else runs ssm.h's
   generic methods on the gemm and copy above. */
typedef struct ssm__cu_lr {
    ssm_ctx *ctx;
    const ssm_linrec_plan *p;
    int64_t S, n, m;
    ssm_linrec_stats *st;
} ssm__cu_lr;

/* The fused recurrence kernel: block (c, s) runs steps u = 0 .. len-1 of chunk c of sequence s,
   h_u = A_u h_{u-1} + b_u from h_{-1} = init (zero when init.p is NULL), where chunk c starts at
   time offset c*cs_t in every view (chs = chunk strides). With P.p set it also forms
   P = A_{len-1} ... A_0 (f32, [S, nchunks, n, n]). `skip_last` leaves the chunk's last step out. */
typedef struct ssm__cu_rv {
    void *p;
    int dt;
    int64_t off, ts, rs, cs, ss, chs;
} ssm__cu_rv;

__global__ void ssm__cu_rec_kernel(int64_t s0, int n, int m, int64_t T, int64_t L, int skip_last, ssm__cu_rv A,
                                   ssm__cu_rv b, ssm__cu_rv h, ssm__cu_rv init, float *P, int64_t nchunks) {
    extern __shared__ float sm[];
    const int np = n + 1;
    float *As = sm, *hc = As + n * np, *hn = hc + n * m, *Pc = hn + n * m, *Pn = Pc + n * n;
    const int64_t c = blockIdx.x, s = s0 + blockIdx.y;
    const int tid = threadIdx.x, nt = blockDim.x;
    int64_t len = T - c * L;
    if (len > L) len = L;
    if (skip_last) --len;
    if (len <= 0) return;
    const int64_t a0 = A.off + s * A.ss + c * A.chs, b0 = b.off + s * b.ss + c * b.chs, h0 = h.off + s * h.ss + c * h.chs;
    for (int e = tid; e < n * m; e += nt) {
        int i = e / m, j = e % m;
        hc[e] = init.p ? ssm__cu_ld(init.p, init.dt, init.off + s * init.ss + c * init.chs + i * init.rs + j * init.cs) : 0.f;
    }
    for (int64_t u = 0; u < len; ++u) {
        const int64_t au = a0 + u * A.ts;
        for (int e = tid; e < n * n; e += nt) {
            int i = e / n, j = e % n;
            As[i * np + j] = ssm__cu_ld(A.p, A.dt, au + i * A.rs + j * A.cs);
        }
        __syncthreads();
        for (int e = tid; e < n * m; e += nt) {
            int i = e / m, j = e % m;
            float acc = ssm__cu_ld(b.p, b.dt, b0 + u * b.ts + i * b.rs + j * b.cs);
            const float *ar = As + i * np;
            for (int k = 0; k < n; ++k) acc += ar[k] * hc[k * m + j];
            hn[e] = acc;
            ssm__cu_stv(h.p, h.dt, h0 + u * h.ts + i * h.rs + j * h.cs, acc);
        }
        if (P) {
            for (int e = tid; e < n * n; e += nt) {
                int i = e / n, j = e % n;
                float acc;
                if (u == 0) acc = As[i * np + j];
                else {
                    const float *ar = As + i * np;
                    acc = 0.f;
                    for (int k = 0; k < n; ++k) acc += ar[k] * Pc[k * n + j];
                }
                Pn[e] = acc;
            }
        }
        __syncthreads();
        { float *t = hc; hc = hn; hn = t; }
        if (P) { float *t = Pc; Pc = Pn; Pn = t; }
    }
    if (P) {
        float *dst = P + (s * nchunks + c) * (int64_t)n * n;
        for (int e = tid; e < n * n; e += nt) dst[e] = Pc[e];
    }
}

static size_t ssm__cu_rec_smem(int64_t n, int64_t m, int withP) {
    return (size_t)(n * (n + 1) + 2 * n * m + (withP ? 2 * n * n : 0)) * 4u;
}
static ssm__cu_rv ssm__cu_rv_of(ssm_seq_view v, int64_t start, int64_t chs_steps) {
    ssm__cu_rv r;
    r.p = v.ptr, r.dt = ssm__cu_dt(v.dtype), r.off = v.off + start * v.ts, r.ts = v.ts, r.rs = v.rs, r.cs = v.cs;
    r.ss = v.ss, r.chs = chs_steps * v.ts;
    return r;
}
/* 1 when V (2 or 4) elements of v from index i on (i a multiple of V, as is step, the distance
   between the view's rows) take one vector load or store: V f32 or V 16-bit values aligned */
__host__ __device__ __forceinline__ int ssm__cu_vec_at(const ssm__cu_rv &v, int64_t i, int64_t step, int V) {
    return !((i | step) & (V - 1)) && !((uintptr_t)v.p & (V * (v.dt == 0 ? 4 : 2) - 1));
}
__host__ __device__ __forceinline__ int ssm__cu_v4_at(const ssm__cu_rv &v, int64_t i, int64_t step) { return ssm__cu_vec_at(v, i, step, 4); }
/* Steps t, t + 1, ... of every sequence of a view, as a copy's operand (batch index: the step). */
static ssm_matrix_batch ssm__cu_mb_at(ssm_seq_view v, int64_t t) {
    ssm_matrix_batch m;
    m.ptr = (char *)v.ptr + (v.off + t * v.ts) * (int64_t)ssm__cu_esize(v.dtype), m.dtype = v.dtype;
    m.rs = v.rs, m.cs = v.cs, m.bs = v.ts, m.ss = v.ss;
    return m;
}
/* Steps start, start + step, ... of every sequence as a view of their own (ssm.h's ssm__seq_sub:
   its implementation may live in another translation unit). */
static ssm_seq_view ssm__cu_seq_sub(ssm_seq_view v, int64_t start, int64_t step) {
    v.off += start * v.ts, v.ts *= step;
    return v;
}
/* Matrix t of every sequence of a view, as a gemm operand. */
static ssm__cu_op ssm__cu_op_at(ssm_seq_view v, int64_t t) {
    ssm__cu_op o;
    o.p = (char *)v.ptr + (v.off + t * v.ts) * (int64_t)ssm__cu_esize(v.dtype), o.dt = ssm__cu_dt(v.dtype);
    o.rs = v.rs, o.cs = v.cs, o.bs = 0, o.ss = v.ss;
    return o;
}

static int ssm__cu_tcm_fits(const ssm__cu_lr *L, const ssm__cu_rv &A, const ssm__cu_rv &b);
static ssm_result ssm__cu_tcm_launch(ssm__cu_lr *L, int64_t nchunks, int64_t T, int64_t Lc, int skip_last, ssm__cu_rv A,
                                     ssm__cu_rv b, ssm__cu_rv h, ssm__cu_rv o, ssm__cu_rv init, float *P);
/* The fused recurrence over nchunks chunks: on the tensor cores where ssm__cu_tcm_fits (matrix
   states), else ssm__cu_rec_kernel. o (p NULL: none) takes the states too, in its own type:
   the tensor-core kernel's only, so a caller passes one where ssm__cu_tcm_fits. */
static ssm_result ssm__cu_rec_launch(ssm__cu_lr *L, int64_t nchunks, int64_t T, int64_t Lc, int skip_last,
                                     ssm__cu_rv A, ssm__cu_rv b, ssm__cu_rv h, ssm__cu_rv init, float *P,
                                     ssm__cu_rv o = ssm__cu_rv()) {
    size_t smem = ssm__cu_rec_smem(L->n, L->m, P != NULL);
    cudaError_t e;
    if (nchunks <= 0) return SSM_OK;
    if (ssm__cu_tcm_fits(L, A, b)) {
        SSM__TRY(ssm__cu_tcm_launch(L, nchunks, T, Lc, skip_last, A, b, h, o, init, P));
        L->st->mat_state += L->S * T;
        return SSM_OK;
    }
    if (smem > 48 * 1024) {
        e = ssm__cu_smem_allow((const void *)ssm__cu_rec_kernel, smem, ssm__cu_st(L->ctx)->smem_optin);
        if (e != cudaSuccess)
            return ssm_ctx_error(L->ctx, SSM_ERROR_BACKEND, "CUDA: cudaFuncSetAttribute(%zu bytes smem): %s", smem,
                                 cudaGetErrorString(e));
    }
    for (int64_t s0 = 0; s0 < L->S; s0 += 65535) { /* grid y stops at 65535 sequences a launch */
        dim3 grid((unsigned)nchunks, SSM__CU_GRID_Y(L->S - s0));
        ssm__cu_rec_kernel<<<grid, 256, smem, ssm__cu_st(L->ctx)->stream>>>(s0, (int)L->n, (int)L->m, T, Lc, skip_last,
                                                                             A, b, h, init, P, nchunks);
        SSM__CU_LAUNCHED(L->ctx, "ssm__cu_rec_kernel");
    }
    L->st->mat_state += L->S * T;
    return SSM_OK;
}
static int ssm__cu_rec_fits(const ssm__cu_lr *L, int withP) {
    return ssm__cu_rec_smem(L->n, L->m, withP) <= ssm__cu_st(L->ctx)->smem_optin;
}
/* The sequential (withP 0) and chunked (1) methods run: every launch takes one of the two
   kernels (the chunked carries, A = P in f32: the tensor cores' up to n = 64, else the CUDA
   cores' without P). */
static int ssm__cu_rec_runs(const ssm__cu_lr *L, int withP, ssm_seq_view A, ssm_seq_view b) {
    if (ssm__cu_rec_fits(L, withP)) return 1;
    if (!ssm__cu_tcm_fits(L, ssm__cu_rv_of(A, 0, 0), ssm__cu_rv_of(b, 0, 0))) return 0;
    return !withP || L->n <= SSM__TC_N || ssm__cu_rec_fits(L, 0);
}

/* 1 when the matrix-state kernel's states go out of its stage in vectors of 4: rows contiguous, m % 4 == 0,
   every offset and stride a multiple of 4 from an aligned base */
static int ssm__cu_tcm_v4(const ssm__cu_lr *L, const ssm__cu_rv &v) {
    return v.cs == 1 && !(L->m & 3) && ssm__cu_v4_at(v, v.off | v.ts | v.ss | v.chs, v.rs);
}
/* 1 when the matrix-state kernel over steps from 1 on (one chunk or chunks of any length) writes
   the caller's view out beside h (ssm_backend.linrec_steps' out: its copy from the f32 work
   buffer is skipped): both by its stage */
static int ssm__cu_rec_out(const ssm__cu_lr *L, ssm_seq_view A, ssm_seq_view b, ssm_seq_view h, ssm_seq_view out) {
    return out.ptr && A.dtype.bits == 16 && ssm__cu_tcm_fits(L, ssm__cu_rv_of(A, 1, 0), ssm__cu_rv_of(b, 1, 0)) &&
           ssm__cu_tcm_v4(L, ssm__cu_rv_of(h, 1, 1)) && ssm__cu_tcm_v4(L, ssm__cu_rv_of(out, 1, 1));
}
/* Sequential: steps 1..T-1 (h_0 given) in one fused kernel (and out where ssm__cu_rec_out). */
static ssm_result ssm__cu_lr_sequential(ssm__cu_lr *L, int64_t T, ssm_seq_view A, ssm_seq_view b, ssm_seq_view h,
                                        ssm_seq_view out, int *out_written) {
    ssm__cu_rv init, o = ssm__cu_rv();
    if (T <= 1) return SSM_OK;
    if (!ssm__cu_rec_runs(L, 0, A, b)) return SSM__NOT_MINE;
    init = ssm__cu_rv_of(h, 0, 0);
    if (ssm__cu_rec_out(L, A, b, h, out)) o = ssm__cu_rv_of(out, 1, 0), *out_written = 1;
    return ssm__cu_rec_launch(L, 1, T - 1, T, 0, ssm__cu_rv_of(A, 1, 0), ssm__cu_rv_of(b, 1, 0), ssm__cu_rv_of(h, 1, 0),
                              init, NULL, o);
}

static int ssm__cu_tc_ok(const ssm__cu_lr *L, ssm_seq_view A);
static int ssm__cu_tc_shape(ssm_dtype dt, int64_t n, int64_t m);
static int ssm__cu_cr_fits(const ssm_ctx *ctx, int64_t n, int64_t m);
static size_t ssm__cu_cr_levels_bytes(int64_t S, int64_t T, int64_t n, int esz);
static ssm_result ssm__cu_cr_solve(ssm__cu_lr *L, int64_t T, ssm__cu_rv A, ssm__cu_rv b, ssm__cu_rv h, char *ws);
static ssm_result ssm__cu_bl_solve(ssm__cu_lr *L, int64_t T, ssm__cu_rv A, ssm__cu_rv b, ssm__cu_rv h, char *ws);
static int ssm__cu_spans(const ssm_ctx *ctx, const ssm_linrec_plan *p);
static ssm_result ssm__cu_lr_spans(ssm__cu_lr *L, int64_t T, ssm_seq_view A, ssm_seq_view b, ssm_seq_view h,
                                   ssm_seq_view out, int *out_written, char *ws);
static ssm_result ssm__cu_lr_chunked_tc(ssm__cu_lr *L, int64_t T, ssm_seq_view A, ssm_seq_view b, ssm_seq_view h,
                                        int64_t Lc, ssm_seq_view out, int *out_written, char *ws, int levels,
                                        int phase = 0, int want_end = 0);
/* Chunked, fused: (1) every chunk after the first runs from zero and forms P_c, all chunks in
   parallel, while the first chunk runs from h_0 beside them (a second stream); (2) the carry recurrence over chunk ends
   E_c = P_c E_{c-1} + E_c (one kernel); (3) every chunk re-runs from its true carry. Where
   ssm__cu_rec_out, (1)'s first chunk and (3) write the caller's out too (a forward's (3) out
   alone: ssm.h reads back h_0 and h_{T-1} only, which (3) does not write), and the chunk ends
   are copied there (f16 S128 T1024 n = m = 32: the whole work buffer's copy took 0.40 of the
   forward's 1.21 ms). (2) is one CTA a sequence stepping through the ends, except above n = 64,
   where its f32 P_{u-1} E_{u-1} are that CTA's CUDA-core products one after another (f16 S1
   T8192 n = m = 128: 27.9 of the forward's 31.2 ms under ncu), and for matrix states past 32
   ends: there cyclic reduction over the ends, on the level kernels, in the scratch's second
   half (ssm__cu_chunked_bytes: P twice). */
static size_t ssm__cu_szmul(size_t a, int64_t b);
/* One P of these chunks, f32 [S][nc][n][n], rounded to 256 bytes; saturating (a broadcast view may
   carry sizes whose product overflows). The scratch holds two (ssm__cu_chunked_bytes). */
static size_t ssm__cu_chunk_p_bytes(int64_t S, int64_t nc, int64_t n) {
    const size_t e = ssm__cu_szmul(ssm__cu_szmul(ssm__cu_szmul(ssm__cu_szmul(4, S), nc), n), n);
    return e > SIZE_MAX / 2 - 255 ? SIZE_MAX / 2 : (e + 255) & ~(size_t)255;
}
static ssm_result ssm__cu_lr_chunked(ssm__cu_lr *L, int64_t T, ssm_seq_view A, ssm_seq_view b, ssm_seq_view h,
                                     int64_t C, ssm_seq_view out, int *out_written, char *ws) {
    int64_t nc, nfull, tail;
    ssm_seq_view P, E;
    ssm__cu_rv none;
    int wo = 0;
    if (C >= T) return ssm__cu_lr_sequential(L, T, A, b, h, out, out_written);
    if (!ssm__cu_rec_runs(L, 1, A, b)) return SSM__NOT_MINE;
    memset(&none, 0, sizeof none);
    nc = (T - 1) / C, nfull = (T - C) / C, tail = (T - C) % C;
    P.ptr = ws, P.dtype = SSM_F32, P.off = 0, P.ts = L->n * L->n, P.rs = L->n, P.cs = 1, P.ss = nc * L->n * L->n;
    /* (1) chunk 0 from h_0 (its steps 1..C-1) on the side stream, beside chunks 1..nc from zero with
       products: one CTA a sequence (and state block), a serial chain of C steps that alone took a
       quarter of the forward (f16 S32 T1024 n = m = 64: 329 us of 1.21 ms, ncu) */
    {
        ssm_result r;
        SSM__TRY(ssm__cu_side_begin(L->ctx));
        r = ssm__cu_lr_sequential(L, C, A, b, h, out, &wo);
        const ssm_result e = ssm__cu_side_end(L->ctx);
        if (r == SSM_OK) r = e;
        if (r == SSM_OK)
            r = ssm__cu_rec_launch(L, nc, T - C, C, 0, ssm__cu_rv_of(A, C, C), ssm__cu_rv_of(b, C, C), ssm__cu_rv_of(h, C, C),
                                   none, (float *)P.ptr);
        const ssm_result w = ssm__cu_side_wait(L->ctx); /* (2) reads chunk 0's end */
        SSM__TRY(r);
        SSM__TRY(w);
    }
    L->st->mat_mat += L->S * (T - C - nc);
    /* (2) ends of full chunks: E_u = h[C-1 + u*C], E_u = P_{u-1} E_{u-1} + E_u for u = 1..nfull */
    E = ssm__cu_seq_sub(h, C - 1, C);
    const size_t Pbytes = ssm__cu_chunk_p_bytes(L->S, nc, L->n);
    /* the spans of cyclic reduction and Blelloch (ssm__cu_spans) take their own method over the carries, M or the
       levels in P's second copy (the levels of nfull + 1 <= nc + 1 steps need at most nc n^2 floats) */
    const int bl = L->p->method == SSM_LINREC_BLELLOCH, cr = L->p->method == SSM_LINREC_CR;
    /* chunked's own carries by cyclic reduction above n = 64, and for matrix states past 32 carries, where
       the chain (one f32 n x n x m product a hop on the matrix-state kernel, ~2.5 us) outlasts the levels
       (H200, f16 S4 T8192 n = m = 64, chunk 64: 1.19 ms on the chain, 0.87 as cr's spans) */
    const int chunked_cr = (L->n > SSM__TC_N || (L->m >= 8 && nfull >= 32)) && ssm__cu_cr_fits(L->ctx, L->n, L->m);
    if (nfull > 0 && (bl || cr || (chunked_cr && ssm__cu_cr_levels_bytes(L->S, nfull + 1, L->n, 4) <= Pbytes))) {
        ssm__cu_rv Pa = ssm__cu_rv_of(P, 0, 0), Ev = ssm__cu_rv_of(E, 0, 0);
        Pa.off -= L->n * L->n; /* step u's transition is P_{u-1}; step 0's is never read */
        SSM__TRY(bl ? ssm__cu_bl_solve(L, nfull + 1, Pa, Ev, Ev, ws + Pbytes) : ssm__cu_cr_solve(L, nfull + 1, Pa, Ev, Ev, ws + Pbytes));
    } else if (nfull > 0) {
        ssm__cu_rv Pv = ssm__cu_rv_of(P, 0, 0), Eb = ssm__cu_rv_of(E, 1, 0), Ei = ssm__cu_rv_of(E, 0, 0);
        SSM__TRY(ssm__cu_rec_launch(L, 1, nfull, nfull, 0, Pv, Eb, Eb, Ei, NULL));
    }
    if (tail > 0) {
        SSM__TRY(ssm__cu_mm_launch(L->ctx, L->S, 1, L->n, L->m, L->n, 1.f, 1.f, ssm__cu_op_at(P, nfull),
                                   ssm__cu_op_at(E, nfull), ssm__cu_op_at(h, T - 1)));
        L->st->mat_state += L->S;
    }
    /* (3) chunks 1..nc from their carries, all steps but the last */
    {
        const int fwd = wo && L->p->op == SSM_OP_LINREC_FORWARD;
        SSM__TRY(ssm__cu_rec_launch(L, nc, T - C, C, 1, ssm__cu_rv_of(A, C, C), ssm__cu_rv_of(b, C, C),
                                    ssm__cu_rv_of(fwd ? out : h, C, C), ssm__cu_rv_of(h, C - 1, C), NULL,
                                    wo && !fwd ? ssm__cu_rv_of(out, C, C) : none));
    }
    if (!wo) return SSM_OK;
    /* out's chunk ends 1..nfull and its last step (when a partial chunk ends the sequence) */
    *out_written = 1;
    if (nfull > 0)
        SSM__TRY(ssm__cu_copy(L->ctx, out.dtype, L->S, nfull, L->n, L->m, ssm__cu_mb_at(E, 1),
                              ssm__cu_mb_at(ssm__cu_seq_sub(out, C - 1, C), 1), 0));
    if (tail > 0) SSM__TRY(ssm__cu_copy(L->ctx, out.dtype, L->S, 1, L->n, L->m, ssm__cu_mb_at(h, T - 1), ssm__cu_mb_at(out, T - 1), 0));
    return SSM_OK;
}

/* ---- cyclic reduction, a level per launch pair -----------------------------------------------
   ssm.h's generic cyclic reduction issues ~6 gemm / copy launches per level, through the tiled
   fallback kernel whenever input and state dtypes differ. Here a level is two kernels:
   reduce (block i of every sequence: A'_i = A_{2i+1} A_{2i} into compact f32 scratch and
   b'_i = A_{2i+1} b_{2i} + b_{2i+1} straight into the odd state slot h_{2i+1}; block 0 forms
   h_1 = A_1 h_0 + b_1), the half-length recurrence on the odd slots in place (b' = h), then
   back-substitution (h_{2i} = A_{2i} h_{2i-1} + b_{2i}). Products are f32 FMAs out of shared
   memory, 16 x 16 threads with an R x R block of outputs each (R = 1, 2, 4, 8: n, m <= 16R <= 128;
   the left operand transposed in shared memory so each k is two float4 loads per 16 FMAs). A
   task is a chain of tile loads, a barrier, the product and the stores, so the loads go out
   together (ssm__cu_cr_load, ssm__cu_cr_store). At R = 8 a task holds one CTA an SM (two f32
   128 x 128 tiles); staging them in k-halves for two CTAs an SM (128 registers) measured
   slower (H200, f32 S4 T1024 n128 m128: 5.55 ms against 3.66). At R >= SSM__CR_TC_R the
   products run on the tensor cores instead (ssm__cu_cr_mm_tc: m16n8k8 in 3xTF32, ~f32 accurate;
   plain TF32 with linrec_tc_split = 1; CUDA-core FMAs with linrec_mat = 1), and at R = 8 a task
   is two CTAs of 64 output columns (SSM__CR_H), two an SM: 3.64 -> 2.39 ms at that shape.
   Used on its own for every shape it takes, and for the carries between tensor-core spans. */
#define SSM__CR_MAXN 128
/* row stride (floats) of the shared tiles, of a tile cut in H blocks along its rows: float4
   rows, and 8 banks apart (rows k and k + 4 of an m16n8k8 fragment load meet 32 distinct banks) */
#define SSM__CR_LDH(R, H) (16 * (R) / (H) + 8)
#define SSM__CR_LD(R) SSM__CR_LDH(R, 1)
#define SSM__CR_TC_R 4 /* the smallest R whose products take the tensor cores */
/* Blocks of a task at R = 8 on the tensor cores: its outputs go to two CTAs (grid z), whose tiles
   (104 KB: A whole and X's half, or A's half and X whole) let two CTAs share an SM, so one loads
   while the other multiplies; the FMA layout takes whole tasks. Cyclic reduction cuts the
   columns (SSM__CR_H; the A tile, staged once, serves both products: f32 S4 T1024 n128 m128
   2.41 ms against 3.12 by rows). Hillis-Steele and Blelloch cut the rows where n > 64
   (ssm__cu_cr_h): a block reads and writes only its own rows of M_t and v_t, so Blelloch's
   in-place up-sweep takes them too (Blelloch 4.15 -> 3.19 ms, HS 18.3 -> 17.6 at that shape,
   bench/results/cuda_cr_rowblocks_s51.log). HR x HC blocks (one of them 1) in the helpers below. */
#define SSM__CR_H(R, TC) ((TC) && (R) == 8 ? 2 : 1)
/* CTAs an SM the registers must allow: 8 at R <= 2 (32 registers; uncapped, the loads in flight
   took them to 64-80 and the small tiles lost their occupancy: f32 S64 T1024 n32 m32 1.83 ms vs
   1.35 capped); none above, where a cap spilled (the shared tiles limit those anyway) */
#define SSM__CR_MINB(R) ((R) <= 2 ? 8 : 1)
#define SSM__CR_MINBH(R, H) (SSM__CR_MINB(R) * (H)) /* (H blocks: two CTAs an SM, <= 128 registers) */
/* dst[i*ld + j] = v(i, j), or dst[j*ld + i] when tr (the left operand is kept transposed so a
   thread's R rows are one vector load per k). Up to eight loads in flight a thread before their
   stores (one load, one store at a time left each task a chain of dependent global round trips), four
   elements a load along whichever of v's directions is contiguous, and threads run along the
   tile's contiguous direction in shared memory (conflict-free stores). */
template <int R>
__device__ __forceinline__ void ssm__cu_cr_load(float *dst, int ld, const ssm__cu_rv &v, int64_t base, int rows, int cols,
                                                int tr) {
    /* loads in flight a thread: a tile's share at most (16R x 16R over 256 threads), up to 8 */
    constexpr int DV = R * R / 4 < 1 ? 1 : R * R / 4 > 8 ? 8 : R * R / 4, DS = R * R > 8 ? 8 : R * R;
    /* c: the direction of v's unit stride (else columns), r the other; ds*: their strides in dst */
    const int swap = v.cs != 1 && v.rs == 1, nr = swap ? cols : rows, nc = swap ? rows : cols;
    const int64_t sr = swap ? v.cs : v.rs, sc = swap ? 1 : v.cs;
    const int dsr = (swap ^ tr) ? 1 : ld, dsc = (swap ^ tr) ? ld : 1, cfast = dsc == 1;
    if (sc == 1 && !(nc & 3) && ssm__cu_v4_at(v, base, sr)) {
        const int q = nc / 4, cnt = nr * q;
        for (int e0 = threadIdx.x; e0 < cnt; e0 += 256 * DV) {
            float4 x[DV];
#pragma unroll
            for (int k = 0; k < DV; ++k) {
                const int e = e0 + 256 * k, r = cfast ? e / q : e % nr, c = 4 * (cfast ? e - r * q : e / nr);
                if (e < cnt) x[k] = ssm__cu_ld4(v.p, v.dt, base + r * sr + c);
            }
#pragma unroll
            for (int k = 0; k < DV; ++k) {
                const int e = e0 + 256 * k, r = cfast ? e / q : e % nr, c = 4 * (cfast ? e - r * q : e / nr);
                if (e >= cnt) continue;
                float *d = dst + r * dsr + c * dsc;
                if (cfast) *(float4 *)d = x[k];
                else d[0] = x[k].x, d[dsc] = x[k].y, d[2 * dsc] = x[k].z, d[3 * dsc] = x[k].w;
            }
        }
        return;
    }
    for (int e0 = threadIdx.x; e0 < rows * cols; e0 += 256 * DS) {
        float x[DS];
#pragma unroll
        for (int k = 0; k < DS; ++k) {
            const int e = e0 + 256 * k, i = tr ? e % rows : e / cols, j = tr ? e / rows : e - i * cols;
            if (e < rows * cols) x[k] = ssm__cu_ld(v.p, v.dt, base + i * v.rs + j * v.cs);
        }
#pragma unroll
        for (int k = 0; k < DS; ++k) {
            const int e = e0 + 256 * k, i = tr ? e % rows : e / cols, j = tr ? e / rows : e - i * cols;
            if (e < rows * cols) dst[tr ? j * ld + i : i * ld + j] = x[k];
        }
    }
}
/* acc[a][c] = sum over k < n of A(R ty + a, k) X(k, R tx + c), A transposed in At (rows /
   columns past the operands are junk and never stored). */
template <int R>
__device__ __forceinline__ void ssm__cu_cr_mm(const float *At, const float *Xs, int ld, int n, float acc[R][R]) {
    const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
    const float *ap = At + ty * R, *xp = Xs + tx * R;
#pragma unroll
    for (int a = 0; a < R; ++a)
#pragma unroll
        for (int c = 0; c < R; ++c) acc[a][c] = 0.f;
    for (int k = 0; k < n; ++k) {
        float av[R], xv[R];
        if (R >= 4) {
#pragma unroll
            for (int q = 0; q < R / 4; ++q) {
                const float4 a4 = *(const float4 *)(ap + k * ld + 4 * q), x4 = *(const float4 *)(xp + k * ld + 4 * q);
                av[4 * q] = a4.x, av[4 * q + 1] = a4.y, av[4 * q + 2] = a4.z, av[4 * q + 3] = a4.w;
                xv[4 * q] = x4.x, xv[4 * q + 1] = x4.y, xv[4 * q + 2] = x4.z, xv[4 * q + 3] = x4.w;
            }
        } else {
#pragma unroll
            for (int q = 0; q < R; ++q) av[q] = ap[k * ld + q], xv[q] = xp[k * ld + q];
        }
#pragma unroll
        for (int a = 0; a < R; ++a)
#pragma unroll
            for (int c = 0; c < R; ++c) acc[a][c] = fmaf(av[a], xv[c], acc[a][c]);
    }
}
/* The same product on the tensor cores (R >= 4) for a block of a task (HR row blocks or HC column
   blocks): m16n8k8 TF32, 3xTF32 when split. The 8 warps tile the block's 16R / HR x 16R / HC
   outputs 4 / HR x 2 HR, a warp's 4R x 8R / (HR HC) as R / 4 x R / (HR HC) tiles of 16 x 8 (rows
   past rows, columns past cols skipped); acc[nt][4 mt + z] is element z of tile (mt, nt)'s
   fragment (ssm__cu_cr_store's TC layout). The k-slabs run to n rounded up to 8, so rows n .. of
   both tiles must be zero there (ssm__cu_cr_zpad). */
template <int R, int HR, int HC>
__device__ __forceinline__ void ssm__cu_cr_mm_tc(const float *At, int ld, const float *Xs, int ldx, int rows, int n, int cols,
                                                 int split, float acc[R][R]) {
    constexpr int MT = R / 4, NT = R / (HR * HC);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, q = lane & 3;
    const int i0 = warp / (2 * HR) * 4 * R, j0 = warp % (2 * HR) * 8 * NT;
#pragma unroll
    for (int a = 0; a < NT; ++a)
#pragma unroll
        for (int c = 0; c < R; ++c) acc[a][c] = 0.f;
    if (i0 >= rows || j0 >= cols) return;
    const int mtn = min(MT, (rows - i0 + 15) / 16), ntn = min(NT, (cols - j0 + 7) / 8); /* the tiles inside rows x cols */
    for (int k0 = 0; k0 < n; k0 += 8) {
        unsigned ah[MT][4], al[MT][4], bh[NT][2], bl[NT][2];
        /* A(i, k) at At[k ld + i]: fragment element z at row g + 8 (z & 1), column q + 4 (z >> 1) */
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int z = 0; z < 4; ++z)
                ssm__tc_split32(At[(k0 + q + 4 * (z >> 1)) * ld + i0 + 16 * mt + g + 8 * (z & 1)], &ah[mt][z], &al[mt][z]);
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
            for (int z = 0; z < 2; ++z) ssm__tc_split32(Xs[(k0 + q + 4 * z) * ldx + j0 + 8 * nt + g], &bh[nt][z], &bl[nt][z]);
        /* the three products of 3xTF32 as passes over every tile: no MMA waits on the one before it
           (one tile's three in a row were a chain of dependent MMAs) */
        auto pass = [&](const unsigned (*a)[4], const unsigned (*b)[2]) {
#pragma unroll
            for (int nt = 0; nt < NT; ++nt)
#pragma unroll
                for (int mt = 0; mt < MT; ++mt)
                    if (nt < ntn && mt < mtn) SSM__TC_MMA(SSM__TC_TF32, (&acc[nt][4 * mt]), a[mt], b[nt][0], b[nt][1]);
        };
        if (split) pass(al, bh), pass(ah, bl);
        pass(ah, bh);
    }
}
/* zeroes rows n .. (n rounded up to 8) of both tiles (the tensor-core products' last k-slab) */
template <int R, int HR, int HC> __device__ __forceinline__ void ssm__cu_cr_zpad(float *As, float *Xs, int n) {
    for (int e = threadIdx.x; e < (-n & 7) * SSM__CR_LDH(R, HR); e += 256) As[n * SSM__CR_LDH(R, HR) + e] = 0.f;
    for (int e = threadIdx.x; e < (-n & 7) * SSM__CR_LDH(R, HC); e += 256) Xs[n * SSM__CR_LDH(R, HC) + e] = 0.f;
}
/* acc = A X for the rows x n A at ab in A (staged in As, transposed, when stageA; else As holds
   it already) and the n x cols X at xb in X (staged in Xs); Xs is free again on return. TC: on
   the tensor cores (split: 3xTF32), a block of a task (HR x HC, SSM__CR_H). */
template <int R, int TC, int HR = 1, int HC = 1>
__device__ __forceinline__ void ssm__cu_cr_product(float *As, float *Xs, int stageA, const ssm__cu_rv &A, int64_t ab,
                                                   const ssm__cu_rv &X, int64_t xb, int rows, int n, int cols, int split,
                                                   float acc[R][R]) {
    if (stageA) ssm__cu_cr_load<R>(As, SSM__CR_LDH(R, HR), A, ab, rows, n, 1);
    ssm__cu_cr_load<R>(Xs, SSM__CR_LDH(R, HC), X, xb, n, cols, 0);
    __syncthreads();
    if constexpr (TC) ssm__cu_cr_mm_tc<R, HR, HC>(As, SSM__CR_LDH(R, HR), Xs, SSM__CR_LDH(R, HC), rows, n, cols, split, acc);
    else ssm__cu_cr_mm<R>(As, Xs, SSM__CR_LD(R), n, acc);
    __syncthreads();
}
/* out[base_o + i*rs + j*cs] = acc (+ add[base_a + ...] when add.p), i < n, j < cols. The
   addends are all loaded before the first store (out may be add itself, so a load could not pass
   a store: each element was a global round trip), V columns a load or store where the rows
   allow: four of ssm__cu_cr_mm's R x R block (R >= 4), two of a tensor-core fragment (TC). */
template <int R, int TC, int HR = 1, int HC = 1>
__device__ __forceinline__ void ssm__cu_cr_store(const float acc[R][R], int n, int cols, const ssm__cu_rv &o, int64_t bo,
                                                 const ssm__cu_rv &add, int64_t ba) {
    constexpr int V = TC ? 2 : 4, VEC = TC || R >= 4, NA = TC ? R / (HR * HC) : R; /* acc[a] for a < NA */
    const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, i0 = warp / (2 * HR) * 4 * R + (lane >> 2), j0 = warp % (2 * HR) * 8 * NA + 2 * (lane & 3);
    const int va = VEC && add.p && add.cs == 1 && !(cols & (V - 1)) && ssm__cu_vec_at(add, ba, add.rs, V);
    const int vo = VEC && o.cs == 1 && !(cols & (V - 1)) && ssm__cu_vec_at(o, bo, o.rs, V);
    /* f(a, c, i, j) for this thread's outputs V columns at a time: acc[a][c..], element (i, j..) */
    auto quads = [&](auto &&f) {
#pragma unroll
        for (int a = 0; a < NA; ++a)
#pragma unroll
            for (int c = 0; c < R; c += V) {
                if constexpr (TC) f(a, c, i0 + 16 * (c >> 2) + 8 * ((c >> 1) & 1), j0 + 8 * a);
                else f(a, c, ty * R + a, tx * R + c);
            }
    };
    float v[R][R];
    quads([&](int a, int c, int i, int j) {
        if constexpr (VEC)
            if (va) {
                if constexpr (V == 4) {
                    const float4 x = i < n && j < cols ? ssm__cu_ld4(add.p, add.dt, ba + i * add.rs + j) : make_float4(0.f, 0.f, 0.f, 0.f);
                    v[a][c] = x.x, v[a][c + 1] = x.y, v[a][c + 2] = x.z, v[a][c + 3] = x.w;
                } else {
                    const float2 x = i < n && j < cols ? ssm__cu_ld2(add.p, add.dt, ba + i * add.rs + j) : make_float2(0.f, 0.f);
                    v[a][c] = x.x, v[a][c + 1] = x.y;
                }
                return;
            }
#pragma unroll
        for (int cc = c; cc < c + V && cc < R; ++cc)
            v[a][cc] = add.p && i < n && j + cc - c < cols ? ssm__cu_ld(add.p, add.dt, ba + i * add.rs + (j + cc - c) * add.cs) : 0.f;
    });
    quads([&](int a, int c, int i, int j) {
        if constexpr (VEC)
            if (vo) {
                if (i < n && j < cols) {
                    if constexpr (V == 4)
                        ssm__cu_st4(o.p, o.dt, bo + i * o.rs + j,
                                    make_float4(acc[a][c] + v[a][c], acc[a][c + 1] + v[a][c + 1], acc[a][c + 2] + v[a][c + 2],
                                                acc[a][c + 3] + v[a][c + 3]));
                    else ssm__cu_st2(o.p, o.dt, bo + i * o.rs + j, make_float2(acc[a][c] + v[a][c], acc[a][c + 1] + v[a][c + 1]));
                }
                return;
            }
#pragma unroll
        for (int cc = c; cc < c + V && cc < R; ++cc)
            if (i < n && j + cc - c < cols) ssm__cu_stv(o.p, o.dt, bo + i * o.rs + (j + cc - c) * o.cs, acc[a][cc] + v[a][cc]);
    });
}

/* The level kernels: TC, products on the tensor cores (split: 3xTF32); the task's columns c0 ..
   c0 + 16R / H - 1 of each product (grid z: the column block, SSM__CR_H) */
template <int R, int TC>
__global__ void __launch_bounds__(256, SSM__CR_MINBH(R, SSM__CR_H(R, TC))) ssm__cu_cr_reduce_kernel(int64_t s0, int n, int m, ssm__cu_rv A,
                                                                                     ssm__cu_rv b, ssm__cu_rv h, ssm__cu_rv A2, int split) {
    constexpr int H = SSM__CR_H(R, TC), CW = 16 * R / H;
    extern __shared__ __align__(16) float ssm__cr_sm[];
    float *As = ssm__cr_sm, *Xs = ssm__cr_sm + 16 * R * SSM__CR_LD(R);
    const int64_t i = blockIdx.x, s = s0 + blockIdx.y, ko = 2 * i + 1, ab = A.off + s * A.ss + ko * A.ts;
    const int c0 = (int)blockIdx.z * CW, nw = min(n - c0, CW), mw = min(m - c0, CW); /* this block's columns of each product */
    int staged = 0;
    float acc[R][R];
    if (TC) ssm__cu_cr_zpad<R, 1, H>(As, Xs, n);
    if (i > 0) {
        if (nw > 0) {
            ssm__cu_cr_product<R, TC, 1, H>(As, Xs, 1, A, ab, A, ab - A.ts + c0 * A.cs, n, n, nw, split, acc);
            ssm__cu_rv none;
            none.p = NULL;
            ssm__cu_cr_store<R, TC, 1, H>(acc, n, nw, A2, A2.off + s * A2.ss + i * A2.ts + c0 * A2.cs, none, 0);
            staged = 1;
        }
        if (mw > 0) /* an even slot: read-only here */
            ssm__cu_cr_product<R, TC, 1, H>(As, Xs, !staged, A, ab, b, b.off + s * b.ss + (ko - 1) * b.ts + c0 * b.cs, n, n, mw, split,
                                            acc);
    } else if (mw > 0)
        ssm__cu_cr_product<R, TC, 1, H>(As, Xs, 1, A, ab, h, h.off + s * h.ss + c0 * h.cs, n, n, mw, split, acc);
    /* each element of b_ko is read by the thread that then writes h_ko: safe when b = h */
    if (mw > 0)
        ssm__cu_cr_store<R, TC, 1, H>(acc, n, mw, h, h.off + s * h.ss + ko * h.ts + c0 * h.cs, b, b.off + s * b.ss + ko * b.ts + c0 * b.cs);
}

template <int R, int TC>
__global__ void __launch_bounds__(256, SSM__CR_MINBH(R, SSM__CR_H(R, TC))) ssm__cu_cr_back_kernel(int64_t s0, int n, int m, ssm__cu_rv A,
                                                                                   ssm__cu_rv b, ssm__cu_rv h, int split) {
    constexpr int H = SSM__CR_H(R, TC), CW = 16 * R / H;
    extern __shared__ __align__(16) float ssm__cr_sm[];
    float *As = ssm__cr_sm, *Xs = ssm__cr_sm + 16 * R * SSM__CR_LD(R);
    const int64_t ke = 2 * ((int64_t)blockIdx.x + 1), s = s0 + blockIdx.y;
    const int c0 = (int)blockIdx.z * CW, mw = min(m - c0, CW);
    float acc[R][R];
    if (mw <= 0) return;
    if (TC) ssm__cu_cr_zpad<R, 1, H>(As, Xs, n);
    ssm__cu_cr_product<R, TC, 1, H>(As, Xs, 1, A, A.off + s * A.ss + ke * A.ts, h, h.off + s * h.ss + (ke - 1) * h.ts + c0 * h.cs, n, n,
                                    mw, split, acc);
    ssm__cu_cr_store<R, TC, 1, H>(acc, n, mw, h, h.off + s * h.ss + ke * h.ts + c0 * h.cs, b, b.off + s * b.ss + ke * b.ts + c0 * b.cs);
}
/* 1 when the level kernels' products at tile factor R take the tensor cores; *split: in 3xTF32 */
static int ssm__cu_cr_on_tc(const ssm_ctx *ctx, int R, int *split) {
    const ssm__cu_state *cs = ssm__cu_st(ctx);
    *split = cs->knobs.linrec_tc_split != 1;
    return R >= SSM__CR_TC_R && cs->knobs.linrec_mat != 1;
}
/* HS / Blelloch's row blocks of a task: two at R = 8 on the tensor cores where n > 64 */
static int ssm__cu_cr_h(int R, int tc, int64_t n) { return SSM__CR_H(R, tc) == 2 && n > 64 ? 2 : 1; }

static int ssm__cu_cr_r(int64_t n, int64_t m) {
    const int64_t w = n > m ? n : m;
    return w <= 16 ? 1 : w <= 32 ? 2 : w <= 64 ? 4 : 8;
}
/* the level kernels' tiles: A cut in HR row blocks, X in HC column blocks */
static size_t ssm__cu_cr_smem(int R, int HR = 1, int HC = 1) { return (size_t)16 * R * (SSM__CR_LDH(R, HR) + SSM__CR_LDH(R, HC)) * 4; }
/* The level kernels fit n, m <= 128 and T - 1 within a grid's x (2^31 - 1 blocks). By shape
   they take n <= 64, matrix states (m > 64), and the tensor-core shapes (whose spans reduce to
   carries on the level kernels); other n > 64 with narrow states ran faster on ssm.h's generic
   levels (H200, bench/results/cuda_cr_float4_30eb660.log: S8 T1024 n128 m1 f16 5.48 ms
   generic vs 6.40; f32 S1 T4096 n128 1.80 vs 3.37); 16-bit wide states (m > 8) take the levels on
   tensor cores (ssm__cu_cr_tc) where they fit. linrec_cr = 2 forces the f32 level kernels
   wherever they fit, 3 the levels by shape (no spans), 1 never. */
static int ssm__cu_cr_tc_takes(const ssm_ctx *ctx, const ssm_linrec_plan *p);
/* 1 when the level kernels' tiles for n x n transitions on m-column states fit */
static int ssm__cu_cr_fits(const ssm_ctx *ctx, int64_t n, int64_t m) {
    return n <= SSM__CR_MAXN && m <= SSM__CR_MAXN && ssm__cu_cr_smem(ssm__cu_cr_r(n, m)) <= ssm__cu_st(ctx)->smem_optin;
}
static int ssm__cu_cr_takes(const ssm_ctx *ctx, const ssm_linrec_plan *p) {
    const int knob = ssm__cu_st(ctx)->knobs.linrec_cr;
    if (knob == 1 || !ssm__cu_cr_fits(ctx, p->n, p->m) || p->T - 1 > 2 * (int64_t)2147483647) return 0;
    return knob == 2 || p->n <= 64 || p->m > 64 || ssm__cu_tc_shape(p->dtype, p->n, p->m) || ssm__cu_cr_tc_takes(ctx, p);
}
static size_t ssm__cu_szmul(size_t a, int64_t b);
/* Scratch of the levels for a T-step recurrence of n x n transitions, elements of esz bytes (the
   f32 level kernels: 4; the tensor-core levels of wide states keep M in the input type: 2): sum
   of (T_l/2 - 1) n^2, each level 256-byte aligned. */
static size_t ssm__cu_cr_levels_bytes(int64_t S, int64_t T, int64_t n, int esz) {
    size_t e = 0;
    for (; T >= 2; T /= 2) {
        size_t l = ssm__cu_szmul(ssm__cu_szmul(ssm__cu_szmul((size_t)esz, S), T / 2 - 1), n * n);
        l = l > SIZE_MAX - 255 ? SIZE_MAX : (l + 255) & ~(size_t)255;
        e = e > SIZE_MAX - l ? SIZE_MAX : e + l;
    }
    return e;
}

template <int R, int TC>
static ssm_result ssm__cu_cr_level(ssm__cu_lr *L, int64_t T, ssm__cu_rv A, ssm__cu_rv b, ssm__cu_rv h, int split, char *ws) {
    const int64_t half = T / 2, nb = (T - 1) / 2, n = L->n;
    const size_t smem = ssm__cu_cr_smem(R, 1, SSM__CR_H(R, TC));
    cudaStream_t st = ssm__cu_st(L->ctx)->stream;
    ssm__cu_rv A2, ho;
    if (T < 2) return SSM_OK;
    A2.p = ws, A2.dt = 0, A2.off = -n * n, A2.ts = n * n, A2.rs = n, A2.cs = 1, A2.ss = (half - 1) * n * n, A2.chs = 0;
    ws += ssm__cu_cr_levels_bytes(L->S, T, n, 4) - ssm__cu_cr_levels_bytes(L->S, half, n, 4);
    for (int64_t s0 = 0; s0 < L->S; s0 += 65535) {
        dim3 grid((unsigned)half, SSM__CU_GRID_Y(L->S - s0), SSM__CR_H(R, TC));
        ssm__cu_cr_reduce_kernel<R, TC><<<grid, 256, smem, st>>>(s0, (int)n, (int)L->m, A, b, h, A2, split);
        SSM__CU_LAUNCHED(L->ctx, "ssm__cu_cr_reduce_kernel");
    }
    L->st->mat_mat += L->S * (half - 1);
    L->st->mat_state += L->S * (half + nb);
    ho = h, ho.off += h.ts, ho.ts *= 2;
    SSM__TRY((ssm__cu_cr_level<R, TC>(L, half, A2, ho, ho, split, ws)));
    if (nb <= 0) return SSM_OK;
    for (int64_t s0 = 0; s0 < L->S; s0 += 65535) {
        dim3 grid((unsigned)nb, SSM__CU_GRID_Y(L->S - s0), SSM__CR_H(R, TC));
        ssm__cu_cr_back_kernel<R, TC><<<grid, 256, smem, st>>>(s0, (int)n, (int)L->m, A, b, h, split);
        SSM__CU_LAUNCHED(L->ctx, "ssm__cu_cr_back_kernel");
    }
    return SSM_OK;
}
template <int R, int TC>
static ssm_result ssm__cu_cr_go(ssm__cu_lr *L, int64_t T, ssm__cu_rv A, ssm__cu_rv b, ssm__cu_rv h, int split, char *ws) {
    const size_t smem = ssm__cu_cr_smem(R, 1, SSM__CR_H(R, TC));
    if (smem > 48 * 1024) {
        cudaError_t e = cudaFuncSetAttribute(ssm__cu_cr_reduce_kernel<R, TC>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (e == cudaSuccess)
            e = cudaFuncSetAttribute(ssm__cu_cr_back_kernel<R, TC>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (e != cudaSuccess)
            return ssm_ctx_error(L->ctx, SSM_ERROR_BACKEND, "CUDA: cudaFuncSetAttribute(%zu bytes smem): %s", smem,
                                 cudaGetErrorString(e));
        if (SSM__CR_H(R, TC) > 1) { /* a hint: the whole carveout as shared memory, so two CTAs fit an SM */
            (void)cudaFuncSetAttribute(ssm__cu_cr_reduce_kernel<R, TC>, cudaFuncAttributePreferredSharedMemoryCarveout,
                                       cudaSharedmemCarveoutMaxShared);
            (void)cudaFuncSetAttribute(ssm__cu_cr_back_kernel<R, TC>, cudaFuncAttributePreferredSharedMemoryCarveout,
                                       cudaSharedmemCarveoutMaxShared);
        }
    }
    return ssm__cu_cr_level<R, TC>(L, T, A, b, h, split, ws);
}
/* Steps 1..T-1 of h_t = A_t h_{t-1} + b_t (h_0 in h; b may be h itself) by cyclic reduction. */
static ssm_result ssm__cu_cr_solve(ssm__cu_lr *L, int64_t T, ssm__cu_rv A, ssm__cu_rv b, ssm__cu_rv h, char *ws) {
    const int R = ssm__cu_cr_r(L->n, L->m);
    int split, tc = ssm__cu_cr_on_tc(L->ctx, R, &split);
    switch (R) {
    case 1: return ssm__cu_cr_go<1, 0>(L, T, A, b, h, split, ws);
    case 2: return ssm__cu_cr_go<2, 0>(L, T, A, b, h, split, ws);
    case 4: return tc ? ssm__cu_cr_go<4, 1>(L, T, A, b, h, split, ws) : ssm__cu_cr_go<4, 0>(L, T, A, b, h, split, ws);
    default: return tc ? ssm__cu_cr_go<8, 1>(L, T, A, b, h, split, ws) : ssm__cu_cr_go<8, 0>(L, T, A, b, h, split, ws);
    }
}

/* ---- chunked recurrence on tensor cores (f16 / bf16 / f32, n = 16..128; m = 1) ----------------
   Three passes over chunks of L steps of the steps 1..T-1 (h_0 is given):
   (1) one CTA per chunk (all but the last, unless a span's end is wanted: ssm__cu_tc_go)
       streams its A_u through a cp.async ring in shared
       memory and forms the chunk product P_c = A_last ... A_first with mma.sync m16n8k16 or,
       on Hopper, wgmma m64n64k16 (f32 accumulation; for bf16 the running product is split into
       hi + lo halves of the input type, so the product keeps ~f32 accuracy although the tensor
       cores take 16-bit operands; f32 A on m16n8k8 TF32 with both operands split, 3xTF32), and
       the chunk's end state from zero, e_c;
   (2) one CTA per sequence runs the carry recurrence X_c = P_c X_{c-1} + e_c (X_{-1} = h_0), a
       chain of T/L mat-vecs with the P_c prefetched in registers;
   (3) one CTA per chunk re-runs the chunk from its carry, streaming A again (mat-vecs).
   A is read twice, so this is ~2x the HBM floor at best (docs/DESIGN.md). A is row-major
   (cs == 1) or transposed (rs == 1, the adjoint's view) with 16-byte aligned rows. The passes
   work on W x W tiles, W = 32 for n <= 32, 64 up to n = 64 and 128 above (the kernels take W
   as a template argument; the smaller the tile, the more CTAs an SM holds). For n < W every
   pass works on tiles that are zero past n (only the chunks inside n copied), e and the
   states' rows past n stay zero, only rows < n are stored, and the products skip the zero
   blocks (ssm__tc_prod_step). */
/* The tile geometry at width W. W = 128 holds 4x the bytes a tile, so its rings are shallower
   and its kernels run one CTA an SM (shared memory); pass 1 then keeps one 16-row block of the
   running product per warp (two at W = 64: the registers of 128 accumulators a block). */
template <int F32> struct ssm__tc_elem { typedef unsigned short type; };
template <> struct ssm__tc_elem<1> { typedef float type; };
template <int W, int DT = 0> struct ssm__tcg { /* DT: 0 f16, 1 bf16, 2 f32 */
    static constexpr int F32 = DT == 2;
    typedef typename ssm__tc_elem<F32>::type E; /* a tile's element */
    static constexpr int LD = W + 8;            /* 16-bit padded row (halfs): an odd count of 16-byte chunks, conflict-free ldmatrix */
    static constexpr int TILE = W * LD;
    /* the padded row (elements) of pass 1's (P1) or pass 3's tile in layout TR. f32, each free of
       bank conflicts for its reads: pass 1's float2 B fragments (rows 8 banks apart; TR: rows
       2t, 2t + 1 of a column, 4 apart), pass 3's float4 row pieces (rows 16 apart; TR: 8). */
    template <int P1, int TR> __host__ __device__ static constexpr int ld() { return F32 ? W + (P1 ? (TR ? 4 : 8) : (TR ? 8 : 16)) : LD; }
    /* pass 3's cp.async ring: 5 (3) tiles in flight a CTA, loaded HBM latency. W = 64 16-bit: 4, so
       four CTAs fit an SM (53.8 KB each at 64 steps a chunk; six tiles made 72 KB, three an SM):
       the grid rows' 512 chunks then run in one wave, not 1.3. H200, auto forward, A/B in one call
       (bench/results/cuda_ring4_a7eeb1a.log): f16 n64 S32 T1024 0.208 -> 0.191-0.195 ms, S8 T4096
       0.225 -> 0.209-0.214, S4 T8192 0.249 -> 0.233-0.235; bf16 5-7% alike; S16 T4096 (1024
       chunks) 0.362-0.364 against 0.360-0.375 */
    static constexpr int NST = F32 && W == 128 ? 2 : F32 || W >= 64 ? 4 : 6;
    static constexpr int T3 = 4 * W;            /* pass 3 and pass 2: four threads a row */
    static constexpr int PNST = F32 && W == 128 ? 2 : 4; /* pass 1's ring (f32 at W = 128: two 68 KB tiles, beside b of the chunk) */
    static constexpr int MB = W == 64 && !F32 ? 2 : 1; /* pass 1: 16-row blocks of the product a warp (f32: the split fragments' registers) */
    static constexpr int PW = W / (16 * MB);    /* pass 1: product warps (then one end-state warp) */
    static constexpr int PT = 32 * (PW + 1);
    static constexpr int CD = W == 128 ? 2 : 8; /* pass 2: carries prefetched in registers (4 W threads, <= 128 registers at W = 128) */
};
static int ssm__cu_tc_w(int64_t n) { return n <= SSM__TC_NS ? SSM__TC_NS : n <= SSM__TC_N ? SSM__TC_N : SSM__TC_NMAX; }
/* The shapes the path takes (the plan's choice of method and workspace, before the views'
   strides are known). */
static int ssm__cu_tc_shape(ssm_dtype dt, int64_t n, int64_t m) {
    return (dt.bits == 16 || dt.bits == 32) && m == 1 && n >= SSM__TC_NMIN && n <= SSM__TC_NMAX;
}

/* The level products of cyclic reduction and the Hillis-Steele scan: one warp's rows of A (its
   fragments af, NP / 16 k-steps) times a 16-column block of B in shared memory (bl = this
   lane's ldmatrix base, ld its row stride, col the block's first column). ssm__tc_rows16
   leaves columns col..col+7 in c0 and col+8..col+15 in c1; ssm__tc_rows8 adds the two 8-column
   halves into c (a state is staged as its 16-bit hi and lo parts, 8 columns each, side by side). */
template <int BF, int NP>
__device__ __forceinline__ void ssm__tc_rows16(float c0[4], float c1[4], const unsigned (*af)[4], const unsigned short *bl,
                                               int ld, int col) {
#pragma unroll
    for (int kk = 0; kk < NP / 16; ++kk) {
        unsigned b[4];
        ssm__tc_ldm4t(b, bl + 16 * kk * ld + col);
        ssm__tc_mma16<BF>(c0, c1, af[kk], b, kk == 0);
    }
}
template <int BF, int NP>
__device__ __forceinline__ void ssm__tc_rows8(float c[4], const unsigned (*af)[4], const unsigned short *bl, int ld, int col, int lo = 1) {
    unsigned b[4];
    ssm__tc_ldm4t(b, bl + col);
    ssm__tc_mma0<BF>(c, af[0], b[0], b[1]);
    if (lo) ssm__tc_mma<BF>(c, af[0], b[2], b[3]);
#pragma unroll
    for (int kk = 1; kk < NP / 16; ++kk) {
        ssm__tc_ldm4t(b, bl + 16 * kk * ld + col);
        ssm__tc_mma<BF>(c, af[kk], b[0], b[1]);
        if (lo) ssm__tc_mma<BF>(c, af[kk], b[2], b[3]);
    }
}
/* two floats -> packed 16-bit pair (hi) and the rounding residual pair (lo) */
template <int BF> __device__ __forceinline__ void ssm__tc_split(float x, float y, unsigned *hi, unsigned *lo) {
    if (BF) {
        __nv_bfloat162 h = __floats2bfloat162_rn(x, y);
        float2 f = __bfloat1622float2(h);
        __nv_bfloat162 l = __floats2bfloat162_rn(x - f.x, y - f.y);
        *hi = *(unsigned *)&h, *lo = *(unsigned *)&l;
    } else {
        __half2 h = __floats2half2_rn(x, y);
        float2 f = __half22float2(h);
        __half2 l = __floats2half2_rn(x - f.x, y - f.y);
        *hi = *(unsigned *)&h, *lo = *(unsigned *)&l;
    }
}
template <int BF> __device__ __forceinline__ unsigned ssm__tc_pack(float x, float y) {
    if (BF) { __nv_bfloat162 h = __floats2bfloat162_rn(x, y); return *(unsigned *)&h; }
    __half2 h = __floats2half2_rn(x, y);
    return *(unsigned *)&h;
}
template <int BF> __device__ __forceinline__ float2 ssm__tc_f2(unsigned v) {
    if (BF) return __bfloat1622float2(*(__nv_bfloat162 *)&v);
    return __half22float2(*(__half2 *)&v);
}
/* p0 / p1 += the even / odd products of eight 16-bit values (16 bytes) and eight floats */
template <int BF>
__device__ __forceinline__ void ssm__tc_dot8(const uint4 &v, const float4 &x0, const float4 &x1, float &p0, float &p1) {
    float2 f;
    f = ssm__tc_f2<BF>(v.x); p0 += f.x * x0.x; p1 += f.y * x0.y;
    f = ssm__tc_f2<BF>(v.y); p0 += f.x * x0.z; p1 += f.y * x0.w;
    f = ssm__tc_f2<BF>(v.z); p0 += f.x * x1.x; p1 += f.y * x1.y;
    f = ssm__tc_f2<BF>(v.w); p0 += f.x * x1.z; p1 += f.y * x1.w;
}

/* elements i0 and i1 of a tile as floats (f32 or 16-bit of type BF) */
template <int BF> __device__ __forceinline__ float2 ssm__tc_ld2(const float *t, int i0, int i1) { return make_float2(t[i0], t[i1]); }
template <int BF> __device__ __forceinline__ float2 ssm__tc_ld2(const unsigned short *t, int i0, int i1) {
    return ssm__tc_f2<BF>((unsigned)t[i0] | ((unsigned)t[i1] << 16));
}

/* A W x W 16-bit tile in shared memory: SW = 0 padded rows (ssm__tcg<W>::LD halfs, conflict-free
   ldmatrix), SW = 1 (W = 64 only) unpadded 128-byte rows in the 128-byte swizzle (16-byte chunk c
   of row r at chunk c ^ (r & 7)), the layout wgmma reads by descriptor. The offset of element
   (row, col): */
template <int SW, int W = SSM__TC_N> __device__ __forceinline__ int ssm__tc_at(int row, int col) {
    return SW ? row * SSM__TC_N + ((((col >> 3) ^ row) & 7) << 3) + (col & 7) : row * ssm__tcg<W>::LD + col;
}
/* One n x n tile of A (rows aos apart; 16-bit or f32 elements E, LD a padded row) into shared
   memory, 16 bytes per cp.async, NT threads.
   PAD (n < W): only the 16-byte chunks inside n x n are copied; the rest of the W x W tile
   stays as ssm__tc_zero_ring left it. PAD is a template argument, the kernels instantiated
   twice: masked copies, even behind a uniform branch, cost the issue-bound n = 64 kernels 3-7%
   (bench/results/cuda_linrec_narrow_e626e6f.log). PAD = 2, ragged (n % 8 != 0: rows of any
   length, 16-byte chunks would cross n and rows): 4 bytes per cp.async where the rows allow it
   (f32, or 16-bit pairs on 4-byte aligned rows), else element by element through registers
   (16-bit rows at odd offsets, odd n). */
template <int W, int NT, int SW, int PAD, int LD = ssm__tcg<W>::LD, class E = unsigned short>
__device__ __forceinline__ void ssm__tc_load_tile(E *dst, const E *src, int64_t aos, int n, int tid) {
    constexpr unsigned EC = 16 / sizeof(E), CPR = W / EC, CH = W * CPR; /* elements a 16-byte chunk; chunks a row, a tile */
    if constexpr (PAD == 2) {
        constexpr unsigned E4 = 4 / sizeof(E), PR = W / E4; /* elements a 4-byte piece; pieces a row */
        if (!(((uintptr_t)src | (uintptr_t)(aos * (int64_t)sizeof(E))) & 3) && !(n & (E4 - 1))) {
            for (unsigned id = (unsigned)tid; id < W * PR; id += NT) {
                const int r = (int)(id / PR), c = (int)(id % PR) * E4; /* a pair never crosses n (n even) */
                if (r < n && c < n) ssm__tc_cp4(dst + r * LD + c, src + r * aos + c);
            }
        } else
            for (unsigned id = (unsigned)tid; id < W * W; id += NT) {
                const int r = (int)(id / W), c = (int)(id % W);
                if (r < n && c < n) dst[r * LD + c] = src[r * aos + c];
            }
    } else {
#pragma unroll
        for (unsigned k = 0; k < (CH + NT - 1) / NT; ++k) { /* unsigned: / and % by CPR are a shift and a mask */
            const unsigned id = (unsigned)tid + NT * k;
            const int r = (int)(id / CPR), c8 = (int)(id % CPR) * EC;
            if (CH % NT != 0 && id >= CH) continue;
            if (!PAD || (r < n && c8 < n)) ssm__tc_cp16(dst + (SW ? ssm__tc_at<1>(r, c8) : r * LD + c8), src + r * aos + c8);
        }
    }
}
/* PAD: the ring zeroed once before its first copies (which then never write past n), and a
   barrier so that no zero store lands after a copy. */
template <int PAD>
__device__ __forceinline__ void ssm__tc_zero_ring(unsigned short *ring, int halfs, int tid, int nt) {
    if constexpr (PAD) {
        for (int i = 8 * tid; i < halfs; i += 8 * nt) *(uint4 *)(ring + i) = make_uint4(0, 0, 0, 0);
        __syncthreads();
    }
}

/* bs[e] = b(u = e / W, row = e % W) for e < count (zero for rows past n), nt threads: 8
   independent loads in flight per thread (a dependent load-convert-store loop would pay one
   memory latency per element). */
template <int W>
__device__ __forceinline__ void ssm__tc_stage_b(float *bs, int count, ssm__cu_rv b, int64_t bbase, int n, int tid, int nt) {
    for (int e0 = tid; e0 < count; e0 += 8 * nt) {
        float v[8];
#pragma unroll
        for (int k = 0; k < 8; ++k) {
            const unsigned e = (unsigned)(e0 + k * nt), u = e / W, r = e % W;
            v[k] = (int)e < count && (int)r < n ? ssm__cu_ld(b.p, b.dt, bbase + u * b.ts + r * b.rs) : 0.f;
        }
#pragma unroll
        for (int k = 0; k < 8; ++k)
            if (e0 + k * nt < count) bs[e0 + k * nt] = v[k];
    }
}

/* Pass 3: chunk c from its carry X_c, writing h (and the caller's view o when set). TR: A is
   stored transposed (rs == 1, rows of storage along A's columns). BF: 0 f16, 1 bf16, 2 f32.
   4 W threads, four a row. */
template <int W, int TR, int BF, int PAD>
__global__ void __launch_bounds__(ssm__tcg<W, BF>::T3) ssm__cu_tc_kernel(int64_t s0, int64_t T1, int Lc, int n, ssm__cu_rv A,
                                                                    int64_t aos, ssm__cu_rv b, ssm__cu_rv h, const float *X,
                                                                    int64_t nc, ssm__cu_rv o) {
    extern __shared__ __align__(16) unsigned char ssm__tc_sm[];
    typedef ssm__tcg<W, BF> G;
    typedef typename G::E E;
    constexpr int LD = G::template ld<0, TR>(), TILE = W * LD;
    E *As = (E *)ssm__tc_sm;                    /* NST tiles */
    float *hs = (float *)(As + G::NST * TILE);  /* 2 x W */
    float *bs = hs + 2 * W;                      /* Lc x W: b of the chunk */
    const int tid = threadIdx.x;
    const int64_t c = blockIdx.x;
    int64_t len64 = T1 - c * (int64_t)Lc;
    const int len = (int)(len64 < Lc ? len64 : Lc);
    const E *Ag = (const E *)A.p;
    const int row = tid >> 2, q = tid & 3;
    const int64_t s = s0 + blockIdx.y;
    if (len <= 0) return;
    {
        const int64_t abase = A.off + s * A.ss + c * A.chs;
        const int64_t bbase = b.off + s * b.ss + c * b.chs, hbase = h.off + s * h.ss + c * h.chs;
        ssm__tc_zero_ring<PAD>((unsigned short *)As, G::NST * TILE * (int)sizeof(E) / 2, tid, G::T3);
        /* prologue: the first NST-1 tiles in flight */
#pragma unroll
        for (int u = 0; u < G::NST - 1; ++u) {
            if (u < len) ssm__tc_load_tile<W, G::T3, 0, PAD, LD>(As + u * TILE, Ag + abase + u * A.ts, aos, n, tid);
            ssm__tc_commit();
        }
        if (tid < W) hs[tid] = tid < n ? X[(s * nc + c) * W + tid] : 0.f; /* the level carries leave rows past n unset */
        ssm__tc_stage_b<W>(bs, len * W, b, bbase, n, tid, G::T3);
        for (int u = 0; u < len; ++u) {
            ssm__tc_wait<G::NST - 2>();
            __syncthreads();
            {
                int un = u + G::NST - 1;
                if (un < len) ssm__tc_load_tile<W, G::T3, 0, PAD, LD>(As + (un % G::NST) * TILE, Ag + abase + un * A.ts, aos, n, tid);
                ssm__tc_commit();
            }
            const E *At = As + (u % G::NST) * TILE;
            const float *hc = hs + (u & 1) * W;
            float *hn = hs + ((u + 1) & 1) * W;
            const float bcur = bs[u * W + row];
            /* mat-vec: thread (row, q) sums a quarter of row `row` of A_u (PAD: rows past n are
               zero, whole warps of them for n % 8 == 0) */
            float p0 = 0.f, p1 = 0.f;
            if (PAD && row >= n) {
            } else if (TR) { /* column `row` of the tile, k = q mod 4 */
#pragma unroll
                for (int j = 0; j < W / 4; j += 2) {
                    const int k0 = 4 * j + q, k1 = 4 * (j + 1) + q;
                    if (PAD && 4 * j >= n) break; /* k >= n: zeros */
                    const float2 f = ssm__tc_ld2<BF>(At, k0 * LD + row, k1 * LD + row);
                    p0 += f.x * hc[k0];
                    p1 += f.y * hc[k1];
                }
            } else if constexpr (BF == 2) { /* the 16-byte pieces j = q mod 4 of the row (conflict-free at LD = W + 16) */
#pragma unroll
                for (int j = 0; j < W / 16; j += 2) {
                    const float4 a0 = *(const float4 *)(At + row * LD + 16 * j + 4 * q);
                    const float4 a1 = *(const float4 *)(At + row * LD + 16 * j + 16 + 4 * q);
                    const float4 x0 = *(const float4 *)(hc + 16 * j + 4 * q), x1 = *(const float4 *)(hc + 16 * j + 16 + 4 * q);
                    p0 += a0.x * x0.x + a0.y * x0.y + a0.z * x0.z + a0.w * x0.w;
                    p1 += a1.x * x1.x + a1.y * x1.y + a1.z * x1.z + a1.w * x1.w;
                }
            } else {
                const uint4 *ap = (const uint4 *)(At + row * LD + q * (W / 4));
                const float4 *hp = (const float4 *)(hc + q * (W / 4));
#pragma unroll
                for (int j = 0; j < W / 32; ++j) /* 8 columns an iteration */
                    ssm__tc_dot8<BF>(ap[j], hp[2 * j], hp[2 * j + 1], p0, p1);
            }
            float v = p0 + p1;
            v += __shfl_xor_sync(0xffffffffu, v, 1);
            v += __shfl_xor_sync(0xffffffffu, v, 2);
            v += bcur;
            if (q == 0) {
                hn[row] = v; /* rows past n: 0 */
                if (!PAD || row < n) {
                    ssm__cu_stv(h.p, h.dt, hbase + u * h.ts + row * h.rs, v);
                    if (o.p) ssm__cu_stv(o.p, o.dt, o.off + s * o.ss + c * o.chs + u * o.ts + row * o.rs, v);
                }
            }
        }
    }
}

/* Pass 1: the chunk product and end state. The running product is kept transposed, Q = P^T, and
   Q <- Q A_u^T, so that Q is the MMA's A operand and stays in registers (the f32 accumulator
   fragment of one step is the 16-bit A fragment of the next) while A_u^T is the B operand read
   from a cp.async ring of tiles; beside it the chunk's end state from zero, e <- A_u e + b_u.
   Two kernels: ssm__cu_tc_prod_kernel on mma.sync (sm_80 up) and, on Hopper,
   ssm__cu_tc_prodw_kernel on wgmma (W = 64). The helpers below are shared by both; a 16-row
   block of Q is float[W / 8][4], the m16n8 accumulator fragments of its 8-column tiles. */
template <int W> __device__ __forceinline__ void ssm__tc_eye(float (*q)[4], int row0, int lane) {
    const int lr = lane >> 2, lc = 2 * (lane & 3);
#pragma unroll
    for (int t = 0; t < W / 8; ++t)
#pragma unroll
        for (int z = 0; z < 4; ++z) q[t][z] = row0 + lr + (z >> 1) * 8 == 8 * t + lc + (z & 1) ? 1.f : 0.f;
}
/* accumulators -> 16-bit A fragments af (k-slab kk = columns 16kk..16kk+15), and with SPLIT the
   rounding residual al (the hi/lo split of the running product, for bf16) */
template <int BF, int SPLIT, int KS> /* the first KS k-slabs */
__device__ __forceinline__ void ssm__tc_frag(unsigned (*af)[4], unsigned (*al)[4], const float (*q)[4]) {
#pragma unroll
    for (int kk = 0; kk < KS; ++kk) {
        if (!SPLIT) {
            af[kk][0] = ssm__tc_pack<BF>(q[2 * kk][0], q[2 * kk][1]);
            af[kk][1] = ssm__tc_pack<BF>(q[2 * kk][2], q[2 * kk][3]);
            af[kk][2] = ssm__tc_pack<BF>(q[2 * kk + 1][0], q[2 * kk + 1][1]);
            af[kk][3] = ssm__tc_pack<BF>(q[2 * kk + 1][2], q[2 * kk + 1][3]);
            continue;
        }
        ssm__tc_split<BF>(q[2 * kk][0], q[2 * kk][1], &af[kk][0], &al[kk][0]);
        ssm__tc_split<BF>(q[2 * kk][2], q[2 * kk][3], &af[kk][1], &al[kk][1]);
        ssm__tc_split<BF>(q[2 * kk + 1][0], q[2 * kk + 1][1], &af[kk][2], &al[kk][2]);
        ssm__tc_split<BF>(q[2 * kk + 1][2], q[2 * kk + 1][3], &af[kk][3], &al[kk][3]);
    }
}
/* B fragments of A_u^T for k-slab kk and n-tiles 2np, 2np + 1, from a padded tile */
template <int W, int TR>
__device__ __forceinline__ void ssm__tc_bfrag(unsigned bf[4], const unsigned short *At, int kk, int np, int lane) {
    const int j8 = lane >> 3, r8 = lane & 7, n0 = 16 * np, k0 = 16 * kk;
    if (!TR) ssm__tc_ldm4(bf, At + ssm__tc_at<0, W>(n0 + (j8 >> 1) * 8 + r8, k0 + (j8 & 1) * 8));
    else ssm__tc_ldm4t(bf, At + ssm__tc_at<0, W>(k0 + (j8 & 1) * 8 + r8, n0 + (j8 >> 1) * 8));
}
/* e = row 0 + row 1 of the end-state warp's first NT accumulator tiles (lanes 0-3), + b_u */
template <int NT> __device__ __forceinline__ void ssm__tc_e_sum(float (*e)[4], const float *bu, int lane) {
    const int lc = 2 * (lane & 3);
#pragma unroll
    for (int t = 0; t < NT; ++t) {
        float x = __shfl_down_sync(0xffffffffu, e[t][0], 4), y = __shfl_down_sync(0xffffffffu, e[t][1], 4);
        e[t][0] += x + bu[8 * t + lc];
        e[t][1] += y + bu[8 * t + lc + 1];
    }
}
/* The end-state warp's A fragment from lanes 0-3's hi and lo parts of e (h0 / l0: the fragment's
   columns in registers 0, h1 / l1: in register 2): row 0 = e_hi (lanes 0-3), row 1 = e_lo (lanes
   4-7, shuffled from lanes 0-3), rows 2-15 zero. */
__device__ __forceinline__ void ssm__tc_e_frag(unsigned a[4], unsigned h0, unsigned l0, unsigned h1, unsigned l1, int lane) {
    const unsigned sl0 = __shfl_sync(0xffffffffu, l0, lane & 3), sl1 = __shfl_sync(0xffffffffu, l1, lane & 3);
    a[0] = lane < 4 ? h0 : (lane < 8 ? sl0 : 0u);
    a[2] = lane < 4 ? h1 : (lane < 8 ? sl1 : 0u);
    a[1] = a[3] = 0u;
}
/* One step of the mma.sync kernel's end-state warp, e^T <- e^T A_u^T + b_u^T on the tensor cores:
   lanes 0-3 hold e in e[t][0..1]; row 0 of the A fragment is e_hi, row 1 e_lo (so e keeps ~f32
   accuracy through 16-bit operands). */
template <int W, int TR, int BF, int NK>
__device__ __forceinline__ void ssm__tc_e_step(float (*e)[4], const unsigned short *At, const float *bu, int lane) {
    unsigned af[NK][4];
#pragma unroll
    for (int kk = 0; kk < NK; ++kk) {
        unsigned h0, l0, h1, l1;
        ssm__tc_split<BF>(e[2 * kk][0], e[2 * kk][1], &h0, &l0);
        ssm__tc_split<BF>(e[2 * kk + 1][0], e[2 * kk + 1][1], &h1, &l1);
        ssm__tc_e_frag(af[kk], h0, l0, h1, l1, lane);
    }
#pragma unroll
    for (int kk = 0; kk < NK; ++kk)
#pragma unroll
        for (int np = 0; np < NK; ++np) {
            unsigned bf[4];
            ssm__tc_bfrag<W, TR>(bf, At, kk, np, lane);
            ssm__tc_mma16<BF>(e[2 * np], e[2 * np + 1], af[kk], bf, kk == 0);
        }
    ssm__tc_e_sum<2 * NK>(e, bu, lane);
}
/* P = Q^T for Q's 16-row block at row0 (dst: P of the chunk), or E from the end-state warp */
template <int W> __device__ __forceinline__ void ssm__tc_put_q(float *dst, const float (*q)[4], int row0, int lane) {
    const int lr = lane >> 2, lc = 2 * (lane & 3);
#pragma unroll
    for (int t = 0; t < W / 8; ++t)
#pragma unroll
        for (int z = 0; z < 4; ++z) dst[(8 * t + lc + (z & 1)) * W + row0 + lr + (z >> 1) * 8] = q[t][z];
}
template <int W> __device__ __forceinline__ void ssm__tc_put_e(float *dst, const float (*e)[4], int lane) {
    const int lc = 2 * (lane & 3);
    if (lane < 4)
#pragma unroll
        for (int t = 0; t < W / 8; ++t) *(float2 *)(dst + 8 * t + lc) = make_float2(e[t][0], e[t][1]);
}

/* The product warps' step, Q <- Q A_u^T, over the first NK k-slabs and 16-column blocks (NK =
   W / 16 at n = W; for n < W the rest are zero products) and this warp's first mbn 16-row
   blocks (a block past n keeps its rows of Q = I: P is 1 on its diagonal past n, which the
   carries multiply by states that are zero there); MB blocks a warp, pass 1's by default. NK is a template argument: guards inside
   the unrolled loops cost the loads their overlap with the MMAs (n = 48 ran 9% slower than
   with no skipping at all). */
template <int W, int TR, int BF, int SPLIT, int NK, int MB = ssm__tcg<W>::MB>
__device__ __forceinline__ void ssm__tc_prod_step(float (*acc)[W / 8][4], unsigned (*af)[W / 16][4],
                                                  unsigned (*al)[W / 16][4], const unsigned short *At, int lane, int mbn) {
#pragma unroll
    for (int mb = 0; mb < MB; ++mb)
        if (mb < mbn) ssm__tc_frag<BF, SPLIT, NK>(af[mb], al[mb], acc[mb]);
#pragma unroll
    for (int kk = 0; kk < NK; ++kk)
#pragma unroll
        for (int np = 0; np < NK; ++np) {
            unsigned bf[4];
            ssm__tc_bfrag<W, TR>(bf, At, kk, np, lane);
#pragma unroll
            for (int mb = 0; mb < MB; ++mb) {
                if (mb >= mbn) continue;
                ssm__tc_mma16<BF>(acc[mb][2 * np], acc[mb][2 * np + 1], af[mb][kk], bf, kk == 0);
                if (SPLIT) ssm__tc_mma16<BF>(acc[mb][2 * np], acc[mb][2 * np + 1], al[mb][kk], bf, 0);
            }
        }
}
/* f32: the B fragment of A_u^T at k-slab ks (8 columns), n-tile nt, in the permuted k order below */
template <int TR, int LD> __device__ __forceinline__ float2 ssm__tc_bfrag32(const float *At, int ks, int nt, int lane) {
    const int g = lane >> 2, t = lane & 3;
    if (!TR) return *(const float2 *)(At + (8 * nt + g) * LD + 8 * ks + 2 * t);
    return make_float2(At[(8 * ks + 2 * t) * LD + 8 * nt + g], At[(8 * ks + 2 * t + 1) * LD + 8 * nt + g]);
}
/* f32 (3xTF32; plain TF32 without SPLIT): the product warps' step on m16n8k8 over 8-column
   k-slabs. The MMA's k order is permuted to the accumulator's: lane t's columns 2t, 2t + 1 are
   k = t, t + 4, so an 8-column accumulator tile is the next step's A fragment with no shuffle
   (a0..a3 = c0, c2, c1, c3), and a B fragment, A_u[n][k] at k = 2t, 2t + 1, is one float2 of a row
   (TR: two floats of a column). The old Q is kept as f32 (q) and each k-slab split into hi / lo
   where it is used: the hi / lo of all k-slabs beside the accumulators would not fit the
   registers at W = 128 (ptxas: 10 KB of spills; this way 0.3 KB, 168 registers). NK, mbn: as
   ssm__tc_prod_step (16-column blocks). */
template <int W, int TR, int SPLIT, int NK, int LD>
__device__ __forceinline__ void ssm__tc_prod_step32(float (*acc)[W / 8][4], float (*q)[W / 8][4], const float *At, int lane,
                                                    int mbn) {
    constexpr int MB = ssm__tcg<W, 2>::MB;
#pragma unroll
    for (int mb = 0; mb < MB; ++mb)
        if (mb < mbn)
#pragma unroll
            for (int ks = 0; ks < 2 * NK; ++ks)
#pragma unroll
                for (int z = 0; z < 4; ++z) q[mb][ks][z] = acc[mb][ks][z == 1 ? 2 : z == 2 ? 1 : z];
#pragma unroll
    for (int ks = 0; ks < 2 * NK; ++ks) {
        unsigned ah[MB][4], al[MB][4];
#pragma unroll
        for (int mb = 0; mb < MB; ++mb)
#pragma unroll
            for (int z = 0; z < 4; ++z) ssm__tc_tf32_op<SPLIT>(q[mb][ks][z], &ah[mb][z], &al[mb][z]);
#pragma unroll
        for (int nt = 0; nt < 2 * NK; ++nt) {
            const float2 v = ssm__tc_bfrag32<TR, LD>(At, ks, nt, lane);
            unsigned bh0, bh1, bl0, bl1;
            ssm__tc_tf32_op<SPLIT>(v.x, &bh0, &bl0), ssm__tc_tf32_op<SPLIT>(v.y, &bh1, &bl1);
#pragma unroll
            for (int mb = 0; mb < MB; ++mb) {
                if (mb >= mbn) continue;
                ssm__tc_mma8(acc[mb][nt], ah[mb], bh0, bh1, ks == 0);
                if (SPLIT) {
                    ssm__tc_mma8(acc[mb][nt], al[mb], bh0, bh1, 0);
                    ssm__tc_mma8(acc[mb][nt], ah[mb], bl0, bl1, 0);
                }
            }
        }
    }
}
/* f32: the end-state warp's step (ssm__tc_e_step on m16n8k8): row 0 of the A fragment e_hi,
   row 1 e_lo, each times A_u's hi and lo parts, so e stays f32-accurate. */
template <int W, int TR, int NK, int LD>
__device__ __forceinline__ void ssm__tc_e_step32(float (*e)[4], const float *At, const float *bu, int lane) {
    unsigned af[2 * NK][4];
#pragma unroll
    for (int ks = 0; ks < 2 * NK; ++ks) { /* register 0: k = t (column 2t), register 2: k = t + 4 (column 2t + 1) */
        unsigned h0, l0, h1, l1;
        ssm__tc_split32(e[ks][0], &h0, &l0);
        ssm__tc_split32(e[ks][1], &h1, &l1);
        ssm__tc_e_frag(af[ks], h0, l0, h1, l1, lane);
    }
#pragma unroll
    for (int ks = 0; ks < 2 * NK; ++ks)
#pragma unroll
        for (int nt = 0; nt < 2 * NK; ++nt) {
            const float2 v = ssm__tc_bfrag32<TR, LD>(At, ks, nt, lane);
            unsigned bh0, bh1, bl0, bl1;
            ssm__tc_split32(v.x, &bh0, &bl0), ssm__tc_split32(v.y, &bh1, &bl1);
            ssm__tc_mma8(e[nt], af[ks], bh0, bh1, ks == 0);
            ssm__tc_mma8(e[nt], af[ks], bl0, bl1, 0);
        }
    ssm__tc_e_sum<2 * NK>(e, bu, lane);
}
/* f(ssm__tc_ic<K>()) for the K in [LO, HI] that equals k (HI for any larger k): a count known
   only at run time (the k-slabs inside n) as a template argument, one instantiation each. */
template <int V> struct ssm__tc_ic { static constexpr int value = V; };
template <int LO, int HI, class F> __device__ __forceinline__ void ssm__tc_with(int k, F &&f) {
    if constexpr (LO >= HI) f(ssm__tc_ic<HI>());
    else if (k <= LO) f(ssm__tc_ic<LO>());
    else ssm__tc_with<LO + 1, HI>(k, f);
}

/* On mma.sync: the product warps own MB 16-row blocks of Q each (16-bit at W = 64: warps 0..1,
   32 rows each; otherwise one 16-row block a warp), the last warp runs e (ssm__tc_e_step). No
   barrier is needed for the product itself, only for the tile ring. */
template <int W, int TR, int BF, int SPLIT, int PAD>
__global__ void __launch_bounds__(ssm__tcg<W, BF>::PT) ssm__cu_tc_prod_kernel(int64_t s0, int Lc, int n, ssm__cu_rv A, int64_t aos,
                                                                         ssm__cu_rv b, int64_t nc, float *P, float *E,
                                                                         int Llast, float *PL, float *EL) {
    extern __shared__ __align__(16) unsigned char ssm__tp_sm[];
    typedef ssm__tcg<W, BF> G;
    typedef typename G::E Et;
    constexpr int MB = G::MB, NKLO = !PAD ? W / 16 : W == 128 ? 5 : 1; /* k-slabs inside n: n >= 72 at W = 128 */
    constexpr int LD = G::template ld<1, TR>(), TILE = W * LD, KS = G::F32 ? 1 : W / 16, KQ = G::F32 ? W / 8 : 1;
    Et *As = (Et *)ssm__tp_sm;
    float *bs = (float *)(As + G::PNST * TILE);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int64_t c = blockIdx.x, s = s0 + blockIdx.y;
    const int len = c == nc - 1 ? Llast : Lc; /* chunk nc - 1: launched for a span's end only (PL) */
    float *Pd = c == nc - 1 ? PL + s * (int64_t)(W * W) : P + (s * (nc - 1) + c) * (int64_t)(W * W);
    float *Ed = c == nc - 1 ? EL + s * W : E + (s * (nc - 1) + c) * W;
    const Et *Ag = (const Et *)A.p;
    const int64_t abase = A.off + s * A.ss + c * A.chs, bbase = b.off + s * b.ss + c * b.chs;
    const int isE = warp == G::PW, nk = PAD ? (n + 15) >> 4 : W / 16; /* the k-slabs and column blocks that hold n */
    const int r0 = warp * 16 * MB, mbn = !PAD ? MB : min(MB, max(0, (n - r0 + 15) >> 4)); /* this warp's row blocks inside n */
    float acc[MB][W / 8][4], q[MB][KQ][4]; /* f32: the old Q */
    unsigned af[MB][KS][4], al[MB][KS][4];  /* 16-bit: its hi / lo fragments */
    ssm__tc_zero_ring<PAD>((unsigned short *)As, G::PNST * TILE * (int)sizeof(Et) / 2, tid, G::PT);
#pragma unroll
    for (int u = 0; u < G::PNST - 1; ++u) {
        if (u < len) ssm__tc_load_tile<W, G::PT, 0, PAD, LD>(As + u * TILE, Ag + abase + u * A.ts, aos, n, tid);
        ssm__tc_commit();
    }
    ssm__tc_stage_b<W>(bs, len * W, b, bbase, n, tid, G::PT);
#pragma unroll
    for (int mb = 0; mb < MB; ++mb) ssm__tc_eye<W>(acc[mb], isE ? -W : r0 + mb * 16, lane); /* Q = I, e = 0 */
    for (int u = 0; u < len; ++u) {
        ssm__tc_wait<G::PNST - 2>();
        __syncthreads();
        {
            int un = u + G::PNST - 1;
            if (un < len) ssm__tc_load_tile<W, G::PT, 0, PAD, LD>(As + (un % G::PNST) * TILE, Ag + abase + un * A.ts, aos, n, tid);
            ssm__tc_commit();
        }
        const Et *At = As + (u % G::PNST) * TILE;
        if (isE) {
            const float *bu = bs + u * W;
            ssm__tc_with<NKLO, W / 16>(nk, [&](auto K) {
                if constexpr (G::F32) ssm__tc_e_step32<W, TR, decltype(K)::value, LD>(acc[0], At, bu, lane);
                else ssm__tc_e_step<W, TR, BF, decltype(K)::value>(acc[0], At, bu, lane);
            });
            continue;
        }
        ssm__tc_with<NKLO, W / 16>(nk, [&](auto K) {
            if constexpr (G::F32) ssm__tc_prod_step32<W, TR, SPLIT, decltype(K)::value, LD>(acc, q, At, lane, mbn);
            else ssm__tc_prod_step<W, TR, BF, SPLIT, decltype(K)::value>(acc, af, al, At, lane, mbn);
        });
    }
    if (!isE) {
#pragma unroll
        for (int mb = 0; mb < MB; ++mb) ssm__tc_put_q<W>(Pd, acc[mb], r0 + mb * 16, lane);
    } else ssm__tc_put_e<W>(Ed, acc[0], lane);
}

/* On wgmma (sm_90a): one warpgroup holds Q, each warp 16 rows as wgmma's register A operand;
   B = A_u^T by descriptor from a tile stored as it is in memory (128-byte rows, swizzled), read
   K-major (row-major A) or N-major (TR). One m64n64k16 per k-slab (two with SPLIT), waited for
   within the step: the next step's A fragments are this step's result. While the tensor cores
   run, the same threads advance e on the CUDA cores (f32; e double-buffered in shared memory,
   ordered by the ring's barrier), so no warp waits on another's role. */
#define SSM__TW_THREADS 128
#define SSM__TW_NST 4
#define SSM__TW_TILE (SSM__TC_N * SSM__TC_N)
static size_t ssm__tw_smem(int Lc) { /* ring, b of the chunk, e x 2, TR's partial sums of e */
    return 1024 + (size_t)SSM__TW_NST * SSM__TW_TILE * 2 + (size_t)(Lc + 6) * SSM__TC_N * 4;
}
template <int TR, int BF, int SPLIT, int PAD>
__global__ void __launch_bounds__(SSM__TW_THREADS) ssm__cu_tc_prodw_kernel(int64_t s0, int Lc, int n, ssm__cu_rv A, int64_t aos,
                                                                           ssm__cu_rv b, int64_t nc, float *P, float *E,
                                                                           int Llast, float *PL, float *EL) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL) && defined(SSM__SM90_HAVE)
    extern __shared__ __align__(16) unsigned char ssm__tw_sm[];
    __shared__ volatile int ssm__tw_real; /* static shared memory (volatile: kept): the sm_90a kernel, not the stub */
    typedef unsigned short u16;
    u16 *As = (u16 *)ssm__sm90_ring(ssm__tw_sm);
    float *bs = (float *)(As + SSM__TW_NST * SSM__TW_TILE), *es = bs + (size_t)Lc * SSM__TC_N; /* b of the chunk; e x 2, then TR's partial sums */
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, r = tid >> 1, half = tid & 1;
    const int64_t c = blockIdx.x, s = s0 + blockIdx.y;
    const int len = c == nc - 1 ? Llast : Lc; /* as ssm__cu_tc_prod_kernel's */
    const u16 *Ag = (const u16 *)A.p;
    const int64_t abase = A.off + s * A.ss + c * A.chs, bbase = b.off + s * b.ss + c * b.chs;
    float acc[8][4], ev = 0.f;
    unsigned af[4][4], al[4][4];
    if (tid == 0) ssm__tw_real = 1;
    ssm__tc_zero_ring<PAD>(As, SSM__TW_NST * SSM__TW_TILE, tid, SSM__TW_THREADS); /* ordered before the wgmma by each step's proxy fence */
#pragma unroll
    for (int u = 0; u < SSM__TW_NST - 1; ++u) {
        if (u < len) ssm__tc_load_tile<SSM__TC_N, SSM__TW_THREADS, 1, PAD>(As + u * SSM__TW_TILE, Ag + abase + u * A.ts, aos, n, tid);
        ssm__tc_commit();
    }
    ssm__tc_stage_b<SSM__TC_N>(bs, len * SSM__TC_N, b, bbase, n, tid, SSM__TW_THREADS);
    if (tid < SSM__TC_N) es[tid] = 0.f;
    ssm__tc_eye<SSM__TC_N>(acc, warp * 16, lane);
    for (int u = 0; u < len; ++u) {
        ssm__tc_wait<SSM__TW_NST - 2>();
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); /* cp.async's writes, seen by wgmma */
        __syncthreads();
        {
            int un = u + SSM__TW_NST - 1;
            if (un < len)
                ssm__tc_load_tile<SSM__TC_N, SSM__TW_THREADS, 1, PAD>(As + (un % SSM__TW_NST) * SSM__TW_TILE, Ag + abase + un * A.ts, aos, n, tid);
            ssm__tc_commit();
        }
        const u16 *At = As + (u % SSM__TW_NST) * SSM__TW_TILE;
        ssm__tc_frag<BF, SPLIT, 4>(af, al, acc);
#pragma unroll
        for (int t = 0; t < 8; ++t)
#pragma unroll
            for (int z = 0; z < 4; ++z) ssm__sm90_rf(acc[t][z]);
        ssm__sm90_fence();
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) { /* k-slab kk: 32 bytes along a row (K-major), 16 rows (N-major) */
            const uint64_t db = ssm__sm90_desc<128>(At + (TR ? 16 * SSM__TC_N * kk : 16 * kk));
            ssm__sm90_mma64rs<BF, TR>::run(&acc[0][0], af[kk], db, kk > 0);
            if (SPLIT) ssm__sm90_mma64rs<BF, TR>::run(&acc[0][0], al[kk], db, 1);
        }
        ssm__sm90_commit();
        if (!TR) { /* e_r <- A_u[r, :] e + b_u[r]: two threads a row, k in [32 half, 32 half + 32) */
            const float *ec = es + (u & 1) * SSM__TC_N + 32 * half;
            float p0 = 0.f, p1 = 0.f;
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const uint4 v = *(const uint4 *)(At + ssm__tc_at<1>(r, 32 * half + 8 * j));
                ssm__tc_dot8<BF>(v, *(const float4 *)(ec + 8 * j), *(const float4 *)(ec + 8 * j + 4), p0, p1);
            }
            float v = p0 + p1;
            v += __shfl_xor_sync(0xffffffffu, v, 1);
            ev = v + bs[u * SSM__TC_N + r];
            if (!half) es[((u + 1) & 1) * SSM__TC_N + r] = ev;
        } else { /* storage row k holds column k of A_u: rows 2 lane, 2 lane + 1 over k in [16 warp, 16 warp + 16),
                    one conflict-free 4-byte read a k; the four warps' partial sums meet in shared memory */
            const float *ec = es + (u & 1) * SSM__TC_N + 16 * warp;
            float *pe = es + 2 * SSM__TC_N; /* 4 x 64 partial sums */
            float p0 = 0.f, p1 = 0.f;
#pragma unroll
            for (int k = 0; k < 16; ++k) {
                const float2 f = ssm__tc_f2<BF>(*(const unsigned *)(At + ssm__tc_at<1>(16 * warp + k, 2 * lane)));
                p0 += f.x * ec[k];
                p1 += f.y * ec[k];
            }
            *(float2 *)(pe + warp * SSM__TC_N + 2 * lane) = make_float2(p0, p1);
            __syncthreads();
            if (tid < SSM__TC_N) {
                ev = ((pe[tid] + pe[SSM__TC_N + tid]) + (pe[2 * SSM__TC_N + tid] + pe[3 * SSM__TC_N + tid])) + bs[u * SSM__TC_N + tid];
                es[((u + 1) & 1) * SSM__TC_N + tid] = ev;
            }
        }
        ssm__sm90_wait_mma<0>();
#pragma unroll
        for (int t = 0; t < 8; ++t)
#pragma unroll
            for (int z = 0; z < 4; ++z) ssm__sm90_rf(acc[t][z]);
#pragma unroll
        for (int kk = 0; kk < 4; ++kk)
#pragma unroll
            for (int z = 0; z < 4; ++z) {
                ssm__sm90_ra(af[kk][z]);
                if (SPLIT) ssm__sm90_ra(al[kk][z]);
            }
    }
    float *Pd = c == nc - 1 ? PL + s * (int64_t)SSM__TW_TILE : P + (s * (nc - 1) + c) * (int64_t)SSM__TW_TILE;
    float *Ed = c == nc - 1 ? EL + s * SSM__TC_N : E + (s * (nc - 1) + c) * SSM__TC_N;
    ssm__tc_put_q<SSM__TC_N>(Pd, acc, warp * 16, lane);
    if (TR ? tid < SSM__TC_N : !half) Ed[TR ? tid : r] = ev;
#endif
}

/* Pass 2: X_0 = h_0, X_{c+1} = P_c X_c + e_c for c < nc-1; one CTA of 4 W threads per
   sequence (blockIdx.x). With seg < nc - 1 the chain is cut into segments of seg maps, one CTA
   each (blockIdx.y = g), segment g starting from its own state at h + g h.chs (the two-level
   carries' in-group pass: ssm__cu_tc_go); X_0 is written by segment 0 only. Thread (row, q)
   keeps its quarter of the row, the 16-byte pieces j = q mod 4, of the next CD P_c in
   registers: the four threads of a row read 64 contiguous bytes a load (with the row cut into
   four contiguous quarters, a warp's load touched 32 cache lines, 16 bytes each, and the kernel
   ran L1-bound: H200, n = 128, 4.2 us a carry). */
template <int W>
__global__ void __launch_bounds__(ssm__tcg<W>::T3) ssm__cu_tc_carry_kernel(int64_t nc, int64_t seg, int n, const float *P,
                                                                          const float *E, ssm__cu_rv h, float *X) {
    constexpr int D = ssm__tcg<W>::CD, Q4 = W / 16; /* float4s of a row-quarter */
    constexpr int64_t WW = (int64_t)W * W;
    __shared__ __align__(16) float xs[2][W];
    const int tid = threadIdx.x, row = tid >> 2, q = tid & 3;
    const int64_t s = blockIdx.x, g = blockIdx.y, c0 = g * seg, np = nc - 1 - c0 < seg ? nc - 1 - c0 : seg;
    const float *Ps = P + (s * (nc - 1) + c0) * WW + row * W + 4 * q; /* this segment's maps, from 0 */
    const float *Es = E + (s * (nc - 1) + c0) * W + row;
    float *Xs = X + (s * nc + c0) * W;
    float4 pr[D][Q4];
    float er[D];
    auto fetch = [&](int d, int64_t c) { /* P_c's row piece and e_c's element into ring slot d */
        const float4 *p4 = (const float4 *)(Ps + c * WW);
#pragma unroll
        for (int i = 0; i < Q4; ++i) pr[d][i] = p4[4 * i];
        er[d] = Es[c * W];
    };
    if (tid < W) {
        float v = tid < n ? ssm__cu_ld(h.p, h.dt, h.off + s * h.ss + g * h.chs + tid * h.rs) : 0.f;
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
                const float4 *x4 = (const float4 *)(xs[c & 1] + 4 * q);
                float v4[Q4];
#pragma unroll
                for (int i = 0; i < Q4; ++i) {
                    const float4 x = x4[4 * i];
                    v4[i] = pr[d][i].x * x.x + pr[d][i].y * x.y + pr[d][i].z * x.z + pr[d][i].w * x.w;
                }
#pragma unroll
                for (int w = Q4 / 2; w >= 1; w /= 2) /* pairwise: (v0 + v1) + (v2 + v3) ... */
#pragma unroll
                    for (int i = 0; i < w; ++i) v4[i] = v4[2 * i] + v4[2 * i + 1];
                float v = v4[0];
                v += __shfl_xor_sync(0xffffffffu, v, 1);
                v += __shfl_xor_sync(0xffffffffu, v, 2);
                v += er[d];
                if (c + 4 * D < np) /* pull P_{c+4D} into L2: the register ring then hits L2 */
                    asm volatile("prefetch.global.L2 [%0];\n" ::"l"(Ps + (c + 4 * D) * WW));
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

/* Pass 2 at W = 32 and 64 (the same carries, the same sums): the maps and e_c through a cp.async ring
   of SSM__TC_CRING slots in shared memory (rows padded by 16 floats, so a row's float4 pieces
   j = q mod 4 are conflict-free). Each carry waits for its map, issues the copy of map
   c + CRING - 1 into the slot the previous carry freed, and reads its pieces from shared
   memory. The register ring above kept 8 maps' pieces in flight but its carries still took
   0.65-0.74 us each at W = 64 (maps from HBM, H200, dev/cuda/carry.cu): S16 T4096 n64's 63
   carries 45-46 -> 25-26 us, S1 T8192's 127 82-83 -> 47 us; W = 32: S16 T8192 57 -> 32 us,
   S128 T1024 10.4 -> 8.9 us. At W = 128 the register ring stays (1.00-1.25 us a carry
   against 1.08-1.42 through a ring of 2-3 maps). */
#define SSM__TC_CRING 4
template <int W> __host__ __device__ constexpr int ssm__tc_cring_ld() { return W + 16; }
template <int W> static size_t ssm__tc_cring_smem() { return (size_t)SSM__TC_CRING * (W * ssm__tc_cring_ld<W>() + W) * 4; }
template <int W>
__global__ void __launch_bounds__(ssm__tcg<W>::T3) ssm__cu_tc_carry_ring_kernel(int64_t nc, int64_t seg, int n, const float *P,
                                                                               const float *E, ssm__cu_rv h, float *X) {
    constexpr int K = SSM__TC_CRING, Q4 = W / 16, LD = ssm__tc_cring_ld<W>(), SLOT = W * LD + W, NT = ssm__tcg<W>::T3;
    constexpr int64_t WW = (int64_t)W * W;
    extern __shared__ __align__(16) float ssm__tc_ring[]; /* K slots: a map's rows, LD apart, then its e */
    __shared__ __align__(16) float xs[2][W];
    const int tid = threadIdx.x, row = tid >> 2, q = tid & 3;
    const int64_t s = blockIdx.x, g = blockIdx.y, c0 = g * seg, np = nc - 1 - c0 < seg ? nc - 1 - c0 : seg;
    const float *Pg = P + (s * (nc - 1) + c0) * WW, *Eg = E + (s * (nc - 1) + c0) * W;
    float *Xs = X + (s * nc + c0) * W;
    auto issue = [&](int64_t c) { /* map c and e_c into slot c % K: one commit group each call, empty past np */
        if (c < np) {
            float *d = ssm__tc_ring + (c % K) * SLOT;
            const float *src = Pg + c * WW;
#pragma unroll
            for (int k = 0; k < W * W / 4 / NT; ++k) {
                const int id = tid + NT * k, r = id / (W / 4), c4 = (id % (W / 4)) * 4;
                ssm__tc_cp16(d + r * LD + c4, src + r * W + c4);
            }
            if (tid < W / 4) ssm__tc_cp16(d + W * LD + 4 * tid, Eg + c * W + 4 * tid);
        }
        ssm__tc_commit();
    };
#pragma unroll
    for (int k = 0; k < K - 1; ++k) issue(k);
    if (tid < W) {
        float v = tid < n ? ssm__cu_ld(h.p, h.dt, h.off + s * h.ss + g * h.chs + tid * h.rs) : 0.f;
        xs[0][tid] = v;
        if (g == 0) Xs[tid] = v;
    }
    for (int64_t c = 0; c < np; ++c) {
        ssm__tc_wait<K - 2>(); /* this thread's copies of map c */
        __syncthreads();       /* everyone's, x_c, and slot (c - 1) % K free */
        issue(c + K - 1);
        const float *m = ssm__tc_ring + (c % K) * SLOT;
        const float4 *p4 = (const float4 *)(m + row * LD + 4 * q), *x4 = (const float4 *)(xs[c & 1] + 4 * q);
        float v4[Q4];
#pragma unroll
        for (int i = 0; i < Q4; ++i) {
            const float4 p = p4[4 * i], x = x4[4 * i];
            v4[i] = p.x * x.x + p.y * x.y + p.z * x.z + p.w * x.w;
        }
#pragma unroll
        for (int w = Q4 / 2; w >= 1; w /= 2) /* pairwise, as the register ring's */
#pragma unroll
            for (int i = 0; i < w; ++i) v4[i] = v4[2 * i] + v4[2 * i + 1];
        float v = v4[0];
        v += __shfl_xor_sync(0xffffffffu, v, 1);
        v += __shfl_xor_sync(0xffffffffu, v, 2);
        v += m[W * LD + row];
        if (q == 0) {
            xs[(c + 1) & 1][row] = v;
            Xs[(c + 1) * W + row] = v;
        }
    }
}
/* Pass 2's launch over grid (S sequences x segments): the ring at W <= 64, else the register ring */
template <int W>
static ssm_result ssm__cu_tc_carries(ssm__cu_lr *L, dim3 grid, int64_t nc, int64_t seg, int n, const float *P, const float *E,
                                     ssm__cu_rv h, float *X) {
    ssm__cu_state *cs = ssm__cu_st(L->ctx);
    if constexpr (W <= 64) {
        const size_t sm = ssm__tc_cring_smem<W>();
        const cudaError_t e = ssm__cu_smem_allow((const void *)ssm__cu_tc_carry_ring_kernel<W>, sm, cs->smem_optin);
        if (e == cudaSuccess) {
            ssm__cu_tc_carry_ring_kernel<W><<<grid, ssm__tcg<W>::T3, sm, cs->stream>>>(nc, seg, n, P, E, h, X);
            SSM__CU_LAUNCHED(L->ctx, "ssm__cu_tc_carry_ring_kernel");
            return SSM_OK;
        }
        cudaGetLastError(); /* shared memory refused: the register ring */
    }
    ssm__cu_tc_carry_kernel<W><<<grid, ssm__tcg<W>::T3, 0, cs->stream>>>(nc, seg, n, P, E, h, X);
    SSM__CU_LAUNCHED(L->ctx, "ssm__cu_tc_carry_kernel");
    return SSM_OK;
}

/* Pass 2 in two levels, for long chains (few sequences, many chunks: S1 T65536 at 64 steps a
   chunk is 1023 carries, ~0.4 us each one after the other on one CTA). The chunk maps are taken
   in groups of GK (ssm__tc_gk): (1) every group's product Q_g and end state F_g from zero, all
   groups at once (a chain of GK products of W x W, ~1/Lc of pass 1's work); (2) the carries
   into the groups by ssm__cu_tc_carry_kernel over (Q, F); (3) every group's own carries from
   its group carry, all groups at once, on the same kernel cut into segments. The chain one CTA
   walks drops from nc to about nc / GK + 2 GK steps. Entries of P and E past n are read as
   zeros. The product chain costs ~3.8 us a map and a carry ~0.4 us (H200, W = 64, ncu at
   7eb2473: the group kernel took 60 us at GK = 16 whatever the number of groups), so the time
   is about GK 4.2 us + (nc / GK) 0.4 us, least near GK = sqrt(nc / 10): the power of two from 8
   (S1 T65536 at 64 steps a chunk, 1023 maps) nearest it, in the geometric sense (16 from 1280
   maps, 32 from 5120: at 4095 maps GK = 8 made the chain over 512 groups the larger part,
   bench/results/cuda_cp_7d5003b.log). Measured at W = 64 only. From 128 maps (at S1 T8192, 127
   carries, the one chain was still faster at GK = 16: bench/results/cuda_cp_b6b5235.log).
   Group counts past a grid's y are left to the one chain. */
static int64_t ssm__tc_gk(int64_t np) {
    int64_t gk = 8;
    while (gk < 256 && gk * (2 * gk) * 10 <= np) gk *= 2;
    return gk;
}
static int64_t ssm__tc_groups(int64_t np) {
    const int64_t gk = ssm__tc_gk(np), ng = (np + gk - 1) / gk;
    return np >= 128 && ng <= 65535 ? ng : 0;
}
template <int W>
__global__ void __launch_bounds__(ssm__tcg<W>::T3) ssm__cu_tc_group_kernel(int64_t np, int64_t gk, int n, const float *P,
                                                                          const float *E, float *Q, float *F) {
    constexpr int64_t WW = (int64_t)W * W;
    constexpr int NT = ssm__tcg<W>::T3, B4 = W / 4, LP = W + 4; /* 4 x 4 output blocks; P^T's padded row */
    constexpr int NB = (B4 * B4 + NT - 1) / NT, NV = W * W / 4 / NT; /* blocks and P's float4s a thread */
    extern __shared__ __align__(16) float ssm__tg_sm[];
    float *Qs = ssm__tg_sm, *Pt = Qs + WW, *fs = Pt + W * LP; /* Q row-major, P_c transposed, F */
    const int tid = threadIdx.x;
    const int64_t g = blockIdx.x, s = blockIdx.y, ng = gridDim.x, c0 = g * gk;
    const int64_t c1 = c0 + gk < np ? c0 + gk : np;
    const float *Pg = P + s * np * WW, *Eg = E + s * np * W;
    float4 pv[NV];
    float ev = 0.f;
    auto fetch = [&](int64_t c) { /* P_c and E_c into registers, zero past n (the next map, during this product) */
#pragma unroll
        for (int k = 0; k < NV; ++k) {
            const int e = 4 * (tid + k * NT), i = e / W, j = e % W;
            float4 v = *(const float4 *)(Pg + c * WW + e);
            if (i >= n) v = make_float4(0.f, 0.f, 0.f, 0.f);
            if (j + 0 >= n) v.x = 0.f;
            if (j + 1 >= n) v.y = 0.f;
            if (j + 2 >= n) v.z = 0.f;
            if (j + 3 >= n) v.w = 0.f;
            pv[k] = v;
        }
        ev = tid < n ? Eg[c * W + tid] : 0.f;
    };
    fetch(c0);
#pragma unroll
    for (int k = 0; k < NV; ++k) *(float4 *)(Qs + 4 * (tid + k * NT)) = pv[k];
    if (tid < W) fs[tid] = ev;
    if (c0 + 1 < c1) fetch(c0 + 1);
    for (int64_t c = c0 + 1; c < c1; ++c) {
        const float e_c = ev;
#pragma unroll
        for (int k = 0; k < NV; ++k) { /* P_c^T into shared */
            const int e = 4 * (tid + k * NT), i = e / W, j = e % W;
            Pt[(j + 0) * LP + i] = pv[k].x, Pt[(j + 1) * LP + i] = pv[k].y;
            Pt[(j + 2) * LP + i] = pv[k].z, Pt[(j + 3) * LP + i] = pv[k].w;
        }
        __syncthreads();
        if (c + 1 < c1) fetch(c + 1);
        float acc[NB][4][4];
#pragma unroll
        for (int k = 0; k < NB; ++k) { /* Q' = P_c Q: rows bi.., columns bj.. of this thread's blocks */
            const int blk = tid + k * NT, bi = 4 * (blk / B4), bj = 4 * (blk % B4);
#pragma unroll
            for (int a = 0; a < 4; ++a) acc[k][a][0] = acc[k][a][1] = acc[k][a][2] = acc[k][a][3] = 0.f;
            if (blk < B4 * B4)
#pragma unroll 8
                for (int kk = 0; kk < W; ++kk) {
                    const float4 p = *(const float4 *)(Pt + kk * LP + bi), q = *(const float4 *)(Qs + kk * W + bj);
                    const float pa[4] = {p.x, p.y, p.z, p.w};
#pragma unroll
                    for (int a = 0; a < 4; ++a)
                        acc[k][a][0] += pa[a] * q.x, acc[k][a][1] += pa[a] * q.y, acc[k][a][2] += pa[a] * q.z, acc[k][a][3] += pa[a] * q.w;
                }
        }
        float fv = e_c; /* F' = P_c F + E_c */
        if (tid < W)
            for (int kk = 0; kk < W; ++kk) fv += Pt[kk * LP + tid] * fs[kk];
        __syncthreads();
#pragma unroll
        for (int k = 0; k < NB; ++k) {
            const int blk = tid + k * NT, bi = 4 * (blk / B4), bj = 4 * (blk % B4);
            if (blk < B4 * B4)
#pragma unroll
                for (int a = 0; a < 4; ++a) *(float4 *)(Qs + (bi + a) * W + bj) = make_float4(acc[k][a][0], acc[k][a][1], acc[k][a][2], acc[k][a][3]);
        }
        if (tid < W) fs[tid] = fv;
    }
    __syncthreads();
    for (int e = tid; e < W * W; e += NT) Q[(s * ng + g) * WW + e] = Qs[e];
    if (tid < W) F[(s * ng + g) * W + tid] = fs[tid];
}
/* A span's end for the context-parallel exchange: h_{T-1} = P_l x + e_l, one mat-vec from x,
   the carry into the last chunk (xss floats a sequence; rows past n read as zeros), with that
   chunk's map from pass 1, into step t of h; four threads a row, a CTA a sequence. */
template <int W>
__global__ void __launch_bounds__(ssm__tcg<W>::T3) ssm__cu_tc_end_kernel(int n, const float *x, int64_t xss, const float *PL,
                                                                        const float *EL, ssm__cu_rv h, int64_t t) {
    __shared__ float xs[W];
    const int tid = threadIdx.x, row = tid >> 2, q = tid & 3;
    const int64_t s = blockIdx.x;
    if (tid < W) xs[tid] = tid < n ? x[s * xss + tid] : 0.f;
    __syncthreads();
    const float *pr = PL + (s * W + row) * W;
    float v = 0.f;
    if (row < n)
        for (int j = q; j < n; j += 4) v += pr[j] * xs[j];
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    v += __shfl_xor_sync(0xffffffffu, v, 2);
    if (q == 0 && row < n) ssm__cu_stv(h.p, h.dt, h.off + s * h.ss + t * h.ts + row * h.rs, v + EL[s * W + row]);
}

/* Shared memory of pass 3 and of pass 1 on mma.sync, for chunks of Lc steps */
template <int W, int BF = 0, int TR = 0> static size_t ssm__tc_smem3(int64_t Lc) {
    typedef ssm__tcg<W, BF> G;
    return (size_t)G::NST * W * G::template ld<0, TR>() * sizeof(typename G::E) + (2 + (size_t)Lc) * W * 4;
}
template <int W, int BF = 0, int TR = 0> static size_t ssm__tc_smemp(int64_t Lc) {
    typedef ssm__tcg<W, BF> G;
    return (size_t)G::PNST * W * G::template ld<1, TR>() * sizeof(typename G::E) + (size_t)Lc * W * 4;
}
template <int W, int BF> static size_t ssm__tc_smem_max() { /* either pass, the longest chunk */
    const size_t a = ssm__tc_smem3<W, BF>(SSM__TC_LMAX), b = ssm__tc_smemp<W, BF>(SSM__TC_LMAX);
    return a > b ? a : b;
}
/* Shape / layout test for the tensor-core path: 16-bit or f32 A, m = 1, n from SSM__TC_NMIN to
   128 (zero-padded to the tile width in shared memory); rows (or columns, the adjoint's
   transposed view) of A contiguous, and 16-byte aligned where n is a multiple of 8 (other n
   take ragged tiles, copied 4 or 2 bytes at a time: ssm__tc_load_tile); the
   device's shared memory holds the passes' rings and b of the longest chunk (W = 128: 206 KB,
   f32 209 KB, an H100 / H200 but not an A100; f32 at W = 64: 115 KB). */
static int ssm__cu_tc_ok(const ssm__cu_lr *L, ssm_seq_view A) {
    const int64_t al = (int64_t)(16 / ssm__cu_esize(A.dtype)) - 1; /* 16 bytes, in elements */
    int64_t os;
    size_t smem;
    if (!ssm__cu_tc_shape(A.dtype, L->n, L->m)) return 0;
    { /* the largest dynamic shared memory of the path's kernels, by tile width and element (16-bit, f32) */
        const int w = ssm__cu_tc_w(L->n), f32 = A.dtype.bits == 32;
        const size_t need[3][2] = {{ssm__tc_smem_max<SSM__TC_NS, 0>(), ssm__tc_smem_max<SSM__TC_NS, 2>()},
                                   {ssm__tc_smem_max<SSM__TC_N, 0>(), ssm__tc_smem_max<SSM__TC_N, 2>()},
                                   {ssm__tc_smem_max<SSM__TC_NMAX, 0>(), ssm__tc_smem_max<SSM__TC_NMAX, 2>()}};
        smem = need[w == SSM__TC_NS ? 0 : w == SSM__TC_N ? 1 : 2][f32];
    }
    if (A.cs == 1) os = A.rs;
    else if (A.rs == 1) os = A.cs;
    else return 0;
    if (L->n % 8 == 0 && (((uintptr_t)A.ptr & 15) || (A.off & al) || (A.ts & al) || (A.ss & al) || (os & al)))
        return 0; /* ragged n: any rows (element copies, ssm__tc_load_tile) */
    return ssm__cu_st(L->ctx)->smem_optin >= smem;
}
/* P, E and X of the three passes; L clamped as ssm__cu_lr_chunked_tc clamps it. */
/* a * b saturating at SIZE_MAX (b < 0 too): plans may carry sizes whose products overflow, and
   a SIZE_MAX workspace is refused. ssm.h's twin is private to its implementation's file. */
static size_t ssm__cu_szmul(size_t a, int64_t b) {
    if (b < 0 || a == SIZE_MAX || (b != 0 && a > SIZE_MAX / (uint64_t)b)) return SIZE_MAX;
    return a * (size_t)b;
}
static size_t ssm__cu_szadd(size_t a, size_t b) { return a > SIZE_MAX - b ? SIZE_MAX : a + b; }

/* the chunks of steps 1..T-1 at chunk length L, clamped as ssm__cu_lr_chunked_tc clamps it (at least 1) */
static int64_t ssm__cu_tc_nc(int64_t T, int64_t L) {
    int64_t nc;
    if (L > SSM__TC_LMAX) L = SSM__TC_LMAX;
    if (L < 1) L = 1;
    nc = (T - 1) / L + ((T - 1) % L != 0);
    return nc < 1 ? 1 : nc;
}
static size_t ssm__cu_tc_scratch_bytes(int64_t S, int64_t T, int64_t L, int64_t n) {
    const size_t W = (size_t)ssm__cu_tc_w(n);
    const int64_t nc = ssm__cu_tc_nc(T, L);
    { /* P, E (nc - 1 maps) and X (nc carries), the two-level carries' Q, F and Y, then the last
         chunk's map for a span's end (PL, EL: ssm__cu_tc_go) */
        const int64_t ng = ssm__tc_groups(nc - 1);
        return ssm__cu_szadd(ssm__cu_szmul(ssm__cu_szmul((W * W + 2 * W) * 4u, S), nc),
                             ssm__cu_szmul(ssm__cu_szmul(((W * W + 2 * W) * (size_t)ng + W) * 4u, S), 1)); /* saturating */
    }
}

/* Pass 2 by the plan's level method, cyclic reduction or Blelloch: X_0 = h_0, then the nc-step
   recurrence X_c = P_{c-1} X_{c-1} + e_{c-1} on the level kernels (depth ~log2 nc instead of nc),
   over the n x n blocks of the W-wide P and E (X's rows past n are left unset; pass 3 reads
   zeros). */
static ssm_result ssm__cu_tc_level_carries(ssm__cu_lr *L, int64_t nc, float *P, float *E, ssm__cu_rv h0, float *X,
                                           char *lvws) {
    const int64_t W = ssm__cu_tc_w(L->n);
    ssm_matrix_batch src, dst;
    ssm__cu_rv Av, bv, xv;
    src.ptr = (char *)h0.p + h0.off * (int64_t)(h0.dt ? 2 : 4), src.rs = h0.rs, src.cs = 1, src.bs = 0, src.ss = h0.ss;
    src.dtype = h0.dt == 0 ? SSM_F32 : h0.dt == 1 ? SSM_F16 : SSM_BF16;
    dst.ptr = X, dst.rs = 1, dst.cs = 1, dst.bs = 0, dst.ss = nc * W, dst.dtype = SSM_F32;
    SSM__TRY(ssm__cu_copy(L->ctx, SSM_F32, L->S, 1, L->n, 1, src, dst, 0));
    /* A_c = P_{c-1}, b_c = e_{c-1}: offsets one matrix before the buffers (index 0 is never read) */
    Av.p = P, Av.dt = 0, Av.off = -W * W, Av.ts = W * W, Av.rs = W, Av.cs = 1;
    Av.ss = (nc - 1) * W * W, Av.chs = 0;
    bv.p = E, bv.dt = 0, bv.off = -W, bv.ts = W, bv.rs = 1, bv.cs = 1, bv.ss = (nc - 1) * W, bv.chs = 0;
    xv.p = X, xv.dt = 0, xv.off = 0, xv.ts = W, xv.rs = 1, xv.cs = 1, xv.ss = nc * W, xv.chs = 0;
    if (L->p->method == SSM_LINREC_BLELLOCH) return ssm__cu_bl_solve(L, nc, Av, bv, xv, lvws);
    return ssm__cu_cr_solve(L, nc, Av, bv, xv, lvws);
}

/* 1 when the wgmma chunk products run on the context's device: compute capability 9.0 and this
   binary's sm_90a code (a stub has no static shared memory). Asked once per context; their
   shared-memory limit is raised then, for the longest chunk. */
#ifdef SSM__SM90_HAVE
template <int PAD> static int ssm__lrw_ok_pad(ssm__cu_state *st, size_t dyn) {
    return ssm__sm90_kernel_ok(st, (const void *)ssm__cu_tc_prodw_kernel<0, 0, 0, PAD>, dyn) &&
           ssm__sm90_kernel_ok(st, (const void *)ssm__cu_tc_prodw_kernel<0, 0, 1, PAD>, dyn) &&
           ssm__sm90_kernel_ok(st, (const void *)ssm__cu_tc_prodw_kernel<0, 1, 0, PAD>, dyn) &&
           ssm__sm90_kernel_ok(st, (const void *)ssm__cu_tc_prodw_kernel<0, 1, 1, PAD>, dyn) &&
           ssm__sm90_kernel_ok(st, (const void *)ssm__cu_tc_prodw_kernel<1, 0, 0, PAD>, dyn) &&
           ssm__sm90_kernel_ok(st, (const void *)ssm__cu_tc_prodw_kernel<1, 0, 1, PAD>, dyn) &&
           ssm__sm90_kernel_ok(st, (const void *)ssm__cu_tc_prodw_kernel<1, 1, 0, PAD>, dyn) &&
           ssm__sm90_kernel_ok(st, (const void *)ssm__cu_tc_prodw_kernel<1, 1, 1, PAD>, dyn);
}
#endif
static int ssm__lrw_ok(ssm__cu_state *st) {
#ifdef SSM__SM90_HAVE
    if (!st->lrw) {
        const size_t dyn = ssm__tw_smem(SSM__TC_LMAX);
        st->lrw = ssm__sm90_device(st) && ssm__lrw_ok_pad<0>(st, dyn) && ssm__lrw_ok_pad<1>(st, dyn) ? 1 : 2;
        cudaGetLastError();
    }
    return st->lrw == 1;
#else
    (void)st;
    return 0;
#endif
}

/* Pass 1 (products, nc > 1), pass 2 (carries), pass 3 (states). The hi/lo split of the running
   product: on for bf16 (8-bit mantissa) and f32 (3xTF32), off for f16 (11 bits: the product's
   rounding stays under the f16 output rounding, bench/results/cuda_linrec_perf.log); the
   config's linrec_tc_split forces either (for f32, off is plain TF32).
   Context parallel (linrec_steps_cp): phase 1 runs pass 1, which needs no carry; with want_end
   pass 1 also forms the last chunk's map (PL, EL), the carries run up to that chunk and its map
   gives the span's end state: one mat-vec where that chunk's pass 3 (a CTA walking up to Lc
   steps) was on the next rank's critical path. Phase 2 runs passes 2 and 3 from the new h_0 on
   pass 1's P and E. phase 0: all of it. */
template <int W, int TR, int BF, int PAD>
static ssm_result ssm__cu_tc_go(ssm__cu_lr *L, int64_t T1, int Lc, int64_t nc, ssm__cu_rv A, int64_t aos, ssm__cu_rv b,
                                ssm__cu_rv h, ssm__cu_rv h0, float *X, float *P, float *E, ssm__cu_rv o, char *lvws,
                                int phase, int want_end) {
    typedef ssm__tcg<W, BF> G;
    ssm__cu_state *cs = ssm__cu_st(L->ctx);
    cudaStream_t st = cs->stream;
    const int n = (int)L->n;
    size_t sm3 = ssm__tc_smem3<W, BF, TR>(Lc);
    int split = cs->knobs.linrec_tc_split ? cs->knobs.linrec_tc_split == 2 : BF;
    cudaError_t e = ssm__cu_smem_allow((const void *)ssm__cu_tc_kernel<W, TR, BF, PAD>, sm3, cs->smem_optin);
    if (e != cudaSuccess)
        return ssm_ctx_error(L->ctx, SSM_ERROR_BACKEND, "CUDA: cudaFuncSetAttribute(%zu bytes smem): %s", sm3,
                             cudaGetErrorString(e));
    const int endmap = phase == 1 && want_end && nc > 1; /* the end from the last chunk's map */
    /* two-level carries (S within one grid's y; none under the level carries), groups of gk maps */
    const int64_t ng = lvws || L->S > 65535 ? 0 : ssm__tc_groups(nc - 1), gk = ssm__tc_gk(nc - 1);
    float *Q = X + L->S * nc * W, *F = Q + L->S * ng * W * W, *Y = F + L->S * ng * W, *PL = Y + L->S * (ng + 1) * W;
    float *EL = PL + L->S * W * W;
    if (nc > 1 && phase != 2) {
        typedef void (*prod_fn)(int64_t, int, int, ssm__cu_rv, int64_t, ssm__cu_rv, int64_t, float *, float *, int, float *, float *);
        /* n < 64: mma.sync skips the zero blocks, wgmma's m64n64 cannot; n > 64 and f32: mma.sync only */
        int w = 0;
        prod_fn k = split ? ssm__cu_tc_prod_kernel<W, TR, BF, 1, PAD> : ssm__cu_tc_prod_kernel<W, TR, BF, 0, PAD>;
        if constexpr (W == SSM__TC_N && BF != 2 && PAD != 2) { /* ragged tiles: not the swizzled wgmma layout */
            w = (cs->knobs.linrec_tc_prod == 2 || (cs->knobs.linrec_tc_prod == 0 && split && !PAD)) && ssm__lrw_ok(cs);
            if (w) k = split ? ssm__cu_tc_prodw_kernel<TR, BF, 1, PAD> : ssm__cu_tc_prodw_kernel<TR, BF, 0, PAD>;
        }
        const size_t smp = w ? ssm__tw_smem(Lc) : ssm__tc_smemp<W, BF, TR>(Lc);
        e = w ? cudaSuccess : ssm__cu_smem_allow((const void *)k, smp, cs->smem_optin); /* wgmma: set once */
        if (e != cudaSuccess)
            return ssm_ctx_error(L->ctx, SSM_ERROR_BACKEND, "CUDA: cudaFuncSetAttribute(%zu bytes smem): %s", smp,
                                 cudaGetErrorString(e));
        for (int64_t s0 = 0; s0 < L->S; s0 += 65535) { /* grid y stops at 65535 sequences a launch */
            dim3 grid((unsigned)(nc - 1 + endmap), SSM__CU_GRID_Y(L->S - s0));
            k<<<grid, w ? SSM__TW_THREADS : G::PT, smp, st>>>(s0, Lc, n, A, aos, b, nc, P, E, (int)(T1 - (nc - 1) * Lc), PL, EL);
            SSM__CU_LAUNCHED(L->ctx, w ? "ssm__cu_tc_prodw_kernel" : "ssm__cu_tc_prod_kernel");
        }
    }
    /* the two-level carries' group maps, before any carry is known */
    if (ng && phase != 2) {
        const size_t smg = ((size_t)W * W + (size_t)W * (W + 4) + 2 * W) * 4u;
        e = cudaFuncSetAttribute(ssm__cu_tc_group_kernel<W>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smg);
        if (e != cudaSuccess)
            return ssm_ctx_error(L->ctx, SSM_ERROR_BACKEND, "CUDA: cudaFuncSetAttribute(%zu bytes smem): %s", smg,
                                 cudaGetErrorString(e));
        ssm__cu_tc_group_kernel<W><<<dim3((unsigned)ng, (unsigned)L->S), G::T3, smg, st>>>(nc - 1, gk, n, P, E, Q, F);
        SSM__CU_LAUNCHED(L->ctx, "ssm__cu_tc_group_kernel");
    }
    if (phase == 1 && !want_end) return SSM_OK;
    if (lvws) {
        SSM__TRY(ssm__cu_tc_level_carries(L, nc, P, E, h0, X, lvws));
    } else if (ng) {
        SSM__TRY(ssm__cu_tc_carries<W>(L, dim3((unsigned)L->S), ng + 1, ng, n, Q, F, h0, Y));
        if (!endmap) { /* every group's own carries from Y_g (the end needs Y_ng only, the carry into the last chunk) */
            ssm__cu_rv yv;
            memset(&yv, 0, sizeof yv);
            yv.p = Y, yv.dt = 0, yv.rs = 1, yv.ss = (ng + 1) * W, yv.chs = W;
            SSM__TRY(ssm__cu_tc_carries<W>(L, dim3((unsigned)L->S, (unsigned)ng), nc, gk, n, P, E, yv, X));
        }
    } else {
        SSM__TRY(ssm__cu_tc_carries<W>(L, dim3((unsigned)L->S), nc, nc - 1, n, P, E, h0, X));
    }
    if (endmap) {
        ssm__cu_tc_end_kernel<W><<<(unsigned)L->S, G::T3, 0, st>>>(n, ng ? Y + ng * W : X + (nc - 1) * W, (ng ? ng + 1 : nc) * W,
                                                                   PL, EL, h, T1 - 1);
        SSM__CU_LAUNCHED(L->ctx, "ssm__cu_tc_end_kernel");
        return SSM_OK;
    }
    { /* chunks c0.. (phase 1, a single chunk: that one; its views and carries shifted to start there) */
        const int64_t c0 = phase == 1 ? nc - 1 : 0;
        A.off += c0 * A.chs, b.off += c0 * b.chs, h.off += c0 * h.chs, o.off += c0 * o.chs;
        for (int64_t s0 = 0; s0 < L->S; s0 += 65535) {
            dim3 grid((unsigned)(nc - c0), SSM__CU_GRID_Y(L->S - s0));
            ssm__cu_tc_kernel<W, TR, BF, PAD><<<grid, G::T3, sm3, st>>>(s0, T1 - c0 * Lc, Lc, n, A, aos, b, h, X + c0 * W, nc, o);
            SSM__CU_LAUNCHED(L->ctx, "ssm__cu_tc_kernel");
        }
    }
    return SSM_OK;
}
/* the instantiation for the view: tile width, layout (TR), type (BF: 0 f16, 1 bf16, 2 f32), padding */
template <int W>
static ssm_result ssm__cu_tc_run(ssm__cu_lr *L, int tr, int bf, int64_t T1, int Lc, int64_t nc, ssm__cu_rv A, int64_t aos,
                                 ssm__cu_rv b, ssm__cu_rv h, ssm__cu_rv h0, float *X, float *P, float *E, ssm__cu_rv o, char *lvws,
                                 int phase, int want_end) {
#define SSM__TC_GO(TR_, BF_)                                                                                      \
    (L->n % 8   ? ssm__cu_tc_go<W, TR_, BF_, 2>(L, T1, Lc, nc, A, aos, b, h, h0, X, P, E, o, lvws, phase, want_end) \
     : L->n == W ? ssm__cu_tc_go<W, TR_, BF_, 0>(L, T1, Lc, nc, A, aos, b, h, h0, X, P, E, o, lvws, phase, want_end) \
                 : ssm__cu_tc_go<W, TR_, BF_, 1>(L, T1, Lc, nc, A, aos, b, h, h0, X, P, E, o, lvws, phase, want_end))
    if (bf == 2) return tr ? SSM__TC_GO(1, 2) : SSM__TC_GO(0, 2);
    if (bf) return tr ? SSM__TC_GO(1, 1) : SSM__TC_GO(0, 1);
    return tr ? SSM__TC_GO(1, 0) : SSM__TC_GO(0, 0);
#undef SSM__TC_GO
}

/* Steps 1..T-1 from h_0 (already in h) on tensor cores; Lc steps per chunk. The caller's
   output view `out` (when set) is written too: its copy from the f32 work buffer is skipped.
   levels: the carries by the plan's level method (cyclic reduction or Blelloch) instead of the
   sequential carry kernels. phase, want_end: ssm__cu_tc_go's (0: the whole solve). */
static ssm_result ssm__cu_lr_chunked_tc(ssm__cu_lr *L, int64_t T, ssm_seq_view A, ssm_seq_view b, ssm_seq_view h,
                                        int64_t Lc, ssm_seq_view out, int *out_written, char *ws, int levels,
                                        int phase, int want_end) {
    const int64_t W = ssm__cu_tc_w(L->n);
    int64_t T1 = T - 1, nc, aos;
    ssm__cu_rv Av, bv, hv, h0, ov;
    float *X, *P, *E;
    char *lvws = levels ? ws + ssm__cu_tc_scratch_bytes(L->S, T, Lc, L->n) : NULL; /* the carries' level scratch */
    int tr = A.cs != 1, bf = A.dtype.bits == 32 ? 2 : A.dtype.code == SSM_DTYPE_BFLOAT;
    if (T1 <= 0) return SSM_OK;
    if (Lc > T1) Lc = T1;
    if (Lc > SSM__TC_LMAX) Lc = SSM__TC_LMAX; /* a performance hint only: results do not depend on it */
    nc = (T1 + Lc - 1) / Lc;
    if (nc > 2147483647) return ssm__cu_lr_sequential(L, T, A, b, h, out, out_written);
    aos = tr ? A.cs : A.rs;
    P = (float *)ws;
    E = P + L->S * (nc - 1) * W * W;
    X = E + L->S * (nc - 1) * W;
    Av = ssm__cu_rv_of(A, 1, Lc), bv = ssm__cu_rv_of(b, 1, Lc), hv = ssm__cu_rv_of(h, 1, Lc), h0 = ssm__cu_rv_of(h, 0, 0);
    if (phase != 1) { /* counted once a call */
        L->st->mat_mat += L->S * (nc - 1) * Lc;
        L->st->mat_state += L->S * T1 * 2 + L->S * (nc - 1);
    }
    if (out.ptr) ov = ssm__cu_rv_of(out, 1, Lc), *out_written = 1;
    else memset(&ov, 0, sizeof ov);
    if (W == SSM__TC_NS)
        return ssm__cu_tc_run<SSM__TC_NS>(L, tr, bf, T1, (int)Lc, nc, Av, aos, bv, hv, h0, X, P, E, ov, lvws, phase, want_end);
    if (W == SSM__TC_N)
        return ssm__cu_tc_run<SSM__TC_N>(L, tr, bf, T1, (int)Lc, nc, Av, aos, bv, hv, h0, X, P, E, ov, lvws, phase, want_end);
    return ssm__cu_tc_run<SSM__TC_NMAX>(L, tr, bf, T1, (int)Lc, nc, Av, aos, bv, hv, h0, X, P, E, ov, lvws, phase, want_end);
}

/* ---- matrix states on tensor cores: the fused recurrence for m >= 8 -------------------------
   ssm__cu_rec_kernel's contract (chunk c of sequence s from init, steps 0..len-1; with P the
   chunk product P = A_{len-1} ... A_0) for states of m >= 8 columns, on mma.sync. The state is
   kept transposed as pass 1 keeps its product, H^T <- H^T A_u^T + b_u^T: 16 state columns are
   an MMA A operand that stays in registers from step to step (the f32 accumulator fragment of
   one step is the hi / lo 16-bit fragment pair of the next, so the state keeps ~f32 accuracy;
   f32 A: 3xTF32), and A_u^T is the B operand, read from a cp.async ring of tiles
   (ssm__tc_prod_step). State columns are independent: a warp owns 16, a CTA SSM__TCM_WARPS
   warps, and grid z covers the m columns of h, then (with P) the n columns of P^T, which start
   from the identity and take no b. A step is a few hundred instructions a warp and one warp a
   scheduler runs it latency-bound (ncu, d9b5258: 1226 instructions a step at 24 cycles each
   when b and h went element by element through global memory), so the per-step I/O is kept
   short: b_u (16-bit, rows contiguous and 16-byte aligned) arrives in the same cp.async ring as
   A_u (f32 b: a step ahead into registers, as the ring would cost a CTA an SM), h_u (f32, rows contiguous) goes through a per-warp shared-memory stage as 16-byte
   stores, and with P (the chunked method's pass 1, whose states only the chunk's end is read
   of) only the last step is stored. Other layouts load and store element by element. */
#define SSM__TCM_WARPS 4
template <int W, int BF> struct ssm__tcm { /* the kernel's shared memory */
    typedef ssm__tcg<W, BF> G;
    /* ring depth, A and b tiles. A step is microseconds of latency-bound MMAs, so two tiles cover a
       load, and at 16-bit W = 64 a ring of 2 is 57 KB: four CTAs an SM instead of two (H200, chunked
       chunk 64, f16 S32 T1024 n = m = 64: 1.03 -> 0.78 ms; f32 unchanged within noise, not profiled;
       bench/results/cuda_tcm_ring_018c557.log) */
    static constexpr int NST = W == 128 ? 3 : W == 64 && !G::F32 ? 2 : 4;
    static constexpr int CW = 16 * SSM__TCM_WARPS; /* state columns a CTA */
    static constexpr int LDB = CW + 8;             /* a 16-bit b tile's row: conflict-free column reads */
    static constexpr int LDH = 20;                 /* a warp's h stage row (floats): conflict-free stores */
    template <int TR> static constexpr size_t smem() {
        return (size_t)NST * W * G::template ld<1, TR>() * sizeof(typename G::E) + (G::F32 ? 0 : (size_t)NST * W * LDB * 2) +
               (size_t)SSM__TCM_WARPS * W * LDH * 4;
    }
};
template <int BF> __device__ __forceinline__ float ssm__tcm_f(unsigned short v) {
    return BF ? __bfloat162float(__ushort_as_bfloat16(v)) : __half2float(__ushort_as_half(v));
}
/* fast: 1 = b by the ring (16-bit), 2 = h by the stage. o (p NULL: none) takes the states h
   takes, in its own type (the caller's 16-bit view beside the f32 work buffer), by the stage only
   and for 16-bit A only: the caller passes one where h and o both take it (ssm__cu_rec_out). An
   element path for o in the step loop made the n = 32 f32 and f16 kernels (those measured)
   1.3-2x slower, o or not (its addresses hoisted), and o's vector stores in the f32 kernels
   7-12% slower, o or not (bench/results/cuda_mmtc_out_s52.log). */
template <int W, int TR, int BF, int PAD>
__global__ void __launch_bounds__(32 * SSM__TCM_WARPS) ssm__cu_tcm_kernel(int64_t s0, int64_t T, int64_t Lc, int skip_last,
                                                                         int n, int m, ssm__cu_rv A, int64_t aos,
                                                                         ssm__cu_rv b, ssm__cu_rv h, ssm__cu_rv o,
                                                                         ssm__cu_rv init, float *P, int64_t nchunks, int fast) {
    extern __shared__ __align__(16) unsigned char ssm__tm_sm[];
    typedef ssm__tcg<W, BF> G;
    typedef ssm__tcm<W, BF> M;
    typedef typename G::E Et;
    constexpr int NW = SSM__TCM_WARPS, NT = 32 * NW, NST = M::NST, CW = M::CW, LDB = M::LDB, LDH = M::LDH;
    constexpr int NKLO = !PAD ? W / 16 : W == 128 ? 5 : 1; /* k-slabs inside n: n >= 72 at W = 128 */
    constexpr int LD = G::template ld<1, TR>(), TILE = W * LD, KS = G::F32 ? 1 : W / 16, KQ = G::F32 ? W / 8 : 1;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, lr = lane >> 2, lc = 2 * (lane & 3);
    Et *As = (Et *)ssm__tm_sm;
    unsigned short *Bs = (unsigned short *)(As + NST * TILE);
    float *Hs = (float *)(Bs + (G::F32 ? 0 : NST * W * LDB)) + warp * W * LDH;
    const int64_t c = blockIdx.x, s = s0 + blockIdx.y;
    int64_t len64 = T - c * Lc;
    if (len64 > Lc) len64 = Lc;
    if (skip_last) --len64;
    if (len64 <= 0) return;
    const int len = (int)len64, hb = (m + 15) >> 4, nb = hb + (P ? (n + 15) >> 4 : 0);
    const int rb = (int)blockIdx.z * NW + warp, mbn = rb < nb, isH = rb < hb; /* this warp's 16-column block */
    const int cj0 = (int)blockIdx.z * CW, jw = 16 * rb, nk = PAD ? (n + 15) >> 4 : W / 16;
    const int bvec = !G::F32 && (fast & 1) && cj0 < m, hvec = fast & 2, bw = min(CW, m - cj0); /* bw: b columns here */
    const Et *Ag = (const Et *)A.p;
    const unsigned short *Bg = (const unsigned short *)b.p;
    const int64_t abase = A.off + s * A.ss + c * A.chs, bbase = b.off + s * b.ss + c * b.chs;
    const int64_t hbase = h.off + s * h.ss + c * h.chs;
    float acc[1][W / 8][4], bn[G::F32 ? W / 8 : 1][4]; /* bn: f32 b_u, loaded a step ahead */
    float q[1][KQ][4];                      /* f32: the old state */
    unsigned af[1][KS][4], al[1][KS][4];   /* 16-bit: its hi / lo fragments */
    /* f32 b (of A's type): element (t, z) of b_u into bn, zero past n and m */
    auto load_bn = [&](int u) {
        if constexpr (G::F32) {
#pragma unroll
            for (int t = 0; t < W / 8; ++t)
#pragma unroll
                for (int z = 0; z < 4; ++z) {
                    const int i = 8 * t + lc + (z & 1), j = jw + lr + 8 * (z >> 1);
                    bn[t][z] = i < n && j < m ? ((const float *)b.p)[bbase + u * b.ts + i * b.rs + j * b.cs] : 0.f;
                }
        } else (void)u;
    };
    /* tile u of A and (bvec) rows < n, columns [cj0, cj0 + bw) of b_u; zero past them, set once below */
    auto load = [&](int u) {
        ssm__tc_load_tile<W, NT, 0, PAD, LD>(As + (u % NST) * TILE, Ag + abase + u * A.ts, aos, n, tid);
        if (bvec) {
            unsigned short *dst = Bs + (u % NST) * W * LDB;
            constexpr int CPR = CW / 8; /* 16-byte chunks a row */
#pragma unroll
            for (int k = 0; k < (W * CPR + NT - 1) / NT; ++k) {
                const int id = tid + NT * k, r = id / CPR, c8 = (id % CPR) * 8;
                if (r < n && c8 < bw) ssm__tc_cp16(dst + r * LDB + c8, Bg + bbase + u * b.ts + r * b.rs + cj0 + c8);
            }
        }
    };
    if (PAD || bvec) /* the rings' zeros (A's, then b's: contiguous), before any copy */
        ssm__tc_zero_ring<1>((unsigned short *)As, NST * TILE * (int)sizeof(Et) / 2 + (bvec ? NST * W * LDB : 0), tid, NT);
#pragma unroll
    for (int u = 0; u < NST - 1; ++u) {
        if (u < len) load(u);
        ssm__tc_commit();
    }
    /* the state's element (t, z): state column row0 + lr + 8 (z >> 1) (of h, or of P), row 8 t + lc + (z & 1) */
    {
        const int row0 = isH ? jw : 16 * (rb - hb);
        if (!isH) ssm__tc_eye<W>(acc[0], row0, lane);
        else
#pragma unroll
            for (int t = 0; t < W / 8; ++t)
#pragma unroll
                for (int z = 0; z < 4; ++z) {
                    const int i = 8 * t + lc + (z & 1), j = row0 + lr + 8 * (z >> 1);
                    acc[0][t][z] = init.p && i < n && j < m ? ssm__cu_ld(init.p, init.dt, init.off + s * init.ss + c * init.chs +
                                                                                            i * init.rs + j * init.cs)
                                                            : 0.f;
                }
    }
    if (isH) load_bn(0);
    for (int u = 0; u < len; ++u) {
        ssm__tc_wait<NST - 2>();
        __syncthreads();
        if (u + NST - 1 < len) load(u + NST - 1);
        ssm__tc_commit();
        if (!mbn) continue; /* a warp past the columns only loads tiles */
        const Et *At = As + (u % NST) * TILE;
        ssm__tc_with<NKLO, W / 16>(nk, [&](auto K) {
            if constexpr (G::F32) ssm__tc_prod_step32<W, TR, 1, decltype(K)::value, LD>(acc, q, At, lane, 1);
            else ssm__tc_prod_step<W, TR, BF, 1, decltype(K)::value, 1>(acc, af, al, At, lane, 1);
        });
        if (!isH) continue;
        const unsigned short *bt = Bs + (u % NST) * W * LDB;
        const bool store = !P || u == len - 1; /* with P only the chunk's end is read */
        if (hvec && store) __syncwarp(); /* the last step's stage read */
#pragma unroll
        for (int t = 0; t < W / 8; ++t)
#pragma unroll
            for (int z = 0; z < 4; ++z) {
                const int i = 8 * t + lc + (z & 1), jl = lr + 8 * (z >> 1), j = jw + jl;
                if (bvec) acc[0][t][z] += ssm__tcm_f<BF>(bt[i * LDB + j - cj0]); /* zero past n and m */
                else if (G::F32) acc[0][t][z] += bn[G::F32 ? t : 0][z];
                else if (i < n && j < m) acc[0][t][z] += ssm__cu_ld(b.p, b.dt, bbase + u * b.ts + i * b.rs + j * b.cs);
                if (!store) continue;
                if (hvec) Hs[i * LDH + jl] = acc[0][t][z];
                else if (i < n && j < m) ssm__cu_stv(h.p, h.dt, hbase + u * h.ts + i * h.rs + j * h.cs, acc[0][t][z]);
            }
        if (hvec && store) { /* rows < n, the warp's columns < m (m % 4 == 0), 4 elements a store */
            __syncwarp();
            const int hw = min(16, m - jw);
            if constexpr (G::F32) { /* h f32 (no work buffer, no o): 16-byte stores */
                float *hg = (float *)h.p + hbase + u * h.ts + jw;
                for (int f = lane; f < 4 * n; f += 32) {
                    const int r = f >> 2, c4 = 4 * (f & 3);
                    if (c4 < hw) *(float4 *)(hg + r * h.rs + c4) = *(const float4 *)(Hs + r * LDH + c4);
                }
            } else {
                const int64_t hr = hbase + u * h.ts + jw, orow = o.off + s * o.ss + c * o.chs + u * o.ts + jw;
                for (int f = lane; f < 4 * n; f += 32) {
                    const int r = f >> 2, c4 = 4 * (f & 3);
                    if (c4 >= hw) continue;
                    const float4 v = *(const float4 *)(Hs + r * LDH + c4);
                    ssm__cu_st4(h.p, h.dt, hr + r * h.rs + c4, v);
                    if (o.p) ssm__cu_st4(o.p, o.dt, orow + r * o.rs + c4, v);
                }
            }
        }
        if (u + 1 < len) load_bn(u + 1); /* its latency behind the next step's MMAs */
    }
    if (P && mbn && !isH) { /* P = (P^T)^T, [n][n] row-major per chunk */
        float *dst = P + (s * nchunks + c) * (int64_t)n * n;
#pragma unroll
        for (int t = 0; t < W / 8; ++t)
#pragma unroll
            for (int z = 0; z < 4; ++z) {
                const int i = 8 * t + lc + (z & 1), j = 16 * (rb - hb) + lr + 8 * (z >> 1);
                if (i < n && j < n) dst[(int64_t)i * n + j] = acc[0][t][z];
            }
    }
}
/* The matrix-state shapes (the plan's choice of method, before the views are known). */
static int ssm__cu_tcm_shape(ssm_dtype dt, int64_t n, int64_t m) {
    return m >= 8 && m <= 65535 * 16 && n >= 8 &&
           ((dt.bits == 16 && n % 8 == 0 && n <= SSM__TC_NMAX) || (dt.bits == 32 && n % 4 == 0 && n <= SSM__TC_N));
}
/* 1 when the matrix-state kernel takes a ssm__cu_rec_launch: m >= 8 (narrower states leave
   most of a 16-column block idle), unless linrec_mat = 1; 16-bit A with n a multiple of 8 up to
   128, or f32 A with n a multiple of 4 up to 64; rows (or columns: the adjoint's transposed
   view) of A contiguous, 16-byte aligned, at 16-byte multiples apart in every direction; b of
   A's type. */
static int ssm__cu_tcm_fits(const ssm__cu_lr *L, const ssm__cu_rv &A, const ssm__cu_rv &b) {
    const int f32 = A.dt == 0;
    const int64_t al = f32 ? 3 : 7, n = L->n, os = A.cs == 1 ? A.rs : A.rs == 1 ? A.cs : 0;
    const ssm__cu_state *cs = ssm__cu_st(L->ctx);
    size_t smem;
    if (cs->knobs.linrec_mat == 1 || (A.dt != 0 && A.dt != 1 && A.dt != 2) || b.dt != A.dt ||
        !ssm__cu_tcm_shape(f32 ? SSM_F32 : SSM_F16, n, L->m))
        return 0;
    if (!os || ((uintptr_t)A.p & 15) || (A.off & al) || (A.ts & al) || (A.ss & al) || (A.chs & al) || (os & al)) return 0;
    const int w = ssm__cu_tc_w(n), tr = A.cs != 1; /* tr: the f32 tiles' layout follows A's */
    if (f32 && w == SSM__TC_NS) smem = tr ? ssm__tcm<SSM__TC_NS, 2>::smem<1>() : ssm__tcm<SSM__TC_NS, 2>::smem<0>();
    else if (f32) smem = tr ? ssm__tcm<SSM__TC_N, 2>::smem<1>() : ssm__tcm<SSM__TC_N, 2>::smem<0>(); /* n <= SSM__TC_N */
    else if (w == SSM__TC_NS) smem = ssm__tcm<SSM__TC_NS, 0>::smem<0>();
    else if (w == SSM__TC_N) smem = ssm__tcm<SSM__TC_N, 0>::smem<0>();
    else smem = ssm__tcm<SSM__TC_NMAX, 0>::smem<0>();
    return smem <= cs->smem_optin;
}
/* The kernel's fast paths for these views: b rows contiguous, 16-byte aligned everywhere (16-bit;
   m % 8); h with rows contiguous, a vector of 4 aligned everywhere (m % 4). */
static int ssm__cu_tcm_fast(const ssm__cu_lr *L, const ssm__cu_rv &b, const ssm__cu_rv &h) {
    const int bv = b.dt != 0 && b.cs == 1 && !((uintptr_t)b.p & 15) && !((b.off | b.ts | b.rs | b.ss | b.chs) & 7) && !(L->m & 7);
    return bv | 2 * ssm__cu_tcm_v4(L, h);
}
template <int W, int TR, int BF, int PAD>
static ssm_result ssm__cu_tcm_go(ssm__cu_lr *L, int64_t nchunks, int64_t T, int64_t Lc, int skip_last, ssm__cu_rv A,
                                 int64_t aos, ssm__cu_rv b, ssm__cu_rv h, ssm__cu_rv o, ssm__cu_rv init, float *P) {
    const size_t smem = ssm__tcm<W, BF>::template smem<TR>();
    const int64_t nb = (L->m + 15) / 16 + (P ? (L->n + 15) / 16 : 0);
    const int fast = ssm__cu_tcm_fast(L, b, h);
    cudaError_t e = ssm__cu_smem_allow((const void *)ssm__cu_tcm_kernel<W, TR, BF, PAD>, smem, ssm__cu_st(L->ctx)->smem_optin);
    if (e != cudaSuccess)
        return ssm_ctx_error(L->ctx, SSM_ERROR_BACKEND, "CUDA: cudaFuncSetAttribute(%zu bytes smem): %s", smem, cudaGetErrorString(e));
    for (int64_t s0 = 0; s0 < L->S; s0 += 65535) { /* grid y stops at 65535 sequences a launch */
        dim3 grid((unsigned)nchunks, SSM__CU_GRID_Y(L->S - s0), (unsigned)((nb + SSM__TCM_WARPS - 1) / SSM__TCM_WARPS));
        ssm__cu_tcm_kernel<W, TR, BF, PAD><<<grid, 32 * SSM__TCM_WARPS, smem, ssm__cu_st(L->ctx)->stream>>>(
            s0, T, Lc, skip_last, (int)L->n, (int)L->m, A, aos, b, h, o, init, P, nchunks, fast);
        SSM__CU_LAUNCHED(L->ctx, "ssm__cu_tcm_kernel");
    }
    return SSM_OK;
}
/* ssm__cu_rec_launch's tensor-core form (the caller checked ssm__cu_tcm_fits). */
static ssm_result ssm__cu_tcm_launch(ssm__cu_lr *L, int64_t nchunks, int64_t T, int64_t Lc, int skip_last, ssm__cu_rv A,
                                     ssm__cu_rv b, ssm__cu_rv h, ssm__cu_rv o, ssm__cu_rv init, float *P) {
    const int w = ssm__cu_tc_w(L->n), tr = A.cs != 1, pad = L->n != w, bf = A.dt == 0 ? 2 : A.dt == 2;
    const int64_t aos = tr ? A.cs : A.rs;
#define SSM__TCM_GO(W_, TR_, BF_)                                                                         \
    (pad ? ssm__cu_tcm_go<W_, TR_, BF_, 1>(L, nchunks, T, Lc, skip_last, A, aos, b, h, o, init, P)         \
         : ssm__cu_tcm_go<W_, TR_, BF_, 0>(L, nchunks, T, Lc, skip_last, A, aos, b, h, o, init, P))
#define SSM__TCM_W(W_)                                                                                    \
    (bf == 0 ? (tr ? SSM__TCM_GO(W_, 1, 0) : SSM__TCM_GO(W_, 0, 0))                                       \
             : tr ? SSM__TCM_GO(W_, 1, 1) : SSM__TCM_GO(W_, 0, 1))
    if (bf == 2) {
        if (w == SSM__TC_NS) return tr ? SSM__TCM_GO(SSM__TC_NS, 1, 2) : SSM__TCM_GO(SSM__TC_NS, 0, 2);
        return tr ? SSM__TCM_GO(SSM__TC_N, 1, 2) : SSM__TCM_GO(SSM__TC_N, 0, 2);
    }
    if (w == SSM__TC_NS) return SSM__TCM_W(SSM__TC_NS);
    if (w == SSM__TC_N) return SSM__TCM_W(SSM__TC_N);
    return SSM__TCM_W(SSM__TC_NMAX);
#undef SSM__TCM_W
#undef SSM__TCM_GO
}

/* ---- Hillis-Steele scan, one fused kernel per level ----------------------------------------
   Level d (d = 1, 2, 4, ... < T) over every t >= d of every sequence, in one pass:
   v'_t = M_t v_{t-d} + v_t and, where a later level reads it, M'_t = M_t M_{t-d}; the few
   slots t < d that later levels read but whose buffer is stale are copied in the same launch
   (double-buffered as ssm.h's generic method; buffer B_d after level d holds final values for
   t <= 2d, so a level copies only (d/2, d] of M and [d/2, d) of v). The first level reads A
   straight from its view (no copy into scratch); v runs in f32 (the work buffer and one f32
   scratch, started so that the last level lands in h).
   16-bit inputs: M is kept in the input type (as torch.matmul keeps it), products on mma.sync
   m16n8k16 with f32 accumulation; one task (t, sequence) is NP/16 warps (NP = n padded to 16,
   each warp a 16-row stripe with its A fragments in registers for all k), 128 threads a CTA
   (tasks per CTA = 4 / warps per task, at least 1), persistent CTAs over all tasks. The right
   operand [M_{t-d} | v_{t-d} hi, lo] sits in one shared tile: v in f32 is split into a 16-bit
   head and its rounding residual, both multiplied into the same accumulator (so v keeps ~f32
   accuracy through the levels). Operand tiles arrive by cp.async (16-byte rows) or, for odd n
   and strided / transposed views, element by element.
   f32 inputs: M in f32, products on FMAs with cyclic reduction's shared-memory tile helpers. */
#define SSM__HS_MAXN 128
typedef struct ssm__hs_args {
    ssm__cu_rv Mc, Mn, vc, vn; /* M in and out (Mn compact [S][T][n][n]); v in and out */
    int64_t S, T, d, t0, ntask; /* tasks: t = t0 .. T-1 of every sequence */
    int64_t step;               /* tasks t = t0 + j step (1: Hillis-Steele; 2d: Blelloch) */
    int n, m, MP, vec, next;    /* MP: m padded to 8; vec: Mc rows by 16-byte cp.async; next: a level follows */
    int mode;                   /* 0 Hillis-Steele level, 1 Blelloch up-sweep, 2 Blelloch down-sweep */
    int vv;                     /* v in and out f32 rows of 16-byte pieces (ssm__hs_vv): vector loads and stores */
    int mcompact;               /* Mn indexed by the task's rank in its level (cyclic reduction's compacted levels) */
    int tr;                     /* (with vec) Mc transposed (rs == 1): tiles staged as stored, M_t's fragments by
                                   ldmatrix.trans, and M'_t^T = M_{t-d}^T M_t^T written (Mn read transposed) */
    int trn;                    /* (with tr) M'_t written in M's own orientation instead (element by element): Hillis-
                                   Steele's first level, whose later levels (the chains) run untransposed */
    ssm__cu_rv vo;              /* (with vv; p NULL: none) the caller's view, its rows in vectors as ssm__hs_v4_ok
                                   checks: v_{t-d} and v'_t written there too */
    ssm__cu_rv vb;              /* (p NULL: none; with vv, rows as ssm__hs_v4_ok checks) b itself, on the first levels
                                   of cyclic reduction and Blelloch (d = 1, 16-bit A): the addends v_t read there */
    int vbs;                    /* (with vb) the staged v_{t-d} read there too where t - d >= 1 (the up-sweep):
                                   b's slots t >= 1 are not copied into the f32 work buffer first */
    int vbc;                    /* (with vb, vbs and vv) b's rows are 16-bit, m % 8 == 0 and 16-byte aligned: a staged
                                   v_{t-d} from b arrives by cp.async beside M, its 16-bit columns side by side (no
                                   lo parts), and its products go 16 columns at a time */
} ssm__hs_args;
/* 1 when v in and out are f32 with unit column stride, m % 4 == 0 and every offset and stride a
   multiple of 4 floats from a 16-byte aligned base (float4 staging, float2 read-add-store). */
static int ssm__hs_vv(const ssm__cu_rv &vc, const ssm__cu_rv &vn, int64_t m) {
    const ssm__cu_rv *v[2] = {&vc, &vn};
    if (m % 4) return 0;
    for (int k = 0; k < 2; ++k)
        if (v[k]->dt != 0 || v[k]->cs != 1 || (v[k]->rs | v[k]->ts | v[k]->ss | v[k]->off) & 3 || ((uintptr_t)v[k]->p & 15))
            return 0;
    return 1;
}
/* 1 when a view's rows take the task kernel's vector loads and stores (16-byte f32 / 8-byte 16-bit
   pieces of unit-stride rows; with ssm__hs_vv, m % 4 == 0) */
static int ssm__hs_v4_ok(const ssm__cu_rv &o) {
    return o.cs == 1 && ssm__cu_v4_at(o, o.off | o.ts | o.ss, o.rs); /* every step and sequence start */
}
/* the view of the transposes (rows and columns swapped) */
static ssm__cu_rv ssm__cu_rv_tr(ssm__cu_rv v) {
    const int64_t r = v.rs;
    v.rs = v.cs, v.cs = r;
    return v;
}
/* 1 when the 16-bit rows of M (n columns; or of b, m columns) come by 16-byte cp.async: unit column
   stride, n % 8 == 0, offsets and strides multiples of 8 elements from a 16-byte aligned base. */
static int ssm__hs_mvec(const ssm__cu_rv &M, int bits, int64_t n) {
    return bits == 16 && M.cs == 1 && !(n & 7) && !((M.rs | M.ts | M.ss | M.off) & 7) && !((uintptr_t)M.p & 15);
}
/* 1 when M is transposed (the adjoint's A^T: columns of storage along its rows) and its rows of
   storage take those loads: the task kernel stages it as stored (ssm__hs_args.tr) */
static int ssm__hs_mtr(const ssm__cu_rv &M, int bits, int64_t n) { return M.cs != 1 && ssm__hs_mvec(ssm__cu_rv_tr(M), bits, n); }

/* which parts task t does at level d (see above) */
__device__ __forceinline__ void ssm__hs_roles(const ssm__hs_args &a, int64_t t, int &doV, int &cpV, int &doM, int &cpM) {
    const int64_t d = a.d, mlo = d <= 2 ? 1 : d / 2 + 1;
    const int needM = a.next && (t >= 2 * d || t < a.T - 2 * d);
    if (a.mode) { /* Blelloch, in place: every task absorbs t - d; the up-sweep's product where its span does not start at 0 */
        doV = 1, cpV = 0, cpM = 0;
        doM = a.mode == 1 && t >= 2 * d;
        return;
    }
    doV = t >= d;
    cpV = !doV && t >= d / 2;
    doM = needM && t >= d + 1;
    cpM = needM && !doM && t >= mlo && t <= d;
}

/* state columns (of MP) the task kernel stages at a time: at NP = 128 a 128-column state goes in 64-column
   blocks, so that two CTAs fit an SM (102 KB each instead of 135 KB) and one stages while the other
   multiplies; one such CTA an SM was latency-bound (ncu: tensor pipe 11-15%, DRAM 29-39%,
   bench/results/cuda_mat_cr_prof_c9470ff.log) */
__host__ __device__ constexpr int ssm__hs_vw(int NP, int64_t MP) {
    const int w = NP == 128 ? 64 : 128;
    return MP < w ? (int)MP : w;
}
template <int NP> struct ssm__hs_cfg {
    static constexpr int WPT = NP / 16;                  /* warps per task */
    static constexpr int TPC = WPT >= 4 ? 1 : 4 / WPT;   /* tasks per CTA */
    static constexpr int NT = 32 * WPT * TPC;
    static constexpr int LDA = NP + 8;                   /* halfs; (LDA / 8) odd: conflict-free ldmatrix */
    static constexpr int MINB = NP == 128 ? 2 : 4;       /* CTAs an SM (see ssm__hs_vw; 4 x 128 threads below) */
};
static size_t ssm__hs_tc_smem(int NP, int64_t m) {
    const int64_t MP = (m + 7) / 8 * 8, WPT = NP / 16, TPC = WPT >= 4 ? 1 : 4 / WPT, vw = ssm__hs_vw(NP, MP);
    return (size_t)TPC * NP * ((NP + 8) + (NP + 2 * vw + 8)) * 2;
}

/* one step's n x m state in a view: element (i, j) at o + i rs + j cs of p */
struct ssm__hs_step {
    const void *p;
    int dt;
    int64_t o, rs, cs;
};
__device__ __forceinline__ ssm__hs_step ssm__hs_step_of(const ssm__cu_rv &v, int64_t s, int64_t t) {
    ssm__hs_step r;
    r.p = v.p, r.dt = v.dt, r.o = v.off + s * v.ss + t * v.ts, r.rs = v.rs, r.cs = v.cs;
    return r;
}
/* v'_t = M_t v_{t-d} + v_t element by element for the state's 8-column blocks q0 .. q1 - 1: this
   warp's 16 rows (fragments af) times their hi / lo columns staged from column col0 of the tile
   (bl: this lane's ldmatrix base, ld its row stride; lo: the lo parts are not all 0), v_t read
   from add, v'_t written at vnt in vn. */
template <int BF, int NP>
__device__ __forceinline__ void ssm__hs_v_out(const ssm__hs_args &a, const unsigned (*af)[4], const unsigned short *bl, int ld, int col0,
                                              int q0, int q1, const ssm__hs_step &add, int64_t vnt, int r0, int c2, int lo) {
    for (int q = q0; q < q1; ++q) {
        float c[4];
        ssm__tc_rows8<BF, NP>(c, af, bl, ld, col0 + 16 * (q - q0), lo);
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int i = r0 + 8 * (e >> 1), j = 8 * q + c2 + (e & 1);
            if (i < a.n && j < a.m)
                ssm__cu_stv(a.vn.p, a.vn.dt, vnt + i * a.vn.rs + j * a.vn.cs, c[e] + ssm__cu_ld(add.p, add.dt, add.o + i * add.rs + j * add.cs));
        }
    }
}

/* Stages columns c0 .. c0 + cw - 1 of v_{t-d} (read from stg) as 16-bit hi / lo parts into the
   tile's state part: column c0 + j at NP + 16 (j >> 3) + (j & 7), its lo 8 further. With vo,
   v_{t-d} is final and its step vot in the caller's view gets a copy. */
template <int NP, int BF>
__device__ __forceinline__ void ssm__hs_stage_v(const ssm__hs_args &a, const ssm__hs_step &stg, unsigned short *Bs, int LDB, int tt,
                                                int tn, int c0, int cw, int64_t vot) {
    const int n = a.n, w = (c0 + cw < a.m ? c0 + cw : a.m) - c0;
    if (a.vv) { /* four rows' pieces in flight a thread, then their hi / lo halves as 8-byte stores */
        const int q4 = w / 4, cnt = n * q4; /* m % 4 == 0, c0 % 8 == 0 */
        for (int e0 = tt; e0 < cnt; e0 += 4 * tn) {
            float4 x[4];
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                const int e = e0 + k * tn, i = e / q4;
                if (e < cnt) x[k] = ssm__cu_ld4(stg.p, stg.dt, stg.o + i * stg.rs + c0 + 4 * (e - i * q4));
            }
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                const int e = e0 + k * tn, i = e / q4, j = 4 * (e - i * q4), col = NP + 16 * (j >> 3) + (j & 7);
                if (e >= cnt) continue;
                if (a.vo.p) ssm__cu_st4(a.vo.p, a.vo.dt, vot + i * a.vo.rs + c0 + j, x[k]);
                unsigned h0, l0, h1, l1;
                ssm__tc_split<BF>(x[k].x, x[k].y, &h0, &l0);
                ssm__tc_split<BF>(x[k].z, x[k].w, &h1, &l1);
                *(uint2 *)(Bs + i * LDB + col) = make_uint2(h0, h1);
                *(uint2 *)(Bs + i * LDB + col + 8) = make_uint2(l0, l1);
            }
        }
    } else
        for (int e = tt; e < n * w; e += tn) {
            const int i = e / w, j = e - i * w, col = NP + 16 * (j >> 3) + (j & 7);
            const float x = ssm__cu_ld(stg.p, stg.dt, stg.o + i * stg.rs + (c0 + j) * stg.cs);
            unsigned hi, lo;
            ssm__tc_split<BF>(x, 0.f, &hi, &lo);
            Bs[i * LDB + col] = (unsigned short)(hi & 0xffff);
            Bs[i * LDB + col + 8] = (unsigned short)(lo & 0xffff);
        }
}

template <int NP, int BF>
__global__ void __launch_bounds__(ssm__hs_cfg<NP>::NT, ssm__hs_cfg<NP>::MINB) ssm__cu_hs_tc_kernel(ssm__hs_args a) {
    typedef ssm__hs_cfg<NP> C;
    extern __shared__ __align__(16) unsigned short ssm__hs_sm[];
    const int n = a.n, m = a.m, vw = ssm__hs_vw(NP, a.MP), LDB = NP + 2 * vw + 8, per = NP * C::LDA + NP * LDB;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, slot = warp / C::WPT, wt = warp % C::WPT;
    const int tt = threadIdx.x - slot * 32 * C::WPT, tn = 32 * C::WPT;
    unsigned short *As = ssm__hs_sm + slot * per, *Bs = As + NP * C::LDA;
    const unsigned short *Mc = (const unsigned short *)a.Mc.p;
    unsigned short *Mn = (unsigned short *)a.Mn.p;
    for (int e = threadIdx.x; e < C::TPC * per; e += C::NT) ssm__hs_sm[e] = 0; /* the padding stays zero */
    __syncthreads();
    const int64_t total = a.S * a.ntask;
    for (int64_t base = (int64_t)blockIdx.x * C::TPC; base < total; base += (int64_t)gridDim.x * C::TPC) {
        const int64_t task = base + slot, s = task / a.ntask, t = a.t0 + task % a.ntask * a.step;
        int doV = 0, cpV = 0, doM = 0, cpM = 0;
        if (task < total) ssm__hs_roles(a, t, doV, cpV, doM, cpM);
        const int64_t mct = a.Mc.off + s * a.Mc.ss + t * a.Mc.ts, mcp = mct - a.d * a.Mc.ts;
        const int64_t mnt = a.Mn.off + s * a.Mn.ss + (a.mcompact ? task % a.ntask : t) * a.Mn.ts;
        const int64_t vct = a.vc.off + s * a.vc.ss + t * a.vc.ts;
        const int64_t vnt = a.vn.off + s * a.vn.ss + t * a.vn.ts;
        /* v_t's addend and the staged v_{t-d}: from b itself on a first level (vb, see ssm__hs_args) */
        const ssm__hs_step add = ssm__hs_step_of(a.vb.p ? a.vb : a.vc, s, t);
        const int fromb = a.vb.p && a.vbs && t - a.d >= 1;
        const ssm__hs_step stg = ssm__hs_step_of(fromb ? a.vb : a.vc, s, t - a.d);
        const int lo = !fromb || a.vb.dt == 0;                      /* 16-bit v_{t-d}: its lo parts are 0 */
        const int vbc = doV && fromb && a.vbc;                      /* v_{t-d} by cp.async (ssm__hs_args) */
        const int64_t vot = a.vo.off + s * a.vo.ss + (t - a.d) * a.vo.ts; /* (with vo) v_{t-d}'s step there */
        if (cpM)
            for (int e = tt; e < n * n; e += tn) {
                const int i = e / n, j = e - i * n;
                Mn[mnt + e] = Mc[mct + i * a.Mc.rs + j * a.Mc.cs];
            }
        if (cpV)
            for (int e = tt; e < n * m; e += tn) {
                const int i = e / m, j = e - i * m;
                ssm__cu_stv(a.vn.p, a.vn.dt, vnt + i * a.vn.rs + j * a.vn.cs,
                            ssm__cu_ld(a.vc.p, a.vc.dt, vct + i * a.vc.rs + j * a.vc.cs));
            }
        if (doV) {
            if (a.vec) {
                const int rc = n / 8;
                const int64_t srs = a.tr ? a.Mc.cs : a.Mc.rs; /* the stride of the rows of storage */
                for (int e = tt; e < n * rc; e += tn) {
                    const int i = e / rc, c8 = (e - i * rc) * 8;
                    ssm__tc_cp16(As + i * C::LDA + c8, Mc + mct + i * srs + c8);
                    if (doM) ssm__tc_cp16(Bs + i * LDB + c8, Mc + mcp + i * srs + c8);
                }
                ssm__tc_commit();
            } else {
                for (int e = tt; e < n * n; e += tn) {
                    const int i = e / n, j = e - i * n;
                    const int64_t o = i * a.Mc.rs + j * a.Mc.cs;
                    As[i * C::LDA + j] = Mc[mct + o];
                    if (doM) Bs[i * LDB + j] = Mc[mcp + o];
                }
            }
            if (vbc) { /* b's rows into the state part as they are: columns side by side from NP */
                const unsigned short *vg = (const unsigned short *)stg.p;
                const int rc = m / 8;
                for (int e = tt; e < n * rc; e += tn) {
                    const int i = e / rc, c8 = (e - i * rc) * 8;
                    ssm__tc_cp16(Bs + i * LDB + NP + c8, vg + stg.o + i * stg.rs + c8);
                }
                ssm__tc_commit();
            } else ssm__hs_stage_v<NP, BF>(a, stg, Bs, LDB, tt, tn, 0, vw, vot);
        }
        ssm__tc_wait<0>();
        __syncthreads();
        const int g = lane >> 2, c2 = (lane & 3) * 2, r0 = 16 * wt + g;
        const unsigned short *bl = Bs + (lane & 15) * LDB + (lane >> 4) * 8;
        unsigned af[NP / 16][4];
        if (doV) {
            if (doM) {
                /* M_t M_{t-d}; transposed storage: M_{t-d}^T (in Bs) times M_t^T (in As) */
                const unsigned short *L = a.tr ? Bs : As, *R = a.tr ? As + (lane & 15) * C::LDA + (lane >> 4) * 8 : bl;
                const int ldl = a.tr ? LDB : C::LDA, ldr = a.tr ? C::LDA : LDB;
#pragma unroll
                for (int kk = 0; kk < NP / 16; ++kk) ssm__tc_ldm4(af[kk], L + (16 * wt + (lane & 15)) * ldl + 16 * kk + (lane >> 4) * 8);
                for (int p = 0; p < NP / 16; ++p) {
                    if (16 * p >= n) break;
                    float c0[4], c1[4];
                    ssm__tc_rows16<BF, NP>(c0, c1, af, R, ldr, 16 * p);
#pragma unroll
                    for (int h2 = 0; h2 < 2; ++h2) {
                        const float *c = h2 ? c1 : c0;
                        const int j = 16 * p + 8 * h2 + c2;
#pragma unroll
                        for (int rr = 0; rr < 2; ++rr) {
                            const int i = r0 + 8 * rr;
                            if (i >= n || j >= n) continue;
                            const int64_t o = mnt + (int64_t)i * n + j;
                            if (a.trn) { /* element (i, j) of M'_t^T is M'_t's (j, i) */
                                Mn[mnt + (int64_t)j * n + i] = (unsigned short)(ssm__tc_pack<BF>(c[2 * rr], 0.f) & 0xffff);
                                if (j + 1 < n) Mn[mnt + (int64_t)(j + 1) * n + i] = (unsigned short)(ssm__tc_pack<BF>(c[2 * rr + 1], 0.f) & 0xffff);
                            } else if (!(n & 1)) *(unsigned *)(Mn + o) = ssm__tc_pack<BF>(c[2 * rr], c[2 * rr + 1]);
                            else {
                                Mn[o] = (unsigned short)(ssm__tc_pack<BF>(c[2 * rr], 0.f) & 0xffff);
                                if (j + 1 < n) Mn[o + 1] = (unsigned short)(ssm__tc_pack<BF>(c[2 * rr + 1], 0.f) & 0xffff);
                            }
                        }
                    }
                }
            }
            /* M_t's fragments: ldmatrix on M_t, or ldmatrix.trans on M_t^T (matrix q of lane l: rows of
               storage (k) 8 (q >> 1) + l % 8, columns (i) 8 (q & 1)) */
            if (a.tr)
#pragma unroll
                for (int kk = 0; kk < NP / 16; ++kk)
                    ssm__tc_ldm4t(af[kk], As + (16 * kk + (lane & 7) + 8 * (lane >> 4)) * C::LDA + 16 * wt + 8 * ((lane >> 3) & 1));
            else if (!doM) /* (with doM they are already in af) */
#pragma unroll
                for (int kk = 0; kk < NP / 16; ++kk) ssm__tc_ldm4(af[kk], As + (16 * wt + (lane & 15)) * C::LDA + 16 * kk + (lane >> 4) * 8);
        }
        if (vbc) { /* 16 columns a product (ssm__tc_rows16), two products' addends loaded before them */
            float *vnf = (float *)a.vn.p;
            const int G = (m + 15) / 16;
            for (int g0 = 0; g0 < G; g0 += 2) {
                float2 ad[2][2][2];
#pragma unroll
                for (int gg = 0; gg < 2; ++gg)
#pragma unroll
                    for (int h2 = 0; h2 < 2; ++h2)
#pragma unroll
                        for (int rr = 0; rr < 2; ++rr) {
                            const int i = r0 + 8 * rr, j = 16 * (g0 + gg) + 8 * h2 + c2;
                            if (i < n && j < m) ad[gg][h2][rr] = ssm__cu_ld2(add.p, add.dt, add.o + i * add.rs + j);
                        }
#pragma unroll
                for (int gg = 0; gg < 2; ++gg) {
                    if (g0 + gg >= G) break;
                    float c0[4], c1[4];
                    ssm__tc_rows16<BF, NP>(c0, c1, af, bl, LDB, NP + 16 * (g0 + gg));
#pragma unroll
                    for (int h2 = 0; h2 < 2; ++h2)
#pragma unroll
                        for (int rr = 0; rr < 2; ++rr) {
                            const float *c = h2 ? c1 : c0;
                            const int i = r0 + 8 * rr, j = 16 * (g0 + gg) + 8 * h2 + c2; /* m % 8 == 0: j + 1 < m too */
                            if (i >= n || j >= m) continue;
                            *(float2 *)(vnf + vnt + i * a.vn.rs + j) =
                                make_float2(c[2 * rr] + ad[gg][h2][rr].x, c[2 * rr + 1] + ad[gg][h2][rr].y);
                        }
                }
            }
        }
        /* the state's column blocks (one below NP = 128): every thread meets the barriers between
           them (their count is the launch's, as are the tasks' of a CTA; with vbc, which holds for
           every task of a CTA at NP = 128, none) */
        const int nblk = vbc ? 0 : NP == 128 ? (a.MP + vw - 1) / vw : 1;
        for (int bi = 0; bi < nblk; ++bi) {
            const int c0 = bi * vw;
            if (bi) {
                __syncthreads();
                if (doV) ssm__hs_stage_v<NP, BF>(a, stg, Bs, LDB, tt, tn, c0, vw, vot);
                __syncthreads();
            }
            if (!doV) continue;
            const int q1 = (c0 + vw < a.MP ? c0 + vw : a.MP) / 8;
            if (a.vv) /* 8-column blocks four at a time: their addends (column pairs) loaded before the products */
                for (int q0 = c0 / 8; q0 < q1; q0 += 4) {
                    float *vnf = (float *)a.vn.p;
                    float2 ad[4][2];
#pragma unroll
                    for (int qq = 0; qq < 4; ++qq)
#pragma unroll
                        for (int rr = 0; rr < 2; ++rr) {
                            const int i = r0 + 8 * rr, j = 8 * (q0 + qq) + c2;
                            if (i < n && j < m) ad[qq][rr] = ssm__cu_ld2(add.p, add.dt, add.o + i * add.rs + j);
                        }
#pragma unroll
                    for (int qq = 0; qq < 4; ++qq) {
                        if (q0 + qq >= q1) break;
                        float c[4];
                        ssm__tc_rows8<BF, NP>(c, af, bl, LDB, NP + 16 * (q0 + qq - c0 / 8), lo);
#pragma unroll
                        for (int rr = 0; rr < 2; ++rr) {
                            const int i = r0 + 8 * rr, j = 8 * (q0 + qq) + c2; /* m % 4 == 0: j + 1 < m too */
                            if (i >= n || j >= m) continue;
                            const float2 r = make_float2(c[2 * rr] + ad[qq][rr].x, c[2 * rr + 1] + ad[qq][rr].y);
                            *(float2 *)(vnf + vnt + i * a.vn.rs + j) = r;
                            if (a.vo.p) ssm__cu_st2(a.vo.p, a.vo.dt, a.vo.off + s * a.vo.ss + t * a.vo.ts + i * a.vo.rs + j, r);
                        }
                    }
                }
            else ssm__hs_v_out<BF, NP>(a, af, bl, LDB, NP, c0 / 8, q1, add, vnt, r0, c2, lo);
        }
        __syncthreads();
    }
}

/* f32: a task per CTA (grid x: t, grid y: sequences), 256 threads, products as in cyclic reduction
   (TC: on the tensor cores, split: 3xTF32), or a task's H row blocks (grid z, ssm__cu_cr_h) */
template <int R, int TC, int H>
__global__ void __launch_bounds__(256, SSM__CR_MINBH(R, H)) ssm__cu_hs_fma_kernel(int64_t s0, ssm__hs_args a, int split) {
    extern __shared__ __align__(16) float ssm__cr_sm[];
    const int n = a.n, m = a.m, r0 = (int)blockIdx.z * (16 * R / H), rw = min(n - r0, 16 * R / H); /* this block's rows */
    float *As = ssm__cr_sm, *Xs = ssm__cr_sm + 16 * R * SSM__CR_LDH(R, H);
    const int64_t s = s0 + blockIdx.y, t = a.t0 + (int64_t)blockIdx.x * a.step;
    int doV, cpV, doM, cpM;
    ssm__hs_roles(a, t, doV, cpV, doM, cpM);
    if (blockIdx.z) cpV = cpM = 0; /* the copies: the first block's */
    const int64_t mct = a.Mc.off + s * a.Mc.ss + t * a.Mc.ts, mnt = a.Mn.off + s * a.Mn.ss + t * a.Mn.ts;
    const int64_t vct = a.vc.off + s * a.vc.ss + t * a.vc.ts, vnt = a.vn.off + s * a.vn.ss + t * a.vn.ts;
    if (cpM)
        for (int e = threadIdx.x; e < n * n; e += 256) {
            const int i = e / n, j = e - i * n;
            ssm__cu_stv(a.Mn.p, a.Mn.dt, mnt + i * a.Mn.rs + j * a.Mn.cs, ssm__cu_ld(a.Mc.p, a.Mc.dt, mct + i * a.Mc.rs + j * a.Mc.cs));
        }
    if (cpV)
        for (int e = threadIdx.x; e < n * m; e += 256) {
            const int i = e / m, j = e - i * m;
            ssm__cu_stv(a.vn.p, a.vn.dt, vnt + i * a.vn.rs + j * a.vn.cs, ssm__cu_ld(a.vc.p, a.vc.dt, vct + i * a.vc.rs + j * a.vc.cs));
        }
    if (!doV) return;
    float acc[R][R];
    if (TC) ssm__cu_cr_zpad<R, H, 1>(As, Xs, n);
    /* this block's rows of M_t staged once for both products (Blelloch's up-sweep overwrites them in place) */
    ssm__cu_cr_product<R, TC, H>(As, Xs, 1, a.Mc, mct + r0 * a.Mc.rs, a.vc, vct - a.d * a.vc.ts, rw, n, m, split, acc);
    ssm__cu_cr_store<R, TC, H>(acc, rw, m, a.vn, vnt + r0 * a.vn.rs, a.vc, vct + r0 * a.vc.rs);
    if (doM) {
        ssm__cu_rv none;
        none.p = NULL;
        ssm__cu_cr_product<R, TC, H>(As, Xs, 0, a.Mc, mct + r0 * a.Mc.rs, a.Mc, mct - a.d * a.Mc.ts, rw, n, n, split, acc);
        ssm__cu_cr_store<R, TC, H>(acc, rw, n, a.Mn, mnt + r0 * a.Mn.rs, none, 0);
    }
}

static int ssm__hs_np(int64_t n) { return n <= 16 ? 16 : n <= 32 ? 32 : n <= 64 ? 64 : 128; }
/* Takes n, m <= 128, f32 or 16-bit inputs, unless linrec_scan = 1 (ssm.h's generic levels). */
static int ssm__cu_hs_takes(const ssm_ctx *ctx, const ssm_linrec_plan *p) {
    const size_t optin = ssm__cu_st(ctx)->smem_optin;
    if (ssm__cu_st(ctx)->knobs.linrec_scan == 1 || p->n > SSM__HS_MAXN || p->m > SSM__HS_MAXN) return 0;
    if (p->dtype.bits == 16) return ssm__hs_tc_smem(ssm__hs_np(p->n), p->m) <= optin;
    return p->dtype.bits == 32 && ssm__cu_cr_smem(ssm__cu_cr_r(p->n, p->m)) <= optin;
}
/* two M buffers (input type) and one f32 v buffer, each [S][T][n][*] */
static size_t ssm__cu_hs_bytes(const ssm_linrec_plan *p, int blelloch) {
    size_t M = ssm__cu_szmul(ssm__cu_szmul(ssm__cu_szmul((size_t)p->dtype.bits / 8, p->group), p->T), p->n * p->n);
    size_t v = ssm__cu_szmul(ssm__cu_szmul(ssm__cu_szmul(4, p->group), p->T), p->n * p->m);
    M = M > SIZE_MAX / 4 ? SIZE_MAX / 4 : (M + 255) & ~(size_t)255;
    v = v > SIZE_MAX / 4 ? SIZE_MAX / 4 : (v + 255) & ~(size_t)255;
    if (blelloch) return M >= SIZE_MAX / 4 ? SIZE_MAX : M; /* one M buffer, v in place */
    return 2 * M + v >= SIZE_MAX / 4 ? SIZE_MAX : 2 * M + v;
}

template <int NP, int BF>
static ssm_result ssm__cu_hs_tc_launch(ssm__cu_lr *L, const ssm__hs_args &a) {
    typedef ssm__hs_cfg<NP> C;
    const size_t smem = ssm__hs_tc_smem(NP, a.m);
    const int64_t total = a.S * a.ntask, ctas = (total + C::TPC - 1) / C::TPC;
    int occ = 0;
    if (smem > 48 * 1024) {
        cudaError_t e = ssm__cu_smem_allow((const void *)ssm__cu_hs_tc_kernel<NP, BF>, smem, ssm__cu_st(L->ctx)->smem_optin);
        if (e != cudaSuccess)
            return ssm_ctx_error(L->ctx, SSM_ERROR_BACKEND, "CUDA: cudaFuncSetAttribute(%zu bytes smem): %s", smem, cudaGetErrorString(e));
    }
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, ssm__cu_hs_tc_kernel<NP, BF>, C::NT, smem);
    int64_t grid = (int64_t)(occ > 0 ? occ : 1) * ssm__cu_st(L->ctx)->sms;
    if (grid > ctas) grid = ctas;
    if (grid <= 0) return SSM_OK;
    ssm__cu_hs_tc_kernel<NP, BF><<<(unsigned)grid, C::NT, smem, ssm__cu_st(L->ctx)->stream>>>(a);
    SSM__CU_LAUNCHED(L->ctx, "ssm__cu_hs_tc_kernel");
    return SSM_OK;
}
template <int R, int TC, int H = 1>
static ssm_result ssm__cu_hs_fma_launch(ssm__cu_lr *L, const ssm__hs_args &a, int split) {
    const size_t smem = ssm__cu_cr_smem(R, H);
    if (smem > 48 * 1024) {
        cudaError_t e = cudaFuncSetAttribute(ssm__cu_hs_fma_kernel<R, TC, H>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (e != cudaSuccess)
            return ssm_ctx_error(L->ctx, SSM_ERROR_BACKEND, "CUDA: cudaFuncSetAttribute(%zu bytes smem): %s", smem, cudaGetErrorString(e));
        if (H > 1) /* a hint: the whole carveout as shared memory, so two CTAs fit an SM */
            (void)cudaFuncSetAttribute(ssm__cu_hs_fma_kernel<R, TC, H>, cudaFuncAttributePreferredSharedMemoryCarveout,
                                       cudaSharedmemCarveoutMaxShared);
    }
    for (int64_t s0 = 0; s0 < a.S; s0 += 65535) {
        dim3 grid((unsigned)a.ntask, SSM__CU_GRID_Y(a.S - s0), H);
        ssm__cu_hs_fma_kernel<R, TC, H><<<grid, 256, smem, ssm__cu_st(L->ctx)->stream>>>(s0, a, split);
        SSM__CU_LAUNCHED(L->ctx, "ssm__cu_hs_fma_kernel");
    }
    return SSM_OK;
}
static ssm_result ssm__cu_hs_level(ssm__cu_lr *L, const ssm__hs_args &a, int bf) {
    if (a.Mn.dt == 0) {
        const int R = ssm__cu_cr_r(a.n, a.m);
        int split, tc = ssm__cu_cr_on_tc(L->ctx, R, &split);
        switch (R) {
        case 1: return ssm__cu_hs_fma_launch<1, 0>(L, a, split);
        case 2: return ssm__cu_hs_fma_launch<2, 0>(L, a, split);
        case 4: return tc ? ssm__cu_hs_fma_launch<4, 1>(L, a, split) : ssm__cu_hs_fma_launch<4, 0>(L, a, split);
        default:
            if (!tc) return ssm__cu_hs_fma_launch<8, 0>(L, a, split);
            return ssm__cu_cr_h(8, tc, a.n) == 2 ? ssm__cu_hs_fma_launch<8, 1, 2>(L, a, split) : ssm__cu_hs_fma_launch<8, 1>(L, a, split);
        }
    }
    switch (ssm__hs_np(a.n) * 2 + bf) {
    case 32: return ssm__cu_hs_tc_launch<16, 0>(L, a);
    case 33: return ssm__cu_hs_tc_launch<16, 1>(L, a);
    case 64: return ssm__cu_hs_tc_launch<32, 0>(L, a);
    case 65: return ssm__cu_hs_tc_launch<32, 1>(L, a);
    case 128: return ssm__cu_hs_tc_launch<64, 0>(L, a);
    case 129: return ssm__cu_hs_tc_launch<64, 1>(L, a);
    case 256: return ssm__cu_hs_tc_launch<128, 0>(L, a);
    default: return ssm__cu_hs_tc_launch<128, 1>(L, a);
    }
}

/* The Hillis-Steele level as chains (the default for 16-bit inputs with 16-byte rows): a CTA walks
   t, t+d, t+2d, ... (SSM__HS_CHAIN tasks), so the left operand M_t of one task is the right
   operand M_{(t+d)-d} of the next and stays in shared memory: one M read per task instead of
   two, and the next task's M arrives by cp.async while this one computes (a ring of three
   tiles). One chain per CTA at a time, NP/16 warps. The slots t < d a level copies run on the
   per-task kernel above in their own launch. */
#define SSM__HS_CHAIN 8
static size_t ssm__hs_chain_smem(int NP, int64_t m) {
    const int64_t MP = (m + 7) / 8 * 8;
    return (size_t)(3 * NP * (NP + 8) + NP * (2 * MP + 8)) * 2;
}
template <int NP, int BF>
__global__ void __launch_bounds__(2 * NP) ssm__cu_hs_chain_kernel(ssm__hs_args a, int64_t nqb) {
    constexpr int NT = 2 * NP, LDA = NP + 8, TILE = NP * (NP + 8), J = SSM__HS_CHAIN;
    extern __shared__ __align__(16) unsigned short ssm__hs_sm[];
    const int n = a.n, m = a.m, LDV = 2 * a.MP + 8, rc = n / 8;
    const int tid = threadIdx.x, wt = tid >> 5, lane = tid & 31;
    unsigned short *Vs = ssm__hs_sm + 3 * TILE;
    const unsigned short *Mc = (const unsigned short *)a.Mc.p;
    unsigned short *Mn = (unsigned short *)a.Mn.p;
    for (int e = tid; e < 3 * TILE + NP * LDV; e += NT) ssm__hs_sm[e] = 0; /* the padding stays zero */
    __syncthreads();
    const int64_t d = a.d, per_s = d * nqb, units = a.S * per_s;
    for (int64_t u = blockIdx.x; u < units; u += gridDim.x) {
        const int64_t s = u / per_s, rest = u - s * per_s, qb = rest / d, r = rest - qb * d;
        const int64_t tfirst = d + r + d * (qb * J);
        if (tfirst >= a.T) continue;
        const int64_t mb = a.Mc.off + s * a.Mc.ss, mnb = a.Mn.off + s * a.Mn.ss;
        const int64_t vcb = a.vc.off + s * a.vc.ss, vnb = a.vn.off + s * a.vn.ss;
        int prv = 2, cur = 0, nxt = 1;
        for (int e = tid; e < n * rc; e += NT) {
            const int i = e / rc, c8 = (e - i * rc) * 8;
            if (tfirst - d >= 1) ssm__tc_cp16(ssm__hs_sm + prv * TILE + i * LDA + c8, Mc + mb + (tfirst - d) * a.Mc.ts + i * a.Mc.rs + c8);
            ssm__tc_cp16(ssm__hs_sm + cur * TILE + i * LDA + c8, Mc + mb + tfirst * a.Mc.ts + i * a.Mc.rs + c8);
        }
        ssm__tc_commit();
        for (int j = 0; j < J; ++j) {
            const int64_t t = tfirst + j * d;
            if (t >= a.T) break;
            if (j + 1 < J && t + d < a.T)
                for (int e = tid; e < n * rc; e += NT) {
                    const int i = e / rc, c8 = (e - i * rc) * 8;
                    ssm__tc_cp16(ssm__hs_sm + nxt * TILE + i * LDA + c8, Mc + mb + (t + d) * a.Mc.ts + i * a.Mc.rs + c8);
                }
            ssm__tc_commit();
            for (int e = tid; e < n * m; e += NT) {
                const int i = e / m, jj = e - i * m, col = 16 * (jj >> 3) + (jj & 7);
                const float x = ssm__cu_ld(a.vc.p, a.vc.dt, vcb + (t - d) * a.vc.ts + i * a.vc.rs + jj * a.vc.cs);
                unsigned hi, lo;
                ssm__tc_split<BF>(x, 0.f, &hi, &lo);
                Vs[i * LDV + col] = (unsigned short)(hi & 0xffff);
                Vs[i * LDV + col + 8] = (unsigned short)(lo & 0xffff);
            }
            ssm__tc_wait<1>();
            __syncthreads();
            const int needM = a.next && (t >= 2 * d || t < a.T - 2 * d), doM = needM && t >= d + 1;
            const unsigned short *As = ssm__hs_sm + cur * TILE, *Bp = ssm__hs_sm + prv * TILE;
            unsigned af[NP / 16][4];
            const int g = lane >> 2, c2 = (lane & 3) * 2, r0 = 16 * wt + g;
#pragma unroll
            for (int kk = 0; kk < NP / 16; ++kk) ssm__tc_ldm4(af[kk], As + (16 * wt + (lane & 15)) * LDA + 16 * kk + (lane >> 4) * 8);
            if (doM) {
                const unsigned short *bl = Bp + (lane & 15) * LDA + (lane >> 4) * 8;
                const int64_t mnt = mnb + t * a.Mn.ts;
                for (int p = 0; p < NP / 16; ++p) {
                    if (16 * p >= n) break;
                    float c0[4], c1[4];
                    ssm__tc_rows16<BF, NP>(c0, c1, af, bl, LDA, 16 * p);
#pragma unroll
                    for (int h2 = 0; h2 < 2; ++h2) {
                        const float *c = h2 ? c1 : c0;
                        const int jc = 16 * p + 8 * h2 + c2;
#pragma unroll
                        for (int rr = 0; rr < 2; ++rr) {
                            const int i = r0 + 8 * rr;
                            if (i < n && jc < n) *(unsigned *)(Mn + mnt + (int64_t)i * n + jc) = ssm__tc_pack<BF>(c[2 * rr], c[2 * rr + 1]);
                        }
                    }
                }
            }
            {
                const unsigned short *vl = Vs + (lane & 15) * LDV + (lane >> 4) * 8;
                ssm__hs_v_out<BF, NP>(a, af, vl, LDV, 0, 0, a.MP / 8, ssm__hs_step_of(a.vc, s, t), vnb + t * a.vn.ts, r0, c2, 1);
            }
            __syncthreads();
            const int o = prv;
            prv = cur, cur = nxt, nxt = o;
        }
        ssm__tc_wait<0>();
        __syncthreads();
    }
}
template <int NP, int BF>
static ssm_result ssm__cu_hs_chain_launch(ssm__cu_lr *L, const ssm__hs_args &a) {
    const size_t smem = ssm__hs_chain_smem(NP, a.m);
    const int64_t nq = (a.T - a.d + a.d - 1) / a.d, nqb = (nq + SSM__HS_CHAIN - 1) / SSM__HS_CHAIN, units = a.S * a.d * nqb;
    int occ = 0;
    if (smem > 48 * 1024) {
        cudaError_t e = ssm__cu_smem_allow((const void *)ssm__cu_hs_chain_kernel<NP, BF>, smem, ssm__cu_st(L->ctx)->smem_optin);
        if (e != cudaSuccess)
            return ssm_ctx_error(L->ctx, SSM_ERROR_BACKEND, "CUDA: cudaFuncSetAttribute(%zu bytes smem): %s", smem, cudaGetErrorString(e));
    }
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, ssm__cu_hs_chain_kernel<NP, BF>, 2 * NP, smem);
    int64_t grid = (int64_t)(occ > 0 ? occ : 1) * ssm__cu_st(L->ctx)->sms;
    if (grid > units) grid = units;
    if (grid <= 0) return SSM_OK;
    ssm__cu_hs_chain_kernel<NP, BF><<<(unsigned)grid, 2 * NP, smem, ssm__cu_st(L->ctx)->stream>>>(a, nqb);
    SSM__CU_LAUNCHED(L->ctx, "ssm__cu_hs_chain_kernel");
    return SSM_OK;
}
/* One HS level by chains: the copies of t in [d/2, d) on the per-task kernel, then the chains. */
static ssm_result ssm__cu_hs_chain_level(ssm__cu_lr *L, ssm__hs_args a, int bf) {
    ssm__hs_args c = a;
    c.t0 = a.d / 2, c.ntask = a.d - a.d / 2;
    SSM__TRY(ssm__cu_hs_level(L, c, bf));
    switch (ssm__hs_np(a.n) * 2 + bf) {
    case 32: return ssm__cu_hs_chain_launch<16, 0>(L, a);
    case 33: return ssm__cu_hs_chain_launch<16, 1>(L, a);
    case 64: return ssm__cu_hs_chain_launch<32, 0>(L, a);
    case 65: return ssm__cu_hs_chain_launch<32, 1>(L, a);
    case 128: return ssm__cu_hs_chain_launch<64, 0>(L, a);
    case 129: return ssm__cu_hs_chain_launch<64, 1>(L, a);
    case 256: return ssm__cu_hs_chain_launch<128, 0>(L, a);
    default: return ssm__cu_hs_chain_launch<128, 1>(L, a);
    }
}

/* Steps 1..T-1 (h_0 in h) by Hillis-Steele, a fused kernel per level. */
static ssm_result ssm__cu_lr_scan_hs(ssm__cu_lr *L, int64_t T, ssm_seq_view A, ssm_seq_view b, ssm_seq_view h, char *ws) {
    const int64_t S = L->S, n = L->n, m = L->m;
    const int bits = A.dtype.bits, bf = A.dtype.code == SSM_DTYPE_BFLOAT;
    int K = 0;
    ssm__hs_args a;
    ssm__cu_rv X, Y, V, hv, tmp;
    if (!ssm__cu_hs_takes(L->ctx, L->p) || (bits != 16 && bits != 32) || bits != L->p->dtype.bits) return SSM__NOT_MINE;
    if (T <= 1) return SSM_OK;
    for (int64_t d = 1; d < T; d *= 2) ++K;
    {
        const size_t es = (size_t)bits / 8, Mb = ((size_t)S * T * n * n * es + 255) & ~(size_t)255;
        memset(&X, 0, sizeof X);
        X.p = ws, X.dt = ssm__cu_dt(A.dtype), X.ts = n * n, X.rs = n, X.cs = 1, X.ss = T * n * n;
        Y = X, Y.p = ws + Mb;
        V = X, V.p = ws + 2 * Mb, V.dt = 0, V.ts = n * m, V.rs = m, V.ss = T * n * m;
    }
    hv = ssm__cu_rv_of(h, 0, 0);
    /* v starts in h (K even) or in V (K odd), holding h_0 and b_1 .. b_{T-1} */
    {
        ssm__cu_op src = ssm__cu_op_at(b, 1), dst = ssm__cu_op_at(h, 1);
        int64_t total = S * (T - 1) * n * m, blocks = (total + 255) / 256;
        src.bs = b.ts, dst.bs = h.ts;
        if (K % 2) {
            dst.p = (char *)V.p + (size_t)n * m * 4, dst.dt = 0, dst.rs = m, dst.cs = 1, dst.bs = n * m, dst.ss = T * n * m;
            ssm__cu_op h0 = ssm__cu_op_at(h, 0), v0 = dst;
            v0.p = V.p;
            ssm__cu_copy_kernel<<<(unsigned)((S * n * m + 255) / 256 < 65536 ? (S * n * m + 255) / 256 : 65536), 256, 0,
                                  ssm__cu_st(L->ctx)->stream>>>(S * n * m, 1, (int)n, (int)m, h0, v0, 0);
            SSM__CU_LAUNCHED(L->ctx, "ssm__cu_copy_kernel");
        }
        if (blocks > 65536) blocks = 65536;
        ssm__cu_copy_kernel<<<(unsigned)blocks, 256, 0, ssm__cu_st(L->ctx)->stream>>>(total, T - 1, (int)n, (int)m, src, dst, 0);
        SSM__CU_LAUNCHED(L->ctx, "ssm__cu_copy_kernel");
    }
    memset(&a, 0, sizeof a);
    a.S = S, a.T = T, a.n = (int)n, a.m = (int)m, a.MP = (int)((m + 7) / 8 * 8), a.step = 1;
    a.Mc = ssm__cu_rv_of(A, 0, 0);
    a.Mn = X;
    if (bits == 32) a.Mn.dt = 0;
    a.vc = K % 2 ? V : hv;
    a.vn = K % 2 ? hv : V;
    for (int64_t d = 1; d < T; d *= 2) {
        const int64_t t0 = d / 2; /* v copies start at d/2, M copies later */
        a.d = d, a.t0 = t0, a.ntask = T - t0, a.next = 2 * d < T, a.vv = ssm__hs_vv(a.vc, a.vn, m);
        a.vec = ssm__hs_mvec(a.Mc, bits, n);
        /* a transposed 16-bit A (the adjoint's A^T) on the first level: staged as stored, its products
           written back in M's orientation for the levels after it (element by element, A^T's
           loads made the backward up to 1.54x the forward) */
        a.tr = a.trn = d == 1 && ssm__hs_mtr(a.Mc, bits, n);
        a.vec |= a.tr;
        /* chains for narrow states (m <= 8); wide ones re-read more v per task than they save
           (H200, bench/results/cuda_scan_7749dd5.log: S8 T1024 n64 m64 f16 chains 4.73 ms vs
           one task per warp group 4.06; m = 1 rows 5.46 vs 7.23 at S16 T4096 n64) */
        if (bits == 16 && a.vec && !a.tr && m <= 8 && ssm__cu_st(L->ctx)->knobs.linrec_scan != 2 &&
            ssm__hs_chain_smem(ssm__hs_np(n), m) <= ssm__cu_st(L->ctx)->smem_optin)
            SSM__TRY(ssm__cu_hs_chain_level(L, a, bf));
        else SSM__TRY(ssm__cu_hs_level(L, a, bf));
        L->st->mat_state += S * (T - d);
        if (a.next) L->st->mat_mat += S * (T - d - 1);
        /* M: level 1 read A, wrote X; level 2 reads X, writes Y; then they alternate */
        a.Mc = a.Mn;
        a.Mn = a.Mc.p == X.p ? Y : X;
        if (bits == 32) a.Mn.dt = 0;
        tmp = a.vc, a.vc = a.vn, a.vn = tmp;
    }
    return SSM_OK;
}

/* Blelloch / Brent-Kung in place at stride 2^l, a fused kernel per level on the same tiles:
   up-sweep level s: tasks k = 2s-1 (mod 2s), v_k += M_k v_{k-s} and M_k = M_k M_{k-s} (but for
   the first span, which starts at 0); down-sweep level s: tasks k = 3s-1 (mod 2s), v_k += M_k
   v_{k-s}. A task reads and writes only its own M_k and v_k and reads slots no task of its level
   writes, so levels run in place: one M scratch of the input type (the up-sweep's first level reads
   A and writes it; the last down-sweep level reads A), v in h. */
static int64_t ssm__cu_bl_levels(int64_t T) {
    int64_t top = 0;
    for (int64_t s = 1; 2 * s <= T; s *= 2) top = s;
    return top;
}
/* count steps of every sequence (n x m states) from a to c, each operand's bs its step stride */
static ssm_result ssm__cu_copy_steps(ssm__cu_lr *L, ssm__cu_op a, ssm__cu_op c, int64_t count) {
    int64_t total = L->S * count * L->n * L->m, blocks = (total + 255) / 256;
    if (total <= 0) return SSM_OK;
    if (blocks > 65536) blocks = 65536;
    ssm__cu_copy_kernel<<<(unsigned)blocks, 256, 0, ssm__cu_st(L->ctx)->stream>>>(total, count, (int)L->n, (int)L->m, a, c, 0);
    SSM__CU_LAUNCHED(L->ctx, "ssm__cu_copy_kernel");
    return SSM_OK;
}
/* dst_t = src_t for steps t0 .. t0 + count - 1 of every sequence */
static ssm_result ssm__cu_lr_copy_steps(ssm__cu_lr *L, ssm_seq_view src, ssm_seq_view dst, int64_t t0, int64_t count) {
    ssm__cu_op a = ssm__cu_op_at(src, t0), c = ssm__cu_op_at(dst, t0);
    a.bs = src.ts, c.bs = dst.ts;
    return ssm__cu_copy_steps(L, a, c, count);
}
/* The in-place start of cyclic reduction and Blelloch (16-bit A, the task kernel): v = b beside
   h_0. Their first levels read b itself (a->vb) where its rows take the kernel's loads; else b's
   steps 1 .. T-1 are copied into h (f32). The copy was 15% of a matrix-state forward (S8 T1024
   n128 m128 f16, bench/results/cuda_mat_cr_prof_c9470ff.log) and made the first level read its
   v in f32. */
static ssm_result ssm__hs_from_b(ssm__cu_lr *L, ssm__hs_args *a, ssm_seq_view b, ssm_seq_view h, int64_t T) {
    const ssm__cu_rv bv = ssm__cu_rv_of(b, 0, 0);
    if (!a->vv || ssm__hs_v4_ok(bv)) {
        a->vb = bv, a->vbs = 1;
        a->vbc = a->vv && bv.dt != 0 && ssm__hs_mvec(bv, 16, a->m);
        return SSM_OK;
    }
    return ssm__cu_lr_copy_steps(L, b, h, 1, T - 1);
}
/* The sweeps over T steps, in place: v in a.vc = a.vn (v_0 = h_0, v_t = b_t; or b read on the
   first level through a.vb), M from Av on the first level of each sweep and from the scratch X
   (the input type, or f32; in Av's orientation, a.tr) above it. */
static ssm_result ssm__cu_bl_sweeps(ssm__cu_lr *L, ssm__hs_args a, int64_t T, ssm__cu_rv Av, ssm__cu_rv X, int bits, int bf) {
    const ssm__cu_rv vb = a.vb;
    const int64_t top = ssm__cu_bl_levels(T);
    for (int64_t s = 1; s <= top; s *= 2) {
        a.mode = 1, a.d = s, a.t0 = 2 * s - 1, a.step = 2 * s, a.ntask = (T - 2 * s) / (2 * s) + 1;
        a.Mc = s == 1 ? Av : X, a.Mn = X;
        a.vec = a.tr || ssm__hs_mvec(a.Mc, bits, a.n);
        a.vb.p = s == 1 ? vb.p : NULL, a.vbs = 1; /* the levels above s = 1 read and write odd slots only */
        SSM__TRY(ssm__cu_hs_level(L, a, bf));
        L->st->mat_state += a.S * a.ntask;
        L->st->mat_mat += a.S * (a.ntask - 1);
    }
    for (int64_t s = top; s >= 1; s /= 2) {
        if (3 * s - 1 >= T) continue;
        a.mode = 2, a.d = s, a.t0 = 3 * s - 1, a.step = 2 * s, a.ntask = (T - 3 * s) / (2 * s) + 1;
        a.Mc = s == 1 ? Av : X, a.Mn = X;
        a.vec = a.tr || ssm__hs_mvec(a.Mc, bits, a.n);
        a.vb.p = s == 1 ? vb.p : NULL, a.vbs = 0; /* v_{t-1}: final, in h */
        SSM__TRY(ssm__cu_hs_level(L, a, bf));
        L->st->mat_state += a.S * a.ntask;
    }
    return SSM_OK;
}
/* Steps 1..T-1 of h_t = A_t h_{t-1} + b_t (h_0 in h; b may be h itself) by the sweeps on the f32
   level kernels, all three f32 views (span carries: A_c = P_{c-1}, b_c = e_{c-1}); the M scratch,
   S (T - 1) n^2 floats (slot 0 is never formed), at ws. */
static ssm_result ssm__cu_bl_solve(ssm__cu_lr *L, int64_t T, ssm__cu_rv A, ssm__cu_rv b, ssm__cu_rv h, char *ws) {
    ssm__hs_args a;
    ssm__cu_rv X;
    if (T <= 1) return SSM_OK;
    if (b.p != h.p || b.off != h.off || b.ts != h.ts || b.rs != h.rs || b.cs != h.cs || b.ss != h.ss) { /* v = b beside h_0 */
        ssm__cu_op bo, ho;
        bo.p = (float *)b.p + b.off + b.ts, bo.dt = 0, bo.rs = b.rs, bo.cs = b.cs, bo.bs = b.ts, bo.ss = b.ss;
        ho.p = (float *)h.p + h.off + h.ts, ho.dt = 0, ho.rs = h.rs, ho.cs = h.cs, ho.bs = h.ts, ho.ss = h.ss;
        SSM__TRY(ssm__cu_copy_steps(L, bo, ho, T - 1));
    }
    memset(&X, 0, sizeof X);
    X.p = ws, X.dt = 0, X.off = -L->n * L->n, X.ts = L->n * L->n, X.rs = L->n, X.cs = 1, X.ss = (T - 1) * L->n * L->n;
    memset(&a, 0, sizeof a);
    a.S = L->S, a.T = T, a.n = (int)L->n, a.m = (int)L->m, a.MP = (int)((L->m + 7) / 8 * 8);
    a.vc = a.vn = h;
    a.vv = ssm__hs_vv(a.vc, a.vn, L->m);
    return ssm__cu_bl_sweeps(L, a, T, A, X, 32, 0);
}
/* On cyclic reduction's span shapes (ssm__cu_spans: m = 1 tensor-core shapes and matrix states;
   linrec_scan = 3: never) as cyclic reduction: spans of the chunk length reduced to their
   transition products and end states (A read once), the sweeps over the span carries
   (ssm__cu_bl_solve), every span re-run from its carry; the workspace is then the spans'. This
   is the work-efficient scan's usual GPU form, blocks scanned locally, a scan of the block carries, the blocks fixed up (Blelloch 1990; Harris, Sengupta and Owens 2007); the
   per-step levels over the whole sequence read and write every level's M through HBM (H200, S8
   T4096 n64 f16: 0.81 ms; on the spans 0.31, bench/results/cuda_grid_325cb9c.log). */
static ssm_result ssm__cu_lr_blelloch(ssm__cu_lr *L, int64_t T, ssm_seq_view A, ssm_seq_view b, ssm_seq_view h,
                                      ssm_seq_view out, int *out_written, char *ws) {
    const int64_t S = L->S, n = L->n, m = L->m;
    const int bits = A.dtype.bits, bf = A.dtype.code == SSM_DTYPE_BFLOAT;
    ssm__hs_args a;
    ssm__cu_rv X, Av;
    if (!ssm__cu_hs_takes(L->ctx, L->p) || (bits != 16 && bits != 32) || bits != L->p->dtype.bits) return SSM__NOT_MINE;
    if (T <= 1) return SSM_OK;
    if (ssm__cu_spans(L->ctx, L->p)) return ssm__cu_lr_spans(L, T, A, b, h, out, out_written, ws);
    Av = ssm__cu_rv_of(A, 0, 0);
    /* a transposed 16-bit A (the adjoint's A^T) is staged as stored and M kept transposed (as in
       ssm__cu_cr_tc_level); element by element its loads made the backward 2.2x the forward */
    const int tr = ssm__hs_mtr(Av, bits, n);
    memset(&X, 0, sizeof X);
    X.p = ws, X.dt = ssm__cu_dt(A.dtype), X.ts = n * n, X.rs = tr ? 1 : n, X.cs = tr ? n : 1, X.ss = T * n * n;
    memset(&a, 0, sizeof a);
    a.S = S, a.T = T, a.n = (int)n, a.m = (int)m, a.MP = (int)((m + 7) / 8 * 8), a.tr = tr;
    a.vc = a.vn = ssm__cu_rv_of(h, 0, 0);
    a.vv = ssm__hs_vv(a.vc, a.vn, m);
    if (bits == 16) SSM__TRY(ssm__hs_from_b(L, &a, b, h, T)); /* (the f32 level kernel reads v from vc only) */
    else SSM__TRY(ssm__cu_lr_copy_steps(L, b, h, 1, T - 1)); /* the in-place start: v = b beside h_0 */
    return ssm__cu_bl_sweeps(L, a, T, Av, X, bits, bf);
}

/* Cyclic reduction of wide states (16-bit A, m > 8) on the same tensor-core task kernel: level
   l reduces the odd slots t = 1, 3, .. in place in h (v_t += M_t v_{t-1}) and forms the next
   level's transitions M_t M_{t-1} (t >= 3) compacted, in the input type (as Hillis-Steele and
   Blelloch keep M, and torch.bmm would); after the next level, the even slots t >= 2 take
   v_t += M_t v_{t-1} from their final odd neighbours. A transposed A (the adjoint's A^T, rows of
   storage along its columns) is staged as stored and its levels are kept transposed. The levels'
   M scratch holds 16-bit elements: half the f32 level kernels' figure (the plan's workspace says
   which, by ssm__cu_cr_tc_takes, which the views' strides do not change). */
static int ssm__cu_cr_tc_takes(const ssm_ctx *ctx, const ssm_linrec_plan *p) {
    const int knob = ssm__cu_st(ctx)->knobs.linrec_cr;
    return p->dtype.bits == 16 && p->m > 8 && (knob == 0 || knob == 3) && p->n <= SSM__HS_MAXN &&
           p->m <= SSM__HS_MAXN && ssm__hs_tc_smem(ssm__hs_np(p->n), p->m) <= ssm__cu_st(ctx)->smem_optin;
}
static ssm_result ssm__cu_cr_tc_level(ssm__cu_lr *L, ssm__hs_args a, int64_t T, ssm__cu_rv M, int bf, char *ws,
                                      const ssm__cu_rv *out) {
    const int64_t half = T / 2, nb = (T - 1) / 2, n = L->n, S = L->S;
    const int bits = L->p->dtype.bits;
    ssm__cu_rv M2 = M, v2 = a.vc;
    const int tr = ssm__hs_mtr(M, bits, n); /* transposed (the adjoint's A^T): kept so */
    if (T < 2) return SSM_OK;
    M2.p = ws, M2.off = -n * n, M2.ts = n * n, M2.rs = tr ? 1 : n, M2.cs = tr ? n : 1, M2.ss = (half - 1) * n * n, M2.chs = 0;
    ws += ssm__cu_cr_levels_bytes(S, T, n, bits / 8) - ssm__cu_cr_levels_bytes(S, half, n, bits / 8);
    a.Mc = M, a.Mn = M2, a.vec = tr || ssm__hs_mvec(M, bits, n), a.tr = tr, a.d = 1, a.step = 2, a.mcompact = 1;
    a.mode = 1, a.t0 = 1, a.ntask = half;
    SSM__TRY(ssm__cu_hs_level(L, a, bf));
    L->st->mat_mat += S * (half - 1);
    L->st->mat_state += S * (half + nb);
    v2.off += a.vc.ts, v2.ts *= 2;
    {
        ssm__hs_args up = a;
        up.vc = up.vn = v2, up.vv = ssm__hs_vv(v2, v2, L->m), up.vb.p = NULL, up.vbs = 0;
        SSM__TRY(ssm__cu_cr_tc_level(L, up, half, M2, bf, ws, NULL));
    }
    if (nb <= 0) return SSM_OK;
    a.mode = 2, a.t0 = 2, a.ntask = nb, a.mcompact = 0, a.vbs = 0; /* v_{t-1}: final, in vc */
    if (out) a.vo = *out; /* the first level's back-substitution writes steps 1 .. 2 nb to the caller's view */
    return ssm__cu_hs_level(L, a, bf);
}
/* With v rows and the caller's view out in vectors, the first level's back-substitution also
   writes out (steps 1 .. 2 nb), the last step (T even) by a copy: the driver's pass converting
   the work buffer into the caller's h is then only step 0. */
static ssm_result ssm__cu_cr_tc(ssm__cu_lr *L, int64_t T, ssm_seq_view A, ssm_seq_view b, ssm_seq_view h, ssm_seq_view out,
                                int *out_written, char *ws) {
    ssm__hs_args a;
    ssm__cu_rv o;
    memset(&a, 0, sizeof a);
    a.S = L->S, a.T = T, a.n = (int)L->n, a.m = (int)L->m, a.MP = (int)((L->m + 7) / 8 * 8);
    a.vc = a.vn = ssm__cu_rv_of(h, 0, 0);
    a.vv = ssm__hs_vv(a.vc, a.vn, L->m);
    SSM__TRY(ssm__hs_from_b(L, &a, b, h, T));
    o = ssm__cu_rv_of(out, 0, 0);
    const int fold = out.ptr && a.vv && ssm__hs_v4_ok(o);
    SSM__TRY(ssm__cu_cr_tc_level(L, a, T, ssm__cu_rv_of(A, 0, 0), A.dtype.code == SSM_DTYPE_BFLOAT, ws, fold ? &o : NULL));
    if (!fold) return SSM_OK;
    if (T % 2 == 0) SSM__TRY(ssm__cu_lr_copy_steps(L, h, out, T - 1, 1)); /* step T - 1 (odd): no task after it */
    *out_written = 1;
    return SSM_OK;
}

/* ---- dense linear recurrence: the slots --------------------------------------------------------- */

/* AUTO: chunked (chunk 64) for the tensor-core shapes when T > 64, f32 among them since the
   3xTF32 path (f32 n32 / n64: chunked 3.6-5.8x the floor, cr 5.8-9.7x,
   bench/results/cuda_linrec_f32_dev_ee0b8b2.log, cuda_linrec_narrow_ab_24add44.log;
   bench/results/cuda_linrec_perf.log; at n = 16 too, where seq is the other candidate: S512 T1024 f16 1.48 ms
   vs seq 1.73, bench/results/cuda_linrec_narrow_ee18b34.log; above n = 64 the carry chain beats
   cyclic reduction over the carries even at S1 T8192 n128, 0.44 vs 0.84 ms,
   bench/results/cuda_linrec_wide_66707f5.log); else seq when S fills the GPU
   (S >= 2*SMs) or T <= 64, cyclic reduction when too few sequences fill it (S <= SMs/8: cr 1.34 ms vs chunked 2.7 at S1 T8192 n64, CUDA
   cores), else chunked. Chunk: the descriptor's; 64 on the tensor-core shapes (it beat 32, 128
   and 16 at S16 T4096 and S1 T8192, H200; bench/results/cuda_linrec_chunks_b601d2e.log: 16..128
   at n = 16 / 32 / 64, f16 and f32), 128 for f32 at n <= 32 (8-18% faster there); f32 on the
   128-wide tiles (n = 65..128; pass 1 is 3xTF32 products of 128 x 128 tiles, one CTA an SM,
   ~12 us a step) the fewest of 16, 32 and 64 whose chunks fit one wave (H200, n128 S4 T1024:
   chunk 32 0.49 ms, 64 0.84, 128 1.60; S1 T8192: 32 1.06, 64 0.99;
   bench/results/cuda_f32w128_*.log); for AUTO
   about sqrt(T) (the chunk depth against the carry recurrence), at least 16; else ssm.h's
   default. Matrix states (m >= 8) that the tensor-core recurrence kernel takes run chunked on it
   where it measured faster than cyclic reduction's level kernels (H200, m = n, S so that A holds
   256 MB, bench/results/cuda_mat_*.log): f32 (n <= 64), 16-bit n <= 32 at any T (f16 S128 T1024
   n32 1.24 ms vs cr 1.80), 16-bit n <= 64 up to T = 4096 (S32 T1024 n64 1.58 vs 1.89; S4 T8192:
   2.13 vs 1.94); else (16-bit n = 128: 5.26 vs 2.76 at S8 T1024) cyclic reduction's level
   kernels for m >= n, 16 <= n <= 64 at any S below 2*SMs (cuda_cr_float4_30eb660.log) and the
   rules above. f32 above n = 64 with m <= 8 off the tensor-core chunked path (m > 1, or m = 1
   from S = 128, where seq's flat time wins: S128 T1024 n96 seq 8.5 ms against chunked 11.8;
   n128 13.6 against 12.5, near even): Blelloch for 2 <= S < 40,
   seq from S = 40 (seq's time is flat in S, the others' grows with it), cyclic reduction at S = 1
   (H200 T1024, bench/results/cuda_f32wide_5f67b00.log: n128 m1 S2 / S8 Blelloch 1.19 / 3.50 ms
   against cr 1.40 / 4.33, chunked 7.5; S32 12.7 against seq 13.9; S128 seq 13.8 against 49.6;
   n96 S128 seq 8.6 against 40.9, chunked 32.9; at S1 T4096 / T8192 cr 1.85 / 3.30 against 2.17
   / 3.96). Every sequence runs in one batch, with f32 states and scratch. */
static void ssm__cu_linrec_pick(const ssm_ctx *ctx, ssm_linrec_plan *p) {
    const int64_t sms = ctx && ssm__cu_st(ctx) ? ssm__cu_st(ctx)->sms : 132;
    const int tc = ssm__cu_tc_shape(p->dtype, p->n, p->m);
    const int f32wide = p->dtype.bits == 32 && p->n > SSM__TC_N && p->m <= 8; /* f32 vectors past the tensor-core tiles */
    const int mat = ctx && ssm__cu_st(ctx) && ssm__cu_st(ctx)->knobs.linrec_mat != 1 && ssm__cu_tcm_shape(p->dtype, p->n, p->m);
    p->group = p->S;
    p->work = SSM_F32;
    if (!p->chunk) {
        if (tc && p->dtype.bits == 32 && ssm__cu_tc_w(p->n) == SSM__TC_NMAX) { /* the fewest steps a chunk that fill one wave */
            int64_t c = 16;
            while (c < 64 && ssm__cu_tc_nc(p->T, c) > sms / p->S) c *= 2;
            p->chunk = c;
        } else if (tc) p->chunk = p->dtype.bits == 32 && ssm__cu_tc_w(p->n) == SSM__TC_NS ? 128 : 64;
        else if (p->method == SSM_LINREC_AUTO && mat) /* the matrix-state kernel's chunks, measured on the grid's m = n rows
                                                         (H200, bench/results/cuda_side_stream_018c557.log) */
            p->chunk = p->n <= 32 && (p->dtype.bits == 32 || p->T >= 4096) ? 128 : 64;
        else if (p->method == SSM_LINREC_AUTO) {
            int64_t c = 16;
            while (c <= (p->T - 1) / c) c *= 2; /* c * c < T, without the product (T may be near 2^63) */
            p->chunk = c;
        }
    }
    if (p->method != SSM_LINREC_AUTO) return;
    if (tc && p->T > 64 && !(f32wide && p->S >= 128)) p->method = SSM_LINREC_CHUNKED;
    else if (p->T <= 64 || p->S >= 2 * sms) p->method = SSM_LINREC_SEQUENTIAL;
    else if (f32wide && p->S >= 40) p->method = SSM_LINREC_SEQUENTIAL;
    else if (f32wide && p->S >= 2 && ctx && ssm__cu_st(ctx) && ssm__cu_hs_takes(ctx, p)) p->method = SSM_LINREC_BLELLOCH;
    else if (mat) p->method = SSM_LINREC_CHUNKED;
    else if (p->S * 8 <= sms || (p->m >= p->n && p->n >= 16 && p->n <= 64)) p->method = SSM_LINREC_CR;
    else p->method = SSM_LINREC_CHUNKED;
}

/* Cyclic reduction. On the tensor-core shapes: spans of the chunk length each reduced to their
   transition product and end state by the span kernel (the span's levels fused: the same L - 1
   products a level-by-level reduction forms, on mma.sync, A read once from HBM), cyclic
   reduction over the span carries, then every span re-run from its carry. Views of those shapes
   that the tensor-core path does not take (unaligned, no unit stride) run the CUDA-core chunks
   (ssm__cu_spans): the plan's workspace, which cannot know the views, is then the spans'
   figure, not the whole-sequence levels' (S16 T4096 n64 f16: 49.8 MB in all instead of 1087).
   Matrix states (m >= 8, the shapes of the matrix-state kernel whose CUDA-core chunks fit) the
   same way on that kernel: a span's product and end state in one pass (pass 1 of the chunked
   method), cyclic reduction over the carries (H200, f16 S32 T1024 n = m = 64: the levels over
   the whole sequence took 1.80 ms, bench/results/cuda_grid_fd97f8e.log). Blelloch takes the
   same spans with its sweeps over the carries. Elsewhere the level kernels over the whole
   sequence. Shapes the level kernels do not take: ssm.h's generic levels. */
static int ssm__cu_spans(const ssm_ctx *ctx, const ssm_linrec_plan *p) {
    const ssm_cuda_config *k = &ssm__cu_st(ctx)->knobs;
    const int levels = p->method == SSM_LINREC_BLELLOCH ? k->linrec_scan == 3 : k->linrec_cr >= 2; /* forced levels */
    return !levels && (ssm__cu_tc_shape(p->dtype, p->n, p->m) || ssm__cu_tcm_shape(p->dtype, p->n, p->m)) &&
           ssm__cu_rec_smem(p->n, p->m, 1) <= ssm__cu_st(ctx)->smem_optin;
}
/* The spans of cyclic reduction and Blelloch (the plan's method scans the carries): the tensor-core
   chunked path where it takes the views, else the CUDA-core or matrix-state chunks. */
static ssm_result ssm__cu_lr_spans(ssm__cu_lr *L, int64_t T, ssm_seq_view A, ssm_seq_view b, ssm_seq_view h,
                                   ssm_seq_view out, int *out_written, char *ws) {
    return ssm__cu_tc_ok(L, A) ? ssm__cu_lr_chunked_tc(L, T, A, b, h, L->p->chunk, out, out_written, ws, 1)
                               : ssm__cu_lr_chunked(L, T, A, b, h, L->p->chunk, out, out_written, ws);
}
static ssm_result ssm__cu_lr_cr(ssm__cu_lr *L, int64_t T, ssm_seq_view A, ssm_seq_view b, ssm_seq_view h,
                                ssm_seq_view out, int *out_written, char *ws) {
    if (!ssm__cu_cr_takes(L->ctx, L->p)) return SSM__NOT_MINE;
    if (T <= 1) return SSM_OK;
    if (ssm__cu_spans(L->ctx, L->p)) return ssm__cu_lr_spans(L, T, A, b, h, out, out_written, ws);
    if (ssm__cu_cr_tc_takes(L->ctx, L->p) && A.dtype.bits == 16) return ssm__cu_cr_tc(L, T, A, b, h, out, out_written, ws);
    return ssm__cu_cr_solve(L, T, ssm__cu_rv_of(A, 0, 0), ssm__cu_rv_of(b, 0, 0), ssm__cu_rv_of(h, 0, 0), ws);
}

/* The linrec_steps slot: the fused kernels for sequential, chunked and cyclic reduction where
   they fit. */
static ssm_result ssm__cu_linrec_steps(ssm_ctx *ctx, const ssm_linrec_plan *p, ssm_seq_view A, ssm_seq_view b,
                                       ssm_seq_view h, ssm_seq_view out, int *out_written, void *scratch,
                                       ssm_linrec_stats *st) {
    ssm__cu_device_guard g(ssm__cu_st(ctx)->device);
    ssm__cu_lr L;
    L.ctx = ctx, L.p = p, L.S = p->group, L.n = p->n, L.m = p->m, L.st = st;
    if (p->method == SSM_LINREC_SEQUENTIAL) return ssm__cu_lr_sequential(&L, p->T, A, b, h, out, out_written);
    if (p->method == SSM_LINREC_CR) return ssm__cu_lr_cr(&L, p->T, A, b, h, out, out_written, (char *)scratch);
    if (p->method == SSM_LINREC_SCAN_HS) return ssm__cu_lr_scan_hs(&L, p->T, A, b, h, (char *)scratch);
    if (p->method == SSM_LINREC_BLELLOCH) return ssm__cu_lr_blelloch(&L, p->T, A, b, h, out, out_written, (char *)scratch);
    if (p->method != SSM_LINREC_CHUNKED) return SSM__NOT_MINE;
    if (ssm__cu_tc_ok(&L, A)) return ssm__cu_lr_chunked_tc(&L, p->T, A, b, h, p->chunk, out, out_written, (char *)scratch, 0);
    return ssm__cu_lr_chunked(&L, p->T, A, b, h, p->chunk, out, out_written, (char *)scratch);
}
/* The linrec_steps_cp slot: the tensor-core chunked path (chunked, and cyclic reduction's spans
   on those shapes) splits at its carries; everything else is ssm.h's generic split. */
static ssm_result ssm__cu_linrec_steps_cp(ssm_ctx *ctx, const ssm_linrec_plan *p, int phase, int want_end, ssm_seq_view A,
                                          ssm_seq_view b, ssm_seq_view h, ssm_seq_view out, int *out_written,
                                          void *scratch, ssm_linrec_stats *st) {
    ssm__cu_device_guard g(ssm__cu_st(ctx)->device);
    ssm__cu_lr L;
    const int cr = p->method == SSM_LINREC_CR;
    L.ctx = ctx, L.p = p, L.S = p->group, L.n = p->n, L.m = p->m, L.st = st;
    if (!(p->method == SSM_LINREC_CHUNKED || (cr && ssm__cu_cr_takes(ctx, p) && ssm__cu_st(ctx)->knobs.linrec_cr < 2)) ||
        !ssm__cu_tc_ok(&L, A))
        return SSM__NOT_MINE;
    return ssm__cu_lr_chunked_tc(&L, p->T, A, b, h, p->chunk, out, out_written, (char *)scratch, cr, phase, want_end);
}

/* >>decay ---- decay scan ------------------------------------------------------------------ */
/* ---- decay scan -----------------------------------------------------------------------------
   One pass over time with decoupled look-back (single-pass chained scan). Block = (b, slice of
   the R*C elements, chunk of L steps); chunks are handed out in order through an atomic ticket
   so that every chunk's predecessors are already running. Each thread keeps V consecutive
   columns of one row for L steps in registers: the local scan from zero gives an aggregate
   (log decay over the chunk, end state), published at once; the look-back combines the
   predecessors' aggregates until it meets an inclusive prefix, then the chunk publishes its own
   inclusive prefix and writes out_t = local_t + exp(la_t) carry. Loads and stores are V-wide
   (16 bytes for f32, V = 4) when strides and alignment allow. */
typedef struct ssm__cu_dkv {
    const void *p;
    int64_t s0, s1, s2, s3; /* element strides (b, t, r, c) or (b, r, c) */
    int f32;                /* f32 elements whatever the call's dtype (a _cp call's carry) */
} ssm__cu_dkv;

template <typename T> struct ssm__cu_vec;
template <> struct ssm__cu_vec<float> {
    static __device__ __forceinline__ float get(float v) { return v; }
    static __device__ __forceinline__ float put(float v) { return v; }
};
template <> struct ssm__cu_vec<__half> {
    static __device__ __forceinline__ float get(__half v) { return __half2float(v); }
    static __device__ __forceinline__ __half put(float v) { return __float2half_rn(v); }
};
template <> struct ssm__cu_vec<__nv_bfloat16> {
    static __device__ __forceinline__ float get(__nv_bfloat16 v) { return __bfloat162float(v); }
    static __device__ __forceinline__ __nv_bfloat16 put(float v) { return __float2bfloat16_rn(v); }
};

template <typename T, int V> struct alignas(sizeof(T) * V) ssm__cu_pack { T v[V]; };

/* V consecutive elements at p (one 16-byte load when V > 1), as floats. */
template <typename T, int V>
__device__ __forceinline__ void ssm__cu_dk_loadv(const T *p, float *f) {
    if (V > 1) {
        const ssm__cu_pack<T, V> pk = *(const ssm__cu_pack<T, V> *)p;
#pragma unroll
        for (int v = 0; v < V; ++v) f[v] = ssm__cu_vec<T>::get(pk.v[v]);
    } else {
        f[0] = ssm__cu_vec<T>::get(p[0]);
    }
}
/* Its inverse: V floats to consecutive elements at p (one 16-byte store when V > 1). */
template <typename T, int V>
__device__ __forceinline__ void ssm__cu_dk_storev(T *p, const float *f) {
    if (V > 1) {
        ssm__cu_pack<T, V> pk;
#pragma unroll
        for (int v = 0; v < V; ++v) pk.v[v] = ssm__cu_vec<T>::put(f[v]);
        *(ssm__cu_pack<T, V> *)p = pk;
    } else {
        p[0] = ssm__cu_vec<T>::put(f[0]);
    }
}

/* V columns from c of an initial state [b][r][c] (h0 or dhT: the call's dtype, or f32). */
template <typename T, int V>
__device__ __forceinline__ void ssm__cu_dk_init(const ssm__cu_dkv &init, int64_t b, int64_t r, int64_t c, float *carry) {
#pragma unroll
    for (int v = 0; v < V; ++v) {
        const int64_t i = b * init.s0 + r * init.s1 + (c + v) * init.s2;
        carry[v] = init.f32 ? ((const float *)init.p)[i] : ssm__cu_vec<T>::get(((const T *)init.p)[i]);
    }
}

/* a_t (per-step log decay at time t) read from either form; 0 outside [0, T). */
template <typename T>
__device__ __forceinline__ float ssm__cu_dk_step(const T *ld, int64_t base, int64_t st, int64_t t, int64_t Tn, int per_step) {
    if (t < 0 || t >= Tn) return 0.f;
    float v = ssm__cu_vec<T>::get(ld[base + t * st]);
    if (per_step || t == 0) return v;
    return v - ssm__cu_vec<T>::get(ld[base + (t - 1) * st]);
}

#define SSM__DK_THREADS 256

template <typename T, int V, int L>
__global__ void __launch_bounds__(SSM__DK_THREADS) ssm__cu_dk_scan_kernel(
    int64_t B, int64_t Tn, int64_t R, int64_t C, int64_t slices, int64_t nchunks, int reverse, int per_step,
    ssm__cu_dkv ld, ssm__cu_dkv x, ssm__cu_dkv out, ssm__cu_dkv init, ssm__cu_dkv fin, int *flags, int *ticket,
    float *agg_h, float *agg_la, float *incl) {
    __shared__ int s_id, s_flag;
    const int tid = threadIdx.x;
    if (tid == 0) s_id = atomicAdd(ticket, 1);
    __syncthreads();
    const int64_t id = s_id;
    const int64_t k = id / (B * slices), rest = id % (B * slices), b = rest / slices, slice = rest % slices;
    const int64_t e0 = (slice * SSM__DK_THREADS + tid) * V; /* first element (r*C + c) of this thread */
    const bool valid = e0 < R * C;
    const int64_t r = valid ? e0 / C : 0, c = valid ? e0 % C : 0;
    const int64_t slot = (b * slices + slice) * nchunks + k; /* this chunk's look-back record */
    const int64_t W = (int64_t)SSM__DK_THREADS * V, me = (int64_t)tid * V;
    const T *ldp = (const T *)ld.p;
    const int64_t ldb = b * ld.s0 + r * ld.s2;
    float hv[L][V], la[L];
    float h[V], lsum = 0.f;
    int64_t u0 = k * L, len = Tn - u0 < L ? Tn - u0 : L;
#pragma unroll
    for (int v = 0; v < V; ++v) h[v] = 0.f;
    /* local scan from zero */
#pragma unroll
    for (int q = 0; q < L; ++q) {
        if (q < len && valid) {
            int64_t u = u0 + q, t = reverse ? Tn - 1 - u : u;
            float a = reverse ? ssm__cu_dk_step(ldp, ldb, ld.s1, t + 1, Tn, per_step) : ssm__cu_dk_step(ldp, ldb, ld.s1, t, Tn, per_step);
            float f = expf(a);
            lsum += a;
            la[q] = lsum;
            float xv[V];
            ssm__cu_dk_loadv<T, V>((const T *)x.p + b * x.s0 + t * x.s1 + r * x.s2 + c * x.s3, xv);
#pragma unroll
            for (int v = 0; v < V; ++v) h[v] = f * h[v] + xv[v];
#pragma unroll
            for (int v = 0; v < V; ++v) hv[q][v] = h[v];
        }
    }
    /* carry = the true state before this chunk */
    float carry[V];
#pragma unroll
    for (int v = 0; v < V; ++v) carry[v] = 0.f;
    if (k == 0) {
        if (init.p && valid) ssm__cu_dk_init<T, V>(init, b, r, c, carry);
    } else {
        if (valid) {
#pragma unroll
            for (int v = 0; v < V; ++v) agg_h[slot * W + me + v] = h[v];
            agg_la[slot * W + me] = lsum;
        }
        __threadfence();
        __syncthreads();
        if (tid == 0) atomicExch(flags + slot, 1);
        float lacc = 0.f;
        int64_t j = k - 1;
        for (;;) {
            const int64_t js = (b * slices + slice) * nchunks + j;
            if (tid == 0) {
                int f;
                while ((f = atomicAdd(flags + js, 0)) == 0) { }
                s_flag = f;
            }
            __syncthreads();
            const int f = s_flag;
            __threadfence();
            if (valid) {
                const float sc = expf(lacc);
                const float *src = (f == 2 ? incl : agg_h) + js * W + me;
#pragma unroll
                for (int v = 0; v < V; ++v) carry[v] += sc * __ldcg(src + v);
                if (f != 2) lacc += __ldcg(agg_la + js * W + me);
            }
            __syncthreads();
            if (f == 2) break;
            --j;
        }
    }
    /* publish the inclusive prefix, then write the chunk */
    {
        const float sc = expf(lsum);
        float endv[V];
#pragma unroll
        for (int v = 0; v < V; ++v) endv[v] = h[v] + sc * carry[v];
        if (k + 1 < nchunks) {
            if (valid) {
#pragma unroll
                for (int v = 0; v < V; ++v) incl[slot * W + me + v] = endv[v];
            }
            __threadfence();
            __syncthreads();
            if (tid == 0) atomicExch(flags + slot, 2);
        } else if (fin.p && valid) {
            T *fp = (T *)fin.p + b * fin.s0 + r * fin.s1;
#pragma unroll
            for (int v = 0; v < V; ++v) fp[(c + v) * fin.s2] = ssm__cu_vec<T>::put(endv[v]);
        }
    }
    if (valid) {
#pragma unroll
        for (int q = 0; q < L; ++q) {
            if (q < len) {
                int64_t u = u0 + q, t = reverse ? Tn - 1 - u : u;
                const float sc = expf(la[q]);
                float o[V];
#pragma unroll
                for (int v = 0; v < V; ++v) o[v] = hv[q][v] + sc * carry[v];
                ssm__cu_dk_storev<T, V>((T *)out.p + b * out.s0 + t * out.s1 + r * out.s2 + c * out.s3, o);
            }
        }
    }
}

typedef struct ssm__cu_dk_plan {
    int V, L;
    int64_t slices, nchunks, records;
    size_t flags_bytes, payload_bytes;
} ssm__cu_dk_plan;

static ssm__cu_dk_plan ssm__cu_dk_plan_of(ssm_dtype dt, int64_t B, int64_t T, int64_t R, int64_t C, int vec) {
    ssm__cu_dk_plan p;
    p.V = vec ? (int)(16 / ssm__cu_esize(dt)) : 1;
    if (dt.bits == 16 && vec) p.V = 8;
    p.L = dt.bits == 32 || !vec ? 16 : 8;
    p.slices = (R * C + (int64_t)SSM__DK_THREADS * p.V - 1) / ((int64_t)SSM__DK_THREADS * p.V);
    p.nchunks = (T + p.L - 1) / p.L;
    p.records = B * p.slices * p.nchunks;
    p.flags_bytes = ((size_t)(p.records + 1) * sizeof(int) + 255) & ~(size_t)255;
    p.payload_bytes = (size_t)p.records * (size_t)SSM__DK_THREADS * (size_t)p.V * 4u;
    return p;
}
static size_t ssm__cu_dk_plan_bytes(const ssm__cu_dk_plan *p) { return p->flags_bytes + 3 * p->payload_bytes; }

/* Whether 16-byte (V-wide) access works for these views: unit column stride, every other stride
   and every base pointer a multiple of V elements, C a multiple of V. */
static int ssm__cu_dk_vec_ok(ssm_dtype dt, int64_t C, const ssm_tensor *const *ts, int count) {
    int V = dt.bits == 32 ? 4 : 8, i, d;
    if (C % V) return 0;
    for (i = 0; i < count; ++i) {
        const ssm_tensor *t = ts[i];
        if (!t) continue;
        if ((uintptr_t)t->data % 16) return 0;
        if (t->strides[t->ndim - 1] != 1) return 0;
        for (d = 0; d + 1 < t->ndim; ++d)
            if (t->strides[d] % V) return 0;
    }
    return 1;
}

static ssm__cu_dkv ssm__cu_dkv_of(const ssm_tensor *t) {
    ssm__cu_dkv v;
    memset(&v, 0, sizeof v);
    if (!t) return v;
    v.p = t->data;
    v.s0 = t->strides[0], v.s1 = t->strides[1], v.s2 = t->strides[2];
    v.s3 = t->ndim > 3 ? t->strides[3] : 0;
    v.f32 = t->dtype.bits == 32;
    return v;
}

template <typename T>
static void ssm__cu_dk_scan_go(const ssm__cu_dk_plan *p, cudaStream_t st, int64_t B, int64_t Tn, int64_t R, int64_t C,
                               int reverse, int per_step, ssm__cu_dkv ld, ssm__cu_dkv x, ssm__cu_dkv out,
                               ssm__cu_dkv init, ssm__cu_dkv fin, int *flags, float *agg_h, float *agg_la, float *incl) {
    int *ticket = flags + p->records;
    unsigned grid = (unsigned)p->records;
    if (p->V == 4)
        ssm__cu_dk_scan_kernel<T, 4, 16><<<grid, SSM__DK_THREADS, 0, st>>>(B, Tn, R, C, p->slices, p->nchunks, reverse,
                                                                           per_step, ld, x, out, init, fin, flags, ticket,
                                                                           agg_h, agg_la, incl);
    else if (p->V == 8)
        ssm__cu_dk_scan_kernel<T, 8, 8><<<grid, SSM__DK_THREADS, 0, st>>>(B, Tn, R, C, p->slices, p->nchunks, reverse,
                                                                          per_step, ld, x, out, init, fin, flags, ticket,
                                                                          agg_h, agg_la, incl);
    else
        ssm__cu_dk_scan_kernel<T, 1, 16><<<grid, SSM__DK_THREADS, 0, st>>>(B, Tn, R, C, p->slices, p->nchunks, reverse,
                                                                           per_step, ld, x, out, init, fin, flags, ticket,
                                                                           agg_h, agg_la, incl);
}

static ssm_result ssm__cu_dk_scan(ssm_ctx *ctx, const ssm__cu_dk_plan *p, ssm_dtype dt, int64_t B, int64_t Tn, int64_t R,
                                  int64_t C, int reverse, int per_step, const ssm_tensor *ld, const ssm_tensor *x,
                                  const ssm_tensor *out, const ssm_tensor *init, const ssm_tensor *fin, char *ws) {
    cudaStream_t st = ssm__cu_st(ctx)->stream;
    int *flags = (int *)ws;
    float *agg_h = (float *)(ws + p->flags_bytes), *agg_la = agg_h + p->payload_bytes / 4, *incl = agg_la + p->payload_bytes / 4;
    ssm__cu_dkv vl = ssm__cu_dkv_of(ld), vx = ssm__cu_dkv_of(x), vo = ssm__cu_dkv_of(out);
    ssm__cu_dkv vi = ssm__cu_dkv_of(init), vf = ssm__cu_dkv_of(fin);
    if (p->records > 2147483647) return ssm_ctx_error(ctx, SSM_ERROR_UNSUPPORTED, "decay scan: too many blocks");
    SSM__CU_CHECK(ctx, cudaMemsetAsync(flags, 0, p->flags_bytes, st));
    if (dt.bits == 32)
        ssm__cu_dk_scan_go<float>(p, st, B, Tn, R, C, reverse, per_step, vl, vx, vo, vi, vf, flags, agg_h, agg_la, incl);
    else if (dt.code == SSM_DTYPE_BFLOAT)
        ssm__cu_dk_scan_go<__nv_bfloat16>(p, st, B, Tn, R, C, reverse, per_step, vl, vx, vo, vi, vf, flags, agg_h, agg_la, incl);
    else
        ssm__cu_dk_scan_go<__half>(p, st, B, Tn, R, C, reverse, per_step, vl, vx, vo, vi, vf, flags, agg_h, agg_la, incl);
    SSM__CU_LAUNCHED(ctx, "ssm__cu_dk_scan_kernel");
    return SSM_OK;
}

/* da_t = exp(a_t) sum_c g_t h_{t-1}, written to f32 scratch, and dh0 = exp(a_0) g_0. A group of
   G lanes per (b, t, r) row, V columns a lane (16-byte loads of g and out when their rows allow
   them), the group's sum by shuffles; a warp's 32 / G rows advance together. Then dlog_decay = da
   (per-step) or da_t - da_{t+1} (cumulative). */
template <typename T, int V, int G>
__global__ void __launch_bounds__(256) ssm__cu_dk_da_kernel(int64_t B, int64_t Tn, int64_t R, int64_t C, int per_step,
                                                            ssm__cu_dkv ld, ssm__cu_dkv g, ssm__cu_dkv out, ssm__cu_dkv h0,
                                                            ssm__cu_dkv dh0, float *da) {
    const int lane = threadIdx.x & 31, gl = lane % G;
    const int64_t rows = B * Tn * R, warp = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) >> 5;
    const int64_t step = (((int64_t)gridDim.x * blockDim.x) >> 5) * (32 / G);
    for (int64_t row = warp * (32 / G) + lane / G;; row += step) {
        if (__all_sync(0xffffffffu, row >= rows)) break; /* the warp's rows advance together */
        float acc = 0.f, f = 0.f;
        if (row < rows) {
            const int64_t r = row % R, t = (row / R) % Tn, b = row / (R * Tn);
            f = expf(ssm__cu_dk_step((const T *)ld.p, b * ld.s0 + r * ld.s2, ld.s1, t, Tn, per_step));
            const T *gp = (const T *)g.p + b * g.s0 + t * g.s1 + r * g.s2;
            const T *op = t > 0 ? (const T *)out.p + b * out.s0 + (t - 1) * out.s1 + r * out.s2 : NULL;
            for (int64_t c = gl * V; c < C; c += G * V) {
                float gv[V], pv[V];
                ssm__cu_dk_loadv<T, V>(gp + c * g.s3, gv);
                if (op) {
                    ssm__cu_dk_loadv<T, V>(op + c * out.s3, pv);
                } else {
#pragma unroll
                    for (int v = 0; v < V; ++v)
                        pv[v] = h0.p ? ssm__cu_vec<T>::get(((const T *)h0.p)[b * h0.s0 + r * h0.s1 + (c + v) * h0.s2]) : 0.f;
                }
#pragma unroll
                for (int v = 0; v < V; ++v) {
                    acc = fmaf(gv[v], pv[v], acc);
                    if (t == 0 && dh0.p) ((T *)dh0.p)[b * dh0.s0 + r * dh0.s1 + (c + v) * dh0.s2] = ssm__cu_vec<T>::put(f * gv[v]);
                }
            }
        }
#pragma unroll
        for (int o = G / 2; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
        if (gl == 0 && row < rows) da[row] = f == 0.f ? 0.f : f * acc;
    }
}
/* The da kernel for a call: V-wide when g and out allow it, G = the lanes that cover a row (8, 16
   or 32). */
template <typename T>
static void ssm__cu_dk_da_go(cudaStream_t st, int vec, int64_t B, int64_t Tn, int64_t R, int64_t C, int per_step,
                             ssm__cu_dkv ld, ssm__cu_dkv g, ssm__cu_dkv out, ssm__cu_dkv h0, ssm__cu_dkv dh0, float *da) {
    constexpr int VV = 16 / sizeof(T);
    const int64_t lanes = vec ? (C + VV - 1) / VV : C;
    const int G = lanes <= 8 ? 8 : lanes <= 16 ? 16 : 32;
    const unsigned blocks = ssm__cu_blocks(B * Tn * R * G);
#define SSM__DA_GO(v)                                                                                                   \
    do {                                                                                                                \
        if (G == 8) ssm__cu_dk_da_kernel<T, v, 8><<<blocks, 256, 0, st>>>(B, Tn, R, C, per_step, ld, g, out, h0, dh0, da);  \
        else if (G == 16) ssm__cu_dk_da_kernel<T, v, 16><<<blocks, 256, 0, st>>>(B, Tn, R, C, per_step, ld, g, out, h0, dh0, da); \
        else ssm__cu_dk_da_kernel<T, v, 32><<<blocks, 256, 0, st>>>(B, Tn, R, C, per_step, ld, g, out, h0, dh0, da);     \
    } while (0)
    if (vec) SSM__DA_GO(VV);
    else SSM__DA_GO(1);
#undef SSM__DA_GO
}

template <typename T>
__global__ void ssm__cu_dk_dld_kernel(int64_t B, int64_t Tn, int64_t R, int per_step, const float *da, ssm__cu_dkv dld) {
    for (int64_t row = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; row < B * Tn * R;
         row += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = row % R, t = (row / R) % Tn, b = row / (R * Tn);
        float v = da[row];
        if (!per_step && t + 1 < Tn) v -= da[row + R];
        ((T *)dld.p)[b * dld.s0 + t * dld.s1 + r * dld.s2] = ssm__cu_vec<T>::put(v);
    }
}

/* ---- decay scan, tiled one-pass kernel (no time split across blocks) ---------------------------
   Used whenever B*R*C gives enough independent columns to fill the GPU (the usual shapes): one
   block of NT threads owns COLS = CW*V columns of one (b, r) row and walks the whole time axis in
   tiles of TG*TS steps (TG = NT/CW time groups). Thread (cw, tg) loads TS consecutive steps of
   its V columns (16-byte vectors) before any use, reduces them to an aggregate (product of the
   decays, local state from zero), the block scans the TG aggregates (warp shuffles, then one
   shared-memory pass over the warps' totals, one barrier per tile), and each thread replays its
   TS steps from its true start state, storing as it goes. The forward (16- or 8-byte vectors)
   streams x through a per-thread cp.async ring in shared memory, 1-4 tiles ahead, so loads stay
   in flight while the block scans and stores. No workspace, no inter-block waits,
   every element read once and written once. The backward kernel runs the same walk in reverse
   (g_t = dout_t + exp(a_{t+1}) g_{t+1} into dx) and, in the same pass, reads out_{t-1} to form
   da_t = exp(a_t) sum_c g_t out_{t-1}: per-block partial sums over its columns go to an f32
   scratch [B*T*R][ncb] that a small kernel folds into dlog_decay (in a fixed order). */
template <typename T> struct ssm__cu_dk16;
template <> struct ssm__cu_dk16<float> {
    static __device__ __forceinline__ void unpack(const uint4 &u, float *f) {
        f[0] = __uint_as_float(u.x), f[1] = __uint_as_float(u.y), f[2] = __uint_as_float(u.z), f[3] = __uint_as_float(u.w);
    }
    static __device__ __forceinline__ uint4 pack(const float *f) {
        return make_uint4(__float_as_uint(f[0]), __float_as_uint(f[1]), __float_as_uint(f[2]), __float_as_uint(f[3]));
    }
};
template <typename H2, typename T> struct ssm__cu_dk16h {
    static __device__ __forceinline__ float2 to2(unsigned w);
    static __device__ __forceinline__ unsigned of2(float a, float b);
};
template <> __device__ __forceinline__ float2 ssm__cu_dk16h<__half2, __half>::to2(unsigned w) {
    __half2 h = *reinterpret_cast<const __half2 *>(&w);
    return __half22float2(h);
}
template <> __device__ __forceinline__ unsigned ssm__cu_dk16h<__half2, __half>::of2(float a, float b) {
    __half2 h = __floats2half2_rn(a, b);
    return *reinterpret_cast<const unsigned *>(&h);
}
template <> __device__ __forceinline__ float2 ssm__cu_dk16h<__nv_bfloat162, __nv_bfloat16>::to2(unsigned w) {
    __nv_bfloat162 h = *reinterpret_cast<const __nv_bfloat162 *>(&w);
    return __bfloat1622float2(h);
}
template <> __device__ __forceinline__ unsigned ssm__cu_dk16h<__nv_bfloat162, __nv_bfloat16>::of2(float a, float b) {
    __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
    return *reinterpret_cast<const unsigned *>(&h);
}
template <typename H2, typename T> struct ssm__cu_dk16x {
    typedef ssm__cu_dk16h<H2, T> H;
    static __device__ __forceinline__ void unpack(const uint4 &u, float *f) {
        float2 a = H::to2(u.x), b = H::to2(u.y), c = H::to2(u.z), d = H::to2(u.w);
        f[0] = a.x, f[1] = a.y, f[2] = b.x, f[3] = b.y, f[4] = c.x, f[5] = c.y, f[6] = d.x, f[7] = d.y;
    }
    static __device__ __forceinline__ uint4 pack(const float *f) {
        return make_uint4(H::of2(f[0], f[1]), H::of2(f[2], f[3]), H::of2(f[4], f[5]), H::of2(f[6], f[7]));
    }
};
template <> struct ssm__cu_dk16<__half> : ssm__cu_dk16x<__half2, __half> {};
template <> struct ssm__cu_dk16<__nv_bfloat16> : ssm__cu_dk16x<__nv_bfloat162, __nv_bfloat16> {};
/* 8-byte packs of four 16-bit values */
template <typename H2, typename T> struct ssm__cu_dk8x {
    typedef ssm__cu_dk16h<H2, T> H;
    static __device__ __forceinline__ void unpack(const uint2 &u, float *f) {
        float2 a = H::to2(u.x), b = H::to2(u.y);
        f[0] = a.x, f[1] = a.y, f[2] = b.x, f[3] = b.y;
    }
    static __device__ __forceinline__ uint2 pack(const float *f) { return make_uint2(H::of2(f[0], f[1]), H::of2(f[2], f[3])); }
};
template <typename T> struct ssm__cu_dk8;
template <> struct ssm__cu_dk8<__half> : ssm__cu_dk8x<__half2, __half> {};
template <> struct ssm__cu_dk8<__nv_bfloat16> : ssm__cu_dk8x<__nv_bfloat162, __nv_bfloat16> {};

/* V columns of one row: V = 16 / sizeof(T) as one 16-byte vector (unit column stride), or V = 1
   (any stride; the pointer already points at the element). */
template <typename T, int V, int BYTES = V * (int)sizeof(T)> struct ssm__cu_dkio;
template <typename T, int V> struct ssm__cu_dkio<T, V, 8> {
    typedef uint2 raw;
    static __device__ __forceinline__ raw zero() { return make_uint2(0u, 0u); }
    static __device__ __forceinline__ raw load(const T *p) { return __ldcs((const uint2 *)p); }
    static __device__ __forceinline__ void unpack(const raw &u, float *f) { ssm__cu_dk8<T>::unpack(u, f); }
    static __device__ __forceinline__ void store(T *p, const float *f) { __stcs((uint2 *)p, ssm__cu_dk8<T>::pack(f)); }
};
template <typename T, int V> struct ssm__cu_dkio<T, V, 16> {
    typedef uint4 raw;
    static __device__ __forceinline__ raw zero() { return make_uint4(0u, 0u, 0u, 0u); }
    static __device__ __forceinline__ raw load(const T *p) { return __ldcs((const uint4 *)p); }
    static __device__ __forceinline__ void unpack(const raw &u, float *f) { ssm__cu_dk16<T>::unpack(u, f); }
    static __device__ __forceinline__ void store(T *p, const float *f) { __stcs((uint4 *)p, ssm__cu_dk16<T>::pack(f)); }
};
template <typename T, int BYTES> struct ssm__cu_dkio<T, 1, BYTES> {
    typedef T raw;
    static __device__ __forceinline__ raw zero() { return ssm__cu_vec<T>::put(0.f); }
    static __device__ __forceinline__ raw load(const T *p) { return *p; }
    static __device__ __forceinline__ void unpack(const raw &u, float *f) { f[0] = ssm__cu_vec<T>::get(u); }
    static __device__ __forceinline__ void store(T *p, const float *f) { *p = ssm__cu_vec<T>::put(f[0]); }
};

#define SSM__DKT_THREADS 256

/* BWD = 0: x = x, out = out, init = h0, fin = hT.
   BWD = 1: x = dout, out = dx, init = dhT, fin = dh0, prev = the forward out, h0 = h0, da = partials. */
/* One thread's TS steps of a tile from u0 on (time index u; t = u forward, T-1-u backward). */
template <typename T, typename IO, int TS, int BWD>
__device__ __forceinline__ void ssm__cu_dkt_load(int64_t u0, int64_t Tn, bool valid, int per_step, const T *ldp, int64_t ldb,
                                                 int64_t lds, const T *xp, int64_t xs, const T *pp, int64_t ps,
                                                 typename IO::raw *xr, float *f, typename IO::raw *pr, float *fo) {
#pragma unroll
    for (int s = 0; s < TS; ++s) {
        const int64_t u = u0 + s, t = BWD ? Tn - 1 - u : u;
        const bool in = u < Tn;
        f[s] = in ? ssm__cu_dk_step(ldp, ldb, lds, BWD ? t + 1 : t, Tn, per_step) : 0.f;
        xr[s] = in && valid ? IO::load(xp + t * xs) : IO::zero();
        if (BWD) {
            fo[s] = in ? ssm__cu_dk_step(ldp, ldb, lds, t, Tn, per_step) : 0.f;
            pr[s] = in && valid && t > 0 ? IO::load(pp + (t - 1) * ps) : IO::zero();
        }
    }
}

/* cp.async of one thread's V columns (8 or 16 bytes); zero-filled (no read) when !ok. */
template <int N> __device__ __forceinline__ void ssm__cu_dkt_cp(void *dst, const void *src, bool ok);
template <> __device__ __forceinline__ void ssm__cu_dkt_cp<16>(void *dst, const void *src, bool ok) { ssm__tc_cp16z(dst, src, ok); }
template <> __device__ __forceinline__ void ssm__cu_dkt_cp<8>(void *dst, const void *src, bool ok) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(ssm__tc_sa(dst)), "l"(src), "r"(ok ? 8 : 0) : "memory");
}

template <int N> __device__ __forceinline__ void ssm__cu_dkt_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }
__device__ __forceinline__ void ssm__cu_dkt_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

/* PF = 1 (forward, vector loads): x streams through a per-thread cp.async ring in shared memory,
   ND tiles ahead of the scan (ND = 32 KiB / the tile's bytes, 1..4), and the log decays one tile
   ahead in registers, so a block keeps loads in flight while it scans and stores. */
template <typename T, int V, int CW, int TS, int BWD, int PF>
__global__ void __launch_bounds__(SSM__DKT_THREADS, (TS == 4 && !BWD) ? 3 : 2) ssm__cu_dkt_kernel(
    int64_t B, int64_t Tn, int64_t R, int64_t C, int64_t ncb, int per_step, ssm__cu_dkv ld, ssm__cu_dkv x,
    ssm__cu_dkv out, ssm__cu_dkv init, ssm__cu_dkv fin, ssm__cu_dkv prev, ssm__cu_dkv h0, float *da) {
    constexpr int NT = SSM__DKT_THREADS, TG = NT / CW, NW = NT / 32, TGW = 32 / CW, TILE = TG * TS;
    typedef ssm__cu_dkio<T, V> io;
    __shared__ float s_P[2][NW][CW];
    __shared__ float s_h[2][NW][V][CW];
    const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5, cw = tid % CW, tg = tid / CW, tgw = lane / CW;
    const int64_t id = blockIdx.x, cb = id % ncb, br = id / ncb, r = br % R, b = br / R;
    const int64_t c = (cb * CW + cw) * V;
    const bool valid = c < C;
    const int64_t cc = valid ? c : 0;
    const T *ldp = (const T *)ld.p;
    const int64_t ldb = b * ld.s0 + r * ld.s2;
    const T *xp = (const T *)x.p + b * x.s0 + r * x.s2 + cc * x.s3;
    T *op = (T *)out.p + b * out.s0 + r * out.s2 + cc * out.s3;
    const T *pp = BWD ? (const T *)prev.p + b * prev.s0 + r * prev.s2 + cc * prev.s3 : NULL;
    float carry[V];
#pragma unroll
    for (int v = 0; v < V; ++v) carry[v] = 0.f;
    if (init.p && valid) ssm__cu_dk_init<T, V>(init, b, r, cc, carry);
    int buf = 0;
    typedef typename io::raw raw;
    constexpr int CP = PF && !BWD && V > 1, RB = (int)sizeof(raw), NDQ = 32768 / (TS * NT * RB);
    constexpr int ND = CP ? (NDQ < 1 ? 1 : NDQ > 4 ? 4 : NDQ) : 1;
    __shared__ raw s_x[ND][CP ? TS : 1][CP ? NT : 1];
    float nf[TS];
    int slot = 0;
    if (CP) {
#pragma unroll
        for (int j = 0; j < ND; ++j) {
#pragma unroll
            for (int s = 0; s < TS; ++s) {
                const int64_t u = (int64_t)j * TILE + (int64_t)tg * TS + s;
                const bool ok = u < Tn && valid;
                ssm__cu_dkt_cp<CP ? RB : 16>(&s_x[j][s][tid], ok ? xp + u * x.s1 : xp, ok);
            }
            ssm__cu_dkt_commit();
        }
#pragma unroll
        for (int s = 0; s < TS; ++s) {
            const int64_t u = (int64_t)tg * TS + s;
            nf[s] = u < Tn ? ssm__cu_dk_step(ldp, ldb, ld.s1, u, Tn, per_step) : 0.f;
        }
    }
    for (int64_t t0 = 0; t0 < Tn; t0 += TILE, buf ^= 1) {
        const int64_t u0 = t0 + (int64_t)tg * TS;
        raw xr[TS], pr[TS];
        float f[TS], fo[TS];
        /* every load of the tile first (CP: this tile's x was issued ND tiles earlier) */
        if (CP) {
            ssm__cu_dkt_wait<ND - 1>();
#pragma unroll
            for (int s = 0; s < TS; ++s) xr[s] = s_x[slot][s][tid], f[s] = nf[s];
#pragma unroll
            for (int s = 0; s < TS; ++s) {
                const int64_t u = u0 + TILE + s;
                nf[s] = u < Tn ? ssm__cu_dk_step(ldp, ldb, ld.s1, u, Tn, per_step) : 0.f;
            }
        } else {
            ssm__cu_dkt_load<T, io, TS, BWD>(u0, Tn, valid, per_step, ldp, ldb, ld.s1, xp, x.s1, pp, prev.s1, xr, f, pr,
                                             fo);
        }
        /* aggregate of this thread's TS steps */
        float P = 1.f, hl[V];
#pragma unroll
        for (int v = 0; v < V; ++v) hl[v] = 0.f;
#pragma unroll
        for (int s = 0; s < TS; ++s) {
            float xv[V];
            io::unpack(xr[s], xv);
            f[s] = expf(f[s]);
            P *= f[s];
#pragma unroll
            for (int v = 0; v < V; ++v) hl[v] = fmaf(f[s], hl[v], xv[v]);
        }
        if (CP) { /* refill the slot just read (its values are in registers and used): the tile ND ahead */
#pragma unroll
            for (int s = 0; s < TS; ++s) {
                const int64_t u = u0 + (int64_t)ND * TILE + s;
                const bool ok = u < Tn && valid;
                ssm__cu_dkt_cp<CP ? RB : 16>(&s_x[slot][s][tid], ok ? xp + u * x.s1 : xp, ok);
            }
            ssm__cu_dkt_commit();
            slot = slot + 1 == ND ? 0 : slot + 1;
        }
        /* inclusive scan over the warp's time groups (lanes cw, cw + CW, ...) */
#pragma unroll
        for (int off = CW; off < 32; off <<= 1) {
            const float Pp = __shfl_up_sync(0xffffffffu, P, off);
            float hp[V];
#pragma unroll
            for (int v = 0; v < V; ++v) hp[v] = __shfl_up_sync(0xffffffffu, hl[v], off);
            if (lane >= off) {
#pragma unroll
                for (int v = 0; v < V; ++v) hl[v] = fmaf(P, hp[v], hl[v]);
                P *= Pp;
            }
        }
        float Pe = 1.f, he[V];
        {
            const float q = __shfl_up_sync(0xffffffffu, P, CW & 31);
            Pe = tgw > 0 ? q : 1.f;
#pragma unroll
            for (int v = 0; v < V; ++v) {
                const float y = __shfl_up_sync(0xffffffffu, hl[v], CW & 31);
                he[v] = tgw > 0 ? y : 0.f;
            }
        }
        if (tgw == TGW - 1) {
            s_P[buf][w][cw] = P;
#pragma unroll
            for (int v = 0; v < V; ++v) s_h[buf][w][v][cw] = hl[v];
        }
        __syncthreads();
        /* fold the warps' totals: the state before this warp, and the carry past the tile */
        float st[V];
#pragma unroll
        for (int v = 0; v < V; ++v) st[v] = carry[v];
#pragma unroll
        for (int k = 0; k < NW; ++k) {
            if (k == w) {
#pragma unroll
                for (int v = 0; v < V; ++v) st[v] = carry[v];
            }
            const float pk = s_P[buf][k][cw];
#pragma unroll
            for (int v = 0; v < V; ++v) carry[v] = fmaf(pk, carry[v], s_h[buf][k][v][cw]);
        }
        /* replay the TS steps from the true start state */
        float h[V];
#pragma unroll
        for (int v = 0; v < V; ++v) h[v] = fmaf(Pe, st[v], he[v]);
#pragma unroll
        for (int s = 0; s < TS; ++s) {
            const int64_t u = u0 + s, t = BWD ? Tn - 1 - u : u;
            const bool in = u < Tn;
            float xv[V];
            io::unpack(xr[s], xv);
#pragma unroll
            for (int v = 0; v < V; ++v) h[v] = fmaf(f[s], h[v], xv[v]);
            if (in && valid) io::store(op + t * out.s1, h);
            if (BWD) {
                float pv[V], dot = 0.f;
                if (t == 0) {
#pragma unroll
                    for (int v = 0; v < V; ++v)
                        pv[v] = h0.p && valid ? ssm__cu_vec<T>::get(((const T *)h0.p)[b * h0.s0 + r * h0.s1 + (cc + v) * h0.s2]) : 0.f;
                } else {
                    io::unpack(pr[s], pv);
                }
#pragma unroll
                for (int v = 0; v < V; ++v) dot = fmaf(h[v], pv[v], dot);
#pragma unroll
                for (int o = 1; o < CW; o <<= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
                if (in && cw == 0) {
                    const float fa = expf(fo[s]);
                    da[((b * Tn + t) * R + r) * ncb + cb] = fa == 0.f ? 0.f : fa * dot;
                }
            }
        }
    }
    if (CP) ssm__cu_dkt_wait<0>();
    if (fin.p && valid && tg == 0) {
        T *fp = (T *)fin.p + b * fin.s0 + r * fin.s1;
        const float sc = BWD ? expf(ssm__cu_dk_step(ldp, ldb, ld.s1, 0, Tn, per_step)) : 1.f;
#pragma unroll
        for (int v = 0; v < V; ++v) fp[(cc + v) * fin.s2] = ssm__cu_vec<T>::put(sc * carry[v]);
    }
}

/* dlog_decay[b,t,r] from the partials: da_t (per-step) or da_t - da_{t+1} (cumulative). */
template <typename T>
__global__ void ssm__cu_dkt_dld_kernel(int64_t B, int64_t Tn, int64_t R, int64_t ncb, int per_step, const float *da,
                                       ssm__cu_dkv dld) {
    for (int64_t row = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; row < B * Tn * R;
         row += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = row % R, t = (row / R) % Tn, b = row / (R * Tn);
        float v = 0.f, n = 0.f;
        for (int64_t k = 0; k < ncb; ++k) v += da[row * ncb + k];
        if (!per_step && t + 1 < Tn) {
            for (int64_t k = 0; k < ncb; ++k) n += da[(row + R) * ncb + k];
            v -= n;
        }
        ((T *)dld.p)[b * dld.s0 + t * dld.s1 + r * dld.s2] = ssm__cu_vec<T>::put(v);
    }
}

typedef struct ssm__cu_dkt_plan {
    int use, V, CW, TS, PF;
    int64_t ncb, blocks;
} ssm__cu_dkt_plan;

/* The tiled kernel's shape for a call; k = the config's kernel-choice fields (0 = by shape). */
static ssm__cu_dkt_plan ssm__cu_dkt_plan_of(ssm_dtype dt, int64_t B, int64_t T, int64_t R, int64_t C, int vec,
                                            int backward, int sms, const ssm_cuda_config *k) {
    ssm__cu_dkt_plan p;
    p.V = vec ? (dt.bits == 32 || k->decay_tile_vec == 4 ? 4 : 8) : 1;
    if (p.V > 1) {
        /* measured on an H200 (dev/cuda/decay_variants.cu, bench/results/cuda_decay_perf.log):
           forward f32 with the cp.async ring 16 threads x 8 steps per row segment when there are >= 3 blocks of 16 per SM
           (else 8 x 8, 4 x 8 under 1 block of 8 per SM; without the ring 8 x 4, x 8 under 3 blocks per SM), 16-bit 8 x 8
           when there are >= 3 blocks per SM (else 4 x 8); backward f32 16 x 8 with >= 3 blocks per SM (else 8 x 4),
           16-bit 4 x 4 (8 x 8 spills). */
        const int64_t rows = B * R;
        p.PF = !backward; /* the forward's cp.async ring (the backward has none) */
        if (k->decay_prefetch) p.PF = k->decay_prefetch - 1;
#define SSM__DKT_NCB(w) ((C + (int64_t)(w) * p.V - 1) / ((int64_t)(w) * p.V))
        if (!backward) {
            if (p.V == 4 && dt.bits == 32 && p.PF)
                p.CW = rows * SSM__DKT_NCB(16) >= 3 * (int64_t)sms ? 16 : rows * SSM__DKT_NCB(8) >= (int64_t)sms ? 8 : 4, p.TS = 8;
            else if (p.V == 4 && dt.bits == 32)
                p.CW = rows * SSM__DKT_NCB(8) >= (int64_t)sms ? 8 : 4, p.TS = rows * SSM__DKT_NCB(8) >= 3 * (int64_t)sms ? 4 : 8;
            else p.CW = rows * SSM__DKT_NCB(8) >= 3 * (int64_t)sms ? 8 : 4, p.TS = p.V == 8 ? 8 : 4;
        } else if (dt.bits == 32) {
            if (rows * SSM__DKT_NCB(16) >= 3 * (int64_t)sms) p.CW = 16, p.TS = 8;
            else p.CW = 8, p.TS = 4;
        } else {
            p.CW = 4, p.TS = 4;
        }
#undef SSM__DKT_NCB
        if (k->decay_tile_cols) p.CW = k->decay_tile_cols;
        if (k->decay_tile_steps) p.TS = k->decay_tile_steps;
    } else {
        p.CW = C <= 8 ? 8 : 32;
        p.TS = 4, p.PF = 0;
    }
    p.ncb = (C + (int64_t)p.CW * p.V - 1) / ((int64_t)p.CW * p.V);
    p.blocks = B * R * p.ncb;
    /* too few columns to fill the GPU (long T, small B*R*C): split time (look-back kernel) */
    p.use = p.blocks >= (int64_t)sms && p.blocks <= 2147483647;
    if (k->decay_kernel == 1 || k->decay_kernel == 3) p.use = 0;
    if (k->decay_kernel == 2) p.use = p.blocks <= 2147483647;
    return p;
}

template <typename T, int V, int CW, int TS, int BWD>
static void ssm__cu_dkt_go3(const ssm__cu_dkt_plan *p, cudaStream_t st, int64_t B, int64_t Tn, int64_t R, int64_t C,
                            int per_step, ssm__cu_dkv ld, ssm__cu_dkv x, ssm__cu_dkv out, ssm__cu_dkv init,
                            ssm__cu_dkv fin, ssm__cu_dkv prev, ssm__cu_dkv h0, float *da) {
    if (V > 1 && !BWD && p->PF) /* (no prefetch variant of the scalar or the backward kernel) */
        ssm__cu_dkt_kernel<T, V, CW, TS, BWD, (V > 1 && !BWD)><<<(unsigned)p->blocks, SSM__DKT_THREADS, 0, st>>>(
            B, Tn, R, C, p->ncb, per_step, ld, x, out, init, fin, prev, h0, da);
    else
        ssm__cu_dkt_kernel<T, V, CW, TS, BWD, 0><<<(unsigned)p->blocks, SSM__DKT_THREADS, 0, st>>>(
            B, Tn, R, C, p->ncb, per_step, ld, x, out, init, fin, prev, h0, da);
}
template <typename T, int BWD>
static void ssm__cu_dkt_go(const ssm__cu_dkt_plan *p, cudaStream_t st, int64_t B, int64_t Tn, int64_t R, int64_t C,
                           int per_step, ssm__cu_dkv ld, ssm__cu_dkv x, ssm__cu_dkv out, ssm__cu_dkv init,
                           ssm__cu_dkv fin, ssm__cu_dkv prev, ssm__cu_dkv h0, float *da) {
    constexpr int V = 16 / sizeof(T), V2 = sizeof(T) == 2 ? 4 : V;
#define SSM__DKT_GO(v, cw, ts) \
    ssm__cu_dkt_go3<T, v, cw, ts, BWD>(p, st, B, Tn, R, C, per_step, ld, x, out, init, fin, prev, h0, da)
#define SSM__DKT_GO_CW(v, ts)                   \
    do {                                        \
        if (p->CW == 16) SSM__DKT_GO(v, 16, ts); \
        else if (p->CW == 8) SSM__DKT_GO(v, 8, ts); \
        else SSM__DKT_GO(v, 4, ts);             \
    } while (0)
    if (p->V == 1) {
        if (p->CW == 8) SSM__DKT_GO(1, 8, 4);
        else SSM__DKT_GO(1, 32, 4);
    } else if (p->V == V) {
        if (p->TS == 8) SSM__DKT_GO_CW(V, 8);
        else SSM__DKT_GO_CW(V, 4);
    } else if (V2 != V) {
        if (p->TS == 8) SSM__DKT_GO_CW(V2, 8);
        else SSM__DKT_GO_CW(V2, 4);
    }
#undef SSM__DKT_GO_CW
#undef SSM__DKT_GO
}

/* ---- decay scan, chunked: reduce, carries, rescan ------------------------------------------------
   For sequences whose few columns leave the tiled kernel too few blocks and the look-back a long
   chain of chunk hand-offs (its time is that chain's latency, not bandwidth). Three kernels:
   (1) every chunk of SSM__DKS_L steps of V columns of one row reduced from zero, in processing
   order (REV: time reversed with the factor exp(a_{t+1}): the backward's g_t = dout_t +
   exp(a_{t+1}) g_{t+1}), to its end state and its product of decays; (2) those turned into every
   chunk's entering state from init, in order (32 warps on segments of the chunks of 32 adjacent
   column groups, the segments folded through shared memory: a fixed order, deterministic), and
   the end state; (3) every chunk scanned again from its entering state, writing out. x is read
   twice; no chunk waits for another. A context-parallel call splits them around the exchange:
   (1) and the span's map from (2) need no carry (the decay_span slot), (2) from the true carry
   and (3) come after, on the partials (1) left in the workspace. */
/* A compile-time length: H200, B1 T65536 D64 f16, the forward took 0.494 ms with it against 0.548
   with the same 64 passed at run time (bench/results/cuda_decay_constL_18cf164.log). */
#define SSM__DKS_L 64
enum { SSM__DKS_REDUCE = 1, SSM__DKS_CARRY = 2, SSM__DKS_RESCAN = 4, SSM__DKS_MAP = 8 };

/* (h, P) of the steps before, then (hn, Pn) of the steps after. */
template <int V>
__device__ __forceinline__ void ssm__cu_dks_join(float *h, float &P, const float *hn, float Pn) {
#pragma unroll
    for (int v = 0; v < V; ++v) h[v] = fmaf(Pn, h[v], hn[v]);
    P *= Pn;
}

/* A thread's place: (b, slice) pair bs, its row r and first column c (valid: inside R C). */
struct ssm__cu_dks_at {
    int64_t bs, b, r, c;
    bool valid;
};
template <int V>
__device__ __forceinline__ ssm__cu_dks_at ssm__cu_dks_place(int64_t bs, int64_t slices, int64_t tid, int64_t R, int64_t C) {
    ssm__cu_dks_at a;
    const int64_t e0 = ((bs % slices) * 256 + tid) * V;
    a.bs = bs, a.b = bs / slices, a.valid = e0 < R * C;
    a.r = a.valid ? e0 / C : 0, a.c = a.valid ? e0 % C : 0;
    return a;
}

/* The steps of chunk k from state h (zero: the reduce; the entering state: the rescan), in
   processing order; with out, each state stored (a V-wide store when ovec). */
template <typename T, int V, int REV, int STORE>
__device__ __forceinline__ void ssm__cu_dks_steps(const ssm__cu_dks_at &a, int64_t k, int64_t Tn, int per_step,
                                                  const ssm__cu_dkv &ld, const ssm__cu_dkv &x, const ssm__cu_dkv &out,
                                                  int ovec, float *h, float &P) {
    const T *ldp = (const T *)ld.p, *xp = (const T *)x.p + a.b * x.s0 + a.r * x.s2 + a.c * x.s3;
    T *op = STORE ? (T *)out.p + a.b * out.s0 + a.r * out.s2 + a.c * out.s3 : NULL;
    const int64_t ldb = a.b * ld.s0 + a.r * ld.s2, u0 = k * SSM__DKS_L, u1 = min(Tn, u0 + SSM__DKS_L);
#pragma unroll 8
    for (int64_t u = u0; u < u1; ++u) {
        const int64_t t = REV ? Tn - 1 - u : u;
        const float f = expf(ssm__cu_dk_step(ldp, ldb, ld.s1, REV ? t + 1 : t, Tn, per_step));
        float xv[V];
        ssm__cu_dk_loadv<T, V>(xp + t * x.s1, xv);
        ssm__cu_dks_join<V>(h, P, xv, f);
        if (STORE) {
            if (V > 1 && ovec) {
                ssm__cu_dk_storev<T, V>(op + t * out.s1, h);
            } else {
#pragma unroll
                for (int v = 0; v < V; ++v) op[t * out.s1 + v * out.s3] = ssm__cu_vec<T>::put(h[v]);
            }
        }
    }
}

/* Partials: per (b, slice) pair and chunk, V + 1 floats a thread (the state, then the product). */
__device__ __forceinline__ float *ssm__cu_dks_slot(float *part, int64_t bs, int64_t k, int64_t nchunks, int V, int64_t tid) {
    return part + (bs * nchunks + k) * (V + 1) * 256 + tid;
}

/* Chunks k .. k+3 (those below k1) of a thread's partials, loaded before any is used. */
template <int V>
__device__ __forceinline__ void ssm__cu_dks_batch(float *part, int64_t bs, int64_t k, int64_t k1, int64_t nchunks,
                                                  int64_t tid, float (*hk)[V], float *Pk) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        const float *q = ssm__cu_dks_slot(part, bs, k + j < k1 ? k + j : k, nchunks, V, tid);
#pragma unroll
        for (int v = 0; v < V; ++v) hk[j][v] = __ldcg(q + v * 256);
        Pk[j] = __ldcg(q + V * 256);
    }
}

/* (1) reduce (RESCAN = 0) or (3) rescan (RESCAN = 1): a block per (b, slice, chunk). */
template <typename T, int V, int REV, int RESCAN>
__global__ void __launch_bounds__(256) ssm__cu_dks_chunk_kernel(int64_t Tn, int64_t R, int64_t C, int64_t slices,
                                                                int64_t nchunks, int per_step, ssm__cu_dkv ld,
                                                                ssm__cu_dkv x, ssm__cu_dkv out, int ovec, float *part) {
    const int64_t id = blockIdx.x, k = id % nchunks;
    const ssm__cu_dks_at a = ssm__cu_dks_place<V>(id / nchunks, slices, threadIdx.x, R, C);
    float *q = ssm__cu_dks_slot(part, a.bs, k, nchunks, V, threadIdx.x);
    float h[V], P = 1.f;
#pragma unroll
    for (int v = 0; v < V; ++v) h[v] = RESCAN ? q[v * 256] : 0.f;
    if (a.valid) ssm__cu_dks_steps<T, V, REV, RESCAN>(a, k, Tn, per_step, ld, x, out, ovec, h, P);
    if (!RESCAN) {
#pragma unroll
        for (int v = 0; v < V; ++v) q[v * 256] = h[v];
        q[V * 256] = P;
    }
}

/* (2) with CARRY each chunk's state slot becomes the state entering it from init, and fin (the
   call's dtype) gets the end state; with MAP, map (f32) gets the end state and the product of every
   step's decay, both times exp(a_0) when REV (the adjoint's map: what the state entering the span
   receives). A block of 32 warps per 32 adjacent column groups (threads of a chunk block) of one
   (b, slice): lane = column group, so every load is coalesced; warp w takes the w-th of 32
   segments of the chunks, reduces it, and starts its walk from the segments before it, folded in
   order through shared memory (a fixed order: deterministic). */
template <typename T, int V, int REV>
__global__ void __launch_bounds__(1024) ssm__cu_dks_carry_kernel(int64_t B, int64_t Tn, int64_t R, int64_t C, int64_t slices,
                                                                 int64_t nchunks, int per_step, ssm__cu_dkv ld,
                                                                 ssm__cu_dkv init, int carries, ssm__cu_dkv fin, float *map,
                                                                 float *part) {
    __shared__ float s_seg[32][32][V + 1]; /* [segment][lane]: its state from zero, then its product */
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const int64_t per = (nchunks + 31) / 32, k0 = min(nchunks, w * per), k1 = min(nchunks, k0 + per);
    for (int64_t g = blockIdx.x; g < B * slices * 8; g += gridDim.x) { /* 8 groups of 32 lanes a (b, slice) */
        const int64_t tid = (g % 8) * 32 + lane;
        const ssm__cu_dks_at a = ssm__cu_dks_place<V>(g / 8, slices, tid, R, C);
        float h[V], P = 1.f, st[V], unused = 1.f;
#pragma unroll
        for (int v = 0; v < V; ++v) h[v] = 0.f, st[v] = 0.f;
        if (a.valid)
            for (int64_t k = k0; k < k1; k += 4) { /* this warp's segment, four chunks' loads at a time */
                float hk[4][V], Pk[4];
                ssm__cu_dks_batch<V>(part, a.bs, k, k1, nchunks, tid, hk, Pk);
#pragma unroll
                for (int j = 0; j < 4; ++j)
                    if (k + j < k1) ssm__cu_dks_join<V>(h, P, hk[j], Pk[j]);
            }
#pragma unroll
        for (int v = 0; v < V; ++v) s_seg[w][lane][v] = h[v];
        s_seg[w][lane][V] = P;
        __syncthreads();
        if (a.valid) {
            if (init.p) ssm__cu_dk_init<T, V>(init, a.b, a.r, a.c, st);
            for (int j = 0; j < w; ++j) ssm__cu_dks_join<V>(st, unused, s_seg[j][lane], s_seg[j][lane][V]);
            if (w == 31) { /* the end state: the last segment from the state entering it */
                const float sc = REV ? expf(ssm__cu_dk_step((const T *)ld.p, a.b * ld.s0 + a.r * ld.s2, ld.s1, 0, Tn, per_step))
                                     : 1.f;
                float Ptot = P;
                for (int j = 0; j < 31; ++j) Ptot *= s_seg[j][lane][V];
                if (carries && fin.p) {
                    T *fp = (T *)fin.p + a.b * fin.s0 + a.r * fin.s1;
#pragma unroll
                    for (int v = 0; v < V; ++v) fp[(a.c + v) * fin.s2] = ssm__cu_vec<T>::put(sc * fmaf(P, st[v], h[v]));
                }
                if (map) {
#pragma unroll
                    for (int v = 0; v < V; ++v) map[(a.b * R + a.r) * C + a.c + v] = sc * fmaf(P, st[v], h[v]);
                    if (a.c == 0) map[B * R * C + a.b * R + a.r] = sc * Ptot;
                }
            }
            if (carries)
                for (int64_t k = k0; k < k1; k += 4) {
                    float hk[4][V], Pk[4];
                    ssm__cu_dks_batch<V>(part, a.bs, k, k1, nchunks, tid, hk, Pk);
#pragma unroll
                    for (int j = 0; j < 4; ++j)
                        if (k + j < k1) {
                            float *q = ssm__cu_dks_slot(part, a.bs, k + j, nchunks, V, tid);
#pragma unroll
                            for (int v = 0; v < V; ++v) q[v * 256] = st[v];
                            ssm__cu_dks_join<V>(st, unused, hk[j], Pk[j]);
                        }
                }
        }
        __syncthreads(); /* s_seg is rewritten for the next group */
    }
}

typedef struct ssm__cu_dks_plan {
    int V;
    int64_t slices, nchunks, blocks, groups; /* groups: the carry kernel's (32 column groups each) */
    size_t bytes; /* the partials */
} ssm__cu_dks_plan;

static ssm__cu_dks_plan ssm__cu_dks_plan_of(ssm_dtype dt, int64_t B, int64_t T, int64_t R, int64_t C, int vec) {
    ssm__cu_dks_plan p;
    p.V = vec ? (int)(16 / ssm__cu_esize(dt)) : 1;
    p.slices = (R * C + 256 * (int64_t)p.V - 1) / (256 * (int64_t)p.V);
    p.nchunks = (T + SSM__DKS_L - 1) / SSM__DKS_L;
    p.blocks = B * p.slices * p.nchunks;
    p.groups = B * p.slices * 8;
    p.bytes = (size_t)p.blocks * (size_t)(p.V + 1) * 256u * 4u;
    return p;
}

template <typename T, int V, int REV>
static void ssm__cu_dks_go3(const ssm__cu_dks_plan *p, cudaStream_t st, int stages, int64_t B, int64_t Tn, int64_t R,
                            int64_t C, int per_step, ssm__cu_dkv ld, ssm__cu_dkv x, ssm__cu_dkv out, int ovec,
                            ssm__cu_dkv init, ssm__cu_dkv fin, float *map, float *part) {
    const unsigned blocks = (unsigned)p->blocks;
    if (stages & SSM__DKS_REDUCE)
        ssm__cu_dks_chunk_kernel<T, V, REV, 0><<<blocks, 256, 0, st>>>(Tn, R, C, p->slices, p->nchunks, per_step, ld,
                                                                        x, out, ovec, part);
    if (stages & (SSM__DKS_CARRY | SSM__DKS_MAP))
        ssm__cu_dks_carry_kernel<T, V, REV><<<(unsigned)(p->groups < 1048576 ? p->groups : 1048576), 1024, 0, st>>>(
            B, Tn, R, C, p->slices, p->nchunks, per_step, ld, init, (stages & SSM__DKS_CARRY) != 0, fin,
            (stages & SSM__DKS_MAP) ? map : NULL, part);
    if (stages & SSM__DKS_RESCAN)
        ssm__cu_dks_chunk_kernel<T, V, REV, 1><<<blocks, 256, 0, st>>>(Tn, R, C, p->slices, p->nchunks, per_step, ld,
                                                                        x, out, ovec, part);
}
template <typename T, int REV>
static void ssm__cu_dks_go(const ssm__cu_dks_plan *p, cudaStream_t st, int stages, int64_t B, int64_t Tn, int64_t R,
                           int64_t C, int per_step, ssm__cu_dkv ld, ssm__cu_dkv x, ssm__cu_dkv out, int ovec,
                           ssm__cu_dkv init, ssm__cu_dkv fin, float *map, float *part) {
    if (p->V > 1)
        ssm__cu_dks_go3<T, 16 / sizeof(T), REV>(p, st, stages, B, Tn, R, C, per_step, ld, x, out, ovec, init, fin, map, part);
    else ssm__cu_dks_go3<T, 1, REV>(p, st, stages, B, Tn, R, C, per_step, ld, x, out, ovec, init, fin, map, part);
}

/* The chunked scan's stages (SSM__DKS_*) on the partials at part: x into out (forward), or
   rev = 1 dout into dx (the backward's g); out's 16-byte stores when its rows allow them. */
static ssm_result ssm__cu_dks_run(ssm_ctx *ctx, const ssm__cu_dks_plan *p, ssm_dtype dt, int rev, int stages,
                                  const ssm_decay_plan *d, const ssm_tensor *ld, const ssm_tensor *x, const ssm_tensor *out,
                                  const ssm_tensor *init, const ssm_tensor *fin, float *map, float *part) {
    cudaStream_t st = ssm__cu_st(ctx)->stream;
    const ssm_tensor *vo[1] = {out};
    const int ps = d->input == SSM_DECAY_PER_STEP, ovec = out && p->V > 1 && ssm__cu_dk_vec_ok(dt, d->C, vo, 1);
    ssm__cu_dkv vl = ssm__cu_dkv_of(ld), vx = ssm__cu_dkv_of(x), vout = ssm__cu_dkv_of(out);
    ssm__cu_dkv vi = ssm__cu_dkv_of(init), vf = ssm__cu_dkv_of(fin);
    if (p->blocks > 2147483647)
        return ssm_ctx_error(ctx, SSM_ERROR_UNSUPPORTED, "decay scan (chunked): too many blocks");
#define SSM__DKS_GO(TT)                                                                                                  \
    (rev ? ssm__cu_dks_go<TT, 1>(p, st, stages, d->B, d->T, d->R, d->C, ps, vl, vx, vout, ovec, vi, vf, map, part)      \
         : ssm__cu_dks_go<TT, 0>(p, st, stages, d->B, d->T, d->R, d->C, ps, vl, vx, vout, ovec, vi, vf, map, part))
    if (dt.bits == 32) SSM__DKS_GO(float);
    else if (dt.code == SSM_DTYPE_BFLOAT) SSM__DKS_GO(__nv_bfloat16);
    else SSM__DKS_GO(__half);
#undef SSM__DKS_GO
    SSM__CU_LAUNCHED(ctx, "ssm__cu_dks_chunk_kernel / carry");
    return SSM_OK;
}
static ssm__cu_dks_plan ssm__cu_dks_plan_for(const ssm_decay_plan *d, const ssm_tensor *x) {
    const ssm_tensor *vt[1] = {x};
    return ssm__cu_dks_plan_of(x->dtype, d->B, d->T, d->R, d->C, ssm__cu_dk_vec_ok(x->dtype, d->C, vt, 1));
}

/* The decay_span slot: the reduce and, with a map, the span's map (the adjoint's from dout);
   the scan slots then start from the partials (plan->span = 2). */
static ssm_result ssm__cu_decay_span(ssm_ctx *ctx, const ssm_decay_plan *d, int adjoint, const ssm_tensor *ld,
                                     const ssm_tensor *x, const ssm_tensor *init, void *map) {
    ssm__cu_device_guard guard(ssm__cu_st(ctx)->device);
    const ssm__cu_dks_plan p = ssm__cu_dks_plan_for(d, x);
    void *ws;
    SSM__TRY(ssm_ctx_workspace(ctx, p.bytes, &ws));
    return ssm__cu_dks_run(ctx, &p, x->dtype, adjoint, SSM__DKS_REDUCE | (map ? SSM__DKS_MAP : 0), d, ld, x, NULL, init,
                           NULL, (float *)map, (float *)ws);
}

/* Device bytes of a decay call: an upper bound over both kernels and both vector widths (the
   choice depends on the data's alignment, unknown to a size query). */
static size_t ssm__cu_decay_ws(const ssm_decay_plan *d) {
    ssm__cu_dk_plan p = ssm__cu_dk_plan_of(d->dtype, d->B, d->T, d->R, d->C, 1);
    ssm__cu_dk_plan q = ssm__cu_dk_plan_of(d->dtype, d->B, d->T, d->R, d->C, 0);
    ssm__cu_dks_plan c1 = ssm__cu_dks_plan_of(d->dtype, d->B, d->T, d->R, d->C, 1);
    ssm__cu_dks_plan c0 = ssm__cu_dks_plan_of(d->dtype, d->B, d->T, d->R, d->C, 0);
    size_t a = ssm__cu_dk_plan_bytes(&p), b2 = ssm__cu_dk_plan_bytes(&q), w = a > b2 ? a : b2;
    if (c1.bytes > w) w = c1.bytes; /* the chunked scan's partials */
    if (c0.bytes > w) w = c0.bytes;
    if (d->op == SSM_OP_DECAY_BACKWARD) {
        /* the scans' da rows after them; the tiled kernel's partials: <= ceil(C / 8) column blocks per row */
        size_t rows = (size_t)(d->B * d->T * d->R), t2 = rows * (size_t)((d->C + 7) / 8) * 4u;
        w = ((w + 255) & ~(size_t)255) + rows * 4u;
        if (t2 > w) w = t2;
    }
    return w;
}

/* The CUDA-core chunks' scratch: ssm__cu_lr_chunked's P twice (ssm.h's generic chunks too; the
   second half holds the carries' levels above n = 64). */
static size_t ssm__cu_chunked_bytes(const ssm_linrec_plan *p) {
    const size_t P = p->chunk >= p->T ? 0 : ssm__cu_chunk_p_bytes(p->group, (p->T - 1) / p->chunk, p->n);
    return P >= SIZE_MAX / 2 ? SIZE_MAX : 2 * P;
}

/* The workspace_size slot: the decay scans, and the method scratch of the chunked kernels
   (the generic chunked figure, or the tensor-core path's when that is larger). */
static size_t ssm__pj_ws(const ssm_proj_plan *p);
static size_t ssm__oc_cu_ws(const ssm_outchain_plan *p);
static ssm_result ssm__cu_workspace_size(const ssm_ctx *ctx, ssm_op op, const void *plan, size_t *bytes) {
    (void)ctx;
    if (op == SSM_OP_PROJ_FORWARD || op == SSM_OP_PROJ_BACKWARD) {
        *bytes = ssm__pj_ws((const ssm_proj_plan *)plan);
        return SSM_OK;
    }
    if (op == SSM_OP_OUTCHAIN_FORWARD || op == SSM_OP_OUTCHAIN_BACKWARD) {
        *bytes = ssm__oc_cu_ws((const ssm_outchain_plan *)plan);
        return SSM_OK;
    }
    if (op == SSM_OP_DECAY_FORWARD || op == SSM_OP_DECAY_BACKWARD) {
        *bytes = ssm__cu_decay_ws((const ssm_decay_plan *)plan);
        return SSM_OK;
    }
    if (op == SSM_OP_LINREC_FORWARD || op == SSM_OP_LINREC_BACKWARD) {
        const ssm_linrec_plan *p = (const ssm_linrec_plan *)plan;
        size_t generic = 0, tc = 0;
        if (p->method == SSM_LINREC_CR) { /* the spans' and their carries' figure, and the CUDA-core
                                             chunks' (their other views) or the level kernels' */
            if (!ssm__cu_cr_takes(ctx, p)) return SSM__NOT_MINE;
            generic = ssm__cu_spans(ctx, p) ? ssm__cu_chunked_bytes(p)
                                               : ssm__cu_cr_levels_bytes(p->group, p->T, p->n, ssm__cu_cr_tc_takes(ctx, p) ? 2 : 4);
            if (ssm__cu_tc_shape(p->dtype, p->n, p->m))
                tc = ssm__cu_szadd(ssm__cu_tc_scratch_bytes(p->group, p->T, p->chunk, p->n),
                                   ssm__cu_cr_levels_bytes(p->group, ssm__cu_tc_nc(p->T, p->chunk), ssm__cu_tc_w(p->n), 4));
            *bytes = generic > tc ? generic : tc;
            return SSM_OK;
        }
        if (p->method == SSM_LINREC_SCAN_HS || p->method == SSM_LINREC_BLELLOCH) {
            if (!ssm__cu_hs_takes(ctx, p)) return SSM__NOT_MINE;
            if (p->method == SSM_LINREC_BLELLOCH && ssm__cu_spans(ctx, p)) { /* spans, as cyclic reduction's */
                generic = ssm__cu_chunked_bytes(p);
                if (ssm__cu_tc_shape(p->dtype, p->n, p->m)) {
                    const int64_t nc = ssm__cu_tc_nc(p->T, p->chunk), W = ssm__cu_tc_w(p->n);
                    tc = ssm__cu_szadd(ssm__cu_tc_scratch_bytes(p->group, p->T, p->chunk, p->n),
                                       ssm__cu_szmul(ssm__cu_szmul((size_t)W * W * 4u, p->group), nc));
                }
            } else
                generic = ssm__cu_hs_bytes(p, p->method == SSM_LINREC_BLELLOCH);
            *bytes = generic > tc ? generic : tc;
            return SSM_OK;
        }
        if (p->method != SSM_LINREC_CHUNKED) return SSM__NOT_MINE;
        generic = ssm__cu_chunked_bytes(p);
        if (ssm__cu_tc_shape(p->dtype, p->n, p->m)) tc = ssm__cu_tc_scratch_bytes(p->group, p->T, p->chunk, p->n);
        *bytes = generic > tc ? generic : tc;
        return SSM_OK;
    }
    return SSM__NOT_MINE;
}

/* Which scan a call takes: the tiled kernel where its blocks fill the GPU, else the chunked scan
   (the look-back when the config asks for it); a _cp call always the chunked one, whose first
   stage ran before the exchange (plan->span = 2) or runs now. */
static int ssm__cu_dk_chunked(const ssm_decay_plan *d, const ssm__cu_dkt_plan *tp, const ssm_cuda_config *k) {
    return d->span || (!tp->use && k->decay_kernel != 1);
}

static ssm_result ssm__cu_decay_forward(ssm_ctx *ctx, const ssm_decay_plan *d, const ssm_tensor *ld,
                                        const ssm_tensor *x, const ssm_tensor *h0, ssm_tensor *out, ssm_tensor *hT) {
    ssm__cu_state *st = ssm__cu_st(ctx);
    ssm__cu_device_guard guard(st->device);
    const ssm_tensor *vt[2] = {x, out};
    const int64_t B = d->B, T = d->T, R = d->R, C = d->C;
    const int vec = ssm__cu_dk_vec_ok(x->dtype, C, vt, 2);
    ssm__cu_dk_plan p = ssm__cu_dk_plan_of(x->dtype, B, T, R, C, vec);
    ssm__cu_dkt_plan tp = ssm__cu_dkt_plan_of(x->dtype, B, T, R, C, vec, 0, st->sms, &st->knobs);
    void *ws;
    if (ssm__cu_dk_chunked(d, &tp, &st->knobs)) {
        const ssm__cu_dks_plan cp = ssm__cu_dks_plan_for(d, x);
        SSM__TRY(ssm_ctx_workspace(ctx, cp.bytes, &ws));
        return ssm__cu_dks_run(ctx, &cp, x->dtype, 0, (d->span == 2 ? 0 : SSM__DKS_REDUCE) | SSM__DKS_CARRY | SSM__DKS_RESCAN,
                               d, ld, x, out, h0, hT, NULL, (float *)ws);
    }
    if (tp.use) {
        ssm__cu_dkv vl = ssm__cu_dkv_of(ld), vx = ssm__cu_dkv_of(x), vo = ssm__cu_dkv_of(out);
        ssm__cu_dkv vi = ssm__cu_dkv_of(h0), vf = ssm__cu_dkv_of(hT), vn = ssm__cu_dkv_of(NULL);
        const int ps = d->input == SSM_DECAY_PER_STEP;
        if (x->dtype.bits == 32)
            ssm__cu_dkt_go<float, 0>(&tp, st->stream, B, T, R, C, ps, vl, vx, vo, vi, vf, vn, vn, NULL);
        else if (x->dtype.code == SSM_DTYPE_BFLOAT)
            ssm__cu_dkt_go<__nv_bfloat16, 0>(&tp, st->stream, B, T, R, C, ps, vl, vx, vo, vi, vf, vn, vn, NULL);
        else
            ssm__cu_dkt_go<__half, 0>(&tp, st->stream, B, T, R, C, ps, vl, vx, vo, vi, vf, vn, vn, NULL);
        SSM__CU_LAUNCHED(ctx, "ssm__cu_dkt_kernel");
        return SSM_OK;
    }
    SSM__TRY(ssm_ctx_workspace(ctx, ssm__cu_dk_plan_bytes(&p), &ws));
    return ssm__cu_dk_scan(ctx, &p, x->dtype, B, T, R, C, 0, d->input == SSM_DECAY_PER_STEP, ld, x, out, h0, hT,
                           (char *)ws);
}

static ssm_result ssm__cu_decay_backward(ssm_ctx *ctx, const ssm_decay_plan *d, const ssm_tensor *ld,
                                         const ssm_tensor *h0, const ssm_tensor *out, const ssm_tensor *dout,
                                         const ssm_tensor *dhT, ssm_tensor *dx, ssm_tensor *dld, ssm_tensor *dh0) {
    ssm__cu_state *st = ssm__cu_st(ctx);
    ssm__cu_device_guard guard(st->device);
    const ssm_tensor *vt[2] = {dout, dx};
    const int64_t B = d->B, T = d->T, R = d->R, C = d->C;
    int per_step = d->input == SSM_DECAY_PER_STEP;
    ssm__cu_dk_plan p = ssm__cu_dk_plan_of(out->dtype, B, T, R, C, ssm__cu_dk_vec_ok(out->dtype, C, vt, 2));
    size_t scan_bytes = (ssm__cu_dk_plan_bytes(&p) + 255) & ~(size_t)255;
    void *wsp;
    char *ws;
    float *da;
    int64_t rows = B * T * R;
    ssm_dtype dt = out->dtype;
    ssm__cu_dkv vl = ssm__cu_dkv_of(ld), vg = ssm__cu_dkv_of(dx), vo = ssm__cu_dkv_of(out), v0 = ssm__cu_dkv_of(h0);
    ssm__cu_dkv vd0 = ssm__cu_dkv_of(dh0), vdl = ssm__cu_dkv_of(dld);
    const unsigned blocks = ssm__cu_blocks(rows);
    const ssm_tensor *vt3[3] = {dout, dx, out};
    ssm__cu_dkt_plan tp = ssm__cu_dkt_plan_of(dt, B, T, R, C, ssm__cu_dk_vec_ok(dt, C, vt3, 3), 1, st->sms, &st->knobs);
    const int chunked = ssm__cu_dk_chunked(d, &tp, &st->knobs);
    const ssm__cu_dks_plan cp = ssm__cu_dks_plan_for(d, dout);
    if (!chunked && tp.use) {
        ssm__cu_dkv vdo = ssm__cu_dkv_of(dout), vdT = ssm__cu_dkv_of(dhT);
        SSM__TRY(ssm_ctx_workspace(ctx, (size_t)rows * (size_t)tp.ncb * 4u, &wsp));
        da = (float *)wsp;
        if (dt.bits == 32) {
            ssm__cu_dkt_go<float, 1>(&tp, st->stream, B, T, R, C, per_step, vl, vdo, vg, vdT, vd0, vo, v0, da);
            ssm__cu_dkt_dld_kernel<float><<<blocks, 256, 0, st->stream>>>(B, T, R, tp.ncb, per_step, da, vdl);
        } else if (dt.code == SSM_DTYPE_BFLOAT) {
            ssm__cu_dkt_go<__nv_bfloat16, 1>(&tp, st->stream, B, T, R, C, per_step, vl, vdo, vg, vdT, vd0, vo, v0, da);
            ssm__cu_dkt_dld_kernel<__nv_bfloat16><<<blocks, 256, 0, st->stream>>>(B, T, R, tp.ncb, per_step, da, vdl);
        } else {
            ssm__cu_dkt_go<__half, 1>(&tp, st->stream, B, T, R, C, per_step, vl, vdo, vg, vdT, vd0, vo, v0, da);
            ssm__cu_dkt_dld_kernel<__half><<<blocks, 256, 0, st->stream>>>(B, T, R, tp.ncb, per_step, da, vdl);
        }
        SSM__CU_LAUNCHED(ctx, "ssm__cu_dkt_kernel (backward)");
        return SSM_OK;
    }
    if (chunked) scan_bytes = (cp.bytes + 255) & ~(size_t)255;
    SSM__TRY(ssm_ctx_workspace(ctx, scan_bytes + (size_t)rows * 4u, &wsp));
    ws = (char *)wsp;
    da = (float *)(ws + scan_bytes);
    /* g_t = dout_t + exp(a_{t+1}) g_{t+1}, g_{T-1} = dout + dhT: a reverse scan into dx */
    if (chunked)
        SSM__TRY(ssm__cu_dks_run(ctx, &cp, dt, 1, (d->span == 2 ? 0 : SSM__DKS_REDUCE) | SSM__DKS_CARRY | SSM__DKS_RESCAN, d, ld,
                                 dout, dx, dhT, NULL, NULL, (float *)ws));
    else SSM__TRY(ssm__cu_dk_scan(ctx, &p, dt, B, T, R, C, 1, per_step, ld, dout, dx, dhT, NULL, ws));
    {
        const ssm_tensor *gv[2] = {dx, out};
        const int dvec = ssm__cu_dk_vec_ok(dt, C, gv, 2);
        if (dt.bits == 32) ssm__cu_dk_da_go<float>(st->stream, dvec, B, T, R, C, per_step, vl, vg, vo, v0, vd0, da);
        else if (dt.code == SSM_DTYPE_BFLOAT)
            ssm__cu_dk_da_go<__nv_bfloat16>(st->stream, dvec, B, T, R, C, per_step, vl, vg, vo, v0, vd0, da);
        else ssm__cu_dk_da_go<__half>(st->stream, dvec, B, T, R, C, per_step, vl, vg, vo, v0, vd0, da);
        SSM__CU_LAUNCHED(ctx, "ssm__cu_dk_da_kernel");
        if (dt.bits == 32)
            ssm__cu_dk_dld_kernel<float><<<blocks, 256, 0, st->stream>>>(B, T, R, per_step, da, vdl);
        else if (dt.code == SSM_DTYPE_BFLOAT)
            ssm__cu_dk_dld_kernel<__nv_bfloat16><<<blocks, 256, 0, st->stream>>>(B, T, R, per_step, da, vdl);
        else
            ssm__cu_dk_dld_kernel<__half><<<blocks, 256, 0, st->stream>>>(B, T, R, per_step, da, vdl);
        SSM__CU_LAUNCHED(ctx, "ssm__cu_dk_dld_kernel");
    }
    return SSM_OK;
}

/* >>bell ---- block-ELL sparse linear layer ------------------------------------------------ */
/* ---- block-ELL sparse layer ------------------------------------------------------------------
   y = x W^T + bias with W in block-ELL (values [R,K,B,B], col_idx [R,K]); B = 16, 32 or 64.
   Forward and dx are one gather-GEMM kernel: a CTA owns BM tokens and a group of G = 128/B
   output blocks (128 output features), walks the sorted list of input blocks any of its G
   blocks uses, and per input block stages the x tile once (cp.async) and the (up to G) active
   weight tiles, then multiplies only the active ones. Loading x once per group instead of once
   per output block makes x traffic that of a dense GEMM with 128-wide tiles, whatever B is.
   dx is the same kernel over the transposed index (input = dy, output blocks = columns c, the
   tiles used untransposed): the sum over the slots of a column runs in ascending r, a fixed
   order, with no atomics. dvalues is a sampled dense-dense product: a CTA owns a 128 x 128
   region of W (G x G blocks), streams 32-token slabs of dy and x through shared memory and
   computes only the active blocks (warps take the region's active 32 x 32 units round robin);
   token splits (to fill the GPU) add partials in a fixed order. dbias: column sums
   by token splits, added in a fixed order. 16-bit inputs use mma.sync m16n8k16 with f32
   accumulation; f32 the same kernels on m16n8k8 in 3xTF32 (or plain TF32, ssm_cuda_config.bell_f32
   = 2), or CUDA-core kernels in f32 (bell_f32 = 1: exact products, f32 sums). On sm_90a, 16-bit
   B = 64 runs on TMA + wgmma instead (ssm__blw_kernel forward and dx on the same tables,
   ssm__blw_dw_kernel dvalues), and so do the B = 32 forward and dx (ssm__blu_kernel).
   The index tables (per group: slot of each (input block, member) pair, and the compacted
   list of input blocks) are built on the device in the workspace by three small kernels per
   call, so col_idx and the transposed index are never read on the host. Out-of-range
   entries are skipped (no memory fault), but their contents are not validated on the GPU. */

#define SSM__BL_BN 128 /* output features per CTA (G blocks of B) */
#define SSM__BL_LD(B) ((B) + 8) /* padded smem row (halfs): conflict-free ldmatrix */

typedef struct ssm__bl_mat { /* a 2-D operand: element (n, f) at p[n*rs + f*cs] */
    const void *p;
    int64_t rs, cs;
} ssm__bl_mat;
typedef struct ssm__bl_vals { /* values / dvalues [R,K,B,B] */
    const void *p;
    int64_t s0, s1, s2, s3;
} ssm__bl_vals;

/* tab[(grp*L + e)*G + m] = slot (r*K + k) of member m of group grp with input block e. */
__global__ void ssm__bl_fwd_table_kernel(const int *ci, int64_t cs0, int64_t cs1, int R, int K, int C, int G, int *tab) {
    int64_t s = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= (int64_t)R * K) return;
    int r = (int)(s / K), k = (int)(s % K), c = ci[r * cs0 + k * cs1];
    if (c >= 0 && c < C) tab[((int64_t)(r / G) * C + c) * G + r % G] = (int)s;
}
/* dx groups: columns c (members), inputs r, from the transposed index. */
__global__ void ssm__bl_dx_table_kernel(const int *toff, int64_t os, const int *tsl, int64_t ss, int R, int K, int C,
                                        int G, int *tab) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    int lo = max(toff[c * os], 0), hi = min(toff[(c + 1) * os], R * K);
    for (int i = lo; i < hi; ++i) {
        int slot = tsl[i * ss];
        if (slot >= 0 && slot < R * K) tab[((int64_t)(c / G) * R + slot / K) * G + c % G] = slot;
    }
}
/* dvalues regions (G x G blocks) cut into 16 units of 32 x 32: utab[(region*16 + unit)*4 + q] =
   slot of the unit's block q (B = 16: 2 x 2 blocks, q = (g%2)*2 + h%2; B >= 32: q = 0). */
__global__ void ssm__bl_dw_table_kernel(const int *ci, int64_t cs0, int64_t cs1, int R, int K, int C, int B, int ncg,
                                        int *tab) {
    const int64_t s = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int G = SSM__BL_BN / B;
    if (s >= (int64_t)R * K) return;
    const int r = (int)(s / K), k = (int)(s % K), c = ci[r * cs0 + k * cs1];
    if (c < 0 || c >= C) return;
    const int64_t base = ((int64_t)(r / G) * ncg + c / G) * 16;
    const int g = r % G, h = c % G;
    if (B == 16) {
        tab[(base + (g / 2) * 4 + h / 2) * 4 + (g % 2) * 2 + h % 2] = (int)s;
    } else {
        const int per = B / 32; /* units per block side */
        for (int a = 0; a < per; ++a)
            for (int b = 0; b < per; ++b) tab[(base + (g * per + a) * 4 + h * per + b) * 4] = (int)s;
    }
}
/* One warp per group: the items (L of them, E table entries each) with an active entry, in
   ascending order: list[j] = item; with ent, also ent[j] = {item, its E entries} (the wgmma
   kernel's staging reads them in one pass). */
__global__ void ssm__bl_compact_kernel(const int *tab, int L, int E, int64_t lstride, int *list, int *count, int *ent) {
    const int grp = blockIdx.x, lane = threadIdx.x;
    const int *t = tab + (int64_t)grp * L * E;
    int *out = list + (int64_t)grp * lstride, base = 0;
    for (int j0 = 0; j0 < L; j0 += 32) {
        const int j = j0 + lane;
        int slot = -1;
        if (j < L)
            for (int e = 0; e < E; ++e) slot = max(slot, t[(int64_t)j * E + e]);
        const int n = slot >= 0 ? 1 : 0;
        int pre = n;
        for (int o = 1; o < 32; o <<= 1) {
            const int v = __shfl_up_sync(0xffffffffu, pre, o);
            if (lane >= o) pre += v;
        }
        if (slot >= 0) {
            out[base + pre - 1] = j;
            if (ent) {
                int *o = ent + ((int64_t)grp * lstride + base + pre - 1) * (E + 1);
                o[0] = j;
                for (int e = 0; e < E; ++e) o[1 + e] = t[(int64_t)j * E + e];
            }
        }
        base += __shfl_sync(0xffffffffu, pre, 31);
    }
    if (lane == 0) count[grp] = base;
}

/* The operands of the mma.sync block-ELL kernels by MT: 0 f16, 1 bf16 (m16n8k16, ldmatrix), 2
   plain TF32, 3 3xTF32 (f32 in memory, m16n8k8 fed by scalar shared-memory loads). Shared-memory
   rows are padded for conflict-free fragment reads: 8 halfs for ldmatrix; f32 rows by 4 floats
   where a fragment reads rows g = 0..7 at columns t = 0..3 (a stride of 4 banks), by 8 where it
   reads rows t at columns g (dx's tiles, dvalues' slabs). */
template <int MT> struct ssm__bl_el { typedef unsigned short T; };
template <> struct ssm__bl_el<2> { typedef float T; };
template <> struct ssm__bl_el<3> { typedef float T; };
template <int MT, int B, int TRANS> struct ssm__bl_lay {
    static constexpr int F32 = MT >= 2, EPC = F32 ? 4 : 8; /* elements a 16-byte chunk */
    static constexpr int XLD = F32 ? B + 4 : SSM__BL_LD(B), WLD = F32 ? (TRANS ? B + 8 : B + 4) : SSM__BL_LD(B);
};
/* Gather-GEMM on tensor cores. out[n, (grp*G+m)*B + i] = sum over listed e of
   in[n, e*B + j] * Wt(slot(grp, e, m))[j, i] (+ bias), Wt = W^T (TRANS = 0, forward) or W
   (TRANS = 1, dx). NW warps x 32 tokens; NST-deep cp.async ring. VEC: 16-byte aligned rows of
   in and values (cp.async); else element loads (any strides). */
#define SSM__BL_WIN 64 /* list entries per shared-memory window (two windows, refilled in turn) */
template <int MT, int B, int NW, int NST, int EPS, int TRANS>
constexpr size_t ssm__bl_mm_smem() {
    typedef ssm__bl_lay<MT, B, TRANS> Y;
    return (size_t)NST * EPS * (NW * 32 * Y::XLD + SSM__BL_BN * Y::WLD) * sizeof(typename ssm__bl_el<MT>::T) +
           (size_t)2 * SSM__BL_WIN * (2 * (SSM__BL_BN / B) + 1) * 4;
}
template <int MT, int B, int NW, int NST, int EPS, int TRANS, int VEC>
__global__ void __launch_bounds__(NW * 32) ssm__bl_mm_kernel(int64_t N, int L, int K, int nout, ssm__bl_mat in,
                                                             ssm__bl_vals w, const int *tab, const int *list,
                                                             const int *count, ssm__bl_mat bias, ssm__bl_mat out,
                                                             int outv) {
    typedef ssm__bl_lay<MT, B, TRANS> Y;
    typedef typename ssm__bl_el<MT>::T E;
    constexpr int G = SSM__BL_BN / B, BM = NW * 32, XLD = Y::XLD, WLD = Y::WLD, EPC = Y::EPC, CPR = B / EPC, WIN = SSM__BL_WIN;
    constexpr int XT = BM * XLD, WT = G * B * WLD, ST = EPS * (XT + WT); /* elements per x tile, per W group, per stage */
    extern __shared__ __align__(16) unsigned char ssm__bl_smem[];
    E *ring = (E *)ssm__bl_smem;
    /* windows: tile offsets [2][WIN][G] (element offset of the member's tile in values, -1:
       inactive) and input blocks [2][WIN] */
    long long *woff = (long long *)(ring + NST * ST);
    int *went = (int *)(woff + 2 * WIN * G);
    const int grp = blockIdx.y, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int64_t tok0 = (int64_t)blockIdx.x * BM;
    const int cnt = count[grp], nst = (cnt + EPS - 1) / EPS;
    const int *lst = list + (int64_t)grp * L, *tg = tab + (int64_t)grp * L * G;
    const E *src = (const E *)in.p, *wv = (const E *)w.p;
    float acc[G][B / 8][2][4];
#pragma unroll
    for (int g = 0; g < G; ++g)
#pragma unroll
        for (int n = 0; n < B / 8; ++n)
#pragma unroll
            for (int m = 0; m < 2; ++m)
#pragma unroll
                for (int q = 0; q < 4; ++q) acc[g][n][m][q] = 0.f;

    /* entries [b*WIN, (b+1)*WIN) of the list, with their members' tile offsets, into window
       b % 2: the ring's address math then reads shared memory only (a global round trip and
       a division by K per entry and member stalled every stage) */
    auto fill = [&](int b) {
        int *e = went + (b & 1) * WIN;
        long long *o = woff + (b & 1) * WIN * G;
        for (int q = tid; q < WIN; q += NW * 32) {
            const int i = b * WIN + q;
            e[q] = i < cnt ? lst[i] : 0;
        }
        for (int q = tid; q < WIN * G; q += NW * 32) {
            const int i = b * WIN + q / G, slot = i < cnt ? tg[lst[i] * G + q % G] : -1;
            o[q] = slot < 0 ? -1ll : (long long)(slot / K) * w.s0 + (long long)(slot % K) * w.s1;
        }
        __syncthreads();
    };
    /* a thread's chunks: column chunk ch of rows r0 + RS r of the x tile (BM rows) and of the
       members' W tiles (G B rows), the same every stage (a flat loop over chunks spent a third
       of the kernel's instructions on address math) */
    constexpr int RS = NW * 32 / CPR;
    static_assert((NW * 32) % CPR == 0 && BM % RS == 0 && (G * B) % RS == 0, "whole rows a pass");
    const int ch = tid % CPR, r0 = tid / CPR;
    auto load = [&](int j, int st) {
#pragma unroll
        for (int u = 0; u < EPS; ++u) {
            const int i = j * EPS + u;
            if (i >= cnt) break;
            const int wb = (i / WIN) & 1, wi = i % WIN, e = went[wb * WIN + wi];
            E *xd = ring + st * ST + u * (XT + WT) + r0 * XLD + ch * EPC, *wd = ring + st * ST + u * (XT + WT) + XT;
            const int64_t col = (int64_t)e * B + ch * EPC;
#pragma unroll
            for (int r = 0; r < BM / RS; ++r) {
                const int64_t n = tok0 + r0 + r * RS;
                const bool ok = n < N;
                if (VEC)
                    ssm__cu_dkt_cp<16>(xd + r * RS * XLD, src + (ok ? n * in.rs + col : 0), ok);
                else
#pragma unroll
                    for (int v = 0; v < EPC; ++v) xd[r * RS * XLD + v] = ok ? src[n * in.rs + (col + v) * in.cs] : (E)0;
            }
            const long long *of = woff + (wb * WIN + wi) * G;
#pragma unroll
            for (int r = 0; r < G * B / RS; ++r) { /* row gr of the members' rows: member gr / B, its row gr % B */
                const int gr = r0 + r * RS, row = gr % B;
                const long long off = of[gr / B];
                if (off < 0) continue;
                const E *wp = wv + off + row * w.s2;
                if (VEC)
                    ssm__cu_dkt_cp<16>(wd + gr * WLD + ch * EPC, wp + ch * EPC, true);
                else
#pragma unroll
                    for (int v = 0; v < EPC; ++v) wd[gr * WLD + ch * EPC + v] = wp[(ch * EPC + v) * w.s3];
            }
        }
    };

    if (cnt > 0) fill(0);
#pragma unroll
    for (int j = 0; j < NST - 1; ++j) {
        if (j < nst) load(j, j);
        ssm__cu_dkt_commit();
    }
    for (int j = 0; j < nst; ++j) {
        ssm__cu_dkt_wait<NST - 2>();
        __syncthreads();
        {
            const int jn = j + NST - 1;
            if (jn < nst) {
                if ((jn * EPS) % WIN < EPS && jn * EPS >= WIN) fill(jn * EPS / WIN); /* first stage of a window */
                load(jn, jn % NST);
            }
            ssm__cu_dkt_commit();
        }
        const E *sb = ring + (j % NST) * ST;
#pragma unroll
        for (int u = 0; u < EPS; ++u) {
            const int i = j * EPS + u;
            if (i >= cnt) break;
            const long long *sl = woff + (((i / WIN) & 1) * WIN + i % WIN) * G;
            const E *xd = sb + u * (XT + WT), *wd = xd + XT;
            if constexpr (Y::F32) { /* m16n8k8: fragment rows fg = lane / 4, columns ft = lane % 4 */
                const int fg = lane >> 2, ft = lane & 3;
#pragma unroll
                for (int k8 = 0; k8 < B / 8; ++k8) {
                    unsigned ah[2][4], al[2][4];
#pragma unroll
                    for (int m = 0; m < 2; ++m) {
                        const E *xr = xd + (warp * 32 + m * 16 + fg) * XLD + k8 * 8 + ft;
                        ssm__tc_tf32_op<MT == 3>(xr[0], &ah[m][0], &al[m][0]);
                        ssm__tc_tf32_op<MT == 3>(xr[8 * XLD], &ah[m][1], &al[m][1]);
                        ssm__tc_tf32_op<MT == 3>(xr[4], &ah[m][2], &al[m][2]);
                        ssm__tc_tf32_op<MT == 3>(xr[8 * XLD + 4], &ah[m][3], &al[m][3]);
                    }
#pragma unroll
                    for (int g = 0; g < G; ++g) {
                        if (sl[g] < 0) continue;
#pragma unroll
                        for (int nt = 0; nt < B / 8; ++nt) {
                            /* B fragment (k = ft, ft + 4; output column fg): W[i][k] forward, W[k][i] dx */
                            const E *wp = TRANS ? wd + (g * B + k8 * 8 + ft) * WLD + nt * 8 + fg
                                                : wd + (g * B + nt * 8 + fg) * WLD + k8 * 8 + ft;
                            unsigned bh0, bl0, bh1, bl1;
                            ssm__tc_tf32_op<MT == 3>(wp[0], &bh0, &bl0);
                            ssm__tc_tf32_op<MT == 3>(wp[TRANS ? 4 * WLD : 4], &bh1, &bl1);
#pragma unroll
                            for (int m = 0; m < 2; ++m) ssm__tc_mma8x<MT == 3>(acc[g][nt][m], ah[m], al[m], bh0, bh1, bl0, bl1);
                        }
                    }
                }
            } else {
                constexpr int LD = XLD; /* 16-bit: x and W rows alike, ldmatrix fragments */
                unsigned a[2][B / 16][4];
#pragma unroll
                for (int m = 0; m < 2; ++m)
#pragma unroll
                    for (int kk = 0; kk < B / 16; ++kk)
                        ssm__tc_ldm4(a[m][kk], xd + (warp * 32 + m * 16 + (lane & 15)) * LD + kk * 16 + (lane >> 4) * 8);
#pragma unroll
                for (int g = 0; g < G; ++g) {
                    if (sl[g] < 0) continue;
#pragma unroll
                    for (int np = 0; np < B / 16; ++np)
#pragma unroll
                        for (int kk = 0; kk < B / 16; ++kk) {
                            unsigned b[4];
                            if (!TRANS)
                                ssm__tc_ldm4(b, wd + (g * B + np * 16 + (lane & 7) + ((lane >> 4) << 3)) * LD + kk * 16 +
                                                    (((lane >> 3) & 1) << 3));
                            else
                                ssm__tc_ldm4t(b, wd + (g * B + kk * 16 + (lane & 7) + (((lane >> 3) & 1) << 3)) * LD + np * 16 +
                                                     ((lane >> 4) << 3));
#pragma unroll
                            for (int m = 0; m < 2; ++m) {
                                ssm__tc_mma<MT>(acc[g][2 * np][m], a[m][kk], b[0], b[1]);
                                ssm__tc_mma<MT>(acc[g][2 * np + 1][m], a[m][kk], b[2], b[3]);
                            }
                        }
                }
            }
        }
    }
    ssm__cu_dkt_wait<0>();
    /* epilogue: (+ bias), round, store; outv: unit column stride and 4-byte aligned pairs (16-bit) */
    E *dst = (E *)out.p;
    const E *bp = (const E *)bias.p;
#pragma unroll
    for (int g = 0; g < G; ++g) {
        const int ob = grp * G + g;
        if (ob >= nout) continue;
#pragma unroll
        for (int nt = 0; nt < B / 8; ++nt) {
            const int64_t col = (int64_t)ob * B + nt * 8 + 2 * (lane & 3);
            float b0 = 0.f, b1 = 0.f;
            if (bp) {
                if constexpr (Y::F32) {
                    b0 = bp[col * bias.cs], b1 = bp[(col + 1) * bias.cs];
                } else {
                    unsigned short u0 = bp[col * bias.cs], u1 = bp[(col + 1) * bias.cs];
                    float2 f = ssm__tc_f2<MT>((unsigned)u0 | ((unsigned)u1 << 16));
                    b0 = f.x, b1 = f.y;
                }
            }
#pragma unroll
            for (int m = 0; m < 2; ++m)
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const int64_t n = tok0 + warp * 32 + m * 16 + (lane >> 2) + h * 8;
                    if (n >= N) continue;
                    const float v0 = acc[g][nt][m][2 * h] + b0, v1 = acc[g][nt][m][2 * h + 1] + b1;
                    if constexpr (Y::F32) {
                        dst[n * out.rs + col * out.cs] = v0;
                        dst[n * out.rs + (col + 1) * out.cs] = v1;
                    } else {
                        const unsigned v = ssm__tc_pack<MT>(v0, v1);
                        if (outv) {
                            *(unsigned *)(dst + n * out.rs + col) = v;
                        } else {
                            dst[n * out.rs + col * out.cs] = (E)(v & 0xffffu);
                            dst[n * out.rs + (col + 1) * out.cs] = (E)(v >> 16);
                        }
                    }
                }
        }
    }
}

/* The same gather-GEMM in f32 on CUDA cores: 32 tokens x 128 features per CTA, 4 x 4 per thread. */
template <int B, int TRANS>
__global__ void __launch_bounds__(256) ssm__bl_mm32_kernel(int64_t N, int L, int K, int nout, ssm__bl_mat in,
                                                           ssm__bl_vals w, const int *tab, const int *list,
                                                           const int *count, ssm__bl_mat bias, ssm__bl_mat out) {
    constexpr int G = SSM__BL_BN / B, BM = 32, LW = B + 1;
    __shared__ float xs[BM][B];
    __shared__ float wsm[G][B][LW];
    const int grp = blockIdx.y, tid = threadIdx.x, tx = tid & 31, ty = tid >> 5;
    const int64_t tok0 = (int64_t)blockIdx.x * BM;
    const int cnt = count[grp], g = (tx * 4) / B, i0 = (tx * 4) % B;
    const int *lst = list + (int64_t)grp * L, *tg = tab + (int64_t)grp * L * G;
    const float *src = (const float *)in.p, *wv = (const float *)w.p;
    float acc[4][4] = {};
    for (int j = 0; j < cnt; ++j) {
        const int e = lst[j];
        __syncthreads();
        for (int q = tid; q < BM * B; q += 256) {
            int row = q / B, col = q % B;
            int64_t n = tok0 + row;
            xs[row][col] = n < N ? src[n * in.rs + ((int64_t)e * B + col) * in.cs] : 0.f;
        }
        for (int m = 0; m < G; ++m) {
            const int slot = tg[e * G + m];
            if (slot < 0) continue;
            const float *wp = wv + (int64_t)(slot / K) * w.s0 + (int64_t)(slot % K) * w.s1;
            for (int q = tid; q < B * B; q += 256) {
                int row = q / B, col = q % B;
                wsm[m][row][col] = wp[row * w.s2 + col * w.s3];
            }
        }
        __syncthreads();
        if (tg[e * G + g] < 0) continue;
        for (int jj = 0; jj < B; ++jj) {
            float wr[4], xr[4];
#pragma unroll
            for (int q = 0; q < 4; ++q) wr[q] = TRANS ? wsm[g][jj][i0 + q] : wsm[g][i0 + q][jj];
#pragma unroll
            for (int t = 0; t < 4; ++t) xr[t] = xs[ty * 4 + t][jj];
#pragma unroll
            for (int t = 0; t < 4; ++t)
#pragma unroll
                for (int q = 0; q < 4; ++q) acc[t][q] = fmaf(xr[t], wr[q], acc[t][q]);
        }
    }
    const int ob = grp * G + g;
    if (ob >= nout) return;
    float *dst = (float *)out.p;
    const float *bp = (const float *)bias.p;
#pragma unroll
    for (int t = 0; t < 4; ++t) {
        const int64_t n = tok0 + ty * 4 + t;
        if (n >= N) continue;
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            const int64_t col = (int64_t)ob * B + i0 + q;
            dst[n * out.rs + col * out.cs] = acc[t][q] + (bp ? bp[col * bias.cs] : 0.f);
        }
    }
}

/* dvalues on tensor cores: region blockIdx.x (128 x 128 features of W: G x G blocks), tokens of
   split blockIdx.y. The region is cut into 16 units of 32 x 32; a unit holds 2 x 2 blocks of
   16, one block of 32 or a quarter of a block of 64, and its table row lists the slots of its
   (up to 4) blocks, -1 when inactive. The region's active units go round robin to the 8 warps
   (at most 2 each); per 16-token step a unit costs 4 ldmatrix and up to 8 mma. f32 operands
   (MT 2 / 3, see ssm__bl_el) take 32-token stages of the same shared-memory row length on
   m16n8k8 (scalar fragment loads: rows t at columns g, 136 = 8 mod 32 banks apart). Two CTAs
   an SM (the ring is 104 KB): at most 128 registers (f32 at B = 16 took 142, one CTA an SM). */
#define SSM__BL_DW_BK(MT) ((MT) >= 2 ? 32 : 64) /* tokens a stage: 3 x 2 x 17 KiB either way */
#define SSM__BL_DW_NST 3
#define SSM__BL_DW_LD (SSM__BL_BN + 8)
#define SSM__BL_DW_SMEM(MT) ((size_t)2 * SSM__BL_DW_NST * SSM__BL_DW_BK(MT) * SSM__BL_DW_LD * ((MT) >= 2 ? 4 : 2))
template <int MT, int B, int VEC>
__global__ void __launch_bounds__(256, 2) ssm__bl_dw_kernel(int64_t N, int64_t tps, int R, int C, int K, int ncg,
                                                            ssm__bl_mat dy, ssm__bl_mat x, const int *utab,
                                                            const int *ulist, const int *ucount, ssm__bl_vals dw,
                                                            float *part, int64_t nslots) {
    typedef typename ssm__bl_el<MT>::T E;
    constexpr int BK = SSM__BL_DW_BK(MT), NST = SSM__BL_DW_NST, LD = SSM__BL_DW_LD, EPC = 16 / sizeof(E), CPR = SSM__BL_BN / EPC;
    extern __shared__ __align__(16) unsigned char ssm__bl_smem[];
    E *ds = (E *)ssm__bl_smem, *xs = ds + NST * BK * LD;
    const int region = blockIdx.x, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int rg = region / ncg, cg = region % ncg, cnt = ucount[region];
    if (cnt == 0) return;
    const int64_t n_lo = (int64_t)blockIdx.y * tps, n_hi = min(N, n_lo + tps);
    const E *dyp = (const E *)dy.p, *xp = (const E *)x.p;
    const int64_t dyw = (int64_t)R * B, xw = (int64_t)C * B;
    int unit[2], slot[2][4];
    float acc[2][2][4][4]; /* unit, 16-row half, 8-column tile, fragment */
#pragma unroll
    for (int u = 0; u < 2; ++u) {
        unit[u] = warp + 8 * u < cnt ? ulist[region * 16 + warp + 8 * u] : -1;
#pragma unroll
        for (int q = 0; q < 4; ++q) slot[u][q] = unit[u] >= 0 ? utab[((int64_t)region * 16 + unit[u]) * 4 + q] : -1;
#pragma unroll
        for (int a = 0; a < 2; ++a)
#pragma unroll
            for (int b = 0; b < 4; ++b)
#pragma unroll
                for (int q = 0; q < 4; ++q) acc[u][a][b][q] = 0.f;
    }
    /* a thread's chunks: column chunk ch of rows r0 + RS r of both slabs, the same every stage
       (the address math of a flat loop over chunks cost as many instructions as a unit's MMAs) */
    constexpr int RS = 256 / CPR, RPT = BK / RS;
    static_assert(256 % CPR == 0 && BK % RS == 0, "whole rows a pass");
    const int ch = tid % CPR, r0 = tid / CPR;
    const int64_t fd = (int64_t)rg * SSM__BL_BN + ch * EPC, fx = (int64_t)cg * SSM__BL_BN + ch * EPC;
    const bool okd = fd < dyw, okx = fx < xw;
    auto load = [&](int64_t t0, int st) {
        E *dd = ds + st * BK * LD + r0 * LD + ch * EPC, *xd = xs + st * BK * LD + r0 * LD + ch * EPC;
#pragma unroll
        for (int r = 0; r < RPT; ++r) {
            const int64_t n = t0 + r0 + r * RS;
            const bool on = n < n_hi, od = on && okd, ox = on && okx;
            if (VEC) {
                ssm__cu_dkt_cp<16>(dd + r * RS * LD, dyp + (od ? n * dy.rs + fd : 0), od);
                ssm__cu_dkt_cp<16>(xd + r * RS * LD, xp + (ox ? n * x.rs + fx : 0), ox);
            } else {
#pragma unroll
                for (int u = 0; u < EPC; ++u) {
                    dd[r * RS * LD + u] = od ? dyp[n * dy.rs + (fd + u) * dy.cs] : (E)0;
                    xd[r * RS * LD + u] = ox ? xp[n * x.rs + (fx + u) * x.cs] : (E)0;
                }
            }
        }
    };
    const int steps = (int)((n_hi - n_lo + BK - 1) / BK);
#pragma unroll
    for (int j = 0; j < NST - 1; ++j) {
        if (j < steps) load(n_lo + (int64_t)j * BK, j);
        ssm__cu_dkt_commit();
    }
    for (int j = 0; j < steps; ++j) {
        ssm__cu_dkt_wait<NST - 2>();
        __syncthreads();
        {
            const int jn = j + NST - 1;
            if (jn < steps) load(n_lo + (int64_t)jn * BK, jn % NST);
            ssm__cu_dkt_commit();
        }
        const E *dd = ds + (j % NST) * BK * LD, *xd = xs + (j % NST) * BK * LD;
#pragma unroll
        for (int u = 0; u < 2; ++u) {
            if (unit[u] < 0) continue;
            const int i0 = (unit[u] >> 2) * 32, j0 = (unit[u] & 3) * 32;
            /* B = 16: the unit's 16-block rows / columns with an active block (others load nothing) */
            const bool row_on[2] = {B != 16 || slot[u][0] >= 0 || slot[u][1] >= 0, B != 16 || slot[u][2] >= 0 || slot[u][3] >= 0};
            const bool col_on[2] = {B != 16 || slot[u][0] >= 0 || slot[u][2] >= 0, B != 16 || slot[u][1] >= 0 || slot[u][3] >= 0};
            if constexpr (MT >= 2) { /* A = dy^T (rows i, k = tokens), B = x: fragments (k ft, ft + 4; row / column fg) */
                const int fg = lane >> 2, ft = lane & 3;
#pragma unroll
                for (int k8 = 0; k8 < BK / 8; ++k8) {
                    const E *dr = dd + (k8 * 8 + ft) * LD, *xr = xd + (k8 * 8 + ft) * LD;
                    unsigned ah[2][4], al[2][4], bh[4][2], bl[4][2];
#pragma unroll
                    for (int mi = 0; mi < 2; ++mi) {
                        if (!row_on[mi]) continue;
                        const int i = i0 + mi * 16 + fg;
                        ssm__tc_tf32_op<MT == 3>(dr[i], &ah[mi][0], &al[mi][0]);
                        ssm__tc_tf32_op<MT == 3>(dr[i + 8], &ah[mi][1], &al[mi][1]);
                        ssm__tc_tf32_op<MT == 3>(dr[4 * LD + i], &ah[mi][2], &al[mi][2]);
                        ssm__tc_tf32_op<MT == 3>(dr[4 * LD + i + 8], &ah[mi][3], &al[mi][3]);
                    }
#pragma unroll
                    for (int nt = 0; nt < 4; ++nt) {
                        if (!col_on[nt / 2]) continue;
                        ssm__tc_tf32_op<MT == 3>(xr[j0 + nt * 8 + fg], &bh[nt][0], &bl[nt][0]);
                        ssm__tc_tf32_op<MT == 3>(xr[4 * LD + j0 + nt * 8 + fg], &bh[nt][1], &bl[nt][1]);
                    }
#pragma unroll
                    for (int mi = 0; mi < 2; ++mi)
#pragma unroll
                        for (int nt = 0; nt < 4; ++nt) {
                            if (B == 16 && slot[u][mi * 2 + nt / 2] < 0) continue; /* inactive 16-block */
                            ssm__tc_mma8x<MT == 3>(acc[u][mi][nt], ah[mi], al[mi], bh[nt][0], bh[nt][1], bl[nt][0], bl[nt][1]);
                        }
                }
            } else {
#pragma unroll
                for (int kk = 0; kk < BK / 16; ++kk) {
                    unsigned a[2][4], b[2][4];
#pragma unroll
                    for (int mi = 0; mi < 2; ++mi)
                        if (row_on[mi])
                            ssm__tc_ldm4t(a[mi], dd + (kk * 16 + (lane & 7) + ((lane >> 4) << 3)) * LD + i0 + mi * 16 +
                                                     (((lane >> 3) & 1) << 3));
#pragma unroll
                    for (int nj = 0; nj < 2; ++nj)
                        if (col_on[nj])
                            ssm__tc_ldm4t(b[nj], xd + (kk * 16 + (lane & 7) + (((lane >> 3) & 1) << 3)) * LD + j0 + nj * 16 +
                                                     ((lane >> 4) << 3));
#pragma unroll
                    for (int mi = 0; mi < 2; ++mi)
#pragma unroll
                        for (int nj = 0; nj < 2; ++nj) {
                            if (B == 16 && slot[u][mi * 2 + nj] < 0) continue; /* inactive 16-block */
                            ssm__tc_mma<MT>(acc[u][mi][2 * nj], a[mi], b[nj][0], b[nj][1]);
                            ssm__tc_mma<MT>(acc[u][mi][2 * nj + 1], a[mi], b[nj][2], b[nj][3]);
                        }
                }
            }
        }
    }
    ssm__cu_dkt_wait<0>();
#pragma unroll
    for (int u = 0; u < 2; ++u) {
        if (unit[u] < 0) continue;
        const int i0 = (unit[u] >> 2) * 32, j0 = (unit[u] & 3) * 32;
#pragma unroll
        for (int mi = 0; mi < 2; ++mi)
#pragma unroll
            for (int nt = 0; nt < 4; ++nt) {
                const int s = B == 16 ? slot[u][mi * 2 + nt / 2] : slot[u][0];
                if (s < 0) continue;
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const int i = (i0 + mi * 16 + (lane >> 2) + h * 8) % B, jc = (j0 + nt * 8 + 2 * (lane & 3)) % B;
                    const float v0 = acc[u][mi][nt][2 * h], v1 = acc[u][mi][nt][2 * h + 1];
                    if (part) {
                        *(float2 *)(part + ((int64_t)blockIdx.y * nslots + s) * B * B + i * B + jc) = make_float2(v0, v1);
                    } else {
                        E *d = (E *)dw.p + (int64_t)(s / K) * dw.s0 + (int64_t)(s % K) * dw.s1 + i * dw.s2;
                        if constexpr (MT >= 2) {
                            d[jc * dw.s3] = v0, d[(jc + 1) * dw.s3] = v1;
                        } else {
                            const unsigned pv = ssm__tc_pack<MT>(v0, v1);
                            d[jc * dw.s3] = (E)(pv & 0xffffu);
                            d[(jc + 1) * dw.s3] = (E)(pv >> 16);
                        }
                    }
                }
            }
    }
}

/* dvalues in f32 on CUDA cores: one CTA per (slot, token split), B*B/256 outputs a thread. */
template <int B>
__global__ void __launch_bounds__(256) ssm__bl_dw32_kernel(int64_t N, int64_t tps, int K, const int *ci, int64_t cs0,
                                                           int64_t cs1, int C, ssm__bl_mat dy, ssm__bl_mat x,
                                                           ssm__bl_vals dw, float *part, int64_t nslots) {
    constexpr int BK = 32, PT = B * B / 256 > 0 ? B * B / 256 : 1;
    __shared__ float dys[BK][B], xsm[BK][B + 1];
    const int slot = blockIdx.x, tid = threadIdx.x, r = slot / K, k = slot % K;
    const int c = ci[r * cs0 + k * cs1];
    const int64_t n_lo = (int64_t)blockIdx.y * tps, n_hi = min(N, n_lo + tps);
    const float *dyp = (const float *)dy.p, *xp = (const float *)x.p;
    float acc[PT] = {};
    if (c < 0 || c >= C) return;
    for (int64_t t0 = n_lo; t0 < n_hi; t0 += BK) {
        __syncthreads();
        for (int q = tid; q < BK * B; q += 256) {
            const int row = q / B, col = q % B;
            const int64_t n = t0 + row;
            dys[row][col] = n < n_hi ? dyp[n * dy.rs + ((int64_t)r * B + col) * dy.cs] : 0.f;
            xsm[row][col] = n < n_hi ? xp[n * x.rs + ((int64_t)c * B + col) * x.cs] : 0.f;
        }
        __syncthreads();
#pragma unroll
        for (int p = 0; p < PT; ++p) {
            const int e = tid + 256 * p;
            if (e >= B * B) break;
            const int i = e / B, j = e % B;
            float s = acc[p];
            for (int t = 0; t < BK; ++t) s = fmaf(dys[t][i], xsm[t][j], s);
            acc[p] = s;
        }
    }
#pragma unroll
    for (int p = 0; p < PT; ++p) {
        const int e = tid + 256 * p;
        if (e >= B * B) break;
        if (part) part[((int64_t)blockIdx.y * nslots + slot) * B * B + e] = acc[p];
        else ((float *)dw.p)[r * dw.s0 + k * dw.s1 + (e / B) * dw.s2 + (e % B) * dw.s3] = acc[p];
    }
}

/* dvalues[slot] = sum over splits s = 0..S-1 in order of part[s][slot]. */
__global__ void ssm__bl_dw_reduce_kernel(int64_t nslots, int B, int K, int S, const float *part, ssm__bl_vals dw, int dt) {
    const int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, per = (int64_t)B * B;
    if (e >= nslots * per) return;
    float s = 0.f;
    for (int q = 0; q < S; ++q) s += part[q * nslots * per + e];
    const int64_t slot = e / per, i = (e % per) / B, j = e % B;
    ssm__cu_stv((void *)dw.p, dt, (slot / K) * dw.s0 + (slot % K) * dw.s1 + i * dw.s2 + j * dw.s3, s);
}

/* dbias: column sums of dy over token splits (64 columns x 4 lanes a CTA, fixed order). */
__global__ void __launch_bounds__(256) ssm__bl_dbias_kernel(int64_t N, int64_t tps, int64_t width, ssm__bl_mat dy,
                                                            int dt, float *part) {
    __shared__ float red[4][64];
    const int cl = threadIdx.x & 63, lane4 = threadIdx.x >> 6;
    const int64_t col = (int64_t)blockIdx.x * 64 + cl, n_lo = (int64_t)blockIdx.y * tps, n_hi = min(N, n_lo + tps);
    float s = 0.f;
    if (col < width)
        for (int64_t n = n_lo + lane4; n < n_hi; n += 4) s += ssm__cu_ld(dy.p, dt, n * dy.rs + col * dy.cs);
    red[lane4][cl] = s;
    __syncthreads();
    if (lane4 == 0 && col < width) part[blockIdx.y * width + col] = ((red[0][cl] + red[1][cl]) + red[2][cl]) + red[3][cl];
}
__global__ void ssm__bl_dbias_reduce_kernel(int64_t width, int S, const float *part, void *db, int64_t dbs, int dt) {
    const int64_t col = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= width) return;
    float s = 0.f;
    for (int q = 0; q < S; ++q) s += part[q * width + col];
    ssm__cu_stv(db, dt, col * dbs, s);
}

/* ---- block-ELL gather-GEMM on Hopper (B = 64, 16-bit, sm_90a) --------------------------------
   The same tables and groups (G = 2 block-rows) as ssm__bl_mm_kernel, with the roles of the
   operands swapped so one wgmma covers a whole 256-token tile: D[64 features][256 tokens] +=
   W tile (A: 64 x 64, from shared memory) x the 256 x 64 box of the input (B, K-major). A CTA
   (persistent: tiles t = blockIdx.x, + gridDim.x, ..., group-fastest so CTAs running together
   read the same input rows from L2) owns 256 tokens of one group; warpgroup 0's first warp
   stages 32 entries at a time, and its lane 0 issues TMA loads (the input box once per
   list entry, the active members' tiles) into a ring of 4 stages of 48 KB guarded by full /
   empty mbarriers. Consumer warpgroup 1 + m accumulates member m (128 f32 a thread) and skips
   the entries where m is inactive in an inner loop, so the wgmma block is never under a branch
   (ptxas serializes wgmmas across branches); one wgmma group stays in flight across entries,
   and a skipped entry first retires the group in flight so its stage is released in order.
   dx (TRANS = 1) runs the same kernel on the transposed tables with the tiles as M-major A
   (wgmma's transpose of A): no transposed copy of the weights.
   H200, 2048 -> 8192 at 50% density, bf16, N = 32768 (dev/cuda/bell_wgmma.cu, variant pt64,
   bench/results/cuda_bell_wgmma_2fc3bce.log): 0.97 ms against dense cuBLAS's 1.30 ms and the
   mma.sync kernel's 3.90 ms. */
#define SSM__BLW_BM 256                                 /* tokens a tile */
#define SSM__BLW_XB (SSM__BLW_BM * 64 * 2)              /* the input box [256][64], 32 KB */
#define SSM__BLW_TB (64 * 64 * 2)                       /* one weight tile, 8 KB */
#define SSM__BLW_SB (SSM__BLW_XB + 2 * SSM__BLW_TB)     /* a stage */
#define SSM__BLW_ST 4                                   /* stages */
#define SSM__BLW_SMEM (SSM__BLW_ST * SSM__BLW_SB + 1024) /* dynamic shared memory (1024-byte aligned ring) */

#ifdef SSM__SM90_HAVE
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
/* The weight tile of slot (r K + k): through a 2-D map over packed tiles [R K B, B] (w4d = 0), or
   a 4-D map {B, B, K, R} by the tensor's strides (w4d = 1; its loads measured 5-11% slower in
   the forward, bench/results/cuda_bell_wgmma_tma4d_h100.log). */
__device__ __forceinline__ void ssm__blw_tile(void *dst, const CUtensorMap *tw, uint64_t *bar, int slot, int K, int w4d, int B) {
    if (w4d) ssm__sm90_tma4(dst, tw, bar, 0, 0, slot % K, slot / K);
    else ssm__sm90_tma2(dst, tw, bar, 0, slot * B);
}
/* The producer warp of the gather-GEMM kernels (G members of B-wide block-rows a group): per
   tile, the group's entries {input block, slot of each member} are staged 32 at a time (one
   coalesced read), and each entry's [256][B] input box and its active members' tiles go to the
   next ring stage (XB + G TB bytes). */
template <int B, int G, int ST, int XB, int TB>
__device__ __forceinline__ void ssm__blw_produce(unsigned char *ring, uint64_t *full, uint64_t *empty, int *sent,
                                                 const CUtensorMap *tin, const CUtensorMap *tw, int K, int w4d, const int *ent,
                                                 const int *count, int L, int ngr, int ntiles, int lane) {
    constexpr int E = G + 1, SB = XB + G * TB;
    int s = 0, ph = 0;
    for (int t = blockIdx.x; t < ntiles; t += gridDim.x) {
        const int grp = t % ngr, tt = t / ngr, cnt = count[grp];
        const int *en = ent + (int64_t)grp * L * E;
        for (int i0 = 0; i0 < cnt; i0 += 32) {
            __syncwarp();
            for (int q = lane; q < 32 * E; q += 32) sent[q] = E * i0 + q < E * cnt ? en[E * i0 + q] : -1;
            __syncwarp();
            const int n = cnt - i0 < 32 ? cnt - i0 : 32;
            if (lane == 0)
                for (int j = 0; j < n; ++j) {
                    const int *sj = sent + j * E;
                    int na = 0;
                    for (int m = 0; m < G; ++m) na += sj[1 + m] >= 0;
                    unsigned char *st = ring + s * SB;
                    ssm__sm90_wait(&empty[s], ph ^ 1);
                    ssm__sm90_expect_tx(&full[s], XB + na * TB);
                    ssm__sm90_tma2(st, tin, &full[s], sj[0] * B, tt * SSM__BLW_BM);
                    for (int m = 0; m < G; ++m)
                        if (sj[1 + m] >= 0) ssm__blw_tile(st + XB + m * TB, tw, &full[s], sj[1 + m], K, w4d, B);
                    if (++s == ST) s = 0, ph ^= 1;
                }
        }
    }
}
#endif
template <int BF, int TRANS>
__global__ void __launch_bounds__(384, 1) ssm__blw_kernel(const __grid_constant__ CUtensorMap tin, const __grid_constant__ CUtensorMap tw,
                                                          int K, int w4d, const int *ent, const int *count, int L,
                                                          int nout, int ngr, int ntiles, int N, ssm__bl_mat bias,
                                                          ssm__bl_mat out, int outv) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    typedef typename ssm__sm90_ty<BF>::T T;
    constexpr int ST = SSM__BLW_ST, SB = SSM__BLW_SB, XB = SSM__BLW_XB, TB = SSM__BLW_TB, BM = SSM__BLW_BM;
    extern __shared__ uint4 ssm__blw_smem[];
    __shared__ uint64_t full[ST], empty[ST];
    __shared__ int sent[32 * 3]; /* the producer's staged entries {e, slot of member 0, of member 1} */
    unsigned char *ring = ssm__sm90_ring(ssm__blw_smem);
    const int wg = threadIdx.x / 128, tid = threadIdx.x % 128, warp = tid / 32, lane = tid % 32;
    ssm__sm90_ring_init(full, empty, ST, 8);
    if (wg == 0) {
        ssm__sm90_producer_regs();
        if (warp == 0) ssm__blw_produce<64, 2, ST, XB, TB>(ring, full, empty, sent, &tin, &tw, K, w4d, ent, count, L, ngr, ntiles, lane);
    } else {
        ssm__sm90_consumer_regs();
        const int m = wg - 1;
        float d[128];
        int s = 0, ph = 0;
        for (int t = blockIdx.x; t < ntiles; t += gridDim.x) {
            const int grp = t % ngr, tt = t / ngr, cnt = count[grp];
            const int *en = ent + (int64_t)grp * L * 3;
            int i = 0, pend = -1, base = -32; /* pend: the stage of the wgmma group in flight */
            unsigned act = 0; /* bit j: this member is active in entry base + j (one load per 32 entries) */
#pragma unroll
            for (int q = 0; q < 128; ++q) d[q] = 0.f;
            for (;;) {
                for (; i < cnt; ++i) { /* skip the entries where this member is inactive */
                    if (i - base >= 32) base = i, act = __ballot_sync(0xffffffffu, i + lane < cnt && en[3 * (i + lane) + 1 + m] >= 0);
                    ssm__sm90_wait(&full[s], ph);
                    if (act >> (i - base) & 1) break; /* uniform: a ballot */
                    if (pend >= 0) { /* retire the group in flight first: stages are released in order */
                        ssm__sm90_wait_mma<0>();
                        if (lane == 0) ssm__sm90_arrive(&empty[pend]);
                        pend = -1;
                    }
                    if (lane == 0) ssm__sm90_arrive(&empty[s]);
                    if (++s == ST) s = 0, ph ^= 1;
                }
                if (i >= cnt) break;
                const unsigned char *st = ring + s * SB;
#pragma unroll
                for (int q = 0; q < 128; ++q) ssm__sm90_rf(d[q]);
                ssm__sm90_fence();
#pragma unroll
                for (int k = 0; k < 4; ++k)
                    ssm__sm90_mma<256, BF, TRANS, 0>::run(d, ssm__sm90_desc(st + XB + m * TB + (TRANS ? 2048 : 32) * k),
                                                       ssm__sm90_desc(st + 32 * k));
                ssm__sm90_commit();
                ssm__sm90_wait_mma<1>();
#pragma unroll
                for (int q = 0; q < 128; ++q) ssm__sm90_rf(d[q]);
                if (pend >= 0 && lane == 0) ssm__sm90_arrive(&empty[pend]);
                pend = s;
                if (++s == ST) s = 0, ph ^= 1;
                ++i;
            }
            ssm__sm90_wait_mma<0>();
#pragma unroll
            for (int q = 0; q < 128; ++q) ssm__sm90_rf(d[q]);
            if (pend >= 0 && lane == 0) ssm__sm90_arrive(&empty[pend]);
            /* d[4i + {0,1}]: feature f, tokens 8i + 2q + {0,1}; d[4i + {2,3}]: feature f + 8. Lanes l
               and l ^ 4 hold features f and f + 1 of the same tokens: one exchange gives each a
               feature pair of one token (paired stores) */
            const int r = grp * 2 + m;
            if (r < nout) {
                const int odd = (lane >> 2) & 1, q = lane % 4, dt = BF ? 2 : 1;
                const int64_t fa = (int64_t)r * 64 + warp * 16 + (lane / 4 & ~1); /* the pair's first feature */
                float b[4] = {0.f, 0.f, 0.f, 0.f};
                if (bias.p)
                    for (int u = 0; u < 4; ++u) b[u] = ssm__cu_ld(bias.p, dt, (fa + (u & 1) + 8 * (u >> 1)) * bias.cs);
#pragma unroll
                for (int i = 0; i < 32; ++i) {
                    /* the even lane keeps token n (its d[.0]) and takes the odd lane's value for n;
                       the odd lane keeps token n + 1 (its d[.1]) and takes the even lane's */
                    const float x0 = __shfl_xor_sync(0xffffffffu, odd ? d[4 * i] : d[4 * i + 1], 4);
                    const float x1 = __shfl_xor_sync(0xffffffffu, odd ? d[4 * i + 2] : d[4 * i + 3], 4);
                    const int64_t n = (int64_t)tt * BM + 8 * i + 2 * q + odd;
                    if (n < N) {
                        const float v[4] = {(odd ? x0 : d[4 * i]) + b[0], (odd ? d[4 * i + 1] : x0) + b[1],
                                            (odd ? x1 : d[4 * i + 2]) + b[2], (odd ? d[4 * i + 3] : x1) + b[3]};
                        if (outv) {
                            ssm__sm90_st2<BF>((void *)out.p, n * out.rs + fa, v[0], v[1]);
                            ssm__sm90_st2<BF>((void *)out.p, n * out.rs + fa + 8, v[2], v[3]);
                        } else {
                            for (int u = 0; u < 4; ++u)
                                ssm__cu_stv((void *)out.p, dt, n * out.rs + (fa + (u & 1) + 8 * (u >> 1)) * out.cs, v[u]);
                        }
                    }
                }
            }
        }
    }
#endif
}
/* The forward and dx at B = 32 (16-bit, sm_90a): the union kernel. A CTA (persistent, tiles as
   ssm__blw_kernel) owns 256 tokens of a group of 4 block-rows and walks the group's entries
   (5 ints: input block, slot of each member); the producer loads the [256][32] box of x once
   per entry (64-byte swizzle) and the active members' 32 x 32 tiles. Each consumer warpgroup
   owns 128 tokens (two m64 slabs): it loads its x fragments to registers (ldmatrix through the
   swizzle) and issues m64n32k16 for the active members only, each activity pattern its own
   straight-line block (fence, wgmmas, commit, wait: ssm__blu_entry) so no wgmma sits under a
   run-time branch. 128 f32 accumulators a thread. H200, 2048 -> 8192 at 50%, bf16, N = 32768
   (dev/cuda/bell_wgmma.cu, variant pw128): 2.30 ms against the mma.sync kernel's 5.41 (dense
   cuBLAS 1.30). dx (TRANS = 1) is the same kernel on the transposed tables, the tiles read as
   an N-major B (wgmma's transpose of B; k16 steps 16 rows). dvalues stays on mma.sync. */
#define SSM__BLU_XB (SSM__BLW_BM * 32 * 2)          /* the input box [256][32], 16 KB */
#define SSM__BLU_TB (32 * 32 * 2)                   /* one weight tile, 2 KB */
#define SSM__BLU_SB (SSM__BLU_XB + 4 * SSM__BLU_TB) /* a stage, 24 KB */
#define SSM__BLU_ST 8
#define SSM__BLU_SMEM (SSM__BLU_ST * SSM__BLU_SB + 1024)

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
template <int BF, int TRANS, int PT> /* the wgmmas of one entry for the members' activity pattern PT */
__device__ __forceinline__ void ssm__blu_issue(float (*acc)[2][16], const uint32_t (*a)[2][4], const unsigned char *tiles) {
    ssm__sm90_fence();
#pragma unroll
    for (int m = 0; m < 4; ++m) {
        if (!(PT >> m & 1)) continue;
#pragma unroll
        for (int w = 0; w < 2; ++w)
#pragma unroll
            for (int k = 0; k < 2; ++k)
                ssm__sm90_mma32rs<BF, TRANS>::run(acc[m][w], a[w][k], ssm__sm90_desc<64>(tiles + m * SSM__BLU_TB + (TRANS ? 1024 : 32) * k));
    }
    ssm__sm90_commit();
    ssm__sm90_wait_mma<0>();
}
template <int BF, int TRANS, int PT = 1>
__device__ __forceinline__ void ssm__blu_entry(int pattern, float (*acc)[2][16], const uint32_t (*a)[2][4], const unsigned char *tiles) {
    if constexpr (PT < 16) {
        if (pattern == PT) ssm__blu_issue<BF, TRANS, PT>(acc, a, tiles);
        else ssm__blu_entry<BF, TRANS, PT + 1>(pattern, acc, a, tiles);
    }
}
#endif

template <int BF, int TRANS>
__global__ void __launch_bounds__(384, 1) ssm__blu_kernel(const __grid_constant__ CUtensorMap tin, const __grid_constant__ CUtensorMap tw,
                                                          int K, int w4d, const int *ent, const int *count, int L, int nout, int ngr,
                                                          int ntiles, int N, ssm__bl_mat bias, ssm__bl_mat out, int outv) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    constexpr int ST = SSM__BLU_ST, SB = SSM__BLU_SB, XB = SSM__BLU_XB, TB = SSM__BLU_TB, BM = SSM__BLW_BM, E = 5;
    extern __shared__ uint4 ssm__blu_smem[];
    __shared__ uint64_t full[ST], empty[ST];
    __shared__ int sent[32 * E]; /* the producer's staged entries */
    unsigned char *ring = ssm__sm90_ring(ssm__blu_smem);
    const int wg = threadIdx.x / 128, tid = threadIdx.x % 128, warp = tid / 32, lane = tid % 32;
    ssm__sm90_ring_init(full, empty, ST, 8);
    if (wg == 0) {
        ssm__sm90_producer_regs();
        if (warp == 0) ssm__blw_produce<32, 4, ST, XB, TB>(ring, full, empty, sent, &tin, &tw, K, w4d, ent, count, L, ngr, ntiles, lane);
    } else {
        ssm__sm90_consumer_regs();
        const int c = wg - 1;
        float acc[4][2][16];
        uint32_t a[2][2][4];
        int s = 0, ph = 0;
        for (int t = blockIdx.x; t < ntiles; t += gridDim.x) {
            const int grp = t % ngr, tt = t / ngr, cnt = count[grp];
            const int *en = ent + (int64_t)grp * L * E;
            int base = -32, pat = 0; /* lane j: the members' activity in entry base + j */
#pragma unroll
            for (int m = 0; m < 4; ++m)
#pragma unroll
                for (int w = 0; w < 2; ++w)
#pragma unroll
                    for (int i = 0; i < 16; ++i) acc[m][w][i] = 0.f;
            for (int i = 0; i < cnt; ++i) {
                if (i - base >= 32) {
                    base = i, pat = 0;
                    if (i + lane < cnt)
                        for (int m = 0; m < 4; ++m) pat |= (en[(int64_t)E * (i + lane) + 1 + m] >= 0) << m;
                }
                const int pattern = __shfl_sync(0xffffffffu, pat, i - base);
                const unsigned char *st = ring + s * SB;
                ssm__sm90_wait(&full[s], ph);
#pragma unroll
                for (int w = 0; w < 2; ++w)
#pragma unroll
                    for (int k = 0; k < 2; ++k) {
                        /* lanes 0-15: the warp's rows at k, lanes 16-31: the same rows at k + 8 */
                        const uint32_t off = (uint32_t)(((c * 2 + w) * 64 + warp * 16 + (lane & 15)) * 64 + k * 32 + (lane >> 4) * 16);
                        ssm__tc_ldm4a(a[w][k], ssm__tc_sa(st) + (off ^ (((off >> 7) & 3) << 4)));
                    }
#pragma unroll
                for (int m = 0; m < 4; ++m)
#pragma unroll
                    for (int w = 0; w < 2; ++w)
#pragma unroll
                        for (int q = 0; q < 16; ++q) ssm__sm90_rf(acc[m][w][q]);
                ssm__blu_entry<BF, TRANS>(pattern, acc, a, st + XB);
#pragma unroll
                for (int m = 0; m < 4; ++m)
#pragma unroll
                    for (int w = 0; w < 2; ++w)
#pragma unroll
                        for (int q = 0; q < 16; ++q) ssm__sm90_rf(acc[m][w][q]);
#pragma unroll
                for (int w = 0; w < 2; ++w) /* the register A operands too: live until the wait, not reused under the wgmma */
#pragma unroll
                    for (int k = 0; k < 2; ++k)
#pragma unroll
                        for (int z = 0; z < 4; ++z) ssm__sm90_ra(a[w][k][z]);
                if (lane == 0) ssm__sm90_arrive(&empty[s]); /* its wgmmas have completed (wait 0) */
                if (++s == ST) s = 0, ph ^= 1;
            }
            /* acc[m][w][4j + {0,1}]: token row r0, features 8j + 2q + {0,1} of member m; + {2,3}: row r0 + 8 */
            const int q = lane % 4, dt = BF ? 2 : 1;
#pragma unroll
            for (int m = 0; m < 4; ++m) {
                const int r = grp * 4 + m;
                if (r >= nout) break;
#pragma unroll
                for (int w = 0; w < 2; ++w) {
                    const int64_t r0 = (int64_t)tt * BM + (c * 2 + w) * 64 + warp * 16 + lane / 4;
#pragma unroll
                    for (int j = 0; j < 4; ++j) {
                        const int64_t f = (int64_t)r * 32 + 8 * j + 2 * q;
                        const float b0 = bias.p ? ssm__cu_ld(bias.p, dt, f * bias.cs) : 0.f;
                        const float b1 = bias.p ? ssm__cu_ld(bias.p, dt, (f + 1) * bias.cs) : 0.f;
#pragma unroll
                        for (int h = 0; h < 2; ++h) {
                            const int64_t n = r0 + 8 * h;
                            if (n >= N) continue;
                            const float v0 = acc[m][w][4 * j + 2 * h] + b0, v1 = acc[m][w][4 * j + 2 * h + 1] + b1;
                            if (outv) ssm__sm90_st2<BF>((void *)out.p, n * out.rs + f, v0, v1);
                            else {
                                ssm__cu_stv((void *)out.p, dt, n * out.rs + f * out.cs, v0);
                                ssm__cu_stv((void *)out.p, dt, n * out.rs + (f + 1) * out.cs, v1);
                            }
                        }
                    }
                }
            }
        }
    }
#endif
}

/* dvalues on wgmma (B = 64 or 32, 16-bit, sm_90a). A unit is a forward group (G = 128 / B
   block-rows, 128 features) x 256 / B input blocks (256 columns of x), over one token split; the
   forward tables name its active tiles. A CTA (persistent) streams the unit's tokens in slabs
   of 64: TMA loads, for each consumer warpgroup whose 64 features hold an active tile, dy's box
   of those features, and x's box for each input block any member uses (a stage: up to 2 dy
   boxes of 8 KB and 256 columns of x, 48 KB). Consumer warpgroup m accumulates, for each input
   block c that one of its members (1 at B = 64, 2 at B = 32) uses, the 64 x B product
   dy_m^T x_c: wgmma m64nBk16 with the dy box as M-major A (at B = 64 loaded to registers once a
   stage) and the x box as N-major B (k16 = 16 token rows), B / 2 f32 a product. At B = 32 that
   product holds both members' tiles, and only the active ones are stored (an inactive half
   costs MMA work, not traffic: a stage loads what a B = 64 stage loads for as many useful
   FLOPs). A unit's slab loop is instantiated per number
   of products (ssm__blw_dw_unit<NA>, each with its own accumulators), so no wgmma sits under a
   branch. Each tile is written once (no atomics): to dvalues, or with token splits to the
   partials that ssm__bl_dw_reduce_kernel sums in order. At B = 64 CTAs run in clusters of 2 on
   adjacent groups, x's boxes multicast to both (ssm__blw_dw_kernel). The kernel waits on its
   loads, not its MMAs: L2 76% busy, 36% of sectors hit (ncu, 2048 -> 8192, N 32768); the
   clusters read x from L2 once for two CTAs, 6-11% faster. Not faster: token splits that keep L2
   hits (16 splits: 69% hit, half the DRAM bytes), sharing dy between two chunks' CTAs (or 2 x 2
   clusters), L2 prefetches a few slabs ahead of each load (1.5x slower). */
#define SSM__BLW_DW_SLAB 64
#define SSM__BLW_DW_BOX (SSM__BLW_DW_SLAB * 64 * 2) /* a dy box: 64 features; x's boxes fill 4 more */
#define SSM__BLW_DW_SB (6 * SSM__BLW_DW_BOX)
#define SSM__BLW_DW_SMEM (SSM__BLW_ST * SSM__BLW_DW_SB + 1024)

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
/* Stage release by a consumer warp's lane 0: on the stage's empty barrier in every CTA of the
   cluster (CL CTAs), since any of them may multicast into this CTA's copy of the stage. */
template <int CL> __device__ __forceinline__ void ssm__blw_dw_release(uint64_t *bar) {
    if (CL == 1) ssm__sm90_arrive(bar);
    else
#pragma unroll
        for (int r = 0; r < CL; ++r) ssm__sm90_arrive_at(bar, (uint32_t)r);
}
/* One unit for a consumer warpgroup with NA products (x boxes xo[j] of each stage; the slots of
   its members' tiles sl[j * (64 / B) + member], -1 where inactive): its own accumulators, so each
   instantiation is straight-line wgmma code. B = 32: A (the warpgroup's dy box) from shared
   memory, one wgmma group in flight, each stage released when the next one's group has retired
   it. B = 64: A in registers (wgmma's RS form), loaded once a stage and shared by the NA
   products, each stage's group retired before the next stage's fragments are loaded: dvalues
   2-9% faster at the large shapes (H200, 1.60-1.76 -> 1.54-1.60 ms at 2048 -> 8192, N 32768),
   1-4% slower at B = 32 (bench/results/cuda_bell_dw_rs.log). */
template <int BF, int B, int NA, int CL>
__device__ __forceinline__ void ssm__blw_dw_unit(const unsigned char *ring, int m, const int *xo, const int *sl, int nslab, int &s,
                                                 int &ph, uint64_t *full, uint64_t *empty, int warp, int lane, int split, int K,
                                                 int64_t nslots, const ssm__bl_vals &dv, float *part) {
    constexpr int SB = SSM__BLW_DW_SB, BOX = SSM__BLW_DW_BOX, XBOX = SSM__BLW_DW_SLAB * B * 2, NT = B / 2, RW = 64 / B;
    float d[NT * NA];
#pragma unroll
    for (int q = 0; q < NT * NA; ++q) d[q] = 0.f;
    int prev = -1; /* the stage of the wgmma group in flight */
    for (int i = 0; i < nslab; ++i) {
        ssm__sm90_wait(&full[s], ph);
        const unsigned char *st = ring + s * SB;
        uint32_t af[4][4]; /* B = 64, k16 step k: warp w's 16 features x 16 tokens, as the m16n8k16 A fragment */
        if constexpr (B == 64) {
            const int r8 = lane & 7, c16 = 2 * warp + ((lane >> 3) & 1); /* the lane's row of its 8 x 8 matrix, its 16-byte chunk */
#pragma unroll
            for (int k = 0; k < 4; ++k) /* ldmatrix.trans through the 128-byte swizzle: chunk c of token row t at c ^ (t % 8) */
                ssm__tc_ldm4t(af[k], st + m * BOX + (16 * k + 8 * (lane >> 4) + r8) * 128 + ((c16 ^ r8) << 4));
        }
#pragma unroll
        for (int q = 0; q < NT * NA; ++q) ssm__sm90_rf(d[q]);
        ssm__sm90_fence();
#pragma unroll
        for (int k = 0; k < 4; ++k)
#pragma unroll
            for (int j = 0; j < NA; ++j) {
                const uint64_t db = ssm__sm90_desc<2 * B>(st + 2 * BOX + xo[j] * XBOX + 32 * B * k);
                if constexpr (B == 64) ssm__sm90_mma64rs<BF, 1>::run(d + NT * j, af[k], db, 1);
                else ssm__sm90_mma<B, BF, 1, 1>::run(d + NT * j, ssm__sm90_desc(st + m * BOX + 2048 * k), db);
            }
        ssm__sm90_commit();
        ssm__sm90_wait_mma<B == 64 ? 0 : 1>(); /* B = 64: af is rewritten next stage, so no group stays in flight */
#pragma unroll
        for (int q = 0; q < NT * NA; ++q) ssm__sm90_rf(d[q]);
        /* the stage whose group has retired: this one at B = 64 (wait<0>), else the one before (wait<1>) */
        const int done = B == 64 ? s : prev;
        if (done >= 0 && lane == 0) ssm__blw_dw_release<CL>(&empty[done]);
        prev = B == 64 ? -1 : s;
        if (++s == SSM__BLW_ST) s = 0, ph ^= 1;
    }
    ssm__sm90_wait_mma<0>();
#pragma unroll
    for (int q = 0; q < NT * NA; ++q) ssm__sm90_rf(d[q]);
    if (prev >= 0 && lane == 0) ssm__blw_dw_release<CL>(&empty[prev]);
    /* d[NT j + 4i + {0,1}]: product j, feature f, columns 8i + 2q + {0,1}; + {2,3}: feature f + 8.
       Feature f is row f % B of member f / B (one member a warp). */
    const int f = warp * 16 + lane / 4, q4 = lane % 4;
#pragma unroll
    for (int j = 0; j < NA; ++j) {
        const int64_t slot = sl[j * RW + f / B];
        if (slot < 0) continue;
#pragma unroll
        for (int i = 0; i < B / 8; ++i)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int row = f % B + 8 * (e >> 1), col = 8 * i + 2 * q4 + (e & 1);
                const float v = d[NT * j + 4 * i + e];
                if (part) part[((int64_t)split * nslots + slot) * (B * B) + row * B + col] = v;
                else ssm__cu_stv((void *)dv.p, BF ? 2 : 1, (slot / K) * dv.s0 + (slot % K) * dv.s1 + row * dv.s2 + col * dv.s3, v);
            }
    }
}
/* ssm__blw_dw_unit for the warpgroup's run-time count na (NA <= na <= NMAX, NMAX = 256 / B) */
template <int BF, int B, int NA, int NMAX, int CL>
__device__ __forceinline__ void ssm__blw_dw_pick(int na, const unsigned char *ring, int m, const int *xo, const int *sl, int nslab, int &s,
                                                 int &ph, uint64_t *full, uint64_t *empty, int warp, int lane, int split, int K,
                                                 int64_t nslots, const ssm__bl_vals &dv, float *part) {
    if constexpr (NA == NMAX) ssm__blw_dw_unit<BF, B, NA, CL>(ring, m, xo, sl, nslab, s, ph, full, empty, warp, lane, split, K, nslots, dv, part);
    else if (na == NA) ssm__blw_dw_unit<BF, B, NA, CL>(ring, m, xo, sl, nslab, s, ph, full, empty, warp, lane, split, K, nslots, dv, part);
    else ssm__blw_dw_pick<BF, B, NA + 1, NMAX, CL>(na, ring, m, xo, sl, nslab, s, ph, full, empty, warp, lane, split, K, nslots, dv, part);
}
#endif

/* CX: the cluster, CX CTAs on CX consecutive groups of one chunk (rank rx: group g CX + rx). A
   cluster walks its units (split, chunk, group run) in lockstep: every CTA loads dy for its own
   group and the union of x's boxes the cluster uses, each x box TMA-multicast to all of them by
   one CTA (rank q % CX), so x's reads from L2 halve at CX = 2; a cluster unit is skipped only
   when none of its CTAs has an active tile. */
template <int BF, int B, int CX>
__global__ void __launch_bounds__(384, 1) ssm__blw_dw_kernel(const __grid_constant__ CUtensorMap tdy, const __grid_constant__ CUtensorMap tx,
                                                             const int *tab, int R, int K, int C, int ngr, int nch,
                                                             int64_t N, int64_t tps, int S, ssm__bl_vals dv, float *part) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    constexpr int ST = SSM__BLW_ST, SB = SSM__BLW_DW_SB, BOX = SSM__BLW_DW_BOX, SLAB = SSM__BLW_DW_SLAB;
    constexpr int G = 128 / B, RW = 64 / B, XB = 256 / B, XBOX = SLAB * B * 2; /* members a group / a warpgroup, x boxes */
    extern __shared__ uint4 ssm__blw_dw_smem[];
    __shared__ uint64_t full[ST], empty[ST];
    unsigned char *ring = ssm__sm90_ring(ssm__blw_dw_smem);
    const int wg = threadIdx.x / 128, tid = threadIdx.x % 128, warp = tid / 32, lane = tid % 32;
    const int rx = CX > 1 ? (int)ssm__sm90_cluster_rank() : 0;
    const int ngq = (ngr + CX - 1) / CX, nunits = ngq * nch, total = nunits * S;
    const int cid = (int)blockIdx.x / CX, ncl = (int)gridDim.x / CX;
    const int64_t nslots = (int64_t)R * K;
    ssm__sm90_ring_init(full, empty, ST, 8 * CX);
    if (CX > 1) ssm__sm90_cluster_sync(); /* every CTA's barriers initialised before any remote arrival */
/* cluster unit u: token split, run of CX groups, chunk; this CTA's group grp and chunk ch */
#define SSM__BLW_DW_UNIT(u)                                                                                 \
    const int split = (u) / nunits, rest = (u) - split * nunits;                                          \
    const int grp = (rest % ngq) * CX + rx, ch = rest / ngq;                                                \
    const int64_t n_lo = (int64_t)split * tps, n_hi = n_lo + tps < N ? n_lo + tps : N;                      \
    const int nslab = n_lo < n_hi ? (int)((n_hi - n_lo + SLAB - 1) / SLAB) : 0;
/* the slot of member mm's tile of input block q, in group g and chunk c (-1: inactive or outside) */
#define SSM__BLW_DW_SLOT(g, c, mm, q) \
    ((c) * XB + (q) < C && (g) * G + (mm) < R ? tab[((int64_t)(g) * C + (c) * XB + (q)) * G + (mm)] : -1)
/* the cluster unit's boxes, one computation for both roles (their skips must agree): dy's that
   this CTA's tiles use (rmask, a bit a warpgroup), x's that any tile of the unit uses (xmask) */
#define SSM__BLW_DW_MASKS                                                                                   \
    int rmask = 0, xmask = 0;                                                                               \
    for (int a = 0; a < CX; ++a)                                                                            \
        for (int mm = 0; mm < G; ++mm)                                                                      \
            for (int q = 0; q < XB; ++q)                                                                    \
                if (SSM__BLW_DW_SLOT(grp - rx + a, ch, mm, q) >= 0) {                                       \
                    xmask |= 1 << q;                                                                        \
                    if (a == rx) rmask |= 1 << (mm / RW);                                                   \
                }
    if (wg == 0) {
        ssm__sm90_producer_regs();
        if (warp == 0 && lane == 0) {
            int s = 0, ph = 0;
            for (int u = cid; u < total; u += ncl) {
                SSM__BLW_DW_UNIT(u)
                SSM__BLW_DW_MASKS
                if (!xmask) continue; /* no active tile in the cluster unit: every CTA and consumer skips it */
                for (int i = 0; i < nslab; ++i) {
                    const int n0 = (int)(n_lo + (int64_t)i * SLAB);
                    unsigned char *st = ring + s * SB;
                    ssm__sm90_wait(&empty[s], ph ^ 1);
                    ssm__sm90_expect_tx(&full[s], __popc(rmask) * BOX + __popc(xmask) * XBOX);
                    for (int m = 0; m < 2; ++m)
                        if (rmask >> m & 1) ssm__sm90_tma2(st + m * BOX, &tdy, &full[s], (grp * G + m * RW) * B, n0);
                    for (int q = 0; q < XB; ++q)
                        if ((xmask >> q & 1) && q % CX == rx) {
                            if (CX == 1) ssm__sm90_tma2(st + 2 * BOX + q * XBOX, &tx, &full[s], (ch * XB + q) * B, n0);
                            else ssm__sm90_tma2_mc(st + 2 * BOX + q * XBOX, &tx, &full[s], (ch * XB + q) * B, n0, (1u << CX) - 1);
                        }
                    if (++s == ST) s = 0, ph ^= 1;
                }
            }
        }
        __syncwarp();
    } else {
        ssm__sm90_consumer_regs();
        const int m = wg - 1;
        int s = 0, ph = 0;
        for (int u = cid; u < total; u += ncl) {
            SSM__BLW_DW_UNIT(u)
            SSM__BLW_DW_MASKS
            (void)rmask; /* the producer's */
            if (!xmask) continue; /* skipped by the producer too */
            int xo[XB], sl[XB * RW], na = 0;
            for (int q = 0; q < XB; ++q) { /* this warpgroup's products: the x boxes its members use */
                int mine = 0;
                for (int mm = m * RW; mm < (m + 1) * RW; ++mm) {
                    const int v = SSM__BLW_DW_SLOT(grp, ch, mm, q);
                    sl[na * RW + mm % RW] = v, mine |= v >= 0;
                }
                if (mine) xo[na++] = q;
            }
            if (na > 0) ssm__blw_dw_pick<BF, B, 1, XB, CX>(na, ring, m, xo, sl, nslab, s, ph, full, empty, warp, lane, split, K, nslots, dv, part);
            else /* nothing of this warpgroup's: release the stages */
                for (int i = 0; i < nslab; ++i) {
                    ssm__sm90_wait(&full[s], ph);
                    if (lane == 0) ssm__blw_dw_release<CX>(&empty[s]);
                    if (++s == ST) s = 0, ph ^= 1;
                }
        }
    }
    if (CX > 1) ssm__sm90_cluster_sync(); /* a peer may still multicast into this CTA or arrive on its barriers */
#undef SSM__BLW_DW_MASKS
#undef SSM__BLW_DW_SLOT
#undef SSM__BLW_DW_UNIT
#endif
}
#endif /* SSM__SM90_HAVE */

/* ---- block-ELL host side ---- */

template <int MT, int B, int NW, int NST, int EPS, int TRANS, int VEC>
static cudaError_t ssm__bl_mm_launch(cudaStream_t st, int64_t N, int L, int K, int nout, int ngroups, ssm__bl_mat in,
                                     ssm__bl_vals w, const int *tab, const int *list, const int *count,
                                     ssm__bl_mat bias, ssm__bl_mat out, int outv) {
    constexpr int BM = NW * 32;
    constexpr size_t smem = ssm__bl_mm_smem<MT, B, NW, NST, EPS, TRANS>();
    cudaError_t e = cudaFuncSetAttribute(ssm__bl_mm_kernel<MT, B, NW, NST, EPS, TRANS, VEC>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (e != cudaSuccess) return e;
    dim3 grid((unsigned)((N + BM - 1) / BM), (unsigned)ngroups);
    ssm__bl_mm_kernel<MT, B, NW, NST, EPS, TRANS, VEC><<<grid, NW * 32, smem, st>>>(N, L, K, nout, in, w, tab, list,
                                                                                   count, bias, out, outv);
    return cudaGetLastError();
}

/* Defaults (H200, dev/cuda/bell.cu, 2048 -> 8192, N = 32768, bf16, 50%): 4 warps x 32 tokens,
   one input block a stage; ring depth 2 at B = 32 (4.4 ms against 5.4 with two blocks a stage
   or 4 deep), 3 at B = 16 and 64 (B = 64: 2.7 ms; B = 16 since the loads by per-thread rows,
   N = 8192: forward 1.37-1.39 -> 1.21 ms and dx 1.43-1.46 -> 1.32-1.34 against depth 2; two
   blocks a stage 1.61, 8 warps 1.95-2.02; bench/results/cuda_bell_rings_dwpairs.log).
   f32 (twice the bytes a stage): 2 deep, and 8 warps at B = 64, where 4 left one 4-warp CTA an
   SM (143 KB): 2048 -> 8192, N = 8192, 3xTF32 3.87 -> 2.61 ms, TF32 2.71-3.10 -> 1.79-1.81 (H200,
   same call); at B = 16 / 32 no other shape won both ways (f32 B = 32 with 8 warps 3 deep: dx
   7% faster, forward 1-2% slower; same log as above). */
template <int MT, int B, int TRANS, int VEC>
static cudaError_t ssm__bl_mm_go(cudaStream_t st, int64_t N, int L, int K, int nout, int ngroups, ssm__bl_mat in,
                                 ssm__bl_vals w, const int *tab, const int *list, const int *count, ssm__bl_mat bias,
                                 ssm__bl_mat out, int outv) {
    constexpr int NST = B != 32 && MT < 2 ? 3 : 2, EPS = 1, NW = B == 64 && MT >= 2 ? 8 : 4;
    return ssm__bl_mm_launch<MT, B, NW, NST, EPS, TRANS, VEC>(st, N, L, K, nout, ngroups, in, w, tab, list, count, bias,
                                                               out, outv);
}

static ssm__bl_mat ssm__bl_mat_of(const ssm_tensor *t) {
    ssm__bl_mat m;
    m.p = t ? t->data : NULL;
    m.rs = t && t->ndim == 2 ? t->strides[0] : 0;
    m.cs = t ? t->strides[t->ndim - 1] : 0;
    return m;
}
static ssm__bl_vals ssm__bl_vals_of(const ssm_tensor *t) {
    ssm__bl_vals v;
    v.p = t->data, v.s0 = t->strides[0], v.s1 = t->strides[1], v.s2 = t->strides[2], v.s3 = t->strides[3];
    return v;
}
static int ssm__bl_vec_mat(const ssm__bl_mat &m) { return m.cs == 1 && m.rs % 8 == 0 && (uintptr_t)m.p % 16 == 0; }
/* the epilogue's paired stores: unit column stride, 4-byte aligned pairs */
static int ssm__bl_pair_mat(const ssm__bl_mat &m) { return m.cs == 1 && m.rs % 2 == 0 && (uintptr_t)m.p % 4 == 0; }
static int ssm__bl_vec_vals(const ssm__bl_vals &v) {
    return v.s3 == 1 && v.s2 % 8 == 0 && v.s1 % 8 == 0 && v.s0 % 8 == 0 && (uintptr_t)v.p % 16 == 0;
}

#ifdef SSM__SM90_HAVE
/* 1 when the wgmma gather-GEMM runs on the context's device (asked once per context). */
static int ssm__blw_ok(ssm__cu_state *st) {
    if (!st->blw) {
        st->blw = ssm__sm90_device(st) && ssm__sm90_kernel_ok(st, (const void *)ssm__blw_kernel<1, 0>, SSM__BLW_SMEM) &&
                          ssm__sm90_kernel_ok(st, (const void *)ssm__blw_kernel<0, 0>, SSM__BLW_SMEM) &&
                          ssm__sm90_kernel_ok(st, (const void *)ssm__blw_kernel<1, 1>, SSM__BLW_SMEM) &&
                          ssm__sm90_kernel_ok(st, (const void *)ssm__blw_kernel<0, 1>, SSM__BLW_SMEM) &&
                          ssm__sm90_kernel_ok(st, (const void *)ssm__blw_dw_kernel<1, 64, 2>, SSM__BLW_DW_SMEM) &&
                          ssm__sm90_kernel_ok(st, (const void *)ssm__blw_dw_kernel<0, 64, 2>, SSM__BLW_DW_SMEM) &&
                          ssm__sm90_kernel_ok(st, (const void *)ssm__blw_dw_kernel<1, 32, 1>, SSM__BLW_DW_SMEM) &&
                          ssm__sm90_kernel_ok(st, (const void *)ssm__blw_dw_kernel<0, 32, 1>, SSM__BLW_DW_SMEM) &&
                          ssm__sm90_kernel_ok(st, (const void *)ssm__blu_kernel<1, 0>, SSM__BLU_SMEM) &&
                          ssm__sm90_kernel_ok(st, (const void *)ssm__blu_kernel<0, 0>, SSM__BLU_SMEM) &&
                          ssm__sm90_kernel_ok(st, (const void *)ssm__blu_kernel<1, 1>, SSM__BLU_SMEM) &&
                          ssm__sm90_kernel_ok(st, (const void *)ssm__blu_kernel<0, 1>, SSM__BLU_SMEM)
                      ? 1
                      : 2;
        cudaGetLastError();
    }
    return st->blw == 1;
}
/* A TMA map of a [N, cols] 16-bit operand in boxes of box_rows x box_cols (64 or 32: the 128- or
   64-byte swizzle), zero rows past N; 0 when its rows do not suit TMA (unit column stride,
   16-byte aligned base and pitch). */
static int ssm__blw_map(CUtensorMap *m, ssm_dtype dt, const ssm__bl_mat &a, int64_t N, int64_t cols, int box_rows,
                        int box_cols = 64) {
    const cuuint64_t dims[2] = {(cuuint64_t)cols, (cuuint64_t)N}, pitch[1] = {(cuuint64_t)a.rs * 2};
    const cuuint32_t box[2] = {(cuuint32_t)box_cols, (cuuint32_t)box_rows};
    if (a.cs != 1 || a.rs % 8 || a.rs >= ((int64_t)1 << 38) || (uintptr_t)a.p % 16) return 0;
    return ssm__sm90_map(m, dt.code == SSM_DTYPE_BFLOAT, a.p, 2, dims, pitch, box, CU_TENSOR_MAP_L2_PROMOTION_L2_128B);
}
/* The wgmma gather-GEMM where it applies (see ssm_cuda_config.bell_kernel; B = 64, and the
   union kernel at B = 32): 1 when launched, 0 when the caller takes the mma.sync kernel. TMA reads
   the input as [N, L*B] (zero rows past N) and the weights as [R][K][B][B] by their strides. */
static int ssm__blw_mm(ssm__cu_state *st, ssm_dtype dt, int B, int trans, int64_t N, int L, int K, int nout, int ngroups,
                       ssm__bl_mat in, ssm__bl_vals w, const int *ent, const int *count, ssm__bl_mat bias, ssm__bl_mat out) {
    const int bf = dt.code == SSM_DTYPE_BFLOAT, nk = (int)((N + SSM__BLW_BM - 1) / SSM__BLW_BM);
    const int64_t R = trans ? L : nout; /* block-rows of the weights (dx: the list runs over them) */
    CUtensorMap tin, tw;
    if (st->knobs.bell_kernel == 1 || dt.bits != 16 || (B != 64 && B != 32) || N <= 0 || N > INT32_MAX - SSM__BLW_BM ||
        (int64_t)nk * ngroups > INT32_MAX || w.s3 != 1 || w.s2 % 8 || w.s1 % 8 || w.s0 % 8 || (uintptr_t)w.p % 16 ||
        w.s0 >= ((int64_t)1 << 38) || w.s1 >= ((int64_t)1 << 38) || !ssm__blw_ok(st) ||
        !ssm__blw_map(&tin, dt, in, N, (int64_t)L * B, SSM__BLW_BM, B))
        return 0;
    const int w4d = !(w.s2 == B && w.s1 == (int64_t)B * B && w.s0 == (int64_t)K * B * B); /* packed tiles: a 2-D map */
    {
        cuuint64_t dims[4] = {(cuuint64_t)B, (cuuint64_t)B, (cuuint64_t)K, (cuuint64_t)R};
        const cuuint64_t pitch[3] = {(cuuint64_t)w.s2 * 2, (cuuint64_t)w.s1 * 2, (cuuint64_t)w.s0 * 2};
        const cuuint32_t box[4] = {(cuuint32_t)B, (cuuint32_t)B, 1, 1};
        if (!w4d) dims[1] = (cuuint64_t)R * K * B; /* [R K B rows, B], row pitch B */
        if (!ssm__sm90_map(&tw, bf, w.p, w4d ? 4 : 2, dims, pitch, box, CU_TENSOR_MAP_L2_PROMOTION_L2_128B)) return 0;
    }
    const int ntiles = nk * ngroups, grid = ntiles < st->sms ? ntiles : st->sms, outv = ssm__bl_pair_mat(out);
#define SSM__BLW_GO(BF_, TR_)                                                                                    \
    ssm__blw_kernel<BF_, TR_><<<grid, 384, SSM__BLW_SMEM, st->stream>>>(tin, tw, K, w4d, ent, count, L, nout, ngroups,       \
                                                                         ntiles, (int)N, bias, out, outv)
#define SSM__BLU_GO(BF_, TR_)                                                                                    \
    ssm__blu_kernel<BF_, TR_><<<grid, 384, SSM__BLU_SMEM, st->stream>>>(tin, tw, K, w4d, ent, count, L, nout, ngroups,       \
                                                                         ntiles, (int)N, bias, out, outv)
    if (B == 32) {
        if (bf) {
            if (trans) SSM__BLU_GO(1, 1);
            else SSM__BLU_GO(1, 0);
        } else {
            if (trans) SSM__BLU_GO(0, 1);
            else SSM__BLU_GO(0, 0);
        }
    } else if (bf) {
        if (trans) SSM__BLW_GO(1, 1);
        else SSM__BLW_GO(1, 0);
    } else {
        if (trans) SSM__BLW_GO(0, 1);
        else SSM__BLW_GO(0, 0);
    }
#undef SSM__BLW_GO
#undef SSM__BLU_GO
    return 1;
}
/* One dvalues launch in clusters of CX (cudaLaunchKernelEx), as many clusters as fit at once
   (persistent over the cluster units). */
template <int BF, int B, int CX>
static cudaError_t ssm__blw_dw_launch(ssm__cu_state *st, const CUtensorMap &tdy, const CUtensorMap &tx, const int *tab, int R,
                                      int K, int C, int ngr, int nch, int64_t N, int64_t tps, int S, ssm__bl_vals dv, float *part) {
    void (*k)(CUtensorMap, CUtensorMap, const int *, int, int, int, int, int, int64_t, int64_t, int, ssm__bl_vals, float *) =
        ssm__blw_dw_kernel<BF, B, CX>;
    const int total = (ngr + CX - 1) / CX * nch * S;
    int fit = st->sms / CX;
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute at[1] = {};
    cfg.blockDim = dim3(384), cfg.dynamicSmemBytes = SSM__BLW_DW_SMEM, cfg.stream = st->stream;
    if (CX > 1) { /* ssm__blw_ok set the kernel's shared memory; how many clusters fit is asked once */
        at[0].id = cudaLaunchAttributeClusterDimension;
        at[0].val.clusterDim.x = CX, at[0].val.clusterDim.y = 1, at[0].val.clusterDim.z = 1;
        cfg.attrs = at, cfg.numAttrs = 1, cfg.gridDim = dim3((unsigned)(fit * CX));
        if (!st->blw_dw_fit && (cudaOccupancyMaxActiveClusters(&st->blw_dw_fit, (const void *)k, &cfg) != cudaSuccess ||
                                st->blw_dw_fit < 1))
            st->blw_dw_fit = -1;
        if (st->blw_dw_fit < 1) return cudaErrorNotSupported;
        fit = st->blw_dw_fit;
    }
    cfg.gridDim = dim3((unsigned)((total < fit ? total : fit) * CX));
    return cudaLaunchKernelEx(&cfg, k, tdy, tx, tab, R, K, C, ngr, nch, N, tps, S, dv, part);
}
/* dvalues on wgmma where it applies (as ssm__blw_mm, on dy and x): builds the forward tables in
   tab (tab_bytes >= their size), then launches; 1 when launched, 0 when the caller takes the
   mma.sync kernel. tps: tokens a split, a multiple of 64. */
static int ssm__blw_dw(ssm__cu_state *st, const ssm_bell_plan *p, const ssm_tensor *col_idx, ssm__bl_mat dy, ssm__bl_mat x,
                       int *tab, size_t tab_bytes, int64_t tps, int S, ssm__bl_vals dv, float *part) {
    const int R = (int)p->R, K = (int)p->K, C = (int)p->C, B = (int)p->B, G = B == 64 ? 2 : 4, XB = 256 / (B ? B : 1);
    const int ngr = (R + G - 1) / G, nch = (C + XB - 1) / XB;
    const int64_t nslots = (int64_t)R * K;
    CUtensorMap tdy, tx;
    if (st->knobs.bell_kernel == 1 || p->dtype.bits != 16 || (B != 64 && B != 32) || p->N <= 0 || p->N > INT32_MAX - 64 ||
        tps % 64 || (int64_t)ngr * nch * S > INT32_MAX || tab_bytes < (size_t)ngr * C * G * 4 || !ssm__blw_ok(st) ||
        !ssm__blw_map(&tdy, p->dtype, dy, p->N, (int64_t)R * B, SSM__BLW_DW_SLAB) ||
        !ssm__blw_map(&tx, p->dtype, x, p->N, (int64_t)C * B, SSM__BLW_DW_SLAB, B))
        return 0;
    if (cudaMemsetAsync(tab, 0xFF, tab_bytes, st->stream) != cudaSuccess) return 0;
    ssm__bl_fwd_table_kernel<<<(unsigned)((nslots + 255) / 256), 256, 0, st->stream>>>(
        (const int *)col_idx->data, col_idx->strides[0], col_idx->strides[1], R, K, C, G, tab);
    cudaError_t e;
    /* B = 64 in clusters of 2 (x multicast): dvalues 6-11% faster at the large shapes, H200
       (bench/results/cuda_bell_dw_cluster_*.log; 2 chunks sharing dy, or 2 x 2, measured slower) */
#define SSM__BLW_DW_GO(BF_, B_, CX_) \
    e = ssm__blw_dw_launch<BF_, B_, CX_>(st, tdy, tx, tab, R, K, C, ngr, nch, p->N, tps, S, dv, part)
    if (p->dtype.code == SSM_DTYPE_BFLOAT) {
        if (B == 64) SSM__BLW_DW_GO(1, 64, 2);
        else SSM__BLW_DW_GO(1, 32, 1);
    } else {
        if (B == 64) SSM__BLW_DW_GO(0, 64, 2);
        else SSM__BLW_DW_GO(0, 32, 1);
    }
#undef SSM__BLW_DW_GO
    return e == cudaSuccess;
}
#else
static int ssm__blw_dw(ssm__cu_state *, const ssm_bell_plan *, const ssm_tensor *, ssm__bl_mat, ssm__bl_mat, int *, size_t,
                       int64_t, int, ssm__bl_vals, float *) {
    return 0;
}
static int ssm__blw_mm(ssm__cu_state *, ssm_dtype, int, int, int64_t, int, int, int, int, ssm__bl_mat, ssm__bl_vals,
                       const int *, const int *, ssm__bl_mat, ssm__bl_mat) {
    return 0;
}
#endif

/* The math of the mma.sync kernels for a dtype (their template parameter MT: 0 f16, 1 bf16,
   2 plain TF32, 3 3xTF32), or -1 for f32 on the CUDA-core kernels (ssm_cuda_config.bell_f32 = 1). */
static int ssm__bl_math(const ssm__cu_state *cs, ssm_dtype dt) {
    if (dt.bits == 32) return cs->knobs.bell_f32 == 1 ? -1 : cs->knobs.bell_f32 == 2 ? 2 : 3;
    return dt.code == SSM_DTYPE_BFLOAT;
}

/* One gather-GEMM by dtype, B, direction and alignment: the wgmma kernel where it applies, else
   the mma.sync one (f32: 3xTF32, plain TF32 or CUDA cores by ssm_cuda_config.bell_f32). */
static cudaError_t ssm__bl_mm(ssm__cu_state *cs, ssm_dtype dt, int B, int trans, int64_t N, int L, int K, int nout,
                              int ngroups, ssm__bl_mat in, ssm__bl_vals w, const int *tab, const int *list,
                              const int *count, const int *ent, ssm__bl_mat bias, ssm__bl_mat out) {
    cudaStream_t st = cs->stream;
    if (ent && ssm__blw_mm(cs, dt, B, trans, N, L, K, nout, ngroups, in, w, ent, count, bias, out)) return cudaGetLastError();
    const int vec = ssm__bl_vec_mat(in) && ssm__bl_vec_vals(w);
    const int outv = ssm__bl_pair_mat(out);
    const dim3 g32((unsigned)((N + 31) / 32), (unsigned)ngroups);
#define SSM__BL_ARGS st, N, L, K, nout, ngroups, in, w, tab, list, count, bias, out, outv
#define SSM__BL_ARGS32 N, L, K, nout, in, w, tab, list, count, bias, out
#define SSM__BL_BY_B(BF, TR)                                                                         \
    if (B == 16) return vec ? ssm__bl_mm_go<BF, 16, TR, 1>(SSM__BL_ARGS) : ssm__bl_mm_go<BF, 16, TR, 0>(SSM__BL_ARGS); \
    if (B == 32) return vec ? ssm__bl_mm_go<BF, 32, TR, 1>(SSM__BL_ARGS) : ssm__bl_mm_go<BF, 32, TR, 0>(SSM__BL_ARGS); \
    return vec ? ssm__bl_mm_go<BF, 64, TR, 1>(SSM__BL_ARGS) : ssm__bl_mm_go<BF, 64, TR, 0>(SSM__BL_ARGS);
    switch (ssm__bl_math(cs, dt)) {
    case 3: if (trans) { SSM__BL_BY_B(3, 1) } SSM__BL_BY_B(3, 0)
    case 2: if (trans) { SSM__BL_BY_B(2, 1) } SSM__BL_BY_B(2, 0)
    case 1: if (trans) { SSM__BL_BY_B(1, 1) } SSM__BL_BY_B(1, 0)
    case 0: if (trans) { SSM__BL_BY_B(0, 1) } SSM__BL_BY_B(0, 0)
    default:
        if (B == 16) trans ? ssm__bl_mm32_kernel<16, 1><<<g32, 256, 0, st>>>(SSM__BL_ARGS32)
                           : ssm__bl_mm32_kernel<16, 0><<<g32, 256, 0, st>>>(SSM__BL_ARGS32);
        else if (B == 32) trans ? ssm__bl_mm32_kernel<32, 1><<<g32, 256, 0, st>>>(SSM__BL_ARGS32)
                                : ssm__bl_mm32_kernel<32, 0><<<g32, 256, 0, st>>>(SSM__BL_ARGS32);
        else trans ? ssm__bl_mm32_kernel<64, 1><<<g32, 256, 0, st>>>(SSM__BL_ARGS32)
                   : ssm__bl_mm32_kernel<64, 0><<<g32, 256, 0, st>>>(SSM__BL_ARGS32);
        return cudaGetLastError();
    }
#undef SSM__BL_BY_B
#undef SSM__BL_ARGS32
#undef SSM__BL_ARGS
}

/* Workspace carving: 256-byte aligned pieces. */
static size_t ssm__bl_al(size_t b) { return (b + 255) & ~(size_t)255; }

typedef struct ssm__bl_ws { /* byte sizes of the pieces of one call */
    size_t tab, list, count, ent, dtab, dlist, dcount, part, bpart;
    int G, ngr, ngc, S, Sb;
    int64_t tps, tpsb;
} ssm__bl_ws;

static ssm__bl_ws ssm__bl_ws_of(const ssm__cu_state *s, const ssm_bell_plan *p, int backward) {
    ssm__bl_ws w;
    const int64_t B = p->B, G = SSM__BL_BN / B, nslots = p->R * p->K, width = p->R * B;
    const int wgmma = p->dtype.bits == 16 && (B == 64 || B == 32); /* room for the wgmma kernels' entries (used where they run) */
    memset(&w, 0, sizeof w);
    w.G = (int)G, w.ngr = (int)((p->R + G - 1) / G), w.ngc = (int)((p->C + G - 1) / G);
    if (p->N == 0) return w; /* nothing but zero gradients */
    if (!backward) { /* forward tables: groups of output rows, lists over input columns */
        w.tab = ssm__bl_al((size_t)w.ngr * p->C * G * 4), w.list = ssm__bl_al((size_t)w.ngr * p->C * 4);
        w.count = ssm__bl_al((size_t)w.ngr * 4);
        if (wgmma) w.ent = ssm__bl_al((size_t)w.ngr * p->C * (G + 1) * 4);
        return w;
    }
    if (p->want_dx) { /* groups of input columns, lists over output rows */
        w.tab = ssm__bl_al((size_t)w.ngc * p->R * G * 4), w.list = ssm__bl_al((size_t)w.ngc * p->R * 4);
        w.count = ssm__bl_al((size_t)w.ngc * 4);
        if (wgmma) w.ent = ssm__bl_al((size_t)w.ngc * p->R * (G + 1) * 4);
    }
    if (p->want_dvalues) {
        /* the CTAs one split runs: the wgmma kernel's units (a group x 256 input columns), the
           mma.sync kernel's regions, the f32 kernel's tiles */
        const int64_t regions = (int64_t)w.ngr * w.ngc, units = (int64_t)w.ngr * ((p->C + 256 / B - 1) / (256 / B));
        const int cuda_cores = ssm__bl_math(s, p->dtype) < 0;
        const int64_t ctas = cuda_cores ? nslots : wgmma ? units : regions;
        const int64_t maxs = (p->N + 255) / 256;
        int64_t S = 1;
        double best = 0.0;
        /* splits by the time of their waves (ceil(S ctas / SMs) waves of N / S tokens), 2% a split
           added for its partials: 640 -> 2560 at B 64 (60 units) runs 2 splits, 1 wave of N / 2;
           the rule before (at least 2 waves of regions) ran 3, 2 waves of N / 3 */
        for (int64_t k = 1; k <= 32 && k <= maxs; ++k) {
            const double t = (double)((k * ctas + s->sms - 1) / s->sms) / (double)k * (1.0 + 0.02 * (double)k);
            if (k == 1 || t < best) S = k, best = t;
        }
        w.tps = ((p->N + S - 1) / S + 63) / 64 * 64; /* whole slabs of the wgmma kernel (64 tokens) */
        w.S = (int)((p->N + w.tps - 1) / w.tps);
        if (w.S < 1) w.S = 1;
        if (!cuda_cores) { /* the tensor-core kernels' region tables */
            w.dtab = ssm__bl_al((size_t)regions * 16 * 4 * 4), w.dlist = ssm__bl_al((size_t)regions * 16 * 4);
            w.dcount = ssm__bl_al((size_t)regions * 4);
        }
        if (w.S > 1) w.part = ssm__bl_al((size_t)w.S * nslots * B * B * 4);
    }
    if (p->want_dbias) {
        const int64_t cb = (width + 63) / 64, maxs = (p->N + 255) / 256;
        int64_t S = (2 * s->sms + cb - 1) / cb;
        if (S > 64) S = 64;
        if (S > maxs) S = maxs;
        if (S < 1) S = 1;
        w.tpsb = (p->N + S - 1) / S;
        if (w.tpsb < 1) w.tpsb = 1;
        w.Sb = (int)((p->N + w.tpsb - 1) / w.tpsb);
        if (w.Sb < 1) w.Sb = 1;
        w.bpart = ssm__bl_al((size_t)w.Sb * width * 4);
    }
    return w;
}
static size_t ssm__bl_ws_total(const ssm__bl_ws *w) {
    return w->tab + w->list + w->count + w->ent + w->dtab + w->dlist + w->dcount + w->part + w->bpart;
}

static ssm_result ssm__bl_supported(ssm_ctx *ctx, const char *op, const ssm_bell_plan *p) {
    if (p->B != 16 && p->B != 32 && p->B != 64)
        return ssm_ctx_error(ctx, SSM_ERROR_UNSUPPORTED, "%s: the CUDA backend has block-ELL kernels for B = 16, 32, 64, got B = %lld",
                             op, (long long)p->B);
    if (p->R * p->K >= (1 << 23) || p->R * p->B >= INT32_MAX || p->C * p->B >= INT32_MAX ||
        (p->R + SSM__BL_BN / p->B - 1) / (SSM__BL_BN / p->B) > 65535 || (p->C + SSM__BL_BN / p->B - 1) / (SSM__BL_BN / p->B) > 65535)
        return ssm_ctx_error(ctx, SSM_ERROR_UNSUPPORTED, "%s: the CUDA backend takes R*K < 2^23 slots and at most %lld block-rows / columns",
                             op, (long long)65535 * (SSM__BL_BN / p->B));
    return SSM_OK;
}

/* Device tables of one direction. dir 0: forward (groups of rows), 1: dx (groups of columns,
   from the transposed index), 2: dvalues regions. ent (dir 0 / 1, may be NULL): the wgmma
   kernel's entries. */
static cudaError_t ssm__bl_tables(cudaStream_t st, const ssm_bell_plan *p, int dir, const ssm_tensor *col_idx,
                                  const ssm_tensor *toff, const ssm_tensor *tsl, int *tab, size_t tab_bytes, int *list,
                                  int *count, int *ent) {
    const int B = (int)p->B, G = SSM__BL_BN / B, R = (int)p->R, K = (int)p->K, C = (int)p->C;
    const int ngr = (R + G - 1) / G, ngc = (C + G - 1) / G;
    const int64_t nslots = (int64_t)R * K;
    cudaError_t e = cudaMemsetAsync(tab, 0xFF, tab_bytes, st); /* -1: no slot */
    if (e != cudaSuccess) return e;
    if (dir == 0) {
        ssm__bl_fwd_table_kernel<<<(unsigned)((nslots + 255) / 256), 256, 0, st>>>(
            (const int *)col_idx->data, col_idx->strides[0], col_idx->strides[1], R, K, C, G, tab);
        ssm__bl_compact_kernel<<<ngr, 32, 0, st>>>(tab, C, G, C, list, count, ent);
    } else if (dir == 1) {
        ssm__bl_dx_table_kernel<<<(C + 127) / 128, 128, 0, st>>>((const int *)toff->data, toff->strides[0],
                                                                  (const int *)tsl->data, tsl->strides[0], R, K, C, G, tab);
        ssm__bl_compact_kernel<<<ngc, 32, 0, st>>>(tab, R, G, R, list, count, ent);
    } else {
        ssm__bl_dw_table_kernel<<<(unsigned)((nslots + 255) / 256), 256, 0, st>>>(
            (const int *)col_idx->data, col_idx->strides[0], col_idx->strides[1], R, K, C, B, ngc, tab);
        ssm__bl_compact_kernel<<<(unsigned)ngr * ngc, 32, 0, st>>>(tab, 16, 4, 16, list, count, NULL);
    }
    return cudaGetLastError();
}

#define SSM__BL_CU(ctx, what, call)                                                                 \
    do {                                                                                            \
        cudaError_t e_ = (call);                                                                    \
        if (e_ != cudaSuccess)                                                                      \
            return ssm_ctx_error(ctx, SSM_ERROR_BACKEND, "CUDA: %s failed: %s (%s)", what,          \
                                 cudaGetErrorString(e_), cudaGetErrorName(e_));                     \
    } while (0)

static ssm_result ssm__cu_bell_forward(ssm_ctx *ctx, const ssm_bell_plan *p, const ssm_tensor *x,
                                       const ssm_tensor *values, const ssm_tensor *col_idx, const ssm_tensor *bias,
                                       ssm_tensor *y) {
    static const char *op = "ssm_bell_forward";
    ssm__cu_state *st = ssm__cu_st(ctx);
    ssm__cu_device_guard guard(st->device);
    ssm__bl_ws w = ssm__bl_ws_of(st, p, 0);
    char *ws;
    int *tab, *list, *count, *ent;
    SSM__TRY(ssm__bl_supported(ctx, op, p));
    SSM__TRY(ssm_ctx_workspace(ctx, ssm__bl_ws_total(&w), (void **)&ws));
    tab = (int *)ws, list = (int *)(ws + w.tab), count = (int *)(ws + w.tab + w.list);
    ent = w.ent ? (int *)(ws + w.tab + w.list + w.count) : NULL;
    SSM__BL_CU(ctx, "block-ELL index tables", ssm__bl_tables(st->stream, p, 0, col_idx, NULL, NULL, tab, w.tab, list, count, ent));
    SSM__BL_CU(ctx, "ssm__bl_mm_kernel (forward)",
               ssm__bl_mm(st, p->dtype, (int)p->B, 0, p->N, (int)p->C, (int)p->K, (int)p->R, w.ngr,
                          ssm__bl_mat_of(x), ssm__bl_vals_of(values), tab, list, count, ent, ssm__bl_mat_of(bias),
                          ssm__bl_mat_of(y)));
    return SSM_OK;
}

static ssm_result ssm__cu_bell_backward(ssm_ctx *ctx, const ssm_bell_plan *p, const ssm_tensor *x,
                                        const ssm_tensor *values, const ssm_tensor *col_idx, const ssm_tensor *t_offsets,
                                        const ssm_tensor *t_slots, const ssm_tensor *dy, ssm_tensor *dx,
                                        ssm_tensor *dvalues, ssm_tensor *dbias) {
    static const char *op = "ssm_bell_backward";
    ssm__cu_state *st = ssm__cu_st(ctx);
    ssm__cu_device_guard guard(st->device);
    ssm__bl_ws w = ssm__bl_ws_of(st, p, 1);
    const int B = (int)p->B, R = (int)p->R, K = (int)p->K, C = (int)p->C, dt = ssm__cu_dt(p->dtype);
    const int64_t nslots = (int64_t)R * K, width = (int64_t)R * B;
    cudaStream_t s = st->stream;
    char *ws, *cur;
    SSM__TRY(ssm__bl_supported(ctx, op, p));
    if (p->N == 0) { /* zero gradients; dx is empty */
        if (dvalues)
            ssm__bl_dw_reduce_kernel<<<(unsigned)((nslots * B * B + 255) / 256), 256, 0, s>>>(nslots, B, K, 0, NULL,
                                                                                             ssm__bl_vals_of(dvalues), dt);
        if (dbias)
            ssm__bl_dbias_reduce_kernel<<<(unsigned)((width + 255) / 256), 256, 0, s>>>(width, 0, NULL, dbias->data,
                                                                                       dbias->strides[0], dt);
        SSM__CU_LAUNCHED(ctx, "block-ELL zero gradients");
        return SSM_OK;
    }
    SSM__TRY(ssm_ctx_workspace(ctx, ssm__bl_ws_total(&w), (void **)&ws));
    cur = ws;
    if (dx) {
        int *tab = (int *)cur, *list = (int *)(cur + w.tab), *count = (int *)(cur + w.tab + w.list);
        int *ent = w.ent ? (int *)(cur + w.tab + w.list + w.count) : NULL;
        ssm__bl_mat none = {NULL, 0, 0};
        cur += w.tab + w.list + w.count + w.ent;
        SSM__BL_CU(ctx, "block-ELL transposed tables",
                   ssm__bl_tables(s, p, 1, col_idx, t_offsets, t_slots, tab, w.tab, list, count, ent));
        SSM__BL_CU(ctx, "ssm__bl_mm_kernel (dx)",
                   ssm__bl_mm(st, p->dtype, B, 1, p->N, R, K, C, w.ngc, ssm__bl_mat_of(dy), ssm__bl_vals_of(values), tab,
                              list, count, ent, none, ssm__bl_mat_of(dx)));
    }
    if (dvalues) {
        ssm__bl_vals dv = ssm__bl_vals_of(dvalues);
        float *part = w.S > 1 ? (float *)(cur + w.dtab + w.dlist + w.dcount) : NULL;
        ssm__bl_mat mdy = ssm__bl_mat_of(dy), mx = ssm__bl_mat_of(x);
        const int mt = ssm__bl_math(st, p->dtype);
        if (mt < 0) {
            dim3 grid((unsigned)nslots, (unsigned)w.S);
            const int *ci = (const int *)col_idx->data;
            if (B == 16) ssm__bl_dw32_kernel<16><<<grid, 256, 0, s>>>(p->N, w.tps, K, ci, col_idx->strides[0], col_idx->strides[1], C, mdy, mx, dv, part, nslots);
            else if (B == 32) ssm__bl_dw32_kernel<32><<<grid, 256, 0, s>>>(p->N, w.tps, K, ci, col_idx->strides[0], col_idx->strides[1], C, mdy, mx, dv, part, nslots);
            else ssm__bl_dw32_kernel<64><<<grid, 256, 0, s>>>(p->N, w.tps, K, ci, col_idx->strides[0], col_idx->strides[1], C, mdy, mx, dv, part, nslots);
            SSM__CU_LAUNCHED(ctx, "ssm__bl_dw32_kernel");
        } else if (ssm__blw_dw(st, p, col_idx, mdy, mx, (int *)cur, w.dtab, w.tps, w.S, dv, part)) {
            SSM__CU_LAUNCHED(ctx, "ssm__blw_dw_kernel");
        } else {
            int *tab = (int *)cur, *list = (int *)(cur + w.dtab), *count = (int *)(cur + w.dtab + w.dlist);
            const int vec = ssm__bl_vec_mat(mdy) && ssm__bl_vec_mat(mx);
            const size_t smem = SSM__BL_DW_SMEM(mt);
            dim3 grid((unsigned)w.ngr * w.ngc, (unsigned)w.S);
            SSM__BL_CU(ctx, "block-ELL region tables", ssm__bl_tables(s, p, 2, col_idx, NULL, NULL, tab, w.dtab, list, count, NULL));
#define SSM__BL_DW(BF_, B_, V_)                                                                                       \
    do {                                                                                                              \
        SSM__BL_CU(ctx, "cudaFuncSetAttribute", cudaFuncSetAttribute(ssm__bl_dw_kernel<BF_, B_, V_>,                  \
                                                                     cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem)); \
        ssm__bl_dw_kernel<BF_, B_, V_><<<grid, 256, smem, s>>>(p->N, w.tps, R, C, K, w.ngc, mdy, mx, tab, list, count, \
                                                               dv, part, nslots);                                     \
    } while (0)
#define SSM__BL_DW_V(BF_, B_) do { if (vec) SSM__BL_DW(BF_, B_, 1); else SSM__BL_DW(BF_, B_, 0); } while (0)
#define SSM__BL_DW_B(BF_) do { if (B == 16) SSM__BL_DW_V(BF_, 16); else if (B == 32) SSM__BL_DW_V(BF_, 32); else SSM__BL_DW_V(BF_, 64); } while (0)
            if (mt == 3) SSM__BL_DW_B(3);
            else if (mt == 2) SSM__BL_DW_B(2);
            else if (mt == 1) SSM__BL_DW_B(1);
            else SSM__BL_DW_B(0);
#undef SSM__BL_DW_B
#undef SSM__BL_DW_V
#undef SSM__BL_DW
            SSM__CU_LAUNCHED(ctx, "ssm__bl_dw_kernel");
        }
        if (part) {
            const int64_t total = nslots * B * B;
            ssm__bl_dw_reduce_kernel<<<(unsigned)((total + 255) / 256), 256, 0, s>>>(nslots, B, K, w.S, part, dv, dt);
            SSM__CU_LAUNCHED(ctx, "ssm__bl_dw_reduce_kernel");
        }
        cur += w.dtab + w.dlist + w.dcount + w.part;
    }
    if (dbias) {
        float *part = (float *)cur;
        dim3 grid((unsigned)((width + 63) / 64), (unsigned)w.Sb);
        ssm__bl_dbias_kernel<<<grid, 256, 0, s>>>(p->N, w.tpsb, width, ssm__bl_mat_of(dy), dt, part);
        ssm__bl_dbias_reduce_kernel<<<(unsigned)((width + 255) / 256), 256, 0, s>>>(width, w.Sb, part, dbias->data,
                                                                                   dbias->strides[0], dt);
        SSM__CU_LAUNCHED(ctx, "ssm__bl_dbias_kernel");
    }
    return SSM_OK;
}

/* ---- block-ELL topology on the device --------------------------------------------------------
   Scores (double) live in device memory. observe: lane sums of squares per B-wide block of x
   and dy (thread per (block, lane), tokens l, l + LANES, ...), the lanes summed in order per
   block, then the grow EMA (thread per (r, c)) and the keep EMA (a CTA per tile: row sums,
   then the rows in order). Every product and sum is __dmul_rn / __dadd_rn so nvcc cannot fuse
   a multiply-add: the same IEEE double operations, in the same order, as ssm.h's host code,
   hence the same bits and the same selection. step: the scores and the index come to the host
   (pinned staging), ssm_bell_topology_select_row (ssm.h's rule) runs per row, then the new
   index, keep scores and per-row permutations go up; a CTA per changed row moves the row's
   tiles along the permutation's cycles (one B x B tile staged in shared memory, fresh tiles
   zeroed) for values and each optimizer state; the transposed index is rebuilt from an
   [R, C] slot map (a thread per column walks the rows in order: ascending slots, no atomics).
   Buffers are allocated once by create (cudaMalloc / cudaMallocHost; observe and step take no
   workspace). Tiles up to B = 64 (one tile in shared memory). */
#define SSM__BT_MAXB 64

typedef struct ssm__bt_state {
    int device;
    int64_t R, C, K;
    void *dmem, *hmem;
    double *keep, *grow, *part, *norm;   /* device: [R*K], [R*C], [LANES*(C+R)], [max(C+R, R*K)] */
    int32_t *col, *perm, *fresh, *changed, *map, *cnt; /* device: [R*K] x3, [R], [R*C], [C+1] */
    double *h_keep, *h_grow, *h_drop;    /* pinned host staging */
    int32_t *h_col, *h_perm, *h_fresh, *h_changed;
    void *h_scratch;
} ssm__bt_state;

static void ssm__bt_release(void *p) {
    ssm__bt_state *b = (ssm__bt_state *)p;
    if (!b) return;
    {
        ssm__cu_device_guard guard(b->device);
        if (b->dmem) cudaFree(b->dmem);
        if (b->hmem) cudaFreeHost(b->hmem);
    }
    free(b);
}

static size_t ssm__bt_al(size_t b) { return (b + 255) & ~(size_t)255; }

static ssm_result ssm__cu_bell_topology_create(ssm_ctx *ctx, ssm_bell_topology *topo) {
    static const char *op = "ssm_bell_topology_create";
    ssm__cu_state *st = ssm__cu_st(ctx);
    ssm__cu_device_guard guard(st->device);
    const int64_t R = topo->R, C = topo->C, K = topo->K, RK = R * K, RC = R * C, nb = C + R;
    const size_t nnorm = (size_t)(nb > RK ? nb : RK);
    size_t dsz[10], hsz[8], dtot = 0, htot = 0;
    char *d, *h;
    int i;
    ssm__bt_state *b;
    if ((uint64_t)RC > ((uint64_t)1 << 40) / 12) /* scores and slot map: keep it addressable */
        return ssm_ctx_error(ctx, SSM_ERROR_OUT_OF_MEMORY, "%s: R*C = %lld scores do not fit in device memory", op,
                             (long long)RC);
    dsz[0] = 8 * RK, dsz[1] = 8 * RC, dsz[2] = 8 * (size_t)SSM_BELL_OBS_LANES * nb, dsz[3] = 8 * nnorm;
    dsz[4] = 4 * RK, dsz[5] = 4 * RK, dsz[6] = 4 * RK, dsz[7] = 4 * R, dsz[8] = 4 * RC, dsz[9] = 4 * (C + 1);
    hsz[0] = 8 * RK, hsz[1] = 8 * RC, hsz[2] = 8 * RK, hsz[3] = 4 * RK, hsz[4] = 4 * RK, hsz[5] = 4 * RK, hsz[6] = 4 * R;
    hsz[7] = SSM_BELL_SELECT_SCRATCH(K, C);
    for (i = 0; i < 10; ++i) dtot += ssm__bt_al(dsz[i]);
    for (i = 0; i < 8; ++i) htot += ssm__bt_al(hsz[i]);
    b = (ssm__bt_state *)calloc(1, sizeof *b);
    if (!b) return ssm_ctx_error(ctx, SSM_ERROR_OUT_OF_MEMORY, "%s: cannot allocate the topology state", op);
    b->device = st->device, b->R = R, b->C = C, b->K = K;
    if (cudaMalloc(&b->dmem, dtot) != cudaSuccess || cudaMallocHost(&b->hmem, htot) != cudaSuccess) {
        cudaGetLastError();
        ssm__bt_release(b);
        return ssm_ctx_error(ctx, SSM_ERROR_OUT_OF_MEMORY, "%s: cannot allocate %zu device + %zu pinned host bytes", op,
                             dtot, htot);
    }
    d = (char *)b->dmem, h = (char *)b->hmem;
#define SSM__BT_TAKE(p, base, k, arr) (p = (decltype(p))(void *)base, base += ssm__bt_al(arr[k]))
    SSM__BT_TAKE(b->keep, d, 0, dsz), SSM__BT_TAKE(b->grow, d, 1, dsz), SSM__BT_TAKE(b->part, d, 2, dsz);
    SSM__BT_TAKE(b->norm, d, 3, dsz), SSM__BT_TAKE(b->col, d, 4, dsz), SSM__BT_TAKE(b->perm, d, 5, dsz);
    SSM__BT_TAKE(b->fresh, d, 6, dsz), SSM__BT_TAKE(b->changed, d, 7, dsz), SSM__BT_TAKE(b->map, d, 8, dsz);
    SSM__BT_TAKE(b->cnt, d, 9, dsz);
    SSM__BT_TAKE(b->h_keep, h, 0, hsz), SSM__BT_TAKE(b->h_grow, h, 1, hsz), SSM__BT_TAKE(b->h_drop, h, 2, hsz);
    SSM__BT_TAKE(b->h_col, h, 3, hsz), SSM__BT_TAKE(b->h_perm, h, 4, hsz), SSM__BT_TAKE(b->h_fresh, h, 5, hsz);
    SSM__BT_TAKE(b->h_changed, h, 6, hsz), SSM__BT_TAKE(b->h_scratch, h, 7, hsz);
#undef SSM__BT_TAKE
    if (cudaMemsetAsync(b->dmem, 0, ssm__bt_al(dsz[0]) + dsz[1], st->stream) != cudaSuccess || /* keep, grow */
        cudaStreamSynchronize(st->stream) != cudaSuccess) {
        cudaError_t e = cudaGetLastError();
        ssm__bt_release(b);
        return ssm_ctx_error(ctx, SSM_ERROR_BACKEND, "%s: CUDA: zeroing the scores failed: %s", op, cudaGetErrorString(e));
    }
    topo->keep_score = b->keep, topo->grow_score = b->grow;
    topo->device_state = b, topo->device_release = ssm__bt_release;
    return SSM_OK;
}

static __device__ __forceinline__ double ssm__bt_ld(const void *p, int64_t off, int dt) {
    if (dt == 0) return (double)((const float *)p)[off];
    if (dt == 2) return (double)__bfloat162float(((const __nv_bfloat16 *)p)[off]);
    return (double)__half2float(((const __half *)p)[off]);
}

/* part[blk * LANES + l]: lane l's sum over tokens l, l + LANES, ... of each token's B squares
   (blocks 0..C-1 of x, then C..C+R-1 of dy). */
__global__ void ssm__bt_lanes_kernel(const void *x, int64_t xrs, int64_t xcs, const void *dy, int64_t yrs, int64_t ycs,
                                     int64_t C, int64_t nb, int64_t N, int B, int dt, double *part) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < nb * SSM_BELL_OBS_LANES;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t blk = i / SSM_BELL_OBS_LANES, l = i % SSM_BELL_OBS_LANES;
        const void *t = blk < C ? x : dy;
        const int64_t rs = blk < C ? xrs : yrs, cs = blk < C ? xcs : ycs, f0 = (blk < C ? blk : blk - C) * B;
        double lane = 0.0;
        for (int64_t n = l; n < N; n += SSM_BELL_OBS_LANES) {
            double tok = 0.0;
            for (int j = 0; j < B; ++j) {
                const double v = ssm__bt_ld(t, n * rs + (f0 + j) * cs, dt);
                tok = __dadd_rn(tok, __dmul_rn(v, v));
            }
            lane = __dadd_rn(lane, tok);
        }
        part[i] = lane;
    }
}
/* norm[blk] = sqrt(sum of its lanes in order). */
__global__ void ssm__bt_norm_kernel(const double *part, int64_t nb, double *norm) {
    for (int64_t blk = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; blk < nb; blk += (int64_t)gridDim.x * blockDim.x) {
        double s = 0.0;
        for (int l = 0; l < SSM_BELL_OBS_LANES; ++l) s = __dadd_rn(s, part[blk * SSM_BELL_OBS_LANES + l]);
        norm[blk] = sqrt(s);
    }
}
/* grow[r, c] = a grow + ((1 - a) act[c]) err[r]   (act = norm[0..C), err = norm[C..C+R)). */
__global__ void ssm__bt_grow_kernel(double *grow, const double *norm, int64_t R, int64_t C, double a, double b) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < R * C; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / C, c = i % C;
        grow[i] = __dadd_rn(__dmul_rn(a, grow[i]), __dmul_rn(__dmul_rn(b, norm[c]), norm[C + r]));
    }
}
/* A CTA per tile s = r*K + k: ||tile||_F (row sums, then the rows in order); ema: keep[s] =
   a keep[s] + (1 - a) norm, else out[s] = norm. */
__global__ void ssm__bt_tile_kernel(const void *v, int64_t s0, int64_t s1, int64_t s2, int64_t s3, int64_t RK, int64_t K,
                                    int B, int dt, int ema, double a, double b, double *keep, double *out) {
    __shared__ double rows[SSM__BT_MAXB];
    for (int64_t s = blockIdx.x; s < RK; s += gridDim.x) {
        const int64_t base = (s / K) * s0 + (s % K) * s1;
        for (int i = threadIdx.x; i < B; i += blockDim.x) {
            double row = 0.0;
            for (int j = 0; j < B; ++j) {
                const double w = ssm__bt_ld(v, base + i * s2 + j * s3, dt);
                row = __dadd_rn(row, __dmul_rn(w, w));
            }
            rows[i] = row;
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            double acc = 0.0;
            for (int i = 0; i < B; ++i) acc = __dadd_rn(acc, rows[i]);
            acc = sqrt(acc);
            if (ema) keep[s] = __dadd_rn(__dmul_rn(a, keep[s]), __dmul_rn(b, acc));
            else out[s] = acc;
        }
        __syncthreads();
    }
}

/* What observe and step both need: the scores on the context's device, tiles the kernels take. */
static ssm_result ssm__bt_usable(ssm_ctx *ctx, const char *op, const ssm_bell_plan *p, const ssm__bt_state *b) {
    const int device = ssm__cu_st(ctx)->device;
    if (b->device != device)
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_DEVICE, "%s: the topology's scores are on cuda:%d, the context works on cuda:%d",
                             op, b->device, device);
    if (p->B > SSM__BT_MAXB)
        return ssm_ctx_error(ctx, SSM_ERROR_UNSUPPORTED, "%s: the CUDA topology takes B <= %d, got B = %lld", op,
                             SSM__BT_MAXB, (long long)p->B);
    return SSM_OK;
}

static ssm_result ssm__cu_bell_topology_observe(ssm_ctx *ctx, const ssm_bell_plan *p, ssm_bell_topology *topo,
                                                const ssm_tensor *x, const ssm_tensor *dy, const ssm_tensor *dvalues) {
    static const char *op = "ssm_bell_topology_observe";
    ssm__cu_state *st = ssm__cu_st(ctx);
    ssm__cu_device_guard guard(st->device);
    ssm__bt_state *b = (ssm__bt_state *)topo->device_state;
    const int64_t nb = p->C + p->R, RK = p->R * p->K;
    const int dt = ssm__cu_dt(p->dtype);
    const double ak = topo->config.keep_alpha, ag = topo->config.grow_alpha;
    SSM__TRY(ssm__bt_usable(ctx, op, p, b));
    ssm__bt_lanes_kernel<<<ssm__cu_blocks(nb * SSM_BELL_OBS_LANES), 256, 0, st->stream>>>(
        x->data, x->strides[0], x->strides[1], dy->data, dy->strides[0], dy->strides[1], p->C, nb, p->N, (int)p->B, dt,
        b->part);
    ssm__bt_norm_kernel<<<ssm__cu_blocks(nb), 256, 0, st->stream>>>(b->part, nb, b->norm);
    ssm__bt_grow_kernel<<<ssm__cu_blocks(p->R * p->C), 256, 0, st->stream>>>(b->grow, b->norm, p->R, p->C, ag, 1.0 - ag);
    ssm__bt_tile_kernel<<<(unsigned)(RK < 65535 * 16 ? RK : 65535 * 16), 64, 0, st->stream>>>(
        dvalues->data, dvalues->strides[0], dvalues->strides[1], dvalues->strides[2], dvalues->strides[3], RK, p->K,
        (int)p->B, dt, 1, ak, 1.0 - ak, b->keep, NULL);
    SSM__CU_LAUNCHED(ctx, "block-ELL topology observe kernels");
    return SSM_OK;
}

/* col_idx (any strides) <-> the contiguous copy. */
__global__ void ssm__bt_col_kernel(int *ci, int64_t s0, int64_t s1, int64_t R, int64_t K, int32_t *col, int up) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < R * K; i += (int64_t)gridDim.x * blockDim.x) {
        int *e = ci + (i / K) * s0 + (i % K) * s1;
        if (up) *e = col[i];
        else col[i] = *e;
    }
}
/* A CTA per changed row: new slot j takes old slot perm[j] (zero when fresh[perm[j]]), moved
   cycle by cycle (a cycle's smallest slot leads it) with one tile staged in shared memory. */
template <typename E>
__global__ void ssm__bt_permute_kernel(E *v, int64_t s0, int64_t s1, int64_t s2, int64_t s3, int64_t R, int64_t K, int B,
                                       const int32_t *perm, const int32_t *fresh, const int32_t *changed) {
    __shared__ E tmp[SSM__BT_MAXB * SSM__BT_MAXB];
    const int bb = B * B;
    for (int64_t r = blockIdx.x; r < R; r += gridDim.x) {
        const int32_t *pr = perm + r * K, *fr = fresh + r * K;
        if (!changed[r]) continue;
        for (int64_t s = 0; s < K; ++s) {
            int64_t j = pr[s];
            int lead = 1;
            while (j != s) { /* every thread walks the same cycle: a uniform branch */
                if (j < s) { lead = 0; break; }
                j = pr[j];
            }
            if (!lead || (pr[s] == s && !fr[s])) continue;
            E *ts = v + r * s0 + s * s1;
            for (int e = threadIdx.x; e < bb; e += blockDim.x) tmp[e] = ts[(e / B) * s2 + (e % B) * s3];
            __syncthreads();
            j = s;
            for (;;) {
                const int64_t src = pr[j];
                E *dst = v + r * s0 + j * s1;
                if (src == s) {
                    for (int e = threadIdx.x; e < bb; e += blockDim.x) dst[(e / B) * s2 + (e % B) * s3] = fr[s] ? E(0) : tmp[e];
                    __syncthreads();
                    break;
                }
                const E *from = v + r * s0 + src * s1;
                for (int e = threadIdx.x; e < bb; e += blockDim.x) {
                    const int64_t o = (e / B) * s2 + (e % B) * s3;
                    dst[o] = fr[src] ? E(0) : from[o];
                }
                __syncthreads();
                j = src;
            }
        }
    }
}
/* The transposed index from the contiguous col: map[r, c] = slot or -1; a thread per column
   counts, one thread scans, a thread per column lists its slots in ascending row order. */
__global__ void ssm__bt_map_kernel(const int32_t *col, int64_t R, int64_t K, int64_t C, int32_t *map) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < R * K; i += (int64_t)gridDim.x * blockDim.x)
        map[(i / K) * C + col[i]] = (int32_t)i;
}
__global__ void ssm__bt_count_kernel(const int32_t *map, int64_t R, int64_t C, int32_t *cnt) {
    for (int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; c < C; c += (int64_t)gridDim.x * blockDim.x) {
        int32_t n = 0;
        for (int64_t r = 0; r < R; ++r) n += map[r * C + c] >= 0;
        cnt[c] = n;
    }
}
__global__ void ssm__bt_scan_kernel(int32_t *cnt, int64_t C, int *toff, int64_t ts) {
    int32_t acc = 0;
    for (int64_t c = 0; c < C; ++c) {
        const int32_t n = cnt[c];
        cnt[c] = acc, toff[c * ts] = acc;
        acc += n;
    }
    toff[C * ts] = acc;
}
__global__ void ssm__bt_list_kernel(const int32_t *map, const int32_t *start, int64_t R, int64_t C, int *tsl, int64_t ss) {
    for (int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; c < C; c += (int64_t)gridDim.x * blockDim.x) {
        int64_t pos = start[c];
        for (int64_t r = 0; r < R; ++r) {
            const int32_t s = map[r * C + c];
            if (s >= 0) tsl[(pos++) * ss] = s;
        }
    }
}

static ssm_result ssm__bt_permute(ssm_ctx *ctx, cudaStream_t s, ssm_tensor *v, const ssm__bt_state *b, int B) {
    const unsigned grid = (unsigned)(b->R < 65535 ? b->R : 65535);
    if (v->dtype.bits == 32)
        ssm__bt_permute_kernel<float><<<grid, 256, 0, s>>>((float *)v->data, v->strides[0], v->strides[1], v->strides[2],
                                                           v->strides[3], b->R, b->K, B, b->perm, b->fresh, b->changed);
    else
        ssm__bt_permute_kernel<unsigned short><<<grid, 256, 0, s>>>((unsigned short *)v->data, v->strides[0], v->strides[1],
                                                                    v->strides[2], v->strides[3], b->R, b->K, B, b->perm,
                                                                    b->fresh, b->changed);
    SSM__CU_LAUNCHED(ctx, "ssm__bt_permute_kernel");
    return SSM_OK;
}

static ssm_result ssm__cu_bell_topology_step(ssm_ctx *ctx, const ssm_bell_plan *p, ssm_bell_topology *topo,
                                             int64_t global_step, int64_t nd, int update, ssm_tensor *values,
                                             ssm_tensor *col_idx, ssm_tensor *t_offsets, ssm_tensor *t_slots,
                                             ssm_tensor *const *opt_states, int n_opt, ssm_bell_topology_report *rep) {
    static const char *op = "ssm_bell_topology_step";
    ssm__cu_state *st = ssm__cu_st(ctx);
    ssm__cu_device_guard guard(st->device);
    ssm__bt_state *b = (ssm__bt_state *)topo->device_state;
    const int64_t R = p->R, K = p->K, C = p->C, RK = R * K;
    const int magnitude = topo->config.drop_score == SSM_BELL_DROP_MAGNITUDE;
    cudaStream_t s = st->stream;
    int64_t r, k, j;
    int o;
    SSM__TRY(ssm__bt_usable(ctx, op, p, b));
    if (!rep) return SSM_OK;
    ssm__bt_col_kernel<<<ssm__cu_blocks(RK), 256, 0, s>>>((int *)col_idx->data, col_idx->strides[0], col_idx->strides[1], R,
                                                          K, b->col, 0);
    if (update && magnitude)
        ssm__bt_tile_kernel<<<(unsigned)(RK < 65535 * 16 ? RK : 65535 * 16), 64, 0, s>>>(
            values->data, values->strides[0], values->strides[1], values->strides[2], values->strides[3], RK, K, (int)p->B,
            ssm__cu_dt(p->dtype), 0, 0.0, 0.0, NULL, b->norm);
    SSM__CU_LAUNCHED(ctx, "block-ELL topology gather kernels");
    SSM__CU_CHECK(ctx, cudaMemcpyAsync(b->h_col, b->col, 4 * RK, cudaMemcpyDeviceToHost, s));
    if (update) {
        SSM__CU_CHECK(ctx, cudaMemcpyAsync(b->h_keep, b->keep, 8 * RK, cudaMemcpyDeviceToHost, s));
        SSM__CU_CHECK(ctx, cudaMemcpyAsync(b->h_grow, b->grow, 8 * R * C, cudaMemcpyDeviceToHost, s));
        if (magnitude) SSM__CU_CHECK(ctx, cudaMemcpyAsync(b->h_drop, b->norm, 8 * RK, cudaMemcpyDeviceToHost, s));
    }
    SSM__CU_CHECK(ctx, cudaStreamSynchronize(s));
    for (r = 0; r < R; ++r) /* the host checks of the index, on the copy: nothing changed yet */
        for (k = 0; k < K; ++k) {
            const int32_t c = b->h_col[r * K + k];
            if (c < 0 || c >= C)
                return ssm_ctx_error(ctx, SSM_ERROR_INVALID_VALUE, "%s: col_idx[%lld,%lld] = %d is outside [0, %lld)", op,
                                     (long long)r, (long long)k, (int)c, (long long)C);
            for (j = 0; j < k; ++j)
                if (b->h_col[r * K + j] == c)
                    return ssm_ctx_error(ctx, SSM_ERROR_INVALID_VALUE, "%s: row %lld uses column %d twice (slots %lld, %lld)",
                                         op, (long long)r, (int)c, (long long)j, (long long)k);
        }
    if (!update) {
        rep->checksum = ssm_bell_checksum_rows(b->h_col, R, K);
        return SSM_OK;
    }
    for (r = 0; r < R; ++r)
        b->h_changed[r] = ssm_bell_topology_select_row(&topo->config, global_step, r, nd, K, C, b->h_col + r * K,
                                                       b->h_keep + r * K, b->h_grow + r * C,
                                                       magnitude ? b->h_drop + r * K : NULL, b->h_perm + r * K,
                                                       b->h_fresh + r * K, b->h_scratch, rep);
    rep->checksum = ssm_bell_checksum_rows(b->h_col, R, K);
    if (rep->rows_changed) { /* else nothing moves: index and scores as they were */
    SSM__CU_CHECK(ctx, cudaMemcpyAsync(b->col, b->h_col, 4 * RK, cudaMemcpyHostToDevice, s));
    SSM__CU_CHECK(ctx, cudaMemcpyAsync(b->keep, b->h_keep, 8 * RK, cudaMemcpyHostToDevice, s));
    SSM__CU_CHECK(ctx, cudaMemcpyAsync(b->perm, b->h_perm, 4 * RK, cudaMemcpyHostToDevice, s));
    SSM__CU_CHECK(ctx, cudaMemcpyAsync(b->fresh, b->h_fresh, 4 * RK, cudaMemcpyHostToDevice, s));
    SSM__CU_CHECK(ctx, cudaMemcpyAsync(b->changed, b->h_changed, 4 * R, cudaMemcpyHostToDevice, s));
    ssm__bt_col_kernel<<<ssm__cu_blocks(RK), 256, 0, s>>>((int *)col_idx->data, col_idx->strides[0], col_idx->strides[1], R,
                                                          K, b->col, 1);
    SSM__CU_LAUNCHED(ctx, "ssm__bt_col_kernel");
    SSM__TRY(ssm__bt_permute(ctx, s, values, b, (int)p->B));
    for (o = 0; o < n_opt; ++o) SSM__TRY(ssm__bt_permute(ctx, s, opt_states[o], b, (int)p->B));
    }
    /* the transposed index, rebuilt on every update step (as the host code does) */
    SSM__CU_CHECK(ctx, cudaMemsetAsync(b->map, 0xFF, 4 * (size_t)(R * C), s));
    ssm__bt_map_kernel<<<ssm__cu_blocks(RK), 256, 0, s>>>(b->col, R, K, C, b->map);
    ssm__bt_count_kernel<<<ssm__cu_blocks(C), 256, 0, s>>>(b->map, R, C, b->cnt);
    ssm__bt_scan_kernel<<<1, 1, 0, s>>>(b->cnt, C, (int *)t_offsets->data, t_offsets->strides[0]);
    ssm__bt_list_kernel<<<ssm__cu_blocks(C), 256, 0, s>>>(b->map, b->cnt, R, C, (int *)t_slots->data, t_slots->strides[0]);
    SSM__CU_LAUNCHED(ctx, "block-ELL transposed index kernels");
    /* the staging is read by the copies above before the next call writes it (same stream,
       and the next call synchronizes before its host loop) */
    return SSM_OK;
}


#ifdef SSM_NCCL
/* ---- NCCL: the data-parallel topology hook and the checksum agreement check ---------------- */
__global__ void ssm__nccl_scale_kernel(double *d, int64_t n, double s) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        d[i] = __dmul_rn(d[i], s);
}

extern "C" SSMDEF ssm_result ssm_cuda_nccl_init(ssm_cuda_nccl *h, ncclComm_t comm, void *stream) {
    if (!h || !comm) return SSM_ERROR_NULL_ARGUMENT;
    memset(h, 0, sizeof *h);
    h->comm = comm, h->stream = stream;
    if (ncclCommCount(comm, &h->nranks) != ncclSuccess || ncclCommUserRank(comm, &h->rank) != ncclSuccess ||
        ncclCommCuDevice(comm, &h->device) != ncclSuccess || h->nranks < 1)
        return SSM_ERROR_BACKEND;
    ssm__cu_device_guard guard(h->device);
    if (cudaMalloc((void **)&h->sums, 8 * (size_t)h->nranks) != cudaSuccess ||
        cudaMallocHost((void **)&h->host, 8 * (size_t)h->nranks) != cudaSuccess) {
        cudaGetLastError();
        ssm_cuda_nccl_free(h);
        return SSM_ERROR_OUT_OF_MEMORY;
    }
    return SSM_OK;
}

extern "C" SSMDEF void ssm_cuda_nccl_free(ssm_cuda_nccl *h) {
    if (!h) return;
    {
        ssm__cu_device_guard guard(h->device);
        if (h->sums) cudaFree(h->sums);
        if (h->host) cudaFreeHost(h->host);
    }
    h->sums = NULL, h->host = NULL;
}

extern "C" SSMDEF ssm_result ssm_cuda_nccl_allreduce(void *user, double *data, int64_t count) {
    ssm_cuda_nccl *h = (ssm_cuda_nccl *)user;
    cudaStream_t s;
    if (!h || !data || count < 0) return SSM_ERROR_NULL_ARGUMENT;
    if (count == 0) return SSM_OK;
    ssm__cu_device_guard guard(h->device);
    s = (cudaStream_t)h->stream;
    if (ncclAllReduce(data, data, (size_t)count, ncclDouble, ncclSum, h->comm, s) != ncclSuccess) return SSM_ERROR_BACKEND;
    if (h->nranks > 1) ssm__nccl_scale_kernel<<<ssm__cu_blocks(count), 256, 0, s>>>(data, count, 1.0 / h->nranks);
    return cudaGetLastError() == cudaSuccess ? SSM_OK : SSM_ERROR_BACKEND;
}

extern "C" SSMDEF ssm_result ssm_cuda_nccl_allgather(void *user, const void *send, void *recv, size_t bytes) {
    ssm_cuda_nccl *h = (ssm_cuda_nccl *)user;
    if (!h || !send || !recv) return SSM_ERROR_NULL_ARGUMENT;
    ssm__cu_device_guard guard(h->device);
    return ncclAllGather(send, recv, bytes, ncclUint8, h->comm, (cudaStream_t)h->stream) == ncclSuccess ? SSM_OK
                                                                                                         : SSM_ERROR_BACKEND;
}

extern "C" SSMDEF ssm_result ssm_cuda_nccl_check_checksum(ssm_ctx *ctx, ssm_cuda_nccl *h, uint64_t checksum) {
    static const char *op = "ssm_cuda_nccl_check_checksum";
    cudaStream_t s;
    ncclResult_t nr;
    int i;
    if (!ctx) return SSM_ERROR_NULL_ARGUMENT;
    if (!h || !h->sums) return ssm_ctx_error(ctx, SSM_ERROR_NULL_ARGUMENT, "%s: h is not initialised", op);
    ssm__cu_device_guard guard(h->device);
    s = (cudaStream_t)h->stream;
    h->host[h->rank] = (unsigned long long)checksum;
    SSM__CU_CHECK(ctx, cudaMemcpyAsync(h->sums + h->rank, h->host + h->rank, 8, cudaMemcpyHostToDevice, s));
    nr = ncclAllGather(h->sums + h->rank, h->sums, 1, ncclUint64, h->comm, s); /* in place */
    if (nr != ncclSuccess)
        return ssm_ctx_error(ctx, SSM_ERROR_BACKEND, "%s: ncclAllGather failed: %s", op, ncclGetErrorString(nr));
    SSM__CU_CHECK(ctx, cudaMemcpyAsync(h->host, h->sums, 8 * (size_t)h->nranks, cudaMemcpyDeviceToHost, s));
    SSM__CU_CHECK(ctx, cudaStreamSynchronize(s));
    for (i = 0; i < h->nranks; ++i)
        if (h->host[i] != (unsigned long long)checksum)
            return ssm_ctx_error(ctx, SSM_ERROR_INVALID_VALUE,
                                 "%s: the topology differs across ranks: rank %d has checksum %016llx, rank %d (this one) %016llx",
                                 op, i, h->host[i], h->rank, (unsigned long long)checksum);
    return SSM_OK;
}
#endif /* SSM_NCCL */

/* >>proj ---- fused projection chains ------------------------------------------------------ */
/* ---- projection chains: one GEMM, then every segment's epilogue in one pass ------------------

   Forward, FUSED (the default): one GEMM over the whole width on the gemm slot (cuBLAS; f32
   stays f32-accurate, no TF32) into y, then ssm__pj_epi_kernel, the whole epilogue in one pass
   over y (a warp per row: bias, pre under SAVE_PRE, the activation, the per-head L2 norm with
   heads of <= 256 columns held in registers), so y is written by the GEMM and read + written
   once more. UNFUSED runs a GEMM and an epilogue pass per segment (the usual layer code).
   ssm__pj_fused_kernel (ssm_cuda_config.proj_kernel = 2; f16 / bf16 with K-contiguous x and W,
   16-byte aligned rows, K % 8 == 0) is the epilogue-in-the-tile variant: a 128 x 128 x 32
   mma.sync tile (m16n8k16, f32 accumulation; 8 warps of 64 x 32, a 4-deep cp.async ring)
   whose epilogue stages the f32 tile in shared memory and applies bias, pre, activation and
   the L2 norm of every head inside the tile before writing y once (heads cut by a tile
   boundary: a second pass, ssm__pj_l2_kernel). On an H200 it reaches ~30% of cuBLAS's rate
   (233 vs 795 TFLOP/s at 8192^3 bf16: mma.sync against wgmma), so it loses to cuBLAS + one
   pass; a wgmma / TMA mainloop is what would make the in-tile epilogue pay: ssm__pjw_kernel
   (proj_kernel = 3, below; the default where it applies) is that kernel. H200, Gated DeltaNet
   rows (d 2048, N 8224, bf16; bench/results/cuda_proj_wgmma_4210d7f.log): FUSED forward 1.95x /
   1.65x / 1.55x the cuBLAS GEMM alone at M = 2048 / 8192 / 32768 (kernel 1: 2.13x / 2.17x /
   2.24x). The accurate epilogue math (expf, IEEE division, 1 / sqrtf) was the cost: with
   ssm__pj_fsig and rsqrtf, 1.27x at M 8192 against the identity epilogue's 1.16x
   (dev/cuda/proj_wgmma.cu; the rest is the 128 x 128 ping-pong mainloop: ncu, tensor pipe 70%
   busy with the identity epilogue against 89% for cuBLAS's 160 x 256 tiles).
   Backward: z (pre, or recomputed by one GEMM into the dPre scratch), one pass computing
   every activation and L2 derivative into dPre (a warp per row; 16-byte vectors for 16-bit
   data, ssm__pj_dact8_kernel) and the decay gates' dA_log
   terms, then one dX and one dW GEMM over the whole width (cuBLAS; per segment when
   UNFUSED); dbias and dA_log are column sums in a fixed order (per-chunk partials, then a
   sum over chunks): no atomics, deterministic. Every reduction runs in a fixed order. */

#define SSM__PJ_BM 128
#define SSM__PJ_BN 128
#define SSM__PJ_BK 32
#define SSM__PJ_LD 40 /* padded smem row (halfs): 80 bytes, conflict-free ldmatrix */
#define SSM__PJ_NST 4
#define SSM__PJ_CLD (SSM__PJ_BN + 4) /* f32 epilogue tile row */
#define SSM__PJ_SMEM (SSM__PJ_NST * (SSM__PJ_BM + SSM__PJ_BN) * SSM__PJ_LD * 2)

/* The segments as the kernels see them (by value: a few hundred bytes of kernel parameters). */
typedef struct ssm__pj_segs {
    int n;
    int act[SSM_PROJ_MAX_SEGMENTS], bias[SSM_PROJ_MAX_SEGMENTS];
    float param[SSM_PROJ_MAX_SEGMENTS];
    int64_t c0[SSM_PROJ_MAX_SEGMENTS + 1], g0[SSM_PROJ_MAX_SEGMENTS], l2[SSM_PROJ_MAX_SEGMENTS];
} ssm__pj_segs;

typedef struct ssm__pj_vec { /* a vector operand: element i at p[i * s] (p NULL: absent) */
    const void *p;
    int64_t s;
} ssm__pj_vec;

typedef struct ssm__pj_mat { /* a 2-D operand: element (r, c) at p[r * rs + c * cs] */
    void *p;
    int64_t rs, cs;
} ssm__pj_mat;

__device__ __forceinline__ float ssm__pj_sigmoid(float z) { return 1.f / (1.f + expf(-z)); }
__device__ __forceinline__ float ssm__pj_softplus(float z) { return fmaxf(z, 0.f) + log1pf(expf(-fabsf(z))); }
/* MUFU ex2 + rcp: a few f32 ulps off ssm__pj_sigmoid, far under a 16-bit result's rounding (the
   16-bit kernels' SiLU / sigmoid: their IEEE division with its range checks and slow path was
   the bulk of the kernel-3 epilogue and of the dPre pass's arithmetic) */
/* (ex2 with ftz: __expf's denormal fix-up costs 3 instructions an element and only changes e
   where 1 + e rounds to 1 anyway) */
__device__ __forceinline__ float ssm__pj_fsig(float z) {
    float e;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(z * -1.44269504088896341f));
    return __fdividef(1.f, 1.f + e);
}

/* SiLU (sig 0: z s) or sigmoid (sig 1: s) and its derivative, from s = sigmoid(z) computed by
   the caller (IEEE, ssm__pj_sigmoid, or MUFU, ssm__pj_fsig, in the 16-bit vector passes) */
__device__ __forceinline__ float ssm__pj_sact(int sig, float z, float s, float *df) {
    if (sig) { *df = s * (1.f - s); return s; }
    *df = s * (1.f + z * (1.f - s));
    return z * s;
}

/* act(z) and its derivative (ssm.h's ssm__proj_act in f32). */
__device__ __forceinline__ float ssm__pj_act(int a, float param, float alog, float z, float *df) {
    float s, t;
    switch (a) {
    case SSM_PROJ_SILU: return ssm__pj_sact(0, z, ssm__pj_sigmoid(z), df);
    case SSM_PROJ_SIGMOID: return ssm__pj_sact(1, z, ssm__pj_sigmoid(z), df);
    case SSM_PROJ_SIGMOID2: s = ssm__pj_sigmoid(z); *df = 2.f * s * (1.f - s); return 2.f * s;
    case SSM_PROJ_LOGSIGMOID: *df = ssm__pj_sigmoid(-z) / param; return -ssm__pj_softplus(-z) / param;
    case SSM_PROJ_SOFTPLUS: *df = ssm__pj_sigmoid(z); return ssm__pj_softplus(z);
    case SSM_PROJ_RELU: *df = z > 0.f ? 1.f : 0.f; return fmaxf(z, 0.f);
    case SSM_PROJ_GELU_TANH: {
        const float k = 0.7978845608028654f, c = 0.044715f;
        t = tanhf(k * (z + c * z * z * z));
        *df = 0.5f * (1.f + t) + 0.5f * z * (1.f - t * t) * k * (1.f + 3.f * c * z * z);
        return 0.5f * z * (1.f + t);
    }
    case SSM_PROJ_DECAY_GATE: s = -expf(alog); *df = s * ssm__pj_sigmoid(z); return s * ssm__pj_softplus(z);
    case SSM_PROJ_SOFTCAP: t = tanhf(z / param); *df = 1.f - t * t; return param * t;
    default: *df = 1.f; return z;
    }
}

__device__ __forceinline__ int ssm__pj_seg_of(const ssm__pj_segs &sg, int64_t c) {
    int s = 0;
    while (s + 1 < sg.n && c >= sg.c0[s + 1]) ++s;
    return s;
}

__device__ __forceinline__ float ssm__pj_wsum(float v) { /* butterfly: the same order on every lane */
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

template <int BF>
__global__ void __launch_bounds__(256, 2) ssm__pj_fused_kernel(int64_t M, int64_t N, int64_t K, const unsigned short *x,
                                                               int64_t xs, const unsigned short *W, int64_t wsr,
                                                               ssm__pj_segs sg, ssm__pj_vec bias, ssm__pj_vec alog,
                                                               ssm__pj_mat y, ssm__pj_mat pre, float eps) {
    extern __shared__ uint4 ssm__pj_smem[];
    unsigned short *sm = (unsigned short *)ssm__pj_smem;
    float *Cs = (float *)ssm__pj_smem;
    __shared__ float colb[SSM__PJ_BN], cola[SSM__PJ_BN], colp[SSM__PJ_BN];
    __shared__ int colact[SSM__PJ_BN], colh[SSM__PJ_BN], colhd[SSM__PJ_BN], heads[SSM__PJ_BN], nheads;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wm = warp >> 2, wn = warp & 3;
    const int64_t m0 = (int64_t)blockIdx.y * SSM__PJ_BM, n0 = (int64_t)blockIdx.x * SSM__PJ_BN;
    const int nk = (int)((K + SSM__PJ_BK - 1) / SSM__PJ_BK);
    float acc[4][4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.f;

    /* one stage: 128 rows of x and of W, 32 k each, 16 bytes a cp.async (zero-filled past M, N, K) */
#define SSM__PJ_LOAD(stage, kt)                                                                          \
    do {                                                                                                 \
        unsigned short *as_ = sm + (stage) * (SSM__PJ_BM + SSM__PJ_BN) * SSM__PJ_LD;                     \
        unsigned short *bs_ = as_ + SSM__PJ_BM * SSM__PJ_LD;                                             \
        const int64_t k0_ = (int64_t)(kt) * SSM__PJ_BK;                                                  \
        _Pragma("unroll") for (int i_ = 0; i_ < 2; ++i_) {                                               \
            const int id_ = tid + 256 * i_, r_ = id_ >> 2, c8_ = (id_ & 3) * 8;                           \
            const bool kok_ = k0_ + c8_ < K;                                                             \
            const bool aok_ = kok_ && m0 + r_ < M, bok_ = kok_ && n0 + r_ < N;                            \
            ssm__cu_dkt_cp<16>(as_ + r_ * SSM__PJ_LD + c8_, x + (aok_ ? (m0 + r_) * xs + k0_ + c8_ : 0), aok_); \
            ssm__cu_dkt_cp<16>(bs_ + r_ * SSM__PJ_LD + c8_, W + (bok_ ? (n0 + r_) * wsr + k0_ + c8_ : 0), bok_); \
        }                                                                                                \
    } while (0)

#pragma unroll
    for (int s = 0; s < SSM__PJ_NST - 1; ++s) {
        if (s < nk) SSM__PJ_LOAD(s, s);
        ssm__cu_dkt_commit();
    }
    /* the tile's columns: segment, bias, A_log, head (while the first stages load) */
    if (tid < SSM__PJ_BN) {
        const int64_t c = n0 + tid;
        int act = 0, h = -1, hd = 0;
        float b = 0.f, al = 0.f, p = 1.f;
        if (c < N) {
            const int s = ssm__pj_seg_of(sg, c);
            act = sg.act[s], p = sg.param[s];
            if (sg.bias[s]) b = ssm__cu_ld(bias.p, BF ? 2 : 1, c * bias.s);
            if (act == SSM_PROJ_DECAY_GATE) al = ssm__cu_ld(alog.p, BF ? 2 : 1, (sg.g0[s] + c - sg.c0[s]) * alog.s);
            if (sg.l2[s] > 0) {
                const int64_t hs = sg.c0[s] + (c - sg.c0[s]) / sg.l2[s] * sg.l2[s];
                hd = (int)sg.l2[s];
                h = hs >= n0 && hs + sg.l2[s] <= n0 + SSM__PJ_BN ? (int)(hs - n0) : -2; /* -2: straddles */
            }
        }
        colact[tid] = act, colp[tid] = p, colb[tid] = b, cola[tid] = al, colh[tid] = h, colhd[tid] = hd;
    }
    __syncthreads();
    if (tid == 0) { /* heads of >= 32 columns inside the tile, in column order */
        int n = 0;
        for (int j = 0; j < SSM__PJ_BN; ++j)
            if (colh[j] == j && colhd[j] >= 32) heads[n++] = j;
        nheads = n;
    }

    for (int kt = 0; kt < nk; ++kt) {
        ssm__cu_dkt_wait<SSM__PJ_NST - 2>();
        __syncthreads();
        if (kt + SSM__PJ_NST - 1 < nk) SSM__PJ_LOAD((kt + SSM__PJ_NST - 1) % SSM__PJ_NST, kt + SSM__PJ_NST - 1);
        ssm__cu_dkt_commit();
        const unsigned short *as = sm + (kt % SSM__PJ_NST) * (SSM__PJ_BM + SSM__PJ_BN) * SSM__PJ_LD;
        const unsigned short *bs = as + SSM__PJ_BM * SSM__PJ_LD;
#pragma unroll
        for (int kk = 0; kk < SSM__PJ_BK / 16; ++kk) {
            unsigned a[4][4], b[2][4];
#pragma unroll
            for (int mi = 0; mi < 4; ++mi)
                ssm__tc_ldm4(a[mi], as + (wm * 64 + mi * 16 + (lane & 15)) * SSM__PJ_LD + kk * 16 + (lane >> 4) * 8);
#pragma unroll
            for (int np = 0; np < 2; ++np)
                ssm__tc_ldm4(b[np], bs + (wn * 32 + np * 16 + (lane & 7) + ((lane >> 4) << 3)) * SSM__PJ_LD + kk * 16 +
                                        (((lane >> 3) & 1) << 3));
#pragma unroll
            for (int mi = 0; mi < 4; ++mi)
#pragma unroll
                for (int np = 0; np < 2; ++np) {
                    ssm__tc_mma<BF>(acc[mi][np * 2], a[mi], b[np][0], b[np][1]);
                    ssm__tc_mma<BF>(acc[mi][np * 2 + 1], a[mi], b[np][2], b[np][3]);
                }
        }
    }
#undef SSM__PJ_LOAD
    ssm__cu_dkt_wait<0>();
    __syncthreads();
    /* the f32 tile into shared memory (over the ring) */
#pragma unroll
    for (int mi = 0; mi < 4; ++mi)
#pragma unroll
        for (int nj = 0; nj < 4; ++nj) {
            const int r = wm * 64 + mi * 16 + (lane >> 2), c = wn * 32 + nj * 8 + 2 * (lane & 3);
            Cs[r * SSM__PJ_CLD + c] = acc[mi][nj][0], Cs[r * SSM__PJ_CLD + c + 1] = acc[mi][nj][1];
            Cs[(r + 8) * SSM__PJ_CLD + c] = acc[mi][nj][2], Cs[(r + 8) * SSM__PJ_CLD + c + 1] = acc[mi][nj][3];
        }
    __syncthreads();
    const int nh = nheads;
    for (int i = 0; i < SSM__PJ_BM / 8; ++i) { /* warp `warp` finishes rows warp * 16 + i */
        const int r = warp * (SSM__PJ_BM / 8) + i;
        const int64_t m = m0 + r;
        float *row = Cs + r * SSM__PJ_CLD, yv[4];
        if (m >= M) break;
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            const int j = lane + 32 * q;
            float df, z = row[j] + colb[j];
            if (pre.p && n0 + j < N) ssm__cu_stv(pre.p, BF ? 2 : 1, m * pre.rs + (n0 + j) * pre.cs, z);
            row[j] = ssm__pj_act(colact[j], colp[j], cola[j], z, &df);
        }
        __syncwarp();
#pragma unroll
        for (int q = 0; q < 4; ++q) { /* small heads: each column sums its head (same order for all) */
            const int j = lane + 32 * q, h = colh[j], hd = colhd[j];
            yv[q] = row[j];
            if (h >= 0 && hd < 32) {
                float ss = 0.f;
                for (int t = 0; t < hd; ++t) ss += row[h + t] * row[h + t];
                yv[q] *= 1.f / sqrtf(ss + eps);
            }
        }
        for (int e = 0; e < nh; ++e) { /* heads of >= 32 columns: a warp reduction each */
            const int h = heads[e], hd = colhd[h];
            float ss = 0.f;
            for (int j = h + lane; j < h + hd; j += 32) ss += row[j] * row[j];
            ss = 1.f / sqrtf(ssm__pj_wsum(ss) + eps);
            for (int j = h + lane; j < h + hd; j += 32) row[j] *= ss;
        }
        __syncwarp();
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            const int j = lane + 32 * q;
            if (n0 + j >= N) continue;
            ssm__cu_stv(y.p, BF ? 2 : 1, m * y.rs + (n0 + j) * y.cs, (colh[j] >= 0 && colhd[j] < 32) ? yv[q] : row[j]);
        }
    }
}

/* Typed loads and stores (f32 math). */
template <typename T> __device__ __forceinline__ float ssm__pj_ld(const void *p, int64_t i);
template <> __device__ __forceinline__ float ssm__pj_ld<float>(const void *p, int64_t i) { return ((const float *)p)[i]; }
template <> __device__ __forceinline__ float ssm__pj_ld<__half>(const void *p, int64_t i) {
    return __half2float(((const __half *)p)[i]);
}
template <> __device__ __forceinline__ float ssm__pj_ld<__nv_bfloat16>(const void *p, int64_t i) {
    return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
}
template <typename T> __device__ __forceinline__ void ssm__pj_st(void *p, int64_t i, float v);
template <> __device__ __forceinline__ void ssm__pj_st<float>(void *p, int64_t i, float v) { ((float *)p)[i] = v; }
template <> __device__ __forceinline__ void ssm__pj_st<__half>(void *p, int64_t i, float v) {
    ((__half *)p)[i] = __float2half_rn(v);
}
template <> __device__ __forceinline__ void ssm__pj_st<__nv_bfloat16>(void *p, int64_t i, float v) {
    ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn(v);
}

#define SSM__PJ_HREG 8 /* L2 heads of <= 32 * 8 = 256 columns keep their values in registers */

/* The whole epilogue as one pass over columns [ca, cb) (segment boundaries) of y, which holds
   x W^T there: bias, pre, activation, per-head L2 norm; a warp per row, y read and written
   once (heads over 256 columns: their activations are re-read once for the norm). */
template <typename T>
__global__ void __launch_bounds__(256) ssm__pj_epi_kernel(int64_t M, int64_t ca, int64_t cb, ssm__pj_segs sg,
                                                          ssm__pj_vec bias, ssm__pj_vec alog, ssm__pj_mat y,
                                                          ssm__pj_mat pre, float eps) {
    const int lane = threadIdx.x & 31, s = blockIdx.y; /* a warp per (row, segment) */
    const int64_t c0 = sg.c0[s] > ca ? sg.c0[s] : ca, c1 = sg.c0[s + 1] < cb ? sg.c0[s + 1] : cb, hd = sg.l2[s];
    const int act = sg.act[s];
    const float p = sg.param[s];
    if (c0 >= c1) return;
    for (int64_t r = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5; r < M; r += ((int64_t)gridDim.x * blockDim.x) >> 5) {
#define SSM__PJ_ZA(c, z, a)                                                                                      \
    do {                                                                                                         \
        float df_, al_ = 0.f;                                                                                    \
        z = ssm__pj_ld<T>(y.p, r * y.rs + (c) * y.cs);                                                           \
        if (sg.bias[s]) z += ssm__pj_ld<T>(bias.p, (c) * bias.s);                                                \
        if (pre.p) ssm__pj_st<T>(pre.p, r * pre.rs + (c) * pre.cs, z);                                           \
        if (act == SSM_PROJ_DECAY_GATE) al_ = ssm__pj_ld<T>(alog.p, (sg.g0[s] + (c) - sg.c0[s]) * alog.s);       \
        a = ssm__pj_act(act, p, al_, z, &df_);                                                                   \
    } while (0)
            if (hd > 0 && hd <= 32 * SSM__PJ_HREG) {
                for (int64_t h = c0; h < c1; h += hd) {
                    float v[SSM__PJ_HREG], ss = 0.f, z;
#pragma unroll
                    for (int t = 0; t < SSM__PJ_HREG; ++t) {
                        const int64_t c = h + lane + 32 * t;
                        v[t] = 0.f;
                        if (32 * t < hd && c < h + hd) {
                            SSM__PJ_ZA(c, z, v[t]);
                            ss += v[t] * v[t];
                        }
                    }
                    ss = 1.f / sqrtf(ssm__pj_wsum(ss) + eps);
#pragma unroll
                    for (int t = 0; t < SSM__PJ_HREG; ++t) {
                        const int64_t c = h + lane + 32 * t;
                        if (32 * t < hd && c < h + hd) ssm__pj_st<T>(y.p, r * y.rs + c * y.cs, v[t] * ss);
                    }
                }
            } else {
                for (int64_t cc = c0; cc < c1; cc += 32 * SSM__PJ_HREG) { /* 8 columns a lane in flight */
                    float zv[SSM__PJ_HREG];
#pragma unroll
                    for (int t = 0; t < SSM__PJ_HREG; ++t) {
                        const int64_t c = cc + lane + 32 * t;
                        zv[t] = c < c1 ? ssm__pj_ld<T>(y.p, r * y.rs + c * y.cs) : 0.f;
                    }
#pragma unroll
                    for (int t = 0; t < SSM__PJ_HREG; ++t) {
                        const int64_t c = cc + lane + 32 * t;
                        float df, al = 0.f, z = zv[t];
                        if (c >= c1) continue;
                        if (sg.bias[s]) z += ssm__pj_ld<T>(bias.p, c * bias.s);
                        if (pre.p) ssm__pj_st<T>(pre.p, r * pre.rs + c * pre.cs, z);
                        if (act == SSM_PROJ_DECAY_GATE) al = ssm__pj_ld<T>(alog.p, (sg.g0[s] + c - sg.c0[s]) * alog.s);
                        ssm__pj_st<T>(y.p, r * y.rs + c * y.cs, ssm__pj_act(act, p, al, z, &df));
                    }
                }
                if (hd > 0) { /* heads over 256 columns: norm from the stored activations */
                    __syncwarp();
                    for (int64_t h = c0; h < c1; h += hd) {
                        float ss = 0.f;
                        for (int64_t c = h + lane; c < h + hd; c += 32) {
                            const float v = ssm__pj_ld<T>(y.p, r * y.rs + c * y.cs);
                            ss += v * v;
                        }
                        ss = 1.f / sqrtf(ssm__pj_wsum(ss) + eps);
                        for (int64_t c = h + lane; c < h + hd; c += 32)
                            ssm__pj_st<T>(y.p, r * y.rs + c * y.cs, ssm__pj_ld<T>(y.p, r * y.rs + c * y.cs) * ss);
                    }
                    __syncwarp();
                }
            }
#undef SSM__PJ_ZA
        }
}

/* Per-head L2 norm of segment s over y's activations, a warp per (row, head); straddle = 1:
   only the heads the fused kernel's tiles cut. */
__global__ void ssm__pj_l2_kernel(int64_t M, int64_t c0, int64_t nh, int64_t hd, int straddle, int dt, ssm__pj_mat y,
                                  float eps) {
    const int lane = threadIdx.x & 31;
    const int64_t nw = M * nh;
    for (int64_t w = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5; w < nw;
         w += ((int64_t)gridDim.x * blockDim.x) >> 5) {
        const int64_t r = w / nh, hs = c0 + (w % nh) * hd;
        float ss = 0.f;
        if (straddle && hs / SSM__PJ_BN == (hs + hd - 1) / SSM__PJ_BN) continue;
        for (int64_t c = hs + lane; c < hs + hd; c += 32) {
            const float v = ssm__cu_ld(y.p, dt, r * y.rs + c * y.cs);
            ss += v * v;
        }
        ss = 1.f / sqrtf(ssm__pj_wsum(ss) + eps);
        for (int64_t c = hs + lane; c < hs + hd; c += 32)
            ssm__cu_stv(y.p, dt, r * y.rs + c * y.cs, ssm__cu_ld(y.p, dt, r * y.rs + c * y.cs) * ss);
    }
}

/* The L2 norm's backward, per element (ssm__pj_dact_kernel, ssm__pj_dact8_kernel): y = a rn,
   rn = 1 / sqrt(ss + eps) (ss the head's sum of a^2), da = rn dy - k a with k = rn^3 (dy . a)
   formed once a head. FAST: MUFU rsqrt (the 16-bit vector pass, as the forward epilogue). */
template <int FAST> __device__ __forceinline__ float ssm__pj_rnorm(float ss, float eps) {
    return FAST ? rsqrtf(ss + eps) : 1.f / sqrtf(ss + eps);
}
__device__ __forceinline__ float ssm__pj_l2_coef(float rn, float dot) { return rn * rn * rn * dot; }
__device__ __forceinline__ float ssm__pj_l2_bwd(float rn, float k, float gy, float a) { return rn * gy - k * a; }

/* dPre (compact [M, N]) from z (pre, or x W^T already in dP plus the bias) and dy; the
   decay gates' dA_log terms gy * a into ga [M, G] (f32). A warp per row, segment by segment;
   L2 heads of <= 256 columns keep a, f'(z) and dy in registers between their two sweeps. */
template <typename T>
__global__ void __launch_bounds__(256) ssm__pj_dact_kernel(int64_t M, int64_t N, int64_t G, ssm__pj_segs sg,
                                                           ssm__pj_vec bias, ssm__pj_vec alog, ssm__pj_mat pre,
                                                           ssm__pj_mat dy, void *dP, float *ga, float eps) {
    const int lane = threadIdx.x & 31, s = blockIdx.y; /* a warp per (row, segment) */
    for (int64_t r = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5; r < M; r += ((int64_t)gridDim.x * blockDim.x) >> 5) {
            const int64_t c0 = sg.c0[s], c1 = sg.c0[s + 1], l2 = sg.l2[s];
            const int act = sg.act[s];
            const float p = sg.param[s];
#define SSM__PJ_Z(c)                                                                                              \
    (pre.p ? ssm__pj_ld<T>(pre.p, r * pre.rs + (c) * pre.cs)                                                      \
           : ssm__pj_ld<T>(dP, r * N + (c)) + (sg.bias[s] ? ssm__pj_ld<T>(bias.p, (c) * bias.s) : 0.f))
#define SSM__PJ_AL(c) (act == SSM_PROJ_DECAY_GATE ? ssm__pj_ld<T>(alog.p, (sg.g0[s] + (c) - c0) * alog.s) : 0.f)
            if (l2 > 0 && l2 <= 32 * SSM__PJ_HREG) { /* y = a rn: da = rn dy - rn^3 a (dy . a) */
                for (int64_t h = c0; h < c1; h += l2) {
                    float a[SSM__PJ_HREG], df[SSM__PJ_HREG], gy[SSM__PJ_HREG], ss = 0.f, dot = 0.f, rn;
#pragma unroll
                    for (int t = 0; t < SSM__PJ_HREG; ++t) {
                        const int64_t c = h + lane + 32 * t;
                        a[t] = df[t] = gy[t] = 0.f;
                        if (32 * t < l2 && c < h + l2) {
                            a[t] = ssm__pj_act(act, p, SSM__PJ_AL(c), SSM__PJ_Z(c), &df[t]);
                            gy[t] = ssm__pj_ld<T>(dy.p, r * dy.rs + c * dy.cs);
                            ss += a[t] * a[t], dot += a[t] * gy[t];
                        }
                    }
                    ss = ssm__pj_wsum(ss), dot = ssm__pj_wsum(dot);
                    rn = ssm__pj_rnorm<0>(ss, eps);
                    const float k = ssm__pj_l2_coef(rn, dot);
#pragma unroll
                    for (int t = 0; t < SSM__PJ_HREG; ++t) {
                        const int64_t c = h + lane + 32 * t;
                        if (32 * t < l2 && c < h + l2) {
                            const float g = ssm__pj_l2_bwd(rn, k, gy[t], a[t]);
                            if (act == SSM_PROJ_DECAY_GATE) ga[r * G + sg.g0[s] + c - c0] = g * a[t];
                            ssm__pj_st<T>(dP, r * N + c, g * df[t]);
                        }
                    }
                }
                continue;
            }
            if (l2 == 0) { /* no norm: 8 columns a lane in flight */
                for (int64_t cc = c0; cc < c1; cc += 32 * SSM__PJ_HREG) {
                    float zv[SSM__PJ_HREG], gv[SSM__PJ_HREG];
#pragma unroll
                    for (int t = 0; t < SSM__PJ_HREG; ++t) {
                        const int64_t c = cc + lane + 32 * t;
                        zv[t] = c < c1 ? SSM__PJ_Z(c) : 0.f;
                        gv[t] = c < c1 ? ssm__pj_ld<T>(dy.p, r * dy.rs + c * dy.cs) : 0.f;
                    }
#pragma unroll
                    for (int t = 0; t < SSM__PJ_HREG; ++t) {
                        const int64_t c = cc + lane + 32 * t;
                        float df, a;
                        if (c >= c1) continue;
                        a = ssm__pj_act(act, p, SSM__PJ_AL(c), zv[t], &df);
                        if (act == SSM_PROJ_DECAY_GATE) ga[r * G + sg.g0[s] + c - c0] = gv[t] * a;
                        ssm__pj_st<T>(dP, r * N + c, gv[t] * df);
                    }
                }
                continue;
            }
            for (int64_t h = c0; h < c1; h += (l2 > 0 ? l2 : c1 - c0)) {
                const int64_t he = l2 > 0 ? h + l2 : c1;
                float rn = 1.f, k = 0.f, df, a;
                if (l2 > 0) { /* heads over 256 columns: two sweeps */
                    float ss = 0.f, dot = 0.f;
                    for (int64_t c = h + lane; c < he; c += 32) {
                        a = ssm__pj_act(act, p, SSM__PJ_AL(c), SSM__PJ_Z(c), &df);
                        ss += a * a, dot += a * ssm__pj_ld<T>(dy.p, r * dy.rs + c * dy.cs);
                    }
                    ss = ssm__pj_wsum(ss), dot = ssm__pj_wsum(dot);
                    rn = ssm__pj_rnorm<0>(ss, eps), k = ssm__pj_l2_coef(rn, dot);
                }
                for (int64_t c = h + lane; c < he; c += 32) {
                    float g = ssm__pj_ld<T>(dy.p, r * dy.rs + c * dy.cs);
                    a = ssm__pj_act(act, p, SSM__PJ_AL(c), SSM__PJ_Z(c), &df);
                    if (l2 > 0) g = ssm__pj_l2_bwd(rn, k, g, a);
                    if (act == SSM_PROJ_DECAY_GATE) ga[r * G + sg.g0[s] + c - c0] = g * a;
                    ssm__pj_st<T>(dP, r * N + c, g * df);
                }
            }
#undef SSM__PJ_Z
#undef SSM__PJ_AL
        }
}

/* ssm__pj_dact_kernel for 16-bit data in 16-byte vectors (ssm__pj_dact8_ok): a lane holds 8
   adjacent columns, a warp 256 per step, an L2 head of hd columns hd / 8 adjacent lanes (hd a
   power of two <= 256: a shuffle reduction inside the lane group). SiLU and sigmoid through
   ssm__pj_fsig. The scalar kernel (2-byte loads, 4 or 8 in flight a lane, IEEE division) ran
   at a fifth of the bandwidth floor: H200, M 8192, N 8224 bf16, 510 us for 405 MB. At M 32768
   it moved its 1.6 GB in 667 us (50% of DRAM peak, ncu; issuing each step's loads a step
   ahead: 693 us); the SiLU / sigmoid instantiations (the activation no longer tested per
   element) cut its instructions by 8% and its time to 594 us (56% of peak); five blocks an SM
   (48 registers, no spill) 569 us (59%); six (40 registers) spill and take 603 us. With
   ssm__pj_fsig's ex2 flushing denormals and the norm's rsqrt: 542 us, 9% fewer instructions. */
template <typename T> __device__ __forceinline__ void ssm__pj_ld8(const void *p, int64_t i, float *v) {
    const uint4 u = *(const uint4 *)((const T *)p + i);
    const T *h = (const T *)&u;
#pragma unroll
    for (int e = 0; e < 8; ++e) v[e] = ssm__pj_ld<T>(h, e);
}
/* One segment's rows; ACT is SSM_PROJ_SILU or SSM_PROJ_SIGMOID (the bulk of a layer's width:
   straight-line code for them), or -1 for any activation read at run time. */
template <typename T, int ACT>
__device__ __forceinline__ void ssm__pj_dact8_seg(int64_t M, int64_t N, int64_t G, const ssm__pj_segs &sg, const ssm__pj_vec &bias,
                                                  const ssm__pj_vec &alog, const ssm__pj_mat &pre, const ssm__pj_mat &dy,
                                                  void *dP, float *ga, float eps, int s) {
    const int lane = threadIdx.x & 31;
    const int64_t c0 = sg.c0[s], c1 = sg.c0[s + 1], l2 = sg.l2[s];
    const int act = sg.act[s], gl = l2 > 0 ? (int)(l2 / 8) : 1, hb = sg.bias[s]; /* lanes per head */
    const float p = sg.param[s];
    for (int64_t r = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5; r < M; r += ((int64_t)gridDim.x * blockDim.x) >> 5)
        for (int64_t base = c0; base < c1; base += 256) { /* every lane runs every step (shuffles) */
            const int64_t c = base + 8 * lane;
            const bool on = c < c1; /* whole heads on or off: width % hd == 0, steps start on heads */
            float z[8], gy[8], a[8], df[8], ss = 0.f, dot = 0.f;
            if (on) {
                ssm__pj_ld8<T>(dy.p, r * dy.rs + c, gy);
                if (pre.p) ssm__pj_ld8<T>(pre.p, r * pre.rs + c, z);
                else {
                    ssm__pj_ld8<T>(dP, r * N + c, z);
                    if (hb)
#pragma unroll
                        for (int e = 0; e < 8; ++e) z[e] += ssm__pj_ld<T>(bias.p, (c + e) * bias.s);
                }
            } else {
#pragma unroll
                for (int e = 0; e < 8; ++e) z[e] = gy[e] = 0.f;
            }
#pragma unroll
            for (int e = 0; e < 8; ++e) {
                if (ACT == SSM_PROJ_SILU || ACT == SSM_PROJ_SIGMOID)
                    a[e] = ssm__pj_sact(ACT == SSM_PROJ_SIGMOID, z[e], ssm__pj_fsig(z[e]), &df[e]);
                else {
                    const float al = act == SSM_PROJ_DECAY_GATE && on ? ssm__pj_ld<T>(alog.p, (sg.g0[s] + c + e - c0) * alog.s) : 0.f;
                    a[e] = ssm__pj_act(act, p, al, z[e], &df[e]);
                }
                ss += a[e] * a[e], dot += a[e] * gy[e];
            }
            if (l2 > 0) { /* y = a rn: da = rn dy - rn^3 a (dy . a) */
                for (int o = 1; o < gl; o <<= 1)
                    ss += __shfl_xor_sync(0xffffffffu, ss, o), dot += __shfl_xor_sync(0xffffffffu, dot, o);
                const float rn = ssm__pj_rnorm<1>(ss, eps), k = ssm__pj_l2_coef(rn, dot);
#pragma unroll
                for (int e = 0; e < 8; ++e) gy[e] = ssm__pj_l2_bwd(rn, k, gy[e], a[e]);
            }
            if (!on) continue;
            if (ACT < 0 && act == SSM_PROJ_DECAY_GATE)
#pragma unroll
                for (int e = 0; e < 8; ++e) ga[r * G + sg.g0[s] + c + e - c0] = gy[e] * a[e];
            uint4 u;
            T *h = (T *)&u;
#pragma unroll
            for (int e = 0; e < 8; ++e) ssm__pj_st<T>(h, e, gy[e] * df[e]);
            *(uint4 *)((T *)dP + r * N + c) = u;
        }
}
template <typename T>
__global__ void __launch_bounds__(256, 5) ssm__pj_dact8_kernel(int64_t M, int64_t N, int64_t G, ssm__pj_segs sg,
                                                               ssm__pj_vec bias, ssm__pj_vec alog, ssm__pj_mat pre,
                                                               ssm__pj_mat dy, void *dP, float *ga, float eps) {
    const int s = blockIdx.y, act = sg.act[s]; /* a warp per (row, segment) */
    if (act == SSM_PROJ_SILU) ssm__pj_dact8_seg<T, SSM_PROJ_SILU>(M, N, G, sg, bias, alog, pre, dy, dP, ga, eps, s);
    else if (act == SSM_PROJ_SIGMOID) ssm__pj_dact8_seg<T, SSM_PROJ_SIGMOID>(M, N, G, sg, bias, alog, pre, dy, dP, ga, eps, s);
    else ssm__pj_dact8_seg<T, -1>(M, N, G, sg, bias, alog, pre, dy, dP, ga, eps, s);
}
/* ssm__pj_dact8_kernel's conditions: 16-bit; dy and pre (when given) column-contiguous with rows
   of whole 16-byte vectors on 16-byte aligned bases; N and every segment's width % 8 == 0 (the
   dPre scratch is compact [M, N] in the 256-byte aligned workspace); L2 heads a power of two
   from 8 to 256 columns. */
static int ssm__pj_dact8_ok(const ssm_proj_plan *p, const ssm_tensor *pre, const ssm_tensor *dy) {
    int s;
    if (p->dtype.bits != 16 || p->N % 8) return 0;
    if (dy->strides[1] != 1 || dy->strides[0] % 8 || ((uintptr_t)dy->data & 15)) return 0;
    if (pre && (pre->strides[1] != 1 || pre->strides[0] % 8 || ((uintptr_t)pre->data & 15))) return 0;
    for (s = 0; s < p->nseg; ++s) {
        const int64_t hd = p->seg[s].l2_head;
        if (p->seg[s].width % 8 || (hd > 0 && (hd < 8 || hd > 256 || (hd & (hd - 1))))) return 0;
    }
    return 1;
}

/* Column sums of a [rows, cols] matrix (row stride rs, unit column stride), in a fixed order:
   part[k][c] = sum of chunk k's rows; then ssm__pj_colfin_kernel sums the chunks. With segments
   (sg.n > 0: a projection has at least one), column c is a projection's column and only those
   of biased segments are summed (dbias: the others are zeros, often all but a few columns of
   N); a zeroed sg sums every column. */
__device__ __forceinline__ int ssm__pj_col_on(const ssm__pj_segs &sg, int64_t c) {
    return !sg.n || sg.bias[ssm__pj_seg_of(sg, c)];
}
__global__ void ssm__pj_colsum_kernel(const void *src, int dt, int64_t rows, int64_t cols, int64_t rs, int64_t chunk,
                                      ssm__pj_segs sg, float *part) {
    const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, r0 = (int64_t)blockIdx.y * chunk;
    const int64_t r1 = r0 + chunk < rows ? r0 + chunk : rows;
    float s = 0.f;
    if (c >= cols || !ssm__pj_col_on(sg, c)) return;
    for (int64_t r = r0; r < r1; ++r) s += ssm__cu_ld(src, dt, r * rs + c);
    part[blockIdx.y * cols + c] = s;
}
/* out[c * os] = sum_k part[k][c] (0 for the columns left out) */
__global__ void ssm__pj_colfin_kernel(const float *part, int64_t nchunks, int64_t cols, ssm__pj_segs sg, void *out,
                                      int dt, int64_t os) {
    const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    float s = 0.f;
    if (c >= cols) return;
    if (ssm__pj_col_on(sg, c))
        for (int64_t k = 0; k < nchunks; ++k) s += part[k * cols + c];
    ssm__cu_stv(out, dt, c * os, s);
}

static ssm__pj_segs ssm__pj_segs_of(const ssm_proj_plan *p) {
    ssm__pj_segs g;
    memset(&g, 0, sizeof g);
    g.n = p->nseg;
    for (int s = 0; s < p->nseg; ++s) {
        g.act[s] = (int)p->seg[s].act, g.bias[s] = p->seg[s].bias, g.param[s] = (float)p->seg[s].param;
        g.c0[s] = p->c0[s], g.g0[s] = p->g0[s], g.l2[s] = p->seg[s].l2_head;
    }
    g.c0[p->nseg] = p->c0[p->nseg];
    return g;
}
static ssm__pj_mat ssm__pj_mat_of(const ssm_tensor *t) {
    ssm__pj_mat m;
    m.p = t ? t->data : NULL, m.rs = t ? t->strides[0] : 0, m.cs = t && t->ndim > 1 ? t->strides[1] : 0;
    return m;
}
static ssm__pj_vec ssm__pj_vec_of(const ssm_tensor *t) {
    ssm__pj_vec v;
    v.p = t ? t->data : NULL, v.s = t ? t->strides[0] : 0;
    return v;
}
static ssm_matrix_batch ssm__pj_mb(void *p, int64_t rs, int64_t cs) {
    ssm_matrix_batch m;
    memset(&m, 0, sizeof m);
    m.ptr = p, m.rs = rs, m.cs = cs;
    return m;
}
static size_t ssm__pj_al(size_t b) { return b > SIZE_MAX - 255 ? SIZE_MAX : (b + 255) & ~(size_t)255; } /* saturating */
/* rows per column-sum chunk: 256, more when the grid's y dimension would pass 65535 */
static int64_t ssm__pj_chunk(int64_t rows) {
    int64_t c = 256;
    while ((rows + c - 1) / c > 65535) c *= 2;
    return c;
}

/* Device scratch of a proj call: the backward's dPre [M, N], dA_log terms [M, G] and the
   column-sum partials; the forward needs none. */
static size_t ssm__pj_ws(const ssm_proj_plan *p) {
    size_t es = (size_t)p->dtype.bits / 8u, nch;
    if (p->op == SSM_OP_PROJ_FORWARD || p->M == 0) return 0;
    if (p->M > ((int64_t)1 << 62)) return SIZE_MAX; /* no such tensor; ssm__pj_chunk would overflow */
    nch = (size_t)((p->M + ssm__pj_chunk(p->M) - 1) / ssm__pj_chunk(p->M));
    /* saturating: a query may carry sizes whose products overflow (refused as SIZE_MAX) */
    return ssm__cu_szadd(ssm__cu_szadd(ssm__pj_al(ssm__cu_szmul(ssm__cu_szmul(es, p->M), p->N)),
                                       ssm__pj_al(ssm__cu_szmul(ssm__cu_szmul(4u, p->M), p->G))),
                         ssm__pj_al(ssm__cu_szmul(ssm__cu_szmul(4u, (int64_t)nch), p->N + p->G)));
}

/* biased: NULL, or the projection's segments (then only the biased segments' columns are summed) */
static ssm_result ssm__pj_colsums(ssm_ctx *ctx, const void *src, int dt, int64_t rows, int64_t cols, int64_t rs,
                                  const ssm__pj_segs *biased, float *part, void *out, int odt, int64_t os) {
    cudaStream_t st = ssm__cu_st(ctx)->stream;
    const int64_t chunk = ssm__pj_chunk(rows), nch = (rows + chunk - 1) / chunk;
    ssm__pj_segs sg;
    if (cols <= 0) return SSM_OK;
    if (biased) sg = *biased;
    else memset(&sg, 0, sizeof sg);
    ssm__pj_colsum_kernel<<<dim3((unsigned)((cols + 255) / 256), (unsigned)nch), 256, 0, st>>>(src, dt, rows, cols, rs,
                                                                                             chunk, sg, part);
    SSM__CU_LAUNCHED(ctx, "ssm__pj_colsum_kernel");
    ssm__pj_colfin_kernel<<<(unsigned)((cols + 255) / 256), 256, 0, st>>>(part, nch, cols, sg, out, odt, os);
    SSM__CU_LAUNCHED(ctx, "ssm__pj_colfin_kernel");
    return SSM_OK;
}

/* The fused kernel's conditions: 16-bit, K-contiguous x and W with 16-byte aligned rows. */
static int ssm__pj_fusable(const ssm_proj_plan *p, const ssm_tensor *x, const ssm_tensor *W) {
    return p->dtype.bits == 16 && p->path == SSM_PROJ_FUSED && p->K % 8 == 0 && p->K > 0 && x->strides[1] == 1 &&
           W->strides[1] == 1 && x->strides[0] % 8 == 0 && W->strides[0] % 8 == 0 && !((uintptr_t)x->data & 15) &&
           !((uintptr_t)W->data & 15) && (p->M + SSM__PJ_BM - 1) / SSM__PJ_BM <= 65535;
}

/* proj_kernel 3's conditions (besides the sm_90a check): 16-bit FUSED; x and W K-contiguous
   with 16-byte aligned bases and row strides (TMA: global strides multiples of 16 bytes), K % 8;
   y (and pre) column-contiguous with even row strides and 4-byte aligned bases, N even (pairs of
   columns per store); M, N below 2^31 - 256; unless forced (proj_kernel = 3), L2 heads of >= 16
   columns (the epilogue visits a row's accumulators once per head in the tile). */
static int ssm__pjw_fits(const ssm_proj_plan *p, const ssm_tensor *x, const ssm_tensor *W, const ssm_tensor *y,
                         const ssm_tensor *pre, int forced) {
    int s;
    if (!(p->dtype.bits == 16 && p->path == SSM_PROJ_FUSED && p->K % 8 == 0 && p->K > 0 && p->N % 2 == 0 && p->N > 0 &&
          p->M > 0 && p->M < ((int64_t)1 << 31) - 256 && p->N < ((int64_t)1 << 31) - 256 && p->K < ((int64_t)1 << 31) - 256))
        return 0;
    if (((p->M + 127) / 128) * ((p->N + 127) / 128) >= ((int64_t)1 << 31)) return 0;
    if (x->strides[1] != 1 || W->strides[1] != 1 || x->strides[0] % 8 || W->strides[0] % 8 || x->strides[0] <= 0 ||
        W->strides[0] <= 0 || x->strides[0] >= ((int64_t)1 << 38) || W->strides[0] >= ((int64_t)1 << 38) ||
        ((uintptr_t)x->data & 15) || ((uintptr_t)W->data & 15))
        return 0;
    if (y->ndim != 2 || y->strides[1] != 1 || y->strides[0] % 2 || ((uintptr_t)y->data & 3)) return 0;
    if (pre && (pre->ndim != 2 || pre->strides[1] != 1 || pre->strides[0] % 2 || ((uintptr_t)pre->data & 3))) return 0;
    for (s = 0; s < p->nseg; ++s)
        if (!forced && p->seg[s].l2_head > 0 && p->seg[s].l2_head < 16) return 0;
    return 1;
}


/* ---- proj_kernel 3: the sm_90a TMA + wgmma ping-pong GEMM with the whole epilogue in registers
   (moved from dev/cuda/gemm_wgmma.cu's q128). 384 threads: warpgroup 0 produces (one thread
   issues TMA loads of 128 x 64 slices of x and W, 128-byte swizzle, into a 6-stage ring of
   mbarrier-guarded stages), warpgroups 1 and 2 consume: persistent, each owns a whole 128 x 128
   tile (two m64n128k16 per k16, 128 f32 accumulators a thread), the two alternate so one runs
   its mainloop while the other runs its epilogue; order mbarriers keep every parity wait one
   phase ahead at most. (Measured and not kept, 6478d29: CTAs in pairs, clusters of 2 on two row
   tiles sharing W's tile, each loading half of it multicast to both, a quarter less L2-to-SM
   traffic. Slower on an H200: identity GEMM 8192^3 87-88% of cuBLAS against 93-97%, the
   layer at M 32768 1.94-2.06 ms against 1.80. Again, 2026-11-29, with the output tile staged
   in shared memory and written by TMA stores, the dev harness's fastest fused form (c128s,
   dev/cuda/proj_staged_pairs.patch): all 323 proj rows pass, memcheck clean, but the layer
   at M 8192 0.458-0.472 ms against 0.472-0.474 and no gain at M 32768 or on the identity
   GEMM: docs/DESIGN.md.)
   Epilogue straight from the accumulators (f32 math: SiLU and sigmoid
   through MUFU ex2 / rcp, ssm__pj_fsig, the norm's rsqrtf; the other activations as ssm__pj_act):
   bias, pre under SAVE_PRE, every
   activation per segment, the L2 norm of every head inside the tile (a quad reduction each, all
   64 accumulators of a row half visited per head: by default only heads of >= 16 columns); heads a 128-column tile boundary cuts get the same second pass as kernel 2
   (ssm__pj_l2_kernel). Device code only in sm_90a builds (__CUDA_ARCH_FEAT_SM90_ALL); other
   builds compile an empty stub, which the host detects (the real kernel has static shared
   memory, the stub none) and then takes kernel 1. */
#ifdef SSM__SM90_HAVE
#define SSM__PJW_ST 6
#define SSM__PJW_BK 64
#define SSM__PJW_GM 16 /* tiles numbered in groups of 16 row tiles (L2 reuse) */
#define SSM__PJW_SMEM (SSM__PJW_ST * 2 * 128 * SSM__PJW_BK * 2 + 1024)
#define SSM__PJW_MAXH 128 /* heads inside a 128-column tile */

typedef struct __align__(16) ssm__pjw_cols { /* one consumer warpgroup's view of its tile's 128 columns (float2 reads of b) */
    float b[128], al[128], p[128];
    int nsg, nh;
    int sact[SSM_PROJ_MAX_SEGMENTS], slo[SSM_PROJ_MAX_SEGMENTS], shi[SSM_PROJ_MAX_SEGMENTS];
    int h0[SSM__PJW_MAXH], hd[SSM__PJW_MAXH];
} ssm__pjw_cols;

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
/* SiLU, sigmoid and GELU (tanh form, as sigmoid(2u)) through ssm__pj_fsig; the other
   activations keep ssm__pj_act's expressions. H200, M 8192 (dev/cuda/proj_wgmma.cu,
   bench/results/cuda_proj_wgmma_f3e19ab.log): 0.609 -> 0.498 ms, the identity epilogue 0.457;
   ncu: tensor pipe 49% -> 66% of cycles (identity 70%, cuBLAS's 160x256 tiles 89%). */
__device__ __forceinline__ float ssm__pjw_f(int a, float p, float al, float z) {
    float df;
    if (a == SSM_PROJ_SILU) return z * ssm__pj_fsig(z);
    if (a == SSM_PROJ_SIGMOID) return ssm__pj_fsig(z);
    if (a == SSM_PROJ_GELU_TANH) /* 0.5 (1 + tanh u) = sigmoid(2u), u = sqrt(2/pi) (z + 0.044715 z^3) */
        return z * ssm__pj_fsig(1.5957691216057308f * (z + 0.044715f * z * z * z));
    return ssm__pj_act(a, p, al, z, &df);
}
/* Activation A (a constant: the switch folds; -1: act per call) on the values of columns [lo, hi)
   of the tile; d[4j + {0,1}] are row r0, columns 8j + 2q + {0,1}; d[4j + {2,3}] row r0 + 8. */
template <int A>
__device__ __forceinline__ void ssm__pjw_act(float *d, const ssm__pjw_cols &cc, int act, int lo, int hi, int q) {
#pragma unroll
    for (int j = 0; j < 16; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
            const int c = 8 * j + 2 * q + e;
            if (c >= lo && c < hi) {
                const float p = cc.p[c], al = cc.al[c];
                d[4 * j + e] = ssm__pjw_f(A >= 0 ? A : act, p, al, d[4 * j + e]);
                d[4 * j + 2 + e] = ssm__pjw_f(A >= 0 ? A : act, p, al, d[4 * j + 2 + e]);
            }
        }
}

template <int BF>
__device__ __forceinline__ void ssm__pjw_epi(float *d, const ssm__pjw_cols &cc, int64_t M, int64_t N, int64_t r0, int64_t n0,
                                             int q, const ssm__pj_mat &y, const ssm__pj_mat &pre, float eps) {
    const bool ok0 = r0 < M, ok1 = r0 + 8 < M;
#pragma unroll
    for (int j = 0; j < 16; ++j) {
        const int c = 8 * j + 2 * q;
        const float2 b = *(const float2 *)(cc.b + c);
        d[4 * j] += b.x, d[4 * j + 1] += b.y, d[4 * j + 2] += b.x, d[4 * j + 3] += b.y;
        if (pre.p && n0 + c < N) { /* N even: c + 1 < N too */
            if (ok0) ssm__sm90_st2<BF>(pre.p, r0 * pre.rs + n0 + c, d[4 * j], d[4 * j + 1]);
            if (ok1) ssm__sm90_st2<BF>(pre.p, (r0 + 8) * pre.rs + n0 + c, d[4 * j + 2], d[4 * j + 3]);
        }
    }
    for (int s = 0; s < cc.nsg; ++s) { /* the segments the tile overlaps (uniform across the warpgroup) */
        const int a = cc.sact[s], lo = cc.slo[s], hi = cc.shi[s];
        switch (a) {
        case SSM_PROJ_NONE: break;
        case SSM_PROJ_SILU: ssm__pjw_act<SSM_PROJ_SILU>(d, cc, a, lo, hi, q); break;
        case SSM_PROJ_SIGMOID: ssm__pjw_act<SSM_PROJ_SIGMOID>(d, cc, a, lo, hi, q); break;
        case SSM_PROJ_DECAY_GATE: ssm__pjw_act<SSM_PROJ_DECAY_GATE>(d, cc, a, lo, hi, q); break;
        case SSM_PROJ_GELU_TANH: ssm__pjw_act<SSM_PROJ_GELU_TANH>(d, cc, a, lo, hi, q); break;
        default: ssm__pjw_act<-1>(d, cc, a, lo, hi, q); break;
        }
    }
    for (int e = 0; e < cc.nh; ++e) { /* heads inside the tile: 4 lanes hold a row's 128 columns */
        const int h = cc.h0[e], hd = cc.hd[e];
        float s0 = 0.f, s1 = 0.f;
#pragma unroll
        for (int j = 0; j < 16; ++j)
#pragma unroll
            for (int u = 0; u < 2; ++u)
                if ((unsigned)(8 * j + 2 * q + u - h) < (unsigned)hd)
                    s0 += d[4 * j + u] * d[4 * j + u], s1 += d[4 * j + 2 + u] * d[4 * j + 2 + u];
        s0 += __shfl_xor_sync(0xffffffffu, s0, 1), s1 += __shfl_xor_sync(0xffffffffu, s1, 1);
        s0 += __shfl_xor_sync(0xffffffffu, s0, 2), s1 += __shfl_xor_sync(0xffffffffu, s1, 2);
        s0 = rsqrtf(s0 + eps), s1 = rsqrtf(s1 + eps); /* MUFU rsq, ~2 ulp (eps > 0) */
#pragma unroll
        for (int j = 0; j < 16; ++j)
#pragma unroll
            for (int u = 0; u < 2; ++u)
                if ((unsigned)(8 * j + 2 * q + u - h) < (unsigned)hd) d[4 * j + u] *= s0, d[4 * j + 2 + u] *= s1;
    }
#pragma unroll
    for (int j = 0; j < 16; ++j) {
        const int c = 8 * j + 2 * q;
        if (n0 + c < N) {
            if (ok0) ssm__sm90_st2<BF>(y.p, r0 * y.rs + n0 + c, d[4 * j], d[4 * j + 1]);
            if (ok1) ssm__sm90_st2<BF>(y.p, (r0 + 8) * y.rs + n0 + c, d[4 * j + 2], d[4 * j + 3]);
        }
    }
}
#endif /* __CUDA_ARCH_FEAT_SM90_ALL */

template <int BF>
__global__ void __launch_bounds__(384, 1) ssm__pjw_kernel(const __grid_constant__ CUtensorMap ta,
                                                          const __grid_constant__ CUtensorMap tb, int M, int N, int K,
                                                          ssm__pj_segs sg, ssm__pj_vec bias, ssm__pj_vec alog, ssm__pj_mat y,
                                                          ssm__pj_mat pre, float eps) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    typedef typename ssm__sm90_ty<BF>::T T;
    constexpr int BM = 128, BN = 128, BK = SSM__PJW_BK, ST = SSM__PJW_ST;
    extern __shared__ uint4 ssm__pjw_smem[];
    __shared__ uint64_t bars[2 * ST + 2];
    __shared__ ssm__pjw_cols cols[2];
    unsigned char *base = ssm__sm90_ring(ssm__pjw_smem);
    T *sA = (T *)base;         /* ST x [128][64], 128-byte swizzle */
    T *sB = sA + ST * BM * BK; /* ST x [128][64] */
    uint64_t *full = bars, *empty = full + ST, *order = empty + ST;
    const int wg = threadIdx.x / 128, tid = threadIdx.x % 128;
    const int ntm = (M + BM - 1) / BM, ntn = (N + BN - 1) / BN, ntiles = ntm * ntn, nk = (K + BK - 1) / BK;
    if (threadIdx.x == 0) ssm__sm90_bar_init(&order[0], 4), ssm__sm90_bar_init(&order[1], 4);
    ssm__sm90_ring_init(full, empty, ST, 4);
#define SSM__PJW_TILE(t, tm, tn)                                                                         \
    do {                                                                                                 \
        const int per_ = SSM__PJW_GM * ntn, g_ = (t) / per_, f_ = g_ * SSM__PJW_GM, r_ = (t) - g_ * per_; \
        const int gs_ = ntm - f_ < SSM__PJW_GM ? ntm - f_ : SSM__PJW_GM;                                 \
        tm = f_ + r_ % gs_, tn = r_ / gs_;                                                               \
    } while (0)
    if (wg == 0) {
        ssm__sm90_producer_regs();
        if (tid == 0) {
            int s = 0, ph = 0;
            for (int t = blockIdx.x; t < ntiles; t += gridDim.x) {
                int tm, tn;
                SSM__PJW_TILE(t, tm, tn);
                for (int kb = 0; kb < nk; ++kb) {
                    ssm__sm90_wait(&empty[s], ph ^ 1);
                    ssm__sm90_expect_tx(&full[s], (BM + BN) * BK * (int)sizeof(T));
                    ssm__sm90_tma2(sA + s * BM * BK, &ta, &full[s], kb * BK, tm * BM);
                    ssm__sm90_tma2(sB + s * BN * BK, &tb, &full[s], kb * BK, tn * BN);
                    if (++s == ST) s = 0, ph ^= 1;
                }
            }
        }
    } else {
        ssm__sm90_consumer_regs();
        float d0[BN / 2], d1[BN / 2];
        const int warp = tid / 32, lane = tid % 32, c = wg - 1;
        ssm__pjw_cols &cc = cols[c];
        for (int i = c;; i += 2) {
            const int t = blockIdx.x + i * gridDim.x;
            if (t >= ntiles) break;
            int tm, tn;
            SSM__PJW_TILE(t, tm, tn);
#pragma unroll
            for (int r = 0; r < BN / 2; ++r) d0[r] = 0.f, d1[r] = 0.f;
            /* A parity wait is only sound one phase ahead: wait until the other warpgroup has seen
               every full barrier of tile i - 1, so the ring's barriers are at most one phase behind
               this tile's slots. */
            if (i >= 1) ssm__sm90_wait(&order[c], ((i - 2 + c) / 2) & 1);
            const long g = (long)i * nk;
            int s = (int)(g % ST), ph = (int)((g / ST) & 1), prev = -1;
            for (int kb = 0; kb < nk; ++kb) {
                ssm__sm90_wait(&full[s], ph);
#pragma unroll
                for (int r = 0; r < BN / 2; ++r) ssm__sm90_rf(d0[r]), ssm__sm90_rf(d1[r]);
                ssm__sm90_fence();
                const T *a = sA + s * BM * BK, *b = sB + s * BN * BK;
#pragma unroll
                for (int k = 0; k < BK / 16; ++k) {
                    ssm__sm90_mma<128, BF, 0, 0>::run(d0, ssm__sm90_desc(a + 16 * k), ssm__sm90_desc(b + 16 * k));
                    ssm__sm90_mma<128, BF, 0, 0>::run(d1, ssm__sm90_desc(a + 64 * BK + 16 * k), ssm__sm90_desc(b + 16 * k));
                }
                ssm__sm90_commit();
                ssm__sm90_wait_mma<1>();
#pragma unroll
                for (int r = 0; r < BN / 2; ++r) ssm__sm90_rf(d0[r]), ssm__sm90_rf(d1[r]);
                if (prev >= 0 && lane == 0) ssm__sm90_arrive(&empty[prev]);
                prev = s;
                if (++s == ST) s = 0, ph ^= 1;
            }
            if (lane == 0) ssm__sm90_arrive(&order[c ^ 1]); /* this tile's full barriers all seen */
            ssm__sm90_wait_mma<0>();
#pragma unroll
            for (int r = 0; r < BN / 2; ++r) ssm__sm90_rf(d0[r]), ssm__sm90_rf(d1[r]);
            if (prev >= 0 && lane == 0) ssm__sm90_arrive(&empty[prev]);
            /* the tile's columns (named barrier 1 + c over this warpgroup's 128 threads) */
            const int64_t n0 = (int64_t)tn * BN;
            asm volatile("bar.sync %0, 128;\n" ::"r"(wg) : "memory");
            {
                const int64_t col = n0 + tid;
                float b = 0.f, al = 0.f, p = 1.f;
                if (col < N) {
                    const int sj = ssm__pj_seg_of(sg, col);
                    p = sg.param[sj];
                    if (sg.bias[sj]) b = ssm__pj_ld<T>(bias.p, col * bias.s);
                    if (sg.act[sj] == SSM_PROJ_DECAY_GATE) al = ssm__pj_ld<T>(alog.p, (sg.g0[sj] + col - sg.c0[sj]) * alog.s);
                }
                cc.b[tid] = b, cc.al[tid] = al, cc.p[tid] = p;
                if (tid == 0) {
                    int ns = 0, nh = 0;
                    for (int sj = 0; sj < sg.n; ++sj) {
                        const int64_t lo = sg.c0[sj] > n0 ? sg.c0[sj] : n0;
                        const int64_t hi = sg.c0[sj + 1] < n0 + BN ? sg.c0[sj + 1] : n0 + BN;
                        if (lo >= hi) continue;
                        cc.sact[ns] = sg.act[sj], cc.slo[ns] = (int)(lo - n0), cc.shi[ns] = (int)(hi - n0), ++ns;
                        if (sg.l2[sj] > 0) { /* heads wholly inside the tile */
                            const int64_t hd = sg.l2[sj];
                            for (int64_t hs = sg.c0[sj] + (lo - sg.c0[sj]) / hd * hd; hs < hi; hs += hd)
                                if (hs >= n0 && hs + hd <= n0 + BN && nh < SSM__PJW_MAXH)
                                    cc.h0[nh] = (int)(hs - n0), cc.hd[nh] = (int)hd, ++nh;
                        }
                    }
                    cc.nsg = ns, cc.nh = nh;
                }
            }
            asm volatile("bar.sync %0, 128;\n" ::"r"(wg) : "memory");
            const int64_t r0 = (int64_t)tm * BM + warp * 16 + lane / 4;
            ssm__pjw_epi<BF>(d0, cc, M, N, r0, n0, lane % 4, y, pre, eps);
            ssm__pjw_epi<BF>(d1, cc, M, N, r0 + 64, n0, lane % 4, y, pre, eps);
        }
    }
#undef SSM__PJW_TILE
#endif
}

/* 1 when kernel 3 can run on the context's device: compute capability 9.0 and this binary's
   code for it is the sm_90a build (the stub that other targets compile has no static shared
   memory), and the driver has cuTensorMapEncodeTiled. Decided once per context. */
static int ssm__pjw_ok(ssm__cu_state *st) {
    if (!st->pjw) {
        st->pjw = ssm__sm90_device(st) && ssm__sm90_kernel_ok(st, (const void *)ssm__pjw_kernel<1>, SSM__PJW_SMEM) &&
                          ssm__sm90_kernel_ok(st, (const void *)ssm__pjw_kernel<0>, SSM__PJW_SMEM)
                      ? 1
                      : 2;
        cudaGetLastError();
    }
    return st->pjw == 1;
}
/* [rows, K] with row stride ld elements; boxes of 128 rows x 64 elements, 128-byte swizzle,
   zero fill past the edges. 0 on success. */
static int ssm__pjw_map(CUtensorMap *m, const void *p, int bf, int64_t rows, int64_t K, int64_t ld) {
    const cuuint64_t dims[2] = {(cuuint64_t)K, (cuuint64_t)rows}, pitch[1] = {(cuuint64_t)ld * 2};
    const cuuint32_t box[2] = {SSM__PJW_BK, 128};
    return !ssm__sm90_map(m, bf, p, 2, dims, pitch, box, CU_TENSOR_MAP_L2_PROMOTION_L2_256B);
}
/* Launches kernel 3; 0 when it cannot (tensor map refused): the caller takes kernel 1. */
static int ssm__pjw_launch(ssm__cu_state *st, const ssm_proj_plan *p, const ssm_tensor *x, const ssm_tensor *W,
                           const ssm__pj_segs &sg, ssm__pj_vec vb, ssm__pj_vec va, ssm__pj_mat my, ssm__pj_mat mp, float eps) {
    CUtensorMap ta, tb;
    const int bf = ssm__cu_dt(p->dtype) == 2;
    const int64_t tiles = ((p->M + 127) / 128) * ((p->N + 127) / 128);
    const int64_t want = (tiles + 1) / 2, grid = want < st->sms ? want : st->sms;
    if (ssm__pjw_map(&ta, x->data, bf, p->M, p->K, x->strides[0]) || ssm__pjw_map(&tb, W->data, bf, p->N, p->K, W->strides[0]))
        return 0;
    if (bf)
        ssm__pjw_kernel<1><<<(unsigned)grid, 384, SSM__PJW_SMEM, st->stream>>>(ta, tb, (int)p->M, (int)p->N, (int)p->K, sg, vb,
                                                                             va, my, mp, eps);
    else
        ssm__pjw_kernel<0><<<(unsigned)grid, 384, SSM__PJW_SMEM, st->stream>>>(ta, tb, (int)p->M, (int)p->N, (int)p->K, sg, vb,
                                                                             va, my, mp, eps);
    return 1;
}
#else
static int ssm__pjw_ok(ssm__cu_state *) { return 0; }
static int ssm__pjw_launch(ssm__cu_state *, const ssm_proj_plan *, const ssm_tensor *, const ssm_tensor *, const ssm__pj_segs &,
                           ssm__pj_vec, ssm__pj_vec, ssm__pj_mat, ssm__pj_mat, float) {
    return 0;
}
#endif

/* Launches kernel template K on grid G (256 threads a block) on stream S for element type dt
   (0 f32, 1 f16, 2 bf16), the projection and output chains' dtype switch in one place; the
   16-bit form for kernels without an f32 instance. */
#define SSM__PJ_BY_DT16(dt, K, G, S, ...)                                                         \
    do {                                                                                          \
        if ((dt) == 1) K<__half><<<(G), 256, 0, (S)>>>(__VA_ARGS__);                              \
        else K<__nv_bfloat16><<<(G), 256, 0, (S)>>>(__VA_ARGS__);                                 \
    } while (0)
#define SSM__PJ_BY_DT(dt, K, G, S, ...)                                                           \
    do {                                                                                          \
        if ((dt) == 0) K<float><<<(G), 256, 0, (S)>>>(__VA_ARGS__);                               \
        else SSM__PJ_BY_DT16(dt, K, G, S, __VA_ARGS__);                                           \
    } while (0)

/* The one-pass epilogue over columns [ca, cb) of y. */
static ssm_result ssm__pj_epi(ssm_ctx *ctx, const ssm_proj_plan *p, int64_t ca, int64_t cb, const ssm__pj_segs &sg,
                              ssm__pj_vec vb, ssm__pj_vec va, ssm__pj_mat my, ssm__pj_mat mp) {
    cudaStream_t st = ssm__cu_st(ctx)->stream;
    const int64_t blocks = (p->M + 7) / 8;
    const unsigned nb = (unsigned)(blocks < 1048576 ? blocks : 1048576);
    const float eps = (float)p->l2_eps;
    SSM__PJ_BY_DT(ssm__cu_dt(p->dtype), ssm__pj_epi_kernel, dim3(nb, (unsigned)p->nseg), st, p->M, ca, cb, sg, vb, va, my, mp,
                  eps);
    SSM__CU_LAUNCHED(ctx, "ssm__pj_epi_kernel");
    return SSM_OK;
}

/* FUSED: one cuBLAS GEMM over the whole width, then the whole epilogue in one pass over y
   (measured faster on an H200 than the tile-fused mma.sync kernel, which reaches ~30% of
   cuBLAS's wgmma rate: bench/results/cuda_proj_run1.log); ssm_cuda_config.proj_kernel = 2
   forces the tile-fused kernel. UNFUSED: a GEMM and an epilogue pass per segment. */
static ssm_result ssm__cu_proj_forward(ssm_ctx *ctx, const ssm_proj_plan *p, const ssm_tensor *x, const ssm_tensor *W,
                                       const ssm_tensor *bias, const ssm_tensor *A_log, ssm_tensor *y,
                                       ssm_tensor *pre) {
    ssm__cu_state *st = ssm__cu_st(ctx);
    ssm__cu_device_guard guard(st->device);
    const ssm__pj_segs sg = ssm__pj_segs_of(p);
    const int dt = ssm__cu_dt(p->dtype);
    const size_t es = (size_t)p->dtype.bits / 8u;
    const ssm__pj_mat my = ssm__pj_mat_of(y), mp = ssm__pj_mat_of(pre);
    const ssm__pj_vec vb = ssm__pj_vec_of(bias), va = ssm__pj_vec_of(A_log);
    const float eps = (float)p->l2_eps;
    int s;
    if (p->M == 0) return SSM_OK;
    if ((st->knobs.proj_kernel == 0 || st->knobs.proj_kernel == 3) && ssm__pjw_fits(p, x, W, y, pre, st->knobs.proj_kernel == 3) && ssm__pjw_ok(st) &&
        ssm__pjw_launch(st, p, x, W, sg, vb, va, my, mp, eps)) {
        SSM__CU_LAUNCHED(ctx, "ssm__pjw_kernel");
        for (s = 0; s < p->nseg; ++s) { /* the heads a 128-column tile boundary cuts */
            const int64_t c0 = p->c0[s], w = p->seg[s].width, hd = p->seg[s].l2_head;
            if (hd <= 0 || (c0 % SSM__PJ_BN == 0 && SSM__PJ_BN % hd == 0)) continue;
            ssm__pj_l2_kernel<<<ssm__cu_blocks(p->M * (w / hd) * 32), 256, 0, st->stream>>>(p->M, c0, w / hd, hd, 1, dt,
                                                                                            my, eps);
            SSM__CU_LAUNCHED(ctx, "ssm__pj_l2_kernel");
        }
        return SSM_OK;
    }
    if (st->knobs.proj_kernel == 2 && ssm__pj_fusable(p, x, W)) {
        dim3 grid((unsigned)((p->N + SSM__PJ_BN - 1) / SSM__PJ_BN), (unsigned)((p->M + SSM__PJ_BM - 1) / SSM__PJ_BM));
        if (dt == 2) {
            cudaFuncSetAttribute(ssm__pj_fused_kernel<1>, cudaFuncAttributeMaxDynamicSharedMemorySize, SSM__PJ_SMEM);
            ssm__pj_fused_kernel<1><<<grid, 256, SSM__PJ_SMEM, st->stream>>>(
                p->M, p->N, p->K, (const unsigned short *)x->data, x->strides[0], (const unsigned short *)W->data,
                W->strides[0], sg, vb, va, my, mp, eps);
        } else {
            cudaFuncSetAttribute(ssm__pj_fused_kernel<0>, cudaFuncAttributeMaxDynamicSharedMemorySize, SSM__PJ_SMEM);
            ssm__pj_fused_kernel<0><<<grid, 256, SSM__PJ_SMEM, st->stream>>>(
                p->M, p->N, p->K, (const unsigned short *)x->data, x->strides[0], (const unsigned short *)W->data,
                W->strides[0], sg, vb, va, my, mp, eps);
        }
        SSM__CU_LAUNCHED(ctx, "ssm__pj_fused_kernel");
        for (s = 0; s < p->nseg; ++s) { /* the heads a 128-column tile boundary cuts */
            const int64_t c0 = p->c0[s], w = p->seg[s].width, hd = p->seg[s].l2_head;
            if (hd <= 0 || (c0 % SSM__PJ_BN == 0 && SSM__PJ_BN % hd == 0)) continue;
            ssm__pj_l2_kernel<<<ssm__cu_blocks(p->M * (w / hd) * 32), 256, 0, st->stream>>>(p->M, c0, w / hd, hd, 1, dt,
                                                                                            my, eps);
            SSM__CU_LAUNCHED(ctx, "ssm__pj_l2_kernel");
        }
        return SSM_OK;
    }
    for (s = 0; s < (p->path == SSM_PROJ_UNFUSED ? p->nseg : 1); ++s) {
        const int64_t c0 = p->path == SSM_PROJ_UNFUSED ? p->c0[s] : 0;
        const int64_t cw = p->path == SSM_PROJ_UNFUSED ? p->seg[s].width : p->N;
        SSM__TRY(ssm__cu_gemm(ctx, p->dtype, 1, 1, p->M, cw, p->K, 1.0, ssm__pj_mb(x->data, x->strides[0], x->strides[1]),
                              ssm__pj_mb((char *)W->data + c0 * W->strides[0] * (int64_t)es, W->strides[1], W->strides[0]),
                              0.0, ssm__pj_mb((char *)y->data + c0 * y->strides[1] * (int64_t)es, y->strides[0],
                                              y->strides[1])));
        SSM__TRY(ssm__pj_epi(ctx, p, c0, c0 + cw, sg, vb, va, my, mp));
    }
    return SSM_OK;
}

static ssm_result ssm__cu_proj_backward(ssm_ctx *ctx, const ssm_proj_plan *p, const ssm_tensor *x, const ssm_tensor *W,
                                        const ssm_tensor *bias, const ssm_tensor *A_log, const ssm_tensor *pre,
                                        const ssm_tensor *dy, ssm_tensor *dx, ssm_tensor *dW, ssm_tensor *dbias,
                                        ssm_tensor *dA_log) {
    ssm__cu_state *st = ssm__cu_st(ctx);
    ssm__cu_device_guard guard(st->device);
    const ssm__pj_segs sg = ssm__pj_segs_of(p);
    const int dt = ssm__cu_dt(p->dtype);
    const size_t es = (size_t)p->dtype.bits / 8u;
    char *ws = NULL, *dP;
    float *ga, *part;
    int s;
    if (p->M == 0) { /* no rows: zero gradients of the weights */
        SSM__TRY(ssm__cu_copy(ctx, p->dtype, 1, 1, p->N, p->K, ssm__pj_mb(NULL, 0, 0),
                              ssm__pj_mb(dW->data, dW->strides[0], dW->strides[1]), 0));
        if (dbias) SSM__TRY(ssm__cu_copy(ctx, p->dtype, 1, 1, p->N, 1, ssm__pj_mb(NULL, 0, 0), ssm__pj_mb(dbias->data, dbias->strides[0], 1), 0));
        if (dA_log && p->G)
            SSM__TRY(ssm__cu_copy(ctx, p->dtype, 1, 1, p->G, 1, ssm__pj_mb(NULL, 0, 0), ssm__pj_mb(dA_log->data, dA_log->strides[0], 1), 0));
        return SSM_OK;
    }
    SSM__TRY(ssm_ctx_workspace(ctx, p->workspace_bytes, (void **)&ws));
    dP = ws;
    ga = (float *)(ws + ssm__pj_al((size_t)p->M * (size_t)p->N * es));
    part = (float *)((char *)ga + ssm__pj_al((size_t)p->M * (size_t)p->G * 4u));
    if (!pre) /* SAVE_NONE: z = x W^T into the dPre buffer */
        SSM__TRY(ssm__cu_gemm(ctx, p->dtype, 1, 1, p->M, p->N, p->K, 1.0, ssm__pj_mb(x->data, x->strides[0], x->strides[1]),
                              ssm__pj_mb(W->data, W->strides[1], W->strides[0]), 0.0, ssm__pj_mb(dP, p->N, 1)));
    {
        const int64_t warps = p->M, blocks = (warps + 7) / 8;
        const unsigned nb = (unsigned)(blocks < 1048576 ? blocks : 1048576);
        const ssm__pj_vec vb = ssm__pj_vec_of(bias), va = ssm__pj_vec_of(A_log);
        const ssm__pj_mat mp = ssm__pj_mat_of(pre), mdy = ssm__pj_mat_of(dy);
        const float eps = (float)p->l2_eps;
        const dim3 grid(nb, (unsigned)p->nseg);
        if (ssm__pj_dact8_ok(p, pre, dy))
            SSM__PJ_BY_DT16(dt, ssm__pj_dact8_kernel, grid, st->stream, p->M, p->N, p->G, sg, vb, va, mp, mdy, dP, ga, eps);
        else
            SSM__PJ_BY_DT(dt, ssm__pj_dact_kernel, grid, st->stream, p->M, p->N, p->G, sg, vb, va, mp, mdy, dP, ga, eps);
        SSM__CU_LAUNCHED(ctx, "ssm__pj_dact_kernel");
    }
    for (s = 0; s < (p->path == SSM_PROJ_FUSED ? 1 : p->nseg); ++s) { /* dX and dW: once, or per segment */
        const int64_t c0 = p->path == SSM_PROJ_FUSED ? 0 : p->c0[s], w = p->path == SSM_PROJ_FUSED ? p->N : p->seg[s].width;
        SSM__TRY(ssm__cu_gemm(ctx, p->dtype, 1, 1, p->M, p->K, w, 1.0, ssm__pj_mb(dP + c0 * es, p->N, 1),
                              ssm__pj_mb((char *)W->data + c0 * W->strides[0] * es, W->strides[0], W->strides[1]),
                              s ? 1.0 : 0.0, ssm__pj_mb(dx->data, dx->strides[0], dx->strides[1])));
        SSM__TRY(ssm__cu_gemm(ctx, p->dtype, 1, 1, w, p->K, p->M, 1.0, ssm__pj_mb(dP + c0 * es, 1, p->N),
                              ssm__pj_mb(x->data, x->strides[0], x->strides[1]), 0.0,
                              ssm__pj_mb((char *)dW->data + c0 * dW->strides[0] * es, dW->strides[0], dW->strides[1])));
    }
    if (dbias) /* the biased segments' columns summed, the others zero */
        SSM__TRY(ssm__pj_colsums(ctx, dP, dt, p->M, p->N, p->N, &sg, part, dbias->data, dt, dbias->strides[0]));
    if (dA_log && p->G)
        SSM__TRY(ssm__pj_colsums(ctx, ga, 0, p->M, p->G, p->G, NULL,
                                 part + ((p->M + ssm__pj_chunk(p->M) - 1) / ssm__pj_chunk(p->M)) * p->N, dA_log->data, dt,
                                 dA_log->strides[0]));
    return SSM_OK;
}

/* >>outchain ---- output chain ------------------------------------------------------------- */
/* ---- output chain: RMSNorm(o) * weight * gate(g), then o_proj ------------------------------

   Forward: one pass (per head the mean square, rstd, z = o rstd w gate(g)) writes z [M, D]
   into scratch (and rstd when asked), then y = z W_o^T on the gemm slot (cuBLAS). Backward: z
   again (from rstd when given), dW_o = dy^T z and dz = dy W_o (cuBLAS), then one pass for do
   and dg, with dweight's terms summed in a fixed order. Both passes run in 16-byte vectors
   where the rows allow (16-bit, aligned, heads a power of two <= 256), else a warp per row
   with scalar loads. The norm and gate are not yet applied inside the GEMM's operand load
   (z makes one round trip through memory). */

/* gate(g) (sigmoid, or SiLU g sigmoid(g)) and its derivative, from s = sigmoid(g) computed by
   the caller (IEEE in the scalar passes, MUFU in the vector ones) */
__device__ __forceinline__ float ssm__oc_gate_of(int sig, float g, float s, float *dgate) {
    return ssm__pj_sact(sig, g, s, dgate);
}
__device__ __forceinline__ float ssm__oc_gatef(int sig, float g, float *dgate) {
    return ssm__oc_gate_of(sig, g, ssm__pj_sigmoid(g), dgate);
}

/* The rstd of head h of row r, a warp's sweep over o (or rin's saved value when given). */
template <typename T>
__device__ __forceinline__ float ssm__oc_rstd(ssm__pj_mat o, ssm__pj_mat rin, int64_t r, int64_t h, int64_t hd, float eps,
                                              int lane) {
    float ss = 0.f;
    if (rin.p) return ssm__pj_ld<T>(rin.p, r * rin.rs + h * rin.cs);
    for (int64_t c = h * hd + lane; c < (h + 1) * hd; c += 32) {
        const float v = ssm__pj_ld<T>(o.p, r * o.rs + c * o.cs);
        ss += v * v;
    }
    return 1.f / sqrtf(ssm__pj_wsum(ss) / (float)hd + eps);
}

/* A warp per row: per head the rstd (from rin, or from o), z into z (compact [M, D]); heads
   of <= 256 columns keep o in registers between the two sweeps. */
template <typename T>
__global__ void __launch_bounds__(256) ssm__oc_norm_kernel(int64_t M, int64_t D, int64_t hd, int sig, float eps,
                                                           ssm__pj_mat o, ssm__pj_mat g, ssm__pj_vec w, ssm__pj_mat rin,
                                                           ssm__pj_mat rout, void *z) {
    const int lane = threadIdx.x & 31;
    for (int64_t r = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5; r < M; r += ((int64_t)gridDim.x * blockDim.x) >> 5)
        for (int64_t h = 0; h * hd < D; ++h) {
            const int64_t h0 = h * hd;
            float rs, dgate;
            if (hd <= 32 * SSM__PJ_HREG) {
                float ss = 0.f, ov[SSM__PJ_HREG];
#pragma unroll
                for (int t = 0; t < SSM__PJ_HREG; ++t) {
                    const int64_t c = h0 + lane + 32 * t;
                    ov[t] = 32 * t < hd && c < h0 + hd ? ssm__pj_ld<T>(o.p, r * o.rs + c * o.cs) : 0.f;
                    ss += ov[t] * ov[t];
                }
                ss = ssm__pj_wsum(ss);
                rs = rin.p ? ssm__pj_ld<T>(rin.p, r * rin.rs + h * rin.cs) : 1.f / sqrtf(ss / (float)hd + eps);
#pragma unroll
                for (int t = 0; t < SSM__PJ_HREG; ++t) {
                    const int64_t c = h0 + lane + 32 * t;
                    if (32 * t < hd && c < h0 + hd) {
                        float v = ov[t] * rs * ssm__oc_gatef(sig, ssm__pj_ld<T>(g.p, r * g.rs + c * g.cs), &dgate);
                        if (w.p) v *= ssm__pj_ld<T>(w.p, (c - h0) * w.s);
                        ssm__pj_st<T>(z, r * D + c, v);
                    }
                }
            } else {
                rs = ssm__oc_rstd<T>(o, rin, r, h, hd, eps, lane);
                for (int64_t c = h0 + lane; c < h0 + hd; c += 32) {
                    float v = ssm__pj_ld<T>(o.p, r * o.rs + c * o.cs) * rs *
                              ssm__oc_gatef(sig, ssm__pj_ld<T>(g.p, r * g.rs + c * g.cs), &dgate);
                    if (w.p) v *= ssm__pj_ld<T>(w.p, (c - h0) * w.s);
                    ssm__pj_st<T>(z, r * D + c, v);
                }
            }
            if (!rin.p && rout.p && lane == 0) ssm__pj_st<T>(rout.p, r * rout.rs + h * rout.cs, rs);
        }
}

/* The backward's per-element math (ssm__oc_bwd_kernel, ssm__oc_bwd8_kernel), from d = dz, the
   normalized n = o rstd, gt = gate(g) and its derivative dgt, the weight wv: the element's
   term of the head's dot (summed, then / hd); then with rs = rstd and that dot, dweight's term,
   dg and do. */
__device__ __forceinline__ float ssm__oc_dot_term(float d, float wv, float gt, float n) { return d * wv * gt * n; }
__device__ __forceinline__ void ssm__oc_grads(float d, float n, float gt, float dgt, float wv, float rs, float dot, float *dw,
                                              float *dg, float *dO) {
    *dw = d * n * gt;
    *dg = d * n * wv * dgt;
    *dO = rs * (d * wv * gt - n * dot);
}
/* ... and the scalar pass's loads of n, gt (dgt) and wv at row r, column c of head h0 */
template <typename T>
__device__ __forceinline__ void ssm__oc_ld1(ssm__pj_mat o, ssm__pj_mat g, ssm__pj_vec w, int64_t r, int64_t c, int64_t h0,
                                            float rs, int sig, float *n, float *gt, float *dgt, float *wv) {
    *n = ssm__pj_ld<T>(o.p, r * o.rs + c * o.cs) * rs;
    *gt = ssm__oc_gatef(sig, ssm__pj_ld<T>(g.p, r * g.rs + c * g.cs), dgt);
    *wv = w.p ? ssm__pj_ld<T>(w.p, (c - h0) * w.s) : 1.f;
}

/* From dz (compact [M, D]): do, dg, and dweight's per-(row, head) terms wpart [M * H, hd]. */
template <typename T>
__global__ void __launch_bounds__(256) ssm__oc_bwd_kernel(int64_t M, int64_t D, int64_t hd, int sig, float eps, ssm__pj_mat o,
                                   ssm__pj_mat g, ssm__pj_vec w, ssm__pj_mat rin, const void *dz, ssm__pj_mat dO,
                                   ssm__pj_mat dG, float *wpart) {
    const int lane = threadIdx.x & 31;
    for (int64_t r = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5; r < M; r += ((int64_t)gridDim.x * blockDim.x) >> 5)
        for (int64_t h = 0; h * hd < D; ++h) {
            const int64_t h0 = h * hd;
            const float rs = ssm__oc_rstd<T>(o, rin, r, h, hd, eps, lane);
            float dot = 0.f, n, gt, dgate, wv, dw, dg, dov;
            for (int64_t c = h0 + lane; c < h0 + hd; c += 32) {
                ssm__oc_ld1<T>(o, g, w, r, c, h0, rs, sig, &n, &gt, &dgate, &wv);
                dot += ssm__oc_dot_term(ssm__pj_ld<T>(dz, r * D + c), wv, gt, n);
            }
            dot = ssm__pj_wsum(dot) / (float)hd;
            for (int64_t c = h0 + lane; c < h0 + hd; c += 32) {
                ssm__oc_ld1<T>(o, g, w, r, c, h0, rs, sig, &n, &gt, &dgate, &wv);
                ssm__oc_grads(ssm__pj_ld<T>(dz, r * D + c), n, gt, dgate, wv, rs, dot, &dw, &dg, &dov);
                if (wpart) wpart[(r * (D / hd) + h) * hd + c - h0] = dw;
                ssm__pj_st<T>(dG.p, r * dG.rs + c * dG.cs, dg);
                ssm__pj_st<T>(dO.p, r * dO.rs + c * dO.cs, dov);
            }
        }
}

/* The two passes in 16-byte vectors (16-bit data, ssm__oc_vec_ok): a warp per (row, step of 256
   columns), a lane 8 adjacent columns, a head hd / 8 adjacent lanes (hd a power of two from 8
   to 256: a shuffle reduction inside the lane group); gates through ssm__pj_fsig. The scalar
   passes (2-byte loads, a head at a time, IEEE division) left the forward at 2.4x the GEMM
   alone: H200, M 32768, D 2048 bf16, 0.87 ms against 0.36. */
template <typename T>
__device__ __forceinline__ void ssm__oc_row8(int64_t r, int64_t c, int on, int gl, int64_t hd, int sig, float eps, ssm__pj_mat o,
                                             ssm__pj_mat g, const void *w, ssm__pj_mat rin, float *n, float *gt, float *dgt,
                                             float *wv, float *rs) {
    float ov[8], gv[8], ss = 0.f;
    if (on) {
        ssm__pj_ld8<T>(o.p, r * o.rs + c, ov), ssm__pj_ld8<T>(g.p, r * g.rs + c, gv);
        if (w) ssm__pj_ld8<T>(w, c % hd, wv);
    }
#pragma unroll
    for (int e = 0; e < 8; ++e) {
        if (!on) ov[e] = gv[e] = 0.f;
        if (!on || !w) wv[e] = 1.f;
        ss += ov[e] * ov[e];
        gt[e] = ssm__oc_gate_of(sig, gv[e], ssm__pj_fsig(gv[e]), &dgt[e]);
    }
    if (rin.p) *rs = on ? ssm__pj_ld<T>(rin.p, r * rin.rs + (c / hd) * rin.cs) : 0.f;
    else { /* the head's mean square: a shuffle reduction over its gl lanes (uniform branch) */
        for (int k = 1; k < gl; k <<= 1) ss += __shfl_xor_sync(0xffffffffu, ss, k);
        *rs = rsqrtf(ss / (float)hd + eps);
    }
#pragma unroll
    for (int e = 0; e < 8; ++e) n[e] = ov[e] * *rs;
}
template <typename T> __device__ __forceinline__ void ssm__oc_st8(void *p, int64_t i, const float *v) {
    uint4 u;
    T *h = (T *)&u;
#pragma unroll
    for (int e = 0; e < 8; ++e) ssm__pj_st<T>(h, e, v[e]);
    *(uint4 *)((T *)p + i) = u;
}
template <typename T>
__global__ void __launch_bounds__(256) ssm__oc_norm8_kernel(int64_t M, int64_t D, int64_t hd, int sig, float eps, ssm__pj_mat o,
                                                            ssm__pj_mat g, ssm__pj_vec w, ssm__pj_mat rin, ssm__pj_mat rout,
                                                            void *z) {
    const int lane = threadIdx.x & 31, gl = (int)(hd / 8);
    const int64_t c = (int64_t)blockIdx.y * 256 + 8 * lane;
    const int on = c < D; /* whole heads on or off: steps start on heads */
    for (int64_t r = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5; r < M; r += ((int64_t)gridDim.x * blockDim.x) >> 5) {
        float n[8], gt[8], dgt[8], wv[8], rs, v[8];
        ssm__oc_row8<T>(r, c, on, gl, hd, sig, eps, o, g, w.p, rin, n, gt, dgt, wv, &rs);
        if (!on) continue;
#pragma unroll
        for (int e = 0; e < 8; ++e) v[e] = n[e] * gt[e] * wv[e];
        ssm__oc_st8<T>(z, r * D + c, v);
        if (!rin.p && rout.p && lane % gl == 0) ssm__pj_st<T>(rout.p, r * rout.rs + (c / hd) * rout.cs, rs);
    }
}
/* The backward pass in vectors; dweight's terms summed over the block's rows (a fixed set: the
   grid depends on M only) into wpart [gridDim.x, D], in a fixed order. */
template <typename T>
__global__ void __launch_bounds__(256) ssm__oc_bwd8_kernel(int64_t M, int64_t D, int64_t hd, int sig, float eps, ssm__pj_mat o,
                                                           ssm__pj_mat g, ssm__pj_vec w, ssm__pj_mat rin, const void *dz,
                                                           ssm__pj_mat dO, ssm__pj_mat dG, float *wpart) {
    __shared__ float red[8][256];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, gl = (int)(hd / 8);
    const int64_t c = (int64_t)blockIdx.y * 256 + 8 * lane;
    const int on = c < D;
    float wacc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    for (int64_t r = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5; r < M; r += ((int64_t)gridDim.x * blockDim.x) >> 5) {
        float n[8], gt[8], dgt[8], wv[8], rs, d[8], dot = 0.f;
        ssm__oc_row8<T>(r, c, on, gl, hd, sig, eps, o, g, w.p, rin, n, gt, dgt, wv, &rs);
        if (on) ssm__pj_ld8<T>(dz, r * D + c, d);
#pragma unroll
        for (int e = 0; e < 8; ++e) {
            if (!on) d[e] = 0.f;
            dot += ssm__oc_dot_term(d[e], wv[e], gt[e], n[e]);
        }
        for (int k = 1; k < gl; k <<= 1) dot += __shfl_xor_sync(0xffffffffu, dot, k);
        dot /= (float)hd;
        if (!on) continue;
        float vo[8], vg[8];
#pragma unroll
        for (int e = 0; e < 8; ++e) {
            float dw;
            ssm__oc_grads(d[e], n[e], gt[e], dgt[e], wv[e], rs, dot, &dw, &vg[e], &vo[e]);
            wacc[e] += dw;
        }
        ssm__oc_st8<T>(dG.p, r * dG.rs + c, vg), ssm__oc_st8<T>(dO.p, r * dO.rs + c, vo);
    }
    if (!wpart) return;
#pragma unroll
    for (int e = 0; e < 8; ++e) red[warp][8 * lane + e] = wacc[e];
    __syncthreads();
    if (c - 8 * lane + threadIdx.x < D) { /* thread t: column t of the step, warps summed in order */
        float t = 0.f;
        for (int k = 0; k < 8; ++k) t += red[k][threadIdx.x];
        wpart[blockIdx.x * D + (int64_t)blockIdx.y * 256 + threadIdx.x] = t;
    }
}
/* ssm__oc_*8_kernel's conditions: 16-bit; o, g (and do, dg) column-contiguous with rows of whole
   16-byte vectors on 16-byte aligned bases, the weight contiguous and aligned; hd a power of
   two from 8 to 256 (D = H hd). */
static int ssm__oc_vec_mat(const ssm_tensor *t) {
    return !t || (t->strides[1] == 1 && t->strides[0] % 8 == 0 && ((uintptr_t)t->data & 15) == 0);
}
static int ssm__oc_vec_ok(const ssm_outchain_plan *p, const ssm_tensor *o, const ssm_tensor *g, const ssm_tensor *weight,
                          const ssm_tensor *do_, const ssm_tensor *dg) {
    return p->dtype.bits == 16 && p->hd >= 8 && p->hd <= 256 && (p->hd & (p->hd - 1)) == 0 && ssm__oc_vec_mat(o) &&
           ssm__oc_vec_mat(g) && ssm__oc_vec_mat(do_) && ssm__oc_vec_mat(dg) &&
           (!weight || (weight->strides[0] == 1 && ((uintptr_t)weight->data & 15) == 0));
}
/* grid of the vector passes: about M / rows_per_block blocks of 8 warps along x (at most 65535;
   a block's rows are grid-strided, so which rows it sums depends on M only: the dweight
   partials stay deterministic), a step of 256 columns per blockIdx.y */
static dim3 ssm__oc_grid8(const ssm_outchain_plan *p, int64_t rows_per_block) {
    const int64_t b = (p->M + rows_per_block - 1) / rows_per_block;
    return dim3((unsigned)(b < 1 ? 1 : b > 65535 ? 65535 : b), (unsigned)((p->D + 255) / 256));
}
#define SSM__OC_BWD8_ROWS 64 /* rows a block of the backward pass: its dweight partials are [M / 64, D] */

static size_t ssm__oc_cu_ws(const ssm_outchain_plan *p) {
    /* saturating, as ssm__pj_ws */
    const size_t es = (size_t)p->dtype.bits / 8u, md = ssm__cu_szmul((size_t)p->M, p->D), mde = ssm__cu_szmul(md, (int64_t)es);
    size_t b = ssm__pj_al(mde);
    if (p->M == 0) return 0;
    if (p->op == SSM_OP_OUTCHAIN_FORWARD) return b;
    b = ssm__cu_szadd(b, ssm__pj_al(mde));
    if (p->want_dweight) {
        const size_t rows = ssm__cu_szmul((size_t)p->M, p->H);
        const int64_t ch = rows > ((size_t)1 << 62) ? 1 : ssm__pj_chunk((int64_t)rows);
        b = ssm__cu_szadd(b, ssm__cu_szadd(ssm__pj_al(ssm__cu_szmul(md, 4)),
                                           ssm__pj_al(ssm__cu_szmul(ssm__cu_szmul(4u, p->hd), (int64_t)(rows / (size_t)ch + 1)))));
    }
    return b;
}

static unsigned ssm__oc_blocks(int64_t rows) { /* a warp per row, 8 a block */
    const int64_t b = (rows + 7) / 8;
    return (unsigned)(b < 1 ? 1 : b > 1048576 ? 1048576 : b);
}

/* z = RMSNorm(o) * weight * gate(g) into compact [M, D] (rstd from rin, or written to rout) */
static void ssm__oc_norm(ssm__cu_state *st, const ssm_outchain_plan *p, const ssm_tensor *o, const ssm_tensor *g,
                         const ssm_tensor *weight, const ssm_tensor *rin, const ssm_tensor *rout, void *z) {
    const int dt = ssm__cu_dt(p->dtype), sig = p->gate == SSM_OUTCHAIN_SIGMOID;
    const ssm__pj_mat mo = ssm__pj_mat_of(o), mg = ssm__pj_mat_of(g), mi = ssm__pj_mat_of(rin), mr = ssm__pj_mat_of(rout);
    const ssm__pj_vec w = ssm__pj_vec_of(weight);
    if (ssm__oc_vec_ok(p, o, g, weight, NULL, NULL)) {
        SSM__PJ_BY_DT16(dt, ssm__oc_norm8_kernel, ssm__oc_grid8(p, 8), st->stream, p->M, p->D, p->hd, sig, (float)p->eps, mo, mg,
                        w, mi, mr, z);
    } else
        SSM__PJ_BY_DT(dt, ssm__oc_norm_kernel, ssm__oc_blocks(p->M), st->stream, p->M, p->D, p->hd, sig, (float)p->eps, mo, mg, w,
                      mi, mr, z);
}

static ssm_result ssm__cu_outchain_forward(ssm_ctx *ctx, const ssm_outchain_plan *p, const ssm_tensor *o,
                                           const ssm_tensor *g, const ssm_tensor *weight, const ssm_tensor *W_o,
                                           ssm_tensor *y, ssm_tensor *rstd) {
    ssm__cu_state *st = ssm__cu_st(ctx);
    ssm__cu_device_guard guard(st->device);
    const int dt = ssm__cu_dt(p->dtype);
    void *z = NULL;
    if (p->M == 0) return SSM_OK;
    SSM__TRY(ssm_ctx_workspace(ctx, p->workspace_bytes, &z));
    ssm__oc_norm(st, p, o, g, weight, NULL, rstd, z);
    SSM__CU_LAUNCHED(ctx, "ssm__oc_norm_kernel");
    return ssm__cu_gemm(ctx, p->dtype, 1, 1, p->M, p->dout, p->D, 1.0, ssm__pj_mb(z, p->D, 1),
                        ssm__pj_mb(W_o->data, W_o->strides[1], W_o->strides[0]), 0.0,
                        ssm__pj_mb(y->data, y->strides[0], y->strides[1]));
}

static ssm_result ssm__cu_outchain_backward(ssm_ctx *ctx, const ssm_outchain_plan *p, const ssm_tensor *o,
                                            const ssm_tensor *g, const ssm_tensor *weight, const ssm_tensor *W_o,
                                            const ssm_tensor *rstd, const ssm_tensor *dy, ssm_tensor *do_,
                                            ssm_tensor *dg, ssm_tensor *dweight, ssm_tensor *dW_o) {
    ssm__cu_state *st = ssm__cu_st(ctx);
    ssm__cu_device_guard guard(st->device);
    const int dt = ssm__cu_dt(p->dtype), sig = p->gate == SSM_OUTCHAIN_SIGMOID;
    const size_t es = (size_t)p->dtype.bits / 8u, md = (size_t)p->M * (size_t)p->D;
    char *ws = NULL, *z, *dz;
    float *wpart = NULL, *part = NULL;
    if (p->M == 0) {
        SSM__TRY(ssm__cu_copy(ctx, p->dtype, 1, 1, p->dout, p->D, ssm__pj_mb(NULL, 0, 0),
                              ssm__pj_mb(dW_o->data, dW_o->strides[0], dW_o->strides[1]), 0));
        if (dweight)
            SSM__TRY(ssm__cu_copy(ctx, p->dtype, 1, 1, p->hd, 1, ssm__pj_mb(NULL, 0, 0), ssm__pj_mb(dweight->data, dweight->strides[0], 1), 0));
        return SSM_OK;
    }
    SSM__TRY(ssm_ctx_workspace(ctx, p->workspace_bytes, (void **)&ws));
    z = ws, dz = ws + ssm__pj_al(md * es);
    if (dweight) wpart = (float *)(dz + ssm__pj_al(md * es)), part = (float *)((char *)wpart + ssm__pj_al(md * 4u));
    ssm__oc_norm(st, p, o, g, weight, rstd, NULL, z);
    SSM__CU_LAUNCHED(ctx, "ssm__oc_norm_kernel");
    SSM__TRY(ssm__cu_gemm(ctx, p->dtype, 1, 1, p->dout, p->D, p->M, 1.0, ssm__pj_mb(dy->data, dy->strides[1], dy->strides[0]),
                          ssm__pj_mb(z, p->D, 1), 0.0, ssm__pj_mb(dW_o->data, dW_o->strides[0], dW_o->strides[1])));
    SSM__TRY(ssm__cu_gemm(ctx, p->dtype, 1, 1, p->M, p->D, p->dout, 1.0, ssm__pj_mb(dy->data, dy->strides[0], dy->strides[1]),
                          ssm__pj_mb(W_o->data, W_o->strides[0], W_o->strides[1]), 0.0, ssm__pj_mb(dz, p->D, 1)));
    int64_t wrows = p->M; /* rows of dweight's terms, [wrows, D] = [wrows H, hd] */
    if (ssm__oc_vec_ok(p, o, g, weight, do_, dg)) {
        const dim3 grid = ssm__oc_grid8(p, SSM__OC_BWD8_ROWS);
        wrows = grid.x;
        SSM__PJ_BY_DT16(dt, ssm__oc_bwd8_kernel, grid, st->stream, p->M, p->D, p->hd, sig, (float)p->eps, ssm__pj_mat_of(o),
                        ssm__pj_mat_of(g), ssm__pj_vec_of(weight), ssm__pj_mat_of(rstd), dz, ssm__pj_mat_of(do_),
                        ssm__pj_mat_of(dg), wpart);
    } else
        SSM__PJ_BY_DT(dt, ssm__oc_bwd_kernel, ssm__oc_blocks(p->M), st->stream, p->M, p->D, p->hd, sig, (float)p->eps,
                      ssm__pj_mat_of(o), ssm__pj_mat_of(g), ssm__pj_vec_of(weight), ssm__pj_mat_of(rstd), dz, ssm__pj_mat_of(do_),
                      ssm__pj_mat_of(dg), wpart);
    SSM__CU_LAUNCHED(ctx, "ssm__oc_bwd_kernel");
    if (dweight) SSM__TRY(ssm__pj_colsums(ctx, wpart, 0, wrows * p->H, p->hd, p->hd, NULL, part, dweight->data, dt, dweight->strides[0]));
    return SSM_OK;
}

/* >>delta ---- delta rule ------------------------------------------------------------------ */
/* ==== delta rule (DeltaNet, Gated DeltaNet, DeltaProduct): chunked WY/UT form on tensor cores =======
   Per head, S_t = a_t (I - b_t k_t k_t^T) S_{t-1} + b_t k_t v_t^T, o_t = scale S_t^T q_t (Schlag et al.
   2021; Yang et al. 2024, "Parallelizing linear transformers with the delta rule over sequence length";
   gated: a_t = exp(g_t), Yang et al. 2025). Chunks of C = 64 tokens: a parallel kernel builds each
   chunk's UT transform T = (I + strict_tril(diag(b) K K^T))^-1 and w = T diag(b) K, u = T diag(b) V;
   one CTA per (sequence, head, block of V columns) then walks the chunks in order with the state in
   registers, fusing the intra-chunk output. The backward replays that pass for the chunk-start states,
   walks the chunks in reverse for the state gradients, and differentiates every chunk in parallel.
   Operands go through mma.sync m16n8k16 (bf16/f16) or f32 FMAs in the same fragment layout (f32);
   the state, the UT solve and every accumulation are f32 (the solve's block products on mma.sync
   in 3xTF32). DeltaProduct (Siems et al. 2025) runs as DeltaNet over T n_h sub-tokens. No atomics:
   results are bitwise reproducible. Variants and the f64 token-loop oracle: dev/cuda/delta.cu. */

/* One problem as the kernels see it: q,k [.,.,H,K], v,o [.,.,H,V] as (b,t,h,d) element strides;
   beta, g [.,.,H] as (b,t,h); states [B or N,H,K,V] f32 as (n,h,k,v). Sequences: N of them; with
   cu (varlen, B = 1) sequence n is tokens cu[n]..cu[n+1] of batch 0, else sequence n is batch n. */
typedef struct ssm__dl_args {
    const void *q, *k, *v, *beta, *g, *h0;
    void *o, *hT;
    const int64_t *cu;
    int64_t qs[4], ks[4], vs[4], os[4], bs[3], gs[3], h0s[4], hTs[4];
    int N, T, H, K, V, dt, bdt, gdt, sdt; /* sdt: dtype of the state tensors */
    int vec;     /* q, k, v (and dout) rows are 16-byte aligned with unit feature stride */
    int variant; /* bits 0, 1: the dev harness's earlier chunk preparation (its column-by-column and
                    scalar-block UT solves); bit 2: the sequential passes single-buffered; bit 3:
                    double-buffered whenever it fits; bit 4: the backward chunk kernel's phase B in
                    64-column key blocks at K = 128; bit 5: the backward's state-pass replay as the full
                    forward kernel; bit 6: the preparation's grid chunks-fastest (dev/cuda/delta.cu times them) */
    int svec;    /* states with unit column stride, rows and strides in whole aligned groups of 4
                    elements: one 16-byte (f32) or 8-byte (16-bit) access per 4 columns */
    int pairs;   /* dq, dk, dv take column pairs in one 8-byte (f32) or 4-byte (16-bit) store */
    int rp;      /* sub-tokens per token of q, o, dout, dq, g, dg (ssm__dl_rows); 1 but for DeltaProduct */
    float scale;
    /* backward: dout, dsT in; dq, dk, dv, dbeta, dg, ds0 out (each may be NULL) */
    const void *dout, *dhT;
    void *dq, *dk, *dv, *dbeta, *dg, *dh0;
    int64_t dos[4], dqs[4], dks[4], dvs[4], dbs[3], dgs[3], dhTs[4], dh0s[4];
} ssm__dl_args;

#define SSM__DL_C 64    /* chunk */
#define SSM__DL_NT 256  /* threads of the chunked kernels (8 warps) */

__device__ __forceinline__ float ssm__dl_ld(const void *p, int dt, int64_t i) {
    if (dt == 0) return ((const float *)p)[i];
    if (dt == 1) return __half2float(((const __half *)p)[i]);
    return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
}
__device__ __forceinline__ void ssm__dl_st(void *p, int dt, int64_t i, float v) {
    if (dt == 0) ((float *)p)[i] = v;
    else if (dt == 1) ((__half *)p)[i] = __float2half_rn(v);
    else ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn(v);
}
/* Four consecutive elements (16-byte aligned f32, 8-byte aligned f16/bf16) in one access. */
typedef union {
    uint2 u; /* four 16-bit elements as one 8-byte access */
    __half2 h[2];
    __nv_bfloat162 b[2];
} ssm__dl_h4;
__device__ __forceinline__ void ssm__dl_st4(void *p, int dt, int64_t i, const float (&x)[4]) {
    if (dt == 0) {
        *(float4 *)((float *)p + i) = make_float4(x[0], x[1], x[2], x[3]);
        return;
    }
    ssm__dl_h4 v;
    if (dt == 1) v.h[0] = __floats2half2_rn(x[0], x[1]), v.h[1] = __floats2half2_rn(x[2], x[3]);
    else v.b[0] = __floats2bfloat162_rn(x[0], x[1]), v.b[1] = __floats2bfloat162_rn(x[2], x[3]);
    *(uint2 *)((unsigned short *)p + i) = v.u;
}
template <class E> __device__ __forceinline__ E ssm__dl_cv(float x);
template <> __device__ __forceinline__ float ssm__dl_cv<float>(float x) { return x; }
template <> __device__ __forceinline__ __half ssm__dl_cv<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 ssm__dl_cv<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }
__device__ __forceinline__ float ssm__dl_f(float x) { return x; }
__device__ __forceinline__ float ssm__dl_f(__half x) { return __half2float(x); }
__device__ __forceinline__ float ssm__dl_f(__nv_bfloat16 x) { return __bfloat162float(x); }

/* Sequence n: batch index, first token, length; its chunks start at global chunk choff(n). */
struct ssm__dl_seq {
    int64_t b, t0, len, c0;
};
__device__ __forceinline__ ssm__dl_seq ssm__dl_seq_of(const ssm__dl_args &a, int n, const int64_t *choff) {
    ssm__dl_seq s;
    if (a.cu) s.b = 0, s.t0 = a.cu[n], s.len = a.cu[n + 1] - a.cu[n], s.c0 = choff[n];
    else s.b = n, s.t0 = 0, s.len = a.T, s.c0 = (int64_t)n * ((a.T + SSM__DL_C - 1) / SSM__DL_C);
    return s;
}
/* Global chunk gc -> (sequence, chunk in it); -1 past the last chunk (the grid is an upper bound). */
__device__ __forceinline__ int ssm__dl_find(const ssm__dl_args &a, int64_t gc, const int64_t *choff, int64_t *c) {
    if (!a.cu) {
        int64_t nc = (a.T + SSM__DL_C - 1) / SSM__DL_C;
        if (gc >= nc * a.N) return -1;
        *c = gc % nc;
        return (int)(gc / nc);
    }
    if (gc >= choff[a.N]) return -1;
    int lo = 0, hi = a.N - 1;
    while (lo < hi) { /* last n with choff[n] <= gc */
        int mid = (lo + hi + 1) >> 1;
        if (choff[mid] <= gc) lo = mid;
        else hi = mid - 1;
    }
    *c = gc - choff[lo];
    return lo;
}
/* choff[n] = chunks before sequence n (varlen only; one thread, N is small). */
__global__ void ssm__dl_choff_kernel(const int64_t *cu, int N, int64_t *choff) {
    if (threadIdx.x || blockIdx.x) return;
    int64_t s = 0;
    for (int n = 0; n < N; ++n) choff[n] = s, s += (cu[n + 1] - cu[n] + SSM__DL_C - 1) / SSM__DL_C;
    choff[N] = s;
}

/* ---- warp-level matrix tiles ------------------------------------------------------------------
   acc[j] (j < NT) is the m16n8 tile at rows m0.., cols n0+8j.. of A(m,k) B(k,n), in mma.sync's
   accumulator layout (lane g = lane/4, t = lane%4: (g, 2t..2t+1) and (g+8, 2t..2t+1)).
   A(m,k) = TA ? A[k*lda + m] : A[m*lda + k]; B(k,n) = TB ? B[n*ldb + k] : B[k*ldb + n].
   16-bit operands go through ldmatrix + mma.m16n8k16 (f32 accumulation); f32 operands through
   plain FMAs in the same layout, so every kernel runs in f32 too. */
template <class E> __device__ __forceinline__ void ssm__dl_mma(float c[4], const unsigned a[4], unsigned b0, unsigned b1);
template <> __device__ __forceinline__ void ssm__dl_mma<__nv_bfloat16>(float c[4], const unsigned a[4], unsigned b0, unsigned b1) {
    ssm__tc_mma<1>(c, a, b0, b1);
}
template <> __device__ __forceinline__ void ssm__dl_mma<__half>(float c[4], const unsigned a[4], unsigned b0, unsigned b1) {
    ssm__tc_mma<0>(c, a, b0, b1);
}

/* c += a b on tensor cores in 3xTF32 (each operand split hi + lo in TF32, the lo lo term dropped):
   about f32 accuracy; the rounding is ssm__tc_tf32's add and mask (cvt.rna's result for finite x).
   m16n8k8 fragments: a (g, t), (g+8, t), (g, t+4), (g+8, t+4); b (t, g), (t+4, g). */
__device__ __forceinline__ void ssm__dl_mma_tf32(float c[4], const unsigned a[4], const unsigned b[2]) {
    ssm__tc_mma8(c, a, b[0], b[1], 0);
}
__device__ __forceinline__ void ssm__dl_mma3(float c[4], float a0, float a1, float a2, float a3, float b0, float b1) {
    const float av[4] = {a0, a1, a2, a3}, bv[2] = {b0, b1};
    unsigned ah[4], al[4], bh[2], bl[2];
#pragma unroll
    for (int i = 0; i < 4; ++i) ah[i] = ssm__tc_tf32(av[i]), al[i] = ssm__tc_tf32(av[i] - __uint_as_float(ah[i]));
#pragma unroll
    for (int i = 0; i < 2; ++i) bh[i] = ssm__tc_tf32(bv[i]), bl[i] = ssm__tc_tf32(bv[i] - __uint_as_float(bh[i]));
    ssm__dl_mma_tf32(c, al, bh);
    ssm__dl_mma_tf32(c, ah, bl);
    ssm__dl_mma_tf32(c, ah, bh);
}

template <int NT, int KD, bool TA, bool TB, class E>
__device__ __forceinline__ void ssm__dl_wmma(float (&acc)[NT][4], const E *A, int lda, int m0, const E *B, int ldb,
                                             int n0) {
    const int lane = threadIdx.x & 31;
    if constexpr (sizeof(E) == 4) {
        const int g = lane >> 2, t = lane & 3;
#pragma unroll 4
        for (int k = 0; k < KD; ++k) {
            float a0 = TA ? A[k * lda + m0 + g] : A[(m0 + g) * lda + k];
            float a1 = TA ? A[k * lda + m0 + g + 8] : A[(m0 + g + 8) * lda + k];
#pragma unroll
            for (int j = 0; j < NT; ++j) {
                int n = n0 + 8 * j + 2 * t;
                float b0 = TB ? B[n * ldb + k] : B[k * ldb + n];
                float b1 = TB ? B[(n + 1) * ldb + k] : B[k * ldb + n + 1];
                acc[j][0] += a0 * b0, acc[j][1] += a0 * b1, acc[j][2] += a1 * b0, acc[j][3] += a1 * b1;
            }
        }
    } else {
        const int i = lane >> 3, r = lane & 7;
#pragma unroll
        for (int k0 = 0; k0 < KD; k0 += 16) {
            unsigned a[4];
            if (!TA) ssm__tc_ldm4(a, A + (m0 + (lane & 15)) * lda + k0 + (lane >> 4) * 8);
            else ssm__tc_ldm4t(a, A + (k0 + r + (i >> 1) * 8) * lda + m0 + (i & 1) * 8);
#pragma unroll
            for (int j = 0; j + 1 < NT; j += 2) {
                unsigned b[4];
                const int nb = n0 + 8 * j;
                if (TB) ssm__tc_ldm4(b, B + (nb + r + (i >> 1) * 8) * ldb + k0 + (i & 1) * 8);
                else ssm__tc_ldm4t(b, B + (k0 + r + (i & 1) * 8) * ldb + nb + (i >> 1) * 8);
                ssm__dl_mma<E>(acc[j], a, b[0], b[1]);
                ssm__dl_mma<E>(acc[j + 1], a, b[2], b[3]);
            }
            if constexpr (NT % 2) { /* the odd last n8 tile: an x4 load whose upper half repeats the lower */
                unsigned b[4];
                const int nb = n0 + 8 * (NT - 1);
                if (TB) ssm__tc_ldm4(b, B + (nb + r) * ldb + k0 + (i & 1) * 8);
                else ssm__tc_ldm4t(b, B + (k0 + r + (i & 1) * 8) * ldb + nb);
                ssm__dl_mma<E>(acc[NT - 1], a, b[0], b[1]);
            }
        }
    }
}
/* acc1 += A1 B and acc2 += A2 B (A row-major, B [k][n]): B's fragments are loaded once for both. */
template <int NT, int KD, class E>
__device__ __forceinline__ void ssm__dl_wmma2(float (&acc1)[NT][4], const E *A1, float (&acc2)[NT][4], const E *A2, int lda,
                                              int m0, const E *B, int ldb, int n0) {
    if constexpr (sizeof(E) == 4 || NT % 2) {
        ssm__dl_wmma<NT, KD, false, false>(acc1, A1, lda, m0, B, ldb, n0);
        ssm__dl_wmma<NT, KD, false, false>(acc2, A2, lda, m0, B, ldb, n0);
    } else {
        const int lane = threadIdx.x & 31, i = lane >> 3, r = lane & 7;
#pragma unroll
        for (int k0 = 0; k0 < KD; k0 += 16) {
            unsigned a1[4], a2[4];
            ssm__tc_ldm4(a1, A1 + (m0 + (lane & 15)) * lda + k0 + (lane >> 4) * 8);
            ssm__tc_ldm4(a2, A2 + (m0 + (lane & 15)) * lda + k0 + (lane >> 4) * 8);
#pragma unroll
            for (int j = 0; j < NT; j += 2) {
                unsigned b[4];
                ssm__tc_ldm4t(b, B + (k0 + r + (i & 1) * 8) * ldb + n0 + 8 * j + (i >> 1) * 8);
                ssm__dl_mma<E>(acc1[j], a1, b[0], b[1]);
                ssm__dl_mma<E>(acc1[j + 1], a1, b[2], b[3]);
                ssm__dl_mma<E>(acc2[j], a2, b[0], b[1]);
                ssm__dl_mma<E>(acc2[j + 1], a2, b[2], b[3]);
            }
        }
    }
}
template <int NT> __device__ __forceinline__ void ssm__dl_zero(float (&acc)[NT][4]) {
#pragma unroll
    for (int j = 0; j < NT; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
}
/* Visit the accumulator elements: f(row, col, value&). */
template <int NT, class F> __device__ __forceinline__ void ssm__dl_each(float (&acc)[NT][4], int m0, int n0, F f) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int j = 0; j < NT; ++j) {
        int n = n0 + 8 * j + 2 * t;
        f(m0 + g, n, acc[j][0]), f(m0 + g, n + 1, acc[j][1]);
        f(m0 + g + 8, n, acc[j][2]), f(m0 + g + 8, n + 1, acc[j][3]);
    }
}
/* The same by column pairs: f(row, col, value at col, value at col + 1), col even. */
template <int NT, class F> __device__ __forceinline__ void ssm__dl_each2(const float (&acc)[NT][4], int m0, int n0, F f) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int j = 0; j < NT; ++j) {
        const int n = n0 + 8 * j + 2 * t;
        f(m0 + g, n, acc[j][0], acc[j][1]), f(m0 + g + 8, n, acc[j][2], acc[j][3]);
    }
}
/* The same with the row half hh (0: row m0 + g, 1: m0 + g + 8) first: per-row factors computed
   once per lane instead of once per element. */
template <int NT, class F> __device__ __forceinline__ void ssm__dl_each2h(const float (&acc)[NT][4], int m0, int n0, F f) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int j = 0; j < NT; ++j) {
        const int n = n0 + 8 * j + 2 * t;
        f(0, m0 + g, n, acc[j][0], acc[j][1]), f(1, m0 + g + 8, n, acc[j][2], acc[j][3]);
    }
}
/* C[M,N] = A B by the block's 8 warps in 16x32 tiles, then f(row, col, value) per element. */
template <int M, int N, int KD, bool TA, bool TB, class E, class F>
__device__ __forceinline__ void ssm__dl_gemm(const E *A, int lda, const E *B, int ldb, F f) {
    constexpr int TN = N >= 32 ? 32 : 16, tiles = (M / 16) * (N / TN);
    const int w = threadIdx.x >> 5;
    for (int tile = w; tile < tiles; tile += SSM__DL_NT / 32) {
        const int m0 = (tile / (N / TN)) * 16, n0 = (tile % (N / TN)) * TN;
        float acc[TN / 8][4];
        ssm__dl_zero(acc);
        ssm__dl_wmma<TN / 8, KD, TA, TB>(acc, A, lda, m0, B, ldb, n0);
        ssm__dl_each(acc, m0, n0, [&](int m, int n, float &v) { f(m, n, v); });
    }
}

/* The same, f(row, col, value at col, value at col + 1): column pairs for 4- or 8-byte stores. */
template <int M, int N, int KD, bool TA, bool TB, class E, class F>
__device__ __forceinline__ void ssm__dl_gemm2(const E *A, int lda, const E *B, int ldb, F f) {
    constexpr int TN = N >= 32 ? 32 : 16, tiles = (M / 16) * (N / TN);
    const int w = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    for (int tile = w; tile < tiles; tile += SSM__DL_NT / 32) {
        const int m0 = (tile / (N / TN)) * 16, n0 = (tile % (N / TN)) * TN;
        float acc[TN / 8][4];
        ssm__dl_zero(acc);
        ssm__dl_wmma<TN / 8, KD, TA, TB>(acc, A, lda, m0, B, ldb, n0);
#pragma unroll
        for (int j = 0; j < TN / 8; ++j) {
            const int n = n0 + 8 * j + 2 * t;
            f(m0 + g, n, acc[j][0], acc[j][1]), f(m0 + g + 8, n, acc[j][2], acc[j][3]);
        }
    }
}
template <class E> __device__ __forceinline__ void ssm__dl_st2(E *p, float x0, float x1);
template <> __device__ __forceinline__ void ssm__dl_st2<float>(float *p, float x0, float x1) { *(float2 *)p = make_float2(x0, x1); }
template <> __device__ __forceinline__ void ssm__dl_st2<__half>(__half *p, float x0, float x1) {
    *(__half2 *)p = __floats2half2_rn(x0, x1);
}
template <> __device__ __forceinline__ void ssm__dl_st2<__nv_bfloat16>(__nv_bfloat16 *p, float x0, float x1) {
    *(__nv_bfloat162 *)p = __floats2bfloat162_rn(x0, x1);
}
__device__ __forceinline__ float2 ssm__dl_ld2(const float *p) { return *(const float2 *)p; }
__device__ __forceinline__ float2 ssm__dl_ld2(const __half *p) { return __half22float2(*(const __half2 *)p); }
__device__ __forceinline__ float2 ssm__dl_ld2(const __nv_bfloat16 *p) { return __bfloat1622float2(*(const __nv_bfloat162 *)p); }
/* Columns c, c + 1 (c even) of a row, column c at element offset i, column stride cs: one
   ssm__dl_st2 when pairs (cs = 1, offsets even, pointer aligned to the pair) and both exist
   (c + 1 < n), else each of them that exists. A fragment row's 4 lanes then write 16 contiguous
   bytes (16-bit) instead of 8. */
__device__ __forceinline__ void ssm__dl_st_pair(void *p, int dt, int pairs, int64_t i, int64_t cs, int c, int n, float x0,
                                                float x1) {
    if (pairs && c + 1 < n) {
        if (dt == 0) ssm__dl_st2((float *)p + i, x0, x1);
        else if (dt == 1) ssm__dl_st2((__half *)p + i, x0, x1);
        else ssm__dl_st2((__nv_bfloat16 *)p + i, x0, x1);
        return;
    }
    if (c < n) ssm__dl_st(p, dt, i, x0);
    if (c + 1 < n) ssm__dl_st(p, dt, i + cs, x1);
}

/* Row i of a chunk is sub-token s = t0 + i. DeltaProduct runs in place (rp = n_h > 1): the kernels
   step through sub-tokens while q, dout, o, dq keep one row per token, at its last factor (at =
   rp - 1), and g, dg at its first (at = 0); other sub-tokens have no row (zero in, nothing out).
   k, v, beta and their gradients are sub-token views (ssm__dl_inplace). rp = 1: rows are tokens.
   Sub-token indices fit 31 bits (ssm__dl_supported), so the map divides in 32 bits, and the
   stores look rows up once per lane (ssm__dl_each2h): the first form (64-bit, per element) took
   H200 B4 T8192 H16 D128 forward+backward from 2.92 to 3.84 ms. */
struct ssm__dl_rows {
    int t0, rp, at;
    __device__ __forceinline__ int operator()(int i) const {
        const int s = t0 + i;
        return rp == 1 ? s : s % rp == at ? s / rp : -1;
    }
};
__device__ __forceinline__ ssm__dl_rows ssm__dl_tokrows(const ssm__dl_args &a, int64_t t0) { return {(int)t0, a.rp, a.rp - 1}; }
__device__ __forceinline__ ssm__dl_rows ssm__dl_gaterows(const ssm__dl_args &a, int64_t t0) { return {(int)t0, a.rp, 0}; }

/* ---- shared-memory staging ------------------------------------------------------------------ */
/* rows x cols tile of a strided tensor (row i at p + base + r(i)*rs, element j at + j*cs), times
   mul(i), into s (E, leading dimension ld); rows >= nr or without a row (r(i) < 0) and cols >= nc
   are zeros. */
template <class E, class F>
__device__ __forceinline__ void ssm__dl_stage(E *s, int ld, int rows, int cols, const void *p, int dt, int64_t base,
                                              int64_t rs, int64_t cs, int nr, int nc, F mul, int vec = 0,
                                              ssm__dl_rows r = {0, 1, 0}) {
    if (vec) { /* the tensor's dtype is E, unit feature stride, 16-byte aligned rows: 16-byte loads */
        constexpr int V = 16 / sizeof(E);
        const int vpr = cols / V;
        const E *pe = (const E *)p + base;
        for (int idx = threadIdx.x; idx < rows * vpr; idx += blockDim.x) {
            const int i = idx / vpr, j = (idx % vpr) * V;
            const int ri = i < nr ? r(i) : -1;
            union {
                uint4 u;
                E e[V];
            } x;
            if (ri >= 0 && j + V <= nc) {
                x.u = __ldg((const uint4 *)(pe + (int64_t)ri * rs + j));
                const float m = mul(i);
                if (m != 1.f)
#pragma unroll
                    for (int e = 0; e < V; ++e) x.e[e] = ssm__dl_cv<E>(ssm__dl_f(x.e[e]) * m);
            } else
#pragma unroll
                for (int e = 0; e < V; ++e)
                    x.e[e] = ssm__dl_cv<E>((ri >= 0 && j + e < nc) ? ssm__dl_f(pe[(int64_t)ri * rs + j + e]) * mul(i) : 0.f);
            *(uint4 *)(s + i * ld + j) = x.u;
        }
        return;
    }
    for (int idx = threadIdx.x; idx < rows * cols; idx += blockDim.x) {
        const int i = idx / cols, j = idx % cols;
        const int ri = i < nr ? r(i) : -1;
        float x = (ri >= 0 && j < nc) ? ssm__dl_ld(p, dt, base + (int64_t)ri * rs + j * cs) * mul(i) : 0.f;
        s[i * ld + j] = ssm__dl_cv<E>(x);
    }
}
/* Both tile movers run in the chunked kernels' blocks of SSM__DL_NT threads: a trip count known
   at compile time, unrolled, with each thread's addresses a fixed stride apart (fewer instructions
   in the sequential passes, whose warps mostly wait on their own instruction chain). */
template <int rows, int cols, class E>
__device__ __forceinline__ void ssm__dl_cptile(E *s, int ld, const E *g, int gld) {
    constexpr int V = 16 / sizeof(E), vpr = cols / V, n = rows * vpr;
#pragma unroll
    for (int it = 0; it < (n + SSM__DL_NT - 1) / SSM__DL_NT; ++it) {
        const int idx = threadIdx.x + it * SSM__DL_NT;
        if (n % SSM__DL_NT == 0 || idx < n) {
            const int i = idx / vpr, j = (idx % vpr) * V;
            ssm__tc_cp16(s + i * ld + j, g + (int64_t)i * gld + j);
        }
    }
}
/* Store an smem tile to the (contiguous) workspace. */
template <int rows, int cols, class E> __device__ __forceinline__ void ssm__dl_sttile(E *g, int gld, const E *s, int ld) {
    constexpr int V = 16 / sizeof(E), vpr = cols / V, n = rows * vpr;
#pragma unroll
    for (int it = 0; it < (n + SSM__DL_NT - 1) / SSM__DL_NT; ++it) {
        const int idx = threadIdx.x + it * SSM__DL_NT;
        if (n % SSM__DL_NT == 0 || idx < n) {
            const int i = idx / vpr, j = (idx % vpr) * V;
            *(uint4 *)(g + (int64_t)i * gld + j) = *(const uint4 *)(s + i * ld + j);
        }
    }
}

/* Workspace of the chunked path, per (global chunk, head) "ch": packed q, k, w [C,KP], u [C,VP],
   Aqk [C,C] (scale*tril(q k^T) with gates), T [C,C] (backward), gamma [C] (in-chunk cumsum of g). */
template <class E> struct ssm__dl_ws {
    E *qp, *kp, *w, *u, *aqk, *tm;
    E *dop, *s0, *vn, *ds1, *dvn; /* backward: packed dout [C,VP], S at chunk starts [KP,VP],
                                     v_new [C,VP], dS at chunk ends [KP,VP], d v_new [C,VP] */
    float *gam;
    int64_t *choff;
    int KP, VP;
};

/* ---- chunk preparation: one CTA per (chunk, head), all chunks in parallel -----------------------
   A = strict_tril(diag(beta) K K^T * exp(g_i - g_j)), T = (I + A)^-1 (f32), w = T diag(beta exp(g)) K,
   u = T diag(beta) V, Aqk = scale * tril(Q K^T * exp(g_i - g_j)). The kernel is a latency chain on
   small tiles, so it is built for few barriers and small shared memory (more CTAs per SM): every
   global read is in flight at once (cp.async), T is built in place of A in one f32 tile (16 x 16
   diagonal blocks by forward substitution in registers, then two levels of block products on
   tensor cores in 3xTF32), and the diagonal scalings of w and u ride on T's fragments, so K and V
   are staged once, unscaled. */
#define SSM__DL_LT 72 /* row stride of the f32 A / T tile: conflict-free mma fragment loads */
template <class E, int KP> __host__ __device__ constexpr size_t ssm__dl_prep_bytes(int VP) {
    return sizeof(E) * ((size_t)2 * SSM__DL_C * (KP + 8) + (size_t)SSM__DL_C * (VP + 8)) +
           sizeof(float) * ((size_t)SSM__DL_C * SSM__DL_LT + 3 * SSM__DL_C);
}
/* CTAs of `bytes` shared memory each that fit one SM (228 KB, 1 KB of it reserved per CTA),
   clamped to [1, cap]: the occupancy a kernel's registers are budgeted for (__launch_bounds__). */
__host__ __device__ constexpr int ssm__dl_ctas_fit(size_t bytes, int cap) {
    const size_t n = (size_t)228 * 1024 / (bytes + 1024);
    return n < 1 ? 1 : n > (size_t)cap ? cap : (int)n;
}
/* CTAs per SM that shared memory allows at V = K, at most 4 (64 registers a thread), 6 for 16-bit
   K <= 32: the registers are budgeted for that occupancy (H200, B32 T2048 H8 K=V=32: 4 CTAs/SM
   0.195 ms, 5 0.184, 6 0.180; K = 64 gains nothing). */
template <class E, int KP> __host__ __device__ constexpr int ssm__dl_prep_min() {
    return ssm__dl_ctas_fit(ssm__dl_prep_bytes<E, KP>(KP), sizeof(E) == 2 && KP <= 32 ? 6 : 4);
}
/* rows x cols tile (unit feature stride, 16-byte aligned rows from g: row i at g + r(i)*rs) into s
   through cp.async; rows >= nr or without a row and columns >= nc are zero-filled. */
template <class E>
__device__ __forceinline__ void ssm__dl_cprows(E *s, int ld, int rows, int cols, const E *g, int64_t rs, int nr, int nc,
                                               ssm__dl_rows r = {0, 1, 0}) {
    constexpr int V = 16 / sizeof(E);
    const int vpr = cols / V;
    for (int idx = threadIdx.x; idx < rows * vpr; idx += blockDim.x) {
        const int i = idx / vpr, j = (idx % vpr) * V;
        const int ri = i < nr ? r(i) : -1;
        const int nb = (ri >= 0 && j < nc) ? (int)sizeof(E) * min(V, nc - j) : 0;
        const E *src = nb ? g + (int64_t)ri * rs + j : g;
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(ssm__tc_sa(s + i * ld + j)), "l"(src), "r"(nb));
    }
}
/* The backward's dout tile of a chunk (tokens t0.., len of them; columns v0.., COLS of them) into s:
   straight from dout when its rows allow 16-byte copies (a.vec; rows past len and columns past V
   zero-filled), else from the preparation's packed copy. */
template <int COLS, class E>
__device__ __forceinline__ void ssm__dl_ld_dout(E *s, int ld, const ssm__dl_args &a, const ssm__dl_ws<E> &ws, int64_t ch,
                                                int64_t b, int64_t t0, int h, int len, int v0) {
    if (a.vec && a.dout)
        ssm__dl_cprows(s, ld, SSM__DL_C, COLS, (const E *)a.dout + b * a.dos[0] + h * a.dos[2] + v0, a.dos[1], len, a.V - v0,
                       ssm__dl_tokrows(a, t0));
    else
        ssm__dl_cptile<SSM__DL_C, COLS>(s, ld, ws.dop + ch * SSM__DL_C * ws.VP + v0, ws.VP);
}
/* acc[j] += A[m0.., k] B[k, n0 + 8j..] over k in [k0, k1) (multiples of 8): f32 tiles in shared
   memory on tensor cores in 3xTF32. */
template <int NT>
__device__ __forceinline__ void ssm__dl_tf3(float (&acc)[NT][4], const float *A, int lda, int m0, const float *B, int ldb,
                                            int n0, int k0, int k1) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    for (int k = k0; k < k1; k += 8) {
        const float *ar = A + (m0 + g) * lda + k + t;
        const float a0 = ar[0], a1 = ar[8 * lda], a2 = ar[4], a3 = ar[8 * lda + 4];
#pragma unroll
        for (int j = 0; j < NT; ++j) {
            const float *br = B + (k + t) * ldb + n0 + 8 * j + g;
            ssm__dl_mma3(acc[j], a0, a1, a2, a3, br[0], br[4 * ldb]);
        }
    }
}
template <class E> __device__ __forceinline__ unsigned ssm__dl_pk(float x, float y);
template <> __device__ __forceinline__ unsigned ssm__dl_pk<__nv_bfloat16>(float x, float y) {
    __nv_bfloat162 h = __floats2bfloat162_rn(x, y);
    return *(unsigned *)&h;
}
template <> __device__ __forceinline__ unsigned ssm__dl_pk<__half>(float x, float y) {
    __half2 h = __floats2half2_rn(x, y);
    return *(unsigned *)&h;
}
/* acc[j] += (A diag(scl))[m0.., k] B[k, 8j..] over k < kend (a multiple of 16): A f32 in shared
   memory, rounded to E in the fragment; B (E) row-major [k][n]. */
template <int NT, class E>
__device__ __forceinline__ void ssm__dl_wmma_f(float (&acc)[NT][4], const float *A, int lda, int m0, const float *scl, int kend,
                                               const E *B, int ldb) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    if constexpr (sizeof(E) == 4) {
        for (int k = 0; k < kend; ++k) {
            const float a0 = A[(m0 + g) * lda + k] * scl[k], a1 = A[(m0 + g + 8) * lda + k] * scl[k];
#pragma unroll
            for (int j = 0; j < NT; ++j) {
                const int n = 8 * j + 2 * t;
                const float b0 = B[k * ldb + n], b1 = B[k * ldb + n + 1];
                acc[j][0] += a0 * b0, acc[j][1] += a0 * b1, acc[j][2] += a1 * b0, acc[j][3] += a1 * b1;
            }
        }
    } else {
        const int i = lane >> 3, r = lane & 7;
        for (int k0 = 0; k0 < kend; k0 += 16) {
            const float2 s0 = *(const float2 *)(scl + k0 + 2 * t), s1 = *(const float2 *)(scl + k0 + 8 + 2 * t);
            const float *ar = A + (m0 + g) * lda + k0 + 2 * t;
            const float2 x0 = *(const float2 *)ar, x1 = *(const float2 *)(ar + 8 * lda);
            const float2 x2 = *(const float2 *)(ar + 8), x3 = *(const float2 *)(ar + 8 * lda + 8);
            const unsigned a[4] = {ssm__dl_pk<E>(x0.x * s0.x, x0.y * s0.y), ssm__dl_pk<E>(x1.x * s0.x, x1.y * s0.y),
                                   ssm__dl_pk<E>(x2.x * s1.x, x2.y * s1.y), ssm__dl_pk<E>(x3.x * s1.x, x3.y * s1.y)};
#pragma unroll
            for (int j = 0; j < NT; j += 2) {
                unsigned b[4];
                ssm__tc_ldm4t(b, B + (k0 + r + (i & 1) * 8) * ldb + 8 * j + (i >> 1) * 8);
                ssm__dl_mma<E>(acc[j], a, b[0], b[1]);
                ssm__dl_mma<E>(acc[j + 1], a, b[2], b[3]);
            }
        }
    }
}
/* store_t: bit 0 also writes T and the packed dout (backward, or a forward that keeps its chunk
   quantities); bit 1: the grid is (head, chunk), not (chunk, head); bit 2: the packed dout alone (a
   backward from kept quantities; no shared memory). MINB: CTAs per SM for the register budget (the
   dev harness tries others). */
template <class E, int KP, int MINB = ssm__dl_prep_min<E, KP>()>
__global__ void __launch_bounds__(SSM__DL_NT, MINB)
ssm__dl_prep_kernel(ssm__dl_args a, ssm__dl_ws<E> ws, int VP, int store_t) {
    constexpr int C = SSM__DL_C, LK = KP + 8, LT = SSM__DL_LT;
    extern __shared__ __align__(16) unsigned char ssm__dl_smem[];
    const int64_t gc = (store_t & 2) ? blockIdx.y : blockIdx.x;
    const int h = (store_t & 2) ? blockIdx.x : blockIdx.y, tid = threadIdx.x, wp = tid >> 5, lane = tid & 31;
    const bool dout_only = store_t & 4;
    store_t &= 1;
    int64_t c;
    const int n = ssm__dl_find(a, gc, ws.choff, &c);
    if (n < 0) return;
    const ssm__dl_seq sq = ssm__dl_seq_of(a, n, ws.choff);
    const int64_t t0 = sq.t0 + c * C;
    const int len = (int)min((int64_t)C, sq.len - c * C);
    const auto pack_dout = [&]() { /* the backward's packed dout, global to global (a.vec: read in place) */
        if (!a.dout || a.vec) return;
        const int64_t db = sq.b * a.dos[0] + h * a.dos[2];
        ssm__dl_stage(ws.dop + (gc * a.H + h) * C * VP, VP, C, VP, a.dout, a.dt, db, a.dos[1], a.dos[3], len, a.V,
                      [](int) { return 1.f; }, 0, ssm__dl_tokrows(a, t0)); /* element loads: a.vec is 0 here */
    };
    if (dout_only) return pack_dout();
    const int LV = VP + 8;
    E *sQ = (E *)ssm__dl_smem, *sK = sQ + C * LK, *sV = sK + C * LK;
    float *sT = (float *)(sV + C * LV), *sb = sT + C * LT, *sg = sb + C, *seg = sg + C;
    float *sX = (float *)sQ; /* the block products' temporaries, over Q once Aqk is out */
    const int64_t ch = gc * a.H + h;
    const int64_t qb = sq.b * a.qs[0] + h * a.qs[2], kb = sq.b * a.ks[0] + t0 * a.ks[1] + h * a.ks[2]; /* q: ssm__dl_tokrows */
    const int64_t vb = sq.b * a.vs[0] + t0 * a.vs[1] + h * a.vs[2];

    /* every global read in flight at once: warp 0's beta and g (two tokens a lane), the q, k, v tiles */
    float be[2] = {0.f, 0.f}, ga[2] = {0.f, 0.f};
    if (wp == 0)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
            const int i = 2 * lane + e;
            if (i < len) {
                be[e] = ssm__dl_ld(a.beta, a.bdt, sq.b * a.bs[0] + (t0 + i) * a.bs[1] + h * a.bs[2]);
                const int gi = ssm__dl_gaterows(a, t0)(i);
                if (a.g && gi >= 0) ga[e] = ssm__dl_ld(a.g, a.gdt, sq.b * a.gs[0] + gi * a.gs[1] + h * a.gs[2]);
            }
        }
    if (a.vec) {
        ssm__dl_cprows(sQ, LK, C, KP, (const E *)a.q + qb, a.qs[1], len, a.K, ssm__dl_tokrows(a, t0));
        ssm__dl_cprows(sK, LK, C, KP, (const E *)a.k + kb, a.ks[1], len, a.K);
        ssm__dl_cprows(sV, LV, C, VP, (const E *)a.v + vb, a.vs[1], len, a.V);
        ssm__tc_commit();
    } else {
        ssm__dl_stage(sQ, LK, C, KP, a.q, a.dt, qb, a.qs[1], a.qs[3], len, a.K, [](int) { return 1.f; }, 0,
                      ssm__dl_tokrows(a, t0));
        ssm__dl_stage(sK, LK, C, KP, a.k, a.dt, kb, a.ks[1], a.ks[3], len, a.K, [](int) { return 1.f; });
        ssm__dl_stage(sV, LV, C, VP, a.v, a.dt, vb, a.vs[1], a.vs[3], len, a.V, [](int) { return 1.f; });
    }
    if (store_t) pack_dout(); /* while the tiles are in flight */
    if (wp == 0) { /* inclusive scan of the log gates over the chunk */
        const float x0 = ga[0], x1 = x0 + ga[1];
        float s = x1;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const float y = __shfl_up_sync(0xffffffffu, s, o);
            if (lane >= o) s += y;
        }
        const float g0 = s - x1 + x0, g1 = s;
        *(float2 *)(sb + 2 * lane) = make_float2(be[0], be[1]);
        *(float2 *)(sg + 2 * lane) = make_float2(g0, g1);
        *(float2 *)(seg + 2 * lane) = make_float2(be[0] * __expf(g0), be[1] * __expf(g1));
        *(float2 *)(ws.gam + ch * C + 2 * lane) = make_float2(g0, g1);
    }
    ssm__tc_wait<0>();
    __syncthreads();
    ssm__dl_sttile<C, KP>(ws.qp + ch * C * KP, KP, sQ, LK);
    ssm__dl_sttile<C, KP>(ws.kp + ch * C * KP, KP, sK, LK);
    { /* A (f32, into sT) and Aqk (E, to the workspace): warp w the 16 x 32 tile at (16(w/2), 32(w%2)) of
         K K^T and Q K^T; the tiles above the diagonal are zeros without products, no gates no exp */
        static_assert(SSM__DL_NT == 256 && C == 64, "8 warps, 8 tiles");
        const int m0 = (wp >> 1) * 16, n0 = (wp & 1) * 32, g = lane >> 2, t = lane & 3;
        float ak[4][4], aq[4][4];
        ssm__dl_zero(ak), ssm__dl_zero(aq);
        if (n0 < m0 + 16) {
            ssm__dl_wmma<4, KP, false, true>(ak, sK, LK, m0, sK, LK, n0);
            ssm__dl_wmma<4, KP, false, true>(aq, sQ, LK, m0, sK, LK, n0);
        }
        E *aqk = ws.aqk + ch * C * C;
        const float scale = a.scale;
        const bool gated = a.g != NULL;
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) { /* rows g, g + 8 */
            const int i = m0 + g + 8 * hh;
            const float bi = sb[i], gi = sg[i];
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const int col = n0 + 8 * j + 2 * t;
                float x0 = ak[j][2 * hh], x1 = ak[j][2 * hh + 1], y0 = aq[j][2 * hh], y1 = aq[j][2 * hh + 1];
                if (gated) { /* masked entries may overflow exp; the selects below drop them */
                    const float e0 = __expf(gi - sg[col]), e1 = __expf(gi - sg[col + 1]);
                    x0 *= e0, x1 *= e1, y0 *= e0, y1 *= e1;
                }
                *(float2 *)(sT + i * LT + col) = make_float2(i > col ? bi * x0 : 0.f, i > col + 1 ? bi * x1 : 0.f);
                ssm__dl_st2(aqk + i * C + col, i >= col ? scale * y0 : 0.f, i > col ? scale * y1 : 0.f);
            }
        }
    }
    __syncthreads();
    /* T in place of A. Diagonal blocks D_b = (I + A_bb)^-1: lane (b, col) carries its column in
       registers down the rows, A's rows broadcast from shared memory (warps 0-1, no barrier). */
    if (wp < 2) {
        const int o = 16 * (2 * wp + (lane >> 4)), col = lane & 15;
        float tc[16];
#pragma unroll
        for (int i = 0; i < 16; ++i) {
            const float *ar = sT + (o + i) * LT + o;
            float s = 0.f;
#pragma unroll
            for (int j = 0; j < i; ++j) s += ar[j] * tc[j];
            tc[i] = i == col ? 1.f : i < col ? 0.f : -s;
        }
        __syncwarp();
#pragma unroll
        for (int i = 0; i < 16; ++i) sT[(o + i) * LT + o + col] = tc[i];
    }
    __syncthreads();
    /* 32 x 32 diagonal blocks: T_IJ = -D_I (A_IJ D_J) for (I, J) = (1, 0), (3, 2); warp-private temporaries */
    if (wp < 2) {
        const int I = 2 * wp + 1, J = 2 * wp;
        float *xs = sX + wp * 16 * 24;
        float x[2][4] = {};
        ssm__dl_tf3<2>(x, sT, LT, 16 * I, sT, LT, 16 * J, 16 * J, 16 * J + 16);
        const int g = lane >> 2, t = lane & 3;
#pragma unroll
        for (int j = 0; j < 2; ++j) {
            float *p = xs + g * 24 + 8 * j + 2 * t;
            p[0] = x[j][0], p[1] = x[j][1], p[8 * 24] = x[j][2], p[8 * 24 + 1] = x[j][3];
        }
        __syncwarp();
        float y[2][4] = {};
        ssm__dl_tf3<2>(y, sT + 16 * I, LT, 16 * I, xs, 24, 0, 0, 16);
#pragma unroll
        for (int j = 0; j < 2; ++j) {
            float *p = sT + (16 * I + g) * LT + 16 * J + 8 * j + 2 * t;
            p[0] = -y[j][0], p[1] = -y[j][1], p[8 * LT] = -y[j][2], p[8 * LT + 1] = -y[j][3];
        }
    }
    __syncthreads();
    { /* the lower-left 32 x 32 block: T_21 = -T_22 (A_21 T_11); warp w: rows 32 + 16(w/4).., cols 8(w%4).. */
        const int mt = wp >> 2, n0 = 8 * (wp & 3), g = lane >> 2, t = lane & 3;
        float x[1][4] = {};
        ssm__dl_tf3<1>(x, sT, LT, 32 + 16 * mt, sT, LT, n0, 16 * (n0 >> 4), 32); /* T_11 is zero above its blocks */
        float *p = sX + (16 * mt + g) * 40 + n0 + 2 * t;
        p[0] = x[0][0], p[1] = x[0][1], p[8 * 40] = x[0][2], p[8 * 40 + 1] = x[0][3];
        __syncthreads(); /* every read of A_21 is done, X complete */
        float y[1][4] = {};
        ssm__dl_tf3<1>(y, sT + 32, LT, 32 + 16 * mt, sX, 40, n0, 0, 16 * (mt + 1)); /* T_22 lower */
        p = sT + (32 + 16 * mt + g) * LT + n0 + 2 * t;
        p[0] = -y[0][0], p[1] = -y[0][1], p[8 * LT] = -y[0][2], p[8 * LT + 1] = -y[0][3];
    }
    __syncthreads();
    if (store_t) { /* T as E for the backward (zero above its diagonal: A's fill) */
        constexpr int V = 16 / sizeof(E);
        E *tm = ws.tm + ch * C * C;
        for (int idx = tid; idx < C * C / V; idx += blockDim.x) {
            const int i = idx / (C / V), j = (idx % (C / V)) * V;
            union {
                uint4 u;
                E e[V];
            } x;
#pragma unroll
            for (int e = 0; e < V; ++e) x.e[e] = ssm__dl_cv<E>(sT[i * LT + j + e]);
            *(uint4 *)(tm + i * C + j) = x.u;
        }
    }
    /* w = (T diag(beta e^g)) K and u = (T diag(beta)) V: items of (row blocks {0, 3} or {1, 2}: equal
       work, as row block m stops at k = 16(m+1)) x (SW columns of w or u) */
    {
        constexpr int SW = KP >= 64 ? 32 : 16, NT = SW / 8;
        const int nw = KP / SW, items = 2 * (nw + VP / SW), g = lane >> 2, t = lane & 3;
        E *w = ws.w + ch * C * KP, *u = ws.u + ch * C * VP;
        for (int it = wp; it < items; it += SSM__DL_NT / 32) {
            const int pr = it & 1, s = it >> 1;
            const bool isw = s < nw;
            const int c0 = (isw ? s : s - nw) * SW, ldb = isw ? LK : LV, ldd = isw ? KP : VP;
            const E *B = (isw ? sK : sV) + c0;
            const float *scl = isw ? seg : sb;
            E *d = (isw ? w : u) + c0;
#pragma unroll
            for (int r = 0; r < 2; ++r) {
                const int mb = pr ? 1 + r : 3 * r;
                float acc[NT][4];
                ssm__dl_zero(acc);
                ssm__dl_wmma_f<NT, E>(acc, sT, LT, 16 * mb, scl, 16 * (mb + 1), B, ldb);
#pragma unroll
                for (int j = 0; j < NT; ++j) {
                    E *p = d + (16 * mb + g) * ldd + 8 * j + 2 * t;
                    ssm__dl_st2(p, acc[j][0], acc[j][1]), ssm__dl_st2(p + 8 * ldd, acc[j][2], acc[j][3]);
                }
            }
        }
    }
}
template <class E, int KP> static size_t ssm__dl_prep_smem(int VP) { return ssm__dl_prep_bytes<E, KP>(VP); }

/* ---- inter-chunk pass: one CTA per (sequence, head, VB columns of V), chunks in order ----------
   v_new = u - w S; o = exp(g) q S * scale + Aqk v_new; S <- exp(g_last) S + K^T (exp(g_last - g) v_new).
   S lives in registers (f32 accumulators), its E copy in shared memory feeds the next chunk.
   Warp w: output rows 16*(w%4).., cols (w/4)*VB/2..; state rows (w)*KP/8...
   OUT = false: the backward's replay, for v_new and the chunk-start states only: no q, Aqk
   tiles, no output products (a third less to read per chunk, smaller buffers). */
template <class E, int KP, int VB, int NB, bool OUT>
__global__ void __launch_bounds__(SSM__DL_NT) ssm__dl_fwd_kernel(ssm__dl_args a, ssm__dl_ws<E> ws, E *vn_out, E *s_out) {
    constexpr int C = SSM__DL_C, LK = KP + 8, LC = C + 8, LVB = VB + 8;
    constexpr int ONT = VB / 16;           /* n8 tiles of a warp's output tile (16 x VB/2) */
    /* state tile: KP/16 row blocks over 8 warps; WPR warps share a row block (split columns) */
    constexpr int RB = KP / 16, WPR = RB >= 8 ? 1 : 8 / RB, SM = RB >= 8 ? RB / 8 : 1, SNT = VB / (8 * WPR);
    extern __shared__ __align__(16) unsigned char ssm__dl_smem[];
    const int n = blockIdx.x, h = blockIdx.y, v0 = blockIdx.z * VB, tid = threadIdx.x, w = tid >> 5;
    const ssm__dl_seq sq = ssm__dl_seq_of(a, n, ws.choff);
    const int nc = (int)((sq.len + C - 1) / C);
    const int VP = ws.VP;
    /* per buffer: Q, K, W [C][LK], U [C][LVB], Aqk [C][LC] (without Q and Aqk when !OUT); gamma [C] */
    constexpr int KO = OUT ? C * LK : 0, WO = KO + C * LK, UO = WO + C * LK, AO = UO + C * LVB;
    constexpr int BUF = OUT ? 3 * C * LK + C * LVB + C * LC : 2 * C * LK + C * LVB;
    E *buf0 = (E *)ssm__dl_smem;
    E *sS = buf0 + NB * BUF, *sVn = sS + KP * LVB, *sVd = sVn + C * LVB;
    float *sgam = (float *)(sVd + C * LVB); /* [NB][C] */

    /* state registers: warp w owns rows sm0.. (SM blocks of 16), cols sn0.. (SNT n8 tiles) */
    const int sm0 = (w / WPR) * 16 * SM, sn0 = (w % WPR) * (VB / WPR);
    float S[SM][SNT][4];
#pragma unroll
    for (int mb = 0; mb < SM; ++mb)
        ssm__dl_each(S[mb], sm0 + 16 * mb, sn0, [&](int r, int col, float &x) {
            x = (a.h0 && r < a.K && v0 + col < a.V)
                    ? ssm__dl_ld(a.h0, a.sdt, n * a.h0s[0] + h * a.h0s[1] + r * a.h0s[2] + (v0 + col) * a.h0s[3]) : 0.f;
            sS[r * LVB + col] = ssm__dl_cv<E>(x);
        });

    /* part 1: the tiles read before the chunk's middle barrier (q, w, u, gates), 2: after it (k, Aqk).
       Single-buffered, the next chunk's first part is loaded once the middle barrier has passed, in
       flight during the state update. */
    auto load = [&](int c, int bsel, int part) {
        if (c < nc) {
            const int64_t ch = (sq.c0 + c) * a.H + h;
            E *b = buf0 + bsel * BUF;
            if (part & 1) {
                if (OUT) ssm__dl_cptile<C, KP>(b, LK, ws.qp + ch * C * KP, KP);
                ssm__dl_cptile<C, KP>(b + WO, LK, ws.w + ch * C * KP, KP);
                ssm__dl_cptile<C, VB>(b + UO, LVB, ws.u + ch * C * VP + v0, VP);
                if (tid < C / 4) ssm__tc_cp16(sgam + bsel * C + tid * 4, ws.gam + ch * C + tid * 4);
            }
            if (part & 2) {
                ssm__dl_cptile<C, KP>(b + KO, LK, ws.kp + ch * C * KP, KP);
                if (OUT) ssm__dl_cptile<C, C>(b + AO, LC, ws.aqk + ch * C * C, C);
            }
        }
        ssm__tc_commit();
    };
    load(0, 0, 3);
    if (NB == 2) load(1, 1, 3);
    const int om0 = (w & 3) * 16, on0 = (w >> 2) * (VB / 2);
    const bool opair = OUT && a.o && a.os[3] == 1 && !((a.os[0] | a.os[1] | a.os[2]) & 1) &&
                       !((uintptr_t)a.o & (2 * sizeof(E) - 1));
    for (int c = 0; c < nc; ++c) {
        const int bsel = c % NB;
        const E *bQ = buf0 + bsel * BUF, *bK = bQ + KO, *bW = bQ + WO, *bU = bQ + UO, *bA = bQ + AO;
        const float *gm = sgam + bsel * C;
        const int64_t ch = (sq.c0 + c) * a.H + h;
        const int len = (int)min((int64_t)C, sq.len - (int64_t)c * C);
        ssm__tc_wait<NB - 1>();
        __syncthreads();
        const float glast = gm[len - 1];
        /* v_new = u - w S and the inter-chunk output q S, same tile of rows/cols per warp */
        float X[ONT][4], O[ONT][4];
        ssm__dl_zero(X), ssm__dl_zero(O);
        if constexpr (OUT) ssm__dl_wmma2<ONT, KP>(X, bW, O, bQ, LK, om0, sS, LVB, on0);
        else ssm__dl_wmma<ONT, KP, false, false>(X, bW, LK, om0, sS, LVB, on0);
        /* column pairs (one load / store per two elements) and the gate factors once per row: the
           pass is a latency chain whose warps mostly wait, so fewer instructions are a shorter chain
           (H200, B1 T32768 H32 D128: state pass 1.63 -> 1.44 ms from the pairs alone) */
        const int r0 = om0 + ((tid & 31) >> 2);
        const float dr[2] = {__expf(glast - gm[r0]), __expf(glast - gm[r0 + 8])};
        ssm__dl_each2h(X, om0, on0, [&](int hh, int i, int j, float x0, float x1) {
            const float2 u = ssm__dl_ld2(bU + i * LVB + j);
            const float n0 = u.x - x0, n1 = u.y - x1;
            if (OUT) ssm__dl_st2(sVn + i * LVB + j, n0, n1);
            ssm__dl_st2(sVd + i * LVB + j, n0 * dr[hh], n1 * dr[hh]);
            if (vn_out) ssm__dl_st2(vn_out + ch * C * VP + i * VP + v0 + j, n0, n1);
        });
        if (OUT) {
            const float sc = a.scale, fr[2] = {sc * __expf(gm[r0]), sc * __expf(gm[r0 + 8])};
#pragma unroll
            for (int j = 0; j < ONT; ++j) O[j][0] *= fr[0], O[j][1] *= fr[0], O[j][2] *= fr[1], O[j][3] *= fr[1];
        }
        if (s_out) /* state at the chunk's start, for the backward */
            ssm__dl_sttile<KP, VB>(s_out + ch * KP * VP + v0, VP, sS, LVB);
        __syncthreads();
        if (NB == 1) load(c + 1, 0, 1);
        /* o += Aqk v_new; S <- exp(glast) S + K^T v_decayed */
        if constexpr (OUT) ssm__dl_wmma<ONT, C, false, false>(O, bA, LC, om0, sVn, LVB, on0);
        const float eg = __expf(glast);
#pragma unroll
        for (int mb = 0; mb < SM; ++mb) {
            ssm__dl_each(S[mb], 0, 0, [&](int, int, float &x) { x *= eg; });
            ssm__dl_wmma<SNT, C, true, false>(S[mb], bK, LK, sm0 + 16 * mb, sVd, LVB, sn0);
            ssm__dl_each2(S[mb], sm0 + 16 * mb, sn0, [&](int r, int col, float x0, float x1) { ssm__dl_st2(sS + r * LVB + col, x0, x1); });
        }
        if (OUT && a.o) { /* column pairs where o's rows allow them */
            const ssm__dl_rows orow = ssm__dl_tokrows(a, sq.t0 + (int64_t)c * C);
            const int64_t ob = sq.b * a.os[0] + h * a.os[2];
            const int ro[2] = {r0 < len ? orow(r0) : -1, r0 + 8 < len ? orow(r0 + 8) : -1};
            ssm__dl_each2h(O, om0, on0, [&](int hh, int, int j, float x0, float x1) {
                if (ro[hh] < 0) return;
                const int64_t rb = ob + (int64_t)ro[hh] * a.os[1];
                if (opair) {
                    E *p = (E *)a.o + rb + v0 + j;
                    if (v0 + j + 1 < a.V) ssm__dl_st2(p, x0, x1);
                    else if (v0 + j < a.V) *p = ssm__dl_cv<E>(x0);
                } else {
                    if (v0 + j < a.V) ssm__dl_st(a.o, a.dt, rb + (v0 + j) * a.os[3], x0);
                    if (v0 + j + 1 < a.V) ssm__dl_st(a.o, a.dt, rb + (v0 + j + 1) * a.os[3], x1);
                }
            });
        }
        __syncthreads();
        load(c + NB, bsel, NB == 1 ? 2 : 3);
    }
    if (a.hT)
#pragma unroll
        for (int mb = 0; mb < SM; ++mb)
            ssm__dl_each(S[mb], sm0 + 16 * mb, sn0, [&](int r, int col, float &x) {
                if (r < a.K && v0 + col < a.V)
                    ssm__dl_st(a.hT, a.sdt, n * a.hTs[0] + h * a.hTs[1] + r * a.hTs[2] + (v0 + col) * a.hTs[3], x);
            });
}
template <class E, int KP, int VB, int NB, bool OUT = true> static size_t ssm__dl_fwd_smem() {
    constexpr int C = SSM__DL_C, LK = KP + 8, LC = C + 8, LVB = VB + 8;
    return sizeof(E) * (NB * (size_t)(OUT ? 3 * C * LK + C * LVB + C * LC : 2 * C * LK + C * LVB) + (size_t)KP * LVB +
                        2 * (size_t)C * LVB) +
           sizeof(float) * NB * C;
}

/* ---- recurrent form: token by token, f32 state in registers ------------------------------------
   CTA = (sequence, head, 32 columns of V); warp w owns 8 columns, lane owns rows lane + 32 i.
   Also the single-step decode (T = 1, h0 and hT may alias: each CTA reads its block before
   writing it). */
template <int RK>
__global__ void __launch_bounds__(128) ssm__dl_rec_kernel(ssm__dl_args a) {
    const int n = blockIdx.x, h = blockIdx.y, lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const int c0 = blockIdx.z * 32 + w * 8;
    int64_t b, t0, len;
    if (a.cu) b = 0, t0 = a.cu[n], len = a.cu[n + 1] - a.cu[n];
    else b = n, t0 = 0, len = a.T;
    float S[RK][8];
#pragma unroll
    for (int i = 0; i < RK; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            int r = lane + 32 * i, col = c0 + j;
            S[i][j] = (a.h0 && r < a.K && col < a.V)
                          ? ssm__dl_ld(a.h0, a.sdt, n * a.h0s[0] + h * a.h0s[1] + r * a.h0s[2] + col * a.h0s[3]) : 0.f;
        }
    for (int64_t t = t0; t < t0 + len; ++t) {
        const float beta = ssm__dl_ld(a.beta, a.bdt, b * a.bs[0] + t * a.bs[1] + h * a.bs[2]);
        const float al = a.g ? __expf(ssm__dl_ld(a.g, a.gdt, b * a.gs[0] + t * a.gs[1] + h * a.gs[2])) : 1.f;
        float kk[RK], qq[RK], vv[8], kS[8];
#pragma unroll
        for (int i = 0; i < RK; ++i) {
            int r = lane + 32 * i;
            kk[i] = r < a.K ? ssm__dl_ld(a.k, a.dt, b * a.ks[0] + t * a.ks[1] + h * a.ks[2] + r * a.ks[3]) : 0.f;
            qq[i] = r < a.K ? ssm__dl_ld(a.q, a.dt, b * a.qs[0] + t * a.qs[1] + h * a.qs[2] + r * a.qs[3]) : 0.f;
        }
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            vv[j] = c0 + j < a.V ? ssm__dl_ld(a.v, a.dt, b * a.vs[0] + t * a.vs[1] + h * a.vs[2] + (c0 + j) * a.vs[3]) : 0.f;
            float s = 0.f;
#pragma unroll
            for (int i = 0; i < RK; ++i) S[i][j] *= al, s += kk[i] * S[i][j];
            kS[j] = s;
        }
#pragma unroll
        for (int o = 16; o; o >>= 1)
#pragma unroll
            for (int j = 0; j < 8; ++j) kS[j] += __shfl_xor_sync(0xffffffffu, kS[j], o);
        float os[8];
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            float vn = beta * (vv[j] - kS[j]), s = 0.f;
#pragma unroll
            for (int i = 0; i < RK; ++i) S[i][j] += kk[i] * vn, s += qq[i] * S[i][j];
            os[j] = s;
        }
#pragma unroll
        for (int o = 16; o; o >>= 1)
#pragma unroll
            for (int j = 0; j < 8; ++j) os[j] += __shfl_xor_sync(0xffffffffu, os[j], o);
        if (lane < 8) {
            float x = os[0];
#pragma unroll
            for (int j = 1; j < 8; ++j) x = lane == j ? os[j] : x;
            if (c0 + lane < a.V) ssm__dl_st(a.o, a.dt, b * a.os[0] + t * a.os[1] + h * a.os[2] + (c0 + lane) * a.os[3], x * a.scale);
        }
    }
    if (a.hT)
#pragma unroll
        for (int i = 0; i < RK; ++i)
#pragma unroll
            for (int j = 0; j < 8; ++j) {
                int r = lane + 32 * i, col = c0 + j;
                if (r < a.K && col < a.V)
                    ssm__dl_st(a.hT, a.sdt, n * a.hTs[0] + h * a.hTs[1] + r * a.hTs[2] + col * a.hTs[3], S[i][j]);
            }
}

/* ---- backward, inter-chunk pass: one CTA per (sequence, head, VB columns), chunks in reverse ---
   dS is the gradient at the chunk's end (starts as dsT). Per chunk:
     dv_new = Aqk^T dout + exp(g_last - g) K dS               (stored, and dS stored, for the chunk pass)
     dS    <- exp(g_last) dS + Q^T (scale exp(g) dout) - W^T dv_new
   The gradient at the first chunk's start is ds0. Same tiling as the forward pass. */
template <class E, int KP, int VB, int NB>
__global__ void __launch_bounds__(SSM__DL_NT) ssm__dl_bwd_seq_kernel(ssm__dl_args a, ssm__dl_ws<E> ws) {
    constexpr int C = SSM__DL_C, LK = KP + 8, LC = C + 8, LVB = VB + 8;
    constexpr int ONT = VB / 16;
    constexpr int RB = KP / 16, WPR = RB >= 8 ? 1 : 8 / RB, SM = RB >= 8 ? RB / 8 : 1, SNT = VB / (8 * WPR);
    extern __shared__ __align__(16) unsigned char ssm__dl_smem[];
    const int n = blockIdx.x, h = blockIdx.y, v0 = blockIdx.z * VB, tid = threadIdx.x, w = tid >> 5;
    const ssm__dl_seq sq = ssm__dl_seq_of(a, n, ws.choff);
    const int nc = (int)((sq.len + C - 1) / C);
    const int VP = ws.VP;
    constexpr int BUF = 3 * C * LK + C * LVB + C * LC;
    E *buf0 = (E *)ssm__dl_smem;
    E *sS = buf0 + NB * BUF, *sdOg = sS + KP * LVB, *snVn = sdOg + C * LVB;
    float *sgam = (float *)(snVn + C * LVB);
    const int sm0 = (w / WPR) * 16 * SM, sn0 = (w % WPR) * (VB / WPR);
    float S[SM][SNT][4];
#pragma unroll
    for (int mb = 0; mb < SM; ++mb)
        ssm__dl_each(S[mb], sm0 + 16 * mb, sn0, [&](int r, int col, float &x) {
            x = (a.dhT && r < a.K && v0 + col < a.V)
                    ? ssm__dl_ld(a.dhT, a.sdt, n * a.dhTs[0] + h * a.dhTs[1] + r * a.dhTs[2] + (v0 + col) * a.dhTs[3]) : 0.f;
            sS[r * LVB + col] = ssm__dl_cv<E>(x);
        });
    /* part 1: the tiles read before the chunk's middle barrier (k, dout, Aqk, gates), 2: after it (q,
       w); single-buffered, part 1 of the next chunk is in flight during the state update */
    auto load = [&](int c, int bsel, int part) {
        if (c >= 0) {
            const int64_t ch = (sq.c0 + c) * a.H + h;
            E *b = buf0 + bsel * BUF;
            if (part & 2) {
                ssm__dl_cptile<C, KP>(b, LK, ws.qp + ch * C * KP, KP);
                ssm__dl_cptile<C, KP>(b + 2 * C * LK, LK, ws.w + ch * C * KP, KP);
            }
            if (part & 1) {
                ssm__dl_cptile<C, KP>(b + C * LK, LK, ws.kp + ch * C * KP, KP);
                ssm__dl_ld_dout<VB>(b + 3 * C * LK, LVB, a, ws, ch, sq.b, sq.t0 + (int64_t)c * C, h,
                                    (int)min((int64_t)C, sq.len - (int64_t)c * C), v0);
                ssm__dl_cptile<C, C>(b + 3 * C * LK + C * LVB, LC, ws.aqk + ch * C * C, C);
                if (tid < C / 4) ssm__tc_cp16(sgam + bsel * C + tid * 4, ws.gam + ch * C + tid * 4);
            }
        }
        ssm__tc_commit();
    };
    load(nc - 1, 0, 3);
    if (NB == 2) load(nc - 2, 1, 3);
    const int om0 = (w & 3) * 16, on0 = (w >> 2) * (VB / 2);
    for (int it = 0; it < nc; ++it) {
        const int c = nc - 1 - it, bsel = it % NB;
        const E *bQ = buf0 + bsel * BUF, *bK = bQ + C * LK, *bW = bK + C * LK, *bO = bW + C * LK, *bA = bO + C * LVB;
        const float *gm = sgam + bsel * C;
        const int64_t ch = (sq.c0 + c) * a.H + h;
        const int len = (int)min((int64_t)C, sq.len - (int64_t)c * C);
        ssm__tc_wait<NB - 1>();
        __syncthreads();
        const float glast = gm[len - 1], sc = a.scale;
        { /* 16 bytes per access, the gate factor once per access */
            constexpr int U = 16 / sizeof(E), UR = VB / U;
            for (int idx = tid; idx < C * UR; idx += blockDim.x) {
                const int i = idx / UR, j = (idx % UR) * U;
                union {
                    uint4 u;
                    E e[U];
                } x;
                x.u = *(const uint4 *)(bO + i * LVB + j);
                const float f = sc * __expf(gm[i]);
#pragma unroll
                for (int e = 0; e < U; ++e) x.e[e] = ssm__dl_cv<E>(f * ssm__dl_f(x.e[e]));
                *(uint4 *)(sdOg + i * LVB + j) = x.u;
            }
        }
        ssm__dl_sttile<KP, VB>(ws.ds1 + ch * KP * VP + v0, VP, sS, LVB); /* dS at this chunk's end */
        float X[ONT][4], Y[ONT][4];
        ssm__dl_zero(X), ssm__dl_zero(Y);
        ssm__dl_wmma<ONT, C, true, false>(X, bA, LC, om0, bO, LVB, on0);
        ssm__dl_wmma<ONT, KP, false, false>(Y, bK, LK, om0, sS, LVB, on0);
        float *yy = &Y[0][0];
        int e = 0;
        const int r0 = om0 + ((tid & 31) >> 2);
        const float dr[2] = {__expf(glast - gm[r0]), __expf(glast - gm[r0 + 8])};
        ssm__dl_each2h(X, om0, on0, [&](int hh, int i, int j, float x0, float x1) { /* column pairs, as forward */
            const float d0 = x0 + dr[hh] * yy[e], d1 = x1 + dr[hh] * yy[e + 1];
            e += 2;
            ssm__dl_st2(snVn + i * LVB + j, -d0, -d1);
            ssm__dl_st2(ws.dvn + ch * C * VP + i * VP + v0 + j, d0, d1);
        });
        __syncthreads();
        if (NB == 1) load(c - 1, 0, 1);
        const float eg = __expf(glast);
#pragma unroll
        for (int mb = 0; mb < SM; ++mb) {
            ssm__dl_each(S[mb], 0, 0, [&](int, int, float &x) { x *= eg; });
            ssm__dl_wmma<SNT, C, true, false>(S[mb], bQ, LK, sm0 + 16 * mb, sdOg, LVB, sn0);
            ssm__dl_wmma<SNT, C, true, false>(S[mb], bW, LK, sm0 + 16 * mb, snVn, LVB, sn0);
            ssm__dl_each2(S[mb], sm0 + 16 * mb, sn0, [&](int r, int col, float x0, float x1) { ssm__dl_st2(sS + r * LVB + col, x0, x1); });
        }
        __syncthreads();
        load(c - NB, bsel, NB == 1 ? 2 : 3);
    }
    if (a.dh0)
#pragma unroll
        for (int mb = 0; mb < SM; ++mb)
            ssm__dl_each(S[mb], sm0 + 16 * mb, sn0, [&](int r, int col, float &x) {
                if (r < a.K && v0 + col < a.V)
                    ssm__dl_st(a.dh0, a.sdt, n * a.dh0s[0] + h * a.dh0s[1] + r * a.dh0s[2] + (v0 + col) * a.dh0s[3], x);
            });
}

/* Row sums of a warp's accumulator tile (rows g and g+8 of each lane), reduced over the 4 lanes
   of a row; lane t == 0 stores them to buf[row] (each row of a tile has one writer). */
template <int NT, class F>
__device__ __forceinline__ void ssm__dl_rowsum(float (&acc)[NT][4], int m0, int n0, float *buf, F f) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    float s0 = 0.f, s1 = 0.f;
#pragma unroll
    for (int j = 0; j < NT; ++j) {
        int n = n0 + 8 * j + 2 * t;
        s0 += f(m0 + g, n, acc[j][0]) + f(m0 + g, n + 1, acc[j][1]);
        s1 += f(m0 + g + 8, n, acc[j][2]) + f(m0 + g + 8, n + 1, acc[j][3]);
    }
    s0 += __shfl_xor_sync(0xffffffffu, s0, 1), s1 += __shfl_xor_sync(0xffffffffu, s1, 1);
    s0 += __shfl_xor_sync(0xffffffffu, s0, 2), s1 += __shfl_xor_sync(0xffffffffu, s1, 2);
    if (t == 0) buf[m0 + g] = s0, buf[m0 + g + 8] = s1;
}

/* ---- backward, per chunk: one CTA per (chunk, head), all in parallel -------------------------------
   From dv_new, dS (chunk end), S (chunk start), v_new and the chunk's T:
     dq = scale e^g dout S^T + D K,   D = scale tril(dout v_new^T) * exp(g_i - g_j)
     dk = D^T Q + e^{gl-g} v_new dS^T + beta e^g T^T dW + Eb K + Eb^T K,   dW = -dv_new S^T
     dv = beta T^T dv_new,   dT = (dW K^T e^g + dv_new V^T) diag(beta),   dA = -T^T dT T^T,
     Eb = diag(beta) (dA * exp(g_i - g_j)) (strictly lower); dbeta, dg from the same terms.
   Phase A reduces over V (dW, dout v_new^T, dv_new V^T, dv); phase B over V again per KPC columns
   of K (dq, dk; ssm__dl_bwc_kpc). Row sums go through per-warp slots summed in a fixed order: deterministic. */
template <class E, int KP> __host__ __device__ constexpr int ssm__dl_bwc_tiles() { /* bytes of the V-loop tiles */
    return (int)sizeof(E) * (4 * SSM__DL_C * 40 + KP * 40);
}
template <class E, int KP> __host__ __device__ constexpr int ssm__dl_bwc_region() { /* ... or of sY and sAf over them */
    return ssm__dl_bwc_tiles<E, KP>() > (int)sizeof(E) * SSM__DL_C * (SSM__DL_C + 8) + 4 * SSM__DL_C * (SSM__DL_C + 1)
               ? ssm__dl_bwc_tiles<E, KP>()
               : (int)sizeof(E) * SSM__DL_C * (SSM__DL_C + 8) + 4 * SSM__DL_C * (SSM__DL_C + 1);
}
template <class E, int KP> __host__ __device__ constexpr int ssm__dl_bwc_smem() {
    return (int)sizeof(E) * (3 * SSM__DL_C * (KP + 8) + 3 * SSM__DL_C * (SSM__DL_C + 8)) + ssm__dl_bwc_region<E, KP>() +
           4 * (13 * SSM__DL_C + 16);
}
/* CTAs per SM the kernel is compiled for (registers capped to match): as many as the shared memory
   lets in, up to 3 (16-bit K = 128 fits 2 at 113 KB; one CTA of 8 warps left the SM waiting on the
   chain of syncs). */
template <class E, int KP> __host__ __device__ constexpr int ssm__dl_bwc_min() {
    return ssm__dl_ctas_fit((size_t)ssm__dl_bwc_smem<E, KP>(), 3);
}
/* Phase B's key block: all of K up to 128 in one pass over V for 16-bit inputs (at K = 128 half the
   V-loop steps and one read of dout and v_new instead of two), else 64 columns at a time (the
   f32 scalar products and K = 256 would not fit the registers); variant bit 4 forces 64. */
template <class E, int KP> __host__ __device__ constexpr int ssm__dl_bwc_kpc() {
    return KP < 64 ? KP : (sizeof(E) == 2 && KP == 128) ? 128 : 64;
}
template <class E, int KP, int KPC>
__global__ void __launch_bounds__(SSM__DL_NT, (ssm__dl_bwc_min<E, KP>())) ssm__dl_bwd_chunk_kernel(ssm__dl_args a, ssm__dl_ws<E> ws) {
    constexpr int C = SSM__DL_C, LK = KP + 8, LC = C + 8, VW = 32, LW = VW + 8;
    constexpr int WNT = KP / 16, PNT = KPC / 16; /* n8 tiles: dW (16 x KP/2), phase B (16 x KPC/2) */
    static_assert(KPC <= KP && KP % KPC == 0 && 2 * C + 2 * KPC <= 4 * C + KP &&
                      ssm__dl_bwc_tiles<E, KP>() == (int)sizeof(E) * (4 * C + KP) * LW, "tile layout");
    extern __shared__ __align__(16) unsigned char ssm__dl_smem[];
    const int64_t gc = blockIdx.x;
    const int h = blockIdx.y, tid = threadIdx.x, w = tid >> 5, lane = tid & 31;
    int64_t c;
    const int n = ssm__dl_find(a, gc, ws.choff, &c);
    if (n < 0) return;
    const ssm__dl_seq sq = ssm__dl_seq_of(a, n, ws.choff);
    const int64_t t0 = sq.t0 + c * C, ch = gc * a.H + h;
    const int len = (int)min((int64_t)C, sq.len - c * C), VP = ws.VP;
    E *sK = (E *)ssm__dl_smem, *sQ = sK + C * LK, *sdW = sQ + C * LK, *sT = sdW + C * LK, *sD = sT + C * LC;
    /* The V-loop tiles; between the two loops sY = T^T dT and the f32 sAf live over them, and
       phase B's dS tile over phase A's dv_new and v tiles: 113 KB instead of 135 at K = 128. */
    E *sX = sD + C * LC, *tO = sX + C * LC, *tVn = tO + C * LW, *tdVn = tVn + C * LW, *tV = tdVn + C * LW;
    E *sY = tO, *tSa = tV + C * LW, *tSb = tdVn;
    float *sAf = (float *)(tO + C * LC);
    float *sb = (float *)((unsigned char *)tO + ssm__dl_bwc_region<E, KP>()), *sg = sb + C, *seg = sg + C;
    float *dbeta = seg + C, *dgam = dbeta + C, *rb = dgam + C; /* rb: [4 quantities][2 column groups][C] */
    float *red = rb + 8 * C;                                 /* [8] */
    const int om0 = (w & 3) * 16, cg = w >> 2;

    /* Phase A's V tiles double-buffered where the Q and dW tiles (contiguous, unused until phase A
       ends: Q is loaded after it) hold a second set: K >= 128 */
    constexpr bool DBA = 2 * C * LK >= (4 * C + KP) * LW;
    if (!DBA) ssm__dl_cptile<C, KP>(sQ, LK, ws.qp + ch * C * KP, KP);
    ssm__dl_cptile<C, KP>(sK, LK, ws.kp + ch * C * KP, KP);
    ssm__dl_cptile<C, C>(sT, LC, ws.tm + ch * C * C, C);
    ssm__tc_commit();
    for (int i = tid; i < C; i += blockDim.x) {
        sb[i] = i < len ? ssm__dl_ld(a.beta, a.bdt, sq.b * a.bs[0] + (t0 + i) * a.bs[1] + h * a.bs[2]) : 0.f;
        sg[i] = ws.gam[ch * C + i];
        seg[i] = __expf(sg[i]);
        dbeta[i] = 0.f, dgam[i] = 0.f;
    }
    ssm__tc_wait<0>();
    __syncthreads();
    const float glast = sg[len - 1], scale = a.scale;

    /* ---- phase A: reductions over V ---- */
    float P1[4][4], P2[4][4], dWm[WNT][4], dvb_acc = 0.f;
    float dvrow0 = 0.f, dvrow1 = 0.f; /* v . dVb partial sums of rows g, g+8 of this lane's dv tile */
    ssm__dl_zero(P1), ssm__dl_zero(P2), ssm__dl_zero(dWm);
    (void)dvb_acc;
    const int64_t vbase = sq.b * a.vs[0] + t0 * a.vs[1] + h * a.vs[2];
    /* a set of phase A's tiles at b: dout, v_new, dv_new, v, S (C, C, C, C, KP rows of VW) */
    const auto load_a = [&](int vb, E *b) {
        ssm__dl_ld_dout<VW>(b, LW, a, ws, ch, sq.b, t0, h, len, vb);
        ssm__dl_cptile<C, VW>(b + C * LW, LW, ws.vn + ch * C * VP + vb, VP);
        ssm__dl_cptile<C, VW>(b + 2 * C * LW, LW, ws.dvn + ch * C * VP + vb, VP);
        ssm__dl_cptile<KP, VW>(b + 4 * C * LW, LW, ws.s0 + ch * KP * VP + vb, VP);
        if (a.vec) ssm__dl_cprows(b + 3 * C * LW, LW, C, VW, (const E *)a.v + vbase + vb, a.vs[1], len, a.V - vb);
        ssm__tc_commit();
        if (!a.vec)
            ssm__dl_stage(b + 3 * C * LW, LW, C, VW, a.v, a.dt, vbase + vb * a.vs[3], a.vs[1], a.vs[3], len, a.V - vb,
                          [](int) { return 1.f; });
    };
    if (DBA) load_a(0, tO);
    for (int vb = 0, it = 0; vb < VP; vb += VW, ++it) {
        E *const b = DBA && (it & 1) ? sQ : tO;
        __syncthreads();
        if (!DBA) {
            load_a(vb, b);
            ssm__tc_wait<0>();
        } else {
            if (vb + VW < VP) load_a(vb + VW, (it & 1) ? tO : sQ);
            else ssm__tc_commit();
            ssm__tc_wait<1>();
        }
        __syncthreads();
        const E *bO = b, *bVn = b + C * LW, *bdVn = b + 2 * C * LW, *bV = b + 3 * C * LW, *bSa = b + 4 * C * LW;
        ssm__dl_wmma<4, VW, false, true>(P1, bO, LW, om0, bVn, LW, cg * 32);
        ssm__dl_wmma<4, VW, false, true>(P2, bdVn, LW, om0, bV, LW, cg * 32);
        ssm__dl_wmma<WNT, VW, false, true>(dWm, bdVn, LW, om0, bSa, LW, cg * (KP / 2));
        float dvb[2][4];
        ssm__dl_zero(dvb);
        ssm__dl_wmma<2, C, true, false>(dvb, sT, LC, om0, bdVn, LW, cg * 16);
        {
            const int g = lane >> 2, t = lane & 3;
#pragma unroll
            for (int j = 0; j < 2; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int i = om0 + g + (e >> 1) * 8, col = cg * 16 + 8 * j + 2 * t + (e & 1);
                    const float x = dvb[j][e];
                    const float vv = ssm__dl_f(bV[i * LW + col]);
                    if (e >> 1) dvrow1 += vv * x;
                    else dvrow0 += vv * x;
                }
            if (a.dv)
                ssm__dl_each2(dvb, om0, cg * 16, [&](int i, int col, float x0, float x1) {
                    if (i < len)
                        ssm__dl_st_pair(a.dv, a.dt, a.pairs,
                                        sq.b * a.dvs[0] + (t0 + i) * a.dvs[1] + h * a.dvs[2] + (vb + col) * a.dvs[3],
                                        a.dvs[3], vb + col, a.V, sb[i] * x0, sb[i] * x1);
                });
        }
    }
    if (DBA) { /* every read of the second tile set (over Q and dW) done; Q's tile in flight through the middle */
        __syncthreads();
        ssm__dl_cptile<C, KP>(sQ, LK, ws.qp + ch * C * KP, KP);
        ssm__tc_commit();
    }
    dvrow0 += __shfl_xor_sync(0xffffffffu, dvrow0, 1), dvrow1 += __shfl_xor_sync(0xffffffffu, dvrow1, 1);
    dvrow0 += __shfl_xor_sync(0xffffffffu, dvrow0, 2), dvrow1 += __shfl_xor_sync(0xffffffffu, dvrow1, 2);
    if ((lane & 3) == 0) rb[cg * C + om0 + (lane >> 2)] = dvrow0, rb[cg * C + om0 + (lane >> 2) + 8] = dvrow1;
    /* dW = -dv_new S^T; D = scale tril(dout v_new^T) Gamma */
    /* (the tiles here and below go to shared memory by column pairs: fewer store instructions) */
    ssm__dl_each2(dWm, om0, cg * (KP / 2), [&](int i, int j, float x0, float x1) { ssm__dl_st2(sdW + i * LK + j, -x0, -x1); });
    ssm__dl_each2(P1, om0, cg * 32, [&](int i, int j, float x0, float x1) {
        ssm__dl_st2(sD + i * LC + j, i >= j ? scale * x0 * __expf(sg[i] - sg[j]) : 0.f,
                    i >= j + 1 ? scale * x1 * __expf(sg[i] - sg[j + 1]) : 0.f);
    });
    __syncthreads();
    for (int i = tid; i < C; i += blockDim.x) dbeta[i] += rb[i] + rb[C + i]; /* v . dVb */
    /* Gamma * K K^T, strictly lower (A without beta), over the dead V-loop tiles */
    ssm__dl_gemm<C, C, KP, false, true>(sK, LK, sK, LK, [&](int i, int j, float x) {
        sAf[i * (C + 1) + j] = i > j ? x * __expf(sg[i] - sg[j]) : 0.f;
    });
    {   /* dT = (P2 + e^g_j dW K^T) diag(beta) */
        float Z[4][4];
        ssm__dl_zero(Z);
        ssm__dl_wmma<4, KP, false, true>(Z, sdW, LK, om0, sK, LK, cg * 32);
        float *zz = &Z[0][0];
        int e = 0;
        ssm__dl_each2(P2, om0, cg * 32, [&](int i, int j, float x0, float x1) {
            ssm__dl_st2(sX + i * LC + j, sb[j] * (x0 + seg[j] * zz[e]), sb[j + 1] * (x1 + seg[j + 1] * zz[e + 1]));
            e += 2;
        });
    }
    __syncthreads();
    ssm__dl_gemm2<C, C, C, true, false>(sT, LC, sX, LC, [&](int i, int j, float x0, float x1) { ssm__dl_st2(sY + i * LC + j, x0, x1); });
    __syncthreads();
    /* dA = -(T^T dT) T^T, strictly lower: M = dA * (Gamma K K^T) into sAf, Eb into sX */
    ssm__dl_gemm2<C, C, C, false, true>(sY, LC, sT, LC, [&](int i, int j, float x0, float x1) {
        const float dA0 = i > j ? -x0 : 0.f, dA1 = i > j + 1 ? -x1 : 0.f;
        sAf[i * (C + 1) + j] *= dA0, sAf[i * (C + 1) + j + 1] *= dA1;
        ssm__dl_st2(sX + i * LC + j, sb[i] * dA0 * (i > j ? __expf(sg[i] - sg[j]) : 0.f),
                    sb[i] * dA1 * (i > j + 1 ? __expf(sg[i] - sg[j + 1]) : 0.f));
    });
    __syncthreads();
    { /* row sums of M (dbeta_i, +beta_i to dg_i) and column sums of diag(beta) M (- to dg_j): thread
         (p, r) sums 16 of row r and 16 of column r (p = tid / C), partials summed in order of p */
        static_assert(SSM__DL_NT == 4 * C, "4 partial sums per row and column");
        const int r = tid & (C - 1), p = tid / C;
        float sr = 0.f, sc = 0.f;
#pragma unroll
        for (int e = 0; e < C / 4; ++e) {
            const int j = p * (C / 4) + e;
            sr += sAf[r * (C + 1) + j], sc += sb[j] * sAf[j * (C + 1) + r];
        }
        rb[p * C + r] = sr, rb[(4 + p) * C + r] = sc;
    }
    __syncthreads();
    for (int i = tid; i < C; i += blockDim.x) {
        const float s = ((rb[i] + rb[C + i]) + rb[2 * C + i]) + rb[3 * C + i];
        dbeta[i] += s, dgam[i] += sb[i] * s;
        dgam[i] -= ((rb[4 * C + i] + rb[5 * C + i]) + rb[6 * C + i]) + rb[7 * C + i];
    }

    /* ---- phase B: per KPC columns of K, reductions over V again, then dq and dk ---- */
    float sds = 0.f; /* <S, dS> partial (gated: the chunk-level gate gradient) */
    float qdq = 0.f;
    (void)qdq;
    for (int k0 = 0; k0 < KP; k0 += KPC) {
        float Aq[PNT][4], Ak[PNT][4], Ax[PNT][4];
        ssm__dl_zero(Aq), ssm__dl_zero(Ak);
        for (int vb = 0; vb < VP; vb += VW) {
            __syncthreads();
            ssm__dl_ld_dout<VW>(tO, LW, a, ws, ch, sq.b, t0, h, len, vb);
            ssm__dl_cptile<C, VW>(tVn, LW, ws.vn + ch * C * VP + vb, VP);
            ssm__dl_cptile<KPC, VW>(tSa, LW, ws.s0 + ch * KP * VP + (int64_t)k0 * VP + vb, VP);
            ssm__dl_cptile<KPC, VW>(tSb, LW, ws.ds1 + ch * KP * VP + (int64_t)k0 * VP + vb, VP);
            ssm__tc_commit();
            ssm__tc_wait<0>();
            __syncthreads();
            ssm__dl_wmma<PNT, VW, false, true>(Aq, tO, LW, om0, tSa, LW, cg * (KPC / 2));
            ssm__dl_wmma<PNT, VW, false, true>(Ak, tVn, LW, om0, tSb, LW, cg * (KPC / 2));
            if (a.g)
                for (int idx = tid; idx < KPC * VW; idx += blockDim.x) {
                    int r = idx / VW, j = idx % VW;
                    sds += ssm__dl_f(tSa[r * LW + j]) * ssm__dl_f(tSb[r * LW + j]);
                }
        }
        const int n0 = cg * (KPC / 2);
        /* dq = scale e^g (dout S^T) + D K */
        ssm__dl_each(Aq, om0, n0, [&](int i, int, float &x) { x *= scale * seg[i]; });
        ssm__dl_wmma<PNT, C, false, false>(Aq, sD, LC, om0, sK + k0, LK, n0);
        ssm__dl_rowsum(Aq, om0, n0, rb + 0 * 2 * C + cg * C, [&](int i, int j, float x) { return x * ssm__dl_f(sQ[i * LK + k0 + j]); });
        if (a.dq) {
            const int rg = om0 + (lane >> 2);
            const int rq[2] = {rg < len ? ssm__dl_tokrows(a, t0)(rg) : -1, rg + 8 < len ? ssm__dl_tokrows(a, t0)(rg + 8) : -1};
            ssm__dl_each2h(Aq, om0, n0, [&](int hh, int, int j, float x0, float x1) {
                if (rq[hh] >= 0)
                    ssm__dl_st_pair(a.dq, a.dt, a.pairs,
                                    sq.b * a.dqs[0] + (int64_t)rq[hh] * a.dqs[1] + h * a.dqs[2] + (k0 + j) * a.dqs[3],
                                    a.dqs[3], k0 + j, a.K, x0, x1);
            });
        }
        /* dk: e^{gl-g} v_new dS^T, then D^T Q, beta e^g T^T dW, Eb K + Eb^T K */
        ssm__dl_each(Ak, om0, n0, [&](int i, int, float &x) { x *= __expf(glast - sg[i]); });
        ssm__dl_rowsum(Ak, om0, n0, rb + 1 * 2 * C + cg * C, [&](int i, int j, float x) { return x * ssm__dl_f(sK[i * LK + k0 + j]); });
        ssm__dl_zero(Ax);
        ssm__dl_wmma<PNT, C, true, false>(Ax, sD, LC, om0, sQ + k0, LK, n0);
        ssm__dl_rowsum(Ax, om0, n0, rb + 2 * 2 * C + cg * C, [&](int i, int j, float x) { return x * ssm__dl_f(sK[i * LK + k0 + j]); });
        ssm__dl_each(Ak, om0, n0, [&](int, int, float &x) { x += 0.f; });
        {
            float *ax = &Ax[0][0];
            int e = 0;
            ssm__dl_each(Ak, om0, n0, [&](int, int, float &x) { x += ax[e++]; });
        }
        ssm__dl_zero(Ax);
        ssm__dl_wmma<PNT, C, true, false>(Ax, sT, LC, om0, sdW + k0, LK, n0);
        ssm__dl_rowsum(Ax, om0, n0, rb + 3 * 2 * C + cg * C, [&](int i, int j, float x) { return x * ssm__dl_f(sK[i * LK + k0 + j]); });
        {
            float *ax = &Ax[0][0];
            int e = 0;
            ssm__dl_each(Ak, om0, n0, [&](int i, int, float &x) { x += sb[i] * seg[i] * ax[e++]; });
        }
        ssm__dl_wmma<PNT, C, false, false>(Ak, sX, LC, om0, sK + k0, LK, n0);
        ssm__dl_wmma<PNT, C, true, false>(Ak, sX, LC, om0, sK + k0, LK, n0);
        if (a.dk)
            ssm__dl_each2(Ak, om0, n0, [&](int i, int j, float x0, float x1) {
                if (i < len)
                    ssm__dl_st_pair(a.dk, a.dt, a.pairs,
                                    sq.b * a.dks[0] + (t0 + i) * a.dks[1] + h * a.dks[2] + (k0 + j) * a.dks[3], a.dks[3],
                                    k0 + j, a.K, x0, x1);
            });
        __syncthreads();
        for (int i = tid; i < C; i += blockDim.x) {
            const float qd = rb[i] + rb[C + i], ks = rb[2 * C + i] + rb[3 * C + i], kd = rb[4 * C + i] + rb[5 * C + i];
            const float kg = rb[6 * C + i] + rb[7 * C + i];
            dgam[i] += qd - ks - kd + sb[i] * seg[i] * kg;
            dbeta[i] += seg[i] * kg;
            if (i == 0) red[0] = k0 == 0 ? 0.f : red[0];
        }
        __syncthreads();
        if (w == 0) { /* sum_i k_i . dK_S1_i: the chunk-level gate term (fixed order: lane pairs, then a butterfly) */
            static_assert(C == 64, "two rows a lane");
            float s = (rb[2 * C + 2 * lane] + rb[3 * C + 2 * lane]) + (rb[2 * C + 2 * lane + 1] + rb[3 * C + 2 * lane + 1]);
#pragma unroll
            for (int o = 16; o; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
            if (lane == 0) red[1] = (k0 == 0 ? 0.f : red[1]) + s;
        }
    }
    /* <S, dS> over the block, in a fixed order */
    for (int o = 16; o; o >>= 1) sds += __shfl_xor_sync(0xffffffffu, sds, o);
    __syncthreads();
    if (lane == 0) red[2 + w] = sds;
    __syncthreads();
    if (w == 0) { /* dg_s = sum_{i >= s} dgamma_i: lane l holds rows 2l, 2l + 1, a suffix scan over the lanes */
        float s = 0.f;
        for (int i = 0; i < SSM__DL_NT / 32; ++i) s += red[2 + i];
        const float tail = __expf(glast) * s + red[1];
        const int i0 = 2 * lane, i1 = i0 + 1;
        const float d0 = i0 < len ? dgam[i0] + (i0 == len - 1 ? tail : 0.f) : 0.f;
        const float d1 = i1 < len ? dgam[i1] + (i1 == len - 1 ? tail : 0.f) : 0.f;
        float x = d0 + d1; /* inclusive suffix sum of the lane pairs */
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const float y = __shfl_down_sync(0xffffffffu, x, o);
            if (lane + o < 32) x += y;
        }
        float ex = __shfl_down_sync(0xffffffffu, x, 1); /* the lanes above */
        if (lane == 31) ex = 0.f;
        const float a1 = ex + d1, a0 = a1 + d0;
        const ssm__dl_rows grow = ssm__dl_gaterows(a, t0);
        const int r0 = i0 < len ? grow(i0) : -1, r1 = i1 < len ? grow(i1) : -1;
        if (a.dg) {
            if (r0 >= 0) ssm__dl_st(a.dg, a.gdt, sq.b * a.dgs[0] + (int64_t)r0 * a.dgs[1] + h * a.dgs[2], a0);
            if (r1 >= 0) ssm__dl_st(a.dg, a.gdt, sq.b * a.dgs[0] + (int64_t)r1 * a.dgs[1] + h * a.dgs[2], a1);
        }
    }
    if (a.dbeta)
        for (int i = tid; i < len; i += blockDim.x)
            ssm__dl_st(a.dbeta, a.bdt, sq.b * a.dbs[0] + (t0 + i) * a.dbs[1] + h * a.dbs[2], dbeta[i]);
}
template <class E, int KP> static size_t ssm__dl_bwd_chunk_smem() { return (size_t)ssm__dl_bwc_smem<E, KP>(); }

/* ---- decode step (T = 1): one CTA per (sequence, head, 64 columns of V), 256 threads ---------
   Thread (r, c4): rows r, r+16, ... and columns 4 c4 .. 4 c4 + 3, so a warp reads 2 rows x 256
   contiguous bytes of the state. The state is read once and written once, in place allowed, and
   both column sums meet in shared memory once: k^T S and q^T S come from the same pass, since
   q^T S' = alpha q^T S + (q.k) v_new. The state stays in registers as stored (SE: 16-bit states
   take half the registers, though the kernel still compiles to 63). Each CTA is a latency
   chain: load, one reduction, store. H200, B64 H16 K = V = 128 bf16 (ncu, locked clocks): the
   earlier two-reduction form 44.7 us, this one 39.0 us, 22% of DRAM bandwidth, 4 CTAs an SM by
   registers; capped at 40 registers for 6 CTAs (__launch_bounds__(256, 6)) it spilled and ran
   48.2 us. The next step is a persistent kernel with the state tiles' loads pipelined. */
template <class SE> struct ssm__dl_quad { uint2 u; }; /* four 16-bit state elements */
template <> struct ssm__dl_quad<float> { float4 u; };
template <class SE> __device__ __forceinline__ void ssm__dl_unquad(const ssm__dl_quad<SE> &x, float (&f)[4]) {
    const SE *e = (const SE *)&x.u;
    f[0] = ssm__dl_f(e[0]), f[1] = ssm__dl_f(e[1]), f[2] = ssm__dl_f(e[2]), f[3] = ssm__dl_f(e[3]);
}
template <> __device__ __forceinline__ void ssm__dl_unquad<float>(const ssm__dl_quad<float> &x, float (&f)[4]) {
    f[0] = x.u.x, f[1] = x.u.y, f[2] = x.u.z, f[3] = x.u.w;
}
template <int RPT, class SE>
__global__ void __launch_bounds__(256) ssm__dl_step_kernel(ssm__dl_args a) {
    __shared__ float red[2][16][65];
    __shared__ float sk[16 * RPT], sqv[16 * RPT], sv[64], sqk;
    const int n = blockIdx.x, h = blockIdx.y, v0 = blockIdx.z * 64, tid = threadIdx.x;
    const int r0 = tid >> 4, c0 = (tid & 15) * 4;
    const int64_t tb = (int64_t)n * a.ks[0], hs = (int64_t)n * a.h0s[0] + h * a.h0s[1];
    const int64_t ho = (int64_t)n * a.hTs[0] + h * a.hTs[1];
    const bool sv4 = a.svec && v0 + c0 < a.V; /* V % 4 == 0 then: the whole quad is in range */
    ssm__dl_quad<SE> S[RPT];
#pragma unroll
    for (int i = 0; i < RPT; ++i) { /* the state first: its loads are the long ones */
        const int r = r0 + 16 * i;
        if (sv4 && a.h0 && r < a.K) {
            S[i] = *(const ssm__dl_quad<SE> *)((const SE *)a.h0 + hs + r * a.h0s[2] + v0 + c0);
            continue;
        }
        SE e[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int c = v0 + c0 + j;
            e[j] = (a.h0 && r < a.K && c < a.V) ? ((const SE *)a.h0)[hs + r * a.h0s[2] + c * a.h0s[3]] : SE(0.f);
        }
        S[i] = *(const ssm__dl_quad<SE> *)e;
    }
    for (int i = tid; i < 16 * RPT; i += 256) {
        sk[i] = i < a.K ? ssm__dl_ld(a.k, a.dt, tb + h * a.ks[2] + i * a.ks[3]) : 0.f;
        sqv[i] = i < a.K ? ssm__dl_ld(a.q, a.dt, (int64_t)n * a.qs[0] + h * a.qs[2] + i * a.qs[3]) : 0.f;
    }
    if (tid < 64) sv[tid] = v0 + tid < a.V ? ssm__dl_ld(a.v, a.dt, (int64_t)n * a.vs[0] + h * a.vs[2] + (v0 + tid) * a.vs[3]) : 0.f;
    const float beta = ssm__dl_ld(a.beta, a.bdt, (int64_t)n * a.bs[0] + h * a.bs[2]);
    const float al = a.g ? __expf(ssm__dl_ld(a.g, a.gdt, (int64_t)n * a.gs[0] + h * a.gs[2])) : 1.f;
    __syncthreads();
    if (tid < 32) { /* q.k, in a fixed order */
        float d = 0.f;
        for (int i = tid; i < 16 * RPT; i += 32) d += sqv[i] * sk[i];
#pragma unroll
        for (int o = 16; o; o >>= 1) d += __shfl_xor_sync(0xffffffffu, d, o);
        if (tid == 0) sqk = d;
    }
    float pk[4] = {0.f, 0.f, 0.f, 0.f}, pq[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int i = 0; i < RPT; ++i) {
        float f[4];
        ssm__dl_unquad<SE>(S[i], f);
        const float kr = sk[r0 + 16 * i], qr = sqv[r0 + 16 * i];
#pragma unroll
        for (int j = 0; j < 4; ++j) pk[j] += kr * f[j], pq[j] += qr * f[j];
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) red[0][r0][c0 + j] = pk[j], red[1][r0][c0 + j] = pq[j];
    __syncthreads();
    float vn[4]; /* v_new = beta (v - alpha k^T S) for this thread's columns */
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        float s = 0.f;
#pragma unroll
        for (int i = 0; i < 16; ++i) s += red[0][i][c0 + j];
        vn[j] = beta * (sv[c0 + j] - al * s);
    }
    if (r0 == 0) /* o = scale (alpha q^T S + (q.k) v_new) */
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            float s = 0.f;
#pragma unroll
            for (int i = 0; i < 16; ++i) s += red[1][i][c0 + j];
            if (v0 + c0 + j < a.V)
                ssm__dl_st(a.o, a.dt, (int64_t)n * a.os[0] + h * a.os[2] + (v0 + c0 + j) * a.os[3], a.scale * (al * s + sqk * vn[j]));
        }
    if (!a.hT) return;
#pragma unroll
    for (int i = 0; i < RPT; ++i) { /* S' = alpha S + k v_new^T */
        const int r = r0 + 16 * i;
        if (r >= a.K) continue;
        float f[4];
        ssm__dl_unquad<SE>(S[i], f);
        const float kr = sk[r];
#pragma unroll
        for (int j = 0; j < 4; ++j) f[j] = al * f[j] + kr * vn[j];
        if (sv4) {
            ssm__dl_st4(a.hT, a.sdt, ho + r * a.hTs[2] + v0 + c0, f);
            continue;
        }
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int c = v0 + c0 + j;
            if (c < a.V) ssm__dl_st(a.hT, a.sdt, ho + r * a.hTs[2] + c * a.hTs[3], f[j]);
        }
    }
}

/* ---- DeltaProduct: DeltaNet over T n_h sub-tokens ---------------------------------------------
   Sub-token s = t n_h + j applies factor j of token t: its k, v, beta; the gate only at j = 0,
   the query (and dout) only at j = n_h - 1. Then o_t and dq_t are the last sub-token's, dg_t the
   first's, dk, dv, dbeta each factor's own: the same arithmetic as the token form, exact. The
   chunked kernels run in place where k, v, beta (and their gradients) are sub-token views
   (ssm__dl_inplace: fla's interleaved layout); elsewhere (other layouts, the token loop, the decode
   step) the sub-token tensors are contiguous [B, T n_h, H, D] copies in the workspace. In place,
   H200 B8 T4096 H16 D64 n_h 2 bf16: forward 1.19 -> 0.87 ms, forward+backward 4.18 -> 2.93 ms.
   The copies' lanes work on units: 16 bytes where every row involved allows it (VEC), else one
   element. The expansion and the backward's collection run a warp per token; the
   forward's collection of o, 8 units a token at V = 64, a warp per group of tokens (a warp per
   token left most lanes idle: 233 -> 69 us on an H200 at B8 T4096 H16 D64 n_h 2; the same group
   mover with a unit lookup made the expansion slower, 495 -> 839 us, and the backward's collection
   too). Token indices fit 32 bits (ssm__dl_supported: B T H < 2^31), so their divisions stay cheap. */
struct ssm__dl_xbuf {
    void *q, *k, *v, *beta, *g, *o, *dout, *dq, *dk, *dv, *dbeta, *dg; /* sub-token copies (or NULL) */
};
#define SSM__DL_XR 4 /* loads in flight per lane in the forward's collection of o */
/* Tokens per warp in that collection: enough whole tokens to give every lane SSM__DL_XR units. */
static __host__ __device__ inline int ssm__dl_xgroup(int per_tok) {
    return per_tok >= 32 * SSM__DL_XR ? 1 : 32 * SSM__DL_XR / per_tok;
}
template <bool VEC> struct ssm__dl_unit { float x; };
template <> struct ssm__dl_unit<true> { uint4 x; };
/* One unit from src[si] to dst[di] (element offsets); src NULL writes zeros. */
template <bool VEC> __device__ __forceinline__ void ssm__dl_move(void *dst, int64_t di, const void *src, int64_t si, int dt) {
    if (VEC) {
        const int es = dt == 0 ? 4 : 2;
        *(uint4 *)((char *)dst + di * es) = src ? *(const uint4 *)((const char *)src + si * es) : make_uint4(0, 0, 0, 0);
    } else
        ssm__dl_st(dst, dt, di, src ? ssm__dl_ld(src, dt, si) : 0.f);
}
/* Element offset of (b, t, h[, j]) in an operand with plan strides s (b, t, h, j, d). */
__device__ __forceinline__ int64_t ssm__dl_at(const int64_t *s, int64_t b, int64_t t, int64_t h, int64_t j, int64_t f) {
    return b * s[0] + t * s[1] + h * s[2] + j * s[3] + f * s[4];
}
/* Per sub-token: K / W units of k, then q, V / W of v, then dout; beta and g with unit 0. */
template <bool VEC>
__global__ void __launch_bounds__(256) ssm__dl_sub_expand_kernel(ssm_delta_strides st, const void *q, const void *k, const void *v,
                                                                 const void *beta, const void *g, const void *dout, ssm__dl_xbuf x,
                                                                 int T, int H, int nh, int K, int V, int dt, int toks) {
    const int W = VEC ? 16 / (dt == 0 ? 4 : 2) : 1, ck = K / W, cv = V / W;
    const int per_sub = 2 * ck + (dout ? 2 : 1) * cv, lane = threadIdx.x & 31;
    for (int64_t tk = (int64_t)blockIdx.x * 8 + (threadIdx.x >> 5); tk < toks; tk += (int64_t)gridDim.x * 8) {
        const int tok = (int)tk, b = tok / (T * H), t = tok / H % T, h = tok % H;
        for (int u = lane; u < nh * per_sub; u += 32) {
            const int j = u / per_sub, e = u % per_sub;
            const int64_t r = ((int64_t)b * T * nh + (int64_t)t * nh + j) * H + h; /* sub-token row */
            const bool last = j == nh - 1;
            if (e < ck) ssm__dl_move<VEC>(x.k, r * K + e * W, k, ssm__dl_at(st.k, b, t, h, j, e * W), dt);
            else if (e < 2 * ck)
                ssm__dl_move<VEC>(x.q, r * K + (e - ck) * W, last ? q : NULL, ssm__dl_at(st.q, b, t, h, 0, (e - ck) * W), dt);
            else if (e < 2 * ck + cv) ssm__dl_move<VEC>(x.v, r * V + (e - 2 * ck) * W, v, ssm__dl_at(st.v, b, t, h, j, (e - 2 * ck) * W), dt);
            else ssm__dl_move<VEC>(x.dout, r * V + (e - 2 * ck - cv) * W, last ? dout : NULL,
                                   ssm__dl_at(st.dout, b, t, h, 0, (e - 2 * ck - cv) * W), dt);
            if (e == 0) {
                ssm__dl_st(x.beta, dt, r, ssm__dl_ld(beta, dt, ssm__dl_at(st.beta, b, t, h, j, 0)));
                if (g) ssm__dl_st(x.g, dt, r, j == 0 ? ssm__dl_ld(g, dt, ssm__dl_at(st.g, b, t, h, 0, 0)) : 0.f);
            }
        }
    }
}
/* The backward back to token form: dq from the last sub-token, dk, dv, dbeta per factor, dg from
   the first. Per token: K / W units of dq, then per factor K / W of dk and V / W of dv. */
template <bool VEC>
__global__ void __launch_bounds__(256) ssm__dl_sub_collect_kernel(ssm_delta_strides st, ssm__dl_xbuf x, void *dq, void *dk, void *dv,
                                                                  void *dbeta, void *dg, int T, int H, int nh, int K, int V,
                                                                  int dt, int toks) {
    const int W = VEC ? 16 / (dt == 0 ? 4 : 2) : 1, ck = K / W, cv = V / W, lane = threadIdx.x & 31;
    const int lo = dq ? 0 : ck, hi = ck + (dk || dv || dbeta ? nh * (ck + cv) : 0);
    for (int64_t tk = (int64_t)blockIdx.x * 8 + (threadIdx.x >> 5); tk < toks; tk += (int64_t)gridDim.x * 8) {
        const int tok = (int)tk, b = tok / (T * H), t = tok / H % T, h = tok % H;
        const int64_t r0 = ((int64_t)b * T * nh + (int64_t)t * nh) * H + h, rl = r0 + (int64_t)(nh - 1) * H;
        for (int e = lo + lane; e < hi; e += 32) {
            if (e < ck) {
                ssm__dl_move<VEC>(dq, ssm__dl_at(st.dq, b, t, h, 0, e * W), x.dq, rl * K + e * W, dt);
            } else {
                const int j = (e - ck) / (ck + cv), f = (e - ck) % (ck + cv);
                const int64_t r = r0 + (int64_t)j * H;
                if (f < ck) {
                    if (dk) ssm__dl_move<VEC>(dk, ssm__dl_at(st.dk, b, t, h, j, f * W), x.dk, r * K + f * W, dt);
                } else if (dv)
                    ssm__dl_move<VEC>(dv, ssm__dl_at(st.dv, b, t, h, j, (f - ck) * W), x.dv, r * V + (f - ck) * W, dt);
                if (f == 0 && dbeta) ssm__dl_st(dbeta, dt, ssm__dl_at(st.dbeta, b, t, h, j, 0), ssm__dl_ld(x.dbeta, dt, r));
            }
        }
        if (lane == 0 && dg) ssm__dl_st(dg, dt, ssm__dl_at(st.dg, b, t, h, 0, 0), ssm__dl_ld(x.dg, dt, r0));
    }
}
/* The forward's o from each token's last sub-token. A token holds only V / W units, so a warp
   moves a group of whole tokens, SSM__DL_XR loads in flight per lane before their stores. */
template <bool VEC>
__global__ void __launch_bounds__(256) ssm__dl_sub_out_kernel(ssm_delta_strides st, const void *xo, void *o, int T, int H, int nh,
                                                              int V, int dt, int toks) {
    const int W = VEC ? 16 / (dt == 0 ? 4 : 2) : 1, cv = V / W, G = ssm__dl_xgroup(cv), lane = threadIdx.x & 31;
    const int es = dt == 0 ? 4 : 2;
    for (int64_t tok0 = ((int64_t)blockIdx.x * 8 + (threadIdx.x >> 5)) * G; tok0 < toks; tok0 += (int64_t)gridDim.x * 8 * G) {
        const int n = (int)(toks - tok0 < G ? toks - tok0 : G) * cv;
        for (int c = 0; c < n; c += 32 * SSM__DL_XR) {
            int64_t di[SSM__DL_XR];
            ssm__dl_unit<VEC> x[SSM__DL_XR];
#pragma unroll
            for (int r = 0; r < SSM__DL_XR; ++r) {
                const int u = c + 32 * r + lane;
                if (u >= n) continue;
                const int tok = (int)tok0 + u / cv, e = u % cv, b = tok / (T * H), t = tok / H % T, h = tok % H;
                const int64_t si = (((int64_t)b * T * nh + (int64_t)t * nh + nh - 1) * H + h) * V + e * W;
                di[r] = ssm__dl_at(st.o, b, t, h, 0, e * W);
                if (VEC) *(uint4 *)&x[r] = *(const uint4 *)((const char *)xo + si * es);
                else *(float *)&x[r] = ssm__dl_ld(xo, dt, si);
            }
#pragma unroll
            for (int r = 0; r < SSM__DL_XR; ++r) {
                if (c + 32 * r + lane >= n) continue;
                if (VEC) *(uint4 *)((char *)o + di[r] * es) = *(const uint4 *)&x[r];
                else ssm__dl_st(o, dt, di[r], *(const float *)&x[r]);
            }
        }
    }
}

/* ---- delta rule: launchers ------------------------------------------------------------------------ */

static int ssm__dl_kp(int K) { return K <= 32 ? 32 : K <= 64 ? 64 : K <= 128 ? 128 : 256; }
/* Workspace of the chunked path: the arrays of ssm__dl_ws (off[0..12]) and the int64 copy of
   cu_seqlens with its raw staging (off[13], off[14]). desc.saved, when the caller keeps the
   forward's chunk quantities for the backward, holds the preparation's arrays qp .. gam (T
   included) and the state pass's chunk-start states and v_new (soff[0..8]): the backward then
   skips both the preparation and the replay of the state pass. */
typedef struct ssm__dl_sizes {
    int KP, VP, VB;
    int64_t nc; /* chunk slots: exact without varlen, an upper bound with it */
    size_t off[15], bytes;
    size_t soff[9], saved;
} ssm__dl_sizes;
static size_t ssm__dl_al(size_t x) { return (x + 255) & ~(size_t)255; }
static ssm__dl_sizes ssm__dl_sizes_of(int N, int64_t T, int H, int K, int V, int varlen, size_t esz, int VB, int chunked,
                                      int bwd) {
    ssm__dl_sizes s;
    const size_t C = SSM__DL_C;
    s.KP = ssm__dl_kp(K), s.VB = VB, s.VP = (V + VB - 1) / VB * VB;
    s.nc = varlen ? (T + (int64_t)C - 1) / (int64_t)C + N : (int64_t)N * ((T + (int64_t)C - 1) / (int64_t)C);
    size_t e = esz, c = chunked ? (size_t)s.nc * (size_t)H : 0, b = bwd ? 1 : 0, KP = (size_t)s.KP, VP = (size_t)s.VP;
    size_t vl = varlen ? (size_t)(N + 1) * 8 : 0;
    size_t sz[15] = {c * C * KP * e, c * C * KP * e, c * C * KP * e, c * C * VP * e, c * C * C * e, b * c * C * C * e,
                     c * C * 4,      vl,             b * c * C * VP * e, b * c * KP * VP * e, b * c * C * VP * e,
                     b * c * KP * VP * e, b * c * C * VP * e, vl, vl};
    s.bytes = 0;
    for (int i = 0; i < 15; ++i) s.off[i] = s.bytes, s.bytes += ssm__dl_al(sz[i]);
    const size_t keep[9] = {sz[0], sz[1], sz[2], sz[3], sz[4], c * C * C * e, sz[6], c * KP * VP * e, c * C * VP * e};
    s.saved = 0;
    for (int i = 0; i < 9; ++i) s.soff[i] = s.saved, s.saved += ssm__dl_al(keep[i]);
    return s;
}
/* The workspace's arrays; with `saved`, the kept ones (qp .. gam, s0, vn) live there instead. */
template <class E> static ssm__dl_ws<E> ssm__dl_ws_of(const ssm__dl_sizes &s, char *p, char *saved) {
    ssm__dl_ws<E> w;
    char *a[9];
    for (int i = 0; i < 9; ++i) a[i] = saved ? saved + s.soff[i] : p + s.off[i < 7 ? i : i + 2];
    w.qp = (E *)a[0], w.kp = (E *)a[1], w.w = (E *)a[2], w.u = (E *)a[3];
    w.aqk = (E *)a[4], w.tm = (E *)a[5], w.gam = (float *)a[6];
    w.choff = (int64_t *)(p + s.off[7]), w.KP = s.KP, w.VP = s.VP;
    w.dop = (E *)(p + s.off[8]), w.s0 = (E *)a[7], w.vn = (E *)a[8];
    w.ds1 = (E *)(p + s.off[11]), w.dvn = (E *)(p + s.off[12]);
    return w;
}
/* cu_seqlens (i32 or i64, any stride) as int64 in the workspace, and the chunk offsets. */
/* Device-resident offsets are never read on the host, so nothing validated them: the staged
   copy is forced into the contract (0 first, T last, each clamped to [0, T], a running maximum
   so none decreases), then counted in sub-tokens (n_h per token). Valid offsets pass unchanged;
   invalid ones give unspecified results, but every access stays inside the tensors. One block
   of 256 threads; a Hillis-Steele max-scan per 256 offsets with the carry between them. */
__global__ void __launch_bounds__(256) ssm__dl_cu_kernel(const char *raw, int bits, int N, int64_t T, int nh, int64_t *cu) {
    __shared__ int64_t sh[256];
    const int t = threadIdx.x;
    int64_t carry = 0;
    for (int base = 0; base <= N; base += 256) {
        const int i = base + t;
        int64_t v = 0;
        if (i <= N) {
            v = bits == 64 ? ((const int64_t *)raw)[i] : (int64_t)((const int32_t *)raw)[i];
            v = i == 0 ? 0 : i == N ? T : v < 0 ? 0 : v > T ? T : v;
        }
        sh[t] = v;
        __syncthreads();
        for (int o = 1; o < 256; o <<= 1) {
            const int64_t u = t >= o ? sh[t - o] : 0;
            __syncthreads();
            if (u > sh[t]) sh[t] = u;
            __syncthreads();
        }
        if (i <= N) cu[i] = (sh[t] > carry ? sh[t] : carry) * nh;
        if (sh[255] > carry) carry = sh[255];
        __syncthreads();
    }
}
/* V block: 64 when that still gives a CTA per multiprocessor, else 32 (more CTAs in flight). */
static int ssm__dl_pick_vb(int N, int H, int V, int sms) {
    if (V <= 32) return 32;
    return (int64_t)N * H * ((V + 63) / 64) >= sms ? 64 : 32;
}
template <class K_> static int ssm__dl_smem_ok(K_ kernel, size_t bytes, int optin) {
    if (bytes > (size_t)optin) return 0;
    return ssm__cu_smem_allow((const void *)kernel, bytes, (size_t)optin) == cudaSuccess;
}
template <class E, int KP>
static int ssm__dl_prep_go(const ssm__dl_args &a, const ssm__dl_sizes &s, ssm__dl_ws<E> w, int store_t, int optin,
                           cudaStream_t st) {
    size_t sm = ssm__dl_prep_smem<E, KP>(s.VP);
    if (!ssm__dl_smem_ok(ssm__dl_prep_kernel<E, KP>, sm, optin)) return -1;
    if (a.cu) ssm__dl_choff_kernel<<<1, 1, 0, st>>>(a.cu, a.N, w.choff);
    if (store_t & 4) sm = 0; /* the packed dout alone */
    if (s.nc <= 0 || ((store_t & 4) && (!a.dout || a.vec))) return 0; /* a.vec: the kernels read dout in place */
    if (!(a.variant & 64) && s.nc <= 65535) /* heads fastest: a token's heads read together (1-3% faster) */
        ssm__dl_prep_kernel<E, KP><<<dim3(a.H, (unsigned)s.nc), SSM__DL_NT, sm, st>>>(a, w, s.VP, store_t | 2);
    else
        ssm__dl_prep_kernel<E, KP><<<dim3((unsigned)s.nc, a.H), SSM__DL_NT, sm, st>>>(a, w, s.VP, store_t);
    return 0;
}
/* Double-buffer the sequential passes (NB = 2) when every CTA of the grid is still resident at
   once; else single-buffer (half the shared memory, more CTAs per SM): at K = 128 the double-
   buffered pass fits one CTA per SM, and a grid of two waves doubles its latency chain (H200:
   state pass 0.83 -> 0.66 ms, reverse pass 0.97 -> 0.70 ms at B4 H16 K=V=128). */
template <class KF> static int ssm__dl_one_wave(KF kernel, size_t smem, int64_t ctas) {
    int dev = 0, sms = 0, per = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, kernel, SSM__DL_NT, smem) != cudaSuccess)
        return 1;
    return ctas <= (int64_t)sms * per;
}
template <class E, int KP, int VB, bool OUT = true>
static int ssm__dl_fwd_go(const ssm__dl_args &a, const ssm__dl_sizes &s, ssm__dl_ws<E> w, E *vn, E *so, int optin,
                          cudaStream_t st) {
    dim3 grid(a.N, a.H, s.VP / VB);
    const size_t s2 = ssm__dl_fwd_smem<E, KP, VB, 2, OUT>(), s1 = ssm__dl_fwd_smem<E, KP, VB, 1, OUT>();
    if (!(a.variant & 4) && ssm__dl_smem_ok(ssm__dl_fwd_kernel<E, KP, VB, 2, OUT>, s2, optin) &&
        ((a.variant & 8) || ssm__dl_one_wave(ssm__dl_fwd_kernel<E, KP, VB, 2, OUT>, s2, (int64_t)a.N * a.H * (s.VP / VB))))
        ssm__dl_fwd_kernel<E, KP, VB, 2, OUT><<<grid, SSM__DL_NT, s2, st>>>(a, w, vn, so);
    else if (ssm__dl_smem_ok(ssm__dl_fwd_kernel<E, KP, VB, 1, OUT>, s1, optin))
        ssm__dl_fwd_kernel<E, KP, VB, 1, OUT><<<grid, SSM__DL_NT, s1, st>>>(a, w, vn, so);
    else
        return -1;
    return 0;
}
/* The backward's replay of the state pass: v_new and the chunk-start states, no output (variant
   bit 5: the full forward kernel with its output dropped, as before). */
template <class E, int KP>
static int ssm__dl_replay_go(const ssm__dl_args &a, const ssm__dl_sizes &s, ssm__dl_ws<E> w, int optin, cudaStream_t st) {
    if (a.variant & 32)
        return s.VB == 64 ? ssm__dl_fwd_go<E, KP, 64>(a, s, w, w.vn, w.s0, optin, st)
                          : ssm__dl_fwd_go<E, KP, 32>(a, s, w, w.vn, w.s0, optin, st);
    return s.VB == 64 ? ssm__dl_fwd_go<E, KP, 64, false>(a, s, w, w.vn, w.s0, optin, st)
                      : ssm__dl_fwd_go<E, KP, 32, false>(a, s, w, w.vn, w.s0, optin, st);
}
template <class E, int KP, int VB>
static int ssm__dl_bwd_seq_go(const ssm__dl_args &a, const ssm__dl_sizes &s, ssm__dl_ws<E> w, int optin, cudaStream_t st) {
    dim3 grid(a.N, a.H, s.VP / VB);
    if (!(a.variant & 4) && ssm__dl_smem_ok(ssm__dl_bwd_seq_kernel<E, KP, VB, 2>, ssm__dl_fwd_smem<E, KP, VB, 2>(), optin) &&
        ((a.variant & 8) || ssm__dl_one_wave(ssm__dl_bwd_seq_kernel<E, KP, VB, 2>, ssm__dl_fwd_smem<E, KP, VB, 2>(),
                                             (int64_t)a.N * a.H * (s.VP / VB))))
        ssm__dl_bwd_seq_kernel<E, KP, VB, 2><<<grid, SSM__DL_NT, ssm__dl_fwd_smem<E, KP, VB, 2>(), st>>>(a, w);
    else if (ssm__dl_smem_ok(ssm__dl_bwd_seq_kernel<E, KP, VB, 1>, ssm__dl_fwd_smem<E, KP, VB, 1>(), optin))
        ssm__dl_bwd_seq_kernel<E, KP, VB, 1><<<grid, SSM__DL_NT, ssm__dl_fwd_smem<E, KP, VB, 1>(), st>>>(a, w);
    else
        return -1;
    return 0;
}
template <class E, int KP>
static int ssm__dl_bwd_chunk_go(const ssm__dl_args &a, const ssm__dl_sizes &s, ssm__dl_ws<E> w, int optin, cudaStream_t st) {
    constexpr int KW = ssm__dl_bwc_kpc<E, KP>(), KN = KW < 64 ? KW : 64;
    const size_t smc = ssm__dl_bwd_chunk_smem<E, KP>();
    const bool wide = KW != KN && !(a.variant & 16);
    if (!(wide ? ssm__dl_smem_ok(ssm__dl_bwd_chunk_kernel<E, KP, KW>, smc, optin)
               : ssm__dl_smem_ok(ssm__dl_bwd_chunk_kernel<E, KP, KN>, smc, optin)))
        return -1;
    /* a hint: the whole carveout as shared memory, so ssm__dl_bwc_min CTAs fit per SM */
    (void)cudaFuncSetAttribute(wide ? ssm__dl_bwd_chunk_kernel<E, KP, KW> : ssm__dl_bwd_chunk_kernel<E, KP, KN>,
                               cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared);
    if (s.nc <= 0) return 0;
    if (wide) ssm__dl_bwd_chunk_kernel<E, KP, KW><<<dim3((unsigned)s.nc, a.H), SSM__DL_NT, smc, st>>>(a, w);
    else ssm__dl_bwd_chunk_kernel<E, KP, KN><<<dim3((unsigned)s.nc, a.H), SSM__DL_NT, smc, st>>>(a, w);
    return 0;
}
/* saved (or NULL): desc.saved, where the forward keeps the preparation's arrays (T too), v_new and
   the chunk-start states, and the backward finds them (the preparation then only packs dout, and
   the replay of the state pass is skipped). */
template <class E, int KP>
static int ssm__dl_forward_kp(const ssm__dl_args &a, const ssm__dl_sizes &s, char *ws, char *saved, int optin,
                              cudaStream_t st) {
    ssm__dl_ws<E> w = ssm__dl_ws_of<E>(s, ws, saved);
    E *vn = saved ? w.vn : NULL, *s0 = saved ? w.s0 : NULL;
    if (ssm__dl_prep_go<E, KP>(a, s, w, saved ? 1 : 0, optin, st)) return -1;
    return s.VB == 64 ? ssm__dl_fwd_go<E, KP, 64>(a, s, w, vn, s0, optin, st)
                      : ssm__dl_fwd_go<E, KP, 32>(a, s, w, vn, s0, optin, st);
}
template <class E, int KP>
static int ssm__dl_backward_kp(const ssm__dl_args &a0, const ssm__dl_sizes &s, char *ws, char *saved, int optin,
                               cudaStream_t st) {
    ssm__dl_ws<E> w = ssm__dl_ws_of<E>(s, ws, saved);
    if (ssm__dl_bwd_chunk_smem<E, KP>() > (size_t)optin) return -1;
    if (!a0.dout && cudaMemsetAsync(w.dop, 0, (size_t)s.nc * a0.H * SSM__DL_C * s.VP * sizeof(E), st) != cudaSuccess)
        return -1;
    if (ssm__dl_prep_go<E, KP>(a0, s, w, saved ? 4 : 1, optin, st)) return -1;
    ssm__dl_args a = a0; /* replay the forward for v_new and the chunk-start states only */
    a.o = NULL, a.hT = NULL;
    int rc = saved ? 0 : ssm__dl_replay_go<E, KP>(a, s, w, optin, st);
    if (!rc) rc = s.VB == 64 ? ssm__dl_bwd_seq_go<E, KP, 64>(a, s, w, optin, st) : ssm__dl_bwd_seq_go<E, KP, 32>(a, s, w, optin, st);
    if (!rc) rc = ssm__dl_bwd_chunk_go<E, KP>(a, s, w, optin, st);
    return rc;
}
/* f(ssm__dl_e<E>(), ssm__tc_ic<KP>()) for the call's element type E and padded key width KP: f32 up
   to KP = 128, 16-bit up to 256; -1 where none fits (f32 keys beyond 128: their tiles exceed
   shared memory). */
template <class E> struct ssm__dl_e { typedef E type; };
template <class E, int KMAX, class F> static int ssm__dl_kp_as(int KP, F &&f) {
    switch (KP) {
    case 32: return f(ssm__dl_e<E>(), ssm__tc_ic<32>());
    case 64: return f(ssm__dl_e<E>(), ssm__tc_ic<64>());
    case 128: return f(ssm__dl_e<E>(), ssm__tc_ic<128>());
    default:
        if constexpr (KMAX > 128) return f(ssm__dl_e<E>(), ssm__tc_ic<KMAX>());
        else return -1;
    }
}
template <class F> static int ssm__dl_with_kp(const ssm__dl_args &a, const ssm__dl_sizes &s, F &&f) {
    if (a.dt == 0) return ssm__dl_kp_as<float, 128>(s.KP, f);
    if (a.dt == 2) return ssm__dl_kp_as<__nv_bfloat16, 256>(s.KP, f);
    return ssm__dl_kp_as<__half, 256>(s.KP, f);
}
/* The chunked forward / backward: 0, or -1 when this dtype and size do not fit the kernels. */
static int ssm__dl_forward_chunked(const ssm__dl_args &a, const ssm__dl_sizes &s, char *ws, char *saved, int optin,
                                   cudaStream_t st) {
    return ssm__dl_with_kp(a, s, [&](auto e, auto kp) {
        return ssm__dl_forward_kp<typename decltype(e)::type, decltype(kp)::value>(a, s, ws, saved, optin, st);
    });
}
static int ssm__dl_backward_chunked(const ssm__dl_args &a, const ssm__dl_sizes &s, char *ws, char *saved, int optin,
                                    cudaStream_t st) {
    return ssm__dl_with_kp(a, s, [&](auto e, auto kp) {
        return ssm__dl_backward_kp<typename decltype(e)::type, decltype(kp)::value>(a, s, ws, saved, optin, st);
    });
}
/* Token by token (any size); T = 1 without cu_seqlens is the decode step. */
static void ssm__dl_recurrent(const ssm__dl_args &a, cudaStream_t st) {
    if (a.T == 1 && !a.cu) {
        dim3 g1(a.N, a.H, (a.V + 63) / 64);
#define SSM__DL_STEP(SE)                                                                   \
    {                                                                                      \
        if (a.K <= 16) ssm__dl_step_kernel<1, SE><<<g1, 256, 0, st>>>(a);                  \
        else if (a.K <= 32) ssm__dl_step_kernel<2, SE><<<g1, 256, 0, st>>>(a);             \
        else if (a.K <= 64) ssm__dl_step_kernel<4, SE><<<g1, 256, 0, st>>>(a);             \
        else if (a.K <= 128) ssm__dl_step_kernel<8, SE><<<g1, 256, 0, st>>>(a);            \
        else ssm__dl_step_kernel<16, SE><<<g1, 256, 0, st>>>(a);                           \
        return;                                                                            \
    }
        if (a.sdt == 0) SSM__DL_STEP(float)
        if (a.sdt == 1) SSM__DL_STEP(__half)
        SSM__DL_STEP(__nv_bfloat16)
#undef SSM__DL_STEP
    }
    dim3 grid(a.N, a.H, (a.V + 31) / 32);
    switch ((a.K + 31) / 32) {
    case 1: ssm__dl_rec_kernel<1><<<grid, 128, 0, st>>>(a); break;
    case 2: ssm__dl_rec_kernel<2><<<grid, 128, 0, st>>>(a); break;
    case 3: case 4: ssm__dl_rec_kernel<4><<<grid, 128, 0, st>>>(a); break;
    default: ssm__dl_rec_kernel<8><<<grid, 128, 0, st>>>(a); break;
    }
}

/* ---- delta rule: the backend slots ------------------------------------------------------------- */

/* The kernels' view of a validated plan; tensors' (batch, time, head, feature) strides. */
static ssm__dl_args ssm__dl_args_of(const ssm_delta_plan *p) {
    ssm__dl_args a;
    memset(&a, 0, sizeof a);
    const ssm_delta_strides &s = p->st;
#define SSM__DL_TOK(dst, src) (dst)[0] = (src)[0], (dst)[1] = (src)[1], (dst)[2] = (src)[2], (dst)[3] = (src)[4]
#define SSM__DL_SC(dst, src) (dst)[0] = (src)[0], (dst)[1] = (src)[1], (dst)[2] = (src)[2]
    SSM__DL_TOK(a.qs, s.q), SSM__DL_TOK(a.ks, s.k), SSM__DL_TOK(a.vs, s.v), SSM__DL_TOK(a.os, s.o);
    SSM__DL_TOK(a.dos, s.dout), SSM__DL_TOK(a.dqs, s.dq), SSM__DL_TOK(a.dks, s.dk), SSM__DL_TOK(a.dvs, s.dv);
    SSM__DL_SC(a.bs, s.beta), SSM__DL_SC(a.gs, s.g), SSM__DL_SC(a.dbs, s.dbeta), SSM__DL_SC(a.dgs, s.dg);
#undef SSM__DL_TOK
#undef SSM__DL_SC
    memcpy(a.h0s, s.s0, sizeof a.h0s), memcpy(a.hTs, s.sT, sizeof a.hTs);
    memcpy(a.dhTs, s.dsT, sizeof a.dhTs), memcpy(a.dh0s, s.ds0, sizeof a.dh0s);
    a.N = (int)p->N, a.T = (int)p->T, a.H = (int)p->H, a.K = (int)p->K, a.V = (int)p->V;
    a.dt = a.bdt = a.gdt = a.sdt = ssm__cu_dt(p->dtype);
    a.scale = (float)p->scale, a.rp = 1;
    return a;
}
/* Every given tensor (data ps[i], element strides st[i]: `outer` row strides, then the feature
   stride) has unit feature stride and its data and row strides in whole multiples of `align`
   bytes: its rows move in accesses of that width. */
static int ssm__dl_rows_aligned(const void *const *ps, const int64_t *const *st, int count, size_t esz, size_t align,
                                int outer = 3) {
    for (int i = 0; i < count; ++i) {
        if (!ps[i]) continue;
        if ((uintptr_t)ps[i] % align || st[i][outer] != 1) return 0;
        for (int d = 0; d < outer; ++d)
            if (((size_t)st[i][d] * esz) % align) return 0;
    }
    return 1;
}
/* 16-byte row loads of q, k, v (and dout). */
static int ssm__dl_vec_ok(const ssm__dl_args &a, const ssm_tensor *const *ts, int count, size_t esz) {
    const void *ps[4] = {NULL, NULL, NULL, NULL};
    const int64_t *st[4] = {a.qs, a.ks, a.vs, a.dos};
    for (int i = 0; i < count; ++i) ps[i] = ts[i] ? ts[i]->data : NULL;
    return ssm__dl_rows_aligned(ps, st, count, esz, 16);
}
/* Column-pair stores of dq, dk, dv (those wanted, as the backward kernel sees them). */
static int ssm__dl_pairs_ok(const ssm__dl_args &a, size_t esz) {
    const void *ps[3] = {a.dq, a.dk, a.dv};
    const int64_t *st[3] = {a.dqs, a.dks, a.dvs};
    return ssm__dl_rows_aligned(ps, st, 3, esz, 2 * esz);
}
static int ssm__dl_chunked_fits(const ssm_delta_plan *p) { /* forward and backward alike */
    if (p->dtype.bits == 32) return ssm__dl_kp((int)p->K) <= 128;
    return 1;
}
static int ssm__dl_supported(const ssm_delta_plan *p) {
    return p->dtype.bits <= 32 && p->K <= 256 && p->V <= 256 && p->N <= 65535 && p->H <= 65535 &&
           p->T * p->n_h < ((int64_t)1 << 31) && p->B * p->T * p->H < ((int64_t)1 << 31);
}
/* DeltaProduct's sub-token copies (ssm__dl_sub_expand_kernel), after the chunked workspace at off:
   their bytes, and with ws their pointers in x. */
static size_t ssm__dl_xbytes(const ssm_delta_plan *p, int bwd, char *ws, size_t off, ssm__dl_xbuf *x) {
    if (x) memset(x, 0, sizeof *x);
    if (p->n_h == 1) return 0;
    const size_t e = ssm__cu_esize(p->dtype), R = (size_t)(p->B * p->T * p->n_h * p->H), K = (size_t)p->K, V = (size_t)p->V;
    const size_t f = bwd ? 0 : 1, b = bwd ? 1 : 0, gt = p->gated ? 1 : 0;
    const size_t sz[12] = {R * K * e, R * K * e, R * V * e, R * e, gt * R * e, f * R * V * e,
                           b * R * V * e, b * R * K * e, b * R * K * e, b * R * V * e, b * R * e, b * gt * R * e};
    void **ptr[12] = {NULL};
    if (x) {
        void **pp[12] = {&x->q, &x->k, &x->v, &x->beta, &x->g, &x->o, &x->dout, &x->dq, &x->dk, &x->dv, &x->dbeta, &x->dg};
        memcpy(ptr, pp, sizeof pp);
    }
    size_t total = 0;
    for (int i = 0; i < 12; ++i) {
        if (x) *ptr[i] = sz[i] ? (void *)(ws + off + total) : NULL;
        total += ssm__dl_al(sz[i]);
    }
    return total;
}
/* DeltaProduct in place (no copies) where the chunked kernels run and k, v, beta (and the
   backward's dk, dv, dbeta) are sub-token views: time stride = n_h x factor stride, as in fla's
   interleaved layout [B, T n_h, H, D]. q, o, dout, dq, g, dg stay per token (ssm__dl_rows). */
static int ssm__dl_inplace(const ssm_delta_plan *p, int chunked, int bwd) {
    const ssm_delta_strides &s = p->st;
    const int64_t *sub[6] = {s.k, s.v, s.beta, s.dk, s.dv, s.dbeta};
    if (p->n_h == 1 || !chunked) return 0;
    for (int i = 0; i < (bwd ? 6 : 3); ++i)
        if (p->T > 1 && sub[i][1] != p->n_h * sub[i][3]) return 0;
    return 1;
}
static void ssm__dl_sub_view(int64_t *dst, const int64_t *src, int rank) { /* (b, factor as time, h[, d]) */
    dst[0] = src[0], dst[1] = src[3], dst[2] = src[2];
    if (rank == 4) dst[3] = src[4];
}
static void ssm__dl_inplace_args(ssm__dl_args *a, const ssm_delta_plan *p) {
    const ssm_delta_strides &s = p->st;
    ssm__dl_sub_view(a->ks, s.k, 4), ssm__dl_sub_view(a->vs, s.v, 4), ssm__dl_sub_view(a->bs, s.beta, 3);
    ssm__dl_sub_view(a->dks, s.dk, 4), ssm__dl_sub_view(a->dvs, s.dv, 4), ssm__dl_sub_view(a->dbs, s.dbeta, 3);
    a->T = (int)(p->T * p->n_h), a->rp = (int)p->n_h;
}
/* The kernels' view of the sub-token problem: T n_h steps, contiguous copies (DeltaProduct). */
static void ssm__dl_sub_args(ssm__dl_args *a, const ssm_delta_plan *p, const ssm__dl_xbuf &x) {
    const int64_t T = p->T * p->n_h, H = p->H, K = p->K, V = p->V, e = (int64_t)ssm__cu_esize(p->dtype);
    const int64_t sk[4] = {T * H * K, H * K, K, 1}, sv[4] = {T * H * V, H * V, V, 1}, sb[3] = {T * H, H, 1};
    a->T = (int)T;
    a->q = x.q, a->k = x.k, a->v = x.v, a->beta = x.beta, a->g = a->g ? x.g : NULL;
    memcpy(a->qs, sk, sizeof sk), memcpy(a->ks, sk, sizeof sk), memcpy(a->dqs, sk, sizeof sk), memcpy(a->dks, sk, sizeof sk);
    memcpy(a->vs, sv, sizeof sv), memcpy(a->os, sv, sizeof sv), memcpy(a->dos, sv, sizeof sv), memcpy(a->dvs, sv, sizeof sv);
    memcpy(a->bs, sb, sizeof sb), memcpy(a->gs, sb, sizeof sb), memcpy(a->dbs, sb, sizeof sb), memcpy(a->dgs, sb, sizeof sb);
    if (a->o) a->o = x.o;
    if (a->dout) a->dout = x.dout;
    a->dq = a->dq ? x.dq : NULL, a->dk = a->dk ? x.dk : NULL, a->dv = a->dv ? x.dv : NULL;
    a->dbeta = a->dbeta ? x.dbeta : NULL, a->dg = a->dg ? x.dg : NULL;
    a->vec = (K * e) % 16 == 0 && (V * e) % 16 == 0;
}
/* DeltaProduct's copies move 16-byte units when every operand row they touch allows it: its rows
   (plan strides b, t, h, factor, then d) 16-byte aligned, K and V rows whole units. */
static int ssm__dl_xvec(const ssm_delta_plan *p, const void *const *ps, const int64_t *const *st, int count) {
    const size_t e = ssm__cu_esize(p->dtype);
    return (p->K * e) % 16 == 0 && (p->V * e) % 16 == 0 && ssm__dl_rows_aligned(ps, st, count, e, 16, 4);
}
static unsigned ssm__dl_xgrid(int64_t toks, int G) { /* a warp per G tokens; grid-stride past 2^20 CTAs */
    const int64_t ctas = (toks + 8 * (int64_t)G - 1) / (8 * (int64_t)G);
    return (unsigned)(ctas < ((int64_t)1 << 20) ? ctas : (int64_t)1 << 20);
}
static void ssm__dl_expand(const ssm_delta_plan *p, const ssm__dl_args &u, const ssm__dl_xbuf &x, cudaStream_t st) {
    const int64_t toks = p->B * p->T * p->H;
    if (toks == 0) return;
    const void *ps[4] = {u.q, u.k, u.v, u.dout};
    const int64_t *ss[4] = {p->st.q, p->st.k, p->st.v, p->st.dout};
    auto kernel = ssm__dl_xvec(p, ps, ss, 4) ? ssm__dl_sub_expand_kernel<true> : ssm__dl_sub_expand_kernel<false>;
    kernel<<<ssm__dl_xgrid(toks, 1), 256, 0, st>>>(p->st, u.q, u.k, u.v, u.beta, u.g, u.dout, x, (int)p->T, (int)p->H, (int)p->n_h,
                                                (int)p->K, (int)p->V, u.dt, (int)toks);
}
static void ssm__dl_collect(const ssm_delta_plan *p, const ssm__dl_args &u, const ssm__dl_xbuf &x, cudaStream_t st) {
    const int64_t toks = p->B * p->T * p->H;
    if (toks == 0) return;
    const void *ps[4] = {u.o, u.dq, u.dk, u.dv};
    const int64_t *ss[4] = {p->st.o, p->st.dq, p->st.dk, p->st.dv};
    const int vec = ssm__dl_xvec(p, ps, ss, 4);
    if (u.o) { /* the forward */
        const int per_tok = (int)p->V / (vec ? 16 / (int)ssm__cu_esize(p->dtype) : 1);
        auto kernel = vec ? ssm__dl_sub_out_kernel<true> : ssm__dl_sub_out_kernel<false>;
        kernel<<<ssm__dl_xgrid(toks, ssm__dl_xgroup(per_tok)), 256, 0, st>>>(p->st, x.o, u.o, (int)p->T, (int)p->H, (int)p->n_h,
                                                                            (int)p->V, u.dt, (int)toks);
        return;
    }
    auto kernel = vec ? ssm__dl_sub_collect_kernel<true> : ssm__dl_sub_collect_kernel<false>;
    kernel<<<ssm__dl_xgrid(toks, 1), 256, 0, st>>>(p->st, x, u.dq, u.dk, u.dv, u.dbeta, u.dg, (int)p->T, (int)p->H, (int)p->n_h,
                                                   (int)p->K, (int)p->V, u.dt, (int)toks);
}
static ssm__dl_sizes ssm__dl_plan_sizes(const ssm_ctx *ctx, const ssm_delta_plan *p, int chunked, int bwd) {
    return ssm__dl_sizes_of((int)p->N, p->T * p->n_h, (int)p->H, (int)p->K, (int)p->V, p->cu_bits != 0,
                            ssm__cu_esize(p->dtype), ssm__dl_pick_vb((int)p->N, (int)p->H, (int)p->V, ssm__cu_st(ctx)->sms),
                            chunked, bwd);
}
/* cu_seqlens (host or device, i32 or i64, any stride) into the workspace as int64. */
static ssm_result ssm__dl_stage_cu(ssm_ctx *ctx, const ssm_delta_plan *p, const ssm_tensor *cu, const ssm__dl_sizes &s,
                                   char *ws, ssm__dl_args *a) {
    if (!cu) return SSM_OK;
    ssm__cu_state *st = ssm__cu_st(ctx);
    size_t eb = (size_t)p->cu_bits / 8;
    char *raw = ws + s.off[14];
    int64_t *cu64 = (int64_t *)(ws + s.off[13]);
    cudaMemcpyKind kind = (cu->device.type == SSM_DEVICE_CUDA) ? cudaMemcpyDeviceToDevice : cudaMemcpyDefault;
    SSM__CU_CHECK(ctx, cudaMemcpy2DAsync(raw, eb, cu->data, (size_t)p->cu_stride * eb, eb, (size_t)p->N + 1, kind, st->stream));
    ssm__dl_cu_kernel<<<1, 256, 0, st->stream>>>(raw, p->cu_bits, (int)p->N, p->T, (int)p->n_h, cu64);
    SSM__CU_LAUNCHED(ctx, "ssm__dl_cu_kernel");
    a->cu = cu64;
    return SSM_OK;
}

static ssm_delta_method ssm__cu_delta_pick(const ssm_ctx *ctx, const ssm_delta_plan *p) {
    (void)ctx;
    if (!ssm__dl_chunked_fits(p)) return SSM_DELTA_RECURRENT;
    return p->max_len * p->n_h >= SSM__DL_C ? SSM_DELTA_CHUNKED : SSM_DELTA_RECURRENT;
}
static ssm_result ssm__cu_delta_workspace(const ssm_ctx *ctx, const ssm_delta_plan *p, int pass, size_t *bytes) {
    if (!ssm__dl_supported(p)) return SSM_OK; /* the generic figure stands (the call will decline) */
    if (pass == 2) {
        *bytes = ssm__dl_xbytes(p, 0, NULL, 0, NULL);
        return SSM_OK;
    }
    if (pass == 3) { /* desc.saved: kept only where the forward runs the chunked form */
        *bytes = p->method == SSM_DELTA_CHUNKED && ssm__dl_chunked_fits(p) ? ssm__dl_plan_sizes(ctx, p, 1, 0).saved : 0;
        return SSM_OK;
    }
    int chunked = pass == 1 || (p->method == SSM_DELTA_CHUNKED && ssm__dl_chunked_fits(p));
    *bytes = ssm__dl_plan_sizes(ctx, p, chunked, pass == 1).bytes + ssm__dl_xbytes(p, pass == 1, NULL, 0, NULL);
    return SSM_OK;
}

static ssm_result ssm__cu_delta_forward(ssm_ctx *ctx, const ssm_delta_plan *p, const ssm_tensor *q, const ssm_tensor *k,
                                        const ssm_tensor *v, const ssm_tensor *beta, const ssm_tensor *g,
                                        const ssm_tensor *s0, const ssm_tensor *cu, ssm_tensor *o, ssm_tensor *sT) {
    static const char *op = "ssm_delta_forward";
    if (!ssm__dl_supported(p)) return SSM__NOT_MINE;
    ssm__cu_state *st = ssm__cu_st(ctx);
    ssm__cu_device_guard guard(st->device);
    ssm__dl_args a = ssm__dl_args_of(p);
    a.q = q->data, a.k = k->data, a.v = v->data, a.beta = beta->data, a.g = g ? g->data : NULL;
    a.h0 = s0 ? s0->data : NULL, a.o = o->data, a.hT = sT ? sT->data : NULL;
    const int chunked = p->method == SSM_DELTA_CHUNKED && ssm__dl_chunked_fits(p);
    const int inplace = ssm__dl_inplace(p, chunked, 0), copies = p->n_h > 1 && !inplace;
    if (inplace) ssm__dl_inplace_args(&a, p);
    const ssm_tensor *vt[3] = {q, k, v};
    a.vec = ssm__dl_vec_ok(a, vt, 3, ssm__cu_esize(p->dtype));
    ssm__dl_sizes s = ssm__dl_plan_sizes(ctx, p, chunked, 0);
    char *ws = NULL;
    ssm__dl_xbuf x;
    SSM__TRY(ssm_ctx_workspace(ctx, s.bytes + (copies ? ssm__dl_xbytes(p, 0, NULL, 0, NULL) : 0), (void **)&ws));
    if (copies) ssm__dl_xbytes(p, 0, ws, s.bytes, &x);
    SSM__TRY(ssm__dl_stage_cu(ctx, p, cu, s, ws, &a));
    const ssm__dl_args u = a; /* the caller's tensors */
    if (copies) ssm__dl_expand(p, u, x, st->stream), ssm__dl_sub_args(&a, p, x);
    if (chunked) {
        if (ssm__dl_forward_chunked(a, s, ws, (char *)p->saved, (int)st->smem_optin, st->stream))
            return ssm_ctx_error(ctx, SSM_ERROR_UNSUPPORTED, "%s: no chunked kernel fits K = %lld", op, (long long)p->K);
    } else
        ssm__dl_recurrent(a, st->stream);
    if (copies) ssm__dl_collect(p, u, x, st->stream);
    SSM__CU_LAUNCHED(ctx, "the delta-rule forward kernels");
    return SSM_OK;
}

static ssm_result ssm__cu_delta_backward(ssm_ctx *ctx, const ssm_delta_plan *p, const ssm_tensor *q, const ssm_tensor *k,
                                         const ssm_tensor *v, const ssm_tensor *beta, const ssm_tensor *g,
                                         const ssm_tensor *s0, const ssm_tensor *cu, const ssm_tensor *dout,
                                         const ssm_tensor *dsT, ssm_tensor *dq, ssm_tensor *dk, ssm_tensor *dv,
                                         ssm_tensor *dbeta, ssm_tensor *dg, ssm_tensor *ds0) {
    static const char *op = "ssm_delta_backward";
    /* the chunked backward serves both methods (the same gradients; the token loop has none) */
    if (!ssm__dl_supported(p) || !ssm__dl_chunked_fits(p)) return SSM__NOT_MINE;
    ssm__cu_state *st = ssm__cu_st(ctx);
    ssm__cu_device_guard guard(st->device);
    ssm__dl_args a = ssm__dl_args_of(p);
    a.q = q->data, a.k = k->data, a.v = v->data, a.beta = beta->data, a.g = g ? g->data : NULL;
    a.h0 = s0 ? s0->data : NULL;
    a.dout = dout ? dout->data : NULL, a.dhT = dsT ? dsT->data : NULL;
    a.dq = dq ? dq->data : NULL, a.dk = dk ? dk->data : NULL, a.dv = dv ? dv->data : NULL;
    a.dbeta = dbeta ? dbeta->data : NULL, a.dg = dg ? dg->data : NULL, a.dh0 = ds0 ? ds0->data : NULL;
    const int inplace = ssm__dl_inplace(p, 1, 1), copies = p->n_h > 1 && !inplace;
    if (inplace) ssm__dl_inplace_args(&a, p);
    const ssm_tensor *vt[4] = {q, k, v, dout};
    a.vec = ssm__dl_vec_ok(a, vt, 4, ssm__cu_esize(p->dtype));
    ssm__dl_sizes s = ssm__dl_plan_sizes(ctx, p, 1, 1);
    char *ws = NULL;
    ssm__dl_xbuf x;
    SSM__TRY(ssm_ctx_workspace(ctx, s.bytes + (copies ? ssm__dl_xbytes(p, 1, NULL, 0, NULL) : 0), (void **)&ws));
    if (copies) ssm__dl_xbytes(p, 1, ws, s.bytes, &x);
    SSM__TRY(ssm__dl_stage_cu(ctx, p, cu, s, ws, &a));
    const ssm__dl_args u = a;
    if (copies) ssm__dl_expand(p, u, x, st->stream), ssm__dl_sub_args(&a, p, x);
    a.pairs = ssm__dl_pairs_ok(a, ssm__cu_esize(p->dtype));
    /* p->saved is set only where the forward ran the chunked form (pass 3's rule) */
    if (ssm__dl_backward_chunked(a, s, ws, (char *)p->saved, (int)st->smem_optin, st->stream))
        return ssm_ctx_error(ctx, SSM_ERROR_UNSUPPORTED, "%s: no chunked kernel fits K = %lld", op, (long long)p->K);
    if (copies) ssm__dl_collect(p, u, x, st->stream);
    SSM__CU_LAUNCHED(ctx, "the delta-rule backward kernels");
    return SSM_OK;
}

static ssm_result ssm__cu_delta_step(ssm_ctx *ctx, const ssm_delta_plan *p, const ssm_tensor *q, const ssm_tensor *k,
                                     const ssm_tensor *v, const ssm_tensor *beta, const ssm_tensor *g, ssm_tensor *state,
                                     ssm_tensor *o) {
    if (!ssm__dl_supported(p)) return SSM__NOT_MINE;
    ssm__cu_state *st = ssm__cu_st(ctx);
    ssm__cu_device_guard guard(st->device);
    ssm__dl_args a = ssm__dl_args_of(p);
    a.q = q->data, a.k = k->data, a.v = v->data, a.beta = beta->data, a.g = g ? g->data : NULL;
    a.h0 = a.hT = state->data, a.o = o->data;
    memcpy(a.hTs, a.h0s, sizeof a.hTs);
    a.svec = a.h0s[3] == 1 && p->V % 4 == 0 && (uintptr_t)state->data % (4 * (state->dtype.bits / 8)) == 0 &&
             a.h0s[0] % 4 == 0 && a.h0s[1] % 4 == 0 && a.h0s[2] % 4 == 0;
    a.T = 1, a.cu = NULL;
    if (p->n_h > 1) { /* n_h sub-steps through the token loop */
        char *ws = NULL;
        ssm__dl_xbuf x;
        SSM__TRY(ssm_ctx_workspace(ctx, ssm__dl_xbytes(p, 0, NULL, 0, NULL), (void **)&ws));
        ssm__dl_xbytes(p, 0, ws, 0, &x);
        const ssm__dl_args u = a;
        ssm__dl_expand(p, u, x, st->stream), ssm__dl_sub_args(&a, p, x);
        ssm__dl_recurrent(a, st->stream);
        ssm__dl_collect(p, u, x, st->stream);
    } else
        ssm__dl_recurrent(a, st->stream);
    SSM__CU_LAUNCHED(ctx, "ssm__dl_step_kernel");
    return SSM_OK;
}

/* >>backend ---- the backend table --------------------------------------------------------- */
/* ---- the backend ----------------------------------------------------------------------------- */

/* Slots in declaration order (C++17 has no designated initializers). */
static const ssm_backend ssm__cuda_backend = {
    /* .name = */ "cuda",
    /* .device_type = */ SSM_DEVICE_CUDA,
    /* .init = */ ssm__cu_init,
    /* .shutdown = */ ssm__cu_shutdown,
    /* .supports = */ ssm__cu_supports,
    /* .check_tensor = */ ssm__cu_check_tensor,
    /* .workspace_size = */ ssm__cu_workspace_size,
    /* .workspace_reserve = */ ssm__cu_workspace_reserve,
    /* .gemm = */ ssm__cu_gemm,
    /* .copy = */ ssm__cu_copy,
    /* .linrec_pick = */ ssm__cu_linrec_pick,
    /* .linrec_steps = */ ssm__cu_linrec_steps,
    /* .linrec_forward = */ NULL,  /* ssm.h's driver on the slots above */
    /* .linrec_backward = */ NULL,
    /* .decay_forward = */ ssm__cu_decay_forward,
    /* .decay_backward = */ ssm__cu_decay_backward,
    /* .delta_forward = */ ssm__cu_delta_forward,
    /* .delta_backward = */ ssm__cu_delta_backward,
    /* .delta_step = */ ssm__cu_delta_step,
    /* .delta_pick = */ ssm__cu_delta_pick,
    /* .delta_workspace = */ ssm__cu_delta_workspace,
    /* .bell_forward = */ ssm__cu_bell_forward,
    /* .bell_backward = */ ssm__cu_bell_backward,
    /* .proj_forward = */ ssm__cu_proj_forward,
    /* .proj_backward = */ ssm__cu_proj_backward,
    /* .outchain_forward = */ ssm__cu_outchain_forward,
    /* .outchain_backward = */ ssm__cu_outchain_backward,
    /* .bell_topology_create = */ ssm__cu_bell_topology_create,
    /* .bell_topology_observe = */ ssm__cu_bell_topology_observe,
    /* .bell_topology_step = */ ssm__cu_bell_topology_step,
    /* .linrec_steps_cp = */ ssm__cu_linrec_steps_cp,
    /* .decay_span = */ ssm__cu_decay_span,
    /* .reserved = */ {NULL}};

extern "C" SSMDEF const ssm_backend *ssm_cuda_backend(void) { return &ssm__cuda_backend; }

#endif /* SSM_CUDA_IMPLEMENTATION_DONE */
#endif /* SSM_CUDA_IMPLEMENTATION */
