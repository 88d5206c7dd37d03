/* Data-parallel training (issue 15) on the CPU: `mpirun -np 2 endoret train image` against one
 * process on the same global batch, resume across rank counts, a killed rank. The runs are real
 * processes of build/<...>/endoret beside this test binary; without MPI (or mpirun) the tests skip
 * saying why, and a build without MPI is checked to refuse a launch as several ranks. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoints/safetensors.h"
#include "datasets/synth.h"
#include "nn/base/base.h"
#include "tests/test_util.h"

int cmd_train(int argc, char **argv);

/* Weights and optimizer state of a 2-rank run against 1 rank after 4 SGD steps, per tensor:
 * max |a - b| <= WEIGHT_TOL * max |a|. The ranks sum their shards' gradients in another order than
 * one process (fp32), the MAE mean is taken per shard then averaged, and InfoNCE at tau 0.05 scales
 * similarities by 20: measured worst 7e-6 (the momentum buffers). SGD, not AdamW: the key bias of
 * attention has an exactly-zero gradient (softmax ignores it), whose rounding noise AdamW's
 * normalisation turns into +-lr steps in either order, 1-rank runs included. */
#define WEIGHT_TOL 1e-4
/* Logged losses (printed with 6 significant digits) */
#define LOSS_REL_TOL 2e-5

static char exe[1100], dir[256];

/* The tiny image objective (one ViT block of width 32 on 16x16 crops, batch 4 = 2 images per rank,
 * MixUp/CutMix on so views are mixed across ranks) on 8 synthetic scenes, written to <dir>/tiny.cfg. */
static void setup(void) {
    SLOW_TEST();
#ifndef ENDORET_MPI
    cr_skip_test("built without MPI (install libopenmpi-dev and rebuild): multi-rank tests skipped");
#endif
    if (system("command -v mpirun >/dev/null 2>&1")) cr_skip_test("mpirun not found (apt-get install openmpi-bin): multi-rank tests skipped");
    char self[1024];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    cr_assert(n > 0);
    self[n] = 0;
    *strrchr(self, '/') = 0;
    snprintf(exe, sizeof exe, "%s/endoret", self);
    if (access(exe, X_OK)) cr_skip_test("%s not built (make build/endoret): multi-rank tests skipped", exe);
    snprintf(dir, sizeof dir, "%s", test_tmpdir());
    char data[300];
    snprintf(data, sizeof data, "%s/data", dir);
    synth_config sc = {.scenes = 8, .views = 2, .size = 32, .seed = 3, .threads = 1};
    cr_assert_eq(synth_write_dataset(data, &sc), 0, "%s", er_msg());
    char cfg[300];
    snprintf(cfg, sizeof cfg, "%s/tiny.cfg", dir);
    FILE *f = fopen(cfg, "w");
    cr_assert(f);
    fprintf(f, "[model]\narch = vit_tiny\nimg = 16\npatch = 4\ndim = 32\ndepth = 1\nheads = 2\nhead_dim = 16\n"
               "[decoder]\ndim = 16\ndepth = 1\nheads = 2\n[aug]\npreset = mae\nmix_prob = 0.5\n"
               "[data]\nmanifest = %s/manifest.csv\nsplit =\ncache_side = 20\n"
               "[train]\nsteps = 4\nbatch = 4\nseed = 1\noptimizer = sgd\nmomentum = 0.9\nlr = 0.01\nwarmup_steps = 0\nthreads = 1\n"
               "[out]\nlog_every = 1\nckpt_every = 2\n", data);
    fclose(f);
}

/* Runs `endoret train image` on `ranks` processes (1: no mpirun) into <dir>/<out> with extra
 * arguments; stdout+stderr go to <dir>/<out>.txt. Returns the exit status. */
static int train(int ranks, const char *out, const char *extra) {
    char cmd[4096], mpi[128] = "";
    if (ranks > 1) snprintf(mpi, sizeof mpi, "timeout 300 mpirun --allow-run-as-root --oversubscribe -np %d ", ranks);
    snprintf(cmd, sizeof cmd, "cd %s && %s%s train image --config tiny.cfg --set out.dir=%s --quiet %s > %s.txt 2>&1",
             dir, mpi, exe, out, extra ? extra : "", out);
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128 + WTERMSIG(rc);
}

/* Largest max|a - b| / max|a| over the tensors of two checkpoints (weights, buffers, optimizer
 * state) whose largest |a| is at least `floor`; 0 when they are bit-identical. */
static double ckpt_max_diff_above(const char *out_a, const char *out_b, double floor) {
    char pa[300], pb[300];
    snprintf(pa, sizeof pa, "%s/%s/checkpoint.safetensors", dir, out_a);
    snprintf(pb, sizeof pb, "%s/%s/checkpoint.safetensors", dir, out_b);
    st_file a, b;
    cr_assert_eq(st_open(pa, &a), 0, "%s", er_msg());
    cr_assert_eq(st_open(pb, &b), 0, "%s", er_msg());
    cr_assert_eq(a.n, b.n, "%s and %s hold different tensors", pa, pb);
    double worst = 0;
    for (int i = 0; i < a.n; i++) {
        const st_tensor *ta = &a.tensors[i], *tb = st_find(&b, ta->name);
        cr_assert(tb, "%s lacks %s", pb, ta->name);
        if (ta->dtype != ST_F32) continue; /* step counters: compared through the log */
        int64_t n = 1;
        for (int d = 0; d < ta->ndim; d++) n *= ta->shape[d];
        float *x = xmalloc(n * sizeof(float)), *y = xmalloc(n * sizeof(float));
        cr_assert_eq(st_read_f32(&a, ta->name, x, n), 0, "%s", er_msg());
        cr_assert_eq(st_read_f32(&b, ta->name, y, n), 0, "%s", er_msg());
        double diff = 0, scale = 0;
        for (int64_t k = 0; k < n; k++) {
            diff = fmax(diff, fabs((double)x[k] - y[k]));
            scale = fmax(scale, fabs((double)x[k]));
        }
        if (scale >= floor) worst = fmax(worst, scale > 0 ? diff / scale : diff);
        free(x);
        free(y);
    }
    st_close(&a);
    st_close(&b);
    return worst;
}

static double ckpt_max_diff(const char *out_a, const char *out_b) { return ckpt_max_diff_above(out_a, out_b, 0); }

/* The "loss" of every record of <dir>/<out>/log.jsonl (up to 16); returns how many. */
static int logged_losses(const char *out, double *loss, int *world) {
    char p[300], line[2048];
    snprintf(p, sizeof p, "%s/%s/log.jsonl", dir, out);
    FILE *f = fopen(p, "r");
    cr_assert(f, "%s missing", p);
    int n = 0;
    *world = 0;
    while (n < 16 && fgets(line, sizeof line, f)) {
        const char *l = strstr(line, "\"loss\": "), *w = strstr(line, "\"world_size\": ");
        if (!l) continue;
        loss[n++] = atof(l + 8);
        *world = w ? atoi(w + 14) : 1;
    }
    fclose(f);
    return n;
}

static void expect_losses_agree(const char *a, const char *b, double rel) {
    double la[16], lb[16];
    int wa, wb, na = logged_losses(a, la, &wa), nb = logged_losses(b, lb, &wb);
    cr_assert_eq(na, nb, "%s logged %d steps, %s %d", a, na, b, nb);
    for (int i = 0; i < na; i++)
        cr_expect(fabs(la[i] - lb[i]) <= rel * fabs(la[i]), "step %d: loss %.6g (%s) vs %.6g (%s)", i + 1, la[i], a, lb[i], b);
}

/* Trains on 1 rank into <one> and on `ranks` into <many> (with extra arguments): the checkpoints
 * and the logged losses agree to fp32 reduction order. */
static void expect_ranks_agree(int ranks, const char *one, const char *many, const char *extra) {
    cr_assert_eq(train(1, one, extra), 0, "see %s/%s.txt", dir, one);
    cr_assert_eq(train(ranks, many, extra), 0, "%d ranks failed: see %s/%s.txt", ranks, dir, many);
    double d = ckpt_max_diff(one, many);
    cr_expect(d <= WEIGHT_TOL, "%d-rank weights (%s) differ from 1-rank by %g (tolerance %g)", ranks, many, d, WEIGHT_TOL);
    expect_losses_agree(one, many, LOSS_REL_TOL);
}

Test(train_data_parallel, two_ranks_equal_one_rank_on_the_same_global_batch) {
    setup();
    expect_ranks_agree(2, "one", "two", NULL);
    double l[16];
    int w;
    logged_losses("two", l, &w);
    cr_expect_eq(w, 2, "log.jsonl records of the 2-rank run carry world_size 2 (got %d)", w);
    char p[300];
    snprintf(p, sizeof p, "%s/two/checkpoint.safetensors", dir);
    st_file f;
    cr_assert_eq(st_open(p, &f), 0, "%s", er_msg());
    const char *ws = st_meta(&f, "endoret.world_size");
    cr_expect(ws && !strcmp(ws, "2"), "checkpoint metadata endoret.world_size: %s", ws ? ws : "absent");
    st_close(&f);
}

/* One image per rank on 4 ranks (MixUp partners on other ranks, measured 1.5e-5), and gradient
 * accumulation (2 micro-batches per step) on 2 ranks. */
Test(train_data_parallel, four_ranks_and_accumulation_equal_one_rank) {
    setup();
    expect_ranks_agree(4, "one", "four", NULL);
    expect_ranks_agree(2, "one_accum", "two_accum", "--set train.accum=2");
}

/* Trains into <dir>/<out> on `ranks` processes, stopped after 2 of 4 steps (exit 1, checkpoint
 * written), then resumed from that checkpoint on `resume_ranks`; `extra` ("" or options ending in a
 * space) goes to both runs. */
static void stop_and_resume(int ranks, const char *out, int resume_ranks, const char *extra) {
    char args[480];
    snprintf(args, sizeof args, "%s--stop-after 2", extra);
    cr_assert_eq(train(ranks, out, args), 1, "see %s/%s.txt", dir, out);
    snprintf(args, sizeof args, "%s--resume %s/%s/checkpoint.safetensors", extra, dir, out);
    cr_assert_eq(train(resume_ranks, out, args), 0, "see %s/%s.txt", dir, out);
}

Test(train_data_parallel, resume_with_any_rank_count_matches_the_uninterrupted_run) {
    setup();
    cr_assert_eq(train(2, "full", NULL), 0, "see %s/full.txt", dir);
    /* stopped after 2 of 4 steps (exit 1, checkpoint written), resumed on 2 ranks: bit-exact */
    stop_and_resume(2, "again", 2, "");
    cr_expect_eq(ckpt_max_diff("full", "again"), 0.0, "2-rank resume is not bit-exact");
    expect_losses_agree("full", "again", 0);
    /* the same 2-rank checkpoint resumed by one process: the same run to fp32 reduction order */
    stop_and_resume(2, "other", 1, "");
    double d = ckpt_max_diff("full", "other");
    cr_expect(d <= WEIGHT_TOL, "2 ranks -> 1 rank resume differs by %g (tolerance %g)", d, WEIGHT_TOL);
    expect_losses_agree("full", "other", LOSS_REL_TOL);
}

/* bf16 (issue #27): 2 ranks against 1 on the same global batch, and a 2-rank resume, bit-exact. Each
 * bf16 rounding is per element, so the split changes the same fp32 sums as in fp32; but a sum that
 * moves by an ulp can move a rounded bf16 value by one of its ulps (2^-8 relative), and on this tiny
 * model four SGD steps carry that into the weights. The bound is therefore bf16's own effect: the
 * 2-rank bf16 run must be well closer to the 1-rank bf16 run than the 1-rank fp32 run is (measured:
 * 0.014 of the weights' scale against 0.36 on this 4-step, lr 0.01 toy). Resume replays the same
 * steps in the same processes: no tolerance. */
Test(train_data_parallel, bf16_two_ranks_track_one_rank_and_resume_is_bit_exact) {
    setup();
    cr_assert_eq(train(1, "one32", NULL), 0, "see %s/one32.txt", dir);
    cr_assert_eq(train(1, "one16", "--precision bf16"), 0, "see %s/one16.txt", dir);
    cr_assert_eq(train(2, "two16", "--precision bf16"), 0, "see %s/two16.txt", dir);
    const double split = ckpt_max_diff("one16", "two16"), prec = ckpt_max_diff("one16", "one32");
    cr_log_info("bf16: 2 ranks against 1 differ by %g of the weights' scale; bf16 against fp32 (1 rank) by %g", split, prec);
    cr_expect(split > 0 && split < prec / 2, "bf16: 2-rank weights differ from 1-rank by %g, bf16 from fp32 by %g", split, prec);
    stop_and_resume(2, "again16", 2, "--precision bf16 ");
    cr_expect_eq(ckpt_max_diff("two16", "again16"), 0.0, "bf16 2-rank resume is not bit-exact");
    expect_losses_agree("two16", "again16", 0);
}

/* Starts an endless 2-rank run into <dir>/<out> (checkpoints every ckpt_every steps); once
 * <dir>/<out>/<wait_for> is non-empty, sends `signal` to rank 1 and waits for the job. Returns its
 * exit status; *text receives what the job printed (malloc'd). Non-empty, not just present:
 * log.jsonl gets its first line after the first step's cross-rank average, so by then every rank is
 * inside the loop with its handlers installed; the file exists earlier (rank 0 opens it), and on
 * loaded cores rank 1 could still be setting up then: a signal there ended it before the ranks
 * could agree on a stop (seen once in a CI run). */
static int signal_rank_1(const char *out, int ckpt_every, const char *wait_for, const char *signal, char **text) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "cd %s && mkdir -p %s && (timeout 300 mpirun --allow-run-as-root --oversubscribe -np 2 sh -c "
             "'echo $$ > %s/pid.$OMPI_COMM_WORLD_RANK; exec %s train image --config tiny.cfg --set out.dir=%s "
             "--set train.steps=1000000 --set out.ckpt_every=%d --quiet' > %s/out.txt 2>&1 & mp=$!; "
             "for i in $(seq 600); do [ -s %s/%s ] && [ -f %s/pid.1 ] && break; sleep 0.1; done; "
             "sleep 0.3; kill -%s $(cat %s/pid.1); wait $mp; echo $? > %s/rc)",
             dir, out, out, exe, out, ckpt_every, out, out, wait_for, out, signal, out, out);
    cr_assert_eq(system(cmd), 0);
    char p[300];
    size_t len;
    snprintf(p, sizeof p, "%s/%s/rc", dir, out);
    cr_assert_eq(read_file(p, text, &len), 0);
    int rc = atoi(*text);
    free(*text);
    snprintf(p, sizeof p, "%s/%s/out.txt", dir, out);
    cr_assert_eq(read_file(p, text, &len), 0);
    return rc;
}

/* The step of <dir>/<out>/checkpoint.safetensors (asserts that it reads). */
static int64_t checkpoint_step(const char *out) {
    char p[300];
    snprintf(p, sizeof p, "%s/%s/checkpoint.safetensors", dir, out);
    st_file f;
    cr_assert_eq(st_open(p, &f), 0, "the last checkpoint is damaged: %s", er_msg());
    int64_t step = 0;
    cr_expect_eq(st_read_i64(&f, "train.step", &step, 1), 0, "%s", er_msg());
    st_close(&f);
    return step;
}

Test(train_data_parallel, a_killed_rank_ends_the_job_naming_it_and_the_checkpoint_survives) {
    setup();
    char *text;
    int rc = signal_rank_1("kill", 1, "checkpoint.safetensors", "KILL", &text);
    cr_expect(rc != 0 && rc != 124, "the job exited with %d after a rank was killed (124: it hung)", rc);
    cr_expect(strstr(text, "rank 1") != NULL, "the job's message does not name rank 1:\n%s", text);
    free(text);
    cr_expect(checkpoint_step("kill") >= 1);
}

Test(train_data_parallel, batch_not_divisible_by_the_ranks_is_refused) {
    setup();
    cr_assert_eq(train(2, "odd", "--set train.batch=3"), 2, "see %s/odd.txt", dir);
    char p[300], *text = NULL;
    size_t len;
    snprintf(p, sizeof p, "%s/odd.txt", dir);
    cr_assert_eq(read_file(p, &text, &len), 0);
    const char *m = strstr(text, "train.batch = 3 is not a multiple of the 2 ranks");
    cr_expect(m != NULL, "%s", text);
    cr_expect(!m || !strstr(m + 1, "train.batch = 3"), "the message is said more than once:\n%s", text);
    free(text);
}

/* A setup error one rank alone meets (here: its manifest is missing) is said by that rank, named. */
Test(train_data_parallel, a_setup_error_of_one_rank_names_it) {
    setup();
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "cd %s && cp data/manifest.csv data/manifest0.csv && timeout 300 mpirun --allow-run-as-root --oversubscribe -np 2 "
             "sh -c 'exec %s train image --config tiny.cfg --set out.dir=one_bad --set data.manifest=data/manifest$OMPI_COMM_WORLD_RANK.csv "
             "--quiet' > one_bad.txt 2>&1",
             dir, exe);
    int rc = system(cmd);
    cr_expect(WIFEXITED(rc) && WEXITSTATUS(rc) == 2, "exit status %d", WIFEXITED(rc) ? WEXITSTATUS(rc) : -1);
    char p[300], *text = NULL;
    size_t len;
    snprintf(p, sizeof p, "%s/one_bad.txt", dir);
    cr_assert_eq(read_file(p, &text, &len), 0);
    cr_expect(strstr(text, "rank 1 of 2: data/manifest1.csv") != NULL, "%s", text);
    free(text);
}

/* A build without MPI started as one of several ranks refuses with one message (exit 2). */
Test(train_data_parallel, a_build_without_mpi_refuses_to_run_as_several_ranks) {
#ifdef ENDORET_MPI
    cr_skip_test("built with MPI: the refusal of a build without MPI is checked by `make MPI=0 test`");
#else
    setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
    char *argv[] = {"train", "image", "--config", "configs/demo_image.cfg", NULL};
    int rc = cmd_train(4, argv);
    cr_expect_eq(rc, ER_INPUT);
    cr_expect(strstr(er_msg(), "built without MPI") != NULL, "%s", er_msg());
#endif
}

/* SIGTERM to one rank (rank 1, which writes nothing) stops every rank after the same step: rank 0
 * writes the checkpoint of that step and says so; the job exits 1. */
Test(train_data_parallel, sigterm_to_one_rank_stops_all_with_a_checkpoint) {
    setup();
    char *text;
    int rc = signal_rank_1("term", 100000, "log.jsonl", "TERM", &text);
    cr_expect_eq(rc, 1, "exit status %d", rc);
    const char *m = strstr(text, "interrupted at step ");
    cr_assert(m, "no 'interrupted' message:\n%s", text);
    long long said = atoll(m + 20);
    free(text);
    int64_t step = checkpoint_step("term");
    cr_expect(step >= 1 && step == said, "checkpoint at step %lld, message says %lld", (long long)step, said);
}

/* The scene objective (issue 12) on 2 ranks: each rank encodes its scenes' views, the scene
 * descriptors are gathered for InfoNCE, each rank reconstructs its own targets. Tensors of the
 * decoder's query path are skipped below 1e-6: with one key/value token the attention ignores its
 * queries, so their gradient is exactly zero in theory and ~1e-12 of rounding noise in practice
 * (measured: those tensors differ by 1e-12 absolute, everything else by <= 7e-6 relative). */
Test(train_data_parallel, scene_objective_two_ranks_equal_one_rank) {
    setup();
    cr_assert_eq(train(1, "enc", "--set train.steps=1"), 0, "see %s/enc.txt", dir);
    char cmd[4096], cfg[300];
    snprintf(cfg, sizeof cfg, "%s/scene.cfg", dir);
    FILE *f = fopen(cfg, "w");
    cr_assert(f);
    fprintf(f, "[model]\narch = endofinder_scene\nscene_heads = 2\ndecoder_dim = 16\ndecoder_heads = 2\n"
               "[scene]\nimage_encoder = enc/encoder.safetensors\nviews = 2\n"
               "[data]\nmanifest = data/manifest.csv\nsplit =\ncache_side = 20\n"
               "[train]\nbatch = 4\nsteps = 3\noptimizer = sgd\nmomentum = 0.9\nlr = 0.01\nwarmup_steps = 0\nthreads = 1\n"
               "[out]\nlog_every = 1\n");
    fclose(f);
    for (int ranks = 1; ranks <= 2; ranks++) {
        char mpi[128] = "";
        if (ranks > 1) snprintf(mpi, sizeof mpi, "timeout 300 mpirun --allow-run-as-root --oversubscribe -np %d ", ranks);
        snprintf(cmd, sizeof cmd,
                 "cd %s && %s%s train scene --config scene.cfg --set out.dir=scene%d --quiet > scene%d.txt 2>&1", dir, mpi, exe, ranks, ranks);
        int rc = system(cmd);
        cr_assert(WIFEXITED(rc) && WEXITSTATUS(rc) == 0, "%d ranks: see %s/scene%d.txt", ranks, dir, ranks);
    }
    double d = ckpt_max_diff_above("scene1", "scene2", 1e-6);
    cr_expect(d <= WEIGHT_TOL, "2-rank scene weights differ from 1-rank by %g (tolerance %g)", d, WEIGHT_TOL);
    expect_losses_agree("scene1", "scene2", LOSS_REL_TOL);
}

/* PGCon on 2 ranks (issue 15): each rank makes the views of its half of the batch and draws its
 * samples' negatives; the WIN embeddings are all-gathered (WINCon's in-batch negatives), batch norm
 * takes the global batch's statistics (model.sync_bn), and every rank applies the whole batch's
 * memory update. After the bank fill and one step, weights, batch-norm statistics, momentum and the
 * memory bank match one process (measured 3.7e-5); without sync_bn they do not (each rank's own batch
 * statistics). Over 3 steps the logged losses agree; the weights drift further apart than the ViT's:
 * a tiny ResNet's ReLU and max-pool kinks flip on rounding-level differences (measured: losses within
 * 1e-5, momentum buffers within a few % after 3 steps), so the state is compared after one step. */
/* `train <objective> --config <objective>.cfg` on `ranks` processes into <dir>/<out>; it must succeed. */
static void objective_run(int ranks, const char *objective, const char *out, const char *extra) {
    char cmd[4096];
    char mpi[128] = "";
    if (ranks > 1) snprintf(mpi, sizeof mpi, "timeout 300 mpirun --allow-run-as-root --oversubscribe -np %d ", ranks);
    snprintf(cmd, sizeof cmd, "cd %s && %s%s train %s --config %s.cfg --set out.dir=%s %s --quiet > %s.txt 2>&1", dir,
             mpi, exe, objective, objective, out, extra, out);
    int rc = system(cmd);
    cr_assert(WIFEXITED(rc) && WEXITSTATUS(rc) == 0, "%d ranks: see %s/%s.txt", ranks, dir, out);
}

static void pgcon_run(int ranks, const char *out, const char *extra) { objective_run(ranks, "pgcon", out, extra); }

Test(train_data_parallel, pgcon_wincon_two_ranks_equal_one_rank) {
    setup();
    char cfg[300];
    snprintf(cfg, sizeof cfg, "%s/pgcon.cfg", dir);
    FILE *f = fopen(cfg, "w");
    cr_assert(f);
    fprintf(f, "[model]\narch = resnet18\nwidth = 8\nimg = 64\nproj = 16\n"
               "[pgcon]\nvariant = wincon\nnegatives = 6\nprior_out = 64\ntile_out = 32\nwin_out = 64\n"
               "[data]\nmanifest = data/manifest.csv\nsplit =\n"
               "[train]\nbatch = 4\nsteps = 1\noptimizer = sgd\nmomentum = 0.9\nlr = 0.01\nschedule = cosine\nthreads = 1\n"
               "[out]\nlog_every = 1\n");
    fclose(f);
    pgcon_run(1, "pgcon1", "");
    pgcon_run(2, "pgcon2", "");
    pgcon_run(2, "pgcon2_nosync", "--set model.sync_bn=false");
    double d = ckpt_max_diff("pgcon1", "pgcon2"), nosync = ckpt_max_diff("pgcon1", "pgcon2_nosync");
    cr_log_info("PGCon / WINCon after one step, 2 ranks vs 1: %.2e (weights, statistics, momentum, bank); "
                "without sync_bn %.2e", d, nosync);
    cr_expect(d <= WEIGHT_TOL, "2-rank PGCon state differs from 1-rank by %g (tolerance %g)", d, WEIGHT_TOL);
    cr_expect(nosync > 100 * WEIGHT_TOL, "per-rank batch statistics gave the global batch's result (%g)", nosync);
    /* channels-last: no synchronised batch norm yet, so 2 ranks with sync_bn are refused before any
     * step, naming both keys; without it the run is the NCHW one's in another summation order */
    char cmd0[4096];
    snprintf(cmd0, sizeof cmd0, "cd %s && timeout 300 mpirun --allow-run-as-root --oversubscribe -np 2 %s train pgcon --config "
             "pgcon.cfg --set out.dir=pgcon2_nhwc_sync --set model.layout=nhwc --quiet > pgcon2_nhwc_sync.txt 2>&1", dir, exe);
    int rc0 = system(cmd0);
    cr_expect(WIFEXITED(rc0) && WEXITSTATUS(rc0) == 2, "nhwc with sync_bn on 2 ranks: exit %d, see %s/pgcon2_nhwc_sync.txt",
              WIFEXITED(rc0) ? WEXITSTATUS(rc0) : -1, dir);
    char msg[4096] = "";
    snprintf(cmd0, sizeof cmd0, "%s/pgcon2_nhwc_sync.txt", dir);
    FILE *mf = fopen(cmd0, "r");
    if (mf) msg[fread(msg, 1, sizeof msg - 1, mf)] = 0, fclose(mf);
    cr_expect(strstr(msg, "model.layout = nhwc has no synchronised batch norm") && strstr(msg, "model.sync_bn = false"), "%s", msg);
    pgcon_run(2, "pgcon2_nhwc", "--set model.sync_bn=false --set model.layout=nhwc");
    double dl = ckpt_max_diff("pgcon2_nosync", "pgcon2_nhwc");
    cr_log_info("PGCon 2 ranks without sync_bn, NHWC against NCHW after one step: %.2e", dl);
    cr_expect(dl <= WEIGHT_TOL, "2-rank NHWC PGCon differs from NCHW by %g (tolerance %g)", dl, WEIGHT_TOL);
    pgcon_run(1, "pgcon1_3", "--set train.steps=3");
    pgcon_run(2, "pgcon2_3", "--set train.steps=3");
    expect_losses_agree("pgcon1_3", "pgcon2_3", 1e-4);
    /* a 2-rank run stopped after 1 of 3 steps and resumed on 2 ranks: bit-exact, bank included (every
     * rank reads the bank from the checkpoint instead of filling it again) */
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "cd %s && timeout 300 mpirun --allow-run-as-root --oversubscribe -np 2 %s train pgcon --config "
             "pgcon.cfg --set out.dir=pgcon2_r --set train.steps=3 --stop-after 1 --quiet > pgcon2_r.txt 2>&1", dir, exe);
    int rc = system(cmd);
    cr_assert(WIFEXITED(rc) && WEXITSTATUS(rc) == 1, "stopped run: see %s/pgcon2_r.txt", dir);
    char resume[400];
    snprintf(resume, sizeof resume, "--set train.steps=3 --resume %s/pgcon2_r/checkpoint.safetensors", dir);
    pgcon_run(2, "pgcon2_r", resume);
    cr_expect_eq(ckpt_max_diff("pgcon2_3", "pgcon2_r"), 0.0, "2-rank PGCon resume is not bit-exact");
}

/* The dual-backbone objective on 2 ranks (issue 15): each rank augments and encodes its half of the
 * batch; the embeddings are all-gathered so the triplet miner sees the global batch (gradient back to
 * their owner), and the fusion head's batch norm takes the global batch's statistics. LoRA dropout is
 * 0 here: a rank draws its dropout masks over its own rows, so with dropout the runs agree in
 * distribution, not bit for bit. Measured: 2.3e-6 after 3 steps. */
Test(train_data_parallel, dual_two_ranks_equal_one_rank) {
    setup();
    char cmd[4096], cfg[300];
    snprintf(cfg, sizeof cfg, "%s/dual.cfg", dir);
    FILE *f = fopen(cfg, "w");
    cr_assert(f);
    fprintf(f, "[model]\narch = dual_backbone\nimg = 28\n"
               "[dual]\ngastronet_arch = vit_tiny_patch14\ndinov2_arch = vit_tiny_patch14\ndepth = 1\ndinov2_registers = 2\n"
               "embed_dim = 16\nlora_r = 4\nlora_dropout = 0\n"
               "[loss]\nminer = all\n"
               "[data]\nmanifest = data/manifest.csv\nsplit =\nlabel = scene\ncache_side = 32\n"
               "[train]\nbatch = 8\nsteps = 3\noptimizer = sgd\nmomentum = 0.9\nlr = 0.01\nwarmup_steps = 0\nthreads = 1\n"
               "[eval]\nevery = 0\n[out]\nlog_every = 1\n");
    fclose(f);
    for (int ranks = 1; ranks <= 2; ranks++) {
        char mpi[128] = "";
        if (ranks > 1) snprintf(mpi, sizeof mpi, "timeout 300 mpirun --allow-run-as-root --oversubscribe -np %d ", ranks);
        snprintf(cmd, sizeof cmd, "cd %s && %s%s train dual --config dual.cfg --set out.dir=dual%d --quiet > dual%d.txt 2>&1",
                 dir, mpi, exe, ranks, ranks);
        int rc = system(cmd);
        cr_assert(WIFEXITED(rc) && WEXITSTATUS(rc) == 0, "%d ranks: see %s/dual%d.txt", ranks, dir, ranks);
    }
    /* fusion.0.bias sits right before the batch norm, which removes any constant: its gradient is 0 in
     * theory and ~1e-9 of rounding noise in practice, so tensors below 1e-6 are compared absolutely */
    double d = ckpt_max_diff_above("dual1", "dual2", 1e-6);
    cr_log_info("dual backbone, 2 ranks vs 1 after 3 steps: worst relative difference %.2e", d);
    cr_expect(d <= WEIGHT_TOL, "2-rank dual weights differ from 1-rank by %g (tolerance %g)", d, WEIGHT_TOL);
    expect_losses_agree("dual1", "dual2", LOSS_REL_TOL);
}

/* Fine-tuning on 2 ranks (issue 28; it refused data parallel before): each rank augments and
 * classifies its half of the batch, batch norm takes the global batch's statistics (model.sync_bn,
 * the default), the loop averages the gradients and the cross-entropy. Full fine-tuning of a
 * random-init ResNet and linear evaluation (frozen trunk), 2 steps each, against one process. */
Test(train_data_parallel, finetune_two_ranks_equal_one_rank) {
    setup();
    char cfg[300];
    snprintf(cfg, sizeof cfg, "%s/finetune.cfg", dir);
    FILE *f = fopen(cfg, "w");
    cr_assert(f);
    fprintf(f, "[model]\narch = resnet18\nwidth = 8\nimg = 64\n"
               "[data]\nmanifest = data/manifest.csv\nsplit =\n"
               "[train]\nbatch = 4\nsteps = 2\noptimizer = sgd\nmomentum = 0.9\nlr = 0.01\nwarmup_steps = 0\nthreads = 1\n"
               "[eval]\nevery = 0\n[out]\nlog_every = 1\n");
    fclose(f);
    const char *mode[2] = {"", "--set finetune.freeze=true"};
    for (int m = 0; m < 2; m++) {
        char one[32], two[32];
        snprintf(one, sizeof one, "ft%d_1", m);
        snprintf(two, sizeof two, "ft%d_2", m);
        objective_run(1, "finetune", one, mode[m]);
        objective_run(2, "finetune", two, mode[m]);
        double d = ckpt_max_diff(one, two);
        cr_log_info("finetune (%s), 2 ranks vs 1 after 2 steps: worst relative difference %.2e", m ? "frozen" : "full", d);
        cr_expect(d <= WEIGHT_TOL, "2-rank finetune (%s) differs from 1-rank by %g (tolerance %g)", m ? "frozen" : "full", d,
                  WEIGHT_TOL);
        expect_losses_agree(one, two, LOSS_REL_TOL);
    }
}
