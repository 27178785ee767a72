#!/usr/bin/env python3
"""The PyTorch peer's Tiramisu training step (tests/fixtures/tiramisu_torch.py), beside
`crest bench train --model tiramisu`: the Gordon Bell network (blocks 2 2 2 4 5, growth 32, 5x5
kernels, dropout 0.2) on random 16-channel fields with the reference's weighted, scaled loss,
Adam, no data loading. Warm-up steps, then the best of --steps as samples/s, one JSON line.

  python3 scripts/bench_tiramisu_torch.py [--height 96] [--width 144] [--batch 2] [--steps 3]
      [--threads 2] [--channels-last] [--compile] [--bf16]

--bf16 runs forward and loss under torch.autocast("cpu", bfloat16) (float32 weights and Adam),
the peer of `crest bench train --precision bf16`.
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "fixtures"))
from tiramisu_torch import Tiramisu, reference_class_weights, weighted_loss  # noqa: E402
from peer_steps import best_step_seconds, print_train_line  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--height", type=int, default=96)
    ap.add_argument("--width", type=int, default=144)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--channels-last", action="store_true")
    ap.add_argument("--compile", action="store_true", help="torch.compile the model (torch >= 2)")
    ap.add_argument("--bf16", action="store_true", help="autocast forward and loss to bfloat16")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    net = Tiramisu()
    x = torch.rand(a.batch, 16, a.height, a.width) * 2
    # Mostly background, as the climate labels (the crest bench's random labels likewise).
    y = torch.bucketize(torch.rand(a.batch, a.height, a.width), torch.tensor([0.9, 0.92]))
    if a.channels_last:
        net = net.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    model = torch.compile(net) if a.compile else net
    adam = torch.optim.Adam(net.parameters(), lr=1e-4, eps=1e-8)
    weights = reference_class_weights()

    def step():
        adam.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.bf16):
            loss = weighted_loss(model(x), y, weights)
        loss.backward()
        adam.step()

    best = best_step_seconds(step, a.warmup, a.steps)
    print_train_line({"bench": "train", "peer": "torch", "model": "tiramisu",
                      "torch": torch.__version__, "channels_last": a.channels_last,
                      "compile": a.compile, "bf16": a.bf16, "height": a.height,
                      "width": a.width,
                      "threads": a.threads}, a.batch, best)


if __name__ == "__main__":
    main()
