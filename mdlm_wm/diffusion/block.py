"""Block diffusion (BD3-LM / SDAR) rows and attention, started from an AR model.

The target (the next state up to and including its first <eot>; nothing
after it: no fill) is cut into blocks of b slots. A training row holds

    [context | noisy target slots | clean target slots]

and its attention mask lets a noisy block see the context, the clean blocks
before it and itself (bidirectionally); the clean copy is block-causal and
the context never sees either copy. The two copies share positions. Each
block draws its own time t; a noisy slot's label is masked with probability
1 - alpha(t) and counted with the ELBO weight.

Logit shift (`shift=True`, the AR start): slot j holds the token *before*
label j (slot 0 of block 0 holds the <target> marker, the context's last
token), exactly as an AR model's position i predicts token i + 1. The first
slot of every block therefore holds a token of the previous block and is
never masked; the other slots hold labels j - 1 masked as drawn. The last
label of a block is never an input of its own block, so it is counted
always (weight 1: its expected ELBO weight) rather than when masked. With
b = 1 every label is such a last label and the context is causal, so the
objective IS the AR next-token loss on the same rows: an AR start loses
nothing. Without the shift (`shift=False`, today's MDLM), slots hold the
labels themselves, every slot is maskable and the context is bidirectional.

Attention annealing (`future_keep_BLL`, DiffuLLaMA's recipe for an AR
start): a within-block key that lies after its query (noisy to noisy, clean
to clean) is kept only where `future_keep_BLL` is True. Training draws it
with a probability that grows from 0 (the AR's causal attention) to 1 (the
block's full bidirectional attention, which the sampler uses).

The clean copy's next-token loss (`causal_clean`, config
`diffusion.clean_ar_weight`; TiDAR's joint objective): the clean copy is
then causal inside its block too, whole, and its slots carry labels, so it
computes exactly what an AR model computes and is trained with the AR's
loss beside the ELBO. The sampler writes committed blocks into its cache
with the same causal mask.

b >= the target length is the full-canvas MDLM (one block, no clean copy).
The rows themselves are data (`data/block_rows.py`, built by the pipeline);
this module holds their attention mask.
"""

from __future__ import annotations

import jax.numpy as jnp

from mdlm_wm.data.block_rows import CLEAN, CONTEXT, NOISY


def block_attention_mask(segment_ids_BL, role_BL, block_BL, pos_BL, causal_context: bool,
                         future_keep_BLL=None, causal_clean: bool = False):
  """[B, L, L] mask of packed block-diffusion rows (see the module docstring);
  `future_keep_BLL` (bool, broadcastable to [B, L, L]) anneals in-block
  attention; `causal_clean` makes the clean copy causal inside its block too."""
  seg_q, seg_k = segment_ids_BL[:, :, None], segment_ids_BL[:, None, :]
  role_q, role_k = role_BL[:, :, None], role_BL[:, None, :]
  blk_q, blk_k = block_BL[:, :, None], block_BL[:, None, :]
  ctx_k = role_k == CONTEXT
  if causal_context:
    ctx_to_ctx = ctx_k & (pos_BL[:, None, :] <= pos_BL[:, :, None])
  else:
    ctx_to_ctx = ctx_k
  from_context = (role_q == CONTEXT) & ctx_to_ctx
  from_noisy = (role_q == NOISY) & (ctx_k | ((role_k == CLEAN) & (blk_k < blk_q))
                                   | ((role_k == NOISY) & (blk_k == blk_q)))
  clean_before = blk_k < blk_q
  if causal_clean:
    clean_before |= (blk_k == blk_q) & (pos_BL[:, None, :] <= pos_BL[:, :, None])
  else:
    clean_before |= blk_k == blk_q
  from_clean = (role_q == CLEAN) & (ctx_k | ((role_k == CLEAN) & clean_before))
  mask = (seg_q == seg_k) & (seg_k > 0) & (from_context | from_noisy | from_clean)
  if future_keep_BLL is not None:
    in_block_future = ((role_q == role_k) & (role_q != CONTEXT) & (blk_q == blk_k)
                       & (pos_BL[:, None, :] > pos_BL[:, :, None]))
    mask = mask & (future_keep_BLL | ~in_block_future)
  # A padding query attends to itself only, so its (unused) output is finite.
  L = segment_ids_BL.shape[1]
  return mask | (jnp.eye(L, dtype=bool)[None] & (seg_q == 0))
