"""The controlled tool-calling task of ``benchmarks/credit_assignment.py`` and ``examples/quickstart.py``.

A user asks for one of four services in one of six cities ("weather in paris?"). The right answer is one hermes tool
call ``get_weather(city="paris")`` and then a four-word reply. Everything a rollout is scored with is the project's
real code on the decoded text:

- the call is answered by SGLS (:class:`slca_verl.sgls.Simulator`, offline backend, group-scoped cache);
- the execution reward ``r_tool`` is HierR's rule-based score against the gold call;
- the preference reward ``r_sum`` comes from :class:`NoisyReferenceJudge`, a HierR judge (same ``rate`` protocol as
  the LLM judge) that grades the reply against a reference reply and adds Gaussian noise of sd ``sigma``.

Token budget (the tiny policy of :mod:`slca_verl.toy.policy` works on these ids)::

    prompt   [BOS, intent, city]                      3 tokens; intent in INTENTS, city in CITIES
    response [NAME, ARG, OBS, S1, S2, S3, S4]         7 tokens
              tool   tool  obs  summary x 4           segment ids 1 1 0 2 2 2 2, response_mask 1 1 0 1 1 1 1

NAME is one of the four tool names, ARG one of the six city values, OBS stands for the tool response (not produced
by the policy; response_mask 0), S1..S4 are words from SUMMARY_WORDS. Decoding is grammar-constrained: each slot may
only take tokens of its kind, so the format is always valid and the task isolates *which* tool/argument and *which*
reply words are chosen.

Rewards an untrained policy gets (HierR, weights 0.10 fmt + 0.25 name + 0.15 key + 0.20 value + 0.30 parallel)::

    wrong tool                    r_tool = 0.4   (fmt and parallel only)
    right tool, wrong city        r_tool = 0.8
    right tool and city           r_tool = 1.0
    reply: q = matching words / 4 of the task's reference reply; rating = clip(round(1 + 4 (q + eps)), 1, 5),
    eps ~ N(0, sigma^2);  r_sum = (rating - 1) / 4
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass

from slca_verl.rewards.judge import Verdict
from slca_verl.toolcall import hermes

INTENTS = ("weather", "time", "hotels", "news")
TOOL_NAMES = ("get_weather", "get_local_time", "find_hotels", "get_headlines")
CITIES = ("paris", "tokyo", "lima", "oslo", "cairo", "delhi")
SUMMARY_WORDS = ("sunny", "rainy", "mild", "cold", "open", "busy", "quiet", "cheap", "early", "late", "today", "now")
SUMMARY_LEN = 4
REFERENCE_SEED = 1234  # fixes the reference replies; part of the task, not of a run

# vocabulary: specials, prompt words, tool names, argument values, summary words
SPECIALS = ("<pad>", "<bos>", "<obs>")
VOCAB = (
    SPECIALS
    + tuple(f"q:{w}" for w in INTENTS + CITIES)
    + tuple(f"tool:{t}" for t in TOOL_NAMES)
    + tuple(f"arg:{c}" for c in CITIES)
    + tuple(f"say:{w}" for w in SUMMARY_WORDS)
)
TOK = {t: i for i, t in enumerate(VOCAB)}
BOS, OBS = TOK["<bos>"], TOK["<obs>"]
INTENT_IDS = [TOK[f"q:{w}"] for w in INTENTS]
CITY_IDS = [TOK[f"q:{c}"] for c in CITIES]
NAME_IDS = [TOK[f"tool:{t}"] for t in TOOL_NAMES]
ARG_IDS = [TOK[f"arg:{c}"] for c in CITIES]
WORD_IDS = [TOK[f"say:{w}"] for w in SUMMARY_WORDS]

PROMPT_LEN = 3
RESPONSE_LEN = 3 + SUMMARY_LEN
#: token ids each response slot may take (None: the slot is the tool response, filled with OBS)
SLOT_CHOICES: list[list[int] | None] = [NAME_IDS, ARG_IDS, None] + [WORD_IDS] * SUMMARY_LEN
#: per response slot: 1 tool, 0 observation, 2 summary (slca_verl.estimators.segments ids)
SEGMENT_IDS = [1, 1, 0] + [2] * SUMMARY_LEN
RESPONSE_MASK = [1, 1, 0] + [1] * SUMMARY_LEN


def tool_schemas() -> list[dict]:
    """OpenAI-format tool list of the task (every tool takes one string argument ``city``)."""
    return [
        {
            "type": "function",
            "function": {
                "name": name,
                "description": f"Look up {intent} for a city.",
                "parameters": {
                    "type": "object",
                    "properties": {"city": {"type": "string", "description": "city name, lower case"}},
                    "required": ["city"],
                },
            },
        }
        for intent, name in zip(INTENTS, TOOL_NAMES)
    ]


def reference_replies(seed: int = REFERENCE_SEED) -> dict[tuple[int, int], tuple[str, ...]]:
    """The reference reply of each task (intent index, city index): SUMMARY_LEN words drawn once from a fixed seed."""
    rng = random.Random(seed)
    return {
        (i, c): tuple(rng.choice(SUMMARY_WORDS) for _ in range(SUMMARY_LEN))
        for i in range(len(INTENTS))
        for c in range(len(CITIES))
    }


@dataclass(frozen=True)
class Task:
    intent: int  # index into INTENTS / TOOL_NAMES
    city: int  # index into CITIES

    @property
    def question(self) -> str:
        return f"What is the {INTENTS[self.intent]} in {CITIES[self.city]}?"

    @property
    def prompt_ids(self) -> list[int]:
        return [BOS, INTENT_IDS[self.intent], CITY_IDS[self.city]]

    def ground_truth(self) -> dict:
        """HierR / data_prep ground truth (the authors' layout, nested gold steps)."""
        return {
            "allowed_tools": list(TOOL_NAMES),
            "gold_tool_calls": [[{"name": TOOL_NAMES[self.intent], "arguments": {"city": CITIES[self.city]}}]],
            "question_content": self.question,
            "subset_name": "tool_call",
        }

    def xlam_record(self) -> dict:
        """The same task as an xLAM-function-calling-60k record (input of ``data_prep.xlam``)."""
        tools = [
            {
                "name": s["function"]["name"],
                "description": s["function"]["description"],
                "parameters": {"city": {"type": "str", "description": "city name, lower case"}},
            }
            for s in tool_schemas()
        ]
        answers = [{"name": TOOL_NAMES[self.intent], "arguments": {"city": CITIES[self.city]}}]
        return {"query": self.question, "tools": json.dumps(tools), "answers": json.dumps(answers)}


ALL_TASKS = [Task(i, c) for i in range(len(INTENTS)) for c in range(len(CITIES))]


def task_from_question(question: str) -> Task | None:
    """Read a Task back from a question's words (the quickstart's 'tokenizer'); None if intent or city is missing."""
    words = {w.strip("?.,!").lower() for w in question.split()}
    intent = next((i for i, w in enumerate(INTENTS) if w in words), None)
    city = next((c for c, w in enumerate(CITIES) if w in words), None)
    return None if intent is None or city is None else Task(intent, city)


@dataclass(frozen=True)
class Decoded:
    """A response decoded into what HierR and SGLS see."""

    tool_name: str
    city: str
    call_text: str  # the assistant's tool-call turn, hermes format ("" when the policy abstained)
    reply_words: tuple[str, ...]
    abstained: bool = False  # slot 0 was NO_CALL: a direct reply, no tool call (irrelevance extension)

    @property
    def reply_text(self) -> str:
        return " ".join(self.reply_words) + "."


def decode(response_ids: list[int]) -> Decoded:
    """Response token ids (RESPONSE_LEN) -> the hermes tool-call turn and the reply (or a direct reply when slot 0
    is NO_CALL, which only the irrelevance extension's grammar allows)."""
    words = tuple(EXT_VOCAB[t].split(":", 1)[1] for t in response_ids[3:])
    if response_ids[0] == NO_CALL:
        return Decoded("", "", "", words, abstained=True)
    name = VOCAB[response_ids[0]].split(":", 1)[1]
    city = VOCAB[response_ids[1]].split(":", 1)[1]
    return Decoded(name, city, hermes.render_call(name, {"city": city}), words)


def reply_quality(reply: str, reference: tuple[str, ...]) -> float:
    """q in [0, 1]: the fraction of reference words found in the same position of the reply."""
    words = [w.strip(".,!?").lower() for w in reply.split()]
    return sum(1 for k, ref in enumerate(reference) if k < len(words) and words[k] == ref) / len(reference)


class NoisyReferenceJudge:
    """A HierR preference judge (``rate(question, tool_responses, reply) -> Verdict``) with known, injected noise.

    It grades the reply against the task's reference reply and adds ``noise``, a draw of N(0, sigma^2) that the
    caller makes (so it can be correlated with advantages later)::

        q = reply_quality(reply, reference);  rating = clip(round(1 + 4 * (q + noise)), 1, 5)

    With noise = 0 the rating is exactly 1 + 4q (q takes the five values 0, 1/4, ..., 1), so r_sum = q.
    ``grounding`` > 0 couples the reply to the tool call: q is multiplied by (1 - grounding) when the call the
    reply was based on was wrong (a reply built on the wrong tool's answer is worse) — off (0) by default.
    """

    name = "noisy_reference"

    def __init__(
        self,
        references: dict[str, tuple[str, ...]],
        noise: float = 0.0,
        call_correct: bool = True,
        grounding: float = 0.0,
    ):
        self.references = references
        self.noise = noise
        self.call_correct = call_correct
        self.grounding = grounding

    async def rate(self, question: str, tool_responses: list[str], reply: str) -> Verdict:
        q = reply_quality(reply, self.references[question])
        if not self.call_correct:
            q *= 1.0 - self.grounding
        rating = int(min(5, max(1, round(1 + 4 * (q + self.noise)))))
        return Verdict(rating)

    def metrics(self) -> dict:
        return {}


# ---------------------------------------------------------------------------------------------------------------
# Irrelevance extension (docs/credit_assignment.md, "Abstention"): chat prompts whose right answer is a direct reply.
#
# The base task above is unchanged (its vocabulary, grammar and so every recorded figure stay as they were); the
# extension appends tokens, and its grammar lets slot 0 be NO_CALL, the decision to answer without a tool:
#
#     prompt   [BOS, chat intent, city]              "Tell me a joke about paris?"   gold: no call (irrelevance)
#     response [NO_CALL, -, -, S1, S2, S3, S4]       slots 1-2 unused (response_mask 0), the reply as before
#               segment ids 2 0 0 2 2 2 2 (NO_CALL is the reply's first token: the decision token), or
#                           1 0 0 2 2 2 2 with abstention credit (the decision token labelled TOOL)
#
# A tool prompt may be answered with NO_CALL too (HierR's no-call penalty), and a chat prompt with a call
# (r_tool 0.45: fmt, key and value; name F1 and parallel 0).

CHAT_INTENTS = ("joke", "poem")
EXT_VOCAB = VOCAB + tuple(f"q:{w}" for w in CHAT_INTENTS) + ("tool:<none>",)
EXT_TOK = {t: i for i, t in enumerate(EXT_VOCAB)}
NO_CALL = EXT_TOK["tool:<none>"]
CHAT_INTENT_IDS = [EXT_TOK[f"q:{w}"] for w in CHAT_INTENTS]
ABSTAIN_SLOT_CHOICES: list[list[int] | None] = [NAME_IDS + [NO_CALL], ARG_IDS, None] + [WORD_IDS] * SUMMARY_LEN
ABSTAIN_SEGMENT_IDS = [2, 0, 0] + [2] * SUMMARY_LEN
ABSTAIN_CREDIT_SEGMENT_IDS = [1, 0, 0] + [2] * SUMMARY_LEN
ABSTAIN_RESPONSE_MASK = [1, 0, 0] + [1] * SUMMARY_LEN


@dataclass(frozen=True)
class ChatTask:
    """A prompt no tool can answer: the right response is a direct reply (gold ``[]``, an irrelevance row)."""

    intent: int  # index into CHAT_INTENTS
    city: int

    @property
    def question(self) -> str:
        return f"Tell me a {CHAT_INTENTS[self.intent]} about {CITIES[self.city]}?"

    @property
    def prompt_ids(self) -> list[int]:
        return [BOS, CHAT_INTENT_IDS[self.intent], CITY_IDS[self.city]]

    def ground_truth(self) -> dict:
        return {
            "allowed_tools": list(TOOL_NAMES),
            "gold_tool_calls": [],
            "question_content": self.question,
            "subset_name": "irrelevant",
        }


CHAT_TASKS = [ChatTask(i, c) for i in range(len(CHAT_INTENTS)) for c in range(len(CITIES))]


def all_references() -> dict[str, tuple[str, ...]]:
    """Reference reply per question, tool tasks and chat tasks (chat replies from a second fixed seed)."""
    refs = {t.question: r for t, r in zip(ALL_TASKS, [reference_replies()[(t.intent, t.city)] for t in ALL_TASKS])}
    rng = random.Random(REFERENCE_SEED + 1)
    for t in CHAT_TASKS:
        refs[t.question] = tuple(rng.choice(SUMMARY_WORDS) for _ in range(SUMMARY_LEN))
    return refs


def response_layout(response_ids: list[int], abstention_credit: bool = False) -> tuple[list[int], list[int]]:
    """(segment ids, response mask) of one response of the extension's grammar."""
    if response_ids[0] != NO_CALL:
        return SEGMENT_IDS, RESPONSE_MASK
    return (ABSTAIN_CREDIT_SEGMENT_IDS if abstention_credit else ABSTAIN_SEGMENT_IDS), ABSTAIN_RESPONSE_MASK
