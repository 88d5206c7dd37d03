/* The JSON reader on valid and hostile input. */
#include "tests/test_util.h"
#include "nn/base/base.h"
#include "nn/base/json.h"

#include <string.h>

Test(json, parses_values_and_escapes) {
    const char *t = " {\"a\": [1, -2.5e1, true, null], \"s\": \"x\\n\\u00e9\\ud83d\\ude00\", \"o\": {}} ";
    json_value v;
    cr_assert_eq(json_parse(t, strlen(t), "t", &v), ER_OK, "%s", er_msg());
    const json_value *a = json_get(&v, "a");
    cr_assert_not_null(a);
    cr_expect_eq(a->n, 4);
    cr_expect(a->items[0].is_int && a->items[0].integer == 1);
    cr_expect_float_eq(a->items[1].number, -25.0, 0);
    cr_expect_eq(a->items[2].boolean, 1);
    cr_expect_eq(a->items[3].type, JSON_NULL);
    cr_expect_str_eq(json_get(&v, "s")->string, "x\n\xc3\xa9\xf0\x9f\x98\x80");
    cr_expect_eq(json_get(&v, "o")->n, 0);
    json_free(&v);
    char *buf = NULL; size_t cap = 0;
    size_t n = json_escape(&buf, &cap, 0, "q\"\\\n\x01");
    cr_expect_str_eq(buf, "\"q\\\"\\\\\\n\\u0001\"");
    cr_expect_eq(n, strlen(buf));
    free(buf);
}

Test(json, rejects_malformed_and_deep_input) {
    const char *bad[] = {"", "{", "[1,]", "{\"a\" 1}", "\"abc", "tru", "01x", "{\"a\":1} x", "\"\\ud800\"", "[1 2]", "-", "1."};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        json_value v;
        cr_expect_eq(json_parse(bad[i], strlen(bad[i]), "t", &v), ER_INPUT, "accepted: %s", bad[i]);
    }
    char deep[300];
    memset(deep, '[', sizeof deep);
    json_value v;
    cr_expect_eq(json_parse(deep, sizeof deep, "t", &v), ER_INPUT);
    cr_expect(strstr(er_msg(), "deep") != NULL);
}
