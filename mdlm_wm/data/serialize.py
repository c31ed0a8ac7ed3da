"""One transition -> context and target token ids (docs/design.md's sequence layout).

    context = <s0> s0 <task> c <tools> T <rules> R <steer> z
              <history> (<state> s_i <action> a_i)*   (last k pairs, oldest first)
              <state> s_t <action> a_t <target>
    target  = s_{t+1} <eot>   (or its change from s_t: data/delta.py, data.target)

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
<eot>; such an example is counted as `target_cut`, and an example whose
anchors (s0, task, tools, rules, steer) lost any token as `anchors_cut`.

Tool schemas are written one signature line per tool (`tools_format`
"signature", the default): `name(arg: type, opt?: type) description`, where a
type is `str`, `int`, `num`, `bool`, `[T]` for an array, `a|b|c` for an
enum, a string parameter's own description in its place (`date: YYYY-MM-DD`)
and `>=n` / `<=n` bounds appended; `?` marks a parameter not required. About
60% of the JSON schema's tokens (measured on the shop and calendar tools),
with what a world model needs to judge a call. "json" writes `name: description {JSON schema}` (models trained before
the signature line; their configs lack `data.tools_format`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any

from mdlm_wm.data import delta
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
  anchors_cut: int = 0  # examples whose s0, task, tools, rules or steer lost anything
  examples: int = 0  # examples serialized: the denominator of the two above

  def add(self, other: Truncation) -> None:
    for f in dataclasses.fields(self):
      setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

  def as_dict(self) -> dict[str, int]:
    return dataclasses.asdict(self)

  def any_cut(self) -> bool:
    return any(v for k, v in self.as_dict().items() if k != "examples")

  def anchors_whole(self) -> float:
    """The share of examples whose five anchors are whole (1.0 when none were read)."""
    return 1.0 - self.anchors_cut / self.examples if self.examples else 1.0


@dataclasses.dataclass(frozen=True)
class Serialized:
  context_ids: list[int]
  target_ids: list[int]  # includes the trailing <eot> unless the target was cut
  truncation: Truncation
  # [start, end) of the steer's tokens in context_ids: classifier-free
  # guidance hides exactly these (training dropout and the sampler alike).
  steer_span: tuple[int, int] = (0, 0)


# The five global anchors, by the names the flags and configs use, and the
# Spec field each one is.
ANCHORS = {"s0": "initial_state", "task": "task", "tools": "tools", "rules": "rules",
           "steer": "steer"}


def parse_anchors(names: str | Sequence[str], key: str) -> tuple[str, ...]:
  """"tools,rules" -> ("tools", "rules"); an unknown name is a ValueError naming `key`."""
  items = [n.strip() for n in (names.split(",") if isinstance(names, str) else names)]
  items = [n for n in items if n]
  bad = [n for n in items if n not in ANCHORS]
  if bad:
    raise ValueError(f"{key}: unknown anchor(s) {bad}; choose from {sorted(ANCHORS)}")
  return tuple(items)


def ablate(spec: Spec, anchors: Sequence[str]) -> Spec:
  """`spec` with the named anchors emptied: an evaluation-time anchor ablation
  (the model is asked for s_{t+1} without them; checks still read the full
  spec). A Serializer's own `ablate` drops them from every context instead."""
  if not anchors:
    return spec
  return dataclasses.replace(spec, **{ANCHORS[a]: () if a in ("tools", "rules") else ""
                                      for a in anchors})


def transition_at(ep: Episode, k: int, history_len: int) -> Transition:
  """Step k of an episode with up to `history_len` earlier (state, action) pairs."""
  step = ep.steps[k]
  hist = tuple((s.state, s.action) for s in ep.steps[max(0, k - history_len):k])
  return Transition(ep.spec, hist, step.state, step.action, step.next_state)


def transitions(ep: Episode, history_len: int) -> list[Transition]:
  return [transition_at(ep, k, history_len) for k in range(len(ep.steps))]


TOOLS_FORMATS = ("signature", "json")
_TYPE_NAMES = {"string": "str", "integer": "int", "number": "num", "boolean": "bool",
               "object": "obj", "array": "[]"}


def _param_type(schema: Mapping[str, Any]) -> str:
  """A JSON-schema property as a short type: `str`, `[str]`, `a|b`, `int>=1`."""
  if "enum" in schema:
    return "|".join(str(v) for v in schema["enum"])
  kind = schema.get("type", "")
  if kind == "array":
    return f"[{_param_type(schema.get('items', {})) or 'any'}]"
  if kind == "string" and schema.get("description"):
    return str(schema["description"])
  out = _TYPE_NAMES.get(kind, str(kind) or "any")
  for key, op in (("minimum", ">="), ("maximum", "<=")):
    if key in schema:
      out += f"{op}{schema[key]}"
  return out


def check_tools_format(tools_format: str) -> None:
  if tools_format not in TOOLS_FORMATS:
    raise ValueError(f"tools_format: must be one of {TOOLS_FORMATS}, got {tools_format!r}")


def render_tool(tool: Tool, tools_format: str = "signature") -> str:
  """A tool schema as one line (see the module docstring): the model reads every byte."""
  check_tools_format(tools_format)
  if tools_format == "json":
    params = json.dumps(tool.parameters, ensure_ascii=False, sort_keys=True,
                        separators=(",", ":"))
    return f"{tool.name}: {tool.description} {params}".strip()
  props = tool.parameters.get("properties", {}) or {}
  required = list(tool.parameters.get("required", []) or [])
  # Required parameters first, in the schema's required order (a call's natural order).
  names = [n for n in required if n in props] + sorted(n for n in props if n not in required)
  args = ", ".join(f"{n}{'' if n in required else '?'}: {_param_type(props[n])}" for n in names)
  return f"{tool.name}({args}) {tool.description}".strip()


def render_tools(tools: Sequence[Tool], tools_format: str = "signature") -> str:
  return "\n".join(render_tool(t, tools_format) for t in tools)


def render_rules(rules: Sequence[str]) -> str:
  return "\n".join(f"- {r}" for r in rules)


class Serializer:
  """Turns transitions into token ids with a fixed, counted truncation policy."""

  def __init__(self, tokenizer: Tokenizer, max_context_len: int, max_target_len: int,
               history_len: int = 2, tools_format: str = "signature",
               ablate: Sequence[str] = (), target: str = "state"):
    if max_target_len < 2:
      raise ValueError(f"max_target_len must be >= 2, got {max_target_len}")
    if max_context_len < 9:
      raise ValueError(f"max_context_len must be >= 9 (the segment markers), got {max_context_len}")
    self.tok = tokenizer
    self.max_context_len = max_context_len
    self.max_target_len = max_target_len
    self.history_len = history_len
    check_tools_format(tools_format)  # now, not at the first spec with tools
    self.tools_format = tools_format
    # Anchors this model never reads (a training-time ablation, data.ablate).
    self.ablate = parse_anchors(ablate, "data.ablate")
    if target not in delta.TARGETS:
      raise ValueError(f"data.target must be one of {delta.TARGETS}, got {target!r}")
    self.target = target
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
          "tools": self.tok.encode(render_tools(spec.tools, self.tools_format)),
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
    cut = Truncation(examples=1)
    spec_ids = self._spec_ids(tr.spec)
    segs = {k: list(spec_ids[k]) for k in ANCHORS}
    if steer is not None:
      segs["steer"] = self.tok.encode(steer)
    for anchor in self.ablate:  # after the steer override, which must not restore it
      segs[anchor] = []
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
    request_anchors_cut = 0
    for key in ("task", "steer"):
      n = min(max(overflow, 0), len(segs[key]))
      segs[key] = segs[key][:len(segs[key]) - n]
      cut.request_tokens_cut += n
      request_anchors_cut += n
      overflow -= n
    if overflow > 0:
      n = min(overflow, len(action))
      action = action[n:]
      cut.request_tokens_cut += n
      overflow -= n
    cut.context_cut = int(bool(cut.history_pairs_dropped or cut.s0_tokens_cut or cut.tools_tokens_cut
                               or cut.rules_tokens_cut or cut.state_tokens_cut
                               or cut.request_tokens_cut))
    cut.anchors_cut = int(bool(cut.s0_tokens_cut or cut.tools_tokens_cut or cut.rules_tokens_cut
                               or request_anchors_cut))

    context = ([m["s0"]] + segs["s0"] + [m["task"]] + segs["task"] + [m["tools"]]
               + segs["tools"] + [m["rules"]] + segs["rules"] + [m["steer"]])
    steer_span = (len(context), len(context) + len(segs["steer"]))
    context += segs["steer"] + [m["history"]]
    for s, a in history:
      context += [m["state"]] + s + [m["action"]] + a
    context += [m["state"]] + state + [m["action"]] + action + [m["target"]]

    written = (delta.delta_of(tr.next_state, tr.state) if self.target == "delta"
               else tr.next_state)
    target = self.tok.encode(written) + [self.tok.eot_id]
    if len(target) > self.max_target_len:
      cut.target_tokens_cut = len(target) - self.max_target_len
      cut.target_cut = 1
      target = target[:self.max_target_len]
    return Serialized(context, target, cut, steer_span)
