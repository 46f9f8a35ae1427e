"""perf/studies/studylib.py: what every study script shares (imported, not run).

A study runs benchmarks or bin/ftllm, parses the lines they print, writes one CSV and one PNG
into STUDIES_OUT and prints a short summary ending in a `RESULT <study>:` line. Environment
(perf/studies/run.sh and `make studies` set it):
  STUDIES_OUT    output folder (default build/studies, git-ignored)
  STUDIES_QUICK  1 = tiny sizes, seconds per study (tests/e2e/studies.sh); the numbers then mean
                 nothing, only that the study runs and writes what it should
  FTLLM_BUILD    the build folder whose perf/bench_* binaries run (default build/release)
  FTLLM          the binary for train/optimize/simulate (default bin/ftllm)
A failed command ends the study with one line naming the command and its last output, exit 1.
Plots: labelled axes with units, a title saying what was measured, where and when."""
import csv
import datetime
import io
import os
import subprocess
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)
from matplotlib import ticker  # noqa: E402
from PIL import Image  # noqa: E402  (Debian python3-pil, a dependency of python3-matplotlib)

QUICK = os.environ.get("STUDIES_QUICK", "0") not in ("", "0")
REPLOT = os.environ.get("STUDIES_REPLOT", "0") not in ("", "0")
OUT = os.environ.get("STUDIES_OUT", "build/studies")
BUILD = os.environ.get("FTLLM_BUILD", "build/release")
FTLLM = os.environ.get("FTLLM", "bin/ftllm")
STUDY = os.path.splitext(os.path.basename(sys.argv[0]))[0]


def die(msg):
    print(f"{STUDY}: {msg}", file=sys.stderr)
    sys.exit(1)


def run(cmd, env=None):
    """Runs cmd (a list), one OpenMP thread per process unless env says otherwise; returns its
    stdout; a non-zero exit ends the study."""
    e = dict(os.environ, OMP_NUM_THREADS="1")
    e.update(env or {})
    p = subprocess.run(cmd, capture_output=True, text=True, env=e)
    if p.returncode != 0:
        tail = " | ".join((p.stdout + p.stderr).strip().splitlines()[-3:])
        die(f"`{' '.join(cmd)}` exited {p.returncode}: {tail[:600]}")
    return p.stdout


def mpiexec(n, cmd, env=None):
    return run(["mpiexec", "-n", str(n)] + cmd, env)


def bench(name):
    path = os.path.join(BUILD, "perf", name)
    if not os.access(path, os.X_OK):
        die(f"{path} is not built (make {path})")
    return path


def write_csv(header, rows, name=None):
    """Writes STUDIES_OUT/<study>.csv (or name); every row has len(header) fields."""
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, name or f"{STUDY}.csv")
    with open(path, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(header)
        for r in rows:
            assert len(r) == len(header), (r, header)
            w.writerow(r)
    print(f"wrote {path} ({len(rows)} rows)")
    return path


def read_csv(header, name=None):
    """The rows of STUDIES_OUT/<study>.csv (or name), whose header must be header (for a study
    that can plot again from its CSV: STUDIES_REPLOT=1)."""
    path = os.path.join(OUT, name or f"{STUDY}.csv")
    try:
        with open(path, newline="") as f:
            rows = list(csv.reader(f))
    except OSError as e:
        die(f"STUDIES_REPLOT: cannot read {path}: {e.strerror}")
    if not rows or rows[0] != header:
        die(f"STUDIES_REPLOT: {path}: header {rows[0] if rows else 'missing'}, want {header}")
    return rows[1:]


def where():
    """This machine in words: cores and CPU model."""
    model = "CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{os.cpu_count()}-core {model}"


def when():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")


def title(ax_or_fig, what, where_=None):
    """what (first line) + where and when (second line, smaller); quick runs say so."""
    sub = f"{where_ or where()}, {when()}" + (" (quick mode: tiny sizes)" if QUICK else "")
    text = f"{what}\n{sub}"
    if hasattr(ax_or_fig, "suptitle"):
        ax_or_fig.suptitle(text, fontsize=11)
    else:
        ax_or_fig.set_title(text, fontsize=10)


def log_axis(axis, subs=(1, 2, 5)):
    """A log-scaled axis (ax.xaxis or ax.yaxis) with plain numbers at 1, 2, 5 x 10^k."""
    axis.set_major_locator(ticker.LogLocator(base=10, subs=subs))
    axis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(ticker.NullFormatter())


def save(fig, name=None):
    """STUDIES_OUT/<study>.png at 100 dpi, as a 256-colour palette PNG (a quarter of the bytes of
    matplotlib's RGBA, so the plots can live in git)."""
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, name or f"{STUDY}.png")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, dpi=100, format="png")
    plt.close(fig)
    buf.seek(0)
    Image.open(buf).convert("RGB").quantize(colors=256).save(path, optimize=True)
    print(f"wrote {path}")
    return path


def median(xs):
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])
