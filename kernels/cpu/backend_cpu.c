/* backend_cpu.c — the CPU op table, storage functions and strided data movement. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <omp.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/profile.h"
#include "nn/base/base.h"

#pragma weak backend_cuda

/* Large buffers (arena chunks of activations, big weights) on 2 MB boundaries with transparent huge
 * pages asked for (the kernel's default here is `madvise`): a ResNet-50 training step touches
 * gigabytes, and 4 KB pages cost a TLB miss every few rows of a big GEMM operand. */
static void *cpu_alloc(size_t bytes) {
    const size_t huge = (size_t)2 << 20;
    if (bytes < 2 * huge) return xmalloc_aligned(bytes ? bytes : 64);
    size_t rounded = (bytes + huge - 1) / huge * huge;
    void *p = NULL;
    if (posix_memalign(&p, huge, rounded)) return xmalloc_aligned(bytes);
#ifdef MADV_HUGEPAGE
    madvise(p, rounded, MADV_HUGEPAGE); /* a hint: without THP the pages are simply small */
#endif
    return p;
}
static void cpu_free(void *p) { free(p); }
static void cpu_copy(void *dst, const void *src, size_t n) {
    if (n) memmove(dst, src, n);
}

int cpu_coalesce(int ndim, int64_t *shape, int64_t *const *strides, int nstr) {
    int nd = 0;
    for (int i = 0; i < ndim; i++) { /* drop size-1 dims */
        if (shape[i] == 1) continue;
        shape[nd] = shape[i];
        for (int s = 0; s < nstr; s++) strides[s][nd] = strides[s][i];
        nd++;
    }
    if (nd == 0) {
        shape[0] = 1;
        for (int s = 0; s < nstr; s++) strides[s][0] = 1;
        return 1;
    }
    int out = 0;
    for (int i = 1; i < nd; i++) {
        int merge = 1;
        for (int s = 0; s < nstr; s++)
            if (strides[s][out] != strides[s][i] * shape[i]) merge = 0;
        if (merge) {
            shape[out] *= shape[i];
            for (int s = 0; s < nstr; s++) strides[s][out] = strides[s][i];
        } else {
            out++;
            shape[out] = shape[i];
            for (int s = 0; s < nstr; s++) strides[s][out] = strides[s][i];
        }
    }
    return out + 1;
}

void cpu_fill(float *y, int64_t n, float v) {
    #pragma omp parallel for simd if (n > CPU_PAR_MIN * 4)
    for (int64_t i = 0; i < n; i++) y[i] = v;
}

void cpu_copy_strided(int ndim, const int64_t *shape0, const float *x, const int64_t *xs0, float *y,
                      const int64_t *ys0, int accumulate) {
    cpu_copy_plan p;
    cpu_copy_plan_make(&p, ndim, shape0, xs0, ys0);
    const int64_t *shape = p.shape, *xs = p.xs, *ys = p.ys;
    const int nd = p.nd;
    const int64_t inner = p.inner, sx = p.sx, sy = p.sy, outer = p.outer;
    /* Blocks of at most CHUNK inner elements, so one long row still spreads over threads. Each
     * thread takes a contiguous range of blocks and walks the outer index with a carry counter
     * (one div/mod per thread, not per block: rows of e.g. 64 floats in a head split/merge). */
    const int64_t CHUNK = 8192;
    int64_t nchunk = (inner + CHUNK - 1) / CHUNK, nblk = outer * nchunk;
    #pragma omp parallel if (outer * inner > CPU_PAR_MIN)
    {
        int nt = omp_get_num_threads(), t = omp_get_thread_num();
        int64_t b0 = nblk * t / nt, b1 = nblk * (t + 1) / nt;
        int64_t idx[ER_MAX_DIMS + 1], xo = 0, yo = 0, r = b0 / nchunk, ch = b0 % nchunk;
        for (int d = nd - 2; d >= 0; d--) {
            idx[d] = r % shape[d];
            r /= shape[d];
            xo += idx[d] * xs[d];
            yo += idx[d] * ys[d];
        }
        for (int64_t blk = b0; blk < b1; blk++) {
            int64_t c0 = ch * CHUNK, len = inner - c0 < CHUNK ? inner - c0 : CHUNK;
            const float *xp = x + xo + c0 * sx;
            float *yp = y + yo + c0 * sy;
            if (sx == 1 && sy == 1) {
                if (accumulate) {
                    #pragma omp simd
                    for (int64_t i = 0; i < len; i++) yp[i] += xp[i];
                } else {
                    memcpy(yp, xp, (size_t)len * sizeof(float));
                }
            } else if (accumulate) {
                for (int64_t i = 0; i < len; i++) yp[i * sy] += xp[i * sx];
            } else {
                for (int64_t i = 0; i < len; i++) yp[i * sy] = xp[i * sx];
            }
            if (++ch < nchunk) continue;
            ch = 0;
            for (int d = nd - 2; d >= 0; d--) { /* next outer index, with carry */
                xo += xs[d];
                yo += ys[d];
                if (++idx[d] < shape[d]) break;
                xo -= xs[d] * shape[d];
                yo -= ys[d] * shape[d];
                idx[d] = 0;
            }
        }
    }
}

/* Fast path of sum_to: y keeps a suffix of x's dims and is 1 on the leading ones (bias
 * gradients): a column sum over rows. Sets *rows, *cols and returns 1 when it applies. */
static int sum_to_as_columns(int ndim, const int64_t *xshape, const int64_t *yshape, int64_t *rows,
                             int64_t *cols) {
    int lead = 0;
    while (lead < ndim && yshape[lead] == 1) lead++;
    if (lead == 0) return 0;
    for (int i = lead; i < ndim; i++)
        if (yshape[i] != xshape[i]) return 0;
    *rows = *cols = 1;
    for (int i = 0; i < lead; i++) *rows *= xshape[i];
    for (int i = lead; i < ndim; i++) *cols *= xshape[i];
    return 1;
}

/* The column-sum path: cpu_reduce_strided_cols's scratch (first: its doubles stay aligned), then
 * a row of cols sums used when accumulating; the general path needs none. */
size_t cpu_sum_to_workspace(int ndim, const int64_t *xshape, const int64_t *yshape) {
    int64_t rows, cols;
    if (!sum_to_as_columns(ndim, xshape, yshape, &rows, &cols)) return 0;
    return (size_t)cols + cpu_reduce_strided_cols_workspace(rows, cols);
}

/* y[yshape] (+)= sum over broadcast dims of x[xshape]. Parallel over y's elements' outer part;
 * each output accumulates in double. */
void cpu_sum_to(int ndim, const int64_t *xshape, const float *x, const int64_t *yshape, float *y,
                int accumulate, float *work) {
    int64_t rows, cols;
    if (sum_to_as_columns(ndim, xshape, yshape, &rows, &cols)) {
        float *buf = accumulate ? work + cpu_reduce_strided_cols_workspace(rows, cols) : y;
        cpu_reduce_strided_cols(rows, cols, cols, x, buf, work);
        if (accumulate)
            for (int64_t c = 0; c < cols; c++) y[c] += buf[c];
        return;
    }
    /* Strides of x (packed) and of y as seen from x's index space (0 on reduced dims). */
    int64_t xs[ER_MAX_DIMS], ysx[ER_MAX_DIMS], acc = 1, yacc = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        xs[i] = acc;
        acc *= xshape[i];
        ysx[i] = yshape[i] == 1 ? 0 : yacc;
        yacc *= yshape[i];
    }
    int64_t ny = yacc, nx = acc;
    /* Enumerate y elements; for each, sum the x box over reduced dims. */
    int red[ER_MAX_DIMS], nred = 0, keep[ER_MAX_DIMS], nkeep = 0;
    for (int i = 0; i < ndim; i++) {
        if (yshape[i] == 1 && xshape[i] != 1) red[nred++] = i;
        else keep[nkeep++] = i;
    }
    int64_t nbox = ny > 0 ? nx / ny : 0;
    #pragma omp parallel for if (nx > CPU_PAR_MIN && ny > 1)
    for (int64_t e = 0; e < ny; e++) {
        int64_t base = 0, r = e;
        for (int k = nkeep - 1; k >= 0; k--) {
            int d = keep[k];
            int64_t c = r % xshape[d];
            r /= xshape[d];
            base += c * xs[d];
        }
        double s = 0;
        for (int64_t b = 0; b < nbox; b++) {
            int64_t off = base, rr = b;
            for (int k = nred - 1; k >= 0; k--) {
                int d = red[k];
                off += (rr % xshape[d]) * xs[d];
                rr /= xshape[d];
            }
            s += x[off];
        }
        y[e] = accumulate ? y[e] + (float)s : (float)s;
    }
    (void)ysx;
}

/* out[c] = sum_r x[r * ld + c], c < ncols. Rows go in fixed blocks of RED_RB: each block sums its
 * rows in order into a float partial row (unit stride, one pass over x), then each column adds
 * the block partials in block order in double. The blocks do not depend on the thread count, so
 * the result does not either. */
#define RED_RB CPU_RED_RB

/* One block: ncols doubles (2 ncols floats, 8-byte aligned when `work` is); more: the float
 * partial rows, ceil(rows / RED_RB) x ncols. Rounded up to 64 bytes. */
size_t cpu_reduce_strided_cols_workspace(int64_t rows, int64_t ncols) {
    int64_t nblk = (rows + RED_RB - 1) / RED_RB;
    size_t n = (size_t)(nblk <= 1 ? 2 * ncols : nblk * ncols);
    return (n + 15) / 16 * 16;
}

void cpu_reduce_strided_cols(int64_t rows, int64_t ld, int64_t ncols, const float *x, float *out,
                             float *work) {
    if (ncols <= 0) return;
    int64_t nblk = (rows + RED_RB - 1) / RED_RB;
    if (nblk <= 1) { /* one block: sum straight in double */
        double *acc = (double *)(void *)work;
        for (int64_t c = 0; c < ncols; c++) acc[c] = 0.0;
        for (int64_t r = 0; r < rows; r++) {
            const float *xr = x + r * ld;
            #pragma omp simd
            for (int64_t c = 0; c < ncols; c++) acc[c] += xr[c];
        }
        for (int64_t c = 0; c < ncols; c++) out[c] = (float)acc[c];
        return;
    }
    float *part = work;
    #pragma omp parallel for if (rows * ncols > CPU_PAR_MIN)
    for (int64_t b = 0; b < nblk; b++) {
        float *p = part + b * ncols;
        int64_t r0 = b * RED_RB, r1 = r0 + RED_RB < rows ? r0 + RED_RB : rows;
        const float *x0 = x + r0 * ld;
        #pragma omp simd
        for (int64_t c = 0; c < ncols; c++) p[c] = x0[c];
        for (int64_t r = r0 + 1; r < r1; r++) {
            const float *xr = x + r * ld;
            #pragma omp simd
            for (int64_t c = 0; c < ncols; c++) p[c] += xr[c];
        }
    }
    const int64_t CB = 256;
    #pragma omp parallel for if (nblk * ncols > CPU_PAR_MIN)
    for (int64_t c0 = 0; c0 < ncols; c0 += CB) {
        int64_t cl = ncols - c0 < CB ? ncols - c0 : CB;
        double acc[256] = {0};
        for (int64_t b = 0; b < nblk; b++) {
            const float *p = part + b * ncols + c0;
            #pragma omp simd
            for (int64_t c = 0; c < cl; c++) acc[c] += p[c];
        }
        for (int64_t c = 0; c < cl; c++) out[c0 + c] = (float)acc[c];
    }
}

void cpu_colsum_add_span(float *part, double *acc1, int first, int64_t len, const float *v) {
    if (part && first) {
        memcpy(part, v, (size_t)len * sizeof(float));
    } else if (part) {
        #pragma omp simd
        for (int64_t i = 0; i < len; i++) part[i] += v[i];
    } else {
        #pragma omp simd
        for (int64_t i = 0; i < len; i++) acc1[i] += v[i];
    }
}

void cpu_colsum_finish(int64_t nblk, int64_t ncols, const float *work, const double *acc1, float *gb) {
    if (nblk <= 1) {
        for (int64_t c = 0; c < ncols; c++) gb[c] += (float)acc1[c];
        return;
    }
    #pragma omp parallel for if (nblk * ncols > CPU_PAR_MIN)
    for (int64_t c = 0; c < ncols; c++) {
        double s = 0.0;
        for (int64_t blk = 0; blk < nblk; blk++) s += work[blk * ncols + c];
        gb[c] += (float)s;
    }
}

/* Device services of the host: memory is already host memory and work is synchronous. */
static void cpu_upload_async(void *dst, const void *src, size_t n) { cpu_copy(dst, src, n); }
static int cpu_synchronize(void) { return 0; }
static void cpu_trim(void) {}
static void cpu_memory_stats(size_t *peak_in_use, size_t *cached) { *peak_in_use = *cached = 0; }
static uint64_t cpu_host_waits(void) { return 0; }
static const char *cpu_last_error(void) { return NULL; }
static void cpu_clear_error(void) {}
static int cpu_device_count(void) { return 1; }
static int cpu_set_device(int index) {
    return index == 0 ? ER_OK : er_fail(ER_INPUT, "cpu:%d: the CPU backend has one device, cpu", index);
}

const er_backend backend_cpu = {
    .name = "cpu",
    .device = DEV_CPU,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .copy = cpu_copy,
    .upload = cpu_copy,
    .download = cpu_copy,
    .host_alloc = cpu_alloc,
    .host_free = cpu_free,
    .upload_async = cpu_upload_async,
    .synchronize = cpu_synchronize,
    .trim = cpu_trim,
    .memory_stats = cpu_memory_stats,
    .host_waits = cpu_host_waits,
    .last_error = cpu_last_error,
    .clear_error = cpu_clear_error,
    .device_count = cpu_device_count,
    .set_device = cpu_set_device,
#define ER_OP(ret, name, params, args) .name = cpu_##name,
#include "kernels/ops.def"
#undef ER_OP
};

static const er_backend *backend_real(int device) {
    if (device == DEV_CPU) return &backend_cpu;
    if (device == DEV_CUDA && backend_cuda) return backend_cuda(); /* er_msg() says why on NULL */
    if (device == DEV_CUDA)
        er_fail(ER_INPUT, "this build has no CUDA backend (rebuild with make CUDA=1 where nvcc is installed)");
    return NULL;
}

/* While a profile runs (kernels/profile.h) the table handed out times every op; otherwise the
 * flag test is all it costs. */
const er_backend *backend_get(int device) {
    const er_backend *b = backend_real(device);
    return prof_enabled && b ? prof_wrap(b) : b;
}
