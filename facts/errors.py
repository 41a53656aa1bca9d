"""Errors shared by reads and writes."""


class NotFound(LookupError):
    """The id does not exist in this tenant (API: 404, never 403)."""


class StateConflict(Exception):
    """The request is valid but the thing is not in a state that allows it
    (API: 409 with the current state)."""

    def __init__(self, detail: str, state: dict | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.state = state or {}
