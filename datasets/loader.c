/* loader.c — see loader.h. One job = one source image (decoded once, augmented `copies` times). */
#include "datasets/loader.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "datasets/augment.h"
#include "datasets/image.h"
#include "nn/base/memory.h"
#include "nn/base/base.h"
#include "nn/base/rng.h"

struct loader {
    loader_config cfg;
    const manifest *m;
    int nrows, *rowsel;        /* selected manifest rows */
    char **paths, **mpaths;    /* per manifest row (NULL where not selected / no mask) */
    int *label_id, *scene_id, nlabels, nscenes;
    char **label_names, **scene_names;
    int per_item;
    /* epoch */
    int epoch, n_items, n_batches, *item_rows; /* n_items * per_item manifest rows */
    long total_jobs, next_job;
    int released, handed, next_hand;
    int inflight, stop, error;
    char errmsg[600];
    /* ring */
    int P;
    loader_batch *ring;
    int *ring_done;
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
    pthread_t *th;
};

loader_config loader_defaults(void) {
    loader_config c = {0};
    c.batch = 32, c.size = 224, c.threads = 2, c.prefetch = 2, c.copies = 1, c.shuffle = 1;
    c.aug = LOADER_AUG_EVAL, c.grouping = LOADER_SINGLE;
    return c;
}

static int batch_items(const loader *L, int b) {
    int rest = L->n_items - b * L->cfg.batch;
    return rest < L->cfg.batch ? rest : L->cfg.batch;
}
static int jobs_in_batch(const loader *L, int b) { return batch_items(L, b) * L->per_item; }

/* Read a whole file into a reusable buffer (no allocation once it is large enough). */
static int read_into(const char *path, uint8_t **buf, size_t *cap, size_t *len) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) return er_fail(ER_INPUT, "%s: cannot open: %s", path, strerror(errno));
    off_t sz = lseek(fd, 0, SEEK_END);
    if (sz < 0 || lseek(fd, 0, SEEK_SET) < 0) {
        close(fd);
        return er_fail(ER_INPUT, "%s: cannot seek", path);
    }
    if ((size_t)sz + 1 > *cap) {
        free(*buf);
        *cap = (size_t)sz + 1 + (size_t)sz / 4;
        *buf = xmalloc(*cap);
    }
    size_t got = 0;
    while (got < (size_t)sz) {
        ssize_t r = read(fd, *buf + got, (size_t)sz - got);
        if (r <= 0) {
            close(fd);
            return er_fail(ER_INPUT, "%s: short read", path);
        }
        got += (size_t)r;
    }
    close(fd);
    *len = got;
    return ER_OK;
}

typedef struct {
    uint8_t *fbuf;
    size_t fcap;
    image src, msk, out, mout;
    aug_workspace ws;
} worker_state;

static int decode_file(const loader *L, worker_state *w, const char *path, int channels, image *dst) {
    size_t len = 0;
    int rc = read_into(path, &w->fbuf, &w->fcap, &len);
    if (rc) return rc;
    if (L->cfg.fast_decode && len >= 3 && w->fbuf[0] == 0xFF && w->fbuf[1] == 0xD8)
        return image_decode_jpeg_scaled(w->fbuf, len, path, channels, L->cfg.size, dst);
    return image_decode(w->fbuf, len, path, channels, dst);
}

static int run_job(loader *L, worker_state *w, long j) {
    int per_batch = L->cfg.batch * L->per_item;
    int b = (int)(j / per_batch), slot = (int)(j % per_batch);
    loader_batch *B = &L->ring[b % L->P];
    int row = L->item_rows[j];
    int rc = decode_file(L, w, L->paths[row], 3, &w->src);
    int want_mask = L->cfg.with_masks && L->mpaths[row];
    if (!rc && want_mask) rc = decode_file(L, w, L->mpaths[row], 1, &w->msk);
    if (!rc && want_mask && (w->msk.h != w->src.h || w->msk.w != w->src.w))
        rc = er_fail(ER_INPUT, "%s: mask %dx%d differs from its image %dx%d", L->mpaths[row], w->msk.w, w->msk.h,
                     w->src.w, w->src.h);
    if (rc) return rc;
    int S = L->cfg.size, nimg = jobs_in_batch(L, b);
    size_t plane = (size_t)S * S;
    for (int c = 0; c < L->cfg.copies; c++) {
        uint64_t k = (uint64_t)j * L->cfg.copies + c;
        rng_t r = rng_make(L->cfg.seed, rng_stream(RNG_AUGMENT, (uint32_t)L->epoch, (uint32_t)k));
        const image *mk = want_mask ? &w->msk : NULL;
        image *mo = want_mask ? &w->mout : NULL;
        switch (L->cfg.aug) {
        case LOADER_AUG_SSCD: rc = aug_sscd_advanced(&r, &w->src, mk, S, &w->ws, &w->out, mo); break;
        case LOADER_AUG_SCENE: rc = aug_scene_train(&r, &w->src, S, &w->ws, &w->out); mo = NULL; break;
        case LOADER_AUG_MAE: rc = aug_mae(&r, &w->src, mk, S, &w->ws, &w->out, mo); break;
        default:
            rc = aug_eval(&w->src, S, &w->ws, &w->out);
            if (mk) image_resize(mk, mo, S, S, RESIZE_NEAREST);
            break;
        }
        if (rc) return rc;
        int idx = c * nimg + slot;
        memcpy(B->images + (size_t)idx * 3 * plane, w->out.data, sizeof(float) * 3 * plane);
        if (B->masks) {
            float *dst = B->masks + (size_t)idx * plane;
            if (mo)
                for (size_t i = 0; i < plane; i++) dst[i] = mo->data[i] > 0.5f ? 1.0f : 0.0f;
            else
                memset(dst, 0, sizeof(float) * plane);
        }
        B->rows[idx] = row;
        B->labels[idx] = L->label_id[row];
        B->scenes[idx] = L->scene_id[row];
    }
    return ER_OK;
}

static void *worker_main(void *arg) {
    loader *L = arg;
    worker_state w = {0};
    pthread_mutex_lock(&L->mu);
    for (;;) {
        int per_batch = L->cfg.batch * L->per_item;
        while (!L->stop && !(L->next_job < L->total_jobs && L->next_job / per_batch < L->released + L->P))
            pthread_cond_wait(&L->cv_work, &L->mu);
        if (L->stop) break;
        long j = L->next_job++;
        L->inflight++;
        pthread_mutex_unlock(&L->mu);
        int rc = run_job(L, &w, j);
        pthread_mutex_lock(&L->mu);
        if (rc && !L->error) {
            L->error = rc;
            snprintf(L->errmsg, sizeof L->errmsg, "%s", er_msg());
        }
        int b = (int)(j / per_batch);
        L->ring_done[b % L->P]++;
        L->inflight--;
        pthread_cond_broadcast(&L->cv_done);
    }
    pthread_mutex_unlock(&L->mu);
    free(w.fbuf);
    image_free(&w.src), image_free(&w.msk), image_free(&w.out), image_free(&w.mout);
    aug_workspace_free(&w.ws);
    return NULL;
}

int loader_open(loader **out, const manifest *m, const loader_config *cfg) {
    *out = NULL;
    if (cfg->batch < 1 || cfg->size < 8 || cfg->threads < 1 || cfg->prefetch < 1 || cfg->copies < 1)
        return er_fail(ER_INPUT, "loader: batch, threads, prefetch, copies must be >= 1 and size >= 8");
    if (cfg->batch > 65536 || cfg->size > 4096 || cfg->threads > 1024 || cfg->prefetch > 64 || cfg->copies > 64 ||
        cfg->views > 1024)
        return er_fail(ER_INPUT, "loader: batch %d (at most 65536), size %d (4096), threads %d (1024), prefetch %d (64), "
                       "copies %d (64), views %d (1024): out of range", cfg->batch, cfg->size, cfg->threads,
                       cfg->prefetch, cfg->copies, cfg->views);
    { /* the batches in flight (decoded ahead + the one in use), images and masks: refused before they are allocated */
        mem_estimate e = {0};
        e.data = (cfg->prefetch + 1.0) * cfg->batch * cfg->copies * (cfg->views > 0 ? cfg->views : 1) *
                 (3.0 + (cfg->with_masks ? 1 : 0)) * cfg->size * (double)cfg->size * sizeof(float);
        int rc0 = mem_check(&e, "loader", "the batch, the image size, the copies or the prefetch depth");
        if (rc0) return rc0;
    }
    loader *L = xcalloc(1, sizeof *L);
    L->cfg = *cfg;
    L->m = m;
    L->P = cfg->prefetch;
    manifest_label_ids(m, &L->label_id, &L->label_names, &L->nlabels);
    manifest_field_ids(m, MF_SCENE, &L->scene_id, &L->scene_names, &L->nscenes);
    L->rowsel = xmalloc(sizeof(int) * (m->n ? m->n : 1));
    L->paths = xcalloc(m->n ? m->n : 1, sizeof(char *));
    L->mpaths = xcalloc(m->n ? m->n : 1, sizeof(char *));
    for (int i = 0; i < m->n; i++) {
        if (cfg->split && (!m->rows[i].split || strcmp(m->rows[i].split, cfg->split))) continue;
        L->rowsel[L->nrows++] = i;
        L->paths[i] = manifest_image_path(m, i);
        L->mpaths[i] = manifest_mask_path(m, i);
    }
    int rc = ER_OK;
    if (!L->nrows) rc = er_fail(ER_INPUT, "loader: no rows%s%s in the manifest", cfg->split ? " of split " : "",
                                cfg->split ? cfg->split : "");
    switch (cfg->grouping) {
    case LOADER_SINGLE: L->per_item = 1; break;
    case LOADER_PAIRS: L->per_item = 2; break;
    case LOADER_TRIPLETS: L->per_item = 3; break;
    case LOADER_SCENES: {
        int *cnt = xcalloc(L->nscenes + 1, sizeof(int));
        for (int i = 0; i < L->nrows; i++) {
            int s = L->scene_id[L->rowsel[i]];
            if (s < 0) {
                if (!rc) rc = er_fail(ER_INPUT, "loader: scene batches need a scene for every row (row %d has none)",
                                      L->rowsel[i] + 2);
            } else cnt[s]++;
        }
        int mn = 1 << 30;
        for (int s = 0; s < L->nscenes; s++)
            if (cnt[s] && cnt[s] < mn) mn = cnt[s];
        L->per_item = cfg->views > 0 ? cfg->views : mn;
        free(cnt);
        break;
    }
    }
    if (rc) {
        *out = L;
        loader_close(L);
        *out = NULL;
        return rc;
    }
    /* ring buffers, sized for a full batch */
    int nimg = cfg->batch * L->per_item * cfg->copies;
    size_t plane = (size_t)cfg->size * cfg->size;
    L->ring = xcalloc(L->P, sizeof(loader_batch));
    L->ring_done = xcalloc(L->P, sizeof(int));
    for (int p = 0; p < L->P; p++) {
        loader_batch *B = &L->ring[p];
        B->images = xmalloc_aligned(sizeof(float) * 3 * plane * nimg);
        B->masks = cfg->with_masks ? xmalloc_aligned(sizeof(float) * plane * nimg) : NULL;
        B->rows = xmalloc(sizeof(int) * nimg);
        B->labels = xmalloc(sizeof(int) * nimg);
        B->scenes = xmalloc(sizeof(int) * nimg);
    }
    pthread_mutex_init(&L->mu, NULL);
    pthread_cond_init(&L->cv_work, NULL);
    pthread_cond_init(&L->cv_done, NULL);
    L->handed = -1;
    L->th = xmalloc(sizeof(pthread_t) * cfg->threads);
    for (int t = 0; t < cfg->threads; t++) pthread_create(&L->th[t], NULL, worker_main, L);
    *out = L;
    return ER_OK;
}

int loader_num_batches(const loader *L) { return L->n_batches; }
int loader_num_items(const loader *L) { return L->n_items; }
const char *loader_label_name(const loader *L, int id) {
    return id >= 0 && id < L->nlabels ? L->label_names[id] : "";
}

/* Pick a row != avoid whose key (scene or label) equals / differs from `key`. */
static int pick_row(const loader *L, rng_t *r, const int *key, int k, int same, int avoid) {
    for (int tries = 0; tries < 64; tries++) {
        int row = L->rowsel[rng_below(r, (uint32_t)L->nrows)];
        if (row != avoid && (key[row] == k) == same) return row;
    }
    for (int i = 0; i < L->nrows; i++) { /* exhaustive fallback, deterministic */
        int row = L->rowsel[(i + rng_below(r, (uint32_t)L->nrows)) % L->nrows];
        if (row != avoid && (key[row] == k) == same) return row;
    }
    return avoid; /* none exists: reuse the anchor */
}

/* Build the epoch's item list (under the lock, with no job in flight). */
static void build_items(loader *L) {
    const loader_config *c = &L->cfg;
    free(L->item_rows);
    int P = L->per_item;
    if (c->grouping == LOADER_SCENES) {
        /* rows of each scene, in manifest order */
        int **rows = xcalloc(L->nscenes, sizeof(int *));
        int *cnt = xcalloc(L->nscenes, sizeof(int));
        for (int i = 0; i < L->nrows; i++) cnt[L->scene_id[L->rowsel[i]]]++;
        for (int s = 0; s < L->nscenes; s++) rows[s] = xmalloc(sizeof(int) * (cnt[s] ? cnt[s] : 1)), cnt[s] = 0;
        for (int i = 0; i < L->nrows; i++) {
            int row = L->rowsel[i], s = L->scene_id[row];
            rows[s][cnt[s]++] = row;
        }
        int *order = xmalloc(sizeof(int) * (L->nscenes ? L->nscenes : 1)), n = 0;
        for (int s = 0; s < L->nscenes; s++)
            if (cnt[s]) order[n++] = s;
        if (c->shuffle) {
            rng_t r = rng_make(c->seed, rng_stream(RNG_SHUFFLE, (uint32_t)L->epoch, 0));
            rng_shuffle(&r, order, n);
        }
        L->n_items = n;
        L->item_rows = xmalloc(sizeof(int) * (size_t)(n ? n : 1) * P);
        for (int it = 0; it < n; it++) {
            int s = order[it];
            rng_t r = rng_make(c->seed, rng_stream(RNG_SAMPLING, (uint32_t)L->epoch, (uint32_t)it));
            if (c->shuffle) rng_shuffle(&r, rows[s], cnt[s]);
            for (int v = 0; v < P; v++) L->item_rows[(size_t)it * P + v] = rows[s][v % cnt[s]];
        }
        for (int s = 0; s < L->nscenes; s++) free(rows[s]);
        free(rows), free(cnt), free(order);
    } else {
        int n = L->nrows;
        int *order = xmalloc(sizeof(int) * n);
        memcpy(order, L->rowsel, sizeof(int) * n);
        if (c->shuffle) {
            rng_t r = rng_make(c->seed, rng_stream(RNG_SHUFFLE, (uint32_t)L->epoch, 0));
            rng_shuffle(&r, order, n);
        }
        L->n_items = n;
        L->item_rows = xmalloc(sizeof(int) * (size_t)n * P);
        int use_scene = L->nscenes > 0;
        const int *key = use_scene ? L->scene_id : L->label_id;
        for (int it = 0; it < n; it++) {
            int a = order[it];
            int *dst = L->item_rows + (size_t)it * P;
            dst[0] = a;
            if (P >= 2) {
                rng_t r = rng_make(c->seed, rng_stream(RNG_SAMPLING, (uint32_t)L->epoch, (uint32_t)it));
                dst[1] = pick_row(L, &r, key, key[a], 1, a);
                if (P == 3) dst[2] = pick_row(L, &r, key, key[a], 0, a);
            }
        }
        free(order);
    }
    L->n_batches = c->drop_last ? L->n_items / c->batch : (L->n_items + c->batch - 1) / c->batch;
    L->total_jobs = (long)(c->drop_last ? L->n_batches * c->batch : L->n_items) * P;
}

int loader_start_epoch(loader *L, int epoch) {
    pthread_mutex_lock(&L->mu);
    L->total_jobs = L->next_job; /* no new claims */
    while (L->inflight > 0) pthread_cond_wait(&L->cv_done, &L->mu);
    L->epoch = epoch;
    build_items(L);
    L->next_job = 0, L->released = 0, L->handed = -1, L->next_hand = 0, L->error = 0;
    for (int p = 0; p < L->P; p++) L->ring_done[p] = 0;
    pthread_cond_broadcast(&L->cv_work);
    pthread_mutex_unlock(&L->mu);
    return ER_OK;
}

int loader_next(loader *L, const loader_batch **out) {
    *out = NULL;
    pthread_mutex_lock(&L->mu);
    if (L->handed >= 0) {
        L->ring_done[L->handed % L->P] = 0;
        L->released = L->handed + 1;
        L->handed = -1;
        pthread_cond_broadcast(&L->cv_work);
    }
    if (L->next_hand >= L->n_batches) {
        pthread_mutex_unlock(&L->mu);
        return ER_OK;
    }
    int b = L->next_hand;
    while (L->ring_done[b % L->P] < jobs_in_batch(L, b) && !L->error) pthread_cond_wait(&L->cv_done, &L->mu);
    if (L->error) {
        int rc = L->error;
        char msg[600];
        snprintf(msg, sizeof msg, "%s", L->errmsg);
        pthread_mutex_unlock(&L->mu);
        return er_fail(rc, "%s", msg);
    }
    loader_batch *B = &L->ring[b % L->P];
    B->epoch = L->epoch, B->index = b;
    B->items = batch_items(L, b), B->per_item = L->per_item, B->copies = L->cfg.copies;
    B->n_images = B->items * B->per_item * B->copies, B->size = L->cfg.size;
    L->handed = b;
    L->next_hand++;
    pthread_mutex_unlock(&L->mu);
    *out = B;
    return ER_OK;
}

void loader_close(loader *L) {
    if (!L) return;
    if (L->th) {
        pthread_mutex_lock(&L->mu);
        L->stop = 1;
        pthread_cond_broadcast(&L->cv_work);
        pthread_mutex_unlock(&L->mu);
        for (int t = 0; t < L->cfg.threads; t++) pthread_join(L->th[t], NULL);
        free(L->th);
        pthread_mutex_destroy(&L->mu);
        pthread_cond_destroy(&L->cv_work);
        pthread_cond_destroy(&L->cv_done);
    }
    for (int p = 0; L->ring && p < L->P; p++) {
        loader_batch *B = &L->ring[p];
        free(B->images), free(B->masks), free(B->rows), free(B->labels), free(B->scenes);
    }
    free(L->ring), free(L->ring_done);
    if (L->paths)
        for (int i = 0; i < L->m->n; i++) free(L->paths[i]), free(L->mpaths[i]);
    free(L->paths), free(L->mpaths), free(L->rowsel), free(L->item_rows);
    manifest_free_labels(L->label_id, L->label_names, L->nlabels);
    manifest_free_labels(L->scene_id, L->scene_names, L->nscenes);
    free(L);
}

int loader_bench(const char *path, const loader_config *cfg, int max_batches, double *ips, int *nimg_out) {
    manifest m = {0};
    int rc = manifest_load(path, &m);
    if (rc) return rc;
    loader *L;
    rc = loader_open(&L, &m, cfg);
    if (rc) {
        manifest_free(&m);
        return rc;
    }
    double t0 = now_seconds();
    long nimg = 0;
    int nb = 0;
    loader_start_epoch(L, 0);
    const loader_batch *b;
    while (!(rc = loader_next(L, &b)) && b && (max_batches <= 0 || nb < max_batches)) {
        nimg += b->n_images;
        nb++;
    }
    double dt = now_seconds() - t0;
    loader_close(L);
    manifest_free(&m);
    if (rc) return rc;
    *ips = nimg / dt;
    *nimg_out = (int)nimg;
    return ER_OK;
}
