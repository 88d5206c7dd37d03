/* gemm_bench.c — sgemm_time_ukernel (kernels/gemm.h): one micro-kernel in isolation, for
 * `bench gemm --ukernels`; sgemm_time_pack_bf16: the bf16 packing from fp32 and from bf16 storage,
 * for `bench gemm --storage`. Measurements, not kernels: they own (allocate) their buffers. */
#include <stdlib.h>
#include <string.h>

#include "kernels/gemm.h"
#include "kernels/cpu/gemm_internal.h"
#include "kernels/dtype.h"
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

int sgemm_time_pack_bf16(int tA, int tB, int m, int n, int k, double us[4]) {
    if (!cpu_has_avx512_bf16() || m < 1 || n < 1 || k < 1) return 0;
    long na = (long)m * k, nb = (long)k * n;
    float *A = xmalloc_aligned(4 * na), *B = xmalloc_aligned(4 * nb);
    uint16_t *Ah = xmalloc_aligned(2 * na), *Bh = xmalloc_aligned(2 * nb);
    uint16_t *P = xmalloc_aligned(2 * (size_t)((m > n ? m : n) + 64) * (k + 1));
    for (long i = 0; i < na; i++) Ah[i] = er_f32_to_bf16((float)(i % 97) / 50 - 1), A[i] = er_bf16_to_f32(Ah[i]);
    for (long i = 0; i < nb; i++) Bh[i] = er_f32_to_bf16((float)(i % 89) / 50 - 1), B[i] = er_bf16_to_f32(Bh[i]);
    const long lda = tA ? m : k, ldb = tB ? k : n;
    for (int c = 0; c < 4; c++) {
        double best = 1e30;
        for (int r = 0; r < 200; r++) {
            double t0 = now_seconds();
            if (c == 0) gemm_pack_a_bf16(tA, A, lda, 0, m, 0, k, 8, P);
            if (c == 1) gemm_pack_a_bf16_stored(tA, Ah, lda, 0, m, 0, k, 8, P);
            if (c == 2) gemm_pack_b_bf16(tB, B, ldb, 0, k, 0, n, 48, P);
            if (c == 3) gemm_pack_b_bf16_stored(tB, Bh, ldb, 0, k, 0, n, 48, P);
            double t = now_seconds() - t0;
            if (t < best) best = t;
        }
        us[c] = best * 1e6;
    }
    free(A), free(B), free(Ah), free(Bh), free(P);
    return 1;
}
