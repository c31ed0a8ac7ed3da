"""mdlm-wm: masked diffusion language models as steerable text world models."""

__version__ = "0.1.0"
