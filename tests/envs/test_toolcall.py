"""The one tool-call dispatcher in front of the tool environments' handlers."""

import pytest

from mdlm_wm.envs import toolcall

TOOLS = (toolcall.tool("view", "View one item.", {"item_id": {"type": "string"},
                                                  "qty": {"type": "integer"}},
                       required=("item_id",)),)


def test_resolve_returns_a_valid_call():
  assert toolcall.resolve(TOOLS, 'view({"item_id": "P1"})') == ("view", {"item_id": "P1"})


@pytest.mark.parametrize("action, status, message", [
    ("look around", 400, "not a tool call"),
    ('fly({"to": "moon"})', 422, "unknown tool 'fly'"),
    ('view({"qty": "two"})', 400, ";"),  # a missing key and a wrong type: both named
])
def test_resolve_rejects_with_the_status_a_tool_api_would_give(action, status, message):
  with pytest.raises(toolcall.ToolCallRejected, match=message) as e:
    toolcall.resolve(TOOLS, action)
  assert e.value.status == status
