"""Errors the CLI turns into exit code 2 (unusable input) with one clear line, never a traceback."""


class UsageError(Exception):
    """Bad input from the user: a malformed target, an unknown option value, a missing file."""


class TargetError(UsageError):
    """The target cannot be used: unreachable, authentication failed, not a supported kind."""
