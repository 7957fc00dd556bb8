#!/bin/sh
# The retrieval gate, run the same way in CI and on your machine:
#
#     sh docs/ci/retrieval-gate.sh BASELINE CANDIDATE
#
# BASELINE and CANDIDATE are result folders (rag-eval bench, Report.save_folder) or saved reports (Report.save).
# It runs `rag-eval gate` with the rule below, writes JUnit XML to $GATE_OUT/junit.xml and appends a Markdown summary
# to $GITHUB_STEP_SUMMARY (in GitHub Actions) or to $GATE_OUT/summary.md (elsewhere), prints the verdict, and exits
# with the gate's status: 0 pass, 1 regression, 2 bad input or not comparable, 3 inconclusive (docs/gate.md).
#
# Settings (environment variables, with their defaults):
#   GATE_METRIC=ndcg@budget   the metric, as the report names it
#   GATE_MAX_DROP=0.01        the largest drop that does not matter
#   GATE_OUT=gate-out         where junit.xml (and summary.md outside GitHub Actions) go
#   GATE_ARGS=                more options for rag-eval gate, e.g. "--stage rerank --inconclusive pass"
#   RAG_EVAL=rag-eval         the command (e.g. "python -m rag_eval")
set -u

if [ "$#" -ne 2 ]; then
    echo "usage: sh docs/ci/retrieval-gate.sh BASELINE CANDIDATE" >&2
    exit 2
fi
baseline=$1
candidate=$2
metric=${GATE_METRIC:-ndcg@budget}
max_drop=${GATE_MAX_DROP:-0.01}
out=${GATE_OUT:-gate-out}
mkdir -p "$out" || exit 2
summary=${GITHUB_STEP_SUMMARY:-$out/summary.md}

# shellcheck disable=SC2086  # RAG_EVAL and GATE_ARGS are word lists on purpose
${RAG_EVAL:-rag-eval} gate "$baseline" "$candidate" --metric "$metric" --max-drop "$max_drop" \
    --junit "$out/junit.xml" --markdown "$summary" ${GATE_ARGS:-}
status=$?

case $status in
    0) echo "retrieval gate: pass" >&2 ;;
    1) echo "retrieval gate: regression: $metric dropped by more than $max_drop" >&2 ;;
    2) echo "retrieval gate: bad input, or the two results are not comparable (see the error above)" >&2 ;;
    3) echo "retrieval gate: inconclusive: too few queries to tell a drop of $max_drop (see the queries needed)" >&2 ;;
    *) echo "retrieval gate: rag-eval exited with status $status" >&2 ;;
esac
exit $status
