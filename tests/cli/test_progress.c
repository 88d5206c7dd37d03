/* test_progress.c — the silent phases show progress to a person at a terminal and to no one else
 * (issue 33): `embed`, `data check`, `index build`, `report` and the training image cache write a
 * progress line when stderr is a terminal, nothing under --json, nothing when stderr is a file. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "datasets/image_cache.h"
#include "datasets/synth.h"
#include "nn/base/base.h"
#include "nn/base/progress.h"
#include "tests/test_util.h"

int cmd_embed(int argc, char **argv);
int cmd_data(int argc, char **argv);
int cmd_index(int argc, char **argv);
int cmd_report(int argc, char **argv);

enum { TO_FILE, TO_TERMINAL };

/* fn's stderr (to a file, or to a pseudo-terminal) in *err; its stdout is dropped */
static int run_with_stderr(int (*fn)(int, char **), int argc, char **argv, int where, char **err) {
    int master = -1, sink, out_fd = open("/dev/null", O_WRONLY);
    char tmpl[] = "/tmp/endoret_err_XXXXXX";
    if (where == TO_TERMINAL) {
        master = posix_openpt(O_RDWR | O_NOCTTY);
        cr_assert(master >= 0 && grantpt(master) == 0 && unlockpt(master) == 0);
        sink = open(ptsname(master), O_RDWR | O_NOCTTY);
        cr_assert(sink >= 0 && isatty(sink));
    } else sink = mkstemp(tmpl);
    fflush(stdout), fflush(stderr);
    int saved_out = dup(1), saved_err = dup(2);
    dup2(out_fd, 1), dup2(sink, 2);
    int rc = fn(argc, argv);
    fflush(stdout), fflush(stderr);
    dup2(saved_out, 1), dup2(saved_err, 2);
    close(saved_out), close(saved_err), close(out_fd), close(sink);
    size_t len = 0;
    if (where == TO_TERMINAL) {
        *err = xcalloc(1, 1 << 16);
        fcntl(master, F_SETFL, O_NONBLOCK);
        ssize_t r;
        while (len < (1 << 16) - 1 && (r = read(master, *err + len, (1 << 16) - 1 - len)) > 0) len += (size_t)r;
        close(master);
    } else {
        cr_assert_eq(read_file(tmpl, err, &len), ER_OK);
        unlink(tmpl);
    }
    return rc;
}

/* the image cache is no command: run it as one */
static const char *cache_manifest;
static int cache_cmd(int argc, char **argv) {
    image_cache c;
    progress_quiet(argc > 1); /* as `train --quiet` does */
    int rc = image_cache_load(&c, cache_manifest, "", 16);
    image_cache_free(&c);
    return rc;
}

Test(cli_progress, on_a_terminal_only_and_never_under_json) {
    const char *dir = test_tmpdir();
    synth_config sc = {.scenes = 6, .views = 2, .size = 16, .seed = 2, .threads = 1};
    cr_assert_eq(synth_write_dataset(dir, &sc), 0, "%s", er_msg());
    char *man = path_join(dir, "manifest.csv"), *emb = path_join(dir, "e.safetensors"), *db = path_join(dir, "c.db");
    char *html = path_join(dir, "r.html");
    cache_manifest = man;
    char *embed[] = {"embed", "--baseline", "thumbnail", "--manifest", man, "--out", emb, "--json", NULL};
    char *check[] = {"data", "check", man, NULL};
    char *build[] = {"index", "build", "--emb", emb, "--manifest", man, "--out", db, "--json", NULL};
    char *report[] = {"report", "--index", db, "--out", html, "--json", NULL};
    char *cache[] = {"cache", "--quiet", NULL};
    struct { int (*fn)(int, char **); char **argv; int argc, has_json; const char *line; } cmds[] = {
        {cmd_embed, embed, 8, 1, "embed: "},
        {cmd_data, check, 3, 0, "data check: "},
        {cmd_index, build, 9, 1, "index build: "},
        {cmd_report, report, 6, 1, "report: "},
        {cache_cmd, cache, 2, 1, "decode: "},
    };
    for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++) {
        char *err;
        int argc = cmds[i].argc - cmds[i].has_json; /* without the last argument, --json */
        progress_quiet(0);
        cr_assert_eq(run_with_stderr(cmds[i].fn, argc, cmds[i].argv, TO_TERMINAL, &err), ER_OK, "%s", er_msg());
        cr_expect(strstr(err, cmds[i].line), "%s on a terminal: no '%s' progress line in: %s", cmds[i].argv[0], cmds[i].line, err);
        free(err);
        progress_quiet(0);
        cr_assert_eq(run_with_stderr(cmds[i].fn, argc, cmds[i].argv, TO_FILE, &err), ER_OK, "%s", er_msg());
        cr_expect(!strstr(err, cmds[i].line) && !strchr(err, '\r'), "%s to a file: %s", cmds[i].argv[0], err);
        free(err);
        if (!cmds[i].has_json) continue;
        progress_quiet(0);
        cr_assert_eq(run_with_stderr(cmds[i].fn, cmds[i].argc, cmds[i].argv, TO_TERMINAL, &err), ER_OK, "%s", er_msg());
        cr_expect(!strstr(err, cmds[i].line) && !strchr(err, '\r'), "%s --json on a terminal: %s", cmds[i].argv[0], err);
        free(err);
    }
    progress_quiet(0);
    free(man), free(emb), free(db), free(html);
}
