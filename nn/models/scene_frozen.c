/* scene_frozen.c — see scene_frozen.h. */
#include "nn/models/scene_frozen.h"

#include "nn/base/base.h"
#include "nn/losses/mae_loss.h"
#include "nn/ops.h"

int scene_frozen_new(scene_frozen *f, const vit *enc, int n_inputs, int nrec, int K) {
    const vit_config *c = &enc->cfg;
    int dev = enc->patch_w->device;
    int64_t D = c->dim, T = 1 + c->registers + K, P = (int64_t)c->patch * c->patch * c->in_chans;
    *f = (scene_frozen){0};
    f->cls = tensor_new_on(dev, 2, SHAPE(n_inputs, D));
    if (nrec > 0) {
        f->latent = tensor_new_on(dev, 3, SHAPE(nrec, T, D));
        f->target = tensor_new_on(dev, 3, SHAPE(nrec, enc->L, P));
    }
    if (!f->cls || (nrec > 0 && (!f->latent || !f->target))) {
        scene_frozen_free(f);
        return er_fail(ER_RUNTIME, "scene: no device memory for the frozen encoder's outputs (%d inputs, %d targets)",
                       n_inputs, nrec);
    }
    return ER_OK;
}

void scene_frozen_free(scene_frozen *f) {
    tensor_free(f->cls);
    tensor_free(f->latent);
    tensor_free(f->target);
    *f = (scene_frozen){0};
}

/* Rows q0 .. q0 + n of a long-lived packed tensor as a per-step view (writes land in t). */
static tensor *rows(const tensor *t, int64_t q0, int64_t n) {
    int64_t shape[T_MAX_DIMS], row = 1;
    for (int d = 1; d < t->ndim; d++) row *= t->shape[d];
    for (int d = 0; d < t->ndim; d++) shape[d] = t->shape[d];
    shape[0] = n;
    return tensor_view(t, t->ndim, shape, t->stride, q0 * row);
}

static int copy_rows(tensor *dst, int64_t q0, const tensor *src) {
    if (!src) return ER_RUNTIME;
    if (q0 < 0 || q0 + src->shape[0] > dst->shape[0])
        return er_fail(ER_INPUT, "scene: frozen-encoder rows %lld + %lld past %lld", (long long)q0,
                       (long long)src->shape[0], (long long)dst->shape[0]);
    return tensor_copy(rows(dst, q0, src->shape[0]), src);
}

int scene_frozen_cls(scene_frozen *f, vit *enc, const nn_ctx *ctx, tensor *img, int q0) {
    if (!img) return ER_RUNTIME;
    int64_t B = img->shape[0];
    tensor *x = vit_forward_t(enc, ctx, img, NULL, 0);
    return copy_rows(f->cls, q0, op_reshape(op_slice(x, 1, 0, 1), 2, SHAPE(B, enc->cfg.dim)));
}

int scene_frozen_masked(scene_frozen *f, vit *enc, const nn_ctx *ctx, tensor *img, const int32_t *keep, int K, int q0) {
    if (!img) return ER_RUNTIME;
    if (!f->latent) return er_fail(ER_INPUT, "scene: no reconstruction buffers (made with nrec = 0)");
    int rc = copy_rows(f->latent, q0, vit_forward_t(enc, ctx, img, keep, K));
    return rc ? rc : copy_rows(f->target, q0, mae_target_t(img, enc->cfg.patch, 0));
}

/* dst[:, t, w0 .. w0 + n) <- src[:, u0 .. u0 + n) over b scenes: dst viewed as [b, V, V-1, D],
 * src as [b, V, D]. */
static int copy_views(tensor *dst, const tensor *src, int b, int V, int t, int w0, int u0, int n) {
    int64_t D = src->shape[1];
    const int64_t shape[3] = {b, n, D};
    tensor *d = tensor_view(dst, 3, shape, (const int64_t[]){(int64_t)V * (V - 1) * D, D, 1}, ((int64_t)t * (V - 1) + w0) * D);
    tensor *s = tensor_view(src, 3, shape, (const int64_t[]){(int64_t)V * D, D, 1}, (int64_t)u0 * D);
    return d && s ? tensor_copy(d, s) : ER_RUNTIME;
}

tensor *scene_frozen_views(const scene_frozen *f, int b, int V, int shared) {
    int64_t D = f->cls->shape[1], N = (int64_t)b * V, need = shared ? N : N * (V - 1);
    if (V < 2 || f->cls->shape[0] < need) {
        er_fail(ER_INPUT, "scene: %lld [CLS] rows for %d scenes x %d views (%s), need %lld", (long long)f->cls->shape[0],
                b, V, shared ? "shared" : "per combination", (long long)need);
        return NULL;
    }
    if (!shared) return tensor_view(f->cls, 3, SHAPE(N, V - 1, D), SHAPE((V - 1) * D, D, 1), 0);
    tensor *v = tensor_empty(f->cls->device, 3, SHAPE(N, V - 1, D));
    for (int t = 0; v && t < V; t++) /* views u < t keep their slot, views u > t move down one */
        if ((t > 0 && copy_views(v, f->cls, b, V, t, 0, 0, t)) || (t < V - 1 && copy_views(v, f->cls, b, V, t, t, t + 1, V - 1 - t)))
            return NULL;
    return v;
}
