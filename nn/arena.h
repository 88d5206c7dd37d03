/* arena.h — the per-step activation arena: bump allocation, O(1) free of everything at once.
 *
 * Memory model of endoret's tensors:
 *   - Long-lived: parameters, their gradients, optimizer state, caches. Created with tensor_new /
 *     tensor_param (nn/tensor.h), owned by whoever created them, freed with tensor_free.
 *   - Per-step: every tensor an op returns (activations), the tensor structs of views, autograd
 *     tape nodes, the gradients of activations and kernel scratch space. All come from an arena and
 *     die together at arena_reset(), called once per training step after the optimizer update
 *     (nn_step_end() in nn/autograd.h resets the tape and the default arenas).
 * An arena holds two bump regions: device memory (tensor data, from the device's backend) and
 * host memory (tensor structs, tape nodes). When a region overflows it chains a new chunk; at
 * reset, a region that needed several chunks is replaced by one chunk of the step's peak use (+1/8),
 * so after the first step or two the steady state does no system allocation at all.
 * Not thread-safe: one thread builds the graph (kernels use OpenMP internally). */
#ifndef ENDORET_ARENA_H
#define ENDORET_ARENA_H

#include <stddef.h>

typedef struct arena arena;

arena *arena_new(int device, size_t initial_bytes);
void arena_free(arena *a);
/* 64-byte aligned device memory, valid until the next arena_reset. Never NULL (aborts on OOM). */
void *arena_alloc(arena *a, size_t bytes);
/* Same, zero-filled. */
void *arena_calloc(arena *a, size_t bytes);
/* Host memory (structs, index copies), 16-byte aligned, zero-filled. */
void *arena_alloc_host(arena *a, size_t bytes);
/* Frees everything allocated since the last reset, in O(chunks). */
void arena_reset(arena *a);

/* Kernel scratch (a *_workspace) is needed only during one kernel call: an op takes a mark before
 * allocating it and releases back to the mark after the call, so a step's scratch does not pile up
 * (LIFO: nothing allocated after the mark may be used after the release). On a GPU the release is
 * safe as soon as the kernel is queued: every kernel runs in order on the backend's stream. */
typedef struct {
    void *chunk;
    size_t used, total;
} arena_mark;
arena_mark arena_get_mark(const arena *a);
void arena_release(arena *a, arena_mark m);

int arena_device(const arena *a);
size_t arena_used(const arena *a);      /* device bytes handed out since the last reset */
size_t arena_capacity(const arena *a);  /* device + host bytes currently reserved */
long arena_sys_allocs(const arena *a);  /* system allocations made over the arena's life */

/* The default arena of a device (created on first use, freed by arena_default_free_all). Ops
 * allocate their outputs here. */
arena *arena_default(int device);
void arena_default_reset_all(void);
void arena_default_free_all(void);

#endif
