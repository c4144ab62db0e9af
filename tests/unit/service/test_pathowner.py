"""service.pathowner.owner_of: the owner named in permission hints."""

from __future__ import annotations

import os
import pwd
from pathlib import Path

import pytest

from service.pathowner import owner_of


def test_owner_of_an_existing_path(tmp_path: Path) -> None:
    assert owner_of(tmp_path) == pwd.getpwuid(os.getuid()).pw_name


def test_missing_path_names_its_nearest_existing_ancestor(tmp_path: Path) -> None:
    missing = tmp_path / "not" / "yet" / "here.sock"
    assert owner_of(missing) == pwd.getpwuid(os.getuid()).pw_name


def test_unknown_uid_is_named_by_number(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_user(uid: int) -> pwd.struct_passwd:
        raise KeyError(uid)

    monkeypatch.setattr(pwd, "getpwuid", no_user)
    assert owner_of(tmp_path) == f"uid {os.getuid()}"
