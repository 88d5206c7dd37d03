/* Fuzz target: a training config file followed by --set lines. The input is split at its first NUL
 * byte: before it the config text, after it one `key=value` per line, as `--set` gives them. Every
 * registered objective reads them, so every key's parser and range check is reached. */
#include "nn/base/base.h"
#include "tests/fuzz/fuzz_util.h"
#include "train/objective.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    size_t cfg_len = nul ? (size_t)(nul - data) : size;
    const char *path = fuzz_file("run.cfg", data, cfg_len);
    char *sets_text = nul ? fuzz_text(nul + 1, size - cfg_len - 1) : fuzz_text(data, 0);
    char *sets[16];
    int nsets = 0;
    for (char *save = NULL, *l = strtok_r(sets_text, "\n", &save); l && nsets < 16; l = strtok_r(NULL, "\n", &save))
        sets[nsets++] = l;
    int nobj;
    const objective_def *const *defs = objective_list(&nobj);
    for (int i = 0; i < nobj; i++) {
        objective_config oc;
        objective_config_init(&oc, defs[i]);
        objective_config_load(&oc, path, sets, nsets);
        objective_config_free(&oc);
    }
    free(sets_text);
    return 0;
}
