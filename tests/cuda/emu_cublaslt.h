/* emu_cublaslt.h — a host stand-in for the part of cuBLASLt that kernels/cuda/gemm_ex.cu uses
 * (included by emu_cuda.h): descriptors that keep their attributes, a heuristic that always offers
 * one algorithm, and cublasLtMatmul as a column-major reference loop
 *     D = alpha op(A) op(B) + beta C (+ bias[row of D] with CUBLASLT_EPILOGUE_BIAS)
 * and the bias-gradient epilogues writing to the bias pointer: BGRADA the sums over k of op(A)'s
 * rows (one per row of D), BGRADB the sums over k of op(B)'s columns (one per column of D)
 * that refuses (CUBLAS_STATUS_INVALID_VALUE) layouts whose sizes do not chain: a row-major ->
 * column-major mapping with m and n swapped, or a transpose flag that disagrees with its layout,
 * fails the call instead of computing something. bf16 compute rounds the inputs as the cuBLAS
 * stand-in does. Layouts keep their type: CUDA_R_16BF operands are read as bf16 bits, a CUDA_R_16BF
 * D is written rounded to nearest even once (after the epilogue, as cuBLASLt); the heuristic offers
 * nothing, as cuBLASLt, for A and B of different types or C and D of different types. */
#ifndef ENDORET_EMU_CUBLASLT_H
#define ENDORET_EMU_CUBLASLT_H

typedef cudaDataType cudaDataType_t;
typedef enum {
    CUBLASLT_EPILOGUE_DEFAULT = 1,
    CUBLASLT_EPILOGUE_BIAS = 4,
    CUBLASLT_EPILOGUE_BGRADA = 256,
    CUBLASLT_EPILOGUE_BGRADB = 512
} cublasLtEpilogue_t;
typedef enum {
    CUBLASLT_MATMUL_DESC_TRANSA = 3,
    CUBLASLT_MATMUL_DESC_TRANSB = 4,
    CUBLASLT_MATMUL_DESC_EPILOGUE = 7,
    CUBLASLT_MATMUL_DESC_BIAS_POINTER = 8,
    CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE = 26
} cublasLtMatmulDescAttributes_t;
typedef enum { CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1 } cublasLtMatmulPreferenceAttributes_t;

struct emu_lt_handle { int unused; };
struct emu_lt_desc {
    cublasComputeType_t compute;
    cublasOperation_t ta = CUBLAS_OP_N, tb = CUBLAS_OP_N;
    int epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    const float *bias = nullptr;
};
struct emu_lt_layout { uint64_t rows, cols; int64_t ld; cudaDataType_t type; };
struct emu_lt_pref { size_t ws = 0; };
typedef emu_lt_handle *cublasLtHandle_t;
typedef emu_lt_desc *cublasLtMatmulDesc_t;
typedef emu_lt_layout *cublasLtMatrixLayout_t;
typedef emu_lt_pref *cublasLtMatmulPreference_t;
typedef struct { uint64_t data[8]; } cublasLtMatmulAlgo_t;
typedef struct {
    cublasLtMatmulAlgo_t algo;
    size_t workspaceSize;
    cublasStatus_t state;
    float wavesCount;
    int reserved[4];
} cublasLtMatmulHeuristicResult_t;

static inline size_t cublasLtGetVersion(void) { return 130100; }
static inline const char *cublasLtGetStatusString(cublasStatus_t s) { return s ? "emulated cuBLASLt error" : "success"; }
static inline cublasStatus_t cublasLtCreate(cublasLtHandle_t *h) {
    static emu_lt_handle one;
    *h = &one;
    return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d, cublasComputeType_t ct, cudaDataType_t) {
    *d = new emu_lt_desc;
    (*d)->compute = ct;
    return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t at,
                                                            const void *buf, size_t n) {
    switch (at) {
    case CUBLASLT_MATMUL_DESC_TRANSA: memcpy(&d->ta, buf, n); break;
    case CUBLASLT_MATMUL_DESC_TRANSB: memcpy(&d->tb, buf, n); break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE: memcpy(&d->epilogue, buf, n); break;
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: memcpy(&d->bias, buf, n); break;
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: break; /* fp32 is the only type here */
    }
    return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l, cudaDataType_t t, uint64_t rows,
                                                        uint64_t cols, int64_t ld) {
    if (ld < (int64_t)rows) return CUBLAS_STATUS_INVALID_VALUE; /* column-major: ld >= rows */
    *l = new emu_lt_layout{rows, cols, ld, t};
    return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p) {
    *p = new emu_lt_pref;
    return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p,
                                                                  cublasLtMatmulPreferenceAttributes_t, const void *buf,
                                                                  size_t n) {
    memcpy(&p->ws, buf, n);
    return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) {
    delete p;
    return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t, cublasLtMatmulDesc_t, cublasLtMatrixLayout_t la,
                                                            cublasLtMatrixLayout_t lb, cublasLtMatrixLayout_t lc,
                                                            cublasLtMatrixLayout_t ld, cublasLtMatmulPreference_t, int n,
                                                            cublasLtMatmulHeuristicResult_t *res, int *found) {
    memset(res, 0, sizeof *res);
    *found = n > 0 && la->type == lb->type && lc->type == ld->type;
    return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasLtMatmul(cublasLtHandle_t, cublasLtMatmulDesc_t d, const void *alpha, const void *A,
                                            cublasLtMatrixLayout_t la, const void *B, cublasLtMatrixLayout_t lb,
                                            const void *beta, const void *C, cublasLtMatrixLayout_t lc, void *D,
                                            cublasLtMatrixLayout_t ld, const cublasLtMatmulAlgo_t *, void *, size_t,
                                            cudaStream_t) {
    uint64_t m = d->ta == CUBLAS_OP_N ? la->rows : la->cols, k = d->ta == CUBLAS_OP_N ? la->cols : la->rows;
    uint64_t kb = d->tb == CUBLAS_OP_N ? lb->rows : lb->cols, n = d->tb == CUBLAS_OP_N ? lb->cols : lb->rows;
    if (k != kb || lc->rows != m || lc->cols != n || ld->rows != m || ld->cols != n) return CUBLAS_STATUS_INVALID_VALUE;
    if (la->type != lb->type || lc->type != ld->type) return CUBLAS_STATUS_INVALID_VALUE;
    const cudaDataType_t tab = la->type, tcd = ld->type;
    float al = *(const float *)alpha, be = *(const float *)beta;
    std::vector<float> out(m * n);
    for (uint64_t j = 0; j < n; j++)
        for (uint64_t i = 0; i < m; i++) {
            double s = 0;
            for (uint64_t l = 0; l < k; l++) {
                float x = emu_load(tab, A, d->ta == CUBLAS_OP_N ? i + l * la->ld : l + i * la->ld);
                float y = emu_load(tab, B, d->tb == CUBLAS_OP_N ? l + j * lb->ld : j + l * lb->ld);
                if (d->compute == CUBLAS_COMPUTE_32F_FAST_16BF) {
                    x = emu_bf16(x);
                    y = emu_bf16(y);
                }
                s += (double)x * y;
            }
            float v = (float)(al * s);
            if (be != 0.0f) v += be * emu_load(tcd, C, i + j * lc->ld);
            if (d->epilogue == CUBLASLT_EPILOGUE_BIAS) v += d->bias[i];
            out[i + j * m] = v;
        }
    if (d->epilogue == CUBLASLT_EPILOGUE_BGRADA || d->epilogue == CUBLASLT_EPILOGUE_BGRADB) {
        const bool ga = d->epilogue == CUBLASLT_EPILOGUE_BGRADA;
        float *g = (float *)d->bias;
        for (uint64_t r = 0; r < (ga ? m : n); r++) {
            double s = 0;
            for (uint64_t l = 0; l < k; l++)
                s += ga ? emu_load(tab, A, d->ta == CUBLAS_OP_N ? r + l * la->ld : l + r * la->ld)
                        : emu_load(tab, B, d->tb == CUBLAS_OP_N ? l + r * lb->ld : r + l * lb->ld);
            g[r] = (float)s;
        }
    }
    for (uint64_t j = 0; j < n; j++) /* written after reading: C may be D */
        for (uint64_t i = 0; i < m; i++) {
            float v = out[i + j * m];
            if (tcd == CUDA_R_16BF) { /* round to nearest even once, NaN kept quiet (kernels/dtype.h) */
                uint32_t u;
                memcpy(&u, &v, 4);
                u = (u & 0x7FFFFFFFu) > 0x7F800000u ? (u | 0x400000u) : u + 0x7FFFu + ((u >> 16) & 1u);
                ((uint16_t *)D)[i + j * ld->ld] = (uint16_t)(u >> 16);
            } else {
                ((float *)D)[i + j * ld->ld] = v;
            }
        }
    return CUBLAS_STATUS_SUCCESS;
}

#endif
