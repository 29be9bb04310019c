/* Shared by the C tests that read the golden vectors (tests/vectors): pass/fail counters,
 * the CHECKF/FAILF macros, and a reader of annotated hex files. Included once per test
 * program (everything is static). */
#ifndef TDESC_GOLDEN_HEX_H
#define TDESC_GOLDEN_HEX_H

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static int passed = 0;
static int failed = 0;

#define FAILF(...)                                                                                 \
    do {                                                                                           \
        ++failed;                                                                                  \
        fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                       \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fputc('\n', stderr);                                                                       \
    } while (0)

#define CHECKF(cond, ...)                                                                          \
    do {                                                                                           \
        if (cond) {                                                                                \
            ++passed;                                                                              \
        } else {                                                                                   \
            FAILF(__VA_ARGS__);                                                                    \
        }                                                                                          \
    } while (0)

/* Read NAME.hex (annotated hex: '#' comments, whitespace ignored) into a malloc'd array. */
static uint8_t *read_hex(const char *dir, const char *name, size_t *len) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.hex", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) {
        return NULL;
    }
    size_t cap = 256, n = 0;
    uint8_t *out = malloc(cap);
    int c, in_comment = 0, have_nibble = 0;
    unsigned nibble = 0;
    while (out && (c = fgetc(f)) != EOF) {
        if (in_comment) {
            in_comment = c != '\n';
            continue;
        }
        if (c == '#') {
            in_comment = 1;
            continue;
        }
        if (isspace(c)) {
            continue;
        }
        if (!isxdigit(c)) {
            free(out);
            out = NULL;
            break;
        }
        unsigned v = (unsigned)(isdigit(c) ? c - '0' : tolower(c) - 'a' + 10);
        if (!have_nibble) {
            nibble = v;
            have_nibble = 1;
            continue;
        }
        if (n == cap) {
            cap *= 2;
            uint8_t *grown = realloc(out, cap);
            if (!grown) {
                free(out);
                out = NULL;
                break;
            }
            out = grown;
        }
        out[n++] = (uint8_t)(nibble << 4 | v);
        have_nibble = 0;
    }
    fclose(f);
    if (out && have_nibble) {
        free(out);
        out = NULL;
    }
    *len = n;
    return out;
}

#endif
