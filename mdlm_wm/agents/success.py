"""Task success judged on a state's text: agent GRPO's reward inside a world model.

A world model's states are text only, so agent GRPO asks a predicate
`success_fn(spec, state_text) -> bool` whether the task is solved once a
state has been predicted. `default_success_fn(env)` reads the facts each
built-in environment prints on its trailing anchor line:

  household  `progress: a/b` with a == b (exact: progress counts every sub-goal)
  files      `goal: a/b` with a == b (exact)
  lab        `task: done` (exact; `task: failed` is a loss)
  shop       buy tasks: a checkout reply (`"status": 201`) paid by the task's
             method with a total within its budget; cancel tasks: a
             cancellation reply (`"cancelled"` with a `"refund"`) for the
             order the task names, if it names one (a proxy: the items
             bought are not checked)
  calendar   a successful `email_send` reply to a person the task names, any
             recipient when the task allows a teammate (a proxy: the task's
             email is the expert's last action; the meeting is not checked)
  coin       (textworld_express/coin, textworld/coin_collector) the status
             line's inventory holds a coin (exact: taking it wins the game)
  alfworld   (the ALFWorld-style games) `placed: a/b` with a == b > 0; look
             tasks: `lamp: on` while `holding` an object of the kind the
             task names (their status line has no `placed`)
  other      (real environments) `progress`, `goal` or `score: a/b` with
             a == b > 0; `won`, `done` or `success: true/yes`; or a win
             sentence ("task complete", "you won", "*** The End ***"): as
             exact as the adapter's status line

Measured on the real next states of 60 seeds x {expert, noisy, random}
episodes per environment (tests/agents/test_success.py keeps the exact ones
exact): no false negatives anywhere; false positives 0 for household, lab
and files, 15 of 1,903 states (0.8%) for shop and 55 of 1,697 (3.2%) for
calendar. The ALFWorld-style predicate agrees with the engine on all 1,927
states of 5 train seeds x 3 policies x its 6 tasks (before it, their wins
were never recognised: their status line has no `progress` or `won`). Pass
your own predicate (any callable) where that is not enough; it is only ever
called on the host, between jitted calls.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from mdlm_wm.checks.result import parse_status_line
from mdlm_wm.data.schema import Spec

SuccessFn = Callable[[Spec, str], bool]

_FRACTION = re.compile(r"\b(progress|goal|score|placed):\s*(\d+)\s*/\s*(\d+)")
# ALFWorld's two look-task templates.
_TASK_EXAMINE = re.compile(r"\b(?:examine the (\w+) with the|look at (\w+) under the) \w+")
_FLAG = re.compile(r"\b(?:won|done|success):\s*(?:true|yes)\b", re.IGNORECASE)
_WIN = re.compile(r"task (?:is )?complete|you (?:have )?won|\*\*\* the end \*\*\*",
                  re.IGNORECASE)
_INVENTORY = re.compile(r"\binventory:\s*([^|\]\n]*)")
_COIN = re.compile(r"\bcoins?\b")
_LAB_DONE = re.compile(r"\|\s*task:\s*done\s*\|")
_SHOP_CHECKOUT = re.compile(r'"status":\s*201\b')
_SHOP_PAYMENT = re.compile(r'"payment":\s*"([a-z_]+)"')
_SHOP_TOTAL = re.compile(r'"total":\s*(\d+(?:\.\d+)?)')
_SHOP_REFUND = re.compile(r'"order_status":\s*"cancelled".*"refund"')
_SHOP_ORDER_ID = re.compile(r'"order_id":\s*"(O\d+)"')
_TASK_PAYMENT = re.compile(r"paid by ([a-z_]+)")
_TASK_BUDGET = re.compile(r"at most \$(\d+(?:\.\d+)?)")
_TASK_ORDER = re.compile(r"^Cancel order (O\d+)")
# email_send's reply; email_read's also holds a "message", but with "from" after the id.
_CALENDAR_SENT = re.compile(
    r'^\{"status":\s*200,\s*"message":\s*\{"id":\s*"[^"]*",\s*"to":\s*"([a-z]+\.[a-z]+)@')
# Overlapping matches: "Email Omar Costa" must yield "Omar Costa" too.
_TASK_PERSON = re.compile(r"(?=\b([A-Z][a-z]+) ([A-Z][a-z]+)\b)")


def fraction(state: str, keys: tuple[str, ...] = ("progress", "goal", "score")
             ) -> tuple[int, int] | None:
  """The last `key: a/b` fraction of the state (a status line comes last), or None."""
  found = [m for m in _FRACTION.finditer(state) if m.group(1) in keys]
  return (int(found[-1].group(2)), int(found[-1].group(3))) if found else None


def progress(state: str) -> float:
  """a / b of the state's last `progress` or `goal` fraction, clipped to [0, 1]; 0
  without one. Agent GRPO's optional shaping term."""
  frac = fraction(state, ("progress", "goal"))
  if frac is None or frac[1] <= 0:
    return 0.0
  return min(max(frac[0] / frac[1], 0.0), 1.0)


def _complete_fraction(keys: tuple[str, ...]) -> SuccessFn:
  def fn(spec: Spec, state: str) -> bool:
    del spec
    frac = fraction(state, keys)
    return frac is not None and frac[1] > 0 and frac[0] == frac[1]
  return fn


_household = _complete_fraction(("progress",))
_files = _complete_fraction(("goal",))
_any_fraction = _complete_fraction(("progress", "goal", "score"))
_placed = _complete_fraction(("placed",))


def _lab(spec: Spec, state: str) -> bool:
  del spec
  return bool(_LAB_DONE.search(state))


def _shop(spec: Spec, state: str) -> bool:
  if spec.task.startswith("Cancel"):
    named, shown = _TASK_ORDER.search(spec.task), _SHOP_ORDER_ID.search(state)
    return bool(_SHOP_REFUND.search(state)) and (
        named is None or (shown is not None and shown.group(1) == named.group(1)))
  payment, budget = _TASK_PAYMENT.search(spec.task), _TASK_BUDGET.search(spec.task)
  paid, total = _SHOP_PAYMENT.search(state), _SHOP_TOTAL.search(state)
  return (bool(_SHOP_CHECKOUT.search(state)) and None not in (payment, budget, paid, total)
          and paid.group(1) == payment.group(1) and float(total.group(1)) <= float(budget.group(1)))


def _calendar(spec: Spec, state: str) -> bool:
  sent = _CALENDAR_SENT.search(state.strip())
  if sent is None:
    return False
  # A schedule task may redirect to a teammate when the invitee is away.
  if "away" in spec.task:
    return True
  people = {f"{a}.{b}".lower() for a, b in _TASK_PERSON.findall(spec.task)}
  return sent.group(1) in people


def _alfworld(spec: Spec, state: str) -> bool:
  """`placed: a/b` with a == b > 0; look tasks ("examine the pen with the
  desklamp", "look at pen under the desklamp"): `lamp: on` while holding an
  object of the task's kind."""
  if _placed(spec, state):
    return True
  kind, status = _TASK_EXAMINE.search(spec.task), parse_status_line(state)
  if kind is None or status is None or status.get("lamp") != "on":
    return False
  held = [h.strip() for h in status.get("holding", "").split(",")]
  return any(h.rsplit(" ", 1)[0] == (kind.group(1) or kind.group(2)) for h in held)


def _holds_coin(spec: Spec, state: str) -> bool:
  del spec
  found = _INVENTORY.findall(state)
  return bool(found) and bool(_COIN.search(found[-1]))


def generic_success(spec: Spec, state: str) -> bool:
  """The fallback for environments without an entry of their own (see the table)."""
  return _any_fraction(spec, state) or bool(_FLAG.search(state) or _WIN.search(state))


_PREDICATES: dict[str, SuccessFn] = {
    "household": _household,
    "files": _files,
    "lab": _lab,
    "shop": _shop,
    "calendar": _calendar,
    "textworld_express/coin": _holds_coin,
    "textworld/coin_collector": _holds_coin,
}
# Real families whose every task shares one predicate.
_FAMILY_PREDICATES: dict[str, SuccessFn] = {"alfworld": _alfworld}


def default_success_fn(env: str) -> SuccessFn:
  """The predicate of environment `env` (a built-in name or `family/task`)."""
  family = env.partition("/")[0]
  return _PREDICATES.get(env) or _FAMILY_PREDICATES.get(family, generic_success)
