#!/usr/bin/env python3
"""Where a DeepCAM training step's time goes, by kind of layer, and what a speed goal leaves.

Reads the output of one or more `crest bench train --model deepcam ... --profile` runs (the first
JSON line is the run, the others one per layer), keeps each layer's best time over the runs (the
machine is noisy; the best is what crest can do), and sums them by class:

  1x1         pointwise, skip, ASPP 1x1 and the decoder's 1x1 convolutions: plain GEMMs, no
              arithmetic to save, so they run at best at the machine's GEMM rate
  3x3 dense   the dense 3x3 convolutions (entry flow, ASPP atrous, decoder): Winograd's domain
  deconv      the transposed convolutions of the decoder
  depthwise   the separable convolutions' depthwise halves: memory speed
  other       batch norm, ReLU, add, concat, reorders, pooling, the loss: memory speed
  update      the optimizer step (LAMB), the run's best `update_s_min`

With --peer-samples-per-s and --goal it prints the step time the goal allows at that batch, and
how much faster the 3x3 dense and transposed convolutions would have to become for the step to
fit, with every other class kept at its best time.

  build/bin/crest bench train --model deepcam --height 192 --width 288 --batch 2 --threads 2 \\
      --steps 3 --warmup 1 --precision float32 --profile > /tmp/p1.txt   # and /tmp/p2.txt ...
  scripts/deepcam_profile_bound.py /tmp/p*.txt --peer-samples-per-s 0.9265 --goal 3
"""
import argparse, json, sys

CLASSES = ("1x1", "3x3 dense", "deconv", "depthwise", "other", "update")
ONE_BY_ONE = ("conv2", "bottleneck.conv", "upsample.conv1.6")  # DeepCAM's 1x1 convs without a telling name


def layer_class(name, kind):
    if kind == "conv_transpose":
        return "deconv"
    if kind != "conv":
        return "other"
    if "depthwise" in name or (name.endswith(".conv1") and name != "xception_features.conv1"):
        return "depthwise"  # SepConv's depthwise half is `<block>.conv1`; the entry conv1 is dense
    if "pointwise" in name or "skip" in name or "aspp1" in name or "global_avg_pool" in name or name in ONE_BY_ONE:
        return "1x1"
    return "3x3 dense"


def read_runs(paths):
    """(best per-layer (ms, GFLOP, class), best update ms, batch) over the runs."""
    best, update_ms, batch = {}, float("inf"), None
    for path in paths:
        with open(path) as f:
            lines = [json.loads(l) for l in f if l.startswith("{")]
        run = next((l for l in lines if l.get("bench") == "train"), None)
        if run is None or run.get("model") != "deepcam":
            sys.exit(f"deepcam_profile_bound: {path}: no `crest bench train --model deepcam` line")
        batch = run["batch"]
        update_ms = min(update_ms, 1000 * run["update_s_min"])
        for l in (l for l in lines if "layer" in l):
            ms = l["forward_ms"] + l["backward_ms"]
            gflop = (l["forward_gflops"] * l["forward_ms"] + l["backward_gflops"] * l["backward_ms"]) / 1000
            if l["layer"] not in best or ms < best[l["layer"]][0]:
                best[l["layer"]] = (ms, gflop, layer_class(l["layer"], l["kind"]))
    return best, update_ms, batch


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("profiles", nargs="+", help="files holding `crest bench train --profile` output")
    p.add_argument("--peer-samples-per-s", type=float, help="the peer's best samples/s at the same shape")
    p.add_argument("--goal", type=float, default=3.0, help="the speed-up over the peer to reach")
    a = p.parse_args()
    best, update_ms, batch = read_runs(a.profiles)
    ms = dict.fromkeys(CLASSES, 0.0)
    gflop = dict.fromkeys(CLASSES, 0.0)
    for t, f, c in best.values():
        ms[c] += t
        gflop[c] += f
    ms["update"] = update_ms
    total = sum(ms.values())
    for c in CLASSES:
        rate = round(gflop[c] / ms[c] * 1000, 1) if ms[c] and gflop[c] else None
        print(json.dumps({"class": c, "ms": round(ms[c], 1), "share": round(ms[c] / total, 3),
                          "gflop": round(gflop[c], 2), "gflops": rate}))
    out = {"step_ms": round(total, 1), "batch": batch, "samples_per_s": round(batch / total * 1000, 4)}
    if a.peer_samples_per_s:
        allowed = batch / (a.goal * a.peer_samples_per_s) * 1000
        fixed = sum(ms[c] for c in ("1x1", "depthwise", "other", "update"))
        left = allowed - fixed
        out.update({"goal": a.goal, "allowed_step_ms": round(allowed, 1), "fixed_ms": round(fixed, 1),
                    "left_for_3x3_and_deconv_ms": round(left, 1),
                    "needed_speedup_3x3_and_deconv": round((ms["3x3 dense"] + ms["deconv"]) / left, 2) if left > 0 else None})
    print(json.dumps(out))


if __name__ == "__main__":
    main()
