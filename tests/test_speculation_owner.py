"""One speculation model (sweep/core/speculation.py): the adaptive flags' names, the version gate and
the step-group rule are written there once; the rooms that need them read them from it."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import sweep
from sweep.analysis import policy
from sweep.core import flags, speculation
from sweep.experiment import plan
from sweep.search import adaptive as search_adaptive
from sweep.sglang import adaptive as sglang_adaptive
from sweep.sglang import serverargs

ROOT = Path(sweep.__file__).parent
OWNER = ROOT / "core" / "speculation.py"
# SGLang's own surface as data: its flag lists and types per release, and the fake's copy of its argparse
SGLANG_TABLES = {ROOT / "sglang" / "flagnames.py", ROOT / "sglang" / "flagtypes.py", ROOT / "fake" / "args.py"}
OWNED = {speculation.ADAPTIVE_FLAG, speculation.CONFIG_FLAG, speculation.CPU_BUILD}


def _literals(path: Path) -> set[str]:
    return {n.value for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Constant) and n.value in OWNED}


def test_the_flag_names_and_the_cpu_build_are_written_in_one_module():
    found = {
        str(p.relative_to(ROOT)): hits
        for p in sorted(ROOT.rglob("*.py"))
        if p != OWNER and p not in SGLANG_TABLES and (hits := _literals(p))
    }
    assert found == {}, f"written outside sweep/core/speculation.py: {found}"


def test_every_room_reads_the_version_gate_and_the_names_from_it():
    assert policy.has_adaptive is speculation.has_adaptive
    assert serverargs.KNOWN_BUILDS is speculation.KNOWN_BUILDS
    assert (sglang_adaptive.SINCE, sglang_adaptive.CPU_BUILD) == (speculation.SINCE, speculation.CPU_BUILD)
    assert (sglang_adaptive.FLAG, sglang_adaptive.CONFIG_FLAG) == (speculation.ADAPTIVE_FLAG, speculation.CONFIG_FLAG)
    assert (flags.ADAPTIVE, flags.ADAPTIVE_CONFIG) == (speculation.ADAPTIVE_FLAG, speculation.CONFIG_FLAG)
    assert (policy.CONFIG_FLAG, policy._ADAPTIVE_FLAG) == (speculation.CONFIG_FLAG, speculation.ADAPTIVE_FLAG)
    assert policy.ADAPTIVE == plan.ADAPTIVE == speculation.confirm_value(1) == "adaptive"
    assert speculation.confirm_value(2) == "adaptive-r2" and speculation.is_confirm_value("adaptive-r2")
    assert not speculation.is_confirm_value("adaptive-x") and not speculation.is_confirm_value("2")


def test_the_step_groups_are_computed_by_its_rule():
    """The plan's, the analysis's and the search's groups: each calls the one rule, none keeps its own."""
    assert "speculation.step_axis_of" in inspect.getsource(plan._step_groups)
    assert "speculation.step_group_key" in inspect.getsource(plan._step_groups)
    assert "speculation.step_axis_of" in inspect.getsource(policy._infer_step_axis)
    assert "speculation.step_group_key" in inspect.getsource(policy.groups)
    assert "speculation.shared_axes" in inspect.getsource(search_adaptive.group_key)


def test_the_version_gate():
    assert [speculation.has_adaptive(v) for v in ("0.5.10", "0.5.23", "0.6.0", "7f8f030", "0.0.0.dev0+g7f8f030")] == [
        False,
        True,
        True,
        True,
        True,
    ]
    assert speculation.has_adaptive("weird") is None and speculation.has_adaptive(None) is None


def test_routing_pads_to_the_graph_batch_sizes_as_sglang_does():
    graphs = speculation.decode_graph_bs(48)  # the speculative list: 1-8, 10-32 by 2, 40-48 by 4
    assert graphs == [*range(1, 9), *range(10, 33, 2), 40, 44, 48]
    assert speculation.decode_graph_bs(20, speculative=False) == [1, 2, 4, 8, 12, 16, 20]
    assert [speculation.route_key(b, [1, 9, 30], graphs) for b in (1, 8, 9, 11, 29, 33, 100)] == [
        1,
        1,
        9,
        9,
        30,
        30,
        30,
    ]
    assert speculation.route_key(9, [1, 10]) == 1 and speculation.route_key(9, [1, 10], graphs) == 10
    assert speculation.served([1, 10], graphs, 20) == {1: (1, 8), 10: (9, None)}
