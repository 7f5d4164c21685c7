"""Round trip: verl's own RLHFDataset loads our parquet and yields what the agent loop and the reward read,
and the per-row tools render through the real Qwen3 chat template."""

import json
import os

import pytest
from conftest import load_qwen_tokenizer

from data_prep import hermes_fc, xlam

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "data_prep")


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    from omegaconf import OmegaConf
    from verl.utils.dataset.rl_dataset import RLHFDataset

    out = tmp_path_factory.mktemp("rt")
    xlam.main(["--input", os.path.join(FIXTURES, "xlam_sample.json"), "--output_dir", str(out), "--no_progress"])
    hermes_fc.main(
        ["--input", os.path.join(FIXTURES, "hermes_fc_sample.json"), "--output_dir", str(out), "--no_progress"]
    )
    tokenizer = load_qwen_tokenizer()
    config = OmegaConf.create(
        {
            "prompt_key": "prompt",
            "max_prompt_length": 4096,
            "filter_overlong_prompts": True,
            "cache_dir": str(out / "cache"),
            "filter_overlong_prompts_workers": 1,
        }
    )
    files = [str(out / "xlam_train.parquet"), str(out / "hermes_fc_train.parquet")]
    return RLHFDataset(files, tokenizer, config), tokenizer


def test_rlhf_dataset_loads_every_written_row_of_two_sources(dataset):
    ds, _ = dataset
    assert len(ds) == 6 + 4  # xlam rows written + hermes rows written, none filtered as overlong
    sources = {ds[i]["data_source"] for i in range(len(ds))}
    assert sources == {"xlam", "hermes_fc"}


def test_rows_yield_the_fields_the_agent_loop_and_reward_read(dataset):
    ds, _ = dataset
    for i in range(len(ds)):
        item = ds[i]
        assert item["agent_name"] == "slca_tool_agent"
        assert item["raw_prompt"][-1]["role"] == "user"
        gt = item["reward_model"]["ground_truth"]
        gold = json.loads(gt["gold_tool_calls"])
        assert all(isinstance(step, list) and step for step in gold)
        names = {c["name"] for step in gold for c in step}
        assert names <= set(gt["allowed_tools"])
        tools = json.loads(item["extra_info"]["tool_schemas"])
        assert [t["function"]["name"] for t in tools] == list(gt["allowed_tools"])
        assert json.loads(item["tools"]) == tools == json.loads(gt["tool_schemas"])
        assert item["index"] == item["extra_info"]["index"] and item["extra_info"]["split"] == "train"


def test_per_row_tools_render_through_the_qwen3_chat_template(dataset):
    ds, tokenizer = dataset
    multi_turn = next(ds[i] for i in range(len(ds)) if ds[i]["extra_info"]["original_turn_index"] == 1)
    tools = json.loads(multi_turn["extra_info"]["tool_schemas"])
    text = tokenizer.apply_chat_template(
        multi_turn["raw_prompt"], tools=tools, tokenize=False, add_generation_prompt=True
    )
    assert text.count("<tools>") >= 1 and '"name": "get_news"' in text
    assert '<tool_response>\n{"price": 410}\n</tool_response>' in text  # role "tool" rendered by the template
    assert text.endswith("<|im_start|>assistant\n")
    assert text.count("<|im_start|>system") == 1  # our tool listing and the template's share one system turn
    ids = tokenizer.apply_chat_template(
        multi_turn["raw_prompt"], tools=tools, tokenize=True, add_generation_prompt=True
    )
    assert 0 < len(ids if isinstance(ids, list) else ids["input_ids"]) < 4096
