"""`turnout_cli.optimize`: the command line a server process restarts itself with under `-O`/`-OO`."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from turnout_cli.optimize import reexec_argv

PY = "/venv/bin/python3.11"


def test_console_script_restarts_with_two_o_flags_before_the_script() -> None:
    argv = reexec_argv(["/venv/bin/python", "/venv/bin/turnout", "worker"], PY, current=0, wanted=2)
    assert argv == [PY, "-O", "-O", "/venv/bin/turnout", "worker"]


def test_module_run_keeps_its_interpreter_flags_and_arguments() -> None:
    orig = ["python", "-u", "-m", "turnout_cli.main", "ingress", "--port", "8080"]
    assert reexec_argv(orig, PY, current=0, wanted=2) == [
        PY,
        "-O",
        "-O",
        "-u",
        "-m",
        "turnout_cli.main",
        "ingress",
        "--port",
        "8080",
    ]


def test_only_the_missing_levels_are_added() -> None:
    assert reexec_argv(["python", "-O", "-m", "turnout_cli.main", "worker"], PY, current=1, wanted=2) == [
        PY,
        "-O",
        "-O",
        "-m",
        "turnout_cli.main",
        "worker",
    ], "-O already given plus one more: level 2, not 3 (which would look for .opt-3.pyc files)"


def test_no_restart_when_already_at_or_above_the_level_or_the_command_line_is_unknown() -> None:
    assert reexec_argv(["python", "-OO", "-m", "m"], PY, current=2, wanted=2) is None, (
        "the restarted process stops there"
    )
    assert reexec_argv(["python", "-m", "m"], PY, current=0, wanted=0) is None, "TURNOUT_PYTHON_OPTIMIZE=0"
    assert reexec_argv(["python", "-OO", "-m", "m"], PY, current=2, wanted=1) is None, "never lowers a level"
    assert reexec_argv(["python", "-m", "m"], "", current=0, wanted=2) is None, "no interpreter path"
    assert reexec_argv(["python"], PY, current=0, wanted=2) is None, "no command to repeat"


@given(
    orig=st.lists(st.text(min_size=1, max_size=8), min_size=2, max_size=6),
    current=st.integers(0, 2),
    wanted=st.integers(0, 2),
)
def test_restart_reaches_exactly_the_wanted_level_and_repeats_the_command(
    orig: list[str], current: int, wanted: int
) -> None:
    argv = reexec_argv(orig, PY, current=current, wanted=wanted)
    if wanted <= current:
        assert argv is None
        return
    assert argv is not None and argv[0] == PY
    added = argv[1 : 1 + wanted - current]
    assert added == ["-O"] * (wanted - current), "current + added -O flags == wanted"
    assert argv[1 + wanted - current :] == orig[1:], "the same flags, script or module, and arguments"
