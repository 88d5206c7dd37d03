/* The embedding file: round trip with optional columns, and bad files rejected. */
#include "tests/test_util.h"
#include "checkpoints/safetensors.h"
#include "infer/retrieval/embeddings.h"
#include "nn/base/base.h"

#include <math.h>
#include <string.h>

Test(embeddings, round_trip_with_labels_and_names) {
    emb_set e;
    emb_alloc(&e, 5, 3);
    for (int i = 0; i < 15; i++) e.x[i] = (float)i * 0.5f - 3;
    e.labels = xmalloc(sizeof(int64_t) * 5);
    for (int i = 0; i < 5; i++) { e.ids[i] = 100 + i; e.labels[i] = i % 2 ? 1 : (i == 4 ? -1 : 0); }
    e.nlabel_names = 2;
    e.label_names = xmalloc(sizeof(char *) * 2);
    e.label_names[0] = xstrdup("adenoma");
    e.label_names[1] = xstrdup("hyperplastic");
    e.model = xstrdup("vit_tiny mae+sscd");
    char *path = path_join(test_tmpdir(), "e.safetensors");
    cr_assert_eq(emb_save(path, &e), ER_OK, "%s", er_msg());
    emb_set b;
    cr_assert_eq(emb_load(path, &b), ER_OK, "%s", er_msg());
    cr_expect_eq(b.n, 5);
    cr_expect_eq(b.dim, 3);
    cr_expect_arr_eq(b.x, e.x, sizeof(float) * 15);
    cr_expect_arr_eq(b.ids, e.ids, sizeof(int64_t) * 5);
    cr_expect_arr_eq(b.labels, e.labels, sizeof(int64_t) * 5);
    cr_assert_eq(b.nlabel_names, 2);
    cr_expect_str_eq(b.label_names[1], "hyperplastic");
    cr_expect_str_eq(b.model, "vit_tiny mae+sscd");
    cr_expect_null(b.scene);
    emb_free(&b);
    emb_free(&e);
    free(path);
}

Test(embeddings, rejects_nan_and_wrong_shapes) {
    char *path = path_join(test_tmpdir(), "bad.safetensors");
    float x[4] = {1, NAN, 0, 0};
    int64_t s2[2] = {2, 2}, s3[1] = {3};
    int64_t ids[3] = {0, 1, 2};
    st_writer *w = st_writer_new();
    st_add(w, "embeddings", ST_F32, 2, s2, x);
    cr_assert_eq(st_write(w, path), ER_OK);
    st_writer_free(w);
    emb_set e;
    cr_expect_eq(emb_load(path, &e), ER_INPUT);
    cr_expect(strstr(er_msg(), "non-finite") != NULL, "%s", er_msg());
    x[1] = 2;
    w = st_writer_new();
    st_add(w, "embeddings", ST_F32, 2, s2, x);
    st_add(w, "ids", ST_I64, 1, s3, ids);
    cr_assert_eq(st_write(w, path), ER_OK);
    st_writer_free(w);
    cr_expect_eq(emb_load(path, &e), ER_INPUT);
    cr_expect(strstr(er_msg(), "ids") != NULL, "%s", er_msg());
    w = st_writer_new();
    st_add(w, "weights", ST_F32, 2, s2, x);
    cr_assert_eq(st_write(w, path), ER_OK);
    st_writer_free(w);
    cr_expect_eq(emb_load(path, &e), ER_INPUT);
    free(path);
}
