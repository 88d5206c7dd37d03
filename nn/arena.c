/* arena.c — bump allocator with chunk chaining and coalescing on reset (see arena.h). */
#include "nn/arena.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "nn/base/base.h"

/* Under AddressSanitizer (make asan) the arena's host memory that is not handed out — a fresh
 * chunk, what a reset or an arena_release gives back — is poisoned, so a kernel or op reading a
 * buffer after its scratch was released is reported where it happens instead of reading whatever
 * the next allocation wrote (a linear layer's gradient once did exactly that). Device memory is
 * not the sanitizer's. */
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define ARENA_POISON(r, p, n) do { if ((r)->host_visible && (n)) ASAN_POISON_MEMORY_REGION((p), (n)); } while (0)
#define ARENA_UNPOISON(r, p, n) do { if ((r)->host_visible && (n)) ASAN_UNPOISON_MEMORY_REGION((p), (n)); } while (0)
#else
#define ARENA_POISON(r, p, n) ((void)(r), (void)(p), (void)(n))
#define ARENA_UNPOISON(r, p, n) ((void)(r), (void)(p), (void)(n))
#endif

typedef struct chunk {
    char *mem;
    size_t size, used;
    struct chunk *next; /* older chunks */
} chunk;

typedef struct region {
    chunk *head;        /* current chunk */
    size_t total_used;  /* bytes handed out since reset, all chunks (less what was released) */
    size_t peak;        /* the most total_used has been since reset */
    size_t align;
    int on_device;
    int host_visible;   /* host memory (the CPU's device region, every host region): the sanitizer's */
} region;

struct arena {
    int device;
    const er_backend *be;
    region dev, host;
    long sys_allocs;
};

static void *region_sys_alloc(arena *a, region *r, size_t n) {
    a->sys_allocs++;
    if (r->on_device) return a->be->alloc(n);
    return xmalloc_aligned(n);
}

static void region_sys_free(arena *a, region *r, void *p, size_t size) {
    ARENA_UNPOISON(r, p, size);
    if (r->on_device) a->be->free(p);
    else free(p);
}

static chunk *chunk_new(arena *a, region *r, size_t size) {
    chunk *c = xcalloc(1, sizeof *c);
    c->mem = region_sys_alloc(a, r, size);
    c->size = size;
    ARENA_POISON(r, c->mem, size);
    return c;
}

static void *region_alloc(arena *a, region *r, size_t bytes) {
    size_t n = (bytes + r->align - 1) / r->align * r->align;
    if (n == 0) n = r->align;
    chunk *c = r->head;
    if (!c || c->used + n > c->size) {
        size_t size = c ? c->size * 2 : 1 << 20;
        while (size < n) size *= 2;
        chunk *nc = chunk_new(a, r, size);
        nc->next = c;
        r->head = c = nc;
    }
    void *p = c->mem + c->used;
    ARENA_UNPOISON(r, p, n);
    c->used += n;
    r->total_used += n;
    if (r->total_used > r->peak) r->peak = r->total_used;
    return p;
}

static void region_reset(arena *a, region *r) {
    chunk *c = r->head;
    if (c && c->next) { /* several chunks were needed: replace by one big enough for the step's peak */
        size_t total = r->peak + r->peak / 8;
        total = (total + (1u << 20) - 1) / (1u << 20) * (1u << 20);
        while (c) {
            chunk *nx = c->next;
            region_sys_free(a, r, c->mem, c->size);
            free(c);
            c = nx;
        }
        /* a caching device allocator would keep the old chunks (twice the step's peak, in sizes no
         * later request fits) beside the merged one for the rest of the run: hand them back first */
        if (r->on_device) a->be->trim();
        r->head = chunk_new(a, r, total);
    } else if (c) {
        ARENA_POISON(r, c->mem, c->used);
        c->used = 0;
    }
    r->total_used = 0;
    r->peak = 0;
}

static void region_free(arena *a, region *r) {
    for (chunk *c = r->head; c;) {
        chunk *nx = c->next;
        region_sys_free(a, r, c->mem, c->size);
        free(c);
        c = nx;
    }
    r->head = NULL;
}

arena *arena_new(int device, size_t initial_bytes) {
    const er_backend *be = backend_get(device);
    if (!be) return NULL;
    arena *a = xcalloc(1, sizeof *a);
    a->device = device;
    a->be = be;
    a->dev.align = 64;
    a->dev.on_device = 1;
    a->dev.host_visible = device == DEV_CPU;
    a->host.align = 16;
    a->host.host_visible = 1;
    if (initial_bytes) a->dev.head = chunk_new(a, &a->dev, initial_bytes);
    return a;
}

void arena_free(arena *a) {
    if (!a) return;
    region_free(a, &a->dev);
    region_free(a, &a->host);
    free(a);
}

void *arena_alloc(arena *a, size_t bytes) { return region_alloc(a, &a->dev, bytes); }

void *arena_calloc(arena *a, size_t bytes) {
    void *p = region_alloc(a, &a->dev, bytes);
    if (a->device == DEV_CPU) memset(p, 0, bytes);
    else a->be->fill(p, (int64_t)(bytes / sizeof(float)), 0.0f);
    return p;
}

void *arena_alloc_host(arena *a, size_t bytes) {
    void *p = region_alloc(a, &a->host, bytes);
    memset(p, 0, bytes);
    return p;
}

void arena_reset(arena *a) {
    region_reset(a, &a->dev);
    region_reset(a, &a->host);
}

arena_mark arena_get_mark(const arena *a) {
    arena_mark m = {a->dev.head, a->dev.head ? a->dev.head->used : 0, a->dev.total_used};
    return m;
}

void arena_release(arena *a, arena_mark m) {
    region *r = &a->dev;
    for (chunk *c = r->head; c && c != m.chunk; c = c->next) { /* chunks chained after the mark */
        ARENA_POISON(r, c->mem, c->used);
        c->used = 0;
    }
    if (m.chunk) {
        chunk *c = m.chunk;
        ARENA_POISON(r, c->mem + m.used, c->used - m.used);
        c->used = m.used;
    }
    r->total_used = m.total;
}

int arena_device(const arena *a) { return a->device; }
size_t arena_used(const arena *a) { return a->dev.total_used; }
long arena_sys_allocs(const arena *a) { return a->sys_allocs; }

size_t arena_capacity(const arena *a) {
    size_t s = 0;
    for (chunk *c = a->dev.head; c; c = c->next) s += c->size;
    for (chunk *c = a->host.head; c; c = c->next) s += c->size;
    return s;
}

static arena *defaults[DEV_COUNT];

arena *arena_default(int device) {
    if (device < 0 || device >= DEV_COUNT) return NULL;
    if (!defaults[device]) defaults[device] = arena_new(device, 0);
    return defaults[device];
}

void arena_default_reset_all(void) {
    for (int d = 0; d < DEV_COUNT; d++)
        if (defaults[d]) arena_reset(defaults[d]);
}

void arena_default_free_all(void) {
    for (int d = 0; d < DEV_COUNT; d++) {
        arena_free(defaults[d]);
        defaults[d] = NULL;
    }
}
