"""What every SGLS backend returns or raises (kept apart so backends do not import each other)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class BackendReply:
    """A usable simulated body.

    Attributes:
        text: the JSON body as text (already extracted from the model's reply and checked).
        attempts: LLM calls spent on it (0 for the offline backend).
        repaired: the JSON needed repair (e.g. a truncated reply was closed).
        finish_reason: of the LLM reply that was used, when there was one.
    """

    text: str
    attempts: int = 1
    repaired: bool = False
    finish_reason: str | None = None


class SimulatorFailure(Exception):
    """The simulator could not produce a usable answer (server down, garbage after retries, off-schema reply).

    Attributes:
        kind: a ChatClientError kind ("timeout", "http_5xx", …) or "invalid_json" / "schema_violation".
        message: what went wrong, for the simulator-error response and the logs.
        attempts: LLM calls spent.
    """

    def __init__(self, kind: str, message: str, attempts: int = 0):
        super().__init__(f"[{kind}] {message}")
        self.kind = kind
        self.message = message
        self.attempts = attempts
