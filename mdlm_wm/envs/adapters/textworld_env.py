"""TextWorld behind the real-environment protocol: games made locally with tw-make's challenges.

Tasks and their fixed difficulty settings (`TASKS`):
  simple           tw-simple: dense rewards, detailed goal (test split: the
                   challenge's test distribution of foods)
  cooking          tw-cooking: 2-ingredient recipe, both to find, 6 rooms,
                   containers to open, ingredients to cook and cut (the
                   challenge's own train / valid / test food splits follow
                   ours)
  treasure_hunter  tw-treasure_hunter level 15: 10 rooms, closed doors and
                   containers, a 6-step quest
  coin_collector   tw-coin_collector level 105: a 5-room path to the coin
                   plus 5 distractor rooms along it

Each task has `GAMES_PER_TASK` games, seeds 0-99, split by
`adapters.base.seed_ranges`: train 0-79, valid 80-89, test 90-99. A game is
generated on first use from its seed alone (the same seed gives the same
game on any machine) and cached under `$MDLM_WM_TEXTWORLD_CACHE` or
~/.cache/mdlm_wm/textworld, per TextWorld version and settings. It is
compiled in a private temporary folder and moved into place, the game file
last, so concurrent builders never read half a game.

A state is the engine's text (the prompt and the interpreter's status bar
stripped) and a status line from the game's facts: the room, the inventory
(sorted item names) and the score in points. TextWorld's score is
cumulative; rewards are its deltas. An action is valid when it is among
TextWorld's admissible commands; the parser answers anything else itself
("You can't see any such thing."). The expert plays TextWorld's winning
policy from the current state, so it replans after a detour.

Revealed facts (adapters.base): the game's entity names (objects, containers,
supporters, doors) an observation mentions for the first time, and the room
entered for the first time (TextWorld never names a room before it is
entered). A newly seen room must be new and named by the description's
header, `-= Room =-`; the items a container reveals on opening ("You open
the chest, revealing a key and an apple.") must be noun phrases.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import re
import shutil
import tempfile
import warnings
from collections.abc import Iterator, Mapping
from typing import Any

from mdlm_wm.data.schema import Spec, Step
from mdlm_wm.envs import base
from mdlm_wm.envs.adapters.base import (RealEnv, articled, check_split, list_items, render_state,
                                        seed_ranges)

try:
  import textworld
  import textworld.challenges
  from textworld.generator import compile_game
except ImportError as e:  # the adapters package turns this into an install hint
  raise ImportError("textworld needs the textworld package") from e

CACHE_ENV = "MDLM_WM_TEXTWORLD_CACHE"
GAMES_PER_TASK = 100
# Task -> (tw-make challenge, settings); split-dependent settings in _settings.
TASKS: Mapping[str, tuple[str, Mapping[str, Any]]] = {
    "simple": ("tw-simple", {"rewards": "dense", "goal": "detailed"}),
    "cooking": ("tw-cooking", {"recipe": 2, "take": 2, "go": 6, "open": True, "cook": True,
                               "cut": True, "drop": False, "recipe_seed": 0}),
    "treasure_hunter": ("tw-treasure_hunter", {"level": 15}),
    "coin_collector": ("tw-coin_collector", {"level": 105}),
}
_NOTES = {
    "simple": "Follow the task's instructions in order; each step done earns a point.",
    "cooking": "Read the cookbook in the kitchen; gather the ingredients, cut them with a knife "
               "and cook them as the recipe says (stove fries, oven roasts, BBQ grills), then "
               "prepare the meal and eat it.",
    "treasure_hunter": "Find the object the task names and take it; doors and containers may "
                       "need opening or unlocking with a key you carry.",
    "coin_collector": "Walk to the room with the coin and take it.",
}
# Commands the parser rejects: the noisy policy's failed actions.
_BOGUS = ("fly to the moon", "take the unicorn", "open the sky", "xyzzy")
_PROMPT = re.compile(r"\n>[^\n]*\Z")
_REQUEST = textworld.EnvInfos(admissible_commands=True, policy_commands=True, score=True,
                              max_score=True, won=True, lost=True, description=True,
                              objective=True, facts=True, verbs=True, entities=True)
_DIRECTIONS = frozenset({"north", "south", "east", "west"})
_REVEALING = re.compile(r"revealing (.+?)\.", re.IGNORECASE)


@contextlib.contextmanager
def _quiet_jericho() -> Iterator[None]:
  """Jericho warns that it cannot read scores from TextWorld's games; TextWorld
  tracks the score itself, so the warning is noise."""
  with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message=".*is not fully supported")
    yield


def cache_dir() -> str:
  return os.environ.get(CACHE_ENV) or os.path.join(
      os.path.expanduser("~"), ".cache", "mdlm_wm", "textworld")


def _split_of(seed: int) -> str:
  for split, seeds in seed_ranges(GAMES_PER_TASK).items():
    if seed in seeds:
      return split
  raise ValueError(f"TextWorld seeds are 0..{GAMES_PER_TASK - 1}, got {seed}")


def _settings(task: str, seed: int) -> dict[str, Any]:
  split = _split_of(seed)
  settings = dict(TASKS[task][1])
  if task == "simple":
    settings["test"] = split == "test"
  elif task == "cooking":
    settings["split"] = split
  return settings


def game_file(task: str, seed: int, cache: str | None = None) -> str:
  """The compiled game of `task` and `seed`, generated on first use."""
  challenge, _ = TASKS[task]
  settings = _settings(task, seed)
  digest = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:10]
  folder = os.path.join(cache or cache_dir(), f"textworld-{textworld.__version__}",
                        f"{task}-{digest}")
  path = os.path.join(folder, f"seed-{seed}.z8")
  if os.path.exists(path):
    return path
  os.makedirs(folder, exist_ok=True)
  tmp = tempfile.mkdtemp(dir=folder, prefix=".tmp-")
  try:
    options = textworld.GameOptions()
    options.seeds = seed
    options.path = os.path.join(tmp, f"seed-{seed}.z8")
    options.file_ext = ".z8"
    options.force_recompile = True
    make = textworld.challenges.CHALLENGES[challenge][1]
    with _quiet_jericho():
      compiled = compile_game(make(settings=settings, options=options), options)
    os.replace(os.path.splitext(compiled)[0] + ".json", os.path.splitext(path)[0] + ".json")
    # The game file last: its presence means the game is complete.
    os.replace(compiled, path)
  finally:
    shutil.rmtree(tmp, ignore_errors=True)
  return path


def _clean(feedback: str) -> str:
  """The engine's text without the trailing prompt and interpreter status bar."""
  text = _PROMPT.sub("", feedback.rstrip("\n"))
  text = "\n".join(line.strip() for line in text.splitlines())
  return re.sub(r"\n{3,}", "\n\n", text).strip()


class TextWorldEnv(RealEnv):
  """One TextWorld challenge (`textworld/<task>`), one generated game per seed."""

  family = "textworld"
  requires = "textworld"
  max_steps = 50
  room_form = re.compile(r"^-= (.+?) =-", re.MULTILINE)

  def __init__(self, task: str):
    super().__init__(task)
    self._env: Any = None
    self._state: Any = None

  @classmethod
  def tasks(cls) -> list[str]:
    return sorted(TASKS)

  def split_seeds(self, split: str) -> list[int]:
    check_split(split)
    return list(seed_ranges(GAMES_PER_TASK)[split])

  def reset(self, seed: int, steer: str | None = None) -> tuple[Spec, str]:
    steer = self.resolve_steer(seed, steer)
    path = game_file(self.task, seed)
    self.close()
    with _quiet_jericho():
      self._env = textworld.start(path, request_infos=_REQUEST)
      self._state = self._env.reset()
    first = render_state(_clean(self._state["description"]), self._facts())
    self.start_record(first)
    rules = (f"Commands are free text; verbs: {', '.join(sorted(self._state['verbs']))}.",
             _NOTES[self.task],
             f"The game is won at {self._state['max_score']} points (some actions lose it).",
             "The status line gives location, inventory and score (points so far).")
    return Spec(initial_state=first, task=self._state["objective"], tools=(), rules=rules,
                steer=steer), first

  def _facts(self) -> dict[str, str]:
    facts = self._state["facts"]
    room = next(f.arguments[1].name for f in facts
                if f.name == "at" and f.arguments[0].type == "P")
    held = sorted(f.arguments[0].name for f in facts
                  if f.name == "in" and f.arguments[1].type == "I")
    return {"location": room, "inventory": ", ".join(held) or "nothing",
            "score": str(self._state["score"])}

  def step(self, action: str) -> base.StepResult:
    valid = action in self._state["admissible_commands"]
    score = self._state["score"]
    # One line to the parser: a newline inside would play two commands.
    self._state, _, _ = self._env.step(" ".join(action.split()))
    message = _clean(self._state.feedback)
    facts = self._facts()
    success = bool(self._state["won"])
    checks = self.step_checks(action, message, facts,
                              () if valid else tuple(message.splitlines()[:1]))
    return base.StepResult(render_state(message, facts), float(self._state["score"] - score),
                           success or bool(self._state["lost"]), checks, valid,
                           {"success": success, "score": self._state["score"]})

  def names(self) -> list[str]:
    return [n for n in self._state["entities"] if n not in _DIRECTIONS]

  @classmethod
  def listing_constraints(cls, spec: Spec, step: Step, body: str,
                          status: Mapping[str, str]) -> dict[str, bool]:
    """What an opened container reveals is a list of noun phrases."""
    return {"objects:articles": all(articled(list_items(m.group(1)))
                                    for m in _REVEALING.finditer(body))}

  def admissible_actions(self) -> list[str]:
    return sorted(self._state["admissible_commands"])

  def expert_action(self) -> str:
    policy = self._state["policy_commands"]
    return policy[0] if policy else "look"

  def random_action(self, rng: random.Random) -> str:
    return rng.choice(self.admissible_actions())

  def invalid_action(self, rng: random.Random) -> str:
    return rng.choice(_BOGUS)

  def close(self) -> None:
    if self._env is not None:
      self._env.close()
      self._env = None
