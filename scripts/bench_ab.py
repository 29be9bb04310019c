#!/usr/bin/env python3
"""Compare two builds of a benchmark binary by running them alternately.

    scripts/bench_ab.py --runs 8 BEFORE AFTER -- tiles

runs `BEFORE tiles --bench` and `AFTER tiles --bench` in pairs, the order of the two
swapped at every pair: on a small VM whichever binary runs first in a pair can read several
per cent faster, so a comparison that always runs one build first is biased. Every figure
a line reports against its target (the `N.NNx ... (target ...)` ratios of
`cargo bench --bench read` and the others) is collected per row, and the medians and
ranges of both builds are printed side by side. The binaries are the `target/release/deps/`
executables that `cargo bench --bench NAME --no-run` names; copy the first build's away
before building the second.

Only the standard library is used.
"""

import argparse
import re
import statistics
import subprocess
import sys

# A row's label: what a line says before its first colon ("11. 2048 x 2048 FLOAT32 as
# 16 x 16 tiles, window -> FLOAT32 512 x 512 (1024 KiB, ~1024 regions)").
ROW = re.compile(r"^\s*(\d+[a-z]?\.\s[^:]*):")
# A ratio reported against a target: "0.66x memcpy throughput, general 0.07x (target".
RATIO = re.compile(r"([0-9]+(?:\.[0-9]+)?)x[^()]*?\(target")


def figures(output):
    """{(row label, k): ratio} for the k-th targeted ratio of every labelled line."""
    found = {}
    for line in output.splitlines():
        row = ROW.match(line)
        if not row:
            continue
        for k, m in enumerate(RATIO.finditer(line)):
            found[(row.group(1).strip(), k)] = float(m.group(1))
    return found


def run(binary, args):
    out = subprocess.run(
        [binary, *args, "--bench"],
        check=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    return figures(out.stdout)


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=6, help="pairs of runs (default 6)")
    p.add_argument("before")
    p.add_argument("after")
    p.add_argument("args", nargs="*", help="the benchmark's filter and options")
    a = p.parse_args(argv)
    if a.runs < 1:
        p.error("--runs must be at least 1")
    got = {a.before: {}, a.after: {}}
    for i in range(a.runs):
        order = (a.before, a.after) if i % 2 == 0 else (a.after, a.before)
        for b in order:
            for key, v in run(b, a.args).items():
                got[b].setdefault(key, []).append(v)
    keys = [k for k in got[a.before] if k in got[a.after]]
    if not keys:
        print("no targeted figures found in the output", file=sys.stderr)
        return 1

    def summary(vs):
        return f"{statistics.median(vs):.3f}x [{min(vs):.2f}-{max(vs):.2f}]"

    print(f"{a.runs} pairs, order swapped at every pair; medians [ranges]")
    for key in keys:
        label, k = key
        name = label if k == 0 else f"{label} (figure {k + 1})"
        before, after = got[a.before][key], got[a.after][key]
        change = statistics.median(after) / statistics.median(before)
        print(f"{name}\n    before {summary(before)}  after {summary(after)}  after/before {change:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
