/* seq_desc.h — a descriptor of video frames as the sequence commands take it (`eval sequence`,
 * `eval compare --sequence`, `embed --hybrid`): one embedding file, or with --folds a comma-separated
 * list of K files, file k embedding every frame with the encoder that did not see fold k
 * (infer/eval/seq_folds.h). */
#ifndef ENDORET_CLI_SEQ_DESC_H
#define ENDORET_CLI_SEQ_DESC_H

#include "infer/retrieval/embeddings.h"

typedef struct {
    emb_set *es;
    int nf;    /* files */
    int *fold; /* [es[0].n] each frame's fold, NULL without --folds */
} seq_desc;

/* list: "E" or "E0,..,E{K-1}"; folds: the `data split --by scene --folds K` manifest or NULL; only: a
 * fold whose queries alone are scored (then one file), or -1; what: the option, for messages;
 * by_scene: a row's fold is its scene's (seq_fold_of_scenes: rows of another manifest of the same
 * sequences, e.g. fused views) instead of its manifest row's (seq_fold_of_rows).
 * ER_INPUT naming the option and file for a list without --folds, K files for other than K folds, .. */
int seq_desc_load(const char *list, const char *folds, int only, const char *what, int by_scene, seq_desc *d);
void seq_desc_free(seq_desc *d);

#endif
