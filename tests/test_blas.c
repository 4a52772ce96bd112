/* Cross-backend checks (built with SSM_TEST_BLAS): the BLIS backend against the reference
   backend on the same random inputs -- the gemm primitive with strided, transposed and
   broadcast operands on every route (small kernel, narrow kernel, BLIS, portable loop,
   batch split over threads), and every linrec method forward and backward. */
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

/* One linrec method on both backends, forward then backward, on the same random inputs. */
static void linrec_case(ssm_linrec_method method, ssm_dtype dt, int64_t S, int64_t T, int64_t n, int64_t m,
                        int reverse, int threads) {
    char name[200];
    ssm_ctx *ref = ctx_on(ssm_reference_backend(), 0, -1), *bl;
    int64_t sA[4] = {S, T, n, n}, sb[4] = {S, T, n, m}, s0[3] = {S, n, m};
    int64_t nA = S * T * n * n, nb = S * T * n * m, n0 = S * n * m, i;
    double *A = (double *)malloc(sizeof(double) * (size_t)nA), *vr = (double *)malloc(sizeof(double) * (size_t)nA);
    double *vb = (double *)malloc(sizeof(double) * (size_t)nA), e, tol = dt.bits == 64 ? 1e-10 : 3e-4;
    tbuf tA, tb, th0, tdh, th1, th2, tdA1, tdA2, tdb1, tdb2, td01, td02;
    ssm_linrec_desc d = ssm_linrec_desc_init();
    sprintf(name, "blis vs ref linrec %s %s S%lld T%lld n%lld m%lld rev%d threads%d", ssm_linrec_method_name(method),
            ssm_dtype_name(dt), (long long)S, (long long)T, (long long)n, (long long)m, reverse, threads);
    test_begin(name);
    bl = ctx_on(ssm_blas_backend(), threads, -1);
    /* transitions with entries ~ U(-1,1) * 0.9/sqrt(n): spectral radius below one on average */
    for (i = 0; i < nA; ++i) A[i] = test_uniform(-1, 1) * 0.9 * sqrt(3.0 / (double)n);
    tA = tb_new(dt, 4, sA, LAYOUT_PADDED);
    tb_set(&tA, A);
    tb = tb_random(dt, 4, sb, LAYOUT_CONTIGUOUS, 1.0, NULL);
    th0 = tb_random(dt, 3, s0, LAYOUT_CONTIGUOUS, 1.0, NULL);
    tdh = tb_random(dt, 4, sb, LAYOUT_REVERSED, 1.0, NULL);
    th1 = tb_new(dt, 4, sb, LAYOUT_CONTIGUOUS);
    th2 = tb_new(dt, 4, sb, LAYOUT_CONTIGUOUS);
    tdA1 = tb_new(dt, 4, sA, LAYOUT_CONTIGUOUS);
    tdA2 = tb_new(dt, 4, sA, LAYOUT_CONTIGUOUS);
    tdb1 = tb_new(dt, 4, sb, LAYOUT_PADDED);
    tdb2 = tb_new(dt, 4, sb, LAYOUT_PADDED);
    td01 = tb_new(dt, 3, s0, LAYOUT_CONTIGUOUS);
    td02 = tb_new(dt, 3, s0, LAYOUT_CONTIGUOUS);
    d.method = method;
    d.reverse = reverse;
    d.chunk = 16;
    CHECK_OK(ssm_linrec_forward(ref, &d, &tA.t, &tb.t, &th0.t, &th1.t, NULL), ref);
    CHECK_OK(ssm_linrec_forward(bl, &d, &tA.t, &tb.t, &th0.t, &th2.t, NULL), bl);
    tb_get(&th1, vr);
    tb_get(&th2, vb);
    e = rel_err(vb, vr, nb);
    CHECK(e <= tol, "forward h: rel err %.3e > %.1e", e, tol);
    CHECK_OK(ssm_linrec_backward(ref, &d, &tA.t, &th0.t, &th1.t, &tdh.t, NULL, &tdA1.t, &tdb1.t, &td01.t), ref);
    CHECK_OK(ssm_linrec_backward(bl, &d, &tA.t, &th0.t, &th1.t, &tdh.t, NULL, &tdA2.t, &tdb2.t, &td02.t), bl);
    tb_get(&tdA1, vr);
    tb_get(&tdA2, vb);
    e = rel_err(vb, vr, nA);
    CHECK(e <= tol, "backward dA: rel err %.3e > %.1e", e, tol);
    tb_get(&tdb1, vr);
    tb_get(&tdb2, vb);
    e = rel_err(vb, vr, nb);
    CHECK(e <= tol, "backward db: rel err %.3e > %.1e", e, tol);
    tb_get(&td01, vr);
    tb_get(&td02, vb);
    e = rel_err(vb, vr, n0);
    CHECK(e <= tol, "backward dh0: rel err %.3e > %.1e", e, tol);
    CHECK(tb_outside_untouched(&tdb2) && tb_outside_untouched(&th2), "BLIS wrote outside a view");
    tb_free(&tA); tb_free(&tb); tb_free(&th0); tb_free(&tdh); tb_free(&th1); tb_free(&th2);
    tb_free(&tdA1); tb_free(&tdA2); tb_free(&tdb1); tb_free(&tdb2); tb_free(&td01); tb_free(&td02);
    free(A); free(vr); free(vb);
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
    {
        int mi;
        for (mi = 0; mi < SSM_LINREC_METHOD_COUNT; ++mi) {
            ssm_linrec_method me = (ssm_linrec_method)mi;
            linrec_case(me, SSM_F32, 2, 100, 32, 1, 0, 2);
            linrec_case(me, SSM_F64, 1, 77, 8, 3, 1, 1);
            linrec_case(me, SSM_F32, 1, 40, 70, 2, 0, 2); /* n > the small-kernel bound: BLIS */
        }
    }
}
#else
typedef int ssm_test_blas_unused; /* ISO C forbids an empty translation unit */
#endif
