"""DeepCAM weights both ways between crest and the reference network in PyTorch (issue: DeepCAM).

crest -> PyTorch: a safetensors file `crest train --save-weights` writes for the deepcam model
loads into the peer network (../shared/peers/deepcam_torch.py, the reference's module names) with
load_state_dict(strict=True), every value equal.
PyTorch -> crest: the peer's state_dict saved as a reference checkpoint holds it (every key with
DistributedDataParallel's "module." prefix, num_batches_tracked int64) loads with
`crest train --init-weights`; after a step with a negligible learning rate crest's trained
parameters still equal the peer's.

Needs PyTorch and numpy (Debian's python3-torch is enough) and the peer script beside the
checkout; without either the test exits 77, which CTest reports as skipped.

Run: CREST_BINARY=build/bin/crest /usr/bin/python3 tests/interop/deepcam_weights_interop.py
"""
import importlib.util
import os
import subprocess
import sys
import tempfile

SKIP = 77
SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PEER = os.path.join(SOURCE, "..", "shared", "peers", "deepcam_torch.py")
CREST = os.environ.get("CREST_BINARY", "build/bin/crest")

try:
    import numpy as np
    import torch
except ImportError as e:
    print(f"skipped: {e} (install python3-torch)")
    sys.exit(SKIP)
if not os.path.exists(PEER):
    print(f"skipped: the peer script {PEER} is not beside the checkout")
    sys.exit(SKIP)

sys.path.insert(0, os.path.join(SOURCE, "tests", "fixtures"))
from safetensors_np import read_safetensors, write_safetensors  # noqa: E402


def crest(*args):
    r = subprocess.run([CREST, *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise AssertionError(f"crest {' '.join(args)} exited {r.returncode}:\n{r.stdout}{r.stderr}")
    return r.stdout


def peer_network():
    spec = importlib.util.spec_from_file_location("deepcam_torch", PEER)
    peer = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(peer)
    torch.manual_seed(7)
    return peer.DeepCAM(16, 3)


def main():
    with tempfile.TemporaryDirectory(prefix="crest-deepcam-weights-") as tmp:
        data = os.path.join(tmp, "data")
        crest("datagen", "deepcam", "--out", data, "--train", "2", "--valid", "0",
              "--height", "32", "--width", "48")
        config = os.path.join(tmp, "run.yaml")
        with open(config, "w") as f:
            f.write(f"data: {{name: deepcam, data_dir: {data}, sample_shape: [32, 48, 16], "
                    "batch_size: 2, n_epochs: 1, n_valid: 0}\nmodel: {name: deepcam}\n"
                    "optimizer: {name: LAMB, weight_decay: 0.01}\n"
                    "lr_schedule: {start_lr: 1.0e-30}\ntrain: {checkpoint_every: 0}\n")

        # crest -> PyTorch: strict load, same values.
        ours = os.path.join(tmp, "crest.safetensors")
        crest("train", "--config", config, f"output_dir={tmp}/a", "--save-weights", ours)
        tensors, _ = read_safetensors(ours)
        net = peer_network()
        net.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in tensors.items()},
                            strict=True)
        for k, t in net.state_dict().items():
            assert np.array_equal(t.numpy(), tensors[k]), k
        print(f"crest -> PyTorch: {len(tensors)} entries loaded with strict=True")

        # PyTorch -> crest: the reference checkpoint's DDP keys.
        theirs = os.path.join(tmp, "reference.safetensors")
        state = {"module." + k: t.detach().numpy() for k, t in peer_network().state_dict().items()}
        write_safetensors(theirs, state, {"format": "pt"})
        after = os.path.join(tmp, "after.safetensors")
        crest("train", "--config", config, f"output_dir={tmp}/b", "--init-weights", theirs,
              "--save-weights", after)
        got, _ = read_safetensors(after)
        trained = {k for k, _ in peer_network().named_parameters()}
        for k in trained:  # a zero (batch-norm bias) moves by about 1e-30, nothing else moves
            assert np.abs(got[k] - state["module." + k]).max() <= 1e-20, k
        print(f"PyTorch -> crest: {len(state)} module.-prefixed entries loaded, "
              f"{len(trained)} trained tensors unchanged by a step at lr 1e-30")


if __name__ == "__main__":
    main()
