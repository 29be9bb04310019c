"""Foreign files opened in place: tensordesc against gguf's and safetensors' own readers, same run.

    pip install gguf==0.19.0 safetensors==0.8.0   # in the environment that has tensordesc
    python python/bench/bench_foreign.py [--repeat 7] [--dir /tmp] [--quick]

Two files of 2,000 tensors each, named like a llama's, written once:

- a GGUF file by ``gguf.GGUFWriter`` (Q4_K, Q6_K and Q8_0 matrices, float32 norms; the
  blocks random with finite scales);
- a safetensors file by ``safetensors.numpy.save_file`` (float32 norms and biases, float16
  matrices).

The page cache is warmed first. Each figure is the best of --repeat runs, the peers' runs
interleaved:

- "list": open the file and list every tensor's name, shape and type. tensordesc:
  ``td.open`` + ``(name, t.shape, t.dtype)`` of every tensor; gguf: ``GGUFReader`` (it reads
  every tensor info at construction) + ``(t.name, t.shape, t.tensor_type)``; safetensors:
  ``safe_open`` + ``keys()`` + ``get_slice(k).get_shape()`` and ``get_dtype()``.
- "arrays": open the file and get every tensor as a numpy array. GGUF: tensordesc
  ``t.read()`` (quantized tensors dequantized to float32; float32 ones copied) against gguf
  ``gguf.quants.dequantize(t.data, t.tensor_type)`` (float32 tensors: ``t.data``, a view);
  both sides' values are checked equal. safetensors: tensordesc ``t.numpy()`` (views of the
  mapping) against ``safe_open(...).get_tensor`` (copies).

``--quick`` runs the same with 200 tensors and fewer repetitions (a few seconds; a smoke
test of the script).
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time

import numpy as np

import tensordesc as td

try:
    import gguf
    from gguf import GGMLQuantizationType as Q
    from safetensors import safe_open
    from safetensors.numpy import save_file
except ImportError as e:  # pragma: no cover
    raise SystemExit("the benchmark compares against gguf and safetensors: pip install gguf==0.19.0 safetensors==0.8.0") from e

# (values per block, bytes per block, byte offsets of the float16 scales in a block)
BLOCKS = {Q.Q8_0: (32, 34, (0,)), Q.Q4_K: (256, 144, (0, 2)), Q.Q6_K: (256, 210, (208,))}


def llama_names(count: int, hidden: int, kv: int, ffn: int, vocab: int):
    """(name, numpy shape, role) of a llama's tensors in GGUF naming, `count` of them
    (grouped-query attention: k and v project to `kv`)."""
    out = [("token_embd.weight", (vocab, hidden), "token_embd")]
    layer = 0
    while len(out) < count - 2:
        for role, shape in [
            ("attn_norm", (hidden,)),
            ("attn_q", (hidden, hidden)),
            ("attn_k", (kv, hidden)),
            ("attn_v", (kv, hidden)),
            ("attn_output", (hidden, hidden)),
            ("ffn_norm", (hidden,)),
            ("ffn_gate", (ffn, hidden)),
            ("ffn_up", (ffn, hidden)),
            ("ffn_down", (hidden, ffn)),
        ]:
            if len(out) < count - 2:
                out.append((f"blk.{layer}.{role}.weight", shape, role))
        layer += 1
    out.append(("output_norm.weight", (hidden,), "norm"))
    out.append(("output.weight", (vocab, hidden), "output"))
    return out


def gguf_type(role: str, shape) -> Q | None:
    if len(shape) == 1:
        return None  # float32
    if role in ("attn_v", "ffn_down", "output"):
        return Q.Q6_K
    if role == "token_embd":
        return Q.Q8_0
    return Q.Q4_K


def random_blocks(rng, qtype: Q, shape) -> np.ndarray:
    """Random blocks of `qtype` for a tensor of numpy shape `shape`, finite float16 scales,
    as the uint8 array GGUFWriter takes for raw quantized data."""
    qk, bb, scales = BLOCKS[qtype]
    rows, cols = int(np.prod(shape[:-1])), shape[-1]
    b = rng.integers(0, 256, (rows * cols // qk, bb), dtype=np.uint8)
    s = (rng.integers(1, 101, (b.shape[0], len(scales))) * 1e-3).astype(np.float16)
    for k, at in enumerate(scales):
        b[:, at : at + 2] = s[:, k : k + 1].view(np.uint8)
    return b.reshape(*shape[:-1], cols // qk * bb)


def write_gguf(path: str, count: int) -> int:
    # Q4_K and Q6_K blocks are 256 wide: every row is a multiple of 256.
    hidden, kv, ffn, vocab = 256, 64, 256, 1024
    rng = np.random.default_rng(0)
    w = gguf.GGUFWriter(path, "llama")
    w.add_block_count(count // 9)
    w.add_context_length(4096)
    w.add_embedding_length(hidden)
    w.add_feed_forward_length(ffn)
    w.add_head_count(hidden // 64)
    w.add_layer_norm_rms_eps(1e-5)
    for name, shape, role in llama_names(count, hidden, kv, ffn, vocab):
        q = gguf_type(role, shape)
        if q is None:
            w.add_tensor(name, rng.uniform(-1, 1, shape).astype(np.float32))
        else:
            w.add_tensor(name, random_blocks(rng, q, shape), raw_dtype=q)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return count


def write_safetensors(path: str, count: int) -> int:
    hidden, ffn, vocab = 128, 352, 1024
    rng = np.random.default_rng(1)
    tensors = {"model.embed_tokens.weight": rng.uniform(-1, 1, (vocab, hidden)).astype(np.float16)}
    layer = 0
    while len(tensors) < count - 2:
        for suffix, shape, dt in [
            ("input_layernorm.weight", (hidden,), np.float32),
            ("self_attn.q_proj.weight", (hidden, hidden), np.float16),
            ("self_attn.q_proj.bias", (hidden,), np.float32),
            ("self_attn.k_proj.weight", (hidden // 4, hidden), np.float16),
            ("self_attn.k_proj.bias", (hidden // 4,), np.float32),
            ("self_attn.v_proj.weight", (hidden // 4, hidden), np.float16),
            ("self_attn.v_proj.bias", (hidden // 4,), np.float32),
            ("self_attn.o_proj.weight", (hidden, hidden), np.float16),
            ("post_attention_layernorm.weight", (hidden,), np.float32),
            ("mlp.gate_proj.weight", (ffn, hidden), np.float16),
            ("mlp.up_proj.weight", (ffn, hidden), np.float16),
            ("mlp.down_proj.weight", (hidden, ffn), np.float16),
        ]:
            if len(tensors) < count - 2:
                tensors[f"model.layers.{layer}.{suffix}"] = rng.uniform(-1, 1, shape).astype(dt)
        layer += 1
    tensors["model.norm.weight"] = np.ones(hidden, np.float32)
    tensors["lm_head.weight"] = rng.uniform(-1, 1, (vocab, hidden)).astype(np.float16)
    save_file(tensors, path)
    return len(tensors)


def best(fns, repeat: int) -> list[float]:
    """Best time of each function, their runs interleaved."""
    times = [float("inf")] * len(fns)
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            t0 = time.perf_counter()
            fn()
            times[i] = min(times[i], time.perf_counter() - t0)
    return times


def warm(path: str) -> None:
    with open(path, "rb") as f:
        while f.read(1 << 24):
            pass


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--dir", default=tempfile.gettempdir())
    ap.add_argument("--quick", action="store_true", help="200 tensors, 2 repetitions: a smoke run")
    args = ap.parse_args()
    count = 200 if args.quick else 2000
    repeat = 2 if args.quick else args.repeat

    d = tempfile.mkdtemp(dir=args.dir, prefix="tdbench-foreign-")
    try:
        gguf_path = os.path.join(d, "model.gguf")
        st_path = os.path.join(d, "model.safetensors")
        write_gguf(gguf_path, count)
        write_safetensors(st_path, count)
        for p in (gguf_path, st_path):
            warm(p)
        run(gguf_path, st_path, count, repeat)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def run(gguf_path: str, st_path: str, count: int, repeat: int) -> None:
    # ---- GGUF
    def td_list(path):
        f = td.open(path)
        return [(k, t.shape, t.dtype) for k, t in f.items()]

    def gguf_list():
        r = gguf.GGUFReader(gguf_path, "r")
        return [(t.name, t.shape, t.tensor_type) for t in r.tensors]

    def td_gguf_arrays():
        f = td.open(gguf_path)
        return [t.read() for t in f.values()]

    def gguf_arrays():
        r = gguf.GGUFReader(gguf_path, "r")
        return [t.data if t.tensor_type == Q.F32 else gguf.quants.dequantize(t.data, t.tensor_type) for t in r.tensors]

    ours, theirs = td_list(gguf_path), gguf_list()
    assert len(ours) == len(theirs) == count
    assert [o[0] for o in ours] == [t[0] for t in theirs]
    assert all(o[1] == tuple(int(x) for x in reversed(t[1])) for o, t in zip(ours, theirs))
    for a, b in zip(td_gguf_arrays(), gguf_arrays()):
        assert a.dtype == np.float32 and np.array_equal(a, np.asarray(b, np.float32).reshape(a.shape)), "same values"

    gl_ours, gl_theirs = best([lambda: td_list(gguf_path), gguf_list], repeat)
    ga_ours, ga_theirs = best([td_gguf_arrays, gguf_arrays], max(2, repeat // 2))

    # ---- safetensors
    def st_list():
        with safe_open(st_path, framework="np") as f:
            return [(k, f.get_slice(k).get_shape(), f.get_slice(k).get_dtype()) for k in f.keys()]

    def td_st_arrays():
        f = td.open(st_path)
        return [t.numpy() for t in f.values()]

    def st_arrays():
        with safe_open(st_path, framework="np") as f:
            return [f.get_tensor(k) for k in f.keys()]

    ours, theirs = td_list(st_path), st_list()
    assert len(ours) == len(theirs) == count
    assert sorted((k, s) for k, s, _ in ours) == sorted((k, tuple(s)) for k, s, _ in theirs)
    got = dict(zip(td.open(st_path).keys(), td_st_arrays()))
    with safe_open(st_path, framework="np") as f:
        assert all(np.array_equal(got[k], f.get_tensor(k)) for k in f.keys())

    sl_ours, sl_theirs = best([lambda: td_list(st_path), st_list], repeat)
    sa_ours, sa_theirs = best([td_st_arrays, st_arrays], repeat)

    def row(label, t_ours, t_theirs, peer):
        print(label)
        print(f"  {'tensordesc':32} {t_ours * 1e3:9.2f} ms ({t_ours / count * 1e6:.2f} us/tensor)")
        print(f"  {peer:32} {t_theirs * 1e3:9.2f} ms")
        print(f"  ratio (peer / tensordesc) = {t_theirs / t_ours:.2f}x")

    print(f"{count} tensors a file, warm page cache, best of {repeat} (arrays of GGUF: best of {max(2, repeat // 2)})")
    print(f"  GGUF {os.path.getsize(gguf_path) / 1e6:.1f} MB (Q4_K / Q6_K / Q8_0 / F32), safetensors {os.path.getsize(st_path) / 1e6:.1f} MB (F32 / F16)")
    row("GGUF: open + list name, shape, type", gl_ours, gl_theirs, "gguf.GGUFReader")
    row("GGUF: open + every tensor as float32 values", ga_ours, ga_theirs, "gguf.GGUFReader + dequantize")
    row("safetensors: open + list name, shape, dtype", sl_ours, sl_theirs, "safe_open")
    row("safetensors: open + every tensor as a numpy array", sa_ours, sa_theirs, "safe_open + get_tensor")


if __name__ == "__main__":
    main()
