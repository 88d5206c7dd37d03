/* cmd_bench.c — `endoret bench train`: ViT training and inference throughput on this machine.
 *
 *   endoret bench train --model vit_small --img 224 --batch 16 --threads 2 [--steps 3] [--json]
 * train_img_per_s: forward + backward + AdamW update of the whole encoder on random images (loss =
 * mean square of the [CLS] output, so every block gets a gradient); infer_img_per_s: the no_grad
 * forward. gflops: achieved training GFLOP/s, counting 3x the forward FLOPs (the usual
 * forward + 2x backward estimate; attention and all linear layers, multiply-add = 2);
 * mfu_vs_sgemm: that rate divided by the sgemm GFLOP/s measured in the same run on a square
 * 1024^3 product with the same threads (the ceiling any ViT step could reach here). */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/gemm.h"
#include "nn/args.h"
#include "nn/autograd.h"
#include "nn/base.h"
#include "nn/ops.h"
#include "nn/optim.h"
#include "nn/rng.h"
#include "nn/vit.h"
#ifdef ENDORET_CUDA
#include "kernels/cuda/cuda_backend.h"
#endif

static double sgemm_ceiling(int reps) {
    const int n = 1024;
    float *a = xmalloc_aligned((size_t)n * n * 4), *b = xmalloc_aligned((size_t)n * n * 4), *c = xmalloc_aligned((size_t)n * n * 4);
    for (size_t i = 0; i < (size_t)n * n; i++) { a[i] = (float)(i % 13) * 0.1f; b[i] = (float)(i % 7) * 0.1f; }
    sgemm(0, 0, n, n, n, 1, a, n, b, n, 0, c, n); /* warm-up */
    double best = 0;
    for (int r = 0; r < reps; r++) {
        double t = now_seconds();
        sgemm(0, 0, n, n, n, 1, a, n, b, n, 0, c, n);
        double g = 2.0 * n * n * n / (now_seconds() - t) / 1e9;
        if (g > best) best = g;
    }
    free(a); free(b); free(c);
    return best;
}

static int bench_train(int argc, char **argv) {
    const char *model = "vit_small";
    int img = 224, batch = 16, threads = 0, steps = 3, json = 0, patch = 0;
    arg_spec specs[] = {
        {"model", ARG_STR, &model, "vit_tiny | vit_small | vit_base | vit_large (+ _patch14)"},
        {"img", ARG_INT, &img, "image side"},
        {"patch", ARG_INT, &patch, "patch size (0 = the model's)"},
        {"batch", ARG_INT, &batch, "images per step"},
        {"threads", ARG_INT, &threads, "OpenMP threads (0 = default)"},
        {"steps", ARG_INT, &steps, "timed steps (after one warm-up step)"},
        {"json", ARG_FLAG, &json, "one JSON line"},
    };
    int rc = args_parse(argc, argv, specs, 7, "endoret bench train --model vit_small --img 224 --batch 16 --threads 2 [--json]", NULL, NULL);
    if (rc == ARGS_HELP) return ER_OK;
    if (rc) return rc;
    if (batch < 1 || steps < 1) return er_fail(ER_INPUT, "bench train: --batch and --steps must be >= 1");
    if (threads > 0) omp_set_num_threads(threads);
    vit_config c;
    if ((rc = vit_config_preset(model, &c))) return rc;
    c.img = img;
    if (patch > 0) c.patch = patch;
    vit *v = vit_new(&c, 1);
    if (!v) return ER_INPUT;
    float *x = xmalloc((size_t)batch * 3 * img * img * sizeof(float));
    rng_t r = rng_make(1, rng_stream(RNG_SAMPLING, 0, 0));
    for (size_t i = 0; i < (size_t)batch * 3 * img * img; i++) x[i] = rng_normal(&r);
    optim_config oc = {.kind = OPTIM_ADAMW, .lr = 1e-4, .weight_decay = 0.05, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8};
    optimizer *opt = optim_new(&oc, &v->params);
    if (!opt) { vit_free(v); free(x); return ER_INPUT; }
    double t_train = 0;
    for (int s = 0; s <= steps && !rc; s++) {
        double t0 = now_seconds();
        tensor *cls = vit_cls(v, x, batch);
        tensor *loss = op_mean_all(op_mul(cls, cls));
        if (!loss) { rc = ER_RUNTIME; break; }
        rc = backward(loss);
        nn_step_end();
        if (!rc) rc = optim_step(opt);
        optim_zero_grad(opt);
        if (s > 0) t_train += now_seconds() - t0;
    }
    double t_inf = 0;
    for (int s = 0; s <= steps && !rc; s++) {
        double t0 = now_seconds();
        NO_GRAD {
            tensor *cls = vit_cls(v, x, batch);
            if (!cls) rc = ER_RUNTIME;
            else (void)tensor_item(cls);
        }
        nn_step_end();
        if (s > 0) t_inf += now_seconds() - t0;
    }
    int T = 1 + c.registers + (img / c.patch) * (img / c.patch);
    double fwd = vit_forward_flops(&c, batch, T);
    double train_ips = steps * batch / t_train, inf_ips = steps * batch / t_inf;
    double gflops = 3 * fwd * steps / t_train / 1e9, inf_gflops = fwd * steps / t_inf / 1e9;
    double ceiling = rc ? 0 : sgemm_ceiling(3);
    int nthreads = omp_get_max_threads();
    if (!rc) {
        if (json)
            printf("{\"bench\": \"train\", \"model\": \"%s\", \"img\": %d, \"patch\": %d, \"batch\": %d, \"threads\": %d, "
                   "\"params\": %lld, \"train_img_per_s\": %.3f, \"infer_img_per_s\": %.3f, \"gflops\": %.2f, "
                   "\"infer_gflops\": %.2f, \"sgemm_gflops\": %.2f, \"mfu_vs_sgemm\": %.4f, \"infer_mfu_vs_sgemm\": %.4f, "
                   "\"forward_gflop_per_img\": %.4f, \"gemm_kernel\": \"%s\"}\n",
                   model, img, c.patch, batch, nthreads, (long long)params_numel(&v->params), train_ips, inf_ips,
                   gflops, inf_gflops, ceiling, gflops / ceiling, inf_gflops / ceiling, fwd / batch / 1e9, sgemm_kernel_name());
        else
            printf("bench train: %s %dx%d patch %d, batch %d, %d threads, %lld parameters\n"
                   "  train (fwd+bwd+AdamW): %.2f img/s  %.1f GFLOP/s (%.0f%% of sgemm %.1f GFLOP/s)\n"
                   "  infer (no_grad fwd):   %.2f img/s  %.1f GFLOP/s (%.0f%% of sgemm)\n"
                   "  forward: %.3f GFLOP/image (training counted as 3x)\n",
                   model, img, img, c.patch, batch, nthreads, (long long)params_numel(&v->params), train_ips, gflops,
                   100 * gflops / ceiling, ceiling, inf_ips, inf_gflops, 100 * inf_gflops / ceiling, fwd / batch / 1e9);
    }
    optim_free(opt);
    vit_free(v);
    free(x);
    return rc;
}

int cmd_bench(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help")) {
        printf("usage: endoret bench train --model vit_small --img 224 --batch 16 --threads 2 [--json]\n"
               "       endoret bench cuda [options]   (GPU GEMM/attention figures; CUDA builds only)\n");
        return argc < 2 ? ER_INPUT : ER_OK;
    }
    if (!strcmp(argv[1], "train")) return bench_train(argc - 1, argv + 1);
    if (!strcmp(argv[1], "cuda")) {
#ifdef ENDORET_CUDA
        return cuda_bench_main(argc - 1, argv + 1);
#else
        return er_fail(ER_INPUT, "bench cuda: this build has no CUDA backend (rebuild with make CUDA=1)");
#endif
    }
    return er_fail(ER_INPUT, "bench: unknown benchmark '%s' (train, cuda; gemm and search have their own)", argv[1]);
}
