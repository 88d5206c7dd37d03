/* cmd_train.c — `endoret train <objective> --config C [--set key=value ...] [--resume CKPT]`.
 * The objectives are those of train/objective.h's registry; this file only reads the command line,
 * the config (the objective's keys + the loop's shared keys) and runs train/loop.h. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/base/args.h"
#include "nn/base/base.h"
#include "nn/base/config.h"
#include "nn/base/process_group.h"
#include "train/data_parallel.h"
#include "train/loop.h"
#include "train/loop_keys.h"
#include "train/objective.h"

/* Pull every `--set k=v` / `--set=k=v` out of argv (they may repeat); the rest goes to args_parse. */
static int split_sets(int argc, char **argv, char ***rest, int *nrest, char ***sets, int *nsets) {
    *rest = xmalloc((argc + 1) * sizeof(char *));
    *sets = xmalloc((argc + 1) * sizeof(char *));
    *nrest = *nsets = 0;
    for (int i = 0; i < argc; i++) {
        if (i > 0 && !strcmp(argv[i], "--set")) {
            if (i + 1 >= argc) return er_fail(ER_INPUT, "--set needs key=value");
            (*sets)[(*nsets)++] = argv[++i];
        } else if (i > 0 && !strncmp(argv[i], "--set=", 6)) {
            (*sets)[(*nsets)++] = argv[i] + 6;
        } else {
            (*rest)[(*nrest)++] = argv[i];
        }
    }
    return ER_OK;
}

/* Build the objective, run the loop, free both. */
static int run_objective(const objective_config *oc, train_loop_config *lc, int quiet) {
    train_objective obj;
    int rc = oc->def->create(oc->cfg, &oc->loop, &obj);
    if (rc) return rc;
    char *cfg_text = objective_config_text(oc);
    lc->config_text = cfg_text;
    rc = dp_attach(lc, obj.params->n ? obj.params->t[0]->device : DEV_CPU);
    if (rc) {
        obj.free(obj.self);
        free(cfg_text);
        return rc;
    }
    if (!quiet && lc->rank == 0 && obj.describe) obj.describe(obj.self, lc, stderr);
    rc = train_loop_run(lc, &obj);
    dp_detach();
    if (!rc && !quiet && lc->rank == 0) {
        const char *d = lc->out_dir;
        fprintf(stderr, "done: %s/checkpoint.safetensors, ", d);
        if (obj.exports) fprintf(stderr, "%s/%s, ", d, obj.exports);
        fprintf(stderr, "%s/log.jsonl, %s/loss.svg\n", d, d);
    }
    obj.free(obj.self);
    free(cfg_text);
    return rc;
}

static int train_one(const objective_def *def, int argc, char **argv) {
    char **rest, **sets;
    int nrest, nsets;
    int rc = split_sets(argc, argv, &rest, &nrest, &sets, &nsets);
    const char *config = NULL, *resume = NULL, *device = NULL, *precision = NULL;
    int quiet = 0, keys = 0, stop_after = 0;
    char config_help[256];
    snprintf(config_help, sizeof config_help, "config file (%s)", def->usage);
    arg_spec specs[] = {
        {"config", ARG_STR, &config, config_help},
        {"resume", ARG_STR, &resume, "continue from a checkpoint (bit-exact)"},
        {"quiet", ARG_FLAG, &quiet, "no progress line"},
        {"keys", ARG_FLAG, &keys, "list the config keys (the objective's, then the loop's) with their defaults and exit"},
        {"stop-after", ARG_INT, &stop_after, "testing aid: stop (with a checkpoint) after N steps"},
        {"device", ARG_STR, &device, "cpu | cuda | cuda:N (overrides train.device)"},
        {"precision", ARG_STR, &precision, "fp32 | bf16 (overrides train.precision)"},
    };
    objective_config oc;
    objective_config_init(&oc, def);
    if (!rc) {
        char usage[512];
        snprintf(usage, sizeof usage,
                 "endoret train %s --config C [--set key=value ...] [--resume CKPT] [--device cpu|cuda] [--precision fp32|bf16]\n  %s",
                 def->name, def->help);
        rc = args_parse(nrest, rest, specs, (int)(sizeof specs / sizeof specs[0]), usage, NULL, NULL);
        if (rc == ARGS_HELP) { rc = ER_OK; goto out; }
    }
    if (!rc && keys) {
        cfg_print_keys(stdout, oc.specs, oc.nspecs);
        goto out;
    }
    if (!rc && !config) rc = er_fail(ER_INPUT, "train %s: --config is required (see --help)", def->name);
    if (!rc) rc = objective_config_load(&oc, config, sets, nsets);
    if (!rc && device) cfg_set_str(&oc.loop.device, device);
    if (!rc && precision) cfg_set_str(&oc.loop.precision, precision);
    if (!rc) dp_pick_device(&oc.loop.device);
    train_loop_config lc;
    if (!rc) rc = loop_keys_to_config(&oc.loop, &lc); /* bad loop keys: before any work */
    if (!rc) {
        if (oc.loop.threads > 0) omp_set_num_threads(oc.loop.threads);
        lc.progress = !quiet;
        lc.resume = resume;
        lc.stop_after = stop_after;
        rc = run_objective(&oc, &lc, quiet);
    }
out:
    objective_config_free(&oc);
    free(rest);
    free(sets);
    return rc;
}

/* How a rank of a data-parallel run ends. A stop every rank agreed on (--stop-after, SIGINT/SIGTERM:
 * the loop sets train_interrupted) leaves the group normally, rank 0 alone reporting it; any other
 * failure is this rank's own while the others wait in a collective: it names the rank and ends the
 * whole job (rank 0's last checkpoint, written atomically, stays intact). */
static int finish_ranks(int rc) {
    if (pg_size() > 1 && rc != ER_OK && !(rc == ER_RUNTIME && train_interrupted)) {
        fprintf(stderr, "endoret train: rank %d of %d: %s\n", pg_rank(), pg_size(), er_msg());
        fflush(stderr);
        pg_abort(rc);
    }
    int quiet_rank = pg_size() > 1 && pg_rank() != 0;
    pg_finalize();
    if (rc != ER_OK && quiet_rank) exit(rc); /* rank 0 prints the message */
    return rc;
}

int cmd_train(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        printf("usage: endoret train <objective> --config C [--set key=value ...] [--resume CKPT]\n"
               "       endoret train <objective> --keys   (its keys and the loop's shared keys)\n"
               "objectives:\n");
        int n;
        const objective_def *const *all = objective_list(&n);
        for (int i = 0; i < n; i++) printf("  %-8s %s\n", all[i]->name, all[i]->help);
        return argc < 2 ? ER_INPUT : ER_OK;
    }
    const objective_def *def = objective_find(argv[1]);
    if (!def) return ER_INPUT;
    int rc = pg_init(); /* `mpirun -np N`: joins the N ranks (nn/base/process_group.h) */
    return rc ? rc : finish_ranks(train_one(def, argc - 1, argv + 1));
}
