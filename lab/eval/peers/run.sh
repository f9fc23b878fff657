#!/bin/sh
# Runs docs/quality.md's man-page comparison: per split and query kind,
# Cordon's pipelines with TREC runs (each kind indexed as Cordon indexes it:
# a held-out kind's passages cut out), the chunks exported (with and without
# overlap), the SQLite FTS5 (AND and OR, over chunks and over whole
# documents), Xapian and PostgreSQL FTS peers over them, and 'cordon-lab eval
# score' over all runs. Run from the repository root:
#
#   sh lab/eval/peers/run.sh CORPUS QUERIES OUT [SPLIT...]
#
# SPLIT is dev and/or test (default: both). OUT/<split>-<kind>.md holds
# eval's tables, OUT/<split>-<kind>/ the runs, OUT/<split>-<kind>-score.md
# every run's document-level table with intervals against BM25 only, and
# OUT/<split>-<kind>-vs-service.md the peers' intervals against the service
# profile. The whole-document FTS5 peers index chunks exported without
# overlap, so no text counts twice. Extra pipelines: CORDON_EVAL_PROFILES
# holds --profile arguments for eval (their runs join the tables). Needs
# python3 (sqlite3 with FTS5), python3-xapian (sh lab/eval/peers/install.sh),
# and for the PostgreSQL peer CORDON_TEST_DATABASE_URL (without it that
# peer is left out, loudly).
set -eu
corpus=$1 queries=$2 out=$3
shift 3
splits=${*:-dev test}
lab=${CORDON_LAB:-"go run ./cmd/cordon-lab"}
py_xapian=${PY_XAPIAN:-/usr/bin/python3}
$py_xapian -c 'import xapian' || { echo "run.sh: python3-xapian is missing (sh lab/eval/peers/install.sh)" >&2; exit 1; }
[ -n "${CORDON_TEST_DATABASE_URL:-}" ] ||
	echo "run.sh: CORDON_TEST_DATABASE_URL is not set: the PostgreSQL FTS peer is left out" >&2
mkdir -p "$out"
runs() { for r in "$@"; do printf ' --run %s' "$r"; done; }
for split in $splits; do
	for kind in name body option heldout; do
		o=$out/$split-$kind
		mkdir -p "$o"
		# shellcheck disable=SC2086 # the profiles are split on purpose
		$lab eval --corpus "$corpus" --queries "$queries" --split "$split" --kind $kind \
			${CORDON_EVAL_PROFILES:-} --trec "$o" --markdown --progress-every 0 >"$o.md"
		$lab eval export --corpus "$corpus" --queries "$queries" --split "$split" --kind $kind --chunks "$o/chunks.jsonl"
		$lab eval export --corpus "$corpus" --queries "$queries" --split "$split" --kind $kind --overlap-words 0 \
			--chunks "$o/chunks-nooverlap.jsonl"
		for op in or and; do
			python3 lab/eval/peers/fts5.py --chunks "$o/chunks.jsonl" --queries "$queries" --split "$split" --kind $kind \
				--op $op --out "$o/fts5-$op.run"
			python3 lab/eval/peers/fts5.py --chunks "$o/chunks-nooverlap.jsonl" --queries "$queries" --split "$split" \
				--kind $kind --unit doc --op $op --out "$o/fts5-doc-$op.run"
		done
		for stem in english none; do
			$py_xapian lab/eval/peers/xapianrun.py --chunks "$o/chunks.jsonl" --queries "$queries" --split "$split" \
				--kind $kind --stem $stem --out "$o/xapian-$stem.run"
		done
		peers="$o/fts5-or.run $o/fts5-and.run $o/fts5-doc-or.run $o/fts5-doc-and.run $o/xapian-english.run $o/xapian-none.run"
		if [ -n "${CORDON_TEST_DATABASE_URL:-}" ]; then
			for config in english simple; do
				sh lab/eval/peers/pgfts.sh "$o/chunks.jsonl" "$queries" "$o/pg-$config-or.run" $config or $kind "$split"
			done
			peers="$peers $o/pg-english-or.run $o/pg-simple-or.run"
		fi
		extra=
		for f in "$o"/*.run; do
			case $(basename "$f" .run) in
			bm25 | dense | hybrid_rrf | hybrid_rrf_rerank | seed | fts5-* | xapian-* | pg-*) ;;
			*) extra="$extra $f" ;;
			esac
		done
		# shellcheck disable=SC2046,SC2086 # the run lists are split on purpose
		$lab eval score --queries "$queries" --split "$split" --kind $kind --markdown \
			$(runs "$o/bm25.run" "$o/dense.run" "$o/hybrid_rrf.run" "$o/hybrid_rrf_rerank.run" "$o/seed.run" $extra $peers) \
			>"$o-score.md"
		# shellcheck disable=SC2046,SC2086
		$lab eval score --queries "$queries" --split "$split" --kind $kind --markdown \
			$(runs "$o/hybrid_rrf_rerank.run" "$o/seed.run" "$o/bm25.run" $extra $peers) >"$o-vs-service.md"
	done
done
echo "run.sh: tables in $out/<split>-<kind>.md, -score.md and -vs-service.md" >&2
