/* The data plane from C: regions meeting a box (visitor and caller-sized arrays), windowed
 * reads into packed and strided buffers in every output type, and batches of locates and
 * reads, each checked against the single-element calls; argument errors; ggml Q8_0 blocks
 * (GGML_BLOCKS) built and read. */
#include "check.h"

#include <stdint.h>

/* A 6 x 8 INT8 subpaving: a blockwise-quantized row-major left half (FLOAT16 scales,
 * blocks of 2 along axis 1), a CSR top-right quarter and a splat bottom-right quarter. */
typedef struct {
    tdesc_descriptor *d;
    tdesc_tensor *t;
    void *bufs[6];
} fixture;

static uint16_t f16_bits(double v) {
    /* Exact for the small multiples of 1/8 used here. */
    if (v == 0.25) return 0x3400;
    if (v == 0.5) return 0x3800;
    if (v == 0.75) return 0x3A00;
    if (v == 1.0) return 0x3C00;
    if (v == 1.5) return 0x3E00;
    return 0x4000; /* 2.0 */
}

static fixture make_fixture(void) {
    fixture f;
    memset(&f, 0, sizeof f);
    tdesc_node_spec *sp = NULL, *dense = NULL, *csr = NULL, *splat = NULL;
    OK(tdesc_node_new_subpaving(&sp));
    OK(tdesc_node_new_row_major(&dense));
    tdesc_quantization q;
    memset(&q, 0, sizeof q);
    q.scheme = TDESC_QUANT_BLOCKWISE;
    q.expressed_type = TDESC_ELEMENT_FLOAT32;
    q.axis = 1;
    q.scale_type = TDESC_ELEMENT_FLOAT16;
    q.block_size = 2;
    OK(tdesc_node_set_quantization(dense, &q));
    OK(tdesc_node_new_csr(3, TDESC_SPARSE_SORTED | TDESC_SPARSE_UNIQUE, &csr));
    OK(tdesc_node_new_splat(&splat));
    const uint64_t o0[2] = {0, 0}, s0[2] = {6, 4};
    const uint64_t o1[2] = {0, 4}, s1[2] = {3, 4};
    const uint64_t o2[2] = {3, 4}, s2[2] = {3, 4};
    OK(tdesc_node_add_region(sp, o0, s0, 2, dense));
    OK(tdesc_node_add_region(sp, o1, s1, 2, csr));
    OK(tdesc_node_add_region(sp, o2, s2, 2, splat));
    tdesc_builder *b = NULL;
    const uint64_t shape[2] = {6, 8};
    OK(tdesc_builder_new(TDESC_ELEMENT_INT8, shape, 2, sp, &b));
    OK(tdesc_builder_build(b, &f.d));
    tdesc_builder_free(b);

    int8_t *data = alloc64(24);
    for (int k = 0; k < 24; ++k) data[k] = (int8_t)((k * 7) % 19 - 9);
    uint16_t *scales = alloc64(12 * 2);
    const double sv[6] = {0.25, 0.5, 0.75, 1.0, 1.5, 2.0};
    for (int k = 0; k < 12; ++k) scales[k] = f16_bits(sv[k % 6]);
    uint64_t *indptr = alloc64(4 * 8), *indices = alloc64(3 * 8);
    int8_t *values = alloc64(3);
    const uint64_t ip[4] = {0, 1, 1, 3}, ix[3] = {2, 0, 3};
    memcpy(indptr, ip, sizeof ip);
    memcpy(indices, ix, sizeof ix);
    values[0] = 4;
    values[1] = -6;
    values[2] = 9;
    int8_t *fill = alloc64(1);
    fill[0] = 5;
    f.bufs[0] = data;
    f.bufs[1] = scales;
    f.bufs[2] = indptr;
    f.bufs[3] = indices;
    f.bufs[4] = values;
    f.bufs[5] = fill;
    /* Effective order: data, scales (region 0), indptr, indices, values (1), fill (2). */
    CHECK(tdesc_descriptor_buffer_count(f.d) == 6);
    OK(tdesc_tensor_bind(f.d, (const void *const *)f.bufs, 6, &f.t));
    OK(tdesc_tensor_validate(f.t));
    return f;
}

static void free_fixture(fixture *f) {
    tdesc_tensor_free(f->t);
    tdesc_descriptor_free(f->d);
    for (int k = 0; k < 6; ++k) free(f->bufs[k]);
}

typedef struct {
    int calls;
    int stop_after;
    uint32_t regions[8];
    uint64_t boxes[8][4];
} visit_log;

static int32_t visit(void *ctx, uint32_t region, uint8_t tag, const uint64_t *lo,
                     const uint64_t *hi) {
    visit_log *v = ctx;
    (void)tag;
    if (v->calls < 8) {
        v->regions[v->calls] = region;
        v->boxes[v->calls][0] = lo[0];
        v->boxes[v->calls][1] = lo[1];
        v->boxes[v->calls][2] = hi[0];
        v->boxes[v->calls][3] = hi[1];
    }
    v->calls++;
    return v->calls == v->stop_after;
}

static void test_regions_in_box(const fixture *f) {
    const uint64_t lo[2] = {1, 2}, hi[2] = {5, 7};
    visit_log v;
    memset(&v, 0, sizeof v);
    OK(tdesc_descriptor_regions_in_box(f->d, lo, hi, 2, visit, &v));
    CHECK(v.calls == 3);
    CHECK(v.regions[0] == 0 && v.regions[1] == 1 && v.regions[2] == 2);
    CHECK(v.boxes[0][0] == 1 && v.boxes[0][1] == 2 && v.boxes[0][2] == 5 && v.boxes[0][3] == 4);
    CHECK(v.boxes[1][0] == 1 && v.boxes[1][1] == 4 && v.boxes[1][2] == 3 && v.boxes[1][3] == 7);
    CHECK(v.boxes[2][0] == 3 && v.boxes[2][1] == 4 && v.boxes[2][2] == 5 && v.boxes[2][3] == 7);
    memset(&v, 0, sizeof v);
    v.stop_after = 1;
    OK(tdesc_descriptor_regions_in_box(f->d, lo, hi, 2, visit, &v));
    CHECK(v.calls == 1);
    EXPECT(tdesc_descriptor_regions_in_box(f->d, lo, hi, 2, NULL, NULL),
           TDESC_ERR_INVALID_ARGUMENT);
    EXPECT(tdesc_descriptor_regions_in_box(f->d, lo, hi, 3, visit, &v),
           TDESC_ERR_INVALID_ARGUMENT);
    const uint64_t bad_hi[2] = {7, 7};
    EXPECT(tdesc_descriptor_regions_in_box(f->d, lo, bad_hi, 2, visit, &v),
           TDESC_ERR_INDEX_OUT_OF_BOUNDS);

    uint32_t regions[3];
    uint64_t boxes[3 * 4];
    size_t count = 0;
    EXPECT(tdesc_descriptor_regions_in_box_array(f->d, lo, hi, 2, regions, boxes, 1, &count),
           TDESC_ERR_OUTPUT_TOO_SMALL);
    CHECK(count == 3 && regions[0] == 0);
    /* The sizing call: capacity 0 gives the count and succeeds. */
    count = 0;
    OK(tdesc_descriptor_regions_in_box_array(f->d, lo, hi, 2, NULL, NULL, 0, &count));
    CHECK(count == 3);
    OK(tdesc_descriptor_regions_in_box_array(f->d, lo, hi, 2, regions, boxes, 3, &count));
    CHECK(count == 3 && regions[2] == 2);
    CHECK(boxes[8] == 3 && boxes[9] == 4 && boxes[10] == 5 && boxes[11] == 7);
    OK(tdesc_descriptor_regions_in_box_array(f->d, lo, hi, 2, regions, NULL, 3, &count));
    const uint64_t e_lo[2] = {2, 2}, e_hi[2] = {2, 8};
    OK(tdesc_descriptor_regions_in_box_array(f->d, e_lo, e_hi, 2, regions, boxes, 3, &count));
    CHECK(count == 0);
}

static float f16_value(uint16_t h) {
    /* Normal numbers only (what this test reads). */
    int e = (h >> 10) & 0x1F;
    float v = 1.0f + (float)(h & 0x3FF) / 1024.0f;
    for (; e > 15; --e) v *= 2.0f;
    for (; e < 15; ++e) v *= 0.5f;
    if (h == 0 || h == 0x8000) v = 0.0f;
    return (h & 0x8000) ? -v : v;
}

static void test_read_box(const fixture *f) {
    const uint64_t lo[2] = {0, 0}, hi[2] = {6, 8};
    float out[48];
    double out64[48];
    int8_t raw[48];
    OK(tdesc_tensor_read_box(f->t, lo, hi, 2, TDESC_OUTPUT_FLOAT32, out, sizeof out, NULL));
    OK(tdesc_tensor_read_box(f->t, lo, hi, 2, TDESC_OUTPUT_FLOAT64, out64, sizeof out64, NULL));
    OK(tdesc_tensor_read_box(f->t, lo, hi, 2, TDESC_OUTPUT_RAW, raw, sizeof raw, NULL));
    int same = 1;
    for (uint64_t i = 0; i < 6; ++i) {
        for (uint64_t j = 0; j < 8; ++j) {
            const uint64_t idx[2] = {i, j};
            double v = 0;
            int8_t code = 0;
            OK(tdesc_tensor_get_f64(f->t, idx, 2, &v));
            OK(tdesc_tensor_get(f->t, idx, 2, &code, 1));
            same &= out[i * 8 + j] == (float)v && out64[i * 8 + j] == v &&
                    raw[i * 8 + j] == code;
        }
    }
    CHECK(same);
    CHECK(raw[5 * 8 + 7] == 5 && out[5 * 8 + 7] == 5.0f);
    CHECK(raw[0 * 8 + 6] == 4 && raw[1 * 8 + 4] == 0 && raw[2 * 8 + 7] == 9);

    /* Transposed into column-major order, and a reversed window (negative strides). */
    float col[48];
    const int64_t cm[2] = {4, 6 * 4};
    OK(tdesc_tensor_read_box(f->t, lo, hi, 2, TDESC_OUTPUT_FLOAT32, col, sizeof col, cm));
    same = 1;
    for (int i = 0; i < 6; ++i)
        for (int j = 0; j < 8; ++j) same &= col[j * 6 + i] == out[i * 8 + j];
    CHECK(same);
    const uint64_t wlo[2] = {1, 2}, whi[2] = {5, 7};
    float rev[20];
    const int64_t neg[2] = {-5 * 4, -4};
    OK(tdesc_tensor_read_box(f->t, wlo, whi, 2, TDESC_OUTPUT_FLOAT32, rev, sizeof rev, neg));
    same = 1;
    for (int p = 0; p < 4; ++p)
        for (int q = 0; q < 5; ++q) same &= rev[19 - (p * 5 + q)] == out[(1 + p) * 8 + 2 + q];
    CHECK(same);

    /* FLOAT16 and BFLOAT16 of exact values. */
    uint16_t h[48], bf[48];
    OK(tdesc_tensor_read_box(f->t, lo, hi, 2, TDESC_OUTPUT_FLOAT16, h, sizeof h, NULL));
    OK(tdesc_tensor_read_box(f->t, lo, hi, 2, TDESC_OUTPUT_BFLOAT16, bf, sizeof bf, NULL));
    same = 1;
    for (int k = 0; k < 48; ++k) {
        float b;
        uint32_t bits = (uint32_t)bf[k] << 16;
        memcpy(&b, &bits, 4);
        same &= f16_value(h[k]) == out[k] && b == out[k];
    }
    CHECK(same);

    /* Errors. */
    EXPECT(tdesc_tensor_read_box(f->t, lo, hi, 2, TDESC_OUTPUT_FLOAT32, out, sizeof out - 1, NULL),
           TDESC_ERR_OUTPUT_TOO_SMALL);
    EXPECT(tdesc_tensor_read_box(f->t, lo, hi, 1, TDESC_OUTPUT_FLOAT32, out, sizeof out, NULL),
           TDESC_ERR_INVALID_ARGUMENT);
    EXPECT(tdesc_tensor_read_box(f->t, lo, hi, 2, 5, out, sizeof out, NULL),
           TDESC_ERR_INVALID_ARGUMENT);
    EXPECT(tdesc_tensor_read_box(f->t, lo, hi, 2, TDESC_OUTPUT_FLOAT32, NULL, sizeof out, NULL),
           TDESC_ERR_INVALID_ARGUMENT);
    EXPECT(tdesc_tensor_read_box(f->t, lo, hi, 2, TDESC_OUTPUT_FLOAT32, (char *)out + 1,
                                 sizeof out - 4, NULL),
           TDESC_ERR_INVALID_ARGUMENT);
    const int64_t odd[2] = {2, 4};
    EXPECT(tdesc_tensor_read_box(f->t, lo, hi, 2, TDESC_OUTPUT_FLOAT32, out, sizeof out, odd),
           TDESC_ERR_INVALID_ARGUMENT);
    const uint64_t bad[2] = {7, 8};
    EXPECT(tdesc_tensor_read_box(f->t, lo, bad, 2, TDESC_OUTPUT_FLOAT32, out, sizeof out, NULL),
           TDESC_ERR_INDEX_OUT_OF_BOUNDS);
    const uint64_t empty_hi[2] = {0, 8};
    OK(tdesc_tensor_read_box(f->t, lo, empty_hi, 2, TDESC_OUTPUT_FLOAT32, NULL, 0, NULL));
    CHECK(tdesc_output_element_bytes(TDESC_OUTPUT_FLOAT16, TDESC_ELEMENT_INT8) == 2);
    CHECK(tdesc_output_element_bytes(TDESC_OUTPUT_RAW, TDESC_ELEMENT_INT4) == 1);
}

static void test_batches(const fixture *f) {
    uint64_t idx[96];
    for (int k = 0; k < 48; ++k) {
        idx[2 * k] = (uint64_t)((k * 5) % 6);
        idx[2 * k + 1] = (uint64_t)((k * 3) % 8);
    }
    tdesc_compact_location locs[48];
    OK(tdesc_descriptor_locate_many(f->d, idx, 48, 2, locs));
    int same = 1;
    for (int k = 0; k < 48; ++k) {
        tdesc_location l;
        OK(tdesc_descriptor_locate(f->d, idx + 2 * k, 2, &l));
        if (l.tag == TDESC_LOCATION_DENSE) {
            same &= locs[k].kind == TDESC_COMPACT_DENSE && locs[k].buffer == l.DENSE.buffer &&
                    locs[k].byte_offset == l.DENSE.byte_offset && locs[k].region == l.DENSE.region;
        } else {
            same &= locs[k].kind == TDESC_COMPACT_LOOKUP && locs[k].buffer == l.LOOKUP.first_buffer &&
                    locs[k].layout_tag == l.LOOKUP.layout_tag && locs[k].region == l.LOOKUP.region;
        }
    }
    CHECK(same);
    float vals[48];
    OK(tdesc_tensor_get_many(f->t, idx, 48, 2, TDESC_OUTPUT_FLOAT32, vals, sizeof vals));
    same = 1;
    for (int k = 0; k < 48; ++k) {
        double v = 0;
        OK(tdesc_tensor_get_f64(f->t, idx + 2 * k, 2, &v));
        same &= vals[k] == (float)v;
    }
    CHECK(same);
    EXPECT(tdesc_tensor_get_many(f->t, idx, 48, 2, TDESC_OUTPUT_FLOAT64, vals, sizeof vals),
           TDESC_ERR_OUTPUT_TOO_SMALL);
    EXPECT(tdesc_descriptor_locate_many(f->d, idx, 48, 3, locs), TDESC_ERR_INVALID_ARGUMENT);
    EXPECT(tdesc_descriptor_locate_many(f->d, idx, (size_t)-1, 2, locs),
           TDESC_ERR_INVALID_ARGUMENT);
    idx[2 * 7] = 6;
    EXPECT(tdesc_descriptor_locate_many(f->d, idx, 48, 2, locs), TDESC_ERR_INDEX_OUT_OF_BOUNDS);
    CHECK(strstr(tdesc_last_error(), "batch index 7") != NULL);
    OK(tdesc_descriptor_locate_many(f->d, idx, 0, 2, NULL));
}

/* Outputs that share memory with an input are refused before anything is written: results
 * written over the indices still to be read would locate garbage (a 24-byte result spans
 * three coordinates). */
static void test_output_overlapping_input(const fixture *f) {
    union {
        uint64_t idx[48 * 3];
        tdesc_compact_location locs[48];
    } u;
    for (int k = 0; k < 48; ++k) {
        u.idx[2 * k] = (uint64_t)(k % 6);
        u.idx[2 * k + 1] = (uint64_t)(k % 8);
    }
    uint64_t copy[96];
    memcpy(copy, u.idx, sizeof copy);
    EXPECT(tdesc_descriptor_locate_many(f->d, u.idx, 48, 2, u.locs), TDESC_ERR_INVALID_ARGUMENT);
    CHECK(strstr(tdesc_last_error(), "out overlaps indices") != NULL);
    CHECK(memcmp(copy, u.idx, sizeof copy) == 0);
    /* The tail of the indices overlapping the head of the results. */
    EXPECT(tdesc_descriptor_locate_many(f->d, u.idx + 2, 47, 2, u.locs),
           TDESC_ERR_INVALID_ARGUMENT);
    /* Adjacent is not overlapping. */
    tdesc_compact_location *after = (tdesc_compact_location *)(u.idx + 96);
    OK(tdesc_descriptor_locate_many(f->d, u.idx, 16, 2, after));
    float *vals = (float *)u.idx;
    EXPECT(tdesc_tensor_get_many(f->t, u.idx, 48, 2, TDESC_OUTPUT_FLOAT32, vals, 48 * sizeof(float)),
           TDESC_ERR_INVALID_ARGUMENT);
    CHECK(memcmp(copy, u.idx, sizeof copy) == 0);
    uint64_t box[4] = {0, 0, 2, 2};
    EXPECT(tdesc_tensor_read_box(f->t, box, box + 2, 2, TDESC_OUTPUT_FLOAT32, box, 16, NULL),
           TDESC_ERR_INVALID_ARGUMENT);
    CHECK(strstr(tdesc_last_error(), "out overlaps lo") != NULL);
    float out[4];
    int64_t strides[2] = {8, 4};
    EXPECT(tdesc_tensor_read_box(f->t, box, box + 2, 2, TDESC_OUTPUT_FLOAT32, strides, 16, strides),
           TDESC_ERR_INVALID_ARGUMENT);
    OK(tdesc_tensor_read_box(f->t, box, box + 2, 2, TDESC_OUTPUT_FLOAT32, out, sizeof out, strides));
}

/* Format 1.1 quantization from C: NVFP4 (E2M1 codes, E4M3 scales per 16, a multiplying
 * FLOAT32 global scale) and BLOCKWISE_2D with a dividing global scale, built with
 * tdesc_node_set_quantization_ext and read with read_box and get_f64. */
static double e2m1(unsigned c) {
    static const double m[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
    return (c & 8) ? -m[c & 7] : m[c & 7];
}

static void test_quant_1_1(void) {
    /* NVFP4: FLOAT4_E2M1FN [2, 32]. */
    tdesc_node_spec *n = NULL;
    OK(tdesc_node_new_row_major(&n));
    tdesc_quantization q;
    memset(&q, 0, sizeof q);
    q.scheme = TDESC_QUANT_BLOCKWISE;
    q.expressed_type = TDESC_ELEMENT_FLOAT32;
    q.axis = 1;
    q.block_size = 16;
    q.scale_type = TDESC_ELEMENT_FLOAT8_E4M3FN;
    tdesc_quantization_ext ext;
    memset(&ext, 0, sizeof ext);
    ext.has_global_scale = 1;
    ext.global_scale_divides = 2;
    EXPECT(tdesc_node_set_quantization_ext(n, &q, &ext), TDESC_ERR_INVALID_ARGUMENT);
    ext.global_scale_divides = 0;
    OK(tdesc_node_set_quantization_ext(n, &q, &ext));
    tdesc_builder *b = NULL;
    const uint64_t shape[2] = {2, 32};
    OK(tdesc_builder_new(TDESC_ELEMENT_FLOAT4_E2M1FN, shape, 2, n, &b));
    tdesc_descriptor *d = NULL;
    OK(tdesc_builder_build(b, &d));
    tdesc_builder_free(b);
    CHECK(tdesc_descriptor_version_minor(d) == 1);
    CHECK(tdesc_descriptor_buffer_count(d) == 3);
    tdesc_buffer info;
    OK(tdesc_descriptor_buffer(d, 2, &info));
    CHECK(info.role == TDESC_ROLE_QUANT_GLOBAL_SCALE && info.size_bytes == 4);
    tdesc_quantization_ext back;
    OK(tdesc_descriptor_quantization_ext(d, TDESC_NO_REGION, &back));
    CHECK(back.has_global_scale == 1 && back.global_scale_divides == 0);

    uint8_t *codes = alloc64(32);
    for (int k = 0; k < 32; ++k) codes[k] = (uint8_t)((k * 37 + 11) & 0xFF);
    /* E4M3: 0x38 = 1.0, 0x40 = 2.0, 0x30 = 0.5, 0x00 = +0 (an all-zero block). */
    uint8_t *scales = alloc64(4);
    const uint8_t sc[4] = {0x38, 0x40, 0x30, 0x00};
    const double sv[4] = {1.0, 2.0, 0.5, 0.0};
    memcpy(scales, sc, 4);
    float *g = alloc64(4);
    g[0] = 0.25f;
    const void *bufs[3] = {codes, scales, g};
    tdesc_tensor *t = NULL;
    OK(tdesc_tensor_bind(d, bufs, 3, &t));
    OK(tdesc_tensor_validate(t));
    float out[64];
    const uint64_t lo[2] = {0, 0};
    OK(tdesc_tensor_read_box(t, lo, shape, 2, TDESC_OUTPUT_FLOAT32, out, sizeof out, NULL));
    int bad = 0;
    for (int k = 0; k < 64; ++k) {
        unsigned c = (codes[k / 2] >> ((k % 2) * 4)) & 0xF;
        double want = e2m1(c) * sv[(k / 32) * 2 + (k % 32) / 16] * 0.25;
        if (out[k] != (float)want) ++bad;
        double v = 0;
        const uint64_t idx[2] = {(uint64_t)(k / 32), (uint64_t)(k % 32)};
        OK(tdesc_tensor_get_f64(t, idx, 2, &v));
        if (v != want) ++bad;
    }
    CHECK(bad == 0);
    tdesc_tensor_free(t);
    tdesc_descriptor_free(d);

    /* BLOCKWISE_2D: INT8 [4, 6], blocks 2 × 3 over axes 0 and 1, FLOAT32 scales, global
     * scale 2 dividing. Without the ext the scheme is refused. */
    OK(tdesc_node_new_row_major(&n));
    memset(&q, 0, sizeof q);
    q.scheme = TDESC_QUANT_BLOCKWISE_2D;
    q.expressed_type = TDESC_ELEMENT_FLOAT32;
    q.axis = 0;
    q.block_size = 2;
    q.scale_type = TDESC_ELEMENT_FLOAT32;
    EXPECT(tdesc_node_set_quantization(n, &q), TDESC_ERR_INVALID_ARGUMENT);
    memset(&ext, 0, sizeof ext);
    ext.axis_b = 1;
    ext.block_b = 3;
    ext.has_global_scale = 1;
    ext.global_scale_divides = 1;
    OK(tdesc_node_set_quantization_ext(n, &q, &ext));
    const uint64_t shape2[2] = {4, 6};
    OK(tdesc_builder_new(TDESC_ELEMENT_INT8, shape2, 2, n, &b));
    OK(tdesc_builder_build(b, &d));
    tdesc_builder_free(b);
    tdesc_quantization qb;
    OK(tdesc_descriptor_quantization(d, TDESC_NO_REGION, &qb));
    CHECK(qb.scheme == TDESC_QUANT_BLOCKWISE_2D && qb.axis == 0 && qb.block_size == 2);
    OK(tdesc_descriptor_quantization_ext(d, TDESC_NO_REGION, &back));
    CHECK(back.axis_b == 1 && back.block_b == 3 && back.global_scale_divides == 1);
    int8_t *c8 = alloc64(24);
    for (int k = 0; k < 24; ++k) c8[k] = (int8_t)(k * 5 - 60);
    float *s2 = alloc64(4 * 4);
    const float s2v[4] = {0.5f, 1.0f, 1.5f, 2.0f};
    memcpy(s2, s2v, sizeof s2v);
    float *g2 = alloc64(4);
    g2[0] = 2.0f;
    const void *bufs2[3] = {c8, s2, g2};
    OK(tdesc_tensor_bind(d, bufs2, 3, &t));
    float out2[24];
    OK(tdesc_tensor_read_box(t, lo, shape2, 2, TDESC_OUTPUT_FLOAT32, out2, sizeof out2, NULL));
    bad = 0;
    for (int k = 0; k < 24; ++k) {
        int r = k / 6, c = k % 6;
        double want = (double)c8[k] * s2v[(r / 2) * 2 + c / 3] / 2.0;
        if (out2[k] != (float)want) ++bad;
    }
    CHECK(bad == 0);
    tdesc_tensor_free(t);
    tdesc_descriptor_free(d);
    free(codes);
    free(scales);
    free(g);
    free(c8);
    free(s2);
    free(g2);
}

/* The value of IEEE binary16 bits (finite). */
static double half_value(uint16_t h) {
    int e = (h >> 10) & 0x1F;
    double m = (double)(h & 0x3FF);
    double p = 1.0; /* 2^(e - 15) */
    for (int k = e; k < 15; ++k) p /= 2.0;
    for (int k = 15; k < e; ++k) p *= 2.0;
    double v = e == 0 ? m / 16777216.0 : (1.0 + m / 1024.0) * p;
    return (h & 0x8000) ? -v : v;
}

/* GGML_BLOCKS: a FLOAT32 [3, 64] tensor of ggml Q8_0 blocks ({f16 d; int8 qs[32]}, value
 * d * q in f32), six blocks written here; every read path against d * q. */
static void test_ggml_q8_0(void) {
    uint32_t q8 = 0;
    OK(tdesc_ggml_type_by_name("q8_0", 4, &q8));
    CHECK(q8 == 8);
    EXPECT(tdesc_ggml_type_by_name("Q8_K", 4, &q8), TDESC_ERR_NOT_FOUND);
    tdesc_ggml_block_type info;
    OK(tdesc_ggml_type_info(8, &info));
    CHECK(strcmp(info.name, "Q8_0") == 0 && info.block_elems == 32 && info.block_bytes == 34);
    EXPECT(tdesc_ggml_type_info(1, &info), TDESC_ERR_NOT_FOUND);
    CHECK(strcmp(tdesc_layout_name(TDESC_LAYOUT_GGML_BLOCKS), "GGML_BLOCKS") == 0);

    tdesc_node_spec *n = NULL;
    OK(tdesc_node_new_ggml_blocks(8, &n));
    tdesc_builder *b = NULL;
    const uint64_t shape[2] = {3, 64};
    OK(tdesc_builder_new(TDESC_ELEMENT_FLOAT32, shape, 2, n, &b));
    tdesc_descriptor *d = NULL;
    OK(tdesc_builder_build(b, &d));
    tdesc_builder_free(b);
    CHECK(tdesc_descriptor_version_minor(d) == 1);
    CHECK(tdesc_descriptor_layout(d) == TDESC_LAYOUT_GGML_BLOCKS);
    uint32_t gt = 0;
    OK(tdesc_descriptor_ggml_type(d, TDESC_NO_REGION, &gt));
    CHECK(gt == 8);
    tdesc_buffer info_b;
    OK(tdesc_descriptor_buffer(d, 0, &info_b));
    CHECK(info_b.size_bytes == 6 * 34 && info_b.role == TDESC_ROLE_DATA);

    /* Scales 0.5, 0.333251953125, -2, 1/1024, 3, 65504; codes (k * 37 + b * 11) - 128. */
    const uint16_t scale[6] = {0x3800, 0x3555, 0xC000, 0x1400, 0x4200, 0x7BFF};
    uint8_t *blocks = alloc64(6 * 34);
    float want[192];
    for (int blk = 0; blk < 6; ++blk) {
        uint8_t *p = blocks + 34 * blk;
        p[0] = (uint8_t)(scale[blk] & 0xFF);
        p[1] = (uint8_t)(scale[blk] >> 8);
        for (int k = 0; k < 32; ++k) {
            int8_t q = (int8_t)(((k * 37 + blk * 11) & 0xFF) - 128);
            p[2 + k] = (uint8_t)q;
            want[blk * 32 + k] = (float)half_value(scale[blk]) * (float)q;
        }
    }
    const void *bufs[1] = {blocks};
    tdesc_tensor *t = NULL;
    OK(tdesc_tensor_bind(d, bufs, 1, &t));
    OK(tdesc_tensor_validate(t));
    int bad = 0;
    for (int k = 0; k < 192; ++k) {
        const uint64_t idx[2] = {(uint64_t)(k / 64), (uint64_t)(k % 64)};
        double v = 0;
        OK(tdesc_tensor_get_f64(t, idx, 2, &v));
        float raw = 0;
        OK(tdesc_tensor_get(t, idx, 2, &raw, sizeof raw));
        if (v != (double)want[k] || raw != want[k]) ++bad;
    }
    CHECK(bad == 0);
    /* The whole tensor, and a window starting and ending inside blocks, as FLOAT32 and
     * RAW (the values' bytes). */
    float out[192];
    const uint64_t zero[2] = {0, 0};
    OK(tdesc_tensor_read_box(t, zero, shape, 2, TDESC_OUTPUT_FLOAT32, out, sizeof out, NULL));
    CHECK(memcmp(out, want, sizeof want) == 0);
    const uint64_t lo[2] = {1, 5}, hi[2] = {3, 45};
    for (int raw = 0; raw < 2; ++raw) {
        memset(out, 0, sizeof out);
        OK(tdesc_tensor_read_box(t, lo, hi, 2, raw ? TDESC_OUTPUT_RAW : TDESC_OUTPUT_FLOAT32,
                                 out, 80 * sizeof(float), NULL));
        bad = 0;
        for (int r = 0; r < 2; ++r) {
            for (int c = 0; c < 40; ++c) {
                if (out[r * 40 + c] != want[(r + 1) * 64 + c + 5]) ++bad;
            }
        }
        CHECK(bad == 0);
    }
    double out64[80];
    OK(tdesc_tensor_read_box(t, lo, hi, 2, TDESC_OUTPUT_FLOAT64, out64, sizeof out64, NULL));
    CHECK(out64[41] == (double)want[2 * 64 + 6]);
    /* Located by lookup, never a byte address. */
    tdesc_location loc;
    const uint64_t at[2] = {2, 7};
    OK(tdesc_descriptor_locate(d, at, 2, &loc));
    CHECK(loc.tag == TDESC_LOCATION_LOOKUP && loc.LOOKUP.layout_tag == TDESC_LAYOUT_GGML_BLOCKS);
    tdesc_tensor_free(t);
    tdesc_descriptor_free(d);
    free(blocks);

    /* The rules: an unknown type, a wrong element type, a wrong size. */
    const uint64_t bad_shape[2] = {3, 48};
    OK(tdesc_node_new_ggml_blocks(8, &n));
    OK(tdesc_builder_new(TDESC_ELEMENT_FLOAT32, bad_shape, 2, n, &b));
    EXPECT(tdesc_builder_build(b, &d), TDESC_ERR_LAYOUT_CONSTRAINT);
    tdesc_builder_free(b);
    OK(tdesc_node_new_ggml_blocks(15, &n));
    OK(tdesc_builder_new(TDESC_ELEMENT_FLOAT32, shape, 2, n, &b));
    EXPECT(tdesc_builder_build(b, &d), TDESC_ERR_LAYOUT_CONSTRAINT);
    tdesc_builder_free(b);
    OK(tdesc_node_new_ggml_blocks(8, &n));
    OK(tdesc_builder_new(TDESC_ELEMENT_INT8, shape, 2, n, &b));
    EXPECT(tdesc_builder_build(b, &d), TDESC_ERR_LAYOUT_CONSTRAINT);
    tdesc_builder_free(b);
    OK(tdesc_node_new_ggml_blocks(8, &n));
    tdesc_buffer_handle h;
    memset(&h, 0, sizeof h);
    h.size_bytes = 6 * 34 + 1;
    h.device_type = TDESC_DEVICE_CPU;
    h.alignment_log2 = 6;
    OK(tdesc_node_set_buffers(n, &h, 1));
    OK(tdesc_builder_new(TDESC_ELEMENT_FLOAT16, shape, 2, n, &b));
    EXPECT(tdesc_builder_build(b, &d), TDESC_ERR_BUFFER_SIZE_MISMATCH);
    tdesc_builder_free(b);
}

/* Format 1.1 per-region element types from C: a FLOAT16 [2, 4] tensor whose right half
 * stores INT8 codes quantized with expressed FLOAT16, and a FLOAT32 region refused. */
static void test_region_types(void) {
    tdesc_node_spec *sp = NULL, *left = NULL, *right = NULL;
    OK(tdesc_node_new_subpaving(&sp));
    OK(tdesc_node_new_row_major(&left));
    OK(tdesc_node_new_row_major(&right));
    OK(tdesc_node_set_element_type(right, TDESC_ELEMENT_INT8));
    EXPECT(tdesc_node_set_element_type(right, 0x7F), TDESC_ERR_INVALID_ARGUMENT);
    tdesc_quantization q;
    memset(&q, 0, sizeof q);
    q.scheme = TDESC_QUANT_PER_TENSOR_AFFINE;
    q.expressed_type = TDESC_ELEMENT_FLOAT16;
    q.scale = 0.5;
    OK(tdesc_node_set_quantization(right, &q));
    const uint64_t o0[2] = {0, 0}, o1[2] = {0, 2}, s[2] = {2, 2};
    OK(tdesc_node_add_region(sp, o0, s, 2, left));
    OK(tdesc_node_add_region(sp, o1, s, 2, right));
    const uint64_t shape[2] = {2, 4};
    tdesc_builder *b = NULL;
    OK(tdesc_builder_new(TDESC_ELEMENT_FLOAT16, shape, 2, sp, &b));
    tdesc_descriptor *d = NULL;
    OK(tdesc_builder_build(b, &d));
    tdesc_builder_free(b);
    uint8_t st = 0, own = 9;
    OK(tdesc_descriptor_stored_type(d, 1, &st, &own));
    CHECK(st == TDESC_ELEMENT_INT8 && own == 1);
    OK(tdesc_descriptor_stored_type(d, 0, &st, &own));
    CHECK(st == TDESC_ELEMENT_FLOAT16 && own == 0);
    EXPECT(tdesc_descriptor_stored_type(d, 2, &st, NULL), TDESC_ERR_INDEX_OUT_OF_BOUNDS);
    CHECK(tdesc_descriptor_version_minor(d) == 1);
    tdesc_buffer info;
    OK(tdesc_descriptor_buffer(d, 1, &info));
    CHECK(info.size_bytes == 4); /* four INT8 codes, not four FLOAT16 elements */
    uint16_t *h = alloc64(8);
    const uint16_t hv[4] = {0x3C00, 0x4000, 0xBC00, 0x3800}; /* 1, 2, -1, 0.5 */
    memcpy(h, hv, sizeof hv);
    int8_t *c = alloc64(4);
    const int8_t cv[4] = {2, -4, 7, 0};
    memcpy(c, cv, sizeof cv);
    const void *bufs[2] = {h, c};
    tdesc_tensor *t = NULL;
    OK(tdesc_tensor_bind(d, bufs, 2, &t));
    float out[8];
    const uint64_t lo[2] = {0, 0};
    OK(tdesc_tensor_read_box(t, lo, shape, 2, TDESC_OUTPUT_FLOAT32, out, sizeof out, NULL));
    const float want[8] = {1, 2, 1, -2, -1, 0.5f, 3.5f, 0};
    int bad = 0;
    for (int k = 0; k < 8; ++k) bad += out[k] != want[k];
    CHECK(bad == 0);
    uint16_t raw[8];
    EXPECT(tdesc_tensor_read_box(t, lo, shape, 2, TDESC_OUTPUT_RAW, raw, sizeof raw, NULL),
           TDESC_ERR_INVALID_ARGUMENT);
    tdesc_tensor_free(t);
    tdesc_descriptor_free(d);
    free(h);
    free(c);

    /* FLOAT32 does not convert exactly into FLOAT16. */
    OK(tdesc_node_new_subpaving(&sp));
    OK(tdesc_node_new_row_major(&left));
    OK(tdesc_node_new_row_major(&right));
    OK(tdesc_node_set_element_type(right, TDESC_ELEMENT_FLOAT32));
    OK(tdesc_node_add_region(sp, o0, s, 2, left));
    OK(tdesc_node_add_region(sp, o1, s, 2, right));
    OK(tdesc_builder_new(TDESC_ELEMENT_FLOAT16, shape, 2, sp, &b));
    EXPECT(tdesc_builder_build(b, &d), TDESC_ERR_REGION_TYPE_MISMATCH);
    tdesc_builder_free(b);
}

/* Rank 4, cut along axes 1-3 only (axis 0 spans every region): 72 regions, each 1 x 1
 * column of a 6 x 6 grid split along axis 3 where (x, y) says, no grid. Box queries take
 * the rank-3 sweep on the cut axes (docs/data-plane.md); every hit list equals brute
 * force over the regions, in region order, with the clipped boxes. */
static void test_rank4_cut_along_three_axes(void) {
    enum { NR = 72 };
    uint64_t ro[NR][4], rs[NR][4];
    tdesc_node_spec *sp = NULL;
    OK(tdesc_node_new_subpaving(&sp));
    int n = 0;
    for (uint64_t x = 0; x < 6; ++x) {
        for (uint64_t y = 0; y < 6; ++y) {
            const uint64_t cut = 2 + (x * 5 + y * 3) % 5;
            for (int part = 0; part < 2; ++part) {
                const uint64_t z0 = part ? cut : 0, z1 = part ? 8 : cut;
                const uint64_t o[4] = {0, x, y, z0}, sh[4] = {2, 1, 1, z1 - z0};
                memcpy(ro[n], o, sizeof o);
                memcpy(rs[n], sh, sizeof sh);
                tdesc_node_spec *leaf = NULL;
                OK(tdesc_node_new_row_major(&leaf));
                OK(tdesc_node_add_region(sp, o, sh, 4, leaf));
                ++n;
            }
        }
    }
    CHECK(n == NR);
    tdesc_builder *b = NULL;
    tdesc_descriptor *d = NULL;
    const uint64_t shape[4] = {2, 6, 6, 8};
    OK(tdesc_builder_new(TDESC_ELEMENT_FLOAT32, shape, 4, sp, &b));
    OK(tdesc_builder_build(b, &d));
    tdesc_builder_free(b);
    uint32_t seed = 12345, regions[NR];
    uint64_t boxes[NR * 8];
    int agree = 1;
    for (int q = 0; q < 200 && agree; ++q) {
        uint64_t lo[4], hi[4];
        for (int a = 0; a < 4; ++a) {
            seed = seed * 1103515245u + 12345u;
            lo[a] = (seed >> 8) % shape[a];
            seed = seed * 1103515245u + 12345u;
            hi[a] = lo[a] + 1 + (seed >> 8) % (shape[a] - lo[a]);
        }
        size_t count = 0;
        OK(tdesc_descriptor_regions_in_box_array(d, lo, hi, 4, regions, boxes, NR, &count));
        size_t want = 0;
        for (int r = 0; r < NR; ++r) {
            int meets = 1;
            uint64_t cl[4], ch[4];
            for (int a = 0; a < 4; ++a) {
                cl[a] = lo[a] > ro[r][a] ? lo[a] : ro[r][a];
                ch[a] = hi[a] < ro[r][a] + rs[r][a] ? hi[a] : ro[r][a] + rs[r][a];
                meets &= cl[a] < ch[a];
            }
            if (!meets) continue;
            if (want >= count || regions[want] != (uint32_t)r) {
                agree = 0;
                break;
            }
            for (int a = 0; a < 4; ++a)
                agree &= boxes[want * 8 + a] == cl[a] && boxes[want * 8 + 4 + a] == ch[a];
            ++want;
        }
        agree &= want == count;
    }
    CHECK(agree);
    tdesc_descriptor_free(d);
}

int main(void) {
    test_quant_1_1();
    test_ggml_q8_0();
    test_region_types();
    test_rank4_cut_along_three_axes();
    fixture f = make_fixture();
    test_regions_in_box(&f);
    test_read_box(&f);
    test_batches(&f);
    test_output_overlapping_input(&f);
    free_fixture(&f);
    printf("data_plane: %d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
