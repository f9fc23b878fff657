#!/usr/bin/env python3
"""How many misses link expansion could reach: docs/quality.md's "Links,
measured".

  linkbound.py --queries Q.jsonl --run RUN --links LINKS.json [--split S]

RUN is a document-level TREC run ('cordon-lab eval --trec DIR' writes
DIR/PIPELINE.run); LINKS.json maps doc id -> linked doc ids (go run
./lab/eval/peers/links). For each query whose relevant documents are all
missing from the run's first 10 documents, it asks whether one of them
links to or from one of the first k documents (k = 1, 3, 5, 10), and counts
per kind; it also gives the mean number of documents linked to or from the
first 3 and 10 that are not among the first 10 (what an expansion would
add).
"""
import argparse
import collections
import json

K = (1, 3, 5, 10)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--queries", required=True)
    ap.add_argument("--run", required=True)
    ap.add_argument("--links", required=True)
    ap.add_argument("--split", default="dev")
    a = ap.parse_args()
    out = json.load(open(a.links))
    near = collections.defaultdict(set)
    for s, ts in out.items():
        for t in ts:
            near[s].add(t)
            near[t].add(s)
    ranked = collections.defaultdict(list)
    for line in open(a.run):
        qid, _, doc, rank, _, _ = line.split()
        ranked[qid].append((int(rank), doc))
    n, miss, added = collections.Counter(), collections.Counter(), {k: collections.Counter() for k in (3, 10)}
    reach = {k: collections.Counter() for k in K}
    for i, line in enumerate(open(a.queries), 1):
        q = json.loads(line)
        if q.get("split", "") != a.split:
            continue
        qid, kind = q.get("id") or str(i), q.get("kind", "")
        top = []
        for _, d in sorted(ranked.get(qid, [])):
            if d not in top:
                top.append(d)
            if len(top) == 10:
                break
        n[kind] += 1
        for k in (3, 10):
            nb = set().union(*(near[d] for d in top[:k])) if top else set()
            added[k][kind] += len(nb - set(top))
        rel = set(q["relevant"])
        if rel & set(top):
            continue
        miss[kind] += 1
        for k in K:
            reach[k][kind] += any(r in near[d] for d in top[:k] for r in rel)
    print("| kind | queries | misses | reachable at k = " + " / ".join(map(str, K)) + " | documents added at k = 3 / 10 |")
    print("|---|--:|--:|---|---|")
    for kind in sorted(n):
        print(f"| {kind} | {n[kind]} | {miss[kind]} | " + " / ".join(str(reach[k][kind]) for k in K)
              + f" | {added[3][kind] / n[kind]:.1f} / {added[10][kind] / n[kind]:.1f} |")


if __name__ == "__main__":
    main()
