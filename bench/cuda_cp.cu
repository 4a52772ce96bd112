/* Context-parallel scaling (make bench-cuda-cp, 2 GPUs): one long recurrence, its time axis split
   across cuda:0 and cuda:1 (ssm_linrec_forward_cp / backward_cp over NCCL, a thread per rank),
   against the 1-GPU call on the whole sequence, same inputs, same run; then the same for the decay
   scan (ssm_decay_forward_cp / backward_cp). Each 2-GPU repeat starts both ranks together (a host
   barrier) and counts the slower rank's CUDA-event time; medians of 10. Before timing, the 2-GPU
   output is checked against the 1-GPU output. The floor column is the bytes read and written once
   (linrec: A, b, h; backward: A, h, dh, dA, db; decay: log_decay, x, out; backward: log_decay,
   out, dout, dx, dlog_decay) over the device-to-device copy bandwidth of cuda:0 measured in this
   run, for the whole sequence on one GPU and for a half on each of two. JSON lines:
   bench/results/cuda_linrec_cp.jsonl (shape.ranks 1 or 2). */
#ifndef SSM_NCCL
#define SSM_NCCL
#endif
#define SSM_IMPLEMENTATION
#include "../ssm_cuda.h"
#include "cuda_common.h"
#include <condition_variable>
#include <mutex>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <thread>
#include <time.h>
#include <vector>

#ifndef SSM_BENCH_COMMIT
#define SSM_BENCH_COMMIT "unknown"
#endif
static char g_dev[256], g_date[32];
static double g_bw; /* bytes/ms */

struct barrier2 { /* two threads */
    std::mutex mu;
    std::condition_variable cv;
    int arrived = 0;
    unsigned gen = 0;
    void wait() {
        std::unique_lock<std::mutex> l(mu);
        unsigned g = gen;
        if (++arrived == 2) arrived = 0, ++gen, cv.notify_all();
        else cv.wait(l, [&] { return g != gen; });
    }
};

/* A rank's run. The decay scan's [B, T, R, C] goes in as S = B, n = R, m = C: A holds its log
   decays (n a step, where the recurrence has n n), b its x, h its out, dh its dout. */
struct rank_state {
    int rank, decay;
    ncclComm_t comm;
    ssm_dtype dt;
    int64_t S, T, n, m; /* T: this rank's span */
    const void *A0, *b0, *dh0; /* the whole sequence on cuda:0 (copied to this rank's device) */
    int64_t t0;
    ssm_linrec_method method;
    int64_t chunk;
    barrier2 *bar;
    double fwd_ms[10], bwd_ms[10];
    double ph[2][3][10]; /* [fwd, bwd][before the exchange, the exchange, after it][repeat] */
    double err; /* rank 0: filled by main from the downloaded h */
    void *h;    /* this rank's h (kept for the check) */
    int ok;
};

/* The NCCL hook with CUDA events around it: splits a call's time at its exchange (the phase
   before, the allgather with its wait for the other rank, the phase after). */
struct timed_hook {
    ssm_cuda_nccl *hk;
    cudaStream_t st;
    cudaEvent_t in, out;
};
static ssm_result timed_allgather(void *user, const void *send, void *recv, size_t bytes) {
    timed_hook *t = (timed_hook *)user;
    cudaEventRecord(t->in, t->st);
    ssm_result r = ssm_cuda_nccl_allgather(t->hk, send, recv, bytes);
    cudaEventRecord(t->out, t->st);
    return r;
}

static void rank_main(rank_state *r) {
    const int64_t S = r->S, T = r->T, n = r->n, m = r->m, per_a = r->decay ? n : n * n; /* A's elements a step */
    const size_t es = r->dt.bits / 8;
    const ssm_device dev = ssm_cuda_device(r->rank);
    ssm_ctx *ctx = NULL;
    ssm_ctx_config cfg = ssm_ctx_config_init();
    ssm_cuda_config cc = ssm_cuda_config_init();
    ssm_cuda_nccl hk;
    cudaStream_t st;
    cudaEvent_t a, b;
    void *A, *bb, *h, *dh, *dA, *db, *hin;
    r->ok = 0;
    cudaSetDevice(r->rank);
    cudaStreamCreate(&st);
    cudaEventCreate(&a), cudaEventCreate(&b);
    timed_hook th_ = {&hk, st, NULL, NULL};
    cudaEventCreate(&th_.in), cudaEventCreate(&th_.out);
    cc.device = r->rank, cc.stream = st;
    cfg.backend = ssm_cuda_backend(), cfg.backend_config = &cc;
    if (ssm_ctx_create(&cfg, &ctx) != SSM_OK || ssm_cuda_nccl_init(&hk, r->comm, st) != SSM_OK) return;
    cudaMalloc(&A, S * T * per_a * es), cudaMalloc(&bb, S * T * n * m * es), cudaMalloc(&h, S * T * n * m * es);
    cudaMalloc(&dh, S * T * n * m * es), cudaMalloc(&dA, S * T * per_a * es), cudaMalloc(&db, S * T * n * m * es);
    cudaMalloc(&hin, S * n * m * es);
    /* this rank's span of every sequence (S = 1 here: one copy each) */
    cudaMemcpyPeer(A, r->rank, (const char *)r->A0 + r->t0 * per_a * es, 0, S * T * per_a * es);
    cudaMemcpyPeer(bb, r->rank, (const char *)r->b0 + r->t0 * n * m * es, 0, S * T * n * m * es);
    cudaMemcpyPeer(dh, r->rank, (const char *)r->dh0 + r->t0 * n * m * es, 0, S * T * n * m * es);
    cudaDeviceSynchronize();
    /* no collective before both ranks' copies are done: a peer copy from cuda:0 waits for all of
       cuda:0's work, so it would wait for rank 0's allgather, which waits for this rank (the
       hangs at 55c2bca and bd2b3f2, at whichever row the other rank ran ahead) */
    r->bar->wait();
    {
        int64_t sa[4] = {S, T, n, n}, sb[4] = {S, T, n, m}, s0[3] = {S, n, m};
        const int na = r->decay ? 3 : 4; /* log_decay [B, T, R] */
        ssm_tensor tA = ssm_tensor_make(A, r->dt, dev, na, sa, NULL), tb = ssm_tensor_make(bb, r->dt, dev, 4, sb, NULL);
        ssm_tensor th = ssm_tensor_make(h, r->dt, dev, 4, sb, NULL), tdh = ssm_tensor_make(dh, r->dt, dev, 4, sb, NULL);
        ssm_tensor tdA = ssm_tensor_make(dA, r->dt, dev, na, sa, NULL), tdb = ssm_tensor_make(db, r->dt, dev, 4, sb, NULL);
        ssm_tensor thin = ssm_tensor_make(hin, r->dt, dev, 3, s0, NULL);
        ssm_linrec_desc d = ssm_linrec_desc_init();
        ssm_decay_desc dd = ssm_decay_desc_init();
        ssm_linrec_cp cp;
        d.method = r->method, d.chunk = r->chunk;
        dd.input = SSM_DECAY_PER_STEP;
        cp.rank = r->rank, cp.nranks = 2, cp.allgather = timed_allgather, cp.user = &th_;
        auto fwd = [&] {
            return r->decay ? ssm_decay_forward_cp(ctx, &dd, &cp, &tA, &tb, NULL, &th, NULL, &thin)
                            : ssm_linrec_forward_cp(ctx, &d, &cp, &tA, &tb, NULL, &th, NULL, &thin);
        };
        auto bwd = [&] {
            return r->decay ? ssm_decay_backward_cp(ctx, &dd, &cp, &tA, &thin, &th, &tdh, NULL, &tdb, &tdA, NULL)
                            : ssm_linrec_backward_cp(ctx, &d, &cp, &tA, &thin, &th, &tdh, NULL, &tdA, &tdb, NULL);
        };
        for (int w = 0; w < 2; ++w)
            if (fwd() != SSM_OK || bwd() != SSM_OK) {
                printf("rank %d: %s\n", r->rank, ssm_ctx_last_error(ctx));
                goto done; /* the other rank then hangs in NCCL: the run's time limit ends it */
            }
        cudaStreamSynchronize(st);
        for (int k = 0; k < 2; ++k)
            for (int i = 0; i < 10; ++i) {
                float ms;
                r->bar->wait();
                cudaEventRecord(a, st);
                k ? bwd() : fwd();
                cudaEventRecord(b, st);
                cudaEventSynchronize(b);
                cudaEventElapsedTime(&ms, a, b);
                (k ? r->bwd_ms : r->fwd_ms)[i] = ms;
                cudaEventElapsedTime(&ms, a, th_.in), r->ph[k][0][i] = ms;
                cudaEventElapsedTime(&ms, th_.in, th_.out), r->ph[k][1][i] = ms;
                cudaEventElapsedTime(&ms, th_.out, b), r->ph[k][2][i] = ms;
            }
        fwd(); /* h for the check */
        cudaStreamSynchronize(st);
        r->ok = 1;
    }
done:
    r->h = h;
    cudaFree(A), cudaFree(bb), cudaFree(dh), cudaFree(dA), cudaFree(db), cudaFree(hin);
    cudaEventDestroy(a), cudaEventDestroy(b), cudaEventDestroy(th_.in), cudaEventDestroy(th_.out);
    ssm_cuda_nccl_free(&hk);
    ssm_ctx_destroy(ctx);
}

static FILE *g_js;
/* shape: "S1 T65536 n64" for the text, json: its "shape" members before "ranks" */
static void row(const char *op, const char *impl, ssm_dtype dt, const char *shape, const char *json, int ranks, double ms,
                double floor_ms, double speedup) {
    printf("  %-10s %-9s %-4s %-18s %d GPU%s %8.3f ms  floor %7.3f  x%5.2f", op, impl, ssm_dtype_name(dt), shape, ranks,
           ranks > 1 ? "s" : " ", ms, floor_ms, ms / floor_ms);
    if (ranks > 1) printf("  speedup %.2fx", speedup);
    printf("\n");
    fprintf(g_js, "{\"op\":\"%s\",\"impl\":\"ours:%s\",\"backend\":\"cuda\",\"dtype\":\"%s\",\"shape\":{%s,\"ranks\":%d},"
                  "\"ms\":%.5f,\"floor_ms\":%.5f,\"speedup\":%.4f,\"relerr\":null,\"device\":\"%s\",\"date\":\"%s\",\"commit\":\"%s\"}\n",
            op, impl, ssm_dtype_name(dt), json, ranks, ms, floor_ms, speedup, g_dev, g_date, SSM_BENCH_COMMIT);
    fflush(stdout);
}

static double median(double *v, int k) {
    std::vector<double> x(v, v + k);
    std::sort(x.begin(), x.end());
    return x[k / 2];
}

/* The whole sequence on cuda:0 (inputs random, outputs) with a context and its tensors: the
   1-GPU side of a row, and BENCH_CP_ONE's calls. The recurrence is S1 [T, n, n] / [T, n, 1]; the
   decay scan (decay = 1) B1 [T, n] log decays (per step, in [-0.01, 0.01]) and [T, n, m] states,
   in the same fields (A: log_decay, b: x, h: out, dh: dout, dA: dlog_decay, db: dx). */
struct whole_seq {
    void *A, *b, *dh, *h, *dA, *db;
    ssm_ctx *ctx;
    ssm_tensor tA, tb, th, tdh, tdA, tdb;
};
static void whole_free(whole_seq *w) {
    cudaSetDevice(0);
    cudaFree(w->A), cudaFree(w->b), cudaFree(w->dh), cudaFree(w->h), cudaFree(w->dA), cudaFree(w->db);
    ssm_ctx_destroy(w->ctx);
}
static int whole_make(whole_seq *w, ssm_dtype dt, int64_t T, int64_t n, int64_t m, int decay) { /* 0: out of memory (nothing held) */
    const int64_t sa[4] = {1, T, n, n}, sb[4] = {1, T, n, m}, per_a = decay ? n : n * n;
    const ssm_device dev = ssm_cuda_device(0);
    ssm_ctx_config cfg = ssm_ctx_config_init();
    ssm_cuda_config cc = ssm_cuda_config_init();
    cudaSetDevice(0);
    w->A = dev_random(dt, T * per_a, decay ? 0.01f : 0.9f / sqrtf((float)n), 1), w->b = dev_random(dt, T * n * m, 1.f, 2);
    w->dh = dev_random(dt, T * n * m, 1.f, 4), w->h = dev_random(dt, T * n * m, 0.f, 3);
    w->dA = dev_random(dt, T * per_a, 0.f, 5), w->db = dev_random(dt, T * n * m, 0.f, 6);
    w->ctx = NULL;
    cfg.backend = ssm_cuda_backend(), cfg.backend_config = &cc;
    if (!w->A || !w->b || !w->dh || !w->h || !w->dA || !w->db || ssm_ctx_create(&cfg, &w->ctx) != SSM_OK) {
        whole_free(w);
        return 0;
    }
    w->tA = ssm_tensor_make(w->A, dt, dev, decay ? 3 : 4, sa, NULL), w->tb = ssm_tensor_make(w->b, dt, dev, 4, sb, NULL);
    w->th = ssm_tensor_make(w->h, dt, dev, 4, sb, NULL), w->tdh = ssm_tensor_make(w->dh, dt, dev, 4, sb, NULL);
    w->tdA = ssm_tensor_make(w->dA, dt, dev, decay ? 3 : 4, sa, NULL), w->tdb = ssm_tensor_make(w->db, dt, dev, 4, sb, NULL);
    return 1;
}

/* The 2-GPU side of a row: both ranks on the halves of w's sequence (rank 0 the first T / 2
   steps), their output against the 1-GPU one (w.h), then the four rows and where the time goes.
   proto: the ranks' op, dtype, sizes and method; bf, bb: the whole sequence's floor bytes. */
static void two_gpu_rows(ncclComm_t *comms, const rank_state &proto, whole_seq &w, int64_t T, const char *op, const char *op_bwd,
                         const char *impl, const char *shape, const char *json, double fwd1, double bwd1, double bf, double bb) {
    const ssm_dtype dt = proto.dt;
    const int64_t row_el = proto.n * proto.m; /* output elements a step */
    const size_t es = dt.bits / 8;
    barrier2 bar;
    rank_state rs[2];
    for (int r = 0; r < 2; ++r) {
        rs[r].rank = r, rs[r].decay = proto.decay, rs[r].comm = comms[r], rs[r].dt = dt, rs[r].S = 1;
        rs[r].T = r ? T - T / 2 : T / 2, rs[r].n = proto.n, rs[r].m = proto.m;
        rs[r].A0 = w.A, rs[r].b0 = w.b, rs[r].dh0 = w.dh, rs[r].t0 = r ? T / 2 : 0, rs[r].bar = &bar, rs[r].h = NULL;
        rs[r].method = proto.method, rs[r].chunk = proto.chunk;
    }
    std::thread t0(rank_main, &rs[0]), t1(rank_main, &rs[1]);
    t0.join(), t1.join();
    if (rs[0].ok && rs[1].ok) { /* the 2-GPU output against the 1-GPU output (cuda:0) */
        std::vector<unsigned char> one((size_t)(T * row_el * es)), two(one.size());
        cudaSetDevice(0);
        cudaMemcpy(one.data(), w.h, one.size(), cudaMemcpyDeviceToHost);
        for (int r = 0; r < 2; ++r) {
            cudaSetDevice(r);
            cudaMemcpy(two.data() + rs[r].t0 * row_el * es, rs[r].h, rs[r].T * row_el * es, cudaMemcpyDeviceToHost);
        }
        double num = 0, den = 0;
        for (size_t i = 0; i < one.size() / es; ++i) {
            double u, v;
            if (es == 4) u = ((float *)two.data())[i], v = ((float *)one.data())[i];
            else if (dt.code == SSM_DTYPE_BFLOAT) u = __bfloat162float(((__nv_bfloat16 *)two.data())[i]), v = __bfloat162float(((__nv_bfloat16 *)one.data())[i]);
            else u = __half2float(((__half *)two.data())[i]), v = __half2float(((__half *)one.data())[i]);
            num += (u - v) * (u - v), den += v * v;
        }
        printf("  %s %s %s: 2-GPU output against the 1-GPU output: rel err %.2e\n", op, ssm_dtype_name(dt), shape,
               sqrt(num / (den > 0 ? den : 1)));
        double f2[10], b2[10];
        for (int i = 0; i < 10; ++i) f2[i] = std::max(rs[0].fwd_ms[i], rs[1].fwd_ms[i]), b2[i] = std::max(rs[0].bwd_ms[i], rs[1].bwd_ms[i]);
        const double fwd2 = median(f2, 10), bwd2 = median(b2, 10);
        row(op, impl, dt, shape, json, 1, fwd1, bf / g_bw, 1.0);
        row(op, impl, dt, shape, json, 2, fwd2, bf / 2 / g_bw, fwd1 / fwd2);
        row(op_bwd, impl, dt, shape, json, 1, bwd1, bb / g_bw, 1.0);
        row(op_bwd, impl, dt, shape, json, 2, bwd2, bb / 2 / g_bw, bwd1 / bwd2);
        for (int k = 0; k < 2; ++k) /* where the 2-GPU time goes (each rank's medians) */
            printf("    %s phases, ms (before the exchange / the allgather incl. its wait / after): rank 0 %.3f / %.3f / %.3f, rank 1 %.3f / %.3f / %.3f\n",
                   k ? "bwd" : "fwd", median(rs[0].ph[k][0], 10), median(rs[0].ph[k][1], 10), median(rs[0].ph[k][2], 10),
                   median(rs[1].ph[k][0], 10), median(rs[1].ph[k][1], 10), median(rs[1].ph[k][2], 10));
    } else
        printf("  %s %s %s: a rank failed\n", op, ssm_dtype_name(dt), shape);
    for (int r = 0; r < 2; ++r) cudaSetDevice(r), cudaFree(rs[r].h);
}

/* method, chunk: the desc's (0 = by shape); the rows' impl is ours:<method>[-c<chunk>] */
static void cp_rows(ncclComm_t *comms, ssm_dtype dt, int64_t T, int64_t n, ssm_linrec_method method = SSM_LINREC_AUTO,
                    int64_t chunk = 0) {
    char impl[32], shape[64], json[96];
    snprintf(impl, sizeof impl, "%s", ssm_linrec_method_name(method));
    if (chunk) snprintf(impl + strlen(impl), sizeof impl - strlen(impl), "-c%lld", (long long)chunk);
    snprintf(shape, sizeof shape, "S1 T%lld n%lld", (long long)T, (long long)n);
    snprintf(json, sizeof json, "\"S\":1,\"T\":%lld,\"n\":%lld,\"m\":1", (long long)T, (long long)n);
    const size_t es = dt.bits / 8;
    whole_seq w;
    double fwd1, bwd1;
    const double bf = (double)es * (T * n * n + 2.0 * T * n), bb = (double)es * (2.0 * T * n * n + 3.0 * T * n);
    if (!whole_make(&w, dt, T, n, 1, 0)) {
        printf("  (skipped %s %s: out of memory)\n", ssm_dtype_name(dt), shape);
        return;
    }
    {
        ssm_linrec_desc d = ssm_linrec_desc_init();
        d.method = method, d.chunk = chunk;
        fwd1 = time_ms([&] { ssm_linrec_forward(w.ctx, &d, &w.tA, &w.tb, NULL, &w.th, NULL); });
        bwd1 = time_ms([&] { ssm_linrec_backward(w.ctx, &d, &w.tA, NULL, &w.th, &w.tdh, NULL, &w.tdA, &w.tdb, NULL); });
        ssm_linrec_forward(w.ctx, &d, &w.tA, &w.tb, NULL, &w.th, NULL);
        cudaDeviceSynchronize();
    }
    rank_state proto;
    proto.decay = 0, proto.dt = dt, proto.n = n, proto.m = 1, proto.method = method, proto.chunk = chunk;
    two_gpu_rows(comms, proto, w, T, "linrec", "linrec_bwd", impl, shape, json, fwd1, bwd1, bf, bb);
    whole_free(&w);
}

/* The decay scan, B1 [T, D, D] (per-step log decays). */
static void decay_rows(ncclComm_t *comms, ssm_dtype dt, int64_t T, int64_t D) {
    char shape[64], json[96];
    snprintf(shape, sizeof shape, "B1 T%lld D%lld", (long long)T, (long long)D);
    snprintf(json, sizeof json, "\"B\":1,\"T\":%lld,\"D\":%lld", (long long)T, (long long)D);
    const size_t es = dt.bits / 8;
    whole_seq w;
    double fwd1, bwd1;
    const double bf = (double)es * (T * D + 2.0 * T * D * D), bb = (double)es * (2.0 * T * D + 3.0 * T * D * D);
    if (!whole_make(&w, dt, T, D, D, 1)) {
        printf("  (skipped decay %s %s: out of memory)\n", ssm_dtype_name(dt), shape);
        return;
    }
    {
        ssm_decay_desc d = ssm_decay_desc_init();
        d.input = SSM_DECAY_PER_STEP;
        fwd1 = time_ms([&] { ssm_decay_forward(w.ctx, &d, &w.tA, &w.tb, NULL, &w.th, NULL); });
        bwd1 = time_ms([&] { ssm_decay_backward(w.ctx, &d, &w.tA, NULL, &w.th, &w.tdh, NULL, &w.tdb, &w.tdA, NULL); });
        if (ssm_decay_forward(w.ctx, &d, &w.tA, &w.tb, NULL, &w.th, NULL) != SSM_OK) printf("  decay: %s\n", ssm_ctx_last_error(w.ctx));
        cudaDeviceSynchronize();
    }
    rank_state proto;
    proto.decay = 1, proto.dt = dt, proto.n = D, proto.m = D, proto.method = SSM_LINREC_AUTO, proto.chunk = 0;
    two_gpu_rows(comms, proto, w, T, "decay", "decay_bwd", "scan", shape, json, fwd1, bwd1, bf, bb);
    whole_free(&w);
}

/* BENCH_CP_DECAY_ONE=T, one GPU, f16 and f32: the whole B1 [T, 64, 64] decay scan, and rank 0's
   call on its first T / 2 steps with 2 ranks, the allgather a copy of its own map into both slots
   (so its time is the 2-GPU critical path without NCCL: the map, then the scan from the carry),
   medians of 10; for a profiler too. */
static ssm_result self_allgather(void *user, const void *send, void *recv, size_t bytes) {
    (void)user;
    cudaMemcpyAsync(recv, send, bytes, cudaMemcpyDeviceToDevice, 0);
    cudaMemcpyAsync((char *)recv + bytes, send, bytes, cudaMemcpyDeviceToDevice, 0);
    return SSM_OK;
}
static int decay_one(int64_t T) {
    const ssm_dtype dts[2] = {SSM_F16, SSM_F32};
    const int64_t D = 64, half = T / 2, sh[4] = {1, half, D, D}, s0[3] = {1, D, D};
    cudaSetDevice(0);
    g_bw = copy_bandwidth();
    printf("decay scan, one GPU, B1 T%lld D%lld: the whole sequence, and rank 0 of 2 on T%lld (its map, a local copy for the "
           "allgather, the scan from the carry); copy bandwidth %.0f GB/s\n", (long long)T, (long long)D, (long long)half, g_bw * 1e-6);
    for (const ssm_dtype dt : dts) {
        whole_seq w;
        void *hin = NULL;
        if (!whole_make(&w, dt, T, D, D, 1)) return 0;
        cudaMalloc(&hin, D * D * (dt.bits / 8));
        const ssm_device dev = ssm_cuda_device(0);
        ssm_tensor hl = ssm_tensor_make(w.A, dt, dev, 3, sh, NULL), hx = ssm_tensor_make(w.b, dt, dev, 4, sh, NULL);
        ssm_tensor ho = ssm_tensor_make(w.h, dt, dev, 4, sh, NULL), hd = ssm_tensor_make(w.dh, dt, dev, 4, sh, NULL);
        ssm_tensor hdx = ssm_tensor_make(w.db, dt, dev, 4, sh, NULL), hdl = ssm_tensor_make(w.dA, dt, dev, 3, sh, NULL);
        ssm_tensor thin = ssm_tensor_make(hin, dt, dev, 3, s0, NULL);
        ssm_decay_desc d = ssm_decay_desc_init();
        ssm_linrec_cp cp;
        const double es = dt.bits / 8, bf = es * (T * D + 2.0 * T * D * D), bb = es * (2.0 * T * D + 3.0 * T * D * D);
        d.input = SSM_DECAY_PER_STEP;
        cp.rank = 0, cp.nranks = 2, cp.allgather = self_allgather, cp.user = NULL;
        const double f1 = time_ms([&] { ssm_decay_forward(w.ctx, &d, &w.tA, &w.tb, NULL, &w.th, NULL); });
        const double b1 = time_ms([&] { ssm_decay_backward(w.ctx, &d, &w.tA, NULL, &w.th, &w.tdh, NULL, &w.tdb, &w.tdA, NULL); });
        const double fh = time_ms([&] { ssm_decay_forward(w.ctx, &d, &hl, &hx, NULL, &ho, NULL); });
        const double f0 = time_ms([&] { ssm_decay_forward_cp(w.ctx, &d, &cp, &hl, &hx, NULL, &ho, NULL, &thin); });
        cp.rank = 1; /* the adjoint's first rank is the last */
        const double b0 = time_ms([&] { ssm_decay_backward_cp(w.ctx, &d, &cp, &hl, &thin, &ho, &hd, NULL, &hdx, &hdl, NULL); });
        const ssm_result r = ssm_decay_forward_cp(w.ctx, &d, &cp, &hl, &hx, NULL, &ho, NULL, &thin);
        cudaDeviceSynchronize();
        printf("  %s: whole fwd %.3f ms (floor %.3f), half fwd %.3f; rank 0 _cp fwd %.3f (%.2fx of the whole: the 2-GPU bound "
               "without NCCL); whole bwd %.3f (floor %.3f), first rank _cp bwd %.3f (%.2fx)%s\n",
               ssm_dtype_name(dt), f1, bf / g_bw, fh, f0, f1 / f0, b1, bb / g_bw, b0, b1 / b0,
               r == SSM_OK ? "" : ssm_ctx_last_error(w.ctx));
        cudaFree(hin);
        whole_free(&w);
    }
    return 1;
}

int main(void) {
    int ndev = 0, devs[2] = {0, 1};
    ncclComm_t comms[2];
    cudaDeviceProp prop;
    time_t now = time(NULL);
    /* every kernel loaded before the first collective: a module loaded lazily while an NCCL kernel
       waits on the other rank can deadlock (NCCL's caveat on CUDA lazy loading) */
    setenv("CUDA_MODULE_LOADING", "EAGER", 0);
    setvbuf(stdout, NULL, _IOLBF, 0); /* a rank's error line survives the time limit that ends a hung run */
    if (const char *one = getenv("BENCH_CP_ONE")) { /* for a profiler: the 1-GPU calls alone, S1 T<one> n64 f16, no NCCL */
        const int64_t T = atoll(one);
        ssm_linrec_desc d = ssm_linrec_desc_init();
        whole_seq w;
        int ok = 1;
        if (!whole_make(&w, SSM_F16, T, 64, 1, 0)) return 1;
        for (int i = 0; ok && i < 3; ++i)
            if (ssm_linrec_forward(w.ctx, &d, &w.tA, &w.tb, NULL, &w.th, NULL) != SSM_OK ||
                ssm_linrec_backward(w.ctx, &d, &w.tA, NULL, &w.th, &w.tdh, NULL, &w.tdA, &w.tdb, NULL) != SSM_OK) {
                printf("%s\n", ssm_ctx_last_error(w.ctx));
                ok = 0;
            }
        if (ok) {
            cudaDeviceSynchronize();
            printf("S1 T%lld n64 f16: forward and backward, 3 calls each\n", (long long)T);
        }
        whole_free(&w);
        return ok ? 0 : 1;
    }
    if (const char *one = getenv("BENCH_CP_DECAY_ONE")) { /* one GPU: the decay scan's rank 0 on half of B1 T<one> D64 */
        const int64_t T = atoll(one);
        return decay_one(T) ? 0 : 1;
    }
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 2) {
        printf("needs 2 GPUs (found %d)\n", ndev);
        return 1;
    }
    cudaGetDeviceProperties(&prop, 0);
    snprintf(g_dev, sizeof g_dev, "%s", prop.name);
    strftime(g_date, sizeof g_date, "%Y-%m-%d", gmtime(&now));
    if (ncclCommInitAll(comms, 2, devs) != ncclSuccess) {
        printf("ncclCommInitAll failed\n");
        return 1;
    }
    cudaSetDevice(0);
    g_bw = copy_bandwidth();
    printf("device %s x2, copy bandwidth %.0f GB/s (cuda:0, 1 GiB D2D, read+write)\n", g_dev, g_bw * 1e-6);
    if (!(g_js = fopen("bench/results/cuda_linrec_cp.jsonl", "a")) && !(g_js = fopen("cuda_linrec_cp.jsonl", "a"))) return 1;
    printf("== context parallel: the recurrence S1, the time axis halved across 2 GPUs (auto: the tensor-core chunked path)\n");
    if (getenv("BENCH_CP_VARIANTS")) { /* the methods and chunk lengths at the target row */
        cp_rows(comms, SSM_F16, 65536, 64, SSM_LINREC_CHUNKED, 128);
        cp_rows(comms, SSM_F16, 65536, 64, SSM_LINREC_CHUNKED, 32);
        cp_rows(comms, SSM_F16, 65536, 64, SSM_LINREC_CHUNKED, 16);
        cp_rows(comms, SSM_F32, 65536, 64, SSM_LINREC_CHUNKED, 64);
        cp_rows(comms, SSM_F32, 65536, 64, SSM_LINREC_CHUNKED, 32);
        cp_rows(comms, SSM_F16, 8192, 64, SSM_LINREC_CHUNKED, 32);
        cp_rows(comms, SSM_F16, 8192, 64);
        cp_rows(comms, SSM_F16, 65536, 64, SSM_LINREC_CR);
    }
    cp_rows(comms, SSM_F16, 65536, 64);
    cp_rows(comms, SSM_BF16, 65536, 64);
    cp_rows(comms, SSM_F32, 65536, 64);
    cp_rows(comms, SSM_F16, 262144, 64);
    cp_rows(comms, SSM_F16, 65536, 128);
    printf("== the decay scan: B1 [T, D, D], the time axis halved across 2 GPUs\n");
    decay_rows(comms, SSM_F16, 65536, 64);
    decay_rows(comms, SSM_F32, 65536, 64);
    decay_rows(comms, SSM_BF16, 262144, 64);
    fclose(g_js);
    ncclCommDestroy(comms[0]), ncclCommDestroy(comms[1]);
    return 0;
}
