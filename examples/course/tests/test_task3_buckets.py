"""Task 3 (20 points): buckets flushed during backward, last layer first. The flushes happen
at the right layers, in the plan's order, and the gradients are bitwise those of
ringtrain.allreduce on each planned bucket after backward."""

import numpy as np
import pytest

import ringtrain
from conftest import all_ranks, data, make_model


def planned(model, bucket_bytes):
    entries = model.parameter_entries()
    buckets = ringtrain.plan_buckets([e["size"] for e in entries], bucket_bytes)
    return entries, buckets


@pytest.mark.parametrize("bucket_bytes", [4, 256, 1024, 1 << 20])
def test_flushes_follow_backward_and_sum_like_the_ring(ddp, comm, spec_file, bucket_bytes):
    x, y = data(5, seed=20 + comm.rank)  # every rank its own samples
    model = make_model(spec_file)
    flushes = ddp.bucketed_backward(model, x, y, 0.2, bucket_bytes, comm)
    reference = make_model(spec_file)
    reference.loss_and_backward(x, y, 0.2)
    entries, buckets = planned(reference, bucket_bytes)
    grads = reference.gradient_buffer()
    for b in buckets:
        ringtrain.allreduce(grads[b["offset"]:b["offset"] + b["elements"]], comm)
    expected = [(entries[b["first_parameter"]]["layer"], i) for i, b in enumerate(buckets)]
    assert list(map(tuple, flushes)) == expected, \
        f"flushes {flushes}, expected (layer, bucket) {expected}: a bucket goes as soon as " \
        "the layer of its first parameter is done, in the plan's order"
    assert all_ranks(comm, np.array_equal(model.gradient_buffer().view(np.uint32),
                                          grads.view(np.uint32))), \
        "gradients differ from ringtrain.allreduce on each planned bucket"
