/* A view list (datasets/view_list.h): paths holding ';' or '\' come back as they went in; a list
 * written before the escape (no '\') reads as before. */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "datasets/view_list.h"

Test(view_list, join_then_split_gives_the_paths_back) {
    char *paths[4] = {"/a/x;/etc/secret.png", "b\\c.png", "plain.png", ";"};
    char *list = view_list_join(paths, 4);
    int n;
    char **v = view_list_split(list, &n);
    cr_assert_eq(n, 4, "%s -> %d views", list, n);
    for (int i = 0; i < 4; i++) cr_expect_str_eq(v[i], paths[i]);
    view_list_free(v, n);
    free(list);
}

Test(view_list, an_old_list_reads_as_before) {
    int n;
    char **v = view_list_split("a.png;b.png;;c.png;", &n);
    cr_assert_eq(n, 3);
    cr_expect_str_eq(v[0], "a.png");
    cr_expect_str_eq(v[2], "c.png");
    view_list_free(v, n);
    cr_expect_null(view_list_split(NULL, &n));
    cr_expect_eq(n, 0);
    cr_expect_null(view_list_split("", &n));
}
