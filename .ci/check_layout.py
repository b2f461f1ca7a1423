#!/usr/bin/env python3
"""The architecture the targets promise, checked on the package graph and the sources.

- The core (`CountdownStoreCore`) depends on no engine: neither GRDB nor postgres-nio (SwiftNIO),
  and none of its files imports one.
- A host of the PostgreSQL product builds no GRDB; a host of `CountdownStore` (SQLite) builds no
  SwiftNIO; neither builds Hummingbird, which only the server product (`CountdownStoreServer`,
  engine-neutral itself) builds: checked on the closure of each library's target dependencies.
- The UI product (`CountdownStoreUI`) builds on the SQLite store an app keeps, and no SwiftNIO
  or Hummingbird.
- The core's code holds no SQL (its comments may name a column): the SQL both engines speak is
  in `CountdownStoreSQL`. Nor does the core name an engine, in code or comments.

Reads `swift package describe --type json` from standard input.
"""
import glob
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENGINES = {"GRDB", "PostgresNIO", "NIO", "NIOCore", "NIOPosix", "CSQLiteShim", "Hummingbird", "Prometheus"}
SERVER = {"Hummingbird", "HummingbirdCore", "CountdownStoreServer"}

package = json.load(sys.stdin)
targets = {t["name"]: t for t in package["targets"]}


def closure(name):
    """Every target and product the target builds with, its own included."""
    seen, stack = set(), [name]
    while stack:
        current = stack.pop()
        if current in seen:
            continue
        seen.add(current)
        target = targets.get(current)
        if target:
            stack += target.get("target_dependencies", []) + target.get("product_dependencies", [])
    return seen


problems = []
for library, forbidden in [
    ("CountdownStoreCore", ENGINES),
    ("CountdownStore", {"PostgresNIO", "NIO", "NIOCore", "NIOPosix"} | SERVER),
    ("CountdownStorePostgres", {"GRDB", "CSQLiteShim", "CountdownStoreSQLite"} | SERVER),
    ("CountdownStoreServer", {"GRDB", "CSQLiteShim", "CountdownStoreSQLite", "PostgresNIO", "CountdownStorePostgres"}),
    ("CountdownStoreUI", {"PostgresNIO", "NIO", "NIOCore", "NIOPosix", "CountdownStorePostgres"} | SERVER),
    ("CountdownStoreLocation", SERVER),
]:
    found = closure(library) & forbidden
    if found:
        problems.append(f"{library} builds {', '.join(sorted(found))}")

for path in glob.glob(os.path.join(ROOT, "Sources/CountdownStoreCore/**/*.swift"), recursive=True):
    for number, line in enumerate(open(path, encoding="utf-8"), 1):
        match = re.match(r"\s*(?:@\w+(?:\([^)]*\))?\s+)*import\s+(?:\w+\s+)?(\w+)", line)
        if match and (match.group(1) in ENGINES or match.group(1).startswith(("NIO", "SQLite", "GRDB"))):
            problems.append(f"{os.path.relpath(path, ROOT)}:{number}: the core imports {match.group(1)}")

# The core holds no SQL: it asks for rows as data (`ItemListing`), and the SQL both engines speak
# lives in `CountdownStoreSQL`. Checked on the code, comments left out (they may quote a column).
SQL = re.compile(
    r"\b(SELECT\s|INSERT\s+INTO|DELETE\s+FROM|UPDATE\s+\w+\s+SET|ORDER\s+BY|GROUP\s+BY|WHERE\s|INDEXED\s+BY"
    r"|CREATE\s+(?:TABLE|INDEX|VIEW|TRIGGER)|PRAGMA\s|RETURNING\s|ON\s+CONFLICT)"
)
for path in glob.glob(os.path.join(ROOT, "Sources/CountdownStoreCore/**/*.swift"), recursive=True):
    for number, line in enumerate(open(path, encoding="utf-8"), 1):
        code = line.split("//", 1)[0]
        if SQL.search(code):
            problems.append(f"{os.path.relpath(path, ROOT)}:{number}: SQL in the core: {code.strip()[:80]}")

# Nor does it name an engine, in code or comments: what is one engine's is said in that engine.
# (A deprecation may point to where a setting moved.)
ENGINE_NAMES = re.compile(r"SQLite|PostgreSQL|Postgres|GRDB|\bWAL\b|synchronous_commit|postgres-nio")
for path in glob.glob(os.path.join(ROOT, "Sources/CountdownStoreCore/**/*.swift"), recursive=True):
    for number, line in enumerate(open(path, encoding="utf-8"), 1):
        if "@available(" in line or "deprecated, message:" in line:
            continue
        found = ENGINE_NAMES.search(line)
        if found:
            problems.append(f"{os.path.relpath(path, ROOT)}:{number}: the core names the engine {found.group(0)}")

if problems:
    print("error: the layout is broken:\n  " + "\n  ".join(problems), file=sys.stderr)
    sys.exit(1)
print("layout: the core imports no engine, names none and holds no SQL; CountdownStore builds no SwiftNIO; CountdownStorePostgres builds no GRDB;"
      " only CountdownStoreServer builds Hummingbird, and no engine; CountdownStoreUI builds neither SwiftNIO nor Hummingbird; CountdownStoreLocation builds no Hummingbird")
