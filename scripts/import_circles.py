#!/usr/bin/env python3
"""Fail when files of a Rust crate import each other in a circle (docs/repository.md, "No
import circles"; decision 164).

Each `.rs` file is a module (`mod.rs` / `lib.rs` / `main.rs` name their directory's). A
file depends on the module each `crate::…` or `super::…` path in its code names (comments
skipped; `use a::{b, c}` groups expanded), resolved to the longest module path that is a
file of the crate. Edges between a module and its own descendants are not counted: the
parent declares and re-exports its children, a child reads its parent through `super`.
Any strongly connected group of two or more files is reported.

    python3 scripts/import_circles.py src capi/src cli/src python/src
"""

import os
import re
import sys


def modules(root):
    """Module path (tuple) -> file, for every .rs file below root."""
    files = {}
    for d, _, names in os.walk(root):
        for f in names:
            if f.endswith(".rs"):
                path = os.path.join(d, f)
                rel = os.path.relpath(path, root)[:-3].split(os.sep)
                if rel[-1] in ("mod", "lib", "main"):
                    rel = rel[:-1]
                files[tuple(rel)] = path
    return files


def code_of(path):
    """The file's text without comment lines and without a trailing `mod tests { … }`."""
    text = open(path, encoding="utf-8").read()
    text = re.sub(r"#\[cfg\(test\)\]\s*mod tests\s*\{.*\Z", "", text, flags=re.S)
    return "\n".join(l for l in text.split("\n") if not l.strip().startswith("//"))


def edges_of(files):
    def resolve(path):
        for i in range(len(path), -1, -1):
            if tuple(path[:i]) in files:
                return tuple(path[:i])
        return None

    edges = {}
    for mod, path in files.items():
        src = code_of(path)
        deps = set()
        for m in re.finditer(r"\bcrate::((?:\w+::)*\w+)", src):
            deps.add(resolve(m.group(1).split("::")))
        for m in re.finditer(r"\b((?:super::)+)((?:\w+::)*\w+)", src):
            up = m.group(1).count("super::")
            deps.add(resolve(list(mod[: len(mod) - up]) + m.group(2).split("::")))
        for m in re.finditer(r"\b(crate|(?:super::)*super)::((?:\w+::)*)\{([^}]*)\}", src):
            if m.group(1) == "crate":
                base = []
            else:
                base = list(mod[: len(mod) - m.group(1).count("super")])
            pre = [p for p in m.group(2).split("::") if p]
            for item in m.group(3).split(","):
                item = item.strip().split(" as ")[0]
                if item and item != "self":
                    deps.add(resolve(base + pre + item.split("::")))
        deps.discard(None)
        deps.discard(mod)
        # A module and its descendants are one unit here.
        edges[mod] = {d for d in deps if d[: len(mod)] != mod and mod[: len(d)] != d}
    return edges


def circles(edges):
    """Strongly connected groups of two or more modules (iterative Tarjan)."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = 0
    for start in edges:
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(edges.get(nxt, ())))))
                elif nxt in on:
                    low[v] = min(low[v], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                group = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    group.append(w)
                    if w == v:
                        break
                if len(group) > 1:
                    out.append(sorted("/".join(g) or "<root>" for g in group))
    return out


def main(roots):
    found = 0
    for root in roots:
        for group in circles(edges_of(modules(root))):
            found += 1
            print(f"{root}: files importing each other: {', '.join(group)}")
    if found:
        sys.exit(1)
    print(f"no import circles in {', '.join(roots)}")


if __name__ == "__main__":
    main(sys.argv[1:] or ["src"])
