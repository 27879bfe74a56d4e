"""Dependencies shared by the routers."""

from __future__ import annotations

from schemas.rules import RuleSet
from service.config import Settings

from .errors import RequestError


def resolve_rules(rules: RuleSet | None, profile: str | None,
                  settings: Settings) -> tuple[RuleSet, bool]:
    """The rule set to apply and whether measures may be disclosed in the reply.

    Callers that send their own parameters know them; a profile's parameters stay in the
    service unless the profile says its measures may be disclosed (seed 003 B.1.e).
    """
    if rules is not None:
        return rules, True
    found = settings.profiles.get(profile)
    if found is None:
        raise RequestError(422, "unknown profile", field="profile")
    return found.rules, found.disclose_measures


def check_cell_count(n: int, settings: Settings) -> None:
    if n > settings.max_cells:
        raise RequestError(413, f"{n} cells exceed the limit of {settings.max_cells} per request",
                           field="cells")


def solver_seconds(asked: float | None, settings: Settings) -> float:
    """The solver time for a request: what the caller asked for, at most the service's cap."""
    cap = settings.max_solver_seconds
    return cap if asked is None else min(asked, cap)
