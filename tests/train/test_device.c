/* Models on a device, checked on the CPU: the on-device pieces of a training step (SSCD loss
 * through nn/ops, MAE target through view ops, op patchify) against the host references they
 * replaced (the SSCD one against torch's float64 values); --device cuda without a usable GPU fails
 * with one message and exit status 2 in every command before any work; --precision bf16 trains a
 * tiny model with losses close to fp32. The CUDA side of the same model is tests/cuda/. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/synth.h"
#include "nn/autograd.h"
#include "nn/base/base.h"
#include "nn/base/json.h"
#include "nn/models/mae.h"
#include "nn/ops.h"
#include "nn/losses/sscd.h"
#include "nn/models/vit.h"
#include "tests/nn/losses/sscd_refs.h"
#include "tests/train/tiny_image_cfg.h"
#include "tests/test_util.h"
#include "train/loop.h"
#include "train/objective_image.h"

int cmd_train(int argc, char **argv);
int cmd_embed(int argc, char **argv);
int cmd_bench(int argc, char **argv);

/* The ops version of the loss (value, terms, gradient by backward) vs torch float64. */
static void check_ops(const float *e, int N, int D, const unsigned char *match, double tau, double lam, int mixup,
                      double loss, double infonce, double entropy, const double *grad) {
    tensor *t = tensor_param("e", 2, SHAPE(N, D));
    tensor_copy_from_host(t, e);
    sscd_stats st;
    tensor *l = sscd_loss(t, match, tau, lam, mixup, &st);
    cr_assert(l, "%s", er_msg());
    double v = tensor_item(l);
    cr_assert(fabs(v - loss) < 2e-5 * fmax(1, fabs(loss)), "loss %.9g vs torch %.9g", v, loss);
    cr_assert(fabs(st.infonce - infonce) < 2e-5 * fmax(1, fabs(infonce)), "infonce %.9g vs %.9g", st.infonce, infonce);
    cr_assert(fabs(st.entropy - entropy) < 2e-5, "entropy %.9g vs %.9g", st.entropy, entropy);
    sscd_stats hs;
    sscd_loss_host(e, N, D, match, tau, lam, mixup, NULL, &hs);
    cr_assert(fabs(st.pos_sim - hs.pos_sim) < 1e-5 && fabs(st.nn_sim - hs.nn_sim) < 1e-5, "similarity statistics");
    cr_assert_eq(backward(l), 0, "%s", er_msg());
    nn_step_end();
    float *g = malloc(sizeof(float) * N * D);
    tensor_to_host(t->grad, g);
    double gmax = 0;
    for (int i = 0; i < N * D; i++) gmax = fmax(gmax, fabs(grad[i]));
    for (int i = 0; i < N * D; i++)
        cr_assert(fabs(g[i] - grad[i]) < 1e-5 * gmax, "grad[%d] %.9g vs torch %.9g (max %.3g)", i, g[i], grad[i], gmax);
    free(g);
    tensor_free(t);
}

Test(endofinder_device, sscd_loss_on_ops_matches_torch) {
    check_ops(REF_IDS_E, REF_IDS_N, REF_IDS_D, REF_IDS_MATCH, REF_IDS_TAU, REF_IDS_LAMBDA, REF_IDS_MIXUP, REF_IDS_LOSS,
              REF_IDS_INFONCE, REF_IDS_ENTROPY, REF_IDS_GRAD);
    check_ops(REF_MULTI_E, REF_MULTI_N, REF_MULTI_D, REF_MULTI_MATCH, REF_MULTI_TAU, REF_MULTI_LAMBDA, REF_MULTI_MIXUP,
              REF_MULTI_LOSS, REF_MULTI_INFONCE, REF_MULTI_ENTROPY, REF_MULTI_GRAD);
    check_ops(REF_MIX_E, REF_MIX_N, REF_MIX_D, REF_MIX_MATCH, REF_MIX_TAU, REF_MIX_LAMBDA, REF_MIX_MIXUP, REF_MIX_LOSS,
              REF_MIX_INFONCE, REF_MIX_ENTROPY, REF_MIX_GRAD);
}

Test(endofinder_device, sscd_loss_small_tau_stays_finite) {
    /* exp(S / 0.005) overflows fp32 without the per-row shift */
    tensor *t = tensor_param("e", 2, SHAPE(REF_IDS_N, REF_IDS_D));
    tensor_copy_from_host(t, REF_IDS_E);
    double ref = sscd_loss_host(REF_IDS_E, REF_IDS_N, REF_IDS_D, REF_IDS_MATCH, 0.005, 5, 0, NULL, NULL);
    tensor *l = sscd_loss(t, REF_IDS_MATCH, 0.005, 5, 0, NULL);
    cr_assert(l, "%s", er_msg());
    double v = tensor_item(l);
    cr_assert(isfinite(v) && fabs(v - ref) < 1e-4 * fabs(ref), "tau 0.005: ops %.9g vs host %.9g", v, ref);
    nn_step_end();
    tensor_free(t);
}

Test(endofinder_device, mae_target_and_patchify_ops_equal_host) {
    const int B = 2, C = 3, S = 12, p = 4, L = 9, P = 48;
    float *img = malloc(sizeof(float) * B * C * S * S), *ref = malloc(sizeof(float) * B * L * P), *got = malloc(sizeof(float) * B * L * P);
    for (int i = 0; i < B * C * S * S; i++) img[i] = (float)sin(0.37 * i) + 0.01f * (i % 7);
    for (int norm = 0; norm <= 1; norm++) {
        mae_target(img, B, C, S, S, p, norm, ref);
        tensor *t = mae_target_t(tensor_upload(DEV_CPU, 4, SHAPE(B, C, S, S), img), p, norm);
        cr_assert(t, "%s", er_msg());
        cr_assert(t->shape[0] == B && t->shape[1] == L && t->shape[2] == P);
        tensor_to_host(t, got);
        for (int i = 0; i < B * L * P; i++)
            cr_assert(norm ? fabs(got[i] - ref[i]) < 2e-5 * fmax(1, fabs(ref[i])) : got[i] == ref[i],
                      "norm_pix %d element %d: ops %.9g host %.9g", norm, i, got[i], ref[i]);
        nn_step_end();
    }
    /* the encoder from an image tensor (op patchify) equals the host-patchify path bit for bit */
    vit_config c;
    cr_assert_eq(vit_config_preset("vit_tiny", &c), 0);
    c.img = S; c.patch = p; c.dim = 16; c.depth = 1; c.heads = 2;
    vit *v = vit_new(&c, 3);
    int32_t keep[2 * 4] = {0, 5, 8, 2, 7, 1, 3, 4};
    float *a = malloc(sizeof(float) * B * 5 * 16), *b = malloc(sizeof(float) * B * 5 * 16);
    NO_GRAD {
        tensor_to_host(vit_forward(v, &NN_EVAL, img, B, keep, 4), a);
        tensor_to_host(vit_forward_t(v, &NN_EVAL, tensor_upload(DEV_CPU, 4, SHAPE(B, C, S, S), img), keep, 4), b);
    }
    nn_step_end();
    cr_assert(memcmp(a, b, sizeof(float) * B * 5 * 16) == 0, "op patchify differs from host patchify");
    vit_free(v);
    free(a); free(b); free(img); free(ref); free(got);
}

Test(endofinder_device, vit_new_on_cpu_equals_vit_new) {
    vit_config c;
    cr_assert_eq(vit_config_preset("vit_tiny", &c), 0);
    c.img = 8; c.patch = 4; c.dim = 16; c.depth = 2; c.heads = 2;
    vit *a = vit_new(&c, 9), *b = vit_new_on(DEV_CPU, &c, 9);
    cr_assert(a && b);
    cr_assert_eq(a->params.n, b->params.n);
    for (int i = 0; i < a->params.n; i++)
        cr_assert(memcmp(a->params.t[i]->data, b->params.t[i]->data, sizeof(float) * tensor_numel(a->params.t[i])) == 0,
                  "%s", a->params.t[i]->name);
    vit_free(a); vit_free(b);
}

/* ---- --device cuda where it cannot run ---- */

static void expect_device_error(int (*cmd)(int, char **), int argc, char **argv) {
    int rc = cmd(argc, argv);
    cr_assert_eq(rc, ER_INPUT, "%s: exit status %d (%s)", argv[0], rc, er_msg());
    cr_assert(strstr(er_msg(), "--device cuda"), "%s: message names the option: %s", argv[0], er_msg());
}

Test(endofinder_device, device_cuda_without_gpu_is_one_input_error) {
    if (backend_get(DEV_CUDA)) cr_skip_test("a CUDA device is usable here");
    const char *d = test_tmpdir();
    char *cfg = path_join(d, "c.cfg");
    /* the manifest does not exist: the device check must come first ("before any work") */
    const char *text = "[data]\nmanifest = /nonexistent/manifest.csv\n";
    cr_assert_eq(write_file_atomic(cfg, text, strlen(text)), 0);
    char *t1[] = {"train", "image", "--config", cfg, "--device", "cuda", "--quiet", NULL};
    expect_device_error(cmd_train, 7, t1);
    char *t2[] = {"train", "image", "--config", cfg, "--set", "train.device=cuda", "--quiet", NULL};
    expect_device_error(cmd_train, 7, t2);
    char *e[] = {"embed", "--config", cfg, "--manifest", "/nonexistent/m.csv", "--out", "/nonexistent/e.safetensors",
                 "--device", "cuda", NULL};
    expect_device_error(cmd_embed, 9, e);
    char *b[] = {"bench", "train", "--model", "vit_large", "--device", "cuda", NULL};
    expect_device_error(cmd_bench, 6, b);
    char *p[] = {"bench", "train", "--precision", "fp16", NULL};
    cr_assert_eq(cmd_bench(4, p), ER_INPUT);
    cr_assert(strstr(er_msg(), "fp16"), "%s", er_msg());
    free(cfg);
}

/* ---- bf16 mixed precision on the CPU ---- */

static void tiny_cfg(image_cfg *c, loop_keys *k, const char *manifest, const char *out, const char *precision) {
    tiny_image_cfg(c, k, manifest, out);
    cfg_set_str(&k->precision, precision);
    c->mix_prob = 0; /* same batches in both precisions */
}

/* Runs `steps` steps, returns the logged loss of each step (malloc'd). */
static double *run(const char *manifest, const char *out, const char *precision, int steps) {
    image_cfg c;
    loop_keys keys;
    tiny_cfg(&c, &keys, manifest, out, precision);
    image_objective *o;
    /* the run's precision, parsed once from train.precision into the run (the forwards' context) */
    cr_assert_eq(image_objective_new(&c, &keys, &o), 0, "%s", er_msg());
    train_objective t = image_objective_iface(o);
    train_loop_config lc = {.steps = steps, .warmup_steps = 1, .lr = 2e-3, .min_lr = 2e-3, .weight_decay = 0.05,
                            .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .clip = 1, .accum = 1, .log_every = 1,
                            .ckpt_every = 1000, .out_dir = out, .config_text = "test"};
    cr_assert_eq(train_loop_run(&lc, &t), 0, "%s", er_msg());
    image_objective_free(o);
    image_cfg_free(&c);
    loop_keys_free(&keys);
    char *p = path_join(out, "log.jsonl"), *text;
    size_t len;
    cr_assert_eq(read_file(p, &text, &len), 0);
    double *loss = calloc(steps, sizeof(double));
    int k = 0;
    for (char *line = text; line && *line && k < steps;) {
        char *nl = strchr(line, '\n');
        json_value v;
        cr_assert_eq(json_parse(line, nl ? (size_t)(nl - line) : strlen(line), p, &v), 0);
        loss[k++] = json_get(&v, "loss")->number;
        json_free(&v);
        line = nl ? nl + 1 : NULL;
    }
    cr_assert_eq(k, steps);
    free(text);
    free(p);
    return loss;
}

Test(endofinder_device, bf16_training_tracks_fp32_and_lowers_the_loss, .timeout = 120) {
    SLOW_TEST();
    const char *d = test_tmpdir();
    synth_config sc = {.scenes = 8, .views = 2, .size = 32, .seed = 3, .threads = 1};
    cr_assert_eq(synth_write_dataset(d, &sc), 0, "%s", er_msg());
    char *man = path_join(d, "manifest.csv"), *o32 = path_join(d, "fp32"), *o16 = path_join(d, "bf16");
    const int steps = 16;
    double *l32 = run(man, o32, "fp32", steps);
    double *l16 = run(man, o16, "bf16", steps);
    /* the same weights and batches: only the roundings differ (bf16 products, activations between
     * the norms and the residual adds, their gradients; nn/layers/autocast.h). Step 1 sees them
     * directly; later steps also carry the drift of the weights (batch of 4 on a tiny model, so
     * single steps are noisy: seen 0.3-3.4 % on steps 2-4 with bf16 activations, up to 39 % on a
     * single later step whose loss is near 0), hence a looser bound there and on the mean */
    double first = 0, last = 0, mean16 = 0, mean32 = 0, maxrel = 0;
    for (int s = 0; s < steps; s++) {
        double rel = fabs(l16[s] - l32[s]) / fabs(l32[s]);
        if (rel > maxrel) maxrel = rel;
        if (s == 0) cr_assert(rel < 0.01, "step 1: bf16 loss %.5f vs fp32 %.5f", l16[s], l32[s]);
        if (s < 4) cr_assert(rel < 0.05, "step %d: bf16 loss %.5f vs fp32 %.5f", s + 1, l16[s], l32[s]);
        mean16 += l16[s] / steps;
        mean32 += l32[s] / steps;
    }
    for (int s = 0; s < 4; s++) { first += l16[s] / 4; last += l16[steps - 4 + s] / 4; }
    cr_log_info("bf16 vs fp32: step 1 %.5f vs %.5f, mean over %d steps %.4f vs %.4f (max single-step difference %.3f); bf16 loss %.4f -> %.4f",
                l16[0], l32[0], steps, mean16, mean32, maxrel, first, last);
    cr_assert(fabs(mean16 - mean32) < 0.05 * mean32, "mean loss bf16 %.4f vs fp32 %.4f", mean16, mean32);
    cr_assert(last < first * 0.8, "bf16 loss did not fall: %.4f -> %.4f", first, last);
    cr_assert(l16[0] != l32[0], "bf16 must change the numbers (is --precision wired?)");
    free(l32); free(l16); free(man); free(o32); free(o16);
}
