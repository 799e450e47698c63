#!/usr/bin/env bash
# Chat goldens (tool calls and reasoning) from the 2026 llama.cpp reference
# (built by scripts/reference/build.sh), written to
# native-tests/golden/chat/cases.json.
#
# The reference's own tests/test-chat.cpp is the source of the cases: a copy
# of it, made outside the repository, is given a hook that writes every parser
# case it runs and passes (template, messages, tools, options, model output,
# the message it expects) together with what the reference made of it (the
# prompt, the generation prompt, the format, the lazy-grammar triggers and
# the parsed message). Only the templates lamina's `chat::tools` formats cover
# are kept. Not part of the test command; the `chat_tools` test reads the file.
#
#   scripts/reference/chat-goldens.sh
set -euo pipefail
here="$(cd "$(dirname "$0")/../.." && pwd)"
build="$("$here/scripts/reference/build.sh")"
ref="$(dirname "$build")"
src="$ref/llama_cpp_python-0.3.36/vendor/llama.cpp"
out="$here/native-tests/golden/chat"
mkdir -p "$out"

# The hook: a few lines added to the copy; the test itself is unchanged.
python3 - "$src/tests/test-chat.cpp" "$ref/test-chat-dump.cpp" <<'PY'
import sys
source, target = sys.argv[1:]
text = open(source, encoding="utf-8").read()

def insert_before(marker, addition):
    global text
    assert text.count(marker) == 1, marker
    text = text.replace(marker, addition + marker)

# The server's request conversions are tested here too; they need the server
# sources (and their multimodal library), so those tests are emptied.
import re
text = text.replace('#include "../tools/server/server-chat.h"\n', "")
def empty_server_tests(match):
    body = match.group(0)
    if "server_chat" in body or "oaicompat_chat_params_parse" in body:
        return match.group(1) + " {}\n\n"
    return body
text = re.sub(r"(static void test_\w+\(\)) \{\n.*?\n\}\n\n", empty_server_tests, text, flags=re.S)

insert_before("static void test_peg_parser(", r'''
static std::string g_dump_template;
static std::ofstream g_dump;

static const char * dump_tool_choice(common_chat_tool_choice c) {
    switch (c) {
        case COMMON_CHAT_TOOL_CHOICE_REQUIRED: return "required";
        case COMMON_CHAT_TOOL_CHOICE_NONE:     return "none";
        default:                               return "auto";
    }
}

static const char * dump_continuation(common_chat_continuation c) {
    switch (c) {
        case COMMON_CHAT_CONTINUATION_AUTO:      return "auto";
        case COMMON_CHAT_CONTINUATION_REASONING: return "reasoning";
        case COMMON_CHAT_CONTINUATION_CONTENT:   return "content";
        default:                                 return "none";
    }
}

static void dump_case(const peg_test_case & tc, const make_peg_parser & parser) {
    if (!g_dump.is_open()) {
        return;
    }
    const auto & in = tc.params;
    const auto & out = parser.params_;
    json triggers = json::array();
    for (const auto & t : out.grammar_triggers) {
        triggers.push_back({ { "type", (int) t.type }, { "value", t.value } });
    }
    json kwargs = json::object();
    for (const auto & kv : in.chat_template_kwargs) {
        kwargs[kv.first] = json::parse(kv.second);
    }
    json c = {
        { "template", g_dump_template },
        { "messages", common_chat_msgs_to_json_oaicompat(in.messages) },
        { "tools", in.tools.empty() ? json() : common_chat_tools_to_json_oaicompat(in.tools) },
        { "tool_choice", dump_tool_choice(in.tool_choice) },
        { "parallel_tool_calls", in.parallel_tool_calls },
        { "enable_thinking", in.enable_thinking },
        { "reasoning_format", common_reasoning_format_name(in.reasoning_format) },
        { "add_generation_prompt", in.add_generation_prompt },
        { "continue_final_message", dump_continuation(in.continue_final_message) },
        { "json_schema", in.json_schema },
        { "chat_template_kwargs", kwargs },
        { "now", (long long) std::chrono::duration_cast<std::chrono::seconds>(in.now.time_since_epoch()).count() },
        { "input", tc.input },
        { "is_partial", tc.is_partial },
        { "expect", common_chat_msgs_to_json_oaicompat({ tc.expect }).at(0) },
        { "parsed", common_chat_msgs_to_json_oaicompat({ parser.parse(tc.input, tc.is_partial) }).at(0) },
        { "prompt", out.prompt },
        { "generation_prompt", out.generation_prompt },
        { "format", common_chat_format_name(out.format) },
        { "grammar_lazy", out.grammar_lazy },
        { "has_grammar", !out.grammar.empty() },
        { "grammar_triggers", triggers },
        { "preserved_tokens", out.preserved_tokens },
        { "additional_stops", out.additional_stops },
        { "thinking_start_tag", out.thinking_start_tag },
        { "thinking_end_tags", out.thinking_end_tags },
    };
    g_dump << c.dump() << "\n";
}

''')
# Written once the case has passed every assertion on its messages.
insert_before("    // A response format must be enforced by an eager grammar",
              "    dump_case(tc, parser);\n\n")
insert_before("test_peg_parser(tester_.tmpls_.get(),", "g_dump_template = tester_.template_path(); ")
insert_before("    bool detailed_debug    = false;",
              '    if (const char * path = getenv("CHAT_DUMP")) { g_dump.open(path); }\n')
open(target, "w", encoding="utf-8").write(text)
PY

exe="$ref/test-chat-dump"
if [ ! -x "$exe" ] || [ "$ref/test-chat-dump.cpp" -nt "$exe" ]; then
  c++ -O1 -std=c++17 "$ref/test-chat-dump.cpp" \
    -I"$src/tests" -I"$src/common" -I"$src/include" -I"$src/ggml/include" -I"$src/src" \
    -I"$src/vendor" \
    "$build/common/libllama-common.a" "$build/common/libllama-common-base.a" \
    "$build/src/libllama.a" "$build/ggml/src/libggml.a" \
    "$build/ggml/src/libggml-cpu.a" "$build/ggml/src/libggml-base.a" \
    -fopenmp -lpthread -o "$exe"
fi

# `--template ""` runs only the parser cases, every template; the test reads
# its templates relative to the source tree.
(cd "$src" && CHAT_DUMP="$ref/chat-cases.jsonl" "$exe" --template "" > "$ref/test-chat.log" 2>&1)

python3 - "$ref/chat-cases.jsonl" "$src/models/templates" "$out" <<'PY'
import json, os, sys
cases_file, templates, out = sys.argv[1:]
# The families lamina's tool-call formats cover, by template file.
keep = [
    "Qwen-Qwen2.5-7B-Instruct.jinja", "Qwen-Qwen3-0.6B.jinja", "Qwen-QwQ-32B.jinja",
    "Qwen3.5-4B.jinja", "Qwen3-Coder.jinja",
    "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja",
    "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja",
    "meta-llama-Llama-3.1-8B-Instruct.jinja", "meta-llama-Llama-3.2-3B-Instruct.jinja",
    "meta-llama-Llama-3.3-70B-Instruct.jinja",
    "mistralai-Mistral-Nemo-Instruct-2407.jinja", "Mistral-Small-3.2-24B-Instruct-2506.jinja",
    "unsloth-mistral-Devstral-Small-2507.jinja",
    "ibm-granite-granite-3.3-2B-Instruct.jinja", "ibm-granite-granite-4.0.jinja",
    "ibm-granite-granite-4.1.jinja",
    "google-gemma-2-2b-it.jinja", "google-gemma-4-31B-it.jinja",
    "HuggingFaceTB-SmolLM3-3B.jinja",
]
cases = []
for line in open(cases_file, encoding="utf-8"):
    case = json.loads(line)
    name = os.path.basename(case["template"])
    if name in keep:
        case["template"] = name
        cases.append(case)
used = sorted({c["template"] for c in cases})
os.makedirs(os.path.join(out, "templates"), exist_ok=True)
for name in used:
    with open(os.path.join(templates, name), encoding="utf-8") as f:
        body = f.read()
    with open(os.path.join(out, "templates", name), "w", encoding="utf-8") as f:
        f.write(body)
with open(os.path.join(out, "cases.json.tmp"), "w", encoding="utf-8") as f:
    json.dump(cases, f, indent=1, ensure_ascii=False)
    f.write("\n")
os.replace(os.path.join(out, "cases.json.tmp"), os.path.join(out, "cases.json"))
print(f"{len(cases)} cases from {len(used)} templates written to {out}", file=sys.stderr)
for name in used:
    print(f"  {name}: {sum(1 for c in cases if c['template'] == name)}", file=sys.stderr)
PY
