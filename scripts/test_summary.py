#!/usr/bin/env python3
"""One line for everything `make test` ran: the GoogleTest JSON reports of every test
binary (written through GTEST_OUTPUT) in the folders given, counted across binaries.

A skipped test is a failure unless LARQL_ALLOW_SKIPS=1 is set on purpose: CTest counts a
binary as passed whatever its tests skipped inside it, which once hid a sixth of the suite.
Prints each skipped or failed test with its reason, then
"tests: N passed, N failed, N skipped". Exit status 1 when anything failed or skipped
unexpectedly, or when no report was found.
"""
import json
import os
import pathlib
import sys


def cases(report):
    for suite in report.get("testsuites", []):
        for case in suite.get("testsuite", []):
            yield suite["name"] + "." + case["name"], case


def main(folders):
    passed, failed, skipped = 0, [], []
    reports = [p for f in folders for p in sorted(pathlib.Path(f).glob("*.json"))]
    for path in reports:
        for name, case in cases(json.loads(path.read_text())):
            label = f"{path.parent.parent.name}/{path.stem}: {name}"
            if case.get("failures"):
                failed.append((label, case["failures"][0].get("failure", "").splitlines()[0:1]))
            elif case.get("result") == "SKIPPED" or case.get("status") == "NOTRUN":
                reason = [s.get("message", "") for s in case.get("skipped", [])] or [""]
                skipped.append((label, reason[0].splitlines()[-1:] if reason[0] else []))
            else:
                passed += 1
    for label, why in skipped:
        print(f"SKIPPED {label} {' '.join(why)}")
    for label, why in failed:
        print(f"FAILED  {label} {' '.join(why)}")
    allow = os.environ.get("LARQL_ALLOW_SKIPS") == "1"
    if skipped and not allow:
        print(f"{len(skipped)} skipped tests count as failures: a test skips when something it needs is missing "
              "(what `make deps` installs); its output says which. "
              "Set LARQL_ALLOW_SKIPS=1 to allow skips on purpose.")
    if not reports:
        print("no test reports found in " + ", ".join(folders))
    print(f"tests: {passed} passed, {len(failed)} failed, {len(skipped)} skipped")
    return 0 if reports and not failed and (allow or not skipped) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
