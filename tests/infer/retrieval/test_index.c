/* Every exact index against brute force: random codes, codes with many duplicates/ties, clustered
 * codes, several code lengths; add/delete; save/load; corrupt files; MIH range search. */
#include "tests/test_util.h"
#include "infer/retrieval/index.h"
#include "nn/base/base.h"
#include "nn/base/rng.h"

#include <math.h>
#include <string.h>
#include <unistd.h>

/* codes: mode 0 uniform, 1 few distinct values (many exact duplicates), 2 clustered (few bit flips
 * around 8 centres) */
static uint64_t *make_codes(int n, int bits, int mode, uint64_t seed) {
    int W = (bits + 63) / 64;
    uint64_t *c = calloc((size_t)n * W, 8), cent[8][64];
    rng_t r = rng_make(seed, 99);
    for (int a = 0; a < 8; a++)
        for (int w = 0; w < W; w++) cent[a][w] = rng_u64(&r);
    for (int i = 0; i < n; i++) {
        for (int w = 0; w < W; w++) {
            if (mode == 0) c[i * W + w] = rng_u64(&r);
            else if (mode == 1) c[i * W + w] = cent[rng_below(&r, 3)][w] ^ (rng_below(&r, 4) == 0 ? 1 : 0);
            else c[i * W + w] = cent[i % 8][w];
        }
        if (mode == 2)
            for (int f = 0; f < 3; f++) { int b = rng_below(&r, bits); c[i * W + b / 64] ^= 1ULL << (b % 64); }
        if (bits % 64) c[i * W + W - 1] &= ~0ULL >> (64 - bits % 64);
    }
    return c;
}

static void expect_same(const bindex *ix, const uint64_t *q, int nq, int k) {
    int64_t *ia = malloc((size_t)nq * k * 8), *ib = malloc((size_t)nq * k * 8);
    int32_t *da = malloc((size_t)nq * k * 4), *db = malloc((size_t)nq * k * 4);
    int *ca = malloc(nq * sizeof(int)), *cb = malloc(nq * sizeof(int));
    bindex_search(ix, q, nq, k, ia, da, ca);
    bindex_search_ref(ix, q, nq, k, ib, db, cb);
    for (int i = 0; i < nq; i++) {
        cr_assert_eq(ca[i], cb[i], "%s: query %d count %d vs %d", index_kind_name(ix->kind), i, ca[i], cb[i]);
        for (int j = 0; j < k; j++) {
            cr_assert_eq(ia[i * k + j], ib[i * k + j], "%s bits %d: query %d rank %d id %lld vs %lld",
                         index_kind_name(ix->kind), ix->bits, i, j, (long long)ia[i * k + j], (long long)ib[i * k + j]);
            cr_assert_eq(da[i * k + j], db[i * k + j]);
        }
    }
    free(ia); free(ib); free(da); free(db); free(ca); free(cb);
}

static void check_all(int n, int bits, int mode, int k, int nq, int mih_m) {
    uint64_t *c = make_codes(n, bits, mode, 7 + mode);
    uint64_t *q = make_codes(nq, bits, mode, 100 + mode);
    int W = (bits + 63) / 64;
    memcpy(q, c, (size_t)W * 8); /* one query identical to an item */
    int64_t *ids = malloc((size_t)n * 8);
    for (int i = 0; i < n; i++) ids[i] = (int64_t)((i * 7919L) % n) * 3 + 5; /* ids not in slot order */
    for (int kind = 0; kind < 3; kind++) {
        bindex ix;
        cr_assert_eq(bindex_build(&ix, (index_kind)kind, bits, c, ids, n, mih_m), ER_OK, "%s", er_msg());
        expect_same(&ix, q, nq, k);
        bindex_free(&ix);
    }
    free(c); free(q); free(ids);
}

Test(infer_index, all_kinds_equal_brute_force_random) {
    check_all(3000, 64, 0, 10, 40, 0);
    check_all(2000, 32, 0, 7, 20, 0);
    check_all(1500, 128, 0, 5, 20, 0);
    check_all(1000, 100, 0, 12, 20, 0); /* bits not a multiple of 64 */
    check_all(600, 16, 0, 50, 20, 0);    /* short codes: very many ties */
    check_all(400, 512, 2, 5, 10, 0);    /* multiples of 512 bits: the one-code-per-pass path */
    check_all(300, 1024, 2, 7, 10, 0);   /* EndoFinder's 1024-bit codes */
    check_all(300, 192, 2, 7, 10, 0);    /* 3 words: the portable path */
}

Test(infer_index, all_kinds_equal_brute_force_ties_and_duplicates) {
    check_all(2000, 64, 1, 10, 30, 0);   /* 6 distinct codes only: top-k decided by id */
    check_all(2000, 64, 2, 25, 30, 0);
    check_all(1000, 256, 2, 10, 20, 0);
}

Test(infer_index, k_larger_than_n_and_empty) {
    uint64_t *c = make_codes(5, 64, 0, 1);
    int64_t ids[5] = {4, 3, 2, 1, 0};
    for (int kind = 0; kind < 3; kind++) {
        bindex ix;
        cr_assert_eq(bindex_build(&ix, (index_kind)kind, 64, c, ids, 5, 0), ER_OK);
        expect_same(&ix, c, 5, 9);
        bindex_free(&ix);
        cr_assert_eq(bindex_build(&ix, (index_kind)kind, 64, c, ids, 0, 0), ER_OK);
        int64_t oid[3]; int32_t od[3]; int cnt;
        bindex_search(&ix, c, 1, 3, oid, od, &cnt);
        cr_expect_eq(cnt, 0);
        cr_expect_eq(oid[0], -1);
        bindex_free(&ix);
    }
    free(c);
}

Test(infer_index, mih_exact_with_several_substring_counts) {
    uint64_t *c = make_codes(3000, 64, 2, 3), *q = make_codes(30, 64, 0, 4);
    int64_t *ids = malloc(3000 * 8);
    for (int i = 0; i < 3000; i++) ids[i] = i;
    for (int m = 3; m <= 16; m += m < 4 ? 1 : m) { /* 3, 4, 8, 16 (fewer would exceed 2^24 buckets) */
        bindex ix;
        cr_assert_eq(bindex_build(&ix, INDEX_MIH, 64, c, ids, 3000, m), ER_OK);
        cr_expect_eq(mih_substrings(&ix), m);
        expect_same(&ix, q, 30, 10);
        expect_same(&ix, c + 64, 30, 10);
        bindex_free(&ix);
    }
    free(c); free(q); free(ids);
}

Test(infer_index, mih_range_equals_brute_force_at_several_radii) {
    int n = 2000;
    uint64_t *c = make_codes(n, 64, 2, 5);
    int64_t *ids = malloc(n * 8), *oid = malloc(n * 8);
    int32_t *od = malloc(n * 4);
    for (int i = 0; i < n; i++) ids[i] = n - i;
    bindex ix;
    cr_assert_eq(bindex_build(&ix, INDEX_MIH, 64, c, ids, n, 4), ER_OK);
    cr_assert_eq(bindex_delete(&ix, ids[3]), ER_OK);
    for (int r = 0; r <= 12; r += 3)
        for (int qi = 0; qi < 20; qi++) {
            const uint64_t *q = c + qi * 37;
            int64_t cnt = mih_range(&ix, q, r, oid, od);
            int64_t want = 0;
            for (int s = 0; s < n; s++)
                if (s != 3 && __builtin_popcountll(c[s] ^ q[0]) <= r) want++;
            cr_assert_eq(cnt, want, "radius %d query %d: %lld items, brute force %lld", r, qi, (long long)cnt, (long long)want);
            for (int64_t j = 0; j < cnt; j++) {
                cr_assert_leq(od[j], r);
                cr_assert_neq(oid[j], ids[3]);
                if (j) cr_assert(od[j - 1] < od[j] || (od[j - 1] == od[j] && oid[j - 1] < oid[j]));
            }
        }
    bindex_free(&ix);
    free(c); free(ids); free(oid); free(od);
}

Test(infer_index, add_and_delete_without_rebuild) {
    int n = 1500;
    uint64_t *c = make_codes(n + 6000, 64, 2, 11);
    int64_t *ids = malloc((size_t)(n + 6000) * 8);
    for (int i = 0; i < n + 6000; i++) ids[i] = i;
    for (int kind = 0; kind < 3; kind++) {
        bindex ix;
        cr_assert_eq(bindex_build(&ix, (index_kind)kind, 64, c, ids, n, 0), ER_OK);
        /* 6000 adds: MIH folds its pending list into the tables on the way */
        for (int i = n; i < n + 6000; i++) cr_assert_eq(bindex_add(&ix, c + i, ids[i]), ER_OK);
        cr_expect_eq(bindex_add(&ix, c, ids[0]), ER_INPUT, "duplicate id must be rejected");
        for (int i = 0; i < n + 6000; i += 5) cr_assert_eq(bindex_delete(&ix, ids[i]), ER_OK);
        cr_expect_eq(bindex_delete(&ix, ids[0]), ER_INPUT, "deleting twice must fail");
        cr_expect_eq(bindex_count(&ix), n + 6000 - (n + 6000) / 5);
        expect_same(&ix, c, 40, 10);
        /* a deleted case is never returned, even for a query equal to it */
        int64_t oid[10]; int32_t od[10]; int cnt;
        bindex_search(&ix, c + 5, 1, 10, oid, od, &cnt);
        for (int j = 0; j < cnt; j++) cr_expect_neq(oid[j], 5);
        /* re-adding a deleted id is allowed */
        cr_assert_eq(bindex_add(&ix, c + 5, 5), ER_OK);
        bindex_search(&ix, c + 5, 1, 10, oid, od, &cnt);
        cr_expect_eq(od[0], 0);
        expect_same(&ix, c + 100, 20, 10);
        bindex_free(&ix);
    }
    free(c); free(ids);
}

Test(infer_index, save_load_round_trip_and_corrupt_files) {
    const char *dir = test_tmpdir();
    char *path = path_join(dir, "a.idx");
    int n = 800;
    uint64_t *c = make_codes(n, 128, 0, 21);
    int64_t *ids = malloc(n * 8);
    for (int i = 0; i < n; i++) ids[i] = 1000 + i;
    for (int kind = 0; kind < 3; kind++) {
        bindex a, b;
        cr_assert_eq(bindex_build(&a, (index_kind)kind, 128, c, ids, n, 0), ER_OK);
        cr_assert_eq(bindex_delete(&a, 1003), ER_OK);
        cr_assert_eq(bindex_save(&a, path), ER_OK, "%s", er_msg());
        cr_assert_eq(bindex_load(path, &b), ER_OK, "%s", er_msg());
        cr_expect_eq(b.kind, a.kind);
        cr_expect_eq(bindex_count(&b), n - 1);
        int64_t ia[80], ib[80]; int32_t da[80], db[80]; int ca[8], cb[8];
        bindex_search(&a, c, 8, 10, ia, da, ca);
        bindex_search(&b, c, 8, 10, ib, db, cb);
        cr_expect_eq(memcmp(ia, ib, sizeof ia), 0);
        cr_expect_eq(memcmp(da, db, sizeof da), 0);
        bindex_free(&a);
        bindex_free(&b);
    }
    char *data; size_t len;
    cr_assert_eq(read_file(path, &data, &len), ER_OK);
    bindex x;
    /* truncated */
    cr_assert_eq(write_file_atomic(path, data, len - 9), ER_OK);
    cr_expect_eq(bindex_load(path, &x), ER_INPUT);
    cr_expect(strstr(er_msg(), "truncated") != NULL, "%s", er_msg());
    /* one flipped bit in the codes */
    data[100] ^= 4;
    cr_assert_eq(write_file_atomic(path, data, len), ER_OK);
    cr_expect_eq(bindex_load(path, &x), ER_INPUT);
    cr_expect(strstr(er_msg(), "checksum") != NULL, "%s", er_msg());
    /* wrong magic */
    data[0] = 'X';
    cr_assert_eq(write_file_atomic(path, data, len), ER_OK);
    cr_expect_eq(bindex_load(path, &x), ER_INPUT);
    cr_expect(strstr(er_msg(), "magic") != NULL, "%s", er_msg());
    free(data); free(path); free(c); free(ids);
}

Test(infer_index, duplicate_ids_rejected) {
    uint64_t c[3] = {1, 2, 3};
    int64_t ids[3] = {7, 8, 7};
    bindex ix;
    cr_expect_eq(bindex_build(&ix, INDEX_SCAN, 64, c, ids, 3, 0), ER_INPUT);
    cr_expect(strstr(er_msg(), "duplicate id 7") != NULL, "%s", er_msg());
}

Test(infer_index, float_index_equals_reference) {
    int n = 3000, d = 24, nq = 30, k = 10;
    float *x = malloc((size_t)n * d * 4), *q = malloc((size_t)nq * d * 4);
    rng_t r = rng_make(5, 6);
    for (int i = 0; i < n * d; i++) x[i] = rng_normal(&r);
    for (int i = 0; i < nq * d; i++) q[i] = rng_normal(&r);
    memcpy(x + 10 * d, x + 20 * d, d * 4); /* exact duplicate: tie broken by id */
    memcpy(q, x + 20 * d, d * 4);
    int64_t *ids = malloc(n * 8);
    for (int i = 0; i < n; i++) ids[i] = n - i;
    findex ix;
    cr_assert_eq(findex_build(&ix, d, x, ids, n), ER_OK);
    cr_assert_eq(findex_delete(&ix, ids[7]), ER_OK);
    int64_t ia[300], ib[300]; float da[300], db[300]; int ca[30], cb[30];
    findex_search(&ix, q, nq, k, ia, da, ca);
    findex_search_ref(&ix, q, nq, k, ib, db, cb);
    for (int i = 0; i < nq * k; i++) {
        cr_expect_float_eq(da[i], db[i], 1e-5);
        /* ids may only differ where two distances are within rounding of each other */
        if (ia[i] != ib[i]) cr_expect(i % k + 1 < k && fabsf(da[i] - da[i + 1]) < 1e-5, "rank %d: %lld vs %lld", i, (long long)ia[i], (long long)ib[i]);
        cr_expect_neq(ia[i], ids[7]);
    }
    cr_expect_eq(ia[0], ids[20] < ids[10] ? ids[20] : ids[10], "duplicate: smaller id first");
    cr_expect_eq(ia[1], ids[20] < ids[10] ? ids[10] : ids[20]);
    /* non-finite input rejected */
    x[5] = NAN;
    findex bad;
    cr_expect_eq(findex_build(&bad, d, x, ids, n), ER_INPUT);
    findex_free(&ix);
    free(x); free(q); free(ids);
}

/* issue 30 F18: the float index found an id by scanning every row, so adding 200,000 cases one by
 * one was quadratic; it keeps an id map now. The map must agree with the rows through adds,
 * deletes, re-adds of a deleted id and growth past its capacity. */
Test(infer_index, float_index_id_map_through_adds_and_deletes) {
    int d = 4;
    float v[4] = {1, 0, 0, 0};
    int64_t id0[1] = {1000};
    findex ix;
    cr_assert_eq(findex_build(&ix, d, v, id0, 1), ER_OK);
    for (int64_t id = 0; id < 5000; id++) {
        v[1] = (float)id;
        cr_assert_eq(findex_add(&ix, v, id == 1000 ? 9999 : id), ER_OK, "%s", er_msg());
    }
    cr_expect_eq(findex_add(&ix, v, 1000), ER_INPUT, "an id of the build is refused");
    cr_expect_eq(findex_add(&ix, v, 4321), ER_INPUT, "an added id is refused");
    for (int64_t id = 0; id < 5000; id += 2) cr_assert_eq(findex_delete(&ix, id == 1000 ? 9999 : id), ER_OK);
    cr_expect_eq(findex_delete(&ix, 2), ER_INPUT, "deleted twice");
    cr_expect_eq(findex_add(&ix, v, 2), ER_OK, "a deleted id may come back: %s", er_msg());
    cr_expect_eq(findex_add(&ix, v, 3), ER_INPUT, "a live id may not");
    cr_expect_eq(findex_delete(&ix, 2), ER_OK);
    cr_expect_eq(findex_delete(&ix, 77777), ER_INPUT);
    findex_free(&ix);
}
