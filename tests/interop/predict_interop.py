"""crest predict's HDF5 output read by h5py (issue 14: inference).

- CosmoFlow: a tiny model trained for 2 epochs, then `crest predict` over its validation split:
  the file's MAE equals the one `crest train` logged for the same weights and split (mllog
  eval_error, to 1e-12), the per-row MAEs average to it, every validation file has one row.
- The same under `mpirun -np 2`: one index file (virtual datasets over two part files) whose
  rows, keyed by source file, equal the 1-rank rows bit for bit; h5py opens it from another
  working directory.
- Every sample split spatially (dist.spatial [2,1,1]) on 2 ranks (one file) and on 4 (2 groups:
  an index over 2 parts): the rows equal the 1-rank rows within 1e-5.
- DeepCAM: a tiny model trained for one step; predict's mean IoU equals train's eval_accuracy,
  the mask is the argmax of the probabilities, and the probabilities sum to one.
- ResNet-50 (4x narrower) on JPEG folders: the rows hold the predicted class and the label,
  the top-1 equals train's eval_accuracy, the class is the argmax of the probabilities.

Run: CREST_BINARY=build/bin/crest CREST_MPIEXEC=mpirun .venv/bin/python tests/interop/predict_interop.py
"""
import json
import os
import subprocess
import sys
import tempfile

import h5py
import numpy as np

CREST = os.path.abspath(os.environ.get("CREST_BINARY", "build/bin/crest"))
MPIEXEC = os.environ.get("CREST_MPIEXEC", "mpirun")
SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def crest(args, cwd, launcher=()):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    r = subprocess.run(list(launcher) + [CREST] + args, cwd=cwd, env=env, capture_output=True,
                       text=True, timeout=600)
    if r.returncode != 0:
        sys.exit(f"crest {' '.join(args)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return r.stdout


def last_mllog(path, key):
    value = None
    with open(path) as f:
        for line in f:
            if line.startswith(":::MLLOG"):
                event = json.loads(line[len(":::MLLOG "):])
                if event["key"] == key:
                    value = event["value"]
    if value is None:
        sys.exit(f"{path}: no {key}")
    return value


def rows_by_file(path):
    with h5py.File(path) as f:
        names = [s.decode() for s in f["source_file"][:]]
        columns = {k: f[k][:] for k in f if k != "source_file"}
    return {name: {k: v[i] for k, v in columns.items()} for i, name in enumerate(names)}


def check_cosmoflow(d):
    crest(["datagen", "cosmoflow", "--out", "data", "--train", "8", "--valid", "6", "--size",
           "32", "--seed", "3"], d)
    model = [f"--config={SOURCE}/configs/cosmoflow-demo.yaml", "data.name=cosmo",
             "data.data_dir=data", "data.n_train=8", "data.n_valid=6", "data.batch_size=2",
             "data.sample_shape=[32,32,32,4]", "model.input_shape=[32,32,32,4]",
             "model.conv_size=4", "model.n_conv_layers=2", "crest.threads=2"]
    crest(["train"] + model + ["data.n_epochs=2", "output_dir=run", "--save-weights", "w.st"], d)
    # One compute thread per rank in both predictions: the same kernels, whatever the ranks.
    one_thread = [m.replace("crest.threads=2", "crest.threads=1") for m in model]
    crest(["predict"] + one_thread + ["--weights", "w.st", "--out", "one.h5"], d)
    trained_mae = last_mllog(os.path.join(d, "run", "mllog.txt"), "eval_error")
    with h5py.File(os.path.join(d, "one.h5")) as f:
        assert abs(f.attrs["mae"] - trained_mae) <= 1e-12 * trained_mae, (f.attrs["mae"], trained_mae)
        assert f["prediction"].shape == (6, 4) and f["target"].shape == (6, 4)
        assert abs(float(np.mean(f["mae"][:].astype(np.float64))) - trained_mae) < 1e-6
        per_row = np.mean(np.abs(f["prediction"][:] - f["target"][:]), axis=1)
        assert np.allclose(per_row, f["mae"][:], rtol=1e-6), (per_row, f["mae"][:])
        files = sorted(os.listdir(os.path.join(d, "data", "validation")))
        assert [os.path.basename(s.decode()) for s in f["source_file"][:]] == files

    crest(["predict"] + one_thread + ["--weights", "w.st", "--out", "two.h5"], d,
          [MPIEXEC, "--bind-to", "none", "-np", "2"])
    parts = sorted(p for p in os.listdir(d) if p.startswith("two.h5.part"))
    assert parts == ["two.h5.part0-of-2", "two.h5.part1-of-2"], parts
    one, two = rows_by_file(os.path.join(d, "one.h5")), rows_by_file(os.path.join(d, "two.h5"))
    assert one.keys() == two.keys(), (one.keys(), two.keys())
    for name, row in one.items():
        for column, value in row.items():
            assert np.array_equal(value, two[name][column]), (name, column, value, two[name][column])
    print(f"cosmoflow: predict MAE {trained_mae:.6f} = train's; 2-rank rows = 1-rank rows")

    # Every sample split in 2 along depth: one group of 2 ranks writes the one file; then 2 groups
    # of 2 write an index over 2 parts. The rows agree with one rank's to float32 rounding (the
    # split sums the convolutions' windows in another order).
    mpirun = lambda n: [MPIEXEC, "--bind-to", "none", "-np", str(n)]
    crest(["predict"] + one_thread + ["dist.spatial=[2,1,1]", "--weights", "w.st", "--out",
                                      "split.h5"], d, mpirun(2))
    crest(["predict"] + one_thread + ["dist.spatial=[2,1,1]", "--weights", "w.st", "--out",
                                      "split4.h5"], d, mpirun(4))
    assert not any(p.startswith("split.h5.part") for p in os.listdir(d))
    parts = sorted(p for p in os.listdir(d) if p.startswith("split4.h5.part"))
    assert parts == ["split4.h5.part0-of-2", "split4.h5.part1-of-2"], parts
    for out in ("split.h5", "split4.h5"):
        split = rows_by_file(os.path.join(d, out))
        assert one.keys() == split.keys(), (out, one.keys(), split.keys())
        for name, row in one.items():
            for column in ("prediction", "target", "mae"):
                assert np.allclose(row[column], split[name][column], rtol=1e-5, atol=1e-7), \
                    (out, name, column, row[column], split[name][column])
    print("cosmoflow: dist.spatial [2,1,1] rows (2 and 4 ranks) = 1-rank rows within 1e-5")


def check_deepcam(d):
    crest(["datagen", "deepcam", "--out", "ddata", "--train", "2", "--valid", "3", "--height",
           "32", "--width", "48", "--seed", "0"], d)
    with open(os.path.join(d, "dc.yaml"), "w") as f:
        f.write("output_dir: drun\n"
                "data: {name: deepcam, data_dir: ddata, sample_shape: [32, 48, 16], batch_size: 2,"
                " n_epochs: 1, seed: 1}\n"
                "model: {name: deepcam}\n"
                "optimizer: {name: LAMB, weight_decay: 0.01}\n"
                "lr_schedule: {start_lr: 0.004, type: multistep, milestones: [1000],"
                " decay_rate: 0.1, lr_warmup_steps: 4}\n"
                "train: {metrics: [iou]}\ncrest: {threads: 2}\n")
    crest(["train", "--config", "dc.yaml"], d)
    crest(["predict", "--config", "dc.yaml", "--checkpoint", "drun", "--out", "d.h5",
           "--probabilities"], d)
    trained_iou = last_mllog(os.path.join(d, "drun", "mllog.txt"), "eval_accuracy")
    with h5py.File(os.path.join(d, "d.h5")) as f:
        assert abs(f.attrs["iou"] - trained_iou) <= 1e-12, (f.attrs["iou"], trained_iou)
        mask, probs = f["mask"][:], f["probabilities"][:].astype(np.float32)
        assert mask.dtype == np.uint8 and mask.shape == (3, 32, 48), (mask.dtype, mask.shape)
        assert probs.shape == (3, 3, 32, 48) and f["probabilities"].dtype == np.float16
        assert f["mask"].compression == "gzip"
        assert np.allclose(probs.sum(axis=1), 1, atol=3e-3)
        # The mask is the argmax of the scores; float16 may tie two close probabilities.
        top = probs.max(axis=1)
        picked = np.take_along_axis(probs, mask[:, None].astype(np.int64), axis=1)[:, 0]
        assert np.all(picked >= top - 1e-3)
    print(f"deepcam: predict IoU {trained_iou:.6f} = train's; mask = argmax of probabilities")


def check_resnet(d):
    """A classifier's rows: the predicted class and the label (int64), the probabilities."""
    crest(["datagen", "imagenet", "--out", "idata", "--train", "64", "--valid", "24", "--size", "40",
           "--seed", "2"], d)
    overrides = ["data.data_dir=idata", "output_dir=irun", "data.sample_shape=[32,32,3]",
                 "model.width_divisor=4", "data.batch_size=16", "data.n_epochs=2"]
    config = os.path.join(SOURCE, "configs", "resnet50-demo.yaml")
    crest(["train", "--config", config, *overrides], d)
    crest(["predict", "--config", config, *overrides, "--checkpoint", "irun", "--out", "i.h5",
           "--probabilities"], d)
    trained_top1 = last_mllog(os.path.join(d, "irun", "mllog.txt"), "eval_accuracy")
    with h5py.File(os.path.join(d, "i.h5")) as f:
        assert abs(f.attrs["top1"] - trained_top1) <= 1e-12, (f.attrs["top1"], trained_top1)
        cls, label = f["class"][:], f["label"][:]
        probs = f["probabilities"][:].astype(np.float32)
        assert cls.dtype == np.int64 and cls.shape == (24,) and label.shape == (24,)
        assert probs.shape == (24, 10) and f["probabilities"].dtype == np.float16
        assert np.array_equal(label, [int(p.split(b"/class")[1][:3]) for p in f["source_file"][:]])
        assert np.isclose((cls == label).mean(), trained_top1)
        assert np.array_equal(f["top1"][:], (cls == label).astype(np.float32))
        assert np.allclose(probs.sum(axis=1), 1, atol=3e-3)
        picked = np.take_along_axis(probs, cls[:, None], axis=1)[:, 0]
        assert np.all(picked >= probs.max(axis=1) - 1e-3)
    print(f"resnet50: predict top-1 {trained_top1:.4f} = train's; class = argmax of probabilities")


def main():
    with tempfile.TemporaryDirectory() as d:
        check_cosmoflow(d)
        check_deepcam(d)
        check_resnet(d)


if __name__ == "__main__":
    main()
