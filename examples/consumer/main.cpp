// Builds a mixed subpaving with the C++ layer, round-trips it through bytes, binds host
// buffers and prints what it finds (checked by c_tests/run_cmake_consumer.sh).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <tensordesc.hpp>

int main() {
    if (tdesc_abi_version() != TDESC_ABI_VERSION) {
        std::fprintf(stderr, "ABI mismatch: header %d, library %u\n", TDESC_ABI_VERSION,
                     tdesc_abi_version());
        return 1;
    }
    try {
        // A 4 x 8 FLOAT32 tensor: a dense left half and a CSR right half.
        tdesc::node top = tdesc::node::subpaving();
        top.add_region({0, 0}, {4, 4}, tdesc::node::row_major())
            .add_region({0, 4}, {4, 4}, tdesc::node::csr(1, TDESC_SPARSE_SORTED | TDESC_SPARSE_UNIQUE));
        std::vector<uint8_t> bytes =
            tdesc::builder(TDESC_ELEMENT_FLOAT32, {4, 8}, std::move(top)).encode();
        tdesc::descriptor d = tdesc::descriptor::decode(bytes);
        std::printf("bytes=%zu regions=%zu buffers=%zu\n", bytes.size(), d.regions().size(),
                    d.buffers().size());
        for (const tdesc_buffer &b : d.buffers()) {
            std::printf("buffer region=%u role=%s size=%llu\n", b.region,
                        tdesc_buffer_role_name(b.role), (unsigned long long)b.size_bytes);
        }

        // Host buffers: dense values 0..15, one CSR entry (2, 3) = 7.5.
        std::vector<void *> owned;
        std::vector<const void *> ptrs;
        for (const tdesc_buffer &b : d.buffers()) {
            void *p = std::aligned_alloc(64, (b.size_bytes + 63) / 64 * 64);
            std::memset(p, 0, (b.size_bytes + 63) / 64 * 64);
            owned.push_back(p);
            ptrs.push_back(p);
        }
        float *dense = static_cast<float *>(owned[0]);
        for (int i = 0; i < 16; ++i) {
            dense[i] = static_cast<float>(i);
        }
        uint64_t indptr[5] = {0, 0, 0, 1, 1}, indices[1] = {3};
        float values[1] = {7.5f};
        std::memcpy(owned[1], indptr, sizeof indptr);
        std::memcpy(owned[2], indices, sizeof indices);
        std::memcpy(owned[3], values, sizeof values);
        {
            tdesc::tensor t(d, ptrs);
            t.validate();
            std::printf("value(1,2)=%g value(2,7)=%g value(0,5)=%g\n", t.get_f64({1, 2}),
                        t.get_f64({2, 7}), t.get_f64({0, 5}));
        }
        for (void *p : owned) {
            std::free(p);
        }
        tdesc::location loc = d.locate({3, 6});
        if (auto *l = std::get_if<tdesc::lookup_location>(&loc)) {
            std::printf("locate(3,6)=LOOKUP region=%u tag=%s\n", l->region,
                        tdesc_layout_name(l->layout_tag));
        }
        try {
            d.locate({4, 0});
        } catch (const tdesc::error &e) {
            std::printf("error=%s\n", e.name());
        }
    } catch (const tdesc::error &e) {
        std::fprintf(stderr, "tensordesc error: %s\n", e.what());
        return 1;
    }
    return 0;
}
