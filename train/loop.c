/* loop.c — the shared training loop: schedule, accumulation, clipping, logging, checkpoints, resume. */
#include "train/loop.h"

#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoints/checkpoint.h"
#include "kernels/profile.h"
#include "nn/autograd.h"
#include "nn/models/model.h"
#include "nn/base/base.h"
#include "nn/base/progress.h"
#include "nn/base/svg_plot.h"
#include "nn/base/json.h"
#include "nn/ops.h"
#include "nn/optim.h"
#include "nn/precision.h"
#include "nn/schedule.h"
#include "train/resume_check.h"
#include "train/step_record.h"

volatile int train_interrupted = 0;

static void on_signal(int sig) {
    (void)sig;
    train_interrupted = 1;
}

/* ---------------------------------------------------------------- history + SVG */

typedef struct {
    int n, cap, nseries;
    double *x;
    double *y[LOSS_TERMS_MAX + 1];
    const char *names[LOSS_TERMS_MAX + 1];
    char *owned_names[LOSS_TERMS_MAX + 1];
} history;

static void hist_add(history *h, double x, const loss_terms *t, double loss) {
    if (h->nseries == 0) {
        h->names[0] = "loss";
        h->nseries = 1;
        for (int i = 0; i < t->n && h->nseries <= LOSS_TERMS_MAX; i++) {
            h->owned_names[h->nseries] = xstrdup(t->name[i]);
            h->names[h->nseries] = h->owned_names[h->nseries];
            h->nseries++;
        }
    }
    if (h->n == h->cap) {
        h->cap = h->cap ? 2 * h->cap : 256;
        h->x = xrealloc(h->x, h->cap * sizeof(double));
        for (int s = 0; s < LOSS_TERMS_MAX + 1; s++) h->y[s] = xrealloc(h->y[s], h->cap * sizeof(double));
    }
    h->x[h->n] = x;
    h->y[0][h->n] = loss;
    for (int s = 1; s < h->nseries; s++) {
        double v = NAN;
        for (int i = 0; i < t->n; i++)
            if (!strcmp(t->name[i], h->names[s])) v = t->value[i];
        h->y[s][h->n] = v;
    }
    h->n++;
}

static void hist_free(history *h) {
    free(h->x);
    for (int s = 0; s < LOSS_TERMS_MAX + 1; s++) { free(h->y[s]); free(h->owned_names[s]); }
    memset(h, 0, sizeof *h);
}

int svg_loss_curve(const char *path, const char *title, int n, const double *x, int nseries,
                   const char *const *names, const double *const *y) {
    svg_series s[LOSS_TERMS_MAX + 1];
    if (nseries > LOSS_TERMS_MAX + 1) nseries = LOSS_TERMS_MAX + 1;
    for (int k = 0; k < nseries; k++) s[k] = (svg_series){.name = names[k], .n = n, .x = x, .y = y[k]};
    svg_opts o = {.title = title, .xlabel = "step", .ylabel = "loss", .width = 720, .height = 420, .no_markers = 1};
    return svg_line_plot(path, &o, s, nseries);
}

/* Re-read the log of a resumed run: keep the lines up to `step`, rebuild the history. */
static int reload_log(const char *path, int64_t step, history *h) {
    char *text = NULL;
    size_t len = 0;
    if (access(path, F_OK) != 0) return ER_OK;
    int rc = read_file(path, &text, &len);
    if (rc) return rc;
    char *out = xmalloc(len + 1);
    size_t olen = 0;
    char *p = text;
    while (p && *p) {
        char *nl = strchr(p, '\n');
        size_t ll = nl ? (size_t)(nl - p) : strlen(p);
        json_value v;
        if (ll && json_parse(p, ll, path, &v) == ER_OK) {
            const json_value *js = json_get(&v, "step");
            int keep = js && js->type == JSON_NUMBER && js->number <= step;
            if (keep) {
                memcpy(out + olen, p, ll);
                olen += ll;
                out[olen++] = '\n';
                const json_value *jl = json_get(&v, "loss");
                if (jl && jl->type == JSON_NUMBER) {
                    loss_terms t = {0};
                    for (int i = 0; i < v.n; i++) {
                        const char *k = v.keys[i];
                        if (!strncmp(k, "loss_", 5) && v.items[i].type == JSON_NUMBER && t.n < LOSS_TERMS_MAX) {
                            t.name[t.n] = k + 5;
                            t.value[t.n++] = v.items[i].number;
                        }
                    }
                    hist_add(h, js->number, &t, jl->number);
                }
            }
            json_free(&v);
        }
        p = nl ? nl + 1 : NULL;
    }
    rc = write_file_atomic(path, out, olen);
    free(out);
    free(text);
    return rc;
}

/* ---------------------------------------------------------------- the loop */

/* The gradients of the trainable parameters (the optimizer's flat buffers and any gradient outside
 * them; buffers have none) through the data-parallel hook. */
static int allreduce_grads(const train_loop_config *c, const optimizer *opt) {
    const int cap = optim_grad_buffers_max(opt);
    float **g = xmalloc((size_t)cap * sizeof *g);
    int64_t *n = xmalloc((size_t)cap * sizeof *n);
    int rc = c->allreduce(c->allreduce_ctx, g, n, optim_grad_buffers(opt, g, n));
    free(g);
    free(n);
    return rc;
}

/* Data parallel: the loss and terms of the global batch (the mean over ranks of their shards') and
 * whether any rank was asked to stop. */
static int average_step(const train_loop_config *c, double *loss_sum, loss_terms *acc, int *stop) {
    double v[LOSS_TERMS_MAX + 2];
    v[0] = *loss_sum;
    for (int i = 0; i < acc->n; i++) v[1 + i] = acc->value[i];
    v[1 + acc->n] = train_interrupted ? 1 : 0;
    int rc = c->average(c->allreduce_ctx, v, acc->n + 2);
    *loss_sum = v[0];
    for (int i = 0; i < acc->n; i++) acc->value[i] = v[1 + i];
    *stop = v[1 + acc->n] > 0;
    return rc;
}

/* `, "world_size": N` in each log record of a data-parallel run (nothing for one process). */
static void log_world_size(FILE *f, const train_loop_config *c) {
    if (c->world_size > 1) fprintf(f, ", \"world_size\": %d", c->world_size);
}

int train_loop_run(const train_loop_config *c, train_objective *obj) {
    if (c->accum < 1) return er_fail(ER_INPUT, "train.accum must be >= 1");
    if (c->world_size > 1 && (c->rank < 0 || c->rank >= c->world_size))
        return er_fail(ER_INPUT, "rank %d is outside world size %d", c->rank, c->world_size);
    if (obj->steps_per_epoch < 1) return er_fail(ER_INPUT, "training set too small for one step");
    int64_t total = c->steps > 0 ? c->steps : (int64_t)c->epochs * obj->steps_per_epoch;
    if (total < 1) return er_fail(ER_INPUT, "nothing to train: set train.steps or train.epochs");
    int profile = c->profile;
    const char *prof_env = getenv("ENDORET_PROFILE"); /* 1 | json | 0 (off); anything else is a typo */
    if (prof_env && *prof_env && strcmp(prof_env, "0") && strcmp(prof_env, "1") && strcmp(prof_env, "json"))
        return er_fail(ER_INPUT, "ENDORET_PROFILE=%s: use 1 (table), json or 0 (off)", prof_env);
    if (!profile && prof_env && *prof_env && strcmp(prof_env, "0")) profile = strcmp(prof_env, "json") ? 1 : 2;
    int64_t warmup = c->warmup_steps >= 0 ? c->warmup_steps : (int64_t)llround(c->warmup_epochs * obj->steps_per_epoch);
    if (warmup > total) warmup = total;
    lr_schedule sched = {c->lr, c->min_lr, warmup, total, c->restart_epochs * (double)obj->steps_per_epoch,
                         c->restart_mult >= 1 ? c->restart_mult : 1};
    const int writer = c->rank == 0; /* data parallel: one process writes the files */
    int rc = writer ? make_dirs(c->out_dir) : ER_OK;
    if (rc) return rc;
    char *ckpt_path = path_join(c->out_dir, "checkpoint.safetensors");
    char *log_path = path_join(c->out_dir, "log.jsonl");
    char *svg_path = path_join(c->out_dir, "loss.svg");
    optim_config oc = {0};
    oc.kind = c->optimizer;
    oc.lr = c->lr;
    oc.weight_decay = c->weight_decay;
    oc.bf16_weights = obj->run.precision == ER_PREC_BF16; /* the products' bf16 weights, written by each step */
    if (c->optimizer == OPTIM_ADAMW) {
        oc.beta1 = c->beta1;
        oc.beta2 = c->beta2;
        oc.eps = c->eps;
    } else {
        oc.momentum = c->momentum;
        oc.nesterov = c->nesterov;
    }
    optimizer *opt = optim_new(&oc, obj->params);
    int device = obj->params->n ? obj->params->t[0]->device : DEV_CPU;
    history hist = {0};
    FILE *logf = NULL;
    loss_terms *mterms = xcalloc((size_t)c->accum, sizeof *mterms); /* each micro-batch's terms */
    step_record rec = {0};
    int64_t step = 0;
    const char *last_good = NULL;
    if (!opt) { rc = ER_INPUT; goto done; }
    if ((rc = step_record_init(&rec, device, c->accum))) goto done;
    if (c->resume) {
        /* before anything is restored: name changed keys, refuse what the checkpoint cannot honour */
        int finished = 0;
        char *changed = NULL;
        rc = resume_check(c->resume, c->config_text, total, writer ? stderr : NULL, &finished, &changed);
        if (!rc && finished && c->resume_finished) *c->resume_finished = 1;
        if (rc || finished) { free(changed); goto done; }
        ckpt_state s = {.params = obj->params, .opt = opt};
        rc = ckpt_load(c->resume, &s, CKPT_STRICT, NULL);
        if (rc && changed[0]) { /* e.g. a shape set by one of the objective's own keys */
            char why[1024];
            snprintf(why, sizeof why, "%s", er_msg());
            rc = er_fail(rc, "%s (keys changed since the checkpoint: %s)", why, changed);
        }
        free(changed);
        if (rc) goto done;
        step = s.step;
        if (writer && (rc = reload_log(log_path, step, &hist))) goto done;
        last_good = c->resume;
        if (writer) fprintf(stderr, "resumed from %s at step %lld\n", c->resume, (long long)step);
    }
    logf = writer ? fopen(log_path, c->resume ? "a" : "w") : fopen("/dev/null", "w");
    if (!logf) { rc = er_fail(ER_RUNTIME, "%s: cannot open for writing", log_path); goto done; }
    train_interrupted = 0;
    struct sigaction sa = {0}, old_int, old_term;
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);

    const int progress = c->progress && writer;
    int tty = progress && isatty(2);
    double t_start = now_seconds(), t_win = t_start;
    int64_t step0 = step, win_steps = 0, ran = 0;
    int prof_steps = 0; /* profile: see train_loop_config */
    int64_t prof_from = total - step0 > 1 ? 1 : 0;
    double prof_seconds = 0, t_step = 0;
    const er_backend *be = backend_get(device);
    uint64_t win_waits = 0; /* the host's waits for the device inside this log window's steps */
    while (step < total) {
        const uint64_t waits0 = be->host_waits();
        if (profile && ran == prof_from) prof_start();
        prof_phase(PROF_FORWARD);
        t_step = now_seconds();
        double lr = lr_at(&sched, step);
        optim_set_lr(opt, lr);
        loss_terms acc = {0};
        double loss_sum = 0;
        for (int micro = 0; micro < c->accum; micro++) {
            loss_terms *terms = &mterms[micro];
            memset(terms, 0, sizeof *terms);
            tensor *loss = obj->step(obj->self, step, micro, terms);
            if (!loss) { rc = ER_RUNTIME; nn_step_end(); goto stop; }
            step_record_loss(&rec, micro, loss); /* kept on the device: read once, at the step's end */
            step_record_terms(&rec, micro, terms);
            if (c->accum > 1) loss = op_mul_scalar(loss, (float)(1.0 / c->accum));
            rc = backward(loss);
            nn_step_end();
            if (rc) goto stop;
        }
        int stop_requested = 0;
        double gnorm = NAN;
        /* One process: the device checks the losses and the gradient norm and clips (optim_guard), and
         * skips the update if any is not finite; the host reads the record once, after the update.
         * Data parallel: the averaged loss decides, so the record is read before the all-reduce. */
        int guarded = 0;
        if (!c->average) {
            if (c->allreduce && (rc = allreduce_grads(c, opt))) goto stop;
            guarded = optim_guard(opt, device, c->clip, step_record_losses(&rec), c->accum, step_record_norm(&rec),
                                  step_record_gscale(&rec)) == ER_OK;
            if (guarded) {
                rc = optim_step(opt);
                optim_zero_grad(opt);
                if (rc) goto stop;
            }
        }
        step_record_read(&rec); /* the host waits for the device here */
        {   /* GPU kernels report failures asynchronously: check once per step, before logging or a
             * checkpoint could record a broken state */
            char what[64];
            snprintf(what, sizeof what, "step %lld", (long long)step);
            if ((rc = er_device_error(device, what))) goto stop; /* the read waited: no second wait */
        }
        for (int micro = 0; micro < c->accum; micro++) {
            loss_terms *terms = &mterms[micro];
            step_record_term_values(&rec, micro, terms);
            double lv = step_record_loss_value(&rec, micro);
            if (!isfinite(lv)) {
                char parts[512] = "";
                size_t o = 0;
                for (int i = 0; i < terms->n && o < sizeof parts; i++)
                    o += snprintf(parts + o, sizeof parts - o, " %s=%g", terms->name[i], terms->value[i]);
                rc = er_fail(ER_RUNTIME, "step %lld: loss is %s (%s); training stopped before the update; last good checkpoint: %s",
                             (long long)step, isnan(lv) ? "NaN" : "Inf", o ? parts + 1 : "no terms",
                             last_good ? last_good : "none (no checkpoint written yet)");
                goto stop;
            }
            loss_sum += lv / c->accum;
            for (int i = 0; i < terms->n; i++) {
                double prev = 0;
                for (int j = 0; j < acc.n; j++) if (!strcmp(acc.name[j], terms->name[i])) prev = acc.value[j];
                loss_terms_set(&acc, terms->name[i], prev + terms->value[i] / c->accum);
            }
        }
        if (guarded) gnorm = step_record_norm_value(&rec);
        else {
            if (c->average && (rc = average_step(c, &loss_sum, &acc, &stop_requested))) goto stop;
            if (c->average && c->allreduce && (rc = allreduce_grads(c, opt))) goto stop;
            gnorm = optim_clip_grad_norm(opt, c->clip);
        }
        if (!isfinite(gnorm)) {
            rc = er_fail(ER_RUNTIME, "step %lld: gradient norm is %s; training stopped before the update; last good checkpoint: %s",
                         (long long)step, isnan(gnorm) ? "NaN" : "Inf", last_good ? last_good : "none (no checkpoint written yet)");
            goto stop;
        }
        if (!guarded) {
            rc = optim_step(opt);
            optim_zero_grad(opt);
            if (rc) goto stop;
            char what[64];
            snprintf(what, sizeof what, "step %lld", (long long)step);
            if ((rc = er_device_check(device, what))) goto stop;
        }
        win_waits += be->host_waits() - waits0;
        step++;
        ran++;
        win_steps++;
        if (prof_on()) {
            prof_seconds += now_seconds() - t_step;
            prof_steps++;
            prof_phase(PROF_LOOP);
        }
        int last = step == total;
        if (c->log_every > 0 && (step % c->log_every == 0 || last)) {
            double now = now_seconds();
            double ips = win_steps * (double)obj->images_per_step / fmax(now - t_win, 1e-9);
            double eta = (total - step) * (now - t_start) / fmax((double)(step - step0), 1);
            fprintf(logf, "{\"step\": %lld, \"epoch\": %.4f, \"lr\": %.6g, \"loss\": %.6g", (long long)step,
                    (double)step / obj->steps_per_epoch, lr, loss_sum);
            for (int i = 0; i < acc.n; i++) fprintf(logf, ", \"loss_%s\": %.6g", acc.name[i], acc.value[i]);
            fprintf(logf, ", \"grad_norm\": %.6g, \"img_per_s\": %.2f, \"time_s\": %.2f", gnorm, ips, now - t_start);
            if (device != DEV_CPU) /* 1 when nothing in the step reads the device mid-way (docs/training.md) */
                fprintf(logf, ", \"host_waits_per_step\": %.2f", (double)win_waits / (double)win_steps);
            log_world_size(logf, c);
            fputs("}\n", logf);
            fflush(logf);
            hist_add(&hist, (double)step, &acc, loss_sum);
            char eta_s[32];
            progress_time(eta, eta_s, sizeof eta_s);
            char line[512];
            /* this step's loss and parts, as log.jsonl (a window average beside them would not add up) */
            size_t o = snprintf(line, sizeof line, "step %lld/%lld  loss %.4f", (long long)step, (long long)total, loss_sum);
            for (int i = 0; i < acc.n && o < sizeof line; i++)
                o += snprintf(line + o, sizeof line - o, "  %s %.4f", acc.name[i], acc.value[i]);
            if (o < sizeof line)
                snprintf(line + o, sizeof line - o, "  lr %.2e  %.1f %s/s  ETA %s", lr, ips, obj->rate_unit ? obj->rate_unit : "img", eta_s);
            if (progress) fprintf(stderr, tty ? "\r%s\033[K" : "%s\n", line);
            t_win = now;
            win_steps = 0;
            win_waits = 0;
        }
        if (writer && obj->eval && c->eval_every > 0 && (step % c->eval_every == 0 || last)) {
            char body[1024] = "";
            rc = obj->eval(obj->self, step, body, sizeof body);
            nn_step_end();
            if (rc) goto stop;
            fprintf(logf, "{\"step\": %lld, \"eval\": {%s}", (long long)step, body);
            log_world_size(logf, c);
            fputs("}\n", logf);
            fflush(logf);
            if (progress) fprintf(stderr, "%seval @ step %lld: %s\n", tty ? "\n" : "", (long long)step, body);
        }
        int interrupted = (c->average ? stop_requested : train_interrupted) || (c->stop_after > 0 && ran >= c->stop_after && !last);
        if (writer && ((c->ckpt_every > 0 && step % c->ckpt_every == 0) || last || interrupted)) {
            ckpt_state s = {.params = obj->params, .opt = opt, .step = step, .config = c->config_text,
                            .world_size = c->world_size};
            rc = ckpt_save(ckpt_path, &s);
            if (rc) goto stop;
            last_good = ckpt_path;
            if (obj->model && obj->export_name && (rc = train_save_model(obj->model, c->out_dir, obj->export_name, step))) goto stop;
            if (obj->on_checkpoint && (rc = obj->on_checkpoint(obj->self, step, last))) goto stop;
            if (hist.n) svg_loss_curve(svg_path, "training loss", hist.n, hist.x, hist.nseries, hist.names,
                                       (const double *const *)hist.y);
        }
        if (interrupted) {
            train_interrupted = 1; /* tells the caller this stop was requested (every rank agrees on it) */
            if (tty) fputc('\n', stderr);
            rc = er_fail(ER_RUNTIME, "interrupted at step %lld/%lld; checkpoint written to %s (continue with --resume %s)",
                         (long long)step, (long long)total, ckpt_path, ckpt_path);
            goto stop;
        }
    }
    if (tty) fputc('\n', stderr);
stop:
    if (prof_on()) {
        prof_stop();
        if (writer && prof_steps) prof_report(stderr, prof_steps, prof_seconds, profile == 2);
    }
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
done:
    if (logf) fclose(logf);
    optim_free(opt);
    step_record_free(&rec);
    free(mterms);
    hist_free(&hist);
    free(ckpt_path);
    free(log_path);
    free(svg_path);
    return rc;
}

int train_save_model(model *m, const char *out_dir, const char *name, int64_t step) {
    char *path = path_join(out_dir, name);
    int rc = model_save(m, path, step);
    free(path);
    return rc;
}
