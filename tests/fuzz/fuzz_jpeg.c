/* Fuzz target: JPEG decoding from memory, full size and scaled, and the format sniffing decoder. */
#include "datasets/image.h"
#include "nn/base/base.h"
#include "tests/fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    image im = {0};
    if (image_decode_jpeg(data, size, "fuzz.jpg", 3, &im) == ER_OK) image_free(&im);
    image small = {0};
    if (image_decode_jpeg_scaled(data, size, "fuzz.jpg", 3, 8, &small) == ER_OK) image_free(&small);
    image im2 = {0};
    if (image_decode(data, size, "fuzz.img", 3, &im2) == ER_OK) image_free(&im2);
    return 0;
}
