/* cc -std=c99 -O2 -D_POSIX_C_SOURCE=200809L -fopenmp -I. examples/quickstart_blas.c -lblis -lm -o quickstart_blas && ./quickstart_blas

   The same dense recurrence on the BLIS backend (ssm_blas.h) and on the reference backend,
   side by side in one program. blis.h needs POSIX declarations (-D_POSIX_C_SOURCE=200809L
   under -std=c99); -fopenmp lets the backend spread batches of small GEMMs over threads. */
#define SSM_IMPLEMENTATION
#include "ssm.h"
#define SSM_BLAS_IMPLEMENTATION
#include "ssm_blas.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define S 2
#define T 256
#define N 32

static float A[S][T][N][N], b[S][T][N], h_ref[S][T][N], h_blis[S][T][N];

int main(void) {
    ssm_ctx *ref = NULL, *blis = NULL;
    ssm_ctx_config cfg = ssm_ctx_config_init();
    int64_t shape_A[4] = {S, T, N, N}, shape_b[3] = {S, T, N};
    ssm_tensor tA, tb, th_ref, th_blis;
    ssm_linrec_desc d = ssm_linrec_desc_init();
    double diff = 0, norm = 0;
    int s, t, i, j;
    srand(7);
    for (s = 0; s < S; ++s)
        for (t = 0; t < T; ++t)
            for (i = 0; i < N; ++i) {
                b[s][t][i] = (float)rand() / RAND_MAX - 0.5f;
                for (j = 0; j < N; ++j) A[s][t][i][j] = ((float)rand() / RAND_MAX - 0.5f) * 1.5f / N;
            }
    tA = ssm_tensor_make(A, SSM_F32, ssm_cpu(), 4, shape_A, NULL);
    tb = ssm_tensor_make(b, SSM_F32, ssm_cpu(), 3, shape_b, NULL);
    th_ref = ssm_tensor_make(h_ref, SSM_F32, ssm_cpu(), 3, shape_b, NULL);
    th_blis = ssm_tensor_make(h_blis, SSM_F32, ssm_cpu(), 3, shape_b, NULL);
    if (ssm_ctx_create(&cfg, &ref) != SSM_OK) return 1;
    cfg.backend = ssm_blas_backend(); /* BLIS for the GEMM-shaped work */
    if (ssm_ctx_create(&cfg, &blis) != SSM_OK) return 1;
    d.method = SSM_LINREC_CR;
    if (ssm_linrec_forward(ref, &d, &tA, &tb, NULL, &th_ref, NULL) != SSM_OK ||
        ssm_linrec_forward(blis, &d, &tA, &tb, NULL, &th_blis, NULL) != SSM_OK) {
        printf("failed: %s%s\n", ssm_ctx_last_error(ref), ssm_ctx_last_error(blis));
        return 1;
    }
    for (s = 0; s < S; ++s)
        for (t = 0; t < T; ++t)
            for (i = 0; i < N; ++i) {
                diff += (h_ref[s][t][i] - h_blis[s][t][i]) * (h_ref[s][t][i] - h_blis[s][t][i]);
                norm += h_ref[s][t][i] * h_ref[s][t][i];
            }
    printf("linrec S=%d T=%d n=%d, cyclic reduction: %s vs %s rel. diff %.2e\n", S, T, N, ssm_ctx_backend_name(blis),
           ssm_ctx_backend_name(ref), sqrt(diff / norm));
    ssm_ctx_destroy(ref);
    ssm_ctx_destroy(blis);
    return sqrt(diff / norm) < 1e-4 ? 0 : 1;
}
