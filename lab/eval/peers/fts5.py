#!/usr/bin/env python3
"""SQLite FTS5 as a peer of Cordon: index the chunks 'cordon-lab eval export'
wrote and write a TREC run for 'cordon-lab eval score'.

    python3 lab/eval/peers/fts5.py --chunks CHUNKS.jsonl --queries QUERIES.jsonl \
        [--kind K] [--split S] [--unit chunk|doc] [--op or|and] [--distinct]
        [--tokenize unicode61|porter] --out RUN

--unit chunk (default) indexes each chunk as a row, exactly the text Cordon
indexes; a document is ranked at its best chunk. --unit doc indexes one row
per document, its chunks joined in order (export with --overlap-words 0 so
that no text is counted twice). Text and query go through FTS5's unicode61
tokenizer (--tokenize unicode61, default) or its porter tokenizer over
unicode61 (--tokenize porter: Porter's English stemmer, as an FTS5 user
would set it up for English prose). The query's words (each quoted, so
punctuation and FTS5 operators in the text are plain words) are OR-ed (--op or, default) or AND-ed (--op and);
rows are ranked by FTS5's bm25() (k1 1.2, b 0.75), ties by chunk id. A word
the query repeats is OR-ed again, so it counts again; --distinct keeps each
(lowercased) word once, as SPEC's BM25 counts a query's distinct terms. The
run lists, per query, the first 100 distinct documents; the qid is the
query's "id", else its 1-based line number, as 'cordon-lab eval score' expects.
Python's standard library only (sqlite3 with FTS5).
"""
import argparse
import re
import sqlite3
import sys

from trecrun import queries, read_jsonl, write_ranking

WORD = re.compile(r"\w+", re.UNICODE)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chunks", required=True)
    ap.add_argument("--queries", required=True)
    ap.add_argument("--kind", default="")
    ap.add_argument("--split", default="")
    ap.add_argument("--unit", choices=["chunk", "doc"], default="chunk")
    ap.add_argument("--op", choices=["or", "and"], default="or")
    ap.add_argument("--distinct", action="store_true")
    ap.add_argument("--tokenize", choices=["unicode61", "porter"], default="unicode61")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()

    db = sqlite3.connect(":memory:")
    tokenize = "porter unicode61" if a.tokenize == "porter" else "unicode61"
    db.execute("CREATE VIRTUAL TABLE t USING fts5(text, doc_id UNINDEXED, chunk_id UNINDEXED, tokenize = '%s')" % tokenize)
    rows = [c for _, c in read_jsonl(a.chunks)]
    if a.unit == "doc":
        docs = {}
        for c in rows:
            docs.setdefault(c["doc_id"], []).append(c["text"])
        db.executemany("INSERT INTO t(text, doc_id, chunk_id) VALUES (?, ?, ?)",
                       (("\n\n".join(t), d, d) for d, t in docs.items()))
    else:
        db.executemany("INSERT INTO t(text, doc_id, chunk_id) VALUES (?, ?, ?)",
                       ((c["text"], c["doc_id"], c["chunk_id"]) for c in rows))
    joiner = " OR " if a.op == "or" else " AND "
    tag = "fts5-%s-%s%s%s" % (a.unit, a.op, "-distinct" if a.distinct else "", "-porter" if a.tokenize == "porter" else "")
    n = 0
    with open(a.out, "w", encoding="utf-8") as out:
        for qid, q in queries(a.queries, a.kind, a.split):
            words = WORD.findall(q["query"])
            if a.distinct:
                words = list(dict.fromkeys(w.lower() for w in words))
            if not words:
                continue
            match = joiner.join('"%s"' % w.replace('"', '""') for w in words)
            hits = db.execute("SELECT doc_id FROM t WHERE t MATCH ? ORDER BY bm25(t), chunk_id LIMIT 2000", (match,))
            write_ranking(out, qid, (doc for (doc,) in hits), tag)
            n += 1
    print("fts5: %d rows, %d queries, run %s" % (len(rows), n, a.out), file=sys.stderr)


if __name__ == "__main__":
    main()
