#!/usr/bin/python3
"""PyTorch DDP (gloo, CPU) peer of ringtrain's data-parallel speed benchmark.

Starts --world-size worker processes on this machine (loopback only), each with
--threads intra-op threads, wraps the same models as bench/peers/torch_train_speed.py in
DistributedDataParallel (gloo backend, default 25 MB buckets that overlap backward), and times
full training steps -- forward, cross-entropy, backward with the gradient all-reduce, SGD
(momentum 0.9) step -- on random data, global batch --global-batch split evenly over ranks.
Start-up (process spawn, import, rendezvous, model construction, DDP's initial broadcast) and
--warmup steps are not timed. Each repeat times --steps steps between two barriers and takes
the slowest rank's time; the median over --repeats is reported. Rank 0 prints one JSON line:

  {"impl": "pytorch-ddp-gloo", "model": "mlp", "world_size": 2, "threads_per_rank": 1,
   "global_batch": 128, "samples_per_s_median": ..., "step_s_median": ..., ...}

Run with Debian's interpreter (python3-torch installs only there):

  /usr/bin/python3 bench/peers/torch_ddp_speed.py --model mlp

Bounded: the launcher kills its workers and exits 124 after --timeout seconds, and exits
non-zero at once if any worker fails; gloo's own collective timeout is --timeout too.
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import time

# Defaults per model: (warm-up steps, timed steps per repeat, repeats).
DEFAULT_STEPS = {"mlp": (10, 30, 7), "cnn": (3, 8, 5)}


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    ap.add_argument("--world-size", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1, help="threads per rank")
    ap.add_argument("--global-batch", type=int, default=128)
    ap.add_argument("--steps", type=int, default=0, help="timed steps per repeat (0: per model)")
    ap.add_argument("--warmup", type=int, default=-1, help="untimed steps (-1: per model)")
    ap.add_argument("--repeats", type=int, default=0, help="timed repeats (0: per model)")
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=110.0,
                    help="seconds before the launcher kills everything (and gloo's timeout)")
    # Internal: set by the launcher for its workers.
    ap.add_argument("--rank", type=int, default=-1, help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    warmup, steps, repeats = DEFAULT_STEPS[args.model]
    if args.steps == 0:
        args.steps = steps
    if args.warmup < 0:
        args.warmup = warmup
    if args.repeats == 0:
        args.repeats = repeats
    if args.world_size < 1 or args.threads < 1 or args.steps < 1 or args.repeats < 1:
        ap.error("--world-size, --threads, --steps, --repeats must be >= 1")
    if args.global_batch % args.world_size != 0:
        ap.error("--global-batch must be divisible by --world-size")
    return args


# --------------------------------------------------------------------------- launcher

def free_loopback_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(args):
    """Start the workers, wait for them with a deadline, relay rank 0's JSON line."""
    port = free_loopback_port()
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = str(args.threads)
    env["OMP_WAIT_POLICY"] = "passive"
    env["MASTER_ADDR"] = "127.0.0.1"
    env["MASTER_PORT"] = str(port)
    env["WORLD_SIZE"] = str(args.world_size)
    env["GLOO_SOCKET_IFNAME"] = "lo"  # loopback only
    env["PYTHONUNBUFFERED"] = "1"
    base = [sys.executable, os.path.abspath(__file__), "--model", args.model,
            "--world-size", str(args.world_size), "--threads", str(args.threads),
            "--global-batch", str(args.global_batch), "--steps", str(args.steps),
            "--warmup", str(args.warmup), "--repeats", str(args.repeats),
            "--lr", str(args.lr), "--seed", str(args.seed), "--timeout", str(args.timeout),
            "--port", str(port)]
    procs = []
    for r in range(args.world_size):
        env_r = dict(env, RANK=str(r), LOCAL_RANK=str(r))
        procs.append(subprocess.Popen(base + ["--rank", str(r)], env=env_r,
                                      stdout=subprocess.PIPE if r == 0 else subprocess.DEVNULL,
                                      text=True))
    deadline = time.monotonic() + args.timeout
    failed = None
    rank0_done = None
    while True:
        codes = [p.poll() for p in procs]
        if any(c not in (None, 0) for c in codes):
            failed = "a worker exited with code %s" % [c for c in codes if c not in (None, 0)][0]
            break
        if all(c == 0 for c in codes):
            break
        if codes[0] == 0:
            # Rank 0 hosts the rendezvous store: once it has printed and left, a worker still
            # in gloo's shutdown can spin forever. Its measurements are complete: end it.
            rank0_done = rank0_done or time.monotonic()
            if time.monotonic() - rank0_done > 5.0:
                break
        if time.monotonic() > deadline:
            failed = "timed out after %.0f s" % args.timeout
            break
        time.sleep(0.05)
    for p in procs:
        if p.poll() is None:
            p.kill()
    for p in procs:
        p.wait()
    if failed:
        print("torch_ddp_speed: %s (model %s)" % (failed, args.model), file=sys.stderr)
        return 124 if failed.startswith("timed out") else 1
    out = procs[0].stdout.read()
    lines = [l for l in out.splitlines() if l.startswith("{")]
    if not lines:
        print("torch_ddp_speed: rank 0 printed no result", file=sys.stderr)
        return 1
    print(lines[-1], flush=True)
    return 0


# --------------------------------------------------------------------------- worker

def worker(args):
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(args.threads)
    os.environ["OMP_WAIT_POLICY"] = "passive"

    import datetime
    import statistics
    import torch  # after the environment, on purpose
    import torch.distributed as dist
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    def build_model(name):  # same as bench/peers/torch_train_speed.py
        if name == "mlp":  # 784-1024-1024-10, 1,863,690 parameters
            return nn.Sequential(nn.Flatten(), nn.Linear(784, 1024), nn.ReLU(),
                                 nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))
        return nn.Sequential(  # cnn: 28x28 -> 14x14x32 -> 7x7x64 -> 1024 -> 10
            nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(3136, 1024), nn.ReLU(), nn.Linear(1024, 10))

    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(1)
    timeout = datetime.timedelta(seconds=max(10.0, args.timeout))
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % args.port,
                            rank=args.rank, world_size=args.world_size, timeout=timeout)
    torch.manual_seed(args.seed)  # same initial weights everywhere (DDP broadcasts anyway)
    model = DDP(build_model(args.model))
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    local = args.global_batch // args.world_size
    gen = torch.Generator().manual_seed(args.seed * 1000 + args.rank)
    batches = [(torch.randn(local, 1, 28, 28, generator=gen),
                torch.randint(0, 10, (local,), generator=gen)) for _ in range(8)]

    def train_step(i):
        x, y = batches[i % len(batches)]
        opt.zero_grad(set_to_none=False)
        loss = loss_fn(model(x), y)
        loss.backward()  # DDP's bucketed all-reduce runs here, overlapped with backward
        opt.step()
        return loss

    model.train()
    for i in range(args.warmup):
        train_step(i)
    step_s = []
    for _ in range(args.repeats):
        dist.barrier()
        t0 = time.perf_counter()
        for i in range(args.steps):
            loss = train_step(i)
        loss.item()
        elapsed = torch.tensor([(time.perf_counter() - t0) / args.steps], dtype=torch.float64)
        dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)  # the slowest rank sets the pace
        step_s.append(float(elapsed.item()))

    if args.rank == 0:
        median = statistics.median(step_s)
        print(json.dumps({
            "impl": "pytorch-ddp-gloo", "model": args.model, "world_size": args.world_size,
            "threads_per_rank": args.threads, "global_batch": args.global_batch,
            "samples_per_s_median": round(args.global_batch / median, 1),
            "step_s_median": round(median, 6), "step_s_min": round(min(step_s), 6),
            "step_s_max": round(max(step_s), 6), "steps": args.steps,
            "repeats": args.repeats, "warmup": args.warmup, "data": "random",
            "bucket_cap_mb": 25,
            "parameters": sum(p.numel() for p in model.parameters()),
            "torch_version": torch.__version__}), flush=True)
    # Every rank has finished its timed steps (the last all_reduce above). Leave without
    # gloo's teardown, which can hang when rank 0 (the store's host) is gone first.
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    a = parse_args()
    sys.exit(worker(a) if a.rank >= 0 else launch(a))
