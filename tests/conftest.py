"""Shared fixtures (hand-made episodes in the trajectory format, a tiny corpus and
models) and the session's XLA compilation cache."""

import json
import os
import sys

import pytest

# JAX options (each also read from its upper-cased environment variable):
# cache every compilation, however quick or small.
_JAX_CACHE_SETTINGS = {"jax_persistent_cache_min_compile_time_secs": 0,
                       "jax_persistent_cache_min_entry_size_bytes": 0}


def pytest_configure(config):
  """Points JAX's persistent compilation cache, in this process and in every
  launcher a test starts, at pytest's cache directory: most of a tiny test is
  compiling, and the tests (in process and in subprocesses) compile the same
  tiny programs again and again. Without the cache plugin (-p
  no:cacheprovider) the cache is off. `pytest --cache-clear` empties it."""
  cache_plugin = getattr(config, "cache", None)
  if cache_plugin is None or "JAX_COMPILATION_CACHE_DIR" in os.environ:
    return
  settings = {"jax_compilation_cache_dir": str(cache_plugin.mkdir("jax_compilation_cache")),
              **_JAX_CACHE_SETTINGS}
  os.environ.update({name.upper(): str(value) for name, value in settings.items()})
  if "jax" in sys.modules:  # imported by a plugin: it has read the variables already
    for name, value in settings.items():
      sys.modules["jax"].config.update(name, value)


def episode_dict(i: int = 0, n_steps: int = 2, env: str = "toy") -> dict:
  steps = [{"state": f"house {i} room {k}", "action": f"go north {k}",
            "next_state": f"You are in room {k + 1}. A key lies here.\n[location: room {k + 1}]",
            "reward": float(k == n_steps - 1), "done": k == n_steps - 1,
            "checks": {"must_include": ["key"], "fields": {"location": f"room {k + 1}"}}}
           for k in range(n_steps)]
  return {"id": f"{env}/{i}", "env": env,
          "spec": {"initial_state": "room 0", "task": "Find the key.",
                   "tools": [{"name": "go", "description": "Move.",
                              "parameters": {"type": "object",
                                             "properties": {"dir": {"type": "string"}},
                                             "required": ["dir"]}}],
                   "rules": ["Rooms connect north."], "steer": "be terse" if i % 2 else ""},
          "steps": steps, "meta": {"policy": "expert", "success": True}}


@pytest.fixture
def write_jsonl(tmp_path):
  """Writes lines (dicts are JSON-encoded, str/bytes written as is) to a file."""

  def write(lines, name="data.jsonl"):
    path = tmp_path / name
    with open(path, "wb") as f:
      for line in lines:
        if isinstance(line, dict):
          line = json.dumps(line) + "\n"
        if isinstance(line, str):
          line = line.encode("utf-8")
        f.write(line)
    return str(path)

  return write


@pytest.fixture(scope="session")
def tiny_corpus(tmp_path_factory) -> str:
  """A small built-in corpus with its tokenizer, built once per test session."""
  from mdlm_wm import corpus
  from mdlm_wm.envs import registry
  out = str(tmp_path_factory.mktemp("tiny_corpus"))
  corpus.build_corpus(corpus.CorpusConfig(envs=registry.env_names(), episodes_per_env=8, seed=1,
                                          tokenizer_vocab=512), out, verbose=False)
  return out


@pytest.fixture(scope="session")
def tiny_models(tiny_corpus, tmp_path_factory) -> dict[str, str]:
  """Workdirs of a 4-step tiny MDLM and AR model ({"mdlm": dir, "ar": dir}),
  trained once per test session: loadable with `WorldModel.load`."""
  from mdlm_wm.train.trainer import train
  out = {}
  for objective in ("mdlm", "ar"):
    workdir = str(tmp_path_factory.mktemp(f"tiny_{objective}"))
    train(tiny_config(tiny_corpus, objective=objective, **{"train.steps": 4}), workdir)
    out[objective] = workdir
  return out


def tiny_config(corpus_dir: str, **overrides):
  """configs/tiny.py pointed at `corpus_dir`, with dotted-key overrides."""
  from configs import tiny
  cfg = tiny.get_config()
  cfg.data.train = f"{corpus_dir}/train.jsonl"
  cfg.data.valid = f"{corpus_dir}/valid.jsonl"
  cfg.data.tokenizer = f"{corpus_dir}/tokenizer.model"
  return apply_overrides(cfg, **overrides)


def read_metrics(workdir: str) -> list[dict]:
  """The lines of WORKDIR/metrics.jsonl."""
  with open(f"{workdir}/metrics.jsonl") as f:
    return [json.loads(line) for line in f]


def apply_overrides(cfg, **overrides):
  """Sets dotted keys (`"train.steps": 4`) on a ConfigDict; returns it."""
  for key, value in overrides.items():
    node = cfg
    *path, leaf = key.split(".")
    for p in path:
      node = node[p]
    node[leaf] = value
  return cfg
