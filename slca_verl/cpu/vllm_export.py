"""The tiny CPU model in a shape vLLM's CPU backend serves: attention heads widened from ``head_dim`` 16 to 64 with
the same outputs, so a checkpoint trained by ``recipes/run_cpu_tiny_slca.sh`` goes through the eval commands'
``vllm serve`` like a GPU user's checkpoint does.

    python -m slca_verl.cpu.vllm_export --model MERGED_HF_DIR --out SERVED_DIR [--head_dim 64]

vLLM's CPU attention has kernels for head sizes of 32 and up; the tiny model's heads are 16 wide (a 2-core training
budget). The widened model computes the same function, exactly up to float rounding, for Qwen3 attention::

    q_h = g_q ⊙ RMS(W_q,h x) ,  k_h = g_k ⊙ RMS(W_k,h x) ,  logits = q_h · k_h / sqrt(d)        (per head, d = 16)

Each head's 16 dims are placed at ``pos(a) = 4 (a mod 8) + 32 ⌊a / 8⌋`` of a 64-wide head (zeros elsewhere):

- RoPE rotates dim i with i + d/2 at frequency θ^(-2i/d); ``pos`` sends the pair (i, i + 8) of width 16 to the pair
  (4i, 4i + 32) of width 64, whose frequency θ^(-8i/64) is the same;
- RMS over 64 dims of a vector with 48 zeros is RMS over the 16 divided by c = sqrt(64 / 16) = 2, so the q and k
  rows are written times c (``c W``): the norm's input then has the original RMS, epsilon included;
- the softmax scale drops from 1/4 to 1/8 (1/sqrt(d) to 1/(c sqrt(d))): q keeps its factor c (``g_q`` unchanged) and
  k is scaled back (``g_k / c``), so (c q) · k / (c sqrt(d)) = q · k / sqrt(d);
- v and o are placed at the same positions, unscaled (no norm, no rotation).

Everything else (embedding, MLP, layer norms, tokenizer, chat template) is copied, except the position limit
(``--max_positions``, 32,768 by default): RoPE is defined at every position and the config's
``max_position_embeddings`` only bounds what vLLM and bfcl-eval accept, while BFCL's multi-turn prompts, with the
tiny model's 1,024-token vocabulary, run past the 8,192 the model was built with. Past its training lengths the tiny
model's answers are noise, as they are on BFCL anyway; the limit lets the chain run every category.
"""

from __future__ import annotations

import argparse
import logging
import sys

logger = logging.getLogger(__name__)

#: the head size the integration tier's own tiny model is served with (scripts/vllm_cpu_setup.sh): known to run on
#: vLLM's CPU attention
SERVED_HEAD_DIM = 64


def head_positions(old: int, new: int) -> list[int]:
    """Where dim ``a`` of an ``old``-wide rotary head goes in a ``new``-wide one so that its RoPE frequency stays
    (module docstring): the pair (i, i + old/2) goes to (r i, r i + new/2) with r = new / old."""
    if old % 2 or new % old:
        raise ValueError(f"head_dim {old} can only be widened to a multiple of itself, not {new}")
    r, half_old, half_new = new // old, old // 2, new // 2
    return [r * (a % half_old) + half_new * (a // half_old) for a in range(old)]


def _widen_rows(weight, heads: int, old: int, new: int, pos: list[int], scale: float = 1.0):
    """(heads * old, in) -> (heads * new, in): head h's row a to row h * new + pos[a], times ``scale``."""
    import torch

    out = torch.zeros(heads * new, weight.shape[1], dtype=weight.dtype)
    for h in range(heads):
        out[[h * new + p for p in pos]] = scale * weight[h * old : (h + 1) * old]
    return out


def widen_heads(model, new_head_dim: int = SERVED_HEAD_DIM):
    """A new Qwen3 model computing what ``model`` computes, with attention heads ``new_head_dim`` wide."""
    import copy

    import torch

    cfg = model.config
    old = cfg.head_dim
    if cfg.model_type != "qwen3":
        raise ValueError(f"only Qwen3 models are widened (this one is {cfg.model_type!r})")
    if getattr(cfg, "attention_bias", False):
        raise ValueError("attention biases are not widened (the tiny model has none)")
    if old == new_head_dim:
        return model
    pos = head_positions(old, new_head_dim)
    c = (new_head_dim / old) ** 0.5  # RMS over r times the dims, r - 1 of every r zero: the input is scaled by sqrt(r)
    new_cfg = copy.deepcopy(cfg)
    new_cfg.head_dim = new_head_dim
    wide = type(model)(new_cfg).to(next(model.parameters()).dtype)
    state = model.state_dict()
    new_state = {}
    for name, tensor in state.items():
        if name.endswith("self_attn.q_proj.weight"):
            tensor = _widen_rows(tensor, cfg.num_attention_heads, old, new_head_dim, pos, scale=c)
        elif name.endswith("self_attn.k_proj.weight"):
            tensor = _widen_rows(tensor, cfg.num_key_value_heads, old, new_head_dim, pos, scale=c)
        elif name.endswith("self_attn.v_proj.weight"):
            tensor = _widen_rows(tensor, cfg.num_key_value_heads, old, new_head_dim, pos)
        elif name.endswith("self_attn.o_proj.weight"):
            tensor = _widen_rows(tensor.t(), cfg.num_attention_heads, old, new_head_dim, pos).t().contiguous()
        elif name.endswith(("self_attn.q_norm.weight", "self_attn.k_norm.weight")):
            g = torch.ones(new_head_dim, dtype=tensor.dtype)
            g[pos] = tensor if "q_norm" in name else tensor / c
            tensor = g
        new_state[name] = tensor
    missing, unexpected = wide.load_state_dict(new_state, strict=False)
    # a tied lm_head is not in the state dict under its own name when it is tied; anything else is a bug
    if unexpected or [m for m in missing if m != "lm_head.weight"]:
        raise RuntimeError(f"widening lost weights: missing {missing}, unexpected {unexpected}")
    if cfg.tie_word_embeddings:
        wide.tie_weights()
    return wide


def export(model_dir: str, out_dir: str, new_head_dim: int = SERVED_HEAD_DIM, max_positions: int | None = None) -> str:
    """Load an HF checkpoint, widen its heads, save it (with its tokenizer) in ``out_dir``; ``max_positions``
    replaces the config's ``max_position_embeddings`` (None: kept)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    wide = widen_heads(model, new_head_dim)
    if max_positions:
        wide.config.max_position_embeddings = int(max_positions)
    wide.save_pretrained(out_dir)
    AutoTokenizer.from_pretrained(model_dir).save_pretrained(out_dir)
    logger.info("widened %s (head_dim %d -> %d) into %s", model_dir, model.config.head_dim, new_head_dim, out_dir)
    return out_dir


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="an HF checkpoint directory (e.g. verl's model_merger output)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--head_dim", type=int, default=SERVED_HEAD_DIM)
    ap.add_argument("--max_positions", type=int, default=32768, help="max_position_embeddings of the served copy")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        export(args.model, args.out, args.head_dim, args.max_positions)
    except (OSError, ValueError, RuntimeError) as e:
        logger.error("vllm_export: %s", e)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
