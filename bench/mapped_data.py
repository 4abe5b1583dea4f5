#!/usr/bin/python3
"""Memory-mapped data against the same data read into memory: mlp on Fashion-MNIST, paired.

Fashion-MNIST is written twice as HDF5 (bench/fashion_mnist_h5.py: uint8 x, int64 y):
  mapped.h5    contiguous, unfiltered datasets: ringtrain maps them where they lie
  memory.h5    the same arrays chunked (no compression): ringtrain reads them into memory
Both hold the same values, so both runs compute the same steps; only where the samples come
from differs (page cache through the mapping, or floats in the process's memory).

Before every run the pages of BOTH files are dropped from the page cache
(os.posix_fadvise(..., POSIX_FADV_DONTNEED) on the clean, synced files; fincore then checks
that none of the run's file is resident, and a note says so if some is), so the mapped run
reads its samples from the disk as it first touches them, and the in-memory run reads its
file at load, before the first step. Each round runs both back to back (mapped first in odd
rounds, in-memory first in even ones):

  mpiexec.mpich -n RANKS ringtrain train --data FILE --model mlp --steps S --no-eval --quiet
      --global-batch 128 --run-dir <tmp>

Per run: the manifest's samples/s (global batch / mean step time over ALL steps, the first
ones that fault the pages in included) and wall_s (the whole run, load included). Printed:
per round, the medians of each side and the median over rounds of the per-round ratio
mapped / in-memory, with its min-max.

  /usr/bin/python3 bench/mapped_data.py [--ringtrain build/ringtrain] [--rounds 5]
      [--steps 200] [--ranks 2] [--dir DIR]
A benchmark program, not a test: every figure comes from this invocation.
"""
import argparse
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile

import h5py

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import dp_speed  # noqa: E402  (run_ringtrain: one bounded job, its manifest and metrics)
import fashion_mnist_h5  # noqa: E402  (read_idx)


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ringtrain", default=os.path.join(HERE, "..", "build", "ringtrain"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--mpiexec", default="mpiexec.mpich")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--idx", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--dir", default=None, help="where the two HDF5 files go (default: a temp dir)")
    return ap.parse_args()


def write_files(idx, folder):
    """mapped.h5 (contiguous) and memory.h5 (chunked) with the same arrays, synced."""
    arrays = {}
    for split, prefix in (("train", "train"), ("test", "t10k")):
        arrays[split + "/x"] = fashion_mnist_h5.read_idx(f"{idx}/{prefix}-images-idx3-ubyte.gz")[:, None]
        arrays[split + "/y"] = fashion_mnist_h5.read_idx(
            f"{idx}/{prefix}-labels-idx1-ubyte.gz").astype("int64")
    paths = {"mapped": os.path.join(folder, "mapped.h5"), "memory": os.path.join(folder, "memory.h5")}
    with h5py.File(paths["mapped"], "w") as f:
        for k, v in arrays.items():
            f[k] = v
    with h5py.File(paths["memory"], "w") as f:
        for k, v in arrays.items():
            f.create_dataset(k, data=v, chunks=(min(len(v), 1024),) + v.shape[1:])
    os.sync()  # clean pages: DONTNEED can drop them
    return paths


def drop_from_cache(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def resident_bytes(path):
    """Bytes of `path` in the page cache (util-linux fincore), or None without fincore."""
    if not shutil.which("fincore"):
        return None
    out = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES", path],
                         capture_output=True, text=True, check=True).stdout
    return int(out.split()[0])


def one_run(args, data, paths, folder, label):
    for p in paths.values():
        drop_from_cache(p)
    resident = resident_bytes(data)
    if resident:  # another process read it meanwhile: say so rather than hide it
        print(f"# note: {resident} bytes of {data} were in the page cache after the drop")
    run_dir = tempfile.mkdtemp(prefix=f"run-{label}-", dir=folder)
    cmd = [args.mpiexec, "-n", str(args.ranks), args.ringtrain, "train", "--checkpoint-every", "0", "--data", data,
           "--model", "mlp", "--steps", str(args.steps), "--no-eval", "--quiet",
           "--global-batch", "128", "--run-dir", run_dir]
    manifest, _ = dp_speed.run_ringtrain(args, cmd, run_dir)
    shutil.rmtree(run_dir)
    arrays = {a["name"]: a for a in manifest["data"]["arrays"]}
    if arrays["train/x"]["mapped"] != (label == "mapped"):
        raise RuntimeError(f"{data}: train/x mapped = {arrays['train/x']['mapped']}")
    r = manifest["results"]
    return r["samples_per_s"], r["wall_s"], " ".join(shlex.quote(c) for c in cmd)


def summary(name, values):
    return "%-28s median %10.1f  (min %.1f, max %.1f)" % (name, statistics.median(values),
                                                          min(values), max(values))


def main():
    args = parse_args()
    folder = args.dir or tempfile.mkdtemp(prefix="mapped-data-")
    os.makedirs(folder, exist_ok=True)
    try:
        paths = write_files(args.idx, folder)
        print(f"# files: {paths['mapped']} ({os.path.getsize(paths['mapped'])} bytes, contiguous), "
              f"{paths['memory']} ({os.path.getsize(paths['memory'])} bytes, chunked)")
        rates = {"mapped": [], "memory": []}
        walls = {"mapped": [], "memory": []}
        ratios = []
        for r in range(args.rounds):
            order = ("mapped", "memory") if r % 2 == 0 else ("memory", "mapped")
            got = {}
            for label in order:
                rate, wall, cmd = one_run(args, paths[label], paths, folder, label)
                if r == 0:
                    print("# " + cmd)
                got[label] = rate
                rates[label].append(rate)
                walls[label].append(wall)
            ratios.append(got["mapped"] / got["memory"])
            print("round %d: mapped %.1f samples/s, in memory %.1f samples/s, ratio %.3f"
                  % (r + 1, got["mapped"], got["memory"], ratios[-1]), flush=True)
        print(summary("mapped samples/s", rates["mapped"]))
        print(summary("in-memory samples/s", rates["memory"]))
        print(summary("mapped wall_s", walls["mapped"]))
        print(summary("in-memory wall_s", walls["memory"]))
        print("ratio mapped / in-memory samples/s: median %.3f (min %.3f, max %.3f) over %d rounds"
              % (statistics.median(ratios), min(ratios), max(ratios), len(ratios)))
    finally:
        if not args.dir:
            shutil.rmtree(folder)


if __name__ == "__main__":
    main()
