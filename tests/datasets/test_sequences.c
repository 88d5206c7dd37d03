/* test_sequences.c — `data import --layout sequences` (datasets/importers.h): video frames grouped per
 * polyp, V views spread over each sequence in natural frame order. Tiny PNGs written with the
 * project's own writer into a temporary folder. */
#include <stdlib.h>
#include <string.h>

#include "datasets/image.h"
#include "datasets/importers.h"
#include "datasets/manifest.h"
#include "nn/base/base.h"
#include "tests/test_util.h"

int cmd_data(int argc, char **argv);

static void png(const char *dir, const char *rel) {
    char *p = path_join(dir, rel), *d = path_dirname(p);
    make_dirs(d);
    image im = {0};
    image_ensure(&im, 3, 4, 4);
    for (int i = 0; i < 3 * 16; i++) im.data[i] = 0.25f;
    cr_assert_eq(image_save_png(p, &im), ER_OK, "%s", er_msg());
    image_free(&im);
    free(p), free(d);
}

/* frames <prefix>1.png .. <prefix>n.png (no zero padding: byte order would put 10 after 1) */
static void frames(const char *dir, const char *prefix, int n) {
    char rel[256];
    for (int i = 1; i <= n; i++) {
        snprintf(rel, sizeof rel, "%s%d.png", prefix, i);
        png(dir, rel);
    }
}

static char *text_file(const char *dir, const char *name, const char *txt) {
    char *p = path_join(dir, name);
    cr_assert_eq(write_file_atomic(p, txt, strlen(txt)), ER_OK);
    return p;
}

/* an import expected to fail with ER_INPUT and a message holding both needles */
#define EXPECT_BAD(call, needle1, needle2)                                                            \
    do {                                                                                             \
        manifest m_;                                                                                 \
        seq_import_stats st_;                                                                        \
        int rc_ = call(&m_, &st_);                                                                   \
        cr_expect_eq(rc_, ER_INPUT, "rc %d: %s", rc_, er_msg());                                    \
        cr_expect(strstr(er_msg(), needle1) && strstr(er_msg(), needle2), "message: %s", er_msg());  \
        manifest_free(&m_);                                                                          \
        seq_import_stats_free(&st_);                                                                 \
    } while (0)

static int cmp_names(const void *a, const void *b) { return natural_cmp(*(const char *const *)a, *(const char *const *)b); }

/* the same with a map file written first (and freed after) */
#define EXPECT_BAD_MAP(root, name, txt, needle1, needle2) \
    do {                                                  \
        char *map_ = text_file(root, name, txt);          \
        g_map = map_;                                     \
        EXPECT_BAD(run_import, needle1, needle2);         \
        free(map_);                                       \
    } while (0)

Test(datasets_sequences, natural_order) {
    cr_expect_lt(natural_cmp("frame_2.png", "frame_10.png"), 0);
    cr_expect_gt(natural_cmp("frame_10.png", "frame_9.png"), 0);
    cr_expect_lt(natural_cmp("a9b", "a10a"), 0);
    cr_expect_lt(natural_cmp("abc", "abd"), 0);
    cr_expect_lt(natural_cmp("f", "f1"), 0);
    cr_expect_eq(natural_cmp("seq1/f7", "seq1/f7"), 0);
    cr_expect_lt(natural_cmp("seq2/f99", "seq10/f1"), 0);
    /* equal numbers with different zero padding: ordered, never equal (a total order) */
    cr_expect_lt(natural_cmp("f2", "f02"), 0);
    cr_expect_gt(natural_cmp("f02", "f2"), 0);
    cr_expect_lt(natural_cmp("f02", "f3"), 0);
    const char *v[] = {"f10", "f9", "f1", "f100", "f010x", "f2", "f10"};
    qsort(v, 7, sizeof *v, cmp_names);
    const char *want[] = {"f1", "f2", "f9", "f10", "f10", "f010x", "f100"};
    for (int i = 0; i < 7; i++) cr_expect_str_eq(v[i], want[i]);
}

Test(datasets_sequences, view_positions) {
    int idx[8];
    cr_assert(seq_pick_views(100, 4, 1, idx));
    cr_expect(idx[0] == 12 && idx[1] == 37 && idx[2] == 62 && idx[3] == 87, "%d %d %d %d", idx[0], idx[1], idx[2], idx[3]);
    cr_assert(seq_pick_views(4, 4, 1, idx));
    for (int k = 0; k < 4; k++) cr_expect_eq(idx[k], k);
    cr_expect_not(seq_pick_views(3, 4, 1, idx), "3 frames cannot give 4 views");
    cr_assert(seq_pick_views(5, 1, 1, idx));
    cr_expect_eq(idx[0], 2, "one view: the middle frame");
    /* min-gap: centres 4 13 21 30 are closer than 10, so the views span the sequence */
    cr_assert(seq_pick_views(35, 4, 10, idx));
    cr_expect(idx[0] == 0 && idx[1] == 11 && idx[2] == 22 && idx[3] == 34, "%d %d %d %d", idx[0], idx[1], idx[2], idx[3]);
    cr_assert(seq_pick_views(31, 4, 10, idx), "(V-1)*gap+1 = 31 frames are enough");
    cr_expect(idx[0] == 0 && idx[1] == 10 && idx[2] == 20 && idx[3] == 30);
    cr_expect_not(seq_pick_views(30, 4, 10, idx));
    /* every n from V upwards: increasing, within the sequence, gaps >= min-gap */
    for (int gap = 1; gap <= 5; gap++)
        for (int n = 3 * gap + 1; n < 200; n++) {
            cr_assert(seq_pick_views(n, 4, gap, idx));
            cr_assert(idx[0] >= 0 && idx[3] < n);
            for (int k = 1; k < 4; k++) cr_assert_geq(idx[k] - idx[k - 1], gap, "n %d gap %d", n, gap);
        }
}

static const char *g_src, *g_out, *g_map;
static seq_import_opts g_opts;
static int run_import(manifest *m, seq_import_stats *st) {
    seq_import_opts o = g_opts;
    o.map = g_map;
    return import_sequences(g_src, g_out, &o, m, st);
}

Test(datasets_sequences, folder_per_sequence) {
    const char *root = test_tmpdir();
    char *src = path_join(root, "seqs"), *out = path_join(root, "out/m.csv");
    char *a = path_join(src, "polyp_a"), *b = path_join(src, "polyp_b"), *s = path_join(src, "short");
    frames(a, "frame_", 10);
    frames(b, "frame_", 12);
    frames(s, "frame_", 2);
    char *notes = text_file(a, "notes.txt", "not a frame");
    manifest m;
    seq_import_stats st;
    seq_import_opts o = seq_import_defaults();
    cr_assert_eq(o.views, 4);
    cr_assert_eq(import_sequences(src, out, &o, &m, &st), ER_OK, "%s", er_msg());
    cr_expect_eq(st.sequences, 3);
    cr_expect_eq(st.frames, 24);
    cr_assert_eq(st.nskipped, 1, "the 2-frame sequence is skipped");
    cr_expect_str_eq(st.skipped[0], "short");
    cr_expect_eq(st.skipped_frames[0], 2);
    cr_assert_eq(m.n, 8);
    /* polyp_a: 10 frames in natural order, centres of 4 parts = positions 1 3 6 8 = frame_2 4 7 9 */
    const char *want_a[] = {"../seqs/polyp_a/frame_2.png", "../seqs/polyp_a/frame_4.png", "../seqs/polyp_a/frame_7.png",
                            "../seqs/polyp_a/frame_9.png"};
    for (int k = 0; k < 4; k++) {
        cr_expect_str_eq(m.rows[k].path, want_a[k]);
        cr_expect_str_eq(m.rows[k].scene, "polyp_a");
        char v[4];
        snprintf(v, sizeof v, "%d", k);
        cr_expect_str_eq(m.rows[k].view, v);
        cr_expect_null(m.rows[k].label);
    }
    /* polyp_b: 12 frames, positions 1 4 7 10 = frame_2 5 8 11 */
    cr_expect_str_eq(m.rows[4].path, "../seqs/polyp_b/frame_2.png");
    cr_expect_str_eq(m.rows[7].path, "../seqs/polyp_b/frame_11.png");
    cr_expect_str_eq(m.rows[7].scene, "polyp_b");
    manifest_free(&m);
    seq_import_stats_free(&st);
    /* the written manifest loads back with its scene / view columns; --label fills the label */
    o.label = "polyp";
    o.views = 2;
    cr_assert_eq(import_sequences(src, out, &o, &m, &st), ER_OK, "%s", er_msg());
    cr_expect_eq(st.nskipped, 0, "2 frames are enough for 2 views");
    cr_assert_eq(manifest_save(out, &m), ER_OK);
    manifest_free(&m);
    seq_import_stats_free(&st);
    cr_assert_eq(manifest_load(out, &m), ER_OK, "%s", er_msg());
    cr_assert_eq(m.n, 6);
    cr_expect_str_eq(m.rows[5].scene, "short");
    cr_expect_str_eq(m.rows[5].label, "polyp");
    cr_expect_str_eq(m.rows[5].view, "1");
    char *img = manifest_image_path(&m, 5);
    image im = {0};
    cr_expect_eq(image_load(img, 3, &im), ER_OK, "%s", er_msg());
    image_free(&im);
    free(img);
    manifest_free(&m);
    /* min-gap 3 over 10 frames: centres 1 3 6 8 are 2 apart, so 0 3 6 9; polyp_b (12) and short skipped at 4 views */
    o = seq_import_defaults();
    o.min_gap = 3;
    cr_assert_eq(import_sequences(src, out, &o, &m, &st), ER_OK, "%s", er_msg());
    cr_assert_eq(m.n, 8);
    cr_expect_str_eq(m.rows[0].path, "../seqs/polyp_a/frame_1.png");
    cr_expect_str_eq(m.rows[3].path, "../seqs/polyp_a/frame_10.png");
    cr_expect_str_eq(m.rows[5].path, "../seqs/polyp_b/frame_5.png", "12 frames: centres 1 4 7 10 are 3 apart");
    manifest_free(&m);
    seq_import_stats_free(&st);
    /* no sequence long enough: an error saying what was needed */
    o.min_gap = 5;
    g_src = src, g_out = out, g_map = NULL, g_opts = o;
    EXPECT_BAD(run_import, "16 frames", "longest has 12");
    free(src), free(out), free(a), free(b), free(s), free(notes);
}

Test(datasets_sequences, class_folders_and_bad_folders) {
    const char *root = test_tmpdir();
    char *src = path_join(root, "cls"), *out = path_join(root, "m.csv");
    char *p1 = path_join(src, "adenoma/p1"), *p2 = path_join(src, "hyperplastic/p2");
    frames(p1, "f", 4);
    frames(p2, "f", 5);
    manifest m;
    seq_import_stats st;
    seq_import_opts o = seq_import_defaults();
    cr_assert_eq(import_sequences(src, out, &o, &m, &st), ER_OK, "%s", er_msg());
    cr_assert_eq(m.n, 8);
    cr_expect_str_eq(m.rows[0].scene, "adenoma/p1");
    cr_expect_str_eq(m.rows[0].label, "adenoma");
    cr_expect_str_eq(m.rows[4].label, "hyperplastic");
    manifest_free(&m);
    seq_import_stats_free(&st);
    g_out = out, g_map = NULL, g_opts = o;
    /* missing folder */
    g_src = "/nonexistent/endoret_seq";
    EXPECT_BAD(run_import, "/nonexistent/endoret_seq", "no such folder");
    /* an images/ + masks/ dataset is refused, naming the mask folder */
    char *seg = path_join(root, "seg");
    png(seg, "images/a.png");
    png(seg, "masks/a.png");
    g_src = seg;
    EXPECT_BAD(run_import, "'masks'", "image-mask");
    /* PolypGen style seq1/images_seq1 + seq1/masks_seq1 too */
    char *pg = path_join(root, "polypgen");
    png(pg, "seq1/images_seq1/1.png");
    png(pg, "seq1/masks_seq1/1.png");
    g_src = pg;
    EXPECT_BAD(run_import, "'masks_seq1'", "holds masks");
    /* a flat frames folder needs --map */
    char *flat = path_join(root, "flat");
    frames(flat, "f", 3);
    g_src = flat;
    EXPECT_BAD(run_import, flat, "--map");
    /* an empty sequence folder is named */
    char *emp = path_join(root, "emp"), *e1 = path_join(emp, "p1"), *e2 = path_join(emp, "p2");
    frames(e1, "f", 4);
    make_dirs(e2);
    g_src = emp;
    EXPECT_BAD(run_import, e2, "empty sequence");
    /* frames beside sequence folders */
    png(emp, "stray.png");
    EXPECT_BAD(run_import, "stray.png", "beside sequence folders");
    free(src), free(out), free(p1), free(p2), free(seg), free(pg), free(flat), free(emp), free(e1), free(e2);
}

Test(datasets_sequences, map_one_frame_per_line) {
    const char *root = test_tmpdir();
    char *src = path_join(root, "frames"), *out = path_join(root, "m.csv");
    frames(src, "img_", 12);
    png(src, "sub/x1.png");
    /* lines out of order; sequence names kept exactly as given ("P 7", "12"); pathology = label */
    char *map = text_file(root, "map.csv",
                          "frame,sequence,pathology,patient,split\n"
                          "img_10.png,P 7,adenoma,pat1,test\n"
                          "img_2.png,P 7,adenoma,pat1,test\n"
                          "img_1.png,P 7,adenoma,pat1,test\n"
                          "img_9.png,P 7,adenoma,pat1,test\n"
                          "\n"
                          "img_3.png,12,\"serrated, sessile\",pat2,train\n"
                          "img_4.png,12,\"serrated, sessile\",pat2,train\n"
                          "sub/x1.png,12,\"serrated, sessile\",pat2,train\n"
                          "img_11.png,12,\"serrated, sessile\",pat2,train\n");
    manifest m;
    seq_import_stats st;
    seq_import_opts o = seq_import_defaults();
    o.map = map;
    cr_assert_eq(import_sequences(src, out, &o, &m, &st), ER_OK, "%s", er_msg());
    cr_assert_eq(m.n, 8);
    cr_expect_eq(st.sequences, 2);
    /* natural order of sequences: "12" before "P 7"; of frames: img_3 img_4 img_11 sub/x1 */
    cr_expect_str_eq(m.rows[0].scene, "12");
    cr_expect_str_eq(m.rows[0].path, "frames/img_3.png");
    cr_expect_str_eq(m.rows[2].path, "frames/img_11.png");
    cr_expect_str_eq(m.rows[3].path, "frames/sub/x1.png");
    cr_expect_str_eq(m.rows[0].label, "serrated, sessile");
    cr_expect_str_eq(m.rows[0].patient, "pat2");
    cr_expect_str_eq(m.rows[0].split, "train");
    cr_expect_str_eq(m.rows[4].scene, "P 7");
    cr_expect_str_eq(m.rows[4].path, "frames/img_1.png");
    cr_expect_str_eq(m.rows[5].path, "frames/img_2.png");
    cr_expect_str_eq(m.rows[6].path, "frames/img_9.png");
    cr_expect_str_eq(m.rows[7].path, "frames/img_10.png");
    cr_expect_str_eq(m.rows[7].view, "3");
    cr_expect_str_eq(m.rows[7].label, "adenoma");
    /* the manifest round trip keeps the quoted label and the names */
    cr_assert_eq(manifest_save(out, &m), ER_OK);
    manifest_free(&m);
    seq_import_stats_free(&st);
    cr_assert_eq(manifest_load(out, &m), ER_OK, "%s", er_msg());
    cr_expect_str_eq(m.rows[1].label, "serrated, sessile");
    cr_expect_str_eq(m.rows[6].scene, "P 7");
    manifest_free(&m);

    g_src = src, g_out = out, g_opts = seq_import_defaults();
    /* a listed frame that does not exist: the map, its line and the frame */
    EXPECT_BAD_MAP(root, "missing.csv", "frame,sequence\nimg_1.png,a\nimg_99.png,a\n", "missing.csv: line 3", "img_99.png");
    /* an unknown column */
    EXPECT_BAD_MAP(root, "unknown.csv", "frame,sequence,video\nimg_1.png,a,v1\n", "unknown.csv: line 1, column 3", "unknown column 'video'");
    /* issue 30 F9: the manifest's header rule: spaces are part of a name */
    EXPECT_BAD_MAP(root, "spaced.csv", "frame, sequence\nimg_1.png, a\n", "spaced.csv: line 1, column 2", "unknown column ' sequence'");
    /* no sequence column; both frame and start/end; neither */
    EXPECT_BAD_MAP(root, "noseq.csv", "frame,label\nimg_1.png,a\n", "noseq.csv: line 1", "no 'sequence' column");
    EXPECT_BAD_MAP(root, "both.csv", "frame,sequence,start,end\nimg_1.png,a,1,2\n", "both.csv: line 1", "both 'frame' and");
    EXPECT_BAD_MAP(root, "neither.csv", "sequence,start\na,1\n", "neither.csv: line 1", "'start' and 'end'");
    /* a frame listed twice, also in another sequence */
    EXPECT_BAD_MAP(root, "twice.csv", "frame,sequence\nimg_1.png,a\nimg_2.png,a\nimg_1.png,b\n", "twice.csv: line 4", "already listed at line 2");
    /* a sequence whose label changes */
    EXPECT_BAD_MAP(root, "label.csv", "frame,sequence,label\nimg_1.png,a,x\nimg_2.png,a,y\n", "label.csv: line 3", "label 'y' here but 'x' at line 2");
    /* an empty sequence name, a short line, a quoting error, an empty file, no lines, no file */
    EXPECT_BAD_MAP(root, "emptyseq.csv", "frame,sequence\nimg_1.png,\n", "emptyseq.csv: line 2", "empty sequence");
    EXPECT_BAD_MAP(root, "short.csv", "frame,sequence\nimg_1.png\n", "short.csv: line 2", "1 columns");
    EXPECT_BAD_MAP(root, "quote.csv", "frame,sequence\nimg_1.png,\"a\n", "quote.csv: line 2", "unterminated");
    EXPECT_BAD_MAP(root, "empty.csv", "", "empty.csv", "empty file");
    EXPECT_BAD_MAP(root, "header.csv", "frame,sequence\n", "header.csv", "no lines");
    g_map = "/nonexistent/endoret_map.csv";
    EXPECT_BAD(run_import, "/nonexistent/endoret_map.csv", "");
    /* a missing frames folder names it */
    g_src = "/nonexistent/endoret_frames";
    g_map = map;
    EXPECT_BAD(run_import, "/nonexistent/endoret_frames", "no such folder");
    free(src), free(out), free(map);
}

Test(datasets_sequences, map_runs_of_frames) {
    const char *root = test_tmpdir();
    char *src = path_join(root, "frames"), *out = path_join(root, "m.csv");
    frames(src, "frame_", 30);
    char *txt = text_file(src, "readme.txt", "not a frame");
    /* runs by number and by file name; polyp 3 seen in two passes; frames 29-30 in no run */
    char *map = text_file(root, "runs.csv",
                          "sequence,start,end,label\n"
                          "polyp 1,1,8,adenoma\n"
                          "polyp 3,frame_9.png,frame_12.png,hyperplastic\n"
                          "polyp 3,21,28,hyperplastic\n"
                          "polyp 2,13,15,adenoma\n");
    manifest m;
    seq_import_stats st;
    seq_import_opts o = seq_import_defaults();
    o.map = map;
    cr_assert_eq(import_sequences(src, out, &o, &m, &st), ER_OK, "%s", er_msg());
    cr_expect_eq(st.sequences, 3);
    cr_expect_eq(st.frames, 8 + 4 + 8 + 3);
    cr_expect_eq(st.unmapped, 30 - 23, "frames 16-20 and 29-30");
    cr_assert_eq(st.nskipped, 1);
    cr_expect_str_eq(st.skipped[0], "polyp 2");
    cr_assert_eq(m.n, 8);
    /* polyp 1: frames 1..8, positions 1 3 5 7 = frame_2 4 6 8 */
    cr_expect_str_eq(m.rows[0].scene, "polyp 1");
    cr_expect_str_eq(m.rows[0].path, "frames/frame_2.png");
    cr_expect_str_eq(m.rows[3].path, "frames/frame_8.png");
    /* polyp 3: 9..12 + 21..28 = 12 frames, positions 1 4 7 10 = frame_10, 21, 24, 27 */
    cr_expect_str_eq(m.rows[4].scene, "polyp 3");
    cr_expect_str_eq(m.rows[4].path, "frames/frame_10.png");
    cr_expect_str_eq(m.rows[5].path, "frames/frame_21.png");
    cr_expect_str_eq(m.rows[7].path, "frames/frame_27.png");
    cr_expect_str_eq(m.rows[7].label, "hyperplastic");
    manifest_free(&m);
    seq_import_stats_free(&st);

    g_src = src, g_out = out, g_opts = seq_import_defaults();
    EXPECT_BAD_MAP(root, "overlap.csv", "sequence,start,end\na,1,10\nb,10,20\n", "overlap.csv: line 3", "'frame_10.png' is already in the run of line 2");
    EXPECT_BAD_MAP(root, "backwards.csv", "sequence,start,end\na,10,1\n", "backwards.csv: line 2", "empty sequence");
    EXPECT_BAD_MAP(root, "nonum.csv", "sequence,start,end\na,1,99\n", "nonum.csv: line 2", "no frame numbered 99");
    EXPECT_BAD_MAP(root, "noname.csv", "sequence,start,end\na,frame_1.png,frame_x.png\n", "noname.csv: line 2", "'frame_x.png'");
    /* two files with one number: ambiguous, give the file name */
    png(src, "other_5.png");
    EXPECT_BAD_MAP(root, "ambiguous.csv", "sequence,start,end\na,5,9\n", "ambiguous.csv: line 2", "ambiguous");
    free(src), free(out), free(txt), free(map);
}

Test(datasets_sequences, cli) {
    const char *root = test_tmpdir();
    char *src = path_join(root, "seqs"), *a = path_join(src, "a"), *out = path_join(root, "m.csv");
    frames(a, "f", 9);
    char *ok[] = {"data", "import", "--layout", "sequences", src, "--out", out, "--views", "3", "--min-gap", "3", NULL};
    cr_assert_eq(cmd_data(11, ok), ER_OK, "%s", er_msg());
    manifest m;
    cr_assert_eq(manifest_load(out, &m), ER_OK, "%s", er_msg());
    cr_assert_eq(m.n, 3);
    cr_expect_str_eq(m.rows[0].path, "seqs/a/f2.png", "9 frames, 3 views: centres 1 4 7");
    cr_expect_str_eq(m.rows[2].path, "seqs/a/f8.png");
    manifest_free(&m);
    /* --views / --map belong to the sequences layout */
    char *bad[] = {"data", "import", "--layout", "scenes", src, "--out", out, "--views", "3", NULL};
    cr_expect_eq(cmd_data(9, bad), ER_INPUT);
    cr_expect(strstr(er_msg(), "--views is for --layout sequences"), "%s", er_msg());
    char *bad2[] = {"data", "import", "--layout", "sequences", src, "--out", out, "--views", "-1", NULL};
    cr_expect_eq(cmd_data(9, bad2), ER_INPUT);
    cr_expect(strstr(er_msg(), "--views -1"), "%s", er_msg());
    /* --views 0: every frame, view = its position (the sequence protocol's input) */
    char *all[] = {"data", "import", "--layout", "sequences", src, "--out", out, "--views", "0", NULL};
    cr_assert_eq(cmd_data(9, all), ER_OK, "%s", er_msg());
    cr_assert_eq(manifest_load(out, &m), ER_OK, "%s", er_msg());
    cr_assert_eq(m.n, 9);
    cr_expect_str_eq(m.rows[8].path, "seqs/a/f9.png");
    cr_expect_str_eq(m.rows[8].view, "8");
    manifest_free(&m);
    free(src), free(a), free(out);
}

/* issue 30 F12: --min-gap 2147483647 overflowed (V-1)*gap+1 in the message (UBSan; the release
 * build printed a wrong frame count): the count is computed in 64 bits. */
Test(datasets_sequences, a_huge_min_gap_names_the_true_frame_count) {
    const char *root = test_tmpdir();
    char *src = path_join(root, "src");
    frames(src, "seqA/f", 5);
    seq_import_opts o = seq_import_defaults();
    o.min_gap = 2147483647;
    manifest m;
    seq_import_stats st;
    char *out = path_join(root, "m.csv");
    cr_expect_eq(import_sequences(src, out, &o, &m, &st), ER_INPUT, "%s", er_msg());
    cr_expect(strstr(er_msg(), "6442450942 frames"), "(4-1)*2147483647+1 = 6442450942: %s", er_msg());
    manifest_free(&m);
    seq_import_stats_free(&st);
    free(src), free(out);
}

/* CVC-ColonDB's labels.csv is read as it ships (file = frame, sequence_id = sequence, its other
 * columns ignored); views 0 keeps every frame, view = its position in the sequence. A hand-made
 * folder in the same layout: images/colondb_NNN.png, frames 2 and 10 of seq01 listed, 5 of seq02,
 * frame 7 in no line (left out). */
Test(datasets_sequences, colondb_labels_every_frame) {
    const char *root = test_tmpdir();
    char *src = path_join(root, "cvc"), *out = path_join(root, "out/m.csv");
    const int nums[] = {2, 10, 5, 7};
    for (int i = 0; i < 4; i++) {
        char rel[64];
        snprintf(rel, sizeof rel, "images/colondb_%03d.png", nums[i]);
        png(src, rel);
    }
    char *map = text_file(src, "labels.csv",
                          "file,mask,sequence_id,frame_number,frame_index_in_sequence,sequence_length,width,height,label\n"
                          "images/colondb_010.png,masks/colondb_010_mask.png,colondb_seq01,10,1,2,4,4,polyp\n"
                          "images/colondb_002.png,masks/colondb_002_mask.png,colondb_seq01,2,0,2,4,4,polyp\n"
                          "images/colondb_005.png,masks/colondb_005_mask.png,colondb_seq02,5,0,1,4,4,polyp\n");
    manifest m;
    seq_import_stats st;
    seq_import_opts o = seq_import_defaults();
    o.views = 0;
    o.map = map;
    cr_assert_eq(import_sequences(src, out, &o, &m, &st), ER_OK, "%s", er_msg());
    cr_expect_eq(st.nskipped, 0, "views 0 skips no sequence, however short");
    cr_assert_eq(m.n, 3);
    cr_expect_str_eq(m.rows[0].path, "../cvc/images/colondb_002.png");
    cr_expect_str_eq(m.rows[0].scene, "colondb_seq01");
    cr_expect_str_eq(m.rows[0].view, "0");
    cr_expect_str_eq(m.rows[1].path, "../cvc/images/colondb_010.png", "frame order, not line order");
    cr_expect_str_eq(m.rows[1].view, "1");
    cr_expect_str_eq(m.rows[1].label, "polyp");
    cr_expect_str_eq(m.rows[2].scene, "colondb_seq02");
    cr_expect_str_eq(m.rows[2].view, "0");
    manifest_free(&m);
    seq_import_stats_free(&st);
    /* an unknown column is still refused; a negative --views too */
    g_src = src, g_out = out, g_opts = o;
    EXPECT_BAD_MAP(root, "bad.csv", "file,sequence_id,colour\nimages/colondb_002.png,s,red\n", "unknown column 'colour'", "bad.csv");
    g_opts.views = -1;
    g_map = map;
    EXPECT_BAD(run_import, "--views -1", "every frame");
    free(src), free(out), free(map);
}

/* The real labels.csv (345 frames, 17 sequences), when ../shared/data is there. */
Test(datasets_sequences, colondb_real_labels) {
    REQUIRE_SHARED_DATA(data);
    char *src = path_join(data, "cvc_colondb"), *map = path_join(src, "labels.csv");
    struct stat sb;
    if (stat(map, &sb)) cr_skip_test("%s not found: real-data test skipped", map);
    const char *root = test_tmpdir();
    char *out = path_join(root, "colondb.csv");
    manifest m;
    seq_import_stats st;
    seq_import_opts o = seq_import_defaults();
    o.views = 0;
    o.map = map;
    cr_assert_eq(import_sequences(src, out, &o, &m, &st), ER_OK, "%s", er_msg());
    cr_expect_eq(m.n, 345);
    cr_expect_eq(st.sequences, 17);
    cr_expect_eq(st.frames, 345);
    /* colondb_seq11c: 19 frames kept of 226-263; its last is position 18 */
    int last = -1;
    for (int i = 0; i < m.n; i++)
        if (!strcmp(m.rows[i].scene, "colondb_seq11c")) last = atoi(m.rows[i].view);
    cr_expect_eq(last, 18);
    manifest_free(&m);
    seq_import_stats_free(&st);
    free(src), free(map), free(out);
}
