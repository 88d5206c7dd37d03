/* precision.c — --device / --precision for every command (see precision.h). */
#include "nn/precision.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "nn/base/base.h"

int er_precision_parse(const char *name, int *precision) {
    if (!name || !name[0] || !strcmp(name, "fp32")) *precision = ER_PREC_FP32;
    else if (!strcmp(name, "bf16")) *precision = ER_PREC_BF16;
    else return er_fail(ER_INPUT, "--precision: '%s' is not fp32 or bf16", name);
    return ER_OK;
}

int er_gemm_compute_of(int precision) { return precision == ER_PREC_BF16 ? GEMM_COMPUTE_BF16 : GEMM_COMPUTE_FP32; }

const char *er_device_name(int device) { return device == DEV_CUDA ? "cuda" : "cpu"; }

/* "cpu", "cuda" or "cuda:N" -> kind and index (-1 = the backend's default); 0 if malformed. */
static int split_device(const char *name, int *kind, int *index) {
    *index = -1;
    if (!strcmp(name, "cpu")) *kind = DEV_CPU;
    else if (!strncmp(name, "cuda", 4) && (name[4] == 0 || name[4] == ':')) *kind = DEV_CUDA;
    else return 0;
    if (*kind == DEV_CPU || name[4] == 0) return 1;
    const char *digits = name + 5;
    if (*digits < '0' || *digits > '9') return 0; /* no sign, no blank */
    char *end;
    errno = 0;
    long v = strtol(digits, &end, 10);
    if (*end || errno || v > 1 << 20) return 0;
    *index = (int)v;
    return 1;
}

int er_device_parse(const char *name, int *device) {
    *device = DEV_CPU;
    if (!name || !name[0]) return ER_OK;
    int kind, index;
    if (!split_device(name, &kind, &index))
        return er_fail(ER_INPUT, "--device: '%s' is not cpu, cuda or cuda:N (N a device index)", name);
    if (kind == DEV_CPU) return ER_OK;
    const er_backend *b = backend_get(DEV_CUDA);
    if (!b || (index >= 0 && b->set_device(index))) {
        /* the backend said why (not built, no driver, no device N); keep its words, name the value */
        char why[512];
        snprintf(why, sizeof why, "%s", er_msg());
        return er_fail(ER_INPUT, "--device %s: %s", name, why);
    }
    *device = DEV_CUDA;
    return ER_OK;
}

int er_device_error(int device, const char *what) {
    const er_backend *b = backend_get(device);
    if (!b || !b->last_error()) return ER_OK;
    char msg[600];
    snprintf(msg, sizeof msg, "%s", b->last_error());
    b->clear_error();
    return er_fail(ER_RUNTIME, "%s: CUDA error: %s", what ? what : "device", msg);
}

int er_device_check(int device, const char *what) {
    const er_backend *b = backend_get(device);
    if (!b || (b->synchronize() == 0 && !b->last_error())) return ER_OK;
    char msg[600];
    snprintf(msg, sizeof msg, "%s", b->last_error() ? b->last_error() : "synchronise failed");
    b->clear_error();
    return er_fail(ER_RUNTIME, "%s: CUDA error: %s", what ? what : "device", msg);
}
