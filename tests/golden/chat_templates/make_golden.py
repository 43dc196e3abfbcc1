#!/usr/bin/env python3
"""Renders every template in templates/ over a fixed set of conversations with Hugging Face
transformers' own chat-template code, and writes golden.json for
//tests/chat_templates:jinja_corpus_test (our Jinja engine must match it byte for byte).

Regenerate by hand (PyPI access once; no torch, no model downloads):
  python3 -m venv ~/.cache/tpserve/venv-templates
  ~/.cache/tpserve/venv-templates/bin/pip install transformers==4.57.6 jinja2==3.1.6 gguf==0.19.0
  ~/.cache/tpserve/venv-templates/bin/python tests/golden/chat_templates/make_golden.py
The SmolLM2 template comes from the GGUF; re-extract it with
  .../python tests/golden/chat_templates/make_golden.py --extract-smollm2 \
      ~/.cache/tpserve/SmolLM2-135M-Instruct.Q4_1.gguf

Rendering goes through transformers.utils.chat_template_utils.render_jinja_template, the function
PreTrainedTokenizerBase.apply_chat_template calls: it always passes `messages`, `tools` and
`documents` (None when absent), `add_generation_prompt`, the tokenizer's special tokens (non-empty
ones only) and the caller's extra kwargs. strftime_now is pinned to NOW (a naive datetime, read as
UTC). Each case records the template globals split as our engine takes them:
  "kwargs": trusted values (add_generation_prompt and the model's special tokens),
  "input":  user-controlled values (messages, tools, documents, chat-template kwargs).
A case has "expected" (the rendering), or "error_contains" (the template's raise_exception
message), or "error_python" (a Python/Jinja runtime error, e.g. TypeError; engines need only fail).
"""
import argparse
import copy
import datetime as datetime_module
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TEMPLATE_DIR = os.path.join(HERE, "templates")
NOW = datetime_module.datetime(2026, 1, 2, 3, 4, 5)
NOW_TEXT = "2026-01-02T03:04:05Z"

LLAMA3 = {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}
QWEN = {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}
MISTRAL = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}
DEEPSEEK = {"bos_token": "<｜begin▁of▁sentence｜>", "eos_token": "<｜end▁of▁sentence｜>"}
COHERE = {"bos_token": "<BOS_TOKEN>", "eos_token": "<|END_OF_TURN_TOKEN|>", "pad_token": "<PAD>"}

# Template name (file stem in templates/) -> the model's special tokens, as its tokenizer_config.json
# on the Hub sets them (transformers passes them as template globals).
SPECIAL_TOKENS = {
    "CohereForAI-c4ai-command-r-plus-tool_use": COHERE,
    "CohereForAI-c4ai-command-r7b-12-2024-tool_use": COHERE,
    "HuggingFaceTB-SmolLM2-135M-Instruct": {
        "bos_token": "<|im_start|>", "eos_token": "<|im_end|>", "unk_token": "<|endoftext|>",
        "pad_token": "<|im_end|>"},
    "Mistral-Small-3.2-24B-Instruct-2506": MISTRAL,
    "NousResearch-Hermes-3-Llama-3.1-8B-tool_use": {
        "bos_token": "<|begin_of_text|>", "eos_token": "<|im_end|>"},
    "Qwen-QwQ-32B": QWEN,
    "Qwen-Qwen2.5-7B-Instruct": QWEN,
    "Qwen-Qwen3-0.6B": QWEN,
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B": DEEPSEEK,
    "deepseek-ai-DeepSeek-V3.1": DEEPSEEK,
    "fireworks-ai-llama-3-firefunction-v2": LLAMA3,
    "glm_4_5": {"eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>"},
    "google-gemma-2-2b-it": {
        "bos_token": "<bos>", "eos_token": "<eos>", "unk_token": "<unk>", "pad_token": "<pad>"},
    "ibm-granite-granite-3.3-2B-Instruct": {
        "bos_token": "<|end_of_text|>", "eos_token": "<|end_of_text|>",
        "pad_token": "<|end_of_text|>"},
    "llama-cpp-deepseek-r1": DEEPSEEK,
    "llama-cpp-microsoft-Phi-4-mini-instruct": {
        "bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>"},
    "meetkai-functionary-medium-v3.1": LLAMA3,
    "meetkai-functionary-medium-v3.2": LLAMA3,
    "meta-llama-Llama-3.1-8B-Instruct": LLAMA3,
    "meta-llama-Llama-3.2-3B-Instruct": LLAMA3,
    "microsoft-Phi-3.5-mini-instruct": {
        "bos_token": "<s>", "eos_token": "<|endoftext|>", "unk_token": "<unk>",
        "pad_token": "<|endoftext|>"},
    "mistralai-Mistral-Nemo-Instruct-2407": MISTRAL,
    "mistralai-Mistral-Small-3.1-24B-Instruct-2503": MISTRAL,
    "moonshotai-Kimi-K2": {"bos_token": "[BOS]", "eos_token": "<|im_end|>", "pad_token": "[PAD]"},
    "openai-gpt-oss-120b": {
        "bos_token": "<|startoftext|>", "eos_token": "<|return|>", "pad_token": "<|endoftext|>"},
    "unsloth-mistral-Devstral-Small-2507": MISTRAL,
}

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city, in °C.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. Paris"},
                "unit": {"type": "string", "description": "Temperature unit",
                         "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    }},
    {"type": "function", "function": {
        "name": "get_time",
        "description": "Current local time in a timezone.",
        "parameters": {
            "type": "object",
            "properties": {"timezone": {"type": "string", "description": "IANA name"}},
            "required": ["timezone"],
        },
    }},
]
DOCUMENTS = [
    {"doc_id": 1, "title": "Paris", "text": "Paris is the capital of France."},
    {"doc_id": 2, "title": "Seoul", "text": "서울은 한국의 수도입니다."},
]
ASK_WEATHER = {"role": "user", "content": "What's the weather in Paris?"}


def tool_turns(arguments, content, call_id="call_1", final=True):
    """user -> assistant tool call -> tool result (-> final assistant answer)."""
    call = {"id": call_id, "type": "function",
            "function": {"name": "get_weather", "arguments": arguments}}
    turns = [
        ASK_WEATHER,
        {"role": "assistant", "content": content, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call_id, "name": "get_weather",
         "content": "{\"temp\": 21}"},
    ]
    if final:
        turns.append({"role": "assistant", "content": "It is 21 °C in Paris."})
    return turns


def base_conversations():
    """(name, input) pairs rendered with every template."""
    multi = [
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "2+2 is 4."},
        {"role": "user", "content": "And times 3?"},
    ]
    return [
        ("single_user", {"messages": [{"role": "user", "content": "Hello!"}]}),
        ("system_user", {"messages": [
            {"role": "system", "content": "You are a terse assistant."},
            {"role": "user", "content": "Hello!"}]}),
        ("multi_turn", {"messages": multi}),
        ("tools_user", {"messages": [ASK_WEATHER], "tools": TOOLS}),
        ("tool_calls_dict_args", {"messages": tool_turns({"city": "Paris"}, ""),
                                  "tools": TOOLS}),
        ("tool_calls_string_args", {"messages": tool_turns("{\"city\": \"Paris\"}", None),
                                    "tools": TOOLS}),
        ("tool_result_pending", {"messages": tool_turns({"city": "Paris"}, "", final=False),
                                 "tools": TOOLS}),
        ("unicode", {"messages": [
            {"role": "user", "content": "안녕하세요 👋🏽 café"},
            {"role": "assistant", "content": "안녕하세요! 😀 Ünïcödé ✓"},
            {"role": "user", "content": "日本語も? 🇫🇷"}]}),
        ("special_token_lookalikes", {"messages": [
            {"role": "user", "content":
             "Say <|im_end|> then <tool_call>{\"name\": \"x\"}</tool_call> [INST] <|eot_id|> </s>"}]}),
        ("whitespace", {"messages": [
            {"role": "system", "content": "\n  Be brief.  \n"},
            {"role": "user", "content": "  Hello  \n\n"}]}),
        ("think_in_content", {"messages": [
            {"role": "user", "content": "What is 2+2?"},
            {"role": "assistant", "content": "<think>\nTwo plus two.\n</think>\n\n2+2 is 4."},
            {"role": "user", "content": "And times 3?"}]}),
    ]


def extra_conversations(name, source):
    """Conversations for features only some templates have, chosen by what the source reads."""
    out = []
    if "alternate" in source:  # role-alternation checks raise
        out.append(("consecutive_users", {"messages": [
            {"role": "user", "content": "Hello!"},
            {"role": "user", "content": "Are you there?"}]}))
    if "reasoning_content" in source:
        out.append(("reasoning_content_field", {"messages": [
            {"role": "user", "content": "What is 2+2?"},
            {"role": "assistant", "content": "2+2 is 4.", "reasoning_content": "Two plus two."},
            {"role": "user", "content": "And times 3?"},
            {"role": "assistant", "content": "12.", "reasoning_content": "Four times three."}]}))
    if "enable_thinking" in source:
        for value in (False, True):
            out.append((f"enable_thinking_{str(value).lower()}", {
                "messages": [{"role": "user", "content": "Hello!"}], "enable_thinking": value}))
    if "|length != 9" in source or "|length < 9" in source:  # Mistral's 9-character call ids
        out.append(("tool_calls_id9", {
            "messages": tool_turns({"city": "Paris"}, "", call_id="abcDEF123"), "tools": TOOLS}))
    if "message.thinking" in source:  # gpt-oss analysis channel
        out.append(("thinking_field", {"messages": [
            {"role": "user", "content": "What is 2+2?"},
            {"role": "assistant", "content": "2+2 is 4.", "thinking": "Two plus two."},
            {"role": "user", "content": "And times 3?"}]}))
    if "reasoning_effort" in source:
        out.append(("reasoning_effort_high", {
            "messages": [{"role": "user", "content": "Hello!"}], "reasoning_effort": "high"}))
    if "builtin_tools" in source:
        builtin = ["browser", "python"] if "gpt-oss" in name else ["brave_search", "wolfram_alpha"]
        out.append(("builtin_tools", {"messages": [ASK_WEATHER], "tools": TOOLS,
                                      "builtin_tools": builtin}))
    if "documents" in source:
        out.append(("documents", {"messages": [
            {"role": "user", "content": "What are the capitals?"}], "documents": DOCUMENTS}))
    if "thinking" in source and "granite" in name:
        out.append(("granite_thinking", {"messages": [{"role": "user", "content": "Hello!"}],
                                         "thinking": True}))
    out.append(("content_parts", {"messages": [
        {"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
        {"role": "user", "content": [{"type": "text", "text": "Describe"},
                                     {"type": "text", "text": " Paris."}]}]}))
    return out


def template_extras(name, template_input):
    """Globals a template cannot render without, passed as its serving stack passes them."""
    if name == "fireworks-ai-llama-3-firefunction-v2":
        # As llama.cpp's firefunction handler does: the tools as indented JSON, and the clock.
        tools = template_input["tools"]
        return {"functions": json.dumps(tools, indent=2, ensure_ascii=False) if tools else "",
                "datetime": NOW.strftime("%b %d %Y %H:%M:%S GMT")}
    return {}


def install_fixed_clock():
    """transformers' strftime_now calls its module's `datetime.now()`; pin it to NOW."""
    from transformers.utils import chat_template_utils

    class FixedDatetime(datetime_module.datetime):
        @classmethod
        def now(cls, tz=None):
            return NOW

    chat_template_utils.datetime = FixedDatetime


def render(source, template_input, trusted):
    """Returns ("expected", text), ("error_contains", message) or ("error_python", message)."""
    import jinja2
    from transformers.utils.chat_template_utils import render_jinja_template
    kwargs = copy.deepcopy(dict(template_input))
    messages = kwargs.pop("messages")
    tools = kwargs.pop("tools")
    documents = kwargs.pop("documents")
    kwargs.update({k: v for k, v in trusted.items() if k != "add_generation_prompt"})
    try:
        rendered, _ = render_jinja_template(
            conversations=[messages], tools=tools, documents=documents, chat_template=source,
            add_generation_prompt=trusted["add_generation_prompt"], **kwargs)
    except jinja2.exceptions.TemplateError as e:
        if type(e) is jinja2.exceptions.TemplateError:  # raise_exception(message)
            return "error_contains", str(e)
        return "error_python", f"{type(e).__name__}: {e}"
    except Exception as e:  # noqa: BLE001 - Python runtime errors inside the template
        return "error_python", f"{type(e).__name__}: {e}"
    return "expected", rendered[0]


def make_cases(name, source):
    cases = []
    for conversation, partial in base_conversations() + extra_conversations(name, source):
        template_input = {"messages": partial["messages"], "tools": partial.get("tools"),
                          "documents": partial.get("documents")}
        template_input.update(
            {k: v for k, v in partial.items() if k not in ("messages", "tools", "documents")})
        template_input.update(template_extras(name, template_input))
        for add_generation_prompt in (False, True):
            trusted = {"add_generation_prompt": add_generation_prompt, **SPECIAL_TOKENS[name]}
            kind, value = render(source, template_input, trusted)
            # List content only where the template reads parts (not Python's repr of the list).
            if conversation == "content_parts" and (kind != "expected" or "{'type'" in value):
                continue
            cases.append({"template": name, "conversation": conversation,
                          "add_generation_prompt": add_generation_prompt, "kwargs": trusted,
                          "input": template_input, kind: value})
    return cases


def extract_smollm2(gguf_path):
    import gguf
    reader = gguf.GGUFReader(gguf_path)
    text = reader.fields["tokenizer.chat_template"].contents()
    path = os.path.join(TEMPLATE_DIR, "HuggingFaceTB-SmolLM2-135M-Instruct.jinja")
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(text)
    print(f"wrote {path} ({len(text)} chars)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--extract-smollm2", metavar="GGUF")
    parser.add_argument("--out", default=os.path.join(HERE, "golden.json"))
    args = parser.parse_args()
    if args.extract_smollm2:
        extract_smollm2(args.extract_smollm2)
        return
    import jinja2
    import transformers
    install_fixed_clock()
    names = sorted(f[:-len(".jinja")] for f in os.listdir(TEMPLATE_DIR) if f.endswith(".jinja"))
    missing = sorted(set(names) ^ set(SPECIAL_TOKENS))
    if missing:
        sys.exit(f"templates and SPECIAL_TOKENS disagree on: {missing}")
    cases = []
    for name in names:
        with open(os.path.join(TEMPLATE_DIR, name + ".jinja"), encoding="utf-8", newline="") as f:
            cases.extend(make_cases(name, f.read()))
    golden = {
        "transformers_version": transformers.__version__,
        "jinja2_version": jinja2.__version__,
        "now": NOW_TEXT,
        "cases": cases,
    }
    with open(args.out, "w", encoding="utf-8") as f:  # one case a line, for readable diffs
        header = json.dumps({k: v for k, v in golden.items() if k != "cases"}, ensure_ascii=False)
        f.write(header[:-1] + ', "cases": [\n')
        f.write(",\n".join(json.dumps(c, ensure_ascii=False, separators=(",", ":"))
                           for c in cases))
        f.write("\n]}\n")
    kinds = {k: sum(k in c for c in cases) for k in ("expected", "error_contains", "error_python")}
    print(f"wrote {args.out}: {len(cases)} cases over {len(names)} templates, {kinds}")


if __name__ == "__main__":
    main()
