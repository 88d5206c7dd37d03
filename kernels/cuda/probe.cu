/* probe.cu — `endoret bench cuda --probe` (kernels/bench_cuda.h): in seconds and before any timing,
 * the runtime libraries' versions and, for every shape the models use, whether cuBLASLt and cuDNN
 * offer an algorithm (a refusal names the case and the fallback taken). No kernel runs and no memory
 * is touched: the heuristics read shapes, types and alignment only. Apart from bench_cuda.cu's
 * timing so that the host emulation (tests/cuda/emulate.py) runs it too. */
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cudnn.h>
#include <stdint.h>
#include <stdio.h>

extern "C" {
#include "kernels/gemm.h"
#include "nn/base/base.h"
}
#include "kernels/bench_cuda.h"
#include "kernels/cuda/attention_mma.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/gemm_ex.h"

/* One probe row per pass of a channels-last bf16 convolution: whether cuDNN offers an algorithm
 * (deterministic for the backward) and the workspace the op would take; a refusal is reported in the
 * row and cleared, so the probe goes on. */
static void probe_conv(conv2d_args a, void (*emit)(const cuda_bench_row *, void *), void *ctx) {
    conv2d_args_fill(&a);
    for (int bw = 0; bw <= 1; bw++) {
        size_t ws = bw ? cu_conv2d_nhwc_backward_workspace(&a, ER_BF16) : cu_conv2d_nhwc_workspace(&a, ER_BF16);
        const char *e = cuda_backend_error();
        char pass[160], layer[96];
        if (e) snprintf(pass, sizeof pass, "refused: %.140s", e);
        else snprintf(pass, sizeof pass, "cuDNN, %.1f MiB of work", (double)ws * sizeof(float) / 1048576.0);
        snprintf(layer, sizeof layer, "%dx%d/%d %d->%d at %dx%d", a.R, a.S, a.sh, a.C, a.K, a.H, a.W);
        cuda_backend_clear_error();
        cuda_bench_row row = {};
        row.kind = "probe_conv";
        row.model = "ResNet-50 NHWC";
        row.layer = layer;
        row.precision = "bf16";
        row.pass = pass;
        row.B = a.N;
        row.T = bw; /* 0 forward, 1 backward (data and filter) */
        emit(&row, ctx);
    }
}

/* Every distinct convolution of ResNet-50 (torchvision v1.5) at 224 px and `batch` images. */
static void probe_resnet_convs(int batch, void (*emit)(const cuda_bench_row *, void *), void *ctx) {
    conv2d_args a = {};
    a.N = batch, a.dh = a.dw = 1, a.groups = 1, a.compute = GEMM_COMPUTE_BF16;
    auto conv = [&](int C, int K, int k, int st, int H) {
        a.C = C, a.K = K, a.R = a.S = k, a.sh = a.sw = st, a.ph = a.pw = k / 2, a.H = a.W = H;
        probe_conv(a, emit, ctx);
    };
    conv(3, 64, 7, 2, 224);
    int in = 64, H = 56;
    for (int s = 0; s < 4; s++) {
        const int planes = 64 << s, out = 4 * planes, st = s ? 2 : 1, Ho = (H - 1) / st + 1;
        conv(in, planes, 1, 1, H);         /* first block: conv1 at the stage's input size */
        conv(planes, planes, 3, st, H);    /* conv2 carries the stride */
        conv(planes, out, 1, 1, Ho);       /* conv3 */
        conv(in, out, 1, st, H);           /* downsample */
        conv(out, planes, 1, 1, Ho);       /* later blocks: conv1 from the stage's width */
        if (st != 1) conv(planes, planes, 3, 1, Ho);
        in = out, H = Ho;
    }
}

extern "C" int cuda_probe_run(int batch_b, int batch_l, void (*emit)(const cuda_bench_row *, void *), void *ctx) {
    const er_backend *g = backend_cuda();
    if (!g) return er_fail(ER_RUNTIME, "bench cuda --probe: no CUDA device (%s)", cuda_backend_describe());
    int rt = 0, drv = 0, cb[3] = {0, 0, 0};
    cudaRuntimeGetVersion(&rt);
    cudaDriverGetVersion(&drv);
    cublasGetProperty(MAJOR_VERSION, &cb[0]);
    cublasGetProperty(MINOR_VERSION, &cb[1]);
    cublasGetProperty(PATCH_LEVEL, &cb[2]);
    size_t lt = cublasLtGetVersion(), dnn = cudnnGetVersion();
    char versions[400];
    /* cuDNN 9 numbers its versions major*10000 + minor*100 + patch; the fused SDPA backward
     * operation of its graph API needs 9.17 (issue #29) */
    snprintf(versions, sizeof versions,
             "CUDA runtime %d.%d, driver API %d.%d, cuBLAS %d.%d.%d, cuBLASLt %zu, cuDNN %zu.%zu.%zu (SDPA backward operation %s)",
             rt / 1000, (rt % 1000) / 10, drv / 1000, (drv % 1000) / 10, cb[0], cb[1], cb[2], lt, dnn / 10000,
             (dnn % 10000) / 100, dnn % 100, dnn >= 91700 ? "available" : "needs cuDNN >= 9.17");
    cuda_bench_row row = {};
    row.kind = "versions";
    row.device = versions;
    emit(&row, ctx);
    const struct { const char *name; int C, hid, heads, batch, tokens[2]; } models[3] = {
        {"ViT-B/16", 768, 3072, 12, batch_b, {197, 50}}, {"ViT-L/16", 1024, 4096, 16, batch_l, {197, 50}},
        {"MAE decoder 512", 512, 2048, 16, batch_l, {197, 0}}};
    const float *fake = (const float *)(uintptr_t)4096; /* the heuristic reads alignment, not memory */
    for (int mi = 0; mi < 3; mi++)
        for (int ti = 0; ti < 2 && models[mi].tokens[ti]; ti++)
            for (int bf = 0; bf <= 1; bf++) {
                int C = models[mi].C, M = models[mi].batch * models[mi].tokens[ti];
                const struct { const char *layer; int n, k, bias, res; } layers[4] = {
                    {"qkv +bias", 3 * C, C, 1, 0}, {"proj +bias +res", C, C, 1, 1},
                    {"fc1 (bias in bias_gelu)", models[mi].hid, C, 0, 0}, {"fc2 +bias +res", C, models[mi].hid, 1, 1}};
                for (int li = 0; li < 4; li++) {
                    gemm_ex_args a = {};
                    a.transB = 1, a.m = M, a.n = layers[li].n, a.k = layers[li].k, a.alpha = 1.0f, a.beta = 1.0f;
                    a.A = fake, a.lda = a.k, a.B = fake, a.ldb = a.k, a.D = (float *)fake, a.ldd = a.n;
                    a.C = layers[li].res ? fake : NULL, a.ldc = a.n, a.bias = layers[li].bias ? fake : NULL;
                    a.compute = bf ? GEMM_COMPUTE_BF16 : GEMM_COMPUTE_FP32;
                    int ok = cu_gemm_ex_has_algo(&a);
                    row = cuda_bench_row{};
                    row.kind = "probe_gemm";
                    row.model = models[mi].name;
                    row.layer = layers[li].layer;
                    row.precision = bf ? "bf16" : "fp32";
                    row.pass = ok > 0 ? "cuBLASLt" : ok == 0 ? "refused: split path" : "error";
                    row.m = a.m, row.n = a.n, row.k = a.k;
                    emit(&row, ctx);
                    if (!layers[li].bias) continue;
                    /* its weight gradient dW[n,k] += dY^T X with the bias gradient in the epilogue (BGRADB) */
                    a = gemm_ex_args{};
                    a.transA = 1, a.m = layers[li].n, a.n = layers[li].k, a.k = M, a.alpha = 1.0f, a.beta = 1.0f;
                    a.A = fake, a.lda = a.m, a.B = fake, a.ldb = a.n, a.C = fake, a.ldc = a.n, a.D = (float *)fake, a.ldd = a.n;
                    a.bias_grad = (float *)fake, a.compute = bf ? GEMM_COMPUTE_BF16 : GEMM_COMPUTE_FP32;
                    ok = cu_gemm_ex_has_algo(&a);
                    row.layer = li == 0 ? "qkv dW +bias grad" : li == 1 ? "proj dW +bias grad" : "fc2 dW +bias grad";
                    row.pass = ok > 0 ? "cuBLASLt" : ok == 0 ? "refused: split path" : "error";
                    row.m = a.m, row.n = a.n, row.k = a.k;
                    emit(&row, ctx);
                }
                int D = C / models[mi].heads, T = models[mi].tokens[ti];
                row = cuda_bench_row{};
                row.kind = "probe_attention";
                row.model = models[mi].name;
                row.precision = bf ? "bf16" : "fp32";
                row.pass = cu_attention_path(bf ? GEMM_COMPUTE_BF16 : GEMM_COMPUTE_FP32, models[mi].batch, models[mi].heads, T, T, D, MASK_NONE);
                row.B = models[mi].batch, row.H = models[mi].heads, row.T = T, row.D = D;
                emit(&row, ctx);
            }
    probe_resnet_convs(batch_b, emit, ctx);
    const char *e = cuda_backend_error();
    return e ? er_fail(ER_RUNTIME, "bench cuda --probe: %s", e) : ER_OK;
}
