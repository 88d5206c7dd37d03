/* index_internal.h — what index.c calls in each index kind (index_scan.c, index_balltree.c,
 * index_mih.c). Private to infer/retrieval/index*.c: users go through index.h. */
#ifndef ENDORET_INDEX_INTERNAL_H
#define ENDORET_INDEX_INTERNAL_H

#include "infer/retrieval/index.h"

void scan_search(const bindex *ix, const uint64_t *q, int nq, int k, int64_t *out_ids,
                 int32_t *out_d, int *count);
void balltree_build(bindex *ix);
void balltree_insert(bindex *ix, int64_t slot);
void balltree_search(const bindex *ix, const uint64_t *q, int nq, int k, int64_t *out_ids,
                     int32_t *out_d, int *count);
void balltree_free(bindex *ix);
void mih_build(bindex *ix);
void mih_insert(bindex *ix, int64_t slot);
void mih_search(const bindex *ix, const uint64_t *q, int nq, int k, int64_t *out_ids,
                int32_t *out_d, int *count);
void mih_free(bindex *ix);

#endif
