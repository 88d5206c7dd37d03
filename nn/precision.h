/* precision.h — the two run-time choices of a command: where the model lives (--device
 * cpu|cuda, config key train.device) and how the op layer computes matrix products (--precision
 * fp32|bf16, config key train.precision).
 *
 *   fp32: fp32 inputs and accumulation everywhere (the default).
 *   bf16: mixed precision as torch.autocast for matmuls: GEMM inputs rounded to bf16, fp32
 *         accumulation and fp32 storage; weights, optimizer state, norms, softmax/attention
 *         statistics and losses stay fp32.
 * The precision is the op layer's autocast setting, not the kernels': the products of ops
 * (matmul, linear, attention, conv2d) read it when they are recorded, hand it to their kernel as an
 * argument (`compute`, kernels/gemm_ex_args.h) and keep it in their tape node, so the backward
 * computes in the precision its forward did. No kernel reads a process-wide precision, and code
 * outside the op layer (retrieval scoring, benchmarks) names its own precision on every call.
 *
 * Commands call er_device_parse + er_set_precision before any work, so a CPU-only build (or a
 * machine without a GPU) fails with one message and ER_INPUT (exit status 2) at once. */
#ifndef ENDORET_PRECISION_H
#define ENDORET_PRECISION_H

enum { ER_PREC_FP32 = 0, ER_PREC_BF16 = 1 };

/* "fp32" | "bf16" (NULL or "" = fp32): sets the CPU GEMM precision and, in CUDA builds, the cuBLAS
 * one. ER_INPUT naming the value otherwise. */
int er_set_precision(const char *name);
int er_get_precision(void);
/* The op table's GEMM_COMPUTE_* value of the current precision (what ops pass their kernels). */
int er_gemm_compute(void);
const char *er_precision_name(int precision);

/* "cpu" | "cuda" | "cuda:N" (NULL or "" = cpu) -> DEV_CPU / DEV_CUDA, checking that the device can
 * be used; cuda:N selects GPU N through the backend's set_device. A malformed value (cpu:1,
 * cuda:-1, cuda:x), N beyond the device count, a build without CUDA or a machine without a usable
 * GPU: one message naming the value and ER_INPUT. */
int er_device_parse(const char *name, int *device);
const char *er_device_name(int device);

/* Once per training step: waits for the device's queued work and returns ER_RUNTIME with the first
 * recorded failure (the backend's last_error) in er_msg(); ER_OK on the CPU. `what` names the step
 * in the message ("step 12"). */
int er_device_check(int device, const char *what);

#endif
