// The data plane through tensordesc.hpp: tensor.read<T>(box) into a std::vector and into
// caller memory (a std::span under C++20), RAW and 16-bit reads, regions_in_box,
// locate_many and get_many, each against the single-element calls; errors as exceptions;
// ggml Q4_0 blocks (GGML_BLOCKS) through node::ggml_blocks.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "check.hpp"

struct free_deleter {
    void operator()(void *p) const noexcept { std::free(p); }
};
using host_buffer = std::unique_ptr<void, free_deleter>;

// A DeepSeek-style FP8 weight through the C++ builder: BLOCKWISE_2D with the 1.1 fields.
static void fp8_blockwise_2d() {
    tdesc_quantization q{};
    q.scheme = TDESC_QUANT_BLOCKWISE_2D;
    q.expressed_type = TDESC_ELEMENT_FLOAT32;
    q.axis = 0;
    q.block_size = 2;
    q.scale_type = TDESC_ELEMENT_FLOAT32;
    tdesc_quantization_ext ext{};
    ext.axis_b = 1;
    ext.block_b = 2;
    tdesc::descriptor d =
        tdesc::builder(TDESC_ELEMENT_FLOAT8_E4M3FN, {3, 3}, tdesc::node::row_major().quantization(q, ext))
            .build();
    CHECK(d.version_minor() == 1);
    CHECK(d.quantization().scheme == TDESC_QUANT_BLOCKWISE_2D);
    CHECK(d.quantization_ext().axis_b == 1 && d.quantization_ext().block_b == 2);
    host_buffer codes(alloc64(9)), scales(alloc64(4 * 4));
    // E4M3 0x38 = 1.0, 0x40 = 2.0, 0xB0 = -0.5.
    const uint8_t cv[9] = {0x38, 0x40, 0xB0, 0x40, 0x38, 0x38, 0xB0, 0x38, 0x40};
    std::memcpy(codes.get(), cv, 9);
    const float sv[4] = {1.0f, 10.0f, 100.0f, 1000.0f};
    std::memcpy(scales.get(), sv, sizeof sv);
    tdesc::tensor t(d, {codes.get(), scales.get()});
    std::vector<float> w = t.read<float>({{0, 0}, {3, 3}});
    const float want[9] = {1, 2, -5, 2, 1, 10, -50, 100, 2000};
    bool same = w.size() == 9;
    for (int k = 0; same && k < 9; ++k) same = w[k] == want[k];
    CHECK(same);
}

// GGML_BLOCKS: a BFLOAT16 [2, 64] tensor of ggml Q4_0 blocks ({f16 d; u8 qs[16]}: value j
// of a block is d * ((qs[j] & 15) - 8), value j + 16 is d * ((qs[j] >> 4) - 8)).
static void ggml_q4_0() {
    const uint32_t q4 = tdesc::ggml_type_number("Q4_0");
    CHECK(q4 == 2);
    tdesc_ggml_block_type info = tdesc::ggml_block_type(q4);
    CHECK(std::strcmp(info.name, "Q4_0") == 0 && info.block_elems == 32 && info.block_bytes == 18);
    CHECK(status_of([] { tdesc::ggml_type_number("F16"); }) == TDESC_ERR_NOT_FOUND);
    tdesc::descriptor d =
        tdesc::builder(TDESC_ELEMENT_BFLOAT16, {2, 64}, tdesc::node::ggml_blocks(q4)).build();
    CHECK(d.version_minor() == 1);
    CHECK(d.layout_name() == "GGML_BLOCKS");
    CHECK(d.ggml_type().number == 2 && std::strcmp(d.ggml_type().name, "Q4_0") == 0);
    CHECK(d.buffers().size() == 1 && d.buffers()[0].size_bytes == 4 * 18);
    host_buffer blocks(alloc64(4 * 18));
    uint8_t *p = static_cast<uint8_t *>(blocks.get());
    // Scales 0.5, 0.25, 2, 1 (binary16, exact in bfloat16 times a small integer).
    const uint16_t scale[4] = {0x3800, 0x3400, 0x4000, 0x3C00};
    const float sv[4] = {0.5f, 0.25f, 2.0f, 1.0f};
    std::vector<float> want(128);
    for (int b = 0; b < 4; ++b) {
        p[18 * b] = static_cast<uint8_t>(scale[b] & 0xFF);
        p[18 * b + 1] = static_cast<uint8_t>(scale[b] >> 8);
        for (int j = 0; j < 16; ++j) {
            uint8_t q = static_cast<uint8_t>((j * 7 + b * 3) & 0xFF);
            p[18 * b + 2 + j] = q;
            want[32 * b + j] = sv[b] * static_cast<float>((q & 15) - 8);
            want[32 * b + j + 16] = sv[b] * static_cast<float>((q >> 4) - 8);
        }
    }
    tdesc::tensor t(d, {blocks.get()});
    CHECK(t.read<float>({{0, 0}, {2, 64}}) == want);
    std::vector<float> part = t.read<float>({{0, 20}, {2, 40}});
    bool same = part.size() == 40;
    for (int r = 0; same && r < 2; ++r)
        for (int c = 0; c < 20; ++c) same = same && part[r * 20 + c] == want[r * 64 + 20 + c];
    CHECK(same);
    CHECK(t.get_f64({1, 63}) == static_cast<double>(want[127]));
    std::vector<uint16_t> bf = t.read_bits16({{1, 16}, {2, 18}}, TDESC_OUTPUT_BFLOAT16);
    std::vector<uint8_t> raw = t.read_raw({{1, 16}, {2, 18}});
    CHECK(bf.size() == 2 && raw.size() == 4);
    if (raw.size() == 4) {
        uint16_t r0 = static_cast<uint16_t>(raw[0] | (raw[1] << 8));
        CHECK(r0 == bf[0] && (static_cast<uint32_t>(r0) << 16) == [&] {
            uint32_t bits = 0;
            std::memcpy(&bits, &want[64 + 16], 4);
            return bits;
        }());
    }
    CHECK(status_of([&] { d.quantization(); }) == TDESC_ERR_NOT_FOUND);
    tdesc::descriptor dense = tdesc::builder(TDESC_ELEMENT_FLOAT32, {2}, tdesc::node::row_major()).build();
    CHECK(status_of([&] { dense.ggml_type(); }) == TDESC_ERR_INVALID_ARGUMENT);
}

// A FLOAT32 tensor whose right half stores FLOAT16 (format 1.1, exact in FLOAT32).
static void region_types() {
    tdesc::node sp = tdesc::node::subpaving();
    sp.add_region({0, 0}, {1, 2}, tdesc::node::row_major())
        .add_region({0, 2}, {1, 2}, tdesc::node::row_major().element_type(TDESC_ELEMENT_FLOAT16));
    tdesc::descriptor d = tdesc::builder(TDESC_ELEMENT_FLOAT32, {1, 4}, std::move(sp)).build();
    CHECK(d.stored_type(1) == std::make_pair(uint8_t(TDESC_ELEMENT_FLOAT16), true));
    CHECK(d.stored_type(0) == std::make_pair(uint8_t(TDESC_ELEMENT_FLOAT32), false));
    host_buffer a(alloc64(8)), b(alloc64(4));
    const float av[2] = {1.5f, -2.0f};
    const uint16_t bv[2] = {0x3800, 0xC400}; // 0.5, -4
    std::memcpy(a.get(), av, sizeof av);
    std::memcpy(b.get(), bv, sizeof bv);
    tdesc::tensor t(d, {a.get(), b.get()});
    std::vector<float> w = t.read<float>({{0, 0}, {1, 4}});
    CHECK(w.size() == 4 && w[0] == 1.5f && w[1] == -2.0f && w[2] == 0.5f && w[3] == -4.0f);
}

int main() {
    fp8_blockwise_2d();
    region_types();
    ggml_q4_0();
    // 4 x 6 FLOAT32: a row-major left part, a column-major right part, nested below.
    tdesc::node right = tdesc::node::subpaving();
    right.add_region({0, 0}, {2, 2}, tdesc::node::col_major())
        .add_region({2, 0}, {2, 2}, tdesc::node::splat());
    tdesc::node top = tdesc::node::subpaving();
    top.add_region({0, 0}, {4, 4}, tdesc::node::row_major())
        .add_region({0, 4}, {4, 2}, std::move(right));
    tdesc::descriptor d = tdesc::builder(TDESC_ELEMENT_FLOAT32, {4, 6}, std::move(top)).build();
    CHECK(d.buffers().size() == 3);
    host_buffer a(alloc64(16 * 4)), b(alloc64(4 * 4)), c(alloc64(4));
    float *av = static_cast<float *>(a.get());
    float *bv = static_cast<float *>(b.get());
    for (int k = 0; k < 16; ++k) av[k] = 0.5f * static_cast<float>(k);
    for (int k = 0; k < 4; ++k) bv[k] = -1.0f - static_cast<float>(k);
    *static_cast<float *>(c.get()) = 7.25f;
    tdesc::tensor t(d, {a.get(), b.get(), c.get()});

    tdesc::box whole{{0, 0}, {4, 6}};
    std::vector<float> w = t.read<float>(whole);
    CHECK(w.size() == 24);
    bool same = true;
    for (uint64_t i = 0; i < 4; ++i) {
        for (uint64_t j = 0; j < 6; ++j) {
            same = same && w[i * 6 + j] == static_cast<float>(t.get_f64({i, j}));
        }
    }
    CHECK(same);
    CHECK(w[0 * 6 + 4] == -1.0f && w[1 * 6 + 4] == -2.0f && w[0 * 6 + 5] == -3.0f);
    CHECK(w[3 * 6 + 5] == 7.25f);

    std::vector<double> part = t.read<double>({{1, 3}, {3, 6}});
    CHECK(part.size() == 6 && part[0] == w[1 * 6 + 3] && part[5] == w[2 * 6 + 5]);

    // Caller memory, column-major through byte strides.
    std::vector<float> col(24);
    const int64_t cm[2] = {4, 4 * 4};
    t.read<float>(whole, col.data(), col.size(), cm);
    same = true;
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 6; ++j) same = same && col[j * 4 + i] == w[i * 6 + j];
    CHECK(same);
#ifdef TDESC_HAS_STD_SPAN
    std::vector<float> sp(24);
    t.read(whole, std::span<float>(sp));
    CHECK(sp == w);
#endif
    std::vector<uint8_t> raw = t.read_raw({{0, 4}, {1, 6}});
    float first = 0;
    std::memcpy(&first, raw.data(), 4);
    CHECK(raw.size() == 8 && first == -1.0f);
    std::vector<uint16_t> bf = t.read_bits16({{3, 5}, {4, 6}}, TDESC_OUTPUT_BFLOAT16);
    CHECK(bf.size() == 1 && bf[0] == 0x40E8); // 7.25

    // Errors are exceptions with the status.
    CHECK(status_of([&] { t.read<float>({{0, 0}, {5, 6}}); }) == TDESC_ERR_INDEX_OUT_OF_BOUNDS);
    CHECK(status_of([&] { t.read<float>({{0}, {4, 6}}); }) == TDESC_ERR_INVALID_ARGUMENT);
    std::vector<float> small(3);
    CHECK(status_of([&] { t.read<float>(whole, small.data(), small.size()); }) ==
          TDESC_ERR_OUTPUT_TOO_SMALL);

    // Regions meeting a box, in depth-first order with their parts of it.
    std::vector<tdesc::region_hit> hits = d.regions_in_box({{1, 3}, {4, 6}});
    CHECK(hits.size() == 3);
    CHECK(hits.size() == 3 && hits[0].region == 0 && hits[1].region == 2 && hits[2].region == 3);
    CHECK(hits.size() == 3 && hits[1].lo == (std::vector<uint64_t>{1, 4}) &&
          hits[1].hi == (std::vector<uint64_t>{2, 6}) && hits[2].layout_tag == TDESC_LAYOUT_SPLAT);

    // Batches.
    std::vector<uint64_t> idx = {0, 0, 3, 5, 1, 4, 2, 3};
    std::vector<tdesc_compact_location> locs = d.locate_many(idx);
    CHECK(locs.size() == 4 && locs[0].kind == TDESC_COMPACT_DENSE && locs[1].region == 3 &&
          locs[2].buffer == 1);
    std::vector<double> vals = t.get_many<double>(idx, 2);
    CHECK(vals.size() == 4 && vals[1] == 7.25 && vals[2] == -2.0 && vals[3] == 3.5 + 2.0);
    printf("data_plane_cpp: %d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
