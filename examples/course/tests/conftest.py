"""The graders run on every rank under mpiexec.mpich -n N (ringtrain's pytest plugin: the
same tests everywhere, rank 0 reports every rank's failures; pytest-mpi would need mpi4py,
which Debian builds on Open MPI).

The solution graded is ../handout/ddp.py, or the file that COURSE_SOLUTION names."""

import importlib.util
import os

import numpy as np
import pytest

import ringtrain

pytest_plugins = ["ringtrain.pytest_plugin"]

HERE = os.path.dirname(os.path.abspath(__file__))

# A small classifier for the gradient tasks: 6 features, 3 classes.
SPEC = """
[[layers]]
type = "linear"
out = 16
[[layers]]
type = "relu"
[[layers]]
type = "linear"
out = 12
[[layers]]
type = "relu"
[[layers]]
type = "linear"
out = "classes"
"""


@pytest.fixture(scope="session")
def ddp():
    path = os.environ.get("COURSE_SOLUTION") or os.path.join(HERE, "..", "handout", "ddp.py")
    spec = importlib.util.spec_from_file_location("ddp", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def comm():
    return ringtrain.mpi.world()


@pytest.fixture(scope="session")
def spec_file(tmp_path_factory, comm):
    path = tmp_path_factory.mktemp(f"spec-rank{comm.rank}") / "classifier.toml"
    path.write_text(SPEC)
    return str(path)


def make_model(spec_file, seed=1, **kwargs):
    return ringtrain.Model(spec_file, (6,), 3, seed=seed, **kwargs)


def data(n, seed=0):
    """n samples of the classifier's task, the same on every rank."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 6)).astype(np.float32)
    y = (x[:, 0] + x[:, 1] > 0).astype(np.int64) + (x[:, 2] > 1).astype(np.int64)
    return x, y


def all_ranks(comm, ok):
    """True on every rank if ok holds on every rank (so every rank asserts alike)."""
    return bool(comm.allgather(np.array([bool(ok)])).all())
