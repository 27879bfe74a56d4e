"""The typed table problem (service.sdc.problem): normalisation and errors in core terms."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from service.sdc.errors import InputError
from service.sdc.problem import TableProblem, relations_of
from service.sdc.table import Hierarchy, Table


def small():
    t = Table([Hierarchy.flat("r", ["A", "B"], "T"), Hierarchy.flat("c", ["I", "II"], "T")])
    return t, t.fill_margins(np.where(t.is_leaf, 10.0, 0.0))


def test_scalars_broadcast_and_levels_only_on_sensitive_cells():
    t, x = small()
    sens = np.zeros(t.n_cells, bool)
    sens[t.cell_index(("A", "I"))] = True
    p = TableProblem.of(t, x, sens, 3.0, 2.0)
    assert p.n_cells == t.n_cells == 9
    assert p.upper_protection.sum() == 3.0 and p.lower_protection.sum() == 2.0
    assert p.upper_protection[t.cell_index(("A", "I"))] == 3.0
    assert (p.lower_bounds == 0).all() and np.isposinf(p.upper_bounds).all()
    assert p.relations.shape == (6, 9)


@pytest.mark.parametrize(
    "kwargs, field, cell",
    [
        (dict(values=np.ones(4)), "values", None),
        (dict(sensitive=np.ones(3, bool)), "sensitive", None),
        (dict(upper_protection=np.r_[0, -1.0, np.zeros(7)]), "upper_protection", 1),
        (dict(lower_protection=np.r_[np.zeros(8), np.nan]), "lower_protection", 8),
        (dict(lower_bounds=np.r_[0, 0, 20.0, np.zeros(6)]), "lower_bounds", 2),
        (dict(upper_bounds=np.ones(2)), "upper_bounds", None),
        (dict(tolerance=-1.0), "tolerance", None),
    ],
)
def test_errors_name_the_core_input_and_the_cell(kwargs, field, cell):
    t, x = small()
    args = dict(
        values=x,
        sensitive=np.ones(t.n_cells, bool),
        upper_protection=1.0,
        lower_protection=1.0,
        lower_bounds=0.0,
        upper_bounds=15.0,
    )
    tolerance = kwargs.pop("tolerance", 0.0)
    args.update(kwargs)
    with pytest.raises(InputError) as err:
        TableProblem.of(t, tolerance=tolerance, **args)
    assert err.value.field == field and err.value.cell == cell


def test_relations_of_drops_stored_zeros():
    a = sp.csr_matrix(
        (np.array([1.0, 0.0, -1.0]), np.array([0, 1, 2]), np.array([0, 3])), shape=(1, 3)
    )
    assert a.nnz == 3 and relations_of(a).nnz == 2
