#!/bin/bash
# e2e/plan_predict.sh: `ftllm plan --predict` as a user meets it. Both paper decks (Llama-3-70B
# and Mistral-Large on 32 H200) run on one rank and print a table per phase set and the
# `overhead:` summary (the tables' numbers; phases 1 and 1,2 use no window and defer no check
# of a phase they lack), every stage simulated (a line per table, the refined plans never longer
# than the stages' own, the pipeline's bound below them; dmr.refine = off: no search; one stage:
# no simulation), and the same numbers on two ranks; overrides work (80 GB variants); bad
# input gets one line on stderr and exit code 2: no deck, a missing deck, a bad override, MoE,
# tensor parallelism beyond a node, a footprint over the GPU's memory, too many micro-batches.
set -u
source "$(dirname "$0")/lib.bash"
tmp=$E2E_TMP
llama=inputs/llama3-70b-h200x32.ini mistral=inputs/mistral-large-h200x32.ini
pct='[0-9]+\.[0-9]%'
for bin in "${e2e_bins[@]}"; do
  tag=$(e2e_tag "$bin")
  for deck in "$llama" "$mistral"; do
    name=$(basename "$deck" .ini)
    run "$tag predict $name" 0 "" 1 "$bin" plan --predict "$deck"
    has "$tag predict $name overhead" "^overhead: naive $pct, phases 1 $pct, 1,2 $pct, 1,2,3 $pct of a [0-9.]+ s step"
    has "$tag predict $name phase 1,2,3 table" '^phases 1,2,3:$'
    has "$tag predict $name layout" '^layout: tp 8 x pp [24] x dp [12] = 32 GPUs \(4 nodes of 8\), TP in a node, PP hops inter-node'
    # the summary repeats each table's predicted overhead; phase 1 uses no window, phases 1,2 no
    # TP or DP window (Phase 2 fills PP windows only), and neither defers a check
    want=$(awk '/^phases /{ph = substr($2, 1, length($2) - 1)}
      /^  predicted overhead:/{s = s sep ph " " $3; sep = ", "} END{print "phases " s " of a"}' "$tmp/out")
    grep -qF -- "$want" "$tmp/out" && ok "$tag predict $name summary = tables" || bad "$tag predict $name summary = tables" "no '$want'"
    awk '/^phases /{ph = $2}
      NF == 8 && (ph == "1:" && $5 + $6 || ph == "1,2:" && $5) {e = 1}
      /windows used:/ && (ph == "1:" && / [1-9][0-9]* of / || ph == "1,2:" && /(TP|DP) [1-9]/) {e = 1}
      END{exit e}' "$tmp/out" && ok "$tag predict $name phases apart" ||
      bad "$tag predict $name phases apart" "a check deferred, or a window used, by a phase set without that phase"
    # memory in time: every table's checks keep at most the budget at once
    awk '/windows used:/ { n++; if (!match($0, /kept at most [0-9.]+ GB at once \(budget [0-9.]+ GB\)/)) bad = 1
      else { split(substr($0, RSTART, RLENGTH), f, " "); if (f[4] + 0 > f[9] + 0) bad = 1 } }
      END { exit bad || n != 3 }' "$tmp/out" && ok "$tag predict $name kept within the budget" ||
      bad "$tag predict $name kept within the budget" "$(grep 'windows used' "$tmp/out")"
    # every stage simulated: a line under each table, the stages' plans refined under 1,2,3 and
    # never longer for it, the pipeline's bound at most the refined step, the summary the same
    has "$tag predict $name pipeline summary" "^pipeline: naive $pct, phases 1 $pct, 1,2 $pct, 1,2,3 $pct, refined $pct, bound $pct, refined in the hops alone $pct of a [0-9.]+ s step \\(simulated, every stage"
    # tp 8: a run refines too (tp rank 0's pipeline, its choices on every peer): no caveat
    if grep -q "refines only with" "$tmp/out"; then bad "$tag predict $name tp 8 no caveat" "$(grep 'refined together' "$tmp/out")"; else ok "$tag predict $name tp 8 no caveat"; fi
    [ "$(grep -c '^  every stage ([24]), simulated: no DMR' "$tmp/out")" = 3 ] && ok "$tag predict $name pipeline lines" ||
      bad "$tag predict $name pipeline lines" "not one under each of the 3 tables"
    has "$tag predict $name hops alone" "^  deferred checks replayed in the PP hops alone .*: the stages' own plans \\+$pct, refined \\+$pct: the pipeline's waits give -?[0-9.]+ points"
    awk '/^pipeline:/ { gsub(/[,%]/, ""); if (!($12 + 0 <= $10 + 0 && $14 + 0 <= $12 + 0)) e = 1; n++ }
      /refined together/ { r = $0 }
      END { exit e || n != 1 || r == "" }' "$tmp/out" && ok "$tag predict $name refined <= own >= bound" ||
      bad "$tag predict $name refined <= own >= bound" "$(grep '^pipeline:' "$tmp/out")"
    [ "$deck" = "$llama" ] || continue # (a few seconds of search a run: on one deck)
    cp "$tmp/out" "$tmp/np1"
    run "$tag predict $name np2" 0 "" 2 "$bin" plan --predict "$deck"
    cmp -s "$tmp/out" "$tmp/np1" && ok "$tag predict $name np2 same" || bad "$tag predict $name np2 same" "output differs"
  done
  run "$tag predict mistral 80 GB" 0 "" 1 "$bin" plan --predict "$mistral" cluster.gpu_mem_gb=80 dmr.refine=off
  has "$tag predict mistral 80 GB memory" 'of 80 GB .* deferred-check budget [0-9.]+ GB'
  run "$tag predict llama 80 GB pp4" 0 "" 1 "$bin" plan --predict "$llama" cluster.gpu_mem_gb=80 parallel.pp=4 parallel.dp=1 parallel.microbatches=32 dmr.refine=off
  has "$tag predict llama pp4 overhead" "^overhead: naive $pct"
  has "$tag predict llama pp4 pipeline" "^pipeline: naive $pct, .* \\(simulated, every stage"
  # dmr.refine = off: the stages' own plans, no search; no pipeline on one stage
  run "$tag predict refine off" 0 "" 1 "$bin" plan --predict "$llama" dmr.refine=off
  if grep -q "refined together" "$tmp/out"; then bad "$tag predict refine off" "refined all the same"; else ok "$tag predict refine off"; fi
  awk '/^pipeline:/ { gsub(/[,%]/, ""); exit !($10 == $12) }' "$tmp/out" && ok "$tag predict refine off = own plans" ||
    bad "$tag predict refine off = own plans" "$(grep '^pipeline:' "$tmp/out")"
  # cluster.dmr_keep: copy (the default, as ftllm keeps a deferred check) against free (the
  # paper's model): the hardware line says which; naive and the pipeline's bound (neither keeps
  # anything) the same in both
  run "$tag predict keep copy" 0 "" 1 "$bin" plan --predict "$llama" dmr.refine=off
  has "$tag predict keep copy line" "^hardware: .*; a deferred check's keeping copies its inputs and fingerprints its outputs at HBM speed \\(cluster.dmr_keep = copy"
  grep '^pipeline:' "$tmp/out" > "$tmp/keep_copy"
  run "$tag predict keep free" 0 "" 1 "$bin" plan --predict "$llama" dmr.refine=off cluster.dmr_keep=free
  has "$tag predict keep free line" "^hardware: .*; a deferred check's keeping is free \\(cluster.dmr_keep = free"
  awk 'NR == FNR { gsub(/[,%]/, ""); n = $3; b = $14; next } /^pipeline:/ { gsub(/[,%]/, ""); exit !(n == $3 && b == $14 && n != "") }' \
    "$tmp/keep_copy" "$tmp/out" && ok "$tag predict keep: naive and bound the same" ||
    bad "$tag predict keep: naive and bound the same" "$(cat "$tmp/keep_copy"; grep '^pipeline:' "$tmp/out")"
  # more operators than the pipeline's simulation takes: the stage tables, and one line instead
  run "$tag predict pipeline too large" 0 "" 1 "$bin" plan --predict "$mistral" parallel.microbatches=1200 dmr.refine=off
  has "$tag predict pipeline too large" "^pipeline: not simulated: about [0-9]+ operators on the 4 stages, more than [0-9]+ \\(HINT"
  has "$tag predict pipeline too large tables" "^overhead: naive $pct"
  # tp 1, one micro-batch: refined too
  run "$tag predict tp 1" 0 "" 1 "$bin" plan --predict "$llama" parallel.tp=1 parallel.dp=16 cluster.gpu_mem_gb=100000 parallel.microbatches=1
  has "$tag predict tp 1 refined" "refined together [-+][0-9.]+% \\([0-9]+ checks moved"
  run "$tag predict pp1" 0 "" 1 "$bin" plan --predict "$llama" parallel.pp=1 parallel.tp=8 parallel.dp=4 parallel.microbatches=8 cluster.gpu_mem_gb=1000
  if grep -qE "^pipeline:|every stage" "$tmp/out"; then bad "$tag predict pp1 no pipeline" "a pipeline line on one stage"; else ok "$tag predict pp1 no pipeline"; fi
  run "$tag predict without deck" 2 "usage: ftllm plan --predict DECK" 1 "$bin" plan --predict
  run "$tag predict missing deck" 2 "nope.ini: cannot open the deck" 1 "$bin" plan --predict nope.ini
  run "$tag predict bad override" 2 "command line override 1 'cluster.inter_gbs=0': cluster.inter_gbs = 0 is out of range" 1 "$bin" plan --predict "$llama" cluster.inter_gbs=0
  run "$tag predict moe" 2 "command line override 1: model.experts = 8: plan --predict models dense models only" 1 "$bin" plan --predict "$llama" model.experts=8
  run "$tag predict tp beyond a node" 2 "command line override 1: parallel.tp = 16: plan --predict keeps tensor parallelism inside a node" 1 "$bin" plan --predict "$llama" parallel.tp=16 parallel.dp=1
  run "$tag predict does not fit" 2 "command line override 1: the training footprint (" 1 "$bin" plan --predict "$mistral" cluster.gpu_mem_gb=60
  run "$tag predict too many micro-batches" 2 "command line override 1: parallel.microbatches = 1000000: about" 1 "$bin" plan --predict "$mistral" parallel.microbatches=1000000
  run "$tag train refuses the shape" 2 "$llama:$(grep -n "^ffn" "$llama" | cut -d: -f1): model.ffn = 28672: the trainer builds the GPT-2 block" 1 "$bin" train "$llama" parallel.tp=1 parallel.pp=1 parallel.dp=1
done
e2e_finish
