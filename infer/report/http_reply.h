/* http_reply.h — the one way endoret's local web pages (vss serve, endoret serve) run libmicrohttpd
 * and answer a request: the same daemon limits, the same request checks, body copied, no caching,
 * no MIME sniffing, and image files served only after they are resolved and decoded. */
#ifndef ENDORET_HTTP_REPLY_H
#define ENDORET_HTTP_REPLY_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <microhttpd.h>

#include "infer/report/http_guard.h"

/* Limits of every page server: idle or half-open connections are closed after the timeout, and no
 * client (one IP) can hold all the connections. poll() rather than select(), so no FD_SETSIZE cap. */
enum { HTTP_MAX_CONNECTIONS = 128, HTTP_MAX_PER_IP = 32, HTTP_IDLE_TIMEOUT_S = 10 };
/* Threads of a server whose handlers may run at once (endoret serve: pages and images while the
 * embedding worker runs a case); each polls its share of the connections. */
enum { HTTP_POOL_THREADS = 4 };
/* Images served are at most this big (endoscopy frames are a few MB). */
#define HTTP_MAX_IMAGE_BYTES ((size_t)64 << 20)

/* A running daemon: libmicrohttpd with the limits above and the request deadlines and eviction of
 * http_guard.h. */
typedef struct http_daemon http_daemon;
/* Starts a daemon on addr with the limits above; a URL holding an escaped NUL (%00) is left
 * escaped, so it never matches a route. completed may be NULL. threads: 1 = one polling thread
 * (handlers never run at once), more = a pool of that many. Connections may be suspended
 * (MHD_suspend_connection) while other work answers them. NULL when it cannot listen. */
http_daemon *http_daemon_start(const struct sockaddr_in *addr, MHD_AccessHandlerCallback handler, void *cls,
                               MHD_RequestCompletedCallback completed, void *completed_cls, unsigned threads);
int http_daemon_port(const http_daemon *d);
/* Closes every connection (none may be suspended) and frees d. */
void http_daemon_stop(http_daemon *d);
/* --bind / --port of a page server as a socket address: ER_INPUT naming the bad value (bind NULL:
 * 127.0.0.1). Called before any other work. */
int http_addr_parse(const char *bind, int port, struct sockaddr_in *addr);
/* http_daemon_start, then the port actually bound (port 0 = any free one) into *port_out; ER_RUNTIME
 * "<what>: cannot listen on ..." when it cannot listen. */
int http_daemon_listen(const char *what, const struct sockaddr_in *addr, MHD_AccessHandlerCallback handler,
                       void *cls, MHD_RequestCompletedCallback completed, void *completed_cls, unsigned threads,
                       http_daemon **d, int *port_out);
/* Why a request must be refused with 400 before routing (a GET or HEAD announcing a body, a NUL in
 * the URL), or NULL when it may go on. */
const char *http_request_refusal(struct MHD_Connection *c, const char *method, const char *url);

enum MHD_Result http_reply(struct MHD_Connection *c, unsigned status, const char *type, const void *body, size_t len);
enum MHD_Result http_reply_text(struct MHD_Connection *c, unsigned status, const char *msg);
/* The status the calling thread last queued with the functions here (0: none since the last take),
 * and forget it: one access-log line per answered request (retrieval_server.c). */
unsigned http_reply_take_status(void);
/* 503 with "Retry-After: <retry_s>" and the message. */
enum MHD_Result http_reply_busy(struct MHD_Connection *c, unsigned retry_s, const char *msg);
/* Sends the image file at path (PNG or JPEG by content, and it must decode) when its real path
 * (symlinks and .. resolved) is a regular file under one of roots (a NULL-terminated list of
 * real paths of folders; roots == NULL: any folder) of at most HTTP_MAX_IMAGE_BYTES; 404 otherwise. */
enum MHD_Result http_reply_image_file(struct MHD_Connection *c, const char *path, char *const *roots);
/* The real path of `path` when it is a regular file under one of roots (as http_reply_image_file
 * decides), else NULL. malloc'd. */
char *http_path_allowed(const char *path, char *const *roots);
/* A read-only descriptor on `path` (*st filled) when the file it holds is a regular file under one of
 * roots, else -1. The check is repeated on the open file itself (its path as /proc/self/fd names
 * it), so a folder of a root swapped for a link between resolving the name and opening cannot lead
 * outside; without /proc, the resolved name's check stands. What is checked is what is read. */
int http_open_allowed(const char *path, char *const *roots, struct stat *st);
/* Exactly `size` bytes from fd into a new buffer (*len = size), or NULL when fewer could be read. */
uint8_t *http_read_fd(int fd, size_t size, size_t *len);
/* The whole file at path, opened as http_open_allowed decides and at most HTTP_MAX_IMAGE_BYTES, in a
 * new buffer (*len bytes); NULL when it may not or cannot be read. What the image routes read. */
uint8_t *http_read_allowed(const char *path, char *const *roots, size_t *len);
/* The real path of folder dir as a root for http_reply_image_file, or NULL (ER_INPUT naming it). */
char *http_image_root(const char *dir);

#endif
