/* base.c — errors, allocation, files, clock (see base.h). */
#include "nn/base/base.h"

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static _Thread_local char er_buf[1024];

int er_fail(int code, const char *fmt, ...) {
    char tmp[sizeof er_buf]; /* an argument may be er_msg() itself: format aside, then copy */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    memcpy(er_buf, tmp, strlen(tmp) + 1);
    return code;
}

const char *er_msg(void) { return er_buf; }
void er_clear(void) { er_buf[0] = 0; }

static void oom(size_t n) {
    fprintf(stderr, "endoret: out of memory allocating %zu bytes\n", n);
    abort();
}

void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) oom(n);
    return p;
}

void *xcalloc(size_t count, size_t size) {
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p) oom(count * size);
    return p;
}

void *xrealloc(void *p, size_t n) {
    void *q = realloc(p, n ? n : 1);
    if (!q) oom(n);
    return q;
}

char *xstrdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = xmalloc(n);
    memcpy(d, s, n);
    return d;
}

void *xmalloc_aligned(size_t n) {
    void *p = NULL;
    size_t rounded = (n + 63) & ~(size_t)63;
    if (posix_memalign(&p, 64, rounded ? rounded : 64) != 0) oom(n);
    return p;
}

/* Files read whole: configs, manifests, CSVs, images, index headers. Anything bigger is refused
 * rather than trusted (a size from the file system is only a claim). */
#define READ_FILE_MAX ((size_t)1 << 32)

int open_regular(const char *path, int *fd_out) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return er_fail(ER_INPUT, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return er_fail(ER_INPUT, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return er_fail(ER_INPUT, "%s: is %s, expected a regular file", path, S_ISDIR(st.st_mode) ? "a directory" : "not a regular file");
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl != -1) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    *fd_out = fd;
    return ER_OK;
}

int read_file(const char *path, char **data, size_t *len) {
    int fd, rc = open_regular(path, &fd);
    if (rc) return rc;
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        int e = errno;
        close(fd);
        return er_fail(ER_RUNTIME, "%s: cannot open: %s", path, strerror(e));
    }
    struct stat st;
    if (fstat(fileno(f), &st) != 0) {
        int e = errno;
        fclose(f);
        return er_fail(ER_INPUT, "%s: cannot stat: %s", path, strerror(e));
    }
    if (st.st_size < 0 || (uint64_t)st.st_size > READ_FILE_MAX) {
        fclose(f);
        return er_fail(ER_INPUT, "%s: %lld bytes, more than the %zu this reader accepts", path, (long long)st.st_size, READ_FILE_MAX);
    }
    size_t n = (size_t)st.st_size;
    char *buf = xmalloc(n + 1);
    size_t got = n ? fread(buf, 1, n, f) : 0;
    int more = fgetc(f) != EOF; /* the file grew while being read: its size claim was stale */
    int err = ferror(f);
    fclose(f);
    if (got != n || more || err) {
        free(buf);
        return er_fail(ER_INPUT, "%s: %s while reading (%zu of %zu bytes)", path, more ? "file changed" : "short read", got, n);
    }
    buf[n] = 0;
    *data = buf;
    if (len) *len = n;
    return ER_OK;
}

/* The pid of a temp file name "<base>.tmp.<pid>", "<base>.tmp.<pid>-journal" or
 * "<base>.tmp.<pid>.tmp.<pid2>" (a temp file's own temp: a merged file written atomically), or 0. */
static long temp_owner(const char *name, const char *base) {
    size_t b = strlen(base);
    if (strncmp(name, base, b) || strncmp(name + b, ".tmp.", 5)) return 0;
    const char *digits = name + b + 5;
    size_t nd = strspn(digits, "0123456789");
    if (nd == 0 || nd > 9) return 0;
    const char *rest = digits + nd;
    if (*rest && strcmp(rest, "-journal")) {
        size_t nd2 = strncmp(rest, ".tmp.", 5) ? 0 : strspn(rest + 5, "0123456789");
        if (nd2 == 0 || nd2 > 9 || rest[5 + nd2]) return 0;
    }
    return strtol(digits, NULL, 10);
}

int remove_stale_temps(const char *path) {
    char *dir = path_dirname(path);
    const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
    DIR *d = opendir(dir);
    int removed = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        long pid = temp_owner(e->d_name, base);
        if (pid <= 0 || pid == (long)getpid() || kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
        char *stale = path_join(dir, e->d_name);
        if (unlink(stale) == 0) {
            fprintf(stderr, "endoret: removed %s, left by process %ld which no longer runs\n", stale, pid);
            removed++;
        }
        free(stale);
    }
    if (d) closedir(d);
    free(dir);
    return removed;
}

int check_output_path(const char *path) {
    struct stat st;
    if (!path || !*path) return er_fail(ER_INPUT, "empty output path");
    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode)) return er_fail(ER_INPUT, "%s: is a directory, expected a file to write", path);
        if (!S_ISREG(st.st_mode)) return er_fail(ER_INPUT, "%s: is not a regular file, expected a file to write", path);
        return ER_OK;
    }
    char *dir = path_dirname(path);
    int there = stat(dir, &st) == 0, ok = there && S_ISDIR(st.st_mode);
    int rc = ok ? ER_OK : er_fail(ER_INPUT, "%s: cannot write: %s %s", path, dir, there ? "is not a folder" : "does not exist");
    free(dir);
    return rc;
}

int atomic_open(atomic_file *af, const char *path) {
    af->f = NULL;
    af->tmp = af->path = NULL;
    int rc0 = check_output_path(path);
    if (rc0) return rc0;
    remove_stale_temps(path);
    size_t n = strlen(path) + 32;
    af->path = xstrdup(path);
    af->tmp = xmalloc(n);
    snprintf(af->tmp, n, "%s.tmp.%d", path, (int)getpid());
    af->f = fopen(af->tmp, "wb");
    if (!af->f) {
        int rc = er_fail(ER_RUNTIME, "%s: cannot create: %s", af->tmp, strerror(errno));
        free(af->tmp);
        free(af->path);
        af->tmp = af->path = NULL;
        return rc;
    }
    return ER_OK;
}

void atomic_abort(atomic_file *af) {
    if (af->f) fclose(af->f);
    if (af->tmp) unlink(af->tmp);
    free(af->tmp);
    free(af->path);
    af->f = NULL;
    af->tmp = af->path = NULL;
}

int atomic_commit(atomic_file *af) {
    int rc = ER_OK;
    if (fflush(af->f) != 0 || ferror(af->f))
        rc = er_fail(ER_RUNTIME, "%s: write failed: %s", af->tmp, strerror(errno));
    else if (fsync(fileno(af->f)) != 0)
        rc = er_fail(ER_RUNTIME, "%s: fsync failed: %s", af->tmp, strerror(errno));
    if (fclose(af->f) != 0 && rc == ER_OK)
        rc = er_fail(ER_RUNTIME, "%s: close failed: %s", af->tmp, strerror(errno));
    af->f = NULL;
    if (rc == ER_OK && rename(af->tmp, af->path) != 0)
        rc = er_fail(ER_RUNTIME, "%s: rename to %s failed: %s", af->tmp, af->path, strerror(errno));
    if (rc != ER_OK) unlink(af->tmp);
    free(af->tmp);
    free(af->path);
    af->tmp = af->path = NULL;
    return rc;
}

int write_file_atomic(const char *path, const void *data, size_t len) {
    atomic_file af;
    int rc = atomic_open(&af, path);
    if (rc) return rc;
    if (len && fwrite(data, 1, len, af.f) != len) {
        rc = er_fail(ER_RUNTIME, "%s: write failed: %s", path, strerror(errno));
        atomic_abort(&af);
        return rc;
    }
    return atomic_commit(&af);
}

/* mkdir of one level: a file (or FIFO) already there, or a file as a parent, is the user's input
 * at fault (exit 2 naming it); anything else (permissions, a full disk) the machine's. */
static int make_one_dir(const char *p) {
    if (mkdir(p, 0777) == 0) return ER_OK;
    int e = errno;
    struct stat st;
    if (e == EEXIST && stat(p, &st) == 0 && S_ISDIR(st.st_mode)) return ER_OK;
    if (e == EEXIST) return er_fail(ER_INPUT, "%s: exists and is not a directory", p);
    if (e == ENOTDIR) return er_fail(ER_INPUT, "%s: cannot create directory: a part of the path is a file", p);
    return er_fail(ER_RUNTIME, "%s: cannot create directory: %s", p, strerror(e));
}

int make_dirs(const char *path) {
    char *p = xstrdup(path);
    int rc = ER_OK;
    for (char *s = p + 1; *s && !rc; s++) {
        if (*s != '/') continue;
        *s = 0;
        rc = make_one_dir(p);
        *s = '/';
    }
    if (!rc) rc = make_one_dir(p);
    free(p);
    return rc;
}

static int remove_entry(const char *p, const struct stat *st, int flag, struct FTW *f) {
    (void)st; (void)flag; (void)f;
    return remove(p);
}

int remove_tree(const char *dir) {
    if (nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
        return er_fail(ER_RUNTIME, "%s: cannot remove: %s", dir, strerror(errno));
    return ER_OK;
}

char *path_join(const char *dir, const char *rel) {
    if (rel[0] == '/' || !dir || !dir[0] || strcmp(dir, ".") == 0) return xstrdup(rel);
    size_t n = strlen(dir) + strlen(rel) + 2;
    char *out = xmalloc(n);
    snprintf(out, n, "%s%s%s", dir, dir[strlen(dir) - 1] == '/' ? "" : "/", rel);
    return out;
}

char *path_dirname(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) return xstrdup(".");
    if (slash == path) return xstrdup("/");
    size_t n = (size_t)(slash - path);
    char *out = xmalloc(n + 1);
    memcpy(out, path, n);
    out[n] = 0;
    return out;
}

void buf_appendf(char *buf, size_t cap, size_t *len, const char *fmt, ...) {
    if (*len >= cap) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *len, cap - *len, fmt, ap);
    va_end(ap);
    if (n > 0) *len += (size_t)n;
}

double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}
