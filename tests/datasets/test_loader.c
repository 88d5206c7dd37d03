/* test_loader.c — threaded loader: determinism across thread counts, layouts, errors. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "datasets/loader.h"
#include "datasets/manifest.h"
#include "datasets/synth.h"
#include "nn/base/base.h"
#include "tests/test_util.h"

static char *make_dataset(int scenes, int views) {
    const char *root = test_tmpdir();
    synth_config c = {scenes, views, 40, 5, 0, 1};
    cr_assert_eq(synth_write_dataset(root, &c), ER_OK, "%s", er_msg());
    return path_join(root, "manifest.csv");
}

/* All batches of one epoch, concatenated. */
static float *run_epoch(const manifest *m, loader_config cfg, int epoch, size_t *n_floats, int *nbatches) {
    loader *L;
    cr_assert_eq(loader_open(&L, m, &cfg), ER_OK, "%s", er_msg());
    loader_start_epoch(L, epoch);
    float *all = NULL;
    size_t n = 0;
    const loader_batch *b;
    int nb = 0;
    while (loader_next(L, &b) == ER_OK && b) {
        size_t k = (size_t)b->n_images * 3 * b->size * b->size;
        all = xrealloc(all, sizeof(float) * (n + k + b->n_images));
        memcpy(all + n, b->images, sizeof(float) * k);
        for (int i = 0; i < b->n_images; i++) all[n + k + i] = (float)b->rows[i];
        n += k + b->n_images;
        nb++;
    }
    loader_close(L);
    *n_floats = n;
    *nbatches = nb;
    return all;
}

Test(datasets_loader, same_bytes_for_any_thread_count) {
    SLOW_TEST();
    char *mp = make_dataset(10, 2);
    manifest m;
    cr_assert_eq(manifest_load(mp, &m), ER_OK);
    loader_config cfg = loader_defaults();
    cfg.batch = 6, cfg.size = 32, cfg.copies = 2, cfg.aug = LOADER_AUG_SSCD, cfg.with_masks = 1, cfg.seed = 3;
    size_t n1, n2, n3;
    int b1, b2, b3;
    cfg.threads = 1, cfg.prefetch = 1;
    float *a = run_epoch(&m, cfg, 1, &n1, &b1);
    cfg.threads = 4, cfg.prefetch = 3;
    float *b = run_epoch(&m, cfg, 1, &n2, &b2);
    cr_assert_eq(n1, n2);
    cr_assert_eq(b1, 4); /* 20 images, batch 6, keep the last partial batch */
    cr_assert_eq(memcmp(a, b, sizeof(float) * n1), 0, "thread count changed the batches");
    float *c = run_epoch(&m, cfg, 2, &n3, &b3); /* another epoch: another order/augmentation */
    cr_assert_neq(memcmp(a, c, sizeof(float) * n1), 0);
    free(a), free(b), free(c);
    manifest_free(&m);
    free(mp);
}

Test(datasets_loader, drop_last_scenes_triplets) {
    char *mp = make_dataset(6, 3);
    manifest m;
    cr_assert_eq(manifest_load(mp, &m), ER_OK);
    int *sid, ns;
    char **names;
    manifest_field_ids(&m, MF_SCENE, &sid, &names, &ns);
    loader_config cfg = loader_defaults();
    cfg.size = 16, cfg.threads = 2, cfg.batch = 4, cfg.drop_last = 1;
    loader *L;
    cr_assert_eq(loader_open(&L, &m, &cfg), ER_OK);
    loader_start_epoch(L, 0);
    cr_assert_eq(loader_num_batches(L), 4); /* 18 rows / 4, last 2 dropped */
    const loader_batch *b;
    int nb = 0, seen[18] = {0};
    while (loader_next(L, &b) == ER_OK && b) {
        cr_assert_eq(b->n_images, 4);
        for (int i = 0; i < 4; i++) seen[b->rows[i]]++;
        nb++;
    }
    cr_assert_eq(nb, 4);
    int distinct = 0;
    for (int i = 0; i < 18; i++) {
        cr_assert_leq(seen[i], 1);
        distinct += seen[i];
    }
    cr_assert_eq(distinct, 16);
    loader_close(L);
    /* scene batches: every item holds 3 views of one scene */
    cfg.grouping = LOADER_SCENES, cfg.batch = 2, cfg.drop_last = 0;
    cr_assert_eq(loader_open(&L, &m, &cfg), ER_OK);
    loader_start_epoch(L, 0);
    while (loader_next(L, &b) == ER_OK && b) {
        cr_assert_eq(b->per_item, 3);
        for (int it = 0; it < b->items; it++) {
            int s0 = b->scenes[it * 3];
            int v[3];
            for (int k = 0; k < 3; k++) {
                cr_assert_eq(b->scenes[it * 3 + k], s0);
                v[k] = b->rows[it * 3 + k];
            }
            cr_assert(v[0] != v[1] && v[1] != v[2] && v[0] != v[2], "three different views");
        }
    }
    loader_close(L);
    /* triplets: positive shares the scene, negative does not */
    cfg.grouping = LOADER_TRIPLETS, cfg.batch = 5;
    cr_assert_eq(loader_open(&L, &m, &cfg), ER_OK);
    loader_start_epoch(L, 3);
    int items = 0;
    while (loader_next(L, &b) == ER_OK && b) {
        for (int it = 0; it < b->items; it++) {
            int a = b->rows[it * 3], p = b->rows[it * 3 + 1], n = b->rows[it * 3 + 2];
            cr_assert(a != p);
            cr_assert_eq(sid[a], sid[p]);
            cr_assert_neq(sid[a], sid[n]);
        }
        items += b->items;
    }
    cr_assert_eq(items, 18);
    loader_close(L);
    manifest_free_labels(sid, names, ns);
    manifest_free(&m);
    free(mp);
}

Test(datasets_loader, corrupt_file_reported_by_name) {
    char *mp = make_dataset(3, 2);
    manifest m;
    cr_assert_eq(manifest_load(mp, &m), ER_OK);
    char *victim = manifest_image_path(&m, 4);
    cr_assert_eq(truncate(victim, 50), 0);
    loader_config cfg = loader_defaults();
    cfg.size = 16, cfg.batch = 2, cfg.threads = 2, cfg.shuffle = 0;
    loader *L;
    cr_assert_eq(loader_open(&L, &m, &cfg), ER_OK);
    loader_start_epoch(L, 0);
    const loader_batch *b;
    int rc;
    while ((rc = loader_next(L, &b)) == ER_OK && b) {}
    cr_assert_eq(rc, ER_INPUT);
    cr_assert(strstr(er_msg(), m.rows[4].path), "%s", er_msg());
    loader_close(L);
    /* bad config */
    cfg.batch = 0;
    cr_assert_eq(loader_open(&L, &m, &cfg), ER_INPUT);
    cfg.batch = 2, cfg.split = "nosuchsplit";
    cr_assert_eq(loader_open(&L, &m, &cfg), ER_INPUT);
    free(victim);
    manifest_free(&m);
    free(mp);
}
