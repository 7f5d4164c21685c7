"""Fault injection: some valid calls answered with realistic API failures, so the policy learns to cope with them.

    injector = FaultInjector(FaultConfig(timeout_rate=0.02, server_error_rate=0.02, rate_limit_rate=0.01), seed=0)
    fault = injector.draw()          # None, or an InjectedFault with an HTTP-like JSON error body

Draws come from one seeded generator (reproducible for a given call order). Injected failures are never cached.
"""

from __future__ import annotations

import json
import random
import threading
from dataclasses import dataclass

from .config import FaultConfig

_SERVER_ERRORS = (
    (500, "internal_server_error", "An unexpected error occurred while processing the request. Please try again."),
    (502, "bad_gateway", "The upstream server returned an invalid response. Please retry the request."),
    (
        503,
        "service_unavailable",
        "The service is temporarily unavailable (overloaded or under maintenance). Please retry in a few seconds.",
    ),
)


@dataclass
class InjectedFault:
    kind: str  # "timeout" | "server_error" | "rate_limited"
    status_code: int
    body: dict
    delay_s: float = 0.0

    def text(self) -> str:
        return json.dumps(self.body, ensure_ascii=False, sort_keys=True)


class FaultInjector:
    def __init__(self, config: FaultConfig, seed: int = 0):
        self.config = config
        self._rng = random.Random(f"sgls-faults-{seed}")
        self._lock = threading.Lock()

    def draw(self) -> InjectedFault | None:
        c = self.config
        if c.total <= 0:
            return None
        with self._lock:
            u = self._rng.random()
            pick = self._rng.random()
            wait = self._rng.randint(1, 30)
        if u < c.timeout_rate:
            return InjectedFault(
                "timeout",
                504,
                {
                    "error": {
                        "code": 504,
                        "type": "gateway_timeout",
                        "message": "The upstream service did not respond within 30 seconds. Please try again later.",
                    }
                },
                delay_s=c.timeout_delay_s,
            )
        if u < c.timeout_rate + c.server_error_rate:
            code, kind, msg = _SERVER_ERRORS[int(pick * len(_SERVER_ERRORS))]
            return InjectedFault("server_error", code, {"error": {"code": code, "type": kind, "message": msg}})
        if u < c.total:
            return InjectedFault(
                "rate_limited",
                429,
                {
                    "error": {
                        "code": 429,
                        "type": "rate_limit_exceeded",
                        "retry_after": wait,
                        "message": f"Rate limit exceeded: too many requests. Retry after {wait} seconds.",
                    }
                },
            )
        return None
