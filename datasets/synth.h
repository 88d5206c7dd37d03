/* synth.h — procedural multi-view "polyp scenes": the embedded default dataset of endoret.
 *
 * A scene is a folded mucosa-like height field with one lesion (a bump with its own outline,
 * height profile, surface pattern and colour) at the origin. A view is a ray-cast rendering from
 * one camera pose with an endoscope-like light at the camera (inverse-square falloff, wet specular
 * highlights, circular vignette), plus the lesion mask.
 *
 * The binary "pathology" label is carried by shape and texture, never by colour alone:
 *   benign     : smooth, round outline; round-pit surface pattern
 *   malignant  : lobulated outline; elongated/branched (gyrus-like) pit pattern; rougher surface
 * Each cue is drawn from overlapping per-label ranges, so single scenes can be ambiguous. Colour,
 * size, height profile, folds and vessels are drawn from the same ranges for both labels.
 * Everything derives from (seed, scene, view) through Philox streams: same seed => same bytes. */
#ifndef ENDORET_SYNTH_H
#define ENDORET_SYNTH_H

#include <stdint.h>
#include "datasets/image.h"

typedef struct {
    int label;              /* 0 benign, 1 malignant, -1 background-only (no lesion) */
    uint64_t seed;
    int scene;
    /* lesion */
    float radius, height, flat;      /* footprint radius, peak height, profile exponent */
    float lob[4][2];                 /* outline harmonics m = 2..5 (cos, sin coefficients) */
    float tex_mix;                   /* 0 = round pits, 1 = elongated gyri */
    float tex_freq, tex_amp, tex_angle, tex_cs[2], rough;
    float lesion_tint[3];            /* multiplicative albedo tint of the lesion */
    /* mucosa */
    float fold_dir[3][2], fold_freq[3], fold_amp[3], fold_phase[3];
    float base_albedo[3], vessel_density, vessel_freq;
    float zmax;                      /* upper bound of the surface height */
    float slope_fold;                /* bound on the fold slope (ray-march step) */
} synth_scene;

typedef struct {
    int scenes, views, size;
    uint64_t seed;
    int background;   /* also write one lesion-free view per scene (label "none") */
    int threads;      /* 0 = OpenMP default */
} synth_config;

/* Scene parameters for scene index `scene` with the given label (0/1, or -1 = background). */
void synth_scene_make(uint64_t seed, int scene, int label, synth_scene *s);
/* Render view `view` of a scene into img (3 x size x size) and mask (1 x size x size, 0/1). */
void synth_render_view(const synth_scene *s, int view, int size, image *img, image *mask);
/* Balanced labels: label of scene i (0/1), a deterministic shuffle of an alternating list. */
void synth_labels(uint64_t seed, int scenes, int *labels);
/* Split of scene i: "train"/"val"/"test", 70/15/15 per label (stratified, deterministic). */
void synth_splits(uint64_t seed, int scenes, const int *labels, const char **split);
/* Write DIR/images/sNNNNN_vVV.png, DIR/masks/(same name) and DIR/manifest.csv. */
int synth_write_dataset(const char *dir, const synth_config *cfg);

extern const char *const SYNTH_LABEL_NAMES[2]; /* "benign", "malignant" */

#endif
