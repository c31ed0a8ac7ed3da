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
from typing import Any

from mdlm_wm.data.schema import Checks, Spec, Step
from mdlm_wm.envs.base import Env, StepResult, register
from mdlm_wm.envs.toolcall import (ToolCallError, find_tool, format_tool_call, parse_tool_call,
                                   tool, validate_args)

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

  @property
  def valid(self) -> bool:
    return self.body["status"] < 300


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


@register
class ShopEnv(Env):
  name = "shop"
  max_steps = 20
  steers = (STEER_OOS, STEER_DISCOUNT, STEER_FLAKY, STEER_INTERCEPT)

  # ------------------------------------------------------------------ reset

  def reset(self, seed: int, steer: str | None = None) -> tuple[Spec, str]:
    rng = random.Random(f"{self.name}/{seed}")
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


  @staticmethod
  def _make_products(rng: random.Random) -> dict[str, _Product]:
    kinds = rng.sample(sorted(KINDS), rng.randint(4, 5))
    specs = []
    for kind in kinds:
      for base in rng.sample(KINDS[kind], rng.randint(2, 3)):
        name = f"{rng.choice(COLORS)} {base}" if rng.random() < 0.5 else base
        lo, hi = PRICES[kind]
        price = rng.randint(lo, hi) * 100 + rng.choice((0, 49, 50, 99))
        specs.append((name, kind, price, rng.choice((0, 1, 2, 3, 4, 5, 6, 8))))
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
      name, args = parse_tool_call(action)
    except ToolCallError as e:
      return _error(400, str(e))
    spec = find_tool(TOOLS, name)
    if spec is None:
      return _error(422, f"unknown tool '{name}'")
    errors = validate_args(spec, args)
    if errors:
      return _error(400, errors[0])
    return getattr(self, f"_do_{name}")(**args)

  def _tail(self) -> dict[str, Any]:
    return {"cart_count": len(self._w.cart), "cart_total": _money(self._cart_value()),
            "open_orders": sum(o.status == "pending" for o in self._w.orders.values())}

  def _render(self, reply: _Reply) -> str:
    return json.dumps({**reply.body, **self._tail()})

  def _checks(self, reply: _Reply) -> Checks:
    fields = {"status": str(reply.body["status"]), **reply.facts}
    fields.update({k: _fact(v) for k, v in self._tail().items()})
    return Checks(must_include=reply.include, must_exclude=reply.exclude, fields=fields)

  def _cart_value(self) -> int:
    return sum(self._w.products[p].price * q for p, q in self._w.cart.items())

  def _line(self, pid: str, qty: int) -> dict[str, Any]:
    p = self._w.products[pid]
    return {"id": pid, "name": p.name, "price": _money(p.price), "qty": qty}

  def _others(self, shown) -> tuple[str, ...]:
    return tuple(pid for pid in self._w.products if pid not in shown)

  # ------------------------------------------------------------------ tools

  def _do_search_products(self, query: str, max_price: float | None = None) -> _Reply:
    q = query.strip().lower()
    if not q:
      return _error(400, "query must not be empty")
    hits = [p for p in self._all_by_price() if q in p.name]
    shown = [p for p in hits if max_price is None or p.price <= max_price * 100][:MAX_RESULTS]
    self._w.seen_products.update(p.id for p in shown)
    items = [{"id": p.id, "name": p.name, "price": _money(p.price), "stock": p.stock}
             for p in shown]
    ids = tuple(p.id for p in shown)
    return _Reply({"status": 200, "items": items, "count": len(items)},
                  {"count": str(len(items))}, ids,
                  tuple(p.id for p in hits if p.id not in ids))

  def _all_by_price(self) -> list[_Product]:
    return sorted(self._w.products.values(), key=lambda p: (p.price, p.id))

  def _do_get_product(self, product_id: str) -> _Reply:
    p = self._w.products.get(product_id)
    if p is None:
      return _error(404, f"unknown product '{product_id}'")
    self._w.seen_products.add(p.id)
    body = {"status": 200, "id": p.id, "name": p.name, "kind": p.kind,
            "price": _money(p.price), "stock": p.stock}
    return _Reply(body, {k: _fact(v) for k, v in body.items() if k != "status"}, (p.id,))

  def _do_add_to_cart(self, product_id: str, quantity: int) -> _Reply:
    p = self._w.products.get(product_id)
    if p is None:
      return _error(404, f"unknown product '{product_id}'")
    have = self._w.cart.get(p.id, 0)
    if not have and len(self._w.cart) >= MAX_CART_LINES:
      return _error(409, f"cart is full ({MAX_CART_LINES} products)")
    if p.stock == 0:
      return _error(409, f"product {p.id} is out of stock")
    if have + quantity > p.stock:
      return _error(409, f"only {p.stock} of {p.id} in stock")
    self._w.cart = dict(sorted({**self._w.cart, p.id: have + quantity}.items()))
    return self._cart_reply()

  def _do_remove_from_cart(self, product_id: str) -> _Reply:
    if product_id not in self._w.products:
      return _error(404, f"unknown product '{product_id}'")
    if product_id not in self._w.cart:
      return _error(404, f"product {product_id} is not in the cart")
    del self._w.cart[product_id]
    return self._cart_reply()

  def _do_view_cart(self) -> _Reply:
    return self._cart_reply()

  def _cart_reply(self) -> _Reply:
    items = [self._line(pid, q) for pid, q in self._w.cart.items()]
    return _Reply({"status": 200, "items": items}, {}, tuple(self._w.cart),
                  self._others(self._w.cart))

  def _do_checkout(self, payment_method: str) -> _Reply:
    w = self._w
    if not w.cart:
      return _error(409, "cart is empty")
    short = [pid for pid, q in w.cart.items() if q > w.products[pid].stock]
    if short:
      return _error(409, f"only {w.products[short[0]].stock} of {short[0]} in stock")
    if self._steer == STEER_FLAKY and w.pay_attempts == 0:
      w.pay_attempts += 1
      return _error(503, "payment service unavailable, please retry")
    w.pay_attempts += 1
    subtotal = self._cart_value()
    discount = (subtotal + 5) // 10 if self._steer == STEER_DISCOUNT else 0
    oid = f"O{max(int(o[1:]) for o in w.orders) + 1}"
    order = _Order(oid, dict(w.cart), payment_method, "pending", subtotal, discount, new=True)
    for pid, q in w.cart.items():
      w.products[pid].stock -= q
    w.orders[oid] = order
    w.cart = {}
    w.viewed_orders.add(oid)
    return self._order_reply(order, 201)

  def _order_reply(self, o: _Order, status: int) -> _Reply:
    items = [self._line(pid, q) for pid, q in o.lines.items()]
    body = {"status": status, "order_id": o.id, "order_status": o.status, "payment": o.payment,
            "items": items, "count": len(items), "subtotal": _money(o.subtotal),
            "discount": _money(o.discount), "total": _money(o.total)}
    facts = {k: _fact(v) for k, v in body.items() if k not in ("status", "items")}
    return _Reply(body, facts, tuple(o.lines), self._others(o.lines))

  def _do_list_orders(self) -> _Reply:
    self._w.listed_orders = True
    orders = [{"order_id": o.id, "order_status": o.status} for o in self._w.orders.values()]
    return _Reply({"status": 200, "orders": orders, "count": len(orders)},
                  {"count": str(len(orders))}, tuple(self._w.orders))

  def _do_get_order(self, order_id: str) -> _Reply:
    o = self._w.orders.get(order_id)
    if o is None:
      return _error(404, f"unknown order '{order_id}'")
    self._w.viewed_orders.add(o.id)
    return self._order_reply(o, 200)

  def _do_cancel_order(self, order_id: str, reason: str) -> _Reply:
    o = self._w.orders.get(order_id)
    if o is None:
      return _error(404, f"unknown order '{order_id}'")
    if not self._cancellable(o):
      return _error(409, f"order {o.id} is {o.status}; it cannot be cancelled")
    o.status, o.reason = "cancelled", reason
    for pid, q in o.lines.items():
      self._w.products[pid].stock += q
    body = {"status": 200, "order_id": o.id, "order_status": o.status, "reason": reason,
            "refund": _money(o.total)}
    return _Reply(body, {k: _fact(v) for k, v in body.items() if k != "status"}, (o.id,))

  def _cancellable(self, o: _Order) -> bool:
    return o.status == "pending" or (o.status == "shipped" and self._steer == STEER_INTERCEPT)

  def _do_report_status(self, order_id: str, order_status: str) -> _Reply:
    if order_id not in self._w.orders:
      return _error(404, f"unknown order '{order_id}'")
    self._w.reports[order_id] = order_status
    body = {"status": 200, "order_id": order_id, "reported": order_status}
    return _Reply(body, {"order_id": order_id, "reported": order_status}, (order_id,))

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

  @staticmethod
  def state_check(spec: Spec, step: Step, prediction: str) -> float:
    """Parsed JSON facts vs the recorded fields, mentions, and the arithmetic
    the generic checker cannot do (counts and totals against the listed lines)."""
    try:
      obj = json.loads(prediction)
    except (ValueError, TypeError, RecursionError):
      obj = None
    if not isinstance(obj, dict):
      obj = {}
    low = prediction.lower() if isinstance(prediction, str) else ""
    results = [bool(obj), list(obj)[-len(TAIL):] == list(TAIL)]
    results += [k in obj and _fact(obj[k]) == v for k, v in step.checks.fields.items()]
    results += [s.lower() in low for s in step.checks.must_include]
    # One sub-check for all exclusions: garbage trivially lacks every id, and
    # should not score for it line by line.
    results.append(all(s.lower() not in low for s in step.checks.must_exclude))
    results += _consistency(obj)
    return sum(results) / len(results)


def _line_sum(items: Any) -> float | None:
  """Sum of price * qty over listed lines; None when the lines are malformed."""
  try:
    return sum(float(it["price"]) * int(it["qty"]) for it in items)
  except (TypeError, ValueError, KeyError, OverflowError):
    return None


def _close(a: Any, b: Any) -> bool:
  try:
    return abs(float(a) - float(b)) < 0.01
  except (TypeError, ValueError, OverflowError):
    return False


def _consistency(obj: dict) -> list[bool]:
  """Internal checks of one response: the listed lines against its counts and totals."""
  items = obj.get("items")
  if "orders" in obj:
    return [isinstance(obj["orders"], list) and obj.get("count") == len(obj["orders"])]
  if not isinstance(items, list):
    return []
  if "order_id" in obj:
    subtotal = _line_sum(items)
    return [obj.get("count") == len(items),
            subtotal is not None and _close(subtotal, obj.get("subtotal")),
            _close(_num(obj.get("subtotal")) - _num(obj.get("discount")), obj.get("total"))]
  if "count" in obj:  # search results
    return [obj["count"] == len(items)]
  total = _line_sum(items)
  return [obj.get("cart_count") == len(items),
          total is not None and _close(total, obj.get("cart_total"))]


def _num(value: Any) -> float:
  """A JSON number as float; NaN (never close to anything) for anything else."""
  if isinstance(value, bool) or not isinstance(value, (int, float)):
    return math.nan
  try:
    return float(value)
  except OverflowError:
    return math.nan
