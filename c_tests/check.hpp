// The check harness shared by the C++ test programs: pass/fail counters, CHECK (which also
// prints the thread's last tensordesc error), and status_of (the status a tdesc::error
// carries, TDESC_OK when nothing throws). Each program is one translation unit.
#ifndef TDESC_C_TESTS_CHECK_HPP
#define TDESC_C_TESTS_CHECK_HPP

#include <cstdio>

#include "tensordesc.hpp"

static int passed = 0;
static int failed = 0;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (cond) {                                                                                \
            ++passed;                                                                              \
        } else {                                                                                   \
            ++failed;                                                                              \
            std::fprintf(stderr, "FAIL %s:%d: %s (last error: %s)\n", __FILE__, __LINE__, #cond,   \
                         tdesc_last_error());                                                      \
        }                                                                                          \
    } while (0)

template <class F> inline tdesc_status status_of(F &&f) {
    try {
        f();
    } catch (const tdesc::error &e) {
        return e.status();
    }
    return TDESC_OK;
}

#endif
