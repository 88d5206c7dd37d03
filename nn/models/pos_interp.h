/* pos_interp.h — resampling a learned 2-D position table to another grid, each rule exactly as the
 * code that trained the checkpoint does it (torch.nn.functional.interpolate, mode="bicubic",
 * align_corners=False), so a table resized here equals the one PyTorch builds to fp32 rounding.
 *
 *   POS_INTERP_BICUBIC         F.interpolate(size=g)                  MAE interpolate_pos_embed, Hugging
 *                                                                      Face Dinov2 (no registers), endoret
 *   POS_INTERP_BICUBIC_AA      F.interpolate(size=g, antialias=True)  timm resample_abs_pos_embed, DINOv2
 *                                                                      hub *_reg models, HF Dinov2WithRegisters
 *   POS_INTERP_BICUBIC_OFFSET  F.interpolate(scale_factor=(g+0.1)/M)  DINO v1, DINOv2 hub models without
 *                                                                      registers (interpolate_offset 0.1)
 *
 * Plain bicubic is Keys' cubic with a = -0.75 on 4 taps, border taps clamped (replicated); the scale
 * factor form samples at src = (dst + 0.5) / s - 0.5 with s the given factor, not M / g. The antialiased
 * form is torch's separable _upsample_bicubic2d_aa: Keys' cubic with a = -0.5 stretched by M / g when
 * shrinking, weights normalised per output, taps outside the grid dropped (not replicated), width
 * pass first, then height. docs/models.md lists which layout uses which rule. */
#ifndef ENDORET_POS_INTERP_H
#define ENDORET_POS_INTERP_H

enum { POS_INTERP_BICUBIC = 0, POS_INTERP_BICUBIC_AA = 1, POS_INTERP_BICUBIC_OFFSET = 2, POS_INTERP_COUNT };

/* "bicubic", "bicubic_aa", "bicubic_offset" */
const char *pos_interp_name(int rule);
/* The rule of a name above, -1 when unknown. */
int pos_interp_rule(const char *name);
/* src [gs * gs, D] (row-major grid, D values per position) -> dst [gd * gd, D]. gs, gd >= 1. */
void pos_interp_grid(int rule, const float *src, int gs, float *dst, int gd, int D);

#endif
