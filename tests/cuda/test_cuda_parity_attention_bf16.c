/* test_cuda_parity_attention_bf16.c — op_attention on bf16 q, k, v (nn/ops_attention_bf16.c) on the
 * device: the tensor-core kernels on bf16 storage (ops.def attention_bf16, unmasked cases) or the
 * widening path (the masked case). Checks per case:
 *   - on the device itself, bit for bit: the bf16 op's o is the rounding of the device's fp32-storage
 *     kernel's o in bf16 compute on fp32 copies of the same values, and each leaf's gradient is the
 *     rounding of that kernel's backward (given the rounded o, dO and its lse), as ops.def defines
 *     attention_bf16 (a kernel reading bf16 that rounded or summed differently fails here);
 *   - against the CPU table, forward and backward: both compute in bf16 but round P and sum in
 *     other orders (test_cuda_parity_attention.c's tensor-core case), so 2e-2 of the scale, as the
 *     other bf16 parity tests.
 * q/k/v are sliced out of a permuted [B, T, 3, H, D] projection (the ViT block) or separate. */
#include <math.h>

#include "nn/autograd.h"
#include "nn/ops.h"
#include "tests/cuda/parity_util.h"

typedef struct {
    int B, H, Tq, Tk, D, packed, mask_kind;
} acase;

static int64_t leaf_numel(const acase *a, int i) {
    if (a->packed) return (int64_t)a->B * a->Tq * 3 * a->H * a->D;
    return (int64_t)a->B * a->H * (i == 0 ? a->Tq : a->Tk) * a->D;
}

/* o (host, widened, [B, H, Tq, D]) of the bf16 attention on `dev` from the host leaves (q, k, v
 * cast to bf16), and the leaves' gradients of L = sum(o * r) into g. */
static float *attn_on(int dev, const acase *a, float *const *xh, const float *maskh, const float *rh, float **g) {
    const int nleaf = a->packed ? 1 : 3;
    tensor *leaf[3], *qkv[3], *mask = NULL;
    for (int i = 0; i < nleaf; i++) {
        leaf[i] = a->packed ? tensor_new_on(dev, 5, SHAPE(a->B, a->Tq, 3, a->H, a->D))
                            : tensor_new_on(dev, 4, SHAPE(a->B, a->H, i ? a->Tk : a->Tq, a->D));
        tensor_copy_from_host(leaf[i], xh[i]);
        tensor_set_requires_grad(leaf[i], 1);
    }
    if (a->mask_kind != MASK_NONE) {
        mask = tensor_new_on(dev, 2, SHAPE(a->Tq, a->Tk));
        tensor_copy_from_host(mask, maskh);
    }
    tensor *r = tensor_new_on(dev, 4, SHAPE(a->B, a->H, a->Tq, a->D));
    tensor_copy_from_host(r, rh);
    if (a->packed) {
        int perm[5] = {2, 0, 3, 1, 4};
        tensor *p = op_permute(op_cast(leaf[0], DT_BF16), perm);
        for (int i = 0; i < 3; i++) qkv[i] = op_squeeze(op_slice(p, 0, i, i + 1), 0);
    } else {
        for (int i = 0; i < 3; i++) qkv[i] = op_cast(leaf[i], DT_BF16);
    }
    tensor *o = op_attention(qkv[0], qkv[1], qkv[2], mask, a->mask_kind, 0);
    cr_assert_not_null(o, "%s", er_msg());
    cr_assert_eq(o->dtype, DT_BF16);
    float *oh = malloc(sizeof(float) * tensor_numel(o));
    tensor_to_host(o, oh);
    cr_assert_eq(backward(op_sum_all(op_mul(op_cast(o, DT_F32), r))), ER_OK, "%s", er_msg());
    for (int i = 0; i < nleaf; i++) {
        g[i] = malloc(sizeof(float) * tensor_numel(leaf[i]));
        tensor_to_host(leaf[i]->grad, g[i]);
    }
    nn_step_end();
    for (int i = 0; i < nleaf; i++) tensor_free(leaf[i]);
    tensor_free(mask), tensor_free(r);
    return oh;
}

/* [B, H, T, D] packed copy of leaf operand i (0 q, 1 k, 2 v) from the host leaves, and back (a
 * packed [B, H, T, D] gradient into the leaf's layout) */
static int64_t leaf_at(const acase *a, int i, int b, int hh, int t, int d) {
    const int T = i ? a->Tk : a->Tq;
    return a->packed ? ((((int64_t)b * a->Tq + t) * 3 + i) * a->H + hh) * a->D + d : (((int64_t)b * a->H + hh) * T + t) * a->D + d;
}
static float *bhtd_of(const acase *a, float *const *xh, int i) {
    const int T = i ? a->Tk : a->Tq;
    float *h = malloc(sizeof(float) * (size_t)a->B * a->H * T * a->D);
    for (int b = 0; b < a->B; b++)
        for (int hh = 0; hh < a->H; hh++)
            for (int t = 0; t < T; t++)
                for (int d = 0; d < a->D; d++)
                    h[(((int64_t)b * a->H + hh) * T + t) * a->D + d] = xh[a->packed ? 0 : i][leaf_at(a, i, b, hh, t, d)];
    return h;
}

static float round_bf16(float x) { return er_bf16_to_f32(er_f32_to_bf16(x)); }

/* The device's fp32-storage kernels in bf16 compute on packed fp32 copies of the same values: o
 * (host, [B, H, Tq, D], not rounded) and the leaves' gradients of sum(round(o) * r) as the bf16 op must
 * give them, bit for bit: each rounded once (a fresh bf16 gradient), in the leaves' layout. */
static float *kernel_ref(const acase *a, float *const *xh, const float *maskh, const float *rh, float **gref) {
    const int B = a->B, H = a->H, Tq = a->Tq, Tk = a->Tk, D = a->D, T[3] = {Tq, Tk, Tk};
    float *dx[3], *dg[3];
    for (int i = 0; i < 3; i++) {
        float *h = bhtd_of(a, xh, i);
        const int64_t n = (int64_t)B * H * T[i] * D;
        dx[i] = devf(h, n);
        dg[i] = GPU->alloc(sizeof(float) * n);
        GPU->fill(dg[i], n, 0.0f);
        free(h);
    }
    const int64_t qs[3] = {(int64_t)H * Tq * D, (int64_t)Tq * D, D}, ks[3] = {(int64_t)H * Tk * D, (int64_t)Tk * D, D};
    const int64_t ms[4] = {0, 0, Tk, 1}, no = (int64_t)B * H * Tq * D;
    const float scale = 1.0f / sqrtf((float)D);
    float *dm = a->mask_kind != MASK_NONE ? devf(maskh, (int64_t)Tq * Tk) : NULL;
    float *dout = GPU->alloc(sizeof(float) * no), *dlse = GPU->alloc(sizeof(float) * (size_t)B * H * Tq);
    float *work = GPU->alloc(sizeof(float) * (GPU->attention_workspace(GEMM_COMPUTE_BF16, B, H, Tq, Tk, D) + 1));
    GPU->attention(GEMM_COMPUTE_BF16, B, H, Tq, Tk, D, scale, dx[0], qs, dx[1], ks, dx[2], ks, a->mask_kind, dm, ms, dout, qs,
                   dlse, work);
    float *o = host_of(dout, no), *orounded = malloc(sizeof(float) * no);
    for (int64_t j = 0; j < no; j++) orounded[j] = round_bf16(o[j]); /* the saved bf16 o, widened */
    float *dor = devf(orounded, no), *dr = devf(rh, no);             /* r is bf16-exact: dO */
    GPU->attention_backward(GEMM_COMPUTE_BF16, B, H, Tq, Tk, D, scale, dx[0], qs, dx[1], ks, dx[2], ks, a->mask_kind, dm,
                            ms, dor, qs, dr, qs, dlse, dg[0], qs, dg[1], ks, dg[2], ks, work);
    const int nleaf = a->packed ? 1 : 3;
    for (int i = 0; i < nleaf; i++) gref[i] = calloc((size_t)leaf_numel(a, i), sizeof(float));
    for (int i = 0; i < 3; i++) {
        float *g = host_of(dg[i], (int64_t)B * H * T[i] * D);
        for (int b = 0; b < B; b++)
            for (int hh = 0; hh < H; hh++)
                for (int t = 0; t < T[i]; t++)
                    for (int d = 0; d < D; d++)
                        gref[a->packed ? 0 : i][leaf_at(a, i, b, hh, t, d)] = round_bf16(g[(((int64_t)b * H + hh) * T[i] + t) * D + d]);
        free(g);
        GPU->free(dx[i]), GPU->free(dg[i]);
    }
    free(orounded);
    GPU->free(dm), GPU->free(dout), GPU->free(dlse), GPU->free(work), GPU->free(dor), GPU->free(dr);
    return o;
}

static void attention_bf16_case(const acase *a, uint32_t tag) {
    const int nleaf = a->packed ? 1 : 3;
    const int64_t no = (int64_t)a->B * a->H * a->Tq * a->D;
    float *xh[3], *gc[3], *gg[3], *gref[3];
    for (int i = 0; i < nleaf; i++) {
        xh[i] = rnd(leaf_numel(a, i), -2, 2, tag + i);
        for (int64_t j = 0; j < leaf_numel(a, i); j++) xh[i][j] = round_bf16(xh[i][j]);
    }
    float *maskh = rnd((int64_t)a->Tq * a->Tk, -1, 1, tag + 5), *rh = rnd(no, -1, 1, tag + 6);
    for (int64_t j = 0; j < no; j++) rh[j] = round_bf16(rh[j]);
    float *oc = attn_on(DEV_CPU, a, xh, maskh, rh, gc), *og = attn_on(GPU_DEV, a, xh, maskh, rh, gg);
    float *of = kernel_ref(a, xh, maskh, rh, gref);
    gpu_ok("bf16 attention");
    for (int64_t i = 0; i < no; i++)
        cr_assert_eq(er_f32_to_bf16(og[i]), er_f32_to_bf16(of[i]),
                     "D %d: device o[%lld] %.9g, the device kernel on fp32 copies gives %.9g", a->D, (long long)i, og[i], of[i]);
    for (int i = 0; i < nleaf; i++)
        for (int64_t j = 0; j < leaf_numel(a, i); j++)
            cr_assert(gg[i][j] == gref[i][j], "D %d: leaf %d gradient [%lld] %.9g, the device kernel on fp32 copies gives %.9g",
                      a->D, i, (long long)j, gg[i][j], gref[i][j]);
    float *d = devf(og, no);
    expect_close("bf16 attention o", oc, d, no, 2e-2);
    GPU->free(d);
    for (int i = 0; i < nleaf; i++) {
        d = devf(gg[i], leaf_numel(a, i));
        expect_close(i == 0 ? "bf16 attention dL/dq (or dL/dqkv)" : i == 1 ? "bf16 attention dL/dk" : "bf16 attention dL/dv",
                     gc[i], d, leaf_numel(a, i), 2e-2);
        GPU->free(d);
        free(gc[i]), free(gg[i]), free(xh[i]), free(gref[i]);
    }
    free(oc), free(og), free(of), free(maskh), free(rh);
}

PARITY_COVERS(attention_bf16);
PARITY_COVERS(attention_bf16_backward);
Test(cuda, attention_bf16_storage) {
    require_gpu();
    attention_bf16_case(&(acase){2, 3, 13, 13, 64, 1, MASK_NONE}, 800); /* ViT layout, head dim 64 */
    attention_bf16_case(&(acase){1, 3, 9, 5, 24, 0, MASK_ADD}, 810);    /* Tq != Tk, D 24, additive mask */
    attention_bf16_case(&(acase){2, 2, 20, 20, 32, 1, MASK_NONE}, 820);
    attention_bf16_case(&(acase){2, 2, 7, 11, 48, 0, MASK_NONE}, 830); /* cross-attention, three tensors */
}
/* The same with the flash kernels pinned (ENDORET_CUDA_ATTENTION=flash): their bf16-storage forward
 * and backward are bit for bit their fp32-storage ones on widened copies, as the wmma kernels are. */
Test(cuda, attention_bf16_storage_flash) {
    setenv("ENDORET_CUDA_ATTENTION", "flash", 1);
    require_gpu();
    attention_bf16_case(&(acase){2, 3, 13, 13, 64, 1, MASK_NONE}, 800);
    attention_bf16_case(&(acase){2, 2, 20, 20, 32, 1, MASK_NONE}, 820);
    attention_bf16_case(&(acase){2, 2, 7, 11, 48, 0, MASK_NONE}, 830);
}

/* ops.def attention_bf16_backward with accumulate = 0 (a fresh packed qkv gradient: no zero-fill):
 * q, k, v are the three views of one packed [B, T, 3, H, D] bf16 projection and their gradients the
 * same views of one packed buffer, which they cover. Filled with NaN and written (accumulate 0), the
 * buffer must come out bit for bit the one added into zeros (accumulate 1): every element written,
 * none read. On the device table (the tensor-core kernels: wmma, or flash when pinned) and on the
 * CPU's. Seen failing under the emulation with the flash dk/dv kernel's write turned back into an add. */
static int write_mode_case(const er_backend *be, int B, int H, int T, int D, uint32_t tag) {
    const int64_t nq = (int64_t)B * T * 3 * H * D, no = (int64_t)B * T * H * D;
    const int64_t xs[3] = {(int64_t)T * 3 * H * D, D, 3 * H * D}, os[3] = {(int64_t)T * H * D, D, H * D};
    uint16_t *hx = malloc(nq * 2), *hgo = malloc(no * 2), *hz = calloc(nq, 2), *hnan = malloc(nq * 2);
    float *fx = rnd(nq, -1, 1, tag), *fgo = rnd(no, -1, 1, tag + 1);
    for (int64_t i = 0; i < nq; i++) hx[i] = er_f32_to_bf16(fx[i]), hnan[i] = 0x7FC0;
    for (int64_t i = 0; i < no; i++) hgo[i] = er_f32_to_bf16(fgo[i]);
    uint16_t *x = be->alloc(nq * 2), *go = be->alloc(no * 2), *o = be->alloc(no * 2), *g1 = be->alloc(nq * 2),
             *g0 = be->alloc(nq * 2);
    float *lse = be->alloc((size_t)B * H * T * 4);
    float *work = work_of(be, be->attention_workspace(GEMM_COMPUTE_BF16, B, H, T, T, D));
    be->upload(x, hx, nq * 2), be->upload(go, hgo, no * 2), be->upload(g1, hz, nq * 2), be->upload(g0, hnan, nq * 2);
    const float scale = 1.0f / sqrtf((float)D);
    const int ran = be->attention_bf16(B, H, T, T, D, scale, x, xs, x + H * D, xs, x + 2 * H * D, xs, o, os, lse, work);
    if (!ran) cr_log_info("%s: no direct bf16 kernel for B %d H %d T %d D %d (a CPU without AVX512_BF16)", be->name, B, H, T, D);
    for (int acc = 1; ran && acc >= 0; acc--) {
        uint16_t *g = acc ? g1 : g0;
        cr_assert_eq(be->attention_bf16_backward(B, H, T, T, D, scale, x, xs, x + H * D, xs, x + 2 * H * D, xs, o, os, go, os,
                                                 lse, g, xs, g + H * D, xs, g + 2 * H * D, xs, acc, work),
                     1, "%s: backward declined", be->name);
    }
    be->synchronize();
    cr_assert_null(be->last_error ? be->last_error() : NULL);
    uint16_t *r1 = malloc(nq * 2), *r0 = malloc(nq * 2);
    be->download(r1, g1, nq * 2), be->download(r0, g0, nq * 2);
    int64_t diff = 0, first = -1, nonzero = 0;
    for (int64_t i = 0; ran && i < nq; i++) {
        if (r1[i] != r0[i] && first < 0) first = i;
        diff += r1[i] != r0[i];
        nonzero += (r1[i] & 0x7FFF) != 0;
    }
    cr_expect_eq(diff, 0, "%s B %d H %d T %d D %d: %lld of %lld gradient elements differ written vs added into zeros "
                 "(first %lld: 0x%04x vs 0x%04x)", be->name, B, H, T, D, (long long)diff, (long long)nq, (long long)first,
                 first >= 0 ? r0[first] : 0, first >= 0 ? r1[first] : 0);
    if (ran)
        cr_expect_gt(nonzero, nq / 2, "%s: the gradient is mostly zero (%lld of %lld nonzero)", be->name, (long long)nonzero,
                     (long long)nq);
    be->free(x), be->free(go), be->free(o), be->free(g1), be->free(g0), be->free(lse), be->free(work);
    free(hx), free(hgo), free(hz), free(hnan), free(fx), free(fgo), free(r1), free(r0);
    return ran;
}

/* the cases run by the table's direct kernel; the device's tensor-core path takes all three */
static int write_mode_cases(const er_backend *be) {
    return write_mode_case(be, 2, 3, 50, 64, 840) + /* the MAE encoder's head */
           write_mode_case(be, 1, 2, 197, 32, 850) + /* its decoder's, partial tiles */
           write_mode_case(be, 1, 1, 5, 16, 860);    /* tiny */
}
Test(cuda, attention_bf16_backward_writes_without_reading) {
    require_gpu();
    write_mode_cases(CPU); /* the CPU's direct kernels need AVX512_BF16 */
    const int n = write_mode_cases(GPU);
    if (!SELFTEST) cr_expect_eq(n, 3, "the tensor-core path took %d of the 3 cases", n);
}
Test(cuda, attention_bf16_backward_writes_without_reading_flash) {
    setenv("ENDORET_CUDA_ATTENTION", "flash", 1);
    require_gpu();
    const int n = write_mode_cases(GPU);
    if (!SELFTEST) cr_expect_eq(n, 3, "the flash kernels took %d of the 3 cases", n);
}
