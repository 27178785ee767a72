#!/usr/bin/env python3
"""Keras' ResNet50 training step, the TensorFlow peer of scripts/bench_resnet50_torch.py and of
`crest train --config configs/resnet50-demo.yaml` at 224 x 224, batch 32, 10 classes:
keras.applications.ResNet50 (weights=None; Keras' ResNet50 is v1, its stride on the first 1x1 of
a block, where MLPerf's v1.5 strides on the 3x3: the same FLOPs within 3 %), SGD with momentum,
cross-entropy with label smoothing 0.1, random inputs, channels-last, one tf.function per step;
one warm-up step, then the best of --steps as samples/s, one JSON line. --bf16: Keras'
mixed_bfloat16 policy (bf16 activations, float32 variables), as cosmoflow_tf.py --bf16.

  python3 scripts/bench_resnet50_tf.py [--batch 32] [--steps 3] [--threads 2] [--xla] [--bf16]
      [--height 224] [--width 224]
"""
import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")  # on at its best, as cosmoflow_tf.py
import tensorflow as tf  # noqa: E402
from tensorflow import keras  # noqa: E402

from peer_steps import best_step_seconds, print_train_line  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--height", type=int, default=224)
    ap.add_argument("--width", type=int, default=224)
    ap.add_argument("--xla", action="store_true", help="tf.function(jit_compile=True)")
    ap.add_argument("--bf16", action="store_true", help="Keras mixed_bfloat16 policy")
    a = ap.parse_args()
    if a.bf16:
        keras.mixed_precision.set_global_policy("mixed_bfloat16")
    tf.config.threading.set_intra_op_parallelism_threads(a.threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    tf.random.set_seed(0)
    model = keras.applications.ResNet50(weights=None, classes=10, input_shape=(a.height, a.width, 3))
    sgd = keras.optimizers.SGD(0.1, momentum=0.9)
    loss_fn = keras.losses.CategoricalCrossentropy(from_logits=False, label_smoothing=0.1)
    x = tf.random.normal((a.batch, a.height, a.width, 3))
    y = tf.one_hot(tf.random.uniform((a.batch,), 0, 10, tf.int32), 10)

    @tf.function(jit_compile=a.xla)
    def step():
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        sgd.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    best = best_step_seconds(lambda: step().numpy(), a.warmup, a.steps)
    print_train_line({"bench": "train", "peer": "tensorflow", "model": "resnet50",
                      "tensorflow": tf.__version__, "xla": a.xla, "bf16": a.bf16,
                      "threads": a.threads},
                     a.batch, best)


if __name__ == "__main__":
    main()
