/* The optimizer and checkpoints on CUDA parameters: AdamW / SGD-Nesterov steps and clipping on the
 * GPU against the same steps on the CPU, and a save/load round trip of device tensors. Compiles in
 * every build; skips with a reason without CUDA or without a GPU. */
#include <math.h>
#include <string.h>

#include "checkpoints/checkpoint.h"
#include "kernels/backend.h"
#include "nn/base/base.h"
#include "nn/init.h"
#include "nn/optim.h"
#include "tests/test_util.h"

/* backend_get explains a NULL in er_msg(): not built with CUDA, no driver, or no GPU. */
static void require_gpu(void) {
    if (!backend_get(DEV_CUDA)) cr_skip_test("no CUDA device: %s", er_msg());
}

enum { NP = 3 };
static const int64_t SHAPES[NP][2] = {{37, 19}, {19, 1}, {100003, 1}};
static const char *NAMES[NP] = {"blocks.0.mlp.fc1.weight", "blocks.0.mlp.fc1.bias", "head.weight"};

static void build(param_list *pl, int device) {
    for (int i = 0; i < NP; i++) {
        int nd = SHAPES[i][1] == 1 ? 1 : 2;
        tensor *p = tensor_param_on(device, NAMES[i], nd, SHAPES[i]);
        int64_t n = tensor_numel(p);
        float *h = xmalloc(sizeof(float) * (size_t)n);
        rng_t r = rng_make(5, rng_stream(RNG_INIT, (uint32_t)i, 0));
        init_trunc_normal(h, n, 0, 0.5f, -1, 1, &r);
        tensor_copy_from_host(p, h);
        free(h);
        params_add(pl, p);
    }
}

static void set_grads(param_list *pl, int step) {
    for (int i = 0; i < pl->n; i++) {
        int64_t n = tensor_numel(pl->t[i]);
        float *h = xmalloc(sizeof(float) * (size_t)n);
        for (int64_t j = 0; j < n; j++) h[j] = (float)sin(0.37 * (double)j + step + i);
        tensor_copy_from_host(pl->t[i]->grad, h);
        free(h);
    }
}

static double max_rel_diff(const param_list *a, const param_list *b) {
    double worst = 0;
    for (int i = 0; i < a->n; i++) {
        int64_t n = tensor_numel(a->t[i]);
        float *x = xmalloc(sizeof(float) * (size_t)n), *y = xmalloc(sizeof(float) * (size_t)n);
        tensor_to_host(a->t[i], x);
        tensor_to_host(b->t[i], y);
        for (int64_t j = 0; j < n; j++) worst = fmax(worst, fabs(x[j] - y[j]) / fmax(1e-3, fabs(y[j])));
        free(x);
        free(y);
    }
    return worst;
}

static void parity(optim_config cfg) {
    require_gpu();
    param_list cpu = {0}, gpu = {0};
    build(&cpu, DEV_CPU);
    build(&gpu, DEV_CUDA);
    optimizer *oc = optim_new(&cfg, &cpu), *og = optim_new(&cfg, &gpu);
    cr_assert_not_null(og, "%s", er_msg());
    for (int t = 0; t < 5; t++) {
        set_grads(&cpu, t);
        set_grads(&gpu, t);
        double nc = optim_clip_grad_norm(oc, 10.0), ng = optim_clip_grad_norm(og, 10.0);
        cr_expect(fabs(nc - ng) <= 1e-9 * nc, "step %d: norm cpu %.17g gpu %.17g", t, nc, ng);
        cr_assert_eq(optim_step(oc), ER_OK);
        cr_assert_eq(optim_step(og), ER_OK, "%s", er_msg());
        optim_zero_grad(oc);
        optim_zero_grad(og);
    }
    double d = max_rel_diff(&gpu, &cpu);
    cr_expect_lt(d, 1e-5, "gpu vs cpu parameters after 5 steps: max rel diff %g", d);

    /* checkpoint of device tensors, loaded back into the CPU model: same state */
    char *path = path_join(test_tmpdir(), "gpu.safetensors");
    ckpt_state sg = {.params = &gpu, .opt = og, .step = 5};
    cr_assert_eq(ckpt_save(path, &sg), ER_OK, "%s", er_msg());
    param_list back = {0};
    build(&back, DEV_CPU);
    optimizer *ob = optim_new(&cfg, &back);
    ckpt_state sb = {.params = &back, .opt = ob};
    cr_assert_eq(ckpt_load(path, &sb, CKPT_STRICT, NULL), ER_OK, "%s", er_msg());
    cr_expect_eq(max_rel_diff(&gpu, &back), 0.0);
    cr_expect_eq(ob->step, 5);
    optim_free(oc); optim_free(og); optim_free(ob);
    params_free(&cpu); params_free(&gpu); params_free(&back);
    free(path);
}

Test(optim_cuda, adamw_gpu_matches_cpu) {
    parity((optim_config){.kind = OPTIM_ADAMW, .lr = 0.01, .weight_decay = 0.05});
}

Test(optim_cuda, sgd_nesterov_gpu_matches_cpu) {
    parity((optim_config){.kind = OPTIM_SGD, .lr = 0.05, .momentum = 0.9, .nesterov = 1, .weight_decay = 1e-3});
}
