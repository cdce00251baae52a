"""The project's tools outside the package (``cluster/``), loaded from their files for the tests."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TINYMODELS = REPO / "cluster" / "sglang-cpu-x86" / "tinymodels.py"


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


tinymodels = _load("tinymodels", TINYMODELS)
