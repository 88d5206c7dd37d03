/* online_fixture.h — the `serve --model` fixture the online-case tests share: a synthetic dataset of
 * 6 scenes x 4 views (32 px), a tiny ViT image encoder, a scene model over it, a case database of its
 * scenes; and a multipart/form-data body builder. */
#ifndef ENDORET_TEST_ONLINE_FIXTURE_H
#define ENDORET_TEST_ONLINE_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/embed_scene.h"
#include "datasets/synth.h"
#include "infer/retrieval/casedb.h"
#include "nn/base/base.h"
#include "nn/models/scene_model.h"
#include "nn/models/vit_model.h"
#include "tests/test_util.h"

typedef struct { char *dir, *man, *enc, *scene, *db; } online_fx;

static inline void make_online(online_fx *f) {
    f->dir = xstrdup(test_tmpdir());
    synth_config sc = {.scenes = 6, .views = 4, .size = 32, .seed = 5, .threads = 1};
    cr_assert_eq(synth_write_dataset(f->dir, &sc), 0, "%s", er_msg());
    f->man = path_join(f->dir, "manifest.csv");
    f->enc = path_join(f->dir, "enc.safetensors");
    f->scene = path_join(f->dir, "scene.safetensors");
    f->db = path_join(f->dir, "cases.db");
    vit_config c;
    cr_assert_eq(vit_config_preset("vit_tiny", &c), 0);
    c.img = 16; c.patch = 4; c.dim = 32; c.depth = 1; c.heads = 2;
    model *v = vit_model_wrap(vit_new(&c, 7));
    cr_assert_eq(model_save(v, f->enc, -1), 0, "%s", er_msg());
    model_free(v);
    scene_args a;
    scene_args_defaults(&a);
    cfg_set_str(&a.image_encoder, f->enc);
    a.heads = 2; a.dec_dim = 16; a.dec_heads = 2;
    model *m;
    cr_assert_eq(scene_model_new(&a, 3, 0, &m), 0, "%s", er_msg());
    scene_args_free(&a);
    cr_assert_eq(model_save(m, f->scene, -1), 0, "%s", er_msg());
    manifest man;
    cr_assert_eq(manifest_load(f->man, &man), 0);
    int *rows = malloc(man.n * sizeof(int)), sk;
    for (int i = 0; i < man.n; i++) rows[i] = i;
    emb_set e;
    embed_scene_opts so = {.fusion = "transformer", .groups = NULL, .max_views = 8};
    cr_assert_eq(embed_scenes(m, &man, f->man, rows, man.n, &so, &e, &sk), 0, "%s", er_msg());
    cr_assert_eq(casedb_create(f->db, &e, NULL, NULL, NULL, 0, HASH_SIGN, INDEX_SCAN, 1), 0, "%s", er_msg());
    emb_free(&e);
    free(rows);
    manifest_free(&man);
    model_free(m);
}

static inline void free_online(online_fx *f) { free(f->dir); free(f->man); free(f->enc); free(f->scene); free(f->db); }

/* A multipart body of the files (name, bytes) with boundary XyZ. */
static inline char *multipart(int n, char *const *names, char *const *data, const size_t *len, size_t *out_len) {
    size_t cap = 1024;
    for (int i = 0; i < n; i++) cap += len[i] + 256;
    char *b = malloc(cap);
    size_t o = 0;
    for (int i = 0; i < n; i++) {
        o += (size_t)sprintf(b + o, "--XyZ\r\nContent-Disposition: form-data; name=\"views\"; filename=\"%s\"\r\n"
                                    "Content-Type: application/octet-stream\r\n\r\n", names[i]);
        memcpy(b + o, data[i], len[i]);
        o += len[i];
        o += (size_t)sprintf(b + o, "\r\n");
    }
    o += (size_t)sprintf(b + o, "--XyZ--\r\n");
    *out_len = o;
    return b;
}

#endif
