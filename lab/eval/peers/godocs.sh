#!/bin/sh
# Runs docs/quality.md's Go-docs comparison: the standard library's
# documentation rendered on this machine (cordon-lab corpus godocs), its
# summary, signature and docheldout queries, Cordon's pipelines on one split
# with TREC runs, the chunks exported, the SQLite FTS5 (AND and OR, over
# chunks and over whole documents), Xapian and PostgreSQL FTS peers over
# them, and 'cordon-lab eval score' over all runs. Run from the repository
# root:
#
#   sh lab/eval/peers/godocs.sh OUT [SPLIT]
#
# SPLIT is test (default) or dev. OUT/corpus and OUT/queries.jsonl are the
# corpus and queries; OUT/SPLIT.md holds eval's tables, OUT/SPLIT/ the runs,
# OUT/SPLIT-score-KIND.md every run's document-level table with intervals
# against BM25 only, OUT/SPLIT-vs-service-KIND.md the peers' intervals
# against the service profile (KIND: all, summary, signature, docheldout).
# The whole-document FTS5 peers index chunks exported without overlap, so no
# text counts twice. Needs python3 (sqlite3 with FTS5), python3-xapian
# (sh lab/eval/peers/install.sh), and for the PostgreSQL peer
# CORDON_TEST_DATABASE_URL (without it that peer is left out, loudly).
set -eu
out=$1 split=${2:-test}
lab=${CORDON_LAB:-"go run ./cmd/cordon-lab"}
py_xapian=${PY_XAPIAN:-/usr/bin/python3}
$py_xapian -c 'import xapian' || { echo "godocs.sh: python3-xapian is missing (sh lab/eval/peers/install.sh)" >&2; exit 1; }
corpus=$out/corpus queries=$out/queries.jsonl o=$out/$split
mkdir -p "$o"
$lab corpus godocs --out "$corpus" --replace
$lab corpus queries --corpus "$corpus" --kinds summary,signature,docheldout --out "$queries"
$lab eval --corpus "$corpus" --queries "$queries" --split "$split" --markdown --trec "$o" --progress-every 0 >"$o.md"
$lab eval export --corpus "$corpus" --queries "$queries" --split "$split" --chunks "$o/chunks.jsonl"
$lab eval export --corpus "$corpus" --queries "$queries" --split "$split" --overlap-words 0 --chunks "$o/chunks-nooverlap.jsonl"
for op in or and; do
	python3 lab/eval/peers/fts5.py --chunks "$o/chunks.jsonl" --queries "$queries" --split "$split" --op $op --out "$o/fts5-$op.run"
	python3 lab/eval/peers/fts5.py --chunks "$o/chunks-nooverlap.jsonl" --queries "$queries" --split "$split" --unit doc --op $op --out "$o/fts5-doc-$op.run"
done
for stem in english none; do
	$py_xapian lab/eval/peers/xapianrun.py --chunks "$o/chunks.jsonl" --queries "$queries" --split "$split" --stem $stem --out "$o/xapian-$stem.run"
done
peers="$o/fts5-or.run $o/fts5-and.run $o/fts5-doc-or.run $o/fts5-doc-and.run $o/xapian-english.run $o/xapian-none.run"
if [ -n "${CORDON_TEST_DATABASE_URL:-}" ]; then
	for config in english simple; do
		sh lab/eval/peers/pgfts.sh "$o/chunks.jsonl" "$queries" "$o/pg-$config-or.run" $config or "" "$split"
	done
	peers="$peers $o/pg-english-or.run $o/pg-simple-or.run"
else
	echo "godocs.sh: CORDON_TEST_DATABASE_URL is not set: the PostgreSQL FTS peer is left out" >&2
fi
runs() { for r in "$@"; do printf ' --run %s' "$r"; done; }
for kind in all summary signature docheldout; do
	k=$kind
	[ "$kind" = all ] && k=
	# shellcheck disable=SC2046 # the run list is split on purpose
	$lab eval score --queries "$queries" --split "$split" ${k:+--kind $k} --markdown \
		$(runs "$o/bm25.run" "$o/dense.run" "$o/hybrid_rrf.run" "$o/hybrid_rrf_rerank.run" "$o/seed.run" $peers) >"$o-score-$kind.md"
	# shellcheck disable=SC2046
	$lab eval score --queries "$queries" --split "$split" ${k:+--kind $k} --markdown \
		$(runs "$o/hybrid_rrf_rerank.run" $peers) >"$o-vs-service-$kind.md"
done
echo "godocs.sh: tables in $o.md and $o-score-*.md, $o-vs-service-*.md" >&2
