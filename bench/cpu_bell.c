/* Block-ELL sparse linear layer on the CPU (the context's backend: reference unless built
   otherwise): forward and forward+backward ms on the seed shape (640 -> 2560) at densities
   25/50/75% and B 16/32/64, next to the dense GEMM of the same shape on the same backend in
   the same run. Runs on the reference backend and, when built with SSM_BENCH_BLAS (make
   does when BLIS is installed), on the BLIS backend (1 thread; SSM_BENCH_THREADS=N) after it.
   N (tokens) defaults to 128 on the reference backend (the seed's 8192 takes minutes per
   row there; BENCH_N overrides) and to the seed's 8192 on BLIS (BENCH_N_BLIS overrides). JSON lines -> bench/results/cpu_bell.jsonl. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime in bench.h: must precede the first system header */
#define SSM_IMPLEMENTATION
#include "../ssm.h"
#ifdef SSM_BENCH_BLAS
#define SSM_BLAS_IMPLEMENTATION
#include "../ssm_blas.h"
#endif
#include "bench.h"
#include <math.h>

#define IN 640
#define OUT 2560
#define RESULTS "bench/results/cpu_bell.jsonl"

typedef struct run {
    ssm_ctx *ctx;
    int64_t N;
    ssm_tensor x, v, col, toff, tsl, y, dy, dx, dv, dense, dense_t, yd, dxd, dwd;
} run;

static void check(ssm_ctx *ctx, ssm_result r, const char *what) {
    if (r != SSM_OK) {
        fprintf(stderr, "%s: %s (%s)\n", what, ssm_result_string(r), ssm_ctx_last_error(ctx));
        exit(1);
    }
}

static void bell_fwd(void *a) {
    run *R = (run *)a;
    check(R->ctx, ssm_bell_forward(R->ctx, &R->x, &R->v, &R->col, NULL, &R->y), "forward");
}
static void bell_fwdbwd(void *a) {
    run *R = (run *)a;
    bell_fwd(a);
    check(R->ctx, ssm_bell_backward(R->ctx, &R->x, &R->v, &R->col, &R->toff, &R->tsl, &R->dy, &R->dx, &R->dv, NULL), "backward");
}
static ssm_matrix_batch mb(const ssm_tensor *t, int transpose) {
    ssm_matrix_batch m;
    m.ptr = t->data, m.rs = transpose ? t->strides[1] : t->strides[0], m.cs = transpose ? t->strides[0] : t->strides[1], m.bs = 0;
    return m;
}
/* The dense peer: y = x W^T (from a stored transpose, the layout the GEMM streams best);
   backward dx = dy W, dW = dy^T x. */
static void dense_fwd(void *a) {
    run *R = (run *)a;
    check(R->ctx, ssm_ctx_gemm(R->ctx, SSM_F32, 1, R->N, OUT, IN, 1.0, mb(&R->x, 0), mb(&R->dense_t, 0), 0.0, mb(&R->yd, 0)), "dense");
}
static void dense_fwdbwd(void *a) {
    run *R = (run *)a;
    dense_fwd(a);
    check(R->ctx, ssm_ctx_gemm(R->ctx, SSM_F32, 1, R->N, IN, OUT, 1.0, mb(&R->dy, 0), mb(&R->dense, 0), 0.0, mb(&R->dxd, 0)), "dense dx");
    check(R->ctx, ssm_ctx_gemm(R->ctx, SSM_F32, 1, OUT, IN, R->N, 1.0, mb(&R->dy, 1), mb(&R->x, 0), 0.0, mb(&R->dwd, 0)), "dense dW");
}

static float *frand(size_t n, unsigned *seed) {
    float *p = (float *)malloc(sizeof(float) * n);
    size_t i;
    for (i = 0; i < n; ++i) {
        *seed = *seed * 1664525u + 1013904223u;
        p[i] = (float)((*seed >> 8) & 0xFFFF) / 32768.0f - 1.0f;
    }
    return p;
}

static void bench_backend(ssm_ctx *ctx, const char *be, int64_t N, int64_t gemm_n) {
    static const int Bs[3] = {16, 32, 64};
    static const double dens[3] = {0.25, 0.5, 0.75};
    run R;
    bench_ceilings ce;
    unsigned seed = 12345u;
    int64_t sx[2], sy[2], sw[2];
    float *x, *dy, *y, *dx, *dense, *dense_t, *yd, *dxd, *dwd;
    int64_t st[2] = {IN, OUT}, i;
    double dense_ms[2], dflops = 2.0 * (double)IN * (double)OUT;
    int bi, di;
    char impl[32];
    ce = bench_measure_ceilings(ctx, gemm_n);
    snprintf(impl, sizeof impl, "ours:%s", be);
    memset(&R, 0, sizeof R);
    R.ctx = ctx, R.N = N;
    sx[0] = N, sx[1] = IN, sy[0] = N, sy[1] = OUT, sw[0] = OUT, sw[1] = IN;
    x = frand((size_t)(N * IN), &seed), dy = frand((size_t)(N * OUT), &seed), dense = frand((size_t)(OUT * IN), &seed);
    y = (float *)malloc(sizeof(float) * (size_t)(N * OUT)), yd = (float *)malloc(sizeof(float) * (size_t)(N * OUT));
    dx = (float *)malloc(sizeof(float) * (size_t)(N * IN)), dxd = (float *)malloc(sizeof(float) * (size_t)(N * IN));
    dwd = (float *)malloc(sizeof(float) * (size_t)(OUT * IN)), dense_t = (float *)malloc(sizeof(float) * (size_t)(OUT * IN));
    for (i = 0; i < OUT * IN; ++i) dense_t[(i % IN) * OUT + i / IN] = dense[i];
    R.x = ssm_tensor_make(x, SSM_F32, ssm_cpu(), 2, sx, NULL), R.dy = ssm_tensor_make(dy, SSM_F32, ssm_cpu(), 2, sy, NULL);
    R.y = ssm_tensor_make(y, SSM_F32, ssm_cpu(), 2, sy, NULL), R.yd = ssm_tensor_make(yd, SSM_F32, ssm_cpu(), 2, sy, NULL);
    R.dx = ssm_tensor_make(dx, SSM_F32, ssm_cpu(), 2, sx, NULL), R.dxd = ssm_tensor_make(dxd, SSM_F32, ssm_cpu(), 2, sx, NULL);
    R.dense = ssm_tensor_make(dense, SSM_F32, ssm_cpu(), 2, sw, NULL), R.dwd = ssm_tensor_make(dwd, SSM_F32, ssm_cpu(), 2, sw, NULL);
    R.dense_t = ssm_tensor_make(dense_t, SSM_F32, ssm_cpu(), 2, st, NULL);
    dense_ms[0] = bench_time_ms(dense_fwd, &R);
    dense_ms[1] = bench_time_ms(dense_fwdbwd, &R);
    printf("block-ELL linear %d -> %d, N = %lld, f32, backend %s, %s\n", IN, OUT, (long long)N, ssm_ctx_backend_name(ctx), bench_device());
    printf("ceilings: copy %.1f GB/s, GEMM %.2f GFLOP/s; dense GEMM of the same shape: fwd %.3f ms, fwd+bwd %.3f ms\n",
           ce.copy_gbs, ce.gemm_gflops, dense_ms[0], dense_ms[1]);
    printf("%-11s %3s %7s %10s %10s %8s %10s %9s %9s\n", "op", "B", "density", "ms", "floor_ms", "x floor", "dense_ms", "vs dense", "relerr");
    {
        char shape[160];
        snprintf(shape, sizeof shape, "{\"N\":%lld,\"in\":%d,\"out\":%d}", (long long)N, IN, OUT);
        bench_json(RESULTS, "bell_fwd", "peer:dense_gemm", be, "f32", shape, dense_ms[0],
                   bench_floor_ms(&ce, 4.0 * (double)(N * IN + OUT * IN + N * OUT), dflops * (double)N), -1, -1, "");
        bench_json(RESULTS, "bell_fwdbwd", "peer:dense_gemm", be, "f32", shape, dense_ms[1],
                   bench_floor_ms(&ce, 4.0 * (double)(2 * (N * IN + OUT * IN + N * OUT) + N * OUT + N * IN + OUT * IN),
                                  3.0 * dflops * (double)N), -1, -1, "");
    }
    for (bi = 0; bi < 3; ++bi)
        for (di = 0; di < 3; ++di) {
            int64_t B = Bs[bi], Rb = OUT / B, C = IN / B, K = (int64_t)(dens[di] * (double)C + 0.5), sv[4], sc[2], so[1], ss[1];
            int64_t r, k, n, o, i, nv = Rb * K * B * B;
            int32_t *col = (int32_t *)malloc(sizeof(int32_t) * (size_t)(Rb * K)), *toff = (int32_t *)malloc(sizeof(int32_t) * (size_t)(C + 1));
            int32_t *tsl = (int32_t *)malloc(sizeof(int32_t) * (size_t)(Rb * K));
            float *v = frand((size_t)nv, &seed), *dv = (float *)malloc(sizeof(float) * (size_t)nv);
            double ms[2], fl[2], by[2], num = 0, den = 0, density = (double)K / (double)C;
            char shape[200], extra[64];
            for (r = 0; r < Rb; ++r) /* a strided pick of K columns per row, shifted by row */
                for (k = 0; k < K; ++k) col[r * K + k] = (int32_t)((k * C / K + r) % C);
            sv[0] = Rb, sv[1] = K, sv[2] = B, sv[3] = B, sc[0] = Rb, sc[1] = K, so[0] = C + 1, ss[0] = Rb * K;
            R.v = ssm_tensor_make(v, SSM_F32, ssm_cpu(), 4, sv, NULL), R.dv = ssm_tensor_make(dv, SSM_F32, ssm_cpu(), 4, sv, NULL);
            R.col = ssm_tensor_make(col, SSM_I32, ssm_cpu(), 2, sc, NULL);
            R.toff = ssm_tensor_make(toff, SSM_I32, ssm_cpu(), 1, so, NULL), R.tsl = ssm_tensor_make(tsl, SSM_I32, ssm_cpu(), 1, ss, NULL);
            check(ctx, ssm_bell_transpose_index(ctx, &R.col, &R.toff, &R.tsl), "transpose");
            ms[0] = bench_time_ms(bell_fwd, &R);
            ms[1] = bench_time_ms(bell_fwdbwd, &R);
            /* relative error of the first rows of y against f64 loops over the dense form */
            check(ctx, ssm_bell_to_dense(ctx, &R.v, &R.col, &R.dense), "to_dense");
            bell_fwd(&R);
            for (n = 0; n < 4 && n < N; ++n)
                for (o = 0; o < OUT; ++o) {
                    double acc = 0;
                    for (i = 0; i < IN; ++i) acc += (double)x[n * IN + i] * (double)dense[o * IN + i];
                    num += (y[n * OUT + o] - acc) * (y[n * OUT + o] - acc), den += acc * acc;
                }
            fl[0] = dflops * (double)N * density, fl[1] = 3.0 * fl[0];
            by[0] = 4.0 * (double)(N * IN + nv + N * OUT) + 4.0 * (double)(Rb * K);
            by[1] = by[0] + 4.0 * (double)(N * IN + nv + N * OUT + N * IN + nv) + 4.0 * (double)(Rb * K + C + 1);
            snprintf(shape, sizeof shape, "{\"N\":%lld,\"in\":%d,\"out\":%d,\"B\":%lld,\"density\":%.4g}", (long long)N, IN, OUT,
                     (long long)B, density);
            for (k = 0; k < 2; ++k) {
                double fm = bench_floor_ms(&ce, by[k], fl[k]);
                snprintf(extra, sizeof extra, ",\"dense_ms\":%.6g", dense_ms[k]);
                bench_json(RESULTS, k ? "bell_fwdbwd" : "bell_fwd", impl, be, "f32", shape, ms[k], fm, -1,
                           k ? -1 : sqrt(num / den), extra);
                printf("%-11s %3lld %6.0f%% %10.3f %10.3f %8.2f %10.3f %8.2fx %9.2e\n", k ? "bell_fwdbwd" : "bell_fwd", (long long)B,
                       100 * density, ms[k], fm, ms[k] / fm, dense_ms[k], dense_ms[k] / ms[k], sqrt(num / den)); /* y's error */
            }
            free(col), free(toff), free(tsl), free(v), free(dv);
        }
    free(x), free(dy), free(y), free(dx), free(dense), free(dense_t), free(yd), free(dxd), free(dwd);
}

int main(void) {
    const char *envn = getenv("BENCH_N");
    int64_t N = envn ? atoll(envn) : 128;
    ssm_ctx *ctx;
    if (N < 1) N = 128;
    if (ssm_ctx_create(NULL, &ctx) != SSM_OK) return 1;
    bench_backend(ctx, "ref", N, 256);
    ssm_ctx_destroy(ctx);
#ifdef SSM_BENCH_BLAS
    {
        ssm_ctx_config cfg = ssm_ctx_config_init();
        const char *e = getenv("SSM_BENCH_THREADS"), *eb = getenv("BENCH_N_BLIS");
        int64_t Nb = eb ? atoll(eb) : 8192;
        cfg.backend = ssm_blas_backend();
        cfg.threads = e ? atoi(e) : 1; /* 1: this 2-core VM is shared (see bench/cpu_linrec.c) */
        if (Nb < 1) Nb = 8192;
        if (ssm_ctx_create(&cfg, &ctx) != SSM_OK) return 1;
        printf("\n");
        bench_backend(ctx, "blis", Nb, 1024);
        ssm_ctx_destroy(ctx);
    }
#else
    printf("BLIS not built in (make builds this benchmark with it once libblis-dev is installed)\n");
#endif
    return 0;
}
