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
