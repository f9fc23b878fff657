#!/bin/sh
# PostgreSQL full-text search as a peer of Cordon: index the chunks
# 'cordon-lab eval export' wrote and write a TREC run for 'cordon-lab eval score'.
#
#   sh lab/eval/peers/pgfts.sh CHUNKS.jsonl QUERIES.jsonl RUN [CONFIG] [OP] [KIND] [SPLIT]
#
# CONFIG is the text search configuration, simple (default) or english; OP
# is or (default: plainto_tsquery's terms OR-ed) or and (plainto_tsquery as
# is). Each chunk is a row with to_tsvector(CONFIG, text) under a GIN index,
# ranked by ts_rank_cd, ties by chunk id; a document is ranked at its best
# chunk, and the run lists the first 100 distinct documents per query (qid:
# the query's "id", else its 1-based line number). KIND and SPLIT select
# queries. It creates a scratch database on the cluster of
# $CORDON_TEST_DATABASE_URL (or $DATABASE_URL), named cordon_peer_<pid>, and
# drops it at the end. Needs psql and python3.
set -eu

chunks=$1 queries=$2 run=$3 config=${4:-simple} op=${5:-or} kind=${6:-} split=${7:-}
case $config in simple|english) ;; *) echo "pgfts: CONFIG must be simple or english" >&2; exit 2 ;; esac
case $op in or|and) ;; *) echo "pgfts: OP must be or or and" >&2; exit 2 ;; esac
url=${CORDON_TEST_DATABASE_URL:-${DATABASE_URL:?set CORDON_TEST_DATABASE_URL}}
db=cordon_peer_$$
scratch=$(printf '%s' "$url" | sed -E "s#/[^/?]+(\?|$)#/$db\1#")
tmp=$(mktemp -d)
cleanup() {
	psql -qX "$url" -c "DROP DATABASE IF EXISTS $db" >/dev/null 2>&1 || true
	rm -rf "$tmp"
}
trap cleanup EXIT

python3 - "$chunks" "$queries" "$tmp" "$kind" "$split" <<'PY'
import csv, json, sys
chunks, queries, tmp, kind, split = sys.argv[1:6]
with open(chunks, encoding="utf-8") as f, open(tmp + "/chunks.csv", "w", newline="", encoding="utf-8") as o:
    w = csv.writer(o)
    for line in f:
        if line.strip():
            c = json.loads(line)
            w.writerow([c["chunk_id"], c["doc_id"], c["text"]])
with open(queries, encoding="utf-8") as f, open(tmp + "/queries.csv", "w", newline="", encoding="utf-8") as o:
    w = csv.writer(o)
    for n, line in enumerate(f, 1):
        if line.strip():
            q = json.loads(line)
            if kind and q.get("kind") != kind or split and q.get("split") != split:
                continue
            w.writerow([q.get("id") or str(n), n, q["query"]])
PY

if [ "$op" = or ]; then
	tsq="nullif(replace(plainto_tsquery('$config', q.text)::text, ' & ', ' | '), '')::tsquery"
else
	tsq="plainto_tsquery('$config', q.text)"
fi

psql -qX "$url" -c "CREATE DATABASE $db" >/dev/null
psql -qX -v ON_ERROR_STOP=1 "$scratch" >/dev/null <<SQL
CREATE TABLE chunks (chunk_id text PRIMARY KEY, doc_id text NOT NULL, text text NOT NULL, tsv tsvector);
CREATE TABLE queries (qid text PRIMARY KEY, line int NOT NULL, text text NOT NULL);
\copy chunks (chunk_id, doc_id, text) FROM '$tmp/chunks.csv' WITH (FORMAT csv)
\copy queries (qid, line, text) FROM '$tmp/queries.csv' WITH (FORMAT csv)
UPDATE chunks SET tsv = to_tsvector('$config', text);
CREATE INDEX ON chunks USING gin (tsv);
ANALYZE chunks;
SQL
psql -qAtX -F ' ' -v ON_ERROR_STOP=1 "$scratch" >"$tmp/ranked" <<SQL
SELECT r.qid, r.doc_id
FROM queries q
CROSS JOIN LATERAL (
  SELECT q.qid, d.doc_id, min(d.pos) AS best
  FROM (
    SELECT c.doc_id, row_number() OVER (ORDER BY ts_rank_cd(c.tsv, $tsq) DESC, c.chunk_id) AS pos
    FROM chunks c
    WHERE c.tsv @@ $tsq
    ORDER BY pos
    LIMIT 2000
  ) d
  GROUP BY d.doc_id
  ORDER BY best
  LIMIT 100
) r
ORDER BY q.line, r.best;
SQL
awk -v tag="pgfts-$config-$op" '
	$1 != q { q = $1; n = 0 }
	{ n++; rows[NR] = $0; rank[NR] = n }
	END { for (i = 1; i <= NR; i++) { split(rows[i], f, " "); printf "%s Q0 %s %d %d %s\n", f[1], f[2], rank[i], 1000 - rank[i], tag } }
' "$tmp/ranked" >"$run"
echo "pgfts: wrote $run" >&2
