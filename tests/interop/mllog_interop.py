"""crest's MLPerf log against the official MLPerf compliance checker (mlperf-logging, hpc 3.0.0).

A real `crest train` run on the learnable synthetic CosmoFlow set of
tests/fixtures/learnable_cosmoflow.yaml (stopping at train.target_mae: 0.124) must leave an
output_dir/mllog.txt that:
  - passes `python -m mlperf_logging.compliance_checker --usage hpc --ruleset 3.0.0 mllog.txt`
    (common + closed_common + closed_cosmoflow rules, including one eval_error <= 0.124);
  - is strict JSON on every line and byte-for-byte what mllog.py's own encoder writes for the
    same event (so crest's lines are indistinguishable from the reference's);
  - ends in run_stop with status "success" at the epoch where training stopped on its target,
    with one eval_error per epoch equal to the val_mae the run printed;
  - is echoed line for line on stdout (mlperf.stdout: true).

Run: CREST_BINARY=build/bin/crest .venv/bin/python tests/interop/mllog_interop.py
"""
import os
import re
import tempfile

from mlperf_checker import train_logged, read_events, run_checker

CREST = os.environ.get("CREST_BINARY", "build/bin/crest")
SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIG = os.path.join(SOURCE, "tests", "fixtures", "learnable_cosmoflow.yaml")
# The dataset the fixture's comment names (`crest datagen` arguments).
DATAGEN = ["cosmoflow", "--train", "1024", "--valid", "128", "--size", "32", "--seed", "1"]


def main():
    with tempfile.TemporaryDirectory(prefix="crest-mllog-") as tmp:
        printed, log = train_logged(CREST, DATAGEN, CONFIG, ["mlperf.stdout=true"], tmp)

        # 1. The official checker, as a submitter runs it.
        checker_log = os.path.join(tmp, "compliance.log")
        code, verdict = run_checker(log, "hpc", "3.0.0", checker_log)
        if code != 0 or "SUCCESS" not in verdict:
            raise AssertionError(f"compliance checker exited {code}:\n{verdict}\n--- log:\n{open(log).read()}")
        for rules in ("common.yaml", "closed_common.yaml", "closed_cosmoflow.yaml"):
            assert f"hpc_3.0.0/{rules}" in verdict, f"the checker did not apply {rules}:\n{verdict}"

        # 2. Strict JSON, and exactly mllog.py's encoding of the same event.
        lines, events = read_events(log)

        # 3. Stopped on the target, and eval_error is the printed val_mae of every epoch.
        printed_mae = [float(m) for m in re.findall(r"^epoch (?:\d+)/\d+ .*?val_mae ([0-9.]+)", printed, re.M)]
        n_epochs = int(re.search(r"^epoch 1/(\d+) ", printed, re.M).group(1))
        errors = [(e["metadata"]["epoch_num"], e["value"]) for e in events if e["key"] == "eval_error"]
        assert [n for n, _ in errors] == list(range(1, len(errors) + 1)), errors
        assert len(errors) == len(printed_mae) and len(errors) < n_epochs, (errors, printed_mae, n_epochs)
        for (n, v), p in zip(errors, printed_mae):
            assert round(v, 4) == p, f"epoch {n}: mllog eval_error {v}, printed val_mae {p}"
        assert errors[-1][1] <= 0.124 and all(v > 0.124 for _, v in errors[:-1]), errors
        assert "target reached" in printed, printed
        stop = [e for e in events if e["key"] == "run_stop"]
        assert len(stop) == 1 and stop[0]["metadata"]["status"] == "success", stop
        assert stop[0]["metadata"]["epoch_num"] == len(errors), stop
        assert events[-1]["key"] == "run_stop", events[-1]

        # 4. The stdout echo holds the same lines in the same order.
        echoed = [l for l in printed.splitlines() if l.startswith(":::MLLOG ")]
        assert echoed == lines, "stdout echo differs from mllog.txt"

        print(f"mllog interop: {len(lines)} lines, {len(errors)} epochs, eval_error "
              f"{errors[-1][1]:.4f} <= 0.124, checker: SUCCESS")


if __name__ == "__main__":
    main()
