#!/usr/bin/env bash
# JSON-schema goldens from the 2026 llama.cpp reference (built by
# scripts/reference/build.sh), written to native-tests/golden/json_schema/:
#
# - conversion.json: every case of the reference's
#   tests/test-json-schema-to-grammar.cpp with the grammar its
#   json_schema_to_grammar gives (or its error), from json-schema-cases.cpp;
# - integration.json: the schemas and GBNF grammars of its
#   tests/test-grammar-integration.cpp with the strings that test says they
#   accept and reject, read from the source; the reference's own test program
#   is built and run first, so every verdict written is one the reference holds.
#
# Not part of the test command; the `json_schema` test reads what it writes.
#
#   scripts/reference/json-schema-goldens.sh
set -euo pipefail
here="$(cd "$(dirname "$0")/../.." && pwd)"
build="$("$here/scripts/reference/build.sh")"
ref="$(dirname "$build")"
src="$ref/llama_cpp_python-0.3.36/vendor/llama.cpp"
out="$here/native-tests/golden/json_schema"
mkdir -p "$out"

link() { # SOURCE EXE
  c++ -O1 -std=c++17 "$1" -I"$src/tests" -I"$src/common" -I"$src/include" \
    -I"$src/ggml/include" -I"$src/src" -I"$src/vendor" \
    "$build/common/libllama-common.a" "$build/common/libllama-common-base.a" \
    "$build/src/libllama.a" "$build/ggml/src/libggml.a" \
    "$build/ggml/src/libggml-cpu.a" "$build/ggml/src/libggml-base.a" \
    -fopenmp -lpthread -o "$2"
}

link "$here/scripts/reference/json-schema-cases.cpp" "$ref/json-schema-cases"
"$ref/json-schema-cases" 2>/dev/null > "$out/conversion.json.tmp"
mv "$out/conversion.json.tmp" "$out/conversion.json"

# The reference's integration test must pass as it is before its lists are used.
link "$src/tests/test-grammar-integration.cpp" "$ref/test-grammar-integration"
"$ref/test-grammar-integration" > /dev/null 2>&1

python3 - "$src/tests/test-grammar-integration.cpp" "$out/integration.json" <<'PY'
# Reads the test_schema(...) and test_grammar(...) calls of the reference's
# integration test: a name, a schema or grammar, a list of strings that must
# match and a list that must not. Only calls made of plain string literals are
# taken; the ones that build strings with token ids need a vocabulary.
import json, re, sys

source, out = sys.argv[1:]
text = open(source, encoding="utf-8").read()

def tokens(text):
    """C++ tokens that matter here: string literals, punctuation, words."""
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            i = text.index("\n", i)
        elif text.startswith("/*", i):
            i = text.index("*/", i) + 2
        elif c.isspace():
            i += 1
        elif text.startswith('R"', i):
            open_paren = text.index("(", i)
            delim = text[i + 2:open_paren]
            end = text.index(")" + delim + '"', open_paren)
            yield ("str", text[open_paren + 1:end])
            i = end + len(delim) + 2
        elif c == '"':
            j, value = i + 1, bytearray()
            while text[j] != '"':
                if text[j] == "\\":
                    e = text[j + 1]
                    simple = {"n": 10, "t": 9, "r": 13, '"': 34, "\\": 92, "'": 39, "0": 0}
                    if e in simple:
                        value.append(simple[e]); j += 2
                    elif e == "x":
                        m = re.match(r"[0-9a-fA-F]+", text[j + 2:])
                        value.append(int(m.group(0), 16)); j += 2 + len(m.group(0))
                    else:
                        raise ValueError("escape \\" + e)
                else:
                    value += text[j].encode("utf-8"); j += 1
            yield ("str", value.decode("utf-8"))
            i = j + 1
        elif c.isalnum() or c == "_":
            m = re.match(r"\w+", text[i:])
            yield ("word", m.group(0)); i += len(m.group(0))
        else:
            yield ("punct", c); i += 1

toks = list(tokens(text))

def string_at(k):
    """Adjacent literals concatenate; returns (value, next index) or None."""
    if toks[k][0] != "str":
        return None
    value = ""
    while toks[k][0] == "str":
        value += toks[k][1]; k += 1
    return value, k

def list_at(k):
    if toks[k] != ("punct", "{"):
        return None
    k += 1
    items = []
    while toks[k] != ("punct", "}"):
        s = string_at(k)
        if s is None:
            return None
        items.append(s[0]); k = s[1]
        if toks[k] == ("punct", ","):
            k += 1
    return items, k + 1

cases, skipped = [], []
for k, tok in enumerate(toks):
    if tok[0] != "word" or tok[1] not in ("test_schema", "test_grammar") or toks[k + 1] != ("punct", "("):
        continue
    if toks[k - 1] == ("word", "void"):  # the definition
        continue
    name = string_at(k + 2)
    if name is None:
        continue
    body = string_at(name[1] + 1) if toks[name[1]] == ("punct", ",") else None
    passing = list_at(body[1] + 1) if body else None
    failing = list_at(passing[1] + 1) if passing else None
    if failing is None:
        skipped.append(name[0]); continue
    kind = "schema" if tok[1] == "test_schema" else "grammar"
    cases.append({"name": name[0], "kind": kind, kind: body[0],
                  "passing": passing[0], "failing": failing[0]})

with open(out + ".tmp", "w", encoding="utf-8") as f:
    json.dump(cases, f, indent=1, ensure_ascii=False)
    f.write("\n")
import os
os.replace(out + ".tmp", out)
print(f"{len(cases)} cases written, skipped (not plain literals): {skipped}", file=sys.stderr)
PY
echo "wrote $out" >&2
