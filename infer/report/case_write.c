/* case_write.c — tokens, the write log and the request parts of the write routes (case_write.h). */
#include "infer/report/case_write.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "nn/base/base.h"
#include "nn/base/json.h"

/* Strips a trailing newline (\n or \r\n) and checks the characters: the token, or NULL. */
static char *token_check(const char *raw, size_t len) {
    while (len && (raw[len - 1] == '\n' || raw[len - 1] == '\r')) len--;
    if (len < WRITE_TOKEN_MIN || len > WRITE_TOKEN_MAX) return NULL;
    for (size_t i = 0; i < len; i++)
        if (raw[i] <= ' ' || raw[i] > '~') return NULL;
    char *t = xmalloc(len + 1);
    memcpy(t, raw, len);
    t[len] = 0;
    return t;
}

int write_token_load(const char *file, const char *env, char **out) {
    *out = NULL;
    if (file && env) return er_fail(ER_INPUT, "give --write-token or --write-token-env, not both");
    if (env) {
        const char *v = getenv(env);
        if (!v || !*v) return er_fail(ER_INPUT, "--write-token-env %s: the variable is not set", env);
        if (!(*out = token_check(v, strlen(v))))
            return er_fail(ER_INPUT, "--write-token-env %s: a token is %d..%d printable characters without spaces", env,
                           WRITE_TOKEN_MIN, WRITE_TOKEN_MAX);
        return ER_OK;
    }
    if (!file) return ER_OK;
    int fd = open(file, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return er_fail(ER_INPUT, "--write-token %s: %s", file, strerror(errno));
    struct stat st;
    char buf[WRITE_TOKEN_MAX + 3];
    ssize_t got = 0, r;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) { close(fd); return er_fail(ER_INPUT, "--write-token %s: not a regular file", file); }
    if (st.st_mode & 077) {
        close(fd);
        return er_fail(ER_INPUT, "--write-token %s: the file may be read or written by others (mode %03o): chmod 600 it",
                       file, (unsigned)(st.st_mode & 0777));
    }
    while (got < (ssize_t)sizeof buf && (r = read(fd, buf + got, sizeof buf - (size_t)got)) > 0) got += r;
    close(fd);
    if (!(*out = token_check(buf, (size_t)got)))
        return er_fail(ER_INPUT, "--write-token %s: a token is one line of %d..%d printable characters without spaces", file,
                       WRITE_TOKEN_MIN, WRITE_TOKEN_MAX);
    return ER_OK;
}

int write_token_ok(struct MHD_Connection *c, const char *token) {
    if (!token) return 0;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!h || strncasecmp(h, "Bearer ", 7)) return 0;
    h += 7;
    while (*h == ' ') h++;
    size_t a = strlen(h), b = strlen(token);
    /* every byte of the longer one is looked at whatever matches, so the time tells nothing */
    unsigned diff = a != b;
    size_t n = a > b ? a : b;
    for (size_t i = 0; i < n; i++) diff |= (unsigned char)(i < a ? h[i] : 0) ^ (unsigned char)(i < b ? token[i] : 0);
    return diff == 0;
}

void write_client_addr(struct MHD_Connection *c, char *buf, size_t n) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    snprintf(buf, n, "?");
    if (!ci || !ci->client_addr) return;
    if (ci->client_addr->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)ci->client_addr)->sin_addr, buf, (socklen_t)n);
    else if (ci->client_addr->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)ci->client_addr)->sin6_addr, buf, (socklen_t)n);
}

static void utc_now(char *buf, size_t n) {
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

void write_log(const char *addr, const char *action, int64_t id, const char *label, const char *outcome) {
    char when[32], line[1024];
    utc_now(when, sizeof when);
    int o = snprintf(line, sizeof line, "serve: write %s %s %s", when, addr, action);
    if (id >= 0 && o < (int)sizeof line) o += snprintf(line + o, sizeof line - (size_t)o, " case %lld", (long long)id);
    if (label && o < (int)sizeof line) {
        o += snprintf(line + o, sizeof line - (size_t)o, " label ");
        for (const char *p = label; *p && o < (int)sizeof line - 8; p++) /* a client's text: no control characters */
            line[o++] = (unsigned char)*p < ' ' || *p == 0x7f ? '?' : *p;
        line[o] = 0;
    }
    if (o < (int)sizeof line) snprintf(line + o, sizeof line - (size_t)o, ": %s", outcome);
    fprintf(stderr, "%s\n", line);
    fflush(stderr);
}

int64_t write_label(const casedb *db, const char *name, char *msg, size_t n) {
    if (!db->nlabel_names) {
        snprintf(msg, n, "%s has no label names: a case cannot be filed with a diagnosis\n", db->path);
        return -1;
    }
    for (int l = 0; name && l < db->nlabel_names; l++)
        if (!strcmp(name, db->label_names[l])) return l;
    int o = snprintf(msg, n, "\"diagnosis\" must be one of the database's labels:");
    for (int l = 0; l < db->nlabel_names && o < (int)n; l++)
        o += snprintf(msg + o, n - (size_t)o, " %s", db->label_names[l]);
    if (o < (int)n) snprintf(msg + o, n - (size_t)o, "\n");
    return -1;
}

unsigned write_parse_delete(const char *body, size_t len, int64_t *id, char *msg, size_t n) {
    json_value v;
    if (json_parse(body ? body : "", len, "request body", &v)) {
        snprintf(msg, n, "%s\n", er_msg());
        return MHD_HTTP_BAD_REQUEST;
    }
    const json_value *j = json_get(&v, "id");
    unsigned st = 0;
    if (!j || j->type != JSON_NUMBER || !j->is_int || j->integer < 0) {
        snprintf(msg, n, "expected {\"id\": <case id>}\n");
        st = MHD_HTTP_BAD_REQUEST;
    } else *id = j->integer;
    json_free(&v);
    return st;
}

char *write_metadata(const char *addr, int V) {
    char when[32], buf[160];
    utc_now(when, sizeof when);
    /* addr is inet_ntop's text (digits, '.', ':', hex) or "?": nothing to escape */
    snprintf(buf, sizeof buf, "{\"filed_at\": \"%s\", \"filed_from\": \"%s\", \"views\": %d}", when, addr, V);
    return xstrdup(buf);
}
