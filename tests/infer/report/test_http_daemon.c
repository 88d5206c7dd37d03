/* The daemon every page server starts (http_reply.h), over loopback only: idle connections beyond the
 * per-IP limit are closed at once, so one client cannot hold the server (issue 17 #3: ~1,020 idle
 * half-open connections stopped `serve`), and it still answers once they go. */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

#include "infer/report/http_reply.h"
#include "tests/test_http.h"
#include "tests/test_util.h"

static enum MHD_Result hello(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                             const char *version, const char *upload_data, size_t *upload_size, void **con_cls) {
    const char *refused = http_request_refusal(c, method, url);
    if (refused) return http_reply_text(c, MHD_HTTP_BAD_REQUEST, refused);
    return http_reply_text(c, MHD_HTTP_OK, "hello\n");
}

static int connect_idle(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert(fd >= 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof a), 0, "connect: %s", strerror(errno));
    return fd;
}

/* 1 when the server closed fd (EOF or reset) within ms milliseconds. */
static int closed_by_server(int fd, int ms) {
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, ms) <= 0) return 0;
    char c;
    return read(fd, &c, 1) <= 0;
}

Test(http_daemon, per_ip_limit_closes_idle_connections, .timeout = 30) {
    struct sockaddr_in addr = {0};
    addr.sin_family = AF_INET;
    inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    http_daemon *d = http_daemon_start(&addr, hello, NULL, NULL, NULL, 1);
    cr_assert(d);
    int port = http_daemon_port(d);
    enum { N = HTTP_MAX_PER_IP + 8 };
    int fd[N], closed = 0;
    for (int i = 0; i < N; i++) fd[i] = connect_idle(port);
    for (int i = 0; i < N; i++) closed += closed_by_server(fd[i], i < HTTP_MAX_PER_IP ? 50 : 2000);
    cr_expect_eq(closed, N - HTTP_MAX_PER_IP, "%d of %d idle connections from one IP closed (limit %d)", closed, N,
                 HTTP_MAX_PER_IP);
    for (int i = 0; i < N; i++) close(fd[i]);
    const char *body;
    size_t len;
    usleep(300000); /* the server sees the closes asynchronously */
    int st = test_http(port, "GET", "/", NULL, NULL, &body, &len);
    cr_expect_eq(st, 200);
    cr_expect_eq(test_http(port, "GET", "/%00", NULL, NULL, &body, &len), 400);
    cr_expect_eq(test_http(port, "GET", "/", "text/plain", "x", &body, &len), 400);
    http_daemon_stop(d);
}

/* An idle connection (a client that connects and sends nothing) is closed after the idle timeout. */
Test(http_daemon, idle_connection_is_closed_after_the_timeout, .timeout = 30) {
    SLOW_TEST();
    struct sockaddr_in addr = {0};
    addr.sin_family = AF_INET;
    inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    http_daemon *d = http_daemon_start(&addr, hello, NULL, NULL, NULL, 1);
    cr_assert(d);
    int fd = connect_idle(http_daemon_port(d));
    cr_expect_not(closed_by_server(fd, 1000), "closed before the timeout");
    cr_expect(closed_by_server(fd, (HTTP_IDLE_TIMEOUT_S + 3) * 1000), "still open %d s after the idle timeout", 3);
    close(fd);
    http_daemon_stop(d);
}
