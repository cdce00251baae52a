"""Secrets: which names hold one, and how they are hidden wherever the sweep writes or prints.

A *secret name* is an env variable or flag whose last word is KEY, TOKEN, SECRET, PASSWORD, AUTH
(``HF_TOKEN``, ``MY_API_KEY``, ``--api-key``, ``--admin-api-key``, ``--ssl-keyfile-password``), or
that has SECRET, PASSWORD or CREDENTIAL(S) anywhere (``AWS_SECRET_ACCESS_KEY_ID``). Words, not
substrings: ``--max-total-tokens``, ``--skip-tokenizer-init``, ``--ssl-keyfile`` and
``TOKENIZERS_PARALLELISM`` are not secret, nor are the two SGLang flags that end in ``-token``
without holding one (NOT_SECRET).

What is hidden, and how (a value becomes ``<redacted>``; the name stays, so a reader knows which
variable or flag it was, and a rerun needs nothing from the hidden value: point ids are computed
from the real values, before any of this):

- ``redact_env``: the values of secret names in an env mapping;
- ``redact_argv``: ``--api-key X``, ``--api-key=X`` and any flag with a secret name;
- ``redact_text``: each known secret value in a string, and what looks like a secret assignment in
  it (``api_key='...'`` in SGLang's ``server_args=ServerArgs(...)`` line, ``"api_key": "..."``,
  ``--api-key X`` inside a command line, ``Authorization: Bearer X``);
- ``redact_tree``: a nested structure (the plan, the experiment): secret-named keys, argv lists,
  then every string for the known values.

``secret_values`` collects the values to look for from an argv and env (a point's). Values shorter
than MIN_VALUE_LEN, and plain numbers and booleans, are hidden where their name says so but never
searched for in free text (``AUTH=1`` must not turn every ``1`` of a log into ``<redacted>``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

REDACTED = "<redacted>"
_MIN_VALUE_LEN = 6

_LAST_WORDS = frozenset(
    {"key", "apikey", "token", "secret", "password", "passwd", "passphrase", "auth", "credential", "credentials", "pat"}
)
_ANY_WORDS = frozenset({"secret", "password", "passwd", "passphrase", "credential", "credentials", "apikey"})
# SGLang flags that end in a secret word without holding a secret (checked against every flag
# SGLang knows in tests/test_redact.py)
_NOT_SECRET = frozenset(
    {
        "bucket-time-to-first-token",
        "kt-max-deferred-experts-per-token",
        # the sweep's own: a plan point's bench_key names its client-side axis values
        # (workload=code), no secret; hidden, it took every label holding them with it
        "bench-key",
    }
)

_WORDS = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z0-9]+(?![a-z])")
_PLAIN = re.compile(r"(?i)^(?:[-+]?\d+(?:\.\d+)?|true|false|yes|no|on|off|none|null)$")


def words(name: str) -> list[str]:
    """``MY_API_KEY`` -> [my, api, key]; ``--admin-api-key`` -> [admin, api, key]; ``apiKey`` -> [api, key]."""
    return [w.lower() for w in _WORDS.findall(name)]


def is_secret_name(name: str) -> bool:
    bare = str(name).lstrip("-").split("=", 1)[0]
    if bare.replace("_", "-").lower() in _NOT_SECRET:
        return False
    ws = words(bare)
    return bool(ws) and (ws[-1] in _LAST_WORDS or any(w in _ANY_WORDS for w in ws))


def redact_env(env: Mapping[str, Any]) -> dict[str, Any]:
    """The values of secret names replaced (``{"HF_TOKEN": "<redacted>", "NCCL_ALGO": "Ring"}``)."""
    return {k: (REDACTED if is_secret_name(k) and v not in (None, "") else v) for k, v in env.items()}


def redact_argv(argv: Iterable[object], values: Iterable[str] = ()) -> list[str]:
    """``--api-key X`` -> ``--api-key <redacted>``, ``--api-key=X`` -> ``--api-key=<redacted>``, for every
    flag with a secret name; then each known secret value in what is left (``values``)."""
    known = _searchable(values)
    out: list[str] = []
    hide_next = False
    for a in map(str, argv):
        if hide_next and not a.startswith("--"):
            out.append(REDACTED)
            hide_next = False
            continue
        hide_next = False
        if a.startswith("--") and is_secret_name(a):
            if "=" in a:
                out.append(a.split("=", 1)[0] + "=" + REDACTED)
            else:
                out.append(a)
                hide_next = True
        else:
            out.append(_replace_values(a, known))
    return out


def secret_values(
    argv: Iterable[Any] = (), env: Mapping[str, Any] | None = None, flags: Mapping[str, Any] | None = None
) -> list[str]:
    """The secret values of a point: of secret-named flags in its argv (or flags) and env."""
    out: list[str] = []
    argv = [str(a) for a in argv]
    for i, a in enumerate(argv):
        if a.startswith("--") and is_secret_name(a):
            if "=" in a:
                out.append(a.split("=", 1)[1])
            elif i + 1 < len(argv) and not argv[i + 1].startswith("--"):
                out.append(argv[i + 1])
    for mapping in (env or {}), (flags or {}):
        out += [str(v) for k, v in mapping.items() if is_secret_name(str(k)) and v not in (None, "")]
    return sorted(set(out), key=lambda v: (-len(v), v))


def _searchable(values: Iterable[str]) -> list[str]:
    vs = {str(v) for v in values if v is not None}
    return sorted(
        (v for v in vs if len(v) >= _MIN_VALUE_LEN and not _PLAIN.match(v) and v != REDACTED),
        key=lambda v: (-len(v), v),
    )


def _replace_values(text: str, known: list[str]) -> str:
    for v in known:
        if v in text:
            text = text.replace(v, REDACTED)
    return text


# name='value' / name="value" (a Python repr, SGLang's server_args= line), "name": "value" (JSON),
# name=value up to a separator, and --name value / --name=value inside a command line
_ASSIGN = re.compile(
    r"""(?P<name>\b[A-Za-z_][\w.-]*)(?P<sep>\s*=\s*|["']?\s*:\s*)(?P<q>['"])(?P<value>(?:\\.|(?!(?P=q)).)*)(?P=q)"""
)
_BARE = re.compile(r"(?P<name>\b[A-Za-z_][\w.-]*)(?P<sep>=)(?P<value>[^\s,;)'\"&]+)")
_BEARER = re.compile(r"(?i)\b(bearer)([ \t]+)[A-Za-z0-9._~+/=-]+")
_FLAG = re.compile(r"(?P<name>--[A-Za-z0-9][\w-]*)(?P<sep>=|[ \t]+)(?P<value>[^\s'\"-][^\s'\"]*|'[^']*'|\"[^\"]*\")")


def _hide(m: re.Match) -> str:
    value = m.group("value")
    if not is_secret_name(m.group("name")) or value in ("", "None", "null", REDACTED, f"'{REDACTED}'"):
        return m.group(0)
    q = m.groupdict().get("q") or ""
    return f"{m.group('name')}{m.group('sep')}{q}{REDACTED}{q}"


def redact_text(text: str, values: Iterable[str] = ()) -> str:
    """Each known secret value replaced, then secret-looking assignments (``api_key='...'``,
    ``"api_key": "..."``, ``token=...``, ``--api-key ...``, ``Bearer ...``) hidden whatever their value."""
    if not text:
        return text
    text = _replace_values(text, _searchable(values))
    for rx in (_ASSIGN, _FLAG, _BARE):
        text = rx.sub(_hide, text)
    return _BEARER.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)


def redact_tree(obj: Any, values: Iterable[str] = ()) -> Any:
    """A copy of a nested structure (dicts, lists, scalars) with secrets hidden: the value of every
    secret-named key (a whole subtree too), every argv-like list (a list with ``--flag`` strings),
    and each known value anywhere (``values``, plus the values found under secret names here)."""
    found = set(values) | set(_collect(obj))
    known = _searchable(found)

    def walk(o: Any) -> Any:
        if isinstance(o, Mapping):
            return {
                k: (REDACTED if is_secret_name(str(k)) and o[k] not in (None, "", [], {}) else walk(o[k])) for k in o
            }
        if isinstance(o, (list, tuple)):
            if any(isinstance(a, str) and a.startswith("--") for a in o):
                return redact_argv(o, known)
            return [walk(a) for a in o]
        if isinstance(o, str):
            return redact_text(o, known)
        return o

    return walk(obj)


def _collect(obj: Any) -> list[str]:
    """Values under secret-named keys, and of secret flags in argv-like lists, anywhere in obj."""
    out: list[str] = []
    if isinstance(obj, Mapping):
        for k, v in obj.items():
            if is_secret_name(str(k)) and isinstance(v, (str, int, float)) and not isinstance(v, bool):
                out.append(str(v))
            else:
                out += _collect(v)
    elif isinstance(obj, (list, tuple)):
        if any(isinstance(a, str) and a.startswith("--") for a in obj):
            out += secret_values(obj)
        for a in obj:
            out += _collect(a)
    return out
