/* The per-op profiler (kernels/profile.h): a tiny training step (linear -> GELU -> layernorm ->
 * linear -> mean of squares, clipping, AdamW, zeroed gradients) gives the op counts the op layer
 * issues, per phase; times are non-negative and add up within the wall time around the step;
 * profiling changes no result bit; off, backend_get hands out the real table. */
#include <math.h>
#include <string.h>

#include "kernels/profile.h"
#include "nn/autograd.h"
#include "nn/base/json.h"
#include "nn/ops.h"
#include "nn/optim.h"
#include "tests/test_util.h"

typedef struct {
    tensor *w1, *b1, *g, *beta, *w2, *b2;
    param_list pl;
    optimizer *opt;
    float x[4 * 3];
} tiny;

static void tiny_init(tiny *t) {
    memset(t, 0, sizeof *t);
    t->w1 = tensor_param("fc1.weight", 2, SHAPE(5, 3));
    t->b1 = tensor_param("fc1.bias", 1, SHAPE(5));
    t->g = tensor_param("norm.weight", 1, SHAPE(5));
    t->beta = tensor_param("norm.bias", 1, SHAPE(5));
    t->w2 = tensor_param("fc2.weight", 2, SHAPE(2, 5));
    t->b2 = tensor_param("fc2.bias", 1, SHAPE(2));
    tensor *all[6] = {t->w1, t->b1, t->g, t->beta, t->w2, t->b2};
    float v[16];
    for (int i = 0; i < 6; i++) {
        int64_t n = tensor_numel(all[i]);
        for (int64_t j = 0; j < n; j++) v[j] = (float)sin(1.7 * (i + 1) + 0.9 * j) * 0.7f + (i == 2 ? 1.0f : 0.0f);
        tensor_copy_from_host(all[i], v);
        params_add(&t->pl, all[i]);
    }
    for (int i = 0; i < 12; i++) t->x[i] = (float)cos(0.37 * i) * 1.3f;
    optim_config oc = {.kind = OPTIM_ADAMW, .lr = 1e-2, .weight_decay = 0.05, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8};
    t->opt = optim_new(&oc, &t->pl);
    cr_assert_not_null(t->opt, "%s", er_msg());
}

static void tiny_free(tiny *t) {
    optim_free(t->opt);
    params_free(&t->pl);
}

/* One step; returns the loss. */
static float tiny_step(tiny *t) {
    tensor *x = tensor_from_host(2, SHAPE(4, 3), t->x);
    tensor *h = op_gelu(op_linear(x, t->w1, t->b1));
    h = op_layernorm(h, t->g, t->beta, 1e-5f);
    tensor *y = op_linear(h, t->w2, t->b2);
    tensor *loss = op_mean_all(op_mul(y, y));
    cr_assert_not_null(loss, "%s", er_msg());
    float lv = tensor_item(loss);
    cr_assert_eq(backward(loss), ER_OK, "%s", er_msg());
    nn_step_end();
    optim_clip_grad_norm(t->opt, 0); /* norm only: one sumsq_many call, no scaling */
    cr_assert_eq(optim_step(t->opt), ER_OK);
    optim_zero_grad(t->opt);
    return lv;
}

static int64_t calls_of(const prof_entry *e, int n, int phase, const char *name) {
    for (int i = 0; i < n; i++)
        if (e[i].phase == phase && !strcmp(e[i].name, name)) return e[i].calls;
    return 0;
}

Test(nn_profile, tiny_step_op_counts_per_phase) {
    tiny t;
    tiny_init(&t);
    tiny_step(&t); /* the first step also creates the gradient buffers: count a steady one */
    const int steps = 3;
    prof_start();
    for (int s = 0; s < steps; s++) tiny_step(&t);
    prof_stop();
    prof_entry e[64];
    int n = prof_entries(e, 64);
    cr_assert(n > 0 && n <= 64, "%d rows", n);
    for (int i = 0; i < n; i++) cr_log_info("%-10s %-24s %lld", prof_phase_name(e[i].phase), e[i].name, (long long)e[i].calls);
    /* what the op layer issues for this graph, per step (nn/ops_*.c) */
    const struct { int phase; const char *name; int64_t calls; } want[] = {
        /* two linears = one gemm_ex each (the bias in its epilogue); GELU; layernorm; y * y; mean */
        {PROF_FORWARD, "gemm_ex", 2}, {PROF_FORWARD, "binary.mul", 1},
        {PROF_FORWARD, "unary.gelu", 1}, {PROF_FORWARD, "layernorm", 1}, {PROF_FORWARD, "reduce.mean", 1},
        /* zero-filled because their kernels add: the seed gradient, the gradients of the mean's
         * and the layernorm's inputs (the GELU's is written by unary_backward: a fresh buffer);
         * y * y: one gradient call per side (the first writes); each linear: dX (not for the input
         * x) + dW as gemm_ex products, the bias's gradient riding in dW's (its epilogue: no sum_to
         * call of its own) */
        {PROF_BACKWARD, "fill", 3}, {PROF_BACKWARD, "reduce_backward.mean", 1}, {PROF_BACKWARD, "binary_grad.mul", 2},
        {PROF_BACKWARD, "gemm_ex", 3}, {PROF_BACKWARD, "layernorm_backward", 1},
        {PROF_BACKWARD, "unary_backward.gelu", 1},
        /* one call for all 6 parameters each: clipping's norm, AdamW, zeroing the gradients */
        {PROF_OPTIMIZER, "sumsq_many", 1}, {PROF_OPTIMIZER, "adamw_many", 1}, {PROF_OPTIMIZER, "fill_many", 1},
    };
    int64_t total_want = 0, total_got = 0;
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        cr_expect_eq(calls_of(e, n, want[i].phase, want[i].name), want[i].calls * steps, "%s %s: %lld calls, want %lld",
                     prof_phase_name(want[i].phase), want[i].name, (long long)calls_of(e, n, want[i].phase, want[i].name),
                     (long long)(want[i].calls * steps));
        total_want += want[i].calls * steps;
    }
    for (int i = 0; i < n; i++) total_got += e[i].calls;
    cr_expect_eq(total_got, total_want, "no other kernel call: %lld calls, want %lld", (long long)total_got, (long long)total_want);
    tiny_free(&t);
}

Test(nn_profile, times_add_up_within_the_measured_wall_time) {
    tiny t;
    tiny_init(&t);
    tiny_step(&t);
    double t0 = now_seconds();
    prof_start();
    for (int s = 0; s < 3; s++) tiny_step(&t);
    prof_stop();
    double wall = now_seconds() - t0;
    prof_entry e[64];
    int n = prof_entries(e, 64);
    double kern[PROF_PHASES] = {0}, phases = 0;
    for (int i = 0; i < n; i++) {
        cr_expect(e[i].seconds >= 0, "%s: %g s", e[i].name, e[i].seconds);
        kern[e[i].phase] += e[i].seconds;
    }
    for (int p = 0; p < PROF_PHASES; p++) {
        cr_expect(prof_phase_seconds(p) >= 0);
        cr_expect(kern[p] <= prof_phase_seconds(p) + 1e-9, "%s: kernels %g s > phase %g s", prof_phase_name(p), kern[p],
                  prof_phase_seconds(p));
        phases += prof_phase_seconds(p);
    }
    cr_expect(phases <= wall + 1e-9, "phases %g s > wall %g s", phases, wall);
    cr_expect(phases > 0.5 * wall, "phases %g s cover too little of the wall %g s", phases, wall);
    cr_expect(kern[PROF_FORWARD] > 0 && kern[PROF_BACKWARD] > 0 && kern[PROF_OPTIMIZER] > 0);
    tiny_free(&t);
}

Test(nn_profile, results_bit_identical_with_the_profiler_on) {
    tiny a, b;
    tiny_init(&a);
    tiny_init(&b);
    for (int s = 0; s < 4; s++) {
        float la = tiny_step(&a);
        prof_start();
        float lb = tiny_step(&b);
        prof_stop();
        cr_assert(!memcmp(&la, &lb, sizeof la), "step %d: loss %.9g vs %.9g", s, la, lb);
    }
    int64_t na, nb;
    float *pa = params_snapshot(&a.pl, &na), *pb = params_snapshot(&b.pl, &nb);
    cr_assert_eq(na, nb);
    cr_expect(!memcmp(pa, pb, (size_t)na * sizeof(float)), "parameters differ after profiled steps");
    free(pa);
    free(pb);
    tiny_free(&a);
    tiny_free(&b);
}

Test(nn_profile, off_is_the_real_table_on_is_a_wrapper) {
    cr_expect_eq(backend_get(DEV_CPU), &backend_cpu, "profiling off: the real table");
    prof_start();
    const er_backend *w = backend_get(DEV_CPU);
    cr_expect_neq(w, &backend_cpu);
    cr_expect_eq(w->device, DEV_CPU);
    cr_expect_eq((void *)w->alloc, (void *)backend_cpu.alloc, "storage is the real table's");
    cr_expect_eq((void *)w->attention_workspace, (void *)backend_cpu.attention_workspace, "workspace sizes untimed");
    cr_expect_neq((void *)w->gemm_batched, (void *)backend_cpu.gemm_batched);
    cr_expect_eq(prof_phase(PROF_DATA), PROF_FORWARD);
    cr_expect_eq(prof_phase(PROF_FORWARD), PROF_DATA);
    float y[8];
    w->fill(y, 8, 2.0f);
    cr_expect_eq(y[7], 2.0f, "the wrapper calls the kernel");
    prof_stop();
    cr_expect_eq(backend_get(DEV_CPU), &backend_cpu);
    cr_expect_eq(prof_phase(PROF_BACKWARD), PROF_FORWARD, "off: phases do not change");
    prof_entry e[4];
    int n = prof_entries(e, 4);
    backend_get(DEV_CPU)->fill(y, 8, 1.0f);
    cr_expect_eq(prof_entries(e, 4), n, "off: nothing counted");
    cr_expect_eq(n, 1);
    cr_expect_str_eq(e[0].name, "fill");
}

Test(nn_profile, report_json_parses_and_covers_the_step) {
    tiny t;
    tiny_init(&t);
    tiny_step(&t);
    prof_start();
    tiny_step(&t);
    prof_stop();
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    prof_report(f, 1, 0, 1);
    fclose(f);
    json_value v;
    cr_assert_eq(json_parse(buf, len, "profile", &v), ER_OK, "%s\n%s", er_msg(), buf);
    const json_value *p = json_get(&v, "profile"), *ph = json_get(p, "phases"), *cat = json_get(p, "categories");
    cr_assert(p && ph && cat && ph->type == JSON_ARRAY && cat->type == JSON_ARRAY, "%s", buf);
    cr_expect_eq(ph->n, 3, "forward, backward, optimizer: %s", buf);
    double share = 0;
    for (int i = 0; i < cat->n; i++) share += json_get(&cat->items[i], "share")->number;
    cr_expect(fabs(share - 1.0) < 1e-3, "category shares add up to the step: %g", share);
    json_free(&v);
    free(buf);
    /* the text form names the categories */
    f = open_memstream(&buf, &len);
    prof_report(f, 1, 0, 0);
    fclose(f);
    cr_expect(strstr(buf, "gemm") && strstr(buf, "normalisation") && strstr(buf, "unary.gelu"), "%s", buf);
    free(buf);
    tiny_free(&t);
}
