r"""Builds a trajectory corpus from the built-in environments or from real ones.

Built-in environments:

  python -m launch.build_corpus --envs=all --episodes_per_env=200 --seed=0 \
      --out_dir=/tmp/corpus [--holdout_envs=calendar] [--tokenizer_vocab=4096]

writes train/valid/test.jsonl (disjoint world seeds), heldout_env.jsonl (when
--holdout_envs is given), tokenizer.model and stats.json into --out_dir.

Real environments (`pip install -e '.[envs]'`), each a family or
`family:task1+task2`:

  python -m launch.build_corpus --envs=textworld,textworld_express:coin+twc \
      --episodes_per_task=10 --real_splits=train,valid:2,test:2 --out_dir=/tmp/real

plays the engines' own split seeds (mdlm_wm.corpus.real) and writes the
same files (no held-out file).

Both at once (a world model of the built-in and real environments):

  python -m launch.build_corpus --envs=all,textworld_express:coin \
      --episodes_per_env=30 --episodes_per_task=50 --out_dir=/tmp/mixed

builds the built-in part in OUT_DIR/builtin and the real part in
OUT_DIR/real (each with its own stats.json: splits, seeds), then merges their
split files into OUT_DIR with one tokenizer trained on the merged train split
(mdlm_wm.corpus.merge).
"""

import dataclasses
import os

from absl import app, flags

from mdlm_wm import corpus
from mdlm_wm.corpus import merge
from mdlm_wm.corpus import real as real_corpus
from mdlm_wm.envs import adapters, registry
from mdlm_wm.utils import errors

FLAGS = flags.FLAGS
flags.DEFINE_list("envs", ["all"], "Environments to run: built-ins ('all': every one) and/or "
                  "real families as FAMILY or FAMILY:TASK1+TASK2.")
flags.DEFINE_integer("episodes_per_env", 200, "Built-in: episodes per environment (all splits).")
flags.DEFINE_integer("seed", 0, "Corpus seed; world seeds (real: the draw of seeds) derive "
                     "from it.")
flags.DEFINE_string("out_dir", None, "Output directory.", required=True)
flags.DEFINE_list("holdout_envs", [], "Built-in: environments kept out of train/valid/test.")
flags.DEFINE_float("expert", 0.5, "Policy mix: weight of the expert policy.")
flags.DEFINE_float("noisy", 0.3, "Policy mix: weight of the noisy policy.")
flags.DEFINE_float("random", 0.2, "Policy mix: weight of the random policy.")
flags.DEFINE_float("noise", 0.3, "Fraction of random/invalid actions of the noisy policy.")
flags.DEFINE_float("valid_fraction", 0.1,
                   "Built-in: fraction of each environment's episodes for valid.")
flags.DEFINE_float("test_fraction", 0.1,
                   "Built-in: fraction of each environment's episodes for test.")
flags.DEFINE_integer("tokenizer_vocab", 4096, "SentencePiece vocabulary size (0: none).")
flags.DEFINE_integer("episodes_per_task", 10, "Real: episodes per task in each split.")
flags.DEFINE_list("real_splits", ["train", "valid", "test"],
                  "Real: splits to build, each SPLIT or SPLIT:EPISODES_PER_TASK.")
flags.DEFINE_integer("max_steps", 0, "Real: episode step limit (0: each adapter's own).")


def _is_real(name: str) -> bool:
  return name.replace("/", ":", 1).partition(":")[0] in adapters.families()


def config_from_flags(envs) -> corpus.CorpusConfig:
  envs = registry.env_names() if list(envs) == ["all"] else list(envs)
  # Held-out environments are part of the run even when --envs lists others.
  envs = list(dict.fromkeys(envs + list(FLAGS.holdout_envs)))
  return corpus.CorpusConfig(
      envs=envs, episodes_per_env=FLAGS.episodes_per_env, seed=FLAGS.seed,
      holdout_envs=FLAGS.holdout_envs,
      policy_mix={"expert": FLAGS.expert, "noisy": FLAGS.noisy, "random": FLAGS.random},
      noise=FLAGS.noise, valid_fraction=FLAGS.valid_fraction,
      test_fraction=FLAGS.test_fraction, tokenizer_vocab=FLAGS.tokenizer_vocab)


def real_config_from_flags(envs) -> real_corpus.RealCorpusConfig:
  episodes = {}
  for item in FLAGS.real_splits:
    split, _, count = item.partition(":")
    try:
      episodes[split] = int(count) if count else FLAGS.episodes_per_task
    except ValueError:
      raise ValueError(f"--real_splits: {item!r} is not SPLIT or SPLIT:COUNT") from None
  return real_corpus.RealCorpusConfig(
      envs=real_corpus.parse_envs(envs), episodes=episodes, seed=FLAGS.seed,
      policy_mix={"expert": FLAGS.expert, "noisy": FLAGS.noisy, "random": FLAGS.random},
      noise=FLAGS.noise, tokenizer_vocab=FLAGS.tokenizer_vocab,
      max_steps=FLAGS.max_steps or None)


def _validated(make, envs):
  with errors.reported():
    cfg = make(envs)
    cfg.validate()
  return cfg


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  real = [e for e in FLAGS.envs if _is_real(e)]
  builtin = [e for e in FLAGS.envs if not _is_real(e)]
  if real and not builtin and FLAGS.holdout_envs:
    raise app.UsageError("--holdout_envs is for built-in environments; real corpora hold out "
                         "by the engines' own splits")
  builtin_cfg = _validated(config_from_flags, builtin) if builtin or not real else None
  real_cfg = _validated(real_config_from_flags, real) if real else None
  # Reported, not a traceback: what only the data can refuse (a tokenizer
  # vocabulary too small for the corpus's characters).
  with errors.reported():
    _build(builtin_cfg, real_cfg)
  print(f"wrote {FLAGS.out_dir}")


def _build(builtin_cfg, real_cfg) -> None:
  if builtin_cfg and real_cfg:
    # The parts get no tokenizer of their own: the merged one covers both.
    parts = {"builtin": os.path.join(FLAGS.out_dir, "builtin"),
             "real": os.path.join(FLAGS.out_dir, "real")}
    result = corpus.build_corpus(dataclasses.replace(builtin_cfg, tokenizer_vocab=0),
                                 parts["builtin"])
    print(corpus.format_summary(result))
    result = real_corpus.build_real_corpus(dataclasses.replace(real_cfg, tokenizer_vocab=0),
                                           parts["real"])
    print(real_corpus.format_summary(result))
    result = merge.merge_corpora(parts, FLAGS.out_dir, tokenizer_vocab=FLAGS.tokenizer_vocab)
    print(f"merged {', '.join(parts)} into {FLAGS.out_dir}: " + ", ".join(
        f"{split} {sum(s['episodes'] for s in per_env.values())} episodes"
        for split, per_env in result["stats"].items()))
  elif real_cfg:
    print(real_corpus.format_summary(real_corpus.build_real_corpus(real_cfg, FLAGS.out_dir)))
  else:
    print(corpus.format_summary(corpus.build_corpus(builtin_cfg, FLAGS.out_dir)))


if __name__ == "__main__":
  app.run(main)
