/* main.c — the `endoret` binary: one dispatcher over the commands of cli/cmd_*.c. Each command
 * is a function `int cmd_xxx(int argc, char **argv)` returning ER_OK / ER_RUNTIME / ER_INPUT with the message
 * in er_msg(). Commands are referenced weakly so the table can list a command whose code is not
 * part of this build; such a command says so and exits 2 instead of failing to link. */
#include "nn/base/base.h"
#include "nn/base/process_group.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int (*cmd_fn)(int argc, char **argv);

#define DECLARE(fn) extern int fn(int argc, char **argv) __attribute__((weak));
DECLARE(cmd_synth) DECLARE(cmd_data) DECLARE(cmd_train) DECLARE(cmd_embed) DECLARE(cmd_index)
DECLARE(cmd_search) DECLARE(cmd_classify) DECLARE(cmd_eval) DECLARE(cmd_eval_perceived)
DECLARE(cmd_sweep) DECLARE(cmd_bench_gemm) DECLARE(cmd_bench_search) DECLARE(cmd_bench_conv) DECLARE(cmd_bench)
DECLARE(cmd_report) DECLARE(cmd_serve) DECLARE(cmd_vss) DECLARE(cmd_bow)
DECLARE(cmd_ckpt) DECLARE(cmd_convert)

/* Backends describe themselves; the CUDA one exists only in CUDA builds. */
extern const char *cpu_backend_describe(void) __attribute__((weak));
extern const char *cuda_backend_describe(void) __attribute__((weak));

typedef struct {
    const char *name, *sub; /* sub == NULL: the command takes every sub-verb itself */
    cmd_fn *fn;             /* address of the weak symbol's value */
    const char *help;
} command;

static cmd_fn f_synth, f_data, f_train, f_embed, f_index, f_search, f_classify, f_eval, f_eval_perceived,
    f_sweep, f_bench_gemm, f_bench_search, f_bench_conv, f_bench, f_report, f_serve, f_vss, f_bow, f_ckpt, f_convert;

static const command commands[] = {
    {"synth", NULL, &f_synth, "render a synthetic multi-view polyp-scene dataset"},
    {"data", NULL, &f_data, "import a public dataset layout into a manifest / check a manifest"},
    {"train", NULL, &f_train, "train an encoder (image | scene | pgcon | dual)"},
    {"embed", NULL, &f_embed, "compute descriptors for every image of a manifest"},
    {"index", NULL, &f_index, "build | add | delete | info: the case database and its index"},
    {"search", NULL, &f_search, "top-k neighbours of query images"},
    {"classify", NULL, &f_classify, "kNN diagnosis (majority or similarity-weighted vote)"},
    {"eval", "perceived", &f_eval_perceived, "correlate a distance with perceived-similarity scores"},
    {"eval", NULL, &f_eval, "re-identification / retrieval / classification metrics"},
    {"sweep", NULL, &f_sweep, "sweep hash length and k"},
    {"bench", "gemm", &f_bench_gemm, "sgemm GFLOP/s vs OpenBLAS"},
    {"bench", "search", &f_bench_search, "index latency vs float search and memory bandwidth"},
    {"bench", "conv", &f_bench_conv, "CPU conv2d on ResNet-50 shapes vs direct loops"},
    {"bench", NULL, &f_bench, "other benchmarks"},
    {"ckpt", NULL, &f_ckpt, "inspect a safetensors file"},
    {"convert", NULL, &f_convert, "rewrite weights in another layout (timm | meta | hf | torchvision)"},
    {"report", NULL, &f_report, "HTML report of retrieval results"},
    {"serve", NULL, &f_serve, "local retrieval web page"},
    {"vss", NULL, &f_vss, "perceived-similarity scoring: draw pairs | serve a scoring page"},
    {"bow", NULL, &f_bow, "Dense-SIFT bag of visual words: train | embed"},
};
enum { NCOMMANDS = sizeof commands / sizeof commands[0] };

static void bind(void) {
    f_synth = cmd_synth; f_data = cmd_data; f_train = cmd_train; f_embed = cmd_embed;
    f_index = cmd_index; f_search = cmd_search; f_classify = cmd_classify; f_eval = cmd_eval;
    f_eval_perceived = cmd_eval_perceived; f_sweep = cmd_sweep; f_bench_gemm = cmd_bench_gemm;
    f_bench_search = cmd_bench_search; f_bench_conv = cmd_bench_conv; f_bench = cmd_bench;
    f_report = cmd_report; f_serve = cmd_serve; f_vss = cmd_vss; f_bow = cmd_bow; f_ckpt = cmd_ckpt;
    f_convert = cmd_convert;
}

static void print_version(void) {
    printf("endoret %s\n", ENDORET_VERSION);
    printf("cpu: %s\n", cpu_backend_describe ? cpu_backend_describe() : "openmp");
    printf("cuda: %s\n", cuda_backend_describe ? cuda_backend_describe() : "not compiled");
    printf("mpi: %s\n", pg_describe());
}

static void print_help(void) {
    printf("endoret %s — explainable endoscopic image retrieval: train encoders, hash, search, evaluate\n\n"
           "usage: endoret <command> [sub-command] [options]   (endoret <command> --help for options)\n\n"
           "commands:\n", ENDORET_VERSION);
    for (int i = 0; i < NCOMMANDS; i++) {
        char name[48];
        snprintf(name, sizeof name, "%s%s%s", commands[i].name, commands[i].sub ? " " : "",
                 commands[i].sub ? commands[i].sub : "");
        printf("  %-16s %s%s\n", name, commands[i].help, *commands[i].fn ? "" : " (not in this build)");
    }
    printf("\n  --version        version and compiled-in backends\n"
           "\nexit status: 0 ok, 1 runtime failure, 2 bad input or usage\n");
}

int main(int argc, char **argv) {
    bind();
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        print_help();
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
        print_version();
        return 0;
    }
    for (int i = 0; i < NCOMMANDS; i++) {
        const command *c = &commands[i];
        if (strcmp(c->name, argv[1])) continue;
        int consumed = 1;
        if (c->sub) {
            if (argc < 3 || strcmp(c->sub, argv[2])) continue;
            consumed = 2;
        }
        if (!*c->fn) {
            fprintf(stderr, "endoret: '%s%s%s' is not part of this build\n", c->name, c->sub ? " " : "",
                    c->sub ? c->sub : "");
            return 2;
        }
        er_clear();
        /* The command sees argv starting at its own name ("search" or "gemm"). */
        int rc = (*c->fn)(argc - consumed, argv + consumed);
        if (rc != ER_OK) {
            const char *m = er_msg();
            fprintf(stderr, "endoret %s: %s\n", argv[1], m[0] ? m : "failed");
            return rc == ER_INPUT ? 2 : 1;
        }
        return 0;
    }
    fprintf(stderr, "endoret: unknown command '%s' (endoret --help lists them)\n", argv[1]);
    return 2;
}
