/* optim.cu — fused optimizer ops on raw device arrays (one pass over p, g, m, v), mirroring
 * cpu_adamw / cpu_sgd / cpu_adamw_many / cpu_sgd_many / cpu_fill_many / cpu_sumsq_many / cpu_scale /
 * cpu_all_finite of kernels/cpu/optim.c: the same per-element float expressions in the same order. */
#include <math.h>

#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/cuda_kernels.h"

#define OPT_THREADS 256

/* Float operations rounded one at a time, as the CPU's (kernels/cpu/optim.c, built without
 * contraction): nvcc would otherwise fuse some products and sums into multiply-adds, and chose
 * differently in k_adamw and k_adamw_many (seen on an H100: 7% of the elements differed in the last
 * bit). Rounded like this the two kernels give the same bits, and the CPU's too. The host emulation
 * (tests/cuda/emulate.py) has no __CUDA_ARCH__ and plain host floats round one at a time already. */
__device__ __forceinline__ float mul_rn(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}
__device__ __forceinline__ float add_rn(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fadd_rn(a, b);
#else
    return a + b;
#endif
}
__device__ __forceinline__ float sub_rn(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fsub_rn(a, b);
#else
    return a - b;
#endif
}
__device__ __forceinline__ float div_rn(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fdiv_rn(a, b);
#else
    return a / b;
#endif
}
__device__ __forceinline__ float sqrt_rn(float a) {
#ifdef __CUDA_ARCH__
    return __fsqrt_rn(a);
#else
    return sqrtf(a);
#endif
}

/* One element of AdamW / SGD (the multi-tensor kernels below): the
 * expressions of adamw_chunk_scalar / sgd_chunk in their order. */
struct adamw_k {
    float decay, b1, b2, c1, c2, step, ibc2, eps, gs;
};

static adamw_k adamw_k_of(const adamw_args *a) {
    return adamw_k{1.0f - a->lr * a->weight_decay, a->beta1, a->beta2, 1.0f - a->beta1, 1.0f - a->beta2,
                   a->step_size, a->inv_sqrt_bc2, a->eps, a->gscale};
}

__device__ __forceinline__ void adamw_elem(float *p, const float *g, float *m, float *v, uint16_t *p16, int64_t i,
                                           const adamw_k &k) {
    float gi = mul_rn(g[i], k.gs);
    float mi = add_rn(mul_rn(k.b1, m[i]), mul_rn(k.c1, gi));
    float vi = add_rn(mul_rn(k.b2, v[i]), mul_rn(mul_rn(k.c2, gi), gi));
    m[i] = mi;
    v[i] = vi;
    float denom = add_rn(mul_rn(sqrt_rn(vi), k.ibc2), k.eps);
    const float pi = sub_rn(mul_rn(p[i], k.decay), mul_rn(k.step, div_rn(mi, denom)));
    p[i] = pi;
    if (p16) p16[i] = cu_f32_to_bf16(pi);
}

struct sgd_k {
    float lr, mu, wd, gs;
    int nesterov, first;
};

static sgd_k sgd_k_of(const sgd_args *a) {
    return sgd_k{a->lr, a->momentum, a->weight_decay, a->gscale, a->nesterov, a->first};
}

/* buf NULL: plain SGD (the multi-tensor kernel passes NULL when momentum == 0) */
__device__ __forceinline__ void sgd_elem(float *p, const float *g, float *buf, uint16_t *p16, int64_t i, const sgd_k &k) {
    if (!buf) {
        p[i] = sub_rn(p[i], mul_rn(k.lr, add_rn(mul_rn(g[i], k.gs), mul_rn(k.wd, p[i]))));
        if (p16) p16[i] = cu_f32_to_bf16(p[i]);
        return;
    }
    float gi = add_rn(mul_rn(g[i], k.gs), mul_rn(k.wd, p[i]));
    float bi = k.first ? gi : add_rn(mul_rn(k.mu, buf[i]), gi);
    buf[i] = bi;
    float d = k.nesterov ? add_rn(gi, mul_rn(k.mu, bi)) : bi;
    p[i] = sub_rn(p[i], mul_rn(k.lr, d));
    if (p16) p16[i] = cu_f32_to_bf16(p[i]);
}

/* ---- multi-tensor forms (cpu_adamw_many, cpu_sgd_many, cpu_fill_many) ----
 * Up to MT_GROUP tensors per launch, their pointers, sizes and scalars passed by value in the
 * kernel's parameters (no staging copy, no synchronisation). Tensor t owns the blocks
 * [start[t], start[t + 1]); each block covers MT_TILE consecutive elements of it. */
#define MT_GROUP 40 /* with the bf16 copies' pointers, what fits 4 KiB (flat buffers need a few) */
#define MT_TILE (OPT_THREADS * 4)

struct mt_blocks {
    int count;
    int start[MT_GROUP + 1];
    int64_t n[MT_GROUP];
};

struct adamw_group {
    mt_blocks b;
    const float *ds; /* gscale_dev, or NULL */
    float *p[MT_GROUP], *m[MT_GROUP], *v[MT_GROUP];
    const float *g[MT_GROUP];
    uint16_t *p16[MT_GROUP];
    adamw_k k[MT_GROUP];
};
struct sgd_group {
    mt_blocks b;
    const float *ds;
    float *p[MT_GROUP], *buf[MT_GROUP];
    const float *g[MT_GROUP];
    uint16_t *p16[MT_GROUP];
    sgd_k k[MT_GROUP];
};
struct fill_group {
    mt_blocks b;
    float *y[MT_GROUP];
};
/* kernel parameters are limited to 4 KiB on every CUDA version we build for */
static_assert(sizeof(adamw_group) < 4096, "adamw_group must fit the 4 KiB kernel-parameter space");
static_assert(sizeof(sgd_group) < 4096, "sgd_group must fit the 4 KiB kernel-parameter space");
static_assert(sizeof(fill_group) < 4096, "fill_group must fit the 4 KiB kernel-parameter space");

/* The tensor owning block `blk`: the last t with start[t] <= blk (binary search; tensors with no
 * blocks never enter a group). */
__device__ __forceinline__ int mt_tensor(const mt_blocks &b, int blk) {
    int lo = 0, hi = b.count - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (b.start[mid] <= blk) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

/* The elements of this block: [i0, end) of tensor t, one tile. */
struct mt_range {
    int t;
    int64_t i0, end;
};
__device__ __forceinline__ mt_range mt_block_range(const mt_blocks &b) {
    mt_range r;
    r.t = mt_tensor(b, (int)blockIdx.x);
    r.i0 = (int64_t)(blockIdx.x - b.start[r.t]) * MT_TILE;
    r.end = r.i0 + MT_TILE < b.n[r.t] ? r.i0 + MT_TILE : b.n[r.t];
    return r;
}

/* The device gradient scale of the step guard (step_guard below): NaN = leave everything as it is. */
__device__ __forceinline__ bool guard_scale(const float *ds, float &gs) {
    if (!ds) return true;
    const float s = *ds;
    if (s != s) return false;
    gs = mul_rn(gs, s);
    return true;
}

__global__ void k_adamw_many(adamw_group G) {
    const mt_range r = mt_block_range(G.b);
    adamw_k k = G.k[r.t];
    if (!guard_scale(G.ds, k.gs)) return;
    for (int64_t i = r.i0 + threadIdx.x; i < r.end; i += blockDim.x)
        adamw_elem(G.p[r.t], G.g[r.t], G.m[r.t], G.v[r.t], G.p16[r.t], i, k);
}
__global__ void k_sgd_many(sgd_group G) {
    const mt_range r = mt_block_range(G.b);
    sgd_k k = G.k[r.t];
    if (!guard_scale(G.ds, k.gs)) return;
    for (int64_t i = r.i0 + threadIdx.x; i < r.end; i += blockDim.x) sgd_elem(G.p[r.t], G.g[r.t], G.buf[r.t], G.p16[r.t], i, k);
}
__global__ void k_fill_many(fill_group G, float v) {
    const mt_range r = mt_block_range(G.b);
    for (int64_t i = r.i0 + threadIdx.x; i < r.end; i += blockDim.x) G.y[r.t][i] = v;
}

/* Append a tensor of n elements to the group's block table; returns its slot, or -1 when it has
 * nothing to do. The caller fills the slot's pointers and launches when the group is full. */
static int mt_add(mt_blocks &b, int64_t n) {
    if (n <= 0) return -1;
    int s = b.count++;
    b.n[s] = n;
    b.start[s + 1] = b.start[s] + (int)((n + MT_TILE - 1) / MT_TILE);
    return s;
}

static bool mt_full(const mt_blocks &b) { return b.count == MT_GROUP; }

template <typename G, typename L>
static void mt_flush(G &grp, L launch) {
    if (grp.b.count > 0) launch(grp);
    grp.b.count = 0;
    grp.b.start[0] = 0;
}

void cu_adamw_many(int count, float *const *p, const float *const *g, float *const *m, float *const *v,
                   const int64_t *n, const adamw_args *a, uint16_t *const *p16, const float *gscale_dev) {
    adamw_group G = {}; /* empty: count 0, start[0] = 0 */
    G.ds = gscale_dev;
    auto launch = [](const adamw_group &grp) {
        k_adamw_many<<<grp.b.start[grp.b.count], OPT_THREADS, 0, cuda_stream()>>>(grp);
        CUDA_LAUNCHED("adamw_many");
    };
    for (int i = 0; i < count; i++) {
        int s = mt_add(G.b, n[i]);
        if (s < 0) continue;
        G.p[s] = p[i];
        G.g[s] = g[i];
        G.m[s] = m[i];
        G.v[s] = v[i];
        G.p16[s] = p16 ? p16[i] : NULL;
        G.k[s] = adamw_k_of(&a[i]);
        if (mt_full(G.b)) mt_flush(G, launch);
    }
    mt_flush(G, launch);
}

void cu_sgd_many(int count, float *const *p, const float *const *g, float *const *buf, const int64_t *n,
                 const sgd_args *a, uint16_t *const *p16, const float *gscale_dev) {
    sgd_group G = {}; /* empty: count 0, start[0] = 0 */
    G.ds = gscale_dev;
    auto launch = [](const sgd_group &grp) {
        k_sgd_many<<<grp.b.start[grp.b.count], OPT_THREADS, 0, cuda_stream()>>>(grp);
        CUDA_LAUNCHED("sgd_many");
    };
    for (int i = 0; i < count; i++) {
        int s = mt_add(G.b, n[i]);
        if (s < 0) continue;
        /* no momentum buffer when momentum is 0 (the CPU ignores it then too) */
        G.p[s] = p[i];
        G.g[s] = g[i];
        G.buf[s] = a[i].momentum == 0.0f ? NULL : buf[i];
        G.p16[s] = p16 ? p16[i] : NULL;
        G.k[s] = sgd_k_of(&a[i]);
        if (mt_full(G.b)) mt_flush(G, launch);
    }
    mt_flush(G, launch);
}

void cu_fill_many(int count, float *const *y, const int64_t *n, float v) {
    fill_group G = {}; /* empty: count 0, start[0] = 0 */
    auto launch = [v](const fill_group &grp) {
        k_fill_many<<<grp.b.start[grp.b.count], OPT_THREADS, 0, cuda_stream()>>>(grp, v);
        CUDA_LAUNCHED("fill_many");
    };
    for (int i = 0; i < count; i++) {
        int s = mt_add(G.b, n[i]);
        if (s < 0) continue;
        G.y[s] = y[i];
        if (mt_full(G.b)) mt_flush(G, launch);
    }
    mt_flush(G, launch);
}

__global__ void k_scale(float *x, int64_t n, float s) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        x[i] *= s;
}

void cu_scale(float *x, int64_t n, float s) {
    if (n <= 0) return;
    k_scale<<<cuda_blocks(n, OPT_THREADS), OPT_THREADS, 0, cuda_stream()>>>(x, n, s);
    CUDA_LAUNCHED("scale");
}

/* Reductions to one number: a fixed grid of at most CUDA_RED_BLOCKS blocks writes per-block
 * partials to cuda_red_partials() (device) and copies them to cuda_red_partials_host() (pinned):
 * buffers the backend allocates once per device in its init. Summed on the host in block order:
 * deterministic. */
__global__ void k_nonfinite(const float *x, int64_t n, double *part) {
    double bad = 0.0;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        if (!isfinite(x[i])) bad += 1.0;
    bad = cu_block_sum_d(bad);
    if (threadIdx.x == 0) part[blockIdx.x] = bad;
}

/* Blocks for n elements: up to CUDA_RED_BLOCKS, fewer for small tensors (biases, norms) so they cost one
 * small launch; the partials are summed in block order, so the result is deterministic for each n. */
static int red_blocks(int64_t n) {
    int64_t b = (n + OPT_THREADS - 1) / OPT_THREADS;
    return b < 1 ? 1 : b > CUDA_RED_BLOCKS ? CUDA_RED_BLOCKS : (int)b;
}

static double sum_partials(int nb) {
    cudaStream_t st = cuda_stream();
    double *host = cuda_red_partials_host();
    if (CUDA_CHECK(cudaMemcpyAsync(host, cuda_red_partials(), nb * sizeof(double), cudaMemcpyDeviceToHost, st)))
        return NAN;
    if (CUDA_CHECK(cuda_wait())) return NAN;
    double s = 0.0;
    for (int b = 0; b < nb; b++) s += host[b];
    return s;
}

/* sumsq_many: blockIdx.y = array, gridDim.x (<= CUDA_MULTI_BLOCKS) blocks stride over it; part[a][b].
 * gridDim.x is the fewest blocks that cover the chunk's longest array in one pass, capped at
 * CUDA_MULTI_BLOCKS (multi_blocks): an array of n <= OPT_THREADS * gridDim.x elements then has element i
 * in block i / OPT_THREADS whatever gridDim.x is, and the blocks past its end add 0.0, so an array's sum
 * does not depend on its neighbours in the chunk, and a chunk of bias vectors launches one block each. */
__global__ void k_sumsq_many(const float *const *ptrs, const int64_t *ns, double *part) {
    const float *x = ptrs[blockIdx.y];
    const int64_t n = ns[blockIdx.y];
    double s = 0.0;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        s += (double)x[i] * (double)x[i];
    s = cu_block_sum_d(s);
    if (threadIdx.x == 0) part[(int64_t)blockIdx.y * CUDA_MULTI_BLOCKS + blockIdx.x] = s;
}
static unsigned multi_blocks(const int64_t *ns, int c) {
    int64_t mx = 0;
    for (int i = 0; i < c; i++) mx = ns[i] > mx ? ns[i] : mx;
    int64_t b = (mx + OPT_THREADS - 1) / OPT_THREADS;
    return b < 1 ? 1u : b > CUDA_MULTI_BLOCKS ? (unsigned)CUDA_MULTI_BLOCKS : (unsigned)b;
}
/* res[a] = its partials added in block order (deterministic) */
__global__ void k_sum_partials(int count, int nb, const double *part, double *res);
/* The sums of squares of the chunk's c arrays (pointers and lengths already in m's device lists, ns their
 * host copy) into m->res: sumsq_many's and step_guard's launches. */
static void launch_sumsq(const cuda_multi_scratch *m, const int64_t *ns, int c) {
    const unsigned nb = multi_blocks(ns, c);
    k_sumsq_many<<<dim3(nb, (unsigned)c), OPT_THREADS, 0, cuda_stream()>>>(m->ptrs, m->ns, m->part);
    k_sum_partials<<<(unsigned)((c + 127) / 128), 128, 0, cuda_stream()>>>(c, (int)nb, m->part, m->res);
}
__global__ void k_sum_partials(int count, int nb, const double *part, double *res) {
    int a = blockIdx.x * blockDim.x + threadIdx.x;
    if (a >= count) return;
    double s = 0.0;
    for (int b = 0; b < nb; b++) s += part[(int64_t)a * CUDA_MULTI_BLOCKS + b];
    res[a] = s;
}

/* Chunks of CUDA_MULTI_MAX arrays: stage pointers and lengths, two launches, one copy back and one
 * synchronisation per chunk (one for any model of up to 1024 parameter tensors). */
void cu_sumsq_many(int count, const float *const *xs, const int64_t *ns, double *out) {
    const cuda_multi_scratch *m = cuda_multi();
    for (int c0 = 0; c0 < count; c0 += CUDA_MULTI_MAX) {
        int c = count - c0 < CUDA_MULTI_MAX ? count - c0 : CUDA_MULTI_MAX;
        if (!m) {
            for (int i = 0; i < c; i++) out[c0 + i] = NAN;
            continue;
        }
        cudaStream_t st = cuda_stream();
        for (int i = 0; i < c; i++) {
            m->ptrs_host[i] = xs[c0 + i];
            m->ns_host[i] = ns[c0 + i] > 0 ? ns[c0 + i] : 0;
        }
        if (CUDA_CHECK(cudaMemcpyAsync(m->ptrs, m->ptrs_host, c * sizeof(float *), cudaMemcpyHostToDevice, st)) ||
            CUDA_CHECK(cudaMemcpyAsync(m->ns, m->ns_host, c * sizeof(int64_t), cudaMemcpyHostToDevice, st))) {
            for (int i = 0; i < c; i++) out[c0 + i] = NAN;
            continue;
        }
        launch_sumsq(m, m->ns_host, c);
        CUDA_LAUNCHED("sumsq_many");
        bool bad = CUDA_CHECK(cudaMemcpyAsync(m->res_host, m->res, c * sizeof(double), cudaMemcpyDeviceToHost, st)) ||
                   CUDA_CHECK(cuda_wait()); /* also frees the staging for the next chunk */
        for (int i = 0; i < c; i++) out[c0 + i] = bad ? NAN : m->res_host[i];
    }
}

/* step_guard: *acc = (first ? 0 : *acc) + res[0] + ... + res[count - 1], in that order (one thread:
 * the host clip's sum, cpu_step_guard's) */
__global__ void k_guard_add(int count, const double *res, double *acc, int first) {
    double s = first ? 0.0 : *acc;
    for (int a = 0; a < count; a++) s += res[a];
    *acc = s;
}
__global__ void k_guard_finish(const float *losses, int nl, double max_norm, double *norm, float *gscale) {
    const double nrm = sqrt(*norm);
    bool finite = isfinite(nrm);
    for (int i = 0; i < nl; i++) finite = finite && isfinite(losses[i]);
    *norm = nrm;
    *gscale = !finite ? nanf("") : max_norm > 0 && nrm > max_norm ? (float)(max_norm / (nrm + 1e-6)) : 1.0f;
}

/* sumsq_many's kernels per chunk of CUDA_MULTI_MAX arrays, the pointer and length lists staged through the
 * upload ring (host_wait.cu) instead of the scratch's pinned lists, which only a wait would free again. */
void cu_step_guard(int count, const float *const *xs, const int64_t *ns, const float *losses, int nl,
                   double max_norm, double *norm, float *gscale) {
    const cuda_multi_scratch *m = cuda_multi();
    if (!m) return; /* the backend's init failed and recorded why */
    cudaStream_t st = cuda_stream();
    int64_t nn[CUDA_MULTI_MAX];
    int c0 = 0;
    do {
        int c = count - c0 < CUDA_MULTI_MAX ? count - c0 : CUDA_MULTI_MAX;
        if (c > 0) {
            for (int i = 0; i < c; i++) nn[i] = ns[c0 + i] > 0 ? ns[c0 + i] : 0;
            cuda_upload_staged(m->ptrs, xs + c0, c * sizeof(float *));
            cuda_upload_staged(m->ns, nn, c * sizeof(int64_t));
            launch_sumsq(m, nn, c);
        }
        k_guard_add<<<1, 1, 0, st>>>(c, m->res, norm, c0 == 0);
        CUDA_LAUNCHED("step_guard");
        c0 += c;
    } while (c0 < count);
    k_guard_finish<<<1, 1, 0, st>>>(losses, nl, max_norm, norm, gscale);
    CUDA_LAUNCHED("step_guard");
}

int cu_all_finite(const float *x, int64_t n) {
    if (n <= 0) return 1;
    if (!cuda_red_partials()) return 0;
    int nb = red_blocks(n);
    k_nonfinite<<<nb, OPT_THREADS, 0, cuda_stream()>>>(x, n, cuda_red_partials());
    CUDA_LAUNCHED("all_finite");
    return sum_partials(nb) == 0.0;
}
