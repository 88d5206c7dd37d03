/* cmd_train.c — `endoret train <objective> --config C [--set key=value ...] [--resume CKPT]`.
 * The objectives are those of train/objective.h's registry; this file only reads the command line,
 * the config (the objective's keys + the loop's shared keys) and runs train/loop.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/common_opts.h"
#include "nn/base/base.h"
#include "nn/base/config.h"
#include "nn/base/process_group.h"
#include "nn/base/progress.h"
#include "train/data_parallel.h"
#include "train/loop.h"
#include "train/loop_keys.h"
#include "train/objective.h"

/* Data parallel: every rank checks the same command line, config and data, so a bad one stops all
 * of them at this one agreement (before any other collective), said once: by rank 0, or else by
 * the ranks that met it. Called exactly once per rank that gets past argument parsing. */
static int setup_agreed, silent_rank;

static int agree_on_setup(int rc) {
    if (pg_size() < 2) return rc;
    int v[2] = {rc, pg_rank() == 0 ? rc : ER_OK}; /* the worst status, rank 0's status */
    if (pg_allreduce_max(v, 2)) return ER_RUNTIME;
    if (v[0] == ER_OK) return ER_OK;
    setup_agreed = 1;
    silent_rank = v[1] ? pg_rank() != 0 : rc == ER_OK;
    if (rc == ER_OK) return er_fail(v[0], "stopped: another rank could not start");
    if (pg_rank() != 0) {
        char why[1024];
        snprintf(why, sizeof why, "%s", er_msg());
        er_fail(rc, "rank %d of %d: %s", pg_rank(), pg_size(), why);
    }
    return rc;
}

/* Build the objective, run the loop, free both. */
static int run_objective(const objective_config *oc, train_loop_config *lc, int quiet) {
    train_objective obj;
    int created = objective_create(oc, &obj);
    int rc = agree_on_setup(created);
    if (rc) {
        if (created == ER_OK) obj.free(obj.self); /* another rank failed */
        return rc;
    }
    char *cfg_text = objective_config_text(oc);
    lc->config_text = cfg_text;
    rc = dp_attach(lc, obj.params->n ? obj.params->t[0]->device : DEV_CPU);
    if (rc) {
        obj.free(obj.self);
        free(cfg_text);
        return rc;
    }
    if (!quiet && lc->rank == 0) objective_describe(&obj, lc, stderr);
    int finished = 0;
    lc->resume_finished = &finished;
    rc = train_loop_run(lc, &obj);
    dp_detach();
    if (!rc && !quiet && lc->rank == 0 && !finished) {
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
    int rc = cli_split_sets(argc, argv, &rest, &nrest, &sets, &nsets);
    const char *config = NULL, *resume = NULL, *device = NULL, *precision = NULL, *set_help = NULL;
    int quiet = 0, keys = 0, stop_after = 0, profile = 0;
    char config_help[256];
    snprintf(config_help, sizeof config_help, "config file (%s)", def->usage);
    arg_spec specs[] = {
        {"config", ARG_STR, &config, config_help},
        OPT_SET(&set_help),
        {"resume", ARG_STR, &resume, "continue from a checkpoint (bit-exact with its config; changed keys are named, model.*/decoder.*/train.optimizer refused; at its last step: nothing to train, exit 0)"},
        {"quiet", ARG_FLAG, &quiet, "no progress line"},
        {"keys", ARG_FLAG, &keys, "list the config keys (the objective's, then the loop's) with their defaults and exit"},
        {"stop-after", ARG_INT, &stop_after, "testing aid: stop (with a checkpoint) after N steps"},
        {"profile", ARG_FLAG, &profile, "time every kernel of the steps after the first: a table per phase and category on stderr at the end (ENDORET_PROFILE=json: as JSON)"},
        OPT_DEVICE(&device, .def = "train.device"),
        OPT_PRECISION(&precision, .def = "train.precision"),
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
        lc.progress = !quiet;
        progress_quiet(quiet); /* the image cache decode too */
        lc.resume = resume;
        lc.stop_after = stop_after;
        lc.profile = profile; /* 0: ENDORET_PROFILE decides */
        rc = run_objective(&oc, &lc, quiet);
    } else {
        rc = agree_on_setup(rc); /* the other ranks meet the same error, or wait for it here */
    }
out:
    objective_config_free(&oc);
    free(rest);
    free(sets);
    return rc;
}

/* How a rank of a data-parallel run ends. A failure every rank agreed on (a bad setup) or a stop
 * they all made (--stop-after, SIGINT/SIGTERM: the loop sets train_interrupted) leaves the group
 * normally, said once; any other failure is this rank's own while the others wait in a collective:
 * it names the rank and ends the whole job (rank 0's last checkpoint, written atomically, stays
 * intact). An agreed failure ends every rank here, after the speakers have said it (not in main). */
static int finish_ranks(int rc) {
    int agreed = setup_agreed || (rc == ER_RUNTIME && train_interrupted);
    if (pg_size() > 1 && rc != ER_OK && !agreed) {
        fprintf(stderr, "endoret train: rank %d of %d: %s\n", pg_rank(), pg_size(), er_msg());
        fflush(stderr);
        pg_abort(rc);
    }
    int silent = pg_size() > 1 && (setup_agreed ? silent_rank : pg_rank() != 0);
    if (pg_size() > 1 && rc != ER_OK) {
        /* The ranks that speak say why before any rank leaves: mpirun ends the whole job as soon as
         * one rank exits non-zero, and could otherwise kill the speaker before its message (seen
         * once in CI: a SIGTERM run ended with rank 0's "interrupted at step" never printed). */
        if (!silent) {
            fprintf(stderr, "endoret train: %s\n", er_msg()[0] ? er_msg() : "failed");
            fflush(stderr);
        }
        int said = 1;
        pg_allreduce_max(&said, 1); /* every rank waits here for the speakers */
        pg_finalize();
        exit(rc == ER_INPUT ? 2 : 1);
    }
    pg_finalize();
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
