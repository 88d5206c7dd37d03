/* precision.h — the two run-time choices of a command: where the model lives (--device
 * cpu|cuda, config key train.device) and how its forward computes (--precision fp32|bf16, config
 * key train.precision).
 *
 *   fp32: fp32 storage, inputs and accumulation everywhere (the default).
 *   bf16: mixed precision as torch.autocast: the autocast policy (nn/layers/autocast.h) runs the
 *         products and the activations around them on bf16 (fp32 accumulation); weights,
 *         optimizer state, the residual stream, norms' statistics, softmax and losses stay fp32.
 * There is no process-wide precision. A command parses its choice into a value that travels as an
 * argument: the training loop puts it in the forward's context (nn_ctx.precision), inference in the
 * model (model_set_precision). Ops follow the dtype of their operands (a product on a bf16
 * activation computes in bf16), and hand kernels an explicit `compute` (kernels/gemm_ex_args.h),
 * kept in the tape node so the backward computes as its forward did.
 *
 * Commands parse --device and --precision before any work, so a CPU-only build (or a machine
 * without a GPU) fails with one message and ER_INPUT (exit status 2) at once. */
#ifndef ENDORET_PRECISION_H
#define ENDORET_PRECISION_H

enum { ER_PREC_FP32 = 0, ER_PREC_BF16 = 1 };

/* "fp32" | "bf16" (NULL or "" = fp32) -> *precision; ER_INPUT naming the value otherwise. */
int er_precision_parse(const char *name, int *precision);
/* The kernels' GEMM_COMPUTE_* value of a precision. */
int er_gemm_compute_of(int precision);

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
/* The same check without waiting: for a caller that has just waited (a download). */
int er_device_error(int device, const char *what);

#endif
