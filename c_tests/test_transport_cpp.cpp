// The transports from the C++17 layer: tdesc::file_writer / tdesc::file (to a path and in
// memory), tdesc::stream_writer / tdesc::stream_reader, tensors bound into a file outliving
// it, and errors surfacing as tdesc::error with their status.
//
// usage: test_transport_cpp SCRATCH_DIR   (written by capi/lib/tests/c_abi/c_api.rs)
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "check.hpp"

// 6 x 6 FLOAT64: a dense left half and a CSR right half with (1, 4) = 2.5, (5, 3) = -1.
struct sample {
    tdesc::descriptor d;
    std::vector<double> dense;
    std::vector<uint64_t> indptr, indices;
    std::vector<double> values;
    std::vector<const void *> buffers() const {
        return {dense.data(), indptr.data(), indices.data(), values.data()};
    }
};

static sample make_sample() {
    tdesc::node top = tdesc::node::subpaving();
    top.add_region({0, 0}, {6, 3}, tdesc::node::row_major())
        .add_region({0, 3}, {6, 3}, tdesc::node::csr(2, TDESC_SPARSE_SORTED | TDESC_SPARSE_UNIQUE));
    sample s{tdesc::builder(TDESC_ELEMENT_FLOAT64, {6, 6}, std::move(top)).build(), {}, {}, {}, {}};
    for (int i = 0; i < 18; ++i) {
        s.dense.push_back(0.5 * i);
    }
    s.indptr = {0, 0, 1, 1, 1, 1, 2};
    s.indices = {1, 0};
    s.values = {2.5, -1.0};
    return s;
}

static double expected(uint64_t r, uint64_t c) {
    if (c < 3) {
        return 0.5 * static_cast<double>(r * 3 + c);
    }
    return r == 1 && c == 4 ? 2.5 : r == 5 && c == 3 ? -1.0 : 0.0;
}

static bool values_ok(const tdesc::tensor &t) {
    bool ok = true;
    for (uint64_t r = 0; r < 6; ++r) {
        for (uint64_t c = 0; c < 6; ++c) {
            ok = ok && t.get_f64({r, c}) == expected(r, c);
        }
    }
    return ok;
}

/* Eight bytes of a .tdf header: too short for the file header. */
static std::vector<uint8_t> cut_header() {
    return {0x89, 0x54, 0x44, 0x46, 0x0D, 0x0A, 0x1A, 0x0A};
}

static void test_files(const std::string &dir) {
    const sample s = make_sample();
    const std::string path = dir + "/cpp.tdf";
    {
        tdesc::file_writer w(path);
        w.add("a", s.d, s.buffers()).add("b", s.d, s.buffers());
        CHECK(status_of([&] { w.add("a", s.d, s.buffers()); }) == TDESC_ERR_DUPLICATE_NAME);
        CHECK(status_of([&] { w.add("c", s.d, {}); }) == TDESC_ERR_BINDING_MISMATCH);
        w.finish();
        CHECK(status_of([&] { w.finish(); }) == TDESC_ERR_INVALID_ARGUMENT);
    }
    tdesc::file_writer mw = tdesc::file_writer::memory();
    mw.add("a", s.d, s.buffers()).add("b", s.d, s.buffers());
    mw.finish();
    const std::vector<uint8_t> bytes = mw.bytes();

    std::unique_ptr<tdesc::tensor> kept;
    {
        tdesc::file f = tdesc::file::open(path);
        CHECK(f.size() == 2 && f.data_alignment() == 64);
        CHECK(f.name(1) == "b" && f.find("b") == std::optional<size_t>(1) && !f.find("z"));
        CHECK(status_of([&] { f.index("z"); }) == TDESC_ERR_NOT_FOUND);
        CHECK(status_of([&] { f.bind(2); }) == TDESC_ERR_INDEX_OUT_OF_BOUNDS);
        CHECK(f.tensor_descriptor(0).encode() == s.d.encode());
        CHECK(!f.is_opaque(0) && f.problem(0).first == TDESC_OK && f.problem(0).second.empty());
        kept = std::make_unique<tdesc::tensor>(f.bind("b"));
        kept->validate();
    }
    CHECK(values_ok(*kept)); // the mapping outlives the file object
    kept.reset();

    tdesc::file m = tdesc::file::from_bytes(bytes);
    CHECK(m.size() == 2 && values_ok(m.bind(0)));
    // The C functions the wrappers used to lack: buffers, bytes and tensor flags.
    {
        const auto desc = m.descriptor_bytes(0);
        CHECK(std::vector<uint8_t>(desc.first, desc.first + desc.second) == s.d.encode());
        const auto b0 = m.buffer(0, 0);
        const auto region = m.data(0);
        CHECK(b0.second == 18 * 8 && region.second >= b0.second);
        CHECK(b0.first >= region.first && b0.first + b0.second <= region.first + region.second);
        CHECK(std::memcmp(b0.first, s.buffers()[0], b0.second) == 0);
        CHECK(status_of([&] { m.buffer(0, 9); }) == TDESC_ERR_INDEX_OUT_OF_BOUNDS);
        tdesc::tensor t = m.bind(1);
        CHECK(t.is_read_only() && t.is_host_readable());
        CHECK(t.descriptor().encode() == s.d.encode());
        CHECK(!s.d.shard() && !s.d.statistics() && !s.d.extension_type());
        CHECK(status_of([&] { tdesc::file::from_bytes(cut_header()); }) == TDESC_ERR_TRUNCATED);
        std::vector<uint8_t> bad = s.d.encode();
        bad[19] = 1; // the header's reserved byte
        CHECK(status_of([&] { tdesc::descriptor::decode(bad.data(), bad.size()); }) ==
              TDESC_ERR_RESERVED_NONZERO);
        CHECK(tdesc::last_error_offset() == std::optional<uint64_t>(19));
    }
    CHECK(m.version() == 2);
    m.check_padding();

    // The directory first, then the data: the same bytes.
    tdesc::file_writer dw = tdesc::file_writer::memory();
    dw.declare("a", s.d).declare("b", s.d);
    CHECK(status_of([&] { dw.add("c", s.d, s.buffers()); }) == TDESC_ERR_INVALID_ARGUMENT);
    dw.write_tensor(s.buffers()).write_directory();
    CHECK(status_of([&] { dw.declare("c", s.d); }) == TDESC_ERR_INVALID_ARGUMENT);
    CHECK(status_of([&] { dw.finish(); }) == TDESC_ERR_BINDING_MISMATCH);
    tdesc::file_writer dw2 = tdesc::file_writer::memory();
    dw2.declare("a", s.d).declare("b", s.d);
    dw2.write_tensor(s.buffers()).write_tensor(s.buffers());
    dw2.finish();
    CHECK(dw2.bytes() == bytes);
    std::vector<uint8_t> cut(bytes.begin(), bytes.end() - 1);
    CHECK(status_of([&] { tdesc::file::from_bytes(cut); }) == TDESC_ERR_TRUNCATED);
    CHECK(status_of([&] { tdesc::file::open(dir + "/missing/x.tdf"); }) == TDESC_ERR_IO);
    CHECK(status_of([&] { tdesc::file_writer::memory(48); }) == TDESC_ERR_ALIGNMENT_INVALID);
}

static void test_streams(const std::string &dir) {
    const sample s = make_sample();
    tdesc::stream_writer w = tdesc::stream_writer::memory();
    w.add("x", s.d, s.buffers());
    w.begin("y", s.d);
    const auto b = s.buffers();
    const size_t sizes[4] = {18 * 8, 7 * 8, 2 * 8, 2 * 8};
    for (size_t k = 0; k < 4; ++k) {
        const auto *p = static_cast<const uint8_t *>(b[k]);
        w.data(k, p, 8).data(k, p + 8, sizes[k] - 8);
    }
    CHECK(status_of([&] { w.data(0, b[0], 8); }) == TDESC_ERR_STREAM_ORDER);
    w.finish();
    const std::vector<uint8_t> bytes = w.bytes();
    {
        tdesc::stream_writer pw(dir + "/cpp.tds");
        pw.add("x", s.d, s.buffers());
    } // unfinished: no STREAM_END

    // The same stream through a write callback: every call's bytes are out when it returns.
    std::vector<uint8_t> sent;
    const tdesc_stream_write_fn append = [](void *user, const void *p, size_t n) -> int {
        auto *v = static_cast<std::vector<uint8_t> *>(user);
        const auto *c = static_cast<const uint8_t *>(p);
        v->insert(v->end(), c, c + n);
        return 0;
    };
    {
        tdesc::stream_writer cw = tdesc::stream_writer::from_callback(append, &sent);
        CHECK(sent.size() == 24);
        cw.add("x", s.d, s.buffers());
        const size_t after_x = sent.size();
        CHECK(after_x > 24 && std::equal(sent.begin(), sent.end(), bytes.begin()));
        cw.begin("y", s.d);
        for (size_t k = 0; k < 4; ++k) {
            const auto *p = static_cast<const uint8_t *>(b[k]);
            cw.data(k, p, 8).data(k, p + 8, sizes[k] - 8);
        }
        cw.finish();
        CHECK(sent == bytes);
        CHECK(status_of([&] { cw.bytes(); }) == TDESC_ERR_INVALID_ARGUMENT);
    }
    const tdesc_stream_write_fn refuse = [](void *, const void *, size_t) -> int { return 5; };
    CHECK(status_of([&] { tdesc::stream_writer::from_callback(refuse, nullptr); }) ==
          TDESC_ERR_IO);
    CHECK(status_of([&] { tdesc::stream_writer::from_callback(nullptr, nullptr); }) ==
          TDESC_ERR_INVALID_ARGUMENT);
    CHECK(status_of([&] { tdesc::stream_writer::from_fd(-1); }) == TDESC_ERR_INVALID_ARGUMENT);

    // Byte by byte: reassemble both tensors and bind them to the event's descriptor.
    tdesc::stream_reader r;
    std::vector<std::vector<uint8_t>> bufs;
    std::vector<std::string> names;
    size_t ends = 0;
    bool ok = true;
    for (uint8_t byte : bytes) {
        r.feed(&byte, 1);
        tdesc_stream_event ev;
        while (r.poll(ev)) {
            if (ev.kind == TDESC_STREAM_EVENT_DESCRIPTOR) {
                names.emplace_back(ev.name, ev.name_len);
                bufs.assign(4, {});
                for (size_t k = 0; k < 4; ++k) {
                    bufs[k].resize(sizes[k]);
                }
            } else if (ev.kind == TDESC_STREAM_EVENT_DATA) {
                ok = ok && ev.buffer_index < 4 && ev.offset + ev.data_len <= sizes[ev.buffer_index];
                if (ok) {
                    std::memcpy(bufs[ev.buffer_index].data() + ev.offset, ev.data, ev.data_len);
                }
            } else if (ev.kind == TDESC_STREAM_EVENT_TENSOR_COMPLETE) {
                // The builder's buffers ask for 64-byte alignment: copy into aligned storage.
                std::vector<const void *> ptrs;
                for (auto &v : bufs) {
                    void *p = std::aligned_alloc(64, (v.size() + 63) / 64 * 64);
                    std::memcpy(p, v.data(), v.size());
                    ptrs.push_back(p);
                }
                tdesc_tensor *t = nullptr;
                ok = ok && tdesc_tensor_bind(ev.descriptor, ptrs.data(), ptrs.size(), &t) ==
                               TDESC_OK;
                if (t) {
                    ok = ok && values_ok(tdesc::tensor(t));
                }
                for (const void *p : ptrs) {
                    std::free(const_cast<void *>(p));
                }
            } else if (ev.kind == TDESC_STREAM_EVENT_STREAM_END) {
                ++ends;
            }
        }
    }
    r.finish();
    CHECK(ok && ends == 1 && names == std::vector<std::string>({"x", "y"}));
    CHECK(r.position() == bytes.size());

    tdesc::stream_reader early;
    early.feed(bytes.data(), bytes.size() - 1);
    tdesc_stream_event ev;
    while (early.poll(ev)) {
    }
    CHECK(status_of([&] { early.finish(); }) == TDESC_ERR_TRUNCATED);

    std::vector<uint8_t> bad = bytes;
    bad[24] = 3; // DATA where the first DESCRIPTOR belongs
    tdesc::stream_reader strict;
    strict.feed(bad);
    CHECK(status_of([&] {
              while (strict.poll(ev)) {
              }
          }) == TDESC_ERR_STREAM_ORDER);
    CHECK(status_of([&] { tdesc::stream_reader bad_mode(9); }) == TDESC_ERR_INVALID_ARGUMENT);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s SCRATCH_DIR\n", argv[0]);
        return 2;
    }
    try {
        test_files(argv[1]);
        test_streams(argv[1]);
    } catch (const tdesc::error &e) {
        std::fprintf(stderr, "unexpected tdesc::error %s: %s\n", e.name(), e.detail().c_str());
        return 1;
    }
    std::printf("transport_cpp: %d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
