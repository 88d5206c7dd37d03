/* Fuzz target: PNG decoding from memory, as 1 and 3 channels. */
#include "datasets/image.h"
#include "nn/base/base.h"
#include "tests/fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    for (int channels = 1; channels <= 3; channels += 2) {
        image im = {0};
        if (image_decode_png(data, size, "fuzz.png", channels, &im) == ER_OK) image_free(&im);
    }
    return 0;
}
