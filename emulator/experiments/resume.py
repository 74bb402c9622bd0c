"""What an earlier, stopped run of the Figure 3 experiment left in its output folder.

A slot is kept when the summary lists it among ``slots_done``; the rows of a slot cut short
are dropped and the slot is run again. The measurements (``measurements.json``) are kept
whole: replayed in order they give the forecasts, and so the status graphs, the unbroken run
would have had.
"""

import csv
import json
import os
from dataclasses import dataclass

from ..errors import InputFileError, UserError

INT_COLUMNS = ("slot", "repeat", "app_iterations", "full_iterations", "attempts")
TEXT_COLUMNS = ("benchmark", "method", "nodes", "mapping", "trials", "note")


@dataclass(frozen=True)
class Earlier:
    """The finished part of a stopped run."""

    slots_done: frozenset = frozenset()
    rows: tuple = ()
    events: tuple = ()
    measurements: tuple = ()


def read_rows(path: str) -> list:
    """The rows of ``jobs.csv`` with the types the experiment wrote them with."""
    try:
        with open(path, newline="") as f:
            records = list(csv.DictReader(f))
    except OSError as e:
        raise InputFileError(path, "", f"cannot read it ({e.strerror})") from None
    rows = []
    for line, record in enumerate(records, start=2):
        row = {}
        for key, text in record.items():
            try:
                row[key] = (text if key in TEXT_COLUMNS else None if text in ("", None)
                            else int(text) if key in INT_COLUMNS else float(text))
            except ValueError:
                raise InputFileError(path, line, f"{key} is {text!r}, not a number") from None
        rows.append(row)
    return rows


def earlier_run(out_dir: str, config_json: dict, identity: dict) -> Earlier:
    """The slots a stopped run with this configuration and cluster (``identity``) finished
    in ``out_dir``; nothing when it holds no summary. A summary of other settings is refused
    naming the first setting that differs."""
    summary_path = os.path.join(out_dir, "summary.json")
    if not os.path.exists(summary_path):
        return Earlier()
    try:
        with open(summary_path) as f:
            old = json.load(f)
        old_config, done = old["config"], old["slots_done"]
        old_identity = old["identity"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise InputFileError(summary_path, "", "not a summary of this experiment to resume "
                             f"({e})") from None
    now = json.loads(json.dumps({**config_json, **identity}))
    before = {**old_config, **old_identity}
    for key, value in now.items():
        if before.get(key) != value:
            raise UserError(f"{summary_path}: its {key} is {before.get(key)!r} where this "
                            f"run's is {value!r}; resume with the same settings or give "
                            "another --out")
    slots = frozenset(int(j) for j in done)
    rows = [r for r in read_rows(os.path.join(out_dir, "jobs.csv")) if r["slot"] in slots]
    measurements = _measurements(os.path.join(out_dir, "measurements.json"))
    events = [e for e in old.get("failures", []) if e.get("slot") in slots]
    return Earlier(slots, tuple(rows), tuple(events), tuple(measurements))


def _measurements(path: str) -> list:
    try:
        with open(path) as f:
            data = json.load(f)
        for m in data:
            m["slot"], m["at"], m["end"], m["seconds"] = (int(m["slot"]), float(m["at"]),
                                                          float(m["end"]), float(m["seconds"]))
            if not all(len(p) == 4 for p in m["probes"]):
                raise ValueError("a probe is not [a, b, measured, true]")
        return data
    except FileNotFoundError:
        return []
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise InputFileError(path, "", f"not the measurements of this experiment ({e})") \
            from None
