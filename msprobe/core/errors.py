"""Exception types whose messages a user can act on; the CLI prints them without a traceback."""

__all__ = ["MsprobeError", "ConfigError", "PathError", "DumpError", "CompareError",
           "ParseError", "UnsupportedError"]


class MsprobeError(Exception):
    """Base class of every error msprobe raises on purpose."""


class ConfigError(MsprobeError):
    """A configuration value (config.json, CLI option, API argument) is invalid."""


class PathError(MsprobeError):
    """A path is missing, unsafe (bad characters, symlink, permissions) or of the wrong kind."""


class DumpError(MsprobeError):
    """Data collection failed in a way the user has to know about."""


class CompareError(MsprobeError):
    """Compare inputs cannot be compared (wrong pairing, mode mismatch, ...)."""


class ParseError(MsprobeError):
    """A data file (JSON, CSV, YAML, tensor file) is corrupt or truncated."""


class UnsupportedError(MsprobeError):
    """The requested feature does not exist for this framework, level or environment."""
