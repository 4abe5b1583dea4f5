#!/usr/bin/python3
"""Project ringtrain's data-parallel step to N = 1 .. 1,024 ranks from three measured inputs,
and check the projection against the emulated cluster where it can run.

Model (weak scaling: every rank keeps its local batch b, the global batch is G = N b):
  step(N)      = t_compute(b) + t_ring(N)                no overlap: ringtrain reduces the
  t_ring(N)    = 2(N-1) alpha + 2(N-1)/N * M / B          gradients after backward
  efficiency   = t_compute(b) / step(N)                  per-rank throughput against one rank
                                                         that does not communicate
  steps(G)     = S_min (1 + B_noise / G)                 McCandlish et al. 2018, "An empirical
  to target    = steps(N b) * step(N)                    model of large-batch training"
Inputs:
  --bench FILE          bench/cluster_bench.py --train output: t_compute(b) of the one-host
                        reference (N=1, batch b, 1 BLAS thread), M = 4 x parameters, and per
                        emulated network the fitted alpha, B and the measured training step
  --target-runs DIR...  ringtrain run directories that reached --target-accuracy at several
                        global batches: steps_to_target against G, fitted for S_min, B_noise
Network classes projected: the two below (stated, not measured here) and every emulated
network of --bench (measured). The check compares, for each emulated network, the model's
step and communication time at its N with what training on it measured (the step's time
outside compute, step_s - compute_s: the model has no overlap, so that is what it predicts;
metrics.jsonl's comm_s sums overlapped collectives and can exceed the step).

Two levels (--ranks-per-host L, hosts H = N / L). The flat ring laid out host after host has
one neighbour pair per host across a link and the others inside the host; a round ends when
its slowest message has arrived:
  t_flat = 2(N-1) max(alpha_x + M/(N B_x), alpha_i + M/(N B_i))     (H = 1: the intra term only)
The hierarchical allreduce reduce-scatters within the host, runs L rings of M/L bytes across
the hosts at once (they share the host's link, so each gets B_x / L), and all-gathers within
the host:
  t_hier = 2(L-1) alpha_i + 2(L-1)/L M/B_i + 2(H-1) alpha_x + 2(H-1)/H M/B_x
bf16 on the wire halves M in the inter-host terms (t_flat: every term; t_hier: the inter-host
terms only; the conversion's cost is not in the model). alpha_x, B_x: the network's fit;
alpha_i, B_i: the large-message fit of `ringtrain bench allreduce` among the ranks of one
emulated host, which cluster_bench.py measures per network when it runs more than one rank per
host (`fit_intra` of its records), else --intra (the same benchmark on this machine, no
namespaces). Every table names the fit it used.

    /usr/bin/python3 bench/cluster_projection.py --bench bench/results/cluster-<date>.json \\
        --target-runs runs/g64 runs/g128 ... --png bench/results/cluster-projection.png
"""
import argparse
import json
import os
import sys

# Stated network classes (per-round latency alpha, per-rank bandwidth B in bytes/s).
CLASSES = [
    {"name": "10 GbE, TCP", "alpha_s": 25e-6, "bandwidth_Bps": 10e9 / 8 * 1448 / 1514,
     "why": "alpha: MPI over kernel TCP on 10 GbE, 15-30 us half round trip; B: 10 Gbit/s "
            "times the TCP payload share of a 1514-byte frame"},
    {"name": "100 Gb/s InfiniBand (EDR)", "alpha_s": 2e-6, "bandwidth_Bps": 12e9,
     "why": "alpha: 1-2 us MPI latency over RDMA; B: 96 % of 12.5 GB/s"},
]
NS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bench", nargs="+", required=True,
                    help="cluster_bench.py --train --json outputs; the first gives t_compute and "
                         "the projected emulated networks, every one adds its training runs to the check")
    ap.add_argument("--target-runs", nargs="+", required=True,
                    help="run dirs that reached a target, or JSON files {\"runs\": [[G, steps, target], ...]}")
    ap.add_argument("--write-target-runs", help="save the steps-to-target rows to this JSON file")
    ap.add_argument("--emulated", default="1gbit,10gbit",
                    help="emulated networks of the first --bench to project too (comma-separated)")
    ap.add_argument("--ranks-per-host", default="16,64",
                    help="ranks per host L of the two-level projection (comma-separated)")
    ap.add_argument("--intra", default=os.path.join(os.path.dirname(__file__), "results",
                                                    "allreduce-n4-2026-12-01.json"),
                    help="`ringtrain bench allreduce --json` on one host: the intra-host alpha and B "
                         "where the --bench record has no fit_intra of its own")
    ap.add_argument("--png", help="write the plot here")
    ap.add_argument("--json", help="write the tables as JSON here")
    return ap.parse_args()


def t_ring(alpha, bandwidth, n, nbytes):
    if n == 1:
        return 0.0
    return 2 * (n - 1) * alpha + 2 * (n - 1) / n * nbytes / bandwidth


def t_flat(intra, net, n, hosts, nbytes):
    """The flat ring over N ranks laid out host after host (the header's t_flat); with one
    rank per host every neighbour pair crosses a link."""
    if n == 1:
        return 0.0
    m = nbytes / n
    inside = intra["alpha_s"] + m / intra["bandwidth_Bps"]
    across = net["alpha_s"] + m / net["bandwidth_Bps"]
    if hosts == 1:
        return 2 * (n - 1) * inside
    return 2 * (n - 1) * (across if hosts == n else max(inside, across))


def t_hier(intra, net, ranks_per_host, hosts, nbytes, inter_bytes):
    """Reduce-scatter in the host, L rings of M/L across the hosts sharing the link, all-gather
    in the host (the header's t_hier); inter_bytes is M as it crosses the link."""
    L, H = ranks_per_host, hosts
    inside = 2 * (L - 1) * intra["alpha_s"] + 2 * (L - 1) / L * nbytes / intra["bandwidth_Bps"]
    across = 0.0 if H == 1 else 2 * (H - 1) * net["alpha_s"] + 2 * (H - 1) / H * inter_bytes / net["bandwidth_Bps"]
    return inside + across


def intra_fit(doc, source):
    """alpha and B inside one host: the largest-message regime of a bench allreduce fit (the
    gradient's chunks are megabytes, so that regime is the one the step meets)."""
    fit = doc["fit"]
    regimes = fit.get("regimes") or [fit]
    last = max(regimes, key=lambda r: r.get("to_bytes", 0))
    return {"alpha_s": last["alpha_s"], "bandwidth_Bps": last["bandwidth_Bps"], "source": source,
            "ranks": doc.get("world_size")}


def load_intra(path):
    """intra_fit of a `ringtrain bench allreduce --json` file."""
    with open(path) as f:
        return intra_fit(json.load(f), os.path.basename(path))


def level_intra(net, default):
    """The intra-host level for a network: its own fit when cluster_bench.py measured one on
    the emulated host, else the --intra file's."""
    return net.get("intra") or default


def two_level(nets, intra, t_compute, nbytes, ranks_per_host):
    """Per network and ranks per host: step times of flat and hierarchical, fp32 and bf16."""
    out = []
    for net in nets:
        intra_net = level_intra(net, intra)
        for L in ranks_per_host:
            rows = []
            for H in [h for h in (1, 2, 4, 8, 16, 32, 64) if h * L <= NS[-1]]:
                n = H * L
                comm = {"flat_fp32": t_flat(intra_net, net, n, H, nbytes),
                        "flat_bf16": t_flat(intra_net, net, n, H, nbytes / 2),
                        "hier_fp32": t_hier(intra_net, net, L, H, nbytes, nbytes),
                        "hier_bf16": t_hier(intra_net, net, L, H, nbytes, nbytes / 2)}
                rows.append({"N": n, "hosts": H, "comm_s": comm,
                             "step_s": {k: t_compute + v for k, v in comm.items()}})
            out.append({"network": net["name"], "ranks_per_host": L, "rows": rows,
                        "intra": intra_net, "inter": {"alpha_s": net["alpha_s"],
                                                      "bandwidth_Bps": net["bandwidth_Bps"]}})
    return out


def describe_level(fit):
    return f"alpha {fit['alpha_s'] * 1e6:.1f} us, B {fit['bandwidth_Bps'] / 1e9:.3g} GB/s"


def print_two_level(tables):
    print("\ntwo levels: step = t_compute + allreduce, no overlap")
    for t in tables:
        print(f"\n{t['network']}, {t['ranks_per_host']} ranks per host: across hosts {describe_level(t['inter'])}; "
              f"inside a host {describe_level(t['intra'])} (fit of {t['intra']['source']})")
        print("| N | hosts | flat fp32 | flat bf16 | hierarchical fp32 | hierarchical bf16 | hier bf16 / flat fp32 (step) |")
        print("|---:|---:|---:|---:|---:|---:|---:|")
        for r in t["rows"]:
            c, s = r["comm_s"], r["step_s"]
            print(f"| {r['N']} | {r['hosts']} | {c['flat_fp32'] * 1e3:.2f} ms | {c['flat_bf16'] * 1e3:.2f} ms | "
                  f"{c['hier_fp32'] * 1e3:.2f} ms | {c['hier_bf16'] * 1e3:.2f} ms | "
                  f"{s['hier_bf16'] / s['flat_fp32']:.2f} |")


def fit_steps_to_target(points):
    """points: [(G, steps)]. samples(G) = S G = S_min G + S_min B_noise: a straight line in G.
    Least squares on relative error of steps (weights 1/steps^2)."""
    # minimise sum ((S_min (1 + Bn/G) - s) / s)^2 over a = S_min, c = S_min Bn: linear in a, c
    sxx = sxy = syy = sx = sy = 0.0
    for g, s in points:
        u, v = 1.0 / s, 1.0 / (g * s)  # model/s = a u + c v, target 1
        sxx, sxy, syy, sx, sy = sxx + u * u, sxy + u * v, syy + v * v, sx + u, sy + v
    det = sxx * syy - sxy * sxy
    a = (sx * syy - sy * sxy) / det
    c = (sy * sxx - sx * sxy) / det
    return {"S_min": a, "B_noise": c / a}


def steps_at(fit, g):
    return fit["S_min"] * (1 + fit["B_noise"] / g)


def load_target_runs(paths):
    """Run directories (manifest.json) or JSON files of [global batch, steps, target] rows."""
    points = []
    for path in paths:
        if os.path.isfile(path):
            with open(path) as f:
                points += [tuple(p) for p in json.load(f)["runs"]]
            continue
        with open(os.path.join(path, "manifest.json")) as f:
            m = json.load(f)
        r = m["results"]
        if not r.get("target_reached"):
            sys.exit(f"cluster_projection: {path} did not reach its target")
        points.append((m["batches"]["global"], r["steps_to_target"], m["target"]["value"]))
    targets = {p[2] for p in points}
    if len(targets) != 1:
        sys.exit(f"cluster_projection: the target runs have different targets {sorted(targets)}")
    return sorted(points), targets.pop()


def project(net, t_compute, nbytes, b, fit_stt, g_max):
    rows = []
    for n in NS:
        comm = t_ring(net["alpha_s"], net["bandwidth_Bps"], n, nbytes)
        step = t_compute + comm
        g = n * b
        steps = steps_at(fit_stt, g)
        rows.append({"N": n, "global_batch": g, "comm_s": comm, "step_s": step,
                     "efficiency": t_compute / step, "samples_per_s": g / step,
                     "steps_to_target": steps, "time_to_target_s": steps * step,
                     "extrapolated": g > g_max})
    return rows


def main():
    args = parse_args()
    benches = []
    for path in args.bench:
        with open(path) as f:
            benches.append(json.load(f))
    bench = benches[0]
    ref = bench["reference"]
    b = bench["local_batch"]
    t_compute = ref["compute_s"]
    nbytes = 4 * ref["parameters"]
    points, target = load_target_runs(args.target_runs)
    fit_stt = fit_steps_to_target([(g, s) for g, s, _ in points])
    g_max = max(g for g, *_ in points)
    if args.write_target_runs:
        with open(args.write_target_runs, "w") as f:
            json.dump({"runs": points, "columns": ["global batch", "steps to target", "target accuracy"]}, f)

    print(f"inputs: model {bench['model']}, M = {nbytes:,} gradient bytes, local batch b = {b}, "
          f"t_compute(b) = {t_compute * 1e3:.2f} ms ({t_compute / b * 1e6:.1f} us per sample; "
          f"one host, N=1, 1 BLAS thread, bench {bench['started']})")
    print(f"steps to test accuracy {target}: " + ", ".join(f"G={g}: {s}" for g, s, _ in points)
          + f" -> S_min = {fit_stt['S_min']:.0f} steps, B_noise = {fit_stt['B_noise']:.0f} samples")
    for g, s, _ in points:
        print(f"    G={g:5d}: measured {s:5d}, fit {steps_at(fit_stt, g):7.0f}")

    nets = [dict(c, measured=False) for c in CLASSES]
    for r in bench["records"]:
        if "fit" in r and r["fit"]["bandwidth_Bps"] and r["hosts"] == 2 \
                and r["network"] in args.emulated.split(","):
            nets.append({"name": f"emulated {r['network']} ({r['hosts']} hosts)", "measured": True,
                         "alpha_s": r["fit"]["alpha_s"], "bandwidth_Bps": r["fit"]["bandwidth_Bps"],
                         "intra": r.get("fit_intra"), "record": r})
    # one projection per class; emulated networks only once each (the 2-host fit)
    seen, projections = set(), []
    for net in nets:
        key = net["name"].split(" (")[0]
        if key in seen:
            continue
        seen.add(key)
        projections.append({"network": net["name"], "alpha_s": net["alpha_s"],
                            "bandwidth_Bps": net["bandwidth_Bps"], "measured": net["measured"],
                            "why": net.get("why", "fitted by ringtrain bench allreduce on the emulated cluster"),
                            "rows": project(net, t_compute, nbytes, b, fit_stt, g_max)})

    print("\nprojection (weak scaling, b per rank; * = global batch beyond the measured steps-to-target runs)")
    for p in projections:
        print(f"\n{p['network']}: alpha {p['alpha_s'] * 1e6:.1f} us, B {p['bandwidth_Bps'] / 1e9:.3g} GB/s"
              f" ({'measured' if p['measured'] else 'stated: ' + p['why']})")
        print("| N | global batch | step | of which ring | efficiency | samples/s | steps to target | time to target |")
        print("|---:|---:|---:|---:|---:|---:|---:|---:|")
        for r in p["rows"]:
            star = "*" if r["extrapolated"] else ""
            print(f"| {r['N']} | {r['global_batch']:,}{star} | {r['step_s'] * 1e3:.2f} ms | "
                  f"{r['comm_s'] * 1e3:.2f} ms | {r['efficiency'] * 100:.1f} % | {r['samples_per_s']:,.0f} | "
                  f"{r['steps_to_target']:.0f}{star} | {r['time_to_target_s']:.2f} s{star} |")

    intra = load_intra(args.intra)
    levels = [int(x) for x in args.ranks_per_host.split(",")]
    tables = two_level([n for n in nets if not n["measured"]] +
                       [n for n in nets if n["measured"] and n["name"].startswith("emulated")],
                       intra, t_compute, nbytes, levels)
    # the emulated cluster of the benchmark: 2 hosts x 2 ranks
    tables += two_level([n for n in nets if n["measured"]], intra, t_compute, nbytes, [2])
    print_two_level(tables)

    checks = []
    for path, doc in zip(args.bench, benches):
        t_ref = doc["reference"]["compute_s"]
        for r in doc["records"]:
            if "train" not in r or "fit" not in r:
                continue
            t = r["train"]
            n = t["world_size"]
            comm = t_flat(r.get("fit_intra") or intra, r["fit"], n, r["hosts"], nbytes)
            checks.append({"bench": os.path.basename(path), "network": r["network"], "N": n,
                           "ucx": " ".join(doc["ucx"]) or "defaults",
                           "measured_step_s": t["step_s"], "predicted_step_s": t_ref + comm,
                           "measured_outside_compute_s": t["step_s"] - t["compute_s"], "predicted_comm_s": comm,
                           "measured_compute_s": t["compute_s"], "reference_compute_s": t_ref,
                           "others_busy_cores": r["others_busy_cores"]})
    if checks:
        print("\ncheck against the emulated cluster (training run on the namespace hosts)")
        print("| network | UCX | N | step measured | step predicted | error | step - compute measured | ring predicted "
              "| error | compute measured / reference | others |")
        print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for c in checks:
            err = (c["predicted_step_s"] - c["measured_step_s"]) / c["measured_step_s"]
            comm_err = (c["predicted_comm_s"] - c["measured_outside_compute_s"]) / c["measured_outside_compute_s"]
            print(f"| {c['network']} | {c['ucx']} | {c['N']} | {c['measured_step_s'] * 1e3:.1f} ms | "
                  f"{c['predicted_step_s'] * 1e3:.1f} ms | {err * 100:+.0f} % | {c['measured_outside_compute_s'] * 1e3:.1f} ms | "
                  f"{c['predicted_comm_s'] * 1e3:.1f} ms | {comm_err * 100:+.0f} % | {c['measured_compute_s'] * 1e3:.1f} / "
                  f"{c['reference_compute_s'] * 1e3:.1f} ms | {c['others_busy_cores']} |")

    if args.json:
        with open(args.json, "w") as f:
            json.dump({"inputs": {"bench": args.bench, "t_compute_s": t_compute, "gradient_bytes": nbytes,
                                  "local_batch": b, "steps_to_target": points, "target": target,
                                  "fit": fit_stt},
                       "projections": projections, "two_level": tables, "intra": intra,
                       "checks": checks}, f, indent=1)
    if args.png:
        plot(args.png, projections, checks, fit_stt, points, target, b, t_compute)


def plot(path, projections, checks, fit_stt, points, target, b, t_compute):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (eff_ax, ttt_ax) = plt.subplots(1, 2, figsize=(12, 5.6))
    for p in projections:
        ns = [r["N"] for r in p["rows"]]
        style = "--" if p["measured"] else "-"
        label = (f"{p['network']}: α {p['alpha_s'] * 1e6:.3g} µs, B {p['bandwidth_Bps'] / 1e9:.3g} GB/s"
                 + ("" if p["measured"] else " (stated)"))
        line, = eff_ax.plot(ns, [r["efficiency"] * 100 for r in p["rows"]], style, marker="o",
                            markersize=3, label=label)
        ttt_ax.plot(ns, [r["time_to_target_s"] for r in p["rows"]], style, marker="o", markersize=3,
                    color=line.get_color())
    for c in checks:
        eff = c["reference_compute_s"] / c["measured_step_s"] * 100
        eff_ax.plot([c["N"]], [eff], "kx", markersize=7)
        eff_ax.annotate(c["network"], (c["N"], eff), textcoords="offset points", xytext=(4, 2), fontsize=6)
    if checks:
        eff_ax.plot([], [], "kx", label="measured on the emulated cluster")
    eff_ax.set_xscale("log", base=2)
    eff_ax.set_xlabel("ranks N (local batch %d each)" % b)
    eff_ax.set_ylabel("scaling efficiency  t_compute / step  (%)")
    eff_ax.set_ylim(0, 105)
    eff_ax.grid(True, which="both", alpha=0.3)
    handles, labels = eff_ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=7, frameon=False)
    eff_ax.set_title("step: compute %.1f ms + ring 2(N-1)α + 2(N-1)/N·M/B" % (t_compute * 1e3))
    g_max = max(g for g, *_ in points)
    ttt_ax.axvline(g_max / b, color="gray", linewidth=0.8, linestyle=":")
    ttt_ax.annotate("measured steps-to-target\nup to G = %d" % g_max, xy=(g_max / b, 0.98),
                    xycoords=("data", "axes fraction"), fontsize=7, va="top", ha="right")
    ttt_ax.set_xscale("log", base=2)
    ttt_ax.set_yscale("log")
    ttt_ax.set_xlabel("ranks N")
    ttt_ax.set_ylabel("time to test accuracy %.2f (s)" % target)
    ttt_ax.set_title("steps(G) = %.0f (1 + %.0f / G) × step(N)" % (fit_stt["S_min"], fit_stt["B_noise"]))
    ttt_ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    fig.savefig(path, dpi=120)
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
