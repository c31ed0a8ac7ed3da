"""Trajectory data: schema, tokenizer, serializer and input pipeline."""
