#!/usr/bin/env python3
"""One inference peer, timed in its own process (scripts/bench_infer_peers.py runs it): PyTorch
(eval mode under torch.inference_mode, channels-last, optionally torch.compile or bf16 autocast)
or ONNX Runtime on a model crest exported. Prints one JSON line: samples/s from the best pass and
the latency per batch.

  infer_peer.py --runtime torch|torch-compile|ort --model cosmoflow|deepcam --batch 1 \
      [--size 128 | --height 768 --width 1152] [--onnx model.onnx] [--bf16] --threads 2

The CosmoFlow network is the MLPerf HPC reference's (five conv3d + LeakyReLU(0.3) + max-pool
blocks, dense 128/64/4, tanh); DeepCAM's is ../shared/peers/deepcam_torch.py's DeepCAM module.
"""
import argparse, importlib.util, json, os, sys, time


def cosmoflow_torch(nn, size):
    layers, cin = [], 4
    for i in range(5):
        cout = 32 * 2 ** i
        layers += [nn.Conv3d(cin, cout, 3, padding=1), nn.LeakyReLU(0.3), nn.MaxPool3d(2)]
        cin = cout
    flat = cin * (size // 32) ** 3
    return nn.Sequential(*layers, nn.Flatten(), nn.Linear(flat, 128), nn.LeakyReLU(0.3),
                         nn.Dropout(0.5), nn.Linear(128, 64), nn.LeakyReLU(0.3), nn.Dropout(0.5),
                         nn.Linear(64, 4), nn.Tanh())


def deepcam_torch(height, width):
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.normpath(os.path.join(here, "..", "..", "shared", "peers", "deepcam_torch.py"))
    spec = importlib.util.spec_from_file_location("deepcam_torch", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.DeepCAM()


def time_passes(run, passes, warmup):
    for _ in range(warmup):
        run()
    times = []
    for _ in range(passes):
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    return sorted(times)


def torch_runner(a):
    import torch
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    nn = torch.nn
    if a.model == "cosmoflow":
        m = cosmoflow_torch(nn, a.size)
        x = torch.randn(a.batch, 4, a.size, a.size, a.size).to(memory_format=torch.channels_last_3d)
        m = m.to(memory_format=torch.channels_last_3d)
    else:
        m = deepcam_torch(a.height, a.width)
        x = torch.randn(a.batch, 16, a.height, a.width).to(memory_format=torch.channels_last)
        m = m.to(memory_format=torch.channels_last)
    m.eval()
    net = torch.compile(m) if a.runtime == "torch-compile" else m

    def run():
        with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.bf16):
            net(x)
    return run, torch.__version__


def ort_runner(a):
    import numpy as np
    import onnxruntime as ort
    o = ort.SessionOptions()
    o.intra_op_num_threads = a.threads
    o.inter_op_num_threads = 1
    o.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    o.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    s = ort.InferenceSession(a.onnx, o, providers=["CPUExecutionProvider"])
    shape = [a.batch, a.size, a.size, a.size, 4] if a.model == "cosmoflow" else \
        [a.batch, a.height, a.width, 16]
    x = np.random.default_rng(0).standard_normal(shape, dtype=np.float32)
    name = s.get_inputs()[0].name
    return (lambda: s.run(None, {name: x})), ort.__version__


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runtime", choices=["torch", "torch-compile", "ort"], required=True)
    p.add_argument("--model", choices=["cosmoflow", "deepcam"], default="cosmoflow")
    p.add_argument("--size", type=int, default=128)
    p.add_argument("--height", type=int, default=768)
    p.add_argument("--width", type=int, default=1152)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--passes", type=int, default=5)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--bf16", action="store_true", help="torch: autocast(cpu, bfloat16)")
    p.add_argument("--onnx", help="ort: the exported model")
    a = p.parse_args()
    if a.runtime == "ort" and not a.onnx:
        sys.exit("infer_peer: --runtime ort needs --onnx")
    run, version = ort_runner(a) if a.runtime == "ort" else torch_runner(a)
    times = time_passes(run, a.passes, a.warmup)
    print(json.dumps({"runtime": a.runtime, "version": version, "model": a.model,
                      "batch": a.batch, "bf16": a.bf16, "threads": a.threads,
                      "latency_ms_min": times[0] * 1e3,
                      "latency_ms_median": times[len(times) // 2] * 1e3,
                      "samples_per_s": a.batch / times[0]}), flush=True)


if __name__ == "__main__":
    main()
