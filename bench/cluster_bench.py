#!/usr/bin/python3
"""The ring on an emulated cluster: K hosts as network namespaces (tools/netns-cluster), one
network (tbf rate per link, or none) at a time, everything over TCP.

For each network and host count it builds the hosts and measures, in this order:
  stream     bench/peers/tcp_stream.py between host 0 and host 1, both directions at once:
             what one TCP connection gets through the emulated link (the peer)
  allreduce  ringtrain bench allreduce --sizes ... (ring and MPI_Allreduce, the alpha-B fit)
             with one rank per host: the link's level
  intra      with --ranks-per-host S > 1: the same sweep among host 0's S ranks (shared
             memory): the intra-host level, recorded per network as fit_intra
  train      with --train: ringtrain train across the hosts, local batch b per rank (global
             batch b*K): median step, compute and the exposed communication wait per step
             from metrics.jsonl (comm_s, the sum of the overlapped collectives' durations, is
             kept in the JSON but not shown: it can exceed the step)
With --contender NAME=ARGS (repeatable) the training runs once per contender and round, the
contenders' order alternating between rounds (--rounds), each with its extra train ARGS, and
the table sets every contender's step beside the two-level model's prediction (t_flat or
t_hier of bench/cluster_projection.py with this network's fitted alpha and B across hosts and
its fit_intra inside a host, or --intra's file with one rank per host; a contender's ARGS say
which: --collective hierarchical, --wire bf16). --ranks-per-host S puts S ranks on every
emulated host (netns-cluster --slots).
and, with --train, before and after the networks, the one-host reference that the projection
(bench/cluster_projection.py) uses: ringtrain train N=1 at global batch b, its compute per step
(the mean of the two runs' medians).
Per network it prints the configured rate, what TCP can carry over it (rate x 1448/1514: the
TCP payload of a 1514-byte Ethernet frame, which tbf counts), the bare-TCP stream, the ring's
fitted alpha (smallest sizes) and B (largest sizes), and B relative to both.

    /usr/bin/python3 bench/cluster_bench.py \\
        --networks 1gbit,2gbit,5gbit,none --train --json bench/results/cluster-<date>.json

Needs root (namespaces); others using the machine are measured (cores busy besides ours)
and printed with each network. Benchmarks are programs, not timed tests.
"""
import argparse
import datetime
import hashlib
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import dp_speed  # noqa: E402  (load1, measured: the noise accounting of the other benchmark)

CLUSTER = os.path.join(ROOT, "tools", "netns-cluster")
STREAM = os.path.join(HERE, "peers", "tcp_stream.py")
PYTHON = "/usr/bin/python3"
TCP_PAYLOAD_PER_FRAME = 1448 / 1514  # MTU 1500 - IP 20 - TCP 32 (timestamps); + Ethernet 14
DEFAULT_SIZES = "4,64,1K,4K,16K,64K,256K,1M,4M,16M"


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ringtrain", default=os.path.join(ROOT, "build", "ringtrain"))
    ap.add_argument("--networks", default="1gbit,2gbit,5gbit,none",
                    help="comma-separated tbf rates (tc units), 'none' for no limit")
    ap.add_argument("--hosts", default="2", help="comma-separated host counts, e.g. 2,3,4")
    ap.add_argument("--sizes", default=DEFAULT_SIZES, help="bench allreduce --sizes")
    ap.add_argument("--wait", default="",
                    help="bench allreduce --wait (default: auto for 2 hosts, yield for more: "
                         "the hosts share this machine's cores)")
    ap.add_argument("--ucx", action="append", default=[], metavar="VAR=VALUE",
                    help="UCX setting for every rank, e.g. UCX_RNDV_THRESH=inf (repeatable)")
    ap.add_argument("--train", action="store_true", help="also train across the hosts")
    ap.add_argument("--ranks-per-host", type=int, default=1, help="ranks on every emulated host")
    ap.add_argument("--contender", action="append", default=[], metavar="NAME=ARGS",
                    help="with --train: a training variant, e.g. 'hier-bf16=--collective hierarchical "
                         "--wire bf16' (repeatable; default one plain run)")
    ap.add_argument("--rounds", type=int, default=1, help="training rounds per contender")
    ap.add_argument("--no-sweep", action="store_true",
                    help="skip the TCP stream and the allreduce sweep (training only)")
    ap.add_argument("--intra", default=os.path.join(HERE, "results", "allreduce-n4-2026-12-01.json"),
                    help="bench allreduce JSON of one host: the intra-host alpha and B of the prediction "
                         "when --ranks-per-host is 1 (else each network's own intra sweep)")
    ap.add_argument("--local-batch", type=int, default=64, help="samples per rank and step")
    ap.add_argument("--train-steps", type=int, default=60)
    ap.add_argument("--model", default="mlp")
    ap.add_argument("--json", help="write everything measured to this file")
    ap.add_argument("--timeout", type=int, default=300,
                    help="seconds per network, and as much again per training run")
    # internal: the part that runs inside host 0
    ap.add_argument("--inner", metavar="OUT_JSON", help=argparse.SUPPRESS)
    ap.add_argument("--inner-hosts", type=int, help=argparse.SUPPRESS)
    return ap.parse_args()


def rate_Bps(network):
    """'5gbit' -> 625e6 bytes/s; 'none' -> None."""
    if network == "none":
        return None
    text = network.lower()
    for unit, scale in (("tbit", 1e12), ("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3), ("bit", 1)):
        if text.endswith(unit):
            return float(text[: -len(unit)]) * scale / 8
    raise SystemExit(f"cluster_bench: --networks: '{network}' is not NUMBER[k|m|g]bit or none")


def contenders(args):
    """[(name, extra train args)]: --contender NAME=ARGS, or one plain run."""
    out = []
    for text in args.contender or ["ring="]:
        name, sep, extra = text.partition("=")
        if not sep or not name:
            raise SystemExit(f"cluster_bench: --contender '{text}': expected NAME=ARGS")
        out.append((name, shlex.split(extra)))
    return out


def train_args(args, ranks, run_dir):
    return [args.ringtrain, "train", "--checkpoint-every", "0", "--model", args.model,
            "--global-batch", str(args.local_batch * ranks), "--steps", str(args.train_steps),
            "--log-every", str(max(1, args.train_steps // 6)), "--no-eval", "--quiet",
            "--blas-threads", "1", "--run-dir", run_dir]


def summarize_run(run_dir):
    """Medians over logged windows, the first (cold steps) left out."""
    with open(os.path.join(run_dir, "manifest.json")) as f:
        manifest = json.load(f)
    windows = []
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        for line in f:
            rec = json.loads(line)
            if "step_s" in rec:
                windows.append(rec)
    steady = windows[1:] or windows
    med = lambda key: statistics.median(w[key] for w in steady)  # noqa: E731
    return {"world_size": manifest["world_size"], "ranks_per_node": manifest["ranks_per_node"],
            "parameters": manifest["parameters"],
            "local_batches": manifest["local_batches"], "steps": manifest["results"]["steps"],
            "step_s": med("step_s"), "compute_s": med("compute_s"), "comm_s": med("comm_s"),
            "exposed_s": med("exposed_s"),
            "windows": len(steady)}


# --- inside host 0 -------------------------------------------------------------------------

def inner(args):
    hosts = os.environ["RT_HOSTS"].split(",")
    mpiexec = os.environ["RT_MPIEXEC"]
    ssh = os.path.join(os.path.dirname(mpiexec), "ssh")
    k = args.inner_hosts
    ranks = k * args.ranks_per_host
    out = {"hosts": hosts, "ranks": ranks}
    env = dict(os.environ, MPIEXEC_TIMEOUT="240")
    for setting in args.ucx:
        name, _, value = setting.partition("=")
        env[name] = value

    if not args.no_sweep:
        sweep(args, hosts, mpiexec, ssh, ranks, env, out)
    if args.train:
        out["contenders"] = train_contenders(args, mpiexec, ranks, env)
        first = out["contenders"][0]
        if "train" in first:
            out["train"] = first["train"]
    with open(args.inner, "w") as f:
        json.dump(out, f)


def train_contenders(args, mpiexec, ranks, env):
    """Every contender trains --rounds times, the order alternating; medians per contender."""
    names = contenders(args)
    runs = {name: [] for name, _ in names}
    errors = {}
    with tempfile.TemporaryDirectory() as tmp:
        for round_index in range(args.rounds):
            order = names if round_index % 2 == 0 else names[::-1]
            for name, extra in order:
                run_dir = os.path.join(tmp, f"{name}-{round_index}")
                proc = run_until_finished([mpiexec, "-n", str(ranks)] + train_args(args, ranks, run_dir)
                                          + extra, env, run_dir, args.train_steps)
                if finished(run_dir, args.train_steps):  # MPI_Finalize may hang after (README)
                    runs[name].append(summarize_run(run_dir))
                else:
                    errors[name] = f"exit {proc.returncode}: {proc.stdout[-400:]} {proc.stderr[-800:]}"
    out = []
    for name, extra in names:
        rec = {"name": name, "args": extra}
        if runs[name]:
            rec["train"] = dict(runs[name][0], **{key: statistics.median(r[key] for r in runs[name])
                                                  for key in ("step_s", "compute_s", "comm_s", "exposed_s")})
            rec["rounds"] = [r["step_s"] for r in runs[name]]
        if name in errors:
            rec["error"] = errors[name]
        out.append(rec)
    return out


def run_until_finished(cmd, env, run_dir, steps, grace_s=10.0):
    """Runs cmd; once the run has written its results, waits grace_s for MPI_Finalize, which
    can hang over UCX's TCP transport here, then stops the job (SIGTERM to mpiexec, which
    forwards it to the ranks). Returns the CompletedProcess-like result."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=err, text=True,
                                stdin=subprocess.DEVNULL)
        done_at = None
        while proc.poll() is None:
            if done_at is None and finished(run_dir, steps):
                done_at = time.monotonic()
            if done_at is not None and time.monotonic() - done_at > grace_s:
                proc.terminate()
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                break
            time.sleep(0.2)
        proc.wait()
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(cmd, proc.returncode, out.read(), err.read())


def finished(run_dir, steps):
    """True if the run wrote its results for all `steps`."""
    try:
        with open(os.path.join(run_dir, "manifest.json")) as f:
            return json.load(f)["results"]["steps"] == steps
    except (OSError, KeyError, TypeError, ValueError):
        return False


def sweep(args, hosts, mpiexec, ssh, ranks, env, out):
    """The bare TCP stream between host 0 and host 1, then the allreduce sweep."""
    # 1. bare TCP, both directions between host 0 and host 1
    local = subprocess.Popen([PYTHON, STREAM, "--peer", hosts[1]], stdout=subprocess.PIPE, text=True)
    remote = subprocess.Popen([ssh, hosts[1], f"{PYTHON} {STREAM} --peer {hosts[0]}"],
                              stdout=subprocess.PIPE, text=True)
    streams = [json.loads(p.communicate(timeout=120)[0]) for p in (local, remote)]
    out["stream"] = {"host0_recv_Bps": streams[0]["recv_Bps"], "host1_recv_Bps": streams[1]["recv_Bps"]}

    # 2. the allreduce sweep across the link: one rank per host, whatever --ranks-per-host is
    wait = args.wait or ("auto" if len(hosts) <= 2 else "yield")
    allreduce_sweep(args, mpiexec, env, len(hosts), 1, wait, out, "allreduce")
    # 3. the other level: the ranks of host 0 among themselves (shared memory, no link)
    if args.ranks_per_host > 1:
        allreduce_sweep(args, mpiexec, env, args.ranks_per_host, args.ranks_per_host,
                        args.wait or "auto", out, "allreduce_intra")


def allreduce_sweep(args, mpiexec, env, ranks, per_host, wait, out, key):
    """`ringtrain bench allreduce` on `ranks` ranks, `per_host` on each host from host 0 on;
    its JSON goes to out[key], a failure to out[key + "_error"]."""
    with tempfile.TemporaryDirectory() as tmp:
        bench_json = os.path.join(tmp, "allreduce.json")
        cmd = [mpiexec, "-n", str(ranks), "-ppn", str(per_host), args.ringtrain, "bench", "allreduce",
               "--sizes", args.sizes, "--json", bench_json, "--wait", wait]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if not os.path.exists(bench_json):
            out[key + "_error"] = f"exit {proc.returncode}: {proc.stdout[-800:]} {proc.stderr[-800:]}"
            return
        with open(bench_json) as f:
            out[key] = json.load(f)
        if proc.returncode != 0:  # results written, then mpiexec failed (e.g. in Finalize)
            out[key + "_note"] = f"mpiexec exit {proc.returncode} after the results were written"



# --- outside ---------------------------------------------------------------------------------

def regime_for(fit, nbytes):
    for g in fit.get("regimes", []):
        if g["from_bytes"] <= nbytes <= g["to_bytes"]:
            return g
    return {"alpha_s": fit.get("alpha_s"), "bandwidth_Bps": fit.get("bandwidth_Bps")}


def network_fit(doc):
    """alpha from the regime of the smallest size, B from the regime of the largest."""
    fit = doc["fit"]
    sizes = sorted({r["bytes"] for r in doc["rows"]})
    small, large = regime_for(fit, sizes[0]), regime_for(fit, sizes[-1])
    ring = {r["bytes"]: r["median_s"] for r in doc["rows"] if r["impl"] == "ring"}
    mpi = {r["bytes"]: r["median_s"] for r in doc["rows"] if r["impl"] == "mpi"}
    n = doc["world_size"]
    busbw = lambda t: sizes[-1] / t * 2 * (n - 1) / n  # noqa: E731
    return {"alpha_s": small["alpha_s"], "bandwidth_Bps": large["bandwidth_Bps"],
            "single": {"alpha_s": fit["alpha_s"], "bandwidth_Bps": fit["bandwidth_Bps"]},
            "note": fit["note"], "largest_bytes": sizes[-1],
            "ring_busbw_Bps": busbw(ring[sizes[-1]]), "mpi_busbw_Bps": busbw(mpi[sizes[-1]])}


def run_network(args, network, k):
    with tempfile.TemporaryDirectory() as tmp:
        out_json = os.path.join(tmp, "inner.json")
        cmd = [CLUSTER, "--hosts", str(k), "--slots", str(args.ranks_per_host)]
        if network != "none":
            cmd += ["--rate", network]
        cmd += ["run", PYTHON, os.path.abspath(__file__), "--inner", out_json, "--inner-hosts", str(k),
                "--ringtrain", args.ringtrain, "--sizes", args.sizes, "--local-batch",
                str(args.local_batch), "--train-steps", str(args.train_steps), "--model", args.model]
        cmd += ["--wait", args.wait] if args.wait else []
        cmd += ["--train"] if args.train else []
        cmd += ["--no-sweep"] if args.no_sweep else []
        cmd += ["--ranks-per-host", str(args.ranks_per_host), "--rounds", str(args.rounds)]
        for c in args.contender:
            cmd += ["--contender=" + c]
        for setting in args.ucx:
            cmd += ["--ucx", setting]

        def once():
            runs = len(contenders(args)) * args.rounds if args.train else 0
            return subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout * (1 + runs))

        proc, others, wall = dp_speed.measured(once)
        if not os.path.exists(out_json):
            return {"network": network, "hosts": k, "error": f"exit {proc.returncode}: {proc.stderr[-800:]}"}
        with open(out_json) as f:
            rec = json.load(f)
    rec.update({"network": network, "hosts": k, "rate_Bps": rate_Bps(network),
                "others_busy_cores": others, "wall_s": wall})
    if "allreduce" in rec:
        rec["fit"] = network_fit(rec["allreduce"])
    if "allreduce_intra" in rec:
        import cluster_projection as cp
        rec["fit_intra"] = cp.intra_fit(rec["allreduce_intra"], f"{args.ranks_per_host} ranks on "
                                        f"emulated host 0, {network} run")
    return rec


def predicted_comm_s(rec, contender_args, ranks_per_host, intra, nbytes):
    """The two-level model's allreduce time for a contender on this network's fit."""
    import cluster_projection as cp
    net = rec["fit"]
    intra = rec.get("fit_intra") or intra
    hosts = rec["hosts"]
    words = " ".join(contender_args)
    bf16 = "--wire bf16" in words
    if "--collective hierarchical" in words:
        return cp.t_hier(intra, net, ranks_per_host, hosts, nbytes, nbytes / 2 if bf16 else nbytes)
    return cp.t_flat(intra, net, hosts * ranks_per_host, hosts, nbytes / 2 if bf16 else nbytes)


def print_contenders(records, args, reference_compute_s):
    """Every contender's median step, its ratio to the first, and the model's prediction."""
    import cluster_projection as cp
    intra = cp.load_intra(args.intra)
    print(f"\n| network | hosts x ranks | contender | step | compute | exposed wait | step / first | "
          f"predicted allreduce | predicted step | rounds |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in records:
        rows = [c for c in r.get("contenders", []) if "train" in c]
        for c in r.get("contenders", []):
            if "train" not in c:
                print(f"| {r['network']} | {r['hosts']} x {args.ranks_per_host} | {c['name']} | failed: "
                      f"{c.get('error', '?')[-200:]} |")
                continue
            t = c["train"]
            first = rows[0]["train"]["step_s"]
            pred = "-"
            pred_step = "-"
            if "fit" in r and reference_compute_s:
                comm = predicted_comm_s(r, c["args"], args.ranks_per_host, intra, 4 * t["parameters"])
                pred, pred_step = f"{comm * 1e3:.1f} ms", f"{(reference_compute_s + comm) * 1e3:.1f} ms"
            print(f"| {r['network']} | {r['hosts']} x {args.ranks_per_host} | {c['name']} | "
                  f"{t['step_s'] * 1e3:.1f} ms | {t['compute_s'] * 1e3:.1f} ms | {t['exposed_s'] * 1e3:.1f} ms | "
                  f"{t['step_s'] / first:.2f} | {pred} | {pred_step} | {len(c.get('rounds', []))} |")


def reference_run(args, label):
    """ringtrain train N=1 at batch b, one BLAS thread, no namespaces: t_compute(b)."""
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = os.path.join(tmp, "ref")
        proc, others, wall = dp_speed.measured(lambda: subprocess.run(
            ["mpiexec.mpich", "-n", "1"] + train_args(args, 1, run_dir), capture_output=True,
            text=True, timeout=args.timeout))
        if proc.returncode != 0:
            raise SystemExit(f"cluster_bench: the one-host reference run failed: {proc.stderr[-800:]}")
        rec = summarize_run(run_dir)
    rec.update({"others_busy_cores": others, "wall_s": wall, "when": label})
    print(f"reference N=1 ({label}, one host, batch {args.local_batch}): step {rec['step_s'] * 1e3:.2f} ms, "
          f"compute {rec['compute_s'] * 1e3:.2f} ms, others {others} cores", flush=True)
    return rec


def fmt_Bps(v):
    return "-" if v is None else f"{v / 1e6:,.0f} MB/s"


def fmt_level(rec):
    """The intra-host fit of a record, or why there is none."""
    if "fit_intra" in rec:
        return f"{rec['fit_intra']['alpha_s'] * 1e6:.1f} us, {fmt_Bps(rec['fit_intra']['bandwidth_Bps'])}"
    return "failed" if "allreduce_intra_error" in rec else "-"


def print_table(records):
    print("\n| network | hosts | TCP payload at that rate | bare TCP stream (h0 / h1 receive) | ring alpha "
          "| ring B | B / payload | B / stream | busbw at the largest size, ring / MPI | inside a host: alpha, B "
          "| others |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in records:
        if "fit" not in r and "allreduce_error" not in r and "error" not in r:
            continue  # --no-sweep
        if "fit" not in r:
            print(f"| {r['network']} | {r['hosts']} | failed: {r.get('error') or r.get('allreduce_error')} |")
            continue
        fit, payload = r["fit"], (r["rate_Bps"] * TCP_PAYLOAD_PER_FRAME if r["rate_Bps"] else None)
        stream = min(r["stream"].values())
        b = fit["bandwidth_Bps"]
        ratio = lambda x: "-" if (x is None or b is None) else f"{b / x:.2f}"  # noqa: E731
        print(f"| {r['network']} | {r['hosts']} | {fmt_Bps(payload)} | "
              f"{fmt_Bps(r['stream']['host0_recv_Bps'])} / {fmt_Bps(r['stream']['host1_recv_Bps'])} | "
              f"{fit['alpha_s'] * 1e6:.1f} us | {fmt_Bps(b)} | {ratio(payload)} | {ratio(stream)} | "
              f"{fmt_Bps(fit['ring_busbw_Bps'])} / {fmt_Bps(fit['mpi_busbw_Bps'])} | {fmt_level(r)} | "
              f"{r['others_busy_cores']} |")
    trains = [r for r in records if "train" in r]
    if trains:
        print("\n| network | hosts | step | compute | exposed wait | ranks per node |")
        print("|---|---:|---:|---:|---:|---:|")
        for r in trains:
            t = r["train"]
            print(f"| {r['network']} | {r['hosts']} | {t['step_s'] * 1e3:.2f} ms | "
                  f"{t['compute_s'] * 1e3:.2f} ms | {t['exposed_s'] * 1e3:.2f} ms | {t['ranks_per_node']} |")


def progress_line(rec):
    if "fit" not in rec and "train" in rec:
        return f"train step {rec['train']['step_s'] * 1e3:.1f} ms, others {rec['others_busy_cores']} cores"
    if "fit" not in rec:
        return "failed: " + (rec.get("error") or rec.get("allreduce_error") or "?")
    parts = [f"alpha {rec['fit']['alpha_s'] * 1e6:.1f} us", f"B {fmt_Bps(rec['fit']['bandwidth_Bps'])}"]
    if "fit_intra" in rec:
        parts.append(f"inside a host alpha {rec['fit_intra']['alpha_s'] * 1e6:.1f} us, "
                     f"B {fmt_Bps(rec['fit_intra']['bandwidth_Bps'])}")
    if "train" in rec:
        parts.append(f"train step {rec['train']['step_s'] * 1e3:.1f} ms")
    parts.append(f"others {rec['others_busy_cores']} cores")
    return ", ".join(parts)


def main():
    args = parse_args()
    if args.inner:
        inner(args)
        return
    args.ringtrain = os.path.abspath(args.ringtrain)
    with open(args.ringtrain, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    print(f"cluster_bench: {started}, load {dp_speed.load1()}, ringtrain sha256 {sha[:12]}, "
          f"sizes {args.sizes}, ucx {args.ucx or 'defaults'} (+ UCX_TLS=tcp UCX_NET_DEVICES=eth0)")
    doc = {"started": started, "load1_start": dp_speed.load1(), "ringtrain_sha256": sha,
           "sizes": args.sizes, "ucx": args.ucx, "local_batch": args.local_batch,
           "model": args.model, "records": []}
    references = [reference_run(args, "before the networks")] if args.train else []
    for k in [int(x) for x in args.hosts.split(",")]:
        for network in args.networks.split(","):
            rec = run_network(args, network, k)
            doc["records"].append(rec)
            print(f"  {network:>6} x {k} hosts: {progress_line(rec)}", flush=True)
    if args.train:  # the reference again: t_compute(b) is the mean of the two medians
        references.append(reference_run(args, "after the networks"))
        doc["reference_runs"] = references
        doc["reference"] = dict(references[0], compute_s=statistics.mean(
            r["compute_s"] for r in references), step_s=statistics.mean(r["step_s"] for r in references))
    doc["load1_end"] = dp_speed.load1()
    print_table(doc["records"])
    if args.train:
        print_contenders(doc["records"], args, doc["reference"]["compute_s"])
    if args.json:
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1)
        print(f"\nwrote {args.json}")


if __name__ == "__main__":
    main()
