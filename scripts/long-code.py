#!/usr/bin/env python3
"""List the non-test Rust functions over 100 lines and files over 600 non-test lines.

The limits of docs/architecture.md ("Inside the other large crates"): no function over about 100
lines without a reason written above it, no file over about 600 lines outside tests.

A function counts from its `fn` line to its closing brace. A function is excused when a comment
line directly above it (among its doc comments and attributes) starts with `// Long on purpose:` and gives
the reason; excused functions are listed separately so the reasons can be read.

Test code is not counted: files under `tests/` or `benches/` directories, `#[cfg(test)]` items
(whole `mod tests { … }` blocks) and `#[test]` functions. A file's non-test lines are its lines
minus those of its `#[cfg(test)]` items.

Usage: scripts/long-code.py [--fn-limit N] [--file-limit N] [ROOT...]   (default: crates/)
Exit status 1 when anything unexcused is over a limit, so the claim can be checked in CI.
"""

import argparse
import os
import re
import sys


def blank_non_code(src):
    """Replace comments, strings and char literals by spaces, keeping newlines and offsets,
    so braces inside them are not counted."""
    out = list(src)
    i, n = 0, len(src)

    def blank(a, b):
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            blank(i, j)
            i = j
        elif src.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if src.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif src.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            blank(i, j)
            i = j
        elif (m := re.compile(r'b?r(#*)"').match(src, i)) and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")):
            end = '"' + m.group(1)
            j = src.find(end, m.end())
            j = n if j < 0 else j + len(end)
            blank(i, j)
            i = j
        elif c == '"' or (c == "b" and src.startswith('b"', i) and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_"))):
            j = i + (2 if c == "b" else 1)
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            blank(i, j + 1)
            i = j + 1
        elif c == "'":
            # A char literal ('x', '\n', '\u{..}', '{') or a lifetime ('a).
            m = re.compile(r"'(\\u\{[0-9a-fA-F]+\}|\\.|[^\\'])'").match(src, i)
            if m:
                blank(i, m.end())
                i = m.end()
            else:
                i += 1
        else:
            i += 1
    return "".join(out)


def matching_brace(code, open_at):
    depth = 0
    for k in range(open_at, len(code)):
        if code[k] == "{":
            depth += 1
        elif code[k] == "}":
            depth -= 1
            if depth == 0:
                return k
    return len(code) - 1


def item_body(code, start):
    """The `{ … }` span of the item starting at `start` (the first `{` at bracket depth 0), or
    None when the item ends with `;` first (a declaration, `mod x;`)."""
    depth = 0
    for k in range(start, len(code)):
        ch = code[k]
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif depth == 0 and ch == "{":
            return k, matching_brace(code, k)
        elif depth == 0 and ch == ";":
            return None
    return None


def line_of(code, offset):
    return code.count("\n", 0, offset) + 1


ATTR_OR_DOC = re.compile(r"^\s*(#\[|///|//!|//)")


def leading_lines(lines, fn_line):
    """The comment and attribute lines directly above line `fn_line` (1-based)."""
    k = fn_line - 2
    found = []
    while k >= 0 and ATTR_OR_DOC.match(lines[k]):
        found.append(lines[k])
        k -= 1
    return found


def test_spans(code):
    """Offsets of `#[cfg(test)]` items and `#[test]` functions."""
    spans = []
    for m in re.finditer(r"#\[\s*(cfg\s*\(\s*test\s*\)|test|tokio::test[^\]]*)\s*\]", code):
        body = item_body(code, m.end())
        if body:
            spans.append((m.start(), body[1]))
        else:
            end = code.find(";", m.end())
            spans.append((m.start(), end if end >= 0 else m.end()))
    return spans


FN = re.compile(r"\bfn\s+([A-Za-z_][A-Za-z0-9_]*)")


def scan_file(path, fn_limit):
    with open(path, encoding="utf-8") as f:
        src = f.read()
    code = blank_non_code(src)
    lines = src.split("\n")
    tests = test_spans(code)

    def in_tests(offset):
        return any(a <= offset <= b for a, b in tests)

    test_lines = set()
    for a, b in tests:
        test_lines.update(range(line_of(code, a), line_of(code, b) + 1))
    total = len(lines) - (1 if src.endswith("\n") else 0)
    non_test = total - len(test_lines)

    long_fns = []
    for m in FN.finditer(code):
        if in_tests(m.start()):
            continue
        body = item_body(code, m.end())
        if not body:
            continue
        first, last = line_of(code, m.start()), line_of(code, body[1])
        length = last - first + 1
        if length > fn_limit:
            above = leading_lines(lines, first)
            excused = next((l.strip() for l in reversed(above) if l.strip().startswith("// Long on purpose:")), None)
            long_fns.append((length, m.group(1), first, excused))
    return non_test, long_fns


def rust_files(root):
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in ("target", "tests", "benches", ".git"))
        for name in sorted(filenames):
            if name.endswith(".rs") and name != "tests.rs" and not name.endswith("_tests.rs"):
                yield os.path.join(dirpath, name)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("roots", nargs="*", default=["crates"])
    ap.add_argument("--fn-limit", type=int, default=100)
    ap.add_argument("--file-limit", type=int, default=600)
    args = ap.parse_args()

    over_files, over_fns, excused_fns = [], [], []
    for path in (p for root in args.roots for p in rust_files(root)):
        non_test, fns = scan_file(path, args.fn_limit)
        if non_test > args.file_limit:
            over_files.append((non_test, path))
        for length, name, line, excused in fns:
            (excused_fns if excused else over_fns).append((length, f"{path}:{line}", name, excused))

    print(f"files over {args.file_limit} non-test lines: {len(over_files)}")
    for n, path in sorted(over_files, reverse=True):
        print(f"  {n:5}  {path}")
    print(f"functions over {args.fn_limit} lines without a reason: {len(over_fns)}")
    for n, at, name, _ in sorted(over_fns, reverse=True):
        print(f"  {n:5}  {name}  {at}")
    print(f"functions over {args.fn_limit} lines with a `// Long on purpose:` reason: {len(excused_fns)}")
    for n, at, name, why in sorted(excused_fns, reverse=True):
        print(f"  {n:5}  {name}  {at}\n         {why}")
    return 1 if over_files or over_fns else 0


if __name__ == "__main__":
    sys.exit(main())
