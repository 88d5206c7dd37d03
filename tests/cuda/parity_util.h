/* parity_util.h — the harness shared by the CUDA parity test files (tests/cuda/test_cuda_parity*.c):
 * the two tables, random host buffers, device copies, and the comparison with the CPU result.
 * See test_cuda_parity.c for the tolerances and the self-test mode. */
#ifndef ENDORET_PARITY_UTIL_H
#define ENDORET_PARITY_UTIL_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "kernels/gemm.h"
#include "nn/base/base.h"
#include "nn/autograd.h"
#include "nn/base/rng.h"
#include "nn/optim.h"
#include "tests/test_util.h"

static const er_backend *CPU, *GPU;
static int GPU_DEV = DEV_CUDA, SELFTEST = 0;

/* ENDORET_PARITY_SELFTEST=1 without a GPU runs every test with the CPU table on both sides: it
 * checks the harness itself (buffer sizes, layouts; under `make asan` too), not the CUDA kernels. */
static inline void require_gpu(void) {
    CPU = backend_get(DEV_CPU);
    if (getenv("ENDORET_PARITY_SELFTEST") && !backend_get(DEV_CUDA)) {
        GPU = CPU;
        GPU_DEV = DEV_CPU;
        SELFTEST = 1;
        return;
    }
    GPU = backend_get(DEV_CUDA);
    /* backend_get says why in er_msg(): built without CUDA, no driver, or no GPU */
    if (!GPU) cr_skip_test("no CUDA device: %s; parity test needs a GPU run", er_msg());
}

static inline void gpu_ok(const char *what) {
    GPU->synchronize();
    const char *e = GPU->last_error();
    cr_assert_null(e, "%s: CUDA error: %s", what, e ? e : "");
}

/* Marks the test that follows as the parity test of `op` (in any tests/cuda/test_cuda_parity*.c);
 * every_op_is_filled_and_covered (end of test_cuda_parity.c) refers to parity_covers_<op> for each
 * entry of kernels/ops.def, so an op added there without a parity test does not link. */
#define PARITY_COVERS(op) const char parity_covers_##op[] = #op

/* ---- host/device buffers ---- */
static inline float *rnd(int64_t n, float lo, float hi, uint32_t tag) {
    float *h = malloc((size_t)(n ? n : 1) * sizeof(float));
    rng_t r = rng_make(1234, rng_stream(RNG_SAMPLING, tag, 0));
    for (int64_t i = 0; i < n; i++) h[i] = lo + (hi - lo) * rng_uniform(&r);
    return h;
}
static inline void *dev_from(const void *h, size_t bytes) {
    void *d = GPU->alloc(bytes ? bytes : 4);
    GPU->upload(d, h, bytes);
    return d;
}
/* Scratch of n floats on b's device for an op's `work` argument. */
static inline float *work_of(const er_backend *b, size_t n) { return b->alloc((n ? n : 1) * sizeof(float)); }
static inline float *devf(const float *h, int64_t n) { return dev_from(h, (size_t)n * sizeof(float)); }
/* The CPU reference of a write-only (accumulate 0) gradient into NaN-filled memory: every element
 * written, so the comparison with the device is not NaN against NaN. */
static inline void expect_all_written(const char *what, const float *ref, int64_t n) {
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) bad += isnan(ref[i]);
    cr_expect_eq(bad, 0, "%s: %lld of %lld elements left unwritten (NaN) on the CPU", what, (long long)bad, (long long)n);
}
static inline float *host_of(const float *d, int64_t n) {
    float *h = malloc((size_t)(n ? n : 1) * sizeof(float));
    GPU->download(h, d, (size_t)n * sizeof(float));
    return h;
}
static inline float *copyf(const float *h, int64_t n) {
    float *c = malloc((size_t)(n ? n : 1) * sizeof(float));
    memcpy(c, h, (size_t)n * sizeof(float));
    return c;
}

/* Compare the GPU result d (device) with the CPU result ref (host). */
static inline void expect_close(const char *what, const float *ref, const float *d, int64_t n, double rtol) {
    gpu_ok(what);
    float *got = host_of(d, n);
    double scale = 0;
    for (int64_t i = 0; i < n; i++)
        if (isfinite(ref[i]) && fabs(ref[i]) > scale) scale = fabs(ref[i]);
    int64_t worst = -1;
    double worst_excess = 0;
    for (int64_t i = 0; i < n; i++) {
        double a = ref[i], b = got[i];
        if (isinf(a) || isnan(a)) {
            if (!((isnan(a) && isnan(b)) || a == b)) { worst = i; break; }
            continue;
        }
        double err = fabs(a - b), tol = rtol * (fabs(a) + scale);
        if (!(err <= tol) && (worst < 0 || err - tol > worst_excess)) {
            worst = i;
            worst_excess = err - tol;
        }
    }
    if (worst >= 0)
        cr_assert_fail("%s: element %lld: cpu %.9g, cuda %.9g (rtol %g, tensor scale %g, n %lld)", what,
                       (long long)worst, ref[worst], got[worst], rtol, scale, (long long)n);
    free(got);
}
static inline void expect_same_i32(const char *what, const int32_t *ref, const int32_t *d, int64_t n) {
    gpu_ok(what);
    int32_t *got = malloc((size_t)(n ? n : 1) * sizeof(int32_t));
    GPU->download(got, d, (size_t)n * sizeof(int32_t));
    for (int64_t i = 0; i < n; i++)
        cr_assert_eq(ref[i], got[i], "%s: element %lld: cpu %d, cuda %d", what, (long long)i, ref[i], got[i]);
    free(got);
}

static inline void contig(int nd, const int64_t *shape, int64_t *st) {
    int64_t acc = 1;
    for (int i = nd - 1; i >= 0; i--) {
        st[i] = acc;
        acc *= shape[i];
    }
}

/* A parity training step after its loss: the loss's value, backward, the activations released,
 * gradients clipped to max_norm (the norm into *gnorm), the update, gradients zeroed. `what` names
 * the step in a failure. */
static inline float parity_train_step(tensor *loss, optimizer *opt, double max_norm, double *gnorm, const char *what) {
    cr_assert_not_null(loss, "%s: %s", what, er_msg());
    float lv = tensor_item(loss);
    cr_assert_eq(backward(loss), ER_OK, "%s: %s", what, er_msg());
    nn_step_end();
    *gnorm = optim_clip_grad_norm(opt, max_norm);
    cr_assert_eq(optim_step(opt), ER_OK, "%s: %s", what, er_msg());
    optim_zero_grad(opt);
    return lv;
}

#endif
