/* ssm_cuda.h - v0.1.0 - CUDA backend of ssm.h (dense linear recurrences, decay scans) - MIT license

   USAGE
     In exactly one .cu file (compiled by nvcc), after ssm.h's implementation lives somewhere
     in the program (a .c file with SSM_IMPLEMENTATION, or this same file):
         #define SSM_IMPLEMENTATION        // optional: here or in another file
         #define SSM_CUDA_IMPLEMENTATION
         #include "ssm_cuda.h"
     Everywhere else (C or C++) just #include "ssm_cuda.h": the declarations are plain C.
     Build:  nvcc -O3 -arch=sm_90 app.cu -lcublas      (sm_90 = H100/H200; any sm_70+ works)

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
     f32 accumulation and f32 state. Calls are asynchronous on the context's stream; errors
     that can be found before launch (shapes, dtypes, host pointers, wrong device, misaligned
     data) return an error and write nothing. CUDA / cuBLAS failures return SSM_ERROR_BACKEND
     with the native error string in ssm_ctx_last_error().
     Device scratch comes from a device workspace: the caller's (ssm_cuda_config.workspace),
     or one the context grows through the device allocator hooks (default cudaMalloc) only
     when a call needs more than it holds; ssm_cuda_reserve_workspace() grows it up front and
     ssm_cuda_linrec_workspace_size() / ssm_cuda_decay_workspace_size() say how much a call needs.
     Log decays are not checked for NaN / +inf on the GPU (that would need a device sync).

   METHODS (dense recurrence) and where each wins
     seq       one kernel, one block per sequence, time loop inside: least work, depth T.
               Best when S alone fills the GPU (S >= ~2 x SMs) or T is small.
     chunked   three kernels: every chunk runs locally from zero and forms its transition
               product (n^3 per step), a carry recurrence over chunk ends, a fix-up pass.
               Best when S*n*m cannot fill the GPU: time is split across blocks.
               16-bit inputs with n = 64, m = 1 and 16-byte aligned rows of A (or of A^T, the
               adjoint's view) take a tensor-core version (mma.sync m16n8k16, f32 accumulation;
               the running product stays in registers, transposed, as the next step's operand):
               H200, S16 T4096 n64 f16: 0.45 ms forward (3.4x the floor of reading A once),
               0.63 ms backward, vs 6.4 / 9.1 ms before. It reads A twice (products, then the
               re-run from the true carries), so it cannot go under ~2x the floor; the
               product pass is issue-bound (mma.sync + fragment conversion) and the carry chain
               over T/64 chunks is latency-bound (~0.6 us a hop). Reaching 1.5x would need one
               pass over A: each chunk's A kept in shared memory while a decoupled look-back
               brings its carry (T/L serial hops per sequence), or an L2-resident wave scheme
               where the second read hits L2 (50 MB on H200). Other shapes use CUDA cores.
     cr        cyclic reduction, one batched product per level (O(T n^3), memory <= scan).
     scan_hs / blelloch   prefix scans (the seeds' baselines), batched products per level.
     auto      chunked (chunk 64) for the tensor-core shapes above when T > 64; otherwise seq
               when S >= 2*SMs or T <= 64, cr when S <= SMs/8 (cr 1.34 ms vs chunked 2.7 at
               S1 T8192 n64, CUDA cores), else chunked with chunk ~ sqrt(T).

   VERSION HISTORY
     0.1.0  first version: linrec (all methods) and decay scan, forward and backward
*/
#ifndef SSM_CUDA_H_INCLUDED
#define SSM_CUDA_H_INCLUDED

#include "ssm.h"

#define SSM_CUDA_VERSION_STRING "0.1.0"

#ifdef __cplusplus
extern "C" {
#endif

/* Device memory hooks (e.g. PyTorch's caching allocator). `stream` is the cudaStream_t. */
typedef struct ssm_cuda_allocator {
    void *user;
    void *(*alloc)(void *user, size_t bytes, void *stream); /* NULL fields = cudaMalloc/cudaFree */
    void (*free)(void *user, void *ptr, void *stream);
} ssm_cuda_allocator;

typedef struct ssm_cuda_config {
    int device;                   /* CUDA device ordinal; tensors must have device.id == this */
    void *stream;                 /* cudaStream_t every op runs on; NULL = the default stream */
    void *cublas;                 /* borrowed cublasHandle_t; NULL = the context creates one  */
    ssm_cuda_allocator allocator; /* device workspace growth                                  */
    void *workspace;              /* optional caller-owned device workspace (never grown)     */
    size_t workspace_bytes;
} ssm_cuda_config;

SSMDEF ssm_cuda_config ssm_cuda_config_init(void);
SSMDEF const ssm_backend *ssm_cuda_backend(void);
/* Switch the stream of a CUDA context (e.g. to torch.cuda.current_stream() per call). */
SSMDEF ssm_result ssm_cuda_set_stream(ssm_ctx *ctx, void *stream);
SSMDEF ssm_result ssm_cuda_reserve_workspace(ssm_ctx *ctx, size_t bytes);
SSMDEF size_t ssm_cuda_workspace_capacity(const ssm_ctx *ctx);
/* Device scratch bytes one call needs (backward = 0 forward, 1 backward). */
SSMDEF ssm_result ssm_cuda_linrec_workspace_size(const ssm_ctx *ctx, const ssm_linrec_desc *desc,
                                                 ssm_dtype dtype, int64_t S, int64_t T, int64_t n,
                                                 int64_t m, int backward, size_t *bytes);
SSMDEF ssm_result ssm_cuda_decay_workspace_size(ssm_dtype dtype, int64_t B, int64_t T, int64_t R,
                                                int64_t C, int backward, size_t *bytes);
/* The method AUTO resolves to on this context for these sizes. */
SSMDEF ssm_linrec_method ssm_cuda_linrec_pick(const ssm_ctx *ctx, ssm_dtype dtype, int64_t S, int64_t T,
                                              int64_t n, int64_t m);

#ifdef __cplusplus
}
#endif
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
#include <cuda_runtime.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- context state ------------------------------------------------------------------------ */

typedef struct ssm__cu_state {
    int device, sms;
    size_t smem_optin;
    cudaStream_t stream;
    cublasHandle_t cublas;
    int cublas_owned;
    ssm_cuda_allocator allocator;
    void *ws;
    size_t ws_bytes;
    int ws_owned;
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
#define SSM__CU_TRY(expr)                      \
    do {                                       \
        ssm_result r_ = (expr);                \
        if (r_ != SSM_OK) return r_;           \
    } while (0)

/* Makes the context's device current for a scope and restores the caller's. */
struct ssm__cu_device_guard {
    int prev, ok;
    ssm__cu_device_guard(int dev) : prev(-1), ok(0) {
        if (cudaGetDevice(&prev) == cudaSuccess) ok = cudaSetDevice(dev) == cudaSuccess;
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
    }
    free(s);
}

extern "C" SSMDEF ssm_result ssm_cuda_set_stream(ssm_ctx *ctx, void *stream) {
    if (!ctx || !ssm__cu_st(ctx)) return SSM_ERROR_NULL_ARGUMENT;
    ssm__cu_st(ctx)->stream = (cudaStream_t)stream;
    return SSM_OK;
}

extern "C" SSMDEF ssm_result ssm_cuda_reserve_workspace(ssm_ctx *ctx, size_t bytes) {
    ssm__cu_state *s;
    void *p = NULL;
    if (!ctx || !(s = ssm__cu_st(ctx))) return SSM_ERROR_NULL_ARGUMENT;
    if (bytes <= s->ws_bytes) return SSM_OK;
    if (!s->ws_owned)
        return ssm_ctx_error(ctx, SSM_ERROR_WORKSPACE_TOO_SMALL,
                             "ssm_cuda: workspace: %zu bytes needed, the caller's buffer has %zu", bytes, s->ws_bytes);
    bytes = (bytes + 255) & ~(size_t)255;
    if (s->allocator.alloc) {
        p = s->allocator.alloc(s->allocator.user, bytes, (void *)s->stream);
        if (!p) return ssm_ctx_error(ctx, SSM_ERROR_OUT_OF_MEMORY, "ssm_cuda: allocator hook returned NULL for %zu bytes", bytes);
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
    s->ws = p;
    s->ws_bytes = bytes;
    return SSM_OK;
}

extern "C" SSMDEF size_t ssm_cuda_workspace_capacity(const ssm_ctx *ctx) {
    return ctx && ssm__cu_st(ctx) ? ssm__cu_st(ctx)->ws_bytes : 0;
}

static ssm_result ssm__cu_workspace(ssm_ctx *ctx, size_t bytes, char **p) {
    *p = NULL;
    if (!bytes) return SSM_OK;
    SSM__CU_TRY(ssm_cuda_reserve_workspace(ctx, bytes));
    *p = (char *)ssm__cu_st(ctx)->ws;
    return SSM_OK;
}

/* ---- argument checks the generic layer cannot do: pointers, device ids, alignment ---------- */

static size_t ssm__cu_esize(ssm_dtype t) { return (size_t)t.bits / 8u; }
static int ssm__cu_dt(ssm_dtype t) { return t.bits == 32 ? 0 : (t.code == SSM_DTYPE_BFLOAT ? 2 : 1); }

static ssm_result ssm__cu_check_ptr(ssm_ctx *ctx, const char *op, const char *name, const ssm_tensor *t) {
    ssm__cu_state *s = ssm__cu_st(ctx);
    cudaPointerAttributes at;
    cudaError_t e;
    if (!t || !t->data || ssm_tensor_numel(t) == 0) return SSM_OK;
    if (t->device.id != s->device)
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_DEVICE, "%s: %s is on cuda:%d, the context works on cuda:%d", op,
                             name, (int)t->device.id, s->device);
    if ((uintptr_t)t->data % ssm__cu_esize(t->dtype))
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_STRIDE, "%s: %s data %p is not aligned to its %s elements", op,
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

/* A batch of matrices over two batch indices (sequence s, item k):
   element (s, k, i, j) at p[off + s*ss + k*bs + i*rs + j*cs] of dtype dt. */
typedef struct ssm__cu_op {
    void *p;
    int dt;
    int64_t off, rs, cs, bs, ss;
} ssm__cu_op;

/* C = alpha A B + beta C over nbatch = S*count (s = idx / count, k = idx % count).
   32x32 output tiles, 32-deep K slabs in shared memory, f32 accumulation. */
__global__ void ssm__cu_mm_kernel(int64_t nbatch, int64_t count, int M, int N, int K, float alpha, float beta,
                                  ssm__cu_op A, ssm__cu_op B, ssm__cu_op C) {
    __shared__ float As[32][33], Bs[32][33];
    const int tilesN = (N + 31) / 32;
    const int tm = blockIdx.x / tilesN, tn = blockIdx.x % tilesN;
    const int tx = threadIdx.x, ty = threadIdx.y;
    for (int64_t bi = blockIdx.y; bi < nbatch; bi += gridDim.y) {
        const int64_t s = bi / count, k = bi % count;
        const int64_t a0 = A.off + s * A.ss + k * A.bs, b0 = B.off + s * B.ss + k * B.bs;
        const int64_t c0 = C.off + s * C.ss + k * C.bs;
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

/* dst = src (+ dst), or dst = value when src.p is NULL; rows x cols per batch entry. */
__global__ void ssm__cu_copy_kernel(int64_t total, int64_t count, int rows, int cols, ssm__cu_op src,
                                    ssm__cu_op dst, int accumulate, float value) {
    for (int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; idx < total;
         idx += (int64_t)gridDim.x * blockDim.x) {
        int64_t j = idx % cols, i = (idx / cols) % rows, bi = idx / ((int64_t)rows * cols);
        int64_t s = bi / count, k = bi % count;
        int64_t di = dst.off + s * dst.ss + k * dst.bs + i * dst.rs + j * dst.cs;
        float v = src.p ? ssm__cu_ld(src.p, src.dt, src.off + s * src.ss + k * src.bs + i * src.rs + j * src.cs) : value;
        if (accumulate) v += ssm__cu_ld(dst.p, dst.dt, di);
        ssm__cu_stv(dst.p, dst.dt, di, v);
    }
}

static ssm_result ssm__cu_mm_launch(ssm_ctx *ctx, int64_t S, int64_t count, int64_t M, int64_t N, int64_t K,
                                    float alpha, float beta, ssm__cu_op A, ssm__cu_op B, ssm__cu_op C) {
    int64_t nb = S * count;
    if (nb <= 0 || M <= 0 || N <= 0) return SSM_OK;
    dim3 grid((unsigned)(((M + 31) / 32) * ((N + 31) / 32)), (unsigned)(nb < 65535 ? nb : 65535)), block(32, 8);
    ssm__cu_mm_kernel<<<grid, block, 0, ssm__cu_st(ctx)->stream>>>(nb, count, (int)M, (int)N, (int)K, alpha, beta, A, B, C);
    SSM__CU_LAUNCHED(ctx, "ssm__cu_mm_kernel");
    return SSM_OK;
}

static ssm_result ssm__cu_copy_launch(ssm_ctx *ctx, int64_t S, int64_t count, int64_t rows, int64_t cols,
                                      ssm__cu_op src, ssm__cu_op dst, int accumulate, float value) {
    int64_t total = S * count * rows * cols, blocks;
    if (total <= 0) return SSM_OK;
    blocks = (total + 255) / 256;
    if (blocks > 65536) blocks = 65536;
    ssm__cu_copy_kernel<<<(unsigned)blocks, 256, 0, ssm__cu_st(ctx)->stream>>>(total, count, (int)rows, (int)cols, src,
                                                                               dst, accumulate, value);
    SSM__CU_LAUNCHED(ctx, "ssm__cu_copy_kernel");
    return SSM_OK;
}

/* ---- the backend's GEMM: cuBLAS where a layout allows, the tiled kernel otherwise ---------- */

static ssm_result ssm__cu_gemm(ssm_ctx *ctx, ssm_dtype dtype, int64_t batch, int64_t M, int64_t N, int64_t K,
                               double alpha, ssm_matrix_batch A, ssm_matrix_batch B, double beta, ssm_matrix_batch C) {
    ssm__cu_state *s = ssm__cu_st(ctx);
    ssm__cu_device_guard g(s->device);
    int dt = ssm__cu_dt(dtype);
    if (dtype.bits == 64) return ssm_ctx_error(ctx, SSM_ERROR_INVALID_DTYPE, "ssm_cuda gemm: f64 is not supported");
    /* cuBLAS (column-major): C = op(A) op(B) when C is column-major (rs == 1); a row-major C
       (cs == 1) is C^T = B^T A^T, i.e. swap the operands and transpose every view. */
    {
        ssm_matrix_batch a = A, b = B, c = C;
        int64_t m_ = M, n_ = N;
        if (c.rs != 1 && c.cs == 1) {
            ssm_matrix_batch t = a;
            a = b, b = t;
            m_ = N, n_ = M;
            { int64_t x = a.rs; a.rs = a.cs; a.cs = x; }
            { int64_t x = b.rs; b.rs = b.cs; b.cs = x; }
            { int64_t x = c.rs; c.rs = c.cs; c.cs = x; }
        }
        if (c.rs == 1 && c.cs >= m_ && K > 0 && batch < 2147483647 && m_ < 2147483647 && n_ < 2147483647) {
            /* a is m_ x K, b is K x n_ */
            cublasOperation_t oa, ob;
            int64_t lda, ldb;
            int ok = 1;
            if (a.rs == 1 && a.cs >= m_) oa = CUBLAS_OP_N, lda = a.cs;
            else if (a.cs == 1 && a.rs >= K) oa = CUBLAS_OP_T, lda = a.rs;
            else ok = 0;
            if (b.rs == 1 && b.cs >= K) ob = CUBLAS_OP_N, ldb = b.cs;
            else if (b.cs == 1 && b.rs >= n_) ob = CUBLAS_OP_T, ldb = b.rs;
            else ok = 0;
            if (ok && lda > 0 && ldb > 0 && lda < 2147483647 && ldb < 2147483647 && c.cs < 2147483647) {
                cudaDataType ty = dt == 0 ? CUDA_R_32F : (dt == 1 ? CUDA_R_16F : CUDA_R_16BF);
                float al = (float)alpha, be = (float)beta;
                cublasStatus_t st = cublasSetStream(s->cublas, s->stream);
                if (st == CUBLAS_STATUS_SUCCESS)
                    st = cublasGemmStridedBatchedEx(s->cublas, oa, ob, (int)m_, (int)n_, (int)K, &al, a.ptr, ty, (int)lda,
                                                    a.bs, b.ptr, ty, (int)ldb, b.bs, &be, c.ptr, ty, (int)c.cs, c.bs,
                                                    (int)batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
                if (st != CUBLAS_STATUS_SUCCESS)
                    return ssm_ctx_error(ctx, SSM_ERROR_BACKEND, "cuBLAS: cublasGemmStridedBatchedEx failed: %s",
                                         cublasGetStatusString(st));
                return SSM_OK;
            }
        }
    }
    {
        ssm__cu_op a = {A.ptr, dt, 0, A.rs, A.cs, A.bs, 0}, b = {B.ptr, dt, 0, B.rs, B.cs, B.bs, 0};
        ssm__cu_op c = {C.ptr, dt, 0, C.rs, C.cs, C.bs, 0};
        return ssm__cu_mm_launch(ctx, 1, batch, M, N, K, (float)alpha, (float)beta, a, b, c);
    }
}

/* ---- dense linear recurrence ----------------------------------------------------------------
   Sequences over time with a batch index: element (s, t, i, j) at
   p[off + s*ss + t*ts + i*rs + j*cs]. Reversed views have negative ts and an offset at the end;
   offsets stay integers until an access. */
typedef struct ssm__cu_seq {
    void *p;
    int dt;
    int64_t off, ts, rs, cs, ss;
} ssm__cu_seq;

typedef struct ssm__cu_lr {
    ssm_ctx *ctx;
    int64_t S, n, m;
    int64_t mat_mat, mat_state;
    ssm__cu_seq out; /* the caller's view of the solution, where it differs from the work buffer */
    int has_out, out_written;
} ssm__cu_lr;

static ssm__cu_op ssm__cu_at(ssm__cu_seq v, int64_t t, int64_t tstep) {
    ssm__cu_op o;
    o.p = v.p, o.dt = v.dt, o.off = v.off + t * v.ts, o.rs = v.rs, o.cs = v.cs, o.bs = v.ts * tstep, o.ss = v.ss;
    return o;
}
static ssm__cu_seq ssm__cu_sub(ssm__cu_seq v, int64_t start, int64_t step) {
    v.off += start * v.ts;
    v.ts *= step;
    return v;
}
static ssm_result ssm__cu_mm(ssm__cu_lr *L, int64_t count, float beta, int state, ssm__cu_seq A, int64_t ka,
                             int64_t sa, ssm__cu_seq B, int64_t kb, int64_t sb, ssm__cu_seq C, int64_t kc, int64_t sc) {
    if (count <= 0) return SSM_OK;
    if (state) L->mat_state += count * L->S;
    else L->mat_mat += count * L->S;
    return ssm__cu_mm_launch(L->ctx, L->S, count, L->n, state ? L->m : L->n, L->n, 1.f, beta, ssm__cu_at(A, ka, sa),
                             ssm__cu_at(B, kb, sb), ssm__cu_at(C, kc, sc));
}
#define SSM__CU_MATMAT(L, cnt, A, ka, B, kb, C, kc, step) ssm__cu_mm(L, cnt, 0.f, 0, A, ka, step, B, kb, step, C, kc, step)
#define SSM__CU_MATSTATE(L, cnt, A, ka, B, kb, C, kc, step) ssm__cu_mm(L, cnt, 1.f, 1, A, ka, step, B, kb, step, C, kc, step)

static ssm_result ssm__cu_copy_seq(ssm__cu_lr *L, int64_t count, int64_t cols, ssm__cu_seq src, int64_t ks,
                                   int64_t ss, ssm__cu_seq dst, int64_t kd, int64_t sd) {
    return ssm__cu_copy_launch(L->ctx, L->S, count, L->n, cols, ssm__cu_at(src, ks, ss), ssm__cu_at(dst, kd, sd), 0, 0.f);
}
static ssm__cu_seq ssm__cu_scratch(ssm__cu_lr *L, char **cursor, int64_t count, int64_t cols) {
    ssm__cu_seq v;
    v.p = *cursor, v.dt = 0, v.off = 0, v.ts = L->n * cols, v.rs = cols, v.cs = 1, v.ss = count * L->n * cols;
    *cursor += (size_t)(L->S * count * L->n * cols) * 4u;
    *cursor = (char *)(((uintptr_t)*cursor + 255) & ~(uintptr_t)255);
    return v;
}

/* The fused recurrence kernel: block (c, s) runs steps u = 0 .. len-1 of chunk c of sequence s,
   h_u = A_u h_{u-1} + b_u from h_{-1} = init (zero when init.p is NULL), where chunk c starts at
   time offset c*cs_t in every view (chs = chunk strides). With P.p set it also forms
   P = A_{len-1} ... A_0 (f32, [S, nchunks, n, n]). `skip_last` leaves the chunk's last step out. */
typedef struct ssm__cu_rv {
    void *p;
    int dt;
    int64_t off, ts, rs, cs, ss, chs;
} ssm__cu_rv;

__global__ void ssm__cu_rec_kernel(int n, int m, int64_t T, int64_t L, int skip_last, ssm__cu_rv A, ssm__cu_rv b,
                                   ssm__cu_rv h, ssm__cu_rv init, float *P, int64_t nchunks) {
    extern __shared__ float sm[];
    const int np = n + 1;
    float *As = sm, *hc = As + n * np, *hn = hc + n * m, *Pc = hn + n * m, *Pn = Pc + n * n;
    const int64_t c = blockIdx.x, s = blockIdx.y;
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
static ssm__cu_rv ssm__cu_rv_of(ssm__cu_seq v, int64_t start, int64_t chs_steps) {
    ssm__cu_rv r;
    r.p = v.p, r.dt = v.dt, r.off = v.off + start * v.ts, r.ts = v.ts, r.rs = v.rs, r.cs = v.cs, r.ss = v.ss;
    r.chs = chs_steps * v.ts;
    return r;
}

static ssm_result ssm__cu_rec_launch(ssm__cu_lr *L, int64_t nchunks, int64_t T, int64_t Lc, int skip_last,
                                     ssm__cu_rv A, ssm__cu_rv b, ssm__cu_rv h, ssm__cu_rv init, float *P) {
    size_t smem = ssm__cu_rec_smem(L->n, L->m, P != NULL);
    cudaError_t e;
    if (nchunks <= 0) return SSM_OK;
    if (smem > 48 * 1024) {
        e = cudaFuncSetAttribute(ssm__cu_rec_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (e != cudaSuccess)
            return ssm_ctx_error(L->ctx, SSM_ERROR_BACKEND, "CUDA: cudaFuncSetAttribute(%zu bytes smem): %s", smem,
                                 cudaGetErrorString(e));
    }
    dim3 grid((unsigned)nchunks, (unsigned)L->S);
    ssm__cu_rec_kernel<<<grid, 256, smem, ssm__cu_st(L->ctx)->stream>>>((int)L->n, (int)L->m, T, Lc, skip_last, A, b, h,
                                                                         init, P, nchunks);
    SSM__CU_LAUNCHED(L->ctx, "ssm__cu_rec_kernel");
    L->mat_state += L->S * T;
    return SSM_OK;
}
static int ssm__cu_rec_fits(const ssm__cu_lr *L, int withP) {
    return ssm__cu_rec_smem(L->n, L->m, withP) <= ssm__cu_st(L->ctx)->smem_optin && L->S <= 65535;
}

/* Per-step launches (used where the fused kernel does not fit). h_0 is already in h. */
static ssm_result ssm__cu_lr_sequential_steps(ssm__cu_lr *L, int64_t T, ssm__cu_seq A, ssm__cu_seq b, ssm__cu_seq h) {
    int64_t t;
    for (t = 1; t < T; ++t) {
        SSM__CU_TRY(ssm__cu_copy_seq(L, 1, L->m, b, t, 1, h, t, 1));
        SSM__CU_TRY(SSM__CU_MATSTATE(L, 1, A, t, h, t - 1, h, t, 1));
    }
    return SSM_OK;
}

/* Sequential: steps 1..T-1 (h_0 folded by the caller) in one fused kernel. */
static ssm_result ssm__cu_lr_sequential(ssm__cu_lr *L, int64_t T, ssm__cu_seq A, ssm__cu_seq b, ssm__cu_seq h) {
    ssm__cu_rv init;
    if (T <= 1) return SSM_OK;
    if (!ssm__cu_rec_fits(L, 0)) return ssm__cu_lr_sequential_steps(L, T, A, b, h);
    init = ssm__cu_rv_of(h, 0, 0);
    return ssm__cu_rec_launch(L, 1, T - 1, T, 0, ssm__cu_rv_of(A, 1, 0), ssm__cu_rv_of(b, 1, 0), ssm__cu_rv_of(h, 1, 0),
                              init, NULL);
}

/* Hillis-Steele, double-buffered (as ssm.h's). */
static ssm_result ssm__cu_lr_scan_hs(ssm__cu_lr *L, int64_t T, ssm__cu_seq A, ssm__cu_seq b, ssm__cu_seq h, char *ws) {
    int64_t d;
    ssm__cu_seq Mc = ssm__cu_scratch(L, &ws, T, L->n), Mn = ssm__cu_scratch(L, &ws, T, L->n);
    ssm__cu_seq vc = h, vn = ssm__cu_scratch(L, &ws, T, L->m), tmp;
    SSM__CU_TRY(ssm__cu_copy_seq(L, T - 1, L->n, A, 1, 1, Mc, 1, 1));
    SSM__CU_TRY(ssm__cu_copy_seq(L, T - 1, L->m, b, 1, 1, h, 1, 1));
    for (d = 1; d < T; d *= 2) {
        SSM__CU_TRY(ssm__cu_copy_seq(L, T, L->m, vc, 0, 1, vn, 0, 1));
        SSM__CU_TRY(SSM__CU_MATSTATE(L, T - d, Mc, d, vc, 0, vn, d, 1));
        if (2 * d < T) {
            SSM__CU_TRY(ssm__cu_copy_seq(L, d, L->n, Mc, 1, 1, Mn, 1, 1));
            SSM__CU_TRY(SSM__CU_MATMAT(L, T - d - 1, Mc, d + 1, Mc, 1, Mn, d + 1, 1));
        }
        tmp = Mc; Mc = Mn; Mn = tmp;
        tmp = vc; vc = vn; vn = tmp;
    }
    if (vc.p != h.p || vc.off != h.off) SSM__CU_TRY(ssm__cu_copy_seq(L, T - 1, L->m, vc, 1, 1, h, 1, 1));
    return SSM_OK;
}

/* Blelloch / Brent-Kung in place at stride 2^l (as ssm.h's). */
static ssm_result ssm__cu_lr_blelloch(ssm__cu_lr *L, int64_t T, ssm__cu_seq A, ssm__cu_seq b, ssm__cu_seq h, char *ws) {
    int64_t s, top = 0;
    ssm__cu_seq M = ssm__cu_scratch(L, &ws, T, L->n), P = ssm__cu_scratch(L, &ws, T / 2 + 1, L->n);
    SSM__CU_TRY(ssm__cu_copy_seq(L, T - 1, L->n, A, 1, 1, M, 1, 1));
    SSM__CU_TRY(ssm__cu_copy_seq(L, T - 1, L->m, b, 1, 1, h, 1, 1));
    for (s = 1; 2 * s <= T; s *= 2) {
        int64_t cnt = (T - 2 * s) / (2 * s) + 1;
        top = s;
        SSM__CU_TRY(SSM__CU_MATSTATE(L, cnt, M, 2 * s - 1, h, s - 1, h, 2 * s - 1, 2 * s));
        if (cnt > 1) {
            SSM__CU_TRY(ssm__cu_mm(L, cnt - 1, 0.f, 0, M, 4 * s - 1, 2 * s, M, 3 * s - 1, 2 * s, P, 0, 1));
            SSM__CU_TRY(ssm__cu_copy_seq(L, cnt - 1, L->n, P, 0, 1, M, 4 * s - 1, 2 * s));
        }
    }
    for (s = top; s >= 1; s /= 2) {
        if (3 * s - 1 < T) {
            int64_t cnt = (T - 3 * s) / (2 * s) + 1;
            SSM__CU_TRY(SSM__CU_MATSTATE(L, cnt, M, 3 * s - 1, h, 2 * s - 1, h, 3 * s - 1, 2 * s));
        }
    }
    return SSM_OK;
}

/* Cyclic reduction, compacted levels (as ssm.h's). */
static ssm_result ssm__cu_lr_cr(ssm__cu_lr *L, int64_t T, ssm__cu_seq A, ssm__cu_seq b, ssm__cu_seq h, char *ws) {
    int64_t half = T / 2;
    ssm__cu_seq A2, b2, ho, Ao, Ae, bo, be, he;
    if (T <= 2) return ssm__cu_lr_sequential_steps(L, T, A, b, h);
    A2 = ssm__cu_scratch(L, &ws, half, L->n);
    b2 = ssm__cu_scratch(L, &ws, half, L->m);
    ho = ssm__cu_sub(h, 1, 2);
    Ao = ssm__cu_sub(A, 1, 2), Ae = ssm__cu_sub(A, 0, 2);
    bo = ssm__cu_sub(b, 1, 2), be = ssm__cu_sub(b, 0, 2), he = ssm__cu_sub(h, 0, 2);
    SSM__CU_TRY(ssm__cu_copy_seq(L, 1, L->m, b, 1, 1, h, 1, 1));
    SSM__CU_TRY(SSM__CU_MATSTATE(L, 1, A, 1, h, 0, h, 1, 1));
    SSM__CU_TRY(SSM__CU_MATMAT(L, half - 1, Ao, 1, Ae, 1, A2, 1, 1));
    SSM__CU_TRY(ssm__cu_copy_seq(L, half - 1, L->m, bo, 1, 1, b2, 1, 1));
    SSM__CU_TRY(SSM__CU_MATSTATE(L, half - 1, Ao, 1, be, 1, b2, 1, 1));
    SSM__CU_TRY(ssm__cu_lr_cr(L, half, A2, b2, ho, ws));
    SSM__CU_TRY(ssm__cu_copy_seq(L, (T - 1) / 2, L->m, be, 1, 1, he, 1, 1));
    return SSM__CU_MATSTATE(L, (T - 1) / 2, Ae, 1, ho, 0, he, 1, 1);
}

/* Chunked with per-step batched launches (ssm.h's algorithm; the fallback for big n*m). */
static ssm_result ssm__cu_lr_chunked_steps(ssm__cu_lr *L, int64_t T, ssm__cu_seq A, ssm__cu_seq b, ssm__cu_seq h,
                                           int64_t C, char *ws) {
    int64_t nc, nfull, tail, j, c;
    ssm__cu_seq P, Pt;
    nc = (T - 1) / C, nfull = (T - C) / C, tail = (T - C) % C;
    P = ssm__cu_scratch(L, &ws, nc, L->n);
    Pt = ssm__cu_scratch(L, &ws, nc, L->n);
    SSM__CU_TRY(ssm__cu_lr_sequential_steps(L, C, A, b, h));
    SSM__CU_TRY(ssm__cu_copy_seq(L, nc, L->m, b, C, C, h, C, C));
    SSM__CU_TRY(ssm__cu_copy_seq(L, nc, L->n, A, C, C, P, 0, 1));
    for (j = 1; j < C; ++j) {
        int64_t cnt = nfull + (tail > j ? 1 : 0);
        if (cnt <= 0) break;
        SSM__CU_TRY(ssm__cu_copy_seq(L, cnt, L->m, b, C + j, C, h, C + j, C));
        SSM__CU_TRY(ssm__cu_mm(L, cnt, 1.f, 1, A, C + j, C, h, C + j - 1, C, h, C + j, C));
        SSM__CU_TRY(ssm__cu_mm(L, cnt, 0.f, 0, A, C + j, C, P, 0, 1, Pt, 0, 1));
        SSM__CU_TRY(ssm__cu_copy_seq(L, cnt, L->n, Pt, 0, 1, P, 0, 1));
    }
    for (c = 0; c < nc; ++c) {
        int64_t start = C * (c + 1), end = (start + C < T ? start + C : T) - 1;
        SSM__CU_TRY(ssm__cu_mm(L, 1, 1.f, 1, P, c, 1, h, start - 1, 1, h, end, 1));
    }
    for (j = 0; j < C - 1; ++j) {
        int64_t cnt = nfull + (tail - 1 > j ? 1 : 0);
        if (cnt <= 0) break;
        SSM__CU_TRY(ssm__cu_copy_seq(L, cnt, L->m, b, C + j, C, h, C + j, C));
        SSM__CU_TRY(SSM__CU_MATSTATE(L, cnt, A, C + j, h, C + j - 1, h, C + j, C));
    }
    return SSM_OK;
}

static int ssm__cu_tc_ok(const ssm__cu_lr *L, ssm__cu_seq A, ssm__cu_seq b, ssm__cu_seq h);
static ssm_result ssm__cu_lr_chunked_tc(ssm__cu_lr *L, int64_t T, ssm__cu_seq A, ssm__cu_seq b, ssm__cu_seq h, int64_t Lc,
                                        char *ws);
/* Chunked, fused: (1) every chunk after the first runs from zero and forms P_c, all chunks in
   parallel, while the first chunk runs from h_0; (2) the carry recurrence over chunk ends
   E_c = P_c E_{c-1} + E_c (one kernel); (3) every chunk re-runs from its true carry. */
static ssm_result ssm__cu_lr_chunked(ssm__cu_lr *L, int64_t T, ssm__cu_seq A, ssm__cu_seq b, ssm__cu_seq h, int64_t C,
                                     char *ws) {
    int64_t nc, nfull, tail;
    ssm__cu_seq P, E;
    ssm__cu_rv none;
    if (ssm__cu_tc_ok(L, A, b, h)) return ssm__cu_lr_chunked_tc(L, T, A, b, h, C, ws);
    if (C >= T) return ssm__cu_lr_sequential(L, T, A, b, h);
    if (!ssm__cu_rec_fits(L, 1) || !ssm__cu_rec_fits(L, 0)) return ssm__cu_lr_chunked_steps(L, T, A, b, h, C, ws);
    memset(&none, 0, sizeof none);
    nc = (T - 1) / C, nfull = (T - C) / C, tail = (T - C) % C;
    P = ssm__cu_scratch(L, &ws, nc, L->n);
    /* (1) chunk 0 from h_0 (its steps 1..C-1), chunks 1..nc from zero with products */
    SSM__CU_TRY(ssm__cu_lr_sequential(L, C, A, b, h));
    SSM__CU_TRY(ssm__cu_rec_launch(L, nc, T - C, C, 0, ssm__cu_rv_of(A, C, C), ssm__cu_rv_of(b, C, C),
                                   ssm__cu_rv_of(h, C, C), none, (float *)P.p));
    L->mat_mat += L->S * (T - C - nc);
    /* (2) ends of full chunks: E_u = h[C-1 + u*C], E_u = P_{u-1} E_{u-1} + E_u for u = 1..nfull */
    E = ssm__cu_sub(h, C - 1, C);
    if (nfull > 0) {
        ssm__cu_rv Pv = ssm__cu_rv_of(P, 0, 0), Eb = ssm__cu_rv_of(E, 1, 0), Ei = ssm__cu_rv_of(E, 0, 0);
        SSM__CU_TRY(ssm__cu_rec_launch(L, 1, nfull, nfull, 0, Pv, Eb, Eb, Ei, NULL));
    }
    if (tail > 0) SSM__CU_TRY(ssm__cu_mm(L, 1, 1.f, 1, P, nfull, 1, E, nfull, 1, h, T - 1, 1));
    /* (3) chunks 1..nc from their carries, all steps but the last */
    {
        ssm__cu_rv init = ssm__cu_rv_of(h, C - 1, C);
        SSM__CU_TRY(ssm__cu_rec_launch(L, nc, T - C, C, 1, ssm__cu_rv_of(A, C, C), ssm__cu_rv_of(b, C, C),
                                       ssm__cu_rv_of(h, C, C), init, NULL));
    }
    return SSM_OK;
}

/* ---- chunked recurrence on tensor cores (f16 / bf16 inputs, n = 64, m = 1) -----------------
   Three passes over chunks of L steps of the steps 1..T-1 (h_0 is given):
   (1) one CTA per chunk (all but the last) streams its A_u through a cp.async ring in shared
       memory and forms the chunk product P_c = A_last ... A_first with mma.sync m16n8k16
       (f32 accumulation; the running product is split into hi + lo halves of the input type, so
       the product keeps ~f32 accuracy although the tensor cores take 16-bit operands), and the
       chunk's end state from zero, e_c;
   (2) one CTA per sequence runs the carry recurrence X_c = P_c X_{c-1} + e_c (X_{-1} = h_0), a
       chain of T/L mat-vecs with the P_c prefetched in registers;
   (3) one CTA per chunk re-runs the chunk from its carry, streaming A again (mat-vecs).
   A is read twice, so this is ~2x the HBM floor at best; see docs/cuda.md. A is row-major
   (cs == 1) or transposed (rs == 1, the adjoint's view) with 16-byte aligned rows. */
#define SSM__TC_N 64
#define SSM__TC_LD 72 /* padded row (halfs): 144 bytes, conflict-free ldmatrix */
#define SSM__TC_NST 6 /* cp.async ring depth: 5 tiles in flight per CTA (loaded HBM latency) */
#define SSM__TC_LMAX 128 /* longest chunk (b of the chunk is staged in shared memory) */
#define SSM__TC_TILE (SSM__TC_N * SSM__TC_LD)

__device__ __forceinline__ unsigned ssm__tc_sa(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void ssm__tc_cp16(void *dst, const void *src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(ssm__tc_sa(dst)), "l"(src));
}
__device__ __forceinline__ void ssm__tc_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void ssm__tc_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }
__device__ __forceinline__ void ssm__tc_ldm4(unsigned r[4], const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(ssm__tc_sa(p)));
}
__device__ __forceinline__ void ssm__tc_ldm4t(unsigned r[4], const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(ssm__tc_sa(p)));
}
template <int BF> __device__ __forceinline__ void ssm__tc_mma(float c[4], const unsigned a[4], unsigned b0, unsigned b1) {
    if (BF)
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                     "{%0,%1,%2,%3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    else
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                     "{%0,%1,%2,%3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
/* c = a b (zero accumulator in: no per-step clearing of the accumulators) */
template <int BF> __device__ __forceinline__ void ssm__tc_mma0(float c[4], const unsigned a[4], unsigned b0, unsigned b1) {
    const float z = 0.f;
    if (BF)
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                     "{%10,%10,%10,%10};\n"
                     : "=f"(c[0]), "=f"(c[1]), "=f"(c[2]), "=f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(z));
    else
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                     "{%10,%10,%10,%10};\n"
                     : "=f"(c[0]), "=f"(c[1]), "=f"(c[2]), "=f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(z));
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

/* bs[e] = b(u = e / 64, row = e % 64) for e < count, nt threads: 8 independent loads in flight per
   thread (a dependent load-convert-store loop would pay one memory latency per element). */
__device__ __forceinline__ void ssm__tc_stage_b(float *bs, int count, ssm__cu_rv b, int64_t bbase, int tid, int nt) {
    for (int e0 = tid; e0 < count; e0 += 8 * nt) {
        float v[8];
#pragma unroll
        for (int k = 0; k < 8; ++k) {
            int e = e0 + k * nt;
            v[k] = e < count ? ssm__cu_ld(b.p, b.dt, bbase + (e >> 6) * b.ts + (e & 63) * b.rs) : 0.f;
        }
#pragma unroll
        for (int k = 0; k < 8; ++k)
            if (e0 + k * nt < count) bs[e0 + k * nt] = v[k];
    }
}

/* Pass 1 (WP = 1: chunk c < nc-1, from zero, writes P_c, e_c) and pass 3 (WP = 0: chunk c from
   X_c, writes h). TR: A is stored transposed (rs == 1, rows of storage along A's columns). */
template <int TR, int BF, int WP>
__global__ void __launch_bounds__(256) ssm__cu_tc_kernel(int64_t T1, int Lc, ssm__cu_rv A, int64_t aos, ssm__cu_rv b,
                                                         ssm__cu_rv h, float *X, int64_t nc, float *P, float *E,
                                                         int split, ssm__cu_rv o) {
    extern __shared__ __align__(16) unsigned char ssm__tc_sm[];
    typedef unsigned short u16;
    u16 *As = (u16 *)ssm__tc_sm;                                  /* NST tiles */
    float *hs = (float *)(As + SSM__TC_NST * SSM__TC_TILE);       /* 2 x 64 */
    float *bs = hs + 2 * SSM__TC_N;                               /* Lc x 64: b of the chunk */
    u16 *Pb = (u16 *)(bs + Lc * SSM__TC_N);                       /* [buf][hi/lo] tiles (WP) */
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int64_t c = blockIdx.x, s = blockIdx.y;
    int64_t len64 = T1 - c * (int64_t)Lc;
    const int len = (int)(len64 < Lc ? len64 : Lc);
    const u16 *Ag = (const u16 *)A.p;
    const int64_t abase = A.off + s * A.ss + c * A.chs;
    const int64_t bbase = b.off + s * b.ss + c * b.chs, hbase = h.off + s * h.ss + c * h.chs;
    const int row = tid >> 2, q = tid & 3;
    float acc[4][4];
    if (len <= 0) return;
    /* prologue: the first NST-1 tiles in flight */
#pragma unroll
    for (int u = 0; u < SSM__TC_NST - 1; ++u) {
        if (u < len) {
            const u16 *src = Ag + abase + u * A.ts;
            u16 *dst = As + u * SSM__TC_TILE;
#pragma unroll
            for (int k = 0; k < 2; ++k) {
                int id = tid + 256 * k, r = id >> 3, c8 = (id & 7) * 8;
                ssm__tc_cp16(dst + r * SSM__TC_LD + c8, src + r * aos + c8);
            }
        }
        ssm__tc_commit();
    }
    if (tid < SSM__TC_N) hs[tid] = WP ? 0.f : X[(s * nc + c) * SSM__TC_N + tid];
    if (WP) {
        for (int e = tid; e < SSM__TC_N * SSM__TC_N; e += 256) {
            int i = e >> 6, j = e & 63;
            u16 one = BF ? (u16)0x3F80 : (u16)0x3C00;
            Pb[i * SSM__TC_LD + j] = i == j ? one : 0;            /* buf 0 hi = I */
            Pb[SSM__TC_TILE + i * SSM__TC_LD + j] = 0;             /* buf 0 lo = 0 */
        }
    }
    ssm__tc_stage_b(bs, len * SSM__TC_N, b, bbase, tid, 256);
    for (int u = 0; u < len; ++u) {
        ssm__tc_wait<SSM__TC_NST - 2>();
        __syncthreads();
        {
            int un = u + SSM__TC_NST - 1;
            if (un < len) {
                const u16 *src = Ag + abase + un * A.ts;
                u16 *dst = As + (un % SSM__TC_NST) * SSM__TC_TILE;
#pragma unroll
                for (int k = 0; k < 2; ++k) {
                    int id = tid + 256 * k, r = id >> 3, c8 = (id & 7) * 8;
                    ssm__tc_cp16(dst + r * SSM__TC_LD + c8, src + r * aos + c8);
                }
            }
            ssm__tc_commit();
        }
        const u16 *At = As + (u % SSM__TC_NST) * SSM__TC_TILE;
        const float *hc = hs + (u & 1) * SSM__TC_N;
        float *hn = hs + ((u + 1) & 1) * SSM__TC_N;
        const float bcur = bs[u * SSM__TC_N + row];
        /* mat-vec: thread (row, q) sums a quarter of row `row` of A_u */
        {
            float p0 = 0.f, p1 = 0.f;
            if (!TR) {
                const uint4 *ap = (const uint4 *)(At + row * SSM__TC_LD + q * 16);
                uint4 v0 = ap[0], v1 = ap[1];
                const float4 *hp = (const float4 *)(hc + q * 16);
                float4 x0 = hp[0], x1 = hp[1], x2 = hp[2], x3 = hp[3];
                float2 f;
                f = ssm__tc_f2<BF>(v0.x); p0 += f.x * x0.x; p1 += f.y * x0.y;
                f = ssm__tc_f2<BF>(v0.y); p0 += f.x * x0.z; p1 += f.y * x0.w;
                f = ssm__tc_f2<BF>(v0.z); p0 += f.x * x1.x; p1 += f.y * x1.y;
                f = ssm__tc_f2<BF>(v0.w); p0 += f.x * x1.z; p1 += f.y * x1.w;
                f = ssm__tc_f2<BF>(v1.x); p0 += f.x * x2.x; p1 += f.y * x2.y;
                f = ssm__tc_f2<BF>(v1.y); p0 += f.x * x2.z; p1 += f.y * x2.w;
                f = ssm__tc_f2<BF>(v1.z); p0 += f.x * x3.x; p1 += f.y * x3.y;
                f = ssm__tc_f2<BF>(v1.w); p0 += f.x * x3.z; p1 += f.y * x3.w;
            } else {
#pragma unroll
                for (int j = 0; j < 16; j += 2) {
                    int k0 = 4 * j + q, k1 = 4 * (j + 1) + q;
                    u16 a0 = At[k0 * SSM__TC_LD + row], a1 = At[k1 * SSM__TC_LD + row];
                    unsigned pr = (unsigned)a0 | ((unsigned)a1 << 16);
                    float2 f = ssm__tc_f2<BF>(pr);
                    p0 += f.x * hc[k0];
                    p1 += f.y * hc[k1];
                }
            }
            float v = p0 + p1;
            v += __shfl_xor_sync(0xffffffffu, v, 1);
            v += __shfl_xor_sync(0xffffffffu, v, 2);
            v += bcur;
            if (q == 0) {
                hn[row] = v;
                if (!WP) {
                    ssm__cu_stv(h.p, h.dt, hbase + u * h.ts + row * h.rs, v);
                    if (o.p) ssm__cu_stv(o.p, o.dt, o.off + s * o.ss + c * o.chs + u * o.ts + row * o.rs, v);
                }
                else if (u == len - 1) E[(s * (nc - 1) + c) * SSM__TC_N + row] = v;
            }
        }
        if (WP) {
            /* P_new = A_u P_old: warp w owns rows 16*(w&3).., cols 32*(w>>2).. (4 n8 tiles) */
            const int mr = (warp & 3) * 16, nc0 = (warp >> 2) * 32;
            const u16 *Ph = Pb + (u & 1) * 2 * SSM__TC_TILE, *Pl = Ph + SSM__TC_TILE;
            u16 *Qh = Pb + ((u + 1) & 1) * 2 * SSM__TC_TILE, *Ql = Qh + SSM__TC_TILE;
            float acc2[4][4];
#pragma unroll
            for (int t = 0; t < 4; ++t)
                acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = acc2[t][0] = acc2[t][1] = acc2[t][2] = acc2[t][3] = 0.f;
#pragma unroll
            for (int kk = 0; kk < 4; ++kk) {
                unsigned a[4], bh[2][4], bl[2][4];
                const int j = lane >> 3, r = lane & 7;
                if (!TR) ssm__tc_ldm4(a, At + (mr + (lane & 15)) * SSM__TC_LD + kk * 16 + (lane >> 4) * 8);
                else ssm__tc_ldm4t(a, At + (kk * 16 + (j >> 1) * 8 + r) * SSM__TC_LD + mr + (j & 1) * 8);
#pragma unroll
                for (int p = 0; p < 2; ++p) {
                    int off = (kk * 16 + (j & 1) * 8 + r) * SSM__TC_LD + nc0 + 16 * p + (j >> 1) * 8;
                    ssm__tc_ldm4t(bh[p], Ph + off);
                    if (split) ssm__tc_ldm4t(bl[p], Pl + off);
                }
                /* two accumulator sets (by k-slab parity) halve the dependent mma chains */
#pragma unroll
                for (int p = 0; p < 2; ++p) {
                    float(*ac)[4] = (kk & 1) ? acc2 : acc;
                    ssm__tc_mma<BF>(ac[2 * p], a, bh[p][0], bh[p][1]);
                    ssm__tc_mma<BF>(ac[2 * p + 1], a, bh[p][2], bh[p][3]);
                    if (split) {
                        ssm__tc_mma<BF>(ac[2 * p], a, bl[p][0], bl[p][1]);
                        ssm__tc_mma<BF>(ac[2 * p + 1], a, bl[p][2], bl[p][3]);
                    }
                }
            }
#pragma unroll
            for (int t = 0; t < 4; ++t)
#pragma unroll
                for (int z = 0; z < 4; ++z) acc[t][z] += acc2[t][z];
            if (u + 1 < len) {
#pragma unroll
                for (int t = 0; t < 4; ++t) {
                    int r0 = mr + (lane >> 2), c0 = nc0 + 8 * t + 2 * (lane & 3);
                    unsigned hi, lo;
                    ssm__tc_split<BF>(acc[t][0], acc[t][1], &hi, &lo);
                    *(unsigned *)(Qh + r0 * SSM__TC_LD + c0) = hi, *(unsigned *)(Ql + r0 * SSM__TC_LD + c0) = lo;
                    ssm__tc_split<BF>(acc[t][2], acc[t][3], &hi, &lo);
                    *(unsigned *)(Qh + (r0 + 8) * SSM__TC_LD + c0) = hi, *(unsigned *)(Ql + (r0 + 8) * SSM__TC_LD + c0) = lo;
                }
            }
        }
    }
    if (WP) {
        const int mr = (warp & 3) * 16, nc0 = (warp >> 2) * 32;
        float *dst = P + (s * (nc - 1) + c) * (int64_t)(SSM__TC_N * SSM__TC_N);
#pragma unroll
        for (int t = 0; t < 4; ++t) {
            int r0 = mr + (lane >> 2), c0 = nc0 + 8 * t + 2 * (lane & 3);
            *(float2 *)(dst + r0 * SSM__TC_N + c0) = make_float2(acc[t][0], acc[t][1]);
            *(float2 *)(dst + (r0 + 8) * SSM__TC_N + c0) = make_float2(acc[t][2], acc[t][3]);
        }
    }
}

/* Pass 1, register-resident product: the running product is kept transposed, Q = P^T, and
   Q <- Q A_u^T, so that Q is the mma A operand and stays in registers (the f32 accumulator
   fragment of one step is the 16-bit A fragment of the next) while A_u^T is the B operand read
   from the cp.async ring with ldmatrix. Warps 0..1 own 32 rows of Q each; warp 2 runs the local
   end state e (row 0 = e_hi, row 1 = e_lo of a 16-row block, so e keeps ~f32 accuracy):
   e <- e A_u^T + b_u^T. No barrier is needed for the product itself, only for the tile ring. */
#define SSM__TP_MB 2
#define SSM__TP_THREADS 96
#define SSM__TP_NST 4 /* shallower ring than pass 3: 4 CTAs per SM, 3 tiles in flight each */
template <int TR, int BF, int SPLIT>
__global__ void __launch_bounds__(SSM__TP_THREADS) ssm__cu_tc_prod_kernel(int Lc, ssm__cu_rv A, int64_t aos, ssm__cu_rv b,
                                                                          int64_t nc, float *P, float *E) {
    extern __shared__ __align__(16) unsigned char ssm__tp_sm[];
    typedef unsigned short u16;
    u16 *As = (u16 *)ssm__tp_sm;
    float *bs = (float *)(As + SSM__TP_NST * SSM__TC_TILE);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int64_t c = blockIdx.x, s = blockIdx.y;
    const int len = Lc;
    const u16 *Ag = (const u16 *)A.p;
    const int64_t abase = A.off + s * A.ss + c * A.chs, bbase = b.off + s * b.ss + c * b.chs;
    const int isE = warp == 2;
    const int j8 = lane >> 3, r8 = lane & 7, lr = lane >> 2, lc = 2 * (lane & 3);
    float acc[SSM__TP_MB][8][4];
    unsigned af[SSM__TP_MB][4][4], al[SSM__TP_MB][4][4];
#pragma unroll
    for (int u = 0; u < SSM__TP_NST - 1; ++u) {
        if (u < len) {
            const u16 *src = Ag + abase + u * A.ts;
            u16 *dst = As + u * SSM__TC_TILE;
            for (int id = tid; id < 512; id += SSM__TP_THREADS) {
                int r = id >> 3, c8 = (id & 7) * 8;
                ssm__tc_cp16(dst + r * SSM__TC_LD + c8, src + r * aos + c8);
            }
        }
        ssm__tc_commit();
    }
    ssm__tc_stage_b(bs, len * SSM__TC_N, b, bbase, tid, SSM__TP_THREADS);
    /* Q = I (product warps), e = 0 */
#pragma unroll
    for (int mb = 0; mb < SSM__TP_MB; ++mb)
#pragma unroll
        for (int t = 0; t < 8; ++t)
#pragma unroll
            for (int z = 0; z < 4; ++z) {
                int row = warp * 32 + mb * 16 + lr + (z >> 1) * 8, col = 8 * t + lc + (z & 1);
                acc[mb][t][z] = (!isE && row == col) ? 1.f : 0.f;
            }
    for (int u = 0; u < len; ++u) {
        ssm__tc_wait<SSM__TP_NST - 2>();
        __syncthreads();
        {
            int un = u + SSM__TP_NST - 1;
            if (un < len) {
                const u16 *src = Ag + abase + un * A.ts;
                u16 *dst = As + (un % SSM__TP_NST) * SSM__TC_TILE;
                for (int id = tid; id < 512; id += SSM__TP_THREADS) {
                    int r = id >> 3, c8 = (id & 7) * 8;
                    ssm__tc_cp16(dst + r * SSM__TC_LD + c8, src + r * aos + c8);
                }
            }
            ssm__tc_commit();
        }
        const u16 *At = As + (u % SSM__TP_NST) * SSM__TC_TILE;
        /* accumulators -> 16-bit A fragments (product warps: Q; e warp: rows e_hi, e_lo) */
        if (!isE) {
#pragma unroll
            for (int mb = 0; mb < SSM__TP_MB; ++mb)
#pragma unroll
                for (int kk = 0; kk < 4; ++kk) {
                    if (!SPLIT) {
                        af[mb][kk][0] = ssm__tc_pack<BF>(acc[mb][2 * kk][0], acc[mb][2 * kk][1]);
                        af[mb][kk][1] = ssm__tc_pack<BF>(acc[mb][2 * kk][2], acc[mb][2 * kk][3]);
                        af[mb][kk][2] = ssm__tc_pack<BF>(acc[mb][2 * kk + 1][0], acc[mb][2 * kk + 1][1]);
                        af[mb][kk][3] = ssm__tc_pack<BF>(acc[mb][2 * kk + 1][2], acc[mb][2 * kk + 1][3]);
                        continue;
                    }
                    ssm__tc_split<BF>(acc[mb][2 * kk][0], acc[mb][2 * kk][1], &af[mb][kk][0], &al[mb][kk][0]);
                    ssm__tc_split<BF>(acc[mb][2 * kk][2], acc[mb][2 * kk][3], &af[mb][kk][1], &al[mb][kk][1]);
                    ssm__tc_split<BF>(acc[mb][2 * kk + 1][0], acc[mb][2 * kk + 1][1], &af[mb][kk][2], &al[mb][kk][2]);
                    ssm__tc_split<BF>(acc[mb][2 * kk + 1][2], acc[mb][2 * kk + 1][3], &af[mb][kk][3], &al[mb][kk][3]);
                }
        } else {
            /* lanes 0-3 hold e (f32) in acc[0][t][0..1]; lanes 4-7 take its lo part */
#pragma unroll
            for (int kk = 0; kk < 4; ++kk) {
                unsigned h0, l0, h1, l1;
                ssm__tc_split<BF>(acc[0][2 * kk][0], acc[0][2 * kk][1], &h0, &l0);
                ssm__tc_split<BF>(acc[0][2 * kk + 1][0], acc[0][2 * kk + 1][1], &h1, &l1);
                unsigned sl0 = __shfl_sync(0xffffffffu, l0, lane & 3), sl1 = __shfl_sync(0xffffffffu, l1, lane & 3);
                af[0][kk][0] = lane < 4 ? h0 : (lane < 8 ? sl0 : 0u);
                af[0][kk][2] = lane < 4 ? h1 : (lane < 8 ? sl1 : 0u);
                af[0][kk][1] = af[0][kk][3] = 0u;
            }
        }
#pragma unroll
        for (int kk = 0; kk < 4; ++kk)
#pragma unroll
            for (int np = 0; np < 4; ++np) {
                /* B = A_u^T, k-slab kk, n-tiles 2np and 2np+1 */
                unsigned bf[4];
                const int n0 = 16 * np, k0 = 16 * kk;
                if (!TR) ssm__tc_ldm4(bf, At + (n0 + (j8 >> 1) * 8 + r8) * SSM__TC_LD + k0 + (j8 & 1) * 8);
                else ssm__tc_ldm4t(bf, At + (k0 + (j8 & 1) * 8 + r8) * SSM__TC_LD + n0 + (j8 >> 1) * 8);
                if (!isE) {
#pragma unroll
                    for (int mb = 0; mb < SSM__TP_MB; ++mb) {
                        if (kk == 0) {
                            ssm__tc_mma0<BF>(acc[mb][2 * np], af[mb][kk], bf[0], bf[1]);
                            ssm__tc_mma0<BF>(acc[mb][2 * np + 1], af[mb][kk], bf[2], bf[3]);
                        } else {
                            ssm__tc_mma<BF>(acc[mb][2 * np], af[mb][kk], bf[0], bf[1]);
                            ssm__tc_mma<BF>(acc[mb][2 * np + 1], af[mb][kk], bf[2], bf[3]);
                        }
                        if (SPLIT) { /* hi/lo split of the running product */
                            ssm__tc_mma<BF>(acc[mb][2 * np], al[mb][kk], bf[0], bf[1]);
                            ssm__tc_mma<BF>(acc[mb][2 * np + 1], al[mb][kk], bf[2], bf[3]);
                        }
                    }
                } else if (kk == 0) {
                    ssm__tc_mma0<BF>(acc[0][2 * np], af[0][kk], bf[0], bf[1]);
                    ssm__tc_mma0<BF>(acc[0][2 * np + 1], af[0][kk], bf[2], bf[3]);
                } else {
                    ssm__tc_mma<BF>(acc[0][2 * np], af[0][kk], bf[0], bf[1]);
                    ssm__tc_mma<BF>(acc[0][2 * np + 1], af[0][kk], bf[2], bf[3]);
                }
            }
        if (isE) { /* e = row0 + row1 + b_u */
            const float *bu = bs + u * SSM__TC_N;
#pragma unroll
            for (int t = 0; t < 8; ++t) {
                float x = __shfl_down_sync(0xffffffffu, acc[0][t][0], 4), y = __shfl_down_sync(0xffffffffu, acc[0][t][1], 4);
                acc[0][t][0] += x + bu[8 * t + lc];
                acc[0][t][1] += y + bu[8 * t + lc + 1];
            }
        }
    }
    if (!isE) { /* P = Q^T */
        float *dst = P + (s * (nc - 1) + c) * (int64_t)(SSM__TC_N * SSM__TC_N);
#pragma unroll
        for (int mb = 0; mb < SSM__TP_MB; ++mb)
#pragma unroll
            for (int t = 0; t < 8; ++t)
#pragma unroll
                for (int z = 0; z < 4; ++z) {
                    int row = warp * 32 + mb * 16 + lr + (z >> 1) * 8, col = 8 * t + lc + (z & 1);
                    dst[col * SSM__TC_N + row] = acc[mb][t][z];
                }
    } else if (lane < 4) {
        float *dst = E + (s * (nc - 1) + c) * SSM__TC_N;
#pragma unroll
        for (int t = 0; t < 8; ++t) *(float2 *)(dst + 8 * t + lc) = make_float2(acc[0][t][0], acc[0][t][1]);
    }
}

/* Pass 2: X_0 = h_0, X_{c+1} = P_c X_c + e_c for c < nc-1; one CTA of 256 per sequence. Thread
   (row, q) keeps the next D rows-quarters of P in registers. */
#define SSM__TC_D 8
__global__ void __launch_bounds__(256) ssm__cu_tc_carry_kernel(int64_t nc, const float *P, const float *E,
                                                               ssm__cu_rv h, float *X) {
    __shared__ __align__(16) float xs[2][SSM__TC_N];
    const int tid = threadIdx.x, row = tid >> 2, q = tid & 3;
    const int64_t s = blockIdx.x, np = nc - 1;
    const float *Ps = P + s * np * (SSM__TC_N * SSM__TC_N) + row * SSM__TC_N + q * 16;
    const float *Es = E + s * np * SSM__TC_N + row;
    float *Xs = X + s * nc * SSM__TC_N;
    float4 pr[SSM__TC_D][4];
    float er[SSM__TC_D];
    if (tid < SSM__TC_N) {
        float v = ssm__cu_ld(h.p, h.dt, h.off + s * h.ss + tid * h.rs);
        xs[0][tid] = v;
        Xs[tid] = v;
    }
#pragma unroll
    for (int d = 0; d < SSM__TC_D; ++d)
        if (d < np) {
            const float4 *p4 = (const float4 *)(Ps + d * (int64_t)(SSM__TC_N * SSM__TC_N));
            pr[d][0] = p4[0], pr[d][1] = p4[1], pr[d][2] = p4[2], pr[d][3] = p4[3];
            er[d] = Es[d * SSM__TC_N];
        }
    __syncthreads();
    for (int64_t c0 = 0; c0 < np; c0 += SSM__TC_D) {
#pragma unroll
        for (int d = 0; d < SSM__TC_D; ++d) {
            const int64_t c = c0 + d;
            if (c < np) {
                const float4 *x4 = (const float4 *)(xs[c & 1] + q * 16);
                float4 x0 = x4[0], x1 = x4[1], x2 = x4[2], x3 = x4[3];
                float v0 = pr[d][0].x * x0.x + pr[d][0].y * x0.y + pr[d][0].z * x0.z + pr[d][0].w * x0.w;
                float v1 = pr[d][1].x * x1.x + pr[d][1].y * x1.y + pr[d][1].z * x1.z + pr[d][1].w * x1.w;
                float v2 = pr[d][2].x * x2.x + pr[d][2].y * x2.y + pr[d][2].z * x2.z + pr[d][2].w * x2.w;
                float v3 = pr[d][3].x * x3.x + pr[d][3].y * x3.y + pr[d][3].z * x3.z + pr[d][3].w * x3.w;
                float v = (v0 + v1) + (v2 + v3);
                v += __shfl_xor_sync(0xffffffffu, v, 1);
                v += __shfl_xor_sync(0xffffffffu, v, 2);
                v += er[d];
                if (c + 4 * SSM__TC_D < np) /* pull P_{c+32} into L2: the register ring then hits L2 */
                    asm volatile("prefetch.global.L2 [%0];\n" ::"l"(Ps + (c + 4 * SSM__TC_D) * (int64_t)(SSM__TC_N * SSM__TC_N)));
                if (c + SSM__TC_D < np) {
                    const float4 *p4 = (const float4 *)(Ps + (c + SSM__TC_D) * (int64_t)(SSM__TC_N * SSM__TC_N));
                    pr[d][0] = p4[0], pr[d][1] = p4[1], pr[d][2] = p4[2], pr[d][3] = p4[3];
                    er[d] = Es[(c + SSM__TC_D) * SSM__TC_N];
                }
                if (q == 0) {
                    xs[(c + 1) & 1][row] = v;
                    Xs[(c + 1) * SSM__TC_N + row] = v;
                }
                __syncthreads();
            }
        }
    }
}

/* hi/lo split of the running product: on for bf16 (8-bit mantissa), off for f16 (11 bits: the
   product's rounding stayed under the f16 output rounding, bench/results/cuda_linrec_perf.log);
   development switches for benchmarks built into the same translation unit: split -1 = by dtype,
   0/1 forced; oldprod 1 = the earlier fused products kernel. */
static int ssm__cu_tc_split = -1, ssm__cu_tc_oldprod = 0;
static int ssm__cu_tc_split_default(int bf) { return ssm__cu_tc_split >= 0 ? ssm__cu_tc_split : bf; }

/* Shape / layout test for the tensor-core path. */
static int ssm__cu_tc_ok(const ssm__cu_lr *L, ssm__cu_seq A, ssm__cu_seq b, ssm__cu_seq h) {
    int64_t os;
    if (L->n != SSM__TC_N || L->m != 1 || (A.dt != 1 && A.dt != 2) || L->S > 65535) return 0;
    if (A.cs == 1) os = A.rs;
    else if (A.rs == 1) os = A.cs;
    else return 0;
    if (((uintptr_t)A.p & 15) || (A.off & 7) || (A.ts & 7) || (A.ss & 7) || (os & 7)) return 0;
    (void)b, (void)h;
    return ssm__cu_st(L->ctx)->smem_optin >= (size_t)(SSM__TC_NST + 4) * SSM__TC_TILE * 2 + 512 + SSM__TC_LMAX * SSM__TC_N * 4;
}
static int64_t ssm__cu_tc_scratch_elems(int64_t T, int64_t L) {
    int64_t nc = L > 0 ? (T - 1 + L - 1) / L : 0;
    if (nc < 1) nc = 1;
    return nc * (SSM__TC_N * SSM__TC_N + 2 * SSM__TC_N) + 3 * 64;
}

template <int TR, int BF>
static ssm_result ssm__cu_tc_go(ssm__cu_lr *L, int64_t T1, int Lc, int64_t nc, ssm__cu_rv A, int64_t aos, ssm__cu_rv b,
                                ssm__cu_rv h, ssm__cu_rv h0, float *X, float *P, float *E, ssm__cu_rv o) {
    cudaStream_t st = ssm__cu_st(L->ctx)->stream;
    size_t sm3 = (size_t)SSM__TC_NST * SSM__TC_TILE * 2 + (2 + (size_t)Lc) * SSM__TC_N * 4;
    size_t sm1 = sm3 + (size_t)4 * SSM__TC_TILE * 2;
    int split = ssm__cu_tc_split_default(BF);
    cudaError_t e = cudaFuncSetAttribute(ssm__cu_tc_kernel<TR, BF, 1>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sm1);
    if (e == cudaSuccess)
        e = cudaFuncSetAttribute(ssm__cu_tc_kernel<TR, BF, 0>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sm3);
    if (e != cudaSuccess)
        return ssm_ctx_error(L->ctx, SSM_ERROR_BACKEND, "CUDA: cudaFuncSetAttribute(%zu bytes smem): %s", sm1,
                             cudaGetErrorString(e));
    if (nc > 1) {
        if (ssm__cu_tc_oldprod) {
            ssm__cu_tc_kernel<TR, BF, 1><<<dim3((unsigned)(nc - 1), (unsigned)L->S), 256, sm1, st>>>(T1, Lc, A, aos, b, h, X, nc,
                                                                                                    P, E, split, o);
        } else {
            size_t smp = (size_t)SSM__TP_NST * SSM__TC_TILE * 2 + (size_t)Lc * SSM__TC_N * 4;
            dim3 grid((unsigned)(nc - 1), (unsigned)L->S);
            e = cudaFuncSetAttribute(split ? ssm__cu_tc_prod_kernel<TR, BF, 1> : ssm__cu_tc_prod_kernel<TR, BF, 0>,
                                     cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smp);
            if (e != cudaSuccess)
                return ssm_ctx_error(L->ctx, SSM_ERROR_BACKEND, "CUDA: cudaFuncSetAttribute(%zu bytes smem): %s", smp,
                                     cudaGetErrorString(e));
            if (split) ssm__cu_tc_prod_kernel<TR, BF, 1><<<grid, SSM__TP_THREADS, smp, st>>>(Lc, A, aos, b, nc, P, E);
            else ssm__cu_tc_prod_kernel<TR, BF, 0><<<grid, SSM__TP_THREADS, smp, st>>>(Lc, A, aos, b, nc, P, E);
        }
        SSM__CU_LAUNCHED(L->ctx, "ssm__cu_tc_kernel (products)");
    }
    ssm__cu_tc_carry_kernel<<<(unsigned)L->S, 256, 0, st>>>(nc, P, E, h0, X);
    SSM__CU_LAUNCHED(L->ctx, "ssm__cu_tc_carry_kernel");
    ssm__cu_tc_kernel<TR, BF, 0><<<dim3((unsigned)nc, (unsigned)L->S), 256, sm3, st>>>(T1, Lc, A, aos, b, h, X, nc, P, E,
                                                                                       split, o);
    SSM__CU_LAUNCHED(L->ctx, "ssm__cu_tc_kernel (states)");
    return SSM_OK;
}

/* Steps 1..T-1 from h_0 (already in h) on tensor cores; Lc steps per chunk. */
static ssm_result ssm__cu_lr_chunked_tc(ssm__cu_lr *L, int64_t T, ssm__cu_seq A, ssm__cu_seq b, ssm__cu_seq h, int64_t Lc,
                                        char *ws) {
    int64_t T1 = T - 1, nc, aos;
    ssm__cu_rv Av, bv, hv, h0, ov;
    float *X, *P, *E;
    int tr = A.cs != 1;
    if (T1 <= 0) return SSM_OK;
    if (Lc < 1) Lc = 64;
    if (Lc > T1) Lc = T1;
    if (Lc > SSM__TC_LMAX) Lc = SSM__TC_LMAX; /* a performance hint only: results do not depend on it */
    nc = (T1 + Lc - 1) / Lc;
    if (nc > 2147483647) return ssm__cu_lr_sequential(L, T, A, b, h);
    aos = tr ? A.cs : A.rs;
    P = (float *)ws;
    E = P + L->S * (nc - 1) * SSM__TC_N * SSM__TC_N;
    X = E + L->S * (nc - 1) * SSM__TC_N;
    Av = ssm__cu_rv_of(A, 1, Lc), bv = ssm__cu_rv_of(b, 1, Lc), hv = ssm__cu_rv_of(h, 1, Lc), h0 = ssm__cu_rv_of(h, 0, 0);
    L->mat_mat += L->S * (nc - 1) * Lc;
    L->mat_state += L->S * T1 * 2 + L->S * (nc - 1);
    /* the caller's output view too: its copy of steps 1..T-1 from the f32 work buffer is skipped */
    if (L->has_out) ov = ssm__cu_rv_of(L->out, 1, Lc), L->out_written = 1;
    else memset(&ov, 0, sizeof ov);
    if (A.dt == 2) return tr ? ssm__cu_tc_go<1, 1>(L, T1, (int)Lc, nc, Av, aos, bv, hv, h0, X, P, E, ov)
                             : ssm__cu_tc_go<0, 1>(L, T1, (int)Lc, nc, Av, aos, bv, hv, h0, X, P, E, ov);
    return tr ? ssm__cu_tc_go<1, 0>(L, T1, (int)Lc, nc, Av, aos, bv, hv, h0, X, P, E, ov)
              : ssm__cu_tc_go<0, 0>(L, T1, (int)Lc, nc, Av, aos, bv, hv, h0, X, P, E, ov);
}

static int64_t ssm__cu_lr_scratch_elems(ssm_linrec_method method, int64_t T, int64_t n, int64_t m, int64_t chunk) {
    int64_t e = 0, L;
    switch (method) {
    case SSM_LINREC_SCAN_HS: return 2 * T * n * n + T * n * m + 3 * 64;
    case SSM_LINREC_BLELLOCH: return (T + T / 2 + 1) * n * n + 2 * 64;
    case SSM_LINREC_CR:
        for (L = T; L > 2; L /= 2) e += (L / 2) * (n * n + n * m) + 2 * 64;
        return e;
    case SSM_LINREC_CHUNKED:
        if (chunk >= T) return n == SSM__TC_N && m == 1 ? ssm__cu_tc_scratch_elems(T, chunk) : 0;
        return 2 * ((T - 1) / chunk) * n * n + 2 * 64 + (n == SSM__TC_N && m == 1 ? ssm__cu_tc_scratch_elems(T, chunk) : 0);
    default: return 0;
    }
}

extern "C" SSMDEF ssm_linrec_method ssm_cuda_linrec_pick(const ssm_ctx *ctx, ssm_dtype dtype, int64_t S, int64_t T,
                                                         int64_t n, int64_t m) {
    int sms = ctx && ssm__cu_st(ctx) ? ssm__cu_st(ctx)->sms : 132;
    /* 16-bit inputs, n = 64, m = 1: the tensor-core chunked path (bench/results/cuda_linrec_perf.log) */
    if (dtype.bits == 16 && n == SSM__TC_N && m == 1 && T > 64) return SSM_LINREC_CHUNKED;
    if (T <= 64 || S >= 2 * (int64_t)sms) return SSM_LINREC_SEQUENTIAL;
    /* too few sequences to fill the GPU: cyclic reduction won at S=1 T=8192 n=64 (1.34 ms vs 2.7) */
    if (S * 8 <= (int64_t)sms) return SSM_LINREC_CR;
    return SSM_LINREC_CHUNKED;
}
static ssm_linrec_method ssm__cu_pick(const ssm_ctx *ctx, ssm_dtype dtype, int64_t S, int64_t T, int64_t n, int64_t m) {
    return ssm_cuda_linrec_pick(ctx, dtype, S, T, n, m);
}
/* Chunk length: the descriptor's, or for AUTO about sqrt(T) (balances the chunk depth against
   the carry recurrence), at least 16; the generic default 64 for an explicit CHUNKED. */
static int64_t ssm__cu_chunk(const ssm_ctx *ctx, const ssm_linrec_desc *d, ssm_dtype dt, int64_t S, int64_t T,
                             int64_t n, int64_t m) {
    int64_t c = 16;
    if (d->chunk) return d->chunk;
    /* tensor-core path: 64 beat 32, 128 and 16 at S16 T4096 and S1 T8192 (H200,
       bench/results/cuda_linrec_perf.log) */
    (void)ctx, (void)S;
    if (dt.bits == 16 && n == SSM__TC_N && m == 1) return 64;
    if (d->method != SSM_LINREC_AUTO) return 64;
    while (c * c < T) c *= 2;
    return c;
}
static ssm_linrec_method ssm__cu_resolve(const ssm_ctx *ctx, const ssm_linrec_desc *d, ssm_dtype dt, int64_t S,
                                         int64_t T, int64_t n, int64_t m) {
    return d->method == SSM_LINREC_AUTO ? ssm_cuda_linrec_pick(ctx, dt, S, T, n, m) : d->method;
}

static size_t ssm__cu_lr_ws(const ssm_ctx *ctx, const ssm_linrec_desc *d, ssm_dtype dt, int64_t S, int64_t T, int64_t n,
                            int64_t m) {
    ssm_linrec_method method = ssm__cu_resolve(ctx, d, dt, S, T, n, m);
    size_t work = dt.bits == 32 ? 0 : (size_t)(S * T * n * m) * 4u;
    work = (work + 255) & ~(size_t)255;
    return work + (size_t)(S * ssm__cu_lr_scratch_elems(method, T, n, m, ssm__cu_chunk(ctx, d, dt, S, T, n, m))) * 4u;
}

extern "C" SSMDEF ssm_result ssm_cuda_linrec_workspace_size(const ssm_ctx *ctx, const ssm_linrec_desc *desc,
                                                            ssm_dtype dtype, int64_t S, int64_t T, int64_t n,
                                                            int64_t m, int backward, size_t *bytes) {
    if (!ctx || !desc || !bytes) return SSM_ERROR_NULL_ARGUMENT;
    (void)backward; /* the backward pass runs the same solver on the adjoint */
    *bytes = ssm__cu_lr_ws(ctx, desc, dtype, S, T, n, m);
    return SSM_OK;
}

static ssm_result ssm__cu_lr_solve(ssm__cu_lr *L, ssm_linrec_method method, int64_t T, ssm__cu_seq A, ssm__cu_seq b,
                                   ssm__cu_seq h, int64_t chunk, char *ws) {
    switch (method) {
    case SSM_LINREC_SCAN_HS: return ssm__cu_lr_scan_hs(L, T, A, b, h, ws);
    case SSM_LINREC_BLELLOCH: return ssm__cu_lr_blelloch(L, T, A, b, h, ws);
    case SSM_LINREC_CR: return ssm__cu_lr_cr(L, T, A, b, h, ws);
    case SSM_LINREC_CHUNKED: return ssm__cu_lr_chunked(L, T, A, b, h, chunk, ws);
    default: return ssm__cu_lr_sequential(L, T, A, b, h);
    }
}

/* Strides (batch, time, row, col) of a state tensor [S,T,n,m] / [S,n,m], m dim optional when m = 1. */
static void ssm__cu_state_strides(const ssm_tensor *t, int has_time, int64_t m, int64_t st[4]) {
    int full = has_time ? 4 : 3;
    (void)m;
    st[0] = t->strides[0];
    st[1] = has_time ? t->strides[1] : 0;
    st[2] = t->strides[has_time ? 2 : 1];
    st[3] = t->ndim == full ? t->strides[full - 1] : 1;
}
static ssm__cu_seq ssm__cu_seq_make(const ssm_tensor *t, const int64_t st[4], int reverse, int64_t T) {
    ssm__cu_seq v;
    v.p = t->data, v.dt = ssm__cu_dt(t->dtype);
    v.off = reverse ? (T - 1) * st[1] : 0;
    v.ts = reverse ? -st[1] : st[1];
    v.rs = st[2], v.cs = st[3], v.ss = st[0];
    return v;
}
static ssm__cu_seq ssm__cu_work_seq(void *p, int64_t T, int64_t n, int64_t m, int reverse) {
    int64_t st[4];
    ssm__cu_seq v;
    st[0] = T * n * m, st[1] = n * m, st[2] = m, st[3] = 1;
    v.p = p, v.dt = 0;
    v.off = reverse ? (T - 1) * st[1] : 0;
    v.ts = reverse ? -st[1] : st[1];
    v.rs = st[2], v.cs = st[3], v.ss = st[0];
    return v;
}

static ssm_result ssm__cu_check_ptrs(ssm_ctx *ctx, const char *op, const char *const *names,
                                     const ssm_tensor *const *ts, int count) {
    int i;
    for (i = 0; i < count; ++i) SSM__CU_TRY(ssm__cu_check_ptr(ctx, op, names[i], ts[i]));
    return SSM_OK;
}

static void ssm__cu_finish_stats(const ssm_linrec_desc *d, ssm__cu_lr *L, ssm_linrec_method method, size_t ws) {
    if (!d->stats) return;
    d->stats->method = method;
    d->stats->mat_mat = L->mat_mat;
    d->stats->mat_state = L->mat_state;
    d->stats->flops = 2.0 * (double)L->n * (double)L->n *
                      ((double)L->n * (double)L->mat_mat + (double)L->m * (double)L->mat_state);
    d->stats->workspace_bytes = ws;
}

static ssm_result ssm__cu_linrec_forward(ssm_ctx *ctx, const ssm_linrec_desc *d, const ssm_tensor *A,
                                         const ssm_tensor *b, const ssm_tensor *h0, ssm_tensor *h, ssm_tensor *hT) {
    static const char *op = "ssm_linrec_forward";
    ssm__cu_state *st = ssm__cu_st(ctx);
    ssm__cu_device_guard guard(st->device);
    const char *names[5] = {"A", "b", "h0", "h", "hT"};
    const ssm_tensor *ts[5] = {A, b, h0, h, hT};
    int64_t S = A->shape[0], T = A->shape[1], n = A->shape[2], m = b->ndim == 4 ? b->shape[3] : 1;
    int64_t sA[4], sb[4], s0[4], sh[4], sT[4];
    ssm_linrec_method method = ssm__cu_resolve(ctx, d, A->dtype, S, T, n, m);
    size_t ws = ssm__cu_lr_ws(ctx, d, A->dtype, S, T, n, m), work_bytes;
    char *wsp = NULL;
    ssm__cu_lr L;
    ssm__cu_seq Av, bv, hv, wv;
    int f32 = A->dtype.bits == 32;
    SSM__CU_TRY(ssm__cu_check_ptrs(ctx, op, names, ts, 5));
    if (S > 65535) return ssm_ctx_error(ctx, SSM_ERROR_UNSUPPORTED, "%s: S > 65535 sequences per call", op);
    SSM__CU_TRY(ssm__cu_workspace(ctx, ws, &wsp));
    memset(&L, 0, sizeof L);
    L.ctx = ctx, L.S = S, L.n = n, L.m = m;
    sA[0] = A->strides[0], sA[1] = A->strides[1], sA[2] = A->strides[2], sA[3] = A->strides[3];
    ssm__cu_state_strides(b, 1, m, sb);
    ssm__cu_state_strides(h, 1, m, sh);
    Av = ssm__cu_seq_make(A, sA, d->reverse, T);
    bv = ssm__cu_seq_make(b, sb, d->reverse, T);
    hv = ssm__cu_seq_make(h, sh, d->reverse, T);
    work_bytes = f32 ? 0 : (((size_t)(S * T * n * m) * 4u + 255) & ~(size_t)255);
    wv = f32 ? hv : ssm__cu_work_seq(wsp, T, n, m, d->reverse);
    if (!f32) L.out = hv, L.has_out = 1;
    /* h_0 = A_0 h0 + b_0 */
    SSM__CU_TRY(ssm__cu_copy_seq(&L, 1, m, bv, 0, 1, wv, 0, 1));
    if (h0) {
        ssm__cu_seq v0;
        ssm__cu_state_strides(h0, 0, m, s0);
        v0 = ssm__cu_seq_make(h0, s0, 0, 1);
        SSM__CU_TRY(ssm__cu_mm(&L, 1, 1.f, 1, Av, 0, 1, v0, 0, 1, wv, 0, 1));
    }
    SSM__CU_TRY(ssm__cu_lr_solve(&L, method, T, Av, bv, wv, ssm__cu_chunk(ctx, d, A->dtype, S, T, n, m), wsp + work_bytes));
    if (!f32) SSM__CU_TRY(ssm__cu_copy_seq(&L, L.out_written ? 1 : T, m, wv, 0, 1, hv, 0, 1));
    if (hT) {
        ssm__cu_state_strides(hT, 0, m, sT);
        SSM__CU_TRY(ssm__cu_copy_seq(&L, 1, m, wv, T - 1, 1, ssm__cu_seq_make(hT, sT, 0, 1), 0, 1));
    }
    ssm__cu_finish_stats(d, &L, method, ws);
    return SSM_OK;
}

/* dA_t = g_t h_{t-1}^T for m = 1 (t = 1..T-1): one (s, t) per block iteration, a bandwidth-bound
   outer product; 16-byte stores of 8 16-bit values where dA's rows are contiguous and aligned. */
__global__ void __launch_bounds__(256) ssm__cu_outer_kernel(int64_t S, int64_t T1, int n, ssm__cu_seq g, ssm__cu_seq hp,
                                                            ssm__cu_seq dA, int vec) {
    extern __shared__ float ssm__ou_sm[];
    float *gs = ssm__ou_sm, *hs = gs + n;
    for (int64_t bi = blockIdx.x; bi < S * T1; bi += gridDim.x) {
        const int64_t s = bi / T1, t = bi % T1 + 1;
        __syncthreads();
        for (int i = threadIdx.x; i < n; i += blockDim.x) {
            gs[i] = ssm__cu_ld(g.p, g.dt, g.off + s * g.ss + t * g.ts + i * g.rs);
            hs[i] = ssm__cu_ld(hp.p, hp.dt, hp.off + s * hp.ss + (t - 1) * hp.ts + i * hp.rs);
        }
        __syncthreads();
        const int64_t base = dA.off + s * dA.ss + t * dA.ts;
        if (vec) {
            const int per = n / 8;
            for (int e = threadIdx.x; e < n * per; e += blockDim.x) {
                int i = e / per, j = (e % per) * 8;
                float gi = gs[i];
                unsigned w[4];
#pragma unroll
                for (int k = 0; k < 4; ++k) {
                    float x = gi * hs[j + 2 * k], y = gi * hs[j + 2 * k + 1];
                    if (dA.dt == 1) { __half2 v = __floats2half2_rn(x, y); w[k] = *(unsigned *)&v; }
                    else { __nv_bfloat162 v = __floats2bfloat162_rn(x, y); w[k] = *(unsigned *)&v; }
                }
                *(uint4 *)((unsigned short *)dA.p + base + i * dA.rs + j) = make_uint4(w[0], w[1], w[2], w[3]);
            }
        } else {
            for (int e = threadIdx.x; e < n * n; e += blockDim.x) {
                int i = e / n, j = e % n;
                ssm__cu_stv(dA.p, dA.dt, base + i * dA.rs + j * dA.cs, gs[i] * hs[j]);
            }
        }
    }
}
static ssm_result ssm__cu_outer_launch(ssm_ctx *ctx, int64_t S, int64_t T, int64_t n, ssm__cu_seq g, ssm__cu_seq hp,
                                       ssm__cu_seq dA) {
    int64_t nb = S * (T - 1);
    int vec = dA.dt != 0 && dA.cs == 1 && n % 8 == 0 && !((uintptr_t)dA.p & 15) && !(dA.off & 7) && !(dA.ts & 7) &&
              !(dA.ss & 7) && !(dA.rs & 7);
    if (nb <= 0) return SSM_OK;
    ssm__cu_outer_kernel<<<(unsigned)(nb < 65536 * 4 ? nb : 65536 * 4), 256, (size_t)(2 * n) * 4u, ssm__cu_st(ctx)->stream>>>(
        S, T - 1, (int)n, g, hp, dA, vec);
    SSM__CU_LAUNCHED(ctx, "ssm__cu_outer_kernel");
    return SSM_OK;
}

static ssm_result ssm__cu_linrec_backward(ssm_ctx *ctx, const ssm_linrec_desc *d, const ssm_tensor *A,
                                          const ssm_tensor *h0, const ssm_tensor *h, const ssm_tensor *dh,
                                          const ssm_tensor *dhT, ssm_tensor *dA, ssm_tensor *db, ssm_tensor *dh0) {
    static const char *op = "ssm_linrec_backward";
    ssm__cu_state *st = ssm__cu_st(ctx);
    ssm__cu_device_guard guard(st->device);
    const char *names[8] = {"A", "h0", "h", "dh", "dhT", "dA", "db", "dh0"};
    const ssm_tensor *ts[8] = {A, h0, h, dh, dhT, dA, db, dh0};
    int64_t S = A->shape[0], T = A->shape[1], n = A->shape[2], m = h->ndim == 4 ? h->shape[3] : 1;
    int64_t sA[4], s0[4], sh[4], sdh[4], sdT[4], sdA[4], sdb[4], sd0[4];
    ssm_linrec_method method = ssm__cu_resolve(ctx, d, A->dtype, S, T, n, m);
    size_t ws = ssm__cu_lr_ws(ctx, d, A->dtype, S, T, n, m), work_bytes;
    char *wsp = NULL;
    ssm__cu_lr L;
    int f32 = A->dtype.bits == 32, rev = !d->reverse;
    ssm__cu_seq Af, hf, dAf, gf, g, dhv, At, dbf;
    SSM__CU_TRY(ssm__cu_check_ptrs(ctx, op, names, ts, 8));
    if (S > 65535) return ssm_ctx_error(ctx, SSM_ERROR_UNSUPPORTED, "%s: S > 65535 sequences per call", op);
    SSM__CU_TRY(ssm__cu_workspace(ctx, ws, &wsp));
    memset(&L, 0, sizeof L);
    L.ctx = ctx, L.S = S, L.n = n, L.m = m;
    sA[0] = A->strides[0], sA[1] = A->strides[1], sA[2] = A->strides[2], sA[3] = A->strides[3];
    sdA[0] = dA->strides[0], sdA[1] = dA->strides[1], sdA[2] = dA->strides[2], sdA[3] = dA->strides[3];
    ssm__cu_state_strides(h, 1, m, sh);
    ssm__cu_state_strides(dh, 1, m, sdh);
    ssm__cu_state_strides(db, 1, m, sdb);
    work_bytes = f32 ? 0 : (((size_t)(S * T * n * m) * 4u + 255) & ~(size_t)255);
    Af = ssm__cu_seq_make(A, sA, d->reverse, T);
    hf = ssm__cu_seq_make(h, sh, d->reverse, T);
    dAf = ssm__cu_seq_make(dA, sdA, d->reverse, T);
    dbf = ssm__cu_seq_make(db, sdb, d->reverse, T);
    gf = f32 ? dbf : ssm__cu_work_seq(wsp, T, n, m, d->reverse);
    g = f32 ? ssm__cu_seq_make(db, sdb, rev, T) : ssm__cu_work_seq(wsp, T, n, m, rev);
    if (!f32) L.out = ssm__cu_seq_make(db, sdb, rev, T), L.has_out = 1;
    dhv = ssm__cu_seq_make(dh, sdh, rev, T);
    At = Af;
    At.off = Af.off + T * Af.ts; /* A'_u = A_{T-u}^T */
    At.ts = -Af.ts;
    At.rs = Af.cs;
    At.cs = Af.rs;
    SSM__CU_TRY(ssm__cu_copy_seq(&L, 1, m, dhv, 0, 1, g, 0, 1));
    if (dhT) {
        ssm__cu_state_strides(dhT, 0, m, sdT);
        SSM__CU_TRY(ssm__cu_copy_launch(ctx, S, 1, n, m, ssm__cu_at(ssm__cu_seq_make(dhT, sdT, 0, 1), 0, 1),
                                        ssm__cu_at(g, 0, 1), 1, 0.f));
    }
    SSM__CU_TRY(ssm__cu_lr_solve(&L, method, T, At, dhv, g, ssm__cu_chunk(ctx, d, A->dtype, S, T, n, m), wsp + work_bytes));
    /* dA_t = g_t h_{t-1}^T */
    {
        ssm__cu_seq hT_ = hf;
        hT_.rs = hf.cs;
        hT_.cs = hf.rs;
        if (T > 1 && m == 1 && n <= 4096) {
            SSM__CU_TRY(ssm__cu_outer_launch(ctx, S, T, n, gf, hf, dAf));
            L.mat_mat += S * (T - 1);
        } else if (T > 1) {
            SSM__CU_TRY(ssm__cu_mm_launch(ctx, S, T - 1, n, n, m, 1.f, 0.f, ssm__cu_at(gf, 1, 1), ssm__cu_at(hT_, 0, 1),
                                          ssm__cu_at(dAf, 1, 1)));
            L.mat_mat += S * (T - 1);
        }
        if (h0) {
            ssm__cu_seq v0, v0t;
            ssm__cu_state_strides(h0, 0, m, s0);
            v0 = ssm__cu_seq_make(h0, s0, 0, 1);
            v0t = v0;
            v0t.rs = v0.cs;
            v0t.cs = v0.rs;
            SSM__CU_TRY(ssm__cu_mm_launch(ctx, S, 1, n, n, m, 1.f, 0.f, ssm__cu_at(gf, 0, 1), ssm__cu_at(v0t, 0, 1),
                                          ssm__cu_at(dAf, 0, 1)));
            L.mat_mat += S;
        } else {
            ssm__cu_op none;
            memset(&none, 0, sizeof none);
            SSM__CU_TRY(ssm__cu_copy_launch(ctx, S, 1, n, n, none, ssm__cu_at(dAf, 0, 1), 0, 0.f));
        }
        if (dh0) {
            ssm__cu_seq A0t = Af, d0;
            ssm__cu_state_strides(dh0, 0, m, sd0);
            d0 = ssm__cu_seq_make(dh0, sd0, 0, 1);
            A0t.rs = Af.cs;
            A0t.cs = Af.rs;
            SSM__CU_TRY(ssm__cu_mm(&L, 1, 0.f, 1, A0t, 0, 1, gf, 0, 1, d0, 0, 1));
        }
    }
    if (!f32) {
        if (L.out_written) SSM__CU_TRY(ssm__cu_copy_seq(&L, 1, m, g, 0, 1, ssm__cu_seq_make(db, sdb, rev, T), 0, 1));
        else SSM__CU_TRY(ssm__cu_copy_seq(&L, T, m, gf, 0, 1, dbf, 0, 1));
    }
    ssm__cu_finish_stats(d, &L, method, ws);
    return SSM_OK;
}

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
            const T *xp = (const T *)x.p + b * x.s0 + t * x.s1 + r * x.s2 + c * x.s3;
            if (V > 1) {
                ssm__cu_pack<T, V> pk = *(const ssm__cu_pack<T, V> *)xp;
#pragma unroll
                for (int v = 0; v < V; ++v) h[v] = f * h[v] + ssm__cu_vec<T>::get(pk.v[v]);
            } else {
                h[0] = f * h[0] + ssm__cu_vec<T>::get(xp[0]);
            }
#pragma unroll
            for (int v = 0; v < V; ++v) hv[q][v] = h[v];
        }
    }
    /* carry = the true state before this chunk */
    float carry[V];
#pragma unroll
    for (int v = 0; v < V; ++v) carry[v] = 0.f;
    if (k == 0) {
        if (init.p && valid) {
            const T *ip = (const T *)init.p + b * init.s0 + r * init.s1;
#pragma unroll
            for (int v = 0; v < V; ++v) carry[v] = ssm__cu_vec<T>::get(ip[(c + v) * init.s2]);
        }
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
                T *op = (T *)out.p + b * out.s0 + t * out.s1 + r * out.s2 + c * out.s3;
                if (V > 1) {
                    ssm__cu_pack<T, V> pk;
#pragma unroll
                    for (int v = 0; v < V; ++v) pk.v[v] = ssm__cu_vec<T>::put(hv[q][v] + sc * carry[v]);
                    *(ssm__cu_pack<T, V> *)op = pk;
                } else {
                    op[0] = ssm__cu_vec<T>::put(hv[q][0] + sc * carry[0]);
                }
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

/* da_t = exp(a_t) sum_c g_t h_{t-1} (one warp per (b, t, r)), written to f32 scratch; and
   dh0 = exp(a_0) g_0. Then dlog_decay = da (per-step) or da_t - da_{t+1} (cumulative). */
template <typename T>
__global__ void ssm__cu_dk_da_kernel(int64_t B, int64_t Tn, int64_t R, int64_t C, int per_step, ssm__cu_dkv ld,
                                     ssm__cu_dkv g, ssm__cu_dkv out, ssm__cu_dkv h0, ssm__cu_dkv dh0, float *da) {
    const int lane = threadIdx.x & 31;
    const int64_t row = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) >> 5;
    if (row >= B * Tn * R) return;
    const int64_t r = row % R, t = (row / R) % Tn, b = row / (R * Tn);
    const T *ldp = (const T *)ld.p;
    const float a = ssm__cu_dk_step(ldp, b * ld.s0 + r * ld.s2, ld.s1, t, Tn, per_step);
    const float f = expf(a);
    const T *gp = (const T *)g.p + b * g.s0 + t * g.s1 + r * g.s2;
    float acc = 0.f;
    for (int64_t c = lane; c < C; c += 32) {
        float gv = ssm__cu_vec<T>::get(gp[c * g.s3]), prev;
        if (t > 0) prev = ssm__cu_vec<T>::get(((const T *)out.p)[b * out.s0 + (t - 1) * out.s1 + r * out.s2 + c * out.s3]);
        else prev = h0.p ? ssm__cu_vec<T>::get(((const T *)h0.p)[b * h0.s0 + r * h0.s1 + c * h0.s2]) : 0.f;
        acc += gv * prev;
        if (t == 0 && dh0.p) ((T *)dh0.p)[b * dh0.s0 + r * dh0.s1 + c * dh0.s2] = ssm__cu_vec<T>::put(f * gv);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (lane == 0) da[row] = f == 0.f ? 0.f : f * acc;
}

template <typename T>
__global__ void ssm__cu_dk_dld_kernel(int64_t B, int64_t Tn, int64_t R, int per_step, const float *da, ssm__cu_dkv dld) {
    const int64_t row = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (row >= B * Tn * R) return;
    const int64_t r = row % R, t = (row / R) % Tn, b = row / (R * Tn);
    float v = da[row];
    if (!per_step && t + 1 < Tn) v -= da[row + R];
    ((T *)dld.p)[b * dld.s0 + t * dld.s1 + r * dld.s2] = ssm__cu_vec<T>::put(v);
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
template <> __device__ __forceinline__ void ssm__cu_dkt_cp<16>(void *dst, const void *src, bool ok) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(ssm__tc_sa(dst)), "l"(src), "r"(ok ? 16 : 0) : "memory");
}
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
    if (init.p && valid) {
        const T *ip = (const T *)init.p + b * init.s0 + r * init.s1;
#pragma unroll
        for (int v = 0; v < V; ++v) carry[v] = ssm__cu_vec<T>::get(ip[(cc + v) * init.s2]);
    }
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
    const int64_t row = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (row >= B * Tn * R) return;
    const int64_t r = row % R, t = (row / R) % Tn, b = row / (R * Tn);
    float v = 0.f, n = 0.f;
    for (int64_t k = 0; k < ncb; ++k) v += da[row * ncb + k];
    if (!per_step && t + 1 < Tn) {
        for (int64_t k = 0; k < ncb; ++k) n += da[(row + R) * ncb + k];
        v -= n;
    }
    ((T *)dld.p)[b * dld.s0 + t * dld.s1 + r * dld.s2] = ssm__cu_vec<T>::put(v);
}

/* Which decay kernel: 0 = by shape, 1 = look-back, 2 = tiled. ssm__cu_dkt_cw / _ts force the
   tiled kernel's columns-per-row threads and steps per thread (0 = by shape); for tests and
   benchmarks in the same translation unit. */
static int ssm__cu_dk_path = 0, ssm__cu_dkt_cw = 0, ssm__cu_dkt_ts = 0, ssm__cu_dkt_v = 0, ssm__cu_dkt_pf = 0;

typedef struct ssm__cu_dkt_plan {
    int use, V, CW, TS, PF;
    int64_t ncb, blocks;
} ssm__cu_dkt_plan;

static ssm__cu_dkt_plan ssm__cu_dkt_plan_of(ssm_dtype dt, int64_t B, int64_t T, int64_t R, int64_t C, int vec,
                                            int backward, int sms) {
    ssm__cu_dkt_plan p;
    p.V = vec ? (dt.bits == 32 || ssm__cu_dkt_v == 4 ? 4 : 8) : 1;
    if (p.V > 1) {
        /* measured on an H200 (bench/cuda_decay_variants.cu, bench/results/cuda_decay_perf.log):
           forward f32 with the cp.async ring 16 threads x 8 steps per row segment when there are >= 3 blocks of 16 per SM
           (else 8 x 8, 4 x 8 under 1 block of 8 per SM; without the ring 8 x 4, x 8 under 3 blocks per SM), 16-bit 8 x 8
           when there are >= 3 blocks per SM (else 4 x 8); backward f32 16 x 8 with >= 3 blocks per SM (else 8 x 4),
           16-bit 4 x 4 (8 x 8 spills). */
        const int64_t rows = B * R;
        p.PF = !backward; /* the forward's cp.async ring (the backward has none) */
        if (ssm__cu_dkt_pf == 1 || ssm__cu_dkt_pf == 2) p.PF = ssm__cu_dkt_pf - 1;
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
        if (ssm__cu_dkt_cw == 4 || ssm__cu_dkt_cw == 8 || ssm__cu_dkt_cw == 16) p.CW = ssm__cu_dkt_cw;
        if (ssm__cu_dkt_ts == 4 || ssm__cu_dkt_ts == 8) p.TS = ssm__cu_dkt_ts;
    } else {
        p.CW = C <= 8 ? 8 : 32;
        p.TS = 4, p.PF = 0;
    }
    p.ncb = (C + (int64_t)p.CW * p.V - 1) / ((int64_t)p.CW * p.V);
    p.blocks = B * R * p.ncb;
    /* too few columns to fill the GPU (long T, small B*R*C): split time (look-back kernel) */
    p.use = p.blocks >= (int64_t)sms && p.blocks <= 2147483647;
    if (ssm__cu_dk_path == 1) p.use = 0;
    if (ssm__cu_dk_path == 2) p.use = p.blocks <= 2147483647;
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

extern "C" SSMDEF ssm_result ssm_cuda_decay_workspace_size(ssm_dtype dtype, int64_t B, int64_t T, int64_t R, int64_t C,
                                                           int backward, size_t *bytes) {
    ssm__cu_dk_plan p = ssm__cu_dk_plan_of(dtype, B, T, R, C, 1), q = ssm__cu_dk_plan_of(dtype, B, T, R, C, 0);
    size_t a = ssm__cu_dk_plan_bytes(&p), b2 = ssm__cu_dk_plan_bytes(&q), w = a > b2 ? a : b2;
    if (!bytes) return SSM_ERROR_NULL_ARGUMENT;
    if (backward) w += (size_t)(B * T * R) * 4u + 256;
    { /* the tiled kernel's backward partials: at most ceil(C / 8) column blocks per row */
        size_t t2 = (size_t)(B * T * R) * (size_t)((C + 7) / 8) * 4u;
        if (backward && t2 > w) w = t2;
    }
    *bytes = w;
    return SSM_OK;
}

static ssm_result ssm__cu_decay_forward(ssm_ctx *ctx, const ssm_decay_desc *d, const ssm_tensor *ld,
                                        const ssm_tensor *x, const ssm_tensor *h0, ssm_tensor *out, ssm_tensor *hT) {
    static const char *op = "ssm_decay_forward";
    ssm__cu_state *st = ssm__cu_st(ctx);
    ssm__cu_device_guard guard(st->device);
    const char *names[5] = {"log_decay", "x", "h0", "out", "hT"};
    const ssm_tensor *ts[5] = {ld, x, h0, out, hT};
    const ssm_tensor *vt[2] = {x, out};
    int64_t B = x->shape[0], T = x->shape[1], R = x->shape[2], C = x->shape[3];
    const int vec = ssm__cu_dk_vec_ok(x->dtype, C, vt, 2);
    ssm__cu_dk_plan p = ssm__cu_dk_plan_of(x->dtype, B, T, R, C, vec);
    ssm__cu_dkt_plan tp = ssm__cu_dkt_plan_of(x->dtype, B, T, R, C, vec, 0, st->sms);
    char *ws;
    SSM__CU_TRY(ssm__cu_check_ptrs(ctx, op, names, ts, 5));
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
    SSM__CU_TRY(ssm__cu_workspace(ctx, ssm__cu_dk_plan_bytes(&p), &ws));
    return ssm__cu_dk_scan(ctx, &p, x->dtype, B, T, R, C, 0, d->input == SSM_DECAY_PER_STEP, ld, x, out, h0, hT, ws);
}

static ssm_result ssm__cu_decay_backward(ssm_ctx *ctx, const ssm_decay_desc *d, const ssm_tensor *ld,
                                         const ssm_tensor *h0, const ssm_tensor *out, const ssm_tensor *dout,
                                         const ssm_tensor *dhT, ssm_tensor *dx, ssm_tensor *dld, ssm_tensor *dh0) {
    static const char *op = "ssm_decay_backward";
    ssm__cu_state *st = ssm__cu_st(ctx);
    ssm__cu_device_guard guard(st->device);
    const char *names[8] = {"log_decay", "h0", "out", "dout", "dhT", "dx", "dlog_decay", "dh0"};
    const ssm_tensor *ts[8] = {ld, h0, out, dout, dhT, dx, dld, dh0};
    const ssm_tensor *vt[2] = {dout, dx};
    int64_t B = out->shape[0], T = out->shape[1], R = out->shape[2], C = out->shape[3];
    int per_step = d->input == SSM_DECAY_PER_STEP;
    ssm__cu_dk_plan p = ssm__cu_dk_plan_of(out->dtype, B, T, R, C, ssm__cu_dk_vec_ok(out->dtype, C, vt, 2));
    size_t scan_bytes = (ssm__cu_dk_plan_bytes(&p) + 255) & ~(size_t)255;
    char *ws;
    float *da;
    int64_t rows = B * T * R;
    ssm_dtype dt = out->dtype;
    ssm__cu_dkv vl = ssm__cu_dkv_of(ld), vg = ssm__cu_dkv_of(dx), vo = ssm__cu_dkv_of(out), v0 = ssm__cu_dkv_of(h0);
    ssm__cu_dkv vd0 = ssm__cu_dkv_of(dh0), vdl = ssm__cu_dkv_of(dld);
    SSM__CU_TRY(ssm__cu_check_ptrs(ctx, op, names, ts, 8));
    {
        const ssm_tensor *vt3[3] = {dout, dx, out};
        ssm__cu_dkt_plan tp = ssm__cu_dkt_plan_of(dt, B, T, R, C, ssm__cu_dk_vec_ok(dt, C, vt3, 3), 1, st->sms);
        if (tp.use) {
            ssm__cu_dkv vdo = ssm__cu_dkv_of(dout), vdT = ssm__cu_dkv_of(dhT);
            unsigned blocks = (unsigned)((rows + 255) / 256);
            SSM__CU_TRY(ssm__cu_workspace(ctx, (size_t)rows * (size_t)tp.ncb * 4u, &ws));
            da = (float *)ws;
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
    }
    SSM__CU_TRY(ssm__cu_workspace(ctx, scan_bytes + (size_t)rows * 4u, &ws));
    da = (float *)(ws + scan_bytes);
    /* g_t = dout_t + exp(a_{t+1}) g_{t+1}, g_{T-1} = dout + dhT: a reverse scan into dx */
    SSM__CU_TRY(ssm__cu_dk_scan(ctx, &p, dt, B, T, R, C, 1, per_step, ld, dout, dx, dhT, NULL, ws));
    {
        unsigned blocks = (unsigned)((rows * 32 + 255) / 256);
        if (dt.bits == 32)
            ssm__cu_dk_da_kernel<float><<<blocks, 256, 0, st->stream>>>(B, T, R, C, per_step, vl, vg, vo, v0, vd0, da);
        else if (dt.code == SSM_DTYPE_BFLOAT)
            ssm__cu_dk_da_kernel<__nv_bfloat16><<<blocks, 256, 0, st->stream>>>(B, T, R, C, per_step, vl, vg, vo, v0, vd0, da);
        else
            ssm__cu_dk_da_kernel<__half><<<blocks, 256, 0, st->stream>>>(B, T, R, C, per_step, vl, vg, vo, v0, vd0, da);
        SSM__CU_LAUNCHED(ctx, "ssm__cu_dk_da_kernel");
        blocks = (unsigned)((rows + 255) / 256);
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

/* ---- the backend ----------------------------------------------------------------------------- */

static const ssm_backend ssm__cuda_backend = {
    "cuda", SSM_DEVICE_CUDA, ssm__cu_init, ssm__cu_shutdown, ssm__cu_gemm, ssm__cu_pick,
    ssm__cu_linrec_forward, ssm__cu_linrec_backward, ssm__cu_decay_forward, ssm__cu_decay_backward,
    NULL, NULL, NULL, NULL, NULL, {NULL}};

extern "C" SSMDEF const ssm_backend *ssm_cuda_backend(void) { return &ssm__cuda_backend; }

#endif /* SSM_CUDA_IMPLEMENTATION_DONE */
#endif /* SSM_CUDA_IMPLEMENTATION */
