"""The trajectory JSONL format (docs/schema.md): typed episodes, validation, streaming I/O.

Every consumer reads episodes through `iter_episodes`, which streams a file
line by line (plain or gzip) so a corpus larger than memory never has to be
loaded at once. Validation collects up to `max_errors` problems per file, each
naming the file, the 1-based line and the key path, before raising.
"""

from __future__ import annotations

import dataclasses
import gzip
import io
import json
import math
import os
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

MAX_ERRORS_PER_FILE = 20
# A corpus directory's split files (`train.jsonl`, ...) and a real
# environment's seed splits: one list for the corpus builders, the adapters
# and the config's task splits.
SPLITS = ("train", "valid", "test")


@dataclasses.dataclass(frozen=True)
class Tool:
  name: str
  description: str = ""
  parameters: Mapping[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Spec:
  """The five global anchors: s0, c, T, R and z."""
  initial_state: str
  task: str
  tools: tuple[Tool, ...] = ()
  rules: tuple[str, ...] = ()
  steer: str = ""


@dataclasses.dataclass(frozen=True)
class Checks:
  """Deterministic facts about a next state (see docs/schema.md, `checks`)."""
  must_include: tuple[str, ...] = ()
  must_exclude: tuple[str, ...] = ()
  fields: Mapping[str, str] = dataclasses.field(default_factory=dict)
  # Keys of `fields` and items of `must_include` that are new hidden
  # information at this step (drawn by the simulator, not implied by the spec,
  # s_t and a_t). Everything else is determined.
  revealed: tuple[str, ...] = ()

  def is_empty(self) -> bool:
    return not (self.must_include or self.must_exclude or self.fields)

  def is_revealed_field(self, key: str) -> bool:
    return key in self.revealed and key in self.fields

  def is_revealed_include(self, item: str) -> bool:
    return item in self.revealed and item in self.must_include


@dataclasses.dataclass(frozen=True)
class Step:
  state: str
  action: str
  next_state: str
  reward: float = 0.0
  done: bool = False
  checks: Checks = dataclasses.field(default_factory=Checks)


@dataclasses.dataclass(frozen=True)
class Episode:
  id: str
  env: str
  spec: Spec
  steps: tuple[Step, ...]
  meta: Mapping[str, Any] = dataclasses.field(default_factory=dict)


class SchemaError(ValueError):
  """Raised with every problem found in one file (up to the per-file cap)."""

  def __init__(self, errors: list[str], truncated: bool = False):
    self.errors = list(errors)
    self.truncated = truncated
    msg = "\n".join(self.errors)
    if truncated:
      msg += f"\n(stopped after {len(self.errors)} errors)"
    super().__init__(msg)


# --------------------------------------------------------------------------
# Validation: dict -> Episode, collecting (key path, message) problems.


class _Problems:

  def __init__(self):
    self.items: list[tuple[str, str]] = []

  def add(self, path: str, msg: str) -> None:
    self.items.append((path, msg))


def _get(obj: Mapping, key: str, path: str, types, problems: _Problems,
         required: bool = True, default=None, type_name: str = ""):
  """Returns obj[key] if it has the right type; records a problem otherwise."""
  where = f"{path}.{key}" if path else key
  if key not in obj:
    if required:
      problems.add(where, "missing")
    return default
  value = obj[key]
  # bool is an int subclass: never accept it where a number is expected.
  if isinstance(value, bool) and bool not in _as_tuple(types):
    problems.add(where, f"expected {type_name}, got bool")
    return default
  if not isinstance(value, types):
    problems.add(where, f"expected {type_name}, got {_json_type(value)}")
    return default
  return value


def _as_tuple(types):
  return types if isinstance(types, tuple) else (types,)


def _json_type(value) -> str:
  if value is None:
    return "null"
  return {bool: "bool", int: "number", float: "number", str: "string",
          list: "list", dict: "object"}.get(type(value), type(value).__name__)


def _str_list(obj, key, path, problems, required=True) -> tuple[str, ...]:
  items = _get(obj, key, path, list, problems, required, [], "list")
  out = []
  for i, item in enumerate(items):
    if isinstance(item, str):
      out.append(item)
    else:
      problems.add(f"{path}.{key}[{i}]", f"expected string, got {_json_type(item)}")
  return tuple(out)


def _parse_tool(obj, path, problems) -> Tool | None:
  if not isinstance(obj, dict):
    problems.add(path, f"expected object, got {_json_type(obj)}")
    return None
  name = _get(obj, "name", path, str, problems, type_name="string")
  if name is not None and not name:
    problems.add(f"{path}.name", "empty")
  description = _get(obj, "description", path, str, problems, False, "", "string")
  parameters = _get(obj, "parameters", path, dict, problems, False, {}, "object")
  return Tool(name or "", description, parameters)


def _parse_spec(obj, problems) -> Spec:
  path = "spec"
  initial_state = _get(obj, "initial_state", path, str, problems, type_name="string")
  task = _get(obj, "task", path, str, problems, type_name="string")
  tools_raw = _get(obj, "tools", path, list, problems, default=[], type_name="list")
  parsed = (_parse_tool(raw, f"{path}.tools[{i}]", problems) for i, raw in enumerate(tools_raw))
  tools = tuple(t for t in parsed if t is not None)
  rules = _str_list(obj, "rules", path, problems)
  steer = _get(obj, "steer", path, str, problems, False, "", "string")
  return Spec(initial_state or "", task or "", tools, rules, steer)


def _parse_checks(obj, path, problems) -> Checks:
  must_include = _str_list(obj, "must_include", path, problems, required=False)
  must_exclude = _str_list(obj, "must_exclude", path, problems, required=False)
  raw = _get(obj, "fields", path, dict, problems, False, {}, "object")
  fields = {}
  for key, value in raw.items():
    # Numbers and booleans are facts too; they are compared as text.
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
      fields[key] = str(value)
    elif isinstance(value, bool):
      fields[key] = "true" if value else "false"
    else:
      problems.add(f"{path}.fields.{key}", f"expected string or number, got {_json_type(value)}")
  revealed = _str_list(obj, "revealed", path, problems, required=False)
  for i, name in enumerate(revealed):
    if name not in fields and name not in must_include:
      problems.add(f"{path}.revealed[{i}]",
                   f"{name!r} names no key of fields and no item of must_include")
  return Checks(must_include, must_exclude, fields, revealed)


def _parse_step(obj, path, problems) -> Step | None:
  if not isinstance(obj, dict):
    problems.add(path, f"expected object, got {_json_type(obj)}")
    return None
  state = _get(obj, "state", path, str, problems, type_name="string")
  action = _get(obj, "action", path, str, problems, type_name="string")
  next_state = _get(obj, "next_state", path, str, problems, type_name="string")
  reward = _get(obj, "reward", path, (int, float), problems, False, 0.0, "number")
  if isinstance(reward, float) and not math.isfinite(reward):
    problems.add(f"{path}.reward", "not finite")
  done = _get(obj, "done", path, bool, problems, False, False, "bool")
  checks_raw = _get(obj, "checks", path, dict, problems, False, None, "object")
  checks = _parse_checks(checks_raw, f"{path}.checks", problems) if checks_raw else Checks()
  return Step(state or "", action or "", next_state or "", float(reward), done, checks)


def episode_from_dict(obj: Any) -> Episode:
  """Validates one decoded JSON line. Raises SchemaError listing key paths."""
  problems = _Problems()
  if not isinstance(obj, dict):
    raise SchemaError([f"line: expected a JSON object, got {_json_type(obj)}"])
  ep_id = _get(obj, "id", "", str, problems, False, "", "string")
  env = _get(obj, "env", "", str, problems, False, "", "string")
  spec_raw = _get(obj, "spec", "", dict, problems, type_name="object")
  spec = _parse_spec(spec_raw, problems) if spec_raw is not None else None
  steps_raw = _get(obj, "steps", "", list, problems, type_name="list")
  steps = []
  if steps_raw is not None:
    if not steps_raw:
      problems.add("steps", "empty (an episode needs at least one step)")
    for i, s in enumerate(steps_raw):
      step = _parse_step(s, f"steps[{i}]", problems)
      if step is not None:
        steps.append(step)
  meta = _get(obj, "meta", "", dict, problems, False, {}, "object")
  if problems.items:
    raise SchemaError([f"{path}: {msg}" for path, msg in problems.items])
  return Episode(ep_id, env, spec, tuple(steps), meta)


# --------------------------------------------------------------------------
# Serialization: Episode -> dict (the exact shape of docs/schema.md).


def tool_to_dict(tool: Tool) -> dict:
  return {"name": tool.name, "description": tool.description,
          "parameters": dict(tool.parameters)}


def checks_to_dict(checks: Checks) -> dict:
  out = {}
  if checks.must_include:
    out["must_include"] = list(checks.must_include)
  if checks.must_exclude:
    out["must_exclude"] = list(checks.must_exclude)
  if checks.fields:
    out["fields"] = dict(checks.fields)
  if checks.revealed:
    out["revealed"] = list(checks.revealed)
  return out


def episode_to_dict(ep: Episode) -> dict:
  spec = ep.spec
  steps = []
  for s in ep.steps:
    d = {"state": s.state, "action": s.action, "next_state": s.next_state,
         "reward": s.reward, "done": s.done}
    if not s.checks.is_empty():
      d["checks"] = checks_to_dict(s.checks)
    steps.append(d)
  return {
      "id": ep.id, "env": ep.env,
      "spec": {"initial_state": spec.initial_state, "task": spec.task,
               "tools": [tool_to_dict(t) for t in spec.tools],
               "rules": list(spec.rules), "steer": spec.steer},
      "steps": steps,
      "meta": dict(ep.meta),
  }


def episode_to_json(ep: Episode) -> str:
  # sort_keys off: key order is part of byte-identical corpus output and is
  # fixed by episode_to_dict; ensure_ascii off keeps text readable.
  return json.dumps(episode_to_dict(ep), ensure_ascii=False, separators=(",", ":"))


# --------------------------------------------------------------------------
# Streaming file I/O.


def _open_binary(path: str):
  if path.endswith(".gz"):
    return gzip.open(path, "rb")
  return open(path, "rb")


def iter_records(path: str, *, name: str | None = None,
                 max_errors: int = MAX_ERRORS_PER_FILE) -> Iterator[tuple[int, Episode]]:
  """Streams (byte offset of the line, validated episode) from one file.

  Invalid lines are collected as `file:line: key: message`; once the file is
  exhausted, or `max_errors` problems are found, a SchemaError is raised with
  all of them (nothing more is yielded after the first bad line, so a
  consumer never trains on part of a broken file). `name` is the file name
  used in messages (when `path` is a decompressed copy).
  """
  name = name or os.fspath(path)
  errors: list[str] = []
  seen_any = False
  offset = 0
  try:
    with _open_binary(path) as f:
      for lineno, raw in enumerate(f, start=1):
        line_offset, offset = offset, offset + len(raw)
        if not raw.strip():
          continue
        seen_any = True
        try:
          ep = decode_line(raw)
        except SchemaError as e:
          errors += [f"{name}:{lineno}: {msg}" for msg in e.errors]
          if len(errors) >= max_errors:
            raise SchemaError(errors[:max_errors], truncated=True) from None
          continue
        if not errors:
          yield line_offset, ep
  except (OSError, EOFError, gzip.BadGzipFile) as e:
    errors.append(f"{name}: cannot read: {e}")
  if not seen_any and not errors:
    errors.append(f"{name}: empty file (no episodes)")
  if errors:
    raise SchemaError(errors)


def iter_episodes(path: str, *, max_errors: int = MAX_ERRORS_PER_FILE) -> Iterator[Episode]:
  """Streams validated episodes from a `.jsonl` or `.jsonl.gz` file."""
  for _, ep in iter_records(path, max_errors=max_errors):
    yield ep


def decode_line(raw: bytes) -> Episode:
  """Decodes and validates one raw JSONL line (raises SchemaError)."""
  try:
    text = raw.decode("utf-8")
  except UnicodeDecodeError as e:
    raise SchemaError([f"invalid UTF-8 at byte {e.start}"]) from None
  try:
    obj = json.loads(text)
  except json.JSONDecodeError as e:
    hint = " (truncated line?)" if not text.endswith("\n") else ""
    raise SchemaError([f"invalid JSON: {e.msg} at column {e.colno}{hint}"]) from None
  return episode_from_dict(obj)


def load_episodes(paths: str | Iterable[str]) -> list[Episode]:
  """Reads whole files into memory: for small corpora, tests and notebooks."""
  if isinstance(paths, (str, os.PathLike)):
    paths = [paths]
  return [ep for p in paths for ep in iter_episodes(p)]


def write_episodes(path: str, episodes: Iterable[Episode]) -> int:
  """Writes episodes as JSONL (gzip when the name ends in .gz); returns count.

  Writes to a temporary name first so a crash never leaves a half file under
  the final name.
  """
  tmp = path + ".tmp"
  n = 0
  # mtime=0 keeps gzip output byte-identical across runs.
  raw = open(tmp, "wb")
  stream = gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) if path.endswith(".gz") else raw
  with io.TextIOWrapper(stream, encoding="utf-8", newline="\n") as f:
    for ep in episodes:
      f.write(episode_to_json(ep))
      f.write("\n")
      n += 1
  if stream is not raw:
    raw.close()
  os.replace(tmp, path)
  return n
