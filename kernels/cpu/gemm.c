/* gemm.c — sgemm driver: GotoBLAS/BLIS loop nest over packed panels, OpenMP threads, kernel
 * choice at run time, alpha/beta semantics, batched products, and the naive reference.
 *
 * Loop nest (per thread team):
 *   for jc in N by NC:                      columns of C / B
 *     for pc in K by KC:                    depth; first block applies beta, later ones add
 *       pack B[pc:pc+KC, jc:jc+NC]          shared, split across threads (L3 resident)
 *       for ic in M by MCHUNK:
 *         pack A[ic:ic+MCHUNK, pc:pc+KC]    shared, split across threads
 *         barrier
 *         work units (MC rows x some NR-panels), taken dynamically by the threads:
 *           for jr (NR panel of B, L1 resident): for ir (MR panel of A, from L2): micro-kernel
 *         barrier
 * With up to 4 threads, C is instead split into one block per thread, each running the loop nest
 * above alone (run_grid). Every element of C gets the same sequence of floating-point operations
 * whatever the thread count, the split, or the order units are taken in (the depth blocks depend
 * only on k), so results are deterministic. */
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/gemm.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/gemm_internal.h"
#include "nn/base/base.h"

/* ---- naive reference ---- */

static inline float at(const float *X, int ld, int trans, int r, int c) {
    return trans ? X[(long)c * ld + r] : X[(long)r * ld + c];
}

void sgemm_ref(int transA, int transB, int m, int n, int k, float alpha, const float *A, int lda,
               const float *B, int ldb, float beta, float *C, int ldc) {
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double s = 0;
            for (int p = 0; p < k; p++) s += (double)at(A, lda, transA, i, p) * at(B, ldb, transB, p, j);
            float old = beta == 0.0f ? 0.0f : beta * C[(long)i * ldc + j];
            C[(long)i * ldc + j] = (float)(alpha * s) + old;
        }
}

/* ---- kernel choice ----
 * The user (or $ENDORET_GEMM_KERNEL) picks an instruction set or one named kernel; with an
 * instruction set, each call takes the kernel of that set whose tiles waste the least work on
 * this shape (zero-padded rows/columns at the edges): the AVX-512 kernels run at the same speed on
 * full tiles, so padding decides (197 rows: 8 rows pads to 200, 14 to 210; n = 64: 64 columns
 * pads nothing, 48 pads to 96). Deterministic: the choice depends only on the shape. */

typedef struct {
    const gemm_kernel *set;  /* kernels of one instruction set */
    int count;               /* how many; 0 = none */
    int fixed;               /* index of a kernel chosen by full name, -1 = by shape */
} kernel_choice;

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static kernel_choice g_fp32;   /* fp32 panels: SGEMM_FP32, and SGEMM_BF16's rounding path */
static kernel_choice g_bf16;   /* native bf16 panels for SGEMM_BF16; count 0 = rounding path */
static int g_mc, g_kc, g_nc;   /* blocking overrides, 0 = kernel default */

static int isa_supported(const char *isa) {
    if (!strcmp(isa, "avx512")) return cpu_has_avx512();
    if (!strcmp(isa, "avx512bf16")) return cpu_has_avx512_bf16();
    if (!strcmp(isa, "avx2")) return cpu_has_avx2_fma();
    return 1;
}

/* Looks `name` up in one set (NULL: the set itself, by shape). 0 = found and supported. */
static int find_in(const gemm_kernel *(*set_fn)(int *), const char *name, kernel_choice *out) {
    int cnt;
    const gemm_kernel *ks = set_fn(&cnt);
    if (!cnt || !isa_supported(ks[0].isa)) return -1;
    if (!name || !strcmp(name, ks[0].isa)) { *out = (kernel_choice){ks, cnt, -1}; return 0; }
    for (int i = 0; i < cnt; i++)
        if (!strcmp(name, ks[i].name)) { *out = (kernel_choice){ks, cnt, i}; return 0; }
    return -1;
}

/* NULL/"auto": the best fp32 set, and the native bf16 kernels when the CPU has AVX512_BF16.
 * "avx512bf16" or one of its kernels: that for SGEMM_BF16, the best fp32 set for SGEMM_FP32.
 * Any other set or kernel: it for both precisions (SGEMM_BF16 then rounds its fp32 panels), so
 * forcing an instruction set keeps the meaning of the results. Returns 0 or -1 (no change). */
static int resolve(const char *name) {
    const gemm_kernel *(*fp32_sets[])(int *) = {gemm_kernels_avx512, gemm_kernels_avx2, gemm_kernels_scalar};
    kernel_choice f = {0}, b = {0};
    int automatic = !name || !*name || !strcmp(name, "auto");
    if (automatic || !find_in(gemm_kernels_avx512bf16, name, &b)) {
        if (automatic && find_in(gemm_kernels_avx512bf16, NULL, &b)) b.count = 0;
        for (int s = 0; s < 3 && !f.count; s++) find_in(fp32_sets[s], NULL, &f);
    } else {
        for (int s = 0; s < 3 && !f.count; s++) find_in(fp32_sets[s], name, &f);
        if (!f.count) return -1;
    }
    g_fp32 = f, g_bf16 = b;
    return 0;
}

static void init_from_env(void) {
    /* A typo in a tuning variable must not silently measure something else: say so once. */
    const char *k = getenv("ENDORET_GEMM_KERNEL");
    if (resolve(k)) {
        resolve(NULL); /* unknown/unsupported: best */
        fprintf(stderr, "endoret: ENDORET_GEMM_KERNEL='%s' is unknown or not supported by this CPU; using the best kernel\n", k);
    }
}

/* The kernels a product of this precision runs: the native bf16 set for SGEMM_BF16 when there is
 * one, else the fp32 set (SGEMM_BF16 then rounds its fp32 panels). */
static const kernel_choice *active_choice(int precision) {
    pthread_once(&g_once, init_from_env);
    return precision == SGEMM_BF16 && g_bf16.count ? &g_bf16 : &g_fp32;
}

static const gemm_kernel *pick_kernel(int precision, int tA, int m, int n) {
    const kernel_choice *ch = active_choice(precision);
    if (ch->fixed >= 0) return &ch->set[ch->fixed];
    const gemm_kernel *best = &ch->set[0];
    double best_cost = 0;
    for (int i = 0; i < ch->count; i++) {
        const gemm_kernel *K = &ch->set[i];
        double cost = (double)((m + K->mr - 1) / K->mr * K->mr) * ((n + K->nr - 1) / K->nr * K->nr);
        /* Row-major A packs 8 rows at a time with an in-register transpose; other heights are
         * copied element by element (measured: ~3% slower when n is small). */
        if (!tA && K->mr % 8) cost *= 1.03;
        if (i == 0 || cost < best_cost) best = K, best_cost = cost;
    }
    return best;
}

const char *sgemm_kernel_name(int precision) {
    static char buf[32];
    const kernel_choice *ch = active_choice(precision);
    if (ch->fixed >= 0 || ch->count == 1) return ch->set[ch->fixed >= 0 ? ch->fixed : 0].name;
    snprintf(buf, sizeof buf, "%s-auto", ch->set[0].isa);
    return buf;
}

const char *sgemm_kernel_for(int precision, int transA, int m, int n) {
    return pick_kernel(precision, transA, m, n)->name;
}

int sgemm_use_kernel(const char *name) {
    pthread_once(&g_once, init_from_env);
    return resolve(name);
}

void sgemm_set_blocking(int mc, int kc, int nc) {
    g_mc = mc > 0 ? mc : 0;
    g_kc = kc > 0 ? kc : 0;
    g_nc = nc > 0 ? nc : 0;
}

/* ---- packing buffers ----
 * The one allocation of the CPU kernels (backend.h's workspace rule, documented exception): sgemm
 * is also a host API with no workspace argument, called from any thread (retrieval scoring,
 * attention heads), so its panels are a per-thread cache: one pair of aligned buffers per thread,
 * at most mc x kc and kc x nc floats of the blocking in use, allocated by the thread's first
 * product and reused for its life (a product does not malloc/free its panels).
 * Every thread's buffers sit in a global list (reachable: no leak report) and are freed when the
 * thread exits (pthread key destructor); those of threads alive at exit stay reachable. */
typedef struct pack_bufs {
    void *a, *b;
    size_t a_cap, b_cap;
    struct pack_bufs *prev, *next;
} pack_bufs;

static pthread_mutex_t g_bufs_lock = PTHREAD_MUTEX_INITIALIZER;
static pack_bufs *g_bufs_list;
static pthread_key_t g_bufs_key;
static pthread_once_t g_bufs_once = PTHREAD_ONCE_INIT;

static void bufs_release(void *p) {
    pack_bufs *t = p;
    pthread_mutex_lock(&g_bufs_lock);
    if (t->prev) t->prev->next = t->next;
    else g_bufs_list = t->next;
    if (t->next) t->next->prev = t->prev;
    pthread_mutex_unlock(&g_bufs_lock);
    free(t->a), free(t->b), free(t);
}

static void bufs_key_create(void) { pthread_key_create(&g_bufs_key, bufs_release); }

static pack_bufs *thread_bufs(void) {
    pthread_once(&g_bufs_once, bufs_key_create);
    pack_bufs *t = pthread_getspecific(g_bufs_key);
    if (!t) {
        t = xcalloc(1, sizeof *t);
        pthread_mutex_lock(&g_bufs_lock);
        t->next = g_bufs_list;
        if (g_bufs_list) g_bufs_list->prev = t;
        g_bufs_list = t;
        pthread_mutex_unlock(&g_bufs_lock);
        pthread_setspecific(g_bufs_key, t);
    }
    return t;
}

static void *grow(void **buf, size_t *cap, size_t need) {
    if (need > *cap) {
        free(*buf);
        *buf = xmalloc_aligned(need);
        *cap = need;
    }
    return *buf;
}

/* ---- driver ---- */

typedef struct {
    const gemm_kernel *K;
    int tA, tB, m, n, k;
    float alpha, beta;
    const char *A, *B;         /* fp32, or bf16 bits when a_bf16 / b_bf16 (gemm_ex's storage) */
    int a_bf16, b_bf16;
    long lda, ldb, ldc;
    float *C;
    int mc, kcb, ncb, mchunk;  /* blocking actually used */
    int native_bf16;           /* K->fn_bf16 on bf16 panels */
    int round_bf16;            /* SGEMM_BF16 on fp32 panels: round them after packing */
    void *Ap, *Bp;             /* packing buffers (shared by a team) */
    const char *Bpre;          /* B prepacked over its whole depth (sgemm_pack_b), or NULL */
    long pre_panel;            /* bytes of one prepacked NR panel */
    int counter[2];            /* work-unit counters, alternating between compute phases */
} gemm_job;

/* op(B) packed once (sgemm_pack_b): ceil(n/NR) panels of K's layout, each over the whole depth
 * (its depth blocks one after another), so a product finds block pc of panel j at
 * panels + j * panel_bytes + NR * line_bytes(pc). */
struct sgemm_packed_b {
    const gemm_kernel *K;    /* the kernel whose panels these are */
    const gemm_kernel *set;  /* the kernel set in use at pack time */
    int precision, kcb;      /* the precision packed for and K's depth block at pack time */
    int tB, k, n, ldb;
    const float *src;        /* the B it was packed from */
    long panel_bytes;
    char *panels;
};

static inline int imin(int a, int b) { return a < b ? a : b; }
static inline int ceil_div(int a, int b) { return (a + b - 1) / b; }
static inline int round_up(int a, int b) { return ceil_div(a, b) * b; }

static void team_barrier(int nt) {
    if (nt > 1) {
#pragma omp barrier
    }
}

/* Bytes one packed line (row of an A panel, column of a B panel) takes for a depth block of kc:
 * kc floats, or ceil(kc/2) bf16 pairs. */
static inline long line_bytes(int native_bf16, int kc) {
    return native_bf16 ? 4L * ((kc + 1) / 2) : 4L * kc;
}

/* Pack lines [l0, l1) of a block into its panels at P (fp32 or bf16 per the job). */
static void pack_block(const gemm_job *J, int is_a, int l0, int len, int p0, int kc, int w, char *P) {
    const void *X = is_a ? (const void *)J->A : (const void *)J->B;
    const int t = is_a ? J->tA : J->tB, h = is_a ? J->a_bf16 : J->b_bf16;
    const long ld = is_a ? J->lda : J->ldb;
    if (J->native_bf16) {
        if (is_a && h) gemm_pack_a_bf16_stored(t, X, ld, l0, len, p0, kc, w, (uint16_t *)P);
        else if (is_a) gemm_pack_a_bf16(t, X, ld, l0, len, p0, kc, w, (uint16_t *)P);
        else if (h) gemm_pack_b_bf16_stored(t, X, ld, p0, kc, l0, len, w, (uint16_t *)P);
        else gemm_pack_b_bf16(t, X, ld, p0, kc, l0, len, w, (uint16_t *)P);
        return;
    }
    if (h) { /* bf16 storage: widened exactly, so rounding it again would change nothing */
        if (is_a) gemm_pack_a_widened(t, X, ld, l0, len, p0, kc, w, (float *)P);
        else gemm_pack_b_widened(t, X, ld, p0, kc, l0, len, w, (float *)P);
        return;
    }
    if (is_a) gemm_pack_a(t, X, ld, l0, len, p0, kc, w, (float *)P);
    else gemm_pack_b(t, X, ld, p0, kc, l0, len, w, (float *)P);
    if (J->round_bf16) gemm_round_bf16((float *)P, (long)round_up(len, w) * kc);
}

static void gemm_thread(gemm_job *J, int tid, int nt) {
    const gemm_kernel *K = J->K;
    const int MR = K->mr, NR = K->nr;
    int phase = 0;
    for (int jc = 0; jc < J->n; jc += J->ncb) {
        int nc = imin(J->ncb, J->n - jc), npan_b = ceil_div(nc, NR);
        for (int pc = 0; pc < J->k; pc += J->kcb) {
            int kc = imin(J->kcb, J->k - pc);
            float beta = pc == 0 ? J->beta : 1.0f;
            const long lb = line_bytes(J->native_bf16, kc);
            char *Ap = J->Ap, *Bp = J->Bp;
            /* B's panels for this block: prepacked (panel-major over the whole depth, this
             * depth block at NR lines of pc steps in), or a contiguous share packed per thread. */
            const char *bblk = Bp;
            long bstep = (long)NR * lb;
            if (J->Bpre) {
                bblk = J->Bpre + (long)(jc / NR) * J->pre_panel + NR * line_bytes(J->native_bf16, pc);
                bstep = J->pre_panel;
            } else {
                int b0 = npan_b * tid / nt, b1 = npan_b * (tid + 1) / nt;
                if (b1 > b0)
                    pack_block(J, 0, jc + b0 * NR, imin(nc, b1 * NR) - b0 * NR, pc, kc, NR,
                               Bp + (long)b0 * NR * lb);
            }
            for (int ic = 0; ic < J->m; ic += J->mchunk) {
                int mch = imin(J->mchunk, J->m - ic), npan_a = ceil_div(mch, MR);
                int a0 = npan_a * tid / nt, a1 = npan_a * (tid + 1) / nt;
                if (a1 > a0)
                    pack_block(J, 1, ic + a0 * MR, imin(mch, a1 * MR) - a0 * MR, pc, kc, MR,
                               Ap + (long)a0 * MR * lb);
                if (tid == 0) __atomic_store_n(&J->counter[(phase + 1) & 1], 0, __ATOMIC_RELAXED);
                team_barrier(nt);

                /* Work units: MC rows x `per` B panels; about 4 per thread so a thread slowed by
                 * another process on the machine does not hold the others up for long. */
                int mb = ceil_div(mch, J->mc);
                int mcu = round_up(ceil_div(mch, mb), MR);  /* equal row blocks: 197 -> 102 + 95 */
                mb = ceil_div(mch, mcu);
                int nb = nt > 1 ? imin(npan_b, ceil_div(4 * nt, mb)) : 1;
                int per = ceil_div(npan_b, nb);
                nb = ceil_div(npan_b, per);
                int units = mb * nb;
                for (;;) {
                    int u = nt > 1 ? __atomic_fetch_add(&J->counter[phase & 1], 1, __ATOMIC_RELAXED)
                                   : J->counter[phase & 1]++;
                    if (u >= units) break;
                    int i0 = (u / nb) * mcu, i1 = imin(mch, i0 + mcu);
                    int j0 = (u % nb) * per, j1 = imin(npan_b, j0 + per);
                    for (int jp = j0; jp < j1; jp++) {
                        const char *bp = bblk + (long)jp * bstep;
                        int col = jp * NR, nr = imin(NR, nc - col);
                        for (int i = i0; i < i1; i += MR) {
                            float *c = J->C + (long)(ic + i) * J->ldc + jc + col;
                            if (J->native_bf16)
                                K->fn_bf16((kc + 1) / 2, (const uint16_t *)(Ap + (long)i * lb),
                                           (const uint16_t *)bp, c, J->ldc, J->alpha, beta,
                                           imin(MR, i1 - i), nr);
                            else
                                K->fn(kc, (const float *)(Ap + (long)i * lb), (const float *)bp, c,
                                      J->ldc, J->alpha, beta, imin(MR, i1 - i), nr);
                        }
                    }
                }
                phase++;
                team_barrier(nt);
            }
        }
    }
}

/* Few threads: split C into a tr x tc grid of tile-aligned blocks, one per thread; each thread
 * packs its own panels and runs the single-threaded loop nest, with no barrier at all. On a
 * shared machine a preempted thread then delays only its own block, not every depth block of
 * the others (measured under load: 0.4-0.8x OpenBLAS with the shared-panel team, 0.8-1.2x with
 * the grid). The price, packing one operand's panels once per grid row/column, stays small for
 * up to 4 threads; more threads share packed panels (gemm_thread) so each packs less. */
#define GRID_MAX_THREADS 4
static void run_grid(const gemm_job *J0, int nt) {
    const int MR = J0->K->mr, NR = J0->K->nr, pm = ceil_div(J0->m, MR), pn = ceil_div(J0->n, NR);
    int tr = 0;
    double best = 0;
    for (int r = 1; r <= nt; r++) {
        if (nt % r || r > pm || nt / r > pn) continue;
        /* packing per thread: A's rows of its block, B's columns (prepacked B: none, but a row
         * split makes each thread stream all of B, so columns still count a little) */
        double cost = (double)J0->m / r + (J0->Bpre ? 0.25 : 1.0) * J0->n / (nt / r);
        if (!tr || cost < best) tr = r, best = cost;
    }
    if (!tr) tr = 1;
    const int tc = nt / tr;
#pragma omp parallel num_threads(nt)
    /* Loop, in case the runtime gave fewer threads than asked (OMP_THREAD_LIMIT, dynamic teams). */
    for (int t = omp_get_thread_num(); t < nt; t += omp_get_num_threads()) {
        int r = t / tc, c = t % tc;
        int r0 = (int)((long)pm * r / tr) * MR, r1 = imin(J0->m, (int)((long)pm * (r + 1) / tr) * MR);
        int c0 = (int)((long)pn * c / tc) * NR, c1 = imin(J0->n, (int)((long)pn * (c + 1) / tc) * NR);
        if (r1 > r0 && c1 > c0) {
            gemm_job S = *J0;
            S.m = r1 - r0, S.n = c1 - c0;
            const long ea = J0->a_bf16 ? 2 : 4, eb = J0->b_bf16 ? 2 : 4; /* bytes per element */
            S.A = J0->A + (J0->tA ? r0 : (long)r0 * J0->lda) * ea;
            S.B = J0->B + (J0->tB ? (long)c0 * J0->ldb : c0) * eb;
            if (J0->Bpre) S.Bpre = J0->Bpre + (long)(c0 / NR) * J0->pre_panel;
            S.C = J0->C + (long)r0 * J0->ldc + c0;
            S.mchunk = imin(S.mchunk, S.m);
            S.ncb = imin(S.ncb, round_up(S.n, NR));
            S.counter[0] = S.counter[1] = 0;
            pack_bufs *tb = thread_bufs();
            long lb = line_bytes(S.native_bf16, S.kcb);
            S.Ap = grow(&tb->a, &tb->a_cap, (size_t)round_up(S.mchunk, MR) * lb);
            if (!S.Bpre) S.Bp = grow(&tb->b, &tb->b_cap, (size_t)S.ncb * lb);
            gemm_thread(&S, 0, 1);
        }
    }
}

/* C = beta * C (beta == 0 writes zeros without reading C). */
static void scale_c(int m, int n, float beta, float *C, int ldc) {
    if (beta == 1.0f) return;
    for (int i = 0; i < m; i++) {
        float *c = C + (long)i * ldc;
        if (beta == 0.0f) memset(c, 0, sizeof(float) * n);
        else for (int j = 0; j < n; j++) c[j] *= beta;
    }
}

/* Depth block of a product of depth k with kernel K: equal-sized blocks (k = 300 -> 2 x 150, not
 * 256 + 44); even for bf16 panels, so only the last block can end on a zero-padded half pair. */
static int depth_block(const gemm_kernel *K, int k) {
    int KC = g_kc ? g_kc : K->kc;
    int kcb = ceil_div(k, ceil_div(k, KC));
    return K->fn_bf16 ? round_up(kcb, 2) : kcb;
}

/* A and B: fp32, or bf16 bits when ab_bf16's bit 0 (A) / bit 1 (B) is set (sgemm_typed). */
static void sgemm_threads(int precision, int tA, int tB, int m, int n, int k, float alpha, const void *A,
                          int lda, const void *B, int ldb, float beta, float *C, int ldc, int nt,
                          const sgemm_packed_b *pb, int ab_bf16) {
    if (m <= 0 || n <= 0) return;
    if (k <= 0 || alpha == 0.0f) { scale_c(m, n, beta, C, ldc); return; }

    gemm_job J = {.K = pb ? pb->K : pick_kernel(precision, tA, m, n), .tA = tA, .tB = tB, .m = m, .n = n, .k = k,
                  .alpha = alpha, .beta = beta, .A = A, .B = B, .a_bf16 = ab_bf16 & 1, .b_bf16 = ab_bf16 >> 1 & 1,
                  .lda = lda, .ldb = ldb, .ldc = ldc, .C = C};
    const gemm_kernel *K = J.K;
    int MC = g_mc ? g_mc : K->mc, NC = g_nc ? g_nc : K->nc;
    MC = round_up(MC, K->mr);
    NC = round_up(NC, K->nr);
    J.native_bf16 = K->fn_bf16 != NULL;
    J.round_bf16 = !J.native_bf16 && precision == SGEMM_BF16;
    J.kcb = depth_block(K, k);
    J.ncb = round_up(ceil_div(n, ceil_div(n, NC)), K->nr);
    J.mc = MC;
    if (pb) J.Bpre = pb->panels, J.pre_panel = pb->panel_bytes;
    /* Pack all of A's rows for one depth block when that stays within ~16 MB, else in chunks. */
    long cap = (4L << 20) / J.kcb;
    J.mchunk = m <= cap ? m : (int)(cap / MC > 0 ? cap / MC * MC : MC);

    /* Threads: no more than there is work for (at least 128^3 multiply-adds, ~25 us, per
     * thread). Starting a parallel region costs microseconds on an idle machine but up to a
     * scheduler tick when the cores are busy with other processes (measured here: 12 calls of
     * 197x197x64 on 2 threads took 190 ms under load instead of 0.8 ms). */
    double flops = 2.0 * m * n * k;
    if (flops < nt * 2.0 * 128 * 128 * 128) nt = (int)(flops / (2.0 * 128 * 128 * 128));
    if (nt < 1) nt = 1;

    if (nt > 1 && nt <= GRID_MAX_THREADS) { run_grid(&J, nt); return; }
    pack_bufs *tb = thread_bufs();  /* the caller's buffers; a team shares them */
    long lb = line_bytes(J.native_bf16, J.kcb);
    J.Ap = grow(&tb->a, &tb->a_cap, (size_t)round_up(J.mchunk, K->mr) * lb);
    if (!pb) J.Bp = grow(&tb->b, &tb->b_cap, (size_t)J.ncb * lb);
    if (nt == 1) {
        gemm_thread(&J, 0, 1);
    } else {
#pragma omp parallel num_threads(nt)
        gemm_thread(&J, omp_get_thread_num(), omp_get_num_threads());
    }
}

static int team_size(void) { return omp_in_parallel() ? 1 : omp_get_max_threads(); }

/* ---- prepacked B ---- */

/* The kernel for a B packed before m is known: of the active set (or the fixed kernel), the one
 * whose NR pads n the least; ties keep the set's order (its default first). */
static const gemm_kernel *pick_kernel_for_n(int precision, int n) {
    const kernel_choice *ch = active_choice(precision);
    if (ch->fixed >= 0) return &ch->set[ch->fixed];
    const gemm_kernel *best = &ch->set[0];
    for (int i = 1; i < ch->count; i++)
        if (round_up(n, ch->set[i].nr) < round_up(n, best->nr)) best = &ch->set[i];
    return best;
}

sgemm_packed_b *sgemm_pack_b(int precision, int transB, int k, int n, const float *B, int ldb) {
    if (k < 1 || n < 1 || !B) return NULL;
    const kernel_choice *ch = active_choice(precision);
    const gemm_kernel *K = pick_kernel_for_n(precision, n);
    sgemm_packed_b *p = xcalloc(1, sizeof *p);
    *p = (sgemm_packed_b){.K = K, .set = ch->set, .precision = precision, .kcb = depth_block(K, k),
                          .tB = transB, .k = k, .n = n, .ldb = ldb, .src = B};
    gemm_job J = {.K = K, .tB = transB, .k = k, .n = n, .B = (const char *)B, .ldb = ldb, .kcb = p->kcb,
                  .native_bf16 = K->fn_bf16 != NULL};
    J.round_bf16 = !J.native_bf16 && precision == SGEMM_BF16;
    const int NR = K->nr, npan = ceil_div(n, NR);
    p->panel_bytes = NR * line_bytes(J.native_bf16, k);
    p->panels = xmalloc_aligned((size_t)npan * p->panel_bytes);
#pragma omp parallel for schedule(static) num_threads(team_size())
    for (int j = 0; j < npan; j++)
        for (int pc = 0; pc < k; pc += J.kcb)
            pack_block(&J, 0, j * NR, imin(NR, n - j * NR), pc, imin(J.kcb, k - pc), NR,
                       p->panels + (long)j * p->panel_bytes + NR * line_bytes(J.native_bf16, pc));
    return p;
}

void sgemm_packed_b_free(sgemm_packed_b *p) {
    if (!p) return;
    free(p->panels);
    free(p);
}

int sgemm_packed_b_usable(const sgemm_packed_b *p, int precision, int transB, int k, int n, int ldb) {
    if (!p || p->tB != transB || p->k != k || p->n != n || p->ldb != ldb) return 0;
    const kernel_choice *ch = active_choice(precision);
    if (p->precision != precision || p->set != ch->set) return 0;
    if (ch->fixed >= 0 && &ch->set[ch->fixed] != p->K) return 0;
    return depth_block(p->K, k) == p->kcb;  /* a blocking override since packing changes it */
}

void sgemm_with_packed_b(int precision, int transA, int transB, int m, int n, int k, float alpha,
                         const float *A, int lda, const float *B, int ldb, const sgemm_packed_b *p,
                         float beta, float *C, int ldc) {
    if (p && B != p->src) p = NULL;
    if (!sgemm_packed_b_usable(p, precision, transB, k, n, ldb)) p = NULL;
    sgemm_threads(precision, transA, transB, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, team_size(), p, 0);
}

void sgemm_typed(int precision, int transA, int transB, int m, int n, int k, float alpha, const void *A, int a_type,
                 int lda, const void *B, int b_type, int ldb, const sgemm_packed_b *pb, float beta, float *C, int ldc) {
    /* a prepacked B is fp32 B's panels: only an fp32 B can use it */
    if (pb && (b_type != GEMM_F32 || B != pb->src || !sgemm_packed_b_usable(pb, precision, transB, k, n, ldb))) pb = NULL;
    sgemm_threads(precision, transA, transB, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, team_size(), pb,
                  (a_type == GEMM_BF16) | (b_type == GEMM_BF16) << 1);
}

void sgemm(int precision, int transA, int transB, int m, int n, int k, float alpha, const float *A,
           int lda, const float *B, int ldb, float beta, float *C, int ldc) {
    sgemm_threads(precision, transA, transB, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, team_size(), NULL, 0);
}

void sgemm_strided_batched(int precision, int transA, int transB, int m, int n, int k, float alpha,
                           const float *A, int lda, long strideA, const float *B, int ldb, long strideB,
                           float beta, float *C, int ldc, long strideC, int batch) {
    int nt = team_size();
    double flops = 2.0 * m * n * k;
    /* Many small products (attention heads): one product per thread beats splitting each one. */
    if (nt > 1 && batch >= nt && flops < 2.0 * 512 * 512 * 512) {
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt)
        for (int b = 0; b < batch; b++)
            sgemm_threads(precision, transA, transB, m, n, k, alpha, A + b * strideA, lda, B + b * strideB,
                          ldb, beta, C + b * strideC, ldc, 1, NULL, 0);
        return;
    }
    for (int b = 0; b < batch; b++)
        sgemm_threads(precision, transA, transB, m, n, k, alpha, A + b * strideA, lda, B + b * strideB, ldb,
                      beta, C + b * strideC, ldc, nt, NULL, 0);
}

/* backend_cpu's gemm_batched (the table names every CPU op cpu_<name>, kernels/ops.def). */
void cpu_gemm_batched(int compute, int transA, int transB, int m, int n, int k, float alpha, const float *A,
                      int lda, long strideA, const float *B, int ldb, long strideB, float beta,
                      float *C, int ldc, long strideC, int batch) {
    sgemm_strided_batched(sgemm_precision_of(compute), transA, transB, m, n, k, alpha, A, lda, strideA, B,
                          ldb, strideB, beta, C, ldc, strideC, batch);
}

/* backend_cpu's gemm_prepack* ops (kernels/ops.def): the handle is an sgemm_packed_b. */
void cpu_gemm_prepack(int compute, int transB, int k, int n, const float *B, int ldb, void **out) {
    *out = sgemm_pack_b(sgemm_precision_of(compute), transB, k, n, B, ldb);
}

void cpu_gemm_prepack_free(void *packed) { sgemm_packed_b_free(packed); }

void cpu_gemm_prepacked(int compute, int transA, int transB, int m, int n, int k, float alpha,
                        const float *A, int lda, const float *B, int ldb, const void *packed, float beta,
                        float *C, int ldc) {
    sgemm_with_packed_b(sgemm_precision_of(compute), transA, transB, m, n, k, alpha, A, lda, B, ldb, packed,
                        beta, C, ldc);
}
