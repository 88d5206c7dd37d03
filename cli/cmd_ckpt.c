/* cmd_ckpt.c — `endoret ckpt FILE`: what a safetensors file holds (weights, optimizer state,
 * counters, metadata), after the same validation every loader applies. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoints/safetensors.h"
#include "cli/common_opts.h"
#include "nn/base/base.h"
#include "nn/models/pos_interp.h"
#include "nn/models/resnet_model.h"
#include "nn/models/vit_io.h"

static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
        else fputc(*p, f);
    }
    fputc('"', f);
}

static void shape_str(const st_tensor *t, char *buf, size_t n) {
    size_t l = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < t->ndim && l < n; d++) l += (size_t)snprintf(buf + l, n - l, "%s%" PRId64, d ? ", " : "", t->shape[d]);
    if (l < n) snprintf(buf + l, n - l, "]");
}

static int is_state(const char *name) { return !strncmp(name, "optim.", 6) || !strncmp(name, "train.", 6); }

/* Which weight layout the file is (nn/models/vit_layouts.h, or torchvision's ResNet), checked as strictly
 * as a load would: "layout" gets the label ("" when none), "what" one line (or why it is refused). */
static void layout_of(const st_file *f, char *layout, size_t nl, char *what, size_t nw) {
    vit_tensors t;
    vit_config c;
    snprintf(layout, nl, "%s", "");
    int is_vit = 0;
    for (int i = 0; i < f->n && !is_vit; i++)
        is_vit = strstr(f->tensors[i].name, "patch_embed.proj.weight") || strstr(f->tensors[i].name, "patch_embeddings.projection.weight");
    if (st_meta(f, "endoret.vit.dim") || is_vit) {
        if (vit_tensors_open(f, "", 1, &t)) {
            snprintf(what, nw, "a ViT that does not load: %s", er_msg());
            er_clear();
            return;
        }
        snprintf(layout, nl, "%s", vit_layout_label(t.layout));
        if (vit_config_from_tensors(&t, &c)) {
            snprintf(what, nw, "%s, does not load: %s", vit_layout_describe(t.layout), er_msg());
            er_clear();
        } else {
            size_t l = (size_t)snprintf(what, nw, "%s%s%s%s: ViT dim %d depth %d patch %d img %d, %d registers%s%s, "
                                        "position table resized by %s", vit_layout_describe(t.layout),
                                        *t.prefix ? ", under '" : "", t.prefix, *t.prefix ? "'" : "", c.dim, c.depth,
                                        c.patch, c.img, c.registers, c.layerscale > 0 ? ", LayerScale" : "",
                                        c.swiglu ? ", SwiGLU MLP" : "", pos_interp_name(c.pos_interp));
            for (int i = 0; i < t.ndropped && l < nw; i++)
                l += (size_t)snprintf(what + l, nw - l, "%s%s", i ? ", " : "; left out: ", t.dropped[i]);
        }
        vit_tensors_free(&t);
        return;
    }
    if (resnet_arch.recognises(f)) {
        snprintf(layout, nl, "torchvision");
        snprintf(what, nw, "torchvision ResNet (conv1, bn1, layer1.0...)");
        return;
    }
    snprintf(what, nw, "no weight layout recognised");
}

int cmd_ckpt(int argc, char **argv) {
    int json = 0, all = 0;
    arg_spec specs[] = {
        OPT_JSON(&json),
        {"all", ARG_FLAG, &all, "also list optimizer-state tensors"},
    };
    char **pos = NULL;
    int npos = 0;
    int rc = args_parse(argc, argv, specs, 2, "endoret ckpt FILE.safetensors [--json] [--all]", &pos, &npos);
    if (rc == ARGS_HELP) return ER_OK;
    if (rc) return rc;
    if (npos != 1) {
        free(pos);
        return er_fail(ER_INPUT, "ckpt: expected one file, got %d (see endoret ckpt --help)", npos);
    }
    st_file f;
    rc = st_open(pos[0], &f);
    free(pos);
    if (rc) return rc;
    int64_t weights = 0, state = 0;
    int nweights = 0;
    for (int i = 0; i < f.n; i++) {
        if (is_state(f.tensors[i].name)) state += f.tensors[i].numel;
        else { weights += f.tensors[i].numel; nweights++; }
    }
    int64_t train_step = -1, opt_step = -1;
    if (st_find(&f, "train.step") && st_find(&f, "train.step")->numel == 1) st_read_i64(&f, "train.step", &train_step, 1);
    if (st_find(&f, "optim.step") && st_find(&f, "optim.step")->numel == 1) st_read_i64(&f, "optim.step", &opt_step, 1);
    char shp[256], layout[32], what[2048];
    layout_of(&f, layout, sizeof layout, what, sizeof what);
    if (json) {
        printf("{\"file\":");
        json_str(stdout, f.path);
        printf(",\"bytes\":%zu,\"tensors\":%d,\"weight_tensors\":%d,\"weight_elements\":%" PRId64
               ",\"state_elements\":%" PRId64 ",\"train_step\":%" PRId64 ",\"optim_step\":%" PRId64,
               f.size, f.n, nweights, weights, state, train_step, opt_step);
        printf(",\"layout\":");
        json_str(stdout, layout);
        printf(",\"layout_detail\":");
        json_str(stdout, what);
        printf(",\"metadata\":{");
        for (int i = 0; i < f.nmeta; i++) {
            if (i) putchar(',');
            json_str(stdout, f.meta_keys[i]);
            putchar(':');
            json_str(stdout, f.meta_vals[i]);
        }
        printf("},\"list\":[");
        int first = 1;
        for (int i = 0; i < f.n; i++) {
            const st_tensor *t = &f.tensors[i];
            if (!all && is_state(t->name)) continue;
            shape_str(t, shp, sizeof shp);
            printf("%s{\"name\":", first ? "" : ",");
            json_str(stdout, t->name);
            printf(",\"dtype\":\"%s\",\"shape\":%s}", st_dtype_name(t->dtype), shp);
            first = 0;
        }
        printf("]}\n");
    } else {
        printf("%s: %zu bytes, %d tensors (%d weights, %" PRId64 " weight elements; %" PRId64 " optimizer/counter elements)\n",
               f.path, f.size, f.n, nweights, weights, state);
        if (train_step >= 0) printf("train.step %" PRId64 "\n", train_step);
        if (opt_step >= 0) printf("optim.step %" PRId64 "\n", opt_step);
        printf("layout %s: %s\n", *layout ? layout : "none", what);
        for (int i = 0; i < f.nmeta; i++) {
            const char *v = f.meta_vals[i], *nl = strchr(v, '\n');
            printf("meta %s = %.*s%s\n", f.meta_keys[i], nl ? (int)(nl - v) : (int)strlen(v), v, nl ? " ..." : "");
        }
        for (int i = 0; i < f.n; i++) {
            const st_tensor *t = &f.tensors[i];
            if (!all && is_state(t->name)) continue;
            shape_str(t, shp, sizeof shp);
            printf("  %-40s %-5s %s\n", t->name, st_dtype_name(t->dtype), shp);
        }
        if (!all && state) printf("  (optimizer state not listed: --all)\n");
    }
    st_close(&f);
    return ER_OK;
}
