"""The core every other room stands on, importing nothing of the package outside it: the error tree
(``errors``), the shared vocabulary (``types``: run kinds, point outcomes), the typed benchmark and
SLO settings (``settings``), and small utilities (``atomic`` writes, ``argv`` lookups, ``console``
output, ``redact`` for secrets)."""
