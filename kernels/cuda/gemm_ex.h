/* gemm_ex.h — what gemm_ex.cu offers besides the table entry (internal to kernels/cuda). */
#ifndef ENDORET_GEMM_EX_H
#define ENDORET_GEMM_EX_H

#include "kernels/gemm_ex_args.h"

/* Whether cuBLASLt offers an algorithm for this case (shape, transposes, leading dimensions, compute,
 * epilogue, the pointers' 16-byte alignment; pointers are not dereferenced): 1 yes, 0 refused (the
 * split path would run), -1 cuBLASLt could not be asked (the error is recorded). Caches the plan. */
int cu_gemm_ex_has_algo(const gemm_ex_args *a);

#endif
