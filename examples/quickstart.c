/* cc -std=c99 -O2 -I. examples/quickstart.c -lm -o quickstart && ./quickstart

   Solves a batch of dense linear recurrences h_t = A_t h_{t-1} + b_t two ways (sequential
   and cyclic reduction), backpropagates through one, and runs a decay scan. */
#define SSM_IMPLEMENTATION
#include "ssm.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define S 2
#define T 300
#define N 8

static float A[S][T][N][N], b[S][T][N], h_seq[S][T][N], h_cr[S][T][N];

int main(void) {
    ssm_ctx *ctx;
    ssm_ctx_config cfg = ssm_ctx_config_init(); /* reference backend, default allocator */
    int64_t shape_A[4] = {S, T, N, N}, shape_b[3] = {S, T, N};
    ssm_tensor tA, tb, th_seq, th_cr;
    ssm_linrec_desc d = ssm_linrec_desc_init();
    ssm_linrec_stats st;
    double diff = 0, norm = 0;
    int s, t, i, j;
    if (ssm_ctx_create(&cfg, &ctx) != SSM_OK) return 1;
    srand(7);
    for (s = 0; s < S; ++s)
        for (t = 0; t < T; ++t)
            for (i = 0; i < N; ++i) {
                b[s][t][i] = (float)rand() / RAND_MAX - 0.5f;
                for (j = 0; j < N; ++j) A[s][t][i][j] = ((float)rand() / RAND_MAX - 0.5f) * 1.5f / N;
            }
    /* m = 1: b and h may drop the trailing state-column dimension */
    tA = ssm_tensor_make(A, SSM_F32, ssm_cpu(), 4, shape_A, NULL);
    tb = ssm_tensor_make(b, SSM_F32, ssm_cpu(), 3, shape_b, NULL);
    th_seq = ssm_tensor_make(h_seq, SSM_F32, ssm_cpu(), 3, shape_b, NULL);
    th_cr = ssm_tensor_make(h_cr, SSM_F32, ssm_cpu(), 3, shape_b, NULL);

    d.method = SSM_LINREC_SEQUENTIAL;
    if (ssm_linrec_forward(ctx, &d, &tA, &tb, NULL, &th_seq, NULL) != SSM_OK) goto fail;
    d.method = SSM_LINREC_CR;
    d.stats = &st;
    if (ssm_linrec_forward(ctx, &d, &tA, &tb, NULL, &th_cr, NULL) != SSM_OK) goto fail;
    for (s = 0; s < S; ++s)
        for (t = 0; t < T; ++t)
            for (i = 0; i < N; ++i) {
                diff += (h_seq[s][t][i] - h_cr[s][t][i]) * (h_seq[s][t][i] - h_cr[s][t][i]);
                norm += h_seq[s][t][i] * h_seq[s][t][i];
            }
    printf("linrec S=%d T=%d n=%d: cyclic reduction vs sequential rel. diff %.2e (%lld + %lld products)\n", S, T, N,
           sqrt(diff / norm), (long long)st.mat_mat, (long long)st.mat_state);

    { /* backward: gradients of sum(h) */
        static float dh[S][T][N], dA[S][T][N][N], db[S][T][N];
        ssm_tensor tdh = ssm_tensor_make(dh, SSM_F32, ssm_cpu(), 3, shape_b, NULL);
        ssm_tensor tdA = ssm_tensor_make(dA, SSM_F32, ssm_cpu(), 4, shape_A, NULL);
        ssm_tensor tdb = ssm_tensor_make(db, SSM_F32, ssm_cpu(), 3, shape_b, NULL);
        for (s = 0; s < S; ++s) for (t = 0; t < T; ++t) for (i = 0; i < N; ++i) dh[s][t][i] = 1.0f;
        if (ssm_linrec_backward(ctx, &d, &tA, NULL, &th_cr, &tdh, NULL, &tdA, &tdb, NULL) != SSM_OK) goto fail;
        printf("backward: d(sum h)/d b[0][0][0] = %.4f\n", db[0][0][0]);
    }

    { /* decay scan: out_t = sum_{j<=t} exp(cA_t - cA_j) x_j, per-step log decays */
        static float la[1][T][4], x[1][T][4][3], out[1][T][4][3];
        int64_t sl[3] = {1, T, 4}, sx[4] = {1, T, 4, 3};
        ssm_tensor tl = ssm_tensor_make(la, SSM_F32, ssm_cpu(), 3, sl, NULL);
        ssm_tensor tx = ssm_tensor_make(x, SSM_F32, ssm_cpu(), 4, sx, NULL);
        ssm_tensor to = ssm_tensor_make(out, SSM_F32, ssm_cpu(), 4, sx, NULL);
        ssm_decay_desc dd = ssm_decay_desc_init();
        dd.input = SSM_DECAY_PER_STEP;
        for (t = 0; t < T; ++t)
            for (i = 0; i < 4; ++i) {
                la[0][t][i] = -0.1f * (float)(i + 1);
                for (j = 0; j < 3; ++j) x[0][t][i][j] = 1.0f;
            }
        if (ssm_decay_forward(ctx, &dd, &tl, &tx, NULL, &to, NULL) != SSM_OK) goto fail;
        printf("decay scan: steady state with a = -0.1 is %.4f (1/(1-e^-0.1) = %.4f)\n", out[0][T - 1][0][0],
               1.0 / (1.0 - exp(-0.1)));
    }
    ssm_ctx_destroy(ctx);
    return 0;
fail:
    printf("error: %s\n", ssm_ctx_last_error(ctx));
    ssm_ctx_destroy(ctx);
    return 1;
}
