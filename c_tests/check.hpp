// The check harness shared by the C++ test programs: the C programs' harness (check.h:
// pass/fail counters, CHECK / EXPECT / OK, alloc64) plus status_of (the status a
// tdesc::error carries, TDESC_OK when nothing throws). Each program is one translation unit.
#ifndef TDESC_C_TESTS_CHECK_HPP
#define TDESC_C_TESTS_CHECK_HPP

#include "check.h"
#include "tensordesc.hpp"

template <class F> inline tdesc_status status_of(F &&f) {
    try {
        f();
    } catch (const tdesc::error &e) {
        return e.status();
    }
    return TDESC_OK;
}

#endif
