"""Sampler flags shared by the launchers that sample a world model.

Every flag defaults to None: the setting then comes from the model's own
config (`cfg.sample`), and `overrides()` returns only the flags given. The
AR decoder reads temperature and top_p and ignores the MDLM settings.
WorldModel.decode_config checks the combination against the model (a block
size that does not divide the canvas, say).
"""

from absl import flags

from mdlm_wm.diffusion.sampler import CONFIDENCES

_FLAGS = (
    flags.DEFINE_integer("steps", None, "Denoising steps (MDLM: per block for a block-diffusion "
                         "model, in all for a full-canvas one); default: the model's config.",
                         lower_bound=1),
    flags.DEFINE_float("temperature", None,
                       "Sampling temperature (0: greedy); default: the model's config.",
                       lower_bound=0.0),
    flags.DEFINE_float("top_p", None, "Nucleus mass in (0, 1] (1: off); default: the model's "
                       "config.", lower_bound=0.0, upper_bound=1.0),
    flags.DEFINE_enum("confidence", None, CONFIDENCES,
                      "MDLM: how a step ranks the masked positions it commits first; default: "
                      "the model's config."),
    flags.DEFINE_integer("block_size", None, "MDLM: blocks of this many canvas positions, "
                         "left to right (a block-diffusion model: 0 = its trained block size; a "
                         "full-canvas one: 0 = one block); default: the model's config.",
                         lower_bound=0),
    flags.DEFINE_float("threshold", None, "Block-diffusion MDLM: also commit every token whose "
                       "confidence exceeds this (0: off); default: the model's config.",
                       lower_bound=0.0, upper_bound=1.0),
    flags.DEFINE_float("cfg_scale", None, "MDLM: classifier-free guidance on the steer (0: off); "
                       "default: the model's config.", lower_bound=0.0),
)


def overrides() -> dict:
  """{setting: value} for the sampler flags given on the command line."""
  return {f.name: f.value for f in _FLAGS if f.value is not None}
