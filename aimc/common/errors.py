"""The error every layer raises for input that cannot be meant: a config, a file or an argument."""


class ConfigError(ValueError):
    """A configuration that failed validation; the message names each offending field, file or line."""
