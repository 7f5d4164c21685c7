"""The controlled toy task of the credit-assignment benchmark and the quickstart, and its tiny policy.

:mod:`slca_verl.toy.task` (one tool call, then a four-word reply, scored by SGLS and HierR, with a judge whose noise is
a setting) and :mod:`slca_verl.toy.policy` (a few-thousand-parameter transformer that writes both segments). Used by
``benchmarks/credit_assignment.py``, ``examples/quickstart.py`` and the tests; nothing in the plugin imports them.
"""
