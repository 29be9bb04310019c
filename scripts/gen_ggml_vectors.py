#!/usr/bin/env python3
"""Generate tests/vectors/ggml/<NAME>.bin: random ggml blocks and the reference values.

The reference is `gguf.quants.dequantize` of the `gguf` Python package (pinned with its
numpy, below). For every block type the file holds:

    magic        8 bytes  b"GGMLVEC\\0"
    type number  u32 LE
    block count  u32 LE
    block bytes  u32 LE
    block elems  u32 LE
    blocks       count * block_bytes bytes
    values       count * block_elems f32 LE (gguf's output, bit for bit)

The blocks are, in order:
- random blocks (64 of a 32-value type, 32 of NVFP4, 16 of a 256-value type) of random
  bytes, whose scale fields hold finite normal f16 values (MXFP4: exponents near 127),
  except the last four: NaN scales, an +-Inf scale (a min beside it finite), subnormal
  and zero scales, and raw
  random bytes throughout (NVFP4: its special scale bytes 0x00, 0x7F, 0x80, 0xFF instead);
- for the lattice (IQ) types, grid sweeps: blocks whose grid indices run through every
  row of the type's grid once, in order (other bits random).

Regenerate (deterministic: numpy's PCG64 seeded per type):

    python3 -m venv /tmp/ggml-venv
    /tmp/ggml-venv/bin/pip install gguf==0.19.0 numpy==2.4.6
    /tmp/ggml-venv/bin/python scripts/gen_ggml_vectors.py
"""

import struct
import sys
from importlib.metadata import version
from pathlib import Path

import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType as T
from gguf.quants import dequantize

OUT = Path(__file__).resolve().parent.parent / "tests" / "vectors" / "ggml"
MAGIC = b"GGMLVEC\0"
PINNED = {"gguf": "0.19.0", "numpy": "2.4.6"}

# Byte offsets of each type's little-endian f16 scale fields (IQ1_M's scale is spread
# over four nibbles and handled apart; MXFP4 and NVFP4 have byte scales).
F16_FIELDS = {
    "Q4_0": [0], "Q4_1": [0, 2], "Q5_0": [0], "Q5_1": [0, 2], "Q8_0": [0],
    "Q2_K": [80, 82], "Q3_K": [108], "Q4_K": [0, 2], "Q5_K": [0, 2], "Q6_K": [208],
    "IQ2_XXS": [0], "IQ2_XS": [0], "IQ3_XXS": [0], "IQ1_S": [0], "IQ4_NL": [0],
    "IQ3_S": [0], "IQ2_S": [0], "IQ4_XS": [0], "IQ1_M": [], "TQ1_0": [52], "TQ2_0": [64],
    "MXFP4": [], "NVFP4": [],
}

TYPES = [
    "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K",
    "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S", "IQ4_NL", "IQ3_S", "IQ2_S", "IQ4_XS",
    "IQ1_M", "TQ1_0", "TQ2_0", "MXFP4", "NVFP4",
]


def f16_normal(rng) -> int:
    """A finite normal f16 of either sign, magnitude between 2^-14 and 2^6."""
    return (int(rng.integers(2)) << 15) | (int(rng.integers(1, 21)) << 10) | int(rng.integers(1024))


def f16_special(rng, kind: str) -> int:
    sign = int(rng.integers(2)) << 15
    if kind == "nan":
        return sign | 0x7C00 | int(rng.integers(1, 1024))
    if kind == "inf":
        return sign | 0x7C00
    if kind == "small":  # subnormal, or a zero of either sign
        return sign | (int(rng.integers(1024)) if rng.integers(4) else 0)
    return int(rng.integers(1 << 16))  # raw


def set_f16(block: np.ndarray, at: int, bits: int) -> None:
    block[at] = bits & 0xFF
    block[at + 1] = bits >> 8


def set_iq1m_scale(block: np.ndarray, bits: int) -> None:
    """IQ1_M's f16 scale: nibble k is the top nibble of the u16 at byte 48 + 2k."""
    for k in range(4):
        hi = 48 + 2 * k + 1
        block[hi] = (int(block[hi]) & 0x0F) | (((bits >> (4 * k)) & 0x0F) << 4)


def set_scales(name: str, block: np.ndarray, rng, kind: str) -> None:
    """Write the scale fields of one block: kind is normal, nan, inf, small or raw."""
    if name == "MXFP4":
        if kind == "normal":
            block[0] = int(rng.integers(110, 141))
        elif kind != "raw":
            block[0] = int(rng.choice([0, 1, 2, 126, 127, 253, 254, 255]))
        return
    if name == "NVFP4":
        if kind not in ("normal", "raw"):
            block[0:4] = rng.permutation(np.array([0x00, 0x7F, 0x80, 0xFF], dtype=np.uint8))
        return
    fields = F16_FIELDS[name]
    if kind == "raw":
        return
    pick = (lambda: f16_normal(rng)) if kind == "normal" else (lambda: f16_special(rng, kind))
    if name == "IQ1_M":
        set_iq1m_scale(block, pick())
    for i, at in enumerate(fields):
        # An infinite scale beside a finite min (Q4_1, Q2_K, ...), so sums stay infinite.
        set_f16(block, at, f16_normal(rng) if kind == "inf" and i > 0 else pick())


def zero_scales(name: str, block: np.ndarray) -> None:
    if name == "IQ1_M":
        set_iq1m_scale(block, 0)
    for at in F16_FIELDS[name]:
        set_f16(block, at, 0)


def sweep_blocks(name: str, qbytes: int, rng) -> list[np.ndarray]:
    """Blocks whose grid indices enumerate the type's grid (none for non-lattice types)."""

    def blocks(rows: int, per_block: int, put):
        out = []
        for first in range(0, rows, per_block):
            b = rng.integers(0, 256, size=qbytes, dtype=np.uint8)
            set_scales(name, b, rng, "normal")
            for i in range(per_block):
                put(b, i, first + i)
            out.append(b)
        return out

    def iq2_xxs(b, i, idx):  # aux0 byte l of sub-block ib
        ib, l = divmod(i, 4)
        b[2 + 8 * ib + l] = idx

    def iq2_xs(b, i, idx):  # low 9 bits of u16 i
        q = (int(b[2 + 2 * i]) | (int(b[3 + 2 * i]) << 8)) & 0xFE00 | idx
        set_f16(b, 2 + 2 * i, q)

    def iq2_s(b, i, idx):
        b[2 + i] = idx & 0xFF
        at, sh = 66 + i // 4, 2 * (i % 4)
        b[at] = (int(b[at]) & ~(3 << sh) & 0xFF) | ((idx >> 8) << sh)

    def iq3_xxs(b, i, idx):
        b[2 + i] = idx

    def iq3_s(b, i, idx):
        b[2 + i] = idx & 0xFF
        at, sh = 66 + i // 8, i % 8
        b[at] = (int(b[at]) & ~(1 << sh) & 0xFF) | ((idx >> 8) << sh)

    def iq1_s(b, i, idx):
        b[2 + i] = idx & 0xFF
        ib, l = divmod(i, 4)
        at = 34 + 2 * ib
        qh = int(b[at]) | (int(b[at + 1]) << 8)
        qh = (qh & ~(7 << (3 * l)) & 0xFFFF) | ((idx >> 8) << (3 * l))
        set_f16(b, at, qh)

    def iq1_m(b, i, idx):
        b[i] = idx & 0xFF
        at, sh = 32 + i // 2, 4 * (i % 2)
        b[at] = (int(b[at]) & ~(7 << sh) & 0xFF) | ((idx >> 8) << sh)

    table = {
        "IQ2_XXS": (256, 32, iq2_xxs), "IQ2_XS": (512, 32, iq2_xs), "IQ2_S": (1024, 32, iq2_s),
        "IQ3_XXS": (256, 64, iq3_xxs), "IQ3_S": (512, 64, iq3_s),
        "IQ1_S": (2048, 32, iq1_s), "IQ1_M": (2048, 32, iq1_m),
    }
    if name not in table:
        return []
    return blocks(*table[name])


def check_scale_offsets(name: str, qtype, qbytes: int, rng) -> None:
    """Zeroing a type's f16 scale fields must zero every value: the offsets are right."""
    if name in ("MXFP4", "NVFP4"):
        return
    b = rng.integers(0, 256, size=qbytes, dtype=np.uint8)
    zero_scales(name, b)
    with np.errstate(all="ignore"):
        v = dequantize(b, qtype)
    assert np.all(v == 0), f"{name}: scale offsets {F16_FIELDS[name]} are not the scales"


def main() -> int:
    for pkg, want in PINNED.items():
        if version(pkg) != want:
            print(f"{pkg} {version(pkg)} installed; the vectors pin {want}", file=sys.stderr)
            return 1
    OUT.mkdir(parents=True, exist_ok=True)
    total = 0
    for name in TYPES:
        qtype = T[name]
        qk, qbytes = GGML_QUANT_SIZES[qtype]
        rng = np.random.default_rng(0x6767_6D6C + int(qtype))
        check_scale_offsets(name, qtype, qbytes, rng)
        n_random = {32: 64, 64: 32}.get(qk, 16)
        kinds = ["normal"] * (n_random - 4) + ["nan", "inf", "small", "raw"]
        blocks = []
        for kind in kinds:
            b = rng.integers(0, 256, size=qbytes, dtype=np.uint8)
            set_scales(name, b, rng, kind)
            blocks.append(b)
        blocks += sweep_blocks(name, qbytes, rng)
        data = np.concatenate(blocks)
        with np.errstate(all="ignore"):
            values = dequantize(data, qtype)
        assert values.dtype == np.float32 and values.shape == (len(blocks) * qk,)
        header = MAGIC + struct.pack("<IIII", int(qtype), len(blocks), qbytes, qk)
        payload = header + data.tobytes() + values.astype("<f4").tobytes()
        (OUT / f"{name}.bin").write_bytes(payload)
        total += len(payload)
        print(f"{name:8} {len(blocks):3} blocks, {np.isnan(values).sum():5} NaN, "
              f"{np.isinf(values).sum():5} inf, {len(payload):7} bytes")
    print(f"total {total} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
