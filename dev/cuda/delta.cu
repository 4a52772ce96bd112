/* Dev harness for the delta-rule CUDA kernels (llm.c style): kernels in ssm_cuda.h, an f64
   token-by-token oracle here, correctness checks and timings chosen by argv.
     ./delta check            every kernel against the oracle (dtypes, sizes, varlen, gates)
     ./delta bench [shape..]  time forward / forward+backward / decode, JSON rows to stdout
     ./delta seq              the sequential passes and whole calls at B1 T32768 H32 D128, output hashes
   Build: make build/dev_delta, a link to build/dev_whole (dev/cuda/whole.cu compiles this harness
   with bell.cu and proj_wgmma.cu, the implementation once; ./build/dev_whole delta check runs the
   same), or alone: nvcc -O3 -arch=sm_90 -I. -std=c++17 dev/cuda/delta.cu -lcublas */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include <string>
#include <vector>
#define SSM_IMPLEMENTATION
#define SSM_CUDA_IMPLEMENTATION
#include "../../ssm_cuda.h"

namespace dev_delta { /* one namespace a harness: dev/cuda/whole.cu compiles three together */

#define CK(x)                                                                                           \
    do {                                                                                                \
        cudaError_t e_ = (x);                                                                           \
        if (e_ != cudaSuccess) {                                                                        \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));         \
            exit(1);                                                                                    \
        }                                                                                               \
    } while (0)

static int g_optin = 0, g_sms = 0, g_variant = 0; /* DL_VARIANT: ssm__dl_args.variant bits */

/* The launchers are ssm_cuda.h's (ssm__dl_*); these wrappers fix the harness's device limits. */
typedef ssm__dl_sizes dl_sizes;
static dl_sizes dl_sizes_of(const ssm__dl_args &a, size_t esz, int VB, int bwd) {
    return ssm__dl_sizes_of(a.N, a.T, a.H, a.K, a.V, a.cu != NULL, esz, VB, 1, bwd);
}
static int dl_forward_chunked(const ssm__dl_args &a, const dl_sizes &s, char *ws, cudaStream_t st) {
    return ssm__dl_forward_chunked(a, s, ws, NULL, g_optin, st);
}
static int dl_backward(const ssm__dl_args &a, const dl_sizes &s, char *ws, cudaStream_t st) {
    ssm__dl_args b = a; /* the output stores the library's backward picks */
    b.pairs = ssm__dl_pairs_ok(b, b.dt == 0 ? 4 : 2);
    return ssm__dl_backward_chunked(b, s, ws, NULL, g_optin, st);
}
static int dl_forward_recurrent(const ssm__dl_args &a, cudaStream_t st) {
    ssm__dl_recurrent(a, st);
    return 0;
}
static int dl_pick_vb(const ssm__dl_args &a) { return ssm__dl_pick_vb(a.N, a.H, a.V, g_sms); }

/* ---- baseline: the earlier chunk preparation (f32 A and T tiles apart, 16 barriers, K staged twice,
   a lane-quad forward substitution per diagonal block), kept to time the library's against ---------- */
template <class E, int KP> __host__ __device__ constexpr bool dlv0_prep_alias() {
    return 2 * SSM__DL_C * (KP + 8) * sizeof(E) >= SSM__DL_C * 72 * sizeof(float);
}
/* ---- chunk preparation: one CTA per (chunk, head), all chunks in parallel -----------------------
   A = strict_tril(diag(beta) K K^T * exp(g_i - g_j)), T = (I + A)^-1 (forward substitution, f32),
   w = T diag(beta exp(g)) K, u = T diag(beta) V, Aqk = scale * tril(Q K^T * exp(g_i - g_j)). */
template <class E, int KP>
__global__ void __launch_bounds__(SSM__DL_NT) dlv0_prep_kernel(ssm__dl_args a, ssm__dl_ws<E> ws, int VP, int store_t) {
    constexpr int C = SSM__DL_C, LK = KP + 8, LC = C + 8;
    extern __shared__ __align__(16) unsigned char dlv0_smem[];
    const int64_t gc = blockIdx.x;
    const int h = blockIdx.y, tid = threadIdx.x, wp = tid >> 5, lane = tid & 31;
    int64_t c;
    const int n = ssm__dl_find(a, gc, ws.choff, &c);
    if (n < 0) return;
    const ssm__dl_seq sq = ssm__dl_seq_of(a, n, ws.choff);
    const int64_t t0 = sq.t0 + c * C;
    const int len = (int)min((int64_t)C, sq.len - c * C);
    const int LV = VP + 8;
    E *sQ = (E *)dlv0_smem, *sK = sQ + C * LK, *sKb = sK + C * LK, *sV = sKb + C * LK, *sT = sV + C * LV;
    float *sA = (float *)(sT + C * LC), *sb = sA + C * (C + 1), *sg = sb + C, *seg = sg + C;
    const int64_t ch = gc * a.H + h;

    for (int i = tid; i < C; i += blockDim.x) {
        sb[i] = i < len ? ssm__dl_ld(a.beta, a.bdt, sq.b * a.bs[0] + (t0 + i) * a.bs[1] + h * a.bs[2]) : 0.f;
        sg[i] = (i < len && a.g) ? ssm__dl_ld(a.g, a.gdt, sq.b * a.gs[0] + (t0 + i) * a.gs[1] + h * a.gs[2]) : 0.f;
    }
    __syncthreads();
    if (tid < 32) { /* inclusive scan of the log gates over the chunk (2 per lane) */
        float x0 = sg[2 * tid], x1 = x0 + sg[2 * tid + 1], s = x1;
        for (int o = 1; o < 32; o <<= 1) {
            float y = __shfl_up_sync(0xffffffffu, s, o);
            if (tid >= o) s += y;
        }
        float ex = s - x1;
        sg[2 * tid] = ex + x0, sg[2 * tid + 1] = ex + x1;
    }
    __syncthreads();
    for (int i = tid; i < C; i += blockDim.x) {
        seg[i] = sb[i] * __expf(sg[i]);
        ws.gam[ch * C + i] = sg[i];
    }
    __syncthreads();
    const int64_t qb = sq.b * a.qs[0] + t0 * a.qs[1] + h * a.qs[2], kb = sq.b * a.ks[0] + t0 * a.ks[1] + h * a.ks[2];
    const int64_t vb = sq.b * a.vs[0] + t0 * a.vs[1] + h * a.vs[2];
    ssm__dl_stage(sQ, LK, C, KP, a.q, a.dt, qb, a.qs[1], a.qs[3], len, a.K, [](int) { return 1.f; }, a.vec);
    ssm__dl_stage(sK, LK, C, KP, a.k, a.dt, kb, a.ks[1], a.ks[3], len, a.K, [](int) { return 1.f; }, a.vec);
    ssm__dl_stage(sKb, LK, C, KP, a.k, a.dt, kb, a.ks[1], a.ks[3], len, a.K, [&](int i) { return seg[i]; }, a.vec);
    ssm__dl_stage(sV, LV, C, VP, a.v, a.dt, vb, a.vs[1], a.vs[3], len, a.V, [&](int i) { return sb[i]; }, a.vec);
    __syncthreads();
    ssm__dl_sttile<C, KP>(ws.qp + ch * C * KP, KP, sQ, LK);
    ssm__dl_sttile<C, KP>(ws.kp + ch * C * KP, KP, sK, LK);
    E *aqk = ws.aqk + ch * C * C;
    const float scale = a.scale;
    ssm__dl_gemm<C, C, KP, false, true>(sK, LK, sK, LK, [&](int i, int j, float x) {
        sA[i * (C + 1) + j] = i > j ? sb[i] * x * __expf(sg[i] - sg[j]) : 0.f;
    });
    ssm__dl_gemm2<C, C, KP, false, true>(sQ, LK, sK, LK, [&](int i, int j, float x0, float x1) {
        ssm__dl_st2(aqk + i * C + j, i >= j ? scale * x0 * __expf(sg[i] - sg[j]) : 0.f,
                    i > j ? scale * x1 * __expf(sg[i] - sg[j + 1]) : 0.f);
    });
    __syncthreads();
    /* f32 T [C][72], over sQ, sK (dead now) where they are large enough; stride 72 spreads banks */
    float *sTf = dlv0_prep_alias<E, KP>() ? (float *)sQ : seg + C;
    if (!(a.variant & 1)) { /* blocked: 16 x 16 diagonal blocks, then three levels of block products */
        float *sX = seg + C + (dlv0_prep_alias<E, KP>() ? 0 : C * 72); /* [3][16][24] */
        {   /* diagonal block b, column c: four lanes split each row's sum (j mod 4) */
            const int b = tid >> 6, c = (tid >> 2) & 15, part = tid & 3, o = 16 * b;
            const unsigned gm4 = 0xFu << (tid & 28);
            if (part == 0)
                for (int i = 0; i < 16; ++i) sTf[(o + i) * 72 + o + c] = i == c ? 1.f : 0.f;
            __syncwarp(gm4);
            for (int i = c + 1; i < 16; ++i) {
                float s = 0.f;
                for (int j = c + part; j < i; j += 4) s += sA[(o + i) * (C + 1) + o + j] * sTf[(o + j) * 72 + o + c];
                s += __shfl_xor_sync(gm4, s, 1);
                s += __shfl_xor_sync(gm4, s, 2);
                if (part == 0) sTf[(o + i) * 72 + o + c] = -s;
                __syncwarp(gm4);
            }
        }
        __syncthreads();
        if (!(a.variant & 2)) { /* T_IJ = -D_I sum_{K=J}^{I-1} A_IK T_KJ on tensor cores: 3xTF32 (f32 accuracy) */
            const int g = lane >> 2, t = lane & 3;
#pragma unroll
            for (int I = 1; I < 4; ++I) {
                const int J = wp >> 1, n0 = 8 * (wp & 1);
                if (wp < 2 * I) { /* warp (J, half): X_J[:, n0..n0+7] */
                    float x[4] = {0.f, 0.f, 0.f, 0.f};
                    for (int k0 = 16 * J; k0 < 16 * I; k0 += 8) {
                        const float *ar = sA + (16 * I + g) * (C + 1) + k0 + t, *br = sTf + (k0 + t) * 72 + 16 * J + n0 + g;
                        ssm__dl_mma3(x, ar[0], ar[8 * (C + 1)], ar[4], ar[8 * (C + 1) + 4], br[0], br[4 * 72]);
                    }
                    float *xs = sX + J * 16 * 24 + n0 + 2 * t;
                    xs[g * 24] = x[0], xs[g * 24 + 1] = x[1], xs[(g + 8) * 24] = x[2], xs[(g + 8) * 24 + 1] = x[3];
                }
                __syncthreads();
                if (wp < 2 * I) { /* T_IJ[:, n0..] = -D_I X_J[:, n0..] */
                    float x[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
                    for (int k0 = 0; k0 < 16; k0 += 8) {
                        const float *ar = sTf + (16 * I + g) * 72 + 16 * I + k0 + t, *br = sX + J * 16 * 24 + (k0 + t) * 24 + n0 + g;
                        ssm__dl_mma3(x, ar[0], ar[8 * 72], ar[4], ar[8 * 72 + 4], br[0], br[4 * 24]);
                    }
                    float *ts = sTf + (16 * I + g) * 72 + 16 * J + n0 + 2 * t;
                    ts[0] = -x[0], ts[1] = -x[1], ts[8 * 72] = -x[2], ts[8 * 72 + 1] = -x[3];
                }
                __syncthreads();
            }
        } else { /* the same block products on scalar FMAs */
        const int r = tid >> 4, c = tid & 15;
#pragma unroll
        for (int I = 1; I < 4; ++I) { /* T_IJ = -D_I sum_{K=J}^{I-1} A_IK T_KJ for every J < I (unrolled: fixed trips) */
#pragma unroll
            for (int J = 0; J < I; ++J) {
                float x = 0.f;
#pragma unroll 16
                for (int k = 16 * J; k < 16 * I; ++k) x += sA[(16 * I + r) * (C + 1) + k] * sTf[k * 72 + 16 * J + c];
                sX[J * 16 * 24 + r * 24 + c] = x;
            }
            __syncthreads();
#pragma unroll
            for (int J = 0; J < I; ++J) {
                float t = 0.f;
#pragma unroll
                for (int m = 0; m < 16; ++m) /* D_I is zero above its diagonal */
                    t += sTf[(16 * I + r) * 72 + 16 * I + m] * sX[J * 16 * 24 + m * 24 + c];
                sTf[(16 * I + r) * 72 + 16 * J + c] = -t;
            }
            __syncthreads();
        }
        }
        for (int idx = tid; idx < C * C; idx += blockDim.x) {
            const int i = idx >> 6, j = idx & 63;
            sT[i * LC + j] = ssm__dl_cv<E>((i >> 4) >= (j >> 4) ? sTf[i * 72 + j] : 0.f);
        }
    } else { /* T by forward substitution, column by column: t_i = [i == col] - sum_{j<i} A_ij t_j.
                Four lanes per column split the sum (j mod 4) and meet through shuffles. */
        const int col = tid >> 2, part = tid & 3;
        const unsigned gm4 = 0xFu << (tid & 28); /* the column's four lanes (trip counts differ per column) */
        if (part == 0) sTf[col * 72 + col] = 1.f, sT[col * LC + col] = ssm__dl_cv<E>(1.f);
        for (int i = 0; i < col; ++i)
            if (part == 0) sT[i * LC + col] = ssm__dl_cv<E>(0.f);
        __syncwarp(gm4);
        for (int i = col + 1; i < C; ++i) { /* t_j = 0 for j < col */
            float s = 0.f;
            for (int j = col + part; j < i; j += 4) s += sA[i * (C + 1) + j] * sTf[j * 72 + col];
            s += __shfl_xor_sync(gm4, s, 1);
            s += __shfl_xor_sync(gm4, s, 2);
            const float t = -s;
            if (part == 0) sTf[i * 72 + col] = t, sT[i * LC + col] = ssm__dl_cv<E>(t);
            __syncwarp(gm4);
        }
    }
    __syncthreads();
    if (store_t) ssm__dl_sttile<C, C>(ws.tm + ch * C * C, C, sT, LC);
    E *w = ws.w + ch * C * KP, *u = ws.u + ch * C * VP;
    ssm__dl_gemm2<C, KP, C, false, false>(sT, LC, sKb, LK, [&](int i, int j, float x0, float x1) { ssm__dl_st2(w + i * KP + j, x0, x1); });
    for (int v0 = 0; v0 < VP; v0 += 32)
        ssm__dl_gemm2<C, 32, C, false, false>(sT, LC, sV + v0, LV,
                                              [&](int i, int j, float x0, float x1) { ssm__dl_st2(u + i * VP + v0 + j, x0, x1); });
    if (store_t && a.dout) { /* the backward's packed dout */
        __syncthreads();
        const int64_t db = sq.b * a.dos[0] + t0 * a.dos[1] + h * a.dos[2];
        ssm__dl_stage(sV, LV, C, VP, a.dout, a.dt, db, a.dos[1], a.dos[3], len, a.V, [](int) { return 1.f; }, a.vec);
        __syncthreads();
        for (int c0 = 0; c0 < VP; c0 += 32) ssm__dl_sttile<C, 32>(ws.dop + ch * C * VP + c0, VP, sV + c0, LV);
    }
}
template <class E, int KP> static size_t dlv0_prep_smem(int VP) {
    const size_t extra = (dlv0_prep_alias<E, KP>() ? 0 : sizeof(float) * SSM__DL_C * 72) + sizeof(float) * 3 * 16 * 24;
    constexpr int C = SSM__DL_C;
    return sizeof(E) * ((size_t)3 * C * (KP + 8) + (size_t)C * (VP + 8) + (size_t)C * (C + 8)) +
           sizeof(float) * ((size_t)C * (C + 1) + 3 * C) + extra;
}
template <class E, int KP>
static void dlv0_prep_go(const ssm__dl_args &a, const ssm__dl_sizes &s, ssm__dl_ws<E> w, int store_t, int optin, cudaStream_t st) {
    size_t sm = dlv0_prep_smem<E, KP>(s.VP);
    if (!ssm__dl_smem_ok(dlv0_prep_kernel<E, KP>, sm, optin)) return;
    if (s.nc > 0) dlv0_prep_kernel<E, KP><<<dim3((unsigned)s.nc, a.H), SSM__DL_NT, sm, st>>>(a, w, s.VP, store_t);
}

/* ---- f64 oracle: token by token, all states kept for the backward ------------------------------- */
struct prob {
    int B, T, H, K, V, N, gated, has_h0;
    std::vector<int64_t> cu; /* empty: not varlen */
    std::vector<double> q, k, v, beta, g, h0; /* [B,T,H,*] contiguous, h0 [N,H,K,V] */
    double scale;
};
static void oracle_fwd(const prob &p, std::vector<double> &o, std::vector<double> &hT) {
    const int H = p.H, K = p.K, V = p.V;
    o.assign((size_t)p.B * p.T * H * V, 0.0);
    hT.assign((size_t)p.N * H * K * V, 0.0);
    std::vector<double> S(K * V), a(V);
    for (int n = 0; n < p.N; ++n)
        for (int h = 0; h < H; ++h) {
            int64_t b = p.cu.empty() ? n : 0, t0 = p.cu.empty() ? 0 : p.cu[n], len = p.cu.empty() ? p.T : p.cu[n + 1] - p.cu[n];
            for (int i = 0; i < K * V; ++i) S[i] = p.has_h0 ? p.h0[((size_t)n * H + h) * K * V + i] : 0.0;
            for (int64_t t = t0; t < t0 + len; ++t) {
                size_t r = ((size_t)b * p.T + t) * H + h;
                const double *q = &p.q[r * K], *k = &p.k[r * K], *v = &p.v[r * V];
                double be = p.beta[r], al = p.gated ? exp(p.g[r]) : 1.0;
                for (int j = 0; j < V; ++j) {
                    double s = 0;
                    for (int i = 0; i < K; ++i) s += k[i] * S[i * V + j];
                    a[j] = s;
                }
                for (int i = 0; i < K; ++i)
                    for (int j = 0; j < V; ++j) S[i * V + j] = al * (S[i * V + j] - be * k[i] * a[j]) + be * k[i] * v[j];
                for (int j = 0; j < V; ++j) {
                    double s = 0;
                    for (int i = 0; i < K; ++i) s += q[i] * S[i * V + j];
                    o[r * V + j] = p.scale * s;
                }
            }
            for (int i = 0; i < K * V; ++i) hT[((size_t)n * H + h) * K * V + i] = S[i];
        }
}

/* Reverse mode of the token loop: S' = al (S - be k (k^T S)) + be k v^T, o = scale S'^T q. */
struct grads {
    std::vector<double> dq, dk, dv, dbeta, dg, dh0;
};
static grads oracle_bwd(const prob &p, const std::vector<double> &dout, const std::vector<double> &dhT) {
    const int H = p.H, K = p.K, V = p.V;
    grads G;
    size_t nt = (size_t)p.B * p.T * H;
    G.dq.assign(nt * K, 0), G.dk.assign(nt * K, 0), G.dv.assign(nt * V, 0), G.dbeta.assign(nt, 0), G.dg.assign(nt, 0);
    G.dh0.assign((size_t)p.N * H * K * V, 0);
    for (int n = 0; n < p.N; ++n)
        for (int h = 0; h < H; ++h) {
            int64_t b = p.cu.empty() ? n : 0, t0 = p.cu.empty() ? 0 : p.cu[n], len = p.cu.empty() ? p.T : p.cu[n + 1] - p.cu[n];
            std::vector<double> Ss((size_t)(len + 1) * K * V), dS(K * V), a(V), bb(V);
            for (int i = 0; i < K * V; ++i) Ss[i] = p.has_h0 ? p.h0[((size_t)n * H + h) * K * V + i] : 0.0;
            for (int64_t t = 0; t < len; ++t) {
                size_t r = ((size_t)b * p.T + t0 + t) * H + h;
                const double *k = &p.k[r * K], *v = &p.v[r * V], *S = &Ss[t * K * V];
                double *S1 = &Ss[(t + 1) * K * V], be = p.beta[r], al = p.gated ? exp(p.g[r]) : 1.0;
                for (int j = 0; j < V; ++j) {
                    double s = 0;
                    for (int i = 0; i < K; ++i) s += k[i] * S[i * V + j];
                    a[j] = s;
                }
                for (int i = 0; i < K; ++i)
                    for (int j = 0; j < V; ++j) S1[i * V + j] = al * (S[i * V + j] - be * k[i] * a[j]) + be * k[i] * v[j];
            }
            for (int i = 0; i < K * V; ++i) dS[i] = dhT.empty() ? 0.0 : dhT[((size_t)n * H + h) * K * V + i];
            for (int64_t t = len - 1; t >= 0; --t) {
                size_t r = ((size_t)b * p.T + t0 + t) * H + h;
                const double *q = &p.q[r * K], *k = &p.k[r * K], *v = &p.v[r * V], *S = &Ss[t * K * V], *S1 = &Ss[(t + 1) * K * V];
                const double *dO = &dout[r * V];
                double be = p.beta[r], al = p.gated ? exp(p.g[r]) : 1.0;
                for (int i = 0; i < K; ++i) { /* o = scale S1^T q */
                    double s = 0;
                    for (int j = 0; j < V; ++j) s += S1[i * V + j] * dO[j], dS[i * V + j] += p.scale * q[i] * dO[j];
                    G.dq[r * K + i] = p.scale * s;
                }
                for (int j = 0; j < V; ++j) {
                    double s = 0, s2 = 0;
                    for (int i = 0; i < K; ++i) s += k[i] * S[i * V + j], s2 += k[i] * dS[i * V + j];
                    a[j] = s, bb[j] = s2;
                }
                double dal = 0, dbe = 0;
                for (int i = 0; i < K; ++i)
                    for (int j = 0; j < V; ++j) dal += dS[i * V + j] * (S[i * V + j] - be * k[i] * a[j]);
                for (int j = 0; j < V; ++j) dbe += -al * bb[j] * a[j] + bb[j] * v[j], G.dv[r * V + j] = be * bb[j];
                for (int i = 0; i < K; ++i) {
                    double s = 0;
                    for (int j = 0; j < V; ++j) s += -al * be * (dS[i * V + j] * a[j] + S[i * V + j] * bb[j]) + be * dS[i * V + j] * v[j];
                    G.dk[r * K + i] = s;
                }
                G.dbeta[r] = dbe, G.dg[r] = p.gated ? al * dal : 0.0;
                for (int i = 0; i < K; ++i)
                    for (int j = 0; j < V; ++j) dS[i * V + j] = al * (dS[i * V + j] - be * k[i] * bb[j]);
            }
            for (int i = 0; i < K * V; ++i) G.dh0[((size_t)n * H + h) * K * V + i] = dS[i];
        }
    return G;
}

/* ---- device buffers of a problem in a dtype ---------------------------------------------------- */
static uint16_t f2bf(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    u += 0x7fff + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}
static float bf2f(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float x;
    memcpy(&x, &u, 4);
    return x;
}
static uint16_t f2h(float x) {
    __half h = __float2half_rn(x);
    uint16_t u;
    memcpy(&u, &h, 2);
    return u;
}
static float h2f(uint16_t u) {
    __half_raw r;
    r.x = u;
    return __half2float(__half(r));
}
/* round to dt in place (the oracle sees exactly what the GPU sees) and upload */
static void *upload(std::vector<double> &x, int dt) {
    size_t n = x.size(), es = dt == 0 ? 4 : 2;
    std::vector<unsigned char> buf(n * es);
    for (size_t i = 0; i < n; ++i) {
        float f = (float)x[i];
        if (dt == 0) memcpy(&buf[i * 4], &f, 4), x[i] = f;
        else if (dt == 2) {
            uint16_t u = f2bf(f);
            memcpy(&buf[i * 2], &u, 2), x[i] = bf2f(u);
        } else {
            uint16_t u = f2h(f);
            memcpy(&buf[i * 2], &u, 2), x[i] = h2f(u);
        }
    }
    void *d;
    CK(cudaMalloc(&d, n * es + 16));
    CK(cudaMemcpy(d, buf.data(), n * es, cudaMemcpyHostToDevice));
    return d;
}
static std::vector<double> download(const void *d, size_t n, int dt) {
    size_t es = dt == 0 ? 4 : 2;
    std::vector<unsigned char> buf(n * es);
    CK(cudaMemcpy(buf.data(), d, n * es, cudaMemcpyDeviceToHost));
    std::vector<double> x(n);
    for (size_t i = 0; i < n; ++i) {
        if (dt == 0) {
            float f;
            memcpy(&f, &buf[i * 4], 4), x[i] = f;
        } else {
            uint16_t u;
            memcpy(&u, &buf[i * 2], 2), x[i] = dt == 2 ? bf2f(u) : h2f(u);
        }
    }
    return x;
}
static double relerr(const std::vector<double> &x, const std::vector<double> &r) {
    double num = 0, den = 0;
    for (size_t i = 0; i < x.size(); ++i) {
        double d = x[i] - r[i];
        if (!(d == d)) return INFINITY;
        num += d * d, den += r[i] * r[i];
    }
    return sqrt(num / (den > 0 ? den : 1));
}
static uint64_t rng = 88172645463325252ull;
static double urand() {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (rng >> 11) * (1.0 / 9007199254740992.0);
}
static prob make_prob(int B, int T, int H, int K, int V, int gated, int has_h0, std::vector<int64_t> cu, double gmin) {
    prob p;
    p.B = B, p.T = T, p.H = H, p.K = K, p.V = V, p.gated = gated, p.has_h0 = has_h0, p.cu = cu;
    p.N = cu.empty() ? B : (int)cu.size() - 1;
    p.scale = 1.0 / sqrt((double)K);
    size_t nt = (size_t)B * T * H;
    p.q.resize(nt * K), p.k.resize(nt * K), p.v.resize(nt * V), p.beta.resize(nt), p.g.resize(nt);
    for (size_t r = 0; r < nt; ++r) {
        double nk = 0;
        for (int i = 0; i < K; ++i) p.q[r * K + i] = 2 * urand() - 1, p.k[r * K + i] = 2 * urand() - 1, nk += p.k[r * K + i] * p.k[r * K + i];
        for (int i = 0; i < K; ++i) p.k[r * K + i] /= sqrt(nk); /* DeltaNet's L2-normalised keys */
        for (int j = 0; j < V; ++j) p.v[r * V + j] = 2 * urand() - 1;
        p.beta[r] = 0.05 + 0.95 * urand();
        p.g[r] = gmin * urand();
    }
    if (has_h0) {
        p.h0.resize((size_t)p.N * H * K * V);
        for (auto &x : p.h0) x = 2 * urand() - 1;
    }
    return p;
}

struct dev_prob {
    void *q, *k, *v, *beta, *g, *o, *dout, *dhT, *dq, *dk, *dv, *dbeta, *dg, *dh0;
    float *h0, *hT;
    int64_t *cu;
    ssm__dl_args a;
};
static dev_prob to_dev(prob &p, int dt) {
    dev_prob d;
    memset(&d, 0, sizeof d);
    d.q = upload(p.q, dt), d.k = upload(p.k, dt), d.v = upload(p.v, dt), d.beta = upload(p.beta, dt);
    d.g = p.gated ? upload(p.g, 0) : NULL;
    size_t no = (size_t)p.B * p.T * p.H * p.V, ns = (size_t)p.N * p.H * p.K * p.V;
    CK(cudaMalloc(&d.o, no * 4 + 16));
    CK(cudaMemset(d.o, 0xff, no * 4)); /* poison: NaN in every dtype */
    CK(cudaMalloc(&d.hT, ns * 4));
    CK(cudaMemset(d.hT, 0xff, ns * 4));
    if (p.has_h0) {
        std::vector<double> h = p.h0;
        d.h0 = (float *)upload(h, 0);
    }
    if (!p.cu.empty()) {
        CK(cudaMalloc(&d.cu, p.cu.size() * 8));
        CK(cudaMemcpy(d.cu, p.cu.data(), p.cu.size() * 8, cudaMemcpyHostToDevice));
    }
    ssm__dl_args &a = d.a;
    memset(&a, 0, sizeof a);
    a.q = d.q, a.k = d.k, a.v = d.v, a.beta = d.beta, a.g = d.g, a.o = d.o, a.h0 = d.h0, a.hT = d.hT, a.cu = d.cu;
    int64_t H = p.H, K = p.K, V = p.V;
    int64_t qs[4] = {p.T * H * K, H * K, K, 1}, vs[4] = {p.T * H * V, H * V, V, 1}, bs[3] = {p.T * H, H, 1};
    int64_t ss[4] = {H * K * V, K * V, V, 1};
    memcpy(a.qs, qs, 32), memcpy(a.ks, qs, 32), memcpy(a.vs, vs, 32), memcpy(a.os, vs, 32);
    memcpy(a.bs, bs, 24), memcpy(a.gs, bs, 24), memcpy(a.h0s, ss, 32), memcpy(a.hTs, ss, 32);
    a.N = p.N, a.T = p.T, a.H = p.H, a.K = p.K, a.V = p.V, a.dt = dt, a.bdt = dt, a.gdt = 0, a.sdt = 0;
    a.variant = g_variant;
    a.svec = p.V % 4 == 0; /* f32 contiguous states here */
    { /* 16-byte rows: every row stride a multiple of 16 bytes (allocations are 256-aligned) */
        int ve = dt == 0 ? 4 : 8;
        a.vec = (p.K % ve == 0) && (p.V % ve == 0);
    }
    a.scale = (float)p.scale;
    memcpy(a.dos, vs, 32), memcpy(a.dqs, qs, 32), memcpy(a.dks, qs, 32), memcpy(a.dvs, vs, 32);
    memcpy(a.dbs, bs, 24), memcpy(a.dgs, bs, 24), memcpy(a.dhTs, ss, 32), memcpy(a.dh0s, ss, 32);
    return d;
}
static void free_dev(dev_prob &d) {
    cudaFree(d.dout), cudaFree(d.dhT), cudaFree(d.dq), cudaFree(d.dk), cudaFree(d.dv), cudaFree(d.dbeta);
    cudaFree(d.dg), cudaFree(d.dh0);
    cudaFree(d.q), cudaFree(d.k), cudaFree(d.v), cudaFree(d.beta), cudaFree(d.g), cudaFree(d.o);
    cudaFree(d.h0), cudaFree(d.hT), cudaFree(d.cu);
}

static int nfail = 0, npass = 0;
static const char *dtn[3] = {"f32", "f16", "bf16"};
static void check_fwd(int B, int T, int H, int K, int V, int gated, int has_h0, std::vector<int64_t> cu, int dt,
                      double gmin = -0.5) {
    prob p = make_prob(B, T, H, K, V, gated, has_h0, cu, gmin);
    dev_prob d = to_dev(p, dt);
    std::vector<double> o, hT;
    oracle_fwd(p, o, hT);
    double tol = dt == 0 ? 2e-5 : dt == 1 ? 4e-3 : 2.5e-2;
    for (int method = 0; method < 2; ++method) {
        CK(cudaMemset(d.o, 0xff, o.size() * 4));
        CK(cudaMemset(d.hT, 0xff, hT.size() * 4));
        int rc;
        if (method == 0) {
            dl_sizes s = dl_sizes_of(d.a, dt == 0 ? 4 : 2, dl_pick_vb(d.a), 0);
            char *ws;
            CK(cudaMalloc(&ws, s.bytes));
            rc = dl_forward_chunked(d.a, s, ws, 0);
            CK(cudaGetLastError());
            CK(cudaDeviceSynchronize());
            cudaFree(ws);
        } else {
            rc = dl_forward_recurrent(d.a, 0);
            CK(cudaGetLastError());
            CK(cudaDeviceSynchronize());
        }
        double eo = INFINITY, eh = INFINITY;
        if (!rc) {
            eo = relerr(download(d.o, o.size(), dt), o);
            eh = relerr(download(d.hT, hT.size(), 0), hT);
        }
        /* f32 chunked: tensor-core-free FMAs, but the f32 recurrent is the tight one */
        double t = (dt == 0 && method == 0) ? 1e-4 : tol;
        bool ok = eo < t && eh < t;
        ok ? ++npass : ++nfail;
        printf("%s fwd %-9s %-4s B%d T%d H%d K%d V%d gated%d h0%d varlen%d: o %.2e hT %.2e%s\n", ok ? "ok  " : "FAIL",
               method ? "recurrent" : "chunked", dtn[dt], B, T, H, K, V, gated, has_h0, (int)!cu.empty(), eo, eh,
               rc ? " (unsupported)" : "");
    }
    free_dev(d);
}

static void check_bwd(int B, int T, int H, int K, int V, int gated, int has_h0, std::vector<int64_t> cu, int dt,
                      double gmin = -0.5, int with_dhT = 1) {
    prob p = make_prob(B, T, H, K, V, gated, has_h0, cu, gmin);
    dev_prob d = to_dev(p, dt);
    size_t nt = (size_t)p.B * p.T * p.H, ns = (size_t)p.N * p.H * p.K * p.V;
    std::vector<double> dout(nt * V), dhT;
    for (auto &x : dout) x = 2 * urand() - 1;
    if (with_dhT) {
        dhT.resize(ns);
        for (auto &x : dhT) x = 2 * urand() - 1;
    }
    d.dout = upload(dout, dt);
    if (with_dhT) d.dhT = upload(dhT, 0);
    grads G = oracle_bwd(p, dout, dhT);
    size_t es = dt == 0 ? 4 : 2;
    CK(cudaMalloc(&d.dq, nt * K * es));
    CK(cudaMalloc(&d.dk, nt * K * es));
    CK(cudaMalloc(&d.dv, nt * V * es));
    CK(cudaMalloc(&d.dbeta, nt * es));
    CK(cudaMalloc(&d.dg, nt * 4));
    CK(cudaMalloc(&d.dh0, ns * 4));
    ssm__dl_args a = d.a;
    a.dout = d.dout, a.dhT = d.dhT, a.dq = d.dq, a.dk = d.dk, a.dv = d.dv, a.dbeta = d.dbeta;
    a.dg = gated ? d.dg : NULL, a.dh0 = d.dh0;
    dl_sizes s = dl_sizes_of(a, es, dl_pick_vb(a), 1);
    char *ws;
    CK(cudaMalloc(&ws, s.bytes));
    std::vector<double> r1[6];
    int rc = 0;
    for (int rep = 0; rep < 2; ++rep) {
        CK(cudaMemset(d.dq, 0xff, nt * K * es));
        CK(cudaMemset(d.dk, 0xff, nt * K * es));
        CK(cudaMemset(d.dv, 0xff, nt * V * es));
        CK(cudaMemset(d.dbeta, 0xff, nt * es));
        CK(cudaMemset(d.dg, 0xff, nt * 4));
        CK(cudaMemset(d.dh0, 0xff, ns * 4));
        CK(cudaMemset(ws, 0x7f, s.bytes)); /* garbage workspace: nothing may depend on it */
        rc = dl_backward(a, s, ws, 0);
        CK(cudaGetLastError());
        CK(cudaDeviceSynchronize());
        if (rc) break;
        std::vector<double> r[6] = {download(d.dq, nt * K, dt), download(d.dk, nt * K, dt), download(d.dv, nt * V, dt),
                                    download(d.dbeta, nt, dt), download(d.dg, nt, 0), download(d.dh0, ns, 0)};
        if (rep == 0)
            for (int i = 0; i < 6; ++i) r1[i] = r[i];
        else { /* deterministic: bitwise equal */
            bool same = true;
            for (int i = 0; i < 6; ++i)
                for (size_t j = 0; j < r[i].size(); ++j)
                    if (!(r[i][j] == r1[i][j]) && !(i == 4 && !gated)) same = false;
            same ? ++npass : ++nfail;
            if (!same) printf("FAIL bwd not deterministic\n");
        }
    }
    double tol = dt == 0 ? 1e-4 : dt == 1 ? 1e-2 : 4e-2;
    const char *nm[6] = {"dq", "dk", "dv", "dbeta", "dg", "dh0"};
    std::vector<double> *ref[6] = {&G.dq, &G.dk, &G.dv, &G.dbeta, &G.dg, &G.dh0};
    bool ok = !rc;
    char buf[512];
    int o = 0;
    for (int i = 0; i < 6 && !rc; ++i) {
        if (i == 4 && !gated) continue;
        double e = relerr(r1[i], *ref[i]);
        if (!(e < tol)) ok = false;
        o += snprintf(buf + o, sizeof buf - o, " %s %.1e", nm[i], e);
    }
    if (rc) snprintf(buf, sizeof buf, " (unsupported)");
    ok ? ++npass : ++nfail;
    printf("%s bwd chunked   %-4s B%d T%d H%d K%d V%d gated%d h0%d varlen%d:%s\n", ok ? "ok  " : "FAIL", dtn[dt], B, T,
           H, K, V, gated, has_h0, (int)!cu.empty(), buf);
    cudaFree(ws);
    free_dev(d);
}

static void run_checks() {
    int dts[3] = {2, 1, 0};
    for (int dt : dts) {
        for (int gated = 0; gated < 2; ++gated) {
            check_fwd(2, 200, 3, 64, 64, gated, 1, {}, dt);
            check_fwd(1, 130, 2, 128, 128, gated, 0, {}, dt);
            check_fwd(2, 77, 2, 32, 32, gated, 1, {}, dt);
        }
        check_fwd(1, 150, 2, 256, 256, 1, 1, {}, dt);
        check_fwd(1, 300, 2, 64, 64, 1, 1, {0, 17, 100, 164, 300}, dt);
        check_fwd(1, 96, 2, 48, 80, 1, 1, {}, dt);
        check_fwd(1, 70, 1, 16, 200, 0, 1, {}, dt);
        check_fwd(1, 129, 2, 100, 17, 1, 0, {}, dt);
        check_fwd(1, 128, 2, 64, 64, 1, 1, {}, dt, -20.0); /* strong gates stay finite */
        check_fwd(5, 1, 3, 128, 128, 1, 1, {}, dt); /* decode steps */
        check_fwd(3, 1, 2, 40, 100, 0, 1, {}, dt);
        check_fwd(2, 1, 2, 256, 64, 1, 1, {}, dt);
        for (int gated = 0; gated < 2; ++gated) {
            check_bwd(2, 150, 2, 64, 64, gated, 1, {}, dt);
            check_bwd(1, 130, 2, 32, 32, gated, 0, {}, dt);
            check_bwd(1, 100, 2, 128, 128, gated, 1, {}, dt);
        }
        check_bwd(1, 70, 1, 256, 256, 1, 1, {}, dt);
        check_bwd(1, 300, 2, 64, 64, 1, 1, {0, 17, 100, 164, 300}, dt);
        check_bwd(1, 96, 2, 48, 80, 1, 1, {}, dt, -0.5, 0);
        check_bwd(1, 129, 2, 100, 17, 1, 0, {}, dt);
        if (dt != 1) check_bwd(1, 128, 2, 64, 64, 1, 1, {}, dt, -20.0); /* f16 flushes e^-20 products to 0 */
    }
}

/* ---- timing --------------------------------------------------------------------------------------- */
static int g_prof = 0; /* one call per measurement, for ncu */
template <typename F> static double time_ms(F f, int reps = 20) {
    if (g_prof) {
        f();
        CK(cudaDeviceSynchronize());
        return 1.0;
    }
    cudaEvent_t a, b;
    std::vector<float> v;
    cudaEventCreate(&a), cudaEventCreate(&b);
    f(), f();
    CK(cudaDeviceSynchronize());
    for (int i = 0; i < reps; ++i) {
        cudaEventRecord(a);
        f();
        cudaEventRecord(b);
        cudaEventSynchronize(b);
        float ms;
        cudaEventElapsedTime(&ms, a, b);
        v.push_back(ms);
    }
    std::sort(v.begin(), v.end());
    CK(cudaGetLastError());
    return v[v.size() / 2];
}
__global__ void fill_k(void *p, int dt, int64_t n, float lo, float hi, unsigned seed) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        unsigned x = (unsigned)(i * 2654435761u) ^ seed;
        x ^= x >> 13, x *= 0x5bd1e995u, x ^= x >> 15;
        float v = lo + (hi - lo) * ((x & 0xFFFFFF) / 16777216.f);
        ssm__dl_st(p, dt, i, v);
    }
}
static void *drand(int dt, int64_t n, float lo, float hi, unsigned seed) {
    void *p;
    CK(cudaMalloc(&p, n * (dt == 0 ? 4 : 2) + 16));
    fill_k<<<4096, 256>>>(p, dt, n, lo, hi, seed);
    CK(cudaGetLastError());
    return p;
}
static double copy_bw() {
    size_t nb = (size_t)1 << 30;
    void *a, *b;
    CK(cudaMalloc(&a, nb));
    CK(cudaMalloc(&b, nb));
    cudaMemset(a, 1, nb);
    double ms = time_ms([&] { cudaMemcpyAsync(b, a, nb, cudaMemcpyDeviceToDevice); }, 10);
    cudaFree(a), cudaFree(b);
    return 2.0 * nb / ms; /* bytes per ms */
}
static double gemm_rate() {
    int n = 8192;
    void *a = drand(2, (int64_t)n * n, -1, 1, 1), *b = drand(2, (int64_t)n * n, -1, 1, 2), *c = drand(2, (int64_t)n * n, -1, 1, 3);
    cublasHandle_t hd;
    cublasCreate(&hd);
    float al = 1, be = 0;
    double ms = time_ms([&] {
        cublasGemmEx(hd, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &al, a, CUDA_R_16BF, n, b, CUDA_R_16BF, n, &be, c,
                     CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    }, 10);
    cublasDestroy(hd);
    cudaFree(a), cudaFree(b), cudaFree(c);
    return 2.0 * n * n * (double)n / ms; /* FLOP per ms */
}

/* Where the time goes: each launch alone (after a full backward filled the workspace). Prep: the
   library's against the earlier kernel above (variant 0: 3xTF32 block products, 2: scalar ones). */
template <int KP>
static void split(const ssm__dl_args &a, const ssm__dl_args &ab, const dl_sizes &s, char *ws, double ms, double msb) {
    typedef __nv_bfloat16 E;
    ssm__dl_ws<E> w = ssm__dl_ws_of<E>(s, ws, NULL);
    /* prep: the library's; the earlier kernel with its solves (tc, scalar-block); both with store_t (backward) */
    double tp[3], tpb[2];
    const int vars[2] = {0, 2};
    tp[0] = time_ms([&] { ssm__dl_prep_go<E, KP>(a, s, w, 0, g_optin, 0); });
    for (int i = 0; i < 2; ++i) {
        ssm__dl_args av = a;
        av.variant = vars[i];
        tp[1 + i] = time_ms([&] { dlv0_prep_go<E, KP>(av, s, w, 0, g_optin, 0); });
    }
    /* the library's kernel chunks-fastest (variant bit 6), and (chunks-fastest) budgeted for 5 / 6 CTAs per SM */
    double th = -1, t5 = -1, t6 = -1;
    {
        ssm__dl_args av = a;
        av.variant = 64;
        th = time_ms([&] { ssm__dl_prep_go<E, KP>(av, s, w, 0, g_optin, 0); });
        const size_t sm = ssm__dl_prep_smem<E, KP>(s.VP);
        const dim3 gr((unsigned)s.nc, a.H);
        if (ssm__dl_smem_ok(ssm__dl_prep_kernel<E, KP, 5>, sm, g_optin))
            t5 = time_ms([&] { ssm__dl_prep_kernel<E, KP, 5><<<gr, SSM__DL_NT, sm>>>(a, w, s.VP, 0); });
        if (ssm__dl_smem_ok(ssm__dl_prep_kernel<E, KP, 6>, sm, g_optin))
            t6 = time_ms([&] { ssm__dl_prep_kernel<E, KP, 6><<<gr, SSM__DL_NT, sm>>>(a, w, s.VP, 0); });
        int o5 = 0, o6 = 0;
        CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&o5, ssm__dl_prep_kernel<E, KP, 5>, SSM__DL_NT, sm));
        CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&o6, ssm__dl_prep_kernel<E, KP, 6>, SSM__DL_NT, sm));
        printf("# split D%d: prep chunks-fastest %.4f ms; min-blocks 5: %.4f ms (%d CTAs/SM), 6: %.4f ms (%d CTAs/SM)\n", KP, th,
               t5, o5, t6, o6);
    }
    tpb[0] = time_ms([&] { ssm__dl_prep_go<E, KP>(ab, s, w, 1, g_optin, 0); });
    tpb[1] = time_ms([&] { dlv0_prep_go<E, KP>(ab, s, w, 1, g_optin, 0); });
    int pocc[2] = {0, 0};
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&pocc[0], ssm__dl_prep_kernel<E, KP>, SSM__DL_NT, ssm__dl_prep_smem<E, KP>(s.VP)));
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&pocc[1], dlv0_prep_kernel<E, KP>, SSM__DL_NT, dlv0_prep_smem<E, KP>(s.VP)));
    printf("# split D%d: prep fwd %.4f ms (%zu B smem, %d CTAs/SM) vs earlier %.4f (%zu B, %d CTAs/SM; scalar-block %.4f); "
           "prep bwd (T, dout) %.4f vs earlier %.4f ms\n", KP, tp[0], ssm__dl_prep_smem<E, KP>(s.VP), pocc[0], tp[1],
           dlv0_prep_smem<E, KP>(s.VP), pocc[1], tp[2], tpb[0], tpb[1]);
    /* the sequential passes: V blocks of 32 / 64 columns, double / single buffered (variant bit 2) */
    double tf[2][2], tbs[2][2];
    for (int vi = 0; vi < 2; ++vi)
        for (int nb = 0; nb < 2; ++nb) {
            ssm__dl_args av = a, abv = ab;
            av.variant = abv.variant = nb ? 4 : 8; /* forced single / double buffering */
            dl_sizes sv = dl_sizes_of(a, 2, vi ? 64 : 32, 1);
            if (sv.VP != s.VP) { tf[vi][nb] = tbs[vi][nb] = -1; continue; }
            tf[vi][nb] = time_ms([&] {
                if (vi) ssm__dl_fwd_go<E, KP, 64>(av, sv, w, NULL, NULL, g_optin, 0);
                else ssm__dl_fwd_go<E, KP, 32>(av, sv, w, NULL, NULL, g_optin, 0);
            });
            tbs[vi][nb] = time_ms([&] {
                if (vi) ssm__dl_bwd_seq_go<E, KP, 64>(abv, sv, w, g_optin, 0);
                else ssm__dl_bwd_seq_go<E, KP, 32>(abv, sv, w, g_optin, 0);
            });
        }
    printf("# split D%d: state pass vb32/nb2 %.4f vb32/nb1 %.4f vb64/nb2 %.4f vb64/nb1 %.4f ms; reverse pass %.4f %.4f %.4f %.4f ms\n",
           KP, tf[0][0], tf[0][1], tf[1][0], tf[1][1], tbs[0][0], tbs[0][1], tbs[1][0], tbs[1][1]);
    /* the backward's state-pass replay at this VB: without the output (library) and as the full forward (bit 5) */
    double trp[4];
    for (int vi = 0; vi < 4; ++vi) { /* and without output at the other VB (where V pads the same), single-buffered */
        ssm__dl_args abv = ab;
        abv.o = NULL, abv.hT = NULL, abv.variant = vi == 1 ? 32 : vi == 3 ? 4 : 0;
        dl_sizes sv = vi == 2 ? dl_sizes_of(a, 2, s.VB == 64 ? 32 : 64, 1) : s;
        trp[vi] = sv.VP != s.VP ? -1.0 : time_ms([&] { ssm__dl_replay_go<E, KP>(abv, sv, w, g_optin, 0); });
    }
    printf("# split D%d vb%d: backward replay of the state pass %.4f ms (no output; as the full forward %.4f ms; "
           "no output at vb%d %.4f ms; no output single-buffered %.4f ms)\n", KP, s.VB, trp[0], trp[1], s.VB == 64 ? 32 : 64,
           trp[2], trp[3]);
    /* the chunk-gradient kernel: phase B over all of K at once (the library's pick at K = 128) and in
       64-column key blocks (variant bit 4) */
    size_t smc = ssm__dl_bwd_chunk_smem<E, KP>();
    double tbc[2];
    for (int vi = 0; vi < 2; ++vi) {
        ssm__dl_args abv = ab;
        abv.variant = vi ? 16 : 0;
        tbc[vi] = time_ms([&] { ssm__dl_bwd_chunk_go<E, KP>(abv, s, w, g_optin, 0); });
    }
    constexpr int KW = ssm__dl_bwc_kpc<E, KP>();
    int occ = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, ssm__dl_bwd_chunk_kernel<E, KP, KW>, SSM__DL_NT, smc));
    printf("# split D%d vb%d: prep %.4f ms (earlier %.4f), bwd chunk grads %.4f ms (phase B key block %d; 64-column "
           "blocks %.4f ms; %zu B smem, %d CTAs/SM); full fwd %.4f ms, fwd+bwd %.4f ms\n",
           KP, s.VB, tp[0], tp[1], tbc[0], KW, tbc[1], smc, occ, ms, msb);
}

/* The sequential passes at few (sequence, head) pairs, B1 T32768 H32 D128 bf16 (DELTA_SEQ_SHAPE=
   "B,T,H,D" for another): each pass alone and the whole calls timed (DELTA_SEQ_ROUNDS rounds),
   and a hash of o, dq, dk, dv, dbeta, dg per (gated, saved) case, so that two builds of this file
   (one on an earlier ssm_cuda.h) run side by side compare byte for byte and in time. ./delta seq
   Kept results: the 16-warp passes lost to 8 warps once the stores went by column pairs
   (bench/results/cuda_delta_seqpairs_5f637d3.log, cuda_delta_seq_nw16.patch). */
static unsigned long long dev_hash(const void *x, size_t n, unsigned long long h = 1469598103934665603ull) {
    std::vector<unsigned long long> a((n + 7) / 8, 0ull); /* FNV-1a over 8-byte words */
    CK(cudaMemcpy(a.data(), x, n, cudaMemcpyDeviceToHost));
    for (unsigned long long v : a) h = (h ^ v) * 1099511628211ull;
    return h;
}
static void seq_ab() {
    typedef __nv_bfloat16 E;
    int B = 1, T = 32768, H = 32, D = 128;
    if (getenv("DELTA_SEQ_SHAPE")) sscanf(getenv("DELTA_SEQ_SHAPE"), "%d,%d,%d,%d", &B, &T, &H, &D);
    const int rounds = g_prof ? 1 : getenv("DELTA_SEQ_ROUNDS") ? atoi(getenv("DELTA_SEQ_ROUNDS")) : 3;
    if (D <= 64 || D > 128) { printf("# seq: D in 65..128 only\n"); return; }
    const int64_t ntok = (int64_t)B * T * H;
    void *q = drand(2, ntok * D, -1, 1, 11), *k = drand(2, ntok * D, -sqrtf(3.f / D), sqrtf(3.f / D), 12);
    void *v = drand(2, ntok * D, -1, 1, 13), *be = drand(2, ntok, 0.05f, 1.f, 14), *g = drand(0, ntok, -0.5f, 0.f, 15);
    void *dout = drand(2, ntok * D, -1, 1, 16);
    void *o[2], *gr[2][5];
    for (int i = 0; i < 2; ++i) {
        CK(cudaMalloc(&o[i], ntok * D * 2));
        for (int j = 0; j < 5; ++j) CK(cudaMalloc(&gr[i][j], j < 3 ? ntok * D * 2 : j == 3 ? ntok * 2 : ntok * 4));
    }
    ssm__dl_args a;
    memset(&a, 0, sizeof a);
    int64_t qs[4] = {(int64_t)T * H * D, (int64_t)H * D, D, 1}, bs[3] = {(int64_t)T * H, H, 1};
    memcpy(a.qs, qs, 32), memcpy(a.ks, qs, 32), memcpy(a.vs, qs, 32), memcpy(a.os, qs, 32);
    memcpy(a.bs, bs, 24), memcpy(a.gs, bs, 24);
    memcpy(a.dos, qs, 32), memcpy(a.dqs, qs, 32), memcpy(a.dks, qs, 32), memcpy(a.dvs, qs, 32);
    memcpy(a.dbs, bs, 24), memcpy(a.dgs, bs, 24);
    a.q = q, a.k = k, a.v = v, a.beta = be, a.N = B, a.T = T, a.H = H, a.K = D, a.V = D;
    a.dt = 2, a.bdt = 2, a.gdt = 0, a.scale = 1.f / sqrtf((float)D), a.vec = 1;
    const int vb = dl_pick_vb(a);
    dl_sizes s = dl_sizes_of(a, 2, vb, 1);
    char *ws, *sv;
    CK(cudaMalloc(&ws, s.bytes));
    CK(cudaMalloc(&sv, s.saved));
    printf("# seq B%d T%d H%d D%d vb%d: %d CTAs per pass, workspace %zu B, saved %zu B\n", B, T, H, D, vb,
           B * H * (s.VP / vb), s.bytes, s.saved);
    {
        cudaFuncAttributes f[3];
        CK(cudaFuncGetAttributes(&f[0], ssm__dl_fwd_kernel<E, 128, 32, 2, true>));
        CK(cudaFuncGetAttributes(&f[1], ssm__dl_fwd_kernel<E, 128, 32, 2, false>));
        CK(cudaFuncGetAttributes(&f[2], ssm__dl_bwd_seq_kernel<E, 128, 32, 2>));
        printf("# seq registers / local bytes: state pass %d/%zu, replay %d/%zu, reverse %d/%zu\n", f[0].numRegs,
               f[0].localSizeBytes, f[1].numRegs, f[1].localSizeBytes, f[2].numRegs, f[2].localSizeBytes);
    }
    auto args = [&](int var, int gated, int i, int bwd) {
        ssm__dl_args x = a;
        x.variant = var, x.g = gated ? g : NULL, x.o = o[i];
        if (bwd) {
            x.dout = dout, x.dq = gr[i][0], x.dk = gr[i][1], x.dv = gr[i][2], x.dbeta = gr[i][3], x.dg = gated ? gr[i][4] : NULL;
            x.pairs = ssm__dl_pairs_ok(x, 2);
        }
        return x;
    };
    const int NV = 1, vars[NV] = {0};
    /* byte-for-byte: forward outputs and the gradients, without and with saved */
    for (int gated = 0; gated < 2 && !g_prof; ++gated)
        for (int saved = 0; saved < 2; ++saved) {
            for (int j = 0; j < 5; ++j) CK(cudaMemset(gr[0][j], 0, j < 3 ? ntok * D * 2 : j == 3 ? ntok * 2 : ntok * 4));
            ssm__dl_args x = args(0, gated, 0, 0), xb = args(0, gated, 0, 1);
            if (ssm__dl_forward_chunked(x, s, ws, saved ? sv : NULL, g_optin, 0) ||
                ssm__dl_backward_chunked(xb, s, ws, saved ? sv : NULL, g_optin, 0))
                printf("FAIL launch\n");
            CK(cudaDeviceSynchronize());
            unsigned long long hs = dev_hash(o[0], ntok * D * 2);
            for (int j = 0; j < 5; ++j) hs = dev_hash(gr[0][j], j < 3 ? ntok * D * 2 : j == 3 ? ntok * 2 : ntok * 4, hs);
            printf("# seq hash of o, dq, dk, dv, dbeta, dg: gated %d saved %d %016llx\n", gated, saved, hs);
        }
    /* the passes alone, on the workspace the last backward filled */
    ssm__dl_ws<E> w = ssm__dl_ws_of<E>(s, ws, NULL);
    {
        ssm__dl_args x0 = args(0, 0, 0, 0), xb0 = args(0, 0, 0, 1);
        ssm__dl_forward_chunked(x0, s, ws, NULL, g_optin, 0);
        ssm__dl_backward_chunked(xb0, s, ws, NULL, g_optin, 0);
        CK(cudaDeviceSynchronize());
    }
    const char *names[8] = {"state pass", "state pass +stores", "replay", "reverse pass", "fwd", "fwd+bwd saved",
                            "gated fwd", "gated fwd+bwd saved"};
    std::vector<double> t[NV][8];
    for (int r = 0; r < rounds; ++r)
        for (int ii = 0; ii < NV; ++ii) {
            const int i = r % 2 ? NV - 1 - ii : ii; /* alternate the order */
            ssm__dl_args x = args(vars[i], 0, 0, 0), xb = args(vars[i], 0, 0, 1), xg = args(vars[i], 1, 0, 0),
                         xgb = args(vars[i], 1, 0, 1);
            ssm__dl_args xr = xb;
            xr.o = NULL, xr.hT = NULL;
            t[i][0].push_back(time_ms([&] { ssm__dl_fwd_go<E, 128, 32>(x, s, w, NULL, NULL, g_optin, 0); }));
            t[i][1].push_back(time_ms([&] { ssm__dl_fwd_go<E, 128, 32>(x, s, w, w.vn, w.s0, g_optin, 0); }));
            t[i][2].push_back(time_ms([&] { ssm__dl_replay_go<E, 128>(xr, s, w, g_optin, 0); }));
            t[i][3].push_back(time_ms([&] { ssm__dl_bwd_seq_go<E, 128, 32>(xr, s, w, g_optin, 0); }));
            if (g_prof) { /* ncu: the four passes of each variant only */
                for (int m = 4; m < 8; ++m) t[i][m].push_back(0);
                continue;
            }
            t[i][4].push_back(time_ms([&] { ssm__dl_forward_chunked(x, s, ws, NULL, g_optin, 0); }));
            t[i][5].push_back(time_ms([&] {
                ssm__dl_forward_chunked(x, s, ws, sv, g_optin, 0);
                ssm__dl_backward_chunked(xb, s, ws, sv, g_optin, 0);
            }));
            t[i][6].push_back(time_ms([&] { ssm__dl_forward_chunked(xg, s, ws, NULL, g_optin, 0); }));
            t[i][7].push_back(time_ms([&] {
                ssm__dl_forward_chunked(xg, s, ws, sv, g_optin, 0);
                ssm__dl_backward_chunked(xgb, s, ws, sv, g_optin, 0);
            }));
        }
    for (int m = 0; m < 8; ++m) {
        printf("# seq %-20s", names[m]);
        for (int i = 0; i < NV; ++i) {
            std::vector<double> u = t[i][m];
            std::sort(u.begin(), u.end());
            printf("  v%-3d median %.4f ms (", vars[i], u[u.size() / 2]);
            for (double x : t[i][m]) printf(" %.4f", x);
            printf(" )");
        }
        printf("\n");
    }
    for (int i = 0; i < 2; ++i) {
        cudaFree(o[i]);
        for (int j = 0; j < 5; ++j) cudaFree(gr[i][j]);
    }
    cudaFree(q), cudaFree(k), cudaFree(v), cudaFree(be), cudaFree(g), cudaFree(dout), cudaFree(ws), cudaFree(sv);
}

static const char *COMMIT = "unknown";
static void bench(int argc, char **argv) {
    const char *cm = getenv("SSM_COMMIT");
    if (cm) COMMIT = cm;
    cudaDeviceProp pr;
    CK(cudaGetDeviceProperties(&pr, 0));
    g_prof = argc > 3 && !strcmp(argv[3], "one");
    double bw = g_prof ? 4e9 : copy_bw(), fr = g_prof ? 8e11 : gemm_rate();
    printf("# device %s, copy %.0f GB/s, bf16 gemm %.0f TFLOP/s\n", pr.name, bw / 1e6, fr / 1e9);
    struct shp {
        int B, T, H, D, seqs;
    } shapes[] = {{8, 4096, 16, 64, 0}, {4, 8192, 16, 128, 0}, {1, 32768, 32, 128, 0}, {1, 32768, 32, 128, 8},
                  {32, 2048, 8, 32, 0}};
    int vbforce = argc > 2 ? atoi(argv[2]) : 0;
    char date[32];
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%d", gmtime(&now));
    const char *pick = getenv("DELTA_SHAPES"); /* e.g. "0,1,4": a subset of the shapes (indices) */
    for (int si = 0; si < 5; ++si) {
        if (pick && !strchr(pick, '0' + si)) continue;
        const shp sh = shapes[si];
        const int dt = 2;
        int64_t ntok = (int64_t)sh.B * sh.T * sh.H;
        void *q = drand(dt, ntok * sh.D, -1, 1, 11), *k = drand(dt, ntok * sh.D, -sqrtf(3.f / sh.D), sqrtf(3.f / sh.D), 12);
        void *v = drand(dt, ntok * sh.D, -1, 1, 13), *be = drand(dt, ntok, 0.05f, 1.f, 14), *g = drand(0, ntok, -0.5f, 0.f, 15);
        void *o;
        CK(cudaMalloc(&o, ntok * sh.D * 2));
        int64_t *cu = NULL;
        int N = sh.B;
        if (sh.seqs) { /* 8 sequences of uneven lengths summing to T */
            std::vector<int64_t> c(sh.seqs + 1);
            for (int i = 0; i <= sh.seqs; ++i) c[i] = (int64_t)sh.T * i / sh.seqs + (i > 0 && i < sh.seqs ? (i % 2 ? 1000 : -1000) : 0);
            CK(cudaMalloc(&cu, c.size() * 8));
            CK(cudaMemcpy(cu, c.data(), c.size() * 8, cudaMemcpyHostToDevice));
            N = sh.seqs;
        }
        ssm__dl_args a;
        memset(&a, 0, sizeof a);
        int64_t D = sh.D, H = sh.H;
        int64_t qs[4] = {sh.T * H * D, H * D, D, 1}, bs[3] = {sh.T * H, H, 1};
        memcpy(a.qs, qs, 32), memcpy(a.ks, qs, 32), memcpy(a.vs, qs, 32), memcpy(a.os, qs, 32);
        memcpy(a.bs, bs, 24), memcpy(a.gs, bs, 24);
        a.q = q, a.k = k, a.v = v, a.beta = be, a.o = o, a.cu = cu;
        a.N = N, a.T = sh.T, a.H = sh.H, a.K = sh.D, a.V = sh.D, a.dt = 2, a.bdt = 2, a.gdt = 0, a.scale = 1.f / sqrtf((float)sh.D);
        a.vec = 1, a.variant = g_variant;
        int vb = vbforce ? vbforce : dl_pick_vb(a);
        dl_sizes s = dl_sizes_of(a, 2, vb, 1);
        char *ws;
        CK(cudaMalloc(&ws, s.bytes));
        double bytes = 4.0 * ntok * D * 2;
        const double C = 64;
        double nch = (double)ntok / C; /* chunk-heads */
        double fl_fwd = nch * (6 * C * C * D + 3 * C * C * D + 6 * C * D * D);
        void *dout = drand(dt, ntok * D, -1, 1, 16), *dq, *dk, *dv, *db, *dgg;
        CK(cudaMalloc(&dq, ntok * D * 2));
        CK(cudaMalloc(&dk, ntok * D * 2));
        CK(cudaMalloc(&dv, ntok * D * 2));
        CK(cudaMalloc(&db, ntok * 2));
        CK(cudaMalloc(&dgg, ntok * 4));
        memcpy(a.dos, qs, 32), memcpy(a.dqs, qs, 32), memcpy(a.dks, qs, 32), memcpy(a.dvs, qs, 32);
        memcpy(a.dbs, bs, 24), memcpy(a.dgs, bs, 24);
        /* backward FLOPs: replayed prep and state pass, the reverse pass, the chunk gradients */
        double fl_bwd = fl_fwd + nch * (2 * C * C * D + 6 * C * D * D) + nch * (14 * C * C * D + 4 * C * C * C + 6 * C * D * D);
        for (int gated = 0; gated < 2; ++gated) {
            a.g = gated ? g : NULL;
            a.dout = NULL, a.dq = a.dk = a.dv = a.dbeta = a.dg = NULL;
            double ms = time_ms([&] { dl_forward_chunked(a, s, ws, 0); });
            double floor_ms = std::max(bytes / bw, fl_fwd / fr);
            ssm__dl_args ab = a;
            ab.dout = dout, ab.dq = dq, ab.dk = dk, ab.dv = dv, ab.dbeta = db, ab.dg = gated ? dgg : NULL;
            double msb = time_ms([&] { dl_forward_chunked(a, s, ws, 0); dl_backward(ab, s, ws, 0); });
            /* fwd+bwd bytes: q,k,v,beta,o once forward; q,k,v,dout in, dq,dk,dv out backward */
            double floor_b = std::max((bytes + 7.0 * ntok * D * 2) / bw, (fl_fwd + fl_bwd) / fr);
            if (gated == 0 && sh.seqs == 0 && sh.D == 32) split<32>(a, ab, s, ws, ms, msb);
            if (gated == 0 && sh.seqs == 0 && sh.D == 64) split<64>(a, ab, s, ws, ms, msb);
            if (gated == 0 && sh.seqs == 0 && sh.D == 128 && sh.B == 4) split<128>(a, ab, s, ws, ms, msb);
            printf("{\"op\": \"%s\", \"impl\": \"ours:chunked\", \"backend\": \"cuda\", \"dtype\": \"bf16\", \"shape\": "
                   "{\"B\":%d,\"T\":%d,\"H\":%d,\"K\":%d,\"V\":%d%s}, \"ms\": %.4f, \"floor_ms\": %.4f, \"peak_mem_bytes\": %zu, "
                   "\"relerr\": null, \"device\": \"%s\", \"date\": \"%s\", \"commit\": \"%s\", \"vb\": %d}\n",
                   gated ? "gated_delta_fwdbwd" : "delta_fwdbwd", sh.B, sh.T, sh.H, sh.D, sh.D,
                   sh.seqs ? ",\"seqs\":8" : "", msb, floor_b, s.bytes, pr.name, date, COMMIT, vb);
            printf("{\"op\": \"%s\", \"impl\": \"ours:chunked\", \"backend\": \"cuda\", \"dtype\": \"bf16\", \"shape\": "
                   "{\"B\":%d,\"T\":%d,\"H\":%d,\"K\":%d,\"V\":%d%s}, \"ms\": %.4f, \"floor_ms\": %.4f, \"peak_mem_bytes\": %zu, "
                   "\"relerr\": null, \"device\": \"%s\", \"date\": \"%s\", \"commit\": \"%s\", \"vb\": %d}\n",
                   gated ? "gated_delta_fwd" : "delta_fwd", sh.B, sh.T, sh.H, sh.D, sh.D,
                   sh.seqs ? ",\"seqs\":8" : "", ms, floor_ms, s.bytes, pr.name, date, COMMIT, vb);
            fflush(stdout);
        }
        cudaFree(q), cudaFree(k), cudaFree(v), cudaFree(be), cudaFree(g), cudaFree(o), cudaFree(ws), cudaFree(cu);
        cudaFree(dout), cudaFree(dq), cudaFree(dk), cudaFree(dv), cudaFree(db), cudaFree(dgg);
        if (argc > 3 && !strcmp(argv[3], "one")) return; /* profiling: the first shape only */
    }
    /* decode: B64 H16 K=V=128, one token, state in place */
    {
        int B = 64, H = 16, D = 128;
        int64_t ntok = (int64_t)B * H;
        void *q = drand(2, ntok * D, -1, 1, 21), *k = drand(2, ntok * D, -0.15f, 0.15f, 22), *v = drand(2, ntok * D, -1, 1, 23);
        void *be = drand(2, ntok, 0.05f, 1.f, 24), *o;
        float *S = (float *)drand(0, ntok * D * D, -1, 1, 25);
        CK(cudaMalloc(&o, ntok * D * 2));
        ssm__dl_args a;
        memset(&a, 0, sizeof a);
        int64_t qs[4] = {H * D, H * D, D, 1}, bs[3] = {H, H, 1}, ss[4] = {H * D * D, D * D, D, 1};
        memcpy(a.qs, qs, 32), memcpy(a.ks, qs, 32), memcpy(a.vs, qs, 32), memcpy(a.os, qs, 32);
        memcpy(a.bs, bs, 24), memcpy(a.h0s, ss, 32), memcpy(a.hTs, ss, 32);
        a.q = q, a.k = k, a.v = v, a.beta = be, a.o = o, a.h0 = S, a.hT = S;
        a.N = B, a.T = 1, a.H = H, a.K = D, a.V = D, a.dt = 2, a.bdt = 2, a.scale = 1.f / sqrtf((float)D);
        a.svec = 1;
        double ms = time_ms([&] { dl_forward_recurrent(a, 0); }, 50);
        double floor_ms = 2.0 * ntok * D * D * 4 / bw;
        printf("{\"op\": \"delta_decode\", \"impl\": \"ours:recurrent\", \"backend\": \"cuda\", \"dtype\": \"bf16\", "
               "\"shape\": {\"B\":%d,\"T\":1,\"H\":%d,\"K\":%d,\"V\":%d}, \"ms\": %.4f, \"floor_ms\": %.4f, "
               "\"peak_mem_bytes\": 0, \"relerr\": null, \"device\": \"%s\", \"date\": \"%s\", \"commit\": \"%s\"}\n",
               B, H, D, D, ms, floor_ms, pr.name, date, COMMIT);
        cudaFree(q), cudaFree(k), cudaFree(v), cudaFree(be), cudaFree(o), cudaFree(S);
    }
}

static int harness(int argc, char **argv) {
    cudaDeviceProp pr;
    CK(cudaGetDeviceProperties(&pr, 0));
    g_optin = (int)pr.sharedMemPerBlockOptin, g_sms = pr.multiProcessorCount;
    if (getenv("DL_VARIANT")) g_variant = atoi(getenv("DL_VARIANT"));
    const char *mode = argc > 1 ? argv[1] : "check";
    if (!strcmp(mode, "check")) {
        run_checks();
        printf("%d passed, %d failed\n", npass, nfail);
        return nfail != 0;
    }
    if (!strcmp(mode, "bench")) bench(argc, argv);
    if (!strcmp(mode, "seq")) {
        g_prof = argc > 2 && !strcmp(argv[2], "one"); /* each pass once per variant, for ncu */
        seq_ab();
    }
    return 0;
}
} // namespace dev_delta
#undef CK

#ifndef SSM_DEV_WHOLE /* alone: nvcc ... dev/cuda/delta.cu */
int main(int argc, char **argv) { return dev_delta::harness(argc, argv); }
#endif
