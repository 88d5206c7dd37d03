/* work_queue.h — one worker thread and a bounded queue of jobs (serve's embedding worker: the model
 * runs one case at a time, so its arena and scratch need no lock, and memory stays bounded under
 * load). A caller reserves a place first, so a full queue is known before the request is parked
 * (503 + Retry-After), and a reserved place is never refused. */
#ifndef ENDORET_WORK_QUEUE_H
#define ENDORET_WORK_QUEUE_H

/* run(job, ctx, stopping): stopping = 1 for jobs still queued when the queue stops (answer them
 * without the work). */
typedef void (*work_fn)(void *job, void *ctx, int stopping);
typedef struct work_queue work_queue;

/* cap >= 1 jobs waiting, besides the one running. NULL when the thread cannot start. */
work_queue *work_queue_start(int cap, work_fn run, void *ctx);
/* 1: a place is reserved for one work_queue_push; 0: the queue is full or stopping. */
int work_queue_reserve(work_queue *q);
/* Queues a job into a reserved place. */
void work_queue_push(work_queue *q, void *job);
/* No more reservations; the job running finishes, the queued ones run with stopping = 1; the
 * thread is joined and q freed. */
void work_queue_stop(work_queue *q);

#endif
