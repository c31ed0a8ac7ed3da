"""Tool calls as action text: `name({"arg": value, ...})`, parsed and schema-checked.

Environments that speak tools share this so that the same malformed call gets
the same error everywhere, and so that argument errors follow from the tool's
JSON-Schema `parameters` (types, required keys, enums, unknown keys).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from mdlm_wm.data.schema import Tool

_CALL = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*\((.*)\)\s*$", re.DOTALL)

_JSON_TYPES = {
    "string": (str,), "integer": (int,), "number": (int, float),
    "boolean": (bool,), "object": (dict,), "array": (list,),
}


class ToolCallError(ValueError):
  pass


class ToolCallRejected(ValueError):
  """A call the environment answers with an error status before running it."""

  def __init__(self, status: int, message: str):
    super().__init__(message)
    self.status = status


def resolve(tools: Sequence[Tool], action: str) -> tuple[str, dict[str, Any]]:
  """The tool name and arguments of a call that parses, names a tool of
  `tools` and fits its schema; else ToolCallRejected: 400 for a call that does
  not parse or breaks its schema (every problem, joined), 422 for an unknown
  tool. The one dispatcher in front of every tool environment's handlers."""
  try:
    name, args = parse_tool_call(action)
  except ToolCallError as e:
    raise ToolCallRejected(400, str(e)) from None
  spec = find_tool(tools, name)
  if spec is None:
    raise ToolCallRejected(422, f"unknown tool '{name}'")
  errors = validate_args(spec, args)
  if errors:
    raise ToolCallRejected(400, "; ".join(errors))
  return name, args


def format_tool_call(name: str, args: Mapping[str, Any]) -> str:
  return f"{name}({json.dumps(dict(args), ensure_ascii=False, sort_keys=True)})"


def parse_tool_call(text: str) -> tuple[str, dict[str, Any]]:
  """Parses `name({...})`; `name()` means no arguments. Raises ToolCallError."""
  m = _CALL.match(text)
  if not m:
    # No double quotes in messages: JSON responses would escape them.
    raise ToolCallError("not a tool call; expected name({...}) with JSON object arguments")
  name, body = m.group(1), m.group(2).strip()
  if not body:
    return name, {}
  try:
    args = json.loads(body)
  except json.JSONDecodeError as e:
    raise ToolCallError(f"arguments are not valid JSON ({e.msg})") from None
  except RecursionError:
    raise ToolCallError("arguments are nested too deeply") from None
  if not isinstance(args, dict):
    raise ToolCallError("arguments must be a JSON object")
  return name, args


def _type_ok(value: Any, type_name: str) -> bool:
  types = _JSON_TYPES.get(type_name)
  if types is None:
    return True
  if isinstance(value, bool) and type_name != "boolean":
    return False
  return isinstance(value, types)


def validate_args(tool: Tool, args: Mapping[str, Any]) -> list[str]:
  """Errors of `args` against the tool's JSON-Schema parameters, in a fixed order."""
  params = tool.parameters or {}
  props = params.get("properties", {})
  errors = []
  for key in params.get("required", []):
    if key not in args:
      errors.append(f"missing required argument '{key}'")
  for key in sorted(args):
    if key not in props:
      errors.append(f"unknown argument '{key}'")
      continue
    schema = props[key]
    value = args[key]
    if "type" in schema and not _type_ok(value, schema["type"]):
      errors.append(f"argument '{key}' must be {schema['type']}")
    elif "enum" in schema and value not in schema["enum"]:
      errors.append(f"argument '{key}' must be one of {schema['enum']}")
    elif "minimum" in schema and isinstance(value, (int, float)) and value < schema["minimum"]:
      errors.append(f"argument '{key}' must be >= {schema['minimum']}")
  return errors


def find_tool(tools: Sequence[Tool], name: str) -> Tool | None:
  for t in tools:
    if t.name == name:
      return t
  return None


def tool(name: str, description: str, properties: Mapping[str, Mapping[str, Any]],
         required: Sequence[str] = ()) -> Tool:
  """A Tool with an object-typed JSON-Schema parameters block."""
  return Tool(name, description, {"type": "object", "properties": dict(properties),
                                  "required": list(required)})
