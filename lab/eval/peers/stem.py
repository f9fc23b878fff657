#!/usr/bin/python3
"""Stemmed copies of a Cordon eval corpus and query file: docs/quality.md's
measurement of English stemming ("Stemming, measured").

Usage:
  stem.py corpus SRC_DIR DST_DIR      copy SRC_DIR to DST_DIR, *.md files stemmed
  stem.py queries SRC.jsonl DST.jsonl stem each line's "query" and "remove"
  stem.py check DST_DIR DST.jsonl     count "remove" passages not found verbatim

Token rule (matches cordon analysis.Tokenize, tokenizer cordon-tok-1): a token
is a maximal run of code points whose category is a letter (L*) or a number
(N*); everything else (space, punctuation, '_', '-', '#', '`', ...) is a
separator and is copied unchanged, so Markdown structure (headings, fences,
list markers, indentation) is preserved byte for byte.

Each token that, lower-cased, consists only of ASCII letters [a-z]+ is
replaced by its Snowball English (Porter2) stem via xapian.Stem("english")
(which is lower case). Tokens mixing letters with digits ("md5sum", "base64",
"ed25519"), pure numbers, and tokens with non-ASCII letters are left as they
are: Cordon indexes them as single tokens, and stemming a letter sub-run
would create a token Cordon never produces. Words joined by '_' or '-'
("callgrind_annotate", "show-all") are several Cordon tokens, each stemmed
on its own, with the joiner kept. CamelCase identifiers are one token
("FileInfo" -> "fileinfo"), stemmed as a whole.

The transform is token-local, so a "remove" passage whose ends fall on token
boundaries of the document stays a verbatim substring after stemming.
"""
import json
import os
import shutil
import sys
import unicodedata

import xapian

_stem = xapian.Stem("english")
_cache = {}


def _is_tok(ch):
    return unicodedata.category(ch.lower())[0] in "LN"


def _stem_token(tok):
    low = tok.lower()
    if low.isascii() and low.isalpha():
        s = _cache.get(low)
        if s is None:
            s = _stem(low.encode()).decode()
            _cache[low] = s
        return s
    return tok


def stem_text(s):
    out = []
    i, n = 0, len(s)
    while i < n:
        if _is_tok(s[i]):
            j = i + 1
            while j < n and _is_tok(s[j]):
                j += 1
            out.append(_stem_token(s[i:j]))
            i = j
        else:
            j = i + 1
            while j < n and not _is_tok(s[j]):
                j += 1
            out.append(s[i:j])
            i = j
    return "".join(out)


def do_corpus(src, dst):
    if os.path.exists(dst):
        shutil.rmtree(dst)
    n = 0
    for root, _, files in os.walk(src):
        rel = os.path.relpath(root, src)
        os.makedirs(os.path.join(dst, rel), exist_ok=True)
        for f in files:
            a, b = os.path.join(root, f), os.path.join(dst, rel, f)
            if f.endswith(".md"):
                with open(a, encoding="utf-8", newline="") as fh:
                    t = fh.read()
                with open(b, "w", encoding="utf-8", newline="") as fh:
                    fh.write(stem_text(t))
                n += 1
            else:
                shutil.copy2(a, b)
    print(f"stemmed {n} documents into {dst}")


def do_queries(src, dst):
    n = 0
    with open(src, encoding="utf-8") as fi, open(dst, "w", encoding="utf-8") as fo:
        for line in fi:
            if not line.strip():
                continue
            q = json.loads(line)
            for k in ("query", "remove"):
                if q.get(k):
                    q[k] = stem_text(q[k])
            fo.write(json.dumps(q, ensure_ascii=False) + "\n")
            n += 1
    print(f"stemmed {n} queries into {dst}")


def do_check(corpus, qfile):
    total = bad = 0
    cache = {}
    with open(qfile, encoding="utf-8") as fi:
        for line in fi:
            q = json.loads(line)
            if not q.get("remove"):
                continue
            for r in q["relevant"]:
                if r not in cache:
                    with open(os.path.join(corpus, r + ".md"), encoding="utf-8", newline="") as fh:
                        cache[r] = fh.read()
                total += 1
                if q["remove"] not in cache[r]:
                    bad += 1
                    print("MISSING", q.get("id"), r, repr(q["remove"][:60]))
    print(f"remove passages checked: {total}, not found verbatim: {bad}")


if __name__ == "__main__":
    cmd, a, b = sys.argv[1:4]
    {"corpus": do_corpus, "queries": do_queries, "check": do_check}[cmd](a, b)
