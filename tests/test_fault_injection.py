"""The faults the learning test injects (tests/fault_injection.py) break advantages exactly as documented."""

import torch
from fault_injection import break_advantages

from slca_verl.estimators.segments import SUMMARY, TOOL

OBS = 0
IDS = torch.tensor(
    [[TOOL, TOOL, OBS, SUMMARY, SUMMARY], [TOOL, OBS, SUMMARY, OBS, OBS], [SUMMARY, SUMMARY, OBS, OBS, OBS]]
)
ADV = torch.tensor([[0.5, 0.5, 0.0, -1.0, -1.0], [-2.0, 0.0, 3.0, 0.0, 0.0], [0.25, 0.25, 0.0, 0.0, 0.0]])


def test_sign_flips_the_tool_tokens_only():
    assert break_advantages(ADV, IDS, "sign").tolist() == [
        [-0.5, -0.5, 0.0, -1.0, -1.0],
        [2.0, 0.0, 3.0, 0.0, 0.0],
        [0.25, 0.25, 0.0, 0.0, 0.0],
    ]


def test_to_summary_moves_each_rollouts_tool_advantage_onto_its_summary():
    assert break_advantages(ADV, IDS, "to_summary").tolist() == [
        [0.0, 0.0, 0.0, 0.5, 0.5],
        [0.0, 0.0, -2.0, 0.0, 0.0],
        [0.0, 0.0, 0.0, 0.0, 0.0],
    ]  # no tool segment: 0
