/* conv_args.h — the geometry of the image ops in kernels/ops.def (conv2d, maxpool2d), passed by
 * pointer so the op lines stay short and every backend reads the same fields.
 *
 * Layout is NCHW, packed. Output sizes follow PyTorch (floor mode):
 *   P = (H + 2 ph - dh (R - 1) - 1) / sh + 1,   Q = (W + 2 pw - dw (S - 1) - 1) / sw + 1.
 * conv2d_args_fill / pool2d_args_fill set P and Q (0 when the window does not fit); nn/ops_conv.c
 * rejects such shapes before any kernel runs. */
#ifndef ENDORET_CONV_ARGS_H
#define ENDORET_CONV_ARGS_H

#ifdef __cplusplus
extern "C" {
#endif

/* x [N, C, H, W] * w [K, C / groups, R, S] -> y [N, K, P, Q]; groups divides C and K. */
typedef struct {
    int N, C, H, W;   /* input */
    int K, R, S;      /* output channels, kernel height and width */
    int P, Q;         /* output height and width */
    int sh, sw;       /* stride */
    int ph, pw;       /* zero padding on each side */
    int dh, dw;       /* dilation (1 = dense kernel) */
    int groups;
    int compute;      /* GEMM_COMPUTE_FP32 / _BF16 (kernels/gemm_ex_args.h): the products' arithmetic */
} conv2d_args;

/* x [N, C, H, W] -> y [N, C, P, Q] over R x S windows (padding counts as -inf for max). */
typedef struct {
    int N, C, H, W;
    int R, S;
    int P, Q;
    int sh, sw;
    int ph, pw;
} pool2d_args;

static inline int conv_out_size(int in, int k, int stride, int pad, int dil) {
    int span = dil * (k - 1) + 1;
    return in + 2 * pad < span ? 0 : (in + 2 * pad - span) / stride + 1;
}

static inline void conv2d_args_fill(conv2d_args *a) {
    a->P = conv_out_size(a->H, a->R, a->sh, a->ph, a->dh);
    a->Q = conv_out_size(a->W, a->S, a->sw, a->pw, a->dw);
}

static inline void pool2d_args_fill(pool2d_args *a) {
    a->P = conv_out_size(a->H, a->R, a->sh, a->ph, 1);
    a->Q = conv_out_size(a->W, a->S, a->sw, a->pw, 1);
}

#ifdef __cplusplus
}
#endif

#endif
