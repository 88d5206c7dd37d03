/* `endoret convert` (nn/models/vit_convert.c, cli/cmd_convert.c): every layout file of
 * test_vit_layouts.c (and the GELU DINOv2 of test_dinov2.c) converted to every other layout and back
 * gives the same bytes, dtype and shape for every tensor (mask_token included between Meta and HF);
 * the one documented exception, timm's [CLS] fold for registers, changes only cls_token and the
 * [CLS] row and leaves the network's output bit-identical; every converted file gives the source's
 * [CLS] bit for bit (at the table's size and resized by the source's rule); what cannot be mapped
 * exactly is refused naming the file. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoints/safetensors.h"
#include "nn/autograd.h"
#include "nn/base/base.h"
#include "nn/models/model.h"
#include "nn/models/vit_convert.h"
#include "nn/models/vit_layouts.h"
#include "nn/models/vit_model.h"
#include "tests/test_util.h"

int cmd_convert(int argc, char **argv);
int cmd_ckpt(int argc, char **argv);

#define DIR "tests/nn/models/"
enum { B = 2 };

static char *HEADS2[] = {"model.heads=2"};

static void convert(const char *in, int to, const char *out) {
    st_file f;
    char note[2048];
    cr_assert_eq(st_open(in, &f), 0, "%s", er_msg());
    cr_assert_eq(vit_convert(&f, to, -1, out, note, sizeof note), 0, "%s -> %s: %s", in, vit_layout_label(to), er_msg());
    st_close(&f);
}

/* the bytes of a canonical tensor (HF's q, k, v concatenated) */
static uint8_t *bytes(const vit_tensors *v, const vit_tensor *t, size_t *n) {
    *n = 0;
    for (int p = 0; p < t->nparts; p++) *n += t->part[p]->nbytes;
    uint8_t *b = xmalloc(*n), *o = b;
    for (int p = 0; p < t->nparts; p++) {
        memcpy(o, v->f->data + t->part[p]->offset, t->part[p]->nbytes);
        o += t->part[p]->nbytes;
    }
    return b;
}

/* every canonical tensor of a equals b's (dtype, shape, bytes); returns the number that differ and
 * names them in `which`. mask_lost: b went through timm, which has no mask_token */
static int compare(const char *a_path, const char *b_path, char *which, size_t nw, int mask_lost) {
    st_file fa, fb;
    vit_tensors a, b;
    cr_assert_eq(st_open(a_path, &fa), 0, "%s", er_msg());
    cr_assert_eq(st_open(b_path, &fb), 0, "%s", er_msg());
    cr_assert_eq(vit_tensors_open(&fa, "", 1, &a), 0, "%s", er_msg());
    cr_assert_eq(vit_tensors_open(&fb, "", 1, &b), 0, "%s", er_msg());
    cr_expect_eq(a.n, b.n, "%s has %d tensors, %s %d", a_path, a.n, b_path, b.n);
    int ndiff = 0;
    which[0] = 0;
    for (int i = 0; i < a.n; i++) {
        const vit_tensor *ta = &a.t[i], *tb = vit_tensors_find(&b, ta->name);
        cr_assert(tb, "%s: '%s' lost", b_path, ta->name);
        size_t na, nb;
        uint8_t *ba = bytes(&a, ta, &na), *bb = bytes(&b, tb, &nb);
        int same = ta->part[0]->dtype == tb->part[0]->dtype && ta->ndim == tb->ndim &&
                   !memcmp(ta->shape, tb->shape, sizeof(int64_t) * (size_t)ta->ndim) && na == nb && !memcmp(ba, bb, na);
        if (!same) {
            ndiff++;
            snprintf(which + strlen(which), nw - strlen(which), "%s ", ta->name);
        }
        free(ba), free(bb);
    }
    /* mask_token travels between Meta and HF */
    int ma = 0, mb = 0;
    for (int i = 0; i < a.ndropped; i++) ma += strstr(a.dropped[i], "mask_token") != NULL;
    for (int i = 0; i < b.ndropped; i++) mb += strstr(b.dropped[i], "mask_token") != NULL;
    if (mask_lost) cr_expect_eq(mb, 0, "%s: a mask_token after timm", b_path);
    else cr_expect_eq(ma, mb, "%s: mask_token %s", b_path, ma ? "lost" : "appeared");
    vit_tensors_free(&a), vit_tensors_free(&b);
    st_close(&fa), st_close(&fb);
    return ndiff;
}

/* [CLS] of a file at img (images of make_layout_refs.py) */
static void cls_at(const char *path, int img, float *out, int *dim) {
    model *m = NULL;
    cr_assert_eq(model_load(path, NULL, HEADS2, 1, &m), 0, "%s", er_msg());
    cr_assert_eq(model_set_img(m, img), 0, "%s", er_msg());
    int64_t n = (int64_t)B * 3 * img * img;
    float *x = xmalloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++) x[i] = (float)(sin(0.0137 * (double)i) + 0.5 * cos(0.291 * (double)i));
    NO_GRAD {
        tensor *c = vit_cls(vit_model_vit(m), &NN_EVAL, x, B);
        cr_assert(c, "%s", er_msg());
        tensor_to_host(c, out);
    }
    nn_step_end();
    *dim = m->dim;
    free(x);
    model_free(m);
}

static void expect_same_output(const char *a, const char *b, int img) {
    float oa[B * 256], ob[B * 256];
    int da, db;
    cls_at(a, img, oa, &da);
    cls_at(b, img, ob, &db);
    cr_assert_eq(da, db);
    cr_expect(memcmp(oa, ob, sizeof(float) * (size_t)(B * da)) == 0, "%s and %s give different [CLS] at %d", a, b, img);
}

typedef struct {
    const char *file;
    int layout, table_img, other_img, fold; /* fold: registers with a [CLS] row (Meta / HF) */
} source;

static const source SOURCES[] = {
    {DIR "layout_meta_g.safetensors", VIT_LAYOUT_META, 518, 224, 1},
    {DIR "layout_hf_reg.safetensors", VIT_LAYOUT_HF, 56, 84, 1},
    {DIR "layout_hf_plain.safetensors", VIT_LAYOUT_HF, 56, 84, 0},
    {DIR "layout_timm_reg.safetensors", VIT_LAYOUT_TIMM, 70, 98, 0},
    {DIR "dinov2_reg4_meta.safetensors", VIT_LAYOUT_META, 56, 70, 1},
};

Test(vit_convert, every_layout_to_every_other_and_back) {
    const char *dir = test_tmpdir();
    const int targets[3] = {VIT_LAYOUT_TIMM, VIT_LAYOUT_META, VIT_LAYOUT_HF};
    for (size_t s = 0; s < sizeof SOURCES / sizeof *SOURCES; s++) {
        const source *src = &SOURCES[s];
        for (int k = 0; k < 3; k++) {
            int to = targets[k];
            if (to == src->layout) continue;
            char *mid = path_join(dir, "mid.safetensors"), *back = path_join(dir, "back.safetensors");
            convert(src->file, to, mid);
            convert(mid, src->layout, back);
            char which[1024];
            int nd = compare(src->file, back, which, sizeof which, to == VIT_LAYOUT_TIMM);
            int folded = src->fold && to == VIT_LAYOUT_TIMM;
            if (folded) /* timm's own rewrite: [CLS]'s row added into cls_token, not undone byte for byte */
                cr_expect(nd == 2 && strstr(which, "cls_token") && strstr(which, "pos_embed"),
                          "%s -> timm -> back: %d tensors differ (%s), expected cls_token and pos_embed only", src->file, nd, which);
            else
                cr_expect_eq(nd, 0, "%s -> %s -> back: %d tensors differ: %s", src->file, vit_layout_label(to), nd, which);
            cr_log_info("%s -> %s -> %s: %d tensors differ %s", src->file, vit_layout_label(to),
                        vit_layout_label(src->layout), nd, which);
            /* the network is the same one, bit for bit, at its own size and resized by its own rule */
            expect_same_output(src->file, mid, src->table_img);
            expect_same_output(src->file, mid, src->other_img);
            free(mid), free(back);
        }
    }
}

Test(vit_convert, dino_v1_to_timm_and_meta_gives_the_same_network) {
    char *t = path_join(test_tmpdir(), "d_timm.safetensors"), *m = path_join(test_tmpdir(), "d_meta.safetensors");
    convert(DIR "layout_dinov1.safetensors", VIT_LAYOUT_TIMM, t);
    convert(t, VIT_LAYOUT_META, m);
    expect_same_output(DIR "layout_dinov1.safetensors", t, 112);
    expect_same_output(DIR "layout_dinov1.safetensors", t, 64); /* DINO's 0.1 offset rule travels in the metadata */
    expect_same_output(DIR "layout_dinov1.safetensors", m, 64);
    char which[1024];
    cr_expect_eq(compare(t, m, which, sizeof which, 0), 0, "%s", which);
    free(t), free(m);
}

static int run_convert(const char *in, const char *out, const char *to, const char *lora) {
    char *argv[10] = {"convert", "--in", (char *)in, "--out", (char *)out, "--to", (char *)to, NULL, NULL, NULL};
    int argc = 7;
    if (lora) argv[argc++] = "--merge-lora", argv[argc++] = (char *)lora;
    return cmd_convert(argc, argv);
}

Test(vit_convert, what_cannot_be_mapped_exactly_is_refused) {
    char *out = path_join(test_tmpdir(), "x.safetensors");
    /* HF has LayerScale in every layer; DINO v1 has none */
    cr_expect_eq(run_convert(DIR "layout_dinov1.safetensors", out, "hf", NULL), ER_INPUT);
    cr_expect(strstr(er_msg(), "layout_dinov1") && strstr(er_msg(), "LayerScale"), "%s", er_msg());
    /* a ViT has no torchvision layout here; a ResNet no Meta / HF one */
    cr_expect_eq(run_convert(DIR "layout_meta_g.safetensors", out, "torchvision", NULL), ER_INPUT);
    cr_expect(strstr(er_msg(), "layout_meta_g") && strstr(er_msg(), "torchvision"), "%s", er_msg());
    cr_expect_eq(run_convert(DIR "layout_hf_reg.safetensors", out, "dinov1", NULL), ER_INPUT);
    cr_expect(strstr(er_msg(), "--to: expected one of") && strstr(er_msg(), "'dinov1'"), "%s", er_msg()); /* args.h's one message */
    /* a LoRA adapter that is not there: one message naming it, nothing written */
    cr_expect_eq(run_convert(DIR "layout_hf_reg.safetensors", out, "meta", "no_such_adapter.safetensors"), ER_INPUT);
    cr_expect(strstr(er_msg(), "no_such_adapter"), "%s", er_msg());
    /* a file that does not load strictly is not converted */
    cr_expect_eq(run_convert("tests/nn/models/layout_refs.safetensors", out, "timm", NULL), ER_INPUT);
    FILE *f = fopen(out, "rb");
    cr_expect_null(f, "a refused conversion wrote %s", out);
    if (f) fclose(f);
    free(out);
}

Test(vit_convert, torchvision_resnet_is_copied_exactly) {
    /* a torchvision ResNet written by the model registry (torchvision names) */
    model *m = NULL;
    char *sets[] = {"model.width=8", "model.img=32"};
    cr_assert_eq(model_create("resnet18", NULL, sets, 2, &m), 0, "%s", er_msg());
    char *a = path_join(test_tmpdir(), "r.safetensors"), *b = path_join(test_tmpdir(), "r_tv.safetensors");
    cr_assert_eq(model_save(m, a, -1), 0, "%s", er_msg());
    model_free(m);
    /* our file names its arch in metadata: strip it to a plain torchvision state dict */
    st_file f;
    cr_assert_eq(st_open(a, &f), 0, "%s", er_msg());
    st_writer *w = st_writer_new();
    for (int i = 0; i < f.n; i++) st_add(w, f.tensors[i].name, f.tensors[i].dtype, f.tensors[i].ndim, f.tensors[i].shape,
                                         f.data + f.tensors[i].offset);
    char *plain = path_join(test_tmpdir(), "r_plain.safetensors");
    cr_assert_eq(st_write(w, plain), 0, "%s", er_msg());
    st_writer_free(w);
    cr_assert_eq(run_convert(plain, b, "torchvision", NULL), 0, "%s", er_msg());
    cr_expect_eq(run_convert(plain, b, "meta", NULL), ER_INPUT);
    cr_expect(strstr(er_msg(), "ResNet"), "%s", er_msg());
    st_file g;
    cr_assert_eq(st_open(b, &g), 0, "%s", er_msg());
    cr_assert_eq(g.n, f.n);
    for (int i = 0; i < f.n; i++) {
        const st_tensor *t = &f.tensors[i], *u = st_find(&g, t->name);
        cr_assert(u, "'%s' lost", t->name);
        cr_expect(u->nbytes == t->nbytes && !memcmp(f.data + t->offset, g.data + u->offset, t->nbytes), "'%s' changed", t->name);
    }
    st_close(&f), st_close(&g);
    free(a), free(b), free(plain);
}

/* `convert --pos-interp` records the rule a file's layout cannot tell (a bare DINO v1 backbone has
 * timm's names); `ckpt --json` names each layout and the rule. */
Test(vit_convert, pos_interp_recorded_and_ckpt_names_the_layout) {
    char *t = path_join(test_tmpdir(), "d_timm.safetensors");
    cr_assert_eq(run_convert(DIR "layout_dinov1.safetensors", t, "timm", NULL), 0, "%s", er_msg());
    st_file f;
    cr_assert_eq(st_open(t, &f), 0, "%s", er_msg());
    cr_expect_str_eq(st_meta(&f, "endoret.vit.pos_interp"), "bicubic_offset");
    st_close(&f);
    char *argv[] = {"convert", "--in", (char *)DIR "layout_timm_reg.safetensors", "--out", t, "--to", "meta", "--pos-interp",
                    "bicubic_offset"};
    cr_assert_eq(cmd_convert(9, argv), 0, "%s", er_msg());
    cr_assert_eq(st_open(t, &f), 0, "%s", er_msg());
    cr_expect_str_eq(st_meta(&f, "endoret.vit.pos_interp"), "bicubic_offset");
    st_close(&f);
    argv[8] = "nearest";
    cr_expect_eq(cmd_convert(9, argv), ER_INPUT);
    cr_expect(strstr(er_msg(), "--pos-interp: expected one of") && strstr(er_msg(), "'nearest'"), "%s", er_msg());
    /* ckpt --json: the layout of each file */
    const char *files[][2] = {{DIR "layout_meta_g.safetensors", "\"layout\":\"meta\""},
                              {DIR "layout_hf_reg.safetensors", "\"layout\":\"hf\""},
                              {DIR "layout_dinov1.safetensors", "\"layout\":\"dinov1\""},
                              {DIR "layout_timm_reg.safetensors", "\"layout\":\"timm\""},
                              {DIR "layout_refs.safetensors", "\"layout\":\"\""}};
    char *out = path_join(test_tmpdir(), "ckpt.json");
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        fflush(stdout);
        FILE *saved = fdopen(dup(fileno(stdout)), "w");
        cr_assert(freopen(out, "w", stdout));
        char *cargv[] = {"ckpt", (char *)files[i][0], "--json"};
        int rc = cmd_ckpt(3, cargv);
        fflush(stdout);
        dup2(fileno(saved), fileno(stdout));
        fclose(saved);
        cr_assert_eq(rc, 0, "%s", er_msg());
        char buf[16384] = "";
        FILE *g = fopen(out, "r");
        size_t n = fread(buf, 1, sizeof buf - 1, g);
        buf[n] = 0;
        fclose(g);
        cr_expect(strstr(buf, files[i][1]), "%s: expected %s in %.300s", files[i][0], files[i][1], buf);
    }
    free(out);
    free(t);
}
