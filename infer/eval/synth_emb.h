/* synth_emb.h — synthetic clustered embeddings for sweeps, benchmarks and tests (no data needed).
 * G cluster centres (unit vectors); each cluster has a binary "pathology" label from a random
 * linear rule on its centre, flipped for 10% of clusters so the labels are learnable but not
 * perfectly; every item's own label is its cluster's, flipped with probability label_noise (so a
 * single neighbour is a noisy vote and larger k helps, as with real pathology labels); a database item = centre + N(0, spread^2 / dim) per coordinate; a query = a random
 * database item (its ground-truth match) + N(0, qnoise^2 / dim) per coordinate. */
#ifndef ENDORET_SYNTH_EMB_H
#define ENDORET_SYNTH_EMB_H

#include <stdint.h>

#include "infer/retrieval/embeddings.h"

typedef struct {
    int n_db, n_query, dim, clusters;
    double spread, qnoise, label_noise;
    uint64_t seed;
} synth_emb_cfg;

/* db and query get ids (db 0..n-1, queries 0..m-1), labels, label names "benign"/"neoplastic",
 * scene = cluster; match[q] = id of the query's source database item. */
void synth_emb_make(const synth_emb_cfg *c, emb_set *db, emb_set *query, int64_t *match);

#endif
