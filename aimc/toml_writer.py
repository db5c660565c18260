"""TOML text of a nested dict (the standard library reads TOML but does not write it): tomli-w's, with the
None values TOML cannot hold left out."""

from __future__ import annotations

from typing import Any

import tomli_w


def _without_none(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _without_none(x) for k, x in v.items() if x is not None}
    if isinstance(v, (list, tuple)):
        return [_without_none(x) for x in v]
    return v


def to_toml(data: dict) -> str:
    """TOML text of a nested dict. TOML has no null: a key whose value is None is left out, and a header
    comment names those keys (their default is None, so reading the text back gives the same config)."""
    nones = sorted(_none_keys(data))
    head = f"# none (TOML has no null; see config.json): {', '.join(nones)}\n" if nones else ""
    return head + tomli_w.dumps(_without_none(data))


def _none_keys(v: Any, prefix: str = "") -> list[str]:
    """The dotted keys of the None values in `v`."""
    out: list[str] = []
    if isinstance(v, dict):
        for k, x in v.items():
            out += [f"{prefix}{k}"] if x is None else _none_keys(x, f"{prefix}{k}.")
    elif isinstance(v, (list, tuple)):
        for i, x in enumerate(v):
            out += _none_keys(x, f"{prefix}{i}.")
    return out
