/* http_reply.c — see http_reply.h. */
#include "infer/report/http_reply.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "datasets/image.h"
#include "infer/report/http_guard.h"
#include "infer/report/thumbnail.h"
#include "nn/base/base.h"

/* MHD unescapes the URL in place and the handler sees a C string: "/query/0%00junk" would read as
 * "/query/0". Such a URL is left as it came, so no route matches it. */
static size_t unescape_unless_nul(void *cls, struct MHD_Connection *c, char *s) {
    (void)cls; (void)c;
    if (strstr(s, "%00")) return strlen(s);
    return MHD_http_unescape(s);
}

struct http_daemon {
    struct MHD_Daemon *d;
    http_guard *g;
};

http_daemon *http_daemon_start(const struct sockaddr_in *addr, MHD_AccessHandlerCallback handler, void *cls,
                               MHD_RequestCompletedCallback completed, void *completed_cls, unsigned threads) {
    http_daemon *h = xcalloc(1, sizeof *h);
    if (!(h->g = http_guard_new(handler, cls, completed, completed_cls))) { free(h); return NULL; }
    h->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_ALLOW_SUSPEND_RESUME, 0, NULL, NULL,
                            http_guard_access, h->g,
                            MHD_OPTION_THREAD_POOL_SIZE, threads > 1 ? threads : 0u,
                            MHD_OPTION_SOCK_ADDR, (const struct sockaddr *)addr,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)HTTP_MAX_CONNECTIONS,
                            MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)HTTP_MAX_PER_IP,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)HTTP_IDLE_TIMEOUT_S,
                            MHD_OPTION_UNESCAPE_CALLBACK, unescape_unless_nul, NULL,
                            MHD_OPTION_NOTIFY_CONNECTION, http_guard_notify, h->g,
                            MHD_OPTION_NOTIFY_COMPLETED, http_guard_completed, h->g, MHD_OPTION_END);
    if (!h->d) {
        http_guard_free(h->g);
        free(h);
        return NULL;
    }
    return h;
}

int http_daemon_port(const http_daemon *h) {
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    return info ? info->port : -1;
}

void http_daemon_stop(http_daemon *h) {
    if (!h) return;
    MHD_stop_daemon(h->d);
    http_guard_free(h->g);
    free(h);
}

int http_addr_parse(const char *bind, int port, struct sockaddr_in *addr) {
    if (port < 0 || port > 65535) return er_fail(ER_INPUT, "--port: %d is outside 0..65535", port);
    memset(addr, 0, sizeof *addr);
    addr->sin_family = AF_INET;
    addr->sin_port = htons((uint16_t)port);
    if (!bind) bind = "127.0.0.1";
    if (inet_pton(AF_INET, bind, &addr->sin_addr) != 1) return er_fail(ER_INPUT, "--bind: '%s' is not an IPv4 address", bind);
    return ER_OK;
}

int http_daemon_listen(const char *what, const struct sockaddr_in *addr, MHD_AccessHandlerCallback handler,
                       void *cls, MHD_RequestCompletedCallback completed, void *completed_cls, unsigned threads,
                       http_daemon **d, int *port_out) {
    *d = http_daemon_start(addr, handler, cls, completed, completed_cls, threads);
    if (!*d) {
        char ip[INET_ADDRSTRLEN] = "?";
        inet_ntop(AF_INET, &addr->sin_addr, ip, sizeof ip);
        return er_fail(ER_RUNTIME, "%s: cannot listen on %s:%d (port in use?)", what, ip, ntohs(addr->sin_port));
    }
    int port = http_daemon_port(*d);
    *port_out = port >= 0 ? port : ntohs(addr->sin_port);
    return ER_OK;
}

const char *http_request_refusal(struct MHD_Connection *c, const char *method, const char *url) {
    if (strstr(url, "%00")) return "a NUL byte in the URL\n";
    if (strcmp(method, "GET") && strcmp(method, "HEAD")) return NULL;
    const char *len = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    const char *te = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
    if (te || (len && strspn(len, "0") != strlen(len))) return "a GET request has no body\n";
    return NULL;
}

/* The status this thread last queued, for the access log (access_log.h): MHD calls a handler and
 * queues its reply on the same thread, so the handler's caller can read what it answered. */
static _Thread_local unsigned queued_status;

unsigned http_reply_take_status(void) {
    unsigned s = queued_status;
    queued_status = 0;
    return s;
}

static enum MHD_Result reply_with(struct MHD_Connection *c, unsigned status, const char *type, const void *body, size_t len,
                                  unsigned retry_s) {
    struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!r) return MHD_NO;
    if (retry_s) {
        char v[16];
        snprintf(v, sizeof v, "%u", retry_s);
        MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, v);
    }
    MHD_add_response_header(r, "Content-Type", type);
    MHD_add_response_header(r, "Cache-Control", "no-store");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    if (ret == MHD_YES) queued_status = status;
    MHD_destroy_response(r);
    return ret;
}

enum MHD_Result http_reply(struct MHD_Connection *c, unsigned status, const char *type, const void *body, size_t len) {
    return reply_with(c, status, type, body, len, 0);
}

enum MHD_Result http_reply_text(struct MHD_Connection *c, unsigned status, const char *msg) {
    return http_reply(c, status, "text/plain; charset=utf-8", msg, strlen(msg));
}

enum MHD_Result http_reply_busy(struct MHD_Connection *c, unsigned retry_s, const char *msg) {
    return reply_with(c, MHD_HTTP_SERVICE_UNAVAILABLE, "text/plain; charset=utf-8", msg, strlen(msg), retry_s);
}

static int under_a_root(const char *real, char *const *roots) {
    if (!roots) return 1;
    for (; *roots; roots++) {
        size_t n = strlen(*roots);
        if (!strncmp(real, *roots, n) && (real[n] == '/' || (n == 1 && **roots == '/'))) return 1;
    }
    return 0;
}

uint8_t *http_read_allowed(const char *path, char *const *roots, size_t *len) {
    struct stat st;
    *len = 0;
    int fd = http_open_allowed(path, roots, &st);
    if (fd < 0) return NULL;
    uint8_t *data = (size_t)st.st_size <= HTTP_MAX_IMAGE_BYTES ? http_read_fd(fd, (size_t)st.st_size, len) : NULL;
    close(fd);
    return data;
}

enum MHD_Result http_reply_image_file(struct MHD_Connection *c, const char *path, char *const *roots) {
    if (!path || !*path) return http_reply_text(c, MHD_HTTP_NOT_FOUND, "no image for this item\n");
    size_t len = 0;
    char *data = (char *)http_read_allowed(path, roots, &len);
    if (!data) return http_reply_text(c, MHD_HTTP_NOT_FOUND, "no readable image file under the folders this server may read\n");
    const char *type = image_mime_type((const uint8_t *)data, len);
    image im = {0};
    int decodes = type && image_decode((const uint8_t *)data, len, path, 3, &im) == ER_OK;
    image_free(&im);
    enum MHD_Result r = decodes ? http_reply(c, MHD_HTTP_OK, type, data, len)
                                : http_reply_text(c, MHD_HTTP_NOT_FOUND, "not an image file\n");
    free(data);
    return r;
}

char *http_path_allowed(const char *path, char *const *roots) {
    char *real = path && *path ? realpath(path, NULL) : NULL;
    struct stat st;
    if (!real || stat(real, &st) != 0 || !S_ISREG(st.st_mode) || !under_a_root(real, roots)) {
        free(real);
        return NULL;
    }
    return real;
}

int http_open_allowed(const char *path, char *const *roots, struct stat *st) {
    char *real = http_path_allowed(path, roots);
    int fd = real ? open(real, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC) : -1;
    free(real);
    if (fd < 0) return -1;
    /* what was opened, as the kernel names it now: a folder swapped after the name was resolved
     * shows here (a FIFO swapped in fails S_ISREG; O_NONBLOCK kept the open from waiting on it) */
    char link[48], now[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, now, sizeof now - 1);
    int ok = fstat(fd, st) == 0 && S_ISREG(st->st_mode);
    if (ok && n > 0) {
        now[n] = 0;
        ok = under_a_root(now, roots);
    }
    if (!ok) {
        close(fd);
        return -1;
    }
    return fd;
}

uint8_t *http_read_fd(int fd, size_t size, size_t *len) {
    uint8_t *buf = xmalloc(size + 1);
    size_t got = 0;
    ssize_t r;
    while (got < size && ((r = read(fd, buf + got, size - got)) > 0 || (r < 0 && errno == EINTR)))
        if (r > 0) got += (size_t)r;
    if (got != size) {
        free(buf);
        return NULL;
    }
    *len = got;
    return buf;
}

char *http_image_root(const char *dir) {
    char *real = realpath(dir, NULL);
    struct stat st;
    if (!real || stat(real, &st) != 0 || !S_ISDIR(st.st_mode)) {
        er_fail(ER_INPUT, "%s: not a readable folder: %s", dir, real ? "not a directory" : strerror(errno));
        free(real);
        return NULL;
    }
    return real;
}
