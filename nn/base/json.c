/* json.c — see json.h. Recursive descent over a length-bounded buffer. */
#include "nn/base/json.h"
#include "nn/base/base.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *s;
    size_t len, pos;
    const char *what;
    int err;
} parser;

static int fail(parser *p, const char *msg) {
    if (!p->err) er_fail(ER_INPUT, "%s: JSON error at byte %zu: %s", p->what, p->pos, msg);
    p->err = 1;
    return ER_INPUT;
}

static void skip_ws(parser *p) {
    while (p->pos < p->len && (p->s[p->pos] == ' ' || p->s[p->pos] == '\t' || p->s[p->pos] == '\n' || p->s[p->pos] == '\r'))
        p->pos++;
}

static int hex4(parser *p, unsigned *out) {
    if (p->pos + 4 > p->len) return fail(p, "truncated \\u escape");
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p->s[p->pos++];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
        else return fail(p, "bad hex digit in \\u escape");
    }
    *out = v;
    return ER_OK;
}

static int parse_string(parser *p, char **out) {
    p->pos++; /* opening quote */
    size_t cap = 16, n = 0;
    char *buf = xmalloc(cap);
    for (;;) {
        if (p->pos >= p->len) { free(buf); return fail(p, "unterminated string"); }
        unsigned char c = (unsigned char)p->s[p->pos++];
        if (c == '"') break;
        if (c < 0x20) { free(buf); return fail(p, "control character in string"); }
        unsigned cp = c;
        int raw = 1;
        if (c == '\\') {
            if (p->pos >= p->len) { free(buf); return fail(p, "truncated escape"); }
            char e = p->s[p->pos++];
            raw = 0;
            switch (e) {
            case '"': cp = '"'; break;
            case '\\': cp = '\\'; break;
            case '/': cp = '/'; break;
            case 'b': cp = '\b'; break;
            case 'f': cp = '\f'; break;
            case 'n': cp = '\n'; break;
            case 'r': cp = '\r'; break;
            case 't': cp = '\t'; break;
            case 'u': {
                if (hex4(p, &cp)) { free(buf); return ER_INPUT; }
                if (cp >= 0xD800 && cp < 0xDC00) {
                    unsigned lo;
                    if (p->pos + 2 > p->len || p->s[p->pos] != '\\' || p->s[p->pos + 1] != 'u') { free(buf); return fail(p, "lone surrogate"); }
                    p->pos += 2;
                    if (hex4(p, &lo)) { free(buf); return ER_INPUT; }
                    if (lo < 0xDC00 || lo > 0xDFFF) { free(buf); return fail(p, "bad surrogate pair"); }
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                } else if (cp >= 0xDC00 && cp < 0xE000) { free(buf); return fail(p, "lone surrogate"); }
                break;
            }
            default: free(buf); return fail(p, "unknown escape");
            }
        }
        if (n + 5 > cap) buf = xrealloc(buf, cap *= 2);
        if (raw || cp < 0x80) buf[n++] = (char)cp;
        else if (cp < 0x800) { buf[n++] = (char)(0xC0 | (cp >> 6)); buf[n++] = (char)(0x80 | (cp & 0x3F)); }
        else if (cp < 0x10000) { buf[n++] = (char)(0xE0 | (cp >> 12)); buf[n++] = (char)(0x80 | ((cp >> 6) & 0x3F)); buf[n++] = (char)(0x80 | (cp & 0x3F)); }
        else { buf[n++] = (char)(0xF0 | (cp >> 18)); buf[n++] = (char)(0x80 | ((cp >> 12) & 0x3F)); buf[n++] = (char)(0x80 | ((cp >> 6) & 0x3F)); buf[n++] = (char)(0x80 | (cp & 0x3F)); }
    }
    buf[n] = 0;
    *out = buf;
    return ER_OK;
}

static int parse_value(parser *p, json_value *v, int depth);

static int parse_number(parser *p, json_value *v) {
    size_t start = p->pos;
    if (p->pos < p->len && p->s[p->pos] == '-') p->pos++;
    size_t digits = p->pos;
    while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') p->pos++;
    if (p->pos == digits) return fail(p, "bad number");
    int integral = 1;
    if (p->pos < p->len && p->s[p->pos] == '.') {
        integral = 0;
        p->pos++;
        size_t f = p->pos;
        while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') p->pos++;
        if (p->pos == f) return fail(p, "bad fraction");
    }
    if (p->pos < p->len && (p->s[p->pos] == 'e' || p->s[p->pos] == 'E')) {
        integral = 0;
        p->pos++;
        if (p->pos < p->len && (p->s[p->pos] == '+' || p->s[p->pos] == '-')) p->pos++;
        size_t e = p->pos;
        while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') p->pos++;
        if (p->pos == e) return fail(p, "bad exponent");
    }
    size_t n = p->pos - start;
    if (n > 63) return fail(p, "number too long");
    char tmp[64];
    memcpy(tmp, p->s + start, n);
    tmp[n] = 0;
    v->type = JSON_NUMBER;
    v->number = strtod(tmp, NULL);
    if (integral && n <= 19) {
        v->integer = strtoll(tmp, NULL, 10);
        v->is_int = 1;
    }
    return ER_OK;
}

static int parse_container(parser *p, json_value *v, int depth, int object) {
    p->pos++;
    v->type = object ? JSON_OBJECT : JSON_ARRAY;
    int cap = 0;
    skip_ws(p);
    char close = object ? '}' : ']';
    if (p->pos < p->len && p->s[p->pos] == close) { p->pos++; return ER_OK; }
    for (;;) {
        if (v->n == cap) {
            cap = cap ? cap * 2 : 8;
            v->items = xrealloc(v->items, sizeof *v->items * (size_t)cap);
            if (object) v->keys = xrealloc(v->keys, sizeof *v->keys * (size_t)cap);
        }
        json_value *item = &v->items[v->n];
        memset(item, 0, sizeof *item);
        if (object) {
            skip_ws(p);
            if (p->pos >= p->len || p->s[p->pos] != '"') return fail(p, "expected a string key");
            if (parse_string(p, &v->keys[v->n])) return ER_INPUT;
            v->n++; /* counted now so json_free releases the key on error */
            skip_ws(p);
            if (p->pos >= p->len || p->s[p->pos] != ':') return fail(p, "expected ':'");
            p->pos++;
        } else {
            v->n++;
        }
        if (parse_value(p, item, depth + 1)) return ER_INPUT;
        skip_ws(p);
        if (p->pos >= p->len) return fail(p, "unterminated container");
        char c = p->s[p->pos++];
        if (c == close) return ER_OK;
        if (c != ',') return fail(p, object ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}

static int parse_value(parser *p, json_value *v, int depth) {
    if (depth > 64) return fail(p, "nesting too deep");
    skip_ws(p);
    if (p->pos >= p->len) return fail(p, "unexpected end");
    char c = p->s[p->pos];
    if (c == '{') return parse_container(p, v, depth, 1);
    if (c == '[') return parse_container(p, v, depth, 0);
    if (c == '"') { v->type = JSON_STRING; return parse_string(p, &v->string); }
    if (c == '-' || (c >= '0' && c <= '9')) return parse_number(p, v);
    const char *words[3] = {"true", "false", "null"};
    for (int i = 0; i < 3; i++) {
        size_t wl = strlen(words[i]);
        if (p->pos + wl <= p->len && !memcmp(p->s + p->pos, words[i], wl)) {
            p->pos += wl;
            v->type = i == 2 ? JSON_NULL : JSON_BOOL;
            v->boolean = i == 0;
            return ER_OK;
        }
    }
    return fail(p, "unexpected character");
}

int json_parse(const char *text, size_t len, const char *what, json_value *out) {
    parser p = {text, len, 0, what ? what : "json", 0};
    memset(out, 0, sizeof *out);
    if (parse_value(&p, out, 0)) { json_free(out); return ER_INPUT; }
    skip_ws(&p);
    if (p.pos != p.len) { fail(&p, "trailing characters"); json_free(out); return ER_INPUT; }
    return ER_OK;
}

void json_free(json_value *v) {
    if (!v) return;
    free(v->string);
    for (int i = 0; i < v->n; i++) {
        if (v->items) json_free(&v->items[i]);
        if (v->keys) free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    memset(v, 0, sizeof *v);
}

const json_value *json_get(const json_value *obj, const char *key) {
    if (!obj || obj->type != JSON_OBJECT) return NULL;
    for (int i = 0; i < obj->n; i++)
        if (!strcmp(obj->keys[i], key)) return &obj->items[i];
    return NULL;
}

size_t json_escape(char **buf, size_t *cap, size_t len, const char *s) {
    size_t need = len + strlen(s) * 6 + 3;
    if (need > *cap) {
        *cap = need * 2;
        *buf = xrealloc(*buf, *cap);
    }
    char *b = *buf;
    b[len++] = '"';
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\') { b[len++] = '\\'; b[len++] = (char)*c; }
        else if (*c == '\n') { b[len++] = '\\'; b[len++] = 'n'; }
        else if (*c == '\r') { b[len++] = '\\'; b[len++] = 'r'; }
        else if (*c == '\t') { b[len++] = '\\'; b[len++] = 't'; }
        else if (*c < 0x20) len += (size_t)sprintf(b + len, "\\u%04x", *c);
        else b[len++] = (char)*c;
    }
    b[len++] = '"';
    b[len] = 0;
    return len;
}
