/* The check harness shared by the C test programs: pass/fail counters, CHECK / EXPECT / OK,
 * and 64-byte aligned host allocations. Each program is one translation unit. */
#ifndef TDESC_C_TESTS_CHECK_H
#define TDESC_C_TESTS_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensordesc.h"

static int passed = 0;
static int failed = 0;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (cond) {                                                                                \
            ++passed;                                                                              \
        } else {                                                                                   \
            ++failed;                                                                              \
            fprintf(stderr, "FAIL %s:%d: %s (last error: %s)\n", __FILE__, __LINE__, #cond,        \
                    tdesc_last_error());                                                           \
        }                                                                                          \
    } while (0)

#define EXPECT(call, want)                                                                         \
    do {                                                                                           \
        tdesc_status got_ = (call);                                                                \
        if (got_ == (want)) {                                                                      \
            ++passed;                                                                              \
        } else {                                                                                   \
            ++failed;                                                                              \
            fprintf(stderr, "FAIL %s:%d: %s gave %s, expected %s (last error: %s)\n", __FILE__,    \
                    __LINE__, #call, tdesc_status_name(got_), tdesc_status_name(want),             \
                    tdesc_last_error());                                                           \
        }                                                                                          \
    } while (0)

#define OK(call) EXPECT(call, TDESC_OK)

/* A 64-byte aligned, zeroed host allocation (aligned_alloc needs a multiple of 64). */
static inline void *alloc64(size_t n) {
    size_t rounded = n == 0 ? 64 : (n + 63) / 64 * 64;
    void *p = aligned_alloc(64, rounded);
    if (p) {
        memset(p, 0, rounded);
    }
    return p;
}

#endif
