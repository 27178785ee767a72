"""crest.train: the CLI's trainer in-process, the same run bit for bit, callbacks that steer it."""
import json
import os

import numpy as np
import pytest

import crest
from conftest import LEARNABLE_COSMOFLOW, run_crest


def weights_of(config, path):
    return crest.Model(config, weights=path).state_dict()


def test_two_epochs_are_the_clis_run_bit_for_bit(cosmo_config, cosmo_overrides, tmp_path):
    cli_dir, cli_weights = tmp_path / "cli", tmp_path / "cli.safetensors"
    run_crest("train", "--config", LEARNABLE_COSMOFLOW, "--save-weights", str(cli_weights),
              *cosmo_overrides, f"output_dir={cli_dir}", "train.report=true")
    py_weights = tmp_path / "py.safetensors"
    seen = []
    history = crest.train(cosmo_config, callbacks=[lambda epoch, run: seen.append(epoch)],
                          save_weights=py_weights, quiet=True)

    assert history.status == "success" and history.exit_code == 0
    assert history.steps == 8  # 2 epochs of 32 samples, batch 8
    assert [e["epoch"] for e in history.epochs] == [1, 2]
    assert seen == history.epochs
    cli = json.load(open(cli_dir / "report.json"))["epochs"]
    for mine, theirs in zip(history.epochs, cli, strict=True):
        for key in ("train_loss", "val_loss", "lr"):
            assert mine[key] == pytest.approx(theirs[key], rel=1e-13), key
        assert mine["val_metrics"]["mae"] == pytest.approx(theirs["val_mae"], rel=1e-13)
    a, b = weights_of(cosmo_config, cli_weights), weights_of(cosmo_config, py_weights)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert os.path.isfile(history.last_checkpoint)
    assert history["train_loss"] == [e["train_loss"] for e in history.epochs]


def test_a_callback_stops_the_run(cosmo_config):
    config = cosmo_config.with_overrides("data.n_epochs=3")

    def stop_after_first(epoch, run):
        if epoch["epoch"] == 1:
            run.stop("seen enough")

    history = crest.train(config, callbacks=[stop_after_first], quiet=True)
    assert [e["epoch"] for e in history.epochs] == [1]
    assert history.stop_reason == "seen enough"
    assert history.status == "success"
    assert os.path.isfile(history.last_checkpoint)  # a stop keeps its checkpoint


def test_a_callback_asks_for_a_checkpoint(cosmo_config):
    config = cosmo_config.with_overrides("data.n_epochs=3", "train.checkpoint_keep=5")

    def after_first(epoch, run):
        if epoch["epoch"] == 1:
            run.checkpoint()

    crest.train(config, callbacks=[after_first], quiet=True)
    names = sorted(os.listdir(os.path.join(config.output_dir, "checkpoints")))
    # checkpoint_every 0 writes only the last; the request adds the first epoch's (step 4).
    assert names == ["ckpt-000000000004.safetensors", "ckpt-000000000012.safetensors"]


def test_an_exception_in_a_callback_stops_the_run_and_is_raised(cosmo_config):
    config = cosmo_config.with_overrides("data.n_epochs=3")
    calls = []

    def fails(epoch, run):
        calls.append(epoch["epoch"])
        raise ValueError("callback failed on purpose")

    with pytest.raises(ValueError, match="on purpose"):
        crest.train(config, callbacks=[fails], quiet=True)
    assert calls == [1]  # the run ended after that epoch
    status = json.load(open(os.path.join(config.output_dir, "status.json")))
    assert status["epochs_done"] == 1


def test_a_run_error_is_raised_with_the_clis_message_and_exit_code(cosmo_config, tmp_path):
    config = cosmo_config.with_overrides(f"data.data_dir={tmp_path / 'no-data'}")
    with pytest.raises(crest.InputError, match="no-data") as e:
        crest.train(config, quiet=True)
    assert e.value.exit_code == 2


def test_an_earlier_run_is_kept_unless_overwrite_or_resume(cosmo_config):
    crest.train(cosmo_config, quiet=True)
    with pytest.raises(crest.Error, match="--overwrite"):
        crest.train(cosmo_config, quiet=True)
    more = cosmo_config.with_overrides("data.n_epochs=3")
    resumed = crest.train(more, resume=True, quiet=True)
    assert [e["epoch"] for e in resumed.epochs][-1] == 3
    again = crest.train(cosmo_config, overwrite=True, quiet=True)
    assert [e["epoch"] for e in again.epochs] == [1, 2]


DRIVER = """
import sys
import crest
config = crest.Config.load(sys.argv[1], overrides=sys.argv[3:])
crest.train(config, save_weights=sys.argv[2], quiet=True)
"""


def test_two_ranks_under_mpirun_are_the_clis_two_rank_run(cosmo_overrides, tmp_path):
    import subprocess
    import sys

    from conftest import CREST

    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    mpirun = [os.environ.get("CREST_MPIEXEC", "mpirun"), "--bind-to", "none", "-np", "2"]
    # Batch 4 per rank: the 8 validation samples give each of the 2 ranks a full batch.
    overrides = [*cosmo_overrides, "data.batch_size=4", "train.report=true", "crest.threads=1"]
    driver = tmp_path / "train.py"
    driver.write_text(DRIVER)
    runs = {
        "cli": [CREST, "train", "--config", LEARNABLE_COSMOFLOW, "--save-weights"],
        "python": [sys.executable, str(driver), LEARNABLE_COSMOFLOW],
    }
    for name, command in runs.items():
        weights = str(tmp_path / f"{name}.safetensors")
        r = subprocess.run([*mpirun, *command, weights, *overrides, f"output_dir={tmp_path / name}"],
                           capture_output=True, text=True, env=env, timeout=600)
        assert r.returncode == 0, f"{name}: exit {r.returncode}\n{r.stdout}{r.stderr}"
    reports = [json.load(open(tmp_path / name / "report.json")) for name in runs]
    assert [r["run"]["ranks"] for r in reports] == [2, 2]
    figures = ("epoch", "lr", "train_loss", "val_loss", "val_mae")  # not the times
    for a, b in zip(reports[0]["epochs"], reports[1]["epochs"], strict=True):
        assert {k: a[k] for k in figures} == {k: b[k] for k in figures}
    config = crest.Config.load(LEARNABLE_COSMOFLOW, overrides=overrides)
    a = weights_of(config, tmp_path / "cli.safetensors")
    b = weights_of(config, tmp_path / "python.safetensors")
    assert all(np.array_equal(a[k], b[k]) for k in a)


MPI4PY_DRIVER = """
import sys
from mpi4py import MPI
import crest
world = MPI.COMM_WORLD
mode, fixture, out, *overrides = sys.argv[1:]
# split: each rank trains alone on a communicator of its own; world: both ranks together.
comm = world.Split(color=world.rank, key=0) if mode == "split" else world
run = f"{out}-{world.rank}" if mode == "split" else out
config = crest.Config.load(fixture, overrides=[*overrides, f"output_dir={run}"])
crest.train(config, comm=comm, save_weights=run + ".safetensors", quiet=True)
"""


def test_an_mpi4py_communicator_chooses_the_ranks(cosmo_overrides, tmp_path):
    pytest.importorskip("mpi4py", reason="mpi4py is not installed (tests/interop/requirements.txt)")
    import subprocess
    import sys

    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    mpirun = [os.environ.get("CREST_MPIEXEC", "mpirun"), "--bind-to", "none", "-np", "2"]
    overrides = [*cosmo_overrides, "data.batch_size=4", "crest.threads=1"]
    driver = tmp_path / "train.py"
    driver.write_text(MPI4PY_DRIVER)
    for mode in ("split", "world"):
        r = subprocess.run([*mpirun, sys.executable, str(driver), mode, LEARNABLE_COSMOFLOW,
                            str(tmp_path / mode), *overrides],
                           capture_output=True, text=True, env=env, timeout=600)
        assert r.returncode == 0, f"{mode}: exit {r.returncode}\n{r.stdout}{r.stderr}"
    run_crest("train", "--config", LEARNABLE_COSMOFLOW, "--save-weights",
              str(tmp_path / "alone.safetensors"), *overrides, f"output_dir={tmp_path / 'alone'}")
    config = crest.Config.load(LEARNABLE_COSMOFLOW, overrides=overrides)
    alone = weights_of(config, tmp_path / "alone.safetensors")
    together = weights_of(config, tmp_path / "world.safetensors")
    for rank in (0, 1):  # each rank on its own communicator is the one-process run
        mine = weights_of(config, tmp_path / f"split-{rank}.safetensors")
        assert all(np.array_equal(mine[k], alone[k]) for k in alone)
    # Both ranks on one communicator train with the global batch 8: another run.
    assert not np.array_equal(together["conv1.weight"], alone["conv1.weight"])
    status = json.load(open(tmp_path / "world" / "status.json"))
    assert status["global_step"] == 8  # 32 samples, 2 ranks x 4 per step, 2 epochs


SIGNAL_DRIVER = """
import json, sys
import numpy  # a foreign library's threads, started before crest's
import crest
config = crest.Config.load(sys.argv[1], overrides=sys.argv[2:])
history = crest.train(config, callbacks=[lambda e, run: print("epoch", e["epoch"], flush=True)],
                      quiet=True)
print(json.dumps({"status": history.status, "exit_code": history.exit_code,
                  "epochs": len(history.epochs), "checkpoint": history.last_checkpoint}))
"""


@pytest.mark.parametrize("signal_name", ["SIGTERM", "SIGINT"])
def test_a_stop_signal_ends_the_run_with_a_checkpoint(cosmo_overrides, tmp_path, signal_name):
    import signal
    import subprocess
    import sys

    driver = tmp_path / "train.py"
    driver.write_text(SIGNAL_DRIVER)
    p = subprocess.Popen([sys.executable, str(driver), LEARNABLE_COSMOFLOW, *cosmo_overrides,
                          "data.n_epochs=1000"], stdout=subprocess.PIPE, text=True)
    try:
        first = p.stdout.readline()  # the first epoch's callback: the run is training
        assert first.strip() == "epoch 1", first
        p.send_signal(getattr(signal, signal_name))
        out, _ = p.communicate(timeout=300)
    finally:
        p.kill()
    assert p.returncode == 0, out  # crest.train returned; Python went on
    result = json.loads(out.strip().splitlines()[-1])
    assert result["status"] == "preempted", result
    assert result["epochs"] < 1000
    assert os.path.isfile(result["checkpoint"])
