"""What the peer training benchmarks in scripts/ share: a step timed after warm-ups (the best of
several, as crest bench train reports step_s_min), and their one JSON line, with the process's
peak resident memory so that memory per sample compares too.

    from peer_steps import best_step_seconds, print_train_line
"""
import json
import resource
import time


def best_step_seconds(step, warmup, steps):
    """Runs `step` warmup times, then `steps` timed times; the fastest, in seconds. `step` must
    not return before its work is done (call .numpy() on a TensorFlow result)."""
    for _ in range(warmup):
        step()
    times = []
    for _ in range(steps):
        t = time.perf_counter()
        step()
        times.append(time.perf_counter() - t)
    return min(times)


def print_train_line(fields, batch, best_s):
    """One JSON line: `fields`, then step_s_min, samples_per_s and peak_rss_mb."""
    line = dict(fields)
    line.update(batch=batch, step_s_min=best_s, samples_per_s=batch / best_s,
                peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    print(json.dumps(line), flush=True)
