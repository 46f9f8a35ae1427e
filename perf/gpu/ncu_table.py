#!/usr/bin/env python3
"""ncu_table.py CSV: one line per kernel name from an Nsight Compute `--csv --page raw` report
(perf/gpu/ncu.sh's metrics): launches, mean time, DRAM bytes per launch and rate, SM and tensor
pipe busy (%), heaviest first. Exit 1 when the file holds no kernel rows (ncu failed)."""
import csv
import sys

TIME = {"nsecond": 1e-9, "usecond": 1e-6, "msecond": 1e-3, "second": 1.0}
BYTES = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "Tbyte": 1e12,
         "KB": 1e3, "MB": 1e6, "GB": 1e9}


def num(s):
    try:
        return float(s.replace(",", ""))
    except ValueError:
        return None


def short(name, width=60):
    """The kernel's name without its arguments and template parameters."""
    n = name.split("(")[0]
    depth, out = 0, []
    for ch in n:
        depth += ch == "<"
        if depth == 0:
            out.append(ch)
        depth -= ch == ">"
    n = "".join(out).strip() or name
    return n if len(n) <= width else n[: width - 3] + "..."


def main(path):
    try:
        rows = list(csv.reader(open(path, newline="", errors="replace")))
    except OSError as e:
        print(f"ncu_table: {path}: {e.strerror}", file=sys.stderr)
        return 1
    head = next((i for i, r in enumerate(rows) if "Kernel Name" in r), None)
    if head is None:
        print(f"ncu_table: {path}: no 'Kernel Name' column: not an ncu --csv --page raw report",
              file=sys.stderr)
        return 1
    cols = rows[head]
    ix = {c: i for i, c in enumerate(cols)}
    need = ["gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum"]
    missing = [m for m in need if m not in ix]
    if missing:
        print(f"ncu_table: {path}: no column {', '.join(missing)}", file=sys.stderr)
        return 1
    units = rows[head + 1] if head + 1 < len(rows) else []
    unit = lambda c: units[ix[c]] if ix[c] < len(units) else ""
    tscale = TIME.get(unit("gpu__time_duration.sum"), 1e-9)
    rscale = BYTES.get(unit("dram__bytes_read.sum"), 1)
    wscale = BYTES.get(unit("dram__bytes_write.sum"), 1)
    opt = [c for c in ("sm__throughput.avg.pct_of_peak_sustained_elapsed",
                       "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed")
           if c in ix]
    agg = {}
    for r in rows[head + 1:]:
        if len(r) < len(cols):
            continue
        t = num(r[ix["gpu__time_duration.sum"]])
        if t is None:  # the units row
            continue
        k = short(r[ix["Kernel Name"]])
        a = agg.setdefault(k, [0, 0.0, 0.0] + [0.0] * len(opt))
        a[0] += 1
        a[1] += t * tscale
        a[2] += (num(r[ix["dram__bytes_read.sum"]]) or 0) * rscale + \
            (num(r[ix["dram__bytes_write.sum"]]) or 0) * wscale
        for j, c in enumerate(opt):
            a[3 + j] += num(r[ix[c]]) or 0
    if not agg:
        print(f"ncu_table: {path}: no kernel rows", file=sys.stderr)
        return 1
    total = sum(a[1] for a in agg.values())
    print(f"{'kernel':60} | {'n':>4} | {'us/call':>9} | {'% time':>6} | {'MB/call':>9} | "
          f"{'GB/s':>7} | {'SM %':>5} | {'TC %':>5}")
    for k, a in sorted(agg.items(), key=lambda kv: -kv[1][1]):
        n, t, b = a[0], a[1], a[2]
        sm = f"{a[3] / n:5.1f}" if len(opt) > 0 else "    -"
        tc = f"{a[4] / n:5.1f}" if len(opt) > 1 else "    -"
        print(f"{k:60} | {n:4d} | {1e6 * t / n:9.1f} | {100 * t / total:6.1f} | "
              f"{b / n / 1e6:9.1f} | {b / t / 1e9 if t else 0:7.0f} | {sm} | {tc}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: ncu_table.py CSV", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
