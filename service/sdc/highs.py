"""A HiGHS model from arrays: the one place that fills ``highspy.HighsLp``.

The audit, the suppression methods and the aggregation check build their LPs and MIPs
from numpy arrays and a sparse constraint matrix; this is the shared boundary (scipy's
``linprog``/``milp`` do the same behind their HiGHS wrappers). New models should be built
here; the older hand-built ones in :mod:`service.sdc.audit` and :mod:`service.sdc.suppress`
are the same shape and can move over.
"""

from __future__ import annotations

import highspy
import numpy as np
import scipy.sparse as sp


def model(cost, col_lower, col_upper, a, row_lower, row_upper, *, maximize: bool = False,
          integer=None, **options) -> highspy.Highs:
    """A silent ``highspy.Highs`` holding ``min/max cost x`` s.t. ``row_lower <= a x <=
    row_upper``, ``col_lower <= x <= col_upper``, ``x_j`` integer where ``integer``.

    ``options`` are HiGHS options set before the model is passed (e.g. ``presolve="off"``).
    """
    a = sp.csc_matrix(a, dtype=float)
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = a.shape[1], a.shape[0]
    lp.col_cost_ = np.asarray(cost, dtype=float)
    lp.col_lower_ = np.asarray(col_lower, dtype=float)
    lp.col_upper_ = np.asarray(col_upper, dtype=float)
    lp.row_lower_ = np.asarray(row_lower, dtype=float)
    lp.row_upper_ = np.asarray(row_upper, dtype=float)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = a.indptr.astype(np.int32)
    lp.a_matrix_.index_ = a.indices.astype(np.int32)
    lp.a_matrix_.value_ = a.data.astype(float)
    if maximize:
        lp.sense_ = highspy.ObjSense.kMaximize
    if integer is not None:
        lp.integrality_ = [highspy.HighsVarType.kInteger if v else
                           highspy.HighsVarType.kContinuous for v in np.asarray(integer, bool)]
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    for name, value in options.items():
        h.setOptionValue(name, value)
    h.passModel(lp)
    return h
