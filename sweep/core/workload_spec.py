"""The compact form of a workload (``--workload`` and a string ``benchmark.workload``) as the mapping
``WorkloadSettings`` reads. Pure.

```
coding | encyclopedic | FILE.jsonl         the prompt sets, as benchmark.prompts names them
prompts:FILE                               the same, spelled out
sharegpt:FILE[,multiturn][,answer_lengths] a ShareGPT JSON or JSONL file
sharegpt-multiturn:FILE                    = sharegpt:FILE,multiturn
synthetic:in=LEN[,out=LEN][,requests=N]    token lengths drawn from LEN
shared-prefix:groups=N,prefix=T,questions=Q[,in=LEN][,out=LEN]
trace:FILE[,scale=F]                       a JSONL trace (arrival times scaled by F)
```

Every kind also takes ``context=N`` (``max_context``). A length ``LEN`` is ``200`` or
``fixed(200)``, ``uniform(100,400)``, ``normal(200,50)`` (``normal(200,50,10,800)`` clips it to
10..800), or ``empirical(100:1,400:3)`` (length:weight; ``empirical(100,200)``: equally often).
Keys may be written in full too (``input_len=``, ``prefix_len=``, ``time_scale=``).
"""

from __future__ import annotations

import re
from typing import Any

from sweep.core.errors import ConfigError
from sweep.core.settings import DISTRIBUTIONS, WORKLOAD_KINDS, LengthSettings, WorkloadSettings

_ALIASES = {
    "in": "input_len",
    "out": "output_len",
    "prefix": "prefix_len",
    "scale": "time_scale",
    "context": "max_context",
    "file": "path",
}
FLAGS = ("multiturn", "answer_lengths")  # bare words that set a boolean
_BUILTIN_SETS = ("coding", "encyclopedic")
LENGTH_KEYS = ("input_len", "output_len")
_INT_KEYS = ("requests", "groups", "prefix_len", "questions", "max_context")
_EXAMPLES = (
    "sharegpt:FILE, sharegpt-multiturn:FILE, synthetic:in=uniform(100,400),out=200, "
    "shared-prefix:groups=8,prefix=1024,questions=16,in=64, trace:FILE,scale=0.5"
)
_CALL = re.compile(r"([a-z_]+)\((.*)\)")


def _split(text: str) -> list[str]:
    """``text`` split at commas outside parentheses."""
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
            continue
        depth += (ch == "(") - (ch == ")")
        cur += ch
    out.append(cur)
    return [s.strip() for s in out if s.strip()]


def _number(text: str, what: str, where: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ConfigError(
            f"{where}: {what} {text!r} is not a number", fix="e.g. uniform(100,400) or normal(200,50)"
        ) from None


def _int(text: str, what: str, where: str) -> int:
    value = _number(text, what, where)
    if value != int(value):
        raise ConfigError(f"{where}: {what} {text!r} is not a whole number of tokens", fix="e.g. 200")
    return int(value)


def parse_length(text: object, where: str = "length") -> dict:
    """A compact length (``200``, ``uniform(100,400)``, ...) as a ``LengthSettings`` mapping."""
    if isinstance(text, bool):
        raise ConfigError(f"{where}: {text!r} is not a length", fix="e.g. 200 or uniform(100,400)")
    if isinstance(text, int):
        return {"dist": "fixed", "value": text}
    s = str(text).strip().replace(" ", "")
    if re.fullmatch(r"-?[0-9.]+", s):
        return {"dist": "fixed", "value": _int(s, "the length", where)}
    m = _CALL.fullmatch(s)
    if not m or m.group(1) not in DISTRIBUTIONS:
        raise ConfigError(
            f"{where}: {text!r} is not a length",
            fix=f"write a token count or one of {', '.join(d + '(...)' for d in DISTRIBUTIONS)}, "
            "e.g. 200, uniform(100,400), normal(200,50), empirical(100:1,400:3)",
        )
    dist, args = m.group(1), [a for a in m.group(2).split(",") if a]
    arity = {"fixed": (1,), "uniform": (2,), "normal": (2, 4)}
    if dist in arity and len(args) not in arity[dist]:
        want = " or ".join(map(str, arity[dist]))
        raise ConfigError(
            f"{where}: {dist}(...) takes {want} numbers, got {len(args)} in {text!r}",
            fix="e.g. fixed(200), uniform(100,400), normal(200,50) or normal(200,50,10,800)",
        )
    if dist == "fixed":
        return {"dist": "fixed", "value": _int(args[0], "the length", where)}
    if dist == "uniform":
        return {"dist": "uniform", "low": _int(args[0], "low", where), "high": _int(args[1], "high", where)}
    if dist == "normal":
        out: dict[str, Any] = {
            "dist": "normal",
            "mean": _number(args[0], "the mean", where),
            "std": _number(args[1], "the std", where),
        }
        if len(args) == 4:
            out |= {"low": _int(args[2], "low", where), "high": _int(args[3], "high", where)}
        return out
    if not args:
        raise ConfigError(f"{where}: empirical() has no lengths", fix="e.g. empirical(100:1,400:3)")
    pairs = [a.split(":", 1) if ":" in a else [a, "1"] for a in args]
    return {
        "dist": "empirical",
        "values": [_int(v, "a length", where) for v, _ in pairs],
        "weights": [_number(w, "a weight", where) for _, w in pairs],
    }


def _value(key: str, text: str, where: str) -> Any:
    if key in LENGTH_KEYS:
        return parse_length(text, f"{where}: {key}")
    if key in FLAGS:
        if text.lower() not in ("true", "false", "1", "0", "yes", "no"):
            raise ConfigError(f"{where}: {key}={text!r} is not true or false", fix=f"write {key} or {key}=false")
        return text.lower() in ("true", "1", "yes")
    if key in _INT_KEYS:
        return _int(text, key, where)
    if key == "time_scale":
        return _number(text, key, where)
    return text


def parse(text: str) -> dict:
    """The mapping of ``benchmark.workload`` that the compact string ``text`` stands for."""
    s = text.strip()
    where = f"workload {text!r}"
    head, sep, rest = s.partition(":")
    if not sep or head not in (*WORKLOAD_KINDS, "sharegpt-multiturn"):
        if s in _BUILTIN_SETS or (s and not sep):  # a prompt set, as benchmark.prompts names it
            return {"kind": "prompts", "path": s}
        raise ConfigError(
            f"{where}: unknown kind {head!r}", fix=f"one of {', '.join(WORKLOAD_KINDS)}, e.g. {_EXAMPLES}"
        )
    out: dict[str, Any] = {"kind": "sharegpt" if head == "sharegpt-multiturn" else head}
    if head == "sharegpt-multiturn":
        out["multiturn"] = True
    fields = set(WorkloadSettings.__dataclass_fields__)
    for item in _split(rest):
        key, eq, value = item.partition("=")
        key = _ALIASES.get(key.strip(), key.strip())
        if not eq:
            if key in FLAGS:
                out[key] = True
            elif "path" not in out and out["kind"] in ("prompts", "sharegpt", "trace"):
                out["path"] = item
            else:
                raise ConfigError(
                    f"{where}: {item!r} is neither key=value nor a flag", fix=f"write key=value, e.g. {_EXAMPLES}"
                )
            continue
        if key not in fields or key == "kind":
            raise ConfigError(
                f"{where}: unknown key {key!r}", fix=f"keys: {', '.join(sorted((fields - {'kind'}) | set(_ALIASES)))}"
            )
        out[key] = _value(key, value.strip(), where)
    return out


def normalize(value: Any, where: str = "benchmark.workload") -> Any:
    """``benchmark.workload`` as the typed schema takes it: a compact string becomes its mapping, and
    a mapping's lengths written compactly (``input_len: uniform(100,400)``) become theirs."""
    if isinstance(value, str):
        return parse(value)
    if isinstance(value, dict):
        out = dict(value)
        for key in LENGTH_KEYS:
            if key in out and isinstance(out[key], (str, int)) and not isinstance(out[key], bool):
                out[key] = parse_length(out[key], f"{where}.{key}")
        return out
    return value


def settings(value: object) -> WorkloadSettings:
    """A ``WorkloadSettings`` from a compact string or a mapping (as ``python -m sweep bench`` builds it)."""
    tree = normalize(value)
    if not isinstance(tree, dict):
        raise ConfigError(f"workload {value!r} is neither a string nor a mapping", fix=f"e.g. {_EXAMPLES}")
    tree = dict(tree)
    for key in LENGTH_KEYS:
        if isinstance(tree.get(key), dict):
            tree[key] = LengthSettings(**tree[key])
    return WorkloadSettings(**tree)
