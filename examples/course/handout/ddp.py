"""Assignment: data-parallel training from the ring up.

You write the five pieces of a synchronous data-parallel step that a framework like ringtrain
(or PyTorch's DDP) hides, in plain Python with NumPy and ringtrain's communicator, and the
graders in ../tests/ compare each with ringtrain's own implementation, on 2 and 3 ranks:

    mpiexec.mpich -n 2 /usr/bin/python3 -m pytest tests/      (from examples/course/)

Task 1  ring_allreduce            a ring allreduce from point-to-point messages only
Task 2  data_parallel_gradient    the gradient of one global batch split unevenly over ranks
Task 3  bucketed_backward         gradient buckets reduced during backward, last layer first
Task 4  zero1_sgd_step            SGD with momentum, its state sharded over ranks (ZeRO-1)
Task 5  save_state / load_state   everything a checkpoint needs to resume bit for bit

What you may use: NumPy; comm.sendrecv / send / recv / isend / irecv (comm =
ringtrain.mpi.world()); ringtrain.chunk, ringtrain.plan_buckets; ringtrain.Model's methods;
ringtrain.allreduce, reduce_scatter and all_gather from task 2 on. Every array the ring works
on is a C-contiguous float32 NumPy array, changed in place.
"""

import numpy as np

import ringtrain


# --- Task 1 -------------------------------------------------------------------------------
def ring_allreduce(x, comm):
    """x <- the sum over ranks of x, in place, by the ring: reduce-scatter, then all-gather.

    Cut x's M elements into N chunks with ringtrain.chunk(M, N, i) -> (begin, size). Data
    flows right: rank r sends to (r + 1) % N and receives from (r - 1) % N.
      reduce-scatter, step t = 0 .. N-2: send chunk (r - t - 1) % N, receive chunk
        (r - t - 2) % N and add it to yours (x[chunk] += received). Afterwards chunk r holds
        the sum of every rank's chunk r.
      all-gather, step t = 0 .. N-2: send chunk (r - t) % N, receive chunk (r - t - 1) % N
        and overwrite yours with it.
    Use only comm's point-to-point calls (comm.sendrecv does a step without deadlock). The
    grader wants the same bits as ringtrain.allreduce (this order of additions) and each
    rank to send 2 M (N-1) / N floats' worth of bytes.
    """
    raise NotImplementedError(
        "task 1 (ring_allreduce) is not implemented: write the N-1 reduce-scatter steps "
        "(send, receive, add) and the N-1 all-gather steps (send, receive, copy) with "
        "comm.sendrecv")


# --- Task 2 -------------------------------------------------------------------------------
def data_parallel_gradient(model, x, y, global_batch, comm):
    """One data-parallel gradient: this rank holds x, y, its local batch (its size may differ
    from the other ranks', and may be 0); the ranks' local batches make one global batch of
    global_batch samples.

    Run model.loss_and_backward(x, y, scale) with the scale that makes the ring's SUM of the
    ranks' gradients the gradient of the MEAN loss over the global batch, then sum
    model.gradient_buffer() over ranks with ringtrain.allreduce. With local batches of 2 and
    6 samples, the result must equal one process's gradient on all 8 samples; the mean of
    the two ranks' mean gradients does not. Return the loss summed over all ranks' samples
    (a float, the same on every rank).
    """
    raise NotImplementedError(
        "task 2 (data_parallel_gradient) is not implemented: scale the local loss so that "
        "the sum over ranks is the mean over the global batch, backward, then allreduce")


# --- Task 3 -------------------------------------------------------------------------------
def bucketed_backward(model, x, y, scale, bucket_bytes, comm):
    """Backward with gradient buckets that are reduced as soon as they are complete.

    Plan the buckets with ringtrain.plan_buckets([e["size"] for e in
    model.parameter_entries()], bucket_bytes): a list in backward order, each a dict with
    offset, elements (a slice of model.gradient_buffer()) and first_parameter (the
    parameter, index into parameter_entries(), that backward writes last). Pass
    model.loss_and_backward(x, y, scale, on_layer_done=hook): hook(layer) runs after
    layer's backward; then flush, in plan order, every bucket not yet flushed whose
    first_parameter belongs to a layer >= the layer just done, with ringtrain.allreduce on
    its slice. Return the flushes in order as (layer, bucket index) pairs: the layer whose
    hook flushed bucket b.
    """
    raise NotImplementedError(
        "task 3 (bucketed_backward) is not implemented: plan the buckets, and flush each "
        "one from the on_layer_done hook as soon as its first parameter's layer is done")


# --- Task 4 -------------------------------------------------------------------------------
def zero1_sgd_step(model, momentum_shard, lr, mu, comm):
    """One step of SGD with momentum (buf = mu * buf + g; p -= lr * buf) whose momentum is
    sharded: model.gradient_buffer() holds this rank's local gradient (already scaled), and
    momentum_shard holds the momentum of this rank's chunk only (chunk comm.rank of the flat
    buffer, ringtrain.chunk(M, N, rank)).

    1. ringtrain.reduce_scatter the gradient buffer: your chunk then holds the summed
       gradient; 2. update your chunk of model.parameter_buffer() and momentum_shard;
    3. ringtrain.all_gather the parameter buffer so every rank has every chunk. Return the
    bytes this rank sent in the two collectives (their counters' bytes_sent).
    """
    raise NotImplementedError(
        "task 4 (zero1_sgd_step) is not implemented: reduce-scatter the gradients, update "
        "your chunk of the parameters and momentum, all-gather the parameters")


# --- Task 5 -------------------------------------------------------------------------------
class TinyRun:
    """Given (not a task): a small data-parallel training run on a Model. Steps draw samples
    in the order ringtrain.epoch_permutation(seed, epoch, n) gives, each rank taking its
    near-equal slice of the global batch; SGD with momentum, a learning rate halved every 4
    steps; dropout (if the model has it) keyed by model.seed and the sample ids."""

    def __init__(self, model, x, y, global_batch, seed, lr, mu, comm):
        self.model, self.x, self.y, self.comm = model, x, y, comm
        self.global_batch, self.seed, self.lr0, self.mu = global_batch, seed, lr, mu
        self.momentum = np.zeros_like(model.parameter_buffer())
        self.step = 0      # optimizer steps done
        self.epoch = 0     # epoch of the next sample
        self.position = 0  # samples of that epoch already used

    def learning_rate(self):
        return self.lr0 * 0.5 ** (self.step // 4)

    def next_batch(self):
        order = ringtrain.epoch_permutation(self.seed, self.epoch, len(self.x))
        batch = order[self.position:self.position + self.global_batch]
        self.position += len(batch)
        if self.position == len(self.x):
            self.epoch, self.position = self.epoch + 1, 0
        N, r = self.comm.size, self.comm.rank
        begin, size = ringtrain.chunk(len(batch), N, r)
        return batch[begin:begin + size], len(batch)

    def train(self, steps):
        for _ in range(steps):
            ids, B = self.next_batch()
            xb = np.ascontiguousarray(self.x[ids])
            self.model.loss_and_backward(xb, self.y[ids], 1.0 / B, sample_ids=ids)
            grads = self.model.gradient_buffer()
            ringtrain.allreduce(grads, self.comm)
            self.momentum *= np.float32(self.mu)
            self.momentum += grads
            params = self.model.parameter_buffer()
            params -= np.float32(self.learning_rate()) * self.momentum
            self.step += 1


def save_state(run):
    """A checkpoint of `run` (a TinyRun) as a dict: everything load_state needs so that a
    fresh run (another Model, another TinyRun) continues exactly where this one stands, to
    the bit. It must not change when `run` trains on afterwards."""
    raise NotImplementedError(
        "task 5 (save_state) is not implemented: copy the parameters, the optimizer's "
        "momentum, the learning-rate schedule's step, the data position (epoch, position) "
        "and the randomness' key")


def load_state(run, state):
    """Puts a state from save_state into `run` (a fresh TinyRun of the same shapes)."""
    raise NotImplementedError(
        "task 5 (load_state) is not implemented: put every part of the state back into the "
        "run and its model")
