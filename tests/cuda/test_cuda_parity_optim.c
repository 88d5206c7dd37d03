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
        CPU->adamw_many(MT_N, s->cpu[P], (const float *const *)s->cpu[G], s->cpu[M], s->cpu[V], s->n, args, c16);
        GPU->adamw_many(MT_N, s->many[P], (const float *const *)s->many[G], s->many[M], s->many[V], s->n, args, g16);
        for (int t = 0; t < MT_N; t++)
            GPU->adamw_many(1, &s->one[P][t], (const float *const *)&s->one[G][t], &s->one[M][t], &s->one[V][t],
                            &s->n[t], &args[t], NULL);
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
    GPU->adamw_many(0, NULL, NULL, NULL, NULL, NULL, NULL, NULL); /* count 0: nothing to launch */
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
        CPU->sgd_many(MT_N, s->cpu[P], (const float *const *)s->cpu[G], cbuf ? cbuf : none, s->n, args, NULL);
        GPU->sgd_many(MT_N, s->many[P], (const float *const *)s->many[G], gbuf ? gbuf : none, s->n, args, NULL);
        for (int t = 0; t < MT_N; t++)
            GPU->sgd_many(1, &s->one[P][t], (const float *const *)&s->one[G][t], momentum ? &s->one[M][t] : &none[t],
                          &s->n[t], &args[t], NULL);
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
