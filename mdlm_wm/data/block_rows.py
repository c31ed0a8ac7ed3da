"""Block-diffusion training rows: `[context | noisy target slots | clean target slots]`.

The layout the pipeline packs for the block-diffusion objective; what the
rows mean (the logit shift, which slot is maskable, which label is always
counted) and their attention mask are in `diffusion/block.py`. Also the one
rule on a row's length, which the pipeline and config.validate both apply.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

CONTEXT, NOISY, CLEAN = 0, 1, 2
ROW_FEATURES = ("tokens", "labels", "role", "block", "pos", "maskable", "last", "steer_mask")


def check_seq_len(seq_len: int, max_context_len: int, max_target_len: int, block: bool) -> None:
  """Raises ValueError (`seq_len: ...`) unless the longest example fits one row:
  context + target, or with block rows context + 2 x target."""
  copies = 2 if block else 1
  need = max_context_len + copies * max_target_len
  if seq_len < need:
    why = ("a block-diffusion row holds a noisy and a clean copy of the target" if block
           else "every example must fit one row")
    raise ValueError(f"seq_len: must be >= max_context_len + {copies} * max_target_len "
                     f"({max_context_len} + {copies} * {max_target_len} = {need}), got "
                     f"{seq_len}: {why}")


def block_row(context_ids: Sequence[int], target_ids: Sequence[int], block_size: int,
              shift: bool, steer_span: tuple[int, int] = (0, 0),
              clean_labels: bool = False) -> dict[str, np.ndarray]:
  """One training example as block-diffusion row features (int32 arrays).

  `context_ids` end with the <target> marker; `target_ids` end with <eot>
  (unless cut). `labels` is the token a noisy slot must predict (0 elsewhere),
  `role` CONTEXT / NOISY / CLEAN, `block` the slot's block (-1 in the
  context), `pos` the RoPE position, `maskable` 1 where the noisy input may
  be replaced by [MASK], `last` 1 on a block's last label. `clean_labels`
  (with the shift): the clean copy is whole and its slots carry their labels
  too, for the next-token loss on the clean copy.
  """
  if clean_labels and not shift:
    raise ValueError("clean_labels: needs shift (a clean slot predicts the label after it)")
  ctx = list(context_ids[:-1]) if shift else list(context_ids)
  target = list(target_ids)
  n, c = len(target), len(ctx)
  slots = ([context_ids[-1]] + target[:-1]) if shift else target
  j = np.arange(n)
  block = j // block_size
  n_blocks = int(block[-1]) + 1
  # Nothing attends to the last clean block: it is kept only for its labels.
  clean = np.ones(n, bool) if clean_labels else j < (n_blocks - 1) * block_size
  nc = int(clean.sum())
  slot_pos = c + j  # with the shift, slot 0 is the marker's own position
  zeros = lambda k: np.zeros(k, np.int32)
  row = {
      "tokens": np.concatenate([ctx, slots, np.asarray(slots)[:nc]]),
      "labels": np.concatenate([zeros(c), target,
                                np.asarray(target[:nc]) if clean_labels else zeros(nc)]),
      "role": np.concatenate([np.full(c, CONTEXT), np.full(n, NOISY), np.full(nc, CLEAN)]),
      "block": np.concatenate([np.full(c, -1), block, block[:nc]]),
      "pos": np.concatenate([np.arange(c), slot_pos, slot_pos[:nc]]),
      "maskable": np.concatenate([zeros(c), (j % block_size != 0) if shift else np.ones(n),
                                  zeros(nc)]),
      "last": np.concatenate([zeros(c), (j % block_size == block_size - 1) | (j == n - 1),
                              zeros(nc)]),
  }
  steer = zeros(len(row["tokens"]))
  steer[slice(*steer_span)] = 1  # the steer lies in the context, before any cut
  row["steer_mask"] = steer
  return {k: np.asarray(v, np.int32) for k, v in row.items()}
