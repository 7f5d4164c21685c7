"""SGLS configuration: a plain dataclass filled from the tool YAML's ``config`` block (no environment variables).

    cfg = SGLSConfig.from_dict({"backend": "openai", "base_urls": ["http://h:8000/v1"], "model": "Qwen3-8B"})

Every field is documented in ``slca_verl/config/sgls_tool.yaml``. Unknown keys raise, so a typo in the YAML is
caught at start-up instead of silently using a default; ``type`` and ``class_name`` (verl's own keys) are ignored.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

CACHE_SCOPES = ("group", "step", "run", "none")
BACKENDS = ("offline", "openai")
STRUCTURED_OUTPUT = ("auto", "json_schema", "json_object", "none")
_VERL_KEYS = {"type", "class_name"}


@dataclass
class FaultConfig:
    """Rates (probability per call that passed validation) of injected API failures, for robustness training."""

    timeout_rate: float = 0.0
    server_error_rate: float = 0.0
    rate_limit_rate: float = 0.0
    timeout_delay_s: float = 0.0  # how long an injected timeout really waits before answering

    @property
    def total(self) -> float:
        return self.timeout_rate + self.server_error_rate + self.rate_limit_rate


@dataclass
class SGLSConfig:
    backend: str = "offline"
    # openai backend (a ``vllm serve`` deployment or any OpenAI-compatible server)
    base_urls: list[str] = field(default_factory=list)
    model: str = ""
    api_key: str | None = field(default=None, repr=False)  # never in a repr / log line
    api_key_file: str | None = None  # a file holding the key (recipes/serve_*.sh write $SERVICES_DIR/api_key)
    temperature: float = 0.6
    max_tokens: int = 1024
    timeout_s: float = 60.0
    max_retries: int = 3
    backoff_s: float = 0.5
    max_concurrency: int = 64
    unhealthy_cooldown_s: float = 10.0
    max_outage_s: float | None = None  # every call failing this long: ServiceDown stops the run (None: never)
    structured_output: str = "auto"  # auto: json_schema with a response schema, else json_object
    reply_attempts: int = 2  # LLM calls per tool call when the reply is not usable JSON / violates the schema
    context_turns: int = 4  # earlier calls of the same trajectory shown in the prompt
    context_chars: int = 600  # each earlier response is cut to this many characters in the prompt
    # validation
    forbid_extra_arguments: bool = False  # treat schemas without additionalProperties as if it were false
    # consistency
    cache_scope: str = "group"
    cache_max_entries: int = 200_000
    sqlite_path: str | None = None
    # misc
    seed: int = 0
    faults: FaultConfig = field(default_factory=FaultConfig)
    max_response_chars: int = 0  # 0: no cut; else long responses are cut in the middle

    def __post_init__(self):
        if isinstance(self.base_urls, str):
            self.base_urls = [self.base_urls]
        self.base_urls = list(self.base_urls or [])
        if isinstance(self.faults, dict):
            self.faults = FaultConfig(**self.faults)
        if self.backend not in BACKENDS:
            raise ValueError(f"sgls backend must be one of {BACKENDS}, got {self.backend!r}")
        if self.cache_scope not in CACHE_SCOPES:
            raise ValueError(f"sgls cache_scope must be one of {CACHE_SCOPES}, got {self.cache_scope!r}")
        if self.structured_output not in STRUCTURED_OUTPUT:
            raise ValueError(
                f"sgls structured_output must be one of {STRUCTURED_OUTPUT}, got {self.structured_output!r}"
            )
        if self.backend == "openai" and (not self.base_urls or not self.model):
            raise ValueError("sgls backend 'openai' needs base_urls and model")
        for name in ("timeout_rate", "server_error_rate", "rate_limit_rate"):
            if not 0.0 <= getattr(self.faults, name) <= 1.0:
                raise ValueError(f"sgls faults.{name} must be in [0, 1]")
        if self.faults.total > 1.0:
            raise ValueError("sgls fault rates sum to more than 1")
        self.reply_attempts = max(1, int(self.reply_attempts))

    @classmethod
    def from_dict(cls, cfg: dict | None) -> "SGLSConfig":
        """Build from a (YAML) dict; raises ValueError naming unknown keys."""
        cfg = dict(cfg or {})
        if "sgls" in cfg and isinstance(cfg["sgls"], dict):  # allow the block nested under its own key
            cfg = {**{k: v for k, v in cfg.items() if k != "sgls"}, **cfg["sgls"]}
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(cfg) - names - _VERL_KEYS)
        if unknown:
            raise ValueError(f"unknown sgls config key(s): {unknown}; known: {sorted(names)}")
        return cls(**{k: v for k, v in cfg.items() if k in names})

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)
