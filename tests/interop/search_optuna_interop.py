"""Interop of `crest search`'s results with pandas and Optuna (docs/search.md, "Reading the
results"): a tiny ASHA study, then the Optuna snippet of docs/search.md, run as the docs print it
(extracted from the page, so the docs and this test cannot drift apart), must rebuild the study
in Optuna: every trial with its state, parameters, per-epoch values and the same best trial.
pandas must read trials.jsonl (the event log) and trials.csv (one row per trial) without any glue.

Run: CREST_BINARY=build/bin/crest .venv/bin/python tests/interop/search_optuna_interop.py
"""
import math
import os
import re
import subprocess
import sys
import tempfile

import optuna
import pandas as pd

CREST = os.environ.get("CREST_BINARY", "build/bin/crest")
SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def docs_snippet():
    text = open(os.path.join(SOURCE, "docs", "search.md"), encoding="utf-8").read()
    m = re.search(r"<!-- optuna-snippet -->\s*```python\n(.*?)```", text, re.S)
    if not m:
        sys.exit("docs/search.md has no <!-- optuna-snippet --> python block")
    return m.group(1)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        space = os.path.join(tmp, "space.yaml")
        with open(space, "w") as f:
            f.write("parameters:\n"
                    "  lr_schedule.base_lr: {loguniform: [1e-3, 1e-1]}\n"
                    "  data.batch_size: {choice: [2, 4]}\n"
                    "asha: {min_epochs: 1, max_epochs: 2, eta: 2}\n")
        study_dir = os.path.join(tmp, "study")
        subprocess.run(
            [CREST, "search", "--config", os.path.join(SOURCE, "configs", "cosmoflow-demo.yaml"),
             "--space", space, "--out", study_dir, "--algorithm", "asha", "--trials", "5",
             "data.n_train=16", "data.n_valid=8", "data.sample_shape=[16,16,16,4]",
             "model.input_shape=[16,16,16,4]", "model.conv_size=4", "model.n_conv_layers=2",
             "crest.threads=2", "data.n_epochs=2"],
            check=True, stdout=subprocess.DEVNULL)

        # pandas: both files, the same table, columns named by the config keys.
        # precise_float: pandas' default JSON reader rounds the last digit of some doubles.
        jsonl = pd.read_json(os.path.join(study_dir, "trials.jsonl"), lines=True,
                             precise_float=True)
        csv = pd.read_csv(os.path.join(study_dir, "trials.csv"))
        assert list(jsonl.columns) == list(csv.columns), (list(jsonl.columns), list(csv.columns))
        for col in ["trial", "status", "epoch", "lr_schedule.base_lr", "data.batch_size", "val_mae"]:
            assert col in csv.columns, col
        # The CSV is the results table: one row per trial, its final row from the log, with the
        # seconds of its epochs summed.
        final_rows = jsonl[jsonl.status != "running"].sort_values("trial").reset_index(drop=True)
        assert list(csv.trial) == sorted(jsonl.trial.unique()) == list(final_rows.trial)
        for col in ["status", "epoch", "lr_schedule.base_lr", "data.batch_size", "val_mae"]:
            assert (csv[col] == final_rows[col]).all(), col
        epoch_rows = jsonl[(jsonl.status == "running") & jsonl.val_mae.notna()]
        summed = epoch_rows.groupby("trial").seconds.sum()
        assert (csv.set_index("trial").seconds - summed).abs().max() < 1e-9

        scope = {"study_dir": study_dir}
        exec(docs_snippet(), scope)
        study = scope["study"]

        final = jsonl[jsonl.status != "running"]
        waiting = [t for t in study.trials if t.state == optuna.trial.TrialState.WAITING]
        trials = [t for t in study.trials if t.state != optuna.trial.TrialState.WAITING]
        assert len(trials) == len(final) == 5, (len(trials), len(final))
        # The enqueued trial is the best one's parameters, for Optuna's next ask().
        assert len(waiting) == 1
        assert waiting[0].system_attrs["fixed_params"] == study.best_trial.params
        states = [t.state for t in trials]
        assert states.count(optuna.trial.TrialState.COMPLETE) == (final.status == "completed").sum()
        assert states.count(optuna.trial.TrialState.PRUNED) == (final.status == "pruned").sum()
        completed = final[final.status == "completed"]
        best = completed.loc[completed.val_mae.idxmin()]
        assert math.isclose(study.best_value, best.val_mae, rel_tol=0, abs_tol=0)
        assert study.best_trial.params["lr_schedule.base_lr"] == best["lr_schedule.base_lr"]
        # Each trial's epochs are its intermediate values, pruned ones included.
        for t, (_, row) in zip(trials, final.iterrows()):
            epochs = jsonl[(jsonl.trial == row.trial) & (jsonl.status == "running")]
            assert t.intermediate_values == dict(zip(epochs.epoch, epochs.val_mae)), t.number
    print("search interop: pandas and Optuna read the study")


if __name__ == "__main__":
    main()
