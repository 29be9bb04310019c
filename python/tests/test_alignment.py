"""Buffers aligned below 64 bytes (format 1.1): a numpy view at an odd byte offset built
with ``alignment=1`` is read where it lies, a 1.1 descriptor; written to a file it is a
1.0 one; DLPack export needs element alignment."""

import numpy as np
import pytest
import scipy.sparse as sp

import tensordesc as td


def odd_view(values, offset=1):
    """``values`` (float32) copied into a bytearray at byte ``offset``: a writable view
    whose address is aligned to nothing more than ``offset`` allows."""
    values = np.asarray(values, np.float32)
    buf = bytearray(offset + values.nbytes + 64)
    a = np.frombuffer(buf, dtype=np.float32, count=values.size, offset=offset)
    a = a.reshape(values.shape)
    a[...] = values
    return a


def test_dense_view_at_an_odd_offset_is_read_in_place(tmp_path):
    want = np.arange(12, dtype=np.float32).reshape(3, 4) * 0.5 - 2.0
    a = odd_view(want, offset=1)
    assert a.__array_interface__["data"][0] % 2 == 1
    assert not a.flags.aligned

    t = td.dense(a, alignment=1)
    (b,) = t.buffers
    assert b["alignment"] == 1
    assert b["address"] == a.__array_interface__["data"][0]  # no copy
    assert t.descriptor_bytes()[5] == 1  # version_minor 1: format 1.1
    t.validate()
    assert t.get((2, 3)) == want[2, 3]
    np.testing.assert_array_equal(t.read(), want)
    np.testing.assert_array_equal(t.read(dtype="float64"), want.astype(np.float64))
    np.testing.assert_array_equal(t[1:3, 1:], want[1:3, 1:])
    np.testing.assert_array_equal(t.numpy(), want)

    # The same memory under the default 64-byte promise still reads (through an aligned
    # copy) and stays a 1.0 descriptor.
    t64 = td.dense(a)
    assert t64.buffers[0]["alignment"] == 64
    assert t64.descriptor_bytes()[5] == 0
    np.testing.assert_array_equal(t64.read(), want)

    # Written to a file, the tensor is a 1.0 descriptor: the file places the buffer at its
    # own alignment and says 64; the bytes equal those written from the aligned tensor.
    assert td.to_bytes({"a": t}) == td.to_bytes({"a": t64})
    path = tmp_path / "a.tdf"
    td.write(path, {"a": t})
    f = td.open(path)
    assert f["a"].descriptor_bytes()[5] == 0
    assert f["a"].buffers[0]["alignment"] == 64
    np.testing.assert_array_equal(f["a"].read(), want)
    stream = td.write_stream(None, {"a": t})
    s = td.read_stream(stream)
    assert s["a"].descriptor_bytes()[5] == 0
    np.testing.assert_array_equal(s["a"].read(), want)


@pytest.mark.parametrize("offset, alignment", [(1, 1), (2, 2), (4, 4), (8, 8), (16, 16)])
def test_every_builder_takes_alignment(offset, alignment):
    want = np.arange(1, 13, dtype=np.float32).reshape(3, 4)
    a = odd_view(want, offset=offset)
    t = td.dense(a, alignment=alignment)
    assert [b["alignment"] for b in t.buffers] == [alignment]
    assert t.descriptor_bytes()[5] == 1
    np.testing.assert_array_equal(t.read(), want)

    s = td.splat(np.float32(2.5), (3, 4), alignment=alignment)
    assert s.buffers[0]["alignment"] == alignment
    np.testing.assert_array_equal(s.read(), np.full((3, 4), 2.5, np.float32))

    tl = td.tiled(want, (2, 3), alignment=alignment)
    assert tl.buffers[0]["alignment"] == alignment
    np.testing.assert_array_equal(tl.read(), want)

    m = sp.csr_array(np.where(want > 6, want, 0))
    c = td.from_scipy(m, alignment=alignment)
    assert [b["alignment"] for b in c.buffers] == [alignment] * 3
    np.testing.assert_array_equal(c.read(), m.toarray())
    c.validate()

    pages = np.arange(2 * 2 * 3, dtype=np.float32).reshape(2, 2, 3)
    p = td.block_paged([pages], [[0], [1]], [2, 1], (2, 2, 3), 2, alignment=alignment)
    assert [b["alignment"] for b in p.buffers] == [alignment] * 3
    p.validate()


def test_quantized_parameters_at_odd_addresses():
    codes = odd_view(np.zeros(8)).view(np.uint8)[:8]  # 8 bytes at an odd address
    codes[...] = np.arange(8, dtype=np.uint8)
    scales = odd_view(np.array([0.5, 2.0], np.float32), offset=3)
    q = td.PerAxisAffine(axis=0, scales=scales)
    t = td.dense(codes.reshape(2, 4), quantization=q, alignment=1)
    assert [b["alignment"] for b in t.buffers] == [1, 1]
    t.validate()
    np.testing.assert_array_equal(
        t.read(), np.array([[0, 0.5, 1, 1.5], [8, 10, 12, 14]], np.float32)
    )


def test_alignment_argument_errors():
    a = np.zeros(4, np.float32)
    for bad in (0, 3, 48, 2**31):
        with pytest.raises(td.InvalidArgument, match="power of two from 1 to 2\\*\\*30"):
            td.dense(a, alignment=bad)
    with pytest.raises(td.InvalidArgument, match="alignment"):
        td.dense(a, alignment=-1)
    with pytest.raises(td.InvalidArgument, match="alignment"):
        td.dense(a, alignment=2**70)


def test_dlpack_export_needs_element_alignment(exports_settled):
    want = np.arange(6, dtype=np.float32)
    odd = td.dense(odd_view(want, offset=1), alignment=1)
    with pytest.raises(td.NotBindable, match="not aligned to the 4 bytes.*copy=True"):
        odd.__dlpack__(max_version=(1, 1))
    # A copy is aligned.
    np.testing.assert_array_equal(np.from_dlpack(odd, copy=True), want)
    # Element-aligned memory exports in place, whatever the handle declares.
    four = td.dense(odd_view(want, offset=4), alignment=4)
    got = np.from_dlpack(four)
    np.testing.assert_array_equal(got, want)
    assert got.__array_interface__["data"][0] == four.buffers[0]["address"]


def test_from_dlpack_declares_the_true_alignment(exports_settled):
    want = np.arange(12, dtype=np.float32)
    for offset in (4, 8, 16, 32):
        a = odd_view(want, offset=offset)
        t = td.from_dlpack(a)
        address = a.__array_interface__["data"][0]
        expect = address & -address  # the largest power of two dividing it
        assert t.buffers[0]["alignment"] == min(expect, 2**30)
        assert t.buffers[0]["address"] == address
        assert t.descriptor_bytes()[5] == (1 if expect < 64 else 0)
        np.testing.assert_array_equal(t.read(), want)
