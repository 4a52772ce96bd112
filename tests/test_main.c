/* The test runner: runs every suite and the op case table (tests/cases.h) on the reference
   backend (and on the BLIS backend when built with SSM_TEST_BLAS), then prints
   "N passed, N failed" as its last line. */
#define SSM_IMPLEMENTATION
#include "test.h"
#ifdef SSM_TEST_BLAS
#define SSM_BLAS_IMPLEMENTATION
#include "../ssm_blas.h"
#endif
#include <stdarg.h>
#include <time.h>

int test_failures_in_case, test_passed, test_failed, test_skipped;
const char *test_case_name = "?";
const ssm_backend *test_backend;
static unsigned long long rng_state = 1, run_seed;
static int case_open, case_skipped;

unsigned long long test_run_seed(void) { return run_seed; }

void test_seed(unsigned long long s) {
    rng_state = s * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
    if (!rng_state) rng_state = 1;
}
static unsigned long long rng_next(void) {
    unsigned long long x = rng_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return rng_state = x;
}
double test_uniform(double lo, double hi) { return lo + (hi - lo) * ((double)(rng_next() >> 11) / 9007199254740992.0); }
double test_normal(void) {
    double u = test_uniform(1e-12, 1.0), v = test_uniform(0.0, 1.0);
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

void test_begin(const char *name) {
    static int trace = -1; /* SSM_TEST_TRACE set: each case's name on stderr as it starts (slow runs under tools) */
    unsigned long long h = 1469598103934665603ull;
    const char *p;
    if (trace < 0) trace = getenv("SSM_TEST_TRACE") != NULL;
    if (trace) fprintf(stderr, "[case] %s\n", name);
    for (p = name; *p; ++p) h = (h ^ (unsigned char)*p) * 1099511628211ull;
    test_case_name = name;
    test_failures_in_case = 0;
    case_open = 1;
    case_skipped = 0;
    test_seed(h ^ run_seed);
}
void test_end(void) {
    if (!case_open) return;
    case_open = 0;
    if (test_failures_in_case) ++test_failed;
    else if (case_skipped) ++test_skipped;
    else ++test_passed;
}
void test_skip(void) { case_skipped = 1; }
void test_fail(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    if (test_failures_in_case < 3) {
        fprintf(stderr, "FAIL [%s] %s:%d: ", test_case_name, file, line);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
    }
    ++test_failures_in_case;
}

/* ---- 16-bit floats on the host (round to nearest even) ---- */
uint16_t test_f16_bits(double v) {
    float f = (float)v;
    uint32_t x, sign, mant;
    int32_t e;
    memcpy(&x, &f, 4);
    sign = (x >> 16) & 0x8000u;
    e = (int32_t)((x >> 23) & 0xFF) - 127 + 15;
    mant = x & 0x7FFFFFu;
    if (((x >> 23) & 0xFF) == 0xFF) return (uint16_t)(sign | 0x7C00u | (mant ? 0x200u : 0));
    if (e >= 31) return (uint16_t)(sign | 0x7C00u);
    if (e <= 0) { /* subnormal or zero */
        uint32_t m = mant | 0x800000u, shift = (uint32_t)(14 - e), r, half;
        if (e < -10) return (uint16_t)sign;
        r = m >> shift;
        half = 1u << (shift - 1);
        if ((m & ((half << 1) - 1)) > half || ((m & ((half << 1) - 1)) == half && (r & 1))) ++r;
        return (uint16_t)(sign | r);
    }
    {
        uint32_t r = ((uint32_t)e << 10) | (mant >> 13), rest = mant & 0x1FFFu;
        if (rest > 0x1000u || (rest == 0x1000u && (r & 1))) ++r; /* may carry into the exponent: right */
        return (uint16_t)(sign | r);
    }
}
double test_f16_value(uint16_t h) {
    int e = (h >> 10) & 0x1F, m = h & 0x3FF;
    double v = e == 0 ? ldexp((double)m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp((double)(m | 0x400), e - 25);
    return (h & 0x8000u) ? -v : v;
}
uint16_t test_bf16_bits(double v) {
    float f = (float)v;
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7F800000u) == 0x7F800000u && (x & 0x7FFFFFu)) return (uint16_t)((x >> 16) | 0x40u);
    x += 0x7FFFu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}
double test_bf16_value(uint16_t h) {
    uint32_t x = (uint32_t)h << 16;
    float f;
    memcpy(&f, &x, 4);
    return (double)f;
}

/* ---- buffers ---- */
const test_memory *test_mem;
void *test_backend_config;

const char *layout_name(int layout) {
    static const char *names[LAYOUT_COUNT] = {"contiguous", "padded", "transposed", "negative"};
    return layout >= 0 && layout < LAYOUT_COUNT ? names[layout] : "?";
}

static void tb_pull(const tbuf *b) {
    if (test_mem && b->dev != b->mem) test_mem->download(b->mem, b->dev, b->bytes);
}
static void tb_push(tbuf *b) {
    if (test_mem && b->dev != b->mem) test_mem->upload(b->dev, b->mem, b->bytes);
}

tbuf tb_new(ssm_dtype dt, int ndim, const int64_t *shape, int layout) {
    tbuf b;
    int64_t strides[SSM_MAX_DIMS], span = 1, lo = 0, hi = 0;
    int i, empty = 0;
    size_t es = dt.bits / 8;
    memset(&b, 0, sizeof b);
    if (layout == LAYOUT_CONTIGUOUS) {
        for (i = ndim - 1; i >= 0; --i) { strides[i] = span; span *= shape[i] > 0 ? shape[i] : 1; }
    } else if (layout == LAYOUT_PADDED) {
        span = 2;
        for (i = ndim - 1; i >= 0; --i) { strides[i] = span; span = span * (shape[i] > 0 ? shape[i] : 1) + 1; }
    } else if (layout == LAYOUT_REVERSED) {
        for (i = 0; i < ndim; ++i) { strides[i] = span; span = span * (shape[i] > 0 ? shape[i] : 1) + 1; }
    } else {
        for (i = ndim - 1; i >= 0; --i) { strides[i] = -span; span = span * (shape[i] > 0 ? shape[i] : 1) + 1; }
    }
    for (i = 0; i < ndim; ++i) {
        if (shape[i] <= 0) empty = 1;
        else if (strides[i] > 0) hi += (shape[i] - 1) * strides[i];
        else lo += (shape[i] - 1) * strides[i];
    }
    if (empty) lo = hi = 0;
    b.base = (size_t)(TB_GUARD - lo);
    b.bytes = (size_t)(hi - lo + 1 + 2 * TB_GUARD) * es;
    b.mem = (unsigned char *)malloc(b.bytes);
    b.dev = test_mem ? test_mem->alloc(b.bytes) : b.mem;
    b.t = ssm_tensor_make((unsigned char *)b.dev + b.base * es, dt, test_mem ? test_mem->device : ssm_cpu(), ndim,
                          shape, strides);
    tb_poison(&b);
    return b;
}
void tb_free(tbuf *b) {
    if (test_mem && b->dev != b->mem && b->dev) test_mem->release(b->dev);
    free(b->mem);
    b->mem = NULL;
    b->dev = NULL;
}
void tb_poison(tbuf *b) {
    memset(b->mem, 0xFF, b->bytes);
    tb_push(b);
}
int tb_untouched(const tbuf *b) {
    size_t i;
    tb_pull(b);
    for (i = 0; i < b->bytes; ++i) if (b->mem[i] != 0xFF) return 0;
    return 1;
}
int64_t tb_numel(const tbuf *b) { return ssm_tensor_numel(&b->t); }

/* Calls f(element offset from the buffer's start, logical index) for every element of the view. */
static void tb_each(const tbuf *b, void (*f)(const tbuf *, int64_t, int64_t, void *), void *u) {
    int64_t idx[SSM_MAX_DIMS] = {0}, n = tb_numel(b), k, off;
    int d;
    for (k = 0; k < n; ++k) {
        off = (int64_t)b->base;
        for (d = 0; d < b->t.ndim; ++d) off += idx[d] * b->t.strides[d];
        f(b, off, k, u);
        for (d = b->t.ndim - 1; d >= 0; --d) {
            if (++idx[d] < b->t.shape[d]) break;
            idx[d] = 0;
        }
    }
}
static void set_one(const tbuf *b, int64_t off, int64_t k, void *u) {
    double v = ((const double *)u)[k];
    ssm_dtype dt = b->t.dtype;
    if (dt.bits == 64) ((double *)b->mem)[off] = v;
    else if (dt.code == SSM_DTYPE_INT) ((int32_t *)b->mem)[off] = (int32_t)v;
    else if (dt.bits == 32) ((float *)b->mem)[off] = (float)v;
    else if (dt.code == SSM_DTYPE_BFLOAT) ((uint16_t *)b->mem)[off] = test_bf16_bits(v);
    else ((uint16_t *)b->mem)[off] = test_f16_bits(v);
}
static void get_one(const tbuf *b, int64_t off, int64_t k, void *u) {
    ssm_dtype dt = b->t.dtype;
    double *v = (double *)u + k;
    if (dt.bits == 64) *v = ((double *)b->mem)[off];
    else if (dt.code == SSM_DTYPE_INT) *v = (double)((int32_t *)b->mem)[off];
    else if (dt.bits == 32) *v = (double)((float *)b->mem)[off];
    else if (dt.code == SSM_DTYPE_BFLOAT) *v = test_bf16_value(((uint16_t *)b->mem)[off]);
    else *v = test_f16_value(((uint16_t *)b->mem)[off]);
}
static void mark_one(const tbuf *b, int64_t off, int64_t k, void *u) {
    size_t es = b->t.dtype.bits / 8;
    (void)k;
    memset((unsigned char *)u + (size_t)off * es, 1, es);
}
void tb_set(tbuf *b, const double *src) {
    tb_pull(b);
    tb_each(b, set_one, (void *)src);
    tb_push(b);
}
void tb_get(const tbuf *b, double *dst) {
    tb_pull(b);
    tb_each(b, get_one, dst);
}
int tb_outside_untouched(const tbuf *b) {
    unsigned char *inside = (unsigned char *)calloc(b->bytes, 1);
    size_t i;
    int ok = 1;
    tb_pull(b);
    tb_each(b, mark_one, inside);
    for (i = 0; i < b->bytes; ++i) if (!inside[i] && b->mem[i] != 0xFF) ok = 0;
    free(inside);
    return ok;
}
tbuf tb_random(ssm_dtype dt, int ndim, const int64_t *shape, int layout, double scale, double **vals) {
    tbuf b = tb_new(dt, ndim, shape, layout);
    int64_t n = tb_numel(&b), i;
    double *v = (double *)malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (i = 0; i < n; ++i) v[i] = test_uniform(-scale, scale);
    tb_set(&b, v);
    tb_get(&b, v); /* the values as stored (rounded to dt) */
    if (vals) *vals = v;
    else free(v);
    return b;
}

double rel_err(const double *a, const double *b, int64_t n) {
    double num = 0, den = 0;
    int64_t i;
    for (i = 0; i < n; ++i) {
        if (a[i] != a[i]) return INFINITY;
        num += (a[i] - b[i]) * (a[i] - b[i]);
        den += b[i] * b[i];
    }
    return sqrt(num) / (den > 1e-300 ? sqrt(den) : 1.0);
}

ssm_ctx *test_ctx(void) {
    ssm_ctx *ctx = NULL;
    ssm_ctx_config cfg = ssm_ctx_config_init();
    cfg.backend = test_backend;
    cfg.backend_config = test_backend_config;
    if (ssm_ctx_create(&cfg, &ctx) != SSM_OK) test_fail(__FILE__, __LINE__, "ssm_ctx_create failed");
    return ctx;
}

static void run_suites(const char *label) {
    fprintf(stderr, "== backend: %s\n", label);
    suite_core();
    suite_linrec();
    suite_decay();
    suite_bell();
    suite_proj();
    suite_reliab();
    suite_cases();
    suite_delta();
}

int main(void) {
    const char *seed = getenv("SSM_TEST_SEED");
    run_seed = seed ? strtoull(seed, NULL, 10) : (unsigned long long)time(NULL);
    fprintf(stderr, "seed %llu (SSM_TEST_SEED=%llu reproduces this run)\n", run_seed, run_seed);
    test_backend = ssm_reference_backend();
    run_suites("reference");
#ifdef SSM_TEST_BLAS
    test_backend = ssm_blas_backend();
    run_suites("blis");
    suite_blas();
#endif
    if (test_skipped) printf("%d skipped (the backend declined the op)\n", test_skipped);
    printf("%d passed, %d failed\n", test_passed, test_failed);
    return test_failed ? 1 : 0;
}

/* ---- context parallelism: ranks as threads ------------------------------------------------- */
void cp_world_init(cp_world *w, int R, size_t bytes) {
    memset(w, 0, sizeof *w);
    pthread_mutex_init(&w->mu, NULL), pthread_cond_init(&w->cv, NULL);
    w->R = R, w->bytes = bytes;
    w->stage = (unsigned char *)malloc(bytes * (size_t)R);
}
void cp_world_free(cp_world *w) {
    pthread_mutex_destroy(&w->mu), pthread_cond_destroy(&w->cv);
    free(w->stage);
}
static void cp_barrier(cp_world *w) {
    unsigned g;
    pthread_mutex_lock(&w->mu);
    g = w->gen;
    if (++w->arrived == w->R) w->arrived = 0, ++w->gen, pthread_cond_broadcast(&w->cv);
    else
        while (g == w->gen) pthread_cond_wait(&w->cv, &w->mu);
    pthread_mutex_unlock(&w->mu);
}
ssm_result cp_allgather(void *user, const void *send, void *recv, size_t bytes) {
    const cp_peer *pe = (const cp_peer *)user;
    cp_world *w = pe->w;
    pthread_mutex_lock(&w->mu);
    if (w->bytes != bytes) w->bad = 1; /* every rank exchanges the same size */
    pthread_mutex_unlock(&w->mu);
    if (bytes <= w->bytes) {
        if (test_mem) test_mem->download(w->stage + (size_t)pe->rank * bytes, send, bytes);
        else memcpy(w->stage + (size_t)pe->rank * bytes, send, bytes);
    }
    cp_barrier(w);
    if (bytes <= w->bytes) {
        if (test_mem) test_mem->upload(recv, w->stage, bytes * (size_t)w->R);
        else memcpy(recv, w->stage, bytes * (size_t)w->R);
    }
    cp_barrier(w); /* the stage is read before any rank's next call writes it */
    return SSM_OK;
}
void cp_slice(const double *src, double *dst, int64_t S, int64_t T, int64_t t0, int64_t len, int64_t row, int put) {
    int64_t s;
    for (s = 0; s < S; ++s) {
        if (put) memcpy((double *)src + (s * T + t0) * row, dst + s * len * row, sizeof(double) * (size_t)(len * row));
        else memcpy(dst + s * len * row, src + (s * T + t0) * row, sizeof(double) * (size_t)(len * row));
    }
}
