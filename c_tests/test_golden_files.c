/* Golden .tdf file vectors through the C ABI: every line of tests/vectors/files/manifest.txt
 * is opened with tdesc_file_open_bytes and, from a copy on disk, with tdesc_file_open (the
 * mapping), and checked: the status, the container version, the entries (names, data
 * region lengths, opaque entries and why), buffer bytes and alignment, element values of
 * the bound (read-only) tensors, and the padding check.
 *
 * usage: test_golden_files FILE_VECTORS_DIR SCRATCH_DIR
 */
#include <ctype.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensordesc.h"

#include "golden_hex.h"


/* Plain hex ("-" for none) into out; returns the byte count or -1. */
static long parse_plain_hex(const char *s, uint8_t *out, size_t max) {
    if (strcmp(s, "-") == 0) {
        return 0;
    }
    size_t n = strlen(s);
    if (n % 2 != 0 || n / 2 > max) {
        return -1;
    }
    for (size_t i = 0; i < n / 2; ++i) {
        unsigned v;
        if (sscanf(s + 2 * i, "%2x", &v) != 1) {
            return -1;
        }
        out[i] = (uint8_t)v;
    }
    return (long)(n / 2);
}

/* The checks of one OK line's keys against an open file `f`. */
static void check_keys(const char *what, tdesc_file *f, char **tok, int n) {
    size_t entry = 0;
    for (int i = 5; i < n; ++i) {
        char *kv = tok[i];
        if (strncmp(kv, "tensor=", 7) == 0) {
            char name[128];
            unsigned long long start = 0, len = 0;
            if (sscanf(kv + 7, "%127[^:]:%llu:%llu", name, &start, &len) != 3) {
                FAILF("%s: malformed %s", what, kv);
                continue;
            }
            const char *got = NULL;
            size_t got_len = 0;
            CHECKF(tdesc_file_tensor_name(f, entry, &got, &got_len) == TDESC_OK &&
                       got_len == strlen(name) && memcmp(got, name, got_len) == 0,
                   "%s: entry %zu is not %s", what, entry, name);
            size_t index = 99;
            CHECKF(tdesc_file_find(f, name, strlen(name), &index) == TDESC_OK && index == entry,
                   "%s: find %s", what, name);
            const uint8_t *data = NULL;
            size_t data_len = 0;
            CHECKF(tdesc_file_tensor_data(f, entry, &data, &data_len) == TDESC_OK &&
                       data_len == len,
                   "%s: %s data_length %zu, expected %llu", what, name, data_len, len);
            ++entry;
        } else if (strncmp(kv, "opaque=", 7) == 0) {
            char name[128], status[64];
            if (sscanf(kv + 7, "%127[^:]:%63s", name, status) != 2) {
                FAILF("%s: malformed %s", what, kv);
                continue;
            }
            size_t index = 0;
            tdesc_status why = TDESC_OK;
            const char *reason = NULL;
            CHECKF(tdesc_file_find(f, name, strlen(name), &index) == TDESC_OK &&
                       tdesc_file_tensor_is_opaque(f, index) &&
                       tdesc_file_tensor_problem(f, index, &why, &reason) == TDESC_OK &&
                       strcmp(tdesc_status_name(why), status) == 0 && reason && reason[0],
                   "%s: %s is not opaque with %s", what, name, status);
            tdesc_tensor *t = NULL;
            CHECKF(tdesc_file_tensor_bind(f, index, &t) == TDESC_ERR_NOT_BINDABLE && t == NULL,
                   "%s: an opaque entry was bound", what);
        } else if (strncmp(kv, "buffer=", 7) == 0) {
            unsigned long long ti = 0, k = 0;
            char hex[512];
            uint8_t want[256];
            long want_len;
            if (sscanf(kv + 7, "%llu:%llu:%511s", &ti, &k, hex) != 3 ||
                (want_len = parse_plain_hex(hex, want, sizeof want)) < 0) {
                FAILF("%s: malformed %s", what, kv);
                continue;
            }
            const uint8_t *data = NULL;
            size_t len = 0;
            CHECKF(tdesc_file_tensor_buffer(f, (size_t)ti, (size_t)k, &data, &len) == TDESC_OK &&
                       len == (size_t)want_len &&
                       (want_len == 0 || memcmp(data, want, (size_t)want_len) == 0),
                   "%s: buffer %llu:%llu differs", what, ti, k);
            CHECKF(data != NULL && (uintptr_t)data % 64 == 0, "%s: buffer %llu:%llu misaligned",
                   what, ti, k);
        } else if (strncmp(kv, "value=", 6) == 0) {
            unsigned long long ti = 0;
            char idx_text[128];
            double want = 0;
            if (sscanf(kv + 6, "%llu:%127[^-]->%lf", &ti, idx_text, &want) != 3) {
                FAILF("%s: malformed %s", what, kv);
                continue;
            }
            uint64_t idx[TDESC_MAX_RANK];
            size_t rank = 0;
            for (char *p = idx_text; *p && rank < TDESC_MAX_RANK;) {
                char *end;
                idx[rank++] = strtoull(p, &end, 10);
                if (end == p) {
                    break;
                }
                p = *end == ',' ? end + 1 : end;
            }
            tdesc_tensor *t = NULL;
            double got = -1;
            if (tdesc_file_tensor_bind(f, (size_t)ti, &t) != TDESC_OK) {
                FAILF("%s: bind %llu: %s", what, ti, tdesc_last_error());
                continue;
            }
            CHECKF(tdesc_tensor_is_read_only(t), "%s: a tensor from a file is writable", what);
            CHECKF(tdesc_tensor_validate(t) == TDESC_OK, "%s: contents", what);
            CHECKF(tdesc_tensor_get_f64(t, idx, rank, &got) == TDESC_OK && got == want,
                   "%s: %s gave %g", what, kv, got);
            tdesc_tensor_free(t);
        } else if (strncmp(kv, "padding=", 8) == 0) {
            tdesc_status st = tdesc_file_check_padding(f);
            CHECKF(strcmp(tdesc_status_name(st), strcmp(kv + 8, "OK") == 0 ? "OK" : kv + 8) == 0,
                   "%s: padding check gave %s, expected %s", what, tdesc_status_name(st), kv + 8);
        }
    }
}

static void check_line(const char *dir, const char *scratch, char *line) {
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
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.tdf", scratch, name);
    FILE *out = fopen(path, "wb");
    if (!out || fwrite(bytes, 1, len, out) != len) {
        FAILF("%s: cannot write %s", name, path);
    }
    if (out) {
        fclose(out);
    }
    for (int how = 0; how < 2; ++how) {
        char what[256];
        snprintf(what, sizeof what, "%s (%s, %s)", name, tok[1], how == 0 ? "bytes" : "mapped");
        tdesc_file *f = NULL;
        tdesc_status st = how == 0 ? tdesc_file_open_bytes(bytes, len, mode, &f)
                                   : tdesc_file_open(path, mode, &f);
        if (strcmp(tok[2], "OK") != 0) {
            CHECKF(strcmp(tdesc_status_name(st), tok[2]) == 0 && f == NULL,
                   "%s: expected %s, got %s (%s)", what, tok[2], tdesc_status_name(st),
                   tdesc_last_error());
            CHECKF(strlen(tdesc_last_error()) > strlen(tok[2]) + 2, "%s: the detail is empty",
                   what);
            continue;
        }
        if (st != TDESC_OK) {
            FAILF("%s: open failed: %s", what, tdesc_last_error());
            continue;
        }
        if (n < 5) {
            FAILF("%s: an OK line needs VERSION TENSORS", what);
        } else {
            CHECKF(tdesc_file_version(f) == (uint8_t)strtoul(tok[3], NULL, 10), "%s: version %u",
                   what, (unsigned)tdesc_file_version(f));
            CHECKF(tdesc_file_tensor_count(f) == strtoull(tok[4], NULL, 10), "%s: %zu tensors",
                   what, tdesc_file_tensor_count(f));
            check_keys(what, f, tok, n);
        }
        tdesc_file_free(f);
    }
    remove(path);
    free(bytes);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s FILE_VECTORS_DIR SCRATCH_DIR\n", argv[0]);
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
        check_line(argv[1], argv[2], line);
    }
    fclose(f);
    CHECKF(lines > 50, "manifest has only %d lines", lines);
    printf("c_golden_files: %d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
