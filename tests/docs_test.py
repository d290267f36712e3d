#!/usr/bin/env python3
"""The repository explains itself, and only with what it holds (ctest `docs.*`, every preset).

- every relative link and `#anchor` in README.md, docs/*.md and results/**/*.md resolves: the file exists inside
  the repository, the anchor is a heading of that file (GitHub's slugs) or an explicit `<a id>`;
- no tracked file refers to a path outside the repository: a `../` path that climbs above the repository's root
  from the file's folder, or one that stays inside but names nothing there (build/ outputs excepted), and no file
  names the team's notes that live beside the repository, not in it;
- README.md is a guide of at most 400 lines, docs/ has the pages README's index promises, and README, docs/ and
  results/ speak of commits, dates and machine folders, never of "issue N", "this session" or "this VM".

    python3 tests/docs_test.py [REPO_ROOT [TEST ...]]     TEST: Links, NothingOutside, Guide (default: all)

Standard library only; git is used to list tracked files when the tree is a git checkout, else every file is."""
import os
import re
import subprocess
import sys
import unittest

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
README_MAX_LINES = 400
DOC_PAGES = ["numerics", "sweep", "thresholds", "diagnose", "diagnose-model", "benchmarks", "kernels",
             "kernel-spec", "peers", "findings", "contributing"]
# Words that mean something only to whoever wrote them.
PRIVATE_WORDS = re.compile(r"\bissues? #?\d+|\bthis session\b|\bthis (?:development )?VM\b|\bdevelopment VM\b", re.I)
# Notes the team keeps beside the repository, never in it.
OUTSIDE_NOTES = ("NUMERICS" + ".md", "STYLE" + ".md")  # spelt so that this file does not name them
TEXT_SUFFIXES = (".md", ".cpp", ".hpp", ".h", ".py", ".sh", ".cmake", ".txt", ".json", ".inc", ".in", ".yml")

FENCE = re.compile(r"^\s*(```|~~~)")
LINK = re.compile(r"(?<!!)\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
IMAGE = re.compile(r"!\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HREF = re.compile(r"<(?:a|img)\b[^>]*\b(?:href|src)=\"([^\"]+)\"", re.I)
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
EXPLICIT_ANCHOR = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"", re.I)
INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1")


def tracked_files():
    try:
        out = subprocess.run(["git", "-C", ROOT, "ls-files", "-z"], capture_output=True, check=True).stdout
        return sorted(p for p in out.decode().split("\0") if p)
    except (OSError, subprocess.CalledProcessError):
        files = []
        for d, dirs, names in os.walk(ROOT):
            dirs[:] = [x for x in dirs if x not in (".git", "build")]
            files += [os.path.relpath(os.path.join(d, n), ROOT) for n in names]
        return sorted(files)


def markdown_files(files):
    return [f for f in files if f.endswith(".md") and (f == "README.md" or f.startswith(("docs/", "results/")))]


def prose_lines(text):
    """(line number, line) of a Markdown text outside fenced code blocks."""
    fenced = False
    for no, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield no, line


def slug(heading):
    """GitHub's anchor of a heading: links and code marks dropped, lower case, punctuation but - and _ removed,
    spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"<[^>]+>", "", text).lower()
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


_anchor_cache = {}


def anchors_of(path):
    if path not in _anchor_cache:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        seen, anchors = {}, set()
        for _, line in prose_lines(text):
            for a in EXPLICIT_ANCHOR.findall(line):
                anchors.add(a)
            m = HEADING.match(line)
            if m:
                s = slug(m.group(2))
                n = seen.get(s, 0)
                seen[s] = n + 1
                anchors.add(s if n == 0 else f"{s}-{n}")
        _anchor_cache[path] = anchors
    return _anchor_cache[path]


def inside(path):
    return os.path.commonpath([ROOT, os.path.abspath(path)]) == ROOT


def link_problems(md):
    path = os.path.join(ROOT, md)
    with open(path, encoding="utf-8") as f:
        text = f.read()
    problems = []
    for no, line in prose_lines(text):
        line = INLINE_CODE.sub("", line)
        for target in LINK.findall(line) + IMAGE.findall(line) + HREF.findall(line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto:
                continue
            file_part, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
            where = f"{md}:{no}: link '{target}'"
            if not inside(dest):
                problems.append(f"{where} leaves the repository")
            elif not os.path.exists(dest):
                problems.append(f"{where}: {os.path.relpath(dest, ROOT)} does not exist")
            elif anchor:
                if not dest.endswith(".md"):
                    problems.append(f"{where}: an anchor into a file that is not Markdown")
                elif anchor not in anchors_of(dest):
                    problems.append(f"{where}: {os.path.relpath(dest, ROOT)} has no heading '#{anchor}'")
    return problems


class Links(unittest.TestCase):
    def test_every_relative_link_and_anchor_resolves(self):
        files = markdown_files(tracked_files())
        self.assertIn("README.md", files)
        problems = [p for md in files for p in link_problems(md)]
        self.assertEqual(problems, [], "broken links:\n" + "\n".join(problems))

    def test_slugs_follow_github(self):
        self.assertEqual(slug("Cells (`cells.csv`)"), "cells-cellscsv")
        self.assertEqual(slug("`halfmap diagnose --model net.onnx`: your own network"),
                         "halfmap-diagnose---model-netonnx-your-own-network")
        self.assertEqual(slug("Where the 1/√d goes"), "where-the-1d-goes")
        self.assertEqual(slug("fp8 and MX: three ways"), "fp8-and-mx-three-ways")


class NothingOutside(unittest.TestCase):
    def test_no_path_leaves_the_repository(self):
        files = tracked_files()
        names = {os.path.basename(f) for f in files}
        notes = [n for n in OUTSIDE_NOTES if n not in names]
        problems = []
        for rel in files:
            if not rel.endswith(TEXT_SUFFIXES) or rel.startswith(("tests/fuzz/corpus/", "results/")):
                continue
            path = os.path.join(ROOT, rel)
            try:
                with open(path, encoding="utf-8") as f:
                    text = f.read()
            except (UnicodeDecodeError, OSError):
                continue
            for no, line in enumerate(text.splitlines(), 1):
                for m in re.finditer(r"(?<![\w./])((?:\.\./)+[\w.\-]+(?:/[\w.\-]+)*)", line):
                    dest = os.path.normpath(os.path.join(os.path.dirname(path), m.group(1)))
                    if not inside(dest):
                        problems.append(f"{rel}:{no}: '{m.group(1)}' is outside the repository")
                    elif not os.path.exists(dest) and not os.path.relpath(dest, ROOT).startswith("build"):
                        problems.append(f"{rel}:{no}: '{m.group(1)}' names nothing in the repository")
                for n in notes:
                    if n in line:
                        problems.append(f"{rel}:{no}: names {n}, which is not in the repository "
                                        "(the facts are in docs/numerics.md, the code style in docs/contributing.md)")
        self.assertEqual(problems, [], "references outside the repository:\n" + "\n".join(problems))


class Guide(unittest.TestCase):
    def test_readme_is_a_guide(self):
        with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
            lines = f.read().splitlines()
        self.assertLessEqual(len(lines), README_MAX_LINES,
                             f"README.md has {len(lines)} lines; the reference belongs in docs/")

    def test_docs_has_its_pages_and_readme_indexes_them(self):
        with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
            readme = f.read()
        for page in DOC_PAGES:
            path = os.path.join(ROOT, "docs", page + ".md")
            self.assertTrue(os.path.exists(path), f"docs/{page}.md is missing")
            self.assertIn(f"(docs/{page}.md", readme, f"README.md does not link docs/{page}.md")
        self.assertTrue(os.path.exists(os.path.join(ROOT, "LICENSE")), "LICENSE is missing")

    def test_no_private_words(self):
        problems = []
        for md in markdown_files(tracked_files()):
            with open(os.path.join(ROOT, md), encoding="utf-8") as f:
                for no, line in enumerate(f, 1):
                    m = PRIVATE_WORDS.search(line)
                    if m:
                        problems.append(f"{md}:{no}: '{m.group(0)}'")
        self.assertEqual(problems, [], "words that mean nothing to a reader of the repository (name the commit, "
                                       "the date or the machine folder):\n" + "\n".join(problems))


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1] + sys.argv[2:], verbosity=2)
