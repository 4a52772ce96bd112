/* CPU benchmark of the dense linear recurrence: seed 000's MVE table (n = 32, T = 64..1024,
   and n = 64) for every method on the reference backend. Prints ms (median), GFLOP/s, the
   products each method performed, the relative error against an f64 solve, and the floor
   (max of bytes / copy bandwidth and the sequential method's FLOPs / GEMM rate, both
   measured in this run). Appends JSON lines to bench/results/cpu_linrec.jsonl. */
#define SSM_IMPLEMENTATION
#include "../ssm.h"
#include "bench.h"
#include <math.h>

#define RESULTS "bench/results/cpu_linrec.jsonl"

typedef struct run_arg {
    ssm_ctx *ctx;
    ssm_linrec_desc desc;
    ssm_tensor A, b, h;
} run_arg;

static void run_forward(void *p) {
    run_arg *r = (run_arg *)p;
    ssm_result res = ssm_linrec_forward(r->ctx, &r->desc, &r->A, &r->b, NULL, &r->h, NULL);
    if (res != SSM_OK) {
        fprintf(stderr, "linrec failed: %s\n", ssm_ctx_last_error(r->ctx));
        exit(1);
    }
}

static double relerr_f32_vs_f64(const float *a, const double *b, int64_t n) {
    double num = 0, den = 0;
    int64_t i;
    for (i = 0; i < n; ++i) {
        num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        den += b[i] * b[i];
    }
    return sqrt(num / (den > 0 ? den : 1));
}

int main(void) {
    static const struct { int64_t n, T; } grid[] = {{32, 64},  {32, 128}, {32, 256}, {32, 512},
                                                   {32, 1024}, {64, 64},  {64, 256}, {64, 1024}};
    const int64_t S = 1, m = 1;
    ssm_ctx *ctx;
    ssm_ctx_config cfg = ssm_ctx_config_init();
    bench_ceilings ceil;
    size_t g;
    double cr_ms = 0, hs_ms = 0, cr_prod = 0, hs_prod = 0;
    if (ssm_ctx_create(&cfg, &ctx) != SSM_OK) return 1;
    ceil = bench_measure_ceilings(ctx, 256);
    printf("device: %s   backend: %s   copy %.1f GB/s   gemm(256^3, f32) %.2f GFLOP/s\n", bench_device(),
           ssm_ctx_backend_name(ctx), ceil.copy_gbs, ceil.gemm_gflops);
    printf("%4s %5s %-9s %10s %8s %8s %8s %9s %10s %9s %8s\n", "n", "T", "method", "ms", "GFLOP/s", "mat_mat",
           "mat_st", "relerr", "floor_ms", "x_floor", "ws_MB");
    for (g = 0; g < sizeof grid / sizeof grid[0]; ++g) {
        int64_t n = grid[g].n, T = grid[g].T, sA[4] = {S, T, n, n}, sb[4] = {S, T, n, m}, i;
        int64_t nA = S * T * n * n, nb = S * T * n * m;
        float *A = (float *)malloc(sizeof(float) * (size_t)nA), *b = (float *)malloc(sizeof(float) * (size_t)nb);
        float *h = (float *)malloc(sizeof(float) * (size_t)nb);
        double *Ad = (double *)malloc(sizeof(double) * (size_t)nA), *bd = (double *)malloc(sizeof(double) * (size_t)nb);
        double *hd = (double *)malloc(sizeof(double) * (size_t)nb);
        double bytes = 4.0 * (double)(nA + 2 * nb), seq_flops = 2.0 * (double)n * (double)n * (double)m * (double)(T - 1);
        double floor_ms = bench_floor_ms(&ceil, bytes, seq_flops);
        run_arg r;
        int mi;
        /* transitions scaled to spectral radius < 1 (row sums of |a| <= 0.95) */
        srand(1234 + (unsigned)g);
        for (i = 0; i < nA; ++i) A[i] = (float)(((double)rand() / RAND_MAX * 2 - 1) * 0.95 / (double)n);
        for (i = 0; i < nb; ++i) b[i] = (float)((double)rand() / RAND_MAX * 2 - 1);
        for (i = 0; i < nA; ++i) Ad[i] = A[i];
        for (i = 0; i < nb; ++i) bd[i] = b[i];
        /* the f64 reference on the same (f32-rounded) inputs */
        {
            ssm_tensor tA = ssm_tensor_make(Ad, SSM_F64, ssm_cpu(), 4, sA, NULL);
            ssm_tensor tb = ssm_tensor_make(bd, SSM_F64, ssm_cpu(), 4, sb, NULL);
            ssm_tensor th = ssm_tensor_make(hd, SSM_F64, ssm_cpu(), 4, sb, NULL);
            ssm_linrec_desc d = ssm_linrec_desc_init();
            d.method = SSM_LINREC_SEQUENTIAL;
            ssm_linrec_forward(ctx, &d, &tA, &tb, NULL, &th, NULL);
        }
        r.ctx = ctx;
        r.A = ssm_tensor_make(A, SSM_F32, ssm_cpu(), 4, sA, NULL);
        r.b = ssm_tensor_make(b, SSM_F32, ssm_cpu(), 4, sb, NULL);
        r.h = ssm_tensor_make(h, SSM_F32, ssm_cpu(), 4, sb, NULL);
        for (mi = 0; mi < SSM_LINREC_METHOD_COUNT; ++mi) {
            ssm_linrec_stats st;
            double ms, err, gflops;
            char shape[128], impl[64], extra[256];
            r.desc = ssm_linrec_desc_init();
            r.desc.method = (ssm_linrec_method)mi;
            r.desc.stats = &st;
            for (i = 0; i < nb; ++i) h[i] = NAN;
            ms = bench_time_ms(run_forward, &r);
            err = relerr_f32_vs_f64(h, hd, nb);
            gflops = st.flops / (ms * 1e6);
            printf("%4lld %5lld %-9s %10.3f %8.2f %8lld %8lld %9.2e %10.4f %9.1f %8.2f\n", (long long)n, (long long)T,
                   ssm_linrec_method_name((ssm_linrec_method)mi), ms, gflops, (long long)st.mat_mat,
                   (long long)st.mat_state, err, floor_ms, ms / floor_ms, (double)st.workspace_bytes / 1048576.0);
            snprintf(shape, sizeof shape, "{\"S\":%lld,\"T\":%lld,\"n\":%lld,\"m\":%lld}", (long long)S, (long long)T,
                     (long long)n, (long long)m);
            snprintf(impl, sizeof impl, "ours:%s", ssm_linrec_method_name((ssm_linrec_method)mi));
            snprintf(extra, sizeof extra, ",\"gflops\":%.4g,\"products\":%lld,\"mat_mat\":%lld,\"mat_state\":%lld",
                     gflops, (long long)(st.mat_mat + st.mat_state), (long long)st.mat_mat, (long long)st.mat_state);
            bench_json(RESULTS, "linrec", impl, "ref", "f32", shape, ms, floor_ms, (double)st.workspace_bytes, err, extra);
            if (n == 32 && T == 1024 && mi == SSM_LINREC_CR) cr_ms = ms, cr_prod = (double)(st.mat_mat + st.mat_state);
            if (n == 32 && T == 1024 && mi == SSM_LINREC_SCAN_HS) hs_ms = ms, hs_prod = (double)(st.mat_mat + st.mat_state);
        }
        free(A); free(b); free(h); free(Ad); free(bd); free(hd);
    }
    printf("T=1024 n=32: cyclic reduction vs Hillis-Steele scan: %.2fx wall clock, %.2fx fewer products "
           "(seed: 3.88x and 6.01x)\n", hs_ms / cr_ms, hs_prod / cr_prod);
    ssm_ctx_destroy(ctx);
    return 0;
}
