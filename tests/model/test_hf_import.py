"""HF checkpoints import exactly: tiny random Llama / Qwen2 / Qwen3 models written
with transformers, imported, and compared with the reference forward pass."""

import dataclasses
import json

import jax.numpy as jnp
import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from mdlm_wm.model import hf_import  # noqa: E402  (after the skips)

# float32 on both sides; measured max |diff| <= 5e-7 on logits of magnitude ~1.
LOGITS_ATOL = 1e-5
SHAPES = dict(vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)


def _write(tmp_path, config_cls, model_cls, **extra):
  torch.manual_seed(0)
  cfg = config_cls(**SHAPES, **extra)
  model = model_cls(cfg).eval()
  # Random init leaves norms at 1 and biases at 0, which would hide a wrong
  # mapping of those tensors: perturb every parameter.
  with torch.no_grad():
    for p in model.parameters():
      p.add_(0.05 * torch.randn_like(p))
  model.save_pretrained(tmp_path, safe_serialization=True)
  return model


def _max_logit_diff(model, hf_dir, L=24):
  tokens = np.random.default_rng(0).integers(0, SHAPES["vocab_size"], (2, L))
  with torch.no_grad():
    ref = model(torch.tensor(tokens)).logits.numpy()
  model_cfg, graphdef, params = hf_import.import_hf(str(hf_dir))
  from flax import nnx
  ours = nnx.merge(graphdef, params)(jnp.asarray(tokens, jnp.int32))
  return model_cfg, float(np.max(np.abs(np.asarray(ours) - ref))), float(np.max(np.abs(ref)))


CASES = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", dict(rope_theta=500_000.0, rms_norm_eps=1e-5)),
    "llama_tied": ("LlamaConfig", "LlamaForCausalLM", dict(tie_word_embeddings=True)),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", dict(rms_norm_eps=1e-6)),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", dict(head_dim=16)),  # 4 x 16 != hidden 32
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_causal_logits_match_the_reference(tmp_path, case):
  config_name, model_name, extra = CASES[case]
  model = _write(tmp_path, getattr(transformers, config_name), getattr(transformers, model_name),
                 **extra)
  model_cfg, diff, scale = _max_logit_diff(model, tmp_path)
  assert model_cfg.attention == "causal"
  assert diff < LOGITS_ATOL, f"{case}: max |logit diff| {diff:.2e} (logits up to {scale:.2f})"
  assert scale > 0.1  # the comparison is not between near-zero logits
  n_ref = sum(p.numel() for n, p in model.named_parameters())
  assert model_cfg.num_params() == n_ref
  if case == "qwen3":
    assert model_cfg.head_dim == 16 and model_cfg.qk_norm
  if case == "qwen2":
    assert model_cfg.qkv_bias
  if case == "llama":
    assert model_cfg.rope_base == 500_000.0 and model_cfg.norm_eps == 1e-5


def test_sharded_checkpoint_imports(tmp_path):
  model = _write(tmp_path, transformers.LlamaConfig, transformers.LlamaForCausalLM)
  model.save_pretrained(tmp_path / "sharded", safe_serialization=True, max_shard_size="20KB")
  assert (tmp_path / "sharded" / "model.safetensors.index.json").exists()
  _, diff, _ = _max_logit_diff(model, tmp_path / "sharded")
  assert diff < LOGITS_ATOL


def _config(**overrides):
  base = dict(model_type="llama", hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
              num_hidden_layers=2, intermediate_size=64, vocab_size=96, rms_norm_eps=1e-6)
  return {**base, **overrides}


@pytest.mark.parametrize("overrides, feature", [
    (dict(model_type="gemma"), "model_type 'gemma'"),
    (dict(rope_scaling={"rope_type": "llama3", "factor": 8.0}), "RoPE scaling"),
    (dict(rope_parameters={"rope_type": "yarn", "rope_theta": 1e4}), "RoPE scaling"),
    (dict(attention_bias=True), "attention_bias"),
    (dict(mlp_bias=True), "mlp_bias"),
    (dict(hidden_act="gelu"), "hidden_act"),
    (dict(model_type="qwen2", use_sliding_window=True), "sliding-window"),
])
def test_unsupported_features_are_named(overrides, feature):
  with pytest.raises(ValueError, match=f"unsupported by the mdlm-wm backbone: .*{feature}"):
    hf_import.model_config_from_hf(_config(**overrides))


def test_unused_tensors_are_an_error(tmp_path):
  model = _write(tmp_path, transformers.LlamaConfig, transformers.LlamaForCausalLM,
                 attention_bias=True)
  del model
  config = json.loads((tmp_path / "config.json").read_text())
  config["attention_bias"] = False  # a config that hides the o_proj bias in the weights
  (tmp_path / "config.json").write_text(json.dumps(config))
  with pytest.raises(ValueError, match="o_proj.bias"):
    hf_import.import_hf(str(tmp_path))


class _Pieces:
  """A stand-in project tokenizer: pieces by id, ids 0-1 special."""
  special_ids = frozenset({0, 1})

  def __init__(self, pieces):
    self.pieces = pieces
    self.vocab_size = len(pieces)

  def id_to_piece(self, i):
    return self.pieces[i]


def test_match_copies_rows_of_equal_text_and_means_the_rest(tmp_path):
  # Byte-level BPE (Llama 3 / Qwen): "Ġ" stands for a space.
  vocab = {"a": 0, "Ġthe": 1, "Ċ": 2, "<|endoftext|>": 3}
  (tmp_path / "tokenizer.json").write_text(json.dumps({
      "model": {"type": "BPE", "vocab": vocab}, "decoder": {"type": "ByteLevel"},
      "added_tokens": [{"id": 3, "content": "<|endoftext|>"}]}))
  model_cfg = hf_import.model_config_from_hf(_config(vocab_size=4, tie_word_embeddings=True))
  table = np.arange(4 * 32, dtype=np.float32).reshape(4, 32)
  params = {"embed": {"embedding": jnp.asarray(table)}}
  pieces = ["<pad>", "<|mask|>", "\u2581the", "\n", "a", "<0x41>", "zz"]
  new_cfg, new, matched = hf_import.adapt_vocab(model_cfg, params, _Pieces(pieces), "match",
                                                hf_dir=str(tmp_path))
  emb = np.asarray(new["embed"]["embedding"])
  assert new_cfg.vocab_size == 7 and emb.shape == (7, 32) and matched == 3
  np.testing.assert_array_equal(emb[2], table[1])  # " the"
  np.testing.assert_array_equal(emb[3], table[2])  # "\n"
  np.testing.assert_array_equal(emb[4], table[0])  # "a"
  for i in (0, 1, 5, 6):  # specials, byte fallback, unknown text
    np.testing.assert_allclose(emb[i], table.mean(axis=0))
  _, fresh, n = hf_import.adapt_vocab(model_cfg, params, _Pieces(pieces), "reinit")
  assert n == 0 and 0.01 < float(np.std(np.asarray(fresh["embed"]["embedding"]))) < 0.03


@pytest.mark.slow
def test_workdir_loads_and_starts_a_fine_tune(tmp_path, tiny_corpus):
  """launch.import_hf's workdir: WorldModel.load opens it, and train() with
  train.init_from starts from its params (not from a fresh init)."""
  from tests.conftest import tiny_config
  from mdlm_wm.data.tokenizer import Tokenizer
  from mdlm_wm.train import checkpoint, hf_workdir
  from mdlm_wm.train.trainer import train
  from mdlm_wm.world_model import WorldModel
  hf_dir, out = tmp_path / "hf", str(tmp_path / "import")
  _write(hf_dir, transformers.LlamaConfig, transformers.LlamaForCausalLM)
  tokenizer = Tokenizer.load(f"{tiny_corpus}/tokenizer.model")
  r = hf_workdir.import_to_workdir(str(hf_dir), out, tiny_config(tiny_corpus), tokenizer, "reinit")
  assert r["model"].vocab_size == tokenizer.vocab_size and r["model"].attention == "bidirectional"
  _, _, hf_params = hf_import.import_hf(str(hf_dir))
  q_hf = np.asarray(hf_params["blocks"][1]["attn"]["q"]["kernel"])
  wm = WorldModel.load(out)
  np.testing.assert_array_equal(np.asarray(wm.params["blocks"][1]["attn"]["q"]["kernel"]), q_hf)

  overrides = {f"model.{k}": getattr(r["model"], k) for k in hf_workdir.MODEL_KEYS}
  cfg = tiny_config(tiny_corpus, **overrides, **{
      "train.init_from": out, "data.tokenizer": f"{out}/tokenizer.model", "train.steps": 1,
      "optim.warmup_steps": 0, "optim.lr": 1e-7, "train.eval_batches": 0})
  train(cfg, str(tmp_path / "ft"))
  tuned = WorldModel.load(str(tmp_path / "ft"))
  np.testing.assert_allclose(np.asarray(tuned.params["blocks"][1]["attn"]["q"]["kernel"]), q_hf,
                             atol=1e-5)

  other = dataclasses.replace(r["model"], d_ff=128)
  with pytest.raises(ValueError, match=r"--config.model.d_ff=64"):
    checkpoint.init_params_from(f"{out}/checkpoints", other, None)
