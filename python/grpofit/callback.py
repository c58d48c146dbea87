"""The measuring callback: exactly what ``grpofit callback`` writes (the binary carries its one
copy, examples/grpofit_callback.py), read from the binary and run as this module, so that
``from grpofit.callback import GrpofitCallback`` (or ``from grpofit import GrpofitCallback``)
gives the same class. Needs torch and transformers, as the written file does."""

from ._binary import FITS, run as _run

_SOURCE = _run(["callback", "-o", "-"], answers=(FITS,)).stdout
_doc = __doc__
exec(compile(_SOURCE, "grpofit_callback.py (grpofit callback -o -)", "exec"), globals())
__doc__ = _doc
