r"""Builds a trajectory corpus from the built-in environments.

  python -m launch.build_corpus --envs=all --episodes_per_env=200 --seed=0 \
      --out_dir=/tmp/corpus [--holdout_envs=calendar] [--tokenizer_vocab=4096]

Writes train/valid/test.jsonl (disjoint world seeds), heldout_env.jsonl (when
--holdout_envs is given), tokenizer.model and stats.json into --out_dir.
"""

from absl import app, flags

from mdlm_wm.data import corpus
from mdlm_wm.envs import base

FLAGS = flags.FLAGS
flags.DEFINE_list("envs", ["all"], "Environments to run, or 'all'.")
flags.DEFINE_integer("episodes_per_env", 200, "Episodes per environment (all splits).")
flags.DEFINE_integer("seed", 0, "Corpus seed; world seeds are derived from it.")
flags.DEFINE_string("out_dir", None, "Output directory.", required=True)
flags.DEFINE_list("holdout_envs", [], "Environments kept out of train/valid/test.")
flags.DEFINE_float("expert", 0.5, "Policy mix: weight of the expert policy.")
flags.DEFINE_float("noisy", 0.3, "Policy mix: weight of the noisy policy.")
flags.DEFINE_float("random", 0.2, "Policy mix: weight of the random policy.")
flags.DEFINE_float("noise", 0.3, "Fraction of random/invalid actions of the noisy policy.")
flags.DEFINE_float("valid_fraction", 0.1, "Fraction of each environment's episodes for valid.")
flags.DEFINE_float("test_fraction", 0.1, "Fraction of each environment's episodes for test.")
flags.DEFINE_integer("tokenizer_vocab", 4096, "SentencePiece vocabulary size (0: none).")


def config_from_flags() -> corpus.CorpusConfig:
  envs = base.env_names() if FLAGS.envs == ["all"] else FLAGS.envs
  # Held-out environments are part of the run even when --envs lists others.
  envs = list(dict.fromkeys(list(envs) + list(FLAGS.holdout_envs)))
  return corpus.CorpusConfig(
      envs=envs, episodes_per_env=FLAGS.episodes_per_env, seed=FLAGS.seed,
      holdout_envs=FLAGS.holdout_envs,
      policy_mix={"expert": FLAGS.expert, "noisy": FLAGS.noisy, "random": FLAGS.random},
      noise=FLAGS.noise, valid_fraction=FLAGS.valid_fraction,
      test_fraction=FLAGS.test_fraction, tokenizer_vocab=FLAGS.tokenizer_vocab)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  cfg = config_from_flags()
  try:
    cfg.validate()
  except ValueError as e:
    raise app.UsageError(str(e)) from None
  result = corpus.build_corpus(cfg, FLAGS.out_dir)
  print(corpus.format_summary(result))
  print(f"wrote {FLAGS.out_dir}")


if __name__ == "__main__":
  app.run(main)
