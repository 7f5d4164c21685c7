"""slca_verl.plan.precision reads the dtypes verl 0.9.1's FSDP engine trains in, from verl's own config classes."""

import pytest
from verl.workers.config import FSDPEngineConfig

from slca_verl.plan.precision import EnginePrecision, canonical, cpu_has_native_bf16, engine_precision


@pytest.mark.parametrize(
    "spelling, name",
    [
        ("fp32", "fp32"),
        ("float32", "fp32"),
        ("bfloat16", "bf16"),
        ("bf16", "bf16"),
        ("float16", "fp16"),
        ("fp16", "fp16"),
    ],
)
def test_every_spelling_verl_accepts_names_one_dtype(spelling, name):
    assert canonical(spelling) == name
    import torch

    assert canonical(getattr(torch, {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}[name])) == name


def test_an_unknown_dtype_is_refused_naming_it():
    with pytest.raises(ValueError, match="int8"):
        canonical("int8")


def test_verls_default_engine_keeps_fp32_master_weights_and_computes_in_bf16():
    assert engine_precision(FSDPEngineConfig(strategy="fsdp2")) == EnginePrecision(master="fp32", compute="bf16")


def test_a_bf16_model_dtype_leaves_no_fp32_master_copy():
    got = engine_precision(FSDPEngineConfig(strategy="fsdp2", model_dtype="bf16"))
    assert got == EnginePrecision(master="bf16", compute="bf16") and not got.fp32_master


def test_mixed_precision_sets_the_compute_dtype_and_without_param_dtype_verl_takes_bf16():
    fp32 = FSDPEngineConfig(strategy="fsdp2", mixed_precision={"param_dtype": "fp32"})
    no_key = FSDPEngineConfig(strategy="fsdp2", mixed_precision={"reduce_dtype": "fp32"})
    assert engine_precision(fp32).compute == "fp32"
    assert engine_precision(no_key).compute == "bf16"


def test_an_unset_model_dtype_loads_fp32_for_training_and_bf16_forward_only():
    assert engine_precision({"model_dtype": None}).master == "fp32"
    assert engine_precision({"model_dtype": None}, forward_only=True).master == "bf16"
    assert engine_precision({"model_dtype": None, "forward_only": True}).master == "bf16"


@pytest.mark.parametrize(
    "flags, isa, native",
    [
        ({"avx2", "avx512f", "avx512_bf16"}, "", True),  # AVX-512 EPYC (Zen 4)
        ({"avx2", "amx_bf16", "amx_tile"}, "", True),  # recent Xeon
        ({"avx2", "fma"}, "", False),  # AVX2 EPYC (Zen 3): the naive kernel
        ({"avx2", "avx512f"}, "", False),  # AVX-512 without BF16 (older Xeon)
        ({"avx2", "avx512f", "avx512_bf16"}, "AVX2", False),  # oneDNN capped below AVX-512
        ({"avx2", "avx512f", "avx512_bf16"}, "AVX512_CORE_BF16", True),
    ],
)
def test_native_bf16_needs_avx512_bf16_or_amx_and_an_uncapped_onednn(flags, isa, native):
    environ = {"ONEDNN_MAX_CPU_ISA": isa} if isa else {}
    assert cpu_has_native_bf16(frozenset(flags), environ) is native
