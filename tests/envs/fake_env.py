"""A tiny environment with hidden draws, registered only inside the tests that use it.

Three closed boxes; `open box i` reveals box i's content, drawn lazily from a
stream keyed by (seed, hidden stream, box), so a twin (`fork_hidden`)
re-draws every box not yet opened. The next state ends with
`[opened: N | content: X]`: `opened` is determined (it follows from s_t and
a_t), `content` is revealed on a box's first opening, and a constraint asks
that a revealed content be one of KINDS.
"""

from __future__ import annotations

import random

from mdlm_wm.checks.result import CheckResult, parse_status_line
from mdlm_wm.data.schema import Checks, Spec, Step
from mdlm_wm.envs import base, registry

KINDS = ("apple", "jar", "key", "coin", "pen", "cup")
BOXES = 3


class Boxes(base.Env):
  name = "boxes_fake"
  max_steps = 5
  # Environment checks run so far (the tests count them).
  calls = 0

  def reset(self, seed, steer=None):
    self.seed, self.stream = seed, "world"
    self.contents: dict[int, str] = {}
    self.opened: list[int] = []
    spec = Spec("Three closed boxes. [opened: 0 | content: none]", "Open every box.",
                rules=[f"A box holds one of: {', '.join(KINDS)}."])
    return spec, spec.initial_state

  def _content(self, box: int) -> str:
    if box not in self.contents:
      draw = random.Random(f"{self.name}/{self.seed}/{self.stream}/box{box}")
      self.contents[box] = draw.choice(KINDS)
    return self.contents[box]

  def step(self, action):
    box = int(action.rsplit(" ", 1)[-1])
    first = box not in self.opened
    self.opened += [box] if first else []
    content = self._content(box)
    fields = {"opened": str(len(self.opened)), "content": content}
    return base.StepResult(
        next_state=f"Box {box} holds a {content}. [opened: {fields['opened']} | content: {content}]",
        reward=float(len(self.opened) == BOXES), done=len(self.opened) == BOXES,
        checks=Checks(fields=fields, revealed=("content",) if first else ()), valid=True)

  def expert_action(self):
    return f"open box {len(self.opened)}"

  def random_action(self, rng):
    return f"open box {rng.randrange(BOXES)}"

  def fork_hidden(self, stream):
    self.stream = stream

  @classmethod
  def check(cls, spec: Spec, step: Step, prediction: str) -> CheckResult:
    Boxes.calls += 1
    status = parse_status_line(prediction)
    if status is None:
      return CheckResult({"format": False})
    determined = {"format": True,
                  "field:opened": status.get("opened") == step.checks.fields["opened"]}
    content_ok = status.get("content") == step.checks.fields["content"]
    if not step.checks.is_revealed_field("content"):
      return CheckResult({**determined, "field:content": content_ok})
    return CheckResult(determined, {"field:content": content_ok},
                       {"content_kind": status.get("content") in KINDS})

  @classmethod
  def state_check(cls, spec, step, prediction):
    return cls.check(spec, step, prediction).score


class BoxesWithoutTwin(Boxes):
  """The same world without a twin (Env's default fork_hidden raises)."""
  name = "boxes_fake_without_twin"
  fork_hidden = base.Env.fork_hidden


def register(monkeypatch) -> None:
  """Registers both fake environments for one test (undone after it)."""
  for cls in (Boxes, BoxesWithoutTwin):
    monkeypatch.setitem(registry._REGISTRY, cls.name, cls)


def episode(seed: int = 0, cls: type[Boxes] = Boxes):
  """An expert episode that opens every box once."""
  return base.run_episode(cls(), seed, "expert")[0]
