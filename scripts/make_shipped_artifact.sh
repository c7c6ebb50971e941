#!/usr/bin/env bash
# The embedded model's default artifact (data/embedded-demo.json, shipped as ppoga_dspy/data/embedded-demo.json):
# knn demos written by the gold-path teacher on the training questions of each graph the docs use, one compile per
# graph, each extending the last (`--extend`). Run on one of these graphs, the program is shown that graph's demos
# only; on any other it is shown them all and says so once. No `--set`: the rules start at their defaults.
#
#     bash scripts/make_shipped_artifact.sh            # from the repository root, ../shared/data beside it
set -euo pipefail
cd "$(dirname "$0")/.."
DATA=${PPOGA_SHARED_DATA:-../shared/data}
OUT=${1:-data/embedded-demo.json}
export HF_HUB_OFFLINE=1 LITELLM_LOCAL_MODEL_COST_MAP=True
compile() { ppoga compile --optimizer knn --k 3 --teacher-lm oracle/gold-path --program none --dev-limit 0 "$@"; }
compile --dataset demo-train --split all --out "$OUT"
compile --dataset "wc2014:$DATA/wc2014/WC-P2.txt" --split train --sample 100 --extend "$OUT" --out "$OUT"
compile --dataset "pathquestion:$DATA/pathquestion/PQ-2H.txt" --split train --sample 100 --extend "$OUT" --out "$OUT"
compile --dataset "pathquestion:$DATA/pathquestion/PQ-3H.txt" --split train --sample 100 --extend "$OUT" --out "$OUT"
