r"""Failure modes of a world model on steered and adversarial transitions, each
kind defined by a check (mdlm_wm/eval/failures.py defines the sets and kinds).

  python -m launch.failures --workdir=WM_DIR --data=test.jsonl --out=/tmp/failures.json
  python -m launch.failures --baseline=copy --data=test.jsonl --out=/tmp/failures_copy.json
  python -m launch.failures --baseline=twin --data=test.jsonl --out=/tmp/failures_twin.json

Prints a Markdown table (per set: steered, tool_error, unknown_tool,
intent_change; per kind: format, determined, rule, steer_ignored,
intent_ignored, hallucinated_tool, each the fraction of transitions with a
95% interval) and the steer effect (steer facts right with z and with z
removed, paired). --sets=intent_change,... scores only those sets. --data takes built-in
environments' trajectories (the sets rebuild their worlds from meta.seed);
several files may be given, comma-separated. The model predicts one next
state per transition with its config's sampler settings unless the sampler
flags (--temperature=0 for greedy, ...) say otherwise.
"""

import os

from absl import app, flags

from launch import sampler_flags
from mdlm_wm.eval import evaluate
from mdlm_wm.utils import errors

FLAGS = flags.FLAGS
flags.DEFINE_string("workdir", None, "World-model workdir (launch.train).")
flags.DEFINE_enum("baseline", None, ["copy", "twin"], "Score a baseline instead of a model: "
                  "the copy-s_t floor or the twin-world ceiling.")
flags.DEFINE_string("data", None, "Trajectory JSONL(.gz) file(s), comma-separated.",
                    required=True)
flags.DEFINE_string("out", None, "Report JSON file (predictions included).", required=True)
flags.DEFINE_list("sets", [], "Sets to score, comma-separated (default: all).")
flags.DEFINE_integer("max_per_set", 0, "At most this many transitions per set (0: all), "
                     "interleaved over environments.", lower_bound=0)
flags.DEFINE_integer("history_len", 1, "History pairs in each transition of the copy "
                     "baseline (a model uses its config's).", lower_bound=0)
flags.DEFINE_integer("batch_size", 16, "Transitions per sampler call.", lower_bound=1)
flags.DEFINE_integer("seed", 0, "Sampling seed; also picks the unknown-tool probes' steps.")


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  if bool(FLAGS.workdir) == bool(FLAGS.baseline):
    raise app.UsageError("give exactly one of --workdir and --baseline")
  # pylint: disable=import-outside-toplevel
  from mdlm_wm.data import schema
  from mdlm_wm.eval import failures
  try:  # before a model loads
    names = failures.set_names(FLAGS.sets)
  except ValueError as e:
    raise app.UsageError(f"--sets: {e}") from None
  overrides = sampler_flags.overrides()
  with errors.reported():
    history_len, source = FLAGS.history_len, {"baseline": FLAGS.baseline}
    if FLAGS.baseline:
      predict = failures.baseline_predict(FLAGS.baseline)
    else:
      from mdlm_wm.world_model import WorldModel
      wm = WorldModel.load(FLAGS.workdir)
      wm.decode_config(**overrides)  # a bad setting fails before any sampling
      history_len = wm.cfg.data.history_len
      predict = evaluate.model_predict(wm, batch_size=FLAGS.batch_size, seed=FLAGS.seed,
                                       **overrides)
      source = {"workdir": os.path.abspath(FLAGS.workdir), "objective": wm.objective,
                "sample": {**wm.cfg.sample.to_dict(), **overrides}}
    episodes = [ep for path in FLAGS.data.split(",") for ep in schema.iter_episodes(path)]
    sets = failures.build_sets(episodes, history_len, max_per_set=FLAGS.max_per_set,
                               seed=FLAGS.seed, names=names)
  print("transitions per set: " + ", ".join(f"{k} {len(v)}" for k, v in sets.items()),
        flush=True)
  report = failures.run(sets, predict)
  report = {"source": source, "data": FLAGS.data.split(","), **report,
            "keys": {name: [c.example.key for c in cases] for name, cases in sets.items()}}
  evaluate.write_report(report, FLAGS.out)
  print(failures.format_report(report))
  print(f"wrote {FLAGS.out}")


if __name__ == "__main__":
  app.run(main)
