/* cpu_info.c — runtime CPU feature detection and the one-line description of the CPU backend
 * that `endoret --version` prints ("openmp avx512 (2 threads)"). Detection is at run time, so a
 * binary built for a generic x86-64 still picks the best sgemm kernel on the machine it runs on. */
#include <stdio.h>
#include <omp.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#endif

#include "kernels/gemm.h"
#include "kernels/cpu/gemm_internal.h"

int cpu_has_avx512(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    /* __builtin_cpu_supports also checks that the OS saves the zmm state (XGETBV). */
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw");
#else
    return 0;
#endif
}

/* AVX512_BF16 (vcvtne2ps2bf16, vdpbf16ps): CPUID leaf 7 sub-leaf 1, EAX bit 5, on top of the
 * AVX-512 checks above (which include the OS saving the zmm/opmask state). Read directly because
 * __builtin_cpu_supports("avx512bf16") needs a newer compiler than some we build with. */
static int read_avx512_bf16(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (!cpu_has_avx512()) return 0;
    unsigned eax, ebx, ecx, edx;
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) || eax < 1) return 0;  /* max sub-leaf */
    if (!__get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx)) return 0;
    return (eax >> 5) & 1u;
#else
    return 0;
#endif
}

/* Read once: CPUID traps to the hypervisor in a VM (attention asks on every call; 0.7 % of a
 * batch-1 encoder's samples went to it). The answer never changes, so a racing first read is
 * harmless. */
int cpu_has_avx512_bf16(void) {
    static int known = -1;
    int v = __atomic_load_n(&known, __ATOMIC_RELAXED);
    if (v < 0) __atomic_store_n(&known, v = read_avx512_bf16(), __ATOMIC_RELAXED);
    return v;
}

int cpu_has_avx2_fma(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return 0;
#endif
}

const char *cpu_backend_describe(void) {
    static char buf[96];
    const char *isa = sgemm_kernel_name(SGEMM_FP32); /* the instruction set: its fp32 kernels name it */
    char isa_word[16];
    int i = 0;
    while (isa[i] && isa[i] != '-' && i < (int)sizeof isa_word - 1) { isa_word[i] = isa[i]; i++; }
    isa_word[i] = 0;
    snprintf(buf, sizeof buf, "openmp %s (%d threads)", isa_word, omp_get_max_threads());
    return buf;
}
