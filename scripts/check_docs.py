#!/usr/bin/env python3
"""The documentation check `make docs-check` runs (and `make test` with it):

1. every fence tagged ```sh runnable in README.md and docs/**/*.md runs from the
   repository root with build/ first on PATH, under `bash -euo pipefail` and `timeout 60`;
2. every relative link resolves to a file, and every #anchor to a heading of its page;
3. no file of the repository names a development session by number.

Prints what failed, file and line; exit status 1 if anything did.

  scripts/check_docs.py [--no-run]    (--no-run: links and words only)"""
import argparse
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FENCE = re.compile(r"^(`{3,}|~{3,})(.*)$")
LINK = re.compile(r"(?<!\!)\[[^\]]*\]\(([^)\s]+)\)|\!\[[^\]]*\]\(([^)\s]+)\)")


def pages():
    out = [os.path.join(ROOT, "README.md")]
    for folder, _, files in os.walk(os.path.join(ROOT, "docs")):
        out += [os.path.join(folder, f) for f in sorted(files) if f.endswith(".md")]
    return sorted(out)


def blocks(text):
    """(line, info string, body) of each fenced block; and the text outside fences."""
    found, outside, fence, info, body, start = [], [], None, "", [], 0
    for n, line in enumerate(text.split("\n"), 1):
        m = FENCE.match(line)
        if fence is None and m:
            fence, info, body, start = m.group(1), m.group(2).strip(), [], n
        elif fence is not None and line.strip() == fence:
            found.append((start, info, "\n".join(body)))
            fence = None
        elif fence is not None:
            body.append(line)
        else:
            outside.append((n, line))
    return found, outside


def slug(heading):
    """GitHub's anchor of a heading: lower case, punctuation but - and _ dropped, spaces to -."""
    text = re.sub(r"`|\*\*|\*", "", heading.strip()).lower()
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        _, outside = blocks(open(path, encoding="utf-8").read())
        seen, out = {}, set()
        for _, line in outside:
            m = re.match(r"^#{1,6} (.*)$", line)
            if m:
                s = slug(m.group(1))
                out.add(s if s not in seen else f"{s}-{seen[s]}")
                seen[s] = seen.get(s, 0) + 1
        cache[path] = out
    return cache[path]


def check_links(path, outside, problems):
    for n, line in outside:
        for m in LINK.finditer(line):
            target = m.group(1) or m.group(2)
            if re.match(r"^[a-z]+:", target):  # http:, https:, mailto:
                continue
            file, _, anchor = target.partition("#")
            resolved = os.path.normpath(os.path.join(os.path.dirname(path), file)) if file else path
            where = f"{os.path.relpath(path, ROOT)}:{n}"
            if not os.path.exists(resolved):
                problems.append(f"{where}: link to {target}: no such file")
            elif anchor and resolved.endswith(".md") and anchor not in anchors(resolved):
                problems.append(f"{where}: link to {target}: no heading with that anchor")


def run_block(path, line, body, problems):
    env = dict(os.environ, PATH=os.path.join(ROOT, "build") + os.pathsep + os.environ.get("PATH", ""))
    try:
        r = subprocess.run(["timeout", "60", "bash", "-euo", "pipefail", "-c", body], cwd=ROOT, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=90)
        status, output = r.returncode, r.stdout
    except subprocess.TimeoutExpired as e:
        status, output = "timeout", e.stdout or ""
    where = f"{os.path.relpath(path, ROOT)}:{line}"
    if status != 0:
        tail = "\n".join(str(output).splitlines()[-15:])
        problems.append(f"{where}: the runnable block failed (exit {status}):\n{tail}")
    else:
        print(f"ran {where}")


def check_words(problems):
    r = subprocess.run(["git", "grep", "--untracked", "-n", "-I", "-i", "-E", r"session [0-9]+", "--", ".", ":!*.svg", ":!*.png"], cwd=ROOT,
                       stdout=subprocess.PIPE, text=True)
    for hit in r.stdout.splitlines():
        problems.append(f"{hit[:160]}: names a development session by number (cite a docs section, a date or a commit)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--no-run", action="store_true")
    a = ap.parse_args()
    problems, ran = [], 0
    for path in pages():
        found, outside = blocks(open(path, encoding="utf-8").read())
        check_links(path, outside, problems)
        for line, info, body in found:
            if info.split()[:2] == ["sh", "runnable"] and not a.no_run:
                run_block(path, line, body, problems)
                ran += 1
    check_words(problems)
    for p in problems:
        print(p)
    print(f"docs check: {len(pages())} pages, {ran} runnable blocks, {len(problems)} problems")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
