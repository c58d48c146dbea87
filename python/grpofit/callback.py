"""The measuring callback: exactly what ``grpofit callback`` writes (the binary carries its one
copy, examples/grpofit_callback.py), read from the binary and run as this module, so that
``from grpofit.callback import GrpofitCallback`` (or ``from grpofit import GrpofitCallback``)
gives the same class. Needs torch and transformers, as the written file does."""

from ._binary import FITS, run as _run

_SOURCE = _run(["callback", "-o", "-"], answers=(FITS,)).stdout
_doc = __doc__
try:
    exec(compile(_SOURCE, "grpofit_callback.py (grpofit callback -o -)", "exec"), globals())
except ModuleNotFoundError as e:
    # what the callback imports: the trainer's environment, not the package's
    if e.name in ("torch", "transformers"):
        raise ModuleNotFoundError(
            f"grpofit.GrpofitCallback runs inside the trainer and needs torch and transformers, "
            f"which this Python lacks ({e}): install them (`pip install torch transformers`), "
            "or run the callback where the trainer runs (`grpofit callback` writes it as a file)",
            name=e.name,
        ) from None
    raise
__doc__ = _doc
