#!/usr/bin/python3
"""How often a query word meets a relevant document only in another form:
docs/quality.md's per-query look at where a stemming peer beats Cordon's BM25
on a BEIR dataset (SciFact there).

    /usr/bin/python3 lab/eval/peers/morph.py --beir DIR --per-query FILE \
        [--a fts5-doc-porter] [--b bm25] [--stem porter|english] [--examples N]

FILE is 'cordon-lab eval score --per-query' over runs named A and B (their
file names without .run). Queries are split by nDCG@10: A ahead of B, level,
behind. For each query, its distinct tokens Q and each relevant document's
tokens D (title and text, as 'cordon-lab eval --beir' indexes them) are taken
with Cordon's token rule (maximal runs of letters and numbers, lower-cased);
a query word q meets the document only in another form when q is not in D but
its stem is among D's stems (tokens of ASCII letters only are stemmed; the
others stay as they are, as lab/eval/peers/stem.py does). The stemmer is
Xapian's: "porter" (Porter's original algorithm, which SQLite FTS5's porter
tokenizer implements; the default) or "english" (Snowball's Porter2). A query
counts when some relevant document has such a word; the script prints the
counts per group and a few examples. Needs python3-xapian.
"""
import argparse
import json
import os
import unicodedata

import xapian


def tokens(s):
    """Cordon's tokens of s: maximal runs of letters and numbers, lower-cased."""
    out, cur = [], []
    for ch in s:
        low = ch.lower()
        if unicodedata.category(low)[0] in "LN":
            cur.append(low)
        elif cur:
            out.append("".join(cur))
            cur = []
    if cur:
        out.append("".join(cur))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--beir", required=True)
    ap.add_argument("--per-query", required=True)
    ap.add_argument("--a", default="fts5-doc-porter")
    ap.add_argument("--b", default="bm25")
    ap.add_argument("--stem", choices=["porter", "english"], default="porter")
    ap.add_argument("--examples", type=int, default=8)
    a = ap.parse_args()

    stemmer = xapian.Stem(a.stem)
    cache = {}

    def stem(t):
        if not (t.isascii() and t.isalpha()):
            return t
        if t not in cache:
            cache[t] = stemmer(t.encode()).decode()
        return cache[t]

    docs = {}
    with open(os.path.join(a.beir, "corpus.jsonl"), encoding="utf-8") as f:
        for line in f:
            if line.strip():
                d = json.loads(line)
                toks = set(tokens((d.get("title") or "") + "\n" + d["text"]))
                docs[d["_id"]] = (toks, {stem(t) for t in toks})

    groups = {"A ahead": [], "level": [], "A behind": []}
    with open(a.per_query, encoding="utf-8") as f:
        for line in f:
            q = json.loads(line)
            na, nb = q["metrics"][a.a]["ndcg_at_10"], q["metrics"][a.b]["ndcg_at_10"]
            g = "A ahead" if na > nb else "A behind" if na < nb else "level"
            qtoks = list(dict.fromkeys(tokens(q["query"])))
            forms = []  # (query word, the document's other forms)
            for r in q["relevant"]:
                dt, ds = docs[r]
                for t in qtoks:
                    if t not in dt and stem(t) in ds:
                        other = sorted(x for x in dt if stem(x) == stem(t))
                        forms.append((t, r, other))
            groups[g].append((q, na - nb, forms))

    print("A = %s, B = %s, nDCG@10 per query; stemmer %s" % (a.a, a.b, a.stem))
    print("| queries | count | with a word meeting a relevant document only in another form | share |")
    print("|---|--:|--:|--:|")
    total = [0, 0]
    for g, qs in groups.items():
        n, m = len(qs), sum(1 for _, _, forms in qs if forms)
        total[0] += n
        total[1] += m
        print("| %s | %d | %d | %.0f%% |" % (g, n, m, 100.0 * m / n if n else 0))
    print("| all | %d | %d | %.0f%% |" % (total[0], total[1], 100.0 * total[1] / total[0]))
    ahead = sorted(groups["A ahead"], key=lambda x: -x[1])
    print("\nA ahead, largest gains first (query: word -> the relevant document's forms):")
    for q, d, forms in ahead[:a.examples]:
        shown = "; ".join("%s -> %s (%s)" % (t, "/".join(o), r) for t, r, o in forms[:3]) or "(no other form)"
        print("  %+.3f  %s  %s" % (d, q["query"][:70], shown))


if __name__ == "__main__":
    main()
