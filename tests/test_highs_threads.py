"""HiGHS's thread count (:func:`service.sdc.highs.scheduler_threads`): given explicitly
when it matches the process's scheduler, 0 (HiGHS's own choice) when a caller made the
scheduler with another count. Each case runs in a fresh interpreter: the scheduler is
made once per process."""

import os
import subprocess
import sys

import pytest

_SOLVE = """
import highspy, numpy as np, scipy.sparse as sp
from service.sdc import highs
{first}
h = highs.model([1.0, 1.0], [0.0, 0.0], [5.0, 5.0], sp.csc_matrix([[1.0, 1.0]]), [3.0], [np.inf])
outcome = highs.run(h, highs.now() + 60)
print(highs.scheduler_threads(), outcome.value, h.getObjectiveValue())
"""

_CALLER_FIRST = """
lp = highspy.HighsLp(); lp.num_col_, lp.num_row_ = 1, 0
lp.col_cost_ = np.ones(1); lp.col_lower_ = np.zeros(1); lp.col_upper_ = np.ones(1)
c = highspy.Highs(); c.setOptionValue("output_flag", False)
{option}
c.passModel(lp); c.run()
assert c.getModelStatus() == highspy.HighsModelStatus.kOptimal
"""


def _solve(first: str) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", _SOLVE.format(first=first)],
        capture_output=True,
        text=True,
        check=True,
        cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
    )
    return out.stdout.splitlines()[-1].split()


@pytest.mark.parametrize(
    ("first", "threads"),
    [
        ("", os.cpu_count()),
        (_CALLER_FIRST.format(option=""), os.cpu_count()),
        (_CALLER_FIRST.format(option=f'c.setOptionValue("threads", {os.cpu_count() + 1})'), 0),
    ],
    ids=["ours first", "a caller's default run first", "a caller's other count first"],
)
def test_models_solve_whoever_made_the_scheduler(first, threads):
    got = _solve(first)
    assert got[:2] == [str(threads), "optimal"]
    assert float(got[2]) == pytest.approx(3.0)
