/* Fuzz target: a manifest CSV (path,label,...): load, then the label and field tables built from it. */
#include "datasets/manifest.h"
#include "nn/base/base.h"
#include "tests/fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    manifest m;
    if (manifest_load(fuzz_file("manifest.csv", data, size), &m)) return 0;
    int *ids, n;
    char **names;
    manifest_label_ids(&m, &ids, &names, &n);
    manifest_free_labels(ids, names, n);
    manifest_field_ids(&m, MF_PATIENT, &ids, &names, &n);
    manifest_free_labels(ids, names, n);
    for (int i = 0; i < m.n; i++) free(manifest_image_path(&m, i));
    manifest_free(&m);
    return 0;
}
