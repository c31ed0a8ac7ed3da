r"""Samples next states for every transition of a trajectory file.

  python -m launch.sample --workdir=/tmp/mdlm_wm_quickstart/mdlm \
      --data=/tmp/mdlm_wm_quickstart/data/test.jsonl --num_samples=4 \
      --out=/tmp/samples.jsonl [--steer="the stove is broken"] [--steps=32] \
      [--temperature=0.7] [--block_size=8] [--confidence=margin]

Writes one JSON line per input transition: its id, step index, action,
reference next state and the list of sampled next states.
"""

import time

from absl import app, flags

from launch import sampler_flags
from mdlm_wm.data import schema
from mdlm_wm.data.serialize import transitions
from mdlm_wm.eval import evaluate as ev
from mdlm_wm.utils import errors
from mdlm_wm.utils.progress import Progress
from mdlm_wm.world_model import WorldModel

FLAGS = flags.FLAGS
flags.DEFINE_string("workdir", None, "A training workdir (MDLM or AR).", required=True)
flags.DEFINE_string("data", None, "Trajectory JSONL(.gz) file.", required=True)
flags.DEFINE_string("out", None, "Output JSONL file.", required=True)
flags.DEFINE_integer("num_samples", 4, "Samples per transition.")
flags.DEFINE_string("steer", None, "Replaces every spec's steer ('' removes it).")
flags.DEFINE_integer("max_examples", 0, "Stop after this many transitions (0: all).")
flags.DEFINE_integer("batch_size", 16, "Transitions per sampler call.")
flags.DEFINE_integer("seed", 0, "Sampling seed.")


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  overrides = sampler_flags.overrides()
  items = []
  with errors.reported():
    wm = WorldModel.load(FLAGS.workdir)
    wm.decode_config(**overrides)  # a bad setting fails before any sampling
    for ep in schema.iter_episodes(FLAGS.data):
      for k, tr in enumerate(transitions(ep, wm.cfg.data.history_len)):
        items.append(ev.Example(ep, k, tr))
        if FLAGS.max_examples and len(items) >= FLAGS.max_examples:
          break
      if FLAGS.max_examples and len(items) >= FLAGS.max_examples:
        break
  progress = Progress("sample", len(items), "transitions")
  t0 = time.perf_counter()
  predictions = []
  for i in range(0, len(items), FLAGS.batch_size):
    chunk = items[i:i + FLAGS.batch_size]
    predictions += wm.generate([ex.transition for ex in chunk], num_samples=FLAGS.num_samples,
                               seed=FLAGS.seed + i, steers=[FLAGS.steer] * len(chunk),
                               **overrides)
    progress.update(len(chunk))
  progress.close()
  ev.write_predictions(FLAGS.out, items, predictions)
  print(f"wrote {len(items)} lines to {FLAGS.out} in {time.perf_counter() - t0:.1f}s")

if __name__ == "__main__":
  app.run(main)
