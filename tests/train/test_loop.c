/* The shared loop with tiny hand-made objectives (no data, no model):
 *   - SGD (momentum, Nesterov, weight decay) through the loop follows torch.optim.SGD step by step
 *     (tests/ref/optim_refs.h), timm's no-decay group included, and resumes bit-exactly;
 *   - buffers (tensors without T_REQUIRES_GRAD) are checkpointed and resumed, and never touched by
 *     the optimizer, weight decay or clipping;
 *   - the all-reduce hook runs once per step after the backward and before clipping/the update,
 *     only rank 0 writes files, and world_size > 1 is recorded (and nothing for one process). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoints/safetensors.h"
#include "nn/base/base.h"
#include "nn/ops.h"
#include "tests/ref/optim_refs.h"
#include "tests/test_util.h"
#include "train/loop.h"

/* ---------------------------------------------------------------- the test objective */

/* loss = sum(w * g_step) + sum(bias * 1): dL/dw is row step % T of the torch reference gradients,
 * dL/dbias = 1. The buffer "stats.running" holds [steps seen, running mean of w]: the objective
 * updates it in every micro-batch, like batch norm's running statistics. */
typedef struct {
    tensor *w, *bias, *buf, *g, *ones;
    param_list pl;
    float w_at_step_start[REF_OPT_N];
    int with_bias;
    /* what the SGD reference check saw: max relative error of w against torch at each step start */
    double max_err;
    const double *ref;
} toy;

static void toy_init(toy *t, int with_bias, int with_buffer) {
    memset(t, 0, sizeof *t);
    t->w = tensor_param("fc.weight", 2, SHAPE(1, REF_OPT_N));
    memcpy(t->w->data, REF_OPT_P0, sizeof(float) * REF_OPT_N);
    params_add(&t->pl, t->w);
    if (with_bias) {
        t->bias = tensor_param("fc.bias", 1, SHAPE(REF_OPT_N));
        tensor_fill(t->bias, 0.5f);
        params_add(&t->pl, t->bias);
    }
    if (with_buffer) {
        t->buf = tensor_new(1, SHAPE(2)); /* no T_REQUIRES_GRAD: a buffer */
        t->buf->name = strdup("stats.running");
        params_add(&t->pl, t->buf);
    }
    t->with_bias = with_bias;
    t->g = tensor_new(2, SHAPE(1, REF_OPT_N));
    t->ones = tensor_new(1, SHAPE(REF_OPT_N));
    tensor_fill(t->ones, 1.0f);
}

static void toy_free(toy *t) {
    params_free(&t->pl);
    tensor_free(t->g);
    tensor_free(t->ones);
}

static tensor *toy_step(void *self, int64_t step, int micro, loss_terms *terms) {
    toy *t = self;
    if (micro == 0) memcpy(t->w_at_step_start, t->w->data, sizeof t->w_at_step_start);
    if (t->ref && step > 0 && step <= REF_OPT_T)
        for (int i = 0; i < REF_OPT_N; i++) {
            double want = t->ref[(step - 1) * REF_OPT_N + i];
            t->max_err = fmax(t->max_err, fabs(t->w->data[i] - want) / fmax(1, fabs(want)));
        }
    if (t->buf) {
        double mean = 0;
        for (int i = 0; i < REF_OPT_N; i++) mean += t->w->data[i];
        t->buf->data[0] += 1.0f;
        t->buf->data[1] = 0.9f * t->buf->data[1] + 0.1f * (float)(mean / REF_OPT_N);
    }
    memcpy(t->g->data, REF_OPT_GRADS + (step % REF_OPT_T) * REF_OPT_N, sizeof(float) * REF_OPT_N);
    tensor *l = op_sum_all(op_mul(t->w, t->g));
    if (t->with_bias) l = op_add(l, op_sum_all(op_mul(t->bias, t->ones)));
    loss_terms_set(terms, "lin", tensor_item(l));
    return l;
}

static train_objective toy_iface(toy *t) {
    train_objective o = {.name = "toy", .self = t, .params = &t->pl, .steps_per_epoch = 100, .images_per_step = 1,
                         .step = toy_step};
    return o;
}

/* Constant lr (no warm-up, min_lr = lr), no clipping, a log line per step. */
static train_loop_config sgd_cfg(const char *out, int64_t steps, double lr, double momentum, int nesterov, double wd) {
    train_loop_config c = {.steps = steps, .warmup_steps = 0, .lr = lr, .min_lr = lr, .weight_decay = wd,
                           .optimizer = OPTIM_SGD, .momentum = momentum, .nesterov = nesterov, .accum = 1,
                           .log_every = 1, .ckpt_every = 1000, .out_dir = out, .config_text = "test"};
    return c;
}

static void snapshot(const param_list *pl, float *out) {
    for (int i = 0; i < pl->n; i++) {
        memcpy(out, pl->t[i]->data, tensor_numel(pl->t[i]) * sizeof(float));
        out += tensor_numel(pl->t[i]);
    }
}

/* ---------------------------------------------------------------- SGD */

Test(train_loop, sgd_nesterov_follows_torch) {
    toy t;
    toy_init(&t, 0, 0);
    t.ref = REF_SGD_NESTEROV;
    train_objective o = toy_iface(&t);
    train_loop_config c = sgd_cfg(test_tmpdir(), REF_OPT_T, 0.05, 0.9, 1, 1e-3);
    cr_assert_eq(train_loop_run(&c, &o), ER_OK, "%s", er_msg());
    for (int i = 0; i < REF_OPT_N; i++) { /* the last step, checked after the run */
        double want = REF_SGD_NESTEROV[(REF_OPT_T - 1) * REF_OPT_N + i];
        t.max_err = fmax(t.max_err, fabs(t.w->data[i] - want) / fmax(1, fabs(want)));
    }
    cr_assert(t.max_err <= 2e-6, "SGD+Nesterov through the loop is %g away from torch.optim.SGD", t.max_err);
    toy_free(&t);
}

Test(train_loop, sgd_plain_and_momentum_follow_torch) {
    const struct { double lr, momentum, wd; const double *ref; } cases[] = {
        {0.1, 0, 0, REF_SGD_PLAIN}, {0.05, 0.9, 1e-3, REF_SGD_MOM}};
    for (int k = 0; k < 2; k++) {
        toy t;
        toy_init(&t, 0, 0);
        t.ref = cases[k].ref;
        train_objective o = toy_iface(&t);
        train_loop_config c = sgd_cfg(test_tmpdir(), REF_OPT_T + 1, cases[k].lr, cases[k].momentum, 0, cases[k].wd);
        cr_assert_eq(train_loop_run(&c, &o), ER_OK, "%s", er_msg());
        cr_assert(t.max_err <= 2e-6, "case %d: %g away from torch.optim.SGD", k, t.max_err);
        toy_free(&t);
    }
}

/* timm's groups: the 1-D bias gets no weight decay. dL/dbias = 1 and no momentum, so after n steps
 * bias = 0.5 - n * lr exactly as computed in float; with decay it would shrink further. */
Test(train_loop, sgd_exempts_biases_from_weight_decay) {
    toy t;
    toy_init(&t, 1, 0);
    train_objective o = toy_iface(&t);
    train_loop_config c = sgd_cfg(test_tmpdir(), 4, 0.1, 0, 0, 0.5);
    cr_assert_eq(train_loop_run(&c, &o), ER_OK, "%s", er_msg());
    float want = 0.5f;
    for (int s = 0; s < 4; s++) want -= 0.1f;
    for (int i = 0; i < REF_OPT_N; i++) cr_assert_eq(t.bias->data[i], want, "bias[%d] = %.9g, want %.9g", i, t.bias->data[i], want);
    toy_free(&t);
}

/* Runs `steps` steps, optionally stopped after `stop` and resumed from the checkpoint by a fresh
 * objective; returns the final parameters and buffers (malloc'd). */
static float *run_with_resume(train_loop_config base, int with_buffer, int64_t stop, const char *out) {
    toy t;
    toy_init(&t, 1, with_buffer);
    train_objective o = toy_iface(&t);
    train_loop_config c = base;
    c.out_dir = out;
    if (stop > 0) {
        c.stop_after = stop;
        cr_assert_eq(train_loop_run(&c, &o), ER_RUNTIME);
        cr_assert(strstr(er_msg(), "interrupted at step"), "%s", er_msg());
        toy_free(&t);
        toy_init(&t, 1, with_buffer); /* a new process: fresh parameters, buffer at 0 */
        o = toy_iface(&t);
        c.stop_after = 0;
        c.resume = path_join(out, "checkpoint.safetensors");
    }
    cr_assert_eq(train_loop_run(&c, &o), ER_OK, "%s", er_msg());
    free((char *)c.resume);
    float *snap = malloc(params_numel(&t.pl) * sizeof(float));
    snapshot(&t.pl, snap);
    toy_free(&t);
    return snap;
}

static int64_t toy_numel(int with_buffer) { return 2 * REF_OPT_N + (with_buffer ? 2 : 0); }

Test(train_loop, sgd_resume_is_bit_exact) {
    train_loop_config c = sgd_cfg(NULL, 8, 0.05, 0.9, 1, 1e-3);
    c.warmup_steps = 2; /* a schedule that depends on the restored step */
    c.min_lr = 0.01;
    char *a = path_join(test_tmpdir(), "a"), *b = path_join(test_tmpdir(), "b");
    float *x = run_with_resume(c, 0, 0, a), *y = run_with_resume(c, 0, 3, b);
    cr_assert_eq(memcmp(x, y, toy_numel(0) * sizeof(float)), 0, "SGD resume differs from the uninterrupted run");
    st_file f;
    char *ck = path_join(b, "checkpoint.safetensors");
    cr_assert_eq(st_open(ck, &f), 0, "%s", er_msg());
    cr_assert(st_find(&f, "optim.fc.weight.momentum"), "the SGD momentum buffer is checkpointed");
    cr_assert_str_eq(st_meta(&f, "endoret.optimizer"), "sgd");
    st_close(&f);
    free(x); free(y); free(a); free(b); free(ck);
}

/* ---------------------------------------------------------------- buffers */

Test(train_loop, buffers_resume_and_are_never_optimized) {
    /* AdamW with weight decay and a clip that bites: none of it may reach the buffer */
    train_loop_config c = {.steps = 7, .warmup_steps = 2, .lr = 0.05, .min_lr = 0.001, .weight_decay = 0.3,
                           .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .clip = 0.5, .accum = 2, .log_every = 1,
                           .ckpt_every = 1000, .config_text = "test"};
    char *a = path_join(test_tmpdir(), "a"), *b = path_join(test_tmpdir(), "b");
    float *x = run_with_resume(c, 1, 0, a), *y = run_with_resume(c, 1, 4, b);
    int64_t n = toy_numel(1);
    cr_assert_eq(memcmp(x, y, n * sizeof(float)), 0, "parameters or buffer differ after resume");
    /* the buffer is the last tensor: steps seen (7 steps x 2 micro-batches), exactly */
    cr_assert_eq(x[n - 2], 14.0f, "buffer counter %.9g: something besides the objective changed it", x[n - 2]);
    st_file f;
    char *ck = path_join(b, "checkpoint.safetensors");
    cr_assert_eq(st_open(ck, &f), 0, "%s", er_msg());
    cr_assert(st_find(&f, "stats.running"), "the buffer is saved");
    cr_assert(st_find(&f, "optim.fc.weight.m"), "trainable parameters have optimizer state");
    cr_assert_null(st_find(&f, "optim.stats.running.m"), "the buffer has no optimizer state");
    st_close(&f);
    free(x); free(y); free(a); free(b); free(ck);
}

/* ---------------------------------------------------------------- all-reduce hook */

typedef struct {
    toy *t;
    int calls, stale, zero, scale_by_zero;
} hook_state;

/* Averages each gradient with a copy of itself (what an all-reduce over identical replicas does),
 * recording that it ran after the backward (gradients present) and before the update (w unchanged
 * since the step started). */
static int average_with_copy(void *ctx, float *const *grads, const int64_t *n, int count) {
    hook_state *h = ctx;
    h->calls++;
    if (memcmp(h->t->w->data, h->t->w_at_step_start, sizeof h->t->w_at_step_start)) h->stale++;
    int nonzero = 0;
    for (int k = 0; k < count; k++) {
        float *copy = malloc(n[k] * sizeof(float));
        memcpy(copy, grads[k], n[k] * sizeof(float));
        for (int64_t i = 0; i < n[k]; i++) {
            nonzero |= grads[k][i] != 0;
            grads[k][i] = h->scale_by_zero ? 0.0f : (grads[k][i] + copy[i]) * 0.5f;
        }
        free(copy);
    }
    if (!nonzero) h->zero++;
    /* what it was handed: the memory of w's and bias's gradients (one flat buffer, nn/optim_flat.c),
     * and nothing of the buffer's */
    int64_t covered = 0;
    for (int k = 0; k < count; k++) {
        for (const tensor *g = h->t->w->grad; g; g = g == h->t->w->grad ? h->t->bias->grad : NULL)
            if (g->data >= grads[k] && g->data + REF_OPT_N <= grads[k] + n[k]) covered += REF_OPT_N;
        if (h->t->buf && h->t->buf->data >= grads[k] && h->t->buf->data < grads[k] + n[k])
            return er_fail(ER_RUNTIME, "hook was handed the buffer's memory");
    }
    return count == 1 && covered == 2 * REF_OPT_N
               ? ER_OK
               : er_fail(ER_RUNTIME, "hook got %d arrays covering %lld gradient elements, want one covering w and bias (%d)",
                         count, (long long)covered, 2 * REF_OPT_N);
}

static train_loop_config adamw_cfg(const char *out) {
    train_loop_config c = {.steps = 5, .warmup_steps = 0, .lr = 0.01, .min_lr = 0.01, .weight_decay = 0.1,
                           .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .clip = 1.0, .accum = 2, .log_every = 1,
                           .ckpt_every = 1000, .out_dir = out, .config_text = "test"};
    return c;
}

Test(train_loop, allreduce_runs_between_backward_and_update) {
    float plain[2 * REF_OPT_N + 2], hooked[2 * REF_OPT_N + 2];
    toy t;
    toy_init(&t, 1, 1);
    train_objective o = toy_iface(&t);
    train_loop_config c = adamw_cfg(path_join(test_tmpdir(), "plain"));
    cr_assert_eq(train_loop_run(&c, &o), ER_OK, "%s", er_msg());
    snapshot(&t.pl, plain);
    toy_free(&t);
    free((char *)c.out_dir);

    toy_init(&t, 1, 1);
    o = toy_iface(&t);
    hook_state h = {.t = &t};
    c = adamw_cfg(path_join(test_tmpdir(), "hooked"));
    c.allreduce = average_with_copy;
    c.allreduce_ctx = &h;
    cr_assert_eq(train_loop_run(&c, &o), ER_OK, "%s", er_msg());
    snapshot(&t.pl, hooked);
    cr_assert_eq(h.calls, 5, "one call per optimizer step (not per micro-batch): %d", h.calls);
    cr_assert_eq(h.stale, 0, "the hook ran after an update");
    cr_assert_eq(h.zero, 0, "the hook ran before the backward");
    cr_assert_eq(memcmp(plain, hooked, sizeof plain), 0, "averaging identical replicas changed the result");
    toy_free(&t);
    free((char *)c.out_dir);
}

/* Gradients zeroed by the hook: AdamW moves nothing but weight decay (decayed weights shrink by
 * (1 - lr * wd) per step, the no-decay bias stays), and the logged gradient norm is 0 — so the hook
 * ran before clipping, the norm and the update. */
Test(train_loop, allreduce_zeroing_gradients_leaves_only_weight_decay) {
    toy t;
    toy_init(&t, 1, 0);
    train_objective o = toy_iface(&t);
    hook_state h = {.t = &t, .scale_by_zero = 1};
    const char *out = test_tmpdir();
    train_loop_config c = adamw_cfg(out);
    c.allreduce = average_with_copy;
    c.allreduce_ctx = &h;
    cr_assert_eq(train_loop_run(&c, &o), ER_OK, "%s", er_msg());
    for (int i = 0; i < REF_OPT_N; i++) {
        float want = REF_OPT_P0[i];
        for (int s = 0; s < 5; s++) want *= 1.0f - 0.01f * 0.1f;
        cr_assert(fabsf(t.w->data[i] - want) <= 1e-6f * fmaxf(1, fabsf(want)), "w[%d] %.9g, want %.9g", i, t.w->data[i], want);
        cr_assert_eq(t.bias->data[i], 0.5f, "the no-decay bias moved");
    }
    char *p = path_join(out, "log.jsonl"), *text;
    size_t len;
    cr_assert_eq(read_file(p, &text, &len), 0);
    cr_assert(strstr(text, "\"grad_norm\": 0,"), "%s", text);
    free(text); free(p);
    toy_free(&t);
}

/* The writer is rank 0; world_size > 1 is recorded, one process records nothing. */
Test(train_loop, rank_and_world_size) {
    toy t;
    toy_init(&t, 1, 0);
    train_objective o = toy_iface(&t);
    char *r1 = path_join(test_tmpdir(), "rank1");
    train_loop_config c = adamw_cfg(r1);
    c.rank = 2;
    c.world_size = 2;
    cr_assert_eq(train_loop_run(&c, &o), ER_INPUT);
    cr_assert(strstr(er_msg(), "rank 2"), "%s", er_msg());
    c.rank = 1;
    cr_assert_eq(train_loop_run(&c, &o), ER_OK, "%s", er_msg());
    cr_assert_neq(access(r1, F_OK), 0, "rank 1 wrote into out.dir");
    toy_free(&t);

    for (int ws = 1; ws <= 2; ws++) {
        toy_init(&t, 1, 0);
        o = toy_iface(&t);
        char name[16];
        snprintf(name, sizeof name, "ws%d", ws);
        char *out = path_join(test_tmpdir(), name);
        c = adamw_cfg(out);
        c.world_size = ws;
        cr_assert_eq(train_loop_run(&c, &o), ER_OK, "%s", er_msg());
        char *p = path_join(out, "log.jsonl"), *text;
        size_t len;
        cr_assert_eq(read_file(p, &text, &len), 0);
        cr_assert_eq(strstr(text, "\"world_size\": 2}") != NULL, ws == 2, "world_size %d: %s", ws, text);
        cr_assert_eq(strstr(text, "world_size") != NULL, ws == 2, "world_size %d: %s", ws, text);
        free(text); free(p);
        st_file f;
        p = path_join(out, "checkpoint.safetensors");
        cr_assert_eq(st_open(p, &f), 0, "%s", er_msg());
        const char *m = st_meta(&f, "endoret.world_size");
        if (ws == 2) cr_assert(m && !strcmp(m, "2"), "checkpoint world_size %s", m ? m : "(absent)");
        else cr_assert_null(m, "one process records no world_size");
        st_close(&f);
        free(p); free(out);
        toy_free(&t);
    }
    free(r1);
}

/* ENDORET_PROFILE: 1 / json profile the run, 0 is off, anything else is refused before any work
 * (no output folder made), naming the variable; the profile leaves the weights bit-identical. */
Test(train_loop, profile_env_values) {
    toy a, b;
    toy_init(&a, 0, 0), toy_init(&b, 0, 0);
    a.ref = b.ref = REF_SGD_NESTEROV;
    train_objective oa = toy_iface(&a), ob = toy_iface(&b);
    char *bad = path_join(test_tmpdir(), "bad");
    train_loop_config c = sgd_cfg(bad, 3, 0.05, 0.9, 1, 1e-3);
    setenv("ENDORET_PROFILE", "yes", 1);
    cr_assert_eq(train_loop_run(&c, &oa), ER_INPUT);
    cr_assert(strstr(er_msg(), "ENDORET_PROFILE=yes"), "%s", er_msg());
    cr_assert(access(bad, F_OK) != 0, "refused before the output folder is made");
    setenv("ENDORET_PROFILE", "0", 1);
    c.out_dir = test_tmpdir();
    cr_assert_eq(train_loop_run(&c, &oa), ER_OK, "%s", er_msg());
    setenv("ENDORET_PROFILE", "json", 1);
    char *pdir = path_join(test_tmpdir(), "p");
    train_loop_config c2 = sgd_cfg(pdir, 3, 0.05, 0.9, 1, 1e-3);
    cr_assert_eq(train_loop_run(&c2, &ob), ER_OK, "%s", er_msg());
    unsetenv("ENDORET_PROFILE");
    for (int i = 0; i < REF_OPT_N; i++) cr_assert_eq(memcmp(&a.w->data[i], &b.w->data[i], 4), 0, "weight %d differs", i);
    free(bad), free(pdir);
    toy_free(&a), toy_free(&b);
}

/* `train --profile` (train_loop_config.profile): 1 prints the table, 2 the JSON, on stderr at the
 * end, without ENDORET_PROFILE; 0 with the variable unset prints none. */
static char *loop_stderr(train_loop_config *c, toy *t) {
    char tmpl[] = "/tmp/endoret_prof_XXXXXX";
    int fd = mkstemp(tmpl), saved = dup(2);
    cr_assert(fd >= 0 && saved >= 0);
    fflush(stderr);
    dup2(fd, 2);
    train_objective o = toy_iface(t);
    int rc = train_loop_run(c, &o);
    fflush(stderr);
    dup2(saved, 2);
    close(saved), close(fd);
    cr_assert_eq(rc, ER_OK, "%s", er_msg());
    char *text;
    size_t len;
    cr_assert_eq(read_file(tmpl, &text, &len), ER_OK);
    unlink(tmpl);
    return text;
}

Test(train_loop, profile_setting_prints_the_table_or_json) {
    unsetenv("ENDORET_PROFILE");
    const char *want[3] = {NULL, "== profile:", "{\"profile\": {"};
    for (int mode = 0; mode <= 2; mode++) {
        toy t;
        toy_init(&t, 0, 0);
        t.ref = REF_SGD_NESTEROV;
        char name[16];
        snprintf(name, sizeof name, "prof%d", mode);
        char *dir = path_join(test_tmpdir(), name);
        train_loop_config c = sgd_cfg(dir, 3, 0.05, 0.9, 1, 1e-3);
        c.profile = mode;
        char *err = loop_stderr(&c, &t);
        if (want[mode]) cr_expect(strstr(err, want[mode]), "profile %d: no '%s' in: %s", mode, want[mode], err);
        else cr_expect(!strstr(err, "profile"), "profile 0: %s", err);
        free(err), free(dir);
        toy_free(&t);
    }
}
