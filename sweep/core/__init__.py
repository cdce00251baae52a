"""The core every other room stands on, importing nothing of the package outside it: the error tree
(``errors``), the shared vocabulary (``types``: run kinds, point outcomes), the typed benchmark and
SLO settings (``settings``), a server's typed flags (``flags``: ``ServerFlags``), and small utilities
(``atomic`` writes, ``argv`` read back for results written before the flags column, ``console``
output, ``redact`` for secrets)."""

__version__ = "0.1.0"  # the package's (sweep.__version__); the results files record it
