#!/usr/bin/python3
"""perf/studies/ckpt_bandwidth.py: checkpoint write bandwidth vs state size and ranks, sync and
async.

Runs perf/bench_ckpt (a GPT-2 124M-shaped state scaled by FT_BENCH_SCALE: params + AdamW m, v,
rows split over the ranks, one HDF5 file; baseline: pwrite + fsync of the same bytes into a
plain file, in the same round) on 1, 2 and 4 ranks at several sizes, and reads every round's
line: plain write, synchronous checkpoint write, the training stall of an asynchronous one (the
copy to its staging buffers) and its background write. Bandwidth = state bytes / median time
over the rounds. The folder is STUDIES_OUT/ckpt-tmp (emptied by the benchmark).
Full: 15 to 450 MB, 3 rounds; quick: 3 and 7 MB, 1 and 2 ranks, 1 round.
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
rows, med = [], {}
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
        pw, cw, st, aw = med[(n, mb)]
        print(f"{n} rank(s), {mb:7.1f} MB: plain {mb / pw:7.0f} MB/s, checkpoint {mb / cw:7.0f} "
              f"MB/s (x{pw / cw:.2f} of plain), async stall {1e3 * st:7.1f} ms "
              f"({st / cw:.3f} of a sync write)")
sl.write_csv(["ranks", "mb", "round", "plain_write_s", "ckpt_write_s", "async_stall_s",
              "async_write_s"], rows)

fig, (ax, bx) = sl.plt.subplots(1, 2, figsize=(12, 4.8))
colors = {1: "tab:blue", 2: "tab:orange", 4: "tab:green"}
for n in ranks:
    pts = sorted((mb, v) for (k, mb), v in med.items() if k == n)
    mbs = [p[0] for p in pts]
    c = colors[n]
    lab = f"{n} rank{'s' if n > 1 else ''}"
    ax.plot(mbs, [mb / v[1] for mb, v in pts], "o-", color=c, label=f"checkpoint, sync ({lab})")
    ax.plot(mbs, [mb / v[0] for mb, v in pts], "s:", color=c, alpha=0.7,
            label=f"plain pwrite + fsync ({lab})")
    ax.plot(mbs, [mb / v[3] for mb, v in pts], "^--", color=c, alpha=0.7,
            label=f"checkpoint, async background ({lab})")
    bx.plot(mbs, [1e3 * v[1] for mb, v in pts], "o-", color=c, label=f"sync write ({lab})")
    bx.plot(mbs, [1e3 * v[2] for mb, v in pts], "v--", color=c, label=f"async stall ({lab})")
for a in (ax, bx):
    a.set_xscale("log")
    sl.log_axis(a.xaxis)
    a.set_xlabel("checkpoint size (MB: params + AdamW m, v)")
    a.grid(alpha=0.3, which="both")
ax.set_ylabel("write bandwidth (MB/s)")
ax.set_ylim(bottom=0)
ax.set_title("bandwidth (size / median time)", fontsize=10)
ax.legend(fontsize=7, ncol=1)
bx.set_yscale("log")
sl.log_axis(bx.yaxis)
bx.set_ylabel("time the training loop waits per checkpoint (ms)")
bx.set_title("training stall: sync vs async", fontsize=10)
bx.legend(fontsize=7)
sl.title(fig, f"Checkpoint write bandwidth (parallel HDF5 + checksums + fsync), median of "
              f"{rounds} round(s)", f"perf/bench_ckpt, {sl.where()}, folder {sl.OUT}")
sl.save(fig)
print("RESULT ckpt_bandwidth: checkpoint/plain write bandwidth " + ", ".join(
    f"{n}r {mb:.0f} MB {v[0] / v[1]:.2f}" for (n, mb), v in sorted(med.items())))
