"""ml_collections experiment configs: one `get_config()` per file."""
