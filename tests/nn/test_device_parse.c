/* er_device_parse (nn/precision.c): "cpu", "cuda", "cuda:N"; every bad value is rejected with
 * one ER_INPUT message naming it. On a machine without a GPU (or a CPU-only build) every cuda
 * form is rejected too, still naming the value; with a GPU, cuda:0 selects device 0. */
#include <string.h>

#include "kernels/backend.h"
#include "nn/base/base.h"
#include "nn/precision.h"
#include "tests/test_util.h"

static void expect_rejected(const char *value) {
    int dev = -7;
    int rc = er_device_parse(value, &dev);
    cr_expect_eq(rc, ER_INPUT, "'%s': rc %d, want ER_INPUT", value, rc);
    cr_expect(strstr(er_msg(), value) != NULL, "'%s': message does not name it: %s", value, er_msg());
    cr_expect_eq(dev, DEV_CPU, "'%s': device must stay cpu on failure", value);
}

Test(device_parse, cpu_and_default) {
    int dev = -1;
    cr_assert_eq(er_device_parse("cpu", &dev), ER_OK);
    cr_expect_eq(dev, DEV_CPU);
    dev = -1;
    cr_assert_eq(er_device_parse(NULL, &dev), ER_OK);
    cr_expect_eq(dev, DEV_CPU);
    dev = -1;
    cr_assert_eq(er_device_parse("", &dev), ER_OK);
    cr_expect_eq(dev, DEV_CPU);
}

Test(device_parse, malformed_values_are_rejected_by_name) {
    const char *bad[] = {"cpu:1", "cpu:0", "gpu", "cuda:", "cuda:-1", "cuda:+1", "cuda: 1",
                         "cuda:x", "cuda:1x", "cuda:0.5", "cuda:99999999999999999999", "cudax",
                         "CUDA", "cuda:1:2"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) expect_rejected(bad[i]);
}

Test(device_parse, cuda_index_against_the_machine) {
    int n = backend_get(DEV_CUDA) ? backend_get(DEV_CUDA)->device_count() : 0;
    char beyond[32];
    snprintf(beyond, sizeof beyond, "cuda:%d", n); /* one past the last device (cuda:0 without a GPU) */
    expect_rejected(beyond);
    if (n == 0) {
        expect_rejected("cuda");
        return;
    }
    int dev = -1;
    cr_assert_eq(er_device_parse("cuda:0", &dev), ER_OK, "%s", er_msg());
    cr_expect_eq(dev, DEV_CUDA);
}

/* The CPU table's device services: one device, index 0 only; host memory and synchronous work. */
Test(device_parse, cpu_backend_services) {
    cr_expect_eq(backend_cpu.device_count(), 1);
    cr_expect_eq(backend_cpu.set_device(0), ER_OK);
    cr_expect_eq(backend_cpu.set_device(1), ER_INPUT);
    cr_expect(strstr(er_msg(), "cpu:1") != NULL, "%s", er_msg());
    float src[5] = {1, 2, 3, 4, 5}, *pinned = backend_cpu.host_alloc(sizeof src), dst[5] = {0};
    cr_assert_not_null(pinned);
    memcpy(pinned, src, sizeof src);
    backend_cpu.upload_async(dst, pinned, sizeof src);
    cr_expect_eq(backend_cpu.synchronize(), 0);
    cr_expect_null(backend_cpu.last_error());
    cr_expect_eq(memcmp(dst, src, sizeof src), 0);
    backend_cpu.host_free(pinned);
}
