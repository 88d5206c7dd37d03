/* Fuzz target: the HTTP request handlers. A `vss serve` server (a sheet of two couples, one real PNG)
 * runs on 127.0.0.1 for the whole run; each input is sent as raw request bytes on a fresh loopback
 * connection, the sending side is closed, and the answer read (bounded: 2 s). The daemon's request
 * checks and image serving are those of `endoret serve` too (infer/report/http_reply.c). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "datasets/image.h"
#include "infer/perceived/vss_server.h"
#include "nn/base/base.h"
#include "tests/fuzz/fuzz_util.h"

static int port;

static void start_server(void) {
    const uint8_t px[3] = {200, 100, 50};
    char img[128], sheet[128], scores[128];
    snprintf(img, sizeof img, "%s/a.png", fuzz_dir());
    snprintf(sheet, sizeof sheet, "%s/sheet.csv", fuzz_dir());
    snprintf(scores, sizeof scores, "%s/scores.csv", fuzz_dir());
    if (png_save_u8(img, px, 3, 1, 1)) abort();
    const char *text = "pair,a,b,process,prior_distance,image_a,image_b\n0,1,2,0,0.5,a.png,\n1,3,4,0,0.7,,a.png\n";
    if (write_file_atomic(sheet, text, strlen(text))) abort();
    vss_server_cfg cfg = {sheet, scores, "fuzz", "127.0.0.1", 0, NULL};
    vss_server *s;
    if (vss_server_start(&cfg, &s, &port)) { fprintf(stderr, "%s\n", er_msg()); abort(); }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!port) start_server();
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) abort();
    struct timeval tv = {2, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) {
        if (size) (void)!write(fd, data, size);
        shutdown(fd, SHUT_WR);
        char buf[4096];
        while (read(fd, buf, sizeof buf) > 0) {}
    }
    close(fd);
    return 0;
}
