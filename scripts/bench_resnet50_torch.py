#!/usr/bin/env python3
"""PyTorch's ResNet-50 training step, the peer of `crest train --config configs/resnet50-demo.yaml`
at 224 x 224, batch 32, 10 classes: torchvision's resnet50, SGD with momentum and weight decay,
cross-entropy with label smoothing 0.1, random inputs (no data loading), 2 threads; one warm-up
step, then the best of 3 steps, one JSON line (samples/s, peak RSS). Arguments: `cl`,
channels-last memory format; `bf16`, torch.autocast(bfloat16) around forward and loss.

  python3 scripts/bench_resnet50_torch.py [cl] [bf16]
"""
import sys

import torch
import torchvision

from peer_steps import best_step_seconds, print_train_line

torch.set_num_threads(2)
torch.manual_seed(0)
m = torchvision.models.resnet50(num_classes=10)
opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-5)
loss = torch.nn.CrossEntropyLoss(label_smoothing=0.1)
x = torch.randn(32, 3, 224, 224)
y = torch.randint(0, 10, (32,))
words = set(sys.argv[1:])
if not words <= {"cl", "bf16"}:
    sys.exit(f"bench_resnet50_torch: unknown arguments {sorted(words - {'cl', 'bf16'})}")
cl, bf16 = "cl" in words, "bf16" in words
if cl:
    m = m.to(memory_format=torch.channels_last)
    x = x.to(memory_format=torch.channels_last)


def step():
    opt.zero_grad()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        value = loss(m(x), y)
    value.backward()
    opt.step()


print_train_line({"bench": "train", "peer": "torch", "model": "resnet50",
                  "torch": torch.__version__, "channels_last": cl, "bf16": bf16, "threads": 2},
                 32, best_step_seconds(step, 1, 3))
