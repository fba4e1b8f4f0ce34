#!/usr/bin/env python3
"""The batch and multiclass perceptron epochs in PyTorch, for a side-by-side with
`rosenblatt bench` on the same machine: on the CPU here, on CUDA where there is one.

    python3 scripts/torch_batch.py --n 1000000 --d 64 --epochs 30            # binary
    python3 scripts/torch_batch.py --n 60000 --d 784 --classes 10            # multiclass argmax
    python3 scripts/torch_batch.py --storage u8 --device cuda --compile      # u8 X, widened

and next to it, on the same machine:

    rosenblatt bench --n 1000000 --d 64 --epochs 30 [--storage u8] [--classes 10]

The rules are rosenblatt's (the lecture notes'):
  binary:   s = X w + b; mistakes where y s <= 0; w += eta * X^T (y * mistake), b likewise.
  argmax:   S = X W^T + b; a row is a mistake when s_true - max_{k != true} s_k <= 0; the true
            class gets +x and the highest-scoring wrong class -x (one scatter per epoch).
Each epoch is two passes over X (X w, then X^T c), the natural tensor formulation. With
--storage u8/i8/f16, X is kept in that dtype on the device and widened to f32 inside the
epoch (what rosenblatt's kernels do on load); the data is quantized as `bench --storage` does.
--compile wraps the epoch in torch.compile (which may fuse the widening into the matmul).

Prints the median ms per epoch (warm-up excluded) and the GB/s that means for one read of X
in the storage used: the same units as `bench`. Timing on CUDA synchronises after each epoch.
"""
import argparse
import statistics
import time

import torch


def make_data(n, d, classes, noise, seed, storage, device):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=g)
    if classes <= 2:
        w_true = torch.randn(d, generator=g)
        y = torch.where(X @ w_true >= 0, 1.0, -1.0)
        flip = torch.rand(n, generator=g) < noise
        y[flip] = -y[flip]
    else:
        protos = torch.randn(classes, d, generator=g)
        y = torch.argmax(X @ protos.T, dim=1)
        flip = torch.rand(n, generator=g) < noise
        y[flip] = torch.randint(0, classes, (int(flip.sum()),), generator=g)
    top = X.abs().max().clamp_min(1e-30)
    if storage == "u8":
        X = (X / top * 127 + 128).round().clamp(0, 255).to(torch.uint8)
    elif storage == "i8":
        X = (X / top * 127).round().clamp(-127, 127).to(torch.int8)
    elif storage == "f16":
        X = X.to(torch.float16)
    return X.to(device), y.to(device)


def binary_epoch(X, y, w, b, eta):
    Xf = X.float()
    m = y * (Xf @ w + b)
    c = torch.where(m <= 0, y, torch.zeros_like(y))
    w += eta * (Xf.T @ c)
    b += eta * c.sum()
    return (c != 0).sum()


def argmax_epoch(X, y, W, b, eta):
    Xf = X.float()
    S = Xf @ W.T + b
    true = S.gather(1, y[:, None])[:, 0]
    wrong = S.scatter(1, y[:, None], float("-inf"))
    top, arg = wrong.max(dim=1)
    mistake = (true - top) <= 0
    c = mistake.float()
    k = W.shape[0]
    # Per class: +sum of its mistake rows, -sum of the mistake rows it out-scored.
    C = torch.zeros(X.shape[0], k, device=X.device)
    C.scatter_add_(1, y[:, None], c[:, None])
    C.scatter_add_(1, arg[:, None], -c[:, None])
    W += eta * (C.T @ Xf)
    b += eta * C.sum(dim=0)
    return mistake.sum()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--classes", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--noise", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--storage", choices=["f32", "f16", "u8", "i8"], default="f32")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--compile", action="store_true", help="wrap the epoch in torch.compile")
    a = ap.parse_args()

    dev = torch.device(a.device)
    X, y = make_data(a.n, a.d, a.classes, a.noise, a.seed, a.storage, dev)
    if a.classes <= 2:
        w = torch.zeros(a.d, device=dev)
        b = torch.zeros((), device=dev)
        epoch = binary_epoch
    else:
        w = torch.zeros(a.classes, a.d, device=dev)
        b = torch.zeros(a.classes, device=dev)
        epoch = argmax_epoch
    if a.compile:
        epoch = torch.compile(epoch)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)

    times, mistakes = [], []
    with torch.no_grad():
        for _ in range(a.epochs + 2):
            sync()
            t = time.perf_counter()
            m = epoch(X, y, w, b, 1.0)
            sync()
            times.append(time.perf_counter() - t)
            mistakes.append(int(m))
    ms = statistics.median(times[2:]) * 1e3
    nbytes = X.numel() * X.element_size()
    rule = "binary" if a.classes <= 2 else f"multiclass argmax, K = {a.classes}"
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else f"CPU ({torch.get_num_threads()} threads)"
    print(
        f"torch {torch.__version__} on {name}{' (compiled)' if a.compile else ''}: {rule}, "
        f"n = {a.n}, d = {a.d}, {a.storage}: {ms:.3f} ms/epoch median over {a.epochs} epochs, "
        f"{nbytes / 1e9 / ms * 1e3:.1f} GB/s for one read of X ({nbytes / 1e6:.1f} MB; "
        f"mistakes per epoch {min(mistakes[2:])}-{max(mistakes[2:])})"
    )


if __name__ == "__main__":
    main()
