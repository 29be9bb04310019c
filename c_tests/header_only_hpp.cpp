// tensordesc.hpp on its own: compiled (not linked) as C++17 by capi/lib/tests/c_abi/c_api.rs with
// -Wall -Wextra -Werror -pedantic.
#include "tensordesc.hpp"

#include <type_traits>

// What docs/c-api.md and the header promise about tdesc::error's accessors.
static_assert(std::is_same_v<decltype(std::declval<const tdesc::error &>().name()), const char *>,
              "error::name() is a static C string");
static_assert(
    std::is_same_v<decltype(std::declval<const tdesc::error &>().detail()), const std::string &>,
    "error::detail() is the exception's own std::string");

int tdesc_header_only_hpp_probe();

int tdesc_header_only_hpp_probe() {
    tdesc::location loc = tdesc::dense_location{};
    return static_cast<int>(loc.index()) + static_cast<int>(sizeof(tdesc::error));
}
