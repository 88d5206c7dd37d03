/* args.c (issue 28): what an option declares (range, allowed set, required, default) args_parse
 * enforces with one message, --help shows once, and a misspelt name gets the nearest one. */
#include "tests/test_capture.h"
#include "nn/base/args.h"
#include "nn/base/base.h"
#include "nn/base/config.h"
#include "nn/base/suggest.h"

#include <string.h>

static int k_, json_;
static double tau_;
static const char *kind_, *index_;

static arg_spec specs[] = {
    {"k", ARG_INT, &k_, "neighbours per query", "[1, inf)"},
    {"tau", ARG_DOUBLE, &tau_, "temperature", "(0, 10]"},
    {"kind", ARG_STR, &kind_, "index structure", "scan|balltree|mih"},
    {"index", ARG_STR, &index_, "case database", .required = 1},
    {"json", ARG_FLAG, &json_, "machine-readable output"},
};
enum { NSPECS = sizeof specs / sizeof specs[0] };

static void reset(void) {
    k_ = 10; json_ = 0; tau_ = 0.1; kind_ = "mih"; index_ = NULL;
    er_clear();
}

static int parse(int argc, char **argv) { return args_parse(argc, argv, specs, NSPECS, "test [options]", NULL, NULL); }

Test(args, range_is_enforced_with_one_message) {
    reset();
    char *ok[] = {"t", "--index", "db", "--k", "1", "--tau", "10", NULL};
    cr_expect_eq(parse(7, ok), ER_OK, "%s", er_msg());
    cr_expect_eq(k_, 1);
    reset();
    char *zero[] = {"t", "--index", "db", "--k", "0", NULL};
    cr_expect_eq(parse(5, zero), ER_INPUT);
    cr_expect(strstr(er_msg(), "--k: expected an integer in [1, inf), got '0'"), "%s", er_msg());
    reset();
    char *open[] = {"t", "--index", "db", "--tau=0", NULL}; /* (0, ...: 0 itself is out */
    cr_expect_eq(parse(4, open), ER_INPUT);
    cr_expect(strstr(er_msg(), "--tau: expected a number in (0, 10], got '0'"), "%s", er_msg());
}

Test(args, allowed_set_is_enforced_and_suggests) {
    reset();
    char *ok[] = {"t", "--index", "db", "--kind", "scan", NULL};
    cr_expect_eq(parse(5, ok), ER_OK, "%s", er_msg());
    cr_expect_str_eq(kind_, "scan");
    reset();
    char *bad[] = {"t", "--index", "db", "--kind", "mhi", NULL};
    cr_expect_eq(parse(5, bad), ER_INPUT);
    cr_expect(strstr(er_msg(), "--kind: expected one of scan/balltree/mih, got 'mhi' (did you mean 'mih'?)"), "%s", er_msg());
}

Test(args, required_option_missing) {
    reset();
    char *none[] = {"t", "--k", "3", NULL};
    cr_expect_eq(parse(3, none), ER_INPUT);
    cr_expect(strstr(er_msg(), "--index is required"), "%s", er_msg());
    reset();
    char *help[] = {"t", "--help", NULL}; /* --help needs nothing */
    char *out = NULL;
    cr_expect_eq(test_capture_stdout(parse, 2, help, &out), ARGS_HELP);
    free(out);
}

Test(args, help_shows_each_default_once) {
    reset();
    char *help[] = {"t", "--help", NULL};
    char *out = NULL;
    cr_assert_eq(test_capture_stdout(parse, 2, help, &out), ARGS_HELP);
    const char *kind = strstr(out, "--kind");
    cr_assert(kind, "%s", out);
    const char *eol = strchr(kind, '\n');
    int n = 0;
    for (const char *p = strstr(kind, "mih"); p && p < eol; p = strstr(p + 1, "mih")) n++;
    cr_expect_eq(n, 2, "the set once and the default once: %.*s", (int)(eol - kind), kind);
    cr_expect(strstr(out, " index structure: scan|balltree|mih (default: mih)\n"), "%s", out);
    cr_expect(strstr(out, " neighbours per query, in [1, inf) (default: 10)\n"), "%s", out);
    cr_expect(strstr(out, " case database (required)\n"), "%s", out);
    free(out);
    /* a declared default text replaces the slot's sentinel */
    int bits = 0;
    arg_spec d[] = {{"bits", ARG_INT, &bits, "code length", .def = "embedding size"}};
    char tmpl[] = "/tmp/endoret_args_XXXXXX";
    int fd = mkstemp(tmpl);
    FILE *f = fdopen(fd, "w+");
    args_print_usage(f, d, 1, "t");
    rewind(f);
    char buf[512] = "";
    cr_assert(fread(buf, 1, sizeof buf - 1, f) > 0);
    fclose(f);
    unlink(tmpl);
    cr_expect(strstr(buf, "code length (default: embedding size)\n"), "%s", buf);
    cr_expect(!strstr(buf, "default: 0"), "%s", buf);
}

Test(args, misspelt_option_gets_the_nearest) {
    reset();
    char *bad[] = {"t", "--index", "db", "--jsno", NULL};
    cr_expect_eq(parse(4, bad), ER_INPUT);
    cr_expect(strstr(er_msg(), "unknown option '--jsno' (did you mean --json? see --help)"), "%s", er_msg());
    reset();
    char *far[] = {"t", "--index", "db", "--zzzzzz", NULL}; /* nothing close: no guess */
    cr_expect_eq(parse(4, far), ER_INPUT);
    cr_expect(!strstr(er_msg(), "did you mean"), "%s", er_msg());
    cr_expect_eq(suggest_distance("trian", "train"), 1, "a transposition is one edit");
}

Test(args, misspelt_config_key_gets_the_nearest) {
    double lr = 1e-3;
    int steps = 10;
    cfg_spec keys[] = {
        {"train.lr", CFG_DOUBLE, &lr, "learning rate", "(0, inf)"},
        {"train.steps", CFG_INT, &steps, "steps", "[1, inf)"},
    };
    cr_expect_eq(cfg_set("trian.lr=0.5", "--set", keys, 2), ER_INPUT);
    cr_expect(strstr(er_msg(), "unknown key 'trian.lr' (did you mean 'train.lr'?)"), "%s", er_msg());
    cr_expect_eq(cfg_set("model.arch=vit", "--set", keys, 2), ER_INPUT);
    cr_expect(!strstr(er_msg(), "did you mean"), "%s", er_msg());
}

static int top_a(int argc, char **argv) { return argc == 2 && !strcmp(argv[0], "build") ? 7 : -5; }

Test(args, subcommand_table_dispatches_and_suggests) {
    arg_sub subs[] = {{"build", top_a, "make one"}, {"info", NULL, "describe one"}};
    char *run[] = {"index", "build", "x", NULL};
    cr_expect_eq(args_dispatch(3, run, "index SUB", subs, 2), 7, "runs with argv from the sub-command's name");
    char *typo[] = {"index", "biuld", NULL};
    cr_expect_eq(args_dispatch(2, typo, "index SUB", subs, 2), ER_INPUT);
    cr_expect(strstr(er_msg(), "unknown sub-command 'biuld' (did you mean 'build'? one of build, info)"), "%s", er_msg());
    char *absent[] = {"index", "info", NULL};
    cr_expect_eq(args_dispatch(2, absent, "index SUB", subs, 2), ER_INPUT);
    cr_expect(strstr(er_msg(), "not part of this build"), "%s", er_msg());
}
