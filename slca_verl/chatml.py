"""Which tokens of a ChatML dialogue (Qwen2.5, Qwen3) the assistant wrote: the one labeller of the project, used by
verl's SFT trainer through :mod:`slca_verl.sft_dataset` and by the tiny CPU model's warm-up."""

from __future__ import annotations

ASSISTANT_OPEN = "<|im_start|>assistant\n"
TURN_END = "<|im_end|>"


def assistant_labels(tokenizer, messages: list[dict], **template_kwargs) -> tuple[list[int], list[bool]]:
    """Token ids of the whole rendered dialogue and, per token, whether it was written by the assistant.

    The dialogue is rendered once by the tokenizer's chat template (``template_kwargs``: e.g. ``tools``,
    ``enable_thinking``), exactly as the policy later sees it. Trained tokens are everything between
    ``<|im_start|>assistant\\n`` and the ``<|im_end|>`` that closes the turn (that token included, so the policy
    learns to stop).
    """
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=False, **template_kwargs)
    spans, start = [], 0
    while (i := text.find(ASSISTANT_OPEN, start)) >= 0:
        j = text.find(TURN_END, i)
        j = len(text) if j < 0 else j + len(TURN_END)
        spans.append((i + len(ASSISTANT_OPEN), j))
        start = j
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    trained = [any(a <= s and e <= b for a, b in spans) for s, e in enc["offset_mapping"]]
    return list(enc["input_ids"]), trained


def is_chatml(tokenizer) -> bool:
    """Whether the tokenizer's chat template writes assistant turns as ChatML (what :func:`assistant_labels` reads)."""
    probe = [{"role": "user", "content": "u"}, {"role": "assistant", "content": "a"}]
    try:
        text = tokenizer.apply_chat_template(probe, tokenize=False, add_generation_prompt=False)
    except Exception:  # no chat template at all
        return False
    return f"{ASSISTANT_OPEN}a{TURN_END}" in text.replace("<think>\n\n</think>\n\n", "")
