/* args.h — the one command-line option parser every subcommand uses, so all of them accept
 * `--name value`, `--name=value`, `--help`, and reject unknown or malformed options the same way
 * (one message naming the option, status ER_INPUT -> exit code 2).
 *
 * An option declares what it accepts, like a config key (config.h): its type, a range or allowed
 * set in the syntax of value_range.h, whether it is required, and its default (the value in its
 * slot before parsing, or `def` where that value is a sentinel). args_parse enforces all of it, so
 * a command checks nothing by hand that its table can say; `--help` shows each once:
 *
 *   const char *out = NULL, *kind = "mih"; int n = 100; double tau = 0.05; int json = 0;
 *   arg_spec specs[] = {
 *       {"out",  ARG_STR,    &out,  "output folder", .required = 1},
 *       {"n",    ARG_INT,    &n,    "number of scenes", "[1, 100000]"},
 *       {"kind", ARG_STR,    &kind, "index structure", "scan|balltree|mih"},
 *       {"tau",  ARG_DOUBLE, &tau,  "temperature", "(0, inf)"},
 *       {"json", ARG_FLAG,   &json, "machine-readable output"},
 *   };
 *   int rc = args_parse(argc, argv, specs, 5, "endoret synth [options]", &pos, &npos);
 *   if (rc == ARGS_HELP) return 0;  if (rc) return rc;   // message already in er_msg()
 *
 * Options that mean the same in every command (--json, --k, --threads, ...) are declared once, in
 * cli/common_opts.h. argv[0] is the subcommand name (not parsed). Positional arguments are returned
 * in order in `pos` (pointers into argv, array owned by caller: free(pos)). `--` ends option
 * parsing. A misspelt option is answered with the nearest declared one ("did you mean --k?"). */
#ifndef ENDORET_ARGS_H
#define ENDORET_ARGS_H

#include <stdint.h>
#include <stdio.h>

/* ARG_THREADS: an int in [0, ARGS_MAX_THREADS] (0 = the OpenMP default), the one range of every
 * `--threads` option (and of train.threads), so no command hands OpenMP a count it crashes on. */
typedef enum { ARG_STR, ARG_INT, ARG_DOUBLE, ARG_FLAG, ARG_FLOAT, ARG_THREADS } arg_type;
#define ARGS_MAX_THREADS 1024
#define ARGS_THREADS_RANGE "[0, 1024]" /* the same, as a config key range (train.threads) */

/* A table names the leading fields and leaves the rest zero (no range, not required, the slot's
 * default), as config keys and the examples above do: that is the point of the layout, so the
 * warning against it is off where options are declared. */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

typedef struct {
    const char *name;  /* without leading dashes */
    arg_type type;
    void *dst;         /* const char** / int* / double* / int* / float* */
    const char *help;
    const char *range; /* numbers: an interval "[1, inf)"; strings: an allowed set "a|b"; NULL: any value */
    int required;      /* args_parse fails when the option is not given */
    const char *def;   /* the default as --help shows it, where the slot's value is a sentinel ("embedding
                          size"); NULL: the slot's value; "": none shown */
} arg_spec;

#define ARGS_HELP (-1)

/* Returns ER_OK, ER_INPUT (message in er_msg()), or ARGS_HELP after printing usage to stdout. */
int args_parse(int argc, char **argv, const arg_spec *specs, int nspecs, const char *usage,
               char ***pos, int *npos);
void args_print_usage(FILE *f, const arg_spec *specs, int nspecs, const char *usage);

/* One level of sub-commands ("index build", "eval reid"): the one table shape of main.c and of every
 * command that has sub-commands. fn NULL: listed, but not part of this build. */
typedef struct {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *help;
} arg_sub;

/* argv[0] is the command ("index"), argv[1] its sub-command, run as fn(argc - 1, argv + 1) with its
 * status returned. `--help` / `-h`: usage and the table on stdout, ER_OK. None given: the same,
 * then ER_INPUT "missing sub-command". An unknown one: ER_INPUT naming the choices, with the
 * nearest ("did you mean 'build'?"). */
int args_dispatch(int argc, char **argv, const char *usage, const arg_sub *subs, int nsubs);
/* The table as `  name  help` lines. */
void args_print_subs(FILE *f, const arg_sub *subs, int nsubs);

/* ER_OK when lo <= v <= hi, else ER_INPUT "--<name>: expected <lo>..<hi>, got <v>": for a bound
 * that depends on data only known after parsing (k at most the number of cases). */
int args_range(const char *name, long long v, long long lo, long long hi);

/* Parse "16,32,64" into a newly allocated int array. ER_OK / ER_INPUT naming `what`. Items are an
 * optional '-' and digits separated by single commas: " 1", "+5", "1 ,2", "1," are refused. */
int args_int_list(const char *s, const char *what, int **out, int *n);
/* The same for 64-bit integers (case ids). */
int args_int64_list(const char *s, const char *what, int64_t **out, int *n);
/* The same for finite decimal numbers ("0,0.25,.5,-1e-3"; "inf", "nan", " 1" refused). */
int args_double_list(const char *s, const char *what, double **out, int *n);

#endif
