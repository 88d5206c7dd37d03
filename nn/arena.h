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
 * reset, a region that needed several chunks is replaced by one chunk of their total size, so
 * after the first step or two the steady state does no system allocation at all.
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
