/* test_cuda_parity_optim.c — the multi-tensor optimizer ops of the CUDA table (adamw_many, sgd_many,
 * fill_many: one launch per group of tensors, kernels/cuda/optim.cu) on 130 tensors, more than one
 * launch group holds, of sizes around the block tile (0, 1, 1023, 1024, 1025, ...):
 *   - against the CPU table exactly: the kernels round every product, sum and quotient on its own
 *     (__fmul_rn & co.: no multiply-add contraction), in the CPU's order, so the bits match; the
 *     tolerance of fused_optimizer_steps (1e-6) allowed for contraction, which no longer happens;
 *   - against a call per tensor (lists of one, one launch each; fill for fill_many) exactly: the
 *     grouping changes no bits.
 * Skips without a GPU; runs under python3 tests/cuda/emulate.py. */
#include "tests/cuda/parity_util.h"

#define MT_N 130
enum { P, G, M, V, NARR };

/* sizes around the CUDA tile (1024 elements) and the CPU chunk (16384), some empty */
static int64_t mt_size(int t) {
    static const int64_t special[] = {1, 0, 1023, 1024, 1025, 4097, 70001, 255, 257, 16385};
    const int ns = (int)(sizeof special / sizeof special[0]);
    return t < ns ? special[t] : (t % 17 == 0 ? 0 : (int64_t)(t * 37) % 2100 + 1);
}

typedef struct {
    int64_t n[MT_N];
    float *cpu[NARR][MT_N];  /* host state, updated by the CPU table */
    float *many[NARR][MT_N]; /* device state, updated by the *_many ops */
    float *one[NARR][MT_N];  /* device state, updated a tensor per call */
} mt_state;

static void mt_make(mt_state *s) {
    static const float lo[NARR] = {-1, -1, -0.1f, 0}, hi[NARR] = {1, 1, 0.1f, 0.01f};
    for (int t = 0; t < MT_N; t++) {
        s->n[t] = mt_size(t);
        for (int a = 0; a < NARR; a++) {
            s->cpu[a][t] = rnd(s->n[t], lo[a], hi[a], (uint32_t)(300 + NARR * t + a));
            s->many[a][t] = devf(s->cpu[a][t], s->n[t]);
            s->one[a][t] = devf(s->cpu[a][t], s->n[t]);
        }
    }
}

static void mt_free(mt_state *s) {
    for (int t = 0; t < MT_N; t++)
        for (int a = 0; a < NARR; a++) {
            free(s->cpu[a][t]);
            GPU->free(s->many[a][t]);
            GPU->free(s->one[a][t]);
        }
}

/* array a of every tensor: the *_many result against the CPU and the one-tensor ops, exactly */
static void mt_expect(const char *what, const mt_state *s, int a) {
    char label[96];
    for (int t = 0; t < MT_N; t++) {
        snprintf(label, sizeof label, "%s tensor %d vs cpu", what, t);
        expect_close(label, s->cpu[a][t], s->many[a][t], s->n[t], 0);
        float *one = host_of(s->one[a][t], s->n[t]);
        snprintf(label, sizeof label, "%s tensor %d vs the one-tensor op", what, t);
        expect_close(label, one, s->many[a][t], s->n[t], 0);
        free(one);
    }
}

/* per-tensor lr (as layer-wise decay) and weight decay (0 for "biases"), gradient scale */
static adamw_args adamw_of(int t, int step) {
    adamw_args a = {.lr = 1e-3f * (1.0f + 0.01f * t), .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                    .weight_decay = t % 3 ? 0.05f : 0.0f, .gscale = t % 2 ? 1.0f : 0.5f};
    adamw_scalars(&a, step);
    return a;
}

PARITY_COVERS(adamw_many);
Test(cuda, optim_adamw_many_130_tensors) {
    require_gpu();
    mt_state *s = calloc(1, sizeof *s);
    mt_make(s);
    adamw_args args[MT_N];
    /* the bf16 copies (optim_config.bf16_weights) of every tensor but each third (NULL entries):
     * the groups of a launch then mix tensors with and without one */
    uint16_t *c16[MT_N] = {0}, *g16[MT_N] = {0};
    for (int t = 0; t < MT_N; t++)
        if (t % 3 != 1 && s->n[t] > 0) c16[t] = calloc((size_t)s->n[t], 2), g16[t] = GPU->alloc((size_t)s->n[t] * 2);
    for (int step = 1; step <= 3; step++) {
        for (int t = 0; t < MT_N; t++) args[t] = adamw_of(t, step);
        CPU->adamw_many(MT_N, s->cpu[P], (const float *const *)s->cpu[G], s->cpu[M], s->cpu[V], s->n, args, c16, NULL);
        GPU->adamw_many(MT_N, s->many[P], (const float *const *)s->many[G], s->many[M], s->many[V], s->n, args, g16, NULL);
        for (int t = 0; t < MT_N; t++)
            GPU->adamw_many(1, &s->one[P][t], (const float *const *)&s->one[G][t], &s->one[M][t], &s->one[V][t],
                            &s->n[t], &args[t], NULL, NULL);
    }
    mt_expect("adamw_many p", s, P);
    mt_expect("adamw_many m", s, M);
    mt_expect("adamw_many v", s, V);
    for (int t = 0; t < MT_N; t++) {
        if (!c16[t]) continue;
        uint16_t *h = malloc((size_t)s->n[t] * 2);
        GPU->download(h, g16[t], (size_t)s->n[t] * 2);
        gpu_ok("adamw_many bf16 copies");
        for (int64_t i = 0; i < s->n[t]; i++) {
            cr_assert_eq(c16[t][i], er_f32_to_bf16(s->cpu[P][t][i]), "tensor %d [%lld]: the cpu copy is not p rounded", t, (long long)i);
            cr_assert_eq(h[i], c16[t][i], "tensor %d [%lld]: cuda copy 0x%04x, cpu 0x%04x", t, (long long)i, h[i], c16[t][i]);
        }
        free(h), free(c16[t]);
        GPU->free(g16[t]);
    }
    GPU->adamw_many(0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL); /* count 0: nothing to launch */
    gpu_ok("adamw_many count 0");
    mt_free(s);
    free(s);
}

static void sgd_case(float momentum, int nesterov) {
    mt_state *s = calloc(1, sizeof *s);
    mt_make(s);
    sgd_args args[MT_N];
    /* without momentum the buffers are NULL (nn/optim.c has none to pass) */
    float **cbuf = momentum ? s->cpu[M] : NULL, **gbuf = momentum ? s->many[M] : NULL;
    float *none[MT_N] = {0};
    for (int step = 0; step < 2; step++) {
        for (int t = 0; t < MT_N; t++)
            args[t] = (sgd_args){.lr = 0.05f / (1.0f + 0.1f * t), .momentum = momentum,
                                 .weight_decay = t % 3 ? 1e-4f : 0.0f, .gscale = t % 2 ? 1.0f : 0.5f,
                                 .nesterov = nesterov, .first = step == 0};
        CPU->sgd_many(MT_N, s->cpu[P], (const float *const *)s->cpu[G], cbuf ? cbuf : none, s->n, args, NULL, NULL);
        GPU->sgd_many(MT_N, s->many[P], (const float *const *)s->many[G], gbuf ? gbuf : none, s->n, args, NULL, NULL);
        for (int t = 0; t < MT_N; t++)
            GPU->sgd_many(1, &s->one[P][t], (const float *const *)&s->one[G][t], momentum ? &s->one[M][t] : &none[t],
                          &s->n[t], &args[t], NULL, NULL);
    }
    mt_expect(nesterov ? "sgd_many nesterov p" : momentum ? "sgd_many p" : "sgd_many plain p", s, P);
    if (momentum) mt_expect(nesterov ? "sgd_many nesterov buf" : "sgd_many buf", s, M);
    mt_free(s);
    free(s);
}

PARITY_COVERS(sgd_many);
Test(cuda, optim_sgd_many_130_tensors) {
    require_gpu();
    sgd_case(0.9f, 0);
    sgd_case(0.9f, 1);
    sgd_case(0.0f, 0);
}

PARITY_COVERS(fill_many);
Test(cuda, optim_fill_many_130_tensors) {
    require_gpu();
    mt_state *s = calloc(1, sizeof *s);
    mt_make(s);
    CPU->fill_many(MT_N, s->cpu[G], s->n, 0.25f);
    GPU->fill_many(MT_N, s->many[G], s->n, 0.25f);
    for (int t = 0; t < MT_N; t++) GPU->fill(s->one[G][t], s->n[t], 0.25f);
    mt_expect("fill_many", s, G);
    /* the other arrays were not touched: still equal to their untouched copies */
    mt_expect("fill_many leaves p", s, P);
    GPU->fill_many(0, NULL, NULL, 1.0f);
    gpu_ok("fill_many count 0");
    mt_free(s);
    free(s);
}

/* The step guard (train/loop.c's one-wait step): the norm and clip coefficient computed on the device
 * must be the bits of the CPU table's and of nn/optim.c's host arithmetic (sumsq_many, then the sum in
 * array order, sqrt, max_norm / (norm + 1e-6)); the optimizer given that device scale must equal the
 * CPU given the same scale; a NaN verdict must leave every array untouched. */
static void guard_expect(const mt_state *s, int count, float **dx, float **hx, const int64_t *n, const float *hl,
                         int nl, double max_norm, double *norm_out, float *gs_out) {
    double cn;
    float cg;
    CPU->step_guard(count, (const float *const *)hx, n, hl, nl, max_norm, &cn, &cg);
    float *dl = devf(hl, nl ? nl : 1);
    double *dn = GPU->alloc(sizeof(double));
    float *dg = GPU->alloc(sizeof(float));
    GPU->step_guard(count, (const float *const *)dx, n, dl, nl, max_norm, dn, dg);
    double gn;
    float gg;
    GPU->download(&gn, dn, sizeof gn);
    GPU->download(&gg, dg, sizeof gg);
    gpu_ok("step_guard");
    /* each table against nn/optim.c's host clip on that table: sumsq_many per array, added in order,
     * sqrt, the coefficient: the same bits; the two tables' per-array sums differ in rounding (blocks) */
    const er_backend *tab[2] = {CPU, GPU};
    const double got_n[2] = {cn, gn};
    const float got_g[2] = {cg, gg};
    for (int b = 0; b < 2; b++) {
        double *part = malloc((size_t)(count ? count : 1) * sizeof *part), sum = 0;
        tab[b]->sumsq_many(count, (const float *const *)(b ? dx : hx), n, part);
        for (int i = 0; i < count; i++) sum += part[i];
        free(part);
        const double hn = sqrt(sum);
        int finite = isfinite(hn);
        for (int i = 0; i < nl; i++) finite &= isfinite(hl[i]);
        const float hg = !finite ? NAN : max_norm > 0 && hn > max_norm ? (float)(max_norm / (hn + 1e-6)) : 1.0f;
        cr_assert(memcmp(&hn, &got_n[b], sizeof hn) == 0 || (isnan(hn) && isnan(got_n[b])),
                  "%s norm %.17g, host clip %.17g", tab[b]->name, got_n[b], hn);
        cr_assert(memcmp(&hg, &got_g[b], sizeof hg) == 0 || (isnan(hg) && isnan(got_g[b])),
                  "%s scale %.9g, host clip %.9g", tab[b]->name, got_g[b], hg);
    }
    cr_assert(fabs(gn - cn) <= 1e-12 * fabs(cn) || (isnan(gn) && isnan(cn)) || (isinf(gn) && isinf(cn)),
              "norm: cuda %.17g, cpu %.17g", gn, cn);
    *norm_out = gn;
    *gs_out = gg;
    (void)s;
    free(dl);
    GPU->free(dn);
    GPU->free(dg);
}

/* The guard's arrays: the first 12 of the 130 (sizes 0 to 70001: one array strides over 32 blocks). Fewer
 * than the optimizer's, because the emulation runs each of sumsq's blocks as 256 real threads. */
#define GUARD_N 12

PARITY_COVERS(step_guard);
Test(cuda, optim_step_guard_and_device_gradient_scale) {
    require_gpu();
    mt_state *s = calloc(1, sizeof *s);
    mt_make(s);
    const float losses[2] = {1.5f, 0.25f};
    double norm;
    float gs;
    /* measure only, a limit above the norm, a limit below it (the clip) */
    guard_expect(s, GUARD_N, s->many[G], s->cpu[G], s->n, losses, 2, 0.0, &norm, &gs);
    cr_assert(norm > 1 && gs == 1.0f, "norm %g, scale %g", norm, gs);
    guard_expect(s, GUARD_N, s->many[G], s->cpu[G], s->n, losses, 2, norm * 2, &norm, &gs);
    cr_assert_eq(gs, 1.0f);
    guard_expect(s, GUARD_N, s->many[G], s->cpu[G], s->n, losses, 2, norm / 3, &norm, &gs);
    cr_assert(gs < 0.34f && gs > 0.33f, "clip scale %g", gs);
    const float clip = gs;

    /* AdamW and SGD with the device scale: the CPU with the same scale, and the CPU with the scale
     * folded into each tensor's gscale (how a host clip would pass it), give the same bits */
    float *dgs = devf(&clip, 1);
    adamw_args args[MT_N], folded[MT_N];
    for (int t = 0; t < MT_N; t++) {
        args[t] = adamw_of(t, 1);
        folded[t] = args[t];
        folded[t].gscale *= clip;
    }
    mt_state *f = calloc(1, sizeof *f);
    mt_make(f);
    CPU->adamw_many(MT_N, s->cpu[P], (const float *const *)s->cpu[G], s->cpu[M], s->cpu[V], s->n, args, NULL, &clip);
    GPU->adamw_many(MT_N, s->many[P], (const float *const *)s->many[G], s->many[M], s->many[V], s->n, args, NULL, dgs);
    CPU->adamw_many(MT_N, f->cpu[P], (const float *const *)f->cpu[G], f->cpu[M], f->cpu[V], f->n, folded, NULL, NULL);
    gpu_ok("adamw_many with a device scale");
    for (int t = 0; t < MT_N; t++) {
        char label[64];
        snprintf(label, sizeof label, "adamw_many device scale tensor %d", t);
        expect_close(label, s->cpu[P][t], s->many[P][t], s->n[t], 0);
        cr_assert(memcmp(s->cpu[P][t], f->cpu[P][t], (size_t)s->n[t] * sizeof(float)) == 0, "tensor %d: folded scale differs", t);
    }
    sgd_args sa[MT_N], sf[MT_N];
    for (int t = 0; t < MT_N; t++) {
        sa[t] = (sgd_args){.lr = 0.05f, .momentum = 0.9f, .weight_decay = 1e-4f, .gscale = t % 2 ? 1.0f : 0.5f, .first = 1};
        sf[t] = sa[t];
        sf[t].gscale *= clip;
    }
    CPU->sgd_many(MT_N, s->cpu[P], (const float *const *)s->cpu[G], s->cpu[M], s->n, sa, NULL, &clip);
    GPU->sgd_many(MT_N, s->many[P], (const float *const *)s->many[G], s->many[M], s->n, sa, NULL, dgs);
    CPU->sgd_many(MT_N, f->cpu[P], (const float *const *)f->cpu[G], f->cpu[M], f->n, sf, NULL, NULL);
    gpu_ok("sgd_many with a device scale");
    for (int t = 0; t < MT_N; t++) {
        char label[64];
        snprintf(label, sizeof label, "sgd_many device scale tensor %d", t);
        expect_close(label, s->cpu[P][t], s->many[P][t], s->n[t], 0);
        cr_assert(memcmp(s->cpu[P][t], f->cpu[P][t], (size_t)s->n[t] * sizeof(float)) == 0, "tensor %d: folded scale differs", t);
    }

    /* a non-finite loss, then an Inf in one gradient: the verdict is NaN and the update writes nothing */
    const float bad[2] = {1.0f, NAN};
    guard_expect(s, GUARD_N, s->many[G], s->cpu[G], s->n, bad, 2, 1.0, &norm, &gs);
    cr_assert(isnan(gs) && isfinite(norm), "NaN loss: scale %g, norm %g", gs, norm);
    const float inf = INFINITY;
    GPU->upload(s->many[G][3] + 5, &inf, sizeof inf);
    s->cpu[G][3][5] = INFINITY;
    guard_expect(s, GUARD_N, s->many[G], s->cpu[G], s->n, losses, 2, 0.0, &norm, &gs);
    cr_assert(isnan(gs) && isinf(norm), "Inf gradient: scale %g, norm %g", gs, norm);
    const float nan = NAN;
    GPU->upload(dgs, &nan, sizeof nan);
    for (int t = 0; t < MT_N; t++) /* `one` holds the state before any update: copy it over `many` */
        for (int a = 0; a < NARR; a++) GPU->copy(s->many[a][t], s->one[a][t], (size_t)s->n[t] * sizeof(float));
    GPU->adamw_many(MT_N, s->many[P], (const float *const *)s->many[G], s->many[M], s->many[V], s->n, args, NULL, dgs);
    GPU->sgd_many(MT_N, s->many[P], (const float *const *)s->many[G], s->many[M], s->n, sa, NULL, dgs);
    CPU->adamw_many(MT_N, f->cpu[P], (const float *const *)f->cpu[G], f->cpu[M], f->cpu[V], f->n, args, NULL, &nan);
    gpu_ok("a NaN verdict");
    for (int t = 0; t < MT_N; t++)
        for (int a = 0; a < NARR; a++) {
            float *h = host_of(s->many[a][t], s->n[t]), *o = host_of(s->one[a][t], s->n[t]);
            cr_assert(memcmp(h, o, (size_t)s->n[t] * sizeof(float)) == 0, "NaN verdict: tensor %d array %d written", t, a);
            free(h), free(o);
        }
    GPU->free(dgs);
    mt_free(f);
    free(f);
    mt_free(s);
    free(s);
}

/* More arrays than one staging chunk of the guard (CUDA_MULTI_MAX = 1024), and none at all. */
Test(cuda, optim_step_guard_over_1024_arrays) {
    require_gpu();
    enum { NA = 1100 };
    float **hx = malloc(NA * sizeof *hx), **dx = malloc(NA * sizeof *dx);
    int64_t *n = malloc(NA * sizeof *n);
    for (int i = 0; i < NA; i++) {
        n[i] = 1 + i % 7;
        hx[i] = rnd(n[i], -1, 1, (uint32_t)(900 + i));
        dx[i] = devf(hx[i], n[i]);
    }
    const float l = 2.0f;
    double norm;
    float gs;
    guard_expect(NULL, NA, dx, hx, n, &l, 1, 3.0, &norm, &gs);
    cr_assert(norm > 3 && gs < 1, "norm %g scale %g", norm, gs);
    guard_expect(NULL, 0, dx, hx, n, &l, 1, 3.0, &norm, &gs);
    cr_assert(norm == 0 && gs == 1.0f, "no arrays: norm %g scale %g", norm, gs);
    for (int i = 0; i < NA; i++) free(hx[i]), GPU->free(dx[i]);
    free(hx), free(dx), free(n);
}
