/* args.h — the one command-line option parser every subcommand uses, so all of them accept
 * `--name value`, `--name=value`, `--help`, and reject unknown or malformed options the same way
 * (one message naming the option, status ER_INPUT -> exit code 2).
 *
 *   const char *out = "out"; int n = 100; double tau = 0.05; int json = 0;
 *   arg_spec specs[] = {
 *       {"out",  ARG_STR,    &out,  "output folder"},
 *       {"n",    ARG_INT,    &n,    "number of scenes"},
 *       {"tau",  ARG_DOUBLE, &tau,  "temperature"},
 *       {"json", ARG_FLAG,   &json, "machine-readable output"},
 *   };
 *   int rc = args_parse(argc, argv, specs, 4, "endoret synth [options]", &pos, &npos);
 *   if (rc == ARGS_HELP) return 0;  if (rc) return rc;   // message already in er_msg()
 *
 * argv[0] is the subcommand name (not parsed). Positional arguments are returned in order in
 * `pos` (pointers into argv, array owned by caller: free(pos)). `--` ends option parsing. */
#ifndef ENDORET_ARGS_H
#define ENDORET_ARGS_H

#include <stdint.h>
#include <stdio.h>

/* ARG_THREADS: an int in [0, ARGS_MAX_THREADS] (0 = the OpenMP default), the one range of every
 * `--threads` option (and of train.threads), so no command hands OpenMP a count it crashes on. */
typedef enum { ARG_STR, ARG_INT, ARG_DOUBLE, ARG_FLAG, ARG_FLOAT, ARG_THREADS } arg_type;
#define ARGS_MAX_THREADS 1024
#define ARGS_THREADS_RANGE "[0, 1024]" /* the same, as a config key range (train.threads) */

typedef struct {
    const char *name;  /* without leading dashes */
    arg_type type;
    void *dst;         /* const char** / int* / double* / int* / float* */
    const char *help;
} arg_spec;

#define ARGS_HELP (-1)

/* Returns ER_OK, ER_INPUT (message in er_msg()), or ARGS_HELP after printing usage to stdout. */
int args_parse(int argc, char **argv, const arg_spec *specs, int nspecs, const char *usage,
               char ***pos, int *npos);
void args_print_usage(FILE *f, const arg_spec *specs, int nspecs, const char *usage);

/* ER_OK when lo <= v <= hi, else ER_INPUT "--<name>: expected <lo>..<hi>, got <v>": the range
 * check of a size a user gives (counts, sides, k), done right after args_parse. */
int args_range(const char *name, long long v, long long lo, long long hi);

/* Parse "16,32,64" into a newly allocated int array. ER_OK / ER_INPUT naming `what`. Items are an
 * optional '-' and digits separated by single commas: " 1", "+5", "1 ,2", "1," are refused. */
int args_int_list(const char *s, const char *what, int **out, int *n);
/* The same for 64-bit integers (case ids). */
int args_int64_list(const char *s, const char *what, int64_t **out, int *n);

#endif
