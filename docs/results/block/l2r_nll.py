"""Nats per target token of the conditionals a left-to-right sampler uses.

An AR model's is its validation loss. A block MDLM (with the logit shift)
sampled left to right, one token a step, predicts label p of a block with
labels 0..p-1 committed and the rest of the block masked; this scores
exactly those predictions (pass p masks the slots after p and reads label p),
so the two numbers are the same quantity. Also the MDLM's ELBO terms it
never uses left to right: label p with some earlier label still masked.

  python docs/results/block/l2r_nll.py CORPUS/valid.jsonl WORKDIR[@STEP] ...
"""
import sys

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from mdlm_wm.data import block_rows, schema
from mdlm_wm.data.serialize import transitions
from mdlm_wm.diffusion import block as block_lib
from mdlm_wm.world_model import WorldModel

MAX_EXAMPLES = 400


def rows_of(wm, data):
  out = []
  for ep in schema.iter_episodes(data):
    for tr in transitions(ep, wm.cfg.data.history_len):
      s = wm.serializer.serialize(tr)
      out.append((s.context_ids, s.target_ids))
      if len(out) == MAX_EXAMPLES:
        return out
  return out


BATCH = 16


def forward(wm):
  """Jitted logits -> log-probs of `labels` [B, L]."""
  @jax.jit
  def run(params, tokens, positions, seg, target_mask, attn, labels):
    model = nnx.merge(wm.graphdef, params)
    logits = model(tokens, positions, seg, target_mask, attn)
    logp = jax.nn.log_softmax(logits.astype(jnp.float32), -1)
    return -jnp.take_along_axis(logp, labels[..., None], -1)[..., 0]
  return lambda *a: np.asarray(run(wm.params, *(None if x is None else jnp.asarray(x) for x in a)))


def batches(rows, L):
  """Rows (dicts of 1-D arrays, same keys) padded to L, BATCH at a time."""
  for i in range(0, len(rows), BATCH):
    chunk = rows[i:i + BATCH] + [None] * (BATCH - len(rows[i:i + BATCH]))
    out = {}
    for k in rows[0]:
      out[k] = np.stack([np.pad(r[k], (0, L - len(r[k]))) if r is not None
                         else np.zeros(L, np.int32) for r in chunk])
    yield out


def length_of(rows):
  return -(-max(len(r["tokens"]) for r in rows) // 64) * 64


def ar_nll(wm, examples):
  rows = []
  for ctx, tgt in examples:
    toks = np.asarray(ctx + tgt, np.int32)
    counted = np.zeros_like(toks)
    counted[len(ctx) - 1:-1] = 1  # position i predicts token i + 1
    rows.append({"tokens": toks, "labels": np.append(toks[1:], 0).astype(np.int32),
                 "target": (np.arange(len(toks)) >= len(ctx)).astype(np.int32),
                 "counted": counted, "seg": np.ones_like(toks), "pos": np.arange(len(toks))})
  run = forward(wm)
  total = count = 0.0
  for bt in batches(rows, length_of(rows)):
    nll = run(bt["tokens"], bt["pos"], bt["seg"], bt["target"], None, bt["labels"])
    total += float((nll * bt["counted"]).sum())
    count += float(bt["counted"].sum())
  return total / count


def block_nll(wm, examples):
  """(left-to-right nats/token, nats/token of each label p with a slot before
  it masked: terms the left-to-right sampler never uses)."""
  b, shift, causal_clean = wm.block
  assert shift, "the left-to-right reading needs the logit shift"
  mask_id = wm.tokenizer.mask_id
  rows = []
  for ctx, tgt in examples:
    row = block_rows.block_row(ctx, tgt, b, True)
    c, n = len(ctx) - 1, len(tgt)
    in_block = np.full(len(row["tokens"]), -1, np.int32)
    in_block[c:c + n] = np.arange(n) % b  # a noisy slot's (and label's) index in its block
    rows.append({**row, "in_block": in_block, "seg": np.ones_like(row["tokens"])})
  run = forward(wm)
  L = length_of(rows)
  sums = np.zeros((b, b))  # [pass, label index in block]
  counts = np.zeros((b, b))
  for bt in batches(rows, L):
    attn = block_lib.block_attention_mask(*map(jnp.asarray, (bt["seg"], bt["role"], bt["block"],
                                                            bt["pos"])), causal_context=True,
                                          causal_clean=causal_clean)
    is_label = (bt["role"] == block_rows.NOISY) & (bt["seg"] > 0)
    for p in range(b):  # pass p: labels 0..p-1 of each block committed, the rest masked
      noisy = np.where((bt["maskable"] > 0) & (bt["in_block"] > p), mask_id, bt["tokens"])
      nll = run(noisy, bt["pos"], bt["seg"], None, attn, bt["labels"])
      for q in range(p, b):  # label q: visible in pass p only when q < p
        sel = is_label & (bt["in_block"] == q)
        sums[p, q] += nll[sel].sum()
        counts[p, q] += sel.sum()
  l2r = sum(sums[q, q] for q in range(b)) / sum(counts[q, q] for q in range(b))
  off = [(p, q) for p in range(b) for q in range(p + 1, b)]
  unused = (sum(sums[i] for i in off) / sum(counts[i] for i in off)) if off else float("nan")
  return l2r, unused


def main():
  data = sys.argv[1]
  for spec in sys.argv[2:]:
    wd, _, st = spec.partition("@")
    wm = WorldModel.load(wd, step=int(st) if st else None)
    ex = rows_of(wm, data)
    if wm.block is None:
      print(f"{spec}: AR, {ar_nll(wm, ex):.4f} nats/token ({len(ex)} examples)", flush=True)
    else:
      a, u = block_nll(wm, ex)
      print(f"{spec}: blocks of {wm.block[0]}, left to right {a:.4f} nats/token; labels read "
            f"with an earlier label of their block masked {u:.4f} ({len(ex)} examples)", flush=True)


if __name__ == "__main__":
  main()
