"""Errors of the hermes client."""


class HermesError(Exception):
    """An error answer of hermes (or no answer at all)."""

    def __init__(self, text: str, status: int = 0, code: str = "", message: str = "") -> None:
        super().__init__(text)
        self.status = status
        self.code = code
        self.message = message or text


class HermesUnavailable(HermesError, ConnectionError):
    """hermes cannot be reached, did not answer in time, or is draining (503)."""


class HermesNotFound(HermesError, LookupError):
    """404: no such lane or session."""


class HermesConflict(HermesError):
    """409: e.g. a title another session holds, an ambiguous id prefix."""


class HermesInvalidArgument(HermesError, ValueError):
    """400: hermes refused the request at the door (a ValueError, as Hermes raises)."""


class HermesUnsupportedChange(HermesError, ValueError):
    """``SessionStore._save()`` found an in-place change of a SessionEntry
    that no hermes command expresses (e.g. ``created_at`` or a token sum).
    Nothing was sent; the field is put back to hermes' value."""

    def __init__(self, text: str, session_key: str = "", field: str = "") -> None:
        super().__init__(text)
        self.session_key = session_key
        self.field = field
