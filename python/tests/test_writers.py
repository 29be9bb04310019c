"""Writing to Python file objects, devices and FIFOs: what a file object's write() may
return, errors from the file object, and paths that are not regular files."""

import errno
import io
import os
import socket
import stat
import threading
import time

import numpy as np
import pytest

import tensordesc as td

SMALL = {"a": np.arange(40, dtype=np.int32), "b": np.linspace(0, 1, 7)}


def stream_bytes(tensors):
    return td.write_stream(None, tensors)


def assert_same_tensors(got, tensors):
    assert list(got) == list(tensors)
    for name, a in tensors.items():
        assert np.array_equal(got[name].numpy(), a)


class Recorder:
    """A file object whose write() answers with `answer(buffer, call_number)`; keeps
    the bytes it says it accepted."""

    def __init__(self, answer):
        self.answer = answer
        self.calls = 0
        self.accepted = bytearray()

    def write(self, b):
        b = bytes(b)
        r = self.answer(b, self.calls)
        self.calls += 1
        if isinstance(r, int) and 0 <= r <= len(b):
            self.accepted += b[:r]
        return r


# ---------------------------------------------------------------------------------------
# Counts out of range: an error, never a panic
# ---------------------------------------------------------------------------------------


def test_write_returning_more_than_it_was_given_is_an_error():
    seen = []

    def too_much(b, _):
        seen.append(len(b))
        return len(b) + 100

    with pytest.raises(td.Io) as e:
        td.write_stream(Recorder(too_much), SMALL)
    msg = str(e.value)
    assert str(seen[0] + 100) in msg and str(seen[0]) in msg
    assert "write()" in msg


@pytest.mark.parametrize("bad", [-1, -(2**70), 2**70])
def test_write_returning_an_impossible_count_is_an_error(bad):
    with pytest.raises(td.Io, match=str(bad)):
        td.write_stream(Recorder(lambda b, _: bad), SMALL)


def test_write_returning_something_else_than_a_count_is_an_error():
    with pytest.raises(td.Io, match="str"):
        td.write_stream(Recorder(lambda b, _: "all of it"), SMALL)


# ---------------------------------------------------------------------------------------
# None (would block), 0 (no progress), short writes
# ---------------------------------------------------------------------------------------


def test_write_returning_none_is_would_block_not_success():
    f = Recorder(lambda b, _: None)
    with pytest.raises(BlockingIOError) as e:
        td.write_stream(f, SMALL)
    assert e.value.errno == errno.EAGAIN
    assert e.value.characters_written == 0
    assert "None" in str(e.value) and "would block" in str(e.value)


def test_none_after_some_bytes_reports_what_was_delivered():
    # Accept 5 bytes per call three times, then would block.
    f = Recorder(lambda b, k: min(5, len(b)) if k < 3 else None)
    with pytest.raises(BlockingIOError) as e:
        td.write_stream(f, SMALL)
    assert e.value.characters_written == 15 == len(f.accepted)
    assert "15 bytes" in str(e.value)
    assert bytes(f.accepted) == stream_bytes(SMALL)[:15]


def test_write_returning_zero_forever_ends_in_an_error():
    f = Recorder(lambda b, _: 0)
    with pytest.raises(td.Io, match="returned 0"):
        td.write_stream(f, SMALL)
    assert 1 < f.calls <= 100


def test_zero_now_and_then_is_retried():
    f = Recorder(lambda b, k: 0 if k % 3 == 0 else len(b))
    td.write_stream(f, SMALL)
    assert bytes(f.accepted) == stream_bytes(SMALL)


def test_one_byte_writes_produce_the_whole_stream():
    f = Recorder(lambda b, _: 1)
    assert td.write_stream(f, SMALL) is None
    assert f.calls == len(f.accepted) == len(stream_bytes(SMALL))
    assert_same_tensors(td.read_stream(bytes(f.accepted)), SMALL)


def test_random_short_writes_produce_the_whole_stream():
    rng = np.random.default_rng(5)
    tensors = {"x": rng.random((300, 70)), "y": np.arange(100_000, dtype=np.int16)}
    f = Recorder(lambda b, _: int(rng.integers(1, len(b) + 1)))
    td.write_stream(f, tensors)
    assert bytes(f.accepted) == stream_bytes(tensors)
    assert_same_tensors(td.read_stream(bytes(f.accepted)), tensors)


def test_ordinary_file_objects_still_work(tmp_path):
    buf = io.BytesIO()
    td.write_stream(buf, SMALL)
    assert buf.getvalue() == stream_bytes(SMALL)
    with open(tmp_path / "s.tdfs", "wb") as f:  # BufferedWriter
        td.write_stream(f, SMALL)
    with open(tmp_path / "r.tdfs", "wb", buffering=0) as f:  # raw FileIO
        td.write_stream(f, SMALL)
    for p in ("s.tdfs", "r.tdfs"):
        assert (tmp_path / p).read_bytes() == stream_bytes(SMALL)


# ---------------------------------------------------------------------------------------
# Exceptions from the file object
# ---------------------------------------------------------------------------------------


def test_an_exception_from_write_propagates_as_itself():
    boom = ConnectionResetError(errno.ECONNRESET, "peer went away")

    class Boom:
        def __init__(self):
            self.calls = 0

        def write(self, b):
            self.calls += 1
            if self.calls == 2:
                raise boom
            return len(b)

    with pytest.raises(ConnectionResetError) as e:
        td.write_stream(Boom(), {"big": np.zeros(100_000, np.float64)})
    assert e.value is boom


def test_an_exception_from_flush_propagates_as_itself():
    class BadFlush(io.BytesIO):
        def flush(self):
            raise PermissionError("flush refused")

    with pytest.raises(PermissionError, match="flush refused"):
        td.write_stream(BadFlush(), SMALL)


# ---------------------------------------------------------------------------------------
# A real non-blocking socket
# ---------------------------------------------------------------------------------------


def big_tensors():
    rng = np.random.default_rng(1)
    return {"w": rng.integers(0, 2**31, 4 * 1024 * 1024, dtype=np.int32)}  # 16 MiB


def drain(sock):
    """Everything readable on `sock` until EOF."""
    out = bytearray()
    while True:
        chunk = sock.recv(1 << 20)
        if not chunk:
            return bytes(out)
        out += chunk


def test_nonblocking_socket_whose_peer_does_not_read_raises():
    tensors = big_tensors()
    expected = stream_bytes(tensors)
    a, b = socket.socketpair()
    with a, b:
        a.setblocking(False)
        f = a.makefile("wb", buffering=0)
        with pytest.raises(BlockingIOError) as e:
            td.write_stream(f, tensors)
        sent = e.value.characters_written
        assert 0 < sent < len(expected)
        assert f"{sent} bytes" in str(e.value)
        f.close()
        a.shutdown(socket.SHUT_WR)
        got = drain(b)
    # The peer has exactly the bytes write_stream says were delivered.
    assert got == expected[:sent]


def test_nonblocking_socket_with_a_reader_never_drops_bytes():
    tensors = big_tensors()
    expected = stream_bytes(tensors)
    a, b = socket.socketpair()
    received = []
    with a, b:
        reader = threading.Thread(target=lambda: received.append(drain(b)))
        reader.start()
        a.setblocking(False)
        f = a.makefile("wb", buffering=0)
        try:
            td.write_stream(f, tensors)
            delivered = len(expected)
        except BlockingIOError as e:
            delivered = e.characters_written
        f.close()
        a.shutdown(socket.SHUT_WR)
        reader.join(60)
        assert not reader.is_alive()
    # Either the whole stream arrived, or exactly the part reported as delivered.
    assert received[0] == expected[:delivered]
    if delivered == len(expected):
        assert_same_tensors(td.read_stream(received[0]), tensors)


def test_blocking_socket_delivers_the_whole_stream():
    tensors = big_tensors()
    a, b = socket.socketpair()
    received = []
    with a, b:
        reader = threading.Thread(target=lambda: received.append(drain(b)))
        reader.start()
        with a.makefile("wb", buffering=0) as f:
            td.write_stream(f, tensors)
        a.shutdown(socket.SHUT_WR)
        reader.join(60)
    assert received[0] == stream_bytes(tensors)


# ---------------------------------------------------------------------------------------
# Paths that are not regular files: written in place
# ---------------------------------------------------------------------------------------


def device_node(tmp_path, name, minor):
    """A character device node of the memory driver (1, minor: 3 null, 7 full) in
    tmp_path — a private copy of /dev/null or /dev/full, so that a writer that replaced
    devices would not replace the machine's own."""
    p = tmp_path / name
    try:
        os.mknod(p, stat.S_IFCHR | 0o666, os.makedev(1, minor))
        os.close(os.open(p, os.O_WRONLY))  # not on a nodev mount
    except OSError as e:
        pytest.skip(f"cannot make and open a device node here: {e}")
    return p


@pytest.mark.parametrize("how", ["write", "write_stream"])
def test_writing_to_a_null_device_keeps_the_device(tmp_path, how):
    p = device_node(tmp_path, "null", 3)
    rdev = os.stat(p).st_rdev
    getattr(td, how)(p, SMALL)
    st = os.stat(p)
    assert stat.S_ISCHR(st.st_mode) and st.st_rdev == rdev
    assert sorted(os.listdir(tmp_path)) == ["null"]  # no temporary file left


@pytest.mark.parametrize("how", ["write", "write_stream"])
def test_writing_to_a_full_device_is_an_error(tmp_path, how):
    p = device_node(tmp_path, "full", 7)
    with pytest.raises(td.Io):
        getattr(td, how)(p, SMALL)
    assert stat.S_ISCHR(os.stat(p).st_mode)


class FifoReader:
    """Reads a FIFO until the writer is done and has closed it (never blocks forever:
    the read end is non-blocking, and a writer that replaced the FIFO leaves it empty)."""

    def __init__(self, path):
        self.fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        self.done = threading.Event()
        self.data = bytearray()
        self.thread = threading.Thread(target=self.run)
        self.thread.start()

    def run(self):
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            # Asked before the read: an end of input read after the writer is done is
            # the end (one read before it may be the end before the writer opened).
            writer_done = self.done.is_set()
            try:
                chunk = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                chunk = None
            if chunk:
                self.data += chunk
            elif chunk == b"" and writer_done:
                break
            else:
                time.sleep(0.001)

    def finish(self):
        self.done.set()
        self.thread.join(60)
        os.close(self.fd)
        return bytes(self.data)


@pytest.mark.parametrize("how", ["write", "write_stream"])
def test_writing_to_a_fifo_writes_into_it(tmp_path, how):
    p = tmp_path / "pipe"
    os.mkfifo(p)
    tensors = {"x": np.arange(50_000, dtype=np.float64), "y": np.eye(3, dtype=np.int8)}
    r = FifoReader(p)
    try:
        getattr(td, how)(p, tensors)
    finally:
        got = r.finish()
    assert stat.S_ISFIFO(os.stat(p).st_mode)
    if how == "write":
        assert got == td.to_bytes(tensors)
    else:
        assert got == stream_bytes(tensors)
        assert_same_tensors(td.read_stream(got), tensors)


def test_symlink_to_a_fifo_writes_into_the_fifo(tmp_path):
    p = tmp_path / "pipe"
    os.mkfifo(p)
    link = tmp_path / "link"
    link.symlink_to(p)
    r = FifoReader(p)
    try:
        td.write_stream(link, SMALL)
    finally:
        got = r.finish()
    assert link.is_symlink() and stat.S_ISFIFO(os.stat(p).st_mode)
    assert got == stream_bytes(SMALL)


@pytest.mark.parametrize("how", ["write", "write_stream"])
def test_symlink_to_a_regular_file_is_replaced_target_kept(tmp_path, how):
    target = tmp_path / "target.tdf"
    target.write_bytes(b"old contents")
    link = tmp_path / "link.tdf"
    link.symlink_to(target)
    getattr(td, how)(link, SMALL)
    # The link itself is replaced by the new file (as the command-line tool does); the
    # file it pointed to is untouched.
    assert not link.is_symlink() and link.is_file()
    assert target.read_bytes() == b"old contents"
    expected = td.to_bytes(SMALL) if how == "write" else stream_bytes(SMALL)
    assert link.read_bytes() == expected


@pytest.mark.parametrize("how", ["write", "write_stream"])
def test_a_directory_is_refused_by_name(tmp_path, how):
    d = tmp_path / "dir"
    d.mkdir()
    with pytest.raises(td.Io, match="is a directory"):
        getattr(td, how)(d, SMALL)
    assert d.is_dir() and not list(d.iterdir())
    assert sorted(os.listdir(tmp_path)) == ["dir"]


def test_regular_files_are_still_replaced_atomically(tmp_path):
    p = tmp_path / "r.tdfs"
    td.write_stream(p, {"a": np.arange(1000, dtype=np.int64)})
    ino = os.stat(p).st_ino
    td.write_stream(p, SMALL)
    assert os.stat(p).st_ino != ino  # a new file renamed into place
    assert p.read_bytes() == stream_bytes(SMALL)
    assert sorted(os.listdir(tmp_path)) == ["r.tdfs"]


def test_metadata_written_and_read_back(tmp_path):
    meta = {
        "general.name": "tiny",
        "ok": True,
        "delta": -3,
        "count": 2**64 - 1,
        "scale": 0.5,
        "tokens": ["<s>", "hé", [1, 2, (3, False)]],
        "empty": [],
    }
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    p = tmp_path / "m.tdf"
    td.write(p, {"a": a}, metadata=meta)
    f = td.open(p)
    want = dict(meta, tokens=["<s>", "hé", [1, 2, [3, False]]])
    assert f.metadata == want
    assert type(f.metadata["ok"]) is bool and type(f.metadata["count"]) is int
    np.testing.assert_array_equal(f["a"][...], a)
    # The same from to_bytes; no metadata, no map.
    (tmp_path / "b.tdf").write_bytes(td.to_bytes({"a": a}, metadata=meta))
    assert td.open(tmp_path / "b.tdf").metadata == want
    (tmp_path / "c.tdf").write_bytes(td.to_bytes({"a": a}))
    assert td.open(tmp_path / "c.tdf").metadata == {}


@pytest.mark.parametrize(
    "meta, message",
    [
        ([("k", 1)], "mapping"),
        ({1: "x"}, "keys are str"),
        ({"k": None}, "not a metadata value"),
        ({"k": {"nested": 1}}, "not a metadata value"),
        ({"k": b"bytes"}, "not a metadata value"),
        ({"k": 2**64}, "outside"),
        ({"k": -(2**63) - 1}, "outside"),
        ({"k": [[[[[[[[[1]]]]]]]]]}, "nest more than 8"),
    ],
)
def test_metadata_refused_with_the_reason(tmp_path, meta, message):
    with pytest.raises(TypeError, match=message):
        td.write(tmp_path / "x.tdf", {"a": np.zeros(2)}, metadata=meta)
    assert not (tmp_path / "x.tdf").exists()


def test_metadata_list_that_contains_itself_is_too_deep_not_endless(tmp_path):
    loop = []
    loop.append(loop)
    with pytest.raises(TypeError, match="nest more than 8"):
        td.to_bytes({"a": np.zeros(2)}, metadata={"loop": loop})


def test_metadata_empty_key_is_the_writers_error(tmp_path):
    with pytest.raises(td.errors.InvalidArgument, match="key"):
        td.to_bytes({"a": np.zeros(2)}, metadata={"": 1})
