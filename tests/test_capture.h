/* test_capture.h — a command's stdout captured for a test (its own header: it needs <unistd.h>,
 * whose names some tests use for their own helpers). */
#ifndef ENDORET_TEST_CAPTURE_H
#define ENDORET_TEST_CAPTURE_H

#include <unistd.h>

#include "tests/test_util.h"

/* Runs a command's entry point with stdout captured into a file; returns its status, the output in
 * *out (malloc'd, NUL-terminated). */
static inline int test_capture_stdout(int (*fn)(int, char **), int argc, char **argv, char **out) {
    char tmpl[] = "/tmp/endoret_cap_XXXXXX";
    int fd = mkstemp(tmpl);
    fflush(stdout);
    int saved = dup(1);
    dup2(fd, 1);
    int rc = fn(argc, argv);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    close(fd);
    size_t len;
    cr_assert_eq(read_file(tmpl, out, &len), ER_OK);
    unlink(tmpl);
    return rc;
}

#endif
