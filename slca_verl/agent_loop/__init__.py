"""``slca_tool_agent``: the segment-aware multi-turn tool agent loop (registered in verl on import).

- :mod:`.loop` — :class:`SLCAToolAgentLoop` (verl's ``ToolAgentLoop`` + per-sample SGLS tools + segment ids);
- :mod:`.output` — :class:`SLCAAgentLoopOutput`, whose ``as_dict`` writes ``slca_segment_ids`` and the reward layout;
- :mod:`.parser` — the tolerant hermes parser, also registered as verl tool-call format ``slca_hermes``;
- :mod:`.tools` — the row's tool schemas, the SGLS tool object, response truncation;
- :mod:`.reward` — ``compute_score`` that scores the loop's structured turns with HierR.

See docs/agent_loop.md for the YAML and the dataset columns it reads.
"""

from slca_verl.agent_loop.loop import (
    AGENT_NAME,
    METRIC_KEYS,
    SLCAToolAgentLoop,
    check_reward_config,
)
from slca_verl.agent_loop.output import SLCAAgentLoopOutput, segment_ids_for_turns
from slca_verl.agent_loop.parser import SLCAHermesToolParser, parse_hermes_calls

__all__ = [
    "AGENT_NAME",
    "METRIC_KEYS",
    "SLCAAgentLoopOutput",
    "SLCAHermesToolParser",
    "SLCAToolAgentLoop",
    "check_reward_config",
    "parse_hermes_calls",
    "segment_ids_for_turns",
]
