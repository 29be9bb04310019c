"""Read a 1 GiB tensor three ways, same run: zarr-python through tensordesc.zarr.Store,
zarr-python from a plain Zarr v3 array on local disk, and tensordesc directly.

    python python/bench/bench_zarr.py [--side 16384] [--repeat 3] [--dir /tmp]

Two tensors of side x side float32 values (1 GiB at the default side 16384):

- "dense": float32 elements, ROW_MAJOR;
- "quantized": INT8 codes with one float32 scale per 32 values along the rows (BLOCKWISE,
  GGUF Q8_0's geometry), read as float32 values (256 MiB of codes, 1 GiB of values).

Each is written once to a .tdf file, and once, as the float32 values a read gives, to a
Zarr v3 array on local disk by zarr-python (no compression: the ``bytes`` codec alone) with
the chunk shape the store presents, so the two zarr reads decode the same chunks. The page
cache is warmed first; each figure is the best of --repeat rounds (each round runs the
three reads in turn) of reading the whole tensor into one new numpy array:
``zarr_array[...]`` (the store), ``zarr_array[...]`` (local disk), ``Tensor.read()``
(tensordesc).
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time

import numpy as np
import zarr

import tensordesc as td
import tensordesc.zarr as tz


def rounds(fns, repeat: int) -> list[float]:
    """The best time of each function over ``repeat`` rounds; each round runs every
    function once, in turn, so a burst of load on the machine hits them alike."""
    best = [float("inf")] * len(fns)
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            t0 = time.perf_counter()
            out = fn()
            best[i] = min(best[i], time.perf_counter() - t0)
            del out
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--side", type=int, default=16384)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dir", default=None)
    args = ap.parse_args()
    n = args.side
    work = tempfile.mkdtemp(dir=args.dir, prefix="bench-zarr-")
    try:
        rng = np.random.default_rng(0)
        dense = rng.standard_normal((n, n), dtype=np.float32)
        codes = rng.integers(-128, 128, (n, n), dtype=np.int8)
        scales = np.exp2(rng.integers(-8, 0, (n, n // 32))).astype(np.float32)
        path = os.path.join(work, "w.tdf")
        td.write(path, {"dense": dense, "quantized": td.dense(codes, quantization=td.Blockwise(1, 32, scales))})
        del codes, scales
        store = tz.Store(path)
        group = zarr.open_group(store, mode="r")
        f = td.open(path)
        print(f"{n} x {n} float32 ({n * n * 4 / 2**30:.2f} GiB of values), best of {args.repeat}")
        print()
        print("| tensor | chunks | zarr + tensordesc.zarr.Store | zarr, local disk | tensordesc `read()` "
              "| store / local disk | store / tensordesc |")
        print("|---|---|---|---|---|---|---|")
        for name in ["dense", "quantized"]:
            info = store.array_info(name)
            values = dense if name == "dense" else f[name].read()
            local = zarr.create_array(
                os.path.join(work, f"{name}.zarr"),
                shape=values.shape,
                dtype=values.dtype,
                chunks=info.chunks,
                compressors=None,
                filters=None,
                zarr_format=3,
            )
            local[...] = values
            del values
            local = zarr.open_array(os.path.join(work, f"{name}.zarr"), mode="r")
            through_store = group[name]
            t = f[name]
            # Warms the page cache (the .tdf file and the local array's chunk files).
            a, b = through_store[...], local[...]
            assert np.array_equal(a, b) and np.array_equal(a, t.read())
            del a, b
            t_store, t_local, t_direct = rounds(
                [lambda: through_store[...], lambda: local[...], lambda: t.read()], args.repeat
            )
            chunks = " × ".join(map(str, info.chunks))
            print(f"| {name} | {chunks} ({info.chunk_nbytes >> 20} MiB) | {t_store * 1e3:.0f} ms "
                  f"| {t_local * 1e3:.0f} ms | {t_direct * 1e3:.0f} ms "
                  f"| {t_store / t_local:.2f}× | {t_store / t_direct:.2f}× |")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
