"""Trailing anchors and state-check scores on real steps of every built-in env."""

import math
import re

import pytest

from mdlm_wm.checks.generic import field_statements, states_field
from mdlm_wm.data.schema import Checks, Spec, Step
from mdlm_wm.envs import base, registry
from mdlm_wm.eval import grounding

# Keys every step states in its trailing anchor, and keys stated only before it.
ANCHOR_KEYS = {
    "calendar": ("total_events", "unread", "sent"),
    "files": ("cwd", "entries", "exit", "goal"),
    "household": ("room", "at", "holding", "state", "open", "visible", "progress"),
    "lab": ("location", "holding", "solid", "liquid", "gas", "reading", "task", "time"),
    "shop": ("open_orders",),
}
EARLY_KEYS = {
    "calendar": ("status", "date", "id", "error"),
    "files": (),
    "household": ("condition",),
    "lab": ("on the stove", "in the oven", "in the freezer", "on the table"),
    "shop": ("status", "order_id", "error", "reason", "name"),
}


def _episodes(name: str, seeds=range(6)):
  env = registry.make(name)
  return [base.run_episode(env, seed, policy)[0] for seed in seeds
          for policy in ("expert", "noisy", "random")]


@pytest.fixture(scope="module")
def episodes():
  return {name: _episodes(name) for name in registry.env_names()}


def test_anchor_tables_cover_every_builtin_env():
  assert sorted(ANCHOR_KEYS) == registry.env_names() == sorted(EARLY_KEYS)


def test_trailing_start_rules():
  assert grounding.trailing_start("out\nmore\n[a: 1]\n") == len("out\nmore\n")
  assert grounding.trailing_start("You look. [room: hall | at: door]") == len("You look. ")
  text = '{"status": 200, "cart_count": 0, "open_orders": 1}'
  assert grounding.trailing_start(text) == math.floor(len(text) * 0.75)


def test_trailing_fields_on_real_steps(episodes):
  for name, eps in episodes.items():
    steps = [s for ep in eps for s in ep.steps]
    found = [grounding.trailing_fields(s) for s in steps]
    assert sum(bool(f) for f in found) >= 0.95 * len(steps), name
    for step, fields in zip(steps, found):
      assert set(fields) <= set(step.checks.fields)
      for key in ANCHOR_KEYS[name]:
        if key in step.checks.fields:
          assert key in fields, (name, key, step.next_state)
      for key in EARLY_KEYS[name]:
        assert key not in fields, (name, key, step.next_state)


def _corrupt_trailing(step: Step) -> tuple[str, str] | None:
  """The reference with one trailing numeric field, stated once, incremented."""
  text = step.next_state
  for key in reversed(grounding.trailing_fields(step)):
    value = step.checks.fields[key]
    starts = field_statements(text, key, value)
    if value.isdigit() and len(starts) == 1:
      match = re.compile(re.escape(value)).search(text, starts[0] + len(key))
      return key, text[:match.start()] + str(int(value) + 1) + text[match.end():]
  return None


def test_grounding_scores_reference_passes_and_corrupted_anchor_fails(episodes):
  for name, eps in episodes.items():
    corrupted = 0
    for ep in eps:
      for step in ep.steps:
        ref = grounding.grounding_scores(name, ep.spec, step, step.next_state)
        assert ref == {"checks": 1.0, "env": 1.0, "well_formed": 1.0, "pass": 1.0, "pass_all": 1.0,
                       "determined_acc": 1.0, "revealed_valid": 1.0, "exact": 1.0,
                       "trailing": 1.0, "trailing_pass": 1.0}, (name, step.next_state)
        bad = _corrupt_trailing(step)
        if bad is None:
          continue
        key, wrong = bad
        out = grounding.grounding_scores(name, ep.spec, step, wrong)
        assert out["trailing"] < 1.0 and out["trailing_pass"] == 0.0
        assert out["pass_all"] == 0.0, (name, key, wrong)
        # A wrong hidden draw fails only pass_all; a wrong determined fact fails pass.
        if not step.checks.is_revealed_field(key):
          assert out["pass"] == 0.0 and out["env"] < 1.0, (name, key, wrong)
        # Every field that is not trailing is still stated.
        early = set(step.checks.fields) - set(grounding.trailing_fields(step))
        assert all(states_field(wrong, k, step.checks.fields[k]) for k in early)
        corrupted += 1
    assert corrupted >= 10, name


def test_grounding_scores_without_trailing_fields_or_registered_env():
  step = Step(state="", action="ping", next_state="status: 200\nok",
              checks=Checks(fields={"status": "200"}))
  out = grounding.grounding_scores("toy", Spec("", ""), step, "status: 200\nok")
  assert "env" not in out
  assert out["pass"] == 1.0
  assert math.isnan(out["trailing"]) and math.isnan(out["trailing_pass"])


def test_steer_effect():
  with_z = [{"pass": 1.0}, {"pass": 1.0}, {"pass": 0.0}, {"pass": 1.0}]
  without_z = [{"pass": 0.0}, {"pass": 1.0}, {"pass": 0.0}, {"pass": 0.0}]
  assert grounding.steer_effect(with_z, without_z) == {
      "with": 0.75, "without": 0.25, "delta": 0.5, "n": 4}
  checks = grounding.steer_effect([{"checks": 0.5}], [{"checks": 1.0}], key="checks")
  assert checks["delta"] == -0.5
  empty = grounding.steer_effect([], [])
  assert empty["n"] == 0 and math.isnan(empty["delta"])
  with pytest.raises(ValueError):
    grounding.steer_effect(with_z, without_z[:2])


def test_pass_rate_by_horizon():
  rows = [(3, 0.0), (1, 1.0), (1, 0.0), (2, 1.0), (3, 1.0), (3, 1.0)]
  out = grounding.pass_rate_by_horizon(rows)
  assert list(out) == [1, 2, 3]
  assert out == {1: 0.5, 2: 1.0, 3: pytest.approx(2 / 3)}
  assert grounding.pass_rate_by_horizon([]) == {}
