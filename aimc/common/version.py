"""The installed distribution's version, for the manifests that record which aimc made a result."""

from importlib.metadata import PackageNotFoundError, version

try:
    VERSION = version("aimc")
except PackageNotFoundError:  # a source tree that is not installed
    VERSION = "0.0.0+source"
