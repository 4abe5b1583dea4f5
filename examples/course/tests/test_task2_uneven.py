"""Task 2 (20 points): the sample-weighted gradient of a global batch split unevenly
(local batches 2 and 6, and 3 more per extra rank): the same gradient as one process on
the whole batch, within float rounding."""

import numpy as np

import ringtrain
from conftest import all_ranks, data, make_model


def local_batches(N):
    return [2, 6] + [3] * (N - 2) if N > 1 else [8]


def test_gradient_equals_one_process_on_the_global_batch(ddp, comm, spec_file):
    sizes = local_batches(comm.size)
    B = sum(sizes)
    x, y = data(B, seed=7)
    begin = sum(sizes[:comm.rank])
    mine = slice(begin, begin + sizes[comm.rank])
    model = make_model(spec_file)
    loss = ddp.data_parallel_gradient(model, np.ascontiguousarray(x[mine]), y[mine], B, comm)
    one = make_model(spec_file)
    one_loss = one.loss_and_backward(x, y, 1.0 / B)
    got, want = model.gradient_buffer(), one.gradient_buffer()
    error = np.abs(got - want).max() / np.abs(want).max()
    assert all_ranks(comm, error < 1e-5), \
        f"local batches {sizes}: gradient off by {error:.2e} of its largest element " \
        "(each rank's loss must be scaled by 1/B, B the global batch)"
    assert all_ranks(comm, abs(loss - one_loss) <= 1e-4 * abs(one_loss)), \
        f"loss {loss} != the global batch's loss sum {one_loss}"


def test_a_rank_with_no_samples(ddp, comm, spec_file):
    x, y = data(4, seed=8)
    mine = slice(0, 4) if comm.rank == 0 else slice(0, 0)
    model = make_model(spec_file)
    ddp.data_parallel_gradient(model, np.ascontiguousarray(x[mine]), y[mine], 4, comm)
    one = make_model(spec_file)
    one.loss_and_backward(x, y, 1.0 / 4)
    assert all_ranks(comm, np.allclose(model.gradient_buffer(), one.gradient_buffer(),
                                       rtol=1e-5, atol=1e-7)), \
        "with every sample on rank 0 the gradient must be rank 0's, scaled by 1/4"
