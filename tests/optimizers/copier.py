"""A scripted stand-in for a tiny model that copies its demonstrations (what Gemma-3-270M does, issue 13).

Its reply to any request is the last demonstration's reply, verbatim; with no demonstration it writes
nothing usable. It is an honest instrument for demo selection: it knows nothing about the question, so
it is right exactly when the demo it copies fits the question. Every request is recorded with its
signature, the question it asked about and the questions of its demos, so a test can check which demos each call saw.
"""

from __future__ import annotations

import re
import threading

_QUESTION = re.compile(r"\[\[ ## question ## \]\]\n(.*?)(?=\n\n\[\[ ## |\Z)", re.S)


class CopierEngine:
    """A DSPy engine: replies with the last demo's assistant turn; records (question, demo questions)."""

    supports_response_schema = False

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, list[str]]] = []  # (signature, question, demo questions)
        self._lock = threading.Lock()

    def __deepcopy__(self, memo: dict) -> CopierEngine:
        return self

    def complete(self, request):
        from dspy.lm15 import Message, Response, TextPart, Usage

        from ppoga_dspy.scripted.engine import SIGNATURE_OUTPUTS, parse_request

        users = [m.text or "" for m in request.messages if m.role == "user"]
        replies = [m.text or "" for m in request.messages if m.role == "assistant"]
        asked = _QUESTION.search(users[-1]) if users else None
        demo_questions = [found.group(1).strip() for u in users[:-1] if (found := _QUESTION.search(u))]
        system = request.system if isinstance(request.system, str) else "".join(
            getattr(part, "text", "") or "" for part in request.system or [])
        outputs, _, _ = parse_request(system, "")
        signature = SIGNATURE_OUTPUTS.get(frozenset(outputs), "?")
        with self._lock:
            self.requests.append((signature, asked.group(1).strip() if asked else "", demo_questions))
        reply = replies[-1] if replies else "I am not sure."
        usage = Usage(input_tokens=10, output_tokens=max(1, len(reply) // 4), total_tokens=10 + len(reply) // 4)
        return Response(id=None, model="copier", message=Message.assistant([TextPart(reply)]), finish_reason="stop",
                        usage=usage)

    def stream(self, request):
        from dspy.lm15 import response_to_events

        return response_to_events(self.complete(request))

    def close(self) -> None:
        pass


def copier_lm(engine: CopierEngine | None = None):
    """A `dspy.LM` over a CopierEngine (uncached: each call reaches the engine and is recorded)."""
    import dspy

    return dspy.LM("local/copier", engine=engine or CopierEngine(), cache=False, temperature=0.0, max_tokens=500)
