/* DLPack interop from C11: export every dense region kind of a nested subpaving and check
 * every DLPack field against the descriptor (and every element against tdesc_tensor_get),
 * the dtype of every element type, the refusals; import hand-built DLPack tensors
 * (versioned and legacy; compact, transposed, negative strides, misaligned data, packed
 * 4-bit, empty, device memory) and prove that each producer deleter runs exactly once —
 * never on a failed import — and that round trips keep the producer alive as long as needed.
 *
 * The DLPack structs come from dlpack_min.h (the official layouts, written by hand), included
 * after tensordesc.h to show that its incomplete declarations agree with them.
 */
#define _POSIX_C_SOURCE 200809L /* mkstemp, close */
#include <inttypes.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensordesc.h"

#include "dlpack_min.h"

_Static_assert(TDESC_DLPACK_MAJOR_VERSION == DLPACK_MAJOR_VERSION, "DLPack major version");
_Static_assert(TDESC_DLPACK_MINOR_VERSION == 1, "DLPack 1.1");
_Static_assert(sizeof(DLTensor) == 48, "DLTensor layout (LP64)");
_Static_assert(sizeof(DLManagedTensorVersioned) == 80, "DLManagedTensorVersioned layout (LP64)");

#include "check.h"

static tdesc_descriptor *build(uint8_t et, const uint64_t *shape, size_t rank, tdesc_node_spec *n) {
    tdesc_builder *b = NULL;
    tdesc_descriptor *d = NULL;
    OK(tdesc_builder_new(et, shape, rank, n, &b));
    OK(tdesc_builder_build(b, &d));
    tdesc_builder_free(b);
    return d;
}

/* Host buffers for every effective buffer of `d`, zeroed. */
typedef struct {
    size_t count;
    void *ptr[16];
} buffers;

static void buffers_alloc(const tdesc_descriptor *d, buffers *bs) {
    bs->count = tdesc_descriptor_buffer_count(d);
    for (size_t i = 0; i < bs->count && i < 16; ++i) {
        tdesc_buffer b;
        OK(tdesc_descriptor_buffer(d, i, &b));
        bs->ptr[i] = alloc64((size_t)b.size_bytes);
    }
}

static void buffers_free(buffers *bs) {
    for (size_t i = 0; i < bs->count && i < 16; ++i) {
        free(bs->ptr[i]);
    }
}

/* Element `local` (relative to the DLPack tensor) read through DLPack's own rules:
 * data + byte_offset + (sum local[k] * strides[k]) * bytes, packed 4-bit little bit-endian. */
static void dl_read(const DLTensor *t, const uint64_t *local, uint8_t *out, size_t n) {
    int64_t e = 0;
    for (int32_t k = 0; k < t->ndim; ++k) {
        e += (int64_t)local[k] * t->strides[k];
    }
    const uint8_t *base = (const uint8_t *)t->data + t->byte_offset;
    if (t->dtype.bits == 4) {
        out[0] = (uint8_t)((base[e / 2] >> ((e % 2) * 4)) & 0xF);
    } else {
        memcpy(out, base + e * (int64_t)(t->dtype.bits / 8), n);
    }
}

/* Every element of a DLPack tensor equals tdesc_tensor_get at `origin + local`. */
static int dl_matches(const DLTensor *t, const tdesc_tensor *tt, const uint64_t *origin) {
    size_t n = 1;
    for (int32_t k = 0; k < t->ndim; ++k) {
        n *= (size_t)t->shape[k];
    }
    size_t eb = tdesc_tensor_element_bytes(tt);
    for (size_t lin = 0; lin < n; ++lin) {
        uint64_t local[8] = {0}, global[8] = {0};
        size_t rest = lin;
        for (int32_t k = t->ndim - 1; k >= 0; --k) {
            local[k] = rest % (uint64_t)t->shape[k];
            rest /= (uint64_t)t->shape[k];
            global[k] = local[k] + (origin ? origin[k] : 0);
        }
        uint8_t want[16] = {0}, got[16] = {0};
        if (tdesc_tensor_get(tt, global, (size_t)t->ndim, want, sizeof want) != TDESC_OK) {
            return 0;
        }
        dl_read(t, local, got, eb);
        if (memcmp(want, got, eb) != 0) {
            return 0;
        }
    }
    return 1;
}

/* ------------------------------------------------------------------------------------ */
/* Export                                                                                */
/* ------------------------------------------------------------------------------------ */

/* A 6 x 12 INT16 tensor:
 *   0: [0,0]  6x3 ROW_MAJOR, byte_offset 6
 *   1: [0,3]  3x5 COL_MAJOR, an explicit READ_ONLY buffer
 *   2: [3,3]  3x2 STRIDED {2, -7}, byte_offset 14
 *   3: [3,5]  3x3 DIM_ORDER {1, 0}
 *   4: [0,8]  6x2 SUBPAVING of 5: [0,0] 3x2 SPLAT and 6: [3,0] 3x2 CSR
 *   7: [0,10] 6x2 ROW_MAJOR quantized (PER_TENSOR_AFFINE) */
static tdesc_descriptor *build_mixed(void) {
    tdesc_node_spec *top = NULL, *n = NULL, *inner = NULL, *m = NULL;
    OK(tdesc_node_new_subpaving(&top));
    const uint64_t o0[2] = {0, 0}, s0[2] = {6, 3};
    OK(tdesc_node_new_row_major(&n));
    OK(tdesc_node_set_byte_offset(n, 6));
    OK(tdesc_node_add_region(top, o0, s0, 2, n));
    const uint64_t o1[2] = {0, 3}, s1[2] = {3, 5};
    OK(tdesc_node_new_col_major(&n));
    tdesc_buffer_handle ro = {30, TDESC_DEVICE_CPU, 0, TDESC_MEMORY_DEFAULT, 6,
                              TDESC_BUFFER_READ_ONLY};
    OK(tdesc_node_set_buffers(n, &ro, 1));
    OK(tdesc_node_add_region(top, o1, s1, 2, n));
    const uint64_t o2[2] = {3, 3}, s2[2] = {3, 2};
    const int64_t st[2] = {2, -7};
    OK(tdesc_node_new_strided(st, 2, &n));
    OK(tdesc_node_set_byte_offset(n, 14));
    OK(tdesc_node_add_region(top, o2, s2, 2, n));
    const uint64_t o3[2] = {3, 5}, s3[2] = {3, 3};
    const uint8_t order[2] = {1, 0};
    OK(tdesc_node_new_dim_order(order, 2, &n));
    OK(tdesc_node_add_region(top, o3, s3, 2, n));
    const uint64_t o4[2] = {0, 8}, s4[2] = {6, 2}, i0[2] = {0, 0}, i1[2] = {3, 0},
                   is[2] = {3, 2};
    OK(tdesc_node_new_subpaving(&inner));
    OK(tdesc_node_new_splat(&m));
    OK(tdesc_node_add_region(inner, i0, is, 2, m));
    OK(tdesc_node_new_csr(2, TDESC_SPARSE_SORTED | TDESC_SPARSE_UNIQUE, &m));
    OK(tdesc_node_add_region(inner, i1, is, 2, m));
    OK(tdesc_node_add_region(top, o4, s4, 2, inner));
    const uint64_t o7[2] = {0, 10}, s7[2] = {6, 2};
    tdesc_quantization q;
    memset(&q, 0, sizeof q);
    q.scheme = TDESC_QUANT_PER_TENSOR_AFFINE;
    q.expressed_type = TDESC_ELEMENT_FLOAT32;
    q.scale = 0.5;
    OK(tdesc_node_new_row_major(&n));
    OK(tdesc_node_set_quantization(n, &q));
    OK(tdesc_node_add_region(top, o7, s7, 2, n));
    const uint64_t shape[2] = {6, 12};
    return build(TDESC_ELEMENT_INT16, shape, 2, top);
}

/* Write a distinct value to every stored dense element (found with locate). */
static void fill_dense(const tdesc_descriptor *d, buffers *bs) {
    for (uint64_t i = 0; i < 6; ++i) {
        for (uint64_t j = 0; j < 12; ++j) {
            const uint64_t idx[2] = {i, j};
            tdesc_location loc;
            OK(tdesc_descriptor_locate(d, idx, 2, &loc));
            if (loc.tag == TDESC_LOCATION_DENSE) {
                int16_t v = (int16_t)(j >= 8 && j < 10 ? 777 : (int)(i * 100 + j) - 300);
                memcpy((uint8_t *)bs->ptr[loc.DENSE.buffer] + loc.DENSE.byte_offset, &v, 2);
            }
        }
    }
}

static void check_export(const tdesc_tensor *t, uint32_t region, const int64_t *want_strides,
                         uint64_t want_flags) {
    const tdesc_descriptor *d = tdesc_tensor_descriptor(t);
    tdesc_region r;
    OK(tdesc_descriptor_region(d, region, &r));
    tdesc_buffer b;
    OK(tdesc_descriptor_buffer(d, r.first_buffer, &b));
    DLManagedTensorVersioned *m = NULL;
    OK(tdesc_tensor_export_dlpack(t, region, &m));
    if (!m) {
        return;
    }
    const DLTensor *dl = &m->dl_tensor;
    CHECK(m->version.major == 1 && m->version.minor == 1);
    CHECK(m->manager_ctx != NULL && m->deleter != NULL);
    CHECK(m->flags == want_flags);
    CHECK(dl->device.device_type == (int32_t)b.device_type && dl->device.device_type == kDLCPU);
    CHECK(dl->device.device_id == (int32_t)b.device_id);
    CHECK(dl->ndim == 2);
    CHECK(dl->dtype.code == kDLInt && dl->dtype.bits == 16 && dl->dtype.lanes == 1);
    CHECK(dl->shape != NULL && dl->strides != NULL);
    CHECK(dl->shape[0] == (int64_t)r.shape[0] && dl->shape[1] == (int64_t)r.shape[1]);
    CHECK(dl->strides[0] == want_strides[0] && dl->strides[1] == want_strides[1]);
    CHECK(dl->byte_offset == r.byte_offset);
    CHECK(dl_matches(dl, t, r.global_origin));
    m->deleter(m);
}

static void test_export_regions(void) {
    tdesc_descriptor *d = build_mixed();
    CHECK(tdesc_descriptor_region_count(d) == 8);
    buffers bs;
    buffers_alloc(d, &bs);
    fill_dense(d, &bs);
    tdesc_tensor *t = NULL;
    OK(tdesc_tensor_bind(d, (const void *const *)bs.ptr, bs.count, &t));

    const int64_t row[2] = {3, 1}, col[2] = {1, 3}, strided[2] = {2, -7}, dim[2] = {1, 3},
                  splat[2] = {0, 0};
    check_export(t, 0, row, 0);
    check_export(t, 1, col, DLPACK_FLAG_BITMASK_READ_ONLY);
    check_export(t, 2, strided, 0);
    check_export(t, 3, dim, 0);
    check_export(t, 5, splat, 0);

    /* The data pointer is the bound buffer; element [0,0] of region 2 sits at byte 14. */
    DLManagedTensorVersioned *m = (DLManagedTensorVersioned *)&passed; /* overwritten */
    OK(tdesc_tensor_export_dlpack(t, 2, &m));
    tdesc_region r;
    OK(tdesc_descriptor_region(d, 2, &r));
    CHECK(m->dl_tensor.data == bs.ptr[r.first_buffer]);
    int16_t v0;
    memcpy(&v0, (uint8_t *)m->dl_tensor.data + m->dl_tensor.byte_offset, 2);
    CHECK(v0 == 3); /* global [3, 3] */

    /* Refusals: the whole subpaving, a nested subpaving, CSR, quantized, out of range. */
    DLManagedTensorVersioned *bad = m;
    EXPECT(tdesc_tensor_export_dlpack(t, TDESC_NO_REGION, &bad), TDESC_ERR_NOT_BINDABLE);
    CHECK(bad == NULL);
    CHECK(strstr(tdesc_last_error(), "SUBPAVING") != NULL);
    EXPECT(tdesc_tensor_export_dlpack(t, 4, &bad), TDESC_ERR_NOT_BINDABLE);
    CHECK(strstr(tdesc_last_error(), "region 4") != NULL);
    EXPECT(tdesc_tensor_export_dlpack(t, 6, &bad), TDESC_ERR_NOT_BINDABLE);
    CHECK(strstr(tdesc_last_error(), "sparse") != NULL);
    EXPECT(tdesc_tensor_export_dlpack(t, 7, &bad), TDESC_ERR_NOT_BINDABLE);
    CHECK(strstr(tdesc_last_error(), "quantized") != NULL);
    EXPECT(tdesc_tensor_export_dlpack(t, 8, &bad), TDESC_ERR_INDEX_OUT_OF_BOUNDS);
    EXPECT(tdesc_tensor_export_dlpack(NULL, 0, &bad), TDESC_ERR_INVALID_ARGUMENT);
    EXPECT(tdesc_tensor_export_dlpack(t, 0, NULL), TDESC_ERR_INVALID_ARGUMENT);

    /* The export outlives the tensor and the descriptor (the buffers are still ours). */
    tdesc_tensor_free(t);
    tdesc_descriptor_free(d);
    memcpy(&v0, (uint8_t *)m->dl_tensor.data + m->dl_tensor.byte_offset, 2);
    CHECK(v0 == 3 && m->dl_tensor.shape[0] == 3 && m->dl_tensor.strides[1] == -7);
    tdesc_dlpack_delete_versioned(m);
    tdesc_dlpack_delete_versioned(NULL);
    buffers_free(&bs);
}

static void test_export_dtypes(void) {
    /* code, bits per element type 1..21 (DLPack 1.1). */
    static const uint8_t want[22][2] = {
        {0, 0},
        {kDLBool, 8},   {kDLInt, 8},      {kDLUInt, 8},    {kDLInt, 16},
        {kDLUInt, 16},  {kDLInt, 32},     {kDLUInt, 32},   {kDLInt, 64},
        {kDLUInt, 64},  {kDLFloat, 16},   {kDLBfloat, 16}, {kDLFloat, 32},
        {kDLFloat, 64}, {kDLComplex, 64}, {kDLComplex, 128}, {kDLFloat8_e4m3fn, 8},
        {kDLFloat8_e5m2, 8}, {kDLFloat8_e8m0fnu, 8}, {kDLInt, 4}, {kDLUInt, 4},
        {kDLFloat4_e2m1fn, 4},
    };
    for (uint8_t et = TDESC_ELEMENT_BOOL; et <= TDESC_ELEMENT_FLOAT4_E2M1FN; ++et) {
        tdesc_node_spec *n = NULL;
        OK(tdesc_node_new_row_major(&n));
        const uint64_t shape[1] = {5};
        tdesc_descriptor *d = build(et, shape, 1, n);
        buffers bs;
        buffers_alloc(d, &bs);
        for (size_t k = 0; k < 80; ++k) {
            ((uint8_t *)bs.ptr[0])[k % 64] = (uint8_t)(k * 37 + et);
        }
        tdesc_tensor *t = NULL;
        OK(tdesc_tensor_bind(d, (const void *const *)bs.ptr, bs.count, &t));
        DLManagedTensorVersioned *m = NULL;
        OK(tdesc_tensor_export_dlpack(t, TDESC_NO_REGION, &m));
        if (m) {
            CHECK(m->dl_tensor.dtype.code == want[et][0]);
            CHECK(m->dl_tensor.dtype.bits == want[et][1] && m->dl_tensor.dtype.lanes == 1);
            CHECK(m->dl_tensor.strides[0] == 1 && m->dl_tensor.shape[0] == 5);
            CHECK(dl_matches(&m->dl_tensor, t, NULL));
            m->deleter(m);
        }
        tdesc_tensor_free(t);
        tdesc_descriptor_free(d);
        buffers_free(&bs);
    }
}

static void test_export_shapes(void) {
    /* Rank 0: shape and strides NULL. */
    tdesc_node_spec *n = NULL;
    OK(tdesc_node_new_row_major(&n));
    tdesc_descriptor *d = build(TDESC_ELEMENT_FLOAT64, NULL, 0, n);
    buffers bs;
    buffers_alloc(d, &bs);
    double pi = 3.25;
    memcpy(bs.ptr[0], &pi, 8);
    tdesc_tensor *t = NULL;
    OK(tdesc_tensor_bind(d, (const void *const *)bs.ptr, bs.count, &t));
    DLManagedTensorVersioned *m = NULL;
    OK(tdesc_tensor_export_dlpack(t, TDESC_NO_REGION, &m));
    CHECK(m && m->dl_tensor.ndim == 0 && m->dl_tensor.shape == NULL &&
          m->dl_tensor.strides == NULL && m->dl_tensor.data == bs.ptr[0]);
    tdesc_dlpack_delete_versioned(m);
    tdesc_tensor_free(t);
    tdesc_descriptor_free(d);
    buffers_free(&bs);

    /* No elements: data NULL, byte_offset 0. */
    OK(tdesc_node_new_row_major(&n));
    const uint64_t empty[2] = {0, 4};
    d = build(TDESC_ELEMENT_FLOAT32, empty, 2, n);
    const void *none[1] = {NULL};
    OK(tdesc_tensor_bind(d, none, 1, &t));
    OK(tdesc_tensor_export_dlpack(t, TDESC_NO_REGION, &m));
    CHECK(m && m->dl_tensor.data == NULL && m->dl_tensor.byte_offset == 0 &&
          m->dl_tensor.shape[0] == 0 && m->dl_tensor.shape[1] == 4 &&
          m->dl_tensor.strides[0] == 4 && m->dl_tensor.strides[1] == 1);
    tdesc_dlpack_delete_versioned(m);
    tdesc_tensor_free(t);
    tdesc_descriptor_free(d);

    /* Packed 4-bit COL_MAJOR: bits 4, Fortran strides in elements (nibbles). */
    OK(tdesc_node_new_col_major(&n));
    const uint64_t s35[2] = {3, 5};
    d = build(TDESC_ELEMENT_UINT4, s35, 2, n);
    buffers_alloc(d, &bs);
    for (size_t k = 0; k < 8; ++k) {
        ((uint8_t *)bs.ptr[0])[k] = (uint8_t)(0x10 * (k + 1) + (15 - k));
    }
    OK(tdesc_tensor_bind(d, (const void *const *)bs.ptr, bs.count, &t));
    OK(tdesc_tensor_export_dlpack(t, TDESC_NO_REGION, &m));
    CHECK(m && m->dl_tensor.dtype.code == kDLUInt && m->dl_tensor.dtype.bits == 4 &&
          m->dl_tensor.strides[0] == 1 && m->dl_tensor.strides[1] == 3 && m->flags == 0);
    CHECK(m && dl_matches(&m->dl_tensor, t, NULL));
    tdesc_dlpack_delete_versioned(m);
    tdesc_tensor_free(t);
    tdesc_descriptor_free(d);
    buffers_free(&bs);

    /* TILED: no strides express it. */
    const uint64_t tile[2] = {2, 2};
    const uint8_t torder[1] = {TDESC_TILE_ORDER_ROW_MAJOR};
    OK(tdesc_node_new_tiled(tile, torder, 1, 2, TDESC_LAYOUT_ROW_MAJOR, &n));
    const uint64_t s44[2] = {4, 4};
    d = build(TDESC_ELEMENT_INT8, s44, 2, n);
    buffers_alloc(d, &bs);
    OK(tdesc_tensor_bind(d, (const void *const *)bs.ptr, bs.count, &t));
    EXPECT(tdesc_tensor_export_dlpack(t, TDESC_NO_REGION, &m), TDESC_ERR_NOT_BINDABLE);
    CHECK(m == NULL && strstr(tdesc_last_error(), "TILED") != NULL);
    tdesc_tensor_free(t);
    tdesc_descriptor_free(d);
    buffers_free(&bs);

    /* A CUDA buffer exports with its device (never read). */
    OK(tdesc_node_new_row_major(&n));
    const uint64_t s8[1] = {8};
    tdesc_builder *b = NULL;
    OK(tdesc_builder_new(TDESC_ELEMENT_FLOAT32, s8, 1, n, &b));
    tdesc_buffer_handle cuda = {0, TDESC_DEVICE_CUDA, 3, TDESC_MEMORY_DEVICE_LOCAL, 8,
                                TDESC_BUFFER_READ_ONLY};
    OK(tdesc_builder_set_device(b, &cuda));
    OK(tdesc_builder_build(b, &d));
    tdesc_builder_free(b);
    const void *dev[1] = {(const void *)(uintptr_t)0x7f0000000100u};
    OK(tdesc_tensor_bind(d, dev, 1, &t));
    OK(tdesc_tensor_export_dlpack(t, TDESC_NO_REGION, &m));
    CHECK(m && m->dl_tensor.device.device_type == kDLCUDA && m->dl_tensor.device.device_id == 3 &&
          m->dl_tensor.data == dev[0] && m->flags == DLPACK_FLAG_BITMASK_READ_ONLY);
    tdesc_dlpack_delete_versioned(m);
    tdesc_tensor_free(t);
    tdesc_descriptor_free(d);
}

/* ------------------------------------------------------------------------------------ */
/* Import                                                                                */
/* ------------------------------------------------------------------------------------ */

static int deleted = 0; /* producer deleter calls */

/* A producer's tensor: the managed struct first, then what it owns. */
typedef struct {
    DLManagedTensorVersioned m;
    int64_t shape[TDESC_MAX_RANK];
    int64_t strides[TDESC_MAX_RANK];
    void *alloc;
} producer;

static void producer_delete(DLManagedTensorVersioned *self) {
    producer *p = (producer *)self->manager_ctx;
    ++deleted;
    free(p->alloc);
    free(p);
}

/* A producer tensor over a fresh 64-aligned allocation of `bytes`, data at `data_off`. */
static producer *make(uint8_t code, uint8_t bits, int32_t ndim, const int64_t *shape,
                      const int64_t *strides, size_t bytes, size_t data_off) {
    producer *p = calloc(1, sizeof *p);
    p->alloc = alloc64(bytes + data_off);
    p->m.version.major = DLPACK_MAJOR_VERSION;
    p->m.version.minor = DLPACK_MINOR_VERSION;
    p->m.manager_ctx = p;
    p->m.deleter = producer_delete;
    p->m.dl_tensor.data = (uint8_t *)p->alloc + data_off;
    p->m.dl_tensor.device.device_type = kDLCPU;
    p->m.dl_tensor.ndim = ndim;
    p->m.dl_tensor.dtype.code = code;
    p->m.dl_tensor.dtype.bits = bits;
    p->m.dl_tensor.dtype.lanes = 1;
    for (int32_t k = 0; k < ndim && k < TDESC_MAX_RANK; ++k) {
        p->shape[k] = shape[k];
        if (strides) {
            p->strides[k] = strides[k];
        }
    }
    p->m.dl_tensor.shape = p->shape;
    p->m.dl_tensor.strides = strides ? p->strides : NULL;
    return p;
}

static unsigned ctz_capped(uintptr_t a) {
    unsigned n = 0;
    while (n < 30 && (a & 1) == 0) {
        a >>= 1;
        ++n;
    }
    return n;
}

static void test_import_compact_misaligned(void) {
    /* FLOAT32 [3, 4], data 8 bytes past a 64-byte boundary, READ_ONLY. */
    const int64_t shape[2] = {3, 4};
    producer *p = make(kDLFloat, 32, 2, shape, NULL, 48, 8);
    p->m.flags = DLPACK_FLAG_BITMASK_READ_ONLY | DLPACK_FLAG_BITMASK_IS_COPIED;
    for (int k = 0; k < 12; ++k) {
        float v = (float)k * 1.5f - 4.0f;
        memcpy((uint8_t *)p->m.dl_tensor.data + 4 * k, &v, 4);
    }
    tdesc_tensor *t = (tdesc_tensor *)&passed; /* overwritten */
    deleted = 0;
    OK(tdesc_tensor_import_dlpack_versioned(&p->m, &t));
    const tdesc_descriptor *d = tdesc_tensor_descriptor(t);
    CHECK(tdesc_descriptor_layout(d) == TDESC_LAYOUT_ROW_MAJOR);
    CHECK(tdesc_descriptor_element_type(d) == TDESC_ELEMENT_FLOAT32);
    CHECK(tdesc_descriptor_rank(d) == 2 && tdesc_descriptor_shape(d)[0] == 3 &&
          tdesc_descriptor_shape(d)[1] == 4);
    /* The buffer starts at the first element and declares its 8-byte alignment: a
       format 1.1 descriptor (version_minor 1). */
    CHECK(tdesc_descriptor_byte_offset(d) == 0);
    tdesc_buffer b;
    OK(tdesc_descriptor_buffer(d, 0, &b));
    CHECK(b.size_bytes == 48 && b.device_type == TDESC_DEVICE_CPU && b.device_id == 0 &&
          b.memory_class == TDESC_MEMORY_DEFAULT && b.flags == TDESC_BUFFER_READ_ONLY);
    CHECK(b.alignment_log2 == ctz_capped((uintptr_t)p->m.dl_tensor.data) &&
          b.alignment_log2 == 3);
    CHECK(tdesc_descriptor_version_minor(d) == 1);
    for (uint64_t i = 0; i < 3; ++i) {
        for (uint64_t j = 0; j < 4; ++j) {
            const uint64_t idx[2] = {i, j};
            double v = 0;
            OK(tdesc_tensor_get_f64(t, idx, 2, &v));
            CHECK(v == (double)(i * 4 + j) * 1.5 - 4.0);
        }
    }
    OK(tdesc_tensor_validate(t));
    /* A re-export hands on the producer's own pointer and byte_offset. */
    DLManagedTensorVersioned *m = NULL;
    OK(tdesc_tensor_export_dlpack(t, TDESC_NO_REGION, &m));
    CHECK(m && m->dl_tensor.data == p->m.dl_tensor.data && m->dl_tensor.byte_offset == 0);
    CHECK(m && (m->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0);
    if (m) m->deleter(m);
    CHECK(deleted == 0);
    tdesc_tensor_free(t);
    CHECK(deleted == 1);

    /* Data 8 bytes past a boundary and a byte_offset of 4: the elements start 12 bytes
       in; the tensor reads them, and a re-export keeps data and byte_offset as given. */
    p = make(kDLFloat, 32, 2, shape, NULL, 52, 8);
    p->m.dl_tensor.byte_offset = 4;
    for (int k = 0; k < 12; ++k) {
        float v = (float)k - 2.5f;
        memcpy((uint8_t *)p->m.dl_tensor.data + 4 + 4 * k, &v, 4);
    }
    deleted = 0;
    OK(tdesc_tensor_import_dlpack_versioned(&p->m, &t));
    d = tdesc_tensor_descriptor(t);
    CHECK(tdesc_descriptor_byte_offset(d) == 0);
    OK(tdesc_descriptor_buffer(d, 0, &b));
    CHECK(b.size_bytes == 48 && b.alignment_log2 == 2 && tdesc_descriptor_version_minor(d) == 1);
    for (uint64_t k = 0; k < 12; ++k) {
        const uint64_t idx[2] = {k / 4, k % 4};
        double v = 0;
        OK(tdesc_tensor_get_f64(t, idx, 2, &v));
        CHECK(v == (double)k - 2.5);
    }
    m = NULL;
    OK(tdesc_tensor_export_dlpack(t, TDESC_NO_REGION, &m));
    CHECK(m && m->dl_tensor.data == p->m.dl_tensor.data && m->dl_tensor.byte_offset == 4);
    if (m) {
        float first = 0;
        memcpy(&first, (const uint8_t *)m->dl_tensor.data + m->dl_tensor.byte_offset, 4);
        CHECK(first == -2.5f);
        m->deleter(m);
    }
    tdesc_tensor_free(t);
    CHECK(deleted == 1);
}

static void test_import_strided(void) {
    /* FLOAT64 [4, 3] transposed from a 3 x 4 row-major block, byte_offset 16: the buffer
       starts at the first element, 16 bytes past the 64-byte aligned data (format 1.1). */
    const int64_t shape[2] = {4, 3}, strides[2] = {1, 4};
    producer *p = make(kDLFloat, 64, 2, shape, strides, 16 + 96, 0);
    p->m.dl_tensor.byte_offset = 16;
    for (int k = 0; k < 12; ++k) {
        double v = k + 0.25;
        memcpy((uint8_t *)p->alloc + 16 + 8 * k, &v, 8);
    }
    tdesc_tensor *t = NULL;
    deleted = 0;
    OK(tdesc_tensor_import_dlpack_versioned(&p->m, &t));
    const tdesc_descriptor *d = tdesc_tensor_descriptor(t);
    tdesc_layout_info li;
    OK(tdesc_descriptor_layout_info(d, TDESC_NO_REGION, &li));
    CHECK(li.tag == TDESC_LAYOUT_STRIDED && li.strides[0] == 1 && li.strides[1] == 4 &&
          li.byte_offset == 0);
    tdesc_buffer b;
    OK(tdesc_descriptor_buffer(d, 0, &b));
    CHECK(b.size_bytes == 96 && b.flags == 0 && b.alignment_log2 == 4);
    for (uint64_t i = 0; i < 4; ++i) {
        for (uint64_t j = 0; j < 3; ++j) {
            const uint64_t idx[2] = {i, j};
            double v = 0;
            OK(tdesc_tensor_get_f64(t, idx, 2, &v));
            CHECK(v == (double)(j * 4 + i) + 0.25);
        }
    }
    tdesc_tensor_free(t);
    CHECK(deleted == 1);

    /* INT32 [5] reversed: stride -1, data at the last element in memory (as NumPy's
     * a[::-1] exports it). The buffer starts at the lowest element. */
    const int64_t s5[1] = {5}, neg[1] = {-1};
    p = make(kDLInt, 32, 1, s5, neg, 20, 0);
    for (int32_t k = 0; k < 5; ++k) {
        int32_t v = 10 * k;
        memcpy((uint8_t *)p->alloc + 4 * k, &v, 4);
    }
    p->m.dl_tensor.data = (uint8_t *)p->alloc + 16;
    deleted = 0;
    OK(tdesc_tensor_import_dlpack_versioned(&p->m, &t));
    d = tdesc_tensor_descriptor(t);
    OK(tdesc_descriptor_layout_info(d, TDESC_NO_REGION, &li));
    CHECK(li.tag == TDESC_LAYOUT_STRIDED && li.strides[0] == -1 && li.byte_offset == 16);
    OK(tdesc_descriptor_buffer(d, 0, &b));
    CHECK(b.size_bytes == 20);
    for (uint64_t i = 0; i < 5; ++i) {
        double v = 0;
        OK(tdesc_tensor_get_f64(t, &i, 1, &v));
        CHECK(v == (double)(10 * (4 - (int)i)));
    }
    tdesc_tensor_free(t);
    CHECK(deleted == 1);
}

static int legacy_deleted = 0;
typedef struct {
    DLManagedTensor m;
    int64_t shape[3];
    uint8_t *data;
} legacy;

static void legacy_delete(DLManagedTensor *self) {
    legacy *l = (legacy *)self->manager_ctx;
    ++legacy_deleted;
    free(l->data);
    free(l);
}

static void test_import_legacy(void) {
    legacy *l = calloc(1, sizeof *l);
    l->data = alloc64(8);
    for (int k = 0; k < 8; ++k) {
        l->data[k] = (uint8_t)(200 + k);
    }
    l->shape[0] = l->shape[1] = l->shape[2] = 2;
    l->m.dl_tensor.data = l->data;
    l->m.dl_tensor.device.device_type = kDLCPU;
    l->m.dl_tensor.ndim = 3;
    l->m.dl_tensor.dtype.code = kDLUInt;
    l->m.dl_tensor.dtype.bits = 8;
    l->m.dl_tensor.dtype.lanes = 1;
    l->m.dl_tensor.shape = l->shape;
    l->m.dl_tensor.strides = NULL; /* compact row-major (before DLPack 1.2) */
    l->m.manager_ctx = l;
    l->m.deleter = legacy_delete;
    tdesc_tensor *t = NULL;
    legacy_deleted = 0;
    OK(tdesc_tensor_import_dlpack(&l->m, &t));
    const tdesc_descriptor *d = tdesc_tensor_descriptor(t);
    CHECK(tdesc_descriptor_layout(d) == TDESC_LAYOUT_ROW_MAJOR &&
          tdesc_descriptor_byte_offset(d) == 0);
    tdesc_buffer b;
    OK(tdesc_descriptor_buffer(d, 0, &b));
    CHECK(b.size_bytes == 8 && b.flags == 0);
    const uint64_t idx[3] = {1, 0, 1};
    uint8_t v = 0;
    OK(tdesc_tensor_get(t, idx, 3, &v, 1));
    CHECK(v == 205);
    CHECK(legacy_deleted == 0);
    tdesc_tensor_free(t);
    CHECK(legacy_deleted == 1);

    /* A failed legacy import leaves the tensor to the caller. */
    l = calloc(1, sizeof *l);
    l->shape[0] = -1;
    l->m.dl_tensor.ndim = 1;
    l->m.dl_tensor.shape = l->shape;
    l->m.dl_tensor.device.device_type = kDLCPU;
    l->m.dl_tensor.dtype.code = kDLFloat;
    l->m.dl_tensor.dtype.bits = 32;
    l->m.dl_tensor.dtype.lanes = 1;
    l->m.manager_ctx = l;
    l->m.deleter = legacy_delete;
    legacy_deleted = 0;
    EXPECT(tdesc_tensor_import_dlpack(&l->m, &t), TDESC_ERR_INVALID_ARGUMENT);
    CHECK(t == NULL && legacy_deleted == 0 && strstr(tdesc_last_error(), "shape[0]") != NULL);
    tdesc_dlpack_delete(&l->m);
    CHECK(legacy_deleted == 1);
    tdesc_dlpack_delete(NULL);
}

static void test_import_packed_empty_device(void) {
    /* UINT4 [2, 3] in column-major order: strides {1, 2} nibbles -> DIM_ORDER {1, 0}. */
    const int64_t s23[2] = {2, 3}, cm[2] = {1, 2};
    producer *p = make(kDLUInt, 4, 2, s23, cm, 3, 0);
    ((uint8_t *)p->alloc)[0] = 0x21; /* element (0,0) = 1, (1,0) = 2 */
    ((uint8_t *)p->alloc)[1] = 0x43;
    ((uint8_t *)p->alloc)[2] = 0x65;
    tdesc_tensor *t = NULL;
    deleted = 0;
    OK(tdesc_tensor_import_dlpack_versioned(&p->m, &t));
    const tdesc_descriptor *d = tdesc_tensor_descriptor(t);
    tdesc_layout_info li;
    OK(tdesc_descriptor_layout_info(d, TDESC_NO_REGION, &li));
    CHECK(li.tag == TDESC_LAYOUT_DIM_ORDER && li.axis_order[0] == 1 && li.axis_order[1] == 0);
    for (uint64_t i = 0; i < 2; ++i) {
        for (uint64_t j = 0; j < 3; ++j) {
            const uint64_t idx[2] = {i, j};
            uint8_t v = 0xFF;
            OK(tdesc_tensor_get(t, idx, 2, &v, 1));
            CHECK(v == 1 + i + 2 * j);
        }
    }
    /* ... and exports back with the same strides. */
    DLManagedTensorVersioned *m = NULL;
    OK(tdesc_tensor_export_dlpack(t, TDESC_NO_REGION, &m));
    CHECK(m && m->dl_tensor.strides[0] == 1 && m->dl_tensor.strides[1] == 2 &&
          m->dl_tensor.dtype.bits == 4 && m->dl_tensor.data == p->alloc);
    CHECK(m && dl_matches(&m->dl_tensor, t, NULL));
    tdesc_tensor_free(t);
    CHECK(deleted == 0); /* the export still holds the producer's memory */
    CHECK(m && ((const uint8_t *)m->dl_tensor.data)[2] == 0x65);
    tdesc_dlpack_delete_versioned(m);
    CHECK(deleted == 1);

    /* No elements: data may be NULL; the buffer is empty. */
    const int64_t s0[2] = {4, 0};
    p = make(kDLFloat, 16, 2, s0, NULL, 0, 0);
    p->m.dl_tensor.data = NULL;
    deleted = 0;
    OK(tdesc_tensor_import_dlpack_versioned(&p->m, &t));
    tdesc_buffer b;
    OK(tdesc_descriptor_buffer(tdesc_tensor_descriptor(t), 0, &b));
    CHECK(b.size_bytes == 0);
    tdesc_tensor_free(t);
    CHECK(deleted == 1);

    /* CUDA memory: imported with its device, never read by the host. */
    const int64_t s4[1] = {4};
    p = make(kDLFloat, 32, 1, s4, NULL, 0, 0);
    p->m.dl_tensor.device.device_type = kDLCUDA;
    p->m.dl_tensor.device.device_id = 1;
    p->m.dl_tensor.data = (void *)(uintptr_t)0x7f0000001010u; /* 16 past a 4 KiB boundary */
    deleted = 0;
    OK(tdesc_tensor_import_dlpack_versioned(&p->m, &t));
    d = tdesc_tensor_descriptor(t);
    OK(tdesc_descriptor_buffer(d, 0, &b));
    CHECK(b.device_type == TDESC_DEVICE_CUDA && b.device_id == 1 && b.size_bytes == 16 &&
          b.alignment_log2 == 4 && tdesc_descriptor_byte_offset(d) == 0);
    CHECK(!tdesc_tensor_is_host_readable(t));
    double v = 0;
    const uint64_t i0 = 0;
    EXPECT(tdesc_tensor_get_f64(t, &i0, 1, &v), TDESC_ERR_NOT_BINDABLE);
    tdesc_tensor_free(t);
    CHECK(deleted == 1);
}

/* Each malformed tensor is refused with `want`, the deleter is not called, and the caller
 * releases it afterwards (exactly one call). */
static void expect_refused(producer *p, tdesc_status want, const char *detail) {
    tdesc_tensor *t = (tdesc_tensor *)&passed;
    deleted = 0;
    EXPECT(tdesc_tensor_import_dlpack_versioned(&p->m, &t), want);
    CHECK(t == NULL && deleted == 0);
    if (detail && !strstr(tdesc_last_error(), detail)) {
        ++failed;
        fprintf(stderr, "FAIL: detail %s lacks %s\n", tdesc_last_error(), detail);
    }
    tdesc_dlpack_delete_versioned(&p->m);
    CHECK(deleted == 1);
}

static void test_import_refusals(void) {
    const int64_t s4[1] = {4}, s23[2] = {2, 3};
    producer *p = make(kDLFloat, 32, 1, s4, NULL, 16, 0);
    p->m.version.major = 2;
    expect_refused(p, TDESC_ERR_UNSUPPORTED_VERSION, "2.");
    p = make(kDLFloat, 32, 1, s4, NULL, 64, 0);
    p->m.dl_tensor.dtype.lanes = 4;
    expect_refused(p, TDESC_ERR_NOT_BINDABLE, "lanes");
    p = make(kDLFloat8_e4m3fnuz, 8, 1, s4, NULL, 4, 0);
    expect_refused(p, TDESC_ERR_NOT_BINDABLE, "code 11");
    p = make(kDLFloat, 32, 1, s4, NULL, 16, 0);
    p->m.flags = 1u << 7;
    expect_refused(p, TDESC_ERR_NOT_BINDABLE, "flags");
    p = make(kDLFloat4_e2m1fn, 4, 1, s4, NULL, 4, 0);
    p->m.flags = DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED;
    expect_refused(p, TDESC_ERR_NOT_BINDABLE, "padded");
    const int64_t wide[2] = {6, 1};
    p = make(kDLInt, 4, 2, s23, wide, 8, 0);
    expect_refused(p, TDESC_ERR_NOT_BINDABLE, "4-bit");
    p = make(kDLFloat, 32, 1, s4, NULL, 16, 0);
    p->m.dl_tensor.device.device_type = 5;
    expect_refused(p, TDESC_ERR_DEVICE_INVALID, "device_type 5");
    p = make(kDLFloat, 32, 1, s4, NULL, 16, 0);
    p->m.dl_tensor.device.device_id = -1;
    expect_refused(p, TDESC_ERR_DEVICE_INVALID, "device_id");
    p = make(kDLFloat, 32, 1, s4, NULL, 16, 0);
    p->m.dl_tensor.ndim = 65;
    expect_refused(p, TDESC_ERR_RANK_TOO_LARGE, "65");
    p = make(kDLFloat, 32, 1, s4, NULL, 16, 0);
    p->m.dl_tensor.ndim = -1;
    expect_refused(p, TDESC_ERR_INVALID_ARGUMENT, "ndim");
    p = make(kDLFloat, 32, 1, s4, NULL, 16, 0);
    p->m.dl_tensor.data = NULL;
    expect_refused(p, TDESC_ERR_INVALID_ARGUMENT, "NULL");
    p = make(kDLFloat, 32, 1, s4, NULL, 16, 0);
    p->m.dl_tensor.shape = NULL;
    expect_refused(p, TDESC_ERR_INVALID_ARGUMENT, "shape");
    const int64_t huge[2] = {INT64_C(1) << 40, INT64_C(1) << 40};
    p = make(kDLFloat, 32, 2, huge, NULL, 16, 0);
    expect_refused(p, TDESC_ERR_OVERFLOW, NULL);
    const int64_t far[1] = {INT64_MAX / 4};
    p = make(kDLFloat, 32, 1, s4, far, 16, 0);
    expect_refused(p, TDESC_ERR_INVALID_ARGUMENT, "address space");
    const int64_t back[1] = {-1};
    p = make(kDLFloat, 32, 1, s4, back, 16, 12);
    p->m.dl_tensor.device.device_type = kDLOpenCL; /* data may be a handle: never offset */
    expect_refused(p, TDESC_ERR_NOT_BINDABLE, "OPENCL");

    tdesc_tensor *t = (tdesc_tensor *)&passed;
    EXPECT(tdesc_tensor_import_dlpack_versioned(NULL, &t), TDESC_ERR_INVALID_ARGUMENT);
    CHECK(t == NULL);
    p = make(kDLFloat, 32, 1, s4, NULL, 16, 0);
    deleted = 0;
    EXPECT(tdesc_tensor_import_dlpack_versioned(&p->m, NULL), TDESC_ERR_INVALID_ARGUMENT);
    CHECK(deleted == 0);
    tdesc_dlpack_delete_versioned(&p->m);
    CHECK(deleted == 1);
}

static void test_round_trips(void) {
    /* Export a region, import the export: same elements; freeing the import runs the
     * export's deleter. */
    tdesc_descriptor *d = build_mixed();
    buffers bs;
    buffers_alloc(d, &bs);
    fill_dense(d, &bs);
    tdesc_tensor *t = NULL;
    OK(tdesc_tensor_bind(d, (const void *const *)bs.ptr, bs.count, &t));
    for (uint32_t region = 0; region < 6; ++region) {
        if (region == 4) {
            continue;
        }
        DLManagedTensorVersioned *m = NULL;
        OK(tdesc_tensor_export_dlpack(t, region, &m));
        tdesc_tensor *back = NULL;
        OK(tdesc_tensor_import_dlpack_versioned(m, &back));
        tdesc_region r;
        OK(tdesc_descriptor_region(d, region, &r));
        int same = back != NULL;
        for (uint64_t i = 0; same && i < r.shape[0]; ++i) {
            for (uint64_t j = 0; same && j < r.shape[1]; ++j) {
                const uint64_t local[2] = {i, j};
                const uint64_t global[2] = {r.global_origin[0] + i, r.global_origin[1] + j};
                int16_t a = 0, b = 1;
                same = tdesc_tensor_get(t, global, 2, &a, 2) == TDESC_OK &&
                       tdesc_tensor_get(back, local, 2, &b, 2) == TDESC_OK && a == b;
            }
        }
        CHECK(same);
        tdesc_buffer hb;
        OK(tdesc_descriptor_buffer(tdesc_tensor_descriptor(back), 0, &hb));
        CHECK(hb.flags == (region == 1 ? TDESC_BUFFER_READ_ONLY : 0));
        tdesc_tensor_free(back); /* runs the export's deleter */
    }
    tdesc_tensor_free(t);
    tdesc_descriptor_free(d);
    buffers_free(&bs);

    /* Import, export twice, free in every order: the producer's deleter runs once, after
     * the last holder. */
    const int64_t s6[1] = {6};
    producer *p = make(kDLInt, 64, 1, s6, NULL, 48, 0);
    deleted = 0;
    OK(tdesc_tensor_import_dlpack_versioned(&p->m, &t));
    DLManagedTensorVersioned *e1 = NULL, *e2 = NULL;
    OK(tdesc_tensor_export_dlpack(t, TDESC_NO_REGION, &e1));
    OK(tdesc_tensor_export_dlpack(t, TDESC_NO_REGION, &e2));
    tdesc_tensor_free(t);
    CHECK(deleted == 0);
    e1->deleter(e1);
    CHECK(deleted == 0);
    e2->deleter(e2);
    CHECK(deleted == 1);
}

/* A tensor bound from a .tdf file points into a read-only mapping: the tensor says so and
   its export carries DLPACK_FLAG_BITMASK_READ_ONLY (a consumer writing through it would
   fault). The same tensor bound to caller memory stays writable. */
static void test_export_from_a_file_is_read_only(void) {
    tdesc_node_spec *n = NULL;
    OK(tdesc_node_new_row_major(&n));
    const uint64_t shape[2] = {4, 8};
    tdesc_descriptor *d = build(TDESC_ELEMENT_FLOAT32, shape, 2, n);
    buffers bs;
    buffers_alloc(d, &bs);
    for (size_t k = 0; k < 4 * 8 * 4; ++k) ((uint8_t *)bs.ptr[0])[k] = (uint8_t)(k * 7 + 1);

    tdesc_tensor *mine = NULL;
    OK(tdesc_tensor_bind(d, (const void *const *)bs.ptr, bs.count, &mine));
    CHECK(!tdesc_tensor_is_read_only(mine));
    DLManagedTensorVersioned *m = NULL;
    OK(tdesc_tensor_export_dlpack(mine, TDESC_NO_REGION, &m));
    CHECK(m && (m->flags & DLPACK_FLAG_BITMASK_READ_ONLY) == 0);
    if (m) m->deleter(m);
    tdesc_tensor_free(mine);

    char path[] = "/tmp/tdesc_dlpack_ro_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    tdesc_file_writer *w = NULL;
    OK(tdesc_file_writer_open(path, 64, &w));
    OK(tdesc_file_writer_add(w, "weights", 7, d, (const void *const *)bs.ptr, bs.count));
    OK(tdesc_file_writer_finish(w));
    tdesc_file_writer_free(w);

    tdesc_file *f = NULL;
    OK(tdesc_file_open(path, TDESC_MODE_STRICT, &f));
    tdesc_tensor *t = NULL;
    OK(tdesc_file_tensor_bind(f, 0, &t));
    CHECK(tdesc_tensor_is_read_only(t));
    m = NULL;
    OK(tdesc_tensor_export_dlpack(t, TDESC_NO_REGION, &m));
    CHECK(m && (m->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0);
    CHECK(m && memcmp(m->dl_tensor.data, bs.ptr[0], 4 * 8 * 4) == 0);
    if (m) m->deleter(m);
    CHECK(!tdesc_tensor_is_read_only(NULL));
    tdesc_tensor_free(t);
    tdesc_file_free(f);
    remove(path);
    tdesc_descriptor_free(d);
    buffers_free(&bs);
}

int main(void) {
    test_export_from_a_file_is_read_only();
    test_export_regions();
    test_export_dtypes();
    test_export_shapes();
    test_import_compact_misaligned();
    test_import_strided();
    test_import_legacy();
    test_import_packed_empty_device();
    test_import_refusals();
    test_round_trips();
    printf("dlpack: %d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
