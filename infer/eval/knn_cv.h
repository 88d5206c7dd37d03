/* knn_cv.h — the kNN diagnosis protocol: k-fold cross-validation of the kNN vote over one
 * labelled set (EndoFinder's Table 5: k = 6, 5 folds, 4/5 of the cases form the database). */
#ifndef ENDORET_KNN_CV_H
#define ENDORET_KNN_CV_H

#include "infer/retrieval/knn.h"

/* k-fold cross-validation of the kNN classifier over one labelled set: for each fold the other
 * folds are the database (hash fitted on them only), the fold's items are the queries.
 * pred (n) and score (n x nclass) are filled for every item; fold (n) too. */
int knn_cv(const float *x, int n, int dim, const int *label, const int *group, int nclass,
           const knn_cv_cfg *cfg, int *pred, double *score, int *fold);

#endif
