/* loop_keys.c — the training loop's shared config keys (see loop_keys.h). */
#include "train/loop_keys.h"

#include <omp.h>
#include <stdio.h>
#include <string.h>

#include "nn/base/base.h"
#include "nn/base/args.h"
#include "nn/base/process_group.h"
#include "kernels/backend.h"
#include "nn/precision.h"

void loop_keys_defaults(loop_keys *k, const char *objective) {
    memset(k, 0, sizeof *k);
    k->epochs = 100; k->batch = 32; k->accum = 1;
    k->lr = 1e-3; k->weight_decay = 0.05; k->beta1 = 0.9; k->beta2 = 0.999;
    cfg_set_str(&k->optimizer, "adamw");
    k->warmup_steps = -1;
    cfg_set_str(&k->device, "cpu");
    cfg_set_str(&k->precision, "fp32");
    cfg_set_str(&k->schedule, "cosine");
    k->restart_epochs = 50; k->restart_mult = 2;
    char out[256];
    snprintf(out, sizeof out, "out/train_%s", objective ? objective : "run");
    cfg_set_str(&k->out, out);
    k->log_every = 10; k->ckpt_every = 500;
    cfg_set_str(&k->prefetch, "auto");
}

void loop_keys_sgd_restarts(loop_keys *k) {
    cfg_set_str(&k->optimizer, "sgd");
    k->batch = 128; k->momentum = 0.9; k->min_lr = 1.2e-4; k->weight_decay = 1e-4;
    cfg_set_str(&k->schedule, "restarts");
    k->restart_epochs = 50; k->restart_mult = 2;
}

const cfg_spec *loop_keys_specs(loop_keys *k, int *n) {
    static __thread cfg_spec s[32];
    int i = 0;
#define KEY(field, type, key, range, help) s[i++] = (cfg_spec){key, CFG_##type, &k->field, help, range};
#include "train/loop_keys.def"
#undef KEY
    *n = i;
    return s;
}

void loop_keys_free(loop_keys *k) {
    int n;
    const cfg_spec *s = loop_keys_specs(k, &n);
    cfg_free_strings(s, n);
}

double loop_keys_lr(const loop_keys *k) { return k->blr > 0 ? k->blr * k->batch * k->accum / 256.0 : k->lr; }

int loop_keys_to_config(const loop_keys *k, train_loop_config *lc) {
    optim_kind kind;
    if (!strcmp(k->optimizer, "adamw")) kind = OPTIM_ADAMW;
    else if (!strcmp(k->optimizer, "sgd")) kind = OPTIM_SGD;
    else return er_fail(ER_INPUT, "train.optimizer must be 'adamw' or 'sgd', got '%s'", k->optimizer);
    if (!(k->momentum >= 0 && k->momentum < 1))
        return er_fail(ER_INPUT, "train.momentum must be in [0, 1), got %g", k->momentum);
    if (kind == OPTIM_SGD && k->nesterov && k->momentum == 0)
        return er_fail(ER_INPUT, "train.nesterov = true needs train.momentum > 0");
    if (kind == OPTIM_ADAMW && (k->momentum != 0 || k->nesterov))
        return er_fail(ER_INPUT, "train.momentum and train.nesterov apply to train.optimizer = sgd, not '%s'", k->optimizer);
    if (k->accum < 1) return er_fail(ER_INPUT, "train.accum must be >= 1, got %d", k->accum);
    if (k->batch < 1) return er_fail(ER_INPUT, "train.batch must be >= 1, got %d", k->batch);
    if (k->schedule && strcmp(k->schedule, "cosine") && strcmp(k->schedule, "restarts"))
        return er_fail(ER_INPUT, "train.schedule must be 'cosine' or 'restarts', got '%s'", k->schedule);
    train_loop_config c = {
        .steps = k->steps, .epochs = k->epochs, .warmup_steps = k->warmup_steps, .warmup_epochs = k->warmup_epochs,
        .lr = loop_keys_lr(k), .min_lr = k->min_lr, .weight_decay = k->weight_decay, .beta1 = k->beta1,
        .beta2 = k->beta2, .eps = 1e-8, .optimizer = kind, .momentum = k->momentum, .nesterov = k->nesterov,
        .clip = k->clip, .accum = k->accum, .log_every = k->log_every, .ckpt_every = k->ckpt_every,
        .eval_every = k->eval_every, .out_dir = k->out, .world_size = 1,
        .restart_epochs = k->schedule && !strcmp(k->schedule, "restarts") ? k->restart_epochs : 0,
        .restart_mult = k->restart_mult,
    };
    *lc = c;
    return ER_OK;
}

int loop_keys_run(const loop_keys *k, train_run *run) {
    memset(run, 0, sizeof *run);
    run->keys = k;
    run->seed = (uint64_t)k->seed;
    int rc = er_device_parse(k->device, &run->device);
    if (!rc) rc = er_precision_parse(k->precision, &run->precision);
    if (rc) return rc;
    /* train.threads = 0: OpenMP's own default, i.e. OMP_NUM_THREADS, else the cores */
    if (k->threads > 0) omp_set_num_threads(k->threads);
    run->threads = omp_get_max_threads();
    run->rank = pg_rank();
    run->world_size = pg_size() > 0 ? pg_size() : 1;
    run->batch = k->batch;
    if (k->batch % run->world_size)
        return er_fail(ER_INPUT, "train.batch = %d is not a multiple of the %d ranks: every rank takes an equal shard of "
                                 "the global batch", k->batch, run->world_size);
    run->local_batch = k->batch / run->world_size;
    run->first = run->rank * run->local_batch;
    run->prefetch = !strcmp(k->prefetch, "on") || (!strcmp(k->prefetch, "auto") && run->device != DEV_CPU);
    return ER_OK;
}

int train_run_allgather(const train_run *run, const float *mine, int64_t n, float *all) {
    if (run->world_size > 1) return pg_allgather(mine, n, all);
    memcpy(all, mine, (size_t)n * sizeof(float));
    return ER_OK;
}

void train_run_describe(const train_run *run, FILE *f) {
    fprintf(f, "run: %s/%s, %d threads, prefetch %s", run->keys->device, run->keys->precision, run->threads,
            run->prefetch ? "on" : "off");
    if (run->world_size > 1)
        fprintf(f, ", data parallel: %d ranks x %d of every global batch of %d", run->world_size, run->local_batch, run->batch);
    fputc('\n', f);
}

mem_estimate loop_keys_mem_state(const loop_keys *k, double params, double trainable) {
    int sgd = k->optimizer && !strcmp(k->optimizer, "sgd");
    mem_estimate m = {.params = 4 * params, .grads = 4 * trainable};
    m.optimizer = (sgd ? (k->momentum > 0 ? 1 : 0) : 2) * 4 * trainable;
    return m;
}
