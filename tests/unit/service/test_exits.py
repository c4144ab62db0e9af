"""service.exits.run_main: Ctrl-C and a closed reader end a program with a code, no traceback."""

from __future__ import annotations

import pytest

from service.exits import EXIT_BROKEN_PIPE, EXIT_INTERRUPTED, run_main


def test_main_code_is_returned_and_none_is_zero() -> None:
    assert run_main(lambda: 3) == 3
    assert run_main(lambda: None) == 0
    assert run_main(lambda: 0) == 0


def test_keyboard_interrupt_is_exit_130() -> None:
    def main() -> int:
        raise KeyboardInterrupt

    assert run_main(main) == EXIT_INTERRUPTED == 130


def test_broken_pipe_is_exit_141_and_silences_stdout(monkeypatch: pytest.MonkeyPatch) -> None:
    silenced: list[bool] = []
    monkeypatch.setattr("service.exits._silence_stdout", lambda: silenced.append(True))

    def main() -> int:
        raise BrokenPipeError

    assert run_main(main) == EXIT_BROKEN_PIPE == 141
    assert silenced == [True]


def test_other_errors_are_not_swallowed() -> None:
    def main() -> int:
        raise ValueError("a real bug")

    with pytest.raises(ValueError, match="a real bug"):
        run_main(main)
