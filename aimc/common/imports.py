"""A callable named by a "package.module:function" import path, for the user's own models and data sets."""

from __future__ import annotations

import importlib
from collections.abc import Callable

from aimc.common.errors import ConfigError


def load_callable(path: str, field: str) -> Callable:
    """The callable `function` of `package.module:function`; a `ConfigError` naming `field` when the module
    cannot be imported or has no such callable. The module is imported as Python would (sys.path: the working
    directory first when run with `python -m`)."""
    module_name, _, attr = path.partition(":")
    if not module_name or not attr:
        raise ConfigError(f'{field}: {path!r} is not an import path of the form "package.module:function"')
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise ConfigError(f"{field}: cannot import {module_name!r} ({err}); is its folder on PYTHONPATH?") from None
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise ConfigError(f"{field}: module {module_name!r} has no callable {attr!r}")
    return fn
