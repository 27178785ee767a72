#!/usr/bin/env python3
"""Interleaved side-by-side training benchmarks: crest builds against the peers, same machine, same run.

Each round runs every contestant once, in turn; the machine is shared and noisy, so the figure of a
contestant is its best round (max samples/s, i.e. min step time), and ratios compare those. The peak
RSS of each process comes from wait4(2). Prints one JSON line per run and one summary line per
contestant (with "ratio_to" the first contestant named by --ratio-to).

  scripts/bench_peers.py --rounds 3 --size 128 --batch 2 --threads 2 \
      --crest crest=build/bin/crest --tf tf=/work/tfvenv/bin/python3 [--tf-bf16 ...] \
      [--torch torch=/work/torchvenv/bin/python3] [--torch-compile ...] [--crest-bf16 ...]
      [--torch-bf16 ...] [--ratio-to tf]

  scripts/bench_peers.py --model deepcam --height 192 --width 288 --batch 2 --rounds 3 \
      --peak build/bin/crest --crest crest=build/bin/crest \
      --torch-plain torch=/work/torchvenv/bin/python3 --torch torch_cl=/work/torchvenv/bin/python3

  scripts/bench_peers.py --model resnet50 --batch 32 --rounds 3 --crest crest=build/bin/crest \
      --tf tf=/tmp/tfvenv/bin/python3 --torch torch_cl=/tmp/torchvenv/bin/python3 \
      --torch-compile torch_compile=/tmp/torchvenv/bin/python3 --ratio-to tf

--peak runs `crest bench peak` (the float32 GEMM rate) at the start of every round, so a figure
can be read against the machine's rate at that moment. crest runs --precision float32 unless
named with --crest-bf16. Peer scripts come from ../shared/peers (cosmoflow_tf.py,
cosmoflow_torch.py, deepcam_torch.py; DeepCAM has no TensorFlow peer), ResNet-50's from this
directory (bench_resnet50_tf.py, bench_resnet50_torch.py: Keras' and torchvision's networks,
10 classes where crest's has ImageNet's 1,000, 0.05 % of the FLOPs).
"""
import argparse, json, os, subprocess, sys, time

here = os.path.dirname(os.path.abspath(__file__))
peers = os.path.normpath(os.path.join(here, "..", "..", "shared", "peers"))


def pairs(values):
    out = []
    for v in values or []:
        label, _, path = v.partition("=")
        if not path:
            sys.exit(f"bench_peers: expected LABEL=PATH, got {v!r}")
        out.append((label, path))
    return out


def run_with_rss(cmd):
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out = proc.stdout.read()
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    lines = [l for l in out.splitlines() if l.startswith("{")]
    if proc.returncode != 0 or not lines:
        sys.exit(f"bench_peers: {' '.join(cmd)} failed ({proc.returncode}):\n{err[-2000:]}")
    return json.loads(lines[0]), usage.ru_maxrss / 1024.0


# Image models' sample size where --height/--width are not given: DeepCAM's reduced benchmark
# size (the full one is 768 x 1152), ImageNet's crop.
DEFAULT_IMAGE = {"deepcam": (192, 288), "resnet50": (224, 224)}


def sample_shape(a):
    """The model's sample-shape options, as the benchmarks take them and the summary prints them."""
    if a.model == "cosmoflow":
        return {"size": a.size}
    height, width = DEFAULT_IMAGE[a.model]
    return {"height": a.height or height, "width": a.width or width}


def peer_script(model, framework):
    """The peer's script: ResNet-50's are crest's own (scripts/), the others ../shared/peers'."""
    if model == "resnet50":
        return os.path.join(here, f"bench_resnet50_{framework}.py")
    return os.path.join(peers, f"{model}_{framework}.py")


def build_contestants(a):
    """(label, command) of every contestant named on the command line, in the order of the flags."""
    shape = [arg for key, value in sample_shape(a).items() for arg in (f"--{key}", str(value))]
    common = shape + ["--batch", str(a.batch), "--steps", str(a.steps), "--threads", str(a.threads)]
    crest = ["bench", "train", "--model", a.model, "--warmup", "1"] + common
    peer = lambda framework: peer_script(a.model, framework)
    if a.model == "deepcam" and (a.tf or a.tf_bf16):
        sys.exit("bench_peers: DeepCAM has no TensorFlow peer")
    out = []
    out += [(label, [path] + crest + ["--precision", "float32"]) for label, path in pairs(a.crest)]
    out += [(label, [path] + crest + ["--precision", "bf16"]) for label, path in pairs(a.crest_bf16)]
    out += [(label, [py, peer("tf")] + common) for label, py in pairs(a.tf)]
    out += [(label, [py, peer("tf"), "--bf16"] + common) for label, py in pairs(a.tf_bf16)]
    out += [(label, [py, peer("torch")] + common) for label, py in pairs(a.torch_plain)]
    out += [(label, [py, peer("torch"), "--cl"] + common) for label, py in pairs(a.torch)]
    out += [(label, [py, peer("torch"), "--cl", "--compile"] + common)
            for label, py in pairs(a.torch_compile)]
    out += [(label, [py, peer("torch"), "--cl", "--bf16"] + common) for label, py in pairs(a.torch_bf16)]
    out += [(label, [py, peer("torch"), "--cl", "--compile", "--bf16"] + common)
            for label, py in pairs(a.torch_compile_bf16)]
    return out


def gemm_peak(crest, threads):
    """The float32 GEMM GFLOP/s `crest bench peak` measures now."""
    out = subprocess.run([crest, "bench", "peak", "--threads", str(threads)], capture_output=True, text=True, check=True)
    rates = [json.loads(l) for l in out.stdout.splitlines() if l.startswith("{")]
    return round(next(r["gflops"] for r in rates if r["dtype"] == "f32"), 1)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", choices=("cosmoflow", "deepcam", "resnet50"), default="cosmoflow")
    p.add_argument("--size", type=int, default=128, help="cosmoflow: cube size")
    p.add_argument("--height", type=int, help="deepcam (default 192), resnet50 (224): sample height")
    p.add_argument("--width", type=int, help="deepcam (default 288), resnet50 (224): sample width")
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--crest", action="append", help="LABEL=path to a crest binary")
    p.add_argument("--crest-bf16", action="append", help="LABEL=path to a crest binary, --precision bf16")
    p.add_argument("--tf", action="append", help="LABEL=python with tensorflow (fp32)")
    p.add_argument("--tf-bf16", action="append", help="LABEL=python with tensorflow (mixed_bfloat16)")
    p.add_argument("--torch", action="append", help="LABEL=python with torch (channels-last)")
    p.add_argument("--torch-plain", action="append", help="LABEL=python with torch (default memory format)")
    p.add_argument("--torch-compile", action="append",
                   help="LABEL=python with torch (channels-last, torch.compile)")
    p.add_argument("--torch-bf16", action="append", help="LABEL=python with torch (channels-last, autocast bf16)")
    p.add_argument("--torch-compile-bf16", action="append",
                   help="LABEL=python with torch (channels-last, torch.compile, autocast bf16)")
    p.add_argument("--peak", help="path to a crest binary: print the float32 GEMM rate every round")
    p.add_argument("--ratio-to", help="label every other contestant is compared with")
    a = p.parse_args()
    contestants = build_contestants(a)
    if not contestants:
        sys.exit("bench_peers: name at least one contestant")

    best = {}
    for r in range(a.rounds):
        if a.peak:
            print(json.dumps({"round": r, "peak_f32_gflops": gemm_peak(a.peak, a.threads)}), flush=True)
        for label, cmd in contestants:
            result, rss = run_with_rss(cmd)
            if "step_s_min" in result:  # every peer reports its best step: so does crest here
                result["samples_per_s"] = a.batch / result["step_s_min"]
                if "gflop_per_sample" in result:
                    result["gflops"] = result["gflop_per_sample"] * result["samples_per_s"]
            line = {"round": r, "label": label, "samples_per_s": result["samples_per_s"],
                    "gflops": result.get("gflops"), "peak_rss_mb": round(rss, 1)}
            print(json.dumps(line), flush=True)
            b = best.setdefault(label, {"samples_per_s": 0.0, "gflops": 0.0, "peak_rss_mb": 0.0})
            b["samples_per_s"] = max(b["samples_per_s"], result["samples_per_s"])
            b["gflops"] = max(b["gflops"], result.get("gflops") or 0.0)
            b["peak_rss_mb"] = max(b["peak_rss_mb"], rss)
    for label, b in best.items():
        s = {"summary": label, "model": a.model, **sample_shape(a), "batch": a.batch, "threads": a.threads, "rounds": a.rounds,
             "samples_per_s": b["samples_per_s"], "gflops": round(b["gflops"], 1),
             "peak_rss_mb_per_sample": round(b["peak_rss_mb"] / a.batch, 1)}
        if a.ratio_to in best and label != a.ratio_to:
            s["ratio_to_" + a.ratio_to] = round(b["samples_per_s"] / best[a.ratio_to]["samples_per_s"], 3)
        print(json.dumps(s), flush=True)


if __name__ == "__main__":
    main()
