"""ringtrain.mpi: the communicator a course's student builds a ring from."""

import numpy as np
import pytest

import ringtrain
from ringcheck import agree

comm = ringtrain.mpi.world()
N, rank = comm.size, comm.rank
right, left = (rank + 1) % N, (rank - 1) % N


def test_sendrecv_around_the_ring_and_its_counters():
    comm.reset_counters()
    out = np.full(5, rank, np.int32)
    got = np.empty(5, np.int32)
    comm.sendrecv(out, right, got, left)
    agree(np.all(got == left), f"got {got}")
    agree(comm.counters() == {"bytes_sent": 20, "bytes_received": 20, "messages_sent": 1,
                              "messages_received": 1}, str(comm.counters()))


def test_isend_irecv_wait_and_test():
    out = np.arange(7, dtype=np.float64) + rank
    got = np.zeros(7, np.float64)
    receive = comm.irecv(got, left, tag=3)
    send = comm.isend(out, right, tag=3)
    send.wait()
    receive.wait()
    assert receive.test() and send.test()
    agree(np.array_equal(got, np.arange(7) + left), f"got {got}")


def test_send_recv_in_order_and_a_wrong_size_is_named():
    if N == 1:
        return
    if rank == 0:
        comm.send(np.arange(3, dtype=np.float32), 1)
        comm.send(np.arange(4, dtype=np.float32), 1, tag=9)
    elif rank == 1:
        got = np.empty(3, np.float32)
        comm.recv(got, 0)
        assert np.array_equal(got, np.arange(3))
        with pytest.raises(ValueError, match="16 bytes came from rank 0, but the array holds 20"):
            comm.recv(np.empty(5, np.float32), 0, tag=9)
    comm.barrier()


def test_peers_and_tags_are_checked_before_mpi():
    with pytest.raises(ValueError, match="not a rank"):
        comm.send(np.zeros(1), N)
    with pytest.raises(ValueError, match="tag -1"):
        comm.isend(np.zeros(1), 0, tag=-1)
    with pytest.raises(TypeError, match="non-contiguous"):
        comm.recv(np.zeros(8)[::2], 0)
    with pytest.raises(TypeError, match="NumPy array"):
        comm.send([1, 2], 0)


def test_allgather_stacks_every_ranks_array():
    got = comm.allgather(np.full((2, 3), rank, np.int16))
    assert got.shape == (N, 2, 3) and got.dtype == np.int16
    agree(all(np.all(got[r] == r) for r in range(N)), str(got))


def test_split_makes_communicators_of_a_color():
    half = comm.split(rank % 2)
    assert half.size == (N + 1 - rank % 2) // 2 and half.rank == rank // 2
    x = np.ones(10, np.float32)
    ringtrain.allreduce(x, half)
    agree(np.all(x == half.size), f"split allreduce gave {x[0]}")
