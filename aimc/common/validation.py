"""Strict pydantic models and one formatter that turns a ValidationError into one line per problem."""

from __future__ import annotations

from collections.abc import Collection

from pydantic import ConfigDict, ValidationError

STRICT = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
"""The model config of every config section: unknown keys, NaN and infinities are errors, and a validated
config is frozen."""


def _dotted(loc: tuple, prefix: str, hidden: Collection[str]) -> str:
    """Dotted path of an error location behind `prefix`, without the parts pydantic inserts for unions:
    the tags in `hidden`, the `str` branch of a `str | table` field and function-validator names."""
    parts = [str(p) for i, p in enumerate(loc)
             if not (i > 0 and isinstance(p, str) and (p in hidden or p == "str" or "[" in p))]
    return ".".join(p for p in (prefix, *parts) if p != "")


def format_validation_error(err: ValidationError, prefix: str = "", hidden: Collection[str] = ()) -> str:
    """One line per distinct problem: `dotted.path: message (got value)`. `prefix` goes before every path
    (the caller's place of the validated table, e.g. `tile.device`); location parts in `hidden` (the tags of
    tagged unions) are left out of the paths."""
    lines = []
    for e in err.errors():
        loc = _dotted(e["loc"], prefix, hidden)
        if e["type"] == "value_error" and "error" in e.get("ctx", {}):
            msg = str(e["ctx"]["error"])
            lines.append(msg if msg.startswith(loc) else f"{loc}: {msg}")  # our validators name the full path
            continue
        if e["type"] == "union_tag_not_found":
            lines.append(f"{loc}.{e['ctx']['discriminator'].strip(chr(39))}: Field required")
            continue
        if e["type"] == "string_type" and e["loc"][-1:] == ("str",):
            continue  # the `str` branch of a `str | table` union, when a table was given
        got = e.get("input")
        shown = "" if isinstance(got, (dict, list)) or e["type"] == "missing" else f" (got {got!r})"
        lines.append(f"{loc or '<root>'}: {e['msg']}{shown}")
    return "\n".join(dict.fromkeys(lines))
