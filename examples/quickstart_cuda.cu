/* nvcc -O3 -arch=sm_90 -I. examples/quickstart_cuda.cu -lcublas -o quickstart_cuda

   Solves a dense recurrence h_t = A_t h_{t-1} + b_t and a decay scan on the GPU with ssm.h's
   CUDA backend and checks both against the CPU reference backend. */
#define SSM_IMPLEMENTATION
#define SSM_CUDA_IMPLEMENTATION
#include "ssm_cuda.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static float *to_gpu(const float *h, size_t n) {
    float *d = NULL;
    cudaMalloc(&d, n * sizeof(float));
    cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice);
    return d;
}

int main(void) {
    enum { S = 4, T = 1000, n = 16, B = 2, R = 8, C = 8 };
    int64_t sa[4] = {S, T, n, n}, sb[3] = {S, T, n}, sx[4] = {B, T, R, C}, sl[3] = {B, T, R};
    size_t na = (size_t)S * T * n * n, nb = (size_t)S * T * n, nx = (size_t)B * T * R * C, nl = (size_t)B * T * R;
    float *A = (float *)malloc(na * 4), *b = (float *)malloc(nb * 4), *h = (float *)malloc(nb * 4), *hg = (float *)malloc(nb * 4);
    float *x = (float *)malloc(nx * 4), *ld = (float *)malloc(nl * 4), *o = (float *)malloc(nx * 4), *og = (float *)malloc(nx * 4);
    size_t i;
    double e1 = 0, e2 = 0;
    for (i = 0; i < na; ++i) A[i] = (float)((rand() / (double)RAND_MAX - 0.5) * 0.4);
    for (i = 0; i < nb; ++i) b[i] = (float)(rand() / (double)RAND_MAX - 0.5);
    for (i = 0; i < nx; ++i) x[i] = (float)(rand() / (double)RAND_MAX - 0.5);
    for (i = 0; i < nl; ++i) ld[i] = (float)(-0.2 * rand() / (double)RAND_MAX); /* per-step log decays */

    ssm_ctx *cpu, *gpu;
    ssm_ctx_config cfg = ssm_ctx_config_init();
    ssm_cuda_config cc = ssm_cuda_config_init(); /* device 0, default stream */
    if (ssm_ctx_create(&cfg, &cpu) != SSM_OK) return 1;
    cfg.backend = ssm_cuda_backend();
    cfg.backend_config = &cc;
    if (ssm_ctx_create(&cfg, &gpu) != SSM_OK) { printf("no CUDA context (is there a GPU?)\n"); return 1; }

    ssm_linrec_desc d = ssm_linrec_desc_init(); /* AUTO: the backend picks the method */
    ssm_tensor tA = ssm_tensor_make(A, SSM_F32, ssm_cpu(), 4, sa, NULL), tb = ssm_tensor_make(b, SSM_F32, ssm_cpu(), 3, sb, NULL);
    ssm_tensor th = ssm_tensor_make(h, SSM_F32, ssm_cpu(), 3, sb, NULL);
    ssm_linrec_forward(cpu, &d, &tA, &tb, NULL, &th, NULL);
    float *dA = to_gpu(A, na), *db = to_gpu(b, nb), *dh = to_gpu(h, nb);
    ssm_tensor gA = ssm_tensor_make(dA, SSM_F32, ssm_cuda_device(0), 4, sa, NULL), gb = ssm_tensor_make(db, SSM_F32, ssm_cuda_device(0), 3, sb, NULL);
    ssm_tensor gh = ssm_tensor_make(dh, SSM_F32, ssm_cuda_device(0), 3, sb, NULL);
    ssm_linrec_stats st;
    d.stats = &st;
    ssm_result r = ssm_linrec_forward(gpu, &d, &gA, &gb, NULL, &gh, NULL);
    if (r != SSM_OK) { printf("linrec: %s: %s\n", ssm_result_string(r), ssm_ctx_last_error(gpu)); return 1; }
    cudaMemcpy(hg, dh, nb * 4, cudaMemcpyDeviceToHost); /* synchronizes the default stream */
    for (i = 0; i < nb; ++i) e1 = fmax(e1, fabs(hg[i] - h[i]));
    printf("linrec S=%d T=%d n=%d on the GPU (method %s): max |gpu - cpu| = %.2e\n", S, T, n, ssm_linrec_method_name(st.method), e1);

    ssm_decay_desc dd = ssm_decay_desc_init();
    dd.input = SSM_DECAY_PER_STEP;
    ssm_tensor tl = ssm_tensor_make(ld, SSM_F32, ssm_cpu(), 3, sl, NULL), tx = ssm_tensor_make(x, SSM_F32, ssm_cpu(), 4, sx, NULL);
    ssm_tensor to = ssm_tensor_make(o, SSM_F32, ssm_cpu(), 4, sx, NULL);
    ssm_decay_forward(cpu, &dd, &tl, &tx, NULL, &to, NULL);
    float *dl = to_gpu(ld, nl), *dx = to_gpu(x, nx), *dout = to_gpu(o, nx);
    ssm_tensor gl = ssm_tensor_make(dl, SSM_F32, ssm_cuda_device(0), 3, sl, NULL), gx = ssm_tensor_make(dx, SSM_F32, ssm_cuda_device(0), 4, sx, NULL);
    ssm_tensor go = ssm_tensor_make(dout, SSM_F32, ssm_cuda_device(0), 4, sx, NULL);
    r = ssm_decay_forward(gpu, &dd, &gl, &gx, NULL, &go, NULL);
    if (r != SSM_OK) { printf("decay: %s: %s\n", ssm_result_string(r), ssm_ctx_last_error(gpu)); return 1; }
    cudaMemcpy(og, dout, nx * 4, cudaMemcpyDeviceToHost);
    for (i = 0; i < nx; ++i) e2 = fmax(e2, fabs(og[i] - o[i]));
    printf("decay scan B=%d T=%d R=%d C=%d on the GPU: max |gpu - cpu| = %.2e\n", B, T, R, C, e2);
    ssm_ctx_destroy(gpu);
    ssm_ctx_destroy(cpu);
    cudaFree(dA), cudaFree(db), cudaFree(dh), cudaFree(dl), cudaFree(dx), cudaFree(dout);
    free(A), free(b), free(h), free(hg), free(x), free(ld), free(o), free(og);
    return e1 < 1e-3 && e2 < 1e-3 ? 0 : 1;
}
