/* gemm.h — single-precision matrix products on host memory, the hot loop of every model (ours,
 * no CPU BLAS): the public face of kernels/cpu/gemm*.c for code outside kernels/ (retrieval
 * scoring, bench gemm); the backends' gemm_batched op follows the same contract.
 * Row-major: C[m,n] = alpha * op(A) @ op(B) + beta * C, op(X) = X or X^T.
 * Every product names its precision as its first argument (SGEMM_FP32 / SGEMM_BF16, below): there
 * is no process-wide setting, so a product's arithmetic is visible from its call (issue #27).
 *   A is m x k (lda >= k) when transA == 0, else stored k x m (lda >= m);
 *   B is k x n (ldb >= n) when transB == 0, else stored n x k (ldb >= k);
 *   C is m x n, ldc >= n. beta == 0 ignores C's old contents (NaN-safe).
 * Uses OpenMP threads internally (single-threaded when called inside a parallel region). */
#ifndef ENDORET_GEMM_H
#define ENDORET_GEMM_H

/* Precision of a product:
 *   SGEMM_FP32: fp32 inputs, fp32 accumulation.
 *   SGEMM_BF16: mixed precision: op(A) and op(B) rounded to bf16 (round to nearest even) as they
 *               are packed, products accumulated in fp32, C in fp32 (alpha/beta in fp32).
 *               On AVX512_BF16 CPUs it runs vdpbf16ps kernels on bf16 panels (~2x the fp32
 *               FLOP rate); elsewhere, or with an fp32 instruction set forced, fp32 kernels on
 *               rounded panels. docs/gemm.md says where the two can differ (fp32 rounding only).
 * The values equal the op table's GEMM_COMPUTE_FP32 / GEMM_COMPUTE_BF16 (kernels/gemm_ex_args.h). */
enum { SGEMM_FP32 = 0, SGEMM_BF16 = 1 };

void sgemm(int precision, int transA, int transB, int m, int n, int k, float alpha, const float *A, int lda,
           const float *B, int ldb, float beta, float *C, int ldc);

/* `batch` independent products with element strides between consecutive A, B, C matrices. */
void sgemm_strided_batched(int precision, int transA, int transB, int m, int n, int k, float alpha,
                           const float *A, int lda, long strideA, const float *B, int ldb, long strideB, float beta,
                           float *C, int ldc, long strideC, int batch);

/* ---- a B operand packed once (a frozen weight at inference) ----
 * Every sgemm packs op(B) into micro-panels; for a weight used by many products (the linear layers
 * of an encoder serving queries) that repacking is a large share of a small-M product (batch 1:
 * M = 197 rows against a 384 x 1152 weight packs ~1 element per 200 multiply-adds). sgemm_pack_b
 * packs op(B) once, in the given precision and the current kernel set, over its whole depth;
 * sgemm_with_packed_b then skips B's packing. The result is bit-identical to sgemm's (same
 * kernel family, depth blocks and summation order). The panels are a copy: when B changes they
 * are stale, and the caller must drop them (nn/tensor.c's tensor_prepack contract). When the
 * product's precision is not the one packed for, or the kernel choice has changed since packing,
 * sgemm_with_packed_b uses B itself. */
typedef struct sgemm_packed_b sgemm_packed_b;
/* NULL when n or k < 1 (nothing to pack). Allocates about k*n*4 bytes (fp32) or k*n*2 (bf16). */
sgemm_packed_b *sgemm_pack_b(int precision, int transB, int k, int n, const float *B, int ldb);
void sgemm_packed_b_free(sgemm_packed_b *p);
/* 1 when p packs this op(B) (transB, k, n, ldb) for this precision and the current kernels. */
int sgemm_packed_b_usable(const sgemm_packed_b *p, int precision, int transB, int k, int n, int ldb);
/* sgemm with op(B) taken from p when usable, else from B (which must be given either way). */
void sgemm_with_packed_b(int precision, int transA, int transB, int m, int n, int k, float alpha,
                         const float *A, int lda, const float *B, int ldb, const sgemm_packed_b *p,
                         float beta, float *C, int ldc);

/* Naive triple loop with double accumulation: the reference the tests compare against. */
void sgemm_ref(int transA, int transB, int m, int n, int k, float alpha, const float *A, int lda,
               const float *B, int ldb, float beta, float *C, int ldc);

/* The micro-kernels products of this precision use: "avx512-auto" (the best instruction set this
 * CPU supports, checked at run time; the tile is then picked per call by shape), or one kernel's
 * full name such as "avx512-8x48" when $ENDORET_GEMM_KERNEL or sgemm_use_kernel() fixed it. */
const char *sgemm_kernel_name(int precision);
/* The kernel a product with this precision, op(A), m and n would use. */
const char *sgemm_kernel_for(int precision, int transA, int m, int n);

/* Use the kernel named by its instruction set ("avx512", "avx2", "scalar") or full name
 * ("avx512-6x64"); NULL or "auto" = the best for this CPU. "avx512bf16" or one of its kernels
 * ("avx512bf16-8x48") picks the native bf16 kernels for SGEMM_BF16 (SGEMM_FP32 then uses the best
 * fp32 set); naming an fp32 set makes SGEMM_BF16 round fp32 panels instead. Returns 0, or -1 (nothing changed)
 * when the name is unknown or this CPU cannot run it. For tests and benchmarks: do not call it
 * while another thread is inside sgemm. */
int sgemm_use_kernel(const char *name);

/* Override the cache blocking (rows of A, depth, columns of B per packed block); 0 keeps the
 * kernel's default. Values are rounded to multiples of the micro-tile. For tuning runs only. */
void sgemm_set_blocking(int mc, int kc, int nc);


/* Round n floats to bf16 in place (nearest even; NaN stays NaN): what SGEMM_BF16 does to its
 * inputs (benchmarks build bf16 operands for other libraries with it). */
void gemm_round_bf16(float *P, long n);

/* `bench gemm --ukernels`: the i-th (0-based) compiled micro-kernel this CPU runs, timed on one
 * thread with its packed panels in L1 (kc = 256, 8 A panels in turn): the in-core ceiling, free
 * of packing and cache misses. Returns 0 when there is no i-th kernel. */
typedef struct {
    const char *name; /* full kernel name, as sgemm_use_kernel() accepts it */
    int mr, nr, kc;
    double gflops_best; /* best of 15 runs */
} sgemm_ukernel_speed;
int sgemm_time_ukernel(int i, sgemm_ukernel_speed *out);

/* `bench gemm --storage`: best of 200 single-thread calls, in microseconds, of packing one whole
 * depth block of op(A) (m x k, 8-row panels) and op(B) (k x n, 48-column panels) into the bf16
 * panels of the AVX512_BF16 kernels: us[0] A from fp32, us[1] A from bf16 storage, us[2] B from
 * fp32, us[3] B from bf16 storage (gemm_ex's bf16 operands). Returns 0 (nothing measured) on a CPU
 * without AVX512_BF16. */
int sgemm_time_pack_bf16(int transA, int transB, int m, int n, int k, double us[4]);

#endif
