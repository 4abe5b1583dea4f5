#!/usr/bin/python3
"""Cross-check of ringtrain's optimizers against torch.optim (optional, not a CI test).

Feeds the same float32 parameters, gradients and learning rates to torch.optim.SGD /
torch.optim.AdamW and to ringtrain's optim_replay driver (built with the tests), and
reports the largest difference after each step. Exit code 1 if any configuration differs
by more than --tol (relative to max(1, |p|)).

  cmake --build build --target optim_replay
  /usr/bin/python3 bench/peers/torch_optim_check.py --replay build/tests/optim/optim_replay
"""
import argparse
import os
import subprocess
import sys

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_WAIT_POLICY", "passive")

import torch  # noqa: E402

# (label, optim_replay args: name momentum nesterov weight_decay beta1 beta2 eps)
CONFIGS = [
    ("sgd plain", ("sgd", 0.0, 0, 0.0, 0.9, 0.999, 1e-8)),
    ("sgd momentum", ("sgd", 0.9, 0, 0.0, 0.9, 0.999, 1e-8)),
    ("sgd nesterov", ("sgd", 0.9, 1, 0.0, 0.9, 0.999, 1e-8)),
    ("sgd momentum + wd", ("sgd", 0.9, 0, 5e-2, 0.9, 0.999, 1e-8)),
    ("sgd nesterov + wd", ("sgd", 0.8, 1, 1e-2, 0.9, 0.999, 1e-8)),
    ("adamw", ("adamw", 0.9, 0, 0.0, 0.9, 0.999, 1e-8)),
    ("adamw + wd", ("adamw", 0.9, 0, 1e-2, 0.9, 0.999, 1e-8)),
    ("adamw betas", ("adamw", 0.9, 0, 0.1, 0.8, 0.99, 1e-6)),
]


def torch_optimizer(params, cfg, lr):
    name, momentum, nesterov, wd, b1, b2, eps = cfg
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=momentum, nesterov=bool(nesterov),
                               weight_decay=wd)
    return torch.optim.AdamW(params, lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd)


def check(replay, label, cfg, n, steps, gen):
    p0 = torch.randn(n, generator=gen)
    grads = [torch.randn(n, generator=gen) * (0.1 * (s + 1)) for s in range(steps)]
    # lrs rounded to float32 so both sides see the same value
    lrs = [float(torch.tensor(0.01 * (1 + s % 3), dtype=torch.float32)) for s in range(steps)]

    lines = ["%d %d" % (n, steps), " ".join("%.9g" % x for x in p0.tolist())]
    for lr, g in zip(lrs, grads):
        lines.append("%.9g " % lr + " ".join("%.9g" % x for x in g.tolist()))
    out = subprocess.run([replay] + [str(a) for a in cfg], input="\n".join(lines) + "\n",
                         capture_output=True, text=True, check=True).stdout.split("\n")

    p = torch.nn.Parameter(p0.clone())
    opt = torch_optimizer([p], cfg, lrs[0])
    worst = 0.0
    for s in range(steps):
        for group in opt.param_groups:
            group["lr"] = lrs[s]
        p.grad = grads[s].clone()
        opt.step()
        ours = torch.tensor([float(x) for x in out[s].split()], dtype=torch.float32)
        ref = p.detach()
        err = ((ours - ref).abs() / ref.abs().clamp(min=1.0)).max().item()
        worst = max(worst, err)
    return worst


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--replay", default="build/tests/optim/optim_replay")
    ap.add_argument("--elements", type=int, default=1000)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--tol", type=float, default=1e-6)
    args = ap.parse_args()
    if not os.access(args.replay, os.X_OK):
        sys.exit("torch_optim_check: no optim_replay at %s; build the target optim_replay and "
                 "pass --replay PATH" % args.replay)
    gen = torch.Generator().manual_seed(0)
    failed = False
    print("torch %s, %d elements, %d steps, tolerance %g" %
          (torch.__version__, args.elements, args.steps, args.tol))
    for label, cfg in CONFIGS:
        worst = check(args.replay, label, cfg, args.elements, args.steps, gen)
        ok = worst <= args.tol
        failed = failed or not ok
        print("  %-20s max relative difference %.3g  %s" % (label, worst, "ok" if ok else "FAIL"))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
