/* vit_lora.c — LoRA on a ViT: attach + freeze, merged copy, PEFT adapter files, file merge
 * (vit_lora.h). */
#include "nn/models/vit_lora.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "checkpoints/params_st.h"
#include "checkpoints/safetensors.h"
#include "nn/base/base.h"
#include "nn/base/json.h"

static const char *const KIND[4] = {"attn.qkv", "attn.proj", "mlp.fc1", "mlp.fc2"};
#define PEFT_PREFIX "base_model.model."

const char *vit_lora_module(const vit *v, int i, char *buf, size_t n) {
    (void)v;
    if (i == 0) snprintf(buf, n, "patch_embed.proj");
    else snprintf(buf, n, "blocks.%d.%s", (i - 1) / 4, KIND[(i - 1) % 4]);
    return buf;
}

/* the frozen weight adapter i sits on, as [out, in] */
static tensor *base_weight(const vit *v, int i) {
    if (i == 0) return v->patch_w;
    const vit_block *b = &v->blocks[(i - 1) / 4];
    tensor *w[4] = {b->qkv_w, b->proj_w, b->fc1_w, b->fc2_w};
    return w[(i - 1) % 4];
}

int vit_lora_attach(vit *v, const lora_config *c, uint64_t seed) {
    if (v->loras) return er_fail(ER_INPUT, "vit: LoRA adapters are already attached");
    if (c->r < 1) return er_fail(ER_INPUT, "lora: r = %d must be >= 1", c->r);
    if (!(c->alpha > 0)) return er_fail(ER_INPUT, "lora: alpha = %g must be > 0", c->alpha);
    if (!(c->dropout >= 0 && c->dropout < 1)) return er_fail(ER_INPUT, "lora: dropout = %g must be in [0, 1)", c->dropout);
    for (int i = 0; i < v->params.n; i++) tensor_set_requires_grad(v->params.t[i], 0);
    int D = v->cfg.dim, p = v->cfg.patch, C = v->cfg.in_chans;
    v->nlora = 1 + 4 * v->cfg.depth;
    v->loras = xcalloc(v->nlora, sizeof(lora));
    char mod[64];
    lora_init(&v->loras[0], vit_lora_module(v, 0, mod, sizeof mod), (int64_t)C * p * p, D, C, p, c, 0, seed, &v->params);
    v->patch_lora = &v->loras[0];
    for (int i = 1; i < v->nlora; i++) {
        tensor *w = base_weight(v, i);
        lora_init(&v->loras[i], vit_lora_module(v, i, mod, sizeof mod), w->shape[1], w->shape[0], 0, 0, c, (uint32_t)i,
                  seed, &v->params);
        v->blocks[(i - 1) / 4].lora[(i - 1) % 4] = &v->loras[i];
    }
    return ER_OK;
}

/* host copy of a (maybe device) tensor */
static float *host_copy(const tensor *t) {
    float *h = xmalloc((size_t)tensor_numel(t) * sizeof(float));
    tensor_to_host(t, h);
    return h;
}

vit *vit_lora_merged_copy(const vit *v) {
    vit *m = vit_new(&v->cfg, 0);
    if (!m) return NULL;
    for (int i = 0; i < m->params.n; i++) {
        tensor *dst = m->params.t[i];
        tensor *src = NULL;
        for (int j = 0; j < v->params.n && !src; j++) /* same order, but the ViT's names may carry a prefix */
            if (v->params.t[j] && tensor_numel(v->params.t[j]) == tensor_numel(dst)) {
                const char *n = v->params.t[j]->name;
                size_t ln = strlen(n), ld = strlen(dst->name);
                if (ln >= ld && !strcmp(n + ln - ld, dst->name) && (ln == ld || n[ln - ld - 1] == '.')) src = v->params.t[j];
            }
        if (!src) {
            er_fail(ER_RUNTIME, "vit: merged copy: no tensor '%s' in the source", dst->name);
            vit_free(m);
            return NULL;
        }
        float *h = host_copy(src);
        tensor_copy_from_host(dst, h);
        free(h);
    }
    for (int i = 0; i < v->nlora; i++) {
        const lora *l = &v->loras[i];
        tensor *w = base_weight(m, i);
        float *A = host_copy(l->A), *B = host_copy(l->B);
        lora_merge_host(w->data, A, B, l->out, l->in, l->r, l->scale);
        free(A);
        free(B);
    }
    return m;
}

/* ---------------------------------------------------------------- adapter files */

static void meta_num(st_writer *w, const char *key, double v) {
    char b[64];
    snprintf(b, sizeof b, "%.17g", v);
    st_add_meta(w, key, b);
}

int vit_lora_save_adapter(const vit *v, const char *dir) {
    if (!v->loras) return er_fail(ER_INPUT, "vit: no LoRA adapters to save");
    int rc = make_dirs(dir);
    if (rc) return rc;
    const lora *l0 = &v->loras[0];
    double alpha = (double)l0->scale * l0->r, drop = l0->dropout;
    st_writer *w = st_writer_new();
    float **h = xcalloc(2 * v->nlora, sizeof(float *));
    char (*names)[128] = xcalloc(2 * v->nlora, sizeof *names);
    for (int i = 0; i < v->nlora; i++) {
        const lora *l = &v->loras[i];
        char mod[64];
        vit_lora_module(v, i, mod, sizeof mod);
        snprintf(names[2 * i], 128, PEFT_PREFIX "%s.lora_A.weight", mod);
        snprintf(names[2 * i + 1], 128, PEFT_PREFIX "%s.lora_B.weight", mod);
        h[2 * i] = host_copy(l->A);
        h[2 * i + 1] = host_copy(l->B);
        st_add(w, names[2 * i], ST_F32, l->A->ndim, l->A->shape, h[2 * i]);
        st_add(w, names[2 * i + 1], ST_F32, l->B->ndim, l->B->shape, h[2 * i + 1]);
    }
    st_add_meta(w, "format", "pt");
    st_add_meta(w, "endoret.kind", "lora_adapter");
    meta_num(w, "endoret.lora.r", l0->r);
    meta_num(w, "endoret.lora.alpha", alpha);
    meta_num(w, "endoret.lora.dropout", drop);
    char *path = path_join(dir, "adapter_model.safetensors");
    rc = st_write(w, path);
    free(path);
    st_writer_free(w);
    for (int i = 0; i < 2 * v->nlora; i++) free(h[i]);
    free(h);
    free(names);
    if (rc) return rc;
    /* PEFT's adapter_config.json: the fields LoraConfig needs to rebuild the same adapters */
    char js[1024];
    int n = snprintf(js, sizeof js,
                     "{\n  \"peft_type\": \"LORA\",\n  \"task_type\": null,\n  \"r\": %d,\n  \"lora_alpha\": %.17g,\n"
                     "  \"lora_dropout\": %.17g,\n  \"bias\": \"none\",\n  \"fan_in_fan_out\": false,\n"
                     "  \"target_modules\": [\"qkv\", \"proj\", \"fc1\", \"fc2\"],\n  \"inference_mode\": true\n}\n",
                     l0->r, alpha, drop);
    path = path_join(dir, "adapter_config.json");
    rc = write_file_atomic(path, js, (size_t)n);
    free(path);
    return rc;
}

/* adapter_model.safetensors inside `path` when it is a folder, else path itself (caller frees) */
static char *adapter_file(const char *path) {
    struct stat sb;
    if (!stat(path, &sb) && S_ISDIR(sb.st_mode)) return path_join(path, "adapter_model.safetensors");
    return xstrdup(path);
}

int vit_lora_load_adapter(vit *v, const char *path) {
    if (!v->loras) return er_fail(ER_INPUT, "vit: no LoRA adapters attached to load %s into", path);
    char *file = adapter_file(path);
    st_file f;
    int rc = st_open(file, &f);
    if (rc) { free(file); return rc; }
    int used = 0;
    for (int i = 0; i < v->nlora && !rc; i++) {
        const lora *l = &v->loras[i];
        char mod[64], name[128];
        vit_lora_module(v, i, mod, sizeof mod);
        tensor *t[2] = {l->A, l->B};
        for (int k = 0; k < 2 && !rc; k++) {
            snprintf(name, sizeof name, PEFT_PREFIX "%s.lora_%c.weight", mod, k ? 'B' : 'A');
            const st_tensor *s = st_find(&f, name);
            if (!s) { rc = er_fail(ER_INPUT, "%s: adapter tensor '%s' missing", file, name); break; }
            if (s->numel != tensor_numel(t[k]) || s->ndim != t[k]->ndim) {
                char b[64];
                rc = er_fail(ER_INPUT, "%s: '%s' has %d dims / %lld values, expected %s (r = %d)", file, name, s->ndim,
                             (long long)s->numel, tensor_shape_str(t[k], b, sizeof b), l->r);
                break;
            }
            float *h = xmalloc((size_t)s->numel * sizeof(float));
            rc = st_read_f32(&f, name, h, s->numel);
            if (!rc) tensor_copy_from_host(t[k], h);
            free(h);
            used++;
        }
    }
    if (!rc && used != f.n)
        for (int i = 0; i < f.n; i++) { /* name the first tensor that is not one of ours */
            const char *n = f.tensors[i].name;
            int ours = 0;
            for (int j = 0; j < v->nlora && !ours; j++) {
                char mod[64], a[128], b[128];
                vit_lora_module(v, j, mod, sizeof mod);
                snprintf(a, sizeof a, PEFT_PREFIX "%s.lora_A.weight", mod);
                snprintf(b, sizeof b, PEFT_PREFIX "%s.lora_B.weight", mod);
                ours = !strcmp(n, a) || !strcmp(n, b);
            }
            if (!ours) { rc = er_fail(ER_INPUT, "%s: unexpected tensor '%s' (not an adapter of this ViT)", file, n); break; }
        }
    st_close(&f);
    free(file);
    return rc;
}

/* ---------------------------------------------------------------- merging files */

/* alpha of an adapter: its metadata, else adapter_config.json in its folder */
static int adapter_alpha(const st_file *f, const char *file, double *alpha) {
    const char *s = st_meta(f, "endoret.lora.alpha");
    if (s) { *alpha = atof(s); return *alpha > 0 ? ER_OK : er_fail(ER_INPUT, "%s: endoret.lora.alpha = %s", file, s); }
    char *dir = path_dirname(file), *cfg = path_join(dir, "adapter_config.json");
    free(dir);
    size_t len;
    char *text = NULL;
    if (read_file(cfg, &text, &len)) {
        free(text);
        int rc = er_fail(ER_INPUT, "%s: no endoret.lora.alpha metadata and no %s: lora_alpha unknown", file, cfg);
        free(cfg);
        return rc;
    }
    json_value js;
    int rc = json_parse(text, len, cfg, &js);
    free(text);
    if (!rc) {
        const json_value *a = json_get(&js, "lora_alpha");
        if (!a || a->type != JSON_NUMBER || !(a->number > 0)) rc = er_fail(ER_INPUT, "%s: no positive lora_alpha", cfg);
        else *alpha = a->number;
        json_free(&js);
    }
    free(cfg);
    return rc;
}

int lora_merge_files(const char *base, const char *adapter, const char *out) {
    char *afile = adapter_file(adapter);
    st_file fb, fa;
    int rc = st_open(base, &fb);
    if (rc) { free(afile); return rc; }
    if ((rc = st_open(afile, &fa))) { st_close(&fb); free(afile); return rc; }
    double alpha = 0;
    for (int i = 0; i < fa.n && !rc; i++) { /* only A/B weights: a weights file given as adapter fails here */
        const char *n = fa.tensors[i].name, *a = strstr(n, ".lora_A.weight"), *b = strstr(n, ".lora_B.weight");
        if (!(a && !a[14]) && !(b && !b[14])) rc = er_fail(ER_INPUT, "%s: tensor '%s' is not a LoRA A/B weight", afile, n);
    }
    if (!rc) rc = adapter_alpha(&fa, afile, &alpha);
    float **data = xcalloc(fb.n ? fb.n : 1, sizeof(float *));
    for (int i = 0; i < fb.n && !rc; i++) { /* every base tensor as float32 */
        const st_tensor *t = &fb.tensors[i];
        data[i] = xmalloc((size_t)(t->numel ? t->numel : 1) * sizeof(float));
        rc = st_read_f32(&fb, t->name, data[i], t->numel);
    }
    int pairs = 0;
    for (int i = 0; i < fa.n && !rc; i++) {
        const char *n = fa.tensors[i].name, *pa = strstr(n, ".lora_A.weight");
        if (!pa || pa[14]) continue; /* a B weight: read with its A */
        char mod[256], bname[300], wname[300];
        const char *m0 = strncmp(n, PEFT_PREFIX, strlen(PEFT_PREFIX)) ? n : n + strlen(PEFT_PREFIX);
        snprintf(mod, sizeof mod, "%.*s", (int)(pa - m0), m0);
        snprintf(bname, sizeof bname, "%.*s.lora_B.weight", (int)(pa - n), n);
        snprintf(wname, sizeof wname, "%s.weight", mod);
        const st_tensor *A = &fa.tensors[i], *B = st_find(&fa, bname);
        int wi = -1;
        for (int j = 0; j < fb.n; j++)
            if (!strcmp(fb.tensors[j].name, wname)) wi = j;
        if (!B) { rc = er_fail(ER_INPUT, "%s: '%s' has no '%s'", afile, n, bname); break; }
        if (wi < 0) { rc = er_fail(ER_INPUT, "%s: adapter of '%s' but %s has no tensor '%s'", afile, mod, base, wname); break; }
        const st_tensor *W = &fb.tensors[wi];
        int64_t r = A->shape[0], in = A->numel / (r ? r : 1), o = W->shape[0];
        if (r < 1 || B->numel != o * r || W->numel != o * in) {
            rc = er_fail(ER_INPUT, "%s: '%s' (%lld values) and '%s' (%lld) do not fit '%s' of %s (%lld x %lld)", afile, n,
                         (long long)A->numel, bname, (long long)B->numel, wname, base, (long long)o,
                         (long long)(W->numel / (o ? o : 1)));
            break;
        }
        float *ha = xmalloc((size_t)A->numel * sizeof(float)), *hb = xmalloc((size_t)B->numel * sizeof(float));
        rc = st_read_f32(&fa, n, ha, A->numel);
        if (!rc) rc = st_read_f32(&fa, bname, hb, B->numel);
        for (int64_t j = 0; !rc && j < A->numel + B->numel; j++) { /* name the adapter, not the merged file */
            float x = j < A->numel ? ha[j] : hb[j - A->numel];
            if (!isfinite(x))
                rc = er_fail(ER_INPUT, "%s: tensor '%s' has a non-finite value (%g at index %lld)", afile,
                             j < A->numel ? n : bname, (double)x, (long long)(j < A->numel ? j : j - A->numel));
        }
        if (!rc) lora_merge_host(data[wi], ha, hb, o, in, (int)r, alpha / (double)r);
        free(ha);
        free(hb);
        pairs++;
    }
    if (!rc && pairs == 0) rc = er_fail(ER_INPUT, "%s: no LoRA A/B pairs", afile);
    if (!rc && 2 * pairs != fa.n) rc = er_fail(ER_INPUT, "%s: a lora_B weight without its lora_A", afile);
    if (!rc) {
        st_writer *w = st_writer_new();
        for (int i = 0; i < fb.n; i++) st_add(w, fb.tensors[i].name, ST_F32, fb.tensors[i].ndim, fb.tensors[i].shape, data[i]);
        for (int i = 0; i < fb.nmeta; i++) st_add_meta(w, fb.meta_keys[i], fb.meta_vals[i]);
        st_add_meta(w, "endoret.lora.merged", afile);
        rc = st_write(w, out);
        st_writer_free(w);
    }
    for (int i = 0; i < fb.n; i++) free(data[i]);
    free(data);
    st_close(&fa);
    st_close(&fb);
    free(afile);
    return rc;
}
