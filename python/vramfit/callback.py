"""The measuring callback: exactly what ``vramfit callback`` writes (the binary carries its one
copy, examples/vramfit_callback.py), read from the binary and run as this module, so that
``from vramfit.callback import VramfitCallback`` (or ``from vramfit import VramfitCallback``)
gives the same class. Needs torch and transformers, as the written file does."""

from ._binary import FITS, run as _run

_SOURCE = _run(["callback", "-o", "-"], answers=(FITS,)).stdout
_doc = __doc__
exec(compile(_SOURCE, "vramfit_callback.py (vramfit callback -o -)", "exec"), globals())
__doc__ = _doc
