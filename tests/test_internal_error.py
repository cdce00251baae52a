"""An exception the sweep did not expect (a bug) exits 70 with one line naming a file that holds the
traceback, for every command: 1 stays "a point failed", and a traceback is not the user's to read."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _run(tmp_path: Path, patch: str, *argv: str) -> subprocess.CompletedProcess:
    """``python -m sweep ARGV`` with ``patch`` (module, attribute) made to raise, temp files under tmp_path."""
    module, name = patch.rsplit(".", 1)
    code = textwrap.dedent(f"""
        import sys, importlib
        import sweep.cli
        def boom(*a, **k):
            raise RuntimeError("boom\\nsecond line")
        setattr(importlib.import_module({module!r}), {name!r}, boom)
        raise SystemExit(sweep.cli.main(sys.argv[1:]))
    """)
    tmp = tmp_path / "tmp"
    tmp.mkdir(exist_ok=True)
    return subprocess.run(
        [sys.executable, "-c", code, *argv],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "TMPDIR": str(tmp)},
    )


def _one_line(r: subprocess.CompletedProcess) -> Path:
    assert r.returncode == 70, (r.returncode, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    line = lines[0]
    assert line.startswith(
        "internal error: RuntimeError: boom second line (a bug in sweep, not in your input); the traceback is in "
    ), line
    assert "please report it with that file at" in line
    path = Path(line.split("the traceback is in ")[1].split(";")[0])
    text = path.read_text()
    assert "Traceback" in text and "RuntimeError: boom" in text and "command: python -m sweep" in text
    return path


def test_a_reading_command_keeps_the_traceback_in_the_temp_folder(tmp_path):
    path = _one_line(_run(tmp_path, "sweep.analysis.cli.run_query", "query", str(tmp_path), "SELECT 1"))
    assert path.parent == tmp_path / "tmp" and "query" in path.read_text()


def test_a_sweep_keeps_it_in_its_results_directory_logs(tmp_path):
    logs = tmp_path / "res" / "logs"
    logs.mkdir(parents=True)
    exp = tmp_path / "exp.yaml"
    exp.write_text((REPO / "experiments" / "k26_eagle.yaml").read_text() + f"results_dir: {tmp_path / 'res'}\n")
    path = _one_line(_run(tmp_path, "sweep.api.plan_for", str(exp), "--plan"))
    assert path.parent == logs


def test_a_reader_that_goes_away_is_no_bug(tmp_path):
    """``query ... | head``: the closed pipe exits 141 (as SIGPIPE would), quietly; not 70."""
    code = textwrap.dedent("""
        import sys
        import sweep.analysis.cli as a
        import sweep.cli
        def lots(args):
            for _ in range(10_000):
                sys.stdout.write("x" * 100 + "\\n")
            sys.stdout.flush()
            return 0
        a.run_query = lots
        raise SystemExit(sweep.cli.main(["query", "DIR", "SELECT 1"]))
    """)
    p = subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )
    p.stdout.close()  # the reader is gone before the first write
    err = p.stderr.read().decode()
    assert p.wait(timeout=60) == 141 and err == "", err
    assert not list(tmp_path.iterdir())
