/* nn/layers/sync_batchnorm.h: in one process the composed path (per-channel sums all-gathered, two
 * passes) gives op_batchnorm2d's output, gradients (x, weight, bias) and running statistics; eval mode
 * and one process go straight to op_batchnorm2d. The multi-rank equivalence is
 * tests/train/test_data_parallel.c's PGCon case. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/autograd.h"
#include "nn/base/rng.h"
#include "nn/layers/sync_batchnorm.h"
#include "nn/ops.h"
#include "tests/test_util.h"

enum { N = 3, C = 4, H = 5, W = 3 };

static void run(int composed, int relu, float *y, float *gx, float *gw, float *gb, float *rm, float *rv) {
    float xh[N * C * H * W], wh[C], bh[C], gyh[N * C * H * W];
    rng_t r = rng_make(7, 1);
    for (int i = 0; i < N * C * H * W; i++) xh[i] = 2 * rng_normal(&r) + 0.5f, gyh[i] = rng_normal(&r);
    for (int c = 0; c < C; c++) wh[c] = 1 + 0.3f * rng_normal(&r), bh[c] = 0.2f * rng_normal(&r);
    tensor *x = tensor_from_host_new(4, SHAPE(N, C, H, W), xh), *w = tensor_from_host_new(1, SHAPE(C), wh);
    tensor *b = tensor_from_host_new(1, SHAPE(C), bh), *m = tensor_new(1, SHAPE(C)), *v = tensor_new(1, SHAPE(C));
    for (int c = 0; c < C; c++) v->data[c] = 1, m->data[c] = 0.1f * c;
    x->flags |= T_REQUIRES_GRAD; w->flags |= T_REQUIRES_GRAD; b->flags |= T_REQUIRES_GRAD;
    tensor *out = composed ? sync_batchnorm2d_composed(x, w, b, m, v, 0.1f, 1e-5f, relu)
                           : (relu ? op_batchnorm2d_relu : op_batchnorm2d)(x, w, b, m, v, 1, 0.1f, 1e-5f);
    cr_assert(out, "%s", er_msg());
    tensor_to_host(out, y);
    tensor *loss = op_sum_all(op_mul(out, tensor_upload(DEV_CPU, 4, SHAPE(N, C, H, W), gyh)));
    cr_assert_eq(backward(loss), 0, "%s", er_msg());
    tensor_to_host(x->grad, gx); tensor_to_host(w->grad, gw); tensor_to_host(b->grad, gb);
    memcpy(rm, m->data, sizeof(float) * C); memcpy(rv, v->data, sizeof(float) * C);
    nn_step_end();
    tensor_free(x); tensor_free(w); tensor_free(b); tensor_free(m); tensor_free(v);
}

static void compare(int relu) {
    float y0[N * C * H * W], y1[N * C * H * W], gx0[N * C * H * W], gx1[N * C * H * W];
    float gw0[C], gw1[C], gb0[C], gb1[C], rm0[C], rm1[C], rv0[C], rv1[C];
    run(0, relu, y0, gx0, gw0, gb0, rm0, rv0);
    run(1, relu, y1, gx1, gw1, gb1, rm1, rv1);
    for (int i = 0; i < N * C * H * W; i++) {
        cr_assert(fabsf(y0[i] - y1[i]) < 2e-5f * (1 + fabsf(y0[i])), "y[%d] %g vs %g", i, y0[i], y1[i]);
        cr_assert(fabsf(gx0[i] - gx1[i]) < 2e-4f * (1 + fabsf(gx0[i])), "dx[%d] %g vs %g", i, gx0[i], gx1[i]);
    }
    for (int c = 0; c < C; c++) {
        cr_assert(fabsf(gw0[c] - gw1[c]) < 1e-4f * (1 + fabsf(gw0[c])), "dw[%d] %g vs %g", c, gw0[c], gw1[c]);
        cr_assert(fabsf(gb0[c] - gb1[c]) < 1e-4f * (1 + fabsf(gb0[c])), "db[%d] %g vs %g", c, gb0[c], gb1[c]);
        cr_assert(fabsf(rm0[c] - rm1[c]) < 1e-6f && fabsf(rv0[c] - rv1[c]) < 1e-5f, "running stats [%d]", c);
    }
}

Test(sync_batchnorm, composed_path_equals_batchnorm_in_one_process) { compare(0); }
Test(sync_batchnorm, composed_path_with_relu) { compare(1); }

Test(sync_batchnorm, eval_and_one_process_are_batchnorm_itself) {
    float xh[N * C * H * W];
    for (int i = 0; i < N * C * H * W; i++) xh[i] = (float)i / 7;
    tensor *x = tensor_from_host_new(4, SHAPE(N, C, H, W), xh), *m = tensor_new(1, SHAPE(C)), *v = tensor_new(1, SHAPE(C));
    for (int c = 0; c < C; c++) v->data[c] = 2;
    float a[N * C * H * W], b[N * C * H * W];
    for (int training = 0; training <= 1; training++) {
        tensor_to_host(sync_batchnorm2d(x, NULL, NULL, m, v, training, 0.1f, 1e-5f, 0), a);
        for (int c = 0; c < C; c++) v->data[c] = 2, m->data[c] = 0;
        tensor_to_host(op_batchnorm2d(x, NULL, NULL, m, v, training, 0.1f, 1e-5f), b);
        for (int c = 0; c < C; c++) v->data[c] = 2, m->data[c] = 0;
        cr_assert(!memcmp(a, b, sizeof a), "training %d: not op_batchnorm2d's bytes", training);
    }
    nn_step_end();
    tensor_free(x); tensor_free(m); tensor_free(v);
}
