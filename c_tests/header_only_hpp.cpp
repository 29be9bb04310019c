// tensordesc.hpp on its own: compiled (not linked) as C++17 by tests/c_api.rs with
// -Wall -Wextra -Werror -pedantic.
#include "tensordesc.hpp"

int tdesc_header_only_hpp_probe();

int tdesc_header_only_hpp_probe() {
    tdesc::location loc = tdesc::dense_location{};
    return static_cast<int>(loc.index()) + static_cast<int>(sizeof(tdesc::error));
}
