/* Test harness shared by every test file: counters, checks, seeded random inputs, and
   tensor buffers in several layouts whose untouched memory stays poisoned (all bits set =
   NaN in f32 and f64), so unwritten outputs and writes outside a view are both caught. */
#ifndef SSM_TEST_H
#define SSM_TEST_H

#include "../ssm.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern int test_failures_in_case; /* failures since the current case began */
extern int test_passed, test_failed;
extern const char *test_case_name;
extern const ssm_backend *test_backend; /* the backend the suites run on */

void test_begin(const char *name);
void test_end(void);
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
   the innermost stride is 2); reversed (column-major order of dims, padded). */
enum { LAYOUT_CONTIGUOUS = 0, LAYOUT_PADDED = 1, LAYOUT_REVERSED = 2 };

typedef struct tbuf {
    ssm_tensor t;
    unsigned char *mem;
    size_t bytes;
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

/* ||a - b|| / max(||b||, tiny); NaN in a gives +inf. */
double rel_err(const double *a, const double *b, int64_t n);

ssm_ctx *test_ctx(void); /* a context on test_backend, with default config */

/* Suites (one per test file). */
void suite_core(void);
void suite_linrec(void);
void suite_decay(void);
void suite_bell(void);
void suite_proj(void);
void suite_delta(void);
void suite_blas(void); /* cross-backend checks, only with SSM_TEST_BLAS */

#endif
