/* Cross-backend checks (built with SSM_TEST_BLAS): the BLIS backend against the reference
   backend on the same random inputs -- the gemm primitive with strided, transposed and
   broadcast operands on every route (small kernel, narrow kernel, BLIS, portable loop,
   batch split over threads). Every op on the BLIS backend runs the case table
   (tests/cases.h) against the f64 oracles. */
#include "test.h"

#ifdef SSM_TEST_BLAS
#include "../ssm_blas.h"

static ssm_ctx *ctx_on(const ssm_backend *be, int threads, int small_gemm) {
    ssm_ctx *ctx = NULL;
    ssm_ctx_config cfg = ssm_ctx_config_init();
    ssm_blas_config bc = ssm_blas_config_init();
    bc.small_gemm = small_gemm;
    cfg.backend = be;
    cfg.threads = threads;
    cfg.backend_config = &bc;
    if (ssm_ctx_create(&cfg, &ctx) != SSM_OK) test_fail(__FILE__, __LINE__, "ssm_ctx_create failed");
    return ctx;
}

/* Layouts of one operand (rows x cols, batch entries `bs` apart). */
enum { OP_ROW = 0, OP_COL = 1, OP_GENERAL = 2, OP_BROADCAST_ROW = 3 };

static void op_strides(int kind, int64_t rows, int64_t cols, int64_t *rs, int64_t *cs, int64_t *bs) {
    switch (kind) {
    case OP_ROW: *rs = cols + 3, *cs = 1; *bs = rows * (cols + 3) + 5; break;
    case OP_COL: *rs = 1, *cs = rows + 2; *bs = cols * (rows + 2) + 1; break;
    case OP_GENERAL: *rs = 2 * cols + 1, *cs = 2; *bs = rows * (2 * cols + 1) + 7; break;
    default: *rs = 0, *cs = 1; *bs = cols + 1; break; /* every row the same (inputs only) */
    }
}

static void gemm_case(ssm_dtype dt, int64_t batch, int64_t M, int64_t N, int64_t K, int ka, int kb,
                      int kc, double beta, int threads, int small_gemm) {
    char name[200];
    ssm_ctx *ref, *bl;
    ssm_matrix_batch A, B, C1, C2;
    int64_t ars, acs, abs_, brs, bcs, bbs, crs, ccs, cbs, nA, nB, nC, i, k, r, c;
    size_t es = dt.bits / 8;
    unsigned char *a, *b, *c1, *c2;
    double num = 0, den = 0, tol = dt.bits == 64 ? 1e-12 : 1e-5;
    sprintf(name, "blis gemm vs ref %s batch%lld %lldx%lldx%lld A%d B%d C%d beta%.1f threads%d small%d",
            ssm_dtype_name(dt), (long long)batch, (long long)M, (long long)N, (long long)K, ka, kb, kc, beta,
            threads, small_gemm);
    test_begin(name);
    ref = ctx_on(ssm_reference_backend(), 0, -1);
    bl = ctx_on(ssm_blas_backend(), threads, small_gemm);
    op_strides(ka, M, K, &ars, &acs, &abs_);
    op_strides(kb, K, N, &brs, &bcs, &bbs);
    op_strides(kc, M, N, &crs, &ccs, &cbs);
    nA = batch * abs_ + 1, nB = batch * bbs + 1, nC = batch * cbs + 1;
    a = (unsigned char *)malloc((size_t)nA * es);
    b = (unsigned char *)malloc((size_t)nB * es);
    c1 = (unsigned char *)malloc((size_t)nC * es);
    c2 = (unsigned char *)malloc((size_t)nC * es);
    for (i = 0; i < nA; ++i) {
        double v = test_uniform(-1, 1);
        if (es == 8) ((double *)a)[i] = v; else ((float *)a)[i] = (float)v;
    }
    for (i = 0; i < nB; ++i) {
        double v = test_uniform(-1, 1);
        if (es == 8) ((double *)b)[i] = v; else ((float *)b)[i] = (float)v;
    }
    if (beta == 0.0) { /* C poisoned (NaN): beta = 0 must overwrite without reading */
        memset(c1, 0xFF, (size_t)nC * es);
    } else {
        for (i = 0; i < nC; ++i) {
            double v = test_uniform(-1, 1);
            if (es == 8) ((double *)c1)[i] = v; else ((float *)c1)[i] = (float)v;
        }
    }
    memcpy(c2, c1, (size_t)nC * es);
    A.ptr = a, A.rs = ars, A.cs = acs, A.bs = abs_;
    B.ptr = b, B.rs = brs, B.cs = bcs, B.bs = bbs;
    C1.ptr = c1, C1.rs = crs, C1.cs = ccs, C1.bs = cbs;
    C2 = C1;
    C2.ptr = c2;
    CHECK_OK(ssm_ctx_gemm(ref, dt, batch, M, N, K, 0.75, A, B, beta, C1), ref);
    CHECK_OK(ssm_ctx_gemm(bl, dt, batch, M, N, K, 0.75, A, B, beta, C2), bl);
    for (k = 0; k < batch; ++k)
        for (r = 0; r < M; ++r)
            for (c = 0; c < N; ++c) {
                int64_t off = k * cbs + r * crs + c * ccs;
                double x = es == 8 ? ((double *)c1)[off] : ((float *)c1)[off];
                double y = es == 8 ? ((double *)c2)[off] : ((float *)c2)[off];
                if (y != y) num = INFINITY;
                num += (x - y) * (x - y);
                den += x * x;
            }
    CHECK(sqrt(num) <= tol * sqrt(den) + 1e-30, "rel err %.3e > %.1e", sqrt(num) / (sqrt(den) + 1e-300), tol);
    /* nothing outside C's matrices was written (compare raw bytes of the gaps) */
    {
        unsigned char *inside = (unsigned char *)calloc((size_t)nC, 1);
        int gaps_ok = 1;
        for (k = 0; k < batch; ++k)
            for (r = 0; r < M; ++r)
                for (c = 0; c < N; ++c) inside[k * cbs + r * crs + c * ccs] = 1;
        for (i = 0; i < nC; ++i)
            if (!inside[i] && memcmp(c1 + (size_t)i * es, c2 + (size_t)i * es, es)) gaps_ok = 0;
        CHECK(gaps_ok, "BLIS gemm wrote outside C");
        free(inside);
    }
    free(a); free(b); free(c1); free(c2);
    ssm_ctx_destroy(ref);
    ssm_ctx_destroy(bl);
    test_end();
}

static void config_errors(void) {
    ssm_ctx *ctx = NULL;
    ssm_ctx_config cfg = ssm_ctx_config_init();
    ssm_blas_config bc = ssm_blas_config_init();
    test_begin("blis config: bad values are rejected, defaults resolve threads >= 1");
    cfg.backend = ssm_blas_backend();
    cfg.backend_config = &bc;
    bc.small_gemm = 7;
    CHECK(ssm_ctx_create(&cfg, &ctx) == SSM_ERROR_INVALID_VALUE && ctx == NULL, "small_gemm = 7 accepted");
    bc.small_gemm = -1;
    bc.threads = -2;
    CHECK(ssm_ctx_create(&cfg, &ctx) == SSM_ERROR_INVALID_VALUE && ctx == NULL, "threads = -2 accepted");
    bc.threads = 3;
    CHECK(ssm_ctx_create(&cfg, &ctx) == SSM_OK && ssm_blas_threads(ctx) == 3, "backend_config threads");
    ssm_ctx_destroy(ctx);
    cfg.threads = 2;
    CHECK(ssm_ctx_create(&cfg, &ctx) == SSM_OK && ssm_blas_threads(ctx) == 2, "ctx threads win");
    CHECK(!strcmp(ssm_ctx_backend_name(ctx), "blis"), "backend name");
    ssm_ctx_destroy(ctx);
    test_end();
}

void suite_blas(void) {
    static const int64_t sizes[][3] = {{1, 1, 1}, {3, 5, 7},   {4, 1, 32},  {32, 32, 32}, {17, 33, 9},
                                       {64, 64, 64}, {65, 64, 63}, {100, 3, 100}, {130, 70, 40}, {32, 2, 32}};
    size_t si;
    int v;
    fprintf(stderr, "== cross-backend: blis vs reference\n");
    config_errors();
    for (si = 0; si < sizeof sizes / sizeof sizes[0]; ++si)
        for (v = 0; v < 6; ++v) {
            int64_t M = sizes[si][0], N = sizes[si][1], K = sizes[si][2];
            ssm_dtype dt = v % 2 ? SSM_F32 : SSM_F64;
            int ka = v % 3, kb = (v + 1) % 3, kc = (v + 2) % 3;
            if (v == 5) ka = OP_BROADCAST_ROW; /* strides BLIS does not take */
            gemm_case(dt, v < 3 ? 1 : 5, M, N, K, ka, kb, kc, v % 2 ? 0.0 : 0.5, v < 4 ? 1 : 2, v == 4 ? 0 : -1);
        }
    gemm_case(SSM_F32, 9, 40, 40, 40, OP_ROW, OP_COL, OP_ROW, 0.0, 2, 0);   /* BLIS in a split batch */
    gemm_case(SSM_F64, 2, 200, 150, 90, OP_COL, OP_ROW, OP_GENERAL, 1.0, 2, -1); /* threaded BLIS */
    gemm_case(SSM_F32, 3, 20, 20, 20, OP_GENERAL, OP_GENERAL, OP_COL, 0.0, 1, 1); /* small kernel */
}
#else
typedef int ssm_test_blas_unused; /* ISO C forbids an empty translation unit */
#endif
