/* ssm_blas.h - v0.1.0 - BLIS backend for ssm.h - MIT license (see the end of ssm.h)

   CONTENTS (grep '>>name'; the same markers, in the same order, as ssm.h and ssm_cuda.h)
     >>core        configuration, declarations, context state
     >>primitives  GEMM: small-matrix kernel, AVX2/FMA kernels, BLIS calls
     >>linrec      the AUTO pick for the dense recurrence
     >>backend     the gemm slot and the backend table

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
     - f32 on AVX2+FMA targets (-march=native on x86-64; SSM_BLAS_NO_AVX2 turns it off): GEMMs
       with N, K <= SSM_BLAS_AVX_MAX (64) and any M run on an unpacked 6x16 intrinsics kernel
       (B rows loaded in place, A broadcast; 12 accumulators), matrix-state products (N <= 4)
       on 4-row FMA dot products / column axpys. Measured (CR forward, T=1024, 1 thread, same
       run): n=32 7.2 -> 29.9 GFLOP/s, n=64 24.1 -> 30.4, n=128 (BLIS) unchanged; in cache
       (T=64) the kernel reaches 54 GFLOP/s at n=64. Block-ELL tiles (n x B x B, B <= 64)
       take it too.
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
/* The most threads a context may ask for (ssm_ctx_config.threads, ssm_blas_config.threads or
   BLIS_NUM_THREADS): more fail ssm_ctx_create with SSM_ERROR_INVALID_VALUE instead of
   exhausting the stack inside the OpenMP runtime. */
#ifndef SSM_BLAS_MAX_THREADS
#define SSM_BLAS_MAX_THREADS 1024
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* >>core ---- configuration and declarations ----------------------------------------------- */
/* Optional backend_config for ssm_ctx_config (pass a pointer; NULL = defaults). */
typedef struct ssm_blas_config {
    int threads;     /* 0 = BLIS_NUM_THREADS / BLIS default; ssm_ctx_config.threads wins  */
    int small_gemm;  /* -1 = by size (default), 0 = BLIS (mat-vecs: the C loop), 1 = the C kernel */
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

/* >>core ---- context state (implementation) ----------------------------------------------- */
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
    if (nt > SSM_BLAS_MAX_THREADS) {
        free(s);
        return ssm_ctx_error(ctx, SSM_ERROR_INVALID_VALUE, "blis: %d threads asked for, at most %d (SSM_BLAS_MAX_THREADS)",
                             nt, SSM_BLAS_MAX_THREADS);
    }
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

/* >>primitives ---- GEMM: small-matrix kernel, AVX2 kernels, BLIS -------------------------- */
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

/* ---- AVX2/FMA kernels (f32) ---------------------------------------------------------------
   Compiled when the target has AVX2 and FMA (-march=native on x86-64); the portable kernels
   above stay the fallback. Unpacked: B's rows (unit column stride) are loaded straight from
   memory and A's elements broadcast, so a small product's operands (4 KB at n = 32, 16 KB at
   n = 64) are read from L1 with no packing pass; a 6 x 16 block of C lives in 12 registers
   (the Haswell/Zen BLIS micro-kernel's shape). B with another column stride is packed once
   per product; C with another column stride goes through a row-major tile. */
#if defined(__AVX2__) && defined(__FMA__) && !defined(SSM_BLAS_NO_AVX2)
#include <immintrin.h>
#define SSM__BLAS_AVX2 1
#ifndef SSM_BLAS_AVX_MAX
#define SSM_BLAS_AVX_MAX 64
#endif

static const int32_t ssm__blas_mask_tab[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};

/* One block of R (<= 6) rows x 16 columns (w < 16: a masked tail of w columns). */
#define SSM__AVX_ACC(r) \
    if (R > r) { av = _mm256_broadcast_ss(ap + r * ars); c##r##0 = _mm256_fmadd_ps(av, b0, c##r##0); c##r##1 = _mm256_fmadd_ps(av, b1, c##r##1); }
#define SSM__AVX_OUT(r)                                                                                   \
    if (R > r) {                                                                                          \
        float *cr = c + r * crs;                                                                          \
        __m256 o0 = _mm256_mul_ps(al, c##r##0), o1 = _mm256_mul_ps(al, c##r##1);                         \
        if (w >= 16) {                                                                                    \
            if (bz) { _mm256_storeu_ps(cr, o0); _mm256_storeu_ps(cr + 8, o1); }                          \
            else {                                                                                        \
                _mm256_storeu_ps(cr, _mm256_fmadd_ps(be, _mm256_loadu_ps(cr), o0));                       \
                _mm256_storeu_ps(cr + 8, _mm256_fmadd_ps(be, _mm256_loadu_ps(cr + 8), o1));               \
            }                                                                                             \
        } else {                                                                                          \
            if (!bz) {                                                                                    \
                o0 = _mm256_fmadd_ps(be, _mm256_maskload_ps(cr, m0), o0);                                 \
                o1 = _mm256_fmadd_ps(be, _mm256_maskload_ps(cr + 8, m1), o1);                             \
            }                                                                                             \
            _mm256_maskstore_ps(cr, m0, o0);                                                              \
            _mm256_maskstore_ps(cr + 8, m1, o1);                                                          \
        }                                                                                                 \
    }
#define SSM__AVX_BLOCK(RR)                                                                                \
    do {                                                                                                  \
        const int R = (RR);                                                                               \
        __m256 z = _mm256_setzero_ps(), av, b0, b1;                                                       \
        __m256 c00 = z, c01 = z, c10 = z, c11 = z, c20 = z, c21 = z, c30 = z, c31 = z, c40 = z, c41 = z;  \
        __m256 c50 = z, c51 = z;                                                                          \
        const float *ap = a, *bp = b;                                                                     \
        int64_t p;                                                                                        \
        if (w >= 16) {                                                                                    \
            for (p = 0; p < K; ++p, ap += acs, bp += brs) {                                               \
                b0 = _mm256_loadu_ps(bp), b1 = _mm256_loadu_ps(bp + 8);                                   \
                SSM__AVX_ACC(0) SSM__AVX_ACC(1) SSM__AVX_ACC(2) SSM__AVX_ACC(3) SSM__AVX_ACC(4) SSM__AVX_ACC(5) \
            }                                                                                             \
        } else {                                                                                          \
            for (p = 0; p < K; ++p, ap += acs, bp += brs) {                                               \
                b0 = _mm256_maskload_ps(bp, m0), b1 = _mm256_maskload_ps(bp + 8, m1);                     \
                SSM__AVX_ACC(0) SSM__AVX_ACC(1) SSM__AVX_ACC(2) SSM__AVX_ACC(3) SSM__AVX_ACC(4) SSM__AVX_ACC(5) \
            }                                                                                             \
        }                                                                                                 \
        SSM__AVX_OUT(0) SSM__AVX_OUT(1) SSM__AVX_OUT(2) SSM__AVX_OUT(3) SSM__AVX_OUT(4) SSM__AVX_OUT(5)  \
    } while (0)

/* C = alpha A B + beta C with B and C of unit column stride (A any strides), for K <= 32. */
static void ssm__avx_gemm_rm_k(int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t ars,
                             int64_t acs, const float *Bm, int64_t brs, float beta, float *C, int64_t crs) {
    const __m256 al = _mm256_set1_ps(alpha), be = _mm256_set1_ps(beta);
    const int bz = beta == 0.0f;
    int64_t i, j;
    for (j = 0; j < N; j += 16) {
        int64_t w = N - j < 16 ? N - j : 16;
        __m256i m0 = _mm256_loadu_si256((const __m256i *)(ssm__blas_mask_tab + 8 - (w < 8 ? w : 8)));
        __m256i m1 = _mm256_loadu_si256((const __m256i *)(ssm__blas_mask_tab + 8 - (w > 8 ? w - 8 : 0)));
        const float *b = Bm + j;
        for (i = 0; i < M; i += 6) {
            const float *a = A + i * ars;
            float *c = C + i * crs + j;
            switch (M - i < 6 ? M - i : 6) {
            case 6: SSM__AVX_BLOCK(6); break;
            case 5: SSM__AVX_BLOCK(5); break;
            case 4: SSM__AVX_BLOCK(4); break;
            case 3: SSM__AVX_BLOCK(3); break;
            case 2: SSM__AVX_BLOCK(2); break;
            default: SSM__AVX_BLOCK(1); break;
            }
        }
    }
}

/* Any K, in slices of 32 (C takes the later slices with beta = 1). Measured in cache, 1
   thread: 64x64x64 runs at ~22 GFLOP/s unsliced and ~69 with two slices of 32 (64x64x32);
   the cliff sits between K = 32 and 48 once M and N are >= 48 (L1: 32 KB). */
#define SSM__AVX_KC 32
static void ssm__avx_gemm_rm(int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t ars,
                             int64_t acs, const float *Bm, int64_t brs, float beta, float *C, int64_t crs) {
    int64_t k0;
    for (k0 = 0; k0 < K || k0 == 0; k0 += SSM__AVX_KC) {
        int64_t kc = K - k0 < SSM__AVX_KC ? K - k0 : SSM__AVX_KC;
        ssm__avx_gemm_rm_k(M, N, kc, alpha, A + k0 * acs, ars, acs, Bm + k0 * brs, brs, k0 ? 1.0f : beta, C, crs);
    }
}

/* Any strides (M, N, K <= SSM_BLAS_AVX_MAX): packs B / stages C when their columns are not
   unit-stride. */
static void ssm__avx_gemm_s(int64_t M, int64_t N, int64_t K, double alpha, ssm_matrix_batch A,
                            ssm_matrix_batch B, double beta, ssm_matrix_batch C) {
    float bp[SSM_BLAS_AVX_MAX * SSM_BLAS_AVX_MAX], cp[SSM_BLAS_AVX_MAX * SSM_BLAS_AVX_MAX];
    const float *b = (const float *)B.ptr;
    float *c = (float *)C.ptr;
    int64_t brs = B.rs, i, j;
    if (B.cs != 1) {
        for (i = 0; i < K; ++i)
            for (j = 0; j < N; ++j) bp[i * N + j] = b[i * B.rs + j * B.cs];
        b = bp, brs = N;
    }
    if (C.cs == 1) {
        ssm__avx_gemm_rm(M, N, K, (float)alpha, (const float *)A.ptr, A.rs, A.cs, b, brs, (float)beta, c, C.rs);
        return;
    }
    ssm__avx_gemm_rm(M, N, K, 1.0f, (const float *)A.ptr, A.rs, A.cs, b, brs, 0.0f, cp, N);
    for (i = 0; i < M; ++i)
        for (j = 0; j < N; ++j) {
            float *o = c + i * C.rs + j * C.cs;
            *o = beta == 0.0 ? (float)alpha * cp[i * N + j] : (float)alpha * cp[i * N + j] + (float)beta * *o;
        }
}

/* Prefetch (to L2) the rows of a rows x cols matrix with unit column stride (row-contiguous or
   column-contiguous; anything else is left to the hardware). */
static void ssm__avx_prefetch(ssm_matrix_batch m, int64_t rows, int64_t cols, size_t es) {
    int64_t i, o, len, cnt, st;
    const char *p = (const char *)m.ptr;
    if (m.cs == 1) cnt = rows, len = cols, st = m.rs;
    else if (m.rs == 1) cnt = cols, len = rows, st = m.cs;
    else return;
    len *= (int64_t)es, st *= (int64_t)es;
    if (st == len) len *= cnt, cnt = 1; /* contiguous: one run */
    for (i = 0; i < cnt; ++i)
        for (o = 0; o < len; o += 64) _mm_prefetch(p + i * st + o, _MM_HINT_T1);
}

static float ssm__avx_hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
}

/* Matrix times a few columns (N <= 4), f32: returns 0 when the layout has no vector path. */
static int ssm__avx_narrow_s(int64_t M, int64_t N, int64_t K, double alpha, ssm_matrix_batch A,
                             ssm_matrix_batch B, double beta, ssm_matrix_batch C) {
    const float *a = (const float *)A.ptr, *b = (const float *)B.ptr;
    float *c = (float *)C.ptr;
    int64_t i, j, p;
    if (A.cs == 1 && B.rs == 1) { /* dot products along A's rows, 4 rows at a time */
        for (j = 0; j < N; ++j) {
            const float *x = b + j * B.cs;
            for (i = 0; i < M; i += 4) {
                int64_t r, nr = M - i < 4 ? M - i : 4;
                __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
                const float *a0 = a + i * A.rs, *a1 = a0 + (nr > 1 ? A.rs : 0), *a2 = a0 + (nr > 2 ? 2 * A.rs : 0);
                const float *a3 = a0 + (nr > 3 ? 3 * A.rs : 0);
                float acc[4];
                for (p = 0; p + 8 <= K; p += 8) {
                    __m256 xv = _mm256_loadu_ps(x + p);
                    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a0 + p), xv, s0);
                    s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a1 + p), xv, s1);
                    s2 = _mm256_fmadd_ps(_mm256_loadu_ps(a2 + p), xv, s2);
                    s3 = _mm256_fmadd_ps(_mm256_loadu_ps(a3 + p), xv, s3);
                }
                acc[0] = ssm__avx_hsum(s0), acc[1] = ssm__avx_hsum(s1), acc[2] = ssm__avx_hsum(s2);
                acc[3] = ssm__avx_hsum(s3);
                for (; p < K; ++p) {
                    acc[0] += a0[p] * x[p], acc[1] += a1[p] * x[p], acc[2] += a2[p] * x[p], acc[3] += a3[p] * x[p];
                }
                for (r = 0; r < nr; ++r) {
                    float *o = c + (i + r) * C.rs + j * C.cs;
                    *o = beta == 0.0 ? (float)alpha * acc[r] : (float)alpha * acc[r] + (float)beta * *o;
                }
            }
        }
        return 1;
    }
    if (A.rs == 1 && M <= SSM_BLAS_AVX_MAX) { /* axpys along A's (contiguous) columns */
        float y[SSM_BLAS_AVX_MAX];
        for (j = 0; j < N; ++j) {
            const float *x = b + j * B.cs;
            for (i = 0; i < M; i += 32) {
                int64_t w = M - i < 32 ? M - i : 32, q;
                __m256 y0 = _mm256_setzero_ps(), y1 = y0, y2 = y0, y3 = y0;
                if (w == 32) {
                    for (p = 0; p < K; ++p) {
                        const float *ac = a + p * A.cs + i;
                        __m256 xb = _mm256_broadcast_ss(x + p * B.rs);
                        y0 = _mm256_fmadd_ps(_mm256_loadu_ps(ac), xb, y0);
                        y1 = _mm256_fmadd_ps(_mm256_loadu_ps(ac + 8), xb, y1);
                        y2 = _mm256_fmadd_ps(_mm256_loadu_ps(ac + 16), xb, y2);
                        y3 = _mm256_fmadd_ps(_mm256_loadu_ps(ac + 24), xb, y3);
                    }
                    _mm256_storeu_ps(y + i, y0), _mm256_storeu_ps(y + i + 8, y1);
                    _mm256_storeu_ps(y + i + 16, y2), _mm256_storeu_ps(y + i + 24, y3);
                } else {
                    for (q = 0; q < w; ++q) y[i + q] = 0.0f;
                    for (p = 0; p < K; ++p) {
                        const float *ac = a + p * A.cs + i;
                        const float xs = x[p * B.rs];
                        for (q = 0; q < w; ++q) y[i + q] += ac[q] * xs;
                    }
                }
            }
            for (i = 0; i < M; ++i) {
                float *o = c + i * C.rs + j * C.cs;
                *o = beta == 0.0 ? (float)alpha * y[i] : (float)alpha * y[i] + (float)beta * *o;
            }
        }
        return 1;
    }
    return 0;
}
#endif /* AVX2 */

/* A unit dimension's stride is never used to reach an element, but BLIS reads it: it picks
   row/column storage from it, scales prefetches and packing by it, and mishandles negative
   ones (m = 1 with rs = -1 writes between C's elements). Every operand is normalised once,
   before routing, to the stride a compact layout would have there, so the strides
   ssm__blas_layout_ok checks are the ones every kernel and BLIS receive. */
static void ssm__blas_normalise(int64_t rows, int64_t cols, ssm_matrix_batch *m) {
    if (rows == 1 && cols == 1) {
        m->rs = 1, m->cs = 1;
        return;
    }
    if (rows == 1) m->rs = cols * (m->cs > 0 ? m->cs : 1);
    if (cols == 1) m->cs = rows * (m->rs > 0 ? m->rs : 1);
}

/* Strides BLIS takes as they are (after ssm__blas_normalise): positive, and either
   row-stored, column-stored or a general layout whose rows and columns do not interleave. */
static int ssm__blas_layout_ok(int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
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
#ifdef SSM__BLAS_AVX2
        else if (!ssm__avx_narrow_s(M, N, K, alpha, A, B, beta, C)) ssm__blas_narrow_s(M, N, K, alpha, A, B, beta, C);
#else
        else ssm__blas_narrow_s(M, N, K, alpha, A, B, beta, C);
#endif
#ifdef SSM__BLAS_AVX2
    } else if (route == 5) {
        ssm__avx_gemm_s(M, N, K, alpha, A, B, beta, C);
#endif
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
    ssm__blas_normalise(M, K, &A);
    ssm__blas_normalise(K, N, &B);
    ssm__blas_normalise(M, N, &C);
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
#ifdef SSM__BLAS_AVX2
    else if (s->small_gemm != 0 && dtype.bits == 32 && N <= SSM_BLAS_AVX_MAX && K <= SSM_BLAS_AVX_MAX &&
             (M <= SSM_BLAS_AVX_MAX || C.cs == 1))
        route = 5;
#endif
    else if (s->small_gemm != 0 && M <= SSM_BLAS_SMALL_MAX && N <= SSM_BLAS_SMALL_MAX && K <= SSM_BLAS_SMALL_MAX)
        route = 2;
    else if (M == 1 || N == 1) /* a mat-vec, even with small_gemm = 0: the distribution's BLIS
                                  (libblis4) read past its operands on sgemm 40 x 1 x 37 with
                                  normalised strides, a SEGV under AddressSanitizer on one heap
                                  layout (tests/test_reliab.c, SSM_TEST_SEED=1795594978) */
        route = 4;
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
    for (k = 0; k < batch; ++k) {
#ifdef SSM__BLAS_AVX2
        /* the next entry's matrices into L2 while this one computes: a batch of small products
           steps through memory a few KB at a time, which the hardware prefetcher (4 KB pages)
           does not run ahead of */
        if ((route == 1 || route == 5) && k + 1 < batch) {
            ssm__avx_prefetch(ssm__blas_nth(A, k + 1, es), M, K, es);
            if (route == 5) ssm__avx_prefetch(ssm__blas_nth(B, k + 1, es), K, N, es);
        }
#endif
        ssm__blas_one(s, nt > 1 ? &s->rntm_all : &s->rntm_one, dtype, M, N, K, alpha,
                      ssm__blas_nth(A, k, es), ssm__blas_nth(B, k, es), beta, ssm__blas_nth(C, k, es), route);
    }
    return SSM_OK;
}

/* >>linrec ---- dense linear recurrence: the AUTO pick ------------------------------------- */
/* AUTO for linrec. Measured (bench/cpu_linrec.c, 2-core EPYC, f32, S=1, m=1): the
   sequential method does the least work (2 n^2 m per step against CR's ~2 n^3) and wins
   every row of the table at m = 1; the parallel methods only pay off when products are
   wide enough to use every thread and the sequential chain cannot (one sequence, many
   threads, matrix state m >= n/2). */
static void ssm__blas_linrec_pick(const ssm_ctx *ctx, ssm_linrec_plan *p) {
    const ssm__blas_state *s = (const ssm__blas_state *)ssm_ctx_backend_state(ctx);
    if (p->method != SSM_LINREC_AUTO) return;
    p->method = SSM_LINREC_SEQUENTIAL;
    if (s && s->threads > 1 && p->S < s->threads && p->T >= 256 && 2 * p->m >= p->n) p->method = SSM_LINREC_CHUNKED;
}

/* >>backend ---- the gemm slot and the backend table --------------------------------------- */
/* The gemm slot: the two-level batch of the generic recurrences as one call per outer index
   (every operand in dtype: the generic code keeps CPU work in the input dtype). */
static ssm_result ssm__blas_gemm2(ssm_ctx *ctx, ssm_dtype dtype, int64_t outer, int64_t batch, int64_t M, int64_t N,
                                  int64_t K, double alpha, ssm_matrix_batch A, ssm_matrix_batch B, double beta,
                                  ssm_matrix_batch C) {
    int64_t s, es = (int64_t)(dtype.bits / 8u);
    for (s = 0; s < outer; ++s) {
        ssm_matrix_batch a = A, b = B, c = C;
        a.ptr = (char *)A.ptr + s * A.ss * es;
        b.ptr = (char *)B.ptr + s * B.ss * es;
        c.ptr = (char *)C.ptr + s * C.ss * es;
        ssm_result r = ssm__blas_gemm(ctx, dtype, batch, M, N, K, alpha, a, b, beta, c);
        if (r != SSM_OK) return r;
    }
    return SSM_OK;
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
        b.gemm = ssm__blas_gemm2;
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
