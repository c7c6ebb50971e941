#!/usr/bin/env bash
# One embedded-model artifact for every graph the docs use: knn demos written by the gold-path teacher on the demo's
# training questions and on those of WC-P2, PQ-2H and PQ-3H, one compile per graph, each extending the last
# (`--extend`). It is built from ../shared/data, never committed (it holds the benchmarks' training questions); the
# shipped default (data/embedded-demo.json) stays the demo's own. Run on one of these graphs, the program is shown that graph's demos
# only; on any other it is shown them all and says so once. No `--set`: the rules start at their defaults.
#
#     bash scripts/make_multi_graph_artifact.sh   # -> runs/embedded-multi-graph.json; then --program that file
set -euo pipefail
cd "$(dirname "$0")/.."
DATA=${PPOGA_SHARED_DATA:-../shared/data}
OUT=${1:-runs/embedded-multi-graph.json}
mkdir -p "$(dirname "$OUT")"
export HF_HUB_OFFLINE=1 LITELLM_LOCAL_MODEL_COST_MAP=True
compile() { ppoga compile --optimizer knn --k 3 --teacher-lm oracle/gold-path --program none --dev-limit 0 "$@"; }
compile --dataset demo-train --split all --out "$OUT"
compile --dataset "wc2014:$DATA/wc2014/WC-P2.txt" --split train --sample 100 --extend "$OUT" --out "$OUT"
compile --dataset "pathquestion:$DATA/pathquestion/PQ-2H.txt" --split train --sample 100 --extend "$OUT" --out "$OUT"
compile --dataset "pathquestion:$DATA/pathquestion/PQ-3H.txt" --split train --sample 100 --extend "$OUT" --out "$OUT"
