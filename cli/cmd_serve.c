/* cmd_serve.c — `endoret serve`: the retrieval explanation pages as a local web server
 * (retrieval_server.h) until SIGINT / SIGTERM. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "infer/report/retrieval_server.h"
#include "nn/base/args.h"
#include "nn/base/base.h"

int cmd_serve(int argc, char **argv) {
    report_opts o = REPORT_OPTS_INIT;
    const char *bind = "127.0.0.1";
    int port = 8080;
    arg_spec specs[] = {
        REPORT_ARG_SPECS(o),
        {"port", ARG_INT, &port, "TCP port (0 = any free port)"},
        {"bind", ARG_STR, &bind, "IPv4 address to listen on (default 127.0.0.1: this machine only)"},
    };
    int rc = args_parse(argc, argv, specs, REPORT_NARGS + 2,
                        "endoret serve --index DB [--query Q.safetensors --manifest QM] [--port P] [--bind 127.0.0.1]", NULL, NULL);
    if (rc == ARGS_HELP) return 0;
    if (rc) return rc;
    if ((rc = report_opts_check(&o))) return rc;
    /* block the stop signals before the daemon's thread starts, so only sigwait sees them */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    retrieval_server_cfg cfg = {o.index, o.query, o.manifest, bind, port, o.cfg};
    retrieval_server *s;
    int bound;
    if ((rc = retrieval_server_start(&cfg, &s, &bound))) {
        pthread_sigmask(SIG_UNBLOCK, &set, NULL);
        return rc;
    }
    const report_data *r = retrieval_server_report(s);
    printf("serving %d queries against %lld cases on http://%s:%d/ (Ctrl-C to stop)\n", r->nq, (long long)r->ncases, bind, bound);
    fflush(stdout);
    int sig;
    sigwait(&set, &sig);
    retrieval_server_stop(s);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    printf("stopped (%s)\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    return ER_OK;
}
