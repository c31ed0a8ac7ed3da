"""Reinforcement learning on world models: GRPO objective pieces and rewards."""
