r"""Evaluates an agent in the REAL environment: success rate, score (sum of
rewards) and steps, with 95% bootstrap CIs, overall and per task.

  python -m launch.evaluate_agent --agent=AGENT_DIR --env=household --tasks=test \
      --episodes=50 --out=/tmp/agent_eval.json [--max_steps=30]
  python -m launch.evaluate_agent --agent=expert --env=household --out=/tmp/expert.json

--agent is an agent workdir (launch.train_agent or launch.agent_grpo), or
`expert` / `random` for the environment's own policies (baselines). --env is
a built-in, `family/task`, a family (all its tasks) or a comma-separated
list; --episodes seeds of split --tasks per environment (agents/tasks.py).
An environment crash ends only its episode: it is listed with its error and
left out of the means; the report counts it.
"""

import json
import os

from absl import app, flags

from mdlm_wm.utils import errors

FLAGS = flags.FLAGS
flags.DEFINE_string("agent", None, "Agent workdir, or expert / random.", required=True)
flags.DEFINE_string("env", None, "Environment(s) to evaluate in.", required=True)
flags.DEFINE_enum("tasks", "test", ["train", "valid", "test"], "Split the task seeds come from.")
flags.DEFINE_integer("episodes", 20, "Episodes (task seeds) per environment.")
flags.DEFINE_string("out", None, "Report JSON file.", required=True)
flags.DEFINE_integer("max_steps", 0, "Step limit per episode (0: the environment's own).")
flags.DEFINE_integer("batch_size", 16, "Episodes that advance together (one agent call per "
                     "time step); each holds a live environment.")
flags.DEFINE_float("temperature", None, "Sampling temperature of a trained agent; default: "
                   "its config's.")
flags.DEFINE_integer("seed", 0, "Sampling seed.")


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  # pylint: disable=import-outside-toplevel
  from mdlm_wm import agents
  from mdlm_wm.agents import evaluate as evaluate_lib
  from mdlm_wm.agents import tasks as tasks_lib
  with errors.reported():
    tasks = tasks_lib.task_list(FLAGS.env, FLAGS.tasks, FLAGS.episodes)
    if FLAGS.agent in ("expert", "random"):
      agent = (agents.ExpertAgent if FLAGS.agent == "expert" else agents.RandomAgent)(tasks)
    else:
      overrides = {} if FLAGS.temperature is None else {"temperature": FLAGS.temperature}
      agent = agents.load_agent(FLAGS.agent, **overrides)
  print(f"evaluating {FLAGS.agent} on {len(tasks)} tasks ({FLAGS.env}, split {FLAGS.tasks})",
        flush=True)
  report = evaluate_lib.evaluate(agent, tasks, max_steps=FLAGS.max_steps or None,
                                 batch_size=FLAGS.batch_size, seed=FLAGS.seed)
  report["config"] = {"agent": FLAGS.agent, "env": FLAGS.env, "tasks": FLAGS.tasks,
                      "episodes": FLAGS.episodes, "max_steps": FLAGS.max_steps,
                      "temperature": FLAGS.temperature, "seed": FLAGS.seed}
  os.makedirs(os.path.dirname(os.path.abspath(FLAGS.out)), exist_ok=True)
  with open(FLAGS.out, "w") as f:
    json.dump(report, f, indent=1)
  print(evaluate_lib.format_report(report))
  print(f"wrote {FLAGS.out}")


if __name__ == "__main__":
  app.run(main)
