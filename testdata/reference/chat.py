#!/usr/bin/env python3
"""Reference for zbench's chat templates (models/chat): Jinja2 itself, set up
as transformers' apply_chat_template sets it up (a sandboxed immutable
environment with trim_blocks and lstrip_blocks, the loopcontrols extension,
a tojson filter that keeps non-ASCII text, and raise_exception), renders
chat templates of the layouts that Llama-family chat checkpoints ship over
a set of conversations, with add_generation_prompt true.

The templates are written for this project in those layouts: Zephyr's
(TinyLlama-Chat), Llama 2 chat's ([INST] and <<SYS>>, roles alternating),
ChatML (a default system message, loop.first), one using namespace, loop
controls, conditional expressions and tojson, one with text right after an
expression that follows a block tag, and models/chat's own Plain template, read from
models/chat/chat.go so that the test checks the Go source's template.

File written:

  testdata/golden/chat-templates.json
      "templates": name -> Jinja source;
      "cases": for each template and conversation, the template's name,
          bos and eos tokens, the messages, and either "text" (what Jinja2
          renders) or "error" (the message of the exception the template
          raised).

Usage:

  /usr/bin/python3 testdata/reference/chat.py           # write
  /usr/bin/python3 testdata/reference/chat.py --check   # verify current

It needs Debian's python3-jinja2 (scripts/install-python-ref.sh --golden).
"""

import json
import os
import re
import sys

import jinja2
from jinja2.exceptions import TemplateError
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "testdata", "golden", "chat-templates.json")

ZEPHYR = """{% for message in messages %}
{% if message['role'] == 'user' %}
{{ '<|user|>\n' + message['content'] + eos_token }}
{% elif message['role'] == 'system' %}
{{ '<|system|>\n' + message['content'] + eos_token }}
{% elif message['role'] == 'assistant' %}
{{ '<|assistant|>\n'  + message['content'] + eos_token }}
{% endif %}
{% if loop.last and add_generation_prompt %}
{{ '<|assistant|>' }}
{% endif %}
{% endfor %}"""

LLAMA2 = """{% if messages[0]['role'] == 'system' %}
    {% set loop_messages = messages[1:] %}
    {% set system_message = messages[0]['content'] %}
{% else %}
    {% set loop_messages = messages %}
    {% set system_message = false %}
{% endif %}
{% for message in loop_messages %}
    {% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}
        {{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}
    {% endif %}
    {% if loop.index0 == 0 and system_message != false %}
        {% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}
    {% else %}
        {% set content = message['content'] %}
    {% endif %}
    {% if message['role'] == 'user' %}
        {{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}
    {% elif message['role'] == 'assistant' %}
        {{ ' '  + content.strip() + ' ' + eos_token }}
    {% endif %}
{% endfor %}"""

CHATML = """{%- for message in messages %}
    {%- if loop.first and message['role'] != 'system' %}
        {{- '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}
    {%- endif %}
    {{- '<|im_start|>' + message['role'] + '\\n' + message['content'] | trim + '<|im_end|>\\n' }}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
{%- endif %}"""

COUNTED = """{%- set ns = namespace(users=0, last='') -%}
{{ bos_token }}
{%- for m in messages -%}
  {%- if loop.index > 5 -%}{%- break -%}{%- endif -%}
  {%- if m.role == 'system' -%}{%- continue -%}{%- endif -%}
  {%- set ns.users = ns.users + (1 if m.role == 'user' else 0) -%}
  {%- set ns.last = m.role -%}
  {{- '[' ~ loop.index ~ '/' ~ loop.length ~ ' ' ~ (m.role | upper) ~ '] ' ~ (m.content | replace('\\n', ' ')) ~ '\\n' -}}
{%- endfor -%}
{%- if add_generation_prompt and ns.last != 'assistant' -%}
users={{ ns.users }} {{ messages | length }} messages: {{ messages[-1] | tojson }}
ASSISTANT:
{%- endif -%}"""

# ADJACENT puts a text line right after an expression that follows a block
# tag; Jinja2 keeps the line's newline (trim_blocks strips only a newline
# right after a block tag).
ADJACENT = """{% for m in messages %}{{ m.role ~ ': ' ~ m.content }}
{% endfor %}>"""


def plain_template():
    """models/chat's Plain, read from the Go source (a raw string)."""
    src = open(os.path.join(ROOT, "models", "chat", "chat.go"), encoding="utf-8").read()
    m = re.search(r"const Plain = `([^`]*)`", src)
    if not m:
        sys.exit("chat.py: no `const Plain = ` raw string in models/chat/chat.go")
    return m.group(1)


TEMPLATES = {
    "plain": plain_template(),
    "zephyr": ZEPHYR,
    "llama2": LLAMA2,
    "chatml": CHATML,
    "counted": COUNTED,
    "adjacent": ADJACENT,
}

CONVERSATIONS = {
    "user": [{"role": "user", "content": "Hello there."}],
    "system-user": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Why is the sky blue?"},
    ],
    "multi-turn": [
        {"role": "system", "content": "You answer in French."},
        {"role": "user", "content": "Good morning"},
        {"role": "assistant", "content": "Bonjour !"},
        {"role": "user", "content": "  And good night?  "},
    ],
    "unicode": [{"role": "user", "content": "Grüße, 世界 — \"quoted\" and a tab\there\nand a line"}],
    "jinja-like": [{"role": "user", "content": "{{ bos_token }} {% if x %} stays text {# not a comment #}"}],
    "empty": [{"role": "user", "content": ""}],
    "long": [{"role": "user" if i % 2 == 0 else "assistant", "content": "turn %d" % i} for i in range(7)],
    "not-alternating": [
        {"role": "user", "content": "one"},
        {"role": "user", "content": "two"},
    ],
    "unknown-role": [
        {"role": "user", "content": "one"},
        {"role": "tool", "content": "{\"ok\": true}"},
    ],
}


def environment():
    def raise_exception(message):
        raise TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env


def build():
    env = environment()
    cases = []
    for tname, src in TEMPLATES.items():
        tmpl = env.from_string(src)
        for cname, msgs in CONVERSATIONS.items():
            case = {"name": "%s/%s" % (tname, cname), "template": tname, "bos": "<s>", "eos": "</s>", "messages": msgs}
            try:
                case["text"] = tmpl.render(messages=msgs, add_generation_prompt=True, bos_token="<s>", eos_token="</s>")
            except TemplateError as e:
                case["error"] = str(e)
            cases.append(case)
    return {
        "about": "Chat templates rendered by Jinja2 %s as transformers' apply_chat_template sets it up (trim_blocks, lstrip_blocks, loopcontrols, raise_exception, tojson), add_generation_prompt true; written by testdata/reference/chat.py" % jinja2.__version__,
        "templates": TEMPLATES,
        "cases": cases,
    }


def main():
    got = json.dumps(build(), ensure_ascii=False, indent=1) + "\n"
    if "--check" in sys.argv[1:]:
        want = open(OUT, encoding="utf-8").read()
        if got != want:
            sys.exit("chat.py: %s differs from what the reference renders now" % OUT)
        print("chat.py: %s matches" % OUT)
        return
    with open(OUT, "w", encoding="utf-8") as f:
        f.write(got)
    print("chat.py: wrote %s (%d cases)" % (OUT, sum(1 for _ in build()["cases"])))


if __name__ == "__main__":
    main()
