/* loop.h — THE training loop of endoret, shared by every objective (image, scene, pgcon, dual).
 *
 * An objective supplies its parameters and a `step` function that builds the loss of one
 * micro-batch of a given optimizer step; the loop owns everything else:
 *   - steps (from epochs x steps_per_epoch or given), warm-up + cosine lr (nn/schedule.h), AdamW or
 *     SGD (nn/optim.h) with timm's weight-decay groups, gradient accumulation (accum micro-batches
 *     per update = the effective batch), an optional gradient all-reduce (data parallel), global-norm
 *     clipping;
 *   - a progress line (step, the logged step's loss and its terms, lr, img/s, ETA) and a log: <out>/log.jsonl (one JSON object
 *     per logged step) and <out>/loss.svg (the loss curves, rewritten at each checkpoint and at the end);
 *   - periodic evaluation through the objective's eval hook (logged as {"eval": ...});
 *   - atomic checkpoints <out>/checkpoint.safetensors every ckpt_every steps and at the end
 *     (checkpoints/checkpoint.h: every parameter under its timm name, so the file is also a weights
 *     file, the optimizer state, the step and the config text); only rank 0 writes files;
 *   - --resume: restores all of it; because batches, augmentations and masks are pure functions of
 *     (seed, step, sample), the resumed run is bit-identical to an uninterrupted one;
 *   - SIGINT/SIGTERM: finish the current step, write the checkpoint, return ER_RUNTIME saying so;
 *   - a NaN/Inf loss or gradient stops before the update with one message naming the step and the
 *     last good checkpoint;
 *   - buffers (tensors of obj->params without T_REQUIRES_GRAD: running statistics, memory banks)
 *     are saved and restored with the parameters but never seen by the optimizer, weight decay,
 *     clipping or the all-reduce (nn/context.h);
 *   - parameters, gradients and optimizer state live on the parameters' device (train.device); a CUDA
 *     failure (the backend's last_error) is checked once per step and stops the run with its message.
 * The objective's `step` must make its batch depend only on (seed, step, micro) — never on how
 * many steps ran in this process. */
#ifndef ENDORET_TRAIN_LOOP_H
#define ENDORET_TRAIN_LOOP_H

#include <stdint.h>
#include <stdio.h>

#include "checkpoints/safetensors.h"
#include "nn/optim.h"
#include "nn/tensor.h"

#define LOSS_TERMS_MAX 8

/* The named parts of a micro-batch's loss, for the log: a host value (loss_terms_set), or a one-element
 * tensor the loop copies on the device and reads with the rest of the step at its end
 * (loss_terms_defer: no host wait in the middle of a step; train/step_record.h). */
typedef struct {
    int n;
    const char *name[LOSS_TERMS_MAX];
    double value[LOSS_TERMS_MAX];
    const tensor *dev[LOSS_TERMS_MAX]; /* deferred: value filled at the step's end */
} loss_terms;

void loss_terms_set(loss_terms *t, const char *name, double value);
void loss_terms_defer(loss_terms *t, const char *name, const tensor *x);
/* Read every deferred term now (the host waits): for a caller of an objective's step outside the loop
 * (tests, tools), while the step's tensors are alive (before nn_step_end). */
void loss_terms_resolve(loss_terms *t);

struct loop_keys;

/* The run's settings, decided once from the loop keys and the process group (loop_keys_run in
 * train/loop_keys.h) and handed to every objective: an objective never parses train.device or asks
 * the process group. */
typedef struct train_run {
    const struct loop_keys *keys;  /* batch, accum, seed, out.dir ... as configured */
    int device;                    /* train.device, parsed */
    int precision;                 /* train.precision, parsed (ER_PREC_*): the forwards' autocast scope */
    int threads;                   /* OpenMP threads: train.threads, else OMP_NUM_THREADS, else the cores */
    int rank, world_size;          /* data parallel (one process: 0, 1) */
    uint64_t seed;                 /* train.seed */
    int batch;                     /* the global micro-batch (train.batch) */
    int local_batch, first;        /* this rank's shard: samples [first, first + local_batch) of each micro-batch */
    int prefetch;                  /* data.prefetch resolved: fill the next micro-batch on a worker thread */
} train_run;

/* Saves m (model_save) as <out_dir>/<name> at `step`: the loop's export after each checkpoint, and
 * a model an objective selects itself (best.safetensors). */
struct model;
int train_save_model(struct model *m, const char *out_dir, const char *name, int64_t step);

typedef struct train_objective {
    const char *name;          /* "image", ... (written in the checkpoint) */
    void *self;
    param_list *params;        /* everything saved; trainable = T_REQUIRES_GRAD */
    int64_t steps_per_epoch;   /* optimizer steps per epoch */
    int images_per_step;       /* items (images, or scenes: rate_unit) consumed by one optimizer step */
    const char *rate_unit;     /* the progress line's rate unit: NULL = "img" (img/s), "scenes" ... */
    /* Loss (scalar tensor) of micro-batch `micro` (0..accum-1) of optimizer step `step`; terms gets
     * the named parts (already divided for accumulation is NOT expected: the loop scales). NULL + er_msg
     * on failure. */
    tensor *(*step)(void *self, int64_t step, int micro, loss_terms *terms);
    /* Optional: evaluation at `step`; fills a JSON object body ("\"uAP\": 0.5, ...") into buf. */
    int (*eval)(void *self, int64_t step, char *buf, size_t n);
    /* The model trained (the start line describes it). With export_name, the loop saves it as
     * <out.dir>/<export_name> after each checkpoint (model_save: what `embed --model` loads), before
     * on_checkpoint. */
    struct model *model;
    const char *export_name;
    /* Optional: called after each checkpoint (other exports). */
    int (*on_checkpoint)(void *self, int64_t step, int final);
    /* Optional: what is trained beyond the model, the middle of the start line "train <name>: <model
     * description>; <this>, lr ... -> <out.dir>" (objective_describe; printed unless --quiet). */
    void (*describe)(void *self, FILE *f);
    /* Files the objective writes into out.dir besides the loop's (e.g. "encoder.safetensors"), or NULL. */
    const char *exports;
    /* Frees self (the objective's model, data and buffers). */
    void (*free)(void *self);
    train_run run;             /* set by objective_create (train/objective.h) */
} train_objective;

/* Data parallel: sums or averages the gradients of `count` tensors across processes, in place.
 * grads[i] holds n[i] floats on the parameters' device. Called once per optimizer step, after the
 * last backward of the step and before clipping and the update; returns ER_OK or an error (with
 * er_fail). */
typedef int (*train_allreduce_fn)(void *ctx, float *const *grads, const int64_t *n, int count);
/* Data parallel: averages n host doubles across processes in place. Called once per optimizer step
 * with the step's loss, its named terms and this process's stop request (SIGINT/SIGTERM), so rank 0
 * logs the loss of the global batch and every rank stops after the same step. */
typedef int (*train_average_fn)(void *ctx, double *v, int n);

typedef struct train_loop_config {
    int64_t steps;          /* total optimizer steps (0: epochs * steps_per_epoch) */
    int epochs;
    int64_t warmup_steps;   /* < 0: warmup_epochs * steps_per_epoch */
    double warmup_epochs;
    double lr, min_lr, weight_decay, beta1, beta2, eps;
    double restart_epochs;  /* > 0: cosine with warm restarts, first cycle this many epochs (nn/schedule.h) */
    double restart_mult;    /* T_mult of the restarts */
    optim_kind optimizer;   /* OPTIM_ADAMW (default) | OPTIM_SGD */
    double momentum;        /* SGD */
    int nesterov;           /* SGD */
    double clip;            /* max global grad norm, 0 = off */
    int accum;              /* micro-batches per update */
    int log_every, ckpt_every, eval_every;
    int progress;           /* 1: progress line on stderr */
    int profile;            /* 1: time every kernel of the steps after the first (the first sizes the
                               arena) and print the table (kernels/profile.h) on stderr at the end;
                               2: the same as JSON (`train --profile` gives 1). 0: ENDORET_PROFILE=1|json
                               decides, unset or 0 is off */
    const char *out_dir;
    const char *resume;     /* checkpoint to resume from, or NULL (train/resume_check.h: changed keys
                               named, the network's and optimizer's refused) */
    int *resume_finished;   /* out, may be NULL: set to 1 when the checkpoint is at the run's last
                               step (nothing trained, nothing written, ER_OK) */
    const char *config_text;/* effective config, stored in the checkpoint */
    int64_t stop_after;     /* testing aid: return after this many steps in this process (0 = off),
                               writing a checkpoint as if interrupted */
    /* data parallel (one process: all zero/NULL) */
    train_allreduce_fn allreduce;  /* NULL: a no-op */
    train_average_fn average;      /* NULL: one process */
    void *allreduce_ctx;           /* passed to both */
    int rank;               /* only rank 0 writes the log, loss curve, checkpoints and progress */
    int world_size;         /* processes (0 or 1: one); > 1 is recorded in log.jsonl and the checkpoint */
} train_loop_config;

int train_loop_run(const train_loop_config *c, train_objective *obj);

/* Set by SIGINT/SIGTERM while a loop runs, and by the loop when it stops early on request (signal or
 * stop_after): the caller can tell a requested stop from a failure. */
extern volatile int train_interrupted;

/* Write an SVG line chart of the series (x, y[k]) to path (atomic). */
int svg_loss_curve(const char *path, const char *title, int n, const double *x, int nseries,
                   const char *const *names, const double *const *y);

#endif
