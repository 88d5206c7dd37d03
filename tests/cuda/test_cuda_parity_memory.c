/* test_cuda_parity_memory.c — the device arena against the CUDA caching allocator. The arena's chunk
 * merge (nn/arena.c) hands the chained chunks back through the backend's trim instead of leaving them
 * in the allocator's cache for the rest of the run: after a step that chained chunks and the reset
 * that merges them, nothing is cached (the table's memory_stats). Skips without a GPU (run it under
 * python3 tests/cuda/emulate.py). */
#include "nn/arena.h"
#include "tests/cuda/parity_util.h"

Test(cuda, arena_merge_leaves_no_cached_chunks) {
    require_gpu();
    if (SELFTEST) cr_skip_test("needs the CUDA caching allocator (self-test runs the CPU table, which caches nothing)");
    arena *a = arena_new(GPU_DEV, 1 << 20);
    for (int i = 0; i < 6; i++) arena_alloc(a, 3u << 20); /* chains 1 -> 4 -> 8 -> 16 MiB chunks */
    arena_reset(a);                                       /* merged into one of the peak's size */
    gpu_ok("arena merge");
    size_t peak, cached;
    GPU->memory_stats(&peak, &cached);
    cr_assert_eq(cached, 0, "%zu bytes left in the cache after the merge", cached);
    cr_assert_geq(peak, (size_t)18 << 20, "the chained chunks were handed out (%zu bytes at most)", peak);
    arena_alloc(a, 18u << 20); /* the merged chunk serves the same step again without growing */
    cr_assert_geq(arena_capacity(a), (size_t)18 << 20);
    arena_free(a);
}
