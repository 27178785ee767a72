#!/usr/bin/env python3
"""PyTorch's ResNet-50 training step, the peer of `crest train --config configs/resnet50-demo.yaml`
at 224 x 224, batch 32, 10 classes: torchvision's resnet50, SGD with momentum and weight decay,
cross-entropy with label smoothing 0.1, random inputs (no data loading), 2 threads; one warm-up
step, then the best of 3 steps as samples/s. `cl` as the argument: channels-last memory format.

  python3 scripts/bench_resnet50_torch.py [cl]
"""
import time, torch, torchvision
torch.set_num_threads(2); torch.manual_seed(0)
m = torchvision.models.resnet50(num_classes=10)
opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-5)
loss = torch.nn.CrossEntropyLoss(label_smoothing=0.1)
x = torch.randn(32, 3, 224, 224); y = torch.randint(0, 10, (32,))
cl = __import__("sys").argv[1:] == ["cl"]
if cl: m = m.to(memory_format=torch.channels_last); x = x.to(memory_format=torch.channels_last)
def step():
    opt.zero_grad(); l = loss(m(x), y); l.backward(); opt.step()
step()
times = []
for _ in range(3):
    t = time.perf_counter(); step(); times.append(time.perf_counter() - t)
print({"torch": torch.__version__, "channels_last": cl, "best_samples_per_s": 32 / min(times)})
