/* http_guard.c — see http_guard.h. The open connections are a list under one mutex; the daemon
 * reports a connection closed (NOTIFY_CLOSED) before it closes the socket, and the entry leaves the
 * list under the same mutex, so the watchdog never shuts a descriptor that was closed and reused. */
#include "infer/report/http_guard.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "nn/base/base.h"

enum { RECEIVING_HEADERS, RECEIVING_BODY, RECEIVED };

typedef struct conn {
    struct conn *prev, *next;
    int fd;
    int phase;
    int shut;          /* shutdown() already called */
    double t0, t_head; /* the request's start; its headers complete */
    uint64_t body;     /* body bytes received */
} conn;

struct http_guard {
    MHD_AccessHandlerCallback app;
    void *app_cls;
    MHD_RequestCompletedCallback done;
    void *done_cls;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t th;
    int stop, live;
    conn *head;
};

static void shut(conn *e) {
    if (e->shut) return;
    e->shut = 1;
    shutdown(e->fd, SHUT_RDWR);
}

static int late(const conn *e, double now) {
    if (e->phase == RECEIVING_HEADERS) return now - e->t0 > HTTP_HEADER_DEADLINE_S;
    if (e->phase != RECEIVING_BODY) return 0;
    double el = now - e->t_head;
    return now - e->t0 > HTTP_REQUEST_DEADLINE_S || (el > HTTP_BODY_GRACE_S && (double)e->body < (el - HTTP_BODY_GRACE_S) * HTTP_MIN_RATE);
}

static void *watchdog(void *arg) {
    http_guard *g = arg;
    pthread_mutex_lock(&g->mu);
    while (!g->stop) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 250000000L;
        if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&g->cv, &g->mu, &ts);
        double now = now_seconds();
        for (conn *e = g->head; e; e = e->next)
            if (!e->shut && late(e, now)) shut(e);
    }
    pthread_mutex_unlock(&g->mu);
    return NULL;
}

http_guard *http_guard_new(MHD_AccessHandlerCallback app, void *app_cls, MHD_RequestCompletedCallback done, void *done_cls) {
    http_guard *g = xcalloc(1, sizeof *g);
    g->app = app, g->app_cls = app_cls, g->done = done, g->done_cls = done_cls;
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    if (pthread_create(&g->th, NULL, watchdog, g)) {
        pthread_cond_destroy(&g->cv);
        pthread_mutex_destroy(&g->mu);
        free(g);
        return NULL;
    }
    return g;
}

void http_guard_notify(void *cls, struct MHD_Connection *c, void **socket_context, enum MHD_ConnectionNotificationCode code) {
    http_guard *g = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *fi = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        conn *e = xcalloc(1, sizeof *e);
        e->fd = fi ? fi->connect_fd : -1;
        e->t0 = now_seconds();
        e->shut = e->fd < 0;
        pthread_mutex_lock(&g->mu);
        e->next = g->head;
        if (g->head) g->head->prev = e;
        g->head = e;
        if (++g->live > HTTP_EVICT_AT) { /* make room: the oldest connection still sending a request */
            conn *old = NULL;
            for (conn *o = e->next; o; o = o->next)
                if (!o->shut && o->phase != RECEIVED && (!old || o->t0 < old->t0)) old = o;
            if (old) shut(old);
        }
        pthread_mutex_unlock(&g->mu);
        *socket_context = e;
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED && *socket_context) {
        conn *e = *socket_context;
        pthread_mutex_lock(&g->mu);
        if (e->prev) e->prev->next = e->next; else g->head = e->next;
        if (e->next) e->next->prev = e->prev;
        g->live--;
        pthread_mutex_unlock(&g->mu);
        free(e);
        *socket_context = NULL;
    }
}

static conn *conn_of(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *i = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return i ? i->socket_context : NULL;
}

enum MHD_Result http_guard_access(void *cls, struct MHD_Connection *c, const char *url, const char *method, const char *version,
                                  const char *upload_data, size_t *upload_size, void **con_cls) {
    http_guard *g = cls;
    conn *e = conn_of(c);
    if (e) {
        pthread_mutex_lock(&g->mu);
        if (e->phase == RECEIVING_HEADERS) { /* the first call of a request: its headers are in */
            const char *len = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
            const char *te = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
            e->t_head = now_seconds();
            e->phase = te || (len && strspn(len, "0") != strlen(len)) ? RECEIVING_BODY : RECEIVED;
        } else if (e->phase == RECEIVING_BODY) {
            if (*upload_size) e->body += *upload_size;
            else e->phase = RECEIVED; /* a later call with no data: the body is complete */
        }
        pthread_mutex_unlock(&g->mu);
    }
    return g->app(g->app_cls, c, url, method, version, upload_data, upload_size, con_cls);
}

void http_guard_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode code) {
    http_guard *g = cls;
    conn *e = conn_of(c);
    if (e) { /* a kept-alive connection's next request starts now */
        pthread_mutex_lock(&g->mu);
        e->phase = RECEIVING_HEADERS;
        e->t0 = now_seconds();
        e->t_head = 0;
        e->body = 0;
        pthread_mutex_unlock(&g->mu);
    }
    if (g->done) g->done(g->done_cls, c, con_cls, code);
}

void http_guard_free(http_guard *g) {
    if (!g) return;
    pthread_mutex_lock(&g->mu);
    g->stop = 1;
    pthread_cond_signal(&g->cv);
    pthread_mutex_unlock(&g->mu);
    pthread_join(g->th, NULL);
    for (conn *e = g->head, *n; e; e = n) { n = e->next; free(e); }
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
    free(g);
}
