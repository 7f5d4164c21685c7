"""The CPU engine's per-token log-probabilities (slca_verl/cpu/engine.py, ``padded_model_outputs``) against verl's
own ``FSDPEngineWithLMHead.prepare_model_outputs`` on the same micro-batch: the same values and the same gradient
into the logits, for unit and per-sample temperatures, with and without entropy; micro-batches the fast path does not
cover go to verl's method."""

from types import SimpleNamespace

import pytest
import torch
from tensordict import TensorDict
from verl.utils import tensordict_utils as tu
from verl.workers.engine.fsdp.transformer_impl import FSDPEngineWithLMHead

from slca_verl.cpu.engine import CPUFSDPEngineWithLMHead, padded_log_probs_apply, padded_model_outputs

VOCAB = 53
LENGTHS = (5, 9, 3)  # three rows: padded to 9 in the model's input


def micro_batch(temperature, **flags) -> TensorDict:
    g = torch.Generator().manual_seed(7)
    ids = [torch.randint(0, VOCAB, (n,), generator=g) for n in LENGTHS]
    td = TensorDict(
        {
            "input_ids": torch.nested.as_nested_tensor(ids, layout=torch.jagged),
            "position_ids": torch.nested.as_nested_tensor([torch.arange(n) for n in LENGTHS], layout=torch.jagged),
        },
        batch_size=[len(LENGTHS)],
    )
    if isinstance(temperature, torch.Tensor):
        td["temperature"] = temperature  # per sample
    else:
        tu.assign_non_tensor(td, temperature=temperature)  # one for the batch, as verl's workers pass it
    tu.assign_non_tensor(td, use_remove_padding=False, **flags)
    return td


def engine_self(entropy_checkpointing=False):
    """What verl's two methods read from ``self`` on the padded path."""
    return SimpleNamespace(
        pad_to_length=False, engine_config=SimpleNamespace(entropy_checkpointing=entropy_checkpointing)
    )


def outputs_and_grads(fn, batch):
    _, output_args = FSDPEngineWithLMHead.prepare_model_inputs(engine_self(), batch)  # verl's own inputs
    logits = torch.randn(len(LENGTHS), max(LENGTHS), VOCAB, generator=torch.Generator().manual_seed(3))
    logits.requires_grad_(True)
    out = fn(SimpleNamespace(logits=logits), output_args, batch)
    weights = {k: torch.linspace(-1.0, 2.0, v.values().numel()) for k, v in out.items()}
    sum((v.values() * weights[k]).sum() for k, v in out.items()).backward()
    return out, logits.grad


def verl(output, output_args, batch):
    return FSDPEngineWithLMHead.prepare_model_outputs(engine_self(), output, output_args, batch, None)


def ours(output, output_args, batch):
    return padded_model_outputs(output, output_args, batch)


@pytest.mark.parametrize("temperature", [1.0, 0.7, torch.tensor([0.5, 1.0, 1.3])], ids=["unit", "scalar", "per_sample"])
@pytest.mark.parametrize("entropy", [False, True], ids=["log_probs", "with_entropy"])
def test_log_probs_entropy_and_gradient_equal_verls(temperature, entropy):
    batch = micro_batch(temperature, calculate_entropy=entropy)
    expected, expected_grad = outputs_and_grads(verl, batch)
    got, got_grad = outputs_and_grads(ours, batch)
    assert set(got) == set(expected) == ({"log_probs", "entropy"} if entropy else {"log_probs"})
    for key in expected:
        assert got[key].is_nested and got[key].offsets().tolist() == expected[key].offsets().tolist()
        torch.testing.assert_close(got[key].values(), expected[key].values(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got_grad, expected_grad, rtol=1e-5, atol=1e-6)
    # padded positions of the shorter rows receive no gradient
    assert got_grad[2, LENGTHS[2] :].abs().sum() == 0 and got_grad[0, LENGTHS[0] :].abs().sum() == 0


def test_the_log_probs_are_those_of_the_next_token_under_the_scaled_softmax():
    """By hand, for row 1, position 4: log softmax(logits / T)[next token]."""
    batch = micro_batch(torch.tensor([0.5, 2.0, 1.3]))
    _, output_args = FSDPEngineWithLMHead.prepare_model_inputs(engine_self(), batch)
    logits = torch.randn(3, 9, VOCAB, generator=torch.Generator().manual_seed(11))
    out = padded_model_outputs(SimpleNamespace(logits=logits), output_args, batch)
    next_token = batch["input_ids"].unbind()[1][5]
    hand = torch.log_softmax(logits[1, 4] / 2.0, dim=-1)[next_token]
    torch.testing.assert_close(out["log_probs"].unbind()[1][4], hand)


@pytest.mark.parametrize(
    "flags",
    [
        {"use_remove_padding": True},
        {"use_fused_kernels": True},
        {"calculate_sum_pi_squared": True},
        {"distillation_use_topk": True},
    ],
    ids=lambda f: next(iter(f)),
)
def test_other_micro_batches_take_verls_path(flags):
    batch = micro_batch(1.0)
    assert padded_log_probs_apply(batch)
    tu.assign_non_tensor(batch, **flags)
    assert not padded_log_probs_apply(batch)


def test_the_cpu_engine_dispatches_padded_micro_batches_to_the_fast_path():
    engine = CPUFSDPEngineWithLMHead.__new__(CPUFSDPEngineWithLMHead)  # the method only, no model built
    engine.engine_config = SimpleNamespace(entropy_checkpointing=False)
    batch = micro_batch(1.0, calculate_entropy=True)
    _, output_args = FSDPEngineWithLMHead.prepare_model_inputs(engine_self(), batch)
    logits = torch.randn(3, 9, VOCAB, generator=torch.Generator().manual_seed(5))
    got = engine.prepare_model_outputs(SimpleNamespace(logits=logits), output_args, batch, None)
    expected = padded_model_outputs(SimpleNamespace(logits=logits), output_args, batch)
    assert torch.equal(got["log_probs"].values(), expected["log_probs"].values())
    assert torch.equal(got["entropy"].values(), expected["entropy"].values())
