/* common_opts.h — the options that mean the same in every command, declared once: one name, type,
 * range, help text and message each (nn/base/args.h enforces them). A command lists them in its
 * table like any other option; trailing designated fields add to the declaration:
 *
 *   arg_spec specs[] = {
 *       OPT_K(&k),
 *       OPT_OUT(&out, "HTML file to write", .required = 1),
 *       OPT_JSON(&json),
 *   };
 *
 * --out, --emb and --manifest name a file whose role is the command's: they share the name, type
 * and messages, and take the role as their help text. */
#ifndef ENDORET_CLI_COMMON_OPTS_H
#define ENDORET_CLI_COMMON_OPTS_H

#include "infer/eval/bootstrap.h"
#include "nn/base/args.h"

#define OPT_STR_(x) #x
#define OPT_STR(x) OPT_STR_(x)

#define OPT_JSON(dst, ...) {"json", ARG_FLAG, (dst), "machine-readable output: JSON lines on stdout", __VA_ARGS__}
#define OPT_SEED(dst, ...) {"seed", ARG_INT, (dst), "random seed (the same seed gives the same output)", __VA_ARGS__}
#define OPT_THREADS(dst, ...) {"threads", ARG_THREADS, (dst), "OpenMP threads (0 = OMP_NUM_THREADS, else every core)", __VA_ARGS__}
#define OPT_DEVICE(dst, ...) {"device", ARG_STR, (dst), "where the model runs", "cpu|cuda|cuda:N", __VA_ARGS__}
#define OPT_PRECISION(dst, ...)                                                                              \
    {"precision", ARG_STR, (dst), "fp32, or bf16 mixed precision (bf16 products and activations, fp32 weights, optimizer state, residual stream and losses)", "fp32|bf16", \
     __VA_ARGS__}
/* neighbours per query: at least 1 (a command may then cap it at the number of cases) */
#define OPT_K(dst, ...) {"k", ARG_INT, (dst), "neighbours per query", "[1, inf)", __VA_ARGS__}
/* the same where 0 means the vote's own k (knn_default_k: 6 majority, 290 weighted) */
#define OPT_K_BY_VOTE(dst, ...)                                                                                  \
    {"k", ARG_INT, (dst), "neighbours per query (0 = the vote's: 6 majority, 290 weighted)", "[0, inf)", \
     __VA_ARGS__}
/* the kNN vote and its temperature (classify, eval classify, eval split) */
#define OPT_VOTE(dst, ...)                                                                                     \
    {"vote", ARG_STR, (dst), "kNN vote: majority (EndoFinder; ties -> nearest) or weighted (PGCon, exp(sim/tau))", \
     "majority|weighted", __VA_ARGS__}
#define OPT_TAU(dst, ...) {"tau", ARG_DOUBLE, (dst), "temperature of the weighted vote", "(0, inf)", __VA_ARGS__}
/* binary codes and the index over them (index build, eval, sweep) */
#define OPT_HASH(dst, ...) {"hash", ARG_STR, (dst), "hashing of the descriptors into codes", "sign|pca|itq", __VA_ARGS__}
#define OPT_INDEX_KIND(dst, ...) {"kind", ARG_STR, (dst), "index structure", "scan|balltree|mih", __VA_ARGS__}
/* the options `report` and `serve` share (report_opts, infer/report/report.h): OPT_REPORT_N entries */
#define OPT_REPORT_N 8
#define OPT_REPORT(o)                                                                                         \
    {"index", ARG_STR, &(o).index, "case database (endoret index build)", .required = 1},                   \
    {"query", ARG_STR, &(o).query, "embedding file of the queries (none: the database's cases, leave-one-out)"}, \
    OPT_MANIFEST(&(o).manifest, "manifest of the query images (none: the one named in the query file)"),    \
    OPT_K_BY_VOTE(&(o).cfg.k), OPT_VOTE(&(o).vote), OPT_TAU(&(o).cfg.tau),                                  \
    {"float", ARG_FLAG, &(o).cfg.use_float, "neighbours by float cosine instead of Hamming"},                \
    {"limit", ARG_INT, &(o).cfg.limit, "at most this many queries (0 = all)", "[0, inf)"}
/* several cut-offs: a comma-separated list of k */
#define OPT_KS(dst, ...) {"k", ARG_STR, (dst), "neighbour counts, comma-separated", NULL, __VA_ARGS__}
#define OPT_BOOTSTRAP(dst, ...)                                                                                \
    {"bootstrap", ARG_INT, (dst), "bootstrap replicates of the 95% intervals (0 = none)", "[0, " OPT_STR(BOOTSTRAP_MAX_N) "]", \
     __VA_ARGS__}
/* the sequence protocol's near-duplicate rule (eval sequence, eval compare --sequence) */
#define OPT_GAP(dst, ...) \
    {"gap", ARG_INT, (dst), "ignore same-sequence frames fewer than this many positions away", "[0, inf)", __VA_ARGS__}
#define OPT_GAP_FRAC(dst, ...) \
    {"gap-frac", ARG_DOUBLE, (dst), "... or closer than this share of the sequence's frames", "[0, 1]", __VA_ARGS__}
#define OPT_OUT(dst, role, ...) {"out", ARG_STR, (dst), role, __VA_ARGS__}
#define OPT_EMB(dst, role, ...) {"emb", ARG_STR, (dst), role, __VA_ARGS__}
#define OPT_MANIFEST(dst, role, ...) {"manifest", ARG_STR, (dst), role, __VA_ARGS__}
/* --set is pulled out of argv before args_parse (it repeats: cli_split_sets); declared for --help */
#define OPT_SET(dst) {"set", ARG_STR, (dst), "key=value: override one config key (repeatable; --keys lists them)"}

/* Pull every `--set k=v` / `--set=k=v` out of argv (they may repeat); the rest (argv[0] first) goes
 * to args_parse. Both arrays are malloc'd (free them); ER_INPUT when --set has no value. */
int cli_split_sets(int argc, char **argv, char ***rest, int *nrest, char ***sets, int *nsets);

#endif
