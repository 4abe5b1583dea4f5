#!/usr/bin/python3
"""PyTorch peer of ringtrain's training-speed benchmark (single process, CPU).

Times full training steps -- forward, cross-entropy, backward, SGD (momentum 0.9) step --
of the same models ringtrain trains, at a given thread count, and prints one JSON line:

  {"impl": "pytorch", "model": "mlp", "threads": 2, "batch": 128,
   "samples_per_s_median": ..., "step_s_median": ..., "torch_version": "1.13.0a0", ...}

Run with Debian's interpreter (python3-torch installs only there), one process per thread
count, because the thread pools are fixed when torch is imported:

  /usr/bin/python3 bench/peers/torch_train_speed.py --model mlp --threads 2

Thread variables are set before `import torch`: torch.set_num_threads does not limit the
OpenBLAS its Linear layers call, and idle OpenMP threads that spin (OMP_WAIT_POLICY
active) make it several times slower on a busy machine.
"""
import argparse
import gzip
import json
import os
import statistics
import struct
import sys
import time

FASHION_MNIST = "/usr/share/datasets/fashion-mnist"


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--steps", type=int, default=20, help="timed steps per repeat")
    ap.add_argument("--warmup", type=int, default=5, help="untimed steps before timing")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--data", choices=["random", "fashion-mnist"], default="random",
                    help="random batches, or the first training images of %s" % FASHION_MNIST)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if args.threads < 1 or args.batch < 1 or args.steps < 1 or args.repeats < 1 \
            or args.warmup < 0:
        ap.error("--threads, --batch, --steps, --repeats must be >= 1 and --warmup >= 0")
    return args


args = parse_args()
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = str(args.threads)
os.environ["OMP_WAIT_POLICY"] = "passive"

import torch  # noqa: E402  (after the environment, on purpose)
from torch import nn  # noqa: E402


def build_model(name):
    if name == "mlp":  # 784-1024-1024-10, 1,863,690 parameters
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 1024), nn.ReLU(),
                             nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))
    return nn.Sequential(  # cnn: 28x28 -> 14x14x32 -> 7x7x64 -> 1024 -> 10
        nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(3136, 1024), nn.ReLU(), nn.Linear(1024, 10))


def read_idx(path):
    """IDX file (big-endian header: magic, dims) -> (dims, raw bytes)."""
    with gzip.open(path, "rb") as f:
        data = f.read()
    zero, dtype, ndim = struct.unpack(">HBB", data[:4])  # 0x0000, 0x08 = uint8, dims
    if zero != 0 or dtype != 0x08:
        sys.exit("torch_train_speed: %s is not an IDX file of uint8" % path)
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return dims, data[4 + 4 * ndim:]


def make_batches(count, batch, source, gen):
    """`count` batches of (images (B,1,28,28) float32, labels (B,) int64)."""
    if source == "random":
        return [(torch.randn(batch, 1, 28, 28, generator=gen),
                 torch.randint(0, 10, (batch,), generator=gen)) for _ in range(count)]
    dims, pixels = read_idx(os.path.join(FASHION_MNIST, "train-images-idx3-ubyte.gz"))
    _, labels = read_idx(os.path.join(FASHION_MNIST, "train-labels-idx1-ubyte.gz"))
    need = count * batch
    if need > dims[0]:
        sys.exit("torch_train_speed: %d batches of %d need %d images, the file has %d"
                 % (count, batch, need, dims[0]))
    x = torch.frombuffer(bytearray(pixels[:need * 784]), dtype=torch.uint8)
    x = x.to(torch.float32).div_(255.0).view(count, batch, 1, 28, 28)
    y = torch.frombuffer(bytearray(labels[:need]), dtype=torch.uint8).to(torch.int64)
    y = y.view(count, batch)
    return [(x[i].contiguous(), y[i].contiguous()) for i in range(count)]


def main():
    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(1)
    gen = torch.Generator().manual_seed(args.seed)
    torch.manual_seed(args.seed)
    model = build_model(args.model)
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    batches = make_batches(8, args.batch, args.data, gen)

    def train_step(i):
        x, y = batches[i % len(batches)]
        opt.zero_grad(set_to_none=False)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    model.train()
    for i in range(args.warmup):
        train_step(i)
    step_s = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        for i in range(args.steps):
            loss = train_step(i)
        loss.item()  # the steps are synchronous on CPU; this only reads the last loss
        step_s.append((time.perf_counter() - t0) / args.steps)

    median = statistics.median(step_s)
    print(json.dumps({
        "impl": "pytorch", "model": args.model, "threads": args.threads,
        "batch": args.batch, "samples_per_s_median": round(args.batch / median, 1),
        "step_s_median": round(median, 6), "step_s_min": round(min(step_s), 6),
        "step_s_max": round(max(step_s), 6), "steps": args.steps, "repeats": args.repeats,
        "warmup": args.warmup, "data": args.data,
        "parameters": sum(p.numel() for p in model.parameters()),
        "torch_version": torch.__version__}))


if __name__ == "__main__":
    main()
