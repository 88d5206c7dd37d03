/* base.c and args.c: error messages, atomic writes, option parsing. */
#include "tests/test_util.h"
#include "nn/base/args.h"
#include "nn/base/base.h"

#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

Test(base, atomic_write_replaces_and_leaves_no_temp) {
    const char *dir = test_tmpdir();
    char *path = path_join(dir, "f.txt");
    cr_assert_eq(write_file_atomic(path, "old", 3), ER_OK);
    atomic_file af;
    cr_assert_eq(atomic_open(&af, path), ER_OK);
    fputs("half-written", af.f);
    atomic_abort(&af); /* a crash/failure before commit keeps the old content */
    char *data; size_t n;
    cr_assert_eq(read_file(path, &data, &n), ER_OK);
    cr_expect_str_eq(data, "old");
    free(data);
    cr_assert_eq(write_file_atomic(path, "new!", 4), ER_OK);
    cr_assert_eq(read_file(path, &data, &n), ER_OK);
    cr_expect_str_eq(data, "new!");
    cr_expect_eq(n, 4);
    free(data);
    free(path);
}

Test(base, missing_file_names_the_path) {
    char *data;
    cr_assert_eq(read_file("/nonexistent/x.png", &data, NULL), ER_INPUT);
    cr_expect(strstr(er_msg(), "/nonexistent/x.png") != NULL);
}

/* issue 17 #4: a directory (or any non-regular file) where a file is expected: one message naming
 * the path, no allocation from the size ftell() reports for it (the size of a directory is 2^63-1). */
Test(base, directory_or_device_is_not_a_file) {
    const char *dir = test_tmpdir();
    char *data = NULL;
    cr_assert_eq(read_file(dir, &data, NULL), ER_INPUT);
    cr_expect(strstr(er_msg(), dir) && strstr(er_msg(), "directory"), "%s", er_msg());
    cr_assert_eq(read_file("/dev/zero", &data, NULL), ER_INPUT); /* endless: must not be read */
    cr_expect(strstr(er_msg(), "/dev/zero") && strstr(er_msg(), "regular file"), "%s", er_msg());
    cr_expect_null(data);
}

/* A pid that ran and has ended (its zombie reaped). */
static int dead_pid(void) {
    pid_t p = fork();
    if (p == 0) _exit(0);
    waitpid(p, NULL, 0);
    return (int)p;
}

/* issue 17 #10: temporary files of a killed writer (X.tmp.PID and SQLite's X.tmp.PID-journal) are
 * removed by the next atomic write of X; those of a live process, and of other files, are kept. */
Test(base, stale_temp_files_of_dead_processes_are_removed) {
    const char *dir = test_tmpdir();
    char *path = path_join(dir, "enc.safetensors");
    int dead = dead_pid();
    char names[5][300];
    snprintf(names[0], 300, "%s.tmp.%d", path, dead);               /* stale: removed */
    snprintf(names[1], 300, "%s.tmp.%d-journal", path, dead);       /* stale: removed */
    snprintf(names[2], 300, "%s.tmp.%d", path, (int)getppid());     /* its writer runs: kept */
    snprintf(names[3], 300, "%s/other.bin.tmp.%d", dir, dead);     /* another file's: kept */
    snprintf(names[4], 300, "%s.tmp.%dx", path, dead);              /* not a pid: kept */
    for (int i = 0; i < 5; i++) {
        FILE *f = fopen(names[i], "w");
        cr_assert(f);
        fputs("partial", f);
        fclose(f);
    }
    cr_expect_eq(remove_stale_temps(path), 2);
    cr_assert_eq(write_file_atomic(path, "x", 1), ER_OK);
    for (int i = 0; i < 5; i++)
        cr_expect_eq(access(names[i], F_OK) == 0, i >= 2, "%s %s", names[i], i >= 2 ? "removed" : "kept");
    /* and write_file_atomic itself cleans up */
    FILE *f = fopen(names[0], "w");
    fclose(f);
    cr_assert_eq(write_file_atomic(path, "y", 1), ER_OK);
    cr_expect_neq(access(names[0], F_OK), 0, "write_file_atomic left %s", names[0]);
    free(path);
}

Test(args, parses_types_and_rejects_bad_input) {
    const char *out = "o"; int n = 1; double tau = 0.1; int json = 0;
    arg_spec s[] = {{"out", ARG_STR, &out, ""}, {"n", ARG_INT, &n, ""}, {"tau", ARG_DOUBLE, &tau, ""},
                    {"json", ARG_FLAG, &json, ""}};
    char *argv1[] = {"cmd", "--out", "d", "--n=5", "pos1", "--tau", "0.05", "--json", "pos2"};
    char **pos; int npos;
    cr_assert_eq(args_parse(9, argv1, s, 4, "u", &pos, &npos), ER_OK);
    cr_expect_str_eq(out, "d");
    cr_expect_eq(n, 5);
    cr_expect_float_eq(tau, 0.05, 1e-12);
    cr_expect_eq(json, 1);
    cr_assert_eq(npos, 2);
    cr_expect_str_eq(pos[1], "pos2");
    free(pos);
    char *bad1[] = {"cmd", "--n", "5x"};
    cr_expect_eq(args_parse(3, bad1, s, 4, "u", NULL, NULL), ER_INPUT);
    cr_expect(strstr(er_msg(), "--n") != NULL);
    char *bad2[] = {"cmd", "--nope", "1"};
    cr_expect_eq(args_parse(3, bad2, s, 4, "u", NULL, NULL), ER_INPUT);
    cr_expect(strstr(er_msg(), "--nope") != NULL);
    char *bad3[] = {"cmd", "--tau"};
    cr_expect_eq(args_parse(2, bad3, s, 4, "u", NULL, NULL), ER_INPUT);
    int *v, nv;
    cr_assert_eq(args_int_list("16,32,64", "bits", &v, &nv), ER_OK);
    cr_expect_eq(nv, 3);
    cr_expect_eq(v[2], 64);
    free(v);
    cr_expect_eq(args_int_list("16,,x", "bits", &v, &nv), ER_INPUT);
    double *d;
    cr_assert_eq(args_double_list("0,0.25,.5,-1e-3,1", "w", &d, &nv), ER_OK, "%s", er_msg());
    cr_expect(nv == 5 && d[0] == 0 && d[1] == 0.25 && d[2] == 0.5 && d[3] == -1e-3 && d[4] == 1);
    free(d);
    const char *bad[] = {"", "0,,1", "0,", " 1", "1 ,2", "inf", "nan", "1e999", "0.5x", "+1", ",1"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        cr_expect_eq(args_double_list(bad[i], "w", &d, &nv), ER_INPUT, "'%s' accepted", bad[i]);
        cr_expect(strstr(er_msg(), "w: "), "%s", er_msg());
    }
}

/* remove_tree removes a nested folder but only unlinks a symlink in it, never what it points to. */
Test(base, remove_tree_does_not_follow_symlinks) {
    char top[] = "/tmp/endoret_rmtree_XXXXXX", outside[] = "/tmp/endoret_keep_XXXXXX";
    cr_assert(mkdtemp(top) && mkdtemp(outside));
    char *sub = path_join(top, "a/b"), *f = path_join(sub, "x.txt"), *keep = path_join(outside, "k.txt"),
         *ln = path_join(top, "a/link");
    cr_assert_eq(make_dirs(sub), 0);
    cr_assert_eq(write_file_atomic(f, "x", 1), 0);
    cr_assert_eq(write_file_atomic(keep, "k", 1), 0);
    cr_assert_eq(symlink(outside, ln), 0);
    cr_assert_eq(remove_tree(top), 0, "%s", er_msg());
    struct stat st;
    cr_assert(stat(top, &st) != 0, "the folder is still there");
    cr_assert(stat(keep, &st) == 0, "a symlink's target was removed");
    cr_assert_eq(remove_tree(top), ER_RUNTIME);
    cr_assert(strstr(er_msg(), top), "%s", er_msg());
    remove_tree(outside);
    free(sub); free(f); free(keep); free(ln);
}

/* A message that wraps the previous one (`er_fail(rc, "%s: %s", path, er_msg())`, as commands
 * prefix a file name) reads the buffer it writes: it came out garbled ("a: a: ..."). */
Test(base, a_message_may_quote_the_previous_one) {
    er_fail(ER_INPUT, "2-vs-2 protocol: no sequence has 4 frames (%d too short)", 2);
    cr_expect_eq(er_fail(ER_INPUT, "%s: %s", "emb.safetensors", er_msg()), ER_INPUT);
    cr_expect_str_eq(er_msg(), "emb.safetensors: 2-vs-2 protocol: no sequence has 4 frames (2 too short)");
}

Test(base, buf_appendf_appends_and_stops_when_full) {
    char buf[12];
    size_t n = 0;
    buf_appendf(buf, sizeof buf, &n, "%s", "abc");
    buf_appendf(buf, sizeof buf, &n, ", %d", 42);
    cr_expect_str_eq(buf, "abc, 42");
    cr_expect_eq(n, 7);
    buf_appendf(buf, sizeof buf, &n, " and more text"); /* does not fit: truncated, n past the end */
    cr_expect_str_eq(buf, "abc, 42 and");
    cr_expect_gt(n, sizeof buf);
    buf_appendf(buf, sizeof buf, &n, "x"); /* full: nothing written */
    cr_expect_str_eq(buf, "abc, 42 and");
}
