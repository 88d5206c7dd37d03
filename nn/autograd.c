/* autograd.c — the tape: recording, reverse walk, grad mode, gradient buffers. */
#include "nn/autograd.h"

#include "kernels/profile.h"
#include "nn/arena.h"
#include "nn/base/base.h"

static int g_grad_enabled = 1;
static tape_node *g_tail; /* newest node */
static int g_count;
static const tensor *g_root; /* the tensor the running backward started from */

/* Gradient buffers of activations that backward has finished with (see run_backward): a later
 * activation gradient of at most their size reuses one instead of taking new arena memory, so a
 * backward pass holds the gradients of its frontier, not of the whole graph. The memory stays the
 * arena's (valid until the step ends); the pool is emptied with the tape. */
enum { GRAD_POOL_MAX = 4096 };
static tensor *g_pool[GRAD_POOL_MAX];
static int g_npool;

static void pool_put(tensor *g) {
    if (g_npool < GRAD_POOL_MAX) g_pool[g_npool++] = g;
}

/* the smallest pooled buffer on `device` of `dtype` holding at least n elements, removed from the
 * pool; NULL if none */
static tensor *pool_take(int device, int dtype, int64_t n) {
    int best = -1;
    for (int i = 0; i < g_npool; i++)
        if (g_pool[i]->device == device && g_pool[i]->dtype == dtype && tensor_numel(g_pool[i]) >= n &&
            (best < 0 || tensor_numel(g_pool[i]) < tensor_numel(g_pool[best])))
            best = i;
    if (best < 0) return NULL;
    tensor *g = g_pool[best];
    g_pool[best] = g_pool[--g_npool];
    return g;
}

int grad_enabled(void) { return g_grad_enabled; }

int no_grad_enter(void) {
    int prev = g_grad_enabled;
    g_grad_enabled = 0;
    return prev;
}

void no_grad_exit(int prev) { g_grad_enabled = prev; }

tape_node *tape_record(const char *op, backward_fn fn, tensor *out, int nin, tensor *const *in) {
    if (!g_grad_enabled || !out) return NULL;
    int any = 0;
    for (int i = 0; i < nin; i++)
        if (in[i] && (in[i]->flags & T_REQUIRES_GRAD)) any = 1;
    if (!any) return NULL;
    tape_node *n = arena_alloc_host(arena_default(out->device), sizeof *n);
    n->op = op;
    n->backward = fn;
    n->out = out;
    n->nin = nin < TAPE_MAX_IN ? nin : TAPE_MAX_IN;
    for (int i = 0; i < n->nin; i++) n->in[i] = in[i];
    n->grad_alias = fn == tape_alias_backward;
    n->prev = g_tail;
    g_tail = n;
    g_count++;
    out->flags |= T_REQUIRES_GRAD;
    out->node = n;
    return n;
}

void tape_alias_backward(tape_node *n) { (void)n; }

/* grad_buf, except that a buffer created now is left uninitialised and *fresh says so (the caller
 * must then write every element instead of adding). An existing buffer, or one aliased into an
 * input's existing buffer, comes back with *fresh = 0. */
tensor *grad_buf_fresh(tensor *x, int *fresh) {
    *fresh = 0;
    if (!x || !(x->flags & T_REQUIRES_GRAD)) return NULL;
    if (!x->grad && x->node && x->node->grad_alias) {
        /* in[0] may need no gradient (e.g. frozen weight, trainable bias): then x gets its own */
        tensor *gin = grad_buf_fresh(x->node->in[0], fresh);
        if (gin) {
            int64_t st[T_MAX_DIMS], acc = 1;
            for (int i = x->ndim - 1; i >= 0; i--) {
                st[i] = acc;
                acc *= x->shape[i];
            }
            x->grad = tensor_view(gin, x->ndim, x->shape, st, 0);
            return x->grad;
        }
    }
    if (!x->grad) {
        if (x->flags & T_LONG_LIVED) {
            x->grad = tensor_new_dt(x->device, x->dtype, x->ndim, x->shape); /* long-lived, zeroed */
        } else {
            int64_t st[T_MAX_DIMS], acc = 1;
            for (int i = x->ndim - 1; i >= 0; i--) {
                st[i] = acc;
                acc *= x->shape[i];
            }
            tensor *reuse = pool_take(x->device, x->dtype, acc);
            x->grad = reuse ? tensor_view(reuse, x->ndim, x->shape, st, 0)
                            : tensor_empty_dt(x->device, x->dtype, x->ndim, x->shape);
            *fresh = 1;
        }
    }
    return x->grad;
}

/* A packed gradient buffer that backward may recycle or give away: the node's own (not a long-lived
 * tensor's, not a view into an input's, not the backward root's, which callers may read). */
static int own_packed_grad(const tape_node *n) {
    const tensor *g = n->out->grad;
    return g && n->out != g_root && n->out->node == n && !n->grad_alias && !n->grad_given &&
           !(n->out->flags & T_LONG_LIVED) && !g->storage && g->offset == 0 && tensor_is_contiguous(g);
}

int tape_give_grad(tape_node *n, tensor *x) {
    if (!n || !x || !(x->flags & T_REQUIRES_GRAD) || x->grad || (x->flags & T_LONG_LIVED)) return 0;
    if ((x->node && x->node->grad_alias) || tensor_numel(x) != tensor_numel(n->out) || !own_packed_grad(n)) return 0;
    int64_t st[T_MAX_DIMS], acc = 1;
    for (int i = x->ndim - 1; i >= 0; i--) {
        st[i] = acc;
        acc *= x->shape[i];
    }
    x->grad = tensor_view(n->out->grad, x->ndim, x->shape, st, 0);
    n->grad_given = 1; /* x's buffer now: not recycled when this node is done */
    return 1;
}

tensor *grad_buf(tensor *x) {
    int fresh;
    tensor *g = grad_buf_fresh(x, &fresh);
    if (g && fresh) tensor_fill(g, 0.0f);
    return g;
}

void tape_clear(void) {
    /* Outputs keep pointing at dead nodes only until the arena reset; clear the links now so a
     * tensor that survives (e.g. a long-lived view) cannot reach a freed node. */
    for (tape_node *n = g_tail; n; n = n->prev)
        if (n->out && n->out->node == n) n->out->node = NULL;
    g_tail = NULL;
    g_count = 0;
    g_npool = 0;
}

int tape_size(void) { return g_count; }

static int run_backward(tensor *out) {
    /* Walk newest -> oldest: every node's output gradient is complete when the node runs, because
     * all its consumers were recorded after it. Nodes whose output received no gradient (not on
     * the loss's path) are skipped. */
    int prev = no_grad_enter();
    g_root = out;
    for (tape_node *n = g_tail; n; n = n->prev) {
        if (!n->out->grad) continue;
        n->backward(n);
        /* every consumer of n->out ran before n: its gradient is dead now, unless it belongs to
         * someone else (a long-lived tensor's, an alias node's view into its input's gradient, an
         * input's it was given to) or the output is the tensor backward started from */
        if (own_packed_grad(n)) pool_put(n->out->grad);
    }
    g_root = NULL;
    no_grad_exit(prev);
    tape_clear();
    return ER_OK;
}

static int backward_impl(tensor *loss) {
    if (!loss) return er_fail(ER_INPUT, "backward: loss is NULL (an op before it failed: %s)", er_msg());
    if (tensor_numel(loss) != 1) {
        char b[96];
        return er_fail(ER_INPUT, "backward: loss must have one element, got shape %s",
                       tensor_shape_str(loss, b, sizeof b));
    }
    if (!(loss->flags & T_REQUIRES_GRAD)) return er_fail(ER_INPUT, "backward: loss does not require grad (no_grad mode or no trainable input)");
    if (tensor_need_f32("backward (the loss)", loss)) return ER_INPUT;
    if (!loss->node && !(loss->flags & T_LONG_LIVED))
        return er_fail(ER_INPUT, "backward: the loss has no recorded graph (backward already ran on it: the tape is consumed)");
    int fresh;
    tensor *g = grad_buf_fresh(loss, &fresh);
    const er_backend *be = tensor_backend(g);
    if (fresh) { /* the usual case: one fill on the device, no host round trip (no synchronisation) */
        be->fill(g->data, 1, 1.0f);
    } else { /* a gradient already there (a long-lived loss): add 1 to it */
        float one = 1.0f, cur;
        be->download(&cur, g->data, sizeof cur);
        one += cur;
        be->upload(g->data, &one, sizeof one);
    }
    return run_backward(loss);
}

static int backward_with_impl(tensor *out, const tensor *grad_out) {
    if (!out || !grad_out) return er_fail(ER_INPUT, "backward_with: NULL tensor (%s)", er_msg());
    if (!tensor_same_shape(out, grad_out) || out->dtype != grad_out->dtype)
        return er_fail(ER_INPUT, "backward_with: gradient shape or dtype differs from the output's");
    if (!(out->flags & T_REQUIRES_GRAD)) return er_fail(ER_INPUT, "backward_with: output does not require grad");
    tensor *g = grad_buf(out);
    if (g->dtype == DT_BF16)
        tensor_backend(g)->copy_strided_bf16(g->ndim, g->shape, grad_out->raw, grad_out->stride, g->raw, g->stride, 1);
    else
        tensor_backend(g)->copy_strided(g->ndim, g->shape, grad_out->data, grad_out->stride, g->data, g->stride, 1);
    return run_backward(out);
}

/* A profiled step counts everything from here on as its backward phase (the seed gradient too). */
int backward(tensor *loss) {
    int phase = prof_phase(PROF_BACKWARD), rc = backward_impl(loss);
    prof_phase(phase);
    return rc;
}

int backward_with(tensor *out, const tensor *grad_out) {
    int phase = prof_phase(PROF_BACKWARD), rc = backward_with_impl(out, grad_out);
    prof_phase(phase);
    return rc;
}

void zero_grad(const param_list *pl) {
    for (int i = 0; i < pl->n; i++)
        if (pl->t[i]->grad) tensor_fill(pl->t[i]->grad, 0.0f);
}

void nn_step_end(void) {
    tape_clear();
    arena_default_reset_all();
}
