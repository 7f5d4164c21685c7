"""De-duplication keys and decontamination against evaluation questions (BFCL from bfcl-eval, tau^2 tasks).

A training row is contaminated when its normalised question (NFKC, lower case, punctuation to spaces,
whitespace collapsed) equals a normalised evaluation question, or, with ``ngram > 0``, shares a run of
``ngram`` consecutive words with one (13 words by default, the usual decontamination window) — tau^2 tasks are
instructions to a user simulator, so paraphrased training dialogues only meet them on long shared spans.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import unicodedata
from typing import Any, Iterable

logger = logging.getLogger(__name__)

__all__ = [
    "normalize_question",
    "Decontaminator",
    "bfcl_data_dir",
    "load_bfcl_questions",
    "load_tau2_questions",
    "parse_decontam_spec",
]

_NON_WORD = re.compile(r"[^\w]+", re.UNICODE)


def normalize_question(text: str) -> str:
    """``"  What's the Weather, in PARIS?"`` -> ``"what s the weather in paris"``."""
    text = unicodedata.normalize("NFKC", text or "").lower()
    return " ".join(_NON_WORD.sub(" ", text).split())


def _ngrams(norm: str, n: int) -> set[int]:
    words = norm.split()
    return {hash(" ".join(words[i : i + n])) for i in range(len(words) - n + 1)}


class Decontaminator:
    """Holds reference questions per source; :meth:`match` says which source a question collides with.

    Example::

        d = Decontaminator({"bfcl": ["Find the area of a triangle with base 10."]}, ngram=13)
        d.match(normalize_question("find the AREA of a triangle with base 10"))  # -> "bfcl"
    """

    def __init__(self, references: dict[str, Iterable[str]], ngram: int = 13):
        self.ngram = ngram
        self.exact: dict[str, str] = {}
        self.grams: dict[int, str] = {}
        self.sizes: dict[str, int] = {}
        for source, questions in references.items():
            count = 0
            for q in questions:
                norm = normalize_question(q)
                if not norm:
                    continue
                count += 1
                self.exact.setdefault(norm, source)
                if ngram > 0:
                    for g in _ngrams(norm, ngram):
                        self.grams.setdefault(g, source)
            self.sizes[source] = count

    @property
    def sources(self) -> list[str]:
        return list(self.sizes)

    def match(self, norm_question: str) -> str | None:
        """The reference source this (already normalised) question matches, or None."""
        hit = self.exact.get(norm_question)
        if hit is not None or self.ngram <= 0 or not self.grams:
            return hit
        for g in _ngrams(norm_question, self.ngram):
            hit = self.grams.get(g)
            if hit is not None:
                return hit
        return None


def bfcl_data_dir() -> str | None:
    """``site-packages/bfcl_eval/data`` of the installed bfcl-eval (found without importing the package)."""
    import importlib.util

    spec = importlib.util.find_spec("bfcl_eval")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(list(spec.submodule_search_locations)[0], "data")
    return path if os.path.isdir(path) else None


def _read_jsonl(path: str) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def load_bfcl_questions(data_dir: str | None = None) -> list[str]:
    """Every user message of every BFCL test file (``BFCL_v*_*.json``, JSON lines)."""
    data_dir = data_dir or bfcl_data_dir()
    if data_dir is None:
        raise FileNotFoundError("bfcl_eval is not installed: pip install --no-deps bfcl-eval==2026.3.23")
    questions = []
    for name in sorted(os.listdir(data_dir)):
        if not (name.startswith("BFCL_") and name.endswith(".json")):
            continue
        try:
            entries = _read_jsonl(os.path.join(data_dir, name))
        except json.JSONDecodeError:
            continue  # e.g. format_sensitivity.json: an id index, not questions
        for entry in entries:
            for turn in entry.get("question", []) or []:
                for msg in turn if isinstance(turn, list) else [turn]:
                    if isinstance(msg, dict) and msg.get("role") == "user" and isinstance(msg.get("content"), str):
                        questions.append(msg["content"])
    return questions


def _strings(obj: Any) -> Iterable[str]:
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _strings(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _strings(v)


def load_tau2_questions(path: str) -> list[str]:
    """The user-side texts of a tau^2 tasks file: every string under ``user_scenario`` and ``description``.

    Accepts a JSON list of tasks, ``{"tasks": [...]}``, or JSON lines.
    """
    with open(path, encoding="utf-8") as f:
        text = f.read()
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        data = [json.loads(line) for line in text.splitlines() if line.strip()]
    if isinstance(data, dict):
        data = data.get("tasks", [data])
    questions = []
    for task in data:
        if not isinstance(task, dict):
            continue
        for key in ("user_scenario", "description", "ticket"):
            questions.extend(s for s in _strings(task.get(key)) if len(s.split()) >= 3)
        history = (task.get("initial_state") or {}).get("message_history") or []
        questions.extend(
            m.get("content")
            for m in history
            if isinstance(m, dict) and m.get("role") == "user" and isinstance(m.get("content"), str)
        )
    return questions


def parse_decontam_spec(specs: list[str] | None, bfcl_dir: str | None = None) -> dict[str, list[str]]:
    """``["bfcl", "tau2=/path/tasks.json"]`` -> {"bfcl": [...], "tau2": [...]} reference questions."""
    refs: dict[str, list[str]] = {}
    for spec in specs or []:
        name, _, path = spec.partition("=")
        if name == "bfcl":
            refs["bfcl"] = load_bfcl_questions(path or bfcl_dir)
        elif name == "tau2":
            if not path:
                raise ValueError("tau2 decontamination needs a tasks file: tau2=/path/to/tasks.json")
            refs.setdefault("tau2", []).extend(load_tau2_questions(path))
        else:
            raise ValueError(f"unknown decontamination source {spec!r} (use bfcl or tau2=PATH)")
        logger.info("decontamination: %d reference questions from %s", len(refs[name]), spec)
    return refs


def dedup_key(row: dict, mode: str) -> str:
    """``exact``: same prompt, tools and gold; ``question``: same normalised question and tool names."""
    gt = row["reward_model"]["ground_truth"]
    if mode == "question":
        payload = [normalize_question(gt["question_content"]), sorted(gt["allowed_tools"])]
    else:
        payload = [row["prompt"], row["tools"], gt["gold_tool_calls"]]
    return hashlib.sha1(json.dumps(payload, ensure_ascii=False, sort_keys=True).encode()).hexdigest()
