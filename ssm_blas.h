/* ssm_blas.h - v0.1.0 - BLIS backend for ssm.h - MIT license (see the end of ssm.h)

   The CPU's GEMM-shaped work on BLIS. Everything in ssm.h that is written as batched GEMMs
   (the linrec methods forward and backward, and every later op routed through
   ssm_ctx_gemm) runs on this backend's gemm; what it does not accelerate falls back to the
   generic code of ssm.h.

   USAGE
     In exactly one C or C++ file (after or without ssm.h's own implementation):
         #define SSM_BLAS_IMPLEMENTATION
         #include "ssm_blas.h"
     Build:  cc ... -lblis -lm   (add -fopenmp to spread batches of small GEMMs over threads)
     blis.h needs POSIX thread types: under -std=c99 compile with -D_POSIX_C_SOURCE=200809L
     (or include ssm_blas.h before any system header, it then defines it itself).

     ssm_ctx_config cfg = ssm_ctx_config_init();
     cfg.backend = ssm_blas_backend();
     cfg.threads = 0;          // 0 = BLIS_NUM_THREADS (BLIS's own default: 1)
     ssm_ctx_create(&cfg, &ctx);

   WHAT RUNS WHERE (measured on a 2-core AMD EPYC (Zen 3), see bench/cpu_linrec.c)
     - GEMMs with M, N, K all <= SSM_BLAS_SMALL_MAX (default 32), or with N <= 4 (matrix times
       state vectors) run on a packed, register-blocked C kernel in this file: at these sizes a
       BLIS call costs more in setup (object creation, packing) than the arithmetic.
       Measured (bench/cpu_linrec.c, 1 thread, f32, T=1024, GFLOP/s of the whole method):
         n=32 HS scan: C kernel 11.0, BLIS 7.6 (CR: 6.7 vs 6.3)  -> C kernel up to 32
         n=64 HS scan: C kernel  6.2, BLIS 24-27 (CR: 6.1 vs 20-31) -> BLIS from 33 on
       so the crossover sits between 32 and 64 (the C kernel is plain C99 that the compiler
       vectorizes; it does not reach BLIS's micro-kernels at 64). Override with
       -DSSM_BLAS_SMALL_MAX=N. f32 accumulates in f32 here (as BLIS does), f64 in f64.
     - Larger GEMMs go to bli_sgemm_ex / bli_dgemm_ex with their row and column strides (no
       copies for strided or transposed views). Operands whose strides BLIS does not accept
       (zero / negative / overlapping) take a portable strided loop instead.
     - Batches: BLIS has no batched GEMM. When the batch has at least as many entries as
       threads (and the file is compiled with OpenMP), the batch loop itself is split over the
       threads and every GEMM in it runs single-threaded; otherwise each GEMM gets all the
       threads through a BLIS rntm_t.
     - Threads: ssm_ctx_config.threads, else ssm_blas_config.threads (backend_config), else
       BLIS_NUM_THREADS (bli_thread_get_num_threads()), else 1.
     - linrec_pick (method AUTO): see ssm__blas_linrec_pick below for the measured rule.

   VERSION HISTORY
     0.1.0  batched strided GEMM on BLIS + small-matrix kernel, linrec_pick
*/
#ifndef SSM_BLAS_H_INCLUDED
#define SSM_BLAS_H_INCLUDED

#if defined(SSM_BLAS_IMPLEMENTATION) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L /* blis.h uses pthread_barrier_t */
#endif

#include "ssm.h"

#ifndef SSM_BLAS_SMALL_MAX
#define SSM_BLAS_SMALL_MAX 32
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Optional backend_config for ssm_ctx_config (pass a pointer; NULL = defaults). */
typedef struct ssm_blas_config {
    int threads;     /* 0 = BLIS_NUM_THREADS / BLIS default; ssm_ctx_config.threads wins  */
    int small_gemm;  /* -1 = by size (default), 0 = always BLIS, 1 = always the C kernel   */
} ssm_blas_config;

SSMDEF ssm_blas_config ssm_blas_config_init(void);
SSMDEF const ssm_backend *ssm_blas_backend(void);
/* The threads a BLIS context runs on (after resolving the defaults). */
SSMDEF int ssm_blas_threads(const ssm_ctx *ctx);

#ifdef __cplusplus
}
#endif
#endif /* SSM_BLAS_H_INCLUDED */

/* ========================================================================================== */
#ifdef SSM_BLAS_IMPLEMENTATION
#ifndef SSM_BLAS_IMPLEMENTATION_DONE
#define SSM_BLAS_IMPLEMENTATION_DONE

#include <blis.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ssm__blas_state {
    int threads;
    int small_gemm;
    rntm_t rntm_all; /* all threads, for one big GEMM     */
    rntm_t rntm_one; /* one thread, inside a split batch  */
} ssm__blas_state;

SSMDEF ssm_blas_config ssm_blas_config_init(void) {
    ssm_blas_config c;
    c.threads = 0;
    c.small_gemm = -1;
    return c;
}

static ssm_result ssm__blas_init(ssm_ctx *ctx, const ssm_ctx_config *cfg, void **state) {
    ssm__blas_state *s = (ssm__blas_state *)malloc(sizeof *s);
    const ssm_blas_config *bc = (const ssm_blas_config *)cfg->backend_config;
    int nt = cfg->threads;
    if (!s) return ssm_ctx_error(ctx, SSM_ERROR_OUT_OF_MEMORY, "blis: backend state");
    memset(s, 0, sizeof *s);
    if (bc && (bc->threads < 0 || bc->small_gemm < -1 || bc->small_gemm > 1)) {
        free(s);
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_VALUE, "blis: bad ssm_blas_config");
    }
    if (nt <= 0 && bc) nt = bc->threads;
    if (nt <= 0) nt = (int)bli_thread_get_num_threads();
    if (nt <= 0) nt = 1;
    s->threads = nt;
    s->small_gemm = bc ? bc->small_gemm : -1;
    bli_rntm_init(&s->rntm_all);
    bli_rntm_set_num_threads(nt, &s->rntm_all);
    bli_rntm_init(&s->rntm_one);
    bli_rntm_set_num_threads(1, &s->rntm_one);
    *state = s;
    return SSM_OK;
}

static void ssm__blas_shutdown(ssm_ctx *ctx, void *state) {
    (void)ctx;
    free(state);
}

SSMDEF int ssm_blas_threads(const ssm_ctx *ctx) {
    const ssm__blas_state *s = (const ssm__blas_state *)ssm_ctx_backend_state(ctx);
    return s ? s->threads : 1;
}

/* ---- the small-matrix kernel ------------------------------------------------------------
   C = alpha A B + beta C for M, N, K <= SSM_BLAS_SMALL_MAX. A is packed into MR-row panels
   (p-major), B into NR-column panels (p-major), both zero padded; the micro-kernel keeps an
   MR x NR block of C in registers (fixed trip counts, so compilers unroll and vectorize it). */
#define SSM__BLAS_MR 4
#define SSM__BLAS_NR_S 16
#define SSM__BLAS_NR_D 8
#define SSM__BLAS_PAD(x, b) (((x) + (b)-1) / (b) * (b))

#define SSM__BLAS_SMALL_BODY(T, NR)                                                              \
    {                                                                                            \
        T ap[SSM__BLAS_PAD(SSM_BLAS_SMALL_MAX, SSM__BLAS_MR) * SSM_BLAS_SMALL_MAX];              \
        T bp[SSM__BLAS_PAD(SSM_BLAS_SMALL_MAX, NR) * SSM_BLAS_SMALL_MAX];                        \
        const T *a = (const T *)A.ptr, *b = (const T *)B.ptr;                                    \
        T *c = (T *)C.ptr;                                                                       \
        const T al = (T)alpha, be = (T)beta;                                                     \
        int64_t i, j, p, r, q, Mp = SSM__BLAS_PAD(M, SSM__BLAS_MR), Np = SSM__BLAS_PAD(N, NR);   \
        for (i = 0; i < Mp; i += SSM__BLAS_MR) /* A panels: ap[i*K + p*MR + r] */                \
            for (p = 0; p < K; ++p)                                                              \
                for (r = 0; r < SSM__BLAS_MR; ++r)                                               \
                    ap[i * K + p * SSM__BLAS_MR + r] = i + r < M ? a[(i + r) * A.rs + p * A.cs] : (T)0; \
        for (j = 0; j < Np; j += NR) /* B panels: bp[j*K + p*NR + q] */                          \
            for (p = 0; p < K; ++p) {                                                            \
                T *dst = bp + j * K + p * NR;                                                    \
                const T *src = b + p * B.rs;                                                     \
                if (j + NR <= N && B.cs == 1)                                                    \
                    for (q = 0; q < NR; ++q) dst[q] = src[j + q];                                \
                else                                                                             \
                    for (q = 0; q < NR; ++q) dst[q] = j + q < N ? src[(j + q) * B.cs] : (T)0;    \
            }                                                                                    \
        for (i = 0; i < Mp; i += SSM__BLAS_MR)                                                   \
            for (j = 0; j < Np; j += NR) {                                                       \
                T acc[SSM__BLAS_MR][NR];                                                         \
                const T *pa = ap + i * K, *pb = bp + j * K;                                      \
                for (r = 0; r < SSM__BLAS_MR; ++r)                                               \
                    for (q = 0; q < NR; ++q) acc[r][q] = (T)0;                                   \
                for (p = 0; p < K; ++p, pa += SSM__BLAS_MR, pb += NR)                            \
                    for (r = 0; r < SSM__BLAS_MR; ++r) {                                         \
                        const T av = pa[r];                                                      \
                        for (q = 0; q < NR; ++q) acc[r][q] += av * pb[q];                        \
                    }                                                                            \
                for (r = 0; r < SSM__BLAS_MR && i + r < M; ++r) {                                \
                    T *crow = c + (i + r) * C.rs;                                                \
                    int64_t qn = N - j < NR ? N - j : NR;                                        \
                    if (be == (T)0)                                                              \
                        for (q = 0; q < qn; ++q) crow[(j + q) * C.cs] = al * acc[r][q];          \
                    else                                                                         \
                        for (q = 0; q < qn; ++q)                                                 \
                            crow[(j + q) * C.cs] = al * acc[r][q] + be * crow[(j + q) * C.cs];   \
                }                                                                                \
            }                                                                                    \
    }

static void ssm__blas_small_s(int64_t M, int64_t N, int64_t K, double alpha, ssm_matrix_batch A,
                              ssm_matrix_batch B, double beta, ssm_matrix_batch C)
    SSM__BLAS_SMALL_BODY(float, SSM__BLAS_NR_S)
static void ssm__blas_small_d(int64_t M, int64_t N, int64_t K, double alpha, ssm_matrix_batch A,
                              ssm_matrix_batch B, double beta, ssm_matrix_batch C)
    SSM__BLAS_SMALL_BODY(double, SSM__BLAS_NR_D)

/* Matrix times a few columns (N <= 4: matrix-state products, m = 1..4), any M, K: dot
   products along A's rows when A is row-stored, axpys along its columns otherwise. */
#define SSM__BLAS_NARROW_BODY(T)                                                                 \
    {                                                                                            \
        const T *a = (const T *)A.ptr, *b = (const T *)B.ptr;                                    \
        T *c = (T *)C.ptr;                                                                       \
        int64_t i, j, p;                                                                         \
        for (j = 0; j < N; ++j) {                                                                \
            const T *bj = b + j * B.cs;                                                          \
            if (A.cs == 1 && B.rs == 1) {                                                        \
                for (i = 0; i < M; ++i) {                                                        \
                    const T *ai = a + i * A.rs;                                                  \
                    T acc = (T)0;                                                                \
                    for (p = 0; p < K; ++p) acc += ai[p] * bj[p];                                \
                    c[i * C.rs + j * C.cs] = (T)(alpha * acc + (beta == 0.0 ? 0.0 : beta * c[i * C.rs + j * C.cs])); \
                }                                                                                \
            } else {                                                                             \
                for (i = 0; i < M; ++i) {                                                        \
                    const T *ai = a + i * A.rs;                                                  \
                    T acc = (T)0;                                                                \
                    for (p = 0; p < K; ++p) acc += ai[p * A.cs] * bj[p * B.rs];                  \
                    c[i * C.rs + j * C.cs] = (T)(alpha * acc + (beta == 0.0 ? 0.0 : beta * c[i * C.rs + j * C.cs])); \
                }                                                                                \
            }                                                                                    \
        }                                                                                        \
    }
static void ssm__blas_narrow_s(int64_t M, int64_t N, int64_t K, double alpha, ssm_matrix_batch A,
                               ssm_matrix_batch B, double beta, ssm_matrix_batch C)
    SSM__BLAS_NARROW_BODY(float)
static void ssm__blas_narrow_d(int64_t M, int64_t N, int64_t K, double alpha, ssm_matrix_batch A,
                               ssm_matrix_batch B, double beta, ssm_matrix_batch C)
    SSM__BLAS_NARROW_BODY(double)

/* Strides BLIS takes as they are: positive, and either row-stored, column-stored or a
   general layout whose rows and columns do not interleave. */
static int ssm__blas_layout_ok(int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
    if (rows == 1) rs = cols * (cs > 0 ? cs : 1); /* a unit dimension's stride is never used */
    if (cols == 1) cs = rows * (rs > 0 ? rs : 1);
    if (rows == 1 && cols == 1) return 1;
    if (rs <= 0 || cs <= 0) return 0;
    if (cs == 1) return rs >= cols;
    if (rs == 1) return cs >= rows;
    return rs >= cols * cs || cs >= rows * rs;
}

/* One GEMM of the batch (k-th matrices already applied to the pointers). */
static void ssm__blas_one(const ssm__blas_state *s, const rntm_t *rntm, ssm_dtype dt, int64_t M,
                          int64_t N, int64_t K, double alpha, ssm_matrix_batch A, ssm_matrix_batch B,
                          double beta, ssm_matrix_batch C, int route) {
    int f64 = dt.bits == 64;
    (void)s;
    if (route == 1) {
        if (f64) ssm__blas_narrow_d(M, N, K, alpha, A, B, beta, C);
        else ssm__blas_narrow_s(M, N, K, alpha, A, B, beta, C);
    } else if (route == 2) {
        if (f64) ssm__blas_small_d(M, N, K, alpha, A, B, beta, C);
        else ssm__blas_small_s(M, N, K, alpha, A, B, beta, C);
    } else if (route == 3) {
        rntm_t r = *rntm; /* BLIS may write into the rntm it is given */
        if (f64) {
            double al = alpha, be = beta;
            bli_dgemm_ex(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, (dim_t)M, (dim_t)N, (dim_t)K, &al,
                         (double *)A.ptr, (inc_t)A.rs, (inc_t)A.cs, (double *)B.ptr, (inc_t)B.rs,
                         (inc_t)B.cs, &be, (double *)C.ptr, (inc_t)C.rs, (inc_t)C.cs, NULL, &r);
        } else {
            float al = (float)alpha, be = (float)beta;
            bli_sgemm_ex(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, (dim_t)M, (dim_t)N, (dim_t)K, &al,
                         (float *)A.ptr, (inc_t)A.rs, (inc_t)A.cs, (float *)B.ptr, (inc_t)B.rs,
                         (inc_t)B.cs, &be, (float *)C.ptr, (inc_t)C.rs, (inc_t)C.cs, NULL, &r);
        }
    } else { /* strides BLIS rejects, too large for the small kernel: the portable loop */
        if (f64) ssm__blas_narrow_d(M, N, K, alpha, A, B, beta, C);
        else ssm__blas_narrow_s(M, N, K, alpha, A, B, beta, C);
    }
}

static ssm_matrix_batch ssm__blas_nth(ssm_matrix_batch m, int64_t k, size_t es) {
    m.ptr = (char *)m.ptr + k * m.bs * (int64_t)es;
    return m;
}

static ssm_result ssm__blas_gemm(ssm_ctx *ctx, ssm_dtype dtype, int64_t batch, int64_t M, int64_t N,
                                 int64_t K, double alpha, ssm_matrix_batch A, ssm_matrix_batch B,
                                 double beta, ssm_matrix_batch C) {
    const ssm__blas_state *s = (const ssm__blas_state *)ssm_ctx_backend_state(ctx);
    size_t es = (size_t)dtype.bits / 8u;
    int route, nt = s->threads;
    int64_t k;
    if (batch <= 0 || M <= 0 || N <= 0) return SSM_OK;
    if (dtype.code != SSM_DTYPE_FLOAT || (dtype.bits != 32 && dtype.bits != 64) || dtype.lanes != 1)
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_DTYPE, "blis gemm: f32 or f64 only, got %s",
                             ssm_dtype_name(dtype));
    if (K <= 0) { /* C = beta C */
        for (k = 0; k < batch; ++k) {
            ssm_matrix_batch c = ssm__blas_nth(C, k, es);
            int64_t i, j;
            for (i = 0; i < M; ++i)
                for (j = 0; j < N; ++j) {
                    if (es == 8) {
                        double *p = (double *)c.ptr + i * c.rs + j * c.cs;
                        *p = beta == 0.0 ? 0.0 : beta * *p;
                    } else {
                        float *p = (float *)c.ptr + i * c.rs + j * c.cs;
                        *p = beta == 0.0 ? 0.0f : (float)(beta * *p);
                    }
                }
        }
        return SSM_OK;
    }
    if (s->small_gemm == 1 && M <= SSM_BLAS_SMALL_MAX && N <= SSM_BLAS_SMALL_MAX && K <= SSM_BLAS_SMALL_MAX)
        route = 2;
    else if (s->small_gemm != 0 && N <= 4)
        route = 1;
    else if (s->small_gemm != 0 && M <= SSM_BLAS_SMALL_MAX && N <= SSM_BLAS_SMALL_MAX && K <= SSM_BLAS_SMALL_MAX)
        route = 2;
    else if (ssm__blas_layout_ok(M, K, A.rs, A.cs) && ssm__blas_layout_ok(K, N, B.rs, B.cs) &&
             ssm__blas_layout_ok(M, N, C.rs, C.cs))
        route = 3;
    else if (M <= SSM_BLAS_SMALL_MAX && N <= SSM_BLAS_SMALL_MAX && K <= SSM_BLAS_SMALL_MAX)
        route = 2;
    else
        route = 4;
#ifdef _OPENMP
    if (nt > 1 && batch >= nt && (double)batch * (double)M * (double)N * (double)K >= 32768.0) {
        long long kk, nb = (long long)batch;
#pragma omp parallel for num_threads(nt) schedule(static)
        for (kk = 0; kk < nb; ++kk)
            ssm__blas_one(s, &s->rntm_one, dtype, M, N, K, alpha, ssm__blas_nth(A, kk, es),
                          ssm__blas_nth(B, kk, es), beta, ssm__blas_nth(C, kk, es), route);
        return SSM_OK;
    }
#endif
    for (k = 0; k < batch; ++k)
        ssm__blas_one(s, nt > 1 ? &s->rntm_all : &s->rntm_one, dtype, M, N, K, alpha,
                      ssm__blas_nth(A, k, es), ssm__blas_nth(B, k, es), beta, ssm__blas_nth(C, k, es), route);
    return SSM_OK;
}

/* AUTO for linrec. Measured (bench/cpu_linrec.c, 2-core EPYC, f32, S=1, m=1): the
   sequential method does the least work (2 n^2 m per step against CR's ~2 n^3) and wins
   every row of the table at m = 1; the parallel methods only pay off when products are
   wide enough to use every thread and the sequential chain cannot (one sequence, many
   threads, matrix state m >= n/2). */
static ssm_linrec_method ssm__blas_linrec_pick(const ssm_ctx *ctx, ssm_dtype dtype, int64_t S, int64_t T,
                                               int64_t n, int64_t m) {
    const ssm__blas_state *s = (const ssm__blas_state *)ssm_ctx_backend_state(ctx);
    (void)dtype;
    if (s && s->threads > 1 && S < s->threads && T >= 256 && 2 * m >= n) return SSM_LINREC_CHUNKED;
    return SSM_LINREC_SEQUENTIAL;
}

/* Filled by name at first use: later ops add vtable slots to ssm_backend, and every slot this
   file does not name stays NULL (= the generic code of ssm.h). */
static ssm_backend ssm__blas_backend;

SSMDEF const ssm_backend *ssm_blas_backend(void) {
    if (!ssm__blas_backend.gemm) {
        ssm_backend b;
        memset(&b, 0, sizeof b);
        b.name = "blis";
        b.device_type = SSM_DEVICE_CPU;
        b.init = ssm__blas_init;
        b.shutdown = ssm__blas_shutdown;
        b.gemm = ssm__blas_gemm;
        b.linrec_pick = ssm__blas_linrec_pick;
        ssm__blas_backend = b;
    }
    return &ssm__blas_backend;
}

#ifdef __cplusplus
}
#endif
#endif /* SSM_BLAS_IMPLEMENTATION_DONE */
#endif /* SSM_BLAS_IMPLEMENTATION */
