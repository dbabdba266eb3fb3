"""A SQLite store URL that names something other than a file is a clear error, never a traceback."""

from __future__ import annotations

import pytest

from loopfsm.cli.main import main
from loopfsm.router.errors import StoreError
from loopfsm.router.store import open_store


@pytest.mark.parametrize("where", ["/dev/null", "dir"])
def test_a_store_on_a_device_or_a_directory_is_refused(tmp_path, capsys, where):
    path = str(tmp_path) if where == "dir" else where
    with pytest.raises(StoreError, match=f"cannot open SQLite database '{path}'"):
        open_store(f"sqlite:///{path}", create=True)
    assert main(["store", "init", f"sqlite:///{path}"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and "cannot open SQLite database" in err


@pytest.mark.parametrize("url", ["sqlite://runs.db", "sqlite:runs.db"])
def test_a_sqlite_url_with_too_few_slashes_says_so(tmp_path, monkeypatch, url):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StoreError, match="a sqlite URL has three slashes before its path: sqlite:///runs.db"):
        open_store(url, create=True)
    assert list(tmp_path.iterdir()) == []


def test_an_unknown_scheme_is_named_cut_short():
    with pytest.raises(StoreError, match=r"unknown store URL scheme 'xxxxxxxx.*\.\.\. \(502 characters\)"):
        open_store("x" * 500 + "://h", create=True)
