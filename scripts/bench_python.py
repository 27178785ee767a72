#!/usr/bin/env python3
"""What driving crest from Python costs, against crest's own paths (docs/python.md, figures in
docs/performance.md "Python"). Prints one JSON line per measurement.

  train    crest.train against `crest train`, CosmoFlow 128^3 batch 2 on the dummy dataset: each
           run in a fresh process, interleaved, the last epoch's samples/s of each; min-of-rounds
           ratio.
  data     crest.train on a Python list of in-memory arrays against the native reader (npy files
           in the page cache), CosmoFlow 128^3 batch 2: the step time (train seconds per step) and
           the time the steps waited for data.
  predict  Model.forward from Python against the same executor's forward timed in C++, per call,
           on a network whose compute takes microseconds (a 4^3 x 4 volume, one dense layer), so
           the difference is the call's overhead.

Run: PYTHONPATH=build/python .venv/bin/python scripts/bench_python.py {train,data,predict}
     [--rounds N] [--threads T]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

SOURCE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CREST = os.environ.get("CREST_BINARY", os.path.join(SOURCE, "build", "bin", "crest"))
DEMO = os.path.join(SOURCE, "configs", "cosmoflow-demo.yaml")


def big_overrides(threads, out):
    return ["data.sample_shape=[128,128,128,4]", "model.input_shape=[128,128,128,4]",
            "data.batch_size=2", "data.n_train=8", "data.n_valid=0", "data.n_epochs=2",
            "train.report=true", f"crest.threads={threads}", f"output_dir={out}"]


PY_TRAIN = """
import json, sys, crest
config = crest.Config.load(sys.argv[1], overrides=sys.argv[2:])
history = crest.train(config, overwrite=True, quiet=True)
print(json.dumps(history.epochs[-1]["samples_per_s"]))
"""


def last_epoch_rate(out):
    with open(os.path.join(out, "report.json")) as f:
        return json.load(f)["epochs"][-1]["samples_per_s"]


def bench_train(args):
    rates = {"cli": [], "python": []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            order = ["cli", "python"] if r % 2 == 0 else ["python", "cli"]
            for who in order:
                out = os.path.join(tmp, who)
                o = big_overrides(args.threads, out)
                if who == "cli":
                    subprocess.run([CREST, "train", "--config", DEMO, "--overwrite", *o],
                                   check=True, capture_output=True)
                    rates[who].append(last_epoch_rate(out))
                else:
                    p = subprocess.run([sys.executable, "-c", PY_TRAIN, DEMO, *o], check=True,
                                       capture_output=True, text=True)
                    rates[who].append(json.loads(p.stdout.strip().splitlines()[-1]))
    print(json.dumps({"bench": "python_train", "model": "cosmoflow", "size": 128, "batch": 2,
                      "cli_samples_per_s": rates["cli"], "python_samples_per_s": rates["python"],
                      "python_over_cli_best": max(rates["python"]) / max(rates["cli"])}))


def bench_data(args):
    import glob

    import numpy as np

    import crest

    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "data")
        subprocess.run([CREST, "datagen", "cosmoflow", "--out", data, "--train", "8", "--valid",
                        "0", "--size", "128", "--format", "npy"], check=True, capture_output=True)
        files = sorted(glob.glob(os.path.join(data, "train", "*.data.npy")))
        samples = [(np.load(f).astype(np.float32),
                    np.load(f.replace(".data.npy", ".label.npy"))) for f in files]
        base = crest.Config.load(DEMO, overrides=[
            *big_overrides(args.threads, os.path.join(tmp, "run")), "data.name=cosmo",
            f"data.data_dir={data}", "data.format=npy", "data.apply_log=false"])
        figures = {"native": [], "python": []}
        for r in range(args.rounds):
            for who in (["native", "python"] if r % 2 == 0 else ["python", "native"]):
                h = crest.train(base, overwrite=True, quiet=True,
                                train_data=samples if who == "python" else None)
                e = h.epochs[-1]
                steps = h.steps / len(h.epochs)
                figures[who].append({"step_s": e["train_seconds"] / steps,
                                     "data_wait_s_per_step": e["data_wait_s"] / steps})
    best = {who: min(f["step_s"] for f in v) for who, v in figures.items()}
    print(json.dumps({"bench": "python_data", "model": "cosmoflow", "size": 128, "batch": 2,
                      **{f"{who}_rounds": v for who, v in figures.items()},
                      "python_over_native_step_best": best["python"] / best["native"],
                      "per_batch_overhead_s": best["python"] - best["native"]}))


TINY = """
data: {name: dummy, n_train: 4, n_valid: 0, sample_shape: [4, 4, 4, 4], target_shape: [4],
       batch_size: 1, n_epochs: 1}
model:
  name: graph
  inputs:
    - {name: x, shape: [4, 4, 4, 4], layout: channels_last}
    - {name: y, shape: [4]}
  layers:
    - {name: flatten, kind: flatten}
    - {name: fc, kind: dense, out_features: 4}
    - {name: tanh, kind: tanh}
    - {name: loss, kind: mse_loss, inputs: [tanh, y]}
  outputs: [tanh]
  loss: loss
optimizer: {name: SGD}
lr_schedule: {base_lr: 0.01}
train: {loss: mse}
"""


def bench_predict(args):
    import crest

    tiny = crest.Config.from_yaml(TINY, overrides=[f"crest.threads={args.threads}"],
                                  source="tiny")
    time_calls(args, "tiny-dense", crest.Model(tiny, batch=1))


def time_calls(args, name, model):
    import numpy as np

    x = np.random.default_rng(0).random((1, *model.sample_shape), dtype=np.float32)
    calls = 2000
    python_s, native_s = [], []
    for _ in range(args.rounds):
        for _ in range(20):
            model.forward(x)
        t0 = time.perf_counter()
        for _ in range(calls):
            model.forward(x)
        python_s.append((time.perf_counter() - t0) / calls)
        native = model._native.time_forward(calls)
        native_s.append(sum(native) / calls)
    print(json.dumps({"bench": "python_predict", "model": name, "batch": 1,
                      "python_call_s": python_s, "executor_s": native_s,
                      "overhead_us_best": (min(python_s) - min(native_s)) * 1e6,
                      "last_input_copied": model.last_input_copied}))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("what", choices=["train", "data", "predict"])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    {"train": bench_train, "data": bench_data, "predict": bench_predict}[args.what](args)


if __name__ == "__main__":
    main()
