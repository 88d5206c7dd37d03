/* test_paper_configs.c — the papers' configs take their data from `--set data.manifest=` (issue 33:
 * `train image --config configs/kvasir_seg_image_1h.cfg` failed with "out/kvasir_seg/split.csv:
 * cannot open", a path only the config's comments said how to make). Without it, each refuses
 * before any work and says how to give it. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "nn/base/base.h"
#include "tests/test_util.h"

int cmd_train(int argc, char **argv);

Test(train_configs, paper_configs_ask_for_data_manifest) {
    const char *dir = test_tmpdir();
    char outset[256];
    snprintf(outset, sizeof outset, "out.dir=%s/run", dir);
    const char *cfgs[][2] = {
        {"image", "configs/kvasir_seg_image_1h.cfg"}, {"image", "configs/kvasir_seg_image.cfg"},
        {"image", "configs/endofinder_image.cfg"},    {"pgcon", "configs/pgcon.cfg"},
        {"pgcon", "configs/wincon.cfg"},              {"finetune", "configs/pgcon_finetune.cfg"},
        {"finetune", "configs/pgcon_linear.cfg"},
    };
    for (size_t i = 0; i < sizeof cfgs / sizeof *cfgs; i++) {
        cr_assert(access(cfgs[i][1], R_OK) == 0, "%s: run the tests from the repository root", cfgs[i][1]);
        char *argv[] = {"train", (char *)cfgs[i][0], "--config", (char *)cfgs[i][1], "--set", outset, "--quiet", NULL};
        int rc = cmd_train(7, argv);
        cr_expect_eq(rc, ER_INPUT, "%s", cfgs[i][1]);
        cr_expect(strstr(er_msg(), "--set data.manifest="), "%s: %s", cfgs[i][1], er_msg());
    }
}
