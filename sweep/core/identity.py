"""What of a point's settings is part of its id, declared on the settings: each field of a settings
dataclass (``sweep/core/settings.py``) may carry a mark in its metadata, and ``identity`` walks them
into the plain tree the point id hashes (``sweep.experiment.plan.point_id``). Pure.

The marks, each a ``dataclasses.field`` with the mark in its metadata (``runs: int = always(5)``):

- ``always``: hashed at any value, its default included (what every id has hashed from the start);
- no mark (a plain default): hashed only where it differs from its default, so that a new setting
  left at its default changes no id (and a resume finds every point it recorded);
- ``never``: no part of the id (``benchmark.slo`` judges the measurements, it changes none of them);
- ``hashed_with(*siblings)``: hashed at any value where one of the named fields beside it is set
  (true, non-empty), else no part of it (the refinement's settings, which act only with it on).

A field holding a dataclass is walked by its own fields' marks once it is hashed; a field that is
hashed only where changed compares its whole value with its default first (``open_loop`` at its
defaults is no part of the id; changed in one key, all its ``always`` keys are)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import MISSING, Field, dataclass, field, fields, is_dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

KEY = "identity"  # the metadata key of a field's mark

Rule = Literal["always", "changed", "never"]


@dataclass(frozen=True)
class Mark:
    """How a settings field is part of a point's id: ``rule``, and with ``siblings`` only where one
    of those fields beside it is set (no part of the id otherwise)."""

    rule: Rule = "changed"
    siblings: tuple[str, ...] = ()


_UNMARKED = Mark("changed")  # a field without a mark: hashed only where it differs from its default


def always(default: Any = MISSING, *, factory: Callable[[], Any] | None = None) -> Any:
    """A settings field hashed at any value, its default included: ``runs: int = always(5)``,
    ``levels: list[int] = always(factory=list)``."""
    return _marked(Mark("always"), default, factory)


def never(default: Any = MISSING, *, factory: Callable[[], Any] | None = None) -> Any:
    """A settings field that is no part of a point's id: ``slo: list[SLOSettings] = never(factory=list)``."""
    return _marked(Mark("never"), default, factory)


def hashed_with(*siblings: str, default: Any = MISSING, factory: Callable[[], Any] | None = None) -> Any:
    """A settings field hashed at any value where one of ``siblings`` (fields beside it, itself
    included if named) is set, else no part of the id: ``refine_max: int = hashed_with("refine", default=4)``."""
    return _marked(Mark("always", tuple(siblings)), default, factory)


def _marked(mark: Mark, default: Any, factory: Callable[[], Any] | None) -> Any:
    meta = {KEY: mark}
    if factory is not None:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


def mark_of(f: Field[Any]) -> Mark:
    """A field's mark (``_UNMARKED`` for a plain default)."""
    mark = f.metadata.get(KEY)
    return mark if isinstance(mark, Mark) else _UNMARKED


def _default_of(f: Field[Any]) -> Any:
    """A field's default value (a fresh one from its factory); MISSING where it has none."""
    if f.default is not MISSING:
        return f.default
    if f.default_factory is not MISSING:
        return f.default_factory()
    return MISSING


def identity(settings: DataclassInstance, skip: Collection[str] = (), where: str = "") -> dict[str, Any]:
    """The fields of the dataclass ``settings`` that are part of a point's id, by their marks, as plain
    data (dataclasses as dicts, lists as lists), for a canonical JSON dump. ``skip``: dotted paths
    (``concurrency.slo_time_scale``) left out whatever their mark; ``where``: the path of ``settings``."""
    out: dict[str, Any] = {}
    for f in fields(settings):
        path = f"{where}{f.name}"
        value = getattr(settings, f.name)
        if path not in skip and _hashed(mark_of(f), value, _default_of(f), settings):
            out[f.name] = _plain(value, skip, f"{path}.")
    return out


def _hashed(mark: Mark, value: Any, default: Any, owner: DataclassInstance) -> bool:
    if mark.rule == "never":
        return False
    if mark.siblings and not any(getattr(owner, s) for s in mark.siblings):
        return False
    return mark.rule == "always" or default is MISSING or value != default


def _plain(value: Any, skip: Collection[str], where: str) -> Any:
    if is_dataclass(value) and not isinstance(value, type):
        return identity(value, skip, where)
    if isinstance(value, (list, tuple)):
        return [_plain(v, skip, where) for v in value]
    if isinstance(value, Mapping):
        return {k: _plain(v, skip, where) for k, v in value.items()}
    return value
