/* cmd_convert.c — `endoret convert --in FILE --out FILE --to timm|meta|hf|torchvision`: a weights file
 * rewritten in another public layout, tensor bytes kept (nn/models/vit_convert.h for a ViT; a torchvision
 * ResNet is already timm's layout and is copied). Anything that cannot be mapped exactly is refused. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoints/safetensors.h"
#include "cli/common_opts.h"
#include "nn/base/base.h"
#include "nn/models/pos_interp.h"
#include "nn/models/resnet_model.h"
#include "nn/models/vit_convert.h"
#include "nn/models/vit_layouts.h"
#include "nn/models/vit_lora.h"
#include "nn/models/model.h"

/* A torchvision ResNet (checked by loading it) written again under the same names: timm's ResNet uses
 * torchvision's names, so both targets are this copy. */
static int copy_resnet(const st_file *f, const char *out) {
    model *m = NULL;
    int rc = model_load(f->path, NULL, NULL, 0, &m);
    if (rc) return rc;
    model_free(m);
    st_writer *w = st_writer_new();
    for (int i = 0; i < f->n; i++) {
        const st_tensor *t = &f->tensors[i];
        st_add(w, t->name, t->dtype, t->ndim, t->shape, f->data + t->offset);
    }
    for (int i = 0; i < f->nmeta; i++) st_add_meta(w, f->meta_keys[i], f->meta_vals[i]);
    rc = st_write(w, out);
    st_writer_free(w);
    return rc;
}

int cmd_convert(int argc, char **argv) {
    const char *in = NULL, *out = NULL, *to = NULL, *lora = NULL, *rule = NULL;
    arg_spec specs[] = {
        {"in", ARG_STR, &in, "weights file (timm, MAE, Meta DINOv2, Hugging Face, DINO v1, endoret; torchvision ResNet)",
         .required = 1},
        OPT_OUT(&out, "file to write (atomically)", .required = 1),
        {"to", ARG_STR, &to, "layout to write", "timm|meta|hf|torchvision", .required = 1},
        {"pos-interp", ARG_STR, &rule, "position-table rule to record when the layout cannot tell: a bare DINO v1 "
                                       "backbone has timm's names (bicubic_offset)", "bicubic|bicubic_aa|bicubic_offset"},
        {"merge-lora", ARG_STR, &lora, "LoRA adapter (a PEFT folder's adapter_model.safetensors) merged into the timm-named --in weights first"},
    };
    int nspecs = (int)(sizeof specs / sizeof *specs);
    int rc = args_parse(argc, argv, specs, nspecs, "endoret convert --in FILE --out FILE --to timm|meta|hf|torchvision",
                        NULL, NULL);
    if (rc == ARGS_HELP) return ER_OK;
    if (rc) return rc;
    int layout = !strcmp(to, "timm") ? VIT_LAYOUT_TIMM : !strcmp(to, "meta") ? VIT_LAYOUT_META
               : !strcmp(to, "hf") ? VIT_LAYOUT_HF : -2; /* -2: torchvision */
    int pos_rule = rule ? pos_interp_rule(rule) : -1;
    /* --merge-lora ADAPTER: W + (alpha / r) B A into the timm-named weights of `in` (nn/models/vit_lora.h
     * lora_merge_files), written to a temporary file beside --out, which is then converted as any input */
    char *merged = NULL;
    const char *given = in;
    if (lora) {
        /* "<out>.merged.tmp.<pid>": the atomic writers' temp pattern, so remove_stale_temps finds the
         * full-size merges of killed runs (and their own temps) and this one removes them */
        size_t n = strlen(out) + 32;
        merged = xmalloc(n);
        snprintf(merged, n, "%s.merged", out);
        remove_stale_temps(merged);
        snprintf(merged, n, "%s.merged.tmp.%d", out, (int)getpid());
        if ((rc = lora_merge_files(in, lora, merged))) {
            remove(merged);
            free(merged);
            return rc;
        }
        in = merged;
    }
    st_file f;
    rc = st_open(in, &f);
    if (rc) {
        if (merged) remove(merged), free(merged);
        return rc;
    }
    char note[4096] = "";
    if (st_meta(&f, "endoret.arch") && !st_meta(&f, "endoret.vit.dim")) {
        rc = er_fail(ER_INPUT, "%s: an endoret %s file, not a plain weights layout", in, st_meta(&f, "endoret.arch"));
    } else if (resnet_arch.recognises(&f)) {
        if (layout == VIT_LAYOUT_META || layout == VIT_LAYOUT_HF)
            rc = er_fail(ER_INPUT, "%s: a torchvision ResNet has no %s layout (that is DINOv2's ViT): --to torchvision or timm",
                         in, to);
        else if (!(rc = copy_resnet(&f, out)))
            snprintf(note, sizeof note, "read: torchvision ResNet\nwrote: torchvision ResNet (timm's ResNet has the same names)\n");
    } else {
        int is_vit = 0;
        for (int i = 0; i < f.n && !is_vit; i++)
            is_vit = strstr(f.tensors[i].name, "patch_embed.proj.weight") || strstr(f.tensors[i].name, "patch_embeddings.projection.weight");
        if (!is_vit && !st_meta(&f, "endoret.vit.dim"))
            rc = er_fail(ER_INPUT, "%s: neither a ViT nor a torchvision ResNet: nothing to convert", in);
        else if (layout == -2)
            rc = er_fail(ER_INPUT, "%s: a ViT has no torchvision layout here (torchvision's VisionTransformer names, "
                         "class_token / conv_proj / encoder.layers.encoder_layer_N, are not mapped): --to timm, meta or hf", in);
        else
            rc = vit_convert(&f, layout, pos_rule, out, note, sizeof note);
    }
    st_close(&f);
    if (merged) {
        if (rc && strstr(er_msg(), merged)) { /* the temp means nothing to the user: name what it came from */
            char msg[1024];
            snprintf(msg, sizeof msg, "%s", er_msg());
            rc = er_fail(rc, "%s merged with the LoRA adapter %s: %s", given, lora, msg);
        }
        remove(merged);
        free(merged);
        in = given;
    }
    if (rc) return rc;
    if (lora) printf("merged: LoRA adapter %s\n", lora);
    fputs(note, stdout);
    printf("%s -> %s\n", in, out);
    return ER_OK;
}
