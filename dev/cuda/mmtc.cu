/* The batched tensor-core product of the recurrences' backward (ssm_cuda.h's ssm__cu_mmtc_kernel:
   dA_t = g_t h_{t-1}^T with an f32 g and a 16-bit or f32 h, K = m) side by side with its launch
   and ring variants, on the matrix-state grid rows' dA (S so that A >= 256 MB). Outputs are
   compared bit for bit with the first variant's.
     build/dev_mmtc              every variant on every shape
     build/dev_mmtc NAME...      the variants whose names contain NAME
   nvcc -O3 -arch=sm_90a -I. -std=c++17 dev/cuda/mmtc.cu -o build/dev_mmtc
   Variants (mmtc_kernel is the library's before w32, with its ring depth NS a template argument;
   NS = 2 was the library's; mmtc2_kernel's w32 is the library's now):
     item        64-tiles, one item a CTA (the library's launch at M, N >= 64)
     run/R       64-tiles, R CTAs an SM each taking a run of items (the 32-tiles' launch)
     ns3/R       the same with a ring of 3 slabs
     pair        the library's launch; each thread's fragment elements k = q and q + 4 taken from the
                 staged k = 2q, 2q + 1 (one shared load for two), f32 rows 8 words apart
     w16, w32, h16, h16w32   see mmtc2_kernel below */
#define SSM_IMPLEMENTATION /* ssm.h's implementation here: the program links the CUDA one (mk/cuda.mk) */
#include "ssm.h"
#include "bench/cuda_common.h"
#include <stdio.h>
#include <string.h>

__device__ __forceinline__ unsigned sa(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void cp16z(void *dst, const void *src, bool ok) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(sa(dst)), "l"(src), "r"(ok ? 16 : 0) : "memory");
}
__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void wait_cp() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }
#define MMA(INSTR, c, a, b0, b1)                                                                              \
    asm volatile(INSTR " {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"                            \
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])                                             \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1))
#define TF32 "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"
__device__ __forceinline__ unsigned tf32(float x) { return (__float_as_uint(x) + 0x1000u) & 0xffffe000u; }
__device__ __forceinline__ void split32(float x, unsigned *hi, unsigned *lo) {
    *hi = tf32(x);
    *lo = __float_as_uint(x - __uint_as_float(*hi));
}

#define KS_ 32
template <int A16, int B16, int TILE, int NS, int PAIR>
__global__ void __launch_bounds__(TILE * TILE / 16) mmtc_kernel(int64_t nbatch, int64_t count, int M, int N, int K,
                                                                       float alpha, float beta, dev_op A, dev_op B,
                                                                       dev_op C) {
    constexpr int KS = KS_, LDF = KS + (PAIR ? 8 : 4), LDH = KS + 8; /* row strides: f32 words, 16-bit elements */
    constexpr int NT = TILE * TILE / 16;                       /* a warp 16 x 32 of C: 8 warps at TILE 64, 2 at 32 */
    constexpr int AW = TILE * (A16 ? LDH / 2 : LDF), BW = TILE * (B16 ? LDH / 2 : LDF), SW = AW + BW; /* words a slab */
    __shared__ __align__(16) float sm[NS * SW];
    const int tilesN = (N + TILE - 1) / TILE, tm = blockIdx.x / tilesN, tn = blockIdx.x % tilesN;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, q = lane & 3;
    const int wi = warp / (TILE / 32) * 16, wj = warp % (TILE / 32) * 32, nslab = K > 0 ? (K + KS - 1) / KS : 1;
    /* this CTA's items blockIdx.y + j gridDim.y as one stream of (item, k-slab) steps: the next
       step, of this item or the next, in flight while this one multiplies */
    const int64_t nitem = nbatch > blockIdx.y ? (nbatch - 1 - blockIdx.y) / gridDim.y + 1 : 0, nstep = nitem * nslab;
    /* a staged operand's fragment element (r, k) as a TF32 pair: 16-bit exact (lo 0), f32 split */
    auto frag = [&](const float *base, int s16, int dt, int r, int k, unsigned *hi, unsigned *lo) {
        if (!s16) return split32(base[r * LDF + k], hi, lo);
        *hi = __float_as_uint(dev_ld(base, dt, r * LDH + k)), *lo = 0u;
    };
    /* PAIR: the MMA's k-columns q and q + 4 taken from the adjacent staged k = 2q, 2q + 1 (a
       permutation of k within the k-step, the same for both operands): one 64-bit (f32) or 32-bit
       (16-bit) shared load for two fragment elements, rows 8 words apart (conflict-free) */
    auto pair = [&](const float *base, int s16, int dt, int r, int k, unsigned *hi, unsigned *lo) {
        if (!s16) {
            const float2 v = *(const float2 *)(base + r * LDF + k);
            split32(v.x, &hi[0], &lo[0]), split32(v.y, &hi[1], &lo[1]);
            return;
        }
        const unsigned w = *(const unsigned *)((const unsigned short *)base + r * LDH + k);
        const float2 f = dt == 1 ? __half22float2(*(const __half2 *)&w) : __bfloat1622float2(*(const __nv_bfloat162 *)&w);
        hi[0] = __float_as_uint(f.x), hi[1] = __float_as_uint(f.y), lo[0] = lo[1] = 0u;
    };
    auto item = [&](int64_t step) { return blockIdx.y + step / nslab * gridDim.y; };
    /* step's slab into ring slot st: rows of A (tile rows) and of B^T (tile columns), k-contiguous */
    /* PAIR: the next slab to stage (item sbi, k-slab sks) and its item's bases, kept from step to
       step (a 64-bit division and modulo per slab, twice, were a third of the instructions) */
    int64_t sbi = blockIdx.y, sa0 = 0, sb0 = 0;
    int sks = 0;
    auto bases = [&](int64_t bi) {
        const int64_t s = bi / count, kb = bi - s * count;
        sa0 = s * A.ss + kb * A.bs, sb0 = s * B.ss + kb * B.bs;
    };
    if (PAIR && nstep > 0) bases(sbi);
    auto stage = [&](int st, int64_t step) {
        int64_t a0, b0;
        int k0;
        if (PAIR) {
            a0 = sa0, b0 = sb0, k0 = sks * KS;
            if (++sks == nslab) {
                sks = 0, sbi += gridDim.y;
                if (sbi < nbatch) bases(sbi);
            }
        } else {
            const int64_t bi = item(step), s = bi / count, kb = bi % count;
            a0 = s * A.ss + kb * A.bs, b0 = s * B.ss + kb * B.bs, k0 = (int)(step % nslab) * KS;
        }
        float *as = sm + st * SW, *bs = as + AW;
        constexpr int EA = A16 ? 2 : 4, EB = B16 ? 2 : 4, CA = KS * EA / 16, CB = KS * EB / 16; /* 16-byte pieces a row */
        for (int c = tid; c < TILE * CA; c += NT) {
            const int r = c / CA, k = (c % CA) * (16 / EA), ig = tm * TILE + r, kg = k0 + k;
            const bool ok = ig < M && kg < K;
            cp16z((char *)as + r * (A16 ? 2 * LDH : 4 * LDF) + k * EA,
                          (const char *)A.p + (ok ? (a0 + ig * A.rs + kg) * EA : 0), ok);
        }
        for (int c = tid; c < TILE * CB; c += NT) {
            const int r = c / CB, k = (c % CB) * (16 / EB), jg = tn * TILE + r, kg = k0 + k;
            const bool ok = jg < N && kg < K;
            cp16z((char *)bs + r * (B16 ? 2 * LDH : 4 * LDF) + k * EB,
                          (const char *)B.p + (ok ? (b0 + jg * B.cs + kg) * EB : 0), ok);
        }
        commit();
    };
    float acc[4][4];
#pragma unroll
    for (int t = 0; t < 4; ++t)
#pragma unroll
        for (int z = 0; z < 4; ++z) acc[t][z] = 0.f;
#pragma unroll
    for (int p = 0; p < NS - 1; ++p) /* the first NS - 1 steps in flight (a commit group each, empty past nstep) */
        if (p < nstep) stage(p, p);
        else commit();
    int64_t cbi = blockIdx.y; /* PAIR: the item and k-slab being multiplied */
    int cks = 0;
    for (int64_t step = 0; step < nstep; ++step) {
        const int st = (int)(step % NS);
        if (step + NS - 1 < nstep) stage((int)((step + NS - 1) % NS), step + NS - 1);
        else commit();
        wait_cp<NS - 1>();
        __syncthreads();
        const float *as = sm + st * SW, *bs = as + AW;
#pragma unroll
        for (int kk = 0; kk < KS; kk += 8) {
            unsigned ah[4], al[4], bh[4][2], bl[4][2];
            if (PAIR) {
#pragma unroll
                for (int z = 0; z < 2; ++z) { /* a[z], a[z + 2]: row g + 8 z, columns q, q + 4 */
                    unsigned h2[2], l2[2];
                    pair(as, A16, A.dt, wi + g + 8 * z, kk + 2 * q, h2, l2);
                    ah[z] = h2[0], ah[z + 2] = h2[1], al[z] = l2[0], al[z + 2] = l2[1];
                }
#pragma unroll
                for (int t = 0; t < 4; ++t) pair(bs, B16, B.dt, wj + 8 * t + g, kk + 2 * q, bh[t], bl[t]);
            } else {
#pragma unroll
                for (int z = 0; z < 4; ++z) frag(as, A16, A.dt, wi + g + 8 * (z & 1), kk + q + 4 * (z >> 1), &ah[z], &al[z]);
#pragma unroll
                for (int t = 0; t < 4; ++t)
#pragma unroll
                    for (int z = 0; z < 2; ++z) frag(bs, B16, B.dt, wj + 8 * t + g, kk + q + 4 * z, &bh[t][z], &bl[t][z]);
            }
            /* the products as passes over the four tiles: no MMA waits on the one before it */
            if (!A16)
#pragma unroll
                for (int t = 0; t < 4; ++t) MMA(TF32, acc[t], al, bh[t][0], bh[t][1]);
            if (!B16)
#pragma unroll
                for (int t = 0; t < 4; ++t) MMA(TF32, acc[t], ah, bl[t][0], bl[t][1]);
#pragma unroll
            for (int t = 0; t < 4; ++t) MMA(TF32, acc[t], ah, bh[t][0], bh[t][1]);
        }
        __syncthreads();
        if (PAIR) {
            if (++cks < nslab) continue;
            cks = 0;
        } else if (step % nslab != nslab - 1) continue;
        /* the item's last slab: acc[t][z] is row wi + g + 8 (z >> 1), column wj + 8 t + 2 q + (z & 1) of C */
        const int64_t bi = PAIR ? cbi : item(step), c0 = bi / count * C.ss + bi % count * C.bs;
        cbi += gridDim.y;
        /* PAIR: columns 2q, 2q + 1 as one 2-element store where C's rows are contiguous, even and aligned */
        const bool c2 = PAIR && beta == 0.f && C.cs == 1 && !((c0 | C.rs) & 1) && !((uintptr_t)C.p & (C.dt ? 3 : 7));
        if (c2) {
#pragma unroll
            for (int t = 0; t < 4; ++t)
#pragma unroll
                for (int z = 0; z < 4; z += 2) {
                    const int i = tm * TILE + wi + g + 8 * (z >> 1), j = tn * TILE + wj + 8 * t + 2 * q;
                    if (i < M && j + 1 < N) {
                        const int64_t ci = c0 + i * C.rs + j;
                        const float x = alpha * acc[t][z], y = alpha * acc[t][z + 1];
                        if (C.dt == 0) *(float2 *)((float *)C.p + ci) = make_float2(x, y);
                        else if (C.dt == 1) *(__half2 *)((unsigned short *)C.p + ci) = __floats2half2_rn(x, y);
                        else *(__nv_bfloat162 *)((unsigned short *)C.p + ci) = __floats2bfloat162_rn(x, y);
                    } else if (i < M && j < N) {
                        dev_st(C.p, C.dt, c0 + i * C.rs + j, alpha * acc[t][z]);
                    }
                    acc[t][z] = acc[t][z + 1] = 0.f;
                }
            continue;
        }
#pragma unroll
        for (int t = 0; t < 4; ++t)
#pragma unroll
            for (int z = 0; z < 4; ++z) {
                const int i = tm * TILE + wi + g + 8 * (z >> 1), j = tn * TILE + wj + 8 * t + 2 * q + (z & 1);
                if (i < M && j < N) {
                    const int64_t ci = c0 + i * C.rs + j * C.cs;
                    float v = alpha * acc[t][z];
                    if (beta != 0.f) v += beta * dev_ld(C.p, C.dt, ci);
                    dev_st(C.p, C.dt, ci, v);
                }
                acc[t][z] = 0.f;
            }
    }
}

/* Wider warps and 16-bit products (64-tiles, an f32 A = g, K-contiguous; the library's PAIR staging):
     w32        a warp 32 x 32 of C (4 warps a CTA): each B fragment serves two row blocks
     h16 / h16w32 (16-bit B) m16n8k16 MMAs in B's type, A split into hi + lo parts of that type
                (two products a 16-k step instead of two a TF32 8-k step; B's fragments are its
                staged 32-bit pairs, unconverted). For bf16 the split keeps ~16 bits of g; for
                f16 ~22 bits but f16's range: |g| under 2^-14 loses bits (subnormal hi) */
#define MMA_F16 "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
#define MMA_BF16 "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"
template <int BDT> __device__ __forceinline__ void split16(float2 v, unsigned &hi, unsigned &lo) {
    if (BDT == 1) {
        const __half2 h = __floats2half2_rn(v.x, v.y);
        const float2 f = __half22float2(h);
        const __half2 l = __floats2half2_rn(v.x - f.x, v.y - f.y);
        hi = *(const unsigned *)&h, lo = *(const unsigned *)&l;
    } else {
        const __nv_bfloat162 h = __floats2bfloat162_rn(v.x, v.y);
        const float2 f = __bfloat1622float2(h);
        const __nv_bfloat162 l = __floats2bfloat162_rn(v.x - f.x, v.y - f.y);
        hi = *(const unsigned *)&h, lo = *(const unsigned *)&l;
    }
}
template <int B16, int WM, int H16, int BDT>
__global__ void __launch_bounds__(64 * 64 / (WM * 32) * 32) mmtc2_kernel(int64_t nbatch, int64_t count, int M, int N, int K,
                                                                       dev_op A, dev_op B, dev_op C) {
    constexpr int TILE = 64, KS = KS_, LDF = KS + 8, LDH = KS + 8, RB = WM / 16, NT = TILE * TILE / (WM * 32) * 32;
    constexpr int AW = TILE * LDF, BW = TILE * (B16 ? LDH / 2 : LDF), SW = AW + BW;
    __shared__ __align__(16) float sm[2 * SW];
    const int tilesN = (N + TILE - 1) / TILE, tm = blockIdx.x / tilesN, tn = blockIdx.x % tilesN;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, q = lane & 3;
    const int wi = warp / 2 * WM, wj = warp % 2 * 32, nslab = K > 0 ? (K + KS - 1) / KS : 1;
    const int64_t nitem = nbatch > blockIdx.y ? (nbatch - 1 - blockIdx.y) / gridDim.y + 1 : 0, nstep = nitem * nslab;
    int64_t sbi = blockIdx.y, sa0 = 0, sb0 = 0;
    int sks = 0;
    auto bases = [&](int64_t bi) {
        const int64_t s = bi / count, kb = bi - s * count;
        sa0 = s * A.ss + kb * A.bs, sb0 = s * B.ss + kb * B.bs;
    };
    if (nstep > 0) bases(sbi);
    auto stage = [&](int st) {
        const int64_t a0 = sa0, b0 = sb0;
        const int k0 = sks * KS;
        if (++sks == nslab) {
            sks = 0, sbi += gridDim.y;
            if (sbi < nbatch) bases(sbi);
        }
        float *as = sm + st * SW, *bs = as + AW;
        constexpr int EB = B16 ? 2 : 4, CA = KS * 4 / 16, CB = KS * EB / 16;
        for (int c = tid; c < TILE * CA; c += NT) {
            const int r = c / CA, k = (c % CA) * 4, ig = tm * TILE + r, kg = k0 + k;
            const bool ok = ig < M && kg < K;
            cp16z((char *)as + r * 4 * LDF + k * 4, (const char *)A.p + (ok ? (a0 + ig * A.rs + kg) * 4 : 0), ok);
        }
        for (int c = tid; c < TILE * CB; c += NT) {
            const int r = c / CB, k = (c % CB) * (16 / EB), jg = tn * TILE + r, kg = k0 + k;
            const bool ok = jg < N && kg < K;
            cp16z((char *)bs + r * (B16 ? 2 * LDH : 4 * LDF) + k * EB, (const char *)B.p + (ok ? (b0 + jg * B.cs + kg) * EB : 0), ok);
        }
        commit();
    };
    float acc[RB][4][4];
#pragma unroll
    for (int r = 0; r < RB; ++r)
#pragma unroll
        for (int t = 0; t < 4; ++t)
#pragma unroll
            for (int z = 0; z < 4; ++z) acc[r][t][z] = 0.f;
    if (nstep > 0) stage(0);
    int64_t cbi = blockIdx.y;
    int cks = 0;
    for (int64_t step = 0; step < nstep; ++step) {
        const int st = (int)(step & 1);
        if (step + 1 < nstep) stage(st ^ 1), wait_cp<1>();
        else wait_cp<0>();
        __syncthreads();
        const float *as = sm + st * SW, *bs = as + AW;
        if constexpr (H16) {
            const unsigned short *bh16 = (const unsigned short *)bs;
#pragma unroll
            for (int kk = 0; kk < KS; kk += 16) {
                unsigned b[4][2];
#pragma unroll
                for (int t = 0; t < 4; ++t)
#pragma unroll
                    for (int h = 0; h < 2; ++h) b[t][h] = *(const unsigned *)(bh16 + (wj + 8 * t + g) * LDH + kk + 8 * h + 2 * q);
#pragma unroll
                for (int r = 0; r < RB; ++r) {
                    unsigned ah[4], al[4];
#pragma unroll
                    for (int e = 0; e < 4; ++e) /* register e: row g + 8 (e & 1), k 2q + 8 (e >> 1) */
                        split16<BDT>(*(const float2 *)(as + (wi + 16 * r + g + 8 * (e & 1)) * LDF + kk + 8 * (e >> 1) + 2 * q), ah[e], al[e]);
#pragma unroll
                    for (int t = 0; t < 4; ++t) {
                        if (BDT == 1) MMA(MMA_F16, acc[r][t], al, b[t][0], b[t][1]);
                        else MMA(MMA_BF16, acc[r][t], al, b[t][0], b[t][1]);
                    }
#pragma unroll
                    for (int t = 0; t < 4; ++t) {
                        if (BDT == 1) MMA(MMA_F16, acc[r][t], ah, b[t][0], b[t][1]);
                        else MMA(MMA_BF16, acc[r][t], ah, b[t][0], b[t][1]);
                    }
                }
            }
        } else {
#pragma unroll
            for (int kk = 0; kk < KS; kk += 8) {
                unsigned bh[4][2], bl[4][2];
#pragma unroll
                for (int t = 0; t < 4; ++t) {
                    if (B16) {
                        const unsigned w = *(const unsigned *)((const unsigned short *)bs + (wj + 8 * t + g) * LDH + kk + 2 * q);
                        const float2 f = BDT == 1 ? __half22float2(*(const __half2 *)&w) : __bfloat1622float2(*(const __nv_bfloat162 *)&w);
                        bh[t][0] = __float_as_uint(f.x), bh[t][1] = __float_as_uint(f.y), bl[t][0] = bl[t][1] = 0u;
                    } else {
                        const float2 v = *(const float2 *)(bs + (wj + 8 * t + g) * LDF + kk + 2 * q);
                        split32(v.x, &bh[t][0], &bl[t][0]), split32(v.y, &bh[t][1], &bl[t][1]);
                    }
                }
#pragma unroll
                for (int r = 0; r < RB; ++r) {
                    unsigned ah[4], al[4];
#pragma unroll
                    for (int z = 0; z < 2; ++z) {
                        const float2 v = *(const float2 *)(as + (wi + 16 * r + g + 8 * z) * LDF + kk + 2 * q);
                        split32(v.x, &ah[z], &al[z]), split32(v.y, &ah[z + 2], &al[z + 2]);
                    }
#pragma unroll
                    for (int t = 0; t < 4; ++t) MMA(TF32, acc[r][t], al, bh[t][0], bh[t][1]);
                    if (!B16)
#pragma unroll
                        for (int t = 0; t < 4; ++t) MMA(TF32, acc[r][t], ah, bl[t][0], bl[t][1]);
#pragma unroll
                    for (int t = 0; t < 4; ++t) MMA(TF32, acc[r][t], ah, bh[t][0], bh[t][1]);
                }
            }
        }
        __syncthreads();
        if (++cks < nslab) continue;
        cks = 0;
        const int64_t bi = cbi, c0 = bi / count * C.ss + bi % count * C.bs;
        cbi += gridDim.y;
#pragma unroll
        for (int r = 0; r < RB; ++r)
#pragma unroll
            for (int t = 0; t < 4; ++t)
#pragma unroll
                for (int z = 0; z < 4; z += 2) {
                    const int i = tm * TILE + wi + 16 * r + g + 8 * (z >> 1), j = tn * TILE + wj + 8 * t + 2 * q;
                    if (i < M && j + 1 < N) {
                        const int64_t ci = c0 + i * C.rs + j;
                        const float x = acc[r][t][z], y = acc[r][t][z + 1];
                        if (C.dt == 0) *(float2 *)((float *)C.p + ci) = make_float2(x, y);
                        else if (C.dt == 1) *(__half2 *)((unsigned short *)C.p + ci) = __floats2half2_rn(x, y);
                        else *(__nv_bfloat162 *)((unsigned short *)C.p + ci) = __floats2bfloat162_rn(x, y);
                    }
                    acc[r][t][z] = acc[r][t][z + 1] = 0.f;
                }
    }
}

static int g_sms;

/* dA of a backward: S sequences, T - 1 items, M = N = n, K = m; g f32 [S, T, n, m], h [S, T, n, m] of
   type hdt, dA [S, T, n, n] of type hdt */
static void run_shape(int argc, char **argv, int64_t S, int64_t T, int n, int hdt, double bw, float gscale = 1.f) {
    const int m = n;
    const int64_t nb = S * (T - 1), per = (int64_t)n * m;
    const size_t hs = hdt ? 2 : 4;
    void *g, *h, *c, *ref;
    cudaMalloc(&g, S * T * per * 4), cudaMalloc(&h, S * T * per * hs), cudaMalloc(&c, S * T * (int64_t)n * n * hs);
    cudaMalloc(&ref, S * T * (int64_t)n * n * hs);
    fill_kernel<<<4096, 256>>>(g, 0, S * T * per, gscale, 31u);
    fill_kernel<<<4096, 256>>>(h, hdt, S * T * per, 1.f, 32u);
    /* item (s, k) = step k + 1: A = g_{k+1} (rows i, k-contiguous), B(k, j) = h_k[j][k], C = dA_{k+1} */
    dev_op A = {(char *)g + per * 4, 0, m, 1, per, T * per};
    dev_op B = {h, hdt, 1, m, per, T * per};
    dev_op C = {(char *)c + (size_t)n * n * hs, hdt, n, 1, (int64_t)n * n, T * (int64_t)n * n};
    const double bytes = (double)nb * (per * 4 + per * hs + (double)n * n * hs), flops = 2.0 * nb * n * n * m;
    printf("## S%lld T%lld n%d m%d h, dA %s, |g| <= %g: %.0f MB moved, floor %.4f ms, %.1f GFLOP\n", (long long)S, (long long)T, n, m,
           hdt == 2 ? "bf16" : hdt ? "f16" : "f32", gscale, bytes / 1e6, bytes / bw, flops / 1e9);
    const int64_t cn = S * T * (int64_t)n * n;
    int have = 0;
    auto run = [&](const char *name, int tile, int ns, int64_t gy, int pr = 0) {
        if (!dev_want(argc, argv, name)) return;
        const int64_t tiles = ((n + tile - 1) / tile) * ((n + tile - 1) / tile);
        cudaMemset(c, 0xff, cn * hs);
        auto launch = [&] {
            dim3 grid((unsigned)tiles, (unsigned)(gy < 65535 ? gy : 65535));
#define L_(A16, B16, TL, NS_) mmtc_kernel<A16, B16, TL, NS_, 0><<<grid, TL * TL / 16>>>(nb, T - 1, n, n, m, 1.f, 0.f, A, B, C)
#define LP_(A16, B16, TL) mmtc_kernel<A16, B16, TL, 2, 1><<<grid, TL * TL / 16>>>(nb, T - 1, n, n, m, 1.f, 0.f, A, B, C)
            if (pr && tile == 64) { if (hdt) LP_(0, 1, 64); else LP_(0, 0, 64); }
            else if (pr) { if (hdt) LP_(0, 1, 32); else LP_(0, 0, 32); }
            else if (tile == 64 && ns == 2) { if (hdt) L_(0, 1, 64, 2); else L_(0, 0, 64, 2); }
            else if (tile == 64 && ns == 3) { if (hdt) L_(0, 1, 64, 3); else L_(0, 0, 64, 3); }
            else if (tile == 32 && ns == 2) { if (hdt) L_(0, 1, 32, 2); else L_(0, 0, 32, 2); }
            else { if (hdt) L_(0, 1, 32, 3); else L_(0, 0, 32, 3); }
#undef L_
#undef LP_
        };
        const double ms = time_ms(launch);
        double d = 0;
        if (!have) cudaMemcpy(ref, c, cn * hs, cudaMemcpyDeviceToDevice), have = 1;
        else d = max_rel_diff(c, ref, hdt, cn);
        printf("  %-10s %8.4f ms  %6.2f x floor  %6.1f TFLOP/s  max|diff|/max|ref| %.1e\n", name, ms, ms / (bytes / bw),
               flops / ms / 1e9, d);
    };
    const int tile = n >= 64 ? 64 : 32;
    const int64_t tiles = ((n + tile - 1) / tile) * ((n + tile - 1) / tile);
    if (tile == 64) {
        run("item", 64, 2, nb), run("pair", 64, 2, nb, 1);
        auto run2 = [&](const char *name, int wm, int h16) { /* the wider-warp / 16-bit-product variants, one item a CTA */
            if (!dev_want(argc, argv, name) || (h16 && !hdt)) return;
            cudaMemset(c, 0xff, cn * hs);
            auto launch = [&] {
                dim3 grid((unsigned)tiles, (unsigned)(nb < 65535 ? nb : 65535));
                const int nt = 64 * 64 / (wm * 32) * 32;
#define L2_(B16, WM, H, BD) mmtc2_kernel<B16, WM, H, BD><<<grid, nt>>>(nb, T - 1, n, n, m, A, B, C)
                if (!hdt) { if (wm == 32) L2_(0, 32, 0, 1); else L2_(0, 16, 0, 1); }
                else if (hdt == 1) { if (h16) { if (wm == 32) L2_(1, 32, 1, 1); else L2_(1, 16, 1, 1); } else { if (wm == 32) L2_(1, 32, 0, 1); else L2_(1, 16, 0, 1); } }
                else { if (h16) { if (wm == 32) L2_(1, 32, 1, 2); else L2_(1, 16, 1, 2); } else { if (wm == 32) L2_(1, 32, 0, 2); else L2_(1, 16, 0, 2); } }
#undef L2_
            };
            const double ms = time_ms(launch);
            const double d = have ? max_rel_diff(c, ref, hdt, cn) : 0;
            printf("  %-10s %8.4f ms  %6.2f x floor  %6.1f TFLOP/s  max|diff|/max|ref| %.1e\n", name, ms, ms / (bytes / bw),
                   flops / ms / 1e9, d);
        };
        run2("w16", 16, 0), run2("w32", 32, 0), run2("h16", 16, 1), run2("h16w32", 32, 1);
    }
    else {
        const int64_t gy = 16 * (int64_t)g_sms / tiles + 1; /* the library's 32-tile launch */
        run("run16", 32, 2, gy < nb ? gy : nb), run("pair", 32, 2, gy < nb ? gy : nb, 1);
    }
    for (int r : {2, 4, 8}) {
        char nm[32];
        const int64_t gy = r * (int64_t)g_sms / tiles + 1;
        snprintf(nm, sizeof nm, "run/%d", r);
        run(nm, tile, 2, gy < nb ? gy : nb);
        snprintf(nm, sizeof nm, "ns3/%d", r);
        run(nm, tile, 3, gy < nb ? gy : nb);
    }
    dev_sync_check();
    cudaFree(g), cudaFree(h), cudaFree(c), cudaFree(ref);
}

int main(int argc, char **argv) {
    cudaDeviceProp pr;
    cudaGetDeviceProperties(&pr, 0);
    g_sms = pr.multiProcessorCount;
    const double bw = copy_bandwidth();
    printf("# dev_mmtc on %s (%d SMs), copy bandwidth %.0f GB/s\n", pr.name, g_sms, bw / 1e6);
    run_shape(argc, argv, 8, 1024, 128, 1, bw);  /* f16 S8 T1024 n = m = 128 (the grid's cr rows) */
    run_shape(argc, argv, 32, 1024, 64, 1, bw);  /* f16 S32 T1024 n = m = 64 */
    run_shape(argc, argv, 32, 1024, 64, 2, bw);  /* bf16 S32 T1024 n = m = 64 */
    run_shape(argc, argv, 32, 1024, 64, 1, bw, 1e-6f); /* f16, |g| <= 1e-6: f16's range */
    run_shape(argc, argv, 128, 1024, 32, 1, bw); /* f16 S128 T1024 n = m = 32 */
    run_shape(argc, argv, 16, 1024, 64, 0, bw);  /* f32 S16 T1024 n = m = 64 */
    run_shape(argc, argv, 4, 1024, 128, 0, bw);  /* f32 S4 T1024 n = m = 128 */
    return 0;
}
