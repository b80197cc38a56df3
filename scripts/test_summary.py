"""Prints the closing 'N passed, N failed, N skipped' line from meson's test
log, preceded by each skipped test with the reason it printed last."""
import json
import sys

counts = {"OK": 0, "FAIL": 0, "SKIP": 0, "TIMEOUT": 0, "EXPECTEDFAIL": 0, "UNEXPECTEDPASS": 0, "ERROR": 0}
with open(sys.argv[1]) as f:
    for line in f:
        line = line.strip()
        if line:
            r = json.loads(line)
            counts[r["result"]] = counts.get(r["result"], 0) + 1
            if r["result"] == "SKIP":
                said = [l for l in (r.get("stdout") or "").splitlines() if l.strip()]
                print(f"skipped: {r['name']}: {said[-1].strip() if said else '(no reason printed)'}")
failed = counts["FAIL"] + counts["TIMEOUT"] + counts["ERROR"] + counts["UNEXPECTEDPASS"]
print(f"tests: {counts['OK'] + counts['EXPECTEDFAIL']} passed, {failed} failed, {counts['SKIP']} skipped")
