/* cmd_serve.c — `endoret serve`: the retrieval explanation pages as a local web server
 * (retrieval_server.h) until SIGINT / SIGTERM. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "infer/retrieval_server.h"
#include "nn/args.h"
#include "nn/base.h"

int cmd_serve(int argc, char **argv) {
    const char *index = NULL, *query = NULL, *man = NULL, *bind = "127.0.0.1", *vote = "majority";
    int port = 8080, k = 10, limit = 0, use_float = 0;
    double tau = 0.1;
    arg_spec specs[] = {
        {"index", ARG_STR, &index, "case database (endoret index build)"},
        {"query", ARG_STR, &query, "embedding file of the queries (none: the database's cases, leave-one-out)"},
        {"manifest", ARG_STR, &man, "manifest of the query images (none: the one named in the query file)"},
        {"k", ARG_INT, &k, "neighbours shown and voting"},
        {"vote", ARG_STR, &vote, "majority (ties -> nearest) | weighted (exp(sim/tau))"},
        {"tau", ARG_DOUBLE, &tau, "temperature of the weighted vote"},
        {"float", ARG_FLAG, &use_float, "neighbours by float cosine instead of Hamming"},
        {"limit", ARG_INT, &limit, "at most this many queries (0 = all)"},
        {"port", ARG_INT, &port, "TCP port (0 = any free port)"},
        {"bind", ARG_STR, &bind, "IPv4 address to listen on (default 127.0.0.1: this machine only)"},
    };
    int rc = args_parse(argc, argv, specs, 10, "endoret serve --index DB [--query Q.safetensors --manifest QM] [--port P] [--bind 127.0.0.1]",
                        NULL, NULL);
    if (rc == ARGS_HELP) return 0;
    if (rc) return rc;
    int weighted = !strcmp(vote, "weighted");
    if (!weighted && strcmp(vote, "majority")) return er_fail(ER_INPUT, "--vote: '%s' (majority or weighted)", vote);
    if (limit < 0) return er_fail(ER_INPUT, "--limit must be >= 0");
    /* block the stop signals before the daemon's thread starts, so only sigwait sees them */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    retrieval_server_cfg cfg = {index, query, man, bind, port, {k, weighted, tau, use_float, limit}};
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
