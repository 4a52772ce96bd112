/* Core: result codes, views, DLPack conversion, contexts and allocators, and every error
   path of the linrec and decay ops (each returns its code and leaves outputs untouched). */
#include "test.h"

static void result_strings(void) {
    static const ssm_result codes[] = {SSM_OK, SSM_ERROR_NULL_ARGUMENT, SSM_ERROR_INVALID_SHAPE, SSM_ERROR_INVALID_DTYPE,
                                       SSM_ERROR_INVALID_DEVICE, SSM_ERROR_INVALID_STRIDE, SSM_ERROR_ALIASING,
                                       SSM_ERROR_INVALID_VALUE, SSM_ERROR_NON_FINITE, SSM_ERROR_OUT_OF_MEMORY,
                                       SSM_ERROR_WORKSPACE_TOO_SMALL, SSM_ERROR_UNSUPPORTED, SSM_ERROR_BACKEND};
    size_t i, j, n = sizeof codes / sizeof codes[0];
    test_begin("core: result strings are distinct");
    for (i = 0; i < n; ++i)
        for (j = i + 1; j < n; ++j)
            CHECK(strcmp(ssm_result_string(codes[i]), ssm_result_string(codes[j])) != 0, "codes %d %d share a string",
                  (int)codes[i], (int)codes[j]);
    CHECK(strcmp(ssm_result_string((ssm_result)-999), "unknown result") == 0, "unknown code");
    test_end();
}

static void views(void) {
    int64_t shape[3] = {2, 3, 4}, strides[3] = {1, 2, 6}, dshape[2] = {5, 7};
    float buf[64];
    ssm_tensor t = ssm_tensor_make(buf, SSM_F32, ssm_cpu(), 3, shape, NULL), u;
    ssm_dlpack_tensor dl;
    test_begin("core: views and DLPack conversion");
    CHECK(t.strides[0] == 12 && t.strides[1] == 4 && t.strides[2] == 1, "row-major strides");
    CHECK(ssm_tensor_is_contiguous(&t) && ssm_tensor_numel(&t) == 24, "contiguous, numel");
    t = ssm_tensor_make(buf, SSM_F32, ssm_cpu(), 3, shape, strides);
    CHECK(!ssm_tensor_is_contiguous(&t), "strided view is not contiguous");
    memset(&dl, 0, sizeof dl);
    dl.data = buf;
    dl.device = ssm_cpu();
    dl.ndim = 2;
    dl.dtype = SSM_F32;
    dl.shape = dshape;
    dl.strides = NULL;
    dl.byte_offset = 8;
    CHECK_OK(ssm_tensor_from_dlpack(&dl, &u), NULL);
    CHECK(u.data == (void *)(buf + 2) && u.strides[0] == 7 && u.strides[1] == 1 && u.shape[1] == 7, "dlpack fields");
    dl.dtype.lanes = 4;
    CHECK(ssm_tensor_from_dlpack(&dl, &u) == SSM_ERROR_INVALID_DTYPE, "lanes != 1");
    dl.dtype.lanes = 1;
    dl.ndim = SSM_MAX_DIMS + 1;
    CHECK(ssm_tensor_from_dlpack(&dl, &u) == SSM_ERROR_INVALID_SHAPE, "too many dims");
    CHECK(ssm_tensor_from_dlpack(NULL, &u) == SSM_ERROR_NULL_ARGUMENT, "NULL dlpack");
    CHECK(strcmp(ssm_dtype_name(SSM_BF16), "bf16") == 0 && strcmp(ssm_dtype_name(SSM_F64), "f64") == 0, "dtype names");
    test_end();
}

/* An allocator that counts, to prove the context frees what it allocates. */
typedef struct counting { int allocs, frees; } counting;
static void *count_alloc(void *u, size_t n) { ((counting *)u)->allocs++; return malloc(n); }
static void count_free(void *u, void *p) { ((counting *)u)->frees++; free(p); }

static void contexts(void) {
    ssm_ctx *ctx = NULL;
    ssm_ctx_config cfg = ssm_ctx_config_init();
    counting cnt = {0, 0};
    int64_t sA[4] = {2, 50, 3, 3}, sb[4] = {2, 50, 3, 2};
    tbuf A = tb_random(SSM_F64, 4, sA, LAYOUT_CONTIGUOUS, 0.3, NULL), b = tb_random(SSM_F64, 4, sb, 0, 1.0, NULL);
    tbuf h = tb_new(SSM_F64, 4, sb, LAYOUT_CONTIGUOUS);
    ssm_linrec_desc d = ssm_linrec_desc_init();
    size_t need = 0;
    char small[64];
    test_begin("core: contexts, allocator hooks, workspace");
    CHECK(ssm_ctx_create(&cfg, NULL) == SSM_ERROR_NULL_ARGUMENT, "NULL out");
    cfg.threads = -1;
    CHECK(ssm_ctx_create(&cfg, &ctx) == SSM_ERROR_INVALID_VALUE && ctx == NULL, "negative threads");
    cfg.threads = 0;
    cfg.allocator.alloc = count_alloc; /* free missing */
    CHECK(ssm_ctx_create(&cfg, &ctx) == SSM_ERROR_INVALID_VALUE, "half an allocator");
    cfg.allocator.free = count_free;
    cfg.allocator.user = &cnt;
    cfg.backend = test_backend;
    CHECK_OK(ssm_ctx_create(&cfg, &ctx), ctx);
    d.method = SSM_LINREC_SCAN_HS;
    CHECK_OK(ssm_linrec_workspace_size(ctx, &d, SSM_F64, 2, 50, 3, 2, 0, &need), ctx);
    CHECK(need > 0, "HS needs workspace");
    CHECK_OK(ssm_linrec_forward(ctx, &d, &A.t, &b.t, NULL, &h.t, NULL), ctx);
    CHECK(ssm_ctx_workspace_capacity(ctx) >= need, "workspace grew to the query's size");
    CHECK_OK(ssm_ctx_reserve_workspace(ctx, need * 4), ctx);
    CHECK(ssm_ctx_workspace_capacity(ctx) >= need * 4, "reserve");
    ssm_ctx_destroy(ctx);
    CHECK(cnt.allocs > 0 && cnt.allocs == cnt.frees, "allocs %d frees %d", cnt.allocs, cnt.frees);
    /* a caller-owned workspace that is too small: an error, and h untouched */
    cfg = ssm_ctx_config_init();
    cfg.backend = test_backend;
    cfg.workspace = small;
    cfg.workspace_bytes = sizeof small;
    CHECK_OK(ssm_ctx_create(&cfg, &ctx), ctx);
    tb_poison(&h);
    CHECK(ssm_linrec_forward(ctx, &d, &A.t, &b.t, NULL, &h.t, NULL) == SSM_ERROR_WORKSPACE_TOO_SMALL, "small workspace");
    CHECK(tb_untouched(&h), "h written despite the error");
    CHECK(strlen(ssm_ctx_last_error(ctx)) > 0, "message");
    d.method = SSM_LINREC_SEQUENTIAL; /* needs none: runs in the same context */
    CHECK_OK(ssm_linrec_forward(ctx, &d, &A.t, &b.t, NULL, &h.t, NULL), ctx);
    CHECK(ssm_ctx_last_error(ctx)[0] == 0, "message cleared after success");
    ssm_ctx_destroy(ctx);
    tb_free(&A); tb_free(&b); tb_free(&h);
    test_end();
}

/* ---- error paths: each case breaks one thing, expects one code, outputs untouched ---- */
enum { S_ = 2, T_ = 5, N_ = 3, M_ = 2 };

typedef struct lr_fixture {
    tbuf A, b, h0, h, hT, dh, dhT, dA, db, dh0;
} lr_fixture;

static void lr_fixture_make(lr_fixture *f) {
    int64_t sA[4] = {S_, T_, N_, N_}, sb[4] = {S_, T_, N_, M_}, s0[3] = {S_, N_, M_};
    f->A = tb_random(SSM_F64, 4, sA, LAYOUT_PADDED, 0.5, NULL);
    f->b = tb_random(SSM_F64, 4, sb, LAYOUT_CONTIGUOUS, 1.0, NULL);
    f->h0 = tb_random(SSM_F64, 3, s0, LAYOUT_CONTIGUOUS, 1.0, NULL);
    f->dh = tb_random(SSM_F64, 4, sb, LAYOUT_CONTIGUOUS, 1.0, NULL);
    f->dhT = tb_random(SSM_F64, 3, s0, LAYOUT_CONTIGUOUS, 1.0, NULL);
    f->h = tb_random(SSM_F64, 4, sb, LAYOUT_CONTIGUOUS, 1.0, NULL); /* also the "forward output" input of bwd */
    f->hT = tb_new(SSM_F64, 3, s0, LAYOUT_CONTIGUOUS);
    f->dA = tb_new(SSM_F64, 4, sA, LAYOUT_CONTIGUOUS);
    f->db = tb_new(SSM_F64, 4, sb, LAYOUT_CONTIGUOUS);
    f->dh0 = tb_new(SSM_F64, 3, s0, LAYOUT_CONTIGUOUS);
}
static void lr_fixture_free(lr_fixture *f) {
    tb_free(&f->A); tb_free(&f->b); tb_free(&f->h0); tb_free(&f->h); tb_free(&f->hT);
    tb_free(&f->dh); tb_free(&f->dhT); tb_free(&f->dA); tb_free(&f->db); tb_free(&f->dh0);
}

static void expect_fwd(ssm_ctx *ctx, lr_fixture *f, const char *what, ssm_result want, const ssm_linrec_desc *d,
                       const ssm_tensor *A, const ssm_tensor *b, const ssm_tensor *h0, ssm_tensor *h, ssm_tensor *hT) {
    ssm_result r;
    tb_poison(&f->h);
    tb_poison(&f->hT);
    r = ssm_linrec_forward(ctx, d, A, b, h0, h, hT);
    CHECK(r == want, "%s: got %s, want %s (%s)", what, ssm_result_string(r), ssm_result_string(want), ssm_ctx_last_error(ctx));
    CHECK(tb_untouched(&f->h) && tb_untouched(&f->hT), "%s: an output was written", what);
    if (ctx) CHECK(ssm_ctx_last_error(ctx)[0] != 0 || want == SSM_ERROR_NULL_ARGUMENT, "%s: no message", what);
}

static void linrec_errors(void) {
    ssm_ctx *ctx;
    lr_fixture f;
    ssm_linrec_desc d = ssm_linrec_desc_init();
    ssm_tensor t, u;
    ssm_result r;
    test_begin("core: linrec error paths leave outputs untouched");
    ctx = test_ctx();
    lr_fixture_make(&f);
    expect_fwd(NULL, &f, "NULL ctx", SSM_ERROR_NULL_ARGUMENT, &d, &f.A.t, &f.b.t, NULL, &f.h.t, &f.hT.t);
    expect_fwd(ctx, &f, "NULL desc", SSM_ERROR_NULL_ARGUMENT, NULL, &f.A.t, &f.b.t, NULL, &f.h.t, &f.hT.t);
    expect_fwd(ctx, &f, "NULL A", SSM_ERROR_NULL_ARGUMENT, &d, NULL, &f.b.t, NULL, &f.h.t, &f.hT.t);
    expect_fwd(ctx, &f, "NULL h", SSM_ERROR_NULL_ARGUMENT, &d, &f.A.t, &f.b.t, NULL, NULL, &f.hT.t);
    t = f.A.t; t.data = NULL;
    expect_fwd(ctx, &f, "NULL A data", SSM_ERROR_NULL_ARGUMENT, &d, &t, &f.b.t, NULL, &f.h.t, &f.hT.t);
    t = f.A.t; t.ndim = 3;
    expect_fwd(ctx, &f, "A rank 3", SSM_ERROR_INVALID_SHAPE, &d, &t, &f.b.t, NULL, &f.h.t, &f.hT.t);
    t = f.A.t; t.shape[3] = 2;
    expect_fwd(ctx, &f, "A not square", SSM_ERROR_INVALID_SHAPE, &d, &t, &f.b.t, NULL, &f.h.t, &f.hT.t);
    t = f.b.t; t.shape[1] = T_ - 1;
    expect_fwd(ctx, &f, "b with another T", SSM_ERROR_INVALID_SHAPE, &d, &f.A.t, &t, NULL, &f.h.t, &f.hT.t);
    t = f.h0.t; t.shape[0] = S_ + 1;
    expect_fwd(ctx, &f, "h0 with another S", SSM_ERROR_INVALID_SHAPE, &d, &f.A.t, &f.b.t, &t, &f.h.t, &f.hT.t);
    t = f.A.t; t.shape[1] = 0; u = f.b.t; u.shape[1] = 0;
    expect_fwd(ctx, &f, "T = 0", SSM_ERROR_INVALID_SHAPE, &d, &t, &u, NULL, &f.h.t, &f.hT.t);
    t = f.A.t; t.shape[2] = t.shape[3] = 0;
    expect_fwd(ctx, &f, "n = 0", SSM_ERROR_INVALID_SHAPE, &d, &t, &f.b.t, NULL, &f.h.t, &f.hT.t);
    t = f.b.t; t.shape[3] = 0;
    expect_fwd(ctx, &f, "m = 0", SSM_ERROR_INVALID_SHAPE, &d, &f.A.t, &t, NULL, &f.h.t, &f.hT.t);
    t = f.b.t; t.dtype = SSM_F32;
    expect_fwd(ctx, &f, "dtype mismatch", SSM_ERROR_INVALID_DTYPE, &d, &f.A.t, &t, NULL, &f.h.t, &f.hT.t);
    t = f.A.t; t.dtype = SSM_F16;
    expect_fwd(ctx, &f, "f16 on the CPU", SSM_ERROR_INVALID_DTYPE, &d, &t, &f.b.t, NULL, &f.h.t, &f.hT.t);
    t = f.A.t; t.dtype = SSM_I32;
    expect_fwd(ctx, &f, "int32 A", SSM_ERROR_INVALID_DTYPE, &d, &t, &f.b.t, NULL, &f.h.t, &f.hT.t);
    t = f.A.t; t.device = ssm_cuda_device(0);
    expect_fwd(ctx, &f, "A on a GPU", SSM_ERROR_INVALID_DEVICE, &d, &t, &f.b.t, NULL, &f.h.t, &f.hT.t);
    expect_fwd(ctx, &f, "h is b", SSM_ERROR_ALIASING, &d, &f.A.t, &f.b.t, NULL, &f.b.t, &f.hT.t);
    t = f.h.t; t.data = f.h0.t.data; /* overlaps h0 (never dereferenced: validation fails first) */
    expect_fwd(ctx, &f, "h overlaps h0", SSM_ERROR_ALIASING, &d, &f.A.t, &f.b.t, &f.h0.t, &t, &f.hT.t);
    t = f.hT.t; t.data = f.h.t.data;
    expect_fwd(ctx, &f, "hT overlaps h", SSM_ERROR_ALIASING, &d, &f.A.t, &f.b.t, NULL, &f.h.t, &t);
    t = f.h.t; t.strides[1] = 0;
    expect_fwd(ctx, &f, "h with a zero time stride", SSM_ERROR_INVALID_STRIDE, &d, &f.A.t, &f.b.t, NULL, &t, &f.hT.t);
    d.method = (ssm_linrec_method)42;
    expect_fwd(ctx, &f, "unknown method", SSM_ERROR_INVALID_VALUE, &d, &f.A.t, &f.b.t, NULL, &f.h.t, &f.hT.t);
    d.method = SSM_LINREC_CHUNKED;
    d.chunk = -3;
    expect_fwd(ctx, &f, "negative chunk", SSM_ERROR_INVALID_VALUE, &d, &f.A.t, &f.b.t, NULL, &f.h.t, &f.hT.t);
    d.chunk = 0;
    d.transition = (ssm_transition)7;
    expect_fwd(ctx, &f, "unknown transition", SSM_ERROR_UNSUPPORTED, &d, &f.A.t, &f.b.t, NULL, &f.h.t, &f.hT.t);
    d = ssm_linrec_desc_init();
    /* backward: aliasing between its outputs, and a missing dh */
    tb_poison(&f.dA); tb_poison(&f.db); tb_poison(&f.dh0);
    t = f.db.t; t.data = f.dA.t.data;
    r = ssm_linrec_backward(ctx, &d, &f.A.t, &f.h0.t, &f.h.t, &f.dh.t, &f.dhT.t, &f.dA.t, &t, &f.dh0.t);
    CHECK(r == SSM_ERROR_ALIASING, "bwd: db overlapping dA gave %s", ssm_result_string(r));
    r = ssm_linrec_backward(ctx, &d, &f.A.t, &f.h0.t, &f.h.t, NULL, &f.dhT.t, &f.dA.t, &f.db.t, &f.dh0.t);
    CHECK(r == SSM_ERROR_NULL_ARGUMENT, "bwd: NULL dh gave %s", ssm_result_string(r));
    t = f.dA.t; t.shape[2] = 4;
    r = ssm_linrec_backward(ctx, &d, &f.A.t, &f.h0.t, &f.h.t, &f.dh.t, &f.dhT.t, &t, &f.db.t, &f.dh0.t);
    CHECK(r == SSM_ERROR_INVALID_SHAPE, "bwd: dA of the wrong shape gave %s", ssm_result_string(r));
    r = ssm_linrec_backward(ctx, &d, &f.A.t, &f.h0.t, &f.h.t, &f.dh.t, &f.dhT.t, &f.dA.t, &f.db.t, &f.dh.t);
    CHECK(r == SSM_ERROR_INVALID_SHAPE || r == SSM_ERROR_ALIASING, "bwd: dh0 = dh gave %s", ssm_result_string(r));
    CHECK(tb_untouched(&f.dA) && tb_untouched(&f.db) && tb_untouched(&f.dh0), "bwd: an output was written");
    lr_fixture_free(&f);
    ssm_ctx_destroy(ctx);
    test_end();
}

static void decay_errors(void) {
    ssm_ctx *ctx;
    int64_t sx[4] = {2, 6, 3, 4}, sl[3] = {2, 6, 3}, s0[3] = {2, 3, 4};
    tbuf ld = tb_random(SSM_F64, 3, sl, LAYOUT_CONTIGUOUS, 0.5, NULL), x = tb_random(SSM_F64, 4, sx, 0, 1.0, NULL);
    tbuf out = tb_new(SSM_F64, 4, sx, LAYOUT_CONTIGUOUS), hT = tb_new(SSM_F64, 3, s0, LAYOUT_CONTIGUOUS);
    tbuf dx = tb_new(SSM_F64, 4, sx, LAYOUT_CONTIGUOUS), dl = tb_new(SSM_F64, 3, sl, LAYOUT_CONTIGUOUS);
    ssm_decay_desc d = ssm_decay_desc_init();
    ssm_tensor t;
    struct { const char *what; ssm_result want; int which; } cases[] = {
        {"NaN log decay", SSM_ERROR_NON_FINITE, 0},       {"+inf per-step decay", SSM_ERROR_NON_FINITE, 1},
        {"-inf cumulative decay", SSM_ERROR_NON_FINITE, 2}, {"x rank 3", SSM_ERROR_INVALID_SHAPE, 3},
        {"log_decay wrong T", SSM_ERROR_INVALID_SHAPE, 4}, {"out is x", SSM_ERROR_ALIASING, 5},
        {"unknown input kind", SSM_ERROR_INVALID_VALUE, 6}, {"dtype mismatch", SSM_ERROR_INVALID_DTYPE, 7},
        {"hT wrong shape", SSM_ERROR_INVALID_SHAPE, 8}};
    size_t k;
    test_begin("core: decay error paths leave outputs untouched");
    ctx = test_ctx();
    for (k = 0; k < sizeof cases / sizeof cases[0]; ++k) {
        ssm_tensor L = ld.t, X = x.t, O = out.t, H = hT.t;
        double keep = ((double *)ld.t.data)[7];
        ssm_result r;
        d = ssm_decay_desc_init();
        switch (cases[k].which) {
        case 0: ((double *)ld.t.data)[7] = NAN; break;
        case 1: ((double *)ld.t.data)[7] = INFINITY; d.input = SSM_DECAY_PER_STEP; break;
        case 2: ((double *)ld.t.data)[7] = -INFINITY; break;
        case 3: X.ndim = 3; break;
        case 4: L.shape[1] = 5; break;
        case 5: O = x.t; break;
        case 6: d.input = (ssm_decay_input)9; break;
        case 7: L.dtype = SSM_F32; break;
        case 8: H.shape[2] = 5; break;
        }
        tb_poison(&out);
        tb_poison(&hT);
        if (cases[k].which == 5) {
            double *copy = (double *)malloc(x.bytes);
            memcpy(copy, x.mem, x.bytes);
            r = ssm_decay_forward(ctx, &d, &L, &X, NULL, &O, &H);
            CHECK(memcmp(copy, x.mem, x.bytes) == 0, "%s: x was modified", cases[k].what);
            free(copy);
        } else {
            r = ssm_decay_forward(ctx, &d, &L, &X, NULL, &O, &H);
            CHECK(tb_untouched(&out), "%s: out was written", cases[k].what);
        }
        CHECK(r == cases[k].want, "%s: got %s (%s)", cases[k].what, ssm_result_string(r), ssm_ctx_last_error(ctx));
        CHECK(tb_untouched(&hT), "%s: hT was written", cases[k].what);
        ((double *)ld.t.data)[7] = keep;
    }
    /* backward: non-finite decays and aliasing are refused too */
    tb_poison(&dx);
    tb_poison(&dl);
    t = dl.t;
    t.data = dx.mem;
    CHECK(ssm_decay_backward(ctx, &d, &ld.t, NULL, &x.t, &x.t, NULL, &dx.t, &t, NULL) == SSM_ERROR_ALIASING, "bwd aliasing");
    ((double *)ld.t.data)[3] = NAN;
    CHECK(ssm_decay_backward(ctx, &d, &ld.t, NULL, &x.t, &x.t, NULL, &dx.t, &dl.t, NULL) == SSM_ERROR_NON_FINITE, "bwd NaN");
    CHECK(tb_untouched(&dx) && tb_untouched(&dl), "bwd: an output was written");
    tb_free(&ld); tb_free(&x); tb_free(&out); tb_free(&hT); tb_free(&dx); tb_free(&dl);
    ssm_ctx_destroy(ctx);
    test_end();
}

void suite_core(void) {
    result_strings();
    views();
    contexts();
    linrec_errors();
    decay_errors();
}
