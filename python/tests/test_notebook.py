"""The course's notebook (examples/ring.ipynb) runs from top to bottom
against the installed package: every cell executes without an error (its
own asserts check the index rules, the sums and the bytes), so the
notebook cannot fall behind the package."""

import os

import pytest

NOTEBOOK = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "ring.ipynb")


def test_the_course_notebook_runs():
    nbformat = pytest.importorskip("nbformat", reason="SKIPPED: nbformat is not installed")
    nbclient = pytest.importorskip("nbclient", reason="SKIPPED: nbclient is not installed")
    pytest.importorskip("ipykernel", reason="SKIPPED: ipykernel is not installed")
    pytest.importorskip("numpy", reason="SKIPPED: numpy is not installed")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(
        nb,
        timeout=300,
        kernel_name="python3",
        resources={"metadata": {"path": os.path.dirname(NOTEBOOK)}},
    )
    client.execute()  # raises CellExecutionError naming the cell that failed
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(c.get("outputs") for c in code), "a code cell printed nothing"
    errors = [o for c in code for o in c["outputs"] if o.get("output_type") == "error"]
    assert not errors, errors
