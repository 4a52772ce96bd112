/* Decay-scan kernel variants side by side (dev harness for ssm_cuda.h's decay scan): the
   look-back kernel against the chunked scan and the tiled kernel in several configurations
   (each forced through the kernel-choice fields of ssm_cuda_config, one context per variant),
   forward and backward, on the bench's four decay rows and long sequences with few columns
   (B1 T65536 / T8192 D64, B4 T4096 D16). Each variant's outputs are compared on the GPU with
   the look-back kernel's (max |diff| / max |ref|).
     build/dev_decay_variants               look-back, chunked and auto only
     build/dev_decay_variants full          every variant
     build/dev_decay_variants NAME...       the variants whose names contain NAME (e.g. "cw16")
   nvcc -O3 -arch=sm_90 -I. -std=c++17 dev/cuda/decay_variants.cu tests/cuda_impl.cu -lcublas \
     -o build/dev_decay_variants   (or make build/dev_decay_variants) */
#define SSM_IMPLEMENTATION
#include "ssm_cuda.h"
#include "bench/cuda_common.h"
#include <string.h>
#include <algorithm>
#include <stdio.h>
#include <vector>

static double g_bw;
/* the ssm_cuda_config fields: decay_kernel, decay_tile_cols, _steps, _vec, decay_prefetch */
struct variant { const char *name; int path, cw, ts, v, pf; };

static ssm_ctx *ctx_for(const variant &v) {
    ssm_ctx *ctx = NULL;
    ssm_ctx_config cfg = ssm_ctx_config_init();
    ssm_cuda_config cc = ssm_cuda_config_init();
    cc.decay_kernel = v.path, cc.decay_tile_cols = v.cw, cc.decay_tile_steps = v.ts;
    cc.decay_tile_vec = v.v == 4 ? 4 : 0, cc.decay_prefetch = v.pf;
    cfg.backend = ssm_cuda_backend();
    cfg.backend_config = &cc;
    return ssm_ctx_create(&cfg, &ctx) == SSM_OK ? ctx : NULL;
}

static void shape(ssm_dtype dt, int64_t B, int64_t T, int64_t D, const std::vector<variant> &vs) {
    int64_t sx[4] = {B, T, D, D}, sl[3] = {B, T, D}, n = B * T * D * D;
    size_t es = dt.bits / 8;
    void *x = dev_random(dt, n, 1.f, 7), *ld = dev_random(dt, B * T * D, T > 8192 ? 0.01f : 0.05f, 8), *o = dev_random(dt, n, 0, 9);
    void *dout = dev_random(dt, n, 1.f, 10), *dx = dev_random(dt, n, 0, 11), *dl = dev_random(dt, B * T * D, 0, 12);
    void *o0 = dev_random(dt, n, 0, 13), *dx0 = dev_random(dt, n, 0, 14), *dl0 = dev_random(dt, B * T * D, 0, 15);
    ssm_device dev = ssm_cuda_device(0);
    ssm_tensor tx = ssm_tensor_make(x, dt, dev, 4, sx, NULL), tl = ssm_tensor_make(ld, dt, dev, 3, sl, NULL);
    ssm_tensor to = ssm_tensor_make(o, dt, dev, 4, sx, NULL), tdo = ssm_tensor_make(dout, dt, dev, 4, sx, NULL);
    ssm_tensor tdx = ssm_tensor_make(dx, dt, dev, 4, sx, NULL), tdl = ssm_tensor_make(dl, dt, dev, 3, sl, NULL);
    ssm_tensor to0 = ssm_tensor_make(o0, dt, dev, 4, sx, NULL), tdx0 = ssm_tensor_make(dx0, dt, dev, 4, sx, NULL);
    ssm_tensor tdl0 = ssm_tensor_make(dl0, dt, dev, 3, sl, NULL);
    ssm_decay_desc d = ssm_decay_desc_init();
    d.input = SSM_DECAY_PER_STEP;
    double fl = (double)es * (2.0 * n + B * T * D) / g_bw, bfl = (double)es * (3.0 * n + 2.0 * B * T * D) / g_bw;
    { /* reference: the look-back kernel */
        ssm_ctx *ctx = ctx_for(variant{"lookback", 1, 0, 0, 0, 0});
        ssm_decay_forward(ctx, &d, &tl, &tx, NULL, &to0, NULL);
        ssm_decay_backward(ctx, &d, &tl, NULL, &to0, &tdo, NULL, &tdx0, &tdl0, NULL);
        cudaDeviceSynchronize();
        ssm_ctx_destroy(ctx);
    }
    for (const variant &v : vs) {
        ssm_ctx *ctx = ctx_for(v);
        if (!ctx) { printf("  %-16s: bad config\n", v.name); continue; }
        cudaMemset(o, 0xff, n * es), cudaMemset(dx, 0xff, n * es), cudaMemset(dl, 0xff, B * T * D * es);
        ssm_result r1 = ssm_decay_forward(ctx, &d, &tl, &tx, NULL, &to, NULL);
        ssm_result r2 = ssm_decay_backward(ctx, &d, &tl, NULL, &to0, &tdo, NULL, &tdx, &tdl, NULL);
        cudaError_t ce = cudaDeviceSynchronize();
        if (r1 != SSM_OK || r2 != SSM_OK || ce != cudaSuccess) {
            printf("  %-4s B%lld T%lld %-16s FAILED %s %s\n", ssm_dtype_name(dt), (long long)B, (long long)T, v.name,
                   ssm_ctx_last_error(ctx), cudaGetErrorString(ce));
            ssm_ctx_destroy(ctx);
            continue;
        }
        double eo = max_rel_diff(o, o0, dt, n), ex = max_rel_diff(dx, dx0, dt, n), el = max_rel_diff(dl, dl0, dt, B * T * D);
        double ms = time_ms([&] { ssm_decay_forward(ctx, &d, &tl, &tx, NULL, &to, NULL); }, 15, 1e30);
        double bms = time_ms([&] { ssm_decay_backward(ctx, &d, &tl, NULL, &to0, &tdo, NULL, &tdx, &tdl, NULL); }, 15, 1e30);
        printf("  %-4s B%-2lld T%-5lld %-16s fwd %7.3f ms x%5.2f (%3.0f%% bw)  bwd %7.3f ms x%5.2f  bwd/fwd %4.2f  err o %.1e dx %.1e dl %.1e\n",
               ssm_dtype_name(dt), (long long)B, (long long)T, v.name, ms, ms / fl, 100 * fl / ms, bms, bms / bfl, bms / ms, eo, ex, el);
        fflush(stdout);
        ssm_ctx_destroy(ctx);
    }
    cudaFree(x), cudaFree(ld), cudaFree(o), cudaFree(dout), cudaFree(dx), cudaFree(dl), cudaFree(o0), cudaFree(dx0), cudaFree(dl0);
}

int main(int argc, char **argv) {
    cudaDeviceProp prop;
    int full = argc > 1 && !strcmp(argv[1], "full");
    if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) { printf("no CUDA device\n"); return 1; }
    g_bw = copy_bandwidth(15, 1e30);
    printf("device %s, %d SMs, copy bandwidth %.0f GB/s\n", prop.name, prop.multiProcessorCount, g_bw * 1e-6);
    std::vector<variant> v32 = {{"lookback", 1, 0, 0, 0, 0},       {"chunked", 3, 0, 0, 0, 0}, {"auto", 0, 0, 0, 0, 0},
                                {"tile cw8 ts4", 2, 8, 4, 0, 1},   {"tile cw8 ts4 pf", 2, 8, 4, 0, 2},
                                {"tile cw4 ts4 pf", 2, 4, 4, 0, 2}, {"tile cw16 ts4 pf", 2, 16, 4, 0, 2},
                                {"tile cw8 ts8 pf", 2, 8, 8, 0, 2}, {"tile cw16 ts8", 2, 16, 8, 0, 1},
                                {"tile cw16 ts8 pf", 2, 16, 8, 0, 2}, {"tile cw4 ts8 pf", 2, 4, 8, 0, 2}};
    std::vector<variant> v16 = {{"lookback", 1, 0, 0, 0, 0},          {"chunked", 3, 0, 0, 0, 0}, {"auto", 0, 0, 0, 0, 0},
                                {"tile v8 cw8 ts8", 2, 8, 8, 8, 1},    {"tile v8 cw8 ts8 pf", 2, 8, 8, 8, 2},
                                {"tile v8 cw4 ts8 pf", 2, 4, 8, 8, 2}, {"tile v8 cw4 ts4", 2, 4, 4, 8, 1},
                                {"tile v8 cw4 ts4 pf", 2, 4, 4, 8, 2}, {"tile v8 cw8 ts4 pf", 2, 8, 4, 8, 2},
                                {"tile v4 cw8 ts4 pf", 2, 8, 4, 4, 2}, {"tile v4 cw4 ts4 pf", 2, 4, 4, 4, 2}};
    if (argc > 1 && !full) { /* the named variants */
        auto pick = [&](std::vector<variant> &vs) {
            std::vector<variant> keep;
            for (const variant &v : vs)
                for (int a = 1; a < argc; ++a)
                    if (strstr(v.name, argv[a])) { keep.push_back(v); break; }
            vs = keep;
        };
        pick(v32), pick(v16);
    } else if (!full) {
        v32 = {{"lookback", 1, 0, 0, 0, 0}, {"chunked", 3, 0, 0, 0, 0}, {"auto", 0, 0, 0, 0, 0}}, v16 = v32;
    }
    printf("== variants (fwd: x + out; bwd: out + dout + dx; x = time / floor)\n");
    shape(SSM_F32, 8, 4096, 64, v32);
    shape(SSM_F32, 2, 1024, 64, v32);
    shape(SSM_F16, 8, 4096, 64, v16);
    shape(SSM_BF16, 2, 1024, 64, v16);
    shape(SSM_F16, 1, 65536, 64, v16); /* long sequences, few columns: the look-back's chain of hand-offs */
    shape(SSM_F32, 1, 65536, 64, v32);
    shape(SSM_F16, 1, 8192, 64, v16);
    shape(SSM_F32, 4, 4096, 16, v32);
    return 0;
}
