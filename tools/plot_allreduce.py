#!/usr/bin/python3
"""Plot `ringtrain bench allreduce --json` results: time per call against size, ring and
MPI_Allreduce, with the fitted alpha-beta model of the ring (one line per regime).

    /usr/bin/python3 tools/plot_allreduce.py bench/results/allreduce-n2.json \
        bench/results/allreduce-n4.json -o bench/results/allreduce.png

One panel per JSON file (usually one per world size). A second row shows the ratio
ring / MPI, with 1 (parity) marked. Needs matplotlib (apt-get install python3-matplotlib);
a tool, not a dependency of ringtrain itself.
"""
import argparse
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def human(nbytes):
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale:
            return f"{nbytes / scale:g} {unit}"
    return f"{nbytes:g} B"


def model_seconds(regime, n, nbytes):
    """t = 2(N-1) alpha + 2(N-1)/N * M / B  (B null: infinite bandwidth)."""
    rounds = 2.0 * (n - 1)
    bandwidth = regime["bandwidth_Bps"]
    per_byte = 0.0 if bandwidth is None else 1.0 / bandwidth
    return rounds * regime["alpha_s"] + rounds / n * nbytes * per_byte


def plot_one(doc, time_ax, ratio_ax):
    n = doc["world_size"]
    rows = {"ring": [], "mpi": []}
    for row in doc["rows"]:
        rows[row["impl"]].append((row["bytes"], row["median_s"]))
    for impl in rows:
        rows[impl].sort()
    label = {"ring": "ring (ringtrain)", "mpi": "MPI_Allreduce (MPICH)"}
    style = {"ring": "o-", "mpi": "s-"}
    for impl, points in rows.items():
        if points:
            time_ax.plot([b for b, _ in points], [t * 1e3 for _, t in points], style[impl],
                         label=label[impl], markersize=4)

    fit = doc.get("fit", {})
    for k, regime in enumerate(fit.get("regimes", [])):
        lo, hi = regime["from_bytes"], regime["to_bytes"]
        xs = [lo * (hi / lo) ** (i / 50) for i in range(51)] if hi > lo else [lo]
        bw = regime["bandwidth_Bps"]
        text = (f"model{' ' + str(k + 1) if len(fit['regimes']) > 1 else ''}: "
                f"α={regime['alpha_s'] * 1e6:.3g} µs, "
                f"B={'∞' if bw is None else f'{bw / 1e9:.3g} GB/s'}")
        time_ax.plot(xs, [model_seconds(regime, n, x) * 1e3 for x in xs], "--", color="gray",
                     linewidth=1.5, label=text)

    time_ax.set_xscale("log", base=2)
    time_ax.set_yscale("log")
    time_ax.set_ylabel("time per allreduce (ms)")
    title = (f"N = {n} ({doc.get('ranks_per_node', n)} ranks on "
             f"{doc.get('available_cores', '?')} cores), wait {doc.get('wait_policy_resolved', '?')}")
    time_ax.set_title(title)
    time_ax.grid(True, which="both", alpha=0.3)
    time_ax.legend(fontsize=8)
    if "memcpy_Bps" in doc:
        time_ax.annotate(f"single-core memcpy {doc['memcpy_Bps'] / 1e9:.2f} GB/s",
                         xy=(0.02, 0.02), xycoords="axes fraction", fontsize=8)

    mpi = dict(rows["mpi"])
    ratio = [(b, t / mpi[b]) for b, t in rows["ring"] if b in mpi]
    ratio_ax.plot([b for b, _ in ratio], [r for _, r in ratio], "o-", markersize=4)
    ratio_ax.axhline(1.0, color="black", linewidth=0.8)
    ratio_ax.set_xscale("log", base=2)
    ratio_ax.set_yscale("log")
    ratio_ax.set_xlabel("buffer size (bytes)")
    ratio_ax.set_ylabel("ring / MPI time")
    ratio_ax.grid(True, which="both", alpha=0.3)
    ticks = [b for b, _ in rows["ring"]][::2]
    for ax in (time_ax, ratio_ax):
        ax.set_xticks(ticks)
        ax.set_xticklabels([human(b) for b in ticks], rotation=45, fontsize=7)


def markdown_table(doc):
    """The measured rows of one run as a markdown table, with the fit under it."""
    n = doc["world_size"]
    mpi = {r["bytes"]: r for r in doc["rows"] if r["impl"] == "mpi"}
    lines = [f"N = {n}: single-core memcpy {doc['memcpy_Bps'] / 1e9:.2f} GB/s "
             f"({human(doc['memcpy_bytes'])}, same run)", "",
             "| size | ring ms | MPI ms | ring / MPI | ring busbw GB/s | MPI busbw GB/s "
             "| ring busbw / memcpy | model ms | residual |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    residuals = {r["bytes"]: r for r in doc["fit"].get("residuals", [])}
    for r in (r for r in doc["rows"] if r["impl"] == "ring"):
        m = mpi[r["bytes"]]
        fit = residuals.get(r["bytes"])
        model = f"{fit['predicted_s'] * 1e3:.4f}" if fit else "-"
        resid = f"{fit['residual'] * 100:+.0f}%" if fit else "-"
        lines.append(f"| {human(r['bytes'])} | {r['median_s'] * 1e3:.4f} | {m['median_s'] * 1e3:.4f} "
                     f"| {r['median_s'] / m['median_s']:.3f} | {r['busbw_GBps']:.2f} "
                     f"| {m['busbw_GBps']:.2f} | {r['busbw_GBps'] * 1e9 / doc['memcpy_Bps'] * 100:.0f}% "
                     f"| {model} | {resid} |")
    lines.append("")
    for k, g in enumerate(doc["fit"].get("regimes", [])):
        bw = g["bandwidth_Bps"]
        lines.append(f"- fit regime {k + 1}: {human(g['from_bytes'])} .. {human(g['to_bytes'])}: "
                     f"α = {g['alpha_s'] * 1e6:.3g} µs, "
                     f"B = {'∞' if bw is None else f'{bw / 1e9:.3g} GB/s'}")
    lines.append(f"- {doc['fit'].get('note', '')}")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("json", nargs="+", help="files written by ringtrain bench allreduce --json")
    parser.add_argument("-o", "--output", default="allreduce.png", help="PNG to write")
    parser.add_argument("--markdown", action="store_true",
                        help="also print a markdown table per file (for the README)")
    args = parser.parse_args()

    docs = []
    for path in args.json:
        with open(path) as f:
            docs.append(json.load(f))
    if args.markdown:
        for doc in docs:
            print(markdown_table(doc))
    fig, axes = plt.subplots(2, len(docs), figsize=(6.5 * len(docs), 8),
                             gridspec_kw={"height_ratios": [3, 1]}, squeeze=False)
    for k, doc in enumerate(docs):
        plot_one(doc, axes[0][k], axes[1][k])
    fig.suptitle("ringtrain allreduce: hand-written ring vs MPI_Allreduce, with the α-β model")
    fig.tight_layout()
    fig.savefig(args.output, dpi=110)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
