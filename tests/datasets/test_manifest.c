/* Manifest CSV: columns in any order, quoting, CRLF, errors with line and column. */
#include "tests/test_util.h"
#include "datasets/manifest.h"
#include "nn/base/base.h"

#include <string.h>

static int load_text(const char *text, manifest *m, char **pathout) {
    char *path = path_join(test_tmpdir(), "m.csv");
    write_file_atomic(path, text, strlen(text));
    int rc = manifest_load(path, m);
    if (pathout) *pathout = path; else free(path);
    return rc;
}

Test(manifest, parses_columns_quotes_crlf_and_resolves_paths) {
    manifest m;
    char *path;
    const char *text = "split,path,label,patient,scene\r\n"
                       "train,img/a.png,adenoma,x,s1\r\n"
                       "test,\"img/b, with comma.png\",\"say \"\"hi\"\"\",,s2\r\n"
                       "\r\n"
                       "val,/abs/c.png,,y,\r\n";
    cr_assert_eq(load_text(text, &m, &path), ER_OK, "%s", er_msg());
    cr_assert_eq(m.n, 3);
    cr_expect_str_eq(m.rows[1].path, "img/b, with comma.png");
    cr_expect_str_eq(m.rows[1].label, "say \"hi\"");
    cr_expect_str_eq(m.rows[0].split, "train");
    cr_expect_null(m.rows[2].label);
    cr_expect_null(m.rows[2].scene);
    cr_expect_null(m.rows[0].mask);
    char *p0 = manifest_image_path(&m, 0), *p2 = manifest_image_path(&m, 2);
    char *dir = path_dirname(path);
    char *want = path_join(dir, "img/a.png");
    cr_expect_str_eq(p0, want);
    cr_expect_str_eq(p2, "/abs/c.png");
    int *ids; char **names; int nl;
    manifest_label_ids(&m, &ids, &names, &nl);
    cr_expect_eq(nl, 2);
    cr_expect_str_eq(names[0], "adenoma");
    cr_expect_eq(ids[0], 0);
    cr_expect_eq(ids[1], 1);
    cr_expect_eq(ids[2], -1);
    manifest_free_labels(ids, names, nl);
    /* save and reload: identical rows */
    char *out = path_join(dir, "out.csv");
    cr_assert_eq(manifest_save(out, &m), ER_OK);
    manifest m2;
    cr_assert_eq(manifest_load(out, &m2), ER_OK, "%s", er_msg());
    cr_assert_eq(m2.n, 3);
    cr_expect_str_eq(m2.rows[1].path, m.rows[1].path);
    cr_expect_str_eq(m2.rows[1].label, m.rows[1].label);
    manifest_free(&m2);
    manifest_free(&m);
    free(p0); free(p2); free(dir); free(want); free(out); free(path);
}

Test(manifest, errors_name_line_and_column) {
    manifest m;
    cr_expect_eq(load_text("label,split\nx,y\n", &m, NULL), ER_INPUT);
    cr_expect(strstr(er_msg(), "'path'") != NULL, "%s", er_msg());
    cr_expect_eq(load_text("path,label\na.png,x\nb.png\n", &m, NULL), ER_INPUT);
    cr_expect(strstr(er_msg(), "line 3") != NULL, "%s", er_msg());
    cr_expect_eq(load_text("path,label\na.png,\"unterminated\n", &m, NULL), ER_INPUT);
    cr_expect(strstr(er_msg(), "line 2") != NULL, "%s", er_msg());
    cr_expect_eq(load_text("path,label\na.png,x\"y\n", &m, NULL), ER_INPUT);
    cr_expect(strstr(er_msg(), "column 2") != NULL, "%s", er_msg());
    cr_expect_eq(load_text("path,label\n,x\n", &m, NULL), ER_INPUT);
    cr_expect(strstr(er_msg(), "empty path") != NULL, "%s", er_msg());
    cr_expect_eq(load_text("", &m, NULL), ER_INPUT);
    cr_expect_eq(load_text("path,path\na,b\n", &m, NULL), ER_INPUT);
    cr_expect_eq(manifest_load("/nonexistent/manifest.csv", &m), ER_INPUT);
}

Test(manifest, multiline_quoted_field_keeps_line_numbers) {
    manifest m;
    cr_assert_eq(load_text("path,label\n\"a\nb.png\",x\nc.png\n", &m, NULL), ER_INPUT);
    cr_expect(strstr(er_msg(), "line 4") != NULL, "%s", er_msg());
}

/* A case's views: each scene's paths joined in row order; rows without a scene belong to none. */
Test(manifest, scene_paths_join_each_scenes_views) {
    const char *d = test_tmpdir();
    char *p = path_join(d, "m.csv");
    const char *csv = "path,scene,view\nb1.png,b,1\na0.png,a,0\nx.png,,\nb0.png,b,0\na1.png,a,1\n";
    cr_assert_eq(write_file_atomic(p, csv, strlen(csv)), 0);
    manifest m;
    cr_assert_eq(manifest_load(p, &m), 0, "%s", er_msg());
    int *of, n;
    char **joined;
    manifest_scene_paths(&m, &of, &joined, &n);
    cr_assert_eq(n, 2);
    char want_a[600], want_b[600];
    snprintf(want_a, sizeof want_a, "%s/a0.png;%s/a1.png", d, d);
    snprintf(want_b, sizeof want_b, "%s/b1.png;%s/b0.png", d, d);
    cr_expect_str_eq(joined[of[1]], want_a);
    cr_expect_str_eq(joined[of[0]], want_b);
    cr_expect_eq(of[2], -1);
    cr_expect_eq(of[1], of[4]);
    manifest_free_labels(of, joined, n);
    manifest_free(&m);
    free(p);
}

/* issue 30 F9: unknown header columns were dropped silently, so "path, label, scene" lost every
 * label and scene (exit 0) while the map reader refused unknown columns. One rule (csv_header):
 * names match ignoring case, spaces are part of the name, anything unknown is refused, named. */
Test(manifest, unknown_or_spaced_header_columns_are_refused) {
    manifest m;
    cr_expect_eq(load_text("path, label, scene\na.png, x, 1\n", &m, NULL), ER_INPUT);
    cr_expect(strstr(er_msg(), "column 2") && strstr(er_msg(), "' label'") && strstr(er_msg(), "spaces"), "%s", er_msg());
    cr_expect_eq(load_text("path,diagnosis\na.png,x\n", &m, NULL), ER_INPUT);
    cr_expect(strstr(er_msg(), "line 1, column 2") && strstr(er_msg(), "'diagnosis'"), "%s", er_msg());
    cr_expect_eq(load_text("path,label,\na.png,x,\n", &m, NULL), ER_INPUT);
    cr_expect(strstr(er_msg(), "column 3") && strstr(er_msg(), "empty column name"), "%s", er_msg());
    cr_expect_eq(load_text("path,label,Label\na.png,x,y\n", &m, NULL), ER_INPUT); /* a repeat, whatever the case */
    cr_assert_eq(load_text("Path,LABEL\na.png,x\n", &m, NULL), ER_OK, "%s", er_msg());
    cr_expect_str_eq(m.rows[0].label, "x");
    manifest_free(&m);
}
