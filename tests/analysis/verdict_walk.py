"""Every pair verdict a report states, read back from its text (``report.md``): the sentences, the
tables, the picks. ``claims(text)`` returns one entry per statement: (scope, a, b, verdict, where),
``scope`` ``("level", C)``, ``("slo", NAME)`` or ``("single",)``, the verdict of ``a`` against ``b``
(``ahead`` / ``behind`` / ``within noise``) and where it was read. ``contradictions`` lists the pairs
given two verdicts.

What is read: the Deploy lines, the Summary (SLO lines, the highest level's line), each SLO table (the
pick's margins, 'the pick over it'), the Concurrency table (each ratio against its baseline), the best
per level, where speculation stops paying, the speedup grid, the single-stream table."""

from __future__ import annotations

import re
from collections import defaultdict

_LABEL = r"[a-z_][\w.=,:\-/]*=[\w.\-/]+(?:,[\w.\-]+=[\w.\-/]+)*"
_INTERVAL = re.compile(
    r"([+-]\d+(?:\.\d+)?)% \(95% interval ([+-]\d+(?:\.\d+)?%|unbounded) \.\. ([+-]\d+(?:\.\d+)?%|unbounded)(, within noise)?\)"
)


def _flip(v: str) -> str:
    return {"ahead": "behind", "behind": "ahead"}.get(v, v)


def _strip(label: str) -> str:
    return label.strip().rstrip(".;,").removesuffix(" (baseline)").removesuffix(" (a baseline)").strip()


def _pct(text: str) -> float:
    return float("inf") if text == "unbounded" else float(text.rstrip("%")) / 100


def _by_interval(low: str, high: str) -> str:
    lo, hi = _pct(low), _pct(high)
    return "ahead" if lo > 0 else "behind" if hi < 0 else "within noise"


def _ratio_cell(cell: str) -> str | None:
    """'~1.15x' within noise, '1.33x' ahead, '0.78x' behind (a ratio against 1); None: no ratio, or
    '?0.00x' (no verdict)."""
    m = re.search(r"([~?]?)(\d+\.\d+)x", cell)
    if not m or m.group(1) == "?":  # no ratio, or one without a verdict
        return None
    if m.group(1):
        return "within noise"
    value = float(m.group(2))
    return "ahead" if value > 1 else "behind" if value < 1 else None


def _tables(text: str) -> list[tuple[str, list[str], list[list[str]]]]:
    """(the heading above, header cells, rows of cells) of every Markdown table."""
    out, heading, lines = [], "", text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("#"):
            heading = line.lstrip("#").strip()
        if line.startswith("|") and i + 1 < len(lines) and set(lines[i + 1].replace("|", "").strip()) <= {"-", " "}:
            header = [c.strip() for c in line.strip("|").split("|")]
            rows = []
            i += 2
            while i < len(lines) and lines[i].startswith("|"):
                rows.append([c.strip() for c in lines[i].strip("|").split("|")])
                i += 1
            out.append((heading, header, rows))
            continue
        i += 1
    return out


def claims(text: str, baselines: dict[str, str]) -> list[tuple[tuple, str, str, str, str]]:
    """Every pair verdict ``text`` (a report.md) states; ``baselines``: label -> its baseline's label."""
    out: list[tuple[tuple, str, str, str, str]] = []

    def say(scope: tuple, a: str, b: str, verdict: str | None, where: str) -> None:
        if verdict is not None and a and b and a != b:
            out.append((scope, _strip(a), _strip(b), verdict, where))

    # the sentences: Deploy and Summary
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("- "):
            continue
        eq = re.search(
            r"no decision(?: there)?: these \d+ are equivalent \(within noise\): (.+?)(?: \.\.\.)?(?:;| \()", line
        )
        if eq:  # a set called equivalent: every pair of it within noise
            c = re.match(r"- At the highest concurrency measured \(C=(\d+)\)", line)
            s = re.match(r"- SLO ([\w.\-]+)[ :]", line)
            scope0: tuple = ("level", int(c.group(1))) if c else ("slo", s.group(1)) if s else ("?",)
            names = [n if n.startswith("drafter=") else "drafter=" + n for n in eq.group(1).split(", drafter=")]
            for i, a in enumerate(names):
                for b in names[i + 1 :]:
                    say(scope0, a, b, "within noise", "summary: equivalent")
        m = re.match(r"- SLO ([\w.\-]+)[ :]", line)
        if m:
            scope: tuple = ("slo", m.group(1))
            pick = re.search(
                r"(?:: |deploy |the highest of them, )("
                + _LABEL
                + r")(?: \(a baseline\))?(?:, up to| measured highest|, at every)",
                line,
            )
            if not pick:
                continue
            p = pick.group(1)
            d = re.search(r"no decision: within noise of (" + _LABEL + r") \(", line)
            if d:
                say(scope, p, d.group(1), "within noise", "deploy line")
            d = re.search(r"ahead of (" + _LABEL + r") \(", line)
            if d:
                say(scope, p, d.group(1), "ahead", "deploy line")
            w = re.search(r"measured highest, within noise of (.+?)(?: and \d+ more)?;", line)
            if w:
                for other in w.group(1).split(", drafter="):
                    other = other if other.startswith("drafter=") else "drafter=" + other
                    say(scope, p, other.split(" (")[0], "within noise", "summary: within noise of")
            for m2 in re.finditer(_INTERVAL.pattern + r" over (?:the runner-up|its baseline) (" + _LABEL + ")", line):
                verdict = _by_interval(m2.group(2), m2.group(3))
                say(scope, p, m2.group(5), verdict, "summary: margin")
            continue
        m = re.match(r"- At the highest concurrency measured \(C=(\d+)\)", line)
        if m:
            scope = ("level", int(m.group(1)))
            w = re.search(
                r"no decision there: (" + _LABEL + r") measured highest, within noise of (.+?)(?: and \d+ more)? \(",
                line,
            )
            if w:
                for other in w.group(2).split(", "):
                    say(scope, w.group(1), other, "within noise", "summary: C line")
            b = re.search(
                r"the best there is ("
                + _LABEL
                + r")(?: \(a baseline\))?, "
                + _INTERVAL.pattern
                + r" over the runner-up ("
                + _LABEL
                + ")",
                line,
            )
            if b:
                say(scope, b.group(1), b.group(6), _by_interval(b.group(3), b.group(4)), "summary: C line")

    # the tables
    for heading, header, rows in _tables(text):
        col = {h: i for i, h in enumerate(header)}
        if heading.startswith("SLO ") and "vs next" in col:
            scope = ("slo", heading.removeprefix("SLO ").strip())
            named = [r for r in rows if r[col["rank"]].isdigit()]
            if not named:
                continue
            pick = _strip(named[0][col["configuration"]])
            if len(named) > 1 and named[0][col["vs next"]].startswith(("~", "+", "-")):
                cell = named[0][col["vs next"]]
                say(
                    scope,
                    pick,
                    named[1][col["configuration"]],
                    "within noise" if cell.startswith("~") else "ahead",
                    "SLO table: vs next",
                )
            cell = named[0][col["vs its baseline"]]
            if pick in baselines and cell.startswith(("~", "+", "-")) and "%" in cell:
                v = "within noise" if cell.startswith("~") else ("ahead" if cell.startswith("+") else "behind")
                say(scope, pick, baselines[pick], v, "SLO table: vs its baseline")
            over = "the pick over it, 95% interval"
            if over in col:
                for r in named[1:]:
                    cell = r[col[over]]
                    m = re.match(r"(~?)([+-][\d.]+%|unbounded) \.\. ([+-][\d.]+%|unbounded)", cell)
                    if m:
                        v = "within noise" if m.group(1) else _by_interval(m.group(2), m.group(3))
                        say(scope, pick, r[col["configuration"]], v, "SLO table: the pick over it")
        elif heading == "Concurrency" and header and header[0] == "point":
            for r in rows:
                label = _strip(r[0])
                for h, i in col.items():
                    if h.startswith("C=") and label in baselines:
                        say(("level", int(h[2:])), label, baselines[label], _ratio_cell(r[i]), "Concurrency table")
        elif heading.startswith("Best configuration per concurrency level"):
            for r in rows:
                c = int(r[col["C"]])
                best = _strip(r[col["best"]])
                if best in baselines:
                    say(
                        ("level", c),
                        best,
                        baselines[best],
                        _ratio_cell(r[col["vs its baseline"]]),
                        "best per level: vs baseline",
                    )
                margin = r[col["margin"]]
                if r[col["runner-up"]] not in ("", "-") and "%" in margin:
                    v = "within noise" if margin.startswith("~") else ("ahead" if margin.startswith("+") else "behind")
                    say(("level", c), best, r[col["runner-up"]], v, "best per level: margin")
        elif heading.startswith("Where speculation stops paying") and "outcome" in col:
            for r in rows:
                label, base = _strip(r[0]), _strip(r[col["baseline"]])
                for what, v in (
                    ("ahead at C=", "ahead"),
                    ("behind at C=", "behind"),
                    ("within noise at C=", "within noise"),
                ):
                    m = re.search(re.escape(what) + r"([\d, ]+)", r[col["outcome"]])
                    if m:
                        for c in re.findall(r"\d+", m.group(1)):
                            say(("level", int(c)), label, base, v, "crossover outcome")
        elif re.match(r"\S+, C=(\d+), output throughput", heading) and header and header[0] == "drafter":
            m = re.match(r"(\S+), C=(\d+), output throughput", heading)
            panel, c = m.group(1), int(m.group(2))
            for r in rows:
                for h, i in col.items():
                    if h.startswith("steps="):
                        label = f"drafter={r[0]},{h},{panel}"
                        if label in baselines:
                            say(("level", c), label, baselines[label], _ratio_cell(r[i]), "speedup grid")
    return out


def contradictions(found: list[tuple[tuple, str, str, str, str]]) -> dict:
    """The pairs (scope, a, b; a < b) given more than one verdict, with every statement of each."""
    said: dict[tuple, set[str]] = defaultdict(set)
    where: dict[tuple, list[str]] = defaultdict(list)
    for scope, a, b, v, at in found:
        key, verdict = ((scope, a, b), v) if a < b else ((scope, b, a), _flip(v))
        said[key].add(verdict)
        where[key].append(f"{at}: {verdict}")
    return {k: where[k] for k, v in said.items() if len(v) > 1}
