"""The ring from Python: sums against NumPy, bits against the C++ ring, counters against the
formula, and the refusal of arrays a binding would have to copy."""

import os

import numpy as np
import pytest

import ringtrain
from ringcheck import agree, rank_input, sizes

comm = ringtrain.mpi.world()
N, rank = comm.size, comm.rank


def all_inputs(M):
    return np.stack([rank_input(r, M) for r in range(N)]) if M else np.zeros((N, 0), np.float32)


def chunk_bounds(M, i):
    begin, size = ringtrain.chunk(M, N, i)
    return begin, begin + size


@pytest.mark.parametrize("M", sizes(N))
def test_allreduce_equals_the_sum_within_float_rounding(M):
    x = rank_input(rank, M)
    ringtrain.allreduce(x)
    terms = all_inputs(M).astype(np.float64)
    exact = terms.sum(axis=0)
    bound = max(N - 1, 0) * np.finfo(np.float32).eps * np.abs(terms).sum(axis=0) + np.abs(exact) * 2**-24
    agree(bool(np.all(np.abs(x - exact) <= bound)), f"M={M}: ring sum off by more than the bound")
    # every rank ends with the same bits
    gathered = comm.allgather(x)
    agree(all(np.array_equal(gathered[r].view(np.uint32), x.view(np.uint32)) for r in range(N)),
          "ranks hold different bits")


def counters_expected(M, which):
    """This rank's counters by the schedule (ring.hpp): reduce-scatter sends every chunk but
    its own and receives every chunk but its left neighbour's; all-gather sends every chunk
    but its right neighbour's and receives every chunk but its own."""
    size = [ringtrain.chunk(M, N, i)[1] for i in range(N)]
    left, right = (rank - 1) % N, (rank + 1) % N
    sent = {"reduce_scatter": M - size[rank], "all_gather": M - size[right]}
    received = {"reduce_scatter": M - size[left], "all_gather": M - size[rank]}
    phases = ["reduce_scatter", "all_gather"] if which == "allreduce" else [which]
    moves = N > 1 and M > 0
    return {"rounds": (N - 1) * len(phases) if moves else 0,
            "bytes_sent": 4 * sum(sent[p] for p in phases) if N > 1 else 0,
            "bytes_received": 4 * sum(received[p] for p in phases) if N > 1 else 0}


@pytest.mark.parametrize("which", ["allreduce", "reduce_scatter", "all_gather"])
@pytest.mark.parametrize("M", sizes(N))
def test_counters_follow_the_schedule_and_sum_to_2M_N_minus_1(M, which):
    x = rank_input(rank, M)
    got = getattr(ringtrain, which)(x)
    agree(got == counters_expected(M, which), f"M={M} {which}: {got} != {counters_expected(M, which)}")
    if which == "allreduce":
        total = comm.allgather(np.array([got["bytes_sent"]], np.int64)).sum()
        agree(int(total) == 2 * (N - 1) * 4 * M, f"total sent {total} != 2(N-1)M")
        if N > 1 and M % N == 0:  # the textbook figure, per rank
            agree(got["bytes_sent"] == 2 * 4 * M * (N - 1) // N, "bytes_sent != 2M(N-1)/N")


@pytest.mark.parametrize("M", sizes(N))
def test_reduce_scatter_leaves_the_allreduce_chunk_and_all_gather_copies_chunks(M):
    summed = rank_input(rank, M)
    ringtrain.allreduce(summed)
    x = rank_input(rank, M)
    ringtrain.reduce_scatter(x)
    b, e = chunk_bounds(M, rank)
    agree(np.array_equal(x[b:e].view(np.uint32), summed[b:e].view(np.uint32)),
          f"M={M}: own chunk differs from the allreduce's")
    y = rank_input(rank, M)
    ringtrain.all_gather(y)
    expected = np.concatenate([rank_input(r, M)[slice(*chunk_bounds(M, r))] for r in range(N)]) \
        if M else np.zeros(0, np.float32)
    agree(np.array_equal(y.view(np.uint32), expected.view(np.uint32)), f"M={M}: all_gather")


REFERENCE = os.environ.get("RINGTRAIN_RING_REFERENCE")


@pytest.mark.skipif(not REFERENCE, reason="RINGTRAIN_RING_REFERENCE: ring_reference's folder (ctest sets it)")
@pytest.mark.parametrize("which", ["allreduce", "reduce_scatter", "all_gather"])
@pytest.mark.parametrize("M", sizes(N))
def test_bitwise_equal_to_the_cpp_ring(M, which):
    x = rank_input(rank, M)
    getattr(ringtrain, which)(x)
    path = os.path.join(REFERENCE, f"N{N}-{which}-M{M}-r{rank}.bin")
    cpp = np.fromfile(path, dtype=np.float32)
    agree(cpp.size == M and np.array_equal(x.view(np.uint32), cpp.view(np.uint32)),
          f"{which} M={M}: differs from {path}")


def test_mpi_allreduce_is_the_peer():
    x = rank_input(rank, 1000)
    got = ringtrain.mpi_allreduce(x)
    exact = all_inputs(1000).astype(np.float64).sum(axis=0)
    agree(np.allclose(x, exact, rtol=1e-5, atol=1e-4) and got["bytes_sent"] == 0, "mpi_allreduce")


def test_allreduce_exact_is_order_free():
    M = 4097
    x = rank_input(rank, M)
    rotated = rank_input((rank + 1) % N, M)  # the same terms on other ranks
    assert ringtrain.allreduce_exact(x) and ringtrain.allreduce_exact(rotated)
    agree(np.array_equal(x.view(np.uint32), rotated.view(np.uint32)), "exact sum depends on placement")
    exact = all_inputs(M).astype(np.float64).sum(axis=0)
    agree(bool(np.all(np.abs(x - exact) <= np.abs(exact) * 2**-23 + 2**-30)), "exact sum inexact")


@pytest.mark.parametrize("bad,what", [
    (lambda: np.arange(8, dtype=np.float64), "float64"),
    (lambda: np.arange(16, dtype=np.float32)[::2], "non-contiguous"),
    (lambda: np.asfortranarray(np.ones((3, 4), np.float32)), "non-contiguous"),
    (lambda: np.arange(8, dtype=np.float32).astype(">f4"), "float32"),
    (lambda: [1.0, 2.0], "NumPy array"),
])
def test_arrays_a_copy_would_hide_are_refused(bad, what):
    x = bad()
    before = np.array(x, copy=True)
    with pytest.raises(TypeError, match=what):
        ringtrain.allreduce(x)
    assert np.array_equal(np.asarray(x), before)


def test_a_read_only_array_is_refused():
    x = np.ones(8, np.float32)
    x.flags.writeable = False
    with pytest.raises(TypeError, match="read-only"):
        ringtrain.allreduce(x)


def test_the_binding_adds_no_copy_the_result_is_in_the_callers_memory():
    base = np.zeros(64, np.float32)
    view = base[16:48]  # contiguous view into a larger array
    view[:] = rank + 1
    ringtrain.allreduce(view)
    agree(np.all(base[16:48] == N * (N + 1) / 2) and not base[:16].any() and not base[48:].any(),
          "the result is not in the caller's memory")


def test_pure_functions():
    buckets = ringtrain.plan_buckets([30, 50, 250, 40, 70], 400)  # buckets.hpp's example
    assert [(b["offset"], b["elements"]) for b in buckets] == [(370, 70), (330, 40), (80, 250), (0, 80)]
    assert ringtrain.ring_cost(4, 1 << 20, 1e-5, 1e9) == pytest.approx(6e-5 + 1.5 * (1 << 20) / 1e9)
    plan = ringtrain.young_daly(2.0, 3600.0, 0.1)
    assert plan["tau_s"] == pytest.approx((2 * 2.0 * 3600.0) ** 0.5)
    assert ringtrain.chunk(10, 4, 2) == (6, 2)
    perm = ringtrain.epoch_permutation(7, 0, 100)
    assert sorted(perm.tolist()) == list(range(100)) and perm.tolist() != list(range(100))
