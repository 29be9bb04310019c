/* Buffers aligned below 64 bytes (format 1.1) from C: a tensor built with
 * tdesc_builder_set_alignment over malloc memory (declared 16 bytes) binds and reads; the
 * same memory under a 64-byte descriptor is refused with an error that says what to do;
 * 1-byte alignment at odd addresses reads every element as at 64-byte aligned memory;
 * DLPack export needs element alignment; a file written from such a tensor stores a 1.0
 * descriptor. */
#include <stdint.h>

#include "tensordesc.h"

#include "dlpack_min.h"

#include "check.h"

/* FLOAT32 [rows, cols] ROW_MAJOR with automatic buffers aligned to 2^log2 (negative: the
 * builder's default). */
static tdesc_descriptor *dense_f32(uint64_t rows, uint64_t cols, int log2) {
    tdesc_node_spec *n = NULL;
    OK(tdesc_node_new_row_major(&n));
    tdesc_builder *b = NULL;
    const uint64_t shape[2] = {rows, cols};
    OK(tdesc_builder_new(TDESC_ELEMENT_FLOAT32, shape, 2, n, &b));
    if (log2 >= 0) {
        OK(tdesc_builder_set_alignment(b, (uint8_t)log2));
    }
    tdesc_descriptor *d = NULL;
    OK(tdesc_builder_build(b, &d));
    tdesc_builder_free(b);
    return d;
}

static float value_at(uint64_t i, uint64_t j) { return (float)(i * 10 + j) * 0.5f - 3.0f; }

static void fill(uint8_t *p, uint64_t rows, uint64_t cols) {
    for (uint64_t i = 0; i < rows; ++i) {
        for (uint64_t j = 0; j < cols; ++j) {
            float v = value_at(i, j);
            memcpy(p + 4 * (i * cols + j), &v, 4);
        }
    }
}

/* Every element through get_f64, get_many and read_box, and content validation. */
static void read_all(const tdesc_tensor *t, uint64_t rows, uint64_t cols) {
    OK(tdesc_tensor_validate(t));
    uint64_t idx[2 * 64];
    size_t n = 0;
    for (uint64_t i = 0; i < rows; ++i) {
        for (uint64_t j = 0; j < cols; ++j) {
            const uint64_t index[2] = {i, j};
            double v = 0;
            OK(tdesc_tensor_get_f64(t, index, 2, &v));
            CHECK(v == (double)value_at(i, j));
            if (n < 64) {
                idx[2 * n] = i;
                idx[2 * n + 1] = j;
                ++n;
            }
        }
    }
    double many[64];
    OK(tdesc_tensor_get_many(t, idx, n, 2, TDESC_OUTPUT_FLOAT64, many, sizeof many));
    for (size_t k = 0; k < n; ++k) {
        CHECK(many[k] == (double)value_at(idx[2 * k], idx[2 * k + 1]));
    }
    float box[64];
    const uint64_t lo[2] = {0, 0}, hi[2] = {rows, cols};
    OK(tdesc_tensor_read_box(t, lo, hi, 2, TDESC_OUTPUT_FLOAT32, box, sizeof box, NULL));
    for (uint64_t k = 0; k < rows * cols && k < 64; ++k) {
        CHECK(box[k] == value_at(k / cols, k % cols));
    }
}

static void test_malloc_memory_declared_16(void) {
    /* malloc memory is aligned to 16 bytes (max_align_t on this platform), not 64. */
    tdesc_descriptor *d = dense_f32(3, 5, 4);
    CHECK(tdesc_descriptor_version_minor(d) == 1);
    tdesc_buffer b;
    OK(tdesc_descriptor_buffer(d, 0, &b));
    CHECK(b.alignment_log2 == 4 && b.size_bytes == 60);
    uint8_t *m = malloc(60);
    CHECK(m != NULL && (uintptr_t)m % 16 == 0);
    fill(m, 3, 5);
    const void *bufs[1] = {m};
    tdesc_tensor *t = NULL;
    OK(tdesc_tensor_bind(d, bufs, 1, &t));
    read_all(t, 3, 5);
    tdesc_tensor_free(t);

    /* 16 but not 64 bytes aligned: the 16-byte descriptor binds it, the default one does
       not, and says what to declare instead. */
    uint8_t *base = alloc64(128);
    uint8_t *p = base + 16;
    fill(p, 3, 5);
    bufs[0] = p;
    OK(tdesc_tensor_bind(d, bufs, 1, &t));
    read_all(t, 3, 5);
    tdesc_tensor_free(t);
    tdesc_descriptor *d64 = dense_f32(3, 5, -1);
    CHECK(tdesc_descriptor_version_minor(d64) == 0);
    t = (tdesc_tensor *)base; /* overwritten */
    EXPECT(tdesc_tensor_bind(d64, bufs, 1, &t), TDESC_ERR_BINDING_MISMATCH);
    CHECK(t == NULL);
    CHECK(strstr(tdesc_last_error(), "alignment_log2 <= 4") != NULL);
    CHECK(strstr(tdesc_last_error(), "aligned_alloc") != NULL);
    /* Declared 16 but only 8-byte aligned memory: refused too. */
    bufs[0] = base + 8;
    EXPECT(tdesc_tensor_bind(d, bufs, 1, &t), TDESC_ERR_BINDING_MISMATCH);
    CHECK(strstr(tdesc_last_error(), "alignment_log2 <= 3") != NULL);
    tdesc_descriptor_free(d64);
    tdesc_descriptor_free(d);
    free(base);
    free(m);
}

static void test_odd_addresses_read_as_aligned(void) {
    /* Declared 1, 2 and 4 bytes, bound at addresses with exactly that alignment; every
       read agrees with the same tensor at 64-byte aligned memory. */
    uint8_t *base = alloc64(256);
    uint8_t *ref = alloc64(64);
    fill(ref, 4, 3);
    tdesc_descriptor *d64 = dense_f32(4, 3, -1);
    const void *rb[1] = {ref};
    tdesc_tensor *t64 = NULL;
    OK(tdesc_tensor_bind(d64, rb, 1, &t64));
    read_all(t64, 4, 3);
    for (int log2 = 0; log2 <= 2; ++log2) {
        tdesc_descriptor *d = dense_f32(4, 3, log2);
        CHECK(tdesc_descriptor_version_minor(d) == 1);
        uint8_t *p = base + 64 + (1u << log2); /* aligned to exactly 2^log2 */
        fill(p, 4, 3);
        const void *bufs[1] = {p};
        tdesc_tensor *t = NULL;
        OK(tdesc_tensor_bind(d, bufs, 1, &t));
        read_all(t, 4, 3);
        for (uint64_t i = 0; i < 4; ++i) {
            for (uint64_t j = 0; j < 3; ++j) {
                const uint64_t index[2] = {i, j};
                double a = 0, r = 0;
                OK(tdesc_tensor_get_f64(t, index, 2, &a));
                OK(tdesc_tensor_get_f64(t64, index, 2, &r));
                CHECK(a == r);
            }
        }
        /* DLPack consumers load float32 with 4-byte aligned loads: an export works only
           where element [0, 0] is 4-byte aligned. */
        DLManagedTensorVersioned *m = NULL;
        if (log2 < 2) {
            EXPECT(tdesc_tensor_export_dlpack(t, TDESC_NO_REGION, &m), TDESC_ERR_NOT_BINDABLE);
            CHECK(m == NULL && strstr(tdesc_last_error(), "not aligned to the 4 bytes") != NULL);
        } else {
            OK(tdesc_tensor_export_dlpack(t, TDESC_NO_REGION, &m));
            CHECK(m != NULL && m->dl_tensor.data == (void *)p && m->dl_tensor.byte_offset == 0);
            tdesc_dlpack_delete_versioned(m);
        }

        /* A file written from the in-place view stores a 1.0 descriptor: the file places
           the buffer at its own alignment and says 64 bytes. */
        tdesc_file_writer *w = NULL;
        OK(tdesc_file_writer_new_memory(0, &w));
        OK(tdesc_file_writer_add(w, "x", 1, d, bufs, 1));
        OK(tdesc_file_writer_finish(w));
        const uint8_t *bytes = NULL;
        size_t len = 0;
        OK(tdesc_file_writer_bytes(w, &bytes, &len));
        tdesc_file *f = NULL;
        OK(tdesc_file_open_bytes(bytes, len, TDESC_MODE_STRICT, &f));
        tdesc_descriptor *fd = NULL;
        OK(tdesc_file_tensor_descriptor(f, 0, &fd));
        CHECK(tdesc_descriptor_version_minor(fd) == 0);
        tdesc_buffer fb;
        OK(tdesc_descriptor_buffer(fd, 0, &fb));
        CHECK(fb.alignment_log2 == 6);
        tdesc_tensor *ft = NULL;
        OK(tdesc_file_tensor_bind(f, 0, &ft));
        read_all(ft, 4, 3);
        tdesc_tensor_free(ft);
        tdesc_descriptor_free(fd);
        tdesc_file_free(f);
        tdesc_file_writer_free(w);
        tdesc_tensor_free(t);
        tdesc_descriptor_free(d);
    }
    tdesc_tensor_free(t64);
    tdesc_descriptor_free(d64);
    free(ref);
    free(base);
}

static void test_arguments(void) {
    tdesc_node_spec *n = NULL;
    OK(tdesc_node_new_row_major(&n));
    tdesc_builder *b = NULL;
    const uint64_t shape[1] = {4};
    OK(tdesc_builder_new(TDESC_ELEMENT_UINT8, shape, 1, n, &b));
    EXPECT(tdesc_builder_set_alignment(b, 31), TDESC_ERR_INVALID_ARGUMENT);
    CHECK(strstr(tdesc_last_error(), "0..=30") != NULL);
    EXPECT(tdesc_builder_set_alignment(NULL, 4), TDESC_ERR_INVALID_ARGUMENT);
    OK(tdesc_builder_set_alignment(b, 30));
    uint8_t out[128];
    size_t written = 0;
    OK(tdesc_builder_encode(b, out, sizeof out, &written));
    CHECK(written > 5 && out[5] == 0);
    OK(tdesc_builder_set_alignment(b, 0));
    OK(tdesc_builder_encode(b, out, sizeof out, &written));
    CHECK(written > 5 && out[5] == 1);
    tdesc_builder_free(b);

    /* Explicit handles may declare 0 ..= 30. */
    tdesc_buffer_handle h;
    memset(&h, 0, sizeof h);
    h.size_bytes = 4;
    h.device_type = TDESC_DEVICE_CPU;
    h.alignment_log2 = 0;
    OK(tdesc_node_new_row_major(&n));
    OK(tdesc_node_set_buffers(n, &h, 1));
    h.alignment_log2 = 31;
    EXPECT(tdesc_node_set_buffers(n, &h, 1), TDESC_ERR_INVALID_ARGUMENT);
    OK(tdesc_builder_new(TDESC_ELEMENT_UINT8, shape, 1, n, &b));
    tdesc_descriptor *d = NULL;
    OK(tdesc_builder_build(b, &d));
    CHECK(tdesc_descriptor_version_minor(d) == 1);
    tdesc_buffer got;
    OK(tdesc_descriptor_buffer(d, 0, &got));
    CHECK(got.alignment_log2 == 0);
    tdesc_descriptor_free(d);
    tdesc_builder_free(b);
}

int main(void) {
    test_malloc_memory_declared_16();
    test_odd_addresses_read_as_aligned();
    test_arguments();
    printf("test_alignment: %d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
