/* ViT: a timm-layout file (written by an independent torch implementation, make_vit_refs.py) loads
 * by name and gives torch's [CLS] output; our own save/load round trip gives the same bits; the
 * pos-embed resamples bicubically like torch; backward reaches every trainable parameter. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/arena.h"
#include "nn/autograd.h"
#include "nn/context.h"
#include "nn/precision.h"
#include "nn/base/base.h"
#include "nn/ops.h"
#include "checkpoints/params_st.h"
#include "nn/models/pos_interp.h"
#include "nn/models/vit_io.h"
#include "tests/nn/models/vit_refs.h"
#include "tests/test_util.h"

#define REF_FILE "tests/nn/models/vit_tiny_timm.safetensors"

static vit *load_ref(void) {
    st_file f;
    cr_assert_eq(st_open(REF_FILE, &f), 0, "%s", er_msg());
    vit_config c;
    cr_assert_eq(vit_config_from_st(&f, "", &c), 0, "%s", er_msg());
    cr_assert_eq(c.dim, VREF_D);
    cr_assert_eq(c.depth, VREF_DEPTH);
    cr_assert_eq(c.patch, VREF_P);
    cr_assert_eq(c.img, VREF_IMG);
    cr_assert(c.layerscale > 0);
    cr_assert_eq(c.pos_prefix, 1);
    cr_assert_eq(c.heads, 1, "heads = dim/64 by timm convention when the file does not say");
    vit *v = vit_load(&f, "");
    cr_assert(v, "%s", er_msg());
    v->cfg.heads = VREF_HEADS; /* this test model uses 4 heads of 8 */
    st_close(&f);
    return v;
}

static void cls_of(vit *v, const float *x, int B, float *out) {
    NO_GRAD {
        tensor *c = vit_cls(v, &NN_EVAL, x, B);
        cr_assert(c, "%s", er_msg());
        tensor_to_host(c, out);
    }
    nn_step_end();
}

Test(endofinder_vit, timm_file_matches_torch) {
    vit *v = load_ref();
    float out[2 * 32];
    cls_of(v, VREF_X, 2, out);
    for (int i = 0; i < 2 * VREF_D; i++)
        cr_assert(fabsf(out[i] - VREF_CLS[i]) < 2e-4f, "cls[%d] %g vs torch %g", i, out[i], VREF_CLS[i]);
    vit_free(v);
}

Test(endofinder_vit, save_load_round_trip_is_exact) {
    vit *v = load_ref();
    float a[2 * 32], b[2 * 32];
    cls_of(v, VREF_X, 2, a);
    const char *d = test_tmpdir();
    char *p = path_join(d, "ours.safetensors");
    st_writer *w = st_writer_new();
    params_add_st(&v->params, w, "");
    vit_config_add_meta(&v->cfg, w);
    cr_assert_eq(st_write(w, p), 0, "%s", er_msg());
    st_writer_free(w);
    st_file f;
    cr_assert_eq(st_open(p, &f), 0);
    vit *u = vit_load(&f, "");
    cr_assert(u, "%s", er_msg());
    cr_assert_eq(u->cfg.heads, VREF_HEADS, "heads come back from our metadata");
    st_close(&f);
    cls_of(u, VREF_X, 2, b);
    cr_assert(memcmp(a, b, sizeof a) == 0, "round trip changes the embedding");
    vit_free(u);
    vit_free(v);
    free(p);
}

Test(endofinder_vit, pos_embed_bicubic_resample) {
    vit *v = load_ref();
    /* a file with timm's names resizes with timm's rule (antialiased, nn/models/pos_interp.h); the
     * reference was resampled as MAE's interpolate_pos_embed does, so ask for that rule */
    cr_assert_eq(v->cfg.pos_interp, POS_INTERP_BICUBIC_AA, "timm layout: timm's resample_abs_pos_embed rule");
    v->cfg.pos_interp = POS_INTERP_BICUBIC;
    cr_assert_eq(vit_set_img(v, 24), 0, "%s", er_msg());
    cr_assert_eq(v->L, 36);
    float *pe = malloc(sizeof(float) * 37 * VREF_D);
    tensor_to_host(v->pos_embed, pe);
    for (int i = 0; i < 36 * VREF_D; i++)
        cr_assert(fabsf(pe[VREF_D + i] - VREF_POS6[i]) < 1e-5f, "pos[%d] %g vs torch %g", i, pe[VREF_D + i], VREF_POS6[i]);
    float out[32];
    cls_of(v, VREF_X24, 1, out);
    for (int i = 0; i < VREF_D; i++) cr_assert(fabsf(out[i] - VREF_CLS24[i]) < 2e-4f, "cls24[%d]", i);
    free(pe);
    vit_free(v);
}

Test(endofinder_vit, presets_and_bad_configs) {
    vit_config c;
    cr_assert_eq(vit_config_preset("vit_large", &c), 0);
    cr_assert_eq(c.dim, 1024); cr_assert_eq(c.depth, 24); cr_assert_eq(c.heads, 16); cr_assert_eq(c.patch, 16);
    cr_assert_eq(vit_config_preset("vit_small_patch14", &c), 0);
    cr_assert_eq(c.dim, 384); cr_assert_eq(c.patch, 14);
    cr_assert_eq(vit_config_preset("vit_huge", &c), ER_INPUT);
    vit_config_preset("vit_tiny", &c);
    c.img = 100;
    cr_assert_eq(vit_config_check(&c), ER_INPUT);
    cr_assert(strstr(er_msg(), "multiple of model.patch"));
    /* timm parameter names of a fresh model */
    vit_config_preset("vit_tiny", &c);
    c.img = 32; c.depth = 1; c.registers = 2; c.pos_prefix = 0; c.layerscale = 1e-5;
    vit *v = vit_new(&c, 1);
    const char *names[] = {"cls_token", "reg_token", "pos_embed", "patch_embed.proj.weight", "patch_embed.proj.bias",
                           "blocks.0.norm1.weight", "blocks.0.attn.qkv.weight", "blocks.0.attn.qkv.bias",
                           "blocks.0.attn.proj.weight", "blocks.0.ls1.gamma", "blocks.0.norm2.bias",
                           "blocks.0.mlp.fc1.weight", "blocks.0.mlp.fc2.bias", "blocks.0.ls2.gamma", "norm.weight", "norm.bias"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) cr_assert(params_find(&v->params, names[i]), "%s", names[i]);
    tensor *pe = params_find(&v->params, "pos_embed");
    cr_assert_eq(pe->shape[1], 4, "no_embed_class layout: patches only");
    cr_assert(!(pe->flags & T_REQUIRES_GRAD), "fixed sin-cos is frozen");
    vit_free(v);
}

Test(endofinder_vit, backward_reaches_every_trainable_parameter) {
    vit_config c;
    vit_config_preset("vit_tiny", &c);
    c.img = 16; c.patch = 8; c.dim = 16; c.heads = 2; c.depth = 2; c.registers = 1; c.pos_prefix = 1;
    c.layerscale = 0.1; c.pos_fixed = 0;
    vit *v = vit_new(&c, 5);
    cr_assert(v);
    float x[2 * 3 * 16 * 16];
    for (int i = 0; i < 2 * 3 * 256; i++) x[i] = sinf(0.37f * i);
    int32_t keep[2 * 2] = {3, 1, 0, 2};
    tensor *out = vit_forward(v, &NN_EVAL, x, 2, keep, 2);
    cr_assert(out, "%s", er_msg());
    cr_assert_eq(out->shape[1], 1 + 1 + 2);
    tensor *loss = op_sum_all(op_mul(out, out));
    cr_assert_eq(backward(loss), 0, "%s", er_msg());
    for (int i = 0; i < v->params.n; i++) {
        tensor *p = v->params.t[i];
        if (!(p->flags & T_REQUIRES_GRAD)) continue;
        float *g = malloc(sizeof(float) * tensor_numel(p));
        tensor_to_host(p->grad, g);
        double s = 0;
        for (int64_t j = 0; j < tensor_numel(p); j++) s += fabs(g[j]);
        cr_assert(s > 0 && isfinite(s), "no gradient reached %s", p->name);
        free(g);
    }
    nn_step_end();
    vit_free(v);
}

/* Without grad, each block's intermediates are released once its output is copied out
 * (vit_blocks_forward): the arena after a 1-block and a 6-block forward holds the same bytes, where
 * keeping them all grew by 5 blocks' worth; and the values equal a forward with the tape on (where
 * everything is kept), bit for bit, in fp32 and in bf16. */
static size_t no_grad_forward_bytes(int depth, int prec, float *out) {
    vit_config c;
    vit_config_preset("vit_tiny", &c);
    c.img = 32; c.patch = 8; c.dim = 32; c.heads = 2; c.depth = depth;
    vit *v = vit_new(&c, 5);
    cr_assert(v);
    float x[2 * 3 * 32 * 32];
    for (int i = 0; i < 2 * 3 * 32 * 32; i++) x[i] = sinf(0.37f * i);
    nn_step_end();
    const nn_ctx ctx = nn_ctx_eval(prec);
    size_t used;
    float ref[2 * 17 * 32];
    tensor *o = vit_forward(v, &ctx, x, 2, NULL, 0); /* the tape on: the blocks' activations kept */
    cr_assert(o, "%s", er_msg());
    tensor_to_host(o, ref);
    nn_step_end();
    NO_GRAD {
        o = vit_forward(v, &ctx, x, 2, NULL, 0);
        cr_assert(o, "%s", er_msg());
        used = arena_used(arena_default(DEV_CPU));
        tensor_to_host(o, out);
    }
    nn_step_end();
    for (int i = 0; i < 2 * 17 * 32; i++)
        cr_assert(out[i] == ref[i], "depth %d: no-grad output [%d] %.9g, with the tape %.9g", depth, i, out[i], ref[i]);
    vit_free(v);
    return used;
}

Test(endofinder_vit, no_grad_forward_holds_one_block) {
    for (int prec = ER_PREC_FP32; prec <= ER_PREC_BF16; prec++) {
        float o1[2 * 17 * 32], o6[2 * 17 * 32];
        size_t one = no_grad_forward_bytes(1, prec, o1), six = no_grad_forward_bytes(6, prec, o6);
        cr_assert_eq(six, one, "precision %d: arena after a 6-block no-grad forward %zu bytes, after 1 block %zu", prec, six, one);
    }
}

/* `endoret embed` on the timm-layout file and on our own re-saved copy writes the same embeddings. */
int cmd_embed(int argc, char **argv);
#include "datasets/image.h"
#include "datasets/manifest.h"
#include "infer/retrieval/embeddings.h"

Test(endofinder_vit, embed_command_timm_file_equals_round_trip) {
    const char *d = test_tmpdir();
    /* two 16x16 images + a manifest */
    manifest m;
    manifest_init(&m, d);
    for (int i = 0; i < 2; i++) {
        uint8_t px[16 * 16 * 3];
        for (int k = 0; k < 16 * 16 * 3; k++) px[k] = (uint8_t)((k * (7 + i * 5)) % 251);
        char name[32], *p;
        snprintf(name, sizeof name, "im%d.png", i);
        p = path_join(d, name);
        cr_assert_eq(png_save_u8(p, px, 3, 16, 16), 0, "%s", er_msg());
        free(p);
        manifest_row r = {.path = name, .scene = i ? "b" : "a", .view = "0", .label = "polyp"};
        manifest_add(&m, &r);
    }
    char *man = path_join(d, "m.csv");
    cr_assert_eq(manifest_save(man, &m), 0);
    manifest_free(&m);
    /* our copy of the timm file */
    vit *v = load_ref();
    char *ours = path_join(d, "ours.safetensors");
    st_writer *w = st_writer_new();
    params_add_st(&v->params, w, "");
    vit_config_add_meta(&v->cfg, w);
    cr_assert_eq(st_write(w, ours), 0);
    st_writer_free(w);
    vit_free(v);
    char *e1 = path_join(d, "e1.safetensors"), *e2 = path_join(d, "e2.safetensors");
    char *a1[] = {"embed", "--model", REF_FILE, "--heads", "4", "--manifest", man, "--out", e1, NULL};
    char *a2[] = {"embed", "--model", ours, "--manifest", man, "--out", e2, NULL};
    cr_assert_eq(cmd_embed(9, a1), 0, "%s", er_msg());
    cr_assert_eq(cmd_embed(7, a2), 0, "%s", er_msg());
    emb_set x, y;
    cr_assert_eq(emb_load(e1, &x), 0);
    cr_assert_eq(emb_load(e2, &y), 0);
    cr_assert_eq(x.n, 2); cr_assert_eq(x.dim, VREF_D); cr_assert_eq(y.dim, VREF_D);
    cr_assert(memcmp(x.x, y.x, sizeof(float) * 2 * VREF_D) == 0, "timm file and round trip embed differently");
    cr_assert(x.scene && x.scene[0] == 0 && x.scene[1] == 1);
    /* --no-prepack (weights read as they are): the same bits */
    char *e3 = path_join(d, "e3.safetensors");
    char *a3[] = {"embed", "--model", ours, "--manifest", man, "--out", e3, "--no-prepack", NULL};
    cr_assert_eq(cmd_embed(8, a3), 0, "%s", er_msg());
    emb_set z;
    cr_assert_eq(emb_load(e3, &z), 0);
    cr_assert(memcmp(z.x, y.x, sizeof(float) * 2 * VREF_D) == 0, "--no-prepack embeds differently");
    emb_free(&z);
    free(e3);
    double n0 = 0;
    for (int k = 0; k < VREF_D; k++) n0 += (double)x.x[k] * x.x[k];
    cr_assert(fabs(n0 - 1) < 1e-5, "descriptors are L2-normalised");
    emb_free(&x); emb_free(&y);
    free(man); free(ours); free(e1); free(e2);
}
