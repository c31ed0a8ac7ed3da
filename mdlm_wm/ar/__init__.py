"""The autoregressive baseline: next-token loss and the KV-cache decoder."""
