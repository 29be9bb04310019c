/* The C side of `cargo bench --bench read` (part 6): decode a descriptor, read n indices,
 * and time, round by round, tdesc_descriptor_locate_many over all of them and a loop of
 * the single tdesc_descriptor_locate over the same indices (best of ROUNDS each). Prints
 *   locate_many_ns X checksum C locate_ns Y
 * where the checksum folds byte_offset ^ buffer of every dense result as the Rust side
 * does; the single calls must fold to the same checksum (exit status 1 otherwise).
 * Usage: locate_many DESCRIPTOR INDICES ROUNDS */
#define _POSIX_C_SOURCE 199309L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "tensordesc.h"

static void *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *p = malloc(n > 0 ? (size_t)n : 1);
    if (p && fread(p, 1, (size_t)n, f) != (size_t)n) {
        free(p);
        p = NULL;
    }
    fclose(f);
    *len = (size_t)n;
    return p;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s DESCRIPTOR INDICES ROUNDS\n", argv[0]);
        return 2;
    }
    size_t dlen = 0, ilen = 0;
    uint8_t *bytes = slurp(argv[1], &dlen);
    uint64_t *idx = slurp(argv[2], &ilen);
    int rounds = atoi(argv[3]);
    if (!bytes || !idx || rounds < 1) return 2;
    tdesc_descriptor *d = NULL;
    if (tdesc_descriptor_decode(bytes, dlen, TDESC_MODE_STRICT, &d, NULL) != TDESC_OK) {
        fprintf(stderr, "%s\n", tdesc_last_error());
        return 1;
    }
    size_t rank = tdesc_descriptor_rank(d);
    size_t n = ilen / 8 / rank;
    tdesc_compact_location *out = malloc(n * sizeof *out);
    /* Both loops run in every round (so a burst of load on a shared machine hits both
     * alike); the best round of each counts. */
    double best = 1e30, best1 = 1e30;
    uint64_t acc = 0;
    for (int r = 0; r < rounds; ++r) {
        double t = now();
        if (tdesc_descriptor_locate_many(d, idx, n, rank, out) != TDESC_OK) {
            fprintf(stderr, "%s\n", tdesc_last_error());
            return 1;
        }
        t = now() - t;
        if (t < best) best = t;
        acc = 0;
        for (size_t k = 0; k < n; ++k) {
            if (out[k].kind == TDESC_COMPACT_DENSE) acc += out[k].byte_offset ^ (uint64_t)out[k].buffer;
        }
        uint64_t acc1 = 0;
        t = now();
        for (size_t k = 0; k < n; ++k) {
            tdesc_location l;
            if (tdesc_descriptor_locate(d, idx + k * rank, rank, &l) == TDESC_OK &&
                l.tag == TDESC_LOCATION_DENSE) {
                acc1 += l.DENSE.byte_offset ^ (uint64_t)l.DENSE.buffer;
            }
        }
        t = now() - t;
        if (t < best1) best1 = t;
        if (acc1 != acc) {
            fprintf(stderr, "tdesc_descriptor_locate and tdesc_descriptor_locate_many disagree\n");
            return 1;
        }
    }
    printf("locate_many_ns %.3f checksum %llu locate_ns %.3f\n", best * 1e9 / (double)n,
           (unsigned long long)acc, best1 * 1e9 / (double)n);
    free(out);
    free(idx);
    free(bytes);
    tdesc_descriptor_free(d);
    return 0;
}
