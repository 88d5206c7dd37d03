/* test_http.h — a minimal HTTP/1.1 client over a loopback socket for the server tests (vss serve,
 * endoret serve), so the suite needs no HTTP library. One request per connection. */
#ifndef ENDORET_TEST_HTTP_H
#define ENDORET_TEST_HTTP_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <criterion/criterion.h>

/* Sends METHOD PATH (with one more header line `header` when non-NULL, e.g. "Authorization: Bearer x",
 * and with `payload` of type `ctype` when non-NULL) to 127.0.0.1:port and returns the
 * status code; *body / *blen point at the response body inside a static buffer (binary-safe, valid
 * until the next call). Fails the test on a connection error or a missing status line. */
static int test_http_hdr(int port, const char *method, const char *path, const char *header, const char *ctype,
                         const char *payload, size_t plen, const char **body, size_t *blen) {
    static char resp[1 << 20];
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert(fd >= 0);
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    cr_assert(connect(fd, (struct sockaddr *)&a, sizeof a) == 0, "connect to port %d", port);
    char req[2048];
    int n = snprintf(req, sizeof req, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n", method, path);
    if (header) n += snprintf(req + n, sizeof req - n, "%s\r\n", header);
    if (payload) n += snprintf(req + n, sizeof req - n, "Content-Type: %s\r\nContent-Length: %zu\r\n", ctype, plen);
    n += snprintf(req + n, sizeof req - n, "\r\n");
    cr_assert(write(fd, req, n) == n);
    for (size_t off = 0; payload && off < plen;) { /* binary-safe body */
        ssize_t w = write(fd, payload + off, plen - off);
        cr_assert(w > 0);
        off += (size_t)w;
    }
    size_t got = 0;
    ssize_t r;
    while (got < sizeof resp - 1 && (r = read(fd, resp + got, sizeof resp - 1 - got)) > 0) got += (size_t)r;
    resp[got] = 0;
    close(fd);
    int status = 0;
    cr_assert(sscanf(resp, "HTTP/1.%*d %d", &status) == 1, "no status line in '%.80s'", resp);
    char *b = strstr(resp, "\r\n\r\n");
    *body = b ? b + 4 : "";
    *blen = b ? got - (size_t)(b + 4 - resp) : 0;
    return status;
}

static inline int test_http_bin(int port, const char *method, const char *path, const char *ctype, const char *payload,
                                size_t plen, const char **body, size_t *blen) {
    return test_http_hdr(port, method, path, NULL, ctype, payload, plen, body, blen);
}

/* test_http_bin with a NUL-terminated payload. */
static inline int test_http(int port, const char *method, const char *path, const char *ctype, const char *payload,
                            const char **body, size_t *blen) {
    return test_http_bin(port, method, path, ctype, payload, payload ? strlen(payload) : 0, body, blen);
}

#endif
