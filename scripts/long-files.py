#!/usr/bin/env python3
"""Lists product source files of the workspace over 700 lines (counted up to
their `#[cfg(test)]` module) that do not say why at their top (a
`Size (over 700 lines): ...` paragraph in the module docs). Exits 1 if any.

    scripts/long-files.py
"""

import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CRATES = ["storage", "controller", "broker", "crds", "operator"]
LIMIT = 700

bad = 0
for crate in CRATES:
    for dirpath, _, files in os.walk(os.path.join(ROOT, crate, "src")):
        for f in sorted(files):
            if not f.endswith(".rs") or f.endswith("_tests.rs"):
                continue
            path = os.path.join(dirpath, f)
            text = open(path, encoding="utf-8").read()
            cut = re.search(r"^#\[cfg\(test\)\]", text, re.M)
            product = text[: cut.start()] if cut else text
            n = product.count("\n")
            if n <= LIMIT:
                continue
            header = "".join(l for l in text.splitlines(True) if l.startswith("//!"))
            rel = os.path.relpath(path, ROOT)
            if "Size (over 700 lines)" in header:
                print(f"{rel}: {n} lines, reason given")
            else:
                print(f"{rel}: {n} lines and no reason at its top")
                bad += 1
sys.exit(1 if bad else 0)
