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

/* ==== delta rule (DeltaNet, Gated DeltaNet): chunked WY/UT form on tensor cores ====================
   Per head, S_t = a_t (I - b_t k_t k_t^T) S_{t-1} + b_t k_t v_t^T, o_t = scale S_t^T q_t (Schlag et al.
   2021; Yang et al. 2024, "Parallelizing linear transformers with the delta rule over sequence length";
   gated: a_t = exp(g_t), Yang et al. 2025). Chunks of C = 64 tokens: a parallel kernel builds each
   chunk's UT transform T = (I + strict_tril(diag(b) K K^T))^-1 and w = T diag(b) K, u = T diag(b) V;
   one CTA per (sequence, head, block of V columns) then walks the chunks in order with the state in
   registers, fusing the intra-chunk output. The backward replays that pass for the chunk-start states,
   walks the chunks in reverse for the state gradients, and differentiates every chunk in parallel.
   Operands go through mma.sync m16n8k16 (bf16/f16) or f32 FMAs in the same fragment layout (f32);
   the state, the UT solve and every accumulation are f32. No atomics: results are bitwise
   reproducible. Variants and the f64 token-loop oracle: dev/cuda/delta.cu. */

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
    int variant; /* bit 0: the column-by-column UT solve (1.5x slower; dev/cuda/delta.cu times both) */
    int svec;    /* f32 states with unit column stride and 16-byte aligned rows: float4 access */
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
__device__ __forceinline__ unsigned ssm__dl_sa(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void ssm__dl_ldsm(unsigned r[4], const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(ssm__dl_sa(p)));
}
__device__ __forceinline__ void ssm__dl_ldsmt(unsigned r[4], const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(ssm__dl_sa(p)));
}
template <class E> __device__ __forceinline__ void ssm__dl_mma(float c[4], const unsigned a[4], unsigned b0, unsigned b1);
template <> __device__ __forceinline__ void ssm__dl_mma<__nv_bfloat16>(float c[4], const unsigned a[4], unsigned b0, unsigned b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <> __device__ __forceinline__ void ssm__dl_mma<__half>(float c[4], const unsigned a[4], unsigned b0, unsigned b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
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
            if (!TA) ssm__dl_ldsm(a, A + (m0 + (lane & 15)) * lda + k0 + (lane >> 4) * 8);
            else ssm__dl_ldsmt(a, A + (k0 + r + (i >> 1) * 8) * lda + m0 + (i & 1) * 8);
#pragma unroll
            for (int j = 0; j + 1 < NT; j += 2) {
                unsigned b[4];
                const int nb = n0 + 8 * j;
                if (TB) ssm__dl_ldsm(b, B + (nb + r + (i >> 1) * 8) * ldb + k0 + (i & 1) * 8);
                else ssm__dl_ldsmt(b, B + (k0 + r + (i & 1) * 8) * ldb + nb + (i >> 1) * 8);
                ssm__dl_mma<E>(acc[j], a, b[0], b[1]);
                ssm__dl_mma<E>(acc[j + 1], a, b[2], b[3]);
            }
            if constexpr (NT % 2) { /* the odd last n8 tile: an x4 load whose upper half repeats the lower */
                unsigned b[4];
                const int nb = n0 + 8 * (NT - 1);
                if (TB) ssm__dl_ldsm(b, B + (nb + r) * ldb + k0 + (i & 1) * 8);
                else ssm__dl_ldsmt(b, B + (k0 + r + (i & 1) * 8) * ldb + nb);
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
            ssm__dl_ldsm(a1, A1 + (m0 + (lane & 15)) * lda + k0 + (lane >> 4) * 8);
            ssm__dl_ldsm(a2, A2 + (m0 + (lane & 15)) * lda + k0 + (lane >> 4) * 8);
#pragma unroll
            for (int j = 0; j < NT; j += 2) {
                unsigned b[4];
                ssm__dl_ldsmt(b, B + (k0 + r + (i & 1) * 8) * ldb + n0 + 8 * j + (i >> 1) * 8);
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

/* ---- shared-memory staging ------------------------------------------------------------------ */
/* rows x cols tile of a strided tensor (row i at p + base + i*rs, element j at + j*cs), times
   mul(i), into s (E, leading dimension ld); rows >= nr and cols >= nc are zeros. */
template <class E, class F>
__device__ __forceinline__ void ssm__dl_stage(E *s, int ld, int rows, int cols, const void *p, int dt, int64_t base,
                                              int64_t rs, int64_t cs, int nr, int nc, F mul, int vec = 0) {
    if (vec) { /* the tensor's dtype is E, unit feature stride, 16-byte aligned rows: 16-byte loads */
        constexpr int V = 16 / sizeof(E);
        const int vpr = cols / V;
        const E *pe = (const E *)p + base;
        for (int idx = threadIdx.x; idx < rows * vpr; idx += blockDim.x) {
            const int i = idx / vpr, j = (idx % vpr) * V;
            union {
                uint4 u;
                E e[V];
            } x;
            if (i < nr && j + V <= nc) {
                x.u = __ldg((const uint4 *)(pe + (int64_t)i * rs + j));
                const float m = mul(i);
                if (m != 1.f)
#pragma unroll
                    for (int e = 0; e < V; ++e) x.e[e] = ssm__dl_cv<E>(ssm__dl_f(x.e[e]) * m);
            } else
#pragma unroll
                for (int e = 0; e < V; ++e)
                    x.e[e] = ssm__dl_cv<E>((i < nr && j + e < nc) ? ssm__dl_f(pe[(int64_t)i * rs + j + e]) * mul(i) : 0.f);
            *(uint4 *)(s + i * ld + j) = x.u;
        }
        return;
    }
    for (int idx = threadIdx.x; idx < rows * cols; idx += blockDim.x) {
        int i = idx / cols, j = idx % cols;
        float x = (i < nr && j < nc) ? ssm__dl_ld(p, dt, base + i * rs + j * cs) * mul(i) : 0.f;
        s[i * ld + j] = ssm__dl_cv<E>(x);
    }
}
/* Contiguous tile copies (workspace, 16-byte aligned rows) through cp.async. */
__device__ __forceinline__ void ssm__dl_cp16(void *s, const void *g) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(ssm__dl_sa(s)), "l"(g));
}
__device__ __forceinline__ void ssm__dl_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void ssm__dl_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }
template <int rows, int cols, class E>
__device__ __forceinline__ void ssm__dl_cptile(E *s, int ld, const E *g, int gld) {
    constexpr int V = 16 / sizeof(E), vpr = cols / V;
    for (int idx = threadIdx.x; idx < rows * vpr; idx += blockDim.x) {
        int i = idx / vpr, j = (idx % vpr) * V;
        ssm__dl_cp16(s + i * ld + j, g + (int64_t)i * gld + j);
    }
}
/* Store an smem tile to the (contiguous) workspace. */
template <int rows, int cols, class E> __device__ __forceinline__ void ssm__dl_sttile(E *g, int gld, const E *s, int ld) {
    constexpr int V = 16 / sizeof(E), vpr = cols / V;
    for (int idx = threadIdx.x; idx < rows * vpr; idx += blockDim.x) {
        int i = idx / vpr, j = (idx % vpr) * V;
        *(uint4 *)(g + (int64_t)i * gld + j) = *(const uint4 *)(s + i * ld + j);
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

template <class E, int KP> __host__ __device__ constexpr bool ssm__dl_prep_alias() {
    return 2 * SSM__DL_C * (KP + 8) * sizeof(E) >= SSM__DL_C * 72 * sizeof(float);
}
/* ---- chunk preparation: one CTA per (chunk, head), all chunks in parallel -----------------------
   A = strict_tril(diag(beta) K K^T * exp(g_i - g_j)), T = (I + A)^-1 (forward substitution, f32),
   w = T diag(beta exp(g)) K, u = T diag(beta) V, Aqk = scale * tril(Q K^T * exp(g_i - g_j)). */
template <class E, int KP>
__global__ void __launch_bounds__(SSM__DL_NT) ssm__dl_prep_kernel(ssm__dl_args a, ssm__dl_ws<E> ws, int VP, int store_t) {
    constexpr int C = SSM__DL_C, LK = KP + 8, LC = C + 8;
    extern __shared__ __align__(16) unsigned char ssm__dl_smem[];
    const int64_t gc = blockIdx.x;
    const int h = blockIdx.y, tid = threadIdx.x;
    int64_t c;
    const int n = ssm__dl_find(a, gc, ws.choff, &c);
    if (n < 0) return;
    const ssm__dl_seq sq = ssm__dl_seq_of(a, n, ws.choff);
    const int64_t t0 = sq.t0 + c * C;
    const int len = (int)min((int64_t)C, sq.len - c * C);
    const int LV = VP + 8;
    E *sQ = (E *)ssm__dl_smem, *sK = sQ + C * LK, *sKb = sK + C * LK, *sV = sKb + C * LK, *sT = sV + C * LV;
    float *sA = (float *)(sT + C * LC), *sb = sA + C * (C + 1), *sg = sb + C, *seg = sg + C;
    const int64_t ch = gc * a.H + h;

    for (int i = tid; i < C; i += blockDim.x) {
        sb[i] = i < len ? ssm__dl_ld(a.beta, a.bdt, sq.b * a.bs[0] + (t0 + i) * a.bs[1] + h * a.bs[2]) : 0.f;
        sg[i] = (i < len && a.g) ? ssm__dl_ld(a.g, a.gdt, sq.b * a.gs[0] + (t0 + i) * a.gs[1] + h * a.gs[2]) : 0.f;
    }
    __syncthreads();
    if (tid < 32) { /* inclusive scan of the log gates over the chunk (2 per lane) */
        float x0 = sg[2 * tid], x1 = x0 + sg[2 * tid + 1], s = x1;
        for (int o = 1; o < 32; o <<= 1) {
            float y = __shfl_up_sync(0xffffffffu, s, o);
            if (tid >= o) s += y;
        }
        float ex = s - x1;
        sg[2 * tid] = ex + x0, sg[2 * tid + 1] = ex + x1;
    }
    __syncthreads();
    for (int i = tid; i < C; i += blockDim.x) {
        seg[i] = sb[i] * __expf(sg[i]);
        ws.gam[ch * C + i] = sg[i];
    }
    __syncthreads();
    const int64_t qb = sq.b * a.qs[0] + t0 * a.qs[1] + h * a.qs[2], kb = sq.b * a.ks[0] + t0 * a.ks[1] + h * a.ks[2];
    const int64_t vb = sq.b * a.vs[0] + t0 * a.vs[1] + h * a.vs[2];
    ssm__dl_stage(sQ, LK, C, KP, a.q, a.dt, qb, a.qs[1], a.qs[3], len, a.K, [](int) { return 1.f; }, a.vec);
    ssm__dl_stage(sK, LK, C, KP, a.k, a.dt, kb, a.ks[1], a.ks[3], len, a.K, [](int) { return 1.f; }, a.vec);
    ssm__dl_stage(sKb, LK, C, KP, a.k, a.dt, kb, a.ks[1], a.ks[3], len, a.K, [&](int i) { return seg[i]; }, a.vec);
    ssm__dl_stage(sV, LV, C, VP, a.v, a.dt, vb, a.vs[1], a.vs[3], len, a.V, [&](int i) { return sb[i]; }, a.vec);
    __syncthreads();
    ssm__dl_sttile<C, KP>(ws.qp + ch * C * KP, KP, sQ, LK);
    ssm__dl_sttile<C, KP>(ws.kp + ch * C * KP, KP, sK, LK);
    E *aqk = ws.aqk + ch * C * C;
    const float scale = a.scale;
    ssm__dl_gemm<C, C, KP, false, true>(sK, LK, sK, LK, [&](int i, int j, float x) {
        sA[i * (C + 1) + j] = i > j ? sb[i] * x * __expf(sg[i] - sg[j]) : 0.f;
    });
    ssm__dl_gemm<C, C, KP, false, true>(sQ, LK, sK, LK, [&](int i, int j, float x) {
        aqk[i * C + j] = ssm__dl_cv<E>(i >= j ? scale * x * __expf(sg[i] - sg[j]) : 0.f);
    });
    __syncthreads();
    /* f32 T [C][72], over sQ, sK (dead now) where they are large enough; stride 72 spreads banks */
    float *sTf = ssm__dl_prep_alias<E, KP>() ? (float *)sQ : seg + C;
    if (!(a.variant & 1)) { /* blocked: 16 x 16 diagonal blocks, then three levels of block products */
        float *sX = seg + C + (ssm__dl_prep_alias<E, KP>() ? 0 : C * 72); /* [3][16][16] */
        {   /* diagonal block b, column c: four lanes split each row's sum (j mod 4) */
            const int b = tid >> 6, c = (tid >> 2) & 15, part = tid & 3, o = 16 * b;
            const unsigned gm4 = 0xFu << (tid & 28);
            if (part == 0)
                for (int i = 0; i < 16; ++i) sTf[(o + i) * 72 + o + c] = i == c ? 1.f : 0.f;
            __syncwarp(gm4);
            for (int i = c + 1; i < 16; ++i) {
                float s = 0.f;
                for (int j = c + part; j < i; j += 4) s += sA[(o + i) * (C + 1) + o + j] * sTf[(o + j) * 72 + o + c];
                s += __shfl_xor_sync(gm4, s, 1);
                s += __shfl_xor_sync(gm4, s, 2);
                if (part == 0) sTf[(o + i) * 72 + o + c] = -s;
                __syncwarp(gm4);
            }
        }
        __syncthreads();
        const int r = tid >> 4, c = tid & 15;
#pragma unroll
        for (int I = 1; I < 4; ++I) { /* T_IJ = -D_I sum_{K=J}^{I-1} A_IK T_KJ for every J < I (unrolled: fixed trips) */
#pragma unroll
            for (int J = 0; J < I; ++J) {
                float x = 0.f;
#pragma unroll 16
                for (int k = 16 * J; k < 16 * I; ++k) x += sA[(16 * I + r) * (C + 1) + k] * sTf[k * 72 + 16 * J + c];
                sX[J * 256 + r * 16 + c] = x;
            }
            __syncthreads();
#pragma unroll
            for (int J = 0; J < I; ++J) {
                float t = 0.f;
#pragma unroll
                for (int m = 0; m < 16; ++m) /* D_I is zero above its diagonal */
                    t += sTf[(16 * I + r) * 72 + 16 * I + m] * sX[J * 256 + m * 16 + c];
                sTf[(16 * I + r) * 72 + 16 * J + c] = -t;
            }
            __syncthreads();
        }
        for (int idx = tid; idx < C * C; idx += blockDim.x) {
            const int i = idx >> 6, j = idx & 63;
            sT[i * LC + j] = ssm__dl_cv<E>((i >> 4) >= (j >> 4) ? sTf[i * 72 + j] : 0.f);
        }
    } else { /* T by forward substitution, column by column: t_i = [i == col] - sum_{j<i} A_ij t_j.
                Four lanes per column split the sum (j mod 4) and meet through shuffles. */
        const int col = tid >> 2, part = tid & 3;
        const unsigned gm4 = 0xFu << (tid & 28); /* the column's four lanes (trip counts differ per column) */
        if (part == 0) sTf[col * 72 + col] = 1.f, sT[col * LC + col] = ssm__dl_cv<E>(1.f);
        for (int i = 0; i < col; ++i)
            if (part == 0) sT[i * LC + col] = ssm__dl_cv<E>(0.f);
        __syncwarp(gm4);
        for (int i = col + 1; i < C; ++i) { /* t_j = 0 for j < col */
            float s = 0.f;
            for (int j = col + part; j < i; j += 4) s += sA[i * (C + 1) + j] * sTf[j * 72 + col];
            s += __shfl_xor_sync(gm4, s, 1);
            s += __shfl_xor_sync(gm4, s, 2);
            const float t = -s;
            if (part == 0) sTf[i * 72 + col] = t, sT[i * LC + col] = ssm__dl_cv<E>(t);
            __syncwarp(gm4);
        }
    }
    __syncthreads();
    if (store_t) ssm__dl_sttile<C, C>(ws.tm + ch * C * C, C, sT, LC);
    E *w = ws.w + ch * C * KP, *u = ws.u + ch * C * VP;
    ssm__dl_gemm<C, KP, C, false, false>(sT, LC, sKb, LK, [&](int i, int j, float x) { w[i * KP + j] = ssm__dl_cv<E>(x); });
    for (int v0 = 0; v0 < VP; v0 += 32)
        ssm__dl_gemm<C, 32, C, false, false>(sT, LC, sV + v0, LV,
                                             [&](int i, int j, float x) { u[i * VP + v0 + j] = ssm__dl_cv<E>(x); });
    if (store_t && a.dout) { /* the backward's packed dout */
        __syncthreads();
        const int64_t db = sq.b * a.dos[0] + t0 * a.dos[1] + h * a.dos[2];
        ssm__dl_stage(sV, LV, C, VP, a.dout, a.dt, db, a.dos[1], a.dos[3], len, a.V, [](int) { return 1.f; }, a.vec);
        __syncthreads();
        for (int c0 = 0; c0 < VP; c0 += 32) ssm__dl_sttile<C, 32>(ws.dop + ch * C * VP + c0, VP, sV + c0, LV);
    }
}
template <class E, int KP> static size_t ssm__dl_prep_smem(int VP) {
    const size_t extra = (ssm__dl_prep_alias<E, KP>() ? 0 : sizeof(float) * SSM__DL_C * 72) + sizeof(float) * 3 * 256;
    constexpr int C = SSM__DL_C;
    return sizeof(E) * ((size_t)3 * C * (KP + 8) + (size_t)C * (VP + 8) + (size_t)C * (C + 8)) +
           sizeof(float) * ((size_t)C * (C + 1) + 3 * C) + extra;
}

/* ---- inter-chunk pass: one CTA per (sequence, head, VB columns of V), chunks in order ----------
   v_new = u - w S; o = exp(g) q S * scale + Aqk v_new; S <- exp(g_last) S + K^T (exp(g_last - g) v_new).
   S lives in registers (f32 accumulators), its E copy in shared memory feeds the next chunk.
   Warp w: output rows 16*(w%4).., cols (w/4)*VB/2..; state rows (w)*KP/8... */
template <class E, int KP, int VB, int NB>
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
    /* per buffer: Q, K, W [C][LK], U [C][LVB], Aqk [C][LC], gamma [C] */
    constexpr int BUF = 3 * C * LK + C * LVB + C * LC;
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

    auto load = [&](int c, int bsel) {
        if (c < nc) {
            const int64_t ch = (sq.c0 + c) * a.H + h;
            E *b = buf0 + bsel * BUF;
            ssm__dl_cptile<C, KP>(b, LK, ws.qp + ch * C * KP, KP);
            ssm__dl_cptile<C, KP>(b + C * LK, LK, ws.kp + ch * C * KP, KP);
            ssm__dl_cptile<C, KP>(b + 2 * C * LK, LK, ws.w + ch * C * KP, KP);
            ssm__dl_cptile<C, VB>(b + 3 * C * LK, LVB, ws.u + ch * C * VP + v0, VP);
            ssm__dl_cptile<C, C>(b + 3 * C * LK + C * LVB, LC, ws.aqk + ch * C * C, C);
            if (tid < C / 4) ssm__dl_cp16(sgam + bsel * C + tid * 4, ws.gam + ch * C + tid * 4);
        }
        ssm__dl_commit();
    };
    load(0, 0);
    if (NB == 2) load(1, 1);
    const int om0 = (w & 3) * 16, on0 = (w >> 2) * (VB / 2);
    for (int c = 0; c < nc; ++c) {
        const int bsel = c % NB;
        const E *bQ = buf0 + bsel * BUF, *bK = bQ + C * LK, *bW = bK + C * LK, *bU = bW + C * LK, *bA = bU + C * LVB;
        const float *gm = sgam + bsel * C;
        const int64_t ch = (sq.c0 + c) * a.H + h;
        const int len = (int)min((int64_t)C, sq.len - (int64_t)c * C);
        ssm__dl_wait<NB - 1>();
        __syncthreads();
        const float glast = gm[len - 1];
        /* v_new = u - w S and the inter-chunk output q S, same tile of rows/cols per warp */
        float X[ONT][4], O[ONT][4];
        ssm__dl_zero(X), ssm__dl_zero(O);
        ssm__dl_wmma2<ONT, KP>(X, bW, O, bQ, LK, om0, sS, LVB, on0);
        ssm__dl_each(X, om0, on0, [&](int i, int j, float &x) {
            float vn = ssm__dl_f(bU[i * LVB + j]) - x;
            sVn[i * LVB + j] = ssm__dl_cv<E>(vn);
            sVd[i * LVB + j] = ssm__dl_cv<E>(vn * __expf(glast - gm[i]));
            if (vn_out) vn_out[ch * C * VP + i * VP + v0 + j] = ssm__dl_cv<E>(vn);
        });
        const float sc = a.scale;
        ssm__dl_each(O, om0, on0, [&](int i, int, float &x) { x *= sc * __expf(gm[i]); });
        if (s_out) /* state at the chunk's start, for the backward */
            ssm__dl_sttile<KP, VB>(s_out + ch * KP * VP + v0, VP, sS, LVB);
        __syncthreads();
        /* o += Aqk v_new; S <- exp(glast) S + K^T v_decayed */
        ssm__dl_wmma<ONT, C, false, false>(O, bA, LC, om0, sVn, LVB, on0);
        const float eg = __expf(glast);
#pragma unroll
        for (int mb = 0; mb < SM; ++mb) {
            ssm__dl_each(S[mb], 0, 0, [&](int, int, float &x) { x *= eg; });
            ssm__dl_wmma<SNT, C, true, false>(S[mb], bK, LK, sm0 + 16 * mb, sVd, LVB, sn0);
            ssm__dl_each(S[mb], sm0 + 16 * mb, sn0, [&](int r, int col, float &x) { sS[r * LVB + col] = ssm__dl_cv<E>(x); });
        }
        const int64_t t0 = sq.t0 + (int64_t)c * C;
        const int64_t ob = sq.b * a.os[0] + t0 * a.os[1] + h * a.os[2];
        if (a.o)
            ssm__dl_each(O, om0, on0, [&](int i, int j, float &x) {
                if (i < len && v0 + j < a.V) ssm__dl_st(a.o, a.dt, ob + i * a.os[1] + (v0 + j) * a.os[3], x);
            });
        __syncthreads();
        load(c + NB, bsel);
    }
    if (a.hT)
#pragma unroll
        for (int mb = 0; mb < SM; ++mb)
            ssm__dl_each(S[mb], sm0 + 16 * mb, sn0, [&](int r, int col, float &x) {
                if (r < a.K && v0 + col < a.V)
                    ssm__dl_st(a.hT, a.sdt, n * a.hTs[0] + h * a.hTs[1] + r * a.hTs[2] + (v0 + col) * a.hTs[3], x);
            });
}
template <class E, int KP, int VB, int NB> static size_t ssm__dl_fwd_smem() {
    constexpr int C = SSM__DL_C, LK = KP + 8, LC = C + 8, LVB = VB + 8;
    return sizeof(E) * (NB * (size_t)(3 * C * LK + C * LVB + C * LC) + (size_t)KP * LVB + 2 * (size_t)C * LVB) +
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
    auto load = [&](int c, int bsel) {
        if (c >= 0) {
            const int64_t ch = (sq.c0 + c) * a.H + h;
            E *b = buf0 + bsel * BUF;
            ssm__dl_cptile<C, KP>(b, LK, ws.qp + ch * C * KP, KP);
            ssm__dl_cptile<C, KP>(b + C * LK, LK, ws.kp + ch * C * KP, KP);
            ssm__dl_cptile<C, KP>(b + 2 * C * LK, LK, ws.w + ch * C * KP, KP);
            ssm__dl_cptile<C, VB>(b + 3 * C * LK, LVB, ws.dop + ch * C * VP + v0, VP);
            ssm__dl_cptile<C, C>(b + 3 * C * LK + C * LVB, LC, ws.aqk + ch * C * C, C);
            if (tid < C / 4) ssm__dl_cp16(sgam + bsel * C + tid * 4, ws.gam + ch * C + tid * 4);
        }
        ssm__dl_commit();
    };
    load(nc - 1, 0);
    if (NB == 2) load(nc - 2, 1);
    const int om0 = (w & 3) * 16, on0 = (w >> 2) * (VB / 2);
    for (int it = 0; it < nc; ++it) {
        const int c = nc - 1 - it, bsel = it % NB;
        const E *bQ = buf0 + bsel * BUF, *bK = bQ + C * LK, *bW = bK + C * LK, *bO = bW + C * LK, *bA = bO + C * LVB;
        const float *gm = sgam + bsel * C;
        const int64_t ch = (sq.c0 + c) * a.H + h;
        const int len = (int)min((int64_t)C, sq.len - (int64_t)c * C);
        ssm__dl_wait<NB - 1>();
        __syncthreads();
        const float glast = gm[len - 1], sc = a.scale;
        for (int idx = tid; idx < C * VB; idx += blockDim.x) {
            int i = idx / VB, j = idx % VB;
            sdOg[i * LVB + j] = ssm__dl_cv<E>(sc * __expf(gm[i]) * ssm__dl_f(bO[i * LVB + j]));
        }
        ssm__dl_sttile<KP, VB>(ws.ds1 + ch * KP * VP + v0, VP, sS, LVB); /* dS at this chunk's end */
        float X[ONT][4], Y[ONT][4];
        ssm__dl_zero(X), ssm__dl_zero(Y);
        ssm__dl_wmma<ONT, C, true, false>(X, bA, LC, om0, bO, LVB, on0);
        ssm__dl_wmma<ONT, KP, false, false>(Y, bK, LK, om0, sS, LVB, on0);
        float *yy = &Y[0][0];
        int e = 0;
        ssm__dl_each(X, om0, on0, [&](int i, int j, float &x) {
            float dvn = x + __expf(glast - gm[i]) * yy[e++];
            snVn[i * LVB + j] = ssm__dl_cv<E>(-dvn);
            ws.dvn[ch * C * VP + i * VP + v0 + j] = ssm__dl_cv<E>(dvn);
        });
        __syncthreads();
        const float eg = __expf(glast);
#pragma unroll
        for (int mb = 0; mb < SM; ++mb) {
            ssm__dl_each(S[mb], 0, 0, [&](int, int, float &x) { x *= eg; });
            ssm__dl_wmma<SNT, C, true, false>(S[mb], bQ, LK, sm0 + 16 * mb, sdOg, LVB, sn0);
            ssm__dl_wmma<SNT, C, true, false>(S[mb], bW, LK, sm0 + 16 * mb, snVn, LVB, sn0);
            ssm__dl_each(S[mb], sm0 + 16 * mb, sn0, [&](int r, int col, float &x) { sS[r * LVB + col] = ssm__dl_cv<E>(x); });
        }
        __syncthreads();
        load(c - NB, bsel);
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
   Phase A reduces over V (dW, dout v_new^T, dv_new V^T, dv); phase B over V again per 64 columns
   of K (dq, dk). Row sums go through per-warp slots summed in a fixed order: deterministic. */
template <class E, int KP>
__global__ void __launch_bounds__(SSM__DL_NT) ssm__dl_bwd_chunk_kernel(ssm__dl_args a, ssm__dl_ws<E> ws) {
    constexpr int C = SSM__DL_C, LK = KP + 8, LC = C + 8, VW = 32, LW = VW + 8, KPC = KP < 64 ? KP : 64;
    constexpr int WNT = KP / 16, PNT = KPC / 16; /* n8 tiles: dW (16 x KP/2), phase B (16 x KPC/2) */
    extern __shared__ __align__(16) unsigned char ssm__dl_smem[];
    const int64_t gc = blockIdx.x;
    const int h = blockIdx.y, tid = threadIdx.x, w = tid >> 5, lane = tid & 31;
    int64_t c;
    const int n = ssm__dl_find(a, gc, ws.choff, &c);
    if (n < 0) return;
    const ssm__dl_seq sq = ssm__dl_seq_of(a, n, ws.choff);
    const int64_t t0 = sq.t0 + c * C, ch = gc * a.H + h;
    const int len = (int)min((int64_t)C, sq.len - c * C), VP = ws.VP;
    E *sQ = (E *)ssm__dl_smem, *sK = sQ + C * LK, *sdW = sK + C * LK, *sT = sdW + C * LK, *sD = sT + C * LC;
    E *sX = sD + C * LC, *tO = sX + C * LC, *tVn = tO + C * LW, *tdVn = tVn + C * LW, *tV = tdVn + C * LW;
    E *sY = tO; /* T^T dT lives between the two V loops, over their tiles */
    static_assert(4 * LW >= LC, "sY fits over the V-loop tiles");
    E *tSa = tV + C * LW, *tSb = tSa + KP * LW;
    float *sAf = (float *)(tSb + KPC * LW), *sb = sAf + C * (C + 1), *sg = sb + C, *seg = sg + C;
    float *dbeta = seg + C, *dgam = dbeta + C, *rb = dgam + C; /* rb: [4 quantities][2 column groups][C] */
    float *red = rb + 8 * C;                                 /* [8] */
    const int om0 = (w & 3) * 16, cg = w >> 2;

    ssm__dl_cptile<C, KP>(sQ, LK, ws.qp + ch * C * KP, KP);
    ssm__dl_cptile<C, KP>(sK, LK, ws.kp + ch * C * KP, KP);
    ssm__dl_cptile<C, C>(sT, LC, ws.tm + ch * C * C, C);
    ssm__dl_commit();
    for (int i = tid; i < C; i += blockDim.x) {
        sb[i] = i < len ? ssm__dl_ld(a.beta, a.bdt, sq.b * a.bs[0] + (t0 + i) * a.bs[1] + h * a.bs[2]) : 0.f;
        sg[i] = ws.gam[ch * C + i];
        seg[i] = __expf(sg[i]);
        dbeta[i] = 0.f, dgam[i] = 0.f;
    }
    ssm__dl_wait<0>();
    __syncthreads();
    const float glast = sg[len - 1], scale = a.scale;
    /* Gamma * K K^T, strictly lower (A without beta) */
    ssm__dl_gemm<C, C, KP, false, true>(sK, LK, sK, LK, [&](int i, int j, float x) {
        sAf[i * (C + 1) + j] = i > j ? x * __expf(sg[i] - sg[j]) : 0.f;
    });

    /* ---- phase A: reductions over V ---- */
    float P1[4][4], P2[4][4], dWm[WNT][4], dvb_acc = 0.f;
    float dvrow0 = 0.f, dvrow1 = 0.f; /* v . dVb partial sums of rows g, g+8 of this lane's dv tile */
    ssm__dl_zero(P1), ssm__dl_zero(P2), ssm__dl_zero(dWm);
    (void)dvb_acc;
    const int64_t vbase = sq.b * a.vs[0] + t0 * a.vs[1] + h * a.vs[2];
    for (int vb = 0; vb < VP; vb += VW) {
        __syncthreads();
        ssm__dl_cptile<C, VW>(tO, LW, ws.dop + ch * C * VP + vb, VP);
        ssm__dl_cptile<C, VW>(tVn, LW, ws.vn + ch * C * VP + vb, VP);
        ssm__dl_cptile<C, VW>(tdVn, LW, ws.dvn + ch * C * VP + vb, VP);
        ssm__dl_cptile<KP, VW>(tSa, LW, ws.s0 + ch * KP * VP + vb, VP);
        ssm__dl_commit();
        ssm__dl_stage(tV, LW, C, VW, a.v, a.dt, vbase + vb * a.vs[3], a.vs[1], a.vs[3], len, a.V - vb,
                      [](int) { return 1.f; }, a.vec);
        ssm__dl_wait<0>();
        __syncthreads();
        ssm__dl_wmma<4, VW, false, true>(P1, tO, LW, om0, tVn, LW, cg * 32);
        ssm__dl_wmma<4, VW, false, true>(P2, tdVn, LW, om0, tV, LW, cg * 32);
        ssm__dl_wmma<WNT, VW, false, true>(dWm, tdVn, LW, om0, tSa, LW, cg * (KP / 2));
        float dvb[2][4];
        ssm__dl_zero(dvb);
        ssm__dl_wmma<2, C, true, false>(dvb, sT, LC, om0, tdVn, LW, cg * 16);
        {
            const int g = lane >> 2, t = lane & 3;
#pragma unroll
            for (int j = 0; j < 2; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int i = om0 + g + (e >> 1) * 8, col = cg * 16 + 8 * j + 2 * t + (e & 1);
                    const float x = dvb[j][e];
                    const float vv = ssm__dl_f(tV[i * LW + col]);
                    if (e >> 1) dvrow1 += vv * x;
                    else dvrow0 += vv * x;
                    if (a.dv && i < len && vb + col < a.V)
                        ssm__dl_st(a.dv, a.dt, sq.b * a.dvs[0] + (t0 + i) * a.dvs[1] + h * a.dvs[2] + (vb + col) * a.dvs[3],
                                   sb[i] * x);
                }
        }
    }
    dvrow0 += __shfl_xor_sync(0xffffffffu, dvrow0, 1), dvrow1 += __shfl_xor_sync(0xffffffffu, dvrow1, 1);
    dvrow0 += __shfl_xor_sync(0xffffffffu, dvrow0, 2), dvrow1 += __shfl_xor_sync(0xffffffffu, dvrow1, 2);
    if ((lane & 3) == 0) rb[cg * C + om0 + (lane >> 2)] = dvrow0, rb[cg * C + om0 + (lane >> 2) + 8] = dvrow1;
    /* dW = -dv_new S^T; D = scale tril(dout v_new^T) Gamma */
    ssm__dl_each(dWm, om0, cg * (KP / 2), [&](int i, int j, float &x) { sdW[i * LK + j] = ssm__dl_cv<E>(-x); });
    ssm__dl_each(P1, om0, cg * 32, [&](int i, int j, float &x) {
        sD[i * LC + j] = ssm__dl_cv<E>(i >= j ? scale * x * __expf(sg[i] - sg[j]) : 0.f);
    });
    __syncthreads();
    for (int i = tid; i < C; i += blockDim.x) dbeta[i] += rb[i] + rb[C + i]; /* v . dVb */
    {   /* dT = (P2 + e^g_j dW K^T) diag(beta) */
        float Z[4][4];
        ssm__dl_zero(Z);
        ssm__dl_wmma<4, KP, false, true>(Z, sdW, LK, om0, sK, LK, cg * 32);
        float *zz = &Z[0][0];
        int e = 0;
        ssm__dl_each(P2, om0, cg * 32, [&](int i, int j, float &x) {
            sX[i * LC + j] = ssm__dl_cv<E>(sb[j] * (x + seg[j] * zz[e++]));
        });
    }
    __syncthreads();
    ssm__dl_gemm<C, C, C, true, false>(sT, LC, sX, LC, [&](int i, int j, float x) { sY[i * LC + j] = ssm__dl_cv<E>(x); });
    __syncthreads();
    /* dA = -(T^T dT) T^T, strictly lower: M = dA * (Gamma K K^T) into sAf, Eb into sX */
    ssm__dl_gemm<C, C, C, false, true>(sY, LC, sT, LC, [&](int i, int j, float x) {
        const float dA = i > j ? -x : 0.f;
        sAf[i * (C + 1) + j] *= dA;
        sX[i * LC + j] = ssm__dl_cv<E>(sb[i] * dA * (i > j ? __expf(sg[i] - sg[j]) : 0.f));
    });
    __syncthreads();
    if (tid < C) { /* row sums of M: dbeta_i, +beta_i to dg_i */
        float s = 0.f;
        for (int j = 0; j < C; ++j) s += sAf[tid * (C + 1) + j];
        dbeta[tid] += s, dgam[tid] += sb[tid] * s;
    } else if (tid < 2 * C) { /* column sums of diag(beta) M: - to dg_j */
        const int j = tid - C;
        float s = 0.f;
        for (int i = 0; i < C; ++i) s += sb[i] * sAf[i * (C + 1) + j];
        rb[2 * C + j] = s;
    }
    __syncthreads();
    for (int i = tid; i < C; i += blockDim.x) dgam[i] -= rb[2 * C + i];

    /* ---- phase B: per KPC columns of K, reductions over V again, then dq and dk ---- */
    float sds = 0.f; /* <S, dS> partial (gated: the chunk-level gate gradient) */
    float qdq = 0.f;
    (void)qdq;
    for (int k0 = 0; k0 < KP; k0 += KPC) {
        float Aq[PNT][4], Ak[PNT][4], Ax[PNT][4];
        ssm__dl_zero(Aq), ssm__dl_zero(Ak);
        for (int vb = 0; vb < VP; vb += VW) {
            __syncthreads();
            ssm__dl_cptile<C, VW>(tO, LW, ws.dop + ch * C * VP + vb, VP);
            ssm__dl_cptile<C, VW>(tVn, LW, ws.vn + ch * C * VP + vb, VP);
            ssm__dl_cptile<KPC, VW>(tSa, LW, ws.s0 + ch * KP * VP + (int64_t)k0 * VP + vb, VP);
            ssm__dl_cptile<KPC, VW>(tSb, LW, ws.ds1 + ch * KP * VP + (int64_t)k0 * VP + vb, VP);
            ssm__dl_commit();
            ssm__dl_wait<0>();
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
        if (a.dq)
            ssm__dl_each(Aq, om0, n0, [&](int i, int j, float &x) {
                if (i < len && k0 + j < a.K)
                    ssm__dl_st(a.dq, a.dt, sq.b * a.dqs[0] + (t0 + i) * a.dqs[1] + h * a.dqs[2] + (k0 + j) * a.dqs[3], x);
            });
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
            ssm__dl_each(Ak, om0, n0, [&](int i, int j, float &x) {
                if (i < len && k0 + j < a.K)
                    ssm__dl_st(a.dk, a.dt, sq.b * a.dks[0] + (t0 + i) * a.dks[1] + h * a.dks[2] + (k0 + j) * a.dks[3], x);
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
        if (tid == 0) { /* sum_i k_i . dK_S1_i: the chunk-level gate term (fixed order) */
            float s = 0.f;
            for (int i = 0; i < C; ++i) s += rb[2 * C + i] + rb[3 * C + i];
            red[1] = (k0 == 0 ? 0.f : red[1]) + s;
        }
    }
    /* <S, dS> over the block, in a fixed order */
    for (int o = 16; o; o >>= 1) sds += __shfl_xor_sync(0xffffffffu, sds, o);
    __syncthreads();
    if (lane == 0) red[2 + w] = sds;
    __syncthreads();
    if (tid == 0) {
        float s = 0.f;
        for (int i = 0; i < SSM__DL_NT / 32; ++i) s += red[2 + i];
        dgam[len - 1] += __expf(glast) * s + red[1];
        float acc = 0.f; /* dg_s = sum_{i >= s} dgamma_i */
        for (int i = len - 1; i >= 0; --i) {
            acc += dgam[i];
            if (a.dg) ssm__dl_st(a.dg, a.gdt, sq.b * a.dgs[0] + (t0 + i) * a.dgs[1] + h * a.dgs[2], acc);
        }
    }
    if (a.dbeta)
        for (int i = tid; i < len; i += blockDim.x)
            ssm__dl_st(a.dbeta, a.bdt, sq.b * a.dbs[0] + (t0 + i) * a.dbs[1] + h * a.dbs[2], dbeta[i]);
}
template <class E, int KP> static size_t ssm__dl_bwd_chunk_smem() {
    constexpr int C = SSM__DL_C, LK = KP + 8, LC = C + 8, LW = 40, KPC = KP < 64 ? KP : 64;
    return sizeof(E) * ((size_t)3 * C * LK + 3 * (size_t)C * LC + 4 * (size_t)C * LW + (size_t)(KP + KPC) * LW) +
           sizeof(float) * ((size_t)C * (C + 1) + 5 * C + 8 * C + 16);
}

/* ---- decode step (T = 1): one CTA per (sequence, head, 64 columns of V), 256 threads ---------
   Thread (r, c4): rows r, r+16, ... and columns 4 c4 .. 4 c4 + 3, so a warp reads 2 rows x 256
   contiguous bytes of the state; the two column sums (k^T S, q^T S') meet in shared memory.
   The state is read once and written once, in place allowed. */
template <int RPT>
__global__ void __launch_bounds__(256) ssm__dl_step_kernel(ssm__dl_args a) {
    __shared__ float red[16][65];
    __shared__ float sk[16 * RPT], sqv[16 * RPT], sv[64];
    const int n = blockIdx.x, h = blockIdx.y, v0 = blockIdx.z * 64, tid = threadIdx.x;
    const int r0 = tid >> 4, c0 = (tid & 15) * 4;
    const int64_t tb = (int64_t)n * a.ks[0], hs = (int64_t)n * a.h0s[0] + h * a.h0s[1];
    const int64_t ho = (int64_t)n * a.hTs[0] + h * a.hTs[1];
    for (int i = tid; i < 16 * RPT; i += 256) {
        sk[i] = i < a.K ? ssm__dl_ld(a.k, a.dt, tb + h * a.ks[2] + i * a.ks[3]) : 0.f;
        sqv[i] = i < a.K ? ssm__dl_ld(a.q, a.dt, (int64_t)n * a.qs[0] + h * a.qs[2] + i * a.qs[3]) : 0.f;
    }
    if (tid < 64) sv[tid] = v0 + tid < a.V ? ssm__dl_ld(a.v, a.dt, (int64_t)n * a.vs[0] + h * a.vs[2] + (v0 + tid) * a.vs[3]) : 0.f;
    const float beta = ssm__dl_ld(a.beta, a.bdt, (int64_t)n * a.bs[0] + h * a.bs[2]);
    const float al = a.g ? __expf(ssm__dl_ld(a.g, a.gdt, (int64_t)n * a.gs[0] + h * a.gs[2])) : 1.f;
    float S[RPT][4];
    const bool sv4 = a.svec && v0 + c0 < a.V; /* V % 4 == 0 then: the whole float4 is in range */
#pragma unroll
    for (int i = 0; i < RPT; ++i) {
        const int r = r0 + 16 * i;
        if (sv4) {
            const float4 x = (a.h0 && r < a.K) ? *(const float4 *)((const float *)a.h0 + hs + r * a.h0s[2] + v0 + c0)
                                              : make_float4(0.f, 0.f, 0.f, 0.f);
            S[i][0] = x.x, S[i][1] = x.y, S[i][2] = x.z, S[i][3] = x.w;
            continue;
        }
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int c = v0 + c0 + j;
            S[i][j] = (a.h0 && r < a.K && c < a.V) ? ssm__dl_ld(a.h0, a.sdt, hs + r * a.h0s[2] + c * a.h0s[3]) : 0.f;
        }
    }
    __syncthreads();
    float p[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int i = 0; i < RPT; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) S[i][j] *= al, p[j] += sk[r0 + 16 * i] * S[i][j];
#pragma unroll
    for (int j = 0; j < 4; ++j) red[r0][c0 + j] = p[j];
    __syncthreads();
    float vn[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        float s = 0.f;
#pragma unroll
        for (int i = 0; i < 16; ++i) s += red[i][c0 + j];
        vn[j] = beta * (sv[c0 + j] - s);
        p[j] = 0.f;
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < RPT; ++i) {
        const int r = r0 + 16 * i;
#pragma unroll
        for (int j = 0; j < 4; ++j) S[i][j] += sk[r] * vn[j], p[j] += sqv[r] * S[i][j];
        if (!a.hT || r >= a.K) continue;
        if (sv4) {
            *(float4 *)((float *)a.hT + ho + r * a.hTs[2] + v0 + c0) = make_float4(S[i][0], S[i][1], S[i][2], S[i][3]);
            continue;
        }
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int c = v0 + c0 + j;
            if (c < a.V) ssm__dl_st(a.hT, a.sdt, ho + r * a.hTs[2] + c * a.hTs[3], S[i][j]);
        }
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) red[r0][c0 + j] = p[j];
    __syncthreads();
    if (tid < 64 && v0 + tid < a.V) {
        float s = 0.f;
#pragma unroll
        for (int i = 0; i < 16; ++i) s += red[i][tid];
        ssm__dl_st(a.o, a.dt, (int64_t)n * a.os[0] + h * a.os[2] + (v0 + tid) * a.os[3], s * a.scale);
    }
}

/* ---- delta rule: launchers ------------------------------------------------------------------------ */

static int ssm__dl_kp(int K) { return K <= 32 ? 32 : K <= 64 ? 64 : K <= 128 ? 128 : 256; }
/* Workspace of the chunked path: the arrays of ssm__dl_ws (off[0..12]) and the int64 copy of
   cu_seqlens with its raw staging (off[13], off[14]). */
typedef struct ssm__dl_sizes {
    int KP, VP, VB;
    int64_t nc; /* chunk slots: exact without varlen, an upper bound with it */
    size_t off[15], bytes;
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
    return s;
}
template <class E> static ssm__dl_ws<E> ssm__dl_ws_of(const ssm__dl_sizes &s, char *p) {
    ssm__dl_ws<E> w;
    w.qp = (E *)(p + s.off[0]), w.kp = (E *)(p + s.off[1]), w.w = (E *)(p + s.off[2]), w.u = (E *)(p + s.off[3]);
    w.aqk = (E *)(p + s.off[4]), w.tm = (E *)(p + s.off[5]), w.gam = (float *)(p + s.off[6]);
    w.choff = (int64_t *)(p + s.off[7]), w.KP = s.KP, w.VP = s.VP;
    w.dop = (E *)(p + s.off[8]), w.s0 = (E *)(p + s.off[9]), w.vn = (E *)(p + s.off[10]);
    w.ds1 = (E *)(p + s.off[11]), w.dvn = (E *)(p + s.off[12]);
    return w;
}
/* cu_seqlens (i32 or i64, any stride) as int64 in the workspace, and the chunk offsets. */
__global__ void ssm__dl_cu_kernel(const char *raw, int bits, int N, int64_t *cu) {
    for (int i = threadIdx.x; i <= N; i += blockDim.x)
        cu[i] = bits == 64 ? ((const int64_t *)raw)[i] : (int64_t)((const int32_t *)raw)[i];
}
/* V block: 64 when that still gives a CTA per multiprocessor, else 32 (more CTAs in flight). */
static int ssm__dl_pick_vb(int N, int H, int V, int sms) {
    if (V <= 32) return 32;
    return (int64_t)N * H * ((V + 63) / 64) >= sms ? 64 : 32;
}
template <class K_> static int ssm__dl_smem_ok(K_ kernel, size_t bytes, int optin) {
    if (bytes > (size_t)optin) return 0;
    return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes) == cudaSuccess;
}
template <class E, int KP>
static int ssm__dl_prep_go(const ssm__dl_args &a, const ssm__dl_sizes &s, ssm__dl_ws<E> w, int store_t, int optin,
                           cudaStream_t st) {
    size_t sm = ssm__dl_prep_smem<E, KP>(s.VP);
    if (!ssm__dl_smem_ok(ssm__dl_prep_kernel<E, KP>, sm, optin)) return -1;
    if (a.cu) ssm__dl_choff_kernel<<<1, 1, 0, st>>>(a.cu, a.N, w.choff);
    if (s.nc > 0) ssm__dl_prep_kernel<E, KP><<<dim3((unsigned)s.nc, a.H), SSM__DL_NT, sm, st>>>(a, w, s.VP, store_t);
    return 0;
}
template <class E, int KP, int VB>
static int ssm__dl_fwd_go(const ssm__dl_args &a, const ssm__dl_sizes &s, ssm__dl_ws<E> w, E *vn, E *so, int optin,
                          cudaStream_t st) {
    dim3 grid(a.N, a.H, s.VP / VB);
    if (ssm__dl_smem_ok(ssm__dl_fwd_kernel<E, KP, VB, 2>, ssm__dl_fwd_smem<E, KP, VB, 2>(), optin))
        ssm__dl_fwd_kernel<E, KP, VB, 2><<<grid, SSM__DL_NT, ssm__dl_fwd_smem<E, KP, VB, 2>(), st>>>(a, w, vn, so);
    else if (ssm__dl_smem_ok(ssm__dl_fwd_kernel<E, KP, VB, 1>, ssm__dl_fwd_smem<E, KP, VB, 1>(), optin))
        ssm__dl_fwd_kernel<E, KP, VB, 1><<<grid, SSM__DL_NT, ssm__dl_fwd_smem<E, KP, VB, 1>(), st>>>(a, w, vn, so);
    else
        return -1;
    return 0;
}
template <class E, int KP, int VB>
static int ssm__dl_bwd_seq_go(const ssm__dl_args &a, const ssm__dl_sizes &s, ssm__dl_ws<E> w, int optin, cudaStream_t st) {
    dim3 grid(a.N, a.H, s.VP / VB);
    if (ssm__dl_smem_ok(ssm__dl_bwd_seq_kernel<E, KP, VB, 2>, ssm__dl_fwd_smem<E, KP, VB, 2>(), optin))
        ssm__dl_bwd_seq_kernel<E, KP, VB, 2><<<grid, SSM__DL_NT, ssm__dl_fwd_smem<E, KP, VB, 2>(), st>>>(a, w);
    else if (ssm__dl_smem_ok(ssm__dl_bwd_seq_kernel<E, KP, VB, 1>, ssm__dl_fwd_smem<E, KP, VB, 1>(), optin))
        ssm__dl_bwd_seq_kernel<E, KP, VB, 1><<<grid, SSM__DL_NT, ssm__dl_fwd_smem<E, KP, VB, 1>(), st>>>(a, w);
    else
        return -1;
    return 0;
}
template <class E, int KP>
static int ssm__dl_forward_kp(const ssm__dl_args &a, const ssm__dl_sizes &s, char *ws, int optin, cudaStream_t st) {
    ssm__dl_ws<E> w = ssm__dl_ws_of<E>(s, ws);
    if (ssm__dl_prep_go<E, KP>(a, s, w, 0, optin, st)) return -1;
    return s.VB == 64 ? ssm__dl_fwd_go<E, KP, 64>(a, s, w, NULL, NULL, optin, st)
                      : ssm__dl_fwd_go<E, KP, 32>(a, s, w, NULL, NULL, optin, st);
}
template <class E, int KP>
static int ssm__dl_backward_kp(const ssm__dl_args &a0, const ssm__dl_sizes &s, char *ws, int optin, cudaStream_t st) {
    ssm__dl_ws<E> w = ssm__dl_ws_of<E>(s, ws);
    size_t smc = ssm__dl_bwd_chunk_smem<E, KP>();
    if (!ssm__dl_smem_ok(ssm__dl_bwd_chunk_kernel<E, KP>, smc, optin)) return -1;
    if (!a0.dout && cudaMemsetAsync(w.dop, 0, (size_t)s.nc * a0.H * SSM__DL_C * s.VP * sizeof(E), st) != cudaSuccess)
        return -1;
    if (ssm__dl_prep_go<E, KP>(a0, s, w, 1, optin, st)) return -1;
    ssm__dl_args a = a0; /* replay the forward for v_new and the chunk-start states only */
    a.o = NULL, a.hT = NULL;
    int rc = s.VB == 64 ? ssm__dl_fwd_go<E, KP, 64>(a, s, w, w.vn, w.s0, optin, st)
                        : ssm__dl_fwd_go<E, KP, 32>(a, s, w, w.vn, w.s0, optin, st);
    if (!rc) rc = s.VB == 64 ? ssm__dl_bwd_seq_go<E, KP, 64>(a, s, w, optin, st) : ssm__dl_bwd_seq_go<E, KP, 32>(a, s, w, optin, st);
    if (!rc && s.nc > 0) ssm__dl_bwd_chunk_kernel<E, KP><<<dim3((unsigned)s.nc, a.H), SSM__DL_NT, smc, st>>>(a, w);
    return rc;
}
/* The chunked forward / backward: 0, or -1 when this dtype and size do not fit the kernels
   (f32 keys beyond 128, or beyond 64 for the backward: their tiles exceed shared memory). */
static int ssm__dl_forward_chunked(const ssm__dl_args &a, const ssm__dl_sizes &s, char *ws, int optin, cudaStream_t st) {
    if (a.dt == 0) {
        switch (s.KP) {
        case 32: return ssm__dl_forward_kp<float, 32>(a, s, ws, optin, st);
        case 64: return ssm__dl_forward_kp<float, 64>(a, s, ws, optin, st);
        case 128: return ssm__dl_forward_kp<float, 128>(a, s, ws, optin, st);
        default: return -1;
        }
    }
#define SSM__DL_KPS(E)                                                      \
    switch (s.KP) {                                                         \
    case 32: return ssm__dl_forward_kp<E, 32>(a, s, ws, optin, st);         \
    case 64: return ssm__dl_forward_kp<E, 64>(a, s, ws, optin, st);         \
    case 128: return ssm__dl_forward_kp<E, 128>(a, s, ws, optin, st);       \
    default: return ssm__dl_forward_kp<E, 256>(a, s, ws, optin, st);        \
    }
    if (a.dt == 2) SSM__DL_KPS(__nv_bfloat16)
    SSM__DL_KPS(__half)
#undef SSM__DL_KPS
}
static int ssm__dl_backward_chunked(const ssm__dl_args &a, const ssm__dl_sizes &s, char *ws, int optin, cudaStream_t st) {
    if (a.dt == 0) {
        if (s.KP > 64) return -1;
        return s.KP == 32 ? ssm__dl_backward_kp<float, 32>(a, s, ws, optin, st) : ssm__dl_backward_kp<float, 64>(a, s, ws, optin, st);
    }
#define SSM__DL_KPS(E)                                                      \
    switch (s.KP) {                                                         \
    case 32: return ssm__dl_backward_kp<E, 32>(a, s, ws, optin, st);        \
    case 64: return ssm__dl_backward_kp<E, 64>(a, s, ws, optin, st);        \
    case 128: return ssm__dl_backward_kp<E, 128>(a, s, ws, optin, st);      \
    default: return ssm__dl_backward_kp<E, 256>(a, s, ws, optin, st);       \
    }
    if (a.dt == 2) SSM__DL_KPS(__nv_bfloat16)
    SSM__DL_KPS(__half)
#undef SSM__DL_KPS
}
/* Token by token (any size); T = 1 without cu_seqlens is the decode step. */
static void ssm__dl_recurrent(const ssm__dl_args &a, cudaStream_t st) {
    if (a.T == 1 && !a.cu) {
        dim3 g1(a.N, a.H, (a.V + 63) / 64);
        if (a.K <= 16) ssm__dl_step_kernel<1><<<g1, 256, 0, st>>>(a);
        else if (a.K <= 32) ssm__dl_step_kernel<2><<<g1, 256, 0, st>>>(a);
        else if (a.K <= 64) ssm__dl_step_kernel<4><<<g1, 256, 0, st>>>(a);
        else if (a.K <= 128) ssm__dl_step_kernel<8><<<g1, 256, 0, st>>>(a);
        else ssm__dl_step_kernel<16><<<g1, 256, 0, st>>>(a);
        return;
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
    a.scale = (float)p->scale;
    return a;
}
/* 16-byte row loads: unit feature stride, 16-byte aligned data and row strides. */
static int ssm__dl_vec_ok(const ssm__dl_args &a, const ssm_tensor *const *ts, int count, size_t esz) {
    const int64_t *st[4] = {a.qs, a.ks, a.vs, a.dos};
    for (int i = 0; i < count; ++i) {
        if (!ts[i]) continue;
        if ((uintptr_t)ts[i]->data % 16 || st[i][3] != 1) return 0;
        for (int d = 0; d < 3; ++d)
            if (((size_t)st[i][d] * esz) % 16) return 0;
    }
    return 1;
}
static int ssm__dl_chunked_fits(const ssm_delta_plan *p, int bwd) {
    if (p->dtype.bits == 32) return ssm__dl_kp((int)p->K) <= (bwd ? 64 : 128);
    return 1;
}
static int ssm__dl_supported(const ssm_delta_plan *p) {
    return p->n_h == 1 && p->dtype.bits <= 32 && p->K <= 256 && p->V <= 256 && p->N <= 65535 && p->H <= 65535 &&
           p->T < ((int64_t)1 << 31);
}
static ssm__dl_sizes ssm__dl_plan_sizes(const ssm_ctx *ctx, const ssm_delta_plan *p, int chunked, int bwd) {
    return ssm__dl_sizes_of((int)p->N, p->T, (int)p->H, (int)p->K, (int)p->V, p->cu_bits != 0,
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
    ssm__dl_cu_kernel<<<1, 256, 0, st->stream>>>(raw, p->cu_bits, (int)p->N, cu64);
    SSM__CU_LAUNCHED(ctx, "ssm__dl_cu_kernel");
    a->cu = cu64;
    return SSM_OK;
}

static ssm_delta_method ssm__cu_delta_pick(const ssm_ctx *ctx, const ssm_delta_plan *p) {
    (void)ctx;
    if (!ssm__dl_chunked_fits(p, 0)) return SSM_DELTA_RECURRENT;
    return p->max_len >= SSM__DL_C ? SSM_DELTA_CHUNKED : SSM_DELTA_RECURRENT;
}
static ssm_result ssm__cu_delta_workspace(const ssm_ctx *ctx, const ssm_delta_plan *p, int pass, size_t *bytes) {
    if (!ssm__dl_supported(p)) return SSM_OK; /* the generic figure stands (the call will decline) */
    if (pass == 2) {
        *bytes = 0;
        return SSM_OK;
    }
    int chunked = pass == 1 || (p->method == SSM_DELTA_CHUNKED && ssm__dl_chunked_fits(p, 0));
    *bytes = ssm__dl_plan_sizes(ctx, p, chunked, pass == 1).bytes;
    return SSM_OK;
}

static ssm_result ssm__cu_delta_forward(ssm_ctx *ctx, const ssm_delta_plan *p, const ssm_tensor *q, const ssm_tensor *k,
                                        const ssm_tensor *v, const ssm_tensor *beta, const ssm_tensor *g,
                                        const ssm_tensor *s0, const ssm_tensor *cu, ssm_tensor *o, ssm_tensor *sT) {
    static const char *op = "ssm_delta_forward";
    const char *names[8] = {"q", "k", "v", "beta", "g", "s0", "o", "sT"};
    const ssm_tensor *ts[8] = {q, k, v, beta, g, s0, o, sT};
    if (!ssm__dl_supported(p)) return SSM__NOT_MINE;
    ssm__cu_state *st = ssm__cu_st(ctx);
    ssm__cu_device_guard guard(st->device);
    SSM__CU_TRY(ssm__cu_check_ptrs(ctx, op, names, ts, 8));
    if (cu && cu->device.type == SSM_DEVICE_CUDA) SSM__CU_TRY(ssm__cu_check_ptr(ctx, op, "cu_seqlens", cu));
    ssm__dl_args a = ssm__dl_args_of(p);
    a.q = q->data, a.k = k->data, a.v = v->data, a.beta = beta->data, a.g = g ? g->data : NULL;
    a.h0 = s0 ? s0->data : NULL, a.o = o->data, a.hT = sT ? sT->data : NULL;
    const ssm_tensor *vt[3] = {q, k, v};
    a.vec = ssm__dl_vec_ok(a, vt, 3, ssm__cu_esize(p->dtype));
    const int chunked = p->method == SSM_DELTA_CHUNKED && ssm__dl_chunked_fits(p, 0);
    ssm__dl_sizes s = ssm__dl_plan_sizes(ctx, p, chunked, 0);
    char *ws = NULL;
    SSM__CU_TRY(ssm__cu_workspace(ctx, s.bytes, &ws));
    SSM__CU_TRY(ssm__dl_stage_cu(ctx, p, cu, s, ws, &a));
    if (chunked) {
        if (ssm__dl_forward_chunked(a, s, ws, (int)st->smem_optin, st->stream))
            return ssm_ctx_error(ctx, SSM_ERROR_UNSUPPORTED, "%s: no chunked kernel fits K = %lld", op, (long long)p->K);
    } else
        ssm__dl_recurrent(a, st->stream);
    SSM__CU_LAUNCHED(ctx, "the delta-rule forward kernels");
    return SSM_OK;
}

static ssm_result ssm__cu_delta_backward(ssm_ctx *ctx, const ssm_delta_plan *p, const ssm_tensor *q, const ssm_tensor *k,
                                         const ssm_tensor *v, const ssm_tensor *beta, const ssm_tensor *g,
                                         const ssm_tensor *s0, const ssm_tensor *cu, const ssm_tensor *dout,
                                         const ssm_tensor *dsT, ssm_tensor *dq, ssm_tensor *dk, ssm_tensor *dv,
                                         ssm_tensor *dbeta, ssm_tensor *dg, ssm_tensor *ds0) {
    static const char *op = "ssm_delta_backward";
    const char *names[14] = {"q", "k", "v", "beta", "g", "s0", "dout", "dsT", "dq", "dk", "dv", "dbeta", "dg", "ds0"};
    const ssm_tensor *ts[14] = {q, k, v, beta, g, s0, dout, dsT, dq, dk, dv, dbeta, dg, ds0};
    /* the chunked backward serves both methods (the same gradients; the token loop has none) */
    if (!ssm__dl_supported(p) || !ssm__dl_chunked_fits(p, 1)) return SSM__NOT_MINE;
    ssm__cu_state *st = ssm__cu_st(ctx);
    ssm__cu_device_guard guard(st->device);
    SSM__CU_TRY(ssm__cu_check_ptrs(ctx, op, names, ts, 14));
    if (cu && cu->device.type == SSM_DEVICE_CUDA) SSM__CU_TRY(ssm__cu_check_ptr(ctx, op, "cu_seqlens", cu));
    ssm__dl_args a = ssm__dl_args_of(p);
    a.q = q->data, a.k = k->data, a.v = v->data, a.beta = beta->data, a.g = g ? g->data : NULL;
    a.h0 = s0 ? s0->data : NULL;
    a.dout = dout ? dout->data : NULL, a.dhT = dsT ? dsT->data : NULL;
    a.dq = dq ? dq->data : NULL, a.dk = dk ? dk->data : NULL, a.dv = dv ? dv->data : NULL;
    a.dbeta = dbeta ? dbeta->data : NULL, a.dg = dg ? dg->data : NULL, a.dh0 = ds0 ? ds0->data : NULL;
    const ssm_tensor *vt[4] = {q, k, v, dout};
    a.vec = ssm__dl_vec_ok(a, vt, 4, ssm__cu_esize(p->dtype));
    ssm__dl_sizes s = ssm__dl_plan_sizes(ctx, p, 1, 1);
    char *ws = NULL;
    SSM__CU_TRY(ssm__cu_workspace(ctx, s.bytes, &ws));
    SSM__CU_TRY(ssm__dl_stage_cu(ctx, p, cu, s, ws, &a));
    if (ssm__dl_backward_chunked(a, s, ws, (int)st->smem_optin, st->stream))
        return ssm_ctx_error(ctx, SSM_ERROR_UNSUPPORTED, "%s: no chunked kernel fits K = %lld", op, (long long)p->K);
    SSM__CU_LAUNCHED(ctx, "the delta-rule backward kernels");
    return SSM_OK;
}

static ssm_result ssm__cu_delta_step(ssm_ctx *ctx, const ssm_delta_plan *p, const ssm_tensor *q, const ssm_tensor *k,
                                     const ssm_tensor *v, const ssm_tensor *beta, const ssm_tensor *g, ssm_tensor *state,
                                     ssm_tensor *o) {
    static const char *op = "ssm_delta_step";
    const char *names[7] = {"q", "k", "v", "beta", "g", "state", "o"};
    const ssm_tensor *ts[7] = {q, k, v, beta, g, state, o};
    if (!ssm__dl_supported(p)) return SSM__NOT_MINE;
    ssm__cu_state *st = ssm__cu_st(ctx);
    ssm__cu_device_guard guard(st->device);
    SSM__CU_TRY(ssm__cu_check_ptrs(ctx, op, names, ts, 7));
    ssm__dl_args a = ssm__dl_args_of(p);
    a.q = q->data, a.k = k->data, a.v = v->data, a.beta = beta->data, a.g = g ? g->data : NULL;
    a.h0 = a.hT = state->data, a.o = o->data;
    memcpy(a.hTs, a.h0s, sizeof a.hTs);
    a.svec = p->dtype.bits == 32 && a.h0s[3] == 1 && p->V % 4 == 0 && (uintptr_t)state->data % 16 == 0 &&
             a.h0s[0] % 4 == 0 && a.h0s[1] % 4 == 0 && a.h0s[2] % 4 == 0;
    a.T = 1, a.cu = NULL;
    ssm__dl_recurrent(a, st->stream);
    SSM__CU_LAUNCHED(ctx, "ssm__dl_step_kernel");
    return SSM_OK;
}

/* ---- the backend ----------------------------------------------------------------------------- */

static const ssm_backend ssm__cuda_backend = {
    "cuda", SSM_DEVICE_CUDA, ssm__cu_init, ssm__cu_shutdown, ssm__cu_gemm, ssm__cu_pick,
    ssm__cu_linrec_forward, ssm__cu_linrec_backward, ssm__cu_decay_forward, ssm__cu_decay_backward,
    ssm__cu_delta_forward, ssm__cu_delta_backward, ssm__cu_delta_step, ssm__cu_delta_pick, ssm__cu_delta_workspace,
    {NULL}};

extern "C" SSMDEF const ssm_backend *ssm_cuda_backend(void) { return &ssm__cuda_backend; }

#endif /* SSM_CUDA_IMPLEMENTATION_DONE */
#endif /* SSM_CUDA_IMPLEMENTATION */
