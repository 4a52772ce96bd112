/* CPU benchmark of the delta rule (DeltaNet / Gated DeltaNet, f32): forward by the recurrent
   and the chunked (WY/UT on the batched GEMM) methods, and forward + backward, on the
   reference backend and, when built with SSM_BENCH_BLAS, on BLIS in the same run on the same
   inputs. Each row prints ms (median), the method's nominal GFLOP/s, the relative error of o
   against an f64 recurrent run on the same (f32-rounded) inputs, and the floor: max(bytes of
   q, k, v, beta, g, o once / copy bandwidth, the chunked form's FLOPs / the backend's GEMM
   rate), both measured in this run. Appends JSON lines to bench/results/cpu_delta.jsonl. */
#define SSM_IMPLEMENTATION
#include "../ssm.h"
#ifdef SSM_BENCH_BLAS
#define SSM_BLAS_IMPLEMENTATION
#include "../ssm_blas.h"
#endif
#include "bench.h"
#include <math.h>

#define RESULTS "bench/results/cpu_delta.jsonl"

typedef struct run_arg {
    ssm_ctx *ctx;
    ssm_delta_desc desc;
    int gated, backward;
    ssm_tensor q, k, v, beta, g, o, dq, dk, dv, dbeta, dg;
} run_arg;

static void run(void *p) {
    run_arg *r = (run_arg *)p;
    ssm_result res = ssm_delta_forward(r->ctx, &r->desc, &r->q, &r->k, &r->v, &r->beta, r->gated ? &r->g : NULL,
                                       NULL, NULL, &r->o, NULL);
    if (res == SSM_OK && r->backward)
        res = ssm_delta_backward(r->ctx, &r->desc, &r->q, &r->k, &r->v, &r->beta, r->gated ? &r->g : NULL, NULL, NULL,
                                 &r->o, NULL, &r->dq, &r->dk, &r->dv, &r->dbeta, r->gated ? &r->dg : NULL, NULL);
    if (res != SSM_OK) {
        fprintf(stderr, "delta failed: %s\n", ssm_ctx_last_error(r->ctx));
        exit(1);
    }
}

static float *fill(int64_t n, double lo, double hi, unsigned *seed) {
    float *x = (float *)malloc(sizeof(float) * (size_t)n);
    int64_t i;
    for (i = 0; i < n; ++i) {
        *seed = *seed * 1103515245u + 12345u;
        x[i] = (float)(lo + (hi - lo) * (double)(*seed >> 8) / 16777216.0);
    }
    return x;
}

static double *widen(const float *x, int64_t n) {
    double *d = (double *)malloc(sizeof(double) * (size_t)n);
    int64_t i;
    for (i = 0; i < n; ++i) d[i] = x[i];
    return d;
}

int main(void) {
    static const struct { int64_t B, T, H, K, V; } shapes[] = {{1, 1024, 4, 64, 64}, {1, 512, 2, 128, 128}};
    const char *names[2] = {"ref", "blis"};
    ssm_ctx *ctxs[2] = {NULL, NULL};
    bench_ceilings ceil[2];
    int nbe = 1, be;
    size_t si;
    ssm_ctx_config cfg = ssm_ctx_config_init();
    if (ssm_ctx_create(&cfg, &ctxs[0]) != SSM_OK) return 1;
    ceil[0] = bench_measure_ceilings(ctxs[0], 256);
#ifdef SSM_BENCH_BLAS
    cfg.backend = ssm_blas_backend();
    cfg.threads = getenv("SSM_BENCH_THREADS") ? atoi(getenv("SSM_BENCH_THREADS")) : 1; /* shared 2-core VM */
    if (ssm_ctx_create(&cfg, &ctxs[1]) != SSM_OK) return 1;
    ceil[1] = bench_measure_ceilings(ctxs[1], 1024);
    nbe = 2;
#else
    printf("BLIS not built in (make builds this benchmark with it once libblis-dev is installed)\n");
#endif
    printf("device: %s   copy %.1f GB/s   gemm f32: ref %.2f GFLOP/s", bench_device(), ceil[0].copy_gbs,
           ceil[0].gemm_gflops);
    if (nbe == 2) printf(", blis %.2f GFLOP/s", ceil[1].gemm_gflops);
    printf("\n%-4s %-22s %-8s %-10s %10s %8s %9s %10s %8s\n", "be", "shape", "variant", "method", "ms", "GFLOP/s",
           "relerr", "floor_ms", "x_floor");
    for (si = 0; si < sizeof shapes / sizeof shapes[0]; ++si) {
        int64_t B = shapes[si].B, T = shapes[si].T, H = shapes[si].H, K = shapes[si].K, V = shapes[si].V;
        int64_t sq[4] = {B, T, H, K}, sv[4] = {B, T, H, V}, sb[3] = {B, T, H};
        int64_t nq = B * T * H * K, nv = B * T * H * V, nb = B * T * H, i;
        unsigned seed = 1234u + (unsigned)si;
        float *q = fill(nq, -1, 1, &seed), *k = fill(nq, -1, 1, &seed), *v = fill(nv, -1, 1, &seed);
        float *beta = fill(nb, 0.05, 1, &seed), *g = fill(nb, -0.5, 0, &seed);
        float *o = (float *)malloc(sizeof(float) * (size_t)nv);
        float *dq = (float *)malloc(sizeof(float) * (size_t)nq), *dk = (float *)malloc(sizeof(float) * (size_t)nq);
        float *dv = (float *)malloc(sizeof(float) * (size_t)nv), *dbeta = (float *)malloc(sizeof(float) * (size_t)nb);
        float *dg = (float *)malloc(sizeof(float) * (size_t)nb);
        double *qd, *kd, *vd, *bd, *gd, *od[2];
        int variant;
        for (i = 0; i < nb; ++i) { /* unit keys (DeltaNet normalises them) */
            double nrm = 0;
            int64_t f;
            for (f = 0; f < K; ++f) nrm += (double)k[i * K + f] * k[i * K + f];
            for (f = 0; f < K; ++f) k[i * K + f] = (float)(k[i * K + f] / sqrt(nrm));
        }
        qd = widen(q, nq), kd = widen(k, nq), vd = widen(v, nv), bd = widen(beta, nb), gd = widen(g, nb);
        for (variant = 0; variant < 2; ++variant) { /* the f64 references: DeltaNet, Gated DeltaNet */
            ssm_delta_desc d = ssm_delta_desc_init();
            ssm_tensor tq = ssm_tensor_make(qd, SSM_F64, ssm_cpu(), 4, sq, NULL), tk = ssm_tensor_make(kd, SSM_F64, ssm_cpu(), 4, sq, NULL);
            ssm_tensor tv = ssm_tensor_make(vd, SSM_F64, ssm_cpu(), 4, sv, NULL), tb = ssm_tensor_make(bd, SSM_F64, ssm_cpu(), 3, sb, NULL);
            ssm_tensor tg = ssm_tensor_make(gd, SSM_F64, ssm_cpu(), 3, sb, NULL), to;
            od[variant] = (double *)malloc(sizeof(double) * (size_t)nv);
            to = ssm_tensor_make(od[variant], SSM_F64, ssm_cpu(), 4, sv, NULL);
            d.method = SSM_DELTA_RECURRENT;
            ssm_delta_forward(ctxs[0], &d, &tq, &tk, &tv, &tb, variant ? &tg : NULL, NULL, NULL, &to, NULL);
        }
        for (variant = 0; variant < 5; ++variant) {
            /* 0 delta recurrent, 1 delta chunked, 2 gated chunked, 3 delta fwd+bwd, 4 gated fwd+bwd */
            int gated = variant == 2 || variant == 4, backward = variant >= 3;
            ssm_delta_method method = variant == 0 ? SSM_DELTA_RECURRENT : SSM_DELTA_CHUNKED;
            const char *op = gated ? (backward ? "gated_delta_fwdbwd" : "gated_delta_fwd") : (backward ? "delta_fwdbwd" : "delta_fwd");
            for (be = 0; be < nbe; ++be) {
                run_arg r;
                ssm_delta_stats st, stb;
                double ms, num = 0, den = 0, err, bytes, cflops, floor_ms, flops;
                char shape[160], impl[64], extra[200];
                memset(&r, 0, sizeof r);
                r.ctx = ctxs[be], r.gated = gated, r.backward = backward;
                r.desc = ssm_delta_desc_init();
                r.desc.method = method;
                r.q = ssm_tensor_make(q, SSM_F32, ssm_cpu(), 4, sq, NULL), r.k = ssm_tensor_make(k, SSM_F32, ssm_cpu(), 4, sq, NULL);
                r.v = ssm_tensor_make(v, SSM_F32, ssm_cpu(), 4, sv, NULL), r.beta = ssm_tensor_make(beta, SSM_F32, ssm_cpu(), 3, sb, NULL);
                r.g = ssm_tensor_make(g, SSM_F32, ssm_cpu(), 3, sb, NULL), r.o = ssm_tensor_make(o, SSM_F32, ssm_cpu(), 4, sv, NULL);
                r.dq = ssm_tensor_make(dq, SSM_F32, ssm_cpu(), 4, sq, NULL), r.dk = ssm_tensor_make(dk, SSM_F32, ssm_cpu(), 4, sq, NULL);
                r.dv = ssm_tensor_make(dv, SSM_F32, ssm_cpu(), 4, sv, NULL);
                r.dbeta = ssm_tensor_make(dbeta, SSM_F32, ssm_cpu(), 3, sb, NULL), r.dg = ssm_tensor_make(dg, SSM_F32, ssm_cpu(), 3, sb, NULL);
                for (i = 0; i < nv; ++i) o[i] = NAN;
                ms = bench_time_ms(run, &r);
                /* the stats of one forward (and one backward) for the FLOP count */
                r.desc.stats = &st;
                ssm_delta_forward(r.ctx, &r.desc, &r.q, &r.k, &r.v, &r.beta, gated ? &r.g : NULL, NULL, NULL, &r.o, NULL);
                flops = st.flops;
                if (backward) {
                    r.desc.stats = &stb;
                    run(&r);
                    flops += stb.flops;
                }
                for (i = 0; i < nv; ++i) {
                    double x = od[gated][i];
                    num += ((double)o[i] - x) * ((double)o[i] - x), den += x * x;
                }
                err = sqrt(num / den);
                bytes = 4.0 * (double)(2 * nq + 2 * nv + 2 * nb) * (backward ? 2.0 : 1.0);
                /* the chunked form's FLOPs at C = 64 (ssm_delta_stats' count; backward: + its own) */
                cflops = 2.0 * (double)(B * T * H) * (64.0 * (3.0 * (double)K + 2.0 * (double)V) + 3.0 * (double)K * (double)V + 64.0 * 64.0 / 6.0);
                if (backward)
                    cflops += 2.0 * (double)(B * T * H) * (64.0 * (9.0 * (double)K + 6.0 * (double)V) + 9.0 * (double)K * (double)V + 64.0 * 64.0 * 13.0 / 6.0);
                floor_ms = bench_floor_ms(&ceil[be], bytes, cflops);
                snprintf(shape, sizeof shape, "{\"B\":%lld,\"T\":%lld,\"H\":%lld,\"K\":%lld,\"V\":%lld}", (long long)B,
                         (long long)T, (long long)H, (long long)K, (long long)V);
                printf("%-4s B%lld T%lld H%lld K%lld V%-4lld %-8s %-10s %10.3f %8.2f %9.2e %10.4f %8.1f\n", names[be],
                       (long long)B, (long long)T, (long long)H, (long long)K, (long long)V, gated ? "gated" : "delta",
                       ssm_delta_method_name(method), ms, flops / (ms * 1e6), err, floor_ms, ms / floor_ms);
                snprintf(impl, sizeof impl, "ours:%s", ssm_delta_method_name(method));
                snprintf(extra, sizeof extra, ",\"gflops\":%.4g,\"gemm_gflops\":%.4g,\"copy_gbs\":%.4g,\"x_floor\":%.4g",
                         flops / (ms * 1e6), ceil[be].gemm_gflops, ceil[be].copy_gbs, ms / floor_ms);
                bench_json(RESULTS, op, impl, names[be], "f32", shape, ms, floor_ms,
                           (double)(backward && stb.workspace_bytes > st.workspace_bytes ? stb.workspace_bytes : st.workspace_bytes),
                           err, extra);
            }
        }
        free(q), free(k), free(v), free(beta), free(g), free(o), free(dq), free(dk), free(dv), free(dbeta), free(dg);
        free(qd), free(kd), free(vd), free(bd), free(gd), free(od[0]), free(od[1]);
    }
    for (be = 0; be < nbe; ++be) ssm_ctx_destroy(ctxs[be]);
    return 0;
}
