/* common_opts.c — see common_opts.h. */
#include "cli/common_opts.h"

#include <stdlib.h>
#include <string.h>

#include "nn/base/base.h"

int cli_split_sets(int argc, char **argv, char ***rest, int *nrest, char ***sets, int *nsets) {
    *rest = xmalloc((argc + 1) * sizeof(char *));
    *sets = xmalloc((argc + 1) * sizeof(char *));
    *nrest = *nsets = 0;
    for (int i = 0; i < argc; i++) {
        if (i > 0 && !strcmp(argv[i], "--set")) {
            if (i + 1 >= argc) return er_fail(ER_INPUT, "--set needs key=value");
            (*sets)[(*nsets)++] = argv[++i];
        } else if (i > 0 && !strncmp(argv[i], "--set=", 6)) {
            (*sets)[(*nsets)++] = argv[i] + 6;
        } else {
            (*rest)[(*nrest)++] = argv[i];
        }
    }
    return ER_OK;
}
