"""End-to-end: tool calling through a real launcher and worker on SmolLM2, with the official
`openai` client.

SmolLM2-135M was not trained to call tools, so every call it makes here is the structured-output
engine's doing: with tool_choice `required` or a named function the arguments must always parse
and validate against the function's `parameters` (checked with Python `jsonschema`, not our
code). The server runs Qwen2.5's chat template (--chat_template, from the template corpus), which
renders tools, assistant tool_calls and tool results; from it the server picks the hermes call
format. Streamed calls must equal non-streamed ones byte for byte, and a call's result must go
back into the next prompt exactly as Python's jinja2 renders the template (configured as
transformers configures it).
"""

import datetime
import json

import jinja2
import jinja2.ext
import jinja2.sandbox
import jsonschema
import openai
import pytest

from conftest import ROOT, Cluster, openai_client

MODEL = "smollm2-tools"
TEMPLATE = ROOT / "tests/golden/chat_templates/templates/Qwen-Qwen2.5-7B-Instruct.jinja"

WEATHER = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 20},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
    },
    "required": ["city", "unit"],
    "additionalProperties": False,
}
TIME = {
    "type": "object",
    "properties": {"timezone": {"type": "string", "maxLength": 30}},
    "required": ["timezone"],
    "additionalProperties": False,
}
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Current weather in a city",
                                      "parameters": WEATHER}},
    {"type": "function", "function": {"name": "get_time", "description": "Local time in a timezone",
                                      "parameters": TIME}},
]
SCHEMAS = {"get_weather": WEATHER, "get_time": TIME}
PROMPTS = [
    "What's the weather like in Paris today?",
    "서울 날씨 어때?",
    "Tell me a joke about cats.",  # nothing to do with either tool: required still calls one
]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    c = Cluster(ranks=1, tmp=tmp_path_factory.mktemp("tools"),
                extra_args=[f"--chat_template={TEMPLATE}", f"--served_model_name={MODEL}"])
    yield c
    c.stop()


@pytest.fixture(scope="module")
def client(server):
    return openai_client(server)


def _check_calls(message, names=None):
    assert message.tool_calls, f"no tool call in {message}"
    for call in message.tool_calls:
        assert call.type == "function"
        assert call.id.startswith("call_")
        assert call.function.name in (names or SCHEMAS)
        jsonschema.validate(json.loads(call.function.arguments), SCHEMAS[call.function.name])


@pytest.mark.parametrize("prompt", PROMPTS)
@pytest.mark.parametrize("temperature", [0.0, 0.9])
def test_required_calls_always_validate(client, prompt, temperature):
    r = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": prompt}], tools=TOOLS,
        tool_choice="required", parallel_tool_calls=False, temperature=temperature, seed=11,
        max_tokens=200)
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls", choice
    _check_calls(choice.message)
    assert len(choice.message.tool_calls) == 1


@pytest.mark.parametrize("prompt", PROMPTS)
def test_parallel_required_calls_each_validate(client, prompt):
    # An untrained model may go on calling until max_tokens: every call it finished is whole
    # and valid, and the one cut off is not returned as a call.
    r = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": prompt}], tools=TOOLS,
        tool_choice="required", temperature=0.9, seed=2, max_tokens=120)
    choice = r.choices[0]
    assert choice.finish_reason in ("tool_calls", "length"), choice
    _check_calls(choice.message)


@pytest.mark.parametrize("prompt", PROMPTS)
def test_a_named_function_is_called_with_valid_arguments(client, prompt):
    r = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": prompt}], tools=TOOLS,
        tool_choice={"type": "function", "function": {"name": "get_time"}},
        temperature=0.7, seed=5, max_tokens=200)
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls", choice
    _check_calls(choice.message, names={"get_time"})
    assert len(choice.message.tool_calls) == 1


@pytest.mark.parametrize("tool_choice", ["required", "auto"])
def test_streamed_calls_equal_non_streamed(client, tool_choice):
    kwargs = dict(model=MODEL, messages=[{"role": "user", "content": PROMPTS[0]}], tools=TOOLS,
                  tool_choice=tool_choice, temperature=0.8, seed=3, max_tokens=200)
    whole = client.chat.completions.create(**kwargs).choices[0]
    content, calls, finish = "", {}, None
    for chunk in client.chat.completions.create(stream=True, **kwargs):
        for c in chunk.choices:
            content += c.delta.content or ""
            for d in c.delta.tool_calls or []:
                call = calls.setdefault(d.index, {"id": "", "name": "", "arguments": ""})
                call["id"] += d.id or ""
                call["name"] += d.function.name or ""
                call["arguments"] += d.function.arguments or ""
            finish = c.finish_reason or finish
    assert finish == whole.finish_reason
    assert content == (whole.message.content or "")
    expected = [{"id": c.id, "name": c.function.name, "arguments": c.function.arguments}
                for c in whole.message.tool_calls or []]
    assert [calls[i] for i in sorted(calls)] == expected
    if tool_choice == "required":
        assert expected, "required gave no call"


def _render_like_transformers(source, **context):
    """The template through Python's jinja2 as transformers' apply_chat_template sets it up."""
    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.datetime.now().strftime(fmt)
    return env.from_string(source).render(**context)


def test_a_tool_result_round_trips_into_the_next_prompt_as_the_template_renders_it(server, client):
    messages = [{"role": "user", "content": PROMPTS[0]}]
    first = client.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS,
                                           tool_choice="required", temperature=0, max_tokens=200)
    call = first.choices[0].message.tool_calls[0]
    messages.append({"role": "assistant", "content": None, "tool_calls": [
        {"id": call.id, "type": "function",
         "function": {"name": call.function.name, "arguments": call.function.arguments}}]})
    messages.append({"role": "tool", "tool_call_id": call.id,
                     "content": json.dumps({"temperature": 21, "sky": "맑음 <|im_end|>"},
                                           ensure_ascii=False)})

    # The next turn runs, and its prompt is what jinja2 makes of the same conversation (the
    # arguments as an object, as transformers passes them).
    second = client.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS,
                                            tool_choice="none", temperature=0, max_tokens=20)
    assert second.choices[0].finish_reason in ("stop", "length")
    assert not second.choices[0].message.tool_calls

    import urllib.request
    body = json.dumps({"model": MODEL, "messages": messages, "tools": TOOLS}).encode()
    req = urllib.request.Request(f"{server.http_url.rstrip('/')}/tokenize", data=body,
                                 headers={"Content-Type": "application/json"})
    ours = json.loads(urllib.request.urlopen(req, timeout=60).read())
    rendered_messages = [dict(m) for m in messages]
    rendered_messages[1] = {"role": "assistant", "content": None, "tool_calls": [
        {"id": call.id, "type": "function",
         "function": {"name": call.function.name,
                      "arguments": json.loads(call.function.arguments)}}]}
    expected = _render_like_transformers(TEMPLATE.read_text(), messages=rendered_messages,
                                         tools=TOOLS, documents=None, add_generation_prompt=True,
                                         bos_token="", eos_token="<|im_end|>")
    assert ours["prompt"] == expected
    assert "<tool_response>" in ours["prompt"] and "맑음 <|im_end|>" in ours["prompt"]
    # The tool's text is plain text: its "<|im_end|>" is not the control token.
    im_end = ours["tokens"].count(2)
    assert im_end == ours["prompt"].count("<|im_end|>") - 1


def test_tool_errors_name_the_clients_field(client):
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "hi"}], tools=TOOLS,
            tool_choice={"type": "function", "function": {"name": "get_stock"}})
    assert e.value.body["param"] == "tool_choice.function.name", e.value.body
    assert "get_stock" in e.value.body["message"]
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "hi"}],
            tools=[{"type": "function", "function": {"name": "f", "parameters": {"type": "array"}}}])
    assert e.value.body["param"] == "tools[0].function.parameters.type", e.value.body
    assert '"array"' in e.value.body["message"]
