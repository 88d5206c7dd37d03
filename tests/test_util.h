/* test_util.h — helpers shared by the Criterion tests. */
#ifndef ENDORET_TEST_UTIL_H
#define ENDORET_TEST_UTIL_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "nn/base/base.h"
#include "nn/tensor.h"

/* Tests that take more than ~1 s call SLOW_TEST() first: they skip (saying why) under `make asan`,
 * which sets ENDORET_FAST=1, and run in `make test`. */
#define SLOW_TEST()                                                                       \
    do {                                                                                  \
        if (getenv("ENDORET_FAST")) cr_skip_test("slow test, skipped when ENDORET_FAST=1 (asan run)"); \
    } while (0)

/* ../shared/data (or $ENDORET_SHARED/data); tests that need real images skip visibly without it. */
static inline const char *shared_data_dir(void) {
    static char buf[1024];
    const char *root = getenv("ENDORET_SHARED");
    snprintf(buf, sizeof buf, "%s/data", root ? root : "../shared");
    struct stat st;
    return stat(buf, &st) == 0 && S_ISDIR(st.st_mode) ? buf : NULL;
}
#define REQUIRE_SHARED_DATA(var)                                                           \
    const char *var = shared_data_dir();                                                  \
    if (!var) cr_skip_test("../shared/data not found (set ENDORET_SHARED): real-image test skipped")

/* A fresh temporary directory for a test, removed with everything in it when the test's process
 * exits (Criterion forks one per test), unless ENDORET_KEEP_TMP is set (to look at a failure). */
static char test_tmp_dirs[16][32];
static int test_tmp_count;
static inline void test_tmp_cleanup(void) {
    if (getenv("ENDORET_KEEP_TMP")) return;
    for (int i = 0; i < test_tmp_count; i++) remove_tree(test_tmp_dirs[i]);
}
static inline const char *test_tmpdir(void) {
    static char buf[64];
    snprintf(buf, sizeof buf, "/tmp/endoret_test_XXXXXX");
    const char *d = mkdtemp(buf);
    if (d && test_tmp_count < 16) {
        if (test_tmp_count == 0) atexit(test_tmp_cleanup);
        snprintf(test_tmp_dirs[test_tmp_count++], sizeof test_tmp_dirs[0], "%s", d);
    }
    return d;
}

/* Every tensor of a param_list (weights, buffers) copied to one host array of *n floats (malloc'd):
 * what the resume and data-parallel tests compare bit for bit. */
/* The number after "key": in a JSON line (the commands' --json output); fails the test when absent. */
static inline double test_json_num(const char *s, const char *key) {
    char k[64];
    snprintf(k, sizeof k, "\"%s\":", key);
    const char *p = strstr(s, k);
    cr_assert(p, "key %s missing in %s", key, s);
    return strtod(p + strlen(k), NULL);
}

static inline float *params_snapshot(const param_list *pl, int64_t *n) {
    *n = params_numel(pl);
    float *buf = (float *)malloc((size_t)(*n > 0 ? *n : 1) * sizeof(float)), *p = buf;
    for (int i = 0; i < pl->n; i++) {
        tensor_to_host(pl->t[i], p);
        p += tensor_numel(pl->t[i]);
    }
    return buf;
}

#endif
