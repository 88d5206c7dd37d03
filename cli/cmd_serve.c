/* cmd_serve.c — `endoret serve`: the retrieval explanation pages as a local web server
 * (retrieval_server.h) until SIGINT / SIGTERM. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "infer/report/case_write.h"
#include "infer/report/retrieval_server.h"
#include "cli/common_opts.h"
#include "nn/base/base.h"

int cmd_serve(int argc, char **argv) {
    report_opts o = REPORT_OPTS_INIT;
    const char *bind = "127.0.0.1", *model = NULL, *roots = NULL, *token_file = NULL, *token_env = NULL,
               *log_to = "-";
    int port = 8080, max_views = 16;
    arg_spec specs[] = {
        OPT_REPORT(o),
        {"port", ARG_INT, &port, "TCP port (0 = any free port)", "[0, 65535]"},
        {"bind", ARG_STR, &bind, "IPv4 address to listen on (127.0.0.1: this machine only)"},
        {"model", ARG_STR, &model, "encoder for new cases (POST /case, the /new page): a scene model fuses the views"},
        {"image-root", ARG_STR, &roots, "folders (comma-separated) whose images a JSON case may name"},
        {"max-views", ARG_INT, &max_views, "images per new case", "[1, inf)"},
        {"write-token", ARG_STR, &token_file, "a file (mode 600) holding the token that lets a client file and delete cases "
                                              "(POST /case/file.json, /case/delete.json); without it the server is read-only"},
        {"write-token-env", ARG_STR, &token_env, "the environment variable holding that token (instead of --write-token)"},
        {"access-log", ARG_STR, &log_to, "one line per request (time, client, method, path, status, ms): - = stderr, "
                                         "none = off, else a file appended to", .def = "-"},
    };
    int rc = args_parse(argc, argv, specs, OPT_REPORT_N + 8,
                        "endoret serve --index DB [--query Q.safetensors --manifest QM] [--model M [--image-root DIR,...] "
                        "[--write-token FILE | --write-token-env VAR]] [--port P] [--bind 127.0.0.1]", NULL, NULL);
    if (rc == ARGS_HELP) return 0;
    if (rc) return rc;
    if ((rc = report_opts_check(&o))) return rc;
    FILE *log = !strcmp(log_to, "-") ? stderr : NULL;
    if (strcmp(log_to, "-") && strcmp(log_to, "none") && !(log = fopen(log_to, "a")))
        return er_fail(ER_INPUT, "--access-log %s: cannot append to it (%s)", log_to, strerror(errno));
    char *token = NULL;
    if ((rc = write_token_load(token_file, token_env, &token))) {
        if (log && log != stderr) fclose(log);
        return rc;
    }
    /* block the stop signals before the daemon's thread starts, so only sigwait sees them */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    retrieval_server_cfg cfg = {o.index, o.query, o.manifest, bind, port, o.cfg, model, roots, max_views, 0, 0, 0, 0, token, NULL, NULL, log};
    retrieval_server *s;
    int bound;
    rc = retrieval_server_start(&cfg, &s, &bound);
    if (token) { /* the server keeps its own copy */
        memset(token, 0, strlen(token));
        free(token);
    }
    if (rc) {
        pthread_sigmask(SIG_UNBLOCK, &set, NULL);
        if (log && log != stderr) fclose(log);
        return rc;
    }
    const report_data *r = retrieval_server_report(s);
    printf("serving %d queries against %lld cases on http://%s:%d/%s%s (Ctrl-C to stop)\n", r->nq, (long long)r->ncases, bind,
           bound, model ? "; new cases: /new, POST /case, POST /case.json" : "",
           cfg.write_token ? "; writes (token): POST /case/file.json, /case/delete.json" : "; read-only");
    fflush(stdout);
    int sig;
    sigwait(&set, &sig);
    retrieval_server_stop(s);
    if (log && log != stderr) fclose(log);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    printf("stopped (%s)\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    return ER_OK;
}
