/* seq_folds.h — the sequence protocol (sequence_protocol.h) scored across leave-sequences-out folds.
 *
 * Folds come from `data split MANIFEST --by scene --folds K` (split column fold0..fold{K-1}, every
 * frame of a sequence in one fold). A descriptor is either one file (no learning on the frames: every
 * query scored in it) or K files, file k embedding EVERY frame with the encoder trained without fold
 * k: a query of fold k and its whole gallery are then scored in file k, so no query is ranked by an
 * encoder that saw its sequence, and the gallery is the same 345 frames as for a one-file descriptor
 * (frames of the training folds are negatives only). 2-vs-2: each file's protocol on its 4 frames per
 * sequence, keeping the predictions and ground truth of the queries of its own fold. */
#ifndef ENDORET_SEQ_FOLDS_H
#define ENDORET_SEQ_FOLDS_H

#include "datasets/manifest.h"
#include "infer/eval/multiview.h"
#include "infer/eval/reid_views.h"
#include "infer/eval/sequence_protocol.h"

/* fold[i] of row i of e: the split "fold<k>" of manifest row e->ids[i] (the row `embed` wrote it
 * from), whose scene must be row i's scene; *nfolds = K, every fold 0..K-1 present. ER_INPUT naming
 * the manifest and the row otherwise. */
int seq_fold_of_rows(const emb_set *e, const manifest *m, int *fold, int *nfolds);
/* The same by scene name alone: fold[i] is the split "fold<k>" of the first manifest row of row i's
 * scene, for files whose ids are another manifest's rows (e.g. `embed --scene --groups`' fused views
 * of a 4-view manifest of the same sequences). ER_INPUT naming a scene the manifest lacks. */
int seq_fold_of_scenes(const emb_set *e, const manifest *m, int *fold, int *nfolds);
/* nf files of the same frames (n, ids, scene, view, distance equal; else ER_INPUT naming file f):
 * seq_eval_folded with set fold[i] for query i (nf = 1: every query in file 0). */
int seq_eval_files(const emb_set *es, int nf, const int *fold, const seq_gap *g, seq_result *out);
/* The 9 settings of the 2-vs-2 protocol, query q of fold k scored in file k (nf = 1: file 0; with
 * only >= 0 just the queries of fold `only`, in file 0); rows[o].r recomputed on the pooled
 * predictions; keep[9] owned by the caller. */
int seq_two_vs_two_files(const emb_set *es, int nf, const int *fold, int only, int k, mv_row rows[9], reid_view_result keep[9],
                         int *nseq, int *nshort);

/* reid_eval_views (reid_views.h) across folds: nf files of the same rows, the queries of fold f (a row's
 * fold, or its scene's for fused query views) scored in file f against file f's references, pooled;
 * out->r recomputed on the pooled predictions. nf = 1: file 0 as it is. */
int reid_views_files(const emb_set *es, int nf, const int *fold, const reid_views_cfg *c, reid_view_result *out);

#endif
