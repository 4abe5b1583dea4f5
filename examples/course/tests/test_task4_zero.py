"""Task 4 (20 points): ZeRO-1. Three sharded SGD-with-momentum steps equal three plain
ones (allreduce, then the whole update on every rank), and the traffic equals an
allreduce's."""

import numpy as np

import ringtrain
from conftest import all_ranks, data, make_model


def test_sharded_steps_equal_plain_steps(ddp, comm, spec_file):
    sharded, plain = make_model(spec_file), make_model(spec_file)
    M = sharded.parameter_buffer().size
    begin, size = ringtrain.chunk(M, comm.size, comm.rank)
    shard = np.zeros(size, np.float32)
    full = np.zeros(M, np.float32)
    lr, mu = 0.1, 0.9
    for step in range(3):
        x, y = data(6, seed=40 + 10 * step + comm.rank)
        sharded.loss_and_backward(x, y, 1.0 / (6 * comm.size))
        sent = ddp.zero1_sgd_step(sharded, shard, lr, mu, comm)
        plain.loss_and_backward(x, y, 1.0 / (6 * comm.size))
        g = plain.gradient_buffer()
        expected_sent = ringtrain.allreduce(g, comm)["bytes_sent"]
        full *= np.float32(mu)
        full += g
        plain.parameter_buffer()[:] -= np.float32(lr) * full
        assert all_ranks(comm, sent == expected_sent), \
            f"step {step}: sent {sent} bytes, reduce-scatter + all-gather send {expected_sent}"
    got, want = sharded.parameter_buffer(), plain.parameter_buffer()
    assert all_ranks(comm, np.allclose(got, want, rtol=1e-6, atol=1e-7)), \
        f"parameters off by up to {np.abs(got - want).max():.2e} after 3 steps"
    assert all_ranks(comm, np.allclose(shard, full[begin:begin + size], rtol=1e-6, atol=1e-7)), \
        "the momentum shard is not the plain momentum's chunk"
