#!/usr/bin/python3
"""perf/plot_cluster.py: plots of the cluster models (PNG), from `ftllm optimize` output.

  /usr/bin/python3 perf/plot_cluster.py [bin/ftllm] [outdir]

Writes ttt_vs_r.png (predicted time-to-train vs r, per policy), avail_vs_r.png (availability vs r)
for inputs/cluster-spare600k.ini, and cett_vs_spares.png (CETT vs intra-block spare trays, best
inter-block spares for each) for inputs/cluster-meta-sparing.ini. Needs Debian python3-matplotlib;
not part of `make test`."""
import re
import subprocess
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

ftllm = sys.argv[1] if len(sys.argv) > 1 else "bin/ftllm"
out = sys.argv[2] if len(sys.argv) > 2 else "perf"

def optimize(deck, *over):
    return subprocess.run([ftllm, "optimize", deck, *over], check=True, capture_output=True,
                          text=True).stdout

rows = {}
for line in optimize("inputs/cluster-spare600k.ini").splitlines():
    m = re.match(r"^  (ckpt only|replication|SPARe)\s+(\d+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)", line)
    if m:
        rows.setdefault(m.group(1), []).append((int(m.group(2)), float(m.group(8)), float(m.group(10))))
for what, col, fname, ylabel in (("ttt", 1, "ttt_vs_r.png", "predicted time-to-train (days)"),
                                 ("avail", 2, "avail_vs_r.png", "availability")):
    plt.figure(figsize=(6, 4))
    for pol, pts in rows.items():
        plt.plot([p[0] for p in pts], [p[col] for p in pts], "o-", label=pol)
    plt.xlabel("redundancy r")
    plt.ylabel(ylabel)
    if what == "ttt":
        plt.yscale("log")
    plt.title("600k GPUs, 5 min system MTBF, 60 min restart")
    plt.legend()
    plt.grid(alpha=0.3)
    plt.tight_layout()
    plt.savefig(f"{out}/{fname}", dpi=120)

pts = []
for line in optimize("inputs/cluster-meta-sparing.ini", "cluster.r_max=2").splitlines():
    m = re.match(r"^\s+(\d+)\s+(\d+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+(\d+)\s+([0-9.]+)\s+(\d+)$", line)
    if m:
        pts.append((int(m.group(1)), int(m.group(2)), float(m.group(8))))
plt.figure(figsize=(6, 4))
plt.plot([p[0] for p in pts], [p[2] for p in pts], "o-")
for I, R, c in pts:
    plt.annotate(f"R={R}", (I, c), textcoords="offset points", xytext=(4, 4), fontsize=8)
plt.xlabel("intra-block spare trays I (of 18)")
plt.ylabel("CETT (best R)")
plt.title("B=4 zones x L=256 blocks of 72 GPUs")
plt.grid(alpha=0.3)
plt.tight_layout()
plt.savefig(f"{out}/cett_vs_spares.png", dpi=120)
print(f"wrote {out}/ttt_vs_r.png {out}/avail_vs_r.png {out}/cett_vs_spares.png")
