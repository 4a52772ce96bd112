/* Test harness shared by every test file: counters, checks, seeded random inputs, and
   tensor buffers in several layouts whose untouched memory stays poisoned (all bits set =
   NaN in every float type), with poisoned guard elements before and after every view, so
   unwritten outputs and writes outside a view are both caught. Buffers live in host memory
   or, under tests/test_cuda.cu, in device memory behind a host shadow. */
#ifndef SSM_TEST_H
#define SSM_TEST_H

#include "../ssm.h"
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern int test_failures_in_case; /* failures since the current case began */
extern int test_passed, test_failed;
extern const char *test_case_name;
extern const ssm_backend *test_backend; /* the backend the suites run on */
extern void *test_backend_config;        /* its backend_config (NULL = defaults) */

/* Where tensor buffers live. NULL = host memory (CPU backends). tests/test_cuda.cu installs
   device memory: tb_set uploads, tb_get and the poison checks download. */
typedef struct test_memory {
    ssm_device device;
    void *(*alloc)(size_t bytes);
    void (*release)(void *p);
    void (*upload)(void *dst, const void *src, size_t bytes);
    void (*download)(void *dst, const void *src, size_t bytes);
} test_memory;
extern const test_memory *test_mem;
extern int test_skipped; /* cases the backend declined (SSM_ERROR_UNSUPPORTED) */

void test_begin(const char *name);
void test_end(void);
void test_skip(void); /* the current case ends as skipped, not passed */
void test_fail(const char *file, int line, const char *fmt, ...);

#define CHECK(cond, ...)                                                  \
    do {                                                                  \
        if (!(cond)) test_fail(__FILE__, __LINE__, __VA_ARGS__);          \
    } while (0)
#define CHECK_OK(expr, ctx)                                                                   \
    do {                                                                                      \
        ssm_result r_ = (expr);                                                               \
        if (r_ != SSM_OK)                                                                     \
            test_fail(__FILE__, __LINE__, "%s -> %s (%s)", #expr, ssm_result_string(r_),     \
                      ssm_ctx_last_error(ctx));                                               \
    } while (0)

/* Random numbers: a counter-free xorshift seeded per case from the case name and a run
   seed, so every run draws fresh inputs (SSM_TEST_SEED fixes the seed to reproduce). */
void test_seed(unsigned long long s);
double test_uniform(double lo, double hi);
double test_normal(void);
unsigned long long test_run_seed(void);

/* Layouts for tensor buffers: contiguous row-major; padded (each stride grows by one and
   the innermost stride is 2); reversed (column-major order of dims, padded: every matrix
   transposed); negative (row-major order, padded, every stride negative: the view starts at
   the buffer's last element). */
enum { LAYOUT_CONTIGUOUS = 0, LAYOUT_PADDED = 1, LAYOUT_REVERSED = 2, LAYOUT_NEGATIVE = 3, LAYOUT_COUNT = 4 };
const char *layout_name(int layout);
#define TB_GUARD 16 /* poisoned elements before and after every view's extent */

typedef struct tbuf {
    ssm_tensor t;        /* the view: data in device memory under test_mem, else in mem */
    unsigned char *mem;  /* host memory (the shadow of the device buffer under test_mem) */
    void *dev;           /* the buffer the view points into (== mem on the host)         */
    size_t bytes, base;  /* buffer size; element offset of the view's first element      */
} tbuf;

tbuf tb_new(ssm_dtype dt, int ndim, const int64_t *shape, int layout);
void tb_free(tbuf *b);
void tb_poison(tbuf *b);
int tb_untouched(const tbuf *b);          /* every byte still poison            */
int tb_outside_untouched(const tbuf *b);  /* bytes outside the view still poison */
void tb_set(tbuf *b, const double *src);  /* logical row-major values -> view    */
void tb_get(const tbuf *b, double *dst);  /* view -> logical row-major values    */
int64_t tb_numel(const tbuf *b);
/* A buffer of random values in [-scale, scale]; returns the values in *vals (malloc'd). */
tbuf tb_random(ssm_dtype dt, int ndim, const int64_t *shape, int layout, double scale, double **vals);

/* Host copies of f16 / bf16 values (round to nearest even). */
uint16_t test_f16_bits(double v);
double test_f16_value(uint16_t h);
uint16_t test_bf16_bits(double v);
double test_bf16_value(uint16_t h);

/* ||a - b|| / max(||b||, tiny); NaN in a gives +inf. */
double rel_err(const double *a, const double *b, int64_t n);

ssm_ctx *test_ctx(void); /* a context on test_backend, with default config */

/* Context parallelism: ranks as threads, each with its own context and tensors holding its span.
   cp_allgather (an ssm_linrec_cp's hook, user = the rank's cp_peer) copies each rank's bytes into
   the world's host stage, waits for all, and copies the stage back (device memory under test_mem);
   a size other than the world's marks it bad. */
typedef struct cp_world {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int R, arrived, bad;
    unsigned gen;
    size_t bytes;
    unsigned char *stage;
} cp_world;
typedef struct cp_peer {
    cp_world *w;
    int rank;
} cp_peer;
void cp_world_init(cp_world *w, int R, size_t bytes);
void cp_world_free(cp_world *w);
ssm_result cp_allgather(void *user, const void *send, void *recv, size_t bytes);
/* Rows t0 .. t0+len-1 of a logical [S][T][row] array into [S][len][row] (and back with put). */
void cp_slice(const double *src, double *dst, int64_t S, int64_t T, int64_t t0, int64_t len, int64_t row, int put);

/* Suites (one per test file). */
void suite_core(void);
void suite_linrec(void);
void suite_linrec_cp(void); /* context parallelism: in suite_linrec, and on CUDA by tests/test_cuda.cu */
void suite_decay_cp(void);  /* the same for the decay scan */
void suite_decay(void);
void suite_bell(void);
void suite_proj(void);
void suite_delta(void);
void suite_blas(void); /* cross-backend checks, only with SSM_TEST_BLAS */
void suite_reliab(void); /* regressions of hostile-caller findings */
void suite_cases(void); /* the op case table (tests/cases.h) on test_backend */

#endif
