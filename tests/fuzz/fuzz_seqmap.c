/* Fuzz target: the map file of `data import --layout sequences --map` (datasets/importers.h): one
 * frame per line (frame,sequence,...) or runs of frames (sequence,start,end,...), read against a
 * fixed folder of frames (empty files: the importer only lists and stats them). Each input is
 * imported twice, with 3 views 1 frame apart and with views / gap taken from its length. */
#include "datasets/importers.h"
#include "datasets/manifest.h"
#include "nn/base/base.h"
#include "tests/fuzz/fuzz_util.h"

/* <fuzz_dir>/frames: numbered frames in two spellings, a zero-padded one, a name with a space, a
 * file that is no frame and a folder */
static const char *frames_dir(void) {
    static char dir[160];
    if (dir[0]) return dir;
    snprintf(dir, sizeof dir, "%s/frames", fuzz_dir());
    if (make_dirs(dir)) abort();
    char name[64];
    for (int i = 1; i <= 12; i++) {
        snprintf(name, sizeof name, "frames/f%d.png", i);
        fuzz_file(name, NULL, 0);
        snprintf(name, sizeof name, "frames/img_%d.jpg", i);
        fuzz_file(name, NULL, 0);
    }
    fuzz_file("frames/010.jpeg", NULL, 0);
    fuzz_file("frames/a b.png", NULL, 0);
    fuzz_file("frames/notes.txt", NULL, 0);
    char sub[200];
    snprintf(sub, sizeof sub, "%s/sub", dir);
    if (make_dirs(sub)) abort();
    snprintf(sub, sizeof sub, "%s/out", fuzz_dir());
    if (make_dirs(sub)) abort();
    return dir;
}

static void import_once(const char *src, const char *map, int views, int gap) {
    seq_import_opts o = seq_import_defaults();
    o.map = map;
    o.views = views;
    o.min_gap = gap;
    char out[200];
    snprintf(out, sizeof out, "%s/out/manifest.csv", fuzz_dir());
    manifest m;
    seq_import_stats st;
    if (import_sequences(src, out, &o, &m, &st) == ER_OK)
        for (int i = 0; i < m.n; i++) free(manifest_image_path(&m, i));
    manifest_free(&m);
    seq_import_stats_free(&st);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *src = frames_dir();
    char map[200];
    snprintf(map, sizeof map, "%s", fuzz_file("map.csv", data, size));
    import_once(src, map, 3, 1);
    import_once(src, map, 1 + (int)(size % 5), 1 + (int)(size / 5 % 4));
    return 0;
}
