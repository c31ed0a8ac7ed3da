"""The twin world: the fairness ceiling of the state checks.

For each transition t of an episode, replay actions 0..t-1 in the original
world (so everything revealed up to s_t is as it was), copy the world, switch
the copy's hidden stream (`Env.fork_hidden`) so that every fact not yet
revealed is drawn anew, and apply a_t in the copy. The copy's next state is a
perfectly informed world model that could not know the hidden draws: it must
pass the original transition's determined checks and constraints. A check
it fails asks for hidden information.
"""

from __future__ import annotations

import copy

from mdlm_wm.data.schema import Episode
from mdlm_wm.envs.registry import make


def twin_next_states(episode: Episode, twin: int = 1) -> list[str]:
  """The twin world's next state for every step of `episode` (built-in
  environments; the episode's `meta.seed` and `spec.steer` rebuild its world)."""
  if "seed" not in episode.meta:
    raise ValueError(f"{episode.id}: meta.seed is missing; a twin needs the world's seed")
  env = make(episode.env)
  _, state = env.reset(int(episode.meta["seed"]), steer=episode.spec.steer)
  out = []
  for i, step in enumerate(episode.steps):
    if state != step.state:
      raise ValueError(f"{episode.id}: steps[{i}].state differs from the replayed world's "
                       "(another corpus version or environment code?)")
    fork = copy.deepcopy(env)
    fork.fork_hidden(f"twin{twin}")
    out.append(fork.step(step.action).next_state)
    state = env.step(step.action).next_state
  return out
