/* One pass over A for the tensor-core chunked recurrence (forward, 16-bit A, m = 1, n = 64, rows of
   A contiguous and 16-byte aligned): h_t = A_t h_{t-1} + b_t from h_{-1} = 0.
   The library's path reads A twice: pass 1 forms each chunk's product P_c and its end e_c from
   zero, pass 2 runs the carries X_{c+1} = P_c X_c + e_c, pass 3 re-runs every chunk from X_c. At
   16-bit n = 64 both passes are issue-bound and A's second read costs the rest: S16 T4096 f16 runs
   at ~2.75x the HBM floor (H200). Here a persistent CTA does all of a chunk while the next
   chunk's tiles stream into the other half of its shared memory:
     1. takes chunks by ticket, chunk c of every sequence before chunk c + 1 (a CTA waits only on
        chunks ticketed before its own, whose owners are resident and never wait on it);
     2. copies the chunk's L tiles of A and its b into shared memory, one cp.async group a tile;
     3. pass 1 as the tiles land, on the library's helpers: two product warps hold Q = P^T in
        registers (ssm__tc_prod_step), an end-state warp runs e (ssm__tc_e_step); P_c and e_c go
        to global memory and the chunk is flagged AGGREGATE;
     4. decoupled look-back: back over the chunks before it to the nearest one flagged INCLUSIVE
        (its end state published), then X <- P_j X + e_j forward over the aggregates between;
        publishes its own end P_c X_c + e_c and flags it INCLUSIVE;
     5. pass 3 from X_c over the tiles still in shared memory (the library's mat-vec, four threads
        a row), writing h.
   A leaves HBM once; each P_c is written once and read only by successors that find it
   AGGREGATE. Chunks are short (L tiles a buffer, two buffers), so look-back depth, not the
   carry chain's length, bounds small S. Writing every P_c (16 KB f32) is 25% of A's bytes at
   L = 8 (16% at 12): variants L4p and L8p keep P_c and e_c in shared memory for the chunk's own
   end and publish them (AGGREGATE) only when the chunk before is not INCLUSIVE yet (L = 12 has
   no room for them).
     make build/dev_onepass       (a link to build/dev_whole, which compiles this harness with the others)
     ./build/dev_onepass [f16|bf16] [L4|L8|L12|L4p|L8p]...    (default: f16, every variant)
     BIN=build/dev_onepass dev/cuda/onepass_run.sh    (each variant in its own process, f16 and bf16)
   Each variant is checked against an f64 host recurrence (S3 T1001, chunks that do not divide T)
   and, on the timed shapes, against the library's forward (auto); rows print ms, the HBM floor
   (A, b and h bytes over the copy bandwidth) and the ratio. Never run on a GPU yet: written while
   no device was lent. */
#define SSM_IMPLEMENTATION
#define SSM_CUDA_IMPLEMENTATION
#include "../../ssm_cuda.h"
#include "../../bench/cuda_common.h"
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <vector>

namespace dev_onepass {

constexpr int W = SSM__TC_N, LD = ssm__tcg<W>::LD, TILE = W * LD, NT = 256;
enum { FLAG_AGG = 1, FLAG_INCL = 2 };

struct chunk_ws { /* per (sequence, chunk): P_c (W x W), e_c, the inclusive end X, the flag; the ticket counter */
    float *P, *E, *X;
    int *flag;
    unsigned *ticket;
};

/* two buffers of L tiles, each with b of its chunk (16-bit), then b as floats and the state twice;
   LAZY: P_c and e_c too */
template <int L, int LAZY> constexpr size_t smem_bytes() {
    return 2 * ((size_t)L * TILE * 2 + (size_t)L * W * 2) + (size_t)L * W * 4 + 2 * W * 4 + (LAZY ? (size_t)(W * W + W) * 4 : 0);
}

__device__ __forceinline__ int ld_acquire(const int *p) {
    int v;
    asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ void st_release(int *p, int v) { asm volatile("st.release.gpu.global.b32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory"); }
/* cp.async.wait_group k for a k known only at run time (k <= 31; larger waits for all) */
__device__ __forceinline__ void wait_groups(int k) {
    switch (k) {
#define DEV_OP_W(K) \
    case K: ssm__tc_wait<K>(); break;
        DEV_OP_W(0) DEV_OP_W(1) DEV_OP_W(2) DEV_OP_W(3) DEV_OP_W(4) DEV_OP_W(5) DEV_OP_W(6) DEV_OP_W(7)
        DEV_OP_W(8) DEV_OP_W(9) DEV_OP_W(10) DEV_OP_W(11) DEV_OP_W(12) DEV_OP_W(13) DEV_OP_W(14) DEV_OP_W(15)
        DEV_OP_W(16) DEV_OP_W(17) DEV_OP_W(18) DEV_OP_W(19) DEV_OP_W(20) DEV_OP_W(21) DEV_OP_W(22) DEV_OP_W(23)
        DEV_OP_W(24) DEV_OP_W(25) DEV_OP_W(26) DEV_OP_W(27) DEV_OP_W(28) DEV_OP_W(29) DEV_OP_W(30) DEV_OP_W(31)
#undef DEV_OP_W
    default: ssm__tc_wait<0>();
    }
}
/* Ticket t's chunk: sequence s, chunk c, its first step t0 and its length (0 past the last ticket) */
struct chunk_at {
    int s, c, len;
    int64_t t0;
};
template <int L> __device__ __forceinline__ chunk_at chunk_of(int t, int S, int64_t T, int total) {
    chunk_at ch;
    ch.s = t % S, ch.c = t / S, ch.t0 = (int64_t)ch.c * L;
    ch.len = t >= total ? 0 : (int)(T - ch.t0 < L ? T - ch.t0 : L);
    return ch;
}
/* a chunk's tiles and b into buffer `buf`: one commit group a tile, b with the first */
template <int L>
__device__ __forceinline__ void issue_chunk(unsigned short *buf, const chunk_at &ch, int64_t T, const unsigned short *A,
                                            const unsigned short *b, int tid) {
    unsigned short *bsh = buf + L * TILE;
    const unsigned short *bg = b + ((int64_t)ch.s * T + ch.t0) * W;
    for (int i = tid; i < ch.len * W / 8; i += NT) ssm__tc_cp16(bsh + 8 * i, bg + 8 * i);
    for (int u = 0; u < ch.len; ++u) {
        ssm__tc_load_tile<W, NT, 0, 0, LD>(buf + u * TILE, A + ((int64_t)ch.s * T + ch.t0 + u) * W * W, W, W, tid);
        ssm__tc_commit();
    }
}

/* X <- P X + e (P row-major W x W, e: a chunk's map, in global memory read past L1 when GL, else
   in shared memory), x from `from`, the result into `to`; four threads a row. Ends with a barrier. */
template <int GL> __device__ __forceinline__ void hop(const float *P, const float *e, const float *from, float *to, int tid) {
    const int row = tid >> 2, q = tid & 3;
    const float4 *pr = (const float4 *)(P + row * W + 16 * q);
    const float4 *x = (const float4 *)(from + 16 * q);
    float v = 0.f;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const float4 p = GL ? __ldcg(pr + i) : pr[i], y = x[i];
        v += p.x * y.x + p.y * y.y + p.z * y.z + p.w * y.w;
    }
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    v += __shfl_xor_sync(0xffffffffu, v, 2);
    if (q == 0) to[row] = v + (GL ? __ldcg(e + row) : e[row]);
    __syncthreads();
}

/* LAZY (variants L4p, L8p): P_c and e_c stay in shared memory; the chunk publishes them (and is
   AGGREGATE) only when the chunk before it is not INCLUSIVE yet, else it goes straight to its end. */
template <int BF, int L, int LAZY>
__global__ void __launch_bounds__(NT, 1) onepass_kernel(int S, int64_t T, int nc, const unsigned short *A, const unsigned short *b,
                                                       unsigned short *h, chunk_ws ws) {
    extern __shared__ __align__(16) unsigned char dev_op_sm[];
    typedef ssm__tcg<W, BF> G;
    constexpr int MB = G::MB, NK = W / 16, BUF = L * TILE + L * W; /* halfs a buffer: tiles, then b */
    unsigned short *bufs = (unsigned short *)dev_op_sm;
    float *bf = (float *)(bufs + 2 * BUF); /* b of the chunk in hand, as floats */
    float *xs = bf + L * W;                /* the carry, then pass 3's state: two W rows */
    float *Ps = xs + 2 * W, *es = Ps + W * W; /* LAZY: P_c, e_c */
    __shared__ int sh_next, sh_f;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, row = tid >> 2, q = tid & 3;
    const int total = S * nc, isP = warp < G::PW, isE = warp == G::PW, r0 = warp * 16 * MB;
    if (tid == 0) sh_next = (int)atomicAdd(ws.ticket, 1u);
    __syncthreads();
    int t = sh_next, cb = 0;
    chunk_at ch = chunk_of<L>(t, S, T, total);
    issue_chunk<L>(bufs, ch, T, A, b, tid);
    while (t < total) {
        __syncthreads(); /* everyone has read sh_next (and the last chunk's buffer is free) */
        if (tid == 0) sh_next = (int)atomicAdd(ws.ticket, 1u);
        __syncthreads();
        const int tn = sh_next;
        const chunk_at nx = chunk_of<L>(tn, S, T, total);
        issue_chunk<L>(bufs + (cb ^ 1) * BUF, nx, T, A, b, tid);
        const int s = ch.s, c = ch.c, len = ch.len, lenn = nx.len;
        const int64_t t0 = ch.t0, k = (int64_t)s * nc + c;
        const unsigned short *tiles = bufs + cb * BUF, *bsh = tiles + L * TILE;
        /* ---- pass 1: P_c and e_c as the tiles land ---- */
        float acc[MB][W / 8][4];
        unsigned af[MB][NK][4], al[MB][NK][4];
#pragma unroll
        for (int mb = 0; mb < MB; ++mb) ssm__tc_eye<W>(acc[mb], isE ? -W : r0 + mb * 16, lane); /* Q = I, e = 0 */
        for (int u = 0; u < len; ++u) {
            wait_groups(len - 1 - u + lenn);
            __syncthreads();
            if (u == 0) { /* b came with tile 0 */
                for (int i = tid; i < len * W; i += NT) bf[i] = dev_ld(bsh, 1 + BF, i);
                __syncthreads();
            }
            const unsigned short *At = tiles + u * TILE;
            if (isE) ssm__tc_e_step<W, 0, BF, NK>(acc[0], At, bf + u * W, lane);
            else if (isP) ssm__tc_prod_step<W, 0, BF, BF, NK>(acc, af, al, At, lane, MB);
        }
        float *Pc = LAZY ? Ps : ws.P + k * W * W, *ec = LAZY ? es : ws.E + k * W;
        if (isP) {
#pragma unroll
            for (int mb = 0; mb < MB; ++mb) ssm__tc_put_q<W>(Pc, acc[mb], r0 + mb * 16, lane);
        } else if (isE) ssm__tc_put_e<W>(ec, acc[0], lane);
        if (!LAZY) __threadfence();
        __syncthreads();
        /* ---- look-back: X_c, then this chunk's end ---- */
        int cur = 0, fast = 0;
        if (LAZY && c > 0) { /* the chunk before already INCLUSIVE: no aggregate to publish */
            if (tid == 0) sh_f = ld_acquire(ws.flag + k - 1);
            __syncthreads();
            fast = sh_f == FLAG_INCL;
            __syncthreads();
        }
        if (c == 0) {
            if (tid < W) xs[tid] = 0.f;
            __syncthreads();
        } else if (fast) {
            if (tid < W) xs[tid] = __ldcg(ws.X + (k - 1) * W + tid);
            __syncthreads();
        } else {
            if (LAZY) { /* publish P_c and e_c for the chunks after this one */
                for (int i = tid; i < W * W / 4; i += NT) ((float4 *)(ws.P + k * W * W))[i] = ((const float4 *)Ps)[i];
                if (tid < W) ws.E[k * W + tid] = es[tid];
                __threadfence();
                __syncthreads();
            }
            if (tid == 0) st_release(ws.flag + k, FLAG_AGG);
            int j = c - 1;
            for (;;) {
                if (tid == 0) {
                    int f;
                    while ((f = ld_acquire(ws.flag + (int64_t)s * nc + j)) == 0) __nanosleep(32);
                    sh_f = f;
                }
                __syncthreads();
                const int f = sh_f;
                __syncthreads();
                if (f == FLAG_INCL) break;
                --j; /* chunk 0 is always INCLUSIVE: j stays >= 0 */
            }
            if (tid < W) xs[tid] = __ldcg(ws.X + ((int64_t)s * nc + j) * W + tid);
            __syncthreads();
            for (int jj = j + 1; jj < c; ++jj, cur ^= 1) {
                const int64_t kj = (int64_t)s * nc + jj;
                hop<1>(ws.P + kj * W * W, ws.E + kj * W, xs + cur * W, xs + (cur ^ 1) * W, tid);
            }
        }
        hop<!LAZY>(Pc, ec, xs + cur * W, xs + (cur ^ 1) * W, tid); /* the end, X_{c+1} */
        if (tid < W) ws.X[k * W + tid] = xs[(cur ^ 1) * W + tid];
        __threadfence();
        __syncthreads();
        if (tid == 0) st_release(ws.flag + k, FLAG_INCL);
        /* ---- pass 3 from X_c over the tiles in shared memory ---- */
        for (int u = 0; u < len; ++u, cur ^= 1) {
            const unsigned short *At = tiles + u * TILE;
            const float *hc = xs + cur * W;
            const uint4 *ap = (const uint4 *)(At + row * LD + q * (W / 4));
            const float4 *hp = (const float4 *)(hc + q * (W / 4));
            float p0 = 0.f, p1 = 0.f;
#pragma unroll
            for (int j = 0; j < W / 32; ++j) ssm__tc_dot8<BF>(ap[j], hp[2 * j], hp[2 * j + 1], p0, p1);
            float v = p0 + p1;
            v += __shfl_xor_sync(0xffffffffu, v, 1);
            v += __shfl_xor_sync(0xffffffffu, v, 2);
            v += bf[u * W + row];
            if (q == 0) {
                xs[(cur ^ 1) * W + row] = v;
                dev_st(h, 1 + BF, ((int64_t)s * T + t0 + u) * W + row, v);
            }
            __syncthreads();
        }
        t = tn, ch = nx, cb ^= 1;
    }
    ssm__tc_wait<0>();
}

/* ---- host ---- */
/* The launch's end, or the program's with a message after 10 s: a look-back that waits on a flag
   nobody sets would hang the whole device run (dev/cuda/onepass_run.sh runs each variant alone). */
static cudaError_t finish(const char *what) {
    cudaEvent_t ev;
    cudaError_t e;
    cudaEventCreate(&ev);
    cudaEventRecord(ev);
    const time_t t0 = time(NULL);
    while ((e = cudaEventQuery(ev)) == cudaErrorNotReady)
        if (time(NULL) - t0 > 10) {
            printf("  %s: HANG (no completion after 10 s)\n", what);
            fflush(stdout);
            _exit(3);
        }
    cudaEventDestroy(ev);
    return e;
}
struct runner {
    int bf, L, lazy, S, nc, sms;
    int64_t T;
    chunk_ws ws;
    void *flags; /* flag array and ticket, zeroed before each run */
    size_t flag_bytes;
};
template <int BF, int L, int LAZY> static cudaError_t launch(runner &r, const void *A, const void *b, void *h) {
    auto k = onepass_kernel<BF, L, LAZY>;
    cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem_bytes<L, LAZY>());
    cudaMemsetAsync(r.flags, 0, r.flag_bytes);
    const int total = r.S * r.nc, grid = total < r.sms ? total : r.sms;
    k<<<grid, NT, smem_bytes<L, LAZY>()>>>(r.S, r.T, r.nc, (const unsigned short *)A, (const unsigned short *)b, (unsigned short *)h, r.ws);
    return cudaGetLastError();
}
static cudaError_t run(runner &r, const void *A, const void *b, void *h) {
#define DEV_OP_L(L_, Z_) \
    if (r.L == L_ && r.lazy == Z_) return r.bf ? launch<1, L_, Z_>(r, A, b, h) : launch<0, L_, Z_>(r, A, b, h);
    DEV_OP_L(4, 0) DEV_OP_L(8, 0) DEV_OP_L(12, 0) DEV_OP_L(4, 1) DEV_OP_L(8, 1)
#undef DEV_OP_L
    return cudaErrorInvalidValue;
}
static int make_runner(runner &r, int bf, int L, int lazy, int S, int64_t T) {
    cudaDeviceProp pr;
    cudaGetDeviceProperties(&pr, 0);
    r.bf = bf, r.L = L, r.lazy = lazy, r.S = S, r.T = T, r.nc = (int)((T + L - 1) / L), r.sms = pr.multiProcessorCount;
    const size_t maps = (size_t)S * r.nc;
    r.flag_bytes = maps * sizeof(int) + 16;
    if (cudaMalloc(&r.ws.P, maps * W * W * 4) || cudaMalloc(&r.ws.E, maps * W * 4) || cudaMalloc(&r.ws.X, maps * W * 4) ||
        cudaMalloc(&r.flags, r.flag_bytes))
        return 0;
    r.ws.flag = (int *)r.flags, r.ws.ticket = (unsigned *)((char *)r.flags + maps * sizeof(int));
    return 1;
}
static void free_runner(runner &r) { cudaFree(r.ws.P), cudaFree(r.ws.E), cudaFree(r.ws.X), cudaFree(r.flags); }

static double half_to_double(unsigned short x, int bf) {
    if (bf) return (double)__bfloat162float(__ushort_as_bfloat16(x));
    return (double)__half2float(__ushort_as_half(x));
}
/* max |h - ref| / max |ref| against an f64 host recurrence on the same 16-bit inputs */
static double check_host(const void *Ad, const void *bd, const void *hd, int bf, int S, int64_t T) {
    std::vector<unsigned short> A((size_t)S * T * W * W), b((size_t)S * T * W), h((size_t)S * T * W);
    cudaMemcpy(A.data(), Ad, A.size() * 2, cudaMemcpyDeviceToHost);
    cudaMemcpy(b.data(), bd, b.size() * 2, cudaMemcpyDeviceToHost);
    cudaMemcpy(h.data(), hd, h.size() * 2, cudaMemcpyDeviceToHost);
    double err = 0, mx = 0;
    std::vector<double> x(W), y(W);
    for (int s = 0; s < S; ++s) {
        std::fill(x.begin(), x.end(), 0.0);
        for (int64_t t = 0; t < T; ++t) {
            const unsigned short *At = &A[((size_t)s * T + t) * W * W];
            for (int i = 0; i < W; ++i) {
                double v = half_to_double(b[((size_t)s * T + t) * W + i], bf);
                for (int j = 0; j < W; ++j) v += half_to_double(At[i * W + j], bf) * x[j];
                y[i] = v;
            }
            x = y;
            for (int i = 0; i < W; ++i) {
                const double got = half_to_double(h[((size_t)s * T + t) * W + i], bf);
                err = fmax(err, fabs(got - x[i])), mx = fmax(mx, fabs(x[i]));
                if (got != got) err = 1e30;
            }
        }
    }
    return err / (mx > 0 ? mx : 1);
}

int harness(int argc, char **argv) {
    int bf = 0, a0 = 1;
    if (argc > 1 && (!strcmp(argv[1], "bf16") || !strcmp(argv[1], "f16"))) bf = !strcmp(argv[1], "bf16"), a0 = 2;
    const ssm_dtype dt = bf ? SSM_BF16 : SSM_F16;
    static const struct { const char *name; int L, lazy; } vars[] = {{"L4", 4, 0}, {"L8", 8, 0}, {"L12", 12, 0}, {"L4p", 4, 1}, {"L8p", 8, 1}};
    const int nv = (int)(sizeof vars / sizeof vars[0]);
    auto want = [&](const char *name) { /* by exact name: L8 must not also pick L8p */
        for (int i = a0; i < argc; ++i)
            if (!strcmp(argv[i], name)) return 1;
        return argc <= a0 ? 1 : 0;
    };
    ssm_ctx *ctx = ctx_with([](ssm_cuda_config &) {});
    if (!ctx) { printf("no CUDA context\n"); return 1; }
    const double bw = copy_bandwidth();
    cudaDeviceProp pr;
    cudaGetDeviceProperties(&pr, 0);
    printf("device %s, %d SMs, copy bandwidth %.0f GB/s, %s\n", pr.name, pr.multiProcessorCount, bw / 1e6, ssm_dtype_name(dt));
    /* correctness: a small shape against f64 (T not a multiple of any L) */
    {
        const int S = 3;
        const int64_t T = 1001;
        void *A = dev_random(dt, (int64_t)S * T * W * W, 0.9f / sqrtf((float)W), 11), *b = dev_random(dt, (int64_t)S * T * W, 1.f, 12);
        void *h = dev_random(dt, (int64_t)S * T * W, 0.f, 13);
        for (int vi = 0; vi < nv; ++vi) {
            const char *nm = vars[vi].name;
            if (!want(nm)) continue;
            runner r;
            if (!make_runner(r, bf, vars[vi].L, vars[vi].lazy, S, T)) { printf("  %s: out of memory\n", nm); continue; }
            cudaMemset(h, 0xFF, (size_t)S * T * W * 2); /* poison: NaN in both types */
            cudaError_t e = run(r, A, b, h);
            if (e == cudaSuccess) e = finish(nm);
            printf("  check S%d T%lld %-4s %s  rel err vs f64 %.2e\n", S, (long long)T, nm, e ? cudaGetErrorString(e) : "ok",
                   e ? -1.0 : check_host(A, b, h, bf, S, T));
            free_runner(r);
        }
        /* the library on the same inputs, for scale */
        int64_t sa[4] = {S, T, W, W}, sb[4] = {S, T, W, 1};
        ssm_tensor tA = ssm_tensor_make(A, dt, ssm_cuda_device(0), 4, sa, NULL), tb = ssm_tensor_make(b, dt, ssm_cuda_device(0), 4, sb, NULL);
        ssm_tensor th = ssm_tensor_make(h, dt, ssm_cuda_device(0), 4, sb, NULL);
        ssm_linrec_desc d = ssm_linrec_desc_init();
        if (ssm_linrec_forward(ctx, &d, &tA, &tb, NULL, &th, NULL) == SSM_OK && cudaDeviceSynchronize() == cudaSuccess)
            printf("  check S%d T%lld lib  rel err vs f64 %.2e\n", S, (long long)T, check_host(A, b, h, bf, S, T));
        cudaFree(A), cudaFree(b), cudaFree(h);
        dev_sync_check();
    }
    /* timed shapes: the headline (S16 T4096), fewer sequences, one long one */
    const struct { int S; int64_t T; } shapes[] = {{16, 4096}, {8, 4096}, {4, 8192}, {1, 8192}};
    for (const auto &sh : shapes) {
        const int S = sh.S;
        const int64_t T = sh.T, nA = (int64_t)S * T * W * W, nb = (int64_t)S * T * W;
        void *A = dev_random(dt, nA, 0.9f / sqrtf((float)W), 1), *b = dev_random(dt, nb, 1.f, 2);
        void *h = dev_random(dt, nb, 0.f, 3), *href = dev_random(dt, nb, 0.f, 4);
        if (!A || !b || !h || !href) { printf("  S%d T%lld: out of memory\n", S, (long long)T); return 1; }
        const double floor_ms = 2.0 * (nA + 2.0 * nb) / bw;
        int64_t sa[4] = {S, T, W, W}, sb[4] = {S, T, W, 1};
        ssm_tensor tA = ssm_tensor_make(A, dt, ssm_cuda_device(0), 4, sa, NULL), tb = ssm_tensor_make(b, dt, ssm_cuda_device(0), 4, sb, NULL);
        ssm_tensor th = ssm_tensor_make(href, dt, ssm_cuda_device(0), 4, sb, NULL);
        ssm_linrec_desc d = ssm_linrec_desc_init();
        if (ssm_linrec_forward(ctx, &d, &tA, &tb, NULL, &th, NULL) != SSM_OK) { printf("  lib: %s\n", ssm_ctx_last_error(ctx)); return 1; }
        const double lms = time_ms([&] { ssm_linrec_forward(ctx, &d, &tA, &tb, NULL, &th, NULL); });
        printf("S%-3d T%-5lld n64 %s  floor %.3f ms\n  lib (auto)  %8.3f ms  x%5.2f\n", S, (long long)T, ssm_dtype_name(dt), floor_ms, lms,
               lms / floor_ms);
        for (int vi = 0; vi < nv; ++vi) {
            const char *nm = vars[vi].name;
            if (!want(nm)) continue;
            runner r;
            if (!make_runner(r, bf, vars[vi].L, vars[vi].lazy, S, T)) { printf("  %s: out of memory\n", nm); continue; }
            cudaMemset(h, 0xFF, (size_t)nb * 2);
            cudaError_t e = run(r, A, b, h);
            if (e == cudaSuccess) e = finish(nm);
            if (e != cudaSuccess) { printf("  onepass %-4s %s\n", nm, cudaGetErrorString(e)); free_runner(r); break; }
            const double diff = max_rel_diff(h, href, dt, nb);
            const double ms = time_ms([&] { run(r, A, b, h); });
            printf("  onepass %-4s %8.3f ms  x%5.2f  (%.2fx lib)  max rel diff vs lib %.2e\n", nm, ms, ms / floor_ms, lms / ms, diff);
            free_runner(r);
        }
        cudaFree(A), cudaFree(b), cudaFree(h), cudaFree(href);
        dev_sync_check();
    }
    ssm_ctx_destroy(ctx);
    return 0;
}
} // namespace dev_onepass

#ifndef SSM_DEV_WHOLE /* alone: nvcc -O3 -arch=sm_90a -std=c++17 -I. dev/cuda/onepass.cu -lcublas -o build/dev_onepass */
int main(int argc, char **argv) { return dev_onepass::harness(argc, argv); }
#endif
