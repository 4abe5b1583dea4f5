"""Fixture of check_plugin.py (not a test of the suite): one test passes everywhere, one
fails on the last rank only, one (when RINGTRAIN_FIXTURE_HANG is set) leaves rank 0 waiting
for a message nobody sends."""

import os

import numpy as np
import pytest

import ringtrain

comm = ringtrain.mpi.world()


def test_passes_everywhere():
    assert comm.size >= 1


def test_fails_on_the_last_rank_only():
    assert comm.rank != comm.size - 1, f"the last rank ({comm.rank}) disagrees"


@pytest.mark.skipif(not os.environ.get("RINGTRAIN_FIXTURE_HANG"), reason="the hang case only")
def test_hangs_on_rank_0():
    if comm.rank == 0:
        comm.recv(np.zeros(1), comm.size - 1, tag=77)
