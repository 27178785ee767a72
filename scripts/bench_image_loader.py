#!/usr/bin/env python3
"""Decode + augment throughput of ImageNet-style JPEG folders: crest's loader against torchvision's
DataLoader with the same transforms, interleaved rounds in one run (the machine is shared and
noisy: each contestant's figure is its best round, and the ratio compares those).

  scripts/bench_image_loader.py --data /tmp/bigimg --threads 2 --rounds 3 \
      --crest build/bin/crest --python /usr/bin/python3

crest: `crest bench loader` on data.name imagenet (training split, RandomResizedCrop 224 + flip +
normalise, files in the page cache), its end-to-end samples/s. torchvision: ImageFolder with
RandomResizedCrop(224), RandomHorizontalFlip, ToTensor, Normalize (Pillow decodes), a DataLoader
with `threads` worker processes and batch 32, one full pass after a warm-up pass, images/s. Both
use the same number of cores. Prints one JSON line per run and one summary line per contestant.
"""
import argparse, json, os, subprocess, sys

TORCHVISION = r"""
import sys, time, torch, torchvision
from torchvision import transforms as T
root, workers = sys.argv[1], int(sys.argv[2])
torch.set_num_threads(1)
tf = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(),
                T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
ds = torchvision.datasets.ImageFolder(root + "/train", transform=tf)
dl = torch.utils.data.DataLoader(ds, batch_size=32, shuffle=True, num_workers=workers,
                                 persistent_workers=workers > 0)
for _ in dl: pass  # warm-up: workers started, files in the page cache
t = time.perf_counter(); n = 0
for x, y in dl: n += x.shape[0]
print(n / (time.perf_counter() - t), torch.__version__, torchvision.__version__)
"""


def crest_round(a):
    out = subprocess.run([a.crest, "bench", "loader", "--config", a.config, f"data.data_dir={a.data}",
                          "data.sample_shape=[224,224,3]", "data.n_valid=0", "data.batch_size=32",
                          "--threads", str(a.threads), "--epochs", "2", "--warm"],
                         capture_output=True, text=True, check=True).stdout
    line = [l for l in out.splitlines() if l.startswith('{"bench":"loader"')][-1]
    r = json.loads(line)
    return {"samples_per_s": r["samples_per_s"], "decode_samples_s_per_thread": r["decode_samples_s"]}


def torchvision_round(a):
    out = subprocess.run([a.python, "-c", TORCHVISION, a.data, str(a.threads)],
                         capture_output=True, text=True, check=True).stdout.split()
    return {"samples_per_s": float(out[0]), "torch": out[1], "torchvision": out[2]}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data", required=True)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--crest", default="build/bin/crest")
    p.add_argument("--config", default=os.path.join(os.path.dirname(__file__), "..", "configs",
                                                     "resnet50-demo.yaml"))
    p.add_argument("--python", default=sys.executable)
    a = p.parse_args()
    best = {}
    for k in range(a.rounds):
        for name, run in (("crest", crest_round), ("torchvision", torchvision_round)):
            r = run(a)
            print(json.dumps({"bench": "image_loader", "round": k, "contestant": name,
                              "threads": a.threads, **r}), flush=True)
            if r["samples_per_s"] > best.get(name, {}).get("samples_per_s", 0):
                best[name] = r
    for name, r in best.items():
        print(json.dumps({"bench": "image_loader", "summary": name, "best_samples_per_s": r["samples_per_s"],
                          "ratio_to_torchvision": r["samples_per_s"] / best["torchvision"]["samples_per_s"]}))


if __name__ == "__main__":
    main()
