#!/usr/bin/python3
"""Writes the seed corpora of tests/fuzz/corpus/<harness>/ (docs/security.md, "Fuzzing").

Small valid inputs of each format, so libFuzzer starts from the inside of every parser: the
format fixtures of tests/fixtures/formats (copied), plus files made here with independent
implementations (CRC-32C, safetensors framing, gzip) and, for HDF5, a small C program on the
HDF5 library (make_hdf5_seeds.c, built with h5cc). Needs python3 and libhdf5-dev.

    python3 tests/fuzz/make_corpus.py
"""
import gzip
import json
import os
import sys
import shutil
import struct

import subprocess
import tempfile
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures"))
from tfrecord_framing import crc32c, frame  # noqa: E402  (shared with the other script)

ROOT = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(ROOT))
FIXTURES = os.path.join(REPO, "tests", "fixtures")
CORPUS = os.path.join(ROOT, "corpus")
RS = b"\x1e"  # fuzz_checkpoint's entry separator


def varint(v: int) -> bytes:
    out = b""
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def field(number: int, wire: int, payload: bytes) -> bytes:
    key = varint(number << 3 | wire)
    return key + (varint(len(payload)) + payload if wire == 2 else payload)


def example(features: dict) -> bytes:
    """features: name -> ('bytes', [b..]) | ('floats', [f..]) | ('int64s', [i..])."""
    entries = b""
    for name in sorted(features):
        kind, values = features[name]
        if kind == "bytes":
            lst = b"".join(field(1, 2, v) for v in values)
            feature = field(1, 2, lst)
        elif kind == "floats":
            feature = field(2, 2, field(1, 2, struct.pack("<%df" % len(values), *values)))
        else:
            feature = field(3, 2, field(1, 2, b"".join(varint(v & (2**64 - 1)) for v in values)))
        entries += field(1, 2, field(1, 2, name.encode()) + field(2, 2, feature))
    return field(1, 2, entries)


def safetensors(tensors: dict, metadata: dict) -> bytes:
    """tensors: name -> (dtype, shape, raw bytes), laid out in name order."""
    header, data = {}, b""
    for name in sorted(tensors):
        dtype, shape, raw = tensors[name]
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data),
                                                                          len(data) + len(raw)]}
        data += raw
    if metadata:
        header["__metadata__"] = metadata
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def checkpoint_metadata() -> dict:
    return {
        "format": "crest checkpoint 1", "crest_version": "0.1.0", "epoch": "1",
        "step_in_epoch": "0", "global_step": "4", "executor_steps": "4",
        "optimizer_steps": "4", "epoch_loss_sum": "0x0p+0", "best_val_loss": "inf",
        "epochs_since_best": "0", "status": "", "rollbacks": "0",
        "history": "0 0x1p-3 0x1.8p-1 1 0x1p-1 mae=0x1p-2,mse=0x1p-4 0x1p+0 0x1p+4 0x1p-1 "
                   "0x0p+0 0x0p+0 0x0p+0 0 0\n",
        "ranks": "1", "batch_size": "2", "steps_per_epoch": "4", "optimizer": "sgd",
        "config": "output_dir: run\n",
    }


def checkpoint() -> bytes:
    """A crest checkpoint: two tensors and the metadata with its CRC32C content checksum."""
    md = checkpoint_metadata()
    tensors = {"model/w": ("F32", [2], struct.pack("<2f", 0.5, -1.0)),
               "optimizer/momentum/w": ("F32", [2], struct.pack("<2f", 0.0, 0.25))}
    text = b"".join(k.encode() + b"=" + md[k].encode() + b"\n" for k in sorted(md))
    text += b"".join(n.encode() + tensors[n][2] for n in sorted(tensors))
    md["checksum"] = "crc32c:%08x" % crc32c(text)
    return safetensors(tensors, md)


def put(harness: str, name: str, data: bytes) -> None:
    os.makedirs(os.path.join(CORPUS, harness), exist_ok=True)
    with open(os.path.join(CORPUS, harness, name), "wb") as f:
        f.write(data)


def copy(harness: str, path: str) -> None:
    with open(path, "rb") as f:
        put(harness, os.path.basename(path), f.read())


def hdf5_seeds() -> dict:
    """make_hdf5_seeds.c, built with h5cc (Debian's libhdf5-dev), writes them."""
    tmp = tempfile.mkdtemp()
    try:
        exe = os.path.join(tmp, "make_hdf5_seeds")
        subprocess.run(["h5cc", "-o", exe, os.path.join(ROOT, "make_hdf5_seeds.c")], check=True,
                       cwd=tmp)
        subprocess.run([exe, tmp], check=True)
        out = {}
        for name in sorted(os.listdir(tmp)):
            if name.endswith(".h5"):
                with open(os.path.join(tmp, name), "rb") as f:
                    out[name] = f.read()
        return out
    finally:
        shutil.rmtree(tmp)


def main():
    shutil.rmtree(CORPUS, ignore_errors=True)
    formats = os.path.join(FIXTURES, "formats")
    cosmo = example({"x": ("bytes", [bytes(range(16))]), "y": ("floats", [0.5, -1.0, 2.0, 0.25]),
                     "shape": ("int64s", [2, 2, 2, 1, -1])})
    plain = frame(cosmo) + frame(b"") + frame(example({"y": ("floats", [1.0])}))

    # TFRecord framing.
    copy("fuzz_tfrecord", os.path.join(formats, "example_y.tfrecord"))
    put("fuzz_tfrecord", "cosmo_three.tfrecord", plain)
    # gzip: even first byte = the file as it is, odd = framing the harness gzips itself.
    for name in ("three_records.tfrecord.gz", "two_members.tfrecord.gz"):
        with open(os.path.join(formats, name), "rb") as f:
            put("fuzz_tfrecord_gzip", name, b"\x00" + f.read())
    put("fuzz_tfrecord_gzip", "cosmo.gz", b"\x00" + gzip.compress(plain, 6, mtime=0))
    put("fuzz_tfrecord_gzip", "cosmo_framing_one_member", b"\x01\x00" + plain)
    put("fuzz_tfrecord_gzip", "cosmo_framing_two_members", b"\x01\xc0" + plain)
    # tf.train.Example payloads.
    put("fuzz_example", "cosmo", cosmo)
    put("fuzz_example", "y", example({"y": ("floats", [1.0])}))
    put("fuzz_example", "bytes_list", example({"a": ("bytes", [b"", b"xy", b"z" * 20])}))
    # npy: numpy's own files.
    for name in sorted(os.listdir(formats)):
        if name.endswith(".npy"):
            copy("fuzz_npy", os.path.join(formats, name))
    # safetensors.
    copy("fuzz_safetensors", os.path.join(FIXTURES, "numpy_written.safetensors"))
    put("fuzz_safetensors", "mixed.safetensors", safetensors(
        {"a": ("F32", [2, 2], struct.pack("<4f", 1, 2, 3, 4)),
         "b": ("I64", [], struct.pack("<q", -5)),
         "c": ("BF16", [3], b"\x80\x3f" * 3), "d": ("BOOL", [0, 4], b"")},
        {"note": "seed"}))
    # Checkpoints: even first byte = the file, odd = metadata entries over a valid checkpoint.
    put("fuzz_checkpoint", "checkpoint", b"\x00" + checkpoint())
    put("fuzz_checkpoint", "entries", b"\x01" + RS.join([
        b"history=0 0x1p-3 0x1p-1 0 nan - 1 2 3 4 5 6 7 8\n1 0x1p-4 0x1p-2 1 0x1p-3 0x1p-1 "
        b"1 2 3 4 5 6 7 8", b"rollbacks=2", b"best_val_loss=0x1.2p+3"]))
    # HDF5.
    h5 = hdf5_seeds()
    for name, data in h5.items():
        put("fuzz_hdf5", name, data)
    # inspect: one file of each format.
    put("fuzz_inspect", "plain.tfrecord", plain)
    put("fuzz_inspect", "cosmo.tfrecord.gz", gzip.compress(plain, 6, mtime=0))
    copy("fuzz_inspect", os.path.join(formats, "f4_2x3.npy"))
    copy("fuzz_inspect", os.path.join(FIXTURES, "numpy_written.safetensors"))
    put("fuzz_inspect", "sample.h5", h5["sample.h5"])
    # JPEG: the decoder fixtures (Pillow's files of each kind); the first byte picks the draws
    # and the reduced decode's minimum size.
    jpegs = os.path.join(FIXTURES, "jpeg")
    for name in sorted(os.listdir(jpegs)):
        if name.endswith(".jpg"):
            with open(os.path.join(jpegs, name), "rb") as f:
                put("fuzz_jpeg", name[:-4], b"\x07" + f.read())
    # Run configs: the shipped demo configs, and one with overrides after "%%".
    for name in ("cosmoflow-demo.yaml", "deepcam-demo.yaml", "cosmoflow-graph-demo.yaml",
                 "resnet50-demo.yaml"):
        copy("fuzz_config", os.path.join(REPO, "configs", name))
    with open(os.path.join(REPO, "configs", "cosmoflow-demo.yaml"), "rb") as f:
        put("fuzz_config", "cosmoflow-demo-overrides", f.read() + b"\n%%\ntrain.n_epochs=3\n"
            b"optimizer.lr=0.01\ndata.batch_size=null\nmodel.conv_size=[4]\n")

    search_space_seeds()


def search_space_seeds():
    """Search spaces of `crest search` (docs/search.md): every sampler, a condition, sections."""
    put("fuzz_search_space", "all_samplers.yaml", b"""parameters:
  lr_schedule.base_lr: {loguniform: [1e-4, 1e-1]}
  model.dropout: {uniform: [0, 0.5]}
  data.batch_size: {choice: [2, 4, 8]}
  model.conv_size: {randint: [4, 16]}
  optimizer.name: {choice: [SGD, LARC]}
  optimizer.larc_base: {choice: [SGD], when: {optimizer.name: LARC}}
  optimizer.larc_mode: {choice: [clip, scale], when: {optimizer.name: LARC}}
  data.seed: {grid: [0, 1, 2]}
asha: {min_epochs: 1, max_epochs: 9, eta: 3}
pbt: {interval: 1, quantile: 0.25, resample: 0.25}
""")
    put("fuzz_search_space", "grid.yaml", b"""parameters:
  data.batch_size: {grid: [2, 4]}
  model.conv_size: {int: [4, 6]}
  optimizer.name: {choice: [SGD, LARC]}
  optimizer.larc_mode: {grid: [clip, scale], when: {optimizer.name: LARC}}
  model.input_shape: {choice: [[8, 8, 8, 4]]}
""")
    put("fuzz_search_space", "refused.yaml", b"""parameters:
  model.dropuot: {uniform: [0, 1.5]}
  train.loss: {choice: [mse, {a: 1}]}
""")


if __name__ == "__main__":
    main()
