/* tensordesc.h on its own: compiled (not linked) as C11 and as C++17 by capi/lib/tests/c_abi/c_api.rs
 * with -Wall -Wextra -Werror -pedantic. */
#include "tensordesc.h"

int tdesc_header_only_probe(void);

int tdesc_header_only_probe(void) {
    tdesc_location loc;
    loc.tag = TDESC_LOCATION_DENSE;
    loc.DENSE.region = TDESC_NO_REGION;
    loc.DENSE.buffer = 0;
    loc.DENSE.byte_offset = 0;
    loc.DENSE.bit_shift = 0;
    tdesc_region r;
    r.origin[TDESC_MAX_RANK - 1] = 0;
    tdesc_status s = TDESC_ERR_REGION_OVERLAP;
    tdesc_mode m = TDESC_MODE_PERMISSIVE;
    tdesc_buffer_role role = TDESC_ROLE_PAGE_POOL;
    return (int)(s + m + role + (int)r.origin[TDESC_MAX_RANK - 1] + (int)loc.DENSE.bit_shift +
                 TDESC_ABI_VERSION + TDESC_VERSION_MAJOR);
}
