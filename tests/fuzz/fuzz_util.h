/* fuzz_util.h — shared by the libFuzzer targets of tests/fuzz/ (one file per target, built and run by
 * `make fuzz`). The loaders under test read files, so each input is written to one scratch file per
 * process first. A target may return an error for any input; it must never crash, leak, overflow or
 * hit undefined behaviour (ASan + UBSan abort on those). */
#ifndef ENDORET_FUZZ_UTIL_H
#define ENDORET_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A folder of this process's own, made once. */
static const char *fuzz_dir(void) {
    static char dir[64];
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/endoret_fuzz_XXXXXX");
        if (!mkdtemp(dir)) abort();
    }
    return dir;
}

/* Writes data to <fuzz_dir>/<name> (replacing it) and returns that path (static buffer). */
static const char *fuzz_file(const char *name, const uint8_t *data, size_t size) {
    static char path[128];
    snprintf(path, sizeof path, "%s/%s", fuzz_dir(), name);
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (size && fwrite(data, 1, size, f) != size) abort();
    fclose(f);
    return path;
}

/* data as a NUL-terminated string (malloc'ed): text parsers see what a file would hold. */
static char *fuzz_text(const uint8_t *data, size_t size) {
    char *t = malloc(size + 1);
    if (!t) abort();
    memcpy(t, data, size);
    t[size] = 0;
    return t;
}

#endif
