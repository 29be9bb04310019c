/*
 * tensordesc.hpp -- a small header-only C++17 layer over tensordesc.h:
 * RAII owners, range-for over regions and buffers, std::variant locations and
 * exceptions (tdesc::error carries the status and the detail).
 *
 *   auto d = tdesc::descriptor::decode(bytes);            // throws tdesc::error
 *   for (const tdesc_region &r : d.regions()) { ... }
 *   auto loc = d.locate({3, 5});
 *   if (auto *dense = std::get_if<tdesc::dense_location>(&loc)) { ... }
 *   std::vector<float> w = t.read<float>({{0, 0}, {128, 64}});   // a window, dequantized
 *
 * Hand-written; the C header is generated. See docs/c-api.md.
 */
#ifndef TENSORDESC_HPP
#define TENSORDESC_HPP

/* C++17 or later (std::optional, std::variant); MSVC reports the standard in _MSVC_LANG. */
#if !defined(__cplusplus)
#error "tensordesc.hpp is a C++17 header; C code includes tensordesc.h"
#elif (defined(_MSVC_LANG) ? _MSVC_LANG : __cplusplus) < 201703L
#error "tensordesc.hpp needs C++17 or later (-std=c++17, /std:c++17); C++11/14 code can use the C API in tensordesc.h"
#else

#include <cstddef>
#include <cstdint>
#include <limits>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "tensordesc.h"

#if __cplusplus >= 202002L && __has_include(<span>)
#include <span>
#define TDESC_HAS_STD_SPAN 1
#endif

namespace tdesc {

/// A failed call: the status, its name and the library's detail (tdesc_last_error).
///
/// The two strings have different owners, hence different types:
///   name()   const char *          the status name without prefix ("INDEX_OUT_OF_BOUNDS"),
///                                  a static string (tdesc_status_name), valid forever;
///   detail() const std::string &   the library's message as tdesc_last_error() gave it when
///                                  the call failed ("INDEX_OUT_OF_BOUNDS: index [9, 0] ..."),
///                                  owned by the exception (what() returns the same text).
class error : public std::runtime_error {
  public:
    error(tdesc_status status, const std::string &detail)
        : std::runtime_error(detail), status_(status), detail_(detail) {}
    tdesc_status status() const noexcept { return status_; }
    /// The status name: a static C string (see above).
    const char *name() const noexcept { return tdesc_status_name(status_); }
    /// The full message, "NAME: detail": owned by this exception (see above).
    const std::string &detail() const noexcept { return detail_; }

  private:
    tdesc_status status_;
    std::string detail_;
};

/// Throw tdesc::error unless `s` is TDESC_OK.
inline void check(tdesc_status s) {
    if (s != TDESC_OK) {
        throw error(s, tdesc_last_error());
    }
}

/// The ggml block type numbered `number` (name, values and bytes per block); throws
/// NOT_FOUND for a number the library does not dequantize.
inline tdesc_ggml_block_type ggml_block_type(uint32_t number) {
    tdesc_ggml_block_type t;
    check(tdesc_ggml_type_info(number, &t));
    return t;
}

/// The number of the ggml block type named `name` ("Q4_K"; case ignored); throws
/// NOT_FOUND for another name.
inline uint32_t ggml_type_number(const std::string &name) {
    uint32_t n = 0;
    check(tdesc_ggml_type_by_name(name.data(), name.size(), &n));
    return n;
}

struct descriptor_deleter {
    void operator()(tdesc_descriptor *d) const noexcept { tdesc_descriptor_free(d); }
};
struct tensor_deleter {
    void operator()(tdesc_tensor *t) const noexcept { tdesc_tensor_free(t); }
};
struct node_deleter {
    void operator()(tdesc_node_spec *n) const noexcept { tdesc_node_free(n); }
};
struct builder_deleter {
    void operator()(tdesc_builder *b) const noexcept { tdesc_builder_free(b); }
};
using descriptor_ptr = std::unique_ptr<tdesc_descriptor, descriptor_deleter>;
using tensor_ptr = std::unique_ptr<tdesc_tensor, tensor_deleter>;
using node_ptr = std::unique_ptr<tdesc_node_spec, node_deleter>;
using builder_ptr = std::unique_ptr<tdesc_builder, builder_deleter>;
struct file_deleter {
    void operator()(tdesc_file *f) const noexcept { tdesc_file_free(f); }
};
struct file_writer_deleter {
    void operator()(tdesc_file_writer *w) const noexcept { tdesc_file_writer_free(w); }
};
struct stream_writer_deleter {
    void operator()(tdesc_stream_writer *w) const noexcept { tdesc_stream_writer_free(w); }
};
struct stream_reader_deleter {
    void operator()(tdesc_stream_reader *r) const noexcept { tdesc_stream_reader_free(r); }
};
using file_ptr = std::unique_ptr<tdesc_file, file_deleter>;
using file_writer_ptr = std::unique_ptr<tdesc_file_writer, file_writer_deleter>;
using stream_writer_ptr = std::unique_ptr<tdesc_stream_writer, stream_writer_deleter>;
using stream_reader_ptr = std::unique_ptr<tdesc_stream_reader, stream_reader_deleter>;

using dense_location = tdesc_location_dense;
using lookup_location = tdesc_location_lookup;
/// Where an element lives.
using location = std::variant<dense_location, lookup_location>;

/// A random-access view of `count` items fetched by index (regions, buffers).
template <class T, tdesc_status (*Fetch)(const tdesc_descriptor *, size_t, T *)>
class index_range {
  public:
    class iterator {
      public:
        using iterator_category = std::input_iterator_tag;
        using value_type = T;
        using difference_type = std::ptrdiff_t;
        using pointer = const T *;
        using reference = T;
        iterator(const tdesc_descriptor *d, size_t i) : d_(d), i_(i) {}
        T operator*() const {
            T v;
            check(Fetch(d_, i_, &v));
            return v;
        }
        iterator &operator++() {
            ++i_;
            return *this;
        }
        iterator operator++(int) {
            iterator old = *this;
            ++i_;
            return old;
        }
        bool operator==(const iterator &o) const { return i_ == o.i_ && d_ == o.d_; }
        bool operator!=(const iterator &o) const { return !(*this == o); }

      private:
        const tdesc_descriptor *d_;
        size_t i_;
    };
    index_range(const tdesc_descriptor *d, size_t n) : d_(d), n_(n) {}
    iterator begin() const { return iterator(d_, 0); }
    iterator end() const { return iterator(d_, n_); }
    size_t size() const noexcept { return n_; }
    bool empty() const noexcept { return n_ == 0; }
    T operator[](size_t i) const {
        T v;
        check(Fetch(d_, i, &v));
        return v;
    }

  private:
    const tdesc_descriptor *d_;
    size_t n_;
};

using region_range = index_range<tdesc_region, tdesc_descriptor_region>;
using buffer_range = index_range<tdesc_buffer, tdesc_descriptor_buffer>;

/// An owned, immutable descriptor handle (cheap to share with `clone()`).
/// A half-open box `[lo, hi)` in tensor coordinates (`lo[a] <= i[a] < hi[a]`).
struct box {
    std::vector<uint64_t> lo;
    std::vector<uint64_t> hi;

    /// Elements in the box (throws on mismatched corners or an overflowing count).
    size_t size() const {
        if (lo.size() != hi.size()) {
            throw error(TDESC_ERR_INVALID_ARGUMENT, "INVALID_ARGUMENT: box corners differ in rank");
        }
        size_t n = 1;
        for (size_t a = 0; a < lo.size(); ++a) {
            if (hi[a] < lo[a]) {
                throw error(TDESC_ERR_INDEX_OUT_OF_BOUNDS, "INDEX_OUT_OF_BOUNDS: box lo > hi");
            }
            uint64_t e = hi[a] - lo[a];
            if (e != 0 && n > std::numeric_limits<size_t>::max() / e) {
                throw error(TDESC_ERR_OVERFLOW, "OVERFLOW: box element count");
            }
            n *= static_cast<size_t>(e);
        }
        return n;
    }
};

/// A leaf region met by descriptor::regions_in_box, with its part of the box.
struct region_hit {
    uint32_t region; ///< TDESC_NO_REGION for a tensor that is not a subpaving
    uint8_t layout_tag;
    std::vector<uint64_t> lo;
    std::vector<uint64_t> hi;
};

/// The output type a C++ element type reads as: float and double.
template <class T> struct output_type_of;
template <> struct output_type_of<float> {
    static constexpr tdesc_output_type value = TDESC_OUTPUT_FLOAT32;
};
template <> struct output_type_of<double> {
    static constexpr tdesc_output_type value = TDESC_OUTPUT_FLOAT64;
};

class descriptor {
  public:
    /// Take ownership of a handle from the C API.
    explicit descriptor(tdesc_descriptor *owned) : h_(owned) {
        if (!h_) {
            throw error(TDESC_ERR_INVALID_ARGUMENT, "null descriptor handle");
        }
    }

    /// Decode from the start of `bytes`; `consumed` (optional) receives descriptor_length.
    static descriptor decode(const void *bytes, size_t len, tdesc_mode mode = TDESC_MODE_STRICT,
                             size_t *consumed = nullptr) {
        tdesc_descriptor *d = nullptr;
        check(tdesc_descriptor_decode(static_cast<const uint8_t *>(bytes), len, mode, &d,
                                      consumed));
        return descriptor(d);
    }
    static descriptor decode(const std::vector<uint8_t> &bytes,
                             tdesc_mode mode = TDESC_MODE_STRICT) {
        return decode(bytes.data(), bytes.size(), mode);
    }

    std::vector<uint8_t> encode() const {
        size_t need = 0;
        tdesc_status s = tdesc_descriptor_encode(get(), nullptr, 0, &need);
        if (s != TDESC_ERR_OUTPUT_TOO_SMALL) {
            check(s);
        }
        std::vector<uint8_t> out(need);
        size_t written = 0;
        check(tdesc_descriptor_encode(get(), out.data(), out.size(), &written));
        out.resize(written);
        return out;
    }

    /// Another owner of the same descriptor.
    descriptor clone() const {
        tdesc_descriptor *d = nullptr;
        check(tdesc_descriptor_clone(get(), &d));
        return descriptor(d);
    }

    const tdesc_descriptor *get() const noexcept { return h_.get(); }

    uint8_t rank() const noexcept { return tdesc_descriptor_rank(get()); }
    std::vector<uint64_t> shape() const {
        const uint64_t *s = tdesc_descriptor_shape(get());
        return std::vector<uint64_t>(s, s + rank());
    }
    uint8_t element_type() const noexcept { return tdesc_descriptor_element_type(get()); }
    std::string element_type_name() const { return tdesc_element_type_name(element_type()); }
    uint8_t layout() const noexcept { return tdesc_descriptor_layout(get()); }
    std::string layout_name() const { return tdesc_layout_name(layout()); }
    uint64_t element_count() const noexcept { return tdesc_descriptor_element_count(get()); }
    uint64_t encoded_len() const noexcept { return tdesc_descriptor_encoded_len(get()); }
    bool is_bindable() const noexcept { return tdesc_descriptor_is_bindable(get()); }

    /// The effective buffers, in transport order.
    buffer_range buffers() const {
        return buffer_range(get(), tdesc_descriptor_buffer_count(get()));
    }
    /// Every region, depth-first pre-order (empty for a non-subpaving tensor).
    region_range regions() const {
        return region_range(get(), tdesc_descriptor_region_count(get()));
    }

    location locate(const uint64_t *index, size_t rank) const {
        tdesc_location loc;
        check(tdesc_descriptor_locate(get(), index, rank, &loc));
        if (loc.tag == TDESC_LOCATION_DENSE) {
            return loc.DENSE;
        }
        return loc.LOOKUP;
    }
    location locate(const std::vector<uint64_t> &index) const {
        return locate(index.data(), index.size());
    }
    location locate(std::initializer_list<uint64_t> index) const {
        return locate(index.begin(), index.size());
    }

    /// Every leaf region the box meets (any depth, depth-first order) with its part of
    /// the box; for a tensor that is not a subpaving, the tensor itself.
    std::vector<region_hit> regions_in_box(const box &b) const {
        b.size();
        struct ctx_t {
            size_t rank;
            std::vector<region_hit> hits;
            bool out_of_memory;
        } ctx{b.lo.size(), {}, false};
        // No exception may cross the C library: a failed allocation stops the walk and is
        // rethrown here.
        auto visit = [](void *c, uint32_t region, uint8_t tag, const uint64_t *lo,
                        const uint64_t *hi) -> int32_t {
            auto *x = static_cast<ctx_t *>(c);
            try {
                x->hits.push_back(region_hit{region, tag,
                                             std::vector<uint64_t>(lo, lo + x->rank),
                                             std::vector<uint64_t>(hi, hi + x->rank)});
            } catch (...) {
                x->out_of_memory = true;
                return 1;
            }
            return 0;
        };
        check(tdesc_descriptor_regions_in_box(get(), b.lo.data(), b.hi.data(), b.lo.size(), visit,
                                              &ctx));
        if (ctx.out_of_memory) {
            throw std::bad_alloc();
        }
        return std::move(ctx.hits);
    }

    /// Compact locations of many indices (`indices`: index after index, rank each).
    std::vector<tdesc_compact_location> locate_many(const std::vector<uint64_t> &indices) const {
        size_t r = rank();
        size_t n = r == 0 ? 0 : indices.size() / r;
        std::vector<tdesc_compact_location> out(n);
        check(tdesc_descriptor_locate_many(get(), indices.data(), n, r, out.data()));
        return out;
    }

    tdesc_layout_info layout_info(uint32_t region = TDESC_NO_REGION) const {
        tdesc_layout_info li;
        check(tdesc_descriptor_layout_info(get(), region, &li));
        return li;
    }

    /// The quantization of the tensor or of `region` (throws NOT_FOUND when it has none).
    tdesc_quantization quantization(uint32_t region = TDESC_NO_REGION) const {
        tdesc_quantization q;
        check(tdesc_descriptor_quantization(get(), region, &q));
        return q;
    }
    /// Its format 1.1 fields (BLOCKWISE_2D's second axis and block, the global scale).
    tdesc_quantization_ext quantization_ext(uint32_t region = TDESC_NO_REGION) const {
        tdesc_quantization_ext e;
        check(tdesc_descriptor_quantization_ext(get(), region, &e));
        return e;
    }
    /// The element type region `region` stores (format 1.1: its own, inherited, or the
    /// tensor's) and whether it carries it itself.
    std::pair<uint8_t, bool> stored_type(uint32_t region) const {
        uint8_t t = 0, own = 0;
        check(tdesc_descriptor_stored_type(get(), region, &t, &own));
        return {t, own != 0};
    }
    /// The shard section, or nullopt (arrays borrowed from the descriptor).
    std::optional<tdesc_shard> shard() const {
        tdesc_shard s;
        tdesc_status st = tdesc_descriptor_shard(get(), &s);
        if (st == TDESC_ERR_NOT_FOUND) return std::nullopt;
        check(st);
        return s;
    }
    /// The statistics section, or nullopt.
    std::optional<tdesc_statistics> statistics() const {
        tdesc_statistics s;
        tdesc_status st = tdesc_descriptor_statistics(get(), &s);
        if (st == TDESC_ERR_NOT_FOUND) return std::nullopt;
        check(st);
        return s;
    }
    /// The extension_type section, or nullopt (bytes borrowed from the descriptor).
    std::optional<tdesc_extension_type> extension_type() const {
        tdesc_extension_type e;
        tdesc_status st = tdesc_descriptor_extension_type(get(), &e);
        if (st == TDESC_ERR_NOT_FOUND) return std::nullopt;
        check(st);
        return e;
    }
    /// The descriptor's `version_minor` (1 when it uses a format 1.1 feature).
    uint8_t version_minor() const noexcept { return tdesc_descriptor_version_minor(get()); }

    /// The ggml block type of a GGML_BLOCKS tensor or `region` (throws
    /// INVALID_ARGUMENT for another layout).
    tdesc_ggml_block_type ggml_type(uint32_t region = TDESC_NO_REGION) const {
        uint32_t number = 0;
        check(tdesc_descriptor_ggml_type(get(), region, &number));
        return ggml_block_type(number);
    }

    /// Give up ownership of the C handle (for calls that consume it).
    tdesc_descriptor *release() noexcept { return h_.release(); }

  private:
    descriptor_ptr h_;
};

/// Storage kept between decodes (`tdesc_decode_cache`): decode many descriptors without
/// a fresh decoded form for each. Use from one thread at a time.
class decode_cache {
  public:
    decode_cache() {
        tdesc_decode_cache *c = nullptr;
        check(tdesc_decode_cache_new(&c));
        h_.reset(c);
    }

    /// descriptor::decode, into the cache's storage.
    descriptor decode(const void *bytes, size_t len, tdesc_mode mode = TDESC_MODE_STRICT,
                      size_t *consumed = nullptr) {
        tdesc_descriptor *d = nullptr;
        check(tdesc_decode_cache_decode(h_.get(), static_cast<const uint8_t *>(bytes), len, mode,
                                        &d, consumed));
        return descriptor(d);
    }
    descriptor decode(const std::vector<uint8_t> &bytes, tdesc_mode mode = TDESC_MODE_STRICT) {
        return decode(bytes.data(), bytes.size(), mode);
    }

    /// Release `d` and take its storage back for the next decode (only the handle, when
    /// a clone or a bound tensor still shares the descriptor).
    void recycle(descriptor &&d) noexcept { tdesc_decode_cache_recycle(h_.get(), d.release()); }

    /// Heap bytes held for the next decode.
    size_t heap_bytes() const noexcept { return tdesc_decode_cache_heap_bytes(h_.get()); }

  private:
    struct deleter {
        void operator()(tdesc_decode_cache *c) const noexcept { tdesc_decode_cache_free(c); }
    };
    std::unique_ptr<tdesc_decode_cache, deleter> h_;
};

/// A node under construction (see tdesc_node_new_*); moved into its parent or builder.
class node {
  public:
    explicit node(tdesc_node_spec *owned) : h_(owned) {}

    static node row_major() { return make(tdesc_node_new_row_major); }
    static node col_major() { return make(tdesc_node_new_col_major); }
    static node splat() { return make(tdesc_node_new_splat); }
    static node subpaving() { return make(tdesc_node_new_subpaving); }
    static node strided(const std::vector<int64_t> &strides) {
        tdesc_node_spec *n = nullptr;
        check(tdesc_node_new_strided(strides.data(), strides.size(), &n));
        return node(n);
    }
    static node dim_order(const std::vector<uint8_t> &order) {
        tdesc_node_spec *n = nullptr;
        check(tdesc_node_new_dim_order(order.data(), order.size(), &n));
        return node(n);
    }
    static node coo(uint64_t nnz, uint8_t flags) { return sparse(tdesc_node_new_coo, nnz, flags); }
    static node csr(uint64_t nnz, uint8_t flags) { return sparse(tdesc_node_new_csr, nnz, flags); }
    static node csc(uint64_t nnz, uint8_t flags) { return sparse(tdesc_node_new_csc, nnz, flags); }
    static node csf(uint8_t element_type, const std::vector<uint8_t> &axis_order,
                    const std::vector<uint64_t> &level_nodes) {
        if (axis_order.size() != level_nodes.size()) {
            throw error(TDESC_ERR_INVALID_ARGUMENT, "axis_order and level_nodes differ in length");
        }
        tdesc_node_spec *n = nullptr;
        check(tdesc_node_new_csf(element_type, axis_order.data(), level_nodes.data(),
                                 axis_order.size(), &n));
        return node(n);
    }
    static node block_paged(uint64_t block_size, uint8_t pool_count) {
        tdesc_node_spec *n = nullptr;
        check(tdesc_node_new_block_paged(block_size, pool_count, &n));
        return node(n);
    }
    /// GGML_BLOCKS (format 1.1) of ggml type number `ggml_type` (ggml_type_number("Q4_K")
    /// names one); the element type is the value type, FLOAT32, FLOAT16 or BFLOAT16.
    static node ggml_blocks(uint32_t ggml_type) {
        tdesc_node_spec *n = nullptr;
        check(tdesc_node_new_ggml_blocks(ggml_type, &n));
        return node(n);
    }
    static node extension(uint8_t tag, const std::vector<uint8_t> &data) {
        tdesc_node_spec *n = nullptr;
        check(tdesc_node_new_extension(tag, data.data(), data.size(), &n));
        return node(n);
    }

    /// Add a region (this must be a subpaving node); `child` is consumed.
    node &add_region(const std::vector<uint64_t> &origin, const std::vector<uint64_t> &shape,
                     node &&child) & {
        if (origin.size() != shape.size()) {
            throw error(TDESC_ERR_INVALID_ARGUMENT, "origin and shape differ in rank");
        }
        check(tdesc_node_add_region(h_.get(), origin.data(), shape.data(), origin.size(),
                                    child.h_.release()));
        return *this;
    }
    node &&add_region(const std::vector<uint64_t> &origin, const std::vector<uint64_t> &shape,
                      node &&child) && {
        return std::move(add_region(origin, shape, std::move(child)));
    }
    /// Store `element_type` in this region (format 1.1; 0 clears).
    node &element_type(uint8_t element_type) & {
        check(tdesc_node_set_element_type(h_.get(), element_type));
        return *this;
    }
    node &&element_type(uint8_t element_type) && { return std::move(this->element_type(element_type)); }
    node &byte_offset(uint64_t off) & {
        check(tdesc_node_set_byte_offset(h_.get(), off));
        return *this;
    }
    node &&byte_offset(uint64_t off) && { return std::move(byte_offset(off)); }
    node &buffers(const std::vector<tdesc_buffer_handle> &handles) & {
        check(tdesc_node_set_buffers(h_.get(), handles.data(), handles.size()));
        return *this;
    }
    node &&buffers(const std::vector<tdesc_buffer_handle> &handles) && {
        return std::move(buffers(handles));
    }
    node &quantization(const tdesc_quantization &q) & {
        check(tdesc_node_set_quantization(h_.get(), &q));
        return *this;
    }
    node &&quantization(const tdesc_quantization &q) && { return std::move(quantization(q)); }
    /// With the format 1.1 fields (BLOCKWISE_2D, a global scale).
    node &quantization(const tdesc_quantization &q, const tdesc_quantization_ext &ext) & {
        check(tdesc_node_set_quantization_ext(h_.get(), &q, &ext));
        return *this;
    }
    node &&quantization(const tdesc_quantization &q, const tdesc_quantization_ext &ext) && {
        return std::move(quantization(q, ext));
    }

    /// Give up ownership (for the C API).
    tdesc_node_spec *release() noexcept { return h_.release(); }

  private:
    static node make(tdesc_status (*f)(tdesc_node_spec **)) {
        tdesc_node_spec *n = nullptr;
        check(f(&n));
        return node(n);
    }
    static node sparse(tdesc_status (*f)(uint64_t, uint8_t, tdesc_node_spec **), uint64_t nnz,
                       uint8_t flags) {
        tdesc_node_spec *n = nullptr;
        check(f(nnz, flags, &n));
        return node(n);
    }
    node_ptr h_;
};

/// A tensor under construction; build() validates with the rules of decoding.
class builder {
  public:
    builder(uint8_t element_type, const std::vector<uint64_t> &shape, node &&body) {
        tdesc_builder *b = nullptr;
        check(tdesc_builder_new(element_type, shape.data(), shape.size(), body.release(), &b));
        h_.reset(b);
    }
    builder &shard(const std::vector<uint64_t> &parent_shape,
                   const std::vector<uint64_t> &shard_origin, uint32_t index, uint32_t count) {
        if (parent_shape.size() != shard_origin.size()) {
            throw error(TDESC_ERR_INVALID_ARGUMENT, "parent_shape and shard_origin differ in rank");
        }
        check(tdesc_builder_set_shard(h_.get(), parent_shape.data(), shard_origin.data(),
                                      parent_shape.size(), index, count));
        return *this;
    }
    builder &statistics(const tdesc_statistics &s) {
        check(tdesc_builder_set_statistics(h_.get(), &s));
        return *this;
    }
    builder &extension_type(const std::string &name, const std::vector<uint8_t> &metadata = {}) {
        check(tdesc_builder_set_extension_type(
            h_.get(), reinterpret_cast<const uint8_t *>(name.data()), name.size(),
            metadata.data(), metadata.size()));
        return *this;
    }
    builder &device(const tdesc_buffer_handle &template_handle) {
        check(tdesc_builder_set_device(h_.get(), &template_handle));
        return *this;
    }
    /// Align automatic buffers to 2^alignment_log2 bytes (0..30; default 6). Below 6 the
    /// descriptor is format 1.1: 4 for malloc memory, 0 for bytes at any address.
    builder &alignment(uint8_t alignment_log2) {
        check(tdesc_builder_set_alignment(h_.get(), alignment_log2));
        return *this;
    }
    descriptor build() const {
        tdesc_descriptor *d = nullptr;
        check(tdesc_builder_build(h_.get(), &d));
        return descriptor(d);
    }
    std::vector<uint8_t> encode() const { return build().encode(); }

  private:
    builder_ptr h_;
};

/// A descriptor bound to caller-owned host buffers (which must outlive the tensor).
class tensor {
  public:
    /// Take ownership of a handle from the C API (e.g. tdesc_file_tensor_bind).
    explicit tensor(tdesc_tensor *owned) : h_(owned) {
        if (!h_) {
            throw error(TDESC_ERR_INVALID_ARGUMENT, "null tensor handle");
        }
    }
    tensor(const descriptor &d, const std::vector<const void *> &buffers) {
        tdesc_tensor *t = nullptr;
        check(tdesc_tensor_bind(d.get(), buffers.data(), buffers.size(), &t));
        h_.reset(t);
    }
    void validate() const { check(tdesc_tensor_validate(h_.get())); }
    double get_f64(const uint64_t *index, size_t rank) const {
        double v = 0;
        check(tdesc_tensor_get_f64(h_.get(), index, rank, &v));
        return v;
    }
    double get_f64(std::initializer_list<uint64_t> index) const {
        return get_f64(index.begin(), index.size());
    }
    double get_f64(const std::vector<uint64_t> &index) const {
        return get_f64(index.data(), index.size());
    }
    /// The stored bytes of one element (tdesc_tensor_element_bytes of them).
    std::vector<uint8_t> get_bytes(std::initializer_list<uint64_t> index) const {
        std::vector<uint8_t> out(tdesc_tensor_element_bytes(h_.get()));
        check(tdesc_tensor_get(h_.get(), index.begin(), index.size(), out.data(), out.size()));
        return out;
    }
    /// The box's values as T (float or double), packed in C order.
    template <class T> std::vector<T> read(const box &b) const {
        std::vector<T> out(b.size());
        read<T>(b, out.data(), out.size());
        return out;
    }
    /// The box's values as T into `count` elements at `out`: packed C order, or laid out
    /// by `strides` (rank byte strides of any sign; see docs/c-api.md).
    template <class T>
    void read(const box &b, T *out, size_t count, const int64_t *strides = nullptr) const {
        if (b.lo.size() != b.hi.size()) {
            throw error(TDESC_ERR_INVALID_ARGUMENT, "INVALID_ARGUMENT: box corners differ in rank");
        }
        check(tdesc_tensor_read_box(h_.get(), b.lo.data(), b.hi.data(), b.lo.size(),
                                    output_type_of<T>::value, out, count * sizeof(T), strides));
    }
#ifdef TDESC_HAS_STD_SPAN
    /// The box's values as T into a span (packed C order, or `strides` in bytes).
    template <class T, size_t E>
    void read(const box &b, std::span<T, E> out, const int64_t *strides = nullptr) const {
        read<T>(b, out.data(), out.size(), strides);
    }
#endif
    /// The box as stored (RAW): tdesc_tensor_element_bytes bytes per element, C order.
    std::vector<uint8_t> read_raw(const box &b) const {
        size_t es = tdesc_tensor_element_bytes(h_.get());
        size_t n = b.size();
        if (es != 0 && n > std::numeric_limits<size_t>::max() / es) {
            throw error(TDESC_ERR_OVERFLOW, "OVERFLOW: box byte count");
        }
        std::vector<uint8_t> out(n * es);
        check(tdesc_tensor_read_box(h_.get(), b.lo.data(), b.hi.data(), b.lo.size(),
                                    TDESC_OUTPUT_RAW, out.data(), out.size(), nullptr));
        return out;
    }
    /// The box as FLOAT16 or BFLOAT16 bit patterns (`type`), C order.
    std::vector<uint16_t> read_bits16(const box &b, tdesc_output_type type) const {
        std::vector<uint16_t> out(b.size());
        check(tdesc_tensor_read_box(h_.get(), b.lo.data(), b.hi.data(), b.lo.size(), type,
                                    out.data(), out.size() * sizeof(uint16_t), nullptr));
        return out;
    }
    /// Values of many elements as T (`indices`: index after index, `rank` each).
    template <class T>
    std::vector<T> get_many(const std::vector<uint64_t> &indices, size_t rank) const {
        size_t n = rank == 0 ? 0 : indices.size() / rank;
        std::vector<T> out(n);
        check(tdesc_tensor_get_many(h_.get(), indices.data(), n, rank, output_type_of<T>::value,
                                    out.data(), out.size() * sizeof(T)));
        return out;
    }
    /// Whether the memory must not be written (a mapped file, READ_ONLY buffers).
    bool is_read_only() const noexcept { return tdesc_tensor_is_read_only(h_.get()); }
    /// Whether the host may read every buffer.
    bool is_host_readable() const noexcept { return tdesc_tensor_is_host_readable(h_.get()); }
    /// A copy of the tensor's descriptor (the tensor keeps its own).
    tdesc::descriptor descriptor() const {
        tdesc_descriptor *d = nullptr;
        check(tdesc_descriptor_clone(tdesc_tensor_descriptor(h_.get()), &d));
        return tdesc::descriptor(d);
    }
    const tdesc_tensor *get() const noexcept { return h_.get(); }

  private:
    tensor_ptr h_;
};

/// An open .tdf file (tdesc_file_open / tdesc_file_open_bytes). Tensors bound from it keep
/// its memory alive on their own.
class file {
  public:
    explicit file(tdesc_file *owned) : h_(owned) {
        if (!h_) {
            throw error(TDESC_ERR_INVALID_ARGUMENT, "null file handle");
        }
    }
    /// Map and parse the file at `path`.
    static file open(const std::string &path, tdesc_mode mode = TDESC_MODE_STRICT) {
        tdesc_file *f = nullptr;
        check(tdesc_file_open(path.c_str(), mode, &f));
        return file(f);
    }
    /// Parse a file held in memory (the bytes are copied).
    static file from_bytes(const void *bytes, size_t len, tdesc_mode mode = TDESC_MODE_STRICT) {
        tdesc_file *f = nullptr;
        check(tdesc_file_open_bytes(static_cast<const uint8_t *>(bytes), len, mode, &f));
        return file(f);
    }
    static file from_bytes(const std::vector<uint8_t> &bytes,
                           tdesc_mode mode = TDESC_MODE_STRICT) {
        return from_bytes(bytes.data(), bytes.size(), mode);
    }

    /// Number of tensors (opaque entries included).
    size_t size() const noexcept { return tdesc_file_tensor_count(get()); }
    uint32_t data_alignment() const noexcept { return tdesc_file_data_alignment(get()); }
    /// The container version: 2, or 1 for the older layout (0 for a foreign file).
    uint8_t version() const noexcept { return tdesc_file_version(get()); }
    /// What kind of file it is: TDESC_CONTAINER_TDF or TDESC_CONTAINER_SAFETENSORS (ABI 1.4).
    tdesc_container container() const noexcept { return tdesc_file_container(get()); }
    /// Throw TDESC_ERR_RESERVED_NONZERO unless the padding around the data is zero (reads
    /// the whole data area; opening does not).
    void check_padding() const { check(tdesc_file_check_padding(get())); }
    std::string name(size_t i) const {
        const char *p = nullptr;
        size_t n = 0;
        check(tdesc_file_tensor_name(get(), i, &p, &n));
        return std::string(p, n);
    }
    /// The index of the tensor named `name`, or nullopt.
    std::optional<size_t> find(const std::string &name) const {
        size_t i = 0;
        tdesc_status s = tdesc_file_find(get(), name.data(), name.size(), &i);
        if (s == TDESC_ERR_NOT_FOUND) {
            return std::nullopt;
        }
        check(s);
        return i;
    }
    /// The index of the tensor named `name` (throws TDESC_ERR_NOT_FOUND).
    size_t index(const std::string &name) const {
        size_t i = 0;
        check(tdesc_file_find(get(), name.data(), name.size(), &i));
        return i;
    }
    tdesc::descriptor tensor_descriptor(size_t i) const {
        tdesc_descriptor *d = nullptr;
        check(tdesc_file_tensor_descriptor(get(), i, &d));
        return tdesc::descriptor(d);
    }
    /// Tensor `i` bound to the file's memory (no copy).
    tensor bind(size_t i) const {
        tdesc_tensor *t = nullptr;
        check(tdesc_file_tensor_bind(get(), i, &t));
        return tensor(t);
    }
    tensor bind(const std::string &name) const { return bind(index(name)); }
    bool is_opaque(size_t i) const noexcept { return tdesc_file_tensor_is_opaque(get(), i); }
    /// Why tensor `i` is opaque: (TDESC_OK, "") for a normal tensor.
    std::pair<tdesc_status, std::string> problem(size_t i) const {
        tdesc_status s = TDESC_OK;
        const char *reason = nullptr;
        check(tdesc_file_tensor_problem(get(), i, &s, &reason));
        return {s, reason};
    }
    /// Effective buffer `k` of tensor `i` where it lies (borrowed from the file).
    std::pair<const uint8_t *, size_t> buffer(size_t i, size_t k) const {
        const uint8_t *p = nullptr;
        size_t n = 0;
        check(tdesc_file_tensor_buffer(get(), i, k, &p, &n));
        return {p, n};
    }
    /// Tensor `i`'s encoded descriptor as stored (borrowed; also for opaque entries).
    std::pair<const uint8_t *, size_t> descriptor_bytes(size_t i) const {
        const uint8_t *p = nullptr;
        size_t n = 0;
        check(tdesc_file_tensor_descriptor_bytes(get(), i, &p, &n));
        return {p, n};
    }
    /// Tensor `i`'s data region as stored (borrowed; also for opaque entries).
    std::pair<const uint8_t *, size_t> data(size_t i) const {
        const uint8_t *p = nullptr;
        size_t n = 0;
        check(tdesc_file_tensor_data(get(), i, &p, &n));
        return {p, n};
    }
    /// Number of keys in the file's metadata map (ABI 1.4).
    size_t metadata_count() const noexcept { return tdesc_file_metadata_count(get()); }
    /// Key `i` of the metadata map.
    std::string metadata_key(size_t i) const {
        const char *p = nullptr;
        size_t n = 0;
        check(tdesc_file_metadata_key(get(), i, &p, &n));
        return std::string(p, n);
    }
    /// The index of metadata key `key`, or nullopt.
    std::optional<size_t> metadata_find(const std::string &key) const {
        size_t i = 0;
        tdesc_status s = tdesc_file_metadata_find(get(), key.data(), key.size(), &i);
        if (s == TDESC_ERR_NOT_FOUND) {
            return std::nullopt;
        }
        check(s);
        return i;
    }
    /// The type of key `i`'s value (or of item `item` of its array): TDESC_METADATA_*.
    tdesc_metadata_type metadata_type(size_t i, size_t item = TDESC_METADATA_WHOLE) const noexcept {
        return tdesc_file_metadata_type(get(), i, item);
    }
    size_t metadata_array_len(size_t i, size_t item = TDESC_METADATA_WHOLE) const {
        size_t n = 0;
        check(tdesc_file_metadata_array_len(get(), i, item, &n));
        return n;
    }
    bool metadata_bool(size_t i, size_t item = TDESC_METADATA_WHOLE) const {
        bool v = false;
        check(tdesc_file_metadata_bool(get(), i, item, &v));
        return v;
    }
    int64_t metadata_int(size_t i, size_t item = TDESC_METADATA_WHOLE) const {
        int64_t v = 0;
        check(tdesc_file_metadata_int(get(), i, item, &v));
        return v;
    }
    uint64_t metadata_uint(size_t i, size_t item = TDESC_METADATA_WHOLE) const {
        uint64_t v = 0;
        check(tdesc_file_metadata_uint(get(), i, item, &v));
        return v;
    }
    double metadata_float(size_t i, size_t item = TDESC_METADATA_WHOLE) const {
        double v = 0;
        check(tdesc_file_metadata_float(get(), i, item, &v));
        return v;
    }
    std::string metadata_string(size_t i, size_t item = TDESC_METADATA_WHOLE) const {
        const char *p = nullptr;
        size_t n = 0;
        check(tdesc_file_metadata_string(get(), i, item, &p, &n));
        return std::string(p, n);
    }
    const tdesc_file *get() const noexcept { return h_.get(); }

  private:
    file_ptr h_;
};

/// The byte offset of the field the calling thread's last failure found wrong, if any.
inline std::optional<uint64_t> last_error_offset() {
    uint64_t off = 0;
    if (tdesc_last_error_offset(&off)) return off;
    return std::nullopt;
}

/// Copy a borrowed (pointer, length) result into a vector.
inline std::vector<uint8_t> copy_bytes(const uint8_t *p, size_t n) {
    return n == 0 ? std::vector<uint8_t>() : std::vector<uint8_t>(p, p + n);
}

/// A .tdf file (container version 2) being written, to a path or into memory: tensor by
/// tensor (`add`, each tensor's bytes copied during the call), or the directory first
/// (`declare` every tensor, then `write_tensor` / `write_bytes` the data in order).
class file_writer {
  public:
    explicit file_writer(tdesc_file_writer *owned) : h_(owned) {
        if (!h_) {
            throw error(TDESC_ERR_INVALID_ARGUMENT, "null file writer handle");
        }
    }
    /// Create the file at `path`; `data_alignment` 0 means 64.
    explicit file_writer(const std::string &path, uint32_t data_alignment = 0) {
        tdesc_file_writer *w = nullptr;
        check(tdesc_file_writer_open(path.c_str(), data_alignment, &w));
        h_.reset(w);
    }
    static file_writer memory(uint32_t data_alignment = 0) {
        tdesc_file_writer *w = nullptr;
        check(tdesc_file_writer_new_memory(data_alignment, &w));
        return file_writer(w);
    }
    /// Append a tensor: one pointer per effective buffer, each holding its size_bytes.
    file_writer &add(const std::string &name, const descriptor &d,
                     const std::vector<const void *> &buffers) {
        check(tdesc_file_writer_add(h_.get(), name.data(), name.size(), d.get(),
                                    buffers.data(), buffers.size()));
        return *this;
    }
    /// Declare a tensor whose data comes later, in declaration order.
    file_writer &declare(const std::string &name, const descriptor &d) {
        check(tdesc_file_writer_declare(h_.get(), name.data(), name.size(), d.get()));
        return *this;
    }
    /// Declare an opaque entry (descriptor bytes as read from another file) whose
    /// `data_length`-byte data region comes later, verbatim.
    file_writer &declare_opaque(const std::string &name, const std::vector<uint8_t> &descriptor,
                                uint64_t data_length) {
        check(tdesc_file_writer_declare_opaque(h_.get(), name.data(), name.size(),
                                               descriptor.data(), descriptor.size(), data_length));
        return *this;
    }
    /// Write the header and directory now (the first data call does it otherwise).
    file_writer &write_directory() {
        check(tdesc_file_writer_write_directory(h_.get()));
        return *this;
    }
    /// The next declared tensor's buffers, one pointer per effective buffer.
    file_writer &write_tensor(const std::vector<const void *> &buffers) {
        check(tdesc_file_writer_write_tensor(h_.get(), buffers.data(), buffers.size()));
        return *this;
    }
    /// The next bytes of the declared tensors' data, in order (any piece size).
    file_writer &write_bytes(const void *bytes, size_t len) {
        check(tdesc_file_writer_write_bytes(h_.get(), static_cast<const uint8_t *>(bytes), len));
        return *this;
    }
    /// Complete the file, flush and close.
    void finish() { check(tdesc_file_writer_finish(h_.get())); }
    /// The file of a finished memory writer.
    std::vector<uint8_t> bytes() const {
        const uint8_t *p = nullptr;
        size_t n = 0;
        check(tdesc_file_writer_bytes(h_.get(), &p, &n));
        return copy_bytes(p, n);
    }

  private:
    file_writer_ptr h_;
};

/// A frame stream being written, to a path, a file descriptor, a write callback or into
/// memory. Live: when a call returns, its frames have reached the sink.
class stream_writer {
  public:
    explicit stream_writer(tdesc_stream_writer *owned) : h_(owned) {
        if (!h_) {
            throw error(TDESC_ERR_INVALID_ARGUMENT, "null stream writer handle");
        }
    }
    explicit stream_writer(const std::string &path) {
        tdesc_stream_writer *w = nullptr;
        check(tdesc_stream_writer_open(path.c_str(), &w));
        h_.reset(w);
    }
    static stream_writer memory() {
        tdesc_stream_writer *w = nullptr;
        check(tdesc_stream_writer_new_memory(&w));
        return stream_writer(w);
    }
    /// A writer to the open file descriptor `fd`, through the writer's own duplicate:
    /// `fd` is never closed by the writer and stays the caller's.
    static stream_writer from_fd(int fd) {
        tdesc_stream_writer *w = nullptr;
        check(tdesc_stream_writer_open_fd(fd, &w));
        return stream_writer(w);
    }
    /// A writer handing its bytes to `write_fn(user_data, bytes, len)`, which returns 0
    /// when it took them all (anything else: TDESC_ERR_IO, the writer is broken). It must
    /// not throw: catch inside and return non-zero.
    static stream_writer from_callback(tdesc_stream_write_fn write_fn, void *user_data) {
        tdesc_stream_writer *w = nullptr;
        check(tdesc_stream_writer_open_callback(write_fn, user_data, &w));
        return stream_writer(w);
    }
    /// A whole tensor: DESCRIPTOR and one DATA frame per non-empty buffer.
    stream_writer &add(const std::string &name, const descriptor &d,
                       const std::vector<const void *> &buffers) {
        check(tdesc_stream_writer_add(h_.get(), name.data(), name.size(), d.get(),
                                      buffers.data(), buffers.size()));
        return *this;
    }
    /// A DESCRIPTOR frame; the bytes follow through data().
    stream_writer &begin(const std::string &name, const descriptor &d) {
        check(tdesc_stream_writer_begin(h_.get(), name.data(), name.size(), d.get()));
        return *this;
    }
    stream_writer &data(size_t buffer, const void *bytes, size_t len) {
        check(tdesc_stream_writer_data(h_.get(), buffer, bytes, len));
        return *this;
    }
    void finish() { check(tdesc_stream_writer_finish(h_.get())); }
    std::vector<uint8_t> bytes() const {
        const uint8_t *p = nullptr;
        size_t n = 0;
        check(tdesc_stream_writer_bytes(h_.get(), &p, &n));
        return copy_bytes(p, n);
    }

  private:
    stream_writer_ptr h_;
};

/// A push-style stream reader: feed bytes, poll events.
class stream_reader {
  public:
    explicit stream_reader(tdesc_mode mode = TDESC_MODE_STRICT, uint64_t max_descriptor_bytes = 0,
                           bool unique_names = true) {
        tdesc_stream_reader *r = nullptr;
        check(tdesc_stream_reader_new_with_options(mode, max_descriptor_bytes, unique_names, &r));
        h_.reset(r);
    }
    void feed(const void *bytes, size_t len) {
        check(tdesc_stream_reader_feed(h_.get(), static_cast<const uint8_t *>(bytes), len));
    }
    void feed(const std::vector<uint8_t> &bytes) { feed(bytes.data(), bytes.size()); }
    /// The next event into `ev`; false when every fed byte is consumed (feed more). Throws
    /// on a malformed stream. Pointers in `ev` follow the lifetimes of tdesc_stream_event.
    bool poll(tdesc_stream_event &ev) {
        check(tdesc_stream_reader_poll(h_.get(), &ev));
        return ev.kind != TDESC_STREAM_EVENT_NONE;
    }
    /// End of input: throws TDESC_ERR_TRUNCATED unless STREAM_END was read.
    void finish() const { check(tdesc_stream_reader_finish(h_.get())); }
    uint64_t position() const noexcept { return tdesc_stream_reader_position(h_.get()); }

  private:
    stream_reader_ptr h_;
};

} // namespace tdesc

#endif /* C++17 */

#endif /* TENSORDESC_HPP */
