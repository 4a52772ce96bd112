/* Shared benchmark helpers: wall-clock timing with warm-up and medians, the machine's two
   ceilings measured in the same run (copy bandwidth, GEMM rate of the context's backend),
   and JSON-lines rows (one JSON object a line: op, shape, dtype, backend, times, the
   ceilings). Header-only; include once per
   benchmark program (after ssm.h with its implementation). */
#ifndef SSM_BENCH_H
#define SSM_BENCH_H

/* clock_gettime needs POSIX: the Makefile compiles benchmarks with -D_POSIX_C_SOURCE=200809L. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef SSM_BENCH_COMMIT
#define SSM_BENCH_COMMIT "unknown"
#endif

static double bench_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static int bench__cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static double bench_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof(double), bench__cmp);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Median wall time of fn(arg) in ms: one warm-up call, then 10 repeats (3 when a call takes
   over a second; BENCH_QUICK=1 in the environment caps repeats at 3 for smoke runs). */
static double bench_time_ms(void (*fn)(void *), void *arg) {
    double t[10], first;
    int reps = 10, i;
    fn(arg);
    first = bench_now_ms();
    fn(arg);
    first = bench_now_ms() - first;
    if (first > 1000.0 || getenv("BENCH_QUICK")) reps = 3;
    t[0] = first;
    for (i = 1; i < reps; ++i) {
        double s = bench_now_ms();
        fn(arg);
        t[i] = bench_now_ms() - s;
    }
    return bench_median(t, reps);
}

static const char *bench_device(void) {
    static char name[256];
    FILE *f;
    char line[512];
    if (name[0]) return name;
    strcpy(name, "unknown CPU");
    f = fopen("/proc/cpuinfo", "r");
    if (!f) return name;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "model name", 10)) {
            char *p = strchr(line, ':'), *q;
            if (!p) break;
            p += 2;
            for (q = p; *q && *q != '\n' && *q != '"'; ++q) {}
            *q = 0;
            snprintf(name, sizeof name, "%s", p);
            break;
        }
    fclose(f);
    return name;
}

static const char *bench_date(void) {
    static char buf[32];
    time_t now = time(NULL);
    strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    return buf;
}

/* Machine ceilings for the floor column. */
typedef struct bench_ceilings {
    double copy_gbs;     /* bytes read + written per second, large memcpy, GB/s */
    double gemm_gflops;  /* one large square GEMM through the backend, f32      */
} bench_ceilings;

static void bench__copy(void *arg) {
    void **p = (void **)arg;
    memcpy(p[0], p[1], (size_t)1 << 28);
}

typedef struct bench__gemm_arg {
    ssm_ctx *ctx;
    float *a, *b, *c;
    int64_t n;
} bench__gemm_arg;

static void bench__gemm(void *arg) {
    bench__gemm_arg *g = (bench__gemm_arg *)arg;
    ssm_matrix_batch A, B, C;
    A.ptr = g->a, A.rs = g->n, A.cs = 1, A.bs = 0;
    B.ptr = g->b, B.rs = g->n, B.cs = 1, B.bs = 0;
    C.ptr = g->c, C.rs = g->n, C.cs = 1, C.bs = 0;
    ssm_ctx_gemm(g->ctx, SSM_F32, 1, g->n, g->n, g->n, 1.0, A, B, 0.0, C);
}

/* gemm_n: the size of the square GEMM (1024 is plenty for BLIS; the reference backend is
   measured at 256 to keep the run short). */
static inline bench_ceilings bench_measure_ceilings(ssm_ctx *ctx, int64_t gemm_n) {
    bench_ceilings c;
    size_t bytes = (size_t)1 << 28, i;
    void *p[2];
    bench__gemm_arg g;
    double ms;
    p[0] = malloc(bytes);
    p[1] = malloc(bytes);
    memset(p[0], 1, bytes);
    for (i = 0; i < bytes; i += 4096) ((char *)p[1])[i] = (char)i;
    ms = bench_time_ms(bench__copy, p);
    c.copy_gbs = 2.0 * (double)bytes / (ms * 1e6);
    free(p[0]);
    free(p[1]);
    g.ctx = ctx;
    g.n = gemm_n;
    g.a = (float *)malloc(sizeof(float) * (size_t)(gemm_n * gemm_n));
    g.b = (float *)malloc(sizeof(float) * (size_t)(gemm_n * gemm_n));
    g.c = (float *)malloc(sizeof(float) * (size_t)(gemm_n * gemm_n));
    for (i = 0; i < (size_t)(gemm_n * gemm_n); ++i) {
        g.a[i] = (float)((i * 7919) % 1000) * 1e-3f - 0.5f;
        g.b[i] = (float)((i * 104729) % 1000) * 1e-3f - 0.5f;
    }
    ms = bench_time_ms(bench__gemm, &g);
    c.gemm_gflops = 2.0 * (double)gemm_n * (double)gemm_n * (double)gemm_n / (ms * 1e6);
    free(g.a);
    free(g.b);
    free(g.c);
    return c;
}

/* floor_ms = max(bytes / copy bandwidth, flops / GEMM rate). */
static inline double bench_floor_ms(const bench_ceilings *c, double bytes, double flops) {
    double a = bytes / (c->copy_gbs * 1e6), b = flops / (c->gemm_gflops * 1e6);
    return a > b ? a : b;
}

/* One JSON line: shape_json is an object literal, extra_json ("" or ",\"k\":v,...") adds
   op-specific fields. floor_ms / relerr < 0 and peak_mem < 0 are written as null.
   BENCH_NO_JSON=1 in the environment (make run's smoke rows) writes nothing. */
static inline void bench_json(const char *path, const char *op, const char *impl, const char *backend,
                       const char *dtype, const char *shape_json, double ms, double floor_ms,
                       double peak_mem, double relerr, const char *extra_json) {
    FILE *f = getenv("BENCH_NO_JSON") ? NULL : fopen(path, "a");
    char fl[64], pm[64], re[64];
    if (getenv("BENCH_NO_JSON")) return;
    if (!f) {
        fprintf(stderr, "bench: cannot append to %s\n", path);
        return;
    }
    if (floor_ms >= 0) snprintf(fl, sizeof fl, "%.6g", floor_ms); else strcpy(fl, "null");
    if (peak_mem >= 0) snprintf(pm, sizeof pm, "%.0f", peak_mem); else strcpy(pm, "null");
    if (relerr >= 0) snprintf(re, sizeof re, "%.3e", relerr); else strcpy(re, "null");
    fprintf(f,
            "{\"op\":\"%s\",\"impl\":\"%s\",\"backend\":\"%s\",\"dtype\":\"%s\",\"shape\":%s,"
            "\"ms\":%.6g,\"floor_ms\":%s,\"peak_mem_bytes\":%s,\"relerr\":%s,\"device\":\"%s\","
            "\"date\":\"%s\",\"commit\":\"%s\"%s}\n",
            op, impl, backend, dtype, shape_json, ms, fl, pm, re, bench_device(), bench_date(),
            SSM_BENCH_COMMIT, extra_json ? extra_json : "");
    fclose(f);
}

#endif
