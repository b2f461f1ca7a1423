#!/usr/bin/env python3
"""Documentation checks CI runs (see .ci/check-docs).

1. Every public symbol declared in the library's targets (Sources/CountdownStore*) has a doc
   comment (read from the symbol graphs that .ci/check-docs extracts).
2. Every ```swift block of the DocC articles, the README and the library's doc comments is
   compiled code: its lines appear, in order and together, in a file of
   Tests/CountdownStoreTests/Documentation/ or Examples/ (leading and trailing spaces, blank
   lines and the block's leading `import` lines aside: a compiled file imports at its top). A
   block whose first line is `// Package.swift` is an excerpt of a host's package manifest,
   which no target of ours can compile, and is skipped.
3. Every ``symbol`` link of the doc comments names a declared symbol, and every relative link
   of the Markdown files leads to a file.
4. No line of Sources/**/*.swift is longer than the line length of .swift-format (120): the
   formatter leaves a string literal or a comment as long as it is written.

Usage: check_docs.py [SYMBOL-GRAPH-FOLDER]; `--articles-only` runs all but the first check (no
symbol graph needed).
"""
import glob
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CATALOG = os.path.join(ROOT, "Sources/CountdownStore/CountdownStore.docc")
# The library's targets: the core, the engines and the module that re-exports them.
LIBRARY = re.compile(r"/Sources/CountdownStore(Core|SQLite|Postgres)?/")
COMPILED = [os.path.join(ROOT, "Tests/CountdownStoreTests/Documentation"), os.path.join(ROOT, "Examples")]


def undocumented_symbols(folder):
    """Public symbols of our sources without a doc comment, in the symbol graphs of `folder`
    (`CountdownStore`, with the core and the SQLite engine it re-exports, and `CountdownStorePostgres`)."""
    graphs = glob.glob(os.path.join(folder, "*.symbols.json"))
    if not graphs:
        sys.exit(f"error: no symbol graph in {folder}; run .ci/check-docs")
    sources = os.path.join(ROOT, "Sources") + "/"
    missing = set()
    for graph in graphs:
        for symbol in json.load(open(graph))["symbols"]:
            uri = symbol.get("location", {}).get("uri", "")
            # Symbols the compiler synthesizes (hashValue, ==) and those of other modules' extensions
            # have no location in our sources.
            if symbol.get("accessLevel") not in ("public", "open") or not LIBRARY.search(uri):
                continue
            lines = symbol.get("docComment", {}).get("lines", [])
            if not any(line.get("text", "").strip() for line in lines):
                where = uri.split(sources, 1)[1] + ":" + str(symbol["location"]["position"]["line"] + 1)
                missing.add(f"{where}: {symbol['kind']['displayName'].lower()} {'.'.join(symbol['pathComponents'])}")
    return sorted(missing)


def normalized(text):
    return [line.strip() for line in text.splitlines() if line.strip()]


def doc_comment_texts():
    """The doc comments of the library's sources, `///` markers removed, one text per file."""
    for path in sorted(glob.glob(os.path.join(ROOT, "Sources/CountdownStore*/**/*.swift"), recursive=True)):
        lines = []
        for line in open(path, encoding="utf-8").read().splitlines():
            stripped = line.strip()
            lines.append(stripped[4:] if stripped.startswith("/// ") else stripped[3:] if stripped.startswith("///") else "")
        yield path, "\n".join(lines) + "\n"


def uncompiled_blocks():
    sources = []
    for folder in COMPILED:
        for path in glob.glob(os.path.join(folder, "**/*.swift"), recursive=True):
            if "/.build" in path:
                continue  # an example package's own build folder: its dependencies' sources
            sources.append(normalized(open(path, encoding="utf-8").read()))
    problems = []
    pages = sorted(glob.glob(os.path.join(CATALOG, "**/*.md"), recursive=True)) + [os.path.join(ROOT, "README.md")]
    texts = [(path, open(path, encoding="utf-8").read()) for path in pages]
    for article, text in texts + list(doc_comment_texts()):
        for match in re.finditer(r"^```swift\n(.*?)^```", text, re.S | re.M):
            block = normalized(match.group(1))
            while block and block[0].startswith("import "):
                block = block[1:]
            if block and block[0] == "// Package.swift":
                continue
            found = any(
                source[i : i + len(block)] == block for source in sources for i in range(len(source) - len(block) + 1)
            )
            if not found:
                line = text[: match.start()].count("\n") + 1
                problems.append(f"{os.path.relpath(article, ROOT)}:{line}: this swift block is not in any compiled file")
    return problems


def declared_names():
    """Every name the package's sources declare (types, members, cases), and `init`."""
    names = {"init"}
    pattern = re.compile(
        r"\b(?:func|var|let|case|class|struct|enum|protocol|typealias|actor|associatedtype)\s+`?([A-Za-z_][A-Za-z0-9_]*)")
    for path in glob.glob(os.path.join(ROOT, "Sources/**/*.swift"), recursive=True):
        text = open(path, encoding="utf-8").read()
        names.update(pattern.findall(text))
        # The cases of one `case a, b, c` line.
        for line in re.findall(r"^\s*case\s+([^:=(\n]+)$", text, re.M):
            names.update(n.strip() for n in line.split(",") if re.fullmatch(r"[A-Za-z_]\w*", n.strip()))
    return names


def stale_symbol_links():
    """``Type/member`` links in the doc comments of every target (DocC checks only the
    catalog's module), and relative links of the Markdown files, that lead nowhere."""
    names = declared_names()
    problems = []
    link = re.compile(r"``([A-Za-z_][A-Za-z0-9_/().:-]*)``")
    for path in glob.glob(os.path.join(ROOT, "Sources/**/*.swift"), recursive=True):
        for number, line in enumerate(open(path, encoding="utf-8"), 1):
            if not line.lstrip().startswith("///"):
                continue
            for target in link.findall(line):
                for part in target.split("/"):
                    base = re.sub(r"\(.*$", "", part).split("-")[0]
                    if base and base not in names:
                        problems.append(f"{os.path.relpath(path, ROOT)}:{number}: ``{target}`` names no symbol ({base})")
                        break
    markdown = glob.glob(os.path.join(ROOT, "*.md")) + glob.glob(os.path.join(ROOT, "Sources/**/*.md"), recursive=True)
    for path in markdown:
        for number, line in enumerate(open(path, encoding="utf-8"), 1):
            for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", line):
                if re.match(r"[a-z]+:", target):
                    continue  # a URL, not a file of the repository
                here = os.path.dirname(path)
                # A DocC catalog names its images by file name, with or without the extension.
                resources = os.path.join(here, "Resources")
                if os.path.isdir(resources) and any(
                    name == target or os.path.splitext(name)[0] == target for name in os.listdir(resources)
                ):
                    continue
                if not os.path.exists(os.path.join(here, target)):
                    problems.append(f"{os.path.relpath(path, ROOT)}:{number}: the link {target} leads nowhere")
    return problems


def long_source_lines():
    """Lines of `Sources/**/*.swift` longer than the line length of .swift-format."""
    limit = json.load(open(os.path.join(ROOT, ".swift-format")))["lineLength"]
    problems = []
    for path in sorted(glob.glob(os.path.join(ROOT, "Sources/**/*.swift"), recursive=True)):
        for number, line in enumerate(open(path, encoding="utf-8").read().splitlines(), 1):
            if len(line) > limit:
                problems.append(f"{os.path.relpath(path, ROOT)}:{number}: {len(line)} characters (over {limit})")
    return problems


def main():
    folders = [arg for arg in sys.argv[1:] if not arg.startswith("--")]
    problems = [] if "--articles-only" in sys.argv else [
        f"undocumented public symbol: {m}" for m in undocumented_symbols(folders[0] if folders else ".build/docs/symbolgraph")
    ]
    problems += uncompiled_blocks()
    problems += stale_symbol_links()
    problems += long_source_lines()
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    if problems:
        sys.exit(1)
    print("documentation checks passed")


if __name__ == "__main__":
    main()
