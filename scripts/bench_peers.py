#!/usr/bin/env python3
"""Interleaved side-by-side training benchmarks: crest builds against the peers, same machine, same run.

Each round runs every contestant once, in turn; the machine is shared and noisy, so the figure of a
contestant is its best round (max samples/s, i.e. min step time), and ratios compare those. The peak
RSS of each process comes from wait4(2). Prints one JSON line per run and one summary line per
contestant (with "ratio_to" the first contestant named by --ratio-to).

  scripts/bench_peers.py --rounds 3 --size 128 --batch 2 --threads 2 \
      --crest crest=build/bin/crest --tf tf=/work/tfvenv/bin/python3 [--tf-bf16 ...] \
      [--torch torch=/work/torchvenv/bin/python3] [--crest-bf16 ...] [--torch-bf16 ...] [--ratio-to tf]

Peer scripts come from ../shared/peers (cosmoflow_tf.py, cosmoflow_torch.py).
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


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", type=int, default=128)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--crest", action="append", help="LABEL=path to a crest binary")
    p.add_argument("--crest-bf16", action="append", help="LABEL=path to a crest binary, --precision bf16")
    p.add_argument("--tf", action="append", help="LABEL=python with tensorflow (fp32)")
    p.add_argument("--tf-bf16", action="append", help="LABEL=python with tensorflow (mixed_bfloat16)")
    p.add_argument("--torch", action="append", help="LABEL=python with torch (channels-last)")
    p.add_argument("--torch-bf16", action="append", help="LABEL=python with torch (channels-last, autocast bf16)")
    p.add_argument("--ratio-to", help="label every other contestant is compared with")
    a = p.parse_args()

    common = ["--size", str(a.size), "--batch", str(a.batch), "--steps", str(a.steps), "--threads", str(a.threads)]
    contestants = []
    for label, path in pairs(a.crest):
        contestants.append((label, [path, "bench", "train", "--warmup", "1"] + common))
    for label, path in pairs(a.crest_bf16):
        contestants.append((label, [path, "bench", "train", "--warmup", "1", "--precision", "bf16"] + common))
    for label, py in pairs(a.tf):
        contestants.append((label, [py, os.path.join(peers, "cosmoflow_tf.py")] + common))
    for label, py in pairs(a.tf_bf16):
        contestants.append((label, [py, os.path.join(peers, "cosmoflow_tf.py"), "--bf16"] + common))
    for label, py in pairs(a.torch):
        contestants.append((label, [py, os.path.join(peers, "cosmoflow_torch.py"), "--cl"] + common))
    for label, py in pairs(a.torch_bf16):
        contestants.append((label, [py, os.path.join(peers, "cosmoflow_torch.py"), "--cl", "--bf16"] + common))
    if not contestants:
        sys.exit("bench_peers: name at least one contestant")

    best = {}
    for r in range(a.rounds):
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
        s = {"summary": label, "size": a.size, "batch": a.batch, "threads": a.threads, "rounds": a.rounds,
             "samples_per_s": b["samples_per_s"], "gflops": round(b["gflops"], 1),
             "peak_rss_mb_per_sample": round(b["peak_rss_mb"] / a.batch, 1)}
        if a.ratio_to in best and label != a.ratio_to:
            s["ratio_to_" + a.ratio_to] = round(b["samples_per_s"] / best[a.ratio_to]["samples_per_s"], 3)
        print(json.dumps(s), flush=True)


if __name__ == "__main__":
    main()
