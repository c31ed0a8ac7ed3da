r"""Word2World's world-to-real protocol: an agent inside a world model, checked
in the real game (mdlm_wm/agents/wm2real.py says what each number means).

  python -m launch.wm2real --agent=AGENT_DIR --world_model=WM_DIR \
      --env=textworld_express/coin --tasks=test --episodes=50 --out=/tmp/wm2real.json

Prints and writes: WM task success (success as the world model's own states
say), WM2Real (the fraction of those action sequences that also win when
replayed in the real game), the replay success of every episode, and the
world model's single-step accuracy (determined `pass`) on the expert's
transitions of the same games beside the copy-s_t floor, each with a 95%
bootstrap interval. --agent is an agent workdir (launch.train_agent or
launch.agent_grpo), or `expert` / `random` (the environment's own policies,
which act on the real consequences of their actions: a check of the world
model's success judgement). --env and --tasks as in launch.evaluate_agent.
The world model samples with its config's settings unless the sampler flags
(--steps, --temperature, ...) say otherwise.
"""

import os

from absl import app, flags

from launch import sampler_flags
from mdlm_wm.eval import evaluate
from mdlm_wm.utils import errors

FLAGS = flags.FLAGS
flags.DEFINE_string("agent", None, "Agent workdir, or expert / random.", required=True)
flags.DEFINE_string("world_model", None, "World-model workdir (launch.train).", required=True)
flags.DEFINE_string("env", None, "Environment(s): a built-in, family/task, a family or a "
                    "comma-separated list.", required=True)
flags.DEFINE_enum("tasks", "test", ["train", "valid", "test"], "Split the task seeds come from.")
flags.DEFINE_integer("episodes", 20, "Episodes (task seeds) per environment.", lower_bound=1)
flags.DEFINE_string("out", None, "Report JSON file.", required=True)
flags.DEFINE_integer("max_steps", 0, "Step limit per episode, in the world model and in the "
                     "replays (0: the environment's own).", lower_bound=0)
flags.DEFINE_integer("batch_size", 16, "Episodes that advance together in the world model "
                     "(one agent call and one world-model call per time step).", lower_bound=1)
flags.DEFINE_integer("single_step_examples", -1, "Expert transitions scored for single-step "
                     "accuracy (-1: all of them; 0: skip).", lower_bound=-1)
flags.DEFINE_float("agent_temperature", None, "Sampling temperature of a trained agent; "
                   "default: its config's.", lower_bound=0.0)
flags.DEFINE_integer("seed", 0, "Sampling seed (agent and world model).")


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  # pylint: disable=import-outside-toplevel
  from mdlm_wm import agents
  from mdlm_wm.agents import tasks as tasks_lib
  from mdlm_wm.agents import wm2real as wm2real_lib
  from mdlm_wm.world_model import WorldModel
  overrides = sampler_flags.overrides()
  with errors.reported():
    tasks = tasks_lib.task_list(FLAGS.env, FLAGS.tasks, FLAGS.episodes)
    world = WorldModel.load(FLAGS.world_model)
    world.decode_config(**overrides)  # a bad setting fails before any episode
    if FLAGS.agent in ("expert", "random"):
      agent = (agents.ExpertAgent if FLAGS.agent == "expert" else agents.RandomAgent)(tasks)
    else:
      agent_overrides = ({} if FLAGS.agent_temperature is None
                         else {"temperature": FLAGS.agent_temperature})
      agent = agents.load_agent(FLAGS.agent, **agent_overrides)
  print(f"wm2real: {FLAGS.agent} in {FLAGS.world_model} on {len(tasks)} tasks ({FLAGS.env}, "
        f"split {FLAGS.tasks})", flush=True)
  rep = wm2real_lib.wm2real(agent, world, tasks, max_steps=FLAGS.max_steps or None,
                            batch_size=FLAGS.batch_size, seed=FLAGS.seed,
                            single_step_examples=FLAGS.single_step_examples, **overrides)
  rep["config"] = {"agent": FLAGS.agent, "world_model": os.path.abspath(FLAGS.world_model),
                   "objective": world.objective, "env": FLAGS.env, "tasks": FLAGS.tasks,
                   "episodes": FLAGS.episodes, "max_steps": FLAGS.max_steps,
                   "agent_temperature": FLAGS.agent_temperature, "sample": overrides,
                   "seed": FLAGS.seed}
  evaluate.write_report(rep, FLAGS.out)
  print(wm2real_lib.format_report(rep))
  print(f"wrote {FLAGS.out}")


if __name__ == "__main__":
  app.run(main)
