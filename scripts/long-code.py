#!/usr/bin/env python3
"""List the Rust functions over 100 lines, files over 600 non-test lines and test files over 800.

The limits of docs/architecture.md ("Inside the other large crates"): no function over about 100
lines without a reason written above it, no file over about 600 lines outside tests; tests get the
same discipline with a file limit of 800 lines.

A function counts from its `fn` line to its closing brace. A function is excused when a comment
line directly above it (among its doc comments and attributes) starts with `// Long on purpose:` and gives
the reason; excused functions are listed separately so the reasons can be read. The function limit
holds for test code too: `#[test]` functions and every function of a test file or of a
`#[cfg(test)]` item (helpers included).

Test code: files under `tests/` directories and files named `tests.rs` or `*_tests.rs` (test
files), `#[cfg(test)]` items (whole `mod tests { … }` blocks) and `#[test]` functions. A file's
non-test lines are its lines minus those of its `#[cfg(test)]` items; a test file's lines all
count against the test-file limit, and so do the lines of a source file's `#[cfg(test)]` items.
`benches/` directories are not checked.

Usage: scripts/long-code.py [--fn-limit N] [--file-limit N] [--test-file-limit N] [ROOT...]
(default: crates/). Exit status 1 when anything unexcused is over a limit, so the claim can be
checked in CI.
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


def scan_file(path, fn_limit, test_file):
    """Non-test lines, test lines and the functions over `fn_limit` lines of one file, each
    function as (length, name, line, excuse or None, whether it is test code)."""
    with open(path, encoding="utf-8") as f:
        src = f.read()
    code = blank_non_code(src)
    lines = src.split("\n")
    tests = test_spans(code)

    def in_tests(offset):
        return test_file or any(a <= offset <= b for a, b in tests)

    total = len(lines) - (1 if src.endswith("\n") else 0)
    if test_file:
        non_test, test = 0, total
    else:
        test_lines = set()
        for a, b in tests:
            test_lines.update(range(line_of(code, a), line_of(code, b) + 1))
        non_test, test = total - len(test_lines), len(test_lines)

    long_fns = []
    for m in FN.finditer(code):
        body = item_body(code, m.end())
        if not body:
            continue
        first, last = line_of(code, m.start()), line_of(code, body[1])
        length = last - first + 1
        if length > fn_limit:
            above = leading_lines(lines, first)
            excused = next((l.strip() for l in reversed(above) if l.strip().startswith("// Long on purpose:")), None)
            long_fns.append((length, m.group(1), first, excused, in_tests(m.start())))
    return non_test, test, long_fns


def is_test_file(path):
    parts = path.split(os.sep)
    name = parts[-1]
    return "tests" in parts[:-1] or name == "tests.rs" or name.endswith("_tests.rs")


def rust_files(root):
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in ("target", "benches", ".git", "node_modules"))
        for name in sorted(filenames):
            if name.endswith(".rs"):
                yield os.path.join(dirpath, name)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("roots", nargs="*", default=["crates"])
    ap.add_argument("--fn-limit", type=int, default=100)
    ap.add_argument("--file-limit", type=int, default=600)
    ap.add_argument("--test-file-limit", type=int, default=800)
    args = ap.parse_args()

    over_files, over_test_files, over_fns, excused_fns = [], [], [], []
    for path in (p for root in args.roots for p in rust_files(root)):
        non_test, test, fns = scan_file(path, args.fn_limit, is_test_file(path))
        if non_test > args.file_limit:
            over_files.append((non_test, path))
        if test > args.test_file_limit:
            over_test_files.append((test, path))
        for length, name, line, excused, in_test in fns:
            label = f"{name} (test)" if in_test else name
            (excused_fns if excused else over_fns).append((length, f"{path}:{line}", label, excused))

    print(f"files over {args.file_limit} non-test lines: {len(over_files)}")
    for n, path in sorted(over_files, reverse=True):
        print(f"  {n:5}  {path}")
    print(f"test files (or test lines of a file) over {args.test_file_limit} lines: {len(over_test_files)}")
    for n, path in sorted(over_test_files, reverse=True):
        print(f"  {n:5}  {path}")
    print(f"functions over {args.fn_limit} lines without a reason: {len(over_fns)}")
    for n, at, name, _ in sorted(over_fns, reverse=True):
        print(f"  {n:5}  {name}  {at}")
    print(f"functions over {args.fn_limit} lines with a `// Long on purpose:` reason: {len(excused_fns)}")
    for n, at, name, why in sorted(excused_fns, reverse=True):
        print(f"  {n:5}  {name}  {at}\n         {why}")
    return 1 if over_files or over_test_files or over_fns else 0


if __name__ == "__main__":
    sys.exit(main())
