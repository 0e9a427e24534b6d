"""Train the digits demo CNN on scikit-learn's load_digits and export examples/digits/digits_cnn.onnx.

Architecture (input 1x1x8x8): conv3x3 16 -> relu -> conv3x3 32 -> relu -> maxpool 2 -> flatten
-> gemm 10. Needs torch (``pip install torch==2.13.0``); runs in ~10 s on 2 CPU cores.

    python examples/digits/train_digits.py [--epochs 40] [--out examples/digits/digits_cnn.onnx]
"""
from __future__ import annotations

import argparse
from pathlib import Path

import torch
from torch import nn

from compiler.zoo.digits import load_digits_split


def make_model() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(),
        nn.MaxPool2d(2), nn.Flatten(), nn.Linear(32 * 4 * 4, 10),
    )


def train(epochs: int = 40, seed: int = 0) -> tuple[nn.Module, float]:
    torch.manual_seed(seed)
    xtr, ytr, xte, yte = load_digits_split()
    model = make_model()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, epochs)
    xt, yt = torch.from_numpy(xtr), torch.from_numpy(ytr)
    gen = torch.Generator().manual_seed(seed)
    for _ in range(epochs):
        model.train()
        for idx in torch.randperm(len(xt), generator=gen).split(32):
            opt.zero_grad()
            nn.functional.cross_entropy(model(xt[idx]), yt[idx]).backward()
            opt.step()
        sched.step()
    model.eval()
    with torch.no_grad():
        acc = float((model(torch.from_numpy(xte)).argmax(1).numpy() == yte).mean())
    return model, acc


def export(model: nn.Module, out: Path) -> None:
    torch.onnx.export(model, torch.zeros(1, 1, 8, 8), str(out), dynamo=False, opset_version=13,
                      input_names=["input"], output_names=["logits"], dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=40)
    ap.add_argument("--out", type=Path, default=Path(__file__).with_name("digits_cnn.onnx"))
    args = ap.parse_args()
    torch.set_num_threads(2)
    model, acc = train(args.epochs)
    export(model, args.out)
    print(f"float test accuracy {acc:.4f}; wrote {args.out} ({args.out.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
