// tests/cuda/optim_many_check.cu — the device check behind the multi-tensor optimizer figures of session 9
// (bench/RESULTS_cuda.md; raw output bench/raw_cuda/session9_optim_many_check.txt): the *_many kernels'
// bits against a launch per tensor and the CPU, and launch timings on a ViT-L MAE parameter list (the
// recorded run compared with the one-tensor adamw op, since removed; a list of one is its launch).
// Not built by the Makefile; built here (checked) with
//   nvcc -O3 -std=c++17 -I. -DENDORET_CUDA --expt-relaxed-constexpr -arch=sm_90 -Xcompiler -fopenmp \
//        tests/cuda/optim_many_check.cu kernels/cuda/optim.cu kernels/cuda/elementwise.cu kernels/cpu/optim.c -lgomp
// and run on the GPU machine. The backend services those files call (stream, error record) are
// defined below, so it links without the rest of the backend.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <vector>
#include <chrono>
#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/cuda_kernels.h"
extern "C" {
void cpu_adamw_many(int, float *const *, const float *const *, float *const *, float *const *, const int64_t *, const adamw_args *, uint16_t *const *, const float *);
void cpu_sgd_many(int, float *const *, const float *const *, float *const *, const int64_t *, const sgd_args *, uint16_t *const *, const float *);
}
static cudaStream_t g_stream;
cudaStream_t cuda_stream(void) { return g_stream; }
static int g_err = 0;
int cuda_record(cudaError_t e, const char *what, const char *file, int line) {
    if (e == cudaSuccess) return 0;
    fprintf(stderr, "CUDA ERROR %s at %s:%d: %s\n", what, file, line, cudaGetErrorString(e));
    exit(2); /* the first error says it all */
}
void cuda_record_msg(const char *msg, const char *file, int line) { fprintf(stderr, "%s %s:%d\n", msg, file, line); g_err = 1; }
double *cuda_red_partials(void) { return NULL; }
double *cuda_red_partials_host(void) { return NULL; }
const cuda_multi_scratch *cuda_multi(void) { return NULL; }

static float *dalloc(int64_t n) { float *p; if (cuda_record(cudaMalloc(&p, (n ? n : 1) * 4), "cudaMalloc", __FILE__, __LINE__)) return NULL; return p; }
static void up(float *d, const float *h, int64_t n) { cudaMemcpy(d, h, n * 4, cudaMemcpyHostToDevice); }
static std::vector<float> down(const float *d, int64_t n) { std::vector<float> h(n ? n : 1); cudaMemcpy(h.data(), d, n * 4, cudaMemcpyDeviceToHost); return h; }
static uint32_t rs = 12345;
static float urand(float lo, float hi) { rs = rs * 1664525u + 1013904223u; return lo + (hi - lo) * ((rs >> 8) / 16777216.0f); }

static adamw_args aw(int t, int step) {
    adamw_args a = {}; a.lr = 1e-3f * (1 + 0.01f * t); a.beta1 = 0.9f; a.beta2 = 0.95f; a.eps = 1e-8f;
    a.weight_decay = t % 3 ? 0.05f : 0.0f; a.gscale = t % 2 ? 1.0f : 0.5f; adamw_scalars(&a, step); return a;
}

static int parity(void) {
    const int N = 130; int bad = 0;
    std::vector<int64_t> n(N);
    const int64_t sp[] = {1, 0, 1023, 1024, 1025, 4097, 70001, 255, 257, 16385};
    for (int t = 0; t < N; t++) n[t] = t < 10 ? sp[t] : (t % 17 == 0 ? 0 : (t * 37) % 2100 + 1);
    std::vector<std::vector<float>> h[4];
    std::vector<float *> dm[4], d1[4], hc[4];
    for (int a = 0; a < 4; a++) for (int t = 0; t < N; t++) {
        std::vector<float> x(n[t] ? n[t] : 1);
        for (auto &e : x) e = a == 3 ? urand(0, 0.01f) : a == 2 ? urand(-0.1f, 0.1f) : urand(-1, 1);
        h[a].push_back(x);
        dm[a].push_back(dalloc(n[t])); up(dm[a][t], x.data(), n[t]);
        d1[a].push_back(dalloc(n[t])); up(d1[a][t], x.data(), n[t]);
    }
    for (int a = 0; a < 4; a++) for (int t = 0; t < N; t++) hc[a].push_back(h[a][t].data());
    std::vector<adamw_args> args(N);
    for (int step = 1; step <= 3; step++) {
        for (int t = 0; t < N; t++) args[t] = aw(t, step);
        cpu_adamw_many(N, hc[0].data(), (const float *const *)hc[1].data(), hc[2].data(), hc[3].data(), n.data(), args.data(), NULL, NULL);
        cu_adamw_many(N, dm[0].data(), (const float *const *)dm[1].data(), dm[2].data(), dm[3].data(), n.data(), args.data(), NULL, NULL);
        for (int t = 0; t < N; t++) cu_adamw_many(1, &d1[0][t], (const float *const *)&d1[1][t], &d1[2][t], &d1[3][t], &n[t], &args[t], NULL, NULL);
    }
    cudaDeviceSynchronize();
    int64_t diff_one = 0, diff_cpu = 0, total = 0; double worst = 0;
    for (int a : {0, 2, 3}) for (int t = 0; t < N; t++) {
        auto gm = down(dm[a][t], n[t]), g1 = down(d1[a][t], n[t]);
        double scale = 0; for (int64_t i = 0; i < n[t]; i++) scale = fmax(scale, fabs(h[a][t][i]));
        for (int64_t i = 0; i < n[t]; i++) {
            total++;
            diff_one += memcmp(&gm[i], &g1[i], 4) != 0;
            diff_cpu += memcmp(&gm[i], &h[a][t][i], 4) != 0;
            double r = fabs(gm[i] - h[a][t][i]) / (fabs(h[a][t][i]) + scale);
            if (r > worst) worst = r;
        }
    }
    printf("adamw_many 130 tensors x 3 steps: %lld elements (p, m, v); differ from a launch per tensor: %lld; "
           "differ from CPU bits: %lld; worst |gpu-cpu|/(|cpu|+scale) %.3g\n", (long long)total, (long long)diff_one,
           (long long)diff_cpu, worst);
    bad |= diff_one != 0 || diff_cpu != 0;
    for (int a = 0; a < 4; a++) for (int t = 0; t < N; t++) { cudaFree(dm[a][t]); cudaFree(d1[a][t]); }
    return bad;
}

struct shape { int64_t n; int count; };
// ViT-L/16 MAE (encoder 24 x 1024, decoder 8 x 512): 12 tensors per block plus stems and heads
static std::vector<int64_t> vitl_mae(void) {
    std::vector<int64_t> v;
    auto block = [&](int64_t d, int64_t h) {
        int64_t s[] = {d, d, 3 * d * d, 3 * d, d * d, d, d, d, h * d, h, d * h, d};
        for (int64_t x : s) v.push_back(x);
    };
    v.push_back(1024 * 768); v.push_back(1024); v.push_back(1024);  // patch_embed w, b, cls_token
    for (int i = 0; i < 24; i++) block(1024, 4096);
    v.push_back(1024); v.push_back(1024);                            // norm
    v.push_back(512 * 1024); v.push_back(512); v.push_back(512);     // decoder_embed w, b, mask_token
    for (int i = 0; i < 8; i++) block(512, 2048);
    v.push_back(512); v.push_back(512); v.push_back(768 * 512); v.push_back(768);  // decoder_norm, pred
    return v;
}

static double now(void) { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

static void bench(const char *name, std::vector<int64_t> n) {
    const int N = (int)n.size(); int64_t total = 0;
    for (auto x : n) total += x;
    std::vector<float *> d[4];
    for (int a = 0; a < 4; a++) for (int t = 0; t < N; t++) { d[a].push_back(dalloc(n[t])); cudaMemset(d[a][t], 0, n[t] * 4); }
    std::vector<adamw_args> args(N);
    for (int t = 0; t < N; t++) args[t] = aw(t, 5);
    const int R = 20;
    auto time_it = [&](auto fn) {
        for (int w = 0; w < 3; w++) fn();
        cudaDeviceSynchronize();
        double t0 = now();
        for (int r = 0; r < R; r++) fn();
        double host = now() - t0;
        cudaDeviceSynchronize();
        return std::make_pair((now() - t0) / R * 1e3, host / R * 1e3);
    };
    auto one = time_it([&] { for (int t = 0; t < N; t++) cu_adamw_many(1, &d[0][t], (const float *const *)&d[1][t], &d[2][t], &d[3][t], &n[t], &args[t], NULL, NULL); });
    auto many = time_it([&] { cu_adamw_many(N, d[0].data(), (const float *const *)d[1].data(), d[2].data(), d[3].data(), n.data(), args.data(), NULL, NULL); });
    auto f1 = time_it([&] { for (int t = 0; t < N; t++) cu_fill(d[1][t], n[t], 0.0f); });
    auto fm = time_it([&] { cu_fill_many(N, d[1].data(), n.data(), 0.0f); });
    printf("%s: %d tensors, %.1f M elements\n", name, N, total / 1e6);
    printf("  adamw x%d (a launch per tensor): %.3f ms/step (host enqueue %.3f ms)\n", N, one.first, one.second);
    printf("  adamw_many               : %.3f ms/step (host enqueue %.3f ms)  speed-up %.2fx\n", many.first, many.second, one.first / many.first);
    printf("  fill x%d                  : %.3f ms/step (host enqueue %.3f ms)\n", N, f1.first, f1.second);
    printf("  fill_many                : %.3f ms/step (host enqueue %.3f ms)  speed-up %.2fx\n", fm.first, fm.second, f1.first / fm.first);
    for (int a = 0; a < 4; a++) for (auto p : d[a]) cudaFree(p);
}

int main(void) {
    if (cuda_record(cudaStreamCreate(&g_stream), "cudaStreamCreate", __FILE__, __LINE__)) return 2;
    cudaDeviceProp pr; cudaGetDeviceProperties(&pr, 0); printf("device: %s\n", pr.name);
    int bad = parity();
    bench("ViT-L/16 MAE parameter list", vitl_mae());
    std::vector<int64_t> small;
    for (int i = 0; i < 396; i++) small.push_back(i % 4 == 0 ? 192 * 768 : 192);
    bench("396 small tensors (ViT-Tiny-sized)", small);
    printf("%s\n", bad || g_err ? "CHECK FAILED" : "CHECK OK");
    return bad || g_err;
}
