"""The SFT half of the reproduction: data_prep.sft turns RL rows and ShareGPT/hermes dialogues into the parquet that
verl 0.9.1's own MultiTurnSFTDataset loads (with the real Qwen chat template), training on assistant turns only."""

import json
import os

import pandas as pd
import pytest
import torch
from conftest import load_qwen_tokenizer

from data_prep import sft, xlam

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "data_prep")


@pytest.fixture(scope="module")
def rl_parquet(tmp_path_factory):
    out = tmp_path_factory.mktemp("rl")
    xlam.main(["--input", os.path.join(FIXTURES, "xlam_sample.json"), "--output_dir", str(out)])
    return str(out / "xlam_train.parquet")


def test_rl_rows_become_prompt_plus_the_first_gold_step_as_tool_calls(rl_parquet, tmp_path):
    assert sft.main(["--input", rl_parquet, "--output_dir", str(tmp_path)]) == 0
    rows = pd.read_parquet(rl_parquet).to_dict("records")
    out = pd.read_parquet(tmp_path / "sft_train.parquet")["messages"].tolist()
    report = json.loads((tmp_path / "sft_report.json").read_text())
    assert report["written"] + sum(report["skipped"].values()) == len(rows) and len(out) == report["written"] > 0
    first = next(r for r in rows if json.loads(r["reward_model"]["ground_truth"]["gold_tool_calls"]))
    gold = json.loads(first["reward_model"]["ground_truth"]["gold_tool_calls"])[0]
    dialogue = [dict(m) for m in out[0]]
    assert [m["role"] for m in dialogue] == [m["role"] for m in first["prompt"]] + ["assistant"]
    assert "<tools>" in dialogue[0]["content"]
    blocks = dialogue[-1]["content"].split("</tool_call>")[:-1]
    assert [json.loads(b.split("<tool_call>")[1]) for b in blocks] == [
        {"name": c["name"], "arguments": c["arguments"]} for c in gold
    ]


def test_rl_prompt_turns_that_are_json_text_stay_the_text_they_were():
    """A multi-turn prompt's tool response (and a user turn that happens to be JSON) is kept verbatim: decoded, it
    became a dict that the chat template renders as Python's repr, and the row was dropped as malformed."""
    import numpy as np

    gold = [[{"name": "weather", "arguments": {"city": "Paris"}}]]
    prompt = np.array(
        [
            {"role": "user", "content": '{"city": "Paris"}'},
            {"role": "assistant", "content": "<tool_call>\n{}\n</tool_call>"},
            {"role": "tool", "content": '{"temp_c": 21}'},
        ],
        dtype=object,
    )
    row = {"prompt": prompt, "reward_model": {"ground_truth": {"gold_tool_calls": json.dumps(gold)}}}
    messages, reason = sft.convert_one(row, "rl", None)
    assert reason == "" and [m["content"] for m in messages[:3]] == [
        '{"city": "Paris"}',
        "<tool_call>\n{}\n</tool_call>",
        '{"temp_c": 21}',
    ]
    assert sft.read_messages(json.dumps([dict(m) for m in prompt])) == [dict(m) for m in prompt]


def test_sharegpt_dialogues_get_the_hermes_tool_prompt_and_bad_ones_are_counted():
    tools = json.dumps(
        [
            {
                "type": "function",
                "function": {"name": "weather", "description": "w", "parameters": {"type": "object", "properties": {}}},
            }
        ]
    )
    good = {
        "tools": tools,
        "conversations": [
            {"from": "human", "value": "Weather in Paris?"},
            {"from": "gpt", "value": '<tool_call>\n{"name": "weather", "arguments": {}}\n</tool_call>'},
            {"from": "tool", "value": '{"temp_c": 21}'},
            {"from": "gpt", "value": "21 C."},
        ],
    }
    ends_on_user = {"conversations": [{"from": "human", "value": "hi"}]}
    dialogues, skipped = sft.convert(
        [good, ends_on_user, {"conversations": [{"from": "alien", "value": "x"}]}], "sharegpt"
    )
    assert skipped == {"no_final_assistant": 1, "unknown_role": 1}
    (d,) = dialogues
    assert [m["role"] for m in d] == ["system", "user", "assistant", "tool", "assistant"]
    assert '"name": "weather"' in d[0]["content"] and "<tools>" in d[0]["content"]


def test_verl_multiturn_sft_dataset_loads_the_output_and_trains_only_assistant_tokens(rl_parquet, tmp_path):
    from omegaconf import OmegaConf
    from verl.utils.dataset.multiturn_sft_dataset import MultiTurnSFTDataset

    tok = load_qwen_tokenizer()
    sft.main(["--input", rl_parquet, "--output_dir", str(tmp_path)])
    # the Qwen3 template here adds <think></think> to the last turn, so verl's turn-by-turn ids differ from the whole
    # dialogue's (its documented ignore_input_ids_mismatch); Qwen2.5, the paper's model, has no think handling
    cfg = OmegaConf.create(
        {
            "messages_key": "messages",
            "tools_key": "tools",
            "max_length": 4096,
            "truncation": "error",
            "pad_mode": "no_padding",
            "ignore_input_ids_mismatch": True,
        }
    )
    ds = MultiTurnSFTDataset(str(tmp_path / "sft_train.parquet"), tok, cfg)
    item = ds[0]
    ids, mask = item["input_ids"], item["loss_mask"].bool()
    trained = tok.decode(ids[mask])
    assert "<tool_call>" in trained and "<tools>" not in trained  # the reply is trained, the tool listing is not
    assert 0 < int(mask.sum()) < len(ids) and torch.is_tensor(ids)
