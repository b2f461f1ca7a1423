"""Names the tests that a `swift test` log shows started but never ended (passed, failed or skipped).

Read from standard input; used when `swift test` is stopped at its time bound, to say what hung.
"""
import re
import sys

started, ended = [], set()
for line in sys.stdin:
    line = line.rstrip("\n")
    match = re.match(r'^◇ (Test|Suite) (".*?"|\S+)( with \d+ test cases?)? started\.', line)
    if match and match.group(2) != "run":  # "Test run started.": the whole run
        started.append((match.group(1), match.group(2)))
        continue
    match = re.match(r'^[✔✘➜↷━] (Test|Suite) (".*?"|\S+)', line)
    if match:
        ended.add((match.group(1), match.group(2)))
unfinished = [f"{kind} {name}" for kind, name in started if (kind, name) not in ended]
if unfinished:
    print("started but never ended:", file=sys.stderr)
    for name in unfinished:
        print(f"  {name}", file=sys.stderr)
