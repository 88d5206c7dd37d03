/* precision.c — --device / --precision for every command (see precision.h). */
#include "nn/precision.h"

#include <stdio.h>
#include <string.h>

#include "kernels/backend.h"
#include "kernels/cpu/gemm.h"
#include "nn/base/base.h"
#ifdef ENDORET_CUDA
#include "kernels/cuda/cuda_backend.h"
#endif

static int g_precision = ER_PREC_FP32;

int er_set_precision(const char *name) {
    int p;
    if (!name || !name[0] || !strcmp(name, "fp32")) p = ER_PREC_FP32;
    else if (!strcmp(name, "bf16")) p = ER_PREC_BF16;
    else return er_fail(ER_INPUT, "--precision: '%s' is not fp32 or bf16", name);
    sgemm_set_precision(p == ER_PREC_BF16 ? SGEMM_BF16 : SGEMM_FP32);
#ifdef ENDORET_CUDA
    cuda_set_precision(p == ER_PREC_BF16);
#endif
    g_precision = p;
    return ER_OK;
}

int er_get_precision(void) { return g_precision; }

const char *er_precision_name(int precision) { return precision == ER_PREC_BF16 ? "bf16" : "fp32"; }

const char *er_device_name(int device) { return device == DEV_CUDA ? "cuda" : "cpu"; }

int er_device_parse(const char *name, int *device) {
    *device = DEV_CPU;
    if (!name || !name[0] || !strcmp(name, "cpu")) return ER_OK;
    if (strcmp(name, "cuda")) return er_fail(ER_INPUT, "--device: '%s' is not cpu or cuda", name);
#ifdef ENDORET_CUDA
    if (!backend_get(DEV_CUDA)) {
        /* backend_cuda() said why (no driver / no device); keep its words, make it an input error */
        char why[512];
        snprintf(why, sizeof why, "%s", er_msg());
        return er_fail(ER_INPUT, "%s", why[0] ? why : "--device cuda: no usable CUDA device");
    }
#else
    if (!backend_get(DEV_CUDA))
        return er_fail(ER_INPUT, "--device cuda: this build has no CUDA backend (rebuild with make CUDA=1 where nvcc is installed)");
#endif
    *device = DEV_CUDA;
    return ER_OK;
}

int er_device_check(int device, const char *what) {
#ifdef ENDORET_CUDA
    if (device == DEV_CUDA) {
        cuda_synchronize();
        const char *e = cuda_backend_error();
        if (e) {
            char msg[600];
            snprintf(msg, sizeof msg, "%s", e);
            cuda_backend_clear_error();
            return er_fail(ER_RUNTIME, "%s: CUDA error: %s", what ? what : "device", msg);
        }
    }
#else
    (void)what;
#endif
    (void)device;
    return ER_OK;
}
