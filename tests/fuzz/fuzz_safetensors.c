/* Fuzz target: a safetensors file (JSON header + tensor data): open, then read every tensor in each
 * type it can be read as. */
#include "checkpoints/safetensors.h"
#include "nn/base/base.h"
#include "tests/fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    st_file f;
    if (st_open(fuzz_file("in.safetensors", data, size), &f)) return 0;
    for (int i = 0; i < f.n; i++) {
        const st_tensor *t = &f.tensors[i];
        if (t->numel > (1 << 20)) continue; /* the file is small; a huge count is refused before any read */
        void *buf = xmalloc((size_t)(t->numel ? t->numel : 1) * 8);
        st_read_f32(&f, t->name, buf, t->numel);
        st_read_i64(&f, t->name, buf, t->numel);
        free(buf);
    }
    st_meta(&f, "endoret.config");
    st_close(&f);
    return 0;
}
