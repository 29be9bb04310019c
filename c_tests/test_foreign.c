/* Foreign files and metadata from C11: a safetensors file (written by the safetensors crate
 * in capi/lib/tests/c_abi/c_api.rs) opened mapped and from memory, its tensors found, bound and read
 * where they lie (one at an odd byte offset, alignment 1), its __metadata__ read through the
 * tdesc_file_metadata_* calls; a .tdf 2.1 file with typed metadata (bool, int, uint, float,
 * string, an array) read key by key and item by item; bad arguments with their statuses.
 *
 * A sharded checkpoint (a directory with an index and two shards) opens by its directory.
 *
 * An NVFP4 checkpoint (ModelOpt pieces) opens as one grouped tensor, and as its pieces with
 * TDESC_FILE_UNGROUPED.
 *
 * FP8 blocks whose block size comes from the config.json beside the file, and an INT8
 * weight with BF16 scales per channel (compressed-tensors int-quantized), read dequantized.
 *
 * usage: test_foreign FILE.safetensors ODD.safetensors META.tdf SHARDS_DIR NVFP4.safetensors
 *        QUANT_DIR/model.safetensors
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static uint8_t *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)n + 1);
    *len = fread(b, 1, (size_t)n, f);
    fclose(f);
    return b;
}

static int str_is(const char *p, size_t n, const char *want) {
    return p && n == strlen(want) && memcmp(p, want, n) == 0 && p[n] == 0;
}

static void check_safetensors(tdesc_file *f) {
    CHECK(tdesc_file_container(f) == TDESC_CONTAINER_SAFETENSORS);
    CHECK(tdesc_file_version(f) == 0);
    CHECK(tdesc_file_tensor_count(f) == 2);
    size_t i = 99;
    OK(tdesc_file_find(f, "w", 1, &i));
    tdesc_tensor *t = NULL;
    OK(tdesc_file_tensor_bind(f, i, &t));
    CHECK(tdesc_tensor_is_read_only(t));
    uint64_t idx[2] = {1, 2};
    double v = 0;
    OK(tdesc_tensor_get_f64(t, idx, 2, &v));
    CHECK(v == 5.5);
    tdesc_tensor_free(t);
    /* The descriptor bytes are the encoding made at open. */
    const uint8_t *db = NULL;
    size_t dl = 0;
    OK(tdesc_file_tensor_descriptor_bytes(f, i, &db, &dl));
    CHECK(dl > 20 && memcmp(db, "TDSC", 4) == 0);

    /* __metadata__. */
    CHECK(tdesc_file_metadata_count(f) == 2);
    size_t k = 99;
    OK(tdesc_file_metadata_find(f, "format", 6, &k));
    CHECK(tdesc_file_metadata_type(f, k, TDESC_METADATA_WHOLE) == TDESC_METADATA_STRING);
    const char *s = NULL;
    size_t n = 0;
    OK(tdesc_file_metadata_string(f, k, TDESC_METADATA_WHOLE, &s, &n));
    CHECK(str_is(s, n, "pt"));
    OK(tdesc_file_metadata_key(f, k, &s, &n));
    CHECK(str_is(s, n, "format"));
    EXPECT(tdesc_file_metadata_find(f, "nope", 4, &k), TDESC_ERR_NOT_FOUND);
    int64_t x = 0;
    OK(tdesc_file_metadata_find(f, "format", 6, &k));
    EXPECT(tdesc_file_metadata_int(f, k, TDESC_METADATA_WHOLE, &x), TDESC_ERR_INVALID_ARGUMENT);
    CHECK(strstr(tdesc_last_error(), "STRING") != NULL);
    EXPECT(tdesc_file_metadata_string(f, k, 0, &s, &n), TDESC_ERR_INVALID_ARGUMENT);
    EXPECT(tdesc_file_metadata_key(f, 2, &s, &n), TDESC_ERR_INDEX_OUT_OF_BOUNDS);
    CHECK(tdesc_file_metadata_type(f, 2, TDESC_METADATA_WHOLE) == 0);
}

static void check_odd(const char *path) {
    tdesc_file *f = NULL;
    OK(tdesc_file_open(path, TDESC_MODE_STRICT, &f));
    size_t i = 99;
    OK(tdesc_file_find(f, "x", 1, &i));
    const uint8_t *data = NULL;
    size_t len = 0;
    OK(tdesc_file_tensor_buffer(f, i, 0, &data, &len));
    CHECK(len == 8 && ((uintptr_t)data & 1) == 1); /* in place, at an odd address */
    tdesc_tensor *t = NULL;
    OK(tdesc_file_tensor_bind(f, i, &t));
    uint64_t idx[1] = {1};
    double v = 0;
    OK(tdesc_tensor_get_f64(t, idx, 1, &v));
    CHECK(v == -3.0);
    tdesc_tensor_free(t);
    tdesc_file_free(f);
}

static void check_tdf_metadata(const char *path) {
    tdesc_file *f = NULL;
    OK(tdesc_file_open(path, TDESC_MODE_STRICT, &f));
    CHECK(tdesc_file_container(f) == TDESC_CONTAINER_TDF);
    CHECK(tdesc_file_metadata_count(f) == 6);
    size_t k = 0;
    bool b = false;
    OK(tdesc_file_metadata_find(f, "ok", 2, &k));
    OK(tdesc_file_metadata_bool(f, k, TDESC_METADATA_WHOLE, &b));
    CHECK(b);
    int64_t i = 0;
    OK(tdesc_file_metadata_find(f, "delta", 5, &k));
    OK(tdesc_file_metadata_int(f, k, TDESC_METADATA_WHOLE, &i));
    CHECK(i == -3);
    uint64_t u = 0;
    EXPECT(tdesc_file_metadata_uint(f, k, TDESC_METADATA_WHOLE, &u), TDESC_ERR_OVERFLOW);
    OK(tdesc_file_metadata_find(f, "count", 5, &k));
    OK(tdesc_file_metadata_uint(f, k, TDESC_METADATA_WHOLE, &u));
    CHECK(u == 7);
    OK(tdesc_file_metadata_int(f, k, TDESC_METADATA_WHOLE, &i));
    CHECK(i == 7);
    double d = 0;
    OK(tdesc_file_metadata_find(f, "scale", 5, &k));
    OK(tdesc_file_metadata_float(f, k, TDESC_METADATA_WHOLE, &d));
    CHECK(d == 0.5);
    OK(tdesc_file_metadata_find(f, "tokens", 6, &k));
    CHECK(tdesc_file_metadata_type(f, k, TDESC_METADATA_WHOLE) == TDESC_METADATA_ARRAY);
    size_t n = 0;
    OK(tdesc_file_metadata_array_len(f, k, TDESC_METADATA_WHOLE, &n));
    CHECK(n == 3);
    const char *s = NULL;
    size_t sl = 0;
    CHECK(tdesc_file_metadata_type(f, k, 0) == TDESC_METADATA_STRING);
    OK(tdesc_file_metadata_string(f, k, 0, &s, &sl));
    CHECK(str_is(s, sl, "<s>"));
    OK(tdesc_file_metadata_string(f, k, 1, &s, &sl));
    CHECK(str_is(s, sl, "hé"));
    CHECK(tdesc_file_metadata_type(f, k, 2) == TDESC_METADATA_ARRAY);
    OK(tdesc_file_metadata_array_len(f, k, 2, &n));
    CHECK(n == 2);
    EXPECT(tdesc_file_metadata_string(f, k, 3, &s, &sl), TDESC_ERR_INDEX_OUT_OF_BOUNDS);
    CHECK(tdesc_file_metadata_type(f, k, 3) == 0);
    OK(tdesc_file_metadata_find(f, "name", 4, &k));
    OK(tdesc_file_metadata_string(f, k, TDESC_METADATA_WHOLE, &s, &sl));
    CHECK(str_is(s, sl, "tiny"));
    EXPECT(tdesc_file_metadata_bool(f, k, TDESC_METADATA_WHOLE, NULL), TDESC_ERR_INVALID_ARGUMENT);
    tdesc_file_free(f);
    /* NULL handles. */
    CHECK(tdesc_file_metadata_count(NULL) == 0);
    EXPECT(tdesc_file_metadata_key(NULL, 0, &s, &sl), TDESC_ERR_INVALID_ARGUMENT);
}

int main(int argc, char **argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: test_foreign FILE.safetensors ODD.safetensors META.tdf DIR "
                        "NVFP4.safetensors QUANT.safetensors\n");
        return 2;
    }
    tdesc_file *f = NULL;
    OK(tdesc_file_open(argv[1], TDESC_MODE_STRICT, &f));
    if (f) {
        check_safetensors(f);
        tdesc_file_free(f);
    }
    size_t len = 0;
    uint8_t *bytes = read_all(argv[1], &len);
    CHECK(bytes != NULL);
    if (bytes) {
        f = NULL;
        OK(tdesc_file_open_bytes(bytes, len, TDESC_MODE_STRICT, &f));
        free(bytes); /* copied */
        if (f) {
            check_safetensors(f);
            tdesc_file_free(f);
        }
    }
    check_odd(argv[2]);
    check_tdf_metadata(argv[3]);
    /* A sharded checkpoint, by its directory: one file object. */
    f = NULL;
    OK(tdesc_file_open(argv[4], TDESC_MODE_STRICT, &f));
    if (f) {
        CHECK(tdesc_file_container(f) == TDESC_CONTAINER_SAFETENSORS_SHARDED);
        CHECK(tdesc_file_tensor_count(f) == 2);
        size_t i = 99;
        OK(tdesc_file_find(f, "s2", 2, &i));
        tdesc_tensor *t = NULL;
        OK(tdesc_file_tensor_bind(f, i, &t));
        uint64_t idx[1] = {2};
        double v = 0;
        OK(tdesc_tensor_get_f64(t, idx, 1, &v));
        CHECK(v == 30.0);
        tdesc_file_free(f); /* the bound tensor keeps the shards mapped */
        OK(tdesc_tensor_get_f64(t, idx, 1, &v));
        CHECK(v == 30.0);
        tdesc_tensor_free(t);
    }
    /* Quantized pieces grouped by default, the pieces with TDESC_FILE_UNGROUPED. */
    f = NULL;
    OK(tdesc_file_open(argv[5], TDESC_MODE_STRICT, &f));
    if (f) {
        CHECK(tdesc_file_tensor_count(f) == 1);
        size_t i = 99;
        OK(tdesc_file_find(f, "w.weight", 8, &i));
        tdesc_tensor *t = NULL;
        OK(tdesc_file_tensor_bind(f, i, &t));
        uint64_t idx[2] = {0, 0};
        double v = 0;
        OK(tdesc_tensor_get_f64(t, idx, 2, &v));
        CHECK(v == 1.0); /* code 2 (1.0, low nibble) x scale 1.0 (0x38) x global 1.0 */
        idx[1] = 1;
        OK(tdesc_tensor_get_f64(t, idx, 2, &v));
        CHECK(v == 0.0);
        tdesc_tensor_free(t);
        tdesc_file_free(f);
    }
    f = NULL;
    OK(tdesc_file_open_ex(argv[5], TDESC_MODE_STRICT, TDESC_FILE_UNGROUPED, &f));
    if (f) {
        CHECK(tdesc_file_tensor_count(f) == 3);
        tdesc_file_free(f);
    }
    EXPECT(tdesc_file_open_ex(argv[5], TDESC_MODE_STRICT, 2, &f), TDESC_ERR_INVALID_ARGUMENT);
    bytes = read_all(argv[5], &len);
    if (bytes) {
        f = NULL;
        OK(tdesc_file_open_bytes_ex(bytes, len, TDESC_MODE_STRICT, TDESC_FILE_UNGROUPED, &f));
        free(bytes);
        CHECK(f != NULL && tdesc_file_tensor_count(f) == 3);
        tdesc_file_free(f);
    }
    /* FP8 blocks of 1 x 2 (config.json) and INT8 per channel, each one tensor. */
    f = NULL;
    OK(tdesc_file_open(argv[6], TDESC_MODE_STRICT, &f));
    if (f) {
        CHECK(tdesc_file_tensor_count(f) == 2);
        size_t i = 99;
        tdesc_tensor *t = NULL;
        OK(tdesc_file_find(f, "fp8.weight", 10, &i));
        OK(tdesc_file_tensor_bind(f, i, &t));
        /* codes 1, 2 / -1, 1; scales 0.5 (row 0), 4 (row 1) */
        const double want_fp8[4] = {0.5, 1.0, -4.0, 4.0};
        for (uint64_t k = 0; k < 4; k++) {
            uint64_t idx[2] = {k / 2, k % 2};
            double v = 0;
            OK(tdesc_tensor_get_f64(t, idx, 2, &v));
            CHECK(v == want_fp8[k]);
        }
        tdesc_tensor_free(t);
        t = NULL;
        OK(tdesc_file_find(f, "int8.weight", 11, &i));
        OK(tdesc_file_tensor_bind(f, i, &t));
        const double want_i8[6] = {0.5, -1.0, 1.5, -32.0, 0.0, 1.25};
        for (uint64_t k = 0; k < 6; k++) {
            uint64_t idx[2] = {k / 3, k % 3};
            double v = 0;
            OK(tdesc_tensor_get_f64(t, idx, 2, &v));
            CHECK(v == want_i8[k]);
        }
        tdesc_tensor_free(t);
        tdesc_file_free(f);
    }
    /* Not a recognised file. */
    uint8_t junk[32] = {'P', 'K', 3, 4};
    EXPECT(tdesc_file_open_bytes(junk, sizeof junk, TDESC_MODE_STRICT, &f), TDESC_ERR_BAD_MAGIC);
    CHECK(strstr(tdesc_last_error(), "safetensors") != NULL);
    printf("test_foreign: %d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
