/* The progress line's loss and its parts describe the same thing: the current optimizer step
 * (issue 19 defect 6; before, the loss was a window average beside the last step's parts). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nn/base/base.h"
#include "nn/ops.h"
#include "tests/test_util.h"
#include "train/loop.h"

typedef struct { tensor *w, *g; param_list pl; } line_toy;

/* loss = w * (step + 1): a different value every step, so an average differs from the last one */
static tensor *line_toy_step(void *self, int64_t step, int micro, loss_terms *terms) {
    line_toy *t = self;
    t->g->data[0] = (float)(step + 1);
    tensor *l = op_sum_all(op_mul(t->w, t->g));
    loss_terms_set(terms, "part", tensor_item(l));
    return l;
}

Test(train_progress, loss_is_the_sum_of_the_parts_shown) {
    line_toy t = {0};
    t.w = tensor_param("w", 1, SHAPE(1));
    t.w->data[0] = 1.0f;
    params_add(&t.pl, t.w);
    t.g = tensor_new(1, SHAPE(1));
    train_objective o = {.name = "toy", .self = &t, .params = &t.pl, .steps_per_epoch = 100, .images_per_step = 1,
                         .step = line_toy_step};
    train_loop_config c = {.steps = 6, .lr = 1e-3, .min_lr = 1e-3, .optimizer = OPTIM_SGD, .accum = 1, .log_every = 3,
                           .ckpt_every = 1000, .progress = 1, .out_dir = test_tmpdir(), .config_text = "test"};
    char *path = path_join(test_tmpdir(), "stderr.txt");
    fflush(stderr);
    int saved = dup(2), fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
    dup2(fd, 2);
    close(fd);
    int rc = train_loop_run(&c, &o);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    cr_assert_eq(rc, ER_OK, "%s", er_msg());
    char *text;
    size_t len;
    cr_assert_eq(read_file(path, &text, &len), ER_OK);
    int lines = 0;
    for (const char *s = strstr(text, "step "); s; s = strstr(s + 1, "\nstep ")) {
        const char *l = strstr(s, "loss "), *p = strstr(s, "part ");
        cr_assert(l && p, "%s", text);
        double loss = atof(l + 5), part = atof(p + 5);
        cr_expect_float_eq(loss, part, 1e-4, "progress line: loss %g but its only part %g\n%s", loss, part, text);
        lines++;
    }
    cr_assert_eq(lines, 2, "%s", text);
    free(text);
    free(path);
    params_free(&t.pl);
    tensor_free(t.g);
}
