/* Decodes bytes built with the C builder, from a statically linked libtensordesc. */
#include <stdio.h>
#include <stdlib.h>

#include <tensordesc.h>

int main(void) {
    tdesc_node_spec *n = NULL;
    tdesc_builder *b = NULL;
    const uint64_t shape[2] = {2, 3};
    if (tdesc_node_new_row_major(&n) != TDESC_OK ||
        tdesc_builder_new(TDESC_ELEMENT_FLOAT64, shape, 2, n, &b) != TDESC_OK) {
        fprintf(stderr, "builder: %s\n", tdesc_last_error());
        return 1;
    }
    uint8_t bytes[256];
    size_t len = 0;
    tdesc_status s = tdesc_builder_encode(b, bytes, sizeof bytes, &len);
    tdesc_builder_free(b);
    tdesc_descriptor *d = NULL;
    if (s != TDESC_OK || tdesc_descriptor_decode(bytes, len, TDESC_MODE_STRICT, &d, NULL) != TDESC_OK) {
        fprintf(stderr, "decode: %s\n", tdesc_last_error());
        return 1;
    }
    const uint64_t idx[2] = {1, 2};
    tdesc_location loc;
    if (tdesc_descriptor_locate(d, idx, 2, &loc) != TDESC_OK || loc.tag != TDESC_LOCATION_DENSE) {
        fprintf(stderr, "locate: %s\n", tdesc_last_error());
        return 1;
    }
    printf("static: bytes=%zu rank=%u layout=%s offset=%llu\n", len, tdesc_descriptor_rank(d),
           tdesc_layout_name(tdesc_descriptor_layout(d)), (unsigned long long)loc.DENSE.byte_offset);
    tdesc_descriptor_free(d);
    return 0;
}
