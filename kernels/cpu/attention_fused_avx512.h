/* attention_fused_avx512.h — pieces shared by the fused attention kernels (attention_avx512.c
 * fp32, attention_bf16.c bf16): the softmax row, the prefetch of the next head's rows.
 * Included inside their AVX-512 target region. */
#ifndef ENDORET_ATTENTION_FUSED_AVX512_H
#define ENDORET_ATTENTION_FUSED_AVX512_H

#include "kernels/cpu/vec_avx512.h" /* exp16, tail_mask */

/* Row max, then e = exp(s - max) in place with a 16-lane sum (the order of softmax_row_avx512);
 * returns the sum and sets *mx (a fully masked row cannot occur: no mask on this path). */
static inline float exp_row(float *s, int n, float *mx) {
    __m512 m = _mm512_set1_ps(-INFINITY);
    for (int j = 0; j < n; j += 16) m = _mm512_max_ps(m, _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), tail_mask(n - j), s + j));
    float rm = _mm512_reduce_max_ps(m);
    const __m512 vm = _mm512_set1_ps(rm);
    __m512 acc = _mm512_setzero_ps();
    for (int j = 0; j < n; j += 16) {
        __mmask16 k = tail_mask(n - j);
        __m512 e = _mm512_maskz_mov_ps(k, exp16(_mm512_sub_ps(_mm512_mask_loadu_ps(vm, k, s + j), vm)));
        _mm512_mask_storeu_ps(s + j, k, e);
        acc = _mm512_add_ps(acc, e);
    }
    *mx = rm;
    return _mm512_reduce_add_ps(acc);
}

/* Prefetch into L2 part `part` of `nparts` of the rows [0, n) (D floats each, stride ld) of p.
 * Always inlined: GCC 12 otherwise finds the out-of-line helper free of side effects (prefetches
 * do not count) and deletes the calls. */
static inline __attribute__((always_inline)) void prefetch_rows(const float *p, int64_t ld, int n, int D, int part, int nparts) {
    if (!p) return;
    int r0 = (int)((int64_t)n * part / nparts), r1 = (int)((int64_t)n * (part + 1) / nparts);
    for (int r = r0; r < r1; r++)
        for (int d = 0; d < D; d += 16) _mm_prefetch((const char *)(p + r * ld + d), _MM_HINT_T1);
}

/* Part `part` of `nparts` of the next head's rows: q, k, v (forward), and o, dO and the gradient
 * rows it adds into (backward). At batch 16 a head's rows (256 B each, a qkv row of 4.6 KB
 * apart) come mostly from L3 / DRAM: without this, the first packing of K (gathers) took 5x its
 * in-cache time (bench/RESULTS_core.md, Session 6 attention). */
static inline __attribute__((always_inline)) void prefetch_next(const attn_next *n, int D, int backward, int part, int nparts) {
    if (!n) return;
    prefetch_rows(n->q, n->ldq, n->Tq, D, part, nparts);
    prefetch_rows(n->k, n->ldk, n->Tk, D, part, nparts);
    prefetch_rows(n->v, n->ldv, n->Tk, D, part, nparts);
    if (!backward) return;
    prefetch_rows(n->o, n->ldo, n->Tq, D, part, nparts);
    prefetch_rows(n->go, n->ldgo, n->Tq, D, part, nparts);
    prefetch_rows(n->gq, n->ldgq, n->Tq, D, part, nparts);
    prefetch_rows(n->gk, n->ldgk, n->Tk, D, part, nparts);
    prefetch_rows(n->gv, n->ldgv, n->Tk, D, part, nparts);
}

#endif
