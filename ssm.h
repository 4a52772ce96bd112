/* ssm.h - v0.1.0 - kernels for state-space and linear-RNN research - MIT license (see end of file)

   CONTENTS (grep '>>name' to jump; the declarations come first, the implementation repeats
   the markers in the same order)
     >>core        result codes, dtypes, devices, tensor views, the context
     >>validation  the validation layer (implementation only)
     >>primitives  host loops and the generic GEMM / copy primitives (implementation only)
     >>linrec      dense linear recurrence
     >>decay       decay scan
     >>bell        block-ELL sparse linear layer and its dynamic topology
     >>proj        fused projection chains
     >>outchain    output chain
     >>delta       delta rule (DeltaNet, Gated DeltaNet, DeltaProduct)
     >>backend     the backend interface; the reference backend's table

   A header-only C99 library, STB-style. One API, several backends:
     ssm.h        the API, tensor views, result codes, the context, and the portable
                  reference backend for every op (plain loops, the oracle for the rest)
     ssm_blas.h   BLIS backend for the GEMM-shaped work          (cc ... -lblis)
     ssm_cuda.h   CUDA kernels + cuBLAS                           (nvcc ... -lcublas)

   USAGE
     In exactly one C or C++ file:
         #define SSM_IMPLEMENTATION
         #include "ssm.h"
     Everywhere else just #include "ssm.h". Define SSM_STATIC before the include to make
     every function static (private to that file).

     ssm_ctx *ctx;
     ssm_ctx_config cfg = ssm_ctx_config_init();      // zero/default = reference backend
     if (ssm_ctx_create(&cfg, &ctx) != SSM_OK) ...
     int64_t sa[4] = {S, T, n, n}, sb[4] = {S, T, n, m};
     ssm_tensor A = ssm_tensor_make(a_ptr, SSM_F32, ssm_cpu(), 4, sa, NULL);  // NULL = row-major
     ssm_tensor b = ssm_tensor_make(b_ptr, SSM_F32, ssm_cpu(), 4, sb, NULL);
     ssm_tensor h = ssm_tensor_make(h_ptr, SSM_F32, ssm_cpu(), 4, sb, NULL);
     ssm_linrec_desc d = ssm_linrec_desc_init();       // method AUTO, dense transitions
     ssm_result r = ssm_linrec_forward(ctx, &d, &A, &b, NULL, &h, NULL);
     if (r != SSM_OK) printf("%s: %s\n", ssm_result_string(r), ssm_ctx_last_error(ctx));
     ssm_ctx_destroy(ctx);

   OPS (each with its backward)
     ssm_linrec_*   dense linear recurrence h_t = A_t h_{t-1} + b_t, several methods
     ssm_decay_*    decay scan out_t = sum_{j<=t} exp(cA_t - cA_j) x_j in O(T)
     ssm_bell_*     block-ELL sparse linear layer y = x W^T + bias, with dynamic topology
                    (scores, prune/grow, rank-consistent through an all-reduce hook)
     ssm_proj_*     fused projection chain: one wide GEMM, per-segment activations/L2 norms
     ssm_outchain_* output chain RMSNorm(o) * w * gate(g), then o_proj
     ssm_delta_*    delta rule (DeltaNet, Gated DeltaNet, DeltaProduct): chunked WY/UT form on
                    the GEMM, token-by-token recurrence, single-token decode step

   CONVENTIONS
     - Tensors are views mirroring DLPack's DLTensor (ssm_tensor_from_dlpack converts one).
       Strides count elements; any strides are honoured; outputs must not overlap themselves
       or any input.
     - Every op validates everything before touching memory: bad input returns an error code,
       leaves every output untouched, and ssm_ctx_last_error() says what was wrong. The
       library never calls exit() or abort().
     - Scratch memory comes from the context's workspace (sizes can be queried with
       ssm_*_workspace_size); pass your own buffer in the config or let the context grow
       one through its allocator hooks (only when a call needs more than it has).

   VERSION HISTORY
     0.1.0  core, reference backend, dense recurrences, decay scans, block-ELL layers,
            projection and output chains
*/
#ifndef SSM_H_INCLUDED
#define SSM_H_INCLUDED

#include <stddef.h>
#include <stdint.h>

#define SSM_VERSION_MAJOR 0
#define SSM_VERSION_MINOR 1
#define SSM_VERSION_PATCH 0
#define SSM_VERSION_STRING "0.1.0"

#ifndef SSMDEF
#ifdef SSM_STATIC
#define SSMDEF static
#else
#define SSMDEF extern
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* >>core ---- results, dtypes, tensors, context -------------------------------------------- */
/* ------------------------------------------------------------------------------------------
   Result codes, grouped by kind: -1..-99 bad arguments, -100..-199 resources,
   -200..-299 backend / capability.
   ------------------------------------------------------------------------------------------ */
typedef enum ssm_result {
    SSM_OK = 0,
    /* the caller's arguments */
    SSM_ERROR_NULL_ARGUMENT = -1,  /* a required pointer is NULL                          */
    SSM_ERROR_INVALID_SHAPE = -2,  /* wrong rank or size, or sizes that disagree          */
    SSM_ERROR_INVALID_DTYPE = -3,  /* unsupported dtype, or dtypes that disagree          */
    SSM_ERROR_INVALID_DEVICE = -4, /* tensor not on the device the context works on       */
    SSM_ERROR_INVALID_STRIDE = -5, /* strides an op cannot take: an output view whose
                                      strides make two indices reach one element           */
    SSM_ERROR_ALIASING = -6,       /* an output overlaps an input or another output       */
    SSM_ERROR_INVALID_VALUE = -7,  /* bad option / config value or out-of-range index     */
    SSM_ERROR_NON_FINITE = -8,     /* NaN or Inf where a finite value is required         */
    SSM_ERROR_MISALIGNED = -9,     /* data not aligned to its element size (or to what a
                                      backend's kernels need, e.g. 16 bytes on CUDA)       */
    /* resources */
    SSM_ERROR_OUT_OF_MEMORY = -100,
    SSM_ERROR_WORKSPACE_TOO_SMALL = -101, /* caller-owned workspace is smaller than needed */
    /* backend */
    SSM_ERROR_UNSUPPORTED = -200,   /* this backend / build cannot do what was asked       */
    SSM_ERROR_BACKEND = -201        /* the native library failed (CUDA, cuBLAS, BLIS)      */
} ssm_result;

SSMDEF const char *ssm_result_string(ssm_result r);

/* ------------------------------------------------------------------------------------------
   Tensor views (DLPack-compatible). Codes and field order follow DLPack, so a DLTensor
   converts by copying fields.
   ------------------------------------------------------------------------------------------ */
enum { SSM_DEVICE_CPU = 1, SSM_DEVICE_CUDA = 2, SSM_DEVICE_CUDA_HOST = 3, SSM_DEVICE_CUDA_MANAGED = 13 };
enum { SSM_DTYPE_INT = 0, SSM_DTYPE_UINT = 1, SSM_DTYPE_FLOAT = 2, SSM_DTYPE_BFLOAT = 4 };
#define SSM_MAX_DIMS 8

typedef struct ssm_device { int32_t type; int32_t id; } ssm_device;
typedef struct ssm_dtype { uint8_t code; uint8_t bits; uint16_t lanes; } ssm_dtype;

typedef struct ssm_tensor {
    void *data;                    /* first element (DLPack's byte_offset already applied) */
    ssm_device device;
    int32_t ndim;
    ssm_dtype dtype;
    int64_t shape[SSM_MAX_DIMS];
    int64_t strides[SSM_MAX_DIMS]; /* in elements */
} ssm_tensor;

/* The layout of DLPack's DLTensor, so callers need not include dlpack.h. */
typedef struct ssm_dlpack_tensor {
    void *data;
    ssm_device device;
    int32_t ndim;
    ssm_dtype dtype;
    int64_t *shape;
    int64_t *strides; /* NULL = compact row-major */
    uint64_t byte_offset;
} ssm_dlpack_tensor;

SSMDEF ssm_dtype ssm_dtype_f32(void);
SSMDEF ssm_dtype ssm_dtype_f64(void);
SSMDEF ssm_dtype ssm_dtype_f16(void);
SSMDEF ssm_dtype ssm_dtype_bf16(void);
SSMDEF ssm_dtype ssm_dtype_i32(void);
SSMDEF ssm_dtype ssm_dtype_u8(void); /* bytes: buffers such as ssm_delta_desc.saved */
#define SSM_F32 (ssm_dtype_f32())
#define SSM_F64 (ssm_dtype_f64())
#define SSM_F16 (ssm_dtype_f16())
#define SSM_BF16 (ssm_dtype_bf16())
#define SSM_I32 (ssm_dtype_i32())
#define SSM_U8 (ssm_dtype_u8())
SSMDEF ssm_device ssm_cpu(void);
SSMDEF ssm_device ssm_cuda_device(int id);
SSMDEF int ssm_dtype_equal(ssm_dtype a, ssm_dtype b);
/* "f32", "bf16", ... for the dtypes ssm.h knows, "?" for any other (error messages print
   an unknown dtype's code, bits and lanes). */
SSMDEF const char *ssm_dtype_name(ssm_dtype t);

/* A view of `data` with the given shape; strides NULL = compact row-major. An ndim outside
   [0, SSM_MAX_DIMS] is kept as given (only the first SSM_MAX_DIMS sizes are copied): every
   op then rejects the tensor with SSM_ERROR_INVALID_SHAPE and a message. Validation of the
   view happens in the ops. */
SSMDEF ssm_tensor ssm_tensor_make(void *data, ssm_dtype dtype, ssm_device device, int ndim,
                                  const int64_t *shape, const int64_t *strides);
/* Copies a DLTensor's fields (shape/strides copied, byte_offset folded into data).
   byte_offset must be a multiple of the element size (SSM_ERROR_MISALIGNED otherwise). */
SSMDEF ssm_result ssm_tensor_from_dlpack(const ssm_dlpack_tensor *dl, ssm_tensor *out);
/* Element count; -1 when ndim is outside [0, SSM_MAX_DIMS], a size is negative, or the
   count does not fit in int64 (0 whenever a size is 0). */
SSMDEF int64_t ssm_tensor_numel(const ssm_tensor *t);
SSMDEF int ssm_tensor_is_contiguous(const ssm_tensor *t);

/* ------------------------------------------------------------------------------------------
   Context and backends
   ------------------------------------------------------------------------------------------ */
typedef struct ssm_ctx ssm_ctx;
typedef struct ssm_backend ssm_backend;

typedef struct ssm_allocator {
    void *user;
    void *(*alloc)(void *user, size_t bytes); /* NULL fields = malloc / free */
    void (*free)(void *user, void *ptr);
} ssm_allocator;

typedef struct ssm_ctx_config {
    const ssm_backend *backend; /* NULL = the reference backend (ssm_reference_backend()) */
    int threads;                /* 0 = backend default                                    */
    ssm_allocator allocator;    /* host allocations: the context, and workspace growth    */
    void *workspace;            /* optional caller-owned workspace; when set the context  */
    size_t workspace_bytes;     /*   never allocates one and fails with WORKSPACE_TOO_SMALL */
    void *backend_config;       /* backend-specific (e.g. ssm_cuda_config*), may be NULL  */
} ssm_ctx_config;

SSMDEF ssm_ctx_config ssm_ctx_config_init(void);
SSMDEF ssm_result ssm_ctx_create(const ssm_ctx_config *config, ssm_ctx **out);
/* ssm_ctx_create that also says why it failed: on an error, message (when not NULL and
   message_size > 0) receives a NUL-terminated reason, e.g. the backend init's own message;
   "" on success. A context that failed to be created has no ssm_ctx_last_error to read. */
SSMDEF ssm_result ssm_ctx_create_ex(const ssm_ctx_config *config, ssm_ctx **out, char *message,
                                    size_t message_size);
SSMDEF void ssm_ctx_destroy(ssm_ctx *ctx);
/* The last detailed error message of this context ("" after success). */
SSMDEF const char *ssm_ctx_last_error(const ssm_ctx *ctx);
/* Make sure the context-owned workspace holds at least `bytes` (allocates now, not later). */
SSMDEF ssm_result ssm_ctx_reserve_workspace(ssm_ctx *ctx, size_t bytes);
SSMDEF size_t ssm_ctx_workspace_capacity(const ssm_ctx *ctx);
SSMDEF const char *ssm_ctx_backend_name(const ssm_ctx *ctx);
SSMDEF const ssm_backend *ssm_reference_backend(void);

/* >>linrec ---- dense linear recurrence ---------------------------------------------------- */
/* ------------------------------------------------------------------------------------------
   Dense linear recurrence  h_t = A_t h_{t-1} + b_t
     A  [S,T,n,n]      b, h  [S,T,n,m] (or [S,T,n] for m = 1)
     h0 [S,n,m] or [S,n] optional initial state (NULL = zeros)
     hT [S,n,m] or [S,n] optional copy of the final state
   reverse = 1 runs time backwards: h_t = A_t h_{t+1} + b_t, h0 entering at t = T-1.
   ------------------------------------------------------------------------------------------ */
typedef enum ssm_linrec_method {
    SSM_LINREC_AUTO = 0,       /* the backend picks by shape                                  */
    SSM_LINREC_SEQUENTIAL = 1, /* T-1 matrix-state products, depth T                          */
    SSM_LINREC_SCAN_HS = 2,    /* Hillis-Steele prefix scan: O(T n^3 log T), depth log T       */
    SSM_LINREC_BLELLOCH = 3,   /* work-efficient (Brent-Kung/Blelloch) scan in place, stride 2^l */
    SSM_LINREC_CR = 4,         /* cyclic (odd-even) reduction, compacted levels, O(T n^3)      */
    SSM_LINREC_CHUNKED = 5     /* chunks: local pass, scan over chunk carries, fix-up pass     */
} ssm_linrec_method;
#define SSM_LINREC_METHOD_COUNT 6
SSMDEF const char *ssm_linrec_method_name(ssm_linrec_method m);

typedef enum ssm_transition {
    SSM_TRANSITION_DENSE = 0 /* A_t is a full n x n matrix (structured kinds come later) */
} ssm_transition;

/* What a call did: the products it performed (makes the GEMM-count comparison of the scan methods checkable:
   Hillis-Steele's ~T log T products against cyclic reduction's ~T). */
typedef struct ssm_linrec_stats {
    ssm_linrec_method method; /* the method actually run (resolves AUTO)        */
    int64_t mat_mat;          /* n x n times n x n products                      */
    int64_t mat_state;        /* n x n times n x m products                      */
    double flops;             /* 2 n^3 per mat_mat + 2 n^2 m per mat_state       */
    size_t workspace_bytes;   /* scratch the call used                           */
} ssm_linrec_stats;

typedef struct ssm_linrec_desc {
    ssm_linrec_method method;
    ssm_transition transition;
    int64_t chunk;            /* CHUNKED chunk length; 0 = default (64)          */
    int reverse;
    ssm_linrec_stats *stats;  /* optional out: filled on success                 */
} ssm_linrec_desc;

SSMDEF ssm_linrec_desc ssm_linrec_desc_init(void);

SSMDEF ssm_result ssm_linrec_forward(ssm_ctx *ctx, const ssm_linrec_desc *desc,
                                     const ssm_tensor *A, const ssm_tensor *b,
                                     const ssm_tensor *h0, ssm_tensor *h, ssm_tensor *hT);
/* Adjoint: g_t = A_{t+1}^T g_{t+1} + dh_t (+ dhT at the last step),
   dA_t = g_t h_{t-1}^T, db_t = g_t, dh0 = A_0^T g_0. `h` is the forward output.
   h0, dhT, dh0 may be NULL; dA may be NULL when only db / dh0 are wanted (its S*T*n*n
   products are then skipped); dh and db are required. */
SSMDEF ssm_result ssm_linrec_backward(ssm_ctx *ctx, const ssm_linrec_desc *desc,
                                      const ssm_tensor *A, const ssm_tensor *h0,
                                      const ssm_tensor *h, const ssm_tensor *dh,
                                      const ssm_tensor *dhT, ssm_tensor *dA, ssm_tensor *db,
                                      ssm_tensor *dh0);
/* Scratch bytes a forward (backward = 0) or backward (1) call with these sizes needs on this
   context (device bytes on a GPU context). Validates like the op: unknown method, chunk < 0,
   negative sizes or a dtype the backend cannot compute in are errors. */
SSMDEF ssm_result ssm_linrec_workspace_size(const ssm_ctx *ctx, const ssm_linrec_desc *desc,
                                            ssm_dtype dtype, int64_t S, int64_t T, int64_t n,
                                            int64_t m, int backward, size_t *bytes);

/* Context parallelism: each sequence's time axis split across ranks (e.g. one GPU each). Every
   rank passes its own contiguous span of steps as A, b, h (spans of any length >= 1; S, n, m and
   the dtype the same on every rank; rank 0 holds the first span, rank nranks-1 the last). A rank
   reduces its span to the affine map h_end = P h_in + e (e from a zero carry; P, the span's
   transition product, only on the ranks between the first and the last to be processed), the
   ranks exchange the maps once through `allgather`, and each finishes its span from its true
   carry h_in = e' + P' h_in' of the ranks before it. The result is a one-rank call's on the
   whole sequence, up to rounding. On a backend whose method splits into a pass that does not
   need the carry and one that does (ssm_cuda.h: the tensor-core chunked path), the first runs
   before the exchange and only the second after it; elsewhere each rank solves its span twice
   (correct, not faster). With desc.reverse the last rank's span is processed first. */
typedef struct ssm_linrec_cp {
    int rank, nranks;
    /* Collective: every rank's `bytes` bytes at send, in rank order, into recv (nranks * bytes).
       Device memory on a device context, ordered on the context's stream (ssm_cuda.h's
       ssm_cuda_nccl_allgather is NCCL's). Called once a call (not at all when S = 0), by every
       rank, in the same order; may be NULL when nranks = 1. */
    ssm_result (*allgather)(void *user, const void *send, void *recv, size_t bytes);
    void *user;
} ssm_linrec_cp;

/* h0: the whole sequence's initial state, on the rank processed first only (NULL elsewhere).
   hT: the state at the end of this rank's span. hin (optional out, [S,n,m] or [S,n]): the state
   entering this rank's span (h0 or zeros on the first), the h0 its backward takes. */
SSMDEF ssm_result ssm_linrec_forward_cp(ssm_ctx *ctx, const ssm_linrec_desc *desc,
                                        const ssm_linrec_cp *cp, const ssm_tensor *A,
                                        const ssm_tensor *b, const ssm_tensor *h0, ssm_tensor *h,
                                        ssm_tensor *hT, ssm_tensor *hin);
/* The adjoint across the same ranks (carries flow from the last span to the first). hin: the
   forward's hin (NULL = zeros); dhT: the gradient of this rank's hT (any rank, optional); dh0:
   the gradient of hin (on the first rank, of h0). dA, db as ssm_linrec_backward's. */
SSMDEF ssm_result ssm_linrec_backward_cp(ssm_ctx *ctx, const ssm_linrec_desc *desc,
                                         const ssm_linrec_cp *cp, const ssm_tensor *A,
                                         const ssm_tensor *hin, const ssm_tensor *h,
                                         const ssm_tensor *dh, const ssm_tensor *dhT,
                                         ssm_tensor *dA, ssm_tensor *db, ssm_tensor *dh0);
/* Workspace bytes of a _cp call of this rank (T: its span's length). */
SSMDEF ssm_result ssm_linrec_cp_workspace_size(const ssm_ctx *ctx, const ssm_linrec_desc *desc,
                                               const ssm_linrec_cp *cp, ssm_dtype dtype,
                                               int64_t S, int64_t T, int64_t n, int64_t m,
                                               int backward, size_t *bytes);

/* >>decay ---- decay scan ------------------------------------------------------------------ */
/* ------------------------------------------------------------------------------------------
   Decay scan in O(T) (the decay scan of a Mamba-style selective-scan reference):
     out[b,t,r,c] = sum_{j<=t} exp(cA[b,t,r] - cA[b,j,r]) x[b,j,r,c]   (+ exp(cA[b,t,r]) h0[b,r,c])
   i.e. h_t = exp(a_t) h_{t-1} + x_t with a_t = cA_t - cA_{t-1} (cA_{-1} = 0).
     log_decay [B,T,R]   cumulative cA, or per-step a (desc.input)
     x, out    [B,T,R,C]  h0, hT [B,R,C] optional
   Never forms exp(cA) * exp(-cA): stable for any T and any decay strength.
   ------------------------------------------------------------------------------------------ */
typedef enum ssm_decay_input {
    SSM_DECAY_CUMULATIVE = 0, /* log_decay holds cA_t = sum_{j<=t} a_j (finite)            */
    SSM_DECAY_PER_STEP = 1    /* log_decay holds a_t (-inf allowed: a full reset)           */
} ssm_decay_input;

typedef struct ssm_decay_desc {
    ssm_decay_input input;
} ssm_decay_desc;

SSMDEF ssm_decay_desc ssm_decay_desc_init(void);
SSMDEF ssm_result ssm_decay_forward(ssm_ctx *ctx, const ssm_decay_desc *desc,
                                    const ssm_tensor *log_decay, const ssm_tensor *x,
                                    const ssm_tensor *h0, ssm_tensor *out, ssm_tensor *hT);
/* From the forward output `out` and dout (+ optional dhT): dx, dlog_decay (same mode as the
   input), dh0 (optional). */
SSMDEF ssm_result ssm_decay_backward(ssm_ctx *ctx, const ssm_decay_desc *desc,
                                     const ssm_tensor *log_decay, const ssm_tensor *h0,
                                     const ssm_tensor *out, const ssm_tensor *dout,
                                     const ssm_tensor *dhT, ssm_tensor *dx,
                                     ssm_tensor *dlog_decay, ssm_tensor *dh0);
/* Scratch bytes a forward (backward = 0) or backward (1) call with these sizes needs on this
   context (device bytes on a GPU context; an upper bound over the data's alignment). */
SSMDEF ssm_result ssm_decay_workspace_size(const ssm_ctx *ctx, const ssm_decay_desc *desc,
                                           ssm_dtype dtype, int64_t B, int64_t T, int64_t R,
                                           int64_t C, int backward, size_t *bytes);

/* Context parallelism, as ssm_linrec_*_cp (the same ssm_linrec_cp: rank, nranks, allgather):
   every rank passes its own contiguous span of steps (any length >= 1; B, R, C and the dtype
   the same on every rank; rank 0 the first span). Cumulative log decays restart at each span:
   a rank's cA_t sums a over its span up to t (a per-rank cumsum). A rank reduces its span to
   its map (the product of its decays, exp(sum a), and its end state from a zero carry), the
   ranks exchange the maps once through `allgather` (maps of B R (C + 1) f32, f64 for f64
   data), and each runs its span from its true carry. The result is a one-rank call's on the
   whole sequence, up to rounding. On CUDA the map is the first stage of the chunked scan, which
   the scan then continues after the exchange (the ranks share the one-rank work); the CPU
   backends read the span once more for it.
   h0: the whole sequence's initial state, on rank 0 only. hT: the state at the end of this
   rank's span. hin (optional out): the state entering it (h0 or zeros on rank 0), the h0 its
   backward takes. */
SSMDEF ssm_result ssm_decay_forward_cp(ssm_ctx *ctx, const ssm_decay_desc *desc,
                                       const ssm_linrec_cp *cp, const ssm_tensor *log_decay,
                                       const ssm_tensor *x, const ssm_tensor *h0, ssm_tensor *out,
                                       ssm_tensor *hT, ssm_tensor *hin);
/* The adjoint across the same ranks (carries flow from the last span to the first). hin: the
   forward's hin (NULL = zeros); dhT: the gradient of this rank's hT (any rank, optional); dh0:
   the gradient of hin (on rank 0, of h0). dx, dlog_decay as ssm_decay_backward's. */
SSMDEF ssm_result ssm_decay_backward_cp(ssm_ctx *ctx, const ssm_decay_desc *desc,
                                        const ssm_linrec_cp *cp, const ssm_tensor *log_decay,
                                        const ssm_tensor *hin, const ssm_tensor *out,
                                        const ssm_tensor *dout, const ssm_tensor *dhT,
                                        ssm_tensor *dx, ssm_tensor *dlog_decay, ssm_tensor *dh0);
/* Workspace bytes of a _cp call of this rank (T: its span's length). */
SSMDEF ssm_result ssm_decay_cp_workspace_size(const ssm_ctx *ctx, const ssm_decay_desc *desc,
                                              const ssm_linrec_cp *cp, ssm_dtype dtype, int64_t B,
                                              int64_t T, int64_t R, int64_t C, int backward,
                                              size_t *bytes);

/* >>bell ---- block-ELL sparse linear layer ------------------------------------------------ */
/* ------------------------------------------------------------------------------------------
   Block-ELL sparse linear layer (dynamic sparse training, RigL, Evci et al. 2020):  y = x W^T (+ bias)
     values  [R,K,B,B]  float: tile k of block-row r is W[r*B.., c*B..] with c = col_idx[r,k]
     col_idx [R,K]      i32: distinct columns in [0, C) per row, 1 <= K <= C, B >= 1
     x [N, C*B]   y [N, R*B]   bias [R*B] optional
   The transposed index lists, for each input block-column c, the slots s = r*K + k that use
   it: t_slots[t_offsets[c] .. t_offsets[c+1]) ascending, t_offsets [C+1], t_slots [R*K]
   (both i32). The backward pass computes dx through it in a fixed order (no atomics,
   bitwise reproducible); rebuild it with ssm_bell_transpose_index whenever col_idx changes
   (ssm_bell_topology_step does so itself).
   ------------------------------------------------------------------------------------------ */
/* Checks a layer: shapes, dtypes, indices in [0, C), no duplicate column in a row. */
SSMDEF ssm_result ssm_bell_validate(ssm_ctx *ctx, const ssm_tensor *values, const ssm_tensor *col_idx,
                                    int64_t C);
SSMDEF ssm_result ssm_bell_transpose_index(ssm_ctx *ctx, const ssm_tensor *col_idx, ssm_tensor *t_offsets,
                                           ssm_tensor *t_slots);
/* dense [R*B, C*B] and a block mask [R, C] (i32, nonzero = active, exactly K per row) ->
   values (tiles in ascending column order) and col_idx. */
SSMDEF ssm_result ssm_bell_from_dense(ssm_ctx *ctx, const ssm_tensor *dense, const ssm_tensor *mask,
                                      ssm_tensor *values, ssm_tensor *col_idx);
/* values + col_idx -> dense [R*B, C*B] (zeros outside the active tiles). */
SSMDEF ssm_result ssm_bell_to_dense(ssm_ctx *ctx, const ssm_tensor *values, const ssm_tensor *col_idx,
                                    ssm_tensor *dense);
SSMDEF ssm_result ssm_bell_forward(ssm_ctx *ctx, const ssm_tensor *x, const ssm_tensor *values,
                                   const ssm_tensor *col_idx, const ssm_tensor *bias, ssm_tensor *y);
/* From dy [N, R*B]: dx [N, C*B] (needs the transposed index), dvalues [R,K,B,B] (active
   tiles only), dbias [R*B]. Each of dx, dvalues, dbias may be NULL (not computed); when dx
   is NULL the transposed index may be NULL too. */
SSMDEF ssm_result ssm_bell_backward(ssm_ctx *ctx, const ssm_tensor *x, const ssm_tensor *values,
                                    const ssm_tensor *col_idx, const ssm_tensor *t_offsets,
                                    const ssm_tensor *t_slots, const ssm_tensor *dy, ssm_tensor *dx,
                                    ssm_tensor *dvalues, ssm_tensor *dbias);
/* A 64-bit hash of (R, K, col_idx in slot order): ranks compare it to verify they agree. */
SSMDEF ssm_result ssm_bell_checksum(ssm_ctx *ctx, const ssm_tensor *col_idx, uint64_t *checksum);

/* ---- dynamic topology -------------------------------------------------------------------
   Per step, after the backward pass: ssm_bell_topology_observe folds the step into the
   scores. Per step, after the optimizer: ssm_bell_topology_step, which every `period` steps
   (global_step > 0, a multiple of period, before stop_step) updates the topology:
     keep score  (active tile)    k = a_k k + (1 - a_k) ||dW_tile||_F        a_k = 0.95
     grow score  (any r, c)       g = a_g g + (1 - a_g) ||x_c||_F ||dy_r||_F  a_g = 0.99
   (written as "alpha * new + (1 - alpha) * ema" the rates would give windows of 20 and 100
   steps only with alpha weighting the old value: that reading is used.) Per row, the
   round(f K) tiles with the lowest drop score (keep score, or ||W_tile||_F with
   SSM_BELL_DROP_MAGNITUDE) are candidates, lowest first; f = prune_frac, times
   (1 + cos(pi step / stop_step)) / 2 with cosine_decay. Each one, with probability epsilon,
   is replaced by a uniformly random column unused in that row (exploration); otherwise by
   the unused column with the highest grow score, only when that score is > 0 and
   >= swap_ratio x the candidate's keep score (units match: both are gradient norms),
   else it stays. K stays fixed; replaced tiles start at zero, their registered optimizer
   states (same shape as values) are zeroed, and a grown tile's keep score starts at the
   grow score that won it the slot. Changed rows are re-sorted by column, moving values,
   optimizer states and keep scores with their tiles. Randomness is a counter-based hash
   of (seed, global_step, layer_id, row, draw): same inputs, same topology, bitwise.
   The all-reduce hook, when set, is called on keep_score then grow_score right before
   selection (an in-place average across data-parallel ranks makes every rank pick the
   same topology).
   Norms are sums of squares in double in one fixed order, so that a device computes the
   same bits: a B x B tile row by row (each row's squares summed left to right, then the
   rows top to bottom); a B-wide block of x or dy as SSM_BELL_OBS_LANES lane sums (lane l
   takes tokens l, l + LANES, ...; each token's B squares summed first), then the lanes in
   order; then the square root. No multiply-add is fused (IEEE double, round to nearest).
   On a device backend (ssm_bell_topology_create with a CUDA context) the scores live in
   device memory: observe runs as kernels; step copies the scores and the index to the host,
   runs the same selection code (ssm_bell_topology_select_row), then moves values and
   optimizer states and rebuilds the transposed index on the device. The same inputs give
   the same topology, bit for bit, on every backend. The hook then gets device pointers
   (ssm_cuda.h's NCCL hook averages them on the device); col_idx contents are checked on a
   host copy before the hook runs (a bad index leaves the layer and the scores unchanged).
   ------------------------------------------------------------------------------------------ */
#define SSM_BELL_OBS_LANES 256
typedef enum ssm_bell_drop_score {
    SSM_BELL_DROP_GRAD_EMA = 0, /* EMA of the tile's gradient norm (default)     */
    SSM_BELL_DROP_MAGNITUDE = 1 /* ||W_tile||_F (RigL's drop criterion)           */
} ssm_bell_drop_score;

/* In-place reduction (e.g. an average over ranks) of `count` doubles; SSM_OK on success.
   Any other return fails ssm_bell_topology_step with SSM_ERROR_BACKEND (its message carries
   the hook's code) before the layer changes. */
typedef ssm_result (*ssm_bell_allreduce_fn)(void *user, double *data, int64_t count);

typedef struct ssm_bell_topology_config {
    int64_t period;        /* steps between updates (100)                          */
    double prune_frac;     /* fraction of each row's tiles dropped per update (0.1) */
    double swap_ratio;     /* a candidate must score >= this x the dropped (1.5)    */
    double epsilon;        /* exploration probability per dropped tile (0.05)       */
    double keep_alpha;     /* keep-score EMA decay (0.95)                           */
    double grow_alpha;     /* grow-score EMA decay (0.99)                           */
    ssm_bell_drop_score drop_score;
    int cosine_decay;      /* decay prune_frac to 0 at stop_step (needs stop_step)  */
    int64_t stop_step;     /* no updates at or after this step; 0 = never stop      */
    uint64_t seed;
    uint64_t layer_id;
    ssm_bell_allreduce_fn allreduce; /* NULL = single process */
    void *allreduce_user;
} ssm_bell_topology_config;

typedef struct ssm_bell_topology {
    ssm_bell_topology_config config;
    int64_t R, C, K;
    double *keep_score;    /* [R,K], moves with its tile */
    double *grow_score;    /* [R,C]                      */
    int64_t observations;  /* observe calls so far       */
    ssm_allocator allocator;
    int32_t device_type;   /* where the scores live: SSM_DEVICE_CPU or the context's device */
    void *device_state;    /* the device backend's buffers (NULL on the host)               */
    void (*device_release)(void *device_state);
} ssm_bell_topology;

typedef struct ssm_bell_topology_report {
    int updated;           /* 1 when this step was an update step               */
    int64_t pruned, grown; /* always equal (K fixed)                             */
    int64_t explored;      /* of the grown, picked by epsilon-greedy exploration */
    int64_t rejected;      /* drop candidates kept: no candidate beat swap_ratio  */
    int64_t rows_changed;
    double churn;          /* grown / (R*K)                                      */
    double prune_frac;     /* the fraction used this step (after cosine decay)   */
    uint64_t checksum;     /* topology checksum after the step                   */
} ssm_bell_topology_report;

SSMDEF ssm_bell_topology_config ssm_bell_topology_config_init(void);
/* Allocates the score buffers (zeros): through the context's allocator on a CPU backend,
   in device memory (with host staging for the selection) on a device backend. */
SSMDEF ssm_result ssm_bell_topology_create(ssm_ctx *ctx, const ssm_bell_topology_config *config,
                                           int64_t R, int64_t C, int64_t K, ssm_bell_topology **out);
SSMDEF void ssm_bell_topology_destroy(ssm_bell_topology *topo);
/* x [N, C*B], dy [N, R*B], dvalues [R,K,B,B] of this step. */
SSMDEF ssm_result ssm_bell_topology_observe(ssm_ctx *ctx, ssm_bell_topology *topo, const ssm_tensor *x,
                                            const ssm_tensor *dy, const ssm_tensor *dvalues);
/* Updates values, col_idx, the transposed index and the n_opt optimizer states when
   global_step is an update step; report (optional) says what changed. */
SSMDEF ssm_result ssm_bell_topology_step(ssm_ctx *ctx, ssm_bell_topology *topo, int64_t global_step,
                                         ssm_tensor *values, ssm_tensor *col_idx, ssm_tensor *t_offsets,
                                         ssm_tensor *t_slots, ssm_tensor *const *opt_states, int n_opt,
                                         ssm_bell_topology_report *report);
/* Scratch bytes observe / step need for tiles of size B and element dtype (0 for a device
   topology: its buffers were allocated by create). */
SSMDEF ssm_result ssm_bell_topology_workspace_size(const ssm_bell_topology *topo, int64_t B,
                                                   ssm_dtype dtype, size_t *bytes);

/* >>proj ---- fused projection chains ------------------------------------------------------ */
/* ------------------------------------------------------------------------------------------
   Projection chain: the input projections of a linear-RNN layer (GLA, Gated DeltaNet,
   DeltaNet, mLSTM) as ONE pre-concatenated weight W [N, d] whose rows are split into column
   segments of the output; each segment has its own epilogue:
       z = x W_seg^T (+ bias_seg)      a = act(z)      y_seg = a, or per-head a / ||a||
     x [M, d]   W [N, d]   y, pre [M, N]   bias [N] (read only where a segment has .bias)
     A_log [G]  the decay gates' per-head log rates; G = total width of all DECAY_GATE
                segments, consumed in segment order (one column = one head, as GDN's `a`;
                the segment's bias is its dt_bias)
   FUSED runs the GEMM per block of rows and applies every segment's epilogue to the block
   while it is in cache; UNFUSED (one GEMM per projection, the usual layer code, for comparison) runs one GEMM per
   segment, then one activation pass per segment. Both share one epilogue and agree.
   ------------------------------------------------------------------------------------------ */
typedef enum ssm_proj_act {
    SSM_PROJ_NONE = 0,       /* z                                                          */
    SSM_PROJ_SILU = 1,       /* z sigmoid(z)                                               */
    SSM_PROJ_SIGMOID = 2,    /* sigmoid(z)                                                 */
    SSM_PROJ_SIGMOID2 = 3,   /* 2 sigmoid(z): beta in (0, 2), negative eigenvalues         */
    SSM_PROJ_LOGSIGMOID = 4, /* logsigmoid(z) / param (param 0 = 1; GLA's gk uses 16)      */
    SSM_PROJ_SOFTPLUS = 5,   /* log(1 + e^z)                                               */
    SSM_PROJ_RELU = 6,       /* max(z, 0)                                                  */
    SSM_PROJ_GELU_TANH = 7,  /* 0.5 z (1 + tanh(sqrt(2/pi) (z + 0.044715 z^3)))            */
    SSM_PROJ_DECAY_GATE = 8, /* -exp(A_log[h]) softplus(z), z including dt_bias (the bias)  */
    SSM_PROJ_SOFTCAP = 9     /* param tanh(z / param) (param 0 = 15, mLSTM's gate cap)      */
} ssm_proj_act;
#define SSM_PROJ_ACT_COUNT 10
SSMDEF const char *ssm_proj_act_name(ssm_proj_act a);

typedef struct ssm_proj_segment {
    int64_t width;    /* columns of the output (rows of W)                                 */
    ssm_proj_act act;
    double param;     /* LOGSIGMOID divisor, SOFTCAP cap (0 = default)                      */
    int bias;         /* 1: add bias[columns] before the activation                         */
    int64_t l2_head;  /* > 0: L2-normalise each group of l2_head columns after the activation
                         (per-head q/k norm); must divide width. 0: no norm                  */
} ssm_proj_segment;

#define SSM_PROJ_MAX_SEGMENTS 16

typedef enum ssm_proj_path {
    SSM_PROJ_FUSED = 0,  /* forward: GEMM + epilogues per row block; backward: one dX, one dW GEMM */
    SSM_PROJ_UNFUSED = 1 /* forward: a GEMM and an activation pass per segment; backward:
                            a dX and a dW GEMM per segment (the baseline)                   */
} ssm_proj_path;

/* What the forward stores for the backward (the backward must be called with the same mode):
     SAVE_NONE  nothing beyond y (inference; the backward recomputes z = x W^T with one more
                GEMM, into its own dPre scratch, so it needs no extra memory)
     SAVE_PRE   pre [M, N] = z, the pre-activations including bias (one M x N write in the
                forward; the backward runs no GEMM beyond its dX and dW). Activations and
                L2 norms are cheap elementwise recomputations from z either way. */
typedef enum ssm_proj_save { SSM_PROJ_SAVE_NONE = 0, SSM_PROJ_SAVE_PRE = 1 } ssm_proj_save;

typedef struct ssm_proj_stats {
    int64_t gemm_calls;     /* ssm_ctx_gemm calls the op made                */
    double gemm_flops;      /* 2 M N K summed over them                      */
    size_t workspace_bytes; /* scratch the call used                         */
} ssm_proj_stats;

typedef struct ssm_proj_desc {
    int nseg;
    ssm_proj_segment seg[SSM_PROJ_MAX_SEGMENTS];
    ssm_proj_path path;
    ssm_proj_save save;
    int64_t block_rows;    /* FUSED forward: rows per GEMM (0 = all: W packed once) */
    double l2_eps;         /* L2 norm: a / sqrt(sum a^2 + eps) (0 = 1e-6, as fla)   */
    ssm_proj_stats *stats; /* optional out: filled on success                      */
} ssm_proj_desc;

SSMDEF ssm_proj_desc ssm_proj_desc_init(void);
/* Appends a segment (returns SSM_ERROR_INVALID_VALUE when the desc is full). */
SSMDEF ssm_result ssm_proj_desc_add(ssm_proj_desc *desc, int64_t width, ssm_proj_act act,
                                    double param, int bias, int64_t l2_head);
/* N = sum of widths (0 for a bad desc, -1 when a width is negative or the sum overflows) */
SSMDEF int64_t ssm_proj_desc_width(const ssm_proj_desc *desc);

/* y = epilogue(x W^T + bias); pre (SAVE_PRE only, else NULL) receives z. bias / A_log may be
   NULL when no segment needs them. */
SSMDEF ssm_result ssm_proj_forward(ssm_ctx *ctx, const ssm_proj_desc *desc, const ssm_tensor *x,
                                   const ssm_tensor *W, const ssm_tensor *bias,
                                   const ssm_tensor *A_log, ssm_tensor *y, ssm_tensor *pre);
/* From dy [M, N]: every segment's activation (and L2-norm) derivative once into a dPre
   scratch [M, N], then dx = dPre W and dW = dPre^T x (FUSED: one GEMM each over the whole
   width), dbias [N] (column sums of dPre; 0 where a segment has no bias), dA_log [G].
   pre: the forward's z under SAVE_PRE, NULL under SAVE_NONE. dbias, dA_log may be NULL. */
SSMDEF ssm_result ssm_proj_backward(ssm_ctx *ctx, const ssm_proj_desc *desc, const ssm_tensor *x,
                                    const ssm_tensor *W, const ssm_tensor *bias,
                                    const ssm_tensor *A_log, const ssm_tensor *pre,
                                    const ssm_tensor *dy, ssm_tensor *dx, ssm_tensor *dW,
                                    ssm_tensor *dbias, ssm_tensor *dA_log);
/* Scratch bytes of a forward (backward = 0) or backward (1) call. Validates desc, dtype and
   sizes as the op does (an error leaves the context's message); never a wrapped size. */
SSMDEF ssm_result ssm_proj_workspace_size(const ssm_ctx *ctx, const ssm_proj_desc *desc,
                                          ssm_dtype dtype, int64_t M, int64_t d, int backward,
                                          size_t *bytes);

/* >>outchain ---- output chain ------------------------------------------------------------- */
/* ------------------------------------------------------------------------------------------
   Output chain:  z = RMSNorm_head(o) * weight * gate(g),   y = z W_o^T
     o, g [M, D]   weight [head_dim] (shared by the heads; NULL = ones)   W_o [d_out, D]
     y [M, d_out]  rstd [M, D / head_dim] (optional in the forward: 1/sqrt(mean o^2 + eps))
   gate: SiLU (GDN / fla's FusedRMSNormGated) or sigmoid. The forward normalises a block of
   rows into scratch and runs the o_proj GEMM on it while hot; the backward rebuilds z in
   scratch (from rstd when given), then dW_o = dy^T z and dz = dy W_o (one GEMM each).
   ------------------------------------------------------------------------------------------ */
typedef enum ssm_outchain_gate { SSM_OUTCHAIN_SILU = 0, SSM_OUTCHAIN_SIGMOID = 1 } ssm_outchain_gate;

typedef struct ssm_outchain_desc {
    ssm_outchain_gate gate;
    int64_t head_dim;   /* RMSNorm group; 0 = the whole width D (must divide D) */
    double eps;         /* 0 = 1e-6                                               */
    int64_t block_rows; /* forward rows per block (0 = 64)                        */
} ssm_outchain_desc;

SSMDEF ssm_outchain_desc ssm_outchain_desc_init(void);
SSMDEF ssm_result ssm_outchain_forward(ssm_ctx *ctx, const ssm_outchain_desc *desc,
                                       const ssm_tensor *o, const ssm_tensor *g,
                                       const ssm_tensor *weight, const ssm_tensor *W_o,
                                       ssm_tensor *y, ssm_tensor *rstd);
/* rstd: the forward's (NULL = recompute). dweight may be NULL; do_, dg, dW_o are required. */
SSMDEF ssm_result ssm_outchain_backward(ssm_ctx *ctx, const ssm_outchain_desc *desc,
                                        const ssm_tensor *o, const ssm_tensor *g,
                                        const ssm_tensor *weight, const ssm_tensor *W_o,
                                        const ssm_tensor *rstd, const ssm_tensor *dy,
                                        ssm_tensor *do_, ssm_tensor *dg, ssm_tensor *dweight,
                                        ssm_tensor *dW_o);
/* Scratch bytes of a forward / backward call (validated as ssm_proj_workspace_size). */
SSMDEF ssm_result ssm_outchain_workspace_size(const ssm_ctx *ctx, const ssm_outchain_desc *desc,
                                              ssm_dtype dtype, int64_t M, int64_t D,
                                              int64_t d_out, int backward, size_t *bytes);

/* >>delta ---- delta rule ------------------------------------------------------------------ */
/* ------------------------------------------------------------------------------------------
   Delta rule: DeltaNet, Gated DeltaNet, DeltaProduct
   Per batch b and head h a state S [K,V] (row = key feature, column = value feature). Each
   token t applies n_h >= 1 generalized Householder factors j = 0..n_h-1 in order, then reads
   out once:
       S <- alpha_{t,j} (I - beta_{t,j} k_{t,j} k_{t,j}^T) S + beta_{t,j} k_{t,j} v_{t,j}^T
       o_t = scale * S^T q_t
   with alpha_{t,0} = exp(g_t) (1 without g) and alpha_{t,j>0} = 1: the gate acts once per
   token, before its first factor.
     n_h = 1, no g       DeltaNet          (Yang et al. 2024)
     n_h = 1, g          Gated DeltaNet    (Yang et al. 2025); g_t <= 0 is the intended range
                         (not enforced: g > 0 grows the state and the chunked form's exp(G_i - G_j))
     n_h > 1             DeltaProduct      (Siems et al. 2025), with or without g
   Tensors (any strides: [B,T,H,D] and head-first [B,H,T,D] storage are both views):
     q          [B,T,H,K]
     k          [B,T,H,K]          or [B,T,H,n_h,K] (DeltaProduct; rank 5 sets n_h)
     v          [B,T,H,V]          or [B,T,H,n_h,V]
     beta       [B,T,H]            or [B,T,H,n_h]
     g          [B,T,H]            optional per-step log gate, finite (NULL = DeltaNet, alpha = 1)
     s0         [N,H,K,V]          optional initial state (NULL = zeros)
     o          [B,T,H,V]          output
     sT         [N,H,K,V]          optional final state out
     cu_seqlens [N+1] i32 or i64   optional variable-length batch: B must be 1 and sequence i
                                   is tokens [cu[i], cu[i+1]) starting from s0[i]; N = B
                                   without it. cu[0] = 0, non-decreasing, cu[N] = T; the values
                                   are checked when the tensor is host-resident (any stride but 0).
   All float tensors share one dtype: f32 or f64 on the CPU backends (state and arithmetic in
   that dtype), f32/f16/bf16 on CUDA (f32 state and accumulation).
   Methods:
     RECURRENT  token by token: O(T n_h K V) per head, the state in the workspace.
     CHUNKED    the WY/UT form per chunk of C sub-tokens (C = 64 by default):
                  A_ij = beta_i e^(G_i - G_j) k_i.k_j (i > j, else 0),   Tm = (I + A)^-1,
                  W = Tm diag(beta e^G) K,  U = Tm diag(beta) V   (G: in-chunk cumulative gate)
                then per chunk in order: N = U - W S, o = e^G Q S + tril(Q K^T . e^(G_i-G_j)) N,
                S <- e^(G_C) S + (e^(G_C - G) K)^T N. All products run on the backend's batched
                GEMM (ssm_ctx_gemm), so BLIS / cuBLAS carry the work; exp(G_i - G_j) is formed
                only for i >= j, so strong gates underflow to 0 instead of overflowing.
     AUTO       the backend picks (the CPU backends: CHUNKED once the longest sequence spans
                two chunks, T n_h >= 2C; else RECURRENT).
   DeltaProduct runs the chunked form on the T n_h sub-tokens (readout rows only at the last
   factor of each token). fla's interleaved DeltaProduct layout k [B, T*n_h, H, K] is the view
   [B,T,H,n_h,K] with strides (T n_h H K, n_h H K, K, H K, 1). The CUDA backend's chunked form
   runs in place on that layout (k, v, beta and their gradients); other layouts, and its token
   loop, go through sub-token copies in the workspace (workspace_size reports that upper bound).
   Scratch (host backends, one sequence-head at a time; L' = min(T n_h, 16 C) sub-tokens, 16
   chunks at a time): CHUNKED forward about L' (4K + 2V + 2C) elements, backward about
   L' (4K + 4V + 3C) + (17 + T n_h / 16C) K V; RECURRENT forward a state, backward
   (C + 2 + T n_h / C) states.
   ------------------------------------------------------------------------------------------ */
typedef enum ssm_delta_method {
    SSM_DELTA_AUTO = 0,      /* the backend picks by shape            */
    SSM_DELTA_RECURRENT = 1, /* token by token                        */
    SSM_DELTA_CHUNKED = 2    /* WY/UT chunks on the batched GEMM       */
} ssm_delta_method;
#define SSM_DELTA_METHOD_COUNT 3
SSMDEF const char *ssm_delta_method_name(ssm_delta_method m);

/* What a call did (filled on success when desc.stats is set). */
typedef struct ssm_delta_stats {
    ssm_delta_method method; /* the method actually run (resolves AUTO)     */
    int64_t chunk;           /* chunk length used (RECURRENT: 0 forward, the backward's checkpoint interval) */
    double flops;            /* multiply-adds x 2 of the method, nominal     */
    size_t workspace_bytes;  /* scratch the call used                        */
} ssm_delta_stats;

typedef struct ssm_delta_desc {
    ssm_delta_method method;
    int64_t chunk;          /* CHUNKED chunk length in sub-tokens; 0 = 64          */
    double scale;           /* readout scale; 0 = 1/sqrt(K)                         */
    ssm_delta_stats *stats; /* optional out                                         */
    ssm_tensor *saved;      /* optional: the forward's chunk quantities, kept for the backward (below) */
} ssm_delta_desc;
/* desc.saved: a contiguous, 16-byte aligned u8 tensor [bytes] on the backend's device, bytes from
   ssm_delta_workspace_size(pass 3); more is fine. A forward given it also writes there what
   its chunked form derives from q, k, v, beta and g (W, U, Tm, the masked Q K^T, packed Q
   and K, v_new and the chunk-start states: on CUDA about 3K + 2V + 128 + KV/64 elements per
   sub-token and head, K and V rounded up to 32); a backward given it reads them instead of
   running the chunk preparation and the state pass again. The backward's saved must come
   from the forward of the same inputs, desc and context, unchanged since (the caller's
   contract, as for the activations an autograd engine keeps); the results are bitwise those
   without it. Where the query gives 0 bytes (host backends, the recurrent method) nothing is
   kept or read. Varlen: query as for the workspace (T + 64 N); the op's error message gives
   the exact figure. */

SSMDEF ssm_delta_desc ssm_delta_desc_init(void);

/* o (and sT when given) from q, k, v, beta (+ g, s0, cu_seqlens when given). */
SSMDEF ssm_result ssm_delta_forward(ssm_ctx *ctx, const ssm_delta_desc *desc,
                                    const ssm_tensor *q, const ssm_tensor *k,
                                    const ssm_tensor *v, const ssm_tensor *beta,
                                    const ssm_tensor *g, const ssm_tensor *s0,
                                    const ssm_tensor *cu_seqlens, ssm_tensor *o,
                                    ssm_tensor *sT);
/* Gradients from dout [B,T,H,V] and dsT [N,H,K,V] (either may be NULL = zero). Recomputes the
   forward (less what desc.saved holds). CHUNKED: the chunk quantities and the state pass again, then
   per chunk in reverse the adjoint of the WY form on the GEMM (about 3x the forward's FLOPs,
   4x when a sequence spans more than 16 chunks: the states at every 16th chunk come from one
   more forward pass, which keeps the scratch independent of T).
   RECURRENT: the states at chunk starts are kept, each chunk is replayed and differentiated
   sub-token by sub-token (O(T n_h K V), about 4x the recurrent forward). Every gradient output
   is optional (NULL = not wanted); dg needs g. Shapes equal the corresponding inputs' (ds0 is
   [N,H,K,V] also when s0 is NULL: the gradient at zero). Deterministic: fixed reduction order,
   no atomics. */
SSMDEF ssm_result ssm_delta_backward(ssm_ctx *ctx, const ssm_delta_desc *desc,
                                     const ssm_tensor *q, const ssm_tensor *k,
                                     const ssm_tensor *v, const ssm_tensor *beta,
                                     const ssm_tensor *g, const ssm_tensor *s0,
                                     const ssm_tensor *cu_seqlens, const ssm_tensor *dout,
                                     const ssm_tensor *dsT, ssm_tensor *dq, ssm_tensor *dk,
                                     ssm_tensor *dv, ssm_tensor *dbeta, ssm_tensor *dg,
                                     ssm_tensor *ds0);
/* One decode step for every (batch, head), state updated in place:
     q [B,H,K]   k [B,H,K] or [B,H,n_h,K]   v [B,H,V] or [B,H,n_h,V]   beta [B,H] or [B,H,n_h]
     g [B,H] optional   state [B,H,K,V] (in/out)   o [B,H,V]
   desc.method and desc.chunk are ignored (always recurrent). */
SSMDEF ssm_result ssm_delta_step(ssm_ctx *ctx, const ssm_delta_desc *desc, const ssm_tensor *q,
                                 const ssm_tensor *k, const ssm_tensor *v,
                                 const ssm_tensor *beta, const ssm_tensor *g,
                                 ssm_tensor *state, ssm_tensor *o);
/* Scratch bytes a call with these sizes needs on this context's backend: pass 0 = forward,
   1 = backward, 2 = step (T ignored); pass 3 = the bytes of desc.saved (0: nothing is kept).
   Varlen (N sequences, cu_seqlens): B = 1, T = total tokens + 64 N, an upper bound (the CUDA
   chunked form gives each sequence its own last, partial chunk of 64 sub-tokens). */
SSMDEF ssm_result ssm_delta_workspace_size(const ssm_ctx *ctx, const ssm_delta_desc *desc,
                                           ssm_dtype dtype, int64_t B, int64_t T, int64_t H,
                                           int64_t K, int64_t V, int64_t n_h, int pass,
                                           size_t *bytes);

/* >>backend ---- the backend interface ----------------------------------------------------- */
/* ------------------------------------------------------------------------------------------
   Backend interface (for backend authors: ssm_blas.h, ssm_cuda.h)
   Every public op validates its arguments once (calling the backend's check_tensor on each
   tensor), builds a plan (sizes, normalised strides, the method resolved from AUTO, workspace
   bytes), asks the backend whether it supports the op, fills the stats, and dispatches: to the
   backend's slot for the op, or - when that slot is NULL or answers SSM__NOT_MINE - to ssm.h's
   generic algorithm, which runs on the backend's primitives (gemm and copy). Backends never
   re-validate, re-resolve AUTO or re-derive shapes.
   ------------------------------------------------------------------------------------------ */
/* Every op direction a backend may be asked about (supports, workspace_size). */
typedef enum ssm_op {
    SSM_OP_LINREC_FORWARD = 0,
    SSM_OP_LINREC_BACKWARD = 1,
    SSM_OP_DECAY_FORWARD = 2,
    SSM_OP_DECAY_BACKWARD = 3,
    SSM_OP_BELL_FORWARD = 4,
    SSM_OP_BELL_BACKWARD = 5,
    SSM_OP_BELL_TOPOLOGY = 6, /* scores, prune / grow, transposed index                 */
    SSM_OP_PROJ_FORWARD = 7,
    SSM_OP_PROJ_BACKWARD = 8,
    SSM_OP_OUTCHAIN_FORWARD = 9,
    SSM_OP_OUTCHAIN_BACKWARD = 10,
    SSM_OP_DELTA_FORWARD = 11,
    SSM_OP_DELTA_BACKWARD = 12,
    SSM_OP_DELTA_STEP = 13
} ssm_op;
#define SSM_OP_COUNT 14

/* A backend slot's answer "not mine: run the generic algorithm" (never returned to users). */
#define SSM__NOT_MINE ((ssm_result)1)
/* Returns from the enclosing function when expr is not SSM_OK (ssm.h and its backends). */
#define SSM__TRY(expr)                         \
    do {                                       \
        ssm_result ssm__r_ = (expr);           \
        if (ssm__r_ != SSM_OK) return ssm__r_; \
    } while (0)

/* A batch of matrices over two batch indices: element (i, j) of matrix (s, k) sits at
   ptr + s*ss + k*bs + i*rs + j*cs (element strides; a transpose is a swap of rs and cs).
   dtype is the element type of this operand (zero = the call's dtype): the generic
   recurrence keeps 16-bit inputs' states and scratch in f32 where the backend asks for it. */
typedef struct ssm_matrix_batch {
    void *ptr;
    int64_t rs, cs, bs;
    int64_t ss;
    ssm_dtype dtype;
} ssm_matrix_batch;

/* A batch of matrix sequences: element (s, t, i, j) at ptr + off + s*ss + t*ts + i*rs + j*cs
   elements. Reversed views have a negative ts and off at the far end; offsets stay integers
   until an access, so no out-of-range pointer is ever formed. */
typedef struct ssm_seq_view {
    void *ptr;
    ssm_dtype dtype;
    int64_t off, ss, ts, rs, cs;
} ssm_seq_view;

/* A linrec call as validated. Strides are (batch, time, row, col) element strides of each
   tensor (time stride 0 for the state tensors without time; all zero for absent ones). */
typedef struct ssm_linrec_plan {
    ssm_op op;                /* SSM_OP_LINREC_FORWARD or _BACKWARD                        */
    ssm_dtype dtype;          /* of every tensor                                            */
    ssm_dtype work;           /* of the running state and scratch (f32 for 16-bit inputs)  */
    int64_t S, T, n, m;
    ssm_linrec_method method; /* resolved: never AUTO                                       */
    int64_t chunk;            /* resolved chunk length (CHUNKED)                            */
    int64_t group;            /* sequences the generic algorithm batches together (1 or S) */
    int reverse;
    int64_t A[4], b[4], h0[4], h[4], hT[4];     /* forward tensors (A, h0, h also backward)  */
    int64_t hin[4];                               /* ssm_linrec_forward_cp's hin               */
    int64_t dh[4], dhT[4], dA[4], db[4], dh0[4]; /* backward tensors (dA may be absent)      */
    size_t work_bytes;        /* the driver's state buffer in `work` (0 when work = dtype)  */
    size_t workspace_bytes;   /* everything the call takes from the workspace               */
} ssm_linrec_plan;

/* A decay-scan call as validated (tensors are already (batch, time, row, col) ordered). */
typedef struct ssm_decay_plan {
    ssm_op op;       /* SSM_OP_DECAY_FORWARD or _BACKWARD */
    ssm_dtype dtype;
    int64_t B, T, R, C;
    ssm_decay_input input;
    int span;        /* a _cp call: 1, its workspace figure covering the decay_span slot;
                        2 once that slot ran on this plan and these tensors (the scan slots
                        may start from what it left in the workspace) */
    size_t workspace_bytes;
} ssm_decay_plan;

/* The delta rule as a backend sees it: built once by the public function after validation.
   Token tensors' strides are normalised to (batch, time, head, factor, feature) element
   strides (0 where a dimension is absent: the factor dim for n_h = 1 ranks, the feature dim
   of beta and g, time for ssm_delta_step); state tensors' to (sequence, head, key row, value
   column). An absent tensor has all-zero strides. */
typedef struct ssm_delta_strides {
    int64_t q[5], k[5], v[5], beta[5], g[5], o[5];       /* forward / step operands      */
    int64_t dout[5], dq[5], dk[5], dv[5], dbeta[5], dg[5]; /* backward operands           */
    int64_t s0[4], sT[4], dsT[4], ds0[4];                  /* step: s0 = sT = the state    */
} ssm_delta_strides;

typedef struct ssm_delta_plan {
    ssm_dtype dtype;
    int64_t B, T, H, K, V; /* T = 1 for ssm_delta_step                                 */
    int64_t n_h;           /* Householder factors per token (1 = DeltaNet)                */
    int64_t N;             /* independent sequences: B, or cu_seqlens' N (then B = 1)     */
    int64_t max_len;       /* tokens of the longest sequence (T when the lengths are on the device) */
    ssm_delta_method method; /* resolved: never AUTO                                      */
    int64_t chunk;         /* chunk length (sub-tokens); RECURRENT: 0, or the backward's checkpoint interval */
    double scale;          /* resolved readout scale                                      */
    int gated;             /* g given                                                      */
    int cu_bits;           /* 32 or 64: cu_seqlens' integer width; 0 = no cu_seqlens      */
    int64_t cu_stride;     /* cu_seqlens' element stride                                   */
    ssm_delta_strides st;
    size_t workspace_bytes; /* host scratch the generic algorithm needs (CPU backends)    */
    void *saved;           /* desc.saved's data when its bytes (pass 3) are > 0, else NULL  */
} ssm_delta_plan;

/* A validated block-ELL call (ssm_bell_forward / ssm_bell_backward) as a backend sees it:
   N tokens, R block-rows, K slots per row, tile B, C block-columns; which outputs are wanted. */
typedef struct ssm_bell_plan {
    ssm_dtype dtype;
    int64_t N, R, K, B, C;
    int has_bias, want_dx, want_dvalues, want_dbias;
} ssm_bell_plan;

/* A validated projection chain (ssm_proj_forward / ssm_proj_backward) as a backend sees it:
   x [M, K] W [N, K] y, pre, dy [M, N]; segments with their parameters resolved (param 0 ->
   the default, l2_eps 0 -> 1e-6) and their first columns c0 / first A_log index g0. Strides
   are element strides (row, col) of each 2-D operand, (elem) of each vector; all zero for an
   absent tensor and for a workspace query (which knows no tensors). */
typedef struct ssm_proj_plan {
    ssm_op op;              /* SSM_OP_PROJ_FORWARD or _BACKWARD                              */
    ssm_dtype dtype;
    int64_t M, K, N, G;     /* rows, input width d, output width, decay-gate columns          */
    int nseg;
    ssm_proj_segment seg[SSM_PROJ_MAX_SEGMENTS];
    int64_t c0[SSM_PROJ_MAX_SEGMENTS + 1]; /* first column of each segment; c0[nseg] = N   */
    int64_t g0[SSM_PROJ_MAX_SEGMENTS];     /* first A_log index of each decay gate          */
    ssm_proj_path path;
    ssm_proj_save save;
    int64_t block_rows;     /* resolved (host FUSED forward)                                  */
    double l2_eps;          /* resolved                                                       */
    int has_bias;           /* some segment reads bias                                        */
    int want_dbias, want_dalog;
    int64_t x[2], W[2], y[2], pre[2], dy[2], dx[2], dW[2];
    int64_t bias, alog, dbias, dalog;
    size_t workspace_bytes; /* what the call takes from the workspace (device bytes on CUDA) */
} ssm_proj_plan;

/* A validated output chain: o, g [M, D] in H heads of hd, weight [hd], W_o [dout, D],
   y, dy [M, dout], rstd [M, H]; eps resolved. Strides as in ssm_proj_plan. */
typedef struct ssm_outchain_plan {
    ssm_op op;              /* SSM_OP_OUTCHAIN_FORWARD or _BACKWARD                          */
    ssm_dtype dtype;
    int64_t M, D, hd, H, dout;
    ssm_outchain_gate gate;
    double eps;
    int64_t block_rows;     /* resolved (host forward)                                        */
    int has_weight, has_rstd, want_dweight;
    int64_t o[2], g[2], W_o[2], y[2], rstd[2], dy[2], do_[2], dg[2], dW_o[2];
    int64_t weight, dweight;
    size_t workspace_bytes;
} ssm_outchain_plan;

struct ssm_backend {
    const char *name;
    int32_t device_type; /* SSM_DEVICE_CPU or SSM_DEVICE_CUDA: where tensors must live */
    ssm_result (*init)(ssm_ctx *ctx, const ssm_ctx_config *cfg, void **state);
    void (*shutdown)(ssm_ctx *ctx, void *state);
    /* 1 when this backend can run `op` for this plan (plan: the op's ssm_*_plan, or NULL for
       ops without one yet). NULL = every op on a CPU backend, none on a device backend. The
       op answers SSM_ERROR_UNSUPPORTED when 0. */
    int (*supports)(const ssm_ctx *ctx, ssm_op op, const void *plan);
    /* Residency / alignment of one tensor argument, called by the validation layer after the
       generic checks (rank, dtype, device type, sizes) and before anything else. NULL = none. */
    ssm_result (*check_tensor)(ssm_ctx *ctx, const char *op, const char *name, const ssm_tensor *t);
    /* Workspace bytes of `op` for a plan whose other fields are filled. For linrec: the
       method's scratch (the driver adds plan.work_bytes). NULL or SSM__NOT_MINE = the
       generic figure. Device bytes on a device backend. */
    ssm_result (*workspace_size)(const ssm_ctx *ctx, ssm_op op, const void *plan, size_t *bytes);
    /* Grows the backend's own (device) workspace to >= bytes and returns it with its capacity
       (bytes 0: just report). NULL = host memory through the context's allocator. */
    ssm_result (*workspace_reserve)(ssm_ctx *ctx, size_t bytes, void **ptr, size_t *capacity);
    /* C_sk = alpha * A_sk B_sk + beta * C_sk for s < outer, k < batch; A_sk is M x K, B_sk K x N,
       C_sk M x N. C never overlaps A or B; the C_sk are disjoint. Required. */
    ssm_result (*gemm)(ssm_ctx *ctx, ssm_dtype dtype, int64_t outer, int64_t batch, int64_t M,
                       int64_t N, int64_t K, double alpha, ssm_matrix_batch A, ssm_matrix_batch B,
                       double beta, ssm_matrix_batch C);
    /* dst_sk = src_sk (+ dst_sk when accumulate; src.ptr NULL: dst_sk = 0), rows x cols
       matrices, s < outer, k < batch. NULL = host loops (CPU backends). */
    ssm_result (*copy)(ssm_ctx *ctx, ssm_dtype dtype, int64_t outer, int64_t batch, int64_t rows,
                       int64_t cols, ssm_matrix_batch src, ssm_matrix_batch dst, int accumulate);
    /* linrec: resolves plan->method when AUTO, and may set chunk, group and work (ssm.h has
       set the generic defaults before the call). NULL = sequential. */
    void (*linrec_pick)(const ssm_ctx *ctx, ssm_linrec_plan *plan);
    /* linrec: a specialised kernel for the method's steps 1..T-1 of every sequence, h_0
       already in h (all views in processing order; h in plan->work). out, when its ptr is set,
       is the caller's view of the solution in plan->dtype: a kernel that also writes its steps
       1..T-1 sets *out_written (then, in a forward, h need hold only h_{T-1} besides h_0: the
       driver reads back no other step). Counts its products into st. SSM__NOT_MINE = the
       generic algorithm. */
    ssm_result (*linrec_steps)(ssm_ctx *ctx, const ssm_linrec_plan *p, ssm_seq_view A,
                               ssm_seq_view b, ssm_seq_view h, ssm_seq_view out, int *out_written,
                               void *scratch, ssm_linrec_stats *st);
    /* Whole-op slots (validated arguments, the plan built): SSM__NOT_MINE or NULL = generic. */
    ssm_result (*linrec_forward)(ssm_ctx *ctx, const ssm_linrec_plan *p, const ssm_tensor *A,
                                 const ssm_tensor *b, const ssm_tensor *h0, ssm_tensor *h,
                                 ssm_tensor *hT);
    ssm_result (*linrec_backward)(ssm_ctx *ctx, const ssm_linrec_plan *p, const ssm_tensor *A,
                                  const ssm_tensor *h0, const ssm_tensor *h, const ssm_tensor *dh,
                                  const ssm_tensor *dhT, ssm_tensor *dA, ssm_tensor *db,
                                  ssm_tensor *dh0);
    ssm_result (*decay_forward)(ssm_ctx *ctx, const ssm_decay_plan *p, const ssm_tensor *log_decay,
                                const ssm_tensor *x, const ssm_tensor *h0, ssm_tensor *out,
                                ssm_tensor *hT);
    ssm_result (*decay_backward)(ssm_ctx *ctx, const ssm_decay_plan *p,
                                 const ssm_tensor *log_decay, const ssm_tensor *h0,
                                 const ssm_tensor *out, const ssm_tensor *dout,
                                 const ssm_tensor *dhT, ssm_tensor *dx, ssm_tensor *dlog_decay,
                                 ssm_tensor *dh0);
    /* Later ops add their plan, their ssm_op entries and slots here:
       ssm_result (*<op>_<dir>)(ssm_ctx *, const ssm_<op>_plan *, <the public op's tensors>) */
    /* Delta rule: whole-op replacements on a validated plan (NULL or SSM__NOT_MINE = the
       generic algorithm), the AUTO pick (NULL = the CPU rule) and the scratch bytes a pass
       needs (0 forward, 1 backward, 2 step, 3 desc.saved; NULL = the generic host figure, 0
       for pass 3). p->saved (set when pass 3 gives bytes) is kept by the forward slot and
       read by the backward slot. */
    ssm_result (*delta_forward)(ssm_ctx *ctx, const ssm_delta_plan *p, const ssm_tensor *q,
                                const ssm_tensor *k, const ssm_tensor *v, const ssm_tensor *beta,
                                const ssm_tensor *g, const ssm_tensor *s0,
                                const ssm_tensor *cu_seqlens, ssm_tensor *o, ssm_tensor *sT);
    ssm_result (*delta_backward)(ssm_ctx *ctx, const ssm_delta_plan *p, const ssm_tensor *q,
                                 const ssm_tensor *k, const ssm_tensor *v,
                                 const ssm_tensor *beta, const ssm_tensor *g,
                                 const ssm_tensor *s0, const ssm_tensor *cu_seqlens,
                                 const ssm_tensor *dout, const ssm_tensor *dsT, ssm_tensor *dq,
                                 ssm_tensor *dk, ssm_tensor *dv, ssm_tensor *dbeta,
                                 ssm_tensor *dg, ssm_tensor *ds0);
    ssm_result (*delta_step)(ssm_ctx *ctx, const ssm_delta_plan *p, const ssm_tensor *q,
                             const ssm_tensor *k, const ssm_tensor *v, const ssm_tensor *beta,
                             const ssm_tensor *g, ssm_tensor *state, ssm_tensor *o);
    ssm_delta_method (*delta_pick)(const ssm_ctx *ctx, const ssm_delta_plan *p);
    ssm_result (*delta_workspace)(const ssm_ctx *ctx, const ssm_delta_plan *p, int pass,
                                  size_t *bytes);
    /* Block-ELL layer on device tensors (col_idx and the transposed index are not read on the
       host: their contents are the caller's contract there). NULL = the host code (CPU only). */
    ssm_result (*bell_forward)(ssm_ctx *ctx, const ssm_bell_plan *p, const ssm_tensor *x,
                               const ssm_tensor *values, const ssm_tensor *col_idx,
                               const ssm_tensor *bias, ssm_tensor *y);
    ssm_result (*bell_backward)(ssm_ctx *ctx, const ssm_bell_plan *p, const ssm_tensor *x,
                                const ssm_tensor *values, const ssm_tensor *col_idx,
                                const ssm_tensor *t_offsets, const ssm_tensor *t_slots,
                                const ssm_tensor *dy, ssm_tensor *dx, ssm_tensor *dvalues,
                                ssm_tensor *dbias);
    /* Projection and output chains on a validated plan (NULL or SSM__NOT_MINE = ssm.h's host
       code on the gemm slot, CPU backends only). */
    ssm_result (*proj_forward)(ssm_ctx *ctx, const ssm_proj_plan *p, const ssm_tensor *x,
                               const ssm_tensor *W, const ssm_tensor *bias, const ssm_tensor *A_log,
                               ssm_tensor *y, ssm_tensor *pre);
    ssm_result (*proj_backward)(ssm_ctx *ctx, const ssm_proj_plan *p, const ssm_tensor *x,
                                const ssm_tensor *W, const ssm_tensor *bias,
                                const ssm_tensor *A_log, const ssm_tensor *pre,
                                const ssm_tensor *dy, ssm_tensor *dx, ssm_tensor *dW,
                                ssm_tensor *dbias, ssm_tensor *dA_log);
    ssm_result (*outchain_forward)(ssm_ctx *ctx, const ssm_outchain_plan *p, const ssm_tensor *o,
                                   const ssm_tensor *g, const ssm_tensor *weight,
                                   const ssm_tensor *W_o, ssm_tensor *y, ssm_tensor *rstd);
    ssm_result (*outchain_backward)(ssm_ctx *ctx, const ssm_outchain_plan *p,
                                    const ssm_tensor *o, const ssm_tensor *g,
                                    const ssm_tensor *weight, const ssm_tensor *W_o,
                                    const ssm_tensor *rstd, const ssm_tensor *dy,
                                    ssm_tensor *do_, ssm_tensor *dg, ssm_tensor *dweight,
                                    ssm_tensor *dW_o);
    /* Block-ELL topology with the scores on the device (NULL = host scores, CPU backends).
       create: zeroed score buffers and whatever step needs (sets topo's keep_score,
       grow_score, device_state, device_release). observe: folds one step into the scores
       (plan: dtype, N, R, K, B, C). step with update = 1: an update step (ssm.h has run the
       hook and set rep->updated / prune_frac; nd drop candidates per row), selecting through
       ssm_bell_topology_select_row and filling rep's counts and checksum; update = 0: only
       rep->checksum (rep NULL: nothing to do). */
    ssm_result (*bell_topology_create)(ssm_ctx *ctx, ssm_bell_topology *topo);
    ssm_result (*bell_topology_observe)(ssm_ctx *ctx, const ssm_bell_plan *p,
                                        ssm_bell_topology *topo, const ssm_tensor *x,
                                        const ssm_tensor *dy, const ssm_tensor *dvalues);
    ssm_result (*bell_topology_step)(ssm_ctx *ctx, const ssm_bell_plan *p,
                                     ssm_bell_topology *topo, int64_t global_step, int64_t nd,
                                     int update, ssm_tensor *values, ssm_tensor *col_idx,
                                     ssm_tensor *t_offsets, ssm_tensor *t_slots,
                                     ssm_tensor *const *opt_states, int n_opt,
                                     ssm_bell_topology_report *rep);
    /* linrec, context parallel (ssm_linrec_*_cp): steps 1..T-1 as linrec_steps, in two phases
       around the ranks' exchange. phase 1: the work that does not depend on h_0 and, with
       want_end, h_{T-1} from the h_0 in h (other steps may be left anything); phase 2: steps
       1..T-1 from the h_0 now in h, on the scratch phase 1 left. Asked only when one group
       holds every sequence. SSM__NOT_MINE from phase 1 (or NULL) = the generic split: a whole
       solve in each phase. */
    ssm_result (*linrec_steps_cp)(ssm_ctx *ctx, const ssm_linrec_plan *p, int phase, int want_end,
                                  ssm_seq_view A, ssm_seq_view b, ssm_seq_view h, ssm_seq_view out,
                                  int *out_written, void *scratch, ssm_linrec_stats *st);
    /* decay, context parallel (ssm_decay_*_cp), before the exchange: this span's map into
       `map` (device memory on a device backend), in f32 (f64 for f64 data): [B][R][C] the
       state at the span's end from init (h0; NULL = zeros) through x (adjoint = 1: the
       gradient of the state entering the span from dout, passed as x, and init = dhT), then
       [B][R] P = exp(sum of the span's a_t); map NULL (the rank processed last): only work
       that needs no carry, if any. Its scratch is inside the plan's workspace figure. After
       SSM_OK the decay_forward / decay_backward slot of the same call sees plan->span = 2 and
       the workspace as this slot left it; they take h0 / dhT in the map's dtype from a _cp
       call (the carry). NULL or SSM__NOT_MINE = host loops (CPU backends). */
    ssm_result (*decay_span)(ssm_ctx *ctx, const ssm_decay_plan *p, int adjoint,
                             const ssm_tensor *log_decay, const ssm_tensor *x,
                             const ssm_tensor *init, void *map);
    void *reserved[14];
};

/* For backends: the state the backend's init returned, the config's thread count, an
   error with a formatted message (returns `code`), and scratch memory from the workspace
   (device memory on a device backend). */
SSMDEF void *ssm_ctx_backend_state(const ssm_ctx *ctx);
SSMDEF const ssm_backend *ssm_ctx_backend(const ssm_ctx *ctx);
SSMDEF int ssm_ctx_threads(const ssm_ctx *ctx);
SSMDEF ssm_result ssm_ctx_error(ssm_ctx *ctx, ssm_result code, const char *fmt, ...);
SSMDEF ssm_result ssm_ctx_workspace(ssm_ctx *ctx, size_t bytes, void **ptr);
/* The backend's batched GEMM over one batch index (see ssm_backend.gemm; every operand in
   `dtype`, the ss and dtype fields of the batches are ignored), for ops and benchmarks. */
SSMDEF ssm_result ssm_ctx_gemm(ssm_ctx *ctx, ssm_dtype dtype, int64_t batch, int64_t M, int64_t N,
                               int64_t K, double alpha, ssm_matrix_batch A, ssm_matrix_batch B,
                               double beta, ssm_matrix_batch C);
/* For backends, on host arrays (no validation): one row of the block-ELL topology update
   rule exactly as ssm_bell_topology_step runs it, so every backend selects the same tiles.
   col [K] the row's columns (out: re-sorted when changed), keep [K] its keep scores (moved
   with the tiles; a grown tile's is its grow score), grow [C], drop [K] the drop scores (NULL
   = keep), nd drop candidates. Out: perm [K] (new slot j takes old slot perm[j]), fresh [K]
   (old slot k was regrown: its tile and optimizer states start at zero). scratch holds
   SSM_BELL_SELECT_SCRATCH(K, C) bytes (8-byte aligned). Adds to rep's grown / explored /
   rejected / rows_changed; returns 1 when the row changed. */
#define SSM_BELL_SELECT_SCRATCH(K, C) ((size_t)8 * (size_t)((C) + 2 * (K)))
SSMDEF int ssm_bell_topology_select_row(const ssm_bell_topology_config *cfg, int64_t global_step,
                                        int64_t row, int64_t nd, int64_t K, int64_t C, int32_t *col,
                                        double *keep, const double *grow, const double *drop,
                                        int32_t *perm, int32_t *fresh, void *scratch,
                                        ssm_bell_topology_report *rep);
/* ssm_bell_checksum of a contiguous host [R, K] index. */
SSMDEF uint64_t ssm_bell_checksum_rows(const int32_t *col, int64_t R, int64_t K);

#ifdef __cplusplus
}
#endif
#endif /* SSM_H_INCLUDED */

/* ========================================================================================== */
/*                                     IMPLEMENTATION                                         */
/* ========================================================================================== */
#ifdef SSM_IMPLEMENTATION
#ifndef SSM_IMPLEMENTATION_DONE
#define SSM_IMPLEMENTATION_DONE

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/* >>core ---- results, dtypes, tensors, context (implementation) --------------------------- */
#define SSM__UNUSED(x) ((void)(x))
#define SSM__MIN(a, b) ((a) < (b) ? (a) : (b))
#define SSM__MAX(a, b) ((a) > (b) ? (a) : (b))

struct ssm_ctx {
    const ssm_backend *backend;
    void *backend_state;
    int threads;
    ssm_allocator allocator;
    void *workspace;
    size_t workspace_bytes;
    int workspace_owned; /* 1: grown by us through the allocator; 0: the caller's */
    char message[512];
};

SSMDEF const char *ssm_result_string(ssm_result r) {
    switch (r) {
    case SSM_OK: return "ok";
    case SSM_ERROR_NULL_ARGUMENT: return "null argument";
    case SSM_ERROR_INVALID_SHAPE: return "invalid shape";
    case SSM_ERROR_INVALID_DTYPE: return "invalid dtype";
    case SSM_ERROR_INVALID_DEVICE: return "invalid device";
    case SSM_ERROR_INVALID_STRIDE: return "invalid stride";
    case SSM_ERROR_ALIASING: return "output aliases another tensor";
    case SSM_ERROR_INVALID_VALUE: return "invalid value";
    case SSM_ERROR_NON_FINITE: return "non-finite value";
    case SSM_ERROR_MISALIGNED: return "misaligned data";
    case SSM_ERROR_OUT_OF_MEMORY: return "out of memory";
    case SSM_ERROR_WORKSPACE_TOO_SMALL: return "workspace too small";
    case SSM_ERROR_UNSUPPORTED: return "unsupported";
    case SSM_ERROR_BACKEND: return "backend error";
    }
    return "unknown result";
}

/* ---- dtypes, devices, views ------------------------------------------------------------- */

static ssm_dtype ssm__dtype(uint8_t code, uint8_t bits) {
    ssm_dtype t;
    t.code = code;
    t.bits = bits;
    t.lanes = 1;
    return t;
}
SSMDEF ssm_dtype ssm_dtype_f32(void) { return ssm__dtype(SSM_DTYPE_FLOAT, 32); }
SSMDEF ssm_dtype ssm_dtype_f64(void) { return ssm__dtype(SSM_DTYPE_FLOAT, 64); }
SSMDEF ssm_dtype ssm_dtype_f16(void) { return ssm__dtype(SSM_DTYPE_FLOAT, 16); }
SSMDEF ssm_dtype ssm_dtype_bf16(void) { return ssm__dtype(SSM_DTYPE_BFLOAT, 16); }
SSMDEF ssm_dtype ssm_dtype_i32(void) { return ssm__dtype(SSM_DTYPE_INT, 32); }
SSMDEF ssm_dtype ssm_dtype_u8(void) { return ssm__dtype(SSM_DTYPE_UINT, 8); }
SSMDEF ssm_device ssm_cpu(void) {
    ssm_device d;
    d.type = SSM_DEVICE_CPU;
    d.id = 0;
    return d;
}
SSMDEF ssm_device ssm_cuda_device(int id) {
    ssm_device d;
    d.type = SSM_DEVICE_CUDA;
    d.id = id;
    return d;
}
SSMDEF int ssm_dtype_equal(ssm_dtype a, ssm_dtype b) {
    return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes;
}
SSMDEF const char *ssm_dtype_name(ssm_dtype t) {
    if (t.lanes != 1) return "?";
    if (t.code == SSM_DTYPE_FLOAT && t.bits == 32) return "f32";
    if (t.code == SSM_DTYPE_FLOAT && t.bits == 64) return "f64";
    if (t.code == SSM_DTYPE_FLOAT && t.bits == 16) return "f16";
    if (t.code == SSM_DTYPE_BFLOAT && t.bits == 16) return "bf16";
    if (t.code == SSM_DTYPE_INT && t.bits == 32) return "i32";
    if (t.code == SSM_DTYPE_INT && t.bits == 64) return "i64";
    if (t.code == SSM_DTYPE_UINT && t.bits == 8) return "u8";
    return "?";
}
/* A dtype for messages: its name, or its fields when it has none. */
typedef struct ssm__dtstr { char s[48]; } ssm__dtstr;
static ssm__dtstr ssm__dtype_str(ssm_dtype t) {
    ssm__dtstr r;
    const char *n = ssm_dtype_name(t);
    if (n[0] != '?') snprintf(r.s, sizeof r.s, "%s", n);
    else snprintf(r.s, sizeof r.s, "dtype(code=%u, bits=%u, lanes=%u)", (unsigned)t.code, (unsigned)t.bits,
                  (unsigned)t.lanes);
    return r;
}
static size_t ssm__esize(ssm_dtype t) { return (size_t)t.bits / 8u; }
/* base + bytes, where a NULL base (the data of an empty tensor) stays NULL: none of its
   elements is ever touched, and an offset from NULL is undefined behaviour. */
static char *ssm__off(const void *base, int64_t bytes) { return base ? (char *)base + bytes : NULL; }

/* Byte counts that saturate at SIZE_MAX instead of wrapping (negative counts too): a
   workspace of SIZE_MAX bytes is refused by ssm_ctx_reserve_workspace, so sizes that
   overflow become an error instead of a small buffer. */
static size_t ssm__szmul(size_t a, int64_t b) {
    if (b < 0 || a == SIZE_MAX) return SIZE_MAX;
    if (b != 0 && a > SIZE_MAX / (uint64_t)b) return SIZE_MAX;
    return a * (size_t)b;
}
static size_t ssm__szadd(size_t a, size_t b) { return a > SIZE_MAX - b ? SIZE_MAX : a + b; }
/* a * b for a, b >= 0, or -1 when it does not fit in int64 (or either is negative). */
static int64_t ssm__mul64(int64_t a, int64_t b) {
    if (a < 0 || b < 0 || (a != 0 && b > INT64_MAX / a)) return -1;
    return a * b;
}

SSMDEF ssm_tensor ssm_tensor_make(void *data, ssm_dtype dtype, ssm_device device, int ndim,
                                  const int64_t *shape, const int64_t *strides) {
    ssm_tensor t;
    int i;
    int64_t s = 1;
    memset(&t, 0, sizeof t);
    t.data = data;
    t.device = device;
    t.dtype = dtype;
    t.ndim = ndim; /* out of range: kept, so the op that receives it can say so */
    if (ndim < 0) ndim = 0;
    if (ndim > SSM_MAX_DIMS) ndim = SSM_MAX_DIMS;
    for (i = ndim - 1; i >= 0; --i) {
        t.shape[i] = shape ? shape[i] : 0;
        t.strides[i] = strides ? strides[i] : s;
        /* saturates: a view too large to address keeps a stride the ops reject */
        if (t.shape[i] > 1) s = s > INT64_MAX / t.shape[i] ? INT64_MAX : s * t.shape[i];
    }
    return t;
}

SSMDEF ssm_result ssm_tensor_from_dlpack(const ssm_dlpack_tensor *dl, ssm_tensor *out) {
    int64_t shape[SSM_MAX_DIMS];
    if (!dl || !out || (dl->ndim > 0 && !dl->shape)) return SSM_ERROR_NULL_ARGUMENT;
    if (dl->ndim < 0 || dl->ndim > SSM_MAX_DIMS) return SSM_ERROR_INVALID_SHAPE;
    if (dl->dtype.lanes != 1 || dl->dtype.bits == 0 || dl->dtype.bits % 8 != 0) return SSM_ERROR_INVALID_DTYPE;
    if (dl->byte_offset % (dl->dtype.bits / 8u) != 0) return SSM_ERROR_MISALIGNED;
    if (dl->ndim > 0) memcpy(shape, dl->shape, sizeof(int64_t) * (size_t)dl->ndim);
    *out = ssm_tensor_make(dl->data ? (char *)dl->data + dl->byte_offset : NULL, dl->dtype,
                           dl->device, dl->ndim, shape, dl->strides);
    return SSM_OK;
}

SSMDEF int64_t ssm_tensor_numel(const ssm_tensor *t) {
    int64_t n = 1;
    int i;
    if (!t || t->ndim < 0 || t->ndim > SSM_MAX_DIMS) return -1;
    for (i = 0; i < t->ndim; ++i) {
        if (t->shape[i] < 0) return -1;
        if (t->shape[i] == 0) return 0;
    }
    for (i = 0; i < t->ndim; ++i) {
        if (t->shape[i] > INT64_MAX / n) return -1;
        n *= t->shape[i];
    }
    return n;
}

SSMDEF int ssm_tensor_is_contiguous(const ssm_tensor *t) {
    int64_t s = 1;
    int i;
    if (!t || t->ndim < 0 || t->ndim > SSM_MAX_DIMS || ssm_tensor_numel(t) < 0) return 0;
    if (ssm_tensor_numel(t) == 0) return 1; /* nothing to lay out (and sizes may be huge) */
    for (i = t->ndim - 1; i >= 0; --i) {
        if (t->shape[i] != 1 && t->strides[i] != s) return 0;
        s *= t->shape[i];
    }
    return 1;
}

/* ---- context ---------------------------------------------------------------------------- */

static void *ssm__alloc(const ssm_allocator *a, size_t bytes) {
    return a->alloc ? a->alloc(a->user, bytes) : malloc(bytes);
}
static void ssm__free(const ssm_allocator *a, void *p) {
    if (!p) return;
    if (a->free) a->free(a->user, p);
    else free(p);
}

SSMDEF ssm_ctx_config ssm_ctx_config_init(void) {
    ssm_ctx_config c;
    memset(&c, 0, sizeof c);
    return c;
}

SSMDEF ssm_result ssm_ctx_error(ssm_ctx *ctx, ssm_result code, const char *fmt, ...) {
    if (ctx) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(ctx->message, sizeof ctx->message, fmt, ap);
        va_end(ap);
    }
    return code;
}

/* A failure of ssm_ctx_create_ex: the message into the caller's buffer (when given). */
static ssm_result ssm__create_fail(char *message, size_t size, ssm_result code, const char *fmt, ...) {
    if (message && size > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(message, size, fmt, ap);
        va_end(ap);
    }
    return code;
}

SSMDEF ssm_result ssm_ctx_create(const ssm_ctx_config *config, ssm_ctx **out) {
    return ssm_ctx_create_ex(config, out, NULL, 0);
}

SSMDEF ssm_result ssm_ctx_create_ex(const ssm_ctx_config *config, ssm_ctx **out, char *message,
                                    size_t message_size) {
    static const char *op = "ssm_ctx_create";
    ssm_ctx_config cfg = config ? *config : ssm_ctx_config_init();
    const ssm_backend *be = cfg.backend ? cfg.backend : ssm_reference_backend();
    ssm_ctx *ctx;
    ssm_result r;
    if (message && message_size > 0) message[0] = 0;
    if (!out) return ssm__create_fail(message, message_size, SSM_ERROR_NULL_ARGUMENT, "%s: out is NULL", op);
    *out = NULL;
    if (cfg.threads < 0)
        return ssm__create_fail(message, message_size, SSM_ERROR_INVALID_VALUE, "%s: threads = %d (0 = the backend's default)",
                                op, cfg.threads);
    if ((cfg.allocator.alloc == NULL) != (cfg.allocator.free == NULL))
        return ssm__create_fail(message, message_size, SSM_ERROR_INVALID_VALUE,
                                "%s: allocator needs both alloc and free, or neither", op);
    if (cfg.workspace_bytes > 0 && !cfg.workspace)
        return ssm__create_fail(message, message_size, SSM_ERROR_NULL_ARGUMENT,
                                "%s: workspace_bytes = %zu with a NULL workspace", op, cfg.workspace_bytes);
    /* every op ends in the backend's gemm: a backend without one cannot run anything */
    if (!be->gemm || !be->name || (be->device_type != SSM_DEVICE_CPU && be->device_type != SSM_DEVICE_CUDA))
        return ssm__create_fail(message, message_size, SSM_ERROR_INVALID_VALUE,
                                "%s: backend \"%s\" is incomplete (needs a name, a gemm and a CPU or CUDA device_type)",
                                op, be->name ? be->name : "?");
    ctx = (ssm_ctx *)ssm__alloc(&cfg.allocator, sizeof *ctx);
    if (!ctx)
        return ssm__create_fail(message, message_size, SSM_ERROR_OUT_OF_MEMORY, "%s: cannot allocate %zu bytes", op,
                                sizeof *ctx);
    memset(ctx, 0, sizeof *ctx);
    ctx->backend = be;
    ctx->threads = cfg.threads;
    ctx->allocator = cfg.allocator;
    ctx->workspace = cfg.workspace;
    ctx->workspace_bytes = cfg.workspace ? cfg.workspace_bytes : 0;
    ctx->workspace_owned = cfg.workspace ? 0 : 1;
    if (ctx->backend->init) {
        r = ctx->backend->init(ctx, &cfg, &ctx->backend_state);
        if (r != SSM_OK) {
            if (message && message_size > 0) {
                if (ctx->message[0]) snprintf(message, message_size, "%s", ctx->message);
                else snprintf(message, message_size, "%s: the %s backend's init failed (%s)", op, be->name,
                              ssm_result_string(r));
            }
            ssm__free(&cfg.allocator, ctx);
            return r;
        }
    }
    *out = ctx;
    return SSM_OK;
}

SSMDEF void ssm_ctx_destroy(ssm_ctx *ctx) {
    ssm_allocator a;
    if (!ctx) return;
    if (ctx->backend->shutdown) ctx->backend->shutdown(ctx, ctx->backend_state);
    a = ctx->allocator;
    if (ctx->workspace_owned) ssm__free(&a, ctx->workspace);
    ssm__free(&a, ctx);
}

SSMDEF const char *ssm_ctx_last_error(const ssm_ctx *ctx) { return ctx ? ctx->message : "no context"; }
SSMDEF void *ssm_ctx_backend_state(const ssm_ctx *ctx) { return ctx->backend_state; }
SSMDEF int ssm_ctx_threads(const ssm_ctx *ctx) { return ctx->threads; }
SSMDEF const char *ssm_ctx_backend_name(const ssm_ctx *ctx) { return ctx ? ctx->backend->name : "?"; }
SSMDEF const ssm_backend *ssm_ctx_backend(const ssm_ctx *ctx) { return ctx ? ctx->backend : NULL; }
/* The backend's own (device) workspace when it keeps one, else the host workspace. */
SSMDEF size_t ssm_ctx_workspace_capacity(const ssm_ctx *ctx) {
    void *p;
    size_t cap = 0;
    if (!ctx) return 0;
    if (ctx->backend->workspace_reserve &&
        ctx->backend->workspace_reserve((ssm_ctx *)ctx, 0, &p, &cap) == SSM_OK)
        return cap;
    return ctx->backend->workspace_reserve ? 0 : ctx->workspace_bytes;
}

SSMDEF ssm_result ssm_ctx_reserve_workspace(ssm_ctx *ctx, size_t bytes) {
    void *p;
    size_t cap;
    if (!ctx) return SSM_ERROR_NULL_ARGUMENT;
    if (ctx->backend->workspace_reserve) return ctx->backend->workspace_reserve(ctx, bytes, &p, &cap);
    if (bytes <= ctx->workspace_bytes) return SSM_OK;
    if (bytes == SIZE_MAX) /* the ops' sizing saturates here when sizes overflow */
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_SHAPE, "workspace: the sizes overflow size_t");
    if (!ctx->workspace_owned)
        return ssm_ctx_error(ctx, SSM_ERROR_WORKSPACE_TOO_SMALL,
                             "workspace: %zu bytes needed, the caller's buffer has %zu", bytes,
                             ctx->workspace_bytes);
    p = ssm__alloc(&ctx->allocator, bytes);
    if (!p) return ssm_ctx_error(ctx, SSM_ERROR_OUT_OF_MEMORY, "workspace: cannot allocate %zu bytes", bytes);
    ssm__free(&ctx->allocator, ctx->workspace);
    ctx->workspace = p;
    ctx->workspace_bytes = bytes;
    return SSM_OK;
}

SSMDEF ssm_result ssm_ctx_workspace(ssm_ctx *ctx, size_t bytes, void **ptr) {
    size_t cap;
    *ptr = NULL;
    if (bytes == 0) return SSM_OK;
    if (ctx->backend->workspace_reserve) return ctx->backend->workspace_reserve(ctx, bytes, ptr, &cap);
    SSM__TRY(ssm_ctx_reserve_workspace(ctx, bytes));
    *ptr = ctx->workspace;
    return SSM_OK;
}

static void ssm__scale2d(ssm_dtype dt, int64_t batch, int64_t rows, int64_t cols, ssm_matrix_batch m, double s);

SSMDEF ssm_result ssm_ctx_gemm(ssm_ctx *ctx, ssm_dtype dtype, int64_t batch, int64_t M, int64_t N,
                               int64_t K, double alpha, ssm_matrix_batch A, ssm_matrix_batch B,
                               double beta, ssm_matrix_batch C) {
    if (batch <= 0 || M <= 0 || N <= 0) return SSM_OK;
    if (K <= 0 && ctx->backend->device_type == SSM_DEVICE_CPU) {
        /* C = beta C here: A and B are empty (their data may be NULL), never read */
        ssm__scale2d(dtype, batch, M, N, C, beta);
        return SSM_OK;
    }
    A.ss = B.ss = C.ss = 0;
    A.dtype = B.dtype = C.dtype = dtype;
    return ctx->backend->gemm(ctx, dtype, 1, batch, M, N, K, alpha, A, B, beta, C);
}

/* >>validation ---- validation layer ------------------------------------------------------- */
/* ---- validation layer -------------------------------------------------------------------- */

/* Byte range [lo, hi) a view touches; empty when any size is 0. */
static void ssm__extent(const ssm_tensor *t, const char **lo, const char **hi) {
    int64_t mn = 0, mx = 0;
    int i;
    size_t es = ssm__esize(t->dtype);
    for (i = 0; i < t->ndim; ++i) /* first: an empty view may carry sizes whose spans overflow */
        if (t->shape[i] == 0) {
            *lo = *hi = (const char *)t->data;
            return;
        }
    for (i = 0; i < t->ndim; ++i) {
        int64_t span = (t->shape[i] - 1) * t->strides[i];
        if (span < 0) mn += span;
        else mx += span;
    }
    *lo = (const char *)t->data + mn * (int64_t)es;
    *hi = (const char *)t->data + (mx + 1) * (int64_t)es;
}

static int ssm__overlap(const ssm_tensor *a, const ssm_tensor *b) {
    const char *alo, *ahi, *blo, *bhi;
    if (a->device.type != b->device.type || a->device.id != b->device.id) {
        int host_a = a->device.type != SSM_DEVICE_CUDA, host_b = b->device.type != SSM_DEVICE_CUDA;
        if (host_a != host_b) return 0;
    }
    ssm__extent(a, &alo, &ahi);
    ssm__extent(b, &blo, &bhi);
    return alo < bhi && blo < ahi && alo != ahi && blo != bhi;
}

/* An output must reach each element through exactly one index: sorted by |stride|, each
   stride must exceed the span of the dimensions below it. */
static int ssm__self_overlapping(const ssm_tensor *t) {
    int idx[SSM_MAX_DIMS], i, j;
    int64_t span = 0;
    for (i = 0; i < t->ndim; ++i) {
        if (t->shape[i] == 0) return 0;
        idx[i] = i;
    }
    for (i = 1; i < t->ndim; ++i) /* insertion sort by |stride| */
        for (j = i; j > 0; --j) {
            int64_t a = t->strides[idx[j - 1]], b = t->strides[idx[j]];
            if ((a < 0 ? -a : a) <= (b < 0 ? -b : b)) break;
            { int tmp = idx[j]; idx[j] = idx[j - 1]; idx[j - 1] = tmp; }
        }
    for (i = 0; i < t->ndim; ++i) {
        int64_t s = t->strides[idx[i]], n = t->shape[idx[i]];
        if (s < 0) s = -s;
        if (n == 1) continue;
        if (s <= span) return 1;
        span += s * (n - 1);
    }
    return 0;
}

/* One tensor argument as an op sees it. */
typedef struct ssm__arg {
    const char *name;
    const ssm_tensor *t;
    int output;
} ssm__arg;

/* Checks a tensor: non-NULL data, device of the backend, dtype, rank (one of two ranks
   allowed: rank_a or rank_b, use the same value for one rank), sizes (-1 = any). */
static ssm_result ssm__check(ssm_ctx *ctx, const char *op, const char *name, const ssm_tensor *t,
                             ssm_dtype dtype, int rank_a, int rank_b, const int64_t *shape) {
    int i;
    int64_t numel, lo = 0, hi = 0, es = (int64_t)ssm__esize(dtype);
    if (!t) return ssm_ctx_error(ctx, SSM_ERROR_NULL_ARGUMENT, "%s: %s is NULL", op, name);
    if (t->ndim < 0 || t->ndim > SSM_MAX_DIMS)
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_SHAPE, "%s: %s has ndim %d, outside [0, %d]", op, name,
                             (int)t->ndim, SSM_MAX_DIMS);
    if (t->ndim != rank_a && t->ndim != rank_b)
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_SHAPE, "%s: %s has rank %d, expected %d%s", op,
                             name, (int)t->ndim, rank_a, rank_b != rank_a ? " (or one less)" : "");
    if (!ssm_dtype_equal(t->dtype, dtype)) {
        ssm__dtstr got = ssm__dtype_str(t->dtype), want = ssm__dtype_str(dtype);
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_DTYPE, "%s: %s is %s, expected %s", op, name, got.s, want.s);
    }
    if (ctx->backend->device_type == SSM_DEVICE_CPU
            ? (t->device.type != SSM_DEVICE_CPU && t->device.type != SSM_DEVICE_CUDA_HOST &&
               t->device.type != SSM_DEVICE_CUDA_MANAGED)
            : (t->device.type != ctx->backend->device_type))
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_DEVICE,
                             "%s: %s is on device type %d, the %s backend needs type %d", op, name,
                             (int)t->device.type, ctx->backend->name, (int)ctx->backend->device_type);
    for (i = 0; i < t->ndim; ++i) {
        if (t->shape[i] < 0)
            return ssm_ctx_error(ctx, SSM_ERROR_INVALID_SHAPE, "%s: %s has negative size", op, name);
        if (shape && i < rank_a && shape[i] >= 0 && t->shape[i] != shape[i])
            return ssm_ctx_error(ctx, SSM_ERROR_INVALID_SHAPE,
                                 "%s: %s dim %d is %lld, expected %lld", op, name, i,
                                 (long long)t->shape[i], (long long)shape[i]);
    }
    numel = ssm_tensor_numel(t);
    if (numel < 0)
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_SHAPE, "%s: %s has more elements than int64 counts", op, name);
    if (numel == 0) return SSM_OK; /* never dereferenced; the ops touch no element of it */
    if (!t->data) return ssm_ctx_error(ctx, SSM_ERROR_NULL_ARGUMENT, "%s: %s has NULL data", op, name);
    if ((uintptr_t)t->data % (uintptr_t)es != 0)
        return ssm_ctx_error(ctx, SSM_ERROR_MISALIGNED, "%s: %s data %p is not aligned to its %lld-byte elements",
                             op, name, t->data, (long long)es);
    /* The byte range it spans must be addressable: every offset the ops form then fits in
       int64 and no pointer wraps. */
    for (i = 0; i < t->ndim; ++i) {
        int64_t s = t->strides[i], n1 = t->shape[i] - 1, a, span;
        if (s == INT64_MIN) break; /* |s| does not exist */
        a = s < 0 ? -s : s;
        if (n1 > 0 && a > INT64_MAX / n1) break;
        span = a * n1;
        if (s < 0 ? span > INT64_MAX - lo : span > INT64_MAX - hi) break;
        if (s < 0) lo += span;
        else hi += span;
    }
    if (i < t->ndim || hi >= INT64_MAX / es || lo > INT64_MAX / es - hi - 1 ||
        (uintptr_t)lo * (uintptr_t)es > (uintptr_t)t->data ||
        (uintptr_t)(hi + 1) * (uintptr_t)es > UINTPTR_MAX - (uintptr_t)t->data)
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_STRIDE, "%s: %s has sizes and strides that reach outside the address space",
                             op, name);
    if (ctx->backend->check_tensor) return ctx->backend->check_tensor(ctx, op, name, t);
    return SSM_OK;
}

static void ssm__arg_set(ssm__arg *a, const char *name, const ssm_tensor *t, int output) {
    a->name = name;
    a->t = t;
    a->output = output;
}

/* Outputs must not overlap themselves, each other, or any input. */
static ssm_result ssm__check_aliasing(ssm_ctx *ctx, const char *op, const ssm__arg *args, int n) {
    int i, j;
    for (i = 0; i < n; ++i) {
        if (!args[i].t || !args[i].output) continue;
        if (ssm__self_overlapping(args[i].t))
            return ssm_ctx_error(ctx, SSM_ERROR_INVALID_STRIDE,
                                 "%s: output %s has strides that make elements overlap", op,
                                 args[i].name);
        for (j = 0; j < n; ++j) {
            if (j == i || !args[j].t || (args[j].output && j < i)) continue;
            if (ssm__overlap(args[i].t, args[j].t))
                return ssm_ctx_error(ctx, SSM_ERROR_ALIASING, "%s: output %s overlaps %s %s", op,
                                     args[i].name, args[j].output ? "output" : "input", args[j].name);
        }
    }
    return SSM_OK;
}

static ssm_result ssm__check_float_dtype(ssm_ctx *ctx, const char *op, const ssm_tensor *t);
/* A compute dtype the context's backend takes (for the workspace queries). */
static ssm_result ssm__check_compute_dtype(ssm_ctx *ctx, const char *op, ssm_dtype dt) {
    ssm_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = dt;
    return ssm__check_float_dtype(ctx, op, &t);
}

static ssm_result ssm__check_float_dtype(ssm_ctx *ctx, const char *op, const ssm_tensor *t) {
    ssm__dtstr got;
    if (!t) return ssm_ctx_error(ctx, SSM_ERROR_NULL_ARGUMENT, "%s: a required tensor is NULL", op);
    got = ssm__dtype_str(t->dtype);
    if (ctx->backend->device_type == SSM_DEVICE_CPU) {
        if (!ssm_dtype_equal(t->dtype, SSM_F32) && !ssm_dtype_equal(t->dtype, SSM_F64))
            return ssm_ctx_error(ctx, SSM_ERROR_INVALID_DTYPE,
                                 "%s: the %s backend computes in f32 or f64, got %s", op,
                                 ctx->backend->name, got.s);
    } else if (!ssm_dtype_equal(t->dtype, SSM_F32) && !ssm_dtype_equal(t->dtype, SSM_F16) &&
               !ssm_dtype_equal(t->dtype, SSM_BF16)) {
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_DTYPE,
                             "%s: the %s backend computes in f32, f16 or bf16, got %s", op,
                             ctx->backend->name, got.s);
    }
    return SSM_OK;
}

/* >>primitives ---- host and generic primitives -------------------------------------------- */
/* ---- host primitives (typed loops; computation in double) -------------------------------- */

#define SSM__LOAD(dt, p) ((dt).bits == 64 ? *(const double *)(p) : (double)*(const float *)(p))
#define SSM__STORE(dt, p, v)                        \
    do {                                            \
        if ((dt).bits == 64) *(double *)(p) = (v);  \
        else *(float *)(p) = (float)(v);            \
    } while (0)

/* Reference GEMM, accumulating in double on the stack, SSM__GEMM_STRIP columns at a time
   (no allocation at any size). One typed body per precision. */
#define SSM__GEMM_STRIP 256
#define SSM__GEMM_REF_BODY(T)                                                              \
    for (k = 0; k < batch; ++k) {                                                          \
        const T *a = (const T *)A.ptr + k * A.bs;                                          \
        const T *b = (const T *)B.ptr + k * B.bs;                                          \
        T *c = (T *)C.ptr + k * C.bs;                                                      \
        for (j0 = 0; j0 < N; j0 += SSM__GEMM_STRIP) {                                      \
            const int64_t nj = SSM__MIN(SSM__GEMM_STRIP, N - j0);                          \
            for (i = 0; i < M; ++i) {                                                      \
                for (j = 0; j < nj; ++j) acc[j] = 0.0;                                     \
                for (p = 0; p < K; ++p) {                                                  \
                    const double aip = (double)a[i * A.rs + p * A.cs];                     \
                    const T *brow = b + p * B.rs + j0 * B.cs;                              \
                    if (B.cs == 1)                                                         \
                        for (j = 0; j < nj; ++j) acc[j] += aip * (double)brow[j];          \
                    else                                                                   \
                        for (j = 0; j < nj; ++j) acc[j] += aip * (double)brow[j * B.cs];   \
                }                                                                          \
                for (j = 0; j < nj; ++j) {                                                 \
                    T *cij = c + i * C.rs + (j0 + j) * C.cs;                               \
                    *cij = (T)(alpha * acc[j] + (beta == 0.0 ? 0.0 : beta * (double)*cij)); \
                }                                                                          \
            }                                                                              \
        }                                                                                  \
    }

static ssm_result ssm__ref_gemm(ssm_ctx *ctx, ssm_dtype dtype, int64_t batch, int64_t M, int64_t N,
                                int64_t K, double alpha, ssm_matrix_batch A, ssm_matrix_batch B,
                                double beta, ssm_matrix_batch C) {
    double acc[SSM__GEMM_STRIP];
    int64_t k, i, j, j0, p;
    SSM__UNUSED(ctx);
    if (dtype.bits == 64) { SSM__GEMM_REF_BODY(double) }
    else { SSM__GEMM_REF_BODY(float) }
    return SSM_OK;
}

/* dst = src (+ dst when accumulate), both rows x cols matrices, batched. */
/* Typed body of ssm__copy2d: unit-stride rows become memcpy (the scan levels copy whole
   compact states), everything else an element loop. */
#define SSM__COPY2D_BODY(T)                                                                  \
    for (k = 0; k < batch; ++k)                                                              \
        for (i = 0; i < rows; ++i) {                                                         \
            const T *s = (const T *)src.ptr + k * src.bs + i * src.rs;                       \
            T *d = (T *)dst.ptr + k * dst.bs + i * dst.rs;                                   \
            if (accumulate)                                                                  \
                for (j = 0; j < cols; ++j) d[j * dst.cs] += s[j * src.cs];                   \
            else if (src.cs == 1 && dst.cs == 1)                                             \
                memcpy(d, s, sizeof(T) * (size_t)cols);                                      \
            else                                                                             \
                for (j = 0; j < cols; ++j) d[j * dst.cs] = s[j * src.cs];                    \
        }

static void ssm__copy2d(ssm_dtype dt, int64_t batch, int64_t rows, int64_t cols, ssm_matrix_batch src,
                        ssm_matrix_batch dst, int accumulate) {
    int64_t k, i, j;
    if (dt.bits == 64) { SSM__COPY2D_BODY(double) }
    else { SSM__COPY2D_BODY(float) }
}

static void ssm__fill2d(ssm_dtype dt, int64_t batch, int64_t rows, int64_t cols, ssm_matrix_batch dst,
                        double value) {
    int64_t k, i, j;
    size_t es = ssm__esize(dt);
    for (k = 0; k < batch; ++k)
        for (i = 0; i < rows; ++i)
            for (j = 0; j < cols; ++j)
                SSM__STORE(dt, (char *)dst.ptr + (k * dst.bs + i * dst.rs + j * dst.cs) * (int64_t)es, value);
}

/* m *= s (s = 0 writes zeros, whatever m held). */
static void ssm__scale2d(ssm_dtype dt, int64_t batch, int64_t rows, int64_t cols, ssm_matrix_batch m, double s) {
    int64_t k, i, j;
    size_t es = ssm__esize(dt);
    for (k = 0; k < batch; ++k)
        for (i = 0; i < rows; ++i)
            for (j = 0; j < cols; ++j) {
                char *p = (char *)m.ptr + (k * m.bs + i * m.rs + j * m.cs) * (int64_t)es;
                SSM__STORE(dt, p, s == 0.0 ? 0.0 : s * SSM__LOAD(dt, p));
            }
}

/* ---- generic primitives: the backend's, or host loops -------------------------------------- */

/* The reference backend's gemm slot: the strip kernel once per outer index (one dtype). */
static ssm_result ssm__ref_gemm2(ssm_ctx *ctx, ssm_dtype dtype, int64_t outer, int64_t batch, int64_t M,
                                 int64_t N, int64_t K, double alpha, ssm_matrix_batch A, ssm_matrix_batch B,
                                 double beta, ssm_matrix_batch C) {
    int64_t s;
    int64_t es = (int64_t)ssm__esize(dtype);
    for (s = 0; s < outer; ++s) {
        ssm_matrix_batch a = A, b = B, c = C;
        a.ptr = (char *)A.ptr + s * A.ss * es;
        b.ptr = (char *)B.ptr + s * B.ss * es;
        c.ptr = (char *)C.ptr + s * C.ss * es;
        SSM__TRY(ssm__ref_gemm(ctx, dtype, batch, M, N, K, alpha, a, b, beta, c));
    }
    return SSM_OK;
}

/* The copy primitive: the backend's slot, else host loops (src.ptr NULL: zeros). */
static ssm_result ssm__copy(ssm_ctx *ctx, ssm_dtype dt, int64_t outer, int64_t batch, int64_t rows, int64_t cols,
                            ssm_matrix_batch src, ssm_matrix_batch dst, int accumulate) {
    int64_t s, es = (int64_t)ssm__esize(dt);
    if (outer <= 0 || batch <= 0 || rows <= 0 || cols <= 0) return SSM_OK;
    if (ctx->backend->copy) return ctx->backend->copy(ctx, dt, outer, batch, rows, cols, src, dst, accumulate);
    for (s = 0; s < outer; ++s) {
        ssm_matrix_batch d = dst, a = src;
        d.ptr = (char *)dst.ptr + s * dst.ss * es;
        if (!src.ptr) {
            ssm__fill2d(dt, batch, rows, cols, d, 0.0);
            continue;
        }
        a.ptr = (char *)src.ptr + s * src.ss * es;
        ssm__copy2d(dt, batch, rows, cols, a, d, accumulate);
    }
    return SSM_OK;
}

/* >>linrec ---- dense linear recurrence (implementation) ----------------------------------- */
/* ---- dense linear recurrence: views ---------------------------------------------------------
   The generic algorithms run on G sequences at once (plan.group: 1 on a CPU, where scratch is
   reused per sequence; all S on a GPU, where every product is one batched launch). A sequence
   batch is an ssm_seq_view; scratch sequences are compact, in the plan's work dtype. */
typedef struct ssm__lr {
    ssm_ctx *ctx;
    const ssm_linrec_plan *p;
    int64_t G, n, m;
    ssm_linrec_stats st;
} ssm__lr;

#define SSM__WS_ALIGN(b) (((b) + 255u) & ~(size_t)255u)

/* Matrix batch at time t of every sequence, stepping tstep in time. */
static ssm_matrix_batch ssm__at(ssm_seq_view v, int64_t t, int64_t tstep) {
    ssm_matrix_batch b;
    b.ptr = (char *)v.ptr + (v.off + t * v.ts) * (int64_t)ssm__esize(v.dtype);
    b.rs = v.rs;
    b.cs = v.cs;
    b.bs = v.ts * tstep;
    b.ss = v.ss;
    b.dtype = v.dtype;
    return b;
}
static ssm_seq_view ssm__seq_sub(ssm_seq_view v, int64_t start, int64_t step) {
    v.off += start * v.ts;
    v.ts *= step;
    return v;
}
static ssm_seq_view ssm__seq_t(ssm_seq_view v) { /* every matrix transposed */
    int64_t r = v.rs;
    v.rs = v.cs;
    v.cs = r;
    return v;
}

/* C[kc + i*sc] (+)= A[ka + i*sa] B[kb + i*sb] for i < count (time indices and steps per
   operand), every sequence of the group. state = 0: a matrix-matrix product (B is n x n);
   1: a matrix-state product. */
static ssm_result ssm__mm(ssm__lr *L, int64_t count, double beta, int state, ssm_seq_view A, int64_t ka,
                          int64_t sa, ssm_seq_view B, int64_t kb, int64_t sb, ssm_seq_view C, int64_t kc,
                          int64_t sc) {
    if (count <= 0) return SSM_OK;
    if (state) L->st.mat_state += count * L->G;
    else L->st.mat_mat += count * L->G;
    return L->ctx->backend->gemm(L->ctx, L->p->work, L->G, count, L->n, state ? L->m : L->n, L->n, 1.0,
                                 ssm__at(A, ka, sa), ssm__at(B, kb, sb), beta, ssm__at(C, kc, sc));
}
/* M_out[kc] = A[ka] M[kb], all operands stepping by `step`. */
#define SSM__MATMAT(L, cnt, A, ka, B, kb, C, kc, step) \
    ssm__mm(L, cnt, 0.0, 0, A, ka, step, B, kb, step, C, kc, step)
/* h[kc] = A[ka] h'[kb] + h[kc] (h[kc] holds b beforehand), all stepping by `step`. */
#define SSM__MATSTATE(L, cnt, A, ka, B, kb, C, kc, step) \
    ssm__mm(L, cnt, 1.0, 1, A, ka, step, B, kb, step, C, kc, step)

static ssm_result ssm__copy_seq(ssm__lr *L, int64_t count, int64_t cols, ssm_seq_view src, int64_t ks,
                                int64_t ss, ssm_seq_view dst, int64_t kd, int64_t sd) {
    if (count <= 0) return SSM_OK;
    return ssm__copy(L->ctx, L->p->work, L->G, count, L->n, cols, ssm__at(src, ks, ss), ssm__at(dst, kd, sd), 0);
}

/* Bytes of one compact scratch sequence batch (G sequences of count n x cols matrices). */
static size_t ssm__scratch_bytes(const ssm_linrec_plan *p, int64_t G, int64_t count, int64_t cols) {
    /* saturating: sizes a broadcast view can carry must not wrap to a small buffer */
    size_t b = ssm__szmul(ssm__szmul(ssm__szmul(ssm__szmul(ssm__esize(p->work), G), count), p->n), cols);
    return b > SIZE_MAX - 255u ? SIZE_MAX : SSM__WS_ALIGN(b);
}
static ssm_seq_view ssm__scratch(ssm__lr *L, char **cursor, int64_t count, int64_t cols) {
    ssm_seq_view v;
    v.ptr = *cursor;
    v.dtype = L->p->work;
    v.off = 0;
    v.ts = L->n * cols;
    v.rs = cols;
    v.cs = 1;
    v.ss = count * L->n * cols;
    *cursor += ssm__scratch_bytes(L->p, L->G, count, cols);
    return v;
}

/* ---- dense linear recurrence: the methods ------------------------------------------------
   Each solves h_t = A_t h_{t-1} + b_t for 1 <= t < T given h_0 already stored in h (the
   caller folds A_0 h0 + b_0 into h_0). A_0 and b_0 are never read. Scratch needs per
   method are in ssm__lr_scratch_bytes. */

static ssm_result ssm__lr_sequential(ssm__lr *L, int64_t T, ssm_seq_view A, ssm_seq_view b, ssm_seq_view h) {
    int64_t t;
    for (t = 1; t < T; ++t) {
        SSM__TRY(ssm__copy_seq(L, 1, L->m, b, t, 1, h, t, 1));
        SSM__TRY(SSM__MATSTATE(L, 1, A, t, h, t - 1, h, t, 1));
    }
    return SSM_OK;
}

/* Hillis-Steele: at span d every element t >= d absorbs t-d: v_t += M_t v_{t-d},
   M_t = M_t M_{t-d}. Double-buffered. */
static ssm_result ssm__lr_scan_hs(ssm__lr *L, int64_t T, ssm_seq_view A, ssm_seq_view b, ssm_seq_view h, char *ws) {
    int64_t d;
    ssm_seq_view Mc = ssm__scratch(L, &ws, T, L->n), Mn = ssm__scratch(L, &ws, T, L->n);
    ssm_seq_view vc = h, vn = ssm__scratch(L, &ws, T, L->m), tmp;
    SSM__TRY(ssm__copy_seq(L, T - 1, L->n, A, 1, 1, Mc, 1, 1));
    SSM__TRY(ssm__copy_seq(L, T - 1, L->m, b, 1, 1, h, 1, 1));
    for (d = 1; d < T; d *= 2) {
        SSM__TRY(ssm__copy_seq(L, T, L->m, vc, 0, 1, vn, 0, 1));
        SSM__TRY(SSM__MATSTATE(L, T - d, Mc, d, vc, 0, vn, d, 1));
        if (2 * d < T) { /* products whose span starts after 0 feed later spans */
            SSM__TRY(ssm__copy_seq(L, d, L->n, Mc, 1, 1, Mn, 1, 1));
            SSM__TRY(SSM__MATMAT(L, T - d - 1, Mc, d + 1, Mc, 1, Mn, d + 1, 1));
        }
        tmp = Mc; Mc = Mn; Mn = tmp;
        tmp = vc; vc = vn; vn = tmp;
    }
    if (vc.ptr != h.ptr) SSM__TRY(ssm__copy_seq(L, T - 1, L->m, vc, 1, 1, h, 1, 1));
    return SSM_OK;
}

/* Blelloch / Brent-Kung, in place at stride 2^l: the up-sweep builds span products at
   k = 2s-1 (mod 2s), the down-sweep hands full prefixes to k = 3d-1 (mod 2d). */
static ssm_result ssm__lr_blelloch(ssm__lr *L, int64_t T, ssm_seq_view A, ssm_seq_view b, ssm_seq_view h, char *ws) {
    int64_t s, top = 0;
    ssm_seq_view M = ssm__scratch(L, &ws, T, L->n), P = ssm__scratch(L, &ws, T / 2 + 1, L->n);
    SSM__TRY(ssm__copy_seq(L, T - 1, L->n, A, 1, 1, M, 1, 1));
    SSM__TRY(ssm__copy_seq(L, T - 1, L->m, b, 1, 1, h, 1, 1));
    for (s = 1; 2 * s <= T; s *= 2) {
        int64_t cnt = (T - 2 * s) / (2 * s) + 1; /* k = 2s-1, 4s-1, ... < T */
        top = s;
        SSM__TRY(SSM__MATSTATE(L, cnt, M, 2 * s - 1, h, s - 1, h, 2 * s - 1, 2 * s));
        if (cnt > 1) { /* the first span starts at 0: its matrix is never needed */
            SSM__TRY(ssm__mm(L, cnt - 1, 0.0, 0, M, 4 * s - 1, 2 * s, M, 3 * s - 1, 2 * s, P, 0, 1));
            SSM__TRY(ssm__copy_seq(L, cnt - 1, L->n, P, 0, 1, M, 4 * s - 1, 2 * s));
        }
    }
    for (s = top; s >= 1; s /= 2) {
        if (3 * s - 1 < T) {
            int64_t cnt = (T - 3 * s) / (2 * s) + 1; /* k = 3s-1, 5s-1, ... < T */
            SSM__TRY(SSM__MATSTATE(L, cnt, M, 3 * s - 1, h, 2 * s - 1, h, 3 * s - 1, 2 * s));
        }
    }
    return SSM_OK;
}

/* Cyclic (odd-even) reduction. The odd steps form a half-length recurrence
   h_{2i+1} = (A_{2i+1} A_{2i}) h_{2i-1} + (A_{2i+1} b_{2i} + b_{2i+1}), solved recursively in
   place on the odd sub-view of h; the evens then follow by one product each. Every level is
   compacted into scratch, so each level is one batched product at unit stride. */
static ssm_result ssm__lr_cr(ssm__lr *L, int64_t T, ssm_seq_view A, ssm_seq_view b, ssm_seq_view h, char *ws) {
    int64_t half = T / 2; /* odd indices 1, 3, ..., 2*half-1 */
    ssm_seq_view A2, b2, ho, Ao, Ae, bo, be, he;
    if (T <= 2) return ssm__lr_sequential(L, T, A, b, h);
    A2 = ssm__scratch(L, &ws, half, L->n);
    b2 = ssm__scratch(L, &ws, half, L->m);
    ho = ssm__seq_sub(h, 1, 2);
    Ao = ssm__seq_sub(A, 1, 2), Ae = ssm__seq_sub(A, 0, 2);
    bo = ssm__seq_sub(b, 1, 2), be = ssm__seq_sub(b, 0, 2), he = ssm__seq_sub(h, 0, 2);
    /* h_1 = A_1 h_0 + b_1 starts the odd recurrence (its h_0) */
    SSM__TRY(ssm__copy_seq(L, 1, L->m, b, 1, 1, h, 1, 1));
    SSM__TRY(SSM__MATSTATE(L, 1, A, 1, h, 0, h, 1, 1));
    SSM__TRY(SSM__MATMAT(L, half - 1, Ao, 1, Ae, 1, A2, 1, 1));
    SSM__TRY(ssm__copy_seq(L, half - 1, L->m, bo, 1, 1, b2, 1, 1));
    SSM__TRY(SSM__MATSTATE(L, half - 1, Ao, 1, be, 1, b2, 1, 1));
    SSM__TRY(ssm__lr_cr(L, half, A2, b2, ho, ws));
    /* evens: h_{2i} = A_{2i} h_{2i-1} + b_{2i} for 1 <= i, 2i < T */
    SSM__TRY(ssm__copy_seq(L, (T - 1) / 2, L->m, be, 1, 1, he, 1, 1));
    return SSM__MATSTATE(L, (T - 1) / 2, Ae, 1, ho, 0, he, 1, 1);
}

/* Chunked: chunk 0 runs directly; every later chunk c (start s_c) (1) runs from a zero
   state and multiplies its transitions P_c = A_end ... A_{s_c}, all chunks batched per step;
   (2) a sequential scan over the carries fixes each chunk's last state,
   h_end += P_c h_{s_c - 1}; (3) every chunk re-runs from its true carry. */
static ssm_result ssm__lr_chunked(ssm__lr *L, int64_t T, ssm_seq_view A, ssm_seq_view b, ssm_seq_view h,
                                  int64_t C, char *ws) {
    int64_t nc, nfull, tail, j, c;
    ssm_seq_view P, Pt;
    if (C >= T) return ssm__lr_sequential(L, T, A, b, h);
    nc = (T - 1) / C;        /* chunks after the first, starting at C, 2C, ... */
    nfull = (T - C) / C;     /* of which full length */
    tail = (T - C) % C;      /* length of a last partial chunk (0: none) */
    P = ssm__scratch(L, &ws, nc, L->n);
    Pt = ssm__scratch(L, &ws, nc, L->n);
    SSM__TRY(ssm__lr_sequential(L, C, A, b, h));
    /* (1) */
    SSM__TRY(ssm__copy_seq(L, nc, L->m, b, C, C, h, C, C));
    SSM__TRY(ssm__copy_seq(L, nc, L->n, A, C, C, P, 0, 1));
    for (j = 1; j < C; ++j) {
        int64_t cnt = nfull + (tail > j ? 1 : 0);
        if (cnt <= 0) break;
        SSM__TRY(ssm__copy_seq(L, cnt, L->m, b, C + j, C, h, C + j, C));
        SSM__TRY(ssm__mm(L, cnt, 1.0, 1, A, C + j, C, h, C + j - 1, C, h, C + j, C));
        SSM__TRY(ssm__mm(L, cnt, 0.0, 0, A, C + j, C, P, 0, 1, Pt, 0, 1));
        SSM__TRY(ssm__copy_seq(L, cnt, L->n, Pt, 0, 1, P, 0, 1));
    }
    /* (2) */
    for (c = 0; c < nc; ++c) {
        int64_t start = C * (c + 1), end = SSM__MIN(start + C, T) - 1;
        SSM__TRY(ssm__mm(L, 1, 1.0, 1, P, c, 1, h, start - 1, 1, h, end, 1));
    }
    /* (3) */
    for (j = 0; j < C - 1; ++j) {
        int64_t cnt = nfull + (tail - 1 > j ? 1 : 0);
        if (cnt <= 0) break;
        SSM__TRY(ssm__copy_seq(L, cnt, L->m, b, C + j, C, h, C + j, C));
        SSM__TRY(SSM__MATSTATE(L, cnt, A, C + j, h, C + j - 1, h, C + j, C));
    }
    return SSM_OK;
}

#define SSM__DEFAULT_CHUNK 64

/* Scratch bytes of the generic method for a plan (mirrors the ssm__scratch calls above). */
static size_t ssm__lr_scratch_bytes(const ssm_linrec_plan *p) {
    int64_t G = p->group, T = p->T, n = p->n, m = p->m, L;
    size_t e = 0;
    switch (p->method) {
    case SSM_LINREC_SCAN_HS:
        return ssm__szadd(ssm__szmul(ssm__scratch_bytes(p, G, T, n), 2), ssm__scratch_bytes(p, G, T, m));
    case SSM_LINREC_BLELLOCH:
        return ssm__szadd(ssm__scratch_bytes(p, G, T, n), ssm__scratch_bytes(p, G, T / 2 + 1, n));
    case SSM_LINREC_CR:
        for (L = T; L > 2; L /= 2)
            e = ssm__szadd(e, ssm__szadd(ssm__scratch_bytes(p, G, L / 2, n), ssm__scratch_bytes(p, G, L / 2, m)));
        return e;
    case SSM_LINREC_CHUNKED:
        if (p->chunk >= T) return 0;
        return ssm__szmul(ssm__scratch_bytes(p, G, (T - 1) / p->chunk, n), 2);
    default: return 0;
    }
}

/* Steps 1..T-1: the backend's kernel for the method, else the generic algorithm. */
static ssm_result ssm__lr_solve(ssm__lr *L, int64_t T, ssm_seq_view A, ssm_seq_view b, ssm_seq_view h,
                                ssm_seq_view out, int *out_written, char *ws) {
    const ssm_linrec_plan *p = L->p;
    *out_written = 0;
    if (L->ctx->backend->linrec_steps) {
        ssm_result r = L->ctx->backend->linrec_steps(L->ctx, p, A, b, h, out, out_written, ws, &L->st);
        if (r != SSM__NOT_MINE) return r;
    }
    switch (p->method) {
    case SSM_LINREC_SCAN_HS: return ssm__lr_scan_hs(L, T, A, b, h, ws);
    case SSM_LINREC_BLELLOCH: return ssm__lr_blelloch(L, T, A, b, h, ws);
    case SSM_LINREC_CR: return ssm__lr_cr(L, T, A, b, h, ws);
    case SSM_LINREC_CHUNKED: return ssm__lr_chunked(L, T, A, b, h, p->chunk, ws);
    default: return ssm__lr_sequential(L, T, A, b, h);
    }
}

/* ---- dense linear recurrence: plans, validation and the public entry points -------------- */

SSMDEF const char *ssm_linrec_method_name(ssm_linrec_method m) {
    switch (m) {
    case SSM_LINREC_AUTO: return "auto";
    case SSM_LINREC_SEQUENTIAL: return "seq";
    case SSM_LINREC_SCAN_HS: return "scan_hs";
    case SSM_LINREC_BLELLOCH: return "blelloch";
    case SSM_LINREC_CR: return "cr";
    case SSM_LINREC_CHUNKED: return "chunked";
    }
    return "?";
}

SSMDEF ssm_linrec_desc ssm_linrec_desc_init(void) {
    ssm_linrec_desc d;
    memset(&d, 0, sizeof d);
    return d;
}

/* The one place a backend's supports slot is asked. */
static ssm_result ssm__supported(ssm_ctx *ctx, const char *op_name, ssm_op op, const void *plan) {
    if (ctx->backend->supports ? !ctx->backend->supports(ctx, op, plan) : ctx->backend->device_type != SSM_DEVICE_CPU)
        return ssm_ctx_error(ctx, SSM_ERROR_UNSUPPORTED, "%s: the %s backend does not support this call", op_name,
                             ctx->backend->name);
    return SSM_OK;
}

/* A state tensor is [S,T,n,m] / [S,n,m], or without the trailing m when m = 1. Fills its
   strides as (batch, time, row, col) element strides. */
static ssm_result ssm__state_strides(ssm_ctx *ctx, const char *op, const char *name, const ssm_tensor *t,
                                     const ssm_linrec_plan *p, int has_time, int64_t st[4]) {
    int64_t shape[4];
    int rank = 0, full;
    shape[rank++] = p->S;
    if (has_time) shape[rank++] = p->T;
    shape[rank++] = p->n;
    shape[rank++] = p->m;
    full = rank;
    if (p->m != 1) SSM__TRY(ssm__check(ctx, op, name, t, p->dtype, full, full, shape));
    else SSM__TRY(ssm__check(ctx, op, name, t, p->dtype, full, full - 1, shape));
    st[0] = t->strides[0];
    st[1] = has_time ? t->strides[1] : 0;
    st[2] = t->strides[has_time ? 2 : 1];
    st[3] = t->ndim == full ? t->strides[full - 1] : 1;
    return SSM_OK;
}

static ssm_result ssm__lr_validate_desc(ssm_ctx *ctx, const char *op, const ssm_linrec_desc *d) {
    if (!d) return ssm_ctx_error(ctx, SSM_ERROR_NULL_ARGUMENT, "%s: desc is NULL", op);
    if ((int)d->method < 0 || (int)d->method >= SSM_LINREC_METHOD_COUNT)
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_VALUE, "%s: unknown method %d", op, (int)d->method);
    if (d->transition != SSM_TRANSITION_DENSE)
        return ssm_ctx_error(ctx, SSM_ERROR_UNSUPPORTED, "%s: only dense transitions so far", op);
    if (d->chunk < 0)
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_VALUE, "%s: chunk must be >= 0", op);
    return SSM_OK;
}

/* Resolves AUTO (the backend's pick), the chunk, the work dtype and the workspace, once. */
static ssm_result ssm__lr_plan_finish(ssm_ctx *ctx, const char *op_name, const ssm_linrec_desc *d,
                                      ssm_linrec_plan *p) {
    size_t scratch = 0;
    ssm_result r = SSM__NOT_MINE;
    p->method = d->method;
    p->chunk = d->chunk;
    p->group = 1;
    p->work = p->dtype;
    p->reverse = d->reverse;
    if (ctx->backend->linrec_pick) ctx->backend->linrec_pick(ctx, p);
    if (p->method == SSM_LINREC_AUTO) p->method = SSM_LINREC_SEQUENTIAL; /* the least work */
    if (p->chunk <= 0) p->chunk = SSM__DEFAULT_CHUNK;
    if (p->group < 1 || p->group > p->S) p->group = p->S > 0 ? p->S : 1;
    SSM__TRY(ssm__supported(ctx, op_name, p->op, p));
    p->work_bytes = ssm_dtype_equal(p->work, p->dtype) ? 0 : ssm__scratch_bytes(p, p->group, p->T, p->m);
    if (ctx->backend->workspace_size) r = ctx->backend->workspace_size(ctx, p->op, p, &scratch);
    if (r == SSM__NOT_MINE) scratch = ssm__lr_scratch_bytes(p);
    else if (r != SSM_OK) return r;
    p->workspace_bytes = p->S == 0 ? 0 : ssm__szadd(p->work_bytes, scratch); /* S = 0: nothing runs */
    if (p->workspace_bytes == SIZE_MAX)
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_SHAPE, "%s: S = %lld, T = %lld, n = %lld, m = %lld need more workspace than size_t counts",
                             op_name, (long long)p->S, (long long)p->T, (long long)p->n, (long long)p->m);
    return SSM_OK;
}

/* Sizes of A [S,T,n,n] and of b's trailing m. */
static ssm_result ssm__lr_shape_of(ssm_ctx *ctx, const char *op, const ssm_tensor *A, const ssm_tensor *b,
                                   ssm_linrec_plan *p) {
    SSM__TRY(ssm__check_float_dtype(ctx, op, A));
    SSM__TRY(ssm__check(ctx, op, "A", A, A->dtype, 4, 4, NULL));
    if (A->shape[2] != A->shape[3])
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_SHAPE, "%s: A must be [S,T,n,n], got n x %lld x %lld",
                             op, (long long)A->shape[2], (long long)A->shape[3]);
    p->dtype = A->dtype;
    p->S = A->shape[0];
    p->T = A->shape[1];
    p->n = A->shape[2];
    p->m = 1;
    if (b) {
        if (b->ndim == 4) p->m = b->shape[3];
        else if (b->ndim != 3)
            return ssm_ctx_error(ctx, SSM_ERROR_INVALID_SHAPE, "%s: %s must be [S,T,n,m] or [S,T,n]", op, "b");
    }
    if (p->T < 1 || p->n < 1 || p->m < 1)
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_SHAPE, "%s: T, n and m must be >= 1 (T=%lld n=%lld m=%lld)",
                             op, (long long)p->T, (long long)p->n, (long long)p->m);
    p->A[0] = A->strides[0], p->A[1] = A->strides[1], p->A[2] = A->strides[2], p->A[3] = A->strides[3];
    return SSM_OK;
}

/* ---- dense linear recurrence: context parallelism ------------------------------------------
   One rank's part of an ssm_linrec_*_cp call. The forward processes the ranks in time order
   (reversed with desc.reverse), the adjoint in the other; q is this rank's place in that order.
   A span's map is [P (n x n) | e (n x m)] a sequence in the work dtype; the rank processed first
   sends no P (its carry is h0, already in its e), the last neither P nor e. */
typedef struct ssm__lr_cp {
    const ssm_linrec_cp *cp;
    int adjoint, q, phase, want_end, need_P, fast;
    int64_t stride;                         /* elements of one sequence's map: n n + n m */
    size_t map_bytes;                       /* one rank's maps, as exchanged              */
    size_t state_bytes;                     /* one [S][n][m] carry buffer                 */
    char *send, *recv, *carry, *tmp, *tree; /* in the workspace past the method's         */
} ssm__lr_cp;

static ssm_result ssm__cp_check(ssm_ctx *ctx, const char *op, const ssm_linrec_cp *cp) {
    if (!cp) return ssm_ctx_error(ctx, SSM_ERROR_NULL_ARGUMENT, "%s: cp is NULL", op);
    if (cp->nranks < 1 || cp->rank < 0 || cp->rank >= cp->nranks)
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_VALUE, "%s: rank %d of %d ranks", op, cp->rank, cp->nranks);
    if (cp->nranks > 1 && !cp->allgather)
        return ssm_ctx_error(ctx, SSM_ERROR_NULL_ARGUMENT, "%s: %d ranks need the allgather hook", op, cp->nranks);
    return SSM_OK;
}
/* The place of `rank` in processing order, and (the map being an involution) the rank at a place. */
static int ssm__cp_place(const ssm_linrec_cp *cp, int reverse, int adjoint, int rank) {
    const int q = reverse ? cp->nranks - 1 - rank : rank;
    return adjoint ? cp->nranks - 1 - q : q;
}
/* The exchange of a _cp call: every rank's maps to every rank (no hook call for one rank). */
static ssm_result ssm__cp_allgather(ssm_ctx *ctx, const char *op, const ssm_linrec_cp *cp, const void *send, void *recv,
                                    size_t bytes) {
    ssm_result r;
    if (cp->nranks == 1) return SSM_OK;
    r = cp->allgather(cp->user, send, recv, bytes);
    return r == SSM_OK ? SSM_OK : ssm_ctx_error(ctx, r, "%s: the allgather hook failed (%s)", op, ssm_result_string(r));
}
static size_t ssm__ws_align_sat(size_t b) { return b > SIZE_MAX - 255u ? SIZE_MAX : SSM__WS_ALIGN(b); }
/* Fills c's sizes and flags for plan p; returns the bytes it takes past the method's workspace. */
static size_t ssm__cp_layout(const ssm_linrec_plan *p, const ssm_linrec_cp *cp, int adjoint, ssm__lr_cp *c) {
    const size_t es = ssm__esize(p->work);
    const int R = cp->nranks;
    size_t b;
    memset(c, 0, sizeof *c);
    c->cp = cp, c->adjoint = adjoint;
    c->q = ssm__cp_place(cp, p->reverse, adjoint, cp->rank);
    c->want_end = c->q < R - 1;
    c->need_P = c->q > 0 && c->q < R - 1;
    c->stride = p->n * p->n + p->n * p->m;
    c->map_bytes = ssm__ws_align_sat(ssm__szmul(ssm__szmul(ssm__szmul(es, p->S), p->n), p->n + p->m));
    c->state_bytes = ssm__ws_align_sat(ssm__szmul(ssm__szmul(ssm__szmul(es, p->S), p->n), p->m));
    b = ssm__szadd(ssm__szmul(c->map_bytes, (int64_t)R + 1), ssm__szmul(c->state_bytes, 2));
    if (c->need_P) /* the span product's two level buffers */
        b = ssm__szadd(b, ssm__szadd(ssm__scratch_bytes(p, p->group, (p->T + 1) / 2, p->n),
                                     ssm__scratch_bytes(p, p->group, (p->T + 3) / 4, p->n)));
    return b;
}
/* Points c's buffers into the workspace region at base (laid out as ssm__cp_layout counts). */
static void ssm__cp_place_buffers(ssm__lr_cp *c, char *base) {
    c->send = base;
    c->recv = c->send + c->map_bytes;
    c->carry = c->recv + c->map_bytes * (size_t)c->cp->nranks;
    c->tmp = c->carry + c->state_bytes;
    c->tree = c->tmp + c->state_bytes;
}
/* A _cp plan: its workspace grows by the exchange's buffers (c laid out, *base = where they start). */
static ssm_result ssm__cp_plan(ssm_ctx *ctx, const char *op, ssm_linrec_plan *p, const ssm_linrec_cp *cp, int adjoint,
                               ssm__lr_cp *c, size_t *base) {
    *base = p->workspace_bytes;
    p->workspace_bytes = ssm__szadd(p->workspace_bytes, ssm__cp_layout(p, cp, adjoint, c));
    if (p->workspace_bytes == SIZE_MAX)
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_SHAPE, "%s: these sizes need more workspace than size_t counts", op);
    return SSM_OK;
}

static ssm_result ssm__lr_workspace_query(const ssm_ctx *cctx, const char *op, const ssm_linrec_desc *desc,
                                          const ssm_linrec_cp *cp, ssm_dtype dtype, int64_t S, int64_t T,
                                          int64_t n, int64_t m, int backward, size_t *bytes) {
    ssm_ctx *ctx = (ssm_ctx *)cctx; /* only its message is written */
    ssm_linrec_plan p;
    ssm_tensor probe;
    if (!ctx || !desc || !bytes) return SSM_ERROR_NULL_ARGUMENT;
    ctx->message[0] = 0;
    *bytes = 0;
    SSM__TRY(ssm__lr_validate_desc(ctx, op, desc));
    if (cp) SSM__TRY(ssm__cp_check(ctx, op, cp));
    memset(&probe, 0, sizeof probe);
    probe.dtype = dtype;
    SSM__TRY(ssm__check_float_dtype(ctx, op, &probe));
    if (S < 0 || T < 1 || n < 1 || m < 1)
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_SHAPE, "%s: need S >= 0 and T, n, m >= 1 (S=%lld T=%lld n=%lld m=%lld)",
                             op, (long long)S, (long long)T, (long long)n, (long long)m);
    memset(&p, 0, sizeof p);
    p.op = backward ? SSM_OP_LINREC_BACKWARD : SSM_OP_LINREC_FORWARD;
    p.dtype = dtype;
    p.S = S, p.T = T, p.n = n, p.m = m;
    SSM__TRY(ssm__lr_plan_finish(ctx, op, desc, &p));
    if (cp && S > 0) {
        ssm__lr_cp c;
        size_t base;
        SSM__TRY(ssm__cp_plan(ctx, op, &p, cp, backward, &c, &base));
    }
    *bytes = S > 0 ? p.workspace_bytes : 0;
    return SSM_OK;
}
SSMDEF ssm_result ssm_linrec_workspace_size(const ssm_ctx *ctx, const ssm_linrec_desc *desc, ssm_dtype dtype,
                                            int64_t S, int64_t T, int64_t n, int64_t m, int backward,
                                            size_t *bytes) {
    return ssm__lr_workspace_query(ctx, "ssm_linrec_workspace_size", desc, NULL, dtype, S, T, n, m, backward, bytes);
}
SSMDEF ssm_result ssm_linrec_cp_workspace_size(const ssm_ctx *ctx, const ssm_linrec_desc *desc,
                                               const ssm_linrec_cp *cp, ssm_dtype dtype, int64_t S, int64_t T,
                                               int64_t n, int64_t m, int backward, size_t *bytes) {
    return ssm__lr_workspace_query(ctx, "ssm_linrec_cp_workspace_size", desc, cp, dtype, S, T, n, m, backward, bytes);
}

static ssm_seq_view ssm__seq_make(const ssm_tensor *t, const int64_t st[4], int64_t s, int reverse, int64_t T) {
    ssm_seq_view v;
    v.ptr = t->data;
    v.dtype = t->dtype;
    v.off = s * st[0] + (reverse ? (T - 1) * st[1] : 0);
    v.ss = st[0];
    v.ts = reverse ? -st[1] : st[1];
    v.rs = st[2];
    v.cs = st[3];
    return v;
}
/* The driver's compact state buffer in the work dtype ([G, T, n, m]). */
static ssm_seq_view ssm__work_seq(const ssm_linrec_plan *p, void *buf, int reverse) {
    ssm_seq_view v;
    v.ptr = buf;
    v.dtype = p->work;
    v.ss = p->T * p->n * p->m;
    v.ts = reverse ? -p->n * p->m : p->n * p->m;
    v.off = reverse ? (p->T - 1) * p->n * p->m : 0;
    v.rs = p->m;
    v.cs = 1;
    return v;
}

static void ssm__lr_init(ssm__lr *L, ssm_ctx *ctx, const ssm_linrec_plan *p) {
    memset(L, 0, sizeof *L);
    L->ctx = ctx;
    L->p = p;
    L->n = p->n;
    L->m = p->m;
}

/* Stats, filled in this one place for every backend. */
static void ssm__lr_stats(const ssm__lr *L, const ssm_linrec_desc *d) {
    ssm_linrec_stats st = L->st;
    if (!d->stats) return;
    st.method = L->p->method;
    st.flops = 2.0 * (double)L->n * (double)L->n *
               ((double)L->n * (double)st.mat_mat + (double)L->m * (double)st.mat_state);
    st.workspace_bytes = L->p->workspace_bytes;
    *d->stats = st;
}

/* A compact [S][n][cols] state buffer of the work dtype (a _cp call's carries, a map's parts) as
   the sequence view of group s0: every step the same matrix. */
static ssm_seq_view ssm__cp_state(const ssm__lr *L, char *buf, int64_t s0, int64_t ss, int64_t off, int64_t cols) {
    ssm_seq_view v;
    v.ptr = buf;
    v.dtype = L->p->work;
    v.off = s0 * ss + off;
    v.ss = ss;
    v.ts = 0;
    v.rs = cols;
    v.cs = 1;
    return v;
}

/* P = A_{T-1} ... A_0 of every sequence of the group, by pairwise levels (depth log2 T) in the
   two level buffers at `tree`. */
static ssm_result ssm__lr_span_product(ssm__lr *L, int64_t T, ssm_seq_view A, char *tree, ssm_seq_view P) {
    ssm_seq_view lv[2], cur = A;
    int64_t c = T;
    int k = 0;
    lv[0] = ssm__scratch(L, &tree, (T + 1) / 2, L->n);
    lv[1] = ssm__scratch(L, &tree, (T + 3) / 4, L->n);
    while (c > 1) { /* level: lv[k][i] = cur[2i + 1] cur[2i], an odd last carried over */
        SSM__TRY(ssm__mm(L, c / 2, 0.0, 0, cur, 1, 2, cur, 0, 2, lv[k], 0, 1));
        if (c & 1) SSM__TRY(ssm__copy_seq(L, 1, L->n, cur, c - 1, 1, lv[k], c / 2, 1));
        c = (c + 1) / 2, cur = lv[k], k ^= 1;
    }
    return ssm__copy_seq(L, 1, L->n, cur, 0, 1, P, 0, 1);
}

/* The solve of one phase of a _cp call (see linrec_steps_cp): the backend's split when it takes
   phase 1, else a whole solve in phase 2 and, where the end state is wanted, in phase 1. */
static ssm_result ssm__lr_solve_cp(ssm__lr *L, ssm__lr_cp *c, int64_t T, ssm_seq_view A, ssm_seq_view b,
                                   ssm_seq_view h, ssm_seq_view out, int *written, char *ws) {
    ssm_ctx *ctx = L->ctx;
    *written = 0;
    if (c->phase == 1) {
        c->fast = 0;
        if (ctx->backend->linrec_steps_cp && L->G == L->p->S) {
            ssm_result r = ctx->backend->linrec_steps_cp(ctx, L->p, 1, c->want_end, A, b, h, out, written, ws, &L->st);
            *written = 0;
            if (r != SSM__NOT_MINE) {
                c->fast = 1;
                return r;
            }
        }
        return c->want_end ? ssm__lr_solve(L, T, A, b, h, out, written, ws) : SSM_OK;
    }
    if (c->fast) return ctx->backend->linrec_steps_cp(ctx, L->p, 2, 0, A, b, h, out, written, ws, &L->st);
    return ssm__lr_solve(L, T, A, b, h, out, written, ws);
}

/* Between the phases: every rank's maps to every rank, then this rank's carry, folded over the
   ranks processed before it: x = e_j + P_j x (the adjoint: P_j^T). */
static ssm_result ssm__lr_cp_exchange(ssm__lr *L, ssm__lr_cp *c, const char *op) {
    const ssm_linrec_plan *p = L->p;
    ssm_ctx *ctx = L->ctx;
    const int64_t n = p->n, m = p->m;
    const size_t es = ssm__esize(p->work);
    int j;
    SSM__TRY(ssm__cp_allgather(ctx, op, c->cp, c->send, c->recv, c->map_bytes));
    for (j = 0; j < c->q; ++j) {
        char *mp = c->recv + c->map_bytes * (size_t)ssm__cp_place(c->cp, p->reverse, c->adjoint, j), *t;
        ssm_matrix_batch P, e, x, y;
        P.ptr = mp, P.dtype = p->work, P.rs = c->adjoint ? 1 : n, P.cs = c->adjoint ? n : 1, P.bs = 0, P.ss = c->stride;
        e = P, e.ptr = mp + (size_t)(n * n) * es, e.rs = m, e.cs = 1;
        x.ptr = c->carry, x.dtype = p->work, x.rs = m, x.cs = 1, x.bs = 0, x.ss = n * m;
        y = x, y.ptr = c->tmp;
        SSM__TRY(ssm__copy(ctx, p->work, p->S, 1, n, m, e, y, 0));
        if (j > 0) SSM__TRY(ctx->backend->gemm(ctx, p->work, p->S, 1, n, m, n, 1.0, P, x, 1.0, y));
        t = c->carry, c->carry = c->tmp, c->tmp = t;
    }
    return SSM_OK;
}

/* cp: NULL for ssm_linrec_forward; else one phase of a _cp call (phase 1 ends with this rank's
   map in c->send, phase 2 is the whole call from the carry). */
static ssm_result ssm__lr_forward_generic(ssm__lr *L, const ssm_tensor *A, const ssm_tensor *b,
                                          const ssm_tensor *h0, ssm_tensor *h, ssm_tensor *hT, ssm_tensor *hin,
                                          ssm__lr_cp *c, void *wsp) {
    const ssm_linrec_plan *p = L->p;
    char *work = p->work_bytes ? (char *)wsp : NULL, *scratch = (char *)wsp + p->work_bytes;
    int64_t s0, T = p->T;
    for (s0 = 0; s0 < p->S; s0 += p->group) {
        ssm_seq_view Av = ssm__seq_make(A, p->A, s0, p->reverse, T);
        ssm_seq_view bv = ssm__seq_make(b, p->b, s0, p->reverse, T);
        ssm_seq_view hv = ssm__seq_make(h, p->h, s0, p->reverse, T);
        ssm_seq_view wv = work ? ssm__work_seq(p, work, p->reverse) : hv, out, init;
        int written = 0;
        L->G = SSM__MIN(p->group, p->S - s0);
        memset(&out, 0, sizeof out);
        memset(&init, 0, sizeof init);
        if (work) out = hv;
        if (h0) init = ssm__seq_make(h0, p->h0, s0, 0, 1);
        if (c && c->phase == 2 && c->q > 0) init = ssm__cp_state(L, c->carry, s0, p->n * p->m, 0, p->m);
        SSM__TRY(ssm__copy_seq(L, 1, p->m, bv, 0, 1, wv, 0, 1));
        if (init.ptr) /* h_0 = A_0 h0 + b_0 */
            SSM__TRY(ssm__mm(L, 1, 1.0, 1, Av, 0, 1, init, 0, 1, wv, 0, 1));
        if (c && c->phase == 1) { /* this span's map: e = h_{T-1} from the carry so far, P */
            SSM__TRY(ssm__lr_solve_cp(L, c, T, Av, bv, wv, out, &written, scratch));
            if (c->want_end)
                SSM__TRY(ssm__copy_seq(L, 1, p->m, wv, T - 1, 1, ssm__cp_state(L, c->send, s0, c->stride, p->n * p->n, p->m), 0, 1));
            if (c->need_P) SSM__TRY(ssm__lr_span_product(L, T, Av, c->tree, ssm__cp_state(L, c->send, s0, c->stride, 0, p->n)));
            continue;
        }
        SSM__TRY(c ? ssm__lr_solve_cp(L, c, T, Av, bv, wv, out, &written, scratch)
                   : ssm__lr_solve(L, T, Av, bv, wv, out, &written, scratch));
        if (work) SSM__TRY(ssm__copy_seq(L, written ? 1 : T, p->m, wv, 0, 1, hv, 0, 1));
        if (hT) SSM__TRY(ssm__copy_seq(L, 1, p->m, wv, T - 1, 1, ssm__seq_make(hT, p->hT, s0, 0, 1), 0, 1));
        if (hin) { /* the state entering the span: h0's values (zeros without) or the carry */
            ssm_seq_view d = ssm__seq_make(hin, p->hin, s0, 0, 1);
            ssm_matrix_batch none;
            memset(&none, 0, sizeof none);
            SSM__TRY(ssm__copy(L->ctx, p->work, L->G, 1, p->n, p->m, init.ptr ? ssm__at(init, 0, 1) : none, ssm__at(d, 0, 1), 0));
        }
    }
    return SSM_OK;
}

/* The tensors of one linrec call: the forward's (A, b, h0; out h, hT, hin) or the adjoint's (A, h0
   (a _cp call's hin), hf = the forward's h, dh, dhT; out dA, db, dh0). */
typedef struct ssm__lr_io {
    const ssm_tensor *A, *b, *h0, *hf, *dh, *dhT;
    ssm_tensor *h, *hT, *hin, *dA, *db, *dh0;
} ssm__lr_io;

static ssm_result ssm__lr_backward_generic(ssm__lr *L, const ssm_tensor *A, const ssm_tensor *h0,
                                           const ssm_tensor *h, const ssm_tensor *dh, const ssm_tensor *dhT,
                                           ssm_tensor *dA, ssm_tensor *db, ssm_tensor *dh0, ssm__lr_cp *c, void *wsp);

/* A call's start, both directions: ctx, the message, a zero plan for the op, desc and cp checked. */
static ssm_result ssm__lr_begin(ssm_ctx *ctx, const char *op, const ssm_linrec_desc *desc, const ssm_linrec_cp *cp,
                                ssm_op code, ssm_linrec_plan *p) {
    if (!ctx) return SSM_ERROR_NULL_ARGUMENT;
    ctx->message[0] = 0;
    memset(p, 0, sizeof *p);
    p->op = code;
    SSM__TRY(ssm__lr_validate_desc(ctx, op, desc));
    if (cp) SSM__TRY(ssm__cp_check(ctx, op, cp));
    return SSM_OK;
}

/* The generic driver of one direction (c: a _cp call's phase, else NULL). */
static ssm_result ssm__lr_drive(ssm__lr *L, int adjoint, const ssm__lr_io *io, ssm__lr_cp *c, void *wsp) {
    if (adjoint) return ssm__lr_backward_generic(L, io->A, io->h0, io->hf, io->dh, io->dhT, io->dA, io->db, io->dh0, c, wsp);
    return ssm__lr_forward_generic(L, io->A, io->b, io->h0, io->h, io->hT, io->hin, c, wsp);
}

/* After validation, both directions: the plan, then the backend's whole-op slot or the generic
   driver (a _cp call: phase 1, the exchange, phase 2), then the stats. */
static ssm_result ssm__lr_run(ssm_ctx *ctx, const char *op, const ssm_linrec_desc *desc, const ssm_linrec_cp *cp,
                              ssm_linrec_plan *p, int adjoint, const ssm__lr_io *io) {
    const ssm_backend *be = ctx->backend;
    ssm__lr L;
    ssm__lr_cp c;
    ssm_result r = SSM__NOT_MINE;
    size_t base = 0;
    SSM__TRY(ssm__lr_plan_finish(ctx, op, desc, p));
    if (cp && p->S > 0) SSM__TRY(ssm__cp_plan(ctx, op, p, cp, adjoint, &c, &base));
    ssm__lr_init(&L, ctx, p);
    if (p->S > 0) {
        void *wsp = NULL;
        if (!cp && adjoint && be->linrec_backward)
            r = be->linrec_backward(ctx, p, io->A, io->h0, io->hf, io->dh, io->dhT, io->dA, io->db, io->dh0);
        if (!cp && !adjoint && be->linrec_forward) r = be->linrec_forward(ctx, p, io->A, io->b, io->h0, io->h, io->hT);
        if (r == SSM__NOT_MINE) {
            SSM__TRY(ssm_ctx_workspace(ctx, p->workspace_bytes, &wsp));
            if (!cp) r = ssm__lr_drive(&L, adjoint, io, NULL, wsp);
            else {
                ssm__cp_place_buffers(&c, (char *)wsp + base);
                c.phase = 1;
                SSM__TRY(ssm__lr_drive(&L, adjoint, io, &c, wsp));
                SSM__TRY(ssm__lr_cp_exchange(&L, &c, op));
                c.phase = 2;
                r = ssm__lr_drive(&L, adjoint, io, &c, wsp);
            }
        }
        SSM__TRY(r);
    }
    ssm__lr_stats(&L, desc);
    return SSM_OK;
}

/* ssm_linrec_forward and ssm_linrec_forward_cp (cp set): validation, then ssm__lr_run. */
static ssm_result ssm__lr_forward_call(ssm_ctx *ctx, const char *op, const ssm_linrec_desc *desc,
                                       const ssm_linrec_cp *cp, const ssm_tensor *A, const ssm_tensor *b,
                                       const ssm_tensor *h0, ssm_tensor *h, ssm_tensor *hT, ssm_tensor *hin) {
    ssm_linrec_plan p;
    ssm__arg args[6];
    ssm__lr_io io;
    SSM__TRY(ssm__lr_begin(ctx, op, desc, cp, SSM_OP_LINREC_FORWARD, &p));
    if (!A || !b || !h) return ssm_ctx_error(ctx, SSM_ERROR_NULL_ARGUMENT, "%s: A, b and h are required", op);
    if (cp && h0 && ssm__cp_place(cp, desc->reverse, 0, cp->rank) != 0)
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_VALUE, "%s: h0 belongs to the rank processed first (rank %d), not rank %d",
                             op, desc->reverse ? cp->nranks - 1 : 0, cp->rank);
    SSM__TRY(ssm__lr_shape_of(ctx, op, A, b, &p));
    SSM__TRY(ssm__state_strides(ctx, op, "b", b, &p, 1, p.b));
    SSM__TRY(ssm__state_strides(ctx, op, "h", h, &p, 1, p.h));
    if (h0) SSM__TRY(ssm__state_strides(ctx, op, "h0", h0, &p, 0, p.h0));
    if (hT) SSM__TRY(ssm__state_strides(ctx, op, "hT", hT, &p, 0, p.hT));
    if (hin) SSM__TRY(ssm__state_strides(ctx, op, "hin", hin, &p, 0, p.hin));
    ssm__arg_set(&args[0], "A", A, 0);
    ssm__arg_set(&args[1], "b", b, 0);
    ssm__arg_set(&args[2], "h0", h0, 0);
    ssm__arg_set(&args[3], "h", h, 1);
    ssm__arg_set(&args[4], "hT", hT, 1);
    ssm__arg_set(&args[5], "hin", hin, 1);
    SSM__TRY(ssm__check_aliasing(ctx, op, args, 6));
    memset(&io, 0, sizeof io);
    io.A = A, io.b = b, io.h0 = h0, io.h = h, io.hT = hT, io.hin = hin;
    return ssm__lr_run(ctx, op, desc, cp, &p, 0, &io);
}

SSMDEF ssm_result ssm_linrec_forward(ssm_ctx *ctx, const ssm_linrec_desc *desc, const ssm_tensor *A,
                                     const ssm_tensor *b, const ssm_tensor *h0, ssm_tensor *h,
                                     ssm_tensor *hT) {
    return ssm__lr_forward_call(ctx, "ssm_linrec_forward", desc, NULL, A, b, h0, h, hT, NULL);
}
SSMDEF ssm_result ssm_linrec_forward_cp(ssm_ctx *ctx, const ssm_linrec_desc *desc, const ssm_linrec_cp *cp,
                                        const ssm_tensor *A, const ssm_tensor *b, const ssm_tensor *h0,
                                        ssm_tensor *h, ssm_tensor *hT, ssm_tensor *hin) {
    if (ctx && !cp) return ssm_ctx_error(ctx, SSM_ERROR_NULL_ARGUMENT, "ssm_linrec_forward_cp: cp is NULL");
    return ssm__lr_forward_call(ctx, "ssm_linrec_forward_cp", desc, cp, A, b, h0, h, hT, hin);
}

/* The adjoint runs the same solver in the opposite direction on transposed transitions:
   in processing order u = 0..T-1 (time t = T-1-u), g_u = A'_u g_{u-1} + dh_{T-1-u} with
   A'_u = A_{T-u}^T, written straight into db (or into the work buffer, then db). */
static ssm_result ssm__lr_backward_generic(ssm__lr *L, const ssm_tensor *A, const ssm_tensor *h0,
                                           const ssm_tensor *h, const ssm_tensor *dh, const ssm_tensor *dhT,
                                           ssm_tensor *dA, ssm_tensor *db, ssm_tensor *dh0, ssm__lr_cp *c, void *wsp) {
    const ssm_linrec_plan *p = L->p;
    ssm_ctx *ctx = L->ctx;
    char *work = p->work_bytes ? (char *)wsp : NULL, *scratch = (char *)wsp + p->work_bytes;
    int64_t s0, T = p->T, n = p->n, m = p->m;
    int rev = !p->reverse;
    for (s0 = 0; s0 < p->S; s0 += p->group) {
        /* forward-order views (time runs as the forward pass ran it) */
        ssm_seq_view Af = ssm__seq_make(A, p->A, s0, p->reverse, T);
        ssm_seq_view hf = ssm__seq_make(h, p->h, s0, p->reverse, T);
        ssm_seq_view dbf = ssm__seq_make(db, p->db, s0, p->reverse, T);
        ssm_seq_view gf = work ? ssm__work_seq(p, work, p->reverse) : dbf;
        /* adjoint-order views */
        ssm_seq_view dbr = ssm__seq_make(db, p->db, s0, rev, T);
        ssm_seq_view g = work ? ssm__work_seq(p, work, rev) : dbr;
        ssm_seq_view dhv = ssm__seq_make(dh, p->dh, s0, rev, T), out;
        ssm_seq_view At = ssm__seq_t(Af);
        int written = 0;
        L->G = SSM__MIN(p->group, p->S - s0);
        memset(&out, 0, sizeof out);
        if (work) out = dbr;
        At.off = Af.off + T * Af.ts; /* A'_u = A_{T-u}^T: start one past the end, step back */
        At.ts = -Af.ts;
        SSM__TRY(ssm__copy_seq(L, 1, m, dhv, 0, 1, g, 0, 1));
        if (dhT)
            SSM__TRY(ssm__copy(ctx, p->work, L->G, 1, n, m, ssm__at(ssm__seq_make(dhT, p->dhT, s0, 0, 1), 0, 1),
                               ssm__at(g, 0, 1), 1));
        if (c && c->phase == 2 && c->q > 0) /* the adjoint carry from the spans after this one */
            SSM__TRY(ssm__copy(ctx, p->work, L->G, 1, n, m, ssm__at(ssm__cp_state(L, c->carry, s0, n * m, 0, m), 0, 1),
                               ssm__at(g, 0, 1), 1));
        if (c && c->phase == 1) { /* this span's adjoint map: e = A_0^T g_0 from the carry so far, P */
            SSM__TRY(ssm__lr_solve_cp(L, c, T, At, dhv, g, out, &written, scratch));
            if (c->want_end)
                SSM__TRY(ssm__mm(L, 1, 0.0, 1, ssm__seq_t(Af), 0, 1, gf, 0, 1, ssm__cp_state(L, c->send, s0, c->stride, n * n, m), 0, 1));
            if (c->need_P) SSM__TRY(ssm__lr_span_product(L, T, Af, c->tree, ssm__cp_state(L, c->send, s0, c->stride, 0, n)));
            continue;
        }
        SSM__TRY(c ? ssm__lr_solve_cp(L, c, T, At, dhv, g, out, &written, scratch)
                   : ssm__lr_solve(L, T, At, dhv, g, out, &written, scratch));
        if (dA) { /* dA_t = g_t h_{t-1}^T (m-contraction): a batched product with h viewed transposed */
            ssm_seq_view dAf = ssm__seq_make(dA, p->dA, s0, p->reverse, T);
            if (T > 1) {
                SSM__TRY(ctx->backend->gemm(ctx, p->work, L->G, T - 1, n, n, m, 1.0, ssm__at(gf, 1, 1),
                                            ssm__at(ssm__seq_t(hf), 0, 1), 0.0, ssm__at(dAf, 1, 1)));
                L->st.mat_mat += L->G * (T - 1);
            }
            if (h0) {
                ssm_seq_view v0t = ssm__seq_t(ssm__seq_make(h0, p->h0, s0, 0, 1));
                SSM__TRY(ctx->backend->gemm(ctx, p->work, L->G, 1, n, n, m, 1.0, ssm__at(gf, 0, 1), ssm__at(v0t, 0, 1),
                                            0.0, ssm__at(dAf, 0, 1)));
                L->st.mat_mat += L->G;
            } else {
                ssm_matrix_batch none;
                memset(&none, 0, sizeof none);
                SSM__TRY(ssm__copy(ctx, p->work, L->G, 1, n, n, none, ssm__at(dAf, 0, 1), 0));
            }
        }
        if (dh0) /* dh0 = A_0^T g_0 */
            SSM__TRY(ssm__mm(L, 1, 0.0, 1, ssm__seq_t(Af), 0, 1, gf, 0, 1, ssm__seq_make(dh0, p->dh0, s0, 0, 1), 0, 1));
        if (work) { /* the solver may have written steps 1..T-1 of db already */
            if (written) SSM__TRY(ssm__copy_seq(L, 1, m, g, 0, 1, dbr, 0, 1));
            else SSM__TRY(ssm__copy_seq(L, T, m, gf, 0, 1, dbf, 0, 1));
        }
    }
    return SSM_OK;
}

/* ssm_linrec_backward and ssm_linrec_backward_cp (cp set; h0 is then the span's hin). */
static ssm_result ssm__lr_backward_call(ssm_ctx *ctx, const char *op, const ssm_linrec_desc *desc,
                                        const ssm_linrec_cp *cp, const ssm_tensor *A, const ssm_tensor *h0,
                                        const ssm_tensor *h, const ssm_tensor *dh, const ssm_tensor *dhT,
                                        ssm_tensor *dA, ssm_tensor *db, ssm_tensor *dh0) {
    ssm_linrec_plan p;
    ssm__arg args[8];
    ssm__lr_io io;
    SSM__TRY(ssm__lr_begin(ctx, op, desc, cp, SSM_OP_LINREC_BACKWARD, &p));
    if (!A || !h || !dh || !db)
        return ssm_ctx_error(ctx, SSM_ERROR_NULL_ARGUMENT, "%s: A, h, dh and db are required", op);
    SSM__TRY(ssm__lr_shape_of(ctx, op, A, h, &p));
    SSM__TRY(ssm__state_strides(ctx, op, "h", h, &p, 1, p.h));
    SSM__TRY(ssm__state_strides(ctx, op, "dh", dh, &p, 1, p.dh));
    SSM__TRY(ssm__state_strides(ctx, op, "db", db, &p, 1, p.db));
    if (h0) SSM__TRY(ssm__state_strides(ctx, op, cp ? "hin" : "h0", h0, &p, 0, p.h0));
    if (dhT) SSM__TRY(ssm__state_strides(ctx, op, "dhT", dhT, &p, 0, p.dhT));
    if (dh0) SSM__TRY(ssm__state_strides(ctx, op, "dh0", dh0, &p, 0, p.dh0));
    if (dA) {
        int64_t shapeA[4];
        shapeA[0] = p.S, shapeA[1] = p.T, shapeA[2] = p.n, shapeA[3] = p.n;
        SSM__TRY(ssm__check(ctx, op, "dA", dA, p.dtype, 4, 4, shapeA));
        p.dA[0] = dA->strides[0], p.dA[1] = dA->strides[1], p.dA[2] = dA->strides[2], p.dA[3] = dA->strides[3];
    }
    ssm__arg_set(&args[0], "A", A, 0);
    ssm__arg_set(&args[1], cp ? "hin" : "h0", h0, 0);
    ssm__arg_set(&args[2], "h", h, 0);
    ssm__arg_set(&args[3], "dh", dh, 0);
    ssm__arg_set(&args[4], "dhT", dhT, 0);
    ssm__arg_set(&args[5], "dA", dA, 1);
    ssm__arg_set(&args[6], "db", db, 1);
    ssm__arg_set(&args[7], "dh0", dh0, 1);
    SSM__TRY(ssm__check_aliasing(ctx, op, args, 8));
    memset(&io, 0, sizeof io);
    io.A = A, io.h0 = h0, io.hf = h, io.dh = dh, io.dhT = dhT, io.dA = dA, io.db = db, io.dh0 = dh0;
    return ssm__lr_run(ctx, op, desc, cp, &p, 1, &io);
}

SSMDEF ssm_result ssm_linrec_backward(ssm_ctx *ctx, const ssm_linrec_desc *desc, const ssm_tensor *A,
                                      const ssm_tensor *h0, const ssm_tensor *h, const ssm_tensor *dh,
                                      const ssm_tensor *dhT, ssm_tensor *dA, ssm_tensor *db,
                                      ssm_tensor *dh0) {
    return ssm__lr_backward_call(ctx, "ssm_linrec_backward", desc, NULL, A, h0, h, dh, dhT, dA, db, dh0);
}
SSMDEF ssm_result ssm_linrec_backward_cp(ssm_ctx *ctx, const ssm_linrec_desc *desc, const ssm_linrec_cp *cp,
                                         const ssm_tensor *A, const ssm_tensor *hin, const ssm_tensor *h,
                                         const ssm_tensor *dh, const ssm_tensor *dhT, ssm_tensor *dA,
                                         ssm_tensor *db, ssm_tensor *dh0) {
    if (ctx && !cp) return ssm_ctx_error(ctx, SSM_ERROR_NULL_ARGUMENT, "ssm_linrec_backward_cp: cp is NULL");
    return ssm__lr_backward_call(ctx, "ssm_linrec_backward_cp", desc, cp, A, hin, h, dh, dhT, dA, db, dh0);
}

/* >>decay ---- decay scan (implementation) ------------------------------------------------- */
/* ---- decay scan ------------------------------------------------------------------------- */

SSMDEF ssm_decay_desc ssm_decay_desc_init(void) {
    ssm_decay_desc d;
    memset(&d, 0, sizeof d);
    return d;
}

typedef struct ssm__dk_shape {
    int64_t B, T, R, C;
} ssm__dk_shape;

/* Element addresses of the decay-scan tensors (strides from the views). */
#define SSM__PTR3(t, i, j, k) \
    ((char *)(t)->data + ((i) * (t)->strides[0] + (j) * (t)->strides[1] + (k) * (t)->strides[2]) * (int64_t)es)
#define SSM__PTR4(t, i, j, k, l)                                                                 \
    ((char *)(t)->data + ((i) * (t)->strides[0] + (j) * (t)->strides[1] + (k) * (t)->strides[2] + \
                          (l) * (t)->strides[3]) * (int64_t)es)

/* a_t, the per-step log decay, read from either input form (cA_{-1} = 0). */
static double ssm__dk_step(const ssm_decay_desc *d, const ssm_tensor *ld, size_t es, int64_t b,
                           int64_t t, int64_t r) {
    double v = SSM__LOAD(ld->dtype, SSM__PTR3(ld, b, t, r));
    if (d->input == SSM_DECAY_PER_STEP || t == 0) return v;
    return v - SSM__LOAD(ld->dtype, SSM__PTR3(ld, b, t - 1, r));
}

static ssm_result ssm__dk_forward_generic(ssm_ctx *ctx, const ssm_decay_desc *d, const ssm_tensor *ld,
                                          const ssm_tensor *x, const ssm_tensor *h0, ssm_tensor *out,
                                          ssm_tensor *hT, const ssm__dk_shape *s) {
    size_t es = ssm__esize(x->dtype);
    ssm_dtype dt = x->dtype;
    double *state;
    int64_t b, t, r, c;
    SSM__TRY(ssm_ctx_workspace(ctx, sizeof(double) * (size_t)(s->R * s->C), (void **)&state));
    for (b = 0; b < s->B; ++b) {
        for (r = 0; r < s->R; ++r)
            for (c = 0; c < s->C; ++c) state[r * s->C + c] = h0 ? SSM__LOAD(dt, SSM__PTR3(h0, b, r, c)) : 0.0;
        for (t = 0; t < s->T; ++t)
            for (r = 0; r < s->R; ++r) {
                double f = exp(ssm__dk_step(d, ld, es, b, t, r)), *st = state + r * s->C;
                for (c = 0; c < s->C; ++c) {
                    st[c] = f * st[c] + SSM__LOAD(dt, SSM__PTR4(x, b, t, r, c));
                    SSM__STORE(dt, SSM__PTR4(out, b, t, r, c), st[c]);
                }
            }
        if (hT)
            for (r = 0; r < s->R; ++r)
                for (c = 0; c < s->C; ++c) SSM__STORE(dt, SSM__PTR3(hT, b, r, c), state[r * s->C + c]);
    }
    return SSM_OK;
}

/* Adjoint: g_t = dout_t + exp(a_{t+1}) g_{t+1} (+ dhT at the end); dx_t = g_t;
   da_t = exp(a_t) sum_c g_t h_{t-1}; dh0 = exp(a_0) g_0; dcA_t = da_t - da_{t+1}. */
static ssm_result ssm__dk_backward_generic(ssm_ctx *ctx, const ssm_decay_desc *d, const ssm_tensor *ld,
                                           const ssm_tensor *h0, const ssm_tensor *out,
                                           const ssm_tensor *dout, const ssm_tensor *dhT, ssm_tensor *dx,
                                           ssm_tensor *dld, ssm_tensor *dh0, const ssm__dk_shape *s) {
    size_t es = ssm__esize(out->dtype);
    ssm_dtype dt = out->dtype;
    double *g;
    int64_t b, t, r, c;
    SSM__TRY(ssm_ctx_workspace(ctx, sizeof(double) * (size_t)(s->R * s->C), (void **)&g));
    for (b = 0; b < s->B; ++b) {
        for (r = 0; r < s->R; ++r)
            for (c = 0; c < s->C; ++c) g[r * s->C + c] = dhT ? SSM__LOAD(dt, SSM__PTR3(dhT, b, r, c)) : 0.0;
        for (t = s->T - 1; t >= 0; --t)
            for (r = 0; r < s->R; ++r) {
                double f_next = t + 1 < s->T ? exp(ssm__dk_step(d, ld, es, b, t + 1, r)) : 1.0;
                double f = exp(ssm__dk_step(d, ld, es, b, t, r)), acc = 0.0, *gr = g + r * s->C;
                for (c = 0; c < s->C; ++c) {
                    double prev = t > 0 ? SSM__LOAD(dt, SSM__PTR4(out, b, t - 1, r, c))
                                        : (h0 ? SSM__LOAD(dt, SSM__PTR3(h0, b, r, c)) : 0.0);
                    gr[c] = f_next * gr[c] + SSM__LOAD(dt, SSM__PTR4(dout, b, t, r, c));
                    SSM__STORE(dt, SSM__PTR4(dx, b, t, r, c), gr[c]);
                    acc += gr[c] * prev;
                }
                SSM__STORE(dt, SSM__PTR3(dld, b, t, r), f == 0.0 ? 0.0 : f * acc);
                if (t == 0 && dh0)
                    for (c = 0; c < s->C; ++c) SSM__STORE(dt, SSM__PTR3(dh0, b, r, c), f * gr[c]);
            }
        if (d->input == SSM_DECAY_CUMULATIVE)
            for (t = 0; t + 1 < s->T; ++t)
                for (r = 0; r < s->R; ++r) {
                    double v = SSM__LOAD(dt, SSM__PTR3(dld, b, t, r)) - SSM__LOAD(dt, SSM__PTR3(dld, b, t + 1, r));
                    SSM__STORE(dt, SSM__PTR3(dld, b, t, r), v);
                }
    }
    return SSM_OK;
}

/* A span's map on the host (the decay_span slot's contract): the end state from init through
   x, or (adjoint) u = exp(a_0) g_0 with g_t = x_t + exp(a_{t+1}) g_{t+1} from g_{T-1} = x + init;
   then P = exp(cA_{T-1}) or exp(sum a_t). The map is in the data's dtype (f32 or f64 here). */
static ssm_result ssm__dk_span_generic(ssm_ctx *ctx, const ssm_decay_desc *d, const ssm_tensor *ld,
                                       const ssm_tensor *x, const ssm_tensor *init, int adjoint, void *map,
                                       const ssm__dk_shape *s) {
    size_t es = ssm__esize(x->dtype);
    ssm_dtype dt = x->dtype;
    char *e = (char *)map, *P = e + (size_t)(s->B * s->R * s->C) * es;
    double *state;
    int64_t b, t, r, c, u;
    SSM__TRY(ssm_ctx_workspace(ctx, sizeof(double) * (size_t)(s->R * s->C), (void **)&state));
    for (b = 0; b < s->B; ++b) {
        for (r = 0; r < s->R; ++r)
            for (c = 0; c < s->C; ++c) state[r * s->C + c] = init ? SSM__LOAD(dt, SSM__PTR3(init, b, r, c)) : 0.0;
        for (u = 0; u < s->T; ++u)
            for (r = 0; r < s->R; ++r) {
                t = adjoint ? s->T - 1 - u : u;
                double f = adjoint ? (t + 1 < s->T ? exp(ssm__dk_step(d, ld, es, b, t + 1, r)) : 1.0)
                                   : exp(ssm__dk_step(d, ld, es, b, t, r)), *st = state + r * s->C;
                for (c = 0; c < s->C; ++c) st[c] = f * st[c] + SSM__LOAD(dt, SSM__PTR4(x, b, t, r, c));
            }
        for (r = 0; r < s->R; ++r) {
            double f0 = adjoint ? exp(ssm__dk_step(d, ld, es, b, 0, r)) : 1.0, D = 0.0;
            for (c = 0; c < s->C; ++c)
                SSM__STORE(dt, e + (size_t)((b * s->R + r) * s->C + c) * es, f0 * state[r * s->C + c]);
            if (d->input == SSM_DECAY_CUMULATIVE) D = SSM__LOAD(dt, SSM__PTR3(ld, b, s->T - 1, r));
            else
                for (t = 0; t < s->T; ++t) D += SSM__LOAD(dt, SSM__PTR3(ld, b, t, r));
            SSM__STORE(dt, P + (size_t)(b * s->R + r) * es, exp(D));
        }
    }
    return SSM_OK;
}

/* Cumulative decays must be finite (their differences are taken); per-step decays may be
   -inf (a full reset) but never NaN or +inf. */
static ssm_result ssm__dk_check_finite(ssm_ctx *ctx, const char *op, const ssm_decay_desc *d,
                                       const ssm_tensor *ld, const ssm__dk_shape *s) {
    size_t es = ssm__esize(ld->dtype);
    int64_t b, t, r;
    for (b = 0; b < s->B; ++b)
        for (t = 0; t < s->T; ++t)
            for (r = 0; r < s->R; ++r) {
                double v = SSM__LOAD(ld->dtype, SSM__PTR3(ld, b, t, r));
                int bad = d->input == SSM_DECAY_CUMULATIVE ? !isfinite(v) : (isnan(v) || v == HUGE_VAL);
                if (bad)
                    return ssm_ctx_error(ctx, SSM_ERROR_NON_FINITE, "%s: log_decay[%lld,%lld,%lld] = %g is not allowed (%s input)",
                                         op, (long long)b, (long long)t, (long long)r, v,
                                         d->input == SSM_DECAY_CUMULATIVE ? "cumulative" : "per-step");
            }
    return SSM_OK;
}

static ssm_result ssm__dk_validate(ssm_ctx *ctx, const char *op, const ssm_decay_desc *d,
                                   const ssm_tensor *ld, const ssm_tensor *x, ssm__dk_shape *s) {
    int64_t sh3[3];
    if (!d) return ssm_ctx_error(ctx, SSM_ERROR_NULL_ARGUMENT, "%s: desc is NULL", op);
    if (d->input != SSM_DECAY_CUMULATIVE && d->input != SSM_DECAY_PER_STEP)
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_VALUE, "%s: unknown decay input kind %d", op, (int)d->input);
    SSM__TRY(ssm__check_float_dtype(ctx, op, x));
    SSM__TRY(ssm__check(ctx, op, "x", x, x->dtype, 4, 4, NULL));
    s->B = x->shape[0], s->T = x->shape[1], s->R = x->shape[2], s->C = x->shape[3];
    if (s->T < 1 || s->R < 1 || s->C < 1)
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_SHAPE, "%s: T, R and C must be >= 1", op);
    sh3[0] = s->B, sh3[1] = s->T, sh3[2] = s->R;
    return ssm__check(ctx, op, "log_decay", ld, x->dtype, 3, 3, sh3);
}

/* The plan: sizes, the backend's support and its workspace (the generic scan keeps one
   f64 state row of R x C per batch entry: host loops, so only a CPU backend runs it). span: a
   _cp call (the backend's figure covers its decay_span slot too). */
static ssm_result ssm__dk_plan(ssm_ctx *ctx, const char *op, ssm_op which, const ssm_decay_desc *d, ssm_dtype dt,
                               const ssm__dk_shape *s, int span, ssm_decay_plan *p) {
    ssm_result r = SSM__NOT_MINE;
    memset(p, 0, sizeof *p);
    p->op = which;
    p->dtype = dt;
    p->B = s->B, p->T = s->T, p->R = s->R, p->C = s->C;
    p->input = d->input;
    p->span = span;
    SSM__TRY(ssm__supported(ctx, op, which, p));
    if (ctx->backend->workspace_size) r = ctx->backend->workspace_size(ctx, which, p, &p->workspace_bytes);
    if (r == SSM__NOT_MINE) {
        if (ctx->backend->device_type != SSM_DEVICE_CPU)
            return ssm_ctx_error(ctx, SSM_ERROR_UNSUPPORTED, "%s: the %s backend has no decay scan", op, ctx->backend->name);
        p->workspace_bytes = sizeof(double) * (size_t)(s->R * s->C);
    } else if (r != SSM_OK) {
        return r;
    }
    return SSM_OK;
}

/* ---- decay scan: context parallelism ----------------------------------------------------------
   A span's map is [B][R][C] e then [B][R] P in the work dtype (f64 for f64 data, else f32): the
   forward's x_end = P x_in + e, the adjoint's g_in = P g_end + e. The ranks fold the maps of the
   ranks processed before them (ssm__cp_place: the adjoint runs from the last rank). */
typedef struct ssm__dk_cp {
    const ssm_linrec_cp *cp;
    int q;                  /* this rank's place in processing order            */
    ssm_dtype work;
    size_t map_bytes;       /* one rank's map, as exchanged (256-byte aligned)  */
    size_t state_bytes;     /* one [B][R][C] carry buffer                       */
    char *send, *recv, *carry, *tmp;
} ssm__dk_cp;

/* c's sizes for plan p; returns the bytes it takes past the plan's workspace (SIZE_MAX: too many). */
static size_t ssm__dk_cp_layout(const ssm_decay_plan *p, const ssm_linrec_cp *cp, int adjoint, ssm__dk_cp *c) {
    size_t es;
    memset(c, 0, sizeof *c);
    c->cp = cp;
    c->q = ssm__cp_place(cp, 0, adjoint, cp->rank);
    c->work = p->dtype.bits == 64 ? SSM_F64 : SSM_F32;
    es = ssm__esize(c->work);
    c->state_bytes = ssm__ws_align_sat(ssm__szmul(ssm__szmul(ssm__szmul(es, p->B), p->R), p->C));
    c->map_bytes = ssm__ws_align_sat(ssm__szmul(ssm__szmul(ssm__szmul(es, p->B), p->R), p->C + 1));
    return ssm__szadd(ssm__szmul(c->map_bytes, (int64_t)cp->nranks + 1), ssm__szmul(c->state_bytes, 2));
}

/* A _cp plan: its workspace grows by the exchange's buffers (c laid out). */
static ssm_result ssm__dk_cp_plan(ssm_ctx *ctx, const char *op, ssm_decay_plan *p, const ssm_linrec_cp *cp, int adjoint,
                                  ssm__dk_cp *c) {
    p->workspace_bytes = ssm__szadd(p->workspace_bytes, ssm__dk_cp_layout(p, cp, adjoint, c));
    if (p->workspace_bytes == SIZE_MAX)
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_SHAPE, "%s: these sizes need more workspace than size_t counts", op);
    return SSM_OK;
}

/* The compact [B][R][C] buffer buf, and a [B,R,C] tensor, as B x R rows of C (outer b, batch r). */
static ssm_matrix_batch ssm__dk_rows(const ssm_decay_plan *p, ssm_dtype work, void *buf) {
    ssm_matrix_batch m;
    m.ptr = buf, m.dtype = work, m.rs = p->C, m.cs = 1, m.bs = p->C, m.ss = p->R * p->C;
    return m;
}
static ssm_matrix_batch ssm__dk_rows_of(const ssm_tensor *t) {
    ssm_matrix_batch m;
    memset(&m, 0, sizeof m);
    if (!t) return m;
    m.ptr = t->data, m.dtype = t->dtype, m.rs = 0, m.cs = t->strides[2], m.bs = t->strides[1], m.ss = t->strides[0];
    return m;
}

/* Between the phases: every rank's map to every rank, then this rank's carry folded over the
   ranks processed before it, x = e_j + P_j x (a 1 x 1 times 1 x C product per row). */
static ssm_result ssm__dk_cp_exchange(ssm_ctx *ctx, const char *op, const ssm_decay_plan *p, ssm__dk_cp *c,
                                      int adjoint) {
    const int64_t BR = p->B * p->R;
    const size_t es = ssm__esize(c->work);
    int j;
    SSM__TRY(ssm__cp_allgather(ctx, op, c->cp, c->send, c->recv, c->map_bytes));
    for (j = 0; j < c->q; ++j) {
        char *mp = c->recv + c->map_bytes * (size_t)ssm__cp_place(c->cp, 0, adjoint, j), *t;
        ssm_matrix_batch e = ssm__dk_rows(p, c->work, mp), P = e, x = ssm__dk_rows(p, c->work, c->carry), y = x;
        P.ptr = mp + (size_t)(BR * p->C) * es, P.rs = 1, P.bs = 1, P.ss = p->R;
        y.ptr = c->tmp;
        SSM__TRY(ssm__copy(ctx, c->work, 1, BR, 1, p->C, e, y, 0));
        if (j > 0) SSM__TRY(ctx->backend->gemm(ctx, c->work, 1, BR, 1, p->C, 1, 1.0, P, x, 1.0, y));
        t = c->carry, c->carry = c->tmp, c->tmp = t;
    }
    return SSM_OK;
}

/* Phase 1 of a _cp call: this rank's map into c->send (the rank processed last sends none, but
   its backend may start on the work that needs no carry); p->span = 2 once the slot ran. */
static ssm_result ssm__dk_cp_span(ssm_ctx *ctx, ssm_decay_plan *p, const ssm_decay_desc *d, ssm__dk_cp *c, int adjoint,
                                  const ssm_tensor *ld, const ssm_tensor *x, const ssm_tensor *init,
                                  const ssm__dk_shape *s) {
    void *map = c->q == c->cp->nranks - 1 ? NULL : c->send;
    ssm_result r = SSM__NOT_MINE;
    if (ctx->backend->decay_span) r = ctx->backend->decay_span(ctx, p, adjoint, ld, x, init, map);
    if (r == SSM_OK) p->span = 2;
    if (r != SSM__NOT_MINE) return r;
    return map ? ssm__dk_span_generic(ctx, d, ld, x, init, adjoint, map, s) : SSM_OK;
}

/* The carry as a [B,R,C] tensor of the work dtype (what the decay slots take from a _cp call). */
static ssm_tensor ssm__dk_carry_tensor(const ssm_decay_plan *p, const ssm__dk_cp *c, ssm_device dev) {
    int64_t sh[3];
    sh[0] = p->B, sh[1] = p->R, sh[2] = p->C;
    return ssm_tensor_make(c->carry, c->work, dev, 3, sh, NULL);
}

/* ssm_decay_workspace_size and ssm_decay_cp_workspace_size (cp set). */
static ssm_result ssm__dk_workspace_query(const ssm_ctx *cctx, const char *op, const ssm_decay_desc *desc,
                                          const ssm_linrec_cp *cp, ssm_dtype dtype, int64_t B, int64_t T, int64_t R,
                                          int64_t C, int backward, size_t *bytes) {
    ssm_ctx *ctx = (ssm_ctx *)cctx; /* only its message is written */
    ssm__dk_shape s;
    ssm_decay_plan p;
    ssm_tensor probe;
    if (!ctx || !desc || !bytes) return SSM_ERROR_NULL_ARGUMENT;
    ctx->message[0] = 0;
    *bytes = 0;
    if (desc->input != SSM_DECAY_CUMULATIVE && desc->input != SSM_DECAY_PER_STEP)
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_VALUE, "%s: unknown decay input kind %d", op, (int)desc->input);
    if (cp) SSM__TRY(ssm__cp_check(ctx, op, cp));
    memset(&probe, 0, sizeof probe);
    probe.dtype = dtype;
    SSM__TRY(ssm__check_float_dtype(ctx, op, &probe));
    if (B < 0 || T < 1 || R < 1 || C < 1)
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_SHAPE, "%s: need B >= 0 and T, R, C >= 1", op);
    s.B = B, s.T = T, s.R = R, s.C = C;
    SSM__TRY(ssm__dk_plan(ctx, op, backward ? SSM_OP_DECAY_BACKWARD : SSM_OP_DECAY_FORWARD, desc, dtype, &s, cp != NULL, &p));
    if (cp) {
        ssm__dk_cp c;
        SSM__TRY(ssm__dk_cp_plan(ctx, op, &p, cp, backward, &c));
    }
    *bytes = B > 0 ? p.workspace_bytes : 0;
    return SSM_OK;
}
SSMDEF ssm_result ssm_decay_workspace_size(const ssm_ctx *ctx, const ssm_decay_desc *desc, ssm_dtype dtype,
                                           int64_t B, int64_t T, int64_t R, int64_t C, int backward,
                                           size_t *bytes) {
    return ssm__dk_workspace_query(ctx, "ssm_decay_workspace_size", desc, NULL, dtype, B, T, R, C, backward, bytes);
}
SSMDEF ssm_result ssm_decay_cp_workspace_size(const ssm_ctx *ctx, const ssm_decay_desc *desc, const ssm_linrec_cp *cp,
                                              ssm_dtype dtype, int64_t B, int64_t T, int64_t R, int64_t C,
                                              int backward, size_t *bytes) {
    if (ctx && !cp) {
        ((ssm_ctx *)ctx)->message[0] = 0;
        return ssm_ctx_error((ssm_ctx *)ctx, SSM_ERROR_NULL_ARGUMENT, "ssm_decay_cp_workspace_size: cp is NULL");
    }
    return ssm__dk_workspace_query(ctx, "ssm_decay_cp_workspace_size", desc, cp, dtype, B, T, R, C, backward, bytes);
}

/* The plan of a call, and with cp its exchange buffers placed past the plan's workspace (the
   whole workspace taken once, so the slots' own ssm_ctx_workspace calls return the same base). */
static ssm_result ssm__dk_cp_setup(ssm_ctx *ctx, const char *op, ssm_decay_plan *p, const ssm_linrec_cp *cp, int adjoint,
                                   ssm__dk_cp *c) {
    size_t base = p->workspace_bytes;
    void *wsp;
    SSM__TRY(ssm__dk_cp_plan(ctx, op, p, cp, adjoint, c));
    SSM__TRY(ssm_ctx_workspace(ctx, p->workspace_bytes, &wsp));
    c->send = (char *)wsp + base;
    c->recv = c->send + c->map_bytes;
    c->carry = c->recv + c->map_bytes * (size_t)cp->nranks;
    c->tmp = c->carry + c->state_bytes;
    return SSM_OK;
}

/* The backend's scan slot, else the host loops (after the finite check). */
static ssm_result ssm__dk_run_forward(ssm_ctx *ctx, const char *op, const ssm_decay_plan *p, const ssm_decay_desc *d,
                                      const ssm_tensor *ld, const ssm_tensor *x, const ssm_tensor *h0, ssm_tensor *out,
                                      ssm_tensor *hT, const ssm__dk_shape *s) {
    ssm_result r = SSM__NOT_MINE;
    if (ctx->backend->decay_forward) r = ctx->backend->decay_forward(ctx, p, ld, x, h0, out, hT);
    if (r != SSM__NOT_MINE) return r;
    SSM__TRY(ssm__dk_check_finite(ctx, op, d, ld, s));
    return ssm__dk_forward_generic(ctx, d, ld, x, h0, out, hT, s);
}
static ssm_result ssm__dk_run_backward(ssm_ctx *ctx, const char *op, const ssm_decay_plan *p, const ssm_decay_desc *d,
                                       const ssm_tensor *ld, const ssm_tensor *h0, const ssm_tensor *out,
                                       const ssm_tensor *dout, const ssm_tensor *dhT, ssm_tensor *dx, ssm_tensor *dld,
                                       ssm_tensor *dh0, const ssm__dk_shape *s) {
    ssm_result r = SSM__NOT_MINE;
    if (ctx->backend->decay_backward) r = ctx->backend->decay_backward(ctx, p, ld, h0, out, dout, dhT, dx, dld, dh0);
    if (r != SSM__NOT_MINE) return r;
    SSM__TRY(ssm__dk_check_finite(ctx, op, d, ld, s));
    return ssm__dk_backward_generic(ctx, d, ld, h0, out, dout, dhT, dx, dld, dh0, s);
}

/* ssm_decay_forward and ssm_decay_forward_cp (cp set: the span's map, the exchange, then the
   scan from the carry). */
static ssm_result ssm__dk_forward_call(ssm_ctx *ctx, const char *op, const ssm_decay_desc *desc, const ssm_linrec_cp *cp,
                                       const ssm_tensor *log_decay, const ssm_tensor *x, const ssm_tensor *h0,
                                       ssm_tensor *out, ssm_tensor *hT, ssm_tensor *hin) {
    ssm__dk_shape s;
    ssm_decay_plan p;
    ssm__dk_cp c;
    ssm_tensor carry;
    int64_t sh3[3], sh4[4];
    ssm__arg args[6];
    if (!ctx) return SSM_ERROR_NULL_ARGUMENT;
    ctx->message[0] = 0;
    if (cp) SSM__TRY(ssm__cp_check(ctx, op, cp));
    if (!log_decay || !x || !out)
        return ssm_ctx_error(ctx, SSM_ERROR_NULL_ARGUMENT, "%s: log_decay, x and out are required", op);
    if (cp && h0 && cp->rank != 0)
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_VALUE, "%s: h0 belongs to rank 0, not rank %d", op, cp->rank);
    SSM__TRY(ssm__dk_validate(ctx, op, desc, log_decay, x, &s));
    sh4[0] = s.B, sh4[1] = s.T, sh4[2] = s.R, sh4[3] = s.C;
    sh3[0] = s.B, sh3[1] = s.R, sh3[2] = s.C;
    SSM__TRY(ssm__check(ctx, op, "out", out, x->dtype, 4, 4, sh4));
    if (h0) SSM__TRY(ssm__check(ctx, op, "h0", h0, x->dtype, 3, 3, sh3));
    if (hT) SSM__TRY(ssm__check(ctx, op, "hT", hT, x->dtype, 3, 3, sh3));
    if (hin) SSM__TRY(ssm__check(ctx, op, "hin", hin, x->dtype, 3, 3, sh3));
    ssm__arg_set(&args[0], "log_decay", log_decay, 0);
    ssm__arg_set(&args[1], "x", x, 0);
    ssm__arg_set(&args[2], "h0", h0, 0);
    ssm__arg_set(&args[3], "out", out, 1);
    ssm__arg_set(&args[4], "hT", hT, 1);
    ssm__arg_set(&args[5], "hin", hin, 1);
    SSM__TRY(ssm__check_aliasing(ctx, op, args, 6));
    SSM__TRY(ssm__dk_plan(ctx, op, SSM_OP_DECAY_FORWARD, desc, x->dtype, &s, cp != NULL, &p));
    if (s.B == 0) return SSM_OK;
    if (!cp) return ssm__dk_run_forward(ctx, op, &p, desc, log_decay, x, h0, out, hT, &s);
    SSM__TRY(ssm__dk_cp_setup(ctx, op, &p, cp, 0, &c));
    if (ctx->backend->device_type == SSM_DEVICE_CPU) SSM__TRY(ssm__dk_check_finite(ctx, op, desc, log_decay, &s));
    SSM__TRY(ssm__dk_cp_span(ctx, &p, desc, &c, 0, log_decay, x, h0, &s));
    SSM__TRY(ssm__dk_cp_exchange(ctx, op, &p, &c, 0));
    carry = ssm__dk_carry_tensor(&p, &c, x->device);
    if (c.q > 0) h0 = &carry;
    SSM__TRY(ssm__dk_run_forward(ctx, op, &p, desc, log_decay, x, h0, out, hT, &s));
    if (hin) /* the state entering the span: h0's values (zeros without) or the carry */
        SSM__TRY(ssm__copy(ctx, c.work, s.B, s.R, 1, s.C, ssm__dk_rows_of(h0), ssm__dk_rows_of(hin), 0));
    return SSM_OK;
}

SSMDEF ssm_result ssm_decay_forward(ssm_ctx *ctx, const ssm_decay_desc *desc, const ssm_tensor *log_decay,
                                    const ssm_tensor *x, const ssm_tensor *h0, ssm_tensor *out,
                                    ssm_tensor *hT) {
    return ssm__dk_forward_call(ctx, "ssm_decay_forward", desc, NULL, log_decay, x, h0, out, hT, NULL);
}
SSMDEF ssm_result ssm_decay_forward_cp(ssm_ctx *ctx, const ssm_decay_desc *desc, const ssm_linrec_cp *cp,
                                       const ssm_tensor *log_decay, const ssm_tensor *x, const ssm_tensor *h0,
                                       ssm_tensor *out, ssm_tensor *hT, ssm_tensor *hin) {
    if (ctx && !cp) {
        ctx->message[0] = 0;
        return ssm_ctx_error(ctx, SSM_ERROR_NULL_ARGUMENT, "ssm_decay_forward_cp: cp is NULL");
    }
    return ssm__dk_forward_call(ctx, "ssm_decay_forward_cp", desc, cp, log_decay, x, h0, out, hT, hin);
}

/* ssm_decay_backward and ssm_decay_backward_cp (cp set; h0 is then the span's hin). */
static ssm_result ssm__dk_backward_call(ssm_ctx *ctx, const char *op, const ssm_decay_desc *desc, const ssm_linrec_cp *cp,
                                        const ssm_tensor *log_decay, const ssm_tensor *h0, const ssm_tensor *out,
                                        const ssm_tensor *dout, const ssm_tensor *dhT, ssm_tensor *dx,
                                        ssm_tensor *dlog_decay, ssm_tensor *dh0) {
    const char *h0_name = cp ? "hin" : "h0";
    ssm__dk_shape s;
    ssm_decay_plan p;
    ssm__dk_cp c;
    ssm_tensor carry;
    int64_t sh3[3], sh4[4], shl[3];
    ssm__arg args[8];
    if (!ctx) return SSM_ERROR_NULL_ARGUMENT;
    ctx->message[0] = 0;
    if (cp) SSM__TRY(ssm__cp_check(ctx, op, cp));
    if (!log_decay || !out || !dout || !dx || !dlog_decay)
        return ssm_ctx_error(ctx, SSM_ERROR_NULL_ARGUMENT, "%s: log_decay, out, dout, dx and dlog_decay are required", op);
    SSM__TRY(ssm__dk_validate(ctx, op, desc, log_decay, out, &s));
    sh4[0] = s.B, sh4[1] = s.T, sh4[2] = s.R, sh4[3] = s.C;
    sh3[0] = s.B, sh3[1] = s.R, sh3[2] = s.C;
    shl[0] = s.B, shl[1] = s.T, shl[2] = s.R;
    SSM__TRY(ssm__check(ctx, op, "dout", dout, out->dtype, 4, 4, sh4));
    SSM__TRY(ssm__check(ctx, op, "dx", dx, out->dtype, 4, 4, sh4));
    SSM__TRY(ssm__check(ctx, op, "dlog_decay", dlog_decay, out->dtype, 3, 3, shl));
    if (h0) SSM__TRY(ssm__check(ctx, op, h0_name, h0, out->dtype, 3, 3, sh3));
    if (dhT) SSM__TRY(ssm__check(ctx, op, "dhT", dhT, out->dtype, 3, 3, sh3));
    if (dh0) SSM__TRY(ssm__check(ctx, op, "dh0", dh0, out->dtype, 3, 3, sh3));
    ssm__arg_set(&args[0], "log_decay", log_decay, 0);
    ssm__arg_set(&args[1], h0_name, h0, 0);
    ssm__arg_set(&args[2], "out", out, 0);
    ssm__arg_set(&args[3], "dout", dout, 0);
    ssm__arg_set(&args[4], "dhT", dhT, 0);
    ssm__arg_set(&args[5], "dx", dx, 1);
    ssm__arg_set(&args[6], "dlog_decay", dlog_decay, 1);
    ssm__arg_set(&args[7], "dh0", dh0, 1);
    SSM__TRY(ssm__check_aliasing(ctx, op, args, 8));
    SSM__TRY(ssm__dk_plan(ctx, op, SSM_OP_DECAY_BACKWARD, desc, out->dtype, &s, cp != NULL, &p));
    if (s.B == 0) return SSM_OK;
    if (!cp) return ssm__dk_run_backward(ctx, op, &p, desc, log_decay, h0, out, dout, dhT, dx, dlog_decay, dh0, &s);
    SSM__TRY(ssm__dk_cp_setup(ctx, op, &p, cp, 1, &c));
    if (ctx->backend->device_type == SSM_DEVICE_CPU) SSM__TRY(ssm__dk_check_finite(ctx, op, desc, log_decay, &s));
    SSM__TRY(ssm__dk_cp_span(ctx, &p, desc, &c, 1, log_decay, dout, dhT, &s));
    SSM__TRY(ssm__dk_cp_exchange(ctx, op, &p, &c, 1));
    carry = ssm__dk_carry_tensor(&p, &c, out->device);
    if (c.q > 0) { /* the gradient of the span's end: its own dhT and the spans' after it */
        if (dhT) SSM__TRY(ssm__copy(ctx, c.work, s.B, s.R, 1, s.C, ssm__dk_rows_of(dhT), ssm__dk_rows_of(&carry), 1));
        dhT = &carry;
    }
    return ssm__dk_run_backward(ctx, op, &p, desc, log_decay, h0, out, dout, dhT, dx, dlog_decay, dh0, &s);
}

SSMDEF ssm_result ssm_decay_backward(ssm_ctx *ctx, const ssm_decay_desc *desc, const ssm_tensor *log_decay,
                                     const ssm_tensor *h0, const ssm_tensor *out, const ssm_tensor *dout,
                                     const ssm_tensor *dhT, ssm_tensor *dx, ssm_tensor *dlog_decay,
                                     ssm_tensor *dh0) {
    return ssm__dk_backward_call(ctx, "ssm_decay_backward", desc, NULL, log_decay, h0, out, dout, dhT, dx, dlog_decay, dh0);
}
SSMDEF ssm_result ssm_decay_backward_cp(ssm_ctx *ctx, const ssm_decay_desc *desc, const ssm_linrec_cp *cp,
                                        const ssm_tensor *log_decay, const ssm_tensor *hin, const ssm_tensor *out,
                                        const ssm_tensor *dout, const ssm_tensor *dhT, ssm_tensor *dx,
                                        ssm_tensor *dlog_decay, ssm_tensor *dh0) {
    if (ctx && !cp) {
        ctx->message[0] = 0;
        return ssm_ctx_error(ctx, SSM_ERROR_NULL_ARGUMENT, "ssm_decay_backward_cp: cp is NULL");
    }
    return ssm__dk_backward_call(ctx, "ssm_decay_backward_cp", desc, cp, log_decay, hin, out, dout, dhT, dx, dlog_decay, dh0);
}

/* >>bell ---- block-ELL sparse linear layer (implementation) ------------------------------- */
/* ---- block-ELL sparse linear layer -------------------------------------------------------- */

/* Sizes of a layer: R block-rows, K slots per row, B tile size, C block-columns. */
typedef struct ssm__bell_shape {
    int64_t R, K, B, C;
} ssm__bell_shape;

#define SSM__BELL_IDX(t, r, k) \
    (*(int32_t *)((char *)(t)->data + ((r) * (t)->strides[0] + (k) * (t)->strides[1]) * 4))
#define SSM__BELL_I1(t, i) (*(int32_t *)((char *)(t)->data + (i) * (t)->strides[0] * 4))

/* The generic code runs host loops: only a CPU backend can run it. Device backends run the
   ops they have slots for (bell_forward, bell_backward); the index and topology ops read
   col_idx on the host, so they need a CPU context (copy the index to the host). */
static ssm_result ssm__bell_cpu(ssm_ctx *ctx, const char *op) {
    ssm_op which = strstr(op, "backward") ? SSM_OP_BELL_BACKWARD
                   : strstr(op, "forward") ? SSM_OP_BELL_FORWARD : SSM_OP_BELL_TOPOLOGY;
    return ssm__supported(ctx, op, which, NULL);
}

/* col_idx [R,K]: i32, entries in [0, C), distinct within a row (O(K^2) per row: no memory). */
static ssm_result ssm__bell_check_index(ssm_ctx *ctx, const char *op, const ssm_tensor *col_idx,
                                        const ssm__bell_shape *s) {
    int64_t shape[2], r, k, j;
    shape[0] = s->R, shape[1] = s->K;
    SSM__TRY(ssm__check(ctx, op, "col_idx", col_idx, SSM_I32, 2, 2, shape));
    for (r = 0; r < s->R; ++r)
        for (k = 0; k < s->K; ++k) {
            int32_t c = SSM__BELL_IDX(col_idx, r, k);
            if (c < 0 || c >= s->C)
                return ssm_ctx_error(ctx, SSM_ERROR_INVALID_VALUE, "%s: col_idx[%lld,%lld] = %d is outside [0, %lld)",
                                     op, (long long)r, (long long)k, (int)c, (long long)s->C);
            for (j = 0; j < k; ++j)
                if (SSM__BELL_IDX(col_idx, r, j) == c)
                    return ssm_ctx_error(ctx, SSM_ERROR_INVALID_VALUE, "%s: row %lld uses column %d twice (slots %lld, %lld)",
                                         op, (long long)r, (int)c, (long long)j, (long long)k);
        }
    return SSM_OK;
}

/* values [R,K,B,B] (f32/f64, B >= 1, 1 <= K <= C) and its col_idx; fills s. C < 0: not
   known yet (only B is needed to derive it), the K <= C check waits for the second call. */
static ssm_result ssm__bell_check_layer(ssm_ctx *ctx, const char *op, const ssm_tensor *values,
                                        const ssm_tensor *col_idx, int64_t C, ssm__bell_shape *s) {
    SSM__TRY(ssm__check_float_dtype(ctx, op, values));
    SSM__TRY(ssm__check(ctx, op, "values", values, values->dtype, 4, 4, NULL));
    s->R = values->shape[0], s->K = values->shape[1], s->B = values->shape[2], s->C = C;
    if (s->B < 1 || values->shape[3] != s->B)
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_SHAPE, "%s: values must be [R,K,B,B] with B >= 1, got B = %lld x %lld",
                             op, (long long)s->B, (long long)values->shape[3]);
    if (s->R < 1 || s->K < 1 || (C >= 0 && (C < 1 || s->K > C)))
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_SHAPE, "%s: need R >= 1, C >= 1 and 1 <= K <= C (R=%lld K=%lld C=%lld)",
                             op, (long long)s->R, (long long)s->K, (long long)C);
    if ((uint64_t)ssm__mul64(s->R, s->K) > INT32_MAX || C > INT32_MAX) /* slots and columns are i32 */
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_SHAPE, "%s: R*K = %lld*%lld and C = %lld must fit in i32", op,
                             (long long)s->R, (long long)s->K, (long long)C);
    if (!col_idx) return ssm_ctx_error(ctx, SSM_ERROR_NULL_ARGUMENT, "%s: col_idx is NULL", op);
    return SSM_OK;
}

/* C of a feature dimension of width `width` (must be a multiple of B). */
static ssm_result ssm__bell_blocks(ssm_ctx *ctx, const char *op, const char *name, int64_t width, int64_t B,
                                   int64_t *C) {
    if (B < 1 || width % B != 0 || width / B < 1)
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_SHAPE, "%s: %s has %lld features, not a positive multiple of B = %lld",
                             op, name, (long long)width, (long long)B);
    *C = width / B;
    return SSM_OK;
}

/* The transposed index must be the one of col_idx: offsets monotone from 0 to R*K, every
   listed slot uses its column, slots ascending per column (hence a permutation). */
static ssm_result ssm__bell_check_tindex(ssm_ctx *ctx, const char *op, const ssm_tensor *col_idx,
                                         const ssm_tensor *t_offsets, const ssm_tensor *t_slots,
                                         const ssm__bell_shape *s) {
    int64_t so = s->C + 1, ss = s->R * s->K, c, i;
    SSM__TRY(ssm__check(ctx, op, "t_offsets", t_offsets, SSM_I32, 1, 1, &so));
    SSM__TRY(ssm__check(ctx, op, "t_slots", t_slots, SSM_I32, 1, 1, &ss));
    if (SSM__BELL_I1(t_offsets, 0) != 0 || SSM__BELL_I1(t_offsets, s->C) != ss)
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_VALUE, "%s: t_offsets must run from 0 to R*K", op);
    for (c = 0; c < s->C; ++c) {
        int32_t lo = SSM__BELL_I1(t_offsets, c), hi = SSM__BELL_I1(t_offsets, c + 1);
        /* bounds first: the slots of column c are read only once [lo, hi) lies in [0, R*K] */
        if (hi < lo || hi > ss)
            return ssm_ctx_error(ctx, SSM_ERROR_INVALID_VALUE, "%s: t_offsets is not monotone within [0, R*K] at %lld", op,
                                 (long long)c);
        for (i = lo; i < hi; ++i) {
            int32_t slot = SSM__BELL_I1(t_slots, i);
            if (slot < 0 || slot >= ss || (i > lo && slot <= SSM__BELL_I1(t_slots, i - 1)) ||
                SSM__BELL_IDX(col_idx, slot / s->K, slot % s->K) != c)
                return ssm_ctx_error(ctx, SSM_ERROR_INVALID_VALUE,
                                     "%s: the transposed index does not match col_idx (column %lld); rebuild it with ssm_bell_transpose_index",
                                     op, (long long)c);
        }
    }
    return SSM_OK;
}

/* Counting sort of the slots by column, ascending within a column; no scratch. */
static void ssm__bell_build_tindex(const ssm_tensor *col_idx, ssm_tensor *t_offsets, ssm_tensor *t_slots,
                                   const ssm__bell_shape *s) {
    int64_t c, r, k;
    for (c = 0; c <= s->C; ++c) SSM__BELL_I1(t_offsets, c) = 0;
    for (r = 0; r < s->R; ++r)
        for (k = 0; k < s->K; ++k) ++SSM__BELL_I1(t_offsets, SSM__BELL_IDX(col_idx, r, k) + 1);
    for (c = 0; c < s->C; ++c) SSM__BELL_I1(t_offsets, c + 1) += SSM__BELL_I1(t_offsets, c);
    for (r = 0; r < s->R; ++r) /* t_offsets[c] serves as the cursor of column c ... */
        for (k = 0; k < s->K; ++k) {
            int32_t c2 = SSM__BELL_IDX(col_idx, r, k);
            SSM__BELL_I1(t_slots, SSM__BELL_I1(t_offsets, c2)) = (int32_t)(r * s->K + k);
            ++SSM__BELL_I1(t_offsets, c2);
        }
    for (c = s->C; c > 0; --c) SSM__BELL_I1(t_offsets, c) = SSM__BELL_I1(t_offsets, c - 1); /* ... undone */
    SSM__BELL_I1(t_offsets, 0) = 0;
}

/* Token chunks of the block-ELL GEMMs (rows of x / y per call; dW's contraction length). */
#ifndef SSM__BELL_CHUNK
#define SSM__BELL_CHUNK 128
#endif
#ifndef SSM__BELL_WCHUNK
#define SSM__BELL_WCHUNK 64
#endif
/* A view moved down by n0 rows / right by n0 columns. */
static ssm_matrix_batch ssm__bell_rows(ssm_matrix_batch m, int64_t n0, size_t es) {
    m.ptr = ssm__off(m.ptr, n0 * m.rs * (int64_t)es);
    return m;
}
static ssm_matrix_batch ssm__bell_cols(ssm_matrix_batch m, int64_t n0, size_t es) {
    m.ptr = ssm__off(m.ptr, n0 * m.cs * (int64_t)es);
    return m;
}

/* Views for the GEMMs: tile (r,k) of values (transposed: W^T), and the B-wide column block
   `blk` of a 2-D [N, *] tensor (transposed: its B x N transpose). */
static ssm_matrix_batch ssm__bell_tile(const ssm_tensor *v, int64_t r, int64_t k, int transpose) {
    ssm_matrix_batch m;
    m.ptr = ssm__off(v->data, (r * v->strides[0] + k * v->strides[1]) * (int64_t)ssm__esize(v->dtype));
    m.rs = transpose ? v->strides[3] : v->strides[2];
    m.cs = transpose ? v->strides[2] : v->strides[3];
    m.bs = 0;
    return m;
}
static ssm_matrix_batch ssm__bell_block(const ssm_tensor *t, int64_t blk, int64_t B, int transpose) {
    ssm_matrix_batch m;
    m.ptr = ssm__off(t->data, blk * B * t->strides[1] * (int64_t)ssm__esize(t->dtype));
    m.rs = transpose ? t->strides[1] : t->strides[0];
    m.cs = transpose ? t->strides[0] : t->strides[1];
    m.bs = 0;
    return m;
}

static void ssm__bell_zero_tile(ssm_tensor *v, int64_t r, int64_t k, int64_t B) {
    ssm__fill2d(v->dtype, 1, B, B, ssm__bell_tile(v, r, k, 0), 0.0);
}

SSMDEF ssm_result ssm_bell_validate(ssm_ctx *ctx, const ssm_tensor *values, const ssm_tensor *col_idx, int64_t C) {
    static const char *op = "ssm_bell_validate";
    ssm__bell_shape s;
    if (!ctx) return SSM_ERROR_NULL_ARGUMENT;
    ctx->message[0] = 0;
    if (!values) return ssm_ctx_error(ctx, SSM_ERROR_NULL_ARGUMENT, "%s: values is NULL", op);
    SSM__TRY(ssm__bell_cpu(ctx, op));
    SSM__TRY(ssm__bell_check_layer(ctx, op, values, col_idx, C, &s));
    return ssm__bell_check_index(ctx, op, col_idx, &s);
}

SSMDEF ssm_result ssm_bell_transpose_index(ssm_ctx *ctx, const ssm_tensor *col_idx, ssm_tensor *t_offsets,
                                           ssm_tensor *t_slots) {
    static const char *op = "ssm_bell_transpose_index";
    ssm__bell_shape s;
    int64_t ss;
    ssm__arg args[3];
    if (!ctx) return SSM_ERROR_NULL_ARGUMENT;
    ctx->message[0] = 0;
    SSM__TRY(ssm__bell_cpu(ctx, op));
    if (!col_idx || !t_offsets || !t_slots)
        return ssm_ctx_error(ctx, SSM_ERROR_NULL_ARGUMENT, "%s: col_idx, t_offsets and t_slots are required", op);
    SSM__TRY(ssm__check(ctx, op, "col_idx", col_idx, SSM_I32, 2, 2, NULL));
    SSM__TRY(ssm__check(ctx, op, "t_offsets", t_offsets, SSM_I32, 1, 1, NULL));
    s.R = col_idx->shape[0], s.K = col_idx->shape[1], s.C = t_offsets->shape[0] - 1, s.B = 1;
    if (s.R < 1 || s.C < 1 || s.K < 1 || s.K > s.C)
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_SHAPE, "%s: need R >= 1, C >= 1 and 1 <= K <= C (R=%lld K=%lld C=%lld)",
                             op, (long long)s.R, (long long)s.K, (long long)s.C);
    if (s.R * s.K > INT32_MAX || s.C > INT32_MAX) /* R*K <= numel(col_idx): no overflow */
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_SHAPE, "%s: R*K and C must fit in i32", op);
    ss = s.R * s.K;
    SSM__TRY(ssm__check(ctx, op, "t_slots", t_slots, SSM_I32, 1, 1, &ss));
    SSM__TRY(ssm__bell_check_index(ctx, op, col_idx, &s));
    ssm__arg_set(&args[0], "col_idx", col_idx, 0);
    ssm__arg_set(&args[1], "t_offsets", t_offsets, 1);
    ssm__arg_set(&args[2], "t_slots", t_slots, 1);
    SSM__TRY(ssm__check_aliasing(ctx, op, args, 3));
    ssm__bell_build_tindex(col_idx, t_offsets, t_slots, &s);
    return SSM_OK;
}

SSMDEF ssm_result ssm_bell_from_dense(ssm_ctx *ctx, const ssm_tensor *dense, const ssm_tensor *mask,
                                      ssm_tensor *values, ssm_tensor *col_idx) {
    static const char *op = "ssm_bell_from_dense";
    ssm__bell_shape s;
    int64_t shape[2], r, c, k;
    ssm__arg args[4];
    if (!ctx) return SSM_ERROR_NULL_ARGUMENT;
    ctx->message[0] = 0;
    if (!dense || !mask || !values || !col_idx)
        return ssm_ctx_error(ctx, SSM_ERROR_NULL_ARGUMENT, "%s: dense, mask, values and col_idx are required", op);
    SSM__TRY(ssm__bell_cpu(ctx, op));
    SSM__TRY(ssm__check(ctx, op, "mask", mask, SSM_I32, 2, 2, NULL));
    SSM__TRY(ssm__bell_check_layer(ctx, op, values, col_idx, mask->shape[1], &s));
    shape[0] = s.R, shape[1] = s.K;
    SSM__TRY(ssm__check(ctx, op, "col_idx", col_idx, SSM_I32, 2, 2, shape));
    shape[0] = s.R, shape[1] = s.C;
    SSM__TRY(ssm__check(ctx, op, "mask", mask, SSM_I32, 2, 2, shape));
    shape[0] = s.R * s.B, shape[1] = s.C * s.B;
    SSM__TRY(ssm__check(ctx, op, "dense", dense, values->dtype, 2, 2, shape));
    for (r = 0; r < s.R; ++r) {
        for (c = 0, k = 0; c < s.C; ++c) k += SSM__BELL_IDX(mask, r, c) != 0;
        if (k != s.K)
            return ssm_ctx_error(ctx, SSM_ERROR_INVALID_VALUE, "%s: mask row %lld has %lld active blocks, K = %lld",
                                 op, (long long)r, (long long)k, (long long)s.K);
    }
    ssm__arg_set(&args[0], "dense", dense, 0);
    ssm__arg_set(&args[1], "mask", mask, 0);
    ssm__arg_set(&args[2], "values", values, 1);
    ssm__arg_set(&args[3], "col_idx", col_idx, 1);
    SSM__TRY(ssm__check_aliasing(ctx, op, args, 4));
    for (r = 0; r < s.R; ++r)
        for (c = 0, k = 0; c < s.C; ++c) {
            ssm_matrix_batch src;
            if (!SSM__BELL_IDX(mask, r, c)) continue;
            SSM__BELL_IDX(col_idx, r, k) = (int32_t)c;
            src = ssm__bell_block(dense, c, s.B, 0);
            src.ptr = (char *)src.ptr + r * s.B * dense->strides[0] * (int64_t)ssm__esize(dense->dtype);
            ssm__copy2d(values->dtype, 1, s.B, s.B, src, ssm__bell_tile(values, r, k, 0), 0);
            ++k;
        }
    return SSM_OK;
}

SSMDEF ssm_result ssm_bell_to_dense(ssm_ctx *ctx, const ssm_tensor *values, const ssm_tensor *col_idx,
                                    ssm_tensor *dense) {
    static const char *op = "ssm_bell_to_dense";
    ssm__bell_shape s;
    int64_t shape[2], r, k, C = 0;
    ssm__arg args[3];
    ssm_matrix_batch all;
    if (!ctx) return SSM_ERROR_NULL_ARGUMENT;
    ctx->message[0] = 0;
    if (!values || !col_idx || !dense)
        return ssm_ctx_error(ctx, SSM_ERROR_NULL_ARGUMENT, "%s: values, col_idx and dense are required", op);
    SSM__TRY(ssm__bell_cpu(ctx, op));
    SSM__TRY(ssm__check(ctx, op, "dense", dense, values->dtype, 2, 2, NULL));
    SSM__TRY(ssm__bell_check_layer(ctx, op, values, col_idx, -1, &s));
    SSM__TRY(ssm__bell_blocks(ctx, op, "dense", dense->shape[1], s.B, &C));
    SSM__TRY(ssm__bell_check_layer(ctx, op, values, col_idx, C, &s));
    shape[0] = s.R * s.B, shape[1] = s.C * s.B;
    SSM__TRY(ssm__check(ctx, op, "dense", dense, values->dtype, 2, 2, shape));
    SSM__TRY(ssm__bell_check_index(ctx, op, col_idx, &s));
    ssm__arg_set(&args[0], "values", values, 0);
    ssm__arg_set(&args[1], "col_idx", col_idx, 0);
    ssm__arg_set(&args[2], "dense", dense, 1);
    SSM__TRY(ssm__check_aliasing(ctx, op, args, 3));
    all.ptr = dense->data, all.rs = dense->strides[0], all.cs = dense->strides[1], all.bs = 0;
    ssm__fill2d(dense->dtype, 1, shape[0], shape[1], all, 0.0);
    for (r = 0; r < s.R; ++r)
        for (k = 0; k < s.K; ++k) {
            ssm_matrix_batch dst = ssm__bell_block(dense, SSM__BELL_IDX(col_idx, r, k), s.B, 0);
            dst.ptr = (char *)dst.ptr + r * s.B * dense->strides[0] * (int64_t)ssm__esize(dense->dtype);
            ssm__copy2d(values->dtype, 1, s.B, s.B, ssm__bell_tile(values, r, k, 0), dst, 0);
        }
    return SSM_OK;
}

static void ssm__bell_plan_of(ssm_bell_plan *p, ssm_dtype dt, int64_t N, const ssm__bell_shape *s, int bias, int dx,
                              int dvalues, int dbias) {
    memset(p, 0, sizeof *p);
    p->dtype = dt, p->N = N, p->R = s->R, p->K = s->K, p->B = s->B, p->C = s->C;
    p->has_bias = bias, p->want_dx = dx, p->want_dvalues = dvalues, p->want_dbias = dbias;
}

/* x [N, C*B] against a layer: fills s and N. */
static ssm_result ssm__bell_check_x(ssm_ctx *ctx, const char *op, const ssm_tensor *x, const ssm_tensor *values,
                                    const ssm_tensor *col_idx, ssm__bell_shape *s, int64_t *N) {
    int64_t C = 0;
    if (!values) return ssm_ctx_error(ctx, SSM_ERROR_NULL_ARGUMENT, "%s: values is NULL", op);
    SSM__TRY(ssm__bell_check_layer(ctx, op, values, col_idx, -1, s)); /* B, before C is known */
    SSM__TRY(ssm__check(ctx, op, "x", x, values->dtype, 2, 2, NULL));
    SSM__TRY(ssm__bell_blocks(ctx, op, "x", x->shape[1], s->B, &C));
    SSM__TRY(ssm__bell_check_layer(ctx, op, values, col_idx, C, s));
    *N = x->shape[0];
    if (ctx->backend->device_type != SSM_DEVICE_CPU) { /* device memory: the shape only */
        int64_t shape[2];
        shape[0] = s->R, shape[1] = s->K;
        return ssm__check(ctx, op, "col_idx", col_idx, SSM_I32, 2, 2, shape);
    }
    return ssm__bell_check_index(ctx, op, col_idx, s);
}

SSMDEF ssm_result ssm_bell_forward(ssm_ctx *ctx, const ssm_tensor *x, const ssm_tensor *values,
                                   const ssm_tensor *col_idx, const ssm_tensor *bias, ssm_tensor *y) {
    static const char *op = "ssm_bell_forward";
    ssm__bell_shape s;
    int64_t N, shape[2], nb, r, k, n, o, n0;
    ssm__arg args[5];
    size_t es;
    if (!ctx) return SSM_ERROR_NULL_ARGUMENT;
    ctx->message[0] = 0;
    if (!x || !values || !col_idx || !y)
        return ssm_ctx_error(ctx, SSM_ERROR_NULL_ARGUMENT, "%s: x, values, col_idx and y are required", op);
    if (!ctx->backend->bell_forward) SSM__TRY(ssm__bell_cpu(ctx, op));
    SSM__TRY(ssm__bell_check_x(ctx, op, x, values, col_idx, &s, &N));
    es = ssm__esize(values->dtype);
    shape[0] = N, shape[1] = s.R * s.B, nb = s.R * s.B;
    SSM__TRY(ssm__check(ctx, op, "y", y, values->dtype, 2, 2, shape));
    if (bias) SSM__TRY(ssm__check(ctx, op, "bias", bias, values->dtype, 1, 1, &nb));
    ssm__arg_set(&args[0], "x", x, 0);
    ssm__arg_set(&args[1], "values", values, 0);
    ssm__arg_set(&args[2], "col_idx", col_idx, 0);
    ssm__arg_set(&args[3], "bias", bias, 0);
    ssm__arg_set(&args[4], "y", y, 1);
    SSM__TRY(ssm__check_aliasing(ctx, op, args, 5));
    if (N == 0) return SSM_OK;
    if (ctx->backend->bell_forward) {
        ssm_bell_plan p;
        ssm__bell_plan_of(&p, values->dtype, N, &s, bias != NULL, 0, 0, 0);
        SSM__TRY(ssm__supported(ctx, op, SSM_OP_BELL_FORWARD, &p));
        return ctx->backend->bell_forward(ctx, &p, x, values, col_idx, bias, y);
    }
    /* y_r = sum_k x_{c(r,k)} W_{r,k}^T: one n x B x B GEMM per active tile and chunk of n
       tokens. Chunking keeps a chunk's x rows in L2 and each y_r block in L1 while its K tiles
       accumulate (unchunked, y streams through memory K times: 7x slower on BLIS at N=8192). */
    for (n0 = 0; n0 < N; n0 += SSM__BELL_CHUNK) {
        int64_t nn = SSM__MIN(SSM__BELL_CHUNK, N - n0);
        for (r = 0; r < s.R; ++r)
            for (k = 0; k < s.K; ++k)
                SSM__TRY(ssm_ctx_gemm(ctx, values->dtype, 1, nn, s.B, s.B, 1.0,
                                      ssm__bell_rows(ssm__bell_block(x, SSM__BELL_IDX(col_idx, r, k), s.B, 0), n0, es),
                                      ssm__bell_tile(values, r, k, 1), k ? 1.0 : 0.0,
                                      ssm__bell_rows(ssm__bell_block(y, r, s.B, 0), n0, es)));
    }
    if (!bias) return SSM_OK;
    for (n = 0; n < N; ++n)
        for (o = 0; o < nb; ++o) {
            char *p = (char *)y->data + (n * y->strides[0] + o * y->strides[1]) * (int64_t)es;
            SSM__STORE(y->dtype, p, SSM__LOAD(y->dtype, p) +
                                    SSM__LOAD(y->dtype, (char *)bias->data + o * bias->strides[0] * (int64_t)es));
        }
    return SSM_OK;
}

SSMDEF ssm_result ssm_bell_backward(ssm_ctx *ctx, const ssm_tensor *x, const ssm_tensor *values,
                                    const ssm_tensor *col_idx, const ssm_tensor *t_offsets,
                                    const ssm_tensor *t_slots, const ssm_tensor *dy, ssm_tensor *dx,
                                    ssm_tensor *dvalues, ssm_tensor *dbias) {
    static const char *op = "ssm_bell_backward";
    ssm__bell_shape s;
    int64_t N, shape[4], nb, r, k, c, n, o;
    ssm__arg args[9];
    size_t es;
    if (!ctx) return SSM_ERROR_NULL_ARGUMENT;
    ctx->message[0] = 0;
    if (!x || !values || !col_idx || !dy)
        return ssm_ctx_error(ctx, SSM_ERROR_NULL_ARGUMENT, "%s: x, values, col_idx and dy are required", op);
    if (!ctx->backend->bell_backward) SSM__TRY(ssm__bell_cpu(ctx, op));
    SSM__TRY(ssm__bell_check_x(ctx, op, x, values, col_idx, &s, &N));
    shape[0] = N, shape[1] = s.R * s.B, nb = s.R * s.B;
    SSM__TRY(ssm__check(ctx, op, "dy", dy, values->dtype, 2, 2, shape));
    if (dx) {
        shape[1] = s.C * s.B;
        SSM__TRY(ssm__check(ctx, op, "dx", dx, values->dtype, 2, 2, shape));
        if (!t_offsets || !t_slots)
            return ssm_ctx_error(ctx, SSM_ERROR_NULL_ARGUMENT, "%s: dx needs the transposed index (t_offsets, t_slots)", op);
        if (ctx->backend->device_type == SSM_DEVICE_CPU) {
            SSM__TRY(ssm__bell_check_tindex(ctx, op, col_idx, t_offsets, t_slots, &s));
        } else { /* device memory: the shapes only */
            int64_t so = s.C + 1, ss = s.R * s.K;
            SSM__TRY(ssm__check(ctx, op, "t_offsets", t_offsets, SSM_I32, 1, 1, &so));
            SSM__TRY(ssm__check(ctx, op, "t_slots", t_slots, SSM_I32, 1, 1, &ss));
        }
    }
    if (dvalues) {
        shape[0] = s.R, shape[1] = s.K, shape[2] = s.B, shape[3] = s.B;
        SSM__TRY(ssm__check(ctx, op, "dvalues", dvalues, values->dtype, 4, 4, shape));
    }
    if (dbias) SSM__TRY(ssm__check(ctx, op, "dbias", dbias, values->dtype, 1, 1, &nb));
    ssm__arg_set(&args[0], "x", x, 0);
    ssm__arg_set(&args[1], "values", values, 0);
    ssm__arg_set(&args[2], "col_idx", col_idx, 0);
    ssm__arg_set(&args[3], "t_offsets", dx ? t_offsets : NULL, 0);
    ssm__arg_set(&args[4], "t_slots", dx ? t_slots : NULL, 0);
    ssm__arg_set(&args[5], "dy", dy, 0);
    ssm__arg_set(&args[6], "dx", dx, 1);
    ssm__arg_set(&args[7], "dvalues", dvalues, 1);
    ssm__arg_set(&args[8], "dbias", dbias, 1);
    SSM__TRY(ssm__check_aliasing(ctx, op, args, 9));
    if (ctx->backend->bell_backward) {
        ssm_bell_plan p;
        ssm__bell_plan_of(&p, values->dtype, N, &s, 0, dx != NULL, dvalues != NULL, dbias != NULL);
        SSM__TRY(ssm__supported(ctx, op, SSM_OP_BELL_BACKWARD, &p));
        return ctx->backend->bell_backward(ctx, &p, x, values, col_idx, t_offsets, t_slots, dy, dx, dvalues, dbias);
    }
    es = ssm__esize(values->dtype);
    /* Both by chunks of tokens (as the forward): dW_{r,k} = sum over chunks of dy_r^T x_c
       (B x B x n, accumulated in chunk order), dx_c = sum over the slots using c, ascending
       (a fixed order, no atomics). */
    if (dvalues) {
        int64_t n0;
        if (N == 0) /* no tokens: every active tile's gradient is zero */
            for (r = 0; r < s.R; ++r)
                for (k = 0; k < s.K; ++k) ssm__bell_zero_tile(dvalues, r, k, s.B);
        for (n0 = 0; n0 < N; n0 += SSM__BELL_WCHUNK) {
            int64_t nn = SSM__MIN(SSM__BELL_WCHUNK, N - n0);
            for (r = 0; r < s.R; ++r)
                for (k = 0; k < s.K; ++k)
                    SSM__TRY(ssm_ctx_gemm(ctx, values->dtype, 1, s.B, s.B, nn, 1.0,
                                          ssm__bell_cols(ssm__bell_block(dy, r, s.B, 1), n0, es),
                                          ssm__bell_rows(ssm__bell_block(x, SSM__BELL_IDX(col_idx, r, k), s.B, 0), n0, es),
                                          n0 ? 1.0 : 0.0, ssm__bell_tile(dvalues, r, k, 0)));
        }
    }
    if (dx && N > 0) {
        int64_t n0;
        for (n0 = 0; n0 < N; n0 += SSM__BELL_CHUNK) {
            int64_t nn = SSM__MIN(SSM__BELL_CHUNK, N - n0);
            for (c = 0; c < s.C; ++c) {
                int32_t lo = SSM__BELL_I1(t_offsets, c), hi = SSM__BELL_I1(t_offsets, c + 1), i;
                ssm_matrix_batch dxc = ssm__bell_rows(ssm__bell_block(dx, c, s.B, 0), n0, es);
                if (lo == hi) ssm__fill2d(dx->dtype, 1, nn, s.B, dxc, 0.0);
                for (i = lo; i < hi; ++i) {
                    int32_t slot = SSM__BELL_I1(t_slots, i);
                    SSM__TRY(ssm_ctx_gemm(ctx, values->dtype, 1, nn, s.B, s.B, 1.0,
                                          ssm__bell_rows(ssm__bell_block(dy, slot / s.K, s.B, 0), n0, es),
                                          ssm__bell_tile(values, slot / s.K, slot % s.K, 0), i > lo ? 1.0 : 0.0, dxc));
                }
            }
        }
    }
    if (dbias)
        for (o = 0; o < nb; ++o) {
            double acc = 0.0;
            for (n = 0; n < N; ++n)
                acc += SSM__LOAD(dy->dtype, (char *)dy->data + (n * dy->strides[0] + o * dy->strides[1]) * (int64_t)es);
            SSM__STORE(dbias->dtype, (char *)dbias->data + o * dbias->strides[0] * (int64_t)es, acc);
        }
    return SSM_OK;
}

/* FNV-1a over 64-bit words, then a splitmix64 finalizer. */
static uint64_t ssm__bell_mix(uint64_t z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static uint64_t ssm__bell_fnv(uint64_t h, uint64_t v) {
    int i;
    for (i = 0; i < 8; ++i) h = (h ^ ((v >> (8 * i)) & 0xFFu)) * 0x100000001B3ull;
    return h;
}
static uint64_t ssm__bell_hash_index(const ssm_tensor *col_idx, const ssm__bell_shape *s) {
    uint64_t h = 0xCBF29CE484222325ull;
    int64_t r, k;
    h = ssm__bell_fnv(h, (uint64_t)s->R);
    h = ssm__bell_fnv(h, (uint64_t)s->K);
    if (s->K > 0) /* [R, 0] holds nothing to hash, whatever R */
        for (r = 0; r < s->R; ++r)
        for (k = 0; k < s->K; ++k) h = ssm__bell_fnv(h, (uint64_t)(uint32_t)SSM__BELL_IDX(col_idx, r, k));
    return ssm__bell_mix(h);
}

SSMDEF ssm_result ssm_bell_checksum(ssm_ctx *ctx, const ssm_tensor *col_idx, uint64_t *checksum) {
    static const char *op = "ssm_bell_checksum";
    ssm__bell_shape s;
    if (!ctx) return SSM_ERROR_NULL_ARGUMENT;
    ctx->message[0] = 0;
    if (!checksum) return ssm_ctx_error(ctx, SSM_ERROR_NULL_ARGUMENT, "%s: checksum is NULL", op);
    SSM__TRY(ssm__bell_cpu(ctx, op));
    SSM__TRY(ssm__check(ctx, op, "col_idx", col_idx, SSM_I32, 2, 2, NULL));
    s.R = col_idx->shape[0], s.K = col_idx->shape[1], s.B = 1, s.C = 0;
    /* the layer's limit: a broadcast [2^62, 1] view is a valid tensor but no index */
    if (s.K > 0 && (uint64_t)ssm__mul64(s.R, s.K) > INT32_MAX)
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_SHAPE, "%s: R*K = %lld*%lld must fit in i32", op, (long long)s.R,
                             (long long)s.K);
    *checksum = ssm__bell_hash_index(col_idx, &s);
    return SSM_OK;
}

SSMDEF uint64_t ssm_bell_checksum_rows(const int32_t *col, int64_t R, int64_t K) {
    ssm_tensor t;
    ssm__bell_shape s;
    memset(&t, 0, sizeof t);
    t.data = (void *)(uintptr_t)col, t.strides[0] = K, t.strides[1] = 1;
    s.R = R, s.K = K, s.B = 1, s.C = 0;
    return ssm__bell_hash_index(&t, &s);
}

/* ---- dynamic topology -------------------------------------------------------------------- */

/* Counter-based uniform in [0,1): a pure function of its key, so every rank and every rerun
   draws the same number for the same (seed, step, layer, row, draw). */
static double ssm__bell_uniform(const ssm_bell_topology_config *cfg, int64_t step, int64_t row, int64_t draw) {
    uint64_t h = ssm__bell_mix(cfg->seed);
    h = ssm__bell_mix(h ^ (uint64_t)step);
    h = ssm__bell_mix(h ^ cfg->layer_id);
    h = ssm__bell_mix(h ^ (uint64_t)row);
    h = ssm__bell_mix(h ^ (uint64_t)draw);
    return (double)(h >> 11) * (1.0 / 9007199254740992.0);
}

SSMDEF ssm_bell_topology_config ssm_bell_topology_config_init(void) {
    ssm_bell_topology_config c;
    memset(&c, 0, sizeof c);
    c.period = 100;
    c.prune_frac = 0.1;
    c.swap_ratio = 1.5;
    c.epsilon = 0.05;
    c.keep_alpha = 0.95;
    c.grow_alpha = 0.99;
    c.drop_score = SSM_BELL_DROP_GRAD_EMA;
    return c;
}

static ssm_result ssm__bell_check_config(ssm_ctx *ctx, const char *op, const ssm_bell_topology_config *c) {
    if (c->period < 1 || !(c->prune_frac >= 0.0 && c->prune_frac <= 1.0) || !(c->swap_ratio >= 0.0) ||
        !(c->epsilon >= 0.0 && c->epsilon <= 1.0) || !(c->keep_alpha >= 0.0 && c->keep_alpha < 1.0) ||
        !(c->grow_alpha >= 0.0 && c->grow_alpha < 1.0) || c->stop_step < 0 ||
        (c->drop_score != SSM_BELL_DROP_GRAD_EMA && c->drop_score != SSM_BELL_DROP_MAGNITUDE))
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_VALUE,
                             "%s: config out of range (period >= 1; prune_frac, epsilon in [0,1]; alphas in [0,1); "
                             "swap_ratio, stop_step >= 0; a known drop_score)", op);
    if (c->cosine_decay && c->stop_step == 0)
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_VALUE, "%s: cosine_decay needs stop_step > 0", op);
    return SSM_OK;
}

SSMDEF ssm_result ssm_bell_topology_create(ssm_ctx *ctx, const ssm_bell_topology_config *config, int64_t R,
                                           int64_t C, int64_t K, ssm_bell_topology **out) {
    static const char *op = "ssm_bell_topology_create";
    ssm_bell_topology *t;
    size_t n;
    if (!ctx) return SSM_ERROR_NULL_ARGUMENT;
    ctx->message[0] = 0;
    if (!config || !out) return ssm_ctx_error(ctx, SSM_ERROR_NULL_ARGUMENT, "%s: config and out are required", op);
    *out = NULL;
    SSM__TRY(ssm__bell_check_config(ctx, op, config));
    if (ctx->backend->device_type != SSM_DEVICE_CPU && !ctx->backend->bell_topology_create)
        return ssm_ctx_error(ctx, SSM_ERROR_UNSUPPORTED, "%s: the %s backend keeps no topology scores", op,
                             ctx->backend->name);
    if (R < 1 || C < 1 || K < 1 || K > C)
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_SHAPE, "%s: need R >= 1, C >= 1 and 1 <= K <= C", op);
    if ((uint64_t)ssm__mul64(R, K) > INT32_MAX || C > INT32_MAX) /* the layer's index is i32 */
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_SHAPE, "%s: R*K and C must fit in i32 (R=%lld K=%lld C=%lld)", op,
                             (long long)R, (long long)K, (long long)C);
    n = ssm__szadd(ssm__szadd(sizeof *t, ssm__szmul(sizeof(double), ssm__mul64(R, K))),
                   ssm__szmul(sizeof(double), ssm__mul64(R, C)));
    if (n == SIZE_MAX)
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_SHAPE, "%s: R*C = %lld*%lld scores do not fit in memory", op,
                             (long long)R, (long long)C);
    n = (n - sizeof *t) / sizeof(double);
    if (ctx->backend->device_type != SSM_DEVICE_CPU) n = 0; /* the scores live on the device */
    t = (ssm_bell_topology *)ssm__alloc(&ctx->allocator, sizeof *t + sizeof(double) * n);
    if (!t) return ssm_ctx_error(ctx, SSM_ERROR_OUT_OF_MEMORY, "%s: cannot allocate the score buffers", op);
    memset(t, 0, sizeof *t + sizeof(double) * n);
    t->config = *config;
    t->R = R, t->C = C, t->K = K;
    t->allocator = ctx->allocator;
    t->device_type = ctx->backend->device_type;
    if (t->device_type != SSM_DEVICE_CPU) {
        ssm_result r = ctx->backend->bell_topology_create(ctx, t);
        if (r != SSM_OK) {
            ssm__free(&t->allocator, t);
            return r;
        }
    } else {
        t->keep_score = (double *)(void *)(t + 1);
        t->grow_score = t->keep_score + R * K;
    }
    *out = t;
    return SSM_OK;
}

SSMDEF void ssm_bell_topology_destroy(ssm_bell_topology *topo) {
    ssm_allocator a;
    if (!topo) return;
    if (topo->device_release) topo->device_release(topo->device_state);
    a = topo->allocator;
    ssm__free(&a, topo);
}

/* Scratch: observe needs R + C doubles; step needs per row the selection's scratch
   (C + 2K int64), K drop scores (double), the row's columns, permutation and fresh flags
   (3K i32, padded to 8-byte units) and K tiles (f64-sized) for re-sorting the row. */
static size_t ssm__bell_topo_ws(const ssm_bell_topology *t, int64_t B) {
    size_t obs = ssm__szadd(ssm__szmul(sizeof(double), t->R), ssm__szmul(sizeof(double), t->C));
    int64_t bb = ssm__mul64(B, B);
    size_t step = ssm__szadd(ssm__szadd(ssm__szmul(sizeof(int64_t), t->C), ssm__szmul(5 * sizeof(int64_t), t->K)),
                             ssm__szmul(ssm__szmul(sizeof(double), t->K), bb < 0 || bb == INT64_MAX ? -1 : bb));
    if (t->device_type != SSM_DEVICE_CPU) return 0; /* allocated by create */
    return obs > step ? obs : step;
}

SSMDEF ssm_result ssm_bell_topology_workspace_size(const ssm_bell_topology *topo, int64_t B, ssm_dtype dtype,
                                                   size_t *bytes) {
    /* tiles are staged in f64-sized slots; the dtype must still be one the ops take */
    if (!topo || !bytes) return SSM_ERROR_NULL_ARGUMENT;
    if (!ssm_dtype_equal(dtype, SSM_F32) && !ssm_dtype_equal(dtype, SSM_F64) &&
        (topo->device_type == SSM_DEVICE_CPU || (!ssm_dtype_equal(dtype, SSM_F16) && !ssm_dtype_equal(dtype, SSM_BF16))))
        return SSM_ERROR_INVALID_DTYPE;
    if (B < 1 || ssm__bell_topo_ws(topo, B) == SIZE_MAX) return SSM_ERROR_INVALID_SHAPE;
    *bytes = ssm__bell_topo_ws(topo, B);
    return SSM_OK;
}

static ssm_result ssm__bell_check_topo(ssm_ctx *ctx, const char *op, const ssm_bell_topology *topo,
                                       const ssm__bell_shape *s) {
    if (topo->R != s->R || topo->C != s->C || topo->K != s->K)
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_SHAPE, "%s: the topology state is for R=%lld C=%lld K=%lld, the layer is R=%lld C=%lld K=%lld",
                             op, (long long)topo->R, (long long)topo->C, (long long)topo->K, (long long)s->R,
                             (long long)s->C, (long long)s->K);
    return ssm__bell_check_config(ctx, op, &topo->config);
}

/* ||t[:, blk*B .. blk*B+B)||_F of a 2-D [N, *] tensor, in the documented order (lanes of
   tokens, then the lanes in order): a device sums the lanes in parallel to the same bits. */
static double ssm__bell_block_norm(const ssm_tensor *t, int64_t N, int64_t blk, int64_t B) {
    size_t es = ssm__esize(t->dtype);
    double acc = 0.0;
    int64_t n, j, l;
    for (l = 0; l < SSM_BELL_OBS_LANES && l < N; ++l) {
        double lane = 0.0;
        for (n = l; n < N; n += SSM_BELL_OBS_LANES) {
            double tok = 0.0;
            for (j = blk * B; j < blk * B + B; ++j) {
                double v = SSM__LOAD(t->dtype, (char *)t->data + (n * t->strides[0] + j * t->strides[1]) * (int64_t)es);
                tok += v * v;
            }
            lane += tok;
        }
        acc += lane;
    }
    return sqrt(acc);
}
/* ||tile||_F: each row's squares, then the rows (the order a device reproduces). */
static double ssm__bell_tile_norm(const ssm_tensor *v, int64_t r, int64_t k, int64_t B) {
    size_t es = ssm__esize(v->dtype);
    double acc = 0.0;
    int64_t i, j;
    for (i = 0; i < B; ++i) {
        double row = 0.0;
        for (j = 0; j < B; ++j) {
            double w = SSM__LOAD(v->dtype, (char *)v->data + (r * v->strides[0] + k * v->strides[1] + i * v->strides[2] +
                                                             j * v->strides[3]) * (int64_t)es);
            row += w * w;
        }
        acc += row;
    }
    return sqrt(acc);
}

/* Host scores need a CPU context; device scores a context of their device type whose
   backend has the topology slots. */
static ssm_result ssm__bell_topo_where(ssm_ctx *ctx, const char *op, const ssm_bell_topology *topo) {
    if (topo->device_type == SSM_DEVICE_CPU) return ssm__bell_cpu(ctx, op);
    if (ctx->backend->device_type != topo->device_type || !ctx->backend->bell_topology_observe ||
        !ctx->backend->bell_topology_step)
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_DEVICE, "%s: the topology's scores live on device type %d, the context's backend (%s) cannot reach them",
                             op, (int)topo->device_type, ctx->backend->name);
    return SSM_OK;
}

SSMDEF ssm_result ssm_bell_topology_observe(ssm_ctx *ctx, ssm_bell_topology *topo, const ssm_tensor *x,
                                            const ssm_tensor *dy, const ssm_tensor *dvalues) {
    static const char *op = "ssm_bell_topology_observe";
    ssm__bell_shape s;
    int64_t N, C = 0, shape[2], r, c, k;
    double *act, *err, ak, ag;
    if (!ctx) return SSM_ERROR_NULL_ARGUMENT;
    ctx->message[0] = 0;
    if (!topo || !x || !dy || !dvalues)
        return ssm_ctx_error(ctx, SSM_ERROR_NULL_ARGUMENT, "%s: topo, x, dy and dvalues are required", op);
    SSM__TRY(ssm__bell_topo_where(ctx, op, topo));
    SSM__TRY(ssm__check_float_dtype(ctx, op, dvalues));
    SSM__TRY(ssm__check(ctx, op, "dvalues", dvalues, dvalues->dtype, 4, 4, NULL));
    s.R = dvalues->shape[0], s.K = dvalues->shape[1], s.B = dvalues->shape[2];
    if (s.B < 1 || dvalues->shape[3] != s.B)
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_SHAPE, "%s: dvalues must be [R,K,B,B] with B >= 1", op);
    SSM__TRY(ssm__check(ctx, op, "x", x, dvalues->dtype, 2, 2, NULL));
    SSM__TRY(ssm__bell_blocks(ctx, op, "x", x->shape[1], s.B, &C));
    s.C = C, N = x->shape[0];
    SSM__TRY(ssm__bell_check_topo(ctx, op, topo, &s));
    shape[0] = N, shape[1] = s.R * s.B;
    SSM__TRY(ssm__check(ctx, op, "dy", dy, dvalues->dtype, 2, 2, shape));
    if (topo->device_type != SSM_DEVICE_CPU) {
        ssm_bell_plan p;
        ssm__bell_plan_of(&p, dvalues->dtype, N, &s, 0, 0, 0, 0);
        SSM__TRY(ssm__supported(ctx, op, SSM_OP_BELL_TOPOLOGY, &p));
        SSM__TRY(ctx->backend->bell_topology_observe(ctx, &p, topo, x, dy, dvalues));
        ++topo->observations;
        return SSM_OK;
    }
    SSM__TRY(ssm_ctx_workspace(ctx, ssm__bell_topo_ws(topo, s.B), (void **)&act));
    err = act + s.C;
    for (c = 0; c < s.C; ++c) act[c] = ssm__bell_block_norm(x, N, c, s.B);
    for (r = 0; r < s.R; ++r) err[r] = ssm__bell_block_norm(dy, N, r, s.B);
    ak = topo->config.keep_alpha, ag = topo->config.grow_alpha;
    for (r = 0; r < s.R; ++r) {
        for (k = 0; k < s.K; ++k)
            topo->keep_score[r * s.K + k] = ak * topo->keep_score[r * s.K + k] +
                                            (1.0 - ak) * ssm__bell_tile_norm(dvalues, r, k, s.B);
        for (c = 0; c < s.C; ++c)
            topo->grow_score[r * s.C + c] = ag * topo->grow_score[r * s.C + c] + (1.0 - ag) * act[c] * err[r];
    }
    ++topo->observations;
    return SSM_OK;
}

/* Applies the permutation perm (new slot j takes old slot perm[j]) to row r of a [R,K,B,B]
   tensor, staging the row's tiles in buf; old slots flagged fresh start at zero. */
static void ssm__bell_permute_row(ssm_tensor *v, int64_t r, const int32_t *perm, const int32_t *fresh, int64_t K,
                                  int64_t B, char *buf) {
    ssm_dtype dt = v->dtype;
    int64_t k;
    ssm_matrix_batch stage;
    stage.rs = B, stage.cs = 1, stage.bs = 0;
    for (k = 0; k < K; ++k) {
        stage.ptr = buf + (size_t)(k * B * B) * ssm__esize(dt);
        ssm__copy2d(dt, 1, B, B, ssm__bell_tile(v, r, k, 0), stage, 0);
    }
    for (k = 0; k < K; ++k) {
        if (fresh[perm[k]]) {
            ssm__bell_zero_tile(v, r, k, B);
            continue;
        }
        stage.ptr = buf + (size_t)(perm[k] * B * B) * ssm__esize(dt);
        ssm__copy2d(dt, 1, B, B, stage, ssm__bell_tile(v, r, k, 0), 0);
    }
}

SSMDEF int ssm_bell_topology_select_row(const ssm_bell_topology_config *cfg, int64_t global_step, int64_t row,
                                        int64_t nd, int64_t K, int64_t C, int32_t *col, double *keep,
                                        const double *grow, const double *drop, int32_t *perm, int32_t *fresh,
                                        void *scratch, ssm_bell_topology_report *rep) {
    int64_t *used = (int64_t *)scratch, *cand = used + C, i, j, k;
    double *dscore = (double *)(void *)(cand + K); /* the drop scores, then the keep staging */
    int changed = 0;
    for (j = 0; j < C; ++j) used[j] = 0;
    for (k = 0; k < K; ++k) {
        used[col[k]] = 1;
        dscore[k] = drop ? drop[k] : keep[k];
        perm[k] = 0; /* chosen-as-drop-candidate flags */
        fresh[k] = 0;
    }
    for (i = 0; i < nd; ++i) { /* the nd lowest drop scores, lowest first; ties keep the lower slot first */
        int64_t best = -1;
        for (k = 0; k < K; ++k)
            if (!perm[k] && (best < 0 || dscore[k] < dscore[best])) best = k;
        perm[best] = 1;
        cand[i] = best;
    }
    for (i = 0; i < nd; ++i) {
        int64_t slot = cand[i], cnew = -1;
        if (ssm__bell_uniform(cfg, global_step, row, 2 * i) < cfg->epsilon) {
            /* explore: a uniformly random column unused in this row */
            int64_t nfree = 0, pick;
            for (j = 0; j < C; ++j) nfree += !used[j];
            pick = (int64_t)(ssm__bell_uniform(cfg, global_step, row, 2 * i + 1) * (double)nfree);
            for (j = 0; j < C; ++j)
                if (!used[j] && pick-- == 0) { cnew = j; break; }
            ++rep->explored;
        } else {
            for (j = 0; j < C; ++j)
                if (!used[j] && (cnew < 0 || grow[j] > grow[cnew])) cnew = j;
            if (cnew < 0 || !(grow[cnew] > 0.0) || grow[cnew] < cfg->swap_ratio * keep[slot]) {
                ++rep->rejected;
                continue;
            }
        }
        used[cnew] = 1; /* the dropped column stays marked: no regrowth in the same update */
        col[slot] = (int32_t)cnew;
        fresh[slot] = 1;
        keep[slot] = grow[cnew];
        ++rep->grown;
        changed = 1;
    }
    for (k = 0; k < K; ++k) perm[k] = (int32_t)k;
    if (!changed) return 0;
    ++rep->rows_changed;
    /* re-sort the row by column (insertion sort of a permutation); keep scores move along */
    for (k = 1; k < K; ++k)
        for (j = k; j > 0 && col[perm[j - 1]] > col[perm[j]]; --j) {
            int32_t tmp = perm[j];
            perm[j] = perm[j - 1];
            perm[j - 1] = tmp;
        }
    for (k = 0; k < K; ++k) dscore[k] = keep[perm[k]];
    for (k = 0; k < K; ++k) keep[k] = dscore[k];
    for (k = 0; k < K; ++k) used[k] = col[perm[k]]; /* used: free again (C >= K) */
    for (k = 0; k < K; ++k) col[k] = (int32_t)used[k];
    return 1;
}

SSMDEF ssm_result ssm_bell_topology_step(ssm_ctx *ctx, ssm_bell_topology *topo, int64_t global_step,
                                         ssm_tensor *values, ssm_tensor *col_idx, ssm_tensor *t_offsets,
                                         ssm_tensor *t_slots, ssm_tensor *const *opt_states, int n_opt,
                                         ssm_bell_topology_report *report) {
    static const char *op = "ssm_bell_topology_step";
    enum { MAX_OPT = 8 };
    ssm__bell_shape s;
    ssm_bell_topology_report rep;
    const ssm_bell_topology_config *cfg;
    ssm__arg args[4 + MAX_OPT];
    ssm_bell_plan plan;
    int64_t shape[4], so, ss, r, k, nd;
    int32_t *colr, *perm, *fresh;
    double *drop, frac;
    void *scratch = NULL;
    char *buf;
    int o, device;
    if (!ctx) return SSM_ERROR_NULL_ARGUMENT;
    ctx->message[0] = 0;
    if (!topo || !values || !col_idx || !t_offsets || !t_slots)
        return ssm_ctx_error(ctx, SSM_ERROR_NULL_ARGUMENT, "%s: topo, values, col_idx, t_offsets and t_slots are required", op);
    if (n_opt < 0 || n_opt > MAX_OPT || (n_opt > 0 && !opt_states))
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_VALUE, "%s: n_opt must be in [0, %d] with opt_states set", op, MAX_OPT);
    if (global_step < 0) return ssm_ctx_error(ctx, SSM_ERROR_INVALID_VALUE, "%s: global_step < 0", op);
    SSM__TRY(ssm__bell_topo_where(ctx, op, topo));
    device = topo->device_type != SSM_DEVICE_CPU;
    SSM__TRY(ssm__bell_check_layer(ctx, op, values, col_idx, topo->C, &s));
    SSM__TRY(ssm__bell_check_topo(ctx, op, topo, &s));
    if (device) { /* the index is not read on the host here: the backend checks its copy */
        shape[0] = s.R, shape[1] = s.K;
        SSM__TRY(ssm__check(ctx, op, "col_idx", col_idx, SSM_I32, 2, 2, shape));
    } else {
        SSM__TRY(ssm__bell_check_index(ctx, op, col_idx, &s));
    }
    so = s.C + 1, ss = s.R * s.K;
    SSM__TRY(ssm__check(ctx, op, "t_offsets", t_offsets, SSM_I32, 1, 1, &so));
    SSM__TRY(ssm__check(ctx, op, "t_slots", t_slots, SSM_I32, 1, 1, &ss));
    shape[0] = s.R, shape[1] = s.K, shape[2] = s.B, shape[3] = s.B;
    ssm__arg_set(&args[0], "values", values, 1);
    ssm__arg_set(&args[1], "col_idx", col_idx, 1);
    ssm__arg_set(&args[2], "t_offsets", t_offsets, 1);
    ssm__arg_set(&args[3], "t_slots", t_slots, 1);
    for (o = 0; o < n_opt; ++o) {
        SSM__TRY(ssm__check_float_dtype(ctx, op, opt_states[o]));
        SSM__TRY(ssm__check(ctx, op, "opt_states[i]", opt_states[o], opt_states[o]->dtype, 4, 4, shape));
        ssm__arg_set(&args[4 + o], "opt_states[i]", opt_states[o], 1);
    }
    SSM__TRY(ssm__check_aliasing(ctx, op, args, 4 + n_opt));
    ssm__bell_plan_of(&plan, values->dtype, 0, &s, 0, 0, 0, 0);
    if (device) SSM__TRY(ssm__supported(ctx, op, SSM_OP_BELL_TOPOLOGY, &plan));
    cfg = &topo->config;
    memset(&rep, 0, sizeof rep);
    frac = cfg->prune_frac;
    if (cfg->cosine_decay) frac *= 0.5 * (1.0 + cos(3.14159265358979323846 * (double)global_step / (double)cfg->stop_step));
    rep.prune_frac = frac;
    if (global_step == 0 || global_step % cfg->period != 0 || (cfg->stop_step > 0 && global_step >= cfg->stop_step)) {
        if (device) {
            if (report)
                SSM__TRY(ctx->backend->bell_topology_step(ctx, &plan, topo, global_step, 0, 0, values, col_idx, t_offsets,
                                                          t_slots, opt_states, n_opt, &rep));
        } else {
            rep.checksum = ssm__bell_hash_index(col_idx, &s);
        }
        if (report) *report = rep;
        return SSM_OK;
    }
    if (!device) SSM__TRY(ssm_ctx_workspace(ctx, ssm__bell_topo_ws(topo, s.B), (void **)&scratch));
    else { /* the device index is checked on its host copy before the hook averages any score */
        ssm_bell_topology_report probe;
        memset(&probe, 0, sizeof probe);
        SSM__TRY(ctx->backend->bell_topology_step(ctx, &plan, topo, global_step, 0, 0, values, col_idx, t_offsets, t_slots,
                                                  opt_states, n_opt, &probe));
    }
    if (cfg->allreduce) { /* every rank selects from the same (reduced) scores */
        ssm_result r1 = cfg->allreduce(cfg->allreduce_user, topo->keep_score, s.R * s.K), r2 = SSM_OK;
        if (r1 == SSM_OK) r2 = cfg->allreduce(cfg->allreduce_user, topo->grow_score, s.R * s.C);
        if (r1 != SSM_OK || r2 != SSM_OK) /* the hook's own code may be anything: report it, return ours */
            return ssm_ctx_error(ctx, SSM_ERROR_BACKEND, "%s: the allreduce hook failed with %d on %s; the layer was not changed",
                                 op, (int)(r1 != SSM_OK ? r1 : r2), r1 != SSM_OK ? "keep_score" : "grow_score");
    }
    rep.updated = 1;
    nd = (int64_t)floor(frac * (double)s.K + 0.5);
    if (nd > s.C - s.K) nd = s.C - s.K; /* cannot grow more than the unused columns */
    if (device) {
        SSM__TRY(ctx->backend->bell_topology_step(ctx, &plan, topo, global_step, nd, 1, values, col_idx, t_offsets, t_slots,
                                                  opt_states, n_opt, &rep));
        rep.pruned = rep.grown;
        rep.churn = (double)rep.grown / (double)(s.R * s.K);
        if (report) *report = rep;
        return SSM_OK;
    }
    drop = (double *)((char *)scratch + SSM_BELL_SELECT_SCRATCH(s.K, s.C));
    colr = (int32_t *)(void *)(drop + s.K);
    perm = colr + s.K;
    fresh = perm + s.K;
    buf = (char *)(void *)(drop + 3 * s.K); /* past the K drop scores and the 3K i32 (<= 2K doubles) */
    for (r = 0; r < s.R; ++r) {
        double *keep = topo->keep_score + r * s.K;
        for (k = 0; k < s.K; ++k) {
            colr[k] = SSM__BELL_IDX(col_idx, r, k);
            drop[k] = cfg->drop_score == SSM_BELL_DROP_MAGNITUDE ? ssm__bell_tile_norm(values, r, k, s.B) : keep[k];
        }
        if (!ssm_bell_topology_select_row(cfg, global_step, r, nd, s.K, s.C, colr, keep, topo->grow_score + r * s.C, drop,
                                          perm, fresh, scratch, &rep))
            continue;
        for (k = 0; k < s.K; ++k) SSM__BELL_IDX(col_idx, r, k) = colr[k];
        ssm__bell_permute_row(values, r, perm, fresh, s.K, s.B, buf);
        for (o = 0; o < n_opt; ++o) ssm__bell_permute_row(opt_states[o], r, perm, fresh, s.K, s.B, buf);
    }
    rep.pruned = rep.grown;
    rep.churn = (double)rep.grown / (double)(s.R * s.K);
    ssm__bell_build_tindex(col_idx, t_offsets, t_slots, &s);
    rep.checksum = ssm__bell_hash_index(col_idx, &s);
    if (report) *report = rep;
    return SSM_OK;
}

/* >>proj ---- fused projection chains (implementation) ------------------------------------- */
/* ---- projection chains and the output chain ---------------------------------------------- */

#define SSM__AT1(t, i) ssm__off((t)->data, (i) * (t)->strides[0] * (int64_t)es)
#define SSM__AT2(t, i, j) ssm__off((t)->data, ((i) * (t)->strides[0] + (j) * (t)->strides[1]) * (int64_t)es)
#define SSM__PROJ_ALIGN(b) (((b) + 63u) & ~(size_t)63u)

static ssm_matrix_batch ssm__mb(void *ptr, int64_t rs, int64_t cs) {
    ssm_matrix_batch m;
    m.ptr = ptr, m.rs = rs, m.cs = cs, m.bs = 0;
    return m;
}

SSMDEF const char *ssm_proj_act_name(ssm_proj_act a) {
    switch (a) {
    case SSM_PROJ_NONE: return "none";
    case SSM_PROJ_SILU: return "silu";
    case SSM_PROJ_SIGMOID: return "sigmoid";
    case SSM_PROJ_SIGMOID2: return "sigmoid2";
    case SSM_PROJ_LOGSIGMOID: return "logsigmoid";
    case SSM_PROJ_SOFTPLUS: return "softplus";
    case SSM_PROJ_RELU: return "relu";
    case SSM_PROJ_GELU_TANH: return "gelu_tanh";
    case SSM_PROJ_DECAY_GATE: return "decay_gate";
    case SSM_PROJ_SOFTCAP: return "softcap";
    }
    return "?";
}

SSMDEF ssm_proj_desc ssm_proj_desc_init(void) {
    ssm_proj_desc d;
    memset(&d, 0, sizeof d);
    return d;
}

SSMDEF ssm_result ssm_proj_desc_add(ssm_proj_desc *desc, int64_t width, ssm_proj_act act,
                                    double param, int bias, int64_t l2_head) {
    ssm_proj_segment *s;
    if (!desc) return SSM_ERROR_NULL_ARGUMENT;
    if (desc->nseg < 0 || desc->nseg >= SSM_PROJ_MAX_SEGMENTS) return SSM_ERROR_INVALID_VALUE;
    s = &desc->seg[desc->nseg++];
    s->width = width, s->act = act, s->param = param, s->bias = bias, s->l2_head = l2_head;
    return SSM_OK;
}

SSMDEF int64_t ssm_proj_desc_width(const ssm_proj_desc *desc) {
    int64_t n = 0;
    int s;
    if (!desc || desc->nseg < 0 || desc->nseg > SSM_PROJ_MAX_SEGMENTS) return 0;
    for (s = 0; s < desc->nseg; ++s) {
        if (desc->seg[s].width < 0 || desc->seg[s].width > INT64_MAX - n) return -1;
        n += desc->seg[s].width;
    }
    return n;
}

static double ssm__sigmoid(double z) {
    double e;
    if (z >= 0) return 1.0 / (1.0 + exp(-z));
    e = exp(z);
    return e / (1.0 + e);
}
static double ssm__softplus(double z) { return (z > 0 ? z : 0.0) + log1p(exp(-fabs(z))); }

/* act(z) and its derivative *df; param already resolved, alog only for the decay gate.
   The one definition every path (fused, unfused, forward, backward) goes through. */
static double ssm__proj_act(ssm_proj_act a, double param, double alog, double z, double *df) {
    double s, t;
    switch (a) {
    case SSM_PROJ_SILU: s = ssm__sigmoid(z); *df = s * (1.0 + z * (1.0 - s)); return z * s;
    case SSM_PROJ_SIGMOID: s = ssm__sigmoid(z); *df = s * (1.0 - s); return s;
    case SSM_PROJ_SIGMOID2: s = ssm__sigmoid(z); *df = 2.0 * s * (1.0 - s); return 2.0 * s;
    case SSM_PROJ_LOGSIGMOID: *df = ssm__sigmoid(-z) / param; return -ssm__softplus(-z) / param;
    case SSM_PROJ_SOFTPLUS: *df = ssm__sigmoid(z); return ssm__softplus(z);
    case SSM_PROJ_RELU: *df = z > 0 ? 1.0 : 0.0; return z > 0 ? z : 0.0;
    case SSM_PROJ_GELU_TANH: {
        const double k = 0.7978845608028654, c = 0.044715;
        t = tanh(k * (z + c * z * z * z));
        *df = 0.5 * (1.0 + t) + 0.5 * z * (1.0 - t * t) * k * (1.0 + 3.0 * c * z * z);
        return 0.5 * z * (1.0 + t);
    }
    case SSM_PROJ_DECAY_GATE: s = -exp(alog); *df = s * ssm__sigmoid(z); return s * ssm__softplus(z);
    case SSM_PROJ_SOFTCAP: t = tanh(z / param); *df = 1.0 - t * t; return param * t;
    default: *df = 1.0; return z;
    }
}

/* One validated call: sizes, segment column offsets and resolved parameters. */
typedef struct ssm__proj {
    ssm_ctx *ctx;
    const ssm_proj_desc *d;
    ssm_dtype dt;
    size_t es;
    int64_t M, dim, N, G;
    int64_t c0[SSM_PROJ_MAX_SEGMENTS + 1]; /* first column of each segment; c0[nseg] = N */
    int64_t g0[SSM_PROJ_MAX_SEGMENTS];     /* first A_log index of each decay gate        */
    double param[SSM_PROJ_MAX_SEGMENTS];
    double eps;
    const ssm_tensor *x, *W, *bias, *alog;
    ssm_proj_stats st;
} ssm__proj;

static ssm_result ssm__proj_gemm(ssm__proj *P, int64_t M, int64_t N, int64_t K, ssm_matrix_batch A,
                                 ssm_matrix_batch B, double beta, ssm_matrix_batch C) {
    P->st.gemm_calls += 1;
    P->st.gemm_flops += 2.0 * (double)M * (double)N * (double)K;
    return ssm_ctx_gemm(P->ctx, P->dt, 1, M, N, K, 1.0, A, B, beta, C);
}

/* FUSED forward rows per GEMM when desc->block_rows = 0: all of them. Each block's GEMM
   streams (and on BLIS re-packs) all of W (75 MB at d = 2048, N = 9228): 64-row blocks were
   3.8x slower than the unfused forward on BLIS at M = 1024 and 256-row blocks still 0.62-0.80x
   (bench/cpu_proj.c, BENCH_BLOCK_ROWS), while the epilogue pass over y costs a few percent of
   the GEMM on a CPU. So by default one GEMM over the whole width and every row (W packed
   once), then every segment's epilogue, a row block at a time - the schedule of the CUDA
   backend too. block_rows > 0 keeps y's block cache-hot between GEMM and epilogue. */
#define SSM__PROJ_ROWS INT64_MAX

/* Packs rows [r0, r0+mb) of x transposed into xt [d, mb]: x W^T contracts over the
   contiguous dim of both operands, so one of them must be transposed for a unit-stride GEMM
   operand; x's block is the small one (mb d elements against mb N d flops). */
static void ssm__proj_pack_xt(const ssm__proj *P, int64_t r0, int64_t mb, char *xt) {
    size_t es = P->es;
    ssm__copy2d(P->dt, 1, P->dim, mb, ssm__mb(SSM__AT2(P->x, r0, 0), P->x->strides[1], P->x->strides[0]),
                ssm__mb(xt, mb, 1), 0);
}

/* C = x_blk W[c0 : c0+w]^T (C given by pointer and strides; xt from ssm__proj_pack_xt), run
   as C^T = W_seg xt: W streams once per block against a cache-sized, unit-stride x block. */
static ssm_result ssm__proj_gemm_xwt(ssm__proj *P, const char *xt, int64_t mb, int64_t c0, int64_t w, void *C,
                                     int64_t crs, int64_t ccs) {
    size_t es = P->es;
    return ssm__proj_gemm(P, w, mb, P->dim, ssm__mb(SSM__AT2(P->W, c0, 0), P->W->strides[0], P->W->strides[1]),
                          ssm__mb((void *)xt, mb, 1), 0.0, ssm__mb(C, ccs, crs));
}

static ssm_result ssm__proj_check_desc(ssm_ctx *ctx, const char *op, const ssm_proj_desc *d) {
    int s;
    int64_t total = 0;
    if (!d) return ssm_ctx_error(ctx, SSM_ERROR_NULL_ARGUMENT, "%s: desc is NULL", op);
    if (d->nseg < 1 || d->nseg > SSM_PROJ_MAX_SEGMENTS)
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_VALUE, "%s: %d segments (1..%d allowed)", op, d->nseg,
                             SSM_PROJ_MAX_SEGMENTS);
    if (d->path != SSM_PROJ_FUSED && d->path != SSM_PROJ_UNFUSED)
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_VALUE, "%s: unknown path %d", op, (int)d->path);
    if (d->save != SSM_PROJ_SAVE_NONE && d->save != SSM_PROJ_SAVE_PRE)
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_VALUE, "%s: unknown save mode %d", op, (int)d->save);
    if (d->block_rows < 0 || !(d->l2_eps >= 0.0))
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_VALUE, "%s: block_rows and l2_eps must be >= 0", op);
    for (s = 0; s < d->nseg; ++s) {
        const ssm_proj_segment *g = &d->seg[s];
        if (g->width < 1 || g->width > INT64_MAX - total)
            return ssm_ctx_error(ctx, SSM_ERROR_INVALID_SHAPE, "%s: segment %d has width %lld (widths must be >= 1 and sum within int64)",
                                 op, s, (long long)g->width);
        total += g->width;
        if ((int)g->act < 0 || (int)g->act >= SSM_PROJ_ACT_COUNT)
            return ssm_ctx_error(ctx, SSM_ERROR_INVALID_VALUE, "%s: segment %d: unknown activation %d", op,
                                 s, (int)g->act);
        if (!(g->param >= 0.0) || g->param > 1e300)
            return ssm_ctx_error(ctx, SSM_ERROR_INVALID_VALUE, "%s: segment %d: param %g must be finite, >= 0",
                                 op, s, g->param);
        if (g->bias != 0 && g->bias != 1)
            return ssm_ctx_error(ctx, SSM_ERROR_INVALID_VALUE, "%s: segment %d: bias must be 0 or 1", op, s);
        if (g->l2_head < 0 || (g->l2_head > 0 && g->width % g->l2_head != 0))
            return ssm_ctx_error(ctx, SSM_ERROR_INVALID_SHAPE,
                                 "%s: segment %d: L2 head_dim %lld does not divide its width %lld", op, s,
                                 (long long)g->l2_head, (long long)g->width);
    }
    return SSM_OK;
}

/* Validates desc, x [M,d], W [N,d], bias [N], A_log [G] and fills P. */
static ssm_result ssm__proj_setup(ssm__proj *P, ssm_ctx *ctx, const char *op, const ssm_proj_desc *d,
                                  const ssm_tensor *x, const ssm_tensor *W, const ssm_tensor *bias,
                                  const ssm_tensor *A_log) {
    int s, need_bias = 0;
    int64_t shape[2];
    memset(P, 0, sizeof *P);
    SSM__TRY(ssm__proj_check_desc(ctx, op, d));
    P->ctx = ctx, P->d = d;
    for (s = 0; s < d->nseg; ++s) {
        const ssm_proj_segment *g = &d->seg[s];
        P->c0[s + 1] = P->c0[s] + g->width;
        P->g0[s] = P->G;
        if (g->act == SSM_PROJ_DECAY_GATE) P->G += g->width;
        if (g->bias) need_bias = 1;
        P->param[s] = g->param;
        if (g->param == 0.0) P->param[s] = g->act == SSM_PROJ_SOFTCAP ? 15.0 : 1.0;
    }
    P->N = P->c0[d->nseg];
    P->eps = d->l2_eps > 0 ? d->l2_eps : 1e-6;
    SSM__TRY(ssm__check_float_dtype(ctx, op, x));
    SSM__TRY(ssm__check(ctx, op, "x", x, x->dtype, 2, 2, NULL));
    P->dt = x->dtype, P->es = ssm__esize(x->dtype), P->M = x->shape[0], P->dim = x->shape[1];
    shape[0] = -1, shape[1] = P->dim;
    SSM__TRY(ssm__check(ctx, op, "W", W, P->dt, 2, 2, shape));
    if (W->shape[0] != P->N)
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_SHAPE,
                             "%s: the segment widths sum to %lld but W has %lld rows", op, (long long)P->N,
                             (long long)W->shape[0]);
    if (need_bias && !bias)
        return ssm_ctx_error(ctx, SSM_ERROR_NULL_ARGUMENT, "%s: a segment has a bias but bias is NULL", op);
    if (bias) SSM__TRY(ssm__check(ctx, op, "bias", bias, P->dt, 1, 1, &P->N));
    if (P->G > 0 && !A_log)
        return ssm_ctx_error(ctx, SSM_ERROR_NULL_ARGUMENT, "%s: a decay gate needs A_log", op);
    if (A_log) SSM__TRY(ssm__check(ctx, op, "A_log", A_log, P->dt, 1, 1, &P->G));
    P->x = x, P->W = W, P->bias = need_bias ? bias : NULL, P->alog = A_log;
    return SSM_OK;
}

static double ssm__proj_alog(const ssm__proj *P, int s, int64_t c) {
    size_t es = P->es;
    if (P->d->seg[s].act != SSM_PROJ_DECAY_GATE) return 0.0;
    return SSM__LOAD(P->dt, SSM__AT1(P->alog, P->g0[s] + c - P->c0[s]));
}

/* The forward epilogue of segment s on rows [r0, r1): y holds x W^T there; adds the bias,
   saves z into pre (when given), applies the activation, then the per-head L2 norm. */
static void ssm__proj_epilogue(const ssm__proj *P, int s, int64_t r0, int64_t r1, ssm_tensor *y,
                               ssm_tensor *pre) {
    const ssm_proj_segment *g = &P->d->seg[s];
    int64_t c0 = P->c0[s], c1 = P->c0[s + 1], hd = g->l2_head > 0 ? g->l2_head : 1, r, h, c;
    size_t es = P->es;
    ssm_dtype dt = P->dt;
    for (r = r0; r < r1; ++r)
        for (h = c0; h < c1; h += hd) {
            double ss = 0.0, df;
            for (c = h; c < h + hd; ++c) {
                char *py = SSM__AT2(y, r, c);
                double z = SSM__LOAD(dt, py), a;
                if (g->bias) z += SSM__LOAD(dt, SSM__AT1(P->bias, c));
                if (pre) SSM__STORE(dt, SSM__AT2(pre, r, c), z);
                a = ssm__proj_act(g->act, P->param[s], ssm__proj_alog(P, s, c), z, &df);
                SSM__STORE(dt, py, a);
                ss += a * a;
            }
            if (g->l2_head > 0) {
                double rn = 1.0 / sqrt(ss + P->eps);
                for (c = h; c < h + hd; ++c) {
                    char *py = SSM__AT2(y, r, c);
                    SSM__STORE(dt, py, SSM__LOAD(dt, py) * rn);
                }
            }
        }
}

/* The backward epilogue of segment s on rows [r0, r1): dPre = d(epilogue)^T dy into the
   compact [M, N] buffer dP. z comes from pre, or (pre NULL) from x W^T already in dP plus
   the bias; each element is read before it is overwritten. The decay gate's dA_log
   (df/dA_log = f) accumulates into gacc. */
static void ssm__proj_dact(const ssm__proj *P, int s, int64_t r0, int64_t r1, const ssm_tensor *pre,
                           const ssm_tensor *dy, char *dP, double *gacc) {
    const ssm_proj_segment *g = &P->d->seg[s];
    int64_t c0 = P->c0[s], c1 = P->c0[s + 1], hd = g->l2_head > 0 ? g->l2_head : 1, r, h, c;
    size_t es = P->es;
    ssm_dtype dt = P->dt;
#define SSM__PROJ_Z(r, c)                                                                         \
    (pre ? SSM__LOAD(dt, SSM__AT2(pre, r, c))                                                     \
         : SSM__LOAD(dt, dP + ((r) * P->N + (c)) * (int64_t)es) +                                 \
               (g->bias ? SSM__LOAD(dt, SSM__AT1(P->bias, c)) : 0.0))
    for (r = r0; r < r1; ++r)
        for (h = c0; h < c1; h += hd) {
            double rn = 1.0, dot = 0.0, df, a, gy;
            if (g->l2_head > 0) { /* y = a rn: da = rn dy - rn^3 a (dy . a) */
                double ss = 0.0;
                for (c = h; c < h + hd; ++c) {
                    a = ssm__proj_act(g->act, P->param[s], ssm__proj_alog(P, s, c), SSM__PROJ_Z(r, c), &df);
                    ss += a * a;
                    dot += a * SSM__LOAD(dt, SSM__AT2(dy, r, c));
                }
                rn = 1.0 / sqrt(ss + P->eps);
            }
            for (c = h; c < h + hd; ++c) {
                a = ssm__proj_act(g->act, P->param[s], ssm__proj_alog(P, s, c), SSM__PROJ_Z(r, c), &df);
                gy = SSM__LOAD(dt, SSM__AT2(dy, r, c));
                if (g->l2_head > 0) gy = rn * gy - rn * rn * rn * a * dot;
                if (g->act == SSM_PROJ_DECAY_GATE) gacc[P->g0[s] + c - c0] += gy * a;
                SSM__STORE(dt, dP + (r * P->N + c) * (int64_t)es, gy * df);
            }
        }
#undef SSM__PROJ_Z
}

/* Forward: the packed x^T of one row block (FUSED) or of all rows (UNFUSED); the GEMM and
   epilogues work in y itself. Backward: dPre [M, N], then double accumulators for dbias and
   dA_log, then (SAVE_NONE) the packed x^T of the recompute GEMM. */
/* 64-byte aligned size, saturating (SIZE_MAX stays SIZE_MAX). */
static size_t ssm__align64(size_t b) { return b > SIZE_MAX - 63u ? SIZE_MAX : SSM__PROJ_ALIGN(b); }

static size_t ssm__proj_ws(const ssm_proj_desc *d, ssm_dtype dt, int64_t M, int64_t dim, int64_t N, int64_t G,
                           int backward) {
    size_t es = ssm__esize(dt);
    int64_t block = d->block_rows ? d->block_rows : SSM__PROJ_ROWS;
    if (!backward) return ssm__szmul(ssm__szmul(es, d->path == SSM_PROJ_FUSED ? SSM__MIN(block, M) : M), dim);
    return ssm__szadd(ssm__szadd(ssm__align64(ssm__szmul(ssm__szmul(es, M), N)),
                                 ssm__align64(ssm__szadd(ssm__szmul(sizeof(double), N), ssm__szmul(sizeof(double), G)))),
                      d->save == SSM_PROJ_SAVE_NONE ? ssm__szmul(ssm__szmul(es, M), dim) : 0);
}

static void ssm__st2(int64_t st[2], const ssm_tensor *t) {
    st[0] = t ? t->strides[0] : 0, st[1] = t ? t->strides[1] : 0;
}
static int64_t ssm__st1(const ssm_tensor *t) { return t ? t->strides[0] : 0; }

/* The plan of a call (or, tensors all NULL, of a workspace query): sizes, resolved segments. */
static void ssm__proj_plan_of(ssm_proj_plan *p, ssm_op op, const ssm_proj_desc *d, ssm_dtype dt, int64_t M, int64_t K) {
    int s;
    memset(p, 0, sizeof *p);
    p->op = op, p->dtype = dt, p->M = M, p->K = K, p->nseg = d->nseg;
    p->path = d->path, p->save = d->save;
    p->block_rows = d->block_rows ? d->block_rows : SSM__PROJ_ROWS;
    p->l2_eps = d->l2_eps > 0 ? d->l2_eps : 1e-6;
    for (s = 0; s < d->nseg; ++s) {
        p->seg[s] = d->seg[s];
        if (p->seg[s].param == 0.0) p->seg[s].param = d->seg[s].act == SSM_PROJ_SOFTCAP ? 15.0 : 1.0;
        p->c0[s + 1] = p->c0[s] + d->seg[s].width;
        p->g0[s] = p->G;
        if (d->seg[s].act == SSM_PROJ_DECAY_GATE) p->G += d->seg[s].width;
        if (d->seg[s].bias) p->has_bias = 1;
    }
    p->N = p->c0[d->nseg];
}

/* Asks the backend (supports with the plan) and sizes the workspace: the backend's figure,
   else the host algorithm's. */
static ssm_result ssm__proj_plan_finish(ssm_ctx *ctx, const char *op, const ssm_proj_desc *d, ssm_proj_plan *p) {
    ssm_result r = SSM__NOT_MINE;
    SSM__TRY(ssm__supported(ctx, op, p->op, p));
    if (ctx->backend->workspace_size) r = ctx->backend->workspace_size(ctx, p->op, p, &p->workspace_bytes);
    if (r == SSM__NOT_MINE)
        p->workspace_bytes = ssm__proj_ws(d, p->dtype, p->M, p->K, p->N, p->G, p->op == SSM_OP_PROJ_BACKWARD);
    else if (r != SSM_OK) return r;
    if (p->workspace_bytes == SIZE_MAX)
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_SHAPE, "%s: the workspace size overflows size_t", op);
    return SSM_OK;
}

/* Stats of a call a backend slot ran: its GEMMs are those of the host algorithm's
   fused / unfused schedule with one fused GEMM per forward. */
static void ssm__proj_slot_stats(const ssm_proj_plan *p, const ssm_proj_desc *d) {
    ssm_proj_stats st;
    double one = 2.0 * (double)p->M * (double)p->N * (double)p->K;
    if (!d->stats) return;
    memset(&st, 0, sizeof st);
    if (p->M > 0) {
        if (p->op == SSM_OP_PROJ_FORWARD) st.gemm_calls = p->path == SSM_PROJ_FUSED ? 1 : p->nseg, st.gemm_flops = one;
        else {
            st.gemm_calls = (p->path == SSM_PROJ_FUSED ? 2 : 2 * p->nseg) + (p->save == SSM_PROJ_SAVE_NONE);
            st.gemm_flops = one * (p->save == SSM_PROJ_SAVE_NONE ? 3.0 : 2.0);
        }
    }
    st.workspace_bytes = p->workspace_bytes;
    *d->stats = st;
}

SSMDEF ssm_result ssm_proj_workspace_size(const ssm_ctx *ctx, const ssm_proj_desc *desc, ssm_dtype dtype,
                                          int64_t M, int64_t d, int backward, size_t *bytes) {
    static const char *op = "ssm_proj_workspace_size";
    ssm_ctx *mctx = (ssm_ctx *)ctx; /* the message only: a query changes nothing else */
    ssm_proj_plan p;
    if (!ctx) return SSM_ERROR_NULL_ARGUMENT;
    mctx->message[0] = 0;
    if (!desc || !bytes) return ssm_ctx_error(mctx, SSM_ERROR_NULL_ARGUMENT, "%s: desc and bytes are required", op);
    SSM__TRY(ssm__proj_check_desc(mctx, op, desc)); /* the checks the op makes, on what a query knows */
    SSM__TRY(ssm__check_compute_dtype(mctx, op, dtype));
    if (M < 0 || d < 0)
        return ssm_ctx_error(mctx, SSM_ERROR_INVALID_SHAPE, "%s: M = %lld and d = %lld must be >= 0", op, (long long)M,
                             (long long)d);
    if (backward != 0 && backward != 1)
        return ssm_ctx_error(mctx, SSM_ERROR_INVALID_VALUE, "%s: backward must be 0 or 1", op);
    ssm__proj_plan_of(&p, backward ? SSM_OP_PROJ_BACKWARD : SSM_OP_PROJ_FORWARD, desc, dtype, M, d);
    p.want_dbias = p.want_dalog = backward; /* the most a call can ask for */
    SSM__TRY(ssm__proj_plan_finish(mctx, op, desc, &p));
    *bytes = p.workspace_bytes;
    return SSM_OK;
}

static void ssm__proj_finish(ssm__proj *P, size_t ws) {
    if (!P->d->stats) return;
    P->st.workspace_bytes = ws;
    *P->d->stats = P->st;
}

SSMDEF ssm_result ssm_proj_forward(ssm_ctx *ctx, const ssm_proj_desc *desc, const ssm_tensor *x,
                                   const ssm_tensor *W, const ssm_tensor *bias, const ssm_tensor *A_log,
                                   ssm_tensor *y, ssm_tensor *pre) {
    static const char *op = "ssm_proj_forward";
    ssm__proj P;
    ssm_proj_plan pl;
    int64_t shape[2], r0, mb, e0;
    ssm__arg args[6];
    size_t es, ws;
    void *wsp = NULL;
    char *xt;
    int s;
    if (!ctx) return SSM_ERROR_NULL_ARGUMENT;
    ctx->message[0] = 0;
    if (!x || !W || !y) return ssm_ctx_error(ctx, SSM_ERROR_NULL_ARGUMENT, "%s: x, W and y are required", op);
    SSM__TRY(ssm__proj_setup(&P, ctx, op, desc, x, W, bias, A_log));
    shape[0] = P.M, shape[1] = P.N;
    SSM__TRY(ssm__check(ctx, op, "y", y, P.dt, 2, 2, shape));
    if (desc->save == SSM_PROJ_SAVE_PRE && !pre)
        return ssm_ctx_error(ctx, SSM_ERROR_NULL_ARGUMENT, "%s: save = SAVE_PRE needs pre", op);
    if (desc->save == SSM_PROJ_SAVE_NONE && pre)
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_VALUE, "%s: pre given but save = SAVE_NONE", op);
    if (pre) SSM__TRY(ssm__check(ctx, op, "pre", pre, P.dt, 2, 2, shape));
    ssm__arg_set(&args[0], "x", x, 0);
    ssm__arg_set(&args[1], "W", W, 0);
    ssm__arg_set(&args[2], "bias", bias, 0);
    ssm__arg_set(&args[3], "A_log", A_log, 0);
    ssm__arg_set(&args[4], "y", y, 1);
    ssm__arg_set(&args[5], "pre", pre, 1);
    SSM__TRY(ssm__check_aliasing(ctx, op, args, 6));
    ssm__proj_plan_of(&pl, SSM_OP_PROJ_FORWARD, desc, P.dt, P.M, P.dim);
    ssm__st2(pl.x, x), ssm__st2(pl.W, W), ssm__st2(pl.y, y), ssm__st2(pl.pre, pre);
    pl.bias = ssm__st1(P.bias), pl.alog = ssm__st1(A_log);
    SSM__TRY(ssm__proj_plan_finish(ctx, op, desc, &pl));
    if (ctx->backend->proj_forward) {
        ssm_result r = ctx->backend->proj_forward(ctx, &pl, x, W, P.bias, A_log, y, pre);
        if (r != SSM__NOT_MINE) {
            if (r == SSM_OK) ssm__proj_slot_stats(&pl, desc);
            return r;
        }
    }
    es = P.es;
    ws = pl.workspace_bytes;
    SSM__TRY(ssm_ctx_workspace(ctx, ws, &wsp));
    xt = (char *)wsp;
    if (desc->path == SSM_PROJ_FUSED) {
        int64_t block = desc->block_rows ? desc->block_rows : SSM__PROJ_ROWS;
        for (r0 = 0; r0 < P.M; r0 += block) { /* GEMM a row block, then its epilogues while hot */
            mb = SSM__MIN(block, P.M - r0);
            ssm__proj_pack_xt(&P, r0, mb, xt);
            SSM__TRY(ssm__proj_gemm_xwt(&P, xt, mb, 0, P.N, SSM__AT2(y, r0, 0), y->strides[0], y->strides[1]));
            for (e0 = r0; e0 < r0 + mb; e0 += 64) /* every segment of 64 rows at a time: y's rows stay hot */
                for (s = 0; s < desc->nseg; ++s) ssm__proj_epilogue(&P, s, e0, SSM__MIN(e0 + 64, r0 + mb), y, pre);
        }
    } else if (P.M > 0) {
        ssm__proj_pack_xt(&P, 0, P.M, xt);
        for (s = 0; s < desc->nseg; ++s) { /* one GEMM per projection, then its activation pass */
            int64_t c0 = P.c0[s];
            SSM__TRY(ssm__proj_gemm_xwt(&P, xt, P.M, c0, desc->seg[s].width, SSM__AT2(y, 0, c0), y->strides[0],
                                        y->strides[1]));
            ssm__proj_epilogue(&P, s, 0, P.M, y, pre);
        }
    }
    ssm__proj_finish(&P, ws);
    return SSM_OK;
}

SSMDEF ssm_result ssm_proj_backward(ssm_ctx *ctx, const ssm_proj_desc *desc, const ssm_tensor *x,
                                    const ssm_tensor *W, const ssm_tensor *bias, const ssm_tensor *A_log,
                                    const ssm_tensor *pre, const ssm_tensor *dy, ssm_tensor *dx,
                                    ssm_tensor *dW, ssm_tensor *dbias, ssm_tensor *dA_log) {
    static const char *op = "ssm_proj_backward";
    ssm__proj P;
    ssm_proj_plan pl;
    int64_t shMN[2], shMd[2], shNd[2], r, c, r0;
    ssm__arg args[10];
    size_t es, ws;
    void *wsp = NULL;
    char *dP, *xt;
    double *bacc, *gacc;
    int s;
    if (!ctx) return SSM_ERROR_NULL_ARGUMENT;
    ctx->message[0] = 0;
    if (!x || !W || !dy || !dx || !dW)
        return ssm_ctx_error(ctx, SSM_ERROR_NULL_ARGUMENT, "%s: x, W, dy, dx and dW are required", op);
    SSM__TRY(ssm__proj_setup(&P, ctx, op, desc, x, W, bias, A_log));
    shMN[0] = P.M, shMN[1] = P.N, shMd[0] = P.M, shMd[1] = P.dim, shNd[0] = P.N, shNd[1] = P.dim;
    if (desc->save == SSM_PROJ_SAVE_PRE && !pre)
        return ssm_ctx_error(ctx, SSM_ERROR_NULL_ARGUMENT, "%s: save = SAVE_PRE needs the forward's pre", op);
    if (desc->save == SSM_PROJ_SAVE_NONE && pre)
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_VALUE, "%s: pre given but save = SAVE_NONE", op);
    if (pre) SSM__TRY(ssm__check(ctx, op, "pre", pre, P.dt, 2, 2, shMN));
    SSM__TRY(ssm__check(ctx, op, "dy", dy, P.dt, 2, 2, shMN));
    SSM__TRY(ssm__check(ctx, op, "dx", dx, P.dt, 2, 2, shMd));
    SSM__TRY(ssm__check(ctx, op, "dW", dW, P.dt, 2, 2, shNd));
    if (dbias) SSM__TRY(ssm__check(ctx, op, "dbias", dbias, P.dt, 1, 1, &P.N));
    if (dA_log) SSM__TRY(ssm__check(ctx, op, "dA_log", dA_log, P.dt, 1, 1, &P.G));
    ssm__arg_set(&args[0], "x", x, 0);
    ssm__arg_set(&args[1], "W", W, 0);
    ssm__arg_set(&args[2], "bias", bias, 0);
    ssm__arg_set(&args[3], "A_log", A_log, 0);
    ssm__arg_set(&args[4], "pre", pre, 0);
    ssm__arg_set(&args[5], "dy", dy, 0);
    ssm__arg_set(&args[6], "dx", dx, 1);
    ssm__arg_set(&args[7], "dW", dW, 1);
    ssm__arg_set(&args[8], "dbias", dbias, 1);
    ssm__arg_set(&args[9], "dA_log", dA_log, 1);
    SSM__TRY(ssm__check_aliasing(ctx, op, args, 10));
    ssm__proj_plan_of(&pl, SSM_OP_PROJ_BACKWARD, desc, P.dt, P.M, P.dim);
    ssm__st2(pl.x, x), ssm__st2(pl.W, W), ssm__st2(pl.pre, pre), ssm__st2(pl.dy, dy);
    ssm__st2(pl.dx, dx), ssm__st2(pl.dW, dW);
    pl.bias = ssm__st1(P.bias), pl.alog = ssm__st1(A_log), pl.dbias = ssm__st1(dbias), pl.dalog = ssm__st1(dA_log);
    pl.want_dbias = dbias != NULL, pl.want_dalog = dA_log != NULL && P.G > 0;
    SSM__TRY(ssm__proj_plan_finish(ctx, op, desc, &pl));
    if (ctx->backend->proj_backward) {
        ssm_result r = ctx->backend->proj_backward(ctx, &pl, x, W, P.bias, A_log, pre, dy, dx, dW, dbias, dA_log);
        if (r != SSM__NOT_MINE) {
            if (r == SSM_OK) ssm__proj_slot_stats(&pl, desc);
            return r;
        }
    }
    es = P.es;
    ws = pl.workspace_bytes;
    SSM__TRY(ssm_ctx_workspace(ctx, ws, &wsp));
    dP = (char *)wsp; /* ws did not saturate, so none of these products overflows */
    bacc = (double *)(dP + SSM__PROJ_ALIGN((size_t)(P.M * P.N) * es));
    gacc = bacc + P.N;
    xt = (char *)bacc + SSM__PROJ_ALIGN(sizeof(double) * (size_t)(P.N + P.G));
    for (c = 0; c < P.N + P.G; ++c) bacc[c] = 0.0;
    if (P.M == 0) { /* no rows: dW = 0 (and no GEMM on an empty operand) */
        ssm__fill2d(P.dt, 1, P.N, P.dim, ssm__mb(dW->data, dW->strides[0], dW->strides[1]), 0.0);
    } else {
        if (!pre) { /* SAVE_NONE: recompute x W^T straight into the dPre buffer */
            ssm__proj_pack_xt(&P, 0, P.M, xt);
            SSM__TRY(ssm__proj_gemm_xwt(&P, xt, P.M, 0, P.N, dP, P.N, 1));
        }
        if (desc->path == SSM_PROJ_FUSED) { /* all derivatives, row by row, then one dX and one dW GEMM */
            for (r0 = 0; r0 < P.M; ++r0)
                for (s = 0; s < desc->nseg; ++s) ssm__proj_dact(&P, s, r0, r0 + 1, pre, dy, dP, gacc);
            SSM__TRY(ssm__proj_gemm(&P, P.M, P.dim, P.N, ssm__mb(dP, P.N, 1),
                                    ssm__mb(W->data, W->strides[0], W->strides[1]), 0.0,
                                    ssm__mb(dx->data, dx->strides[0], dx->strides[1])));
            SSM__TRY(ssm__proj_gemm(&P, P.N, P.dim, P.M, ssm__mb(dP, 1, P.N),
                                    ssm__mb(x->data, x->strides[0], x->strides[1]), 0.0,
                                    ssm__mb(dW->data, dW->strides[0], dW->strides[1])));
        } else { /* per segment: its derivative pass, its dX (accumulated) and dW GEMMs */
            for (s = 0; s < desc->nseg; ++s) {
                int64_t c0 = P.c0[s];
                ssm__proj_dact(&P, s, 0, P.M, pre, dy, dP, gacc);
                SSM__TRY(ssm__proj_gemm(&P, P.M, P.dim, desc->seg[s].width, ssm__mb(dP + c0 * (int64_t)es, P.N, 1),
                                        ssm__mb(SSM__AT2(W, c0, 0), W->strides[0], W->strides[1]), s ? 1.0 : 0.0,
                                        ssm__mb(dx->data, dx->strides[0], dx->strides[1])));
                SSM__TRY(ssm__proj_gemm(&P, desc->seg[s].width, P.dim, P.M, ssm__mb(dP + c0 * (int64_t)es, 1, P.N),
                                        ssm__mb(x->data, x->strides[0], x->strides[1]), 0.0,
                                        ssm__mb(SSM__AT2(dW, c0, 0), dW->strides[0], dW->strides[1])));
            }
        }
        if (dbias)
            for (r = 0; r < P.M; ++r)
                for (c = 0; c < P.N; ++c) bacc[c] += SSM__LOAD(P.dt, dP + (r * P.N + c) * (int64_t)es);
    }
    if (dbias)
        for (s = 0; s < desc->nseg; ++s)
            for (c = P.c0[s]; c < P.c0[s + 1]; ++c)
                SSM__STORE(P.dt, SSM__AT1(dbias, c), desc->seg[s].bias ? bacc[c] : 0.0);
    if (dA_log)
        for (c = 0; c < P.G; ++c) SSM__STORE(P.dt, SSM__AT1(dA_log, c), gacc[c]);
    ssm__proj_finish(&P, ws);
    return SSM_OK;
}

/* >>outchain ---- output chain (implementation) -------------------------------------------- */
/* ---- output chain ------------------------------------------------------------------------ */

SSMDEF ssm_outchain_desc ssm_outchain_desc_init(void) {
    ssm_outchain_desc d;
    memset(&d, 0, sizeof d);
    return d;
}

typedef struct ssm__oc {
    ssm_ctx *ctx;
    ssm_dtype dt;
    size_t es;
    int64_t M, D, dout, hd, H;
    double eps;
    int gate;
} ssm__oc;

static size_t ssm__oc_ws(ssm_dtype dt, const ssm_outchain_desc *d, int64_t M, int64_t D, int64_t hd,
                         int backward) {
    int64_t block = d->block_rows ? d->block_rows : 64;
    size_t mD = ssm__align64(ssm__szmul(ssm__szmul(ssm__esize(dt), M), D));
    if (!backward) return ssm__szmul(ssm__szmul(ssm__esize(dt), SSM__MIN(block, M)), D);
    return ssm__szadd(ssm__szadd(mD, mD), ssm__szmul(sizeof(double), hd));
}

static ssm_result ssm__oc_check_desc(ssm_ctx *ctx, const char *op, const ssm_outchain_desc *d);

static void ssm__oc_plan_of(ssm_outchain_plan *p, ssm_op op, const ssm_outchain_desc *d, ssm_dtype dt, int64_t M,
                            int64_t D, int64_t hd, int64_t dout) {
    memset(p, 0, sizeof *p);
    p->op = op, p->dtype = dt, p->M = M, p->D = D, p->hd = hd, p->H = D / hd, p->dout = dout;
    p->gate = d->gate, p->eps = d->eps > 0 ? d->eps : 1e-6, p->block_rows = d->block_rows ? d->block_rows : 64;
}

/* supports (with the plan) and the workspace: the backend's figure, else the host one. */
static ssm_result ssm__oc_plan_finish(ssm_ctx *ctx, const char *op, const ssm_outchain_desc *d, ssm_outchain_plan *p) {
    ssm_result r = SSM__NOT_MINE;
    SSM__TRY(ssm__supported(ctx, op, p->op, p));
    if (ctx->backend->workspace_size) r = ctx->backend->workspace_size(ctx, p->op, p, &p->workspace_bytes);
    if (r == SSM__NOT_MINE)
        p->workspace_bytes = ssm__oc_ws(p->dtype, d, p->M, p->D, p->hd, p->op == SSM_OP_OUTCHAIN_BACKWARD);
    else if (r != SSM_OK) return r;
    if (p->workspace_bytes == SIZE_MAX)
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_SHAPE, "%s: the workspace size overflows size_t", op);
    return SSM_OK;
}

SSMDEF ssm_result ssm_outchain_workspace_size(const ssm_ctx *ctx, const ssm_outchain_desc *desc,
                                              ssm_dtype dtype, int64_t M, int64_t D, int64_t d_out,
                                              int backward, size_t *bytes) {
    static const char *op = "ssm_outchain_workspace_size";
    ssm_ctx *mctx = (ssm_ctx *)ctx; /* the message only: a query changes nothing else */
    ssm_outchain_plan p;
    int64_t hd;
    if (!ctx) return SSM_ERROR_NULL_ARGUMENT;
    mctx->message[0] = 0;
    if (!desc || !bytes) return ssm_ctx_error(mctx, SSM_ERROR_NULL_ARGUMENT, "%s: desc and bytes are required", op);
    SSM__TRY(ssm__oc_check_desc(mctx, op, desc));
    SSM__TRY(ssm__check_compute_dtype(mctx, op, dtype));
    if (M < 0 || D < 1 || d_out < 0)
        return ssm_ctx_error(mctx, SSM_ERROR_INVALID_SHAPE, "%s: need M >= 0, D >= 1, d_out >= 0 (M=%lld D=%lld d_out=%lld)",
                             op, (long long)M, (long long)D, (long long)d_out);
    hd = desc->head_dim ? desc->head_dim : D;
    if (D % hd != 0)
        return ssm_ctx_error(mctx, SSM_ERROR_INVALID_SHAPE, "%s: head_dim %lld does not divide the width %lld", op,
                             (long long)hd, (long long)D);
    if (backward != 0 && backward != 1)
        return ssm_ctx_error(mctx, SSM_ERROR_INVALID_VALUE, "%s: backward must be 0 or 1", op);
    ssm__oc_plan_of(&p, backward ? SSM_OP_OUTCHAIN_BACKWARD : SSM_OP_OUTCHAIN_FORWARD, desc, dtype, M, D, hd, d_out);
    p.has_weight = p.has_rstd = p.want_dweight = backward; /* the most a call can ask for */
    SSM__TRY(ssm__oc_plan_finish(mctx, op, desc, &p));
    *bytes = p.workspace_bytes;
    return SSM_OK;
}

/* The desc and the backend (the checks a workspace query can make too). */
static ssm_result ssm__oc_check_desc(ssm_ctx *ctx, const char *op, const ssm_outchain_desc *d) {
    if (!d) return ssm_ctx_error(ctx, SSM_ERROR_NULL_ARGUMENT, "%s: desc is NULL", op);
    if (d->gate != SSM_OUTCHAIN_SILU && d->gate != SSM_OUTCHAIN_SIGMOID)
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_VALUE, "%s: unknown gate %d", op, (int)d->gate);
    if (d->head_dim < 0 || d->block_rows < 0 || !(d->eps >= 0.0))
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_VALUE, "%s: head_dim, block_rows and eps must be >= 0", op);
    return SSM_OK;
}

/* Validates desc, o, g [M,D], weight [hd], W_o [dout, D] and fills C. */
static ssm_result ssm__oc_setup(ssm__oc *C, ssm_ctx *ctx, const char *op, const ssm_outchain_desc *d,
                                const ssm_tensor *o, const ssm_tensor *g, const ssm_tensor *weight,
                                const ssm_tensor *W_o) {
    int64_t shape[2];
    memset(C, 0, sizeof *C);
    SSM__TRY(ssm__oc_check_desc(ctx, op, d));
    SSM__TRY(ssm__check_float_dtype(ctx, op, o));
    SSM__TRY(ssm__check(ctx, op, "o", o, o->dtype, 2, 2, NULL));
    C->ctx = ctx, C->dt = o->dtype, C->es = ssm__esize(o->dtype), C->M = o->shape[0], C->D = o->shape[1];
    if (C->D < 1) return ssm_ctx_error(ctx, SSM_ERROR_INVALID_SHAPE, "%s: o has width 0", op);
    C->hd = d->head_dim ? d->head_dim : C->D;
    if (C->D % C->hd != 0)
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_SHAPE, "%s: head_dim %lld does not divide the width %lld",
                             op, (long long)C->hd, (long long)C->D);
    C->H = C->D / C->hd;
    C->eps = d->eps > 0 ? d->eps : 1e-6;
    C->gate = (int)d->gate;
    shape[0] = C->M, shape[1] = C->D;
    SSM__TRY(ssm__check(ctx, op, "g", g, C->dt, 2, 2, shape));
    if (weight) SSM__TRY(ssm__check(ctx, op, "weight", weight, C->dt, 1, 1, &C->hd));
    shape[0] = -1;
    SSM__TRY(ssm__check(ctx, op, "W_o", W_o, C->dt, 2, 2, shape));
    C->dout = W_o->shape[0];
    return SSM_OK;
}

static double ssm__oc_gate(const ssm__oc *C, double g, double *dgate) {
    double s = ssm__sigmoid(g);
    if (C->gate == SSM_OUTCHAIN_SIGMOID) {
        *dgate = s * (1.0 - s);
        return s;
    }
    *dgate = s * (1.0 + g * (1.0 - s));
    return g * s;
}

/* rstd of head h in row r: from rstd_in when given, else from o. */
static double ssm__oc_rstd(const ssm__oc *C, const ssm_tensor *o, const ssm_tensor *rstd_in, int64_t r, int64_t h) {
    size_t es = C->es;
    double ss = 0.0, v;
    int64_t c;
    if (rstd_in) return SSM__LOAD(C->dt, SSM__AT2(rstd_in, r, h));
    for (c = h * C->hd; c < (h + 1) * C->hd; ++c) {
        v = SSM__LOAD(C->dt, SSM__AT2(o, r, c));
        ss += v * v;
    }
    return 1.0 / sqrt(ss / (double)C->hd + C->eps);
}

/* z rows [r0, r1) into zb, element (r, c) at ((r - r0) zrs + c zcs); rstd_out when given. */
static void ssm__oc_normgate(const ssm__oc *C, int64_t r0, int64_t r1, const ssm_tensor *o, const ssm_tensor *g,
                             const ssm_tensor *weight, const ssm_tensor *rstd_in, ssm_tensor *rstd_out, char *zb,
                             int64_t zrs, int64_t zcs) {
    size_t es = C->es;
    int64_t r, h, c;
    double dgate;
    for (r = r0; r < r1; ++r)
        for (h = 0; h < C->H; ++h) {
            double rs = ssm__oc_rstd(C, o, rstd_in, r, h);
            if (rstd_out) SSM__STORE(C->dt, SSM__AT2(rstd_out, r, h), rs);
            for (c = h * C->hd; c < (h + 1) * C->hd; ++c) {
                double z = SSM__LOAD(C->dt, SSM__AT2(o, r, c)) * rs *
                           ssm__oc_gate(C, SSM__LOAD(C->dt, SSM__AT2(g, r, c)), &dgate);
                if (weight) z *= SSM__LOAD(C->dt, SSM__AT1(weight, c - h * C->hd));
                SSM__STORE(C->dt, zb + ((r - r0) * zrs + c * zcs) * (int64_t)es, z);
            }
        }
}

SSMDEF ssm_result ssm_outchain_forward(ssm_ctx *ctx, const ssm_outchain_desc *desc, const ssm_tensor *o,
                                       const ssm_tensor *g, const ssm_tensor *weight, const ssm_tensor *W_o,
                                       ssm_tensor *y, ssm_tensor *rstd) {
    static const char *op = "ssm_outchain_forward";
    ssm__oc C;
    ssm_outchain_plan pl;
    int64_t shape[2], block, r0, mb;
    ssm__arg args[6];
    size_t es, ws;
    void *wsp = NULL;
    if (!ctx) return SSM_ERROR_NULL_ARGUMENT;
    ctx->message[0] = 0;
    if (!o || !g || !W_o || !y)
        return ssm_ctx_error(ctx, SSM_ERROR_NULL_ARGUMENT, "%s: o, g, W_o and y are required", op);
    SSM__TRY(ssm__oc_setup(&C, ctx, op, desc, o, g, weight, W_o));
    shape[0] = C.M, shape[1] = C.dout;
    SSM__TRY(ssm__check(ctx, op, "y", y, C.dt, 2, 2, shape));
    shape[1] = C.H;
    if (rstd) SSM__TRY(ssm__check(ctx, op, "rstd", rstd, C.dt, 2, 2, shape));
    ssm__arg_set(&args[0], "o", o, 0);
    ssm__arg_set(&args[1], "g", g, 0);
    ssm__arg_set(&args[2], "weight", weight, 0);
    ssm__arg_set(&args[3], "W_o", W_o, 0);
    ssm__arg_set(&args[4], "y", y, 1);
    ssm__arg_set(&args[5], "rstd", rstd, 1);
    SSM__TRY(ssm__check_aliasing(ctx, op, args, 6));
    ssm__oc_plan_of(&pl, SSM_OP_OUTCHAIN_FORWARD, desc, C.dt, C.M, C.D, C.hd, C.dout);
    pl.has_weight = weight != NULL, pl.has_rstd = rstd != NULL;
    ssm__st2(pl.o, o), ssm__st2(pl.g, g), ssm__st2(pl.W_o, W_o), ssm__st2(pl.y, y), ssm__st2(pl.rstd, rstd);
    pl.weight = ssm__st1(weight);
    SSM__TRY(ssm__oc_plan_finish(ctx, op, desc, &pl));
    if (ctx->backend->outchain_forward) {
        ssm_result r = ctx->backend->outchain_forward(ctx, &pl, o, g, weight, W_o, y, rstd);
        if (r != SSM__NOT_MINE) return r;
    }
    es = C.es;
    ws = pl.workspace_bytes;
    SSM__TRY(ssm_ctx_workspace(ctx, ws, &wsp));
    block = desc->block_rows ? desc->block_rows : 64;
    for (r0 = 0; r0 < C.M; r0 += block) { /* z for a block of rows, then its o_proj GEMM while hot */
        mb = SSM__MIN(block, C.M - r0);
        /* z_blk^T [D, mb], then y_blk^T = W_o z_blk^T: unit-stride operands (as ssm__proj_pack_xt) */
        ssm__oc_normgate(&C, r0, r0 + mb, o, g, weight, NULL, rstd, (char *)wsp, 1, mb);
        SSM__TRY(ssm_ctx_gemm(ctx, C.dt, 1, C.dout, mb, C.D, 1.0, ssm__mb(W_o->data, W_o->strides[0], W_o->strides[1]),
                              ssm__mb(wsp, mb, 1), 0.0, ssm__mb(SSM__AT2(y, r0, 0), y->strides[1], y->strides[0])));
    }
    return SSM_OK;
}

SSMDEF ssm_result ssm_outchain_backward(ssm_ctx *ctx, const ssm_outchain_desc *desc, const ssm_tensor *o,
                                        const ssm_tensor *g, const ssm_tensor *weight, const ssm_tensor *W_o,
                                        const ssm_tensor *rstd, const ssm_tensor *dy, ssm_tensor *do_,
                                        ssm_tensor *dg, ssm_tensor *dweight, ssm_tensor *dW_o) {
    static const char *op = "ssm_outchain_backward";
    ssm__oc C;
    ssm_outchain_plan pl;
    int64_t shape[2], r, h, c;
    ssm__arg args[10];
    size_t es, ws;
    void *wsp = NULL;
    char *zb, *dzb;
    double *wacc;
    if (!ctx) return SSM_ERROR_NULL_ARGUMENT;
    ctx->message[0] = 0;
    if (!o || !g || !W_o || !dy || !do_ || !dg || !dW_o)
        return ssm_ctx_error(ctx, SSM_ERROR_NULL_ARGUMENT, "%s: o, g, W_o, dy, do_, dg and dW_o are required", op);
    SSM__TRY(ssm__oc_setup(&C, ctx, op, desc, o, g, weight, W_o));
    shape[0] = C.M, shape[1] = C.H;
    if (rstd) SSM__TRY(ssm__check(ctx, op, "rstd", rstd, C.dt, 2, 2, shape));
    shape[1] = C.dout;
    SSM__TRY(ssm__check(ctx, op, "dy", dy, C.dt, 2, 2, shape));
    shape[1] = C.D;
    SSM__TRY(ssm__check(ctx, op, "do_", do_, C.dt, 2, 2, shape));
    SSM__TRY(ssm__check(ctx, op, "dg", dg, C.dt, 2, 2, shape));
    if (dweight) SSM__TRY(ssm__check(ctx, op, "dweight", dweight, C.dt, 1, 1, &C.hd));
    shape[0] = C.dout;
    SSM__TRY(ssm__check(ctx, op, "dW_o", dW_o, C.dt, 2, 2, shape));
    ssm__arg_set(&args[0], "o", o, 0);
    ssm__arg_set(&args[1], "g", g, 0);
    ssm__arg_set(&args[2], "weight", weight, 0);
    ssm__arg_set(&args[3], "W_o", W_o, 0);
    ssm__arg_set(&args[4], "rstd", rstd, 0);
    ssm__arg_set(&args[5], "dy", dy, 0);
    ssm__arg_set(&args[6], "do_", do_, 1);
    ssm__arg_set(&args[7], "dg", dg, 1);
    ssm__arg_set(&args[8], "dweight", dweight, 1);
    ssm__arg_set(&args[9], "dW_o", dW_o, 1);
    SSM__TRY(ssm__check_aliasing(ctx, op, args, 10));
    ssm__oc_plan_of(&pl, SSM_OP_OUTCHAIN_BACKWARD, desc, C.dt, C.M, C.D, C.hd, C.dout);
    pl.has_weight = weight != NULL, pl.has_rstd = rstd != NULL, pl.want_dweight = dweight != NULL;
    ssm__st2(pl.o, o), ssm__st2(pl.g, g), ssm__st2(pl.W_o, W_o), ssm__st2(pl.rstd, rstd), ssm__st2(pl.dy, dy);
    ssm__st2(pl.do_, do_), ssm__st2(pl.dg, dg), ssm__st2(pl.dW_o, dW_o);
    pl.weight = ssm__st1(weight), pl.dweight = ssm__st1(dweight);
    SSM__TRY(ssm__oc_plan_finish(ctx, op, desc, &pl));
    if (ctx->backend->outchain_backward) {
        ssm_result r = ctx->backend->outchain_backward(ctx, &pl, o, g, weight, W_o, rstd, dy, do_, dg, dweight, dW_o);
        if (r != SSM__NOT_MINE) return r;
    }
    es = C.es;
    ws = pl.workspace_bytes;
    SSM__TRY(ssm_ctx_workspace(ctx, ws, &wsp));
    zb = (char *)wsp;
    dzb = zb + SSM__PROJ_ALIGN((size_t)(C.M * C.D) * es);
    wacc = (double *)(dzb + SSM__PROJ_ALIGN((size_t)(C.M * C.D) * es));
    for (c = 0; c < C.hd; ++c) wacc[c] = 0.0;
    if (C.M == 0) {
        ssm__fill2d(C.dt, 1, C.dout, C.D, ssm__mb(dW_o->data, dW_o->strides[0], dW_o->strides[1]), 0.0);
    } else {
        ssm__oc_normgate(&C, 0, C.M, o, g, weight, rstd, NULL, zb, C.D, 1); /* rebuild z */
        SSM__TRY(ssm_ctx_gemm(ctx, C.dt, 1, C.dout, C.D, C.M, 1.0, ssm__mb(dy->data, dy->strides[1], dy->strides[0]),
                              ssm__mb(zb, C.D, 1), 0.0, ssm__mb(dW_o->data, dW_o->strides[0], dW_o->strides[1])));
        SSM__TRY(ssm_ctx_gemm(ctx, C.dt, 1, C.M, C.D, C.dout, 1.0, ssm__mb(dy->data, dy->strides[0], dy->strides[1]),
                              ssm__mb(W_o->data, W_o->strides[0], W_o->strides[1]), 0.0, ssm__mb(dzb, C.D, 1)));
    }
    /* z = n w gate(g), n = o rstd: dn = dz w gate, dg = dz n w gate', dw += dz n gate,
       do = rstd (dn - n mean(dn n)) */
    for (r = 0; r < C.M; ++r)
        for (h = 0; h < C.H; ++h) {
            double rs = ssm__oc_rstd(&C, o, rstd, r, h), dot = 0.0, dgate, gt, n, dz, w, dn;
            int pass;
            for (pass = 0; pass < 2; ++pass)
                for (c = h * C.hd; c < (h + 1) * C.hd; ++c) {
                    n = SSM__LOAD(C.dt, SSM__AT2(o, r, c)) * rs;
                    gt = ssm__oc_gate(&C, SSM__LOAD(C.dt, SSM__AT2(g, r, c)), &dgate);
                    w = weight ? SSM__LOAD(C.dt, SSM__AT1(weight, c - h * C.hd)) : 1.0;
                    dz = SSM__LOAD(C.dt, dzb + (r * C.D + c) * (int64_t)es);
                    dn = dz * w * gt;
                    if (pass == 0) {
                        dot += dn * n;
                        continue;
                    }
                    wacc[c - h * C.hd] += dz * n * gt;
                    SSM__STORE(C.dt, SSM__AT2(dg, r, c), dz * n * w * dgate);
                    SSM__STORE(C.dt, SSM__AT2(do_, r, c), rs * (dn - n * dot / (double)C.hd));
                }
        }
    if (dweight)
        for (c = 0; c < C.hd; ++c) SSM__STORE(C.dt, SSM__AT1(dweight, c), wacc[c]);
    return SSM_OK;
}

#undef SSM__AT1
#undef SSM__AT2

/* >>delta ---- delta rule (implementation) ------------------------------------------------- */
/* ---- delta rule: validation, plans and the public entry points ----------------------------- */

SSMDEF const char *ssm_delta_method_name(ssm_delta_method m) {
    switch (m) {
    case SSM_DELTA_AUTO: return "auto";
    case SSM_DELTA_RECURRENT: return "recurrent";
    case SSM_DELTA_CHUNKED: return "chunked";
    }
    return "?";
}

SSMDEF ssm_delta_desc ssm_delta_desc_init(void) {
    ssm_delta_desc d;
    memset(&d, 0, sizeof d);
    return d;
}

#define SSM__DELTA_CHUNK 64

static ssm_result ssm__delta_check_desc(ssm_ctx *ctx, const char *op, const ssm_delta_desc *d) {
    if (!d) return ssm_ctx_error(ctx, SSM_ERROR_NULL_ARGUMENT, "%s: desc is NULL", op);
    if ((int)d->method < 0 || (int)d->method >= SSM_DELTA_METHOD_COUNT)
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_VALUE, "%s: unknown method %d", op, (int)d->method);
    if (d->chunk < 0 || d->chunk > 4096)
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_VALUE, "%s: chunk must be in [0, 4096], got %lld", op,
                             (long long)d->chunk);
    if (!(d->scale == d->scale) || d->scale > 1e300 || d->scale < -1e300)
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_VALUE, "%s: scale must be finite", op);
    return SSM_OK;
}

/* A token tensor [B,(T),H,(n_h),(D)]: checks it and writes its (batch, time, head, factor,
   feature) strides, 0 for the absent dimensions. */
static ssm_result ssm__delta_view(ssm_ctx *ctx, const char *op, const char *name, const ssm_tensor *t,
                                  const ssm_delta_plan *p, int has_time, int factored, int64_t feat,
                                  int64_t st[5]) {
    int64_t shape[5];
    int rank = 0, i = 0;
    shape[rank++] = p->B;
    if (has_time) shape[rank++] = p->T;
    shape[rank++] = p->H;
    if (factored) shape[rank++] = p->n_h;
    if (feat > 0) shape[rank++] = feat;
    SSM__TRY(ssm__check(ctx, op, name, t, p->dtype, rank, rank, shape));
    st[0] = t->strides[i++];
    st[1] = has_time ? t->strides[i++] : 0;
    st[2] = t->strides[i++];
    st[3] = factored ? t->strides[i++] : 0;
    st[4] = feat > 0 ? t->strides[i] : 0;
    return SSM_OK;
}

/* A state tensor [N,H,K,V]. */
static ssm_result ssm__delta_state(ssm_ctx *ctx, const char *op, const char *name, const ssm_tensor *t,
                                   const ssm_delta_plan *p, int64_t st[4]) {
    int64_t shape[4];
    shape[0] = p->N, shape[1] = p->H, shape[2] = p->K, shape[3] = p->V;
    SSM__TRY(ssm__check(ctx, op, name, t, p->dtype, 4, 4, shape));
    st[0] = t->strides[0], st[1] = t->strides[1], st[2] = t->strides[2], st[3] = t->strides[3];
    return SSM_OK;
}

static int ssm__host_resident(const ssm_tensor *t) {
    return t->device.type == SSM_DEVICE_CPU || t->device.type == SSM_DEVICE_CUDA_HOST ||
           t->device.type == SSM_DEVICE_CUDA_MANAGED;
}

static int64_t ssm__delta_cu(const ssm_delta_plan *p, const ssm_tensor *cu, int64_t i) {
    const char *a = (const char *)cu->data + i * p->cu_stride * (p->cu_bits / 8);
    return p->cu_bits == 64 ? *(const int64_t *)a : (int64_t) * (const int32_t *)a;
}

/* cu_seqlens [N+1], i32 or i64, with B = 1: sets N, and max_len from the values when they
   are readable here (cu[0] = 0, non-decreasing, cu[N] = T). */
static ssm_result ssm__delta_check_cu(ssm_ctx *ctx, const char *op, const ssm_tensor *cu, ssm_delta_plan *p) {
    int64_t i, prev = 0;
    if (cu->ndim != 1 || cu->shape[0] < 2)
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_SHAPE, "%s: cu_seqlens must be [N+1] with N >= 1", op);
    if (cu->dtype.code != SSM_DTYPE_INT || (cu->dtype.bits != 32 && cu->dtype.bits != 64) || cu->dtype.lanes != 1)
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_DTYPE, "%s: cu_seqlens is %s, expected i32 or i64", op,
                             ssm_dtype_name(cu->dtype));
    if (!cu->data) return ssm_ctx_error(ctx, SSM_ERROR_NULL_ARGUMENT, "%s: cu_seqlens has NULL data", op);
    if (!ssm__host_resident(cu) && cu->device.type != ctx->backend->device_type)
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_DEVICE, "%s: cu_seqlens is on device type %d", op,
                             (int)cu->device.type);
    { /* ssm__check's tests, by hand: a host-resident cu_seqlens is fine on a device backend */
        int64_t es = cu->dtype.bits / 8, s = cu->strides[0], n = cu->shape[0] - 1, a = s < 0 ? -s : s;
        if ((uintptr_t)cu->data % (uintptr_t)es != 0)
            return ssm_ctx_error(ctx, SSM_ERROR_MISALIGNED, "%s: cu_seqlens data %p is not aligned to its %lld-byte elements",
                                 op, cu->data, (long long)es);
        if (s == 0) /* N + 1 equal offsets: 0 = ... = T; refused rather than looping over N empty sequences */
            return ssm_ctx_error(ctx, SSM_ERROR_INVALID_STRIDE, "%s: cu_seqlens must not be a broadcast (stride 0) view", op);
        if (s == INT64_MIN || a > INT64_MAX / es / n ||
            (s < 0 ? (uintptr_t)(a * n * es) > (uintptr_t)cu->data
                   : (uintptr_t)(a * n * es) > UINTPTR_MAX - (uintptr_t)es - (uintptr_t)cu->data))
            return ssm_ctx_error(ctx, SSM_ERROR_INVALID_STRIDE,
                                 "%s: cu_seqlens has a size and stride that reach outside the address space", op);
    }
    if (ctx->backend->check_tensor) /* also a host-resident one: it is read on the host below */
        SSM__TRY(ctx->backend->check_tensor(ctx, op, "cu_seqlens", cu));
    if (p->B != 1)
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_SHAPE, "%s: with cu_seqlens the batch B must be 1, got %lld",
                             op, (long long)p->B);
    p->N = cu->shape[0] - 1;
    p->cu_bits = cu->dtype.bits;
    p->cu_stride = cu->strides[0];
    p->max_len = p->T;
    if (!ssm__host_resident(cu)) return SSM_OK; /* device-resident lengths: the backend's to trust */
    p->max_len = 0;
    for (i = 0; i <= p->N; ++i) {
        int64_t c = ssm__delta_cu(p, cu, i);
        if ((i == 0 && c != 0) || c < prev || c > p->T || (i == p->N && c != p->T))
            return ssm_ctx_error(ctx, SSM_ERROR_INVALID_VALUE,
                                 "%s: cu_seqlens[%lld] = %lld: must start at 0, not decrease and end at T = %lld",
                                 op, (long long)i, (long long)c, (long long)p->T);
        if (c - prev > p->max_len) p->max_len = c - prev;
        prev = c;
    }
    return SSM_OK;
}

static ssm_delta_method ssm__delta_pick(const ssm_ctx *ctx, const ssm_delta_plan *p) {
    if (ctx->backend->delta_pick) return ctx->backend->delta_pick(ctx, p);
    /* one chunk or less: the token loop does the same work without the GEMM set-up */
    return p->max_len * p->n_h >= 2 * (p->chunk ? p->chunk : SSM__DELTA_CHUNK) ? SSM_DELTA_CHUNKED
                                                                                : SSM_DELTA_RECURRENT;
}

static size_t ssm__delta_ws_generic(const ssm_delta_plan *p, int pass);

/* Resolves method, chunk and scale, and the workspace figure for `pass`. Sizes whose scratch
   could not exist (empty tensors may carry any size) are refused before the exact sizing, so
   its integer products never overflow. */
static ssm_result ssm__delta_resolve(const ssm_ctx *ctx, const char *op, const ssm_delta_desc *d, ssm_delta_plan *p,
                                     int pass) {
    double K = (double)p->K, V = (double)p->V, C, L;
    if (p->N == 0 || p->H == 0) p->max_len = 0; /* nothing to run */
    p->chunk = d->chunk ? d->chunk : SSM__DELTA_CHUNK;
    C = (double)p->chunk, L = (double)p->max_len * (double)p->n_h;
    /* a bound on every term of ssm__delta_ws_generic (and on T n_h) */
    if (L > 4e18 || 8.0 * (100.0 * (K + V) * (C + 1.0) + 64.0 * C * C * C + K * V * (C + L + 40.0)) + 8192.0 > 4e18)
        return ssm_ctx_error((ssm_ctx *)ctx, SSM_ERROR_INVALID_SHAPE,
                             "%s: the workspace size overflows (K = %lld, V = %lld, T n_h = %.3g)", op,
                             (long long)p->K, (long long)p->V, L);
    p->method = pass == 2 ? SSM_DELTA_RECURRENT : d->method;
    if (p->method == SSM_DELTA_AUTO) p->method = ssm__delta_pick(ctx, p);
    if (p->method == SSM_DELTA_RECURRENT && pass != 1) p->chunk = 0;
    p->scale = d->scale != 0.0 ? d->scale : 1.0 / sqrt((double)(p->K > 0 ? p->K : 1));
    p->workspace_bytes = ssm__delta_ws_generic(p, pass);
    if (ctx->backend->delta_workspace) return ctx->backend->delta_workspace(ctx, p, pass, &p->workspace_bytes);
    return SSM_OK;
}

/* The bytes of desc.saved for plan p (sizes set): the backend's figure for the forward's
   method, 0 without a backend figure. */
static ssm_result ssm__delta_saved_bytes(const ssm_ctx *ctx, const char *op, const ssm_delta_desc *d,
                                         ssm_delta_plan *p, size_t *bytes) {
    SSM__TRY(ssm__delta_resolve(ctx, op, d, p, 0));
    *bytes = 0;
    if (ctx->backend->delta_workspace) return ctx->backend->delta_workspace(ctx, p, 3, bytes);
    return SSM_OK;
}

/* desc.saved (when given): a contiguous u8 [n] tensor of at least the plan's bytes, on the
   backend's device, 16-byte aligned (the kernels' vector accesses); sets p->saved when the
   backend keeps anything. Sized on a copy of p resolved as the forward's (pass 0): the
   backward's own pass resolves p later. Only a call that passes saved pays for it. */
static ssm_result ssm__delta_check_saved(ssm_ctx *ctx, const char *op, const ssm_delta_desc *d, ssm_delta_plan *p) {
    ssm_delta_plan q = *p;
    size_t need = 0;
    const ssm_tensor *t = d->saved;
    p->saved = NULL;
    if (!t) return SSM_OK;
    SSM__TRY(ssm__check(ctx, op, "saved", t, SSM_U8, 1, 1, NULL));
    if (t->shape[0] > 1 && t->strides[0] != 1)
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_STRIDE, "%s: saved must be contiguous (stride %lld)", op,
                             (long long)t->strides[0]);
    if (t->shape[0] > 0 && (uintptr_t)t->data % 16)
        return ssm_ctx_error(ctx, SSM_ERROR_MISALIGNED, "%s: saved data %p is not 16-byte aligned", op, t->data);
    SSM__TRY(ssm__delta_saved_bytes(ctx, op, d, &q, &need));
    if ((uint64_t)t->shape[0] < (uint64_t)need)
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_SHAPE, "%s: saved has %lld bytes, this call keeps %zu", op,
                             (long long)t->shape[0], need);
    if (need) p->saved = t->data;
    return SSM_OK;
}

SSMDEF ssm_result ssm_delta_workspace_size(const ssm_ctx *ctx, const ssm_delta_desc *desc, ssm_dtype dtype,
                                           int64_t B, int64_t T, int64_t H, int64_t K, int64_t V, int64_t n_h,
                                           int pass, size_t *bytes) {
    static const char *op = "ssm_delta_workspace_size";
    ssm_ctx *mctx = (ssm_ctx *)ctx; /* the message only: a query changes nothing else */
    ssm_delta_plan p;
    if (!ctx) return SSM_ERROR_NULL_ARGUMENT;
    mctx->message[0] = 0;
    if (!bytes) return ssm_ctx_error(mctx, SSM_ERROR_NULL_ARGUMENT, "%s: bytes is required", op);
    SSM__TRY(ssm__delta_check_desc(mctx, op, desc)); /* the checks the ops make, on what a query knows */
    SSM__TRY(ssm__check_compute_dtype(mctx, op, dtype));
    if (pass < 0 || pass > 3)
        return ssm_ctx_error(mctx, SSM_ERROR_INVALID_VALUE, "%s: pass must be 0, 1, 2 or 3, got %d", op, pass);
    if (B < 0 || T < 0 || H < 0 || K < 1 || V < 1 || n_h < 1)
        return ssm_ctx_error(mctx, SSM_ERROR_INVALID_SHAPE,
                             "%s: need B, T, H >= 0 and K, V, n_h >= 1 (B=%lld T=%lld H=%lld K=%lld V=%lld n_h=%lld)",
                             op, (long long)B, (long long)T, (long long)H, (long long)K, (long long)V, (long long)n_h);
    memset(&p, 0, sizeof p);
    p.dtype = dtype;
    p.B = B, p.T = pass == 2 ? 1 : T, p.H = H, p.K = K, p.V = V, p.n_h = n_h, p.N = B, p.max_len = p.T;
    if (pass == 3) return ssm__delta_saved_bytes(ctx, op, desc, &p, bytes);
    SSM__TRY(ssm__delta_resolve(ctx, op, desc, &p, pass));
    *bytes = p.workspace_bytes;
    return SSM_OK;
}

/* Everything the forward and the backward share: desc, q/k/v/beta/g/s0/cu_seqlens, sizes. */
static ssm_result ssm__delta_inputs(ssm_ctx *ctx, const char *op, const ssm_delta_desc *d, const ssm_tensor *q,
                                    const ssm_tensor *k, const ssm_tensor *v, const ssm_tensor *beta,
                                    const ssm_tensor *g, const ssm_tensor *s0, const ssm_tensor *cu,
                                    int has_time, ssm_delta_plan *p, int *factored) {
    int qr = has_time ? 4 : 3;
    memset(p, 0, sizeof *p);
    SSM__TRY(ssm__delta_check_desc(ctx, op, d));
    if (!q || !k || !v || !beta)
        return ssm_ctx_error(ctx, SSM_ERROR_NULL_ARGUMENT, "%s: q, k, v and beta are required", op);
    SSM__TRY(ssm__check_float_dtype(ctx, op, q));
    if (q->ndim != qr || (k->ndim != qr && k->ndim != qr + 1) || v->ndim != k->ndim)
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_SHAPE,
                             "%s: q must have rank %d, k and v rank %d (or %d with the factor dim), got %d, %d, %d",
                             op, qr, qr, qr + 1, (int)q->ndim, (int)k->ndim, (int)v->ndim);
    p->dtype = q->dtype;
    p->B = q->shape[0];
    p->T = has_time ? q->shape[1] : 1;
    p->H = q->shape[qr - 2];
    p->K = q->shape[qr - 1];
    p->V = v->shape[v->ndim - 1];
    *factored = k->ndim == qr + 1;
    p->n_h = *factored ? k->shape[qr - 1] : 1;
    if (p->B < 0 || p->T < 0 || p->H < 0 || p->K < 1 || p->V < 1 || p->n_h < 1)
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_SHAPE,
                             "%s: need B, T, H >= 0 and K, V, n_h >= 1 (B=%lld T=%lld H=%lld K=%lld V=%lld n_h=%lld)",
                             op, (long long)p->B, (long long)p->T, (long long)p->H, (long long)p->K,
                             (long long)p->V, (long long)p->n_h);
    p->N = p->B;
    p->max_len = p->T;
    p->gated = g != NULL;
    SSM__TRY(ssm__delta_view(ctx, op, "q", q, p, has_time, 0, p->K, p->st.q));
    SSM__TRY(ssm__delta_view(ctx, op, "k", k, p, has_time, *factored, p->K, p->st.k));
    SSM__TRY(ssm__delta_view(ctx, op, "v", v, p, has_time, *factored, p->V, p->st.v));
    SSM__TRY(ssm__delta_view(ctx, op, "beta", beta, p, has_time, *factored, 0, p->st.beta));
    if (g) SSM__TRY(ssm__delta_view(ctx, op, "g", g, p, has_time, 0, 0, p->st.g));
    if (cu) SSM__TRY(ssm__delta_check_cu(ctx, op, cu, p));
    if (s0) SSM__TRY(ssm__delta_state(ctx, op, "s0", s0, p, p->st.s0));
    return SSM_OK;
}

/* Nominal FLOPs (2 per multiply-add) per sub-token: recurrent 3KV MACs; chunked
   C(3K + 2V) + 3KV + C^2/6 (every chunk GEMM counted whole, the triangular solve C^2/6); the
   chunked backward recomputes the forward's batched part and state pass and adds
   C(6K + 4V) + 7KV + 2C^2; the replay backward about 12KV. */
static void ssm__delta_stats(const ssm_delta_desc *d, const ssm_delta_plan *p, int pass) {
    double L = (double)p->B * (double)p->T * (double)p->n_h * (double)p->H, K = (double)p->K, V = (double)p->V;
    double C = (double)p->chunk, m;
    if (!d->stats) return;
    if (p->method == SSM_DELTA_CHUNKED)
        m = pass == 1 ? C * (9.0 * K + 6.0 * V) + 9.0 * K * V + 2.0 * C * C + C * C / 6.0
                      : C * (3.0 * K + 2.0 * V) + 3.0 * K * V + C * C / 6.0;
    else
        m = pass == 1 ? 12.0 * K * V : 3.0 * K * V;
    d->stats->method = p->method;
    d->stats->chunk = p->chunk;
    d->stats->flops = 2.0 * L * m;
    d->stats->workspace_bytes = p->workspace_bytes;
}


/* ---- delta rule: the generic algorithms ------------------------------------------------------
   One (sequence, head) at a time, so the scratch is bounded by the longest sequence and does
   not grow with B or H. States live in the dtype of the inputs; per-token vectors in double. */

#define SSM__DV_AT(t, st, es, b, tt, h, j, f)                                                       \
    ((char *)(t)->data +                                                                            \
     ((b) * (st)[0] + (tt) * (st)[1] + (h) * (st)[2] + (j) * (st)[3] + (f) * (st)[4]) * (int64_t)(es))
#define SSM__DV_ALIGN(b) (((b) + 63u) & ~(size_t)63u)

/* A state S [K,V] at ptr with row / column element strides. */
typedef struct ssm__dv_mat {
    char *ptr;
    int64_t rs, cs;
} ssm__dv_mat;

static ssm__dv_mat ssm__dv_mat_make(void *ptr, int64_t rs, int64_t cs) {
    ssm__dv_mat m;
    m.ptr = (char *)ptr, m.rs = rs, m.cs = cs;
    return m;
}

/* y = S^T x (y [V]) */
#define SSM__DV_STX(T)                                                     \
    for (c = 0; c < V; ++c) y[c] = 0.0;                                    \
    for (r = 0; r < K; ++r) {                                              \
        const T *row = (const T *)S.ptr + r * S.rs;                        \
        const double xr = x[r];                                            \
        if (xr == 0.0) continue;                                           \
        if (S.cs == 1) /* unit stride: vectorizes */                       \
            for (c = 0; c < V; ++c) y[c] += xr * (double)row[c];           \
        else                                                               \
            for (c = 0; c < V; ++c) y[c] += xr * (double)row[c * S.cs];    \
    }
static void ssm__dv_stx(ssm_dtype dt, ssm__dv_mat S, int64_t K, int64_t V, const double *x, double *y) {
    int64_t r, c;
    if (dt.bits == 64) { SSM__DV_STX(double) }
    else { SSM__DV_STX(float) }
}

/* y = S^T x and z = S^T u in one sweep over S */
#define SSM__DV_STX2(T)                                                    \
    for (c = 0; c < V; ++c) y[c] = z[c] = 0.0;                             \
    for (r = 0; r < K; ++r) {                                              \
        const T *row = (const T *)S.ptr + r * S.rs;                        \
        const double xr = x[r], ur = u[r];                                 \
        if (S.cs == 1)                                                     \
            for (c = 0; c < V; ++c) {                                      \
                const double e = (double)row[c];                           \
                y[c] += xr * e, z[c] += ur * e;                            \
            }                                                              \
        else                                                               \
            for (c = 0; c < V; ++c) {                                      \
                const double e = (double)row[c * S.cs];                    \
                y[c] += xr * e, z[c] += ur * e;                            \
            }                                                              \
    }
static void ssm__dv_stx2(ssm_dtype dt, ssm__dv_mat S, int64_t K, int64_t V, const double *x, const double *u,
                         double *y, double *z) {
    int64_t r, c;
    if (dt.bits == 64) { SSM__DV_STX2(double) }
    else { SSM__DV_STX2(float) }
}

/* y = S x (y [K]) */
#define SSM__DV_SX(T)                                                      \
    for (r = 0; r < K; ++r) {                                              \
        const T *row = (const T *)S.ptr + r * S.rs;                        \
        double acc = 0.0;                                                  \
        if (S.cs == 1)                                                     \
            for (c = 0; c < V; ++c) acc += (double)row[c] * x[c];          \
        else                                                               \
            for (c = 0; c < V; ++c) acc += (double)row[c * S.cs] * x[c];   \
        y[r] = acc;                                                        \
    }
static void ssm__dv_sx(ssm_dtype dt, ssm__dv_mat S, int64_t K, int64_t V, const double *x, double *y) {
    int64_t r, c;
    if (dt.bits == 64) { SSM__DV_SX(double) }
    else { SSM__DV_SX(float) }
}

/* S = alpha S + a b^T */
#define SSM__DV_RANK1(T)                                                               \
    for (r = 0; r < K; ++r) {                                                          \
        T *row = (T *)S.ptr + r * S.rs;                                                \
        const double ar = a[r];                                                        \
        if (S.cs == 1 && alpha == 1.0)                                                 \
            for (c = 0; c < V; ++c) row[c] = (T)((double)row[c] + ar * b[c]);          \
        else if (S.cs == 1)                                                            \
            for (c = 0; c < V; ++c) row[c] = (T)(alpha * (double)row[c] + ar * b[c]);  \
        else if (alpha == 1.0)                                                         \
            for (c = 0; c < V; ++c) row[c * S.cs] = (T)((double)row[c * S.cs] + ar * b[c]); \
        else                                                                           \
            for (c = 0; c < V; ++c) row[c * S.cs] = (T)(alpha * (double)row[c * S.cs] + ar * b[c]); \
    }
static void ssm__dv_rank1(ssm_dtype dt, ssm__dv_mat S, int64_t K, int64_t V, double alpha, const double *a,
                          const double *b) {
    int64_t r, c;
    if (dt.bits == 64) { SSM__DV_RANK1(double) }
    else { SSM__DV_RANK1(float) }
}

/* <A, B> over two contiguous [K,V] states */
static double ssm__dv_dot(ssm_dtype dt, const void *A, const void *B, int64_t n) {
    double acc = 0.0;
    int64_t i;
    if (dt.bits == 64)
        for (i = 0; i < n; ++i) acc += ((const double *)A)[i] * ((const double *)B)[i];
    else
        for (i = 0; i < n; ++i) acc += (double)((const float *)A)[i] * (double)((const float *)B)[i];
    return acc;
}

/* dst = src (K x V states); NULL src = zeros */
static void ssm__dv_copy(ssm_dtype dt, int64_t K, int64_t V, const ssm__dv_mat *src, ssm__dv_mat dst) {
    ssm_matrix_batch d = ssm__mb(dst.ptr, dst.rs, dst.cs);
    if (src) ssm__copy2d(dt, 1, K, V, ssm__mb(src->ptr, src->rs, src->cs), d, 0);
    else ssm__fill2d(dt, 1, K, V, d, 0.0);
}

/* The tokens of sequence n: batch index, first token, length. */
static void ssm__dv_seq(const ssm_delta_plan *p, const ssm_tensor *cu, int64_t n, int64_t *b, int64_t *t0,
                        int64_t *len) {
    if (cu) {
        *b = 0;
        *t0 = ssm__delta_cu(p, cu, n);
        *len = ssm__delta_cu(p, cu, n + 1) - *t0;
    } else {
        *b = n, *t0 = 0, *len = p->T;
    }
}

/* The state of (n, h) in a [N,H,K,V] tensor with normalised strides. */
static ssm__dv_mat ssm__dv_state(const ssm_tensor *t, const int64_t st[4], int64_t n, int64_t h, size_t es) {
    return ssm__dv_mat_make((char *)t->data + (n * st[0] + h * st[1]) * (int64_t)es, st[2], st[3]);
}

/* One sequence-head's operands and per-token scratch vectors. */
typedef struct ssm__dv {
    const ssm_delta_plan *p;
    ssm_dtype dt;
    size_t es;
    const ssm_tensor *q, *k, *v, *beta, *g;
    int64_t b, t0, h;
    double *kv, *vv, *r, *w, *x1, *x2; /* K, V, V, V, K, K */
} ssm__dv;

static void ssm__dv_load(const ssm__dv *D, const ssm_tensor *t, const int64_t st[5], int64_t tt, int64_t j,
                         int64_t n, double *dst) {
    const char *base = SSM__DV_AT(t, st, D->es, D->b, D->t0 + tt, D->h, j, 0);
    const int64_t s = st[4];
    int64_t f;
    if (D->dt.bits == 64)
        for (f = 0; f < n; ++f) dst[f] = ((const double *)(const void *)base)[f * s];
    else
        for (f = 0; f < n; ++f) dst[f] = (double)((const float *)(const void *)base)[f * s];
}
static void ssm__dv_store(const ssm__dv *D, ssm_tensor *t, const int64_t st[5], int64_t tt, int64_t j, int64_t n,
                          double scale, const double *src) {
    char *base = SSM__DV_AT(t, st, D->es, D->b, D->t0 + tt, D->h, j, 0);
    const int64_t s = st[4];
    int64_t f;
    if (D->dt.bits == 64)
        for (f = 0; f < n; ++f) ((double *)(void *)base)[f * s] = scale * src[f];
    else
        for (f = 0; f < n; ++f) ((float *)(void *)base)[f * s] = (float)(scale * src[f]);
}
/* dst[f] = scale * src[f] into a contiguous dtype row */
static void ssm__dv_put_row(ssm_dtype dt, char *dst, const double *src, int64_t n, double scale) {
    int64_t f;
    if (dt.bits == 64)
        for (f = 0; f < n; ++f) ((double *)(void *)dst)[f] = scale * src[f];
    else
        for (f = 0; f < n; ++f) ((float *)(void *)dst)[f] = (float)(scale * src[f]);
}
/* row[f] *= scale on a contiguous dtype row */
static void ssm__dv_scale_row(ssm_dtype dt, char *row, int64_t n, double scale) {
    int64_t f;
    if (dt.bits == 64)
        for (f = 0; f < n; ++f) ((double *)(void *)row)[f] *= scale;
    else
        for (f = 0; f < n; ++f) ((float *)(void *)row)[f] = (float)(scale * ((float *)(void *)row)[f]);
}
static double ssm__dv_scalar(const ssm__dv *D, const ssm_tensor *t, const int64_t st[5], int64_t tt, int64_t j) {
    return SSM__LOAD(D->dt, SSM__DV_AT(t, st, D->es, D->b, D->t0 + tt, D->h, j, 0));
}
/* alpha of sub-token (tt, j): exp(g) at the first factor of a gated token, else 1 */
static double ssm__dv_alpha(const ssm__dv *D, int64_t tt, int64_t j) {
    return D->g && j == 0 ? exp(ssm__dv_scalar(D, D->g, D->p->st.g, tt, 0)) : 1.0;
}

/* S <- a (I - b k k^T) S + b k v^T = a S + k (b (v - a S^T k))^T for sub-token s; leaves
   k in D->kv, v in D->vv and S^T k (before the update) in D->r. */
static void ssm__dv_substep(ssm__dv *D, ssm__dv_mat S, int64_t s) {
    const ssm_delta_plan *p = D->p;
    int64_t tt = s / p->n_h, j = s % p->n_h, c;
    double a = ssm__dv_alpha(D, tt, j), bt = ssm__dv_scalar(D, D->beta, p->st.beta, tt, j);
    ssm__dv_load(D, D->k, p->st.k, tt, j, p->K, D->kv);
    ssm__dv_load(D, D->v, p->st.v, tt, j, p->V, D->vv);
    ssm__dv_stx(D->dt, S, p->K, p->V, D->kv, D->r);
    for (c = 0; c < p->V; ++c) D->w[c] = bt * (D->vv[c] - a * D->r[c]);
    ssm__dv_rank1(D->dt, S, p->K, p->V, a, D->kv, D->w);
}

/* Token tt: its factors, then o_t = scale S^T q_t. The last factor and the readout share one
   sweep over S: with S' = a S + k w^T, S'^T q = a S^T q + w (k.q), so S is read once for
   S^T k and S^T q, then read and written once by the update (the decode step's floor is one
   read and one write of the state). */
static void ssm__dv_token(ssm__dv *D, ssm__dv_mat S, int64_t tt, ssm_tensor *o) {
    const ssm_delta_plan *p = D->p;
    const int64_t j = p->n_h - 1;
    int64_t s, c;
    double a, bt, kq = 0.0;
    for (s = tt * p->n_h; s < tt * p->n_h + j; ++s) ssm__dv_substep(D, S, s);
    a = ssm__dv_alpha(D, tt, j), bt = ssm__dv_scalar(D, D->beta, p->st.beta, tt, j);
    ssm__dv_load(D, D->k, p->st.k, tt, j, p->K, D->kv);
    ssm__dv_load(D, D->v, p->st.v, tt, j, p->V, D->vv);
    ssm__dv_load(D, D->q, p->st.q, tt, 0, p->K, D->x1);
    ssm__dv_stx2(D->dt, S, p->K, p->V, D->kv, D->x1, D->r, D->w);
    for (c = 0; c < p->K; ++c) kq += D->kv[c] * D->x1[c];
    /* D->w holds S^T q; D->r holds S^T k */
    for (c = 0; c < p->V; ++c) {
        const double wc = bt * (D->vv[c] - a * D->r[c]);
        D->vv[c] = wc;                              /* the update's column vector */
        D->w[c] = a * D->w[c] + wc * kq;            /* S'^T q                     */
    }
    ssm__dv_rank1(D->dt, S, p->K, p->V, a, D->kv, D->vv);
    ssm__dv_store(D, o, p->st.o, tt, 0, p->V, p->scale, D->w);
}

/* Scratch vectors at the start of the workspace (doubles). */
static size_t ssm__dv_vec_bytes(const ssm_delta_plan *p) {
    return SSM__DV_ALIGN(sizeof(double) * (size_t)(3 * p->K + 3 * p->V));
}
static void ssm__dv_init(ssm__dv *D, const ssm_delta_plan *p, const ssm_tensor *q, const ssm_tensor *k,
                         const ssm_tensor *v, const ssm_tensor *beta, const ssm_tensor *g, void *ws) {
    double *d = (double *)ws;
    memset(D, 0, sizeof *D);
    D->p = p, D->dt = p->dtype, D->es = ssm__esize(p->dtype);
    D->q = q, D->k = k, D->v = v, D->beta = beta, D->g = g;
    D->kv = d, D->x1 = d + p->K, D->x2 = d + 2 * p->K;
    D->vv = d + 3 * p->K, D->r = D->vv + p->V, D->w = D->r + p->V;
}

static ssm_result ssm__delta_recurrent(ssm_ctx *ctx, const ssm_delta_plan *p, const ssm_tensor *q,
                                       const ssm_tensor *k, const ssm_tensor *v, const ssm_tensor *beta,
                                       const ssm_tensor *g, const ssm_tensor *s0, const ssm_tensor *cu,
                                       ssm_tensor *o, ssm_tensor *sT) {
    void *ws;
    ssm__dv D;
    ssm__dv_mat S;
    int64_t n, s, len;
    SSM__TRY(ssm_ctx_workspace(ctx, p->workspace_bytes, &ws));
    ssm__dv_init(&D, p, q, k, v, beta, g, ws);
    S = ssm__dv_mat_make((char *)ws + ssm__dv_vec_bytes(p), p->V, 1);
    for (n = 0; n < p->N; ++n)
        for (D.h = 0; D.h < p->H; ++D.h) {
            ssm__dv_mat m0;
            ssm__dv_seq(p, cu, n, &D.b, &D.t0, &len);
            if (s0) m0 = ssm__dv_state(s0, p->st.s0, n, D.h, D.es);
            ssm__dv_copy(p->dtype, p->K, p->V, s0 ? &m0 : NULL, S);
            for (s = 0; s < len; ++s) ssm__dv_token(&D, S, s, o);
            if (sT) ssm__dv_copy(p->dtype, p->K, p->V, &S, ssm__dv_state(sT, p->st.sT, n, D.h, D.es));
        }
    return SSM_OK;
}

static ssm_result ssm__delta_step_generic(ssm_ctx *ctx, const ssm_delta_plan *p, const ssm_tensor *q,
                                          const ssm_tensor *k, const ssm_tensor *v, const ssm_tensor *beta,
                                          const ssm_tensor *g, ssm_tensor *state, ssm_tensor *o) {
    void *ws;
    ssm__dv D;
    SSM__TRY(ssm_ctx_workspace(ctx, p->workspace_bytes, &ws));
    ssm__dv_init(&D, p, q, k, v, beta, g, ws);
    for (D.b = 0; D.b < p->B; ++D.b)
        for (D.h = 0; D.h < p->H; ++D.h) {
            ssm__dv_mat S = ssm__dv_state(state, p->st.s0, D.b, D.h, D.es); /* in place */
            ssm__dv_token(&D, S, 0, o);
        }
    return SSM_OK;
}

/* Chunked WY/UT form of one sequence-head on the backend's GEMM (see the header). The
   sub-tokens are packed into zero-padded whole chunks (k = v = beta = g = 0 there: identity
   steps); every product is a GEMM, batched over the chunks where nothing carries across them. */
typedef struct ssm__dvc {
    int64_t C, NC, Lp;
    double *bt, *G, *tmp, *dG, *ga, *gr; /* Lp, Lp, C x 4 (doubles)                         */
    /* dtype buffers. Both passes: Kc, Qc [Lp,K] (q on readout rows only), X = diag(beta e^G) K,
       W [Lp,K], Vc = diag(beta) V, U [Lp,V], Am [NC,C,C] (K K^T, then Tm), P [NC,C,C], S [K,V],
       Ob [C,V]. Backward only: KK [NC,C,C], Vr [Lp,V] (raw
       v), dO [Lp,V], ck [NC+1,K,V] (the segment's chunk-start states), dS, dS0 [K,V], C x C: dP, dA, dT, tc;
       C x K: dQ, dK, dW, dX, Kd; C x V: dN, dY, R1; cs: the states at segment starts. Lp covers
       one segment of at most SSM__DELTA_SEG chunks. */
    char *Kc, *Qc, *X, *W, *Vc, *U, *Am, *P, *S, *Ob;
    char *KK, *Vr, *dO, *ck, *cs, *dS, *dS0, *dP, *dA, *dT, *tc, *dQ, *dK, *dW, *dX, *Kd, *dN, *dY, *R1;
} ssm__dvc;

static int64_t ssm__dv_chunks(const ssm_delta_plan *p, int64_t C) {
    int64_t L = p->max_len * p->n_h;
    return L > 0 ? (L + C - 1) / C : 1;
}

/* Both passes pack and solve SSM__DELTA_SEG chunks at a time: the batched GEMMs stay large and
   the scratch stays in cache and does not grow with T (the backward keeps one state per
   segment start, and recomputes each segment before differentiating it). */
#define SSM__DELTA_SEG 16

/* Carves the chunked scratch out of `base` (NULL: only counts); returns the bytes. */
static size_t ssm__dvc_layout(const ssm_delta_plan *p, char *base, ssm__dvc *w, int backward) {
    size_t es = ssm__esize(p->dtype), off = ssm__dv_vec_bytes(p);
    int64_t C = p->chunk, NC = ssm__dv_chunks(p, C), Lp, K = p->K, V = p->V;
#define SSM__DV_TAKE(field, n, size)                                          \
    do {                                                                      \
        if (w) w->field = (base + off);                                       \
        off += SSM__DV_ALIGN((size_t)(n) * (size));                           \
    } while (0)
#define SSM__DV_TAKED(field, n)                                               \
    do {                                                                      \
        if (w) w->field = (double *)(void *)(base + off);                     \
        off += SSM__DV_ALIGN((size_t)(n) * sizeof(double));                   \
    } while (0)
    const int64_t nseg = (NC + SSM__DELTA_SEG - 1) / SSM__DELTA_SEG;
    if (NC > SSM__DELTA_SEG) NC = SSM__DELTA_SEG; /* both passes work a segment at a time */
    Lp = NC * C;
    if (w) memset(w, 0, sizeof *w), w->C = C, w->NC = NC, w->Lp = Lp;
    SSM__DV_TAKED(bt, Lp);
    SSM__DV_TAKED(G, Lp);
    SSM__DV_TAKED(tmp, C);
    SSM__DV_TAKED(dG, C);
    SSM__DV_TAKED(ga, C);
    SSM__DV_TAKED(gr, C);
    SSM__DV_TAKE(Kc, Lp * K, es);
    SSM__DV_TAKE(Qc, Lp * K, es);
    SSM__DV_TAKE(X, Lp * K, es);
    SSM__DV_TAKE(W, Lp * K, es);
    SSM__DV_TAKE(Vc, Lp * V, es);
    SSM__DV_TAKE(U, Lp * V, es);
    SSM__DV_TAKE(Am, NC * C * C, es);
    SSM__DV_TAKE(S, K * V, es);
    SSM__DV_TAKE(Ob, C * V, es);
    SSM__DV_TAKE(P, NC * C * C, es);
    if (!backward) return off;
    SSM__DV_TAKE(KK, NC * C * C, es);
    SSM__DV_TAKE(Vr, Lp * V, es);
    SSM__DV_TAKE(dO, Lp * V, es);
    SSM__DV_TAKE(ck, (NC + 1) * K * V, es);
    SSM__DV_TAKE(cs, (nseg + 1) * K * V, es);
    SSM__DV_TAKE(dS, K * V, es);
    SSM__DV_TAKE(dS0, K * V, es);
    SSM__DV_TAKE(dP, C * C, es);
    SSM__DV_TAKE(dA, C * C, es);
    SSM__DV_TAKE(dT, C * C, es);
    SSM__DV_TAKE(tc, C * C, es);
    SSM__DV_TAKE(dQ, C * K, es);
    SSM__DV_TAKE(dK, C * K, es);
    SSM__DV_TAKE(dW, C * K, es);
    SSM__DV_TAKE(dX, C * K, es);
    SSM__DV_TAKE(Kd, C * K, es);
    SSM__DV_TAKE(dN, C * V, es);
    SSM__DV_TAKE(dY, C * V, es);
    SSM__DV_TAKE(R1, C * V, es);
#undef SSM__DV_TAKE
#undef SSM__DV_TAKED
    return off;
}

/* element i of a dtype buffer */
#define SSM__DV_E(buf, i) ((buf) + (int64_t)(i) * (int64_t)es)
#define SSM__DV_GET(buf, i) SSM__LOAD(dt, SSM__DV_E(buf, i))
#define SSM__DV_PUT(buf, i, x) SSM__STORE(dt, SSM__DV_E(buf, i), x)

/* C = alpha A B + beta C for one row-major product: A is M x Kd with strides (ars, acs), B is
   Kd x N with (brs, bcs), C is M x N with leading dimension ldc. */
static ssm_result ssm__dv_gemm(ssm_ctx *ctx, ssm_dtype dt, int64_t M, int64_t N, int64_t Kd, double alpha,
                               const char *A, int64_t ars, int64_t acs, const char *B, int64_t brs, int64_t bcs,
                               double beta, char *C, int64_t ldc) {
    return ssm_ctx_gemm(ctx, dt, 1, M, N, Kd, alpha, ssm__mb((void *)A, ars, acs), ssm__mb((void *)B, brs, bcs), beta,
                        ssm__mb(C, ldc, 1));
}

/* Packs sub-tokens [s0, s0 + Lp) of the current sequence-head (L of them real), chunk-aligned
   (and, in the backward, raw v and dO = scale * dout on the readout rows). */
static void ssm__dvc_pack(ssm__dv *D, ssm__dvc *w, int64_t s0, int64_t L, const ssm_tensor *dout) {
    const ssm_delta_plan *p = D->p;
    const ssm_dtype dt = p->dtype;
    const size_t es = D->es;
    const int64_t K = p->K, V = p->V, nh = p->n_h, C = w->C;
    int64_t r, s, f;
    for (r = 0; r < w->Lp; ++r) {
        int64_t tt, j;
        s = s0 + r, tt = s / nh, j = s % nh;
        double gs = 0.0, xs;
        int readout = s < L && j == nh - 1;
        if (s < L) {
            ssm__dv_load(D, D->k, p->st.k, tt, j, K, D->x1);
            ssm__dv_load(D, D->v, p->st.v, tt, j, V, D->vv);
            w->bt[r] = ssm__dv_scalar(D, D->beta, p->st.beta, tt, j);
            if (D->g && j == 0) gs = ssm__dv_scalar(D, D->g, p->st.g, tt, 0);
        } else {
            for (f = 0; f < K; ++f) D->x1[f] = 0.0;
            for (f = 0; f < V; ++f) D->vv[f] = 0.0;
            w->bt[r] = 0.0;
        }
        if (readout) ssm__dv_load(D, D->q, p->st.q, tt, 0, K, D->x2);
        else for (f = 0; f < K; ++f) D->x2[f] = 0.0;
        w->G[r] = (r % C ? w->G[r - 1] : 0.0) + gs;
        xs = w->bt[r] * (D->g ? exp(w->G[r]) : 1.0);
        ssm__dv_put_row(dt, SSM__DV_E(w->Kc, r * K), D->x1, K, 1.0);
        ssm__dv_put_row(dt, SSM__DV_E(w->Qc, r * K), D->x2, K, 1.0);
        ssm__dv_put_row(dt, SSM__DV_E(w->X, r * K), D->x1, K, xs);
        ssm__dv_put_row(dt, SSM__DV_E(w->Vc, r * V), D->vv, V, w->bt[r]);
        if (w->Vr) ssm__dv_put_row(dt, SSM__DV_E(w->Vr, r * V), D->vv, V, 1.0);
        if (w->dO) {
            if (readout && dout) ssm__dv_load(D, dout, p->st.dout, tt, 0, V, D->w);
            else for (f = 0; f < V; ++f) D->w[f] = 0.0;
            ssm__dv_put_row(dt, SSM__DV_E(w->dO, r * V), D->w, V, p->scale);
        }
    }
}

/* The per-step factors of chunk c, ga[i] = e^(G_i - G_(i-1)), so a row of
   Gamma_ij = e^(G_i - G_j) (j <= i) is a running product: one exp per sub-token instead of one
   per pair, and a strong gate underflows the product to 0 (never inf * 0). */
static void ssm__dvc_steps(ssm__dvc *w, int64_t c) {
    const double *G = w->G + c * w->C;
    int64_t i;
    w->ga[0] = 1.0;
    for (i = 1; i < w->C; ++i) w->ga[i] = exp(G[i] - G[i - 1]);
}
static void ssm__dvc_gamma_row(ssm__dvc *w, int64_t i) {
    int64_t j;
    w->gr[i] = 1.0;
    for (j = i - 1; j >= 0; --j) w->gr[j] = w->gr[j + 1] * w->ga[j + 1];
}

/* Per chunk: P = tril(P . Gamma); A_ij = beta_i Gamma_ij (K K^T)_ij below the diagonal; then
   Tm = (I + A)^-1 in place by forward substitution (row i of Tm from rows j < i). */
#define SSM__DV_PREP(T)                                                                        \
    for (i = 0; i < C; ++i) {                                                                  \
        T *prow = P + i * C, *arow = A + i * C;                                                \
        if (gated) ssm__dvc_gamma_row(w, i);                                                   \
        for (j = 0; j <= i; ++j) {                                                             \
            double gm = gated ? w->gr[j] : 1.0;                                                \
            prow[j] = (T)(gm * (double)prow[j]);                                               \
            if (j < i) arow[j] = (T)(bt[i] * gm * (double)arow[j]);                            \
        }                                                                                      \
        for (j = i + 1; j < C; ++j) prow[j] = (T)0;                                            \
    }                                                                                          \
    for (i = 0; i < C; ++i) {                                                                  \
        T *arow = A + i * C;                                                                   \
        for (jj = 0; jj < i; ++jj) w->tmp[jj] = 0.0;                                           \
        for (j = 0; j < i; ++j) {                                                              \
            const double a = (double)arow[j];                                                  \
            const T *trow = A + j * C;                                                         \
            if (a == 0.0) continue;                                                            \
            for (jj = 0; jj <= j; ++jj) w->tmp[jj] -= a * (double)trow[jj];                    \
        }                                                                                      \
        for (jj = 0; jj < i; ++jj) arow[jj] = (T)w->tmp[jj];                                   \
        arow[i] = (T)1;                                                                        \
        for (jj = i + 1; jj < C; ++jj) arow[jj] = (T)0;                                        \
    }
static void ssm__dvc_solve(ssm_dtype dt, ssm__dvc *w, int64_t c, int gated) {
    const int64_t C = w->C;
    const double *bt = w->bt + c * C;
    int64_t i, j, jj;
    if (gated) ssm__dvc_steps(w, c);
    if (dt.bits == 64) {
        double *A = (double *)(void *)w->Am + c * C * C, *P = (double *)(void *)w->P + c * C * C;
        SSM__DV_PREP(double)
    } else {
        float *A = (float *)(void *)w->Am + c * C * C, *P = (float *)(void *)w->P + c * C * C;
        SSM__DV_PREP(float)
    }
}

/* Am = K K^T (kept in KK for the backward) and P = Q K^T, batched over the chunks; per chunk
   the gates and Tm = (I + A)^-1; then W = Tm X and U = Tm diag(beta) V, batched. */
static ssm_result ssm__dvc_prepare(ssm_ctx *ctx, ssm_dtype dt, ssm__dvc *w, int64_t K, int64_t V, int gated) {
    const size_t es = ssm__esize(dt);
    const int64_t C = w->C, NC = w->NC;
    int64_t c;
    ssm_matrix_batch mA, mB, mC;
    mA = ssm__mb(w->Kc, K, 1), mA.bs = C * K;
    mB = ssm__mb(w->Kc, 1, K), mB.bs = C * K;
    mC = ssm__mb(w->Am, C, 1), mC.bs = C * C;
    SSM__TRY(ssm_ctx_gemm(ctx, dt, NC, C, C, K, 1.0, mA, mB, 0.0, mC));
    if (w->KK) memcpy(w->KK, w->Am, (size_t)(NC * C * C) * es);
    mA = ssm__mb(w->Qc, K, 1), mA.bs = C * K;
    mC = ssm__mb(w->P, C, 1), mC.bs = C * C;
    SSM__TRY(ssm_ctx_gemm(ctx, dt, NC, C, C, K, 1.0, mA, mB, 0.0, mC));
    for (c = 0; c < NC; ++c) ssm__dvc_solve(dt, w, c, gated);
    mA = ssm__mb(w->Am, C, 1), mA.bs = C * C;
    mB = ssm__mb(w->X, K, 1), mB.bs = C * K;
    mC = ssm__mb(w->W, K, 1), mC.bs = C * K;
    SSM__TRY(ssm_ctx_gemm(ctx, dt, NC, C, K, C, 1.0, mA, mB, 0.0, mC));
    mB = ssm__mb(w->Vc, V, 1), mB.bs = C * V;
    mC = ssm__mb(w->U, V, 1), mC.bs = C * V;
    return ssm_ctx_gemm(ctx, dt, NC, C, V, C, 1.0, mA, mB, 0.0, mC);
}

/* dst = diag(e^(G_last - G_i)) K of chunk c: the keys as they reach the chunk's end. */
static void ssm__dvc_decayed_keys(ssm_dtype dt, const ssm__dvc *w, int64_t c, int64_t K, char *dst) {
    const size_t es = ssm__esize(dt);
    const int64_t C = w->C;
    const double gl = w->G[c * C + C - 1];
    int64_t i;
    memcpy(dst, SSM__DV_E(w->Kc, c * C * K), (size_t)(C * K) * es);
    for (i = 0; i < C; ++i) ssm__dv_scale_row(dt, SSM__DV_E(dst, i * K), K, exp(gl - w->G[c * C + i]));
}

/* S <- e^(G_last) S + Kd^T N with Kd the decayed keys (the chunk's keys when ungated). */
static ssm_result ssm__dvc_advance(ssm_ctx *ctx, ssm_dtype dt, const ssm__dvc *w, int64_t c, int64_t K, int64_t V,
                                   int gated, char *Kd, const char *N, char *S) {
    const size_t es = ssm__esize(dt);
    if (gated) {
        ssm__dv_scale_row(dt, S, K * V, exp(w->G[c * w->C + w->C - 1]));
        ssm__dvc_decayed_keys(dt, w, c, K, Kd);
    } else {
        Kd = SSM__DV_E(w->Kc, c * w->C * K);
    }
    return ssm__dv_gemm(ctx, dt, K, V, w->C, 1.0, Kd, 1, K, N, V, 1, 1.0, S, V);
}

static ssm_result ssm__delta_chunked(ssm_ctx *ctx, const ssm_delta_plan *p, const ssm_tensor *q,
                                     const ssm_tensor *k, const ssm_tensor *v, const ssm_tensor *beta,
                                     const ssm_tensor *g, const ssm_tensor *s0, const ssm_tensor *cu,
                                     ssm_tensor *o, ssm_tensor *sT) {
    const ssm_dtype dt = p->dtype;
    const size_t es = ssm__esize(dt);
    const int64_t K = p->K, V = p->V, nh = p->n_h;
    void *ws;
    ssm__dv D;
    ssm__dvc w;
    int64_t n, len, s, s0s, c, i, f, C;
    SSM__TRY(ssm_ctx_workspace(ctx, p->workspace_bytes, &ws));
    ssm__dv_init(&D, p, q, k, v, beta, g, ws);
    ssm__dvc_layout(p, (char *)ws, &w, 0);
    C = w.C;
    for (n = 0; n < p->N; ++n)
        for (D.h = 0; D.h < p->H; ++D.h) {
            ssm__dv_mat S = ssm__dv_mat_make(w.S, V, 1), m0;
            int64_t L;
            ssm__dv_seq(p, cu, n, &D.b, &D.t0, &len);
            if (s0) m0 = ssm__dv_state(s0, p->st.s0, n, D.h, D.es);
            ssm__dv_copy(dt, K, V, s0 ? &m0 : NULL, S);
            L = len * nh;
            for (s0s = 0; s0s < L; s0s += SSM__DELTA_SEG * C) {
                w.NC = SSM__MIN(SSM__DELTA_SEG, (L - s0s + C - 1) / C), w.Lp = w.NC * C;
                ssm__dvc_pack(&D, &w, s0s, L, NULL);
                SSM__TRY(ssm__dvc_prepare(ctx, dt, &w, K, V, g != NULL));
                for (c = 0; c < w.NC; ++c) { /* the state pass, chunk by chunk */
                    char *Uc = SSM__DV_E(w.U, c * C * V), *Pc = SSM__DV_E(w.P, c * C * C);
                    /* N = U - W S (into U) */
                    SSM__TRY(ssm__dv_gemm(ctx, dt, C, V, K, -1.0, SSM__DV_E(w.W, c * C * K), K, 1, w.S, V, 1, 1.0,
                                          Uc, V));
                    /* o = e^G Q S + P N on the readout rows */
                    SSM__TRY(ssm__dv_gemm(ctx, dt, C, V, K, 1.0, SSM__DV_E(w.Qc, c * C * K), K, 1, w.S, V, 1, 0.0,
                                          w.Ob, V));
                    if (g)
                        for (i = 0; i < C; ++i) ssm__dv_scale_row(dt, SSM__DV_E(w.Ob, i * V), V, exp(w.G[c * C + i]));
                    SSM__TRY(ssm__dv_gemm(ctx, dt, C, V, C, 1.0, Pc, C, 1, Uc, V, 1, 1.0, w.Ob, V));
                    for (i = 0; i < C; ++i) {
                        s = s0s + c * C + i;
                        if (s >= L || s % nh != nh - 1) continue;
                        for (f = 0; f < V; ++f) D.w[f] = SSM__DV_GET(w.Ob, i * V + f);
                        ssm__dv_store(&D, o, p->st.o, s / nh, 0, V, p->scale, D.w);
                    }
                    /* the keys' X rows of this chunk are spent: they take the decayed keys */
                    SSM__TRY(ssm__dvc_advance(ctx, dt, &w, c, K, V, g != NULL, SSM__DV_E(w.X, c * C * K), Uc, w.S));
                }
            }
            if (sT) ssm__dv_copy(dt, K, V, &S, ssm__dv_state(sT, p->st.sT, n, D.h, D.es));
        }
    return SSM_OK;
}

/* One segment of the state pass from sub-token sb: pack, prepare, then per chunk N = U - W S
   (into U) and the state's advance; S is the running state, or with ck the chunk-start states
   are kept (ck[0] given, ck[c+1] written). */
static ssm_result ssm__dvc_segment(ssm_ctx *ctx, ssm__dv *D, ssm__dvc *w, int64_t sb, int64_t L,
                                   const ssm_tensor *dout, char *S, char *ck) {
    const ssm_dtype dt = D->dt;
    const size_t es = D->es;
    const int64_t K = D->p->K, V = D->p->V, KV = K * V, C = w->C;
    int64_t c;
    w->NC = SSM__MIN(SSM__DELTA_SEG, (L - sb + C - 1) / C), w->Lp = w->NC * C;
    ssm__dvc_pack(D, w, sb, L, dout);
    SSM__TRY(ssm__dvc_prepare(ctx, dt, w, K, V, D->g != NULL));
    for (c = 0; c < w->NC; ++c) {
        char *Sc = ck ? SSM__DV_E(ck, c * KV) : S, *Uc = SSM__DV_E(w->U, c * C * V);
        SSM__TRY(ssm__dv_gemm(ctx, dt, C, V, K, -1.0, SSM__DV_E(w->W, c * C * K), K, 1, Sc, V, 1, 1.0, Uc, V));
        if (ck) memcpy(SSM__DV_E(ck, (c + 1) * KV), Sc, (size_t)KV * es);
        SSM__TRY(ssm__dvc_advance(ctx, dt, w, c, K, V, D->g != NULL, w->Kd, Uc, ck ? SSM__DV_E(ck, (c + 1) * KV) : S));
    }
    return SSM_OK;
}

/* Chunked backward, a segment of SSM__DELTA_SEG chunks at a time: a forward state pass keeps the
   states at segment starts (skipped for a one-segment sequence); then each segment, last first,
   is recomputed (its batched chunk quantities, chunk-start states and N = U - W S) and its chunks
   differentiated in reverse, with dS the adjoint of the chunk-end state and dO = scale * dout on
   the readout rows:
     dN  = P^T dO + Kd dS                          dS' = e^(G_C) dS + Q^T diag(e^G) dO - W^T dN
     dQ  = diag(e^G) dO S'^T + (dO N^T . M) K       M = tril . e^(G_i - G_j)
     dW  = -dN S'^T,  dX = Tm^T dW,  dY = Tm^T dN,  dTm = dW X^T + dN Y^T,  dA = -Tm^T dTm Tm^T
     dK  = (dO N^T . M)^T Q + diag(e^(G_C - G)) N dS^T + diag(beta e^G) dX + (dA')K + (dA')^T K
     dV  = diag(beta) dY,  dbeta and dG from the same terms, dg = the in-chunk suffix sums of dG
   with dA'_ij = dA_ij beta_i e^(G_i - G_j) (i > j). About 3x the forward's GEMM work (4x for
   sequences over one segment). */
static ssm_result ssm__delta_chunked_backward(ssm_ctx *ctx, const ssm_delta_plan *p, const ssm_tensor *q,
                                              const ssm_tensor *k, const ssm_tensor *v, const ssm_tensor *beta,
                                              const ssm_tensor *g, const ssm_tensor *s0, const ssm_tensor *cu,
                                              const ssm_tensor *dout, const ssm_tensor *dsT, ssm_tensor *dq,
                                              ssm_tensor *dk, ssm_tensor *dv, ssm_tensor *dbeta, ssm_tensor *dg,
                                              ssm_tensor *ds0) {
    const ssm_dtype dt = p->dtype;
    const size_t es = ssm__esize(dt);
    const int64_t K = p->K, V = p->V, nh = p->n_h, KV = p->K * p->V;
    const int gated = g != NULL;
    void *ws;
    ssm__dv D;
    ssm__dvc w;
    int64_t n, len, c, i, j, f, C, sg, nseg;
    SSM__TRY(ssm_ctx_workspace(ctx, p->workspace_bytes, &ws));
    ssm__dv_init(&D, p, q, k, v, beta, g, ws);
    ssm__dvc_layout(p, (char *)ws, &w, 1);
    C = w.C;
    for (n = 0; n < p->N; ++n)
        for (D.h = 0; D.h < p->H; ++D.h) {
            ssm__dv_mat dS = ssm__dv_mat_make(w.dS, V, 1), m0;
            int64_t L;
            ssm__dv_seq(p, cu, n, &D.b, &D.t0, &len);
            L = len * nh;
            if (dsT) m0 = ssm__dv_state(dsT, p->st.dsT, n, D.h, D.es);
            ssm__dv_copy(dt, K, V, dsT ? &m0 : NULL, dS);
            nseg = L > 0 ? ((L + C - 1) / C + SSM__DELTA_SEG - 1) / SSM__DELTA_SEG : 0;
            if (s0) m0 = ssm__dv_state(s0, p->st.s0, n, D.h, D.es);
            ssm__dv_copy(dt, K, V, s0 ? &m0 : NULL, ssm__dv_mat_make(w.cs, V, 1));
            for (sg = 0; sg + 1 < nseg; ++sg) { /* the states at segment starts */
                memcpy(SSM__DV_E(w.cs, (sg + 1) * KV), SSM__DV_E(w.cs, sg * KV), (size_t)KV * es);
                SSM__TRY(ssm__dvc_segment(ctx, &D, &w, sg * SSM__DELTA_SEG * C, L, NULL, SSM__DV_E(w.cs, (sg + 1) * KV),
                                          NULL));
            }
            for (sg = nseg - 1; sg >= 0; --sg) { /* recompute a segment (U becomes N), then its chunks in reverse */
                const int64_t sb = sg * SSM__DELTA_SEG * C;
                memcpy(w.ck, SSM__DV_E(w.cs, sg * KV), (size_t)KV * es);
                SSM__TRY(ssm__dvc_segment(ctx, &D, &w, sb, L, dout, NULL, w.ck));
                for (c = w.NC - 1; c >= 0; --c) {
                    char *Kc = SSM__DV_E(w.Kc, c * C * K), *Qc = SSM__DV_E(w.Qc, c * C * K);
                    char *Xc = SSM__DV_E(w.X, c * C * K), *Wc = SSM__DV_E(w.W, c * C * K);
                    char *Nc = SSM__DV_E(w.U, c * C * V), *Yc = SSM__DV_E(w.Vc, c * C * V);
                    char *Vr = SSM__DV_E(w.Vr, c * C * V), *dOc = SSM__DV_E(w.dO, c * C * V);
                    char *Tm = SSM__DV_E(w.Am, c * C * C), *Pc = SSM__DV_E(w.P, c * C * C);
                    char *KKc = SSM__DV_E(w.KK, c * C * C), *S0 = SSM__DV_E(w.ck, c * KV);
                    const double *G = w.G + c * C, *bt = w.bt + c * C;
                    const double gl = G[C - 1], gC = gated ? exp(gl) : 1.0;
                    double *dG = w.dG;
                    for (i = 0; i < C; ++i) dG[i] = 0.0;
                    /* R1 = Kd dS, dN = R1 + P^T dO; the state term of dG: z_i = R1_i . N_i */
                    if (gated) ssm__dvc_decayed_keys(dt, &w, c, K, w.Kd);
                    SSM__TRY(ssm__dv_gemm(ctx, dt, C, V, K, 1.0, gated ? w.Kd : Kc, K, 1, w.dS, V, 1, 0.0, w.R1, V));
                    if (gated) {
                        double zs = ssm__dv_dot(dt, w.dS, S0, KV) * gC;
                        for (i = 0; i < C; ++i) {
                            double z = 0.0;
                            for (f = 0; f < V; ++f) z += SSM__DV_GET(w.R1, i * V + f) * SSM__DV_GET(Nc, i * V + f);
                            dG[i] -= z, zs += z;
                        }
                        dG[C - 1] += zs;
                    }
                    memcpy(w.dN, w.R1, (size_t)(C * V) * es);
                    SSM__TRY(ssm__dv_gemm(ctx, dt, C, V, C, 1.0, Pc, 1, C, dOc, V, 1, 1.0, w.dN, V));
                    /* dP = dO N^T . M (and the gates' share: rows minus columns of dP . P) */
                    SSM__TRY(ssm__dv_gemm(ctx, dt, C, C, V, 1.0, dOc, V, 1, Nc, 1, V, 0.0, w.dP, C));
                    if (gated) ssm__dvc_steps(&w, c);
                    for (i = 0; i < C; ++i) {
                        if (gated) ssm__dvc_gamma_row(&w, i);
                        for (j = 0; j < C; ++j) {
                            double x = j > i ? 0.0 : SSM__DV_GET(w.dP, i * C + j);
                            if (gated && j <= i) {
                                double z = x * SSM__DV_GET(Pc, i * C + j);
                                dG[i] += z, dG[j] -= z;
                                x *= w.gr[j];
                            }
                            SSM__DV_PUT(w.dP, i * C + j, x);
                        }
                    }
                    /* dQ = diag(e^G) dO S'^T + dP K (the O term of dG: e^G_i q_i . (dO S'^T)_i) */
                    SSM__TRY(ssm__dv_gemm(ctx, dt, C, K, V, 1.0, dOc, V, 1, S0, 1, V, 0.0, w.dQ, K));
                    if (gated)
                        for (i = 0; i < C; ++i) {
                            double e = exp(G[i]), z = 0.0;
                            for (f = 0; f < K; ++f) {
                                double r = SSM__DV_GET(w.dQ, i * K + f);
                                z += r * SSM__DV_GET(Qc, i * K + f);
                                SSM__DV_PUT(w.dQ, i * K + f, e * r);
                            }
                            dG[i] += e * z;
                        }
                    SSM__TRY(ssm__dv_gemm(ctx, dt, C, K, C, 1.0, w.dP, C, 1, Kc, K, 1, 1.0, w.dQ, K));
                    /* dS' = e^(G_C) dS + Q^T diag(e^G) dO - W^T dN (R1 <- diag(e^G) dO) */
                    for (i = 0; i < C; ++i) {
                        double e = gated ? exp(G[i]) : 1.0;
                        for (f = 0; f < V; ++f) SSM__DV_PUT(w.R1, i * V + f, e * SSM__DV_GET(dOc, i * V + f));
                    }
                    for (i = 0; i < KV; ++i) SSM__DV_PUT(w.dS0, i, gC * SSM__DV_GET(w.dS, i));
                    SSM__TRY(ssm__dv_gemm(ctx, dt, K, V, C, 1.0, Qc, 1, K, w.R1, V, 1, 1.0, w.dS0, V));
                    SSM__TRY(ssm__dv_gemm(ctx, dt, K, V, C, -1.0, Wc, 1, K, w.dN, V, 1, 1.0, w.dS0, V));
                    /* dW = -dN S'^T, dX = Tm^T dW, dY = Tm^T dN, dTm = dW X^T + dN Y^T, dA = -Tm^T dTm Tm^T */
                    SSM__TRY(ssm__dv_gemm(ctx, dt, C, K, V, -1.0, w.dN, V, 1, S0, 1, V, 0.0, w.dW, K));
                    SSM__TRY(ssm__dv_gemm(ctx, dt, C, K, C, 1.0, Tm, 1, C, w.dW, K, 1, 0.0, w.dX, K));
                    SSM__TRY(ssm__dv_gemm(ctx, dt, C, V, C, 1.0, Tm, 1, C, w.dN, V, 1, 0.0, w.dY, V));
                    SSM__TRY(ssm__dv_gemm(ctx, dt, C, C, K, 1.0, w.dW, K, 1, Xc, 1, K, 0.0, w.dT, C));
                    SSM__TRY(ssm__dv_gemm(ctx, dt, C, C, V, 1.0, w.dN, V, 1, Yc, 1, V, 1.0, w.dT, C));
                    SSM__TRY(ssm__dv_gemm(ctx, dt, C, C, C, 1.0, Tm, 1, C, w.dT, C, 1, 0.0, w.tc, C));
                    SSM__TRY(ssm__dv_gemm(ctx, dt, C, C, C, -1.0, w.tc, C, 1, Tm, 1, C, 0.0, w.dA, C));
                    /* dbeta and dG from X = diag(beta e^G) K, Y = diag(beta) V and A; dA <- dA' */
                    for (i = 0; i < C; ++i) {
                        double e = gated ? exp(G[i]) : 1.0, xk = 0.0, yv = 0.0, ak = 0.0;
                        if (gated) ssm__dvc_gamma_row(&w, i);
                        for (f = 0; f < K; ++f) xk += SSM__DV_GET(w.dX, i * K + f) * SSM__DV_GET(Kc, i * K + f);
                        for (f = 0; f < V; ++f) yv += SSM__DV_GET(w.dY, i * V + f) * SSM__DV_GET(Vr, i * V + f);
                        for (j = 0; j < C; ++j) {
                            double a = j < i ? SSM__DV_GET(w.dA, i * C + j) : 0.0, ga = gated && j < i ? w.gr[j] : 1.0;
                            double kk = SSM__DV_GET(KKc, i * C + j);
                            ak += a * ga * kk;
                            if (gated && j < i) {
                                double z = a * bt[i] * ga * kk;
                                dG[i] += z, dG[j] -= z;
                            }
                            SSM__DV_PUT(w.dA, i * C + j, a * bt[i] * ga);
                        }
                        D.w[0] = e * xk + yv + ak; /* dbeta_i */
                        if (gated) dG[i] += bt[i] * e * xk;
                        w.tmp[i] = D.w[0];
                    }
                    /* dK = dP^T Q + diag(e^(G_C - G)) N dS^T + diag(beta e^G) dX + dA' K + dA'^T K */
                    SSM__TRY(ssm__dv_gemm(ctx, dt, C, K, C, 1.0, w.dP, 1, C, Qc, K, 1, 0.0, w.dK, K));
                    SSM__TRY(ssm__dv_gemm(ctx, dt, C, K, C, 1.0, w.dA, C, 1, Kc, K, 1, 1.0, w.dK, K));
                    SSM__TRY(ssm__dv_gemm(ctx, dt, C, K, C, 1.0, w.dA, 1, C, Kc, K, 1, 1.0, w.dK, K));
                    SSM__TRY(ssm__dv_gemm(ctx, dt, C, K, V, 1.0, Nc, V, 1, w.dS, 1, V, 0.0, w.Kd, K));
                    for (i = 0; i < C; ++i) {
                        double lam = gated ? exp(gl - G[i]) : 1.0, xs = bt[i] * (gated ? exp(G[i]) : 1.0);
                        for (f = 0; f < K; ++f)
                            SSM__DV_PUT(w.dK, i * K + f,
                                        SSM__DV_GET(w.dK, i * K + f) + lam * SSM__DV_GET(w.Kd, i * K + f) +
                                            xs * SSM__DV_GET(w.dX, i * K + f));
                    }
                    /* the rows of this chunk to the gradient tensors; dg = suffix sums of dG */
                    for (i = C - 1; i >= 0; --i) {
                        int64_t s = sb + c * C + i, tt = s / nh, jf = s % nh;
                        if (i < C - 1) dG[i] += dG[i + 1];
                        if (s >= L) continue;
                        if (dq && jf == nh - 1) {
                            for (f = 0; f < K; ++f) D.x1[f] = SSM__DV_GET(w.dQ, i * K + f);
                            ssm__dv_store(&D, dq, p->st.dq, tt, 0, K, 1.0, D.x1);
                        }
                        if (dk) {
                            for (f = 0; f < K; ++f) D.x1[f] = SSM__DV_GET(w.dK, i * K + f);
                            ssm__dv_store(&D, dk, p->st.dk, tt, jf, K, 1.0, D.x1);
                        }
                        if (dv) {
                            for (f = 0; f < V; ++f) D.w[f] = SSM__DV_GET(w.dY, i * V + f);
                            ssm__dv_store(&D, dv, p->st.dv, tt, jf, V, bt[i], D.w);
                        }
                        if (dbeta)
                            SSM__STORE(dt, SSM__DV_AT(dbeta, p->st.dbeta, es, D.b, D.t0 + tt, D.h, jf, 0), w.tmp[i]);
                        if (dg && jf == 0)
                            SSM__STORE(dt, SSM__DV_AT(dg, p->st.dg, es, D.b, D.t0 + tt, D.h, 0, 0), dG[i]);
                    }
                    memcpy(w.dS, w.dS0, (size_t)KV * es);
                }
            }
            if (ds0) ssm__dv_copy(dt, K, V, &dS, ssm__dv_state(ds0, p->st.ds0, n, D.h, D.es));
        }
    return SSM_OK;
}

#undef SSM__DV_GET
#undef SSM__DV_PUT

static ssm_result ssm__delta_forward_generic(ssm_ctx *ctx, const ssm_delta_plan *p, const ssm_tensor *q,
                                             const ssm_tensor *k, const ssm_tensor *v, const ssm_tensor *beta,
                                             const ssm_tensor *g, const ssm_tensor *s0, const ssm_tensor *cu,
                                             ssm_tensor *o, ssm_tensor *sT) {
    if (p->method == SSM_DELTA_CHUNKED) return ssm__delta_chunked(ctx, p, q, k, v, beta, g, s0, cu, o, sT);
    return ssm__delta_recurrent(ctx, p, q, k, v, beta, g, s0, cu, o, sT);
}

/* Backward by replay: the states at every chunk start are kept (one forward pass), then each
   chunk is replayed (its C + 1 states kept) and differentiated sub-token by sub-token in
   reverse. For one factor S = a M + b k v^T, M = S' - b k r^T, r = S'^T k, and the adjoint
   dS of S (readout adds scale q do^T):
     da = <dS, S'> - b (dS^T k).r    dv = b dS^T k    db = (dS^T k).(v - a r)
     dk = b dS (v - a r) - a b S' (dS^T k)           dS' = a (dS - b k (dS^T k)^T)
   and dg = a da at a token's first factor. */
static ssm_result ssm__delta_replay_backward(ssm_ctx *ctx, const ssm_delta_plan *p, const ssm_tensor *q,
                                             const ssm_tensor *k, const ssm_tensor *v, const ssm_tensor *beta,
                                             const ssm_tensor *g, const ssm_tensor *s0, const ssm_tensor *cu,
                                             const ssm_tensor *dout, const ssm_tensor *dsT, ssm_tensor *dq,
                                             ssm_tensor *dk, ssm_tensor *dv, ssm_tensor *dbeta, ssm_tensor *dg,
                                             ssm_tensor *ds0) {
    const ssm_dtype dt = p->dtype;
    const size_t es = ssm__esize(dt), sbytes = SSM__DV_ALIGN((size_t)(p->K * p->V) * es);
    const int64_t K = p->K, V = p->V, nh = p->n_h, C = p->chunk;
    void *ws;
    char *ck, *sb, *dSp;
    double *kd, *dov;
    ssm__dv D;
    int64_t n, len, s, c, f;
    SSM__TRY(ssm_ctx_workspace(ctx, p->workspace_bytes, &ws));
    ssm__dv_init(&D, p, q, k, v, beta, g, ws);
    kd = (double *)(void *)((char *)ws + ssm__dv_vec_bytes(p));
    dov = kd + SSM__MAX(K, V);
    dSp = (char *)ws + ssm__dv_vec_bytes(p) + SSM__DV_ALIGN(sizeof(double) * (size_t)(SSM__MAX(K, V) + V));
    sb = dSp + sbytes;                        /* C + 1 replayed states */
    ck = sb + (size_t)(C + 1) * sbytes;        /* one state per chunk start */
    for (n = 0; n < p->N; ++n)
        for (D.h = 0; D.h < p->H; ++D.h) {
            ssm__dv_mat dS = ssm__dv_mat_make(dSp, V, 1), m0;
            int64_t L, NC;
            ssm__dv_seq(p, cu, n, &D.b, &D.t0, &len);
            L = len * nh;
            NC = (L + C - 1) / C;
            if (s0) m0 = ssm__dv_state(s0, p->st.s0, n, D.h, D.es);
            ssm__dv_copy(dt, K, V, s0 ? &m0 : NULL, ssm__dv_mat_make(ck, V, 1));
            for (c = 0; c + 1 < NC; ++c) { /* checkpoints */
                ssm__dv_mat S = ssm__dv_mat_make(ck + (size_t)(c + 1) * sbytes, V, 1);
                ssm__dv_mat Sp = ssm__dv_mat_make(ck + (size_t)c * sbytes, V, 1);
                ssm__dv_copy(dt, K, V, &Sp, S);
                for (s = c * C; s < (c + 1) * C; ++s) ssm__dv_substep(&D, S, s);
            }
            if (dsT) m0 = ssm__dv_state(dsT, p->st.dsT, n, D.h, D.es);
            ssm__dv_copy(dt, K, V, dsT ? &m0 : NULL, dS);
            for (c = NC - 1; c >= 0; --c) {
                int64_t s1 = SSM__MIN(L, (c + 1) * C);
                ssm__dv_mat ckm = ssm__dv_mat_make(ck + (size_t)c * sbytes, V, 1);
                ssm__dv_copy(dt, K, V, &ckm, ssm__dv_mat_make(sb, V, 1));
                for (s = c * C; s < s1; ++s) {
                    ssm__dv_mat Sp = ssm__dv_mat_make(sb + (size_t)(s - c * C) * sbytes, V, 1);
                    ssm__dv_mat S = ssm__dv_mat_make(sb + (size_t)(s - c * C + 1) * sbytes, V, 1);
                    ssm__dv_copy(dt, K, V, &Sp, S);
                    ssm__dv_substep(&D, S, s);
                }
                for (s = s1 - 1; s >= c * C; --s) {
                    int64_t tt = s / nh, j = s % nh;
                    ssm__dv_mat Sp = ssm__dv_mat_make(sb + (size_t)(s - c * C) * sbytes, V, 1);
                    ssm__dv_mat S = ssm__dv_mat_make(sb + (size_t)(s - c * C + 1) * sbytes, V, 1);
                    double a = ssm__dv_alpha(&D, tt, j), bt = ssm__dv_scalar(&D, beta, p->st.beta, tt, j);
                    double kdr = 0.0, kdv = 0.0;
                    if (j == nh - 1) { /* readout: dq = scale S do, dS += scale q do^T */
                        if (dout) ssm__dv_load(&D, dout, p->st.dout, tt, 0, V, dov);
                        else for (f = 0; f < V; ++f) dov[f] = 0.0;
                        if (dq) {
                            ssm__dv_sx(dt, S, K, V, dov, D.x1);
                            ssm__dv_store(&D, dq, p->st.dq, tt, 0, K, p->scale, D.x1);
                        }
                        ssm__dv_load(&D, q, p->st.q, tt, 0, K, D.x1);
                        for (f = 0; f < K; ++f) D.x1[f] *= p->scale;
                        ssm__dv_rank1(dt, dS, K, V, 1.0, D.x1, dov);
                    }
                    ssm__dv_load(&D, k, p->st.k, tt, j, K, D.kv);
                    ssm__dv_load(&D, v, p->st.v, tt, j, V, D.vv);
                    ssm__dv_stx(dt, Sp, K, V, D.kv, D.r);  /* r = S'^T k   */
                    ssm__dv_stx(dt, dS, K, V, D.kv, kd);   /* dS^T k       */
                    for (f = 0; f < V; ++f) {
                        D.w[f] = D.vv[f] - a * D.r[f];      /* v - a r      */
                        kdr += kd[f] * D.r[f];
                        kdv += kd[f] * D.w[f];
                    }
                    if (dg && j == 0) {
                        double da = ssm__dv_dot(dt, dS.ptr, Sp.ptr, K * V) - bt * kdr;
                        SSM__STORE(dt, SSM__DV_AT(dg, p->st.dg, es, D.b, D.t0 + tt, D.h, 0, 0), a * da);
                    }
                    if (dv) ssm__dv_store(&D, dv, p->st.dv, tt, j, V, bt, kd);
                    if (dbeta) SSM__STORE(dt, SSM__DV_AT(dbeta, p->st.dbeta, es, D.b, D.t0 + tt, D.h, j, 0), kdv);
                    if (dk) {
                        ssm__dv_sx(dt, dS, K, V, D.w, D.x1); /* dS (v - a r) */
                        ssm__dv_sx(dt, Sp, K, V, kd, D.x2);  /* S' dS^T k    */
                        for (f = 0; f < K; ++f) D.x1[f] = bt * (D.x1[f] - a * D.x2[f]);
                        ssm__dv_store(&D, dk, p->st.dk, tt, j, K, 1.0, D.x1);
                    }
                    for (f = 0; f < K; ++f) D.x2[f] = -a * bt * D.kv[f];
                    ssm__dv_rank1(dt, dS, K, V, a, D.x2, kd);
                }
            }
            if (ds0) ssm__dv_copy(dt, K, V, &dS, ssm__dv_state(ds0, p->st.ds0, n, D.h, D.es));
        }
    return SSM_OK;
}

static ssm_result ssm__delta_backward_generic(ssm_ctx *ctx, const ssm_delta_plan *p, const ssm_tensor *q,
                                              const ssm_tensor *k, const ssm_tensor *v, const ssm_tensor *beta,
                                              const ssm_tensor *g, const ssm_tensor *s0, const ssm_tensor *cu,
                                              const ssm_tensor *dout, const ssm_tensor *dsT, ssm_tensor *dq,
                                              ssm_tensor *dk, ssm_tensor *dv, ssm_tensor *dbeta, ssm_tensor *dg,
                                              ssm_tensor *ds0) {
    if (p->method == SSM_DELTA_CHUNKED)
        return ssm__delta_chunked_backward(ctx, p, q, k, v, beta, g, s0, cu, dout, dsT, dq, dk, dv, dbeta, dg, ds0);
    return ssm__delta_replay_backward(ctx, p, q, k, v, beta, g, s0, cu, dout, dsT, dq, dk, dv, dbeta, dg, ds0);
}

static size_t ssm__delta_ws_generic(const ssm_delta_plan *p, int pass) {
    size_t es = ssm__esize(p->dtype), sbytes = SSM__DV_ALIGN((size_t)(p->K * p->V) * es);
    if (pass == 2) return ssm__dv_vec_bytes(p);
    if (pass == 1 && p->method == SSM_DELTA_CHUNKED) return ssm__dvc_layout(p, NULL, NULL, 1);
    if (pass == 1)
        return ssm__dv_vec_bytes(p) + SSM__DV_ALIGN(sizeof(double) * (size_t)(SSM__MAX(p->K, p->V) + p->V)) +
               sbytes * (size_t)(1 + p->chunk + 1 + ssm__dv_chunks(p, p->chunk));
    if (p->method == SSM_DELTA_CHUNKED) return ssm__dvc_layout(p, NULL, NULL, 0);
    return ssm__dv_vec_bytes(p) + sbytes;
}

#undef SSM__DV_E

/* No output element exists: no token (B, T or H is 0) and no state out (none asked, or N or H
   is 0). Valid views may then carry any size, so the ops return before looping over them. */
static int ssm__delta_nothing(const ssm_delta_plan *p, const ssm_tensor *state_out) {
    return (p->B == 0 || p->T == 0 || p->H == 0) && (!state_out || p->N == 0 || p->H == 0);
}

/* The generic algorithms run on host memory: a device backend without a delta kernel for the
   plan cannot fall back to them. */
static ssm_result ssm__delta_no_kernel(ssm_ctx *ctx, const char *op) {
    return ssm_ctx_error(ctx, SSM_ERROR_UNSUPPORTED, "%s: the %s backend has no kernel for this call", op,
                         ctx->backend->name);
}

SSMDEF ssm_result ssm_delta_forward(ssm_ctx *ctx, const ssm_delta_desc *desc, const ssm_tensor *q,
                                    const ssm_tensor *k, const ssm_tensor *v, const ssm_tensor *beta,
                                    const ssm_tensor *g, const ssm_tensor *s0, const ssm_tensor *cu_seqlens,
                                    ssm_tensor *o, ssm_tensor *sT) {
    static const char *op = "ssm_delta_forward";
    ssm_delta_plan p;
    ssm__arg args[10];
    int factored;
    ssm_result r;
    if (!ctx) return SSM_ERROR_NULL_ARGUMENT;
    ctx->message[0] = 0;
    SSM__TRY(ssm__delta_inputs(ctx, op, desc, q, k, v, beta, g, s0, cu_seqlens, 1, &p, &factored));
    if (!o) return ssm_ctx_error(ctx, SSM_ERROR_NULL_ARGUMENT, "%s: o is required", op);
    SSM__TRY(ssm__delta_view(ctx, op, "o", o, &p, 1, 0, p.V, p.st.o));
    if (sT) SSM__TRY(ssm__delta_state(ctx, op, "sT", sT, &p, p.st.sT));
    SSM__TRY(ssm__delta_check_saved(ctx, op, desc, &p));
    ssm__arg_set(&args[0], "q", q, 0);
    ssm__arg_set(&args[1], "k", k, 0);
    ssm__arg_set(&args[2], "v", v, 0);
    ssm__arg_set(&args[3], "beta", beta, 0);
    ssm__arg_set(&args[4], "g", g, 0);
    ssm__arg_set(&args[5], "s0", s0, 0);
    ssm__arg_set(&args[6], "cu_seqlens", cu_seqlens, 0);
    ssm__arg_set(&args[7], "o", o, 1);
    ssm__arg_set(&args[8], "sT", sT, 1);
    ssm__arg_set(&args[9], "saved", desc->saved, 1);
    SSM__TRY(ssm__check_aliasing(ctx, op, args, 10));
    SSM__TRY(ssm__delta_resolve(ctx, op, desc, &p, 0));
    SSM__TRY(ssm__supported(ctx, op, SSM_OP_DELTA_FORWARD, &p));
    /* every output empty: nothing to do (and B may be huge in empty views: no loop over it) */
    r = ssm__delta_nothing(&p, sT) ? SSM_OK
        : ctx->backend->delta_forward ? ctx->backend->delta_forward(ctx, &p, q, k, v, beta, g, s0, cu_seqlens, o, sT)
                                      : SSM__NOT_MINE;
    if (r == SSM__NOT_MINE && ctx->backend->device_type != SSM_DEVICE_CPU) r = ssm__delta_no_kernel(ctx, op);
    else if (r == SSM__NOT_MINE) r = ssm__delta_forward_generic(ctx, &p, q, k, v, beta, g, s0, cu_seqlens, o, sT);
    if (r == SSM_OK) ssm__delta_stats(desc, &p, 0);
    return r;
}

SSMDEF ssm_result ssm_delta_backward(ssm_ctx *ctx, const ssm_delta_desc *desc, const ssm_tensor *q,
                                     const ssm_tensor *k, const ssm_tensor *v, const ssm_tensor *beta,
                                     const ssm_tensor *g, const ssm_tensor *s0, const ssm_tensor *cu_seqlens,
                                     const ssm_tensor *dout, const ssm_tensor *dsT, ssm_tensor *dq, ssm_tensor *dk,
                                     ssm_tensor *dv, ssm_tensor *dbeta, ssm_tensor *dg, ssm_tensor *ds0) {
    static const char *op = "ssm_delta_backward";
    ssm_delta_plan p;
    ssm__arg args[16];
    int factored;
    ssm_result r;
    if (!ctx) return SSM_ERROR_NULL_ARGUMENT;
    ctx->message[0] = 0;
    SSM__TRY(ssm__delta_inputs(ctx, op, desc, q, k, v, beta, g, s0, cu_seqlens, 1, &p, &factored));
    if (dg && !g) return ssm_ctx_error(ctx, SSM_ERROR_NULL_ARGUMENT, "%s: dg needs g", op);
    if (dout) SSM__TRY(ssm__delta_view(ctx, op, "dout", dout, &p, 1, 0, p.V, p.st.dout));
    if (dsT) SSM__TRY(ssm__delta_state(ctx, op, "dsT", dsT, &p, p.st.dsT));
    if (dq) SSM__TRY(ssm__delta_view(ctx, op, "dq", dq, &p, 1, 0, p.K, p.st.dq));
    if (dk) SSM__TRY(ssm__delta_view(ctx, op, "dk", dk, &p, 1, factored, p.K, p.st.dk));
    if (dv) SSM__TRY(ssm__delta_view(ctx, op, "dv", dv, &p, 1, factored, p.V, p.st.dv));
    if (dbeta) SSM__TRY(ssm__delta_view(ctx, op, "dbeta", dbeta, &p, 1, factored, 0, p.st.dbeta));
    if (dg) SSM__TRY(ssm__delta_view(ctx, op, "dg", dg, &p, 1, 0, 0, p.st.dg));
    if (ds0) SSM__TRY(ssm__delta_state(ctx, op, "ds0", ds0, &p, p.st.ds0));
    SSM__TRY(ssm__delta_check_saved(ctx, op, desc, &p));
    ssm__arg_set(&args[0], "q", q, 0);
    ssm__arg_set(&args[1], "k", k, 0);
    ssm__arg_set(&args[2], "v", v, 0);
    ssm__arg_set(&args[3], "beta", beta, 0);
    ssm__arg_set(&args[4], "g", g, 0);
    ssm__arg_set(&args[5], "s0", s0, 0);
    ssm__arg_set(&args[6], "cu_seqlens", cu_seqlens, 0);
    ssm__arg_set(&args[7], "dout", dout, 0);
    ssm__arg_set(&args[8], "dsT", dsT, 0);
    ssm__arg_set(&args[9], "dq", dq, 1);
    ssm__arg_set(&args[10], "dk", dk, 1);
    ssm__arg_set(&args[11], "dv", dv, 1);
    ssm__arg_set(&args[12], "dbeta", dbeta, 1);
    ssm__arg_set(&args[13], "dg", dg, 1);
    ssm__arg_set(&args[14], "ds0", ds0, 1);
    ssm__arg_set(&args[15], "saved", desc->saved, 0);
    SSM__TRY(ssm__check_aliasing(ctx, op, args, 16));
    SSM__TRY(ssm__delta_resolve(ctx, op, desc, &p, 1));
    SSM__TRY(ssm__supported(ctx, op, SSM_OP_DELTA_BACKWARD, &p));
    r = ssm__delta_nothing(&p, ds0) ? SSM_OK /* every output empty */
        : ctx->backend->delta_backward
            ? ctx->backend->delta_backward(ctx, &p, q, k, v, beta, g, s0, cu_seqlens, dout, dsT, dq, dk, dv, dbeta,
                                           dg, ds0)
            : SSM__NOT_MINE;
    if (r == SSM__NOT_MINE && ctx->backend->device_type != SSM_DEVICE_CPU) r = ssm__delta_no_kernel(ctx, op);
    else if (r == SSM__NOT_MINE)
        r = ssm__delta_backward_generic(ctx, &p, q, k, v, beta, g, s0, cu_seqlens, dout, dsT, dq, dk, dv, dbeta, dg,
                                        ds0);
    if (r == SSM_OK) ssm__delta_stats(desc, &p, 1);
    return r;
}

SSMDEF ssm_result ssm_delta_step(ssm_ctx *ctx, const ssm_delta_desc *desc, const ssm_tensor *q, const ssm_tensor *k,
                                 const ssm_tensor *v, const ssm_tensor *beta, const ssm_tensor *g, ssm_tensor *state,
                                 ssm_tensor *o) {
    static const char *op = "ssm_delta_step";
    ssm_delta_plan p;
    ssm__arg args[7];
    int factored;
    ssm_result r;
    if (!ctx) return SSM_ERROR_NULL_ARGUMENT;
    ctx->message[0] = 0;
    SSM__TRY(ssm__delta_inputs(ctx, op, desc, q, k, v, beta, g, NULL, NULL, 0, &p, &factored));
    if (!state || !o) return ssm_ctx_error(ctx, SSM_ERROR_NULL_ARGUMENT, "%s: state and o are required", op);
    SSM__TRY(ssm__delta_state(ctx, op, "state", state, &p, p.st.s0));
    memcpy(p.st.sT, p.st.s0, sizeof p.st.sT);
    SSM__TRY(ssm__delta_view(ctx, op, "o", o, &p, 0, 0, p.V, p.st.o));
    ssm__arg_set(&args[0], "q", q, 0);
    ssm__arg_set(&args[1], "k", k, 0);
    ssm__arg_set(&args[2], "v", v, 0);
    ssm__arg_set(&args[3], "beta", beta, 0);
    ssm__arg_set(&args[4], "g", g, 0);
    ssm__arg_set(&args[5], "state", state, 1);
    ssm__arg_set(&args[6], "o", o, 1);
    SSM__TRY(ssm__check_aliasing(ctx, op, args, 7));
    SSM__TRY(ssm__delta_resolve(ctx, op, desc, &p, 2));
    SSM__TRY(ssm__supported(ctx, op, SSM_OP_DELTA_STEP, &p));
    r = ssm__delta_nothing(&p, state) ? SSM_OK /* every output empty */
        : ctx->backend->delta_step ? ctx->backend->delta_step(ctx, &p, q, k, v, beta, g, state, o)
                                   : SSM__NOT_MINE;
    if (r == SSM__NOT_MINE && ctx->backend->device_type != SSM_DEVICE_CPU) r = ssm__delta_no_kernel(ctx, op);
    else if (r == SSM__NOT_MINE) r = ssm__delta_step_generic(ctx, &p, q, k, v, beta, g, state, o);
    if (r == SSM_OK) ssm__delta_stats(desc, &p, 2);
    return r;
}

/* >>backend ---- the reference backend table ----------------------------------------------- */
/* ---- the reference backend -------------------------------------------------------------- */

#ifdef __cplusplus
/* C++ has no designated initializers before C++20: slots in declaration order. */
static const ssm_backend ssm__reference_backend = {
    "reference", SSM_DEVICE_CPU, NULL, NULL, NULL, NULL, NULL, NULL, ssm__ref_gemm2,
    NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
    NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, {NULL}};
#else
static const ssm_backend ssm__reference_backend = {
    .name = "reference",
    .device_type = SSM_DEVICE_CPU,
    .gemm = ssm__ref_gemm2,
    /* every other slot NULL: the generic code of ssm.h on host loops */
};
#endif

SSMDEF const ssm_backend *ssm_reference_backend(void) { return &ssm__reference_backend; }

#ifdef __cplusplus
}
#endif
#endif /* SSM_IMPLEMENTATION_DONE */
#endif /* SSM_IMPLEMENTATION */

/*
------------------------------------------------------------------------------
MIT License
Copyright (c) 2026 the ssm.h authors
Permission is hereby granted, free of charge, to any person obtaining a copy of
this software and associated documentation files (the "Software"), to deal in
the Software without restriction, including without limitation the rights to
use, copy, modify, merge, publish, distribute, sublicense, and/or sell copies
of the Software, and to permit persons to whom the Software is furnished to do
so, subject to the following conditions:
The above copyright notice and this permission notice shall be included in all
copies or substantial portions of the Software.
THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
SOFTWARE.
------------------------------------------------------------------------------
*/
