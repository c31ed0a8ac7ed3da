"""Every shipped config validates, and the study's sizes are what its docs say."""

import importlib
import pkgutil

import pytest

import configs
from mdlm_wm import config as config_lib

NAMES = sorted(m.name for m in pkgutil.walk_packages(configs.__path__, "configs.")
               if not m.ispkg and not m.name.endswith(".common"))


@pytest.mark.parametrize("name", NAMES)
def test_config_validates(name):
  cfg = importlib.import_module(name).get_config()
  if "env_backend" in cfg:  # agent GRPO: its workdirs and env come from flags
    cfg.agent, cfg.world_model, cfg.env = "AGENT_DIR", "WM_DIR", "household"
    config_lib.validate_agent_grpo(cfg)
  else:
    (config_lib.validate_grpo if "grpo" in cfg else config_lib.validate)(cfg)


def test_study_sizes():
  size = lambda n: config_lib.model_config(
      importlib.import_module(f"configs.study.{n}").get_config(), 4096).num_params()
  assert size("mdlm_s") == size("ar_s")
  assert 3.5 <= size("ar_4x") / size("ar_s") <= 4.5
  base = importlib.import_module("configs.base_1b").get_config()
  assert 0.9e9 < config_lib.model_config(base, 32000).num_params() < 1.1e9


def test_model_and_sample_defaults_are_the_libraries():
  import dataclasses
  from mdlm_wm.diffusion.block_sampler import BlockSamplerConfig
  from mdlm_wm.diffusion.sampler import SamplerConfig
  from mdlm_wm.model.transformer import ModelConfig
  cfg = config_lib.base_config()
  model = ModelConfig(vocab_size=7)
  for f in dataclasses.fields(ModelConfig):
    if f.name not in ("vocab_size", "attention"):
      assert cfg.model[f.name] == getattr(model, f.name), f.name
  assert config_lib.model_config(cfg, 7) == dataclasses.replace(model, attention="bidirectional")
  sampler = SamplerConfig()
  for key in ("steps", "temperature", "top_p", "confidence", "block_size", "cfg_scale",
              "use_prefix_cache"):
    assert cfg.sample[key] == getattr(sampler, key), key
  assert cfg.sample.threshold == BlockSamplerConfig().threshold


@pytest.mark.parametrize("key,value,library", [
    # The library validator's own message, with the config key in front.
    ("model.n_kv_heads", 3, "n_heads: must be a multiple of n_kv_heads"),
    ("model.remat", "sometimes", "remat: must be one of"),
    ("model.norm_eps", 0.0, "norm_eps: must be > 0"),
    ("sample.threshold", 1.5, r"threshold: must be in \[0, 1\), got 1.5"),
    ("sample.top_p", 0.0, r"top_p: must be in \(0, 1\]"),
    ("sample.confidence", "max", "confidence: must be one of"),
])
def test_a_library_rule_is_checked_once_and_named_by_its_config_key(key, value, library):
  cfg = config_lib.base_config()
  block, name = key.split(".")
  cfg[block][name] = value
  prefix = "config.model." if block == "model" else "config.sample."
  with pytest.raises(ValueError, match=rf"^{prefix.replace('.', '[.]')}{library}"):
    config_lib.validate(cfg)


@pytest.mark.parametrize("objective,seq_len,ok", [
    ("mdlm", 768 + 2 * 256, True), ("mdlm", 768 + 2 * 256 - 1, False),
    ("ar", 768 + 256, True), ("ar", 768 + 256 - 1, False)])
def test_config_and_pipeline_apply_one_row_length_rule(objective, seq_len, ok):
  from mdlm_wm.train import trainer
  cfg = config_lib.base_config()
  cfg.objective = objective
  if objective == "ar":
    cfg.model.attention = "causal"
  cfg.data.seq_len = seq_len
  pipe = trainer.pipeline_config(cfg)
  if ok:
    config_lib.validate(cfg)
    pipe.validate()
    return
  with pytest.raises(ValueError) as from_pipeline:
    pipe.validate()
  with pytest.raises(ValueError) as from_config:
    config_lib.validate(cfg)
  assert str(from_config.value) == f"config.data.{from_pipeline.value}"
  assert str(from_pipeline.value).startswith("seq_len: must be >= max_context_len + ")


def test_tool_schemas_are_read_as_the_model_was_trained():
  cfg = config_lib.base_config()
  assert config_lib.tools_format(cfg) == "signature"
  del cfg.data["tools_format"]  # a workdir's config from before the signature line
  assert config_lib.tools_format(cfg) == "json"
  cfg.data.tools_format = "yaml"
  with pytest.raises(ValueError, match="data.tools_format"):
    config_lib.validate(cfg)
  cfg = config_lib.base_config()
  cfg.data.ablate = "tools,rule"
  with pytest.raises(ValueError, match=r"data.ablate: unknown anchor\(s\) \['rule'\]"):
    config_lib.validate(cfg)


@pytest.mark.parametrize("key,value,message", [
    ("format_retries", -1, "config.sample.format_retries: must be >= 0"),
    ("retry_temperature", 0.0, "config.sample.retry_temperature: must be > 0"),
])
def test_format_retry_settings_are_validated(key, value, message):
  cfg = config_lib.base_config()
  cfg.sample[key] = value
  with pytest.raises(ValueError, match=rf"^{message.replace('.', '[.]')}"):
    config_lib.validate(cfg)


def test_clean_ar_weight_is_validated_and_makes_the_clean_copy_causal():
  cfg = config_lib.base_config()
  cfg.objective = "mdlm"
  assert config_lib.causal_clean(cfg)  # the default: weight 2
  cfg.diffusion.clean_ar_weight = 0.0
  assert not config_lib.causal_clean(cfg)
  del cfg.diffusion["clean_ar_weight"]  # a checkpoint's config from before the key
  assert not config_lib.causal_clean(cfg)
  cfg.diffusion.clean_ar_weight = 0.5
  config_lib.validate(cfg)
  assert config_lib.causal_clean(cfg)
  cfg.diffusion.shift = False
  with pytest.raises(ValueError, match=r"^config[.]diffusion[.]clean_ar_weight: needs"):
    config_lib.validate(cfg)
  cfg.diffusion.shift, cfg.diffusion.clean_ar_weight = True, -1.0
  with pytest.raises(ValueError, match=r"^config[.]diffusion[.]clean_ar_weight: must be >= 0"):
    config_lib.validate(cfg)
