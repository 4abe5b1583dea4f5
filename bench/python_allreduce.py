#!/usr/bin/env python3
"""ringtrain.allreduce from Python against the C++ `ringtrain bench allreduce`, and against
MPICH's MPI_Allreduce called through the module on the same NumPy arrays.

    PYTHONPATH=build/python mpiexec.mpich -n 2 /usr/bin/python3 bench/python_allreduce.py

One MPI job, --rounds paired rounds. In each round, size by size (1 MiB .. 64 MiB), it runs
the C++ benchmark for that size (`ringtrain bench allreduce --sizes S`: the program's own
code, called in these processes through the module's command entry, with its huge-page
buffers) and its own timing of the same size, in an order that alternates. Its own timing
follows the C++ benchmark's method (bench_allreduce.cpp) on a NumPy array (one of the
largest size; the sizes are its leading views): warm-up calls, a batch length doubled until
a batch lasts 10 ms on the slowest rank, then samples in which ringtrain.allreduce and
ringtrain.mpi_allreduce alternate (which goes first alternates too); a sample is a barrier,
one untimed call and the batch, its time per call the slowest rank's; a size's time is the
median of its samples. Pairs are seconds apart, so a shared machine's load shifts both
sides of a ratio alike. Rank 0 prints, per size, the medians over rounds and the paired
ratios Python ring / C++ ring and Python ring / Python MPI_Allreduce (median [min, max]),
and the C++ benchmark's own ring / MPI_Allreduce of the same rounds for comparison.
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

MIB = 1 << 20
SIZES = [1 * MIB, 2 * MIB, 4 * MIB, 8 * MIB, 16 * MIB, 32 * MIB, 64 * MIB]


def time_batch(call, comm, x, calls):
    """Seconds per call of `calls` back-to-back calls on this rank, after a barrier and one
    untimed call."""
    comm.barrier()
    call(x, comm)
    t0 = time.perf_counter()
    for _ in range(calls):
        call(x, comm)
    return (time.perf_counter() - t0) / calls


def slowest(comm, seconds):
    import numpy as np
    return float(comm.allgather(np.array([seconds], np.float64)).max())


def calibrate(call, comm, x):
    calls = 1
    while True:
        per_call = slowest(comm, time_batch(call, comm, x, calls))
        if per_call * calls >= 10e-3 or calls >= 1024:
            return calls, per_call
        calls *= 2


def time_size(comm, x, seconds_per_size=0.3):
    import numpy as np
    import ringtrain
    impls = {"ring": ringtrain.allreduce, "mpi": ringtrain.mpi_allreduce}
    x[:] = 1.0
    for _ in range(2):
        for call in impls.values():
            time_batch(call, comm, x, 1)
    calls = {name: calibrate(call, comm, x) for name, call in impls.items()}
    sample_s = max(n * s for n, s in calls.values())
    repeats = min(max(int(seconds_per_size / sample_s), 5), 100)
    samples = {name: [] for name in impls}
    for i in range(repeats):
        order = ["ring", "mpi"] if i % 2 == 0 else ["mpi", "ring"]
        for name in order:
            samples[name].append(time_batch(impls[name], comm, x, calls[name][0]))
    return {name: statistics.median(float(v) for v in comm.allgather(np.array(s)).max(axis=0))
            for name, s in samples.items()}


def cpp_size(size, folder):
    """The C++ benchmark's medians (ring, MPI) for one size, run in this job."""
    import ringtrain
    path = os.path.join(folder, "cpp.json")
    quiet = os.open(os.devnull, os.O_WRONLY)
    saved = os.dup(1)
    sys.stdout.flush()
    os.dup2(quiet, 1)  # its table: the JSON holds the figures
    try:
        ringtrain._ringtrain._command(["bench", "allreduce", "--sizes", str(size), "--json", path])
    finally:
        os.dup2(saved, 1)
        os.close(quiet)
        os.close(saved)
    if not os.path.exists(path):  # only rank 0 writes it
        return {}
    with open(path) as f:
        rows = json.load(f)["rows"]
    os.remove(path)
    return {r["impl"]: r["median_s"] for r in rows}


def table(rounds, N):
    print(f"allreduce at N = {N}: medians over {len(rounds)} paired rounds (each a size's median "
          "of its samples); ratios per round, median [min, max]")
    print(f"{'size':>7} {'C++ ring ms':>12} {'Py ring ms':>11} {'Py MPI ms':>10} "
          f"{'Py ring / C++ ring':>22} {'Py ring / Py MPI':>22} {'C++ ring / C++ MPI':>22}")
    for size in SIZES:
        cpp = [r[size]["cpp"] for r in rounds]
        ring = [r[size]["ring"] for r in rounds]
        mpi = [r[size]["mpi"] for r in rounds]
        binding = [p / c for p, c in zip(ring, cpp)]
        peer = [p / m for p, m in zip(ring, mpi)]
        cpp_peer = [r[size]["cpp"] / r[size]["cpp_mpi"] for r in rounds]
        print(f"{size // MIB:>5} M {statistics.median(cpp) * 1e3:>12.3f} "
              f"{statistics.median(ring) * 1e3:>11.3f} {statistics.median(mpi) * 1e3:>10.3f} "
              f"{statistics.median(binding):>8.3f} [{min(binding):.3f}, {max(binding):.3f}] "
              f"{statistics.median(peer):>8.3f} [{min(peer):.3f}, {max(peer):.3f}] "
              f"{statistics.median(cpp_peer):>8.3f} [{min(cpp_peer):.3f}, {max(cpp_peer):.3f}]")


def run(rounds_wanted):
    import numpy as np
    import ringtrain
    comm = ringtrain.mpi.world()
    buffer = np.ones(max(SIZES) // 4, np.float32)
    rounds = []
    with tempfile.TemporaryDirectory() as folder:
        for i in range(rounds_wanted):
            round_ = {}
            for size in SIZES:
                python_first = (i + SIZES.index(size)) % 2 == 0
                if python_first:
                    round_[size] = time_size(comm, buffer[:size // 4])
                cpp = cpp_size(size, folder)
                if not python_first:
                    round_[size] = time_size(comm, buffer[:size // 4])
                round_[size]["cpp"] = cpp.get("ring")
                round_[size]["cpp_mpi"] = cpp.get("mpi")
            rounds.append(round_)
            if comm.rank == 0:
                print(f"round {i + 1} of {rounds_wanted} done", file=sys.stderr, flush=True)
    if comm.rank == 0:
        table(rounds, comm.size)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    run(parser.parse_args().rounds)


if __name__ == "__main__":
    main()
