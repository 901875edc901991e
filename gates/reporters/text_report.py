"""`--format text`: a table of contracts, the receipt tally and the verdict line."""

from __future__ import annotations

from collections import Counter

from gates.engine.audit import AuditResult

_DETAIL_WIDTH = 90


def _shorten(text: str, width: int = _DETAIL_WIDTH) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def policy_lines(result: AuditResult) -> list[str]:
    """Where the rules and the trust come from, and what the PR proposes to change."""
    if result.policy is None:
        return []
    lines = [
        f"policy: {result.policy.describe()}",
        f"trust anchors: {result.policy.anchors.source}",
    ]
    return lines + [f"proposed: {change}" for change in result.proposed_changes]


def summary_line(result: AuditResult) -> str:
    """The report in one plain sentence: the verdict, what blocks it, and what to type next."""
    blocking = [c for c in result.contracts if c.spec.blocking]
    open_ = [c for c in blocking if c.blocks(result.today)]
    rejected = sum(1 for j in result.receipts if j.status == "rejected")
    steps = f"{result.formal_alignment_steps} / {result.required_steps} formal steps"
    if result.verdict == "pass":
        return (
            f"pass: all {len(blocking)} blocking contract(s) discharged, {steps}, "
            f"no receipt rejected"
        )
    parts = [f"{len(open_)} of {len(blocking)} blocking contract(s) not discharged"]
    if rejected:
        parts.append(f"{rejected} receipt(s) rejected")
    parts.append(steps)
    if open_:
        hint = f"next: `gates explain {open_[0].spec.id}`"
    elif rejected:
        hint = "next: see the rejected receipts below"
    else:
        hint = "next: see `blocked by` below"
    return f"blocked: {', '.join(parts)}; {hint}"


def render(result: AuditResult) -> str:
    rows = [("CONTRACT", "BLOCKING", "STATUS", "MET", "FIRST UNMET")]
    for contract in result.contracts:
        met = sum(c.met for c in contract.criteria)
        unmet = contract.first_unmet
        rows.append(
            (
                contract.spec.id,
                "yes" if contract.spec.blocking else "no",
                contract.status.value
                + (
                    " (waived)"
                    if contract.waived(result.today) and contract.status != "discharged"
                    else ""
                ),
                f"{met}/{len(contract.criteria)}",
                _shorten(f"{unmet.name}: {unmet.detail}") if unmet else "-",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = [summary_line(result), ""]
    lines += [
        "  ".join(cell.ljust(width) for cell, width in zip(row[:4], widths, strict=True))
        + "  "
        + row[4]
        for row in rows
    ]
    tally = Counter(j.status.value for j in result.receipts)
    lines.append("")
    lines.append(
        f"receipts: {len(result.receipts)} "
        f"({tally['formal']} formal, {tally['probe']} probe, {tally['rejected']} rejected)"
    )
    lines += [f"  rejected {j.path}: {j.reason}" for j in result.receipts if j.status == "rejected"]
    lines.append(
        f"formal_alignment_steps = {result.formal_alignment_steps} / {result.required_steps}"
    )
    if result.alignment.replay:
        lines.append(result.alignment.replay.sentence())
    lines += policy_lines(result)
    lines += [f"waiver: {w.describe(result.today)}" for w in result.waivers]
    lines += [f"blocked by: {blocker}" for blocker in result.blockers]
    lines.append(f"verdict={result.verdict}")
    return "\n".join(line.rstrip() for line in lines)
