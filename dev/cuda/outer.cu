/* The adjoint's outer products dA_t = g_t h_{t-1}^T (ssm_cuda.h's K = 1 product, the whole
   write stream of a vector-state backward) side by side: the library's form against variants,
   and a plain 16-byte write of the same bytes as the reference. Each variant's output is
   compared bit for bit with the first one's.
     build/dev_outer                every variant at S16 T4096 n64 (16-bit C, f32 g, 16-bit h),
                                   n32 S128 T1024, n128 S8 T1024, and n64 with f32 C
     build/dev_outer NAME...        the variants whose names contain NAME
   nvcc -O3 -arch=sm_90a -I. -std=c++17 dev/cuda/outer.cu -o build/dev_outer
   Variants:
     block   the library's kernel before this harness: G items a block iteration, a and b staged
             in shared memory between two barriers, then the stores
     warp    a warp an item, no shared memory and no barrier: a and b read straight from global
             (L1 hits after the first touch), 4 stores in flight a lane, the next item's bases
             computed while this one stores
     rows    the block kernel's staging; each thread keeps one column vector of b in registers and
             stores down the rows (no division in the store loop); G = the block kernel's group
             times 1, 2 or 4
     flat    rows over the flattened (item, row) pairs of an iteration, so that items of fewer rows
             than the threads of a column (n32 f16) keep every thread storing
     write   16-byte stores of zeros over the same C (the write bandwidth the product can reach) */
#define SSM_IMPLEMENTATION /* ssm.h's implementation here: the program links the CUDA one (mk/cuda.mk) */
#include "ssm.h"
#include "bench/cuda_common.h"
#include <stdio.h>
#include <string.h>

__device__ __forceinline__ unsigned pack2(int dt, float x, float y) {
    if (dt == 1) { __half2 v = __floats2half2_rn(x, y); return *(unsigned *)&v; }
    __nv_bfloat162 v = __floats2bfloat162_rn(x, y);
    return *(unsigned *)&v;
}

/* The items b0 .. b0 + G - 1 of an iteration: C's bases into base_c, a (M values) then b (N)
   of item g at sm + g (M + N); the kernels below share this staging (the library's, two
   barriers) and differ in their stores. Returns the items staged. */
__device__ int stage_items(int64_t b0, int64_t nbatch, int64_t count, int M, int N, int G, const dev_op &A, const dev_op &B, const dev_op &C,
                           float *sm, int64_t *base_c) {
    __shared__ int64_t base_a[16], base_b[16];
    const int g_n = nbatch - b0 < G ? (int)(nbatch - b0) : G, MN = M + N;
    __syncthreads();
    if (threadIdx.x < g_n) {
        const int64_t bi = b0 + threadIdx.x, s = bi / count, k = bi - s * count;
        base_a[threadIdx.x] = s * A.ss + k * A.bs;
        base_b[threadIdx.x] = s * B.ss + k * B.bs;
        base_c[threadIdx.x] = s * C.ss + k * C.bs;
    }
    __syncthreads();
    for (int e = threadIdx.x; e < g_n * MN; e += blockDim.x) {
        const int g = e / MN, r = e - g * MN;
        sm[e] = r < M ? dev_ld(A.p, A.dt, base_a[g] + r * A.rs) : dev_ld(B.p, B.dt, base_b[g] + (r - M) * B.cs);
    }
    __syncthreads();
    return g_n;
}

/* ---- block: the library's kernel as it was (ssm__cu_outer_kernel) ---- */
static int group_of(int64_t M, int64_t N, int ve) {
    const int64_t per = M * (N / ve), smem_cap = 12288 / (M + N);
    int64_t g = 2048 / (per > 0 ? per : 1);
    if (g > 16) g = 16;
    if (g > smem_cap) g = smem_cap;
    return g < 1 ? 1 : (int)g;
}
__global__ void __launch_bounds__(256) block_kernel(int64_t nbatch, int64_t count, int M, int N, int G, float alpha, dev_op A,
                                                    dev_op B, dev_op C, int ve) {
    extern __shared__ float sm[];
    __shared__ int64_t base_c[16];
    const int NV = N / ve, per = M * NV, MN = M + N;
    for (int64_t b0 = blockIdx.x * (int64_t)G; b0 < nbatch; b0 += (int64_t)gridDim.x * G) {
        const int g_n = stage_items(b0, nbatch, count, M, N, G, A, B, C, sm, base_c);
        for (int e = threadIdx.x; e < g_n * per; e += blockDim.x) {
            const int g = G == 1 ? 0 : e / per, r = e - g * per, i = r / NV, j = (r - i * NV) * ve;
            const int64_t ci = base_c[g] + i * C.rs + j * C.cs;
            const float *as = sm + g * MN, *bs = as + M, gi = alpha * as[i];
            if (ve == 4) {
                *(float4 *)((float *)C.p + ci) = make_float4(gi * bs[j], gi * bs[j + 1], gi * bs[j + 2], gi * bs[j + 3]);
            } else if (ve == 8) {
                unsigned w[4];
#pragma unroll
                for (int q = 0; q < 4; ++q) w[q] = pack2(C.dt, gi * bs[j + 2 * q], gi * bs[j + 2 * q + 1]);
                *(uint4 *)((unsigned short *)C.p + ci) = make_uint4(w[0], w[1], w[2], w[3]);
            } else {
                dev_st(C.p, C.dt, ci, gi * bs[j]);
            }
        }
    }
}

/* ---- warp: a warp an item; element e = (row i, vector jv) of the item, 32 a pass, U passes
   loaded before any is stored ---- */
template <int VE, int U>
__global__ void __launch_bounds__(256) warp_kernel(int64_t nbatch, int64_t count, int M, int N, float alpha, dev_op A, dev_op B, dev_op C) {
    const int lane = threadIdx.x & 31, NV = N / VE, per = M * NV;
    const int64_t w0 = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) >> 5, nw = ((int64_t)gridDim.x * blockDim.x) >> 5;
    for (int64_t bi = w0; bi < nbatch; bi += nw) {
        const int64_t s = bi / count, k = bi - s * count;
        const int64_t ba = s * A.ss + k * A.bs, bb = s * B.ss + k * B.bs, bc = s * C.ss + k * C.bs;
        for (int e0 = lane; e0 < per; e0 += 32 * U) {
            float gi[U], bv[U][VE];
            int64_t ci[U];
#pragma unroll
            for (int u = 0; u < U; ++u) {
                const int e = e0 + 32 * u, i = e / NV, j = (e - i * NV) * VE;
                if (e < per) {
                    gi[u] = alpha * dev_ld(A.p, A.dt, ba + i * A.rs);
                    ci[u] = bc + i * C.rs + j * C.cs;
                    if (VE == 8 && B.dt != 0 && B.cs == 1) { /* 8 16-bit values of h, one 16-byte load */
                        const uint4 q = *(const uint4 *)((const unsigned short *)B.p + bb + j);
                        const unsigned w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
                        for (int h = 0; h < 4; ++h) {
                            float2 f;
                            if (B.dt == 1) f = __half22float2(*(const __half2 *)&w[h]);
                            else f = __bfloat1622float2(*(const __nv_bfloat162 *)&w[h]);
                            bv[u][2 * h] = f.x, bv[u][2 * h + 1] = f.y;
                        }
                    } else {
#pragma unroll
                        for (int h = 0; h < VE; ++h) bv[u][h] = dev_ld(B.p, B.dt, bb + (j + h) * B.cs);
                    }
                }
            }
#pragma unroll
            for (int u = 0; u < U; ++u) {
                if (e0 + 32 * u >= per) break;
                if (VE == 4) {
                    *(float4 *)((float *)C.p + ci[u]) = make_float4(gi[u] * bv[u][0], gi[u] * bv[u][1], gi[u] * bv[u][2], gi[u] * bv[u][3 % VE]);
                } else if (VE == 8) {
                    unsigned w[4];
#pragma unroll
                    for (int q = 0; q < 4; ++q) w[q] = pack2(C.dt, gi[u] * bv[u][(2 * q) % VE], gi[u] * bv[u][(2 * q + 1) % VE]);
                    *(uint4 *)((unsigned short *)C.p + ci[u]) = make_uint4(w[0], w[1], w[2], w[3]);
                } else {
                    dev_st(C.p, C.dt, ci[u], gi[u] * bv[u][0]);
                }
            }
        }
    }
}

/* ---- rows: the block kernel's staging, but each thread keeps one column vector (jv = tid % NV
   when NV divides the block) for every item of the iteration: b's VE values in registers once an
   item, then a store a row, RP = 256 / NV rows apart, its address stepped, no division in the
   loop (the block kernel spent ~140 instructions a 16-byte store: ncu, sm 84% busy, DRAM 46%) */
template <int VE>
__global__ void __launch_bounds__(256) rows_kernel(int64_t nbatch, int64_t count, int M, int N, int G, float alpha, dev_op A,
                                                   dev_op B, dev_op C) {
    extern __shared__ float sm[];
    __shared__ int64_t base_c[16];
    const int NV = N / VE, MN = M + N, RP = 256 / NV, jv = threadIdx.x % NV, r0 = threadIdx.x / NV, j = jv * VE;
    for (int64_t b0 = blockIdx.x * (int64_t)G; b0 < nbatch; b0 += (int64_t)gridDim.x * G) {
        const int g_n = stage_items(b0, nbatch, count, M, N, G, A, B, C, sm, base_c);
        for (int g = 0; g < g_n; ++g) {
            const float *as = sm + g * MN, *bs = as + M;
            float bv[VE];
#pragma unroll
            for (int q = 0; q < VE; q += 4) {
                const float4 f = *(const float4 *)(bs + j + q);
                bv[q] = alpha * f.x, bv[q + 1] = alpha * f.y, bv[q + 2] = alpha * f.z, bv[q + 3] = alpha * f.w;
            }
            if (VE == 4) {
                float *cp = (float *)C.p + base_c[g] + (int64_t)r0 * C.rs + j;
                const int64_t step = (int64_t)RP * C.rs;
#pragma unroll 4
                for (int i = r0; i < M; i += RP, cp += step) {
                    const float gi = as[i];
                    *(float4 *)cp = make_float4(gi * bv[0], gi * bv[1 % VE], gi * bv[2 % VE], gi * bv[3 % VE]);
                }
            } else {
                unsigned short *cp = (unsigned short *)C.p + base_c[g] + (int64_t)r0 * C.rs + j;
                const int64_t step = (int64_t)RP * C.rs;
#pragma unroll 4
                for (int i = r0; i < M; i += RP, cp += step) {
                    const float gi = as[i];
                    unsigned w[4];
#pragma unroll
                    for (int q = 0; q < 4; ++q) w[q] = pack2(C.dt, gi * bv[(2 * q) % VE], gi * bv[(2 * q + 1) % VE]);
                    *(uint4 *)cp = make_uint4(w[0], w[1], w[2], w[3]);
                }
            }
        }
    }
}

/* ---- flat: rows's column vector a thread, over the flattened rows (item g, row i) of the
   iteration, RP apart, so that items of fewer than RP rows (n32 f16: M 32, RP 64) keep every
   thread storing; b's values reloaded when the thread's item changes ---- */
template <int VE>
__global__ void __launch_bounds__(256) flat_kernel(int64_t nbatch, int64_t count, int M, int N, int G, float alpha, dev_op A,
                                                   dev_op B, dev_op C) {
    extern __shared__ float sm[];
    __shared__ int64_t base_c[16];
    const int NV = N / VE, MN = M + N, RP = 256 / NV, jv = threadIdx.x % NV, r0 = threadIdx.x / NV, j = jv * VE;
    const int g0 = r0 / M, i0 = r0 - g0 * M;
    for (int64_t b0 = blockIdx.x * (int64_t)G; b0 < nbatch; b0 += (int64_t)gridDim.x * G) {
        const int g_n = stage_items(b0, nbatch, count, M, N, G, A, B, C, sm, base_c);
        float bv[VE];
        for (int g = g0, i = i0, gl = -1; g < g_n;) {
            const float *as = sm + g * MN;
            if (g != gl) { /* scalar loads: the item's b is at an arbitrary word (M + N a row of the staging) */
#pragma unroll
                for (int q = 0; q < VE; ++q) bv[q] = alpha * as[M + j + q];
                gl = g;
            }
            const float gi = as[i];
            const int64_t ci = base_c[g] + (int64_t)i * C.rs + j;
            if (VE == 4) {
                *(float4 *)((float *)C.p + ci) = make_float4(gi * bv[0], gi * bv[1 % VE], gi * bv[2 % VE], gi * bv[3 % VE]);
            } else {
                unsigned w[4];
#pragma unroll
                for (int q = 0; q < 4; ++q) w[q] = pack2(C.dt, gi * bv[(2 * q) % VE], gi * bv[(2 * q + 1) % VE]);
                *(uint4 *)((unsigned short *)C.p + ci) = make_uint4(w[0], w[1], w[2], w[3]);
            }
            for (i += RP; i >= M; i -= M) ++g;
        }
    }
}

__global__ void write_kernel(uint4 *p, int64_t n16) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n16; i += (int64_t)gridDim.x * blockDim.x)
        p[i] = make_uint4(0, 0, 0, 0);
}

static int g_sms;

static void run_shape(int argc, char **argv, int64_t S, int64_t T, int n, int cdt, double bw) {
    const int64_t nb = S * (T - 1), cn = S * T * (int64_t)n * n;
    const int ve = cdt == 0 ? 4 : 8;
    void *g = NULL, *h = NULL, *c = NULL, *ref = NULL;
    const size_t cbytes = (size_t)cn * (cdt == 0 ? 4 : 2);
    cudaMalloc(&g, (size_t)S * T * n * 4), cudaMalloc(&h, (size_t)S * T * n * (cdt == 0 ? 4 : 2));
    cudaMalloc(&c, cbytes), cudaMalloc(&ref, cbytes);
    fill_kernel<<<4096, 256>>>(g, 0, S * T * n, 1.f, 11u);
    fill_kernel<<<4096, 256>>>(h, cdt, S * T * n, 1.f, 12u);
    /* the backward's views: item (s, k) = step k + 1; g_{k+1} (f32 work), h_k (16-bit or f32), dA_{k+1} */
    dev_op A = {(char *)g + (size_t)n * 4, 0, 1, 1, n, T * (int64_t)n};
    dev_op B = {h, cdt, 1, 1, n, T * (int64_t)n};
    dev_op C = {(char *)c + (size_t)n * n * (cdt == 0 ? 4 : 2), cdt, n, 1, (int64_t)n * n, T * (int64_t)n * n};
    const double bytes = (double)nb * n * n * (cdt == 0 ? 4 : 2) + (double)nb * n * (4 + (cdt == 0 ? 4 : 2));
    printf("## S%lld T%lld n%d C %s: %.1f MB written, floor %.4f ms (bytes / copy bandwidth)\n", (long long)S, (long long)T, n,
           cdt == 0 ? "f32" : "f16", bytes / 1e6, bytes / bw);
    int have_ref = 0;
    auto check = [&](const char *name, double ms) {
        double d = 0;
        if (!have_ref) cudaMemcpy(ref, c, cbytes, cudaMemcpyDeviceToDevice), have_ref = 1;
        else d = max_rel_diff(c, ref, cdt, cn);
        printf("  %-12s %8.4f ms  %6.2f x floor  %6.0f GB/s  max|diff|/max|ref| %.1e\n", name, ms, ms / (bytes / bw),
               bytes / ms / 1e6, d);
    };
    {
        const int G = group_of(n, n, ve);
        const int64_t blocks = (nb + G - 1) / G;
        const size_t smb = (size_t)G * (2 * n) * 4;
        cudaMemset(c, 0xff, cbytes);
        double ms = time_ms([&] {
            block_kernel<<<(unsigned)(blocks < 65536 * 4 ? blocks : 65536 * 4), 256, smb>>>(nb, T - 1, n, n, G, 1.f, A, B, C, ve);
        });
        check("block", ms); /* the reference (first) */
    }
    for (int gm : {1, 2, 4}) { /* G: the block kernel's group, times gm (<= 16 items, 48 KB) */
        char name[32];
        snprintf(name, sizeof name, "rows/G%d", gm);
        if (!dev_want(argc, argv, name)) continue;
        int G = group_of(n, n, ve) * gm;
        if (G > 16) G = 16;
        if ((size_t)G * 2 * n * 4 > 48 * 1024) G = 48 * 1024 / (2 * n * 4);
        const int64_t blocks = (nb + G - 1) / G;
        const size_t smb = (size_t)G * (2 * n) * 4;
        cudaMemset(c, 0xff, cbytes);
        double ms = time_ms([&] {
            if (cdt == 0) rows_kernel<4><<<(unsigned)(blocks < 65536 * 4 ? blocks : 65536 * 4), 256, smb>>>(nb, T - 1, n, n, G, 1.f, A, B, C);
            else rows_kernel<8><<<(unsigned)(blocks < 65536 * 4 ? blocks : 65536 * 4), 256, smb>>>(nb, T - 1, n, n, G, 1.f, A, B, C);
        });
        check(name, ms);
    }
    for (int gm : {1, 2}) {
        char name[32];
        snprintf(name, sizeof name, "flat/G%d", gm);
        if (!dev_want(argc, argv, name)) continue;
        int G = group_of(n, n, ve) * gm;
        if (G > 16) G = 16;
        const int64_t blocks = (nb + G - 1) / G;
        const size_t smb = (size_t)G * (2 * n) * 4;
        cudaMemset(c, 0xff, cbytes);
        double ms = time_ms([&] {
            if (cdt == 0) flat_kernel<4><<<(unsigned)(blocks < 65536 * 4 ? blocks : 65536 * 4), 256, smb>>>(nb, T - 1, n, n, G, 1.f, A, B, C);
            else flat_kernel<8><<<(unsigned)(blocks < 65536 * 4 ? blocks : 65536 * 4), 256, smb>>>(nb, T - 1, n, n, G, 1.f, A, B, C);
        });
        check(name, ms);
    }
    for (int per_sm : {8, 16, 32}) {
        char name[32];
        snprintf(name, sizeof name, "warp/%d", per_sm);
        if (!dev_want(argc, argv, name)) continue;
        cudaMemset(c, 0xff, cbytes);
        const unsigned blocks = (unsigned)(g_sms * per_sm);
        double ms = time_ms([&] {
            if (cdt == 0) warp_kernel<4, 4><<<blocks, 256>>>(nb, T - 1, n, n, 1.f, A, B, C);
            else warp_kernel<8, 4><<<blocks, 256>>>(nb, T - 1, n, n, 1.f, A, B, C);
        });
        check(name, ms);
    }
    if (dev_want(argc, argv, "write")) {
        const int64_t n16 = (int64_t)(cbytes / 16);
        double ms = time_ms([&] { write_kernel<<<g_sms * 16, 256>>>((uint4 *)c, n16); });
        printf("  %-12s %8.4f ms  %6.2f x floor  %6.0f GB/s  (zeros over all of C)\n", "write", ms, ms / (bytes / bw),
               (double)cbytes / ms / 1e6);
    }
    dev_sync_check();
    cudaFree(g), cudaFree(h), cudaFree(c), cudaFree(ref);
}

int main(int argc, char **argv) {
    cudaDeviceProp pr;
    cudaGetDeviceProperties(&pr, 0);
    g_sms = pr.multiProcessorCount;
    const double bw = copy_bandwidth();
    printf("# dev_outer on %s (%d SMs), copy bandwidth %.0f GB/s\n", pr.name, g_sms, bw / 1e6);
    run_shape(argc, argv, 16, 4096, 64, 1, bw);
    run_shape(argc, argv, 128, 1024, 32, 1, bw);
    run_shape(argc, argv, 8, 1024, 128, 1, bw);
    run_shape(argc, argv, 8, 4096, 64, 0, bw);
    return 0;
}
