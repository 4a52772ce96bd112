/* Fused vs unfused projection chain on the CPU backend, forward and
   forward+backward, at a CPU-sized Gated DeltaNet layer: d = 2048, q,k 1536 (SiLU + per-head
   L2 norm, head 256), v 3072 (SiLU), g 3072, a (decay gate, dt_bias) and b (sigmoid) one per
   head (6 heads). Plus the output chain RMSNorm(o)*SiLU(g) -> o_proj. Prints a table with
   GFLOP/s, the floor (max of FLOPs over the GEMM rate and bytes over the copy bandwidth, both
   measured in this run) and the ratio to it; appends JSON lines to bench/results/cpu_proj.jsonl.
   Runs on the reference backend (M = 64, 128) and, when built with SSM_BENCH_BLAS (make does
   when BLIS is installed), on the BLIS backend (1 thread; SSM_BENCH_THREADS=N) at M = 1024,
   4096. BENCH_M=... / BENCH_M_BLIS=... override the row counts (comma-separated);
   BENCH_QUICK=1 for smoke runs. */
#ifndef _POSIX_C_SOURCE /* clock_gettime in bench.h (main's Makefile also passes it) */
#define _POSIX_C_SOURCE 200809L
#endif
#define SSM_IMPLEMENTATION
#include "../ssm.h"
#ifdef SSM_BENCH_BLAS
#define SSM_BLAS_IMPLEMENTATION
#include "../ssm_blas.h"
#endif
#include "bench.h"
#include <math.h>

#define OUT "bench/results/cpu_proj.jsonl"
enum { D = 2048, HEADS = 6, DK = 256, DV = 512 };

typedef struct job {
    ssm_ctx *ctx;
    ssm_proj_desc d;
    ssm_tensor x, W, b, al, y, pre, dy, dx, dW, db, dal;
    ssm_outchain_desc od;
    ssm_tensor o, g, nw, Wo, yo, rstd, dyo, dO, dg, dnw, dWo;
    int fail;
} job;

static float *frand(size_t n, float scale, unsigned seed) {
    float *p = (float *)malloc(sizeof(float) * (n ? n : 1));
    size_t i;
    unsigned s = seed * 2654435761u + 1u;
    for (i = 0; i < n; ++i) {
        s = s * 1664525u + 1013904223u;
        p[i] = scale * ((float)(s >> 8) / 16777216.0f * 2.0f - 1.0f);
    }
    return p;
}
static ssm_tensor mk(float *p, int64_t a, int64_t b) {
    int64_t s[2];
    s[0] = a, s[1] = b;
    return ssm_tensor_make(p, SSM_F32, ssm_cpu(), b ? 2 : 1, s, NULL);
}
static void check(job *j, ssm_result r) {
    if (r != SSM_OK && !j->fail) {
        fprintf(stderr, "bench: %s (%s)\n", ssm_result_string(r), ssm_ctx_last_error(j->ctx));
        j->fail = 1;
    }
}
static void run_fwd(void *a) {
    job *j = (job *)a;
    j->d.save = SSM_PROJ_SAVE_NONE;
    check(j, ssm_proj_forward(j->ctx, &j->d, &j->x, &j->W, &j->b, &j->al, &j->y, NULL));
}
static void run_fwdbwd(void *a) {
    job *j = (job *)a;
    j->d.save = SSM_PROJ_SAVE_PRE;
    check(j, ssm_proj_forward(j->ctx, &j->d, &j->x, &j->W, &j->b, &j->al, &j->y, &j->pre));
    check(j, ssm_proj_backward(j->ctx, &j->d, &j->x, &j->W, &j->b, &j->al, &j->pre, &j->dy, &j->dx, &j->dW, &j->db,
                               &j->dal));
}
static void run_oc_fwd(void *a) {
    job *j = (job *)a;
    check(j, ssm_outchain_forward(j->ctx, &j->od, &j->o, &j->g, &j->nw, &j->Wo, &j->yo, &j->rstd));
}
static void run_oc_fwdbwd(void *a) {
    job *j = (job *)a;
    run_oc_fwd(a);
    check(j, ssm_outchain_backward(j->ctx, &j->od, &j->o, &j->g, &j->nw, &j->Wo, &j->rstd, &j->dyo, &j->dO, &j->dg,
                                   &j->dnw, &j->dWo));
}

static double rel_diff(const float *a, const float *b, size_t n) {
    double num = 0, den = 0;
    size_t i;
    for (i = 0; i < n; ++i) {
        num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        den += (double)b[i] * b[i];
    }
    return sqrt(num / (den > 0 ? den : 1));
}

static const char *g_be = "ref";

static void row(const char *op, const char *impl, int64_t M, int64_t N, double ms, double flops, double bytes,
                const bench_ceilings *c, double ws, const char *extra) {
    char shape[160];
    double fl = bench_floor_ms(c, bytes, flops);
    snprintf(shape, sizeof shape, "{\"M\":%lld,\"d\":%d,\"N\":%lld}", (long long)M, D, (long long)N);
    printf("%-15s %-13s %6lld %6lld %10.1f %9.2f %10.1f %8.2f\n", op, impl, (long long)M, (long long)N, ms,
           flops / (ms * 1e6), fl, ms / fl);
    bench_json(OUT, op, impl, g_be, "f32", shape, ms, fl, ws, -1, extra);
}

static int bench_backend(ssm_ctx *ctx, const char *env, int64_t M0, int64_t M1, int64_t gemm_n) {
    bench_ceilings c;
    job j;
    int64_t Ms[8], nM = 2, i;
    int path;
    Ms[0] = M0, Ms[1] = M1;
    if (env) {
        const char *p = env;
        nM = 0;
        while (*p && nM < 8) {
            Ms[nM++] = strtoll(p, (char **)&p, 10);
            if (*p == ',') ++p;
            else break;
        }
    }
    c = bench_measure_ceilings(ctx, gemm_n);
    printf("device: %s   backend: %s   copy %.1f GB/s   GEMM (f32, n=%lld) %.2f GFLOP/s\n", bench_device(),
           ssm_ctx_backend_name(ctx), c.copy_gbs, (long long)gemm_n, c.gemm_gflops);
    printf("%-15s %-13s %6s %6s %10s %9s %10s %8s\n", "op", "impl", "M", "N", "ms", "GFLOP/s", "floor ms", "x floor");
    for (i = 0; i < nM; ++i) {
        int64_t M = Ms[i], N, G;
        float *x, *W, *b, *al, *y[2], *pre, *dy, *dx[2], *dW[2], *db, *dal;
        double es = 4.0, fl_f, by_f, fl_fb, by_fb, ms, agree_fwd = 0, agree_bwd = 0;
        char extra[128];
        size_t ws = 0;
        memset(&j, 0, sizeof j);
        j.ctx = ctx;
        j.d = ssm_proj_desc_init();
        ssm_proj_desc_add(&j.d, HEADS * DK, SSM_PROJ_SILU, 0, 0, DK);   /* q */
        ssm_proj_desc_add(&j.d, HEADS * DK, SSM_PROJ_SILU, 0, 0, DK);   /* k */
        ssm_proj_desc_add(&j.d, HEADS * DV, SSM_PROJ_SILU, 0, 0, 0);    /* v */
        ssm_proj_desc_add(&j.d, HEADS * DV, SSM_PROJ_NONE, 0, 0, 0);    /* g (output gate) */
        ssm_proj_desc_add(&j.d, HEADS, SSM_PROJ_DECAY_GATE, 0, 1, 0);   /* a: -exp(A_log) softplus(a + dt_bias) */
        ssm_proj_desc_add(&j.d, HEADS, SSM_PROJ_SIGMOID, 0, 0, 0);      /* b: beta */
        N = ssm_proj_desc_width(&j.d), G = HEADS;
        if (getenv("BENCH_BLOCK_ROWS")) j.d.block_rows = atoll(getenv("BENCH_BLOCK_ROWS"));
        x = frand((size_t)(M * D), 1.0f, 1), W = frand((size_t)(N * D), 0.02f, 2), b = frand((size_t)N, 0.5f, 3);
        al = frand((size_t)G, 1.0f, 4), dy = frand((size_t)(M * N), 1.0f, 5);
        y[0] = frand((size_t)(M * N), 0, 6), y[1] = frand((size_t)(M * N), 0, 7), pre = frand((size_t)(M * N), 0, 8);
        dx[0] = frand((size_t)(M * D), 0, 9), dx[1] = frand((size_t)(M * D), 0, 10);
        dW[0] = frand((size_t)(N * D), 0, 11), dW[1] = frand((size_t)(N * D), 0, 12);
        db = frand((size_t)N, 0, 13), dal = frand((size_t)G, 0, 14);
        j.x = mk(x, M, D), j.W = mk(W, N, D), j.b = mk(b, N, 0), j.al = mk(al, G, 0), j.pre = mk(pre, M, N);
        j.dy = mk(dy, M, N), j.db = mk(db, N, 0), j.dal = mk(dal, G, 0);
        fl_f = 2.0 * (double)M * (double)N * D;
        by_f = es * ((double)M * D + (double)N * D + (double)M * N);
        fl_fb = 3.0 * fl_f;
        by_fb = es * (2.0 * M * D + 2.0 * N * D + 4.0 * M * N + M * D + N * D);
        ssm_proj_workspace_size(ctx, &j.d, SSM_F32, M, D, 1, &ws);
        for (path = 0; path < 2; ++path) {
            const char *impl = path ? "ours:unfused" : "ours:fused";
            j.d.path = (ssm_proj_path)path;
            j.y = mk(y[path], M, N), j.dx = mk(dx[path], M, D), j.dW = mk(dW[path], N, D);
            ms = bench_time_ms(run_fwd, &j);
            if (path) agree_fwd = rel_diff(y[1], y[0], (size_t)(M * N));
            snprintf(extra, sizeof extra, ",\"fused_vs_unfused_relerr\":%.3e", path ? agree_fwd : 0.0);
            row("proj_fwd", impl, M, N, ms, fl_f, by_f, &c, 0, extra);
            ms = bench_time_ms(run_fwdbwd, &j);
            if (path) agree_bwd = rel_diff(dW[1], dW[0], (size_t)(N * D));
            snprintf(extra, sizeof extra, ",\"fused_vs_unfused_relerr\":%.3e", path ? agree_bwd : 0.0);
            row("proj_fwdbwd", impl, M, N, ms, fl_fb, by_fb, &c, (double)ws, extra);
        }
        printf("  fused vs unfused: y rel diff %.2e, dW rel diff %.2e\n", agree_fwd, agree_bwd);
        free(x); free(W); free(b); free(al); free(dy); free(y[0]); free(y[1]); free(pre);
        free(dx[0]); free(dx[1]); free(dW[0]); free(dW[1]); free(db); free(dal);
        {   /* output chain: o, g [M, 3072] (6 heads of 512), W_o [2048, 3072] */
            int64_t Dv = HEADS * DV;
            float *o = frand((size_t)(M * Dv), 1.0f, 21), *g = frand((size_t)(M * Dv), 2.0f, 22);
            float *nw = frand(DV, 1.0f, 23), *Wo = frand((size_t)(D * Dv), 0.02f, 24), *yo = frand((size_t)(M * D), 0, 25);
            float *rs = frand((size_t)(M * HEADS), 0, 26), *dyo = frand((size_t)(M * D), 1.0f, 27);
            float *dO = frand((size_t)(M * Dv), 0, 28), *dg = frand((size_t)(M * Dv), 0, 29), *dnw = frand(DV, 0, 30);
            float *dWo = frand((size_t)(D * Dv), 0, 31);
            char shape[160];
            double flo = 2.0 * (double)M * D * Dv, byo = es * (2.0 * M * Dv + (double)D * Dv + (double)M * D), fl;
            j.od = ssm_outchain_desc_init();
            j.od.head_dim = DV;
            j.o = mk(o, M, Dv), j.g = mk(g, M, Dv), j.nw = mk(nw, DV, 0), j.Wo = mk(Wo, D, Dv), j.yo = mk(yo, M, D);
            j.rstd = mk(rs, M, HEADS), j.dyo = mk(dyo, M, D), j.dO = mk(dO, M, Dv), j.dg = mk(dg, M, Dv);
            j.dnw = mk(dnw, DV, 0), j.dWo = mk(dWo, D, Dv);
            snprintf(shape, sizeof shape, "{\"M\":%lld,\"D\":%lld,\"d_out\":%d,\"head_dim\":%d}", (long long)M,
                     (long long)Dv, D, DV);
            ms = bench_time_ms(run_oc_fwd, &j);
            fl = bench_floor_ms(&c, byo, flo);
            printf("%-15s %-13s %6lld %6lld %10.1f %9.2f %10.1f %8.2f\n", "outchain_fwd", "ours:fused", (long long)M,
                   (long long)D, ms, flo / (ms * 1e6), fl, ms / fl);
            bench_json(OUT, "outchain_fwd", "ours:fused", g_be, "f32", shape, ms, fl, -1, -1, "");
            ms = bench_time_ms(run_oc_fwdbwd, &j);
            fl = bench_floor_ms(&c, byo * 2.0 + es * (2.0 * M * Dv + (double)D * Dv), 3.0 * flo);
            printf("%-15s %-13s %6lld %6lld %10.1f %9.2f %10.1f %8.2f\n", "outchain_fwdbwd", "ours:fused", (long long)M,
                   (long long)D, ms, 3.0 * flo / (ms * 1e6), fl, ms / fl);
            bench_json(OUT, "outchain_fwdbwd", "ours:fused", g_be, "f32", shape, ms, fl, -1, -1, "");
            free(o); free(g); free(nw); free(Wo); free(yo); free(rs); free(dyo); free(dO); free(dg); free(dnw); free(dWo);
        }
    }
    return j.fail;
}

int main(void) {
    ssm_ctx *ctx;
    int fail;
    /* the reference GEMM runs ~2 GFLOP/s: keep its rows to seconds */
    if (ssm_ctx_create(NULL, &ctx) != SSM_OK) return 1;
    fail = bench_backend(ctx, getenv("BENCH_M"), 64, 128, 256);
    ssm_ctx_destroy(ctx);
#ifdef SSM_BENCH_BLAS
    {
        ssm_ctx_config cfg = ssm_ctx_config_init();
        const char *e = getenv("SSM_BENCH_THREADS");
        cfg.backend = ssm_blas_backend();
        cfg.threads = e ? atoi(e) : 1; /* 1: this 2-core VM is shared (see bench/cpu_linrec.c) */
        if (ssm_ctx_create(&cfg, &ctx) != SSM_OK) return 1;
        g_be = "blis";
        printf("\n");
        fail |= bench_backend(ctx, getenv("BENCH_M_BLIS"), 1024, 4096, 1024);
        ssm_ctx_destroy(ctx);
    }
#else
    printf("BLIS not built in (make builds this benchmark with it once libblis-dev is installed)\n");
#endif
    return fail;
}
