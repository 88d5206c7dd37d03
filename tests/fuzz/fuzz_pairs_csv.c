/* Fuzz target: the CSVs of pairs: perceived-similarity scores (a,b,score,observer, also what
 * `vss serve` re-reads) indexed against a few ids, and the scoring sheet of `vss draw`. */
#include "infer/perceived/perceived_draw.h"
#include "infer/perceived/perceived_likert.h"
#include "nn/base/base.h"
#include "tests/fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = fuzz_text(data, size);
    likert_gt gt;
    if (likert_parse(text, "scores.csv", &gt) == ER_OK) {
        const int64_t ids[] = {0, 1, 2, 3, 5, 8, 13, -1};
        int *ia, *ib;
        if (likert_index_pairs(&gt, ids, 8, "ids", &ia, &ib) == ER_OK) { free(ia); free(ib); }
        likert_free(&gt);
    }
    free(text);
    vss_sheet sh;
    if (vss_sheet_load(fuzz_file("sheet.csv", data, size), &sh) == ER_OK) vss_sheet_free(&sh);
    return 0;
}
