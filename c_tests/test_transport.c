/* The file and stream transports from C11: write a .tdf file with several tensors (one a
 * subpaving of 100 CSR regions, 300 effective buffers, built with the C builder), reopen it
 * mapped and from memory, find tensors by name, bind them and compare every element with
 * the source buffers; keep a bound tensor past tdesc_file_free; a permissive file mixing
 * known tensors, an unknown-layout tensor and a descriptor that fails to decode; a frame
 * stream written to a path and to memory, read back one byte at a time, in random chunks
 * and whole, reassembling and binding every tensor; crafted out-of-order and truncated
 * inputs and bad arguments with their exact statuses.
 *
 * usage: test_transport SCRATCH_DIR   (written by capi/lib/tests/c_abi/c_api.rs)
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "dlpack_min.h"

_Static_assert(TDESC_STREAM_EVENT_NONE == 0, "event kinds");
_Static_assert(TDESC_STREAM_EVENT_STREAM_END == 6, "event kinds");

static char scratch[4096];

/* Paths in the scratch directory; each call site names its own storage. */
typedef struct {
    char s[8192];
} path_buf;

static const char *path_of(path_buf *p, const char *file) {
    snprintf(p->s, sizeof p->s, "%s/%s", scratch, file);
    return p->s;
}

static path_buf pb1, pb2, pb3, pb4, pb5, pb6, pb7, pb8, pb9;

static uint64_t rng = 0x9E3779B97F4A7C15u;
static uint64_t next_rand(void) {
    rng = rng * 6364136223846793005u + 1442695040888963407u;
    return rng >> 33;
}

static uint64_t u64_at(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; --i) {
        v = (v << 8) | p[i];
    }
    return v;
}

static void put_u64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; ++i) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
}

static uint8_t *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(n > 0 ? (size_t)n : 1);
    *len = fread(b, 1, (size_t)n, f);
    fclose(f);
    return b;
}

static int write_file(const char *path, const uint8_t *b, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f) {
        return 0;
    }
    size_t n = fwrite(b, 1, len, f);
    fclose(f);
    return n == len;
}

/* The encoded bytes of `d` (malloc'd). */
static uint8_t *encode(const tdesc_descriptor *d, size_t *len) {
    size_t need = 0;
    EXPECT(tdesc_descriptor_encode(d, NULL, 0, &need), TDESC_ERR_OUTPUT_TOO_SMALL);
    uint8_t *b = malloc(need);
    OK(tdesc_descriptor_encode(d, b, need, len));
    return b;
}

static int same_descriptor(const tdesc_descriptor *a, const tdesc_descriptor *b) {
    size_t la = 0, lb = 0;
    uint8_t *ea = encode(a, &la), *eb = encode(b, &lb);
    int same = la == lb && memcmp(ea, eb, la) == 0;
    free(ea);
    free(eb);
    return same;
}

/* ------------------------------------------------------------------ source tensors */

enum { MAX_BUF = 320, N_SRC = 5, GRID = 10, CELL = 4 };

typedef struct {
    const char *name;
    tdesc_descriptor *d;
    size_t nbuf;
    void *buf[MAX_BUF]; /* NULL for a buffer of size 0 */
    uint64_t size[MAX_BUF];
} source;

static source src[N_SRC];

static tdesc_descriptor *build(uint8_t et, const uint64_t *shape, size_t rank, tdesc_node_spec *n) {
    tdesc_builder *b = NULL;
    tdesc_descriptor *d = NULL;
    OK(tdesc_builder_new(et, shape, rank, n, &b));
    OK(tdesc_builder_build(b, &d));
    tdesc_builder_free(b);
    return d;
}

static void source_alloc(source *s) {
    s->nbuf = tdesc_descriptor_buffer_count(s->d);
    CHECK(s->nbuf <= MAX_BUF);
    for (size_t i = 0; i < s->nbuf && i < MAX_BUF; ++i) {
        tdesc_buffer b;
        OK(tdesc_descriptor_buffer(s->d, i, &b));
        s->size[i] = b.size_bytes;
        s->buf[i] = b.size_bytes == 0 ? NULL : alloc64((size_t)b.size_bytes);
    }
}

static void make_sources(void) {
    /* 0: FLOAT32 [3, 4] row-major, v = 1.5 i - 2 */
    tdesc_node_spec *n = NULL;
    OK(tdesc_node_new_row_major(&n));
    const uint64_t s0[2] = {3, 4};
    src[0].name = "weights";
    src[0].d = build(TDESC_ELEMENT_FLOAT32, s0, 2, n);
    source_alloc(&src[0]);
    for (int i = 0; i < 12; ++i) {
        ((float *)src[0].buf[0])[i] = 1.5f * (float)i - 2.0f;
    }

    /* 1: FLOAT64 [5, 6] CSR: (0,2)=1.25 (2,0)=-3 (2,5)=7.5 (4,4)=100 */
    OK(tdesc_node_new_csr(4, TDESC_SPARSE_SORTED | TDESC_SPARSE_UNIQUE, &n));
    const uint64_t s1[2] = {5, 6};
    src[1].name = "sparse";
    src[1].d = build(TDESC_ELEMENT_FLOAT64, s1, 2, n);
    source_alloc(&src[1]);
    const uint64_t indptr[6] = {0, 1, 1, 3, 3, 4}, indices[4] = {2, 0, 5, 4};
    const double values[4] = {1.25, -3.0, 7.5, 100.0};
    memcpy(src[1].buf[0], indptr, sizeof indptr);
    memcpy(src[1].buf[1], indices, sizeof indices);
    memcpy(src[1].buf[2], values, sizeof values);

    /* 2: FLOAT32 [40, 40]: a 10 x 10 grid of [4, 4] CSR regions, 300 effective buffers.
     * Region k holds (1,1) = k + 0.5 and (3,2) = -(k + 0.25). */
    tdesc_node_spec *top = NULL;
    OK(tdesc_node_new_subpaving(&top));
    const uint64_t cell[2] = {CELL, CELL};
    for (uint64_t k = 0; k < GRID * GRID; ++k) {
        tdesc_node_spec *child = NULL;
        OK(tdesc_node_new_csr(2, TDESC_SPARSE_SORTED | TDESC_SPARSE_UNIQUE, &child));
        const uint64_t o[2] = {CELL * (k / GRID), CELL * (k % GRID)};
        OK(tdesc_node_add_region(top, o, cell, 2, child));
    }
    const uint64_t s2[2] = {GRID * CELL, GRID * CELL};
    src[2].name = "paving";
    src[2].d = build(TDESC_ELEMENT_FLOAT32, s2, 2, top);
    source_alloc(&src[2]);
    CHECK(src[2].nbuf == 300);
    int roles_ok = 1;
    for (uint32_t k = 0; k < GRID * GRID; ++k) {
        tdesc_region r;
        OK(tdesc_descriptor_region(src[2].d, k, &r));
        roles_ok &= r.buffer_count == 3 && r.global_origin[0] == CELL * (k / GRID) &&
                    r.global_origin[1] == CELL * (k % GRID);
        for (uint32_t j = 0; j < 3; ++j) {
            tdesc_buffer b;
            OK(tdesc_descriptor_buffer(src[2].d, r.first_buffer + j, &b));
            void *p = src[2].buf[r.first_buffer + j];
            roles_ok &= b.region == k;
            if (b.role == TDESC_ROLE_INDPTR) {
                const uint64_t ip[5] = {0, 0, 1, 1, 2};
                memcpy(p, ip, sizeof ip);
            } else if (b.role == TDESC_ROLE_INDICES) {
                const uint64_t ix[2] = {1, 2};
                memcpy(p, ix, sizeof ix);
            } else if (b.role == TDESC_ROLE_VALUES) {
                const float v[2] = {(float)k + 0.5f, -((float)k + 0.25f)};
                memcpy(p, v, sizeof v);
            } else {
                roles_ok = 0;
            }
        }
    }
    CHECK(roles_ok);

    /* 3: UINT8 [0]: one buffer of 0 bytes, passed as NULL */
    OK(tdesc_node_new_row_major(&n));
    const uint64_t s3[1] = {0};
    src[3].name = "empty";
    src[3].d = build(TDESC_ELEMENT_UINT8, s3, 1, n);
    source_alloc(&src[3]);
    CHECK(src[3].nbuf == 1 && src[3].size[0] == 0 && src[3].buf[0] == NULL);

    /* 4: INT64 scalar = -42 */
    OK(tdesc_node_new_row_major(&n));
    src[4].name = "scalar";
    src[4].d = build(TDESC_ELEMENT_INT64, NULL, 0, n);
    source_alloc(&src[4]);
    *(int64_t *)src[4].buf[0] = -42;
}

static void free_sources(void) {
    for (int t = 0; t < N_SRC; ++t) {
        for (size_t i = 0; i < src[t].nbuf; ++i) {
            free(src[t].buf[i]);
        }
        tdesc_descriptor_free(src[t].d);
    }
}

/* Every element of `t` equals the same element of source `s` (stored bytes). */
static int same_elements(const tdesc_tensor *t, const source *s) {
    tdesc_tensor *ref = NULL;
    if (tdesc_tensor_bind(s->d, (const void *const *)s->buf, s->nbuf, &ref) != TDESC_OK) {
        return 0;
    }
    const size_t rank = tdesc_descriptor_rank(s->d);
    const uint64_t *shape = tdesc_descriptor_shape(s->d);
    uint64_t idx[TDESC_MAX_RANK] = {0};
    int ok = tdesc_tensor_validate(t) == TDESC_OK;
    uint64_t count = tdesc_descriptor_element_count(s->d);
    for (uint64_t e = 0; e < count && ok; ++e) {
        uint8_t a[16] = {0}, b[16] = {0};
        ok &= tdesc_tensor_get(t, idx, rank, a, sizeof a) == TDESC_OK;
        ok &= tdesc_tensor_get(ref, idx, rank, b, sizeof b) == TDESC_OK;
        ok &= memcmp(a, b, sizeof a) == 0;
        for (size_t ax = rank; ax-- > 0;) {
            if (++idx[ax] < shape[ax]) {
                break;
            }
            idx[ax] = 0;
        }
    }
    tdesc_tensor_free(ref);
    return ok;
}

/* The paving's values, spelled out. */
static int paving_values(const tdesc_tensor *t) {
    int ok = 1;
    for (uint64_t row = 0; row < GRID * CELL; ++row) {
        for (uint64_t col = 0; col < GRID * CELL; ++col) {
            const uint64_t idx[2] = {row, col};
            const uint64_t k = (row / CELL) * GRID + col / CELL, r = row % CELL, c = col % CELL;
            double want = r == 1 && c == 1 ? (double)k + 0.5 : r == 3 && c == 2 ? -((double)k + 0.25) : 0.0;
            double v = -1;
            ok &= tdesc_tensor_get_f64(t, idx, 2, &v) == TDESC_OK && v == want;
        }
    }
    return ok;
}

/* ------------------------------------------------------------------ files */

static void write_sources(tdesc_file_writer *w) {
    for (int t = 0; t < N_SRC; ++t) {
        OK(tdesc_file_writer_add(w, src[t].name, strlen(src[t].name), src[t].d,
                                 (const void *const *)src[t].buf, src[t].nbuf));
    }
}

/* Check an opened file holding the sources: names, find, descriptors, binding, values. */
static void check_file(const tdesc_file *f) {
    CHECK(tdesc_file_tensor_count(f) == N_SRC);
    CHECK(tdesc_file_data_alignment(f) == 64);
    for (int t = 0; t < N_SRC; ++t) {
        const char *name = NULL;
        size_t len = 0, index = 99;
        OK(tdesc_file_tensor_name(f, (size_t)t, &name, &len));
        CHECK(len == strlen(src[t].name) && strcmp(name, src[t].name) == 0);
        OK(tdesc_file_find(f, src[t].name, strlen(src[t].name), &index));
        CHECK(index == (size_t)t);
        CHECK(!tdesc_file_tensor_is_opaque(f, index));
        tdesc_status problem = TDESC_ERR_INTERNAL;
        const char *reason = NULL;
        OK(tdesc_file_tensor_problem(f, index, &problem, &reason));
        CHECK(problem == TDESC_OK && reason != NULL && reason[0] == '\0');

        tdesc_descriptor *d = NULL;
        OK(tdesc_file_tensor_descriptor(f, index, &d));
        CHECK(d != NULL && same_descriptor(d, src[t].d));
        tdesc_descriptor_free(d);

        const uint8_t *dbytes = NULL;
        size_t dlen = 0;
        OK(tdesc_file_tensor_descriptor_bytes(f, index, &dbytes, &dlen));
        CHECK(dlen == tdesc_descriptor_encoded_len(src[t].d));

        tdesc_tensor *tensor = NULL;
        OK(tdesc_file_tensor_bind(f, index, &tensor));
        CHECK(tensor != NULL && same_elements(tensor, &src[t]));
        CHECK(same_descriptor(tdesc_tensor_descriptor(tensor), src[t].d));

        /* Raw buffers: aligned slices of the file with the source's bytes. */
        int bytes_ok = 1;
        for (size_t k = 0; k < src[t].nbuf; ++k) {
            const uint8_t *p = NULL;
            size_t n = 99;
            bytes_ok &= tdesc_file_tensor_buffer(f, index, k, &p, &n) == TDESC_OK;
            bytes_ok &= n == src[t].size[k] && ((uintptr_t)p % 64 == 0 || n == 0);
            bytes_ok &= n == 0 || memcmp(p, src[t].buf[k], n) == 0;
        }
        CHECK(bytes_ok);
        const uint8_t *p = NULL;
        EXPECT(tdesc_file_tensor_buffer(f, index, src[t].nbuf, &p, NULL),
               TDESC_ERR_INDEX_OUT_OF_BOUNDS);
        tdesc_tensor_free(tensor);
    }
    tdesc_tensor *paving = NULL;
    OK(tdesc_file_tensor_bind(f, 2, &paving));
    CHECK(paving_values(paving));
    tdesc_tensor_free(paving);
}

static void test_file_roundtrip(void) {
    const char *path = path_of(&pb1, "sources.tdf");
    tdesc_file_writer *w = NULL;
    OK(tdesc_file_writer_open(path, 0, &w));
    write_sources(w);

    /* Refusals leave the file valid. */
    EXPECT(tdesc_file_writer_add(w, "weights", 7, src[0].d, (const void *const *)src[0].buf, 1),
           TDESC_ERR_DUPLICATE_NAME);
    EXPECT(tdesc_file_writer_add(w, "", 0, src[0].d, (const void *const *)src[0].buf, 1),
           TDESC_ERR_INVALID_ARGUMENT);
    EXPECT(tdesc_file_writer_add(w, "\xff", 1, src[0].d, (const void *const *)src[0].buf, 1),
           TDESC_ERR_INVALID_ARGUMENT);
    EXPECT(tdesc_file_writer_add(w, "x", 1, src[1].d, (const void *const *)src[1].buf, 2),
           TDESC_ERR_BINDING_MISMATCH);
    const void *nulls[3] = {src[1].buf[0], NULL, src[1].buf[2]};
    EXPECT(tdesc_file_writer_add(w, "x", 1, src[1].d, nulls, 3), TDESC_ERR_BINDING_MISMATCH);
    EXPECT(tdesc_file_writer_add(w, "x", 1, NULL, NULL, 0), TDESC_ERR_INVALID_ARGUMENT);
    EXPECT(tdesc_file_writer_add(NULL, "x", 1, src[0].d, (const void *const *)src[0].buf, 1),
           TDESC_ERR_INVALID_ARGUMENT);
    EXPECT(tdesc_file_writer_add(w, NULL, 3, src[0].d, (const void *const *)src[0].buf, 1),
           TDESC_ERR_INVALID_ARGUMENT);
    const uint8_t *bytes = NULL;
    EXPECT(tdesc_file_writer_bytes(w, &bytes, NULL), TDESC_ERR_INVALID_ARGUMENT);
    OK(tdesc_file_writer_finish(w));
    EXPECT(tdesc_file_writer_finish(w), TDESC_ERR_INVALID_ARGUMENT);
    EXPECT(tdesc_file_writer_add(w, "late", 4, src[0].d, (const void *const *)src[0].buf, 1),
           TDESC_ERR_INVALID_ARGUMENT);
    EXPECT(tdesc_file_writer_bytes(w, &bytes, NULL), TDESC_ERR_INVALID_ARGUMENT);
    tdesc_file_writer_free(w);

    /* The same file in memory: identical bytes. */
    OK(tdesc_file_writer_new_memory(64, &w));
    write_sources(w);
    OK(tdesc_file_writer_finish(w));
    size_t mem_len = 0, disk_len = 0;
    OK(tdesc_file_writer_bytes(w, &bytes, &mem_len));
    uint8_t *disk = read_file(path, &disk_len);
    CHECK(disk != NULL && disk_len == mem_len && memcmp(disk, bytes, mem_len) == 0);
    tdesc_file_writer_free(w);

    /* Mapped. */
    tdesc_file *f = NULL;
    OK(tdesc_file_open(path, TDESC_MODE_STRICT, &f));
    check_file(f);
    size_t index = 0;
    EXPECT(tdesc_file_find(f, "nope", 4, &index), TDESC_ERR_NOT_FOUND);
    EXPECT(tdesc_file_find(f, "weightsX", 7, &index), TDESC_OK); /* length, not NUL */
    CHECK(index == 0);
    EXPECT(tdesc_file_find(f, "\xff", 1, &index), TDESC_ERR_NOT_FOUND);
    EXPECT(tdesc_file_find(f, "weights", 7, NULL), TDESC_ERR_INVALID_ARGUMENT);

    /* A bound tensor keeps the mapping alive after tdesc_file_free. */
    tdesc_tensor *kept = NULL, *kept2 = NULL;
    OK(tdesc_file_tensor_bind(f, 2, &kept));
    OK(tdesc_file_tensor_bind(f, 0, &kept2));
    tdesc_file_free(f);
    CHECK(paving_values(kept));
    CHECK(same_elements(kept2, &src[0]));
    /* Its descriptor, the file's own, is reachable after the file handle is gone. */
    const tdesc_descriptor *kd = tdesc_tensor_descriptor(kept2);
    CHECK(kd != NULL && kd == tdesc_tensor_descriptor(kept2));
    CHECK(kd != NULL && tdesc_descriptor_rank(kd) == tdesc_descriptor_rank(src[0].d));
    CHECK(kd != NULL &&
          tdesc_descriptor_element_count(kd) == tdesc_descriptor_element_count(src[0].d));
    tdesc_tensor_free(kept);
    CHECK(same_elements(kept2, &src[0]));
    tdesc_tensor_free(kept2);

    /* No copy: a DLPack export of a bound tensor points at the file's buffer, and keeps the
     * mapping alive after the tensor and the file are freed. */
    OK(tdesc_file_open(path, TDESC_MODE_STRICT, &f));
    const uint8_t *mapped = NULL;
    OK(tdesc_file_tensor_buffer(f, 0, 0, &mapped, NULL));
    OK(tdesc_file_tensor_bind(f, 0, &kept));
    DLManagedTensorVersioned *dl = NULL;
    OK(tdesc_tensor_export_dlpack(kept, TDESC_NO_REGION, &dl));
    tdesc_tensor_free(kept);
    tdesc_file_free(f);
    CHECK(dl != NULL && (const uint8_t *)dl->dl_tensor.data == mapped);
    CHECK(dl != NULL && dl->dl_tensor.ndim == 2 && dl->dl_tensor.shape[1] == 4 &&
          memcmp((const uint8_t *)dl->dl_tensor.data + dl->dl_tensor.byte_offset, src[0].buf[0],
                 48) == 0);
    tdesc_dlpack_delete_versioned(dl);

    /* From memory: the bytes are copied, so the caller's copy may go at once. */
    uint8_t *copy = malloc(disk_len);
    memcpy(copy, disk, disk_len);
    OK(tdesc_file_open_bytes(copy, disk_len, TDESC_MODE_STRICT, &f));
    memset(copy, 0xAB, disk_len);
    free(copy);
    check_file(f);
    OK(tdesc_file_tensor_bind(f, 1, &kept));
    tdesc_file_free(f);
    CHECK(same_elements(kept, &src[1]));
    tdesc_tensor_free(kept);

    /* Misaligned source bytes are fine too (the copy is aligned). */
    uint8_t *shifted = malloc(disk_len + 1);
    memcpy(shifted + 1, disk, disk_len);
    OK(tdesc_file_open_bytes(shifted + 1, disk_len, TDESC_MODE_PERMISSIVE, &f));
    free(shifted);
    check_file(f);
    tdesc_file_free(f);

    /* Truncated files. */
    const size_t cuts[6] = {0, 8, 15, 16, disk_len / 2, disk_len - 1};
    for (int c = 0; c < 6; ++c) {
        f = (tdesc_file *)&index; /* any non-NULL value: must come back NULL */
        EXPECT(tdesc_file_open_bytes(disk, cuts[c], TDESC_MODE_STRICT, &f), TDESC_ERR_TRUNCATED);
        CHECK(f == NULL);
        EXPECT(tdesc_file_open_bytes(disk, cuts[c], TDESC_MODE_PERMISSIVE, &f),
               TDESC_ERR_TRUNCATED);
    }
    const char *cut = path_of(&pb2, "truncated.tdf");
    CHECK(write_file(cut, disk, disk_len - 16)); /* the last data region is cut */
    EXPECT(tdesc_file_open(cut, TDESC_MODE_STRICT, &f), TDESC_ERR_TRUNCATED);
    CHECK(f == NULL);

    /* A writer freed without finishing leaves a file readers refuse. */
    const char *unfinished = path_of(&pb3, "unfinished.tdf");
    OK(tdesc_file_writer_open(unfinished, 128, &w));
    write_sources(w);
    tdesc_file_writer_free(w);
    EXPECT(tdesc_file_open(unfinished, TDESC_MODE_STRICT, &f), TDESC_ERR_TRUNCATED);

    /* Bad magic. */
    disk[0] ^= 0xFF;
    EXPECT(tdesc_file_open_bytes(disk, disk_len, TDESC_MODE_STRICT, &f), TDESC_ERR_BAD_MAGIC);
    disk[0] ^= 0xFF;
    free(disk);

    /* Bad arguments. */
    EXPECT(tdesc_file_open(NULL, TDESC_MODE_STRICT, &f), TDESC_ERR_INVALID_ARGUMENT);
    EXPECT(tdesc_file_open("", TDESC_MODE_STRICT, &f), TDESC_ERR_INVALID_ARGUMENT);
    EXPECT(tdesc_file_open(path, 7, &f), TDESC_ERR_INVALID_ARGUMENT);
    CHECK(f == NULL);
    EXPECT(tdesc_file_open(path, TDESC_MODE_STRICT, NULL), TDESC_ERR_INVALID_ARGUMENT);
    EXPECT(tdesc_file_open(path_of(&pb4, "missing/none.tdf"), TDESC_MODE_STRICT, &f), TDESC_ERR_IO);
    EXPECT(tdesc_file_open_bytes(NULL, 16, TDESC_MODE_STRICT, &f), TDESC_ERR_INVALID_ARGUMENT);
    EXPECT(tdesc_file_writer_open(path_of(&pb5, "bad.tdf"), 100, &w), TDESC_ERR_ALIGNMENT_INVALID);
    CHECK(w == NULL);
    EXPECT(tdesc_file_writer_new_memory(32, &w), TDESC_ERR_ALIGNMENT_INVALID);
    EXPECT(tdesc_file_writer_new_memory(2u << 20, &w), TDESC_ERR_ALIGNMENT_INVALID);
    EXPECT(tdesc_file_writer_open(path_of(&pb6, "missing/x.tdf"), 0, &w), TDESC_ERR_IO);
    EXPECT(tdesc_file_writer_open(NULL, 0, &w), TDESC_ERR_INVALID_ARGUMENT);
    EXPECT(tdesc_file_writer_finish(NULL), TDESC_ERR_INVALID_ARGUMENT);
    CHECK(tdesc_file_tensor_count(NULL) == 0);
    CHECK(tdesc_file_data_alignment(NULL) == 0);
    CHECK(!tdesc_file_tensor_is_opaque(NULL, 0));

    OK(tdesc_file_open(path, TDESC_MODE_STRICT, &f));
    const char *name = NULL;
    tdesc_tensor *t = NULL;
    tdesc_descriptor *d = NULL;
    EXPECT(tdesc_file_tensor_name(f, N_SRC, &name, NULL), TDESC_ERR_INDEX_OUT_OF_BOUNDS);
    EXPECT(tdesc_file_tensor_name(f, 0, NULL, NULL), TDESC_ERR_INVALID_ARGUMENT);
    EXPECT(tdesc_file_tensor_bind(f, N_SRC, &t), TDESC_ERR_INDEX_OUT_OF_BOUNDS);
    CHECK(t == NULL);
    EXPECT(tdesc_file_tensor_bind(NULL, 0, &t), TDESC_ERR_INVALID_ARGUMENT);
    EXPECT(tdesc_file_tensor_bind(f, 0, NULL), TDESC_ERR_INVALID_ARGUMENT);
    EXPECT(tdesc_file_tensor_descriptor(f, 99, &d), TDESC_ERR_INDEX_OUT_OF_BOUNDS);
    CHECK(d == NULL);
    tdesc_status st;
    EXPECT(tdesc_file_tensor_problem(f, 99, &st, NULL), TDESC_ERR_INDEX_OUT_OF_BOUNDS);
    EXPECT(tdesc_file_tensor_problem(f, 0, NULL, NULL), TDESC_ERR_INVALID_ARGUMENT);
    CHECK(!tdesc_file_tensor_is_opaque(f, 99));
    tdesc_file_free(f);
    tdesc_file_free(NULL);
    tdesc_file_writer_free(NULL);
}

/* The directory-first writer: every tensor declared, then the data in declaration order —
 * whole tensors, or pieces of any size — writes the same bytes as the tensor-by-tensor
 * writer (one canonical file per content), to a path or into memory. */
static void test_directory_first(void) {
    tdesc_file_writer *w = NULL;
    OK(tdesc_file_writer_new_memory(0, &w));
    write_sources(w);
    OK(tdesc_file_writer_finish(w));
    const uint8_t *ref = NULL;
    size_t ref_len = 0;
    OK(tdesc_file_writer_bytes(w, &ref, &ref_len));
    tdesc_file *f = NULL;
    OK(tdesc_file_open_bytes(ref, ref_len, TDESC_MODE_STRICT, &f));
    CHECK(tdesc_file_version(f) == 2);
    OK(tdesc_file_check_padding(f));
    tdesc_file_free(f);
    CHECK(tdesc_file_version(NULL) == 0);
    EXPECT(tdesc_file_check_padding(NULL), TDESC_ERR_INVALID_ARGUMENT);

    /* Whole tensors, to a path. */
    const char *path = path_of(&pb5, "directory_first.tdf");
    tdesc_file_writer *d = NULL;
    OK(tdesc_file_writer_open(path, 0, &d));
    EXPECT(tdesc_file_writer_write_directory(d), TDESC_ERR_INVALID_ARGUMENT); /* none declared */
    EXPECT(tdesc_file_writer_write_bytes(d, (const uint8_t *)"x", 1), TDESC_ERR_INVALID_ARGUMENT);
    for (int t = 0; t < N_SRC; ++t) {
        OK(tdesc_file_writer_declare(d, src[t].name, strlen(src[t].name), src[t].d));
    }
    EXPECT(tdesc_file_writer_declare(d, src[0].name, strlen(src[0].name), src[1].d),
           TDESC_ERR_DUPLICATE_NAME);
    EXPECT(tdesc_file_writer_declare(d, "", 0, src[1].d), TDESC_ERR_INVALID_ARGUMENT);
    EXPECT(tdesc_file_writer_declare(d, "z", 1, NULL), TDESC_ERR_INVALID_ARGUMENT);
    /* This writer gives its directory first: no tensor-by-tensor adds. */
    EXPECT(tdesc_file_writer_add(d, "z", 1, src[0].d, (const void *const *)src[0].buf, 1),
           TDESC_ERR_INVALID_ARGUMENT);
    CHECK(strstr(tdesc_last_error(), "tdesc_file_writer_write_tensor") != NULL);
    /* A wrong count is refused before anything is written. */
    EXPECT(tdesc_file_writer_write_tensor(d, (const void *const *)src[0].buf, 2),
           TDESC_ERR_BINDING_MISMATCH);
    for (int t = 0; t < N_SRC; ++t) {
        OK(tdesc_file_writer_write_tensor(d, (const void *const *)src[t].buf, src[t].nbuf));
        if (t == 0) {
            /* The directory is written now. */
            EXPECT(tdesc_file_writer_declare(d, "late", 4, src[0].d), TDESC_ERR_INVALID_ARGUMENT);
            OK(tdesc_file_writer_write_directory(d)); /* again: nothing to do */
        }
    }
    EXPECT(tdesc_file_writer_write_tensor(d, (const void *const *)src[0].buf, 1),
           TDESC_ERR_INVALID_ARGUMENT); /* every declared tensor is written */
    EXPECT(tdesc_file_writer_write_bytes(d, (const uint8_t *)"x", 1), TDESC_ERR_BINDING_MISMATCH);
    OK(tdesc_file_writer_finish(d));
    tdesc_file_writer_free(d);
    size_t disk_len = 0;
    uint8_t *disk = read_file(path, &disk_len);
    CHECK(disk != NULL && disk_len == ref_len && memcmp(disk, ref, ref_len) == 0);
    free(disk);
    OK(tdesc_file_open(path, TDESC_MODE_STRICT, &f));
    check_file(f);
    tdesc_file_free(f);

    /* Pieces of 7 bytes, in memory, with an opaque entry declared in the middle. */
    size_t len = 0;
    uint8_t *desc = encode(src[0].d, &len);
    desc[18] = 0x20; /* layout_tag: unassigned */
    const uint8_t odd[5] = {9, 8, 7, 6, 5};
    tdesc_file_writer *spool = NULL;
    OK(tdesc_file_writer_new_memory(0, &spool));
    OK(tdesc_file_writer_new_memory(0, &d));
    size_t total = 0;
    for (int t = 0; t < N_SRC; ++t) {
        OK(tdesc_file_writer_add(spool, src[t].name, strlen(src[t].name), src[t].d,
                                 (const void *const *)src[t].buf, src[t].nbuf));
        OK(tdesc_file_writer_declare(d, src[t].name, strlen(src[t].name), src[t].d));
        for (size_t k = 0; k < src[t].nbuf; ++k) {
            total += (size_t)src[t].size[k];
        }
        if (t == 1) {
            OK(tdesc_file_writer_add_opaque(spool, "odd", 3, desc, len, odd, sizeof odd));
            EXPECT(tdesc_file_writer_declare(d, "odd", 3, NULL),
                   TDESC_ERR_INVALID_ARGUMENT);
            OK(tdesc_file_writer_declare_opaque(d, "odd", 3, desc, len, sizeof odd));
            total += sizeof odd;
        }
    }
    /* Declaring on a tensor-by-tensor writer is refused. */
    EXPECT(tdesc_file_writer_declare(spool, "more", 4, src[0].d), TDESC_ERR_INVALID_ARGUMENT);
    OK(tdesc_file_writer_finish(spool));
    uint8_t *all = malloc(total);
    size_t at = 0;
    for (int t = 0; t < N_SRC; ++t) {
        for (size_t k = 0; k < src[t].nbuf; ++k) {
            if (src[t].size[k] > 0) {
                memcpy(all + at, src[t].buf[k], (size_t)src[t].size[k]);
            }
            at += (size_t)src[t].size[k];
        }
        if (t == 1) {
            memcpy(all + at, odd, sizeof odd);
            at += sizeof odd;
        }
    }
    CHECK(at == total);
    for (size_t pos = 0; pos < total; pos += 7) {
        size_t n = total - pos < 7 ? total - pos : 7;
        OK(tdesc_file_writer_write_bytes(d, all + pos, n));
    }
    EXPECT(tdesc_file_writer_write_bytes(d, all, 1), TDESC_ERR_BINDING_MISMATCH);
    OK(tdesc_file_writer_finish(d));
    const uint8_t *a = NULL, *b = NULL;
    size_t a_len = 0, b_len = 0;
    OK(tdesc_file_writer_bytes(spool, &a, &a_len));
    OK(tdesc_file_writer_bytes(d, &b, &b_len));
    CHECK(a_len == b_len && memcmp(a, b, a_len) == 0);
    OK(tdesc_file_open_bytes(b, b_len, TDESC_MODE_PERMISSIVE, &f));
    CHECK(tdesc_file_tensor_count(f) == N_SRC + 1 && tdesc_file_tensor_is_opaque(f, 2));
    const uint8_t *p = NULL;
    size_t plen = 0;
    OK(tdesc_file_tensor_data(f, 2, &p, &plen));
    CHECK(plen == sizeof odd && memcmp(p, odd, sizeof odd) == 0);
    tdesc_file_free(f);
    tdesc_file_writer_free(spool);
    tdesc_file_writer_free(d);
    free(all);
    free(desc);

    /* Finishing before every declared tensor's data is written. */
    OK(tdesc_file_writer_new_memory(0, &d));
    OK(tdesc_file_writer_declare(d, "a", 1, src[0].d));
    OK(tdesc_file_writer_declare(d, "b", 1, src[0].d));
    OK(tdesc_file_writer_write_tensor(d, (const void *const *)src[0].buf, 1));
    EXPECT(tdesc_file_writer_finish(d), TDESC_ERR_BINDING_MISMATCH);
    tdesc_file_writer_free(d);
    tdesc_file_writer_free(w);
}

/* A file with a known tensor, an unknown-layout tensor (layout tag patched to 0x20) and
 * another known tensor, read permissively; then a descriptor that fails to decode. */
static void test_permissive_file(void) {
    size_t len = 0;
    uint8_t *desc = encode(src[0].d, &len);
    desc[18] = 0x20; /* layout_tag: unassigned */
    tdesc_descriptor *opaque = NULL;
    EXPECT(tdesc_descriptor_decode(desc, len, TDESC_MODE_STRICT, &opaque, NULL),
           TDESC_ERR_UNKNOWN_LAYOUT);
    OK(tdesc_descriptor_decode(desc, len, TDESC_MODE_PERMISSIVE, &opaque, NULL));
    CHECK(!tdesc_descriptor_is_bindable(opaque));
    CHECK(tdesc_descriptor_layout(opaque) == 0x20);
    uint8_t data[100];
    for (int i = 0; i < 100; ++i) {
        data[i] = (uint8_t)(3 * i + 1);
    }

    tdesc_file_writer *w = NULL;
    OK(tdesc_file_writer_new_memory(0, &w));
    OK(tdesc_file_writer_add(w, "first", 5, src[0].d, (const void *const *)src[0].buf, 1));
    EXPECT(tdesc_file_writer_add(w, "odd", 3, opaque, NULL, 0), TDESC_ERR_NOT_BINDABLE);
    /* The detail names the C function to call instead. */
    CHECK(strstr(tdesc_last_error(), "tdesc_file_writer_add_opaque") != NULL);
    size_t good_len = 0;
    uint8_t *good = encode(src[0].d, &good_len);
    EXPECT(tdesc_file_writer_add_opaque(w, "odd", 3, good, good_len, data, sizeof data),
           TDESC_ERR_INVALID_ARGUMENT); /* bindable: use tdesc_file_writer_add */
    CHECK(strstr(tdesc_last_error(), "with tdesc_file_writer_add") != NULL);
    CHECK(strstr(tdesc_last_error(), "write_tensor") == NULL);
    EXPECT(tdesc_file_writer_add_opaque(w, "odd", 3, desc, len - 1, data, sizeof data),
           TDESC_ERR_TRUNCATED);
    OK(tdesc_file_writer_add_opaque(w, "odd", 3, desc, len, data, sizeof data));
    EXPECT(tdesc_file_writer_add_opaque(w, "odd", 3, desc, len, data, sizeof data),
           TDESC_ERR_DUPLICATE_NAME);
    OK(tdesc_file_writer_add(w, "last", 4, src[1].d, (const void *const *)src[1].buf, 3));
    OK(tdesc_file_writer_finish(w));
    const uint8_t *bytes = NULL;
    size_t blen = 0;
    OK(tdesc_file_writer_bytes(w, &bytes, &blen));

    tdesc_file *f = NULL;
    EXPECT(tdesc_file_open_bytes(bytes, blen, TDESC_MODE_STRICT, &f), TDESC_ERR_UNKNOWN_LAYOUT);
    CHECK(f == NULL);
    OK(tdesc_file_open_bytes(bytes, blen, TDESC_MODE_PERMISSIVE, &f));
    CHECK(tdesc_file_tensor_count(f) == 3);
    CHECK(!tdesc_file_tensor_is_opaque(f, 0) && tdesc_file_tensor_is_opaque(f, 1) &&
          !tdesc_file_tensor_is_opaque(f, 2));
    tdesc_status problem = TDESC_OK;
    const char *reason = NULL;
    OK(tdesc_file_tensor_problem(f, 1, &problem, &reason));
    CHECK(problem == TDESC_ERR_NOT_BINDABLE && reason != NULL &&
          strncmp(reason, "NOT_BINDABLE: ", 14) == 0);
    tdesc_tensor *t = NULL;
    EXPECT(tdesc_file_tensor_bind(f, 1, &t), TDESC_ERR_NOT_BINDABLE);
    CHECK(t == NULL);
    const uint8_t *p = NULL;
    size_t plen = 0;
    EXPECT(tdesc_file_tensor_buffer(f, 1, 0, &p, &plen), TDESC_ERR_NOT_BINDABLE);
    tdesc_descriptor *d = NULL;
    OK(tdesc_file_tensor_descriptor(f, 1, &d));
    CHECK(tdesc_descriptor_layout(d) == 0x20 && !tdesc_descriptor_is_bindable(d));
    tdesc_descriptor_free(d);
    OK(tdesc_file_tensor_descriptor_bytes(f, 1, &p, &plen));
    CHECK(plen == len && memcmp(p, desc, len) == 0);
    OK(tdesc_file_tensor_data(f, 1, &p, &plen));
    CHECK(plen == sizeof data && memcmp(p, data, sizeof data) == 0);
    size_t index = 0;
    OK(tdesc_file_find(f, "last", 4, &index));
    CHECK(index == 2);
    OK(tdesc_file_tensor_bind(f, 0, &t));
    CHECK(same_elements(t, &src[0]));
    tdesc_tensor_free(t);
    OK(tdesc_file_tensor_bind(f, 2, &t));
    CHECK(same_elements(t, &src[1]));
    tdesc_tensor_free(t);

    /* Copy the opaque entry into another file byte for byte. */
    tdesc_file_writer *w2 = NULL;
    OK(tdesc_file_writer_new_memory(0, &w2));
    const uint8_t *db = NULL, *dd = NULL;
    size_t dbl = 0, ddl = 0;
    OK(tdesc_file_tensor_descriptor_bytes(f, 1, &db, &dbl));
    OK(tdesc_file_tensor_data(f, 1, &dd, &ddl));
    OK(tdesc_file_writer_add_opaque(w2, "copy", 4, db, dbl, dd, ddl));
    OK(tdesc_file_writer_finish(w2));
    const uint8_t *b2 = NULL;
    size_t b2len = 0;
    OK(tdesc_file_writer_bytes(w2, &b2, &b2len));
    tdesc_file *f2 = NULL;
    OK(tdesc_file_open_bytes(b2, b2len, TDESC_MODE_PERMISSIVE, &f2));
    OK(tdesc_file_tensor_data(f2, 0, &p, &plen));
    CHECK(plen == sizeof data && memcmp(p, data, sizeof data) == 0);
    tdesc_file_free(f2);
    tdesc_file_writer_free(w2);
    tdesc_file_free(f);

    /* A descriptor that fails to decode (reserved byte set) with its framing intact: strict
     * rejects the file, permissive keeps an opaque entry carrying the decode status. */
    uint8_t *patched = malloc(blen);
    memcpy(patched, bytes, blen);
    size_t hit = 0;
    for (size_t i = 0; i + 4 <= blen; ++i) {
        if (memcmp(patched + i, "TDSC", 4) == 0) {
            hit = i; /* the first descriptor: tensor "first" */
            break;
        }
    }
    CHECK(hit > 0);
    patched[hit + 19] = 1;
    EXPECT(tdesc_file_open_bytes(patched, blen, TDESC_MODE_STRICT, &f), TDESC_ERR_RESERVED_NONZERO);
    OK(tdesc_file_open_bytes(patched, blen, TDESC_MODE_PERMISSIVE, &f));
    CHECK(tdesc_file_tensor_is_opaque(f, 0));
    OK(tdesc_file_tensor_problem(f, 0, &problem, NULL));
    CHECK(problem == TDESC_ERR_RESERVED_NONZERO);
    EXPECT(tdesc_file_tensor_descriptor(f, 0, &d), TDESC_ERR_RESERVED_NONZERO);
    CHECK(d == NULL);
    EXPECT(tdesc_file_tensor_bind(f, 0, &t), TDESC_ERR_NOT_BINDABLE);
    OK(tdesc_file_tensor_bind(f, 2, &t));
    CHECK(same_elements(t, &src[1]));
    tdesc_tensor_free(t);
    tdesc_file_free(f);
    free(patched);

    tdesc_file_writer_free(w);
    tdesc_descriptor_free(opaque);
    free(desc);
    free(good);
}

/* ------------------------------------------------------------------ streams */

/* The sources plus "pieces": the weights again, written with begin + data in 5-byte bits. */
enum { N_STREAM = N_SRC + 1 };

static const source *stream_source(size_t t) { return t < N_SRC ? &src[t] : &src[0]; }
static const char *stream_name(size_t t) { return t < N_SRC ? src[t].name : "pieces"; }

static void write_stream(tdesc_stream_writer *w) {
    for (int t = 0; t < N_SRC; ++t) {
        OK(tdesc_stream_writer_add(w, src[t].name, strlen(src[t].name), src[t].d,
                                   (const void *const *)src[t].buf, src[t].nbuf));
    }
    OK(tdesc_stream_writer_begin(w, "pieces", 6, src[0].d));
    const uint8_t *b = src[0].buf[0];
    for (size_t off = 0; off < src[0].size[0]; off += 5) {
        size_t n = src[0].size[0] - off < 5 ? (size_t)(src[0].size[0] - off) : 5;
        OK(tdesc_stream_writer_data(w, 0, b + off, n));
    }
}

typedef struct {
    int ok;
    int started, ended;
    size_t tensors, completes, data_events;
    size_t max_memory;
    /* the tensor being reassembled */
    size_t nbuf;
    void *buf[MAX_BUF];
    uint64_t filled[MAX_BUF];
} reading;

static void reading_reset_tensor(reading *rd) {
    for (size_t i = 0; i < rd->nbuf; ++i) {
        free(rd->buf[i]);
        rd->buf[i] = NULL;
    }
    rd->nbuf = 0;
}

/* Check one event against the expected stream of the sources. */
static void on_event(reading *rd, const tdesc_stream_event *ev) {
    const size_t t = rd->tensors == 0 ? 0 : rd->tensors - 1;
    switch (ev->kind) {
    case TDESC_STREAM_EVENT_STREAM_START:
        rd->ok &= !rd->started && ev->version_major == 1 && ev->version_minor == 0;
        rd->started = 1;
        break;
    case TDESC_STREAM_EVENT_DESCRIPTOR: {
        const size_t n = rd->tensors++;
        rd->ok &= rd->started && !rd->ended && n < N_STREAM && rd->completes == n;
        if (n >= N_STREAM) {
            break;
        }
        rd->ok &= ev->tensor_index == n && ev->name_len == strlen(stream_name(n)) &&
                  strcmp(ev->name, stream_name(n)) == 0;
        rd->ok &= ev->descriptor != NULL && same_descriptor(ev->descriptor, stream_source(n)->d);
        reading_reset_tensor(rd);
        rd->nbuf = tdesc_descriptor_buffer_count(ev->descriptor);
        for (size_t i = 0; i < rd->nbuf && i < MAX_BUF; ++i) {
            tdesc_buffer b;
            rd->ok &= tdesc_descriptor_buffer(ev->descriptor, i, &b) == TDESC_OK;
            rd->buf[i] = b.size_bytes == 0 ? NULL : alloc64((size_t)b.size_bytes);
            rd->filled[i] = 0;
        }
        break;
    }
    case TDESC_STREAM_EVENT_DATA: {
        rd->data_events++;
        const source *s = stream_source(t);
        const size_t k = (size_t)ev->buffer_index;
        rd->ok &= ev->tensor_index == t && ev->name != NULL && ev->descriptor != NULL;
        rd->ok &= k < rd->nbuf && ev->offset == rd->filled[k] && ev->data_len > 0 &&
                  ev->offset + ev->data_len <= s->size[k];
        if (!rd->ok) {
            break;
        }
        /* earlier buffers are complete */
        for (size_t j = 0; j < k; ++j) {
            rd->ok &= rd->filled[j] == s->size[j];
        }
        rd->ok &= memcmp(ev->data, (const uint8_t *)s->buf[k] + ev->offset, ev->data_len) == 0;
        memcpy((uint8_t *)rd->buf[k] + ev->offset, ev->data, ev->data_len);
        rd->filled[k] += ev->data_len;
        break;
    }
    case TDESC_STREAM_EVENT_TENSOR_COMPLETE: {
        rd->ok &= ev->tensor_index == t && rd->completes == t && rd->tensors == t + 1;
        rd->completes++;
        const source *s = stream_source(t);
        for (size_t k = 0; k < rd->nbuf; ++k) {
            rd->ok &= rd->filled[k] == s->size[k];
        }
        /* Bind the reassembled buffers to the event's (borrowed) descriptor. */
        tdesc_tensor *tensor = NULL;
        rd->ok &= tdesc_tensor_bind(ev->descriptor, (const void *const *)rd->buf, rd->nbuf,
                                    &tensor) == TDESC_OK;
        rd->ok &= same_elements(tensor, s);
        tdesc_tensor_free(tensor);
        break;
    }
    case TDESC_STREAM_EVENT_STREAM_END:
        rd->ok &= rd->started && !rd->ended && rd->completes == N_STREAM;
        rd->ended = 1;
        break;
    default:
        rd->ok = 0;
    }
}

/* Poll until NONE (or an error, returned). */
static tdesc_status drain(tdesc_stream_reader *r, reading *rd) {
    for (;;) {
        tdesc_stream_event ev;
        tdesc_status s = tdesc_stream_reader_poll(r, &ev);
        if (s != TDESC_OK) {
            return s;
        }
        if (ev.kind == TDESC_STREAM_EVENT_NONE) {
            rd->ok &= tdesc_stream_reader_pending(r) == 0;
            size_t m = tdesc_stream_reader_memory(r);
            rd->max_memory = m > rd->max_memory ? m : rd->max_memory;
            return TDESC_OK;
        }
        on_event(rd, &ev);
    }
}

/* Feed `s` in chunks (`chunk` 0: random sizes 1 ... 700; else that size) and check. */
static void read_stream_in_chunks(const uint8_t *s, size_t len, size_t chunk) {
    tdesc_stream_reader *r = NULL;
    OK(tdesc_stream_reader_new(TDESC_MODE_STRICT, &r));
    reading rd;
    memset(&rd, 0, sizeof rd);
    rd.ok = 1;
    tdesc_status st = TDESC_OK;
    for (size_t off = 0; off < len && st == TDESC_OK;) {
        size_t n = chunk ? chunk : 1 + (size_t)(next_rand() % 700);
        if (n > len - off) {
            n = len - off;
        }
        st = tdesc_stream_reader_feed(r, s + off, n);
        if (st == TDESC_OK) {
            st = drain(r, &rd);
        }
        off += n;
    }
    OK(st);
    CHECK(rd.ok && rd.ended && rd.tensors == N_STREAM && rd.completes == N_STREAM);
    CHECK(rd.data_events > 300);
    CHECK(tdesc_stream_reader_position(r) == len);
    OK(tdesc_stream_reader_finish(r));
    if (chunk == 1) {
        /* Bounded memory: the 300-buffer descriptor payload dominates; nothing grows with
         * the data. */
        CHECK(rd.max_memory < 64 * 1024);
        printf("stream read 1 byte at a time: at most %zu bytes held\n", rd.max_memory);
    }
    reading_reset_tensor(&rd);
    tdesc_stream_reader_free(r);
}

/* Offset of frame number `nth` (0-based) of `kind`, or len when absent. */
static size_t frame_offset(const uint8_t *s, size_t len, uint8_t kind, int nth) {
    size_t off = 0;
    while (off + 16 <= len) {
        if (s[off] == kind && nth-- == 0) {
            return off;
        }
        off += 16 + (size_t)u64_at(s + off + 8);
    }
    return len;
}

/* Feed `s` whole (or byte by byte) to a fresh reader and return the first failing status. */
static tdesc_status read_all(const uint8_t *s, size_t len, tdesc_mode mode, int bytewise) {
    tdesc_stream_reader *r = NULL;
    tdesc_status st = tdesc_stream_reader_new(mode, &r);
    size_t step = bytewise ? 1 : (len ? len : 1);
    for (size_t off = 0; off < len && st == TDESC_OK; off += step) {
        size_t n = len - off < step ? len - off : step;
        st = tdesc_stream_reader_feed(r, s + off, n);
        for (tdesc_stream_event ev; st == TDESC_OK;) {
            st = tdesc_stream_reader_poll(r, &ev);
            if (st != TDESC_OK || ev.kind == TDESC_STREAM_EVENT_NONE) {
                break;
            }
        }
    }
    if (st == TDESC_OK) {
        st = tdesc_stream_reader_finish(r);
    }
    tdesc_stream_reader_free(r);
    return st;
}

static void test_stream_roundtrip(void) {
    tdesc_stream_writer *w = NULL;
    OK(tdesc_stream_writer_new_memory(&w));
    write_stream(w);
    const uint8_t *bytes = NULL;
    size_t len = 0;
    EXPECT(tdesc_stream_writer_bytes(w, &bytes, &len), TDESC_ERR_INVALID_ARGUMENT);
    OK(tdesc_stream_writer_finish(w));
    OK(tdesc_stream_writer_bytes(w, &bytes, &len));
    uint8_t *s = malloc(len);
    memcpy(s, bytes, len);
    tdesc_stream_writer_free(w);

    /* The same stream through a path. */
    const char *path = path_of(&pb7, "sources.tds");
    OK(tdesc_stream_writer_open(path, &w));
    write_stream(w);
    OK(tdesc_stream_writer_finish(w));
    EXPECT(tdesc_stream_writer_bytes(w, &bytes, &len), TDESC_ERR_INVALID_ARGUMENT);
    tdesc_stream_writer_free(w);
    size_t disk_len = 0;
    uint8_t *disk = read_file(path, &disk_len);
    CHECK(disk != NULL && disk_len == len && memcmp(disk, s, len) == 0);
    free(disk);

    read_stream_in_chunks(s, len, 1);
    for (int seed = 0; seed < 4; ++seed) {
        read_stream_in_chunks(s, len, 0);
    }
    read_stream_in_chunks(s, len, 7);
    read_stream_in_chunks(s, len, len);
    OK(read_all(s, len, TDESC_MODE_PERMISSIVE, 0));

    /* Truncated streams: finish says TRUNCATED wherever the input stops. */
    int truncated_ok = 1;
    for (size_t cut = 0; cut < len; cut += 1 + cut / 3) {
        truncated_ok &= read_all(s, cut, TDESC_MODE_STRICT, 0) == TDESC_ERR_TRUNCATED;
    }
    CHECK(truncated_ok);
    EXPECT(read_all(s, len - 1, TDESC_MODE_STRICT, 1), TDESC_ERR_TRUNCATED);

    /* Unpolled input: finish refuses. */
    tdesc_stream_reader *r = NULL;
    OK(tdesc_stream_reader_new(TDESC_MODE_STRICT, &r));
    OK(tdesc_stream_reader_feed(r, s, 40));
    CHECK(tdesc_stream_reader_pending(r) == 40);
    EXPECT(tdesc_stream_reader_finish(r), TDESC_ERR_INVALID_ARGUMENT);
    tdesc_stream_event ev;
    OK(tdesc_stream_reader_poll(r, &ev));
    CHECK(ev.kind == TDESC_STREAM_EVENT_STREAM_START && ev.name == NULL && ev.data == NULL);
    OK(tdesc_stream_reader_poll(r, &ev));
    CHECK(ev.kind == TDESC_STREAM_EVENT_NONE && tdesc_stream_reader_pending(r) == 0);
    CHECK(tdesc_stream_reader_position(r) == 40);
    EXPECT(tdesc_stream_reader_finish(r), TDESC_ERR_TRUNCATED);
    tdesc_stream_reader_free(r);
    free(s);
}

static void test_stream_errors(void) {
    tdesc_stream_writer *w = NULL;
    OK(tdesc_stream_writer_new_memory(&w));
    write_stream(w);
    OK(tdesc_stream_writer_finish(w));
    const uint8_t *bytes = NULL;
    size_t len = 0;
    OK(tdesc_stream_writer_bytes(w, &bytes, &len));
    uint8_t *s = malloc(len + 64);
    memcpy(s, bytes, len);
    tdesc_stream_writer_free(w);

    /* STREAM_START missing: a DESCRIPTOR comes first. */
    EXPECT(read_all(s + 24, len - 24, TDESC_MODE_STRICT, 0), TDESC_ERR_STREAM_ORDER);
    EXPECT(read_all(s + 24, len - 24, TDESC_MODE_STRICT, 1), TDESC_ERR_STREAM_ORDER);

    /* DATA for buffer 1 where buffer 0 is due (tensor "sparse", the 2nd DATA frame). */
    size_t d1 = frame_offset(s, len, 3, 1);
    CHECK(d1 < len && u64_at(s + d1 + 16) == 0);
    put_u64(s + d1 + 16, 1);
    EXPECT(read_all(s, len, TDESC_MODE_STRICT, 0), TDESC_ERR_STREAM_ORDER);
    EXPECT(read_all(s, len, TDESC_MODE_STRICT, 1), TDESC_ERR_STREAM_ORDER);
    put_u64(s + d1 + 16, 0);

    /* The error is raised as soon as the buffer_index is in, and the reader stays spent. */
    put_u64(s + d1 + 16, 1);
    tdesc_stream_reader *r = NULL;
    OK(tdesc_stream_reader_new(TDESC_MODE_STRICT, &r));
    reading rd;
    memset(&rd, 0, sizeof rd);
    rd.ok = 1;
    OK(tdesc_stream_reader_feed(r, s, d1 + 24));
    /* 64 MiB more fed before polling: the reader queues it, and lets it go once the
     * error makes it spent. */
    size_t big = (size_t)64 << 20;
    uint8_t *filler = calloc(big, 1);
    CHECK(filler != NULL);
    OK(tdesc_stream_reader_feed(r, filler, big));
    free(filler);
    CHECK(tdesc_stream_reader_memory(r) >= big);
    tdesc_stream_event ev;
    tdesc_status st;
    do {
        st = tdesc_stream_reader_poll(r, &ev);
    } while (st == TDESC_OK && ev.kind != TDESC_STREAM_EVENT_NONE);
    CHECK(st == TDESC_ERR_STREAM_ORDER);
    CHECK(tdesc_stream_reader_memory(r) < 4096);
    CHECK(tdesc_stream_reader_pending(r) == 0);
    CHECK(strstr(tdesc_last_error(), "STREAM_ORDER") == tdesc_last_error());
    ev.kind = TDESC_STREAM_EVENT_STREAM_END;
    EXPECT(tdesc_stream_reader_poll(r, &ev), TDESC_ERR_STREAM_ORDER);
    CHECK(ev.kind == TDESC_STREAM_EVENT_STREAM_END); /* untouched on failure */
    EXPECT(tdesc_stream_reader_feed(r, s, 1), TDESC_ERR_STREAM_ORDER);
    EXPECT(tdesc_stream_reader_finish(r), TDESC_ERR_STREAM_ORDER);
    tdesc_stream_reader_free(r);
    put_u64(s + d1 + 16, 0);

    /* STREAM_END while a tensor is incomplete: cut after the 2nd DESCRIPTOR, append END. */
    size_t desc1 = frame_offset(s, len, 2, 1);
    size_t after = desc1 + 16 + (size_t)u64_at(s + desc1 + 8);
    uint8_t *early = malloc(after + 16);
    memcpy(early, s, after);
    memset(early + after, 0, 16);
    early[after] = 4;
    EXPECT(read_all(early, after + 16, TDESC_MODE_STRICT, 0), TDESC_ERR_STREAM_ORDER);
    free(early);

    /* Bytes after STREAM_END; a second STREAM_START. */
    memcpy(s + len, s, 24);
    EXPECT(read_all(s, len + 24, TDESC_MODE_STRICT, 0), TDESC_ERR_STREAM_ORDER);
    EXPECT(read_all(s, len + 1, TDESC_MODE_STRICT, 1), TDESC_ERR_STREAM_ORDER);
    uint8_t two_starts[48];
    memcpy(two_starts, s, 24);
    memcpy(two_starts + 24, s, 24);
    EXPECT(read_all(two_starts, 48, TDESC_MODE_STRICT, 0), TDESC_ERR_STREAM_ORDER);

    /* Overrun: a DATA frame longer than its buffer (the scalar's 8 bytes claimed as 9). Its
     * DATA frame follows 1 (weights) + 3 (sparse) + 300 (paving) + 0 (empty) others. */
    size_t dlast = frame_offset(s, len, 3, 1 + 3 + 300);
    CHECK(dlast < len && u64_at(s + dlast + 8) == 16);
    uint8_t *over = malloc(len + 1);
    memcpy(over, s, dlast);
    memcpy(over + dlast, s + dlast, 32);
    put_u64(over + dlast + 8, 17);
    over[dlast + 32] = 0;
    memcpy(over + dlast + 33, s + dlast + 32, len - dlast - 32);
    EXPECT(read_all(over, len + 1, TDESC_MODE_STRICT, 0), TDESC_ERR_STREAM_ORDER);
    free(over);

    /* Unknown frame kind, reserved bytes, bad STREAM_START length. */
    s[24] = 9;
    EXPECT(read_all(s, len, TDESC_MODE_STRICT, 0), TDESC_ERR_CONTENT_INVALID);
    s[24] = 2;
    s[25] = 1;
    EXPECT(read_all(s, len, TDESC_MODE_STRICT, 1), TDESC_ERR_RESERVED_NONZERO);
    s[25] = 0;
    s[8] = 9;
    EXPECT(read_all(s, len, TDESC_MODE_STRICT, 0), TDESC_ERR_LENGTH_MISMATCH);
    s[8] = 8;
    OK(read_all(s, len, TDESC_MODE_STRICT, 0));

    /* Duplicate names: tensor "scalar" renamed to "pieces" (same length), the name of the
     * last tensor; accepted when the reader does not enforce unique names. */
    size_t d4 = frame_offset(s, len, 2, 4);
    CHECK(d4 < len && memcmp(s + d4 + 20, "scalar", 6) == 0);
    memcpy(s + d4 + 20, "pieces", 6);
    EXPECT(read_all(s, len, TDESC_MODE_STRICT, 0), TDESC_ERR_DUPLICATE_NAME);
    OK(tdesc_stream_reader_new_with_options(TDESC_MODE_STRICT, 0, false, &r));
    OK(tdesc_stream_reader_feed(r, s, len));
    size_t descriptors = 0;
    do {
        st = tdesc_stream_reader_poll(r, &ev);
        descriptors += st == TDESC_OK && ev.kind == TDESC_STREAM_EVENT_DESCRIPTOR;
    } while (st == TDESC_OK && ev.kind != TDESC_STREAM_EVENT_NONE);
    OK(st);
    CHECK(descriptors == N_STREAM);
    OK(tdesc_stream_reader_finish(r));
    tdesc_stream_reader_free(r);
    memcpy(s + d4 + 20, "scalar", 6);

    /* A descriptor payload above the reader's limit. */
    OK(tdesc_stream_reader_new_with_options(TDESC_MODE_STRICT, 16, true, &r));
    OK(tdesc_stream_reader_feed(r, s, len));
    do {
        st = tdesc_stream_reader_poll(r, &ev);
    } while (st == TDESC_OK && ev.kind != TDESC_STREAM_EVENT_NONE);
    CHECK(st == TDESC_ERR_LENGTH_MISMATCH);
    tdesc_stream_reader_free(r);

    /* An unknown layout inside a DESCRIPTOR frame: strict fails, permissive passes the
     * tensor's DATA through as OPAQUE_DATA. Tensor 0 "weights": payload = u32 + 7 bytes. */
    size_t d0 = frame_offset(s, len, 2, 0);
    CHECK(d0 == 24 && s[d0 + 16 + 4 + 7 + 18] == TDESC_LAYOUT_ROW_MAJOR);
    s[d0 + 16 + 4 + 7 + 18] = 0x20;
    EXPECT(read_all(s, len, TDESC_MODE_STRICT, 0), TDESC_ERR_UNKNOWN_LAYOUT);
    OK(tdesc_stream_reader_new(TDESC_MODE_PERMISSIVE, &r));
    size_t opaque_bytes = 0, kinds_ok = 1, n = 0;
    int order[8];
    for (size_t off = 0; off < len; ++off) {
        OK(tdesc_stream_reader_feed(r, s + off, 1));
        for (;;) {
            OK(st = tdesc_stream_reader_poll(r, &ev));
            if (st != TDESC_OK || ev.kind == TDESC_STREAM_EVENT_NONE) {
                break;
            }
            if (ev.kind == TDESC_STREAM_EVENT_OPAQUE_DATA) {
                kinds_ok &= ev.tensor_index == 0 && ev.buffer_index == 0 &&
                            !tdesc_descriptor_is_bindable(ev.descriptor) &&
                            memcmp(ev.data, (const uint8_t *)src[0].buf[0] + opaque_bytes,
                                   ev.data_len) == 0;
                opaque_bytes += ev.data_len;
            } else if (n < 8) {
                order[n++] = (int)ev.kind;
            }
        }
    }
    OK(tdesc_stream_reader_finish(r));
    tdesc_stream_reader_free(r);
    CHECK(kinds_ok && opaque_bytes == src[0].size[0]);
    CHECK(n == 8 && order[0] == TDESC_STREAM_EVENT_STREAM_START &&
          order[1] == TDESC_STREAM_EVENT_DESCRIPTOR &&
          order[2] == TDESC_STREAM_EVENT_TENSOR_COMPLETE &&
          order[3] == TDESC_STREAM_EVENT_DESCRIPTOR && order[4] == TDESC_STREAM_EVENT_DATA);
    s[d0 + 16 + 4 + 7 + 18] = TDESC_LAYOUT_ROW_MAJOR;

    /* Bad arguments. */
    r = (tdesc_stream_reader *)&len;
    EXPECT(tdesc_stream_reader_new(5, &r), TDESC_ERR_INVALID_ARGUMENT);
    CHECK(r == NULL);
    EXPECT(tdesc_stream_reader_new(TDESC_MODE_STRICT, NULL), TDESC_ERR_INVALID_ARGUMENT);
    OK(tdesc_stream_reader_new(TDESC_MODE_STRICT, &r));
    EXPECT(tdesc_stream_reader_feed(r, NULL, 3), TDESC_ERR_INVALID_ARGUMENT);
    OK(tdesc_stream_reader_feed(r, NULL, 0));
    EXPECT(tdesc_stream_reader_poll(r, NULL), TDESC_ERR_INVALID_ARGUMENT);
    EXPECT(tdesc_stream_reader_poll(NULL, &ev), TDESC_ERR_INVALID_ARGUMENT);
    EXPECT(tdesc_stream_reader_feed(NULL, s, 1), TDESC_ERR_INVALID_ARGUMENT);
    EXPECT(tdesc_stream_reader_finish(NULL), TDESC_ERR_INVALID_ARGUMENT);
    OK(tdesc_stream_reader_poll(r, &ev));
    CHECK(ev.kind == TDESC_STREAM_EVENT_NONE);
    EXPECT(tdesc_stream_reader_finish(r), TDESC_ERR_TRUNCATED);
    CHECK(tdesc_stream_reader_position(NULL) == 0 && tdesc_stream_reader_pending(NULL) == 0 &&
          tdesc_stream_reader_memory(NULL) == 0);
    tdesc_stream_reader_free(r);
    tdesc_stream_reader_free(NULL);

    /* Writer misuse: order, overrun, names, opaque descriptors; refusals write nothing. */
    OK(tdesc_stream_writer_new_memory(&w));
    OK(tdesc_stream_writer_begin(w, "a", 1, src[1].d));
    EXPECT(tdesc_stream_writer_finish(w), TDESC_ERR_STREAM_ORDER);
    EXPECT(tdesc_stream_writer_add(w, "b", 1, src[0].d, (const void *const *)src[0].buf, 1),
           TDESC_ERR_STREAM_ORDER);
    EXPECT(tdesc_stream_writer_data(w, 1, src[1].buf[1], 8), TDESC_ERR_STREAM_ORDER);
    EXPECT(tdesc_stream_writer_data(w, 0, src[1].buf[0], (size_t)src[1].size[0] + 1),
           TDESC_ERR_STREAM_ORDER);
    EXPECT(tdesc_stream_writer_data(w, 0, NULL, 4), TDESC_ERR_INVALID_ARGUMENT);
    for (size_t k = 0; k < 3; ++k) {
        OK(tdesc_stream_writer_data(w, k, src[1].buf[k], (size_t)src[1].size[k]));
    }
    EXPECT(tdesc_stream_writer_data(w, 0, src[1].buf[0], 1), TDESC_ERR_STREAM_ORDER);
    EXPECT(tdesc_stream_writer_add(w, "a", 1, src[0].d, (const void *const *)src[0].buf, 1),
           TDESC_ERR_DUPLICATE_NAME);
    EXPECT(tdesc_stream_writer_add(w, "", 0, src[0].d, (const void *const *)src[0].buf, 1),
           TDESC_ERR_INVALID_ARGUMENT);
    EXPECT(tdesc_stream_writer_add(w, "c", 1, src[0].d, (const void *const *)src[0].buf, 2),
           TDESC_ERR_BINDING_MISMATCH);
    size_t dlen = 0;
    uint8_t *desc = encode(src[0].d, &dlen);
    desc[18] = 0x20;
    tdesc_descriptor *opaque = NULL;
    OK(tdesc_descriptor_decode(desc, dlen, TDESC_MODE_PERMISSIVE, &opaque, NULL));
    EXPECT(tdesc_stream_writer_add(w, "c", 1, opaque, NULL, 0), TDESC_ERR_NOT_BINDABLE);
    EXPECT(tdesc_stream_writer_begin(w, "c", 1, opaque), TDESC_ERR_NOT_BINDABLE);
    tdesc_descriptor_free(opaque);
    free(desc);
    OK(tdesc_stream_writer_finish(w));
    EXPECT(tdesc_stream_writer_finish(w), TDESC_ERR_INVALID_ARGUMENT);
    EXPECT(tdesc_stream_writer_begin(w, "z", 1, src[0].d), TDESC_ERR_INVALID_ARGUMENT);
    OK(tdesc_stream_writer_bytes(w, &bytes, &len));
    OK(read_all(bytes, len, TDESC_MODE_STRICT, 1));
    tdesc_stream_writer_free(w);
    EXPECT(tdesc_stream_writer_open(NULL, &w), TDESC_ERR_INVALID_ARGUMENT);
    CHECK(w == NULL);
    EXPECT(tdesc_stream_writer_open(path_of(&pb8, "missing/s.tds"), &w), TDESC_ERR_IO);
    EXPECT(tdesc_stream_writer_new_memory(NULL), TDESC_ERR_INVALID_ARGUMENT);
    EXPECT(tdesc_stream_writer_finish(NULL), TDESC_ERR_INVALID_ARGUMENT);
    tdesc_stream_writer_free(NULL);

    /* An unfinished stream writer leaves a stream without STREAM_END. */
    const char *path = path_of(&pb9, "unfinished.tds");
    OK(tdesc_stream_writer_open(path, &w));
    OK(tdesc_stream_writer_add(w, "a", 1, src[0].d, (const void *const *)src[0].buf, 1));
    tdesc_stream_writer_free(w);
    size_t ulen = 0;
    uint8_t *u = read_file(path, &ulen);
    CHECK(u != NULL && ulen > 24);
    EXPECT(read_all(u, ulen, TDESC_MODE_STRICT, 0), TDESC_ERR_TRUNCATED);
    free(u);
    free(s);
}

/* Only regular files are mapped: a FIFO with no writer, a device or a directory is
 * TDESC_ERR_IO at once, saying what it is (opening the FIFO used to wait for a writer
 * forever; the alarm turns such a wait into a failure). */
static void test_open_non_regular(void) {
    char fifo[sizeof scratch + 32];
    snprintf(fifo, sizeof fifo, "%s/no-writer.fifo", scratch);
    unlink(fifo);
    CHECK(mkfifo(fifo, 0600) == 0);
    tdesc_file *f = (tdesc_file *)1;
    alarm(20);
    EXPECT(tdesc_file_open(fifo, TDESC_MODE_STRICT, &f), TDESC_ERR_IO);
    alarm(0);
    CHECK(f == NULL);
    CHECK(strstr(tdesc_last_error(), "is a FIFO, not a regular file") != NULL);
    unlink(fifo);
    EXPECT(tdesc_file_open("/dev/null", TDESC_MODE_STRICT, &f), TDESC_ERR_IO);
    CHECK(strstr(tdesc_last_error(), "/dev/null is a character device") != NULL);
    EXPECT(tdesc_file_open(scratch, TDESC_MODE_STRICT, &f), TDESC_ERR_IO);
    CHECK(strstr(tdesc_last_error(), "is a directory") != NULL);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s SCRATCH_DIR\n", argv[0]);
        return 2;
    }
    snprintf(scratch, sizeof scratch, "%s", argv[1]);
    make_sources();
    test_file_roundtrip();
    test_permissive_file();
    test_directory_first();
    test_stream_roundtrip();
    test_stream_errors();
    test_open_non_regular();
    free_sources();
    printf("transport: %d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
