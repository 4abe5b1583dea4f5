"""Model from Python: a gradient check, and the gradient of `ringtrain train`'s first step,
bit for bit (the optimizer's momentum after one SGD step is that gradient)."""

import os
import subprocess

import numpy as np
import pytest

import ringtrain
from ringcheck import agree, clean_env, ringtrain_program

comm = ringtrain.mpi.world()

SPEC = """
[[layers]]
type = "linear"
out = 6
[[layers]]
type = "relu"
[[layers]]
type = "linear"
out = "classes"
"""


@pytest.fixture(scope="module")
def spec(tmp_path_factory):
    path = tmp_path_factory.mktemp(f"spec-r{comm.rank}") / "tiny.toml"
    path.write_text(SPEC)
    return str(path)


def test_gradients_match_finite_differences(spec):
    model = ringtrain.Model(spec, (5,), 3, seed=4)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((7, 5)).astype(np.float32)
    y = rng.integers(0, 3, 7)
    scale = 1.0 / 7
    model.loss_and_backward(x, y, scale)
    grads = {k: v.copy() for k, v in model.gradients().items()}
    params = model.parameters()
    eps = 1e-2
    worst = 0.0
    for name, p in params.items():
        flat = p.reshape(-1)
        for i in range(0, flat.size, max(1, flat.size // 7)):
            old = flat[i]
            flat[i] = old + eps
            up = model.loss_and_backward(x, y, scale)
            flat[i] = old - eps
            down = model.loss_and_backward(x, y, scale)
            flat[i] = old
            numeric = scale * (up - down) / (2 * eps)
            worst = max(worst, abs(numeric - grads[name].reshape(-1)[i]) / max(1e-3, abs(numeric)))
    assert worst < 2e-2, f"largest relative error {worst}"


def test_views_share_the_models_memory_and_load_state_copies(spec):
    model = ringtrain.Model(spec, (5,), 3, seed=4)
    names = [e["name"] for e in model.parameter_entries()]
    assert names == ["layers.0.linear/weight", "layers.0.linear/bias",
                     "layers.2.linear/weight", "layers.2.linear/bias"]
    flat = model.parameter_buffer()
    model.parameters()["layers.0.linear/bias"][:] = 42.0
    entry = model.parameter_entries()[1]
    assert np.all(flat[entry["offset"]:entry["offset"] + entry["size"]] == 42.0)
    other = ringtrain.Model(spec, (5,), 3, seed=5)
    other.load_state(model.parameters())
    assert np.array_equal(other.parameter_buffer(), model.parameter_buffer())
    with pytest.raises(KeyError, match="missing"):
        other.load_state({})
    with pytest.raises(ValueError, match="shape"):
        other.load_state({**model.parameters(), "layers.0.linear/bias": np.zeros(5, np.float32)})
    with pytest.raises(TypeError, match="float32"):
        model.forward(np.zeros((2, 5)))
    with pytest.raises(ValueError, match="shape"):
        model.forward(np.zeros((2, 4), np.float32))


def test_backward_hook_runs_last_layer_first(spec):
    model = ringtrain.Model(spec, (5,), 3)
    order = []
    model.loss_and_backward(np.ones((2, 5), np.float32), np.array([0, 2]), 0.5,
                            on_layer_done=order.append)
    assert order == [2, 1, 0]


def test_gradients_equal_ringtrain_trains_first_step(spec, tmp_path):
    """N = 1: `ringtrain train --steps 1` with SGD, momentum 0.9 and no weight decay keeps
    buf = 0.9 * 0 + g = g, the step's gradient, in its checkpoint."""
    if comm.rank != 0:  # one process is the whole point; the other ranks wait
        comm.barrier()
        return
    rng = np.random.default_rng(3)
    data = tmp_path / "data"
    data.mkdir()
    for split, n in (("train", 40), ("test", 10)):
        np.save(data / f"{split}_x.npy", rng.standard_normal((n, 5)).astype(np.float32))
        np.save(data / f"{split}_y.npy", rng.integers(0, 3, n).astype(np.int64))
    seed, batch = 11, 16
    flags = ["--data", str(data), "--model", spec, "--global-batch", str(batch), "--steps", "1",
             "--optimizer", "sgd", "--momentum", "0.9", "--weight-decay", "0", "--seed", str(seed),
             "--blas-threads", "1", "--no-eval", "--quiet", "--checkpoint-every", "1",
             "--run-dir", str(tmp_path / "run")]
    done = subprocess.run([ringtrain_program(), "train", *flags], env=clean_env(),
                          capture_output=True, text=True, timeout=120)
    comm.barrier()
    assert done.returncode == 0, done.stderr
    state = ringtrain.checkpoint.load(str(tmp_path / "run/checkpoints/step-00000001.h5"))

    ringtrain.set_blas(1)  # as --blas-threads 1
    model = ringtrain.Model(spec, (5,), 3, seed=seed)
    x = np.load(data / "train_x.npy")
    y = np.load(data / "train_y.npy")
    order = ringtrain.epoch_permutation(seed, 0, len(x))[:batch]
    xb = np.ascontiguousarray(x[order])
    model.loss_and_backward(xb, y[order], 1.0 / batch, sample_ids=order)
    momentum = {k[len("momentum/"):]: v for k, v in state["optimizer"].items() if k.startswith("momentum/")}
    assert sorted(momentum) == sorted(model.gradients()), sorted(state["optimizer"])
    for name, g in model.gradients().items():
        assert np.array_equal(g.view(np.uint32), momentum[name].view(np.uint32)), name


TORCH_MSE = """
import sys
import numpy as np
import torch
d = np.load(sys.argv[1])
w1, b1, w2, b2 = (torch.tensor(d[k], requires_grad=True) for k in ("w1", "b1", "w2", "b2"))
h = torch.relu(torch.from_numpy(d["x"]) @ w1.T + b1)  # weights (out, in), as torch.nn.Linear
loss = torch.nn.MSELoss()(h @ w2.T + b2, torch.from_numpy(d["y"]))
loss.backward()
np.savez(sys.argv[2], loss=loss.item(), w1=w1.grad.numpy(), b1=b1.grad.numpy(),
         w2=w2.grad.numpy(), b2=b2.grad.numpy())
"""


def test_squared_error_is_torch_mse_loss(spec, tmp_path):
    """Regression: with scale 1/n the batch's loss is torch.nn.MSELoss()'s, and so is every
    gradient (the same weights, the same batch, k = 3 outputs). PyTorch runs in a child
    process: it must not share this process's MPI library."""
    if comm.rank != 0:
        comm.barrier()
        return
    probe = subprocess.run(["/usr/bin/python3", "-c", "import torch"], capture_output=True)
    if probe.returncode != 0:
        comm.barrier()
        pytest.skip("no PyTorch for /usr/bin/python3")
    model = ringtrain.Model(spec, (5,), 3, seed=8)
    rng = np.random.default_rng(5)
    x = rng.standard_normal((9, 5)).astype(np.float32)
    y = rng.standard_normal((9, 3)).astype(np.float32)
    loss_sum = model.loss_and_backward(x, y, 1.0 / 9)
    p = model.parameters()
    names = sorted(p)  # layers.0 (linear 5 -> 6) before layers.2 (linear 6 -> 3)
    weights = [n for n in names if n.endswith("weight")]
    biases = [n for n in names if n.endswith("bias")]
    inputs = {"x": x, "y": y, "w1": p[weights[0]], "b1": p[biases[0]], "w2": p[weights[1]],
              "b2": p[biases[1]]}
    np.savez(tmp_path / "in.npz", **inputs)
    done = subprocess.run(["/usr/bin/python3", "-c", TORCH_MSE, str(tmp_path / "in.npz"),
                           str(tmp_path / "out.npz")], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "OMP_NUM_THREADS": "1"})
    comm.barrier()
    assert done.returncode == 0, done.stderr
    torch_out = np.load(tmp_path / "out.npz")
    assert loss_sum / 9 == pytest.approx(float(torch_out["loss"]), rel=1e-6)
    g = model.gradients()
    for mine, theirs in ((weights[0], "w1"), (biases[0], "b1"), (weights[1], "w2"),
                         (biases[1], "b2")):
        assert np.allclose(g[mine], torch_out[theirs], rtol=1e-5, atol=1e-7), mine
