/* index_scan.c — exact Hamming linear scan. The database is streamed in blocks that stay in L1/L2
 * while a batch of queries runs over them, so a batch costs about one pass over memory. A
 * candidate enters a query's heap only when its distance is <= the heap's current bound, which
 * keeps the hot loop to xor + popcount + compare. With AVX-512 VPOPCNTDQ, 64-bit codes go 8 per
 * instruction, 128/256-bit codes 4/2 per instruction (word counts summed inside the vector) and
 * codes of a multiple of 512 bits one per pass; other lengths, and CPUs without it, use the
 * portable popcount builtin. */
#include "infer/retrieval/index_internal.h"
#include "infer/retrieval/topk.h"
#include "nn/base/base.h"

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
    if (W == 2 || W == 4) {
        /* 4 (W = 2) or 2 (W = 4) codes per vector: popcount per word, then sum the words of each
         * code inside the vector (swap 64-bit halves, then 128-bit halves for W = 4) */
        const int per = 8 / W;
        uint64_t qq[8];
        for (int i = 0; i < 8; i++) qq[i] = q[i % W];
        const __m512i vq = _mm512_loadu_si512((const void *)qq);
        const __mmask8 lead = W == 2 ? 0x55 : 0x11;
        int64_t s = s0;
        for (; s + per <= s1; s += per) {
            __m512i p = _mm512_popcnt_epi64(_mm512_xor_si512(_mm512_loadu_si512((const void *)(ix->codes + s * W)), vq));
            p = _mm512_add_epi64(p, _mm512_shuffle_epi32(p, _MM_PERM_BADC));
            if (W == 4) p = _mm512_add_epi64(p, _mm512_permutex_epi64(p, 0x4E));
            __mmask8 m = _mm512_cmple_epi64_mask(p, _mm512_set1_epi64(topk_bound(h))) & lead;
            if (m) {
                uint64_t dd[8];
                _mm512_storeu_si512((void *)dd, p);
                while (m) {
                    int j = __builtin_ctz(m);
                    m &= m - 1;
                    push_slot(ix, h, (int32_t)dd[j], s + j / W);
                }
            }
        }
        for (; s < s1; s++) {
            int32_t d = hamming(q, ix->codes + s * W, W);
            if (d <= topk_bound(h)) push_slot(ix, h, d, s);
        }
        return;
    }
    if (W % 8 == 0) { /* 512 bits and more (EndoFinder's 1024-bit codes): one code per pass */
        for (int64_t s = s0; s < s1; s++) {
            const uint64_t *x = ix->codes + s * W;
            __m512i acc = _mm512_setzero_si512();
            for (int w = 0; w < W; w += 8)
                acc = _mm512_add_epi64(acc, _mm512_popcnt_epi64(_mm512_xor_si512(_mm512_loadu_si512((const void *)(x + w)),
                                                                                 _mm512_loadu_si512((const void *)(q + w)))));
            int32_t d = (int32_t)_mm512_reduce_add_epi64(acc);
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
