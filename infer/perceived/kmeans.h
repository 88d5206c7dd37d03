/* kmeans.h — k-means with k-means++ seeding (Arthur & Vassilvitskii 2007) and Lloyd iterations,
 * OpenMP over points; used to learn the Dense-SIFT visual vocabulary (spec §3.1).
 * Deterministic for a given seed and thread count (centres are updated serially in point order).
 * Empty clusters are re-seeded with the point farthest from its centre. */
#ifndef ENDORET_KMEANS_H
#define ENDORET_KMEANS_H

#include <stdint.h>

/* x: n * dim; centers: k * dim (out). Needs n >= k >= 1. Returns the Lloyd iterations run;
 * *inertia = sum of squared distances to the nearest centre (may be NULL). */
int kmeans_fit(const float *x, int n, int dim, int k, int max_iter, uint64_t seed, float *centers, double *inertia);
/* k-means++ seeding only (exposed for tests). */
void kmeans_pp_init(const float *x, int n, int dim, int k, uint64_t seed, float *centers);
/* Nearest centre of each point (label[n]); d2 (n, may be NULL) receives the squared distance.
 * Ties go to the lower centre index. */
void kmeans_assign(const float *x, int n, int dim, const float *centers, int k, int *label, float *d2);

#endif
