#!/usr/bin/env python3
"""The table and figure of scripts/device_check.sh: the GPU tests' verdicts and latencies (from
scripts/gpu_check.sh's logs), the paper benchmark's and IMB-MT's thread scaling (medians over
repetitions), and the issue's targets, each met or missed by how much. Without a GPU (or with fewer
than 16 cores) every line says it is a rehearsal, not a measurement of the targets. Matplotlib draws the
PNG where it is importable; otherwise a line says the figure was skipped."""
import argparse
import csv
import os
import re
import statistics

p = argparse.ArgumentParser()
for a in ("gpu", "cores", "reps", "gpu-dir", "paper", "imb", "txt", "png", "date"):
    p.add_argument("--" + a, required=True)
args = p.parse_args()
gpu, cores = args.gpu == "1", int(args.cores)
rehearsal = not gpu or cores < 16
lines = [f"scripts/device_check.sh, {args.date}: {'GPU' if gpu else 'NO GPU (the CPU stand-in for the driver)'}, "
         f"{cores} cores, 2 ranks, {args.reps} repetitions per scaling point"]
if rehearsal:
    lines.append("REHEARSAL: " + ("no GPU: the GPU tests ran on the stand-in, whose latencies are not a GPU's; " if not gpu else "")
                 + (f"{cores} cores: 2 x 8 threads oversubscribe them; " if cores < 16 else "")
                 + "the targets below are evaluated for the script's sake only")


def read(path):
    try:
        return open(path, errors="replace").read()
    except OSError:
        return ""


# 1. GPU tests and latency.
g = read(os.path.join(args.gpu_dir, "gpu_check.log"))
verdicts = re.findall(r"^(PASS|FAIL) (.*)$", g, re.M)
summary = re.findall(r"^(\d+) passed, (\d+) failed$", g, re.M)
lines += ["", "1. GPU tests (scripts/gpu_check.sh" + ("" if gpu else " --standin") + "): "
          + (f"{summary[-1][0]} passed, {summary[-1][1]} failed" if summary else "no verdict (see the logs)")]
lines += [f"   {v} {n}" for v, n in verdicts if v == "FAIL"]
seen = re.findall(r"^  seen.*$", read(os.path.join(args.gpu_dir, "cuda_model.out")), re.M)
lines += ["   tests/gpu/cuda_model.c on this driver:"] + [f"  {s}" for s in seen] if seen else []
lat = {}
for mode, f in (("memops", "cuda_latency.out"), ("hostfn", "cuda_latency_hostfn.out")):
    t = read(os.path.join(args.gpu_dir, f))
    e = re.search(r"enqueue on the CUDA stream:\s+([\d.]+)", t)
    b = re.search(r"\(staged\):\s+([\d.]+)", t)
    if e and b:
        lat[mode] = (float(e.group(1)), float(b.group(1)))


def verdict(value, target, higher):
    """'met', or how far the value is from the target, in percent of the target."""
    if value >= target if higher else value <= target:
        return "met"
    return f"MISSED: {abs(value / target - 1) * 100:.0f}% {'below' if higher else 'above'} the target"


lines += ["", "   8-byte device-buffer round trip, medians of 7 runs (us)   enqueue   baseline   ratio   target"]
for mode, limit in (("memops", 1.05), ("hostfn", 1.2)):
    if mode in lat:
        e, b = lat[mode]
        lines.append(f"   {mode:<55}{e:>9.1f}{b:>11.1f}{e / b:>8.2f}   <= {limit}: {verdict(e / b, limit, False)}")
    else:
        lines.append(f"   {mode:<55}  no result (the run failed or did not finish: see the logs)")


# 2. Scaling.
def medians(path, key):
    rows = list(csv.DictReader(open(path))) if os.path.exists(path) else []
    out = {}
    for r in rows:
        if r.get(key):
            out.setdefault(r["variant"], {}).setdefault(int(r["threads"]), []).append(float(r[key]))
    return {v: {t: statistics.median(x) for t, x in ts.items()} for v, ts in out.items()}


paper = medians(args.paper, "total_rate")
imb = medians(args.imb, "biband_MBps")
order = ["none", "implicit-T", "native", "explicit"]
threads = sorted({t for v in paper.values() for t in v} | {t for v in imb.values() for t in v})


def table(title, data, fmt):
    lines.extend(["", title, f"   {'variant':<12}" + "".join(f"{'T=' + str(t):>12}" for t in threads)])
    for v in order:
        if v in data:
            lines.append(f"   {v:<12}" + "".join(f"{fmt(data[v][t]) if t in data[v] else 'n/a':>12}" for t in threads))


table("2a. paper benchmark: total message rate (msg/s, 8 bytes), median", paper, lambda x: f"{x / 1e6:.2f}M")
table("2b. IMB-MT shape: bidirectional window bandwidth (MB/s, 8 bytes, both ways), median", imb, lambda x: f"{x:.2f}")

lines += ["", "3. scaling targets (the paper benchmark's message rate; IMB-MT's biband bandwidth)"]
for name, data in (("paper", paper), ("IMB-MT", imb)):
    ex, it = data.get("explicit", {}), data.get("implicit-T", {})
    for t in (2, 4, 8):
        if 1 in ex and t in ex:
            eff = ex[t] / (t * ex[1])
            lines.append(f"   {name}: explicit at T={t} / (T x explicit at T=1) = {eff:.2f}   target >= 0.8: {verdict(eff, 0.8, True)}")
    if 8 in ex and 8 in it:
        r = ex[8] / it[8]
        lines.append(f"   {name}: explicit / implicit-T at T=8 = {r:.2f}   target >= 1.2: {verdict(r, 1.2, True)}")
text = "\n".join(lines) + "\n"
open(args.txt, "w").write(text)
print(text, end="")

try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    print("figure skipped: matplotlib is not importable here")
else:
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    for ax, data, title, unit in ((axes[0], paper, "paper benchmark", "messages/s"),
                                  (axes[1], imb, "IMB-MT shape, biband", "MB/s")):
        for v in order:
            if v in data:
                ts = sorted(data[v])
                ax.plot(ts, [data[v][t] for t in ts], marker="o", label=v)
        ex = data.get("explicit", {})
        if 1 in ex:
            ax.plot(threads, [ex[1] * t for t in threads], "k:", label="linear (explicit at T=1 x T)")
        ax.set_xscale("log", base=2)
        ax.set_xticks(threads, [str(t) for t in threads])
        ax.set_xlabel("threads per rank (T)")
        ax.set_ylabel(unit)
        ax.set_title(title)
        ax.legend(fontsize=8)
    ax = axes[2]
    modes = [m for m in ("memops", "hostfn") if m in lat]
    if modes:
        x = range(len(modes))
        ax.bar([i - 0.2 for i in x], [lat[m][0] for m in modes], 0.4, label="MPIX_Send/Recv_enqueue")
        ax.bar([i + 0.2 for i in x], [lat[m][1] for m in modes], 0.4, label="cuStreamSynchronize + MPI_Send/Recv")
        ax.set_xticks(list(x), modes)
        ax.legend(fontsize=8)
    ax.set_ylabel("us per 8-byte round trip")
    ax.set_title("latency" + ("" if gpu else " (stand-in, not a GPU)"))
    fig.suptitle(f"device_check {args.date}: {'GPU' if gpu else 'no GPU'}, {cores} cores"
                 + (" (rehearsal)" if rehearsal else ""))
    fig.tight_layout()
    fig.savefig(args.png, dpi=110)
    print(f"figure: {args.png}")
