/* Position-table resampling (nn/models/pos_interp.c) against PyTorch: every rule on DINOv2's 37x37
 * table (518 / 14) to 16x16 (224 / 14) and 5x5, and a 14x14 table enlarged to 16x16, written by
 * make_pos_interp_refs.py with the public code's own calls (MAE / HF, timm / DINOv2 hub reg, DINO v1 /
 * DINOv2 offset 0.1). Tolerance |ours - torch| <= 5e-7 * max |table| (a few ulp); measured (torch 1.13,
 * Debian): bicubic <= 1.6e-7, bicubic_aa <= 1.5e-7, bicubic_offset <= 2.3e-7 of max |table|. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoints/safetensors.h"
#include "nn/base/base.h"
#include "nn/models/pos_interp.h"
#include "tests/test_util.h"

#define REFS "tests/nn/models/pos_interp_refs.safetensors"
enum { D = 6 };

static float *read_all(const st_file *f, const char *name, int64_t *n) {
    const st_tensor *t = st_find(f, name);
    cr_assert(t, "%s: '%s' missing", REFS, name);
    float *buf = xmalloc(sizeof(float) * (size_t)t->numel);
    cr_assert_eq(st_read_f32(f, name, buf, t->numel), 0, "%s", er_msg());
    *n = t->numel;
    return buf;
}

/* resample the patch rows of `src` (1 + gs*gs rows) to gd and compare with ref (1 + gd*gd rows) */
static double check(const st_file *f, const char *srcname, int gs, int rule, const char *refname, int gd) {
    int64_t ns, nr;
    float *src = read_all(f, srcname, &ns), *ref = read_all(f, refname, &nr);
    cr_assert_eq(ns, (int64_t)(1 + gs * gs) * D);
    cr_assert_eq(nr, (int64_t)(1 + gd * gd) * D);
    float *out = xmalloc(sizeof(float) * (size_t)gd * gd * D);
    pos_interp_grid(rule, src + D, gs, out, gd, D);
    double md = 0, mr = 0;
    for (int i = 0; i < D; i++) cr_assert_eq(src[i], ref[i], "the [CLS] row is copied");
    for (int64_t i = 0; i < (int64_t)gd * gd * D; i++) {
        md = fmax(md, fabs((double)out[i] - ref[D + i]));
        mr = fmax(mr, fabs((double)ref[D + i]));
    }
    cr_log_info("%-16s %2d -> %2d: max |ours - torch| %.3g (max |table| %.3g)", refname, gs, gd, md, mr);
    cr_expect_leq(md, 5e-7 * mr, "%s: %d -> %d differs from PyTorch by %.3g", refname, gs, gd, md);
    free(src), free(ref), free(out);
    return md;
}

Test(pos_interp, every_rule_matches_pytorch) {
    st_file f;
    cr_assert_eq(st_open(REFS, &f), 0, "%s", er_msg());
    for (int r = 0; r < POS_INTERP_COUNT; r++) {
        char name[64];
        const char *rn = pos_interp_name(r);
        cr_assert_eq(pos_interp_rule(rn), r);
        snprintf(name, sizeof name, "%s_16", rn);
        check(&f, "src", 37, r, name, 16);
        snprintf(name, sizeof name, "%s_5", rn);
        check(&f, "src", 37, r, name, 5);
        snprintf(name, sizeof name, "%s_14to16", rn);
        check(&f, "src14", 14, r, name, 16);
    }
    st_close(&f);
}

/* The rules really differ on 518 -> 224 (so a wrong rule cannot pass the test above), and a rule
 * asked for the grid the table already has returns it unchanged. */
Test(pos_interp, rules_differ_and_same_size_is_identity) {
    st_file f;
    cr_assert_eq(st_open(REFS, &f), 0, "%s", er_msg());
    int64_t n;
    float *src = read_all(&f, "src", &n);
    float *o[POS_INTERP_COUNT];
    for (int r = 0; r < POS_INTERP_COUNT; r++) {
        o[r] = xmalloc(sizeof(float) * 256 * D);
        pos_interp_grid(r, src + D, 37, o[r], 16, D);
    }
    for (int a = 0; a < POS_INTERP_COUNT; a++)
        for (int b = a + 1; b < POS_INTERP_COUNT; b++) {
            double md = 0;
            for (int i = 0; i < 256 * D; i++) md = fmax(md, fabs((double)o[a][i] - o[b][i]));
            cr_expect_gt(md, 1e-2, "%s and %s agree (%.3g): the reference test could not tell them apart",
                         pos_interp_name(a), pos_interp_name(b), md);
        }
    float *same = xmalloc(sizeof(float) * 37 * 37 * D);
    for (int r = 0; r < POS_INTERP_COUNT; r++) {
        if (r == POS_INTERP_BICUBIC_OFFSET) continue; /* (37 + 0.1) / 37 is not the identity in torch either */
        pos_interp_grid(r, src + D, 37, same, 37, D);
        cr_expect(memcmp(same, src + D, sizeof(float) * 37 * 37 * D) == 0, "%s: 37 -> 37 changes the table",
                  pos_interp_name(r));
    }
    cr_expect_eq(pos_interp_rule("bilinear"), -1);
    for (int r = 0; r < POS_INTERP_COUNT; r++) free(o[r]);
    free(same), free(src);
    st_close(&f);
}
