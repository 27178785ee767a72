"""crest.Model: a trained (or freshly initialised) model run on arrays from any framework."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np

from . import _crest
from .config import Config


class IncompatibleKeys(NamedTuple):
    """What load_state_dict(strict=False) left out, as torch.nn.Module reports it."""

    missing_keys: list[str]
    unexpected_keys: list[str]


def _as_host_array(value: Any) -> np.ndarray:
    """A contiguous numpy view (a copy only where needed) of a numpy/torch/JAX/CuPy array."""
    if hasattr(value, "detach"):  # a torch tensor: leave autograd, reach host memory
        value = value.detach().cpu()
    if not isinstance(value, np.ndarray) and hasattr(value, "__dlpack__"):
        try:
            value = np.from_dlpack(value)
        except (RuntimeError, BufferError, TypeError):
            pass  # a device array without host access: numpy's own conversion below
    return np.require(np.asarray(value), requirements="C")  # keeps a 0-d scalar 0-d


class Model:
    """A network compiled for inference from a run config.

    Weights come from ``checkpoint`` (a checkpoint file, or a run directory: its newest), from
    ``weights`` (a safetensors file of ``crest train --save-weights`` or PyTorch's names), or,
    with neither, the seeded initialisation a training run would start from.

    ``forward(x)`` runs one compiled batch and returns a view of crest's output buffer (no copy;
    it changes at the next call). ``predict(x)`` takes any number of samples and returns arrays of
    their own. Inputs are [samples, *sample_shape] in the data's layout (data.sample_shape, as
    crest's data files hold them); a C-contiguous float32 array is read in place (DLPack),
    anything else is converted once. Predictions have the reference network's logical shape
    ([N, C, H, W] for segmentation) with the strides of crest's layout.
    """

    def __init__(self, config: Config, *, checkpoint: str | os.PathLike | None = None,
                 weights: str | os.PathLike | None = None, batch: int | None = None,
                 threads: int | None = None):
        self.config = config
        self._native = _crest.NativeModel(
            config._native, os.fspath(checkpoint) if checkpoint else "",
            os.fspath(weights) if weights else "", batch or 0, threads or 0)

    @property
    def batch_size(self) -> int:
        return self._native.batch_size

    @property
    def sample_shape(self) -> tuple[int, ...]:
        return tuple(self._native.sample_shape)

    @property
    def last_input_copied(self) -> bool:
        """False when the last forward read its input array in place."""
        return self._native.last_input_copied

    def forward(self, x: Any) -> np.ndarray:
        """The prediction for exactly ``batch_size`` samples, as a view of crest's buffer."""
        return self._native.forward(x)

    __call__ = forward

    def predict(self, x: Any) -> np.ndarray:
        """Predictions for any number of samples, in batches of ``batch_size``."""
        if not isinstance(x, np.ndarray):  # torch, JAX, CuPy, nested lists
            x = _as_host_array(x)
        n, b = len(x), self.batch_size
        if n == 0:
            raise _crest.InputError("predict: no samples")
        if n == b:
            return np.array(self._native.forward(x))
        parts = []
        for start in range(0, n, b):
            chunk = x[start:start + b]
            if len(chunk) < b:  # the last, partial batch: filled up, the padding's rows dropped
                pad = np.zeros((b - len(chunk),) + tuple(chunk.shape[1:]), dtype=chunk.dtype)
                chunk = np.concatenate([chunk, pad])
            parts.append(np.array(self._native.forward(chunk))[:min(b, n - start)])
        return np.concatenate(parts)

    def state_dict(self) -> dict[str, np.ndarray]:
        """Copies of every weight and batch-norm statistic under the reference (PyTorch) names:
        ``torch_model.load_state_dict({k: torch.from_dlpack(v) for ...}, strict=True)``."""
        return self._native.state_dict()

    def load_state_dict(self, state: Mapping[str, Any], strict: bool = True) -> IncompatibleKeys:
        """Loads weights given under the reference names (numpy or torch arrays). strict: every
        weight exactly once, nothing else (else crest.InputError naming the key; the model is
        unchanged). Not strict: the keys given that the model has; the rest keep their values."""
        arrays = {k: _as_host_array(v) for k, v in state.items()}
        if strict:
            self._native.load_state_dict(arrays)
            return IncompatibleKeys([], [])
        current = self._native.state_dict()
        missing = [k for k in current if k not in arrays]
        unexpected = [k for k in arrays if k not in current]
        current.update({k: v for k, v in arrays.items() if k in current})
        self._native.load_state_dict(current)
        return IncompatibleKeys(missing, unexpected)
