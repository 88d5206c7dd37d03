/* http_guard.h — the request deadlines and the eviction rule every page server's connections keep
 * (issue #30 F4: 32 connections sending a byte every 3 s locked everyone out; the idle timeout never
 * fired because they were never idle, and the per-IP limit counted 127.0.0.2..5 apart).
 *   - the headers of a request must arrive within HTTP_HEADER_DEADLINE_S of its start (accept, or
 *     the end of the previous request on a kept-alive connection);
 *   - a body must keep at least HTTP_MIN_RATE bytes/s on average after HTTP_BODY_GRACE_S, and the
 *     whole request must arrive within HTTP_REQUEST_DEADLINE_S;
 *   - when more than HTTP_EVICT_AT connections are open, each new one closes the oldest connection
 *     still sending its request, so slow senders from any number of addresses cannot hold every
 *     place (the daemon's hard limit, HTTP_MAX_CONNECTIONS, is never reached by them).
 * A request once received (answered, or parked for the embedding worker) is not limited here;
 * sending its reply is bounded by the daemon's idle timeout. A watchdog thread checks every 250 ms
 * and closes a late connection with shutdown(); the daemon then sees it close. */
#ifndef ENDORET_HTTP_GUARD_H
#define ENDORET_HTTP_GUARD_H

#include <microhttpd.h>

enum { HTTP_HEADER_DEADLINE_S = 10, HTTP_BODY_GRACE_S = 10, HTTP_REQUEST_DEADLINE_S = 300, HTTP_MIN_RATE = 16 << 10,
       HTTP_EVICT_AT = 96 };

typedef struct http_guard http_guard;

/* A guard around the application's handler and completion callback (done may be NULL), with its
 * watchdog running; NULL when the thread cannot start. */
http_guard *http_guard_new(MHD_AccessHandlerCallback app, void *app_cls, MHD_RequestCompletedCallback done, void *done_cls);
/* What the daemon is given: MHD_OPTION_NOTIFY_CONNECTION http_guard_notify, the access handler
 * http_guard_access and MHD_OPTION_NOTIFY_COMPLETED http_guard_completed, each with the guard. */
void http_guard_notify(void *cls, struct MHD_Connection *c, void **socket_context, enum MHD_ConnectionNotificationCode code);
enum MHD_Result http_guard_access(void *cls, struct MHD_Connection *c, const char *url, const char *method, const char *version,
                                  const char *upload_data, size_t *upload_size, void **con_cls);
void http_guard_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode code);
/* After the daemon has stopped: joins the watchdog, frees the guard. */
void http_guard_free(http_guard *g);

#endif
