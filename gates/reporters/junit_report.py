"""`--format junit`: one testcase per contract, for CI systems that read JUnit XML.

An unmet blocking contract is a failure, an `error` contract an error, a
waived or non-blocking unmet one is skipped with the reason; rejected
receipts and configuration errors are one more failing testcase each.
`<properties>` (verdict, formal_alignment_steps, policy, trust anchors) comes
first, as the JUnit XSD orders a testsuite's children.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from gates.contracts.model import ContractResult
from gates.core.criteria import DischargeStatus
from gates.engine.audit import AuditResult


def _case(suite: ET.Element, result: ContractResult, audit: AuditResult) -> str:
    case = ET.SubElement(suite, "testcase", classname="gates.contracts", name=result.spec.id)
    unmet = [f"{c.name}: {c.detail}" for c in result.criteria if not c.met]
    message = f"{result.status.value}; discharge: {result.spec.discharge}"
    if result.status is DischargeStatus.DISCHARGED:
        return "pass"
    if not result.blocks(audit.today):
        why = "waived" if result.waived(audit.today) else "not blocking"
        ET.SubElement(case, "skipped", message=f"{why}: {message}").text = "\n".join(unmet)
        return "skipped"
    tag = "error" if result.status is DischargeStatus.ERROR else "failure"
    ET.SubElement(case, tag, message=message, type=result.status.value).text = "\n".join(unmet)
    return tag


def render(audit: AuditResult) -> str:
    suite = ET.Element("testsuite", name="gates audit")
    # the JUnit XSD wants <properties> before the test cases
    properties = ET.SubElement(suite, "properties")
    for name, value in (
        ("verdict", audit.verdict),
        ("formal_alignment_steps", str(audit.formal_alignment_steps)),
        ("required_steps", str(audit.required_steps)),
        ("policy", audit.policy.describe() if audit.policy else "not resolved"),
        ("trust_anchors", audit.policy.anchors.source if audit.policy else "none"),
    ):
        ET.SubElement(properties, "property", name=name, value=value)
    outcomes = [_case(suite, result, audit) for result in audit.contracts]
    extra = [b for b in audit.blockers if not any(b.startswith(c.spec.id) for c in audit.contracts)]
    for blocker in extra:
        case = ET.SubElement(suite, "testcase", classname="gates.audit", name=blocker.split(":")[0])
        ET.SubElement(case, "failure", message=blocker)
        outcomes.append("failure")
    suite.set("tests", str(len(outcomes)))
    for kind, attribute in (("failure", "failures"), ("error", "errors"), ("skipped", "skipped")):
        suite.set(attribute, str(outcomes.count(kind)))
    ET.indent(suite)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suite, encoding="unicode")
