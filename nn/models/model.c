/* model.c — the architecture registry and the family-independent half of the model interface. */
#include "nn/models/model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoints/params_st.h"
#include "nn/autograd.h"
#include "nn/base/base.h"
#include "nn/base/memory.h"
#include "nn/precision.h"
#include "kernels/backend.h"
#include "nn/models/resnet_model.h"
#include "nn/models/dual_model.h"
#include "nn/models/scene_model.h"
#include "nn/models/vit_model.h"

/* The registered families: a new one adds its line here (docs/models.md). Files without
 * endoret.arch are offered to `recognises` in this order: the scene family first, because its files
 * also hold a ViT's tensors. */
static const model_arch *const ARCHS[] = {
    &scene_arch,
    &vit_arch,
    &resnet_arch,
    &dual_arch,
};
#define NARCHS ((int)(sizeof ARCHS / sizeof ARCHS[0]))

int model_arch_count(void) { return NARCHS; }

/* "vit_tiny | ... ; resnet50" for messages. */
static void variants_list(char *buf, size_t n) {
    buf[0] = 0;
    for (int i = 0; i < NARCHS; i++) {
        size_t len = strlen(buf);
        snprintf(buf + len, n - len, "%s%s", i ? "; " : "", ARCHS[i]->variants);
    }
}

const model_arch *model_arch_find(const char *arch) {
    for (int i = 0; arch && i < NARCHS; i++)
        if (ARCHS[i]->accepts(arch)) return ARCHS[i];
    char known[512];
    variants_list(known, sizeof known);
    er_fail(ER_INPUT, "unknown model '%s' (known: %s)", arch ? arch : "", known);
    return NULL;
}

/* The current error message prefixed with where it happened (er_msg is copied first: er_fail
 * writes the buffer it would read). */
static int fail_at(const char *where) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", er_msg());
    return er_fail(ER_INPUT, "%s: %s", where, msg);
}

/* The family's config struct with its defaults and its key table. */
typedef struct {
    const model_arch *arch;
    void *args;
    const cfg_spec *keys;
    int nkeys;
} arch_args;

static void args_open(const model_arch *a, arch_args *x) {
    x->arch = a;
    x->args = xcalloc(1, a->args_size);
    a->args_defaults(x->args);
    x->keys = a->keys(x->args, &x->nkeys);
}

static void args_close(arch_args *x) {
    if (x->args) x->arch->args_free(x->args);
    free(x->args);
}

/* A model rebuilt from a checkpoint's config text ("key = value" lines, cfg_to_string) with the
 * encoder's tensors of the file. */
static int load_from_config(const st_file *f, const char *text, model **out) {
    const char *line = strstr(text, "model.arch = ");
    if (line != text && (!line || line[-1] != '\n'))
        return er_fail(ER_INPUT, "%s: endoret.config has no model.arch line", f->path);
    char name[128];
    if (sscanf(line, "model.arch = %127[^\n]", name) != 1)
        return er_fail(ER_INPUT, "%s: endoret.config: empty model.arch", f->path);
    const model_arch *a = model_arch_find(name);
    if (!a) return fail_at(f->path);
    arch_args x;
    args_open(a, &x);
    char *copy = xstrdup(text), *save = NULL;
    int rc = ER_OK;
    for (char *l = strtok_r(copy, "\n", &save); l && !rc; l = strtok_r(NULL, "\n", &save)) {
        char *eq = strstr(l, " = ");
        if (!eq) continue; /* keys the family does not declare are skipped by cfg_set_known */
        memmove(eq + 1, eq + 3, strlen(eq + 3) + 1); /* "key = value" -> "key=value" */
        eq[0] = '=';
        rc = cfg_set_known(l, f->path, x.keys, x.nkeys);
    }
    free(copy);
    if (!rc) rc = a->create(x.args, 0, out);
    args_close(&x);
    if (!rc && (rc = params_load_st((*out)->params, f, "", 1))) {
        model_free(*out);
        *out = NULL;
    }
    return rc;
}

model_input model_input_of(const model *m) {
    if (m->has_input) return m->input;
    model_input in = {{0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}, 1.0f}; /* IMAGENET_MEAN / _STD */
    return in;
}

/* "a,b,c" -> three floats; 0 when the text is not exactly that. */
static int parse3(const char *s, float v[3]) {
    char *end;
    for (int i = 0; i < 3; i++) {
        v[i] = strtof(s, &end);
        if (end == s || (i < 2 && *end != ',')) return 0;
        s = end + (i < 2);
    }
    return *end == 0;
}

void model_set_input(model *m, model_input in) {
    m->input = in;
    m->has_input = 1;
}

/* endoret.input.* metadata (model_input): all three or none. */
static int input_from_meta(const st_file *f, model *m) {
    const char *mean = st_meta(f, "endoret.input.mean"), *std = st_meta(f, "endoret.input.std"),
               *crop = st_meta(f, "endoret.input.crop");
    if (!mean && !std && !crop) return ER_OK;
    model_input in;
    char *end = NULL;
    if (crop) in.crop = strtof(crop, &end);
    if (!mean || !std || !crop || !parse3(mean, in.mean) || !parse3(std, in.std) || *end || !(in.crop > 0 && in.crop <= 1) ||
        !(in.std[0] > 0 && in.std[1] > 0 && in.std[2] > 0))
        return er_fail(ER_INPUT, "%s: endoret.input.mean / std / crop metadata: need three numbers each for mean and "
                       "std (std > 0) and a crop in (0, 1], got '%s' / '%s' / '%s'", f->path, mean ? mean : "(none)",
                       std ? std : "(none)", crop ? crop : "(none)");
    model_set_input(m, in);
    return ER_OK;
}

int model_load(const char *path, const char *arch, char **sets, int nsets, model **out) {
    *out = NULL;
    st_file f;
    int rc = st_open(path, &f);
    if (rc) return rc;
    const char *name = arch ? arch : st_meta(&f, "endoret.arch");
    const char *config = st_meta(&f, "endoret.config");
    const model_arch *a = NULL;
    if (name) {
        if (!(a = model_arch_find(name))) rc = fail_at(path);
    } else if (config) {
        rc = load_from_config(&f, config, out);
    } else {
        for (int i = 0; i < NARCHS && !a; i++)
            if (ARCHS[i]->recognises(&f)) a = ARCHS[i];
        if (!a) {
            char known[512];
            variants_list(known, sizeof known);
            rc = er_fail(ER_INPUT, "%s: no registered model recognises this file (no endoret.arch metadata, "
                         "unknown tensor names): name it with --arch (%s)", path, known);
        }
    }
    if (a) rc = a->load(&f, name, sets, nsets, out);
    if (!rc && (rc = input_from_meta(&f, *out))) {
        model_free(*out);
        *out = NULL;
    }
    st_close(&f);
    return rc;
}

int model_create(const char *arch, const char *config, char **sets, int nsets, model **out) {
    *out = NULL;
    /* first the family (model.arch) and the run seed; then the family's own keys */
    char *name = NULL;
    int seed = 0;
    cfg_spec pick[] = {{"model.arch", CFG_STR, &name, "", "text"}, {"train.seed", CFG_INT, &seed, "", "[0, inf)"}};
    int rc = config ? cfg_load_known(config, pick, 2) : ER_OK;
    for (int i = 0; !rc && i < nsets; i++) rc = cfg_set_known(sets[i], "--set", pick, 2);
    if (!rc && arch) cfg_set_str(&name, arch);
    if (!rc && !name) rc = er_fail(ER_INPUT, "%s: no model.arch", config ? config : "--set");
    const model_arch *a = rc ? NULL : model_arch_find(name);
    if (!rc && !a) { /* say where the name came from: --arch, a --set, or the config file */
        const char *from = config ? config : "--set";
        for (int i = 0; i < nsets; i++) if (!strncmp(sets[i], "model.arch=", 11)) from = "--set";
        char where[600];
        snprintf(where, sizeof where, "%s: %s", arch ? "--arch" : from, arch ? "model.arch" : "key 'model.arch'");
        rc = fail_at(where);
    }
    if (!rc) {
        arch_args x;
        args_open(a, &x);
        rc = config ? cfg_load_known(config, x.keys, x.nkeys) : ER_OK;
        /* a --set model.* key the family does not have is a mistake (refused, with the keys it has);
         * other sections' keys pass through, as a training config's do */
        for (int i = 0; !rc && i < nsets; i++)
            rc = strncmp(sets[i], "model.", 6) ? cfg_set_known(sets[i], "--set", x.keys, x.nkeys)
                                               : cfg_set(sets[i], "--set", x.keys, x.nkeys);
        if (!rc) cfg_set_str((char **)x.keys[0].dst, name); /* key 0 is model.arch */
        if (!rc) rc = a->create(x.args, (uint64_t)seed, out);
        args_close(&x);
    }
    free(name);
    return rc;
}

int model_save(const model *m, const char *path, int64_t step) {
    st_writer *w = st_writer_new();
    void *host = params_add_st(m->params, w, ""); /* device tensors: downloaded copies */
    m->arch->add_meta(m, w);
    if (m->has_input) {
        char mean[96], std[96], crop[32];
        const model_input *in = &m->input;
        snprintf(mean, sizeof mean, "%.9g,%.9g,%.9g", in->mean[0], in->mean[1], in->mean[2]);
        snprintf(std, sizeof std, "%.9g,%.9g,%.9g", in->std[0], in->std[1], in->std[2]);
        snprintf(crop, sizeof crop, "%.9g", in->crop);
        st_add_meta(w, "endoret.input.mean", mean);
        st_add_meta(w, "endoret.input.std", std);
        st_add_meta(w, "endoret.input.crop", crop);
    }
    st_add_meta(w, "format", "pt");
    st_add_meta(w, "endoret.kind", "weights");
    if (step >= 0) {
        char buf[32];
        snprintf(buf, sizeof buf, "%lld", (long long)step);
        st_add_meta(w, "endoret.step", buf);
    }
    int rc = st_write(w, path);
    st_writer_free(w);
    free(host);
    return rc;
}

int model_embed(model *m, const float *images, int B, float *out) {
    int rc = ER_OK;
    const nn_ctx ctx = nn_ctx_eval(m->precision);
    NO_GRAD {
        tensor *d = m->arch->descriptor(m, &ctx, images, B);
        if (!d) rc = ER_RUNTIME;
        else tensor_to_host(d, out);
    }
    nn_step_end();
    return rc;
}

int model_embed_scene(model *m, const float *images, int V, float *out) {
    if (!m->arch->scene_descriptor)
        return er_fail(ER_INPUT, "model %s fuses no views: use --fusion mean (the average of the view descriptors)",
                       m->arch->name);
    if (V < 1) return er_fail(ER_INPUT, "a case needs at least one view");
    int rc = ER_OK;
    const nn_ctx ctx = nn_ctx_eval(m->precision);
    NO_GRAD {
        tensor *d = m->arch->scene_descriptor(m, &ctx, images, V);
        if (!d) rc = ER_RUNTIME;
        else tensor_to_host(d, out);
    }
    nn_step_end();
    return rc;
}

int model_embed_mean(model *m, const float *images, int V, float *out) {
    if (V < 1) return er_fail(ER_INPUT, "a case needs at least one view");
    int D = m->dim;
    float *d = xmalloc((size_t)V * D * sizeof(float));
    int rc = model_embed(m, images, V, d);
    for (int j = 0; j < D && !rc; j++) {
        double acc = 0;
        for (int v = 0; v < V; v++) acc += d[(size_t)v * D + j];
        out[j] = (float)(acc / V);
    }
    free(d);
    return rc;
}

int model_to_device(model *m, int device) {
    int rc = params_to_device(m->params, device);
    if (!rc) m->device = device;
    return rc;
}

void model_set_precision(model *m, int precision) {
    if (m->precision == precision) return;
    m->precision = precision;
    for (int i = 0; i < m->params->n; i++) tensor_drop_packed(m->params->t[i]); /* packed for the other one */
}

int model_prepack(model *m) {
    for (int i = 0; i < m->params->n; i++) {
        tensor *t = m->params->t[i];
        if (t->ndim != 2 || t->stride[1] != 1) continue;
        int rc = tensor_prepack(t, er_gemm_compute_of(m->precision));
        if (rc) return rc;
    }
    return ER_OK;
}

int model_set_img(model *m, int img) {
    if (img == m->img) return ER_OK;
    if (!m->arch->set_img) return er_fail(ER_INPUT, "model %s: the input side is fixed (%d)", m->arch->name, m->img);
    char kv[48]; /* the family's own model.img range: a side of 100000 would resample a huge table */
    snprintf(kv, sizeof kv, "model.img=%d", img);
    arch_args x;
    args_open(m->arch, &x);
    int rc = cfg_set_known(kv, "--img", x.keys, x.nkeys);
    args_close(&x);
    return rc ? rc : m->arch->set_img(m, img);
}

int model_forward_check(const model *m, int B, const char *what, const char *hint) {
    if (!m->arch->forward_bytes || m->device != DEV_CPU) return ER_OK;
    mem_estimate e = {0};
    e.params = 4.0 * (double)params_numel(m->params);
    e.activations = m->arch->forward_bytes(m, B);
    return mem_check(&e, what, hint);
}

void model_describe(const model *m, char *buf, size_t n) { m->arch->describe(m, buf, n); }

void model_free(model *m) {
    if (!m) return;
    m->arch->destroy(m);
    free(m);
}
