/* scene_reid.h — held-out scene re-identification of a scene model (EndoFinder-Scene's periodic
 * evaluation, train/objective_scene.c): each scene with views 0-3 gives a query descriptor from
 * views 0+1 and a reference descriptor from views 2+3, the model's scene encoder on each pair
 * (model_embed_scene); queries are matched to references by cosine, k = REID_DEFAULT_K, ISC2021
 * uAP / Acc@1 / Recall@P90 (infer/eval/reid_views.h). */
#ifndef ENDORET_SCENE_REID_H
#define ENDORET_SCENE_REID_H

#include <stdint.h>

#include "infer/eval/reid_views.h"
#include "nn/models/model.h"

/* n images x [n, 3, m->img, m->img] with their scene and view ids; fewer than 2 scenes with views 0-3
 * is ER_INPUT naming `source` (the eval manifest). */
int scene_pairs_reid(model *m, const float *x, const int64_t *scene, const int64_t *view, int n, const char *source,
                     reid_view_result *r);

#endif
