#!/usr/bin/env python3
"""Writes Sources/CountdownStoreServer/OpenAPIDocument.swift from openapi.json, so that the
server serves the document kept in the repository. Run it after editing openapi.json; a test
fails while the two differ."""
import pathlib

root = pathlib.Path(__file__).resolve().parent.parent
text = (root / "openapi.json").read_text(encoding="utf-8")
if '"""#' in text or "\\#(" in text:
    raise SystemExit("openapi.json holds a sequence a Swift raw string cannot: rewrite it")
swift = (
    "// The OpenAPI document of the HTTP API, served at `api/openapi.json`. Generated from\n"
    "// `openapi.json` at the root of the repository by `scripts/embed-openapi.py`: edit that file,\n"
    "// run the script; a test checks that the two are one.\n\n"
    "enum OpenAPIDocument {\n"
    "    /// The document, OpenAPI 3.1, as JSON text.\n"
    # A multi-line literal drops the line break before its closing delimiter: one more keeps the text's own.
    '    static let json = #"""\n' + text + '\n"""#\n}\n'
)
(root / "Sources/CountdownStoreServer/OpenAPIDocument.swift").write_text(swift, encoding="utf-8")
