"""The public API: load a trained world model, predict next states, roll out.

    wm = WorldModel.load("/tmp/mdlm_wm_quickstart/mdlm")
    states = wm.step(spec, history, state, action, steer="the stove is broken",
                     num_samples=4, seed=0)
    # Pin a trailing status line and let the model fill in the rest:
    states = wm.step(spec, [], state, action,
                     fixed=Anchors(suffix="[location: kitchen | holding: nothing]"))

The same class serves MDLM checkpoints (denoising sampler) and AR ones
(KV-cache decoder), so callers compare them through one interface.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from mdlm_wm import config as config_lib
from mdlm_wm.ar import decode as ar_decode
from mdlm_wm.data import delta
from mdlm_wm.data.schema import Spec
from mdlm_wm.data.serialize import Transition
from mdlm_wm.data.tokenizer import Tokenizer
from mdlm_wm.diffusion import block_sampler
from mdlm_wm.diffusion import sampler as mdlm_sampler
from mdlm_wm.model import sharding
from mdlm_wm.train import state as train_state
from mdlm_wm.train.checkpoint import Checkpointer

# Context lengths are padded up to a multiple of this, so a stream of
# requests compiles the sampler a handful of times, not once per length.
CONTEXT_BUCKET = 64


# Whether a next-state text is acceptable (e.g. parses as the environment's state).
Accept = Callable[[str], bool]


class Samples(NamedTuple):
  """What one sampler call saw and drew (host arrays)."""
  context_BC: np.ndarray  # left-padded context ids
  valid_BC: np.ndarray  # real context tokens
  fixed_BT: np.ndarray  # pinned canvas tokens (-1: free)
  tokens_BGT: np.ndarray  # G canvases per context
  # The current state of each context: a delta target (data.target) is
  # written against it. Empty for a model that writes whole states.
  states_B: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Anchors:
  """Text pinned in the next state (anchor infilling).

  `prefix` starts the state, `suffix` ends it, and the state is `length`
  tokens long in total (None: the longest the canvas allows); the model
  fills everything in between. `spans` pins text at token offsets.

  A model that writes deltas (`data.target = "delta"`) samples the change
  from s_t: a suffix that is a status line is pinned as the delta writes it
  (`data.delta.pinned_suffix`), so the state still ends with it; the prefix,
  spans and length are pinned and counted in the canvas's delta text.
  """
  prefix: str = ""
  suffix: str = ""
  length: int | None = None
  spans: tuple[tuple[int, str], ...] = ()


class WorldModel:
  """A trained MDLM or AR world model with its tokenizer and config."""

  def __init__(self, graphdef, params, tokenizer: Tokenizer, cfg: ml_collections.ConfigDict):
    self.graphdef, self.params, self.tokenizer, self.cfg = graphdef, params, tokenizer, cfg
    self.objective = cfg.objective
    self.canvas_len = cfg.data.max_target_len
    self.serializer = config_lib.serializer(cfg, tokenizer)
    self.num_params = config_lib.model_config(cfg, tokenizer.vocab_size).num_params()
    # (block size, shift, causal clean copy) of a block-diffusion MDLM, as
    # trained; None otherwise.
    self.block = ((config_lib.block_size(cfg), bool(cfg.diffusion.shift),
                   config_lib.causal_clean(cfg)) if config_lib.is_block_model(cfg) else None)

  @classmethod
  def load(cls, workdir: str, step: int | None = None, mesh=None) -> WorldModel:
    """Restores the params of the latest (or a given) checkpoint in `workdir`,
    sharded on `mesh` by the checkpoint's rules (default: one device)."""
    directory = os.path.join(workdir, train_state.CHECKPOINT_DIR)
    # Checked first: the checkpoint manager would create the directory.
    if not os.path.isdir(directory):
      raise FileNotFoundError(f"no checkpoint in {directory} (not a training workdir?)")
    ckpt = Checkpointer(directory, save_every=1)
    step = step if step is not None else ckpt.latest_step()
    if step is None:
      raise FileNotFoundError(f"no checkpoint in {directory}")
    meta = ckpt.restore_meta(step)
    cfg = ml_collections.ConfigDict(meta["config"])
    tokenizer = Tokenizer.load(os.path.join(workdir, meta["tokenizer"]))
    model_cfg = config_lib.model_config(cfg, tokenizer.vocab_size)
    mesh = mesh if mesh is not None else sharding.make_mesh((1, 1, 1), jax.devices()[:1])
    graphdef, params = train_state.create_model(model_cfg, mesh, sharding.rules_dict(cfg.mesh.rules),
                                            cfg.seed)
    tx, _ = train_state.make_optimizer(cfg)
    with jax.set_mesh(mesh):
      abstract = jax.eval_shape(lambda p: train_state.init_train_state(p, tx), params)
    abstract = jax.tree.map(
        lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s), abstract,
        _shardings_like(abstract, params, mesh))
    state, _ = ckpt.restore(step, abstract)
    ckpt.close()
    return cls(graphdef, state["params"], tokenizer, cfg)

  # ------------------------------------------------------------------ encoding

  def encode_contexts(self, transitions: Sequence[Transition],
                      steers: Sequence[str | None] | None = None):
    """Left-padded contexts [B, C], their valid mask and the mask without the steer."""
    steers = steers or [None] * len(transitions)
    serialized = [self.serializer.serialize(tr, steer=z) for tr, z in zip(transitions, steers)]
    longest = max(len(s.context_ids) for s in serialized)
    C = -(-longest // CONTEXT_BUCKET) * CONTEXT_BUCKET
    context = np.zeros((len(serialized), C), np.int32)
    valid = np.zeros((len(serialized), C), bool)
    uncond = np.zeros((len(serialized), C), bool)
    for b, s in enumerate(serialized):
      ids = s.context_ids
      context[b, C - len(ids):] = ids
      valid[b, C - len(ids):] = True
      steer = np.zeros(len(ids), bool)
      steer[slice(*s.steer_span)] = True
      uncond[b, C - len(ids):] = ~steer
    return context, valid, uncond

  def fixed_canvas(self, anchors: Sequence[Anchors | None],
                   states: Sequence[str] | None = None) -> np.ndarray:
    """[B, T] pins: -1 free, else a token id (anchors and the <eot> after them).
    `states`: each canvas's s_t, where a model that writes deltas pins a
    status-line suffix as its delta (`Anchors`); without them, as given."""
    T, tok = self.canvas_len, self.tokenizer
    if states is not None and config_lib.target(self.cfg) == "delta":
      anchors = [a if a is None else dataclasses.replace(a, suffix=delta.pinned_suffix(a.suffix, s))
                 for a, s in zip(anchors, states, strict=True)]
    fixed = np.full((len(anchors), T), -1, np.int32)
    for b, a in enumerate(anchors):
      if a is None:
        continue
      prefix, suffix = tok.encode(a.prefix), tok.encode(a.suffix)
      length = a.length if a.length is not None else T - 1
      if not len(prefix) + len(suffix) <= length <= T - 1:
        raise ValueError(f"anchors need {len(prefix) + len(suffix)} tokens and length "
                         f"{length}; the canvas holds {T - 1} tokens before its <eot>")
      fixed[b, :len(prefix)] = prefix
      fixed[b, length - len(suffix):length] = suffix
      fixed[b, length:] = tok.eot_id
      for offset, text in a.spans:
        ids = tok.encode(text)
        if offset < 0 or offset + len(ids) > length:
          raise ValueError(f"span {text!r} at offset {offset} does not fit in {length} tokens")
        fixed[b, offset:offset + len(ids)] = ids
    return fixed

  def _text(self, tokens_T: np.ndarray, fixed_T: np.ndarray) -> str:
    """Text of a canvas: up to the first <eot>, or, with a pinned <eot>, up to it
    with any <eot> the model put before it dropped (an anchor must survive)."""
    eot = self.tokenizer.eot_id
    pinned = np.flatnonzero(fixed_T == eot)
    if pinned.size:
      return self.tokenizer.decode(t for t in tokens_T[:pinned[0]] if t != eot)
    return self.tokenizer.decode_target(tokens_T)

  # ------------------------------------------------------------------ generation

  @property
  def format_retries(self) -> int:
    """How many times `redraw` draws a rejected sample again by default
    (`sample.format_retries`; 0 for configs from before the key)."""
    return self.cfg.sample.get("format_retries", 0)

  def decode_config(self, **sample_overrides
                    ) -> (mdlm_sampler.SamplerConfig | block_sampler.BlockSamplerConfig
                          | ar_decode.DecodeConfig):
    """The model's `cfg.sample` with `sample_overrides` applied, validated
    against this model's canvas (ValueError naming the bad setting). The AR
    decoder takes only temperature and top_p; it ignores the MDLM settings."""
    return config_lib.sampler_config(self.cfg, eot_id=self.tokenizer.eot_id, **sample_overrides)

  def sample_tokens(self, transitions: Sequence[Transition], *, num_samples: int = 1,
                    seed: int | Sequence[int] = 0, steers: Sequence[str | None] | None = None,
                    anchors: Sequence[Anchors | None] | None = None, params=None,
                    **sample_overrides) -> Samples:
    """Token canvases of `num_samples` next states per transition (one jitted call).

    `seed` is one seed for the call, or one per transition: then transition
    b's samples depend only on seeds[b] (not on the rest of the batch), so a
    batch of environments matches stepping each alone. `params` replaces the
    loaded params for this call (GRPO samples from the policy it is training).
    """
    context, valid, uncond = self.encode_contexts(transitions, steers)
    anchors = anchors or [None] * len(transitions)
    fixed = self.fixed_canvas(anchors, [tr.state for tr in transitions])
    rng = _keys(seed, len(transitions))
    params = self.params if params is None else params
    cfg = self.decode_config(**sample_overrides)
    if self.objective == "ar":
      tokens = ar_decode.decode(self.graphdef, params, context, valid, rng, cfg,
                                num_samples=num_samples, fixed_BT=fixed)
    elif isinstance(cfg, block_sampler.BlockSamplerConfig):
      tokens = block_sampler.sample(self.graphdef, params, context, valid, fixed, rng, cfg,
                                    num_samples=num_samples, mask_id=self.tokenizer.mask_id,
                                    eot_id=self.tokenizer.eot_id, uncond_valid_BC=uncond)[0]
    else:
      tokens = mdlm_sampler.sample(self.graphdef, params, context, valid, fixed, rng, cfg,
                                   num_samples=num_samples, mask_id=self.tokenizer.mask_id,
                                   uncond_valid_BC=uncond).tokens_BGT
    states = (tuple(tr.state for tr in transitions)
              if config_lib.target(self.cfg) == "delta" else ())
    return Samples(context, valid, fixed, np.asarray(jax.device_get(tokens)), states)

  def texts(self, samples: Samples) -> list[list[str]]:
    """The next-state text of every canvas in `samples`: [B][G] (a delta
    target written back as the state it describes)."""
    B, G, _ = samples.tokens_BGT.shape
    out = [[self._text(samples.tokens_BGT[b, g], samples.fixed_BT[b]) for g in range(G)]
           for b in range(B)]
    if samples.states_B:
      out = [[delta.apply_delta(text, state) for text in row]
             for row, state in zip(out, samples.states_B, strict=True)]
    return out

  def generate(self, transitions: Sequence[Transition], *, num_samples: int = 1,
               seed: int | Sequence[int] = 0,
               steers: Sequence[str | None] | None = None,
               anchors: Sequence[Anchors | None] | None = None,
               accept: Sequence[Accept | None] | None = None, retries: int | None = None,
               retry_temperature: float | None = None, **sample_overrides
               ) -> list[list[str]]:
    """`num_samples` next states for each transition (one jitted call; `seed`
    as in `sample_tokens`). With `accept`, samples it rejects are drawn
    again (`redraw`)."""
    texts = self.texts(self.sample_tokens(transitions, num_samples=num_samples, seed=seed,
                                          steers=steers, anchors=anchors, **sample_overrides))
    if accept is None:
      return texts
    return self.redraw(transitions, texts, accept, seed=seed, steers=steers, anchors=anchors,
                       retries=retries, retry_temperature=retry_temperature,
                       **sample_overrides)[0]

  def redraw(self, transitions: Sequence[Transition], texts: list[list[str]],
             accept: Sequence[Accept | None], *, seed: int | Sequence[int] = 0,
             steers: Sequence[str | None] | None = None,
             anchors: Sequence[Anchors | None] | None = None, retries: int | None = None,
             retry_temperature: float | None = None,
             **sample_overrides) -> tuple[list[list[str]], np.ndarray]:
    """Draws again every sample of `texts` [B][G] that its transition's
    `accept` predicate rejects (None: accept anything), up to `retries` more
    times (default: `sample.format_retries`). The predicate is typically the
    environment's parser (`envs.score.well_formed`), so a world model hands
    on states that parse. A greedy call's retries sample at
    `retry_temperature` (default: `sample.retry_temperature`; greedy would
    repeat itself); a sampled call's keep its temperature. A sample
    rejected every time keeps its first draw, the model's own best guess.
    Each redraw has its own seed, made from the transition's seed (or, with
    one seed for the call, from it and the transition's index), the sample
    index and the retry: with one seed per transition, batching changes
    nothing. Not for GRPO: an accepted redraw is not a sample of the
    policy's distribution.

    Returns the texts and draws_BG, the draws each sample took (1: the
    first was accepted; a sample whose every draw was rejected shows
    retries + 1, as one accepted at the last retry does: `accept` tells
    them apart)."""
    retries = self.format_retries if retries is None else retries
    if retries < 0:
      raise ValueError(f"retries: must be >= 0, got {retries}")
    texts = [list(row) for row in texts]
    per_transition = np.ndim(seed) != 0
    redraw_seed = lambda b, g, r: _hash_seed(
        (seed[b], g, r) if per_transition else (seed, b, g, r))
    steers = steers or [None] * len(transitions)
    anchors = anchors or [None] * len(transitions)
    draws = np.ones((len(texts), len(texts[0]) if texts else 0), np.int32)
    settings = self.decode_config(**sample_overrides)
    if retry_temperature is None:
      retry_temperature = self.cfg.sample.get("retry_temperature", 0.7)
    temperature = settings.temperature or retry_temperature
    rejected = lambda b, text: accept[b] is not None and not accept[b](text)
    pending = [(b, g) for b, row in enumerate(texts) for g, text in enumerate(row)
               if rejected(b, text)]
    for r in range(1, retries + 1):
      if not pending:
        break
      # Padded, so a shrinking pending list compiles the sampler a few times.
      rows = padded_to_power_of_two(pending)
      new = self.generate(
          [transitions[b] for b, _ in rows], seed=[redraw_seed(b, g, r) for b, g in rows],
          steers=[steers[b] for b, _ in rows], anchors=[anchors[b] for b, _ in rows],
          **{**sample_overrides, "temperature": temperature})[:len(pending)]
      still = []
      for (b, g), (text,) in zip(pending, new, strict=True):
        draws[b, g] = r + 1
        if rejected(b, text):
          still.append((b, g))
        else:
          texts[b][g] = text
      pending = still
    return texts, draws

  def step(self, spec: Spec, history: Sequence[tuple[str, str]], state: str, action: str, *,
           steer: str | None = None, fixed: Anchors | None = None, num_samples: int = 1,
           seed: int = 0, **sample_overrides) -> list[str]:
    """Predicts the next state; `steer` overrides spec.steer ("" removes it)."""
    tr = Transition(spec, tuple(history), state, action)
    return self.generate([tr], num_samples=num_samples, seed=seed, steers=[steer],
                         anchors=[fixed], **sample_overrides)[0]

  def rollout(self, spec: Spec, actions: Sequence[str], *, state: str | None = None,
              steer: str | None = None, num_samples: int = 1, seed: int = 0,
              accept: Accept | None = None, retries: int | None = None,
              **sample_overrides) -> list[list[str]]:
    """Open-loop rollouts: each sample feeds on its own predictions. With
    `accept` (one check for the spec's environment), each step redraws the
    states it rejects, as `generate` does.

    Returns, per sample, the predicted states after each action.
    """
    states = [state if state is not None else spec.initial_state] * num_samples
    histories: list[list[tuple[str, str]]] = [[] for _ in range(num_samples)]
    out: list[list[str]] = [[] for _ in range(num_samples)]
    for k, action in enumerate(actions):
      trs = [Transition(spec, tuple(h), s, action) for h, s in zip(histories, states)]
      preds = self.generate(trs, num_samples=1, seed=seed * 100_003 + k,
                            steers=[steer] * num_samples,
                            accept=None if accept is None else [accept] * num_samples,
                            retries=retries, **sample_overrides)
      for g in range(num_samples):
        histories[g].append((states[g], action))
        states[g] = preds[g][0]
        out[g].append(states[g])
    return out


def padded_to_power_of_two(items: list) -> list:
  """`items` with its first repeated up to the next power of two: batches of
  these lengths compile a sampler for a handful of shapes, not for each."""
  return items + items[:1] * ((1 << (len(items) - 1).bit_length()) - len(items))


def _hash_seed(parts: Sequence[int]) -> int:
  """A 31-bit seed mixed from `parts` (any ints)."""
  return int(np.random.SeedSequence([p % 2**32 for p in parts]).generate_state(1)[0] >> 1)


def _keys(seed: int | Sequence[int], batch: int) -> jax.Array:
  """One key for the call, or a [batch] key array for one seed per transition."""
  if np.ndim(seed) == 0:
    return jax.random.key(seed)
  if len(seed) != batch:
    raise ValueError(f"got {len(seed)} seeds for {batch} transitions; pass one int or one "
                     "seed per transition")
  return jnp.stack([jax.random.key(s) for s in seed])


def _shardings_like(abstract_state, params, mesh):
  """Shardings for a restored train state: params as created, the rest replicated."""
  repl = sharding.replicated(mesh)
  param_sh = jax.tree.map(lambda x: x.sharding, params)
  out = jax.tree.map(lambda _: repl, abstract_state)
  out["params"] = param_sh
  return out
