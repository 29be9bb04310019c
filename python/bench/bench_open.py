"""Open a ~1 GB checkpoint and read every tensor: tensordesc against safetensors, same run.

    pip install safetensors==0.8.0       # in the environment that has tensordesc
    python python/bench/bench_open.py [--gib 1.0] [--repeat 5] [--dir /tmp]

The checkpoint is 256 tensors (float32, float16, int8; 4 KiB to 32 MiB, like a model's
weights and biases) written once by each library. The page cache is warmed first, so the
figures compare the libraries, not the disk. Each measurement is the best of --repeat runs:

- "arrays": open the file and get every tensor as a numpy array (tensordesc: zero-copy
  views of the mapping; safetensors.numpy.load_file and safe_open(...).get_tensor copy);
- "arrays + read": the same, then read every byte of every array (a checksum), so that
  tensordesc's lazily mapped pages are faulted in and the work is the same on both sides.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np

import tensordesc as td

try:
    from safetensors import safe_open
    from safetensors.numpy import load_file, save_file
except ImportError as e:  # pragma: no cover
    raise SystemExit("the benchmark compares against safetensors: pip install safetensors==0.8.0") from e


def make_tensors(total_bytes: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    dtypes = [np.float32, np.float16, np.int8]
    sizes = np.geomspace(4 << 10, 32 << 20, 256)
    sizes = sizes * (total_bytes / sizes.sum())
    out = {}
    for i, s in enumerate(sizes):
        dt = np.dtype(dtypes[i % len(dtypes)])
        n = max(1, int(s) // dt.itemsize)
        cols = 256 if n >= 256 else 1
        n -= n % cols
        raw = rng.integers(0, 256, n * dt.itemsize, dtype=np.uint8)
        a = raw.view(dt).reshape(-1, cols)
        if dt.kind == "f":
            a = np.nan_to_num(a, nan=0.0, posinf=0.0, neginf=0.0)
        out[f"layer{i:03d}.{dt.name}"] = a
    return out


def checksum(arrays) -> int:
    s = 0
    for a in arrays:
        s += int(np.bitwise_xor.reduce(np.ascontiguousarray(a).reshape(-1).view(np.uint8), initial=0))
    return s


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--dir", default=tempfile.gettempdir())
    args = ap.parse_args()

    tensors = make_tensors(int(args.gib * (1 << 30)))
    count = len(tensors)
    total = sum(a.nbytes for a in tensors.values())
    d = tempfile.mkdtemp(dir=args.dir, prefix="tdbench-")
    st_path = os.path.join(d, "model.safetensors")
    td_path = os.path.join(d, "model.tdf")
    save_file(tensors, st_path)
    td.write(td_path, tensors)
    del tensors
    for p in (st_path, td_path):  # warm the page cache
        with open(p, "rb") as f:
            while f.read(1 << 24):
                pass

    def td_arrays():
        f = td.open(td_path)
        return [t.numpy() for t in f.values()]

    def st_load_file():
        return list(load_file(st_path).values())

    def st_safe_open():
        with safe_open(st_path, framework="np") as f:
            return [f.get_tensor(k) for k in f.keys()]

    ref = checksum(st_load_file())
    assert checksum(td_arrays()) == ref and checksum(st_safe_open()) == ref

    rows = []
    for label, fn in [
        ("tensordesc.open + numpy()", td_arrays),
        ("safetensors.numpy.load_file", st_load_file),
        ("safetensors safe_open + get_tensor", st_safe_open),
    ]:
        load = best(fn, args.repeat)
        read = best(lambda: checksum(fn()), args.repeat)
        rows.append((label, load, read))

    print(f"{count} tensors, {total / (1 << 30):.2f} GiB, best of {args.repeat}")
    print(f"{'':38} {'arrays':>10} {'arrays + read':>15}")
    for label, load, read in rows:
        print(f"{label:38} {load * 1e3:8.2f} ms {read * 1e3:12.1f} ms")
    t_load, t_read = rows[0][1], rows[0][2]
    for label, load, read in rows[1:]:
        print(f"ratio vs {label}: arrays {load / t_load:.1f}x, arrays + read {read / t_read:.2f}x")
    for p in (st_path, td_path):
        os.remove(p)
    os.rmdir(d)


if __name__ == "__main__":
    main()
