/* gemm_ex.cu — cu_gemm_ex: one product with its epilogue (kernels/gemm_ex_args.h) through cuBLASLt,
 * mirroring cpu_gemm_ex (kernels/cpu/gemm_ex.c). The bias rides in CUBLASLT_EPILOGUE_BIAS and the
 * residual in the C operand, so a linear layer and the residual add after it cost one kernel
 * instead of three passes over the output (the ViT step had 168 such adds).
 *
 * Row-major D = op(A) op(B) is column-major D^T = op(B)^T op(A)^T, so cuBLASLt's "A" is our B and
 * its "B" is our A (as gemm.cu); the bias, indexed by our column n, runs along the rows of D^T,
 * which is what the epilogue broadcasts. Without a C term, C is D with beta 0 (never read).
 *
 * The algorithm comes from cuBLASLt's heuristic once per shape, transposes, leading dimensions,
 * compute type, epilogue and operand alignment, and is cached with its descriptors (asking per call
 * cost ResNet 227 ms a step with cuDNN's). A case the heuristic refuses, or every case when
 * ENDORET_CUDA_GEMM_EX=split, runs as the plain product (cu_gemm_batched) and one kernel adding
 * bias then beta C, in the CPU's order. The handle and a 32 MiB workspace are made on first use,
 * like the cuDNN handle.
 *
 * The bias-gradient epilogue (a weight-gradient product dW = dY^T X, op(A) = dY^T): our op(A) is
 * cuBLASLt's op(B), and our m its columns of D, so it is CUBLASLT_EPILOGUE_BGRADB (BGRADA would sum
 * our B, x, over the wrong side). cuBLASLt writes the gradient; ours accumulates, so it lands in a
 * cached device vector and one small kernel adds it. The split path is the plain product and
 * sum_to's column sums, as cpu_gemm_ex.
 *
 * Storage types (issue #27): bf16 A and B are CUDA_R_16BF operands of a CUBLAS_COMPUTE_32F product
 * (their values are bf16 already, so this is GEMM_COMPUTE_BF16's arithmetic without the fast-path
 * rounding); a bf16 C and D are CUDA_R_16BF layouts (cuBLASLt rounds D once, after its epilogue);
 * the bias stays fp32. cuBLASLt wants C and D of one type: a C of the other type, or a case its
 * heuristic refuses (a bias type it does not pair with a bf16 D, say), runs the split path, whose
 * product goes to the caller's `work` when D is bf16 and whose epilogue kernel rounds D once, as
 * cpu_gemm_ex does. A and B of different types are refused (cuBLAS has no such product). The plan
 * cache is keyed on the four types too. */
#include <cublasLt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mutex>
#include <unordered_map>

#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/gemm_ex.h"

#define LT_WORKSPACE ((size_t)32 << 20)

struct lt_key {
    int ta, tb, m, n, k, lda, ldb, ldc, ldd, has_c, has_bias, has_bgrad, compute, align;
    int a_type, b_type, c_type, d_type;
    bool operator==(const lt_key &o) const { return !memcmp(this, &o, sizeof o); }
};
struct lt_key_hash {
    size_t operator()(const lt_key &k) const {
        const unsigned char *p = (const unsigned char *)&k;
        size_t h = 1469598103934665603ull;
        for (size_t i = 0; i < sizeof k; i++) h = (h ^ p[i]) * 1099511628211ull;
        return h;
    }
};
struct lt_plan {
    bool ok; /* false: the heuristic had no algorithm; the split path runs */
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t a, b, c, d;
    cublasLtMatmulAlgo_t algo;
};

static std::mutex g_lt_mu;
static cublasLtHandle_t g_lt = NULL;
static void *g_lt_ws = NULL;
static std::unordered_map<lt_key, lt_plan, lt_key_hash> g_lt_plans;
static float *g_bgrad = NULL; /* the BGRADB epilogue's output, added to the caller's gradient */
static size_t g_bgrad_n = 0;

/* 1 = cuBLASLt with its epilogue, 0 = split; another value is recorded as an error */
static int lt_wanted(void) {
    const char *e = getenv("ENDORET_CUDA_GEMM_EX");
    if (!e || !*e || !strcmp(e, "lt")) return 1;
    if (!strcmp(e, "split")) return 0;
    cuda_record_msg("ENDORET_CUDA_GEMM_EX: expected lt or split", __FILE__, __LINE__);
    return 1;
}

static bool lt_status(cublasStatus_t st, const char *what, const gemm_ex_args *a) {
    if (st == CUBLAS_STATUS_SUCCESS) return true;
    char msg[240];
    snprintf(msg, sizeof msg, "gemm_ex: %s (m=%d n=%d k=%d): %s", what, a->m, a->n, a->k, cublasLtGetStatusString(st));
    cuda_record_msg(msg, __FILE__, __LINE__);
    return false;
}

/* The plan of this case, made (descriptors, heuristic) the first time it is seen. */
static lt_plan *lt_plan_for(const gemm_ex_args *a, const lt_key &key) {
    auto it = g_lt_plans.find(key);
    if (it != g_lt_plans.end()) return &it->second;
    if (!g_lt) {
        if (!lt_status(cublasLtCreate(&g_lt), "cublasLtCreate", a)) return NULL;
        if (CUDA_CHECK(cudaMalloc(&g_lt_ws, LT_WORKSPACE))) return NULL;
    }
    lt_plan p = {};
    const bool ab16 = a->a_type == GEMM_BF16; /* B's type is A's (checked by cu_gemm_ex) */
    cublasComputeType_t ct = !ab16 && a->compute == GEMM_COMPUTE_BF16 ? CUBLAS_COMPUTE_32F_FAST_16BF : CUBLAS_COMPUTE_32F;
    cudaDataType_t tab = ab16 ? CUDA_R_16BF : CUDA_R_32F, tcd = a->d_type == GEMM_BF16 ? CUDA_R_16BF : CUDA_R_32F;
    cublasOperation_t opa = a->transB ? CUBLAS_OP_T : CUBLAS_OP_N, opb = a->transA ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasLtEpilogue_t epi = a->bias_grad ? CUBLASLT_EPILOGUE_BGRADB : a->bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    cudaDataType_t f32 = CUDA_R_32F;
    bool ok = lt_status(cublasLtMatmulDescCreate(&p.desc, ct, CUDA_R_32F), "MatmulDescCreate", a) &&
              lt_status(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa), "TRANSA", a) &&
              lt_status(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb), "TRANSB", a) &&
              lt_status(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi), "EPILOGUE", a);
    if (ok && (a->bias || a->bias_grad)) { /* the gradient's pointer is set per call (g_bgrad may grow) */
        const void *bp = a->bias_grad ? (const void *)g_bgrad : (const void *)a->bias;
        ok = lt_status(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &f32, sizeof f32), "BIAS_DATA_TYPE", a) &&
             lt_status(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bp, sizeof bp), "BIAS_POINTER", a);
    }
    /* column-major: cuBLASLt's A is our B (n x k after op), its B our A (k x m), C and D n x m */
    ok = ok && lt_status(cublasLtMatrixLayoutCreate(&p.a, tab, a->transB ? a->k : a->n, a->transB ? a->n : a->k, a->ldb), "layout A", a) &&
         lt_status(cublasLtMatrixLayoutCreate(&p.b, tab, a->transA ? a->m : a->k, a->transA ? a->k : a->m, a->lda), "layout B", a) &&
         lt_status(cublasLtMatrixLayoutCreate(&p.c, tcd, a->n, a->m, a->C ? a->ldc : a->ldd), "layout C", a) &&
         lt_status(cublasLtMatrixLayoutCreate(&p.d, tcd, a->n, a->m, a->ldd), "layout D", a);
    if (ok) {
        cublasLtMatmulPreference_t pref = NULL;
        size_t ws = LT_WORKSPACE;
        cublasLtMatmulHeuristicResult_t res = {};
        int found = 0;
        ok = lt_status(cublasLtMatmulPreferenceCreate(&pref), "PreferenceCreate", a) &&
             lt_status(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws), "workspace", a);
        /* a refusal is no error: the split path runs this case */
        if (ok && cublasLtMatmulAlgoGetHeuristic(g_lt, p.desc, p.a, p.b, p.c, p.d, pref, 1, &res, &found) == CUBLAS_STATUS_SUCCESS &&
            found > 0 && res.state == CUBLAS_STATUS_SUCCESS) {
            p.algo = res.algo;
            p.ok = true;
        }
        if (pref) cublasLtMatmulPreferenceDestroy(pref);
    }
    return &(g_lt_plans[key] = p);
}

/* D = (R + bias) + beta C, row by row: the split path's epilogue, in cpu_gemm_ex's order (a block per
 * row, no index division: it measured 0.2 ms on a 6304 x 3072 output with one). R is the fp32
 * product (D itself when D is fp32); C and D are fp32 or bf16 (c16, d16), a bf16 D rounded once. */
__global__ void k_gemm_epilogue(int m, int n, const float *R, int ldr, const float *bias, const void *C, int c16, int ldc,
                                float beta, void *D, int d16, int ldd) {
    for (int64_t i = blockIdx.x; i < m; i += gridDim.x) {
        const float *r = R + i * ldr;
        for (int j = threadIdx.x; j < n; j += blockDim.x) {
            float v = r[j];
            if (bias) v = v + bias[j];
            if (C) {
                float c = c16 ? cu_bf16_to_f32(((const uint16_t *)C)[i * ldc + j]) : ((const float *)C)[i * ldc + j];
                v = beta == 1.0f ? c + v : beta * c + v;
            }
            if (d16) ((uint16_t *)D)[i * ldd + j] = cu_f32_to_bf16(v);
            else ((float *)D)[i * ldd + j] = v;
        }
    }
}

/* dst[i, j] = widen(src[i, j]): a bf16 D that is also C, into the fp32 result it accumulates into */
__global__ void k_widen_rows(int m, int n, const uint16_t *src, int lds, float *dst, int ldd) {
    for (int64_t i = blockIdx.x; i < m; i += gridDim.x)
        for (int j = threadIdx.x; j < n; j += blockDim.x) dst[i * ldd + j] = cu_bf16_to_f32(src[i * lds + j]);
}

/* g[i] += v[i]: the BGRADB output into the caller's (accumulated) bias gradient */
__global__ void k_add_vec(int64_t n, const float *v, float *g) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) g[i] = g[i] + v[i];
}

/* R = alpha op(A) op(B) + beta R with bf16 A and B (cu_gemm_batched's mapping, 16BF operands, 32F compute) */
static void product_bf16(const gemm_ex_args *a, float beta, float *R, int ldr) {
    cublasHandle_t h = cuda_cublas();
    if (!h) {
        cuda_record_msg("gemm_ex: no cuBLAS handle (no CUDA device)", __FILE__, __LINE__);
        return;
    }
    cublasStatus_t st = cublasGemmStridedBatchedEx(h, a->transB ? CUBLAS_OP_T : CUBLAS_OP_N, a->transA ? CUBLAS_OP_T : CUBLAS_OP_N,
                                                   a->n, a->m, a->k, &a->alpha, a->B, CUDA_R_16BF, a->ldb, 0, a->A, CUDA_R_16BF,
                                                   a->lda, 0, &beta, R, CUDA_R_32F, ldr, 0, 1, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (st != CUBLAS_STATUS_SUCCESS) {
        char msg[200];
        snprintf(msg, sizeof msg, "gemm_ex: cublasGemmStridedBatchedEx bf16 (m=%d n=%d k=%d): %s", a->m, a->n, a->k,
                 cublasGetStatusString(st));
        cuda_record_msg(msg, __FILE__, __LINE__);
    }
}

static void gemm_ex_split(const gemm_ex_args *a) {
    if (a->bias_grad) { /* the column sums of the stored A [k, m], as cpu_gemm_ex */
        int64_t xs[2] = {a->k, a->m}, ys[2] = {1, a->m};
        cu_sum_to(2, xs, (const float *)a->A, ys, a->bias_grad, 1, a->work);
    }
    const bool d16 = a->d_type == GEMM_BF16, alias = a->C && a->C == a->D;
    /* the fp32 result: D, or the caller's work (m x n) before a bf16 D's one rounding */
    float *R = d16 ? a->work : (float *)a->D;
    const int ldr = d16 ? a->n : a->ldd;
    unsigned rows = a->m < 65535 * 8 ? (unsigned)a->m : 65535u * 8;
    if (alias && d16 && a->beta != 0.0f) { /* C is D: accumulate into its widened copy, as the CPU */
        k_widen_rows<<<rows, 256, 0, cuda_stream()>>>(a->m, a->n, (const uint16_t *)a->D, a->ldd, R, ldr);
        CUDA_LAUNCHED("gemm_ex widen C");
    }
    const float beta0 = alias ? a->beta : 0.0f;
    if (a->a_type == GEMM_BF16)
        product_bf16(a, beta0, R, ldr);
    else
        cu_gemm_batched(a->compute, a->transA, a->transB, a->m, a->n, a->k, a->alpha, (const float *)a->A, a->lda, 0,
                        (const float *)a->B, a->ldb, 0, beta0, R, ldr, 0, 1);
    const void *C = alias ? NULL : a->C;
    if (!a->bias && !C && !d16) return;
    k_gemm_epilogue<<<rows, 256, 0, cuda_stream()>>>(a->m, a->n, R, ldr, a->bias, C, a->c_type == GEMM_BF16, a->ldc, a->beta,
                                                     a->D, d16, a->ldd);
    CUDA_LAUNCHED("gemm_ex epilogue");
}

static int aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }

static lt_key lt_key_of(const gemm_ex_args *a) {
    return lt_key{a->transA, a->transB, a->m, a->n, a->k, a->lda, a->ldb, a->C ? a->ldc : 0, a->ldd, a->C != NULL,
                  a->bias != NULL, a->bias_grad != NULL, a->compute,
                  aligned16(a->A) | aligned16(a->B) << 1 | aligned16(a->C) << 2 | aligned16(a->D) << 3 | aligned16(a->bias) << 4,
                  a->a_type, a->b_type, a->c_type, a->d_type};
}

int cu_gemm_ex_has_algo(const gemm_ex_args *a) {
    std::lock_guard<std::mutex> lk(g_lt_mu);
    lt_plan *p = lt_plan_for(a, lt_key_of(a));
    return p ? p->ok : -1;
}

/* NULL when the arguments are a valid call, else what is wrong (cpu_gemm_ex's rules, plus one type for A and B) */
static const char *gemm_ex_invalid(const gemm_ex_args *a) {
    auto ok = [](int t) { return t == GEMM_F32 || t == GEMM_BF16; };
    if (!ok(a->a_type) || !ok(a->b_type) || !ok(a->c_type) || !ok(a->d_type)) return "operand types must be GEMM_F32 or GEMM_BF16";
    if (a->compute != GEMM_COMPUTE_FP32 && a->compute != GEMM_COMPUTE_BF16) return "compute must be fp32 or bf16";
    if ((a->a_type == GEMM_BF16 || a->b_type == GEMM_BF16) && a->compute != GEMM_COMPUTE_BF16)
        return "a bf16 A or B needs GEMM_COMPUTE_BF16";
    if (a->a_type != a->b_type) return "A and B of different types (no cuBLAS product takes them)";
    if (a->bias_grad && !(a->transA && a->lda == a->m && a->alpha == 1.0f && !a->bias))
        return "the bias-gradient epilogue needs transA, a packed A, alpha 1 and no bias";
    if (a->bias_grad && (a->a_type | a->b_type | a->c_type | a->d_type) != GEMM_F32)
        return "the bias-gradient epilogue takes fp32 operands only";
    if (a->C && a->C == a->D && a->c_type != a->d_type) return "C is D but their types differ";
    return NULL;
}

void cu_gemm_ex(const gemm_ex_args *a) {
    if (const char *bad = gemm_ex_invalid(a)) {
        char msg[200];
        snprintf(msg, sizeof msg, "gemm_ex: %s (types A %d B %d C %d D %d, compute %d)", bad, a->a_type, a->b_type, a->c_type,
                 a->d_type, a->compute);
        cuda_record_msg(msg, __FILE__, __LINE__);
        return;
    }
    if (a->m <= 0 || (a->n <= 0 && !a->bias_grad)) return;
    /* cuBLASLt works in place only with C's layout equal to D's, and with C and D of one type; the
     * split path needs `work` for a bf16 D */
    /* cuBLASLt takes a bf16 D only from bf16 A and B: with fp32 A/B and FAST_16BF compute its D must be
     * fp32 (the H100 ran that case and left D unwritten, with no error and an algorithm from the heuristic) */
    const bool lt_types = (!a->C || a->c_type == a->d_type) && (a->a_type == GEMM_BF16 || a->d_type == GEMM_F32);
    if (!lt_wanted() || a->k <= 0 || a->n <= 0 || (a->C && a->C == a->D && a->ldc != a->ldd) || !lt_types) {
        if (gemm_ex_work_floats(a) && !a->work) {
            cuda_record_msg("gemm_ex: a bf16 D on the split path needs work (gemm_ex_work_floats)", __FILE__, __LINE__);
            return;
        }
        gemm_ex_split(a);
        return;
    }
    std::lock_guard<std::mutex> lk(g_lt_mu);
    if (a->bias_grad && g_bgrad_n < (size_t)a->m) { /* before the plan: its pointer attribute is set below */
        if (g_bgrad) cudaFree(g_bgrad);
        g_bgrad = NULL, g_bgrad_n = 0;
        if (CUDA_CHECK(cudaMalloc(&g_bgrad, (size_t)a->m * sizeof(float)))) return;
        g_bgrad_n = (size_t)a->m;
    }
    lt_plan *p = lt_plan_for(a, lt_key_of(a));
    if (!p) return;
    if (!p->ok) {
        if (gemm_ex_work_floats(a) && !a->work) {
            cuda_record_msg("gemm_ex: a bf16 D on the split path needs work (gemm_ex_work_floats)", __FILE__, __LINE__);
            return;
        }
        gemm_ex_split(a);
        return;
    }
    const void *bp = a->bias_grad ? (const void *)g_bgrad : (const void *)a->bias;
    if (bp && !lt_status(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bp, sizeof bp), "BIAS_POINTER", a))
        return;
    const float beta = a->C ? a->beta : 0.0f;
    const void *C = a->C ? a->C : a->D;
    if (!lt_status(cublasLtMatmul(g_lt, p->desc, &a->alpha, a->B, p->a, a->A, p->b, &beta, C, p->c, a->D, p->d, &p->algo,
                                  g_lt_ws, LT_WORKSPACE, cuda_stream()),
                   "cublasLtMatmul", a))
        return;
    if (a->bias_grad) {
        k_add_vec<<<cuda_blocks(a->m, 256), 256, 0, cuda_stream()>>>(a->m, g_bgrad, a->bias_grad);
        CUDA_LAUNCHED("gemm_ex bias gradient");
    }
}
