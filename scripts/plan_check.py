#!/usr/bin/env python3
"""How well `crest plan` predicts crest's own runs on this machine (docs/scaling.md, "Checked
against measured runs"): calibrates a copy of a machine description from crest's benchmarks,
asks `crest plan` for each rank count's data-parallel and gradient-lag step, measures the same
runs with `crest bench train` (interleaved rounds, best step of each), and prints one JSON line
per case with the predicted and measured step and their ratio.

    python3 scripts/plan_check.py --machine configs/machines/two-core-node.yaml \
        --size 64 --batch 1 --ranks 1 2 4 --rounds 3

The timing is a benchmark, never a test: run it on an otherwise idle machine.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "OMPI_MCA_rmaps_base_oversubscribe": "1", "OMPI_WAIT_POLICY": "PASSIVE"}


def run(cmd, ranks=1):
    env = dict(os.environ, **MPI_ENV)
    if ranks > 1:
        cmd = ["mpirun", "--bind-to", "none", "-np", str(ranks)] + cmd
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    return [json.loads(l) for l in out.splitlines() if l.startswith("{")]


def threads_per_rank(cores, ranks):
    return max(1, cores // ranks)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--crest", default="build/bin/crest")
    p.add_argument("--machine", default="configs/machines/two-core-node.yaml")
    p.add_argument("--config", default="configs/cosmoflow.yaml")
    p.add_argument("--size", type=int, default=64)
    p.add_argument("--batch", type=int, default=1, help="per rank")
    p.add_argument("--ranks", type=int, nargs="+", default=[1, 2, 4])
    p.add_argument("--cores", type=int, default=os.cpu_count())
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=3)
    a = p.parse_args()
    work = tempfile.mkdtemp(prefix="crest-plan-check-")
    machine = os.path.join(work, "machine.yaml")
    shutil.copy(a.machine, machine)
    size = ["--model", "cosmoflow", "--size", str(a.size), "--batch", str(a.batch)]
    # Calibration: one profile per thread count the ranks will use, and the allreduce.
    bench = os.path.join(work, "bench.jsonl")
    with open(bench, "w") as f:
        for t in sorted({threads_per_rank(a.cores, r) for r in a.ranks}):
            for line in run([a.crest, "bench", "train", *size, "--steps", "3", "--warmup", "1",
                             "--threads", str(t), "--profile"]):
                f.write(json.dumps(line) + "\n")
        for line in run([a.crest, "bench", "allreduce", "--sizes", "4K,64K,1M,8M,32M"], ranks=2):
            f.write(json.dumps(line) + "\n")
    subprocess.run([a.crest, "plan", "calibrate", "--machine", machine, bench], check=True,
                   stdout=sys.stderr)
    overrides = [f"data.sample_shape=[{a.size},{a.size},{a.size},4]", f"data.batch_size={a.batch}"]
    plans = run([a.crest, "plan", "--config", a.config, "--machine", machine, *overrides,
                 "--ranks", ",".join(map(str, a.ranks)), "--format", "json"])
    cases = []
    for r in a.ranks:
        for lag in ([False, True] if r > 1 else [False]):
            name = "one rank" if r == 1 else ("data + lag" if lag else "data")
            plan = next(x for x in plans if x["ranks"] == r and x["decomposition"] == name)
            cases.append((r, lag, name, plan))
    measured = {}
    for _ in range(a.rounds):  # interleaved: a noisy spell hits every case alike
        for r, lag, name, _plan in cases:
            cmd = [a.crest, "bench", "train", *size, "--steps", str(a.steps), "--warmup", "1",
                   "--threads", str(threads_per_rank(a.cores, r))]
            if lag:
                cmd += ["--gradient-lag", "1"]
            step = run(cmd, ranks=r)[0]["step_s_min"]
            measured[(r, name)] = min(measured.get((r, name), step), step)
    for r, lag, name, plan in cases:
        m = measured[(r, name)]
        print(json.dumps({"check": "plan", "ranks": r, "decomposition": name,
                          "threads_per_rank": threads_per_rank(a.cores, r),
                          "predicted_step_s": plan["step_s"], "measured_step_s": m,
                          "predicted_over_measured": plan["step_s"] / m,
                          "compute_source": plan["compute_source"]}), flush=True)
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
