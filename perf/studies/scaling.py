#!/usr/bin/python3
"""perf/studies/scaling.py: training throughput over 1, 2 and 4 ranks and the dp/tp/pp layouts.

`ftllm train`, one thread per rank, DMR off, the same model and the same global batch in every
layout (4 micro-batches of train.batch sequences per step, split over the dp replicas): 1 rank;
dp 2, tp 2, pp 2 (1F1B) on 2 ranks; dp 4, tp 4, pp 4, tp 2 x dp 2, pp 2 x dp 2, tp 2 x pp 2 on
4 ranks. Reads the summary line's tokens/s (steps after train.rate_skip = 2). Efficiency =
(tokens/s on P ranks / tokens/s on 1 rank) / P: 1 is a perfect split. On a machine with fewer
cores than ranks, the ranks also share cores, which caps the efficiency at cores / P.
Full: GPT-2 L4 C256 NH8 T64 B4, 8 steps; quick: a tiny model, 3 steps, 1- and 2-rank layouts.
CSV columns: layout, ranks, dp, tp, pp, tokens_per_s, ms_per_step, speedup, efficiency."""
import re

import studylib as sl

if sl.QUICK:
    steps, desc = 3, "GPT-2 L4 C32 NH4 T16 B2"
    model = ["model.layers=4", "model.channels=32", "model.heads=4", "model.seq_len=16",
             "train.batch=2"]
else:
    steps, desc = 8, "GPT-2 L4 C256 NH8 T64 B4"
    model = ["model.layers=4", "model.channels=256", "model.heads=8", "model.seq_len=64",
             "train.batch=4"]
MICRO = 4  # micro-batches per step over all replicas: the global batch is MICRO x train.batch
layouts = [(1, 1, 1), (2, 1, 1), (1, 2, 1), (1, 1, 2)]  # (dp, tp, pp)
if not sl.QUICK:
    layouts += [(4, 1, 1), (1, 4, 1), (1, 1, 4), (2, 2, 1), (2, 1, 2), (1, 2, 2)]
common = ["inputs/default.ini", f"train.steps={steps}", "train.rate_skip=2", "dmr.mode=off",
          "faults.schedule=", "train.val_batches=0", "train.sample_tokens=0",
          "checkpoint.interval=0", "run.threads=1", "parallel.schedule=1f1b"] + model
sum_re = re.compile(r"^summary: .*, ([0-9.]+) ms/step, ([0-9.]+) tok/s")


def name(dp, tp, pp):
    parts = [f"{k} {v}" for k, v in (("tp", tp), ("pp", pp), ("dp", dp)) if v > 1]
    return " x ".join(parts) or "1 rank"


rows, base = [], None
for dp, tp, pp in layouts:
    n = dp * tp * pp
    out = sl.mpiexec(n, [sl.FTLLM, "train"] + common +
                     [f"parallel.dp={dp}", f"parallel.tp={tp}", f"parallel.pp={pp}",
                      f"parallel.microbatches={MICRO // dp}"])
    m = next((sum_re.match(line) for line in out.splitlines() if sum_re.match(line)), None)
    if not m:
        sl.die(f"no summary line (ms/step, tok/s) from the {name(dp, tp, pp)} run")
    tps, ms = float(m.group(2)), float(m.group(1))
    base = base or tps
    rows.append([name(dp, tp, pp), n, dp, tp, pp, f"{tps:.0f}", f"{ms:.1f}", f"{tps / base:.3f}",
                 f"{tps / base / n:.3f}"])
    print(f"{name(dp, tp, pp):16s} {n} rank(s): {tps:9.0f} tok/s, {ms:8.1f} ms/step, "
          f"speedup {tps / base:.2f}, efficiency {tps / base / n:.2f}")
sl.write_csv(["layout", "ranks", "dp", "tp", "pp", "tokens_per_s", "ms_per_step", "speedup",
              "efficiency"], rows)

fig, (ax, bx) = sl.plt.subplots(1, 2, figsize=(12, 4.8))
colors = {1: "tab:gray", 2: "tab:blue", 4: "tab:orange"}
x = list(range(len(rows)))
for a, col, ylabel in ((ax, 5, "throughput (tokens/s)"), (bx, 8, "parallel efficiency")):
    a.bar(x, [float(r[col]) for r in rows], color=[colors[r[1]] for r in rows])
    a.set_xticks(x)
    a.set_xticklabels([r[0].replace(" x ", "\nx ") for r in rows], fontsize=8)
    a.set_xlabel("layout (colour: ranks)")
    a.set_ylabel(ylabel)
    a.grid(axis="y", alpha=0.3)
    for i, r in enumerate(rows):
        a.annotate(f"{float(r[col]):.2f}" if col == 8 else r[col], (i, float(r[col])),
                   ha="center", va="bottom", xytext=(0, 2), textcoords="offset points",
                   fontsize=8)
for n, c in colors.items():
    if any(r[1] == n for r in rows):
        ax.bar([0], [0], color=c, label=f"{n} rank{'s' if n > 1 else ''}")
ax.legend(fontsize=8)
cores = sl.os.cpu_count()
bx.axhline(1, color="k", lw=0.8)
for n in (2, 4):
    if n > cores and any(r[1] == n for r in rows):
        bx.axhline(cores / n, color=colors[n], ls="--", lw=1)
        bx.annotate(f"{cores} cores / {n} ranks", (len(rows) - 0.5, cores / n), ha="right",
                    va="bottom", fontsize=8, color=colors[n])
bx.set_ylim(0, 1.15 * max(1, max(float(r[8]) for r in rows)))
ax.set_title("tokens per second (same global batch)", fontsize=10)
bx.set_title("efficiency = speedup over 1 rank / ranks", fontsize=10)
sl.title(fig, f"Scaling over ranks and layouts: {desc}, {MICRO} micro-batches per step, "
              "1 thread per rank", f"bin/ftllm train, {sl.where()}")
sl.save(fig)
print("RESULT scaling: " + ", ".join(f"{r[0]} {float(r[8]):.2f}" for r in rows[1:]))
