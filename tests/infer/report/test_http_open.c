/* http_open_allowed (infer/report/http_reply.h): the server opens a named image only when the file it
 * opened is under its roots, checked on the open descriptor, so a folder of a root swapped for a link
 * to the outside between resolving the name and opening it cannot serve an outside file. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "infer/report/http_reply.h"
#include "tests/test_util.h"

static void put(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f, "%s", path);
    fputs(text, f);
    fclose(f);
}

static int opens(const char *path, char *const *roots) {
    struct stat st;
    int fd = http_open_allowed(path, roots, &st);
    if (fd >= 0) close(fd);
    return fd >= 0;
}

Test(http_open, only_regular_files_under_a_root) {
    const char *d = test_tmpdir();
    char root[512], in[600], out[600], link[600], sub[600], fifo[600];
    snprintf(root, sizeof root, "%s/root", d);
    mkdir(root, 0755);
    snprintf(in, sizeof in, "%s/in.png", root);
    snprintf(out, sizeof out, "%s/out.png", d);
    snprintf(link, sizeof link, "%s/link.png", root);
    snprintf(sub, sizeof sub, "%s/sub", root);
    snprintf(fifo, sizeof fifo, "%s/fifo.png", root);
    put(in, "IN"), put(out, "OUT");
    cr_assert_eq(symlink(out, link), 0);
    mkdir(sub, 0755);
    cr_assert_eq(mkfifo(fifo, 0644), 0);
    char *real = realpath(root, NULL), *roots[2] = {real, NULL};
    cr_expect(opens(in, roots), "a file under the root");
    cr_expect(!opens(out, roots), "a file outside");
    cr_expect(!opens(link, roots), "a link inside pointing outside");
    cr_expect(!opens(sub, roots), "a folder");
    cr_expect(!opens(fifo, roots), "a FIFO (must not hang either)");
    cr_expect(!opens("", roots) && !opens(NULL, roots));
    free(real);
}

/* A folder of the root swapped for a link to the outside and back, as fast as it goes, while the
 * server opens a file under it: every open that succeeds must hold the inside file. Checking only the
 * resolved name (then opening it) lets the outside file through in the window between the two. */
typedef struct {
    char d[600], keep[600], link[600];
    atomic_int stop;
    long swaps;
} swapper;

static void *swap_loop(void *p) {
    swapper *s = p;
    while (!atomic_load(&s->stop)) { /* d: folder -> link -> folder */
        if (rename(s->d, s->keep) || rename(s->link, s->d) || rename(s->d, s->link) || rename(s->keep, s->d)) break;
        s->swaps++;
    }
    return NULL;
}

/* no Criterion .timeout (it leaks 48 bytes inside libcriterion under make asan): bounded by 3 s and a try count */
Test(http_open, a_folder_swapped_for_a_link_never_serves_the_outside) {
    const char *t = test_tmpdir();
    char root[512], outdir[512], in[700], outf[700], name[700];
    snprintf(root, sizeof root, "%s/root", t);
    snprintf(outdir, sizeof outdir, "%s/outside", t);
    mkdir(root, 0755), mkdir(outdir, 0755);
    swapper s = {0};
    snprintf(s.d, sizeof s.d, "%s/d", root);
    snprintf(s.keep, sizeof s.keep, "%s/d_kept", root);
    snprintf(s.link, sizeof s.link, "%s/d_link", root);
    mkdir(s.d, 0755);
    snprintf(in, sizeof in, "%s/x.png", s.d);
    snprintf(outf, sizeof outf, "%s/x.png", outdir);
    put(in, "IN"), put(outf, "OUT");
    cr_assert_eq(symlink(outdir, s.link), 0);
    snprintf(name, sizeof name, "%s/x.png", s.d);
    char *real = realpath(root, NULL), *roots[2] = {real, NULL};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, swap_loop, &s), 0);
    long opened = 0, outside = 0, tries = 0;
    const time_t end = time(NULL) + 3;
    for (; tries < 400000 && time(NULL) < end; tries++) {
        struct stat st;
        int fd = http_open_allowed(name, roots, &st);
        if (fd < 0) continue;
        char buf[8] = {0};
        ssize_t n = read(fd, buf, sizeof buf - 1);
        close(fd);
        opened++;
        if (n == 3 && !strcmp(buf, "OUT")) outside++;
    }
    atomic_store(&s.stop, 1);
    pthread_join(th, NULL);
    cr_log_info("%ld opens tried, %ld succeeded, %ld folder swaps, %ld outside reads", tries, opened, s.swaps, outside);
    cr_expect_gt(s.swaps, 100, "the folder was hardly swapped: the test proves nothing");
    cr_expect_gt(opened, 0, "never opened the inside file");
    cr_expect_eq(outside, 0, "%ld of %ld successful opens read the file outside the root", outside, opened);
    free(real);
}
