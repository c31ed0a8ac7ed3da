"""The next state written as its change from the current one (`data.target = "delta"`).

Most of a next state repeats the current one: on the quickstart corpus 78% of
the determined facts are unchanged from s_t, and a world model that copies
s_t outscores models that must rewrite every value token by token. The
delta target lets the model leave out, or write as one constant token, what
did not change instead of copying it, in the three places where states keep
their facts:

  * the trailing status line `[k: v | k: v ...]`, when s_t's has the same
    keys in the same order: written `[= | k: v ...]` with only the entries
    whose value changed (`[=]`: none did);
  * a line that is a JSON object (the tool responses of shop and calendar):
    a top-level value equal to s_t's value of the same key (in s_t's JSON
    line at the same index) is written `"="`;
  * any other line equal to s_t's line at the same index is written `=`.

JSON keys stay in the target (a tool's response has its own keys, which the
action decides), and `apply_delta(delta_of(s1, s), s) == s1` unless s1
itself holds a bare `=` where a delta would (a JSON value, a line, a status
line; none of the built-in environments writes one): a state whose delta
would not read back exactly is written whole. `apply_delta` on a model's output
replaces what it can and leaves the rest (an `=` for a key s_t lacks, JSON
that does not parse) in place, so a broken delta stays a broken state for
the checks instead of being silently repaired.
"""

from __future__ import annotations

import json
import re

TARGETS = ("state", "delta")
SAME = "="
_STATUS = re.compile(r"\[([^\[\]]*)\]\s*$")
_SEP = " | "


def _pairs(parts: list[str]) -> list[tuple[str, str]] | None:
  """`key: value` strings as (key, value); None when one has no `: `."""
  out = []
  for part in parts:
    key, colon, value = part.partition(": ")
    if not colon:
      return None
    out.append((key, value))
  return out


def _json_dict(line: str) -> dict | None:
  """`line` parsed, when it is a JSON object."""
  if not line.startswith("{"):
    return None
  try:
    obj = json.loads(line)
  except ValueError:
    return None
  return obj if isinstance(obj, dict) else None


def _json_object(line: str) -> dict | None:
  """`line` as a JSON object when json.dumps writes it back exactly."""
  obj = _json_dict(line)
  return obj if obj is not None and json.dumps(obj) == line else None


def _line_delta(line: str, before: str | None) -> str:
  if before is None:
    return line
  if line == before and line:
    return SAME
  new, old = _json_object(line), _json_object(before)
  if new is not None and old is not None:
    out = {k: (SAME if k in old and old[k] == v and v != SAME else v) for k, v in new.items()}
    return json.dumps(out)
  return line


def _line_apply(line: str, before: str | None) -> str:
  if before is None:
    return line
  if line == SAME:
    return before
  obj, old = _json_dict(line), _json_object(before)
  if obj is None or old is None:
    return line
  if any(v == SAME and k not in old for k, v in obj.items()):
    return line
  return json.dumps({k: (old[k] if v == SAME else v) for k, v in obj.items()})


def _split_status(text: str) -> tuple[str, list[tuple[str, str]] | None]:
  """The text before the trailing status line and the line's (key, value)
  parts; (text, None) when it has none that reads back exactly from them."""
  m = _STATUS.search(text)
  parts = _pairs(m.group(1).split(_SEP)) if m else None
  if parts is None or _SEP.join(f"{k}: {v}" for k, v in parts) != m.group(1):
    return text, None
  return text[:m.start()], parts


def _status_delta(text: str) -> tuple[str, list[tuple[str, str]]] | None:
  """The body before a delta status line `[= | k: v ...]` and its parts."""
  m = _STATUS.search(text)
  if not m or not (m.group(1) == SAME or m.group(1).startswith(SAME + _SEP)):
    return None
  parts = _pairs(m.group(1).split(_SEP)[1:])
  return None if parts is None else (text[:m.start()], parts)


def _lines(body: str, old_body: str, line_fn) -> str:
  lines, old_lines = body.split("\n"), old_body.split("\n")
  return "\n".join(line_fn(line, old_lines[i] if i < len(old_lines) else None)
                   for i, line in enumerate(lines))


def delta_of(next_state: str, state: str) -> str:
  """`next_state` written as its change from `state` (module doc)."""
  body, parts = _split_status(next_state)
  old_body, old_parts = _split_status(state)
  if parts is None or old_parts is None:
    # Without two status lines to compare, compare the texts' lines whole.
    out = _lines(next_state, state, _line_delta)
  else:
    out = _lines(body, old_body, _line_delta)
    out += _status_line(parts, old_parts) or next_state[len(body):]
  # Exactness over cleverness: what does not read back is written whole.
  return out if apply_delta(out, state) == next_state else next_state


def _status_line(parts, old_parts) -> str | None:
  """`[= | k: v ...]` with the changed entries, when the keys match in order."""
  if [k for k, _ in parts] != [k for k, _ in old_parts]:
    return None
  return "[" + _SEP.join([SAME] + [f"{k}: {v}" for (k, v), (_, old) in
                                   zip(parts, old_parts) if v != old]) + "]"


def pinned_suffix(suffix: str, state: str) -> str:
  """A trailing anchor of the next state, as a delta target after `state`
  writes it: a status line with the keys of `state`'s, in the same order,
  becomes `[= | k: v ...]` (the entries that differ from `state`'s); anything
  else stays as given, which a delta may also state whole (apply_delta reads
  a whole status line or JSON value as written). So a pinned anchor is text
  the model was trained to write, and the state it describes ends with it."""
  head, parts = _split_status(suffix)
  _, old_parts = _split_status(state)
  line = _status_line(parts, old_parts) if parts is not None and old_parts is not None else None
  return suffix if line is None else head + line


def apply_delta(delta: str, state: str) -> str:
  """The next state a delta target describes, given the current `state`; the
  inverse of `delta_of`. What cannot be resolved is left as written."""
  old_body, old_parts = _split_status(state)
  found = _status_delta(delta) if old_parts is not None else None
  if found is None:
    body, parts = _split_status(delta)
    if parts is None or old_parts is None:
      return _lines(delta, state, _line_apply)
    tail = delta[len(body):]
  else:
    body, changes = found
    old = dict(old_parts)
    if all(k in old for k, _ in changes):
      new = {**old, **dict(changes)}
      tail = "[" + _SEP.join(f"{k}: {new[k]}" for k, _ in old_parts) + "]"
    else:
      tail = delta[len(body):]
  return _lines(body, old_body, _line_apply) + tail
