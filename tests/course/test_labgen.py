"""The unsolved labs are built from their solutions (fmlab.course.labgen): markers pair up, stubs keep the
block's indentation, and every committed lab equals what its solution gives."""

import json

import pytest

from fmlab.course import labgen


def test_a_function_body_becomes_a_stub_that_raises():
    text, removed = labgen.strip_solution("def f(x):\n    ### BEGIN SOLUTION\n    y = x  # kept?\n\n    return y\n"
                                          "    ### END SOLUTION\n\nf(1)")
    assert text == "def f(x):\n    ...  # your code here\n    raise NotImplementedError\n\nf(1)"
    assert removed == 2  # blank lines and comments are not counted


def test_a_block_can_name_its_own_stub():
    text, removed = labgen.strip_solution("### BEGIN SOLUTION: answer = None\nanswer = 6 * 7\n### END SOLUTION\n"
                                          "check(answer)")
    assert text == "answer = None  # your answer here\ncheck(answer)" and removed == 1


@pytest.mark.parametrize("source, says", [
    ("### BEGIN SOLUTION\nx = 1", "has no '### END SOLUTION'"),
    ("x = 1\n### END SOLUTION", "without a BEGIN"),
    ("### BEGIN SOLUTION\n### BEGIN SOLUTION\n### END SOLUTION", "a second BEGIN"),
])
def test_markers_that_do_not_pair_up_are_named(source, says):
    with pytest.raises(labgen.LabSourceError, match=says):
        labgen.strip_solution(source, "lab_99 cell 3")


def test_the_unsolved_notebook_keeps_ids_and_drops_outputs():
    solved = {"cells": [{"cell_type": "markdown", "id": "a", "metadata": {}, "source": ["# Lab"]},
                        {"cell_type": "code", "id": "b", "metadata": {}, "execution_count": 3,
                         "outputs": [{"output_type": "stream", "name": "stdout", "text": ["42\n"]}],
                         "source": ["def f():\n", "    ### BEGIN SOLUTION\n", "    return 42\n",
                                    "    ### END SOLUTION\n"]}],
              "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    nb, counts = labgen.unsolved(solved)
    assert [c["id"] for c in nb["cells"]] == ["a", "b"] and counts == [1]
    assert nb["cells"][1]["outputs"] == [] and nb["cells"][1]["execution_count"] is None
    assert "".join(nb["cells"][1]["source"]) == "def f():\n    ...  # your code here\n    raise NotImplementedError\n"
    assert solved["cells"][1]["outputs"]  # the solution itself is left alone


def test_every_committed_lab_equals_what_its_solution_gives():
    assert labgen.build(check=True) == [], "run: python -m fmlab.course.labgen"


def test_solutions_with_markers_are_json_the_repository_writes(tmp_path):
    for solution in labgen.solutions():
        assert solution.read_text() == labgen.write_json(json.loads(solution.read_text())), solution.name


def test_the_unsolved_lab_is_not_titled_solution():
    solved = {"cells": [{"cell_type": "markdown", "id": "a", "metadata": {},
                         "source": ["# Lab 01 · Predicting a step (solution)\n", "\n", "Text (solution) stays.\n"]}],
              "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    nb, _ = labgen.unsolved(solved)
    assert "".join(nb["cells"][0]["source"]) == "# Lab 01 · Predicting a step\n\nText (solution) stays.\n"
    assert solved["cells"][0]["source"][0].endswith("(solution)\n")  # the solution keeps its title
    for lab in sorted((labgen.ROOT / "labs").glob(labgen.LAB_GLOB)):  # issue 40: lab 01 was titled "(solution)"
        cells = json.loads(lab.read_text())["cells"]
        title = next(ln for c in cells if c["cell_type"] == "markdown" for ln in "".join(c["source"]).splitlines()
                     if ln.startswith("# "))
        assert "(solution)" not in title, lab.name
