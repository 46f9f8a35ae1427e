#!/usr/bin/python3
"""perf/studies/ttt_vs_r.py: time-to-train vs redundancy r, the failure-law model's prediction
beside the discrete-event simulator, for exponential and Weibull (shape 0.8) GPU failures.

For each law: `ftllm optimize` prints the predicted time-to-train of every r (the curves: SPARe
and replication, each at its own best checkpoint interval; checkpoint-only as a level);
`mpiexec -n 2 ftllm simulate` with cluster.policy and cluster.r fixed (the interval is again the
optimizer's for that r) gives the simulated mean and its 95% confidence half-width (the points).
Full: inputs/cluster-spare600k.ini (600k GPUs in 1000 groups, 5-min system MTBF, 60-min
restart), r_max 20, SPARe at r = 2 3 4 5 6 8 10 14 20 and replication at r = 2 3 4 6 10, 12
trials each (about 3 minutes on 2 cores); quick: the same deck at 24000 GPUs in 200 groups,
r_max 4, r = 2 and 3, 4 trials.
Below each panel: predicted / simulated - 1 with the simulated 95% half-width as error bars.
STUDIES_REPLOT=1: no runs, plot the CSV a previous run left in STUDIES_OUT.
CSV columns: law, policy, r, interval_steps, predicted_days, simulated_days, ci95_days (the
simulated columns empty where only the model was evaluated)."""
import re

import studylib as sl

DECK = "inputs/cluster-spare600k.ini"
if sl.QUICK:
    over = ["cluster.gpus=24000", "cluster.gpus_per_replica=120", "cluster.r_max=4"]
    sim_r = {"SPARe": (2, 3), "replication": (2, 3)}
    trials, what = 4, "24k GPUs in 200 groups, 2.1-h system MTBF"
else:
    over = ["cluster.r_max=20"]
    sim_r = {"SPARe": (2, 3, 4, 5, 6, 8, 10, 14, 20), "replication": (2, 3, 4, 6, 10)}
    trials, what = 12, "600k GPUs in 1000 groups, 5-min system MTBF"
LAWS = (("exponential", ["cluster.failure_law=exponential"]),
        ("weibull 0.8", ["cluster.failure_law=weibull", "cluster.weibull_shape=0.8"]))
POLICY = {"SPARe": "spare", "replication": "replication", "ckpt only": "ckpt"}
opt_re = re.compile(r"^  (ckpt only|replication|SPARe)\s+(\d+)\s+\S+\s+\S+\s+\S+\s+(\d+)\s+\S+\s+"
                    r"([0-9.]+)\s")
sim_re = re.compile(r"^(\w+)\s+(\d+)\s+(\d+) \|\s+([0-9.]+) \+- ([0-9.]+)\s+([0-9.]+) \|")
HEADER = ["law", "policy", "r", "interval_steps", "predicted_days", "simulated_days",
          "ci95_days"]


def measure():
    """optimize + simulate for each law; the CSV's rows."""
    rows = []
    for law, law_over in LAWS:
        out = sl.run([sl.FTLLM, "optimize", DECK] + over + law_over)
        pred = {}
        for m in map(opt_re.match, out.splitlines()):
            if m:
                pred[(m.group(1), int(m.group(2)))] = (int(m.group(3)), float(m.group(4)))
        if not any(p == "SPARe" for p, _ in pred) or not any(p == "ckpt only" for p, _ in pred):
            sl.die(f"`ftllm optimize {DECK}` ({law}) printed no table of alternatives")
        sim = {}
        for pol, rs in sim_r.items():
            for r in rs:
                out = sl.mpiexec(2, [sl.FTLLM, "simulate", DECK] + over + law_over +
                                 [f"cluster.policy={POLICY[pol]}", f"cluster.r={r}",
                                  f"cluster.trials={trials}"])
                m = next(filter(None, map(sim_re.match, out.splitlines())), None)
                if not m or int(m.group(2)) != r:
                    sl.die(f"`ftllm simulate` ({law}, {pol} r {r}) printed no result row")
                sim[(pol, r)] = (int(m.group(3)), float(m.group(4)), float(m.group(5)))
                print(f"{law:12s} {pol:12s} r {r:2d}: predicted {pred[(pol, r)][1]:8.2f} days, "
                      f"simulated {m.group(4)} +- {m.group(5)} "
                      f"({100 * (pred[(pol, r)][1] / float(m.group(4)) - 1):+.2f}%)")
        for (pol, r), (iv, days) in sorted(pred.items()):
            s = sim.get((pol, r))
            rows.append([law, pol, r, s[0] if s else iv, f"{days:.2f}",
                         f"{s[1]:.2f}" if s else "", f"{s[2]:.2f}" if s else ""])
    return rows


# STUDIES_REPLOT=1: plot the CSV a previous run wrote (restyling without 4-8 minutes of runs)
rows = sl.read_csv(HEADER) if sl.REPLOT else measure()
if not sl.REPLOT:
    sl.write_csv(HEADER, rows)
data = {}  # law -> ({(policy, r): predicted days}, {(policy, r): (simulated days, ci95)})
for law, pol, r, _, p, sd, ci in rows:
    pred, sim = data.setdefault(law, ({}, {}))
    pred[(pol, int(r))] = float(p)
    if sd:
        sim[(pol, int(r))] = (float(sd), float(ci))

fig, axes = sl.plt.subplots(2, 2, figsize=(12, 7.5), sharex=True, sharey="row",
                            gridspec_kw={"height_ratios": [2, 1]})
colors = {"SPARe": "tab:blue", "replication": "tab:orange"}
for col, (law, (pred, sim)) in enumerate(data.items()):
    ax, ex = axes[0][col], axes[1][col]
    for pol, c in colors.items():
        pts = sorted((r, v) for (p, r), v in pred.items() if p == pol)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "-", color=c,
                label=f"{pol}: predicted (failure-law model)")
        sp = sorted((r, v) for (p, r), v in sim.items() if p == pol)
        ax.errorbar([p[0] for p in sp], [p[1][0] for p in sp], yerr=[p[1][1] for p in sp],
                    fmt="o", color=c, ms=5, capsize=3, mfc="white",
                    label=f"{pol}: simulated, {trials} runs (95% CI)")
        ex.errorbar([p[0] for p in sp], [100 * (pred[(pol, p[0])] / p[1][0] - 1) for p in sp],
                    yerr=[100 * p[1][1] / p[1][0] for p in sp], fmt="o", color=c, ms=5,
                    capsize=3, mfc="white")
    ck = pred[("ckpt only", 1)]
    ax.axhline(ck, color="0.4", ls="--", lw=1)
    ax.annotate(f"checkpoint only: {ck:.0f} days", (0.02, ck), xycoords=("axes fraction", "data"),
                va="bottom", fontsize=8, color="0.3")
    ax.set_yscale("log")
    sl.log_axis(ax.yaxis, (1, 2, 3, 5))
    ax.set_title(f"GPU failures: {law}", fontsize=10)
    ex.axhline(0, color="k", lw=0.8)
    ex.set_xlabel("redundancy r (copies of each data shard)")
    for a in (ax, ex):
        a.grid(alpha=0.3, which="both")
        a.xaxis.set_major_locator(sl.ticker.MaxNLocator(integer=True))
axes[0][0].set_ylabel("time-to-train (days, log scale)")
axes[1][0].set_ylabel("predicted / simulated - 1 (%)\n(bars: the 95% CI)")
axes[0][0].legend(fontsize=7, loc="lower right", bbox_to_anchor=(1, 0.18))
sl.title(fig, f"Time-to-train vs r: {what}, 60-min restart, "
              "90 days failure-free", f"ftllm optimize + simulate ({DECK}), run on a {sl.where()}")
sl.save(fig)
worst = max(abs(pred[k] / v[0] - 1) for pred, sim in data.values() for k, v in sim.items())
print(f"RESULT ttt_vs_r: {sum(len(s) for _, s in data.values())} simulated points, "
      f"largest |predicted / simulated - 1| {100 * worst:.2f}%")
