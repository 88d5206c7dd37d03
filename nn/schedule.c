/* schedule.c — warm-up + cosine lr and layer-wise lr decay; see schedule.h. */
#include "nn/schedule.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* torch.optim.lr_scheduler.CosineAnnealingWarmRestarts at t (steps past the warm-up). */
static double restarts_at(const lr_schedule *s, double t) {
    double T0 = s->restart_steps, m = s->restart_mult, Ti = T0, tcur = t;
    if (t >= T0) {
        if (m == 1) tcur = fmod(t, T0);
        else {
            int n = (int)floor(log(t / T0 * (m - 1) + 1) / log(m));
            tcur = t - T0 * (pow(m, n) - 1) / (m - 1);
            Ti = T0 * pow(m, n);
            if (tcur < 0) tcur += (Ti /= m); /* log rounding just below a restart */
            else if (tcur >= Ti) tcur -= Ti, Ti *= m;
        }
    }
    return s->min_lr + (s->base_lr - s->min_lr) * 0.5 * (1.0 + cos(M_PI * tcur / Ti));
}

double lr_at(const lr_schedule *s, int64_t step) {
    if (step < 0) step = 0;
    if (step < s->warmup_steps) return s->base_lr * (double)step / (double)s->warmup_steps;
    if (s->restart_steps > 0) return restarts_at(s, (double)(step - s->warmup_steps));
    int64_t span = s->total_steps - s->warmup_steps;
    if (span <= 0 || step >= s->total_steps) return s->min_lr;
    double progress = (double)(step - s->warmup_steps) / (double)span;
    return s->min_lr + (s->base_lr - s->min_lr) * 0.5 * (1.0 + cos(M_PI * progress));
}

/* The component of a dotted name that starts at `p`, compared with `word`. */
static int component_is(const char *p, const char *word) {
    size_t n = strlen(word);
    return strncmp(p, word, n) == 0 && (p[n] == '\0' || p[n] == '.');
}

int vit_layer_id(const char *name, int depth) {
    const int num_layers = depth + 1;
    static const char *const stem[] = {"cls_token", "pos_embed", "patch_embed", "reg_token",
                                       "register_tokens", "mask_token", "dist_token"};
    /* Walk the dotted components; the first one that names a stem or "blocks.<i>" decides. */
    for (const char *p = name; p && *p; p = strchr(p, '.') ? strchr(p, '.') + 1 : NULL) {
        for (size_t k = 0; k < sizeof stem / sizeof stem[0]; k++)
            if (component_is(p, stem[k])) return 0;
        if (component_is(p, "blocks") && isdigit((unsigned char)p[7])) {
            long i = strtol(p + 7, NULL, 10);
            return i + 1 < num_layers ? (int)(i + 1) : num_layers;
        }
    }
    return num_layers;
}

double layer_decay_scale(const char *name, int depth, double decay) {
    return pow(decay, (double)(depth + 1 - vit_layer_id(name, depth)));
}
