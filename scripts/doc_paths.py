#!/usr/bin/env python3
"""Checks that every file a document names exists: paths under the repository's folders (src/...,
tests/..., scripts/..., docs/..., bench/..., fuzz/..., recipes/...) must exist as written, and bare
file names (gpt2_pass.cpp, op_list.h) must be the name of some file of the tree. Prints each
missing one with its line and exits 1; a ctest test runs it over the documents that describe the
code (docs/ARCHITECTURE.md, docs/dev/adding_an_op.md), so they cannot name deleted files.

  scripts/doc_paths.py DOC.md [DOC.md ...]
  scripts/doc_paths.py --self-test
"""
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
FOLDERS = ("src", "tests", "scripts", "docs", "bench", "fuzz", "recipes")
PATH = re.compile(r"(?<![\w./-])((?:%s)/[\w./*-]*[\w*])" % "|".join(FOLDERS))
BARE = re.compile(r"(?<![\w./-])([A-Za-z_][\w-]*\.(?:cpp|h|cu|cuh|py|sh))\b")


def tree_names(root):
    names = set()
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if not x.startswith(".") and x not in ("build", "deps", "node_modules")]
        names.update(files)
    return names


def missing(doc, root=ROOT, names=None):
    names = names if names is not None else tree_names(root)
    out = []
    for n, line in enumerate(open(doc, encoding="utf-8"), 1):
        for m in PATH.finditer(line):
            p = m.group(1).rstrip(".")
            if "*" in p or line[m.end():m.end() + 1] == "<":  # a glob or a <placeholder>: a pattern
                continue
            if not os.path.exists(os.path.join(root, p)):
                out.append(f"{doc}:{n}: {p} does not exist")
        for m in BARE.finditer(line):
            if m.group(1) not in names:
                out.append(f"{doc}:{n}: no file of the tree is named {m.group(1)}")
    return out


def self_test():
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        os.makedirs(os.path.join(d, "src/model"))
        open(os.path.join(d, "src/model/gpt2.h"), "w").close()
        doc = os.path.join(d, "doc.md")
        open(doc, "w").write("See src/model/gpt2.h and gpt2.h, not src/model/gpt2_task.cpp nor gone.cpp;\n"
                             "bench/*.py is a glob, src/model/<family>.h a pattern; docs/ alone is no file.\n")
        got = missing(doc, d)
    want = [f"{doc}:1: src/model/gpt2_task.cpp does not exist", f"{doc}:1: no file of the tree is named gone.cpp"]
    if got != want:
        print(f"self-test: {got}, expected {want}", file=sys.stderr)
        return 1
    return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    names = tree_names(ROOT)
    bad = [m for doc in sys.argv[1:] for m in missing(doc, ROOT, names)]
    for m in bad:
        print(m, file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
