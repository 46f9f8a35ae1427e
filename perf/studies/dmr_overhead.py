#!/usr/bin/python3
"""perf/studies/dmr_overhead.py: DMR's overhead per mode, as SpareTrain's ablation shows it.

Runs perf/bench_dmr (one rank, one thread: every variant's step paired with DMR off under the
same activation checkpointing in the same round) and reads every row of its table, so variants
bench_dmr gains later (dmr.mode = planned with phases 1 / 1,2 / 1,2,3) appear without editing
this script. Bars: overhead % = (median paired ratio to off - 1) x 100; dots: the DMR module's
own estimate (time in its checks over the rest of the step). Full: 12 rounds; quick: 1.
CSV columns: variant, ac, mode, median_ms, best_ms, ratio_vs_off, overhead_pct, dmr_estimate_pct."""
import re

import studylib as sl

rounds = 1 if sl.QUICK else 12
out = sl.run([sl.bench("bench_dmr"), str(rounds)])
row_re = re.compile(r"^(\S.*?)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)x\s+(\S+)\s*$")
rows, in_table = [], False
for line in out.splitlines():
    if line.startswith("variant"):
        in_table = True
        continue
    m = row_re.match(line) if in_table else None
    if not m:
        in_table = in_table and not line.startswith("RESULT")
        continue
    name = m.group(1)
    ac, _, mode = name.partition(", ")
    est = m.group(5).rstrip("%").lstrip("+")
    ratio = float(m.group(4))
    rows.append([name, ac.replace("ac ", ""), mode, m.group(2), m.group(3), f"{ratio:.3f}",
                 f"{100 * (ratio - 1):.1f}", "" if est == "-" else est])
if not any(r[2] == "off" for r in rows) or len(rows) < 3:
    sl.die(f"bench_dmr printed no table of variants (got {len(rows)} rows)")
sl.write_csv(["variant", "ac", "mode", "median_ms", "best_ms", "ratio_vs_off", "overhead_pct",
              "dmr_estimate_pct"], rows)

bars = [r for r in rows if r[2] != "off"]
head = out.splitlines()[0]
shape = re.search(r"GPT-2 (.*?), (\d+ threads?)", head)
fig, ax = sl.plt.subplots(figsize=(7.5, 4.5))
colors = {"none": "tab:blue", "full": "tab:orange"}
x = range(len(bars))
ax.bar(x, [float(r[6]) for r in bars], color=[colors.get(r[1], "tab:green") for r in bars],
       label="measured: median paired step ratio - 1")
est = [(i, float(r[7])) for i, r in enumerate(bars) if r[7]]
if est:
    ax.plot([e[0] for e in est], [e[1] for e in est], "kD", ms=6,
            label="DMR module's own estimate (check time / rest of step)")
for i, r in enumerate(bars):
    ax.annotate(f"{float(r[6]):.0f}%", (i, float(r[6]) / 2), ha="center", va="center",
                color="white", fontsize=11, fontweight="bold")
ax.set_xticks(list(x))
ax.set_xticklabels([f"{r[2]}\n(AC {r[1]})" for r in bars], fontsize=9)
ax.set_ylabel("step time overhead vs DMR off (%)")
ax.set_xlabel("DMR mode (activation checkpointing)")
ax.set_ylim(0, max(max(float(r[6]) for r in bars), max((e[1] for e in est), default=0)) * 1.2 + 5)
ax.grid(axis="y", alpha=0.3)
ax.legend(fontsize=8, loc="upper right")
what = (f"DMR overhead per mode vs off: GPT-2 {shape.group(1) if shape else ''}, 1 rank, "
        f"{shape.group(2) if shape else ''}")
sl.title(ax, what, f"bench_dmr, median of {rounds} paired round(s), {sl.where()}")
sl.save(fig)
print("RESULT dmr_overhead: " + ", ".join(f"{r[0]} {float(r[5]):.2f}x" for r in bars))
