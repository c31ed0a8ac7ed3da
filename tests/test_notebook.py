"""Executes notebooks/steerable_sampling.ipynb headless on the tiny models."""

import os
import re

import nbclient
import nbformat
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOTEBOOK = os.path.join(ROOT, "notebooks", "steerable_sampling.ipynb")


def _texts(cell) -> str:
  """Everything a code cell printed or displayed, as one string."""
  out = []
  for o in cell.get("outputs", []):
    out.append(o.get("text", ""))
    out.extend(str(v) for v in o.get("data", {}).values())
  return "\n".join(out)


@pytest.mark.slow  # ~30 s; the default run must stay under 10 min on 2 cores
def test_notebook_runs_headless_on_a_tiny_workdir(tiny_models, tiny_corpus, tmp_path,
                                                  monkeypatch):
  # The quickstart layout: WORKDIR/{mdlm,ar} checkpoints and WORKDIR/data/test.jsonl.
  for name, target in {**tiny_models, "data": tiny_corpus}.items():
    os.symlink(target, tmp_path / name)
  monkeypatch.setenv("WORKDIR", str(tmp_path))
  monkeypatch.setenv("NB_G", "2")
  nb = nbformat.read(NOTEBOOK, as_version=4)
  # Raises CellExecutionError, naming the cell, on the first cell that fails.
  nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                          resources={"metadata": {"path": ROOT}}).execute()

  code = [c for c in nb.cells if c.cell_type == "code"]
  assert all(c.execution_count for c in code)
  assert not [o for c in code for o in c.outputs if o.output_type == "error"]
  text = "\n".join(_texts(c) for c in code)
  assert f"repository: {ROOT}" in text
  # The models table reports the 4-step tiny checkpoints it was pointed at.
  assert re.search(r"<td[^>]*><pre[^>]*>mdlm</pre></td><td[^>]*><pre[^>]*>[\d,]+</pre></td>"
                   r"<td[^>]*><pre[^>]*>4</pre>", text)
  # Every section rendered its table.
  for header in ("reference next state", "samples with it", "bodies with &#x27;Read-only&#x27;",
                 "candidate action", "Self-BLEU", "tokens committed at this step",
                 "trailing anchor"):
    assert header in text, header
  # MDLM vs AR: both models, free and anchored, each a score in [0, 1].
  rows = re.findall(r"<pre[^>]*>(mdlm|ar)</pre></td><td[^>]*><pre[^>]*>(free|anchored)</pre>"
                    r"</td><td[^>]*><pre[^>]*>([\d.]+)</pre>", text)
  assert sorted((m, mode) for m, mode, _ in rows) == [
      ("ar", "anchored"), ("ar", "free"), ("mdlm", "anchored"), ("mdlm", "free")]
  assert all(0.0 <= float(score) <= 1.0 for *_, score in rows)
