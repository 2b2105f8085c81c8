"""Every exception the library raises on purpose.

The CLI and the dashboard turn a `CdcError` into a one-line message, never a traceback.
"""


class CdcError(Exception):
    """Base class: a failure the user can act on, with a message that says how."""


class SpecMismatchError(CdcError):
    """Digests were made under another chunker spec and cannot be compared."""


class DigestUnavailableError(CdcError):
    """The compiled XXH3-128 routine could not be found in the installed xxhash."""
