"""The rollout service: a FastAPI app over one WorldModel.

    app = build_app(WorldModel.load(workdir), ServeConfig(max_batch=16))
    uvicorn.run(app, port=8000)

Endpoints (JSON in and out; errors are `{"error": ..., "errors": [...]}` with
one `key.path: message` line per problem):
  GET    /v1/health                 liveness (never needs the API key)
  GET    /v1/info                   model, limits, sampler defaults, batching stats
  POST   /v1/step                   next states of one transition (dynamically batched)
  POST   /v1/rollout                open-loop rollouts of a list of actions
  POST   /v1/sessions               a session: the server keeps the history
  GET    /v1/sessions/{id}          its state and history
  POST   /v1/sessions/{id}/step     one action -> the next state
  DELETE /v1/sessions/{id}

All model calls run on one worker thread, so the event loop keeps accepting
(and batching) requests while the model works. Seeding: see `engine`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import fastapi
from fastapi import Depends, FastAPI, Request
from fastapi.responses import JSONResponse

from mdlm_wm.data.serialize import Transition
from mdlm_wm.serve import protocol
from mdlm_wm.serve.batcher import Batcher
from mdlm_wm.serve.config import ServeConfig
from mdlm_wm.serve.engine import Engine, StepJob, seed_of
from mdlm_wm.serve.protocol import RequestError
from mdlm_wm.serve.sessions import SessionStore
from mdlm_wm.world_model import WorldModel


def build_app(wm: WorldModel, config: ServeConfig = ServeConfig()) -> FastAPI:
  """The service for `wm`; `app.state` holds its engine, batcher and sessions."""
  config.validate()
  engine = Engine(wm)
  executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mdlm-wm-model")
  batcher = Batcher(engine.run_steps, max_batch=config.max_batch,
                    max_wait_s=config.max_wait_ms / 1000, executor=executor)
  sessions = SessionStore(config.max_sessions, config.session_ttl_s, config.max_history)
  model_name = config.model_name or wm.objective

  @contextlib.asynccontextmanager
  async def lifespan(_: FastAPI):
    yield
    await batcher.close()
    executor.shutdown(wait=True, cancel_futures=True)

  # No generated docs: the bodies are validated by hand (schema.py), so they
  # would document nothing, and they would be open routes beside the API key.
  app = FastAPI(title="mdlm-wm rollout service", lifespan=lifespan, docs_url=None,
                redoc_url=None, openapi_url=None)
  app.state.engine, app.state.batcher, app.state.sessions = engine, batcher, sessions

  @app.exception_handler(RequestError)
  async def request_error(_: Request, e: RequestError) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if e.status == 401 else None
    return JSONResponse({"error": str(e), "errors": e.errors}, status_code=e.status,
                        headers=headers)

  @app.exception_handler(Exception)
  async def internal_error(_: Request, e: Exception) -> JSONResponse:
    return JSONResponse({"error": f"internal error: {type(e).__name__}: {e}",
                         "errors": [f"server: {type(e).__name__}: {e}"]}, status_code=500)

  async def authorize(request: Request) -> None:
    if not config.api_key:
      return
    bearer = request.headers.get("authorization", "")
    given = bearer[7:] if bearer[:7].lower() == "bearer " else request.headers.get("x-api-key", "")
    if not hmac.compare_digest(given.encode(), config.api_key.encode()):
      raise RequestError(401, ["authorization: missing or wrong API key (send "
                               "'Authorization: Bearer KEY' or 'X-API-Key: KEY')"])

  async def body(request: Request) -> dict[str, Any]:
    return await read_json(request, config.max_request_bytes)

  async def serve_step(job: StepJob, sampling: protocol.Sampling):
    return await batcher.submit(engine.batch_key(sampling), job)

  @app.get("/v1/health")
  async def health() -> dict[str, Any]:
    return {"status": "ok", "model": model_name}

  api = fastapi.APIRouter(prefix="/v1", dependencies=[Depends(authorize)])

  @api.get("/info")
  async def info() -> dict[str, Any]:
    return {"model": model_name, **engine.info(), "limits": config.limits(),
            "batching": batcher.stats(), "sessions": len(sessions),
            "auth": bool(config.api_key)}

  @api.post("/step")
  async def step(obj: dict = Depends(body)) -> dict[str, Any]:
    start = time.perf_counter()
    req = protocol.parse_step(obj, config)
    engine.check(req.sampling, req.fixed, req.state)
    seed = seed_of(req.sampling)
    job = StepJob(Transition(req.spec, req.history, req.state, req.action), req.steer, req.fixed,
                  seed, req.env)
    result = await serve_step(job, req.sampling)
    return {"next_states": result.next_states, "seed": seed, "model": model_name,
            "elapsed_s": round(time.perf_counter() - start, 4), "batch_size": result.batch_size}

  @api.post("/rollout")
  async def rollout(obj: dict = Depends(body)) -> dict[str, Any]:
    start = time.perf_counter()
    req = protocol.parse_rollout(obj, config)
    engine.check(req.sampling)
    seed = seed_of(req.sampling)
    trajectories = await asyncio.get_running_loop().run_in_executor(
        executor, engine.rollout, req.spec, req.actions, req.state, req.steer, req.sampling, seed,
        req.env)
    return {"trajectories": trajectories, "seed": seed, "model": model_name,
            "elapsed_s": round(time.perf_counter() - start, 4)}

  @api.post("/sessions", status_code=201)
  async def create_session(obj: dict = Depends(body)) -> dict[str, Any]:
    req = protocol.parse_session(obj, config)
    engine.check(req.sampling)
    session = sessions.create(req.spec, req.state, req.steer, req.sampling, seed_of(req.sampling),
                              req.env)
    return {"session_id": session.id, "state": session.state, "seed": session.seed,
            "ttl_s": config.session_ttl_s}

  @api.get("/sessions/{session_id}")
  async def get_session(session_id: str) -> dict[str, Any]:
    session = sessions.get(session_id)
    return {"session_id": session.id, "state": session.state, "steps": session.steps,
            "history": [list(pair) for pair in session.history]}

  @api.post("/sessions/{session_id}/step")
  async def session_step(session_id: str, obj: dict = Depends(body)) -> dict[str, Any]:
    start = time.perf_counter()
    session = sessions.get(session_id)
    req = protocol.parse_session_step(obj, config)
    engine.check(session.sampling, req.fixed, session.state)
    async with session.lock:
      job = StepJob(Transition(session.spec, tuple(session.history), session.state, req.action),
                    session.steer, req.fixed, session.step_seed(), session.env)
      result = await serve_step(job, session.sampling)
      session.advance(req.action, result.next_states[0])
    return {"session_id": session.id, "next_state": session.state, "step": session.steps,
            "model": model_name, "elapsed_s": round(time.perf_counter() - start, 4),
            "batch_size": result.batch_size}

  @api.delete("/sessions/{session_id}")
  async def delete_session(session_id: str) -> dict[str, Any]:
    sessions.delete(session_id)
    return {"deleted": session_id}

  app.include_router(api)
  return app


async def read_json(request: Request, limit: int) -> dict[str, Any]:
  """The body as a JSON object, refused (413) once it passes `limit` bytes."""
  too_big = RequestError(413, [f"body: more than {limit} bytes exceeds the limit "
                               f"max_request_bytes={limit}"])
  declared = request.headers.get("content-length", "")
  if declared.isdigit() and int(declared) > limit:
    raise too_big
  raw = bytearray()
  async for chunk in request.stream():
    raw += chunk
    if len(raw) > limit:
      raise too_big
  return protocol.decode_body(bytes(raw))
