/* seq_desc.c — see seq_desc.h. */
#include "cli/seq_desc.h"

#include <stdlib.h>
#include <string.h>

#include "datasets/manifest.h"
#include "infer/eval/seq_folds.h"
#include "nn/base/base.h"

void seq_desc_free(seq_desc *d) {
    for (int f = 0; f < d->nf; f++) emb_free(&d->es[f]);
    free(d->es), free(d->fold);
    memset(d, 0, sizeof *d);
}

int seq_desc_load(const char *list, const char *folds, int only, const char *what, int by_scene, seq_desc *d) {
    memset(d, 0, sizeof *d);
    char *copy = xstrdup(list), *save = NULL;
    int rc = ER_OK, cap = 1;
    for (const char *c = list; *c; c++) cap += *c == ',';
    d->es = xcalloc((size_t)cap, sizeof *d->es);
    for (char *t = strtok_r(copy, ",", &save); t && !rc; t = strtok_r(NULL, ",", &save)) rc = emb_load_arg(t, what, &d->es[d->nf++]);
    free(copy);
    if (!rc && d->nf > 1 && !folds)
        rc = er_fail(ER_INPUT, "%s '%s': a list of %d files is one file per fold: give --folds (data split --by scene --folds K)", what, list, d->nf);
    if (!rc && only >= 0 && !folds) rc = er_fail(ER_INPUT, "--fold %d needs --folds (the manifest of the folds)", only);
    if (!rc && folds) {
        manifest m;
        int K = 0;
        if (!(rc = manifest_load(folds, &m))) {
            d->fold = xmalloc(sizeof *d->fold * (size_t)(d->es[0].n ? d->es[0].n : 1));
            rc = by_scene ? seq_fold_of_scenes(&d->es[0], &m, d->fold, &K) : seq_fold_of_rows(&d->es[0], &m, d->fold, &K);
            if (rc) rc = er_fail(rc, "--folds %s: %s", folds, er_msg());
            manifest_free(&m);
        }
        if (!rc && only >= K) rc = er_fail(ER_INPUT, "--fold %d: %s has folds 0..%d", only, folds, K - 1);
        else if (!rc && only >= 0 && d->nf > 1)
            rc = er_fail(ER_INPUT, "%s '%s': with --fold %d give one file (the encoder that held out fold %d)", what, list, only, only);
        else if (!rc && d->nf > 1 && d->nf != K)
            rc = er_fail(ER_INPUT, "%s '%s': %d files for the %d folds of %s (one per fold, fold 0 first)", what, list, d->nf, K, folds);
    }
    if (rc) seq_desc_free(d);
    return rc;
}
