/* test_cuda_parity_step.c — the training step that makes the host wait once (train/loop.c): the
 * losses and logged terms kept on the device (train/step_record.h, sscd_loss_terms), the gradient norm,
 * clip and finiteness verdict computed there (optim_guard → step_guard), the update reading the
 * verdict (adamw_many's gscale_dev), and one read of the record at the end.
 *
 * A ViT + MAE decoder + SSCD head, as train/objective_image.c steps it, trained 3 steps twice on the
 * same device from the same weights: the one-wait step, and the waiting step (tensor_item of the loss
 * and the terms, sumsq_many's norm read back, the gradients scaled in place: nn/optim.c's host clip).
 * Checked:
 *   - the two give the same bits: losses, terms' values (InfoNCE, entropy, MAE), norms and every weight;
 *   - the logged pos_sim (summed on the device) is sscd_loss's host pos_sim within 1e-5;
 *   - from the second step on, the one-wait step makes the host wait exactly once (the table's
 *     host_waits; the waiting step, for comparison, 7 times or more). On the CPU table both count 0.
 * Clipping is active (max norm 0.5). Skips without a GPU; runs under python3 tests/cuda/emulate.py. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "nn/autograd.h"
#include "nn/losses/mae_loss.h"
#include "nn/losses/sscd.h"
#include "nn/models/mae.h"
#include "nn/models/vit.h"
#include "nn/ops.h"
#include "nn/optim.h"
#include "nn/precision.h"
#include "tests/cuda/parity_util.h"
#include "tests/cuda/parity_vit_model.h"
#include "train/step_record.h"

enum { QD = 32, QSTEPS = 3 };

typedef struct {
    double loss, norm, mae, infonce, entropy, pos_sim;
} step_out;

/* The forward of train/objective_image.c (MAE + SSCD, two views of two instances). */
static tensor *sm_forward(model_on *m, int64_t step, const float *x, tensor **lm, tensor **lc, sscd_terms *t,
                          sscd_stats *st) {
    const int L = (MIMG / MP) * (MIMG / MP), K = L / 2;
    int32_t shuffle[MB * 16], restore[MB * 16], keep[MB * 16];
    float mask[MB * 16];
    mae_masking(MB, L, K, NULL, NULL, 5, (uint64_t)step, shuffle, restore, mask);
    for (int b = 0; b < MB; b++) memcpy(keep + b * K, shuffle + b * L, K * sizeof(int32_t));
    const int dev = m->enc->patch_w->device;
    nn_ctx ctx = nn_ctx_train(5, step, 0, ER_PREC_FP32);
    tensor *xt = tensor_upload(dev, 4, SHAPE(MB, 3, MIMG, MIMG), x);
    tensor *latent = vit_forward_t(m->enc, &ctx, xt, keep, K);
    tensor *pred = mae_decoder_forward(&m->dec, &ctx, latent, 0, restore);
    *lm = mae_loss_t(pred, mae_target_t(xt, MP, 1), mask);
    tensor *cls = op_reshape(op_slice(latent, 1, 0, 1), 2, SHAPE(MB, QD));
    int ids[MB] = {0, 1, 0, 1};
    uint8_t match[MB * MB];
    sscd_match_from_ids(ids, MB, match);
    tensor *e = sscd_descriptor(&m->head, &ctx, cls);
    *lc = t ? sscd_loss_terms(e, match, 0.05, 5, 0, t) : sscd_loss(e, match, 0.05, 5, 0, st);
    return op_add(op_mul_scalar(*lm, 0.5f), *lc);
}

/* The waiting step: every value read when it is made, nn/optim.c's host clip. */
static step_out sm_step_waiting(model_on *m, int64_t step, const float *x) {
    tensor *lm, *lc;
    sscd_stats st;
    tensor *loss = sm_forward(m, step, x, &lm, &lc, NULL, &st);
    cr_assert_not_null(loss, "%s", er_msg());
    step_out o = {.loss = tensor_item(loss), .mae = tensor_item(lm), .infonce = st.infonce, .entropy = st.entropy,
                  .pos_sim = st.pos_sim};
    cr_assert_eq(backward(loss), ER_OK, "%s", er_msg());
    nn_step_end();
    o.norm = optim_clip_grad_norm(m->opt, 0.5);
    cr_assert_eq(optim_step(m->opt), ER_OK, "%s", er_msg());
    optim_zero_grad(m->opt);
    return o;
}

/* The one-wait step of train/loop.c. */
static step_out sm_step_once(model_on *m, int64_t step, const float *x, step_record *rec) {
    tensor *lm, *lc;
    sscd_terms t;
    loss_terms terms = {0};
    tensor *loss = sm_forward(m, step, x, &lm, &lc, &t, NULL);
    cr_assert_not_null(loss, "%s", er_msg());
    loss_terms_defer(&terms, "mae", lm);
    loss_terms_defer(&terms, "infonce", t.infonce);
    loss_terms_defer(&terms, "entropy", t.entropy);
    loss_terms_defer(&terms, "pos_sim", t.pos_sim);
    step_record_loss(rec, 0, loss);
    step_record_terms(rec, 0, &terms);
    cr_assert_eq(backward(loss), ER_OK, "%s", er_msg());
    nn_step_end();
    cr_assert_eq(optim_guard(m->opt, rec->device, 0.5, step_record_losses(rec), 1, step_record_norm(rec),
                             step_record_gscale(rec)), ER_OK);
    cr_assert_eq(optim_step(m->opt), ER_OK, "%s", er_msg());
    optim_zero_grad(m->opt);
    step_record_read(rec); /* the caller checks the table's error after counting the waits */
    step_record_term_values(rec, 0, &terms);
    return (step_out){.loss = step_record_loss_value(rec, 0), .norm = step_record_norm_value(rec),
                      .mae = terms.value[0], .infonce = terms.value[1], .entropy = terms.value[2],
                      .pos_sim = terms.value[3]};
}

static void same_bits(const char *what, int step, double a, double b) {
    /* the record holds floats: the waiting step's float values widened give the same doubles */
    cr_assert(memcmp(&a, &b, sizeof a) == 0, "step %d: %s %.17g (one wait) vs %.17g (waiting)", step, what, a, b);
}

Test(cuda, training_step_waits_once_and_matches_the_waiting_step) {
    require_gpu();
    const er_backend *be = backend_get(GPU_DEV);
    model_on a, b;
    model_build(&a, GPU_DEV);
    model_build(&b, GPU_DEV);
    step_record rec;
    cr_assert_eq(step_record_init(&rec, GPU_DEV, 1), ER_OK, "%s", er_msg());
    float *x = rnd(MB * 3 * MIMG * MIMG, -1, 1, 240);
    for (int step = 0; step < QSTEPS; step++) {
        uint64_t w0 = be->host_waits();
        step_out o = sm_step_once(&a, step, x, &rec);
        const uint64_t once = be->host_waits() - w0;
        gpu_ok("one-wait step"); /* waits too: outside the counts */
        uint64_t w1 = be->host_waits();
        step_out r = sm_step_waiting(&b, step, x);
        const uint64_t waiting = be->host_waits() - w1;
        gpu_ok("waiting step");
        cr_log_info("step %d: host waits %llu (one-wait step), %llu (waiting step); loss %.7g norm %.7g", step,
                    (unsigned long long)once, (unsigned long long)waiting, o.loss, o.norm);
        same_bits("loss", step, o.loss, r.loss);
        same_bits("norm", step, o.norm, r.norm);
        same_bits("mae", step, o.mae, r.mae);
        same_bits("infonce", step, o.infonce, r.infonce);
        same_bits("entropy", step, o.entropy, r.entropy);
        cr_assert(fabs(o.pos_sim - r.pos_sim) <= 1e-5, "step %d: pos_sim %.7g vs %.7g", step, o.pos_sim, r.pos_sim);
        cr_assert(o.norm > 0.5, "step %d: norm %g: the clip was not exercised", step, o.norm);
        if (GPU_DEV == DEV_CPU) {
            cr_assert_eq(once, 0);
        } else if (step > 0) { /* step 0 may trim the arena's first chunks (a wait) */
            cr_assert_eq(once, 1, "step %d: the one-wait step waited %llu times", step, (unsigned long long)once);
            cr_assert(waiting >= 7, "step %d: the waiting step waited only %llu times", step, (unsigned long long)waiting);
        }
    }
    for (int i = 0; i < a.all.n; i++) {
        int64_t n = tensor_numel(a.all.t[i]);
        float *ha = host_of(a.all.t[i]->data, n), *hb = host_of(b.all.t[i]->data, n);
        cr_assert(memcmp(ha, hb, (size_t)n * sizeof(float)) == 0, "%s differs after %d steps", a.all.t[i]->name, QSTEPS);
        free(ha), free(hb);
    }
    free(x);
    step_record_free(&rec);
    model_free(&a);
    model_free(&b);
}
