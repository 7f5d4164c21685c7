"""The tiny model's warm-up schedule (``slca_verl.cpu.tiny_model.one_cycle``) for every warm-up length."""

import pytest
import torch

from slca_verl.cpu.tiny_model import one_cycle

LR = 1e-2


def rates(steps: int) -> list[float]:
    param = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.AdamW([param], lr=LR)
    sched = one_cycle(opt, LR, steps)
    out = []
    for _ in range(steps):
        out.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return out


@pytest.mark.parametrize("steps", [1, 2, 3, 4, 9, 10, 11, 19, 20, 40])
def test_every_warm_up_length_runs_and_peaks_at_the_rate(steps):
    """torch's own OneCycleLR at pct_start 0.1 raises ZeroDivisionError at exactly 10 steps (WARMUP_STEPS=10)."""
    r = rates(steps)
    assert len(r) == steps and all(0 < x <= LR * (1 + 1e-9) for x in r)
    assert max(r) == pytest.approx(LR)


@pytest.mark.parametrize("steps", [20, 100, 800])
def test_from_twenty_steps_it_is_the_plain_ten_percent_one_cycle(steps):
    """The documented builds (800 warm-up steps) keep exactly the schedule their figures were measured with."""
    param = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.AdamW([param], lr=LR)
    plain = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=LR, total_steps=steps, pct_start=0.1)
    expected = []
    for _ in range(steps):
        expected.append(opt.param_groups[0]["lr"])
        opt.step()
        plain.step()
    assert rates(steps) == pytest.approx(expected, rel=1e-12)
