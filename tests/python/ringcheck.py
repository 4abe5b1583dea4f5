"""Helpers of the module's tests: inputs that differ by rank and position, and agreement of
the ranks before an assert (a rank that failed alone would leave the others waiting)."""

import os

import numpy as np

import ringtrain
import ringtrain.pytest_plugin


def rank_input(rank, M):
    """Rank `rank`'s M floats, bit for bit those of ring_reference.cpp's test_input: 24-bit
    mantissas at scales 2^0..2^7, so sums depend on their order."""
    i = np.arange(M, dtype=np.uint64)
    with np.errstate(over="ignore"):
        h = i * np.uint64(0x9E3779B97F4A7C15) + np.uint64(rank + 1) * np.uint64(0xBF58476D1CE4E5B9)
        h ^= h >> np.uint64(31)
        h *= np.uint64(0x94D049BB133111EB)
        h ^= h >> np.uint64(29)
    unit = (h >> np.uint64(40)).astype(np.float32) * np.float32(1.0 / 8388608.0) - np.float32(1.0)
    scale = (np.uint64(1) << ((h >> np.uint64(32)) & np.uint64(7))).astype(np.float32)
    return (unit * scale).astype(np.float32)


def sizes(N):
    """The element counts every collective test covers."""
    return sorted({0, 1, max(N - 1, 0), N, N + 1, 1000, 65537})


def agree(ok, message=""):
    """Asserts that `ok` holds on every rank; the failure names each failing rank."""
    comm = ringtrain.mpi.world()
    texts = ringtrain.pytest_plugin.gather_text(comm, "" if ok else (message or "failed"))
    failed = [f"rank {r}: {t}" for r, t in enumerate(texts) if t]
    assert not failed, "; ".join(failed)


def clean_env():
    """The environment for a program started from a rank: without the launcher's variables,
    so a ringtrain or mpiexec started here is a job of its own. RINGTRAIN_BLAS_CORETYPE=keep:
    the program keeps the OpenBLAS kernels the library chose, as this interpreter (whose
    NumPy loaded OpenBLAS before ringtrain) must, so both compute with the same kernels on any
    CPU."""
    prefixes = ("PMI_", "PMIX_", "HYDI_", "HYDRA_", "MPIR_", "MPI_LOCAL")
    env = {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}
    env["RINGTRAIN_BLAS_CORETYPE"] = "keep"
    return env


def ringtrain_program():
    """The ringtrain executable of this build (RINGTRAIN_PROGRAM, set by ctest)."""
    return os.environ["RINGTRAIN_PROGRAM"]
