/* cuda_optim.h — the optimizer kernels on raw device arrays (CUDA builds only). They mirror
 * kernels/cpu/optim_kernels.h (branch `optim`) element for element, with the struct fields passed
 * as plain scalars so this header does not depend on that one:
 *   cuda_adamw_step(p, g, m, v, n, a.lr, a.beta1, a.beta2, a.eps, a.weight_decay, a.step_size,
 *                   a.inv_sqrt_bc2, a.gscale)      (after adamw_scalars(&a, t))
 * Same float arithmetic as adamw_update_f32, so both backends agree up to fused multiply-adds. */
#ifndef ENDORET_CUDA_OPTIM_H
#define ENDORET_CUDA_OPTIM_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* adamw_update_f32 on device arrays p, g, m, v (n elements). */
void cuda_adamw_step(float *p, const float *g, float *m, float *v, int64_t n, float lr, float beta1,
                     float beta2, float eps, float weight_decay, float step_size, float inv_sqrt_bc2,
                     float gscale);
/* sgd_update_f32 on device arrays (buf may be NULL when momentum == 0). */
void cuda_sgd_step(float *p, const float *g, float *buf, int64_t n, float lr, float momentum,
                   float weight_decay, float gscale, int nesterov, int first);
/* sumsq_f32: sum of squares of a device array, accumulated in double (synchronises). */
double cuda_sumsq(const float *x, int64_t n);
/* scale_f32: x *= s on a device array. */
void cuda_scale(float *x, int64_t n, float s);
/* all_finite_f32: 1 if every element is finite (synchronises). */
int cuda_all_finite(const float *x, int64_t n);

#ifdef __cplusplus
}
#endif

#endif
