"""Rule sets on the wire to the core's, profiles, rule labels, and parameter conversions
(``/v1/conversions``). The rules themselves are in :mod:`service.sdc.rules`."""

from __future__ import annotations

from collections import Counter

from schemas import rules as wire
from schemas.conversions import ConversionReply, ConversionRequest
from service.config import Settings
from service.sdc import conversions, magnitudes, primary, rules

from .errors import RequestInputError


def resolve_rules(
    spec: wire.RuleSet | None, profile: str | None, settings: Settings
) -> tuple[wire.RuleSet, bool]:
    """The rule set to apply and whether measures may be disclosed in the reply.

    Callers that send their own parameters know them; a profile's parameters stay in the
    service unless the profile says its measures may be disclosed (seed 003 B.1.e).
    """
    if spec is not None:
        return spec, True
    found = None if profile is None else settings.profiles.get(profile)
    if found is None:
        raise RequestInputError("unknown profile", field="profile")
    return found.rules, found.disclose_measures


def rule_from_wire(rule: wire.Rule) -> rules.Rule:
    params = rule.model_dump(exclude={"type", "name"})
    return rules.RULES[rule.type](**params)


def ruleset_from_wire(spec: wire.RuleSet) -> primary.RuleSet:
    neg = spec.negative_values
    return primary.RuleSet(
        rules=tuple(rule_from_wire(r) for r in spec.rules),
        negative=magnitudes.NegativePolicy(neg.mode, neg.factor, neg.shift),
        zero_cells=spec.zero_cells,
        empty_cells=spec.empty_cells,
        frequency_range=spec.frequency_range,
    )


def rule_labels(specs: list[wire.Rule], *, with_parameters: bool) -> list[str]:
    """Names of the rules in replies: the caller's ``name``, else the type, with the
    parameters only when the caller sent them itself (profiles keep them confidential)."""
    labels = []
    for spec in specs:
        if spec.name:
            labels.append(spec.name)
        elif with_parameters:
            params = ",".join(
                f"{k}={v:g}" for k, v in spec.model_dump(exclude={"type", "name"}).items()
            )
            labels.append(f"{spec.type}({params})")
        else:
            labels.append(spec.type)
    seen: Counter[str] = Counter()
    unique = []
    for label in labels:
        seen[label] += 1
        unique.append(label if seen[label] == 1 else f"{label}#{seen[label]}")
    return unique


def rule_equivalents(body: ConversionRequest) -> ConversionReply:
    """Rules the seeds relate to the given one, each with the direction of the relation
    (:func:`service.sdc.conversions.equivalents`)."""
    params = body.rule.model_dump(exclude={"type", "name"})
    found = conversions.equivalents(body.rule.type, params, body.negative_factor)
    return ConversionReply.model_validate(
        {
            "equivalents": [
                {"rule": {"type": e.kind, **e.params}, "relation": e.relation, "source": e.source}
                for e in found
            ]
        }
    )
