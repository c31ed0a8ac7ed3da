"""Evaluation metrics: text overlap and diversity (`metrics`), state checks
(`grounding`) and bootstrap confidence intervals (`stats`). Every function is
pure and deterministic, so reports can be recomputed from saved predictions."""
