#!/usr/bin/env python3
"""The largest stable step of SGD with momentum, with and without a one-step gradient lag, on a
quadratic direction of curvature h (docs/convergence.md, "Gradient lag and local SGD").

Each update is a linear recurrence in the weight w (and the velocity v); it converges when every
eigenvalue of its matrix lies inside the unit circle. x = lr * h; crest's Keras forms:

    heavy ball:  v' = m v - x w;  w' = w + v'
    Nesterov:    v' = m v - x w;  w' = w + m v' - x w
    with the lag, the gradient term x w is the previous step's, x w_prev.

The lag with a local correction (train.gradient_lag: {steps: 1, correction: local}; delayed
gradient averaging, Zhu et al., NeurIPS 2021), where rank r applies avg g(t-1) - g_r(t-1) + g_r(t)
with g_r at its own weights. The ranks' mean then follows the synchronous recurrence exactly; what
can diverge is a rank's deviation d from the mean, whose gradient term is x (d - d_prev). That
recurrence always has the eigenvalue 1 (a constant offset between the ranks stays), so its
stability is that of its other eigenvalues.

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


def heavy_ball_corrected_deviation(m, x):  # state (d, d_prev, v)
    return np.array([[1 - x, x, m], [1, 0, 0], [-x, x, m]])


FORMS = {"heavy ball": heavy_ball, "Nesterov": nesterov,
         "heavy ball, lag 1": heavy_ball_lag, "Nesterov, lag 1": nesterov_lag,
         "heavy ball, lag 1, local correction (deviation)": heavy_ball_corrected_deviation}
# The forms whose matrix keeps the eigenvalue 1 whatever x: it is left out of the radius.
KEEPS_ONE = {"heavy ball, lag 1, local correction (deviation)"}


def spectral_radius(matrix, drop_one=False):
    eigenvalues = np.linalg.eigvals(matrix)
    if drop_one:
        eigenvalues = np.delete(eigenvalues, np.argmin(abs(eigenvalues - 1.0)))
    return max(abs(eigenvalues))


def largest_stable_step(update, m, top=8.0, step=0.001, drop_one=False):
    """The largest x on the grid below which every x is stable (spectral radius < 1)."""
    x, last = step, 0.0
    while x < top:
        if spectral_radius(update(m, x), drop_one) >= 1.0:
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
                              "largest_stable_lr_h":
                                  round(largest_stable_step(update, m, drop_one=name in KEEPS_ONE),
                                        3)}))


if __name__ == "__main__":
    main()
