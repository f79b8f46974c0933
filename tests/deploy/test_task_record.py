"""The working folder's task record (``deploy.requester.TaskRecord``), what ``fgbdt train --resume`` starts from:
read back as written, and a missing or damaged record refused by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from fgbdt_chain.deploy.requester import TASK_RECORD, ResumeError, TaskRecord


def test_a_task_record_reads_back_as_written(tmp_path: Path) -> None:
    record = TaskRecord(task=3, contract="0x" + "ab" * 20, chain_id=31337, requester="0x" + "cd" * 20, start_block=17)
    record.write(tmp_path)
    assert TaskRecord.read(tmp_path) == record
    assert [p.name for p in tmp_path.iterdir()] == [TASK_RECORD]  # written whole, nothing left beside it


def test_a_missing_or_damaged_task_record_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(ResumeError, match=f"no task to resume in {tmp_path}: {TASK_RECORD} is missing"):
        TaskRecord.read(tmp_path)
    (tmp_path / TASK_RECORD).write_text('{"task": 3}')
    with pytest.raises(ResumeError, match="is not a task record"):
        TaskRecord.read(tmp_path)
    (tmp_path / TASK_RECORD).write_text("{")
    with pytest.raises(ResumeError, match="is not a task record"):
        TaskRecord.read(tmp_path)
