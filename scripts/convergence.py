#!/usr/bin/env python3
"""Learning-quality runs for docs/convergence.md: a learnable fixture — CosmoFlow
(tests/fixtures/learnable_cosmoflow.yaml, target validation MAE <= 0.124) or, with --model
deepcam, DeepCAM (tests/fixtures/learnable_deepcam.yaml, target validation IoU >= 0.82) —
trained in several precisions from several seeds; prints one JSON line per run (epochs to
target, the validation curve read from the run's MLPerf log) and a summary line per precision.

    python3 scripts/convergence.py --crest build/bin/crest --data /tmp/crest-learnable-cosmoflow \
        --precisions float32 bf16 --seeds 0 1 2 [--out /tmp/convergence] [-- extra overrides]
    python3 scripts/convergence.py --seeds 0 --variant 'sgd-b32=train.gradient_accumulation_frequency=4' \
        --variant 'lars-b32=train.gradient_accumulation_frequency=4;optimizer={name: LARS}' ...

A --variant LABEL=OVERRIDES (';'-separated key=value overrides) replaces the precisions: each
variant is one configuration trained from every seed (the large-batch study of docs/convergence.md).
--launcher 'mpirun --bind-to none -np 2' runs each training under that launcher (the gradient
lag and local SGD study: pass data.batch_size=4 to keep the global batch of 8).

The dataset is made first when --data does not exist (crest datagen, seconds). Runs are
deterministic for a seed and thread count, so a loaded machine changes only how long they take.
"""
import argparse
import json
import os
import subprocess
import sys


# What each fixture trains on and what its target is: the MLPerf log key of the validation
# figure, the target, and whether the figure must rise to it (IoU) or fall to it (MAE).
FIXTURES = {
    "cosmoflow": {"config": "tests/fixtures/learnable_cosmoflow.yaml",
                  "data": "/tmp/crest-learnable-cosmoflow",
                  "datagen": ["cosmoflow", "--train", "1024", "--valid", "128", "--size", "32",
                              "--seed", "1"],
                  "key": "eval_error", "target": 0.124, "rises": False},
    "deepcam": {"config": "tests/fixtures/learnable_deepcam.yaml",
                "data": "/tmp/crest-learnable-deepcam",
                "datagen": ["deepcam", "--train", "96", "--valid", "32", "--height", "32",
                            "--width", "48", "--seed", "0"],
                "key": "eval_accuracy", "target": 0.82, "rises": True},
}


def eval_curve(mllog_path, key):
    """[(epoch, value)] of one validation key from the ':::MLLOG' lines of a run's mllog.txt."""
    curve = []
    with open(mllog_path) as f:
        for line in f:
            if ":::MLLOG" not in line:
                continue
            rec = json.loads(line.split(":::MLLOG", 1)[1])
            if rec.get("key") == key:
                curve.append((rec["metadata"]["epoch_num"], rec["value"]))
    return curve


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--crest", default="build/bin/crest")
    p.add_argument("--model", choices=sorted(FIXTURES), default="cosmoflow")
    p.add_argument("--data", help="the fixture's dataset (made when missing)")
    p.add_argument("--config", help="the fixture's config")
    p.add_argument("--precisions", nargs="+", default=["float32", "bf16"])
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--out", default="/tmp/crest-convergence")
    p.add_argument("--target", type=float, help="the fixture's validation target")
    p.add_argument("--variant", action="append", default=[],
                   help="LABEL=k1=v1;k2=v2: a configuration to train instead of the precisions")
    p.add_argument("--launcher", default="",
                   help="a command line to start each training under (mpirun ... -np N)")
    p.add_argument("overrides", nargs="*", help="extra key=value overrides for every run")
    a = p.parse_args()
    fixture = FIXTURES[a.model]
    a.data = a.data or fixture["data"]
    a.config = a.config or fixture["config"]
    a.target = fixture["target"] if a.target is None else a.target
    if not os.path.isdir(a.data):
        subprocess.run([a.crest, "datagen", fixture["datagen"][0], "--out", a.data]
                       + fixture["datagen"][1:], check=True, stdout=sys.stderr)

    def at_target(value):
        return value >= a.target if fixture["rises"] else value <= a.target

    variants = [(p, ["--precision", p]) for p in a.precisions]
    if a.variant:
        variants = []
        for v in a.variant:
            label, _, overrides = v.partition("=")
            variants.append((label, [o for o in overrides.split(";") if o]))
    summary = {}
    for seed in a.seeds:
        for prec, extra in variants:  # interleaved: each seed's runs one after another
            run_dir = os.path.join(a.out, f"{prec}-seed{seed}")
            cmd = a.launcher.split() + [a.crest, "train", "--config", a.config, f"data.data_dir={a.data}",
                   f"data.seed={seed}", f"output_dir={run_dir}", "--overwrite"] + extra + a.overrides
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode not in (0, 1):  # 1: finished without reaching the target
                sys.exit(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}{r.stderr}")
            curve = eval_curve(os.path.join(run_dir, "mllog.txt"), fixture["key"])
            reached = next((e for e, v in curve if at_target(v)), None)
            line = {"variant": prec, "seed": seed, "epochs_to_target": reached,
                    "final_" + fixture["key"]: curve[-1][1] if curve else None,
                    fixture["key"] + "_curve": [round(v, 4) for _, v in curve]}
            # Exit status 1 is also a run that stopped (non-finite values, ...): say so.
            status_file = os.path.join(run_dir, "status.json")
            status = json.load(open(status_file)) if os.path.exists(status_file) else {}
            if status.get("state") == "failed":
                line["failed"] = status.get("reason", "")
            print(json.dumps(line), flush=True)
            summary.setdefault(prec, []).append(reached)
    for prec, epochs in summary.items():
        done = [e for e in epochs if e is not None]
        print(json.dumps({"variant": prec, "runs": len(epochs), "reached": len(done),
                          "epochs_to_target": epochs,
                          "mean_epochs": sum(done) / len(done) if done else None}), flush=True)


if __name__ == "__main__":
    main()
