"""Prints the closing 'N passed, N failed, N skipped' line from meson's test log."""
import json
import sys

counts = {"OK": 0, "FAIL": 0, "SKIP": 0, "TIMEOUT": 0, "EXPECTEDFAIL": 0, "UNEXPECTEDPASS": 0, "ERROR": 0}
with open(sys.argv[1]) as f:
    for line in f:
        line = line.strip()
        if line:
            r = json.loads(line)
            counts[r["result"]] = counts.get(r["result"], 0) + 1
failed = counts["FAIL"] + counts["TIMEOUT"] + counts["ERROR"] + counts["UNEXPECTEDPASS"]
print(f"tests: {counts['OK'] + counts['EXPECTEDFAIL']} passed, {failed} failed, {counts['SKIP']} skipped")
