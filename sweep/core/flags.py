"""A server's flags, typed: ``ServerFlags``, the one type the plan, the host, the fake's launch, the
estimate and the analysis share for what an SGLang server is told. Pure.

It is built once from the ``{name: value}`` map of SGLang flags (names as ``--help`` writes them,
without dashes: ``speculative-num-steps``; ``--speculative_num_steps`` is normalised to it, as
``sweep.experiment.config.load`` does), immutable, and read as that map (``flag_args`` renders the
argv from it, the plan hashes it for the ids). A value is as the experiment gave it (a number,
``True`` for a bare switch, a list, a mapping) or, read back from the points table's ``flags``
column, as the argv shows it (text, ``"true"`` for a switch); ``False`` and ``None`` leave the flag
out. Every property reads both, and each fact is derived here by one rule:

- ``device``: SGLang's ``--device`` as given; not given, SGLang detects it (``cuda`` on the GPU hosts
  the sweep runs on). ``is_cpu``: exactly ``cpu``, as SGLang's own checks compare it.
- ``tp``/``pp``/``dp`` (either spelling; of two, the later wins as in argparse), ``gpus`` (the GPUs
  one server uses: tp x pp, times dp for data-parallel replicas, not with attention DP),
  ``nnodes``, ``node_gpus`` (the GPUs of one of its hosts, from ``--base-gpu-id``).
- ``model_path``, ``draft_model_path``, ``algorithm`` (upper case; None without speculation),
  ``steps``, ``topk``, ``draft_tokens``, ``adaptive``, ``port``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Optional

from sweep.core.errors import ConfigError
from sweep.core.speculation import ADAPTIVE_FLAG, CONFIG_FLAG

PARALLEL = {  # SGLang's spellings of each size
    "tp": ("tp-size", "tensor-parallel-size"),
    "pp": ("pp-size", "pipeline-parallel-size"),
    "dp": ("dp-size", "data-parallel-size"),
}
MODEL = ("model-path", "model")  # a server's flags name one of these: its sizes default to 1
_DRAFT_MODEL = ("speculative-draft-model-path", "speculative-draft-model")  # SGLang's two spellings
_ATTENTION_DP = ("attn-dp-size", "attention-data-parallel-size")
_DEFAULT_DEVICE = "cuda"  # SGLang detects the device where --device is not given; the sweep's hosts have GPUs
ADAPTIVE = ADAPTIVE_FLAG  # the adaptive flags: sweep/core/speculation.py owns their names
ADAPTIVE_CONFIG = CONFIG_FLAG
TRUE = "true"  # a bare switch's value as the flags column holds it


def normalize_flag(name: str) -> str:
    """``--speculative_num_steps`` and ``speculative-num-steps`` are the same flag."""
    return str(name).lstrip("-").replace("_", "-")


def given(value: Any) -> bool:
    """Whether a value puts its flag in the argv (``False`` and ``None`` leave it out)."""
    return value is not None and value is not False


def json_text(value: Mapping[str, Any]) -> str:
    """A mapping flag value as JSON text, keys sorted (the argv's value; what the host's file holds)."""
    return json.dumps(_plain(value), sort_keys=True)


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return [_plain(v) for v in value]
    return value


def arg_values(value: Any) -> list[str]:
    """What follows a flag's name in the argv: nothing for a switch, each of a list's values, or the value."""
    if value is True:
        return []
    return [_fmt(v) for v in value] if isinstance(value, (list, tuple)) else [_fmt(value)]


def _fmt(v: Any) -> str:
    if isinstance(v, Mapping):  # a flag whose value is JSON (speculative-adaptive-config given as the config itself)
        return json_text(v)
    if isinstance(v, float) and v.is_integer():
        return str(int(v)) if abs(v) >= 1 else str(v)
    return str(v)


def flag_args(flags: Mapping[str, Any]) -> list[str]:
    """``{"tp-size": 8, "trust-remote-code": True, "x": False}`` -> ``["--tp-size", "8", "--trust-remote-code"]``."""
    out: list[str] = []
    for name, value in flags.items():
        if given(value):
            out += [f"--{name}", *arg_values(value)]
    return out


def value_text(value: Any) -> str:
    """A given flag's value as one text, as the argv shows it: ``"true"`` for a switch, a list's
    values joined by spaces."""
    return TRUE if value is True else " ".join(arg_values(value))


def _int(text: Optional[str]) -> Optional[int]:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


class ServerFlags(Mapping[str, Any]):
    """A server's flags: ``{name: value}`` in SGLang's spelling, immutable, with the facts the sweep
    derives from them (see the module's docstring). ``ServerFlags({"tp_size": 2}).tp == 2``."""

    def __init__(self, flags: Mapping[str, Any] | Iterable[tuple[str, Any]] = ()) -> None:
        out: dict[str, Any] = {}
        for name, value in dict(flags).items():
            key = normalize_flag(name)
            if key in out:
                raise ConfigError(f"the flags set --{key} twice (spelled differently)", fix="keep one of them")
            out[key] = value
        self._flags = out

    # --- the map
    def __getitem__(self, name: str) -> Any:
        return self._flags[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._flags)

    def __len__(self) -> int:
        return len(self._flags)

    def __repr__(self) -> str:
        return f"ServerFlags({self._flags!r})"

    def as_dict(self) -> dict[str, Any]:
        """The plain ``{name: value}`` map (a copy), in its order."""
        return dict(self._flags)

    def merged(self, *others: Mapping[str, Any]) -> ServerFlags:
        """These flags with ``others``' set over them, in turn (a later value wins; its name normalised)."""
        out = dict(self._flags)
        for other in others:
            for name, value in other.items():
                out[normalize_flag(name)] = value
        return ServerFlags(out)

    def without(self, names: Iterable[str]) -> ServerFlags:
        drop = set(names)
        return ServerFlags({k: v for k, v in self._flags.items() if k not in drop})

    def args(self) -> list[str]:
        """The flags as the argv passes them (``flag_args``)."""
        return flag_args(self._flags)

    def text(self) -> dict[str, str]:
        """``{name: value}`` of the flags the argv passes, each value as the argv shows it
        (``value_text``): the points table's ``flags`` column."""
        return {k: value_text(v) for k, v in self._flags.items() if given(v)}

    def value(self, name: str, *aliases: str) -> Optional[str]:
        """A flag's value (or one of its aliases') as the argv shows it; None when it is left out. Of
        two aliases the later in the map wins, as the later flag of an argv does in argparse."""
        names, found = (name, *aliases), None
        for key, v in self._flags.items():
            if key in names and given(v):
                found = value_text(v)
        return found

    def is_set(self, name: str) -> bool:
        """Whether the argv passes the flag (a switch given, or any value)."""
        return given(self._flags.get(name))

    # --- where it runs
    @property
    def device(self) -> str:
        value = self._flags.get("device")
        return str(value) if given(value) and value != "" else _DEFAULT_DEVICE

    @property
    def is_cpu(self) -> bool:
        return self.device == "cpu"

    @property
    def port(self) -> Optional[int]:
        return _int(self.value("port"))

    # --- parallelism
    def size(self, kind: str) -> Optional[int]:
        """tp, pp or dp as given (at least 1), None when not given (or not a number)."""
        value = _int(self.value(*PARALLEL[kind]))
        return None if value is None else max(1, value)

    @property
    def tp(self) -> int:
        return self.size("tp") or 1

    @property
    def pp(self) -> int:
        return self.size("pp") or 1

    @property
    def dp(self) -> int:
        return self.size("dp") or 1

    @property
    def dp_attention(self) -> bool:
        """Attention DP (``--enable-dp-attention``, or an attention DP size): it runs inside the TP group."""
        return self.is_set("enable-dp-attention") or bool(self.value(*_ATTENTION_DP))

    @property
    def gpus(self) -> Optional[int]:
        """The GPUs one server uses: tp x pp, times dp for data-parallel replicas (not with attention
        DP); over every host it spans. None when the flags name no size and no model (not a server's)."""
        if all(self.size(k) is None for k in PARALLEL) and self.model_path is None:
            return None
        return self.tp * self.pp * (1 if self.dp_attention else self.dp)

    @property
    def nnodes(self) -> int:
        """How many hosts the server spans (``--nnodes``, default 1)."""
        value = _int(self.value("nnodes"))
        return max(1, value) if value is not None else 1

    @property
    def node_gpus(self) -> tuple[int, int]:
        """(the first GPU, how many GPUs) one host of the server uses: ``gpus`` over ``nnodes`` hosts;
        SGLang places its ranks on consecutive GPUs from ``--base-gpu-id`` (default 0)."""
        base = self.value("base-gpu-id")
        first = int(base) if base is not None and base.isdigit() else 0
        return first, max(1, (self.gpus or 1) // self.nnodes)

    # --- what it serves
    @property
    def model_path(self) -> Optional[str]:
        return self.value(*MODEL) or None

    @property
    def draft_model_path(self) -> Optional[str]:
        return self.value(*_DRAFT_MODEL) or None

    @property
    def algorithm(self) -> Optional[str]:
        """The speculative algorithm, upper case (SGLang's spelling); None without speculation."""
        value = self.value("speculative-algorithm")
        return value.upper() if value else None

    @property
    def is_speculative(self) -> bool:
        return self.algorithm is not None

    @property
    def steps(self) -> Optional[int]:
        return _int(self.value("speculative-num-steps"))

    @property
    def topk(self) -> Optional[int]:
        return _int(self.value("speculative-eagle-topk"))

    @property
    def draft_tokens(self) -> Optional[int]:
        return _int(self.value("speculative-num-draft-tokens"))

    @property
    def adaptive(self) -> bool:
        """``--speculative-adaptive`` given (whether the server adapts is its log's to say)."""
        return self.is_set(ADAPTIVE)
