/* loop_keys.h — the config keys of the training loop, declared once for every objective.
 *
 * `eval.every`, `train.*` and `out.*` configure train/loop.h (schedule, optimizer, accumulation,
 * clipping, logging, checkpoints) and the process (seed, threads, device, precision); an objective
 * declares only its own keys (train/objective.h) and reads the shared ones it needs (batch, seed,
 * device, out.dir) from loop_keys. The table order is the order of the `key = value` lines a
 * checkpoint stores (endoret.config), so keys are only ever appended to their group. */
#ifndef ENDORET_TRAIN_LOOP_KEYS_H
#define ENDORET_TRAIN_LOOP_KEYS_H

#include <stdio.h>

#include "nn/base/config.h"
#include "nn/base/memory.h"
#include "train/loop.h"

/* One field a key of train/loop_keys.def (eval_every, epochs, batch, lr, optimizer, device, out ...). */
typedef struct loop_keys {
#define KEY CFG_FIELD
#include "train/loop_keys.def"
#undef KEY
} loop_keys;


/* Decides the run from k: parses train.device, sets the OpenMP threads, takes rank and world size
 * from the process group and splits the global batch (ER_INPUT, one message, when it cannot). */
int loop_keys_run(const loop_keys *k, train_run *run);
/* A footprint estimate (nn/base/memory.h) holding the training state of `params` fp32 weights and
 * buffers, `trainable` of them with a gradient and k's optimizer slots (AdamW 2, SGD with momentum
 * 1, plain SGD 0); the caller adds activations and data. */
mem_estimate loop_keys_mem_state(const loop_keys *k, double params, double trainable);
/* Every rank's n floats `mine`, in rank order, into all [world_size * n] (one process: a copy): a
 * rank's share of the global batch becomes the whole batch's. */
int train_run_allgather(const train_run *run, const float *mine, int64_t n, float *all);
/* One line for the start of a run: device, precision, threads, ranks and shard. */
void train_run_describe(const train_run *run, FILE *f);

/* Generic defaults (AdamW as timm/MAE use it); out.dir = out/train_<objective>. An objective may
 * change them afterwards (objective_def.loop_defaults). */
void loop_keys_defaults(loop_keys *k, const char *objective);
/* PGCon's optimisation (spec 1.8), which its linear evaluation and fine-tuning (1.10) share: SGD
 * 0.9, wd 1e-4, batch 128, no warm-up, cosine with warm restarts (T_0 50 epochs, T_mult 2, floor
 * 1.2e-4); each objective then sets its epochs and lr. */
void loop_keys_sgd_restarts(loop_keys *k);
/* The key table bound to k (n receives its length). */
const cfg_spec *loop_keys_specs(loop_keys *k, int *n);
void loop_keys_free(loop_keys *k);
/* The effective peak lr: train.blr * batch * accum / 256 when train.blr > 0 (MAE's rule), else train.lr. */
double loop_keys_lr(const loop_keys *k);
/* Checks the values (ER_INPUT, one message naming the key) and fills the loop config; the caller
 * sets progress, resume, config_text, stop_after and the data-parallel fields. */
int loop_keys_to_config(const loop_keys *k, train_loop_config *lc);

#endif
