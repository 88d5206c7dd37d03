/* prefetch.h — one background job at a time on a persistent worker thread: a trainer prepares the
 * next micro-batch on the host (decode, augmentation) while the device runs the current one.
 * The worker lives as long as the handle, so an OpenMP team it opens is made once and reused.
 * Results must not depend on timing: a job computes a pure function of its inputs into buffers
 * nobody else touches until prefetch_wait returns. */
#ifndef ENDORET_PREFETCH_H
#define ENDORET_PREFETCH_H

typedef struct prefetch prefetch;

/* NULL (error recorded) if the thread cannot start. */
prefetch *prefetch_new(void);
/* Runs fn(arg) on the worker. The previous job must have been waited for. */
void prefetch_run(prefetch *p, void (*fn)(void *), void *arg);
/* Blocks until the running job (if any) has finished. */
void prefetch_wait(prefetch *p);
/* Waits, stops and joins the worker; NULL is a no-op. */
void prefetch_free(prefetch *p);

#endif
