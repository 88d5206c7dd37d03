/* resnet_model.c — the ResNet family of the model registry: keys, create, files, the descriptor. */
#include "nn/models/resnet_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoints/params_st.h"
#include "nn/base/base.h"
#include "nn/ops.h"

static const char *const NAMES[] = {"resnet18", "resnet34", "resnet50", "resnet101", "resnet152"};

static void args_defaults(void *v) {
    resnet_args *a = v;
    memset(a, 0, sizeof *a);
    cfg_set_str(&a->arch, "resnet50");
    cfg_set_str(&a->layout, "nchw");
    a->img = 224;
    a->sync_bn = 1;
}

static const cfg_spec *keys(void *v, int *n) {
    resnet_args *a = v;
    static __thread cfg_spec s[8];
    int k = 0;
#define K(key, type, field, range, help) s[k++] = (cfg_spec){key, type, &a->field, help, range}
    K("model.arch", CFG_STR, arch, "resnet18|resnet34|resnet50|resnet101|resnet152", "resnet18 | resnet34 | resnet50 | resnet101 | resnet152 (torchvision v1.5)");
    K("model.img", CFG_INT, img, "[32, 4096]", "input image side");
    K("model.width", CFG_INT, width, "[0, 1024]", "stem width (0 = 64, torchvision's)");
    K("model.classes", CFG_INT, classes, "[0, 100000]", "fc outputs (0 = none; the descriptor never uses fc)");
    K("model.proj", CFG_INT, proj, "[0, 65536]", "PGCon projection width (0 = none; 128 in the paper): the descriptor becomes P(f(x))");
    K("model.jigsaw", CFG_INT, jigsaw, "[0, 64]", "PGCon jigsaw head over this many tiles (0 = none; 9 in the paper; needs model.proj)");
    K("model.sync_bn", CFG_BOOL, sync_bn, NULL, "under mpirun: batch statistics of the global batch (torch SyncBatchNorm; false = each rank's own)");
    K("model.layout", CFG_STR, layout, "nchw|nhwc", "activations' layout: nchw, or nhwc (channels-last, in the run's precision: bf16 activations under bf16; cuDNN's tensor-core layout on a GPU, the reference kernels on the CPU)");
#undef K
    *n = k;
    return s;
}

static void args_free(void *v) {
    resnet_args *a = v;
    free(a->arch);
    free(a->layout);
    a->arch = a->layout = NULL;
}

model *resnet_model_wrap(resnet *r, int img) {
    model *m = xcalloc(1, sizeof *m);
    m->arch = &resnet_arch;
    m->impl = r;
    m->params = &r->params;
    m->dim = r->proj_w ? r->cfg.proj_dim : r->features;
    m->img = img;
    m->device = r->conv1->device;
    return m;
}

/* model.layout's value (the key's range has checked it) */
static int layout_of(const char *s) { return s && !strcmp(s, "nhwc") ? RESNET_NHWC : RESNET_NCHW; }

static int accepts(const char *arch) {
    for (size_t i = 0; i < sizeof NAMES / sizeof *NAMES; i++)
        if (!strcmp(arch, NAMES[i])) return 1;
    return 0;
}

int resnet_args_config(const resnet_args *a, resnet_config *c) {
    if (resnet_config_preset(a->arch, c)) return ER_INPUT;
    if (a->width > 0) c->width = a->width;
    c->num_classes = a->classes;
    c->proj_dim = a->proj;
    c->jigsaw_tiles = a->jigsaw;
    c->sync_bn = a->sync_bn;
    c->layout = layout_of(a->layout);
    return ER_OK;
}

int resnet_trunk_new(const resnet_args *a, const char *init, const char *what, uint64_t seed, resnet **out,
                     model_input *in) {
    resnet_config c;
    int rc;
    *out = NULL;
    if (init && init[0]) { /* the file's trunk: its shapes decide the config */
        model *m;
        if ((rc = model_load(init, NULL, NULL, 0, &m))) return rc;
        if (m->arch != &resnet_arch) {
            rc = er_fail(ER_INPUT, "%s: %s is a %s model, not a ResNet", what, init, m->arch->name);
            model_free(m);
            return rc;
        }
        c = ((resnet *)m->impl)->cfg;
        if (m->has_input) *in = m->input;
        model_free(m);
    } else if ((rc = resnet_args_config(a, &c))) return rc;
    c.num_classes = 0; c.proj_dim = 0; c.jigsaw_tiles = 0;
    c.sync_bn = a->sync_bn; /* data parallel: the global batch's statistics */
    c.layout = layout_of(a->layout);
    if (!(*out = resnet_new(&c, seed))) return ER_INPUT;
    if (!init || !init[0]) return ER_OK;
    st_file f;
    if ((rc = st_open(init, &f))) return rc;
    rc = params_load_st(&(*out)->params, &f, "", 1);
    st_close(&f);
    return rc;
}

static int create(const void *v, uint64_t seed, model **out) {
    const resnet_args *a = v;
    resnet_config c;
    if (resnet_args_config(a, &c)) return ER_INPUT;
    resnet *r = resnet_new(&c, seed);
    if (!r) return ER_INPUT;
    *out = resnet_model_wrap(r, a->img);
    return ER_OK;
}

static int recognises(const st_file *f) {
    return st_find(f, "conv1.weight") && st_find(f, "bn1.running_var") && st_find(f, "layer1.0.conv1.weight");
}

/* The config a file's tensors describe (a preset's depth when the block counts are one, else 18 or
 * 50 for the block kind). */
static int config_from_file(const st_file *f, resnet_config *c) {
    const st_tensor *t = st_find(f, "conv1.weight"), *fc = st_find(f, "fc.weight");
    if (!t || t->ndim != 4) return er_fail(ER_INPUT, "%s: no 4-d conv1.weight", f->path);
    int bott = st_find(f, "layer1.0.conv3.weight") != NULL;
    *c = (resnet_config){.depth = bott ? 50 : 18, .width = (int)t->shape[0], .bn_momentum = 0.1f, .bn_eps = 1e-5f};
    if (fc && fc->ndim == 2) c->num_classes = (int)fc->shape[0];
    const st_tensor *p = st_find(f, "projection_original_features.weight"), *q = st_find(f, "connect_patches_feature.weight");
    if (p && p->ndim == 2) c->proj_dim = (int)p->shape[0];
    if (q && p && q->ndim == 2 && c->proj_dim > 0) c->jigsaw_tiles = (int)(q->shape[1] / c->proj_dim);
    char name[64];
    for (int s = 0; s < 4; s++) {
        for (c->blocks[s] = 0; c->blocks[s] < 64; c->blocks[s]++) {
            snprintf(name, sizeof name, "layer%d.%d.conv1.weight", s + 1, c->blocks[s]);
            if (!st_find(f, name)) break;
        }
        if (!c->blocks[s]) return er_fail(ER_INPUT, "%s: no layer%d.0.conv1.weight", f->path, s + 1);
    }
    for (size_t i = 0; i < sizeof NAMES / sizeof *NAMES; i++) {
        resnet_config p;
        resnet_config_preset(NAMES[i], &p);
        if (resnet_is_bottleneck(p.depth) == bott && !memcmp(p.blocks, c->blocks, sizeof p.blocks)) c->depth = p.depth;
    }
    return ER_OK;
}

static int load(const st_file *f, const char *arch, char **sets, int nsets, model **out) {
    resnet_config c;
    if (config_from_file(f, &c)) return ER_INPUT;
    if (arch) { /* --arch / endoret.arch: the block kind must agree with the tensors */
        resnet_config p;
        if (resnet_config_preset(arch, &p)) return ER_INPUT;
        if (resnet_is_bottleneck(p.depth) != resnet_is_bottleneck(c.depth))
            return er_fail(ER_INPUT, "%s: %s blocks, but %s has %s blocks", f->path,
                           resnet_is_bottleneck(c.depth) ? "bottleneck" : "basic", arch,
                           resnet_is_bottleneck(p.depth) ? "bottleneck" : "basic");
    }
    int img = 224, img_set = 0;
    char *layout = NULL;
    cfg_spec k[2] = {{"model.img", CFG_INT, &img, "", "[32, 4096]"}, {"model.layout", CFG_STR, &layout, "", "nchw|nhwc"}};
    for (int i = 0; i < nsets; i++) {
        if (strncmp(sets[i], "model.img=", 10) && strncmp(sets[i], "model.layout=", 13)) {
            free(layout);
            return er_fail(ER_INPUT, "%s: '%s': a ResNet file fixes everything but model.img and model.layout", f->path,
                           sets[i]);
        }
        img_set |= !strncmp(sets[i], "model.img=", 10);
        if (cfg_set(sets[i], f->path, k, 2)) {
            free(layout);
            return ER_INPUT;
        }
    }
    c.layout = layout_of(layout); /* a run's choice: not in the file */
    free(layout);
    const char *meta_img = st_meta(f, "endoret.resnet.img");
    if (meta_img && !img_set) img = atoi(meta_img);
    resnet *r = resnet_new(&c, 0);
    if (!r) return ER_INPUT;
    if (params_load_st(&r->params, f, "", 1)) {
        resnet_free(r);
        return ER_INPUT;
    }
    *out = resnet_model_wrap(r, img);
    return ER_OK;
}

static tensor *descriptor(model *m, const nn_ctx *ctx, const float *images, int B) {
    tensor *x = tensor_upload(m->device, 4, SHAPE(B, 3, m->img, m->img), images);
    resnet *r = m->impl;
    return op_l2_normalize(r->proj_w ? resnet_project(r, ctx, x) : resnet_features(r, ctx, x), -1, 1e-12f);
}

static int set_img(model *m, int img) {
    if (img < 32) return er_fail(ER_INPUT, "resnet: image side %d: need >= 32", img);
    m->img = img;
    return ER_OK;
}

static int out_size(int in, int k, int s, int p) { return (in + 2 * p - k) / s + 1; }

/* The convolutions' multiply-adds along the network at m->img (BN, pooling and fc left out). */
static double forward_flops(const model *m, int B) {
    const resnet *r = m->impl;
    int side = out_size(m->img, 7, 2, 3);
    double f = 2.0 * side * side * r->cfg.width * 3 * 49;
    side = out_size(side, 3, 2, 1);
    for (int i = 0; i < r->nblocks; i++) {
        const resnet_block *b = &r->blocks[i];
        for (int k = 0; k < (b->bottleneck ? 3 : 2); k++) {
            const tensor *w = b->conv[k];
            int kk = (int)w->shape[2], stride = kk == 3 && (b->bottleneck ? k == 1 : k == 0) ? b->stride : 1;
            side = out_size(side, kk, stride, kk / 2);
            f += 2.0 * side * side * (double)tensor_numel(w);
        }
        if (b->down) f += 2.0 * side * side * (double)tensor_numel(b->down);
    }
    return f * B;
}

static void describe(const model *m, char *buf, size_t n) {
    const resnet_config *c = &((const resnet *)m->impl)->cfg;
    int k = snprintf(buf, n, "resnet%d (%s blocks %d/%d/%d/%d) width %d img %d: %s", c->depth,
                     resnet_is_bottleneck(c->depth) ? "bottleneck" : "basic", c->blocks[0], c->blocks[1], c->blocks[2],
                     c->blocks[3], c->width, m->img, m->arch->what);
    if (c->proj_dim > 0 && k > 0 && (size_t)k < n)
        snprintf(buf + k, n - k, "; PGCon projection %d-d%s", c->proj_dim, c->jigsaw_tiles ? " + jigsaw head" : "");
}

static void add_meta(const model *m, st_writer *w) {
    const resnet_config *c = &((const resnet *)m->impl)->cfg;
    char name[32], img[32]; /* st_add_meta copies */
    snprintf(name, sizeof name, "resnet%d", c->depth);
    snprintf(img, sizeof img, "%d", m->img);
    st_add_meta(w, "endoret.arch", accepts(name) ? name : (resnet_is_bottleneck(c->depth) ? "resnet50" : "resnet18"));
    st_add_meta(w, "endoret.resnet.img", img);
}

static void destroy(model *m) { resnet_free(m->impl); }

const model_arch resnet_arch = {
    .name = "resnet",
    .variants = "resnet18 | resnet34 | resnet50 | resnet101 | resnet152",
    .help = "ResNet (torchvision v1.5 names; torchvision state dicts load)",
    .what = "L2-normalised pooled features",
    .accepts = accepts,
    .args_size = sizeof(resnet_args),
    .args_defaults = args_defaults,
    .keys = keys,
    .args_free = args_free,
    .create = create,
    .recognises = recognises,
    .load = load,
    .descriptor = descriptor,
    .set_img = set_img,
    .forward_flops = forward_flops,
    .describe = describe,
    .add_meta = add_meta,
    .destroy = destroy,
};
