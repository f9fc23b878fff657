#!/bin/sh
# Rebuilds the evaluation data in testdata/eval from this machine's manual
# pages (man-db and groff must be installed). Run from the repository root:
#
#   sh testdata/eval/build.sh [MAN_DIR]
#
# It writes:
#   testdata/eval/corpus/                 the committed subset: sections 1, 5, 8
#                                         without gcloud's generated pages, every
#                                         20th page, pages under 6,000 bytes
#                                         (58 documents, ~130 KB), and its
#                                         manifest.json (sources, digests, skips)
#   testdata/eval/queries.jsonl           the subset's known-item queries, all four kinds
#   MAN_DIR (default /tmp/cordon-man)     docs/quality.md's corpus: sections
#                                         1, 5, 8 without gcloud, every 4th page
#                                         (402 documents, 3.7 MB; not committed)
#   testdata/eval/man-every4-queries.jsonl  its known-item queries (committed)
#
# Every step is deterministic: the same installed pages give byte-identical
# files. Other installed pages (another distribution, other packages) give
# another corpus; 'cordon-lab eval' prints the corpus fingerprint to compare with
# docs/quality.md. Takes about a minute on 2 cores.
set -eu

man_dir=${1:-/tmp/cordon-man}
lab=${CORDON_LAB:-"go run ./cmd/cordon-lab"}

$lab corpus manpages --out testdata/eval/corpus --replace \
	--sections 1,5,8 --exclude 'gcloud*' --every 20 --max-bytes 6000
$lab corpus queries --corpus testdata/eval/corpus --kinds name,body,option,heldout --out testdata/eval/queries.jsonl

$lab corpus manpages --out "$man_dir" --replace \
	--sections 1,5,8 --exclude 'gcloud*' --every 4
$lab corpus queries --corpus "$man_dir" --kinds name,body,option,heldout --out testdata/eval/man-every4-queries.jsonl
