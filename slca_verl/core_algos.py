"""Temporary: ``SEGMENT_METRICS`` at its old path, for the two e2e test modules that still import it from here
(tests/test_main_ppo_cpu.py, tests/test_main_ppo_cpu_async.py). The estimators live in :mod:`slca_verl.estimators`;
delete this module once those imports read ``from slca_verl.estimators.slca_grpo import SEGMENT_METRICS``."""

from slca_verl.estimators.slca_grpo import SEGMENT_METRICS

__all__ = ["SEGMENT_METRICS"]
