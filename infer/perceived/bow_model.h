/* bow_model.h — Dense-SIFT bag of visual words (spec §3.1-3.2): a vocabulary of K words learnt
 * by k-means on dense SIFT descriptors, hard-assignment histograms L1-normalised (the image
 * signature, compared with chi2), and scene/video signatures pooled from frame histograms.
 *
 * Vocabulary file (safetensors): "words" F32 [K, 128]; metadata "endoret.kind" = "bow_vocabulary",
 * "step", "radius", "downscale", "rotate" (the Dense-SIFT settings it was learnt with). */
#ifndef ENDORET_BOW_MODEL_H
#define ENDORET_BOW_MODEL_H

#include <stdint.h>

#include "infer/perceived/dsift.h"

typedef struct {
    dsift_cfg sift;
    int k;
    float *words; /* k * DSIFT_DIM, owned */
} bow_vocab;

int bow_vocab_save(const char *path, const bow_vocab *v);
int bow_vocab_load(const char *path, bow_vocab *v);
void bow_vocab_free(bow_vocab *v);

/* All descriptors of a grayscale w*h image (allocated, *n rows of 128). */
float *bow_image_descriptors(const float *gray, int w, int h, const dsift_cfg *c, int *n);

/* Learn K words from per-image descriptor sets: at most max_desc descriptors in all, taken as an
 * equal random share per image (deterministic in seed); k-means++ then at most `iters` Lloyd
 * iterations. ER_INPUT when there are fewer descriptors than words. */
int bow_vocab_train(float *const *desc, const int *ndesc, int nimg, int k, int max_desc, int iters, uint64_t seed,
                    const dsift_cfg *sift, bow_vocab *v);

/* Hard-assignment histogram of n descriptors, L1-normalised (all zeros when n == 0). hist: K. */
void bow_signature(const bow_vocab *v, const float *desc, int n, float *hist);

/* Scene pooling: the mean of the histograms of the frames of each group, L1-normalised (a frame
 * counts once whatever its descriptor count, which stands in for the paper's overlap weighting).
 * Groups are numbered in order of first appearance; gid[g] = the group value; members with
 * group < 0 become their own group each. Returns the number of groups; out: ng * K, allocated. */
int bow_pool(const float *h, int n, int K, const int64_t *group, float **out, int64_t **gid, int **first_row);

#endif
