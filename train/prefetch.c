/* prefetch.c — see prefetch.h. A mutex, two condition variables and a job slot. */
#include "train/prefetch.h"

#include <pthread.h>
#include <stdlib.h>

#include "nn/base/base.h"

struct prefetch {
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv_job, cv_done;
    void (*fn)(void *);
    void *arg;
    int busy, stop;
};

static void *worker(void *self) {
    prefetch *p = self;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->busy && !p->stop) pthread_cond_wait(&p->cv_job, &p->mu);
        if (!p->busy && p->stop) break;
        void (*fn)(void *) = p->fn;
        void *arg = p->arg;
        pthread_mutex_unlock(&p->mu);
        fn(arg);
        pthread_mutex_lock(&p->mu);
        p->busy = 0;
        pthread_cond_broadcast(&p->cv_done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

prefetch *prefetch_new(void) {
    prefetch *p = xcalloc(1, sizeof *p);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv_job, NULL);
    pthread_cond_init(&p->cv_done, NULL);
    if (pthread_create(&p->th, NULL, worker, p)) {
        pthread_mutex_destroy(&p->mu);
        pthread_cond_destroy(&p->cv_job);
        pthread_cond_destroy(&p->cv_done);
        free(p);
        er_fail(ER_RUNTIME, "prefetch: cannot start the worker thread");
        return NULL;
    }
    return p;
}

void prefetch_run(prefetch *p, void (*fn)(void *), void *arg) {
    pthread_mutex_lock(&p->mu);
    while (p->busy) pthread_cond_wait(&p->cv_done, &p->mu); /* the contract says waited; be safe */
    p->fn = fn;
    p->arg = arg;
    p->busy = 1;
    pthread_cond_signal(&p->cv_job);
    pthread_mutex_unlock(&p->mu);
}

void prefetch_wait(prefetch *p) {
    pthread_mutex_lock(&p->mu);
    while (p->busy) pthread_cond_wait(&p->cv_done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

void prefetch_free(prefetch *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    while (p->busy) pthread_cond_wait(&p->cv_done, &p->mu);
    p->stop = 1;
    pthread_cond_signal(&p->cv_job);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->th, NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv_job);
    pthread_cond_destroy(&p->cv_done);
    free(p);
}
