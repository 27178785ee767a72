#!/usr/bin/env python3
"""Peer for crest's checkpoint cost: torch.save of the same tensors, written the way crest writes
(temp file, fsync, rename), min of N runs. The tensors' names and shapes are read from a crest
checkpoint, so both sides save exactly the same state (parameters and SGD momentum).

    /usr/bin/python3 scripts/bench_checkpoint_torch.py runs/x/checkpoints/ckpt-....safetensors
"""
import json, os, struct, sys, time

import torch


def shapes_of(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    header.pop("__metadata__", None)
    return {k: v["shape"] for k, v in header.items()}


def main():
    src, runs = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 5
    state = {k: torch.randn(s) for k, s in shapes_of(src).items()}
    nbytes = sum(t.numel() * 4 for t in state.values())
    out = os.path.join(os.path.dirname(os.path.abspath(src)), "torch-peer.pt")
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        tmp = out + ".tmp"
        with open(tmp, "wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, out)
        times.append(time.perf_counter() - t0)
    os.remove(out)
    print(json.dumps({"bench": "checkpoint_peer", "framework": f"torch {torch.__version__}", "tensors": len(state),
                      "mb": nbytes / 2**20, "seconds_min": min(times), "seconds": times}))


if __name__ == "__main__":
    main()
