/* scene_model.c — the EndoFinder-Scene family of the model registry (scene_model.h). */
#include "nn/models/scene_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoints/params_st.h"
#include "nn/base/base.h"
#include "nn/models/vit_io.h"
#include "nn/models/vit_model.h"
#include "nn/models/vit_memory.h"
#include "nn/ops.h"

#define SCENE_ARCH "endofinder_scene"

typedef struct {
    vit *enc;             /* frozen image encoder (owns its tensors) */
    scene_net net;
    param_list params;    /* encoder + scene encoder: what model_save writes */
    param_list all;       /* params + decoder */
} scene_impl;

/* ---------------------------------------------------------------- keys */

void scene_args_defaults(scene_args *a) {
    memset(a, 0, sizeof *a);
    cfg_set_str(&a->arch, SCENE_ARCH);
    cfg_set_str(&a->base, "token");
    a->dec_dim = 512; a->dec_depth = 2; a->dec_heads = 16;
}

const cfg_spec *scene_args_keys(scene_args *a, int *n) {
    static __thread cfg_spec s[12];
    int k = 0;
#define K(key, type, field, range, help) s[k++] = (cfg_spec){key, type, &a->field, help, range}
    K("model.arch", CFG_STR, arch, SCENE_ARCH, "endofinder_scene (a frozen ViT + the scene encoder)");
    K("scene.image_encoder", CFG_STR, image_encoder, "path", "the frozen ViT image encoder (a weights or checkpoint file)");
    K("model.scene_heads", CFG_INT, heads, "[0, 256]", "scene encoder heads (0 = the image encoder's)");
    K("model.scene_head_dim", CFG_INT, head_dim, "[0, 4096]", "scene encoder head width (0 = width / heads)");
    K("model.scene_mlp", CFG_INT, mlp, "[0, 65536]", "scene encoder MLP width (0 = 2 x width)");
    K("model.decoder_dim", CFG_INT, dec_dim, "[4, 8192]", "scene-aware decoder width (512)");
    K("model.decoder_depth", CFG_INT, dec_depth, "[0, 64]", "cross-attention layers (2)");
    K("model.decoder_heads", CFG_INT, dec_heads, "[1, 256]", "decoder heads (16)");
    K("model.decoder_head_dim", CFG_INT, dec_head_dim, "[0, 4096]", "decoder head width (0 = image width / 12, as the reference)");
    K("model.decoder_mlp", CFG_INT, dec_mlp, "[0, 65536]", "decoder MLP width (0 = 2 x image width)");
    K("model.scene_base", CFG_STR, base, "token|mean",
      "the scene descriptor: token = the scene token's output (the reference); mean = the views' mean descriptor "
      "plus a learned gate (from 0) times the token's output, so training starts from averaging");
#undef K
    *n = k;
    return s;
}

void scene_args_free(scene_args *a) {
    free(a->arch);
    free(a->image_encoder);
    free(a->base);
    a->arch = a->image_encoder = a->base = NULL;
}

static void config_from_args(const scene_args *a, const vit_config *v, scene_config *c) {
    int heads = a->heads > 0 ? a->heads : v->heads;
    scene_config_default(c, v->dim, heads, v->img, v->patch);
    c->in_chans = v->in_chans;
    if (a->head_dim > 0) c->head_dim = a->head_dim;
    if (a->mlp > 0) c->mlp = a->mlp;
    c->dec_dim = a->dec_dim; c->dec_depth = a->dec_depth; c->dec_heads = a->dec_heads;
    if (a->dec_head_dim > 0) c->dec_head_dim = a->dec_head_dim;
    if (a->dec_mlp > 0) c->dec_mlp = a->dec_mlp;
    c->base_mean = a->base && !strcmp(a->base, "mean");
}

/* ---------------------------------------------------------------- the model */

static model *wrap(scene_impl *s) {
    model *m = xcalloc(1, sizeof *m);
    m->arch = &scene_arch;
    m->impl = s;
    m->params = &s->params;
    m->dim = s->enc->cfg.dim;
    m->img = s->enc->cfg.img;
    m->device = s->enc->patch_w->device;
    return m;
}

static void impl_free(scene_impl *s) {
    if (!s) return;
    int nenc = s->enc ? s->enc->params.n : 0;
    for (int i = nenc; i < s->all.n; i++) tensor_free(s->all.t[i]);
    free(s->all.t);
    free(s->params.t);
    scene_net_free(&s->net);
    vit_free(s->enc);
    free(s);
}

/* enc's tensors frozen and first in both lists, then the scene net's (the decoder only in `all`). */
static int impl_build(scene_impl *s, const scene_config *c, int with_decoder, uint64_t seed) {
    for (int i = 0; i < s->enc->params.n; i++) {
        tensor_set_requires_grad(s->enc->params.t[i], 0);
        params_add(&s->all, s->enc->params.t[i]);
    }
    int rc = scene_net_init(&s->net, c, with_decoder, seed, &s->all);
    if (rc) return rc;
    int nenc = s->enc->params.n, nscene = s->net.n_encoder_params; /* the decoder's come after */
    for (int i = 0; i < nenc + nscene; i++) params_add(&s->params, s->all.t[i]);
    return ER_OK;
}

int scene_model_new(const scene_args *a, uint64_t seed, int with_decoder, model **out) {
    *out = NULL;
    if (!a->image_encoder || !a->image_encoder[0])
        return er_fail(ER_INPUT, "scene.image_encoder is not set: the scene model is built on a trained ViT image "
                                 "encoder (e.g. --set scene.image_encoder=out/train_image/encoder.safetensors)");
    model *im;
    int rc = model_load(a->image_encoder, NULL, NULL, 0, &im);
    if (rc) { /* name the key: the path alone does not say which file of the run it was */
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", er_msg());
        return er_fail(rc, "scene.image_encoder: %s", msg);
    }
    vit *v = vit_model_take(im);
    if (!v) {
        char d[200];
        model_describe(im, d, sizeof d);
        model_free(im);
        return er_fail(ER_INPUT, "scene.image_encoder = %s: a ViT image encoder is needed, this file holds %s",
                       a->image_encoder, d);
    }
    scene_impl *s = xcalloc(1, sizeof *s);
    s->enc = v;
    scene_config c;
    config_from_args(a, &v->cfg, &c);
    if ((rc = impl_build(s, &c, with_decoder, seed))) {
        impl_free(s);
        return rc;
    }
    *out = wrap(s);
    return ER_OK;
}

vit *scene_model_vit(const model *m) { return m && m->arch == &scene_arch ? ((scene_impl *)m->impl)->enc : NULL; }
scene_net *scene_model_net(const model *m) { return m && m->arch == &scene_arch ? &((scene_impl *)m->impl)->net : NULL; }
param_list *scene_model_all_params(const model *m) {
    return m && m->arch == &scene_arch ? &((scene_impl *)m->impl)->all : NULL;
}

static int accepts(const char *arch) { return !strcmp(arch, SCENE_ARCH); }
static void args_defaults(void *a) { scene_args_defaults(a); }
static const cfg_spec *keys(void *a, int *n) { return scene_args_keys(a, n); }
static void args_free(void *a) { scene_args_free(a); }
static int create(const void *args, uint64_t seed, model **out) { return scene_model_new(args, seed, 0, out); }

static int recognises(const st_file *f) { return st_find(f, "scene_token") != NULL; }

static int meta_int(const st_file *f, const char *key, int dflt) {
    const char *v = st_meta(f, key);
    return v ? atoi(v) : dflt;
}

/* Our file (endoret.scene.* metadata) or the reference's state dict (sizes from the shapes). */
static int load(const st_file *f, const char *arch, char **sets, int nsets, model **out) {
    (void)arch;
    if (nsets > 0) return er_fail(ER_INPUT, "%s: '%s': a scene model file fixes its sizes", f->path, sets[0]);
    vit *v = vit_load(f, "");
    if (!v) return ER_INPUT;
    scene_config c;
    scene_config_default(&c, v->cfg.dim, v->cfg.heads, v->cfg.img, v->cfg.patch);
    c.in_chans = v->cfg.in_chans;
    const st_tensor *qkv = st_find(f, "scene_transform.layers.0.0.fn.to_qkv.weight");
    const st_tensor *fc1 = st_find(f, "scene_transform.layers.0.1.fn.net.0.weight");
    if (!qkv || !fc1 || qkv->ndim != 2 || fc1->ndim != 2) {
        vit_free(v);
        return er_fail(ER_INPUT, "%s: scene encoder tensors missing (scene_transform.layers.0.0.fn.to_qkv.weight, "
                                 "scene_transform.layers.0.1.fn.net.0.weight)", f->path);
    }
    c.heads = meta_int(f, "endoret.scene.heads", c.heads);
    c.head_dim = (int)(qkv->shape[0] / 3 / c.heads);
    c.mlp = (int)fc1->shape[0];
    const char *eps = st_meta(f, "endoret.scene.eps");
    if (eps) c.eps = atof(eps);
    c.base_mean = st_find(f, "scene_mean_gate") != NULL;
    if (qkv->shape[0] % (3 * c.heads)) {
        vit_free(v);
        return er_fail(ER_INPUT, "%s: to_qkv has %lld rows, not 3 x %d heads", f->path, (long long)qkv->shape[0], c.heads);
    }
    scene_impl *s = xcalloc(1, sizeof *s);
    s->enc = v;
    int rc = impl_build(s, &c, 0, 0);
    if (!rc) rc = params_load_st(&s->params, f, "", 1);
    if (rc) {
        impl_free(s);
        return rc;
    }
    *out = wrap(s);
    return ER_OK;
}

static tensor *descriptor(model *m, const nn_ctx *ctx, const float *images, int B) {
    return op_l2_normalize(vit_cls(((scene_impl *)m->impl)->enc, ctx, images, B), -1, 1e-12f);
}

static tensor *scene_descriptor(model *m, const nn_ctx *ctx, const float *images, int V) {
    scene_impl *s = m->impl;
    tensor *cls = vit_cls(s->enc, ctx, images, V);                      /* [V, dim] */
    return scene_net_encode(&s->net, ctx, op_reshape(cls, 3, SHAPE(1, V, m->dim)));
}

static double forward_bytes(const model *m, int B) {
    const vit *v = ((const scene_impl *)m->impl)->enc;
    return vit_forward_bytes(&v->cfg, B, 1 + v->cfg.registers + v->L, m->img);
}

static double forward_flops(const model *m, int B) {
    const vit *v = ((const scene_impl *)m->impl)->enc;
    return vit_forward_flops(&v->cfg, B, 1 + v->cfg.registers + v->L);
}

static void describe(const model *m, char *buf, size_t n) {
    const scene_impl *s = m->impl;
    const vit_config *c = &s->enc->cfg;
    snprintf(buf, n, "endofinder scene on vit dim %d depth %d patch %d img %d (scene encoder %d heads x %d, mlp %d%s)",
             c->dim, c->depth, c->patch, c->img, s->net.cfg.heads, s->net.cfg.head_dim, s->net.cfg.mlp,
             s->net.cfg.base_mean ? "; base: mean of the views" : "");
}

static void add_meta(const model *m, st_writer *w) {
    const scene_impl *s = m->impl;
    vit_config_add_meta(&s->enc->cfg, w);
    st_add_meta(w, "endoret.arch", SCENE_ARCH);
    char buf[64];
    snprintf(buf, sizeof buf, "%d", s->net.cfg.heads);
    st_add_meta(w, "endoret.scene.heads", buf);
    snprintf(buf, sizeof buf, "%.17g", s->net.cfg.eps);
    st_add_meta(w, "endoret.scene.eps", buf);
}

static void destroy(model *m) { impl_free(m->impl); }

const model_arch scene_arch = {
    .name = "scene",
    .variants = SCENE_ARCH,
    .help = "EndoFinder-Scene: frozen ViT + scene encoder fusing a case's views",
    .what = "L2-normalised [CLS] per view; scene token per case (embed --scene)",
    .accepts = accepts,
    .args_size = sizeof(scene_args),
    .args_defaults = args_defaults,
    .keys = keys,
    .args_free = args_free,
    .create = create,
    .recognises = recognises,
    .load = load,
    .descriptor = descriptor,
    .scene_descriptor = scene_descriptor,
    .set_img = NULL,
    .forward_flops = forward_flops,
    .forward_bytes = forward_bytes,
    .describe = describe,
    .add_meta = add_meta,
    .destroy = destroy,
};
