#!/usr/bin/env python3
"""Generate tests/vectors/gguf/: small GGUF files written by gguf's own GGUFWriter, and the
values gguf says their tensors hold, for the GGUF parser's tests
(src/transport/foreign/gguf.rs).

Files:

- `dense.gguf` (default alignment 32, no `general.alignment` key): one tensor of every
  dense ggml type (F32, F16, BF16, F64, I8, I16, I32, I64), a rank-4 and a rank-0 (scalar)
  F32 tensor, and key/values of every GGUF value type: the integers, floats, bools,
  strings (one not ASCII), arrays of ints, floats, bools and strings, a byte array and
  nested arrays (arrays of arrays, two levels deep).
- `quant.gguf` (`general.alignment` 64): one tensor of every ggml block type tensordesc
  knows. Types `gguf.quants.quantize` implements are quantized from random normal values;
  the others (K- and IQ-types, NVFP4, ...) hold random blocks whose scale fields are finite
  normal numbers (written by scripts/gen_ggml_vectors.py's `set_scales`), given to
  GGUFWriter as raw bytes (`raw_dtype`). Two rank-3 "expert stacks" (Q4_K raw blocks and
  quantized Q8_0), as MoE models store `ffn_*_exps`.
- `align1.gguf` (`general.alignment` 1): tensors packed without padding, so most start at
  odd file offsets (F16, F32, Q8_0 and I8 tensors).
- `big_endian.gguf`: GGUFWriter's big-endian output (not supported: the test expects the
  parser to say so).
- `expected.bin`: what gguf reads each tensor of dense.gguf, quant.gguf and align1.gguf
  as: the tensor's values (`gguf.quants.dequantize` for block types, bit for bit), in
  row-major order of the numpy shape (= ggml's `ne` reversed):

      magic   8 bytes  b"GGUFEXP\\0"
      count   u32 LE   number of entries
      entry:  u32 LE file name length, file name (UTF-8),
              u32 LE tensor name length, tensor name (UTF-8),
              u8 kind (0: f32 values, 1: f64 values),
              u64 LE value count, the values (LE)

  Float tensors (and dequantized blocks) are stored as f32, integer tensors as f64 (every
  value written is exact in f64).

The metadata each file holds is spelled out in the Rust test that reads it.

Regenerate (deterministic: numpy's PCG64 with fixed seeds):

    python3 -m venv /tmp/ggml-venv
    /tmp/ggml-venv/bin/pip install gguf==0.19.0 numpy==2.4.6
    /tmp/ggml-venv/bin/python scripts/gen_gguf_fixtures.py

`--check` regenerates into a temporary directory and exits 1 when a committed file differs.
"""

import struct
import sys
import tempfile
from importlib.metadata import version
from pathlib import Path

import numpy as np
from gguf import GGML_QUANT_SIZES, GGUFEndian, GGUFValueType, GGUFWriter
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize, quantize

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gen_ggml_vectors import TYPES, set_scales  # noqa: E402  (the block types tensordesc knows)

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "vectors" / "gguf"
PINNED = {"gguf": "0.19.0", "numpy": "2.4.6"}


def dense(out: Path, expected: list) -> None:
    rng = np.random.default_rng(0x6767_7566)
    w = GGUFWriter(out / "dense.gguf", arch="tdtest")
    # Key/values of every value type (general.architecture is GGUFWriter's own).
    w.add_uint8("test.u8", 200)
    w.add_int8("test.i8", -100)
    w.add_uint16("test.u16", 60000)
    w.add_int16("test.i16", -30000)
    w.add_uint32("test.u32", 4_000_000_000)
    w.add_int32("test.i32", -2_000_000_000)
    w.add_uint64("test.u64", 18_000_000_000_000_000_000)
    w.add_int64("test.i64", -9_000_000_000_000_000_000)
    w.add_float32("test.f32", 0.5)
    w.add_float64("test.f64", -1.25e-300)
    w.add_bool("test.true", True)
    w.add_bool("test.false", False)
    w.add_string("test.string", "grüße, 世界")
    w.add_array("test.array.i32", [1, -2, 3])
    w.add_key_value("test.array.u8", b"\x00\x01\xff", GGUFValueType.ARRAY, sub_type=GGUFValueType.UINT8)
    w.add_key_value("test.array.u64", [1, 2**64 - 1], GGUFValueType.ARRAY, sub_type=GGUFValueType.UINT64)
    w.add_array("test.array.f32", [0.25, -8.0])
    w.add_array("test.array.bool", [True, False, True])
    w.add_array("test.array.str", ["a", "", "ß"])
    w.add_array("test.array.nested", [[1, 2], [3], [4, 5, 6]])
    w.add_array("test.array.nested2", [[["x"]], [["y", "z"]]])

    def add(name: str, arr: np.ndarray, values: np.ndarray, kind: int, raw_dtype=None) -> None:
        w.add_tensor(name, arr, raw_dtype=raw_dtype)
        expected.append(("dense.gguf", name, kind, values))

    f32 = rng.standard_normal((3, 5)).astype(np.float32)
    add("f32", f32, f32, 0)
    f16 = rng.standard_normal((2, 3, 4)).astype(np.float16)
    add("f16", f16, f16.astype(np.float32), 0)
    src = rng.standard_normal((4, 8)).astype(np.float32)
    bf16 = quantize(src, T.BF16)  # uint8 [4, 16]: the bf16 bytes
    add("bf16", bf16, dequantize(bf16, T.BF16), 0, raw_dtype=T.BF16)
    f64 = rng.standard_normal(5)
    add("f64", f64, f64, 1)
    for name, dt, lo, hi, shape in [
        ("i8", np.int8, -128, 128, (16,)),
        ("i16", np.int16, -32768, 32768, (2, 2)),
        ("i32", np.int32, -(2**31), 2**31, (3, 3)),
        ("i64", np.int64, -(2**52), 2**52, (4,)),
    ]:
        a = rng.integers(lo, hi, size=shape, dtype=np.int64).astype(dt)
        add(name, a, a.astype(np.float64), 1)
    r4 = rng.standard_normal((1, 2, 3, 4)).astype(np.float32)
    add("rank4", r4, r4, 0)
    scalar = np.array(3.5, dtype=np.float32)
    add("scalar", scalar, scalar.reshape(1), 0)
    write(w)


def raw_blocks(name: str, n_blocks: int, rng) -> np.ndarray:
    qk, qbytes = GGML_QUANT_SIZES[T[name]]
    blocks = rng.integers(0, 256, size=(n_blocks, qbytes), dtype=np.uint8)
    for b in blocks:
        set_scales(name, b, rng, "normal")
    return blocks


def quant(out: Path, expected: list) -> None:
    rng = np.random.default_rng(0x6767_7571)
    w = GGUFWriter(out / "quant.gguf", arch="tdtest")
    w.add_custom_alignment(64)
    w.add_string("test.what", "every ggml block type tensordesc knows")
    for name in TYPES:
        qtype = T[name]
        qk, qbytes = GGML_QUANT_SIZES[qtype]
        shape = (3, 2 * qk) if qk < 256 else (2, qk)
        src = rng.standard_normal(shape).astype(np.float32)
        try:
            blocks = quantize(src, qtype)  # uint8 [rows, bytes per row]
            how = "quantized"
        except NotImplementedError:
            blocks = raw_blocks(name, shape[0] * shape[1] // qk, rng).reshape(shape[0], -1)
            how = "raw"
        tname = f"{name.lower()}.{how}"
        w.add_tensor(tname, blocks, raw_dtype=qtype)
        expected.append(("quant.gguf", tname, 0, dequantize(blocks, qtype)))
    # Expert stacks: [experts, rows, row length].
    blocks = raw_blocks("Q4_K", 4 * 2, rng).reshape(4, 2, -1)
    w.add_tensor("blk.0.ffn_gate_exps.weight", blocks, raw_dtype=T.Q4_K)
    expected.append(("quant.gguf", "blk.0.ffn_gate_exps.weight", 0, dequantize(blocks, T.Q4_K)))
    src = rng.standard_normal((3, 2, 64)).astype(np.float32)
    blocks = quantize(src, T.Q8_0)
    w.add_tensor("blk.0.ffn_down_exps.weight", blocks, raw_dtype=T.Q8_0)
    expected.append(("quant.gguf", "blk.0.ffn_down_exps.weight", 0, dequantize(blocks, T.Q8_0)))
    write(w)


def align1(out: Path, expected: list) -> None:
    rng = np.random.default_rng(0x6767_7531)
    w = GGUFWriter(out / "align1.gguf", arch="tdtest")
    w.add_custom_alignment(1)
    i8 = rng.integers(-128, 128, size=5, dtype=np.int64).astype(np.int8)
    w.add_tensor("odd.i8", i8)
    expected.append(("align1.gguf", "odd.i8", 1, i8.astype(np.float64)))
    f16 = rng.standard_normal(3).astype(np.float16)
    w.add_tensor("odd.f16", f16)
    expected.append(("align1.gguf", "odd.f16", 0, f16.astype(np.float32)))
    q = quantize(rng.standard_normal((1, 32)).astype(np.float32), T.Q8_0)
    w.add_tensor("odd.q8_0", q, raw_dtype=T.Q8_0)
    expected.append(("align1.gguf", "odd.q8_0", 0, dequantize(q, T.Q8_0)))
    f32 = rng.standard_normal(2).astype(np.float32)
    w.add_tensor("odd.f32", f32)
    expected.append(("align1.gguf", "odd.f32", 0, f32))
    write(w)


def big_endian(out: Path) -> None:
    w = GGUFWriter(out / "big_endian.gguf", arch="tdtest", endianess=GGUFEndian.BIG)
    w.add_uint32("test.u32", 7)
    w.add_tensor("f32", np.arange(4, dtype=np.float32), tensor_endianess=GGUFEndian.LITTLE)
    write(w)


def write(w: GGUFWriter) -> None:
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_expected(out: Path, expected: list) -> None:
    b = bytearray(b"GGUFEXP\0")
    b += struct.pack("<I", len(expected))
    for file, name, kind, values in expected:
        for s in (file, name):
            e = s.encode()
            b += struct.pack("<I", len(e)) + e
        v = np.ascontiguousarray(values, dtype="<f4" if kind == 0 else "<f8").reshape(-1)
        b += struct.pack("<BQ", kind, v.size) + v.tobytes()
    (out / "expected.bin").write_bytes(bytes(b))


def generate(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    expected: list = []
    dense(out, expected)
    quant(out, expected)
    align1(out, expected)
    big_endian(out)
    write_expected(out, expected)


def main() -> int:
    for pkg, want in PINNED.items():
        if version(pkg) != want:
            print(f"{pkg} {version(pkg)} installed; the fixtures pin {want}", file=sys.stderr)
            return 1
    if "--check" in sys.argv[1:]:
        with tempfile.TemporaryDirectory() as tmp:
            generate(Path(tmp))
            differ = [
                p.name for p in sorted(Path(tmp).iterdir())
                if not (OUT / p.name).exists() or (OUT / p.name).read_bytes() != p.read_bytes()
            ]
        if differ:
            print(f"tests/vectors/gguf differs from the generator: {differ}", file=sys.stderr)
            return 1
        print("tests/vectors/gguf is up to date")
        return 0
    generate(OUT)
    total = sum(p.stat().st_size for p in OUT.iterdir())
    print(f"wrote {OUT.relative_to(ROOT)}: {total} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
