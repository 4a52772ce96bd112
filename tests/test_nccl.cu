/* Two GPUs over NCCL (ssm_cuda.h's SSM_NCCL hooks): one process, a thread per rank,
   ncclCommInitAll. Needs 2 GPUs (else it says so and runs nothing). Last line: "N passed, N
   failed". Build: make build/test_nccl (nvcc -DSSM_NCCL ..., libnccl from NCCL_HOME, see
   mk/cuda.mk; the CUDA implementation comes from build/cuda_impl_nccl.o).
   1. The block-ELL topology: both ranks start from the same layer and train it on different
      data (dvalues from ssm_bell_backward, scores by observe, an update every second step).
      With the hook every rank selects from the averaged scores: identical col_idx and
      checksums after every update, and ssm_cuda_nccl_check_checksum agrees; without it the
      topologies diverge and the check reports SSM_ERROR_INVALID_VALUE.
   2. Context parallelism: a recurrence's time axis split across the GPUs
      (ssm_linrec_forward_cp / backward_cp with ssm_cuda_nccl_allgather) against the 1-GPU
      call on the whole sequence: h, hT, hin, dA, db, dh0.
   3. The same for the decay scan (ssm_decay_forward_cp / backward_cp): out, hT, hin, dx,
      dlog_decay, dh0, per-step and cumulative log decays (a rank's cumsum of its span). */
#ifndef SSM_NCCL
#define SSM_NCCL
#endif
#define SSM_IMPLEMENTATION
#include "../ssm_cuda.h"
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <thread>
#include <vector>

static int passed, failed;
#define EXPECT(cond, ...)                                                  \
    do {                                                                   \
        if (cond) ++passed;                                                \
        else {                                                             \
            ++failed;                                                      \
            printf("FAIL %s:%d: ", __FILE__, __LINE__), printf(__VA_ARGS__), printf("\n"); \
        }                                                                  \
    } while (0)

enum { R = 16, C = 24, K = 8, B = 16, N = 256, STEPS = 9 };

struct rank_run {
    int rank, hook;
    ncclComm_t comm;
    std::vector<int32_t> col;
    std::vector<uint64_t> sums; /* the report's checksum after each update */
    int64_t grown;
    ssm_result agree;
    char msg[512];
    int errors;
};

static uint64_t xs(uint64_t *s) {
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return *s;
}
static float unif(uint64_t *s) { return (float)((double)(xs(s) >> 11) * (1.0 / 9007199254740992.0) * 2.0 - 1.0); }

#define RK_OK(expr)                                                                                      \
    do {                                                                                                 \
        ssm_result r_ = (expr);                                                                          \
        if (r_ != SSM_OK) {                                                                              \
            printf("rank %d: %s -> %s (%s)\n", rr->rank, #expr, ssm_result_string(r_), ssm_ctx_last_error(ctx)); \
            ++rr->errors;                                                                                \
            goto done;                                                                                   \
        }                                                                                                \
    } while (0)

/* A context on cuda:rank on a stream of its own (*st; NULL context: it failed, *st still made). */
static ssm_ctx *rank_ctx(int rank, cudaStream_t *st) {
    ssm_ctx *ctx = NULL;
    ssm_ctx_config cfg = ssm_ctx_config_init();
    ssm_cuda_config cc = ssm_cuda_config_init();
    cudaSetDevice(rank);
    cudaStreamCreate(st);
    cc.device = rank, cc.stream = *st;
    cfg.backend = ssm_cuda_backend(), cfg.backend_config = &cc;
    return ssm_ctx_create(&cfg, &ctx) == SSM_OK ? ctx : NULL;
}

static void run_rank(rank_run *rr) {
    ssm_ctx *ctx = NULL, *cpu = NULL;
    ssm_bell_topology *topo = NULL;
    ssm_cuda_nccl h;
    cudaStream_t st = NULL;
    float *dv = NULL, *dm = NULL, *dx = NULL, *dy = NULL, *dg = NULL;
    int32_t *dci = NULL, *dto = NULL, *dts = NULL;
    uint64_t seed_layer = 88172645463325252ull, seed_data = 1234567ull + 7919ull * (uint64_t)rr->rank;
    std::vector<float> v((size_t)R * K * B * B), x((size_t)N * C * B), y((size_t)N * R * B);
    std::vector<int32_t> ci((size_t)R * K), toff(C + 1), tsl((size_t)R * K);
    int64_t sv[4] = {R, K, B, B}, sci[2] = {R, K}, sto = C + 1, sts = R * K, sx[2] = {N, C * B}, sy[2] = {N, R * B};
    ssm_ctx_config cfg = ssm_ctx_config_init();
    ssm_cuda_config cc = ssm_cuda_config_init();
    ssm_bell_topology_config tcfg = ssm_bell_topology_config_init();
    memset(&h, 0, sizeof h);
    rr->grown = 0, rr->agree = SSM_ERROR_BACKEND, rr->msg[0] = 0;
    cudaSetDevice(rr->rank);
    cudaStreamCreate(&st);
    cc.device = rr->rank, cc.stream = st;
    cfg.backend = ssm_cuda_backend(), cfg.backend_config = &cc;
    if (ssm_ctx_create(&cfg, &ctx) != SSM_OK || ssm_ctx_create(NULL, &cpu) != SSM_OK) {
        ++rr->errors;
        return;
    }
    RK_OK(ssm_cuda_nccl_init(&h, rr->comm, st));
    /* the same layer on every rank; the data differs per rank */
    for (auto &e : v) e = 0.2f * unif(&seed_layer);
    for (int r = 0; r < R; ++r)
        for (int k = 0; k < K; ++k) ci[(size_t)(r * K + k)] = (r + 3 * k) % C;
    {
        ssm_tensor hci = ssm_tensor_make(ci.data(), SSM_I32, ssm_cpu(), 2, sci, NULL);
        ssm_tensor hto = ssm_tensor_make(toff.data(), SSM_I32, ssm_cpu(), 1, &sto, NULL);
        ssm_tensor hts = ssm_tensor_make(tsl.data(), SSM_I32, ssm_cpu(), 1, &sts, NULL);
        RK_OK(ssm_bell_transpose_index(cpu, &hci, &hto, &hts));
    }
    cudaMalloc((void **)&dv, 4 * v.size()), cudaMalloc((void **)&dm, 4 * v.size()), cudaMalloc((void **)&dg, 4 * v.size());
    cudaMalloc((void **)&dx, 4 * x.size()), cudaMalloc((void **)&dy, 4 * y.size());
    cudaMalloc((void **)&dci, 4 * ci.size()), cudaMalloc((void **)&dto, 4 * toff.size()), cudaMalloc((void **)&dts, 4 * tsl.size());
    cudaMemcpy(dv, v.data(), 4 * v.size(), cudaMemcpyHostToDevice);
    cudaMemset(dm, 0, 4 * v.size());
    cudaMemcpy(dci, ci.data(), 4 * ci.size(), cudaMemcpyHostToDevice);
    cudaMemcpy(dto, toff.data(), 4 * toff.size(), cudaMemcpyHostToDevice);
    cudaMemcpy(dts, tsl.data(), 4 * tsl.size(), cudaMemcpyHostToDevice);
    {
        const ssm_device d = ssm_cuda_device(rr->rank);
        ssm_tensor tv = ssm_tensor_make(dv, SSM_F32, d, 4, sv, NULL), tm = ssm_tensor_make(dm, SSM_F32, d, 4, sv, NULL);
        ssm_tensor tg = ssm_tensor_make(dg, SSM_F32, d, 4, sv, NULL);
        ssm_tensor tx = ssm_tensor_make(dx, SSM_F32, d, 2, sx, NULL), ty = ssm_tensor_make(dy, SSM_F32, d, 2, sy, NULL);
        ssm_tensor tci = ssm_tensor_make(dci, SSM_I32, d, 2, sci, NULL), tto = ssm_tensor_make(dto, SSM_I32, d, 1, &sto, NULL);
        ssm_tensor tts = ssm_tensor_make(dts, SSM_I32, d, 1, &sts, NULL);
        ssm_tensor *opt[1] = {&tm};
        tcfg.period = 2, tcfg.prune_frac = 0.3, tcfg.epsilon = 0.1, tcfg.swap_ratio = 1.0, tcfg.seed = 99, tcfg.layer_id = 3;
        if (rr->hook) tcfg.allreduce = ssm_cuda_nccl_allreduce, tcfg.allreduce_user = &h;
        RK_OK(ssm_bell_topology_create(ctx, &tcfg, R, C, K, &topo));
        for (int64_t step = 1; step <= STEPS; ++step) {
            ssm_bell_topology_report rep;
            /* per-rank data with structure: some input blocks and output blocks carry more signal */
            for (size_t i = 0; i < x.size(); ++i) x[i] = unif(&seed_data) * (1.0f + (float)((i / B) % C % 5));
            for (size_t i = 0; i < y.size(); ++i) y[i] = unif(&seed_data) * (1.0f + (float)((i / B) % R % 3));
            cudaMemcpyAsync(dx, x.data(), 4 * x.size(), cudaMemcpyHostToDevice, st);
            cudaMemcpyAsync(dy, y.data(), 4 * y.size(), cudaMemcpyHostToDevice, st);
            RK_OK(ssm_bell_backward(ctx, &tx, &tv, &tci, &tto, &tts, &ty, NULL, &tg, NULL));
            RK_OK(ssm_bell_topology_observe(ctx, topo, &tx, &ty, &tg));
            RK_OK(ssm_bell_topology_step(ctx, topo, step, &tv, &tci, &tto, &tts, opt, 1, &rep));
            cudaStreamSynchronize(st);
            if (rep.updated) rr->sums.push_back(rep.checksum);
            rr->grown += rep.grown;
        }
        rr->agree = ssm_cuda_nccl_check_checksum(ctx, &h, rr->sums.empty() ? 0 : rr->sums.back());
        snprintf(rr->msg, sizeof rr->msg, "%s", ssm_ctx_last_error(ctx));
        rr->col.resize(ci.size());
        cudaMemcpy(rr->col.data(), dci, 4 * ci.size(), cudaMemcpyDeviceToHost);
    }
done:
    ssm_bell_topology_destroy(topo);
    ssm_cuda_nccl_free(&h);
    cudaFree(dv), cudaFree(dm), cudaFree(dg), cudaFree(dx), cudaFree(dy), cudaFree(dci), cudaFree(dto), cudaFree(dts);
    ssm_ctx_destroy(ctx), ssm_ctx_destroy(cpu);
    cudaStreamDestroy(st);
}

/* ---- context parallelism ----------------------------------------------------------------- */
static uint64_t g_cp_seed = 0x9E3779B97F4A7C15ull;
static void *cp_upload(ssm_dtype dt, const std::vector<double> &v) {
    void *p = NULL;
    const size_t n = v.size(), es = dt.bits / 8;
    std::vector<unsigned char> raw(n * es);
    for (size_t i = 0; i < n; ++i) {
        if (dt.bits == 32) ((float *)raw.data())[i] = (float)v[i];
        else if (dt.code == SSM_DTYPE_BFLOAT) ((__nv_bfloat16 *)raw.data())[i] = __float2bfloat16((float)v[i]);
        else ((__half *)raw.data())[i] = __float2half((float)v[i]);
    }
    cudaMalloc(&p, n * es + 1);
    cudaMemcpy(p, raw.data(), n * es, cudaMemcpyHostToDevice);
    return p;
}
static std::vector<double> cp_download(ssm_dtype dt, const void *p, size_t n) {
    const size_t es = dt.bits / 8;
    std::vector<unsigned char> raw(n * es);
    std::vector<double> v(n);
    cudaMemcpy(raw.data(), p, n * es, cudaMemcpyDeviceToHost);
    for (size_t i = 0; i < n; ++i) {
        if (dt.bits == 32) v[i] = ((float *)raw.data())[i];
        else if (dt.code == SSM_DTYPE_BFLOAT) v[i] = __bfloat162float(((__nv_bfloat16 *)raw.data())[i]);
        else v[i] = __half2float(((__half *)raw.data())[i]);
    }
    return v;
}
/* rows t0 .. t0+len-1 of [S][T][row] */
static std::vector<double> cp_rows(const std::vector<double> &v, int64_t S, int64_t T, int64_t t0, int64_t len, int64_t row) {
    std::vector<double> o((size_t)(S * len * row));
    for (int64_t s = 0; s < S; ++s)
        std::copy(v.begin() + (s * T + t0) * row, v.begin() + (s * T + t0 + len) * row, o.begin() + s * len * row);
    return o;
}
static double cp_relerr(const std::vector<double> &a, const std::vector<double> &b) {
    double num = 0, den = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        if (!std::isfinite(a[i])) return INFINITY;
        num += (a[i] - b[i]) * (a[i] - b[i]), den += b[i] * b[i];
    }
    return std::sqrt(num) / (den > 0 ? std::sqrt(den) : 1.0);
}

struct cp_case {
    ssm_dtype dt;
    ssm_linrec_method method;
    int64_t S, len[2], n, m;
    double tol;
};
struct cp_data { /* the whole sequence's inputs */
    std::vector<double> A, b, h0, dh, dhT;
};
struct cp_rank_run {
    int rank;
    ncclComm_t comm;
    const cp_case *c;
    const cp_data *in;
    std::vector<double> h, hT, hin, dA, db, dh0;
    int errors;
};

static void cp_rank_main(cp_rank_run *rr) {
    const cp_case &c = *rr->c;
    const int64_t S = c.S, n = c.n, m = c.m, T = c.len[0] + c.len[1], len = c.len[rr->rank], t0 = rr->rank ? c.len[0] : 0;
    const ssm_device dev = ssm_cuda_device(rr->rank);
    const size_t es = c.dt.bits / 8;
    ssm_cuda_nccl h;
    cudaStream_t st = NULL;
    void *A = NULL, *b = NULL, *dh = NULL, *h0 = NULL, *dhT = NULL, *hh = NULL, *hT = NULL, *hin = NULL, *dA = NULL, *db = NULL, *d0 = NULL;
    ssm_ctx *ctx = rank_ctx(rr->rank, &st);
    memset(&h, 0, sizeof h);
    if (!ctx) {
        ++rr->errors;
        cudaStreamDestroy(st);
        return;
    }
    RK_OK(ssm_cuda_nccl_init(&h, rr->comm, st));
    A = cp_upload(c.dt, cp_rows(rr->in->A, S, T, t0, len, n * n)), b = cp_upload(c.dt, cp_rows(rr->in->b, S, T, t0, len, n * m));
    dh = cp_upload(c.dt, cp_rows(rr->in->dh, S, T, t0, len, n * m));
    if (rr->rank == 0) h0 = cp_upload(c.dt, rr->in->h0);
    else dhT = cp_upload(c.dt, rr->in->dhT);
    cudaMalloc(&hh, S * len * n * m * es), cudaMalloc(&db, S * len * n * m * es), cudaMalloc(&dA, S * len * n * n * es);
    cudaMalloc(&hT, S * n * m * es), cudaMalloc(&hin, S * n * m * es), cudaMalloc(&d0, S * n * m * es);
    {
        int64_t sa[4] = {S, len, n, n}, sb[4] = {S, len, n, m}, s0[3] = {S, n, m};
        ssm_tensor tA = ssm_tensor_make(A, c.dt, dev, 4, sa, NULL), tb = ssm_tensor_make(b, c.dt, dev, 4, sb, NULL);
        ssm_tensor tdh = ssm_tensor_make(dh, c.dt, dev, 4, sb, NULL), th = ssm_tensor_make(hh, c.dt, dev, 4, sb, NULL);
        ssm_tensor tdb = ssm_tensor_make(db, c.dt, dev, 4, sb, NULL), tdA = ssm_tensor_make(dA, c.dt, dev, 4, sa, NULL);
        ssm_tensor th0 = ssm_tensor_make(h0, c.dt, dev, 3, s0, NULL), tdT = ssm_tensor_make(dhT, c.dt, dev, 3, s0, NULL);
        ssm_tensor thT = ssm_tensor_make(hT, c.dt, dev, 3, s0, NULL), thin = ssm_tensor_make(hin, c.dt, dev, 3, s0, NULL);
        ssm_tensor td0 = ssm_tensor_make(d0, c.dt, dev, 3, s0, NULL);
        ssm_linrec_desc d = ssm_linrec_desc_init();
        ssm_linrec_cp cp;
        d.method = c.method;
        cp.rank = rr->rank, cp.nranks = 2, cp.allgather = ssm_cuda_nccl_allgather, cp.user = &h;
        RK_OK(ssm_linrec_forward_cp(ctx, &d, &cp, &tA, &tb, rr->rank == 0 ? &th0 : NULL, &th, &thT, &thin));
        RK_OK(ssm_linrec_backward_cp(ctx, &d, &cp, &tA, &thin, &th, &tdh, rr->rank == 1 ? &tdT : NULL, &tdA, &tdb, &td0));
        cudaStreamSynchronize(st);
        rr->h = cp_download(c.dt, hh, S * len * n * m), rr->hT = cp_download(c.dt, hT, S * n * m);
        rr->hin = cp_download(c.dt, hin, S * n * m), rr->dA = cp_download(c.dt, dA, S * len * n * n);
        rr->db = cp_download(c.dt, db, S * len * n * m), rr->dh0 = cp_download(c.dt, d0, S * n * m);
    }
done:
    ssm_cuda_nccl_free(&h);
    cudaFree(A), cudaFree(b), cudaFree(dh), cudaFree(h0), cudaFree(dhT), cudaFree(hh), cudaFree(hT), cudaFree(hin);
    cudaFree(dA), cudaFree(db), cudaFree(d0);
    ssm_ctx_destroy(ctx);
    cudaStreamDestroy(st);
}

static void cp_test(ncclComm_t *comms, const cp_case &c) {
    const int64_t S = c.S, n = c.n, m = c.m, T = c.len[0] + c.len[1];
    cp_data in;
    std::vector<double> rh, rdA, rdb, rd0;
    auto fill = [](std::vector<double> &v, size_t k, double sc) {
        v.resize(k);
        for (auto &e : v) e = sc * unif(&g_cp_seed);
    };
    fill(in.A, (size_t)(S * T * n * n), 1.4 / std::sqrt((double)n)), fill(in.b, (size_t)(S * T * n * m), 1.0);
    fill(in.h0, (size_t)(S * n * m), 1.0), fill(in.dh, (size_t)(S * T * n * m), 1.0), fill(in.dhT, (size_t)(S * n * m), 1.0);
    { /* the 1-GPU call on the whole sequence, on cuda:0 */
        const size_t es = c.dt.bits / 8;
        const ssm_device dev = ssm_cuda_device(0);
        int64_t sa[4] = {S, T, n, n}, sb[4] = {S, T, n, m}, s0[3] = {S, n, m};
        void *A, *b, *h0, *dh, *dhT, *h, *dA, *db, *d0;
        cudaStream_t st = NULL;
        ssm_ctx *ctx = rank_ctx(0, &st);
        EXPECT(ctx != NULL, "context on cuda:0");
        A = cp_upload(c.dt, in.A), b = cp_upload(c.dt, in.b), h0 = cp_upload(c.dt, in.h0), dh = cp_upload(c.dt, in.dh);
        dhT = cp_upload(c.dt, in.dhT);
        cudaMalloc(&h, S * T * n * m * es), cudaMalloc(&dA, S * T * n * n * es), cudaMalloc(&db, S * T * n * m * es);
        cudaMalloc(&d0, S * n * m * es);
        ssm_tensor tA = ssm_tensor_make(A, c.dt, dev, 4, sa, NULL), tb = ssm_tensor_make(b, c.dt, dev, 4, sb, NULL);
        ssm_tensor th0 = ssm_tensor_make(h0, c.dt, dev, 3, s0, NULL), tdh = ssm_tensor_make(dh, c.dt, dev, 4, sb, NULL);
        ssm_tensor tdT = ssm_tensor_make(dhT, c.dt, dev, 3, s0, NULL), th = ssm_tensor_make(h, c.dt, dev, 4, sb, NULL);
        ssm_tensor tdA = ssm_tensor_make(dA, c.dt, dev, 4, sa, NULL), tdb = ssm_tensor_make(db, c.dt, dev, 4, sb, NULL);
        ssm_tensor td0 = ssm_tensor_make(d0, c.dt, dev, 3, s0, NULL);
        ssm_linrec_desc d = ssm_linrec_desc_init();
        d.method = c.method;
        EXPECT(ssm_linrec_forward(ctx, &d, &tA, &tb, &th0, &th, NULL) == SSM_OK, "1-GPU forward: %s", ssm_ctx_last_error(ctx));
        EXPECT(ssm_linrec_backward(ctx, &d, &tA, &th0, &th, &tdh, &tdT, &tdA, &tdb, &td0) == SSM_OK, "1-GPU backward: %s",
               ssm_ctx_last_error(ctx));
        rh = cp_download(c.dt, h, S * T * n * m), rdA = cp_download(c.dt, dA, S * T * n * n);
        rdb = cp_download(c.dt, db, S * T * n * m), rd0 = cp_download(c.dt, d0, S * n * m);
        cudaFree(A), cudaFree(b), cudaFree(h0), cudaFree(dh), cudaFree(dhT), cudaFree(h), cudaFree(dA), cudaFree(db), cudaFree(d0);
        ssm_ctx_destroy(ctx);
        cudaStreamDestroy(st);
    }
    cp_rank_run rr[2];
    for (int r = 0; r < 2; ++r) rr[r].rank = r, rr[r].comm = comms[r], rr[r].c = &c, rr[r].in = &in, rr[r].errors = 0;
    std::thread t0(cp_rank_main, &rr[0]), t1(cp_rank_main, &rr[1]);
    t0.join(), t1.join();
    EXPECT(rr[0].errors == 0 && rr[1].errors == 0, "a rank failed");
    if (rr[0].errors || rr[1].errors) return;
    double e[6] = {0, 0, 0, 0, 0, 0};
    for (int r = 0; r < 2; ++r) {
        const int64_t t0 = r ? c.len[0] : 0, len = c.len[r];
        e[0] = std::max(e[0], cp_relerr(rr[r].h, cp_rows(rh, S, T, t0, len, n * m)));
        e[1] = std::max(e[1], cp_relerr(rr[r].hT, cp_rows(rh, S, T, t0 + len - 1, 1, n * m)));
        e[2] = std::max(e[2], cp_relerr(rr[r].dA, cp_rows(rdA, S, T, t0, len, n * n)));
        e[3] = std::max(e[3], cp_relerr(rr[r].db, cp_rows(rdb, S, T, t0, len, n * m)));
    }
    e[4] = cp_relerr(rr[1].hin, cp_rows(rh, S, T, c.len[0] - 1, 1, n * m));
    e[5] = cp_relerr(rr[0].dh0, rd0);
    printf("cp %s %s S%lld T%lld+%lld n%lld m%lld: rel err against the 1-GPU call: h %.2e hT %.2e dA %.2e db %.2e hin %.2e dh0 %.2e\n",
           ssm_dtype_name(c.dt), ssm_linrec_method_name(c.method), (long long)S, (long long)c.len[0], (long long)c.len[1],
           (long long)n, (long long)m, e[0], e[1], e[2], e[3], e[4], e[5]);
    for (int k = 0; k < 6; ++k) EXPECT(e[k] <= c.tol, "context parallel: quantity %d rel err %.3e > %.1e", k, e[k], c.tol);
}

/* ---- the decay scan across the GPUs -------------------------------------------------------- */
struct dk_case {
    ssm_dtype dt;
    ssm_decay_input input;
    int64_t B, len[2], R, C;
    double tol;
};
struct dk_data { /* the whole sequence: per-step log decays, x, h0, dout, and rank 1's dhT */
    std::vector<double> a, x, h0, dout, dhT;
};
struct dk_rank_run {
    int rank;
    ncclComm_t comm;
    const dk_case *c;
    const dk_data *in;
    std::vector<double> out, hT, hin, dx, dld, dh0;
    int errors;
};

static void dk_rank_main(dk_rank_run *rr) {
    const dk_case &c = *rr->c;
    const int64_t B = c.B, Rw = c.R, C = c.C, T = c.len[0] + c.len[1], len = c.len[rr->rank], t0 = rr->rank ? c.len[0] : 0;
    const ssm_device dev = ssm_cuda_device(rr->rank);
    const size_t es = c.dt.bits / 8;
    ssm_cuda_nccl h;
    cudaStream_t st = NULL;
    void *ld = NULL, *x = NULL, *dout = NULL, *h0 = NULL, *dhT = NULL, *out = NULL, *hT = NULL, *hin = NULL, *dx = NULL,
         *dld = NULL, *d0 = NULL;
    std::vector<double> a = cp_rows(rr->in->a, B, T, t0, len, Rw);
    ssm_ctx *ctx = rank_ctx(rr->rank, &st);
    memset(&h, 0, sizeof h);
    if (!ctx) {
        ++rr->errors;
        cudaStreamDestroy(st);
        return;
    }
    if (c.input == SSM_DECAY_CUMULATIVE) /* this span's own cumsum */
        for (int64_t b = 0; b < B; ++b)
            for (int64_t t = 1; t < len; ++t)
                for (int64_t j = 0; j < Rw; ++j) a[(b * len + t) * Rw + j] += a[(b * len + t - 1) * Rw + j];
    RK_OK(ssm_cuda_nccl_init(&h, rr->comm, st));
    ld = cp_upload(c.dt, a), x = cp_upload(c.dt, cp_rows(rr->in->x, B, T, t0, len, Rw * C));
    dout = cp_upload(c.dt, cp_rows(rr->in->dout, B, T, t0, len, Rw * C));
    if (rr->rank == 0) h0 = cp_upload(c.dt, rr->in->h0);
    else dhT = cp_upload(c.dt, rr->in->dhT);
    cudaMalloc(&out, B * len * Rw * C * es), cudaMalloc(&dx, B * len * Rw * C * es), cudaMalloc(&dld, B * len * Rw * es);
    cudaMalloc(&hT, B * Rw * C * es), cudaMalloc(&hin, B * Rw * C * es), cudaMalloc(&d0, B * Rw * C * es);
    {
        int64_t sx[4] = {B, len, Rw, C}, sl[3] = {B, len, Rw}, s0[3] = {B, Rw, C};
        ssm_tensor tl = ssm_tensor_make(ld, c.dt, dev, 3, sl, NULL), tx = ssm_tensor_make(x, c.dt, dev, 4, sx, NULL);
        ssm_tensor tdo = ssm_tensor_make(dout, c.dt, dev, 4, sx, NULL), to = ssm_tensor_make(out, c.dt, dev, 4, sx, NULL);
        ssm_tensor tdx = ssm_tensor_make(dx, c.dt, dev, 4, sx, NULL), tdl = ssm_tensor_make(dld, c.dt, dev, 3, sl, NULL);
        ssm_tensor th0 = ssm_tensor_make(h0, c.dt, dev, 3, s0, NULL), tdT = ssm_tensor_make(dhT, c.dt, dev, 3, s0, NULL);
        ssm_tensor thT = ssm_tensor_make(hT, c.dt, dev, 3, s0, NULL), thin = ssm_tensor_make(hin, c.dt, dev, 3, s0, NULL);
        ssm_tensor td0 = ssm_tensor_make(d0, c.dt, dev, 3, s0, NULL);
        ssm_decay_desc d = ssm_decay_desc_init();
        ssm_linrec_cp cp;
        d.input = c.input;
        cp.rank = rr->rank, cp.nranks = 2, cp.allgather = ssm_cuda_nccl_allgather, cp.user = &h;
        RK_OK(ssm_decay_forward_cp(ctx, &d, &cp, &tl, &tx, rr->rank == 0 ? &th0 : NULL, &to, &thT, &thin));
        RK_OK(ssm_decay_backward_cp(ctx, &d, &cp, &tl, &thin, &to, &tdo, rr->rank == 1 ? &tdT : NULL, &tdx, &tdl, &td0));
        cudaStreamSynchronize(st);
        rr->out = cp_download(c.dt, out, B * len * Rw * C), rr->hT = cp_download(c.dt, hT, B * Rw * C);
        rr->hin = cp_download(c.dt, hin, B * Rw * C), rr->dx = cp_download(c.dt, dx, B * len * Rw * C);
        rr->dld = cp_download(c.dt, dld, B * len * Rw), rr->dh0 = cp_download(c.dt, d0, B * Rw * C);
    }
done:
    ssm_cuda_nccl_free(&h);
    cudaFree(ld), cudaFree(x), cudaFree(dout), cudaFree(h0), cudaFree(dhT), cudaFree(out), cudaFree(hT), cudaFree(hin);
    cudaFree(dx), cudaFree(dld), cudaFree(d0);
    ssm_ctx_destroy(ctx);
    cudaStreamDestroy(st);
}

static void dk_test(ncclComm_t *comms, const dk_case &c) {
    const int64_t B = c.B, Rw = c.R, C = c.C, T = c.len[0] + c.len[1], row = Rw * C;
    dk_data in;
    std::vector<double> rout, rdx, rda, rd0;
    auto fill = [](std::vector<double> &v, size_t k, double lo, double hi) {
        v.resize(k);
        for (auto &e : v) e = lo + (hi - lo) * 0.5 * (1.0 + unif(&g_cp_seed));
    };
    fill(in.a, (size_t)(B * T * Rw), -0.3, 0.05), fill(in.x, (size_t)(B * T * row), -1, 1), fill(in.h0, (size_t)(B * row), -1, 1);
    fill(in.dout, (size_t)(B * T * row), -1, 1), fill(in.dhT, (size_t)(B * row), -1, 1);
    { /* the log decays as the dtype stores them */
        void *stored = cp_upload(c.dt, in.a);
        in.a = cp_download(c.dt, stored, in.a.size());
        cudaFree(stored);
    }
    { /* the 1-GPU per-step call on the whole sequence, on cuda:0 */
        const size_t es = c.dt.bits / 8;
        const ssm_device dev = ssm_cuda_device(0);
        int64_t sx[4] = {B, T, Rw, C}, sl[3] = {B, T, Rw}, s0[3] = {B, Rw, C};
        void *ld, *x, *h0, *dout, *dhT, *out, *dx, *dld, *d0;
        cudaStream_t st = NULL;
        ssm_ctx *ctx = rank_ctx(0, &st);
        EXPECT(ctx != NULL, "context on cuda:0");
        ld = cp_upload(c.dt, in.a), x = cp_upload(c.dt, in.x), h0 = cp_upload(c.dt, in.h0), dout = cp_upload(c.dt, in.dout);
        dhT = cp_upload(c.dt, in.dhT);
        cudaMalloc(&out, B * T * row * es), cudaMalloc(&dx, B * T * row * es), cudaMalloc(&dld, B * T * Rw * es);
        cudaMalloc(&d0, B * row * es);
        ssm_tensor tl = ssm_tensor_make(ld, c.dt, dev, 3, sl, NULL), tx = ssm_tensor_make(x, c.dt, dev, 4, sx, NULL);
        ssm_tensor th0 = ssm_tensor_make(h0, c.dt, dev, 3, s0, NULL), tdo = ssm_tensor_make(dout, c.dt, dev, 4, sx, NULL);
        ssm_tensor tdT = ssm_tensor_make(dhT, c.dt, dev, 3, s0, NULL), to = ssm_tensor_make(out, c.dt, dev, 4, sx, NULL);
        ssm_tensor tdx = ssm_tensor_make(dx, c.dt, dev, 4, sx, NULL), tdl = ssm_tensor_make(dld, c.dt, dev, 3, sl, NULL);
        ssm_tensor td0 = ssm_tensor_make(d0, c.dt, dev, 3, s0, NULL);
        ssm_decay_desc d = ssm_decay_desc_init();
        d.input = SSM_DECAY_PER_STEP;
        EXPECT(ssm_decay_forward(ctx, &d, &tl, &tx, &th0, &to, NULL) == SSM_OK, "1-GPU forward: %s", ssm_ctx_last_error(ctx));
        EXPECT(ssm_decay_backward(ctx, &d, &tl, &th0, &to, &tdo, &tdT, &tdx, &tdl, &td0) == SSM_OK, "1-GPU backward: %s",
               ssm_ctx_last_error(ctx));
        rout = cp_download(c.dt, out, B * T * row), rdx = cp_download(c.dt, dx, B * T * row);
        rda = cp_download(c.dt, dld, B * T * Rw), rd0 = cp_download(c.dt, d0, B * row);
        cudaFree(ld), cudaFree(x), cudaFree(h0), cudaFree(dout), cudaFree(dhT), cudaFree(out), cudaFree(dx), cudaFree(dld);
        cudaFree(d0);
        ssm_ctx_destroy(ctx);
        cudaStreamDestroy(st);
    }
    dk_rank_run rr[2];
    for (int r = 0; r < 2; ++r) rr[r].rank = r, rr[r].comm = comms[r], rr[r].c = &c, rr[r].in = &in, rr[r].errors = 0;
    std::thread t0(dk_rank_main, &rr[0]), t1(dk_rank_main, &rr[1]);
    t0.join(), t1.join();
    EXPECT(rr[0].errors == 0 && rr[1].errors == 0, "a rank failed");
    if (rr[0].errors || rr[1].errors) return;
    double e[7] = {0, 0, 0, 0, 0, 0, 0};
    for (int r = 0; r < 2; ++r) {
        const int64_t t0 = r ? c.len[0] : 0, len = c.len[r];
        std::vector<double> da = cp_rows(rda, B, T, t0, len, Rw);
        if (c.input == SSM_DECAY_CUMULATIVE) /* the gradient of the span's own cumsum */
            for (int64_t b = 0; b < B; ++b)
                for (int64_t t = 0; t + 1 < len; ++t)
                    for (int64_t j = 0; j < Rw; ++j) da[(b * len + t) * Rw + j] -= da[(b * len + t + 1) * Rw + j];
        e[0] = std::max(e[0], cp_relerr(rr[r].out, cp_rows(rout, B, T, t0, len, row)));
        e[1] = std::max(e[1], cp_relerr(rr[r].hT, cp_rows(rout, B, T, t0 + len - 1, 1, row)));
        e[2] = std::max(e[2], cp_relerr(rr[r].dx, cp_rows(rdx, B, T, t0, len, row)));
        e[3] = std::max(e[3], cp_relerr(rr[r].dld, da));
    }
    e[4] = cp_relerr(rr[1].hin, cp_rows(rout, B, T, c.len[0] - 1, 1, row));
    e[5] = cp_relerr(rr[0].dh0, rd0);
    { /* rank 1's dh0: the gradient of the state entering its span, exp(a_t0) dx_t0 */
        std::vector<double> want((size_t)(B * row));
        for (int64_t b = 0; b < B; ++b)
            for (int64_t i = 0; i < row; ++i)
                want[b * row + i] = std::exp(in.a[(b * T + c.len[0]) * Rw + i / C]) * rdx[(b * T + c.len[0]) * row + i];
        e[6] = cp_relerr(rr[1].dh0, want);
    }
    printf("cp decay %s %s B%lld T%lld+%lld R%lld C%lld: rel err against the 1-GPU call: out %.2e hT %.2e dx %.2e dlog %.2e "
           "hin %.2e dh0 %.2e %.2e\n",
           ssm_dtype_name(c.dt), c.input == SSM_DECAY_CUMULATIVE ? "cumulative" : "per-step", (long long)B, (long long)c.len[0],
           (long long)c.len[1], (long long)Rw, (long long)C, e[0], e[1], e[2], e[3], e[4], e[5], e[6]);
    for (int k = 0; k < 7; ++k) EXPECT(e[k] <= c.tol, "decay context parallel: quantity %d rel err %.3e > %.1e", k, e[k], c.tol);
}

int main(void) {
    int n = 0, devs[2] = {0, 1};
    ncclComm_t comms[2];
    /* every kernel loaded before the first collective: a module loaded lazily while an NCCL kernel
       waits on the other rank can deadlock (NCCL's caveat on CUDA lazy loading) */
    setenv("CUDA_MODULE_LOADING", "EAGER", 0);
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < 2) {
        printf("needs 2 GPUs (found %d): not run\n0 passed, 0 failed\n", n);
        return 0;
    }
    if (ncclCommInitAll(comms, 2, devs) != ncclSuccess) {
        printf("ncclCommInitAll failed\n0 passed, 1 failed\n");
        return 1;
    }
    {
        int ver = 0;
        ncclGetVersion(&ver);
        printf("NCCL %d, 2 ranks on cuda:0 and cuda:1, R=%d C=%d K=%d B=%d, %d tokens per rank, %d steps (update every 2nd)\n",
               ver, R, C, K, B, N, STEPS);
    }
    for (int hook = 1; hook >= 0; --hook) {
        rank_run rr[2];
        for (int r = 0; r < 2; ++r) rr[r].rank = r, rr[r].hook = hook, rr[r].comm = comms[r], rr[r].errors = 0;
        std::thread t0(run_rank, &rr[0]), t1(run_rank, &rr[1]);
        t0.join(), t1.join();
        printf("%s hook:\n", hook ? "with the" : "without the");
        for (int r = 0; r < 2; ++r) {
            printf("  rank %d: grown %lld, checksums after each update:", r, (long long)rr[r].grown);
            for (uint64_t s : rr[r].sums) printf(" %016llx", (unsigned long long)s);
            printf("\n  rank %d: checksum check -> %s %s\n", r, ssm_result_string(rr[r].agree), rr[r].msg);
        }
        EXPECT(rr[0].errors == 0 && rr[1].errors == 0, "a rank failed");
        EXPECT(rr[0].grown > 0 && rr[1].grown > 0, "no tile was regrown (grown %lld, %lld)", (long long)rr[0].grown,
               (long long)rr[1].grown);
        if (hook) {
            EXPECT(rr[0].sums == rr[1].sums && !rr[0].sums.empty(), "the checksums differ across ranks after some update");
            EXPECT(rr[0].col == rr[1].col && !rr[0].col.empty(), "col_idx differs across ranks");
            EXPECT(rr[0].agree == SSM_OK && rr[1].agree == SSM_OK, "the checksum check disagrees with the hook");
        } else {
            EXPECT(rr[0].col != rr[1].col, "without the hook the ranks still agree: the test shows nothing");
            EXPECT(rr[0].agree == SSM_ERROR_INVALID_VALUE && rr[1].agree == SSM_ERROR_INVALID_VALUE,
                   "the checksum check did not report the divergence");
        }
    }
    { /* the tensor-core chunked path (split at its carries) and a generic method (solved twice) */
        const cp_case cases[] = {{SSM_F16, SSM_LINREC_AUTO, 2, {2049, 2051}, 64, 1, 5e-3},
                                 {SSM_BF16, SSM_LINREC_CHUNKED, 3, {1000, 1501}, 32, 1, 3e-2},
                                 {SSM_F32, SSM_LINREC_AUTO, 2, {3001, 999}, 64, 1, 1e-4},
                                 {SSM_F32, SSM_LINREC_CR, 2, {1, 700}, 128, 1, 1e-4},
                                 {SSM_F32, SSM_LINREC_CR, 3, {37, 58}, 5, 3, 1e-5}};
        for (const cp_case &c : cases) cp_test(comms, c);
    }
    { /* the decay scan: 16-byte rows (the vector map kernels) and odd rows (element access) */
        const dk_case cases[] = {{SSM_F32, SSM_DECAY_PER_STEP, 2, {3001, 999}, 4, 64, 2e-5},
                                 {SSM_F32, SSM_DECAY_CUMULATIVE, 1, {70, 131}, 3, 5, 2e-5}, /* short: a span's cumsum rounds to f32 */
                                 {SSM_F16, SSM_DECAY_PER_STEP, 2, {2049, 2051}, 2, 64, 5e-3},
                                 {SSM_BF16, SSM_DECAY_PER_STEP, 1, {1, 999}, 3, 24, 3e-2}};
        for (const dk_case &c : cases) dk_test(comms, c);
    }
    ncclCommDestroy(comms[0]), ncclCommDestroy(comms[1]);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
