"""crest's Python module with PyTorch: arrays through DLPack without copies in both directions,
and state_dicts that load with strict=True into the reference networks and predict the same.

- CosmoFlow: the reference network (conv1..conv5, fc1..fc3, the channels-last flatten of
  docs/weights.md) as a torch module; crest -> torch and torch -> crest weights, then the same
  prediction on the same batch.
- DeepCAM: the peer network (../shared/peers/deepcam_torch.py, the reference's 529 state_dict
  entries, int64 num_batches_tracked included) both ways, then the same prediction.

Needs PyTorch and numpy for /usr/bin/python3 (Debian's python3-torch) and the peer script beside
the checkout; without either it exits 77 (CTest: skipped). The module comes from PYTHONPATH.

Run: PYTHONPATH=build/python /usr/bin/python3 tests/python/torch_interop.py
"""
import importlib.util
import os
import sys

SKIP = 77
SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(SOURCE, "tests", "fixtures")
PEER = os.path.join(SOURCE, "..", "shared", "peers", "deepcam_torch.py")

try:
    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as e:
    print(f"skipped: {e} (install python3-torch)")
    sys.exit(SKIP)

import crest  # noqa: E402  (built: an import failure is a failure, not a skip)


class CosmoFlow(nn.Module):
    """The reference CosmoFlow network under crest's parameter names (docs/weights.md)."""

    def __init__(self, conv_size, fc1, fc2, size=32, targets=4):
        super().__init__()
        cin = 4
        for i in range(5):
            setattr(self, f"conv{i + 1}", nn.Conv3d(cin, conv_size * 2 ** i, 3, padding=1))
            cin = conv_size * 2 ** i
        self.fc1 = nn.Linear(cin * (size // 32) ** 3, fc1)
        self.fc2 = nn.Linear(fc1, fc2)
        self.fc3 = nn.Linear(fc2, targets)

    def forward(self, x_ndhwc):
        h = x_ndhwc.permute(0, 4, 1, 2, 3)
        for i in range(5):
            h = F.max_pool3d(F.leaky_relu(getattr(self, f"conv{i + 1}")(h), 0.3), 2)
        h = h.permute(0, 2, 3, 4, 1).reshape(h.shape[0], -1)
        h = F.leaky_relu(self.fc2(F.leaky_relu(self.fc1(h), 0.3)), 0.3)
        return torch.tanh(self.fc3(h)) * 1.2


def check(condition, what):
    if not condition:
        raise AssertionError(what)
    print(f"ok: {what}")


def close(a, b, tol):
    """Within tol of the larger magnitude (DeepCAM's logits reach ~30; float32 sums differ)."""
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and np.allclose(a, b, rtol=0, atol=tol * max(1.0, np.abs(b).max()))


def cosmoflow():
    config = crest.Config.load(os.path.join(FIXTURES, "learnable_cosmoflow.yaml"))
    model = crest.Model(config, batch=2)
    torch.manual_seed(3)
    x = torch.rand(2, 32, 32, 32, 4)

    y = model.forward(x)
    check(not model.last_input_copied, "a contiguous torch tensor is read in place")
    t = torch.from_dlpack(y)
    check(t.data_ptr() == y.ctypes.data, "torch.from_dlpack(prediction) shares crest's buffer")

    net = CosmoFlow(config.model.conv_size, config.model.fc1_size, config.model.fc2_size).eval()
    net.load_state_dict({k: torch.from_dlpack(v) for k, v in model.state_dict().items()},
                        strict=True)
    with torch.no_grad():
        check(close(net(x), y, 1e-5), "crest's weights in torch predict what crest predicts")
        for p in net.parameters():  # new weights, made in torch
            p.mul_(0.8).add_(0.01)
        want = net(x)
    model.load_state_dict(net.state_dict())
    check(close(model.forward(x), want, 1e-5), "torch's weights in crest predict what torch does")


def deepcam():
    if not os.path.exists(PEER):
        print(f"skipped DeepCAM: the peer script {PEER} is not beside the checkout")
        return
    spec = importlib.util.spec_from_file_location("deepcam_torch", PEER)
    peer = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(peer)
    config = crest.Config.load(os.path.join(FIXTURES, "learnable_deepcam.yaml"))
    model = crest.Model(config, batch=1)
    torch.manual_seed(5)
    x = torch.randn(1, 32, 48, 16)

    theirs = peer.DeepCAM(16, 3).eval()
    with torch.no_grad():
        for name, b in theirs.named_buffers():  # running statistics that are not the defaults
            if name.endswith("running_mean"):
                b.uniform_(-0.1, 0.1)
            elif name.endswith("running_var"):
                b.uniform_(0.5, 1.5)
        want = theirs(x.permute(0, 3, 1, 2))
    model.load_state_dict(theirs.state_dict())  # strict: all 529 entries
    y = model.forward(x)
    check(y.shape == (1, 3, 32, 48), "DeepCAM's prediction is [N, C, H, W]")
    check(close(y, want, 2e-5), "the peer's weights in crest predict what the peer does")

    fresh = crest.Model(config, batch=1)
    again = peer.DeepCAM(16, 3).eval()
    again.load_state_dict({k: torch.from_dlpack(v) for k, v in fresh.state_dict().items()},
                          strict=True)
    with torch.no_grad():
        check(close(again(x.permute(0, 3, 1, 2)), fresh.forward(x), 2e-5),
              "crest's DeepCAM weights load strictly into the peer and predict the same")


if __name__ == "__main__":
    torch.set_num_threads(2)
    cosmoflow()
    deepcam()
