r"""Paired before/after comparison of two prediction files on the same transitions.

  python -m launch.compare --data=CORPUS/test.jsonl \
      --before=GRPO_DIR/eval/test.step0.predictions.jsonl \
      --after=GRPO_DIR/eval/test.step80.predictions.jsonl [--out=compare.json]

Prediction files are `launch.sample`'s output or the ones world-model GRPO
writes beside its eval reports. Both are scored on the transitions of
--before (the after file must cover them); prints a Markdown table of each
metric's change with a 95% paired bootstrap interval.
"""

from absl import app, flags

from mdlm_wm.eval import compare
from mdlm_wm.eval import evaluate as ev
from mdlm_wm.utils import errors

FLAGS = flags.FLAGS
flags.DEFINE_string("data", None, "Trajectory JSONL the predictions are for.", required=True)
flags.DEFINE_string("before", None, "Predictions JSONL of the first model.", required=True)
flags.DEFINE_string("after", None, "Predictions JSONL of the second model.", required=True)
flags.DEFINE_string("out", None, "Also write the comparison as JSON here.")


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  with errors.reported():
    _, examples = ev.load_examples(FLAGS.data, 0)
    before = ev.read_prediction_map(FLAGS.before)
    examples = [ex for ex in examples if ex.key in before]
    if not examples:
      raise ValueError(f"no transition of {FLAGS.data} appears in {FLAGS.before}")
    after = ev.read_predictions(FLAGS.after, examples)
  result = compare.paired_comparison(examples, [before[ex.key] for ex in examples], after)
  print(compare.markdown_table(result))
  if FLAGS.out:
    ev.write_report({"data": FLAGS.data, "before": FLAGS.before, "after": FLAGS.after,
                     "transitions": len(examples), "metrics": result}, FLAGS.out)


if __name__ == "__main__":
  app.run(main)
