/* checkpoint.c — training state <-> one safetensors file; see checkpoint.h. */
#include "checkpoints/checkpoint.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoints/safetensors.h"
#include "kernels/backend.h"
#include "nn/base/base.h"

#define NAME_MAX_LEN 512

static const char *optim_kind_name(optim_kind k) { return k == OPTIM_ADAMW ? "adamw" : "sgd"; }

/* The optimizer tensors of parameter q: names and tensors, returns how many (0..2). */
static int state_tensors(const optimizer *o, const optim_param *q, char names[2][NAME_MAX_LEN], tensor *ts[2]) {
    if (o->cfg.kind == OPTIM_ADAMW) {
        snprintf(names[0], NAME_MAX_LEN, "optim.%s.m", q->p->name);
        snprintf(names[1], NAME_MAX_LEN, "optim.%s.v", q->p->name);
        ts[0] = q->m;
        ts[1] = q->v;
        return 2;
    }
    if (!q->m) return 0;
    snprintf(names[0], NAME_MAX_LEN, "optim.%s.momentum", q->p->name);
    ts[0] = q->m;
    return 1;
}

/* Host-side packed bytes of t (its own dtype): t->raw itself when on the CPU and packed, else a
 * copy in *owned. */
static const void *host_data(const tensor *t, void **owned) {
    if (t->device == DEV_CPU && tensor_is_contiguous(t)) return t->raw;
    *owned = xmalloc(tensor_elsize(t) * (size_t)(tensor_numel(t) ? tensor_numel(t) : 1));
    tensor_to_host_raw(t, *owned);
    return *owned;
}

static st_dtype st_type_of(const tensor *t) { return t->dtype == DT_BF16 ? ST_BF16 : ST_F32; }

int ckpt_save(const char *path, const ckpt_state *s) {
    const param_list *pl = s->params;
    const optimizer *o = s->opt;
    for (int i = 0; i < pl->n; i++)
        if (!pl->t[i]->name || !pl->t[i]->name[0] || strlen(pl->t[i]->name) > NAME_MAX_LEN - 32)
            return er_fail(ER_INPUT, "%s: parameter %d has no name (or one too long) to save under", path, i);
        else if (!strncmp(pl->t[i]->name, "optim.", 6) || !strncmp(pl->t[i]->name, "train.", 6))
            return er_fail(ER_INPUT, "%s: parameter name '%s' collides with the training-state names (optim.*, train.*)",
                           path, pl->t[i]->name);
    int cap = pl->n + (o ? 2 * o->n : 0) + 2, nown = 0;
    void **owned = xcalloc((size_t)cap, sizeof *owned);
    char (*names)[NAME_MAX_LEN] = xcalloc(o ? 2 * (size_t)o->n + 1 : 1, sizeof *names);
    st_writer *w = st_writer_new();
    for (int i = 0; i < pl->n; i++) {
        tensor *p = pl->t[i];
        const void *d = host_data(p, &owned[nown]);
        if (owned[nown]) nown++;
        st_add(w, p->name, st_type_of(p), p->ndim, p->shape, d);
    }
    int64_t opt_step = o ? o->step : 0, train_step = s->step;
    const int64_t one[1] = {1};
    if (o) {
        for (int i = 0; i < o->n; i++) {
            tensor *ts[2];
            int k = state_tensors(o, &o->ps[i], &names[2 * i], ts);
            for (int j = 0; j < k; j++) {
                const void *d = host_data(ts[j], &owned[nown]);
                if (owned[nown]) nown++;
                st_add(w, names[2 * i + j], st_type_of(ts[j]), ts[j]->ndim, ts[j]->shape, d);
            }
        }
        st_add(w, "optim.step", ST_I64, 1, one, &opt_step);
        st_add_meta(w, "endoret.optimizer", optim_kind_name(o->cfg.kind));
    }
    st_add(w, "train.step", ST_I64, 1, one, &train_step);
    st_add_meta(w, "format", "pt");
    st_add_meta(w, "endoret.kind", o ? "train_state" : "weights");
    if (s->rng) {
        char buf[96];
        snprintf(buf, sizeof buf, "%" PRIu64 " %" PRIu64 " %" PRIu64, s->rng->seed, s->rng->stream, s->rng->index);
        st_add_meta(w, "endoret.rng", buf);
    }
    if (s->config) st_add_meta(w, "endoret.config", s->config);
    if (s->world_size > 1) { /* absent for one process, so single-process files stay as they were */
        char buf[24];
        snprintf(buf, sizeof buf, "%d", s->world_size);
        st_add_meta(w, "endoret.world_size", buf);
    }
    int rc = st_write(w, path);
    st_writer_free(w);
    for (int i = 0; i < nown; i++) free(owned[i]);
    free(owned);
    free(names);
    return rc;
}

/* ---- loading ---- */

static int check_shape(const st_file *f, const char *name, const tensor *t) {
    const st_tensor *st = st_find(f, name);
    if (!st) return er_fail(ER_INPUT, "%s: tensor '%s' is missing", f->path, name);
    if (st->dtype != ST_F32 && st->dtype != ST_F16 && st->dtype != ST_BF16 && st->dtype != ST_F64)
        return er_fail(ER_INPUT, "%s: tensor '%s' has dtype %s, expected a float type", f->path, name, st_dtype_name(st->dtype));
    int same = st->ndim == t->ndim;
    for (int d = 0; same && d < t->ndim; d++) same = st->shape[d] == t->shape[d];
    if (!same) {
        char want[128], got[128] = "[";
        tensor_shape_str(t, want, sizeof want);
        for (int d = 0; d < st->ndim; d++) {
            size_t l = strlen(got);
            snprintf(got + l, sizeof got - l, "%s%" PRId64, d ? ", " : "", st->shape[d]);
        }
        strncat(got, "]", sizeof got - strlen(got) - 1);
        return er_fail(ER_INPUT, "%s: tensor '%s' has shape %s in the file, the model expects %s", f->path, name, got, want);
    }
    return ER_OK;
}

static int read_counter(const st_file *f, const char *name, int64_t *out) {
    const st_tensor *st = st_find(f, name);
    if (!st) return er_fail(ER_INPUT, "%s: tensor '%s' is missing", f->path, name);
    if (st->numel != 1) return er_fail(ER_INPUT, "%s: tensor '%s' must hold one integer", f->path, name);
    int rc = st_read_i64(f, name, out, 1);
    if (!rc && *out < 0) return er_fail(ER_INPUT, "%s: tensor '%s' is negative (%" PRId64 ")", f->path, name, *out);
    return rc;
}

/* The (file name, tensor) pairs a load fills, in order. */
typedef struct {
    int n;
    char (*names)[NAME_MAX_LEN];
    tensor **ts;
} load_plan;

static load_plan make_plan(const ckpt_state *s, int full) {
    int cap = s->params->n + (full && s->opt ? 2 * s->opt->n : 0) + 1;
    load_plan lp = {0, xcalloc((size_t)cap, sizeof *lp.names), xcalloc((size_t)cap, sizeof *lp.ts)};
    for (int i = 0; i < s->params->n; i++) {
        snprintf(lp.names[lp.n], NAME_MAX_LEN, "%s", s->params->t[i]->name);
        lp.ts[lp.n++] = s->params->t[i];
    }
    if (full && s->opt)
        for (int i = 0; i < s->opt->n; i++) {
            char names[2][NAME_MAX_LEN];
            tensor *ts[2];
            int k = state_tensors(s->opt, &s->opt->ps[i], names, ts);
            for (int j = 0; j < k; j++) {
                memcpy(lp.names[lp.n], names[j], NAME_MAX_LEN);
                lp.ts[lp.n++] = ts[j];
            }
        }
    return lp;
}

static int parse_rng(const st_file *f, const char *text, rng_t *r) {
    uint64_t seed, stream, index;
    char extra;
    if (sscanf(text, "%" SCNu64 " %" SCNu64 " %" SCNu64 " %c", &seed, &stream, &index, &extra) != 3)
        return er_fail(ER_INPUT, "%s: metadata endoret.rng '%s' is not '<seed> <stream> <index>'", f->path, text);
    *r = rng_make(seed, stream);
    r->index = index;
    return ER_OK;
}

static int is_expected_name(const st_file *f, const char *name, const ckpt_state *s, int flags) {
    if (params_find(s->params, name)) return 1;
    if (!strcmp(name, "train.step")) return 1;
    if (!strncmp(name, "optim.", 6)) {
        if ((flags & CKPT_WEIGHTS_ONLY) || !s->opt) return 1; /* ignored, not an error */
        if (!strcmp(name, "optim.step")) return 1;
        char names[2][NAME_MAX_LEN];
        tensor *ts[2];
        for (int i = 0; i < s->opt->n; i++) {
            int k = state_tensors(s->opt, &s->opt->ps[i], names, ts);
            for (int j = 0; j < k; j++)
                if (!strcmp(names[j], name)) return 1;
        }
    }
    (void)f;
    return 0;
}

static int validate(const st_file *f, const ckpt_state *s, int flags) {
    const param_list *pl = s->params;
    for (int i = 0; i < pl->n; i++) {
        if (!pl->t[i]->name) return er_fail(ER_INPUT, "%s: model parameter %d has no name", f->path, i);
        int rc = check_shape(f, pl->t[i]->name, pl->t[i]);
        if (rc) return rc;
    }
    const int full = !(flags & CKPT_WEIGHTS_ONLY);
    if (full && s->opt) {
        const char *kind = st_meta(f, "endoret.optimizer");
        if (!kind) return er_fail(ER_INPUT, "%s: no optimizer state in this file (load it as weights only to fine-tune)", f->path);
        if (strcmp(kind, optim_kind_name(s->opt->cfg.kind)))
            return er_fail(ER_INPUT, "%s: optimizer state is '%s', the run uses '%s'", f->path, kind, optim_kind_name(s->opt->cfg.kind));
        for (int i = 0; i < s->opt->n; i++) {
            char names[2][NAME_MAX_LEN];
            tensor *ts[2];
            int k = state_tensors(s->opt, &s->opt->ps[i], names, ts);
            for (int j = 0; j < k; j++) {
                int rc = check_shape(f, names[j], ts[j]);
                if (rc) return rc;
            }
        }
        if (!st_find(f, "optim.step")) return er_fail(ER_INPUT, "%s: tensor 'optim.step' is missing", f->path);
    }
    if (!(flags & CKPT_ALLOW_EXTRA))
        for (int i = 0; i < f->n; i++)
            if (!is_expected_name(f, f->tensors[i].name, s, flags))
                return er_fail(ER_INPUT, "%s: tensor '%s' is not part of this model%s", f->path, f->tensors[i].name,
                               s->opt ? " or optimizer" : "");
    if (full && s->rng && st_meta(f, "endoret.rng")) {
        rng_t tmp;
        int rc = parse_rng(f, st_meta(f, "endoret.rng"), &tmp);
        if (rc) return rc;
    }
    return ER_OK;
}

int ckpt_load(const char *path, ckpt_state *s, int flags, char **config_out) {
    if (config_out) *config_out = NULL;
    st_file f;
    int rc = st_open(path, &f);
    if (rc) return rc;
    rc = validate(&f, s, flags);
    /* Counters are read before any tensor so that a bad one leaves the model untouched. */
    int64_t train_step = s->step, opt_step = s->opt ? s->opt->step : 0;
    const int full = !(flags & CKPT_WEIGHTS_ONLY);
    if (!rc && full && st_find(&f, "train.step")) rc = read_counter(&f, "train.step", &train_step);
    if (!rc && full && s->opt) rc = read_counter(&f, "optim.step", &opt_step);
    /* Two passes: first read and check every value (NaN/Inf) without touching the model, then
     * copy. A checkpoint is read rarely; the second read is cheap next to the safety. */
    load_plan lp = make_plan(s, full);
    int64_t maxn = 1;
    for (int i = 0; i < lp.n; i++) maxn = tensor_numel(lp.ts[i]) > maxn ? tensor_numel(lp.ts[i]) : maxn;
    float *host = xmalloc(sizeof(float) * (size_t)maxn);
    for (int i = 0; !rc && i < lp.n; i++) {
        rc = st_read_f32(&f, lp.names[i], host, tensor_numel(lp.ts[i]));
        if (!rc && !backend_cpu.all_finite(host, tensor_numel(lp.ts[i])))
            rc = er_fail(ER_INPUT, "%s: tensor '%s' holds NaN or Inf values", path, lp.names[i]);
    }
    for (int i = 0; !rc && i < lp.n; i++) {
        const st_tensor *st = st_find(&f, lp.names[i]);
        rc = st_read_f32(&f, lp.names[i], host, tensor_numel(lp.ts[i]));
        if (!rc && lp.ts[i]->dtype == DT_BF16 && st && st->dtype == ST_BF16)
            tensor_copy_from_host_raw(lp.ts[i], f.data + st->offset); /* the bits, as saved */
        else if (!rc)
            tensor_copy_from_host(lp.ts[i], host); /* converted to the tensor's dtype */
    }
    if (!rc && full && s->opt) s->opt->step = opt_step;
    free(lp.names);
    free(lp.ts);
    free(host);
    if (!rc && full) {
        s->step = train_step;
        if (s->rng && st_meta(&f, "endoret.rng")) rc = parse_rng(&f, st_meta(&f, "endoret.rng"), s->rng);
    }
    if (!rc && config_out && st_meta(&f, "endoret.config")) *config_out = xstrdup(st_meta(&f, "endoret.config"));
    st_close(&f);
    return rc;
}
