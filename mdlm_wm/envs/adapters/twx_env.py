"""TextWorld-Express (TWX) behind the real-environment protocol.

Tasks are TWX's games (cookingworld, twc, coin, mapreader, arithmetic,
sorting, simonsays, peckingorder), played with the generation parameters in
`GAME_PARAMS` (engine defaults elsewhere): the defaults of cookingworld and
coin (11 rooms behind doors) give gold paths of up to ~100 steps, too long
for a world-model corpus.

Splits are TWX's own game folds: `split_seeds("train")` is the engine's train
fold (seeds 0-999), "valid" its dev fold (10000-10999), "test" its test fold
(20000-20999); `reset(seed)` plays that seed in the fold that owns it, so the
held-out object and recipe sets of the dev/test folds stay held out.

Each state is the engine's observation and a status line of facts read from
the engine: the room (from its `look` text, where the game has rooms), the
inventory (item names without articles, sorted) where the game has one, and
the score in raw points. Rewards are the deltas of those points, so they sum
to the final score; `info["success"]` is the engine's task success. An
action is valid when the engine lists it among the valid actions (a listed
move through a closed door is valid, and answered that the door is closed);
anything else gets the engine's own "Unknown action" reply.

The expert replays the engine's gold path. TWX's own `generateGoldPath`
draws its navigation from an unseeded random walk (coin, twc, mapreader
differ from run to run), so the adapter runs the same gold agents of the
engine with `scala.util.Random(seed)`, as TWX's cookingworld generator does:
the same seed always gives the same path. A non-expert action that changed
the world and can be undone (a move, opening or closing, putting an item
somewhere, taking one from where the episode had put it) pushes its inverse,
which the expert plays first; other deviations (eating, cooking, cutting)
are not repaired, so a noisy episode can end unsolved, as with a real agent.

Revealed facts (adapters.base): the names of the things the engine's valid
actions refer to that an observation mentions for the first time (a room's
furniture, a container's contents), and a room that nothing shown so far
names (TWX names the room behind a door when the door is opened, "revealing
the pantry", and through open doorways). A newly seen room must be new and
described as "You are in the <room>."; what a container or supporter holds
("The fridge contains a tomato and an egg.", "a counter that has a knife on
it") must be noun phrases or "nothing".
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping
from typing import Any

from mdlm_wm.data.schema import Spec, Step
from mdlm_wm.envs import base
from mdlm_wm.envs.adapters.base import RealEnv, articled, check_split, list_items, render_state

try:
  from textworld_express import TextWorldExpressEnv as _Engine
  from textworld_express.constants import GAME_NAMES
except ImportError as e:  # the adapters package turns this into an install hint
  raise ImportError("textworld_express needs the textworld-express package") from e

# Engine generation parameters per game ("" = TWX defaults); see the docstring.
GAME_PARAMS = {
    "cookingworld": "numLocations=3,numIngredients=2,numDistractorItems=5,includeDoors=1",
    "coin": "numLocations=5,numDistractorItems=3,includeDoors=1",
}
# Game -> the engine's gold agent class (textworldexpress.goldagent.*) and
# how many games it may draw before giving up (TWX's generators use 50).
_GOLD_AGENTS = {
    "cookingworld": "CookingWorldGoldAgent", "twc": "TWCGoldAgent", "coin": "CoinGoldAgent",
    "mapreader": "MapReaderGoldAgent", "arithmetic": "ArithmeticGoldAgent",
    "sorting": "SortingGoldAgent", "simonsays": "SimonSaysGoldAgent",
    "peckingorder": "PeckingOrderGoldAgent",
}
_GOLD_ATTEMPTS = 50
# Split -> TWX game fold.
_FOLDS = {"train": "train", "valid": "dev", "test": "test"}
_NOTES = {
    "cookingworld": "Read the cookbook for the recipe; gather its ingredients, prepare them as it "
                    "says (slice, dice or chop with a knife; cook with the named appliance), "
                    "then prepare the meal and eat it.",
    "twc": "Put every misplaced object in the place where it usually belongs.",
    "coin": "Explore the rooms (doors must be opened) until you find the coin, then take it.",
    "mapreader": "Read the map, take the coin from the named room and put it in the box.",
    "arithmetic": "Read the math problem, then put the item whose quantity equals the answer "
                  "in the box.",
    "sorting": "Put the objects in the box one at a time, smallest quantity first.",
    "simonsays": "Type exactly the action Simon says, and nothing else.",
    "peckingorder": "Read the instructions book and do what it says, repeatedly, until done.",
}
_OPPOSITE = {"north": "south", "south": "north", "east": "west", "west": "east"}
# Commands the engine does not know: the noisy policy's failed actions.
_BOGUS = ("fly to the moon", "take the unicorn", "open the sky", "xyzzy")
# Engine step limit: above any max_steps, so episodes end on our limit.
_ENGINE_STEP_LIMIT = 10_000
_ARTICLE = re.compile(r"^(?:a|an|the|some)\s+", re.IGNORECASE)
_ROOM = re.compile(r"You are in the ([^.]+)\.")
# The objects of an action: "put red apple in fridge" -> "red apple", "fridge".
_OBJECT_SEP = re.compile(r" (?:in|on|with|into) ")
_CONTENTS = re.compile(r"(?:contains|that has) (.+?)(?: on it| in it)?\.")


def _inventory(text: str) -> str | None:
  """Item names from the engine's inventory text (None: the game has none)."""
  lines = [line.strip() for line in text.strip().splitlines()]
  if not lines:
    return None
  # The first line is a header ("Inventory (maximum capacity is 5 items):").
  items = sorted(_ARTICLE.sub("", line) for line in lines[1:]
                 if line and "inventory is currently empty" not in line.lower())
  return ", ".join(items) if items else "nothing"


def _points(score: float) -> str:
  return str(int(score)) if float(score).is_integer() else f"{score:g}"


def _inverse(action: str, placed: dict[str, str]) -> str | None:
  """The command that undoes `action`, for the reversible ones; `placed` maps
  items to where this episode last put them (a take from there is undone by
  putting the item back)."""
  verb, _, rest = action.partition(" ")
  if verb == "move" and rest in _OPPOSITE:
    return f"move {_OPPOSITE[rest]}"
  if verb == "open":
    return f"close {rest}"
  if verb == "close":
    return f"open {rest}"
  if verb == "put" and " in " in rest:
    return f"take {rest.split(' in ', 1)[0]}"
  if verb == "take" and rest in placed:
    return f"put {rest} in {placed[rest]}"
  return None


class TextWorldExpressEnv(RealEnv):
  """One TWX game (`textworld_express/<game>`); the engine is a JVM started on first use."""

  family = "textworld_express"
  requires = "textworld-express"
  max_steps = 50
  room_form = _ROOM

  def __init__(self, task: str):
    super().__init__(task)
    self._engine: Any = None
    self._folds: dict[str, list[int]] = {}
    self._infos: dict[str, Any] = {}

  @classmethod
  def tasks(cls) -> list[str]:
    return sorted(GAME_NAMES)

  def _start(self) -> Any:
    if self._engine is None:
      self._engine = _Engine(envStepLimit=_ENGINE_STEP_LIMIT)
      self._engine.load(self.task, GAME_PARAMS.get(self.task, ""))
      self._folds = {"train": self._engine.getValidSeedsTrain(),
                     "valid": self._engine.getValidSeedsDev(),
                     "test": self._engine.getValidSeedsTest()}
    return self._engine

  def split_seeds(self, split: str) -> list[int]:
    check_split(split)
    self._start()
    return list(self._folds[split])

  def _fold(self, seed: int) -> str:
    for split, seeds in self._folds.items():
      if seed in seeds:
        return _FOLDS[split]
    ranges = ", ".join(f"{s}: {v[0]}-{v[-1]}" for s, v in self._folds.items())
    raise ValueError(f"seed {seed} is in no TWX game fold ({ranges})")

  def reset(self, seed: int, steer: str | None = None) -> tuple[Spec, str]:
    steer = self.resolve_steer(seed, steer)
    engine = self._start()
    fold = self._fold(seed)
    # Before the live game: drawing the gold agent's copy can disturb the
    # current game of some generators (sorting).
    self._gold = self._gold_path(seed, fold)
    obs, infos = engine.reset(seed=seed, gameFold=fold, generateGoldPath=False)
    self._infos = infos
    self._gold_index = 0
    self._undo: list[str] = []
    self._placed: dict[str, str] = {}
    first = render_state(obs, self._facts())
    self.start_record(first)
    verbs = sorted({a.split(" ", 1)[0] for a in infos["validActions"]})
    rules = (f"Commands are free text; verbs here: {', '.join(verbs)}.",
             _NOTES[self.task],
             "An unknown or impossible command changes nothing.",
             f"The status line gives {', '.join(self._facts())} (points so far).")
    return Spec(initial_state=first, task=infos["taskDescription"], tools=(), rules=rules,
                steer=steer), first

  def _gold_path(self, seed: int, fold: str) -> list[str]:
    """The engine's gold agent on a fresh copy of the game, with a seeded walk."""
    jvm = self._engine._gateway.jvm
    generator = self._engine.server.gameGenerator()
    agent = getattr(jvm.textworldexpress.goldagent, _GOLD_AGENTS[self.task])
    # One stream across attempts, as TWX's generators do.
    walk = jvm.scala.util.Random(seed)
    for _ in range(_GOLD_ATTEMPTS):
      found = agent(generator.mkGame(seed, fold)).mkGoldPath(walk)
      if found._1:
        return list(found._2)
    raise RuntimeError(f"TWX found no gold path for {self.name} seed {seed}")

  def _facts(self) -> dict[str, str]:
    facts = {}
    room = _ROOM.match(self._infos.get("look", "").strip())
    if room:
      facts["location"] = room.group(1)
    inventory = _inventory(self._infos.get("inventory", ""))
    if inventory is not None:
      facts["inventory"] = inventory
    facts["score"] = _points(self._infos["scoreRaw"])
    return facts

  def _world(self) -> tuple[str, str, float]:
    # What a world-changing action changes: the room view, inventory, score.
    return self._infos.get("look"), self._infos.get("inventory"), self._infos["scoreRaw"]

  def step(self, action: str) -> base.StepResult:
    expected = self.expert_action()
    valid = action in self._infos["validActions"]
    before, score = self._world(), self._infos["scoreRaw"]
    obs, _, _, infos = self._engine.step(action)
    self._infos = infos
    if action == expected:
      if self._undo:
        self._undo.pop()
      else:
        self._gold_index += 1
    elif self._world() != before and (undo := _inverse(action, self._placed)):
      self._undo.append(undo)
    if action.startswith("put ") and " in " in action and self._world() != before:
      item, place = action[4:].split(" in ", 1)
      self._placed[item] = place
    facts = self._facts()
    success = bool(infos["tasksuccess"])
    message = obs.strip()
    checks = self.step_checks(action, message, facts,
                              () if valid else tuple(message.splitlines()[:1]))
    return base.StepResult(render_state(obs, facts), float(infos["scoreRaw"] - score),
                           success or bool(infos["taskfailure"]), checks, valid,
                           {"success": success, "score": infos["scoreRaw"]})

  def names(self) -> set[str]:
    """The things the valid actions refer to (not doors or directions)."""
    out = set()
    for action in self._infos["validActions"]:
      for name in _OBJECT_SEP.split(action.partition(" ")[2]):
        if name and name not in _OPPOSITE and not name.startswith("door to "):
          out.add(name)
    return out

  @classmethod
  def listing_constraints(cls, spec: Spec, step: Step, body: str,
                          status: Mapping[str, str]) -> dict[str, bool]:
    """What containers and supporters hold is a list of noun phrases, or nothing."""
    lists = [m.group(1) for m in _CONTENTS.finditer(body)]
    return {"objects:articles": all(x == "nothing" or articled(list_items(x)) for x in lists)}

  def admissible_actions(self) -> list[str]:
    return sorted(self._infos["validActions"])

  def expert_action(self) -> str:
    if self._undo:
      return self._undo[-1]
    if self._gold_index < len(self._gold):
      return self._gold[self._gold_index]
    return "look around"

  def random_action(self, rng: random.Random) -> str:
    return rng.choice(self.admissible_actions())

  def invalid_action(self, rng: random.Random) -> str:
    return rng.choice(_BOGUS)

  def close(self) -> None:
    if self._engine is not None:
      engine, self._engine = self._engine, None
      engine.close()
      # TWX's __del__ closes the engine again, and py4j logs that second shutdown
      # of a closed gateway with a traceback: once is enough.
      engine.close = lambda: None
