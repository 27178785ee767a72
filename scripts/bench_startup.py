#!/usr/bin/env python3
"""Start-up at scale on one node (docs/deployment.md): N processes started at once, each timed
from its spawn to the point it is ready, the slowest of the N (a job waits for its last rank).

  crest-train   `crest train` on the demo config cut to one step: spawn -> its first epoch_start
                in the MLPerf log (the model built and compiled, the data opened: the first step
                begins)
  import-crest  `python -c "import crest"` (the module, build/python)
  import-torch  `python -c "import torch"` with --torch-python's interpreter

Prints one JSON line per (what, N): min over rounds of the slowest process, and the median.

Run: .venv/bin/python scripts/bench_startup.py [--procs 1 32] [--rounds 3]
     [--torch-python /usr/bin/python3]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

SOURCE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CREST = os.environ.get("CREST_BINARY", os.path.join(SOURCE, "build", "bin", "crest"))
DEMO = os.path.join(SOURCE, "configs", "cosmoflow-demo.yaml")


def first_epoch_start_s(mllog):
    with open(mllog) as f:
        for line in f:
            if '"key": "epoch_start"' in line:
                return json.loads(line.split(":::MLLOG ", 1)[1])["time_ms"] / 1000
    raise RuntimeError(f"{mllog}: no epoch_start")


def crest_train(n, tmp):
    outs = [os.path.join(tmp, f"run{i}") for i in range(n)]
    t0 = time.time()
    procs = [subprocess.Popen(
        [CREST, "train", "--config", DEMO, "data.n_train=4", "data.n_valid=0", "data.n_epochs=1",
         "crest.threads=1", f"output_dir={out}", "--overwrite"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for out in outs]
    for p in procs:
        if p.wait() != 0:
            raise RuntimeError("crest train failed")
    return [first_epoch_start_s(os.path.join(out, "mllog.txt")) - t0 for out in outs]


def imports(python, module, n, env):
    t0 = time.time()
    procs = [subprocess.Popen([python, "-c", f"import {module}; import time; print(time.time())"],
                              stdout=subprocess.PIPE, text=True, env=env) for _ in range(n)]
    done = []
    for p in procs:
        out, _ = p.communicate()
        if p.returncode != 0:
            raise RuntimeError(f"import {module} failed")
        done.append(float(out.strip()) - t0)
    return done


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--procs", type=int, nargs="+", default=[1, 32])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--torch-python", default="/usr/bin/python3")
    a = p.parse_args()
    env = dict(os.environ, PYTHONPATH=os.path.join(SOURCE, "build", "python"),
               OMP_NUM_THREADS="1")
    torch_version = subprocess.run([a.torch_python, "-c", "import torch; print(torch.__version__)"],
                                   capture_output=True, text=True).stdout.strip()
    runs = {
        "crest-train": lambda n, tmp: crest_train(n, tmp),
        "import-crest": lambda n, tmp: imports(sys.executable, "crest", n, env),
        "import-torch": lambda n, tmp: imports(a.torch_python, "torch", n, env),
    }
    for n in a.procs:
        results = {what: [] for what in runs}
        for _ in range(a.rounds):
            for what, run in runs.items():  # interleaved: the machine's drift hits all alike
                with tempfile.TemporaryDirectory() as tmp:
                    results[what].append(run(n, tmp))
        for what, rounds in results.items():
            print(json.dumps({
                "bench": "startup", "what": what, "procs": n, "cpus": os.cpu_count(),
                "slowest_s_best": min(max(r) for r in rounds),
                "median_s_best": min(statistics.median(r) for r in rounds),
                **({"torch": torch_version} if what == "import-torch" else {})}))


if __name__ == "__main__":
    main()
