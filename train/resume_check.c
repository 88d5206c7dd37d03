/* resume_check.c — changed, refused and finished runs before --resume restores anything (resume_check.h). */
#include "train/resume_check.h"

#include <stdlib.h>
#include <string.h>

#include "checkpoints/safetensors.h"
#include "nn/base/base.h"

typedef struct { char **key, **val; int n; } kv_list;

static char *dupn(const char *s, size_t n) {
    char *o = xmalloc(n + 1);
    memcpy(o, s, n);
    o[n] = 0;
    return o;
}

/* "key = value" lines as cfg_write writes them */
static void parse(const char *text, kv_list *l) {
    memset(l, 0, sizeof *l);
    int cap = 0;
    for (const char *s = text; s && *s;) {
        const char *e = strchr(s, '\n');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        const char *eq = memchr(s, '=', len);
        if (eq && eq > s) {
            const char *k1 = eq;
            while (k1 > s && k1[-1] == ' ') k1--;
            const char *v0 = eq + 1;
            if (v0 < s + len && *v0 == ' ') v0++;
            if (l->n == cap) {
                cap = cap ? 2 * cap : 64;
                l->key = xrealloc(l->key, cap * sizeof(char *));
                l->val = xrealloc(l->val, cap * sizeof(char *));
            }
            l->key[l->n] = dupn(s, (size_t)(k1 - s));
            l->val[l->n++] = dupn(v0, (size_t)(s + len - v0));
        }
        s = e ? e + 1 : NULL;
    }
}

static void kv_free(kv_list *l) {
    for (int i = 0; i < l->n; i++) free(l->key[i]), free(l->val[i]);
    free(l->key), free(l->val);
}

static const char *lookup(const kv_list *l, const char *key) {
    for (int i = 0; i < l->n; i++)
        if (!strcmp(l->key[i], key)) return l->val[i];
    return NULL;
}

/* a value for people: doubles in their shortest round-trip form (0.001, not 0.0010000000000000000208) */
static void show(const char *v, char *buf, size_t cap) {
    if (!v) { snprintf(buf, cap, "(absent)"); return; }
    if (!*v) { snprintf(buf, cap, "''"); return; }
    char *end;
    double d = strtod(v, &end);
    if (*end == 0 && strpbrk(v, ".eE")) {
        for (int prec = 1; prec <= 17; prec++) {
            snprintf(buf, cap, "%.*g", prec, d);
            if (strtod(buf, NULL) == d) return;
        }
    }
    snprintf(buf, cap, "%s", v);
}

static int refused_key(const char *key) {
    return !strncmp(key, "model.", 6) || !strncmp(key, "decoder.", 8) || !strcmp(key, "train.optimizer");
}

int resume_check(const char *ckpt, const char *config_text, int64_t total, FILE *warn, int *done, char **changed) {
    *done = 0;
    if (changed) *changed = xstrdup("");
    st_file f;
    int rc = st_open(ckpt, &f);
    if (rc) return rc;
    int64_t step = -1;
    if (st_find(&f, "train.step") && (rc = st_read_i64(&f, "train.step", &step, 1))) { st_close(&f); return rc; }
    const char *old_text = st_meta(&f, "endoret.config");
    kv_list old, cur;
    parse(old_text, &old);
    parse(config_text, &cur);
    if (!old_text && warn)
        fprintf(warn, "--resume: %s stores no config: the keys this run changes cannot be named\n", ckpt);
    /* every key of either config whose value differs */
    char *list = NULL, *refused = NULL;
    size_t llen = 0, rlen = 0;
    FILE *lf = open_memstream(&list, &llen), *rf = open_memstream(&refused, &rlen);
    int nchanged = 0, nrefused = 0;
    for (int pass = 0; old_text && pass < 2; pass++) {
        const kv_list *a = pass ? &old : &cur, *b = pass ? &cur : &old;
        for (int i = 0; i < a->n; i++) {
            const char *key = a->key[i], *va = a->val[i], *vb = lookup(b, key);
            if (pass && vb) continue; /* keys of both were seen in the first pass */
            if (vb && !strcmp(va, vb)) continue;
            const char *was = pass ? va : vb, *now = pass ? NULL : va;
            char sw[96], sn[96];
            show(was, sw, sizeof sw);
            show(now, sn, sizeof sn);
            if (nchanged == 0 && warn)
                fprintf(warn, "--resume: this run's config differs from %s's (it goes on with the new values, no longer "
                              "bit-identical to the uninterrupted run):\n", ckpt);
            if (warn) fprintf(warn, "  %s: %s -> %s\n", key, sw, sn);
            fprintf(lf, "%s%s", nchanged++ ? ", " : "", key);
            if (refused_key(key)) fprintf(rf, "%s%s %s -> %s", nrefused++ ? ", " : "", key, sw, sn);
        }
    }
    fclose(lf), fclose(rf);
    if (nrefused)
        rc = er_fail(ER_INPUT, "--resume %s: cannot continue with %s: the checkpoint holds the weights of the network "
                               "(model.*, decoder.*) and the state of the optimizer (train.optimizer) it trained; start a "
                               "new run to change them", ckpt, refused);
    else if (step >= 0 && total < step)
        rc = er_fail(ER_INPUT, "--resume %s: the checkpoint is at step %lld and this run ends at step %lld (train.steps / "
                               "train.epochs): nothing is left to train, and a run cannot be shortened by resuming",
                     ckpt, (long long)step, (long long)total);
    else if (step >= 0 && total == step) {
        *done = 1;
        if (warn)
            fprintf(warn, "--resume: %s is at step %lld, the last step of this run: nothing is left to train (raise "
                          "train.steps to continue); nothing written\n", ckpt, (long long)step);
    }
    if (changed) {
        free(*changed);
        *changed = list;
    } else free(list);
    free(refused);
    kv_free(&old), kv_free(&cur);
    st_close(&f);
    return rc;
}
