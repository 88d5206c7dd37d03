/* base.h — the lowest layer every part of endoret uses: error reporting, checked allocation,
 * atomic file writes, whole-file reads and a wall clock.
 *
 * Errors: library functions never exit. They return a status (ER_OK, ER_RUNTIME, ER_INPUT),
 * after recording one human-readable message with er_fail(). The CLI prints that message once
 * and exits with the status, so a user sees exactly one line naming the file/line/field at fault. */
#ifndef ENDORET_BASE_H
#define ENDORET_BASE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define ENDORET_VERSION "0.1.0"

enum { ER_OK = 0, ER_RUNTIME = 1, ER_INPUT = 2 };

/* Record an error message (printf-style) for this thread and return `code`.
 * Typical use: `return er_fail(ER_INPUT, "%s: line %d: expected 7 columns", path, line);` */
int er_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The last message recorded on this thread ("" if none). */
const char *er_msg(void);
void er_clear(void);

/* Allocation that aborts with a message on out-of-memory (the only case where we do not return
 * a status: there is no useful recovery, and a NULL deref later would hide the cause). */
void *xmalloc(size_t n);
void *xcalloc(size_t count, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
/* 64-byte aligned (AVX-512 lines); free with free(). */
void *xmalloc_aligned(size_t n);

/* Open an input that must be a regular file, for reading: opened non-blocking, so a FIFO (or a
 * device) cannot hang the open, then refused naming the path ("is a directory", "is not a regular
 * file") with ER_INPUT; the returned fd blocks again. Every reader of a user's file goes through it
 * (read_file, the safetensors reader, the case database). */
int open_regular(const char *path, int *fd);

/* Read a whole file into a NUL-terminated buffer. Returns ER_OK or ER_INPUT (naming the path). */
int read_file(const char *path, char **data, size_t *len);

/* An output file's path: ER_INPUT naming it when it is a directory or another non-regular file
 * (a FIFO) or when its folder does not exist; ER_OK for a new or a regular file. atomic_open calls
 * it, so a bad --out is exit 2, not a runtime failure at the rename. */
int check_output_path(const char *path);

/* Atomic file writes: data goes to "<path>.tmp.<pid>", is fsync'd, then renamed over <path>,
 * so a crash mid-write leaves the old file intact.
 *   FILE *f; atomic_open(path, &f, &tmp) ... fwrite ... atomic_commit(f, tmp, path)
 * atomic_abort(f, tmp) removes the temp file on failure. */
typedef struct { FILE *f; char *tmp; char *path; } atomic_file;
int atomic_open(atomic_file *af, const char *path);
int atomic_commit(atomic_file *af);
void atomic_abort(atomic_file *af);
int write_file_atomic(const char *path, const void *data, size_t len);
/* Remove "<path>.tmp.<pid>", "<path>.tmp.<pid>-journal" and "<path>.tmp.<pid>.tmp.<pid2>" (a temp
 * file's own atomic temp, as `convert --merge-lora` writes) left by writers that were killed (their
 * pid no longer runs), saying so on stderr; returns how many. atomic_open calls it, so the next
 * write of the same file cleans up after a killed one. */
int remove_stale_temps(const char *path);

/* mkdir -p; ER_OK, ER_INPUT (a file where a folder is asked for, named) or ER_RUNTIME. */
int make_dirs(const char *path);
/* rm -rf of a folder (symlinks removed, never followed); ER_OK or ER_RUNTIME naming what stayed. */
int remove_tree(const char *dir);
/* Join a directory and a relative path (absolute `rel` is returned as-is). Caller frees. */
char *path_join(const char *dir, const char *rel);
/* Directory part of a path ("." when none). Caller frees. */
char *path_dirname(const char *path);

/* printf-appends to buf (capacity cap) at *len and advances *len by what snprintf reports; once the
 * text no longer fits, later calls write nothing (buf keeps its terminated prefix). */
void buf_appendf(char *buf, size_t cap, size_t *len, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Monotonic wall clock in seconds. */
double now_seconds(void);

#endif
