/* access_log.c — see access_log.h. */
#include "infer/report/access_log.h"

#include <string.h>
#include <time.h>

void access_log_format(char *buf, size_t n, const char *when, const char *addr, const char *method, const char *path,
                       unsigned status, double ms) {
    char clean[ACCESS_LOG_MAX_PATH + 4];
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)(path ? path : ""); *p && o < ACCESS_LOG_MAX_PATH; p++)
        clean[o++] = *p < 0x20 || *p == 0x7f ? '?' : (char)*p;
    if (path && strlen(path) > ACCESS_LOG_MAX_PATH) clean[o++] = '.', clean[o++] = '.', clean[o++] = '.';
    clean[o] = 0;
    snprintf(buf, n, "serve: %s %s %s %s %u %.1f ms", when, addr && *addr ? addr : "?", method ? method : "?", clean, status,
             ms);
}

void access_log_write(FILE *f, const char *addr, const char *method, const char *path, unsigned status, double ms) {
    if (!f) return;
    char when[32], line[ACCESS_LOG_MAX_PATH + 256];
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    access_log_format(line, sizeof line - 1, when, addr, method, path, status, ms);
    strcat(line, "\n");
    fputs(line, f);
    fflush(f);
}
