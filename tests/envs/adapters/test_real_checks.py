"""The real adapters' shared checker (adapters.base), on a fake engine: which
facts a step marks revealed, and how `RealEnv.check` grades a prediction."""

import random
import re

import pytest

from mdlm_wm.data import schema
from mdlm_wm.envs import base
from mdlm_wm.envs.adapters.base import (RealEnv, articled, list_items, mentions, render_state,
                                        same_value)

# Room -> its description; the den's box holds a coin.
_ROOMS = {"hall": "You are in the hall. You see a mat.",
          "den": "You are in the den. You see a lamp and a box."}
_REVEALING = re.compile(r"revealing (.+?)\.")


class HouseEnv(RealEnv):
  """Two rooms; the box in the den reveals a coin when opened."""

  family = "house"
  requires = "nothing"

  @classmethod
  def tasks(cls):
    return ["coin"]

  def split_seeds(self, split):
    return [0]

  def reset(self, seed, steer=None):
    self.room, self.held, self.opened = "hall", "nothing", False
    first = render_state(_ROOMS["hall"], self._facts())
    self.start_record(first)
    return schema.Spec(initial_state=first, task="Find the coin."), first

  def _facts(self):
    score = str(int(self.held != "nothing"))
    return {"location": self.room, "inventory": self.held, "score": score}

  def step(self, action):
    valid = True
    if action in ("go east", "go west"):
      self.room = "den" if action == "go east" else "hall"
      text = _ROOMS[self.room]
    elif action == "open box" and self.room == "den":
      self.opened, text = True, "You open the box, revealing a coin."
    elif action == "take coin" and self.opened:
      self.held, text = "coin", "You take the coin."
    else:
      valid, text = False, "Nothing happens."
    facts = self._facts()
    checks = self.step_checks(action, text, facts, () if valid else (text,))
    return base.StepResult(render_state(text, facts), 0.0, self.held == "coin", checks, valid)

  def names(self):
    return ["mat", "lamp", "box", "coin"]

  @classmethod
  def listing_constraints(cls, spec, step, body, status):
    return {"objects:articles": all(articled(list_items(m.group(1)))
                                    for m in _REVEALING.finditer(body))}

  def expert_action(self):
    return "go east"

  def random_action(self, rng: random.Random):
    return rng.choice(["go east", "go west", "open box", "take coin"])


ACTIONS = ["go east", "go west", "jump", "go east", "open box", "take coin"]


@pytest.fixture(scope="module")
def episode():
  env = HouseEnv("coin")
  spec, state = env.reset(0)
  steps = []
  for action in ACTIONS:
    res = env.step(action)
    steps.append(schema.Step(state, action, res.next_state, checks=res.checks))
    state = res.next_state
  return spec, steps


def test_first_sights_are_revealed_and_the_rest_determined(episode):
  _, steps = episode
  assert [s.checks.revealed for s in steps] == [
      ("box", "lamp", "location"),  # the den, first entered, and its furniture
      (), (),                       # back in the hall; a failed action
      (),                           # the den again: seen before
      ("coin",),                    # the box's contents
      ()]                           # the coin taken: inventory and score follow
  assert steps[4].checks.must_include == ("coin",)
  assert steps[2].checks.must_include == ("Nothing happens.",)
  # A valid trajectory record: every revealed entry names a field or an include.
  ep = schema.Episode(id="house/0", env="house/coin", spec=episode[0], steps=tuple(steps))
  assert schema.episode_from_dict(schema.episode_to_dict(ep)) == ep


def test_the_reference_passes_everything(episode):
  spec, steps = episode
  for step in steps:
    result = HouseEnv.check(spec, step, step.next_state)
    assert result.passed_all and result.score == 1.0, (step.action, result.failures())
    assert HouseEnv.state_check(spec, step, step.next_state) == result.score


def test_a_wrong_revealed_fact_fails_only_pass_all(episode):
  spec, steps = episode
  open_box = steps[4]
  wrong = open_box.next_state.replace("a coin", "a gem")
  result = HouseEnv.check(spec, open_box, wrong)
  assert result.passed and not result.passed_all
  assert result.revealed == {"include:coin": False}
  # A room first seen: another (new) room name and other furniture are fine.
  enter = steps[0]
  other = "You are in the study. You see a desk.\n[location: study | inventory: nothing | score: 0]"
  result = HouseEnv.check(spec, enter, other)
  assert result.passed and not result.passed_all and result.score == 1.0


@pytest.mark.parametrize("index, old, new, failure", [
    (5, "inventory: coin", "inventory: nothing", "determined:field:inventory"),
    (5, "score: 1", "score: 0", "determined:field:score"),
    (1, "location: hall", "location: den", "determined:field:location"),
    (3, "location: den", "location: hall", "determined:field:location"),
    (2, "Nothing happens.", "You jump.", "determined:include:Nothing happens."),
])
def test_a_wrong_determined_fact_fails(episode, index, old, new, failure):
  spec, steps = episode
  step = steps[index]
  result = HouseEnv.check(spec, step, step.next_state.replace(old, new))
  assert not result.passed and result.failures() == [failure]


@pytest.mark.parametrize("index, old, new, failure", [
    # A newly seen room must be new, and named in its description.
    (0, "the den. You see a lamp and a box.\n[location: den",
     "the hall. You see a lamp and a box.\n[location: hall", "constraint:location:new"),
    (0, "You are in the den.", "You are somewhere.", "constraint:location:named"),
    # What the box reveals is a list of noun phrases.
    (4, "revealing a coin", "revealing coin", "constraint:objects:articles"),
])
def test_invented_content_that_breaks_a_constraint_fails(episode, index, old, new, failure):
  spec, steps = episode
  step = steps[index]
  result = HouseEnv.check(spec, step, step.next_state.replace(old, new))
  assert not result.passed and failure in result.failures()


def test_an_unparseable_status_line_fails_format(episode):
  spec, steps = episode
  step = steps[5]
  for bad in ("You take the coin.", step.next_state.replace("[", "("), None):
    result = HouseEnv.check(spec, step, bad)
    assert not result.passed and result.determined["format"] is False and result.score == 0.0
  # A status line without one of the facts is malformed too.
  result = HouseEnv.check(spec, step, "You take the coin.\n[location: den | inventory: coin]")
  assert result.determined["format"] is False and result.determined["field:location"]


def test_helpers():
  assert mentions("You see a key.", "key") and not mentions("a keyboard", "key")
  assert mentions("an apple 1 here", "Apple 1") and not mentions("an apple 10", "apple 1")
  assert not mentions("anything", "")
  assert same_value("knife,  Apple", "apple, knife") and not same_value("apple", "apple, knife")
  assert not same_value(None, "nothing")
  assert list_items("a knife, a fork, and a spoon") == ["a knife", "a fork", "a spoon"]
  assert list_items("a knife and an egg") == ["a knife", "an egg"]
  assert articled(["a knife", "The door", "some water"]) and not articled(["knife"])
