"""A disk that fills while a report is written: the previous file stays, and the user reads
one line naming the file, not a traceback."""
import errno
import os

import pytest

from torchgate.core import records
from torchgate.core.errors import UserError, one_line_errors
from torchgate.core.records.rows import CompareRecord


def _failing(code):
    def fsync(fd):
        raise OSError(code, os.strerror(code))
    return fsync


@pytest.mark.parametrize("code, fix", [
    (errno.ENOSPC, "free space on that disk and rerun"),
    (errno.EDQUOT, "free space within your disk quota and rerun")])
def test_a_full_disk_keeps_the_previous_file_and_is_one_line(tmp_path, monkeypatch, code, fix):
    path = tmp_path / "reports" / "compare.md"
    records.write_text(path, "previous\n")
    monkeypatch.setattr(os, "fsync", _failing(code))
    with pytest.raises(UserError) as err:
        records.write_text(path, "this run's\n")
    assert str(err.value) == (f"cannot write {path}: {os.strerror(code)} "
                              f"({errno.errorcode[code]}); the previous file is kept: {fix}")
    assert path.read_text() == "previous\n"
    assert [p.name for p in path.parent.iterdir()] == ["compare.md"]    # no temp file left


def test_a_stage_says_it_in_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(os, "fsync", _failing(errno.ENOSPC))
    with pytest.raises(SystemExit) as exit_:
        with one_line_errors("compare"):
            records.write_record(tmp_path / "compare.json", CompareRecord("HEAD", True, 0.05, 0))
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"torchgate compare: error: cannot write {tmp_path / 'compare.json'}: "
                   "No space left on device (ENOSPC); nothing was written: free space on that "
                   "disk and rerun"]


def test_a_full_disk_when_the_temp_file_is_made_is_one_line_too(tmp_path, monkeypatch):
    def mkstemp(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(records.tempfile, "mkstemp", mkstemp)
    with pytest.raises(UserError, match=r"cannot write .*summary.md: No space left on device"):
        records.write_text(tmp_path / "summary.md", "x")
