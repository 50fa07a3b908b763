#!/usr/bin/env python3
"""Check that every citation of zi's docs resolves, and that nothing cites documents outside the repository.

Code comments explain a rule by pointing at the page and heading of docs/ that states it
(`docs/rpc.md#backpressure-and-bounds`); the docs link each other the same way
(`[…](approvals.md#escalation)`, `[…](#zis-decisions)`). This script finds those citations in
the repository's sources, tests, benches, scripts, examples and docs and checks that

- the cited file exists, and
- the anchor after `#` is one of that Markdown file's headings, as GitHub derives anchors:
  lowercase, punctuation dropped except `-` and `_`, each space a `-`, a repeated heading
  suffixed `-1`, `-2`, …

It also rejects citations of the specifications zi was built from, which live outside the
repository (`rpc-reference §3.1`, `runtime-reference`, a bare `§n`): a newcomer cannot follow
them, so the rule belongs in docs/ and the comment cites that.

Usage: scripts/doc-links.py [ROOT]   (default: the repository this script is in)
Exit status 1 when a citation is broken or points outside the repository.
"""

import os
import re
import sys

SOURCE_SUFFIXES = (".rs", ".md", ".py", ".sh", ".lua", ".ts", ".toml", ".json")
SKIP_DIRS = {"target", "node_modules", ".git", ".venv", "mcp-venv"}
SKIP_FILES = {"docs/rpc-schema.json", "scripts/doc-links.py"}

# `docs/x.md#anchor` anywhere (code comments, strings), and `x.md#anchor` / `#anchor` as
# Markdown link targets inside docs/.
CODE_CITATION = re.compile(r"\bdocs/([A-Za-z0-9_.-]+\.md)(?:#([A-Za-z0-9_-]+))?")
MARKDOWN_LINK = re.compile(r"\]\(([^)\s]*)\)")
OUTSIDE = re.compile(r"§|\b(?:rpc|runtime|delegation|approvals)-reference\b")


def anchors(path):
    """The GitHub heading anchors of a Markdown file."""
    found, seen, fenced = set(), {}, False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.lstrip().startswith("```"):
                fenced = not fenced
                continue
            m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
            if fenced or not m:
                continue
            slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            found.add(slug if n == 0 else f"{slug}-{n}")
    return found


def files(root):
    for directory, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("."))
        for name in sorted(names):
            if name.endswith(SOURCE_SUFFIXES):
                yield os.path.join(directory, name)


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    cache = {}
    problems, citations = [], 0

    def check(where, target_path, anchor):
        nonlocal citations
        citations += 1
        rel = os.path.relpath(target_path, root)
        if not os.path.exists(target_path):
            problems.append(f"{where}: {rel} does not exist")
        elif anchor is not None:
            if target_path not in cache:
                cache[target_path] = anchors(target_path)
            if anchor not in cache[target_path]:
                problems.append(f"{where}: {rel} has no heading #{anchor}")

    for path in files(root):
        rel = os.path.relpath(path, root)
        if rel in SKIP_FILES:
            continue
        in_docs = rel.startswith("docs" + os.sep) and path.endswith(".md")
        fenced = False
        with open(path, encoding="utf-8", errors="replace") as f:
            for number, line in enumerate(f, 1):
                where = f"{rel}:{number}"
                if OUTSIDE.search(line):
                    problems.append(f"{where}: cites a document outside the repository: {line.strip()}")
                for m in CODE_CITATION.finditer(line):
                    check(where, os.path.join(root, "docs", m.group(1)), m.group(2))
                if not path.endswith(".md"):
                    continue
                if line.lstrip().startswith("```"):
                    fenced = not fenced
                if fenced:
                    continue
                for m in MARKDOWN_LINK.finditer(re.sub(r"`[^`]*`", "", line)):
                    target = m.group(1)
                    if re.match(r"[a-z]+:", target) or target.startswith("<"):
                        continue
                    file_part, _, anchor = target.partition("#")
                    if file_part and not in_docs and not file_part.endswith(".md"):
                        # Links of the README and other pages to sources: the file must exist.
                        check(where, os.path.normpath(os.path.join(os.path.dirname(path), file_part)), None)
                        continue
                    target_path = path if not file_part else os.path.normpath(os.path.join(os.path.dirname(path), file_part))
                    check(where, target_path, anchor or None if target_path.endswith(".md") else None)

    for problem in problems:
        print(problem)
    print(f"{citations} doc citations checked, {len(problems)} problems", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
