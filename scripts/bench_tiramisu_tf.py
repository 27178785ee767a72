#!/usr/bin/env python3
"""The Tiramisu in TensorFlow/Keras, the framework of the Gordon Bell run's own code
(azrael417/ClimDeepLearn tiramisu_model.py, TensorFlow 1.x graph code, ported here to Keras
layers one for one): 'same' convolutions with biases and he_uniform kernels, conv -> ReLU ->
dropout dense layers concatenated after their input, 1x1 stride-2 transitions down, 3x3 stride-2
'same' conv-transposes over the new features, skips, a 1x1 output and dropout on the logits;
the per-pixel weighted sparse cross-entropy (weights w[label], SUM_BY_NONZERO_WEIGHTS) times 0.1;
Adam. Channels-last (TensorFlow's CPU convolutions want NHWC), random inputs, one tf.function
per step; warm-up steps, then the best of --steps as samples/s, one JSON line.

  python3 scripts/bench_tiramisu_tf.py [--height 96] [--width 144] [--batch 2] [--steps 3]
      [--threads 2] [--xla]
"""
import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# TensorFlow enables its oneDNN kernels by default only on AVX-512-class CPUs: on at its best.
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")
import tensorflow as tf  # noqa: E402
from tensorflow import keras  # noqa: E402
from tensorflow.keras import layers  # noqa: E402

from peer_steps import best_step_seconds, print_train_line  # noqa: E402

FREQUENCIES = (0.991, 0.0266, 0.13)


def conv(x, filters, size, stride=1):
    return layers.Conv2D(filters, size, stride, padding="same",
                         kernel_initializer="he_uniform")(x)


def dense_block(x, n, growth, size, p):
    added = []
    for _ in range(n):
        b = layers.Dropout(p)(layers.ReLU()(conv(x, growth, size)))
        x = layers.Concatenate()([x, b])
        added.append(b)
    return x, added


def tiramisu(height, width, blocks=(2, 2, 2, 4, 5), growth=32, initial=64, size=5, p=0.2):
    inp = keras.Input((height, width, 16))
    x = layers.Dropout(p)(layers.ReLU()(conv(inp, initial, size)))
    skips = []
    for i, n in enumerate(blocks):
        x, added = dense_block(x, n, growth, size, p)
        if i + 1 < len(blocks):  # the reference's last transition down feeds nothing
            skips.append(x)
            x = layers.Dropout(p)(layers.ReLU()(conv(x, x.shape[-1], 1, 2)))
    for n, skip in zip(reversed(blocks[:-1]), reversed(skips)):
        t = layers.Concatenate()(added) if len(added) > 1 else added[0]
        t = layers.Conv2DTranspose(t.shape[-1], 3, 2, padding="same",
                                   kernel_initializer="he_uniform")(t)
        x, added = dense_block(layers.Concatenate()([t, skip]), n, growth, size, p)
    logits = layers.Dropout(p)(conv(x, 3, 1))
    return keras.Model(inp, logits)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--height", type=int, default=96)
    ap.add_argument("--width", type=int, default=144)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--xla", action="store_true", help="tf.function(jit_compile=True)")
    a = ap.parse_args()
    tf.config.threading.set_intra_op_parallelism_threads(a.threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    tf.random.set_seed(0)
    model = tiramisu(a.height, a.width)
    inv = [1 / f for f in FREQUENCIES]
    class_weights = tf.constant([w / sum(inv) for w in inv], tf.float32)
    adam = keras.optimizers.Adam(1e-4, epsilon=1e-8)
    x = tf.random.uniform((a.batch, a.height, a.width, 16), 0, 2)
    y = tf.cast(tf.searchsorted(tf.constant([0.9, 0.92]),
                                tf.reshape(tf.random.uniform((a.batch * a.height * a.width,)),
                                           [-1]), side="right"), tf.int32)
    y = tf.reshape(y, (a.batch, a.height, a.width))

    @tf.function(jit_compile=a.xla)
    def step():
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            ce = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits)
            w = tf.gather(class_weights, y)
            loss = 0.1 * tf.reduce_sum(w * ce) / tf.math.count_nonzero(w, dtype=tf.float32)
        grads = tape.gradient(loss, model.trainable_variables)
        adam.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    best = best_step_seconds(lambda: step().numpy(), a.warmup, a.steps)
    print_train_line({"bench": "train", "peer": "tensorflow", "model": "tiramisu",
                      "tensorflow": tf.__version__, "xla": a.xla, "height": a.height,
                      "width": a.width, "threads": a.threads,
                      "parameters": int(model.count_params())}, a.batch, best)


if __name__ == "__main__":
    main()
