/* Config key ranges: every value is checked where it is given (file:line or --set), naming the key
 * and the value; intervals open and closed, allowed sets, and the declared-range audit. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/base/base.h"
#include "nn/base/config.h"
#include "tests/test_util.h"

static int r_accum, r_warm;
static double r_ratio, r_clip;
static char *r_opt, *r_path;
static int r_flag;
static cfg_spec rspecs[] = {
    {"train.accum", CFG_INT, &r_accum, "micro-batches", "[1, 65536]"},
    {"train.warmup_steps", CFG_INT, &r_warm, "-1 = from epochs", "[-1, inf)"},
    {"mae.mask_ratio", CFG_DOUBLE, &r_ratio, "share removed", "[0, 1)"},
    {"train.clip", CFG_DOUBLE, &r_clip, "max norm", "[0, inf)"},
    {"train.optimizer", CFG_STR, &r_opt, "kind", "adamw|sgd"},
    {"data.manifest", CFG_STR, &r_path, "csv", "path"},
    {"mae.norm_pix", CFG_BOOL, &r_flag, "flag", NULL},
};
enum { NR = sizeof rspecs / sizeof rspecs[0] };

static void expect_bad(const char *kv, const char *needle) {
    cr_assert_eq(cfg_set(kv, "--set", rspecs, NR), ER_INPUT, "%s accepted", kv);
    cr_assert(strstr(er_msg(), "--set"), "'%s' does not say --set", er_msg());
    cr_assert(strstr(er_msg(), needle), "'%s' lacks '%s'", er_msg(), needle);
}

Test(config_ranges, out_of_range_values_are_rejected_with_key_value_and_range) {
    expect_bad("train.accum=0", "'train.accum' = 0 is outside [1, 65536]");
    expect_bad("train.accum=2147483647", "2147483647");
    expect_bad("train.warmup_steps=-5", "'train.warmup_steps' = -5");
    expect_bad("mae.mask_ratio=1", "[0, 1)");
    expect_bad("train.clip=-1", "'train.clip' = -1");
    expect_bad("train.optimizer=lamb", "one of adamw/sgd, got 'lamb'");
    cfg_free_strings(rspecs, NR);
}

Test(config_ranges, in_range_values_pass_including_bounds) {
    cr_assert_eq(cfg_set("train.accum=1", "--set", rspecs, NR), ER_OK, "%s", er_msg());
    cr_assert_eq(cfg_set("train.accum=65536", "--set", rspecs, NR), ER_OK, "%s", er_msg());
    cr_assert_eq(cfg_set("train.warmup_steps=-1", "--set", rspecs, NR), ER_OK, "%s", er_msg());
    cr_assert_eq(cfg_set("mae.mask_ratio=0", "--set", rspecs, NR), ER_OK, "%s", er_msg());
    cr_assert_eq(cfg_set("mae.mask_ratio=0.999", "--set", rspecs, NR), ER_OK, "%s", er_msg());
    cr_assert_eq(cfg_set("train.clip=1e30", "--set", rspecs, NR), ER_OK, "%s", er_msg());
    cr_assert_eq(cfg_set("train.optimizer=sgd", "--set", rspecs, NR), ER_OK, "%s", er_msg());
    cr_assert_eq(cfg_set("data.manifest=any/thing.csv", "--set", rspecs, NR), ER_OK, "%s", er_msg());
    cr_assert_eq(r_accum, 65536);
    cr_assert_str_eq(r_opt, "sgd");
    cfg_free_strings(rspecs, NR);
}

Test(config_ranges, file_errors_name_file_and_line) {
    const char *d = test_tmpdir();
    char *p = path_join(d, "r.cfg");
    const char *text = "[train]\naccum = 2\n\noptimizer = adam\n";
    cr_assert_eq(write_file_atomic(p, text, strlen(text)), 0);
    cr_assert_eq(cfg_load(p, rspecs, NR), ER_INPUT);
    cr_assert(strstr(er_msg(), "r.cfg:4:"), "%s", er_msg());
    cr_assert(strstr(er_msg(), "'train.optimizer'"), "%s", er_msg());
    free(p);
    cfg_free_strings(rspecs, NR);
}

Test(config_ranges, check_validates_values_set_in_code) {
    r_accum = 1; r_warm = -1; r_ratio = 0.5; r_clip = 0;
    cfg_set_str(&r_opt, "adamw");
    cr_assert_eq(cfg_check(rspecs, NR, "defaults"), ER_OK, "%s", er_msg());
    r_ratio = NAN;
    cr_assert_eq(cfg_check(rspecs, NR, "defaults"), ER_INPUT);
    cr_assert(strstr(er_msg(), "defaults: key 'mae.mask_ratio'"), "%s", er_msg());
    r_ratio = 0.5;
    cfg_set_str(&r_opt, "sgdd");
    cr_assert_eq(cfg_check(rspecs, NR, "defaults"), ER_INPUT);
    cfg_free_strings(rspecs, NR);
}

Test(config_ranges, undeclared_or_malformed_ranges_are_found) {
    cr_assert_eq(cfg_check_ranges_declared(rspecs, NR), ER_OK, "%s", er_msg());
    int x;
    cfg_spec none[] = {{"a.b", CFG_INT, &x, "no range", NULL}};
    cr_assert_eq(cfg_check_ranges_declared(none, 1), ER_INPUT);
    cr_assert(strstr(er_msg(), "'a.b'"));
    cfg_spec bad[] = {{"a.c", CFG_INT, &x, "bad", "1..3"}};
    cr_assert_eq(cfg_check_ranges_declared(bad, 1), ER_INPUT);
    cr_assert(strstr(er_msg(), "malformed"));
}
