/* gemm_pack.c — copy blocks of op(A) and op(B) into the contiguous, k-major micro-panels the
 * micro-kernels stream through (layouts in gemm_internal.h). Transposition is handled here, so
 * the micro-kernels see one layout for all four transA/transB combinations. Edges are zero-padded. */
#include <string.h>

#include "kernels/cpu/gemm_internal.h"

void gemm_pack_a(int transA, const float *A, long lda, int i0, int mc, int p0, int kc, int mr,
                 float *Ap) {
    for (int ip = 0; ip < mc; ip += mr, Ap += (long)mr * kc) {
        int rows = mc - ip < mr ? mc - ip : mr;
        if (!transA) {
            /* Row i of op(A) is contiguous in p: read `rows` sequential streams, write Ap in order. */
            const float *src = A + (long)(i0 + ip) * lda + p0;
            for (int p = 0; p < kc; p++) {
                float *d = Ap + (long)p * mr;
                int i = 0;
                for (; i < rows; i++) d[i] = src[(long)i * lda + p];
                for (; i < mr; i++) d[i] = 0.0f;
            }
        } else {
            /* op(A)[i][p] = A[p][i]: each depth step is a contiguous run of `rows` floats. */
            const float *src = A + (long)p0 * lda + i0 + ip;
            for (int p = 0; p < kc; p++) {
                float *d = Ap + (long)p * mr;
                memcpy(d, src + (long)p * lda, sizeof(float) * rows);
                for (int i = rows; i < mr; i++) d[i] = 0.0f;
            }
        }
    }
}

void gemm_pack_b(int transB, const float *B, long ldb, int p0, int kc, int j0, int nc, int nr,
                 float *Bp) {
    for (int jp = 0; jp < nc; jp += nr, Bp += (long)nr * kc) {
        int cols = nc - jp < nr ? nc - jp : nr;
        if (!transB) {
            const float *src = B + (long)p0 * ldb + j0 + jp;
            for (int p = 0; p < kc; p++) {
                float *d = Bp + (long)p * nr;
                memcpy(d, src + (long)p * ldb, sizeof(float) * cols);
                for (int j = cols; j < nr; j++) d[j] = 0.0f;
            }
        } else {
            /* op(B)[p][j] = B[j][p]: transpose in 8-deep strips so each of the `cols` source rows
             * is read 32 contiguous bytes at a time while the strip's output stays in L1. */
            const float *src = B + (long)(j0 + jp) * ldb + p0;
            int p = 0;
            for (; p + 8 <= kc; p += 8) {
                float *d = Bp + (long)p * nr;
                for (int j = 0; j < cols; j++) {
                    const float *s = src + (long)j * ldb + p;
                    for (int q = 0; q < 8; q++) d[q * nr + j] = s[q];
                }
                for (int j = cols; j < nr; j++)
                    for (int q = 0; q < 8; q++) d[q * nr + j] = 0.0f;
            }
            for (; p < kc; p++) {
                float *d = Bp + (long)p * nr;
                int j = 0;
                for (; j < cols; j++) d[j] = src[(long)j * ldb + p];
                for (; j < nr; j++) d[j] = 0.0f;
            }
        }
    }
}
