/* embed_scene.h — `endoret embed --scene`: one descriptor per case (scene) from its views.
 *
 *   --fusion transformer (default): the model's scene encoder over the views' [CLS] (EndoFinder-Scene;
 *            a model family without one is an error naming --fusion mean);
 *   --fusion mean: the average of the views' descriptors, not renormalised (the paper's baseline; the
 *            retrieval distance is cosine, so the scale does not matter).
 *   --groups "0,1;2,3": instead of all of a scene's views, one row per scene and group, fused from the
 *            group's views; the row's view is the group's name ("0+1", "2+3"), so EndoFinder's Q1Q2 /
 *            R1R2 protocol is `eval reid --emb F --query-view 0+1 --ref-view 2+3`. A scene lacking a
 *            view of a group has no row for that group (counted in the summary).
 * Rows: the scenes of the selected manifest rows in order of first appearance; ids, labels and scene
 * values are those of the scene's first row (the manifest's own values). */
#ifndef ENDORET_CLI_EMBED_SCENE_H
#define ENDORET_CLI_EMBED_SCENE_H

#include "datasets/manifest.h"
#include "infer/retrieval/embeddings.h"
#include "nn/models/model.h"

typedef struct {
    const char *fusion;   /* "transformer" | "mean" */
    const char *groups;   /* NULL = all views */
    int max_views;        /* a scene with more views is an error (memory of one forward) */
} embed_scene_opts;

/* Fills e (allocated here) from the manifest rows rows[0..n). *skipped: (scene, group) pairs lacking a view. */
int embed_scenes(model *net, const manifest *m, const char *man_path, const int *rows, int n, const embed_scene_opts *o,
                 emb_set *e, int *skipped);

#endif
