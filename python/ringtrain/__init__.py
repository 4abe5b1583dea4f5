"""ringtrain from Python: the ring collectives, the models and the checkpoints of ringtrain,
and its training run, for notebooks, scripts and graders.

Run under MPICH's launcher with Debian's interpreter:

    mpiexec.mpich -n 2 /usr/bin/python3 script.py

The module owns MPI (MPICH): it initialises it on first use (the first call that needs it is
collective: every rank makes it) and finalises it when the interpreter exits. It never
imports mpi4py, which Debian builds on Open MPI; ``ringtrain.mpi.world()`` is its own small
communicator.

The contract (names scripts and graders rely on; more may be added, none renamed):

    ringtrain.mpi.world() -> Comm: rank, size, barrier(), send/recv/sendrecv/isend/irecv,
        allgather(x), split(color), counters()
    ringtrain.allreduce(x, comm) / reduce_scatter(x, comm) / all_gather(x, comm)
        the hand-written ring, in place on a C-contiguous float32 NumPy array (anything else
        is refused: no copy is made), returning the call's counters {rounds, bytes_sent,
        bytes_received}; the same bits as the C++ ring.   ringtrain.allreduce_exact(x, comm)
        ringtrain.mpi_allreduce(x, comm): MPICH's MPI_Allreduce on the same array (the peer)
    ringtrain.Model(spec, input_shape, classes, seed=0): forward, loss_and_backward,
        parameters, gradients (dicts of NumPy views named as in checkpoints), load_state
    ringtrain.plan_buckets(layer_sizes, bucket_bytes), ringtrain.young_daly(C, mu),
        ringtrain.ring_cost(N, M, alpha, B), ringtrain.chunk(M, N, i),
        ringtrain.epoch_permutation(seed, epoch, n), ringtrain.set_blas(threads, kernels)
    ringtrain.checkpoint.verify(path, key=None), ringtrain.checkpoint.load(path, key=None)
    ringtrain.run.open(run_dir): manifest, metrics, checkpoints, restart ledger
    ringtrain.train(**options): the same run as `ringtrain train`, flags as keywords

Errors: ringtrain.Error (RuntimeError), ringtrain.UsageError (also a ValueError),
ringtrain.checkpoint.CheckpointError; their messages are the program's one-line messages.
"""

import os as _os
import sys as _sys

from . import _ringtrain
from ._ringtrain import (Error, Model, UsageError, all_gather, allreduce, allreduce_exact,
                         checkpoint, chunk, epoch_permutation, mpi, mpi_allreduce,
                         plan_buckets, reduce_scatter, ring_cost, set_blas, young_daly)
from . import run

# `import ringtrain.mpi` and `import ringtrain.checkpoint` find the compiled submodules.
_sys.modules[__name__ + ".mpi"] = mpi
_sys.modules[__name__ + ".checkpoint"] = checkpoint


def _reader_path():
    """The contained checkpoint reader: $RINGTRAIN_CHECKPOINT_READER, else this build's."""
    override = _os.environ.get("RINGTRAIN_CHECKPOINT_READER")
    if override:
        return override
    from . import _paths
    return _paths.READER


checkpoint._set_reader(_reader_path())


def _flag(name, value):
    """One keyword as `ringtrain train` flags: global_batch=128 -> ['--global-batch', '128'];
    True -> ['--name'], False and None -> []; a list or tuple -> comma-separated."""
    flag = "--" + name.replace("_", "-")
    if value is None or value is False:
        return []
    if value is True:
        return [flag]
    if isinstance(value, (list, tuple)):
        value = ",".join(str(v) for v in value)
    return [flag, str(value)]


def train(**options):
    """Runs `ringtrain train` in this process with the keywords as its flags and returns the
    run's results (the manifest's "results": steps, final_test_accuracy, ...).

    ``train(model="cnn", global_batch=256, steps=100, run_dir="runs/a", overlap="off",
    no_eval=True)`` is ``ringtrain train --model cnn --global-batch 256 --steps 100
    --run-dir runs/a --overlap off --no-eval``: underscores become dashes, True gives a
    switch, False and None leave the flag out, a list becomes comma-separated values.
    Collective: every rank calls it with the same options. Raises UsageError (the program's
    exit 2) or Error (exit 1) with the program's one-line message, on every rank; a rank
    that fails alone aborts the job, as the program does. Ctrl-C (SIGINT) saves a checkpoint
    at the next agreed step and then raises KeyboardInterrupt (the program's exit 130).
    """
    flags = ["train"]
    for name, value in options.items():
        flags += _flag(name, value)
    return _ringtrain._command(flags)


__all__ = ["Error", "Model", "UsageError", "all_gather", "allreduce", "allreduce_exact",
           "checkpoint", "chunk", "epoch_permutation", "mpi", "mpi_allreduce", "plan_buckets",
           "reduce_scatter", "ring_cost", "run", "set_blas", "train", "young_daly"]
