"""crest export's ONNX models in ONNX's own checker and in ONNX Runtime (docs/export.md).

For a tiny CosmoFlow (16^3, two conv blocks: the flatten sees a 4^3 x 8 map, so its
channels-last order matters), a tiny DeepCAM (32 x 48, every DeepLabv3+ op: dilated and
strided convolutions, batch norm, the image-pool branch's expand, concat, transposed
convolutions), ResNet-50 4x narrower at 32 x 32 (max pooling, residual adds, downsample
branches, global pooling, the classifier) and a three-block Tiramisu at 32 x 48 (dense
concatenations, TensorFlow's 'same' transposed convolutions, dropout): seeded initial weights are exported as safetensors, every tensor is perturbed
(biases and batch-norm statistics are otherwise zeros and ones, which would hide a wrong
mapping) and written back, and the model is exported as ONNX from that file with
--check-with, which also writes crest's own inference prediction on the same random inputs.
onnx.checker (full check, with shape inference) must accept the file and ONNX Runtime's output
must equal crest's to 1e-4 relative, for the dynamic batch (run at two batch sizes) and a fixed
one.

The small test graphs (tests/support/small_models.hpp: grouped, dilated and bias-free
convolutions, average and global pooling, sigmoid, dropout, add, a plain-layout input) come from
the gtest OnnxExport.* (tests/unit/onnx_export_test.cpp), which writes each model, a random input
and crest's prediction into $CREST_ONNX_INTEROP_DIR; the same checks apply.

Run: CREST_BINARY=build/bin/crest CREST_TESTS_BINARY=build/bin/crest_tests \
     .venv/bin/python tests/interop/onnx_interop.py
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort

CREST = os.environ.get("CREST_BINARY", "build/bin/crest")
CREST_TESTS = os.environ.get("CREST_TESTS_BINARY", "build/bin/crest_tests")
SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(SOURCE, "tests", "fixtures"))
from safetensors_np import read_safetensors, write_safetensors  # noqa: E402

MODELS = {
    "cosmoflow": (["--config", os.path.join(SOURCE, "configs/cosmoflow-demo.yaml"),
                   "data.sample_shape=[16,16,16,4]", "model.input_shape=[16,16,16,4]",
                   "model.conv_size=4", "model.n_conv_layers=2", "crest.threads=2"],
                  (16, 16, 16, 4), "y"),
    "deepcam": (["--config", os.path.join(SOURCE, "configs/deepcam-demo.yaml"),
                 "data.sample_shape=[32,48,4]", "model.input_shape=[32,48,4]",
                 "crest.threads=2"],
                (32, 48, 4), "logits"),
    # ResNet-50 v1.5, 4x narrower (every layer: the stride-2 3x3s, the downsample branches),
    # on 32 x 32 RGB crops.
    "resnet50": (["--config", os.path.join(SOURCE, "configs/resnet50-demo.yaml"),
                  "data.sample_shape=[32,32,3]", "model.input_shape=[32,32,3]",
                  "model.width_divisor=4", "crest.threads=2"],
                 (32, 32, 3), "logits"),
    # The Tiramisu reduced to three blocks: 5x5 'same' convolutions, dense concatenations,
    # stride-2 1x1 transitions down, TensorFlow-'same' transposed convolutions up.
    "tiramisu": (["--config", os.path.join(SOURCE, "configs/tiramisu-demo.yaml"),
                  "data.sample_shape=[32,48,4]", "model.input_shape=[32,48,4]",
                  "model.blocks=[2,2,3]", "model.growth_rate=4", "model.initial_filters=8",
                  "crest.threads=2"],
                 (32, 48, 4), "logits"),
}
TOLERANCE = 1e-4


def crest(*args):
    r = subprocess.run([CREST, "export", *args], capture_output=True, text=True)
    assert r.returncode == 0, f"crest export {' '.join(args)} failed:\n{r.stdout}{r.stderr}"


def perturbed_weights(model_args, tmp, rng):
    """Seeded initial weights with every float tensor moved off its initial value."""
    initial = os.path.join(tmp, "initial.safetensors")
    crest(*model_args, "--init-seed", "7", "--format", "safetensors", "--out", initial)
    tensors, meta = read_safetensors(initial)
    out = {}
    for name, t in tensors.items():
        if t.dtype != np.float32:
            out[name] = t.copy()
        elif name.endswith("running_var"):
            out[name] = rng.uniform(0.5, 1.5, t.shape).astype(np.float32)
        else:
            scale = 0.1 * max(float(np.std(t)), 0.1)
            out[name] = (t + rng.normal(0, scale, t.shape)).astype(np.float32)
    path = os.path.join(tmp, "weights.safetensors")
    write_safetensors(path, out, meta)
    return path


def relative_error(got, want):
    return float(np.abs(got - want).max() / max(float(np.abs(want).max()), 1e-30))


def check_model(name):
    model_args, sample, output = MODELS[name]
    rng = np.random.default_rng(42)
    with tempfile.TemporaryDirectory() as tmp:
        weights = perturbed_weights(model_args, tmp, rng)
        x = rng.standard_normal((3, *sample)).astype(np.float32)
        np.save(os.path.join(tmp, "x.npy"), x)
        for batch in ("dynamic", "3"):
            path = os.path.join(tmp, f"{name}-{batch}.onnx")
            crest(*model_args, "--weights", weights, "--out", path, "--batch", batch,
                  "--check-with", os.path.join(tmp, "x.npy"), "--check-out",
                  os.path.join(tmp, "want.npy"), "--overwrite")
            want = np.load(os.path.join(tmp, "want.npy"))
            model = onnx.load(path)
            onnx.checker.check_model(model, full_check=True)
            assert max(o.version for o in model.opset_import) >= 17
            inputs = model.graph.input
            assert [i.name for i in inputs] == ["x"], inputs
            dims = inputs[0].type.tensor_type.shape.dim
            assert [d.dim_value for d in dims[1:]] == list(sample), dims
            assert (dims[0].dim_param == "N") if batch == "dynamic" else dims[0].dim_value == 3
            session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
            assert [o.name for o in session.get_outputs()] == [output]
            got = session.run(None, {"x": x})[0]
            assert got.shape == want.shape, (got.shape, want.shape)
            err = relative_error(got, want)
            assert err <= TOLERANCE, f"{name} batch {batch}: ONNX Runtime differs by {err:.3g}"
            # A batch crest did not compile for: each sample alone gives the same prediction.
            if batch == "dynamic":
                one = session.run(None, {"x": x[1:2]})[0]
                assert relative_error(one, want[1:2]) <= TOLERANCE
            print(f"{name} (batch {batch}): checker ok, ONNX Runtime = crest to {err:.2g}")


def check_small_graphs():
    with tempfile.TemporaryDirectory() as tmp:
        r = subprocess.run([CREST_TESTS, "--gtest_filter=OnnxExport.*"], capture_output=True,
                           text=True, env={**os.environ, "CREST_ONNX_INTEROP_DIR": tmp})
        assert r.returncode == 0, r.stdout + r.stderr
        names = sorted(f[:-5] for f in os.listdir(tmp) if f.endswith(".onnx"))
        assert names == ["branchy", "pooling3d", "segmentation"], names
        for name in names:
            path = os.path.join(tmp, name + ".onnx")
            onnx.checker.check_model(onnx.load(path), full_check=True)
            x = np.load(os.path.join(tmp, name + ".x.npy"))
            want = np.load(os.path.join(tmp, name + ".y.npy"))
            session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
            got = session.run(None, {"x": x})[0]
            assert got.shape == want.shape, (name, got.shape, want.shape)
            err = relative_error(got, want)
            assert err <= TOLERANCE, f"{name}: ONNX Runtime differs by {err:.3g}"
            print(f"{name}: checker ok, ONNX Runtime = crest to {err:.2g}")


def main():
    check_small_graphs()
    for name in MODELS:
        check_model(name)
    print("onnx interop: ok")


if __name__ == "__main__":
    main()
