/* Golden vectors through the C ABI: every line of tests/vectors/manifest.txt is decoded
 * with tdesc_descriptor_decode and checked field by field (element type, rank, shape,
 * layout, effective buffers, regions, locate results, bindability, consumed bytes) and
 * every accepted vector must re-encode to exactly its bytes.
 *
 * usage: test_golden VECTORS_DIR
 */
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensordesc.h"

#include "golden_hex.h"


/* Parse "a,b,c" (or "-" for none) into idx; returns the count or -1. */
static int parse_list(const char *s, uint64_t *idx, int max) {
    if (strcmp(s, "-") == 0) {
        return 0;
    }
    int n = 0;
    while (*s) {
        if (n == max) {
            return -1;
        }
        char *end;
        idx[n++] = strtoull(s, &end, 10);
        if (end == s) {
            return -1;
        }
        s = *end == ',' ? end + 1 : end;
    }
    return n;
}

static void check_locate(const char *vec, const tdesc_descriptor *d, const char *spec) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", spec);
    char *arrow = strstr(buf, "->");
    if (!arrow) {
        FAILF("%s: malformed locate token %s", vec, spec);
        return;
    }
    *arrow = '\0';
    const char *expect = arrow + 2;
    uint64_t idx[TDESC_MAX_RANK];
    int rank = parse_list(buf, idx, TDESC_MAX_RANK);
    if (rank < 0) {
        FAILF("%s: malformed index in %s", vec, spec);
        return;
    }
    tdesc_location loc;
    tdesc_status st = tdesc_descriptor_locate(d, idx, (size_t)rank, &loc);
    if (strncmp(expect, "DENSE:", 6) == 0) {
        unsigned long long b = 0, off = 0;
        unsigned shift = 0;
        if (sscanf(expect, "DENSE:%llu:%llu:%u", &b, &off, &shift) != 3) {
            FAILF("%s: malformed %s", vec, spec);
            return;
        }
        CHECKF(st == TDESC_OK && loc.tag == TDESC_LOCATION_DENSE && loc.DENSE.buffer == b &&
                   loc.DENSE.byte_offset == off && loc.DENSE.bit_shift == shift,
               "%s: locate %s gave status %s tag %u", vec, spec, tdesc_status_name(st),
               (unsigned)loc.tag);
    } else if (strncmp(expect, "LOOKUP:", 7) == 0) {
        char region[32];
        unsigned tag = 0;
        if (sscanf(expect, "LOOKUP:%31[^:]:0x%x", region, &tag) != 2) {
            FAILF("%s: malformed %s", vec, spec);
            return;
        }
        uint32_t want_region =
            strcmp(region, "none") == 0 ? TDESC_NO_REGION : (uint32_t)strtoul(region, NULL, 10);
        CHECKF(st == TDESC_OK && loc.tag == TDESC_LOCATION_LOOKUP &&
                   loc.LOOKUP.region == want_region && loc.LOOKUP.layout_tag == tag,
               "%s: locate %s gave status %s", vec, spec, tdesc_status_name(st));
    } else {
        CHECKF(strcmp(tdesc_status_name(st), expect) == 0, "%s: locate %s gave %s", vec, spec,
               tdesc_status_name(st));
    }
}

static void check_line(const char *dir, char *line) {
    char *tok[64];
    int n = 0;
    for (char *t = strtok(line, " \t\r\n"); t && n < 64; t = strtok(NULL, " \t\r\n")) {
        tok[n++] = t;
    }
    if (n == 0 || tok[0][0] == '#') {
        return;
    }
    if (n < 3) {
        FAILF("malformed manifest line for %s", tok[0]);
        return;
    }
    const char *name = tok[0];
    tdesc_mode mode = strcmp(tok[1], "strict") == 0 ? TDESC_MODE_STRICT : TDESC_MODE_PERMISSIVE;
    size_t len = 0;
    uint8_t *bytes = read_hex(dir, name, &len);
    if (!bytes) {
        FAILF("%s: cannot read %s/%s.hex", name, dir, name);
        return;
    }
    tdesc_descriptor *d = (tdesc_descriptor *)&passed; /* must be overwritten with NULL */
    size_t consumed = 0;
    tdesc_status st = tdesc_descriptor_decode(bytes, len, mode, &d, &consumed);
    if (strcmp(tok[2], "OK") != 0) {
        CHECKF(strcmp(tdesc_status_name(st), tok[2]) == 0 && d == NULL,
               "%s (%s): expected %s, got %s (%s)", name, tok[1], tok[2], tdesc_status_name(st),
               tdesc_last_error());
        CHECKF(strlen(tdesc_last_error()) > strlen(tok[2]) + 2, "%s: the detail is empty", name);
        free(bytes);
        return;
    }
    if (st != TDESC_OK) {
        FAILF("%s (%s): decode failed: %s", name, tok[1], tdesc_last_error());
        free(bytes);
        return;
    }
    if (n < 8) {
        FAILF("%s: OK line needs ET RANK SHAPE LAYOUT BUFFERS REGIONS", name);
    } else {
        CHECKF(strcmp(tdesc_element_type_name(tdesc_descriptor_element_type(d)), tok[3]) == 0,
               "%s: element type %s", name, tok[3]);
        uint64_t shape[TDESC_MAX_RANK];
        int rank = parse_list(tok[5], shape, TDESC_MAX_RANK);
        CHECKF(rank == (int)strtol(tok[4], NULL, 10) && tdesc_descriptor_rank(d) == rank,
               "%s: rank", name);
        const uint64_t *got = tdesc_descriptor_shape(d);
        for (int a = 0; a < rank && a < tdesc_descriptor_rank(d); ++a) {
            CHECKF(got[a] == shape[a], "%s: shape[%d] = %" PRIu64, name, a, got[a]);
        }
        CHECKF(tdesc_descriptor_layout(d) == strtoul(tok[6], NULL, 16), "%s: layout", name);
        CHECKF(tdesc_descriptor_buffer_count(d) == strtoull(tok[7], NULL, 10), "%s: buffers",
               name);
        CHECKF(n > 8 && tdesc_descriptor_region_count(d) == strtoull(tok[8], NULL, 10),
               "%s: regions", name);
    }
    size_t want_consumed = len;
    for (int i = 9; i < n; ++i) {
        if (strncmp(tok[i], "locate=", 7) == 0) {
            check_locate(name, d, tok[i] + 7);
        } else if (strncmp(tok[i], "bindable=", 9) == 0) {
            bool yes = strcmp(tok[i] + 9, "yes") == 0;
            CHECKF(tdesc_descriptor_is_bindable(d) == yes, "%s: bindable", name);
        } else if (strncmp(tok[i], "consumed=", 9) == 0) {
            want_consumed = (size_t)strtoull(tok[i] + 9, NULL, 10);
        }
    }
    CHECKF(consumed == want_consumed && tdesc_descriptor_encoded_len(d) == want_consumed,
           "%s: consumed %zu, expected %zu", name, consumed, want_consumed);
    /* Re-encoding gives back the bytes; the size query reports the exact need. */
    size_t need = 0;
    CHECKF(tdesc_descriptor_encode(d, NULL, 0, &need) == TDESC_ERR_OUTPUT_TOO_SMALL &&
               need == want_consumed,
           "%s: size query", name);
    uint8_t *again = malloc(need);
    size_t written = 0;
    CHECKF(again && tdesc_descriptor_encode(d, again, need, &written) == TDESC_OK &&
               written == want_consumed && memcmp(again, bytes, written) == 0,
           "%s: re-encoding differs", name);
    free(again);
    tdesc_descriptor_free(d);
    free(bytes);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s VECTORS_DIR\n", argv[0]);
        return 2;
    }
    char path[1024];
    snprintf(path, sizeof path, "%s/manifest.txt", argv[1]);
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        return 2;
    }
    char line[8192];
    int lines = 0;
    while (fgets(line, sizeof line, f)) {
        ++lines;
        check_line(argv[1], line);
    }
    fclose(f);
    CHECKF(lines > 10, "manifest has only %d lines", lines);
    printf("c_golden: %d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
