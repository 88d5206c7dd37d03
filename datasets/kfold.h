/* kfold.h — deterministic k-fold split helpers (fold[i] in 0..k-1 for every item). */
#ifndef ENDORET_KFOLD_H
#define ENDORET_KFOLD_H

#include <stdint.h>

/* Stratified: each label's items are shuffled and dealt round-robin, continuing where the
 * previous label stopped, so every fold gets each label's count to within one and fold sizes
 * differ by at most one. Labels are ids >= 0; -1 (unknown) counts as its own label. */
int kfold_stratified(const int *labels, int n, int k, uint64_t seed, int *fold);
/* Grouped: all items of a group (patient or scene id >= 0) land in the same fold; groups are
 * shuffled, then placed largest first into the currently smallest fold. Items with group -1 are
 * singleton groups. */
int kfold_grouped(const int *groups, int n, int k, uint64_t seed, int *fold);

#endif
