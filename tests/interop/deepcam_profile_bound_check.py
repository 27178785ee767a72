"""scripts/deepcam_profile_bound.py against a real DeepCAM profile (docs/performance.md quotes it).

A tiny `crest bench train --model deepcam --profile` run (32×48, batch 1, one step) is summed by
the script. The checks:

  * its name rules put DeepCAM's convolutions in the classes the architecture has (DEEPCAM.md):
    72 1x1 (63 pointwise, 4 skips, ASPP 1x1, pooling 1x1, bottleneck 1x1, low-level projection,
    decoder 1x1), 63 depthwise, 7 dense 3x3 (entry conv1/conv2, three ASPP atrous, two decoder),
    4 transposed; a renamed layer would fall into the wrong class and fail here;
  * the classes' FLOPs add up to the run's gflop_per_sample × batch (no layer lost or counted twice);
  * the update row is the run's optimizer time, the per-class times add up to step_ms, and the
    goal arithmetic follows from them;
  * a file without a DeepCAM bench line exits non-zero naming the file.

Run: CREST_BINARY=build/bin/crest python3 tests/interop/deepcam_profile_bound_check.py
"""
import collections
import importlib.util
import json
import os
import subprocess
import sys
import tempfile

from crest_run import run, strict_json

CREST = os.environ.get("CREST_BINARY", "build/bin/crest")
SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(SOURCE, "scripts", "deepcam_profile_bound.py")


def load_script():
    spec = importlib.util.spec_from_file_location("deepcam_profile_bound", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def profile(path):
    out = run([CREST, "bench", "train", "--model", "deepcam", "--height", "32", "--width", "48",
               "--batch", "1", "--steps", "1", "--warmup", "0", "--threads", "1",
               "--precision", "float32", "--profile"])
    with open(path, "w") as f:
        f.write(out)
    lines = [strict_json(l) for l in out.splitlines() if l.startswith("{")]
    return next(l for l in lines if l.get("bench") == "train"), [l for l in lines if "layer" in l]


def check_classes(script, layers):
    counts = collections.Counter(script.layer_class(l["layer"], l["kind"])
                                 for l in layers if l["kind"] in ("conv", "conv_transpose"))
    want = {"1x1": 72, "depthwise": 63, "3x3 dense": 7, "deconv": 4}
    assert dict(counts) == want, f"classes {dict(counts)}, the architecture has {want}"


def check_summary(path, run_line, peer):
    out = run([sys.executable, SCRIPT, path, "--peer-samples-per-s", str(peer), "--goal", "3"])
    rows = [strict_json(l) for l in out.splitlines() if l.startswith("{")]
    classes, total = rows[:-1], rows[-1]
    assert [c["class"] for c in classes] == ["1x1", "3x3 dense", "deconv", "depthwise", "other", "update"]
    gflop = sum(c["gflop"] for c in classes)
    want = run_line["gflop_per_sample"] * run_line["batch"]
    assert abs(gflop - want) <= 0.01 * want + 0.05, f"classes hold {gflop} GFLOP, the run {want}"
    assert abs(sum(c["ms"] for c in classes) - total["step_ms"]) < 0.5, total
    assert abs(classes[-1]["ms"] - 1000 * run_line["update_s_min"]) < 0.1, classes[-1]
    allowed = run_line["batch"] / (3 * peer) * 1000
    assert abs(total["allowed_step_ms"] - allowed) < 0.1, total
    fixed = sum(c["ms"] for c in classes if c["class"] not in ("3x3 dense", "deconv"))
    assert abs(total["fixed_ms"] - fixed) < 0.5, total
    assert abs(total["left_for_3x3_and_deconv_ms"] - (allowed - fixed)) < 0.5, total


def check_refuses(tmp):
    bad = os.path.join(tmp, "cosmoflow.txt")
    with open(bad, "w") as f:
        f.write(json.dumps({"bench": "train", "model": "cosmoflow", "batch": 1}) + "\n")
    r = subprocess.run([sys.executable, SCRIPT, bad], capture_output=True, text=True)
    assert r.returncode != 0 and bad in r.stderr, (r.returncode, r.stderr)


def main():
    script = load_script()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "profile.txt")
        run_line, layers = profile(path)
        check_classes(script, layers)
        # a peer this slow leaves time for everything; the arithmetic is what is checked
        check_summary(path, run_line, peer=0.01)
        check_refuses(tmp)
    print("deepcam_profile_bound: ok")


if __name__ == "__main__":
    main()
