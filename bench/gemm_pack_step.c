/* gemm_pack_step.c — times the bf16 panel packing of the ViT-S fc1 product (x [3152, 384] times W^T,
 * W [1536, 384]) from fp32-stored operands (gemm_pack_*_bf16: convert and interleave) and from
 * bf16-stored ones (gemm_pack_*_bf16_stored: interleave only; gemm_ex with bf16 A/B, issue #27).
 * Standalone program (not part of the endoret binary), AVX512_BF16 CPUs only; build and run from
 * the repo root:
 *   cc -std=c11 -D_GNU_SOURCE -O3 -march=native -fopenmp -I. -o build/gemm_pack_step \
 *      bench/gemm_pack_step.c kernels/cpu/gemm_pack*.c kernels/cpu/cpu_info.c kernels/cpu/gemm.c \
 *      kernels/cpu/gemm_ukr*.c nn/base/base.c -lm
 *   build/gemm_pack_step
 * One thread; best of 200 calls each (the operands stay cache-warm: the packing's own cost). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "kernels/cpu/gemm_internal.h"
#include "kernels/dtype.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

int main(void) {
    if (!cpu_has_avx512_bf16()) {
        fprintf(stderr, "gemm_pack_step: this CPU has no AVX512_BF16\n");
        return 2;
    }
    const int m = 3152, k = 384, n = 1536;
    float *A = aligned_alloc(64, 4L * m * k), *B = aligned_alloc(64, 4L * n * k);
    uint16_t *Ah = aligned_alloc(64, 2L * m * k), *Bh = aligned_alloc(64, 2L * n * k);
    uint16_t *P = aligned_alloc(64, 2L * 3200 * 400);
    for (long i = 0; i < (long)m * k; i++) Ah[i] = er_f32_to_bf16((float)(i % 97) / 50 - 1), A[i] = er_bf16_to_f32(Ah[i]);
    for (long i = 0; i < (long)n * k; i++) Bh[i] = er_f32_to_bf16((float)(i % 89) / 50 - 1), B[i] = er_bf16_to_f32(Bh[i]);
    const char *what[4] = {"A = x 3152x384, 8-row panels, from fp32", "A = x 3152x384, 8-row panels, from bf16",
                           "B = W^T (W 1536x384), 48-column panels, from fp32", "B = W^T (W 1536x384), 48-column panels, from bf16"};
    for (int c = 0; c < 4; c++) {
        double best = 1e9;
        for (int r = 0; r < 200; r++) {
            double t0 = now();
            if (c == 0) gemm_pack_a_bf16(0, A, k, 0, m, 0, k, 8, P);
            if (c == 1) gemm_pack_a_bf16_stored(0, Ah, k, 0, m, 0, k, 8, P);
            if (c == 2) gemm_pack_b_bf16(1, B, k, 0, k, 0, n, 48, P);
            if (c == 3) gemm_pack_b_bf16_stored(1, Bh, k, 0, k, 0, n, 48, P);
            double t = now() - t0;
            if (t < best) best = t;
        }
        printf("%-52s best of 200: %7.1f us\n", what[c], best * 1e6);
    }
    free(A), free(B), free(Ah), free(Bh), free(P);
    return 0;
}
