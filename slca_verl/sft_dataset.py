"""verl's multi-turn SFT dataset, each dialogue rendered by the chat template once, as the policy later sees it.

    bash recipes/run_qwen7b_sft.sh      # sets data.custom_cls.path=pkg://slca_verl.sft_dataset
                                        #      data.custom_cls.name=WholeDialogueSFTDataset

verl 0.9.1's ``MultiTurnSFTDataset`` renders every message on its own and checks that the pieces, joined, equal the
whole dialogue rendered at once; where they differ it stops (``AssertionError: MultiTurnSFTDataset
apply_chat_template to each turn separately ...``), or with ``data.ignore_input_ids_mismatch=true`` trains on the
joined pieces, which are not what the policy sees. Both Qwen templates differ: Qwen2.5's and Qwen3's put consecutive
tool results (the answers to parallel calls) in one user turn, which per-message rendering splits into one turn each,
and Qwen3's writes an empty ``<think></think>`` into the last assistant turn after a user turn, which an assistant
message rendered alone never gets. So verl's SFT trainer stops on every Qwen3 dialogue, and on Qwen2.5 at the first
parallel call of the authors' SFT data.

This dataset tokenizes the whole dialogue once (tools and ``enable_thinking`` as verl passes them) and trains the
assistant's tokens (:func:`slca_verl.chatml.assistant_labels`: from ``<|im_start|>assistant\\n`` to the ``<|im_end|>``
that closes the turn), so SFT trains on the very tokens RL's agent loop renders. It returns what verl's dataset
returns (``input_ids``, ``position_ids``, ``loss_mask`` and, with ``pad_mode=right``, ``attention_mask``), text only,
and refuses at start-up a tokenizer whose template is not ChatML, naming the key to change.
"""

from __future__ import annotations

import logging

import torch
import torch.nn.functional as F
from verl.utils.dataset.dataset_utils import DatasetPadMode
from verl.utils.dataset.multiturn_sft_dataset import MultiTurnSFTDataset

from slca_verl.chatml import assistant_labels, is_chatml

logger = logging.getLogger(__name__)


class WholeDialogueSFTDataset(MultiTurnSFTDataset):
    """verl's ``MultiTurnSFTDataset`` (same config keys, same outputs), tokenizing each dialogue in one piece."""

    def __init__(self, parquet_files, tokenizer, config, processor=None, max_samples: int = -1):
        if processor is not None:
            raise ValueError(
                "data.custom_cls=WholeDialogueSFTDataset reads text dialogues only; for images or videos "
                "unset data.custom_cls.path (verl's MultiTurnSFTDataset)"
            )
        if not is_chatml(tokenizer):
            raise ValueError(
                "data.custom_cls=WholeDialogueSFTDataset labels ChatML assistant turns (<|im_start|>"
                "assistant ... <|im_end|>, the Qwen templates); this tokenizer's chat template writes "
                "none: unset data.custom_cls.path to use verl's MultiTurnSFTDataset"
            )
        super().__init__(parquet_files, tokenizer, config, processor=processor, max_samples=max_samples)

    def __getitem__(self, item):
        row = self.dataframe.iloc[item].to_dict()
        messages = self._build_messages(row)
        kwargs = dict(self.apply_chat_template_kwargs)
        tools = self.tools[item] if self.tools is not None else None
        if tools is not None:
            kwargs["tools"] = tools
        thinking = self.enable_thinking[item] if self.enable_thinking is not None else self.enable_thinking_default
        if thinking is not None:
            kwargs["enable_thinking"] = bool(thinking)
        ids, trained = assistant_labels(self.tokenizer, messages, **kwargs)
        input_ids = torch.tensor(ids, dtype=torch.long)  # (seq,)
        loss_mask = torch.tensor(trained, dtype=torch.long)  # (seq,) 1 on the assistant's tokens
        n = input_ids.shape[0]
        if n > self.max_length:
            if self.truncation == "error":
                raise ValueError(f"{n=} is larger than {self.max_length=} (data.max_length; data.truncation=error)")
            keep = slice(-self.max_length, None) if self.truncation == "left" else slice(0, self.max_length)
            input_ids, loss_mask = input_ids[keep], loss_mask[keep]
            n = self.max_length
        position_ids = torch.arange(n, dtype=torch.long)  # (seq,)
        if self.pad_mode == DatasetPadMode.NO_PADDING:
            return {"input_ids": input_ids, "position_ids": position_ids, "loss_mask": loss_mask}
        pad = self.max_length - n
        pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        return {
            "input_ids": F.pad(input_ids, (0, pad), value=pad_id),
            "attention_mask": F.pad(torch.ones(n, dtype=torch.long), (0, pad), value=0),
            "position_ids": F.pad(position_ids, (0, pad), value=0),
            "loss_mask": F.pad(loss_mask, (0, pad), value=0),
        }
