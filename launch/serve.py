r"""Serves a trained world model over HTTP.

  python -m launch.serve --workdir=/tmp/mdlm_wm_quickstart/mdlm --port=8000 \
      [--api_key=KEY | env MDLM_WM_API_KEY=KEY] [--max_batch=16] [--max_wait_ms=10]

Endpoints and seeding: mdlm_wm/serve/app.py and mdlm_wm/serve/engine.py;
a client: examples/client.py. Needs `pip install fastapi uvicorn`.
"""

import os

import uvicorn
from absl import app, flags

from mdlm_wm.serve.app import build_app
from mdlm_wm.serve.config import ServeConfig
from mdlm_wm.utils import errors
from mdlm_wm.world_model import WorldModel

API_KEY_ENV = "MDLM_WM_API_KEY"
_DEFAULTS = ServeConfig()

FLAGS = flags.FLAGS
flags.DEFINE_string("workdir", None, "A training workdir (MDLM or AR).", required=True)
flags.DEFINE_integer("checkpoint_step", None, "Checkpoint step to serve; default: the latest.")
flags.DEFINE_string("host", "127.0.0.1", "Interface to listen on.")
flags.DEFINE_integer("port", 8000, "Port to listen on.")
flags.DEFINE_string("api_key", "", f"Required bearer key; empty: ${API_KEY_ENV}, else no auth.")
flags.DEFINE_string("model_name", "", "Name reported in responses; default: the objective.")
flags.DEFINE_integer("max_batch", _DEFAULTS.max_batch, "Step requests per sampler call.")
flags.DEFINE_float("max_wait_ms", _DEFAULTS.max_wait_ms,
                   "How long the first request of a batch waits for company.")
flags.DEFINE_integer("max_request_bytes", _DEFAULTS.max_request_bytes, "Request body limit.")
flags.DEFINE_integer("max_num_samples", _DEFAULTS.max_num_samples, "num_samples limit.")
flags.DEFINE_integer("max_steps", _DEFAULTS.max_steps, "Sampler steps limit (MDLM).")
flags.DEFINE_integer("max_text_chars", _DEFAULTS.max_text_chars, "Characters per text field.")
flags.DEFINE_integer("max_actions", _DEFAULTS.max_actions, "Actions per rollout.")
flags.DEFINE_integer("max_history", _DEFAULTS.max_history, "History pairs per step request.")
flags.DEFINE_integer("max_sessions", _DEFAULTS.max_sessions, "Open sessions limit.")
flags.DEFINE_float("session_ttl_s", _DEFAULTS.session_ttl_s, "Idle seconds before a session expires.")


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  config = ServeConfig(
      max_batch=FLAGS.max_batch, max_wait_ms=FLAGS.max_wait_ms,
      max_request_bytes=FLAGS.max_request_bytes, max_num_samples=FLAGS.max_num_samples,
      max_steps=FLAGS.max_steps, max_text_chars=FLAGS.max_text_chars,
      max_actions=FLAGS.max_actions, max_history=FLAGS.max_history,
      max_sessions=FLAGS.max_sessions, session_ttl_s=FLAGS.session_ttl_s,
      api_key=FLAGS.api_key or os.environ.get(API_KEY_ENV, ""), model_name=FLAGS.model_name)
  with errors.reported():
    config.validate()
    wm = WorldModel.load(FLAGS.workdir, step=FLAGS.checkpoint_step)
  print(f"serving {FLAGS.workdir} ({wm.objective}, {wm.num_params} params) on "
        f"http://{FLAGS.host}:{FLAGS.port} (auth: {'on' if config.api_key else 'off'})", flush=True)
  uvicorn.run(build_app(wm, config), host=FLAGS.host, port=FLAGS.port, log_level="info")


if __name__ == "__main__":
  app.run(main)
