#!/usr/bin/env python3
"""PyTorch's ResNet-50 training step, the peer of `crest bench train --model resnet50` and of
`crest train --config configs/resnet50-demo.yaml` at 224 x 224, batch 32, 10 classes:
torchvision's resnet50, SGD with momentum and weight decay, cross-entropy with label smoothing
0.1, random inputs (no data loading), 2 threads; one warm-up step, then the best of --steps, one
JSON line (samples/s, peak RSS). --cl: channels-last memory format; --bf16: torch.autocast
(bfloat16) around forward and loss; --compile: the model through torch.compile (Inductor's
default mode, forward and backward graphs; two warm-up steps, the first compiles: needs a C++
compiler). The flags are scripts/bench_peers.py's for every torch peer.

  python3 scripts/bench_resnet50_torch.py [--batch 32] [--steps 3] [--threads 2] [--cl] [--bf16] [--compile]
"""
import argparse

import torch
import torchvision

from peer_steps import best_step_seconds, print_train_line


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--height", type=int, default=224)
    ap.add_argument("--width", type=int, default=224)
    ap.add_argument("--cl", action="store_true", help="channels-last memory format")
    ap.add_argument("--bf16", action="store_true", help="autocast bf16 around forward and loss")
    ap.add_argument("--compile", action="store_true", help="torch.compile the model")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    m = torchvision.models.resnet50(num_classes=10)
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-5)
    loss = torch.nn.CrossEntropyLoss(label_smoothing=0.1)
    x = torch.randn(a.batch, 3, a.height, a.width)
    y = torch.randint(0, 10, (a.batch,))
    if a.cl:
        m = m.to(memory_format=torch.channels_last)
        x = x.to(memory_format=torch.channels_last)
    net = torch.compile(m) if a.compile else m

    def step():
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.bf16):
            value = loss(net(x), y)
        value.backward()
        opt.step()

    print_train_line({"bench": "train", "peer": "torch", "model": "resnet50",
                      "torch": torch.__version__, "channels_last": a.cl, "bf16": a.bf16,
                      "compile": a.compile, "threads": a.threads},
                     a.batch, best_step_seconds(step, 2 if a.compile else 1, a.steps))


if __name__ == "__main__":
    main()
