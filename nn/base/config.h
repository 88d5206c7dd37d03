/* config.h — the training config file: plain `key = value` lines, with [section] headers or dotted
 * keys (both spell the same key: `[train]` + `lr = 1e-4` is `train.lr = 1e-4`).
 *
 *   # comment (also after a value: `lr = 1e-4  # paper`)
 *   include = vit_large.cfg     # another config, path relative to this file, read in place
 *   [model]
 *   arch = vit_large
 *   [train]
 *   lr = 1.25e-4
 *
 * A trainer declares its keys in a table of cfg_spec (like nn/base/args.h): name, type, where to store
 * it, a one-line help. Values are checked against the type (int, double, string, bool = true/false/
 * 1/0/yes/no); an unknown key, a wrong type, a missing '=' or an unclosed section is ER_INPUT with
 * one message "file:line: ...". `--set key=value` overrides go through the same checks, reported as
 * "--set key=value: ...". Later assignments win (so --set after the file overrides it).
 *
 * Every key declares what it accepts in `range` (checked at assignment, so the message names the
 * file and line or the --set that gave the value):
 *   numbers   interval notation "[1, 65536]", "(0, 1)", "[0, inf)", "[-1, inf)" (inf = unbounded)
 *   strings   an allowed set "adamw|sgd", or "path" / "text" for free-form values
 *   booleans  NULL (true/false/yes/no/on/off/1/0 is the set) */
#ifndef ENDORET_BASE_CONFIG_H
#define ENDORET_BASE_CONFIG_H

#include <stdio.h>

typedef enum { CFG_INT, CFG_DOUBLE, CFG_STR, CFG_BOOL } cfg_type;

typedef struct {
    const char *key;  /* "section.name" */
    cfg_type type;
    void *dst;        /* int* / double* / char** (owned by the config: free with cfg_free_strings) / int* */
    const char *help;
    const char *range; /* see above; NULL only for booleans */
} cfg_spec;

/* A key list declares a config struct's fields and its key table at once, so that a key's name,
 * value type, C type, range and help cannot disagree: a .def file of rows
 *   KEY(field, TYPE, "section.name", "range", "help")      TYPE: INT, DOUBLE, STR or BOOL
 * included once with `#define KEY CFG_FIELD` inside the struct (a row becomes `int field;` ...) and
 * once where the table is built, with KEY turning a row into a cfg_spec bound to &c->field. */
#define CFG_CTYPE_INT int
#define CFG_CTYPE_DOUBLE double
#define CFG_CTYPE_STR char *
#define CFG_CTYPE_BOOL int
#define CFG_FIELD(field, type, key, range, help) CFG_CTYPE_##type field;

/* Read a config file into the spec table. String values replace (and free) earlier ones only when
 * they were set by this module; initial string defaults must be NULL or set with cfg_set_str. */
int cfg_load(const char *path, const cfg_spec *specs, int n);
/* Apply one "key=value" override (`origin` names it in messages, e.g. "--set"). */
int cfg_set(const char *kv, const char *origin, const cfg_spec *specs, int n);
/* The same two reading only the keys of the table: other keys of the file (or --set) are skipped,
 * values of known keys are checked as above. For a component that reads its own part of a config
 * written for a whole run (a model's model.* keys in a training config). */
int cfg_load_known(const char *path, const cfg_spec *specs, int n);
int cfg_set_known(const char *kv, const char *origin, const cfg_spec *specs, int n);
/* Set a string slot to a copy of `value` (frees the previous one). */
void cfg_set_str(char **slot, const char *value);
/* Check the values now in the slots (e.g. defaults, or values set in code) against their ranges;
 * ER_INPUT naming `origin`, the key and the value. */
int cfg_check(const cfg_spec *specs, int n, const char *origin);
/* ER_INPUT when a non-boolean key declares no range or a malformed one (for the key-table tests). */
int cfg_check_ranges_declared(const cfg_spec *specs, int n);
/* Free every CFG_STR value and NULL the slots. */
void cfg_free_strings(const cfg_spec *specs, int n);
/* Write the effective config as `key = value` lines, one per spec, in table order. */
void cfg_write(FILE *f, const cfg_spec *specs, int n);
/* The same as a malloc'd string (for checkpoint metadata). */
char *cfg_to_string(const cfg_spec *specs, int n);
/* Print the keys with their types and help (for --help). */
void cfg_print_keys(FILE *f, const cfg_spec *specs, int n);

#endif
