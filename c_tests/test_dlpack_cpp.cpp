// DLPack interop from C++17: the "Use with DLPack" example of docs/dlpack.md, compiled and
// checked. dlpack_min.h (the official DLPack 1.1 layouts, written by hand) stands in for
// <dlpack/dlpack.h> and is included *before* tensordesc.hpp: the header's incomplete
// declarations must agree with the full definitions in either order.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "dlpack_min.h"

#include "check.hpp"

// ---- the documented example -------------------------------------------------------------

/// A DLPack tensor released by its deleter: the consumer's side of the protocol.
struct dlpack_deleter {
    void operator()(DLManagedTensorVersioned *m) const noexcept {
        if (m && m->deleter) {
            m->deleter(m);
        }
    }
};
using dlpack_ptr = std::unique_ptr<DLManagedTensorVersioned, dlpack_deleter>;

/// Export the whole tensor (TDESC_NO_REGION) or one dense leaf region as DLPack.
dlpack_ptr to_dlpack(const tdesc::tensor &t, uint32_t region = TDESC_NO_REGION) {
    DLManagedTensorVersioned *m = nullptr;
    tdesc::check(tdesc_tensor_export_dlpack(t.get(), region, &m));
    return dlpack_ptr(m);
}

/// Import a DLPack tensor. The tensor takes ownership only on success; when the import
/// throws, `m` still owns the producer's tensor and releases it.
tdesc::tensor_ptr from_dlpack(dlpack_ptr m) {
    tdesc_tensor *t = nullptr;
    tdesc::check(tdesc_tensor_import_dlpack_versioned(m.get(), &t));
    m.release(); // the imported tensor calls the deleter when freed
    return tdesc::tensor_ptr(t);
}

/// Read element `idx` of a host DLPack tensor of T by DLPack's own addressing rule.
template <class T> T dl_at(const DLTensor &dl, std::initializer_list<int64_t> idx) {
    int64_t e = 0, k = 0;
    for (int64_t i : idx) {
        e += i * dl.strides[k++];
    }
    T v;
    std::memcpy(&v, static_cast<const uint8_t *>(dl.data) + dl.byte_offset + e * sizeof(T),
                sizeof v);
    return v;
}

// ---- checks -----------------------------------------------------------------------------

static int producer_deletes = 0;

/// A C++ producer: the DLPack tensor owns a std::vector.
struct vector_tensor {
    DLManagedTensorVersioned managed{};
    std::vector<int64_t> shape, strides;
    std::vector<double> values;

    static DLManagedTensorVersioned *make(std::vector<int64_t> shape,
                                          std::vector<int64_t> strides,
                                          std::vector<double> values) {
        auto *p = new vector_tensor;
        p->shape = std::move(shape);
        p->strides = std::move(strides);
        p->values = std::move(values);
        DLManagedTensorVersioned &m = p->managed;
        m.version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
        m.manager_ctx = p;
        m.deleter = [](DLManagedTensorVersioned *self) {
            ++producer_deletes;
            delete static_cast<vector_tensor *>(self->manager_ctx);
        };
        m.dl_tensor.data = p->values.data();
        m.dl_tensor.device = {kDLCPU, 0};
        m.dl_tensor.ndim = static_cast<int32_t>(p->shape.size());
        m.dl_tensor.dtype = {kDLFloat, 64, 1};
        m.dl_tensor.shape = p->shape.data();
        m.dl_tensor.strides = p->strides.empty() ? nullptr : p->strides.data();
        return &m;
    }
};

int main() {
    // A 4 x 6 FLOAT32 tensor: a row-major left half, a column-major right half.
    tdesc::node top = tdesc::node::subpaving();
    top.add_region({0, 0}, {4, 3}, tdesc::node::row_major())
        .add_region({0, 3}, {4, 3}, tdesc::node::col_major());
    tdesc::descriptor d = tdesc::builder(TDESC_ELEMENT_FLOAT32, {4, 6}, std::move(top)).build();
    std::vector<float> left(12), right(12);
    for (int k = 0; k < 12; ++k) {
        left[k] = static_cast<float>(k);
        right[k] = static_cast<float>(100 + k);
    }
    // std::vector<float> storage is not 64-byte aligned: copy into aligned buffers.
    void *lb = std::aligned_alloc(64, 64), *rb = std::aligned_alloc(64, 64);
    std::memcpy(lb, left.data(), 48);
    std::memcpy(rb, right.data(), 48);
    {
        tdesc::tensor t(d, {lb, rb});
        dlpack_ptr l = to_dlpack(t, 0), r = to_dlpack(t, 1);
        CHECK(l->dl_tensor.strides[0] == 3 && l->dl_tensor.strides[1] == 1);
        CHECK(r->dl_tensor.strides[0] == 1 && r->dl_tensor.strides[1] == 4);
        CHECK(l->dl_tensor.dtype.code == kDLFloat && l->dl_tensor.dtype.bits == 32);
        bool same = true;
        for (int64_t i = 0; i < 4; ++i) {
            for (int64_t j = 0; j < 3; ++j) {
                uint64_t gl[2] = {uint64_t(i), uint64_t(j)}, gr[2] = {uint64_t(i), uint64_t(j + 3)};
                same = same && dl_at<float>(l->dl_tensor, {i, j}) == t.get_f64(gl, 2) &&
                       dl_at<float>(r->dl_tensor, {i, j}) == t.get_f64(gr, 2);
            }
        }
        CHECK(same);
        try {
            to_dlpack(t); // a subpaving is not one strided array
            CHECK(false);
        } catch (const tdesc::error &e) {
            CHECK(e.status() == TDESC_ERR_NOT_BINDABLE);
        }
        // Round trip: the imported region reads the same; freeing it runs the export's deleter.
        tdesc::tensor_ptr back = from_dlpack(std::move(r));
        CHECK(r == nullptr);
        uint64_t idx[2] = {3, 2};
        double v = 0;
        tdesc::check(tdesc_tensor_get_f64(back.get(), idx, 2, &v));
        CHECK(v == 100 + 3 + 2 * 4);
    }
    std::free(lb);
    std::free(rb);

    // Import a C++ producer's tensor (transposed: STRIDED); its deleter runs once.
    producer_deletes = 0;
    {
        tdesc::tensor_ptr t =
            from_dlpack(dlpack_ptr(vector_tensor::make({3, 2}, {1, 3}, {1, 2, 3, 4, 5, 6})));
        tdesc_layout_info li;
        tdesc::check(tdesc_descriptor_layout_info(tdesc_tensor_descriptor(t.get()),
                                                  TDESC_NO_REGION, &li));
        CHECK(li.tag == TDESC_LAYOUT_STRIDED);
        uint64_t idx[2] = {2, 1};
        double v = 0;
        tdesc::check(tdesc_tensor_get_f64(t.get(), idx, 2, &v));
        CHECK(v == 6);
        CHECK(producer_deletes == 0);
    }
    CHECK(producer_deletes == 1);

    // A refused import throws and leaves the tensor to its unique_ptr: one delete, by it.
    producer_deletes = 0;
    try {
        from_dlpack(dlpack_ptr(vector_tensor::make({-2}, {}, {})));
        CHECK(false);
    } catch (const tdesc::error &e) {
        CHECK(e.status() == TDESC_ERR_INVALID_ARGUMENT);
    }
    CHECK(producer_deletes == 1);

    std::printf("dlpack_cpp: %d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
