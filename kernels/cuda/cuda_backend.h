/* cuda_backend.h — the C-callable pieces of the CUDA backend behind its table (backend_cuda() in
 * kernels/backend.h): code outside kernels/ reaches them only through the table's device
 * services. Internal to kernels/cuda; exists only in ENDORET_CUDA builds. */
#ifndef ENDORET_CUDA_BACKEND_H
#define ENDORET_CUDA_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* "compiled (CUDA 13.0, cuDNN 9.x, cuBLAS x.y; device: <name> | no device)" for --version. */
const char *cuda_backend_describe(void);
/* Number of usable CUDA devices (0 when the driver or device is missing; never fails). */
int cuda_device_count(void);

/* First CUDA failure since the last clear ("file:line: call: message"), or NULL. Table functions
 * return void, so callers check this once per step (it also syncs the stream to catch faults). */
const char *cuda_backend_error(void);
void cuda_backend_clear_error(void);
/* Wait for all queued work; returns 0, or 1 after recording an error. */
int cuda_synchronize(void);

/* Caching allocator: give cached blocks back (the table's trim; its counters are the table's
 * memory_stats). */
void cuda_empty_cache(void);

/* Pinned (page-locked) host buffers for the loader, and an asynchronous upload from them on the
 * backend's stream (ordered before the next kernel; the host buffer must stay untouched until
 * cuda_synchronize or a later download). */
void *cuda_host_alloc(size_t bytes);
void cuda_host_free(void *p);
void cuda_upload_async(void *dst_dev, const void *src_pinned, size_t bytes);

/* The table's data-parallel services (collectives.cu): NCCL when built with it, else left NULL. */
struct er_backend;
void cuda_collectives_fill(struct er_backend *t);

#ifdef __cplusplus
}
#endif

#endif
