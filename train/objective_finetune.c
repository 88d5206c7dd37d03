/* objective_finetune.c — linear evaluation and fine-tuning of a ResNet (objective_finetune.h). */
#include "train/objective_finetune.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/augment.h"
#include "datasets/image.h"
#include "datasets/image_cache.h"
#include "infer/eval/metrics.h"
#include "infer/eval/split_eval.h"
#include "nn/autograd.h"
#include "nn/base/base.h"
#include "nn/base/rng.h"
#include "nn/layers/autocast.h"
#include "nn/layers/layer_params.h"
#include "nn/ops.h"
#include "train/host_batch.h"

/* spec 1.10: PGCon's optimisation (loop_keys_sgd_restarts) with warm restarts of T_0 3 epochs; lr
 * 0.01 here (the released linear script's lr 10 belongs to its frozen head: configs/pgcon_linear.cfg). */
static void finetune_defaults(void *cfg, loop_keys *k) {
    finetune_cfg *c = cfg;
    cfg_set_str(&c->init, "");
    cfg_set_str(&c->head, "linear");
    c->hidden = 512;
    cfg_set_str(&c->norm, "auto");
    cfg_set_str(&c->split, "train");
    c->label_percent = 100;
    cfg_set_str(&c->eval_split, "val");
    cfg_set_str(&c->test_split, "");
    loop_keys_sgd_restarts(k);
    k->lr = 0.01; k->restart_epochs = 3; /* 100 epochs: the loop's default */
}

static void finetune_specs(void *cfg, key_table *t) {
    finetune_cfg *c = cfg;
#define KEY OBJ_KEY_ROW
#include "train/finetune_keys.def"
#undef KEY
}

typedef struct {
    finetune_cfg cfg;
    resnet *net;
    model *classifier;      /* net behind the model interface, trunk + head, with the input rule: the export */
    tensor *w[2], *b[2];    /* fc (w[0], b[0]) or head.0 / head.2 */
    int mlp, C, S;
    param_list all;
    model_input in;
    train_run run;
    host_batch *hb;         /* this rank's images [b, 3, S, S], then their labels [b] */
    size_t y_off;
    image_cache data;
    int *rows, nrows;       /* the training rows kept (label present, in the label share) */
    /* evaluation (set 0) and the test split scored at each new best (set 1) */
    labelled_rows eval, test;
    tensor *best;           /* the best eval.split accuracy so far, in the training state (survives --resume) */
    param_list state;       /* all + best: what the loop checkpoints (the exports hold all) */
} finetune_objective;

enum { HEAD_FAMILY = 4 }; /* the head's init streams (resnet.c's trunk: 3) */

/* logits [B, C] of images x on the device */
static tensor *logits(finetune_objective *o, const nn_ctx *ctx, tensor *x) {
    nn_ctx trunk = *ctx;
    if (o->cfg.freeze) trunk.training = 0;
    tensor *f = resnet_features(o->net, &trunk, x);
    if (!o->mlp) return ac_linear(ctx, f, o->w[0], o->b[0]);
    return ac_linear(ctx, op_relu(ac_linear(ctx, f, o->w[0], o->b[0])), o->w[1], o->b[1]);
}

/* Micro-batch g into a host slot: this rank's shard of the global batch (rows first .. first + b,
 * streams keyed by the global index j), augmented as spec 1.10's train transform. */
static int ft_fill(void *self, int64_t g, void *slot, const fill_scratch *sc) {
    finetune_objective *o = self;
    int B = o->run.batch, b = o->run.local_batch, S = o->S, fail = 0;
    float *x = slot;
    int32_t *y = (int32_t *)((char *)slot + o->y_off);
    /* the shard's rows first, in one thread: host_batch_item caches the current epoch's permutation */
    for (int i = 0; i < b; i++) y[i] = o->rows[host_batch_item(o->hb, g * B + o->run.first + i)];
#pragma omp parallel for schedule(dynamic, 1) num_threads(o->run.threads)
    for (int i = 0; i < b; i++) {
        int t = omp_get_thread_num(), id = y[i], j = o->run.first + i;
        rng_t r = rng_make(o->run.seed, rng_stream(RNG_AUGMENT, (uint32_t)g, (uint32_t)j));
        image_cache_get(&o->data.imgs[id], &sc->src[t]);
        image out = {.c = 3, .h = S, .w = S, .data = x + (size_t)i * 3 * S * S, .cap = (size_t)3 * S * S};
        if (aug_pgcon_linear(&r, &sc->src[t], S, o->in.crop, o->in.mean, o->in.std, &sc->ws[t], &out) ||
            out.data != x + (size_t)i * 3 * S * S)
            fail = 1;
        y[i] = o->data.label[id];
    }
    return fail ? er_fail(ER_RUNTIME, "finetune: augmentation failed at micro-batch %lld", (long long)g) : ER_OK;
}

static tensor *ft_step(void *self, int64_t step, int micro, loss_terms *terms) {
    finetune_objective *o = self;
    int b = o->run.local_batch, S = o->S;
    tensor *x;
    void *slot = host_batch_step(o->hb, step, micro, &x, 4, SHAPE(b, 3, S, S));
    if (!slot) return NULL;
    /* this rank's mean; the loop averages the ranks' gradients: the global batch's mean */
    nn_ctx ctx = nn_ctx_train(o->run.seed, step, micro, o->run.precision);
    tensor *l = op_cross_entropy(logits(o, &ctx, x), (const int32_t *)((char *)slot + o->y_off));
    loss_terms_defer(terms, "ce", l);
    return l;
}


/* accuracy of the current weights on n rows (x, y), per-class sensitivity appended to buf at *k */
static int score(finetune_objective *o, const labelled_rows *set, const char *name, char *buf, size_t cap, size_t *k,
                 double *acc_out) {
    const float *x = set->x;
    const int *y = set->y, n = set->n;
    int S = o->S, C = o->C, bs = 64, rc = ER_OK, right = 0;
    int *pred = xmalloc((size_t)n * sizeof(int));
    float *lg = xmalloc((size_t)bs * C * sizeof(float));
    int64_t *conf = xmalloc((size_t)C * C * sizeof(int64_t));
    const nn_ctx ev = nn_ctx_eval(o->run.precision);
    for (int b0 = 0; b0 < n && !rc; b0 += bs) {
        int B = n - b0 < bs ? n - b0 : bs;
        NO_GRAD {
            tensor *z = logits(o, &ev, tensor_upload(o->run.device, 4, SHAPE(B, 3, S, S), x + (size_t)b0 * 3 * S * S));
            if (!z) rc = ER_RUNTIME;
            else tensor_to_host(z, lg);
        }
        nn_step_end();
        for (int i = 0; i < B && !rc; i++) {
            int best = 0;
            for (int c = 1; c < C; c++) if (lg[(size_t)i * C + c] > lg[(size_t)i * C + best]) best = c;
            pred[b0 + i] = best;
            right += best == y[b0 + i];
        }
    }
    *acc_out = (double)right / n;
    confusion_matrix(y, pred, n, C, conf);
    if (!rc) buf_appendf(buf, cap, k, "%s\"%saccuracy\": %.4f, \"%sn\": %d, \"%ssensitivity\": [", *k ? ", " : "", name,
                         *acc_out, name, n, name);
    for (int c = 0; c < C && !rc; c++) buf_appendf(buf, cap, k, "%s%.4f", c ? ", " : "", sensitivity_from_confusion(conf, C, c));
    if (!rc) buf_appendf(buf, cap, k, "]");
    free(pred); free(lg); free(conf);
    return rc;
}

static int ft_eval(void *self, int64_t step, char *buf, size_t n) {
    finetune_objective *o = self;
    size_t k = 0;
    double acc, test;
    int rc = score(o, &o->eval, "", buf, n, &k, &acc);
    float before; /* model selection on the evaluation split, compared as stored (float) */
    if (!rc && objective_best_update(o->best, (float)acc, &before)) {
        if (o->test.n) rc = score(o, &o->test, "test_", buf, n, &k, &test);
        if (!rc && o->run.rank == 0) rc = train_save_model(o->classifier, o->run.keys->out, "best.safetensors", step);
        if (!rc) buf_appendf(buf, n, &k, ", \"best\": true");
    }
    (void)step;
    return rc;
}

static void ft_free(void *self) {
    finetune_objective *o = self;
    if (!o) return;
    host_batch_free(o->hb); /* first: waits for a fill still reading the data on the worker */
    for (int i = o->net ? o->net->params.n : 0; i < o->all.n; i++) tensor_free(o->all.t[i]);
    free(o->all.t);
    free(o->state.t);
    tensor_free(o->best);
    free(o->classifier); /* the wrapper only: the network is freed below */
    resnet_free(o->net);
    image_cache_free(&o->data);
    free(o->rows); labelled_rows_free(&o->eval); labelled_rows_free(&o->test);
    free(o);
}

static void ft_describe(void *self, FILE *f) {
    finetune_objective *o = self;
    const finetune_cfg *c = &o->cfg;
    fprintf(f, "%s (%s head, %d classes) from %s, %d of %d labelled rows (%g%%), batch %d",
            c->freeze ? "frozen, linear evaluation" : "fully fine-tuned", c->head, o->C,
            c->init && c->init[0] ? c->init : "random init", o->nrows, o->data.n, c->label_percent, o->run.batch);
}

/* The loop's hooks (objective_create adds self and the run); the export is the classifier (trunk + head, with
 * its input rule). */
static const train_objective finetune_hooks = {.name = "finetune", .step = ft_step, .eval = ft_eval,
                                               .describe = ft_describe, .free = ft_free,
                                               .export_name = "classifier.safetensors", .exports = "classifier.safetensors"};

static int finetune_create(const void *cfgv, const train_run *run, void *self, train_objective *out) {
    const finetune_cfg *c = cfgv;
    const loop_keys *k = run->keys;
    int device = run->device, rc;
    finetune_objective *o = self;
    o->cfg = *c;
    o->run = *run;
    o->mlp = !strcmp(c->head, "mlp");
    o->S = c->model.img;
    /* norm auto: the init file's input rule, else WCE with a 280/336 crop */
    model_input in = objective_input(strcmp(c->norm, "auto") ? c->norm : "wce", 280.0f / 336.0f), file_in = {0};
    if ((rc = resnet_trunk_new(&c->model, c->init, "finetune.init", run->seed, &o->net, &file_in))) return rc;
    if (file_in.crop > 0 && !strcmp(c->norm, "auto")) in = file_in;
    if (c->crop > 0) in.crop = (float)c->crop;
    o->in = in;
    for (int i = 0; i < o->net->params.n; i++) {
        if (c->freeze) o->net->params.t[i]->flags &= ~T_REQUIRES_GRAD; /* the trunk stays as loaded */
        params_add(&o->all, o->net->params.t[i]);
    }
    int side = c->cache_side > 0 ? c->cache_side : c->model.img * 8 / 7;
    if ((rc = image_cache_load(&o->data, c->manifest, c->split, side))) return rc;
    o->C = o->data.nlabels;
    if (o->C < 2) return er_fail(ER_INPUT, "%s: classification needs at least 2 labels", c->manifest);
    uint8_t *keep = xmalloc((size_t)o->data.n);
    label_subset(o->data.label, o->data.n, c->label_percent, run->seed, keep);
    o->rows = xmalloc((size_t)o->data.n * sizeof(int));
    for (int i = 0; i < o->data.n; i++) if (keep[i]) o->rows[o->nrows++] = i;
    free(keep);
    if (o->nrows < 1) return er_fail(ER_INPUT, "%s split '%s': no labelled rows", c->manifest, c->split);
    int F = o->net->features;
    if (o->mlp) {
        layer_linear(&o->all, "head.0", c->hidden, F, run->seed, HEAD_FAMILY, &o->w[0], &o->b[0]);
        layer_linear(&o->all, "head.2", o->C, c->hidden, run->seed, HEAD_FAMILY, &o->w[1], &o->b[1]);
    } else layer_linear(&o->all, "fc", o->C, F, run->seed, HEAD_FAMILY, &o->w[0], &o->b[0]);
    if ((rc = params_to_device(&o->all, device))) return rc;
    params_add_all(&o->state, &o->all);
    o->best = objective_best_new(&o->state, device, "finetune.best_accuracy");
    if (k->eval_every > 0 && /* eval.split '' = every row, like data.split */
        ((rc = labelled_rows_load(&o->eval, c->manifest, c->eval_split, o->S, &in)) ||
         (c->test_split && c->test_split[0] && (rc = labelled_rows_load(&o->test, c->manifest, c->test_split, o->S, &in)))))
        return rc;
    size_t bytes = 0;
    host_batch_reserve(&bytes, (size_t)run->local_batch * 3 * o->S * o->S * sizeof(float));
    o->y_off = host_batch_reserve(&bytes, (size_t)run->local_batch * sizeof(int32_t));
    if (!(o->hb = host_batch_new(run, o->nrows, bytes, ft_fill, o))) return ER_RUNTIME;
    o->classifier = resnet_model_wrap(o->net, c->model.img);
    o->classifier->params = &o->all; /* trunk and head */
    model_set_input(o->classifier, o->in);
    if (o->eval.n) out->exports = "classifier.safetensors, best.safetensors"; /* ft_eval keeps the best model */
    return objective_ready(out, o->classifier, &o->state, o->nrows, 1, o->eval.n > 0);
}

OBJECTIVE_DEF(finetune, finetune_cfg, finetune_objective, &resnet_arch,
              "linear evaluation / fine-tuning of a pre-trained ResNet on labels (PGCon tables 3-4)",
              "configs/pgcon_linear.cfg, configs/pgcon_finetune.cfg");
