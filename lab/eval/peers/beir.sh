#!/bin/sh
# Runs docs/quality.md's BEIR comparison (SciFact's train split there): one
# split of a BEIR-format dataset, Cordon's pipelines with TREC runs 100
# documents deep, the documents exported as Cordon indexes them (title as the
# first line; chunks without overlap, joined again per document by the
# peers), SQLite FTS5 (unicode61 and porter tokenizers) and Xapian (BM25, with
# and without the English stemmer) over those whole documents, and
# 'cordon-lab eval score' over all runs. Run from the repository root:
#
#   sh lab/eval/peers/beir.sh DIR SPLIT OUT
#
# OUT/eval.md holds eval's tables, OUT/runs/ every run, OUT/score.md every
# run's document-level table (nDCG@10, R@100, MRR@10) with intervals against
# the service profile, OUT/score-vs-bm25.md the same against Cordon's BM25
# alone, and OUT/per-query.jsonl every query's metrics per run (what
# lab/eval/peers/morph.py reads). Needs python3 (sqlite3 with FTS5) and
# python3-xapian (sh lab/eval/peers/install.sh).
set -eu
dir=$1 split=$2 out=$3
lab=${CORDON_LAB:-"go run ./cmd/cordon-lab"}
py_xapian=${PY_XAPIAN:-/usr/bin/python3}
$py_xapian -c 'import xapian' || { echo "beir.sh: python3-xapian is missing (sh lab/eval/peers/install.sh)" >&2; exit 1; }
runs=$out/runs
queries=$dir/queries-$split.jsonl
[ -f "$queries" ] || queries=$dir/queries.jsonl
mkdir -p "$runs"
$lab eval --beir "$dir" --split "$split" --markdown --trec "$runs" --save "$out/eval.json" --progress-every 200 >"$out/eval.md"
$lab eval export --beir "$dir" --split "$split" --overlap-words 0 --chunks "$out/chunks-nooverlap.jsonl"
for tok in unicode61 porter; do
	python3 lab/eval/peers/fts5.py --chunks "$out/chunks-nooverlap.jsonl" --queries "$queries" --unit doc \
		--tokenize $tok --out "$runs/fts5-doc-$tok.run"
done
for stem in english none; do
	$py_xapian lab/eval/peers/xapianrun.py --chunks "$out/chunks-nooverlap.jsonl" --queries "$queries" --unit doc \
		--stem $stem --out "$runs/xapian-doc-$stem.run"
done
cordon="$runs/hybrid_rrf_rerank.run $runs/bm25.run $runs/dense.run $runs/hybrid_rrf.run $runs/seed.run"
peers="$runs/fts5-doc-unicode61.run $runs/fts5-doc-porter.run $runs/xapian-doc-english.run $runs/xapian-doc-none.run"
args() { for r in "$@"; do printf ' --run %s' "$r"; done; }
# shellcheck disable=SC2046,SC2086 # the run lists are split on purpose
$lab eval score --beir "$dir" --split "$split" --markdown --per-query "$out/per-query.jsonl" $(args $cordon $peers) >"$out/score.md"
# shellcheck disable=SC2046,SC2086
$lab eval score --beir "$dir" --split "$split" --markdown $(args "$runs/bm25.run" $peers) >"$out/score-vs-bm25.md"
echo "beir.sh: tables in $out/eval.md, $out/score.md and $out/score-vs-bm25.md" >&2
