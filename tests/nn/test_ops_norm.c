/* layernorm, softmax, log_softmax, L2 normalise: forward against double references, gradients. */
#include <math.h>

#include "tests/nn/gradcheck.h"
#include "tests/test_util.h"

static tensor *f_ln(tensor **in, void *c) { return op_layernorm(in[0], c ? in[1] : NULL, c ? in[2] : NULL, 1e-5f); }

Test(nn_norm, layernorm_forward_and_grad) {
    const int64_t cols[] = {1, 3, 17, 197};
    for (int s = 0; s < 4; s++) {
        int64_t C = cols[s], R = s == 3 ? 2 : 5;
        tensor *in[3] = {gc_rand(2, SHAPE(R, C), 1 + s, -2, 2), gc_rand(1, SHAPE(C), 2 + s, 0.5f, 1.5f),
                         gc_rand(1, SHAPE(C), 3 + s, -1, 1)};
        tensor *y = f_ln(in, (void *)1);
        for (int64_t r = 0; r < R; r++) {
            double m = 0, v = 0;
            for (int64_t j = 0; j < C; j++) m += in[0]->data[r * C + j];
            m /= C;
            for (int64_t j = 0; j < C; j++) v += pow(in[0]->data[r * C + j] - m, 2);
            v /= C;
            for (int64_t j = 0; j < C; j++) {
                double ref = (in[0]->data[r * C + j] - m) / sqrt(v + 1e-5) * in[1]->data[j] + in[2]->data[j];
                cr_assert_float_eq(y->data[r * C + j], ref, 1e-4, "C %lld", (long long)C);
            }
        }
        if (C > 1) { /* C == 1: output is the bias, x-gradient 0 but FD through rstd is ill-conditioned */
            gc_opts o = gc_default();
            o.max_elems = 200;
            cr_assert_eq(gradcheck("layernorm", f_ln, (void *)1, 3, in, o), 0, "C %lld", (long long)C);
            cr_assert_eq(gradcheck("layernorm_noaffine", f_ln, NULL, 1, in, o), 0, "C %lld", (long long)C);
        }
        gc_free(3, in);
        nn_step_end();
    }
}

typedef struct { int kind, axis; } sm_ctx;
static tensor *f_sm(tensor **in, void *cv) {
    sm_ctx *c = cv;
    return c->kind == 0 ? op_softmax(in[0], c->axis)
         : c->kind == 1 ? op_log_softmax(in[0], c->axis)
                        : op_l2_normalize(in[0], c->axis, 1e-12f);
}

Test(nn_norm, softmax_logsoftmax_l2_forward_and_grad) {
    const int64_t shapes[][3] = {{2, 3, 17}, {1, 197, 3}, {3, 1, 5}};
    for (int s = 0; s < 3; s++)
        for (int kind = 0; kind < 3; kind++)
            for (int axis = 0; axis < 3; axis++) {
                if (shapes[s][axis] == 1 && kind == 2) continue; /* |x| of one value: sign(x), FD ill-posed near 0 */
                tensor *x = gc_rand(3, shapes[s], 20 + s, -3, 3);
                sm_ctx c = {kind, axis};
                tensor *in[1] = {x};
                tensor *y = f_sm(in, &c);
                cr_assert_not_null(y, "%s", er_msg());
                int64_t O = 1, L = x->shape[axis], I = 1;
                for (int i = 0; i < axis; i++) O *= x->shape[i];
                for (int i = axis + 1; i < 3; i++) I *= x->shape[i];
                float *h = malloc(sizeof(float) * tensor_numel(y));
                tensor_to_host(y, h);
                for (int64_t o = 0; o < O; o++)
                    for (int64_t i = 0; i < I; i++) {
                        double m = -INFINITY, s1 = 0, s2 = 0;
                        for (int64_t j = 0; j < L; j++) m = fmax(m, x->data[(o * L + j) * I + i]);
                        for (int64_t j = 0; j < L; j++) {
                            double v = x->data[(o * L + j) * I + i];
                            s1 += exp(v - m);
                            s2 += v * v;
                        }
                        for (int64_t j = 0; j < L; j++) {
                            double v = x->data[(o * L + j) * I + i];
                            double ref = kind == 0 ? exp(v - m) / s1 : kind == 1 ? v - m - log(s1) : v / sqrt(s2);
                            cr_assert_float_eq(h[(o * L + j) * I + i], ref, 1e-5, "kind %d axis %d", kind, axis);
                        }
                    }
                free(h);
                gc_opts go = gc_default();
                go.max_elems = 150;
                cr_assert_eq(gradcheck("softmax/l2", f_sm, &c, 1, in, go), 0, "kind %d axis %d shape %d", kind, axis, s);
                tensor_free(x);
                nn_step_end();
            }
}
