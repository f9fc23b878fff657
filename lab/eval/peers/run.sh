#!/bin/sh
# Runs docs/quality.md's comparison: for each split (dev, test) and query
# kind, Cordon's pipelines (and a tuning profile) with TREC runs, the chunks
# exported, the FTS5 and PostgreSQL FTS peers over them, and 'cordon-lab eval
# score' over all runs. Run from the repository root:
#
#   sh lab/eval/peers/run.sh CORPUS QUERIES OUT
#
# OUT/<split>-<kind>.md holds eval's tables, OUT/<split>-<kind>-score.md the
# document-level table of every run. Needs CORDON_TEST_DATABASE_URL for the
# PostgreSQL peer, and Debian's python3-xapian for the Xapian peer.
set -eu
corpus=$1 queries=$2 out=$3
lab=${CORDON_LAB:-"go run ./cmd/cordon-lab"}
# idf10: rrf_k 10 with idf_overlap blended 0.5, over the seed profile's other values.
profile='idf10={"rrf_k":10,"rerank":"idf_overlap","rerank_blend":0.5,"rrf_weights":{"bm25":1},"min_score":0.2,"max_chunks_per_doc":0}'
mkdir -p "$out"
# Xapian's Python bindings come from Debian (apt-get install python3-xapian)
# and load in the system interpreter.
py_xapian=${PY_XAPIAN:-/usr/bin/python3}
$py_xapian -c 'import xapian' || { echo "run.sh: python3-xapian is missing (sh lab/eval/peers/install.sh)" >&2; exit 1; }
for split in dev test; do
	for kind in name body option heldout; do
		o=$out/$split-$kind
		mkdir -p "$o"
		$lab eval --corpus "$corpus" --queries "$queries" --split $split --kind $kind \
			--profile "$profile" --trec "$o" --markdown --progress-every 0 >"$o.md"
		$lab eval export --corpus "$corpus" --queries "$queries" --split $split --kind $kind --chunks "$o/chunks.jsonl"
		python3 lab/eval/peers/fts5.py --chunks "$o/chunks.jsonl" --queries "$queries" --split $split --kind $kind --op or --out "$o/fts5-or.run"
		python3 lab/eval/peers/fts5.py --chunks "$o/chunks.jsonl" --queries "$queries" --split $split --kind $kind --op and --out "$o/fts5-and.run"
		python3 lab/eval/peers/fts5.py --chunks "$o/chunks.jsonl" --queries "$queries" --split $split --kind $kind --unit doc --op or --out "$o/fts5-doc-or.run"
		$py_xapian lab/eval/peers/xapianrun.py --chunks "$o/chunks.jsonl" --queries "$queries" --split $split --kind $kind --stem english --out "$o/xapian-english.run"
		$py_xapian lab/eval/peers/xapianrun.py --chunks "$o/chunks.jsonl" --queries "$queries" --split $split --kind $kind --stem none --out "$o/xapian-none.run"
		sh lab/eval/peers/pgfts.sh "$o/chunks.jsonl" "$queries" "$o/pg-english-or.run" english or $kind $split
		sh lab/eval/peers/pgfts.sh "$o/chunks.jsonl" "$queries" "$o/pg-simple-or.run" simple or $kind $split
		$lab eval score --queries "$queries" --split $split --kind $kind --markdown \
			--run "$o/bm25.run" --run "$o/dense.run" --run "$o/hybrid_rrf.run" --run "$o/hybrid_rrf_rerank.run" \
			--run "$o/seed.run" --run "$o/idf10.run" --run "$o/fts5-or.run" --run "$o/fts5-and.run" --run "$o/fts5-doc-or.run" \
			--run "$o/xapian-english.run" --run "$o/xapian-none.run" \
			--run "$o/pg-english-or.run" --run "$o/pg-simple-or.run" >"$o-score.md"
	done
done
