#!/usr/bin/env python3
"""Lists the functions of src/ longer than a limit (default 150 lines), longest first, and exits 1
when there is one: a ctest test (tests/scripts), so that no function grows past what a reader can
hold. A function is a body that opens outside any other function: after a namespace's or a
class's brace, or at file scope; its length counts the lines from the line of its opening brace
to that of its closing one. Comments, strings and character literals are skipped (their braces do
not count). Written by hand because no Debian-packaged tool reports function lengths of C++
(clang-tidy's readability-function-size counts statements, and needs a compile database).

  scripts/function_lengths.py [--limit N] [--top K] [ROOT]
  scripts/function_lengths.py --self-test     the scan on planted files (ctest runs both)
"""
import argparse
import os
import re
import sys

BLOCK_HEAD = re.compile(r"\b(namespace|class|struct|union|enum)\b[^;()]*$|\bextern\s+\"C\"\s*$")
NAME = re.compile(r"([~\w:<>]+)\s*\(")
NOT_NAMES = {"__launch_bounds__", "alignas", "__attribute__", "decltype", "noexcept", "requires"}


def function_name(head):
    """The name before a body's parameter list: the first call-like name that is not an attribute."""
    for m in NAME.finditer(head):
        if m.group(1) not in NOT_NAMES:
            return m.group(1)
    return head.strip()[-40:]


def strip(text):
    """The text with comments, string and character literals blanked (newlines kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
        elif c == 'R' and text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            k = text.find("(", i)
            delim = ")" + text[i + 2:k] + '"'
            j = text.find(delim, k)
            j = n if j < 0 else j + len(delim)
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def functions(path):
    """(name, first line, lines) of each outermost function body in the file."""
    text = strip(open(path, encoding="utf-8", errors="replace").read())
    # Preprocessor lines (macros may hold braces) are blanked too.
    text = re.sub(r"(?m)^\s*#.*(?:\\\n.*)*", lambda m: " " * len(m.group(0).replace("\n", "")) +
                  "\n" * m.group(0).count("\n"), text)
    stack = []  # each open brace: "scope" (namespace, class) or "body" (a function or inside one)
    found, last = [], 0
    line = 1
    for i, c in enumerate(text):
        if c == "\n":
            line += 1
        elif c == "{":
            head = text[last:i]
            inside = any(kind[0] == "body" for kind in stack)
            if inside:
                stack.append(("body", None, line))
            elif BLOCK_HEAD.search(head.strip()) or head.strip().endswith("="):
                stack.append(("scope" if not head.strip().endswith("=") else "init", None, line))
            else:
                stack.append(("body", function_name(head), line))
            last = i + 1
        elif c == "}":
            if stack:
                kind, name, start = stack.pop()
                if kind == "body" and name is not None:
                    found.append((name, start, line - start + 1))
            last = i + 1
        elif c == ";":
            last = i + 1
    return found


def self_test():
    """The scan sees a long function inside a namespace and a class, and nothing in a long struct, an
    initializer list, a comment or a string."""
    import tempfile
    body = "".join(f"  x += {i};\n" for i in range(160))
    text = ("namespace a {\nstruct Big {\n" + "".join(f"  int f{i} = 0;\n" for i in range(200)) + "};\n"
            "const int table[] = {\n" + "".join(f"  {i},\n" for i in range(200)) + "};\n"
            "class C {\n  int m(int x) {\n" + body + "    return x;\n  }\n};\n"
            "// void g() { } \"{\"\nconst char* s = \"{ {\";\n"
            "void f() {\n  if (true) {\n  }\n}\n}  // namespace a\n")
    with tempfile.TemporaryDirectory() as d:
        os.makedirs(os.path.join(d, "src"))
        path = os.path.join(d, "src", "x.cpp")
        open(path, "w").write(text)
        got = sorted((name, n) for name, _, n in functions(path))
    want = [("f", 4), ("m", 163)]
    if got != want:
        print(f"self-test: found {got}, expected {want}", file=sys.stderr)
        return 1
    return 0


def main():
    if "--self-test" in sys.argv:
        return self_test()
    ap = argparse.ArgumentParser()
    ap.add_argument("root", nargs="?", default=os.path.join(os.path.dirname(__file__), "..", "src"))
    ap.add_argument("--limit", type=int, default=150)
    ap.add_argument("--top", type=int, default=0, help="also print the K longest")
    a = ap.parse_args()
    rows = []
    for d, _, files in os.walk(a.root):
        for f in files:
            if f.endswith((".cpp", ".h", ".cu", ".cuh")):
                p = os.path.join(d, f)
                for name, start, n in functions(p):
                    rows.append((n, os.path.relpath(p, os.path.join(a.root, "..")), start, name))
    rows.sort(reverse=True)
    for n, p, start, name in rows[: a.top]:
        print(f"{n:5d}  {p}:{start}  {name}")
    over = [r for r in rows if r[0] > a.limit]
    for n, p, start, name in over:
        print(f"{p}:{start}: {name} is {n} lines (limit {a.limit}): split it into named steps", file=sys.stderr)
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
