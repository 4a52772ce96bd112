/* Delta rule (DeltaNet, Gated DeltaNet, DeltaProduct), the tests outside the op case table
   (whose rows check every family, method and layout against its own oracle): against an f64
   token-by-token oracle that forms each transition matrix, chunked == recurrent, finite-difference gradients of
   every input, varlen == separate runs, state round trips, decode steps, odd sizes and views,
   strong gates, and error paths that write nothing. */
#include "test.h"

/* One configuration. Logical layouts (row-major doubles): q [B,T,H,K], k [B,T,H,nh,K],
   v [B,T,H,nh,V], beta [B,T,H,nh], g [B,T,H], states [N,H,K,V]. */
typedef struct dl_case {
    ssm_dtype dt;
    int64_t B, T, H, K, V, nh;
    int gated, use_s0, use_sT, factored; /* factored: rank-5 k/v even for nh = 1 */
    int layout;                          /* LAYOUT_* or DL_HEAD_FIRST                    */
    ssm_delta_method method;
    int64_t chunk;
    int64_t nseq;                        /* > 0: varlen with this many sequences, B = 1 */
    double gmin, bmax;                   /* g in [gmin, 0], beta in (0, bmax]            */
} dl_case;

#define DL_HEAD_FIRST 3

static int64_t dl_N(const dl_case *c) { return c->nseq ? c->nseq : c->B; }

/* S <- alpha (I - b k k^T) S + b k v^T, with the K x K transition formed explicitly */
static void oracle_factor(int64_t K, int64_t V, double alpha, double b, const double *k, const double *v, double *S,
                          double *P, double *tmp) {
    int64_t i, j, c;
    for (i = 0; i < K; ++i)
        for (j = 0; j < K; ++j) P[i * K + j] = alpha * ((i == j ? 1.0 : 0.0) - b * k[i] * k[j]);
    for (i = 0; i < K; ++i)
        for (c = 0; c < V; ++c) {
            double acc = b * k[i] * v[c];
            for (j = 0; j < K; ++j) acc += P[i * K + j] * S[j * V + c];
            tmp[i * V + c] = acc;
        }
    memcpy(S, tmp, sizeof(double) * (size_t)(K * V));
}

/* The definition, token by token; cu (NULL = B independent sequences). */
static void oracle(const dl_case *c, const int64_t *cu, double scale, const double *q, const double *k,
                   const double *v, const double *beta, const double *g, const double *s0, double *o, double *sT) {
    int64_t K = c->K, V = c->V, H = c->H, nh = c->nh, T = c->T, N = dl_N(c), n, h, t, j, f, r;
    double *S = (double *)malloc(sizeof(double) * (size_t)(K * V)), *tmp = (double *)malloc(sizeof(double) * (size_t)(K * V));
    double *P = (double *)malloc(sizeof(double) * (size_t)(K * K));
    for (n = 0; n < N; ++n)
        for (h = 0; h < H; ++h) {
            int64_t b = cu ? 0 : n, t0 = cu ? cu[n] : 0, t1 = cu ? cu[n + 1] : T;
            for (f = 0; f < K * V; ++f) S[f] = s0 ? s0[(n * H + h) * K * V + f] : 0.0;
            for (t = t0; t < t1; ++t) {
                int64_t tok = (b * T + t) * H + h;
                for (j = 0; j < nh; ++j) {
                    double alpha = (g && j == 0) ? exp(g[tok]) : 1.0;
                    oracle_factor(K, V, alpha, beta[tok * nh + j], k + (tok * nh + j) * K, v + (tok * nh + j) * V, S, P, tmp);
                }
                for (f = 0; f < V; ++f) {
                    double acc = 0.0;
                    for (r = 0; r < K; ++r) acc += S[r * V + f] * q[tok * K + r];
                    o[tok * V + f] = scale * acc;
                }
            }
            if (sT) memcpy(sT + (n * H + h) * K * V, S, sizeof(double) * (size_t)(K * V));
        }
    free(S), free(tmp), free(P);
}

/* A buffer in the case's layout; DL_HEAD_FIRST stores token tensors as [B,H,T,...] and views
   them as [B,T,H,...] (dims 1 and 2 swapped in memory). */
static tbuf dl_buf(const dl_case *c, int ndim, const int64_t *shape, int token) {
    if (c->layout == DL_HEAD_FIRST && token) {
        tbuf b;
        int64_t ps[SSM_MAX_DIMS], pst[SSM_MAX_DIMS], st[SSM_MAX_DIMS], span = 1;
        int i;
        size_t es = c->dt.bits / 8;
        for (i = 0; i < ndim; ++i) ps[i] = shape[i];
        ps[1] = shape[2], ps[2] = shape[1];
        for (i = ndim - 1; i >= 0; --i) { pst[i] = span; span *= ps[i] > 0 ? ps[i] : 1; }
        for (i = 0; i < ndim; ++i) st[i] = pst[i];
        st[1] = pst[2], st[2] = pst[1];
        memset(&b, 0, sizeof b);
        b.bytes = (size_t)span * es + es;
        b.mem = (unsigned char *)malloc(b.bytes);
        b.t = ssm_tensor_make(b.mem, c->dt, ssm_cpu(), ndim, shape, st);
        tb_poison(&b);
        return b;
    }
    return tb_new(c->dt, ndim, shape, c->layout == DL_HEAD_FIRST ? LAYOUT_CONTIGUOUS : c->layout);
}

/* Inputs of one case, as tensors and as the stored (rounded) logical values. */
typedef struct dl_data {
    int64_t nq, nk, nv, nb, ng, ns, no;
    int64_t *cu;
    double *q, *k, *v, *beta, *g, *s0;
    tbuf tq, tk, tv, tbeta, tg, ts0, tcu;
} dl_data;

static ssm_dtype dl_i64(void) {
    ssm_dtype t;
    t.code = SSM_DTYPE_INT, t.bits = 64, t.lanes = 1;
    return t;
}

static void dl_store(tbuf *b, double *vals) {
    tb_set(b, vals);
    tb_get(b, vals);
}

static void dl_make(const dl_case *c, dl_data *d) {
    int64_t B = c->B, T = c->T, H = c->H, K = c->K, V = c->V, nh = c->nh, N = dl_N(c), i, j;
    int fac = c->factored || nh > 1;
    int64_t sq[4] = {B, T, H, K}, sk[5] = {B, T, H, nh, K}, sv[5] = {B, T, H, nh, V}, sb[4] = {B, T, H, nh};
    int64_t ss[4] = {N, H, K, V}, ncu;
    memset(d, 0, sizeof *d);
    d->nq = B * T * H * K, d->nk = B * T * H * nh * K, d->nv = B * T * H * nh * V, d->nb = B * T * H * nh;
    d->ng = B * T * H, d->ns = N * H * K * V, d->no = B * T * H * V;
    if (!fac) sk[3] = K, sv[3] = V;
    d->q = (double *)malloc(sizeof(double) * (size_t)(d->nq + 1));
    d->k = (double *)malloc(sizeof(double) * (size_t)(d->nk + 1));
    d->v = (double *)malloc(sizeof(double) * (size_t)(d->nv + 1));
    d->beta = (double *)malloc(sizeof(double) * (size_t)(d->nb + 1));
    d->g = (double *)malloc(sizeof(double) * (size_t)(d->ng + 1));
    d->s0 = (double *)malloc(sizeof(double) * (size_t)(d->ns + 1));
    for (i = 0; i < d->nq; ++i) d->q[i] = test_uniform(-1, 1);
    for (i = 0; i < d->nk / K; ++i) { /* unit keys: the transitions stay contractions */
        double nrm = 0;
        for (j = 0; j < K; ++j) {
            d->k[i * K + j] = test_normal();
            nrm += d->k[i * K + j] * d->k[i * K + j];
        }
        nrm = sqrt(nrm) + 1e-12;
        for (j = 0; j < K; ++j) d->k[i * K + j] /= nrm;
    }
    for (i = 0; i < d->nv; ++i) d->v[i] = test_uniform(-1, 1);
    for (i = 0; i < d->nb; ++i) d->beta[i] = test_uniform(0.05, c->bmax);
    for (i = 0; i < d->ng; ++i) d->g[i] = test_uniform(c->gmin, 0.0);
    for (i = 0; i < d->ns; ++i) d->s0[i] = test_uniform(-1, 1);
    d->tq = dl_buf(c, 4, sq, 1);
    d->tk = dl_buf(c, fac ? 5 : 4, sk, 1);
    d->tv = dl_buf(c, fac ? 5 : 4, sv, 1);
    d->tbeta = dl_buf(c, fac ? 4 : 3, sb, 1);
    d->tg = dl_buf(c, 3, sb, 1);
    d->ts0 = dl_buf(c, 4, ss, 0);
    dl_store(&d->tq, d->q), dl_store(&d->tk, d->k), dl_store(&d->tv, d->v), dl_store(&d->tbeta, d->beta);
    dl_store(&d->tg, d->g), dl_store(&d->ts0, d->s0);
    if (c->nseq) { /* random cut points, empty sequences allowed */
        ncu = c->nseq + 1;
        d->cu = (int64_t *)malloc(sizeof(int64_t) * (size_t)ncu);
        d->cu[0] = 0, d->cu[c->nseq] = T;
        for (i = 1; i < c->nseq; ++i) d->cu[i] = (int64_t)test_uniform(0, (double)T + 0.999);
        for (i = 1; i < c->nseq; ++i) /* sort */
            for (j = i; j > 1 && d->cu[j - 1] > d->cu[j]; --j) { int64_t x = d->cu[j]; d->cu[j] = d->cu[j - 1]; d->cu[j - 1] = x; }
        d->tcu = tb_new(c->nseq % 2 ? ssm_dtype_i32() : dl_i64(), 1, &ncu, LAYOUT_CONTIGUOUS);
        for (i = 0; i < ncu; ++i) {
            if (c->nseq % 2) ((int32_t *)d->tcu.t.data)[i] = (int32_t)d->cu[i];
            else ((int64_t *)d->tcu.t.data)[i] = d->cu[i];
        }
    }
}

static void dl_free(dl_data *d) {
    tb_free(&d->tq), tb_free(&d->tk), tb_free(&d->tv), tb_free(&d->tbeta), tb_free(&d->tg), tb_free(&d->ts0);
    if (d->cu) tb_free(&d->tcu);
    free(d->q), free(d->k), free(d->v), free(d->beta), free(d->g), free(d->s0), free(d->cu);
}

static double dl_tol(const dl_case *c) { return c->dt.bits == 64 ? 1e-10 : 2e-4; }

static void dl_name(char *name, const char *what, const dl_case *c) {
    sprintf(name, "delta %s %s B%lld T%lld H%lld K%lld V%lld nh%lld%s g%d(%g) s0%d sT%d layout%d %s C%lld seqs%lld",
            what, ssm_dtype_name(c->dt), (long long)c->B, (long long)c->T, (long long)c->H, (long long)c->K,
            (long long)c->V, (long long)c->nh, c->factored ? "f" : "", c->gated, c->gmin, c->use_s0, c->use_sT,
            c->layout, ssm_delta_method_name(c->method), (long long)c->chunk, (long long)c->nseq);
}

/* forward against the oracle; chunked and recurrent against each other */
static void dl_forward_case(const dl_case *c) {
    char name[256];
    ssm_ctx *ctx;
    dl_data d;
    int64_t so[4] = {c->B, c->T, c->H, c->V}, ss[4] = {dl_N(c), c->H, c->K, c->V};
    double *ref, *refT, *got, *gotT, e, scale = 1.0 / sqrt((double)c->K);
    tbuf to, tT, to2;
    ssm_delta_desc desc = ssm_delta_desc_init();
    ssm_delta_stats stats;
    size_t wsb = 0;
    dl_name(name, "fwd", c);
    test_begin(name);
    ctx = test_ctx();
    dl_make(c, &d);
    to = dl_buf(c, 4, so, 1), to2 = dl_buf(c, 4, so, 1), tT = dl_buf(c, 4, ss, 0);
    ref = (double *)malloc(sizeof(double) * (size_t)(d.no + 1)), got = (double *)malloc(sizeof(double) * (size_t)(d.no + 1));
    refT = (double *)malloc(sizeof(double) * (size_t)d.ns), gotT = (double *)malloc(sizeof(double) * (size_t)d.ns);
    oracle(c, d.cu, scale, d.q, d.k, d.v, d.beta, c->gated ? d.g : NULL, c->use_s0 ? d.s0 : NULL, ref, refT);
    desc.method = c->method, desc.chunk = c->chunk, desc.stats = &stats;
    CHECK_OK(ssm_delta_forward(ctx, &desc, &d.tq.t, &d.tk.t, &d.tv.t, &d.tbeta.t, c->gated ? &d.tg.t : NULL,
                               c->use_s0 ? &d.ts0.t : NULL, c->nseq ? &d.tcu.t : NULL, &to.t, c->use_sT ? &tT.t : NULL),
             ctx);
    tb_get(&to, got);
    e = rel_err(got, ref, d.no);
    CHECK(e <= dl_tol(c), "o rel err %.3e (%s)", e, ssm_delta_method_name(stats.method));
    CHECK(tb_outside_untouched(&to), "writes outside the o view");
    if (c->use_sT) {
        tb_get(&tT, gotT);
        e = rel_err(gotT, refT, d.ns);
        CHECK(e <= dl_tol(c), "sT rel err %.3e", e);
        CHECK(tb_outside_untouched(&tT), "writes outside the sT view");
    } else {
        CHECK(tb_untouched(&tT), "sT written though not passed");
    }
    if (c->method != SSM_DELTA_AUTO) CHECK(stats.method == c->method, "stats.method %d", (int)stats.method);
    CHECK_OK(ssm_delta_workspace_size(ctx, &desc, c->dt, c->B, c->T, c->H, c->K, c->V, c->nh, 0, &wsb), ctx);
    if (!c->nseq) CHECK(wsb == stats.workspace_bytes, "workspace_size %zu, the call used %zu", wsb, stats.workspace_bytes);
    else CHECK(wsb >= stats.workspace_bytes, "workspace_size %zu < %zu used", wsb, stats.workspace_bytes);
    /* the other method agrees */
    desc.method = stats.method == SSM_DELTA_CHUNKED ? SSM_DELTA_RECURRENT : SSM_DELTA_CHUNKED;
    desc.stats = NULL;
    CHECK_OK(ssm_delta_forward(ctx, &desc, &d.tq.t, &d.tk.t, &d.tv.t, &d.tbeta.t, c->gated ? &d.tg.t : NULL,
                               c->use_s0 ? &d.ts0.t : NULL, c->nseq ? &d.tcu.t : NULL, &to2.t, NULL),
             ctx);
    tb_get(&to2, ref);
    e = rel_err(ref, got, d.no);
    CHECK(e <= dl_tol(c), "chunked vs recurrent rel err %.3e", e);
    tb_free(&to), tb_free(&to2), tb_free(&tT);
    free(ref), free(refT), free(got), free(gotT);
    dl_free(&d);
    ssm_ctx_destroy(ctx);
    test_end();
}

/* loss = sum(Wo .* o) + sum(Ws .* sT) through the oracle */
static double dl_loss(const dl_case *c, const dl_data *d, const double *Wo, const double *Ws, double *ob, double *sb) {
    double L = 0;
    int64_t i;
    oracle(c, d->cu, 1.0 / sqrt((double)c->K), d->q, d->k, d->v, d->beta, c->gated ? d->g : NULL,
           c->use_s0 ? d->s0 : NULL, ob, sb);
    for (i = 0; i < d->no; ++i) L += Wo[i] * ob[i];
    if (Ws) for (i = 0; i < d->ns; ++i) L += Ws[i] * sb[i];
    return L;
}

/* backward against central finite differences of the oracle (f64), every input */
static void dl_backward_case(const dl_case *c) {
    char name[256];
    ssm_ctx *ctx;
    dl_data d;
    int64_t so[4] = {c->B, c->T, c->H, c->V}, ss[4] = {dl_N(c), c->H, c->K, c->V}, i, a;
    int64_t sk[5] = {c->B, c->T, c->H, c->nh, c->K}, sv[5] = {c->B, c->T, c->H, c->nh, c->V};
    int64_t sb[4] = {c->B, c->T, c->H, c->nh}, sq[4] = {c->B, c->T, c->H, c->K};
    int fac = c->factored || c->nh > 1;
    double *Wo, *Ws, *ob, *sbuf;
    tbuf tWo, tWs, tg[6], tg2[6];
    ssm_delta_desc desc = ssm_delta_desc_init();
    dl_name(name, "bwd+fd", c);
    test_begin(name);
    ctx = test_ctx();
    dl_make(c, &d);
    if (!fac) sk[3] = c->K, sv[3] = c->V;
    tWo = dl_buf(c, 4, so, 1), tWs = dl_buf(c, 4, ss, 0);
    Wo = (double *)malloc(sizeof(double) * (size_t)d.no), Ws = (double *)malloc(sizeof(double) * (size_t)d.ns);
    for (i = 0; i < d.no; ++i) Wo[i] = test_uniform(-1, 1);
    for (i = 0; i < d.ns; ++i) Ws[i] = test_uniform(-1, 1);
    dl_store(&tWo, Wo), dl_store(&tWs, Ws);
    ob = (double *)malloc(sizeof(double) * (size_t)d.no), sbuf = (double *)malloc(sizeof(double) * (size_t)d.ns);
    for (a = 0; a < 2; ++a) { /* the gradient buffers, twice: determinism */
        tbuf *t = a ? tg2 : tg;
        t[0] = dl_buf(c, 4, sq, 1);
        t[1] = dl_buf(c, fac ? 5 : 4, sk, 1);
        t[2] = dl_buf(c, fac ? 5 : 4, sv, 1);
        t[3] = dl_buf(c, fac ? 4 : 3, sb, 1);
        t[4] = dl_buf(c, 3, sb, 1);
        t[5] = dl_buf(c, 4, ss, 0);
    }
    desc.method = c->method, desc.chunk = c->chunk;
    for (a = 0; a < 2; ++a) {
        tbuf *t = a ? tg2 : tg;
        CHECK_OK(ssm_delta_backward(ctx, &desc, &d.tq.t, &d.tk.t, &d.tv.t, &d.tbeta.t, c->gated ? &d.tg.t : NULL,
                                    c->use_s0 ? &d.ts0.t : NULL, c->nseq ? &d.tcu.t : NULL, &tWo.t,
                                    c->use_sT ? &tWs.t : NULL, &t[0].t, &t[1].t, &t[2].t, &t[3].t,
                                    c->gated ? &t[4].t : NULL, &t[5].t),
                 ctx);
    }
    for (a = 0; a < 6; ++a) {
        CHECK(tg[a].bytes == tg2[a].bytes && memcmp(tg[a].mem, tg2[a].mem, tg[a].bytes) == 0,
              "gradient %d differs between two identical calls", (int)a);
        if (a != 4 || c->gated) CHECK(tb_outside_untouched(&tg[a]), "gradient %d written outside its view", (int)a);
        else CHECK(tb_untouched(&tg[a]), "dg written without g");
    }
    for (a = 0; a < 6; ++a) {
        static const char *names[6] = {"dq", "dk", "dv", "dbeta", "dg", "ds0"};
        double *vals = a == 0 ? d.q : a == 1 ? d.k : a == 2 ? d.v : a == 3 ? d.beta : a == 4 ? d.g : d.s0;
        int64_t cnt = a == 0 ? d.nq : a == 1 ? d.nk : a == 2 ? d.nv : a == 3 ? d.nb : a == 4 ? d.ng : d.ns;
        double *got = (double *)malloc(sizeof(double) * (size_t)cnt), *fd = (double *)malloc(sizeof(double) * (size_t)cnt), e;
        if (a == 4 && !c->gated) { free(got), free(fd); continue; }
        tb_get(&tg[a], got);
        for (i = 0; i < cnt; ++i) {
            double keep = vals[i], lp, lm, h = 1e-6;
            if (a == 5 && !c->use_s0) { /* the gradient at s0 = 0: perturb a zero state */
                fd[i] = 0;
                continue;
            }
            vals[i] = keep + h;
            lp = dl_loss(c, &d, Wo, c->use_sT ? Ws : NULL, ob, sbuf);
            vals[i] = keep - h;
            lm = dl_loss(c, &d, Wo, c->use_sT ? Ws : NULL, ob, sbuf);
            vals[i] = keep;
            fd[i] = (lp - lm) / (2 * h);
        }
        if (a == 5 && !c->use_s0) {
            free(got), free(fd);
            continue;
        }
        { /* relative, with an absolute floor for the finite differences' rounding noise (about
             1e-10 per entry): the s0 gradient behind g = -20 gates is itself about 1e-9 */
            double num = 0, den = 0;
            for (i = 0; i < cnt; ++i) num += (got[i] - fd[i]) * (got[i] - fd[i]), den += fd[i] * fd[i];
            e = sqrt(num);
            CHECK(e <= 1e-6 * sqrt(den) + 1e-8 * sqrt((double)cnt),
                  "%s vs finite differences: |err| %.3e, |fd| %.3e", names[a], e, sqrt(den));
        }
        free(got), free(fd);
    }
    for (a = 0; a < 6; ++a) tb_free(&tg[a]), tb_free(&tg2[a]);
    tb_free(&tWo), tb_free(&tWs);
    free(Wo), free(Ws), free(ob), free(sbuf);
    dl_free(&d);
    ssm_ctx_destroy(ctx);
    test_end();
}

/* varlen == each sequence on its own; two halves with the state passed == the whole */
static void dl_split_case(ssm_dtype dt, ssm_delta_method method, int gated, int64_t nh) {
    char name[160];
    ssm_ctx *ctx;
    dl_case c;
    dl_data d;
    int64_t n, i, f, h;
    double *whole, *wT, *part, *pT;
    tbuf to, tT;
    ssm_delta_desc desc = ssm_delta_desc_init();
    memset(&c, 0, sizeof c);
    c.dt = dt, c.B = 1, c.T = 150, c.H = 2, c.K = 16, c.V = 12, c.nh = nh, c.gated = gated, c.use_s0 = 1, c.use_sT = 1;
    c.layout = LAYOUT_PADDED, c.method = method, c.chunk = 16, c.nseq = 4, c.gmin = -1.0, c.bmax = 1.0;
    sprintf(name, "delta varlen == separate, halves == whole %s %s g%d nh%lld", ssm_dtype_name(dt),
            ssm_delta_method_name(method), gated, (long long)nh);
    test_begin(name);
    ctx = test_ctx();
    dl_make(&c, &d);
    d.cu[1] = 0, d.cu[2] = 61, d.cu[3] = 64; /* an empty sequence, an odd one, a short one */
    ((int64_t *)d.tcu.t.data)[1] = 0, ((int64_t *)d.tcu.t.data)[2] = 61, ((int64_t *)d.tcu.t.data)[3] = 64; /* i64 (N even) */
    {
        int64_t so[4] = {1, c.T, c.H, c.V}, ss[4] = {4, c.H, c.K, c.V};
        to = dl_buf(&c, 4, so, 1), tT = dl_buf(&c, 4, ss, 0);
    }
    desc.method = method, desc.chunk = c.chunk;
    CHECK_OK(ssm_delta_forward(ctx, &desc, &d.tq.t, &d.tk.t, &d.tv.t, &d.tbeta.t, gated ? &d.tg.t : NULL, &d.ts0.t,
                               &d.tcu.t, &to.t, &tT.t),
             ctx);
    whole = (double *)malloc(sizeof(double) * (size_t)d.no), wT = (double *)malloc(sizeof(double) * (size_t)d.ns);
    part = (double *)malloc(sizeof(double) * (size_t)d.no), pT = (double *)malloc(sizeof(double) * (size_t)d.ns);
    tb_get(&to, whole), tb_get(&tT, wT);
    for (n = 0; n < 4; ++n) {
        /* sequence n as its own B = 1 call on sub-views of the same buffers, in two halves */
        int64_t t0 = d.cu[n], len = d.cu[n + 1] - t0, mid = len / 2 + (n == 2), half;
        ssm_tensor q = d.tq.t, k = d.tk.t, v = d.tv.t, b = d.tbeta.t, g = d.tg.t, s0 = d.ts0.t, o, sT, st;
        tbuf tmpo, tmpT, tmpS;
        int64_t so[4] = {1, len, c.H, c.V}, ss[4] = {1, c.H, c.K, c.V};
        tmpo = tb_new(dt, 4, so, LAYOUT_CONTIGUOUS), tmpT = tb_new(dt, 4, ss, LAYOUT_CONTIGUOUS);
        tmpS = tb_new(dt, 4, ss, LAYOUT_REVERSED);
        s0.shape[0] = 1;
        s0.data = (char *)s0.data + n * s0.strides[0] * (int64_t)(dt.bits / 8);
        for (half = 0; half < 2; ++half) {
            int64_t a0 = half ? mid : 0, a1 = half ? len : mid;
            ssm_tensor *ts[5];
            int z;
            ts[0] = &q, ts[1] = &k, ts[2] = &v, ts[3] = &b, ts[4] = &g;
            for (z = 0; z < 5; ++z) {
                *ts[z] = z == 0 ? d.tq.t : z == 1 ? d.tk.t : z == 2 ? d.tv.t : z == 3 ? d.tbeta.t : d.tg.t;
                ts[z]->shape[1] = a1 - a0;
                ts[z]->data = (char *)ts[z]->data + (t0 + a0) * ts[z]->strides[1] * (int64_t)(dt.bits / 8);
            }
            o = tmpo.t;
            o.shape[1] = a1 - a0;
            o.data = (char *)o.data + a0 * o.strides[1] * (int64_t)(dt.bits / 8);
            st = half ? tmpT.t : tmpS.t;
            CHECK_OK(ssm_delta_forward(ctx, &desc, &q, &k, &v, &b, gated ? &g : NULL, half ? &tmpS.t : &s0, NULL, &o,
                                       &st),
                     ctx);
        }
        sT = tmpT.t;
        {
            double *po = (double *)malloc(sizeof(double) * (size_t)(len * c.H * c.V + 1)), *ps = pT;
            double e, num = 0, den = 0;
            tb_get(&tmpo, po);
            for (i = 0; i < len * c.H * c.V; ++i) {
                double w = whole[(t0 * c.H * c.V) + i];
                num += (po[i] - w) * (po[i] - w), den += w * w;
            }
            e = sqrt(num) / (sqrt(den) > 1e-300 ? sqrt(den) : 1.0);
            CHECK(e <= (dt.bits == 64 ? 1e-10 : 2e-4), "sequence %lld: o rel err %.3e", (long long)n, e);
            tb_get(&tmpT, ps);
            num = den = 0;
            for (h = 0; h < c.H; ++h)
                for (f = 0; f < c.K * c.V; ++f) {
                    double w = wT[(n * c.H + h) * c.K * c.V + f], x = ps[h * c.K * c.V + f];
                    num += (x - w) * (x - w), den += w * w;
                }
            e = sqrt(num) / sqrt(den);
            CHECK(e <= (dt.bits == 64 ? 1e-10 : 2e-4), "sequence %lld: sT rel err %.3e", (long long)n, e);
            free(po);
        }
        (void)sT;
        tb_free(&tmpo), tb_free(&tmpT), tb_free(&tmpS);
    }
    tb_free(&to), tb_free(&tT);
    free(whole), free(wT), free(part), free(pT);
    dl_free(&d);
    ssm_ctx_destroy(ctx);
    test_end();
}

/* T decode steps == one forward over T tokens (o and the final state) */
static void dl_step_case(ssm_dtype dt, int gated, int64_t nh) {
    char name[128];
    ssm_ctx *ctx;
    dl_case c;
    dl_data d;
    int64_t t, i;
    double *ref, *refT, *got, *gotS, e;
    tbuf to, tT, tS, tot;
    ssm_delta_desc desc = ssm_delta_desc_init();
    memset(&c, 0, sizeof c);
    c.dt = dt, c.B = 3, c.T = 9, c.H = 2, c.K = 17, c.V = 33, c.nh = nh, c.gated = gated, c.use_s0 = 1, c.use_sT = 1;
    c.layout = LAYOUT_CONTIGUOUS, c.method = SSM_DELTA_AUTO, c.gmin = -0.5, c.bmax = 1.0;
    sprintf(name, "delta decode steps == forward %s g%d nh%lld", ssm_dtype_name(dt), gated, (long long)nh);
    test_begin(name);
    ctx = test_ctx();
    dl_make(&c, &d);
    {
        int64_t so[4] = {c.B, c.T, c.H, c.V}, ss[4] = {c.B, c.H, c.K, c.V}, sot[3] = {c.B, c.H, c.V};
        to = tb_new(dt, 4, so, LAYOUT_CONTIGUOUS), tT = tb_new(dt, 4, ss, LAYOUT_CONTIGUOUS);
        tS = tb_new(dt, 4, ss, LAYOUT_PADDED), tot = tb_new(dt, 3, sot, LAYOUT_PADDED);
    }
    CHECK_OK(ssm_delta_forward(ctx, &desc, &d.tq.t, &d.tk.t, &d.tv.t, &d.tbeta.t, gated ? &d.tg.t : NULL, &d.ts0.t,
                               NULL, &to.t, &tT.t),
             ctx);
    ref = (double *)malloc(sizeof(double) * (size_t)d.no), refT = (double *)malloc(sizeof(double) * (size_t)d.ns);
    got = (double *)malloc(sizeof(double) * (size_t)(c.B * c.H * c.V)), gotS = (double *)malloc(sizeof(double) * (size_t)d.ns);
    tb_get(&to, ref), tb_get(&tT, refT);
    tb_set(&tS, d.s0);
    for (t = 0; t < c.T; ++t) {
        /* token t of every tensor: drop the time dim from the views */
        ssm_tensor in[5];
        const tbuf *src[5];
        int z, dd;
        src[0] = &d.tq, src[1] = &d.tk, src[2] = &d.tv, src[3] = &d.tbeta, src[4] = &d.tg;
        for (z = 0; z < 5; ++z) {
            in[z] = src[z]->t;
            in[z].data = (char *)in[z].data + t * in[z].strides[1] * (int64_t)(dt.bits / 8);
            for (dd = 1; dd + 1 < in[z].ndim; ++dd) in[z].shape[dd] = in[z].shape[dd + 1], in[z].strides[dd] = in[z].strides[dd + 1];
            in[z].ndim -= 1;
        }
        CHECK_OK(ssm_delta_step(ctx, &desc, &in[0], &in[1], &in[2], &in[3], gated ? &in[4] : NULL, &tS.t, &tot.t), ctx);
        tb_get(&tot, got);
        for (i = 0; i < c.B * c.H * c.V; ++i) {
            int64_t b = i / (c.H * c.V), r = i % (c.H * c.V);
            double x = ref[(b * c.T + t) * c.H * c.V + r];
            if (fabs(got[i] - x) > (dt.bits == 64 ? 1e-12 : 1e-5) * (1 + fabs(x))) {
                CHECK(0, "step %lld: o[%lld] = %g, forward %g", (long long)t, (long long)i, got[i], x);
                break;
            }
        }
    }
    tb_get(&tS, gotS);
    e = rel_err(gotS, refT, d.ns);
    CHECK(e <= (dt.bits == 64 ? 1e-12 : 1e-5), "state after the steps: rel err %.3e", e);
    CHECK(tb_outside_untouched(&tS) && tb_outside_untouched(&tot), "writes outside the state / o views");
    tb_free(&to), tb_free(&tT), tb_free(&tS), tb_free(&tot);
    free(ref), free(refT), free(got), free(gotS);
    dl_free(&d);
    ssm_ctx_destroy(ctx);
    test_end();
}

/* Bad input: the documented code, and nothing written. */
static void dl_errors(void) {
    ssm_ctx *ctx;
    dl_case c;
    dl_data d;
    tbuf to, tT, tcu, tdq, tdk;
    int64_t so[4] = {1, 10, 2, 4}, ss[4] = {1, 2, 4, 4}, n3 = 3;
    ssm_delta_desc desc = ssm_delta_desc_init();
    ssm_tensor t, t2;
    ssm_result r;
    test_begin("delta error paths write nothing");
    ctx = test_ctx();
    memset(&c, 0, sizeof c);
    c.dt = SSM_F64, c.B = 1, c.T = 10, c.H = 2, c.K = 4, c.V = 4, c.nh = 1, c.gated = 1, c.use_s0 = 1, c.gmin = -1;
    c.bmax = 1, c.layout = LAYOUT_CONTIGUOUS;
    dl_make(&c, &d);
    to = tb_new(SSM_F64, 4, so, LAYOUT_CONTIGUOUS), tT = tb_new(SSM_F64, 4, ss, LAYOUT_CONTIGUOUS);
    tdq = tb_new(SSM_F64, 4, so, LAYOUT_CONTIGUOUS), tdk = tb_new(SSM_F64, 4, so, LAYOUT_CONTIGUOUS);
    tcu = tb_new(SSM_I32, 1, &n3, LAYOUT_CONTIGUOUS);
#define DL_FWD(q_, k_, v_, b_, g_, s0_, cu_, o_, sT_) \
    ssm_delta_forward(ctx, &desc, q_, k_, v_, b_, g_, s0_, cu_, o_, sT_)
#define DL_EXPECT(expr, code)                                                                          \
    do {                                                                                               \
        r = (expr);                                                                                    \
        CHECK(r == (code), "%s -> %s, expected %s (%s)", #expr, ssm_result_string(r), ssm_result_string(code), \
              ssm_ctx_last_error(ctx));                                                                \
        CHECK(r == SSM_OK || (tb_untouched(&to) && tb_untouched(&tT) && tb_untouched(&tdq)), "%s wrote output", #expr); \
        CHECK(r == SSM_OK || ssm_ctx_last_error(ctx)[0], "%s: no message", #expr);                     \
    } while (0)
    DL_EXPECT(DL_FWD(NULL, &d.tk.t, &d.tv.t, &d.tbeta.t, NULL, NULL, NULL, &to.t, NULL), SSM_ERROR_NULL_ARGUMENT);
    DL_EXPECT(DL_FWD(&d.tq.t, &d.tk.t, &d.tv.t, NULL, NULL, NULL, NULL, &to.t, NULL), SSM_ERROR_NULL_ARGUMENT);
    DL_EXPECT(DL_FWD(&d.tq.t, &d.tk.t, &d.tv.t, &d.tbeta.t, NULL, NULL, NULL, NULL, &tT.t), SSM_ERROR_NULL_ARGUMENT);
    DL_EXPECT(ssm_delta_forward(ctx, NULL, &d.tq.t, &d.tk.t, &d.tv.t, &d.tbeta.t, NULL, NULL, NULL, &to.t, NULL),
              SSM_ERROR_NULL_ARGUMENT);
    t = d.tq.t, t.data = NULL;
    DL_EXPECT(DL_FWD(&t, &d.tk.t, &d.tv.t, &d.tbeta.t, NULL, NULL, NULL, &to.t, NULL), SSM_ERROR_NULL_ARGUMENT);
    t = d.tk.t, t.dtype = SSM_F32;
    DL_EXPECT(DL_FWD(&d.tq.t, &t, &d.tv.t, &d.tbeta.t, NULL, NULL, NULL, &to.t, NULL), SSM_ERROR_INVALID_DTYPE);
    t = d.tq.t, t.dtype = SSM_I32;
    DL_EXPECT(DL_FWD(&t, &d.tk.t, &d.tv.t, &d.tbeta.t, NULL, NULL, NULL, &to.t, NULL), SSM_ERROR_INVALID_DTYPE);
    t = d.tk.t, t.shape[3] = 3;
    DL_EXPECT(DL_FWD(&d.tq.t, &t, &d.tv.t, &d.tbeta.t, NULL, NULL, NULL, &to.t, NULL), SSM_ERROR_INVALID_SHAPE);
    t = d.tk.t, t.shape[1] = 9;
    DL_EXPECT(DL_FWD(&d.tq.t, &t, &d.tv.t, &d.tbeta.t, NULL, NULL, NULL, &to.t, NULL), SSM_ERROR_INVALID_SHAPE);
    t = d.tv.t, t.ndim = 5, t.shape[4] = 4, t.shape[3] = 1, t.strides[4] = 1; /* v factored, k not */
    DL_EXPECT(DL_FWD(&d.tq.t, &d.tk.t, &t, &d.tbeta.t, NULL, NULL, NULL, &to.t, NULL), SSM_ERROR_INVALID_SHAPE);
    t = d.tbeta.t, t.shape[2] = 1;
    DL_EXPECT(DL_FWD(&d.tq.t, &d.tk.t, &d.tv.t, &t, NULL, NULL, NULL, &to.t, NULL), SSM_ERROR_INVALID_SHAPE);
    t = d.tg.t, t.ndim = 4, t.shape[3] = 1, t.strides[3] = 1;
    DL_EXPECT(DL_FWD(&d.tq.t, &d.tk.t, &d.tv.t, &d.tbeta.t, &t, NULL, NULL, &to.t, NULL), SSM_ERROR_INVALID_SHAPE);
    t = d.ts0.t, t.shape[1] = 3;
    DL_EXPECT(DL_FWD(&d.tq.t, &d.tk.t, &d.tv.t, &d.tbeta.t, NULL, &t, NULL, &to.t, NULL), SSM_ERROR_INVALID_SHAPE);
    t = to.t, t.shape[3] = 5;
    DL_EXPECT(DL_FWD(&d.tq.t, &d.tk.t, &d.tv.t, &d.tbeta.t, NULL, NULL, NULL, &t, NULL), SSM_ERROR_INVALID_SHAPE);
    t = d.tq.t, t.shape[3] = 0; /* K = 0 */
    t2 = d.tk.t, t2.shape[3] = 0;
    DL_EXPECT(DL_FWD(&t, &t2, &d.tv.t, &d.tbeta.t, NULL, NULL, NULL, &to.t, NULL), SSM_ERROR_INVALID_SHAPE);
    /* aliasing: o over q (K = V), sT over s0, o with overlapping strides */
    t = to.t, t.data = d.tq.t.data;
    DL_EXPECT(DL_FWD(&d.tq.t, &d.tk.t, &d.tv.t, &d.tbeta.t, NULL, NULL, NULL, &t, NULL), SSM_ERROR_ALIASING);
    t = tT.t, t.data = d.ts0.t.data;
    DL_EXPECT(DL_FWD(&d.tq.t, &d.tk.t, &d.tv.t, &d.tbeta.t, NULL, &d.ts0.t, NULL, &to.t, &t), SSM_ERROR_ALIASING);
    t = to.t, t.strides[1] = 1;
    DL_EXPECT(DL_FWD(&d.tq.t, &d.tk.t, &d.tv.t, &d.tbeta.t, NULL, NULL, NULL, &t, NULL), SSM_ERROR_INVALID_STRIDE);
    t = d.tg.t; /* sT over g, an input */
    t2 = tT.t, t2.data = d.tg.t.data;
    DL_EXPECT(DL_FWD(&d.tq.t, &d.tk.t, &d.tv.t, &d.tbeta.t, &t, NULL, NULL, &to.t, &t2), SSM_ERROR_ALIASING);
    /* desc values */
    desc.method = (ssm_delta_method)7;
    DL_EXPECT(DL_FWD(&d.tq.t, &d.tk.t, &d.tv.t, &d.tbeta.t, NULL, NULL, NULL, &to.t, NULL), SSM_ERROR_INVALID_VALUE);
    desc.method = SSM_DELTA_AUTO, desc.chunk = -1;
    DL_EXPECT(DL_FWD(&d.tq.t, &d.tk.t, &d.tv.t, &d.tbeta.t, NULL, NULL, NULL, &to.t, NULL), SSM_ERROR_INVALID_VALUE);
    desc.chunk = 0, desc.scale = NAN;
    DL_EXPECT(DL_FWD(&d.tq.t, &d.tk.t, &d.tv.t, &d.tbeta.t, NULL, NULL, NULL, &to.t, NULL), SSM_ERROR_INVALID_VALUE);
    desc.scale = 0;
    /* cu_seqlens: values, dtype, rank, B != 1 */
    {
        int32_t *cu = (int32_t *)tcu.t.data;
        ssm_tensor s02 = d.ts0.t;
        s02.shape[0] = 1; /* N = 2 below needs [2,H,K,V]: use s0 = NULL */
        cu[0] = 0, cu[1] = 6, cu[2] = 4;
        DL_EXPECT(DL_FWD(&d.tq.t, &d.tk.t, &d.tv.t, &d.tbeta.t, NULL, NULL, &tcu.t, &to.t, NULL), SSM_ERROR_INVALID_VALUE);
        cu[0] = 0, cu[1] = 4, cu[2] = 6;
        DL_EXPECT(DL_FWD(&d.tq.t, &d.tk.t, &d.tv.t, &d.tbeta.t, NULL, NULL, &tcu.t, &to.t, NULL), SSM_ERROR_INVALID_VALUE);
        cu[0] = 1, cu[1] = 4, cu[2] = 10;
        DL_EXPECT(DL_FWD(&d.tq.t, &d.tk.t, &d.tv.t, &d.tbeta.t, NULL, NULL, &tcu.t, &to.t, NULL), SSM_ERROR_INVALID_VALUE);
        cu[0] = 0, cu[1] = 11, cu[2] = 10;
        DL_EXPECT(DL_FWD(&d.tq.t, &d.tk.t, &d.tv.t, &d.tbeta.t, NULL, NULL, &tcu.t, &to.t, NULL), SSM_ERROR_INVALID_VALUE);
        cu[0] = 0, cu[1] = 4, cu[2] = 10;
        DL_EXPECT(DL_FWD(&d.tq.t, &d.tk.t, &d.tv.t, &d.tbeta.t, NULL, &s02, &tcu.t, &to.t, NULL), SSM_ERROR_INVALID_SHAPE);
        t = tcu.t, t.dtype = SSM_F32;
        DL_EXPECT(DL_FWD(&d.tq.t, &d.tk.t, &d.tv.t, &d.tbeta.t, NULL, NULL, &t, &to.t, NULL), SSM_ERROR_INVALID_DTYPE);
        t = tcu.t, t.shape[0] = 1;
        DL_EXPECT(DL_FWD(&d.tq.t, &d.tk.t, &d.tv.t, &d.tbeta.t, NULL, NULL, &t, &to.t, NULL), SSM_ERROR_INVALID_SHAPE);
        {
            ssm_tensor q2 = d.tq.t, k2 = d.tk.t, v2 = d.tv.t, b2 = d.tbeta.t, o2 = to.t;
            q2.shape[0] = k2.shape[0] = v2.shape[0] = b2.shape[0] = o2.shape[0] = 2, q2.shape[1] = k2.shape[1] = v2.shape[1] = b2.shape[1] = o2.shape[1] = 5;
            q2.strides[0] = k2.strides[0] = v2.strides[0] = 5 * 2 * 4, b2.strides[0] = 10, o2.strides[0] = 40;
            DL_EXPECT(DL_FWD(&q2, &k2, &v2, &b2, NULL, NULL, &tcu.t, &o2, NULL), SSM_ERROR_INVALID_SHAPE);
        }
        /* valid: N = 2 sequences */
        DL_EXPECT(DL_FWD(&d.tq.t, &d.tk.t, &d.tv.t, &d.tbeta.t, NULL, NULL, &tcu.t, &to.t, NULL), SSM_OK);
        tb_poison(&to);
    }
    /* backward: dg without g, an output over an input, dq over dk */
    DL_EXPECT(ssm_delta_backward(ctx, &desc, &d.tq.t, &d.tk.t, &d.tv.t, &d.tbeta.t, NULL, NULL, NULL, &to.t, NULL,
                                 &tdq.t, NULL, NULL, NULL, &d.tg.t, NULL),
              SSM_ERROR_NULL_ARGUMENT);
    t = tdq.t, t.data = d.tk.t.data;
    DL_EXPECT(ssm_delta_backward(ctx, &desc, &d.tq.t, &d.tk.t, &d.tv.t, &d.tbeta.t, NULL, NULL, NULL, &to.t, NULL, &t,
                                 NULL, NULL, NULL, NULL, NULL),
              SSM_ERROR_ALIASING);
    t = tdk.t, t.data = tdq.t.data;
    DL_EXPECT(ssm_delta_backward(ctx, &desc, &d.tq.t, &d.tk.t, &d.tv.t, &d.tbeta.t, NULL, NULL, NULL, &to.t, NULL,
                                 &tdq.t, &t, NULL, NULL, NULL, NULL),
              SSM_ERROR_ALIASING);
    t = tdq.t, t.shape[3] = 3;
    DL_EXPECT(ssm_delta_backward(ctx, &desc, &d.tq.t, &d.tk.t, &d.tv.t, &d.tbeta.t, NULL, NULL, NULL, &to.t, NULL, &t,
                                 NULL, NULL, NULL, NULL, NULL),
              SSM_ERROR_INVALID_SHAPE);
    /* desc.saved: dtype, rank, stride, alignment, overlap with an output; host backends keep nothing */
    {
        int64_t n64 = 64, n16 = 16;
        tbuf tsv = tb_new(ssm_dtype_u8(), 1, &n64, LAYOUT_CONTIGUOUS);
        ssm_tensor sv = tsv.t;
        size_t keep = 7;
        CHECK_OK(ssm_delta_workspace_size(ctx, &desc, SSM_F64, 1, 10, 2, 4, 4, 1, 3, &keep), ctx);
        CHECK(keep == 0, "a host backend keeps %zu bytes", keep);
        desc.saved = &sv;
        sv.dtype = SSM_F32, sv.shape[0] = 16;
        DL_EXPECT(DL_FWD(&d.tq.t, &d.tk.t, &d.tv.t, &d.tbeta.t, NULL, NULL, NULL, &to.t, NULL), SSM_ERROR_INVALID_DTYPE);
        sv = tsv.t, sv.ndim = 2, sv.shape[0] = 8, sv.shape[1] = 8, sv.strides[0] = 8, sv.strides[1] = 1;
        DL_EXPECT(DL_FWD(&d.tq.t, &d.tk.t, &d.tv.t, &d.tbeta.t, NULL, NULL, NULL, &to.t, NULL), SSM_ERROR_INVALID_SHAPE);
        sv = tsv.t, sv.shape[0] = 16, sv.strides[0] = 2;
        DL_EXPECT(DL_FWD(&d.tq.t, &d.tk.t, &d.tv.t, &d.tbeta.t, NULL, NULL, NULL, &to.t, NULL), SSM_ERROR_INVALID_STRIDE);
        sv = tsv.t, sv.shape[0] = 16, sv.data = (char *)sv.data + 1;
        DL_EXPECT(DL_FWD(&d.tq.t, &d.tk.t, &d.tv.t, &d.tbeta.t, NULL, NULL, NULL, &to.t, NULL), SSM_ERROR_MISALIGNED);
        sv = tsv.t, sv.data = NULL;
        DL_EXPECT(DL_FWD(&d.tq.t, &d.tk.t, &d.tv.t, &d.tbeta.t, NULL, NULL, NULL, &to.t, NULL), SSM_ERROR_NULL_ARGUMENT);
        sv = tsv.t, sv.data = to.t.data, sv.shape[0] = n16;
        DL_EXPECT(DL_FWD(&d.tq.t, &d.tk.t, &d.tv.t, &d.tbeta.t, NULL, NULL, NULL, &to.t, NULL), SSM_ERROR_ALIASING);
        sv = tsv.t, sv.data = tdq.t.data, sv.shape[0] = n16; /* the backward reads saved: it may not overlap dq */
        DL_EXPECT(ssm_delta_backward(ctx, &desc, &d.tq.t, &d.tk.t, &d.tv.t, &d.tbeta.t, NULL, NULL, NULL, &to.t, NULL,
                                     &tdq.t, NULL, NULL, NULL, NULL, NULL),
                  SSM_ERROR_ALIASING);
        sv = tsv.t;
        r = DL_FWD(&d.tq.t, &d.tk.t, &d.tv.t, &d.tbeta.t, NULL, NULL, NULL, &to.t, NULL);
        CHECK(r == SSM_OK && tb_untouched(&tsv), "a host forward with saved -> %s, saved %s", ssm_result_string(r),
              tb_untouched(&tsv) ? "untouched" : "written");
        tb_poison(&to);
        desc.saved = NULL;
        tb_free(&tsv);
    }
    /* step: the state over an input, a wrong-rank q */
    {
        ssm_tensor q1 = d.tq.t, k1 = d.tk.t, v1 = d.tv.t, b1 = d.tbeta.t, st = tT.t, o1 = to.t;
        q1.ndim = k1.ndim = v1.ndim = o1.ndim = 3, b1.ndim = 2;
        q1.shape[1] = k1.shape[1] = v1.shape[1] = o1.shape[1] = 2, q1.shape[2] = k1.shape[2] = v1.shape[2] = o1.shape[2] = 4;
        q1.strides[1] = k1.strides[1] = v1.strides[1] = o1.strides[1] = 4;
        q1.strides[2] = k1.strides[2] = v1.strides[2] = o1.strides[2] = 1, b1.shape[1] = 2, b1.strides[1] = 1;
        t = st, t.data = q1.data;
        DL_EXPECT(ssm_delta_step(ctx, &desc, &q1, &k1, &v1, &b1, NULL, &t, &o1), SSM_ERROR_ALIASING);
        DL_EXPECT(ssm_delta_step(ctx, &desc, &d.tq.t, &k1, &v1, &b1, NULL, &st, &o1), SSM_ERROR_INVALID_SHAPE);
        DL_EXPECT(ssm_delta_step(ctx, &desc, &q1, &k1, &v1, &b1, NULL, NULL, &o1), SSM_ERROR_NULL_ARGUMENT);
    }
#undef DL_EXPECT
#undef DL_FWD
    tb_free(&to), tb_free(&tT), tb_free(&tcu), tb_free(&tdq), tb_free(&tdk);
    dl_free(&d);
    ssm_ctx_destroy(ctx);
    test_end();
}

/* the chunked backward (GEMMs) == the replay backward, f32 and f64, at sizes past the
   finite-difference cases; and the f32 gradients near the f64 ones */
static void dl_backward_methods(int gated, int64_t nh, int64_t nseq, int64_t chunk) {
    char name[160];
    ssm_ctx *ctx;
    dl_case c;
    dl_data d[2];
    int64_t so[4], ss[4], sq[4], sk[5], sv[5], sb[4], a, cnt[6];
    double *res[2][2][6]; /* [dtype][method][gradient] */
    int di, mi, fac;
    memset(&c, 0, sizeof c);
    c.B = nseq ? 1 : 2, c.T = 100, c.H = 2, c.K = 17, c.V = 33, c.nh = nh, c.gated = gated, c.use_s0 = 1, c.use_sT = 1;
    c.layout = LAYOUT_PADDED, c.chunk = chunk, c.nseq = nseq, c.gmin = -2.0, c.bmax = 1.0;
    fac = nh > 1;
    sprintf(name, "delta bwd chunked == replay, f32 ~ f64: g%d nh%lld seqs%lld C%lld", gated, (long long)nh, (long long)nseq,
            (long long)chunk);
    test_begin(name);
    ctx = test_ctx();
    so[0] = sq[0] = sk[0] = sv[0] = sb[0] = c.B, so[1] = sq[1] = sk[1] = sv[1] = sb[1] = c.T;
    so[2] = sq[2] = sk[2] = sv[2] = sb[2] = c.H, so[3] = c.V, sq[3] = c.K, sk[3] = fac ? nh : c.K, sv[3] = fac ? nh : c.V;
    sk[4] = c.K, sv[4] = c.V, sb[3] = nh;
    ss[0] = dl_N(&c), ss[1] = c.H, ss[2] = c.K, ss[3] = c.V;
    for (di = 0; di < 2; ++di) {
        unsigned long long seed = test_run_seed() ^ 0x5eedull;
        c.dt = di ? SSM_F32 : SSM_F64;
        test_seed(seed); /* the same draws for both dtypes */
        dl_make(&c, &d[di]);
    }
    for (di = 0; di < 2; ++di)
        for (mi = 0; mi < 2; ++mi) {
            tbuf tWo, tWs, tg[6];
            ssm_delta_desc desc = ssm_delta_desc_init();
            ssm_delta_stats st;
            size_t wsb = 0;
            double *Wo, *Ws;
            int64_t i;
            c.dt = di ? SSM_F32 : SSM_F64;
            test_seed(7);
            tWo = tb_random(c.dt, 4, so, LAYOUT_CONTIGUOUS, 1.0, &Wo), tWs = tb_random(c.dt, 4, ss, LAYOUT_REVERSED, 1.0, &Ws);
            tg[0] = tb_new(c.dt, 4, sq, LAYOUT_REVERSED), tg[1] = tb_new(c.dt, fac ? 5 : 4, sk, LAYOUT_PADDED);
            tg[2] = tb_new(c.dt, fac ? 5 : 4, sv, LAYOUT_CONTIGUOUS), tg[3] = tb_new(c.dt, fac ? 4 : 3, sb, LAYOUT_PADDED);
            tg[4] = tb_new(c.dt, 3, sb, LAYOUT_CONTIGUOUS), tg[5] = tb_new(c.dt, 4, ss, LAYOUT_PADDED);
            desc.method = mi ? SSM_DELTA_RECURRENT : SSM_DELTA_CHUNKED, desc.chunk = c.chunk, desc.stats = &st;
            CHECK_OK(ssm_delta_backward(ctx, &desc, &d[di].tq.t, &d[di].tk.t, &d[di].tv.t, &d[di].tbeta.t,
                                        gated ? &d[di].tg.t : NULL, &d[di].ts0.t, nseq ? &d[di].tcu.t : NULL, &tWo.t,
                                        &tWs.t, &tg[0].t, &tg[1].t, &tg[2].t, &tg[3].t, gated ? &tg[4].t : NULL, &tg[5].t),
                     ctx);
            CHECK(st.method == desc.method, "stats.method");
            CHECK_OK(ssm_delta_workspace_size(ctx, &desc, c.dt, c.B, c.T, c.H, c.K, c.V, nh, 1, &wsb), ctx);
            CHECK(wsb >= st.workspace_bytes && (nseq || wsb == st.workspace_bytes), "backward workspace_size %zu, used %zu",
                  wsb, st.workspace_bytes);
            for (a = 0; a < 6; ++a) {
                cnt[a] = tb_numel(&tg[a]);
                res[di][mi][a] = (double *)malloc(sizeof(double) * (size_t)cnt[a]);
                if (a == 4 && !gated) {
                    CHECK(tb_untouched(&tg[a]), "dg written");
                    for (i = 0; i < cnt[a]; ++i) res[di][mi][a][i] = 0;
                } else {
                    tb_get(&tg[a], res[di][mi][a]);
                    CHECK(tb_outside_untouched(&tg[a]), "gradient %d outside its view", (int)a);
                }
                tb_free(&tg[a]);
            }
            tb_free(&tWo), tb_free(&tWs), free(Wo), free(Ws);
        }
    for (a = 0; a < 6; ++a) {
        double e1 = rel_err(res[0][0][a], res[0][1][a], cnt[a]), e2 = rel_err(res[1][0][a], res[1][1][a], cnt[a]);
        double e3 = rel_err(res[1][0][a], res[0][0][a], cnt[a]);
        CHECK(e1 <= 1e-10, "gradient %d: f64 chunked vs replay rel err %.3e", (int)a, e1);
        CHECK(e2 <= 1e-4, "gradient %d: f32 chunked vs replay rel err %.3e", (int)a, e2);
        CHECK(e3 <= 1e-4, "gradient %d: f32 vs f64 rel err %.3e", (int)a, e3);
        for (di = 0; di < 2; ++di)
            for (mi = 0; mi < 2; ++mi) free(res[di][mi][a]);
    }
    dl_free(&d[0]), dl_free(&d[1]);
    ssm_ctx_destroy(ctx);
    test_end();
}

/* A device backend without delta kernels answers UNSUPPORTED (never runs host loops on device
   pointers) and writes nothing. */
static void dl_no_kernel(void) {
    static ssm_backend fake;
    ssm_ctx *ctx = NULL;
    ssm_ctx_config cfg = ssm_ctx_config_init();
    int64_t sq[4] = {1, 3, 1, 2}, sb[3] = {1, 3, 1};
    tbuf tq, tk, tv, tb, to;
    ssm_delta_desc desc = ssm_delta_desc_init();
    ssm_result r;
    test_begin("delta on a device backend without delta kernels: UNSUPPORTED");
    memset(&fake, 0, sizeof fake);
    fake.name = "fake-gpu", fake.device_type = SSM_DEVICE_CUDA;
    fake.gemm = ssm_reference_backend()->gemm; /* never reached: the ops refuse first */
    cfg.backend = &fake;
    CHECK_OK(ssm_ctx_create(&cfg, &ctx), ctx);
    tq = tb_new(SSM_F32, 4, sq, LAYOUT_CONTIGUOUS), tk = tb_new(SSM_F32, 4, sq, LAYOUT_CONTIGUOUS);
    tv = tb_new(SSM_F32, 4, sq, LAYOUT_CONTIGUOUS), tb = tb_new(SSM_F32, 3, sb, LAYOUT_CONTIGUOUS);
    to = tb_new(SSM_F32, 4, sq, LAYOUT_CONTIGUOUS);
    tq.t.device = tk.t.device = tv.t.device = tb.t.device = to.t.device = ssm_cuda_device(0);
    r = ssm_delta_forward(ctx, &desc, &tq.t, &tk.t, &tv.t, &tb.t, NULL, NULL, NULL, &to.t, NULL);
    CHECK(r == SSM_ERROR_UNSUPPORTED && tb_untouched(&to), "forward -> %s", ssm_result_string(r));
    r = ssm_delta_backward(ctx, &desc, &tq.t, &tk.t, &tv.t, &tb.t, NULL, NULL, NULL, &to.t, NULL, NULL, NULL, NULL, NULL,
                           NULL, NULL);
    CHECK(r == SSM_ERROR_UNSUPPORTED, "backward -> %s", ssm_result_string(r));
    tb_free(&tq), tb_free(&tk), tb_free(&tv), tb_free(&tb), tb_free(&to);
    ssm_ctx_destroy(ctx);
    test_end();
}

/* Regressions of what the API fuzzer (tests/fuzz_api.c) found: the workspace query validated
   nothing and its size arithmetic overflowed (signed overflow) on huge sizes; cu_seqlens was
   read misaligned, through any stride (also one reaching past the address space, or 0 with
   2^62 offsets); an empty view with a huge size overflowed the aliasing check's extent; B =
   2^62 sequences with H = 0 or T = 0 (and no state out) looped for ever. */
static void dl_fuzz_regressions(void) {
    ssm_ctx *ctx;
    ssm_delta_desc desc = ssm_delta_desc_init();
    size_t bytes = 7;
    ssm_result r;
    const int64_t huge = (int64_t)1 << 62;
    test_begin("delta: fuzzer findings (workspace query, cu_seqlens views, huge empty views)");
    ctx = test_ctx();
#define DL_Q(expr, code)                                                                                      \
    do {                                                                                                      \
        bytes = 7;                                                                                            \
        r = (expr);                                                                                           \
        CHECK(r == (code), "%s -> %s (%s)", #expr, ssm_result_string(r), ssm_ctx_last_error(ctx));              \
        CHECK(r == SSM_OK || (bytes == 7 && ssm_ctx_last_error(ctx)[0]), "%s: wrote bytes or left no message", #expr); \
    } while (0)
    DL_Q(ssm_delta_workspace_size(ctx, &desc, SSM_F64, 1, 3, 1, 13, INT64_MAX, 1, 0, &bytes), SSM_ERROR_INVALID_SHAPE);
    DL_Q(ssm_delta_workspace_size(ctx, &desc, SSM_F32, 2, huge, 2, 4, 4, 3, 1, &bytes), SSM_ERROR_INVALID_SHAPE);
    DL_Q(ssm_delta_workspace_size(ctx, &desc, SSM_F32, 2, 5, 2, huge, huge, 1, 2, &bytes), SSM_ERROR_INVALID_SHAPE);
    DL_Q(ssm_delta_workspace_size(ctx, &desc, SSM_BF16, 2, 5, 2, 4, 4, 1, 0, &bytes), SSM_ERROR_INVALID_DTYPE);
    DL_Q(ssm_delta_workspace_size(ctx, &desc, SSM_F32, 2, 5, 2, 4, 4, 1, 4, &bytes), SSM_ERROR_INVALID_VALUE);
    DL_Q(ssm_delta_workspace_size(ctx, &desc, SSM_F32, 2, 5, 2, 4, 4, 1, -1, &bytes), SSM_ERROR_INVALID_VALUE);
    DL_Q(ssm_delta_workspace_size(ctx, &desc, SSM_F32, -1, 5, 2, 4, 4, 1, 0, &bytes), SSM_ERROR_INVALID_SHAPE);
    DL_Q(ssm_delta_workspace_size(ctx, NULL, SSM_F32, 2, 5, 2, 4, 4, 1, 0, &bytes), SSM_ERROR_NULL_ARGUMENT);
    desc.chunk = INT64_MAX;
    DL_Q(ssm_delta_workspace_size(ctx, &desc, SSM_F32, 2, 5, 2, 4, 4, 1, 1, &bytes), SSM_ERROR_INVALID_VALUE);
    desc.chunk = 0;
    DL_Q(ssm_delta_workspace_size(ctx, &desc, SSM_F32, 2, 5, 2, 4, 4, 1, 1, &bytes), SSM_OK);
    CHECK(bytes >= 4 * 4 * 4, "backward workspace %zu bytes", bytes);
#undef DL_Q
    { /* cu_seqlens: misaligned, broadcast, a stride past the address space */
        int64_t sq[4] = {1, 6, 1, 3}, sb[3] = {1, 6, 1}, n3 = 3;
        double *vq, *vk, *vv, *vb;
        tbuf tq = tb_random(SSM_F32, 4, sq, LAYOUT_CONTIGUOUS, 0.5, &vq), tk = tb_random(SSM_F32, 4, sq, LAYOUT_CONTIGUOUS, 0.5, &vk);
        tbuf tv = tb_random(SSM_F32, 4, sq, LAYOUT_CONTIGUOUS, 0.5, &vv), tb = tb_random(SSM_F32, 3, sb, LAYOUT_CONTIGUOUS, 0.5, &vb);
        tbuf to = tb_new(SSM_F32, 4, sq, LAYOUT_CONTIGUOUS);
        int32_t cub[8] = {0, 0, 3, 6, 0, 0, 0, 0};
        ssm_tensor cu = ssm_tensor_make(cub, SSM_I32, ssm_cpu(), 1, &n3, NULL);
        cu.data = (char *)cub + 2;
        r = ssm_delta_forward(ctx, &desc, &tq.t, &tk.t, &tv.t, &tb.t, NULL, NULL, &cu, &to.t, NULL);
        CHECK(r == SSM_ERROR_MISALIGNED && tb_untouched(&to), "misaligned cu_seqlens -> %s", ssm_result_string(r));
        cu.data = cub, cu.strides[0] = 0;
        r = ssm_delta_forward(ctx, &desc, &tq.t, &tk.t, &tv.t, &tb.t, NULL, NULL, &cu, &to.t, NULL);
        CHECK(r == SSM_ERROR_INVALID_STRIDE && tb_untouched(&to), "broadcast cu_seqlens -> %s", ssm_result_string(r));
        cu.strides[0] = (int64_t)1 << 61;
        r = ssm_delta_forward(ctx, &desc, &tq.t, &tk.t, &tv.t, &tb.t, NULL, NULL, &cu, &to.t, NULL);
        CHECK(r == SSM_ERROR_INVALID_STRIDE && tb_untouched(&to), "cu_seqlens stride 2^61 -> %s", ssm_result_string(r));
        cu.data = cub + 1, cu.strides[0] = 1; /* {0, 3, 6}: valid */
        r = ssm_delta_forward(ctx, &desc, &tq.t, &tk.t, &tv.t, &tb.t, NULL, NULL, &cu, &to.t, NULL);
        CHECK(r == SSM_OK && tb_outside_untouched(&to), "valid cu_seqlens -> %s (%s)", ssm_result_string(r), ssm_ctx_last_error(ctx));
        tb_free(&tq), tb_free(&tk), tb_free(&tv), tb_free(&tb), tb_free(&to);
        free(vq), free(vk), free(vv), free(vb);
    }
    { /* B = 2^62 and H = 0: empty views, OK at once (the extent and the loops never see 2^62) */
        float buf[4] = {0, 0, 0, 0};
        int64_t sh[4] = {huge, 1, 0, 2}, st[4] = {2, 2, 2, 1}, sh3[3] = {huge, 1, 0}, st3[3] = {1, 1, 1};
        ssm_tensor q = ssm_tensor_make(buf, SSM_F32, ssm_cpu(), 4, sh, st), b = ssm_tensor_make(buf, SSM_F32, ssm_cpu(), 3, sh3, st3);
        ssm_tensor o = q;
        r = ssm_delta_forward(ctx, &desc, &q, &q, &q, &b, NULL, NULL, NULL, &o, NULL);
        CHECK(r == SSM_OK, "B = 2^62, H = 0 forward -> %s (%s)", ssm_result_string(r), ssm_ctx_last_error(ctx));
        r = ssm_delta_backward(ctx, &desc, &q, &q, &q, &b, NULL, NULL, NULL, &q, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
        CHECK(r == SSM_OK, "B = 2^62, H = 0 backward -> %s (%s)", ssm_result_string(r), ssm_ctx_last_error(ctx));
        CHECK(buf[0] == 0 && buf[3] == 0, "an empty output was written");
        q.shape[1] = b.shape[1] = 0, q.shape[2] = b.shape[2] = 2; /* T = 0, H = 2: no token, no state asked */
        o = q;
        r = ssm_delta_forward(ctx, &desc, &q, &q, &q, &b, NULL, NULL, NULL, &o, NULL);
        CHECK(r == SSM_OK, "B = 2^62, T = 0 forward -> %s (%s)", ssm_result_string(r), ssm_ctx_last_error(ctx));
        r = ssm_delta_backward(ctx, &desc, &q, &q, &q, &b, NULL, NULL, NULL, &q, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
        CHECK(r == SSM_OK, "B = 2^62, T = 0 backward -> %s (%s)", ssm_result_string(r), ssm_ctx_last_error(ctx));
    }
    ssm_ctx_destroy(ctx);
    test_end();
}

static dl_case dl_base(ssm_dtype dt) {
    dl_case c;
    memset(&c, 0, sizeof c);
    c.dt = dt, c.B = 2, c.T = 37, c.H = 2, c.K = 8, c.V = 6, c.nh = 1, c.use_s0 = 1, c.use_sT = 1;
    c.layout = LAYOUT_CONTIGUOUS, c.method = SSM_DELTA_CHUNKED, c.chunk = 16, c.gmin = -0.5, c.bmax = 1.0;
    return c;
}

void suite_delta(void) {
    int v;
    dl_case c;
    /* the plain forward and backward rows against the oracle (families, methods, T, odd K/V,
       layouts, varlen, s0/sT) live in the op case table (tests/test_cases.c); here: the cases
       outside its grammar (3 factors, head-first storage, beta up to 2, chunked vs recurrent) */
    /* DeltaProduct with 3 factors, varlen, strong gates (g = -20 per step), beta up to 2 */
    c = dl_base(SSM_F64), c.nh = 3, c.gated = 1, c.T = 41, c.chunk = 8, c.layout = DL_HEAD_FIRST;
    dl_forward_case(&c);
    c = dl_base(SSM_F32), c.B = 1, c.nseq = 5, c.T = 90, c.gated = 1, c.layout = LAYOUT_PADDED;
    dl_forward_case(&c);
    c = dl_base(SSM_F64), c.B = 1, c.nseq = 4, c.T = 70, c.nh = 2, c.layout = LAYOUT_REVERSED;
    dl_forward_case(&c);
    c = dl_base(SSM_F32), c.gated = 1, c.gmin = -20, c.T = 150, c.chunk = 64;
    dl_forward_case(&c);
    c = dl_base(SSM_F64), c.gated = 1, c.gmin = -20, c.T = 150, c.chunk = 64, c.method = SSM_DELTA_RECURRENT;
    dl_forward_case(&c);
    c = dl_base(SSM_F64), c.bmax = 2.0, c.T = 80;
    dl_forward_case(&c);
    c = dl_base(SSM_F64), c.T = 100, c.chunk = 4, c.gated = 1, c.nh = 2; /* 50 chunks: several segments */
    dl_forward_case(&c);
    c = dl_base(SSM_F32), c.T = 70, c.chunk = 4, c.B = 1, c.nseq = 3, c.layout = LAYOUT_REVERSED;
    dl_forward_case(&c);
    c = dl_base(SSM_F32), c.T = 0, c.gated = 1; /* no tokens: sT = s0 */
    dl_forward_case(&c);
    /* gradients against finite differences: varlen DeltaProduct, strong gates, segments, T = 0 */
    c = dl_base(SSM_F64), c.B = 1, c.nseq = 3, c.T = 13, c.K = 4, c.V = 3, c.gated = 1, c.chunk = 3, c.nh = 2;
    dl_backward_case(&c);
    c = dl_base(SSM_F64), c.T = 9, c.K = 3, c.V = 4, c.gated = 1, c.gmin = -20, c.chunk = 4;
    dl_backward_case(&c);
    c = dl_base(SSM_F64), c.B = 1, c.H = 1, c.T = 40, c.K = 3, c.V = 2, c.gated = 1, c.chunk = 1; /* 3 segments */
    dl_backward_case(&c);
    c = dl_base(SSM_F64), c.T = 0, c.K = 3, c.V = 2, c.gated = 1; /* no tokens: ds0 = dsT */
    dl_backward_case(&c);
    /* varlen == separate runs, halves == whole; decode steps */
    for (v = 0; v < 4; ++v)
        dl_split_case(v % 2 ? SSM_F32 : SSM_F64, v < 2 ? SSM_DELTA_CHUNKED : SSM_DELTA_RECURRENT, v % 3 != 0, v == 3 ? 2 : 1);
    dl_backward_methods(1, 1, 0, 16);
    dl_backward_methods(0, 2, 0, 16);
    dl_backward_methods(1, 2, 5, 16);
    dl_backward_methods(1, 2, 0, 4); /* 50 chunks a sequence: several segments */
    dl_step_case(SSM_F64, 1, 1);
    dl_step_case(SSM_F32, 0, 2);
    dl_errors();
    dl_fuzz_regressions();
    dl_no_kernel();
}
