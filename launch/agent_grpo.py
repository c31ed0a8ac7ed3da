r"""Agent GRPO: a BC agent acts inside a world model (or the real environment)
and learns from task success; resumes when WORKDIR has a checkpoint.

  python -m launch.agent_grpo --config=configs/agent_grpo.py --agent=AGENT_DIR \
      --world_model=WM_DIR --env=household --workdir=OUT
  python -m launch.agent_grpo --config=configs/agent_grpo.py --agent=AGENT_DIR \
      --env=household --env_backend=real --workdir=OUT_REAL   # the upper-bound arm

Writes OUT/metrics.jsonl (success rate, reward, episode length, KL, clip
fraction, timings per step), agent checkpoints that `launch.evaluate_agent
--agent=OUT` reads and, with config.train.eval_episodes, real-environment
evaluations in OUT/eval/real.step<N>.json.
"""

from absl import app, flags
from ml_collections import config_flags

from mdlm_wm.utils import errors

FLAGS = flags.FLAGS
_CONFIG = config_flags.DEFINE_config_file("config", None, "Agent GRPO config file.",
                                          lock_config=True)
flags.DEFINE_string("agent", None, "The BC agent's workdir (sets config.agent).")
flags.DEFINE_string("world_model", None, "The world model's workdir (sets config.world_model).")
flags.DEFINE_string("env", None, "Environment(s) of the tasks (sets config.env): a built-in, "
                    "family/task, a family, or a comma-separated list.")
flags.DEFINE_enum("env_backend", None, ["wm", "real"], "Who produces next states (sets "
                  "config.env_backend): the world model, or the real environment.")
flags.DEFINE_string("workdir", None, "Checkpoints, metrics.jsonl and evaluations go here.",
                    required=True)
flags.DEFINE_integer("max_steps", None, "Stop after this many steps of this launch.")
flags.mark_flag_as_required("config")


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  from mdlm_wm.agents import grpo  # pylint: disable=import-outside-toplevel
  cfg = _CONFIG.value
  for key in ("agent", "world_model", "env", "env_backend"):
    if FLAGS[key].value is not None:
      cfg[key] = FLAGS[key].value
  with errors.reported():
    result = grpo.run(cfg, FLAGS.workdir, max_steps=FLAGS.max_steps)
  print(result.summary())


if __name__ == "__main__":
  app.run(main, flags_parser=errors.parse_flags)
