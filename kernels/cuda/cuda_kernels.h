/* cuda_kernels.h — the CUDA kernels that fill backend_cuda(): cu_<name> for every entry of
 * kernels/ops.def (which documents each one; the CPU function each mirrors is named in its .cu
 * file). Internal to kernels/cuda. */
#ifndef ENDORET_CUDA_KERNELS_H
#define ENDORET_CUDA_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/conv_args.h"
#include "kernels/gemm_ex_args.h"
#include "kernels/optim_args.h"

#define ER_OP(ret, name, params, args) ret cu_##name params;
#include "kernels/ops.def"
#undef ER_OP

#endif
