/* profile.c — the timing wrapper table of kernels/profile.h and its counters.
 * One wrapper per ops.def entry and device, generated from the list: it times the real table's
 * entry and adds the call to (phase, op). Ops whose first argument selects what they compute
 * (unary, binary, reduce and their gradients) are counted per selector ("unary.gelu"). */
#include "kernels/profile.h"

#include <string.h>

#include "nn/base/base.h"

int prof_enabled;

enum {
#define ER_OP(ret, name, params, args) PROF_ID_##name,
#include "kernels/ops.def"
#undef ER_OP
    PROF_NOPS
};

static const char *const op_names[PROF_NOPS] = {
#define ER_OP(ret, name, params, args) #name,
#include "kernels/ops.def"
#undef ER_OP
};

/* Ops counted per selector (their first argument), each a block of SUB_SLOTS keys after the
 * plain ops: block number + 1 here (0 = counted as one op). */
enum { SUB_SLOTS = 16, SUB_BLOCKS = 6, PROF_NKEYS = PROF_NOPS + SUB_BLOCKS * SUB_SLOTS };
static const signed char sub_block[PROF_NOPS] = {
    [PROF_ID_unary] = 1, [PROF_ID_unary_backward] = 2, [PROF_ID_binary] = 3,
    [PROF_ID_binary_grad] = 4, [PROF_ID_reduce] = 5, [PROF_ID_reduce_backward] = 6,
};
static const char *const un_names[UN_COUNT] = {"affine", "exp", "log", "sqrt", "abs", "pow",
                                               "clamp", "gelu", "relu", "sigmoid", "tanh"};
static const char *const bin_names[BIN_COUNT] = {"add", "sub", "mul", "div"};
static const char *const red_names[RED_COUNT] = {"sum", "mean", "max"};

static int64_t g_calls[PROF_PHASES][PROF_NKEYS];
static double g_sec[PROF_PHASES][PROF_NKEYS];
static double g_phase_sec[PROF_PHASES], g_phase_t0;
static int g_phase;
static char g_sub_name[SUB_BLOCKS * SUB_SLOTS][40];

static inline int prof_key(int id, intptr_t first) {
    int b = sub_block[id];
    if (b == 0 || first < 0 || first >= SUB_SLOTS) return id;
    return PROF_NOPS + (b - 1) * SUB_SLOTS + (int)first;
}

/* ---- the wrappers: prof<D>_<name>, D = the device the inner table belongs to ---- */
static const er_backend *g_inner[DEV_COUNT];
static er_backend g_table[DEV_COUNT];

static inline double prof_begin(int dev) {
    if (dev != DEV_CPU) g_inner[dev]->synchronize(); /* the queue ahead of this kernel is not its time */
    return now_seconds();
}

static inline void prof_end(int dev, int key, double t0) {
    if (dev != DEV_CPU) g_inner[dev]->synchronize();
    g_sec[g_phase][key] += now_seconds() - t0;
    g_calls[g_phase][key]++;
}

#define PROF_PASTE_(a, d, name) a##d##_##name
#define PROF_PASTE(a, d, name) PROF_PASTE_(a, d, name)
#define PROF_FIRST_(a, ...) a
#define PROF_FIRST(args) PROF_FIRST_ args
/* keep the inner call's value (and return it) for the ops that have one */
#define PROF_KEEP_void
#define PROF_KEEP_int int r_ =
#define PROF_KEEP_size_t size_t r_ =
#define PROF_KEEP_double double r_ =
#define PROF_RETURN_void
#define PROF_RETURN_int return r_;
#define PROF_RETURN_size_t return r_;
#define PROF_RETURN_double return r_;
#define ER_OP(ret, name, params, args)                                                       \
    static ret PROF_PASTE(prof, PROF_DEV, name) params {                                     \
        double t0 = prof_begin(PROF_DEV);                                                    \
        PROF_KEEP_##ret g_inner[PROF_DEV]->name args;                                        \
        prof_end(PROF_DEV, prof_key(PROF_ID_##name, (intptr_t)(PROF_FIRST(args))), t0);      \
        PROF_RETURN_##ret                                                                    \
    }
#define PROF_DEV 0
#include "kernels/ops.def"
#undef PROF_DEV
#define PROF_DEV 1
#include "kernels/ops.def"
#undef PROF_DEV
#undef ER_OP

_Static_assert(DEV_CPU == 0 && DEV_CUDA == 1 && DEV_COUNT == 2, "one wrapper set per device");

const er_backend *prof_wrap(const er_backend *inner) {
    int d = inner->device;
    if (g_inner[d] == inner) return &g_table[d];
    g_inner[d] = inner;
    er_backend t = *inner; /* storage and device services stay inner's own */
    /* workspace sizes are not work: they go straight to the kernel's entry */
#define ER_OP(ret, name, params, args) \
    t.name = strstr(#name, "_workspace") ? inner->name : d == 0 ? prof0_##name : prof1_##name;
#include "kernels/ops.def"
#undef ER_OP
    g_table[d] = t;
    return &g_table[d];
}

/* ---- the window ---- */
static void phase_close(void) {
    double t = now_seconds();
    g_phase_sec[g_phase] += t - g_phase_t0;
    g_phase_t0 = t;
}

void prof_start(void) {
    memset(g_calls, 0, sizeof g_calls);
    memset(g_sec, 0, sizeof g_sec);
    memset(g_phase_sec, 0, sizeof g_phase_sec);
    g_phase = PROF_FORWARD;
    g_phase_t0 = now_seconds();
    prof_enabled = 1;
}

void prof_stop(void) {
    if (!prof_enabled) return;
    phase_close();
    prof_enabled = 0;
}

int prof_phase(int phase) {
    int prev = g_phase;
    if (!prof_enabled || phase == g_phase || phase < 0 || phase >= PROF_PHASES) return prev;
    phase_close();
    g_phase = phase;
    return prev;
}

static const char *key_name(int key) {
    if (key < PROF_NOPS) return op_names[key];
    int s = key - PROF_NOPS, b = s / SUB_SLOTS, sel = s % SUB_SLOTS;
    char *buf = g_sub_name[s];
    if (!buf[0]) {
        const char *base = "?", *what = NULL;
        for (int i = 0; i < PROF_NOPS; i++)
            if (sub_block[i] == b + 1) base = op_names[i];
        if (b < 2) what = sel < UN_COUNT ? un_names[sel] : NULL;
        else if (b < 4) what = sel < BIN_COUNT ? bin_names[sel] : NULL;
        else what = sel < RED_COUNT ? red_names[sel] : NULL;
        if (what) snprintf(buf, sizeof g_sub_name[0], "%s.%s", base, what);
        else snprintf(buf, sizeof g_sub_name[0], "%s.%d", base, sel);
    }
    return buf;
}

int prof_entries(prof_entry *out, int cap) {
    int n = 0;
    for (int p = 0; p < PROF_PHASES; p++)
        for (int k = 0; k < PROF_NKEYS; k++) {
            if (!g_calls[p][k]) continue;
            if (n < cap) out[n] = (prof_entry){.name = key_name(k), .phase = p, .calls = g_calls[p][k], .seconds = g_sec[p][k]};
            n++;
        }
    return n;
}

double prof_phase_seconds(int phase) { return phase >= 0 && phase < PROF_PHASES ? g_phase_sec[phase] : 0; }

const char *prof_phase_name(int phase) {
    static const char *const names[PROF_PHASES] = {"forward", "backward", "optimizer", "data", "loop"};
    return phase >= 0 && phase < PROF_PHASES ? names[phase] : "?";
}
