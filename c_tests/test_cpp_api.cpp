// The C++17 layer (tensordesc.hpp): RAII owners, range-for over regions and buffers,
// std::variant locations, exceptions carrying status and detail, binding host buffers.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "check.hpp"

struct free_deleter {
    void operator()(void *p) const noexcept { std::free(p); }
};
using host_buffer = std::unique_ptr<void, free_deleter>;

// check.h's 64-byte aligned, zeroed allocation, owned.
static host_buffer host_alloc64(size_t n) { return host_buffer(alloc64(n)); }

static tdesc::descriptor mixed() {
    // 8 x 8: a dense left half and a nested right half (CSR on top, splat below).
    tdesc::node right = tdesc::node::subpaving();
    right.add_region({0, 0}, {4, 4}, tdesc::node::csr(3, TDESC_SPARSE_SORTED | TDESC_SPARSE_UNIQUE))
        .add_region({4, 0}, {4, 4}, tdesc::node::splat());
    tdesc::node top = tdesc::node::subpaving();
    top.add_region({0, 0}, {8, 4}, tdesc::node::row_major())
        .add_region({0, 4}, {8, 4}, std::move(right));
    return tdesc::builder(TDESC_ELEMENT_FLOAT32, {8, 8}, std::move(top)).build();
}

static void test_ranges_and_variant() {
    tdesc::descriptor d = mixed();
    CHECK(d.rank() == 2 && d.shape() == (std::vector<uint64_t>{8, 8}));
    CHECK(d.element_type_name() == "FLOAT32" && d.layout_name() == "SUBPAVING");
    CHECK(d.regions().size() == 4 && d.buffers().size() == 5);
    std::vector<uint32_t> depths;
    for (const tdesc_region &r : d.regions()) {
        depths.push_back(r.depth);
    }
    CHECK((depths == std::vector<uint32_t>{1, 1, 2, 2}));
    size_t indptr = 0;
    uint32_t last_region = 0;
    for (const tdesc_buffer &b : d.buffers()) {
        indptr += b.role == TDESC_ROLE_INDPTR;
        last_region = b.region;
    }
    CHECK(indptr == 1 && last_region == 3);
    CHECK(d.regions()[3].origin[0] == 4 && d.regions()[3].global_origin[1] == 4);

    tdesc::location loc = d.locate({5, 1});
    const auto *dense = std::get_if<tdesc::dense_location>(&loc);
    CHECK(dense && dense->region == 0 && dense->buffer == 0 && dense->byte_offset == 4 * (5 * 4 + 1));
    loc = d.locate({1, 6});
    const auto *lookup = std::get_if<tdesc::lookup_location>(&loc);
    CHECK(lookup && lookup->region == 2 && lookup->layout_tag == TDESC_LAYOUT_CSR &&
          lookup->local_index[0] == 1 && lookup->local_index[1] == 2);
    loc = d.locate(std::vector<uint64_t>{7, 7});
    CHECK(std::holds_alternative<tdesc::dense_location>(loc));

    // Round trip through bytes, and a shared clone.
    std::vector<uint8_t> bytes = d.encode();
    tdesc::descriptor back = tdesc::descriptor::decode(bytes);
    CHECK(back.encode() == bytes && back.encoded_len() == bytes.size());
    tdesc::descriptor twin = back.clone();
    CHECK(twin.regions().size() == 4);
    CHECK(d.layout_info(0).tag == TDESC_LAYOUT_ROW_MAJOR && d.layout_info().region_count == 2);
}

static void test_errors() {
    tdesc::descriptor d = mixed();
    CHECK(status_of([&] { d.locate({8, 0}); }) == TDESC_ERR_INDEX_OUT_OF_BOUNDS);
    CHECK(status_of([&] { d.locate({1}); }) == TDESC_ERR_INVALID_ARGUMENT);
    CHECK(status_of([&] { (void)d.regions()[4]; }) == TDESC_ERR_INDEX_OUT_OF_BOUNDS);
    const uint8_t junk[4] = {'N', 'O', 'P', 'E'};
    try {
        tdesc::descriptor::decode(junk, sizeof junk);
        CHECK(false);
    } catch (const tdesc::error &e) {
        CHECK(e.status() == TDESC_ERR_BAD_MAGIC);
        CHECK(std::string(e.name()) == "BAD_MAGIC");
        CHECK(e.detail().rfind("BAD_MAGIC: ", 0) == 0);
        CHECK(std::string(e.what()) == e.detail());
    }
    tdesc::node overlap = tdesc::node::subpaving();
    overlap.add_region({0}, {3}, tdesc::node::row_major()).add_region({2}, {2}, tdesc::node::row_major());
    tdesc::builder b(TDESC_ELEMENT_INT8, {4}, std::move(overlap));
    CHECK(status_of([&] { b.build(); }) == TDESC_ERR_REGION_OVERLAP);
    CHECK(status_of([] { tdesc::node::coo(1, 0x10); }) == TDESC_ERR_INVALID_ARGUMENT);
    CHECK(status_of([] { tdesc::builder(0, {1}, tdesc::node::row_major()); }) ==
          TDESC_ERR_INVALID_ARGUMENT);
    CHECK(status_of([] { tdesc::node::row_major().add_region({0}, {1}, tdesc::node::splat()); }) ==
          TDESC_ERR_INVALID_ARGUMENT);
}

static void test_builder_and_binding() {
    // Every layout family through the C++ layer.
    std::vector<tdesc::descriptor> all;
    all.push_back(tdesc::builder(TDESC_ELEMENT_INT16, {3, 2}, tdesc::node::col_major()).build());
    all.push_back(tdesc::builder(TDESC_ELEMENT_FLOAT64, {2, 3}, tdesc::node::strided({3, 1})).build());
    all.push_back(tdesc::builder(TDESC_ELEMENT_FLOAT16, {2, 3, 4}, tdesc::node::dim_order({2, 1, 0})).build());
    all.push_back(tdesc::builder(TDESC_ELEMENT_INT32, {3, 4}, tdesc::node::coo(2, 0)).build());
    all.push_back(tdesc::builder(TDESC_ELEMENT_INT32, {3, 4}, tdesc::node::csc(2, 0)).build());
    all.push_back(tdesc::builder(TDESC_ELEMENT_FLOAT32, {2, 3},
                                 tdesc::node::csf(TDESC_ELEMENT_FLOAT32, {1, 0}, {2, 3}))
                      .build());
    all.push_back(tdesc::builder(TDESC_ELEMENT_UINT8, {4, 8}, tdesc::node::block_paged(4, 1)).build());
    tdesc_buffer_handle h{32, TDESC_DEVICE_CPU, 0, TDESC_MEMORY_DEFAULT, 6, 0};
    all.push_back(tdesc::builder(TDESC_ELEMENT_UINT8, {4},
                                 tdesc::node::extension(0xF5, {1, 2}).buffers({h}))
                      .build());
    tdesc_quantization q{};
    q.scheme = TDESC_QUANT_PER_TENSOR_AFFINE;
    q.expressed_type = TDESC_ELEMENT_FLOAT32;
    q.scale = 2.0;
    tdesc_statistics st{};
    st.has_nan_count = 1;
    all.push_back(tdesc::builder(TDESC_ELEMENT_UINT8, {2, 2}, tdesc::node::row_major().quantization(q))
                      .shard({4, 2}, {2, 0}, 1, 2)
                      .statistics(st)
                      .extension_type("example.bytes", {9})
                      .build());
    const uint8_t tags[] = {TDESC_LAYOUT_COL_MAJOR, TDESC_LAYOUT_STRIDED, TDESC_LAYOUT_DIM_ORDER,
                            TDESC_LAYOUT_COO,       TDESC_LAYOUT_CSC,     TDESC_LAYOUT_CSF,
                            TDESC_LAYOUT_BLOCK_PAGED, 0xF5,              TDESC_LAYOUT_ROW_MAJOR};
    for (size_t i = 0; i < all.size(); ++i) {
        CHECK(all[i].layout() == tags[i]);
        CHECK(tdesc::descriptor::decode(all[i].encode()).encode() == all[i].encode());
    }

    // Bind the quantized tensor: value = q * 2.
    const tdesc::descriptor &qd = all.back();
    host_buffer data = host_alloc64(4);
    auto *u = static_cast<uint8_t *>(data.get());
    u[0] = 1;
    u[1] = 2;
    u[2] = 3;
    u[3] = 250;
    tdesc::tensor t(qd, {data.get()});
    t.validate();
    CHECK(t.get_f64({0, 0}) == 2.0 && t.get_f64({1, 1}) == 500.0);
    CHECK(t.get_bytes({1, 0}) == std::vector<uint8_t>{3});
    CHECK(status_of([&] { tdesc::tensor bad(qd, {}); }) == TDESC_ERR_BINDING_MISMATCH);
    CHECK(status_of([&] { t.get_f64({2, 0}); }) == TDESC_ERR_INDEX_OUT_OF_BOUNDS);
}

// Many decodes through one decode_cache: the same bytes back, storage kept between them,
// the same exceptions as descriptor::decode.
static void test_decode_cache() {
    const std::vector<uint8_t> bytes = mixed().encode();
    tdesc::decode_cache cache;
    CHECK(cache.heap_bytes() == 0);
    size_t held = 0;
    for (int round = 0; round < 3; ++round) {
        tdesc::descriptor d = cache.decode(bytes);
        CHECK(d.encode() == bytes);
        CHECK(d.regions().size() == 4);
        cache.recycle(std::move(d));
        CHECK(round == 0 || cache.heap_bytes() == held);
        held = cache.heap_bytes();
    }
    std::vector<uint8_t> cut(bytes.begin(), bytes.end() - 1);
    std::string plain, cached;
    try {
        tdesc::descriptor::decode(cut);
    } catch (const tdesc::error &e) {
        plain = e.what();
    }
    try {
        cache.decode(cut);
    } catch (const tdesc::error &e) {
        cached = e.what();
        CHECK(e.status() == TDESC_ERR_TRUNCATED);
    }
    CHECK(!plain.empty() && plain == cached);
    // Still usable after the failure.
    CHECK(cache.decode(bytes).encode() == bytes);
}

// builder::alignment: 16-byte buffers make a format 1.1 descriptor that binds memory
// aligned to 16 (not 64) bytes; 64 (the default) keeps it 1.0 and refuses that memory.
static void test_alignment() {
    tdesc::descriptor d16 =
        tdesc::builder(TDESC_ELEMENT_INT16, {2, 3}, tdesc::node::row_major()).alignment(4).build();
    tdesc::descriptor d64 =
        tdesc::builder(TDESC_ELEMENT_INT16, {2, 3}, tdesc::node::row_major()).build();
    CHECK(d16.version_minor() == 1 && d64.version_minor() == 0);
    CHECK(d16.buffers()[0].alignment_log2 == 4 && d64.buffers()[0].alignment_log2 == 6);
    host_buffer mem = host_alloc64(64);
    auto *p = static_cast<uint8_t *>(mem.get()) + 16;
    for (int k = 0; k < 6; ++k) {
        const int16_t v = static_cast<int16_t>(k * 3 - 7);
        std::memcpy(p + 2 * k, &v, 2);
    }
    tdesc::tensor t(d16, {p});
    t.validate();
    CHECK(t.get_f64({1, 2}) == 8.0 && t.get_f64({0, 0}) == -7.0);
    CHECK(status_of([&] { tdesc::tensor bad(d64, {p}); }) == TDESC_ERR_BINDING_MISMATCH);
    CHECK(status_of([] {
              tdesc::builder(TDESC_ELEMENT_INT16, {2}, tdesc::node::row_major()).alignment(31);
          }) == TDESC_ERR_INVALID_ARGUMENT);
}

int main() {
    test_ranges_and_variant();
    test_errors();
    test_builder_and_binding();
    test_alignment();
    test_decode_cache();
    std::printf("cpp_api: %d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
