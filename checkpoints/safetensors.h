/* safetensors.h — reader and writer of the safetensors format (huggingface/safetensors):
 *   8 bytes little-endian u64 N | N bytes JSON header | raw little-endian tensor data
 * The header maps tensor names to {"dtype", "shape", "data_offsets": [begin, end]} (offsets relative
 * to the start of the data section) and may hold "__metadata__": {string: string}.
 * This is endoret's one weights / embeddings / training-state format, so PyTorch users can load
 * our files (safetensors.torch.load_file) and we can load theirs (timm, DINOv2, MAE...).
 *
 * The reader validates everything before use: header length within the file, JSON well-formed,
 * known dtype, shape product * dtype size == byte range, ranges inside the data section and not
 * overlapping. A bad file gives ER_INPUT with one message naming the file and the fault. */
#ifndef ENDORET_SAFETENSORS_H
#define ENDORET_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

typedef enum { ST_F32, ST_F16, ST_BF16, ST_F64, ST_I64, ST_I32, ST_U8, ST_I8, ST_BOOL } st_dtype;
#define ST_MAX_DIMS 8

typedef struct {
    char *name;
    st_dtype dtype;
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    int64_t numel;
    size_t offset, nbytes; /* within the data section */
} st_tensor;

typedef struct {
    char *path;
    uint8_t *map;  /* the whole file (mmap'd read-only) */
    size_t size;
    const uint8_t *data; /* start of the data section */
    int n;
    st_tensor *tensors;
    int nmeta;
    char **meta_keys, **meta_vals;
} st_file;

const char *st_dtype_name(st_dtype t);
size_t st_dtype_size(st_dtype t);

int st_open(const char *path, st_file *f);
void st_close(st_file *f);
const st_tensor *st_find(const st_file *f, const char *name);
const char *st_meta(const st_file *f, const char *key); /* NULL if absent */
/* Copy tensor `name` into dst as float32 (F32/F16/BF16/F64 converted). `count` must equal its
 * number of elements; a missing tensor, a non-float dtype or a size mismatch is ER_INPUT naming it. */
int st_read_f32(const st_file *f, const char *name, float *dst, int64_t count);
/* Same for integers (I64/I32/U8/I8/BOOL converted to int64). */
int st_read_i64(const st_file *f, const char *name, int64_t *dst, int64_t count);

/* Writer: collects tensors (pointers kept, not copied: data must stay valid until st_write) and
 * metadata, then writes the file atomically (temp file, fsync, rename). Tensors are written in
 * name order, as the Python library does. */
typedef struct st_writer st_writer;
st_writer *st_writer_new(void);
void st_add(st_writer *w, const char *name, st_dtype dtype, int ndim, const int64_t *shape, const void *data);
void st_add_meta(st_writer *w, const char *key, const char *value);
int st_write(st_writer *w, const char *path);
void st_writer_free(st_writer *w);

/* fp16 / bf16 conversions (round-to-nearest-even when narrowing). */
float st_f16_to_f32(uint16_t h);
float st_bf16_to_f32(uint16_t b);
uint16_t st_f32_to_bf16(float f);
uint16_t st_f32_to_f16(float f);

#endif
