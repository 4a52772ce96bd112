/* Delta-rule kernels (DeltaNet, Gated DeltaNet): chunked WY/UT form on tensor cores, the
   recurrent form and the decode step. Included by dev/cuda/delta.cu while they are developed;
   the winners move into ssm_cuda.h's delta section. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

/* One problem as the kernels see it: q,k [.,.,H,K], v,o [.,.,H,V] as (b,t,h,d) element strides;
   beta, g [.,.,H] as (b,t,h); states [B or N,H,K,V] f32 as (n,h,k,v). Sequences: N of them; with
   cu (varlen, B = 1) sequence n is tokens cu[n]..cu[n+1] of batch 0, else sequence n is batch n. */
typedef struct ssm__dl_args {
    const void *q, *k, *v, *beta, *g, *h0;
    void *o, *hT;
    const int64_t *cu;
    int64_t qs[4], ks[4], vs[4], os[4], bs[3], gs[3], h0s[4], hTs[4];
    int N, T, H, K, V, dt, bdt, gdt, sdt; /* sdt: dtype of the state tensors */
    float scale;
    /* backward: dout, dsT in; dq, dk, dv, dbeta, dg, ds0 out (each may be NULL) */
    const void *dout, *dhT;
    void *dq, *dk, *dv, *dbeta, *dg, *dh0;
    int64_t dos[4], dqs[4], dks[4], dvs[4], dbs[3], dgs[3], dhTs[4], dh0s[4];
} ssm__dl_args;

#define SSM__DL_C 64    /* chunk */
#define SSM__DL_NT 256  /* threads of the chunked kernels (8 warps) */

__device__ __forceinline__ float ssm__dl_ld(const void *p, int dt, int64_t i) {
    if (dt == 0) return ((const float *)p)[i];
    if (dt == 1) return __half2float(((const __half *)p)[i]);
    return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
}
__device__ __forceinline__ void ssm__dl_st(void *p, int dt, int64_t i, float v) {
    if (dt == 0) ((float *)p)[i] = v;
    else if (dt == 1) ((__half *)p)[i] = __float2half_rn(v);
    else ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn(v);
}
template <class E> __device__ __forceinline__ E ssm__dl_cv(float x);
template <> __device__ __forceinline__ float ssm__dl_cv<float>(float x) { return x; }
template <> __device__ __forceinline__ __half ssm__dl_cv<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 ssm__dl_cv<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }
__device__ __forceinline__ float ssm__dl_f(float x) { return x; }
__device__ __forceinline__ float ssm__dl_f(__half x) { return __half2float(x); }
__device__ __forceinline__ float ssm__dl_f(__nv_bfloat16 x) { return __bfloat162float(x); }

/* Sequence n: batch index, first token, length; its chunks start at global chunk choff(n). */
struct ssm__dl_seq {
    int64_t b, t0, len, c0;
};
__device__ __forceinline__ ssm__dl_seq ssm__dl_seq_of(const ssm__dl_args &a, int n, const int64_t *choff) {
    ssm__dl_seq s;
    if (a.cu) s.b = 0, s.t0 = a.cu[n], s.len = a.cu[n + 1] - a.cu[n], s.c0 = choff[n];
    else s.b = n, s.t0 = 0, s.len = a.T, s.c0 = (int64_t)n * ((a.T + SSM__DL_C - 1) / SSM__DL_C);
    return s;
}
/* Global chunk gc -> (sequence, chunk in it); -1 past the last chunk (the grid is an upper bound). */
__device__ __forceinline__ int ssm__dl_find(const ssm__dl_args &a, int64_t gc, const int64_t *choff, int64_t *c) {
    if (!a.cu) {
        int64_t nc = (a.T + SSM__DL_C - 1) / SSM__DL_C;
        if (gc >= nc * a.N) return -1;
        *c = gc % nc;
        return (int)(gc / nc);
    }
    if (gc >= choff[a.N]) return -1;
    int lo = 0, hi = a.N - 1;
    while (lo < hi) { /* last n with choff[n] <= gc */
        int mid = (lo + hi + 1) >> 1;
        if (choff[mid] <= gc) lo = mid;
        else hi = mid - 1;
    }
    *c = gc - choff[lo];
    return lo;
}
/* choff[n] = chunks before sequence n (varlen only; one thread, N is small). */
__global__ void ssm__dl_choff_kernel(const int64_t *cu, int N, int64_t *choff) {
    if (threadIdx.x || blockIdx.x) return;
    int64_t s = 0;
    for (int n = 0; n < N; ++n) choff[n] = s, s += (cu[n + 1] - cu[n] + SSM__DL_C - 1) / SSM__DL_C;
    choff[N] = s;
}

/* ---- warp-level matrix tiles ------------------------------------------------------------------
   acc[j] (j < NT) is the m16n8 tile at rows m0.., cols n0+8j.. of A(m,k) B(k,n), in mma.sync's
   accumulator layout (lane g = lane/4, t = lane%4: (g, 2t..2t+1) and (g+8, 2t..2t+1)).
   A(m,k) = TA ? A[k*lda + m] : A[m*lda + k]; B(k,n) = TB ? B[n*ldb + k] : B[k*ldb + n].
   16-bit operands go through ldmatrix + mma.m16n8k16 (f32 accumulation); f32 operands through
   plain FMAs in the same layout, so every kernel runs in f32 too. */
__device__ __forceinline__ unsigned ssm__dl_sa(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void ssm__dl_ldsm(unsigned r[4], const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(ssm__dl_sa(p)));
}
__device__ __forceinline__ void ssm__dl_ldsmt(unsigned r[4], const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(ssm__dl_sa(p)));
}
template <class E> __device__ __forceinline__ void ssm__dl_mma(float c[4], const unsigned a[4], unsigned b0, unsigned b1);
template <> __device__ __forceinline__ void ssm__dl_mma<__nv_bfloat16>(float c[4], const unsigned a[4], unsigned b0, unsigned b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <> __device__ __forceinline__ void ssm__dl_mma<__half>(float c[4], const unsigned a[4], unsigned b0, unsigned b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

template <int NT, int KD, bool TA, bool TB, class E>
__device__ __forceinline__ void ssm__dl_wmma(float (&acc)[NT][4], const E *A, int lda, int m0, const E *B, int ldb,
                                             int n0) {
    const int lane = threadIdx.x & 31;
    if constexpr (sizeof(E) == 4) {
        const int g = lane >> 2, t = lane & 3;
#pragma unroll 4
        for (int k = 0; k < KD; ++k) {
            float a0 = TA ? A[k * lda + m0 + g] : A[(m0 + g) * lda + k];
            float a1 = TA ? A[k * lda + m0 + g + 8] : A[(m0 + g + 8) * lda + k];
#pragma unroll
            for (int j = 0; j < NT; ++j) {
                int n = n0 + 8 * j + 2 * t;
                float b0 = TB ? B[n * ldb + k] : B[k * ldb + n];
                float b1 = TB ? B[(n + 1) * ldb + k] : B[k * ldb + n + 1];
                acc[j][0] += a0 * b0, acc[j][1] += a0 * b1, acc[j][2] += a1 * b0, acc[j][3] += a1 * b1;
            }
        }
    } else {
        const int i = lane >> 3, r = lane & 7;
#pragma unroll
        for (int k0 = 0; k0 < KD; k0 += 16) {
            unsigned a[4];
            if (!TA) ssm__dl_ldsm(a, A + (m0 + (lane & 15)) * lda + k0 + (lane >> 4) * 8);
            else ssm__dl_ldsmt(a, A + (k0 + r + (i >> 1) * 8) * lda + m0 + (i & 1) * 8);
#pragma unroll
            for (int j = 0; j + 1 < NT; j += 2) {
                unsigned b[4];
                const int nb = n0 + 8 * j;
                if (TB) ssm__dl_ldsm(b, B + (nb + r + (i >> 1) * 8) * ldb + k0 + (i & 1) * 8);
                else ssm__dl_ldsmt(b, B + (k0 + r + (i & 1) * 8) * ldb + nb + (i >> 1) * 8);
                ssm__dl_mma<E>(acc[j], a, b[0], b[1]);
                ssm__dl_mma<E>(acc[j + 1], a, b[2], b[3]);
            }
            if constexpr (NT % 2) { /* the odd last n8 tile: an x4 load whose upper half repeats the lower */
                unsigned b[4];
                const int nb = n0 + 8 * (NT - 1);
                if (TB) ssm__dl_ldsm(b, B + (nb + r) * ldb + k0 + (i & 1) * 8);
                else ssm__dl_ldsmt(b, B + (k0 + r + (i & 1) * 8) * ldb + nb);
                ssm__dl_mma<E>(acc[NT - 1], a, b[0], b[1]);
            }
        }
    }
}
template <int NT> __device__ __forceinline__ void ssm__dl_zero(float (&acc)[NT][4]) {
#pragma unroll
    for (int j = 0; j < NT; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
}
/* Visit the accumulator elements: f(row, col, value&). */
template <int NT, class F> __device__ __forceinline__ void ssm__dl_each(float (&acc)[NT][4], int m0, int n0, F f) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int j = 0; j < NT; ++j) {
        int n = n0 + 8 * j + 2 * t;
        f(m0 + g, n, acc[j][0]), f(m0 + g, n + 1, acc[j][1]);
        f(m0 + g + 8, n, acc[j][2]), f(m0 + g + 8, n + 1, acc[j][3]);
    }
}
/* C[M,N] = A B by the block's 8 warps in 16x32 tiles, then f(row, col, value) per element. */
template <int M, int N, int KD, bool TA, bool TB, class E, class F>
__device__ __forceinline__ void ssm__dl_gemm(const E *A, int lda, const E *B, int ldb, F f) {
    constexpr int TN = N >= 32 ? 32 : 16, tiles = (M / 16) * (N / TN);
    const int w = threadIdx.x >> 5;
    for (int tile = w; tile < tiles; tile += SSM__DL_NT / 32) {
        const int m0 = (tile / (N / TN)) * 16, n0 = (tile % (N / TN)) * TN;
        float acc[TN / 8][4];
        ssm__dl_zero(acc);
        ssm__dl_wmma<TN / 8, KD, TA, TB>(acc, A, lda, m0, B, ldb, n0);
        ssm__dl_each(acc, m0, n0, [&](int m, int n, float &v) { f(m, n, v); });
    }
}

/* ---- shared-memory staging ------------------------------------------------------------------ */
/* rows x cols tile of a strided tensor (row i at p + base + i*rs, element j at + j*cs), times
   mul(i), into s (E, leading dimension ld); rows >= nr and cols >= nc are zeros. */
template <class E, class F>
__device__ __forceinline__ void ssm__dl_stage(E *s, int ld, int rows, int cols, const void *p, int dt, int64_t base,
                                              int64_t rs, int64_t cs, int nr, int nc, F mul) {
    for (int idx = threadIdx.x; idx < rows * cols; idx += blockDim.x) {
        int i = idx / cols, j = idx % cols;
        float x = (i < nr && j < nc) ? ssm__dl_ld(p, dt, base + i * rs + j * cs) * mul(i) : 0.f;
        s[i * ld + j] = ssm__dl_cv<E>(x);
    }
}
/* Contiguous tile copies (workspace, 16-byte aligned rows) through cp.async. */
__device__ __forceinline__ void ssm__dl_cp16(void *s, const void *g) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(ssm__dl_sa(s)), "l"(g));
}
__device__ __forceinline__ void ssm__dl_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void ssm__dl_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }
template <class E>
__device__ __forceinline__ void ssm__dl_cptile(E *s, int ld, const E *g, int gld, int rows, int cols) {
    constexpr int V = 16 / sizeof(E);
    const int vpr = cols / V;
    for (int idx = threadIdx.x; idx < rows * vpr; idx += blockDim.x) {
        int i = idx / vpr, j = (idx % vpr) * V;
        ssm__dl_cp16(s + i * ld + j, g + (int64_t)i * gld + j);
    }
}
/* Store an smem tile to the (contiguous) workspace. */
template <class E> __device__ __forceinline__ void ssm__dl_sttile(E *g, int gld, const E *s, int ld, int rows, int cols) {
    constexpr int V = 16 / sizeof(E);
    const int vpr = cols / V;
    for (int idx = threadIdx.x; idx < rows * vpr; idx += blockDim.x) {
        int i = idx / vpr, j = (idx % vpr) * V;
        *(uint4 *)(g + (int64_t)i * gld + j) = *(const uint4 *)(s + i * ld + j);
    }
}

/* Workspace of the chunked path, per (global chunk, head) "ch": packed q, k, w [C,KP], u [C,VP],
   Aqk [C,C] (scale*tril(q k^T) with gates), T [C,C] (backward), gamma [C] (in-chunk cumsum of g). */
template <class E> struct ssm__dl_ws {
    E *qp, *kp, *w, *u, *aqk, *tm;
    E *dop, *s0, *vn, *ds1, *dvn; /* backward: packed dout [C,VP], S at chunk starts [KP,VP],
                                     v_new [C,VP], dS at chunk ends [KP,VP], d v_new [C,VP] */
    float *gam;
    int64_t *choff;
    int KP, VP;
};

/* ---- chunk preparation: one CTA per (chunk, head), all chunks in parallel -----------------------
   A = strict_tril(diag(beta) K K^T * exp(g_i - g_j)), T = (I + A)^-1 (forward substitution, f32),
   w = T diag(beta exp(g)) K, u = T diag(beta) V, Aqk = scale * tril(Q K^T * exp(g_i - g_j)). */
template <class E, int KP>
__global__ void __launch_bounds__(SSM__DL_NT) ssm__dl_prep_kernel(ssm__dl_args a, ssm__dl_ws<E> ws, int VP, int store_t) {
    constexpr int C = SSM__DL_C, LK = KP + 8, LC = C + 8;
    extern __shared__ __align__(16) unsigned char ssm__dl_smem[];
    const int64_t gc = blockIdx.x;
    const int h = blockIdx.y, tid = threadIdx.x;
    int64_t c;
    const int n = ssm__dl_find(a, gc, ws.choff, &c);
    if (n < 0) return;
    const ssm__dl_seq sq = ssm__dl_seq_of(a, n, ws.choff);
    const int64_t t0 = sq.t0 + c * C;
    const int len = (int)min((int64_t)C, sq.len - c * C);
    const int LV = VP + 8;
    E *sQ = (E *)ssm__dl_smem, *sK = sQ + C * LK, *sKb = sK + C * LK, *sV = sKb + C * LK, *sT = sV + C * LV;
    float *sA = (float *)(sT + C * LC), *sb = sA + C * (C + 1) + C * 72, *sg = sb + C, *seg = sg + C;
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
    ssm__dl_stage(sQ, LK, C, KP, a.q, a.dt, qb, a.qs[1], a.qs[3], len, a.K, [](int) { return 1.f; });
    ssm__dl_stage(sK, LK, C, KP, a.k, a.dt, kb, a.ks[1], a.ks[3], len, a.K, [](int) { return 1.f; });
    ssm__dl_stage(sKb, LK, C, KP, a.k, a.dt, kb, a.ks[1], a.ks[3], len, a.K, [&](int i) { return seg[i]; });
    ssm__dl_stage(sV, LV, C, VP, a.v, a.dt, vb, a.vs[1], a.vs[3], len, a.V, [&](int i) { return sb[i]; });
    __syncthreads();
    ssm__dl_sttile(ws.qp + ch * C * KP, KP, sQ, LK, C, KP);
    ssm__dl_sttile(ws.kp + ch * C * KP, KP, sK, LK, C, KP);
    E *aqk = ws.aqk + ch * C * C;
    const float scale = a.scale;
    ssm__dl_gemm<C, C, KP, false, true>(sK, LK, sK, LK, [&](int i, int j, float x) {
        sA[i * (C + 1) + j] = i > j ? sb[i] * x * __expf(sg[i] - sg[j]) : 0.f;
    });
    ssm__dl_gemm<C, C, KP, false, true>(sQ, LK, sK, LK, [&](int i, int j, float x) {
        aqk[i * C + j] = ssm__dl_cv<E>(i >= j ? scale * x * __expf(sg[i] - sg[j]) : 0.f);
    });
    __syncthreads();
    { /* T by forward substitution, column by column: t_i = [i == col] - sum_{j<i} A_ij t_j.
         Four lanes per column split the sum (j mod 4) and meet through shuffles. */
        const int col = tid >> 2, part = tid & 3;
        float *sTf = sA + C * (C + 1); /* f32 [C][72]: stride 72 keeps the 4 parts on distinct banks */
        for (int i = 0; i < C; ++i) {
            float s = 0.f;
            for (int j = part; j < i; j += 4) s += sA[i * (C + 1) + j] * sTf[j * 72 + col];
            s += __shfl_xor_sync(0xffffffffu, s, 1);
            s += __shfl_xor_sync(0xffffffffu, s, 2);
            const float t = (i == col ? 1.f : 0.f) - s;
            if (part == 0) sTf[i * 72 + col] = t, sT[i * LC + col] = ssm__dl_cv<E>(t);
            __syncwarp();
        }
    }
    __syncthreads();
    if (store_t) ssm__dl_sttile(ws.tm + ch * C * C, C, sT, LC, C, C);
    E *w = ws.w + ch * C * KP, *u = ws.u + ch * C * VP;
    ssm__dl_gemm<C, KP, C, false, false>(sT, LC, sKb, LK, [&](int i, int j, float x) { w[i * KP + j] = ssm__dl_cv<E>(x); });
    for (int v0 = 0; v0 < VP; v0 += 32)
        ssm__dl_gemm<C, 32, C, false, false>(sT, LC, sV + v0, LV,
                                             [&](int i, int j, float x) { u[i * VP + v0 + j] = ssm__dl_cv<E>(x); });
    if (store_t && a.dout) { /* the backward's packed dout */
        __syncthreads();
        const int64_t db = sq.b * a.dos[0] + t0 * a.dos[1] + h * a.dos[2];
        ssm__dl_stage(sV, LV, C, VP, a.dout, a.dt, db, a.dos[1], a.dos[3], len, a.V, [](int) { return 1.f; });
        __syncthreads();
        ssm__dl_sttile(ws.dop + ch * C * VP, VP, sV, LV, C, VP);
    }
}
template <class E, int KP> static size_t ssm__dl_prep_smem(int VP) {
    constexpr int C = SSM__DL_C;
    return sizeof(E) * ((size_t)3 * C * (KP + 8) + (size_t)C * (VP + 8) + (size_t)C * (C + 8)) +
           sizeof(float) * ((size_t)C * (C + 1) + (size_t)C * 72 + 3 * C);
}

/* ---- inter-chunk pass: one CTA per (sequence, head, VB columns of V), chunks in order ----------
   v_new = u - w S; o = exp(g) q S * scale + Aqk v_new; S <- exp(g_last) S + K^T (exp(g_last - g) v_new).
   S lives in registers (f32 accumulators), its E copy in shared memory feeds the next chunk.
   Warp w: output rows 16*(w%4).., cols (w/4)*VB/2..; state rows (w)*KP/8... */
template <class E, int KP, int VB, int NB>
__global__ void __launch_bounds__(SSM__DL_NT) ssm__dl_fwd_kernel(ssm__dl_args a, ssm__dl_ws<E> ws, E *vn_out, E *s_out) {
    constexpr int C = SSM__DL_C, LK = KP + 8, LC = C + 8, LVB = VB + 8;
    constexpr int ONT = VB / 16;           /* n8 tiles of a warp's output tile (16 x VB/2) */
    /* state tile: KP/16 row blocks over 8 warps; WPR warps share a row block (split columns) */
    constexpr int RB = KP / 16, WPR = RB >= 8 ? 1 : 8 / RB, SM = RB >= 8 ? RB / 8 : 1, SNT = VB / (8 * WPR);
    extern __shared__ __align__(16) unsigned char ssm__dl_smem[];
    const int n = blockIdx.x, h = blockIdx.y, v0 = blockIdx.z * VB, tid = threadIdx.x, w = tid >> 5;
    const ssm__dl_seq sq = ssm__dl_seq_of(a, n, ws.choff);
    const int nc = (int)((sq.len + C - 1) / C);
    const int VP = ws.VP;
    /* per buffer: Q, K, W [C][LK], U [C][LVB], Aqk [C][LC], gamma [C] */
    constexpr int BUF = 3 * C * LK + C * LVB + C * LC;
    E *buf0 = (E *)ssm__dl_smem;
    E *sS = buf0 + NB * BUF, *sVn = sS + KP * LVB, *sVd = sVn + C * LVB;
    float *sgam = (float *)(sVd + C * LVB); /* [NB][C] */

    /* state registers: warp w owns rows sm0.. (SM blocks of 16), cols sn0.. (SNT n8 tiles) */
    const int sm0 = (w / WPR) * 16 * SM, sn0 = (w % WPR) * (VB / WPR);
    float S[SM][SNT][4];
#pragma unroll
    for (int mb = 0; mb < SM; ++mb)
        ssm__dl_each(S[mb], sm0 + 16 * mb, sn0, [&](int r, int col, float &x) {
            x = (a.h0 && r < a.K && v0 + col < a.V)
                    ? ssm__dl_ld(a.h0, a.sdt, n * a.h0s[0] + h * a.h0s[1] + r * a.h0s[2] + (v0 + col) * a.h0s[3]) : 0.f;
            sS[r * LVB + col] = ssm__dl_cv<E>(x);
        });

    auto load = [&](int c, int bsel) {
        if (c < nc) {
            const int64_t ch = (sq.c0 + c) * a.H + h;
            E *b = buf0 + bsel * BUF;
            ssm__dl_cptile(b, LK, ws.qp + ch * C * KP, KP, C, KP);
            ssm__dl_cptile(b + C * LK, LK, ws.kp + ch * C * KP, KP, C, KP);
            ssm__dl_cptile(b + 2 * C * LK, LK, ws.w + ch * C * KP, KP, C, KP);
            ssm__dl_cptile(b + 3 * C * LK, LVB, ws.u + ch * C * VP + v0, VP, C, VB);
            ssm__dl_cptile(b + 3 * C * LK + C * LVB, LC, ws.aqk + ch * C * C, C, C, C);
            if (tid < C / 4) ssm__dl_cp16(sgam + bsel * C + tid * 4, ws.gam + ch * C + tid * 4);
        }
        ssm__dl_commit();
    };
    load(0, 0);
    if (NB == 2) load(1, 1);
    const int om0 = (w & 3) * 16, on0 = (w >> 2) * (VB / 2);
    for (int c = 0; c < nc; ++c) {
        const int bsel = c % NB;
        const E *bQ = buf0 + bsel * BUF, *bK = bQ + C * LK, *bW = bK + C * LK, *bU = bW + C * LK, *bA = bU + C * LVB;
        const float *gm = sgam + bsel * C;
        const int64_t ch = (sq.c0 + c) * a.H + h;
        const int len = (int)min((int64_t)C, sq.len - (int64_t)c * C);
        ssm__dl_wait<NB - 1>();
        __syncthreads();
        const float glast = gm[len - 1];
        /* v_new = u - w S and the inter-chunk output q S, same tile of rows/cols per warp */
        float X[ONT][4], O[ONT][4];
        ssm__dl_zero(X), ssm__dl_zero(O);
        ssm__dl_wmma<ONT, KP, false, false>(X, bW, LK, om0, sS, LVB, on0);
        ssm__dl_wmma<ONT, KP, false, false>(O, bQ, LK, om0, sS, LVB, on0);
        ssm__dl_each(X, om0, on0, [&](int i, int j, float &x) {
            float vn = ssm__dl_f(bU[i * LVB + j]) - x;
            sVn[i * LVB + j] = ssm__dl_cv<E>(vn);
            sVd[i * LVB + j] = ssm__dl_cv<E>(vn * __expf(glast - gm[i]));
            if (vn_out) vn_out[ch * C * VP + i * VP + v0 + j] = ssm__dl_cv<E>(vn);
        });
        const float sc = a.scale;
        ssm__dl_each(O, om0, on0, [&](int i, int, float &x) { x *= sc * __expf(gm[i]); });
        if (s_out) /* state at the chunk's start, for the backward */
            for (int idx = tid; idx < KP * VB / 8; idx += blockDim.x) {
                int r = idx / (VB / 8), cc = (idx % (VB / 8)) * 8;
                *(uint4 *)(s_out + ch * KP * VP + (int64_t)r * VP + v0 + cc) = *(const uint4 *)(sS + r * LVB + cc);
            }
        __syncthreads();
        /* o += Aqk v_new; S <- exp(glast) S + K^T v_decayed */
        ssm__dl_wmma<ONT, C, false, false>(O, bA, LC, om0, sVn, LVB, on0);
        const float eg = __expf(glast);
#pragma unroll
        for (int mb = 0; mb < SM; ++mb) {
            ssm__dl_each(S[mb], 0, 0, [&](int, int, float &x) { x *= eg; });
            ssm__dl_wmma<SNT, C, true, false>(S[mb], bK, LK, sm0 + 16 * mb, sVd, LVB, sn0);
            ssm__dl_each(S[mb], sm0 + 16 * mb, sn0, [&](int r, int col, float &x) { sS[r * LVB + col] = ssm__dl_cv<E>(x); });
        }
        const int64_t t0 = sq.t0 + (int64_t)c * C;
        const int64_t ob = sq.b * a.os[0] + t0 * a.os[1] + h * a.os[2];
        if (a.o)
            ssm__dl_each(O, om0, on0, [&](int i, int j, float &x) {
                if (i < len && v0 + j < a.V) ssm__dl_st(a.o, a.dt, ob + i * a.os[1] + (v0 + j) * a.os[3], x);
            });
        __syncthreads();
        load(c + NB, bsel);
    }
    if (a.hT)
#pragma unroll
        for (int mb = 0; mb < SM; ++mb)
            ssm__dl_each(S[mb], sm0 + 16 * mb, sn0, [&](int r, int col, float &x) {
                if (r < a.K && v0 + col < a.V)
                    ssm__dl_st(a.hT, a.sdt, n * a.hTs[0] + h * a.hTs[1] + r * a.hTs[2] + (v0 + col) * a.hTs[3], x);
            });
}
template <class E, int KP, int VB, int NB> static size_t ssm__dl_fwd_smem() {
    constexpr int C = SSM__DL_C, LK = KP + 8, LC = C + 8, LVB = VB + 8;
    return sizeof(E) * (NB * (size_t)(3 * C * LK + C * LVB + C * LC) + (size_t)KP * LVB + 2 * (size_t)C * LVB) +
           sizeof(float) * NB * C;
}

/* ---- recurrent form: token by token, f32 state in registers ------------------------------------
   CTA = (sequence, head, 32 columns of V); warp w owns 8 columns, lane owns rows lane + 32 i.
   Also the single-step decode (T = 1, h0 and hT may alias: each CTA reads its block before
   writing it). */
template <int RK>
__global__ void __launch_bounds__(128) ssm__dl_rec_kernel(ssm__dl_args a) {
    const int n = blockIdx.x, h = blockIdx.y, lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const int c0 = blockIdx.z * 32 + w * 8;
    int64_t b, t0, len;
    if (a.cu) b = 0, t0 = a.cu[n], len = a.cu[n + 1] - a.cu[n];
    else b = n, t0 = 0, len = a.T;
    float S[RK][8];
#pragma unroll
    for (int i = 0; i < RK; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            int r = lane + 32 * i, col = c0 + j;
            S[i][j] = (a.h0 && r < a.K && col < a.V)
                          ? ssm__dl_ld(a.h0, a.sdt, n * a.h0s[0] + h * a.h0s[1] + r * a.h0s[2] + col * a.h0s[3]) : 0.f;
        }
    for (int64_t t = t0; t < t0 + len; ++t) {
        const float beta = ssm__dl_ld(a.beta, a.bdt, b * a.bs[0] + t * a.bs[1] + h * a.bs[2]);
        const float al = a.g ? __expf(ssm__dl_ld(a.g, a.gdt, b * a.gs[0] + t * a.gs[1] + h * a.gs[2])) : 1.f;
        float kk[RK], qq[RK], vv[8], kS[8];
#pragma unroll
        for (int i = 0; i < RK; ++i) {
            int r = lane + 32 * i;
            kk[i] = r < a.K ? ssm__dl_ld(a.k, a.dt, b * a.ks[0] + t * a.ks[1] + h * a.ks[2] + r * a.ks[3]) : 0.f;
            qq[i] = r < a.K ? ssm__dl_ld(a.q, a.dt, b * a.qs[0] + t * a.qs[1] + h * a.qs[2] + r * a.qs[3]) : 0.f;
        }
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            vv[j] = c0 + j < a.V ? ssm__dl_ld(a.v, a.dt, b * a.vs[0] + t * a.vs[1] + h * a.vs[2] + (c0 + j) * a.vs[3]) : 0.f;
            float s = 0.f;
#pragma unroll
            for (int i = 0; i < RK; ++i) S[i][j] *= al, s += kk[i] * S[i][j];
            kS[j] = s;
        }
#pragma unroll
        for (int o = 16; o; o >>= 1)
#pragma unroll
            for (int j = 0; j < 8; ++j) kS[j] += __shfl_xor_sync(0xffffffffu, kS[j], o);
        float os[8];
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            float vn = beta * (vv[j] - kS[j]), s = 0.f;
#pragma unroll
            for (int i = 0; i < RK; ++i) S[i][j] += kk[i] * vn, s += qq[i] * S[i][j];
            os[j] = s;
        }
#pragma unroll
        for (int o = 16; o; o >>= 1)
#pragma unroll
            for (int j = 0; j < 8; ++j) os[j] += __shfl_xor_sync(0xffffffffu, os[j], o);
        if (lane < 8) {
            float x = os[0];
#pragma unroll
            for (int j = 1; j < 8; ++j) x = lane == j ? os[j] : x;
            if (c0 + lane < a.V) ssm__dl_st(a.o, a.dt, b * a.os[0] + t * a.os[1] + h * a.os[2] + (c0 + lane) * a.os[3], x * a.scale);
        }
    }
    if (a.hT)
#pragma unroll
        for (int i = 0; i < RK; ++i)
#pragma unroll
            for (int j = 0; j < 8; ++j) {
                int r = lane + 32 * i, col = c0 + j;
                if (r < a.K && col < a.V)
                    ssm__dl_st(a.hT, a.sdt, n * a.hTs[0] + h * a.hTs[1] + r * a.hTs[2] + col * a.hTs[3], S[i][j]);
            }
}

/* ---- backward, inter-chunk pass: one CTA per (sequence, head, VB columns), chunks in reverse ---
   dS is the gradient at the chunk's end (starts as dsT). Per chunk:
     dv_new = Aqk^T dout + exp(g_last - g) K dS               (stored, and dS stored, for the chunk pass)
     dS    <- exp(g_last) dS + Q^T (scale exp(g) dout) - W^T dv_new
   The gradient at the first chunk's start is ds0. Same tiling as the forward pass. */
template <class E, int KP, int VB, int NB>
__global__ void __launch_bounds__(SSM__DL_NT) ssm__dl_bwd_seq_kernel(ssm__dl_args a, ssm__dl_ws<E> ws) {
    constexpr int C = SSM__DL_C, LK = KP + 8, LC = C + 8, LVB = VB + 8;
    constexpr int ONT = VB / 16;
    constexpr int RB = KP / 16, WPR = RB >= 8 ? 1 : 8 / RB, SM = RB >= 8 ? RB / 8 : 1, SNT = VB / (8 * WPR);
    extern __shared__ __align__(16) unsigned char ssm__dl_smem[];
    const int n = blockIdx.x, h = blockIdx.y, v0 = blockIdx.z * VB, tid = threadIdx.x, w = tid >> 5;
    const ssm__dl_seq sq = ssm__dl_seq_of(a, n, ws.choff);
    const int nc = (int)((sq.len + C - 1) / C);
    const int VP = ws.VP;
    constexpr int BUF = 3 * C * LK + C * LVB + C * LC;
    E *buf0 = (E *)ssm__dl_smem;
    E *sS = buf0 + NB * BUF, *sdOg = sS + KP * LVB, *snVn = sdOg + C * LVB;
    float *sgam = (float *)(snVn + C * LVB);
    const int sm0 = (w / WPR) * 16 * SM, sn0 = (w % WPR) * (VB / WPR);
    float S[SM][SNT][4];
#pragma unroll
    for (int mb = 0; mb < SM; ++mb)
        ssm__dl_each(S[mb], sm0 + 16 * mb, sn0, [&](int r, int col, float &x) {
            x = (a.dhT && r < a.K && v0 + col < a.V)
                    ? ssm__dl_ld(a.dhT, a.sdt, n * a.dhTs[0] + h * a.dhTs[1] + r * a.dhTs[2] + (v0 + col) * a.dhTs[3]) : 0.f;
            sS[r * LVB + col] = ssm__dl_cv<E>(x);
        });
    auto load = [&](int c, int bsel) {
        if (c >= 0) {
            const int64_t ch = (sq.c0 + c) * a.H + h;
            E *b = buf0 + bsel * BUF;
            ssm__dl_cptile(b, LK, ws.qp + ch * C * KP, KP, C, KP);
            ssm__dl_cptile(b + C * LK, LK, ws.kp + ch * C * KP, KP, C, KP);
            ssm__dl_cptile(b + 2 * C * LK, LK, ws.w + ch * C * KP, KP, C, KP);
            ssm__dl_cptile(b + 3 * C * LK, LVB, ws.dop + ch * C * VP + v0, VP, C, VB);
            ssm__dl_cptile(b + 3 * C * LK + C * LVB, LC, ws.aqk + ch * C * C, C, C, C);
            if (tid < C / 4) ssm__dl_cp16(sgam + bsel * C + tid * 4, ws.gam + ch * C + tid * 4);
        }
        ssm__dl_commit();
    };
    load(nc - 1, 0);
    if (NB == 2) load(nc - 2, 1);
    const int om0 = (w & 3) * 16, on0 = (w >> 2) * (VB / 2);
    for (int it = 0; it < nc; ++it) {
        const int c = nc - 1 - it, bsel = it % NB;
        const E *bQ = buf0 + bsel * BUF, *bK = bQ + C * LK, *bW = bK + C * LK, *bO = bW + C * LK, *bA = bO + C * LVB;
        const float *gm = sgam + bsel * C;
        const int64_t ch = (sq.c0 + c) * a.H + h;
        const int len = (int)min((int64_t)C, sq.len - (int64_t)c * C);
        ssm__dl_wait<NB - 1>();
        __syncthreads();
        const float glast = gm[len - 1], sc = a.scale;
        for (int idx = tid; idx < C * VB; idx += blockDim.x) {
            int i = idx / VB, j = idx % VB;
            sdOg[i * LVB + j] = ssm__dl_cv<E>(sc * __expf(gm[i]) * ssm__dl_f(bO[i * LVB + j]));
        }
        for (int idx = tid; idx < KP * VB / 8; idx += blockDim.x) { /* dS at this chunk's end */
            int r = idx / (VB / 8), cc = (idx % (VB / 8)) * 8;
            *(uint4 *)(ws.ds1 + ch * KP * VP + (int64_t)r * VP + v0 + cc) = *(const uint4 *)(sS + r * LVB + cc);
        }
        float X[ONT][4], Y[ONT][4];
        ssm__dl_zero(X), ssm__dl_zero(Y);
        ssm__dl_wmma<ONT, C, true, false>(X, bA, LC, om0, bO, LVB, on0);
        ssm__dl_wmma<ONT, KP, false, false>(Y, bK, LK, om0, sS, LVB, on0);
        float *yy = &Y[0][0];
        int e = 0;
        ssm__dl_each(X, om0, on0, [&](int i, int j, float &x) {
            float dvn = x + __expf(glast - gm[i]) * yy[e++];
            snVn[i * LVB + j] = ssm__dl_cv<E>(-dvn);
            ws.dvn[ch * C * VP + i * VP + v0 + j] = ssm__dl_cv<E>(dvn);
        });
        __syncthreads();
        const float eg = __expf(glast);
#pragma unroll
        for (int mb = 0; mb < SM; ++mb) {
            ssm__dl_each(S[mb], 0, 0, [&](int, int, float &x) { x *= eg; });
            ssm__dl_wmma<SNT, C, true, false>(S[mb], bQ, LK, sm0 + 16 * mb, sdOg, LVB, sn0);
            ssm__dl_wmma<SNT, C, true, false>(S[mb], bW, LK, sm0 + 16 * mb, snVn, LVB, sn0);
            ssm__dl_each(S[mb], sm0 + 16 * mb, sn0, [&](int r, int col, float &x) { sS[r * LVB + col] = ssm__dl_cv<E>(x); });
        }
        __syncthreads();
        load(c - NB, bsel);
    }
    if (a.dh0)
#pragma unroll
        for (int mb = 0; mb < SM; ++mb)
            ssm__dl_each(S[mb], sm0 + 16 * mb, sn0, [&](int r, int col, float &x) {
                if (r < a.K && v0 + col < a.V)
                    ssm__dl_st(a.dh0, a.sdt, n * a.dh0s[0] + h * a.dh0s[1] + r * a.dh0s[2] + (v0 + col) * a.dh0s[3], x);
            });
}

/* Row sums of a warp's accumulator tile (rows g and g+8 of each lane), reduced over the 4 lanes
   of a row; lane t == 0 stores them to buf[row] (each row of a tile has one writer). */
template <int NT, class F>
__device__ __forceinline__ void ssm__dl_rowsum(float (&acc)[NT][4], int m0, int n0, float *buf, F f) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    float s0 = 0.f, s1 = 0.f;
#pragma unroll
    for (int j = 0; j < NT; ++j) {
        int n = n0 + 8 * j + 2 * t;
        s0 += f(m0 + g, n, acc[j][0]) + f(m0 + g, n + 1, acc[j][1]);
        s1 += f(m0 + g + 8, n, acc[j][2]) + f(m0 + g + 8, n + 1, acc[j][3]);
    }
    s0 += __shfl_xor_sync(0xffffffffu, s0, 1), s1 += __shfl_xor_sync(0xffffffffu, s1, 1);
    s0 += __shfl_xor_sync(0xffffffffu, s0, 2), s1 += __shfl_xor_sync(0xffffffffu, s1, 2);
    if (t == 0) buf[m0 + g] = s0, buf[m0 + g + 8] = s1;
}

/* ---- backward, per chunk: one CTA per (chunk, head), all in parallel -------------------------------
   From dv_new, dS (chunk end), S (chunk start), v_new and the chunk's T:
     dq = scale e^g dout S^T + D K,   D = scale tril(dout v_new^T) * exp(g_i - g_j)
     dk = D^T Q + e^{gl-g} v_new dS^T + beta e^g T^T dW + Eb K + Eb^T K,   dW = -dv_new S^T
     dv = beta T^T dv_new,   dT = (dW K^T e^g + dv_new V^T) diag(beta),   dA = -T^T dT T^T,
     Eb = diag(beta) (dA * exp(g_i - g_j)) (strictly lower); dbeta, dg from the same terms.
   Phase A reduces over V (dW, dout v_new^T, dv_new V^T, dv); phase B over V again per 64 columns
   of K (dq, dk). Row sums go through per-warp slots summed in a fixed order: deterministic. */
template <class E, int KP>
__global__ void __launch_bounds__(SSM__DL_NT) ssm__dl_bwd_chunk_kernel(ssm__dl_args a, ssm__dl_ws<E> ws) {
    constexpr int C = SSM__DL_C, LK = KP + 8, LC = C + 8, VW = 32, LW = VW + 8, KPC = KP < 64 ? KP : 64;
    constexpr int WNT = KP / 16, PNT = KPC / 16; /* n8 tiles: dW (16 x KP/2), phase B (16 x KPC/2) */
    extern __shared__ __align__(16) unsigned char ssm__dl_smem[];
    const int64_t gc = blockIdx.x;
    const int h = blockIdx.y, tid = threadIdx.x, w = tid >> 5, lane = tid & 31;
    int64_t c;
    const int n = ssm__dl_find(a, gc, ws.choff, &c);
    if (n < 0) return;
    const ssm__dl_seq sq = ssm__dl_seq_of(a, n, ws.choff);
    const int64_t t0 = sq.t0 + c * C, ch = gc * a.H + h;
    const int len = (int)min((int64_t)C, sq.len - c * C), VP = ws.VP;
    E *sQ = (E *)ssm__dl_smem, *sK = sQ + C * LK, *sdW = sK + C * LK, *sT = sdW + C * LK, *sD = sT + C * LC;
    E *sX = sD + C * LC, *sY = sX + C * LC, *tO = sY + C * LC, *tVn = tO + C * LW, *tdVn = tVn + C * LW, *tV = tdVn + C * LW;
    E *tSa = tV + C * LW, *tSb = tSa + KP * LW;
    float *sAf = (float *)(tSb + KPC * LW), *sb = sAf + C * (C + 1), *sg = sb + C, *seg = sg + C;
    float *dbeta = seg + C, *dgam = dbeta + C, *rb = dgam + C; /* rb: [4 quantities][2 column groups][C] */
    float *red = rb + 8 * C;                                 /* [8] */
    const int om0 = (w & 3) * 16, cg = w >> 2;

    ssm__dl_cptile(sQ, LK, ws.qp + ch * C * KP, KP, C, KP);
    ssm__dl_cptile(sK, LK, ws.kp + ch * C * KP, KP, C, KP);
    ssm__dl_cptile(sT, LC, ws.tm + ch * C * C, C, C, C);
    ssm__dl_commit();
    for (int i = tid; i < C; i += blockDim.x) {
        sb[i] = i < len ? ssm__dl_ld(a.beta, a.bdt, sq.b * a.bs[0] + (t0 + i) * a.bs[1] + h * a.bs[2]) : 0.f;
        sg[i] = ws.gam[ch * C + i];
        seg[i] = __expf(sg[i]);
        dbeta[i] = 0.f, dgam[i] = 0.f;
    }
    ssm__dl_wait<0>();
    __syncthreads();
    const float glast = sg[len - 1], scale = a.scale;
    /* Gamma * K K^T, strictly lower (A without beta) */
    ssm__dl_gemm<C, C, KP, false, true>(sK, LK, sK, LK, [&](int i, int j, float x) {
        sAf[i * (C + 1) + j] = i > j ? x * __expf(sg[i] - sg[j]) : 0.f;
    });

    /* ---- phase A: reductions over V ---- */
    float P1[4][4], P2[4][4], dWm[WNT][4], dvb_acc = 0.f;
    float dvrow0 = 0.f, dvrow1 = 0.f; /* v . dVb partial sums of rows g, g+8 of this lane's dv tile */
    ssm__dl_zero(P1), ssm__dl_zero(P2), ssm__dl_zero(dWm);
    (void)dvb_acc;
    const int64_t vbase = sq.b * a.vs[0] + t0 * a.vs[1] + h * a.vs[2];
    for (int vb = 0; vb < VP; vb += VW) {
        __syncthreads();
        ssm__dl_cptile(tO, LW, ws.dop + ch * C * VP + vb, VP, C, VW);
        ssm__dl_cptile(tVn, LW, ws.vn + ch * C * VP + vb, VP, C, VW);
        ssm__dl_cptile(tdVn, LW, ws.dvn + ch * C * VP + vb, VP, C, VW);
        ssm__dl_cptile(tSa, LW, ws.s0 + ch * KP * VP + vb, VP, KP, VW);
        ssm__dl_commit();
        ssm__dl_stage(tV, LW, C, VW, a.v, a.dt, vbase + vb * a.vs[3], a.vs[1], a.vs[3], len, a.V - vb,
                      [](int) { return 1.f; });
        ssm__dl_wait<0>();
        __syncthreads();
        ssm__dl_wmma<4, VW, false, true>(P1, tO, LW, om0, tVn, LW, cg * 32);
        ssm__dl_wmma<4, VW, false, true>(P2, tdVn, LW, om0, tV, LW, cg * 32);
        ssm__dl_wmma<WNT, VW, false, true>(dWm, tdVn, LW, om0, tSa, LW, cg * (KP / 2));
        float dvb[2][4];
        ssm__dl_zero(dvb);
        ssm__dl_wmma<2, C, true, false>(dvb, sT, LC, om0, tdVn, LW, cg * 16);
        {
            const int g = lane >> 2, t = lane & 3;
#pragma unroll
            for (int j = 0; j < 2; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int i = om0 + g + (e >> 1) * 8, col = cg * 16 + 8 * j + 2 * t + (e & 1);
                    const float x = dvb[j][e];
                    const float vv = ssm__dl_f(tV[i * LW + col]);
                    if (e >> 1) dvrow1 += vv * x;
                    else dvrow0 += vv * x;
                    if (a.dv && i < len && vb + col < a.V)
                        ssm__dl_st(a.dv, a.dt, sq.b * a.dvs[0] + (t0 + i) * a.dvs[1] + h * a.dvs[2] + (vb + col) * a.dvs[3],
                                   sb[i] * x);
                }
        }
    }
    dvrow0 += __shfl_xor_sync(0xffffffffu, dvrow0, 1), dvrow1 += __shfl_xor_sync(0xffffffffu, dvrow1, 1);
    dvrow0 += __shfl_xor_sync(0xffffffffu, dvrow0, 2), dvrow1 += __shfl_xor_sync(0xffffffffu, dvrow1, 2);
    if ((lane & 3) == 0) rb[cg * C + om0 + (lane >> 2)] = dvrow0, rb[cg * C + om0 + (lane >> 2) + 8] = dvrow1;
    /* dW = -dv_new S^T; D = scale tril(dout v_new^T) Gamma */
    ssm__dl_each(dWm, om0, cg * (KP / 2), [&](int i, int j, float &x) { sdW[i * LK + j] = ssm__dl_cv<E>(-x); });
    ssm__dl_each(P1, om0, cg * 32, [&](int i, int j, float &x) {
        sD[i * LC + j] = ssm__dl_cv<E>(i >= j ? scale * x * __expf(sg[i] - sg[j]) : 0.f);
    });
    __syncthreads();
    for (int i = tid; i < C; i += blockDim.x) dbeta[i] += rb[i] + rb[C + i]; /* v . dVb */
    {   /* dT = (P2 + e^g_j dW K^T) diag(beta) */
        float Z[4][4];
        ssm__dl_zero(Z);
        ssm__dl_wmma<4, KP, false, true>(Z, sdW, LK, om0, sK, LK, cg * 32);
        float *zz = &Z[0][0];
        int e = 0;
        ssm__dl_each(P2, om0, cg * 32, [&](int i, int j, float &x) {
            sX[i * LC + j] = ssm__dl_cv<E>(sb[j] * (x + seg[j] * zz[e++]));
        });
    }
    __syncthreads();
    ssm__dl_gemm<C, C, C, true, false>(sT, LC, sX, LC, [&](int i, int j, float x) { sY[i * LC + j] = ssm__dl_cv<E>(x); });
    __syncthreads();
    /* dA = -(T^T dT) T^T, strictly lower: M = dA * (Gamma K K^T) into sAf, Eb into sX */
    ssm__dl_gemm<C, C, C, false, true>(sY, LC, sT, LC, [&](int i, int j, float x) {
        const float dA = i > j ? -x : 0.f;
        sAf[i * (C + 1) + j] *= dA;
        sX[i * LC + j] = ssm__dl_cv<E>(sb[i] * dA * (i > j ? __expf(sg[i] - sg[j]) : 0.f));
    });
    __syncthreads();
    if (tid < C) { /* row sums of M: dbeta_i, +beta_i to dg_i */
        float s = 0.f;
        for (int j = 0; j < C; ++j) s += sAf[tid * (C + 1) + j];
        dbeta[tid] += s, dgam[tid] += sb[tid] * s;
    } else if (tid < 2 * C) { /* column sums of diag(beta) M: - to dg_j */
        const int j = tid - C;
        float s = 0.f;
        for (int i = 0; i < C; ++i) s += sb[i] * sAf[i * (C + 1) + j];
        rb[2 * C + j] = s;
    }
    __syncthreads();
    for (int i = tid; i < C; i += blockDim.x) dgam[i] -= rb[2 * C + i];

    /* ---- phase B: per KPC columns of K, reductions over V again, then dq and dk ---- */
    float sds = 0.f; /* <S, dS> partial (gated: the chunk-level gate gradient) */
    float qdq = 0.f;
    (void)qdq;
    for (int k0 = 0; k0 < KP; k0 += KPC) {
        float Aq[PNT][4], Ak[PNT][4], Ax[PNT][4];
        ssm__dl_zero(Aq), ssm__dl_zero(Ak);
        for (int vb = 0; vb < VP; vb += VW) {
            __syncthreads();
            ssm__dl_cptile(tO, LW, ws.dop + ch * C * VP + vb, VP, C, VW);
            ssm__dl_cptile(tVn, LW, ws.vn + ch * C * VP + vb, VP, C, VW);
            ssm__dl_cptile(tSa, LW, ws.s0 + ch * KP * VP + (int64_t)k0 * VP + vb, VP, KPC, VW);
            ssm__dl_cptile(tSb, LW, ws.ds1 + ch * KP * VP + (int64_t)k0 * VP + vb, VP, KPC, VW);
            ssm__dl_commit();
            ssm__dl_wait<0>();
            __syncthreads();
            ssm__dl_wmma<PNT, VW, false, true>(Aq, tO, LW, om0, tSa, LW, cg * (KPC / 2));
            ssm__dl_wmma<PNT, VW, false, true>(Ak, tVn, LW, om0, tSb, LW, cg * (KPC / 2));
            if (a.g)
                for (int idx = tid; idx < KPC * VW; idx += blockDim.x) {
                    int r = idx / VW, j = idx % VW;
                    sds += ssm__dl_f(tSa[r * LW + j]) * ssm__dl_f(tSb[r * LW + j]);
                }
        }
        const int n0 = cg * (KPC / 2);
        /* dq = scale e^g (dout S^T) + D K */
        ssm__dl_each(Aq, om0, n0, [&](int i, int, float &x) { x *= scale * seg[i]; });
        ssm__dl_wmma<PNT, C, false, false>(Aq, sD, LC, om0, sK + k0, LK, n0);
        ssm__dl_rowsum(Aq, om0, n0, rb + 0 * 2 * C + cg * C, [&](int i, int j, float x) { return x * ssm__dl_f(sQ[i * LK + k0 + j]); });
        if (a.dq)
            ssm__dl_each(Aq, om0, n0, [&](int i, int j, float &x) {
                if (i < len && k0 + j < a.K)
                    ssm__dl_st(a.dq, a.dt, sq.b * a.dqs[0] + (t0 + i) * a.dqs[1] + h * a.dqs[2] + (k0 + j) * a.dqs[3], x);
            });
        /* dk: e^{gl-g} v_new dS^T, then D^T Q, beta e^g T^T dW, Eb K + Eb^T K */
        ssm__dl_each(Ak, om0, n0, [&](int i, int, float &x) { x *= __expf(glast - sg[i]); });
        ssm__dl_rowsum(Ak, om0, n0, rb + 1 * 2 * C + cg * C, [&](int i, int j, float x) { return x * ssm__dl_f(sK[i * LK + k0 + j]); });
        ssm__dl_zero(Ax);
        ssm__dl_wmma<PNT, C, true, false>(Ax, sD, LC, om0, sQ + k0, LK, n0);
        ssm__dl_rowsum(Ax, om0, n0, rb + 2 * 2 * C + cg * C, [&](int i, int j, float x) { return x * ssm__dl_f(sK[i * LK + k0 + j]); });
        ssm__dl_each(Ak, om0, n0, [&](int, int, float &x) { x += 0.f; });
        {
            float *ax = &Ax[0][0];
            int e = 0;
            ssm__dl_each(Ak, om0, n0, [&](int, int, float &x) { x += ax[e++]; });
        }
        ssm__dl_zero(Ax);
        ssm__dl_wmma<PNT, C, true, false>(Ax, sT, LC, om0, sdW + k0, LK, n0);
        ssm__dl_rowsum(Ax, om0, n0, rb + 3 * 2 * C + cg * C, [&](int i, int j, float x) { return x * ssm__dl_f(sK[i * LK + k0 + j]); });
        {
            float *ax = &Ax[0][0];
            int e = 0;
            ssm__dl_each(Ak, om0, n0, [&](int i, int, float &x) { x += sb[i] * seg[i] * ax[e++]; });
        }
        ssm__dl_wmma<PNT, C, false, false>(Ak, sX, LC, om0, sK + k0, LK, n0);
        ssm__dl_wmma<PNT, C, true, false>(Ak, sX, LC, om0, sK + k0, LK, n0);
        if (a.dk)
            ssm__dl_each(Ak, om0, n0, [&](int i, int j, float &x) {
                if (i < len && k0 + j < a.K)
                    ssm__dl_st(a.dk, a.dt, sq.b * a.dks[0] + (t0 + i) * a.dks[1] + h * a.dks[2] + (k0 + j) * a.dks[3], x);
            });
        __syncthreads();
        for (int i = tid; i < C; i += blockDim.x) {
            const float qd = rb[i] + rb[C + i], ks = rb[2 * C + i] + rb[3 * C + i], kd = rb[4 * C + i] + rb[5 * C + i];
            const float kg = rb[6 * C + i] + rb[7 * C + i];
            dgam[i] += qd - ks - kd + sb[i] * seg[i] * kg;
            dbeta[i] += seg[i] * kg;
            if (i == 0) red[0] = k0 == 0 ? 0.f : red[0];
        }
        __syncthreads();
        if (tid == 0) { /* sum_i k_i . dK_S1_i: the chunk-level gate term (fixed order) */
            float s = 0.f;
            for (int i = 0; i < C; ++i) s += rb[2 * C + i] + rb[3 * C + i];
            red[1] = (k0 == 0 ? 0.f : red[1]) + s;
        }
    }
    /* <S, dS> over the block, in a fixed order */
    for (int o = 16; o; o >>= 1) sds += __shfl_xor_sync(0xffffffffu, sds, o);
    __syncthreads();
    if (lane == 0) red[2 + w] = sds;
    __syncthreads();
    if (tid == 0) {
        float s = 0.f;
        for (int i = 0; i < SSM__DL_NT / 32; ++i) s += red[2 + i];
        dgam[len - 1] += __expf(glast) * s + red[1];
        float acc = 0.f; /* dg_s = sum_{i >= s} dgamma_i */
        for (int i = len - 1; i >= 0; --i) {
            acc += dgam[i];
            if (a.dg) ssm__dl_st(a.dg, a.gdt, sq.b * a.dgs[0] + (t0 + i) * a.dgs[1] + h * a.dgs[2], acc);
        }
    }
    if (a.dbeta)
        for (int i = tid; i < len; i += blockDim.x)
            ssm__dl_st(a.dbeta, a.bdt, sq.b * a.dbs[0] + (t0 + i) * a.dbs[1] + h * a.dbs[2], dbeta[i]);
}
template <class E, int KP> static size_t ssm__dl_bwd_chunk_smem() {
    constexpr int C = SSM__DL_C, LK = KP + 8, LC = C + 8, LW = 40, KPC = KP < 64 ? KP : 64;
    return sizeof(E) * ((size_t)3 * C * LK + 4 * (size_t)C * LC + 4 * (size_t)C * LW + (size_t)(KP + KPC) * LW) +
           sizeof(float) * ((size_t)C * (C + 1) + 5 * C + 8 * C + 16);
}

/* ---- decode step (T = 1): one CTA per (sequence, head, 64 columns of V), 256 threads ---------
   Thread (r, c4): rows r, r+16, ... and columns 4 c4 .. 4 c4 + 3, so a warp reads 2 rows x 256
   contiguous bytes of the state; the two column sums (k^T S, q^T S') meet in shared memory.
   The state is read once and written once, in place allowed. */
template <int RPT>
__global__ void __launch_bounds__(256) ssm__dl_step_kernel(ssm__dl_args a) {
    __shared__ float red[16][65];
    __shared__ float sk[16 * RPT], sqv[16 * RPT], sv[64];
    const int n = blockIdx.x, h = blockIdx.y, v0 = blockIdx.z * 64, tid = threadIdx.x;
    const int r0 = tid >> 4, c0 = (tid & 15) * 4;
    const int64_t tb = (int64_t)n * a.ks[0], hs = (int64_t)n * a.h0s[0] + h * a.h0s[1];
    const int64_t ho = (int64_t)n * a.hTs[0] + h * a.hTs[1];
    for (int i = tid; i < 16 * RPT; i += 256) {
        sk[i] = i < a.K ? ssm__dl_ld(a.k, a.dt, tb + h * a.ks[2] + i * a.ks[3]) : 0.f;
        sqv[i] = i < a.K ? ssm__dl_ld(a.q, a.dt, (int64_t)n * a.qs[0] + h * a.qs[2] + i * a.qs[3]) : 0.f;
    }
    if (tid < 64) sv[tid] = v0 + tid < a.V ? ssm__dl_ld(a.v, a.dt, (int64_t)n * a.vs[0] + h * a.vs[2] + (v0 + tid) * a.vs[3]) : 0.f;
    const float beta = ssm__dl_ld(a.beta, a.bdt, (int64_t)n * a.bs[0] + h * a.bs[2]);
    const float al = a.g ? __expf(ssm__dl_ld(a.g, a.gdt, (int64_t)n * a.gs[0] + h * a.gs[2])) : 1.f;
    float S[RPT][4];
#pragma unroll
    for (int i = 0; i < RPT; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int r = r0 + 16 * i, c = v0 + c0 + j;
            S[i][j] = (a.h0 && r < a.K && c < a.V) ? ssm__dl_ld(a.h0, a.sdt, hs + r * a.h0s[2] + c * a.h0s[3]) : 0.f;
        }
    __syncthreads();
    float p[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int i = 0; i < RPT; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) S[i][j] *= al, p[j] += sk[r0 + 16 * i] * S[i][j];
#pragma unroll
    for (int j = 0; j < 4; ++j) red[r0][c0 + j] = p[j];
    __syncthreads();
    float vn[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        float s = 0.f;
#pragma unroll
        for (int i = 0; i < 16; ++i) s += red[i][c0 + j];
        vn[j] = beta * (sv[c0 + j] - s);
        p[j] = 0.f;
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < RPT; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int r = r0 + 16 * i, c = v0 + c0 + j;
            S[i][j] += sk[r] * vn[j], p[j] += sqv[r] * S[i][j];
            if (a.hT && r < a.K && c < a.V) ssm__dl_st(a.hT, a.sdt, ho + r * a.hTs[2] + c * a.hTs[3], S[i][j]);
        }
#pragma unroll
    for (int j = 0; j < 4; ++j) red[r0][c0 + j] = p[j];
    __syncthreads();
    if (tid < 64 && v0 + tid < a.V) {
        float s = 0.f;
#pragma unroll
        for (int i = 0; i < 16; ++i) s += red[i][tid];
        ssm__dl_st(a.o, a.dt, (int64_t)n * a.os[0] + h * a.os[2] + (v0 + tid) * a.os[3], s * a.scale);
    }
}
