/* The block-ELL topology across two GPUs over NCCL (ssm_cuda.h's SSM_NCCL hook): one process,
   a thread per rank, ncclCommInitAll. Both ranks start from the same layer and train it on
   different data (dvalues from ssm_bell_backward, scores by observe, an update every second
   step). With the hook every rank selects from the averaged scores: identical col_idx and
   checksums after every update, and ssm_cuda_nccl_check_checksum agrees; without it the
   topologies diverge and the check reports SSM_ERROR_INVALID_VALUE. Needs 2 GPUs (else it
   says so and runs nothing). Last line: "N passed, N failed".
   Build: make build/test_nccl (nvcc -DSSM_NCCL ..., libnccl from NCCL_HOME, see mk/cuda.mk). */
#ifndef SSM_NCCL
#define SSM_NCCL
#endif
#define SSM_IMPLEMENTATION
#define SSM_CUDA_IMPLEMENTATION
#include "../ssm_cuda.h"
#include <cstdio>
#include <cstring>
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

int main(void) {
    int n = 0, devs[2] = {0, 1};
    ncclComm_t comms[2];
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
    ncclCommDestroy(comms[0]), ncclCommDestroy(comms[1]);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
