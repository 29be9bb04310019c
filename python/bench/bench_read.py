"""Python's per-call and sparse-to-dense costs, each against its peer in the same run.

    python python/bench/bench_read.py [--quick] [--repeat 7]

1. ``t[a:a+16, b:b+16]`` of a mapped 2048 x 2048 float32 tensor at random corners, against
   ``np.array(memmap[a:a+16, b:b+16])`` of the same values in a ``.npy`` mapped by numpy
   (per call, best of --repeat passes over 20,000 corners).
2. A 4096 x 4096 CSR float32 matrix with 1 % stored (sorted, unique) read whole to dense:
   ``t[...]`` against scipy's ``csr_array.toarray()`` (best of --repeat).

Each figure is printed with the ratio peer / tensordesc (above 1: tensordesc is faster) and
the target. --quick shrinks both (512 x 512, 2,000 corners) for a smoke run.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np

import tensordesc as td

try:
    import scipy.sparse as sp
except ImportError as e:  # pragma: no cover
    raise SystemExit("the benchmark compares against scipy: pip install scipy") from e


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    n_dense, corners, n_csr = (512, 2_000, 512) if args.quick else (2048, 20_000, 4096)
    rng = np.random.default_rng(0)
    d = tempfile.mkdtemp(prefix="tdbench-read-")

    # 1. small windows of a mapped dense tensor
    a = rng.random((n_dense, n_dense), dtype=np.float32)
    tdf, npy = os.path.join(d, "a.tdf"), os.path.join(d, "a.npy")
    td.write(tdf, {"a": a})
    np.save(npy, a)
    t = td.open(tdf)["a"]
    mm = np.load(npy, mmap_mode="r")
    xy = [(int(i), int(j)) for i, j in rng.integers(0, n_dense - 16, size=(corners, 2))]
    for i, j in xy[:100]:
        assert np.array_equal(t[i : i + 16, j : j + 16], mm[i : i + 16, j : j + 16])

    def ours() -> None:
        for i, j in xy:
            t[i : i + 16, j : j + 16]

    def theirs() -> None:
        for i, j in xy:
            np.array(mm[i : i + 16, j : j + 16])

    o = p = float("inf")
    for _ in range(args.repeat):  # alternately, so that load on the machine hits both
        o = min(o, best(ours, 1))
        p = min(p, best(theirs, 1))
    print(
        f"1. t[a:a+16, b:b+16] of a mapped {n_dense}^2 float32 tensor: {o / corners * 1e6:.2f} us a call; "
        f"np.array(memmap[...]) {p / corners * 1e6:.2f} us: {p / o:.2f}x (target >= 0.5)"
    )

    # 2. CSR 1 % to dense
    m = sp.random_array((n_csr, n_csr), density=0.01, format="csr", dtype=np.float32, rng=rng)
    m.sort_indices()
    csr = os.path.join(d, "m.tdf")
    td.write(csr, {"m": m})
    tm = td.open(csr)["m"]
    assert np.array_equal(tm[...], m.toarray())
    o = p = float("inf")
    for _ in range(args.repeat):
        o = min(o, best(lambda: tm[...], 1))
        p = min(p, best(lambda: m.toarray(), 1))
    print(
        f"2. CSR {n_csr}^2, {m.nnz} stored (1 %) -> dense float32, t[...]: {o * 1e3:.2f} ms; "
        f"scipy csr_array.toarray() {p * 1e3:.2f} ms: {p / o:.2f}x (target >= 1.0)"
    )
    for f in os.listdir(d):
        os.unlink(os.path.join(d, f))
    os.rmdir(d)


if __name__ == "__main__":
    main()
