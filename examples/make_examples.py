#!/usr/bin/python3
"""Writes the samples that README's quick starts run, deterministically (the files are committed beside this
script; rerunning it rewrites the same data):

  house-prices/features.npy, labels.npy  512 houses x 6 features (area in m², rooms, age, distance to the centre,
                                         floor, garden) and their prices in thousands: every value fits fp16, but
                                         the squared error of an untrained model does not (halfmap diagnose:
                                         verdict `compute`, at the loss)
  attention-head/head.onnx, tokens.npy   one BERT-style attention head (d = 64, 1/√d applied after q·kᵀ) whose q
                                         and k weights are 80 times their initialisation, as a diverged checkpoint
                                         may hold them, and 8 sequences of 128 tokens of N(0, 1) features, one
                                         token per row (halfmap diagnose --model: verdict `compute`, at the head)

    python3 examples/make_examples.py [OUT_DIR]     (default: the folder of this script)

NumPy for the data; PyTorch (Debian's python3-torch, `bash tools/setup.sh --peers`) for the ONNX export."""
import math
import os
import sys

import numpy as np


def house_prices(out):
    rng = np.random.default_rng(20261207)
    n = 512
    area = rng.uniform(35.0, 260.0, n)                      # m²
    rooms = np.clip(np.round(area / 30.0 + rng.normal(0.0, 0.7, n)), 1, 9)
    age = rng.uniform(0.0, 90.0, n)                         # years
    distance = rng.uniform(0.3, 35.0, n)                    # km to the centre
    floor = np.floor(rng.uniform(0.0, 16.0, n))
    garden = (rng.uniform(0.0, 1.0, n) < 0.35).astype(np.float64)
    price = 2.1 * area + 9.0 * rooms - 0.8 * age - 4.5 * distance + 1.5 * floor + 25.0 * garden + 60.0
    price += rng.normal(0.0, 15.0, n)                       # thousands
    features = np.stack([area, rooms, age, distance, floor, garden], axis=1).astype(np.float32)
    os.makedirs(os.path.join(out, "house-prices"), exist_ok=True)
    np.save(os.path.join(out, "house-prices", "features.npy"), features)
    np.save(os.path.join(out, "house-prices", "labels.npy"), price.astype(np.float32))


def attention_head(out):
    import torch

    class Head(torch.nn.Module):
        def __init__(self, f, d):
            super().__init__()
            self.q, self.k, self.v = (torch.nn.Linear(f, d) for _ in range(3))
            self.d = d

        def forward(self, x):
            scores = self.q(x) @ self.k(x).transpose(-2, -1) / math.sqrt(self.d)  # BERT's placement
            return torch.softmax(scores, dim=-1) @ self.v(x)

    torch.manual_seed(0)
    model = torch.nn.Sequential(Head(64, 64), torch.nn.Linear(64, 10))
    with torch.no_grad():
        model[0].q.weight.mul_(80)
        model[0].k.weight.mul_(80)
    x = torch.randn(8, 128, 64)  # 8 sequences of 128 tokens
    folder = os.path.join(out, "attention-head")
    os.makedirs(folder, exist_ok=True)
    np.save(os.path.join(folder, "tokens.npy"), x.reshape(-1, 64).numpy())  # one token per row
    torch.onnx.export(model, x[:2], os.path.join(folder, "head.onnx"), opset_version=17, input_names=["x"],
                      output_names=["y"], dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    house_prices(out)
    attention_head(out)


if __name__ == "__main__":
    main()
