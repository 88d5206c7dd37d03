/* safetensors.c — see safetensors.h. The file is mmap'd read-only; every offset is validated
 * against the file size before any tensor byte is touched. */
#include "checkpoints/safetensors.h"
#include "nn/base/base.h"
#include "nn/base/json.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static const struct { const char *name; size_t size; } dtypes[] = {
    [ST_F32] = {"F32", 4}, [ST_F16] = {"F16", 2}, [ST_BF16] = {"BF16", 2}, [ST_F64] = {"F64", 8},
    [ST_I64] = {"I64", 8}, [ST_I32] = {"I32", 4}, [ST_U8] = {"U8", 1},   [ST_I8] = {"I8", 1},
    [ST_BOOL] = {"BOOL", 1},
};
enum { NDTYPES = sizeof dtypes / sizeof dtypes[0] };
#define MAX_HEADER (100u << 20) /* the reference implementation's limit */

const char *st_dtype_name(st_dtype t) { return (unsigned)t < NDTYPES ? dtypes[t].name : "?"; }
size_t st_dtype_size(st_dtype t) { return (unsigned)t < NDTYPES ? dtypes[t].size : 0; }

float st_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1F, man = h & 0x3FF, bits;
    if (exp == 0) {
        if (man == 0) bits = sign;
        else { /* subnormal: value = man * 2^-24 */
            float f = (float)man * 5.9604644775390625e-08f;
            return sign ? -f : f;
        }
    } else if (exp == 31) bits = sign | 0x7F800000u | (man << 13);
    else bits = sign | ((exp + 112) << 23) | (man << 13);
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

float st_bf16_to_f32(uint16_t b) {
    uint32_t bits = (uint32_t)b << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t st_f32_to_bf16(float f) {
    uint32_t bits;
    memcpy(&bits, &f, 4);
    if ((bits & 0x7F800000u) == 0x7F800000u && (bits & 0x7FFFFF)) return (uint16_t)((bits >> 16) | 0x40); /* quiet NaN */
    bits += 0x7FFF + ((bits >> 16) & 1); /* round to nearest even */
    return (uint16_t)(bits >> 16);
}

uint16_t st_f32_to_f16(float f) {
    uint32_t bits;
    memcpy(&bits, &f, 4);
    uint32_t sign = (bits >> 16) & 0x8000;
    int32_t exp = (int32_t)((bits >> 23) & 0xFF) - 127 + 15;
    uint32_t man = bits & 0x7FFFFF;
    if (((bits >> 23) & 0xFF) == 0xFF) return (uint16_t)(sign | 0x7C00 | (man ? 0x200 : 0));
    if (exp >= 31) return (uint16_t)(sign | 0x7C00);
    if (exp <= 0) {
        if (exp < -10) return (uint16_t)sign;
        man |= 0x800000;
        uint32_t shift = (uint32_t)(14 - exp);
        uint32_t half = man >> shift, rem = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1))) half++;
        return (uint16_t)(sign | half);
    }
    uint32_t h = sign | ((uint32_t)exp << 10) | (man >> 13), rem = man & 0x1FFF;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++; /* may carry into the exponent: correct */
    return (uint16_t)h;
}

static int cmp_offset(const void *a, const void *b) {
    const st_tensor *x = a, *y = b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

void st_close(st_file *f) {
    if (f->map) munmap(f->map, f->size);
    for (int i = 0; i < f->n; i++) free(f->tensors[i].name);
    free(f->tensors);
    for (int i = 0; i < f->nmeta; i++) { free(f->meta_keys[i]); free(f->meta_vals[i]); }
    free(f->meta_keys);
    free(f->meta_vals);
    free(f->path);
    memset(f, 0, sizeof *f);
}

static int parse_tensor(st_file *f, const char *name, const json_value *v, size_t data_size, st_tensor *t) {
    const char *p = f->path;
    if (v->type != JSON_OBJECT) return er_fail(ER_INPUT, "%s: tensor '%s': entry is not an object", p, name);
    const json_value *dt = json_get(v, "dtype"), *sh = json_get(v, "shape"), *off = json_get(v, "data_offsets");
    if (!dt || dt->type != JSON_STRING) return er_fail(ER_INPUT, "%s: tensor '%s': missing dtype", p, name);
    int found = -1;
    for (int i = 0; i < NDTYPES; i++)
        if (!strcmp(dt->string, dtypes[i].name)) found = i;
    if (found < 0) return er_fail(ER_INPUT, "%s: tensor '%s': unsupported dtype '%s'", p, name, dt->string);
    if (!sh || sh->type != JSON_ARRAY || sh->n > ST_MAX_DIMS)
        return er_fail(ER_INPUT, "%s: tensor '%s': shape missing or over %d dims", p, name, ST_MAX_DIMS);
    t->dtype = (st_dtype)found;
    t->ndim = sh->n;
    int64_t numel = 1;
    for (int d = 0; d < sh->n; d++) {
        const json_value *x = &sh->items[d];
        if (x->type != JSON_NUMBER || !x->is_int || x->integer < 0)
            return er_fail(ER_INPUT, "%s: tensor '%s': shape[%d] is not a non-negative integer", p, name, d);
        t->shape[d] = x->integer;
        if (x->integer && numel > INT64_MAX / 16 / x->integer)
            return er_fail(ER_INPUT, "%s: tensor '%s': shape too large", p, name);
        numel *= x->integer;
    }
    t->numel = numel;
    if (!off || off->type != JSON_ARRAY || off->n != 2 || off->items[0].type != JSON_NUMBER ||
        off->items[1].type != JSON_NUMBER || !off->items[0].is_int || !off->items[1].is_int)
        return er_fail(ER_INPUT, "%s: tensor '%s': data_offsets must be [begin, end]", p, name);
    int64_t b = off->items[0].integer, e = off->items[1].integer;
    if (b < 0 || e < b || (uint64_t)e > data_size)
        return er_fail(ER_INPUT, "%s: tensor '%s': data_offsets [%lld, %lld] outside the %zu-byte data section (truncated file?)",
                       p, name, (long long)b, (long long)e, data_size);
    if ((uint64_t)(e - b) != (uint64_t)numel * dtypes[found].size)
        return er_fail(ER_INPUT, "%s: tensor '%s': %lld bytes for %lld elements of %s", p, name,
                       (long long)(e - b), (long long)numel, dtypes[found].name);
    t->offset = (size_t)b;
    t->nbytes = (size_t)(e - b);
    t->name = xstrdup(name);
    return ER_OK;
}

int st_open(const char *path, st_file *f) {
    memset(f, 0, sizeof *f);
    int fd, rc0 = open_regular(path, &fd); /* a FIFO would block the open */
    if (rc0) return rc0;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return er_fail(ER_INPUT, "%s: cannot stat: %s", path, strerror(e));
    }
    f->path = xstrdup(path);
    f->size = (size_t)st.st_size;
    if (f->size < 8) {
        close(fd);
        st_close(f);
        return er_fail(ER_INPUT, "%s: not a safetensors file (%zu bytes, shorter than its 8-byte header length)", path, (size_t)st.st_size);
    }
    void *map = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) {
        st_close(f);
        return er_fail(ER_RUNTIME, "%s: mmap failed: %s", path, strerror(errno));
    }
    f->map = map;
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | f->map[i];
    if (hlen > MAX_HEADER || hlen > f->size - 8) {
        int rc = er_fail(ER_INPUT, "%s: header length %llu exceeds the file size %zu (truncated or not safetensors)", path,
                         (unsigned long long)hlen, f->size);
        st_close(f);
        return rc;
    }
    json_value root;
    char what[512];
    snprintf(what, sizeof what, "%s: header", path);
    if (json_parse((const char *)f->map + 8, (size_t)hlen, what, &root)) { st_close(f); return ER_INPUT; }
    int rc = ER_OK;
    if (root.type != JSON_OBJECT) rc = er_fail(ER_INPUT, "%s: header is not a JSON object", path);
    f->data = f->map + 8 + hlen;
    size_t data_size = f->size - 8 - (size_t)hlen;
    f->tensors = xcalloc((size_t)root.n + 1, sizeof *f->tensors);
    for (int i = 0; rc == ER_OK && i < root.n; i++) {
        if (!strcmp(root.keys[i], "__metadata__")) {
            const json_value *m = &root.items[i];
            if (m->type != JSON_OBJECT) { rc = er_fail(ER_INPUT, "%s: __metadata__ is not an object", path); break; }
            f->meta_keys = xcalloc((size_t)m->n + 1, sizeof(char *));
            f->meta_vals = xcalloc((size_t)m->n + 1, sizeof(char *));
            for (int k = 0; k < m->n; k++) {
                if (m->items[k].type != JSON_STRING) { rc = er_fail(ER_INPUT, "%s: metadata '%s' is not a string", path, m->keys[k]); break; }
                f->meta_keys[f->nmeta] = xstrdup(m->keys[k]);
                f->meta_vals[f->nmeta++] = xstrdup(m->items[k].string);
            }
            continue;
        }
        rc = parse_tensor(f, root.keys[i], &root.items[i], data_size, &f->tensors[f->n]);
        if (rc == ER_OK) f->n++;
    }
    json_free(&root);
    if (rc == ER_OK && f->n > 1) { /* byte ranges must not overlap */
        st_tensor *sorted = xmalloc(sizeof *sorted * (size_t)f->n);
        memcpy(sorted, f->tensors, sizeof *sorted * (size_t)f->n);
        qsort(sorted, (size_t)f->n, sizeof *sorted, cmp_offset);
        for (int i = 1; i < f->n && rc == ER_OK; i++)
            if (sorted[i].offset < sorted[i - 1].offset + sorted[i - 1].nbytes)
                rc = er_fail(ER_INPUT, "%s: tensors '%s' and '%s' overlap", path, sorted[i - 1].name, sorted[i].name);
        free(sorted);
    }
    for (int i = 0; rc == ER_OK && i < f->n; i++)
        for (int j = 0; j < i; j++)
            if (!strcmp(f->tensors[i].name, f->tensors[j].name)) { rc = er_fail(ER_INPUT, "%s: duplicate tensor '%s'", path, f->tensors[i].name); break; }
    if (rc) st_close(f);
    return rc;
}

const st_tensor *st_find(const st_file *f, const char *name) {
    for (int i = 0; i < f->n; i++)
        if (!strcmp(f->tensors[i].name, name)) return &f->tensors[i];
    return NULL;
}

const char *st_meta(const st_file *f, const char *key) {
    for (int i = 0; i < f->nmeta; i++)
        if (!strcmp(f->meta_keys[i], key)) return f->meta_vals[i];
    return NULL;
}

static int lookup(const st_file *f, const char *name, int64_t count, const st_tensor **t) {
    *t = st_find(f, name);
    if (!*t) return er_fail(ER_INPUT, "%s: no tensor named '%s'", f->path, name);
    if ((*t)->numel != count)
        return er_fail(ER_INPUT, "%s: tensor '%s' has %lld elements, expected %lld", f->path, name,
                       (long long)(*t)->numel, (long long)count);
    return ER_OK;
}

int st_read_f32(const st_file *f, const char *name, float *dst, int64_t count) {
    const st_tensor *t;
    int rc = lookup(f, name, count, &t);
    if (rc) return rc;
    const uint8_t *src = f->data + t->offset;
    switch (t->dtype) {
    case ST_F32: memcpy(dst, src, t->nbytes); break;
    case ST_F64: for (int64_t i = 0; i < count; i++) { double d; memcpy(&d, src + 8 * i, 8); dst[i] = (float)d; } break;
    case ST_F16: for (int64_t i = 0; i < count; i++) { uint16_t h; memcpy(&h, src + 2 * i, 2); dst[i] = st_f16_to_f32(h); } break;
    case ST_BF16: for (int64_t i = 0; i < count; i++) { uint16_t h; memcpy(&h, src + 2 * i, 2); dst[i] = st_bf16_to_f32(h); } break;
    default: return er_fail(ER_INPUT, "%s: tensor '%s' is %s, expected a float type", f->path, name, st_dtype_name(t->dtype));
    }
    return ER_OK;
}

int st_read_i64(const st_file *f, const char *name, int64_t *dst, int64_t count) {
    const st_tensor *t;
    int rc = lookup(f, name, count, &t);
    if (rc) return rc;
    const uint8_t *src = f->data + t->offset;
    switch (t->dtype) {
    case ST_I64: memcpy(dst, src, t->nbytes); break;
    case ST_I32: for (int64_t i = 0; i < count; i++) { int32_t v; memcpy(&v, src + 4 * i, 4); dst[i] = v; } break;
    case ST_U8: case ST_BOOL: for (int64_t i = 0; i < count; i++) dst[i] = src[i]; break;
    case ST_I8: for (int64_t i = 0; i < count; i++) dst[i] = (int8_t)src[i]; break;
    default: return er_fail(ER_INPUT, "%s: tensor '%s' is %s, expected an integer type", f->path, name, st_dtype_name(t->dtype));
    }
    return ER_OK;
}

/* ---- writer ---- */

typedef struct {
    char *name;
    st_dtype dtype;
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    const void *data;
    size_t nbytes;
} st_entry;

struct st_writer {
    int n, cap, nmeta;
    st_entry *e;
    char **mk, **mv;
};

st_writer *st_writer_new(void) { return xcalloc(1, sizeof(st_writer)); }

void st_add(st_writer *w, const char *name, st_dtype dtype, int ndim, const int64_t *shape, const void *data) {
    if (w->n == w->cap) w->e = xrealloc(w->e, sizeof *w->e * (size_t)(w->cap = w->cap ? 2 * w->cap : 16));
    st_entry *e = &w->e[w->n++];
    e->name = xstrdup(name);
    e->dtype = dtype;
    e->ndim = ndim;
    size_t numel = 1;
    for (int d = 0; d < ndim; d++) { e->shape[d] = shape[d]; numel *= (size_t)shape[d]; }
    e->data = data;
    e->nbytes = numel * st_dtype_size(dtype);
}

void st_add_meta(st_writer *w, const char *key, const char *value) {
    for (int i = 0; i < w->nmeta; i++)
        if (!strcmp(w->mk[i], key)) { free(w->mv[i]); w->mv[i] = xstrdup(value); return; }
    w->mk = xrealloc(w->mk, sizeof(char *) * (size_t)(w->nmeta + 1));
    w->mv = xrealloc(w->mv, sizeof(char *) * (size_t)(w->nmeta + 1));
    w->mk[w->nmeta] = xstrdup(key);
    w->mv[w->nmeta++] = xstrdup(value);
}

static int cmp_entry(const void *a, const void *b) { return strcmp(((const st_entry *)a)->name, ((const st_entry *)b)->name); }

int st_write(st_writer *w, const char *path) {
    qsort(w->e, (size_t)w->n, sizeof *w->e, cmp_entry);
    for (int i = 1; i < w->n; i++)
        if (!strcmp(w->e[i].name, w->e[i - 1].name)) return er_fail(ER_INPUT, "%s: duplicate tensor name '%s'", path, w->e[i].name);
    size_t cap = 256, len = 0;
    char *h = xmalloc(cap);
#define ENSURE(extra) do { if (len + (extra) > cap) h = xrealloc(h, cap = 2 * (len + (extra))); } while (0)
    h[len++] = '{';
    if (w->nmeta) {
        len = json_escape(&h, &cap, len, "__metadata__");
        ENSURE(8);
        h[len++] = ':';
        h[len++] = '{';
        for (int i = 0; i < w->nmeta; i++) {
            ENSURE(8);
            if (i) h[len++] = ',';
            len = json_escape(&h, &cap, len, w->mk[i]);
            ENSURE(8);
            h[len++] = ':';
            len = json_escape(&h, &cap, len, w->mv[i]);
        }
        ENSURE(8);
        h[len++] = '}';
    }
    size_t off = 0;
    for (int i = 0; i < w->n; i++) {
        ENSURE(8);
        if (i || w->nmeta) h[len++] = ',';
        len = json_escape(&h, &cap, len, w->e[i].name);
        ENSURE(512);
        len += (size_t)sprintf(h + len, ":{\"dtype\":\"%s\",\"shape\":[", st_dtype_name(w->e[i].dtype));
        for (int d = 0; d < w->e[i].ndim; d++) len += (size_t)sprintf(h + len, "%s%lld", d ? "," : "", (long long)w->e[i].shape[d]);
        len += (size_t)sprintf(h + len, "],\"data_offsets\":[%zu,%zu]}", off, off + w->e[i].nbytes);
        off += w->e[i].nbytes;
    }
    ENSURE(16);
#undef ENSURE
    h[len++] = '}';
    while (len % 8) h[len++] = ' '; /* pad so the data section is 8-byte aligned */
    uint8_t lenbytes[8];
    for (int i = 0; i < 8; i++) lenbytes[i] = (uint8_t)((uint64_t)len >> (8 * i));
    atomic_file af;
    int rc = atomic_open(&af, path);
    if (rc) { free(h); return rc; }
    int ok = fwrite(lenbytes, 1, 8, af.f) == 8 && fwrite(h, 1, len, af.f) == len;
    for (int i = 0; ok && i < w->n; i++)
        ok = !w->e[i].nbytes || fwrite(w->e[i].data, 1, w->e[i].nbytes, af.f) == w->e[i].nbytes;
    free(h);
    if (!ok) {
        rc = er_fail(ER_RUNTIME, "%s: write failed: %s", path, strerror(errno));
        atomic_abort(&af);
        return rc;
    }
    return atomic_commit(&af);
}

void st_writer_free(st_writer *w) {
    if (!w) return;
    for (int i = 0; i < w->n; i++) free(w->e[i].name);
    for (int i = 0; i < w->nmeta; i++) { free(w->mk[i]); free(w->mv[i]); }
    free(w->e);
    free(w->mk);
    free(w->mv);
    free(w);
}
