/* test_cuda_parity_attention.c — attention forward and backward of the CUDA table against the CPU
 * table, on every CUDA path: the default choice, the cuBLAS path and the fused kernels pinned (fp32,
 * tolerance 1e-5 as in test_cuda_parity.c), and the tensor-core path in bf16 mode (2e-2 against the
 * CPU's fp32 result). Skips without a GPU. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/gemm.h"
#include "tests/cuda/parity_util.h"

/* The GPU side's precision and tolerance for attention_case_g: fp32 at 1e-5 by default; the
 * tensor-core path (bf16 operands) is checked against the CPU's fp32 result at 2e-2, with the
 * accumulated-into gradient buffers starting small so the tolerance scales with the gradients. */
static int at_gpu_bf16 = 0;
static double at_rtol = 1e-5;

/* q/k/v as views of one packed [B, T, 3, H, D] projection (the ViT layout), o [B, T, H, D].
 * grads: which of gq (1), gk (2), gv (4) the backward writes (the others are frozen: NULL). */
static void attention_case_g(int B, int H, int T, int D, int Tk, int mask_kind, int grads) {
    int64_t nq = (int64_t)B * T * 3 * H * D, nkv = (int64_t)B * Tk * 2 * H * D, no = (int64_t)B * T * H * D;
    int64_t qs[3] = {(int64_t)T * 3 * H * D, D, 3 * H * D};       /* (b, h, t) strides in the q buffer */
    int64_t kvs[3] = {(int64_t)Tk * 2 * H * D, D, 2 * H * D};     /* k and v from a [B, Tk, 2, H, D] buffer */
    int64_t os[3] = {(int64_t)T * H * D, D, H * D};
    float *qb = rnd(nq, -1, 1, 130), *kvb = rnd(nkv, -1, 1, 131), *go = rnd(no, -1, 1, 132);
    float *q = qb, *k = kvb, *v = kvb + H * D;
    int64_t nm = (int64_t)B * T * Tk, ms[4] = {(int64_t)T * Tk, 0, Tk, 1}; /* [B, 1, T, Tk] */
    float *mask = rnd(nm, -2, 1, 133);
    if (mask_kind == MASK_BOOL) /* drop ~1/3 of the keys, and every key of query row 1 */
        for (int64_t i = 0; i < nm; i++) mask[i] = (mask[i] > -1.0f && (i / Tk) % T != 1) ? 1.0f : 0.0f;
    float scale = 1.0f / sqrtf((float)D);
    float *o = malloc(no * 4), *lse = malloc((size_t)B * H * T * 4);
    const int gc = at_gpu_bf16 ? GEMM_COMPUTE_BF16 : GEMM_COMPUTE_FP32; /* the path, and so the workspace, depend on it */
    float *work = malloc(CPU->attention_workspace(GEMM_COMPUTE_FP32, B, H, T, Tk, D) * 4);
    float *dqb = devf(qb, nq), *dkvb = devf(kvb, nkv), *dgo = devf(go, no), *dmask = devf(mask, nm);
    float *dout = GPU->alloc(no * 4), *dlse = GPU->alloc((size_t)B * H * T * 4);
    float *dwork = GPU->alloc((GPU->attention_workspace(gc, B, H, T, Tk, D) + 1) * 4);
    const float *mk = mask_kind ? mask : NULL, *dmk = mask_kind ? dmask : NULL;
    CPU->attention(GEMM_COMPUTE_FP32, B, H, T, Tk, D, scale, q, qs, k, kvs, v, kvs, mask_kind, mk, ms, o, os, lse, work);
    GPU->attention(gc, B, H, T, Tk, D, scale, dqb, qs, dkvb, kvs, dkvb + H * D, kvs, mask_kind, dmk, ms, dout,
                   os, dlse, dwork);
    expect_close("attention o", o, dout, no, at_rtol);
    expect_close("attention lse", lse, dlse, (int64_t)B * H * T, at_rtol);
    /* gradients into packed buffers with the same layout as the inputs, accumulated */
    float g0 = at_gpu_bf16 ? 0.01f : 1.0f;
    float *gq = rnd(nq, -g0, g0, 134), *gkv = rnd(nkv, -g0, g0, 135);
    float *dgq = devf(gq, nq), *dgkv = devf(gkv, nkv);
    float *cq = grads & 1 ? gq : NULL, *ck = grads & 2 ? gkv : NULL, *cv = grads & 4 ? gkv + H * D : NULL;
    float *gq_d = grads & 1 ? dgq : NULL, *gk_d = grads & 2 ? dgkv : NULL, *gv_d = grads & 4 ? dgkv + H * D : NULL;
    CPU->attention_backward(GEMM_COMPUTE_FP32, B, H, T, Tk, D, scale, q, qs, k, kvs, v, kvs, mask_kind, mk, ms, o, os, go, os,
                            lse, cq, qs, ck, kvs, cv, kvs, work);
    GPU->attention_backward(gc, B, H, T, Tk, D, scale, dqb, qs, dkvb, kvs, dkvb + H * D, kvs, mask_kind, dmk, ms,
                            dout, os, dgo, os, dlse, gq_d, qs, gk_d, kvs, gv_d, kvs, dwork);
    gpu_ok("attention");
    expect_close("attention gq", gq, dgq, nq, at_rtol);
    expect_close("attention gk/gv", gkv, dgkv, nkv, at_rtol);
    GPU->free(dqb); GPU->free(dkvb); GPU->free(dgo); GPU->free(dmask); GPU->free(dout); GPU->free(dlse);
    GPU->free(dwork); GPU->free(dgq); GPU->free(dgkv);
    free(qb); free(kvb); free(go); free(mask); free(o); free(lse); free(work); free(gq); free(gkv);
}

static void attention_case(int B, int H, int T, int D, int Tk, int mask_kind) {
    attention_case_g(B, H, T, D, Tk, mask_kind, 7);
}

/* The shapes every path is checked on; ENDORET_CUDA_ATTENTION pins the cuBLAS path or the fused
 * kernels (kernels/cuda/attention_gemm.cu says which the budget picks). */
static void attention_cases(void) {
    attention_case(2, 3, 50, 64, 50, MASK_NONE);  /* ViT-like head dim */
    attention_case(1, 2, 37, 40, 70, MASK_ADD);   /* D not a multiple of 32, Tq != Tk */
    attention_case(2, 2, 33, 128, 65, MASK_BOOL); /* largest head dim, a fully masked row */
    attention_case(1, 1, 5, 16, 3, MASK_NONE);    /* tiny */
    attention_case_g(2, 2, 20, 32, 24, MASK_ADD, 1); /* frozen k, v */
    attention_case_g(2, 2, 20, 32, 24, MASK_NONE, 6); /* frozen q */
}

PARITY_COVERS(attention_workspace);
PARITY_COVERS(attention);
PARITY_COVERS(attention_backward);
Test(cuda, attention_forward_backward) {
    require_gpu();
    attention_cases();
}
Test(cuda, attention_cublas_path) {
    setenv("ENDORET_CUDA_ATTENTION", "gemm", 1);
    require_gpu();
    attention_cases();
}
Test(cuda, attention_fused_kernels) {
    setenv("ENDORET_CUDA_ATTENTION", "fused", 1);
    require_gpu();
    attention_cases();
}
/* The tensor-core path (attention_mma.cu) in bf16 mode against the CPU's fp32 result: the shapes it
 * takes (no mask, D a multiple of 16 up to 64, at most 256 tokens): MAE encoder / decoder heads,
 * Tq != Tk, partial 16-row tiles, the 256-token limit, frozen q and frozen k/v; then the masked and
 * wider cases, which fall back to another path in the same mode. */
Test(cuda, attention_tensor_core_path) {
    setenv("ENDORET_CUDA_ATTENTION", "mma", 1);
    require_gpu();
    at_gpu_bf16 = 1;
    at_rtol = 2e-2;
    attention_case(2, 3, 50, 64, 50, MASK_NONE);     /* ViT-L/16 MAE encoder head: 49 visible + [CLS] */
    attention_case(1, 2, 197, 32, 197, MASK_NONE);   /* its decoder head (512 / 16) */
    attention_case(1, 2, 37, 48, 70, MASK_NONE);     /* Tq != Tk, D = 3 x 16 */
    attention_case(1, 1, 5, 16, 3, MASK_NONE);       /* tiny: one partial tile */
    attention_case(1, 1, 256, 64, 256, MASK_NONE);   /* the largest it takes */
    attention_case_g(2, 2, 20, 32, 24, MASK_NONE, 1); /* frozen k, v */
    attention_case_g(2, 2, 20, 32, 24, MASK_NONE, 6); /* frozen q */
    attention_case(1, 2, 37, 40, 70, MASK_ADD);      /* not taken: masked, D = 40 */
    attention_case(1, 1, 300, 64, 300, MASK_NONE);   /* not taken: past 256 tokens */
    at_gpu_bf16 = 0;
    at_rtol = 1e-5;
}
/* The same shapes with the flash kernels (attention_flash.cu: S, P and dS in registers, mma.sync;
 * the one-pass forward and the two-kernel backward without workspace). Same tolerance against the
 * CPU's fp32 result: the forward rounds P before normalising instead of after, a bf16 rounding's
 * difference. Seen failing under the emulation with the forward's P rows g and g + 8 swapped, K's two
 * B registers swapped, dS^T's A fragment built from P^T in the backward (gk/gv fails), a 16-bit
 * column pair taken along the row (gq fails), and with ldmatrix's register order swapped in the
 * .trans loads (gq fails) or .trans used for the S tiles (o fails). */
Test(cuda, attention_tensor_core_flash) {
    setenv("ENDORET_CUDA_ATTENTION", "flash", 1);
    require_gpu();
    at_gpu_bf16 = 1;
    at_rtol = 2e-2;
    attention_case(2, 3, 50, 64, 50, MASK_NONE);     /* ViT-L/16 MAE encoder head */
    attention_case(1, 2, 197, 32, 197, MASK_NONE);   /* its decoder head (512 / 16) */
    attention_case(1, 2, 37, 48, 70, MASK_NONE);     /* Tq != Tk, D = 3 x 16, a partial key block */
    attention_case(1, 1, 5, 16, 3, MASK_NONE);       /* tiny: one partial tile */
    attention_case(1, 1, 256, 64, 256, MASK_NONE);   /* the largest it takes */
    attention_case_g(2, 2, 20, 32, 24, MASK_NONE, 1); /* frozen k, v: the dq kernel alone */
    attention_case_g(2, 2, 20, 32, 24, MASK_NONE, 6); /* frozen q: the dk/dv kernel alone */
    attention_case_g(1, 2, 70, 32, 37, MASK_NONE, 2); /* only k: Tq > Tk, v's gradient not written */
    attention_case(1, 2, 37, 40, 70, MASK_ADD);      /* not taken: masked, D = 40 */
    at_gpu_bf16 = 0;
    at_rtol = 1e-5;
}
/* Another value is an error that names the variable (the step's device check reports it). */
Test(cuda, attention_path_variable_is_checked) {
    setenv("ENDORET_CUDA_ATTENTION", "flsh", 1);
    require_gpu();
    if (SELFTEST) cr_skip_test("self-test: the CPU table has one attention path");
    GPU->attention_workspace(GEMM_COMPUTE_FP32, 1, 1, 4, 4, 8);
    const char *e = GPU->last_error();
    cr_assert(e && strstr(e, "ENDORET_CUDA_ATTENTION"), "last error: %s", e ? e : "(none)");
}
