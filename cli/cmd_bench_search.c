/* cmd_bench_search.c — `endoret bench search`: per-query latency of every exact index on the same
 * database and queries, the speedups over float search, and the Hamming scan against the memory
 * bandwidth limit measured in the same run (bytes of codes / streaming read bandwidth).
 * Data: clustered codes by default (items = one of n/1000 random centres with ~12.5% of bits
 * flipped; queries = a database item with ~3% of bits flipped: a re-identification workload), or
 * uniform random codes (--data uniform, the worst case for multi-index hashing). Float embeddings
 * (dim --dim) carry the same sign pattern plus noise; above --float-max rows the float search is
 * timed on the first --float-max rows and scaled linearly (it is a linear scan; said in the output). */
#include "cli/cli_util.h"
#include "infer/retrieval/index.h"
#include "cli/common_opts.h"
#include "nn/base/memory.h"
#include "nn/base/base.h"
#include "nn/base/rng.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

static double bandwidth_gbs(void) {
    size_t n = (size_t)64 << 20; /* 512 MB of uint64 */
    uint64_t *buf = xmalloc_aligned(n * 8);
    #pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) buf[i] = i;
    double best = 1e30;
    volatile uint64_t sink = 0;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = now_seconds();
        uint64_t acc = 0;
        #pragma omp parallel for schedule(static) reduction(^ : acc)
        for (size_t i = 0; i < n; i++) acc ^= buf[i];
        double dt = now_seconds() - t0;
        sink ^= acc;
        if (dt < best) best = dt;
    }
    (void)sink;
    free(buf);
    return (double)n * 8 / best / 1e9;
}

static uint64_t flip_mask(rng_t *r, int and_count) {
    uint64_t m = ~0ULL;
    for (int i = 0; i < and_count; i++) m &= rng_u64(r);
    return m;
}

int cmd_bench_search(int argc, char **argv) {
    int n = 1000000, bits = 64, k = 10, nq = 200, dim = 128, json = 0, seed = 1, float_max = 2000000, check = 1, mih_m = 0;
    const char *data = "clustered", *only = "scan,balltree,mih";
    arg_spec specs[] = {
        {"n", ARG_INT, &n, "database size", "[1, 1000000000]"},
        {"bits", ARG_INT, &bits, "code length", "[1, 4096]"},
        OPT_K(&k),
        {"queries", ARG_INT, &nq, "queries per index", "[1, 1000000]"},
        {"dim", ARG_INT, &dim, "float embedding size for the float baseline", "[1, 65536]"},
        {"data", ARG_STR, &data, "synthetic codes", "clustered|uniform"},
        {"float-max", ARG_INT, &float_max, "largest float database timed directly", "[1, 1000000000]"},
        {"check", ARG_INT, &check, "1 = verify every index returns the scan's top-k"},
        OPT_SEED(&seed),
        {"indexes", ARG_STR, &only, "binary indexes to time (the scan always runs: it is the reference)", .def = "scan,balltree,mih"},
        {"mih-m", ARG_INT, &mih_m, "multi-index hashing substrings (0 = about log2 n bits each)"},
        OPT_JSON(&json),
    };
    int rc = args_parse(argc, argv, specs, 12, "endoret bench search [--n N] [--bits B] [--k K] [--json]", NULL, NULL);
    if (rc == ARGS_HELP) return 0;
    if (rc) return rc;
    if ((rc = args_range("k", k, 1, n < 100000 ? n : 100000))) return rc; /* at most the database */
    { /* codes, ids and the floats of the baseline, built before anything is timed: refused when they cannot fit */
        double nf0 = n < float_max ? n : float_max, W0 = (bits + 63) / 64;
        mem_estimate e = {0};
        e.data = (double)n * (W0 * 8 * 2 + 8) + (nf0 + nq) * dim * 4.0 * 2 + (double)nq * k * 16;
        if ((rc = mem_check(&e, "bench search", "--n, --float-max, --dim or --queries"))) return rc;
    }
    int uniform = !strcmp(data, "uniform");
    const int W = (bits + 63) / 64;
    const uint64_t tailmask = bits % 64 ? ~0ULL >> (64 - bits % 64) : ~0ULL;
    /* ---- data ---- */
    double t0 = now_seconds();
    uint64_t *codes = xmalloc_aligned((size_t)n * W * 8), *q = xmalloc((size_t)nq * W * 8);
    int64_t *ids = xmalloc((size_t)n * 8);
    int G = n / 1000 > 1024 ? n / 1000 : 1024;
    uint64_t *cent = xmalloc((size_t)G * W * 8);
    rng_t r0 = rng_make((uint64_t)seed, rng_stream(RNG_SAMPLING, 0xbe, 0));
    for (size_t i = 0; i < (size_t)G * W; i++) cent[i] = rng_u64(&r0);
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        rng_t r = rng_make((uint64_t)seed, rng_stream(RNG_SAMPLING, 0xbf, (uint32_t)i));
        int g = (int)rng_below(&r, (uint32_t)G);
        for (int w = 0; w < W; w++) {
            uint64_t v = uniform ? rng_u64(&r) : cent[(size_t)g * W + w] ^ flip_mask(&r, 3);
            codes[i * W + w] = w == W - 1 ? v & tailmask : v;
        }
        ids[i] = i;
    }
    for (int i = 0; i < nq; i++) {
        rng_t r = rng_make((uint64_t)seed, rng_stream(RNG_SAMPLING, 0xc0, (uint32_t)i));
        int64_t src = rng_below(&r, (uint32_t)n);
        for (int w = 0; w < W; w++) {
            uint64_t v = uniform ? rng_u64(&r) : codes[src * W + w] ^ flip_mask(&r, 5);
            q[(size_t)i * W + w] = w == W - 1 ? v & tailmask : v;
        }
    }
    int nf = n < float_max ? n : float_max;
    float *fx = xmalloc((size_t)nf * dim * sizeof(float)), *fq = xmalloc((size_t)nq * dim * sizeof(float));
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < nf; i++) {
        rng_t r = rng_make((uint64_t)seed, rng_stream(RNG_SAMPLING, 0xc1, (uint32_t)i));
        for (int j = 0; j < dim; j++) {
            float sgn = j < bits ? ((codes[i * W + j / 64] >> (j % 64) & 1) ? 1.0f : -1.0f) : 0.0f;
            fx[i * dim + j] = sgn + (rng_uniform(&r) - 0.5f); /* uniform noise: cheap to draw */
        }
    }
    for (int i = 0; i < nq; i++) {
        rng_t r = rng_make((uint64_t)seed, rng_stream(RNG_SAMPLING, 0xc2, (uint32_t)i));
        for (int j = 0; j < dim; j++) {
            float sgn = j < bits ? ((q[(size_t)i * W + j / 64] >> (j % 64) & 1) ? 1.0f : -1.0f) : 0.0f;
            fq[(size_t)i * dim + j] = sgn + (rng_uniform(&r) - 0.5f);
        }
    }
    double t_data = now_seconds() - t0;
    double bw = bandwidth_gbs();
    double bytes = (double)n * W * 8;
    double limit_ms = bytes / (bw * 1e9) * 1e3;
    if (!json)
        printf("bench search: n = %d, %d-bit codes (%.1f MB), k = %d, %d queries, %s data, %d threads%s (data %.1f s)\n"
               "memory bandwidth (streaming read, same run): %.1f GB/s -> one pass over the codes: %.3f ms\n",
               n, bits, bytes / 1e6, k, nq, data, omp_get_max_threads(),
               scan_has_vpopcnt() ? ", AVX-512 VPOPCNTDQ" : ", portable popcount", t_data, bw, limit_ms);
    /* ---- float ---- */
    int64_t *fid = xmalloc((size_t)nq * k * 8);
    float *fd = xmalloc((size_t)nq * k * sizeof(float));
    int *cnt = xmalloc((size_t)nq * sizeof(int));
    findex fi;
    t0 = now_seconds();
    if ((rc = findex_build(&fi, dim, fx, ids, nf))) goto out;
    double fbuild = now_seconds() - t0;
    free(fx); fx = NULL;
    t0 = now_seconds();
    findex_search(&fi, fq, nq, k, fid, fd, cnt);
    double float_ms = (now_seconds() - t0) * 1e3 / nq * ((double)n / nf);
    findex_free(&fi);
    if (json) printf("{\"index\": \"float\", \"ms_per_query\": %.6g, \"n\": %d, \"dim\": %d, \"measured_rows\": %d, \"build_s\": %.3f}\n", float_ms, n, dim, nf, fbuild);
    else printf("  %-9s %10.4f ms/query  (cosine via sgemm, %d-d%s; build %.2f s)\n", "float", float_ms, dim,
                nf < n ? ", timed on the first rows and scaled to n" : "", fbuild);
    /* ---- binary indexes ---- */
    int64_t *ref = xmalloc((size_t)nq * k * 8), *got = xmalloc((size_t)nq * k * 8);
    int32_t *dref = xmalloc((size_t)nq * k * 4), *dgot = xmalloc((size_t)nq * k * 4);
    double scan_ms = 0, mih_ms = 0, bt_ms = 0;
    for (int kind = 0; kind < 3; kind++) {
        if (kind && !strstr(only, index_kind_name((index_kind)kind))) continue;
        bindex ix;
        t0 = now_seconds();
        if ((rc = bindex_build(&ix, (index_kind)kind, bits, codes, ids, n, mih_m))) goto out2;
        double build = now_seconds() - t0;
        int warm = nq < 8 ? nq : 8;
        bindex_search(&ix, q, warm, k, got, dgot, cnt);
        t0 = now_seconds();
        bindex_search(&ix, q, nq, k, kind == 0 ? ref : got, kind == 0 ? dref : dgot, cnt);
        double ms = (now_seconds() - t0) * 1e3 / nq;
        int mism = 0;
        if (kind && check)
            for (size_t i = 0; i < (size_t)nq * k; i++) mism += got[i] != ref[i] || dgot[i] != dref[i];
        if (kind == 0) {
            /* single-query latency: database split across threads, one query at a time */
            int ns = nq < 50 ? nq : 50;
            t0 = now_seconds();
            for (int i = 0; i < ns; i++) scan_search_one_parallel(&ix, q + (size_t)i * W, k, got, dgot, cnt);
            double single = (now_seconds() - t0) * 1e3 / ns;
            scan_ms = ms;
            if (json)
                printf("{\"index\": \"scan\", \"ms_per_query\": %.6g, \"ms_single_query\": %.6g, \"bandwidth_gbs\": %.4g, "
                       "\"bandwidth_limit_ms\": %.6g, \"single_query_vs_limit\": %.4g, \"speedup_vs_float\": %.4g, \"build_s\": %.3f}\n",
                       ms, single, bw, limit_ms, single / limit_ms, float_ms / ms, build);
            else
                printf("  %-9s %10.4f ms/query  batched (%d queries share each pass); one query at a time %.4f ms = %.2fx the "
                       "bandwidth limit; %.0fx faster than float\n", "scan", ms, nq, single, single / limit_ms, float_ms / ms);
        } else {
            const char *name = index_kind_name((index_kind)kind);
            if (kind == INDEX_MIH) mih_ms = ms; else bt_ms = ms;
            char extra[96] = "";
            if (kind == INDEX_MIH) snprintf(extra, sizeof extra, "%d substrings", mih_substrings(&ix));
            else { int depth; int64_t leaves; balltree_stats(&ix, &depth, &leaves); snprintf(extra, sizeof extra, "depth %d, %lld leaves", depth, (long long)leaves); }
            if (json)
                printf("{\"index\": \"%s\", \"ms_per_query\": %.6g, \"speedup_vs_float\": %.4g, \"speedup_vs_scan\": %.4g, "
                       "\"build_s\": %.3f, \"mismatches_vs_scan\": %d}\n", name, ms, float_ms / ms, scan_ms / ms, build, mism);
            else
                printf("  %-9s %10.4f ms/query  %.0fx faster than float, %.2fx vs scan (%s; build %.2f s; top-k %s the scan's)\n",
                       name, ms, float_ms / ms, scan_ms / ms, extra, build, !check ? "not checked against" : mism ? "DIFFERS from" : "identical to");
            if (mism) rc = er_fail(ER_RUNTIME, "bench search: %s returned %d results different from the scan", name, mism);
        }
        bindex_free(&ix);
        if (rc) goto out2;
    }
    (void)bt_ms; (void)mih_ms;
out2:
    free(ref); free(got); free(dref); free(dgot);
out:
    free(fid); free(fd); free(cnt);
    free(fx); free(fq); free(codes); free(q); free(ids); free(cent);
    return rc;
}
