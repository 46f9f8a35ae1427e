#!/usr/bin/python3
"""perf/studies/ckpt_bandwidth.py: checkpoint write bandwidth vs state size and ranks, sync and
async.

Runs perf/bench_ckpt (a GPT-2 124M-shaped state scaled by FT_BENCH_SCALE: params + AdamW m, v,
rows split over the ranks, one HDF5 file; baseline: pwrite + fsync of the same bytes into a
plain file, in the same round) on 1, 2 and 4 ranks at several sizes, and reads every round's
line: plain write, synchronous checkpoint write, the training stall of an asynchronous one (the
copy to its staging buffers) and its background write. Bandwidth = state bytes / median time
over the rounds; the paired ratio = median over rounds of plain time / checkpoint time (both
sides of a round met the same machine load: the steadier number on a shared machine). The
folder is STUDIES_OUT/ckpt-tmp (emptied by the benchmark).
Full: 17 to 450 MB, 3 rounds (3-8 minutes); quick: 5 and 9 MB, 1 and 2 ranks, 1 round.
CSV columns: ranks, mb, round, plain_write_s, ckpt_write_s, async_stall_s, async_write_s."""
import os
import re

import studylib as sl

if sl.QUICK:
    scales, ranks, rounds = (0.002, 0.005), (1, 2), 1
else:
    scales, ranks, rounds = (0.01, 0.03, 0.1, 0.3), (1, 2, 4), 3
folder = os.path.join(sl.OUT, "ckpt-tmp")
round_re = re.compile(r"^  round \d+: plain write ([0-9.]+) s, checkpoint write ([0-9.]+) s, "
                      r".*async stall ([0-9.]+) s \(write ([0-9.]+) s\)")
bytes_re = re.compile(r"= (\d+) bytes")
rows, med, paired = [], {}, {}
for n in ranks:
    for s in scales:
        out = sl.mpiexec(n, [sl.bench("bench_ckpt")],
                         {"FT_BENCH_SCALE": str(s), "FT_BENCH_ROUNDS": str(rounds),
                          "FT_BENCH_DIR": folder})
        b = bytes_re.search(out)
        got = [m.groups() for m in map(round_re.match, out.splitlines()) if m]
        if not b or len(got) != rounds:
            sl.die(f"bench_ckpt ({n} ranks, scale {s}): {len(got)} round lines, want {rounds}, "
                   "or no '= N bytes' in its header")
        mb = int(b.group(1)) / 1e6
        for i, g in enumerate(got):
            rows.append([n, f"{mb:.1f}", i + 1] + list(g))
        med[(n, mb)] = [sl.median([float(g[k]) for g in got]) for k in range(4)]
        paired[(n, mb)] = sl.median([float(g[0]) / float(g[1]) for g in got])
        pw, cw, st, aw = med[(n, mb)]
        print(f"{n} rank(s), {mb:7.1f} MB: plain {mb / pw:7.0f} MB/s, checkpoint {mb / cw:7.0f} "
              f"MB/s (paired x{paired[(n, mb)]:.2f} of plain), async stall {1e3 * st:7.1f} ms "
              f"({st / cw:.3f} of a sync write)")
sl.write_csv(["ranks", "mb", "round", "plain_write_s", "ckpt_write_s", "async_stall_s",
              "async_write_s"], rows)

fig, (ax, cx, bx) = sl.plt.subplots(1, 3, figsize=(15, 4.8))
colors = {1: "tab:blue", 2: "tab:orange", 4: "tab:green"}
for n in ranks:
    pts = sorted((mb, v) for (k, mb), v in med.items() if k == n)
    mbs, c = [p[0] for p in pts], colors[n]
    ax.plot(mbs, [mb / v[1] for mb, v in pts], "o-", color=c)
    ax.plot(mbs, [mb / v[0] for mb, v in pts], "s:", color=c, alpha=0.7)
    cx.plot(mbs, [paired[(n, mb)] for mb, _ in pts], "o-", color=c)
    bx.plot(mbs, [1e3 * v[1] for mb, v in pts], "o-", color=c)
    bx.plot(mbs, [1e3 * v[2] for mb, v in pts], "v--", color=c)
Line2D = sl.matplotlib.lines.Line2D
by_ranks = [Line2D([], [], color=colors[n], lw=6, label=f"{n} rank{'s' if n > 1 else ''}")
            for n in ranks]
ax.legend(handles=by_ranks + [Line2D([], [], color="k", marker="o", label="checkpoint (sync)"),
                              Line2D([], [], color="k", marker="s", ls=":",
                                     label="plain pwrite + fsync")], fontsize=8)
bx.legend(handles=by_ranks + [Line2D([], [], color="k", marker="o", label="sync: the write"),
                              Line2D([], [], color="k", marker="v", ls="--",
                                     label="async: copy to staging")], fontsize=8)
for a in (ax, cx, bx):
    a.set_xscale("log")
    sl.log_axis(a.xaxis)
    a.set_xlabel("checkpoint size (MB: params + AdamW m, v)")
    a.grid(alpha=0.3, which="both")
ax.set_ylabel("write bandwidth (MB/s)")
ax.set_ylim(bottom=0)
ax.set_title("bandwidth (size / median time)", fontsize=10)
cx.axhline(1, color="k", lw=0.8)
cx.set_ylim(bottom=0)
cx.set_ylabel("checkpoint / plain write bandwidth")
cx.set_title("paired ratio (median over rounds)", fontsize=10)
bx.set_yscale("log")
sl.log_axis(bx.yaxis)
bx.set_ylabel("training loop's wait per checkpoint (ms)")
bx.set_title("training stall: sync vs async", fontsize=10)
sl.title(fig, f"Checkpoint write bandwidth (parallel HDF5 + checksums + fsync), median of "
              f"{rounds} round(s)", f"perf/bench_ckpt, {sl.where()}, folder {sl.OUT}")
sl.save(fig)
print("RESULT ckpt_bandwidth: checkpoint/plain write bandwidth (paired median) " + ", ".join(
    f"{n}r {mb:.0f} MB {paired[(n, mb)]:.2f}" for n, mb in sorted(paired)))
