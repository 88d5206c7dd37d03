/* objective.h — the registry of training objectives (`endoret train <name>`).
 *
 * An objective is what train/loop.h trains: it owns a model, its data and the loss of one
 * micro-batch. Each registers one objective_def here (the table in objective.c): a name, a one-line
 * help, its own config keys (a cfg_spec table bound to its config struct) and a create function
 * returning the loop's train_objective interface. The loop's keys (eval.every, train.*, out.*:
 * train/loop_keys.h) are shared by every objective; a run's effective config is the objective's
 * keys followed by the loop's, in table order (what the checkpoint stores as endoret.config). */
#ifndef ENDORET_TRAIN_OBJECTIVE_H
#define ENDORET_TRAIN_OBJECTIVE_H

#include <stddef.h>
#include <stdint.h>

#include "nn/base/config.h"
#include "nn/models/model.h"
#include "train/loop.h"
#include "train/loop_keys.h"

/* A key table as it is built: the objective's keys, then the loop's (objective_config_init). */
typedef struct key_table {
    cfg_spec *s;
    int n, cap;
} key_table;
/* Appends n keys. */
void key_table_add(key_table *t, const cfg_spec *s, int n);
/* One key bound to field `field` of the config `c`, appended to the table `t` (the names every
 * objective's specs hook uses). */
#define OBJ_KEY(key, type, field, range, help) key_table_add(t, &(cfg_spec){key, type, &c->field, help, range}, 1)
/* The same from a key list row (nn/base/config.h): an objective's <id>_keys.def, included in its
 * config struct with KEY = CFG_FIELD and in its specs hook with KEY = OBJ_KEY_ROW. */
#define OBJ_KEY_ROW(field, type, key, range, help) OBJ_KEY(key, CFG_##type, field, range, help);

typedef struct objective_def {
    const char *name;       /* `endoret train <name>` */
    const char *help;       /* one line for `endoret train --help` */
    const char *usage;      /* config files to start from, for `--help` of the objective */
    size_t cfg_size;        /* sizeof the objective's config struct */
    /* The model family whose args are the config's `model` field (at model_offset): objective_config_init
     * sets their defaults before `defaults` and puts their model.* keys first in the key table. NULL:
     * the objective does both itself (image: image_cfg_defaults/_specs also serve alone). */
    const model_arch *arch;
    size_t model_offset;
    /* Fills the objective's config (zeroed, with the model's defaults) with its defaults and may change
     * the shared ones (k already holds loop_keys_defaults). */
    void (*defaults)(void *cfg, loop_keys *k);
    /* Appends the objective's own keys, bound to cfg, to t (its key list through OBJ_KEY_ROW);
     * objective_config_free frees the strings of that table. */
    void (*specs)(void *cfg, struct key_table *t);
    /* The objective's state: objective_create allocates state_size zeroed bytes (self) and starts
     * the interface from hooks (a static table of the objective's file: name, step, eval, describe,
     * free, export_name, exports ...) with self and the run. hooks->free releases self, also when
     * create failed half-way (every pointer it frees is NULL or owned). */
    size_t state_size;
    const train_objective *hooks;
    /* Builds the model(s) through the registry on run->device into self and loads the data, then
     * finishes *out with objective_ready. The run (device, threads, rank, the batch shard) is decided
     * by objective_create. ER_INPUT with one message for a bad config; objective_create then frees
     * self, so create just returns. */
    int (*create)(const void *cfg, const train_run *run, void *self, train_objective *out);
} objective_def;

/* Defines objective_<id>, the registry entry of `endoret train <id>`, from what its file names
 * <id>_defaults, <id>_specs, <id>_create and <id>_hooks, its config struct cfg_type, state struct
 * state_type and model family arch. */
#define OBJECTIVE_DEF(id, cfg_type, state_type, model_arch, help_line, usage_line)                      \
    const objective_def objective_##id = {.name = #id, .help = help_line, .usage = usage_line,          \
                                          .cfg_size = sizeof(cfg_type), .arch = model_arch,           \
                                          .model_offset = offsetof(cfg_type, model),                   \
                                          .defaults = id##_defaults, .specs = id##_specs,               \
                                          .state_size = sizeof(state_type), .hooks = &id##_hooks,     \
                                          .create = id##_create}

/* The registered objectives, in `--help` order. */
/* The one message for a training run without data (every objective): the papers' configs name none. */
#define TRAIN_NO_MANIFEST "data.manifest is not set: give the training manifest with --set data.manifest=M.csv (endoret data import writes one from an image folder; docs/data.md)"
const objective_def *const *objective_list(int *n);
/* The objective called `name`; NULL with an ER_INPUT message naming the known ones. */
const objective_def *objective_find(const char *name);

/* An objective's config with the shared loop keys: the combined key table (objective's keys first). */
typedef struct {
    const objective_def *def;
    void *cfg;              /* def->cfg_size bytes */
    loop_keys loop;
    cfg_spec *specs;
    int nspecs;
    int nobjective;         /* the objective's keys: specs[0 .. nobjective) */
} objective_config;

/* Decides the run from the loop keys (loop_keys_run: device, threads, rank, the batch shard), sets
 * the op-layer precision (train.precision: nn/precision.h), once for every objective, then builds
 * the objective (def->create on a zeroed state; def->hooks->free on failure). Every command that
 * trains calls this. */
int objective_create(const objective_config *oc, train_objective *out);
/* Finishes an interface t that holds the objective's hooks, self and run: the model m (the start
 * line's description; the loop's export when hooks name export_name), params, steps_per_epoch from
 * `samples` training items (at least 1), images_per_step = views x batch x accum (the progress rate),
 * and eval dropped unless has_eval (an evaluation set is loaded). Returns ER_OK: a create's last line. */
int objective_ready(train_objective *t, struct model *m, param_list *params, int64_t samples, int views, int has_eval);
/* Embeds n images of x (model_embed, in the run's precision) in chunks of `chunk` into out [n, m->dim]:
 * the eval hooks' batching. */
int objective_embed(struct model *m, int precision, const float *x, int n, int chunk, float *out);
/* A labelled evaluation set: images [n, 3, side, side] under a model's input rule, label ids
 * (nclass of them over the whole manifest: datasets/image_cache.h labelled_set_load). */
typedef struct {
    float *x;
    int *y;
    int n, nclass;
} labelled_rows;
int labelled_rows_load(labelled_rows *r, const char *manifest, const char *split, int side, const model_input *in);
void labelled_rows_free(labelled_rows *r);
/* An evaluation set with scene and view ids: images [n, 3, side, side] as aug_eval gives them
 * (datasets/image_cache.h eval_set_load). */
typedef struct {
    float *x;
    int64_t *scene, *view;
    int n;
} view_rows;
int view_rows_load(view_rows *r, const char *manifest, const char *split, int side);
void view_rows_free(view_rows *r);
/* Model selection that survives --resume: the best score so far kept in a [1] buffer of the
 * training state named `name` (checkpointed, never optimised; -1 = none), appended to params. */
tensor *objective_best_new(param_list *params, int device, const char *name);
/* 1 when v beats the stored best (then v is stored); *before gets the best before. */
int objective_best_update(tensor *best, double v, float *before);
/* An input rule (nn/models/model.h) with the statistics called `stats`: "wce" (PGCon's, spec 1.2)
 * or "imagenet", and centre crop `crop`. */
model_input objective_input(const char *stats, float crop);
/* The objective's start line, then the run's (train_run_describe). */
void objective_describe(const train_objective *obj, const train_loop_config *lc, FILE *f);

/* Defaults of `def` (objective + loop keys). */
void objective_config_init(objective_config *oc, const objective_def *def);
/* Reads a config file (NULL: none) and then each "key=value" of sets (the --set overrides). */
int objective_config_load(objective_config *oc, const char *path, char **sets, int nsets);
/* The effective config as `key = value` lines, objective keys then loop keys (malloc'd). */
char *objective_config_text(const objective_config *oc);
void objective_config_free(objective_config *oc);

#endif
