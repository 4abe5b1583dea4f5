"""Task 1 (20 points): the ring allreduce from point-to-point messages.
Bitwise equal to ringtrain.allreduce (the order of additions is the ring's), and 2M(N-1)/N
bytes sent per rank."""

import numpy as np
import pytest

import ringtrain
from conftest import all_ranks


def rank_data(comm, M):
    rng = np.random.default_rng(100 + comm.rank)
    return (rng.standard_normal(M) * 2.0 ** rng.integers(-4, 5, M)).astype(np.float32)


@pytest.mark.parametrize("M", [1, 2, 3, 4, 7, 1000, 4099])
def test_same_bits_as_ringtrain_allreduce(ddp, comm, M):
    x = rank_data(comm, M)
    expected = x.copy()
    ringtrain.allreduce(expected, comm)
    ddp.ring_allreduce(x, comm)
    assert all_ranks(comm, np.array_equal(x.view(np.uint32), expected.view(np.uint32))), \
        f"M={M}: the sums differ from ringtrain.allreduce's (order of additions?)"


@pytest.mark.parametrize("M", [6, 1200])
def test_bytes_sent_are_the_rings(ddp, comm, M):
    x = rank_data(comm, M)
    comm.reset_counters()
    ddp.ring_allreduce(x, comm)
    sent = comm.counters()["bytes_sent"]
    expected = 2 * 4 * M * (comm.size - 1) // comm.size
    assert all_ranks(comm, sent == expected), \
        f"rank {comm.rank} sent {sent} bytes through comm, the ring sends 2M(N-1)/N = {expected}"


def test_empty_array(ddp, comm):
    x = np.zeros(0, np.float32)
    ddp.ring_allreduce(x, comm)
    assert x.size == 0
