"""What every peer script shares: reading 'cordon-lab eval export' chunks and a
query file (Cordon's, or a BEIR queries file), selecting queries by kind and split as 'cordon-lab eval' does, and
writing a TREC run of the first DEPTH distinct documents per query for
'cordon-lab eval score' (qid: the query's "id", else its 1-based line number).
"""
import json

DEPTH = 100  # documents per query in a run


def read_jsonl(path):
    """Yields (1-based line number, object) for each non-blank line."""
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                yield n, json.loads(line)


def queries(path, kind="", split=""):
    """Yields (qid, query object) for the queries of kind and split. A BEIR
    queries file's line ({"_id", "text"}) reads as {"id": _id, "query": text},
    as 'cordon-lab eval --beir' reads it (BEIR lines have no kind or split:
    select none)."""
    for line, q in read_jsonl(path):
        if "query" not in q and "_id" in q:
            q = {"id": q["_id"], "query": q.get("text", "")}
        if kind and q.get("kind") != kind or split and q.get("split") != split:
            continue
        yield q.get("id") or str(line), q


def write_ranking(out, qid, docs, tag):
    """Writes the first DEPTH distinct documents of docs (best first)."""
    seen = []
    for doc in docs:
        if doc not in seen:
            seen.append(doc)
            if len(seen) == DEPTH:
                break
    for i, doc in enumerate(seen):
        out.write("%s Q0 %s %d %d %s\n" % (qid, doc, i + 1, len(seen) - i, tag))
