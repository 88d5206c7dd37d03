/* pooling.c — [CLS], mean and GeM pooling of ViT tokens (pooling.h). */
#include "nn/layers/pooling.h"

#include <math.h>
#include <string.h>

#include "nn/base/base.h"
#include "nn/ops.h"

int pool_parse(const char *s, const char *key, pool_kind *k) {
    if (s && !strcmp(s, "cls")) *k = POOL_CLS;
    else if (s && !strcmp(s, "gem")) *k = POOL_GEM;
    else if (s && !strcmp(s, "mean")) *k = POOL_MEAN;
    else return er_fail(ER_INPUT, "%s = '%s': expected cls, gem or mean", key, s ? s : "");
    return ER_OK;
}

const char *pool_name(pool_kind k) { return k == POOL_GEM ? "gem" : k == POOL_MEAN ? "mean" : "cls"; }

tensor *gem_pool(tensor *x, tensor *p, float eps) {
    if (!x || !p) return NULL;
    tensor *lx = op_log(op_clamp(x, eps, INFINITY));          /* log clamp(x, eps) */
    tensor *m = op_mean(op_exp(op_mul(lx, p)), 1, 0);        /* mean_n x^p: [B, C] */
    return op_exp(op_div(op_log(m), p));                     /* m^(1/p) */
}

tensor *token_pool(pool_kind k, tensor *tokens, int prefix, tensor *p, float eps) {
    if (!tokens) return NULL;
    int64_t B = tokens->shape[0], T = tokens->shape[1], C = tokens->shape[2];
    if (k == POOL_CLS) return op_reshape(op_slice(tokens, 1, 0, 1), 2, SHAPE(B, C));
    if (T <= prefix) {
        er_fail(ER_INPUT, "pool: %lld tokens, none after the %d prefix tokens", (long long)T, prefix);
        return NULL;
    }
    tensor *patches = op_contiguous(op_slice(tokens, 1, prefix, T));
    return k == POOL_MEAN ? op_mean(patches, 1, 0) : gem_pool(patches, p, eps);
}
