#!/usr/bin/python3
"""PyTorch peer of ringtrain's time-to-target benchmark: train until test accuracy >= target.

The same recipe ringtrain runs by default: the mlp 784-1024-1024-10 with ReLU, SGD momentum
0.9, lr 0.05 (constant), batch 128, Fashion-MNIST pixels scaled to [0, 1], each epoch a fresh
random order of the 60,000 training images (the last batch of an epoch is short, as in
ringtrain), evaluation on the full 10,000-image test set every --eval-every steps, stop at the
first evaluation with accuracy >= --target. One process with --threads threads. Prints one
JSON line:

  {"impl": "pytorch", "steps_to_target": 3100, "time_to_target_s": 41.2, "mean_step_s": ...,
   "eval_s": ..., "target_reached": true, "evaluations": [[100, 0.71], ...], ...}

time_to_target_s is wall time from the first step to the end of the evaluation that reached
the target, evaluation included (ringtrain's results.time_to_target_s counts the same).
Run with Debian's interpreter; thread variables are set before torch is imported.

  /usr/bin/python3 bench/peers/torch_time_to_target.py --threads 2 --seed 0
"""
import argparse
import gzip
import json
import os
import struct
import sys
import time

FASHION_MNIST = "/usr/share/datasets/fashion-mnist"


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--target", type=float, default=0.88)
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--max-steps", type=int, default=20000)
    ap.add_argument("--data", default=FASHION_MNIST)
    args = ap.parse_args()
    if min(args.threads, args.batch, args.eval_every, args.max_steps) < 1 or args.lr <= 0:
        ap.error("--threads, --batch, --eval-every, --max-steps must be >= 1 and --lr > 0")
    return args


args = parse_args()
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = str(args.threads)
os.environ["OMP_WAIT_POLICY"] = "passive"

import torch  # noqa: E402  (after the environment, on purpose)
from torch import nn  # noqa: E402


def read_idx(path):
    """IDX file (big-endian header: 0x0000, type 0x08 = uint8, dims) -> (dims, bytes)."""
    try:
        with gzip.open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        sys.exit("torch_time_to_target: cannot read %s: %s (apt-get install "
                 "dataset-fashion-mnist)" % (path, e))
    zero, dtype, ndim = struct.unpack(">HBB", data[:4])
    if zero != 0 or dtype != 0x08:
        sys.exit("torch_time_to_target: %s is not an IDX file of uint8" % path)
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return dims, data[4 + 4 * ndim:]


def load(split):
    """(images (n, 784) float32 in [0, 1], labels (n,) int64)."""
    dims, pixels = read_idx(os.path.join(args.data, "%s-images-idx3-ubyte.gz" % split))
    _, labels = read_idx(os.path.join(args.data, "%s-labels-idx1-ubyte.gz" % split))
    x = torch.frombuffer(bytearray(pixels), dtype=torch.uint8).to(torch.float32).div_(255.0)
    y = torch.frombuffer(bytearray(labels), dtype=torch.uint8).to(torch.int64)
    return x.view(dims[0], 784), y


def main():
    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(1)
    torch.manual_seed(args.seed)
    train_x, train_y = load("train")
    test_x, test_y = load("t10k")
    model = nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                          nn.Linear(1024, 10))
    loss_fn = nn.CrossEntropyLoss()  # mean over the batch, as ringtrain's 1/B scale
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    gen = torch.Generator().manual_seed(args.seed)

    def evaluate():
        model.eval()
        correct = 0
        with torch.no_grad():
            for i in range(0, len(test_y), 1000):
                correct += (model(test_x[i:i + 1000]).argmax(1) == test_y[i:i + 1000]).sum().item()
        model.train()
        return correct / len(test_y)

    evaluations, step, eval_s, train_s = [], 0, 0.0, 0.0
    reached = False
    start = time.perf_counter()
    while step < args.max_steps and not reached:
        order = torch.randperm(len(train_y), generator=gen)
        for first in range(0, len(order), args.batch):
            t0 = time.perf_counter()
            idx = order[first:first + args.batch]
            opt.zero_grad(set_to_none=False)
            loss_fn(model(train_x[idx]), train_y[idx]).backward()
            opt.step()
            step += 1
            train_s += time.perf_counter() - t0
            if step % args.eval_every == 0:
                t0 = time.perf_counter()
                accuracy = evaluate()
                eval_s += time.perf_counter() - t0
                evaluations.append([step, round(accuracy, 4)])
                if accuracy >= args.target:
                    reached = True
                    break
            if step >= args.max_steps:
                break
    wall = time.perf_counter() - start
    print(json.dumps({
        "impl": "pytorch", "torch_version": torch.__version__, "threads": args.threads,
        "seed": args.seed, "lr": args.lr, "momentum": args.momentum, "batch": args.batch,
        "target": args.target, "eval_every": args.eval_every, "target_reached": reached,
        "steps_to_target": step if reached else None,
        "time_to_target_s": round(wall, 3) if reached else None, "steps": step,
        "wall_s": round(wall, 3), "mean_step_s": round(train_s / max(1, step), 6),
        "eval_s": round(eval_s, 3), "evaluations": evaluations,
        "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE")}))


if __name__ == "__main__":
    main()
