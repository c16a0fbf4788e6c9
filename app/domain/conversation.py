"""What an event said, as a conversation a reviewer reads: messages made of parts, whatever shape the source gave.

An importer keeps an event's `content` as its source carried it (app/ingest/importers): a model call as
`{"system", "input", "output"}`, other events as the messages, arguments or result themselves. This reads:
- OpenTelemetry GenAI messages `{"role", "parts": [{"type": "text" | "tool_call" | "tool_call_response" |
  "reasoning" | ...}]}` (and system instructions, a list of parts);
- OpenAI Chat Completions messages (`content` text or parts, `tool_calls`, role `tool` with `tool_call_id`);
- OpenAI Responses items (`message`, `function_call`, `function_call_output`, `reasoning`, other `*_call`
  items) and a whole Response (`{"object": "response", "output": [...]}`);
- Anthropic messages (`content` blocks `text`, `tool_use`, `tool_result`, `thinking`) and bare content blocks;
- OpenInference messages as the importer regroups its flattened attributes (`{"message": {"role", "content",
  "contents", "tool_calls": [{"tool_call": ...}], "tool_call_id"}}`);
- LangChain messages (`{"type": "human" | "ai" | "system" | "tool", ...}`, `{"type", "data"}`, serialized
  `{"lc": 1, "kwargs"}`), in `{"messages": [...]}` (batches nested) or an LLMResult's `generations`, as
  LangSmith and OpenInference write them;
- plain text, and JSON text of any of these.
Anything else is not a conversation (None): the caller shows it as JSON. A message is `{"role", "parts"}`;
a part is `{"kind": "text", "text"}`, `{"kind": "tool_call", "name", "arguments", "id"}`, `{"kind":
"tool_result", "id", "result"}`, `{"kind": "thinking", "text"}` or `{"kind": "data", "value"}` (images,
files, anything else a message holds). Arguments and results arrive parsed when they are JSON text. The role
is the source's (`user`, `assistant`, `system`, `tool`, ...; LangChain's `human` and `ai` read as `user` and
`assistant`), and empty where the content does not say who speaks (plain text, bare content blocks).
"""

import json

NO_ROLE = ""
SIDES = {"system": "system", "input": "user", "output": "assistant"}  # a model call's content, and who speaks
LANGCHAIN_ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool", "function": "tool",
                   "developer": "developer"}
LANGCHAIN_CLASSES = {"HumanMessage": "user", "AIMessage": "assistant", "SystemMessage": "system",
                     "ToolMessage": "tool", "FunctionMessage": "tool", "HumanMessageChunk": "user",
                     "AIMessageChunk": "assistant", "ChatMessage": None}
TEXT_TYPES = frozenset({"text", "input_text", "output_text", "summary_text", "refusal"})
THINKING_TYPES = frozenset({"thinking", "reasoning", "reasoning_text"})
DATA_TYPES = frozenset({"image", "image_url", "input_image", "input_audio", "input_file", "document", "blob", "uri",
                        "file", "redacted_thinking", "audio", "video"})
BLOCK_TYPES = TEXT_TYPES | THINKING_TYPES | DATA_TYPES | {"tool_call", "tool_call_response", "tool_use",
                                                         "tool_result"}
MAX_NESTED_LISTS = 2  # LangChain batches messages as [[...]]


def conversation(content) -> list[dict] | None:
    """`content` as a list of messages, or None when it does not read as a conversation."""
    return _conversation(content, NO_ROLE)


def _conversation(value, role: str, nesting: int = 0) -> list[dict] | None:
    """Messages of `value`; `role` speaks plain text and bare blocks (who depends on where they sit)."""
    if isinstance(value, str):
        parsed = _json(value)
        if parsed is not value:
            return _conversation(parsed, role, nesting)
        return [_text_message(role, value)] if value.strip() else None
    if isinstance(value, list):
        return _list(value, role, nesting)
    if not isinstance(value, dict):
        return None
    if value and value.keys() <= SIDES.keys():
        return _sides(value)
    if value.get("object") == "response" and isinstance(value.get("output"), list):
        return _list(value["output"], "assistant", nesting)
    if isinstance(value.get("messages"), list) and not _is_message(value):
        return _list(value["messages"], role, nesting)
    if isinstance(value.get("generations"), list):
        return _list([_generation(g) for batch in value["generations"] for g in _listed(batch)], "assistant", nesting)
    message = _message(value)
    return None if message is None else _nonempty([message])


def _sides(content: dict) -> list[dict] | None:
    """A model call's `{"system", "input", "output"}`: each side's messages in that order; a side that is not a
    conversation is shown as data, spoken by that side."""
    messages, any_read = [], False
    for side, role in SIDES.items():
        if side not in content:
            continue
        read = _conversation(content[side], role)
        any_read |= read is not None
        messages += read if read is not None else [{"role": role, "parts": [_data(content[side])]}]
    return messages if any_read else None


def _list(items: list, role: str, nesting: int) -> list[dict] | None:
    if not items:
        return None
    if all(isinstance(item, dict) and "role" not in item and _type(item) in BLOCK_TYPES for item in items):
        return _nonempty([{"role": role, "parts": _parts(items)}])  # the content blocks of one message
    messages = []
    for item in items:
        if isinstance(item, list) and nesting < MAX_NESTED_LISTS:
            read = _list(item, role, nesting + 1)
            if read is None:
                return None
            messages += read
            continue
        message = _message(item) if isinstance(item, dict) else None
        if message is None:
            return None
        messages.append(message)
    return _nonempty(messages)


def _nonempty(messages: list[dict]) -> list[dict] | None:
    """The messages that say something; None when none does."""
    said = [message for message in messages if message["parts"]]
    return said or None


def _is_message(value: dict) -> bool:
    return isinstance(value.get("role"), str) or _type(value) in LANGCHAIN_ROLES


def _message(item: dict) -> dict | None:
    """One message of any shape the module docstring names; None for a dict that is none of them."""
    if item.get("lc") == 1 and isinstance(item.get("kwargs"), dict):
        return _langchain_serialized(item)
    if item.keys() == {"message"} and isinstance(item["message"], dict):
        return _openinference(item["message"])
    kind = _type(item)
    if kind in ("function_call", "function_call_output", "reasoning") or (
            isinstance(kind, str) and kind.endswith(("_call", "_call_output"))):
        return _response_item(item)
    role = item.get("role")
    if isinstance(role, str):
        if isinstance(item.get("parts"), list):
            return {"role": role, "parts": _parts(item["parts"])}
        return _chat(item, role)
    if kind in LANGCHAIN_ROLES and "content" in item:
        return _langchain(item, LANGCHAIN_ROLES[kind])
    if kind in LANGCHAIN_ROLES and isinstance(item.get("data"), dict):  # langchain's message_to_dict
        return _langchain(item["data"], LANGCHAIN_ROLES[kind])
    return None


def _chat(item: dict, role: str) -> dict:
    """An OpenAI Chat Completions, Responses `message` or Anthropic message: content text or blocks, tool calls,
    and a `tool` message's result."""
    content = item.get("content")
    if role == "tool" or item.get("tool_call_id") is not None:
        return {"role": role, "parts": [_tool_result(item.get("tool_call_id"), content)]}
    parts = _content_parts(content)
    parts += [_call(call) for call in _items(item.get("tool_calls")) if isinstance(call, dict)]
    return {"role": role, "parts": parts}


def _content_parts(content) -> list[dict]:
    if isinstance(content, str):
        return [{"kind": "text", "text": content}] if content else []
    if isinstance(content, list):
        return _parts(content)
    return [] if content is None else [_data(content)]


def _parts(blocks: list) -> list[dict]:
    parts = []
    for block in blocks:
        part = _part(block)
        if part is not None:
            parts.append(part)
    return parts


def _part(block) -> dict | None:
    """One message part (GenAI part, OpenAI content part, Anthropic block, OpenInference message_content)."""
    if isinstance(block, str):
        return {"kind": "text", "text": block} if block else None
    if not isinstance(block, dict):
        return _data(block)
    if block.keys() == {"message_content"} and isinstance(block["message_content"], dict):
        block = block["message_content"]
    kind = _type(block)
    if kind in TEXT_TYPES:
        text = next((block[key] for key in ("text", "content", "refusal") if isinstance(block.get(key), str)), None)
        return ({"kind": "text", "text": text} if text else None) if text is not None else _data(block)
    if kind in THINKING_TYPES:
        text = _thinking_text(block)
        return {"kind": "thinking", "text": text} if text is not None else _data(block)
    if kind in ("tool_call", "tool_use"):
        return _call(block)
    if kind == "tool_call_response":
        return _tool_result(block.get("id"), block["response"] if "response" in block else block.get("result"))
    if kind == "tool_result":
        return _tool_result(block.get("tool_use_id"), block.get("content"))
    return _data(block)


def _thinking_text(block: dict) -> str | None:
    for key in ("thinking", "content", "text"):
        if isinstance(block.get(key), str):
            return block[key]
    texts = [part["text"] for key in ("summary", "content") for part in _items(block.get(key))
             if isinstance(part, dict) and isinstance(part.get("text"), str)]
    return "\n".join(texts) if texts else None


def _call(call: dict) -> dict:
    """A tool call as GenAI (`name`, `arguments`), OpenAI (`function: {name, arguments}`), OpenInference
    (`tool_call: {id, function}`), Anthropic (`name`, `input`), LangChain (`name`, `args`) or Responses
    (`call_id`) write it."""
    if isinstance(call.get("tool_call"), dict):
        call = call["tool_call"]
    function = call.get("function") if isinstance(call.get("function"), dict) else call
    arguments = next((function[key] for key in ("arguments", "input", "args") if key in function), None)
    call_id = call.get("id") if call.get("id") is not None else call.get("call_id")
    name = function.get("name")
    return {"kind": "tool_call", "name": name if isinstance(name, str) else "", "arguments": _parsed(arguments),
            "id": call_id if isinstance(call_id, str) else None}


def _tool_result(call_id, result) -> dict:
    if isinstance(result, list) and result and all(
            isinstance(block, dict) and _type(block) in TEXT_TYPES and isinstance(block.get("text"), str)
            for block in result):
        result = "\n".join(block["text"] for block in result)  # Anthropic and MCP results: text blocks
    return {"kind": "tool_result", "id": call_id if isinstance(call_id, str) else None, "result": _parsed(result)}


def _response_item(item: dict) -> dict:
    """An OpenAI Responses item other than a message."""
    kind = item["type"]
    if kind == "function_call":
        return {"role": "assistant", "parts": [_call(item)]}
    if kind == "function_call_output":
        return {"role": "tool", "parts": [_tool_result(item.get("call_id"), item.get("output"))]}
    if kind == "reasoning":
        text = _thinking_text(item)
        return {"role": "assistant", "parts": [{"kind": "thinking", "text": text} if text else _data(item)]}
    return {"role": "tool" if kind.endswith("_output") else "assistant", "parts": [_data(item)]}


def _openinference(message: dict) -> dict:
    role = message.get("role") if isinstance(message.get("role"), str) else NO_ROLE
    if message.get("tool_call_id") is not None:
        return {"role": role, "parts": [_tool_result(message["tool_call_id"], message.get("content"))]}
    parts = _content_parts(message.get("content"))
    if not parts and isinstance(message.get("contents"), list):
        parts = _parts(message["contents"])
    parts += [_call(call) for call in _items(message.get("tool_calls")) if isinstance(call, dict)]
    return {"role": role, "parts": parts}


def _langchain(message: dict, role: str) -> dict:
    if role == "tool":
        return {"role": role, "parts": [_tool_result(message.get("tool_call_id"), message.get("content"))]}
    parts = _content_parts(message.get("content"))
    parts += [_call(call) for call in _items(message.get("tool_calls")) if isinstance(call, dict)]
    return {"role": role, "parts": parts}


def _langchain_serialized(item: dict) -> dict | None:
    """`{"lc": 1, "type": "constructor", "id": [..., "AIMessage"], "kwargs": {...}}`."""
    name = item["id"][-1] if isinstance(item.get("id"), list) and item["id"] else None
    if not isinstance(name, str) or name not in LANGCHAIN_CLASSES:
        return None
    kwargs = item["kwargs"]
    role = LANGCHAIN_CLASSES[name] or (kwargs.get("role") if isinstance(kwargs.get("role"), str) else NO_ROLE)
    return _langchain(kwargs, role)


def _generation(generation):
    """An LLMResult generation: its message, else its text."""
    if isinstance(generation, dict):
        return generation.get("message") or {"role": "assistant", "content": generation.get("text")}
    return generation


def _type(value: dict) -> str | None:
    """A dict's `type`, when it is text (anything may stand where a source wrote a type)."""
    kind = value.get("type")
    return kind if isinstance(kind, str) else None


def _listed(value) -> list:
    return value if isinstance(value, list) else [value]


def _items(value) -> list:
    """The items of what a source gave as a list; none when it gave something else."""
    return value if isinstance(value, list) else []


def _text_message(role: str, text: str) -> dict:
    return {"role": role, "parts": [{"kind": "text", "text": text}]}


def _data(value) -> dict:
    return {"kind": "data", "value": value}


def _parsed(value):
    """Arguments or a result: parsed when it is JSON text, else as it is."""
    return _json(value) if isinstance(value, str) else value


def _json(text: str):
    """The value of JSON text that holds an object or an array; the text itself otherwise."""
    stripped = text.lstrip()
    if not stripped.startswith(("{", "[")):
        return text
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return text
