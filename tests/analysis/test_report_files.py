"""Where ``report`` writes, and that it writes a report whole: built beside its folder and swapped in,
so Ctrl-C leaves the old report as it was; a results directory that cannot be written (a colleague's
read-only share) gets its report in the user's cache, said on the last line, nothing written into it."""

from __future__ import annotations

import errno
import tempfile
from pathlib import Path

import pytest

from sweep.analysis import report
from sweep.cli import main
from tests.analysis.sweepdir import SweepDir


@pytest.fixture
def directory(tmp_path):
    sd = SweepDir(tmp_path / "k-dryrun")
    base = sd.point(drafter="none", nccl="default", baseline=True, tok_s=[100, 100], levels={1: 100, 4: 360})
    sd.point(drafter="d1", steps="2", nccl="default", baseline_of=base, tok_s=[150, 150], levels={1: 150, 4: 300})
    return sd.write()


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_ctrl_c_mid_report_leaves_the_old_report_whole_and_no_temporary(directory, monkeypatch, capsys):
    assert main(["report", str(directory), "--no-plots", "--quiet"]) == 0
    old = _files(directory / "report")
    assert set(old) == {"report.md", "report.html", "policy-drafter-d1_nccl-default.json"}  # the policy's config

    def interrupted(f, path):
        raise KeyboardInterrupt

    monkeypatch.setitem(report.PLOTS, "concurrency.png", interrupted)  # after single_stream.png is drawn
    capsys.readouterr()
    assert main(["report", str(directory), "--quiet"]) == 130
    assert capsys.readouterr().err.strip() == "interrupted"
    assert _files(directory / "report") == old  # no new single_stream.png beside the old report.md
    assert [p.name for p in directory.iterdir() if p.name.startswith(".report")] == []


def test_a_read_only_results_directory_gets_its_report_in_the_cache(directory, tmp_path, monkeypatch, capsys):
    """As root (the tests' user) chmod stops no write: the folder's refusal is simulated where the
    report asks for its first folder there."""
    real = tempfile.mkdtemp

    def read_only(*args, dir=None, **kw):
        if dir is not None and Path(dir).resolve().is_relative_to(directory.resolve()):
            raise OSError(errno.EROFS, "Read-only file system", str(dir))
        return real(*args, dir=dir, **kw)

    monkeypatch.setattr(tempfile, "mkdtemp", read_only)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    before = _files(directory)
    assert main(["report", str(directory), "--no-plots"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    reports = tmp_path / "cache" / "sweep" / "reports"
    (written,) = reports.iterdir()
    assert written.name.startswith("k-dryrun-") and (written / "report.md").is_file()
    assert f"{directory / 'report'} cannot be written (Read-only file system)" in out[-2]
    assert out[-1].startswith(f"report written to {written / 'report.md'}")
    assert _files(directory) == before and not (directory / "report").exists()


def test_a_file_in_the_way_is_left_alone(directory, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    (directory / "report").write_text("my notes")
    assert main(["report", str(directory), "--no-plots", "--quiet"]) == 0
    assert (directory / "report").read_text() == "my notes"
    assert str(tmp_path / "cache") in capsys.readouterr().out.strip().splitlines()[-1]


def test_an_out_that_cannot_be_written_is_exit_7_before_anything_is_built(directory, tmp_path, capsys):
    (tmp_path / "file").write_text("")
    assert main(["report", str(directory), "--out", str(tmp_path / "file" / "r"), "--no-plots"]) == 7
    err = capsys.readouterr().err
    assert f"cannot write the report in {tmp_path / 'file' / 'r'}" in err and "Traceback" not in err


def test_an_out_folder_with_other_files_keeps_them(directory, tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "notes.txt").write_text("mine")
    (shared / "startup.png").write_bytes(b"an old report's plot")
    assert main(["report", str(directory), "--out", str(shared), "--no-plots", "--quiet"]) == 0
    assert sorted(p.name for p in shared.iterdir()) == [
        "notes.txt",
        "policy-drafter-d1_nccl-default.json",
        "report.html",
        "report.md",
    ]


def test_history_says_where_it_wrote_and_an_out_it_cannot_write_is_exit_7(directory, tmp_path, capsys):
    out = tmp_path / "history.md"
    assert main(["history", str(directory), "--out", str(out)]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == f"history written to {out}"
    assert out.read_text().startswith("#")
    (tmp_path / "file").write_text("")
    assert main(["history", str(directory), "--out", str(tmp_path / "file" / "h.md")]) == 7
    captured = capsys.readouterr()
    assert f"cannot write {tmp_path / 'file' / 'h.md'}" in captured.err and "Traceback" not in captured.err
    assert "Runs" in captured.out  # the history itself was printed first


def test_a_killed_reports_old_temporary_is_cleared_a_young_one_kept(directory):
    import os

    old, young = directory / ".report.abc.tmp", directory / ".report.def.tmp"
    for p in (old, young):
        p.mkdir()
        (p / "report.md").write_text("half")
    os.utime(old, (0, 0))
    assert main(["report", str(directory), "--no-plots", "--quiet"]) == 0
    assert not old.exists() and young.exists()


def test_a_report_folder_that_is_a_link_keeps_its_link(directory, tmp_path):
    real = tmp_path / "elsewhere"
    real.mkdir()
    (directory / "report").symlink_to(real)
    assert main(["report", str(directory), "--no-plots", "--quiet"]) == 0
    assert (directory / "report").is_symlink() and (real / "report.md").is_file()
    assert [p.name for p in directory.iterdir() if p.name.startswith(".report")] == []
