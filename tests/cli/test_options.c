/* Options declared once (issue 28): an option that means the same in two commands is the same
 * declaration (cli/common_opts.h), so --help prints the same line for it in both, and a bad value
 * gets the same message. Commands run in-process, as main() calls them. */
#include <string.h>

#include "nn/base/base.h"
#include "tests/test_capture.h"

int cmd_search(int argc, char **argv);
int cmd_classify(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_synth(int argc, char **argv);
int cmd_embed(int argc, char **argv);
int cmd_index(int argc, char **argv);
int cmd_train(int argc, char **argv);

/* The --help line of option `name` (a malloc'd copy, without its newline). */
static char *help_line(int (*cmd)(int, char **), int argc, char **argv, const char *name) {
    char *out = NULL;
    cr_assert_eq(test_capture_stdout(cmd, argc, argv, &out), ER_OK, "%s --help", argv[0]);
    char key[64];
    snprintf(key, sizeof key, "\n  --%s ", name);
    const char *p = strstr(out, key);
    cr_assert(p, "no --%s in the help of %s:\n%s", name, argv[0], out);
    p += 1;
    const char *e = strchr(p, '\n');
    char *line = strndup(p, e ? (size_t)(e - p) : strlen(p));
    free(out);
    return line;
}

Test(cli_options, a_shared_option_has_one_help_in_every_command) {
    char *search[] = {"search", "--help", NULL}, *reid[] = {"eval", "reid", "--help", NULL};
    char *a = help_line(cmd_search, 2, search, "k"), *b = help_line(cmd_eval, 3, reid, "k");
    cr_expect_str_eq(a, b);
    cr_expect(strstr(a, "[1, inf)") && strstr(a, "(default: 10)"), "%s", a);
    free(a); free(b);
    char *classify[] = {"classify", "--help", NULL};
    a = help_line(cmd_search, 2, search, "json");
    b = help_line(cmd_classify, 2, classify, "json");
    cr_expect_str_eq(a, b);
    free(a); free(b);
    char *synth[] = {"synth", "--help", NULL}, *embed[] = {"embed", "--help", NULL};
    a = help_line(cmd_synth, 2, synth, "threads");
    b = help_line(cmd_embed, 2, embed, "threads");
    cr_expect_str_eq(a, b);
    free(a); free(b);
}

Test(cli_options, a_shared_option_has_one_message_in_every_command) {
    char *search[] = {"search", "--index", "db", "--query", "q", "--k", "0", NULL};
    cr_expect_eq(cmd_search(7, search), ER_INPUT);
    char first[512];
    snprintf(first, sizeof first, "%s", er_msg());
    char *reid[] = {"eval", "reid", "--k", "0", NULL};
    cr_expect_eq(cmd_eval(4, reid), ER_INPUT);
    cr_expect_str_eq(er_msg(), first);
    cr_expect(strstr(first, "--k: expected an integer in [1, inf), got '0'"), "%s", first);
}

Test(cli_options, help_shows_each_default_once_and_set_where_it_applies) {
    char *build[] = {"index", "build", "--help", NULL};
    char *kind = help_line(cmd_index, 3, build, "kind");
    cr_expect_null(strstr(strstr(kind, "(default") + 1, "(default"), "%s", kind);
    cr_expect(strstr(kind, "(default: mih)"), "%s", kind);
    free(kind);
    char *train[] = {"train", "image", "--help", NULL};
    char *set = help_line(cmd_train, 3, train, "set");
    cr_expect(strstr(set, "key=value"), "%s", set);
    free(set);
    char *embed[] = {"embed", "--help", NULL};
    set = help_line(cmd_embed, 2, embed, "set");
    free(set);
}

Test(cli_options, a_misspelt_sub_command_or_option_gets_the_nearest) {
    char *sub[] = {"index", "biuld", NULL};
    cr_expect_eq(cmd_index(2, sub), ER_INPUT);
    cr_expect(strstr(er_msg(), "did you mean 'build'?"), "%s", er_msg());
    char *opt[] = {"search", "--indx", "db", NULL};
    cr_expect_eq(cmd_search(3, opt), ER_INPUT);
    cr_expect(strstr(er_msg(), "did you mean --index?"), "%s", er_msg());
    char *missing[] = {"search", "--query", "q", NULL};
    cr_expect_eq(cmd_search(3, missing), ER_INPUT);
    cr_expect(strstr(er_msg(), "--index is required"), "%s", er_msg());
}
