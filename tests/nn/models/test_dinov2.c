/* DINOv2 with register tokens (issue 14): a Meta-layout file (register_tokens, a position table for
 * [CLS] + patches, LayerScale), written with a plain PyTorch DinoVisionTransformer by
 * make_dinov2_refs.py, loads through the model registry and gives PyTorch's x_norm_clstoken; the
 * same weights in timm's reg4 layout (reg_token, no_embed_class) give it too; save -> load keeps
 * it; ambiguous or malformed register tensors are refused naming the file. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoints/safetensors.h"
#include "nn/autograd.h"
#include "nn/base/base.h"
#include "nn/models/model.h"
#include "nn/models/vit_model.h"
#include "nn/ops.h"
#include "tests/test_util.h"

#define META_FILE "tests/nn/models/dinov2_reg4_meta.safetensors"
#define REFS_FILE "tests/nn/models/dinov2_reg4_refs.safetensors"
enum { B = 2, D = 128, IMG = 56, R = 4 };

typedef struct {
    float x[B * 3 * IMG * IMG], cls[B * D], cls_noreg[B * D];
} refs;

static refs *load_refs(void) {
    refs *r = xmalloc(sizeof *r);
    st_file f;
    cr_assert_eq(st_open(REFS_FILE, &f), 0, "%s", er_msg());
    cr_assert_eq(st_read_f32(&f, "x", r->x, B * 3 * IMG * IMG), 0, "%s", er_msg());
    cr_assert_eq(st_read_f32(&f, "cls", r->cls, B * D), 0, "%s", er_msg());
    cr_assert_eq(st_read_f32(&f, "cls_noreg", r->cls_noreg, B * D), 0, "%s", er_msg());
    st_close(&f);
    return r;
}

/* max |a - ref| / max |ref| */
static double rel_err(const float *a, const float *ref, int n, double *maxdiff) {
    double md = 0, mr = 0;
    for (int i = 0; i < n; i++) {
        md = fmax(md, fabs((double)a[i] - ref[i]));
        mr = fmax(mr, fabs((double)ref[i]));
    }
    if (maxdiff) *maxdiff = md;
    return md / mr;
}

/* the [CLS] token after the final norm (x_norm_clstoken), before the descriptor's L2 normalisation */
static void cls_of(model *m, const float *x, float *out) {
    vit *v = vit_model_vit(m);
    cr_assert(v);
    NO_GRAD {
        tensor *c = vit_cls(v, &NN_EVAL, x, B);
        cr_assert(c, "%s", er_msg());
        tensor_to_host(c, out);
    }
    nn_step_end();
}

static void expect_matches(model *m, const refs *r, const char *what) {
    float out[B * D];
    cls_of(m, r->x, out);
    double md, e = rel_err(out, r->cls, B * D, &md);
    cr_log_info("%s: [CLS] max |diff| %.3g, relative %.3g", what, md, e);
    cr_expect_leq(e, 1e-5, "%s: [CLS] differs from PyTorch's x_norm_clstoken by %.3g (relative %.3g)", what, md, e);
    /* the descriptor embed writes: the same token, L2-normalised */
    float desc[B * D], want[B * D];
    cr_assert_eq(model_embed(m, r->x, B, desc), 0, "%s", er_msg());
    for (int b = 0; b < B; b++) {
        double n2 = 0;
        for (int k = 0; k < D; k++) n2 += (double)r->cls[b * D + k] * r->cls[b * D + k];
        for (int k = 0; k < D; k++) want[b * D + k] = (float)(r->cls[b * D + k] / sqrt(n2));
    }
    e = rel_err(desc, want, B * D, &md);
    cr_expect_leq(e, 1e-5, "%s: descriptor differs by %.3g (relative %.3g)", what, md, e);
}

Test(dinov2_registers, meta_layout_matches_pytorch) {
    refs *r = load_refs();
    /* the references really depend on the registers (what the bug dropped) */
    double md;
    rel_err(r->cls_noreg, r->cls, B * D, &md);
    cr_assert_gt(md, 1e-2, "registers change [CLS] by %g only: the test could not see them dropped", md);
    model *m = NULL;
    cr_assert_eq(model_load(META_FILE, NULL, NULL, 0, &m), 0, "%s", er_msg());
    vit *v = vit_model_vit(m);
    cr_assert(v, "a Meta DINOv2 file loads as the ViT family");
    cr_expect_eq(v->cfg.registers, R, "register_tokens [1,4,D] is 4 registers (got %d)", v->cfg.registers);
    cr_expect_eq(v->cfg.pos_prefix, 1, "Meta's table has a row for [CLS], none for the registers");
    cr_expect_eq(v->cfg.patch, 14);
    cr_expect_eq(v->cfg.img, IMG);
    cr_expect_eq(v->cfg.heads, D / 64);
    cr_expect_gt(v->cfg.layerscale, 0);
    expect_matches(m, r, "Meta layout");
    model_free(m);
    free(r);
}

/* The same network in timm's vit_*_reg4_dinov2 layout: reg_token, pos_embed without the [CLS] row
 * (no_embed_class: positions on the patches only), [CLS]'s position folded into cls_token. */
static char *write_timm_copy(const char *dir, int with_both) {
    st_file f;
    cr_assert_eq(st_open(META_FILE, &f), 0, "%s", er_msg());
    st_writer *w = st_writer_new();
    float **bufs = xcalloc((size_t)f.n, sizeof(float *));
    float pos0[D];
    {
        const st_tensor *pe = st_find(&f, "pos_embed");
        cr_assert(pe);
        float *all = xmalloc(sizeof(float) * (size_t)pe->numel);
        cr_assert_eq(st_read_f32(&f, "pos_embed", all, pe->numel), 0, "%s", er_msg());
        memcpy(pos0, all, sizeof pos0);
        free(all);
    }
    for (int i = 0; i < f.n; i++) {
        const st_tensor *t = &f.tensors[i];
        if (!strcmp(t->name, "mask_token")) continue;
        bufs[i] = xmalloc(sizeof(float) * (size_t)t->numel);
        cr_assert_eq(st_read_f32(&f, t->name, bufs[i], t->numel), 0, "%s", er_msg());
        const char *name = t->name;
        int64_t shape[ST_MAX_DIMS];
        memcpy(shape, t->shape, sizeof shape);
        const float *data = bufs[i];
        if (!strcmp(name, "register_tokens")) {
            name = "reg_token";
            if (with_both) st_add(w, "register_tokens", ST_F32, t->ndim, shape, data);
        } else if (!strcmp(name, "pos_embed")) {
            shape[1] -= 1;
            data += D;
        } else if (!strcmp(name, "cls_token")) {
            for (int k = 0; k < D; k++) bufs[i][k] += pos0[k];
        }
        st_add(w, name, ST_F32, t->ndim, shape, data);
    }
    char *p = path_join(dir, with_both ? "both.safetensors" : "timm_reg4.safetensors");
    cr_assert_eq(st_write(w, p), 0, "%s", er_msg());
    st_writer_free(w);
    for (int i = 0; i < f.n; i++) free(bufs[i]);
    free(bufs);
    st_close(&f);
    return p;
}

Test(dinov2_registers, timm_reg4_layout_matches_too) {
    refs *r = load_refs();
    char *p = write_timm_copy(test_tmpdir(), 0);
    model *m = NULL;
    cr_assert_eq(model_load(p, NULL, NULL, 0, &m), 0, "%s", er_msg());
    vit *v = vit_model_vit(m);
    cr_expect_eq(v->cfg.registers, R);
    cr_expect_eq(v->cfg.pos_prefix, 0, "timm no_embed_class: no prefix token has a position");
    cr_expect_eq(v->cfg.img, IMG);
    expect_matches(m, r, "timm reg4 layout");
    model_free(m);
    free(p);
    free(r);
}

Test(dinov2_registers, save_load_keeps_the_registers) {
    refs *r = load_refs();
    model *m = NULL, *u = NULL;
    cr_assert_eq(model_load(META_FILE, NULL, NULL, 0, &m), 0, "%s", er_msg());
    char *p = path_join(test_tmpdir(), "ours.safetensors");
    cr_assert_eq(model_save(m, p, -1), 0, "%s", er_msg());
    cr_assert_eq(model_load(p, NULL, NULL, 0, &u), 0, "%s", er_msg());
    cr_expect_eq(vit_model_vit(u)->cfg.registers, R);
    cr_expect_eq(vit_model_vit(u)->cfg.pos_prefix, 1);
    float a[B * D], b[B * D];
    cls_of(m, r->x, a);
    cls_of(u, r->x, b);
    cr_expect(memcmp(a, b, sizeof a) == 0, "save -> load changes [CLS]");
    model_free(m), model_free(u);
    free(p);
    free(r);
}

Test(dinov2_registers, ambiguous_or_malformed_registers_are_refused) {
    const char *dir = test_tmpdir();
    /* both names: which one is meant? */
    char *p = write_timm_copy(dir, 1);
    model *m = NULL;
    cr_expect_eq(model_load(p, NULL, NULL, 0, &m), ER_INPUT);
    cr_expect(strstr(er_msg(), p) && strstr(er_msg(), "reg_token") && strstr(er_msg(), "register_tokens"), "%s", er_msg());
    free(p);
    /* registers that are not [1, R, D] */
    st_file f;
    cr_assert_eq(st_open(META_FILE, &f), 0, "%s", er_msg());
    st_writer *w = st_writer_new();
    float **bufs = xcalloc((size_t)f.n, sizeof(float *));
    for (int i = 0; i < f.n; i++) {
        const st_tensor *t = &f.tensors[i];
        bufs[i] = xmalloc(sizeof(float) * (size_t)t->numel);
        cr_assert_eq(st_read_f32(&f, t->name, bufs[i], t->numel), 0, "%s", er_msg());
        int64_t shape[ST_MAX_DIMS];
        memcpy(shape, t->shape, sizeof shape);
        if (!strcmp(t->name, "register_tokens")) shape[1] = 2, shape[2] = 2 * D - 6; /* 4*D - 12 values */
        int64_t n = 1;
        for (int d = 0; d < t->ndim; d++) n *= shape[d];
        cr_assert_leq(n, t->numel);
        st_add(w, t->name, ST_F32, t->ndim, shape, bufs[i]);
    }
    p = path_join(dir, "bad_regs.safetensors");
    cr_assert_eq(st_write(w, p), 0, "%s", er_msg());
    st_writer_free(w);
    for (int i = 0; i < f.n; i++) free(bufs[i]);
    free(bufs);
    st_close(&f);
    cr_expect_eq(model_load(p, NULL, NULL, 0, &m), ER_INPUT);
    cr_expect(strstr(er_msg(), p) && strstr(er_msg(), "register_tokens"), "%s", er_msg());
    free(p);
}
