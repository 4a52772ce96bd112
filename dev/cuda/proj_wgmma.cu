/* Dev harness: variants of the projection chains' proj_kernel 3 (ssm_cuda.h's ssm__pjw_kernel,
   the sm_90a TMA + wgmma ping-pong GEMM with the epilogue in registers) on the Gated DeltaNet
   layer of issue #11 (bf16, d 2048, N 8224: q, k SiLU + L2 per 128, v SiLU, g none, beta
   sigmoid, a decay gate with A_log and dt_bias), beside the library's own default and forced
   contexts and the cuBLAS GEMM alone (variants picked by argv, llm.c style):
     ./build/dev_proj_wgmma                 the table: M 8192 and 32768, every variant checked
                                            against the library's default output, then timed
                                            in alternating rounds (median of the per-round medians)
     ./build/dev_proj_wgmma order [M]       the default and the forced (proj_kernel 3) context,
                                            each timed after a heavy (cuBLAS GEMM loop) and after
                                            an idle predecessor, with the SM clock read by a probe
                                            kernel before and after each timing (M default 32768)
     ./build/dev_proj_wgmma one NAME M [n]  n calls (default 3) of one implementation (for ncu):
                                            lib, k3 (forced context), cublas, or a variant name
     ./build/dev_proj_wgmma fb M [n]        n forward (SAVE_PRE) + backward calls, default context
   Variants (the kernel below is the library's, copied, with three switches):
     lib0   f3e19ab's library epilogue (accurate expf, IEEE division, 1 / sqrtf; the epilogue
            inlined once per 64-row half); the library now runs f2's math (dd621b0)
     id     identity epilogue (the accumulators stored; no bias, activation, norm or column
            set-up): the floor of this GEMM schedule
     f1     expf with a MUFU reciprocal (__fdividef) for SiLU / sigmoid, rsqrtf for the norm
     f2     __expf and __fdividef (MUFU ex2 + rcp) for SiLU / sigmoid, rsqrtf for the norm
     lib0o / f1o / f2o   the same with the epilogue's code once: half 1's accumulators are
            moved into half 0's registers and the same code runs again (a loop of 2, not
            unrolled), halving the straight-line epilogue the warps fetch per tile
   The other activations (decay gate, softplus, ...) keep the accurate expressions everywhere.
   H200, M 8192 / 32768 (bench/results/cuda_proj_wgmma_f3e19ab.log, cuda_proj_dd621b0.log; read
   ratios, clocks drift): cuBLAS 0.35-0.41 / 1.45-1.65 ms; lib0 0.61-0.62 / 2.30-2.50; id 0.457 /
   1.86-1.89; f1 0.53 / 2.10-2.15; f2 0.50-0.51 / 2.01-2.04; the "o" forms no faster (f2o 0.51 /
   2.08): the straight-line epilogue's length was not the cost, its dependent arithmetic was
   (ncu: "fixed-latency execution dependency" the top stall, 138M instructions against f2o's 119M
   and id's 88M; tensor pipe 49% / 66% / 70% of cycles, cuBLAS's 160 x 256 tiles 89%).
   Build: make build/dev_proj_wgmma (sm_90a; the CUDA implementation compiled with the harness:
   the variants use its Hopper primitives and tensor maps, ssm_cuda.h >>sm90). That is a link to
   build/dev_whole: dev/cuda/whole.cu compiles this harness with bell.cu and delta.cu, the
   implementation once (./build/dev_whole proj_wgmma [table ...] runs the same). */
#define SSM_IMPLEMENTATION
#define SSM_CUDA_IMPLEMENTATION
#include "../../ssm_cuda.h"
#include "../../bench/cuda_common.h"
#include <cuda.h>
#include <cublas_v2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <math.h>
#include <time.h>
#include <unistd.h>
#include <string>
#include <vector>
#include <algorithm>

namespace dev_proj_wgmma { /* one namespace a harness: dev/cuda/whole.cu compiles three together */

#ifndef SSM_BENCH_COMMIT
#define SSM_BENCH_COMMIT "unknown"
#endif

#define CK(x)                                                                                            \
    do {                                                                                                 \
        cudaError_t e_ = (x);                                                                            \
        if (e_ != cudaSuccess) {                                                                         \
            printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__);              \
            exit(1);                                                                                     \
        }                                                                                                \
    } while (0)

/* ---- the segments, as the library's ssm__pj_segs ------------------------------------------- */
typedef struct dv_segs {
    int n;
    int act[SSM_PROJ_MAX_SEGMENTS], bias[SSM_PROJ_MAX_SEGMENTS];
    float param[SSM_PROJ_MAX_SEGMENTS];
    int64_t c0[SSM_PROJ_MAX_SEGMENTS + 1], g0[SSM_PROJ_MAX_SEGMENTS], l2[SSM_PROJ_MAX_SEGMENTS];
} dv_segs;

__device__ __forceinline__ float dv_sigmoid(float z) { return 1.f / (1.f + expf(-z)); }
__device__ __forceinline__ float dv_softplus(float z) { return fmaxf(z, 0.f) + log1pf(expf(-fabsf(z))); }
/* ssm__pj_act (the forward value only); FM > 0: SiLU / sigmoid through a MUFU reciprocal
   (FM 1: accurate expf; FM 2: __expf). */
template <int FM> __device__ __forceinline__ float dv_sig(float z) {
    if (FM == 0) return 1.f / (1.f + expf(-z));
    if (FM == 1) return __fdividef(1.f, 1.f + expf(-z));
    return __fdividef(1.f, 1.f + __expf(-z));
}
template <int FM> __device__ __forceinline__ float dv_act(int a, float param, float alog, float z) {
    float t;
    switch (a) {
    case SSM_PROJ_SILU: return z * dv_sig<FM>(z);
    case SSM_PROJ_SIGMOID: return dv_sig<FM>(z);
    case SSM_PROJ_SIGMOID2: return 2.f * dv_sigmoid(z);
    case SSM_PROJ_LOGSIGMOID: return -dv_softplus(-z) / param;
    case SSM_PROJ_SOFTPLUS: return dv_softplus(z);
    case SSM_PROJ_RELU: return fmaxf(z, 0.f);
    case SSM_PROJ_GELU_TANH: {
        const float k = 0.7978845608028654f, c = 0.044715f;
        t = tanhf(k * (z + c * z * z * z));
        return 0.5f * z * (1.f + t);
    }
    case SSM_PROJ_DECAY_GATE: return -expf(alog) * dv_softplus(z);
    case SSM_PROJ_SOFTCAP: return param * tanhf(z / param);
    default: return z;
    }
}
__device__ __forceinline__ int dv_seg_of(const dv_segs &sg, int64_t c) {
    int s = 0;
    while (s + 1 < sg.n && c >= sg.c0[s + 1]) ++s;
    return s;
}

#define DV_ST 6
#define DV_BK 64
#define DV_GM 16
#define DV_SMEM (DV_ST * 2 * 128 * DV_BK * 2 + 1024)
#define DV_MAXH 128

typedef struct __align__(16) dv_cols {
    float b[128], al[128], p[128];
    int nsg, nh;
    int sact[SSM_PROJ_MAX_SEGMENTS], slo[SSM_PROJ_MAX_SEGMENTS], shi[SSM_PROJ_MAX_SEGMENTS];
    int h0[DV_MAXH], hd[DV_MAXH];
} dv_cols;

#if defined(__CUDA_ARCH_FEAT_SM90_ALL) /* wgmma / setmaxnreg: sm_90a code only (the sm_90 pass of -arch=sm_90a gets stubs) */
/* the Hopper primitives are the library's (ssm_cuda.h >>sm90): ssm__sm90_* */

template <int A, int FM> __device__ __forceinline__ void dv_act_cols(float *d, const dv_cols &cc, int act, int lo, int hi, int q) {
#pragma unroll
    for (int j = 0; j < 16; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
            const int c = 8 * j + 2 * q + e;
            if (c >= lo && c < hi) {
                const float p = cc.p[c], al = cc.al[c];
                d[4 * j + e] = dv_act<FM>(A >= 0 ? A : act, p, al, d[4 * j + e]);
                d[4 * j + 2 + e] = dv_act<FM>(A >= 0 ? A : act, p, al, d[4 * j + 2 + e]);
            }
        }
}

template <int EPI, int FM>
__device__ __forceinline__ void dv_epi(float *d, const dv_cols &cc, int64_t M, int64_t N, int64_t r0, int64_t n0, int q,
                                       void *y, int64_t yrs, float eps) {
    const bool ok0 = r0 < M, ok1 = r0 + 8 < M;
    if (EPI) {
#pragma unroll
        for (int j = 0; j < 16; ++j) {
            const int c = 8 * j + 2 * q;
            const float2 b = *(const float2 *)(cc.b + c);
            d[4 * j] += b.x, d[4 * j + 1] += b.y, d[4 * j + 2] += b.x, d[4 * j + 3] += b.y;
        }
        for (int s = 0; s < cc.nsg; ++s) {
            const int a = cc.sact[s], lo = cc.slo[s], hi = cc.shi[s];
            switch (a) {
            case SSM_PROJ_NONE: break;
            case SSM_PROJ_SILU: dv_act_cols<SSM_PROJ_SILU, FM>(d, cc, a, lo, hi, q); break;
            case SSM_PROJ_SIGMOID: dv_act_cols<SSM_PROJ_SIGMOID, FM>(d, cc, a, lo, hi, q); break;
            case SSM_PROJ_DECAY_GATE: dv_act_cols<SSM_PROJ_DECAY_GATE, FM>(d, cc, a, lo, hi, q); break;
            default: dv_act_cols<-1, FM>(d, cc, a, lo, hi, q); break;
            }
        }
        for (int e = 0; e < cc.nh; ++e) {
            const int h = cc.h0[e], hd = cc.hd[e];
            float s0 = 0.f, s1 = 0.f;
#pragma unroll
            for (int j = 0; j < 16; ++j)
#pragma unroll
                for (int u = 0; u < 2; ++u)
                    if ((unsigned)(8 * j + 2 * q + u - h) < (unsigned)hd)
                        s0 += d[4 * j + u] * d[4 * j + u], s1 += d[4 * j + 2 + u] * d[4 * j + 2 + u];
            s0 += __shfl_xor_sync(0xffffffffu, s0, 1), s1 += __shfl_xor_sync(0xffffffffu, s1, 1);
            s0 += __shfl_xor_sync(0xffffffffu, s0, 2), s1 += __shfl_xor_sync(0xffffffffu, s1, 2);
            if (FM) s0 = rsqrtf(s0 + eps), s1 = rsqrtf(s1 + eps);
            else s0 = 1.f / sqrtf(s0 + eps), s1 = 1.f / sqrtf(s1 + eps);
#pragma unroll
            for (int j = 0; j < 16; ++j)
#pragma unroll
                for (int u = 0; u < 2; ++u)
                    if ((unsigned)(8 * j + 2 * q + u - h) < (unsigned)hd) d[4 * j + u] *= s0, d[4 * j + 2 + u] *= s1;
        }
    }
#pragma unroll
    for (int j = 0; j < 16; ++j) {
        const int c = 8 * j + 2 * q;
        if (n0 + c < N) {
            if (ok0) ssm__sm90_st2<1>(y, r0 * yrs + n0 + c, d[4 * j], d[4 * j + 1]);
            if (ok1) ssm__sm90_st2<1>(y, (r0 + 8) * yrs + n0 + c, d[4 * j + 2], d[4 * j + 3]);
        }
    }
}
#endif

/* The library's kernel (bf16, no pre), EPI 0 / 1, FM 0 / 1 / 2, ONCE 0 / 1 (see the top). */
template <int EPI, int FM, int ONCE>
__global__ void __launch_bounds__(384, 1) dv_pjw_kernel(const __grid_constant__ CUtensorMap ta, const __grid_constant__ CUtensorMap tb,
                                                        int M, int N, int K, dv_segs sg, const __nv_bfloat16 *bias,
                                                        const __nv_bfloat16 *alog, void *y, int64_t yrs, float eps) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    typedef __nv_bfloat16 T;
    constexpr int BM = 128, BN = 128, BK = DV_BK, ST = DV_ST;
    extern __shared__ uint4 dv_smem[];
    __shared__ uint64_t bars[2 * ST + 2];
    __shared__ dv_cols cols[2];
    unsigned char *base = ssm__sm90_ring(dv_smem);
    T *sA = (T *)base;
    T *sB = sA + ST * BM * BK;
    uint64_t *full = bars, *empty = full + ST, *order = empty + ST;
    const int wg = threadIdx.x / 128, tid = threadIdx.x % 128;
    const int ntm = (M + BM - 1) / BM, ntn = (N + BN - 1) / BN, ntiles = ntm * ntn, nk = (K + BK - 1) / BK;
    if (threadIdx.x == 0) ssm__sm90_bar_init(&order[0], 4), ssm__sm90_bar_init(&order[1], 4);
    ssm__sm90_ring_init(full, empty, ST, 4);
#define DV_TILE(t, tm, tn)                                                                               \
    do {                                                                                                 \
        const int per_ = DV_GM * ntn, g_ = (t) / per_, f_ = g_ * DV_GM, r_ = (t) - g_ * per_;            \
        const int gs_ = ntm - f_ < DV_GM ? ntm - f_ : DV_GM;                                             \
        tm = f_ + r_ % gs_, tn = r_ / gs_;                                                               \
    } while (0)
    if (wg == 0) {
        ssm__sm90_producer_regs();
        if (tid == 0) {
            int s = 0, ph = 0;
            for (int t = blockIdx.x; t < ntiles; t += gridDim.x) {
                int tm, tn;
                DV_TILE(t, tm, tn);
                for (int kb = 0; kb < nk; ++kb) {
                    ssm__sm90_wait(&empty[s], ph ^ 1);
                    ssm__sm90_expect_tx(&full[s], (BM + BN) * BK * (int)sizeof(T));
                    ssm__sm90_tma2(sA + s * BM * BK, &ta, &full[s], kb * BK, tm * BM);
                    ssm__sm90_tma2(sB + s * BN * BK, &tb, &full[s], kb * BK, tn * BN);
                    if (++s == ST) s = 0, ph ^= 1;
                }
            }
        }
    } else {
        ssm__sm90_consumer_regs();
        float d0[BN / 2], d1[BN / 2];
        const int warp = tid / 32, lane = tid % 32, c = wg - 1;
        dv_cols &cc = cols[c];
        for (int i = c;; i += 2) {
            const int t = blockIdx.x + i * gridDim.x;
            if (t >= ntiles) break;
            int tm, tn;
            DV_TILE(t, tm, tn);
#pragma unroll
            for (int r = 0; r < BN / 2; ++r) d0[r] = 0.f, d1[r] = 0.f;
            if (i >= 1) ssm__sm90_wait(&order[c], ((i - 2 + c) / 2) & 1);
            const long g = (long)i * nk;
            int s = (int)(g % ST), ph = (int)((g / ST) & 1), prev = -1;
            for (int kb = 0; kb < nk; ++kb) {
                ssm__sm90_wait(&full[s], ph);
#pragma unroll
                for (int r = 0; r < BN / 2; ++r) ssm__sm90_rf(d0[r]), ssm__sm90_rf(d1[r]);
                ssm__sm90_fence();
                const T *a = sA + s * BM * BK, *b = sB + s * BN * BK;
#pragma unroll
                for (int k = 0; k < BK / 16; ++k) {
                    ssm__sm90_mma<128, 1, 0, 0>::run(d0, ssm__sm90_desc(a + 16 * k), ssm__sm90_desc(b + 16 * k));
                    ssm__sm90_mma<128, 1, 0, 0>::run(d1, ssm__sm90_desc(a + 64 * BK + 16 * k), ssm__sm90_desc(b + 16 * k));
                }
                ssm__sm90_commit();
                ssm__sm90_wait_mma<1>();
#pragma unroll
                for (int r = 0; r < BN / 2; ++r) ssm__sm90_rf(d0[r]), ssm__sm90_rf(d1[r]);
                if (prev >= 0 && lane == 0) ssm__sm90_arrive(&empty[prev]);
                prev = s;
                if (++s == ST) s = 0, ph ^= 1;
            }
            if (lane == 0) ssm__sm90_arrive(&order[c ^ 1]);
            ssm__sm90_wait_mma<0>();
#pragma unroll
            for (int r = 0; r < BN / 2; ++r) ssm__sm90_rf(d0[r]), ssm__sm90_rf(d1[r]);
            if (prev >= 0 && lane == 0) ssm__sm90_arrive(&empty[prev]);
            const int64_t n0 = (int64_t)tn * BN;
            if (EPI) {
                asm volatile("bar.sync %0, 128;\n" ::"r"(wg) : "memory");
                const int64_t col = n0 + tid;
                float b = 0.f, al = 0.f, p = 1.f;
                if (col < N) {
                    const int sj = dv_seg_of(sg, col);
                    p = sg.param[sj];
                    if (sg.bias[sj]) b = __bfloat162float(bias[col]);
                    if (sg.act[sj] == SSM_PROJ_DECAY_GATE) al = __bfloat162float(alog[sg.g0[sj] + col - sg.c0[sj]]);
                }
                cc.b[tid] = b, cc.al[tid] = al, cc.p[tid] = p;
                if (tid == 0) {
                    int ns = 0, nh = 0;
                    for (int sj = 0; sj < sg.n; ++sj) {
                        const int64_t lo = sg.c0[sj] > n0 ? sg.c0[sj] : n0;
                        const int64_t hi = sg.c0[sj + 1] < n0 + BN ? sg.c0[sj + 1] : n0 + BN;
                        if (lo >= hi) continue;
                        cc.sact[ns] = sg.act[sj], cc.slo[ns] = (int)(lo - n0), cc.shi[ns] = (int)(hi - n0), ++ns;
                        if (sg.l2[sj] > 0) {
                            const int64_t hd = sg.l2[sj];
                            for (int64_t hs = sg.c0[sj] + (lo - sg.c0[sj]) / hd * hd; hs < hi; hs += hd)
                                if (hs >= n0 && hs + hd <= n0 + BN && nh < DV_MAXH)
                                    cc.h0[nh] = (int)(hs - n0), cc.hd[nh] = (int)hd, ++nh;
                        }
                    }
                    cc.nsg = ns, cc.nh = nh;
                }
                asm volatile("bar.sync %0, 128;\n" ::"r"(wg) : "memory");
            }
            const int64_t r0 = (int64_t)tm * BM + warp * 16 + lane / 4;
            if (ONCE) {
#pragma unroll 1
                for (int h = 0; h < 2; ++h) {
                    dv_epi<EPI, FM>(d0, cc, M, N, r0 + 64 * h, n0, lane % 4, y, yrs, eps);
#pragma unroll
                    for (int r = 0; r < BN / 2; ++r) d0[r] = d1[r];
                }
            } else {
                dv_epi<EPI, FM>(d0, cc, M, N, r0, n0, lane % 4, y, yrs, eps);
                dv_epi<EPI, FM>(d1, cc, M, N, r0 + 64, n0, lane % 4, y, yrs, eps);
            }
        }
    }
#undef DV_TILE
#endif
}

/* ---- host ---------------------------------------------------------------------------------- */
static void make_map(CUtensorMap *m, const void *p, int64_t rows, int64_t K) {
    if (ssm__pjw_map(m, p, 1, rows, K, K)) { /* the library's map of kernel 3's operands */
        printf("tensor map refused\n");
        exit(1);
    }
}

typedef void (*kfn)(CUtensorMap, CUtensorMap, int, int, int, dv_segs, const __nv_bfloat16 *, const __nv_bfloat16 *, void *,
                    int64_t, float);
struct variant {
    const char *name;
    kfn k;
};
static const variant VARS[] = {
    {"lib0", dv_pjw_kernel<1, 0, 0>}, {"id", dv_pjw_kernel<0, 0, 0>},   {"f1", dv_pjw_kernel<1, 1, 0>},
    {"f2", dv_pjw_kernel<1, 2, 0>},   {"lib0o", dv_pjw_kernel<1, 0, 1>}, {"f1o", dv_pjw_kernel<1, 1, 1>},
    {"f2o", dv_pjw_kernel<1, 2, 1>},
};
static const int NV = (int)(sizeof VARS / sizeof VARS[0]);

static cublasHandle_t g_h;
static int g_sms;
static ssm_ctx *g_def, *g_k3;

struct problem {
    int64_t M, K, N;
    ssm_proj_desc d;
    void *x, *W, *b, *al, *y, *yref, *pre, *dy, *dx, *dW, *db, *dal;
    dv_segs sg;
    CUtensorMap ta, tb;
};

static ssm_proj_desc gdn(void) {
    ssm_proj_desc c = ssm_proj_desc_init();
    ssm_proj_desc_add(&c, 2048, SSM_PROJ_SILU, 0, 0, 128);
    ssm_proj_desc_add(&c, 2048, SSM_PROJ_SILU, 0, 0, 128);
    ssm_proj_desc_add(&c, 2048, SSM_PROJ_SILU, 0, 0, 0);
    ssm_proj_desc_add(&c, 2048, SSM_PROJ_NONE, 0, 0, 0);
    ssm_proj_desc_add(&c, 16, SSM_PROJ_SIGMOID, 0, 0, 0);
    ssm_proj_desc_add(&c, 16, SSM_PROJ_DECAY_GATE, 0, 1, 0);
    return c;
}

static void setup(problem &p, int64_t M) {
    const ssm_dtype dt = SSM_BF16;
    p.M = M, p.K = 2048, p.d = gdn(), p.N = ssm_proj_desc_width(&p.d);
    p.x = dev_random(dt, M * p.K, 1.f, 1), p.W = dev_random(dt, p.N * p.K, 0.03f, 2), p.b = dev_random(dt, p.N, 0.5f, 3);
    p.al = dev_random(dt, 16, 0.5f, 4), p.y = dev_random(dt, M * p.N, 1.f, 5), p.yref = dev_random(dt, M * p.N, 1.f, 6);
    p.pre = dev_random(dt, M * p.N, 1.f, 7), p.dy = dev_random(dt, M * p.N, 1.f, 8), p.dx = dev_random(dt, M * p.K, 1.f, 9);
    p.dW = dev_random(dt, p.N * p.K, 1.f, 10), p.db = dev_random(dt, p.N, 1.f, 11), p.dal = dev_random(dt, 16, 1.f, 12);
    if (!p.x || !p.W || !p.b || !p.al || !p.y || !p.yref || !p.pre || !p.dy || !p.dx || !p.dW || !p.db || !p.dal) {
        printf("out of memory\n");
        exit(1);
    }
    memset(&p.sg, 0, sizeof p.sg);
    p.sg.n = p.d.nseg;
    int64_t c = 0, g = 0;
    for (int s = 0; s < p.d.nseg; ++s) {
        p.sg.act[s] = (int)p.d.seg[s].act, p.sg.bias[s] = p.d.seg[s].bias, p.sg.param[s] = (float)p.d.seg[s].param;
        p.sg.c0[s] = c, p.sg.g0[s] = g, p.sg.l2[s] = p.d.seg[s].l2_head;
        if (p.d.seg[s].act == SSM_PROJ_DECAY_GATE) g += p.d.seg[s].width;
        c += p.d.seg[s].width;
    }
    p.sg.c0[p.d.nseg] = c;
    make_map(&p.ta, p.x, M, p.K);
    make_map(&p.tb, p.W, p.N, p.K);
    CK(cudaDeviceSynchronize());
}
static void release(problem &p) {
    void *v[] = {p.x, p.W, p.b, p.al, p.y, p.yref, p.pre, p.dy, p.dx, p.dW, p.db, p.dal};
    for (void *q : v) cudaFree(q);
}

/* one call of implementation `name` on p (output into out) */
static void call(problem &p, const std::string &name, void *out) {
    const int64_t sx[2] = {p.M, p.K}, sW[2] = {p.N, p.K}, sy[2] = {p.M, p.N}, sN[1] = {p.N}, sG[1] = {16};
    if (name == "cublas") {
        const float one = 1.f, zero = 0.f;
        cublasGemmEx(g_h, CUBLAS_OP_T, CUBLAS_OP_N, (int)p.N, (int)p.M, (int)p.K, &one, p.W, CUDA_R_16BF, (int)p.K, p.x,
                     CUDA_R_16BF, (int)p.K, &zero, out, CUDA_R_16BF, (int)p.N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        return;
    }
    if (name == "lib" || name == "k3") {
        ssm_ctx *ctx = name == "lib" ? g_def : g_k3;
        ssm_tensor tx = ssm_tensor_make(p.x, SSM_BF16, ssm_cuda_device(0), 2, sx, NULL);
        ssm_tensor tW = ssm_tensor_make(p.W, SSM_BF16, ssm_cuda_device(0), 2, sW, NULL);
        ssm_tensor tb = ssm_tensor_make(p.b, SSM_BF16, ssm_cuda_device(0), 1, sN, NULL);
        ssm_tensor tal = ssm_tensor_make(p.al, SSM_BF16, ssm_cuda_device(0), 1, sG, NULL);
        ssm_tensor ty = ssm_tensor_make(out, SSM_BF16, ssm_cuda_device(0), 2, sy, NULL);
        p.d.path = SSM_PROJ_FUSED, p.d.save = SSM_PROJ_SAVE_NONE;
        if (ssm_proj_forward(ctx, &p.d, &tx, &tW, &tb, &tal, &ty, NULL) != SSM_OK) {
            printf("%s: %s\n", name.c_str(), ssm_ctx_last_error(ctx));
            exit(1);
        }
        return;
    }
    for (int v = 0; v < NV; ++v)
        if (name == VARS[v].name) {
            const int64_t tiles = ((p.M + 127) / 128) * ((p.N + 127) / 128), want = (tiles + 1) / 2;
            const int grid = (int)(want < g_sms ? want : g_sms);
            VARS[v].k<<<grid, 384, DV_SMEM>>>(p.ta, p.tb, (int)p.M, (int)p.N, (int)p.K, p.sg, (const __nv_bfloat16 *)p.b,
                                              (const __nv_bfloat16 *)p.al, out, p.N, 1e-6f);
            return;
        }
    printf("unknown implementation %s\n", name.c_str());
    exit(1);
}

static void fwdbwd(problem &p) {
    const int64_t sx[2] = {p.M, p.K}, sW[2] = {p.N, p.K}, sy[2] = {p.M, p.N}, sN[1] = {p.N}, sG[1] = {16};
    const ssm_device dv = ssm_cuda_device(0);
    ssm_tensor tx = ssm_tensor_make(p.x, SSM_BF16, dv, 2, sx, NULL), tW = ssm_tensor_make(p.W, SSM_BF16, dv, 2, sW, NULL);
    ssm_tensor tb = ssm_tensor_make(p.b, SSM_BF16, dv, 1, sN, NULL), tal = ssm_tensor_make(p.al, SSM_BF16, dv, 1, sG, NULL);
    ssm_tensor ty = ssm_tensor_make(p.y, SSM_BF16, dv, 2, sy, NULL), tpre = ssm_tensor_make(p.pre, SSM_BF16, dv, 2, sy, NULL);
    ssm_tensor tdy = ssm_tensor_make(p.dy, SSM_BF16, dv, 2, sy, NULL), tdx = ssm_tensor_make(p.dx, SSM_BF16, dv, 2, sx, NULL);
    ssm_tensor tdW = ssm_tensor_make(p.dW, SSM_BF16, dv, 2, sW, NULL), tdb = ssm_tensor_make(p.db, SSM_BF16, dv, 1, sN, NULL);
    ssm_tensor tdal = ssm_tensor_make(p.dal, SSM_BF16, dv, 1, sG, NULL);
    p.d.path = SSM_PROJ_FUSED, p.d.save = SSM_PROJ_SAVE_PRE;
    if (ssm_proj_forward(g_def, &p.d, &tx, &tW, &tb, &tal, &ty, &tpre) != SSM_OK ||
        ssm_proj_backward(g_def, &p.d, &tx, &tW, &tb, &tal, &tpre, &tdy, &tdx, &tdW, &tdb, &tdal) != SSM_OK) {
        printf("fwdbwd: %s\n", ssm_ctx_last_error(g_def));
        exit(1);
    }
}

/* |a - b| over bf16 arrays: max abs, count over 2 bf16 ulps of |b|, relative L2 */
__global__ void diff_kernel(const __nv_bfloat16 *a, const __nv_bfloat16 *b, int64_t n, float *out) {
    float mx = 0.f, se = 0.f, sr = 0.f, big = 0.f;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const float x = __bfloat162float(a[i]), r = __bfloat162float(b[i]), e = fabsf(x - r);
        if (!(e <= mx)) mx = e != e ? INFINITY : fmaxf(mx, e);
        se += e * e, sr += r * r;
        if (!(e <= 2.f * 0.0078125f * fabsf(r) + 1e-6f)) big += 1.f;
    }
    atomicMax((int *)&out[0], __float_as_int(mx)); /* non-negative floats order as ints */
    atomicAdd(&out[1], se), atomicAdd(&out[2], sr), atomicAdd(&out[3], big);
}
static void check(problem &p, const char *name) {
    float *o, h[4];
    CK(cudaMalloc(&o, 16));
    CK(cudaMemset(o, 0, 16));
    diff_kernel<<<1024, 256>>>((const __nv_bfloat16 *)p.y, (const __nv_bfloat16 *)p.yref, p.M * p.N, o);
    CK(cudaMemcpy(h, o, 16, cudaMemcpyDeviceToHost));
    cudaFree(o);
    printf("  check %-6s M%-6lld vs lib: max|d| %.3g  relL2 %.2e  >2ulp %.0f  %s\n", name, (long long)p.M, h[0],
           sqrt(h[1] / h[2]), h[3], h[0] < 0.05f && h[3] < 1e-4 * p.M * p.N ? "OK" : "FAIL");
}

/* the SM clock (MHz) over ~200 us: clock64 against %globaltimer in one block */
__global__ void probe_kernel(unsigned long long *out) {
    unsigned long long t0, t1, c0 = clock64(), c1;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
    while (t1 - t0 < 200000ull);
    c1 = clock64();
    if (threadIdx.x == 0) out[0] = c1 - c0, out[1] = t1 - t0;
}
static double sm_mhz(void) {
    unsigned long long *o, h[2];
    CK(cudaMalloc(&o, 16));
    probe_kernel<<<1, 32>>>(o);
    CK(cudaMemcpy(h, o, 16, cudaMemcpyDeviceToHost));
    cudaFree(o);
    return (double)h[0] / (double)h[1] * 1e3;
}

static void table(int64_t M, int rounds) {
    problem p;
    setup(p, M);
    std::vector<std::string> impls = {"cublas", "lib", "k3"};
    for (int v = 0; v < NV; ++v) impls.push_back(VARS[v].name);
    call(p, "lib", p.yref);
    CK(cudaDeviceSynchronize());
    for (int v = 0; v < NV; ++v) {
        CK(cudaMemset(p.y, 0xFF, p.M * p.N * 2)); /* poison: NaN bf16 */
        call(p, VARS[v].name, p.y);
        CK(cudaGetLastError());
        CK(cudaDeviceSynchronize());
        if (strcmp(VARS[v].name, "id")) check(p, VARS[v].name);
    }
    std::vector<std::vector<double>> t(impls.size());
    for (int r = 0; r < rounds; ++r)
        for (size_t i = 0; i < impls.size(); ++i) t[i].push_back(time_ms([&] { call(p, impls[i], p.y); }, 7));
    CK(cudaDeviceSynchronize());
    double gf = 0;
    const double fl = 2.0 * p.M * p.N * p.K;
    for (size_t i = 0; i < impls.size(); ++i) {
        std::vector<double> v = t[i];
        std::sort(v.begin(), v.end());
        const double m = v[v.size() / 2];
        if (i == 0) gf = m;
        printf("  M%-6lld %-7s %8.3f ms  (min %.3f max %.3f over %d rounds)  %6.1f TFLOP/s  x%.3f the cuBLAS GEMM\n",
               (long long)M, impls[i].c_str(), m, v.front(), v.back(), rounds, fl / m * 1e-9, m / gf);
    }
    release(p);
}

/* heavy: a cuBLAS GEMM loop of ~20 ms at full tensor load; idle: 50 ms asleep */
static void order(int64_t M) {
    problem p;
    setup(p, M);
    const char *names[2] = {"lib", "k3"};
    for (int rep = 0; rep < 2; ++rep)
        for (int pre = 0; pre < 2; ++pre)
            for (int w = 0; w < 2; ++w) {
                const int who = rep ? 1 - w : w;
                if (pre == 0) {
                    for (int i = 0; i < 14; ++i) call(p, "cublas", p.y);
                    CK(cudaDeviceSynchronize());
                } else
                    usleep(50000);
                const double f0 = sm_mhz();
                const double ms = time_ms([&] { call(p, names[who], p.y); });
                const double f1 = sm_mhz();
                printf("  M%-6lld after %-5s %-3s %8.3f ms   SM clock before %6.0f MHz, after %6.0f MHz\n", (long long)M,
                       pre ? "idle" : "gemms", names[who], ms, f0, f1);
            }
    release(p);
}

static int harness(int argc, char **argv) {
    cudaDeviceProp pr;
    if (cudaGetDeviceProperties(&pr, 0) != cudaSuccess) {
        printf("proj_wgmma: no CUDA device\n");
        return 0;
    }
    if (pr.major != 9 || pr.minor != 0) {
        printf("proj_wgmma: needs a cc 9.0 GPU (sm_90a); this is %s, sm_%d%d\n", pr.name, pr.major, pr.minor);
        return 0;
    }
    cudaFuncAttributes fa;
    if (cudaFuncGetAttributes(&fa, VARS[0].k) != cudaSuccess || fa.sharedSizeBytes == 0) { /* the stub has none */
        printf("proj_wgmma: needs sm_90a machine code\n");
        return 0;
    }
    g_sms = pr.multiProcessorCount;
    if (!ssm__sm90_encoder()) {
        printf("no cuTensorMapEncodeTiled\n");
        return 1;
    }
    for (int v = 0; v < NV; ++v) CK(cudaFuncSetAttribute(VARS[v].k, cudaFuncAttributeMaxDynamicSharedMemorySize, DV_SMEM));
    cublasCreate(&g_h);
    {
        ssm_ctx_config cfg = ssm_ctx_config_init();
        ssm_cuda_config cc = ssm_cuda_config_init();
        cfg.backend = ssm_cuda_backend(), cfg.backend_config = &cc;
        if (ssm_ctx_create(&cfg, &g_def) != SSM_OK) return 1;
        cc.proj_kernel = 3;
        if (ssm_ctx_create(&cfg, &g_k3) != SSM_OK) return 1;
    }
    time_t now = time(NULL);
    char date[32];
    strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", gmtime(&now));
    printf("proj_wgmma: %s, %d SMs, commit %s, %s\n", pr.name, g_sms, SSM_BENCH_COMMIT, date);
    const std::string mode = argc > 1 ? argv[1] : "table";
    if (mode == "table") {
        table(8192, argc > 2 ? atoi(argv[2]) : 5);
        table(32768, argc > 2 ? atoi(argv[2]) : 3);
    } else if (mode == "order") {
        order(argc > 2 ? atoll(argv[2]) : 32768);
    } else if (mode == "one" && argc > 3) {
        problem p;
        setup(p, atoll(argv[3]));
        const int n = argc > 4 ? atoi(argv[4]) : 3;
        for (int i = 0; i < n; ++i) call(p, argv[2], p.y);
        CK(cudaGetLastError());
        CK(cudaDeviceSynchronize());
        release(p);
    } else if (mode == "fb" && argc > 2) {
        problem p;
        setup(p, atoll(argv[2]));
        const int n = argc > 3 ? atoi(argv[3]) : 2;
        for (int i = 0; i < n; ++i) fwdbwd(p);
        CK(cudaGetLastError());
        CK(cudaDeviceSynchronize());
        printf("  fwd+bwd M%lld: %.3f ms\n", (long long)p.M, time_ms([&] { fwdbwd(p); }));
        release(p);
    } else {
        printf("usage: %s [table [rounds] | order [M] | one NAME M [n] | fb M [n]]\n", argv[0]);
        return 1;
    }
    ssm_ctx_destroy(g_def);
    ssm_ctx_destroy(g_k3);
    cublasDestroy(g_h);
    return 0;
}
} // namespace dev_proj_wgmma
#undef CK

#ifndef SSM_DEV_WHOLE /* alone: nvcc ... dev/cuda/proj_wgmma.cu */
int main(int argc, char **argv) { return dev_proj_wgmma::harness(argc, argv); }
#endif
