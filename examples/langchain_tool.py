r"""The world model as an agent tool, LangChain-style, without needing LangChain.

An agent (or an LLM planner) calls the tool with an action and reads back the
state the world model predicts, so it can try actions in imagination before
acting for real. The tool keeps the simulated trajectory on the client side
(`advance=True`) or answers every call from the same state (look-ahead).

    from examples.client import WorldModelClient
    from examples.langchain_tool import WorldModelTool, to_langchain
    tool = WorldModelTool(WorldModelClient("http://127.0.0.1:8000"), spec)
    print(tool("open(target=\"fridge\")"))      # or tool.run({"action": ...})
    lc_tool = to_langchain(tool)                 # a StructuredTool, if langchain-core is installed

Try it against a running server, from the repository root:

    python -m examples.langchain_tool --url=http://127.0.0.1:8000 --data=/tmp/corpus/test.jsonl
"""

from __future__ import annotations

import json
from typing import Any

from examples.client import WorldModelClient, example_args


class WorldModelTool:
  """A tool with LangChain's surface: `name`, `description`, `args_schema`
  (a JSON schema, which langchain-core >= 0.3 accepts as is), `run`, `__call__`."""

  name = "world_model"
  description = ("Simulates the environment: given an action (a tool call or a text command), "
                 "returns the environment's predicted next state. Nothing happens in the real "
                 "environment, so use it to try actions out before taking them.")
  args_schema: dict[str, Any] = {
      "type": "object",
      "properties": {"action": {"type": "string",
                                "description": "The action to simulate, as the agent would "
                                               "send it to the environment."}},
      "required": ["action"],
  }

  def __init__(self, client: WorldModelClient, spec: dict, state: str | None = None, *,
               advance: bool = True, steer: str | None = None, **sampling):
    self.client, self.spec, self.steer, self.sampling = client, spec, steer, sampling
    self.state = state if state is not None else spec["initial_state"]
    self.advance = advance
    self.history: list[tuple[str, str]] = []

  def run(self, tool_input: str | dict[str, Any]) -> str:
    """The predicted next state; with `advance`, the simulation moves to it."""
    action = tool_input["action"] if isinstance(tool_input, dict) else tool_input
    next_state = self.client.step(self.spec, self.state, action, history=self.history,
                                  steer=self.steer, num_samples=1, **self.sampling)[0]
    if self.advance:
      self.history.append((self.state, action))
      self.state = next_state
    return next_state

  __call__ = run

  def reset(self, state: str | None = None) -> None:
    self.state = state if state is not None else self.spec["initial_state"]
    self.history = []


def to_langchain(tool: WorldModelTool):
  """The tool as a langchain-core StructuredTool, or None without langchain-core."""
  try:
    from langchain_core.tools import StructuredTool
  except ImportError:
    return None
  return StructuredTool.from_function(func=lambda action: tool.run(action), name=tool.name,
                                      description=tool.description,
                                      args_schema=tool.args_schema)


def main() -> None:
  url, episode = example_args(__doc__)
  tool = WorldModelTool(WorldModelClient(url), episode["spec"])
  print(f"{tool.name}: {tool.description}\nargs: {json.dumps(tool.args_schema)}")
  print("registered with LangChain:", to_langchain(tool) is not None)
  for step in episode["steps"][:3]:
    print(f"> {step['action']}\n{tool({'action': step['action']})}")


if __name__ == "__main__":
  main()
