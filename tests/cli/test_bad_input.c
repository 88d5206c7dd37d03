/* Hostile and careless input at the command level (issue 17): each case is one message naming the
 * file, line or key, and ER_INPUT, never an abort. Commands run in-process through their cmd_*
 * functions, as main() calls them. */
#include <string.h>

#include "datasets/image.h"
#include "datasets/manifest.h"
#include "nn/base/base.h"
#include "tests/test_util.h"

int cmd_data(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_vss(int argc, char **argv);
int cmd_eval_perceived(int argc, char **argv);

/* #4: a directory where a file is expected (the size ftell() gives for one is 2^63-1). */
static void expect_names_dir(int rc, const char *dir, const char *what) {
    cr_expect_eq(rc, ER_INPUT, "%s: rc %d (%s)", what, rc, er_msg());
    cr_expect(strstr(er_msg(), dir) != NULL, "%s: message does not name %s: %s", what, dir, er_msg());
}

Test(cli_bad_input, directory_where_a_file_is_expected) {
    char dir[64];
    snprintf(dir, sizeof dir, "%s", test_tmpdir());
    char *data_check[] = {"data", "check", dir, NULL};
    expect_names_dir(cmd_data(3, data_check), dir, "data check DIR");
    char *train[] = {"train", "image", "--config", dir, NULL};
    expect_names_dir(cmd_train(4, train), dir, "train image --config DIR");
    char *eval_perceived[] = {"eval", "perceived", "--gt", dir, "--emb", dir, NULL};
    expect_names_dir(cmd_eval_perceived(5, eval_perceived + 1), dir, "eval perceived --gt DIR");
    char *vss[] = {"vss", "serve", "--sheet", dir, "--scores", "/nonexistent/s.csv", "--observer", "a", "--port", "0", NULL};
    expect_names_dir(cmd_vss(10, vss), dir, "vss serve --sheet DIR");
    manifest m;
    expect_names_dir(manifest_load(dir, &m), dir, "manifest DIR (embed/index build --manifest)");
    /* a manifest row naming a directory */
    image im = {0};
    expect_names_dir(image_load(dir, 3, &im), dir, "image DIR (manifest row)");
}
