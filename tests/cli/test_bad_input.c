/* Hostile and careless input at the command level (issue 17): each case is one message naming the
 * file, line or key, and ER_INPUT, never an abort. Commands run in-process through their cmd_*
 * functions, as main() calls them. */
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "datasets/image.h"
#include "datasets/manifest.h"
#include "infer/retrieval/embeddings.h"
#include "nn/base/base.h"
#include "tests/test_util.h"

int cmd_data(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_vss(int argc, char **argv);
int cmd_eval_perceived(int argc, char **argv);

/* #4: a directory where a file is expected (the size ftell() gives for one is 2^63-1). */
static void expect_names_dir(int rc, const char *dir, const char *what) {
    cr_expect_eq(rc, ER_INPUT, "%s: rc %d (%s)", what, rc, er_msg());
    cr_expect(strstr(er_msg(), dir) != NULL, "%s: message does not name %s: %s", what, dir, er_msg());
}

Test(cli_bad_input, directory_where_a_file_is_expected) {
    char dir[64];
    snprintf(dir, sizeof dir, "%s", test_tmpdir());
    char *data_check[] = {"data", "check", dir, NULL};
    expect_names_dir(cmd_data(3, data_check), dir, "data check DIR");
    char *train[] = {"train", "image", "--config", dir, NULL};
    expect_names_dir(cmd_train(4, train), dir, "train image --config DIR");
    char *eval_perceived[] = {"eval", "perceived", "--gt", dir, "--emb", dir, NULL};
    expect_names_dir(cmd_eval_perceived(5, eval_perceived + 1), dir, "eval perceived --gt DIR");
    char *vss[] = {"vss", "serve", "--sheet", dir, "--scores", "/nonexistent/s.csv", "--observer", "a", "--port", "0", NULL};
    expect_names_dir(cmd_vss(10, vss), dir, "vss serve --sheet DIR");
    manifest m;
    expect_names_dir(manifest_load(dir, &m), dir, "manifest DIR (embed/index build --manifest)");
    /* a manifest row naming a directory */
    image im = {0};
    expect_names_dir(image_load(dir, 3, &im), dir, "image DIR (manifest row)");
}

int cmd_synth(int argc, char **argv);
int cmd_embed(int argc, char **argv);
int cmd_bench_latency(int argc, char **argv);
int cmd_bench_conv(int argc, char **argv);
int cmd_bench(int argc, char **argv);

/* issue 30 F7: --threads 100000 crashed inside the OpenMP runtime; every --threads option has the
 * one range 0..1024, refused before any file is read (the manifests here do not exist). */
static void expect_threads_refused(int rc, const char *what) {
    cr_expect_eq(rc, ER_INPUT, "%s: rc %d (%s)", what, rc, er_msg());
    cr_expect(strstr(er_msg(), "--threads") && strstr(er_msg(), "100000"), "%s: %s", what, er_msg());
}

Test(cli_bad_input, every_threads_option_has_one_range) {
    char *check[] = {"data", "check", "/nonexistent/m.csv", "--threads", "100000", NULL};
    expect_threads_refused(cmd_data(5, check), "data check");
    char *copies[] = {"data", "copies", "--manifest", "/nonexistent/m.csv", "--out", "/nonexistent/o", "--threads", "100000", NULL};
    expect_threads_refused(cmd_data(8, copies), "data copies");
    char *synth[] = {"synth", "--out", "/nonexistent/s", "--threads", "100000", NULL};
    expect_threads_refused(cmd_synth(5, synth), "synth");
    char *embed[] = {"embed", "--model", "/nonexistent/m", "--manifest", "/nonexistent/m.csv", "--out", "/nonexistent/e",
                     "--threads", "100000", NULL};
    expect_threads_refused(cmd_embed(9, embed), "embed");
    char *lat[] = {"latency", "--image", "/nonexistent/i.png", "--threads", "100000", NULL};
    expect_threads_refused(cmd_bench_latency(5, lat), "bench latency");
    char *conv[] = {"conv", "--threads", "100000", NULL};
    expect_threads_refused(cmd_bench_conv(3, conv), "bench conv");
    char *train[] = {"bench", "train", "--model", "bogus", "--threads", "100000", NULL};
    expect_threads_refused(cmd_bench(6, train), "bench train");
    char *neg[] = {"data", "check", "/nonexistent/m.csv", "--threads", "-1", NULL};
    cr_expect_eq(cmd_data(5, neg), ER_INPUT);
    cr_expect(strstr(er_msg(), "--threads"), "%s", er_msg());
}

/* issue 30 F13: a FIFO in place of a file hung the open (no writer ever comes); every reader now
 * opens non-blocking and refuses what is not a regular file, naming it. The alarm turns a hang
 * into a failure. */
Test(cli_bad_input, a_fifo_where_a_file_is_expected) {
    alarm(20);
    const char *dir = test_tmpdir();
    char *fifo = path_join(dir, "f.png"), *man = path_join(dir, "m.csv");
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    const char *text = "path,label\nf.png,a\n";
    cr_assert_eq(write_file_atomic(man, text, strlen(text)), ER_OK);
    char *check[] = {"data", "check", man, NULL};
    int rc = cmd_data(3, check);
    cr_expect(rc != ER_OK && strstr(er_msg(), fifo) && strstr(er_msg(), "not a regular file"), "data check: rc %d: %s", rc, er_msg());
    char *lat[] = {"latency", "--image", fifo, NULL};
    rc = cmd_bench_latency(3, lat);
    cr_expect(rc == ER_INPUT && strstr(er_msg(), fifo), "bench latency --image FIFO: rc %d: %s", rc, er_msg());
    char *embed[] = {"embed", "--model", fifo, "--manifest", man, "--out", "/nonexistent/e.safetensors", NULL};
    rc = cmd_embed(7, embed);
    cr_expect(rc == ER_INPUT && strstr(er_msg(), fifo), "embed --model FIFO: rc %d: %s", rc, er_msg());
    manifest m;
    rc = manifest_load(fifo, &m);
    cr_expect(rc == ER_INPUT && strstr(er_msg(), "not a regular file"), "manifest FIFO: rc %d: %s", rc, er_msg());
    free(fifo), free(man);
}

int cmd_index(int argc, char **argv);
int cmd_search(int argc, char **argv);

/* issue 30 F16: --out / --index naming a directory was a runtime failure (exit 1) at the rename or
 * in SQLite; it is bad input (exit 2) naming the path, checked before any work. */
Test(cli_bad_input, an_output_or_index_that_is_a_directory) {
    const char *dir = test_tmpdir();
    char *man = path_join(dir, "m.csv"), *sub = path_join(dir, "sub"), *emb = path_join(dir, "e.safetensors");
    cr_assert_eq(make_dirs(sub), ER_OK);
    const char *text = "path,label\na.png,x\nb.png,y\nc.png,x\nd.png,y\n";
    cr_assert_eq(write_file_atomic(man, text, strlen(text)), ER_OK);
    char *split[] = {"data", "split", man, "--folds", "2", "--out", sub, NULL};
    expect_names_dir(cmd_data(7, split), sub, "data split --out DIR");
    emb_set e;
    emb_alloc(&e, 8, 4);
    for (int i = 0; i < 8 * 4; i++) e.x[i] = (float)((i * 7) % 5) - 2;
    cr_assert_eq(emb_save(emb, &e), ER_OK);
    emb_free(&e);
    char *build[] = {"index", "build", "--emb", emb, "--out", sub, NULL};
    expect_names_dir(cmd_index(6, build), sub, "index build --out DIR");
    char *add[] = {"index", "add", "--index", sub, "--emb", emb, NULL};
    expect_names_dir(cmd_index(6, add), sub, "index add --index DIR");
    char *search[] = {"search", "--index", sub, "--query", emb, NULL};
    expect_names_dir(cmd_search(5, search), sub, "search --index DIR");
    char *missing = path_join(dir, "no/such/folder/out.csv");
    char *split2[] = {"data", "split", man, "--folds", "2", "--out", missing, NULL};
    cr_expect_eq(cmd_data(7, split2), ER_INPUT, "%s", er_msg());
    cr_expect(strstr(er_msg(), missing), "%s", er_msg());
    free(man), free(sub), free(emb), free(missing);
}

int cmd_eval(int argc, char **argv);

/* issue 30 F8 + F14: a missing group column made every row its own group (scenes split over
 * folds, exit 0); eval classify printed "K-fold grouped CV" with fewer groups than folds, which
 * data split refuses; data split --folds -1 complained about --holdout-fold. */
Test(cli_bad_input, grouping_by_a_missing_column_or_too_few_groups) {
    const char *dir = test_tmpdir();
    char *man = path_join(dir, "m.csv"), *out = path_join(dir, "o.csv"), *emb = path_join(dir, "e.safetensors");
    char text[2048] = "path,label,scene\n";
    for (int i = 0; i < 40; i++)
        snprintf(text + strlen(text), sizeof text - strlen(text), "i%d.png,%s,%d\n", i, i % 2 ? "a" : "b", i / 4);
    cr_assert_eq(write_file_atomic(man, text, strlen(text)), ER_OK);
    char *by_patient[] = {"data", "split", man, "--folds", "2", "--by", "patient", "--out", out, NULL};
    cr_expect_eq(cmd_data(9, by_patient), ER_INPUT, "%s", er_msg());
    cr_expect(strstr(er_msg(), "patient") && strstr(er_msg(), man), "%s", er_msg());
    char *neg[] = {"data", "split", man, "--folds", "-1", "--out", out, NULL};
    cr_expect_eq(cmd_data(7, neg), ER_INPUT, "%s", er_msg());
    cr_expect(strstr(er_msg(), "--folds") && !strstr(er_msg(), "--holdout-fold"), "%s", er_msg());
    char *many[] = {"data", "split", man, "--folds", "20", "--by", "scene", "--out", out, NULL};
    cr_expect_eq(cmd_data(9, many), ER_INPUT, "data split refuses 20 folds of 10 scenes: %s", er_msg());
    emb_set e;
    emb_alloc(&e, 40, 4);
    e.labels = malloc(40 * sizeof(int64_t));
    e.scene = malloc(40 * sizeof(int64_t));
    for (int i = 0; i < 40; i++) {
        e.labels[i] = i % 2;
        e.scene[i] = i / 4;
        for (int d = 0; d < 4; d++) e.x[i * 4 + d] = (float)((i * 7 + d * 3) % 5) - 2 + (d == i % 2);
    }
    cr_assert_eq(emb_save(emb, &e), ER_OK, "%s", er_msg());
    emb_free(&e);
    char *cls[] = {"eval", "classify", "--emb", emb, "--group", "scene", "--folds", "20", NULL};
    cr_expect_eq(cmd_eval(8, cls), ER_INPUT, "eval classify, 20 folds of 10 scenes: %s", er_msg());
    cr_expect(strstr(er_msg(), "10 groups"), "%s", er_msg());
    /* k beyond the items: the neighbours were allocated for it (1e9 aborted); the same votes as k = n */
    char *bigk[] = {"eval", "classify", "--emb", emb, "--k", "1000000000", "--bootstrap", "0", NULL};
    fflush(stdout);
    cr_expect_eq(cmd_eval(8, bigk), ER_OK, "eval classify --k 1e9: %s", er_msg());
    char *clp[] = {"eval", "classify", "--emb", emb, "--group", "patient", "--manifest", man, NULL};
    cr_expect_eq(cmd_eval(8, clp), ER_INPUT, "%s", er_msg());
    cr_expect(strstr(er_msg(), "patient") && strstr(er_msg(), man), "%s", er_msg());
    free(man), free(out), free(emb);
}

int cmd_eval_split(int argc, char **argv);

/* issue 30 F11 + F14: sizes from a user aborted in the allocator (exit 134) or only grew memory;
 * each is range-checked, and a forward that cannot fit is refused by the memory estimate
 * (ENDORET_MEM_LIMIT pins what "available" means here). bench latency --model named --arch. */
Test(cli_bad_input, sizes_are_range_checked_and_the_forward_must_fit) {
    setenv("ENDORET_MEM_LIMIT", "8G", 1);
    struct { const char *opt, *val; } lat[] = {{"--runs", "1000000000"}, {"--k", "1000000000"}, {"--side", "100000"},
                                               {"--side", "2147483647"}, {"--img", "100000"}};
    for (int i = 0; i < 5; i++) {
        char *a[] = {"latency", (char *)lat[i].opt, (char *)lat[i].val, NULL};
        cr_expect_eq(cmd_bench_latency(3, a), ER_INPUT, "%s %s: %s", lat[i].opt, lat[i].val, er_msg());
        cr_expect(strstr(er_msg(), lat[i].opt), "%s %s: %s", lat[i].opt, lat[i].val, er_msg());
    }
    char *img[] = {"latency", "--img", "4096", "--threads", "1", NULL};
    cr_expect_eq(cmd_bench_latency(5, img), ER_INPUT, "--img 4096: %s", er_msg());
    cr_expect(strstr(er_msg(), "needs about") && strstr(er_msg(), "--img"), "%s", er_msg());
    char *bogus[] = {"latency", "--model", "bogus", NULL};
    cr_expect_eq(cmd_bench_latency(3, bogus), ER_INPUT);
    cr_expect(strstr(er_msg(), "--model") && !strstr(er_msg(), "--arch"), "%s", er_msg());
    char *boot[] = {"split", "--bootstrap", "1000000000", NULL};
    cr_expect_eq(cmd_eval_split(3, boot), ER_INPUT, "%s", er_msg());
    cr_expect(strstr(er_msg(), "--bootstrap"), "%s", er_msg());
    /* embed: a tiny manifest, a random-init ViT */
    const char *dir = test_tmpdir();
    char *man = path_join(dir, "m.csv"), *png = path_join(dir, "a.png"), *out = path_join(dir, "e.safetensors");
    image im = {0};
    image_ensure(&im, 3, 8, 8);
    cr_assert_eq(image_save_png(png, &im), ER_OK);
    image_free(&im);
    const char *text = "path,scene,view\na.png,s,0\n";
    cr_assert_eq(write_file_atomic(man, text, strlen(text)), ER_OK);
    char *e1[] = {"embed", "--config", "configs/demo_image.cfg", "--manifest", man, "--out", out, "--img", "4096", NULL};
    cr_expect_eq(cmd_embed(9, e1), ER_INPUT, "embed --img 4096: %s", er_msg());
    cr_expect(strstr(er_msg(), "needs about"), "%s", er_msg());
    char *e2[] = {"embed", "--config", "configs/demo_image.cfg", "--manifest", man, "--out", out, "--scene", "--fusion", "mean",
                  "--max-views", "1000000000", NULL};
    cr_expect_eq(cmd_embed(12, e2), ER_INPUT, "embed --scene --max-views 1e9: %s", er_msg());
    cr_expect(strstr(er_msg(), "--max-views"), "%s", er_msg());
    unsetenv("ENDORET_MEM_LIMIT");
    free(man), free(png), free(out);
}

int cmd_bench_search(int argc, char **argv);
int cmd_bench_gemm(int argc, char **argv);
int cmd_sweep(int argc, char **argv);

/* issue 30, the same attacks on the other commands that take a size: each of these aborted in the
 * allocator (exit 134) before; now a range or the memory estimate refuses it, naming the option. */
Test(cli_bad_input, other_sizes_found_by_the_same_attacks) {
    setenv("ENDORET_MEM_LIMIT", "4G", 1);
    const char *dir = test_tmpdir();
    char *man = path_join(dir, "m.csv"), *syn = path_join(dir, "syn");
    const char *text = "path\na.png\n";
    cr_assert_eq(write_file_atomic(man, text, strlen(text)), ER_OK);
    struct { int (*fn)(int, char **); int argc; char *argv[10]; const char *needle; } cases[] = {
        {cmd_synth, 5, {"synth", "--out", syn, "--scenes", "2000000000"}, "scenes"},
        {cmd_synth, 7, {"synth", "--out", syn, "--scenes", "1", "--views", "1000000000"}, "views"},
        {cmd_data, 5, {"data", "bench", man, "--batch", "1000000000"}, "batch"},
        {cmd_data, 5, {"data", "bench", man, "--size", "100000"}, "size"},
        {cmd_data, 7, {"data", "bench", man, "--batch", "60000", "--size", "4096"}, "needs about"},
        {cmd_bench_search, 3, {"search", "--n", "2000000000"}, "--n"},
        {cmd_bench_search, 3, {"search", "--dim", "1000000000"}, "--dim"},
        {cmd_bench_search, 3, {"search", "--n", "1000000000"}, "needs about"},
        {cmd_sweep, 4, {"sweep", "--synthetic", "--n", "2000000000"}, "--n"},
        {cmd_sweep, 6, {"sweep", "--synthetic", "--n", "100", "--k", "1000000000"}, "k = 1000000000"},
        {cmd_bench, 4, {"bench", "train", "--batch", "100000"}, "--batch"},
        {cmd_bench, 6, {"bench", "train", "--img", "4096", "--batch", "1"}, "needs about"},
        {cmd_bench, 3, {"bench", "train", "--resident"}, "--objective mae"},
        {cmd_bench_gemm, 3, {"gemm", "--shapes", "100000x100000x100000"}, "needs about"},
        {cmd_vss, 8, {"vss", "draw", "--emb", "/nonexistent/e", "--out", "/nonexistent/o", "--n", "2000000000"}, "--n"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        fflush(stdout);
        int rc = cases[i].fn(cases[i].argc, cases[i].argv);
        cr_expect_eq(rc, ER_INPUT, "case %zu (%s %s): rc %d: %s", i, cases[i].argv[0], cases[i].argv[1], rc, er_msg());
        cr_expect(strstr(er_msg(), cases[i].needle), "case %zu: '%s' not in: %s", i, cases[i].needle, er_msg());
    }
    unsetenv("ENDORET_MEM_LIMIT");
    free(man), free(syn);
}

/* The same attacks on other paths: a file where an output folder is asked for, and a folder as
 * the contact sheet, were runtime failures (exit 1: "cannot create directory: Not a directory",
 * "write failed"); they are bad input naming the path. */
Test(cli_bad_input, a_file_where_a_folder_is_asked_for) {
    const char *dir = test_tmpdir();
    char *file = path_join(dir, "f"), *out = path_join(dir, "out"), *sub = path_join(dir, "f/x");
    cr_assert_eq(write_file_atomic(file, "x", 1), ER_OK);
    char *s1[] = {"synth", "--out", file, "--scenes", "1", "--size", "16", NULL};
    cr_expect_eq(cmd_synth(7, s1), ER_INPUT, "%s", er_msg());
    cr_expect(strstr(er_msg(), file) && strstr(er_msg(), "not a directory"), "%s", er_msg());
    char *s2[] = {"synth", "--out", sub, "--scenes", "1", "--size", "16", NULL};
    cr_expect_eq(cmd_synth(7, s2), ER_INPUT, "%s", er_msg());
    cr_expect(strstr(er_msg(), file), "%s", er_msg());
    fflush(stdout);
    char *s3[] = {"synth", "--out", out, "--scenes", "1", "--size", "16", "--sheet", (char *)dir, NULL};
    cr_expect_eq(cmd_synth(9, s3), ER_INPUT, "%s", er_msg());
    cr_expect(strstr(er_msg(), dir) && strstr(er_msg(), "is a directory"), "%s", er_msg());
    free(file), free(out), free(sub);
}

/* data resize: a file as SRC, a file as --out, no SRC, and sizes out of range are bad input naming
 * what is wrong, with nothing written. */
Test(cli_bad_input, data_resize_paths_and_sizes) {
    char dir[64];
    snprintf(dir, sizeof dir, "%s", test_tmpdir());
    char *file = path_join(dir, "f"), *out = path_join(dir, "out"), *src = path_join(dir, "src");
    cr_assert_eq(write_file_atomic(file, "x", 1), ER_OK);
    cr_assert_eq(make_dirs(src), ER_OK);
    char *a1[] = {"data", "resize", file, "--out", out, NULL};
    cr_expect_eq(cmd_data(5, a1), ER_INPUT);
    cr_expect(strstr(er_msg(), file) && strstr(er_msg(), "no such folder"), "%s", er_msg());
    char *a2[] = {"data", "resize", src, "--out", file, NULL};
    cr_expect_eq(cmd_data(5, a2), ER_INPUT);
    cr_expect(strstr(er_msg(), file), "%s", er_msg());
    char *a3[] = {"data", "resize", "--out", out, NULL};
    cr_expect_eq(cmd_data(4, a3), ER_INPUT);
    cr_expect(strstr(er_msg(), "positional"), "%s", er_msg());
    char *a4[] = {"data", "resize", src, "--out", out, "--side", "3", NULL};
    cr_expect_eq(cmd_data(7, a4), ER_INPUT);
    cr_expect(strstr(er_msg(), "--side") && strstr(er_msg(), "[8, 32768]"), "%s", er_msg());
    char *a5[] = {"data", "resize", src, "--out", out, "--quality", "101", NULL};
    cr_expect_eq(cmd_data(7, a5), ER_INPUT);
    cr_expect(access(out, F_OK) != 0, "nothing written for refused options");
    free(file), free(out), free(src);
}
