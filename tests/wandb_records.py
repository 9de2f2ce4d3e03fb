"""W&B's offline runs as the tests read them: the environment that keeps W&B offline and inside a test's folder, and
the fields of each offline run read from its ``run-<id>.wandb`` file, without W&B's API or network."""

from __future__ import annotations

import json
import struct
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

BLOCK_SIZE = 32768
"""The ``.wandb`` file is a LevelDB-style log: 32 KiB blocks of records, each with a 7-byte header."""
RECORD_HEADER = struct.Struct("<IHB")  # checksum, length, type
FILE_HEADER_SIZE = 7  # ":W&B", magic, version
FULL, LAST = 1, 4


def offline_environment(root: Path) -> dict[str, str]:
    """The variables that keep W&B offline (nothing leaves the machine) and every folder of its own under ``root``."""
    folders = {f"WANDB_{name}": str(root / "wandb_home" / name.lower()) for name in ("DIR", "CACHE_DIR", "CONFIG_DIR")}
    return {"WANDB_MODE": "offline", "WANDB_SILENT": "true", "WANDB_DATA_DIR": str(root / "wandb_home/data"), **folders}


@dataclass
class OfflineRun:
    """What one offline run recorded: its run record's fields, how it exited, and how many records of each kind."""

    path: Path
    run_id: str = ""
    project: str = ""
    group: str = ""
    job_type: str = ""
    name: str = ""
    config: dict = field(default_factory=dict)
    exit_code: int | None = None
    """None: the run never ended."""
    kinds: Counter = field(default_factory=Counter)


def _records(path: Path):
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:4] == b":W&B", f"{path} is no W&B run file"
    position, pending = FILE_HEADER_SIZE, b""
    while position + RECORD_HEADER.size <= len(data):
        left_in_block = BLOCK_SIZE - position % BLOCK_SIZE
        _, length, kind = RECORD_HEADER.unpack_from(data, position)
        if left_in_block < RECORD_HEADER.size or (kind == 0 and length == 0):  # the block's zero padding
            position += left_in_block
            continue
        start = position + RECORD_HEADER.size
        pending += data[start : start + length]
        position = start + length
        if kind in (FULL, LAST):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            pending = b""
            yield record


def read_run(path: Path) -> OfflineRun:
    run = OfflineRun(path)
    for record in _records(path):
        kind = record.WhichOneof("record_type")
        run.kinds[kind] += 1
        if kind == "run":
            fields = record.run
            run.run_id, run.project, run.group = fields.run_id, fields.project, fields.run_group
            run.job_type, run.name = fields.job_type, fields.display_name
            run.config = {item.key: json.loads(item.value_json) for item in fields.config.update}
        elif kind == "exit":
            run.exit_code = record.exit.exit_code
    return run


def offline_runs(root: Path) -> list[OfflineRun]:
    """Every offline run under ``root``, oldest first (W&B names their folders by start time)."""
    paths = sorted(root.rglob("offline-run-*/run-*.wandb"), key=lambda path: path.parent.name)
    return [read_run(path) for path in paths]
