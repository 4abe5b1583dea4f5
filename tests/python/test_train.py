"""ringtrain.train(**options): the same run as `ringtrain train` with those flags, to the bit,
and the program's one-line errors as exceptions on every rank."""

import os
import subprocess
import sys

import numpy as np
import pytest

import ringtrain
from ringcheck import agree, clean_env, ringtrain_program
from ringtrain.pytest_plugin import gather_text

comm = ringtrain.mpi.world()

OPTIONS = dict(mlp_hidden=32, global_batch=32, steps=6, seed=5, eval_every=6, quiet=True,
               checkpoint_every=6, blas_threads=1)


def as_flags(options):
    flags = []
    for k, v in options.items():
        flags += ["--" + k.replace("_", "-")] + ([] if v is True else [str(v)])
    return flags


def test_train_ends_bitwise_equal_to_the_program(tmp_path_factory):
    folder = tmp_path_factory.mktemp("train")
    mine = str(folder / "python") if comm.rank == 0 else ""
    run_dir = gather_text(comm, mine)[0]  # rank 0's folder; only rank 0 writes it
    results = ringtrain.train(**OPTIONS, run_dir=run_dir)
    agree(results["steps"] == OPTIONS["steps"], f"results: {results}")
    if comm.rank == 0:
        program = str(folder / "program")
        done = subprocess.run(["mpiexec.mpich", "-n", str(comm.size), ringtrain_program(), "train",
                               *as_flags(OPTIONS), "--run-dir", program], env=clean_env(),
                              capture_output=True, text=True, timeout=300)
    comm.barrier()
    if comm.rank != 0:
        return
    assert done.returncode == 0, done.stderr
    name = f"checkpoints/step-{OPTIONS['steps']:08d}.h5"
    ours = ringtrain.checkpoint.load(f"{run_dir}/{name}")
    theirs = ringtrain.checkpoint.load(f"{program}/{name}")
    for group in ("model", "optimizer", "schedule", "data", "rng"):
        assert sorted(ours[group]) == sorted(theirs[group]), group
        for key, value in ours[group].items():
            other = theirs[group][key]
            same = (np.array_equal(value.view(np.uint32), other.view(np.uint32))
                    if isinstance(value, np.ndarray) else value == other)
            assert same, f"/{group}/{key} differs"
    manifest = ringtrain.run.open(program).results
    assert manifest["final_test_accuracy"] == results["final_test_accuracy"]
    run = ringtrain.run.open(run_dir)
    assert run.results == results and run.checkpoints[-1][0] == OPTIONS["steps"]
    assert run.latest == run.checkpoints[-1][1]
    steps, losses = run.series("loss")
    assert steps and all(np.isfinite(losses))


WATCH_AND_INTERRUPT = """
import os, re, signal, sys, time
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    try:
        if re.search(r'"step":2[,}]', open(os.path.join(sys.argv[1], "metrics.jsonl")).read()):
            break
    except OSError:
        pass
    time.sleep(0.05)
os.kill(int(sys.argv[2]), signal.SIGINT)
"""


def test_ctrl_c_saves_then_raises_keyboard_interrupt(tmp_path_factory):
    # Every rank gets SIGINT (as hydra forwards Ctrl-C) once step 2 is logged; a test pause
    # after step 3 keeps the run from ending first. The ranks save at the next agreed step
    # (3 or 4) and ringtrain.train raises
    # KeyboardInterrupt; the checkpoint is there and the manifest names SIGINT.
    folder = str(tmp_path_factory.mktemp("ctrl_c")) if comm.rank == 0 else ""
    run_dir = gather_text(comm, folder + "/run" if folder else "")[0]
    never = gather_text(comm, folder + "/never" if folder else "")[0]

    # From outside, as a terminal sends it (train() holds the interpreter: no thread of ours
    # runs meanwhile): a watcher process signals this rank once step 2 is logged.
    watcher = subprocess.Popen([sys.executable, "-c", WATCH_AND_INTERRUPT, run_dir,
                                str(os.getpid())])
    options = dict(OPTIONS, steps=20, log_every=1, checkpoint_every=0)
    try:
        with pytest.raises(KeyboardInterrupt):
            ringtrain.train(**options, run_dir=run_dir, test_pause_step=3, test_pause_file=never)
    finally:
        watcher.wait(timeout=120)
    if comm.rank == 0:
        run = ringtrain.run.open(run_dir)
        assert run.results["stop_signal"] == "SIGINT", run.results
        assert run.checkpoints and run.checkpoints[-1][0] == run.results["steps"] >= 3


@pytest.mark.parametrize("options,message", [
    (dict(global_batch=0), "--global-batch 0"),
    (dict(model="resnet"), "unknown model 'resnet'"),
    (dict(frobnicate=3), "--frobnicate"),
])
def test_errors_are_the_programs_lines_on_every_rank(options, message):
    with pytest.raises(ringtrain.UsageError, match=message) as error:
        ringtrain.train(steps=1, quiet=True, **options)
    assert isinstance(error.value, ValueError)
