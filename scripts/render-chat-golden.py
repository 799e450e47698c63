#!/usr/bin/env python3
"""Renders the chat templates in native-tests/golden/templates/ with Python's
jinja2, set up as Hugging Face transformers sets it up for
apply_chat_template, and writes the results to
native-tests/golden/templates/rendered.json for native-tests/chat.rs.

transformers' set-up, reproduced here without importing transformers:
  - ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
    extensions=[AssistantTracker, loopcontrols]); the {% generation %} tag of
    transformers' AssistantTracker is reproduced for rendering only (its
    body renders unchanged)
  - filter tojson = json.dumps(x, ensure_ascii=False, indent=..., ...)
  - globals raise_exception(msg) (raises TemplateError(msg)) and
    strftime_now(fmt) (here: a fixed UTC time, so the output is reproducible)
  - render(messages=..., add_generation_prompt=..., bos_token=...,
    eos_token=...)
    transformers also passes tools=None and documents=None; they are left
    undefined here, as llama.cpp leaves them for a request without tools (a
    template such as Hermes 3's tool_use one loops over tools unconditionally,
    which None cannot do, while minijinja iterates None as empty).

A render that raises is stored as {"error": message, "raised_by_template":
bool} instead of {"output": text}; raised_by_template tells a
raise_exception(message) from an error of Jinja2 or Python (such as
iterating over tools=None in a template that needs tools).

Usage: python3 scripts/render-chat-golden.py   (needs jinja2; 3.1.6 was used)
"""

import json
import os
import sys
from datetime import datetime, timezone

import jinja2
from jinja2 import nodes
from jinja2.exceptions import TemplateError
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEMPLATES = os.path.join(ROOT, "native-tests", "golden", "templates")
OUT = os.path.join(TEMPLATES, "rendered.json")

# 2025-07-26T13:45:07Z: the "today" strftime_now reports.
FIXED_TIME = 1753537507

# BOS/EOS token texts per template (from each model's tokenizer_config.json).
# Models without a BOS token get "" (transformers would pass None, which a
# template printing bos_token would show as "None").
TOKENS = {
    "HuggingFaceTB-SmolLM3-3B": ("", "<|im_end|>"),
    "NousResearch-Hermes-3-Llama-3.1-8B-tool_use": ("<|begin_of_text|>", "<|im_end|>"),
    "Qwen-Qwen2.5-7B-Instruct": ("", "<|im_end|>"),
    "Qwen-Qwen3-0.6B": ("", "<|im_end|>"),
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B": (
        "<｜begin▁of▁sentence｜>",
        "<｜end▁of▁sentence｜>",
    ),
    "google-gemma-2-2b-it": ("<bos>", "<eos>"),
    "ibm-granite-granite-3.3-2B-Instruct": ("<|end_of_text|>", "<|end_of_text|>"),
    "meta-llama-Llama-3.1-8B-Instruct": ("<|begin_of_text|>", "<|eot_id|>"),
    "meta-llama-Llama-3.2-3B-Instruct": ("<|begin_of_text|>", "<|eot_id|>"),
    "microsoft-Phi-3.5-mini-instruct": ("<s>", "<|endoftext|>"),
    "mistralai-Mistral-Nemo-Instruct-2407": ("<s>", "</s>"),
    "openai-gpt-oss-120b": ("<|startoftext|>", "<|return|>"),
    # The templates of the 2026 reference's vocab suites (their
    # tokenizer.chat_template), with those files' BOS and EOS texts.
    "ggml-vocab-command-r": ("<BOS_TOKEN>", "<|END_OF_TURN_TOKEN|>"),
    "ggml-vocab-gemma-4": ("<bos>", "<eos>"),
    "ggml-vocab-qwen35": ("<|endoftext|>", "<|endoftext|>"),
}


def msg(role, content):
    return {"role": role, "content": content}


# Conversations: whitespace around a reply and non-ASCII text, because
# templates trim and tokenizers care about both.
CONVERSATIONS = {
    "system_user_assistant_user": {
        "add_generation_prompt": True,
        "messages": [
            msg("system", "You are a helpful assistant."),
            msg("user", "Hello! What is 2+2?"),
            msg("assistant", "  2 + 2 = 4.\n"),
            msg("user", "Merci. Et en français? «quatre» 中文"),
        ],
    },
    "user_only": {
        "add_generation_prompt": False,
        "messages": [msg("user", "Write a haiku about GGUF files.")],
    },
    "user_assistant_user": {
        "add_generation_prompt": True,
        "messages": [
            msg("user", "Hi"),
            msg("assistant", "Hello. How can I help?"),
            msg("user", "Tell me a joke."),
        ],
    },
}

# Small templates, each exercising one thing the real templates lean on, so a
# difference shows up with a name. Rendered with the first conversation and
# bos_token "<s>", eos_token "</s>".
PROBES = {
    "tojson": "{{ messages[:2]|tojson }}|{{ messages[0]|tojson(indent=2) }}|"
    "{{ {'b': 1.5, 'a': [true, none, 1e16, 3]}|tojson(sort_keys=true) }}|"
    "{{ \"<&'>\u00e9\\n\"|tojson }}|{{ [1, 2]|tojson(separators=(',', ':')) }}",
    "python_literals": "{{ true }} {{ false }} {{ none }} {{ add_generation_prompt }} {{ tools }}",
    "numbers": "{{ 1 + 2 }} {{ 7 // 2 }} {{ 7 / 2 }} {{ 2 ** 3 }} {{ 7 % 3 }} {{ 1.5 }} {{ -4 }}",
    "undefined": "[{{ nothing }}]{% if nothing is defined %}yes{% else %}no{% endif %}"
    "{% for x in nothing %}x{% endfor %}{{ nothing|default('dflt') }}"
    "{% if not nothing %}falsy{% endif %}{{ messages[0].missing }}",
    "undefined_attribute": "{{ nothing.attr }}",
    "string_methods": "{{ '  pad  '.strip() }}|{{ 'a,b,c'.split(',')|join('+') }}|"
    "{{ 'a b  c'.split()|length }}|{{ 'Hello'.startswith('He') }}|{{ 'Hello'.endswith('x') }}|"
    "{{ 'x y'.replace(' ', '_') }}|{{ '  l'.lstrip() }}|{{ 'r  '.rstrip() }}|"
    "{{ 'xxaxx'.strip('x') }}|{{ 'MiXed'.lower() }}{{ 'up'.upper() }}|{{ 'a b'.title() }}|"
    "{{ 'think</think>answer'.split('</think>')[-1] }}|{{ 'abc' in 'xabcx' }}",
    "dict_methods": "{% for k, v in messages[0].items() %}{{ k }}={{ v }};{% endfor %}"
    "{{ messages[0].get('role') }}|{{ messages[0].get('missing', 'dflt') }}|"
    "{{ messages[0].keys()|list|length }}|{{ 'role' in messages[0] }}",
    "loops": "{% for m in messages %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}"
    "{% if loop.previtem is defined %}<{{ loop.previtem.role }}{% endif %}"
    "{% if loop.nextitem is defined %}>{{ loop.nextitem.role }}{% endif %};{% endfor %}"
    "{% for i in range(3) %}{{ i }}{% endfor %}{% for m in messages if m.role == 'user' %}u{% endfor %}",
    "loop_controls": "{% for m in messages %}{% if m.role == 'system' %}{% continue %}{% endif %}"
    "{{ m.role }}{% if m.role == 'assistant' %}{% break %}{% endif %},{% endfor %}",
    "namespace_and_filters": "{% set ns = namespace(n=0, found=false) %}{% for m in messages %}"
    "{% set ns.n = ns.n + 1 %}{% if m.role == 'system' %}{% set ns.found = true %}{% endif %}{% endfor %}"
    "{{ ns.n }}{{ ns.found }}|"
    "{{ messages|selectattr('role', 'equalto', 'user')|map(attribute='content')|list|length }}|"
    "{{ messages|rejectattr('role', 'equalto', 'user')|list|length }}|{{ messages[-1].content|trim }}|"
    "{{ messages|length }}|{{ messages[1:]|length }}|"
    "{{ 'abc' is string }}{{ messages is iterable }}{{ messages[0] is mapping }}{{ none is none }}"
    "{{ 3 is number }}{{ messages is sequence }}|{{ [3, 1, 2]|sort|join(',') }}|"
    "{{ ['a', 'b']|join }}|{{ 'abc'|length }}|{{ messages[0].content|upper }}|{{ 42|string }}",
    "macros": "{% macro render(m, sep='') %}[{{ m.role|upper }}{{ sep }}]{% endmacro %}"
    "{% for m in messages %}{{ render(m) }}{{ render(m, sep=':') }}{% endfor %}",
    "strftime": "{{ strftime_now('%d %b %Y') }}|{{ strftime_now('%Y-%m-%d %H:%M:%S') }}|"
    "{{ strftime_now('%A %B %j %a %I %p %y') }}",
    "raise": "{{ raise_exception('custom failure: ' + messages[0].role) }}",
    "whitespace_control": "{% for m in messages %}\n    {% if m.role == 'user' %}\n"
    "  U: {{ m.content }}\n    {% endif %}\n{% endfor %}\nend {{- '  trimmed' }}  \n"
    "  {%- if true %} x {% endif -%}\n  y\n",
    "generation_tags": "{% for m in messages %}{% if m.role == 'assistant' %}\n"
    "  {% generation %}\n[{{ m.content }}]{% endgeneration %}\n{% endif %}{% endfor %}|"
    "{%- generation -%}  x  {%- endgeneration -%}  |{%generation%}y{%endgeneration%}",
    "concat_and_slicing": "{{ bos_token + messages[0].content[:3] + eos_token }}|"
    "{{ messages[0].content[-5:] }}|{{ messages[0].content[::2] }}|{{ 'x' ~ 1 ~ none ~ true }}",
}

def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    # transformers' override: plain json.dumps, no HTML escaping.
    return json.dumps(
        x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
    )


class GenerationTag(Extension):
    """{% generation %}...{% endgeneration %}: renders its body as is (what
    transformers' AssistantTracker does when no mask is requested)."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

    def _body(self, caller):
        return caller()


class RaisedByTemplate(TemplateError):
    """What raise_exception raises: a TemplateError, as in transformers, but
    told apart here from Jinja2's own errors (UndefinedError is one too)."""


def raise_exception(message):
    raise RaisedByTemplate(message)


def strftime_now(fmt):
    return datetime.fromtimestamp(FIXED_TIME, timezone.utc).strftime(fmt)


def environment():
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[GenerationTag, loopcontrols]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def render(template, conversation, bos, eos):
    try:
        text = template.render(
            messages=conversation["messages"],
            add_generation_prompt=conversation["add_generation_prompt"],
            bos_token=bos,
            eos_token=eos,
        )
        return {"output": text}
    except RaisedByTemplate as e:
        return {"error": str(e), "raised_by_template": True}
    except Exception as e:  # e.g. TypeError from iterating None, UndefinedError
        return {"error": f"{type(e).__name__}: {e}", "raised_by_template": False}


def main():
    env = environment()
    names = sorted(f for f in os.listdir(TEMPLATES) if f.endswith(".jinja"))
    missing = [n for n in names if n[: -len(".jinja")] not in TOKENS]
    if missing:
        sys.exit(f"no BOS/EOS entry in TOKENS for {missing}")
    templates = {}
    for name in names:
        with open(os.path.join(TEMPLATES, name), encoding="utf-8") as f:
            source = f.read()
        bos, eos = TOKENS[name[: -len(".jinja")]]
        template = env.from_string(source)
        templates[name] = {
            "bos_token": bos,
            "eos_token": eos,
            "renders": {
                conv: render(template, CONVERSATIONS[conv], bos, eos) for conv in CONVERSATIONS
            },
        }
    probe_conversation = CONVERSATIONS["system_user_assistant_user"]
    probes = {}
    for name, source in PROBES.items():
        rendered = render(env.from_string(source), probe_conversation, "<s>", "</s>")
        probes[name] = {"template": source, **rendered}
    doc = {
        "generator": f"scripts/render-chat-golden.py with jinja2 {jinja2.__version__}",
        "fixed_time": FIXED_TIME,
        "conversations": CONVERSATIONS,
        "templates": templates,
        "probe_conversation": "system_user_assistant_user",
        "probes": probes,
    }
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(
        f"wrote {OUT}: {len(templates)} templates x {len(CONVERSATIONS)} conversations, "
        f"{len(probes)} probes"
    )


if __name__ == "__main__":
    main()
