/* data.positive_gap / data.positive_gap_frac: with data.positives = views a frame's positive is another
 * frame of its sequence beyond the near-duplicate gap (datasets/seq_positive.h), and a frame with none
 * left, like a row without a scene (a single-frame set such as Kvasir-SEG) in the same batch, gets a
 * crop view of itself. Flat-colour frames make the choice visible: a crop view of a flat image is the
 * same image (positive similarity exactly 1), a frame of the other colour is not. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/image.h"
#include "nn/autograd.h"
#include "nn/base/base.h"
#include "tests/test_util.h"
#include "tests/train/tiny_image_cfg.h"
#include "train/loop.h"
#include "train/objective_image.h"

/* two sequences of two frames, black at position 0 and white at position `far` (red | blue, rows 2-3),
 * and two rows without a scene (green, grey) */
static char *write_frames(const char *d, int far, int drop_view) {
    const unsigned char col[6][3] = {{0, 0, 0}, {255, 255, 255}, {255, 0, 0}, {0, 0, 255}, {0, 255, 0}, {128, 128, 128}};
    char *man = path_join(d, "seq.csv");
    FILE *f = fopen(man, "w");
    cr_assert(f);
    fprintf(f, "path,scene,view\n");
    unsigned char px[32 * 32 * 3];
    for (int i = 0; i < 6; i++) {
        for (int p = 0; p < 32 * 32; p++) memcpy(px + 3 * p, col[i], 3);
        char name[64];
        snprintf(name, sizeof name, "%s/f%d.png", d, i);
        cr_assert_eq(png_save_u8(name, px, 3, 32, 32), 0, "%s", er_msg());
        if (i < 4 && !(drop_view && i == 1)) fprintf(f, "f%d.png,s%d,%d\n", i, i / 2, i % 2 ? far : 0);
        else if (i < 4) fprintf(f, "f%d.png,s%d,\n", i, i / 2);
        else fprintf(f, "f%d.png,,\n", i);
    }
    fclose(f);
    return man;
}

/* pos_sim of micro-batch 0 (all six rows) with these keys; ER_INPUT runs return NAN */
static double positive_similarity(const char *man, const char *d, const char *positives, int gap, double frac) {
    image_cfg c;
    loop_keys k;
    tiny_image_cfg(&c, &k, man, d);
    k.batch = 6;
    c.mix_prob = 0;
    c.w_mae = 0;
    c.mask_ratio = 0;
    cfg_set_str(&c.positives, positives);
    c.positive_gap = gap;
    c.positive_gap_frac = frac;
    image_objective *o;
    double pos = NAN;
    if (image_objective_new(&c, &k, &o) == ER_OK) {
        loss_terms terms = {0};
        NO_GRAD {
            train_objective t = image_objective_iface(o);
            cr_assert(t.step(t.self, 0, 0, &terms), "%s", er_msg());
            loss_terms_resolve(&terms);
        }
        nn_step_end();
        for (int i = 0; i < terms.n; i++) if (!strcmp(terms.name[i], "pos_sim")) pos = terms.value[i];
        image_objective_free(o);
    }
    image_cfg_free(&c);
    loop_keys_free(&k);
    return pos;
}

Test(endofinder_train_seq, positives_beyond_the_gap_else_a_crop_view) {
    const char *d = test_tmpdir();
    char *man = write_frames(d, 3, 0); /* the two frames of a sequence are 3 positions apart */
    /* within the gap: every row (sequence frames and the rows without a scene) trains on a crop of itself */
    double wide = positive_similarity(man, d, "views", 4, 0);
    cr_assert(fabs(wide - 1) < 1e-5, "gap 4 > 3: no frame has a positive, all crop views: similarity %g", wide);
    /* at the gap: the sequence frames take the other colour */
    double at = positive_similarity(man, d, "views", 3, 0);
    cr_assert(at < 0.999, "gap 3 = the distance: the other frame is the positive, similarity %g", at);
    /* the fraction of the sequence (L = 2 frames): distance 3 >= 1.0 * 2 */
    double f_at = positive_similarity(man, d, "views", 0, 1.0);
    cr_assert(f_at < 0.999, "gap_frac 1: 3 >= 2, the other frame, similarity %g", f_at);
    char *man1 = write_frames(d, 1, 0);  /* now 1 position apart: 1 < 0.6 * 2 */
    double f_in = positive_similarity(man1, d, "views", 0, 0.6);
    cr_assert(fabs(f_in - 1) < 1e-5, "gap_frac 0.6 of 2 frames = 1.2 > 1: crop views, similarity %g", f_in);
    double f_edge = positive_similarity(man1, d, "views", 0, 0.5);
    cr_assert(f_edge < 0.999, "gap_frac 0.5 of 2 frames = 1 <= 1: the other frame, similarity %g", f_edge);
    free(man1);
    /* the keys belong to positives = views */
    cr_assert(isnan(positive_similarity(man, d, "crops", 2, 0)));
    cr_assert(strstr(er_msg(), "data.positive_gap") && strstr(er_msg(), "crops"), "%s", er_msg());
    /* a gap needs positions: a sequence row without a view is refused, naming the key */
    char *nov = write_frames(d, 3, 1);
    cr_assert(isnan(positive_similarity(nov, d, "views", 2, 0)));
    cr_assert(strstr(er_msg(), "data.positive_gap") && strstr(er_msg(), "no view"), "%s", er_msg());
    free(nov);
    free(man);
}
