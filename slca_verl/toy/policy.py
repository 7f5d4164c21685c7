"""A tiny autoregressive transformer policy for the task of :mod:`slca_verl.toy.task` (CPU, a few thousand parameters).

One set of parameters produces the tool call *and* the reply, as in an LLM agent: the tool tokens and the summary
tokens share embeddings, attention and MLP weights, so a gradient on one segment moves the other.

    policy = TinyPolicy(seed=0)
    resp, logp = policy.sample(prompts)              # prompts (B, 3) long -> resp (B, 7) long, logp (B, 7)
    logp = policy.log_probs(prompts, resp)           # (B, 7), differentiable; 0 on the observation slot

Decoding is grammar-constrained (``task.SLOT_CHOICES``): at each response slot only tokens of that slot's kind
have finite logits, for sampling and for the log-probabilities used in the loss alike.
"""

from __future__ import annotations

import torch
from torch import nn

from slca_verl.toy import task as T


class TinyPolicy(nn.Module):
    """``abstain=True`` uses the irrelevance extension of :mod:`slca_verl.toy.task`: its vocabulary and a grammar
    whose slot 0 may be NO_CALL, after which slots 1-2 are unused (response_mask 0, log-prob 0). ``abstain=False``
    is the base task, parameter for parameter the policy every recorded base figure was measured with."""

    def __init__(self, d_model: int = 32, n_layers: int = 2, n_heads: int = 4, seed: int = 0, abstain: bool = False):
        super().__init__()
        self.abstain = abstain
        self.slot_choices = T.ABSTAIN_SLOT_CHOICES if abstain else T.SLOT_CHOICES
        g = torch.random.fork_rng(devices=[])
        with g:
            torch.manual_seed(seed)
            V, S = len(T.EXT_VOCAB if abstain else T.VOCAB), T.PROMPT_LEN + T.RESPONSE_LEN
            self.tok = nn.Embedding(V, d_model)
            self.pos = nn.Embedding(S, d_model)
            layer = nn.TransformerEncoderLayer(
                d_model, n_heads, 4 * d_model, dropout=0.0, batch_first=True, norm_first=True
            )
            self.blocks = nn.TransformerEncoder(layer, n_layers, enable_nested_tensor=False)
            self.norm = nn.LayerNorm(d_model)
            self.head = nn.Linear(d_model, V)
        allowed = torch.zeros(T.RESPONSE_LEN, V, dtype=torch.bool)  # (R, V)
        for j, choices in enumerate(self.slot_choices):
            allowed[j, choices if choices is not None else [T.OBS]] = True
        self.register_buffer("allowed", allowed, persistent=False)
        self.register_buffer("causal", nn.Transformer.generate_square_subsequent_mask(S), persistent=False)
        self.register_buffer("resp_mask", torch.tensor(T.RESPONSE_MASK, dtype=torch.float32), persistent=False)

    def logits(self, seq: torch.Tensor) -> torch.Tensor:
        """seq (B, S') long -> next-token logits (B, S', V)."""
        S = seq.shape[1]
        h = self.tok(seq) + self.pos.weight[:S]  # (B, S', d)
        h = self.blocks(h, mask=self.causal[:S, :S], is_causal=True)
        return self.head(self.norm(h))

    def _slot_logits(self, seq: torch.Tensor) -> torch.Tensor:
        """Constrained logits of every response slot, (B, R, V), from a full sequence (B, P + R)."""
        out = self.logits(seq[:, :-1])[:, T.PROMPT_LEN - 1 :]  # position t predicts token t + 1
        return out.masked_fill(~self.allowed, float("-inf"))

    @torch.no_grad()
    def sample(
        self,
        prompts: torch.Tensor,
        greedy: bool = False,
        generator: torch.Generator | None = None,
        stop: int = T.RESPONSE_LEN,
    ):
        """Generate response slots until slot ``stop`` (exclusive). ``prompts`` (B, P + k) may already hold the
        first k response slots (an agent loop's second turn continues after the tool response).

        Returns (responses (B, stop) long, log-probs (B, stop) of the slots generated here, 0 elsewhere)."""
        seq = prompts
        logps = [torch.zeros(seq.shape[0]) for _ in range(seq.shape[1] - T.PROMPT_LEN)]
        for j in range(seq.shape[1] - T.PROMPT_LEN, stop):
            if self.slot_choices[j] is None:  # the tool response: not the policy's choice
                nxt = torch.full((seq.shape[0], 1), T.OBS, dtype=torch.long)
                logps.append(torch.zeros(seq.shape[0]))
            else:
                lg = self.logits(seq)[:, -1].masked_fill(~self.allowed[j], float("-inf"))  # (B, V)
                lp = torch.log_softmax(lg, dim=-1)
                nxt = lp.argmax(-1, keepdim=True) if greedy else torch.multinomial(lp.exp(), 1, generator=generator)
                logp = lp.gather(1, nxt).squeeze(1)
                if j == 1 and self.abstain:  # after NO_CALL the argument slot is unused
                    skipped = seq[:, T.PROMPT_LEN] == T.NO_CALL
                    nxt = torch.where(skipped.unsqueeze(1), torch.full_like(nxt, T.OBS), nxt)
                    logp = torch.where(skipped, torch.zeros_like(logp), logp)
                logps.append(logp)
            seq = torch.cat([seq, nxt], dim=1)
        return seq[:, T.PROMPT_LEN :], torch.stack(logps, dim=1)

    def response_mask(self, responses: torch.Tensor) -> torch.Tensor:
        """(B, R) float: 1 on the slots the policy chose (the argument slot of a NO_CALL response is not one)."""
        mask = self.resp_mask.expand(responses.shape[0], -1).clone()
        if self.abstain:
            mask[:, 1] = (responses[:, 0] != T.NO_CALL).float()
        return mask

    def log_probs(self, prompts: torch.Tensor, responses: torch.Tensor) -> torch.Tensor:
        """Log-probabilities of ``responses`` (B, R) under the constrained policy, (B, R); 0 on unchosen slots."""
        lp = torch.log_softmax(self._slot_logits(torch.cat([prompts, responses], dim=1)), dim=-1)  # (B, R, V)
        mask = self.response_mask(responses).bool()
        # an unchosen slot may hold a token its grammar forbids (log-prob -inf): gather another, then zero it
        chosen = torch.where(mask, responses, torch.full_like(responses, T.ARG_IDS[0]))
        lp = lp.gather(2, chosen.unsqueeze(-1)).squeeze(-1)  # (B, R)
        return torch.where(mask, lp, torch.zeros_like(lp))
