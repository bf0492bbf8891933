#!/usr/bin/python3
"""Checks vramwatch report files against docs/report.schema.json (JSON Schema 2020-12).

Usage: validate_report.py [--schema FILE] REPORT...

Prints one line per file, "FILE: valid" or "FILE: invalid: WHERE: WHAT". Exit status: 0 when all
are valid, 1 when any is not, 2 for bad usage, 77 (the skip code of meson and automake) when the
python3 jsonschema module is missing (Debian: python3-jsonschema). Run it with /usr/bin/python3.
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from vwtest import SKIP  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_SCHEMA = os.path.join(HERE, "..", "..", "docs", "report.schema.json")


def reject_constant(name):
    # Python's json accepts NaN and Infinity; JSON does not, and neither does vramwatch.
    raise ValueError("not valid JSON: " + name)


def reject_duplicates(pairs):
    # Python's json keeps the last of a key given twice, cJSON (vramwatch) refuses the file: a
    # report with "failures": [] before the real "failures" reads differently by each reader.
    seen = set()
    for key, _ in pairs:
        if key in seen:
            raise ValueError('duplicate key "%s"' % key)
        seen.add(key)
    return dict(pairs)


def load(path):
    with open(path, "rb") as f:
        text = f.read().decode("utf-8")
    return json.loads(text, parse_constant=reject_constant, object_pairs_hook=reject_duplicates)


def where(error):
    parts = []
    for p in error.absolute_path:
        if isinstance(p, int):
            parts.append("[%d]" % p)
        else:
            parts.append(("." if parts else "") + str(p))
    return "".join(parts) or "(top)"


def main(argv):
    args = argv[1:]
    schema_path = DEFAULT_SCHEMA
    if len(args) >= 2 and args[0] == "--schema":
        schema_path, args = args[1], args[2:]
    if not args or args[0].startswith("-"):
        print("usage: validate_report.py [--schema FILE] REPORT...", file=sys.stderr)
        return 2
    try:
        import jsonschema
    except ImportError:
        print("validate_report: the python3 jsonschema module is missing (Debian: python3-jsonschema)",
              file=sys.stderr)
        return SKIP
    try:
        schema = load(schema_path)
        validator_class = jsonschema.validators.validator_for(schema)
        validator_class.check_schema(schema)
        validator = validator_class(schema)
    except (OSError, ValueError, jsonschema.exceptions.SchemaError) as e:
        print("validate_report: %s: cannot use the schema: %s" % (schema_path, e), file=sys.stderr)
        return 2
    bad = 0
    for path in args:
        try:
            report = load(path)
        except (OSError, ValueError, RecursionError) as e:
            print("%s: invalid: %s" % (path, str(e).splitlines()[0] if str(e) else type(e).__name__))
            bad += 1
            continue
        error = jsonschema.exceptions.best_match(validator.iter_errors(report))
        if error is None:
            print("%s: valid" % path)
        else:
            print("%s: invalid: %s: %s" % (path, where(error), error.message.splitlines()[0][:200]))
            bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
