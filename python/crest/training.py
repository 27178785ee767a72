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
          progress_bar: bool = True, train_data: Any = None, valid_data: Any = None,
          comm: Any = None) -> History:
    """Runs ``crest train`` on ``config`` in this process and returns its history.

    Everything the CLI does happens: checkpoints and records in ``config.output_dir``, MLPerf
    and TensorBoard logs, MPI when launched under mpirun (``mpirun -np 4 python train.py``).
    Each callback is called on rank 0 at the end of every epoch as ``callback(epoch, run)``:
    ``epoch`` is a dict of the epoch's figures, ``run.stop(reason)`` ends the run after this
    epoch (with its checkpoint), ``run.checkpoint()`` writes one now. A callback that raises
    stops the run and its exception is raised here. ``quiet`` drops the progress log.

    ``train_data`` (and ``valid_data``) replace the config's dataset files with Python data:
    anything with ``len`` and ``[i] -> (sample, target)`` (a list, a torch map-style Dataset);
    another iterable is read into a list first. Samples are data.sample_shape as the model reads
    it (channels last), targets the dataset's ([targets] floats, or [H, W] class labels); they
    are used as given (no transform of the config's dataset applies). crest shuffles, shards and
    prefetches them as it does files, on its reader threads.

    ``comm``: the ranks to train on, as an mpi4py communicator (or anything with ``py2f()``, the
    MPI Fortran handle); every rank of it must call train. Default: the process world (under
    mpirun, every rank).
    """
    train_data, valid_data = _indexable(train_data), _indexable(valid_data)
    summary = _crest.train(
        config._native, list(callbacks),
        os.fspath(init_weights) if init_weights else "",
        os.fspath(save_weights) if save_weights else "",
        resume, overwrite, quiet, progress_bar, train_data, valid_data,
        -1 if comm is None else int(comm.py2f()))
    return History(**summary)


def _indexable(data: Any) -> Any:
    """`data` itself when crest can read item i of it, else its items in a list."""
    if data is None or (hasattr(data, "__len__") and hasattr(data, "__getitem__")):
        return data
    return list(data)
