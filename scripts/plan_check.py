#!/usr/bin/env python3
"""How well `crest plan` predicts crest's own runs on this machine (docs/scaling.md, "Checked
against measured runs"): calibrates two copies of a machine description from crest's benchmarks
(one from one rank's profiles alone; one also from each rank count's independent ranks, which
measure how ranks computing side by side slow each other), asks `crest plan` for each rank
count's data-parallel, gradient-lag (plain and corrected) and local SGD step (and, with
--spatial, a depth split; with --pipeline M, K stages over the K ranks with M micro-batches of
--batch samples each, and from 4 ranks 2 stages x ranks / 2 replicas with and without the
lags), measures the same runs with `crest bench train` (`crest bench
pipeline`; interleaved rounds, best step of each; local SGD: the best window's mean step),
and prints one JSON line per case with the predicted and measured step and their ratio (of
both calibrations).

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


LOCAL_SGD_STEPS = 4


def case_kinds(ranks, spatial, pipeline):
    """(crest bench train flags, crest plan's name of the decomposition) for a rank count; a
    pipeline's flags are crest bench pipeline's."""
    if ranks == 1:
        return [([], "one rank")]
    kinds = [([], "data"), (["--gradient-lag", "1"], "data + lag"),
             (["--gradient-lag", "1", "--lag-correction", "local"], "data + corrected lag"),
             (["--local-sgd", str(LOCAL_SGD_STEPS)], f"local SGD ({LOCAL_SGD_STEPS} steps)")]
    if spatial:
        kinds.append((["--spatial", f"{ranks},1,1"], f"spatial [{ranks}, 1, 1]"))
    if pipeline:
        kinds.append((["--micro-batches", str(pipeline)],
                      f"pipeline {ranks} stages x {pipeline} micro"))
    if pipeline and ranks > 2 and ranks % 2 == 0:  # 2 stages over replicas, their exchange lagged
        stages = ["--micro-batches", str(pipeline), "--stages", "2"]
        name = f"pipeline 2 stages x {pipeline} micro x {ranks // 2} data"
        kinds += [(stages, name), (stages + ["--gradient-lag", "1"], name + " + lag"),
                  (stages + ["--gradient-lag", "1", "--lag-correction", "local"],
                   name + " + corrected lag")]
    return kinds


def measured_step(line, flags):
    """A window of local SGD costs its mean step (its last step averages the models): the best
    timed window's; the rest their best step."""
    return line["window_step_s_min"] if "--local-sgd" in flags else line["step_s_min"]


def calibrated(a, work, name, benches):
    """A copy of the machine description calibrated from `benches`."""
    machine = os.path.join(work, name + ".yaml")
    shutil.copy(a.machine, machine)
    subprocess.run([a.crest, "plan", "calibrate", "--machine", machine, *benches], check=True,
                   stdout=sys.stderr)
    return machine


def plans_of(a, machine):
    """(ranks, decomposition) -> crest plan's JSON line, for every rank count."""
    overrides = [f"data.sample_shape=[{a.size},{a.size},{a.size},4]", f"data.batch_size={a.batch}"]
    plans = {}
    for r in a.ranks:
        # A split shares one group's batch (asked first: the first plan of a name is kept); the
        # data-parallel cases hold the batch per rank.
        batches = [a.batch * r]
        if a.spatial and r > 1:
            batches.insert(0, a.batch)
        if a.pipeline and r > 1:  # a pipeline's batch is its M micro-batches
            batches.append(a.batch * a.pipeline)
        if a.pipeline and r > 2 and r % 2 == 0:  # 2 stages x r / 2 replicas
            batches.append(a.batch * a.pipeline * (r // 2))
        for global_batch in batches:
            for x in run([a.crest, "plan", "--config", a.config, "--machine", machine,
                          *overrides, "--ranks", str(r), "--global-batch", str(global_batch),
                          "--format", "json"]):
                plans.setdefault((r, x["decomposition"]), x)
    return plans


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
    p.add_argument("--spatial", action="store_true",
                   help="also each rank count's depth split of one sample, planned from the "
                        "unsplit profile (nothing of the split is calibrated)")
    p.add_argument("--pipeline", type=int, default=0, metavar="M",
                   help="also each rank count's pipeline (one stage per rank) of M micro-batches, "
                        "and from 4 ranks 2 stages over replicas, synchronous and with the "
                        "lags")
    a = p.parse_args()
    work = tempfile.mkdtemp(prefix="crest-plan-check-")
    size = ["--model", "cosmoflow", "--size", str(a.size), "--batch", str(a.batch)]
    cases = [(r, flags, name) for r in a.ranks
             for flags, name in case_kinds(r, a.spatial, a.pipeline)]
    alone = os.path.join(work, "alone.jsonl")  # one rank's profiles, bench allreduce
    side_by_side = os.path.join(work, "side-by-side.jsonl")  # independent ranks' profiles
    measured = {}
    for _ in range(a.rounds):
        with open(alone, "a") as f:
            for t in sorted({threads_per_rank(a.cores, r) for r in a.ranks}):
                for line in run([a.crest, "bench", "train", *size, "--steps", str(a.steps),
                                 "--warmup", "1", "--threads", str(t), "--profile"]):
                    f.write(json.dumps(line) + "\n")
        with open(side_by_side, "a") as f:
            for r in [r for r in a.ranks if r > 1]:
                for line in run([a.crest, "bench", "train", *size, "--steps", str(a.steps),
                                 "--warmup", "1", "--threads", str(threads_per_rank(a.cores, r)),
                                 "--independent", "--profile"], ranks=r):
                    f.write(json.dumps(line) + "\n")
        for r, flags, name in cases:  # interleaved with the profiles: one noisy spell hits both
            # Local SGD: --steps whole windows timed, the best one's mean step taken.
            steps = LOCAL_SGD_STEPS * a.steps if "--local-sgd" in flags else a.steps
            bench_kind = "pipeline" if "--micro-batches" in flags else "train"
            cmd = [a.crest, "bench", bench_kind, *size, "--steps", str(steps), "--warmup", "1",
                   "--threads", str(threads_per_rank(a.cores, r)), *flags]
            step = measured_step(run(cmd, ranks=r)[0], flags)
            measured[(r, name)] = min(measured.get((r, name), step), step)
    with open(alone, "a") as f:
        for line in run([a.crest, "bench", "allreduce", "--sizes", "4K,64K,1M,8M,32M"], ranks=2):
            f.write(json.dumps(line) + "\n")
    plans_alone = plans_of(a, calibrated(a, work, "alone", [alone]))
    plans = plans_of(a, calibrated(a, work, "side-by-side", [alone, side_by_side]))
    for r, _flags, name in cases:
        m = measured[(r, name)]
        plan = plans[(r, name)]
        print(json.dumps({"check": "plan", "ranks": r, "decomposition": name,
                          "threads_per_rank": threads_per_rank(a.cores, r),
                          "predicted_step_s": plan["step_s"], "measured_step_s": m,
                          "predicted_over_measured": plan["step_s"] / m,
                          "compute_source": plan["compute_source"],
                          "alone_predicted_step_s": plans_alone[(r, name)]["step_s"],
                          "alone_predicted_over_measured":
                              plans_alone[(r, name)]["step_s"] / m}), flush=True)
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
