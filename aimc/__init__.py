"""aimc: train neural networks on simulated analog in-memory computing tiles with non-ideal devices."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("aimc")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0+source"
