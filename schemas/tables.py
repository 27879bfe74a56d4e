"""Tables with structure on the wire: dimensions with code hierarchies, linked tables, and
cells with values, contributions or protection levels. Shared by the audit and the
suppression endpoints."""

from __future__ import annotations

from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from service.sdc.highs import Outcome

from .cells import STRICT as _STRICT
from .cells import CellKey, Code, Contribution, Summary
from .frequency import ExtendedRules
from .rules import RuleSet


class Dimension(BaseModel):
    """One dimension: a flat list of leaves under a total, or a hierarchy of any depth."""

    model_config = _STRICT
    name: Code
    total: Code = Field("Total", description="code of the dimension's grand total")
    leaves: list[Code] | None = Field(
        None, min_length=1, max_length=100_000, description="flat dimension: its leaf codes"
    )
    children: dict[Code, list[Code]] | None = Field(
        None,
        description="hierarchical dimension: each parent code's child codes, the total "
        "included as a parent; a code may have a single child",
    )

    @model_validator(mode="after")
    def _one_form(self) -> Dimension:
        if (self.leaves is None) == (self.children is None):
            raise ValueError("give exactly one of 'leaves' and 'children'")
        return self


class Structure(BaseModel):
    """Dimensions, and optionally the linked tables that share them."""

    model_config = _STRICT
    dimensions: list[Dimension] = Field(min_length=1, max_length=8)
    tables: list[list[Code]] | None = Field(
        None,
        min_length=1,
        max_length=50,
        description="linked tables, each the names of its dimensions; omitted: one table of "
        "all dimensions. Cells are keyed by one code per dimension of 'dimensions', the "
        "dimension's total standing for a dimension a table does not have",
    )
    tolerance: float = Field(
        0.0,
        ge=0,
        description="absolute tolerance on |parent - sum(children)| for sent "
        "margins; the audit then treats each relation as holding within it",
    )


class Protection(BaseModel):
    """Protection levels given by the caller (instead of, or on top of, a rule set)."""

    model_config = _STRICT
    upper: float = Field(ge=0)
    lower: float = Field(ge=0)


class CountRules(BaseModel):
    """A frequency (count) table: cell values are counts of respondents, judged by the
    threshold rule (seed 003 section A; seed 001, Example) and/or seed 001's extended
    threshold rules instead of magnitude rules."""

    model_config = _STRICT
    threshold: float | None = Field(
        None,
        ge=0,
        description="cells with 0 < count < threshold are sensitive (the threshold rule)",
    )
    extended: ExtendedRules | None = Field(
        None,
        description="seed 001's extended threshold rules on the cells whose key and "
        "target codes are leaves (any code of the other dimensions), the key hierarchies' "
        "areas (subtotals) and both marginals; needs 'keys' and 'targets'",
    )
    keys: list[Code] = Field(
        default_factory=list,
        max_length=8,
        description="dimensions that are key variables (known to an intruder); extended rules",
    )
    targets: list[Code] = Field(
        default_factory=list,
        max_length=8,
        description="dimensions that are target variables; extended rules",
    )
    range: float = Field(
        0.0,
        ge=0,
        le=100,
        description="protection level as a percentage of "
        "the cell's count; 0: the cell must only not be disclosed exactly",
    )
    zero_cells: Literal["safe", "sensitive"] = Field(
        "safe",
        description="threshold rule: 'sensitive' for zeros whose emptiness is itself "
        "confidential (informative zeros, seed 001); the extended rules have their own",
    )

    @model_validator(mode="after")
    def _rules_given(self) -> CountRules:
        if self.threshold is None and self.extended is None:
            raise ValueError("give 'threshold', 'extended' or both")
        if self.extended is not None and not (self.keys and self.targets):
            raise ValueError("the extended rules need 'keys' and 'targets' (dimension names)")
        return self


class TableCell(BaseModel):
    """A cell of a structured table. Leaves need a value or contributions or a summary;
    margins may be left out (or sent without a value) and are then computed."""

    model_config = _STRICT
    key: CellKey = Field(min_length=1, max_length=8, description="one code per dimension")
    value: float | None = Field(
        None,
        description="the cell value; default: the sum of "
        "contributions, the summary's total, or the sum of its children",
    )
    contributions: list[Contribution] | None = None
    summary: Summary | None = None
    protection: Protection | None = Field(
        None, description="makes the cell sensitive with these protection levels"
    )
    lower_bound: float | None = Field(
        None, description="a-priori lower bound known to an intruder (default 0)"
    )
    upper_bound: float | None = Field(None, description="a-priori upper bound (default none)")

    @model_validator(mode="after")
    def _at_most_one_source(self) -> TableCell:
        if self.contributions is not None and self.summary is not None:
            raise ValueError("give at most one of 'contributions' and 'summary'")
        return self


class AuditCell(TableCell):
    suppressed: bool = False


class TableRequestBase(BaseModel):
    """What every request on a table structure has (audit, suppression, adjustment,
    rounding): the structure, and at most one of a rule set, a profile and count rules
    (none: the cells carry protection levels). Each request adds its cells."""

    model_config = _STRICT
    structure: Structure
    counts: CountRules | None = Field(None, description="the table is a count table")
    rules: RuleSet | None = None
    profile: str | None = Field(
        None, max_length=100, description="name of a configured rule profile"
    )

    @model_validator(mode="after")
    def _one_kind(self) -> Self:
        given = [name for name in ("rules", "profile", "counts") if getattr(self, name) is not None]
        if len(given) > 1:
            raise ValueError(f"give at most one of 'rules', 'profile' and 'counts' (got {given})")
        return self


class AuditRequest(TableRequestBase):
    """A table, a suppression pattern and what makes cells sensitive."""

    model_config = ConfigDict(
        **_STRICT,
        json_schema_extra={
            "examples": [
                {
                    "structure": {
                        "dimensions": [
                            {"name": "size", "leaves": ["A", "B", "C"]},
                            {"name": "activity", "leaves": ["I", "II", "III"]},
                        ]
                    },
                    # Every leaf with its contributions: the margins pool them and are judged too.
                    "cells": [
                        {
                            "key": ["A", "I"],
                            "suppressed": True,
                            "contributions": [{"value": 155}, {"value": 4}, {"value": 1}],
                        },
                        {
                            "key": ["A", "II"],
                            "suppressed": True,
                            "contributions": [{"value": 200}, {"value": 100}, {"value": 80}],
                        },
                        {
                            "key": ["A", "III"],
                            "contributions": [{"value": 150}, {"value": 100}, {"value": 90}],
                        },
                        {
                            "key": ["B", "I"],
                            "suppressed": True,
                            "contributions": [
                                {"value": 12},
                                {"value": 10},
                                {"value": 9},
                                {"value": 9},
                            ],
                        },
                        {
                            "key": ["B", "II"],
                            "suppressed": True,
                            "contributions": [{"value": 40}, {"value": 20}, {"value": 20}],
                        },
                        {
                            "key": ["B", "III"],
                            "contributions": [{"value": 30}, {"value": 20}, {"value": 10}],
                        },
                        {
                            "key": ["C", "I"],
                            "contributions": [{"value": 250}, {"value": 200}, {"value": 160}],
                        },
                        {
                            "key": ["C", "II"],
                            "contributions": [{"value": 300}, {"value": 250}, {"value": 250}],
                        },
                        {
                            "key": ["C", "III"],
                            "contributions": [{"value": 100}, {"value": 90}, {"value": 80}],
                        },
                    ],
                    "rules": {"rules": [{"type": "p_percent", "p": 20}]},
                }
            ]
        },
    )
    cells: list[AuditCell] = Field(min_length=1)
    time_limit: float | None = Field(
        None, gt=0, description="solver seconds for the whole audit; capped by the service"
    )


class Flags(BaseModel):
    exact: bool = Field(description="the interval is a point: the value is disclosed")
    upper_too_close: bool
    lower_too_close: bool
    too_narrow: bool = Field(description="narrower than the two protection levels together")


class AuditedCell(BaseModel):
    key: CellKey
    suppressed: bool
    sensitive: bool
    protected: bool | None = Field(description="null for cells that need no protection")
    interval: tuple[float | None, float | None] | None = Field(
        None,
        description="feasibility interval [min, max] (null bound: unbounded); for "
        "partial suppression these ranges can be published instead of crosses",
    )
    certified: bool | None = None
    flags: Flags | None = None
    missing_upper: float | None = None
    missing_lower: float | None = None
    upper_protection: float | None = None
    lower_protection: float | None = None
    derived: bool | None = Field(
        None,
        description="a suppressed cell the published cells determine exactly: it is "
        "read as published when the aggregations are judged",
    )


class AuditedUnion(BaseModel):
    relation: str = Field(description="the relation the union is read from")
    cells: list[CellKey]
    coefficients: list[float]
    value: float
    checked: bool
    sensitive: bool
    fired: list[str]


#: How a solve the service reports ended: a HiGHS :class:`~service.sdc.highs.Outcome`, all
#: but ``unbounded`` (an unbounded interval LP is an infinite bound, not an end). The labels
#: of the ``sdc_solver_outcomes_total`` metric.
SolveStatus = Literal[Outcome.OPTIMAL, Outcome.TIME_LIMIT, Outcome.INFEASIBLE, Outcome.ERROR]
#: How a suppression ended (``SuppressionResult.status``); its solver outcome for the
#: metrics is :data:`service.pipeline.suppress.OUTCOME`.
SuppressStatus = Literal["optimal", "feasible", "time_limit", "no_safe_pattern"]


class SolverReport(BaseModel):
    status: SolveStatus
    message: str
    lp_solves: int
    components: int
    seconds: float
    time_limit: float


class SensitiveAggregation(BaseModel):
    cells: list[CellKey]
    coefficients: list[float] = Field(description="lambda, largest magnitude 1")
    value: float = Field(description="the value the published cells give it")
    rule: str = Field(description="the rule that judges it sensitive")
    measure: float | None = Field(
        None,
        description="the rule's measure S on its absolute "
        "contributions (seed 002 section 5); analysts of profiles "
        "that disclose measures only",
    )
    found_by: Literal["relation", "screen", "mip", "support"]


class AggregationReport(BaseModel):
    status: Literal["safe", "sensitive", "undecided", "not_applicable"] = Field(
        description="safe: every aggregation of suppressed cells an intruder can derive was "
        "proven safe; sensitive: see 'worst'; undecided: not proven in time (the verdict is "
        "then uncertified); not_applicable: aggregations through cells sent without "
        "contributions or summary could not be judged"
    )
    message: str
    derived: list[CellKey] = Field(description="suppressed cells the intruder computes exactly")
    sensitive_groups: int
    worst: SensitiveAggregation | None = Field(
        None, description="the most sensitive aggregation found"
    )
    groups: int = Field(description="groups of suppressed cells with a sensitive cell")
    screened: int = Field(description="groups proven safe by the LP screen")
    mip_solves: int
    seconds: float


class AuditReply(BaseModel):
    verdict: Literal["safe", "unsafe", "uncertified", "infeasible"]
    reasons: list[str] = Field(
        description="why the verdict is not safe; with a safe verdict, what could not be checked"
    )
    unions_checked: bool = Field(
        description="every aggregation of suppressed cells was "
        "judged by the rule (needs contributions or summaries)"
    )
    cells: list[AuditedCell] = Field(description="suppressed cells and sensitive cells")
    unions: list[AuditedUnion] | None = None
    aggregations: AggregationReport | None = None
    solver: SolverReport | None = None


CostKind = Literal["value", "unity", "contributors", "log", "weights"]


class SuppressCell(TableCell):
    cost: float | None = Field(None, ge=0, description="this cell's cost under cost 'weights'")
    constraint: Literal["forbid", "force"] | None = Field(
        None, description="'forbid': never suppress (a key figure); 'force': always suppress"
    )


class SuppressRequest(TableRequestBase):
    """The whole pipeline: cells with contributions (or summaries), structure and rules in;
    every cell's status, protection, the audit and the information loss out."""

    model_config = ConfigDict(
        **_STRICT,
        json_schema_extra={
            "examples": [
                {
                    "structure": {
                        "dimensions": [
                            {"name": "size", "leaves": ["A", "B", "C"]},
                            {"name": "activity", "leaves": ["I", "II", "III"]},
                        ]
                    },
                    "cells": [
                        {
                            "key": ["A", "I"],
                            "contributions": [{"value": 155}, {"value": 4}, {"value": 1}],
                        },
                        {
                            "key": ["A", "II"],
                            "contributions": [{"value": 200}, {"value": 100}, {"value": 80}],
                        },
                        {
                            "key": ["A", "III"],
                            "contributions": [{"value": 150}, {"value": 100}, {"value": 90}],
                        },
                        {
                            "key": ["B", "I"],
                            "contributions": [
                                {"value": 12},
                                {"value": 10},
                                {"value": 9},
                                {"value": 9},
                            ],
                        },
                        {
                            "key": ["B", "II"],
                            "contributions": [{"value": 40}, {"value": 20}, {"value": 20}],
                        },
                        {
                            "key": ["B", "III"],
                            "contributions": [{"value": 30}, {"value": 20}, {"value": 10}],
                        },
                        {
                            "key": ["C", "I"],
                            "contributions": [{"value": 250}, {"value": 200}, {"value": 160}],
                        },
                        {
                            "key": ["C", "II"],
                            "contributions": [{"value": 300}, {"value": 250}, {"value": 250}],
                        },
                        {
                            "key": ["C", "III"],
                            "contributions": [{"value": 100}, {"value": 90}, {"value": 80}],
                        },
                    ],
                    "rules": {"rules": [{"type": "p_percent", "p": 20}]},
                    "method": "exact",
                    "cost": "value",
                },
                {
                    # A count table under seed 001's extended rules, with a hierarchical key.
                    "structure": {
                        "dimensions": [
                            {
                                "name": "municipality",
                                "children": {
                                    "Total": ["North", "South"],
                                    "North": ["m1", "m2"],
                                    "South": ["m3"],
                                },
                            },
                            {"name": "Y", "leaves": ["A", "B"]},
                        ]
                    },
                    "cells": [
                        {"key": ["m1", "A"], "value": 19},
                        {"key": ["m1", "B"], "value": 1},
                        {"key": ["m2", "A"], "value": 17},
                        {"key": ["m2", "B"], "value": 3},
                        {"key": ["m3", "A"], "value": 6},
                        {"key": ["m3", "B"], "value": 6},
                    ],
                    "counts": {
                        "extended": {"t_key_abs": 1, "t_key_rel": 90},
                        "keys": ["municipality"],
                        "targets": ["Y"],
                    },
                    "method": "fast",
                },
            ]
        },
    )
    cells: list[SuppressCell] = Field(min_length=1)
    method: Literal["fast", "exact", "partial"] = Field(
        "fast",
        description="'exact': Fischetti-Salazar mixed-integer model with cuts (small "
        "and medium tables); 'fast': one cell at a time by LP, then superfluous removal; "
        "'partial': partial suppression (seed 000; Salazar 2003), the narrowest published "
        "intervals [value - d-, value + d+] (least total width weighted by 'cost') that "
        "protect every sensitive cell, a linear program solved by cut generation; every "
        "cell with an interval is published as it ('published'), so 'publish' must be "
        "'intervals' or left out",
    )
    cost: CostKind = Field("value", description="information loss per suppressed cell")
    time_limit: float | None = Field(
        None, gt=0, description="seconds for the whole call; capped by the service"
    )
    work_limit: int | None = Field(
        None,
        ge=1,
        le=10**10,
        description="deterministic mode: the search's budget in solver work (one unit per "
        "LP or MIP solve plus its simplex iterations; about 20,000 a second here) instead of "
        "a share of the time limit, so that the same request gives the same pattern on any "
        "machine; 'time_limit' still bounds the call, and a reply stopped by it says that it "
        "depends on the machine",
    )
    publish: Literal["crosses", "intervals"] = Field(
        "crosses",
        description="'crosses': suppressed cells are published as crosses; 'intervals': "
        "partial suppression (seed 000; Salazar 2003): each suppressed cell's feasibility "
        "interval is published instead ('published' of the cell, to every role), and the "
        "audit is recomputed with those intervals as the cells' a-priori bounds",
    )


class CellStatus(BaseModel):
    key: CellKey
    status: Literal["primary", "secondary", "published"]
    value: float | None = Field(
        None,
        description="the cell's value (margins included; on the original scale under "
        "negative_values 'shift'); null for a suppressed cell unless the caller is an "
        "analyst, and for every cell of a reply that is not safe unless the caller is one",
    )
    interval: tuple[float | None, float | None] | None = Field(
        None,
        description="analysts only: a suppressed cell's feasibility interval [min, max] from "
        "the reply's audit (null bound: unbounded; null: no certified interval)",
    )
    published: tuple[float | None, float | None] | None = Field(
        None,
        description="with publish 'intervals' (partial suppression): the interval published "
        "for this suppressed cell instead of a cross, to every role; null: a cross",
    )


class Loss(BaseModel):
    cells: int = Field(description="suppressed cells, primary included")
    secondary: int
    value: float = Field(description="total value of the suppressed cells")
    value_share: float = Field(description="suppressed value / total value of all cells")
    cost: float = Field(
        description="the objective: cost of all suppressed cells (method 'partial': the "
        "total width of the published intervals, each unit weighted by the cell's cost)"
    )


class SuppressSolver(BaseModel):
    method: Literal["fast", "exact", "partial"]
    status: SuppressStatus
    message: str
    lower_bound: float | None = Field(
        None, description="proven lower bound on the cost (exact, partial)"
    )
    gap: float | None = Field(None, description="relative gap to the lower bound (exact, partial)")
    seconds: float
    iterations: int
    work: float | None = Field(
        None, description="deterministic mode ('work_limit'): the solver work the search used"
    )
    time_limit: float = Field(
        description="the request's whole wall time: the reply comes "
        "within it, plus at most 0.5 s or 5% of it, whichever is less"
    )
    verdict: Literal["safe", "unsafe", "uncertified", "infeasible"] | None = Field(
        None,
        description="the final audit's verdict on the pattern found, also when it is "
        "not returned ('uncertified': it could not be certified in time); null when no "
        "pattern was reached",
    )
    unprotected: list[CellKey] = Field(
        default_factory=list,
        description="with no pattern returned: the sensitive cells "
        "the pattern reached leaves unprotected or not proven protected (under status "
        "'time_limit' because the time ran out, not because the table has no safe pattern)",
    )


class SuppressReply(BaseModel):
    safe: bool = Field(
        description="a pattern was found and passed the audit; false: no "
        "pattern is returned and 'solver.message' says why (status "
        "'no_safe_pattern': none within the constraints, or the one found cannot be "
        "certified however long the audit runs; 'time_limit': none "
        "found and certified in time, 'solver.unprotected' lists the cells)"
    )
    cells: list[CellStatus] = Field(description="every cell of the table")
    loss: Loss | None = None
    solver: SuppressSolver
    audit: AuditReply | None = None
