/* gemm_bench.c — sgemm_time_ukernel (kernels/gemm.h): one micro-kernel in isolation, for
 * `bench gemm --ukernels`. A measurement, not a kernel: it owns (allocates) its panels. */
#include <stdlib.h>
#include <string.h>

#include "kernels/gemm.h"
#include "kernels/cpu/gemm_internal.h"
#include "nn/base/base.h"

/* The i-th compiled kernel this CPU supports, bf16 set first, or NULL. */
static const gemm_kernel *runnable_kernel(int i) {
    const gemm_kernel *(*sets[])(int *) = {gemm_kernels_avx512bf16, gemm_kernels_avx512,
                                           gemm_kernels_avx2, gemm_kernels_scalar};
    for (int si = 0; si < 4; si++) {
        int count;
        const gemm_kernel *ks = sets[si](&count);
        if (!count || (!strcmp(ks[0].isa, "avx512bf16") && !cpu_has_avx512_bf16()) ||
            (!strcmp(ks[0].isa, "avx512") && !cpu_has_avx512()) ||
            (!strcmp(ks[0].isa, "avx2") && !cpu_has_avx2_fma()))
            continue;
        if (i < count) return &ks[i];
        i -= count;
    }
    return NULL;
}

int sgemm_time_ukernel(int i, sgemm_ukernel_speed *out) {
    const gemm_kernel *K = runnable_kernel(i);
    if (!K) return 0;
    const int kc = 256, calls = 2000;
    float *Ap = xmalloc_aligned(sizeof(float) * K->mr * kc * 8),
          *Bp = xmalloc_aligned(sizeof(float) * K->nr * kc),
          *C = xmalloc_aligned(sizeof(float) * K->mr * K->nr * 8);
    for (long j = 0; j < (long)K->mr * kc * 8; j++) Ap[j] = 1e-3f * (float)(j % 7);
    for (long j = 0; j < (long)K->nr * kc; j++) Bp[j] = 1e-3f * (float)(j % 5);
    if (K->fn_bf16) { /* the same values as bf16, converted in place (front half) */
        gemm_cvt_bf16(Ap, (uint16_t *)Ap, (long)K->mr * kc * 8);
        gemm_cvt_bf16(Bp, (uint16_t *)Bp, (long)K->nr * kc);
    }
    memset(C, 0, sizeof(float) * K->mr * K->nr * 8);
    double best = 1e30;
    for (int rep = 0; rep < 15; rep++) {
        double t0 = now_seconds();
        for (int c = 0; c < calls; c++)
            if (K->fn_bf16) /* same bytes reinterpreted as bf16 pairs: kc depth steps */
                K->fn_bf16(kc / 2, (const uint16_t *)(Ap + (long)(c & 7) * K->mr * kc / 2),
                           (const uint16_t *)Bp, C + (long)(c & 7) * K->mr * K->nr, K->nr, 1.0f,
                           1.0f, K->mr, K->nr);
            else
                K->fn(kc, Ap + (long)(c & 7) * K->mr * kc, Bp, C + (long)(c & 7) * K->mr * K->nr,
                      K->nr, 1.0f, 1.0f, K->mr, K->nr);
        double t = now_seconds() - t0;
        if (t < best) best = t;
    }
    free(Ap), free(Bp), free(C);
    *out = (sgemm_ukernel_speed){K->name, K->mr, K->nr, kc, 2.0 * K->mr * K->nr * kc * calls / best * 1e-9};
    return 1;
}
