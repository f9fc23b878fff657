#!/usr/bin/env python3
"""A copy of a corpus whose headings are also body text: docs/quality.md's
measurement of headings as a field ("Headings as a field, measured").

  headings.py SRC_DIR DST_DIR [--times N]

Every ATX heading line (#..######, outside ``` fences) of each *.md file is
kept and followed by a line holding its text N times (default 1) and an
empty line, so that the section's first chunk indexes the heading's words
(a heading line itself is never chunk text). Other files are copied as they
are. Held-out passages ("remove") are sentences of section bodies, so they
are still cut verbatim.
"""
import argparse
import os
import re
import shutil

HEADING = re.compile(r"^(#{1,6})\s+(.*\S)\s*$")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--times", type=int, default=1)
    a = ap.parse_args()
    if os.path.exists(a.dst):
        shutil.rmtree(a.dst)
    n = 0
    for root, _, files in os.walk(a.src):
        rel = os.path.relpath(root, a.src)
        os.makedirs(os.path.join(a.dst, rel), exist_ok=True)
        for f in files:
            src, dst = os.path.join(root, f), os.path.join(a.dst, rel, f)
            if not f.endswith(".md"):
                shutil.copy2(src, dst)
                continue
            with open(src, encoding="utf-8", newline="") as fh:
                lines = fh.read().split("\n")
            out, fence = [], False
            for line in lines:
                out.append(line)
                if line.startswith("```"):
                    fence = not fence
                    continue
                m = None if fence else HEADING.match(line)
                if m:
                    out += [" ".join([m.group(2)] * a.times), ""]
                    n += 1
            with open(dst, "w", encoding="utf-8", newline="") as fh:
                fh.write("\n".join(out))
    print(f"headings: {n} headings repeated {a.times} time(s) into {a.dst}")


if __name__ == "__main__":
    main()
