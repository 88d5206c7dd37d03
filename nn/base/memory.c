/* memory.c — see memory.h. */
#include "nn/base/memory.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nn/base/base.h"

/* The process itself: binary, libraries, OpenMP thread stacks, allocator slack (measured: a
 * tiny ViT training run peaks at about 200 MB of RSS beyond its tensors). */
#define MEM_PROCESS_BYTES (256.0 * 1024 * 1024)

double mem_total(const mem_estimate *m) {
    return MEM_PROCESS_BYTES + m->params + m->grads + m->optimizer + m->activations + m->data;
}

static double parse_bytes(const char *s) {
    char *end;
    double v = strtod(s, &end);
    while (isspace((unsigned char)*end)) end++;
    switch (toupper((unsigned char)*end)) {
    case 'K': v *= 1024.0; break;
    case 'M': v *= 1024.0 * 1024; break;
    case 'G': v *= 1024.0 * 1024 * 1024; break;
    default: break;
    }
    return v;
}

double mem_available(void) {
    const char *env = getenv("ENDORET_MEM_LIMIT");
    if (env && *env) {
        double v = parse_bytes(env);
        if (v > 0) return v;
    }
    FILE *f = fopen("/proc/meminfo", "r");
    if (f) {
        char line[256];
        while (fgets(line, sizeof line, f)) {
            unsigned long long kb;
            if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) {
                fclose(f);
                return (double)kb * 1024.0;
            }
        }
        fclose(f);
    }
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (double)pages * page : 1e18;
}

int mem_check(const mem_estimate *m, const char *what, const char *hint) {
    const double G = 1024.0 * 1024 * 1024;
    double need = mem_total(m), have = mem_available();
    if (need <= have) return ER_OK;
    return er_fail(ER_INPUT,
                   "%s needs about %.1f GiB (weights %.2f, gradients %.2f, optimizer %.2f, activations %.2f, "
                   "data %.2f, process 0.25) but this machine has %.1f GiB available: lower %s",
                   what, need / G, m->params / G, m->grads / G, m->optimizer / G, m->activations / G, m->data / G,
                   have / G, hint);
}
