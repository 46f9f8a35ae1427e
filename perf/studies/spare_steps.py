#!/usr/bin/python3
"""perf/studies/spare_steps.py: SPARe's step time vs its redundancy r, without failures and after
k replica failures.

`ftllm train` on 4 ranks, dp 4 (one rank per replica), one thread per rank, DMR off: plain data
parallelism (spare.r = 0: the bucketed all-reduce) once, then spare.r = 1, 2, 3 each with k = 0
.. r-1 failures from a fault file's `fail` lines (replica 1 before step F1, replica 2 before step
F2: neighbours on the ring, the case r copies are there to mask). Reads every step line (ms, live
replicas, stack depth). Prints per run the mean step time before the first failure and after the
last one (steps after the first, which warms up) and their ratio, measured in the same run.
Full: GPT-2 L4 C256 T64 B4, 24 steps, failures before steps 9 and 17; quick: a tiny model, 6
steps, failures before 3 and 5.
CSV columns: r, failures, step, ms, live, depth."""
import os
import re
import tempfile

import studylib as sl

if sl.QUICK:
    steps, fail_at, desc = 6, (3, 5), "GPT-2 L2 C32 T16 B2"
    model = ["model.layers=2", "model.channels=32", "model.heads=2", "model.seq_len=16",
             "train.batch=2"]
else:
    steps, fail_at, desc = 24, (9, 17), "GPT-2 L4 C256 T64 B4"
    model = ["model.layers=4", "model.channels=256", "model.heads=8", "model.seq_len=64",
             "train.batch=4"]
common = ["inputs/default.ini", "parallel.dp=4", f"train.steps={steps}", "dmr.mode=off",
          "train.val_batches=0", "train.sample_tokens=0", "checkpoint.interval=0",
          "run.threads=1"] + model
step_re = re.compile(r"^step +(\d+)/\d+ \|.*\| +([0-9.]+) ms \|.*?(?:\| live (\d+) depth (\d+))?$")

runs = [(0, 0)] + [(r, k) for r in (1, 2, 3) for k in range(r)]
rows, series = [], {}
with tempfile.TemporaryDirectory() as tmp:
    for r, k in runs:
        faults = os.path.join(tmp, f"r{r}k{k}.faults")
        with open(faults, "w") as f:
            for i in range(k):
                f.write(f"fail step={fail_at[i]} replica={i + 1}\n")
        out = sl.mpiexec(4, [sl.FTLLM, "train"] + common +
                         [f"spare.r={r}", f"faults.schedule={faults if k else ''}"])
        pts = []
        for line in out.splitlines():
            m = step_re.match(line)
            if m:
                live, depth = m.group(3) or "4", m.group(4) or "1"
                pts.append((int(m.group(1)), float(m.group(2)), int(live), int(depth)))
                rows.append([r, k, m.group(1), m.group(2), live, depth])
        if len(pts) != steps:
            sl.die(f"spare.r={r} with {k} failure(s): {len(pts)} step lines, want {steps}")
        if k and pts[-1][2] != 4 - k:
            sl.die(f"spare.r={r} with {k} failure(s): {pts[-1][2]} replicas live at the end, "
                   f"want {4 - k}")
        series[(r, k)] = pts
sl.write_csv(["r", "failures", "step", "ms", "live", "depth"], rows)


def mean(xs):
    return sum(xs) / len(xs) if xs else float("nan")


summary = []
for (r, k), pts in series.items():
    before = [p[1] for p in pts[1:] if k == 0 or p[0] < fail_at[0]]
    after = [p[1] for p in pts if k and p[0] >= fail_at[k - 1] + 1]  # the failure step regrids
    ratio = mean(after) / mean(before) if k else 1.0
    summary.append((r, k, mean(before), mean(after) if k else float("nan"), ratio,
                    pts[-1][3]))
    print(f"r {r} ({'plain DP' if r == 0 else 'SPARe'}), {k} failure(s): {mean(before):7.1f} ms "
          f"before" + (f", {mean(after):7.1f} ms after (depth {pts[-1][3]}): x{ratio:.2f}"
                       if k else ""))

fig, (ax, bx) = sl.plt.subplots(1, 2, figsize=(12, 4.8), gridspec_kw={"width_ratios": [3, 2]})
styles = {0: ("0.4", ":"), 1: ("tab:blue", "-"), 2: ("tab:orange", "-"), 3: ("tab:green", "-")}
kstyle = {0: "-", 1: "--", 2: "-."}
for (r, k), pts in series.items():
    c, ls = styles[r]
    ax.plot([p[0] for p in pts], [p[1] for p in pts], ls if r == 0 else kstyle[k], color=c,
            marker="o", ms=3, label="plain DP (spare.r = 0)" if r == 0 else
            f"r = {r}, {k} failure{'s' if k != 1 else ''}")
for i, s in enumerate(fail_at):
    ax.axvline(s - 0.5, color="red", alpha=0.4, lw=1)
    ax.annotate(f"replica {i + 1} fails", (s - 0.5, 1), xycoords=("data", "axes fraction"),
                rotation=90, va="top", ha="right", fontsize=8, color="red")
ax.set_xlabel("training step")
ax.set_ylabel("step time (ms)")
ax.set_ylim(bottom=0)
ax.grid(alpha=0.3)
ax.legend(fontsize=7, ncol=2, loc="lower right")
ax.set_title("step time per step", fontsize=10)
labels = [f"r{r}\nk{k}" if r else "plain\nDP" for r, k, *_ in summary]
x = range(len(summary))
base = summary[0][2]
bx.bar([i - 0.2 for i in x], [s[2] / base for s in summary], 0.4, color="tab:gray",
       label="before the first failure")
bx.bar([i + 0.2 for i in x], [s[3] / base if s[1] else 0 for s in summary], 0.4,
       color="tab:red", label="after the last failure")
for i, s in enumerate(summary):
    if s[1]:
        bx.annotate(f"x{s[4]:.2f}", (i + 0.2, s[3] / base), ha="center", va="bottom",
                    xytext=(0, 2), textcoords="offset points", fontsize=8)
bx.set_xticks(list(x))
bx.set_xticklabels(labels, fontsize=8)
bx.set_xlabel("redundancy r, failures k")
bx.set_ylabel("mean step time / plain DP's")
bx.axhline(1, color="k", lw=0.8)
bx.grid(axis="y", alpha=0.3)
bx.legend(fontsize=8)
bx.set_title("mean step time (x: after / before, same run)", fontsize=10)
sl.title(fig, f"SPARe step time vs r and failures: {desc}, dp 4 on 4 ranks, 1 thread each",
         f"bin/ftllm train, {sl.where()} (4 ranks share the cores)")
sl.save(fig)
print("RESULT spare_steps: " + ", ".join(
    f"r{r} k{k} x{ratio:.2f}" for r, k, _, _, ratio, _ in summary if k))
