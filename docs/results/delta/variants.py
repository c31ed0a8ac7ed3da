"""The delta-target variants of docs/results.md ("the delta target"), on a
quickstart workdir's corpus: each trains one model (an MDLM adapts the step
300 of an AR workdir) and scores it on 30 test transitions per environment
with greedy decoding, beside copy s_t and the twin.

  python docs/results/delta/variants.py QS OUT train NAME    one variant
  python docs/results/delta/variants.py QS OUT score NAME... [--confidence=C]

QS is a quickstart workdir made with the whole-state quickstart (its
`data/`, and `ar/` with step 300, are read); NAME is a key of VARIANTS, or
`ar_state` / `mdlm_state` for QS's own models.
"""
import copy
import sys

from configs import quickstart as quickstart_config
from mdlm_wm import corpus
from mdlm_wm import quickstart as qs
from mdlm_wm.train.trainer import train

# name: (objective, target, init_from ("qs_ar": QS's AR, else a variant), lr, block size)
VARIANTS = {
    "mdlm_d_from_ar": ("mdlm", "delta", "qs_ar", 1e-3, 4),
    "ar_d": ("ar", "delta", None, None, 4),
    "mdlm_d_from_ard": ("mdlm", "delta", "ar_d", 1e-3, 4),
    "mdlm_d_b2": ("mdlm", "delta", "ar_d", 1e-3, 2),
    "mdlm_d_lr3e4": ("mdlm", "delta", "ar_d", 3e-4, 4),
    "mdlm_d_b2_lr3e4": ("mdlm", "delta", "ar_d", 3e-4, 2),
}
AR_START = 300


def config(qs_dir, out, name):
  base = quickstart_config.get_config()
  if name not in VARIANTS:
    return base, f"{qs_dir}/{name.split('_')[0]}"
  objective, target, init, lr, block = VARIANTS[name]
  c = copy.deepcopy(base)
  c.objective, c.data.target = objective, target
  c.data.train, c.data.valid = f"{qs_dir}/data/train.jsonl", f"{qs_dir}/data/valid.jsonl"
  c.data.tokenizer = f"{qs_dir}/data/{corpus.TOKENIZER_FILE}"
  c.train.ar_start_steps = 0
  c.diffusion.block_size, c.sample.steps = block, block
  if objective == "ar":
    c.data.seq_len = base.data.max_context_len + base.data.max_target_len
  if init:
    c.train.init_from = f"{qs_dir}/ar" if init == "qs_ar" else f"{out}/{init}"
    c.train.init_step, c.train.steps = AR_START, base.train.steps - AR_START
    c.optim.lr, c.optim.warmup_steps = lr, min(base.optim.warmup_steps, c.train.steps - 1)
  return c, f"{out}/{name}"


def main(qs_dir, out, mode, *names):
  confidence = None
  for arg in [n for n in names if n.startswith("--confidence=")]:
    confidence = arg.split("=", 1)[1]
  names = [n for n in names if not n.startswith("--")]
  if mode == "train":
    c, wd = config(qs_dir, out, names[0])
    train(c, wd)
    return
  base = quickstart_config.get_config()
  examples = qs.eval_examples(base, f"{qs_dir}/data")
  rows = {}
  for name in names:
    c, wd = config(qs_dir, out, name)
    if name not in VARIANTS and name.startswith("mdlm"):
      c = copy.deepcopy(c)  # QS's own MDLM: the whole-state quickstart's sampler
      c.diffusion.block_size, c.sample.steps, c.sample.confidence = 4, 4, "entropy"
    if confidence:
      c.sample.confidence = confidence
    tag = f"{name}_{c.sample.confidence}"
    rows[tag] = qs.predict_and_score(c, wd, examples, f"{out}/predictions_{tag}.jsonl")
  baselines, _ = qs.baseline_scores(examples)
  rows.update(baselines)
  print(qs.format_table(rows))


if __name__ == "__main__":
  main(*sys.argv[1:])
