"""slca_verl.sft_dataset against verl's own MultiTurnSFTDataset, with the real Qwen3 tokenizer: the same tokens and
labels where verl's per-message rendering is right, the whole-dialogue tokens where it stops."""

import pandas as pd
import pytest
from omegaconf import OmegaConf
from verl.utils.dataset.multiturn_sft_dataset import MultiTurnSFTDataset

from slca_verl.chatml import assistant_labels
from slca_verl.sft_dataset import WholeDialogueSFTDataset
from slca_verl.toolcall import hermes

CALL = hermes.render_call("weather", {"city": "Paris"})
ONE_CALL = [
    {"role": "system", "content": "sys"},
    {"role": "user", "content": "weather in paris?"},
    {"role": "assistant", "content": CALL},
    {"role": "tool", "content": '{"t": 21}'},
    {"role": "user", "content": "thanks. and rome?"},
    {"role": "assistant", "content": "It is 21 degrees."},
]
PARALLEL = [
    {"role": "system", "content": "sys"},
    {"role": "user", "content": "paris and rome?"},
    {"role": "assistant", "content": CALL + "\n" + hermes.render_call("weather", {"city": "Rome"})},
    {"role": "tool", "content": '{"t": 21}'},
    {"role": "tool", "content": '{"t": 25}'},
    {"role": "assistant", "content": "21 and 25 degrees."},
]


def rendered(tok, messages) -> list[int]:
    return list(
        tok.apply_chat_template(messages, tokenize=True, add_generation_prompt=False, return_dict=True)["input_ids"]
    )


def build(cls, tok, tmp_path, dialogues, **config):
    path = tmp_path / "sft.parquet"
    pd.DataFrame({"messages": dialogues}).to_parquet(path)
    cfg = OmegaConf.create({"max_length": 4096, "truncation": "error", "pad_mode": "no_padding", **config})
    return cls(parquet_files=[str(path)], tokenizer=tok, config=cfg)


def test_it_gives_the_tokens_the_whole_dialogue_renders_to_and_trains_only_the_assistant(tok, tmp_path):
    item = build(WholeDialogueSFTDataset, tok, tmp_path, [PARALLEL])[0]
    assert item["input_ids"].tolist() == rendered(tok, PARALLEL)
    trained = tok.decode(item["input_ids"][item["loss_mask"].bool()])
    assert trained.count("<|im_end|>") == 2 and "21 and 25 degrees." in trained and trained.count("<tool_call>") == 2
    assert '{"t": 25}' not in trained and "paris and rome" not in trained and "sys" not in trained
    assert item["position_ids"].tolist() == list(range(len(item["input_ids"])))


@pytest.mark.parametrize(
    "dialogue",
    [PARALLEL, ONE_CALL, ONE_CALL[:2] + [{"role": "assistant", "content": CALL}]],
    ids=["parallel_results", "two_assistant_turns", "one_turn"],
)
def test_verls_own_dataset_stops_on_tool_dialogues_that_ours_reads(tok, tmp_path, dialogue):
    """Qwen's templates put consecutive tool results in one user turn, and Qwen3's writes an empty think block into
    the last assistant turn after a user turn; rendered one message at a time, the first is split and the second is
    lost (an assistant message alone follows no user turn), so verl stops on every Qwen3 dialogue."""
    with pytest.raises(AssertionError, match="apply_chat_template to each turn separately"):
        build(MultiTurnSFTDataset, tok, tmp_path, [dialogue])[0]
    assert build(WholeDialogueSFTDataset, tok, tmp_path, [dialogue])[0]["input_ids"].tolist() == rendered(tok, dialogue)


def test_right_padding_and_truncation_follow_verls_settings(tok, tmp_path):
    n = len(rendered(tok, PARALLEL))
    padded = build(WholeDialogueSFTDataset, tok, tmp_path, [PARALLEL], pad_mode="right", max_length=n + 7)[0]
    assert padded["input_ids"].shape[0] == n + 7 and padded["attention_mask"].sum() == n
    assert padded["loss_mask"][n:].sum() == 0
    cut = build(WholeDialogueSFTDataset, tok, tmp_path, [PARALLEL], truncation="right", max_length=n - 5)[0]
    assert cut["input_ids"].shape[0] == n - 5
    with pytest.raises(ValueError, match="data.max_length"):
        build(WholeDialogueSFTDataset, tok, tmp_path, [PARALLEL], max_length=n - 5)[0]


def test_a_template_without_chatml_turns_is_refused_naming_the_key(tok, tmp_path):
    class Plain:
        def apply_chat_template(self, messages, **kwargs):
            return "".join(f"[{m['role']}] {m['content']}\n" for m in messages)

    with pytest.raises(ValueError, match="data.custom_cls"):
        build(WholeDialogueSFTDataset, Plain(), tmp_path, [PARALLEL])


def test_the_labeller_is_the_one_the_tiny_models_warm_up_uses():
    from slca_verl.cpu import tiny_model

    assert tiny_model.assistant_labels is assistant_labels
