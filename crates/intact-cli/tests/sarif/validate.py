#!/usr/bin/env python3
"""Validates intact's SARIF and JUnit outputs (used by tests/report_sarif_junit.rs).

    validate.py has MODULE             exit 0 if MODULE imports, 3 if not
    validate.py sarif SCHEMA FILE      JSON Schema validation (python-jsonschema, the
                                       validator class the schema's $schema names; formats
                                       checked where jsonschema can)
    validate.py junit-xsd XSD FILE     XML Schema validation (python xmlschema)
    validate.py junit-summary FILE     parses FILE with xml.etree (standard library) and
                                       prints its structure as JSON: suites with their
                                       attributes, properties and test cases

Exit status: 0 valid (or printed), 1 invalid (the errors on stdout), 2 usage, 3 the
validator module is not installed.
"""
import json
import sys


def need(module):
    try:
        return __import__(module)
    except ImportError:
        print(f"python module {module!r} is not installed for {sys.executable}", file=sys.stderr)
        sys.exit(3)


def sarif(schema_path, path):
    jsonschema = need("jsonschema")
    with open(schema_path) as f:
        schema = json.load(f)
    with open(path) as f:
        doc = json.load(f)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    validator = cls(schema, format_checker=getattr(cls, "FORMAT_CHECKER", None) or jsonschema.FormatChecker())
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path))
    for e in errors[:20]:
        where = "/".join(str(p) for p in e.absolute_path) or "(root)"
        print(f"{path}: {where}: {e.message[:300]}")
    if errors:
        print(f"{len(errors)} error(s) against {schema_path} ({cls.__name__})")
        return 1
    print(f"{path}: valid SARIF ({cls.__name__}, jsonschema {version('jsonschema')})")
    return 0


def junit_xsd(xsd_path, path):
    xmlschema = need("xmlschema")
    schema = xmlschema.XMLSchema(xsd_path)
    errors = list(schema.iter_errors(path))
    for e in errors[:20]:
        print(f"{path}: {e.path}: {e.reason}")
    if errors:
        print(f"{len(errors)} error(s) against {xsd_path}")
        return 1
    print(f"{path}: valid JUnit XML (xmlschema {version('xmlschema')})")
    return 0


def junit_summary(path):
    import xml.etree.ElementTree as ET

    root = ET.parse(path).getroot()
    suites = []
    for s in root.findall("testsuite"):
        cases = []
        for c in s.findall("testcase"):
            f = c.find("failure")
            cases.append({
                "attrib": c.attrib,
                "failure": None if f is None else {"attrib": f.attrib, "text": f.text or ""},
            })
        suites.append({
            "attrib": s.attrib,
            "properties": {p.get("name"): p.get("value") for p in s.iter("property")},
            "testcases": cases,
            "system_out": (s.findtext("system-out") or ""),
        })
    print(json.dumps({"tag": root.tag, "attrib": root.attrib, "suites": suites}))
    return 0


def version(module):
    try:
        from importlib.metadata import version as v
        return v(module)
    except Exception:
        return "?"


def main(argv):
    if len(argv) == 2 and argv[0] == "has":
        need(argv[1])
        return 0
    if len(argv) == 3 and argv[0] == "sarif":
        return sarif(argv[1], argv[2])
    if len(argv) == 3 and argv[0] == "junit-xsd":
        return junit_xsd(argv[1], argv[2])
    if len(argv) == 2 and argv[0] == "junit-summary":
        return junit_summary(argv[1])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
