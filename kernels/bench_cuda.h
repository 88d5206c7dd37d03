/* bench_cuda.h — the GPU measurements behind `endoret bench cuda` (kernels/cuda/bench_cuda.cu;
 * the command line and printing are cli/cmd_bench.c's). Exists only in CUDA builds: callers
 * declare cuda_bench_run weak and check it for NULL. */
#ifndef ENDORET_BENCH_CUDA_H
#define ENDORET_BENCH_CUDA_H

#ifdef __cplusplus
extern "C" {
#endif

/* One measurement. kind "device": `device` describes the GPU (first row); "gemm_peak": a square
 * m^3 product (the reference peak of its precision); "gemm": one ViT linear layer [m x n x k];
 * "gemm_ex": the same layer with its bias (and residual) through gemm_ex, `pass` naming the path;
 * "attention": attention of B x H x T x D heads on the path `layer` (mma, gemm or fused), `pass`
 * forward or backward. */
typedef struct {
    const char *kind, *device, *model, *layer, *precision, *pass;
    int m, n, k, B, H, T, D;
    double ms, tflops, of_peak;
} cuda_bench_row;

/* Times, through the CUDA backend table, cuBLAS GEMM peak (fp32/bf16), the ViT-B/16 (batch_b
 * images) and ViT-L/16 (batch_l images) linear layers and fused attention, `iters` timed launches
 * each after 3 warm-ups; calls emit(row, ctx) per measurement. ER_OK or an er_fail code. */
int cuda_bench_run(int iters, int batch_b, int batch_l, void (*emit)(const cuda_bench_row *, void *),
                   void *ctx);

/* `bench cuda --probe`, in seconds and before any timing: the runtime library versions (row kind
 * "versions", in `device`), then for every linear layer of the ViT-B/16 (batch_b images), ViT-L/16
 * (batch_l) and MAE decoder shapes, full and MAE-encoder token counts, fp32 and bf16 compute, whether
 * cuBLASLt offers an algorithm for its gemm_ex epilogue (kind "probe_gemm", `pass` "cuBLASLt" or
 * "refused: split path"), and which attention path each head shape takes in each precision (kind
 * "probe_attention", `pass` mma / gemm / fused), then for every convolution of ResNet-50 at 224 px
 * and batch_b images in channels-last bf16, forward and backward, whether cuDNN offers an algorithm
 * and its workspace (kind "probe_conv", `layer` the geometry, `T` 0 forward / 1 backward, `pass`
 * the answer or the refusal). ER_OK or an er_fail code. */
int cuda_probe_run(int batch_b, int batch_l, void (*emit)(const cuda_bench_row *, void *), void *ctx);

/* The GPU's bf16 matrix rate in TFLOP/s: cuBLAS on bf16 A, B and C (fp32 accumulation), 8192^3,
 * random operands, median of `iters` timed products after 3 warm-ups; the ceiling MFU is quoted
 * against (what PyTorch's bf16 matmul reaches). 0 after recording an error. */
double cuda_gemm_peak_bf16(int iters);

#ifdef __cplusplus
}
#endif

#endif
