/* main.c — the `endoret` binary: one dispatcher over the commands of cli/cmd_*.c. Each command
 * is a function `int cmd_xxx(int argc, char **argv)` returning ER_OK / ER_RUNTIME / ER_INPUT with the message
 * in er_msg(). Commands with sub-commands (index build, eval reid, bench gemm...) dispatch them from
 * their own arg_sub table, the same mechanism as this one (nn/base/args.h). Commands are referenced
 * weakly so the table can list a command whose code is not part of this build; such a command says
 * so and exits 2 instead of failing to link. */
#include "nn/base/args.h"
#include "nn/base/base.h"
#include "nn/base/process_group.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DECLARE(fn) extern int fn(int argc, char **argv) __attribute__((weak));
DECLARE(cmd_synth) DECLARE(cmd_data) DECLARE(cmd_train) DECLARE(cmd_embed) DECLARE(cmd_index)
DECLARE(cmd_search) DECLARE(cmd_classify) DECLARE(cmd_eval) DECLARE(cmd_sweep) DECLARE(cmd_bench)
DECLARE(cmd_report) DECLARE(cmd_serve) DECLARE(cmd_vss) DECLARE(cmd_bow) DECLARE(cmd_ckpt) DECLARE(cmd_convert)

/* Backends describe themselves; the CUDA one exists only in CUDA builds. */
extern const char *cpu_backend_describe(void) __attribute__((weak));
extern const char *cuda_backend_describe(void) __attribute__((weak));

static const arg_sub commands[] = {
    {"synth", cmd_synth, "render a synthetic multi-view polyp-scene dataset"},
    {"data", cmd_data, "import a public dataset layout into a manifest / check a manifest"},
    {"train", cmd_train, "train an encoder (image | scene | pgcon | dual | finetune)"},
    {"embed", cmd_embed, "compute descriptors for every image of a manifest"},
    {"index", cmd_index, "build | add | delete | info: the case database and its index"},
    {"search", cmd_search, "top-k neighbours of query images"},
    {"classify", cmd_classify, "kNN diagnosis (majority or similarity-weighted vote)"},
    {"eval", cmd_eval, "re-identification / retrieval / classification metrics, perceived similarity"},
    {"sweep", cmd_sweep, "sweep hash length and k"},
    {"bench", cmd_bench, "benchmarks: gemm | search | conv | latency | train | cuda"},
    {"ckpt", cmd_ckpt, "inspect a safetensors file"},
    {"convert", cmd_convert, "rewrite weights in another layout (timm | meta | hf | torchvision)"},
    {"report", cmd_report, "HTML report of retrieval results"},
    {"serve", cmd_serve, "local retrieval web page"},
    {"vss", cmd_vss, "perceived-similarity scoring: draw pairs | serve a scoring page"},
    {"bow", cmd_bow, "Dense-SIFT bag of visual words: train | embed | cv"},
};
enum { NCOMMANDS = sizeof commands / sizeof commands[0] };

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
    args_print_subs(stdout, commands, NCOMMANDS);
    printf("\n  --version  version and compiled-in backends\n"
           "\nexit status: 0 ok, 1 runtime failure, 2 bad input or usage\n");
}

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        print_help();
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
        print_version();
        return 0;
    }
    er_clear();
    int rc = args_dispatch(argc, argv, "endoret <command> [options]", commands, NCOMMANDS);
    if (rc != ER_OK) {
        const char *m = er_msg();
        int known = 0; /* a command's own failure is prefixed with its name; a bad name is said as is */
        for (int i = 0; i < NCOMMANDS; i++) known |= !strcmp(commands[i].name, argv[1]);
        if (known) fprintf(stderr, "endoret %s: %s\n", argv[1], m[0] ? m : "failed");
        else fprintf(stderr, "endoret: %s\n", m);
        return rc == ER_INPUT ? 2 : 1;
    }
    return 0;
}
