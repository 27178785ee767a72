"""crest from Python: load run configs, train, and run trained models on arrays.

    import crest
    config = crest.Config.load("configs/cosmoflow-demo.yaml", overrides=["data.n_epochs=2"])
    history = crest.train(config, callbacks=[lambda epoch, run: print(epoch["val_loss"])])
    model = crest.Model(config, checkpoint=config.output_dir)
    prediction = model.predict(samples)        # numpy, torch, JAX, CuPy (host) arrays

docs/python.md describes every call; the native part is crest._crest.
"""

from ._crest import Error, InputError, RunError, RunRequests, UsageError, __version__
from .config import Config, Section
from .model import Model
from .training import History, train

__all__ = [
    "Config",
    "Error",
    "History",
    "InputError",
    "Model",
    "RunError",
    "RunRequests",
    "Section",
    "UsageError",
    "__version__",
    "train",
]


def _point_hdf5_reader_at_crest() -> None:
    """DeepCAM's HDF5 files are read by a `crest __hdf5-reader` process (docs/security.md),
    which must be the crest binary, not python: the wheel's copy, the build tree's, or an
    installed prefix's (the package in <prefix>/lib/pythonX.Y/site-packages/crest)."""
    import os

    here = os.path.dirname(os.path.abspath(__file__))
    for candidate in (os.path.join(here, "bin", "crest"),
                      os.path.join(here, "..", "..", "bin", "crest"),
                      os.path.join(here, "..", "..", "..", "..", "bin", "crest")):
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            os.environ.setdefault("CREST_HDF5_READER", os.path.normpath(candidate))
            return


_point_hdf5_reader_at_crest()
