/* cmd_bench.c — `endoret bench train`: training and inference throughput of a registered model
 * (nn/models/model.h) on this machine.
 *
 *   endoret bench train --model vit_small --img 224 --batch 16 --threads 2 [--steps 3] [--json]
 *       [--device cpu|cuda|cuda:N] [--precision fp32|bf16] [--objective cls|mae] [--mask-ratio 0.75]
 * objective cls (default): forward + backward + AdamW update of the whole model on random images
 * (loss = mean of the model's descriptor, so every block gets a gradient). objective mae (ViT
 * models): one MAE pre-training step as the MAE paper / torch_vit_bench.py (75 % random masking, the encoder on the
 * kept patches, an 8-block 512-wide decoder, masked-patch MSE on norm_pix targets, AdamW).
 * infer_img_per_s: the no_grad encoder forward on full images. gflops: achieved training GFLOP/s,
 * counting 3x the forward FLOPs (forward + 2x backward; attention and all linear layers,
 * multiply-add = 2). mfu: that rate divided by a square GEMM measured in the same run with the same
 * precision on the same device (sgemm 1024^3 on the CPU, cuBLAS 8192^3 on CUDA, on bf16 operands in
 * bf16 mode: cuda_gemm_peak_bf16): the ceiling any
 * ViT step could reach there. --profile: the timed training steps run with the op table's timing
 * wrappers (kernels/profile.h) and the per-op / per-category table follows the figures. */
#include <math.h>
#include <omp.h>

#include "cli/cmd_bench_scene.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/gemm.h"
#include "cli/common_opts.h"
#include "nn/models/vit_memory.h"
#include "nn/base/memory.h"
#include "nn/arena.h"
#include "nn/autograd.h"
#include "nn/base/base.h"
#include "nn/models/mae.h"
#include "nn/models/model.h"
#include "nn/models/vit_model.h"
#include "nn/ops.h"
#include "nn/optim.h"
#include "nn/precision.h"
#include "nn/base/rng.h"
#include "kernels/bench_cuda.h"
#include "kernels/profile.h"
#include "train/host_batch.h"

#pragma weak cuda_bench_run /* NULL in a build without the CUDA backend */
#pragma weak cuda_probe_run
#pragma weak cuda_gemm_peak_bf16

/* Best GFLOP/s of a square n^3 product through the device's GEMM in the given precision. */
static double gemm_ceiling(int device, int prec, int reps) {
    const int compute = er_gemm_compute_of(prec);
    /* on a GPU in bf16 mode: cuBLAS on bf16 operands, the rate PyTorch's bf16 matmul reaches */
    if (device != DEV_CPU && compute == GEMM_COMPUTE_BF16 && cuda_gemm_peak_bf16) return 1e3 * cuda_gemm_peak_bf16(reps);
    const er_backend *be = backend_get(device);
    const int n = device == DEV_CPU ? 1024 : 8192;
    size_t bytes = (size_t)n * n * sizeof(float);
    float *a = be->alloc(bytes), *b = be->alloc(bytes), *c = be->alloc(bytes);
    be->fill(a, (int64_t)n * n, 0.01f);
    be->fill(b, (int64_t)n * n, 0.02f);
    float sink;
    double best = 0;
    for (int r = 0; r <= reps; r++) {
        double t = now_seconds();
        be->gemm_batched(compute, 0, 0, n, n, n, 1, a, n, 0, b, n, 0, 0, c, n, 0, 1);
        be->download(&sink, c, sizeof sink); /* waits for the product */
        double g = 2.0 * n * n * n / (now_seconds() - t) / 1e9;
        if (r > 0 && g > best) best = g; /* r = 0 warms up */
    }
    be->free(a); be->free(b); be->free(c);
    return best;
}

/* Forward FLOPs of one pre-norm block over T tokens of width D (multiply-add = 2). */
static double block_flops(double T, double D, double hid) {
    return 2.0 * T * D * 3 * D + 2.0 * 2 * T * T * D + 2.0 * T * D * D + 2.0 * 2 * T * D * hid;
}

enum { DEC_DIM = 512, DEC_DEPTH = 8, DEC_HEADS = 16 }; /* MAE's decoder for ViT-B/L/H */

/* The device's wait count in the text report (a step that waits once can run ahead of the GPU). */
static const char *waits_line(double per_step) {
    static char buf[96];
    snprintf(buf, sizeof buf, "\n  host waits for the device: %.2f per training step", per_step);
    return buf;
}

static int bench_train_sets(int argc, char **argv, char **user_sets, int nuser) {
    char *set_help = NULL;
    const char *arch = "vit_small", *device_s = "cpu", *precision = "fp32", *objective = "cls";
    int img = 224, batch = 16, threads = 0, steps = 3, json = 0, patch = 0, share = 0, profile = 0, resident = 0;
    double mask_ratio = 0.75;
    arg_spec specs[] = {
        {"model", ARG_STR, &arch, "a registered model.arch: vit_tiny | vit_small | vit_base | vit_large (+ _patch14)"},
        {"img", ARG_INT, &img, "image side"},
        {"patch", ARG_INT, &patch, "ViT patch size (0 = the model's)"},
        {"batch", ARG_INT, &batch, "images per step (scenes with --objective scene: at least 2)", "[1, 4096]"},
        OPT_THREADS(&threads),
        {"steps", ARG_INT, &steps, "timed steps (training: after two warm-up steps; inference: after one)", "[1, 100000]"},
        OPT_JSON(&json),
        OPT_DEVICE(&device_s),
        OPT_PRECISION(&precision),
        {"objective", ARG_STR, &objective, "cls (any model: forward + backward of the mean of its descriptor), mae (MAE "
                                           "pre-training step) or scene (EndoFinder-Scene steps, --batch scenes)", "cls|mae|scene"},
        {"mask-ratio", ARG_DOUBLE, &mask_ratio, "MAE masking ratio (objective mae)", "(0, 1)"},
        {"share-views", ARG_FLAG, &share, "objective scene: each view encoded once per step"},
        {"profile", ARG_FLAG, &profile, "time every kernel of the timed training steps: a table per phase and category (JSON with --json)"},
        OPT_SET(&set_help),
        {"resident", ARG_FLAG, &resident, "objective mae: the batch uploaded once and kept on the device, as PyTorch's bench "
                                          "(bench/torch_vit_bench.py) keeps its; default: uploaded every step from page-locked "
                                          "memory, as a training run feeds it"},
    };
    int rc = args_parse(argc, argv, specs, sizeof specs / sizeof *specs,
                        "endoret bench train --model vit_small --img 224 --batch 16 --threads 2 [--json]\n"
                        "                    [--device cpu|cuda|cuda:N] [--precision fp32|bf16] [--objective cls|mae] [--profile]\n"
                        "                    [--resident] [--set model.KEY=VALUE ...]", NULL, NULL);
    if (rc == ARGS_HELP) return ER_OK;
    if (rc) return rc;
    int device, prec;
    if ((rc = er_device_parse(device_s, &device)) || (rc = er_precision_parse(precision, &prec))) return rc; /* before any work */
    int mae = !strcmp(objective, "mae");
    if (resident && !mae) return er_fail(ER_INPUT, "bench train: --resident is for --objective mae (cls uploads inside the model's descriptor)");
    if (!strcmp(objective, "scene")) {
        if (nuser) return er_fail(ER_INPUT, "bench train: --set is for cls and mae (the scene bench builds its own models)");
        if (batch < 2) return er_fail(ER_INPUT, "bench train: --objective scene needs --batch >= 2 scenes");
        if (threads > 0) omp_set_num_threads(threads);
        return bench_train_scene(arch, img, patch, batch, steps, share, json, device_s, precision);
    }
    if (threads > 0) omp_set_num_threads(threads);
    char set_img[32], set_patch[32], set_seed[] = "train.seed=1", *sets[64] = {set_img, set_seed, set_patch};
    snprintf(set_img, sizeof set_img, "model.img=%d", img);
    snprintf(set_patch, sizeof set_patch, "model.patch=%d", patch);
    int nsets = patch > 0 ? 3 : 2;
    if (nuser > 64 - nsets) return er_fail(ER_INPUT, "bench train: at most %d --set", 64 - nsets);
    for (int i = 0; i < nuser; i++) sets[nsets++] = user_sets[i]; /* e.g. model.layout=nhwc */
    model *m = NULL;
    if ((rc = model_create(arch, NULL, sets, nsets, &m))) return rc;
    if ((rc = model_to_device(m, device))) { model_free(m); return rc; }
    vit *v = vit_model_vit(m); /* the MAE step needs the encoder's masked forward */
    if (mae && !v) { model_free(m); return er_fail(ER_INPUT, "bench train: --objective mae needs a ViT, %s is not", arch); }
    if (v && device == DEV_CPU) { /* a step that cannot fit is refused before it is tried (img 4096 aborted) */
        double np = (double)params_numel(m->params), T = 1 + v->cfg.registers + v->L;
        mem_estimate e = {0};
        e.params = 4 * np;
        e.grads = 4 * np;
        e.optimizer = 8 * np;
        e.activations = vit_blocks_train_bytes(v->cfg.dim, v->cfg.depth, v->cfg.heads, v->cfg.mlp_ratio, batch, T) +
                        4.0 * (double)backend_get(DEV_CPU)->attention_workspace(er_gemm_compute_of(prec), batch, v->cfg.heads, (int)T, (int)T,
                                                                                 v->cfg.dim / v->cfg.heads);
        e.data = 4.0 * batch * 3 * img * (double)img;
        if ((rc = mem_check(&e, "bench train", "--batch, --img or --model"))) { model_free(m); return rc; }
    }
    param_list all = {0};
    params_add_all(&all, m->params);
    mae_decoder dec = {0};
    int L = v ? v->L : 0, K = mae ? mae_len_keep(L, mask_ratio) : L;
    if (mae && (rc = mae_decoder_init_on(device, &dec, &v->cfg, DEC_DIM, DEC_DEPTH, DEC_HEADS, 2, &all))) goto out_model;
    /* page-locked on a GPU, as a loader's staging buffer (backend.h): the per-step upload is DMA */
    const er_backend *be = backend_get(device);
    float *x = be->host_alloc((size_t)batch * 3 * img * img * sizeof(float));
    if (!x) { rc = er_fail(ER_RUNTIME, "bench train: no host buffer for the batch"); goto out_model; }
    tensor *x_dev = NULL; /* --resident */
    rng_t r = rng_make(1, rng_stream(RNG_SAMPLING, 0, 0));
    for (size_t i = 0; i < (size_t)batch * 3 * img * img; i++) x[i] = rng_normal(&r);
    int32_t *shuffle = xmalloc((size_t)batch * L * sizeof(int32_t)), *restore = xmalloc((size_t)batch * L * sizeof(int32_t));
    int32_t *keep = xmalloc((size_t)batch * L * sizeof(int32_t));
    float *mask = xmalloc((size_t)batch * L * sizeof(float)), *desc = xmalloc((size_t)batch * m->dim * sizeof(float));
    optim_config oc = {.kind = OPTIM_ADAMW, .lr = 1e-4, .weight_decay = 0.05, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8,
                       .bf16_weights = prec == ER_PREC_BF16};
    optimizer *opt = optim_new(&oc, &all);
    if (!opt) { rc = ER_INPUT; goto out; }
    double t_train = 0;
    size_t arena_fwd = 0, arena_step = 0;
    if (resident) { /* the batch on the device for every step (long-lived, not the arena's) */
        if (!(x_dev = tensor_new_on(device, 4, SHAPE(batch, 3, img, img)))) { rc = ER_RUNTIME; goto out; }
        tensor_copy_from_host(x_dev, x);
    }
    /* two untimed steps: the first sizes the activation arena (chunks chained, then merged into one),
     * the second touches the merged chunk's fresh pages; the timed steps are the steady state */
    const int warm = 2;
    uint64_t waits0 = 0; /* the host's waits for the device over the timed steps (backend.h host_waits) */
    for (int s = 0; s < steps + warm && !rc; s++) {
        if (s == warm) waits0 = be->host_waits();
        if (profile && s == warm) prof_start(); /* the timed steps only */
        double t0 = now_seconds();
        nn_ctx ctx = nn_ctx_train(1, s, 0, prec);
        tensor *loss;
        if (mae) { /* masking is host work of the step, as in a real run */
            mae_masking(batch, L, K, NULL, NULL, 1, (uint64_t)s, shuffle, restore, mask);
            for (int b = 0; b < batch; b++) memcpy(keep + (size_t)b * K, shuffle + (size_t)b * L, K * sizeof(int32_t));
            /* as a trainer uploads its batch: from the page-locked buffer, no wait */
            tensor *xt = x_dev ? x_dev : host_upload_pinned(device, x, 4, SHAPE(batch, 3, img, img));
            if (!xt) { rc = ER_RUNTIME; break; }
            tensor *latent = vit_forward_t(v, &ctx, xt, keep, K);
            tensor *pred = mae_decoder_forward(&dec, &ctx, latent, v->cfg.registers, restore);
            loss = mae_loss_t(pred, mae_target_t(xt, v->cfg.patch, 1), mask);
        } else {
            loss = op_mean_all(m->arch->descriptor(m, &ctx, x, batch));
        }
        if (!loss) { rc = ER_RUNTIME; break; }
        size_t fwd_used = arena_used(arena_default(device));
        rc = backward(loss);
        size_t step_used = arena_used(arena_default(device));
        if (s >= warm) { /* the step's activation memory: the arena's bump high-water (arena.h) */
            arena_fwd = fwd_used > arena_fwd ? fwd_used : arena_fwd;
            arena_step = step_used > arena_step ? step_used : arena_step;
        }
        nn_step_end();
        if (!rc) rc = optim_step(opt);
        optim_zero_grad(opt);
        if (!rc) rc = er_device_check(device, "bench train"); /* also waits for the step's kernels */
        if (s >= warm) t_train += now_seconds() - t0;
    }
    prof_stop();
    const double waits_per_step = (double)(be->host_waits() - waits0) / steps;
    /* device memory after training (before inference adds its own): the arena's chunks, and on a
     * GPU the caching allocator's most-ever handed out and what it holds free */
    size_t arena_reserved = arena_capacity(arena_default(device));
    size_t dev_peak, dev_cached;
    be->memory_stats(&dev_peak, &dev_cached);
    double t_inf = 0;
    /* inference as embed and serve run it: the trained weights packed once (model_prepack) */
    model_set_precision(m, prec);
    if (!rc) rc = model_prepack(m);
    for (int s = 0; s <= steps && !rc; s++) {
        double t0 = now_seconds();
        rc = model_embed(m, x, batch, desc); /* downloads the descriptors: waits for the forward */
        if (s > 0) t_inf += now_seconds() - t0;
    }
    double fwd_full = m->arch->forward_flops(m, batch), fwd = fwd_full;
    if (mae) {
        const vit_config *c = &v->cfg;
        double D = c->dim, Td = 1 + L, P = (double)c->patch * c->patch * c->in_chans;
        fwd = vit_forward_flops(c, batch, 1 + c->registers + K)           /* encoder on the kept patches */
            + 2.0 * batch * (L - K) * P * D                                /* every patch is embedded */
            + batch * (2.0 * (1 + c->registers + K) * D * DEC_DIM          /* decoder_embed */
                       + DEC_DEPTH * block_flops(Td, DEC_DIM, 4.0 * DEC_DIM) + 2.0 * Td * DEC_DIM * P);
    }
    double train_ips = steps * batch / t_train, inf_ips = steps * batch / t_inf;
    double gflops = 3 * fwd * steps / t_train / 1e9, inf_gflops = fwd_full * steps / t_inf / 1e9;
    double ceiling = rc ? 0 : gemm_ceiling(device, prec, 10); /* best of 10: one preempted rep must not set it */
    if (!rc) rc = er_device_check(device, "bench train");
    int nthreads = omp_get_max_threads();
    const char *kernel = device == DEV_CPU ? sgemm_kernel_name(prec == ER_PREC_BF16 ? SGEMM_BF16 : SGEMM_FP32)
                                           : "cublas";
    if (!rc) {
        if (json)
            printf("{\"bench\": \"train\", \"model\": \"%s\", \"objective\": \"%s\", \"device\": \"%s\", \"precision\": \"%s\", "
                   "\"img\": %d, \"patch\": %d, \"batch\": %d, \"threads\": %d, "
                   "\"params\": %lld, \"train_img_per_s\": %.3f, \"infer_img_per_s\": %.3f, \"gflops\": %.2f, "
                   "\"infer_gflops\": %.2f, \"gemm_peak_gflops\": %.2f, \"sgemm_gflops\": %.2f, \"mfu\": %.4f, \"mfu_vs_sgemm\": %.4f, "
                   "\"infer_mfu_vs_sgemm\": %.4f, \"forward_gflop_per_img\": %.4f, \"gemm_kernel\": \"%s\", "
                   "\"arena_forward_mib\": %.1f, \"arena_step_mib\": %.1f, \"arena_reserved_mib\": %.1f, "
                   "\"device_peak_mib\": %.1f, \"device_cached_mib\": %.1f, \"arena_reserved_after_infer_mib\": %.1f, "
                   "\"resident\": %d, \"host_waits_per_step\": %.2f}\n",
                   arch, objective, device_s, precision, img, v ? v->cfg.patch : 0, batch, nthreads, (long long)params_numel(&all), train_ips,
                   inf_ips, gflops, inf_gflops, ceiling, ceiling, gflops / ceiling, gflops / ceiling, inf_gflops / ceiling,
                   fwd / batch / 1e9, kernel, arena_fwd / 1048576.0, arena_step / 1048576.0,
                   arena_reserved / 1048576.0, dev_peak / 1048576.0, dev_cached / 1048576.0,
                   arena_capacity(arena_default(device)) / 1048576.0, resident, waits_per_step);
        else
            printf("bench train: %s %dx%d patch %d, objective %s%s, batch %d, %s/%s, %d threads, %lld parameters\n"
                   "  train (fwd+bwd+AdamW): %.2f img/s  %.1f GFLOP/s (MFU %.0f%% of a %s %d^3 GEMM at %.1f GFLOP/s)\n"
                   "  infer (no_grad fwd):   %.2f img/s  %.1f GFLOP/s (%.0f%%)\n"
                   "  forward: %.3f GFLOP/image (training counted as 3x)%s\n",
                   arch, img, img, v ? v->cfg.patch : 0, objective,
                   mae ? (resident ? " (75% masking, 8x512 decoder; batch resident on the device)" : " (75% masking, 8x512 decoder)") : "",
                   batch, device_s, precision,
                   nthreads, (long long)params_numel(&all), train_ips, gflops, 100 * gflops / ceiling, kernel,
                   device == DEV_CPU ? 1024 : 8192, ceiling, inf_ips, inf_gflops, 100 * inf_gflops / ceiling, fwd / batch / 1e9,
                   device == DEV_CPU ? "" : waits_line(waits_per_step));
        if (profile) prof_report(stdout, steps, t_train, json);
    }
out:
    tensor_free(x_dev);
    optim_free(opt);
    be->host_free(x);
    free(shuffle); free(restore); free(keep); free(mask); free(desc);
out_model:
    for (int i = m->params->n; i < all.n; i++) tensor_free(all.t[i]);
    free(all.t);
    mae_decoder_free(&dec);
    model_free(m);
    return rc;
}

static void print_cuda_row(const cuda_bench_row *r, void *json_flag) {
    int json = *(const int *)json_flag;
    if (!strcmp(r->kind, "device")) {
        if (!json) printf("device: %s\n", r->device);
    } else if (!strcmp(r->kind, "versions")) {
        if (json) printf("{\"bench\":\"probe\",\"versions\":\"%s\"}\n", r->device);
        else printf("libraries: %s\n", r->device);
    } else if (!strcmp(r->kind, "probe_gemm")) {
        if (json)
            printf("{\"bench\":\"probe_gemm\",\"model\":\"%s\",\"layer\":\"%s\",\"m\":%d,\"n\":%d,\"k\":%d,\"precision\":\"%s\",\"result\":\"%s\"}\n",
                   r->model, r->layer, r->m, r->n, r->k, r->precision, r->pass);
        else
            printf("gemm_ex  %-15s %-24s [%6d x %5d x %5d] %s: %s\n", r->model, r->layer, r->m, r->n, r->k, r->precision, r->pass);
    } else if (!strcmp(r->kind, "probe_attention")) {
        if (json)
            printf("{\"bench\":\"probe_attention\",\"model\":\"%s\",\"B\":%d,\"H\":%d,\"T\":%d,\"D\":%d,\"precision\":\"%s\",\"path\":\"%s\"}\n",
                   r->model, r->B, r->H, r->T, r->D, r->precision, r->pass);
        else
            printf("attention %-15s B=%d H=%d T=%d D=%d %s: %s\n", r->model, r->B, r->H, r->T, r->D, r->precision, r->pass);
    } else if (!strcmp(r->kind, "probe_conv")) {
        if (json)
            printf("{\"bench\":\"probe_conv\",\"model\":\"%s\",\"layer\":\"%s\",\"N\":%d,\"pass\":\"%s\",\"precision\":\"%s\",\"result\":\"%s\"}\n",
                   r->model, r->layer, r->B, r->T ? "backward" : "forward", r->precision, r->pass);
        else
            printf("conv     %-15s %-28s N=%d %-8s %s: %s\n", r->model, r->layer, r->B, r->T ? "backward" : "forward",
                   r->precision, r->pass);
    } else if (!strcmp(r->kind, "gemm_peak")) {
        if (json) printf("{\"bench\":\"gemm_peak\",\"precision\":\"%s\",\"m\":%d,\"tflops\":%.2f}\n", r->precision, r->m, r->tflops);
        else printf("cuBLAS square %d^3 %-4s: %7.1f TFLOP/s (reference peak)\n", r->m, r->precision, r->tflops);
    } else if (!strcmp(r->kind, "gemm")) {
        if (json)
            printf("{\"bench\":\"gemm\",\"model\":\"%s\",\"layer\":\"%s\",\"m\":%d,\"n\":%d,\"k\":%d,\"precision\":\"%s\",\"ms\":%.4f,\"tflops\":%.2f,\"of_peak\":%.3f}\n",
                   r->model, r->layer, r->m, r->n, r->k, r->precision, r->ms, r->tflops, r->of_peak);
        else
            printf("%s %-4s [%6d x %5d x %5d] %-4s: %8.3f ms %7.1f TFLOP/s (%3.0f%% of cuBLAS peak)\n", r->model,
                   r->layer, r->m, r->n, r->k, r->precision, r->ms, r->tflops, 100.0 * r->of_peak);
    } else if (!strcmp(r->kind, "gemm_ex")) {
        if (json)
            printf("{\"bench\":\"gemm_ex\",\"model\":\"%s\",\"layer\":\"%s\",\"path\":\"%s\",\"m\":%d,\"n\":%d,\"k\":%d,\"ms\":%.4f,\"tflops\":%.2f}\n",
                   r->model, r->layer, r->pass, r->m, r->n, r->k, r->ms, r->tflops);
        else
            printf("%s %-4s [%6d x %5d x %5d] bf16 %-16s: %8.3f ms %7.1f TFLOP/s\n", r->model, r->layer, r->m, r->n, r->k,
                   r->pass, r->ms, r->tflops);
    } else if (json) {
        printf("{\"bench\":\"attention\",\"model\":\"%s\",\"path\":\"%s\",\"B\":%d,\"H\":%d,\"T\":%d,\"D\":%d,\"pass\":\"%s\",\"ms\":%.4f,\"tflops\":%.2f}\n",
               r->model, r->layer, r->B, r->H, r->T, r->D, r->pass, r->ms, r->tflops);
    } else {
        printf("%s attention %-5s %-8s B=%d H=%d T=%d D=%d: %8.3f ms %6.1f TFLOP/s\n", r->model, r->layer, r->pass,
               r->B, r->H, r->T, r->D, r->ms, r->tflops);
    }
}

/* `endoret bench cuda`: GPU GEMM / attention figures (kernels/bench_cuda.h); argv[0] is "cuda". */
/* --set may repeat: pulled out of argv first (cli_split_sets), handed to the model's keys */
static int bench_train(int argc, char **argv) {
    char **rest, **sets;
    int nrest, nsets, rc = cli_split_sets(argc, argv, &rest, &nrest, &sets, &nsets);
    if (!rc) rc = bench_train_sets(nrest, rest, sets, nsets);
    free(rest);
    free(sets);
    return rc;
}

static int bench_cuda(int argc, char **argv) {
    int iters = 20, batch_b = 64, batch_l = 32, json = 0, probe = 0;
    arg_spec specs[] = {
        {"iters", ARG_INT, &iters, "timed repetitions per measurement", "[1, inf)"},
        {"batch-b", ARG_INT, &batch_b, "images per batch for the ViT-B/16 shapes", "[1, inf)"},
        {"batch-l", ARG_INT, &batch_l, "images per batch for the ViT-L/16 shapes", "[1, inf)"},
        OPT_JSON(&json),
        {"probe", ARG_FLAG, &probe, "no timing: library versions, cuBLASLt's answer for every model GEMM and the attention path per head shape, cuDNN's for every ResNet-50 channels-last bf16 convolution"},
    };
    int rc = args_parse(argc, argv, specs, 5, "endoret bench cuda [options]", NULL, NULL);
    if (rc == ARGS_HELP) return 0;
    if (rc) return rc;
    if (!cuda_bench_run) return er_fail(ER_INPUT, "bench cuda: this build has no CUDA backend (rebuild with make CUDA=1)");
    if (probe) return cuda_probe_run(batch_b, batch_l, print_cuda_row, &json);
    return cuda_bench_run(iters, batch_b, batch_l, print_cuda_row, &json);
}

int cmd_bench_gemm(int argc, char **argv);
int cmd_bench_search(int argc, char **argv);
int cmd_bench_conv(int argc, char **argv);
int cmd_bench_latency(int argc, char **argv);

int cmd_bench(int argc, char **argv) {
    static const arg_sub subs[] = {
        {"gemm", cmd_bench_gemm, "sgemm GFLOP/s vs OpenBLAS"},
        {"search", cmd_bench_search, "index latency vs float search and memory bandwidth"},
        {"conv", cmd_bench_conv, "CPU conv2d on ResNet-50 shapes vs direct loops"},
        {"latency", cmd_bench_latency, "one new case on the CPU: decode, resize, encoder, hash, search (p50 / p99)"},
        {"train", bench_train, "training / inference step time of a registered model (--objective cls | mae | scene)"},
        {"cuda", bench_cuda, "GPU GEMM / attention figures (CUDA builds only)"},
    };
    return args_dispatch(argc, argv, "endoret bench <benchmark> [options]   (endoret bench <benchmark> --help)", subs,
                         sizeof subs / sizeof *subs);
}
