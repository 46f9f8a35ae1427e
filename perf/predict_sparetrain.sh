#!/bin/bash
# perf/predict_sparetrain.sh [BIN]: `ftllm plan --predict` for SpareTrain's dense setups on 32 H200
# (PAPERS.md section 1), as Markdown table rows for perf/README.md: each model at 80/94/141 GB, the
# Mistral-Large 80 GB ablation at batch 16/32/64, then the same with the links slowed to x0.3
# (the "calibrated" rows: naive DMR then costs what the paper's numbers imply). Columns: predicted
# overhead of naive DMR and of phases 1, 1+2, 1+2+3 against no DMR, and phases' throughput gain
# against naive DMR (the paper's ablation metric); then every pipeline stage simulated together
# (the `pipeline:` line: naive, the stages' own phases-1,2,3 plans, refined together, refined
# with deferred checks replayed in the PP hops alone as in the paper, the pipeline's bound), all
# with ftllm's bookkeeping (cluster.dmr_keep = copy: a deferred check's inputs copied and outputs
# fingerprinted at HBM bandwidth), and last the refined plans with the paper's free bookkeeping
# (cluster.dmr_keep = free). A what-if: a few seconds a row (the refinement's search, twice).
set -eu
bin=${1:-bin/ftllm}
llama=inputs/llama3-70b-h200x32.ini mistral=inputs/mistral-large-h200x32.ini

row() { # row LABEL DECK OVERRIDES...
  local label=$1 deck=$2; shift 2
  local free # the refined plans with the paper's free bookkeeping (cluster.dmr_keep = free)
  free=$("$bin" plan --predict "$deck" "$@" cluster.dmr_keep=free | awk '/^pipeline:/ { gsub(/,/, ""); print $12 }')
  "$bin" plan --predict "$deck" "$@" | awk -v label="$label" -v free="$free" '
    /^layout:/ { split($0, a, /[ =]+/); lay = "tp " a[3] " pp " a[6] " dp " a[9] }
    /^memory per GPU:/ { match($0, /budget [0-9.]+ GB/); bud = substr($0, RSTART + 7, RLENGTH - 10) }
    /against naive DMR/ { match($0, /[-+][0-9.]+%/); g[++n] = substr($0, RSTART, RLENGTH) }
    /^overhead:/ { gsub(/,/, ""); o = $3 " | " $6 " | " $8 " | " $10 }
    /^pipeline:/ { gsub(/,/, ""); q = $3 " | " $10 " | " $12 " | " $20 " | " $14 }
    END { printf "| %s | %s | %s | %s | %s / %s / %s | %s | %s |\n", label, lay, bud, o, g[1], g[2], g[3], q, free }'
}

echo "| setup | layout | budget GB | naive | 1 | 1+2 | 1+2+3 | gain vs naive: 1 / 1+2 / 1+2+3 | every stage: naive | 1+2+3 | refined | in the hops alone | bound | refined, keeping free |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
for scale in 1 0.3; do
  links=()
  [ "$scale" = 1 ] || links=(cluster.intra_gbs=108 cluster.inter_gbs=13.5)
  tag=""; [ "$scale" = 1 ] || tag=" (links x0.3)"
  row "Llama-3-70B 80 GB$tag" "$llama" cluster.gpu_mem_gb=80 parallel.pp=4 parallel.dp=1 parallel.microbatches=32 "${links[@]}"
  row "Llama-3-70B 94 GB$tag" "$llama" cluster.gpu_mem_gb=94 "${links[@]}"
  row "Llama-3-70B 141 GB$tag" "$llama" "${links[@]}"
  row "Mistral-Large 80 GB$tag" "$mistral" cluster.gpu_mem_gb=80 "${links[@]}"
  row "Mistral-Large 94 GB$tag" "$mistral" cluster.gpu_mem_gb=94 "${links[@]}"
  row "Mistral-Large 141 GB$tag" "$mistral" "${links[@]}"
  for mb in 16 64; do
    row "Mistral-Large 80 GB batch $mb$tag" "$mistral" cluster.gpu_mem_gb=80 parallel.microbatches=$mb "${links[@]}"
  done
done
