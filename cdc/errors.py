"""Every exception the library raises on purpose.

The CLI and the dashboard turn a `CdcError` into a one-line message, never a traceback.
"""


class CdcError(Exception):
    """Base class: a failure the user can act on, with a message that says how."""


class DigestUnavailableError(CdcError):
    """The compiled XXH3-128 routine could not be found in the installed xxhash."""


class InvalidUrlError(CdcError):
    """A URL that cannot be a page's natural key: not http(s), no host, a bad port."""


class InputError(CdcError):
    """An input file cannot be opened or read: missing, a directory, or not permitted."""


class StoreError(CdcError):
    """The store cannot be used as asked."""


class StoreNotFoundError(StoreError):
    """There is no store at the given path."""


class StoreBusyError(StoreError):
    """Another process holds the store's lock for longer than we wait."""


class StoreFullError(StoreError):
    """The disk holding the store is full: the batch being written was rolled back."""


class SpecMismatchError(StoreError):
    """The store's digests were made under another chunker spec, or by a newer schema."""


class PageNotFoundError(CdcError):
    """The store has no page for that URL, or not that generation of it."""


class RunError(CdcError):
    """A crawl run cannot be used as asked: unknown, or two runs given in the wrong order."""


class RunNotFoundError(RunError):
    """The store has no run of that id or label."""


class AnnotationError(CdcError):
    """An annotation cannot be made as asked: an unknown label, a note or name out of bounds,
    or an import file that cannot be read."""


class SearchError(CdcError):
    """A search or a watch that cannot be run as given: no phrase, too long, an unknown watch."""
