#!/usr/bin/env python3
"""Interleaved inference benchmarks: crest bench infer (fp32, bf16) against ONNX Runtime on the
model crest exports, and PyTorch eval under torch.inference_mode with and without torch.compile,
same machine, same run (issue 14's cases: CosmoFlow 128^3 at batch 1 and 8, DeepCAM 768x1152 at
batch 1).

Each round runs every contestant once, in turn, each in its own process; a contestant's figure is
its best round (max samples/s), and its peak RSS the process's (wait4). Prints one JSON line per
run and one summary line per contestant with ratios to the fastest peer.

  scripts/bench_infer_peers.py --case cosmoflow:128:1 --case cosmoflow:128:8 \
      --case deepcam:768x1152:1 --rounds 3 --threads 2 --crest build/bin/crest \
      --torch-python /work/torchvenv/bin/python3 --ort-python .venv/bin/python
  (--no-bf16 on a CPU without bf16 instructions; --crest-direct adds crest fp32 without Winograd)
"""
import argparse, json, os, subprocess, sys, tempfile

here = os.path.dirname(os.path.abspath(__file__))


def run_measured(cmd):
    """Runs cmd; returns its first JSON line and the process's peak RSS (MiB) from wait4."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out = proc.stdout.read()
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    code = os.waitstatus_to_exitcode(status)
    lines = [l for l in out.splitlines() if l.startswith("{")]
    if code != 0 or not lines:
        sys.exit(f"bench_infer_peers: {' '.join(cmd)} failed ({code}):\n{err[-3000:]}")
    return json.loads(lines[0]), usage.ru_maxrss / 1024.0


def parse_case(text):
    model, shape, batch = text.split(":")
    if model == "cosmoflow":
        return {"model": model, "size": int(shape), "batch": int(batch)}
    h, w = shape.split("x")
    return {"model": model, "height": int(h), "width": int(w), "batch": int(batch)}


def shape_args(case):
    if case["model"] == "cosmoflow":
        return ["--size", str(case["size"])]
    return ["--height", str(case["height"]), "--width", str(case["width"])]


def export_onnx(crest, case, out):
    """The model at the case's shape with seeded initial weights (speed does not depend on them)."""
    if case["model"] == "cosmoflow":
        config = os.path.join(here, "..", "configs", "cosmoflow.yaml")
        keys = [f"model.input_shape=[{case['size']},{case['size']},{case['size']},4]",
                f"data.sample_shape=[{case['size']},{case['size']},{case['size']},4]"]
    else:
        config = os.path.join(here, "..", "configs", "deepcam.yaml")
        keys = [f"data.sample_shape=[{case['height']},{case['width']},16]"]
    cmd = [crest, "export", "--config", config] + keys + \
          ["--init-seed", "1", "--out", out, "--overwrite"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"bench_infer_peers: {' '.join(cmd)} failed:\n{r.stdout}{r.stderr}")


def contestants(a, case, onnx):
    common = ["--batch", str(case["batch"]), "--threads", str(a.threads)] + shape_args(case)
    peer = [os.path.join(here, "infer_peer.py"), "--model", case["model"], "--passes",
            str(a.passes)] + common
    bench = [a.crest, "bench", "infer", "--model", case["model"], "--passes", str(a.passes)] + common
    out = [("crest fp32", bench)]
    if a.crest_direct:  # the same binary on oneDNN's direct convolutions only (no Winograd)
        out.append(("crest fp32 direct", ["env", "CREST_WINOGRAD=0"] + bench))
    if not a.no_bf16:
        out.append(("crest bf16", bench + ["--precision", "bf16"]))
    if a.ort_python:
        out.append(("onnxruntime fp32", [a.ort_python] + peer + ["--runtime", "ort", "--onnx", onnx]))
    if a.torch_python:
        out.append(("torch eval fp32", [a.torch_python] + peer + ["--runtime", "torch"]))
        out.append(("torch compile fp32", [a.torch_python] + peer + ["--runtime", "torch-compile"]))
        if not a.no_bf16:  # autocast bf16 is emulated, many times slower, on such CPUs
            out.append(("torch eval bf16",
                        [a.torch_python] + peer + ["--runtime", "torch", "--bf16"]))
    return out


def summarise(case, best):
    peers = {k: v for k, v in best.items() if not k.startswith("crest")}
    fastest = max(peers, key=lambda k: peers[k]["samples_per_s"]) if peers else None
    lowest_rss = min(v["rss_mb"] for v in peers.values()) if peers else None
    for label, b in best.items():
        line = dict(case, contestant=label, **b)
        if fastest:
            line["fastest_peer"] = fastest
            line["ratio_to_fastest_peer"] = b["samples_per_s"] / peers[fastest]["samples_per_s"]
            line["rss_ratio_to_lowest_peer"] = b["rss_mb"] / lowest_rss
        print(json.dumps(dict(summary=True, **line)), flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--case", action="append", help="cosmoflow:SIZE:BATCH or deepcam:HxW:BATCH")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--passes", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--crest", default="build/bin/crest")
    p.add_argument("--torch-python", help="python with torch (the newest from PyPI)")
    p.add_argument("--ort-python", help="python with onnxruntime")
    p.add_argument("--no-bf16", action="store_true",
                   help="leave out the bf16 contestants (crest refuses bf16 on a CPU without "
                   "AVX-512 BF16 or AMX; torch emulates it there)")
    p.add_argument("--crest-direct", action="store_true",
                   help="also crest fp32 with CREST_WINOGRAD=0 (oneDNN's direct convolutions)")
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for text in a.case or ["cosmoflow:128:1"]:
            case = parse_case(text)
            onnx = os.path.join(tmp, "model.onnx")
            if a.ort_python:
                export_onnx(a.crest, case, onnx)
            best = {}
            for r in range(a.rounds):
                for label, cmd in contestants(a, case, onnx):
                    result, rss = run_measured(cmd)
                    print(json.dumps(dict(case, round=r, contestant=label, rss_mb=rss, **result)),
                          flush=True)
                    if label not in best or result["samples_per_s"] > best[label]["samples_per_s"]:
                        best[label] = {"samples_per_s": result["samples_per_s"],
                                       "latency_ms_min": result["latency_ms_min"], "rss_mb": rss}
                    best[label]["rss_mb"] = min(best[label]["rss_mb"], rss)
            summarise(case, best)


if __name__ == "__main__":
    main()
