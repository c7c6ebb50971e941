"""Conversions between DSPy's lm15 types and plain chat messages / the OpenAI chat-completions wire format.

Engines (the embedded model, the scripted one) think in `[{"role", "content"}]` lists; the loopback
server speaks OpenAI JSON. Both meet DSPy at `dspy.lm15.Request` / `Response`, converted here once.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from ppoga_dspy.lm.errors import LMConfigError

# lm15 has no "system" message role: the system prompt travels in Request.system. A "developer"
# message (DSPy's use_developer_role) plays the same part, so engines render it as system.
_SYSTEM_ROLES = ("system", "developer")


def _system_text(system: Any) -> str | None:
    if system is None:
        return None
    if isinstance(system, str):
        return system
    return "".join(getattr(part, "text", "") or "" for part in system)


def request_to_chat(request: Any) -> list[dict[str, str]]:
    """Flatten an lm15 Request into `[{"role": "system"|"user"|"assistant", "content": str}]`."""
    chat: list[dict[str, str]] = []
    system = _system_text(request.system)
    if system:
        chat.append({"role": "system", "content": system})
    for message in request.messages:
        role = "system" if message.role in _SYSTEM_ROLES else message.role
        if role == "tool":
            role = "user"
        text = message.text
        if text is None:  # mixed parts: keep the text ones, drop media a text-only engine cannot read
            text = "\n".join(getattr(p, "text", "") for p in message.parts if getattr(p, "type", "") == "text")
        chat.append({"role": role, "content": text})
    return chat


def _content_text(content: Any) -> str:
    """OpenAI message content is a string or a list of parts; keep the text parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    raise LMConfigError(f"message content must be a string or a list of parts, got {type(content).__name__}")


def openai_to_request(payload: dict[str, Any]) -> Any:
    """Build an lm15 Request from an OpenAI `/v1/chat/completions` body (text chats only)."""
    from dspy.lm15 import Config, Message, Request

    messages = payload.get("messages")
    if not isinstance(messages, list) or not messages:
        raise LMConfigError("'messages' must be a non-empty list of {role, content} objects")
    system_parts: list[str] = []
    converted = []
    for item in messages:
        if not isinstance(item, dict) or "role" not in item:
            raise LMConfigError("each message must be an object with 'role' and 'content'")
        role, text = item["role"], _content_text(item.get("content"))
        if role in _SYSTEM_ROLES:
            system_parts.append(text)
        elif role == "assistant":
            converted.append(Message.assistant(text))
        elif role in ("user", "tool", "function"):
            converted.append(Message.user(text))
        else:
            raise LMConfigError(f"unknown message role {role!r}; use system, user or assistant")
    if not converted:
        raise LMConfigError("'messages' holds only system messages; add a user message")
    stop = payload.get("stop") or ()
    max_tokens = payload.get("max_completion_tokens", payload.get("max_tokens"))
    config = Config(
        max_tokens=int(max_tokens) if max_tokens is not None else None,
        temperature=payload.get("temperature"),
        top_p=payload.get("top_p"),
        stop=(stop,) if isinstance(stop, str) else tuple(stop),
        seed=payload.get("seed"),
    )
    return Request(
        model=str(payload.get("model") or "model"),
        messages=tuple(converted),
        system="\n\n".join(system_parts) if system_parts else None,
        config=config,
    )


def response_to_openai(response: Any, *, model: str) -> dict[str, Any]:
    """Render an lm15 Response as an OpenAI chat-completion object, `usage` included."""
    usage = response.usage
    prompt_tokens = usage.input_tokens or 0
    completion_tokens = usage.output_tokens or 0
    finish = response.finish_reason if response.finish_reason in ("stop", "length", "content_filter") else "stop"
    return {
        "id": response.id or f"chatcmpl-{uuid.uuid4().hex[:24]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": response.text or ""},
                "finish_reason": finish,
                "logprobs": None,
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": usage.total_tokens if usage.total_tokens is not None else prompt_tokens + completion_tokens,
            # OpenAI's field for prompt tokens served from a cache (vLLM's prefix caching reports it too)
            **({"prompt_tokens_details": {"cached_tokens": usage.cache_read_tokens}}
               if usage.cache_read_tokens is not None else {}),
        },
    }
