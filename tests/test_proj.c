/* Projection chains and the output chain: the special-purpose checks (fused vs unfused
   agreement, every validation error with outputs untouched). Forward against the f64 oracle
   for every activation and norm, backward against finite differences, GEMM counts and
   strided views are rows of the case table (tests/cases.h). */
#include "test.h"

typedef struct pdata {
    const ssm_proj_desc *d;
    int64_t M, dim, N, G;
    double *x, *W, *b, *al, *dy; /* inputs (dy: the loss weights) */
} pdata;

/* Every activation, with and without bias, with per-head L2 norms of several head sizes. */
static ssm_proj_desc all_acts(void) {
    ssm_proj_desc d = ssm_proj_desc_init();
    ssm_proj_desc_add(&d, 4, SSM_PROJ_NONE, 0, 1, 2);
    ssm_proj_desc_add(&d, 6, SSM_PROJ_SILU, 0, 0, 3);
    ssm_proj_desc_add(&d, 3, SSM_PROJ_SIGMOID, 0, 1, 0);
    ssm_proj_desc_add(&d, 2, SSM_PROJ_SIGMOID2, 0, 0, 0);
    ssm_proj_desc_add(&d, 5, SSM_PROJ_LOGSIGMOID, 16, 0, 0);
    ssm_proj_desc_add(&d, 3, SSM_PROJ_SOFTPLUS, 0, 1, 0);
    ssm_proj_desc_add(&d, 4, SSM_PROJ_RELU, 0, 0, 4);
    ssm_proj_desc_add(&d, 5, SSM_PROJ_GELU_TANH, 0, 1, 5);
    ssm_proj_desc_add(&d, 3, SSM_PROJ_DECAY_GATE, 0, 1, 0);
    ssm_proj_desc_add(&d, 2, SSM_PROJ_SOFTCAP, 0.7, 0, 0);
    ssm_proj_desc_add(&d, 2, SSM_PROJ_SOFTCAP, 0, 1, 2);
    ssm_proj_desc_add(&d, 2, SSM_PROJ_DECAY_GATE, 0, 0, 0);
    return d;
}
static int64_t gate_width(const ssm_proj_desc *d) {
    int64_t G = 0;
    int s;
    for (s = 0; s < d->nseg; ++s) if (d->seg[s].act == SSM_PROJ_DECAY_GATE) G += d->seg[s].width;
    return G;
}

/* The tensors of one problem. */
typedef struct pbufs {
    tbuf x, W, b, al, y, pre, dy, dx, dW, db, dal;
} pbufs;

static void pbufs_new(pbufs *B, pdata *p, ssm_dtype dt, int layout) {
    int64_t sx[2] = {p->M, p->dim}, sW[2] = {p->N, p->dim}, sy[2] = {p->M, p->N}, sN[1] = {p->N}, sG[1] = {p->G};
    B->x = tb_random(dt, 2, sx, layout, 1.0, &p->x);
    B->W = tb_random(dt, 2, sW, layout, 0.6, &p->W);
    B->b = tb_random(dt, 1, sN, layout, 0.5, &p->b);
    B->al = tb_random(dt, 1, sG, layout, 1.0, &p->al);
    B->dy = tb_random(dt, 2, sy, layout, 1.0, &p->dy);
    B->y = tb_new(dt, 2, sy, layout);
    B->pre = tb_new(dt, 2, sy, layout);
    B->dx = tb_new(dt, 2, sx, layout);
    B->dW = tb_new(dt, 2, sW, layout);
    B->db = tb_new(dt, 1, sN, layout);
    B->dal = tb_new(dt, 1, sG, layout);
}
static void pbufs_free(pbufs *B, pdata *p) {
    tb_free(&B->x); tb_free(&B->W); tb_free(&B->b); tb_free(&B->al); tb_free(&B->y); tb_free(&B->pre);
    tb_free(&B->dy); tb_free(&B->dx); tb_free(&B->dW); tb_free(&B->db); tb_free(&B->dal);
    free(p->x); free(p->W); free(p->b); free(p->al); free(p->dy);
}
static double *vec(int64_t n) { return (double *)malloc(sizeof(double) * (size_t)(n ? n : 1)); }

/* Fused and unfused agree on a larger, wider problem (f32), forward and backward. */
static void proj_agree_case(void) {
    ssm_ctx *ctx;
    ssm_proj_desc d = ssm_proj_desc_init();
    pdata p;
    pbufs F, U;
    double *a = NULL, *b = NULL;
    int64_t sy[2], sx[2], sW[2], sG[1], sN[1];
    test_begin("proj fused == unfused (GDN-like chain, f32, M=37)");
    ctx = test_ctx();
    ssm_proj_desc_add(&d, 32, SSM_PROJ_SILU, 0, 0, 16); /* q */
    ssm_proj_desc_add(&d, 32, SSM_PROJ_SILU, 0, 0, 16); /* k */
    ssm_proj_desc_add(&d, 64, SSM_PROJ_SILU, 0, 0, 0);  /* v */
    ssm_proj_desc_add(&d, 64, SSM_PROJ_NONE, 0, 0, 0);  /* g */
    ssm_proj_desc_add(&d, 2, SSM_PROJ_DECAY_GATE, 0, 1, 0); /* a */
    ssm_proj_desc_add(&d, 2, SSM_PROJ_SIGMOID2, 0, 0, 0);   /* b */
    d.save = SSM_PROJ_SAVE_PRE;
    d.block_rows = 8;
    p.d = &d, p.M = 37, p.dim = 24, p.N = ssm_proj_desc_width(&d), p.G = gate_width(&d);
    sy[0] = p.M, sy[1] = p.N, sx[0] = p.M, sx[1] = p.dim, sW[0] = p.N, sW[1] = p.dim, sG[0] = p.G, sN[0] = p.N;
    pbufs_new(&F, &p, SSM_F32, LAYOUT_CONTIGUOUS);
    U.x = F.x, U.W = F.W, U.b = F.b, U.al = F.al, U.dy = F.dy;
    U.y = tb_new(SSM_F32, 2, sy, LAYOUT_PADDED), U.pre = tb_new(SSM_F32, 2, sy, LAYOUT_PADDED);
    U.dx = tb_new(SSM_F32, 2, sx, LAYOUT_REVERSED), U.dW = tb_new(SSM_F32, 2, sW, LAYOUT_REVERSED);
    U.db = tb_new(SSM_F32, 1, sN, LAYOUT_PADDED), U.dal = tb_new(SSM_F32, 1, sG, LAYOUT_PADDED);
    a = vec(p.M * p.N * 2), b = vec(p.M * p.N * 2);
    CHECK_OK(ssm_proj_forward(ctx, &d, &F.x.t, &F.W.t, &F.b.t, &F.al.t, &F.y.t, &F.pre.t), ctx);
    CHECK_OK(ssm_proj_backward(ctx, &d, &F.x.t, &F.W.t, &F.b.t, &F.al.t, &F.pre.t, &F.dy.t, &F.dx.t, &F.dW.t, &F.db.t,
                               &F.dal.t), ctx);
    d.path = SSM_PROJ_UNFUSED;
    CHECK_OK(ssm_proj_forward(ctx, &d, &U.x.t, &U.W.t, &U.b.t, &U.al.t, &U.y.t, &U.pre.t), ctx);
    CHECK_OK(ssm_proj_backward(ctx, &d, &U.x.t, &U.W.t, &U.b.t, &U.al.t, &U.pre.t, &U.dy.t, &U.dx.t, &U.dW.t, &U.db.t,
                               &U.dal.t), ctx);
#define AGREE(field, n, tol)                                                                 \
    do {                                                                                     \
        tb_get(&F.field, a);                                                                 \
        tb_get(&U.field, b);                                                                 \
        CHECK(rel_err(a, b, n) <= tol, #field ": fused vs unfused %.3e", rel_err(a, b, n)); \
    } while (0)
    AGREE(y, p.M * p.N, 1e-6);
    AGREE(pre, p.M * p.N, 1e-6);
    AGREE(dx, p.M * p.dim, 1e-5);
    AGREE(dW, p.N * p.dim, 1e-5);
    AGREE(db, p.N, 1e-5);
    AGREE(dal, p.G, 1e-5);
#undef AGREE
    free(a); free(b);
    tb_free(&U.y); tb_free(&U.pre); tb_free(&U.dx); tb_free(&U.dW); tb_free(&U.db); tb_free(&U.dal);
    pbufs_free(&F, &p);
    ssm_ctx_destroy(ctx);
    test_end();
}

/* ---- validation: every error returns its code and writes nothing ---- */
static int proj_untouched(const pbufs *B) {
    return tb_untouched(&B->y) && tb_untouched(&B->pre) && tb_untouched(&B->dx) && tb_untouched(&B->dW) &&
           tb_untouched(&B->db) && tb_untouched(&B->dal);
}


static void proj_errors_case(void) {
    ssm_backend fake_gpu;
    ssm_ctx *ctx, *gctx = NULL;
    ssm_ctx_config cfg = ssm_ctx_config_init();
    ssm_proj_desc d0 = all_acts(), d;
    pdata p;
    pbufs B;
    ssm_tensor t, t2;
    int64_t s2[2];
    test_begin("proj validation errors leave outputs untouched");
    ctx = test_ctx();
    p.d = &d0, p.M = 3, p.dim = 4, p.N = ssm_proj_desc_width(&d0), p.G = gate_width(&d0);
    pbufs_new(&B, &p, SSM_F32, LAYOUT_CONTIGUOUS);
#define FWD(dd, x, W, b, al, y, pre) ssm_proj_forward(ctx, dd, x, W, b, al, y, pre)
#define BWD(dd, pre, dy, dx, dW, db, dal) \
    ssm_proj_backward(ctx, dd, &B.x.t, &B.W.t, &B.b.t, &B.al.t, pre, dy, dx, dW, db, dal)
#define EXPECT(code, expr)                                                                          \
    do {                                                                                            \
        ssm_result r_ = (expr);                                                                     \
        CHECK(r_ == (code), "%s -> %s, expected %s", #expr, ssm_result_string(r_), ssm_result_string(code)); \
        CHECK(ssm_ctx_last_error(ctx)[0] != 0 || r_ == SSM_OK, "no message for %s", #expr);        \
        CHECK(proj_untouched(&B), "outputs written by %s", #expr);                                 \
    } while (0)
    /* segment widths not summing to W's rows */
    d = d0, d.seg[0].width += 1;
    EXPECT(SSM_ERROR_INVALID_SHAPE, FWD(&d, &B.x.t, &B.W.t, &B.b.t, &B.al.t, &B.y.t, NULL));
    EXPECT(SSM_ERROR_INVALID_SHAPE, BWD(&d, NULL, &B.dy.t, &B.dx.t, &B.dW.t, NULL, NULL));
    /* head_dim not dividing a width */
    d = d0, d.seg[1].l2_head = 4;
    EXPECT(SSM_ERROR_INVALID_SHAPE, FWD(&d, &B.x.t, &B.W.t, &B.b.t, &B.al.t, &B.y.t, NULL));
    d = d0, d.seg[0].width = 0;
    EXPECT(SSM_ERROR_INVALID_SHAPE, FWD(&d, &B.x.t, &B.W.t, &B.b.t, &B.al.t, &B.y.t, NULL));
    /* bad desc values */
    d = d0, d.nseg = 0;
    EXPECT(SSM_ERROR_INVALID_VALUE, FWD(&d, &B.x.t, &B.W.t, &B.b.t, &B.al.t, &B.y.t, NULL));
    d = d0, d.seg[2].act = (ssm_proj_act)99;
    EXPECT(SSM_ERROR_INVALID_VALUE, FWD(&d, &B.x.t, &B.W.t, &B.b.t, &B.al.t, &B.y.t, NULL));
    d = d0, d.seg[4].param = -1;
    EXPECT(SSM_ERROR_INVALID_VALUE, FWD(&d, &B.x.t, &B.W.t, &B.b.t, &B.al.t, &B.y.t, NULL));
    d = d0, d.path = (ssm_proj_path)7;
    EXPECT(SSM_ERROR_INVALID_VALUE, FWD(&d, &B.x.t, &B.W.t, &B.b.t, &B.al.t, &B.y.t, NULL));
    EXPECT(SSM_ERROR_NULL_ARGUMENT, FWD(NULL, &B.x.t, &B.W.t, &B.b.t, &B.al.t, &B.y.t, NULL));
    /* save mode vs pre */
    d = d0, d.save = SSM_PROJ_SAVE_PRE;
    EXPECT(SSM_ERROR_NULL_ARGUMENT, FWD(&d, &B.x.t, &B.W.t, &B.b.t, &B.al.t, &B.y.t, NULL));
    EXPECT(SSM_ERROR_NULL_ARGUMENT, BWD(&d, NULL, &B.dy.t, &B.dx.t, &B.dW.t, NULL, NULL));
    EXPECT(SSM_ERROR_INVALID_VALUE, FWD(&d0, &B.x.t, &B.W.t, &B.b.t, &B.al.t, &B.y.t, &B.pre.t));
    /* NULLs: required tensors, a bias or A_log the chain needs */
    EXPECT(SSM_ERROR_NULL_ARGUMENT, FWD(&d0, &B.x.t, &B.W.t, &B.b.t, &B.al.t, NULL, NULL));
    EXPECT(SSM_ERROR_NULL_ARGUMENT, FWD(&d0, &B.x.t, &B.W.t, NULL, &B.al.t, &B.y.t, NULL));
    EXPECT(SSM_ERROR_NULL_ARGUMENT, FWD(&d0, &B.x.t, &B.W.t, &B.b.t, NULL, &B.y.t, NULL));
    EXPECT(SSM_ERROR_NULL_ARGUMENT, BWD(&d0, NULL, &B.dy.t, &B.dx.t, NULL, NULL, NULL));
    t = B.x.t, t.data = NULL;
    EXPECT(SSM_ERROR_NULL_ARGUMENT, FWD(&d0, &t, &B.W.t, &B.b.t, &B.al.t, &B.y.t, NULL));
    /* shapes and dtypes */
    s2[0] = p.M + 1, s2[1] = p.N;
    t = ssm_tensor_make(B.y.t.data, SSM_F32, ssm_cpu(), 2, s2, NULL);
    EXPECT(SSM_ERROR_INVALID_SHAPE, FWD(&d0, &B.x.t, &B.W.t, &B.b.t, &B.al.t, &t, NULL));
    s2[0] = p.N, s2[1] = p.dim + 1;
    t = ssm_tensor_make(B.W.t.data, SSM_F32, ssm_cpu(), 2, s2, NULL);
    EXPECT(SSM_ERROR_INVALID_SHAPE, FWD(&d0, &B.x.t, &t, &B.b.t, &B.al.t, &B.y.t, NULL));
    t = B.dW.t, t.shape[1] -= 1;
    EXPECT(SSM_ERROR_INVALID_SHAPE, BWD(&d0, NULL, &B.dy.t, &B.dx.t, &t, NULL, NULL));
    t = B.al.t, t.shape[0] += 1;
    EXPECT(SSM_ERROR_INVALID_SHAPE, FWD(&d0, &B.x.t, &B.W.t, &B.b.t, &t, &B.y.t, NULL));
    t = B.W.t, t.dtype = SSM_F64;
    EXPECT(SSM_ERROR_INVALID_DTYPE, FWD(&d0, &B.x.t, &t, &B.b.t, &B.al.t, &B.y.t, NULL));
    t = B.x.t, t.dtype = SSM_I32;
    EXPECT(SSM_ERROR_INVALID_DTYPE, FWD(&d0, &t, &B.W.t, &B.b.t, &B.al.t, &B.y.t, NULL));
    t = B.dy.t, t.dtype = SSM_F64;
    EXPECT(SSM_ERROR_INVALID_DTYPE, BWD(&d0, NULL, &t, &B.dx.t, &B.dW.t, NULL, NULL));
    t = B.y.t, t.device = ssm_cuda_device(0);
    EXPECT(SSM_ERROR_INVALID_DEVICE, FWD(&d0, &B.x.t, &B.W.t, &B.b.t, &B.al.t, &t, NULL));
    /* aliasing: an output over an input, over another output, over itself */
    s2[0] = p.M, s2[1] = p.N;
    t = ssm_tensor_make(B.x.t.data, SSM_F32, ssm_cpu(), 2, s2, NULL);
    EXPECT(SSM_ERROR_ALIASING, FWD(&d0, &B.x.t, &B.W.t, &B.b.t, &B.al.t, &t, NULL));
    d = d0, d.save = SSM_PROJ_SAVE_PRE;
    EXPECT(SSM_ERROR_ALIASING, FWD(&d, &B.x.t, &B.W.t, &B.b.t, &B.al.t, &B.y.t, &B.y.t));
    s2[0] = p.M, s2[1] = p.dim;
    t = ssm_tensor_make(B.dy.t.data, SSM_F32, ssm_cpu(), 2, s2, NULL);
    EXPECT(SSM_ERROR_ALIASING, BWD(&d0, NULL, &B.dy.t, &t, &B.dW.t, NULL, NULL));
    t2 = B.dx.t, t2.strides[0] = 1, t2.strides[1] = 1;
    EXPECT(SSM_ERROR_INVALID_STRIDE, BWD(&d0, NULL, &B.dy.t, &t2, &B.dW.t, NULL, NULL));
    /* a backend that is not on the CPU */
    memset(&fake_gpu, 0, sizeof fake_gpu);
    fake_gpu.name = "fake-gpu", fake_gpu.device_type = SSM_DEVICE_CUDA;
    fake_gpu.gemm = ssm_reference_backend()->gemm; /* never reached: the op refuses first */
    cfg.backend = &fake_gpu;
    CHECK(ssm_ctx_create(&cfg, &gctx) == SSM_OK, "fake context");
    if (gctx) {
        ssm_result r = ssm_proj_forward(gctx, &d0, &B.x.t, &B.W.t, &B.b.t, &B.al.t, &B.y.t, NULL);
        /* supports is asked with the plan, after validation: host tensors are refused first */
        CHECK(r == SSM_ERROR_UNSUPPORTED || r == SSM_ERROR_INVALID_DEVICE, "non-CPU backend -> %s", ssm_result_string(r));
        CHECK(proj_untouched(&B), "outputs written on a non-CPU backend");
        ssm_ctx_destroy(gctx);
    }
#undef FWD
#undef BWD
    pbufs_free(&B, &p);
    ssm_ctx_destroy(ctx);
    test_end();
}

static void outchain_errors_case(void) {
    ssm_ctx *ctx;
    ssm_outchain_desc d0 = ssm_outchain_desc_init(), d;
    int64_t so[2] = {3, 8}, sw[1] = {4}, sWo[2] = {5, 8}, sy[2] = {3, 5}, sr[2] = {3, 2}, s2[2];
    tbuf to, tg, tw, tWo, tdy, ty, tr, tdo, tdg, tdw, tdWo;
    ssm_tensor t;
    ssm_result r;
    test_begin("outchain validation errors leave outputs untouched");
    ctx = test_ctx();
    d0.head_dim = 4;
    to = tb_random(SSM_F64, 2, so, 0, 1, NULL), tg = tb_random(SSM_F64, 2, so, 0, 1, NULL);
    tw = tb_random(SSM_F64, 1, sw, 0, 1, NULL), tWo = tb_random(SSM_F64, 2, sWo, 0, 1, NULL);
    tdy = tb_random(SSM_F64, 2, sy, 0, 1, NULL);
    ty = tb_new(SSM_F64, 2, sy, 0), tr = tb_new(SSM_F64, 2, sr, 0), tdo = tb_new(SSM_F64, 2, so, 0);
    tdg = tb_new(SSM_F64, 2, so, 0), tdw = tb_new(SSM_F64, 1, sw, 0), tdWo = tb_new(SSM_F64, 2, sWo, 0);
#define OC_UNTOUCHED                                                                                            \
    (tb_untouched(&ty) && tb_untouched(&tr) && tb_untouched(&tdo) && tb_untouched(&tdg) && tb_untouched(&tdw) && \
     tb_untouched(&tdWo))
#define OEXPECT(code, expr)                                                                                    \
    do {                                                                                                       \
        r = (expr);                                                                                            \
        CHECK(r == (code), "%s -> %s, expected %s", #expr, ssm_result_string(r), ssm_result_string(code));    \
        CHECK(OC_UNTOUCHED, "outputs written by %s", #expr);                                                   \
    } while (0)
    d = d0, d.head_dim = 3; /* does not divide 8 */
    OEXPECT(SSM_ERROR_INVALID_SHAPE, ssm_outchain_forward(ctx, &d, &to.t, &tg.t, &tw.t, &tWo.t, &ty.t, &tr.t));
    OEXPECT(SSM_ERROR_INVALID_SHAPE, ssm_outchain_backward(ctx, &d, &to.t, &tg.t, &tw.t, &tWo.t, NULL, &tdy.t, &tdo.t,
                                                           &tdg.t, &tdw.t, &tdWo.t));
    d = d0, d.gate = (ssm_outchain_gate)5;
    OEXPECT(SSM_ERROR_INVALID_VALUE, ssm_outchain_forward(ctx, &d, &to.t, &tg.t, &tw.t, &tWo.t, &ty.t, &tr.t));
    OEXPECT(SSM_ERROR_NULL_ARGUMENT, ssm_outchain_forward(ctx, &d0, &to.t, NULL, &tw.t, &tWo.t, &ty.t, &tr.t));
    s2[0] = 5, s2[1] = 7;
    t = ssm_tensor_make(tWo.t.data, SSM_F64, ssm_cpu(), 2, s2, NULL);
    OEXPECT(SSM_ERROR_INVALID_SHAPE, ssm_outchain_forward(ctx, &d0, &to.t, &tg.t, &tw.t, &t, &ty.t, &tr.t));
    t = tr.t, t.shape[1] = 3;
    OEXPECT(SSM_ERROR_INVALID_SHAPE, ssm_outchain_forward(ctx, &d0, &to.t, &tg.t, &tw.t, &tWo.t, &ty.t, &t));
    t = tg.t, t.dtype = SSM_F32;
    OEXPECT(SSM_ERROR_INVALID_DTYPE, ssm_outchain_forward(ctx, &d0, &to.t, &t, &tw.t, &tWo.t, &ty.t, &tr.t));
    t = tdWo.t, t.shape[0] = 4;
    OEXPECT(SSM_ERROR_INVALID_SHAPE, ssm_outchain_backward(ctx, &d0, &to.t, &tg.t, &tw.t, &tWo.t, NULL, &tdy.t, &tdo.t,
                                                           &tdg.t, &tdw.t, &t));
    OEXPECT(SSM_ERROR_ALIASING, ssm_outchain_backward(ctx, &d0, &to.t, &tg.t, &tw.t, &tWo.t, NULL, &tdy.t, &tdo.t,
                                                      &tdo.t, &tdw.t, &tdWo.t));
    s2[0] = 3, s2[1] = 5;
    t = ssm_tensor_make(to.t.data, SSM_F64, ssm_cpu(), 2, s2, NULL);
    OEXPECT(SSM_ERROR_ALIASING, ssm_outchain_forward(ctx, &d0, &to.t, &tg.t, &tw.t, &tWo.t, &t, &tr.t));
#undef OEXPECT
#undef OC_UNTOUCHED
    tb_free(&to); tb_free(&tg); tb_free(&tw); tb_free(&tWo); tb_free(&tdy); tb_free(&ty); tb_free(&tr);
    tb_free(&tdo); tb_free(&tdg); tb_free(&tdw); tb_free(&tdWo);
    ssm_ctx_destroy(ctx);
    test_end();
}

void suite_proj(void) {
    proj_agree_case();
    proj_errors_case();
    outchain_errors_case();
}
