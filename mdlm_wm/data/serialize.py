"""One transition -> context and target token ids (docs/design.md's sequence layout).

    context = <s0> s0 <task> c <tools> T <rules> R <steer> z
              <history> (<state> s_i <action> a_i)*   (last k pairs, oldest first)
              <state> s_t <action> a_t <target>
    target  = s_{t+1} <eot>

Truncation policy, applied in this order until the context fits
`max_context_len`, every cut counted in `Truncation`:
  1. drop the oldest history pair (repeat);
  2. cut the tail of the longest of s0 / tools / rules, down to the length of
     the second longest or by the overflow, whichever is less (repeat), so
     the spec segments shrink evenly from their longest;
  3. cut the head of the current state s_t (its end is the most recent text);
  4. only then the request itself: the tail of the task, then of the steer,
     then the head of the action (`request_tokens_cut`), so one outsized
     example degrades instead of stopping a training run.
A target longer than `max_target_len - 1` keeps its head and loses its
<eot>; such an example is counted as `target_cut`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence

from mdlm_wm.data.schema import Episode, Spec, Tool
from mdlm_wm.data.tokenizer import Tokenizer

SPEC_SEGMENTS = ("s0", "tools", "rules")


@dataclasses.dataclass(frozen=True)
class Transition:
  """What a world model conditions on, and what it must predict."""
  spec: Spec
  history: tuple[tuple[str, str], ...]  # earlier (state, action) pairs, oldest first
  state: str
  action: str
  next_state: str = ""  # empty at inference time


@dataclasses.dataclass
class Truncation:
  """Counts of every cut the truncation policy made."""
  history_pairs_dropped: int = 0
  s0_tokens_cut: int = 0
  tools_tokens_cut: int = 0
  rules_tokens_cut: int = 0
  state_tokens_cut: int = 0
  request_tokens_cut: int = 0
  target_tokens_cut: int = 0
  target_cut: int = 0
  context_cut: int = 0  # examples whose context lost anything

  def add(self, other: Truncation) -> None:
    for f in dataclasses.fields(self):
      setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

  def as_dict(self) -> dict[str, int]:
    return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Serialized:
  context_ids: list[int]
  target_ids: list[int]  # includes the trailing <eot> unless the target was cut
  truncation: Truncation
  # [start, end) of the steer's tokens in context_ids: classifier-free
  # guidance hides exactly these (training dropout and the sampler alike).
  steer_span: tuple[int, int] = (0, 0)


def transition_at(ep: Episode, k: int, history_len: int) -> Transition:
  """Step k of an episode with up to `history_len` earlier (state, action) pairs."""
  step = ep.steps[k]
  hist = tuple((s.state, s.action) for s in ep.steps[max(0, k - history_len):k])
  return Transition(ep.spec, hist, step.state, step.action, step.next_state)


def transitions(ep: Episode, history_len: int) -> list[Transition]:
  return [transition_at(ep, k, history_len) for k in range(len(ep.steps))]


def render_tool(tool: Tool) -> str:
  """A tool schema as one compact line: the model reads every byte of it."""
  params = json.dumps(tool.parameters, ensure_ascii=False, sort_keys=True,
                      separators=(",", ":"))
  return f"{tool.name}: {tool.description} {params}".strip()


def render_tools(tools: Sequence[Tool]) -> str:
  return "\n".join(render_tool(t) for t in tools)


def render_rules(rules: Sequence[str]) -> str:
  return "\n".join(f"- {r}" for r in rules)


class Serializer:
  """Turns transitions into token ids with a fixed, counted truncation policy."""

  def __init__(self, tokenizer: Tokenizer, max_context_len: int, max_target_len: int,
               history_len: int = 2):
    if max_target_len < 2:
      raise ValueError(f"max_target_len must be >= 2, got {max_target_len}")
    if max_context_len < 9:
      raise ValueError(f"max_context_len must be >= 9 (the segment markers), got {max_context_len}")
    self.tok = tokenizer
    self.max_context_len = max_context_len
    self.max_target_len = max_target_len
    self.history_len = history_len
    self._spec_cache: dict[int, dict[str, list[int]]] = {}

  def _spec_ids(self, spec: Spec) -> dict[str, list[int]]:
    # Every step of an episode shares its spec: tokenize it once.
    key = id(spec)
    cached = self._spec_cache.get(key)
    if cached is None or cached["__spec"] is not spec:
      cached = {
          "__spec": spec,
          "s0": self.tok.encode(spec.initial_state),
          "task": self.tok.encode(spec.task),
          "tools": self.tok.encode(render_tools(spec.tools)),
          "rules": self.tok.encode(render_rules(spec.rules)),
          "steer": self.tok.encode(spec.steer),
      }
      if len(self._spec_cache) > 64:
        self._spec_cache.clear()
      self._spec_cache[key] = cached
    return cached

  def serialize(self, tr: Transition, *, steer: str | None = None) -> Serialized:
    """Token ids of `tr`; `steer` overrides spec.steer (e.g. "" to drop it)."""
    m = self.tok.marker_ids
    cut = Truncation()
    spec_ids = self._spec_ids(tr.spec)
    segs = {k: list(spec_ids[k]) for k in ("s0", "task", "tools", "rules", "steer")}
    if steer is not None:
      segs["steer"] = self.tok.encode(steer)
    history = [(self.tok.encode(s), self.tok.encode(a)) for s, a in tr.history[-self.history_len:]
               ] if self.history_len else []
    state = self.tok.encode(tr.state)
    action = self.tok.encode(tr.action)

    def length() -> int:
      # Markers: 5 spec + history + state + action + target = 9, plus 2 per pair.
      return (9 + sum(len(v) for v in segs.values()) + len(state) + len(action)
              + sum(2 + len(s) + len(a) for s, a in history))

    overflow = length() - self.max_context_len
    while overflow > 0 and history:
      s, a = history.pop(0)
      cut.history_pairs_dropped += 1
      overflow -= 2 + len(s) + len(a)
    while overflow > 0:
      longest = max(SPEC_SEGMENTS, key=lambda k: len(segs[k]))
      if not segs[longest]:
        break
      second = max(len(segs[k]) for k in SPEC_SEGMENTS if k != longest)
      n = min(overflow, max(1, len(segs[longest]) - second))
      segs[longest] = segs[longest][:len(segs[longest]) - n]
      setattr(cut, f"{longest}_tokens_cut", getattr(cut, f"{longest}_tokens_cut") + n)
      overflow -= n
    if overflow > 0:
      n = min(overflow, len(state))
      state = state[n:]
      cut.state_tokens_cut += n
      overflow -= n
    for key in ("task", "steer"):
      n = min(max(overflow, 0), len(segs[key]))
      segs[key] = segs[key][:len(segs[key]) - n]
      cut.request_tokens_cut += n
      overflow -= n
    if overflow > 0:
      n = min(overflow, len(action))
      action = action[n:]
      cut.request_tokens_cut += n
      overflow -= n
    cut.context_cut = int(bool(cut.history_pairs_dropped or cut.s0_tokens_cut or cut.tools_tokens_cut
                               or cut.rules_tokens_cut or cut.state_tokens_cut
                               or cut.request_tokens_cut))

    context = ([m["s0"]] + segs["s0"] + [m["task"]] + segs["task"] + [m["tools"]]
               + segs["tools"] + [m["rules"]] + segs["rules"] + [m["steer"]])
    steer_span = (len(context), len(context) + len(segs["steer"]))
    context += segs["steer"] + [m["history"]]
    for s, a in history:
      context += [m["state"]] + s + [m["action"]] + a
    context += [m["state"]] + state + [m["action"]] + action + [m["target"]]

    target = self.tok.encode(tr.next_state) + [self.tok.eot_id]
    if len(target) > self.max_target_len:
      cut.target_tokens_cut = len(target) - self.max_target_len
      cut.target_cut = 1
      target = target[:self.max_target_len]
    return Serialized(context, target, cut, steer_span)
