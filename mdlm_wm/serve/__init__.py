"""The rollout HTTP service (`python -m launch.serve`): see `app` for the endpoints."""
