/* `endoret serve` under load (issue #30 F3, F4): a page is answered while a case is embedded; a
 * full embedding queue answers 503 with Retry-After; slow clients (one byte every few seconds, from
 * several loopback addresses) neither lock a probe out nor hold a connection past the request
 * deadline. Every loop is bounded and every socket has a timeout, so no test can hang. They carry no
 * Criterion .timeout: with it, `make asan` (--jobs 2) reported a 48-byte leak inside libcriterion's
 * runner process for this suite, reproducibly for some pairs of these tests and never without it. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "datasets/image.h"
#include "infer/report/http_reply.h"
#include "infer/report/retrieval_server.h"
#include "nn/base/base.h"
#include "tests/test_util.h"
#include "tests/infer/report/online_fixture.h"

/* A connected socket from source address src (127.0.0.x) with send/receive timeouts, or -1. */
static int dial(int port, const char *src, int timeout_s) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    struct timeval tv = {timeout_s, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    if (src) {
        inet_pton(AF_INET, src, &a.sin_addr);
        if (bind(fd, (struct sockaddr *)&a, sizeof a)) { close(fd); return -1; }
    }
    a.sin_port = htons(port);
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (connect(fd, (struct sockaddr *)&a, sizeof a)) { close(fd); return -1; }
    return fd;
}

/* One request (thread-safe, unlike test_http.h): the status (0 on any failure), the response head
 * and body in resp (cap bytes, NUL-terminated). */
static int call(int port, const char *method, const char *path, const char *ctype, const char *body, size_t blen,
                char *resp, size_t cap, int timeout_s) {
    int fd = dial(port, NULL, timeout_s);
    if (fd < 0) return 0;
    char head[512];
    int n = snprintf(head, sizeof head, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n", method, path);
    if (body) n += snprintf(head + n, sizeof head - n, "Content-Type: %s\r\nContent-Length: %zu\r\n", ctype, blen);
    n += snprintf(head + n, sizeof head - n, "\r\n");
    int ok = write(fd, head, n) == n;
    for (size_t off = 0; ok && body && off < blen;) {
        ssize_t w = write(fd, body + off, blen - off);
        ok = w > 0;
        off += ok ? (size_t)w : 0;
    }
    size_t got = 0;
    ssize_t r;
    while (ok && got < cap - 1 && (r = read(fd, resp + got, cap - 1 - got)) > 0) got += (size_t)r;
    resp[got] = 0;
    close(fd);
    int status = 0;
    if (sscanf(resp, "HTTP/1.%*d %d", &status) != 1) status = 0;
    return status;
}

/* A case that takes the worker a while: 16 views of a 1536 x 1536 JPEG (decoded, preprocessed and
 * thumbnailed one by one). */
static char *slow_case(size_t *len) {
    image im = {0};
    image_ensure(&im, 3, 1536, 1536);
    for (size_t i = 0; i < (size_t)3 * 1536 * 1536; i++) im.data[i] = (float)((i * 7919) % 1536) / 1536.0f;
    uint8_t *jpg;
    size_t jl;
    cr_assert_eq(image_encode_jpeg(&im, 90, &jpg, &jl), 0);
    image_free(&im);
    enum { V = 16 };
    char *names[V], *data[V];
    size_t lens[V];
    for (int i = 0; i < V; i++) names[i] = "view.jpg", data[i] = (char *)jpg, lens[i] = jl;
    char *mp = multipart(V, names, data, lens, len);
    free(jpg);
    return mp;
}

typedef struct { int port; const char *body; size_t len; int status; double seconds; char resp[4096]; atomic_int done; } post_job;

static void *post_case(void *arg) {
    post_job *j = arg;
    double t0 = now_seconds();
    j->status = call(j->port, "POST", "/case", "multipart/form-data; boundary=XyZ", j->body, j->len, j->resp, sizeof j->resp, 60);
    j->seconds = now_seconds() - t0;
    atomic_store(&j->done, 1);
    return NULL;
}

/* F3: while the worker embeds a case, GET / from another client is answered at once (it waited
 * for the whole case before: 5.9 s in the audit). Pages are asked for one after another for as long
 * as the case is in flight, so some are asked while it is being worked on, however fast this machine
 * embeds it; one request at a time would hold one of them for most of the case. */
Test(serve_load, a_page_is_answered_while_a_case_is_embedded) {
    online_fx f;
    make_online(&f);
    retrieval_server_cfg cfg = {f.db, NULL, NULL, "127.0.0.1", 0, {3, 0, 0.1, 0, 0}, f.scene, NULL, 16, 0, 0, 0, 0, NULL, NULL, NULL, NULL};
    int port;
    retrieval_server *s;
    cr_assert_eq(retrieval_server_start(&cfg, &s, &port), ER_OK, "%s", er_msg());
    size_t len;
    char *body = slow_case(&len);
    post_job j = {port, body, len, 0, 0, "", 0};
    pthread_t th;
    pthread_create(&th, NULL, post_case, &j);
    static char resp[1 << 16];
    double worst = 0;
    int gets = 0, bad = 0;
    for (int i = 0; i < 100000 && !atomic_load(&j.done); i++) { /* bounded: the case ends within 60 s */
        double t0 = now_seconds();
        int st = call(port, "GET", "/", NULL, NULL, 0, resp, sizeof resp, 60);
        double dt = now_seconds() - t0;
        if (atomic_load(&j.done)) break; /* only pages answered while the case was still in flight */
        gets++;
        bad += st != 200;
        if (dt > worst) worst = dt;
    }
    pthread_join(th, NULL);
    cr_log_info("case %.3f s; %d pages answered while it ran, the slowest in %.4f s", j.seconds, gets, worst);
    cr_expect_eq(j.status, 200, "%.200s", j.resp);
    cr_assert_geq(gets, 3, "only %d pages were answered while the %.3f s case ran", gets, j.seconds);
    cr_expect_eq(bad, 0, "%d pages were not answered 200", bad);
    cr_expect_lt(worst, j.seconds / 4, "a page took %.3f s while the case took %.3f s", worst, j.seconds);
    retrieval_server_stop(s);
    free(body);
    free_online(&f);
}

/* F3: with room for one waiting case, four cases at once: one is embedded, one waits, the others
 * are told 503 with Retry-After (before, all four queued on the one thread). The first case goes
 * 0.5 s ahead so the worker has taken it off the queue: when all four arrive before it does, the
 * queue of one holds the first and the other three are refused, which is right but not this case
 * (seen once under AddressSanitizer on a loaded machine: 1 of 4 embedded). */
Test(serve_load, a_full_queue_answers_503_with_retry_after) {
    online_fx f;
    make_online(&f);
    retrieval_server_cfg cfg = {f.db, NULL, NULL, "127.0.0.1", 0, {3, 0, 0.1, 0, 0}, f.scene, NULL, 16, 0, 0, 1, 0, NULL, NULL, NULL, NULL};
    int port;
    retrieval_server *s;
    cr_assert_eq(retrieval_server_start(&cfg, &s, &port), ER_OK, "%s", er_msg());
    size_t len;
    char *body = slow_case(&len);
    enum { N = 4 };
    post_job j[N];
    pthread_t th[N];
    for (int i = 0; i < N; i++) {
        j[i] = (post_job){port, body, len, 0, 0, "", 0};
        pthread_create(&th[i], NULL, post_case, &j[i]);
        if (i == 0) usleep(500000);
    }
    int ok = 0, busy = 0;
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        ok += j[i].status == 200;
        if (j[i].status == 503) {
            busy++;
            cr_expect(strstr(j[i].resp, "Retry-After: 2\r\n"), "%.300s", j[i].resp);
        }
    }
    cr_expect_eq(ok + busy, N, "every case is answered 200 or 503");
    cr_expect_geq(ok, 2, "%d of %d embedded", ok, N);
    cr_expect_geq(busy, 1, "no case was refused with a queue of one (%d embedded)", ok);
    retrieval_server_stop(s);
    free(body);
    free_online(&f);
}

/* F4, the audit's pattern: HTTP_MAX_CONNECTIONS connections from 127.0.0.2..5 (the per-IP limit
 * counts each address apart) each sending a byte now and then. Probes from 127.0.0.1 keep being
 * answered; before, every probe failed. */
Test(serve_load, slow_clients_from_several_addresses_do_not_lock_a_probe_out) {
    online_fx f;
    make_online(&f);
    retrieval_server_cfg cfg = {f.db, NULL, NULL, "127.0.0.1", 0, {3, 0, 0.1, 0, 0}, f.scene, NULL, 4, 0, 0, 0, 0, NULL, NULL, NULL, NULL};
    int port;
    retrieval_server *s;
    cr_assert_eq(retrieval_server_start(&cfg, &s, &port), ER_OK, "%s", er_msg());
    enum { N = HTTP_MAX_CONNECTIONS };
    int fd[N], open_n = 0;
    for (int i = 0; i < N; i++) {
        char src[32];
        snprintf(src, sizeof src, "127.0.0.%d", 2 + i % 4);
        fd[i] = dial(port, src, 2);
        if (fd[i] >= 0 && write(fd[i], "P", 1) == 1) open_n++;
    }
    cr_assert_geq(open_n, N - 4, "only %d slow connections opened", open_n);
    static char resp[1 << 16];
    int good = 0, probes = 0;
    for (double t0 = now_seconds(); now_seconds() - t0 < 4.0; probes++) {
        for (int i = 0; i < N; i++) /* keep the slow ones trickling (a closed one just fails) */
            if (fd[i] >= 0 && probes % 5 == 0) (void)!send(fd[i], "O", 1, MSG_NOSIGNAL);
        good += call(port, "GET", "/", NULL, NULL, 0, resp, sizeof resp, 2) == 200;
        usleep(200000);
    }
    cr_expect_eq(good, probes, "%d of %d probes answered while %d slow connections were held", good, probes, open_n);
    for (int i = 0; i < N; i++) if (fd[i] >= 0) close(fd[i]);
    retrieval_server_stop(s);
    free_online(&f);
}

/* 1 when the server closed fd (EOF or reset) within ms milliseconds, trickling a byte every 500 ms. */
static int closed_while_trickling(int fd, int ms) {
    for (int t = 0; t < ms; t += 500) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 500) > 0) {
            char c;
            if (read(fd, &c, 1) <= 0) return 1;
        }
        if (send(fd, "x", 1, MSG_NOSIGNAL) < 0) return 1;
    }
    return 0;
}

/* F4: a request whose headers trickle in (never idle, so the idle timeout never fires) is closed
 * at the header deadline; a body trickling below the minimum rate is closed too. */
Test(serve_load, a_trickling_request_is_closed_at_its_deadline) {
    SLOW_TEST();
    online_fx f;
    make_online(&f);
    retrieval_server_cfg cfg = {f.db, NULL, NULL, "127.0.0.1", 0, {3, 0, 0.1, 0, 0}, f.scene, NULL, 4, 0, 0, 0, 0, NULL, NULL, NULL, NULL};
    int port;
    retrieval_server *s;
    cr_assert_eq(retrieval_server_start(&cfg, &s, &port), ER_OK, "%s", er_msg());
    int fd = dial(port, NULL, 2);
    cr_assert(fd >= 0);
    cr_assert_eq(write(fd, "GET / HTTP/1.1\r\nX-a: ", 21), 21);
    double t0 = now_seconds();
    cr_expect(closed_while_trickling(fd, (HTTP_HEADER_DEADLINE_S + 4) * 1000), "headers trickling for %d s", HTTP_HEADER_DEADLINE_S + 4);
    cr_expect_geq(now_seconds() - t0, HTTP_HEADER_DEADLINE_S - 1.0, "closed before the deadline");
    close(fd);
    fd = dial(port, NULL, 2);
    cr_assert(fd >= 0);
    const char *head = "POST /case.json HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{";
    cr_assert_eq(write(fd, head, strlen(head)), (ssize_t)strlen(head));
    cr_expect(closed_while_trickling(fd, (HTTP_BODY_GRACE_S + 4) * 1000), "a body trickling at 2 bytes/s");
    close(fd);
    retrieval_server_stop(s);
    free_online(&f);
}

/* F3: request bodies held at once are bounded over all clients: while one client holds 99 kB of an
 * upload, another's case is told 503 + Retry-After under a 100 kB budget, and answered once the
 * first has gone. */
Test(serve_load, uploads_held_at_once_are_bounded) {
    online_fx f;
    make_online(&f);
    retrieval_server_cfg cfg = {f.db, NULL, NULL, "127.0.0.1", 0, {3, 0, 0.1, 0, 0}, f.scene, NULL, 4, 0, 0, 0, 100000, NULL, NULL, NULL, NULL};
    int port;
    retrieval_server *s;
    cr_assert_eq(retrieval_server_start(&cfg, &s, &port), ER_OK, "%s", er_msg());
    int hold = dial(port, NULL, 5);
    cr_assert(hold >= 0);
    char head[300];
    int n = snprintf(head, sizeof head, "POST /case HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=XyZ\r\n"
                                        "Content-Length: 200000\r\n\r\n--XyZ\r\nContent-Disposition: form-data; name=\"v\"; filename=\"a.png\"\r\n\r\n");
    cr_assert_eq(write(hold, head, n), n);
    char *fill = xcalloc(99000, 1);
    cr_assert_eq(write(hold, fill, 99000), 99000);
    free(fill);
    usleep(300000);
    char p[700], *png;
    size_t pl, bl;
    snprintf(p, sizeof p, "%s/images/s00001_v00.png", f.dir);
    cr_assert_eq(read_file(p, &png, &pl), 0);
    char *names[1] = {"a.png"}, *datas[1] = {png};
    char *mp = multipart(1, names, datas, &pl, &bl);
    static char resp[1 << 16];
    int st = call(port, "POST", "/case.json", "multipart/form-data; boundary=XyZ", mp, bl, resp, sizeof resp, 10);
    cr_expect_eq(st, 503, "%.300s", resp);
    cr_expect(strstr(resp, "Retry-After: 2\r\n"), "%.300s", resp);
    close(hold);
    usleep(500000);
    st = call(port, "POST", "/case.json", "multipart/form-data; boundary=XyZ", mp, bl, resp, sizeof resp, 10);
    cr_expect_eq(st, 200, "%.300s", resp);
    free(mp); free(png);
    retrieval_server_stop(s);
    free_online(&f);
}
