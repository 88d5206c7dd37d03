/* Config parser: sections, dotted keys, includes, --set, and one clear error per bad input. */
#include <stdlib.h>
#include <string.h>

#include "nn/base/base.h"
#include "tests/test_util.h"
#include "nn/base/config.h"

static int g_int;
static double g_dbl;
static char *g_str;
static int g_bool;
static cfg_spec specs[] = {
    {"train.steps", CFG_INT, &g_int, "steps", "[0, inf)"},
    {"train.lr", CFG_DOUBLE, &g_dbl, "lr", "[0, inf)"},
    {"data.manifest", CFG_STR, &g_str, "manifest", "path"},
    {"mae.norm_pix", CFG_BOOL, &g_bool, "norm pix", NULL},
};
enum { NS = 4 };

static void reset(void) { g_int = 0; g_dbl = 0; cfg_set_str(&g_str, NULL); g_bool = 0; }

static char *write_tmp(const char *dir, const char *name, const char *text) {
    char *p = path_join(dir, name);
    cr_assert_eq(write_file_atomic(p, text, strlen(text)), 0);
    return p;
}

Test(endofinder_config, sections_dotted_comments_and_set) {
    reset();
    const char *d = test_tmpdir();
    char *p = write_tmp(d, "a.cfg",
                        "# top comment\n"
                        "train.steps = 7\n"
                        "[train]\n"
                        "lr = 1.25e-4   # paper value\n"
                        "[data]\n"
                        "manifest = \"out/x#y.csv\"\n"
                        "[mae]\n"
                        "norm_pix = yes\n");
    cr_assert_eq(cfg_load(p, specs, NS), 0, "%s", er_msg());
    cr_assert_eq(g_int, 7);
    cr_assert_float_eq(g_dbl, 1.25e-4, 1e-18);
    cr_assert_str_eq(g_str, "out/x#y.csv");
    cr_assert_eq(g_bool, 1);
    cr_assert_eq(cfg_set("train.steps=20", "--set", specs, NS), 0);
    cr_assert_eq(g_int, 20);
    cr_assert_eq(cfg_set(" mae.norm_pix = false ", "--set", specs, NS), 0);
    cr_assert_eq(g_bool, 0);
    char *s = cfg_to_string(specs, NS);
    cr_assert(strstr(s, "train.steps = 20\n"));
    cr_assert(strstr(s, "data.manifest = out/x#y.csv\n"));
    free(s);
    free(p);
    cfg_free_strings(specs, NS);
}

Test(endofinder_config, include_relative_and_override) {
    reset();
    const char *d = test_tmpdir();
    char *sub = path_join(d, "sub");
    make_dirs(sub);
    char *inc = write_tmp(sub, "base.cfg", "[train]\nsteps = 3\nlr = 0.5\n");
    char *p = write_tmp(d, "main.cfg", "include = sub/base.cfg\n[train]\nlr = 0.25\n");
    cr_assert_eq(cfg_load(p, specs, NS), 0, "%s", er_msg());
    cr_assert_eq(g_int, 3);
    cr_assert_float_eq(g_dbl, 0.25, 0);
    free(inc); free(p); free(sub);
    cfg_free_strings(specs, NS);
}

static void expect_error(const char *text, const char *needle1, const char *needle2) {
    reset();
    const char *d = test_tmpdir();
    char *p = write_tmp(d, "bad.cfg", text);
    int rc = cfg_load(p, specs, NS);
    cr_assert_eq(rc, ER_INPUT, "expected ER_INPUT for %s", text);
    cr_assert(strstr(er_msg(), p), "message names the file: %s", er_msg());
    cr_assert(strstr(er_msg(), needle1), "message '%s' lacks '%s'", er_msg(), needle1);
    if (needle2) cr_assert(strstr(er_msg(), needle2), "message '%s' lacks '%s'", er_msg(), needle2);
    free(p);
    cfg_free_strings(specs, NS);
}

Test(endofinder_config, errors_name_file_and_line) {
    expect_error("[train]\nsteps = 3\nbogus = 1\n", ":3:", "unknown key 'train.bogus'");
    expect_error("train.steps = 3.5\n", ":1:", "integer");
    expect_error("\n\ntrain.lr = fast\n", ":3:", "number");
    expect_error("train.lr = nan\n", ":1:", "number");
    expect_error("mae.norm_pix = maybe\n", ":1:", "true or false");
    expect_error("[train\nsteps = 1\n", ":1:", "section");
    expect_error("train.steps 3\n", ":1:", "key = value");
    expect_error("train.steps = 99999999999\n", ":1:", "integer");
    expect_error("include = missing.cfg\n", "missing.cfg", NULL);
}

Test(endofinder_config, set_errors) {
    reset();
    cr_assert_eq(cfg_set("train.steps", "--set", specs, NS), ER_INPUT);
    cr_assert(strstr(er_msg(), "key=value"));
    cr_assert_eq(cfg_set("nope=1", "--set", specs, NS), ER_INPUT);
    cr_assert(strstr(er_msg(), "unknown key 'nope'"));
    cr_assert_eq(cfg_set("train.steps=x", "--set", specs, NS), ER_INPUT);
    cr_assert(strstr(er_msg(), "--set"));
}

Test(endofinder_config, include_cycle_is_an_error) {
    reset();
    const char *d = test_tmpdir();
    char *p = write_tmp(d, "loop.cfg", "include = loop.cfg\n");
    cr_assert_eq(cfg_load(p, specs, NS), ER_INPUT);
    cr_assert(strstr(er_msg(), "nested"), "%s", er_msg());
    free(p);
}

/* issue 33: `--keys` shows a double as the shortest text that reads back as the same value (0.05,
 * not 0.050000000000000003); the config text saved in checkpoints keeps 17 digits. */
Test(endofinder_config, keys_print_shortest_round_trip_doubles) {
    reset();
    const double vals[] = {0.05, 1.25e-4, 0.1 + 0.2, 1.0 / 3.0, 3e-300, 0.0};
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
        g_dbl = vals[i];
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        cfg_print_keys(f, specs, NS);
        fclose(f);
        const char *line = strstr(buf, "train.lr");
        cr_assert_not_null(line);
        char *end;
        double back = strtod(line + strlen("train.lr"), &end);
        cr_expect(back == vals[i], "%.17g printed as %.*s", vals[i], (int)(end - line), line);
        if (i == 0) cr_expect(strstr(line, " 0.05 ") != NULL, "%.40s", line);
        free(buf);
    }
    g_dbl = 0.05;
    char *s = cfg_to_string(specs, NS);
    cr_expect(strstr(s, "train.lr = 0.050000000000000003\n"), "%s", s);
    free(s);
}
