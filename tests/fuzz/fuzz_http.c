/* Fuzz target: the HTTP request handlers of both page servers. A `vss serve` server (a sheet of two
 * couples, one real PNG) and an `endoret serve --model` server (a tiny ViT, a case database of three
 * cases whose views are files under /tmp/endoret_fuzz_root, that folder as --image-root) run on
 * 127.0.0.1 for the whole run; each input is sent as raw request bytes to each of them on a fresh
 * loopback connection, the sending side is closed, and the answer read (bounded: 2 s). The seeds
 * serve_* post new cases: multipart PNG + JPEG uploads to /case and /case.json, JSON paths (one with
 * a ';' inside, some outside the folder), a broken multipart body; serve_write_* file and delete cases
 * (POST /case/file.json, /case/delete.json) with the server's write token, a wrong one or none. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "datasets/image.h"
#include "datasets/view_list.h"
#include "infer/perceived/vss_server.h"
#include "infer/report/retrieval_server.h"
#include "infer/retrieval/casedb.h"
#include "nn/base/base.h"
#include "nn/models/vit_model.h"
#include "tests/fuzz/fuzz_util.h"

static int port, serve_port;

/* The write token the serve_write_* seeds carry. */
#define FUZZ_TOKEN "fuzz-write-token-0123456789"

/* The folder the serve_* seeds name (fixed, so a seed can hold a path in it). */
#define FUZZ_ROOT "/tmp/endoret_fuzz_root"

static void start_serve(void) {
    const uint8_t px[3 * 8 * 8] = {10, 200, 30, 40, 50, 60};
    if (make_dirs(FUZZ_ROOT "/x;" FUZZ_ROOT) || png_save_u8(FUZZ_ROOT "/a.png", px, 3, 8, 8) ||
        png_save_u8(FUZZ_ROOT "/x;" FUZZ_ROOT "/a.png", px, 3, 8, 8))
        abort();
    image im = {0};
    uint8_t *jpg;
    size_t jl;
    if (image_load(FUZZ_ROOT "/a.png", 3, &im) || image_encode_jpeg(&im, 80, &jpg, &jl) ||
        write_file_atomic(FUZZ_ROOT "/b.jpg", jpg, jl))
        abort();
    free(jpg);
    image_free(&im);
    char enc[128], db[128];
    snprintf(enc, sizeof enc, "%s/enc.safetensors", fuzz_dir());
    snprintf(db, sizeof db, "%s/cases.db", fuzz_dir());
    vit_config c;
    if (vit_config_preset("vit_tiny", &c)) abort();
    c.img = 16; c.patch = 4; c.dim = 32; c.depth = 1; c.heads = 2;
    model *m = vit_model_wrap(vit_new(&c, 7));
    if (model_save(m, enc, -1)) abort();
    model_free(m);
    enum { N = 3, D = 32 };
    float x[N * D];
    int64_t ids[N] = {0, 1, 2}, labels[N] = {0, 1, 0};
    for (int i = 0; i < N * D; i++) x[i] = (float)((i * 37) % 11) - 5.0f;
    emb_set e = {0};
    char *label_names[2] = {"benign", "malignant"};
    e.n = N, e.dim = D, e.x = x, e.ids = ids, e.labels = labels, e.nlabel_names = 2, e.label_names = label_names;
    char *two[2] = {FUZZ_ROOT "/a.png", FUZZ_ROOT "/b.jpg"};
    char *paths[N] = {view_list_join(two, 2), FUZZ_ROOT "/x;" FUZZ_ROOT "/a.png", NULL};
    char *esc = view_list_join(&paths[1], 1);
    paths[1] = esc;
    char *masks[N] = {paths[0], NULL, NULL}; /* case 0's views stand as their own masks: /mask and /view draw them */
    if (casedb_create(db, &e, paths, masks, NULL, 0, HASH_SIGN, INDEX_SCAN, 1)) { fprintf(stderr, "%s\n", er_msg()); abort(); }
    free(paths[0]);
    free(esc);
    retrieval_server_cfg cfg = {db, NULL, NULL, "127.0.0.1", 0, {2, 0, 0.1, 0, 0}, enc, FUZZ_ROOT, 4, 0, 0, 0, 0, FUZZ_TOKEN, NULL, NULL};
    retrieval_server *s;
    if (retrieval_server_start(&cfg, &s, &serve_port)) { fprintf(stderr, "%s\n", er_msg()); abort(); }
}

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

static void send_raw(int to, const uint8_t *data, size_t size) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) abort();
    struct timeval tv = {2, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)to);
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) {
        if (size) (void)!write(fd, data, size);
        shutdown(fd, SHUT_WR);
        char buf[4096];
        while (read(fd, buf, sizeof buf) > 0) {}
    }
    close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!port) start_server();
    if (!serve_port) start_serve();
    send_raw(port, data, size);
    send_raw(serve_port, data, size);
    return 0;
}
