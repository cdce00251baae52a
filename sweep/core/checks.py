"""One check type for every check the sweep makes before anything launches, wherever it runs: the
plan's SGLang rules (``sweep.sglang.rules``), the drafter's checkpoint against its target
(``sweep.sglang.drafter``) and the host's pre-flight (``sweep.host``: GPUs, ports, CPU kernels, the
rules again with the real version). A ``Check`` is data until it is shown or stored; its two forms:

- ``str(check)``: ``rule: message (fix: ...)``, how a plan's errors and warnings read;
- ``check.line()``: ``level: [rule] message (fix: ...)``, how the host's pre-flight list and the
  drafter's findings read (``preflight_checks``, ``drafter_checks`` in the points table).

Either leaves out the rule where the check has none (``ok: port 30000 free``) and the fix where there
is nothing to fix.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Optional

CheckLevel = Literal["ok", "skipped", "warning", "error"]


@dataclass(frozen=True)
class Check:
    level: CheckLevel
    rule: str  # which check: ambiguous-flag, aux-layers, weights-missing, ... ("" where the message says it)
    message: str
    fix: Optional[str] = None

    @classmethod
    def ok(cls, message: str) -> "Check":
        return cls("ok", "", message)

    @classmethod
    def warning(cls, message: str, fix: Optional[str] = None, rule: str = "") -> "Check":
        return cls("warning", rule, message, fix)

    @classmethod
    def skipped(cls, message: str) -> "Check":
        return cls("skipped", "", message)

    def _fix(self) -> str:
        return f" (fix: {self.fix})" if self.fix else ""

    def __str__(self) -> str:
        return (f"{self.rule}: " if self.rule else "") + self.message + self._fix()

    def line(self) -> str:
        return f"{self.level}: " + (f"[{self.rule}] " if self.rule else "") + self.message + self._fix()


def lines(checks: "list[Check]") -> list[str]:
    """How a list of checks is stored (the points table's list columns) and printed."""
    return [c.line() for c in checks]
