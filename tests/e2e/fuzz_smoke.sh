#!/bin/bash
# e2e/fuzz_smoke.sh: `make fuzz` in a short, seeded form (3000 inputs per target, seed 1), so a
# fuzz target that no longer builds, or an input parser that crashes on one of the first inputs
# derived from its corpus, fails `make test` instead of waiting for someone's `make fuzz`. The
# targets link the release library: under another build (make DEBUG=1 test) this skips, as it
# does without clang.
set -u
source tests/e2e/lib.bash
build=${FTLLM_BUILD:-build/release}
if ! command -v clang > /dev/null; then
  echo "SKIP fuzz_smoke: no clang (scripts/install-deps installs it)"
  echo "[  SKIPPED ] 1 test(s)."
  exit 0
fi
if [ "$build" != build/release ] || [ ! -f build/release/libftllm.a ]; then
  echo "SKIP fuzz_smoke: the fuzz targets link build/release/libftllm.a; this is $build"
  echo "[  SKIPPED ] 1 test(s)."
  exit 0
fi
timeout 600 make --no-print-directory fuzz FUZZ_LIMIT='-runs=3000 -seed=1' > "$E2E_TMP/out" 2>&1
rc=$?
if [ "$rc" -ne 0 ]; then
  bad "make fuzz (3000 inputs each)" "exit code $rc; last lines: $(tail -n 15 "$E2E_TMP/out" | head -c 1500)"
else
  ok "make fuzz builds its three targets"
  mapfile -t done < <(grep '^Done ' "$E2E_TMP/out") # libFuzzer's last line, per target in order
  k=0
  for t in deck faults plan; do
    if [[ "${done[$k]:-}" == "Done 3000 runs"* ]]; then
      ok "fuzz_$t: 3000 inputs, no crash, leak or undefined behaviour"
    else
      bad "fuzz_$t" "its run ended '${done[$k]:-}': $(tail -n 15 "$E2E_TMP/out" | head -c 1500)"
    fi
    k=$((k + 1))
  done
fi
e2e_finish
