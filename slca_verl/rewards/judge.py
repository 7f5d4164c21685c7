"""Preference-reward judges for HierR: an LLM judge over an OpenAI-compatible endpoint, and an offline proxy.

DESIGN §2: a judge rates the final reply on five levels given the question and the tool responses, and

    R_sum = (rating - 1) / 4          rating ∈ {1 very poor, 2 poor, 3 acceptable, 4 good, 5 excellent}

A judge returns a :class:`Verdict`; it never raises. The rules that bypass the judge (no tool response, a reply
under 10 characters) live in :mod:`slca_verl.rewards.hierr`.

Example (LLM judge on the project's shared HTTP client)::

    from slca_verl.sgls.client import ChatClient
    judge = LLMJudge(ChatClient("http://127.0.0.1:8000/v1", model="judge", timeout_s=60, max_retries=3))
    verdict = await judge.rate("Weather in Paris?", ['{"temp_c": 21}'], "It is 21 °C in Paris.")
    verdict.rating, verdict.failed, judge.metrics()
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from slca_verl.rewards.parsing import strip_think

logger = logging.getLogger(__name__)

LEVELS = ("very poor", "poor", "acceptable", "good", "excellent")  # rating = index + 1


@dataclass(frozen=True)
class Verdict:
    """A judge's answer. ``rating`` is 1..5, or 0 when there is none (then ``failed`` says whether that is an
    error). ``reason`` is "" when all went well."""

    rating: int
    failed: bool = False
    reason: str = ""

    @property
    def r_sum(self) -> float:
        return (self.rating - 1) / 4.0 if 1 <= self.rating <= 5 else 0.0


@runtime_checkable
class ChatLike(Protocol):
    """What the LLM judge needs from a client: :class:`slca_verl.sgls.client.ChatClient` is one."""

    async def chat(self, messages: list[dict], *, temperature: float = 0.0, max_tokens: int = 512,
                   response_format: dict | None = None, seed: int | None = None) -> str: ...


class Judge(Protocol):
    name: str

    async def rate(self, question: str, tool_responses: list[str], reply: str) -> Verdict: ...

    def metrics(self) -> dict: ...


# ----------------------------------------------------------------------------------------------- rubric and parsing

RUBRIC = """You grade the last message an AI assistant sent to a user, after it had called tools.
Judge only that message, using the tool outputs as the facts the assistant had.

Levels:
- very poor: wrong, off-topic, or contradicts / ignores what the tools returned.
- poor: gets an important part of the tool output wrong, or leaves out what the user most needed.
- acceptable: mostly right and on-topic, with small mistakes or gaps.
- good: faithful to the tool output, answers every part of the question, clear.
- excellent: good, and also well organised, concise and genuinely helpful; nothing to improve.

Check, in order: does it report the tool results correctly; does it cover the whole question; is it clear.

Answer with a short justification, then a final line of exactly this form:
Rating: <one of very poor | poor | acceptable | good | excellent>"""

_USER_TEMPLATE = """### Question from the user
{question}

### What the tools returned
{tool_responses}

### The assistant's final message
{reply}"""

RATING_SCHEMA = {
    "type": "json_schema",
    "json_schema": {
        "name": "rating",
        "schema": {
            "type": "object",
            "properties": {"justification": {"type": "string"}, "rating": {"type": "string", "enum": list(LEVELS)}},
            "required": ["justification", "rating"],
        },
    },
}

_LEVEL_ALT = "very poor|poor|acceptable|good|excellent|[1-5]"
# "Rating: good", "rating = 4", "<rating>good</rating>", '"rating": "good"' — the last one in the text wins.
_RATING_RE = re.compile(
    r"rating\W{0,4}\s*(?:is\s+)?[\"'*]*(" + _LEVEL_ALT + r")\b", re.IGNORECASE
)


def parse_rating(text: str) -> int:
    """The rating in a judge's reply (1..5), or 0 when there is none. ``<think>`` blocks are ignored."""
    if not isinstance(text, str):
        return 0
    text = strip_think(text)
    try:
        obj = json.loads(text)
        if isinstance(obj, dict) and "rating" in obj:
            return _level(str(obj["rating"]))
    except ValueError:
        pass
    matches = _RATING_RE.findall(text)
    return _level(matches[-1]) if matches else 0


def _level(word: str) -> int:
    word = word.strip().lower()
    if word in LEVELS:
        return LEVELS.index(word) + 1
    return int(word) if word in {"1", "2", "3", "4", "5"} else 0


def truncate_middle(text: str, max_chars: int) -> str:
    """Keep the head and tail of an over-long text, with a marker saying how much was cut."""
    if len(text) <= max_chars:
        return text
    half = max(1, max_chars // 2)
    return f"{text[:half]}\n…[{len(text) - 2 * half} characters cut]…\n{text[-half:]}"


def build_messages(question: str, tool_responses: list[str], reply: str, max_chars: int) -> list[dict]:
    responses = "\n\n".join(
        f"[tool response {i + 1}]\n{truncate_middle(r, max_chars)}" for i, r in enumerate(tool_responses)
    )
    user = _USER_TEMPLATE.format(
        question=truncate_middle(question or "(not given)", max_chars),
        tool_responses=responses,
        reply=truncate_middle(reply, max_chars),
    )
    return [{"role": "system", "content": RUBRIC}, {"role": "user", "content": user}]


# ----------------------------------------------------------------------------------------------- judges


class _Counters:
    def __init__(self):
        self._lock = threading.Lock()
        self.values: dict[str, int] = {"calls": 0, "ratings": 0, "failures": 0}

    def add(self, key: str, n: int = 1) -> None:
        with self._lock:
            self.values[key] = self.values.get(key, 0) + n

    def snapshot(self) -> dict:
        with self._lock:
            return dict(self.values)


class LLMJudge:
    """LLM judge at temperature 0 through any :class:`ChatLike` client (the project's ``ChatClient``).

    Transport retries, per-attempt timeouts and load balancing belong to the client; this class adds an overall
    deadline (``timeout_s``), re-asks when the reply holds no rating (``parse_retries``), and counts every failure
    by kind in :meth:`metrics` (``failed/<kind>``: the client's error kinds, ``parse``, ``deadline``, ``error``).

    Args:
        client: object with ``async chat(messages, *, temperature, max_tokens, response_format, seed) -> str``.
        max_tokens: completion budget of one judge call.
        timeout_s: overall deadline of one rating, retries included (None: only the client's limits).
        parse_retries: extra calls when the reply has no rating (useful only for non-deterministic servers).
        structured_output: send ``response_format`` = a JSON schema with the five levels (vLLM honours it).
        max_chars: middle-truncation of each tool response, the question and the reply in the prompt.
        seed: sent with every request so repeated judgements agree.
    """

    name = "llm"

    def __init__(self, client: ChatLike, *, max_tokens: int = 512, timeout_s: float | None = None,
                 parse_retries: int = 0, structured_output: bool = False, max_chars: int = 4000, seed: int | None = 0):
        self.client = client
        self.max_tokens = int(max_tokens)
        self.timeout_s = timeout_s
        self.parse_retries = int(parse_retries)
        self.structured_output = bool(structured_output)
        self.max_chars = int(max_chars)
        self.seed = seed
        self._counters = _Counters()

    async def rate(self, question: str, tool_responses: list[str], reply: str) -> Verdict:
        self._counters.add("calls")
        try:
            coro = self._rate(build_messages(question, tool_responses, reply, self.max_chars))
            verdict = await (asyncio.wait_for(coro, self.timeout_s) if self.timeout_s else coro)
        except asyncio.TimeoutError:
            verdict = Verdict(0, True, f"judge deadline of {self.timeout_s:g} s passed")
            self._counters.add("failed/deadline")
        except Exception as e:  # ChatClientError and anything else: a failed judgement, never a crash
            kind = getattr(e, "kind", "error")
            verdict = Verdict(0, True, f"judge request failed [{kind}]: {str(e)[:200]}")
            self._counters.add(f"failed/{kind}")
        self._counters.add("failures" if verdict.failed else "ratings")
        if verdict.failed:
            logger.warning("HierR judge failure (scored 0): %s", verdict.reason)
        return verdict

    async def _rate(self, messages: list[dict]) -> Verdict:
        fmt = RATING_SCHEMA if self.structured_output else None
        text = ""
        for _ in range(self.parse_retries + 1):
            text = await self.client.chat(
                messages, temperature=0.0, max_tokens=self.max_tokens, response_format=fmt, seed=self.seed
            )
            rating = parse_rating(text)
            if rating:
                return Verdict(rating)
        self._counters.add("failed/parse")
        snippet = " ".join(str(text).split())[:120]
        return Verdict(0, True, f"judge reply holds no rating: {snippet!r}")

    def metrics(self) -> dict:
        """Counters: calls, ratings, failures, failed/<kind>; plus the client's own metrics under ``client/``."""
        out = self._counters.snapshot()
        client_metrics = getattr(self.client, "metrics", None)
        if callable(client_metrics):
            try:
                out.update({f"client/{k}": v for k, v in client_metrics().items()})
            except Exception:  # metrics must never break scoring
                pass
        return out


_TOKEN_RE = re.compile(r"[^\W_]+(?:\.\d+)?", re.UNICODE)
_IGNORED = frozenset({"the", "and", "for", "with", "true", "false", "null", "none", "you", "are", "was", "this", "that"})


def content_tokens(text: str) -> set[str]:
    """Lower-cased words of 3+ characters and any token with a digit, minus a few filler / JSON words."""
    toks = {t.lower() for t in _TOKEN_RE.findall(text or "")}
    return {t for t in toks if (len(t) >= 3 or any(ch.isdigit() for ch in t)) and t not in _IGNORED}


class OfflineProxyJudge:
    """A deterministic, offline **proxy** for the LLM judge, for tests and CPU demos — not a quality measure.

    It rewards grounding only: how many facts from the tool output the reply repeats::

        T = content_tokens(tool responses), R = content_tokens(reply)
        g = min(1, |R ∩ T| / min(|T|, k))            (g = 0 when T is empty; k = ``saturation``, default 8)
        rating = 1 + floor(4*g + 0.5)

    So a reply that repeats 8 distinct facts (or all of them, when there are fewer) gets "excellent", and one that
    repeats none gets "very poor". It never fails.
    """

    name = "offline_proxy"

    def __init__(self, saturation: int = 8):
        self.saturation = max(1, int(saturation))
        self._counters = _Counters()

    async def rate(self, question: str, tool_responses: list[str], reply: str) -> Verdict:
        self._counters.add("calls")
        facts = content_tokens("\n".join(tool_responses))
        if not facts:
            g = 0.0
        else:
            g = min(1.0, len(content_tokens(reply) & facts) / min(len(facts), self.saturation))
        self._counters.add("ratings")
        return Verdict(1 + int(4 * g + 0.5))

    def metrics(self) -> dict:
        return self._counters.snapshot()
