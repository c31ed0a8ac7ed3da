r"""Behaviour-clones a text policy from a corpus's expert episodes; resumes when
AGENT_DIR has a checkpoint.

  python -m launch.train_agent --config=configs/agent_bc.py --data=CORPUS_DIR \
      --workdir=AGENT_DIR

Writes AGENT_DIR/policy_data/{train,valid}.jsonl (the corpus rewritten into
policy steps, agents/bc.py), then trains an AR model on them like
launch.train: checkpoints, metrics.jsonl, TensorBoard. `agents.load_agent(
AGENT_DIR)` and `launch.evaluate_agent --agent=AGENT_DIR` read the result.
"""

from absl import app, flags
from ml_collections import config_flags

from mdlm_wm.utils import errors

FLAGS = flags.FLAGS
_CONFIG = config_flags.DEFINE_config_file("config", None, "Agent config file.", lock_config=True)
flags.DEFINE_string("data", None, "Corpus directory (train.jsonl, valid.jsonl, tokenizer.model).",
                    required=True)
flags.DEFINE_string("workdir", None, "The agent's workdir.", required=True)
flags.DEFINE_integer("max_steps", None, "Stop after this many steps of this launch.")
flags.mark_flag_as_required("config")


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  from mdlm_wm.agents import bc  # pylint: disable=import-outside-toplevel
  with errors.reported():
    result = bc.train_bc(_CONFIG.value, FLAGS.data, FLAGS.workdir, max_steps=FLAGS.max_steps)
  print(result.summary())


if __name__ == "__main__":
  app.run(main, flags_parser=errors.parse_flags)
