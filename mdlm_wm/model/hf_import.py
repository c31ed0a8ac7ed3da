"""Imports Llama / Qwen2 / Qwen3 checkpoints in Hugging Face layout into the backbone.

A local directory with `config.json` and `model.safetensors` (or shards listed
in `model.safetensors.index.json`); no network, no torch. Names map as

  model.embed_tokens.weight [V, D]                 -> embed.embedding
  model.layers.i.input_layernorm.weight            -> blocks.i.attn_norm.scale
  model.layers.i.self_attn.{q,k,v,o}_proj.weight   -> blocks.i.attn.{q,k,v,o}.kernel (transposed)
  model.layers.i.self_attn.{q,k,v}_proj.bias       -> blocks.i.attn.{q,k,v}.bias (Qwen2)
  model.layers.i.self_attn.{q,k}_norm.weight       -> blocks.i.attn.{q,k}_norm.scale (Qwen3)
  model.layers.i.post_attention_layernorm.weight   -> blocks.i.mlp_norm.scale
  model.layers.i.mlp.{gate,up,down}_proj.weight    -> blocks.i.mlp.{gate,up,down}.kernel (transp.)
  model.norm.weight                                -> final_norm.scale
  lm_head.weight [V, D]                            -> unembed.kernel (transposed; unless tied)

RoPE needs no permutation: HF layout rotates the pairs (x_i, x_{i + D/2})
("rotate_half"), exactly as `transformer.rope` does, with the same
frequencies. (Meta's original consolidated checkpoints rotate interleaved
pairs; HF's conversion script already permuted q/k into this layout, and
only HF layout is read here.)

Anything the backbone cannot express raises ValueError naming it: another
architecture, RoPE scaling (e.g. Llama 3.1's "llama3"), sliding-window
attention, biases on o_proj or the MLP, an activation other than SiLU, and
any checkpoint tensor that would be left unused.

Vocabulary. The world model's data pipeline needs the project's own
SentencePiece tokenizer (pad, [MASK], <eot> and one marker per segment at
reserved ids); an HF tokenizer has none of them. `import_hf` keeps the HF
vocabulary (to check the import against the reference implementation, or for
a pipeline that brings its own tokenizer); `adapt_vocab` explicitly replaces
the embedding (and the untied output layer) for a project tokenizer: `reinit`
draws them fresh, `match` copies the rows of pieces whose text equals an HF
token's text and gives every other row the mean HF row.

Writing the result as a workdir is the training layer's job
(`train/hf_workdir.py`, behind `launch.import_hf`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
from collections.abc import Mapping

import jax
import numpy as np
from safetensors import safe_open

from mdlm_wm.model import sharding
from mdlm_wm.model.transformer import ModelConfig, abstract_model

SUPPORTED = ("llama", "qwen2", "qwen3")
EMBEDDING_MODES = ("reinit", "match")
_INIT_STD = 0.02  # the backbone's embedding init (transformer.Transformer)

_BLOCK = {
    ("attn_norm", "scale"): "input_layernorm.weight",
    ("mlp_norm", "scale"): "post_attention_layernorm.weight",
    ("attn", "q_norm", "scale"): "self_attn.q_norm.weight",
    ("attn", "k_norm", "scale"): "self_attn.k_norm.weight",
    **{("attn", p, "kernel"): f"self_attn.{p}_proj.weight" for p in "qkvo"},
    **{("attn", p, "bias"): f"self_attn.{p}_proj.bias" for p in "qkv"},
    **{("mlp", p, "kernel"): f"mlp.{p}_proj.weight" for p in ("gate", "up", "down")},
}
_TOP = {("embed", "embedding"): "model.embed_tokens.weight",
        ("final_norm", "scale"): "model.norm.weight",
        ("unembed", "kernel"): "lm_head.weight"}


def read_config(hf_dir: str) -> dict:
  with open(os.path.join(hf_dir, "config.json"), encoding="utf-8") as f:
    return json.load(f)


def _unsupported(what: str) -> ValueError:
  return ValueError(f"unsupported by the mdlm-wm backbone: {what}")


def model_config_from_hf(hf: Mapping, *, attention: str = "causal", dtype: str = "float32",
                         remat: str = "none") -> ModelConfig:
  """The backbone's config for an HF `config.json` dict (raises on what it cannot express)."""
  kind = hf.get("model_type")
  if kind not in SUPPORTED:
    raise _unsupported(f"model_type {kind!r} (supported: {SUPPORTED})")
  if hf.get("hidden_act", "silu") != "silu":
    raise _unsupported(f"hidden_act {hf['hidden_act']!r} (the MLP is SwiGLU with SiLU)")
  rope = dict(hf.get("rope_parameters") or {})  # transformers >= 5
  theta = hf.get("rope_theta", rope.get("rope_theta", 10_000.0))
  scaling = hf.get("rope_scaling") or (rope if rope.get("rope_type", "default") != "default"
                                       else None)
  if scaling and scaling.get("rope_type", scaling.get("type", "default")) != "default":
    raise _unsupported(f"RoPE scaling {scaling} (only plain RoPE)")
  if hf.get("use_sliding_window"):
    raise _unsupported("sliding-window attention (use_sliding_window)")
  if hf.get("mlp_bias"):
    raise _unsupported("MLP biases (mlp_bias)")
  # Qwen2 always has q/k/v biases; elsewhere attention_bias also puts one on o_proj.
  if hf.get("attention_bias") and kind != "qwen2":
    raise _unsupported("attention_bias (an o_proj bias; the backbone has q/k/v biases only)")
  d, heads = hf["hidden_size"], hf["num_attention_heads"]
  head_dim = hf.get("head_dim") or d // heads
  return ModelConfig(
      vocab_size=hf["vocab_size"], d_model=d, n_layers=hf["num_hidden_layers"], n_heads=heads,
      n_kv_heads=hf.get("num_key_value_heads") or heads, d_ff=hf["intermediate_size"],
      attention=attention, tie_embeddings=bool(hf.get("tie_word_embeddings", False)),
      rope_base=float(theta), dtype=dtype, remat=remat,
      d_head=0 if head_dim * heads == d else head_dim, norm_eps=float(hf["rms_norm_eps"]),
      qkv_bias=kind == "qwen2", qk_norm=kind == "qwen3")


def hf_name(path: tuple) -> str:
  """The HF tensor name of a backbone param path, e.g. ("blocks", 0, "attn", "q", "kernel")."""
  if path[0] == "blocks":
    return f"model.layers.{path[1]}.{_BLOCK[tuple(path[2:])]}"
  return _TOP[tuple(path)]


def tensor_files(hf_dir: str) -> dict[str, str]:
  """HF tensor name -> the safetensors file holding it."""
  index = os.path.join(hf_dir, "model.safetensors.index.json")
  if os.path.exists(index):
    with open(index, encoding="utf-8") as f:
      return {k: os.path.join(hf_dir, v) for k, v in json.load(f)["weight_map"].items()}
  single = os.path.join(hf_dir, "model.safetensors")
  if not os.path.exists(single):
    raise FileNotFoundError(f"{hf_dir}: no model.safetensors or model.safetensors.index.json "
                            "(PyTorch .bin checkpoints: re-save with safe_serialization=True)")
  with safe_open(single, framework="np") as f:
    return {k: single for k in f.keys()}


def _paths(tree, prefix=()):
  """(path, leaf) pairs of a nested dict of params."""
  if isinstance(tree, Mapping):
    for k, v in tree.items():
      yield from _paths(v, prefix + (k,))
  else:
    yield prefix, tree


def _set(tree: dict, path: tuple, value) -> None:
  for k in path[:-1]:
    tree = tree.setdefault(k, {})
  tree[path[-1]] = value


def import_hf(hf_dir: str, *, mesh: jax.sharding.Mesh | None = None, rules=None,
              attention: str = "causal", dtype: str = "float32", remat: str = "none"):
  """Loads an HF checkpoint: returns (ModelConfig, graphdef, params) with the HF vocabulary.

  Params are float32 (as the backbone keeps them), each placed with its
  sharding on `mesh` (default: one device) as soon as it is read, so host
  memory holds one tensor at a time.
  """
  hf = read_config(hf_dir)
  model_cfg = model_config_from_hf(hf, attention=attention, dtype=dtype, remat=remat)
  mesh = mesh if mesh is not None else sharding.make_mesh((1, 1, 1), jax.devices()[:1])
  rules = sharding.rules_dict(rules if rules is not None else sharding.DEFAULT_RULES)
  graphdef, abstract = abstract_model(model_cfg, mesh, rules)
  files = tensor_files(hf_dir)
  used, params = set(), {}
  with contextlib.ExitStack() as stack:
    handles = {p: stack.enter_context(safe_open(p, framework="np")) for p in set(files.values())}
    for path, like in _paths(abstract):
      name = hf_name(path)
      if name not in files:
        raise ValueError(f"{hf_dir}: tensor {name} (for {'.'.join(map(str, path))}) is missing")
      x = handles[files[name]].get_tensor(name).astype(np.float32)
      x = x.T if path[-1] == "kernel" else x
      if x.shape != like.shape:
        raise ValueError(f"{hf_dir}: {name} has shape {x.shape}, the backbone expects "
                         f"{like.shape} (after transposing Linear weights)")
      _set(params, path, jax.device_put(x, like.sharding))
      used.add(name)
  # A tied checkpoint may still store lm_head (a copy of the embedding).
  unused = sorted(set(files) - used - ({"lm_head.weight"} if model_cfg.tie_embeddings else set()))
  if unused:
    raise _unsupported(f"checkpoint tensors with no place in the backbone: {unused[:8]}"
                       f"{' ...' if len(unused) > 8 else ''}")
  return model_cfg, graphdef, params


# ------------------------------------------------------------------ vocabulary


def _byte_level_chars() -> dict[str, int]:
  """GPT-2 byte-level BPE's printable stand-in character -> the byte it encodes."""
  printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
               *range(ord("®"), ord("ÿ") + 1)]
  chars, extra = {}, 0
  for b in range(256):
    if b in printable:
      chars[chr(b)] = b
    else:
      chars[chr(256 + extra)] = b
      extra += 1
  return chars


def hf_token_texts(hf_dir: str) -> dict[str, int]:
  """Text -> id of the regular tokens of `tokenizer.json` (byte-level BPE or
  SentencePiece-style "▁" pieces); added/special tokens and partial UTF-8 left out."""
  path = os.path.join(hf_dir, "tokenizer.json")
  if not os.path.exists(path):
    raise FileNotFoundError(f"{path}: needed to match embeddings by token text")
  with open(path, encoding="utf-8") as f:
    tok = json.load(f)
  vocab = tok["model"]["vocab"]
  items = vocab.items() if isinstance(vocab, dict) else ((p, i) for i, (p, _) in enumerate(vocab))
  special = {t["id"] for t in tok.get("added_tokens", [])}
  byte_level = "ByteLevel" in json.dumps(tok.get("decoder"))
  chars = _byte_level_chars()
  out = {}
  for piece, i in items:
    if i in special:
      continue
    if byte_level:
      try:
        text = bytes(chars[c] for c in piece).decode("utf-8")
      except (KeyError, UnicodeDecodeError):
        continue
    else:
      text = piece.replace("\u2581", " ")
    out.setdefault(text, i)
  return out


def _project_text(tokenizer, i: int) -> str | None:
  """The text of a project piece; None for special and byte-fallback pieces."""
  if i in tokenizer.special_ids:
    return None
  piece = tokenizer.id_to_piece(i)
  if piece.startswith("<0x") and piece.endswith(">"):
    return None
  return piece.replace("\u2581", " ")


def adapt_vocab(model_cfg: ModelConfig, params: dict, tokenizer, mode: str, *,
                hf_dir: str = "", seed: int = 0) -> tuple[ModelConfig, dict, int]:
  """Replaces the HF vocabulary with the project tokenizer's; returns
  (model config, params, rows copied from HF).

  `reinit`: every embedding (and untied output) row drawn from N(0, 0.02^2);
  `match`: rows of project pieces whose text is an HF token's text are copied
  from that token, every other row (special tokens included) is the mean HF row.
  """
  if mode not in EMBEDDING_MODES:
    raise ValueError(f"embeddings must be one of {EMBEDDING_MODES}, got {mode!r}")
  V = tokenizer.vocab_size
  rng = np.random.default_rng(seed)
  source = {}  # project id -> HF id
  if mode == "match":
    texts = hf_token_texts(hf_dir)
    for i in range(V):
      text = _project_text(tokenizer, i)
      if text and text in texts:
        source[i] = texts[text]

  def rows(table_VD):
    table = np.asarray(jax.device_get(table_VD), np.float32)
    if mode == "reinit":
      return (rng.standard_normal((V, table.shape[1])) * _INIT_STD).astype(np.float32)
    out = np.broadcast_to(table.mean(axis=0), (V, table.shape[1])).copy()
    ids = np.fromiter(source, int, len(source))
    out[ids] = table[np.fromiter(source.values(), int, len(source))]
    return out

  params = dict(params)
  emb = params["embed"]["embedding"]
  params["embed"] = {"embedding": jax.device_put(rows(emb), emb.sharding)}
  if not model_cfg.tie_embeddings:
    kernel = params["unembed"]["kernel"]
    params["unembed"] = {"kernel": jax.device_put(rows(kernel.T).T, kernel.sharding)}
  return dataclasses.replace(model_cfg, vocab_size=V), params, len(source)
