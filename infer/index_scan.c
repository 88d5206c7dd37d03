/* index_scan.c — exact Hamming linear scan. The database is streamed in blocks that stay in L1/L2
 * while a batch of queries runs over them, so a batch costs about one pass over memory. A
 * candidate enters a query's heap only when its distance is <= the heap's current bound, which
 * keeps the hot loop to xor + popcount + compare. 64-bit codes use AVX-512 VPOPCNTDQ (8 codes per
 * instruction) when the CPU has it; everything else uses the portable popcount builtin. */
#include "infer/index.h"
#include "infer/topk.h"
#include "nn/base.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>
#if defined(__AVX512F__) && defined(__AVX512VPOPCNTDQ__)
#include <immintrin.h>
#define HAVE_VPOPCNT 1
#else
#define HAVE_VPOPCNT 0
#endif

int scan_has_vpopcnt(void) { return HAVE_VPOPCNT; }

enum { DB_BLOCK = 2048, Q_BATCH = 32 };

static inline void push_slot(const bindex *ix, topk_heap *h, int32_t d, int64_t s) {
    if (!ix->dead[s]) topk_push(h, d, ix->ids[s]);
}

/* scan database slots [s0, s1) for one query into heap h */
static void scan_range(const bindex *ix, const uint64_t *q, int64_t s0, int64_t s1, topk_heap *h) {
    const int W = ix->words;
#if HAVE_VPOPCNT
    if (W == 1) {
        const __m512i vq = _mm512_set1_epi64((long long)q[0]);
        int64_t s = s0;
        for (; s + 8 <= s1; s += 8) {
            __m512i x = _mm512_loadu_si512((const void *)(ix->codes + s));
            __m512i d = _mm512_popcnt_epi64(_mm512_xor_si512(x, vq));
            __mmask8 m = _mm512_cmple_epi64_mask(d, _mm512_set1_epi64(topk_bound(h)));
            if (m) {
                uint64_t dd[8];
                _mm512_storeu_si512((void *)dd, d);
                while (m) {
                    int j = __builtin_ctz(m);
                    m &= m - 1;
                    push_slot(ix, h, (int32_t)dd[j], s + j);
                }
            }
        }
        for (; s < s1; s++) {
            int32_t d = __builtin_popcountll(ix->codes[s] ^ q[0]);
            if (d <= topk_bound(h)) push_slot(ix, h, d, s);
        }
        return;
    }
#endif
    for (int64_t s = s0; s < s1; s++) {
        int32_t d = hamming(q, ix->codes + s * W, W);
        if (d <= topk_bound(h)) push_slot(ix, h, d, s);
    }
}

static void write_out(topk_heap *h, int k, int64_t *ids, int32_t *d, int *count) {
    int c = topk_finish(h);
    *count = c;
    for (int j = 0; j < k; j++) {
        ids[j] = j < c ? h->e[j].id : -1;
        d[j] = j < c ? h->e[j].d : -1;
    }
}

void scan_search_one_parallel(const bindex *ix, const uint64_t *q, int k, int64_t *out_ids,
                              int32_t *out_d, int *count) {
    /* one thread per 256k codes at most: waking threads costs more than a small scan */
    int nt = omp_get_max_threads();
    int64_t want = ix->n / 262144 + 1;
    if (nt > want) nt = (int)want;
    topk_ent *all = xmalloc((size_t)nt * (k > 0 ? k : 1) * sizeof *all);
    int *cnt = xcalloc((size_t)nt, sizeof *cnt);
    #pragma omp parallel num_threads(nt)
    {
        int t = omp_get_thread_num(), T = omp_get_num_threads();
        int64_t s0 = ix->n * t / T, s1 = ix->n * (t + 1) / T;
        topk_heap h;
        topk_init(&h, all + (size_t)t * k, k);
        scan_range(ix, q, s0, s1, &h);
        cnt[t] = h.n;
    }
    topk_ent *e = xmalloc((size_t)(k > 0 ? k : 1) * sizeof *e);
    topk_heap h;
    topk_init(&h, e, k);
    for (int t = 0; t < nt; t++)
        for (int j = 0; j < cnt[t]; j++) topk_push(&h, all[(size_t)t * k + j].d, all[(size_t)t * k + j].id);
    write_out(&h, k, out_ids, out_d, count);
    free(e);
    free(all);
    free(cnt);
}

void scan_search(const bindex *ix, const uint64_t *q, int nq, int k, int64_t *out_ids,
                 int32_t *out_d, int *count) {
    if (nq <= 0) return;
    /* few queries: split the database across threads instead of the queries */
    if (nq < 2 * omp_get_max_threads() && ix->n > 65536) {
        for (int i = 0; i < nq; i++)
            scan_search_one_parallel(ix, q + (size_t)i * ix->words, k, out_ids + (size_t)i * k,
                                     out_d + (size_t)i * k, count + i);
        return;
    }
    int nbatch = (nq + Q_BATCH - 1) / Q_BATCH;
    #pragma omp parallel if (nbatch > 1 || ix->n > 65536)
    {
        topk_ent *e = xmalloc((size_t)Q_BATCH * (k > 0 ? k : 1) * sizeof *e);
        topk_heap h[Q_BATCH];
        #pragma omp for schedule(dynamic, 1)
        for (int b = 0; b < nbatch; b++) {
            int q0 = b * Q_BATCH, q1 = q0 + Q_BATCH < nq ? q0 + Q_BATCH : nq;
            for (int i = q0; i < q1; i++) topk_init(&h[i - q0], e + (size_t)(i - q0) * k, k);
            for (int64_t s0 = 0; s0 < ix->n; s0 += DB_BLOCK) {
                int64_t s1 = s0 + DB_BLOCK < ix->n ? s0 + DB_BLOCK : ix->n;
                for (int i = q0; i < q1; i++) scan_range(ix, q + (size_t)i * ix->words, s0, s1, &h[i - q0]);
            }
            for (int i = q0; i < q1; i++)
                write_out(&h[i - q0], k, out_ids + (size_t)i * k, out_d + (size_t)i * k, count + i);
        }
        free(e);
    }
}
