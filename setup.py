"""mdlm-wm: masked diffusion language models as steerable text world models."""

import setuptools

# Lower bounds are the versions the test suite was run with (Python 3.11,
# CPU); nothing is pinned exactly.
INSTALL_REQUIRES = [
    "jax>=0.10.2",
    "flax>=0.12.8",
    "optax>=0.2.8",
    "orbax-checkpoint>=0.12.8",
    "grain>=0.2.18",
    "sentencepiece>=0.2.0",
    "ml-collections>=1.1.0",
    "absl-py>=2.1.0",
    "numpy>=1.26",
    "tensorboardX>=2.6",
]

# Metric libraries of mdlm_wm.eval (CPU-only; mauve-text brings faiss-cpu).
# They are test requirements too, so the metric tests run wherever the suite does.
EVAL_METRICS = ["sacrebleu>=2.6.0", "rouge-score>=0.1.2", "mauve-text>=0.4.0", "matplotlib>=3.8",
                "scikit-learn>=1.9.1"]

# User surfaces: the rollout HTTP service and the gymnasium environment.
SERVE = ["fastapi>=0.165.0", "uvicorn>=0.55.0"]
GYM = ["gymnasium>=1.4.0"]
# The notebook test executes notebooks/ headless.
NOTEBOOK = ["nbclient>=0.11.0", "nbformat>=5.11.1", "ipykernel>=7.4.0"]

# import-linter checks the layer contracts of pyproject.toml (tests/test_layers.py).
EXTRAS = {
    "test": ["pytest>=8.0", "httpx>=0.29.0", "import-linter>=2.17", *EVAL_METRICS, *SERVE, *GYM, *NOTEBOOK],
    "serve": SERVE,
    "gym": GYM,
    # Importing Hugging Face checkpoints reads safetensors; the logits test
    # compares with transformers on torch's CPU build (`pip install torch==2.13.0`
    # first where a CUDA build is not wanted).
    "hf": ["safetensors>=0.8.0", "transformers>=5.24.0", "torch>=2.13.0"],
    # Real environments behind mdlm_wm/envs/adapters/ (TextWorld-Express and
    # ScienceWorld also need Java 8+ outside pip).
    "envs": ["textworld>=1.7.0", "textworld-express>=1.1.0", "scienceworld>=1.2.3", "alfworld>=0.4.2"],
    # The evaluation suite: metrics, plus plots for the report.
    "eval": EVAL_METRICS,
}

setuptools.setup(
    name="mdlm-wm",
    version="0.1.0",
    description="Masked diffusion language models as steerable text world models for agentic RL",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    packages=setuptools.find_packages(include=["mdlm_wm", "mdlm_wm.*", "launch", "launch.*",
                                               "configs", "configs.*"]),
    python_requires=">=3.11",
    install_requires=INSTALL_REQUIRES,
    extras_require=EXTRAS,
)
