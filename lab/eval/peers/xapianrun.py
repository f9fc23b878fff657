#!/usr/bin/env python3
"""Xapian as a peer of Cordon: index the chunks 'cordon-lab eval export' wrote
and write a TREC run for 'cordon-lab eval score'.

    python3 lab/eval/peers/xapianrun.py --chunks CHUNKS.jsonl --queries QUERIES.jsonl \
        [--kind K] [--split S] [--stem none|english] [--unit chunk|doc] --out RUN

With --unit chunk (default) each chunk is a document of an in-memory Xapian
database; with --unit doc each Cordon document is, its chunks joined in
order (export with --overlap-words 0 so that no text is counted twice),
indexed by
TermGenerator (with --stem english, the default, also Xapian's English
stems, as a Xapian user would set it up). The query goes through
QueryParser with its default operator OR (and FLAG_DEFAULT); documents are
ranked by Xapian's default BM25Weight (k1 1, k3 1, b 0.5), ties by chunk id
(document id with --unit doc); a Cordon document is ranked at its best chunk. The run lists, per query, the
first 100 distinct documents; the qid is the query's "id", else its 1-based
line number, as 'cordon-lab eval score' expects. Needs Debian's python3-xapian
(apt-get install python3-xapian; the system python3 then imports it).
"""
import argparse
import sys

import xapian

from trecrun import queries, read_jsonl, write_ranking

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chunks", required=True)
    ap.add_argument("--queries", required=True)
    ap.add_argument("--kind", default="")
    ap.add_argument("--split", default="")
    ap.add_argument("--stem", choices=["none", "english"], default="english")
    ap.add_argument("--unit", choices=["chunk", "doc"], default="chunk")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()

    db = xapian.WritableDatabase("", xapian.DB_BACKEND_INMEMORY)
    tg = xapian.TermGenerator()
    stemmer = xapian.Stem(a.stem)
    if a.stem != "none":
        tg.set_stemmer(stemmer)
    rows = [c for _, c in read_jsonl(a.chunks)]
    if a.unit == "doc":
        docs = {}
        for c in rows:
            docs.setdefault(c["doc_id"], []).append(c["text"])
        rows = [{"doc_id": d, "chunk_id": d, "text": "\n\n".join(t)} for d, t in docs.items()]
    ids = []
    for c in rows:
        doc = xapian.Document()
        tg.set_document(doc)
        tg.index_text(c["text"])
        doc.set_data(c["doc_id"])
        ids.append(c["chunk_id"])
        db.add_document(doc)
    qp = xapian.QueryParser()
    qp.set_database(db)
    qp.set_default_op(xapian.Query.OP_OR)
    if a.stem != "none":
        qp.set_stemmer(stemmer)
        qp.set_stemming_strategy(xapian.QueryParser.STEM_SOME)
    enquire = xapian.Enquire(db)
    enquire.set_weighting_scheme(xapian.BM25Weight())
    tag = "xapian-%s%s" % (a.stem, "-doc" if a.unit == "doc" else "")
    n = 0
    with open(a.out, "w", encoding="utf-8") as out:
        for qid, q in queries(a.queries, a.kind, a.split):
            enquire.set_query(qp.parse_query(q["query"]))
            hits = [(m.weight, ids[m.docid - 1], m.document.get_data().decode()) for m in enquire.get_mset(0, 2000)]
            hits.sort(key=lambda h: (-h[0], h[1]))
            write_ranking(out, qid, (doc for _, _, doc in hits), tag)
            n += 1
    print("xapian: %d rows, %d queries, run %s" % (len(rows), n, a.out), file=sys.stderr)


if __name__ == "__main__":
    main()
