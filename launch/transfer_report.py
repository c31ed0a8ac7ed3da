r"""Renders the transfer study's tables (launch/transfer_study.sh runs it last).

  python -m launch.transfer_report --study=/tmp/transfer --out=/tmp/transfer/transfer.md

Reads STUDY/eval/*.json, STUDY/times.tsv and the GRPO workdirs' checkpoint
meta (mdlm_wm/agents/transfer.py); prints the Markdown and writes it to --out.
"""

from absl import app, flags

FLAGS = flags.FLAGS
flags.DEFINE_string("study", None, "The study directory.", required=True)
flags.DEFINE_string("out", None, "Markdown file to write.", required=True)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  from mdlm_wm.agents import transfer  # pylint: disable=import-outside-toplevel
  text = transfer.render(FLAGS.study)
  with open(FLAGS.out, "w", encoding="utf-8") as f:
    f.write(text)
  print(text)


if __name__ == "__main__":
  app.run(main)
