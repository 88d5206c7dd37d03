/* work_queue.c — see work_queue.h. A ring of cap pointers under one mutex. */
#include "infer/report/work_queue.h"

#include <pthread.h>
#include <stdlib.h>

#include "nn/base/base.h"

struct work_queue {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t th;
    void **ring;
    int cap, head, count; /* count: jobs queued */
    int reserved;         /* places promised to work_queue_push */
    int stopping;
    work_fn run;
    void *ctx;
};

static void *worker(void *arg) {
    work_queue *q = arg;
    pthread_mutex_lock(&q->mu);
    for (;;) {
        while (!q->count && !(q->stopping && !q->reserved)) pthread_cond_wait(&q->cv, &q->mu);
        if (!q->count) break; /* stopping, and nothing queued or promised */
        void *job = q->ring[q->head];
        q->head = (q->head + 1) % q->cap;
        q->count--;
        int stopping = q->stopping;
        pthread_mutex_unlock(&q->mu);
        q->run(job, q->ctx, stopping);
        pthread_mutex_lock(&q->mu);
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

work_queue *work_queue_start(int cap, work_fn run, void *ctx) {
    work_queue *q = xcalloc(1, sizeof *q);
    q->cap = cap < 1 ? 1 : cap;
    q->ring = xcalloc((size_t)q->cap, sizeof(void *));
    q->run = run;
    q->ctx = ctx;
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->cv, NULL);
    if (pthread_create(&q->th, NULL, worker, q)) {
        pthread_cond_destroy(&q->cv);
        pthread_mutex_destroy(&q->mu);
        free(q->ring);
        free(q);
        return NULL;
    }
    return q;
}

int work_queue_reserve(work_queue *q) {
    pthread_mutex_lock(&q->mu);
    int ok = !q->stopping && q->count + q->reserved < q->cap;
    if (ok) q->reserved++;
    pthread_mutex_unlock(&q->mu);
    return ok;
}

void work_queue_push(work_queue *q, void *job) {
    pthread_mutex_lock(&q->mu);
    q->ring[(q->head + q->count) % q->cap] = job;
    q->count++;
    q->reserved--;
    pthread_cond_signal(&q->cv);
    pthread_mutex_unlock(&q->mu);
}

void work_queue_stop(work_queue *q) {
    if (!q) return;
    pthread_mutex_lock(&q->mu);
    q->stopping = 1;
    pthread_cond_signal(&q->cv);
    pthread_mutex_unlock(&q->mu);
    pthread_join(q->th, NULL);
    pthread_cond_destroy(&q->cv);
    pthread_mutex_destroy(&q->mu);
    free(q->ring);
    free(q);
}
