/* objective_image.c — MAE + SSCD image objective (EndoFinder section 3.3) for the training loop. */
#include "train/objective_image.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/augment.h"
#include "datasets/image.h"
#include "datasets/manifest.h"
#include "infer/retrieval/embeddings.h"
#include "infer/eval/multiview.h"
#include "nn/autograd.h"
#include "nn/base/base.h"
#include "nn/models/mae.h"
#include "nn/ops.h"
#include "nn/precision.h"
#include "nn/base/rng.h"
#include "nn/losses/sscd.h"

/* ---------------------------------------------------------------- config */

void image_cfg_defaults(image_cfg *c) {
    memset(c, 0, sizeof *c);
    cfg_set_str(&c->arch, "vit_large");
    c->img = 224; c->patch = 16;
    c->head_dim = 512;
    c->dec_dim = 512; c->dec_depth = 8; c->dec_heads = 16;
    c->mask_ratio = 0.5;
    cfg_set_str(&c->masking, "guided");
    c->w_mae = 0.5; c->w_con = 1.0; c->tau = 0.05; c->entropy_weight = 5; c->mix_prob = 0.05;
    cfg_set_str(&c->split, "train");
    cfg_set_str(&c->aug, "advanced");
    cfg_set_str(&c->eval_split, "");
    c->epochs = 100; c->batch = 32; c->accum = 1; c->seed = 0;
    c->lr = 1.25e-4; c->min_lr = 0; c->weight_decay = 0.05; c->beta1 = 0.9; c->beta2 = 0.95;
    c->warmup_epochs = 5; c->warmup_steps = -1; c->clip = 0;
    cfg_set_str(&c->out, "out/train_image");
    cfg_set_str(&c->device, "cpu");
    cfg_set_str(&c->precision, "fp32");
    c->log_every = 10; c->ckpt_every = 500; c->eval_every = 0;
}

const cfg_spec *image_cfg_specs(image_cfg *c, int *n) {
    static __thread cfg_spec s[64];
    int k = 0;
#define K(key, type, field, help) s[k++] = (cfg_spec){key, type, &c->field, help}
    K("model.arch", CFG_STR, arch, "vit_tiny | vit_small | vit_base | vit_large (+ _patch14/_patch16)");
    K("model.img", CFG_INT, img, "training image side");
    K("model.patch", CFG_INT, patch, "patch size");
    K("model.dim", CFG_INT, dim, "override the width (0 = the arch's)");
    K("model.depth", CFG_INT, depth, "override the depth (0 = the arch's)");
    K("model.heads", CFG_INT, heads, "override the heads (0 = the arch's)");
    K("model.registers", CFG_INT, registers, "register tokens");
    K("model.layerscale", CFG_DOUBLE, layerscale, "LayerScale init (0 = off)");
    K("model.pos_learned", CFG_BOOL, pos_learned, "learned pos-embed instead of fixed 2-D sin-cos");
    K("model.head_dim", CFG_INT, head_dim, "SSCD projection width (0 = contrast the [CLS] itself)");
    K("decoder.dim", CFG_INT, dec_dim, "MAE decoder width");
    K("decoder.depth", CFG_INT, dec_depth, "MAE decoder blocks");
    K("decoder.heads", CFG_INT, dec_heads, "MAE decoder heads");
    K("mae.mask_ratio", CFG_DOUBLE, mask_ratio, "share of patches removed (0 = no masking)");
    K("mae.masking", CFG_STR, masking, "guided (lesion patches kept first) | random");
    K("mae.norm_pix", CFG_BOOL, norm_pix, "per-patch normalised pixel target");
    K("loss.mae_weight", CFG_DOUBLE, w_mae, "weight of the reconstruction MSE (0 = no decoder)");
    K("loss.con_weight", CFG_DOUBLE, w_con, "weight of InfoNCE + entropy (0 = no contrastive branch)");
    K("loss.tau", CFG_DOUBLE, tau, "InfoNCE temperature");
    K("loss.entropy_weight", CFG_DOUBLE, entropy_weight, "KoLeo entropy weight (EF 5, SSCD 30)");
    K("aug.mix_prob", CFG_DOUBLE, mix_prob, "MixUp/CutMix probability per view");
    K("aug.preset", CFG_STR, aug, "advanced (SSCD) | mae (crop + flip)");
    K("data.manifest", CFG_STR, manifest, "training manifest (CSV)");
    K("data.split", CFG_STR, split, "rows of this split train ('' = all rows)");
    K("data.cache_side", CFG_INT, cache_side, "short side of the in-memory image cache (0 = img*8/7)");
    K("eval.manifest", CFG_STR, eval_manifest, "held-out manifest for periodic re-ID eval");
    K("eval.split", CFG_STR, eval_split, "split of eval.manifest ('' = all rows)");
    K("eval.every", CFG_INT, eval_every, "evaluate every N steps (0 = never)");
    K("train.epochs", CFG_INT, epochs, "epochs (used when train.steps = 0)");
    K("train.steps", CFG_INT, steps, "optimizer steps (0 = from epochs)");
    K("train.batch", CFG_INT, batch, "images per micro-batch (2 views each)");
    K("train.accum", CFG_INT, accum, "micro-batches per update (effective batch = batch * accum)");
    K("train.lr", CFG_DOUBLE, lr, "peak learning rate (used when train.blr = 0)");
    K("train.blr", CFG_DOUBLE, blr, "base lr: lr = blr * effective batch / 256 (MAE rule)");
    K("train.min_lr", CFG_DOUBLE, min_lr, "cosine floor");
    K("train.weight_decay", CFG_DOUBLE, weight_decay, "AdamW decoupled weight decay");
    K("train.beta1", CFG_DOUBLE, beta1, "AdamW beta1");
    K("train.beta2", CFG_DOUBLE, beta2, "AdamW beta2");
    K("train.warmup_epochs", CFG_DOUBLE, warmup_epochs, "linear warm-up (epochs)");
    K("train.warmup_steps", CFG_INT, warmup_steps, "linear warm-up (steps; -1 = from epochs)");
    K("train.clip", CFG_DOUBLE, clip, "max global gradient norm (0 = off)");
    K("train.seed", CFG_INT, seed, "seed of init, data order, augmentation and masking");
    K("train.threads", CFG_INT, threads, "OpenMP threads (0 = default)");
    K("train.device", CFG_STR, device, "cpu | cuda (--device)");
    K("train.precision", CFG_STR, precision, "fp32 | bf16: matmul inputs in bf16, fp32 accumulation and state (--precision)");
    K("out.dir", CFG_STR, out, "output folder (checkpoint, log, loss curve, encoder)");
    K("out.log_every", CFG_INT, log_every, "log/progress every N steps");
    K("out.ckpt_every", CFG_INT, ckpt_every, "checkpoint every N steps (and at the end)");
#undef K
    *n = k;
    return s;
}

void image_cfg_free(image_cfg *c) {
    int n;
    const cfg_spec *s = image_cfg_specs(c, &n);
    cfg_free_strings(s, n);
}

int image_cfg_vit(const image_cfg *c, vit_config *v) {
    if (vit_config_preset(c->arch, v)) return ER_INPUT;
    v->img = c->img;
    if (c->patch > 0) v->patch = c->patch;
    if (c->dim > 0) v->dim = c->dim;
    if (c->depth > 0) v->depth = c->depth;
    if (c->heads > 0) v->heads = c->heads;
    v->registers = c->registers;
    v->pos_prefix = 1;
    v->layerscale = c->layerscale;
    v->pos_fixed = !c->pos_learned;
    return vit_config_check(v);
}

/* ---------------------------------------------------------------- data */

typedef struct {
    int c, h, w;
    uint8_t *px; /* c*h*w, planes */
} u8img;

static void to_u8(const image *im, u8img *o) {
    o->c = im->c; o->h = im->h; o->w = im->w;
    size_t n = (size_t)im->c * im->h * im->w;
    o->px = xmalloc(n);
    for (size_t i = 0; i < n; i++) {
        float v = im->data[i] * 255.0f + 0.5f;
        o->px[i] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
    }
}

static void from_u8(const u8img *s, image *im) {
    image_ensure(im, s->c, s->h, s->w);
    size_t n = (size_t)s->c * s->h * s->w;
    for (size_t i = 0; i < n; i++) im->data[i] = s->px[i] * (1.0f / 255.0f);
}

struct image_objective {
    image_cfg cfg;
    vit_config vc;
    vit *enc;
    mae_decoder dec;
    sscd_head head;
    param_list all;       /* encoder + decoder + head (the training state) */
    int use_mae, use_con, K, guided, advanced;
    int device;           /* where parameters, activations and optimizer state live */
    int pinned;           /* x is page-locked host memory (CUDA): uploaded asynchronously */
    int n;                /* training images */
    u8img *imgs, *masks;  /* masks[i].px NULL when the row has none */
    int64_t perm_epoch;
    int *perm;
    int nthreads;
    aug_workspace *ws;
    image *src, *msrc;    /* per-thread decoded sources */
    /* per micro-batch host buffers */
    float *x, *mx, *scores, *mask, *lam;
    int32_t *shuffle, *restore, *keep;
    int *partner, *inst;
    uint8_t *has_mask, *match;
    /* held-out re-ID evaluation (eval.manifest): preprocessed images and their scene/view ids */
    int neval;
    float *eval_x;
    int64_t *eval_scene, *eval_view;
};

static int load_split(const char *path, const char *split, int side, u8img **imgs, u8img **masks, int *n) {
    manifest m;
    int rc = manifest_load(path, &m);
    if (rc) return rc;
    *imgs = xcalloc(m.n ? m.n : 1, sizeof(u8img));
    *masks = xcalloc(m.n ? m.n : 1, sizeof(u8img));
    int k = 0;
    image im = {0}, r = {0};
    for (int i = 0; i < m.n && rc == ER_OK; i++) {
        if (split && split[0] && (!m.rows[i].split || strcmp(m.rows[i].split, split))) continue;
        char *p = manifest_image_path(&m, i);
        rc = image_load(p, 3, &im);
        free(p);
        if (rc) break;
        /* cache with short side `side` (never upscaled) */
        int s = im.h < im.w ? im.h : im.w;
        int h = im.h, w = im.w;
        if (s > side) { h = (int)lround((double)im.h * side / s); w = (int)lround((double)im.w * side / s); }
        image_resize(&im, &r, h, w, RESIZE_BILINEAR);
        to_u8(&r, &(*imgs)[k]);
        char *mp = manifest_mask_path(&m, i);
        if (mp) {
            rc = image_load(mp, 1, &im);
            free(mp);
            if (rc) break;
            image_resize(&im, &r, h, w, RESIZE_NEAREST);
            to_u8(&r, &(*masks)[k]);
        }
        k++;
    }
    image_free(&im);
    image_free(&r);
    manifest_free(&m);
    *n = k;
    if (!rc && k == 0) rc = er_fail(ER_INPUT, "%s: no rows with split '%s'", path, split ? split : "");
    return rc;
}

static void free_cache(u8img *a, int n) {
    if (!a) return;
    for (int i = 0; i < n; i++) free(a[i].px);
    free(a);
}

/* The eval set: every row of eval.manifest (split eval.split) resized to img x img, normalised. */
static int load_eval(image_objective *o, const image_cfg *c) {
    manifest m;
    int rc = manifest_load(c->eval_manifest, &m);
    if (rc) return rc;
    int *sc, *vw, nsc, nvw;
    char **scn, **vwn;
    manifest_field_ids(&m, MF_SCENE, &sc, &scn, &nsc);
    manifest_field_ids(&m, MF_VIEW, &vw, &vwn, &nvw);
    int S = c->img;
    o->eval_x = xmalloc((size_t)(m.n ? m.n : 1) * 3 * S * S * sizeof(float));
    o->eval_scene = xmalloc((m.n ? m.n : 1) * sizeof(int64_t));
    o->eval_view = xmalloc((m.n ? m.n : 1) * sizeof(int64_t));
    image src = {0}, dst = {0};
    aug_workspace ws = {0};
    int k = 0;
    for (int i = 0; i < m.n && !rc; i++) {
        const char *sp = c->eval_split;
        if (sp && sp[0] && (!m.rows[i].split || strcmp(m.rows[i].split, sp))) continue;
        char *p = manifest_image_path(&m, i);
        rc = image_load(p, 3, &src);
        free(p);
        if (!rc) rc = aug_eval(&src, S, &ws, &dst);
        if (rc) break;
        memcpy(o->eval_x + (size_t)k * 3 * S * S, dst.data, (size_t)3 * S * S * sizeof(float));
        o->eval_scene[k] = sc[i];
        o->eval_view[k] = vw[i];
        k++;
    }
    o->neval = k;
    image_free(&src);
    image_free(&dst);
    aug_workspace_free(&ws);
    manifest_free_labels(sc, scn, nsc);
    manifest_free_labels(vw, vwn, nvw);
    manifest_free(&m);
    if (!rc && k == 0) rc = er_fail(ER_INPUT, "%s: no eval rows", c->eval_manifest);
    return rc;
}

int image_objective_new(const image_cfg *c, image_objective **out) {
    *out = NULL;
    int device, rc0;
    if ((rc0 = er_device_parse(c->device, &device))) return rc0;   /* before any work */
    if ((rc0 = er_set_precision(c->precision))) return rc0;
    if (!c->manifest) return er_fail(ER_INPUT, "data.manifest is not set");
    if (c->batch < 1) return er_fail(ER_INPUT, "train.batch must be >= 1");
    if (c->mask_ratio < 0 || c->mask_ratio >= 1) return er_fail(ER_INPUT, "mae.mask_ratio must be in [0, 1)");
    if (strcmp(c->masking, "guided") && strcmp(c->masking, "random"))
        return er_fail(ER_INPUT, "mae.masking must be 'guided' or 'random', got '%s'", c->masking);
    if (strcmp(c->aug, "advanced") && strcmp(c->aug, "mae"))
        return er_fail(ER_INPUT, "aug.preset must be 'advanced' or 'mae', got '%s'", c->aug);
    if (c->w_mae <= 0 && c->w_con <= 0) return er_fail(ER_INPUT, "both loss weights are 0: nothing to train");
    if (c->w_mae > 0 && c->mask_ratio <= 0) return er_fail(ER_INPUT, "MAE needs mae.mask_ratio > 0");
    if (c->tau <= 0) return er_fail(ER_INPUT, "loss.tau must be > 0");
    image_objective *o = xcalloc(1, sizeof *o);
    o->cfg = *c; /* strings stay owned by the caller's config */
    o->device = device;
    int rc = image_cfg_vit(c, &o->vc);
    if (rc) { free(o); return rc; }
    o->enc = vit_new_on(device, &o->vc, (uint64_t)c->seed);
    if (!o->enc) { free(o); return ER_INPUT; }
    for (int i = 0; i < o->enc->params.n; i++) params_add(&o->all, o->enc->params.t[i]);
    o->use_mae = c->w_mae > 0;
    o->use_con = c->w_con > 0;
    o->guided = !strcmp(c->masking, "guided");
    o->advanced = !strcmp(c->aug, "advanced");
    o->K = c->mask_ratio > 0 ? mae_len_keep(o->enc->L, c->mask_ratio) : o->enc->L;
    if (o->use_mae && (rc = mae_decoder_init_on(device, &o->dec, &o->vc, c->dec_dim, c->dec_depth, c->dec_heads,
                                                (uint64_t)c->seed + 1, &o->all))) goto fail;
    if (o->use_con && (rc = sscd_head_init_on(device, &o->head, o->vc.dim, c->head_dim, (uint64_t)c->seed + 2, &o->all)))
        goto fail;
    int side = c->cache_side > 0 ? c->cache_side : c->img * 8 / 7;
    rc = load_split(c->manifest, c->split, side, &o->imgs, &o->masks, &o->n);
    if (rc) goto fail;
    if (c->eval_manifest && c->eval_manifest[0] && (rc = load_eval(o, c))) goto fail;
    o->perm_epoch = -1;
    o->perm = xmalloc(o->n * sizeof(int));
    o->nthreads = omp_get_max_threads();
    o->ws = xcalloc(o->nthreads, sizeof(aug_workspace));
    o->src = xcalloc(o->nthreads, sizeof(image));
    o->msrc = xcalloc(o->nthreads, sizeof(image));
    int M = 2 * c->batch, L = o->enc->L, S = c->img;
    if (device != DEV_CPU) { /* page-locked: the per-step image upload is asynchronous */
        o->x = backend_get(device)->host_alloc((size_t)M * 3 * S * S * sizeof(float));
        o->pinned = o->x != NULL;
    }
    if (!o->x) o->x = xmalloc((size_t)M * 3 * S * S * sizeof(float));
    o->mx = xmalloc((size_t)M * S * S * sizeof(float));
    o->scores = xmalloc((size_t)M * L * sizeof(float));
    o->mask = xmalloc((size_t)M * L * sizeof(float));
    o->lam = xmalloc(M * sizeof(float));
    o->shuffle = xmalloc((size_t)M * L * sizeof(int32_t));
    o->restore = xmalloc((size_t)M * L * sizeof(int32_t));
    o->keep = xmalloc((size_t)M * L * sizeof(int32_t));
    o->partner = xmalloc(M * sizeof(int));
    o->inst = xmalloc(M * sizeof(int));
    o->has_mask = xmalloc(M);
    o->match = xmalloc((size_t)M * M);
    *out = o;
    return ER_OK;
fail:
    image_objective_free(o);
    return rc;
}

void image_objective_free(image_objective *o) {
    if (!o) return;
    /* the encoder owns its tensors; decoder/head tensors are only in `all` */
    for (int i = o->enc ? o->enc->params.n : 0; i < o->all.n; i++) tensor_free(o->all.t[i]);
    free(o->all.t);
    vit_free(o->enc);
    mae_decoder_free(&o->dec);
    free_cache(o->imgs, o->n);
    free_cache(o->masks, o->n);
    free(o->perm);
    for (int t = 0; o->ws && t < o->nthreads; t++) {
        aug_workspace_free(&o->ws[t]);
        image_free(&o->src[t]);
        image_free(&o->msrc[t]);
    }
    free(o->ws); free(o->src); free(o->msrc);
    if (o->pinned) { backend_get(o->device)->host_free(o->x); o->x = NULL; }
    free(o->x); free(o->mx); free(o->scores); free(o->mask); free(o->lam);
    free(o->shuffle); free(o->restore); free(o->keep); free(o->partner); free(o->inst);
    free(o->has_mask); free(o->match);
    free(o->eval_x); free(o->eval_scene); free(o->eval_view);
    free(o);
}

vit *image_objective_encoder(image_objective *o) { return o->enc; }
param_list *image_objective_params(image_objective *o) { return &o->all; }
int image_objective_images(const image_objective *o) { return o->n; }

/* Instance of the i-th image drawn since the start (epoch-wise reshuffled without replacement). */
static int instance_at(image_objective *o, int64_t i) {
    int64_t epoch = i / o->n;
    if (epoch != o->perm_epoch) {
        for (int k = 0; k < o->n; k++) o->perm[k] = k;
        rng_t r = rng_make((uint64_t)o->cfg.seed, rng_stream(RNG_SHUFFLE, (uint32_t)epoch, 0));
        rng_shuffle(&r, o->perm, o->n);
        o->perm_epoch = epoch;
    }
    return o->perm[i % o->n];
}

/* The M augmented views [M,3,S,S] as a per-step tensor on the model's device. */
static tensor *upload_views(image_objective *o, int M) {
    int S = o->cfg.img;
    tensor *t = tensor_empty(o->device, 4, SHAPE(M, 3, S, S));
    if (!t) return NULL;
    size_t bytes = (size_t)M * 3 * S * S * sizeof(float);
    if (o->pinned) { /* ordered before the forward's kernels on the backend stream */
        backend_get(o->device)->upload_async(t->data, o->x, bytes);
        return t;
    }
    backend_get(o->device)->upload(t->data, o->x, bytes);
    return t;
}

static tensor *image_step(void *self, int64_t step, int micro, loss_terms *terms) {
    image_objective *o = self;
    const image_cfg *c = &o->cfg;
    int B = c->batch, M = 2 * B, S = c->img, L = o->enc->L, K = o->K, p = o->vc.patch;
    int64_t g = step * c->accum + micro; /* global micro-batch index */
    for (int j = 0; j < B; j++) o->inst[j] = o->inst[B + j] = instance_at(o, g * B + j);
    int fail = 0;
#pragma omp parallel for schedule(dynamic, 1)
    for (int s = 0; s < M; s++) {
        int t = omp_get_thread_num();
        int id = o->inst[s];
        rng_t r = rng_make((uint64_t)c->seed, rng_stream(RNG_AUGMENT, (uint32_t)g, (uint32_t)s));
        from_u8(&o->imgs[id], &o->src[t]);
        const u8img *mk = &o->masks[id];
        image out = {.c = 3, .h = S, .w = S, .data = o->x + (size_t)s * 3 * S * S, .cap = (size_t)3 * S * S};
        image mout = {.c = 1, .h = S, .w = S, .data = o->mx + (size_t)s * S * S, .cap = (size_t)S * S};
        if (mk->px) from_u8(mk, &o->msrc[t]);
        int rc = o->advanced ? aug_sscd_advanced(&r, &o->src[t], mk->px ? &o->msrc[t] : NULL, S, &o->ws[t], &out, mk->px ? &mout : NULL)
                             : aug_mae(&r, &o->src[t], mk->px ? &o->msrc[t] : NULL, S, &o->ws[t], &out, mk->px ? &mout : NULL);
        if (rc || out.data != o->x + (size_t)s * 3 * S * S) fail = 1; /* outputs must stay in place */
        o->has_mask[s] = mk->px != NULL;
        if (!mk->px) memset(o->mx + (size_t)s * S * S, 0, (size_t)S * S * sizeof(float));
    }
    if (fail) { er_fail(ER_RUNTIME, "augmentation failed at step %lld", (long long)step); return NULL; }
    /* MixUp / CutMix on the 2B views: extra positives (ContrastiveMixup) */
    int mixed = o->use_con && c->mix_prob > 0;
    if (mixed) {
        rng_t r = rng_make((uint64_t)c->seed, rng_stream(RNG_SAMPLING, (uint32_t)g, 1));
        mixup_config mc = MIXUP_SSCD;
        mc.mix_prob = (float)c->mix_prob;
        mixup_batch(&r, &mc, o->x, M, 3, S, S, o->lam, o->partner);
        mixup_match_matrix(o->lam, o->partner, M, B, o->match);
    } else {
        int ids[1024];
        int *idp = M <= 1024 ? ids : xmalloc(M * sizeof(int));
        for (int s = 0; s < M; s++) idp[s] = s % B;
        sscd_match_from_ids(idp, M, o->match);
        if (idp != ids) free(idp);
    }
    /* masking */
    const int32_t *keep = NULL;
    if (K < L) {
        if (o->guided) mae_patch_scores(o->mx, M, S, S, p, o->scores);
        mae_masking(M, L, K, o->guided ? o->scores : NULL, o->guided ? o->has_mask : NULL, (uint64_t)c->seed,
                    (uint64_t)g, o->shuffle, o->restore, o->mask);
        for (int s = 0; s < M; s++) memcpy(o->keep + (size_t)s * K, o->shuffle + (size_t)s * L, K * sizeof(int32_t));
        keep = o->keep;
    }
    /* the 2B views go to the device once; patchify, the MAE target and both losses run there.
     * Host-side per step: augmentation, masking indices (gathered on the device by op_gather) and
     * the B*L patch mask / N*N match masks (tiny). */
    tensor *xt = upload_views(o, M);
    tensor *latent = vit_forward_t(o->enc, xt, keep, K);
    if (!latent) return NULL;
    tensor *loss = NULL;
    if (o->use_mae) {
        tensor *target = mae_target_t(xt, p, c->norm_pix);
        tensor *pred = mae_decoder_forward(&o->dec, latent, o->vc.registers, o->restore);
        tensor *lm = mae_loss_t(pred, target, o->mask);
        if (!lm) return NULL;
        loss_terms_set(terms, "mae", tensor_item(lm));
        loss = op_mul_scalar(lm, (float)c->w_mae);
    }
    if (o->use_con) {
        tensor *cls = op_reshape(op_slice(latent, 1, 0, 1), 2, SHAPE(M, o->vc.dim));
        tensor *e = sscd_descriptor(&o->head, cls);
        sscd_stats st;
        tensor *lc = sscd_loss(e, o->match, c->tau, c->entropy_weight, mixed, &st);
        if (!lc) return NULL;
        loss_terms_set(terms, "infonce", st.infonce);
        loss_terms_set(terms, "entropy", st.entropy);
        loss_terms_set(terms, "pos_sim", st.pos_sim);
        lc = op_mul_scalar(lc, (float)c->w_con);
        loss = loss ? op_add(loss, lc) : lc;
    }
    return loss;
}

/* After the final checkpoint (and each periodic one): the encoder alone, timm names + our config
 * metadata, as <out>/encoder.safetensors — what `endoret embed --model` and timm users load. */
static int image_on_checkpoint(void *self, int64_t step, int final) {
    image_objective *o = self;
    char *path = path_join(o->cfg.out, "encoder.safetensors");
    st_writer *w = st_writer_new();
    float *host = params_add_st(&o->enc->params, w, ""); /* device tensors: downloaded copies */
    vit_config_add_meta(&o->enc->cfg, w);
    st_add_meta(w, "format", "pt");
    st_add_meta(w, "endoret.kind", "weights");
    char buf[32];
    snprintf(buf, sizeof buf, "%lld", (long long)step);
    st_add_meta(w, "endoret.step", buf);
    int rc = st_write(w, path);
    st_writer_free(w);
    free(host);
    free(path);
    (void)final;
    return rc;
}

/* Held-out single-view re-ID: query view 0 against reference view 2 of every eval scene, k = 10,
 * ISC2021 uAP / Acc@1 / Recall@P90 (infer/eval/multiview.h), on the L2-normalised [CLS]. */
static int image_eval(void *self, int64_t step, char *buf, size_t n) {
    image_objective *o = self;
    int S = o->cfg.img, D = o->vc.dim, bs = 64, rc = ER_OK;
    emb_set e;
    emb_alloc(&e, o->neval, D);
    e.scene = xmalloc(o->neval * sizeof(int64_t));
    e.view = xmalloc(o->neval * sizeof(int64_t));
    memcpy(e.scene, o->eval_scene, o->neval * sizeof(int64_t));
    memcpy(e.view, o->eval_view, o->neval * sizeof(int64_t));
    for (int b0 = 0; b0 < o->neval && !rc; b0 += bs) {
        int B = o->neval - b0 < bs ? o->neval - b0 : bs;
        NO_GRAD {
            tensor *c = op_l2_normalize(vit_cls(o->enc, o->eval_x + (size_t)b0 * 3 * S * S, B), -1, 1e-12f);
            if (!c) rc = ER_RUNTIME;
            else tensor_to_host(c, e.x + (size_t)b0 * D);
        }
        nn_step_end();
    }
    mv_row rows[9];
    if (!rc) rc = multiview_eval(&e, 10, 0, 0, rows);
    if (!rc) snprintf(buf, n, "\"reid_Q1_R1_uAP\": %.4f, \"acc1\": %.4f, \"recall_p90\": %.4f, \"scenes\": %d",
                      rows[0].r.uap, rows[0].r.acc1, rows[0].r.recall_p90, rows[0].nscenes);
    emb_free(&e);
    (void)step;
    return rc;
}

train_objective image_objective_iface(image_objective *o) {
    train_objective t = {0};
    t.name = "image";
    t.self = o;
    t.params = &o->all;
    int64_t per = o->n / ((int64_t)o->cfg.batch * o->cfg.accum);
    t.steps_per_epoch = per > 0 ? per : 1;
    t.images_per_step = 2 * o->cfg.batch * o->cfg.accum;
    t.step = image_step;
    t.on_checkpoint = image_on_checkpoint;
    if (o->neval > 0) t.eval = image_eval;
    return t;
}
