"""State checks: the generic `checks` scorer and per-environment callbacks."""
