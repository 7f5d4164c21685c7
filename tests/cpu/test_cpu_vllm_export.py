"""The head-widening export that lets vLLM's CPU backend serve the tiny model: the widened Qwen3 must compute the
same logits as the trained one (RoPE frequencies, RMS norms and the softmax scale all preserved)."""

import pytest
import torch

from slca_verl.cpu.tiny_model import TINY_SHAPE
from slca_verl.cpu.vllm_export import export, head_positions, widen_heads


def test_head_positions_keep_each_rotary_pair_at_its_frequency():
    # width 16 -> 64: pair (i, i + 8) -> (4 i, 4 i + 32); hand-written
    assert head_positions(16, 64) == [0, 4, 8, 12, 16, 20, 24, 28, 32, 36, 40, 44, 48, 52, 56, 60]
    assert head_positions(16, 32) == [0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30]
    old_freq = [10000 ** (-2 * (a % 8) / 16) for a in range(16)]
    new_freq = [10000 ** (-2 * (p % 32) / 64) for p in head_positions(16, 64)]
    assert new_freq == pytest.approx(old_freq)
    with pytest.raises(ValueError, match="multiple"):
        head_positions(16, 40)


def _random_tiny(seed=0):
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(seed)
    cfg = Qwen3Config(vocab_size=128, tie_word_embeddings=True, rms_norm_eps=1e-6, **TINY_SHAPE)
    model = Qwen3ForCausalLM(cfg).eval()
    with torch.no_grad():  # norms away from their all-ones init, so a misplaced or unscaled norm weight shows
        for name, p in model.named_parameters():
            if "norm" in name:
                p.uniform_(0.5, 1.5)
    return model


@pytest.mark.parametrize("new_dim", [32, 64])
def test_widened_model_computes_the_same_logits(new_dim):
    model = _random_tiny()
    wide = widen_heads(model, new_dim).eval()
    assert wide.config.head_dim == new_dim
    assert wide.model.layers[0].self_attn.q_proj.weight.shape == (4 * new_dim, 64)
    ids = torch.randint(0, 128, (2, 40), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        a, b = model(ids).logits, wide(ids).logits
    assert torch.allclose(a, b, atol=1e-5, rtol=1e-4), (a - b).abs().max()
    with torch.no_grad():  # greedy decoding, the eval commands' setting, agrees token for token
        g1 = model.generate(ids[:1, :8], max_new_tokens=16, do_sample=False, pad_token_id=0)
        g2 = wide.generate(ids[:1, :8], max_new_tokens=16, do_sample=False, pad_token_id=0)
    assert g1.tolist() == g2.tolist()


def test_unscaled_widening_would_change_the_logits():
    """The doubling of q/k rows and the halved k norm are what keep the outputs: without them logits differ."""
    model = _random_tiny()
    wide = widen_heads(model, 64).eval()
    with torch.no_grad():
        for layer in wide.model.layers:
            layer.self_attn.k_norm.weight.mul_(2.0)  # undo the compensation of the softmax scale
    ids = torch.randint(0, 128, (1, 24), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        assert (model(ids).logits - wide(ids).logits).abs().max() > 1e-3


def test_export_saves_a_widened_checkpoint_with_its_tokenizer(tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from slca_verl.cpu.tiny_model import qwen3_tokenizer_dir

    src = tmp_path / "src"
    model = _random_tiny()
    model.save_pretrained(src)
    AutoTokenizer.from_pretrained(qwen3_tokenizer_dir()).save_pretrained(src)
    export(str(src), str(tmp_path / "out"), max_positions=20000)
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path / "out", dtype=torch.float32).eval()
    assert loaded.config.head_dim == 64
    assert loaded.config.max_position_embeddings == 20000 != model.config.max_position_embeddings
    tok = AutoTokenizer.from_pretrained(tmp_path / "out")
    assert tok.chat_template and tok.convert_tokens_to_ids("<tool_call>") is not None
    ids = torch.randint(0, 128, (1, 16), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        assert torch.allclose(model(ids).logits, loaded(ids).logits, atol=1e-5, rtol=1e-4)


def test_non_qwen3_models_are_refused():
    from transformers import LlamaConfig, LlamaForCausalLM

    m = LlamaForCausalLM(
        LlamaConfig(
            vocab_size=64,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=1,
            head_dim=16,
        )
    )
    with pytest.raises(ValueError, match="only Qwen3"):
        widen_heads(m, 64)
