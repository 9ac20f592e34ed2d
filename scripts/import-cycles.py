#!/usr/bin/env python3
"""Finds circles of imports between the files of each Rust crate.

    scripts/import-cycles.py [CRATE_DIR ...]    (default: every workspace crate)

A file "imports" another when its product code (everything before its
`#[cfg(test)]` module) names an item the other file defines, through
`use crate::…`, `use super::…`, `use self::…` or an inline `crate::…` /
`super::…` path. Re-exports (`pub use`) are followed to the file that
defines the item, so a `mod.rs` that re-exports its children is not an
importer of them. Exits 1 and prints every circle (a strongly connected
component of more than one file) when there is one.
"""

import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CRATES = ["storage", "controller", "broker", "crds", "operator"]
IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def module_files(src):
    """Maps module paths (tuples) to files: lib.rs/main.rs is ()."""
    mods = {}
    for dirpath, _, files in os.walk(src):
        for f in files:
            if not f.endswith(".rs"):
                continue
            full = os.path.join(dirpath, f)
            rel = os.path.relpath(full, src)[:-3].split(os.sep)
            if rel == ["lib"]:
                mods[()] = full
            elif rel == ["main"]:
                mods.setdefault((), full)
            elif rel[-1] == "mod":
                mods[tuple(rel[:-1])] = full
            else:
                mods[tuple(rel)] = full
    return mods


def product_code(text):
    """The file without comments, strings and its trailing test module."""
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', text)
    cut = re.search(r"#\[cfg\(test\)\]\s*(pub\s+)?mod\s+" + IDENT, text)
    return text[: cut.start()] if cut else text


def expand(tree):
    """Expands a use tree (`a::{b, c::{d, e}}`) into paths."""
    tree = re.sub(r"\s+as\s+", "@", tree)
    tree = re.sub(r"\s+", "", tree)
    depth, i = 0, 0
    for i, ch in enumerate(tree):
        if ch == "{":
            break
    else:
        return [tree]
    prefix, inner = tree[:i], tree[i + 1 : tree.rindex("}")]
    parts, depth, cur = [], 0, ""
    for ch in inner:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += ch == "{"
        depth -= ch == "}"
        cur += ch
    if cur:
        parts.append(cur)
    out = []
    for p in parts:
        for e in expand(p):
            out.append(prefix + e if e != "self" else prefix.rstrip(":"))
    return out


def absolute(path, here, mods=None):
    """`crate::a::b` / `super::x` / `self::y` as segments from the crate root;
    with `mods`, also `child::z` (a path relative to this module, as
    `pub use child::Item;` in a `mod.rs`)."""
    segs = [s for s in path.split("::") if s]
    if not segs:
        return None
    if mods is not None and tuple(here) + (segs[0],) in mods:
        return list(here) + segs
    if segs[0] == "crate":
        return segs[1:]
    if segs[0] in ("super", "self"):
        base = list(here)
        while segs and segs[0] in ("super", "self"):
            if segs[0] == "super":
                if not base:
                    return None
                base.pop()
            segs = segs[1:]
        return base + segs
    return None


def analyse(crate_dir):
    src = os.path.join(crate_dir, "src")
    mods = module_files(src)
    uses, reexports = {}, {}
    for mod, path in mods.items():
        code = product_code(open(path, encoding="utf-8").read())
        reexports[mod] = {}
        uses[mod] = []
        for m in re.finditer(r"\b(pub(?:\([a-z]+\))?\s+)?use\s+([^;]+);", code):
            public = m.group(1) is not None
            for p in expand(m.group(2)):
                p, _, alias = p.partition("@")
                name = alias or p.split("::")[-1]
                target = absolute(p, mod, mods)
                if target is None:
                    continue
                if public and name != "*":
                    reexports[mod][name] = target
                elif not public:
                    uses[mod].append(target)
        # Inline paths outside `use` statements.
        body = re.sub(r"\buse\s+[^;]+;", "", code)
        for m in re.finditer(r"\b((?:crate|super|self)(?:::" + IDENT + ")+)", body):
            target = absolute(m.group(1), mod)
            if target:
                uses[mod].append(target)

    def resolve(segs, seen=0):
        cur = ()
        for i, s in enumerate(segs):
            if cur + (s,) in mods:
                cur = cur + (s,)
                continue
            if seen < 20 and s in reexports.get(cur, {}):
                return resolve(reexports[cur][s] + segs[i + 1 :], seen + 1)
            return cur
        return cur

    edges = {m: set() for m in mods}
    for mod, targets in uses.items():
        for t in targets:
            d = resolve(t)
            if d != mod and d in mods:
                edges[mod].add(d)
    return mods, edges


def cycles(nodes, edges):
    """Tarjan's strongly connected components of more than one node."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(comp)

    sys.setrecursionlimit(10000)
    for v in nodes:
        if v not in index:
            visit(v)
    return out


def main():
    crates = sys.argv[1:] or [os.path.join(ROOT, c) for c in CRATES]
    bad = 0
    for crate in crates:
        mods, edges = analyse(crate)
        name = os.path.basename(os.path.normpath(crate))
        found = cycles(list(mods), edges)
        for comp in found:
            bad += 1
            files = sorted(os.path.relpath(mods[m], ROOT) for m in comp)
            print(f"{name}: circle of imports between {', '.join(files)}")
            for m in sorted(comp):
                inside = sorted(os.path.relpath(mods[d], ROOT) for d in edges[m] if d in comp)
                print(f"    {os.path.relpath(mods[m], ROOT)} -> {', '.join(inside)}")
        if not found:
            print(f"{name}: {len(mods)} files, no circle of imports")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
