/* embed_hybrid.c — see embed_hybrid.h. */
#include "cli/embed_hybrid.h"

#include <stdio.h>
#include <string.h>

#include "cli/common_opts.h"
#include "infer/retrieval/hybrid.h"
#include "nn/base/args.h"
#include "nn/base/base.h"

int embed_wants_hybrid(int argc, char **argv) {
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], "--hybrid") || !strncmp(argv[i], "--hybrid=", 9)) return 1;
    return 0;
}

int embed_hybrid(int argc, char **argv) {
    const char *a_path = NULL, *h_path = NULL, *out = NULL;
    double w = -1;
    int json = 0;
    arg_spec specs[] = {
        {"hybrid", ARG_STR, &a_path, "learned descriptors (cosine) of a manifest's rows", .required = 1},
        {"hist", ARG_STR, &h_path, "colour histograms of the same rows (embed --baseline colorhist)", .required = 1},
        {"hist-weight", ARG_DOUBLE, &w, "the histogram's share w of the similarity: (1 - w) cosine + w Bhattacharyya", "[0, 1]",
         .required = 1},
        OPT_OUT(&out, "output embedding file (.safetensors)", .required = 1),
        OPT_JSON(&json),
    };
    int rc = args_parse(argc, argv, specs, sizeof specs / sizeof *specs,
                        "endoret embed --hybrid A.safetensors --hist H.safetensors --hist-weight W --out F.safetensors", NULL, NULL);
    if (rc == ARGS_HELP) return ER_OK;
    if (rc) return rc;
    emb_set a = {0}, h = {0}, o = {0};
    if (!(rc = emb_load_arg(a_path, "--hybrid", &a)) && !(rc = emb_load_arg(h_path, "--hist", &h))) {
        rc = emb_hybrid(&a, &h, w, &o);
        if (rc) rc = er_fail(rc, "%s + %s: %s", a_path, h_path, er_msg());
        if (!rc) rc = emb_save(out, &o);
    }
    if (!rc && json) printf("{\"out\": \"%s\", \"n\": %d, \"dim\": %d, \"hist_weight\": %g}\n", out, o.n, o.dim, w);
    else if (!rc) printf("embed: hybrid of %d rows -> %s (%d-d: %s)\n", o.n, out, o.dim, o.model);
    emb_free(&a), emb_free(&h), emb_free(&o);
    return rc;
}
