/* vit_convert.c — one ViT file rewritten in another layout, raw tensor bytes kept (see vit_convert.h). */
#include "nn/models/vit_convert.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/base/base.h"
#include "nn/models/pos_interp.h"
#include "nn/models/vit_io.h"

typedef struct {
    st_writer *w;
    void **owned;  /* buffers st_write reads, freed after it */
    int nowned;
    char *note;
    size_t nnote, used;
} out_ctx;

static void say(out_ctx *o, const char *fmt, ...) {
    if (!o->note || o->used >= o->nnote) return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(o->note + o->used, o->nnote - o->used, fmt, ap);
    va_end(ap);
    if (k > 0) o->used += (size_t)k;
    if (o->used >= o->nnote) o->used = o->nnote - 1;
}

static void *own(out_ctx *o, size_t n) {
    o->owned = xrealloc(o->owned, sizeof(void *) * (size_t)(o->nowned + 1));
    return o->owned[o->nowned++] = xcalloc(n ? n : 1, 1);
}

static const uint8_t *bytes_of(const st_file *f, const st_tensor *t) { return f->data + t->offset; }

/* canonical tensor -> the target's name(s), bytes as they are (HF's attn.qkv split in three row blocks) */
static int put(out_ctx *o, const vit_tensors *vt, const vit_tensor *t, int to, int swiglu) {
    const st_file *f = vt->f;
    char name[256];
    if (t->nparts == 3) { /* HF q, k, v: one dtype, stacked into one buffer unless the target is HF too */
        for (int p = 1; p < 3; p++)
            if (t->part[p]->dtype != t->part[0]->dtype)
                return er_fail(ER_INPUT, "%s: '%s' is %s, '%s' %s: stacking them into %s would change values", f->path,
                               t->part[0]->name, st_dtype_name(t->part[0]->dtype), t->part[p]->name,
                               st_dtype_name(t->part[p]->dtype), t->name);
    }
    int dtype = t->part[0]->dtype;
    if (to == VIT_LAYOUT_HF && strstr(t->name, ".attn.qkv.")) {
        size_t nb = (t->nparts == 3 ? t->part[0]->nbytes * 3 : t->part[0]->nbytes) / 3;
        int64_t shape[ST_MAX_DIMS];
        memcpy(shape, t->shape, sizeof shape);
        shape[0] /= 3;
        for (int p = 0; p < 3; p++) {
            if (!vit_layout_name_of(to, t->name, p, swiglu, name, sizeof name)) return er_fail(ER_INPUT, "no HF name for %s", t->name);
            const uint8_t *src = t->nparts == 3 ? bytes_of(f, t->part[p]) : bytes_of(f, t->part[0]) + (size_t)p * nb;
            st_add(o->w, name, dtype, t->ndim, shape, src);
        }
        return ER_OK;
    }
    if (!vit_layout_name_of(to, t->name, 0, swiglu, name, sizeof name))
        return er_fail(ER_INPUT, "%s: '%s' has no name in the %s layout", f->path, t->name, vit_layout_label(to));
    if (t->nparts == 3) {
        uint8_t *buf = own(o, t->part[0]->nbytes * 3);
        for (int p = 0; p < 3; p++) memcpy(buf + (size_t)p * t->part[0]->nbytes, bytes_of(f, t->part[p]), t->part[p]->nbytes);
        st_add(o->w, name, dtype, t->ndim, t->shape, buf);
    } else {
        st_add(o->w, name, dtype, t->ndim, t->shape, bytes_of(f, t->part[0]));
    }
    return ER_OK;
}

static int all_zero_bytes(const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (p[i]) return 0;
    return 1;
}

int vit_convert(const st_file *in, int to, int pos_interp, const char *out_path, char *note, size_t nnote) {
    if (to != VIT_LAYOUT_TIMM && to != VIT_LAYOUT_META && to != VIT_LAYOUT_HF)
        return er_fail(ER_INPUT, "convert: a ViT is written as timm, meta or hf (not %s)", vit_layout_label(to));
    if (note && nnote) note[0] = 0;
    vit_tensors vt;
    if (vit_tensors_open(in, "", 1, &vt)) return ER_INPUT;
    /* the whole file must load: every tensor there, shaped right, finite */
    vit *check = vit_load_tensors(&vt, 1);
    if (!check) {
        vit_tensors_free(&vt);
        return ER_INPUT;
    }
    vit_config c = check->cfg;
    vit_free(check);
    if (pos_interp >= 0 && pos_interp < POS_INTERP_COUNT) c.pos_interp = pos_interp;
    out_ctx o = {st_writer_new(), NULL, 0, note, nnote, 0};
    say(&o, "read: %s\n", vit_layout_describe(vt.layout));
    int rc = ER_OK, D = c.dim;
    if (to == VIT_LAYOUT_HF && c.layerscale <= 0)
        rc = er_fail(ER_INPUT, "%s: no LayerScale (ls1/ls2.gamma), and Hugging Face's Dinov2 has it in every layer: "
                     "convert to timm or meta", in->path);
    if (!rc && to != VIT_LAYOUT_TIMM && c.pos_prefix > 1)
        rc = er_fail(ER_INPUT, "%s: pos_embed has rows for the %d registers, and %s gives registers no position: "
                     "convert to timm", in->path, c.registers, vit_layout_label(to));
    const vit_tensor *cls = vit_tensors_find(&vt, "cls_token"), *pos = vit_tensors_find(&vt, "pos_embed");
    for (int i = 0; !rc && i < vt.n; i++) {
        const vit_tensor *t = &vt.t[i];
        if (t == cls || t == pos) continue;
        rc = put(&o, &vt, t, to, c.swiglu);
    }
    if (!rc) {
        /* cls_token and the position table: folded / unfolded where the layouts disagree on [CLS]'s row */
        const st_tensor *pc = cls->part[0], *pp = pos->part[0];
        size_t row = pp->nbytes / (size_t)(pos->numel / D); /* bytes per row */
        char cname[64], pname[64];
        vit_layout_name_of(to, "cls_token", 0, 0, cname, sizeof cname);
        vit_layout_name_of(to, "pos_embed", 0, 0, pname, sizeof pname);
        int fold = to == VIT_LAYOUT_TIMM && c.registers > 0 && c.pos_prefix == 1;
        int unfold = to != VIT_LAYOUT_TIMM && c.pos_prefix == 0;
        if (fold) {
            int64_t pshape[3] = {1, pos->numel / D - 1, D};
            if (all_zero_bytes(bytes_of(in, pp), row)) {
                st_add(o.w, cname, pc->dtype, pc->ndim, pc->shape, bytes_of(in, pc));
                say(&o, "%s: pos_embed's [CLS] row is zero: cls_token kept as it is\n", cname);
            } else {
                float *sum = own(&o, sizeof(float) * (size_t)D), *p0 = xmalloc(sizeof(float) * (size_t)pos->numel);
                rc = st_read_f32(in, pc->name, sum, D);
                if (!rc) rc = st_read_f32(in, pp->name, p0, pos->numel);
                for (int k = 0; !rc && k < D; k++) sum[k] += p0[k];
                free(p0);
                st_add(o.w, cname, ST_F32, 3, (int64_t[]){1, 1, D}, sum);
                say(&o, "%s: pos_embed's [CLS] row added in (timm vit_*_reg4_dinov2 has no position for [CLS]; fp32, "
                        "the sum the forward computes): not invertible byte for byte\n", cname);
            }
            st_add(o.w, pname, pp->dtype, 3, pshape, bytes_of(in, pp) + row);
        } else if (unfold) {
            uint8_t *buf = own(&o, pp->nbytes + row); /* a zero [CLS] row, then the patch rows */
            memcpy(buf + row, bytes_of(in, pp), pp->nbytes);
            st_add(o.w, pname, pp->dtype, 3, (int64_t[]){1, pos->numel / D + 1, D}, buf);
            st_add(o.w, cname, pc->dtype, pc->ndim, pc->shape, bytes_of(in, pc));
            say(&o, "%s: a zero row added for [CLS] (the source has no position for it)\n", pname);
        } else {
            st_add(o.w, pname, pp->dtype, pp->ndim, pp->shape, bytes_of(in, pp));
            st_add(o.w, cname, pc->dtype, pc->ndim, pc->shape, bytes_of(in, pc));
        }
    }
    /* what a load leaves out: mask_token travels between Meta and HF, the rest is said */
    for (int i = 0; !rc && i < vt.ndropped; i++) {
        const char *nm = vt.dropped[i];
        const st_tensor *t = st_find(in, nm);
        size_t l = strlen(nm);
        int is_mask = l >= 10 && !strcmp(nm + l - 10, "mask_token") && vt.layout != VIT_LAYOUT_MAE;
        if (is_mask && to != VIT_LAYOUT_TIMM) {
            st_add(o.w, to == VIT_LAYOUT_HF ? "embeddings.mask_token" : "mask_token", t->dtype, t->ndim, t->shape, bytes_of(in, t));
            continue;
        }
        say(&o, "left out: %s%s\n", nm, is_mask ? " (unused at inference; timm has none)" : "");
    }
    if (!rc) {
        st_add_meta(o.w, "format", "pt");
        st_add_meta(o.w, "endoret.vit.pos_interp", pos_interp_name(c.pos_interp));
        const char *h = st_meta(in, "endoret.vit.heads");
        if (h) st_add_meta(o.w, "endoret.vit.heads", h);
        if (vt.chunk > 0) say(&o, "Meta's chunked blocks.C.N written as blocks.N\n");
        say(&o, "wrote: %s, position table rule %s kept in metadata\n", vit_layout_describe(to), pos_interp_name(c.pos_interp));
        rc = st_write(o.w, out_path);
    }
    st_writer_free(o.w);
    for (int i = 0; i < o.nowned; i++) free(o.owned[i]);
    free(o.owned);
    vit_tensors_free(&vt);
    return rc;
}
