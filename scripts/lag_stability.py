#!/usr/bin/env python3
"""The largest stable step of SGD with momentum, with and without a one-step gradient lag, on a
quadratic direction of curvature h (docs/convergence.md, "Gradient lag and local SGD").

Each update is a linear recurrence in the weight w (and the velocity v); it converges when every
eigenvalue of its matrix lies inside the unit circle. x = lr * h; crest's Keras forms:

    heavy ball:  v' = m v - x w;  w' = w + v'
    Nesterov:    v' = m v - x w;  w' = w + m v' - x w
    with the lag, the gradient term x w is the previous step's, x w_prev.

    .venv/bin/python scripts/lag_stability.py [--momentum 0 0.5 0.9]

Prints one JSON line per form and momentum: the largest stable x (scanned in steps of 0.001).
"""
import argparse
import json

import numpy as np


def heavy_ball(m, x):  # state (w, v)
    return np.array([[1 - x, m], [-x, m]])


def nesterov(m, x):  # w' = w + m (m v - x w) - x w
    return np.array([[1 - x * (1 + m), m * m], [-x, m]])


def heavy_ball_lag(m, x):  # state (w, w_prev, v)
    return np.array([[1, -x, m], [1, 0, 0], [0, -x, m]])


def nesterov_lag(m, x):
    return np.array([[1, -x * (1 + m), m * m], [1, 0, 0], [0, -x, m]])


FORMS = {"heavy ball": heavy_ball, "Nesterov": nesterov,
         "heavy ball, lag 1": heavy_ball_lag, "Nesterov, lag 1": nesterov_lag}


def largest_stable_step(update, m, top=8.0, step=0.001):
    """The largest x on the grid below which every x is stable (spectral radius < 1)."""
    x, last = step, 0.0
    while x < top:
        if max(abs(np.linalg.eigvals(update(m, x)))) >= 1.0:
            break
        last, x = x, x + step
    return last


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--momentum", type=float, nargs="+", default=[0.0, 0.5, 0.9])
    args = p.parse_args()
    for m in args.momentum:
        for name, update in FORMS.items():
            print(json.dumps({"momentum": m, "form": name,
                              "largest_stable_lr_h": round(largest_stable_step(update, m), 3)}))


if __name__ == "__main__":
    main()
