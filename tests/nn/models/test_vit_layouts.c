/* Weight layouts (issue 14): one tiny ViT per public layout, written with that code's own names and
 * forward by make_layout_refs.py (Meta DINOv2 ViT-g style: SwiGLU w12/w3, chunked blocks, 4 registers,
 * a 37x37 table used at 224; Hugging Face Dinov2WithRegisters: separate query/key/value, lambda1,
 * weights_in/out, and without registers with fc1/fc2; a DINO v1 teacher checkpoint: backbone. prefix, DINO head; timm reg4: no_embed_class),
 * loads through model_load, recognises its layout, resizes its position table with its own rule and gives
 * PyTorch's [CLS] to 1e-5 relative; a file with one tensor removed, renamed, reshaped or added, or with
 * two backbones, is refused naming it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoints/safetensors.h"
#include "nn/autograd.h"
#include "nn/base/base.h"
#include "nn/models/model.h"
#include "nn/models/pos_interp.h"
#include "nn/models/vit_layouts.h"
#include "nn/models/vit.h"
#include "nn/models/vit_model.h"
#include "tests/test_util.h"

#define DIR "tests/nn/models/"
enum { B = 2, D = 32 };

/* the inputs make_layout_refs.py computes: sin(0.0137 i) + 0.5 cos(0.291 i), rounded to float */
static float *images(int img) {
    int64_t n = (int64_t)B * 3 * img * img;
    float *x = xmalloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++) x[i] = (float)(sin(0.0137 * (double)i) + 0.5 * cos(0.291 * (double)i));
    return x;
}

static void read_ref(const char *key, float *out) {
    st_file f;
    cr_assert_eq(st_open(DIR "layout_refs.safetensors", &f), 0, "%s", er_msg());
    cr_assert_eq(st_read_f32(&f, key, out, B * D), 0, "%s", er_msg());
    st_close(&f);
}

static char *HEADS2[] = {"model.heads=2"}; /* 2 heads of 16: the files cannot say it */

/* [CLS] at img vs PyTorch's; returns max |diff| / max |ref| */
static double cls_error(model *m, int img, const char *key) {
    cr_assert_eq(model_set_img(m, img), 0, "%s", er_msg());
    float *x = images(img), out[B * D], ref[B * D];
    read_ref(key, ref);
    NO_GRAD {
        tensor *c = vit_cls(vit_model_vit(m), &NN_EVAL, x, B);
        cr_assert(c, "%s", er_msg());
        tensor_to_host(c, out);
    }
    nn_step_end();
    double md = 0, mr = 0;
    for (int i = 0; i < B * D; i++) {
        md = fmax(md, fabs((double)out[i] - ref[i]));
        mr = fmax(mr, fabs((double)ref[i]));
    }
    cr_log_info("%s: [CLS] max |endoret - torch| %.3g, relative %.3g", key, md, md / mr);
    free(x);
    return md / mr;
}

static void expect_layout(const char *path, int layout, const char *prefix, int ndropped) {
    st_file f;
    vit_tensors t;
    cr_assert_eq(st_open(path, &f), 0, "%s", er_msg());
    cr_assert_eq(vit_tensors_open(&f, "", 1, &t), 0, "%s", er_msg());
    cr_expect_eq(t.layout, layout, "%s: layout %s, expected %s", path, vit_layout_label(t.layout), vit_layout_label(layout));
    cr_expect_str_eq(t.prefix, prefix);
    cr_expect_eq(t.ndropped, ndropped, "%s: %d tensors dropped, expected %d", path, t.ndropped, ndropped);
    vit_tensors_free(&t);
    st_close(&f);
}

Test(vit_layouts, meta_giant_chunked_swiglu_registers_at_224) {
    expect_layout(DIR "layout_meta_g.safetensors", VIT_LAYOUT_META, "", 1 /* mask_token */);
    model *m = NULL;
    cr_assert_eq(model_load(DIR "layout_meta_g.safetensors", NULL, HEADS2, 1, &m), 0, "%s", er_msg());
    const vit_config *c = &vit_model_vit(m)->cfg;
    cr_expect_eq(c->swiglu, 1);
    cr_expect_eq(c->mlp_hidden, 88, "SwiGLUFFNFused: (int(2/3 * 4 * 32) + 7) // 8 * 8 = 88, got %d", c->mlp_hidden);
    cr_expect_eq(c->registers, 4);
    cr_expect_eq(c->img, 518);
    cr_expect_eq(c->depth, 2);
    cr_expect_eq(c->pos_interp, POS_INTERP_BICUBIC_AA, "dinov2_vitg14_reg: interpolate_antialias=True, offset 0");
    cr_expect_leq(cls_error(m, 224, "meta_g_cls_224"), 1e-5);
    model_free(m);
}

Test(vit_layouts, hugging_face_registers_swiglu_separate_qkv) {
    expect_layout(DIR "layout_hf_reg.safetensors", VIT_LAYOUT_HF, "", 1 /* embeddings.mask_token */);
    model *m = NULL;
    cr_assert_eq(model_load(DIR "layout_hf_reg.safetensors", NULL, HEADS2, 1, &m), 0, "%s", er_msg());
    const vit_config *c = &vit_model_vit(m)->cfg;
    cr_expect_eq(c->swiglu, 1);
    cr_expect_eq(c->registers, 4);
    cr_expect_eq(c->pos_prefix, 1);
    cr_expect_eq(c->pos_interp, POS_INTERP_BICUBIC_AA, "Dinov2WithRegistersEmbeddings: antialias=True");
    cr_expect_leq(cls_error(m, 56, "hf_reg_cls_56"), 1e-5);
    cr_expect_leq(cls_error(m, 84, "hf_reg_cls_84"), 1e-5);
    model_free(m);
}

Test(vit_layouts, hugging_face_without_registers_gelu_mlp) {
    expect_layout(DIR "layout_hf_plain.safetensors", VIT_LAYOUT_HF, "", 1 /* embeddings.mask_token */);
    model *m = NULL;
    cr_assert_eq(model_load(DIR "layout_hf_plain.safetensors", NULL, HEADS2, 1, &m), 0, "%s", er_msg());
    const vit_config *c = &vit_model_vit(m)->cfg;
    cr_expect_eq(c->swiglu, 0);
    cr_expect_eq(c->registers, 0);
    cr_expect_eq(c->pos_interp, POS_INTERP_BICUBIC, "Dinov2Embeddings: size=, no antialias");
    cr_expect_leq(cls_error(m, 84, "hf_plain_cls_84"), 1e-5);
    model_free(m);
}

Test(vit_layouts, dino_v1_teacher_checkpoint_with_head) {
    expect_layout(DIR "layout_dinov1.safetensors", VIT_LAYOUT_DINOV1, "backbone.", 6 /* DINOHead */);
    model *m = NULL;
    cr_assert_eq(model_load(DIR "layout_dinov1.safetensors", NULL, HEADS2, 1, &m), 0, "%s", er_msg());
    const vit_config *c = &vit_model_vit(m)->cfg;
    cr_expect_eq(c->patch, 16);
    cr_expect_eq(c->registers, 0);
    cr_expect_eq(c->layerscale, 0);
    cr_expect_eq(c->pos_interp, POS_INTERP_BICUBIC_OFFSET, "DINO: scale_factor (g + 0.1) / M");
    cr_expect_leq(cls_error(m, 64, "dinov1_cls_64"), 1e-5);
    model_free(m);
}

Test(vit_layouts, timm_reg4_no_embed_class) {
    expect_layout(DIR "layout_timm_reg.safetensors", VIT_LAYOUT_TIMM, "", 0);
    model *m = NULL;
    cr_assert_eq(model_load(DIR "layout_timm_reg.safetensors", NULL, HEADS2, 1, &m), 0, "%s", er_msg());
    const vit_config *c = &vit_model_vit(m)->cfg;
    cr_expect_eq(c->pos_prefix, 0);
    cr_expect_eq(c->registers, 4);
    cr_expect_eq(c->pos_interp, POS_INTERP_BICUBIC_AA, "timm resample_abs_pos_embed: antialias=True");
    cr_expect_leq(cls_error(m, 98, "timm_reg_cls_98"), 1e-5);
    model_free(m);
}

/* ---------------------------------------------------------------- rejection */

typedef enum { DROP, RENAME, RESHAPE, ADD } edit_kind;

/* a copy of src (F32) with one edit on tensor `name` (RENAME: to `to`; RESHAPE: a 2-D tensor's dims
 * swapped; ADD: a [4] tensor named `name` added) */
static char *edited(const char *src, const char *out_name, edit_kind k, const char *name, const char *to) {
    st_file f;
    cr_assert_eq(st_open(src, &f), 0, "%s", er_msg());
    st_writer *w = st_writer_new();
    float **bufs = xcalloc((size_t)f.n + 1, sizeof(float *));
    int hit = 0;
    for (int i = 0; i < f.n; i++) {
        const st_tensor *t = &f.tensors[i];
        bufs[i] = xmalloc(sizeof(float) * (size_t)t->numel);
        cr_assert_eq(st_read_f32(&f, t->name, bufs[i], t->numel), 0, "%s", er_msg());
        int64_t shape[ST_MAX_DIMS];
        memcpy(shape, t->shape, sizeof shape);
        const char *nm = t->name;
        if (!strcmp(nm, name)) {
            hit = 1;
            if (k == DROP) continue;
            if (k == RENAME) nm = to;
            if (k == RESHAPE) {
                cr_assert_eq(t->ndim, 2);
                int64_t a = shape[0];
                shape[0] = shape[1], shape[1] = a;
            }
        }
        st_add(w, nm, ST_F32, t->ndim, shape, bufs[i]);
    }
    static const float extra[4] = {1, 2, 3, 4};
    if (k == ADD) st_add(w, name, ST_F32, 1, (int64_t[]){4}, extra), hit = 1;
    cr_assert(hit, "%s has no '%s'", src, name);
    char *p = path_join(test_tmpdir(), out_name);
    cr_assert_eq(st_write(w, p), 0, "%s", er_msg());
    st_writer_free(w);
    for (int i = 0; i < f.n; i++) free(bufs[i]);
    free(bufs);
    st_close(&f);
    return p;
}

static void expect_refused(const char *src, edit_kind k, const char *name, const char *to, const char *named) {
    char *p = edited(src, "edited.safetensors", k, name, to);
    model *m = NULL;
    cr_expect_eq(model_load(p, NULL, HEADS2, 1, &m), ER_INPUT, "%s: edit %d of '%s' loaded", src, (int)k, name);
    cr_expect(strstr(er_msg(), p) && strstr(er_msg(), named), "edit %d of '%s': the message should name the file and '%s': %s",
              (int)k, name, named, er_msg());
    cr_expect_null(m);
    cr_log_info("%s", er_msg());
    free(p);
}

Test(vit_layouts, a_missing_renamed_reshaped_or_extra_tensor_is_refused_naming_it) {
    const char *hf = DIR "layout_hf_reg.safetensors", *meta = DIR "layout_meta_g.safetensors";
    const char *dino = DIR "layout_dinov1.safetensors", *timm = DIR "layout_timm_reg.safetensors";
    /* removed */
    expect_refused(hf, DROP, "encoder.layer.1.attention.attention.key.weight", NULL, "encoder.layer.1.attention.attention.key.weight");
    expect_refused(hf, DROP, "encoder.layer.0.layer_scale2.lambda1", NULL, "encoder.layer.0.layer_scale2.lambda1");
    expect_refused(meta, DROP, "blocks.1.1.mlp.w3.bias", NULL, "blocks.1.1.mlp.w3.bias");
    expect_refused(dino, DROP, "backbone.norm.bias", NULL, "backbone.norm.bias");
    expect_refused(timm, DROP, "blocks.1.ls1.gamma", NULL, "blocks.1.ls1.gamma");
    /* renamed */
    expect_refused(hf, RENAME, "encoder.layer.0.norm2.weight", "encoder.layer.0.norm_2.weight", "encoder.layer.0.norm_2.weight");
    expect_refused(meta, RENAME, "blocks.1.1.attn.proj.bias", "blocks.0.1.attn.proj.bias", "blocks.0.1.attn.proj.bias");
    expect_refused(timm, RENAME, "reg_token", "registers", "registers");
    /* reshaped */
    expect_refused(meta, RESHAPE, "blocks.1.1.mlp.w3.weight", NULL, "blocks.1.1.mlp.w3.weight");
    expect_refused(hf, RESHAPE, "encoder.layer.1.mlp.weights_out.weight", NULL, "encoder.layer.1.mlp.weights_out.weight");
    expect_refused(dino, RESHAPE, "backbone.blocks.0.mlp.fc2.weight", NULL, "backbone.blocks.0.mlp.fc1.weight");
    /* added: a tensor the layout does not know, or a block the model does not have */
    expect_refused(timm, ADD, "blocks.0.attn.q_norm.weight", NULL, "blocks.0.attn.q_norm.weight");
    expect_refused(meta, ADD, "blocks.1.1.ls3.gamma", NULL, "blocks.1.1.ls3.gamma");
    expect_refused(timm, ADD, "blocks.5.norm1.weight", NULL, "blocks.5.norm1.weight");
    /* a DINO checkpoint with teacher and student: which one? */
    expect_refused(dino, ADD, "student.backbone.patch_embed.proj.weight", NULL, "student.backbone.");
}

/* A bare DINO v1 backbone (the teacher without its backbone. prefix and head, as a published
 * dino_deitsmall16_pretrain.pth) has timm's names, so its layout cannot say it is DINO's: it loads as
 * timm (antialiased rule) and model.pos_interp=bicubic_offset gives DINO's own resize. */
Test(vit_layouts, bare_dino_backbone_needs_its_rule_named) {
    st_file f;
    cr_assert_eq(st_open(DIR "layout_dinov1.safetensors", &f), 0, "%s", er_msg());
    st_writer *w = st_writer_new();
    for (int i = 0; i < f.n; i++) {
        const st_tensor *t = &f.tensors[i];
        if (strncmp(t->name, "backbone.", 9)) continue;
        st_add(w, t->name + 9, t->dtype, t->ndim, t->shape, f.data + t->offset);
    }
    char *p = path_join(test_tmpdir(), "bare_dino.safetensors");
    cr_assert_eq(st_write(w, p), 0, "%s", er_msg());
    st_writer_free(w);
    st_close(&f);
    expect_layout(p, VIT_LAYOUT_TIMM, "", 0);
    char *sets[] = {"model.heads=2", "model.pos_interp=bicubic_offset"};
    model *m = NULL;
    cr_assert_eq(model_load(p, NULL, sets, 1, &m), 0, "%s", er_msg());
    cr_expect_eq(vit_model_vit(m)->cfg.pos_interp, POS_INTERP_BICUBIC_AA);
    double e = cls_error(m, 64, "dinov1_cls_64");
    cr_expect_gt(e, 1e-4, "timm's rule on DINO's table should not match DINO's reference (relative %.3g)", e);
    model_free(m);
    cr_assert_eq(model_load(p, NULL, sets, 2, &m), 0, "%s", er_msg());
    cr_expect_eq(vit_model_vit(m)->cfg.pos_interp, POS_INTERP_BICUBIC_OFFSET);
    cr_expect_leq(cls_error(m, 64, "dinov1_cls_64"), 1e-5);
    model_free(m);
    char *bad[] = {"model.pos_interp=bilinear"};
    cr_expect_eq(model_load(p, NULL, bad, 1, &m), ER_INPUT);
    cr_expect(strstr(er_msg(), "model.pos_interp") && strstr(er_msg(), "bilinear"), "%s", er_msg());
    free(p);
}

/* The rule each layout implies (docs/models.md), seen through real loads where a test file exists:
 * Meta without registers is the hub's default builder (interpolate_offset 0.1); HF's classifier model
 * (dinov2. prefix, classifier.* beside it) loads its backbone; vit_giant is DINOv2's vit_giant2. */
Test(vit_layouts, rules_per_layout_classifier_prefix_and_giant_preset) {
    cr_expect_eq(vit_layout_pos_interp(VIT_LAYOUT_TIMM, 0), POS_INTERP_BICUBIC_AA);
    cr_expect_eq(vit_layout_pos_interp(VIT_LAYOUT_MAE, 0), POS_INTERP_BICUBIC);
    cr_expect_eq(vit_layout_pos_interp(VIT_LAYOUT_ENDORET, 4), POS_INTERP_BICUBIC);
    cr_expect_eq(vit_layout_pos_interp(VIT_LAYOUT_HF, 0), POS_INTERP_BICUBIC);
    cr_expect_eq(vit_layout_pos_interp(VIT_LAYOUT_DINOV1, 0), POS_INTERP_BICUBIC_OFFSET);
    /* Meta without registers: drop them from the ViT-g file */
    char *p = edited(DIR "layout_meta_g.safetensors", "noreg.safetensors", DROP, "register_tokens", NULL);
    model *m = NULL;
    cr_assert_eq(model_load(p, NULL, HEADS2, 1, &m), 0, "%s", er_msg());
    cr_expect_eq(vit_model_vit(m)->cfg.registers, 0);
    cr_expect_eq(vit_model_vit(m)->cfg.pos_interp, POS_INTERP_BICUBIC_OFFSET, "dinov2_vitg14: interpolate_offset 0.1");
    model_free(m);
    free(p);
    /* Dinov2ForImageClassification's state dict: dinov2.* and classifier.* */
    st_file f;
    cr_assert_eq(st_open(DIR "layout_hf_plain.safetensors", &f), 0, "%s", er_msg());
    st_writer *w = st_writer_new();
    char (*names)[160] = xcalloc((size_t)f.n, sizeof *names);
    for (int i = 0; i < f.n; i++) {
        const st_tensor *t = &f.tensors[i];
        snprintf(names[i], sizeof names[i], "dinov2.%s", t->name);
        st_add(w, names[i], t->dtype, t->ndim, t->shape, f.data + t->offset);
    }
    static const float head[2 * 64] = {0};
    st_add(w, "classifier.weight", ST_F32, 2, (int64_t[]){2, 64}, head);
    st_add(w, "classifier.bias", ST_F32, 1, (int64_t[]){2}, head);
    p = path_join(test_tmpdir(), "hf_cls.safetensors");
    cr_assert_eq(st_write(w, p), 0, "%s", er_msg());
    st_writer_free(w);
    free(names);
    st_close(&f);
    expect_layout(p, VIT_LAYOUT_HF, "dinov2.", 3 /* mask_token, classifier.weight, classifier.bias */);
    cr_assert_eq(model_load(p, NULL, HEADS2, 1, &m), 0, "%s", er_msg());
    cr_expect_leq(cls_error(m, 84, "hf_plain_cls_84"), 1e-5);
    model_free(m);
    free(p);
    vit_config c;
    cr_assert_eq(vit_config_preset("vit_giant_patch14", &c), 0, "%s", er_msg());
    cr_expect(c.dim == 1536 && c.depth == 40 && c.heads == 24 && c.patch == 14 && c.swiglu == 1 && c.mlp_hidden == 4096,
              "vit_giant: %d/%d/%d patch %d swiglu %d hidden %d", c.dim, c.depth, c.heads, c.patch, c.swiglu, c.mlp_hidden);
}
