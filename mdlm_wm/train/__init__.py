"""Training: objectives on packed batches, the sharded loop, checkpoints, metrics."""
