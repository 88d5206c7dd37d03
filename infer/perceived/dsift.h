/* dsift.h — Dense SIFT (spec §3.1): 128-d SIFT descriptors (4x4 spatial cells x 8 orientations) on
 * disks of radius `radius` centred on a regular grid of step `step` (pixels of the input image).
 *
 * Invariances kept, as in the paper: translation (dense grid), in-plane rotation (each disk's
 * gradients and cell layout are expressed relative to its dominant orientation, the peak of a
 * 36-bin magnitude-weighted histogram; --rotate 0 disables it) and affine intensity changes
 * (gradients are linear in intensity and the descriptor is L2-normalised, clipped at 0.2 and
 * re-normalised). Scale is fixed by the radius.
 * Scale handling: like SIFT's Gaussian pyramid, the image is first box-averaged by an integer
 * factor f (default max(1, radius / 8)) so that every disk is sampled by ~200 pixels whatever its
 * radius; the grid positions and radius are divided by f. Grid: centres at radius + i*step along
 * each axis while the disk fits; an image smaller than a disk gets one clipped disk at its centre.
 * A flat disk (no gradient) gives the zero descriptor. */
#ifndef ENDORET_DSIFT_H
#define ENDORET_DSIFT_H

#define DSIFT_DIM 128

typedef struct {
    int step, radius; /* pixels of the input image; paper values (spec, unverified): 20 and 60 */
    int downscale;    /* 0 = auto (radius / 8) */
    int rotate;       /* 1 = rotation-normalised descriptors (default) */
} dsift_cfg;

void dsift_cfg_default(dsift_cfg *c); /* step 20, radius 60, auto downscale, rotate 1 */
/* Number of grid points for a w x h image. */
int dsift_count(int w, int h, const dsift_cfg *c);
/* Grayscale image, row-major w*h floats (any range). desc: dsift_count * 128 floats (caller
 * allocates). Returns the number of descriptors written; centres (2 per descriptor, may be NULL)
 * receive the disk centres in input pixels. */
int dsift_compute(const float *img, int w, int h, const dsift_cfg *c, float *desc, float *centers);

#endif
