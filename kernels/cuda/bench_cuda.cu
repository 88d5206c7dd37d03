/* bench_cuda.cu — the measurements of `endoret bench cuda` (kernels/bench_cuda.h); cli/cmd_bench.c
 * parses the options and prints the rows.
 *
 * Measures, through the backend table (the same code paths training uses):
 *   - GEMM TFLOP/s for the ViT-B/16 and ViT-L/16 linear layers (qkv, proj, fc1, fc2 on
 *     batch x tokens rows), fp32 and bf16 modes, as a fraction of "cuBLAS peak" = the rate of a
 *     large square GEMM (8192^3) in the same mode on the same device; then each layer with its
 *     bias (proj and fc2 also with the residual) through gemm_ex, cuBLASLt epilogue against split;
 *   - attention forward and backward on each CUDA path (mma: tensor cores; gemm: batched cuBLAS;
 *     fused: CUDA cores) in bf16 mode, for ViT/16 heads (197 x 64), an MAE encoder's (50 x 64) and
 *     decoder's (197 x 32), TFLOP/s by the usual count (forward 4*B*H*T*T*D, backward 10*B*H*T*T*D).
 * Timing: CUDA events around `iters` back-to-back launches after 3 warm-up launches. */
#include <cublas_v2.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "kernels/gemm.h"
#include "nn/base/base.h"
}
#include "kernels/bench_cuda.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/attention_mma.h"
#include "kernels/cuda/gemm_ex.h"
#include <cublasLt.h>
#include <cudnn.h>

static float time_ms(void (*fn)(void *), void *arg, int iters) {
    cudaStream_t st = cuda_stream();
    for (int i = 0; i < 3; i++) fn(arg);
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    cudaEventRecord(a, st);
    for (int i = 0; i < iters; i++) fn(arg);
    cudaEventRecord(b, st);
    cudaEventSynchronize(b);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return ms / iters;
}

/* y[M, N] = x[M, K] @ w[N, K]^T, as op_linear calls it */
struct gemm_job {
    int m, n, k;
    float *x, *w, *y;
    int compute; /* GEMM_COMPUTE_* */
};
static void run_gemm(void *p) {
    gemm_job *j = (gemm_job *)p;
    cu_gemm_batched(j->compute, 0, 1, j->m, j->n, j->k, 1.0f, j->x, j->k, 0, j->w, j->k, 0, 0.0f, j->y, j->n, 0, 1);
}

struct attn_job {
    int B, H, T, D, backward;
    float *q, *k, *v, *o, *lse, *go, *gq, *gk, *gv, *work;
};
static void run_attn(void *p) {
    attn_job *j = (attn_job *)p;
    int64_t s[3] = {(int64_t)j->H * j->T * j->D, (int64_t)j->T * j->D, j->D};
    float scale = 0.125f;
    if (!j->backward)
        cu_attention(GEMM_COMPUTE_BF16, j->B, j->H, j->T, j->T, j->D, scale, j->q, s, j->k, s, j->v, s, MASK_NONE, NULL, NULL,
                     j->o, s, j->lse, j->work);
    else
        cu_attention_backward(GEMM_COMPUTE_BF16, j->B, j->H, j->T, j->T, j->D, scale, j->q, s, j->k, s, j->v, s, MASK_NONE, NULL,
                              NULL, j->o, s, j->go, s, j->lse, j->gq, s, j->gk, s, j->gv, s, j->work);
}

/* the same layer with its bias (and, for proj / fc2, the residual as C) through gemm_ex, bf16 */
struct gemm_ex_job {
    gemm_job *j;
    float *bias, *res;
};
static void run_gemm_ex(void *p) {
    gemm_ex_job *e = (gemm_ex_job *)p;
    gemm_job *j = e->j;
    gemm_ex_args a = {};
    a.transB = 1, a.m = j->m, a.n = j->n, a.k = j->k, a.alpha = 1.0f, a.beta = 1.0f;
    a.A = j->x, a.lda = j->k, a.B = j->w, a.ldb = j->k, a.C = e->res, a.ldc = j->n, a.D = j->y, a.ldd = j->n;
    a.bias = e->bias, a.compute = GEMM_COMPUTE_BF16;
    cu_gemm_ex(&a);
}

static float *dev_filled(const er_backend *g, size_t n, float v) {
    float *p = (float *)g->alloc(n * sizeof(float));
    if (p) g->fill(p, (int64_t)n, v);
    return p;
}

/* x[i] = bf16 bits of a hash-uniform value in [-1, 1) (random data: constants can run faster) */
__global__ void k_rand_bf16(int64_t n, uint32_t seed, uint16_t *x) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        uint32_t h = (uint32_t)i * 2654435761u ^ seed;
        h ^= h >> 16; h *= 0x7feb352du; h ^= h >> 15; h *= 0x846ca68bu; h ^= h >> 16;
        float v = (float)(h >> 8) * (2.0f / 16777216.0f) - 1.0f;
        x[i] = (uint16_t)(__float_as_uint(v) >> 16);
    }
}

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

extern "C" double cuda_gemm_peak_bf16(int iters) {
    const int P = 8192;
    const size_t n = (size_t)P * P;
    const er_backend *g = backend_cuda();
    if (!g || iters < 1) return 0;
    /* the table's allocator: it returns its cached blocks to the driver before failing, which a
     * plain cudaMalloc after a training run would not (seen: out of memory after ViT-L MAE) */
    uint16_t *a = (uint16_t *)g->alloc(n * 2), *b = (uint16_t *)g->alloc(n * 2), *c = (uint16_t *)g->alloc(n * 2);
    if (!a || !b || !c) {
        if (a) g->free(a);
        if (b) g->free(b);
        if (c) g->free(c);
        return 0;
    }
    cudaStream_t st = cuda_stream();
    k_rand_bf16<<<cuda_blocks((int64_t)n, 256), 256, 0, st>>>((int64_t)n, 1u, a);
    k_rand_bf16<<<cuda_blocks((int64_t)n, 256), 256, 0, st>>>((int64_t)n, 2u, b);
    const float one = 1.0f, zero = 0.0f;
    float *ms = (float *)calloc((size_t)iters, sizeof(float));
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    for (int i = -3; i < iters; i++) {
        cudaEventRecord(e0, st);
        cublasStatus_t s = cublasGemmEx(cuda_cublas(), CUBLAS_OP_N, CUBLAS_OP_N, P, P, P, &one, a, CUDA_R_16BF, P, b,
                                        CUDA_R_16BF, P, &zero, c, CUDA_R_16BF, P, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        cudaEventRecord(e1, st);
        cudaEventSynchronize(e1);
        if (s != CUBLAS_STATUS_SUCCESS) {
            cuda_record_msg("cuda_gemm_peak_bf16: cublasGemmEx failed", __FILE__, __LINE__);
            iters = 0;
            break;
        }
        if (i >= 0) cudaEventElapsedTime(&ms[i], e0, e1);
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    g->free(a); g->free(b); g->free(c);
    double tf = 0;
    if (iters > 0) {
        qsort(ms, (size_t)iters, sizeof(float), cmp_float);
        tf = 2.0 * P * P * (double)P / (ms[iters / 2] * 1e-3) / 1e12;
    }
    free(ms);
    return tf;
}

extern "C" int cuda_bench_run(int iters, int batch_b, int batch_l,
                              void (*emit)(const cuda_bench_row *, void *), void *ctx) {
    const er_backend *g = backend_cuda();
    if (!g) return er_fail(ER_RUNTIME, "bench cuda: no CUDA device (%s)", cuda_backend_describe());
    cuda_bench_row row = {};
    row.kind = "device";
    row.device = cuda_backend_describe();
    emit(&row, ctx);

    /* cuBLAS reference rate per precision: a large square product */
    double peak[2] = {0, 0};
    const int P = 8192;
    {
        gemm_job j = {P, P, P, dev_filled(g, (size_t)P * P, 0.01f), dev_filled(g, (size_t)P * P, 0.01f),
                      (float *)g->alloc((size_t)P * P * sizeof(float))};
        if (!j.x || !j.w || !j.y) return er_fail(ER_RUNTIME, "bench cuda: %s", cuda_backend_error());
        for (int bf = 0; bf <= 1; bf++) {
            j.compute = bf ? GEMM_COMPUTE_BF16 : GEMM_COMPUTE_FP32;
            float ms = time_ms(run_gemm, &j, iters < 5 ? iters : 5);
            peak[bf] = 2.0 * P * P * (double)P / (ms * 1e-3) / 1e12;
            row = cuda_bench_row{};
            row.kind = "gemm_peak";
            row.precision = bf ? "bf16" : "fp32";
            row.m = P;
            row.tflops = peak[bf];
            emit(&row, ctx);
        }
        g->free(j.x);
        g->free(j.w);
        g->free(j.y);
        row = cuda_bench_row{};
        row.kind = "gemm_peak";
        row.precision = "bf16 operands (bf16 in and out, random data)";
        row.m = P;
        row.tflops = cuda_gemm_peak_bf16(20);
        emit(&row, ctx);
    }

    /* ViT linear layers: rows = batch * 197 tokens (full encoder) */
    struct vit { const char *name; int C, batch; } vits[2] = {{"ViT-B/16", 768, batch_b}, {"ViT-L/16", 1024, batch_l}};
    for (int vi = 0; vi < 2; vi++) {
        int C = vits[vi].C, M = vits[vi].batch * 197;
        const struct { const char *layer; int n, k; } layers[4] = {{"qkv", 3 * C, C}, {"proj", C, C}, {"fc1", 4 * C, C}, {"fc2", C, 4 * C}};
        for (int li = 0; li < 4; li++) {
            gemm_job j = {M, layers[li].n, layers[li].k, dev_filled(g, (size_t)M * layers[li].k, 0.01f),
                          dev_filled(g, (size_t)layers[li].n * layers[li].k, 0.01f),
                          (float *)g->alloc((size_t)M * layers[li].n * sizeof(float))};
            if (!j.x || !j.w || !j.y) return er_fail(ER_RUNTIME, "bench cuda: %s", cuda_backend_error());
            for (int bf = 0; bf <= 1; bf++) {
                j.compute = bf ? GEMM_COMPUTE_BF16 : GEMM_COMPUTE_FP32;
                float ms = time_ms(run_gemm, &j, iters);
                double tf = 2.0 * M * (double)j.n * j.k / (ms * 1e-3) / 1e12;
                row = cuda_bench_row{};
                row.kind = "gemm";
                row.model = vits[vi].name;
                row.layer = layers[li].layer;
                row.precision = bf ? "bf16" : "fp32";
                row.m = M, row.n = j.n, row.k = j.k;
                row.ms = ms, row.tflops = tf, row.of_peak = tf / peak[bf];
                emit(&row, ctx);
            }
            /* + bias (+ residual): cuBLASLt's epilogue against the product and one epilogue kernel */
            float *bias = dev_filled(g, (size_t)j.n, 0.01f);
            float *res = li == 1 || li == 3 ? dev_filled(g, (size_t)M * j.n, 0.01f) : NULL;
            gemm_ex_job e = {&j, bias, res};
            for (int split = 0; split <= 1; split++) {
                setenv("ENDORET_CUDA_GEMM_EX", split ? "split" : "lt", 1);
                float ms = time_ms(run_gemm_ex, &e, iters);
                row = cuda_bench_row{};
                row.kind = "gemm_ex";
                row.model = vits[vi].name;
                row.layer = layers[li].layer;
                row.pass = split ? (res ? "split +bias +res" : "split +bias") : (res ? "lt +bias +res" : "lt +bias");
                row.precision = "bf16";
                row.m = M, row.n = j.n, row.k = j.k;
                row.ms = ms, row.tflops = 2.0 * M * (double)j.n * j.k / (ms * 1e-3) / 1e12;
                emit(&row, ctx);
            }
            unsetenv("ENDORET_CUDA_GEMM_EX");
            g->free(bias);
            if (res) g->free(res);
            g->free(j.x);
            g->free(j.w);
            g->free(j.y);
        }
    }

    /* attention on each path, in bf16 mode (the fused kernels compute in fp32 whatever the mode):
     * full ViT/16 heads (197 x 64), an MAE encoder's (50 visible tokens) and its decoder's (197 x 32) */
    const struct { const char *name; int H, T, D, batch; } heads[4] = {
        {"ViT-B/16", 12, 197, 64, batch_b}, {"ViT-L/16", 16, 197, 64, batch_l},
        {"ViT-L/16 MAE encoder", 16, 50, 64, batch_l}, {"MAE decoder 512", 16, 197, 32, batch_l}};
    const char *paths[4] = {"mma", "flash", "gemm", "fused"};
    const char *env = getenv("ENDORET_CUDA_ATTENTION");
    char *env_saved = env ? strdup(env) : NULL;
    for (int vi = 0; vi < 4; vi++) {
        int H = heads[vi].H, B = heads[vi].batch, T = heads[vi].T, D = heads[vi].D;
        size_t n = (size_t)B * H * T * D;
        for (int pi = 0; pi < 4; pi++) {
            setenv("ENDORET_CUDA_ATTENTION", paths[pi], 1);
            attn_job j = {B, H, T, D, 0, dev_filled(g, n, 0.01f), dev_filled(g, n, 0.02f), dev_filled(g, n, 0.03f),
                          dev_filled(g, n, 0.f), dev_filled(g, (size_t)B * H * T, 0.f), dev_filled(g, n, 0.01f),
                          dev_filled(g, n, 0.f), dev_filled(g, n, 0.f), dev_filled(g, n, 0.f),
                          dev_filled(g, cu_attention_workspace(GEMM_COMPUTE_BF16, B, H, T, T, D), 0.f)};
            if (!j.work) return er_fail(ER_RUNTIME, "bench cuda: %s", cuda_backend_error());
            for (int bw = 0; bw <= 1; bw++) {
                j.backward = bw;
                float ms = time_ms(run_attn, &j, iters);
                double fl = (bw ? 10.0 : 4.0) * B * H * (double)T * T * D;
                double tf = fl / (ms * 1e-3) / 1e12;
                row = cuda_bench_row{};
                row.kind = "attention";
                row.model = heads[vi].name;
                row.layer = paths[pi];
                row.precision = "bf16";
                row.pass = bw ? "backward" : "forward";
                row.B = B, row.H = H, row.T = T, row.D = D;
                row.ms = ms, row.tflops = tf;
                emit(&row, ctx);
            }
            float *bufs[] = {j.q, j.k, j.v, j.o, j.lse, j.go, j.gq, j.gk, j.gv, j.work};
            for (float *b : bufs) g->free(b);
        }
    }
    if (env_saved) setenv("ENDORET_CUDA_ATTENTION", env_saved, 1);
    else unsetenv("ENDORET_CUDA_ATTENTION");
    free(env_saved);
    if (cuda_synchronize() || cuda_backend_error()) return er_fail(ER_RUNTIME, "bench cuda: %s", cuda_backend_error());
    return ER_OK;
}

