"""TOML text of a nested dict (the standard library reads TOML but does not write it)."""

from __future__ import annotations

import json
import math
import re
from typing import Any

_BARE = re.compile(r"^[A-Za-z0-9_-]+$")


def _key(k: str) -> str:
    return k if _BARE.match(k) else json.dumps(k)


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    raise TypeError(f"cannot write {type(v).__name__} to TOML")


def _is_tables(v: Any) -> bool:
    return isinstance(v, (list, tuple)) and len(v) > 0 and all(isinstance(x, dict) for x in v)


def to_toml(data: dict, prefix: str = "") -> str:
    """TOML text of a nested dict (`prefix`: the dotted name of the table it is in). TOML has no null: a None
    value is written as a comment."""
    lines, tables = [], []
    for k, v in data.items():
        if isinstance(v, dict) or _is_tables(v):
            tables.append((k, v))
        elif v is None:
            lines.append(f"# {_key(k)}: none (TOML has no null; see config.json)")
        else:
            lines.append(f"{_key(k)} = {_value(v)}")
    for k, v in tables:
        name = f"{prefix}{_key(k)}"
        for item in v if isinstance(v, (list, tuple)) else [v]:
            header = f"[[{name}]]" if isinstance(v, (list, tuple)) else f"[{name}]"
            lines += ["", header, *to_toml(item, name + ".").splitlines()]
    return "\n".join(lines).lstrip("\n") + ("\n" if not prefix else "")
