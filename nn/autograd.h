/* autograd.h — tape-based reverse-mode autograd (define-by-run, like PyTorch).
 *
 * Each differentiable op, when grad mode is on and some input requires grad, appends a node
 * (inputs, output, backward function, small saved context) to the global tape. backward(loss)
 * walks the tape in reverse, accumulating into `grad` of every tensor that requires it, then
 * clears the tape (like PyTorch's retain_graph=False).
 *
 * Memory model: tape nodes, their saved tensors and the gradients of activations live in the
 * per-step arena (nn/arena.h). Gradients of parameters and other long-lived leaves are long-lived
 * and ACCUMULATE across backward calls until zero_grad: two forward+backward passes give twice the
 * gradient (gradient accumulation). A training step is:
 *     forward -> backward(loss) -> optimizer step -> zero_grad(params) -> nn_step_end()
 * nn_step_end() clears the tape and resets the default arenas (all activations die).
 * In no_grad mode ops run the same code and record nothing (inference).
 * Not thread-safe: one thread builds and differentiates the graph. */
#ifndef ENDORET_AUTOGRAD_H
#define ENDORET_AUTOGRAD_H

#include "nn/tensor.h"

#define TAPE_MAX_IN 4

typedef struct tape_node tape_node;
typedef void (*backward_fn)(tape_node *n);

struct tape_node {
    const char *op;          /* op name, for debugging */
    backward_fn backward;
    tensor *out;
    tensor *in[TAPE_MAX_IN];
    int nin;
    tensor *saved[4];        /* extra tensors the backward needs (arena) */
    void *ctx;               /* op-specific data (arena) */
    int64_t i[8];            /* small integer arguments */
    float f[4];              /* small float arguments */
    tape_node *prev;
    int grad_alias;          /* out's gradient is a packed view of in[0]'s (same element order):
                                set for tape_alias_backward, or by ops that add to it (bias add) */
    int grad_given;          /* out's gradient buffer was given to an input (tape_give_grad) */
};

/* ---- grad mode ---- */
int grad_enabled(void);
/* Disables recording; returns the previous mode for no_grad_exit. */
int no_grad_enter(void);
void no_grad_exit(int prev);
/* NO_GRAD { ... } runs the block with recording off (do not `return`/`break` out of it). */
#define NO_GRAD for (int _ng_prev = no_grad_enter(), _ng_once = 1; _ng_once; _ng_once = 0, no_grad_exit(_ng_prev))

/* ---- recording (used by ops) ----
 * Returns a new node linked to `out` (out->node, out gets T_REQUIRES_GRAD) when grad mode is on and
 * one of the inputs requires grad; otherwise NULL and nothing is recorded. */
tape_node *tape_record(const char *op, backward_fn fn, tensor *out, int nin, tensor *const *in);
/* Backward function of ops whose output is the input with the same packed element order (reshape,
 * squeeze, unsqueeze, clone): the output's gradient buffer becomes a view of the input's, so the
 * gradient flows through with no copy and this backward does nothing. */
void tape_alias_backward(tape_node *n);
/* The gradient buffer of x for a backward function to accumulate into (allocated zero-filled on
 * first use: arena for activations, long-lived for long-lived leaves), or NULL if x needs none. */
tensor *grad_buf(tensor *x);
/* For a backward whose input x receives the output's gradient unchanged (a residual add: x + f(..)),
 * called after every other use of that gradient in the node: when x has no gradient buffer yet,
 * x takes the output's buffer as its own (its other consumers then add to it) instead of a copy
 * into a new one. Returns 1 when given; 0 (nothing changed: the caller adds as usual) when x
 * already has a buffer, is long-lived, shares its gradient with a view's base, differs from the
 * output in size, or the output's gradient is not the node's own packed buffer (or is the one
 * backward started from, which the caller may read). The same bits either way. */
int tape_give_grad(tape_node *n, tensor *x);

/* ---- running ----
 * backward: loss must have one element; its gradient is seeded with 1. backward_with seeds any
 * tensor's gradient with `grad_out` (same shape). Both return ER_OK or an error (er_msg), and clear
 * the tape. */
int backward(tensor *loss);
int backward_with(tensor *out, const tensor *grad_out);
/* Zero every gradient in the list (long-lived grads keep their memory). */
void zero_grad(const param_list *pl);
void tape_clear(void);
int tape_size(void);
/* End of a training step: tape_clear + arena_default_reset_all. */
void nn_step_end(void);

#endif
