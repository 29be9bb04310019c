"""The command line the wheel brings: the ``tensordesc`` console script (installed beside
this interpreter) and ``python -m tensordesc`` run the native tool's commands, with its
output, errors and exit statuses; ``tensordesc.convert`` is its ``convert`` for Python code,
raising the package's exceptions."""

import json
import os
import platform
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

import tensordesc as td

BIN = Path(sys.executable).parent
SCRIPT = BIN / ("tensordesc.exe" if os.name == "nt" else "tensordesc")


def tool(*args, stdin=None):
    """Run the console script with ``args``; its CompletedProcess (text)."""
    r = subprocess.run(
        [str(SCRIPT), *map(str, args)],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "Traceback" not in r.stderr, r.stderr
    assert "panicked" not in r.stderr, r.stderr
    return r


def module(*args):
    """Run ``python -m tensordesc`` with ``args``."""
    r = subprocess.run(
        [sys.executable, "-m", "tensordesc", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "Traceback" not in r.stderr, r.stderr
    return r


@pytest.fixture
def checkpoint(tmp_path):
    """A safetensors file written by the ``safetensors`` package, with metadata."""
    tensors = {
        "w": np.arange(12, dtype=np.float32).reshape(3, 4),
        "b": np.array([1, -2, 3], dtype=np.int16),
    }
    path = tmp_path / "model.safetensors"
    save_file(tensors, str(path), metadata={"format": "np"})
    return path, tensors


def test_the_console_script_is_installed_beside_the_interpreter():
    assert SCRIPT.is_file()
    r = tool("--help")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("Encode, inspect, validate and address tensor descriptors")
    assert "Usage: tensordesc [OPTIONS] <COMMAND>" in r.stdout
    for command in ("demo", "inspect", "validate", "locate", "export", "convert"):
        assert f"\n  {command} " in r.stdout, command
    assert r.stderr == ""
    r = tool("--version")
    assert (r.returncode, r.stdout) == (0, f"tensordesc {td.__version__}\n")


def test_every_command_has_help():
    for command in ("demo", "inspect", "validate", "locate", "export", "convert"):
        r = tool(command, "--help")
        assert r.returncode == 0, (command, r.stderr)
        assert f"Usage: tensordesc {command} " in r.stdout, command


def test_python_m_tensordesc():
    r = module("--help")
    assert r.returncode == 0, r.stderr
    assert "Usage: python -m tensordesc [OPTIONS] <COMMAND>" in r.stdout
    r = module("--version")
    assert r.stdout == f"tensordesc {td.__version__}\n"


def test_usage_errors_are_clap_messages_with_status_2():
    r = tool("frobnicate")
    assert r.returncode == 2
    assert r.stdout == ""
    assert "error: unrecognized subcommand 'frobnicate'" in r.stderr
    r = tool("validate")
    assert r.returncode == 2
    assert "the following required arguments were not provided" in r.stderr


def test_convert_inspect_validate(tmp_path, checkpoint):
    src, tensors = checkpoint
    dst = tmp_path / "model.tdf"
    r = tool("convert", src, dst)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"converted 2 tensors (54 B of data) from {src} to {dst} (")
    assert "  metadata: 1 key" in r.stdout
    assert '  "w": FLOAT32 [3 x 4]' in r.stdout
    with td.open(dst) as f:
        assert f.container == "tdf"
        assert sorted(f) == ["b", "w"]
        for name, a in tensors.items():
            np.testing.assert_array_equal(f[name].numpy(), a)
        assert f.metadata == {"format": "np"}

    r = tool("inspect", dst)
    assert r.returncode == 0, r.stderr
    assert '"w"' in r.stdout and "FLOAT32" in r.stdout
    r = tool("inspect", "--json", dst)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert json.dumps(doc).count('"FLOAT32"') >= 1

    r = tool("validate", "--contents", src, dst)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count(": OK") == 2, r.stdout

    r = tool("locate", dst, "--tensor", "w", "2,3")
    assert r.returncode == 0, r.stderr
    assert "value: 11" in r.stdout

    out = tmp_path / "w.npy"
    r = tool("export", dst, "--tensor", "w", "--box", "1:3,0:2", "-o", out)
    assert r.returncode == 0, r.stderr
    np.testing.assert_array_equal(np.load(out), tensors["w"][1:3, 0:2])


def test_quiet_convert_through_python_m(tmp_path, checkpoint):
    src, tensors = checkpoint
    dst = tmp_path / "q.tdf"
    r = module("convert", "-q", "--alignment", "4096", src, dst)
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "")
    assert td.open(dst).alignment == 4096


def test_a_missing_file_is_one_error_line_with_status_2(tmp_path):
    missing = tmp_path / "missing.tdf"
    r = tool("inspect", missing)
    assert r.returncode == 2
    assert r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("error: IO: ") and str(missing) in lines[0]


def test_an_invalid_file_is_status_1(tmp_path):
    bad = tmp_path / "bad.tdf"
    bad.write_bytes(b"TDSC" + bytes(60))
    r = tool("validate", bad)
    assert r.returncode == 1
    assert r.stdout == f"{bad}: UNSUPPORTED_VERSION: version 0.0: only major version 1 is supported\n"


def test_standard_input(checkpoint):
    src, _ = checkpoint
    with open(src, "rb") as f:
        r = subprocess.run([str(SCRIPT), "validate", "-"], stdin=f, capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert b": OK" in r.stdout


def test_a_closed_pipe_stops_quietly(tmp_path):
    assert tool("demo", "--out", tmp_path / "demo").returncode == 0
    demo = tmp_path / "demo" / "model.tdf"
    # The read end is closed before the command writes: its first write fails (EPIPE).
    p = subprocess.Popen(
        [str(SCRIPT), "inspect", str(demo)], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    p.stdout.close()
    err = p.stderr.read()
    p.stderr.close()
    assert p.wait(timeout=120) == 0
    assert err == b""


# The number of the read system call, as /proc/PID/syscall shows it.
READ_SYSCALL = {"x86_64": 0, "aarch64": 63}.get(platform.machine())


def _waiting_with_default_sigint(pid):
    """Whether process ``pid`` runs the console script (not the forked test process before
    its exec), is blocked reading its standard input, and leaves SIGINT to its default
    action (neither caught nor ignored)."""
    if f"{SCRIPT}\0inspect\0-\0".encode() not in Path(f"/proc/{pid}/cmdline").read_bytes():
        return False
    call = Path(f"/proc/{pid}/syscall").read_text().split()
    if len(call) < 2 or call[0] != str(READ_SYSCALL) or int(call[1], 16) != 0:
        return False
    fields = dict(
        line.split(":\t", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    bit = 1 << (signal.SIGINT - 1)
    return not (int(fields["SigCgt"], 16) & bit or int(fields["SigIgn"], 16) & bit)


def _wait_for_default_sigint(p):
    """Wait until the console script's native command waits on standard input with
    SIGINT's default action restored (``_cli.main`` removes Python's handler)."""
    deadline = time.monotonic() + 60
    while not _waiting_with_default_sigint(p.pid):
        assert p.poll() is None, p.stderr.read()
        assert time.monotonic() < deadline, (
            "the console script never waited on stdin with SIGINT's default action"
        )
        time.sleep(0.005)


@pytest.mark.skipif(
    not Path("/proc/self/syscall").exists() or READ_SYSCALL is None,
    reason="Linux /proc, a known read system call number",
)
def test_ctrl_c_stops_a_command_reading_standard_input():
    # `inspect -` waits for a stream on standard input; SIGINT ends the process as it ends
    # the native binary (Python's handler would wait for the native call to return).
    # The child starts with SIGINT's default action whatever the test runner inherited (a
    # shell's background job ignores SIGINT, and Python then installs no handler of its own
    # to wait for).
    p = subprocess.Popen(
        [str(SCRIPT), "inspect", "-"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        _wait_for_default_sigint(p)
        time.sleep(0.2)
        assert p.poll() is None
        p.send_signal(signal.SIGINT)
        assert p.wait(timeout=30) == -signal.SIGINT
        assert b"Traceback" not in p.stderr.read()
    finally:
        if p.poll() is None:
            p.kill()
        for s in (p.stdin, p.stdout, p.stderr):
            s.close()


# ---------------------------------------------------------------------------------------
# tensordesc.convert
# ---------------------------------------------------------------------------------------


def test_convert_function(tmp_path, checkpoint, capfd):
    src, tensors = checkpoint
    dst = tmp_path / "f.tdf"
    assert td.convert(src, dst) is None
    captured = capfd.readouterr()
    assert (captured.out, captured.err) == ("", "")
    with td.open(dst) as f:
        np.testing.assert_array_equal(f["w"].numpy(), tensors["w"])
        assert f.metadata == {"format": "np"}
        assert f.alignment == 64
    # str paths, an alignment, a .tdf input rewritten.
    again = tmp_path / "again.tdf"
    td.convert(str(dst), str(again), alignment=np.int64(1024))
    assert td.open(again).alignment == 1024


def test_convert_raw_keeps_the_pieces(tmp_path):
    # An NVFP4 weight in three pieces (codes, F8_E4M3 block scales, global scale), the
    # header written by hand: numpy has no F8_E4M3 for save_file.
    codes = np.arange(16, dtype=np.uint8).reshape(2, 8) * 17
    src = tmp_path / "nv.safetensors"
    header = {
        "w.weight": {"dtype": "U8", "shape": [2, 8], "data_offsets": [0, 16]},
        "w.weight_scale": {"dtype": "F8_E4M3", "shape": [2, 1], "data_offsets": [16, 18]},
        "w.weight_scale_2": {"dtype": "F32", "shape": [], "data_offsets": [18, 22]},
    }
    text = json.dumps(header).encode()
    data = codes.tobytes() + bytes([0x38, 0x40]) + np.float32(0.5).tobytes()
    src.write_bytes(len(text).to_bytes(8, "little") + text + data)

    grouped = tmp_path / "grouped.tdf"
    td.convert(src, grouped)
    assert list(td.open(grouped)) == ["w.weight"]
    raw = tmp_path / "raw.tdf"
    td.convert(src, raw, raw=True)
    assert sorted(td.open(raw)) == ["w.weight", "w.weight_scale", "w.weight_scale_2"]


def test_convert_errors_raise(tmp_path, checkpoint):
    src, _ = checkpoint
    with pytest.raises(td.Io) as e:
        td.convert(tmp_path / "missing.safetensors", tmp_path / "o.tdf")
    assert "missing.safetensors" in str(e.value)
    assert isinstance(e.value, td.Error)
    with pytest.raises(td.AlignmentInvalid):
        td.convert(src, tmp_path / "o.tdf", alignment=100)
    with pytest.raises(td.InvalidArgument):
        td.convert(src, tmp_path / "o.tdf", alignment=-1)
    with pytest.raises(td.InvalidArgument):
        td.convert(src, src)
    with pytest.raises(TypeError):
        td.convert(src, tmp_path / "o.tdf", alignment="64")  # type: ignore[arg-type]
    not_a_model = tmp_path / "notes.txt"
    not_a_model.write_text("not a model\n")
    with pytest.raises(td.Error):
        td.convert(not_a_model, tmp_path / "o.tdf")
    assert not (tmp_path / "o.tdf").exists()
