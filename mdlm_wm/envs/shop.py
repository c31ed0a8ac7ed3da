"""A tau-bench-like customer-service shop API: tools over a hidden product and order DB.

World: a catalog of 8-15 products (ids like P104) from a bounded vocabulary of
kinds ("lamp", "kettle", ...; names like "black desk lamp"), each with a price
and a stock count; the customer's cart (at most 6 product lines); and the
customer's past orders (ids like O5521) with lines, a payment method and a
status (pending, shipped, delivered, cancelled). Actions are tool calls
`name({"arg": value})` parsed and schema-checked by `toolcall`; the tools are
the spec's tools.

Tasks:
- buy: order N units of one kind (and M of another) in one order, paid by a
  given method, with the order total at most a budget;
- cancel: cancel a pending order (named by id, or by a product it contains)
  with the reason the customer gives;
- replace: look up an order, report its current status with report_status,
  then buy replacement units of its kind under a budget.
Success is judged on the DB (the order book and the reports), never on text.

Responses are compact JSON with a status code (200/201 ok; 400 bad call or
argument, straight from `validate_args`; 404 unknown product/order; 409
conflict: out of stock, full cart, order not cancellable; 422 unknown tool;
503 payment service down). Trailing anchor: every response ends with
`"cart_count": n, "cart_total": t, "open_orders": k}` (cart lines, cart value
before discounts, pending orders), which depends on the whole session; list
responses give their `count` (and an order's `subtotal`, `discount`, `total`)
after the item list.

What a world model can know: every response's facts are split (checks.revealed)
into determined ones, which follow from the spec and the states so far, and
revealed ones, which the DB shows for the first time: the products a search
lists (ids, names, prices, stock) until the states fix its result, a product
or order never shown, an order's lines before get_order, the outcome of an
add whose stock no state showed, a new order's id before the ids are known.
`check` grades determined facts and constraints on revealed content (a
search lists products whose names contain the query, cheapest first, with
catalogue ids, names and prices; counts and totals match the listed lines;
a failed call changes nothing; a new order id is above every id shown).
`_Known` is what the states so far have shown; `fork_hidden` re-draws
everything outside it (the twin world of envs/twin.py).

Steers: items frequently out of stock (the cheapest product of each kind the
task needs, and about a third of the others, have stock 0: 409 on add; the
expert buys the next cheapest); a 10% checkout discount (field `discount`);
a flaky payment service (the first checkout attempt fails with 503; retry);
shipped orders can still be cancelled (200 instead of 409).
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
import re
from typing import Any

from mdlm_wm.checks import generic
from mdlm_wm.checks.result import FORMAT, CheckResult
from mdlm_wm.data.schema import Checks, Spec, Step
from mdlm_wm.envs.base import Env, StepResult
from mdlm_wm.envs.toolcall import (ToolCallError, ToolCallRejected, find_tool, format_tool_call,
                                   parse_tool_call, resolve, tool, validate_args)

# Kind -> product base names; the kind is always the last word of a name, so a
# search for the kind finds every product of it.
KINDS = {
    "lamp": ("desk lamp", "floor lamp", "reading lamp"),
    "kettle": ("electric kettle", "glass kettle", "travel kettle"),
    "mug": ("ceramic mug", "travel mug", "enamel mug"),
    "chair": ("office chair", "folding chair", "garden chair"),
    "towel": ("bath towel", "beach towel", "hand towel"),
    "pillow": ("foam pillow", "down pillow", "neck pillow"),
    "backpack": ("hiking backpack", "laptop backpack", "school backpack"),
    "charger": ("usb charger", "wireless charger", "car charger"),
    "blender": ("hand blender", "mini blender", "glass blender"),
    "notebook": ("spiral notebook", "grid notebook", "pocket notebook"),
}
# Price range per kind in whole dollars.
PRICES = {"lamp": (15, 60), "kettle": (20, 70), "mug": (5, 20), "chair": (40, 150),
          "towel": (8, 30), "pillow": (12, 45), "backpack": (25, 90), "charger": (10, 40),
          "blender": (25, 80), "notebook": (3, 12)}
COLORS = ("black", "white", "red", "blue", "green", "grey")
PAYMENTS = ("card", "paypal", "gift_card")
STATUSES = ("pending", "shipped", "delivered", "cancelled")
REASONS = {"changed_mind": "changed their mind", "found_cheaper": "found it cheaper elsewhere",
           "ordered_by_mistake": "ordered it by mistake", "too_slow": "finds delivery too slow"}
MAX_CART_LINES = 6
MAX_RESULTS = 5
TAIL = ("cart_count", "cart_total", "open_orders")
STOCKS = (0, 1, 2, 3, 4, 5, 6, 8)
# The catalogue's vocabulary, which invented products must use: ids P100-P999,
# order ids O1000-O9999, names "[color] base".
PRODUCT_ID = re.compile(r"P[1-9]\d\d")
ORDER_ID = re.compile(r"O[1-9]\d{3}")
NAMES = frozenset(n for bases in KINDS.values() for b in bases
                  for n in (b, *(f"{c} {b}" for c in COLORS)))
# Statuses each tool can answer besides 400 (a bad call or argument).
OUTCOMES = {"search_products": {200}, "get_product": {200, 404}, "add_to_cart": {200, 404, 409},
            "remove_from_cart": {200, 404}, "view_cart": {200}, "checkout": {201, 409, 503},
            "list_orders": {200}, "get_order": {200, 404}, "cancel_order": {200, 404, 409},
            "report_status": {200, 404}}
# Share of the kinds no state has shown that a twin catalogue stocks (the
# reset catalogue has 4-5 of the 10 kinds).
KIND_PRESENT = 0.45

STEER_OOS = "Items are frequently out of stock."
STEER_DISCOUNT = "A 10% discount applies at checkout."
STEER_FLAKY = "The payment service is flaky: the first checkout attempt fails with 503."
STEER_INTERCEPT = "Shipped orders can still be cancelled."
STEER_RULES = {
    STEER_OOS: "Active steer: many products are out of stock (stock 0); adding one fails "
               "with 409, so pick another product of the same kind.",
    STEER_DISCOUNT: "Active steer: checkout takes 10% off the subtotal (rounded to the cent), "
                    "shown as discount; the budget applies to the discounted total.",
    STEER_FLAKY: "Active steer: the first checkout attempt fails with 503 and changes "
                 "nothing; retrying the checkout works.",
    STEER_INTERCEPT: "Active steer: shipped orders can still be cancelled; delivered and "
                     "cancelled ones cannot.",
}

_ID = {"type": "string"}
TOOLS = (
    tool("search_products", "Products whose name contains the query, cheapest first (at most 5).",
         {"query": {"type": "string"}, "max_price": {"type": "number"}}, ["query"]),
    tool("get_product", "Details and stock of one product.", {"product_id": _ID}, ["product_id"]),
    tool("add_to_cart", "Add units of a product to the cart.",
         {"product_id": _ID, "quantity": {"type": "integer", "minimum": 1}},
         ["product_id", "quantity"]),
    tool("remove_from_cart", "Remove a product line from the cart.", {"product_id": _ID},
         ["product_id"]),
    tool("view_cart", "Show the cart.", {}),
    tool("checkout", "Pay for the cart; it becomes a pending order.",
         {"payment_method": {"type": "string", "enum": list(PAYMENTS)}}, ["payment_method"]),
    tool("list_orders", "The customer's orders and their statuses.", {}),
    tool("get_order", "Lines, totals and status of one order.", {"order_id": _ID}, ["order_id"]),
    tool("cancel_order", "Cancel a pending order.",
         {"order_id": _ID, "reason": {"type": "string", "enum": sorted(REASONS)}},
         ["order_id", "reason"]),
    tool("report_status", "Tell the customer the status of an order.",
         {"order_id": _ID, "order_status": {"type": "string", "enum": list(STATUSES)}},
         ["order_id", "order_status"]),
)


@dataclasses.dataclass
class _Product:
  id: str
  name: str
  kind: str
  price: int  # cents: totals are exact integers, rendered as dollars.
  stock: int


@dataclasses.dataclass
class _Order:
  id: str
  lines: dict[str, int]  # product id -> quantity, sorted by id
  payment: str
  status: str
  subtotal: int
  discount: int = 0
  reason: str = ""
  new: bool = False  # placed during this episode

  @property
  def total(self) -> int:
    return self.subtotal - self.discount


@dataclasses.dataclass
class _World:
  """The hidden DB plus what the agent has looked at (the expert's memory)."""
  products: dict[str, _Product]
  orders: dict[str, _Order]
  cart: dict[str, int]
  reports: dict[str, str] = dataclasses.field(default_factory=dict)
  seen_products: set[str] = dataclasses.field(default_factory=set)
  viewed_orders: set[str] = dataclasses.field(default_factory=set)
  listed_orders: bool = False
  pay_attempts: int = 0


@dataclasses.dataclass
class _Known:
  """What the spec and the states so far have shown: the facts a world model
  can know. A response fact that does not follow from these is revealed, and
  `fork_hidden` re-draws everything outside them."""
  products: dict[str, tuple[str, int]] = dataclasses.field(default_factory=dict)  # name, cents
  stock: dict[str, int] = dataclasses.field(default_factory=dict)  # as shown, kept up to date
  fits: set[str] = dataclasses.field(default_factory=set)  # cart lines known to be in stock
  no_product: set[str] = dataclasses.field(default_factory=set)  # ids answered 'unknown'
  orders: set[str] = dataclasses.field(default_factory=set)  # order ids known to exist
  statuses: dict[str, str] = dataclasses.field(default_factory=dict)
  lines: set[str] = dataclasses.field(default_factory=set)  # orders whose lines were listed
  no_order: set[str] = dataclasses.field(default_factory=set)
  all_orders: bool = False  # list_orders was answered: every order id and status is known
  top: int | None = None  # the highest order id, once known (list_orders or a checkout)
  # Searches answered: (query, limit in cents or None, inclusive): every product
  # whose name contains the query, priced below (or at) the limit, was listed.
  closed: list[tuple[str, float | None, bool]] = dataclasses.field(default_factory=list)

  def learn_product(self, pid: str, name: str, price: int) -> None:
    self.products[pid] = (name, price)

  def never_a_product(self, pid: str) -> bool:
    """Whether the states fix that `pid` is no product (malformed or answered 404)."""
    return not PRODUCT_ID.fullmatch(pid) or pid in self.no_product

  def never_an_order(self, oid: str) -> bool:
    return (not ORDER_ID.fullmatch(oid) or oid in self.no_order
            or (self.all_orders and oid not in self.orders))

  def search_fixed(self, query: str, cap: float | None) -> bool:
    """Whether the states fix the result of this search: an earlier one, for a
    part of the query, listed every product the result could reach."""
    listed = sorted(price for name, price in self.products.values()
                    if query in name and (cap is None or price <= cap))
    # Every product no state showed must lie above `reach` (None: none may exist).
    reach = listed[MAX_RESULTS - 1] if len(listed) >= MAX_RESULTS else cap
    for q, limit, inclusive in self.closed:
      if q in query and (limit is None or (reach is not None and (
          limit >= reach if inclusive else limit > reach))):
        return True
    return False


@dataclasses.dataclass(frozen=True)
class _Task:
  kind: str  # buy | cancel | replace
  text: str
  needs: tuple[tuple[str, int], ...] = ()  # (kind, units), sorted by kind
  budget: int = 0  # cents
  payment: str = ""
  order_id: str = ""
  reason: str = ""
  by_name: bool = False  # cancel: the order is named by a product, not an id


@dataclasses.dataclass
class _Reply:
  """One response body before the trailing session summary, with its facts."""
  body: dict[str, Any]
  facts: dict[str, str] = dataclasses.field(default_factory=dict)
  include: tuple[str, ...] = ()
  exclude: tuple[str, ...] = ()
  # Names of facts (fact keys, include items, "status", tail keys) that are new
  # hidden information: neither the spec nor any earlier state fixes them.
  revealed: tuple[str, ...] = ()

  @property
  def valid(self) -> bool:
    return self.body["status"] < 300

  def hidden(self, *tail: str, named: str = "") -> _Reply:
    """This reply with its outcome revealed (it rests on a fact no state
    showed): the status, every fact and mention but the id the call `named`
    (every answer states it, an error too), and the tail fields that another
    outcome would have moved."""
    mentions = [s for s in self.include if s != named]
    return dataclasses.replace(self, revealed=("status", *self.facts, *mentions, *tail))


def _money(cents: int) -> float:
  # n/100 reprs as the two-decimal string, so text and fields agree exactly.
  return cents / 100


def _fact(value: Any) -> str:
  """A JSON value as the string a field records (how json.dumps renders it)."""
  return value if isinstance(value, str) else json.dumps(value)


def _error(status: int, message: str) -> _Reply:
  # A message is a field only if JSON renders it verbatim (no escaped quotes),
  # so the generic checker can match it in the text.
  verbatim = json.dumps(message) == f'"{message}"'
  return _Reply({"status": status, "error": message}, {"error": message} if verbatim else {})


def _units(n: int, kind: str) -> str:
  return f"{n} {kind}" if n == 1 else f"{n} {kind}s"


def _base(name: str) -> str:
  """A product name without its color."""
  first, _, rest = name.partition(" ")
  return rest if first in COLORS else name


def _draw_product(rng: random.Random, kind: str, base: str) -> tuple[str, int, int]:
  """(name, price in cents, stock) of a new product of `kind`."""
  name = f"{rng.choice(COLORS)} {base}" if rng.random() < 0.5 else base
  lo, hi = PRICES[kind]
  price = rng.randint(lo, hi) * 100 + rng.choice((0, 49, 50, 99))
  return name, price, rng.choice(STOCKS)


class ShopEnv(Env):
  name = "shop"
  max_steps = 20
  steers = (STEER_OOS, STEER_DISCOUNT, STEER_FLAKY, STEER_INTERCEPT)

  # ------------------------------------------------------------------ reset

  def reset(self, seed: int, steer: str | None = None) -> tuple[Spec, str]:
    # The task text (its budget prices the needed kinds, a cancel names a
    # product of a pending order), s0 (open_orders counts the pending orders)
    # and the policies (the expert's cheapest plan, random ids) need the whole
    # DB, so it is drawn here; what no state shows stays hidden, and a twin
    # re-draws it from its own stream (fork_hidden).
    rng = random.Random(f"{self.name}/{seed}")
    self._seed, self._stream = seed, "world"
    self._steer = self.resolve_steer(seed, steer)
    products = self._make_products(rng)
    orders = self._make_orders(rng, products)
    cart = self._make_cart(rng, products)
    self._w = _World(products, orders, cart)
    self._task = self._make_task(rng)
    # Steer effects come after the world and task are drawn, so a seed gives
    # the same world and task text with and without a steer.
    if self._steer == STEER_OOS:
      self._force_out_of_stock(random.Random(f"{self.name}/{seed}/oos"))
    self._k = self._known_at_reset()
    obs = self._render(self._cart_reply())
    rules = (
        "Responses are JSON with an HTTP-like status; every response ends with cart_count "
        "(cart lines), cart_total (cart value before discounts) and open_orders (pending orders).",
        "Adding more units than a product's stock fails with 409; stock 0 means out of stock; "
        f"the cart holds at most {MAX_CART_LINES} products.",
        "Checkout turns the cart into a new pending order (id: highest order id + 1), reduces "
        "stock and empties the cart.",
        "Only pending orders can be cancelled (409 otherwise); cancelling refunds the total and "
        "restores the stock.",
        "Bad calls or arguments fail with 400, unknown products or orders with 404, unknown "
        "tools with 422; a failed call changes nothing.",
        "An order meets a budget when its total after any discount is at most the budget.",
    ) + ((STEER_RULES[self._steer],) if self._steer else ())
    spec = Spec(initial_state=obs, task=self._task.text, tools=TOOLS, rules=rules,
                steer=self._steer)
    return spec, obs


  def _known_at_reset(self) -> _Known:
    """s0 shows the cart; the task text names an order by id (not a cancel by
    product name). Without the out-of-stock steer the reset cart fits the
    stock (it is drawn from stocked products), and a model may rely on it."""
    k = _Known()
    for pid in self._w.cart:
      p = self._w.products[pid]
      k.learn_product(pid, p.name, p.price)
    if self._steer != STEER_OOS:
      k.fits = set(self._w.cart)
    if self._task.order_id and not self._task.by_name:
      k.orders.add(self._task.order_id)
    return k

  @staticmethod
  def _make_products(rng: random.Random) -> dict[str, _Product]:
    kinds = rng.sample(sorted(KINDS), rng.randint(4, 5))
    specs = []
    for kind in kinds:
      for base in rng.sample(KINDS[kind], rng.randint(2, 3)):
        name, price, stock = _draw_product(rng, kind, base)
        specs.append((name, kind, price, stock))
    ids = rng.sample(range(100, 1000), len(specs))
    products = [_Product(f"P{i}", *s) for i, s in zip(ids, specs)]
    return {p.id: p for p in sorted(products, key=lambda p: p.id)}

  @staticmethod
  def _make_orders(rng: random.Random, products: dict[str, _Product]) -> dict[str, _Order]:
    # At least one pending (cancel tasks) and one shipped order (intercept steer).
    statuses = ["pending", "shipped"] + rng.choices(STATUSES, k=rng.randint(1, 3))
    rng.shuffle(statuses)
    ids = sorted(rng.sample(range(1000, 9000), len(statuses)))
    pids = sorted(products)
    orders = {}
    for oid, status in zip(ids, statuses):
      lines = {pid: rng.randint(1, 2) for pid in sorted(rng.sample(pids, rng.randint(1, 2)))}
      subtotal = sum(products[p].price * q for p, q in lines.items())
      orders[f"O{oid}"] = _Order(f"O{oid}", lines, rng.choice(PAYMENTS), status, subtotal)
    return orders

  @staticmethod
  def _make_cart(rng: random.Random, products: dict[str, _Product]) -> dict[str, int]:
    stocked = [pid for pid, p in products.items() if p.stock > 0]
    picks = sorted(rng.sample(stocked, min(len(stocked), rng.choice((0, 0, 1, 1, 2)))))
    return {pid: rng.randint(1, min(2, products[pid].stock)) for pid in picks}

  def _make_task(self, rng: random.Random) -> _Task:
    kind = rng.choice(("buy", "buy", "cancel", "replace"))
    if kind == "cancel":
      return self._make_cancel_task(rng)
    oid = ""
    if kind == "replace":
      oid = rng.choice(sorted(self._w.orders))
      pid, units = next(iter(self._w.orders[oid].lines.items()))
      about = self._w.products[pid]
      needs = ((about.kind, units),)
    else:
      kinds = rng.sample(sorted({p.kind for p in self._w.products.values()}), rng.randint(1, 2))
      needs = tuple(sorted((k, rng.randint(1, 3)) for k in kinds))
    for k, n in needs:
      self._ensure_alternative(k, n)
    budget = self._budget(rng, needs)
    payment = rng.choice(PAYMENTS)
    want = " and ".join(_units(n, k) for k, n in needs)
    terms = (f"paid by {payment}, with the order total at most ${budget // 100} "
             "(any product of the right kind will do)")
    if kind == "buy":
      text = f"Buy {want} for the customer in one order, {terms}."
    else:
      text = (f"The customer asks about order {oid} (the {about.name}). Report its current "
              f"status with report_status, then order {want} as a replacement, {terms}.")
    return _Task(kind, text, needs, budget, payment, order_id=oid)

  def _make_cancel_task(self, rng: random.Random) -> _Task:
    pending = [o for o in self._w.orders.values() if o.status == "pending"]
    target = rng.choice(pending)
    reason = rng.choice(sorted(REASONS))
    because = f"because the customer {REASONS[reason]}"
    elsewhere = {pid for o in pending if o is not target for pid in o.lines}
    unique = [pid for pid in target.lines if pid not in elsewhere]
    if unique and rng.random() < 0.5:
      name = self._w.products[unique[0]].name
      text = f"Cancel the customer's pending order that contains the {name}, {because}."
      return _Task("cancel", text, order_id=target.id, reason=reason, by_name=True)
    text = f"Cancel order {target.id} {because}."
    return _Task("cancel", text, order_id=target.id, reason=reason)

  def _kind_by_price(self, kind: str) -> list[_Product]:
    return sorted((p for p in self._w.products.values() if p.kind == kind),
                  key=lambda p: (p.price, p.id))

  def _ensure_alternative(self, kind: str, units: int) -> None:
    """Stocks the second-cheapest product of a needed kind, so the task stays
    solvable when the out-of-stock steer empties the cheapest one."""
    second = self._kind_by_price(kind)[1]
    second.stock = max(second.stock, units)

  def _budget(self, rng: random.Random, needs) -> int:
    """Cents: the cost without each kind's cheapest product, plus up to 15% slack.

    Computed the same way with or without a steer so the task text does not
    reveal the steer; the cheapest plan always fits."""
    cost = 0
    for kind, units in needs:
      for p in self._kind_by_price(kind)[1:]:
        take = min(units, p.stock)
        cost += take * p.price
        units -= take
    return math.ceil(cost * (1 + rng.uniform(0.0, 0.15)) / 100) * 100

  def _force_out_of_stock(self, rng: random.Random) -> None:
    needed = [k for k, _ in self._task.needs]
    cheapest = [self._kind_by_price(k)[0].id for k in needed]
    others = [p for p in self._w.products.values() if p.kind not in needed]
    emptied = [p for p in others if rng.random() < 0.35] or others[:1]
    for p in self._w.products.values():
      if p.id in cheapest or p in emptied:
        p.stock = 0

  # ------------------------------------------------------------------- step

  def step(self, action: str) -> StepResult:
    reply = self._dispatch(action)
    success = reply.valid and self._goal_met()
    return StepResult(next_state=self._render(reply), reward=1.0 if success else 0.0,
                      done=success, checks=self._checks(reply), valid=reply.valid,
                      info={"success": success})

  def _dispatch(self, action: str) -> _Reply:
    try:
      name, args = resolve(TOOLS, action)
    except ToolCallRejected as e:
      return _error(e.status, str(e))
    return getattr(self, f"_do_{name}")(**args)

  def _tail(self) -> dict[str, Any]:
    return {"cart_count": len(self._w.cart), "cart_total": _money(self._cart_value()),
            "open_orders": sum(o.status == "pending" for o in self._w.orders.values())}

  def _render(self, reply: _Reply) -> str:
    return json.dumps({**reply.body, **self._tail()})

  def _checks(self, reply: _Reply) -> Checks:
    fields = {"status": str(reply.body["status"]), **reply.facts}
    fields.update({k: _fact(v) for k, v in self._tail().items()})
    revealed = [n for n in reply.revealed if n in fields or n in reply.include]
    return Checks(must_include=reply.include, must_exclude=reply.exclude, fields=fields,
                  revealed=tuple(dict.fromkeys(revealed)))

  def _cart_value(self) -> int:
    return sum(self._w.products[p].price * q for p, q in self._w.cart.items())

  def _line(self, pid: str, qty: int) -> dict[str, Any]:
    p = self._w.products[pid]
    return {"id": pid, "name": p.name, "price": _money(p.price), "qty": qty}

  def _known_others(self, shown) -> tuple[str, ...]:
    """Products the states showed that are not in `shown`: a list the states
    fix must not mention them (ids no state showed a model cannot avoid)."""
    return tuple(pid for pid in sorted(self._k.products) if pid not in shown)

  def _learn_lines(self, lines) -> None:
    for pid in lines:
      p = self._w.products[pid]
      self._k.learn_product(pid, p.name, p.price)

  # ------------------------------------------------------------------ tools

  def _do_search_products(self, query: str, max_price: float | None = None) -> _Reply:
    q = query.strip().lower()
    if not q:
      return _error(400, "query must not be empty")
    cap = None if max_price is None else max_price * 100
    shown = [p for p in self._all_by_price()
             if q in p.name and (cap is None or p.price <= cap)][:MAX_RESULTS]
    self._w.seen_products.update(p.id for p in shown)
    items = [{"id": p.id, "name": p.name, "price": _money(p.price), "stock": p.stock}
             for p in shown]
    ids = tuple(p.id for p in shown)
    k = self._k
    fixed = k.search_fixed(q, cap)
    # Known products the result cannot list (all the others when it is fixed).
    absent = tuple(pid for pid in self._known_others(ids)
                   if fixed or q not in k.products[pid][0]
                   or (cap is not None and k.products[pid][1] > cap))
    reply = _Reply({"status": 200, "items": items, "count": len(items)},
                   {"count": str(len(items))}, ids, absent, () if fixed else ("count", *ids))
    for p in shown:
      k.learn_product(p.id, p.name, p.price)
      k.stock[p.id] = p.stock
    limit, inclusive = (cap, True) if len(shown) < MAX_RESULTS else (shown[-1].price, False)
    k.closed.append((q, limit, inclusive))
    return reply

  def _all_by_price(self) -> list[_Product]:
    return sorted(self._w.products.values(), key=lambda p: (p.price, p.id))

  def _unknown_product(self, product_id: str, *tail: str) -> _Reply:
    reply = _error(404, f"unknown product '{product_id}'")
    fixed = self._k.never_a_product(product_id)
    if PRODUCT_ID.fullmatch(product_id):
      self._k.no_product.add(product_id)
    return reply if fixed else reply.hidden(*tail)

  def _do_get_product(self, product_id: str) -> _Reply:
    p = self._w.products.get(product_id)
    if p is None:
      return self._unknown_product(product_id)
    self._w.seen_products.add(p.id)
    body = {"status": 200, "id": p.id, "name": p.name, "kind": p.kind,
            "price": _money(p.price), "stock": p.stock}
    reply = _Reply(body, {k: _fact(v) for k, v in body.items() if k != "status"}, (p.id,))
    k = self._k
    if p.id not in k.products:
      reply = reply.hidden(named=p.id)
    elif p.id not in k.stock:
      reply = dataclasses.replace(reply, revealed=("stock",))
    k.learn_product(p.id, p.name, p.price)
    k.stock[p.id] = p.stock
    return reply

  def _do_add_to_cart(self, product_id: str, quantity: int) -> _Reply:
    k = self._k
    in_cart = product_id in self._w.cart
    full = not in_cart and len(self._w.cart) >= MAX_CART_LINES
    # A known product's outcome rests on its stock (or on a full cart); an id no
    # state showed may or may not be a product.
    if product_id in k.products:
      fixed = full or product_id in k.stock
    else:
      fixed = k.never_a_product(product_id)
    reply = self._add(product_id, quantity, full)
    if fixed:
      return reply
    # More units of a line already in the cart leave the line count as it is.
    return reply.hidden("cart_total") if in_cart else reply.hidden("cart_count", "cart_total")

  def _add(self, product_id: str, quantity: int, full: bool) -> _Reply:
    p, k = self._w.products.get(product_id), self._k
    if p is None:
      return self._unknown_product(product_id)
    if full:
      return _error(409, f"cart is full ({MAX_CART_LINES} products)")
    have = self._w.cart.get(p.id, 0)
    if have + quantity > p.stock:
      if p.id in k.products:
        k.stock[p.id] = p.stock
      message = (f"product {p.id} is out of stock" if p.stock == 0
                 else f"only {p.stock} of {p.id} in stock")
      return _error(409, message)
    self._w.cart = dict(sorted({**self._w.cart, p.id: have + quantity}.items()))
    reply = self._cart_reply()
    k.learn_product(p.id, p.name, p.price)
    k.fits.add(p.id)
    return reply

  def _do_remove_from_cart(self, product_id: str) -> _Reply:
    if product_id in self._w.cart:
      del self._w.cart[product_id]
      self._k.fits.discard(product_id)
      return self._cart_reply()
    if product_id not in self._w.products:
      # 404 either way; which message rests on whether the id is a product.
      reply = self._unknown_product(product_id)
      return dataclasses.replace(reply, revealed=tuple(n for n in reply.revealed if n != "status"))
    reply = _error(404, f"product {product_id} is not in the cart")
    return reply if product_id in self._k.products else dataclasses.replace(
        reply, revealed=("error",))

  def _do_view_cart(self) -> _Reply:
    return self._cart_reply()

  def _cart_reply(self) -> _Reply:
    items = [self._line(pid, q) for pid, q in self._w.cart.items()]
    return _Reply({"status": 200, "items": items}, {}, tuple(self._w.cart),
                  self._known_others(self._w.cart))

  def _do_checkout(self, payment_method: str) -> _Reply:
    w, k = self._w, self._k
    if not w.cart:
      return _error(409, "cart is empty")
    fixed = all(pid in k.fits or k.stock.get(pid, -1) >= q for pid, q in w.cart.items())
    reply = self._checkout(payment_method)
    return reply if fixed else reply.hidden(*TAIL)

  def _checkout(self, payment_method: str) -> _Reply:
    w, k = self._w, self._k
    short = [pid for pid, q in w.cart.items() if q > w.products[pid].stock]
    if short:
      k.stock[short[0]] = w.products[short[0]].stock
      return _error(409, f"only {w.products[short[0]].stock} of {short[0]} in stock")
    if self._steer == STEER_FLAKY and w.pay_attempts == 0:
      w.pay_attempts += 1
      return _error(503, "payment service unavailable, please retry")
    w.pay_attempts += 1
    subtotal = self._cart_value()
    discount = (subtotal + 5) // 10 if self._steer == STEER_DISCOUNT else 0
    top = max(int(o[1:]) for o in w.orders)
    oid = f"O{top + 1}"
    order = _Order(oid, dict(w.cart), payment_method, "pending", subtotal, discount, new=True)
    # The new id is the highest + 1: fixed once the ids are known.
    reply = self._order_reply(order, 201, () if k.top is not None else ("order_id",))
    for pid, q in w.cart.items():
      w.products[pid].stock -= q
      if pid in k.stock:
        k.stock[pid] -= q
    w.orders[oid] = order
    w.cart = {}
    w.viewed_orders.add(oid)
    # The id shows the highest one before it, which exists.
    k.orders.update((f"O{top}", oid))
    k.statuses[oid] = "pending"
    k.lines.add(oid)
    k.top = top + 1
    k.fits.clear()
    return reply

  def _order_reply(self, o: _Order, status: int, revealed: tuple[str, ...]) -> _Reply:
    """`revealed`: the facts no state fixed ("lines" stands for the lines,
    their count, the payment and the amounts)."""
    items = [self._line(pid, q) for pid, q in o.lines.items()]
    body = {"status": status, "order_id": o.id, "order_status": o.status, "payment": o.payment,
            "items": items, "count": len(items), "subtotal": _money(o.subtotal),
            "discount": _money(o.discount), "total": _money(o.total)}
    facts = {k: _fact(v) for k, v in body.items() if k not in ("status", "items")}
    lines_known = "lines" not in revealed
    if not lines_known:
      revealed = (*revealed, "payment", "count", "subtotal", "discount", "total", *o.lines)
    return _Reply(body, facts, tuple(o.lines),
                  self._known_others(o.lines) if lines_known else (), revealed)

  def _do_list_orders(self) -> _Reply:
    w, k = self._w, self._k
    w.listed_orders = True
    orders = [{"order_id": o.id, "order_status": o.status} for o in w.orders.values()]
    ids = tuple(w.orders)
    revealed = () if k.all_orders else ("count", *(o for o in ids if o not in k.orders))
    reply = _Reply({"status": 200, "orders": orders, "count": len(orders)},
                   {"count": str(len(orders))}, ids, (), revealed)
    k.all_orders = True
    k.orders.update(ids)
    k.statuses.update({o.id: o.status for o in w.orders.values()})
    k.top = max(int(o[1:]) for o in ids)
    return reply

  def _unknown_order(self, order_id: str, *tail: str) -> _Reply:
    reply = _error(404, f"unknown order '{order_id}'")
    fixed = self._k.never_an_order(order_id)
    if ORDER_ID.fullmatch(order_id):
      self._k.no_order.add(order_id)
    return reply if fixed else reply.hidden(*tail)

  def _do_get_order(self, order_id: str) -> _Reply:
    o, k = self._w.orders.get(order_id), self._k
    if o is None:
      return self._unknown_order(order_id)
    self._w.viewed_orders.add(o.id)
    revealed = ((() if o.id in k.statuses else ("order_status",))
                + (() if o.id in k.lines else ("lines",)))
    reply = self._order_reply(o, 200, revealed)
    if o.id not in k.orders:
      reply = reply.hidden()
    k.orders.add(o.id)
    k.statuses[o.id] = o.status
    k.lines.add(o.id)
    self._learn_lines(o.lines)
    return reply

  def _do_cancel_order(self, order_id: str, reason: str) -> _Reply:
    o, k = self._w.orders.get(order_id), self._k
    if o is None:
      return self._unknown_order(order_id, "open_orders")
    status_known = o.id in k.statuses
    k.orders.add(o.id)
    if not self._cancellable(o):
      reply = _error(409, f"order {o.id} is {o.status}; it cannot be cancelled")
      k.statuses[o.id] = o.status
      return reply if status_known else reply.hidden("open_orders")
    o.status, o.reason = "cancelled", reason
    for pid, q in o.lines.items():
      self._w.products[pid].stock += q
    body = {"status": 200, "order_id": o.id, "order_status": o.status, "reason": reason,
            "refund": _money(o.total)}
    reply = _Reply(body, {k: _fact(v) for k, v in body.items() if k != "status"}, (o.id,))
    if not status_known:
      reply = reply.hidden("open_orders", named=o.id)
    elif o.id not in k.lines:
      reply = dataclasses.replace(reply, revealed=("refund",))
    k.statuses[o.id] = o.status
    if o.id in k.lines:
      k.stock.update({pid: k.stock[pid] + q for pid, q in o.lines.items() if pid in k.stock})
    else:  # the refunded stock went to lines no state showed
      k.stock.clear()
    return reply

  def _cancellable(self, o: _Order) -> bool:
    return o.status == "pending" or (o.status == "shipped" and self._steer == STEER_INTERCEPT)

  def _do_report_status(self, order_id: str, order_status: str) -> _Reply:
    if order_id not in self._w.orders:
      return self._unknown_order(order_id)
    self._w.reports[order_id] = order_status
    body = {"status": 200, "order_id": order_id, "reported": order_status}
    reply = _Reply(body, {"order_id": order_id, "reported": order_status}, (order_id,))
    fixed = order_id in self._k.orders
    self._k.orders.add(order_id)
    return reply if fixed else reply.hidden(named=order_id)

  # ------------------------------------------------------------------- twin

  def fork_hidden(self, stream: str) -> None:
    """Re-draws, from `stream`, every fact no state has shown: the products no
    state listed (within what the answered searches rule out), unknown stock,
    the orders no state named, unknown statuses (keeping open_orders) and
    unlisted order lines."""
    self._stream = stream
    self._redraw_products()
    self._redraw_orders()

  def _rng(self, what: str) -> random.Random:
    return random.Random(f"{self.name}/{self._seed}/{self._stream}/{what}")

  def _draw_stock(self, rng: random.Random, floor: int) -> int:
    return max(rng.choice(STOCKS), floor)

  def _redraw_products(self) -> None:
    k, w = self._k, self._w
    kept = {pid: p for pid, p in w.products.items() if pid in k.products}
    for pid, p in kept.items():
      if pid not in k.stock:
        p.stock = self._draw_stock(self._rng(f"stock/{pid}"),
                                   w.cart.get(pid, 0) if pid in k.fits else 0)
    taken = set(kept) | k.no_product
    needed = {kind for kind, _ in self._task.needs}
    new = []
    for kind in sorted(KINDS):
      rng = self._rng(f"kind/{kind}")
      mine = [p for p in kept.values() if p.kind == kind]
      if not (mine or kind in needed or rng.random() < KIND_PRESENT):
        continue
      used = {_base(p.name) for p in mine}
      free = [b for b in KINDS[kind] if b not in used]
      for base in rng.sample(free, max(0, min(len(free), rng.randint(2, 3) - len(mine)))):
        p = self._new_product(rng, kind, base, taken)
        if p is not None:
          new.append(p)
          taken.add(p.id)
    w.products = {p.id: p for p in sorted([*kept.values(), *new], key=lambda p: p.id)}

  def _new_product(self, rng: random.Random, kind: str, base: str,
                   taken: set[str]) -> _Product | None:
    """A product no state showed; None when every try would have been listed
    by an answered search (which showed all its matches up to its limit)."""
    for _ in range(4):
      name, price, stock = _draw_product(rng, kind, base)
      if not any(q in name and (limit is None or price <= limit)
                 for q, limit, _inclusive in self._k.closed):
        ids = [f"P{i}" for i in range(100, 1000) if f"P{i}" not in taken]
        return _Product(rng.choice(ids), name, kind, price, stock)
    return None

  def _redraw_orders(self) -> None:
    k, w = self._k, self._w
    # The task's own order stays (its goal refers to it) but is re-drawn like
    # any order whose id a state showed.
    named = k.orders | {self._task.order_id} if self._task.order_id else k.orders
    kept = {oid: o for oid, o in w.orders.items() if oid in named}
    open_orders = sum(o.status == "pending" for o in w.orders.values())
    rng = self._rng("orders")
    unsure = [oid for oid in kept if oid not in k.statuses]
    pending = open_orders - sum(k.statuses.get(oid) == "pending" for oid in kept)
    new_ids = []
    if not k.all_orders:
      bound = k.top if k.top is not None else 9000
      free = [i for i in range(1000, bound)
              if f"O{i}" not in kept and f"O{i}" not in k.no_order]
      n = min(len(free), max(rng.randint(2, 4), pending - len(unsure)))
      new_ids = [f"O{i}" for i in sorted(rng.sample(free, n))]
    unsure += new_ids
    pending_ids = set(rng.sample(unsure, pending))
    statuses = {oid: "pending" if oid in pending_ids else rng.choice(STATUSES[1:])
                for oid in unsure}
    orders = dict(kept)
    for oid in sorted(kept.keys() | set(new_ids)):
      o = orders.get(oid) or _Order(oid, {}, "", "", 0)
      if oid not in k.lines:
        o = self._new_lines(o)
      orders[oid] = dataclasses.replace(o, status=statuses.get(oid, o.status))
    w.orders = dict(sorted(orders.items()))

  def _new_lines(self, o: _Order) -> _Order:
    rng = self._rng(f"order/{o.id}")
    pids = sorted(rng.sample(sorted(self._w.products), rng.randint(1, 2)))
    lines = {pid: rng.randint(1, 2) for pid in pids}
    subtotal = sum(self._w.products[p].price * q for p, q in lines.items())
    return dataclasses.replace(o, lines=lines, payment=rng.choice(PAYMENTS),
                               subtotal=subtotal, discount=0)

  # ------------------------------------------------------------------- goal

  def _goal_met(self) -> bool:
    t, w = self._task, self._w
    if t.kind == "cancel":
      o = w.orders[t.order_id]
      return o.status == "cancelled" and o.reason == t.reason
    bought = any(o.new and o.status == "pending" and self._fulfils(o) for o in w.orders.values())
    if t.kind == "replace":
      return bought and w.reports.get(t.order_id) == w.orders[t.order_id].status
    return bought

  def _fulfils(self, o: _Order) -> bool:
    """The order has exactly the task's units per kind, payment and budget."""
    t = self._task
    units: dict[str, int] = {}
    for pid, q in o.lines.items():
      kind = self._w.products[pid].kind
      units[kind] = units.get(kind, 0) + q
    return o.payment == t.payment and o.total <= t.budget and units == dict(t.needs)

  # ----------------------------------------------------------------- expert

  def expert_action(self) -> str:
    t, w = self._task, self._w
    if t.kind == "cancel":
      if t.by_name and not w.listed_orders:
        return format_tool_call("list_orders", {})
      if t.order_id not in w.viewed_orders:
        return format_tool_call("get_order", {"order_id": t.order_id})
      return format_tool_call("cancel_order", {"order_id": t.order_id, "reason": t.reason})
    if t.kind == "replace":
      if t.order_id not in w.viewed_orders:
        return format_tool_call("get_order", {"order_id": t.order_id})
      status = w.orders[t.order_id].status
      if w.reports.get(t.order_id) != status:
        return format_tool_call("report_status", {"order_id": t.order_id, "order_status": status})
    return self._expert_buy()

  def _plan(self) -> dict[str, int] | None:
    """Cheapest in-stock units per needed kind (optimal for a per-kind count);
    None when the stock cannot cover the task any more."""
    plan = {}
    for kind, units in self._task.needs:
      for p in self._kind_by_price(kind):
        take = min(units, p.stock)
        if take:
          plan[p.id] = take
          units -= take
      if units:
        return None
    return plan

  def _expert_buy(self) -> str:
    w, plan = self._w, self._plan()
    if plan is None:  # stock spent by stray checkouts: nothing sensible left to try
      return format_tool_call("view_cart", {})
    for pid, q in w.cart.items():
      if q > plan.get(pid, 0):
        return format_tool_call("remove_from_cart", {"product_id": pid})
    for pid, q in sorted(plan.items()):
      if w.cart.get(pid, 0) < q:
        if pid not in w.seen_products:
          return format_tool_call("search_products", {"query": w.products[pid].kind})
        return format_tool_call("add_to_cart", {"product_id": pid,
                                                "quantity": q - w.cart.get(pid, 0)})
    return format_tool_call("checkout", {"payment_method": self._task.payment})

  # ---------------------------------------------------------------- random

  def change_of_intent(self, rng: random.Random) -> tuple[str, tuple[str, ...]] | None:
    """The customer now wants a pending order (not the task's) cancelled, one
    the states showed as pending when there is one (else the orders are listed
    first, so that the cancel's outcome is one the states fix)."""
    pending = sorted(o.id for o in self._w.orders.values()
                     if o.status == "pending" and o.id != self._task.order_id)
    if not pending:
      return None
    shown = [o for o in pending if self._k.statuses.get(o) == "pending"]
    oid = rng.choice(shown or pending)
    cancel = format_tool_call("cancel_order", {"order_id": oid, "reason": "changed_mind"})
    listing = () if shown else (format_tool_call("list_orders", {}),)
    return (f"Update: the customer changed their mind and now wants order {oid} cancelled "
            "instead.", (*listing, cancel))

  def random_action(self, rng: random.Random) -> str:
    w = self._w
    pid = rng.choice(sorted(w.products))
    oid = rng.choice(sorted(w.orders))
    name = rng.choice([t.name for t in TOOLS])
    args: dict[str, Any] = {
        "search_products": {"query": rng.choice(sorted(KINDS) + list(COLORS))},
        "get_product": {"product_id": pid},
        "add_to_cart": {"product_id": pid, "quantity": rng.randint(1, 3)},
        "remove_from_cart": {"product_id": rng.choice(sorted(w.cart) or [pid])},
        "checkout": {"payment_method": rng.choice(PAYMENTS)},
        "get_order": {"order_id": oid},
        "cancel_order": {"order_id": oid, "reason": rng.choice(sorted(REASONS))},
        "report_status": {"order_id": oid, "order_status": rng.choice(STATUSES)},
    }.get(name, {})
    if name == "search_products" and rng.random() < 0.3:
      args["max_price"] = rng.randint(5, 80)
    return format_tool_call(name, args)

  def invalid_action(self, rng: random.Random) -> str:
    """A call that fails whatever the state: bad syntax, tool, argument or target."""
    w = self._w
    pid = rng.choice(sorted(w.products))
    absent = [p for p in sorted(w.products) if p not in w.cart]
    closed = [o.id for o in w.orders.values() if o.status != "pending" and not self._cancellable(o)]
    options = [
        lambda: format_tool_call(rng.choice(("track_package", "apply_coupon", "refund_order")),
                                 {"order_id": rng.choice(sorted(w.orders))}),
        lambda: format_tool_call("get_product", {"product_id": f"P0{rng.randint(10, 99)}"}),
        lambda: format_tool_call("get_order", {"order_id": f"O0{rng.randint(100, 999)}"}),
        lambda: format_tool_call("add_to_cart", {"product_id": pid,
                                                 "quantity": rng.choice(("two", "1", 1.5))}),
        lambda: format_tool_call("add_to_cart", {"product_id": pid,
                                                 "quantity": rng.randint(-2, 0)}),
        lambda: format_tool_call("add_to_cart", {"product_id": pid}),
        lambda: format_tool_call("checkout", {"payment_method": rng.choice(("bitcoin", "cash"))}),
        lambda: format_tool_call("cancel_order", {"order_id": rng.choice(sorted(w.orders)),
                                                  "reason": "no_reason"}),
        lambda: format_tool_call("remove_from_cart", {"product_id": rng.choice(absent)}),
        lambda: format_tool_call("view_cart", {"verbose": True}),
        lambda: rng.choice(("view_cart(", "search_products(query=lamp)", "checkout card")),
    ]
    if closed:
      options.append(lambda: format_tool_call(
          "cancel_order", {"order_id": rng.choice(closed), "reason": "changed_mind"}))
    return rng.choice(options)()


  # ----------------------------------------------------------------- check

  @classmethod
  def check(cls, spec: Spec, step: Step, prediction: str) -> CheckResult:
    """Determined facts: the response is a JSON object ending in the session
    summary (`format`), the recorded fields and mentions not marked revealed,
    every exclusion. Revealed facts: the rest, reported only. Constraints: what
    any answer to the call must satisfy (_constraints)."""
    obj = _object(prediction)
    low = prediction.lower() if isinstance(prediction, str) else ""
    checks = step.checks
    well_formed = obj is not None and list(obj)[-len(TAIL):] == list(TAIL)
    obj = obj or {}
    entries = generic.fact_entries(checks, low, lambda k, v: k in obj and _fact(obj[k]) == v)
    return CheckResult({FORMAT: well_formed, **entries.determined}, entries.revealed,
                       _constraints(spec, step, obj))


def _object(text: Any) -> dict | None:
  try:
    obj = json.loads(text)
  except (ValueError, TypeError, RecursionError):
    return None
  return obj if isinstance(obj, dict) else None


def _num(value: Any) -> float:
  """A JSON number as float; NaN (never close to anything) for anything else."""
  if isinstance(value, bool) or not isinstance(value, (int, float)):
    return math.nan
  try:
    return float(value)
  except OverflowError:
    return math.nan


def _int(value: Any) -> int | None:
  return value if isinstance(value, int) and not isinstance(value, bool) else None


def _close(a: Any, b: Any) -> bool:
  return abs(_num(a) - _num(b)) < 0.005


def _priced(name: Any, price: Any) -> bool:
  """A catalogue name with a price in its kind's range."""
  if not isinstance(name, str) or name not in NAMES:
    return False
  lo, hi = PRICES[name.split()[-1]]
  return lo <= _num(price) <= hi + 0.99


def _product_ok(item: Any, extra: str) -> bool:
  """A listed product: catalogue id, name and price, and a whole `extra`
  (qty >= 1 on cart and order lines, stock >= 0 in searches)."""
  if not isinstance(item, dict) or not isinstance(item.get("id"), str):
    return False
  n = _int(item.get(extra))
  return (bool(PRODUCT_ID.fullmatch(item["id"])) and _priced(item.get("name"), item.get("price"))
          and n is not None and n >= (1 if extra == "qty" else 0))


def _products_shown(obj: dict) -> dict[str, tuple[Any, Any]]:
  """id -> (name, price) of every product a response lists."""
  items = obj.get("items")
  listed = [it for it in items if isinstance(it, dict)] if isinstance(items, list) else []
  if "kind" in obj:
    listed.append(obj)
  return {it["id"]: (it.get("name"), it.get("price")) for it in listed
          if isinstance(it.get("id"), str)}


def _order_numbers(*texts: str) -> list[int]:
  return [int(m) for t in texts for m in re.findall(r"\bO([1-9]\d{3})\b", t)]


def _constraints(spec: Spec, step: Step, obj: dict) -> dict[str, bool]:
  """What any answer to the call must satisfy, whatever the hidden DB holds:
  a status the tool can give; a failed call changes nothing; listed products
  come from the catalogue's vocabulary and keep the name and price s0 or s_t
  showed; counts and totals match the listed lines; and the tool's own rules
  (a search lists matches of its query, cheapest first; a new order id is
  above every id shown; a cancel answers the call it was given)."""
  if not obj:
    return {}
  name, args, allowed = _call_outcomes(step.action)
  status = _int(obj.get("status"))
  prev = _object(step.state) or {}
  out = {"status_allowed": status in allowed}
  if status is None or status >= 400 or allowed <= {400, 422}:
    out["failed_call_changes_nothing"] = all(_close(obj.get(k), prev.get(k)) for k in TAIL)
    out["error_stated"] = isinstance(obj.get("error"), str) and bool(obj["error"])
    return out
  known = {**_products_shown(_object(spec.initial_state) or {}), **_products_shown(prev)}
  out["known_products_consistent"] = all(
      it[0] == known[pid][0] and _close(it[1], known[pid][1])
      for pid, it in _products_shown(obj).items() if pid in known)
  out.update(_TOOL_CONSTRAINTS[name](obj, args, prev, spec, step))
  return out


def _call_outcomes(action: str) -> tuple[str, dict, set[int]]:
  """(tool, arguments, the statuses an answer may have): 400 alone for a call
  that does not parse or fails its schema, 422 for an unknown tool."""
  try:
    name, args = parse_tool_call(action)
  except ToolCallError:
    return "", {}, {400}
  spec = find_tool(TOOLS, name)
  if spec is None:
    return name, args, {422}
  if validate_args(spec, args):
    return name, args, {400}
  return name, args, {400} | OUTCOMES[name]


def _line_total(items: list) -> float:
  return sum(_num(it["price"]) * _num(it["qty"]) for it in items)


def _items(obj: dict, extra: str) -> tuple[list, bool]:
  items = obj.get("items")
  items = items if isinstance(items, list) else []
  return items, "items" in obj and isinstance(obj["items"], list) and all(
      _product_ok(it, extra) for it in items)


def _search_rules(obj, args, prev, spec, step) -> dict[str, bool]:
  items, ok = _items(obj, "stock")
  q = args.get("query", "").strip().lower()
  prices = [_num(it["price"]) for it in items] if ok else []
  cap = args.get("max_price")
  return {"items_well_formed": ok,
          "names_match_query": ok and all(q in it["name"] for it in items),
          "count_matches_items": _int(obj.get("count")) == len(items),
          "at_most_five": len(items) <= MAX_RESULTS,
          "cheapest_first": ok and prices == sorted(prices),
          "within_max_price": ok and (cap is None or all(p <= cap for p in prices))}


def _product_rules(obj, args, prev, spec, step) -> dict[str, bool]:
  stock = _int(obj.get("stock"))
  return {"product_is_requested": obj.get("id") == args.get("product_id"),
          "product_well_formed": (_priced(obj.get("name"), obj.get("price"))
                                  and obj.get("kind") == str(obj.get("name")).split()[-1]
                                  and stock is not None and stock >= 0)}


def _cart_rules(obj, args, prev, spec, step) -> dict[str, bool]:
  items, ok = _items(obj, "qty")
  total = _line_total(items) if ok else math.nan
  return {"items_well_formed": ok,
          "cart_count_matches_items": _int(obj.get("cart_count")) == len(items),
          "cart_total_matches_lines": _close(total, obj.get("cart_total"))}


def _add_rules(obj, args, prev, spec, step) -> dict[str, bool]:
  items, _ = _items(obj, "qty")
  before = _int(prev.get("cart_count"))
  return {**_cart_rules(obj, args, prev, spec, step),
          "added_product_listed": any(isinstance(it, dict) and it.get("id") == args["product_id"]
                                      for it in items),
          "cart_grows_by_at_most_one": before is not None
                                       and _int(obj.get("cart_count")) in (before, before + 1)}


def _order_rules(obj, args, prev, spec, step) -> dict[str, bool]:
  items, ok = _items(obj, "qty")
  subtotal = _line_total(items) if ok else math.nan
  return {"items_well_formed": ok,
          "order_well_formed": (isinstance(obj.get("order_id"), str)
                                and bool(ORDER_ID.fullmatch(obj["order_id"]))
                                and obj.get("order_status") in STATUSES
                                and obj.get("payment") in PAYMENTS),
          "count_matches_items": _int(obj.get("count")) == len(items),
          "subtotal_matches_lines": _close(subtotal, obj.get("subtotal")),
          "total_is_subtotal_minus_discount": _close(
              _num(obj.get("subtotal")) - _num(obj.get("discount")), obj.get("total"))}


def _get_order_rules(obj, args, prev, spec, step) -> dict[str, bool]:
  return {**_order_rules(obj, args, prev, spec, step),
          "order_is_requested": obj.get("order_id") == args.get("order_id")}


def _checkout_rules(obj, args, prev, spec, step) -> dict[str, bool]:
  oid = obj.get("order_id")
  shown = _order_numbers(spec.task, spec.initial_state, step.state)
  new = isinstance(oid, str) and bool(ORDER_ID.fullmatch(oid))
  return {**_order_rules(obj, args, prev, spec, step),
          "new_order_id_is_new": new and all(int(oid[1:]) > n for n in shown),
          "paid_as_asked": obj.get("payment") == args.get("payment_method")}


def _list_rules(obj, args, prev, spec, step) -> dict[str, bool]:
  orders = obj.get("orders")
  ok = isinstance(orders, list) and all(
      isinstance(o, dict) and isinstance(o.get("order_id"), str)
      and bool(ORDER_ID.fullmatch(o["order_id"])) and o.get("order_status") in STATUSES
      for o in orders)
  orders = orders if ok else []
  return {"orders_well_formed": ok and len({o["order_id"] for o in orders}) == len(orders),
          "count_matches_orders": _int(obj.get("count")) == len(orders),
          "pending_matches_open_orders": ok and _int(obj.get("open_orders")) == sum(
              o["order_status"] == "pending" for o in orders)}


def _cancel_rules(obj, args, prev, spec, step) -> dict[str, bool]:
  before = _int(prev.get("open_orders"))
  return {"cancel_matches_call": (obj.get("order_id") == args.get("order_id")
                                  and obj.get("reason") == args.get("reason")
                                  and obj.get("order_status") == "cancelled"),
          "refund_positive": _num(obj.get("refund")) > 0,
          "open_orders_drop_by_at_most_one": before is not None
                                             and _int(obj.get("open_orders")) in (before,
                                                                                  before - 1)}


def _report_rules(obj, args, prev, spec, step) -> dict[str, bool]:
  return {"report_matches_call": (obj.get("order_id") == args.get("order_id")
                                  and obj.get("reported") == args.get("order_status"))}


_TOOL_CONSTRAINTS = {
    "search_products": _search_rules, "get_product": _product_rules,
    "add_to_cart": _add_rules, "remove_from_cart": _cart_rules, "view_cart": _cart_rules,
    "checkout": _checkout_rules, "list_orders": _list_rules, "get_order": _get_order_rules,
    "cancel_order": _cancel_rules, "report_status": _report_rules,
}
