r"""Evaluates a world model, or a file of predictions, on a trajectory file.

  python -m launch.evaluate --workdir=/tmp/mdlm_wm_quickstart/mdlm \
      --data=/tmp/mdlm_wm_quickstart/data/test.jsonl --out=/tmp/report.json \
      [--num_samples=4] [--max_examples=200] [--save_predictions=FILE] \
      [--steps=64] [--temperature=0.7] [--top_p=0.9] [--confidence=margin] \
      [--block_size=8] [--cfg_scale=1.5]   (sampler flags; default: the model's config)
      [--ablate=tools,rules]   (anchors hidden from the model; the checks still read them)
      [--format_retries=8]   (redraw states that do not parse; default: the model's config)
  python -m launch.evaluate --predictions=samples.jsonl --data=test.jsonl --out=report.json
  python -m launch.evaluate --baseline=copy|twin --data=test.jsonl --out=copy.json \
      [--max_examples=200]

Writes a JSON report: fidelity, diversity, grounding (incl. trailing anchors,
pass, pass_all, determined_acc, revealed_valid), MAUVE, steerability and
rollout consistency, each with a 95% bootstrap CI, overall and per
environment. `--baseline` scores the copy-s_t floor or the twin-world ceiling
(mdlm_wm/eval/baselines.py) on the transitions a model evaluation with the
same --data and --max_examples scores, in the same report format; the twin
skips transitions without a twin world (real environments) and says how many.
"""

import dataclasses
import json
import os
import time

from absl import app, flags

from launch import sampler_flags
from mdlm_wm.data import serialize
from mdlm_wm.envs.score import format_check
from mdlm_wm.eval import baselines
from mdlm_wm.eval import evaluate as ev
from mdlm_wm.utils import errors

FLAGS = flags.FLAGS
flags.DEFINE_string("workdir", None, "A training workdir (MDLM or AR) to sample from.")
flags.DEFINE_string("predictions", None, "Score this JSONL of predictions instead of a model.")
flags.DEFINE_enum("baseline", None, list(baselines.BASELINES),
                  "Score a baseline instead of a model: copy (the next state is s_t) or twin "
                  "(a twin world's next state; built-in environments only).")
flags.DEFINE_string("data", None, "Trajectory JSONL(.gz) file.", required=True)
flags.DEFINE_string("out", None, "Report JSON file.", required=True)
flags.DEFINE_integer("num_samples", 4, "Samples per transition (G).")
flags.DEFINE_integer("max_examples", 0, "Score at most this many transitions (0: all).")
flags.DEFINE_integer("max_rollouts", 32, "Episodes replayed for rollout consistency.")
flags.DEFINE_integer("max_steered", 64, "Steered transitions re-predicted without z.")
flags.DEFINE_integer("seed", 0, "Sampling seed.")
flags.DEFINE_integer("format_retries", None, "Draw each one-step prediction that does not "
                     "parse as its environment's state again, up to this many times "
                     "(WorldModel.redraw; default: the model's sample.format_retries).",
                     lower_bound=0)
flags.DEFINE_string("ablate", "", "Anchors hidden from the model (comma-separated of s0, task, "
                    "tools, rules, steer): it predicts without them, checks still read them.")
flags.DEFINE_string("save_predictions", None, "Also write the model's (or baseline's) "
                    "samples here (JSONL; launch.compare pairs two such files).")


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  if sum(map(bool, (FLAGS.workdir, FLAGS.predictions, FLAGS.baseline))) != 1:
    raise app.UsageError("give exactly one of --workdir, --predictions and --baseline")
  cfg = ev.EvalConfig(num_samples=FLAGS.num_samples, max_examples=FLAGS.max_examples,
                      seed=FLAGS.seed, max_rollouts=FLAGS.max_rollouts,
                      max_steered=FLAGS.max_steered)
  with errors.reported():
    ablated = serialize.parse_anchors(FLAGS.ablate, "--ablate")
    if ablated and not FLAGS.workdir:
      raise app.UsageError("--ablate needs --workdir (it changes what a model reads)")
    if FLAGS.baseline:
      _, examples = ev.load_examples(FLAGS.data, 0, cfg.max_examples)
      run = baselines.evaluate_baseline(FLAGS.baseline, examples, cfg)
      note = baselines.skip_note(FLAGS.baseline, run.selected, run.skipped)
      if note:
        print(note)
      if FLAGS.save_predictions:
        ev.write_predictions(FLAGS.save_predictions, run.examples, run.samples)
      cfg = dataclasses.replace(cfg, num_samples=1)  # one next state per transition
      report = run.report
      source = {"baseline": FLAGS.baseline, "selected": run.selected, "skipped": run.skipped}
    elif FLAGS.predictions:
      episodes, examples = ev.load_examples(FLAGS.data, 0, cfg.max_examples)
      predictions = ev.read_predictions(FLAGS.predictions, examples)
      report = ev.evaluate(examples, predictions, cfg=cfg)
      source = {"predictions": os.path.abspath(FLAGS.predictions)}
    else:
      from mdlm_wm.world_model import WorldModel  # pylint: disable=import-outside-toplevel
      wm = WorldModel.load(FLAGS.workdir)
      overrides = sampler_flags.overrides()
      wm.decode_config(**overrides)  # a bad setting fails before any sampling
      # The examples hold their transitions for the whole run, so id() finds
      # each one's environment parser; other transitions are not redrawn.
      predict = lambda trs, steers, g, seed: wm.generate(
          [dataclasses.replace(tr, spec=serialize.ablate(tr.spec, ablated)) for tr in trs],
          num_samples=g, seed=seed, steers=list(steers),
          accept=[parsers.get(id(tr)) for tr in trs], retries=FLAGS.format_retries,
          **overrides)
      rollout = lambda spec, actions, seed: wm.rollout(
          serialize.ablate(spec, ablated), actions, num_samples=1, seed=seed, **overrides)[0]
      episodes, examples = ev.load_examples(FLAGS.data, wm.cfg.data.history_len,
                                            cfg.max_examples)
      parsers = {id(ex.transition): format_check(ex.episode.env, ex.episode.spec)
                 for ex in examples}
      t0 = time.perf_counter()
      predictions = ev.predict_all(predict, [ex.transition for ex in examples],
                                   [None] * len(examples), cfg, "sample")
      seconds = (time.perf_counter() - t0) / max(len(examples), 1)
      if FLAGS.save_predictions:
        ev.write_predictions(FLAGS.save_predictions, examples, predictions)
      report = ev.evaluate(examples, predictions, episodes=episodes, predict=predict,
                           rollout=rollout, cfg=cfg)
      source = {"workdir": os.path.abspath(FLAGS.workdir), "objective": wm.objective,
                "ablated": list(ablated),
                "params": wm.num_params, "sample": {**wm.cfg.sample.to_dict(), **overrides},
                "format_retries": (wm.format_retries if FLAGS.format_retries is None
                                   else FLAGS.format_retries),
                # Includes compilation: a rough figure; launch.bench measures latency.
                "seconds_per_transition": seconds}
  report = {"source": source, "data": os.path.abspath(FLAGS.data),
            "eval_config": dataclasses.asdict(cfg), **report}
  ev.write_report(report, FLAGS.out)
  overall = report["overall"]
  print(json.dumps({k: round(v["mean"], 4) for k, v in overall.items()}, indent=1))
  print(f"wrote {FLAGS.out}")


if __name__ == "__main__":
  app.run(main)
