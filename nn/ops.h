/* ops.h — the differentiable op set. Each op: checks shapes, allocates its result in the per-step
 * arena of the inputs' device, calls the backend kernel (kernels/backend.h), and records a tape
 * node when grad mode is on and an input requires grad (nn/autograd.h). In no_grad mode the very
 * same code runs and records nothing.
 *
 * Memory: results are per-step (die at nn_step_end). Views (reshape of contiguous data, permute,
 * transpose, slice, squeeze/unsqueeze) share their input's data; everything else is a new tensor.
 * A result may be a strided view (e.g. attention's): read it with tensor_to_host, or make it
 * packed with op_contiguous, rather than assuming `data` is row-major.
 * Index arrays (int32, host memory) are copied by the op, so the caller may free them right away.
 *
 * Errors: a bad shape/axis returns NULL after er_fail(ER_INPUT, ...). Every op returns NULL when
 * given a NULL input, so a whole forward pass can be checked once at the end.
 * Axes may be negative (counted from the end). */
#ifndef ENDORET_OPS_H
#define ENDORET_OPS_H

#include <stdint.h>

#include "nn/autograd.h"
#include "nn/tensor.h"

/* ---- matrix products (ops_matmul.c) ---- */
/* a [..., M, K] (or [..., K, M] when transA) @ b [..., K, N] (or [..., N, K] when transB).
 * Batch dims must be equal, or b may be 2-D (shared weight). Result [..., M, N]. */
tensor *op_matmul(tensor *a, tensor *b, int transA, int transB);
/* x [..., in] @ w[out, in]^T + bias[out] (bias may be NULL): torch.nn.Linear. */
/* x fp32 or bf16: a bf16 x multiplies a bf16 copy of the fp32 weight W (fp32 accumulation) into a
 * bf16 y; W's and the bias's gradients are fp32, x's bf16 (nn/ops_linear_bf16.c). */
tensor *op_linear(tensor *x, tensor *w, tensor *bias);
/* op_linear with the output's dtype: x's own, or fp32 from a bf16 x (a head feeding an fp32 loss;
 * the product is the same, only the store differs). */
tensor *op_linear_to(tensor *x, tensor *w, tensor *bias, int dtype);
/* res + linear(x, w, bias) (res [..., out], as the output) in one product: the residual stream's add
 * rides in the GEMM epilogue (gemm_ex); the same bits as op_add(res, op_linear(x, w, bias)) on the CPU. */
tensor *op_linear_add(tensor *x, tensor *w, tensor *bias, tensor *res);

/* ---- elementwise (ops_elementwise.c) ---- numpy broadcasting */
tensor *op_add(tensor *a, tensor *b);
tensor *op_sub(tensor *a, tensor *b);
tensor *op_mul(tensor *a, tensor *b);
tensor *op_div(tensor *a, tensor *b);
tensor *op_add_scalar(tensor *x, float s);
tensor *op_mul_scalar(tensor *x, float s);
tensor *op_affine(tensor *x, float alpha, float beta); /* alpha * x + beta */
tensor *op_neg(tensor *x);
tensor *op_exp(tensor *x);
tensor *op_log(tensor *x);
tensor *op_sqrt(tensor *x);
tensor *op_pow(tensor *x, float p);
tensor *op_abs(tensor *x);                              /* gradient sign(x), 0 at 0 */
tensor *op_clamp(tensor *x, float lo, float hi);         /* gradient 1 strictly inside */
tensor *op_gelu(tensor *x);                              /* erf form */
/* gelu(x + b), b [N] over x [..., N]: op_gelu(op_add(x, b)) in one pass (and one backward pass
 * that also sums b's gradient); with op_linear(x, w, NULL) it is op_gelu(op_linear(x, w, b)) bit
 * for bit */
tensor *op_bias_gelu(tensor *x, tensor *b); /* x fp32 or bf16 (y the same), b fp32 */
tensor *op_relu(tensor *x);
/* relu(a + b) as one tensor (a residual block's output): the bits of op_relu(op_add(a, b)),
 * forward and backward, without keeping the sum */
tensor *op_add_relu(tensor *a, tensor *b);
tensor *op_sigmoid(tensor *x);
tensor *op_tanh(tensor *x);
/* Inverted dropout with a Philox mask: element i kept iff rng_at(seed, stream, i) >= p * 2^32.
 * Identity when !training or p == 0. Same mask on every backend. */
tensor *op_dropout(tensor *x, float p, uint64_t seed, uint64_t stream, int training);

/* ---- reductions (ops_reduce.c) ---- double accumulation */
tensor *op_sum(tensor *x, int axis, int keepdim);
tensor *op_mean(tensor *x, int axis, int keepdim);
tensor *op_max(tensor *x, int axis, int keepdim);        /* gradient to the first max */
tensor *op_sum_all(tensor *x);                           /* scalar (ndim 0) */
tensor *op_mean_all(tensor *x);

/* ---- storage type (ops_cast.c) ----
 * A packed copy of x in `dtype` (DT_F32 / DT_BF16): fp32 -> bf16 rounds to nearest even (NaN stays
 * NaN, subnormals kept), bf16 -> fp32 is exact; x itself when already of that dtype. Gradient: the
 * output's gradient cast back to x's dtype and added to x's. The ops that take bf16 are cast and
 * the shape ops below except expand (docs/dtypes.md); every other op refuses a bf16 input. */
tensor *op_cast(tensor *x, int dtype);

/* ---- shape (ops_shape.c) ---- fp32 or bf16, except expand (fp32) */
tensor *op_reshape(tensor *x, int ndim, const int64_t *shape); /* one -1 allowed; view if possible */
tensor *op_permute(tensor *x, const int *perm);                /* view */
tensor *op_transpose(tensor *x, int a0, int a1);               /* view */
tensor *op_slice(tensor *x, int axis, int64_t start, int64_t end); /* view, [start, end) */
tensor *op_unsqueeze(tensor *x, int axis);                     /* view */
tensor *op_squeeze(tensor *x, int axis);                       /* view, that dim must be 1 */
/* Broadcast view to `shape` (numpy rules: size-1 dims repeat with stride 0, new leading dims may
 * be added; -1 keeps a dim), e.g. cls_token [1, 1, C] -> [B, 1, C]. Gradient: summed back. */
tensor *op_expand(tensor *x, int ndim, const int64_t *shape);
tensor *op_contiguous(tensor *x);                              /* x itself when already packed */
tensor *op_clone(tensor *x);                                   /* always a new packed copy */
tensor *op_concat(int n, tensor *const *xs, int axis);
/* Splits x along axis into n parts of sizes[i] (sum = dim); parts are views. ER_OK or error. */
int op_split(tensor *x, int axis, int n, const int64_t *sizes, tensor **out);

/* ---- indexing (ops_index.c) ---- x viewed as (outer, L, inner) around `axis` ---- */
/* y = x.index_select(axis, idx[0..n)) (same indices for every outer position). */
tensor *op_index_select(tensor *x, int axis, const int32_t *idx, int n);
/* Per-outer indices, torch.gather along `axis` with the index broadcast over trailing dims:
 * y[o, j, :] = x[o, idx[o * K + j], :], idx has outer * K entries. MAE: keep = gather(x, 1, ids_keep). */
tensor *op_gather(tensor *x, int axis, const int32_t *idx, int K);
/* Inverse placement: y has L along axis, zeros elsewhere, y[o, idx[o * K + j], :] += x[o, j, :]. */
tensor *op_scatter(tensor *x, int axis, const int32_t *idx, int64_t L);

/* ---- normalisation and activations over the last axis (ops_norm.c) ---- */
tensor *op_layernorm(tensor *x, tensor *w, tensor *b, float eps); /* w, b [C] or NULL; y of x's dtype */
/* The same with the output's storage type chosen (DT_F32 / DT_BF16; docs/dtypes.md): x fp32 or bf16,
 * statistics in fp32/double either way, a bf16 y rounded once. The residual stream's form: fp32 x,
 * bf16 y for the next product; y's gradient then arrives in bf16 and x's is fp32. */
tensor *op_layernorm_to(tensor *x, tensor *w, tensor *b, float eps, int dtype);
tensor *op_softmax(tensor *x, int axis);
tensor *op_log_softmax(tensor *x, int axis);
tensor *op_l2_normalize(tensor *x, int axis, float eps);           /* x / max(||x||, eps) */

/* ---- NCHW image ops (ops_conv.c) ---- packed or not; results packed ----
 * conv2d: x [N, C, H, W], w [K, C / groups, R, S], bias [K] or NULL -> [N, K, P, Q] with
 * P = (H + 2 pad - dilation (R - 1) - 1) / stride + 1 (and Q alike): torch.nn.functional.conv2d.
 * fp32 tensors. The _ex form takes (height, width) pairs and the products' arithmetic, `compute`
 * (GEMM_COMPUTE_*; op_conv2d: fp32): the conv kernels round their own operands under bf16 compute
 * (cuDNN: TF32 / bf16 tensor cores), so bf16 autocast needs no bf16 copy of x (nn/layers/autocast.h:
 * one would add memory, since batch norm and ReLU keep the fp32 tensor anyway). */
tensor *op_conv2d(tensor *x, tensor *w, tensor *bias, int stride, int pad, int dilation, int groups);
tensor *op_conv2d_ex(tensor *x, tensor *w, tensor *bias, const int stride[2], const int pad[2],
                     const int dilation[2], int groups, int compute);
/* Batch norm per channel of x [N, C, H, W] (or [N, C]), torch.nn.BatchNorm2d semantics: training
 * normalises with the batch statistics (biased variance) and updates running_mean / running_var in
 * place, running = (1 - momentum) running + momentum stat with the unbiased variance (torch's
 * defaults: momentum 0.1, eps 1e-5); eval uses the running statistics. w, b [C] or NULL (affine
 * off); running stats [C] buffers without T_REQUIRES_GRAD, required in eval, both NULL in training
 * = no tracking. The gradient flows through the batch statistics in training. */
tensor *op_batchnorm2d(tensor *x, tensor *w, tensor *b, tensor *running_mean, tensor *running_var,
                       int training, float momentum, float eps);
/* relu(batchnorm2d(...)): one fused pass when nothing is recorded (inference), else the two ops. */
tensor *op_batchnorm2d_relu(tensor *x, tensor *w, tensor *b, tensor *running_mean,
                            tensor *running_var, int training, float momentum, float eps);
/* Max over kernel x kernel windows (stride 0 = kernel; padding <= kernel / 2 never wins);
 * gradient to the first maximum of each window (a NaN propagates), as torch max_pool2d. */
tensor *op_maxpool2d(tensor *x, int kernel, int stride, int pad);
/* torch adaptive_avg_pool2d: [N, C, H, W] -> [N, C, out_h, out_w]. */
tensor *op_adaptive_avgpool2d(tensor *x, int out_h, int out_w);
/* Mean over H and W: [N, C, H, W] -> [N, C]. */
tensor *op_global_avgpool(tensor *x);

/* ---- channels-last image ops (ops_conv_nhwc.c): x [N, H, W, C], packed, fp32 or bf16 ----
 * The layout cuDNN's tensor-core convolutions read; a ResNet under model.layout = nhwc runs in it
 * from the stem to the pooled features. Weights, batch-norm vectors and running statistics are the
 * fp32 tensors of the NCHW ops (the conv weight [K, C / groups, R, S]; the kernels round it to x's
 * type); activations and their gradients have x's dtype; a bf16 x needs bf16 compute. */
/* [N, H, W, C] -> [N, P, Q, K], no bias, the geometry of op_conv2d_ex */
tensor *op_conv2d_nhwc(tensor *x, tensor *w, const int stride[2], const int pad[2], const int dilation[2], int groups,
                       int compute);
/* op_batchnorm2d's semantics per channel (the last dim) over N H W values; then + z (a shortcut of
 * x's shape and dtype, or NULL) and max(., 0) when relu: a ResNet block's tail in one pass, one
 * output tensor; the backward hands the ReLU-masked gradient to z. */
tensor *op_batchnorm_nhwc(tensor *x, tensor *w, tensor *b, tensor *running_mean, tensor *running_var, int training,
                          float momentum, float eps, tensor *z, int relu);
/* op_maxpool2d on [N, H, W, C] -> [N, P, Q, C] (a deterministic gather backward) */
tensor *op_maxpool2d_nhwc(tensor *x, int kernel, int stride, int pad);
/* mean over H and W: [N, H, W, C] -> [N, C], fp32 */
tensor *op_global_avgpool_nhwc(tensor *x);
/* [N, C, H, W] -> packed [N, H, W, C] of dtype, and back (one cast and one packing pass each) */
tensor *op_to_nhwc(tensor *x, int dtype);
tensor *op_to_nchw(tensor *x, int dtype);

/* ---- attention (ops_attention.c) ----
 * q [B, H, Tq, D], k, v [B, H, Tk, D] (any strides with unit stride on D, so q/k/v may be views
 * of one packed qkv projection). mask: NULL, or [.., .., Tq, Tk] broadcastable to [B, H, Tq, Tk]
 * (kind MASK_ADD: added to the scores; MASK_BOOL: 0 = masked out). scale <= 0 => 1/sqrt(D).
 * Result [B, H, Tq, D], a view of [B, Tq, H, D] storage, so transpose(1, 2) + reshape to
 * [B, Tq, H * D] costs no copy. The mask gets no gradient. q, k, v are all fp32 or all bf16
 * (docs/dtypes.md): bf16 computes in bf16 whatever the precision and gives a bf16 o. */
tensor *op_attention(tensor *q, tensor *k, tensor *v, tensor *mask, int mask_kind, float scale);

/* ---- losses (ops_loss.c) ---- */
/* Mean over rows with label >= 0 of -log_softmax(logits[r])[label[r]]; logits [N, C]. */
tensor *op_cross_entropy(tensor *logits, const int32_t *labels);

/* ---- across processes (ops_distributed.c, nn/base/process_group.h) ---- */
/* x [n, ...] on every rank -> [size * n, ...]: rank 0's rows, then rank 1's, ... (equal n on every
 * rank). Backward: the output gradients of all ranks are summed and each rank keeps its own rows, so
 * a loss every rank computes on the gathered rows sends each rank `size` times its share; averaging
 * the parameter gradients across ranks then gives exactly the one-process gradient. One process:
 * returns x. */
tensor *op_allgather_rows(tensor *x);

#endif
