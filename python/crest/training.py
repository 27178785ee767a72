"""crest.train: the CLI's trainer in this process, with Python callbacks."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from . import _crest
from .config import Config

EpochCallback = Callable[[dict, "_crest.RunRequests"], Any]


@dataclass
class History:
    """What a run did: one dict per epoch (as callbacks see them) and how it ended."""

    epochs: list[dict] = field(default_factory=list)
    status: str = "success"     # success, aborted, preempted (as crest train's summary)
    exit_code: int = 0          # what crest train would exit with
    stop_reason: str = ""
    steps: int = 0
    skipped_updates: int = 0
    overflow_steps: int = 0
    last_checkpoint: str = ""
    parameter_count: int = 0

    def __getitem__(self, key: str) -> list:
        """One figure over the epochs: ``history["train_loss"]``."""
        return [e[key] for e in self.epochs]


def train(config: Config, callbacks: Iterable[EpochCallback] = (), *,
          init_weights: str | os.PathLike | None = None,
          save_weights: str | os.PathLike | None = None,
          resume: bool = False, overwrite: bool = False, quiet: bool = False,
          progress_bar: bool = True) -> History:
    """Runs ``crest train`` on ``config`` in this process and returns its history.

    Everything the CLI does happens: checkpoints and records in ``config.output_dir``, MLPerf
    and TensorBoard logs, MPI when launched under mpirun (``mpirun -np 4 python train.py``).
    Each callback is called on rank 0 at the end of every epoch as ``callback(epoch, run)``:
    ``epoch`` is a dict of the epoch's figures, ``run.stop(reason)`` ends the run after this
    epoch (with its checkpoint), ``run.checkpoint()`` writes one now. A callback that raises
    stops the run and its exception is raised here. ``quiet`` drops the progress log.
    """
    summary = _crest.train(
        config._native, list(callbacks),
        os.fspath(init_weights) if init_weights else "",
        os.fspath(save_weights) if save_weights else "",
        resume, overwrite, quiet, progress_bar)
    return History(**summary)
