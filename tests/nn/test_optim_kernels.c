/* AdamW / SGD / clipping kernels against torch.optim trajectories (float64, tests/ref/optim_refs.h)
 * and against an update written out here in double. */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "kernels/backend.h"
#include "tests/ref/optim_refs.h"
#include "tests/test_util.h"

static void expect_close(const float *got, const double *want, int n, double rtol, const char *what, int step) {
    for (int i = 0; i < n; i++) {
        double tol = rtol * fmax(1.0, fabs(want[i]));
        cr_expect(fabs(got[i] - want[i]) <= tol, "%s step %d elem %d: got %.9g want %.9g", what, step, i,
                  (double)got[i], want[i]);
    }
}

/* The optimizer ops take a list; these tests run one tensor through a list of one. */
static void adamw1(float *p, const float *g, float *m, float *v, int64_t n, const adamw_args *a) {
    backend_cpu.adamw_many(1, &p, &g, &m, &v, &n, a, NULL, NULL);
}
static void sgd1(float *p, const float *g, float *buf, int64_t n, const sgd_args *a) {
    backend_cpu.sgd_many(1, &p, &g, &buf, &n, a, NULL, NULL);
}

static void run_adamw(float lr, float b1, float b2, float eps, float wd, const double *ref, const char *what) {
    float p[REF_OPT_N], m[REF_OPT_N] = {0}, v[REF_OPT_N] = {0};
    memcpy(p, REF_OPT_P0, sizeof p);
    adamw_args a = {.lr = lr, .beta1 = b1, .beta2 = b2, .eps = eps, .weight_decay = wd, .gscale = 1.0f};
    for (int t = 0; t < REF_OPT_T; t++) {
        adamw_scalars(&a, t + 1);
        adamw1(p, REF_OPT_GRADS + t * REF_OPT_N, m, v, REF_OPT_N, &a);
        expect_close(p, ref + t * REF_OPT_N, REF_OPT_N, 2e-6, what, t + 1);
    }
}

Test(optim_kernels, adamw_matches_torch) {
    run_adamw(0.01f, 0.9f, 0.999f, 1e-8f, 0.05f, REF_ADAMW, "adamw");
    run_adamw(0.003f, 0.8f, 0.95f, 1e-6f, 0.0f, REF_ADAMW2, "adamw2");
}

static void run_sgd(float lr, float mu, float wd, int nesterov, const double *ref, const char *what) {
    float p[REF_OPT_N], buf[REF_OPT_N];
    memcpy(p, REF_OPT_P0, sizeof p);
    for (int t = 0; t < REF_OPT_T; t++) {
        sgd_args a = {.lr = lr, .momentum = mu, .weight_decay = wd, .gscale = 1.0f, .nesterov = nesterov, .first = t == 0};
        sgd1(p, REF_OPT_GRADS + t * REF_OPT_N, mu ? buf : NULL, REF_OPT_N, &a);
        expect_close(p, ref + t * REF_OPT_N, REF_OPT_N, 2e-6, what, t + 1);
    }
}

Test(optim_kernels, sgd_matches_torch) {
    run_sgd(0.05f, 0.9f, 1e-3f, 0, REF_SGD_MOM, "sgd momentum");
    run_sgd(0.05f, 0.9f, 1e-3f, 1, REF_SGD_NESTEROV, "sgd nesterov");
    run_sgd(0.1f, 0.0f, 0.0f, 0, REF_SGD_PLAIN, "sgd plain");
}

/* The same AdamW rule typed out directly in double on a long vector (crosses the parallel
 * threshold), with a gradient scale: checks the vectorised/OpenMP path, not just 7 elements. */
Test(optim_kernels, adamw_long_vector_vs_double) {
    const int n = 100003;
    float *p = malloc(n * sizeof *p), *g = malloc(n * sizeof *g), *m = calloc(n, sizeof *m), *v = calloc(n, sizeof *v);
    double *pd = malloc(n * sizeof *pd), *md = calloc(n, sizeof *md), *vd = calloc(n, sizeof *vd);
    for (int i = 0; i < n; i++) { p[i] = (float)sin(i * 0.37); pd[i] = p[i]; }
    const double lr = 1e-3, b1 = 0.9, b2 = 0.95, eps = 1e-8, wd = 0.1, gs = 0.5;
    adamw_args a = {.lr = (float)lr, .beta1 = (float)b1, .beta2 = (float)b2, .eps = (float)eps, .weight_decay = (float)wd,
                    .gscale = (float)gs};
    for (int t = 1; t <= 4; t++) {
        for (int i = 0; i < n; i++) g[i] = (float)cos(i * 0.11 + t);
        adamw_scalars(&a, t);
        adamw1(p, g, m, v, n, &a);
        for (int i = 0; i < n; i++) {
            double gi = gs * g[i];
            pd[i] *= 1.0 - lr * wd;
            md[i] = b1 * md[i] + (1 - b1) * gi;
            vd[i] = b2 * vd[i] + (1 - b2) * gi * gi;
            double mh = md[i] / (1 - pow(b1, t)), vh = vd[i] / (1 - pow(b2, t));
            pd[i] -= lr * mh / (sqrt(vh) + eps);
        }
    }
    double worst = 0;
    for (int i = 0; i < n; i++) worst = fmax(worst, fabs(p[i] - pd[i]));
    cr_expect_lt(worst, 1e-6, "max |float - double| = %g", worst);
    /* The vector path must equal the plain float rule bit for bit (same operations, same order):
     * one more step against the rule written here in float. */
    float *pf = malloc(n * sizeof *pf), *mf = malloc(n * sizeof *mf), *vf = malloc(n * sizeof *vf);
    memcpy(pf, p, n * sizeof *pf);
    memcpy(mf, m, n * sizeof *mf);
    memcpy(vf, v, n * sizeof *vf);
    adamw_scalars(&a, 5);
    adamw1(p, g, m, v, n, &a);
    const float decay = 1.0f - a.lr * a.weight_decay;
    int differ = 0;
    for (int i = 0; i < n; i++) {
        float gi = g[i] * a.gscale;
        float mi = a.beta1 * mf[i] + (1.0f - a.beta1) * gi;
        float vi = a.beta2 * vf[i] + (1.0f - a.beta2) * gi * gi;
        float pi = pf[i] * decay - a.step_size * (mi / (sqrtf(vi) * a.inv_sqrt_bc2 + a.eps));
        differ += memcmp(&pi, &p[i], 4) != 0 || memcmp(&mi, &m[i], 4) != 0 || memcmp(&vi, &v[i], 4) != 0;
    }
    cr_expect_eq(differ, 0, "%d elements differ from the scalar float rule", differ);
    free(pf); free(mf); free(vf);
    free(p); free(g); free(m); free(v); free(pd); free(md); free(vd);
}

/* the CPU table's sum of squares of one array */
static double sumsq1(const float *x, int64_t n) {
    double s;
    backend_cpu.sumsq_many(1, &x, &n, &s);
    return s;
}

Test(optim_kernels, global_norm_and_clip_match_torch) {
    float a[REF_OPT_N], b[5];
    memcpy(a, REF_OPT_GRADS, sizeof a);
    memcpy(b, REF_OPT_GRADS + REF_OPT_N, sizeof b);
    double norm = sqrt(sumsq1(a, REF_OPT_N) + sumsq1(b, 5));
    cr_expect(fabs(norm - REF_CLIP_NORM) < 1e-6 * REF_CLIP_NORM, "norm %.9g want %.9g", norm, REF_CLIP_NORM);
    /* torch: coef = max_norm / (norm + 1e-6), applied when < 1 */
    float coef = (float)(1.0 / (norm + 1e-6));
    backend_cpu.scale(a, REF_OPT_N, coef);
    backend_cpu.scale(b, 5, coef);
    for (int i = 0; i < REF_OPT_N; i++) cr_expect(fabs(a[i] - REF_CLIP_A[i]) < 1e-6, "a[%d]", i);
    for (int i = 0; i < 5; i++) cr_expect(fabs(b[i] - REF_CLIP_B[i]) < 1e-6, "b[%d]", i);
}

Test(optim_kernels, sumsq_large_and_finite_check) {
    const int n = 1 << 20;
    float *x = malloc(n * sizeof *x);
    for (int i = 0; i < n; i++) x[i] = (i % 3) ? 1e-3f : -2.0f; /* float accumulation would lose the 1e-6 terms: rel. error ~5e-7 */
    double want = 0;
    for (int i = 0; i < n; i++) want += (double)x[i] * x[i];
    omp_set_num_threads(1);
    double got1 = sumsq1(x, n);
    omp_set_num_threads(2);
    double got = sumsq1(x, n);
    cr_expect(fabs(got - want) <= 1e-9 * want, "sumsq %.17g want %.17g", got, want);
    cr_expect(memcmp(&got, &got1, sizeof got) == 0, "1 thread %.17g vs 2 threads %.17g", got1, got);
    cr_expect_eq(sumsq1(x, 0), 0.0);
    cr_expect(backend_cpu.all_finite(x, n));
    x[n - 7] = NAN;
    cr_expect(!backend_cpu.all_finite(x, n));
    x[n - 7] = INFINITY;
    cr_expect(!backend_cpu.all_finite(x, n));
    free(x);
}
