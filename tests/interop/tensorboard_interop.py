"""Interop of crest's TensorBoard event files with TensorBoard itself (issue: run records).

Two sources of event files: the unit test TensorBoardWriter.WritesInteropFile (which writes
into $CREST_TB_INTEROP_DIR when that is set: edge values such as NaN, infinities, huge steps), and
a short `crest train` run, whose output_dir/tensorboard/ must hold the epoch scalars the log
prints. TensorBoard's EventAccumulator (the code behind its scalar dashboard) then has to
find the file by name, accept its file_version, and give back every scalar with its tag, step,
wall time and value (rounded to float32, NaN and infinities included). Its record reader checks
the TFRecord CRCs, so a framing mistake fails here too.

Run: CREST_TESTS_BINARY=build/bin/crest_tests CREST_BINARY=build/bin/crest \
     .venv/bin/python tests/interop/tensorboard_interop.py
"""
import math
import os
import struct
import subprocess
import sys
import tempfile

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.backend.event_processing.event_file_loader import RawEventFileLoader
from tensorboard.compat.proto import event_pb2

CREST_TESTS = os.environ.get("CREST_TESTS_BINARY", "build/bin/crest_tests")
CREST = os.environ.get("CREST_BINARY", "build/bin/crest")
SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Must match interop_scalars() in tests/unit/tensorboard_test.cpp, in the same order.
EXPECTED = [
    ("loss/train", 0, 2.5), ("lr", 0, 0.001), ("loss/train", 1, 0.1),
    ("lr", 1, 0.002), ("loss/train", 2, 1e-8), ("lr", 2, 0.0005),
    ("loss/valid", 2, 0.75), ("odd", 10, math.nan), ("odd", 11, math.inf),
    ("odd", 12, -math.inf), ("big", 1 << 40, -3.25),
]


def f32(v):
    return struct.unpack("<f", struct.pack("<f", v))[0]


def wall_time(step):
    return 1700000000.5 + (step if step < 1000 else 0)


def same(a, b):
    return (math.isnan(a) and math.isnan(b)) or a == b


def write_event_file(logdir):
    env = dict(os.environ, CREST_TB_INTEROP_DIR=logdir)
    r = subprocess.run([CREST_TESTS, "--gtest_filter=TensorBoardWriter.WritesInteropFile"],
                       capture_output=True, text=True, env=env)
    out = r.stdout + r.stderr
    if r.returncode != 0 or "[  PASSED  ] 1 test" not in out or "SKIPPED" in out:
        raise AssertionError(f"{CREST_TESTS} exited {r.returncode}:\n{out}")
    files = os.listdir(logdir)
    assert len(files) == 1 and files[0].startswith("events.out.tfevents."), files
    return os.path.join(logdir, files[0])


def check_accumulator(logdir):
    acc = EventAccumulator(logdir)
    acc.Reload()
    assert acc.file_version == 2.0, acc.file_version
    tags = sorted(acc.Tags()["scalars"])
    want_tags = sorted({tag for tag, _, _ in EXPECTED})
    assert tags == want_tags, (tags, want_tags)
    for tag in want_tags:
        want = [(step, f32(v)) for t, step, v in EXPECTED if t == tag]
        got = acc.Scalars(tag)
        assert len(got) == len(want), (tag, got, want)
        for event, (step, value) in zip(got, want):
            assert event.step == step, (tag, event, step)
            assert same(event.value, value), (tag, event, value)
            assert event.wall_time == wall_time(step), (tag, event, wall_time(step))
    # Rounded to float32, not stored as the double: 0.1 comes back as 0.10000000149011612.
    assert acc.Scalars("loss/train")[1].value != 0.1


def check_raw_records(path):
    # Every record, in order, through TensorBoard's record reader (CRCs checked) and the real
    # Event proto: the file_version record first, then one event per scalar.
    events = [event_pb2.Event.FromString(r) for r in RawEventFileLoader(path).Load()]
    assert len(events) == len(EXPECTED) + 1, len(events)
    assert events[0].file_version == "brain.Event:2", events[0]
    assert not events[0].HasField("summary"), events[0]
    for event, (tag, step, value) in zip(events[1:], EXPECTED):
        assert event.step == step and event.wall_time == wall_time(step), event
        assert len(event.summary.value) == 1, event
        v = event.summary.value[0]
        assert v.tag == tag and v.WhichOneof("value") == "simple_value", event
        assert same(v.simple_value, f32(value)), (event, value)


def check_training_run(tmp):
    """`crest train` writes per-epoch scalars that match its own log lines."""
    out_dir = os.path.join(tmp, "train-run")
    r = subprocess.run([CREST, "train", "--config", os.path.join(SOURCE, "configs", "cosmoflow-demo.yaml"),
                        "data.n_epochs=2", "data.n_train=16", "data.n_valid=8", f"output_dir={out_dir}"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    logged = {}
    for line in r.stdout.splitlines():
        if line.startswith("epoch "):
            words = line.split()
            epoch = int(words[1].split("/")[0])
            logged[epoch] = {words[i]: float(words[i + 1]) for i in range(2, len(words) - 1)
                             if words[i] in ("loss", "val_loss", "val_mae", "lr")}
    assert sorted(logged) == [1, 2], r.stdout
    acc = EventAccumulator(os.path.join(out_dir, "tensorboard"))
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    want = {"train/loss", "train/learning_rate", "train/samples_per_s", "train/data_wait_pct",
            "validation/loss", "validation/mae", "train/loss_step"}
    assert want <= tags, tags
    for tag, key in [("train/loss", "loss"), ("validation/loss", "val_loss"),
                     ("validation/mae", "val_mae"), ("train/learning_rate", "lr")]:
        events = acc.Scalars(tag)
        assert [e.step for e in events] == [1, 2], (tag, events)
        for e in events:
            assert abs(e.value - logged[e.step][key]) <= 1e-4 + 1e-4 * abs(e.value), (tag, e, logged[e.step])
    steps = [e.step for e in acc.Scalars("train/loss_step")]
    assert steps == list(range(1, len(steps) + 1)) and len(steps) == 2 * 16 // 4, steps


def main():
    with tempfile.TemporaryDirectory(prefix="crest-tb-interop-") as tmp:
        logdir = os.path.join(tmp, "run")
        path = write_event_file(logdir)
        check_accumulator(logdir)
        check_raw_records(path)
        check_training_run(tmp)
    print("tensorboard interop: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
