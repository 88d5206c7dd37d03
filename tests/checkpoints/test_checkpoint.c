/* Training-state checkpoints: round trip, exact resume (bit-identical parameters), and rejection
 * of missing / mis-shaped / unexpected / non-finite tensors, another optimizer kind and truncated
 * files, with the model left untouched. Gradients here are a fixed function of the parameters
 * plus Philox noise, so the test needs no autograd. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "checkpoints/checkpoint.h"
#include "checkpoints/safetensors.h"
#include "nn/base/base.h"
#include "nn/init.h"
#include "nn/schedule.h"
#include "tests/test_util.h"

typedef struct {
    param_list pl;
    optimizer *opt;
    rng_t rng;
} toy;

/* A small ViT-named parameter set, initialised from seed. qkv_out changes one shape. */
static toy toy_new(uint64_t seed, optim_kind kind, int qkv_out) {
    toy t = {0};
    struct { const char *name; int ndim; int64_t shape[4]; } spec[] = {
        {"cls_token", 3, {1, 1, 4}},
        {"patch_embed.proj.weight", 4, {4, 3, 2, 2}},
        {"blocks.0.norm1.weight", 1, {4}},
        {"blocks.0.attn.qkv.weight", 2, {qkv_out, 4}},
        {"blocks.0.attn.qkv.bias", 1, {qkv_out}},
        {"head.weight", 2, {3, 4}},
        {"frozen.weight", 2, {2, 2}},
    };
    for (int i = 0; i < 7; i++) {
        tensor *p = tensor_param(spec[i].name, spec[i].ndim, spec[i].shape);
        rng_t r = rng_make(seed, rng_stream(RNG_INIT, (uint32_t)i, 0));
        init_trunc_normal_std(p->data, tensor_numel(p), 0.0f, 0.5f, 2.0f, &r);
        params_add(&t.pl, p);
    }
    tensor_set_requires_grad(t.pl.t[6], 0);
    optim_config cfg = {.kind = kind, .lr = 0.05, .weight_decay = 0.05, .momentum = kind == OPTIM_SGD ? 0.9 : 0,
                        .nesterov = kind == OPTIM_SGD};
    t.opt = optim_new(&cfg, &t.pl);
    cr_assert_not_null(t.opt, "%s", er_msg());
    t.rng = rng_make(seed, rng_stream(RNG_SAMPLING, 0, 0));
    return t;
}

static void toy_free(toy *t) {
    optim_free(t->opt);
    params_free(&t->pl);
}

static void toy_train(toy *t, int64_t from, int64_t steps) {
    lr_schedule s = {.base_lr = 0.05, .min_lr = 0.001, .warmup_steps = 3, .total_steps = 20};
    for (int64_t k = from; k < from + steps; k++) {
        for (int i = 0; i < t->opt->n; i++) {
            tensor *p = t->opt->ps[i].p;
            for (int64_t j = 0; j < tensor_numel(p); j++) p->grad->data[j] = sinf(3 * p->data[j]) + 0.3f * rng_normal(&t->rng);
        }
        optim_set_lr(t->opt, lr_at(&s, k));
        optim_clip_grad_norm(t->opt, 1.0);
        cr_assert_eq(optim_step(t->opt), ER_OK, "%s", er_msg());
        optim_zero_grad(t->opt);
    }
}

static int same_bits(const param_list *a, const param_list *b) {
    for (int i = 0; i < a->n; i++)
        if (memcmp(a->t[i]->data, b->t[i]->data, sizeof(float) * tensor_numel(a->t[i]))) return 0;
    return 1;
}

static void exact_resume(optim_kind kind) {
    const char *dir = test_tmpdir();
    char *path = path_join(dir, "state.safetensors");
    toy a = toy_new(11, kind, 12);
    toy_train(&a, 0, 5);
    ckpt_state sa = {.params = &a.pl, .opt = a.opt, .step = 5, .rng = &a.rng, .config = "model = vit_tiny\nlr = \"0.05\"\n"};
    cr_assert_eq(ckpt_save(path, &sa), ER_OK, "%s", er_msg());
    toy_train(&a, 5, 7);

    toy b = toy_new(999, kind, 12); /* other init, other rng: everything must come from the file */
    ckpt_state sb = {.params = &b.pl, .opt = b.opt, .rng = &b.rng};
    char *config = NULL;
    cr_assert_eq(ckpt_load(path, &sb, CKPT_STRICT, &config), ER_OK, "%s", er_msg());
    cr_expect_eq(sb.step, 5);
    cr_expect_eq(b.opt->step, 5);
    cr_expect_str_eq(config, "model = vit_tiny\nlr = \"0.05\"\n");
    free(config);
    toy_train(&b, sb.step, 7);
    cr_expect(same_bits(&a.pl, &b.pl), "resumed run differs from the uninterrupted one");
    cr_expect_eq(memcmp(&a.rng, &b.rng, sizeof a.rng), 0);
    /* the frozen parameter was restored too (b started from another init) */
    cr_expect_eq(memcmp(a.pl.t[6]->data, b.pl.t[6]->data, 4 * sizeof(float)), 0);
    toy_free(&a);
    toy_free(&b);
    free(path);
}

Test(optim_checkpoint, exact_resume_adamw) { exact_resume(OPTIM_ADAMW); }
Test(optim_checkpoint, exact_resume_sgd_nesterov) { exact_resume(OPTIM_SGD); }

Test(optim_checkpoint, file_layout_names_and_metadata) {
    const char *dir = test_tmpdir();
    char *path = path_join(dir, "s.safetensors");
    toy a = toy_new(1, OPTIM_ADAMW, 12);
    toy_train(&a, 0, 2);
    ckpt_state sa = {.params = &a.pl, .opt = a.opt, .step = 42, .rng = &a.rng};
    cr_assert_eq(ckpt_save(path, &sa), ER_OK, "%s", er_msg());
    st_file f;
    cr_assert_eq(st_open(path, &f), ER_OK, "%s", er_msg());
    /* 7 params + 6 trainable * (m, v) + optim.step + train.step */
    cr_expect_eq(f.n, 7 + 12 + 2);
    const st_tensor *t = st_find(&f, "blocks.0.attn.qkv.weight");
    cr_assert_not_null(t);
    cr_expect_eq(t->dtype, ST_F32);
    cr_expect(t->ndim == 2 && t->shape[0] == 12 && t->shape[1] == 4);
    cr_expect_not_null(st_find(&f, "optim.cls_token.m"));
    cr_expect_not_null(st_find(&f, "optim.cls_token.v"));
    cr_expect_null(st_find(&f, "optim.frozen.weight.m"));
    int64_t v;
    cr_expect_eq(st_read_i64(&f, "train.step", &v, 1), ER_OK);
    cr_expect_eq(v, 42);
    cr_expect_eq(st_read_i64(&f, "optim.step", &v, 1), ER_OK);
    cr_expect_eq(v, 2);
    cr_expect_str_eq(st_meta(&f, "endoret.optimizer"), "adamw");
    cr_expect_str_eq(st_meta(&f, "format"), "pt");
    char want[96];
    snprintf(want, sizeof want, "%llu %llu %llu", (unsigned long long)a.rng.seed, (unsigned long long)a.rng.stream,
             (unsigned long long)a.rng.index);
    cr_expect_str_eq(st_meta(&f, "endoret.rng"), want);
    float m[4];
    cr_expect_eq(st_read_f32(&f, "optim.cls_token.m", m, 4), ER_OK);
    cr_expect_eq(memcmp(m, a.opt->ps[0].m->data, sizeof m), 0);
    st_close(&f);
    toy_free(&a);
    free(path);
}

/* Loading `path` into a fresh toy must fail with ER_INPUT, a message containing `needle`, and
 * leave the toy's parameters as they were. */
static void expect_rejected(const char *path, toy *t, int flags, const char *needle) {
    float before[4];
    memcpy(before, t->pl.t[1]->data, sizeof before);
    ckpt_state s = {.params = &t->pl, .opt = t->opt, .rng = &t->rng};
    int rc = ckpt_load(path, &s, flags, NULL);
    cr_expect_eq(rc, ER_INPUT, "rc %d (%s)", rc, er_msg());
    cr_expect(strstr(er_msg(), needle) != NULL, "message '%s' lacks '%s'", er_msg(), needle);
    cr_expect_eq(memcmp(before, t->pl.t[1]->data, sizeof before), 0, "model changed by a failed load");
}

Test(optim_checkpoint, mismatches_rejected) {
    const char *dir = test_tmpdir();
    char *path = path_join(dir, "s.safetensors"), *wpath = path_join(dir, "w.safetensors");
    toy a = toy_new(1, OPTIM_ADAMW, 12);
    ckpt_state sa = {.params = &a.pl, .opt = a.opt, .step = 3};
    cr_assert_eq(ckpt_save(path, &sa), ER_OK, "%s", er_msg());
    ckpt_state wa = {.params = &a.pl};
    cr_assert_eq(ckpt_save(wpath, &wa), ER_OK, "%s", er_msg());

    toy wrong_shape = toy_new(2, OPTIM_ADAMW, 8);
    expect_rejected(path, &wrong_shape, CKPT_STRICT, "blocks.0.attn.qkv.weight' has shape [12, 4] in the file, the model expects [8, 4]");
    toy_free(&wrong_shape);

    toy sgd = toy_new(2, OPTIM_SGD, 12);
    expect_rejected(path, &sgd, CKPT_STRICT, "optimizer state is 'adamw', the run uses 'sgd'");
    /* weights only: fine */
    ckpt_state ss = {.params = &sgd.pl, .opt = sgd.opt};
    cr_expect_eq(ckpt_load(path, &ss, CKPT_WEIGHTS_ONLY, NULL), ER_OK, "%s", er_msg());
    cr_expect(same_bits(&a.pl, &sgd.pl));
    cr_expect_eq(sgd.opt->step, 0);
    toy_free(&sgd);

    toy resume = toy_new(3, OPTIM_ADAMW, 12);
    expect_rejected(wpath, &resume, CKPT_STRICT, "no optimizer state");
    /* a model with one more parameter: missing tensor named */
    params_add(&resume.pl, tensor_param("blocks.1.norm1.weight", 1, SHAPE(4)));
    ckpt_state sr = {.params = &resume.pl};
    cr_expect_eq(ckpt_load(wpath, &sr, CKPT_STRICT, NULL), ER_INPUT);
    cr_expect(strstr(er_msg(), "'blocks.1.norm1.weight' is missing") != NULL, "%s", er_msg());
    toy_free(&resume);

    /* a model with one parameter fewer: strict load names the unexpected tensor, ALLOW_EXTRA loads */
    toy small = toy_new(4, OPTIM_ADAMW, 12);
    tensor *head = small.pl.t[5];
    small.pl.n = 5; /* drop head.weight and frozen.weight */
    ckpt_state sm = {.params = &small.pl};
    cr_expect_eq(ckpt_load(wpath, &sm, CKPT_STRICT, NULL), ER_INPUT);
    cr_expect(strstr(er_msg(), "tensor 'frozen.weight' is not part of this model") != NULL, "%s", er_msg());
    cr_expect_eq(ckpt_load(wpath, &sm, CKPT_ALLOW_EXTRA, NULL), ER_OK, "%s", er_msg());
    small.pl.n = 7;
    (void)head;
    toy_free(&small);

    toy_free(&a);
    free(path);
    free(wpath);
}

Test(optim_checkpoint, truncated_garbled_and_nan_files_rejected) {
    const char *dir = test_tmpdir();
    char *path = path_join(dir, "s.safetensors"), *bad = path_join(dir, "bad.safetensors");
    toy a = toy_new(1, OPTIM_ADAMW, 12);
    toy_train(&a, 0, 2);
    ckpt_state sa = {.params = &a.pl, .opt = a.opt, .step = 2, .rng = &a.rng};
    cr_assert_eq(ckpt_save(path, &sa), ER_OK, "%s", er_msg());
    char *data;
    size_t len;
    cr_assert_eq(read_file(path, &data, &len), ER_OK);
    toy b = toy_new(5, OPTIM_ADAMW, 12);
    /* truncated at several points: inside the length prefix, the header, the data */
    const size_t cuts[] = {0, 5, 8, 40, len / 2, len - 1};
    for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
        cr_assert_eq(write_file_atomic(bad, data, cuts[c]), ER_OK);
        float before[4];
        memcpy(before, b.pl.t[1]->data, sizeof before);
        ckpt_state sb = {.params = &b.pl, .opt = b.opt, .rng = &b.rng};
        int rc = ckpt_load(bad, &sb, CKPT_STRICT, NULL);
        cr_expect_eq(rc, ER_INPUT, "cut at %zu: rc %d (%s)", cuts[c], rc, er_msg());
        cr_expect(strstr(er_msg(), "bad.safetensors") != NULL, "message should name the file: %s", er_msg());
        cr_expect_eq(memcmp(before, b.pl.t[1]->data, sizeof before), 0);
    }
    /* garbled header byte */
    char *g = xmalloc(len);
    memcpy(g, data, len);
    g[12] = '\x01';
    cr_assert_eq(write_file_atomic(bad, g, len), ER_OK);
    ckpt_state sb = {.params = &b.pl, .opt = b.opt};
    cr_expect_eq(ckpt_load(bad, &sb, CKPT_STRICT, NULL), ER_INPUT, "%s", er_msg());
    free(g);
    free(data);
    /* a NaN in one optimizer moment: rejected by name, parameters untouched */
    a.opt->ps[3].v->data[1] = NAN;
    cr_assert_eq(ckpt_save(path, &sa), ER_OK, "%s", er_msg());
    expect_rejected(path, &b, CKPT_STRICT, "tensor 'optim.blocks.0.attn.qkv.weight.v' holds NaN or Inf");
    /* a missing file */
    char *none = path_join(dir, "absent.safetensors");
    expect_rejected(none, &b, CKPT_STRICT, "absent.safetensors");
    free(none);
    toy_free(&a);
    toy_free(&b);
    free(path);
    free(bad);
}

/* Weights stored as BF16 / F16 by another tool load converted; reserved names cannot be saved. */
Test(optim_checkpoint, half_precision_weights_and_reserved_names) {
    const char *dir = test_tmpdir();
    char *path = path_join(dir, "half.safetensors");
    param_list pl = {0};
    tensor *w = tensor_param("head.weight", 2, SHAPE(2, 3)), *b = tensor_param("head.bias", 1, SHAPE(2));
    params_add(&pl, w);
    params_add(&pl, b);
    const float wv[6] = {1.0f, -2.5f, 0.15625f, 28672.0f, -0.0f, 0.5f}, bv[2] = {0.25f, -1.0f};
    uint16_t wh[6], bh[2];
    for (int i = 0; i < 6; i++) wh[i] = st_f32_to_bf16(wv[i]);
    for (int i = 0; i < 2; i++) bh[i] = st_f32_to_f16(bv[i]);
    st_writer *sw = st_writer_new();
    st_add(sw, "head.weight", ST_BF16, 2, SHAPE(2, 3), wh);
    st_add(sw, "head.bias", ST_F16, 1, SHAPE(2), bh);
    cr_assert_eq(st_write(sw, path), ER_OK, "%s", er_msg());
    st_writer_free(sw);
    ckpt_state s = {.params = &pl};
    cr_assert_eq(ckpt_load(path, &s, CKPT_STRICT, NULL), ER_OK, "%s", er_msg());
    for (int i = 0; i < 6; i++) cr_expect_eq(w->data[i], wv[i], "w[%d] %g", i, w->data[i]); /* all exact in bf16 */
    for (int i = 0; i < 2; i++) cr_expect_eq(b->data[i], bv[i]);
    cr_expect_eq(s.step, 0); /* no train.step in the file: unchanged */
    params_add(&pl, tensor_param("train.step", 1, SHAPE(1)));
    cr_expect_eq(ckpt_save(path, &s), ER_INPUT);
    cr_expect(strstr(er_msg(), "collides") != NULL, "%s", er_msg());
    params_free(&pl);
    free(path);
}
