/* The C ABI from C11: every contract function, the builder for every layout, binding
 * host buffers allocated here, a heterogeneous subpaving with more than 255 effective
 * buffers, cross-checks against bytes encoded by the Rust API, and the error paths with
 * their exact statuses.
 *
 * usage: test_c_api RUST_BYTES_DIR   (files written by capi/lib/tests/c_abi/c_api.rs)
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensordesc.h"

_Static_assert(TDESC_OK == 0, "stable status numbers");
_Static_assert(TDESC_ERR_INVALID_ARGUMENT == 1, "stable status numbers");
_Static_assert(TDESC_ERR_REGION_OVERLAP == 20, "stable status numbers");
_Static_assert(TDESC_ERR_BINDING_MISMATCH == 31, "stable status numbers");
_Static_assert(TDESC_ERR_INTERNAL == 39, "stable status numbers");
_Static_assert(TDESC_MAX_RANK == 64, "rank limit");
_Static_assert(TDESC_ABI_VERSION == 1, "ABI version");
_Static_assert(sizeof(tdesc_buffer_handle) == 16, "handle layout");

#include "check.h"

static uint8_t *read_file(const char *dir, const char *name, size_t *len) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) {
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = n > 0 ? malloc((size_t)n) : NULL;
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    *len = b ? (size_t)n : 0;
    return b;
}

/* Encode d into a malloc'd buffer through the size-query protocol. */
static uint8_t *encode_all(const tdesc_descriptor *d, size_t *len) {
    size_t need = 0;
    if (tdesc_descriptor_encode(d, NULL, 0, &need) != TDESC_ERR_OUTPUT_TOO_SMALL) {
        return NULL;
    }
    uint8_t *b = malloc(need);
    size_t written = 0;
    if (!b || tdesc_descriptor_encode(d, b, need, &written) != TDESC_OK || written != need) {
        free(b);
        return NULL;
    }
    *len = need;
    return b;
}

/* Build `node` as a tensor of et/shape; NULL (and a failed check) on error. */
static tdesc_descriptor *build(uint8_t et, const uint64_t *shape, size_t rank,
                               tdesc_node_spec *node) {
    tdesc_builder *b = NULL;
    tdesc_descriptor *d = NULL;
    OK(tdesc_builder_new(et, shape, rank, node, &b));
    OK(tdesc_builder_build(b, &d));
    tdesc_builder_free(b);
    return d;
}

/* decode(encode(d)) reproduces the same bytes. */
static void check_round_trip(const tdesc_descriptor *d) {
    size_t n = 0, m = 0;
    uint8_t *bytes = encode_all(d, &n);
    CHECK(bytes != NULL && n == tdesc_descriptor_encoded_len(d));
    tdesc_descriptor *back = NULL;
    size_t consumed = 0;
    OK(tdesc_descriptor_decode(bytes, n, TDESC_MODE_STRICT, &back, &consumed));
    CHECK(consumed == n);
    uint8_t *again = back ? encode_all(back, &m) : NULL;
    CHECK(again != NULL && m == n && memcmp(bytes, again, n) == 0);
    free(bytes);
    free(again);
    tdesc_descriptor_free(back);
}

/* ---------------------------------------------------------------- basics */

static void test_basics(void) {
    CHECK(tdesc_abi_version() == TDESC_ABI_VERSION);
    char v[32];
    snprintf(v, sizeof v, "%d.%d.%d", TDESC_VERSION_MAJOR, TDESC_VERSION_MINOR,
             TDESC_VERSION_PATCH);
    CHECK(strcmp(tdesc_version(), v) == 0);
    CHECK(strcmp(tdesc_status_name(TDESC_OK), "OK") == 0);
    CHECK(strcmp(tdesc_status_name(TDESC_ERR_REGION_OVERLAP), "REGION_OVERLAP") == 0);
    CHECK(strcmp(tdesc_status_name(TDESC_ERR_LAYOUT_REQUIRES_MULTI_BUFFER),
                 "LAYOUT_REQUIRES_MULTI_BUFFER") == 0);
    CHECK(strcmp(tdesc_status_name(TDESC_ERR_INTERNAL), "INTERNAL") == 0);
    CHECK(strcmp(tdesc_status_name(41), "UNKNOWN") == 0);
    CHECK(strcmp(tdesc_status_name(TDESC_ERR_REGION_TYPE_MISMATCH), "REGION_TYPE_MISMATCH") == 0);
    CHECK(strcmp(tdesc_status_name(0xFFFFFFFFu), "UNKNOWN") == 0);
    for (uint32_t s = 0; s <= 40; ++s) {
        CHECK(strcmp(tdesc_status_name(s), "UNKNOWN") != 0);
    }
    CHECK(tdesc_last_error() != NULL);
    CHECK(strcmp(tdesc_element_type_name(TDESC_ELEMENT_FLOAT8_E4M3FN), "FLOAT8_E4M3FN") == 0);
    CHECK(strcmp(tdesc_element_type_name(0), "UNKNOWN") == 0);
    CHECK(tdesc_element_type_bits(TDESC_ELEMENT_COMPLEX128) == 128);
    CHECK(tdesc_element_type_bits(TDESC_ELEMENT_UINT4) == 4);
    CHECK(tdesc_element_type_bits(0x16) == 0);
    CHECK(strcmp(tdesc_layout_name(TDESC_LAYOUT_BLOCK_PAGED), "BLOCK_PAGED") == 0);
    CHECK(strcmp(tdesc_layout_name(0xF3), "EXTENSION") == 0);
    CHECK(strcmp(tdesc_layout_name(0x30), "UNKNOWN") == 0);
    CHECK(strcmp(tdesc_buffer_role_name(TDESC_ROLE_QUANT_ZERO_POINTS), "QUANT_ZERO_POINTS") == 0);
    CHECK(strcmp(tdesc_buffer_role_name(99), "UNKNOWN") == 0);
}

/* ------------------------------------------------- Rust bytes vs C builder */

static tdesc_descriptor *c_row_major(void) {
    tdesc_node_spec *n = NULL;
    OK(tdesc_node_new_row_major(&n));
    const uint64_t shape[2] = {4, 8};
    return build(TDESC_ELEMENT_FLOAT32, shape, 2, n);
}

static tdesc_descriptor *c_subpaving(void) {
    tdesc_node_spec *sp = NULL, *dense = NULL, *csr = NULL;
    OK(tdesc_node_new_subpaving(&sp));
    OK(tdesc_node_new_row_major(&dense));
    OK(tdesc_node_new_csr(5, TDESC_SPARSE_SORTED | TDESC_SPARSE_UNIQUE, &csr));
    const uint64_t o0[2] = {0, 0}, o1[2] = {0, 4}, s[2] = {8, 4};
    OK(tdesc_node_add_region(sp, o0, s, 2, dense));
    OK(tdesc_node_add_region(sp, o1, s, 2, csr));
    const uint64_t shape[2] = {8, 8};
    return build(TDESC_ELEMENT_FLOAT32, shape, 2, sp);
}

static tdesc_descriptor *c_quant_sections(void) {
    tdesc_node_spec *n = NULL;
    OK(tdesc_node_new_row_major(&n));
    tdesc_quantization q;
    memset(&q, 0, sizeof q);
    q.scheme = TDESC_QUANT_PER_AXIS_AFFINE;
    q.expressed_type = TDESC_ELEMENT_FLOAT32;
    q.has_zero_point = 1;
    q.axis = 1;
    q.scale_type = TDESC_ELEMENT_FLOAT32;
    OK(tdesc_node_set_quantization(n, &q));
    const uint64_t shape[2] = {4, 6}, parent[2] = {8, 6}, origin[2] = {4, 0};
    tdesc_builder *b = NULL;
    tdesc_descriptor *d = NULL;
    OK(tdesc_builder_new(TDESC_ELEMENT_INT8, shape, 2, n, &b));
    OK(tdesc_builder_set_shard(b, parent, origin, 2, 1, 2));
    tdesc_statistics st;
    memset(&st, 0, sizeof st);
    st.has_nnz = 1;
    st.nnz = 20;
    st.has_min_max = 1;
    st.min = -1.5;
    st.max = 2.5;
    OK(tdesc_builder_set_statistics(b, &st));
    const char *name = "org.example.temp";
    const uint8_t meta[3] = {1, 2, 3};
    OK(tdesc_builder_set_extension_type(b, (const uint8_t *)name, strlen(name), meta, 3));
    OK(tdesc_builder_build(b, &d));
    /* The builder encodes the same bytes directly. */
    uint8_t direct[512];
    size_t written = 0;
    OK(tdesc_builder_encode(b, direct, sizeof direct, &written));
    size_t n2 = 0;
    uint8_t *via = d ? encode_all(d, &n2) : NULL;
    CHECK(via && n2 == written && memcmp(via, direct, written) == 0);
    free(via);
    EXPECT(tdesc_builder_encode(b, direct, 10, &written), TDESC_ERR_OUTPUT_TOO_SMALL);
    CHECK(written == n2);
    tdesc_builder_free(b);
    return d;
}

static void compare_with_rust(const char *dir, const char *file, tdesc_descriptor *mine) {
    size_t len = 0, n = 0;
    uint8_t *rust = read_file(dir, file, &len);
    CHECK(rust != NULL);
    uint8_t *ours = mine ? encode_all(mine, &n) : NULL;
    CHECK(ours != NULL && n == len && rust && memcmp(ours, rust, n) == 0);
    tdesc_descriptor *d = NULL;
    if (rust) {
        OK(tdesc_descriptor_decode(rust, len, TDESC_MODE_STRICT, &d, NULL));
    }
    CHECK(d && mine && tdesc_descriptor_rank(d) == tdesc_descriptor_rank(mine));
    CHECK(d && mine && tdesc_descriptor_buffer_count(d) == tdesc_descriptor_buffer_count(mine));
    free(rust);
    free(ours);
    tdesc_descriptor_free(d);
    tdesc_descriptor_free(mine);
}

static void test_rust_bytes(const char *dir) {
    compare_with_rust(dir, "rust_row_major.bin", c_row_major());
    compare_with_rust(dir, "rust_subpaving.bin", c_subpaving());
    compare_with_rust(dir, "rust_quant_sections.bin", c_quant_sections());

    /* Sections read back through the accessors. */
    tdesc_descriptor *d = c_quant_sections();
    tdesc_shard sh;
    OK(tdesc_descriptor_shard(d, &sh));
    CHECK(sh.rank == 2 && sh.parent_shape[0] == 8 && sh.shard_origin[0] == 4 &&
          sh.shard_index == 1 && sh.shard_count == 2);
    tdesc_statistics st;
    OK(tdesc_descriptor_statistics(d, &st));
    CHECK(st.has_nnz == 1 && st.nnz == 20 && st.has_min_max == 1 && st.min == -1.5 &&
          st.max == 2.5 && st.has_nan_count == 0);
    tdesc_extension_type et;
    OK(tdesc_descriptor_extension_type(d, &et));
    CHECK(et.name_len == 16 && strcmp((const char *)et.name, "org.example.temp") == 0 &&
          et.metadata_len == 3 && et.metadata[2] == 3);
    tdesc_quantization q;
    OK(tdesc_descriptor_quantization(d, TDESC_NO_REGION, &q));
    CHECK(q.scheme == TDESC_QUANT_PER_AXIS_AFFINE && q.axis == 1 && q.has_zero_point == 1 &&
          q.scale_type == TDESC_ELEMENT_FLOAT32);
    EXPECT(tdesc_descriptor_quantization(d, 0, &q), TDESC_ERR_INDEX_OUT_OF_BOUNDS);
    CHECK(tdesc_descriptor_buffer_count(d) == 3);
    tdesc_buffer b;
    OK(tdesc_descriptor_buffer(d, 1, &b));
    CHECK(b.role == TDESC_ROLE_QUANT_SCALES && b.size_bytes == 24 && b.region == TDESC_NO_REGION);
    OK(tdesc_descriptor_buffer(d, 2, &b));
    CHECK(b.role == TDESC_ROLE_QUANT_ZERO_POINTS && b.size_bytes == 6 && b.index_in_table == 2);
    tdesc_descriptor_free(d);

    d = c_row_major();
    EXPECT(tdesc_descriptor_shard(d, &sh), TDESC_ERR_NOT_FOUND);
    EXPECT(tdesc_descriptor_statistics(d, &st), TDESC_ERR_NOT_FOUND);
    EXPECT(tdesc_descriptor_extension_type(d, &et), TDESC_ERR_NOT_FOUND);
    EXPECT(tdesc_descriptor_quantization(d, TDESC_NO_REGION, &q), TDESC_ERR_NOT_FOUND);
    CHECK(tdesc_descriptor_element_count(d) == 32 && tdesc_descriptor_byte_offset(d) == 0 &&
          tdesc_descriptor_version_minor(d) == 0 && tdesc_descriptor_is_bindable(d));
    tdesc_descriptor *twin = NULL;
    OK(tdesc_descriptor_clone(d, &twin));
    tdesc_descriptor_free(d);
    CHECK(tdesc_descriptor_element_count(twin) == 32);
    tdesc_descriptor_free(twin);
}

/* ----------------------------------------------------- every layout from C */

static void test_layouts(void) {
    tdesc_node_spec *n = NULL;
    tdesc_descriptor *d = NULL;
    tdesc_layout_info li;
    tdesc_buffer b;
    tdesc_location loc;

    /* COL_MAJOR */
    OK(tdesc_node_new_col_major(&n));
    const uint64_t s32[2] = {3, 2};
    d = build(TDESC_ELEMENT_INT16, s32, 2, n);
    const uint64_t i21[2] = {2, 1};
    OK(tdesc_descriptor_locate(d, i21, 2, &loc));
    CHECK(loc.tag == TDESC_LOCATION_DENSE && loc.DENSE.byte_offset == 10 &&
          loc.DENSE.region == TDESC_NO_REGION);
    check_round_trip(d);
    tdesc_descriptor_free(d);

    /* STRIDED, with a byte_offset */
    const int64_t strides[2] = {1, 2};
    OK(tdesc_node_new_strided(strides, 2, &n));
    OK(tdesc_node_set_byte_offset(n, 16));
    const uint64_t s23[2] = {2, 3};
    d = build(TDESC_ELEMENT_FLOAT64, s23, 2, n);
    OK(tdesc_descriptor_layout_info(d, TDESC_NO_REGION, &li));
    CHECK(li.tag == TDESC_LAYOUT_STRIDED && li.strides[0] == 1 && li.strides[1] == 2 &&
          li.byte_offset == 16);
    const uint64_t i12[2] = {1, 2};
    OK(tdesc_descriptor_locate(d, i12, 2, &loc));
    CHECK(loc.tag == TDESC_LOCATION_DENSE && loc.DENSE.byte_offset == 16 + 8 * 5);
    check_round_trip(d);
    tdesc_descriptor_free(d);

    /* TILED, two levels */
    const uint64_t tiles[4] = {2, 4, 1, 2};
    const uint8_t orders[2] = {TDESC_TILE_ORDER_ROW_MAJOR, TDESC_TILE_ORDER_COL_MAJOR};
    OK(tdesc_node_new_tiled(tiles, orders, 2, 2, TDESC_LAYOUT_COL_MAJOR, &n));
    const uint64_t s48[2] = {4, 8};
    d = build(TDESC_ELEMENT_UINT16, s48, 2, n);
    OK(tdesc_descriptor_layout_info(d, TDESC_NO_REGION, &li));
    CHECK(li.tag == TDESC_LAYOUT_TILED && li.tile_levels == 2);
    tdesc_tile_level tl;
    OK(tdesc_descriptor_tile_level(d, TDESC_NO_REGION, 1, &tl));
    CHECK(tl.tile_shape[1] == 2 && tl.tile_order == TDESC_TILE_ORDER_COL_MAJOR &&
          tl.inner_tag == TDESC_LAYOUT_COL_MAJOR);
    OK(tdesc_descriptor_tile_level(d, TDESC_NO_REGION, 0, &tl));
    CHECK(tl.inner_tag == TDESC_LAYOUT_TILED);
    EXPECT(tdesc_descriptor_tile_level(d, TDESC_NO_REGION, 2, &tl), TDESC_ERR_INDEX_OUT_OF_BOUNDS);
    check_round_trip(d);
    tdesc_descriptor_free(d);

    /* DIM_ORDER */
    const uint8_t perm[3] = {2, 0, 1};
    OK(tdesc_node_new_dim_order(perm, 3, &n));
    const uint64_t s234[3] = {2, 3, 4};
    d = build(TDESC_ELEMENT_FLOAT16, s234, 3, n);
    OK(tdesc_descriptor_layout_info(d, TDESC_NO_REGION, &li));
    CHECK(li.tag == TDESC_LAYOUT_DIM_ORDER && li.axis_order[0] == 2 && li.axis_order[2] == 1);
    EXPECT(tdesc_descriptor_tile_level(d, TDESC_NO_REGION, 0, &tl), TDESC_ERR_INVALID_ARGUMENT);
    check_round_trip(d);
    tdesc_descriptor_free(d);

    /* SPLAT */
    OK(tdesc_node_new_splat(&n));
    const uint64_t big[2] = {1000, 1000};
    d = build(TDESC_ELEMENT_COMPLEX64, big, 2, n);
    OK(tdesc_descriptor_buffer(d, 0, &b));
    CHECK(b.size_bytes == 8 && b.role == TDESC_ROLE_DATA);
    const uint64_t i99[2] = {999, 999};
    OK(tdesc_descriptor_locate(d, i99, 2, &loc));
    CHECK(loc.tag == TDESC_LOCATION_DENSE && loc.DENSE.byte_offset == 0);
    {
        /* Only the tag and the DENSE fields are written: the rest of the union stays. */
        tdesc_location pre;
        memset(&pre, 0xA5, sizeof pre);
        OK(tdesc_descriptor_locate(d, i99, 2, &pre));
        CHECK(pre.tag == TDESC_LOCATION_DENSE && pre.DENSE.byte_offset == 0 &&
              pre.DENSE.bit_shift == 0);
        CHECK(pre.LOOKUP.local_index[1] == 0xA5A5A5A5A5A5A5A5ull && /* past DENSE */
              pre.LOOKUP.local_index[TDESC_MAX_RANK - 1] == 0xA5A5A5A5A5A5A5A5ull);
    }
    check_round_trip(d);
    tdesc_descriptor_free(d);

    /* COO */
    OK(tdesc_node_new_coo(3, TDESC_SPARSE_SORTED | TDESC_SPARSE_UNIQUE, &n));
    const uint64_t s34[2] = {3, 4};
    d = build(TDESC_ELEMENT_INT32, s34, 2, n);
    CHECK(tdesc_descriptor_buffer_count(d) == 2);
    OK(tdesc_descriptor_buffer(d, 0, &b));
    CHECK(b.role == TDESC_ROLE_INDICES && b.size_bytes == 48);
    OK(tdesc_descriptor_buffer(d, 1, &b));
    CHECK(b.role == TDESC_ROLE_VALUES && b.size_bytes == 12);
    OK(tdesc_descriptor_layout_info(d, TDESC_NO_REGION, &li));
    CHECK(li.nnz == 3 && li.sparse_flags == 3);
    OK(tdesc_descriptor_locate(d, i21, 2, &loc));
    CHECK(loc.tag == TDESC_LOCATION_LOOKUP && loc.LOOKUP.layout_tag == TDESC_LAYOUT_COO &&
          loc.LOOKUP.region == TDESC_NO_REGION && loc.LOOKUP.first_buffer == 0 &&
          loc.LOOKUP.buffer_count == 2 && loc.LOOKUP.local_index[0] == 2 &&
          loc.LOOKUP.local_index[1] == 1);
    {
        /* A lookup writes local_index[0, rank); later entries are left untouched. */
        tdesc_location pre;
        memset(&pre, 0xA5, sizeof pre);
        OK(tdesc_descriptor_locate(d, i21, 2, &pre));
        CHECK(pre.tag == TDESC_LOCATION_LOOKUP && pre.LOOKUP.buffer_count == 2 &&
              pre.LOOKUP.local_index[0] == 2 && pre.LOOKUP.local_index[1] == 1 &&
              pre.LOOKUP.local_index[2] == 0xA5A5A5A5A5A5A5A5ull &&
              pre.LOOKUP.local_index[TDESC_MAX_RANK - 1] == 0xA5A5A5A5A5A5A5A5ull);
    }
    check_round_trip(d);
    tdesc_descriptor_free(d);

    /* CSR and CSC */
    OK(tdesc_node_new_csr(4, TDESC_SPARSE_SORTED, &n));
    const uint64_t s33[2] = {3, 3};
    d = build(TDESC_ELEMENT_FLOAT64, s33, 2, n);
    OK(tdesc_descriptor_buffer(d, 0, &b));
    CHECK(b.role == TDESC_ROLE_INDPTR && b.size_bytes == 32);
    OK(tdesc_descriptor_buffer(d, 2, &b));
    CHECK(b.role == TDESC_ROLE_VALUES && b.size_bytes == 32);
    check_round_trip(d);
    tdesc_descriptor_free(d);
    OK(tdesc_node_new_csc(2, 0, &n));
    const uint64_t s35[2] = {3, 5};
    d = build(TDESC_ELEMENT_BFLOAT16, s35, 2, n);
    OK(tdesc_descriptor_buffer(d, 0, &b));
    CHECK(b.role == TDESC_ROLE_INDPTR && b.size_bytes == 48);
    CHECK(tdesc_descriptor_layout(d) == TDESC_LAYOUT_CSC);
    check_round_trip(d);
    tdesc_descriptor_free(d);

    /* CSF */
    const uint8_t axes[3] = {0, 1, 2};
    const uint64_t level_nodes[3] = {2, 3, 5};
    OK(tdesc_node_new_csf(TDESC_ELEMENT_FLOAT32, axes, level_nodes, 3, &n));
    d = build(TDESC_ELEMENT_FLOAT32, s234, 3, n);
    CHECK(tdesc_descriptor_buffer_count(d) == 7);
    OK(tdesc_descriptor_buffer(d, 1, &b));
    CHECK(b.role == TDESC_ROLE_INDPTR && b.level == 1 && b.size_bytes == 24);
    OK(tdesc_descriptor_buffer(d, 5, &b));
    CHECK(b.role == TDESC_ROLE_INDICES && b.level == 2 && b.size_bytes == 40);
    OK(tdesc_descriptor_buffer(d, 6, &b));
    CHECK(b.role == TDESC_ROLE_VALUES && b.size_bytes == 20);
    OK(tdesc_descriptor_layout_info(d, TDESC_NO_REGION, &li));
    CHECK(li.nnz == 5 && li.axis_order[1] == 1);
    check_round_trip(d);
    tdesc_descriptor_free(d);

    /* BLOCK_PAGED */
    OK(tdesc_node_new_block_paged(2, 2, &n));
    const uint64_t s253[3] = {2, 5, 3};
    d = build(TDESC_ELEMENT_FLOAT16, s253, 3, n);
    CHECK(tdesc_descriptor_buffer_count(d) == 4);
    OK(tdesc_descriptor_buffer(d, 3, &b));
    CHECK(b.role == TDESC_ROLE_PAGE_POOL && b.level == 1);
    OK(tdesc_descriptor_buffer(d, 1, &b));
    CHECK(b.role == TDESC_ROLE_ROW_LENGTHS);
    OK(tdesc_descriptor_layout_info(d, TDESC_NO_REGION, &li));
    CHECK(li.block_size == 2 && li.pool_count == 2);
    check_round_trip(d);
    tdesc_descriptor_free(d);

    /* Private extension with explicit buffers */
    const uint8_t ext[3] = {'a', 'b', 'c'};
    OK(tdesc_node_new_extension(0xF0, ext, 3, &n));
    tdesc_buffer_handle hs[2] = {{16, TDESC_DEVICE_CPU, 0, TDESC_MEMORY_DEFAULT, 6, 0},
                                 {128, TDESC_DEVICE_CPU, 0, TDESC_MEMORY_DEFAULT, 7,
                                  TDESC_BUFFER_READ_ONLY}};
    OK(tdesc_node_set_buffers(n, hs, 2));
    const uint64_t s16[1] = {16};
    d = build(TDESC_ELEMENT_UINT8, s16, 1, n);
    OK(tdesc_descriptor_layout_info(d, TDESC_NO_REGION, &li));
    CHECK(li.tag == 0xF0 && li.data_len == 3 && memcmp(li.data, "abc", 3) == 0);
    OK(tdesc_descriptor_buffer(d, 1, &b));
    CHECK(b.role == TDESC_ROLE_EXTENSION && b.level == 1 && b.alignment_log2 == 7 &&
          b.flags == TDESC_BUFFER_READ_ONLY && b.size_bytes == 128);
    const uint64_t i5[1] = {5};
    OK(tdesc_descriptor_locate(d, i5, 1, &loc));
    CHECK(loc.tag == TDESC_LOCATION_LOOKUP && loc.LOOKUP.layout_tag == 0xF0 &&
          loc.LOOKUP.buffer_count == 2);
    check_round_trip(d);
    tdesc_descriptor_free(d);

    /* Extension without buffers fails to build */
    OK(tdesc_node_new_extension(0xF1, NULL, 0, &n));
    tdesc_builder *bl = NULL;
    OK(tdesc_builder_new(TDESC_ELEMENT_UINT8, s16, 1, n, &bl));
    d = (tdesc_descriptor *)bl;
    EXPECT(tdesc_builder_build(bl, &d), TDESC_ERR_EMPTY_BUFFER_TABLE);
    CHECK(d == NULL);
    tdesc_builder_free(bl);

    /* Quantizations: per-tensor, blockwise, codebook; a device template */
    tdesc_quantization q;
    memset(&q, 0, sizeof q);
    q.scheme = TDESC_QUANT_PER_TENSOR_AFFINE;
    q.expressed_type = TDESC_ELEMENT_FLOAT32;
    q.scale = 0.25;
    OK(tdesc_node_new_row_major(&n));
    OK(tdesc_node_set_quantization(n, &q));
    d = build(TDESC_ELEMENT_INT8, s34, 2, n);
    tdesc_quantization back;
    OK(tdesc_descriptor_quantization(d, TDESC_NO_REGION, &back));
    CHECK(back.scheme == TDESC_QUANT_PER_TENSOR_AFFINE && back.scale == 0.25 &&
          back.zero_point == 0 && back.has_zero_point == 0);
    check_round_trip(d);
    tdesc_descriptor_free(d);

    memset(&q, 0, sizeof q);
    q.scheme = TDESC_QUANT_BLOCKWISE;
    q.expressed_type = TDESC_ELEMENT_BFLOAT16;
    q.axis = 1;
    q.block_size = 32;
    q.scale_type = TDESC_ELEMENT_FLOAT8_E8M0FNU;
    OK(tdesc_node_new_row_major(&n));
    OK(tdesc_node_set_quantization(n, &q));
    const uint64_t s464[2] = {4, 64};
    d = build(TDESC_ELEMENT_FLOAT4_E2M1FN, s464, 2, n);
    CHECK(tdesc_descriptor_buffer_count(d) == 2);
    OK(tdesc_descriptor_buffer(d, 1, &b));
    CHECK(b.role == TDESC_ROLE_QUANT_SCALES && b.size_bytes == 8);
    OK(tdesc_descriptor_buffer(d, 0, &b));
    CHECK(b.size_bytes == 128);
    const uint64_t i13[2] = {1, 3};
    OK(tdesc_descriptor_locate(d, i13, 2, &loc));
    CHECK(loc.tag == TDESC_LOCATION_DENSE && loc.DENSE.byte_offset == 33 &&
          loc.DENSE.bit_shift == 4);
    check_round_trip(d);
    tdesc_descriptor_free(d);

    memset(&q, 0, sizeof q);
    q.scheme = TDESC_QUANT_CODEBOOK;
    q.expressed_type = TDESC_ELEMENT_FLOAT16;
    q.codebook_size = 16;
    OK(tdesc_node_new_row_major(&n));
    OK(tdesc_node_set_quantization(n, &q));
    tdesc_builder *qb = NULL;
    OK(tdesc_builder_new(TDESC_ELEMENT_UINT4, s34, 2, n, &qb));
    tdesc_buffer_handle cuda = {0, TDESC_DEVICE_CUDA, 1, TDESC_MEMORY_DEVICE_LOCAL, 8, 0};
    OK(tdesc_builder_set_device(qb, &cuda));
    OK(tdesc_builder_build(qb, &d));
    tdesc_builder_free(qb);
    OK(tdesc_descriptor_buffer(d, 1, &b));
    CHECK(b.role == TDESC_ROLE_QUANT_CODEBOOK && b.size_bytes == 32 &&
          b.device_type == TDESC_DEVICE_CUDA && b.device_id == 1 &&
          b.memory_class == TDESC_MEMORY_DEVICE_LOCAL && b.alignment_log2 == 8);
    check_round_trip(d);
    tdesc_descriptor_free(d);

    /* A quantization rule broken: QUANTIZATION_INVALID at build time */
    memset(&q, 0, sizeof q);
    q.scheme = TDESC_QUANT_PER_TENSOR_AFFINE;
    q.expressed_type = TDESC_ELEMENT_FLOAT32;
    q.scale = -1.0;
    OK(tdesc_node_new_row_major(&n));
    OK(tdesc_node_set_quantization(n, &q));
    OK(tdesc_builder_new(TDESC_ELEMENT_INT8, s34, 2, n, &bl));
    EXPECT(tdesc_builder_build(bl, &d), TDESC_ERR_QUANTIZATION_INVALID);
    tdesc_builder_free(bl);
}

/* -------------------------------------------------- nested subpaving, regions */

static void test_nested_regions(void) {
    /* 4 x 4 tensor: left half dense; right half a subpaving of a splat and a COO. */
    tdesc_node_spec *top = NULL, *left = NULL, *right = NULL, *splat = NULL, *coo = NULL;
    OK(tdesc_node_new_subpaving(&top));
    OK(tdesc_node_new_row_major(&left));
    OK(tdesc_node_new_subpaving(&right));
    OK(tdesc_node_new_splat(&splat));
    OK(tdesc_node_new_coo(1, TDESC_SPARSE_UNIQUE, &coo));
    const uint64_t o00[2] = {0, 0}, o20[2] = {2, 0}, o02[2] = {0, 2};
    const uint64_t s42[2] = {4, 2}, s22[2] = {2, 2};
    OK(tdesc_node_add_region(right, o00, s22, 2, splat));
    OK(tdesc_node_add_region(right, o20, s22, 2, coo));
    OK(tdesc_node_add_region(top, o00, s42, 2, left));
    OK(tdesc_node_add_region(top, o02, s42, 2, right));
    const uint64_t shape[2] = {4, 4};
    tdesc_descriptor *d = build(TDESC_ELEMENT_UINT8, shape, 2, top);
    CHECK(tdesc_descriptor_region_count(d) == 4);
    CHECK(tdesc_descriptor_buffer_count(d) == 4);
    tdesc_region r;
    OK(tdesc_descriptor_region(d, 0, &r));
    CHECK(r.index == 0 && r.parent == TDESC_NO_REGION && r.depth == 1 &&
          r.layout_tag == TDESC_LAYOUT_ROW_MAJOR && r.first_buffer == 0 && r.buffer_count == 1 &&
          r.rank == 2);
    OK(tdesc_descriptor_region(d, 1, &r));
    CHECK(r.parent == TDESC_NO_REGION && r.depth == 1 && r.layout_tag == TDESC_LAYOUT_SUBPAVING &&
          r.first_buffer == 1 && r.buffer_count == 3 && r.origin[1] == 2 && r.shape[0] == 4);
    OK(tdesc_descriptor_region(d, 3, &r));
    CHECK(r.parent == 1 && r.depth == 2 && r.layout_tag == TDESC_LAYOUT_COO && r.origin[0] == 2 &&
          r.origin[1] == 0 && r.global_origin[0] == 2 && r.global_origin[1] == 2 &&
          r.first_buffer == 2 && r.buffer_count == 2 && r.flags == 0 && r.byte_offset == 0);
    /* Entries past the rank are not written. */
    memset(&r, 0xAB, sizeof r);
    OK(tdesc_descriptor_region(d, 3, &r));
    CHECK(r.origin[0] == 2 && r.origin[1] == 0 && r.origin[2] == 0xABABABABABABABABull);
    EXPECT(tdesc_descriptor_region(d, 4, &r), TDESC_ERR_INDEX_OUT_OF_BOUNDS);
    tdesc_layout_info li;
    OK(tdesc_descriptor_layout_info(d, 1, &li));
    CHECK(li.tag == TDESC_LAYOUT_SUBPAVING && li.region_count == 2);
    OK(tdesc_descriptor_layout_info(d, TDESC_NO_REGION, &li));
    CHECK(li.region_count == 2);
    tdesc_buffer b;
    OK(tdesc_descriptor_buffer(d, 3, &b));
    CHECK(b.region == 3 && b.role == TDESC_ROLE_VALUES && b.index_in_table == 1);
    tdesc_location loc;
    const uint64_t i33[2] = {3, 3};
    OK(tdesc_descriptor_locate(d, i33, 2, &loc));
    CHECK(loc.tag == TDESC_LOCATION_LOOKUP && loc.LOOKUP.region == 3 &&
          loc.LOOKUP.local_index[0] == 1 && loc.LOOKUP.local_index[1] == 1);
    const uint64_t i13[2] = {1, 3};
    OK(tdesc_descriptor_locate(d, i13, 2, &loc));
    CHECK(loc.tag == TDESC_LOCATION_DENSE && loc.DENSE.region == 2 && loc.DENSE.buffer == 1);
    check_round_trip(d);

    /* Bind it: dense left half k, splat 5 at depth 2, one COO entry (1, 1) = 9 at depth 2. */
    uint8_t *bufs[4];
    const size_t sizes[4] = {8, 1, 16, 1};
    for (size_t k = 0; k < 4; ++k) {
        OK(tdesc_descriptor_buffer(d, k, &b));
        CHECK(b.size_bytes == sizes[k]);
        bufs[k] = alloc64(sizes[k]);
    }
    for (uint8_t k = 0; k < 8; ++k) {
        bufs[0][k] = k;
    }
    bufs[1][0] = 5;
    const uint64_t coo_index[2] = {1, 1};
    memcpy(bufs[2], coo_index, sizeof coo_index);
    bufs[3][0] = 9;
    tdesc_tensor *t = NULL;
    OK(tdesc_tensor_bind(d, (const void *const *)bufs, 4, &t));
    tdesc_descriptor_free(d);
    OK(tdesc_tensor_validate(t));
    const double want[4][4] = {{0, 1, 5, 5}, {2, 3, 5, 5}, {4, 5, 0, 0}, {6, 7, 0, 9}};
    for (uint64_t i = 0; i < 4; ++i) {
        for (uint64_t j = 0; j < 4; ++j) {
            const uint64_t idx[2] = {i, j};
            double v = -1;
            uint8_t raw = 0xFF;
            OK(tdesc_tensor_get_f64(t, idx, 2, &v));
            OK(tdesc_tensor_get(t, idx, 2, &raw, 1));
            CHECK(v == want[i][j] && raw == (uint8_t)want[i][j]);
        }
    }
    tdesc_tensor_free(t);
    for (size_t k = 0; k < 4; ++k) {
        free(bufs[k]);
    }

    /* Region errors, with their stable numbers. */
    tdesc_node_spec *a = NULL, *c = NULL;
    OK(tdesc_node_new_subpaving(&top));
    OK(tdesc_node_new_row_major(&a));
    OK(tdesc_node_new_row_major(&c));
    const uint64_t s43[2] = {4, 3};
    OK(tdesc_node_add_region(top, o00, s43, 2, a));
    OK(tdesc_node_add_region(top, o02, s42, 2, c));
    tdesc_builder *bl = NULL;
    OK(tdesc_builder_new(TDESC_ELEMENT_UINT8, shape, 2, top, &bl));
    EXPECT(tdesc_builder_build(bl, &d), TDESC_ERR_REGION_OVERLAP);
    CHECK(strstr(tdesc_last_error(), "overlaps") != NULL);
    tdesc_builder_free(bl);

    OK(tdesc_node_new_subpaving(&top));
    OK(tdesc_node_new_row_major(&a));
    OK(tdesc_node_add_region(top, o00, s42, 2, a));
    OK(tdesc_builder_new(TDESC_ELEMENT_UINT8, shape, 2, top, &bl));
    EXPECT(tdesc_builder_build(bl, &d), TDESC_ERR_REGION_COVERAGE_GAP);
    tdesc_builder_free(bl);

    OK(tdesc_node_new_subpaving(&top));
    OK(tdesc_node_new_row_major(&a));
    const uint64_t o03[2] = {0, 3};
    OK(tdesc_node_add_region(top, o03, s42, 2, a));
    OK(tdesc_builder_new(TDESC_ELEMENT_UINT8, shape, 2, top, &bl));
    EXPECT(tdesc_builder_build(bl, &d), TDESC_ERR_REGION_OUT_OF_BOUNDS);
    tdesc_builder_free(bl);

    /* A subpaving nested 9 deep is refused while the tree is made. */
    tdesc_node_spec *node = NULL;
    OK(tdesc_node_new_row_major(&node));
    tdesc_status st = TDESC_OK;
    for (int level = 0; level < 9 && st == TDESC_OK; ++level) {
        tdesc_node_spec *sp = NULL;
        OK(tdesc_node_new_subpaving(&sp));
        st = tdesc_node_add_region(sp, o00, shape, 2, node);
        node = sp;
    }
    CHECK(st == TDESC_ERR_SUBPAVING_TOO_DEEP);
    tdesc_node_free(node);
}

/* ------------------------------------------------------------- binding */

static void test_binding(void) {
    /* Dense FLOAT32 [3, 4], values 10*i + j. */
    tdesc_node_spec *n = NULL;
    OK(tdesc_node_new_row_major(&n));
    const uint64_t s34[2] = {3, 4};
    tdesc_descriptor *d = build(TDESC_ELEMENT_FLOAT32, s34, 2, n);
    float *data = alloc64(12 * sizeof(float));
    for (int i = 0; i < 3; ++i) {
        for (int j = 0; j < 4; ++j) {
            data[i * 4 + j] = (float)(10 * i + j);
        }
    }
    const void *ptrs[1] = {data};
    tdesc_tensor *t = NULL;
    OK(tdesc_tensor_bind(d, ptrs, 1, &t));
    tdesc_descriptor_free(d); /* the tensor keeps the descriptor alive */
    OK(tdesc_tensor_validate(t));
    CHECK(tdesc_tensor_element_bytes(t) == 4 && tdesc_tensor_is_host_readable(t));
    CHECK(tdesc_descriptor_rank(tdesc_tensor_descriptor(t)) == 2);
    for (uint64_t i = 0; i < 3; ++i) {
        for (uint64_t j = 0; j < 4; ++j) {
            const uint64_t idx[2] = {i, j};
            double v = -1;
            float raw = -1;
            OK(tdesc_tensor_get_f64(t, idx, 2, &v));
            OK(tdesc_tensor_get(t, idx, 2, &raw, sizeof raw));
            CHECK(v == (double)(10 * i + j) && raw == (float)v);
        }
    }
    const uint64_t oob[2] = {3, 0};
    double v = 42;
    EXPECT(tdesc_tensor_get_f64(t, oob, 2, &v), TDESC_ERR_INDEX_OUT_OF_BOUNDS);
    CHECK(v == 42); /* untouched on failure */
    const uint64_t in[2] = {1, 1};
    EXPECT(tdesc_tensor_get_f64(t, in, 1, &v), TDESC_ERR_INVALID_ARGUMENT);
    uint8_t small[2];
    EXPECT(tdesc_tensor_get(t, in, 2, small, sizeof small), TDESC_ERR_OUTPUT_TOO_SMALL);
    EXPECT(tdesc_tensor_get(t, in, 2, NULL, 4), TDESC_ERR_INVALID_ARGUMENT);
    EXPECT(tdesc_tensor_get_f64(t, in, 2, NULL), TDESC_ERR_INVALID_ARGUMENT);
    tdesc_tensor_free(t);

    /* COMPLEX64 [2]: no single real value; the detail names the C function that reads it. */
    OK(tdesc_node_new_row_major(&n));
    const uint64_t s2[1] = {2};
    d = build(TDESC_ELEMENT_COMPLEX64, s2, 1, n);
    float *cdata = alloc64(4 * sizeof(float));
    cdata[2] = 0.25f;
    cdata[3] = 4.0f;
    const void *cptrs[1] = {cdata};
    OK(tdesc_tensor_bind(d, cptrs, 1, &t));
    tdesc_descriptor_free(d);
    const uint64_t c1[1] = {1};
    EXPECT(tdesc_tensor_get_f64(t, c1, 1, &v), TDESC_ERR_INVALID_ARGUMENT);
    CHECK(strstr(tdesc_last_error(), "read their bytes with tdesc_tensor_get") != NULL);
    CHECK(strstr(tdesc_last_error(), "get_bytes") == NULL);
    float pair[2] = {0, 0};
    OK(tdesc_tensor_get(t, c1, 1, pair, sizeof pair));
    CHECK(pair[0] == 0.25f && pair[1] == 4.0f);
    tdesc_tensor_free(t);
    free(cdata);

    /* Binding errors. */
    OK(tdesc_node_new_row_major(&n));
    d = build(TDESC_ELEMENT_FLOAT32, s34, 2, n);
    t = (tdesc_tensor *)d;
    EXPECT(tdesc_tensor_bind(d, ptrs, 2, &t), TDESC_ERR_BINDING_MISMATCH);
    CHECK(t == NULL);
    EXPECT(tdesc_tensor_bind(d, ptrs, 0, &t), TDESC_ERR_BINDING_MISMATCH);
    /* Absurd counts are refused before the pointer array is read or anything is allocated
       (under valgrind and ASan a read past `ptrs` would be reported). */
    EXPECT(tdesc_tensor_bind(d, ptrs, (size_t)1 << 28, &t), TDESC_ERR_BINDING_MISMATCH);
    EXPECT(tdesc_tensor_bind(d, ptrs, SIZE_MAX, &t), TDESC_ERR_BINDING_MISMATCH);
    CHECK(t == NULL);
    const void *misaligned[1] = {(const uint8_t *)data + 4};
    EXPECT(tdesc_tensor_bind(d, misaligned, 1, &t), TDESC_ERR_BINDING_MISMATCH);
    const void *nullbuf[1] = {NULL};
    EXPECT(tdesc_tensor_bind(d, nullbuf, 1, &t), TDESC_ERR_BINDING_MISMATCH);
    EXPECT(tdesc_tensor_bind(d, NULL, 1, &t), TDESC_ERR_INVALID_ARGUMENT);
    EXPECT(tdesc_tensor_bind(NULL, ptrs, 1, &t), TDESC_ERR_INVALID_ARGUMENT);
    EXPECT(tdesc_tensor_bind(d, ptrs, 1, NULL), TDESC_ERR_INVALID_ARGUMENT);
    EXPECT(tdesc_tensor_validate(NULL), TDESC_ERR_INVALID_ARGUMENT);
    tdesc_descriptor_free(d);
    free(data);

    /* CSR FLOAT64 [3, 3]: rows {2: 1.5}, {0: -2, 1: 4}, {2: 8}. */
    OK(tdesc_node_new_csr(4, TDESC_SPARSE_SORTED | TDESC_SPARSE_UNIQUE, &n));
    const uint64_t s33[2] = {3, 3};
    d = build(TDESC_ELEMENT_FLOAT64, s33, 2, n);
    uint64_t *indptr = alloc64(4 * 8), *indices = alloc64(4 * 8);
    double *values = alloc64(4 * 8);
    const uint64_t ip[4] = {0, 1, 3, 4}, ix[4] = {2, 0, 1, 2};
    const double vs[4] = {1.5, -2, 4, 8};
    memcpy(indptr, ip, sizeof ip);
    memcpy(indices, ix, sizeof ix);
    memcpy(values, vs, sizeof vs);
    const void *csr[3] = {indptr, indices, values};
    OK(tdesc_tensor_bind(d, csr, 3, &t));
    OK(tdesc_tensor_validate(t));
    const double dense[3][3] = {{0, 0, 1.5}, {-2, 4, 0}, {0, 0, 8}};
    for (uint64_t i = 0; i < 3; ++i) {
        for (uint64_t j = 0; j < 3; ++j) {
            const uint64_t idx[2] = {i, j};
            OK(tdesc_tensor_get_f64(t, idx, 2, &v));
            CHECK(v == dense[i][j]);
        }
    }
    tdesc_tensor_free(t);
    indptr[2] = 9; /* past nnz: malformed contents */
    OK(tdesc_tensor_bind(d, csr, 3, &t));
    EXPECT(tdesc_tensor_validate(t), TDESC_ERR_CONTENT_INVALID);
    const uint64_t r1[2] = {1, 0};
    EXPECT(tdesc_tensor_get_f64(t, r1, 2, &v), TDESC_ERR_CONTENT_INVALID);
    tdesc_tensor_free(t);
    tdesc_descriptor_free(d);
    free(indptr);
    free(indices);
    free(values);

    /* Quantized INT8 [2, 2], per-tensor: value = (q - 3) * 0.5. */
    tdesc_quantization q;
    memset(&q, 0, sizeof q);
    q.scheme = TDESC_QUANT_PER_TENSOR_AFFINE;
    q.expressed_type = TDESC_ELEMENT_FLOAT32;
    q.has_zero_point = 1;
    q.scale = 0.5;
    q.zero_point = 3;
    OK(tdesc_node_new_row_major(&n));
    OK(tdesc_node_set_quantization(n, &q));
    const uint64_t s22[2] = {2, 2};
    d = build(TDESC_ELEMENT_INT8, s22, 2, n);
    int8_t *qs = alloc64(4);
    qs[0] = 7;
    qs[1] = -1;
    qs[2] = 3;
    qs[3] = 127;
    const void *qp[1] = {qs};
    OK(tdesc_tensor_bind(d, qp, 1, &t));
    const double want[4] = {2.0, -2.0, 0.0, 62.0};
    for (uint64_t k = 0; k < 4; ++k) {
        const uint64_t idx[2] = {k / 2, k % 2};
        int8_t raw = 0;
        OK(tdesc_tensor_get_f64(t, idx, 2, &v));
        OK(tdesc_tensor_get(t, idx, 2, &raw, 1));
        CHECK(v == want[k] && raw == qs[k]);
    }
    tdesc_tensor_free(t);
    tdesc_descriptor_free(d);
    free(qs);

    /* Device buffers bind but cannot be read on the host. */
    OK(tdesc_node_new_row_major(&n));
    tdesc_builder *bl = NULL;
    OK(tdesc_builder_new(TDESC_ELEMENT_FLOAT32, s22, 2, n, &bl));
    tdesc_buffer_handle cuda = {0, TDESC_DEVICE_CUDA, 0, TDESC_MEMORY_DEVICE_LOCAL, 6, 0};
    OK(tdesc_builder_set_device(bl, &cuda));
    OK(tdesc_builder_build(bl, &d));
    tdesc_builder_free(bl);
    float *dev = alloc64(16);
    const void *dp[1] = {dev};
    OK(tdesc_tensor_bind(d, dp, 1, &t));
    CHECK(!tdesc_tensor_is_host_readable(t));
    EXPECT(tdesc_tensor_get_f64(t, in, 2, &v), TDESC_ERR_NOT_BINDABLE);
    EXPECT(tdesc_tensor_validate(t), TDESC_ERR_NOT_BINDABLE);
    tdesc_tensor_free(t);
    tdesc_descriptor_free(d);
    free(dev);
}

/* --------------------------------- heterogeneous subpaving, > 255 buffers */

enum { REGIONS = 300, W = 4 };

static void test_many_buffers(void) {
    /* [4, 1200]: 300 regions of [4, 4]; even ones INT32 row-major (1 buffer), odd ones
     * CSR with 2 entries (3 buffers): 150 + 450 = 600 effective buffers. */
    tdesc_node_spec *top = NULL;
    OK(tdesc_node_new_subpaving(&top));
    const uint64_t rs[2] = {W, W};
    for (uint64_t k = 0; k < REGIONS; ++k) {
        tdesc_node_spec *child = NULL;
        if (k % 2 == 0) {
            OK(tdesc_node_new_row_major(&child));
        } else {
            OK(tdesc_node_new_csr(2, TDESC_SPARSE_SORTED | TDESC_SPARSE_UNIQUE, &child));
        }
        const uint64_t o[2] = {0, W * k};
        OK(tdesc_node_add_region(top, o, rs, 2, child));
    }
    const uint64_t shape[2] = {W, W * REGIONS};
    tdesc_descriptor *d = build(TDESC_ELEMENT_INT32, shape, 2, top);
    const size_t nbuf = tdesc_descriptor_buffer_count(d);
    CHECK(nbuf == 600);
    CHECK(tdesc_descriptor_region_count(d) == REGIONS);

    /* Enumerate: roles, owners and sizes follow the pattern; allocate each buffer. */
    void **bufs = calloc(nbuf, sizeof(void *));
    size_t i = 0;
    int pattern_ok = 1;
    for (uint32_t k = 0; k < REGIONS; ++k) {
        tdesc_region r;
        OK(tdesc_descriptor_region(d, k, &r));
        pattern_ok &= r.first_buffer == i && r.origin[1] == (uint64_t)W * k && r.depth == 1;
        const size_t count = k % 2 == 0 ? 1 : 3;
        pattern_ok &= r.buffer_count == count;
        for (size_t j = 0; j < count; ++j, ++i) {
            tdesc_buffer b;
            OK(tdesc_descriptor_buffer(d, i, &b));
            pattern_ok &= b.region == k && b.index_in_table == j;
            if (k % 2 == 0) {
                pattern_ok &= b.role == TDESC_ROLE_DATA && b.size_bytes == 64;
            } else {
                const tdesc_buffer_role roles[3] = {TDESC_ROLE_INDPTR, TDESC_ROLE_INDICES,
                                                    TDESC_ROLE_VALUES};
                const uint64_t sizes[3] = {40, 16, 8};
                pattern_ok &= b.role == roles[j] && b.size_bytes == sizes[j];
            }
            bufs[i] = alloc64((size_t)b.size_bytes);
        }
        if (k % 2 == 0) {
            int32_t *v = bufs[r.first_buffer];
            for (int e = 0; e < W * W; ++e) {
                v[e] = (int32_t)(k * 100 + (uint32_t)e);
            }
        } else {
            /* entries (1, 1) = k and (3, 2) = -k */
            uint64_t *ip = bufs[r.first_buffer], *ix = bufs[r.first_buffer + 1];
            int32_t *v = bufs[r.first_buffer + 2];
            const uint64_t ipv[5] = {0, 0, 1, 1, 2};
            memcpy(ip, ipv, sizeof ipv);
            ix[0] = 1;
            ix[1] = 2;
            v[0] = (int32_t)k;
            v[1] = -(int32_t)k;
        }
    }
    CHECK(pattern_ok && i == nbuf);
    tdesc_buffer b;
    EXPECT(tdesc_descriptor_buffer(d, nbuf, &b), TDESC_ERR_INDEX_OUT_OF_BOUNDS);

    tdesc_tensor *t = NULL;
    OK(tdesc_tensor_bind(d, (const void *const *)bufs, nbuf, &t));
    OK(tdesc_tensor_validate(t));
    int values_ok = 1, locate_ok = 1;
    for (uint64_t row = 0; row < W; ++row) {
        for (uint64_t col = 0; col < W * REGIONS; ++col) {
            const uint64_t idx[2] = {row, col};
            const uint64_t k = col / W, c = col % W;
            double v = 0;
            values_ok &= tdesc_tensor_get_f64(t, idx, 2, &v) == TDESC_OK;
            double want;
            if (k % 2 == 0) {
                want = (double)(k * 100 + row * W + c);
            } else {
                want = (row == 1 && c == 1) ? (double)k : (row == 3 && c == 2) ? -(double)k : 0.0;
            }
            values_ok &= v == want;
            tdesc_location loc;
            locate_ok &= tdesc_descriptor_locate(d, idx, 2, &loc) == TDESC_OK;
            if (k % 2 == 0) {
                locate_ok &= loc.tag == TDESC_LOCATION_DENSE && loc.DENSE.region == k &&
                             loc.DENSE.byte_offset == 4 * (row * W + c);
            } else {
                locate_ok &= loc.tag == TDESC_LOCATION_LOOKUP && loc.LOOKUP.region == k &&
                             loc.LOOKUP.buffer_count == 3 && loc.LOOKUP.local_index[1] == c;
            }
        }
    }
    CHECK(values_ok);
    CHECK(locate_ok);
    /* One wrong pointer in the middle is caught at bind time. */
    void *saved = bufs[301];
    bufs[301] = (uint8_t *)saved + 8;
    tdesc_tensor *t2 = NULL;
    EXPECT(tdesc_tensor_bind(d, (const void *const *)bufs, nbuf, &t2), TDESC_ERR_BINDING_MISMATCH);
    CHECK(strstr(tdesc_last_error(), "effective buffer 301") != NULL);
    bufs[301] = saved;
    tdesc_tensor_free(t);
    tdesc_descriptor_free(d);
    for (size_t j = 0; j < nbuf; ++j) {
        free(bufs[j]);
    }
    free(bufs);
}

/* --------------------------------------------------------- error paths */

static void test_errors(void) {
    tdesc_descriptor *d = NULL;
    const uint8_t junk[8] = {'T', 'D', 'S', 'C', 1, 0, 0, 0};
    EXPECT(tdesc_descriptor_decode(NULL, 8, TDESC_MODE_STRICT, &d, NULL),
           TDESC_ERR_INVALID_ARGUMENT);
    EXPECT(tdesc_descriptor_decode(junk, 8, TDESC_MODE_STRICT, NULL, NULL),
           TDESC_ERR_INVALID_ARGUMENT);
    d = (tdesc_descriptor *)junk;
    EXPECT(tdesc_descriptor_decode(junk, 8, 2, &d, NULL), TDESC_ERR_INVALID_ARGUMENT);
    CHECK(d == NULL);
    CHECK(strstr(tdesc_last_error(), "INVALID_ARGUMENT: mode 2") == tdesc_last_error());
    uint64_t offset = 12345;
    CHECK(!tdesc_last_error_offset(&offset) && offset == 12345); /* an argument, no byte */
    EXPECT(tdesc_descriptor_decode(junk, 8, TDESC_MODE_STRICT, &d, NULL), TDESC_ERR_TRUNCATED);
    CHECK(tdesc_last_error_offset(&offset) && offset == 8); /* the input ends at byte 8 */
    CHECK(!tdesc_last_error_offset(NULL));
    EXPECT(tdesc_descriptor_decode(junk, 0, TDESC_MODE_STRICT, &d, NULL), TDESC_ERR_TRUNCATED);
    EXPECT(tdesc_descriptor_decode(NULL, 0, TDESC_MODE_STRICT, &d, NULL), TDESC_ERR_TRUNCATED);
    const uint8_t bad_magic[4] = {'X', 'D', 'S', 'C'};
    size_t consumed = 77;
    EXPECT(tdesc_descriptor_decode(bad_magic, 4, TDESC_MODE_PERMISSIVE, &d, &consumed),
           TDESC_ERR_BAD_MAGIC);
    CHECK(tdesc_last_error_offset(&offset) && offset == 0);
    CHECK(consumed == 77 && d == NULL);

    /* NULL handles: zero values, INVALID_ARGUMENT, no crash. */
    CHECK(tdesc_descriptor_rank(NULL) == 0 && tdesc_descriptor_shape(NULL) == NULL);
    CHECK(tdesc_descriptor_element_type(NULL) == 0 && tdesc_descriptor_layout(NULL) == 0);
    CHECK(tdesc_descriptor_buffer_count(NULL) == 0 && tdesc_descriptor_region_count(NULL) == 0);
    CHECK(tdesc_descriptor_element_count(NULL) == 0 && tdesc_descriptor_encoded_len(NULL) == 0);
    CHECK(tdesc_descriptor_byte_offset(NULL) == 0 && !tdesc_descriptor_is_bindable(NULL));
    CHECK(tdesc_descriptor_version_minor(NULL) == 0);
    CHECK(tdesc_tensor_element_bytes(NULL) == 0 && !tdesc_tensor_is_host_readable(NULL));
    CHECK(tdesc_tensor_descriptor(NULL) == NULL);
    tdesc_buffer b;
    tdesc_region r;
    tdesc_location loc;
    size_t written = 0;
    EXPECT(tdesc_descriptor_buffer(NULL, 0, &b), TDESC_ERR_INVALID_ARGUMENT);
    EXPECT(tdesc_descriptor_region(NULL, 0, &r), TDESC_ERR_INVALID_ARGUMENT);
    EXPECT(tdesc_descriptor_locate(NULL, NULL, 0, &loc), TDESC_ERR_INVALID_ARGUMENT);
    EXPECT(tdesc_descriptor_encode(NULL, NULL, 0, &written), TDESC_ERR_INVALID_ARGUMENT);
    EXPECT(tdesc_descriptor_clone(NULL, &d), TDESC_ERR_INVALID_ARGUMENT);
    CHECK(d == NULL);
    tdesc_descriptor_free(NULL);
    tdesc_tensor_free(NULL);
    tdesc_node_free(NULL);
    tdesc_builder_free(NULL);

    tdesc_descriptor *good = c_subpaving();
    EXPECT(tdesc_descriptor_buffer(good, 0, NULL), TDESC_ERR_INVALID_ARGUMENT);
    EXPECT(tdesc_descriptor_region(good, 0, NULL), TDESC_ERR_INVALID_ARGUMENT);
    EXPECT(tdesc_descriptor_encode(good, NULL, 0, NULL), TDESC_ERR_INVALID_ARGUMENT);
    EXPECT(tdesc_descriptor_encode(good, NULL, 4096, &written), TDESC_ERR_INVALID_ARGUMENT);
    const uint64_t idx[2] = {1, 1};
    EXPECT(tdesc_descriptor_locate(good, idx, 2, NULL), TDESC_ERR_INVALID_ARGUMENT);
    EXPECT(tdesc_descriptor_locate(good, NULL, 2, &loc), TDESC_ERR_INVALID_ARGUMENT);
    EXPECT(tdesc_descriptor_locate(good, idx, 1, &loc), TDESC_ERR_INVALID_ARGUMENT);
    EXPECT(tdesc_descriptor_locate(good, idx, 3, &loc), TDESC_ERR_INVALID_ARGUMENT);
    const uint64_t far[2] = {8, 0};
    EXPECT(tdesc_descriptor_locate(good, far, 2, &loc), TDESC_ERR_INDEX_OUT_OF_BOUNDS);
    /* A misaligned index array. */
    uint64_t storage[3] = {0, 0, 0};
    const uint64_t *skewed = (const uint64_t *)(const void *)((const uint8_t *)storage + 1);
    EXPECT(tdesc_descriptor_locate(good, skewed, 2, &loc), TDESC_ERR_INVALID_ARGUMENT);
    /* Wrong counts. */
    EXPECT(tdesc_descriptor_buffer(good, 4, &b), TDESC_ERR_INDEX_OUT_OF_BOUNDS);
    EXPECT(tdesc_descriptor_region(good, (size_t)-1, &r), TDESC_ERR_INDEX_OUT_OF_BOUNDS);
    tdesc_layout_info li;
    EXPECT(tdesc_descriptor_layout_info(good, 2, &li), TDESC_ERR_INDEX_OUT_OF_BOUNDS);
    EXPECT(tdesc_descriptor_layout_info(good, 0, NULL), TDESC_ERR_INVALID_ARGUMENT);
    tdesc_descriptor_free(good);

    /* Bad enumeration integers and bad arrays in the builder. */
    tdesc_node_spec *n = (tdesc_node_spec *)junk;
    const uint64_t tiles[2] = {2, 2};
    const uint8_t bad_order[1] = {2}, good_order[1] = {0};
    EXPECT(tdesc_node_new_tiled(tiles, bad_order, 1, 2, TDESC_LAYOUT_ROW_MAJOR, &n),
           TDESC_ERR_INVALID_ARGUMENT);
    CHECK(n == NULL);
    EXPECT(tdesc_node_new_tiled(tiles, good_order, 1, 2, TDESC_LAYOUT_TILED, &n),
           TDESC_ERR_INVALID_ARGUMENT);
    EXPECT(tdesc_node_new_tiled(tiles, good_order, 0, 2, TDESC_LAYOUT_ROW_MAJOR, &n),
           TDESC_ERR_INVALID_ARGUMENT);
    EXPECT(tdesc_node_new_tiled(NULL, good_order, 1, 2, TDESC_LAYOUT_ROW_MAJOR, &n),
           TDESC_ERR_INVALID_ARGUMENT);
    EXPECT(tdesc_node_new_coo(1, 4, &n), TDESC_ERR_INVALID_ARGUMENT);
    EXPECT(tdesc_node_new_csr(1, 0x80, &n), TDESC_ERR_INVALID_ARGUMENT);
    EXPECT(tdesc_node_new_extension(0xFF, NULL, 0, &n), TDESC_ERR_INVALID_ARGUMENT);
    EXPECT(tdesc_node_new_extension(0xF0, NULL, 3, &n), TDESC_ERR_INVALID_ARGUMENT);
    EXPECT(tdesc_node_new_csf(0x40, NULL, NULL, 0, &n), TDESC_ERR_INVALID_ARGUMENT);
    EXPECT(tdesc_node_new_strided(NULL, 2, &n), TDESC_ERR_INVALID_ARGUMENT);
    EXPECT(tdesc_node_new_row_major(NULL), TDESC_ERR_INVALID_ARGUMENT);

    OK(tdesc_node_new_row_major(&n));
    tdesc_buffer_handle h = {64, TDESC_DEVICE_CPU, 0, TDESC_MEMORY_DEFAULT, 6, 0};
    h.device_type = 5;
    EXPECT(tdesc_node_set_buffers(n, &h, 1), TDESC_ERR_INVALID_ARGUMENT);
    h.device_type = TDESC_DEVICE_CPU;
    h.memory_class = 9;
    EXPECT(tdesc_node_set_buffers(n, &h, 1), TDESC_ERR_INVALID_ARGUMENT);
    h.memory_class = TDESC_MEMORY_DEFAULT;
    h.alignment_log2 = 31;
    EXPECT(tdesc_node_set_buffers(n, &h, 1), TDESC_ERR_INVALID_ARGUMENT);
    h.alignment_log2 = 5; /* below 64 bytes: format 1.1 */
    OK(tdesc_node_set_buffers(n, &h, 1));
    h.alignment_log2 = 6;
    h.flags = 2;
    EXPECT(tdesc_node_set_buffers(n, &h, 1), TDESC_ERR_INVALID_ARGUMENT);
    h.flags = 0;
    EXPECT(tdesc_node_set_buffers(n, NULL, 1), TDESC_ERR_INVALID_ARGUMENT);
    EXPECT(tdesc_node_set_buffers(NULL, &h, 1), TDESC_ERR_INVALID_ARGUMENT);
    tdesc_quantization q;
    memset(&q, 0, sizeof q);
    q.scheme = 9;
    q.expressed_type = TDESC_ELEMENT_FLOAT32;
    EXPECT(tdesc_node_set_quantization(n, &q), TDESC_ERR_INVALID_ARGUMENT);
    q.scheme = TDESC_QUANT_PER_AXIS_AFFINE;
    q.scale_type = 0;
    EXPECT(tdesc_node_set_quantization(n, &q), TDESC_ERR_INVALID_ARGUMENT);
    q.scale_type = TDESC_ELEMENT_FLOAT32;
    q.has_zero_point = 2;
    EXPECT(tdesc_node_set_quantization(n, &q), TDESC_ERR_INVALID_ARGUMENT);
    EXPECT(tdesc_node_set_byte_offset(NULL, 0), TDESC_ERR_INVALID_ARGUMENT);
    /* Not a subpaving node: the child is consumed all the same. */
    tdesc_node_spec *child = NULL;
    OK(tdesc_node_new_row_major(&child));
    const uint64_t o[1] = {0}, s[1] = {1};
    EXPECT(tdesc_node_add_region(n, o, s, 1, child), TDESC_ERR_INVALID_ARGUMENT);
    OK(tdesc_node_new_row_major(&child));
    EXPECT(tdesc_node_add_region(NULL, o, s, 1, child), TDESC_ERR_INVALID_ARGUMENT);
    EXPECT(tdesc_node_add_region(n, o, s, 1, NULL), TDESC_ERR_INVALID_ARGUMENT);
    EXPECT(tdesc_node_add_region(n, o, s, 1, n), TDESC_ERR_INVALID_ARGUMENT);
    /* A region of the wrong rank is refused when the tensor is built. */
    tdesc_node_spec *sp = NULL;
    OK(tdesc_node_new_subpaving(&sp));
    OK(tdesc_node_new_row_major(&child));
    OK(tdesc_node_add_region(sp, o, s, 1, child));
    tdesc_builder *bl = (tdesc_builder *)junk;
    const uint64_t shape2[2] = {1, 1};
    OK(tdesc_builder_new(TDESC_ELEMENT_UINT8, shape2, 2, sp, &bl));
    EXPECT(tdesc_builder_build(bl, &d), TDESC_ERR_INVALID_ARGUMENT);
    tdesc_builder_free(bl);

    /* tdesc_builder_new consumes the node even when it fails. */
    EXPECT(tdesc_builder_new(0x16, shape2, 2, n, &bl), TDESC_ERR_INVALID_ARGUMENT);
    CHECK(bl == NULL);
    OK(tdesc_node_new_row_major(&n));
    uint64_t big_shape[65];
    for (int a = 0; a < 65; ++a) {
        big_shape[a] = 1;
    }
    EXPECT(tdesc_builder_new(TDESC_ELEMENT_UINT8, big_shape, 65, n, &bl), TDESC_ERR_RANK_TOO_LARGE);
    EXPECT(tdesc_builder_new(TDESC_ELEMENT_UINT8, shape2, 2, NULL, &bl),
           TDESC_ERR_INVALID_ARGUMENT);
    OK(tdesc_node_new_row_major(&n));
    OK(tdesc_builder_new(TDESC_ELEMENT_UINT8, shape2, 2, n, &bl));
    tdesc_statistics st;
    memset(&st, 0, sizeof st);
    st.has_nnz = 2;
    EXPECT(tdesc_builder_set_statistics(bl, &st), TDESC_ERR_INVALID_ARGUMENT);
    st.has_nnz = 1;
    st.nnz = 5; /* more than the 1 element */
    OK(tdesc_builder_set_statistics(bl, &st));
    EXPECT(tdesc_builder_build(bl, &d), TDESC_ERR_STATISTICS_INVALID);
    OK(tdesc_builder_set_statistics(bl, NULL));
    const uint8_t not_utf8[2] = {0xC3, 0x28};
    EXPECT(tdesc_builder_set_extension_type(bl, not_utf8, 2, NULL, 0), TDESC_ERR_INVALID_ARGUMENT);
    OK(tdesc_builder_set_extension_type(bl, NULL, 0, NULL, 0));
    EXPECT(tdesc_builder_build(bl, &d), TDESC_ERR_EXTENSION_TYPE_INVALID);
    const uint8_t nm[1] = {'x'};
    OK(tdesc_builder_set_extension_type(bl, nm, 1, NULL, 0));
    const uint64_t parent[2] = {1, 1}, origin[2] = {0, 1};
    OK(tdesc_builder_set_shard(bl, parent, origin, 2, 0, 1));
    EXPECT(tdesc_builder_build(bl, &d), TDESC_ERR_SHARD_INVALID);
    EXPECT(tdesc_builder_set_shard(bl, NULL, origin, 2, 0, 1), TDESC_ERR_INVALID_ARGUMENT);
    const uint64_t origin0[2] = {0, 0};
    OK(tdesc_builder_set_shard(bl, parent, origin0, 2, 0, 1));
    tdesc_buffer_handle bad_dev = {0, 0, 0, 0, 6, 0};
    EXPECT(tdesc_builder_set_device(bl, &bad_dev), TDESC_ERR_INVALID_ARGUMENT);
    EXPECT(tdesc_builder_set_device(bl, NULL), TDESC_ERR_INVALID_ARGUMENT);
    OK(tdesc_builder_build(bl, &d));
    CHECK(d != NULL);
    tdesc_descriptor_free(d);
    EXPECT(tdesc_builder_build(NULL, &d), TDESC_ERR_INVALID_ARGUMENT);
    CHECK(d == NULL);
    EXPECT(tdesc_builder_build(bl, NULL), TDESC_ERR_INVALID_ARGUMENT);
    tdesc_builder_free(bl);
}

/* ------------------------------------------------------------- decode cache */

/* Many descriptors through one tdesc_decode_cache: the same bytes back, the storage
 * recycled (held by the cache between decodes, not taken from a shared descriptor), and
 * the same statuses and details as tdesc_descriptor_decode. */
static void test_decode_cache(void) {
    enum { N = 2000 };
    tdesc_node_spec *top = NULL;
    OK(tdesc_node_new_subpaving(&top));
    const uint64_t rs[2] = {4, 4};
    for (uint64_t k = 0; k < N; ++k) {
        tdesc_node_spec *child = NULL;
        OK(tdesc_node_new_row_major(&child));
        const uint64_t o[2] = {0, 4 * k};
        OK(tdesc_node_add_region(top, o, rs, 2, child));
    }
    const uint64_t shape[2] = {4, 4 * N};
    tdesc_descriptor *built = build(TDESC_ELEMENT_FLOAT32, shape, 2, top);
    size_t n = 0;
    uint8_t *bytes = encode_all(built, &n);
    tdesc_descriptor_free(built);

    tdesc_decode_cache *c = NULL;
    OK(tdesc_decode_cache_new(&c));
    CHECK(c != NULL && tdesc_decode_cache_heap_bytes(c) == 0);
    size_t held = 0;
    for (int round = 0; round < 3; ++round) {
        tdesc_descriptor *d = NULL;
        size_t consumed = 0;
        OK(tdesc_decode_cache_decode(c, bytes, n, TDESC_MODE_STRICT, &d, &consumed));
        CHECK(d != NULL && consumed == n && tdesc_descriptor_region_count(d) == N);
        size_t m = 0;
        uint8_t *again = d ? encode_all(d, &m) : NULL;
        CHECK(again != NULL && m == n && memcmp(again, bytes, n) == 0);
        free(again);
        /* The storage is the descriptor's while it lives, the cache's once recycled. */
        CHECK(tdesc_decode_cache_heap_bytes(c) == 0);
        tdesc_decode_cache_recycle(c, d);
        const size_t now = tdesc_decode_cache_heap_bytes(c);
        /* A grid of plain tiles keeps one 8-byte size a tile. */
        CHECK(now >= (size_t)N * 8);
        CHECK(round == 0 || now == held);
        held = now;
    }
    /* A descriptor shared with a clone keeps its storage: only the handle goes. */
    tdesc_descriptor *d = NULL, *twin = NULL;
    OK(tdesc_decode_cache_decode(c, bytes, n, TDESC_MODE_STRICT, &d, NULL));
    OK(tdesc_descriptor_clone(d, &twin));
    tdesc_decode_cache_recycle(c, d);
    CHECK(tdesc_decode_cache_heap_bytes(c) == 0);
    CHECK(tdesc_descriptor_region_count(twin) == N);
    tdesc_descriptor_free(twin);
    /* Failures: the same status and detail as a plain decode; nothing handed out. */
    char plain[512];
    tdesc_descriptor *bad = NULL;
    EXPECT(tdesc_descriptor_decode(bytes, n - 1, TDESC_MODE_STRICT, &bad, NULL),
           TDESC_ERR_TRUNCATED);
    snprintf(plain, sizeof plain, "%s", tdesc_last_error());
    bad = (tdesc_descriptor *)bytes;
    EXPECT(tdesc_decode_cache_decode(c, bytes, n - 1, TDESC_MODE_STRICT, &bad, NULL),
           TDESC_ERR_TRUNCATED);
    CHECK(bad == NULL && strcmp(plain, tdesc_last_error()) == 0);
    EXPECT(tdesc_decode_cache_decode(NULL, bytes, n, TDESC_MODE_STRICT, &bad, NULL),
           TDESC_ERR_INVALID_ARGUMENT);
    EXPECT(tdesc_decode_cache_decode(c, bytes, n, 7, &bad, NULL), TDESC_ERR_INVALID_ARGUMENT);
    EXPECT(tdesc_decode_cache_decode(c, bytes, n, TDESC_MODE_STRICT, NULL, NULL),
           TDESC_ERR_INVALID_ARGUMENT);
    /* The cache still works after failures, and NULLs are no-ops. */
    OK(tdesc_decode_cache_decode(c, bytes, n, TDESC_MODE_STRICT, &d, NULL));
    tdesc_decode_cache_recycle(c, NULL);
    tdesc_decode_cache_recycle(NULL, d); /* no cache: just freed */
    CHECK(tdesc_decode_cache_heap_bytes(NULL) == 0);
    tdesc_decode_cache_free(c);
    tdesc_decode_cache_free(NULL);
    free(bytes);
}

/* ------------------------------------------------------- rectilinear grid */

/* A grid of plain tiles with uneven cells, decoded from its bytes: it is held without
 * region records (the decode cache keeps one 8-byte size a tile from it, where records
 * would leave over 60 bytes a tile), and every region, buffer and location is what the
 * cut points say; the bytes encode back unchanged. */
static void test_rectilinear_grid(void) {
    enum { CELLS = 7 };
    const uint64_t cx[CELLS + 1] = {0, 3, 8, 9, 15, 16, 17, 30};
    const uint64_t cy[CELLS + 1] = {0, 5, 6, 10, 11, 19, 20, 21};
    tdesc_node_spec *top = NULL;
    OK(tdesc_node_new_subpaving(&top));
    for (int i = 0; i < CELLS; ++i) {
        for (int j = 0; j < CELLS; ++j) {
            tdesc_node_spec *t = NULL;
            OK(tdesc_node_new_row_major(&t));
            const uint64_t o[2] = {cx[i], cy[j]};
            const uint64_t s[2] = {cx[i + 1] - cx[i], cy[j + 1] - cy[j]};
            OK(tdesc_node_add_region(top, o, s, 2, t));
        }
    }
    const uint64_t shape[2] = {cx[CELLS], cy[CELLS]};
    tdesc_descriptor *built = build(TDESC_ELEMENT_FLOAT32, shape, 2, top);
    size_t n = 0;
    uint8_t *bytes = encode_all(built, &n);
    tdesc_descriptor_free(built);
    CHECK(bytes != NULL);

    tdesc_decode_cache *c = NULL;
    OK(tdesc_decode_cache_new(&c));
    tdesc_descriptor *d = NULL;
    OK(tdesc_decode_cache_decode(c, bytes, n, TDESC_MODE_STRICT, &d, NULL));
    CHECK(tdesc_descriptor_region_count(d) == CELLS * CELLS);
    CHECK(tdesc_descriptor_buffer_count(d) == CELLS * CELLS);
    for (uint32_t k = 0; k < CELLS * CELLS; ++k) {
        const uint32_t i = k / CELLS, j = k % CELLS;
        const uint64_t h = cx[i + 1] - cx[i], w = cy[j + 1] - cy[j];
        tdesc_region r;
        OK(tdesc_descriptor_region(d, k, &r));
        CHECK(r.index == k && r.parent == TDESC_NO_REGION && r.depth == 1 &&
              r.layout_tag == TDESC_LAYOUT_ROW_MAJOR && r.first_buffer == k &&
              r.buffer_count == 1 && r.global_origin[0] == cx[i] &&
              r.global_origin[1] == cy[j] && r.shape[0] == h && r.shape[1] == w);
        tdesc_buffer b;
        OK(tdesc_descriptor_buffer(d, k, &b));
        CHECK(b.size_bytes == 4 * h * w && b.region == k);
        /* The tile's last element ends its buffer; its first starts it. */
        const uint64_t last[2] = {cx[i + 1] - 1, cy[j + 1] - 1};
        const uint64_t first[2] = {cx[i], cy[j]};
        tdesc_location loc;
        OK(tdesc_descriptor_locate(d, last, 2, &loc));
        CHECK(loc.tag == TDESC_LOCATION_DENSE && loc.DENSE.region == k &&
              loc.DENSE.buffer == k && loc.DENSE.byte_offset == 4 * h * w - 4);
        OK(tdesc_descriptor_locate(d, first, 2, &loc));
        CHECK(loc.tag == TDESC_LOCATION_DENSE && loc.DENSE.region == k &&
              loc.DENSE.byte_offset == 0);
    }
    const uint64_t outside[2] = {cx[CELLS], 0};
    tdesc_location loc;
    EXPECT(tdesc_descriptor_locate(d, outside, 2, &loc), TDESC_ERR_INDEX_OUT_OF_BOUNDS);
    size_t m = 0;
    uint8_t *again = encode_all(d, &m);
    CHECK(again != NULL && m == n && memcmp(again, bytes, n) == 0);
    free(again);
    tdesc_decode_cache_recycle(c, d);
    const size_t kept = tdesc_decode_cache_heap_bytes(c);
    CHECK(kept >= 8 * CELLS * CELLS && kept < 60 * CELLS * CELLS);
    tdesc_decode_cache_free(c);
    free(bytes);
}


/* ------------------------------------------------------- nested grids */

/* Nested uniform grids of plain tiles, beside a leaf, decoded from their bytes: they are
 * held without region records (the decode cache takes back only the few parents'
 * records, where records would leave over 60 bytes a tile), and every region, buffer and
 * location is what the grids say; the bytes encode back unchanged. */
enum { NG_TILES = 30 + 1 + 16 };
typedef struct {
    uint64_t o[2], s[2];
    uint32_t parent, depth;
} ng_tile;

/* A subpaving node of `rows` x `cols` row-major tiles of `h` x `w` (local origins). */
static tdesc_node_spec *ng_grid(uint64_t rows, uint64_t cols, uint64_t h, uint64_t w) {
    tdesc_node_spec *g = NULL;
    OK(tdesc_node_new_subpaving(&g));
    for (uint64_t i = 0; i < rows; ++i) {
        for (uint64_t j = 0; j < cols; ++j) {
            tdesc_node_spec *t = NULL;
            OK(tdesc_node_new_row_major(&t));
            const uint64_t o[2] = {i * h, j * w}, sh[2] = {h, w};
            OK(tdesc_node_add_region(g, o, sh, 2, t));
        }
    }
    return g;
}

static void test_nested_grids(void) {
    /* Region 0: a 6 x 5 grid of 4 x 4 tiles (regions 1-30); region 31: a leaf (32) and
     * region 33, a 4 x 4 grid of 6 x 4 tiles (regions 34-49). */
    tdesc_node_spec *top = NULL, *right = NULL, *leaf = NULL;
    OK(tdesc_node_new_subpaving(&top));
    OK(tdesc_node_new_subpaving(&right));
    OK(tdesc_node_new_row_major(&leaf));
    const uint64_t o0[2] = {0, 0}, s0[2] = {24, 20}, o1[2] = {0, 20}, s1[2] = {24, 20};
    const uint64_t lo[2] = {0, 0}, ls[2] = {24, 4}, go[2] = {0, 4}, gs[2] = {24, 16};
    OK(tdesc_node_add_region(top, o0, s0, 2, ng_grid(6, 5, 4, 4)));
    OK(tdesc_node_add_region(right, lo, ls, 2, leaf));
    OK(tdesc_node_add_region(right, go, gs, 2, ng_grid(4, 4, 6, 4)));
    OK(tdesc_node_add_region(top, o1, s1, 2, right));
    const uint64_t shape[2] = {24, 40};
    tdesc_descriptor *built = build(TDESC_ELEMENT_FLOAT32, shape, 2, top);
    size_t n = 0;
    uint8_t *bytes = encode_all(built, &n);
    tdesc_descriptor_free(built);
    CHECK(bytes != NULL);

    /* The leaf regions in pre-order: tiles of region 0, the leaf, tiles of region 33. */
    ng_tile want[NG_TILES];
    uint32_t ids[NG_TILES];
    for (uint32_t k = 0; k < 30; ++k) {
        want[k] = (ng_tile){{k / 5 * 4, k % 5 * 4}, {4, 4}, 0, 2};
        ids[k] = 1 + k;
    }
    want[30] = (ng_tile){{0, 20}, {24, 4}, 31, 2};
    ids[30] = 32;
    for (uint32_t k = 0; k < 16; ++k) {
        want[31 + k] = (ng_tile){{k / 4 * 6, 24 + k % 4 * 4}, {6, 4}, 33, 3};
        ids[31 + k] = 34 + k;
    }

    tdesc_decode_cache *c = NULL;
    OK(tdesc_decode_cache_new(&c));
    tdesc_descriptor *d = NULL;
    OK(tdesc_decode_cache_decode(c, bytes, n, TDESC_MODE_STRICT, &d, NULL));
    CHECK(tdesc_descriptor_region_count(d) == 50);
    CHECK(tdesc_descriptor_buffer_count(d) == NG_TILES);
    for (uint32_t k = 0; k < NG_TILES; ++k) {
        const ng_tile *t = &want[k];
        tdesc_region r;
        OK(tdesc_descriptor_region(d, ids[k], &r));
        CHECK(r.index == ids[k] && r.parent == t->parent && r.depth == t->depth &&
              r.layout_tag == TDESC_LAYOUT_ROW_MAJOR && r.first_buffer == k &&
              r.buffer_count == 1 && r.global_origin[0] == t->o[0] &&
              r.global_origin[1] == t->o[1] && r.shape[0] == t->s[0] && r.shape[1] == t->s[1]);
        tdesc_buffer b;
        OK(tdesc_descriptor_buffer(d, k, &b));
        CHECK(b.size_bytes == 4 * t->s[0] * t->s[1] && b.region == ids[k]);
        const uint64_t first[2] = {t->o[0], t->o[1]};
        const uint64_t last[2] = {t->o[0] + t->s[0] - 1, t->o[1] + t->s[1] - 1};
        const uint64_t inner[2] = {t->o[0] + 1, t->o[1] + 2};
        tdesc_location loc;
        OK(tdesc_descriptor_locate(d, first, 2, &loc));
        CHECK(loc.tag == TDESC_LOCATION_DENSE && loc.DENSE.region == ids[k] &&
              loc.DENSE.buffer == k && loc.DENSE.byte_offset == 0);
        OK(tdesc_descriptor_locate(d, last, 2, &loc));
        CHECK(loc.tag == TDESC_LOCATION_DENSE && loc.DENSE.region == ids[k] &&
              loc.DENSE.byte_offset == 4 * t->s[0] * t->s[1] - 4);
        OK(tdesc_descriptor_locate(d, inner, 2, &loc));
        CHECK(loc.tag == TDESC_LOCATION_DENSE &&
              loc.DENSE.byte_offset == 4 * (t->s[1] + 2));
    }
    /* The parents: region 0 and 33 own their grids' buffers. */
    tdesc_region r;
    OK(tdesc_descriptor_region(d, 0, &r));
    CHECK(r.layout_tag == TDESC_LAYOUT_SUBPAVING && r.first_buffer == 0 && r.buffer_count == 30);
    OK(tdesc_descriptor_region(d, 33, &r));
    CHECK(r.layout_tag == TDESC_LAYOUT_SUBPAVING && r.parent == 31 && r.first_buffer == 31 &&
          r.buffer_count == 16 && r.global_origin[1] == 24);
    size_t m = 0;
    uint8_t *again = encode_all(d, &m);
    CHECK(again != NULL && m == n && memcmp(again, bytes, n) == 0);
    free(again);
    tdesc_decode_cache_recycle(c, d);
    /* Records (and coordinates and handles) for the 4 parents and the leaf only. */
    CHECK(tdesc_decode_cache_heap_bytes(c) < 60 * 5 + 1024);
    tdesc_decode_cache_free(c);
    free(bytes);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s RUST_BYTES_DIR\n", argv[0]);
        return 2;
    }
    test_basics();
    test_rust_bytes(argv[1]);
    test_layouts();
    test_nested_regions();
    test_binding();
    test_many_buffers();
    test_decode_cache();
    test_rectilinear_grid();
    test_nested_grids();
    test_errors();
    printf("c_api: %d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
