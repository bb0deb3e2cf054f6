"""What an offline W&B run holds: its config, sweep id and summary, read from run-ID.wandb.

wandb 0.31 writes an offline run only to that binary file (no wandb-summary.json): W&B's
record log, a LevelDB-style log of protobuf `Record`s. The log framing is read here; each
record is decoded with wandb's own protobuf classes (imported lazily: they import wandb,
about 0.8 s). The file is what `wandb sync` uploads, so this is what W&B will see.
"""

from __future__ import annotations

import importlib
import json
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HEADER = struct.Struct("<4sHB")  # ":W&B", magic 0xBEE1, version 0
CHUNK = struct.Struct("<IHB")  # crc32, length, type
BLOCK = 32768
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


class RecordError(ValueError):
    """The file is not a W&B run file, or is cut short."""


@dataclass
class OfflineRun:
    """The parts of an offline run that a sweep cares about."""

    run_id: str = ""
    sweep_id: str = ""
    project: str = ""
    config: dict[str, Any] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)
    exit_code: int | None = None


def iter_payloads(data: bytes) -> list[bytes]:
    """The records of a W&B log: 7-byte file header, then 32 KiB blocks of chunks."""
    if len(data) < HEADER.size:
        raise RecordError("too short to be a W&B run file")
    ident, magic, _version = HEADER.unpack_from(data)
    if ident != b":W&B" or magic != 0xBEE1:
        raise RecordError("not a W&B run file (bad header)")
    offset, pending, out = HEADER.size, b"", []
    while offset + CHUNK.size <= len(data):
        room = BLOCK - offset % BLOCK
        if room < CHUNK.size:  # the rest of a block too small for a header is padding
            offset += room
            continue
        _crc, length, kind = CHUNK.unpack_from(data, offset)
        if kind == 0 and length == 0:
            offset += room  # zero padding up to the next block
            continue
        body = data[offset + CHUNK.size : offset + CHUNK.size + length]
        if len(body) < length:
            break  # a run still being written: keep what is whole
        offset += CHUNK.size + length
        if kind == FULL:
            out.append(body)
        elif kind == FIRST:
            pending = body
        elif kind == MIDDLE:
            pending += body
        elif kind == LAST:
            out.append(pending + body)
            pending = b""
    return out


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _set_nested(target: dict[str, Any], keys: list[str], value: Any) -> None:
    for key in keys[:-1]:
        node = target.setdefault(key, {})
        if not isinstance(node, dict):
            node = target[key] = {}
        target = node
    target[keys[-1]] = value


def _item_keys(item: Any) -> list[str]:
    return [item.key] if item.key else list(item.nested_key)


def read_run(path: Path) -> OfflineRun:
    """Decode run-ID.wandb: the last value of every config and summary key wins."""
    pb: Any = importlib.import_module("wandb.proto.wandb_internal_pb2")
    run = OfflineRun()
    for payload in iter_payloads(path.read_bytes()):
        rec = pb.Record()
        rec.ParseFromString(payload)
        kind = rec.WhichOneof("record_type")
        if kind == "run":
            run.run_id, run.sweep_id, run.project = (
                rec.run.run_id,
                rec.run.sweep_id,
                rec.run.project,
            )
            for item in rec.run.config.update:
                _set_nested(run.config, _item_keys(item), _json(item.value_json))
        elif kind == "config":
            for item in rec.config.update:
                _set_nested(run.config, _item_keys(item), _json(item.value_json))
        elif kind == "summary":
            for item in rec.summary.update:
                _set_nested(run.summary, _item_keys(item), _json(item.value_json))
        elif kind == "exit":
            run.exit_code = rec.exit.exit_code
    return run


def find_run_dir(wandb_dir: Path, run_id: str) -> Path | None:
    """The newest offline run folder of `run_id` under WANDB_DIR/wandb."""
    found = sorted((wandb_dir / "wandb").glob(f"offline-run-*-{run_id}"))
    return found[-1] if found else None


def run_file(run_dir: Path) -> Path | None:
    files = sorted(run_dir.glob("run-*.wandb"))
    return files[0] if files else None


def summary_metric(summary: dict[str, Any], name: str) -> float | None:
    """A summary value by its logged name ("val/loss", or "a.b" for nested dicts)."""
    value: Any = summary.get(name)
    if value is None and "." in name:
        value = summary
        for part in name.split("."):
            value = value.get(part) if isinstance(value, dict) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)
