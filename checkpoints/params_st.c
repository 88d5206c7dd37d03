/* params_st.c — a param_list <-> safetensors (load by name with shape checks; add for writing). */
#include "checkpoints/params_st.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "nn/base/base.h"

/* Index of the first NaN or Inf, or -1: weights holding one would give NaN descriptors silently. */
static int64_t first_non_finite(const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return i;
    return -1;
}

int params_load_st(const param_list *pl, const st_file *f, const char *prefix, int strict) {
    for (int i = 0; i < pl->n; i++) {
        tensor *t = pl->t[i];
        char name[512];
        snprintf(name, sizeof name, "%s%s", prefix, t->name);
        const st_tensor *s = st_find(f, name);
        if (!s) {
            if (strict) return er_fail(ER_INPUT, "%s: tensor '%s' missing", f->path, name);
            continue;
        }
        if (s->numel != tensor_numel(t))
            goto shape_err;
        /* shapes must agree up to leading 1s (timm [1,1,D] tokens vs ours are equal anyway) */
        {
            int64_t a[ST_MAX_DIMS], b[T_MAX_DIMS];
            int na = 0, nb = 0;
            for (int d = 0; d < s->ndim; d++) if (s->shape[d] != 1) a[na++] = s->shape[d];
            for (int d = 0; d < t->ndim; d++) if (t->shape[d] != 1) b[nb++] = t->shape[d];
            if (na != nb) goto shape_err;
            for (int d = 0; d < na; d++) if (a[d] != b[d]) goto shape_err;
        }
        {
            float *buf = xmalloc(tensor_numel(t) * sizeof(float));
            int rc = st_read_f32(f, name, buf, tensor_numel(t));
            int64_t bad = rc ? -1 : first_non_finite(buf, tensor_numel(t));
            if (bad >= 0)
                rc = er_fail(ER_INPUT, "%s: tensor '%s' holds a non-finite value (%g at element %lld)", f->path, name,
                             buf[bad], (long long)bad);
            if (!rc && t->dtype == DT_BF16 && s->dtype == ST_BF16) tensor_copy_from_host_raw(t, f->data + s->offset); /* the bits */
            else if (!rc) tensor_copy_from_host(t, buf); /* converted to t's dtype (kernels/dtype.h) */
            free(buf);
            if (rc) return rc;
        }
        continue;
    shape_err: {
            char sb[128];
            return er_fail(ER_INPUT, "%s: tensor '%s' has %lld elements, model expects shape %s", f->path, name,
                           (long long)s->numel, tensor_shape_str(t, sb, sizeof sb));
        }
    }
    return ER_OK;
}

void *params_add_st(const param_list *pl, st_writer *w, const char *prefix) {
    size_t off_dev = 0;
    for (int i = 0; i < pl->n; i++)
        if (pl->t[i]->device != DEV_CPU || !tensor_is_contiguous(pl->t[i]))
            off_dev += (size_t)tensor_numel(pl->t[i]) * tensor_elsize(pl->t[i]);
    char *host = off_dev ? xmalloc(off_dev) : NULL, *h = host;
    for (int i = 0; i < pl->n; i++) {
        tensor *t = pl->t[i];
        char name[512];
        snprintf(name, sizeof name, "%s%s", prefix, t->name);
        const void *data = t->raw;
        if (t->device != DEV_CPU || !tensor_is_contiguous(t)) { /* download through the backend */
            tensor_to_host_raw(t, h);
            data = h;
            h += (size_t)tensor_numel(t) * tensor_elsize(t);
        }
        st_add(w, name, t->dtype == DT_BF16 ? ST_BF16 : ST_F32, t->ndim, t->shape, data);
    }
    return host;
}
