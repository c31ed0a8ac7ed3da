"""State checks: the generic SCHEMA `checks` scorer and per-environment callbacks."""
