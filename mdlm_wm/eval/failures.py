"""Failure modes of a world model on steered and adversarial transitions, each
kind defined by a check (the seed paper's failure analysis, made mechanical).

Transition sets (built-in environments, rebuilt from `meta.seed` and the steer):
  steered      steps of steered episodes where the steer decides a determined
               fact that this step changes: both the same world without its
               steer (given the same actions) and the copy of s_t get it
               wrong (a "steer fact": the thermometer's offset reading, a 503
               on the flaky first checkout, a 409 on an item the
               out-of-stock steer emptied). A fact the steer fixed earlier and
               s_t already shows (`lights: off`) is read from s_t, not from z,
               so it is not one.
  tool_error   steps whose real reply is an error (`"status": >= 400` in the
               JSON environments, shop and calendar): a tool that fails, stock
               that ran out, an unknown id.
  unknown_tool probes made from test episodes of the tool environments: at one
               step the action is replaced by a call to a tool that is not in
               the spec's schemas; the real reply is the environment's
               unknown-tool error (422; calendar may answer 400).
  intent_change probes made from test episodes of the environments with a
               user (shop, calendar): at one step the user changes intent
               (`Env.change_of_intent`: cancel another pending order, delete
               another event), the spec's task gains the new request and the
               action serves it; the real reply is the world's. Its "intent
               facts" are the determined facts that both the reply to the
               original action there and the copy of s_t get wrong.

Failure kinds of one prediction (`kinds`), not exclusive except `format`:
  format             it does not parse as the environment's state (`format`
                     fact): the other kinds are not read.
  determined         a determined fact other than a steer or intent fact is wrong.
  rule               a constraint on invented (revealed) content is violated.
  steer_ignored      a steer fact is wrong (steered set only).
  intent_ignored     an intent fact is wrong (intent_change set only): the
                     reply is not the one to the user's new request.
  hallucinated_tool  the reply's `status` is not the unknown-tool error
                     (unknown_tool set only): it answered a tool that does not exist.
Each kind is tallied per set as the fraction of transitions with a 95%
bootstrap interval (a kind that cannot occur in a set is left out).

Steerability (`steer_effect`): on the steered set, the fraction of steer facts
right with z and with z removed from the prompt, and their paired difference.
On the intent_change set, `intent_facts`: the fraction of intent facts right
(over its transitions that have any).
"""

from __future__ import annotations

import dataclasses
import json
import random
import re
from collections.abc import Callable, Sequence

import numpy as np

from mdlm_wm.checks.result import FORMAT, CheckResult
from mdlm_wm.data import schema
from mdlm_wm.data.serialize import transitions
from mdlm_wm.envs import registry
from mdlm_wm.envs.score import check_prediction
from mdlm_wm.eval import baselines, stats
from mdlm_wm.eval import evaluate as ev

SETS = ("steered", "tool_error", "unknown_tool", "intent_change")
KINDS = ("format", "determined", "rule", "steer_ignored", "intent_ignored", "hallucinated_tool")
STATUS = "field:status"
# Tools no built-in environment has, for the unknown-tool probes.
_ABSENT_TOOLS = ("apply_coupon", "track_shipment", "share_calendar", "send_sms", "export_data")
_STATUS_RE = re.compile(r'^\{"status":\s*(\d+)')


@dataclasses.dataclass(frozen=True)
class Case:
  """One transition of a set, with what its kinds need to know."""
  example: ev.Example
  steer_facts: frozenset[str] = frozenset()  # determined facts the steer decides
  intent_facts: frozenset[str] = frozenset()  # ... the user's new request decides
  unknown_tool: bool = False


def status(text: str) -> int | None:
  """The leading `"status": N` of a JSON reply, else None."""
  found = _STATUS_RE.match(text.strip())
  return int(found.group(1)) if found else None


def _replay(episode: schema.Episode, steer: str):
  """A fresh copy of the episode's world (with `steer`) and its reset."""
  env = registry.make(episode.env)
  env.reset(int(episode.meta["seed"]), steer=steer)
  return env


def _wrong(episode: schema.Episode, step: schema.Step, text: str) -> set[str]:
  """The determined facts of `step` (besides `format`) that `text` gets wrong."""
  return {k for k, ok in check_prediction(episode.env, episode.spec, step, text)
          .determined.items() if not ok and k != FORMAT}


def steer_facts(episode: schema.Episode) -> list[frozenset[str]]:
  """Per step: the determined facts that both the same world without its
  steer (given the same actions) and the copy of s_t get wrong (empty for
  an unsteered episode)."""
  if not episode.spec.steer:
    return [frozenset()] * len(episode.steps)
  plain = _replay(episode, "")
  return [frozenset(_wrong(episode, step, plain.step(step.action).next_state)
                    & _wrong(episode, step, step.state)) for step in episode.steps]


def _replayed(episode: schema.Episode, index: int):
  """The episode's world (with its steer) after its first `index` actions."""
  env = _replay(episode, episode.spec.steer)
  for step in episode.steps[:index]:
    env.step(step.action)
  return env


def _probe(episode: schema.Episode, index: int, env, actions: Sequence[str], name: str,
           spec: schema.Spec | None = None) -> schema.Episode:
  """The episode cut after step `index`, whose actions from there are
  `actions`; their steps are `env`'s (the world after the first `index`
  actions) replies."""
  steps, state = list(episode.steps[:index]), episode.steps[index].state
  for action in actions:
    res = env.step(action)
    steps.append(schema.Step(state=state, action=action, next_state=res.next_state,
                             reward=float(res.reward), done=bool(res.done), checks=res.checks))
    state = res.next_state
  return dataclasses.replace(episode, id=f"{episode.id}/{name}-{index}",
                             spec=spec or episode.spec, steps=tuple(steps))


def unknown_tool_probe(episode: schema.Episode, index: int) -> schema.Episode:
  """The episode cut after step `index`, whose action there calls a tool that
  is not in its spec; the last step is the real world's reply to it."""
  names = {t.name for t in episode.spec.tools}
  rng = random.Random(f"{episode.id}/{index}")
  tool = rng.choice([t for t in _ABSENT_TOOLS if t not in names])
  action = f"{tool}({json.dumps({'id': f'X{rng.randrange(100, 1000)}'})})"
  return _probe(episode, index, _replayed(episode, index), [action], "unknown-tool")


def intent_probe(episode: schema.Episode, index: int) -> schema.Episode | None:
  """The episode cut after step `index`, where the user changes intent: the
  task gains the user's new request (`Env.change_of_intent`) and the actions
  from there serve it; their steps are the real world's replies. None when
  the environment has no change of intent to offer there."""
  env = _replayed(episode, index)
  change = env.change_of_intent(random.Random(f"{episode.id}/intent/{index}"))
  if change is None:
    return None
  request, actions = change
  spec = dataclasses.replace(episode.spec, task=f"{episode.spec.task} {request}")
  return _probe(episode, index, env, actions, "intent", spec)


def intent_facts(original: schema.Episode, probe: schema.Episode) -> frozenset[str]:
  """The determined facts of an `intent_probe`'s last step that both the
  reply to the original action there (the user who kept their intent) and
  the copy of s_t get wrong."""
  step = probe.steps[-1]
  kept = original.steps[min(len(probe.steps), len(original.steps)) - 1].next_state
  return frozenset(_wrong(probe, step, kept) & _wrong(probe, step, step.state))


def set_names(names: Sequence[str] = ()) -> tuple[str, ...]:
  """`names` checked against SETS, in their order (empty: all of them)."""
  unknown = sorted(set(names) - set(SETS))
  if unknown:
    raise ValueError(f"unknown sets {unknown}; known: {list(SETS)}")
  return tuple(dict.fromkeys(names)) or SETS


def build_sets(episodes: Sequence[schema.Episode], history_len: int, *,
               max_per_set: int = 0, seed: int = 0,
               names: Sequence[str] = ()) -> dict[str, list[Case]]:
  """The sets `names` (default: all four) of the module docstring from
  `episodes` (built-in environments with `meta.seed`; others are skipped),
  each interleaved over environments and cut to `max_per_set` (0: all). One
  unknown-tool probe per tool-environment episode and one intent-change
  probe per episode of an environment with a user, each at a step drawn
  from `seed`. Only the sets asked for are built (their replays cost)."""
  sets: dict[str, list[Case]] = {name: [] for name in set_names(names)}
  for ep in episodes:
    if not registry.is_known(ep.env) or "/" in ep.env or "seed" not in ep.meta:
      continue
    trs = transitions(ep, history_len)
    facts = steer_facts(ep) if "steered" in sets else [frozenset()] * len(trs)
    for k, (step_facts, tr) in enumerate(zip(facts, trs)):
      example = ev.Example(ep, k, tr)
      if step_facts:
        sets["steered"].append(Case(example, step_facts))
      code = status(ep.steps[k].next_state)
      if "tool_error" in sets and code is not None and code >= 400:
        sets["tool_error"].append(Case(example))
    if not (ep.spec.tools and ep.steps):
      continue
    if "unknown_tool" in sets:
      k = random.Random(f"{seed}/{ep.id}").randrange(len(ep.steps))
      probe = unknown_tool_probe(ep, k)
      sets["unknown_tool"].append(
          Case(ev.Example(probe, k, transitions(probe, history_len)[k]), unknown_tool=True))
    if "intent_change" in sets:
      k = random.Random(f"{seed}/{ep.id}/intent").randrange(len(ep.steps))
      probe = intent_probe(ep, k)
      if probe is not None:
        last = len(probe.steps) - 1
        sets["intent_change"].append(Case(ev.Example(probe, last, transitions(
            probe, history_len)[last]), intent_facts=intent_facts(ep, probe)))
  for cases in sets.values():
    cases[:] = ev.round_robin_by_env(cases, env=lambda c: c.example.episode.env)
    if max_per_set:
      del cases[max_per_set:]
  return sets


def check(case: Case, prediction: str) -> CheckResult:
  """Every check of the case's step on one prediction (both checkers, once)."""
  ex = case.example
  return check_prediction(ex.episode.env, ex.episode.spec, ex.step, prediction)


def kinds(case: Case, result: CheckResult) -> dict[str, float]:
  """The failure kinds of one prediction's `check` result (1.0: this kind of
  failure; module docstring)."""
  out = {"format": float(result.determined.get(FORMAT) is False)}
  if out["format"]:
    return out  # nothing else of an unparseable state can be read
  wrong = {k for k, ok in result.determined.items() if not ok}
  out["determined"] = float(bool(wrong - case.steer_facts - case.intent_facts - {FORMAT}))
  out["rule"] = float(not all(result.constraints.values()))
  if case.steer_facts:
    out["steer_ignored"] = float(bool(wrong & case.steer_facts))
  if case.intent_facts:
    out["intent_ignored"] = float(bool(wrong & case.intent_facts))
  if case.unknown_tool:
    out["hallucinated_tool"] = float(STATUS in wrong)
  return out


def fact_acc(facts: frozenset[str], result: CheckResult) -> float:
  """Fraction of `facts` (a case's steer or intent facts) a prediction's
  `check` result gets right."""
  return float(np.mean([bool(result.determined.get(k)) for k in sorted(facts)]))


def _ci(values: Sequence[float]) -> dict:
  return dict(zip(("mean", "low", "high"), stats.bootstrap_ci(values)), n=len(values))


def tally(cases: Sequence[Case], results: Sequence[CheckResult]) -> dict:
  """Per kind: {"mean", "low", "high", "n"} over the set's transitions, plus
  `any`: the fraction with at least one failure of any kind."""
  rows = [kinds(c, r) for c, r in zip(cases, results, strict=True)]
  for row in rows:
    row["any"] = float(any(row.values()))
  present = [k for k in (*KINDS, "any") if any(k in r for r in rows)]
  return {"transitions": len(rows), **stats.summarize(rows, present)}


def steer_effect(cases: Sequence[Case], with_z: Sequence[CheckResult],
                 without_z: Sequence[CheckResult]) -> dict:
  """Steer-fact accuracy with z and without it (`check` results of the same
  cases), and the paired difference."""
  a = [fact_acc(c.steer_facts, r) for c, r in zip(cases, with_z, strict=True)]
  b = [fact_acc(c.steer_facts, r) for c, r in zip(cases, without_z, strict=True)]
  return {"with": _ci(a), "without": _ci(b), "diff": _ci([x - y for x, y in zip(a, b)])}


Predict = Callable[[Sequence[ev.Example], Sequence[str | None]], list[str]]


def run(sets: dict[str, list[Case]], predict: Predict, *, steer_removed: bool = True) -> dict:
  """The report: a tally per set, the share of intent facts right on the
  intent_change set and, when `steer_removed`, the steer effect.

  `predict(examples, steers)` returns one next state per example; a steer
  None keeps the spec's, "" removes it.
  """
  report: dict = {"sets": {}}
  predictions: dict[str, list[str]] = {}
  results: dict[str, list[CheckResult]] = {}
  for name, cases in sets.items():
    if not cases:
      continue
    predictions[name] = predict([c.example for c in cases], [None] * len(cases))
    results[name] = [check(c, p) for c, p in zip(cases, predictions[name], strict=True)]
    report["sets"][name] = tally(cases, results[name])
  if sets.get("intent_change"):
    report["intent_facts"] = _ci([fact_acc(c.intent_facts, r) for c, r in zip(
        sets["intent_change"], results["intent_change"], strict=True) if c.intent_facts])
  steered = sets.get("steered", [])
  if steer_removed and steered:
    without = predict([c.example for c in steered], [""] * len(steered))
    report["steer_effect"] = steer_effect(steered, results["steered"],
                                          [check(c, p) for c, p in zip(steered, without)])
  report["predictions"] = predictions
  return report


def baseline_predict(kind: str) -> Predict:
  """Baseline `kind` (`copy`: the floor, `twin`: the ceiling; eval/baselines.py)
  as a `Predict`. Neither reads the steer; every set's transition is a
  built-in one with a twin world, so none is skipped."""
  def predict(examples: Sequence[ev.Example], steers: Sequence[str | None]) -> list[str]:
    del steers
    out, skipped = baselines.predictions(kind, [(ex.episode, ex.index) for ex in examples])
    if skipped:
      raise ValueError(f"the {kind} baseline skipped transitions: {skipped}")
    return out
  return predict


def format_report(report: dict) -> str:
  """Markdown: one row per set, a column per kind (mean [95% CI]), then the
  intent facts right and the steer effect."""
  cell = lambda s: f"{s['mean']:.3f} [{s['low']:.3f}, {s['high']:.3f}]" if s else "-"
  head = ["set", "transitions", *KINDS, "any"]
  lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
  for name, t in report["sets"].items():
    lines.append("| " + " | ".join([name, str(t["transitions"])]
                                   + [cell(t.get(k)) for k in (*KINDS, "any")]) + " |")
  lines.append("(kinds after format: fractions of the predictions that parse)")
  intent = report.get("intent_facts")
  if intent:
    lines.append(f"\nintent facts right (every prediction, parseable or not): "
                 f"{cell(intent)} (n {intent['n']})")
  effect = report.get("steer_effect")
  if effect:
    lines.append(f"\nsteer facts right: with z {cell(effect['with'])}, z removed "
                 f"{cell(effect['without'])}, difference {cell(effect['diff'])} "
                 f"(n {effect['diff']['n']})")
  return "\n".join(lines)

