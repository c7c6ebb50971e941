"""Readable rendering of one answered question: the plan, each step cycle, corrections and cost.

A researcher reading `ppoga ask` output should see the method at work: what was planned, what each
step predicted and then observed, what the Planner thought and decided, where it corrected itself.

Everything shown comes from outside (the question, KG labels, LM replies), so every value passes the
outgoing-text rule of `ppoga_dspy.text` first: `_m` inside markup strings (rich markup escaped, escapes
and controls gone, secrets redacted), `_t` inside `Text` objects (which never parse markup).
"""

from __future__ import annotations

from typing import Any

from ppoga_dspy.method.vocabulary import Decision
from ppoga_dspy.text import for_terminal as _t
from ppoga_dspy.text import markup_safe as _m

_DECISION_STYLE = {Decision.PROCEED: "green", Decision.FINISH: "bold green", Decision.CORRECT_PATH: "yellow",
                   Decision.REPLAN: "magenta"}


def render_prediction(console, result: dict[str, Any]) -> None:
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    memory = result.get("memory") or {}
    strategic = memory.get("strategic") or {}
    question = Text(_t(result["question"]), style="bold")
    console.print(Panel(question, title="question", subtitle=_m(result["kg"])))
    linked = strategic.get("topic_entities", [])
    topics = ", ".join(f"{_m(t['label'])} ({_m(t['id'])})" for t in linked) or "(none linked)"
    console.print(f"[bold]Topic entities:[/] {topics}")
    for number, plan in enumerate(strategic.get("archived_plans", []), 1):
        console.print(f"[magenta]Plan {number} (abandoned):[/] " + " | ".join(_m(s["objective"]) for s in plan))
    plan = strategic.get("plan", [])
    steps = " | ".join(f"{_m(s['objective'])} \\[{_m(s['status'])}]" for s in plan)
    console.print("[bold]Plan:[/] " + (steps or "(none)"))
    for cycle in memory.get("step_cycles", []):
        style = _DECISION_STYLE.get(cycle["decision"], "white")
        body = Text()
        if cycle.get("prediction"):
            body.append("predicted: ", style="cyan")
            body.append(_t(cycle["prediction"]) + "\n")
        body.append("observed:  ", style="cyan")
        body.append(_t(cycle["observation"]) + "\n")
        if cycle.get("thought"):
            body.append("thought:   ", style="cyan")
            body.append(_t(cycle["thought"]) + "\n")
        body.append("decision:  ", style="cyan")
        body.append(_t(cycle["decision"]), style=style)
        if cycle.get("reason"):
            body.append(f" ({_t(cycle['reason'])})")
        title = f"step {cycle['index'] + 1}, attempt {cycle['attempt'] + 1}: {_m(cycle['objective'])}"
        console.print(Panel(body, title=title, title_align="left", border_style=style))
    notes = [e for e in result.get("trace", []) if e["stage"] in
             ("path_correction", "plan_correction", "decision_changed", "max_steps") or e["stage"].endswith("fallback")]
    for note in notes:
        console.print(f"[yellow]{_m(note['stage'])}[/]: {_m(describe_note(note['stage'], note.get('outputs') or {}))}")
    if result.get("status") != "ok":
        console.print(f"[bold red]failed ({_m(result.get('error_kind'))}):[/] {_m(result.get('error'))}")
    ungrounded = set(result.get("ungrounded") or [])
    answer = ", ".join(_t(a) + (" (not on the graph: the model's own answer)" if a in ungrounded else "")
                       for a in result.get("answers") or []) or "(no answer)"
    console.print(Panel(Text(answer, style="bold green"), title="answer"))
    if result.get("reasoning"):
        console.print(f"[bold]Reasoning:[/] {_m(result['reasoning'])}")
    costs = result.get("costs") or {}
    from ppoga_dspy.app.naming import display_lm

    table = Table(title=f"cost ({_m(display_lm(result.get('lm') or ''))})", show_header=True)
    for column in ("LM calls", "prompt tokens", "completion tokens", "KG queries", "seconds"):
        table.add_column(column, justify="right")
    table.add_row(str(costs.get("lm_calls", 0)), str(costs.get("prompt_tokens", 0)),
                  str(costs.get("completion_tokens", 0)), str(costs.get("kg_queries", 0)),
                  f"{costs.get('seconds', 0):.1f}")
    console.print(table)
    by_stage = costs.get("lm_calls_by_stage") or {}
    if by_stage:
        console.print("calls by stage: " + ", ".join(f"{_m(k)} {v}" for k, v in by_stage.items()))
    by_role = costs.get("lm_calls_by_role") or {}
    if by_role:
        tokens = costs.get("tokens_by_role") or {}
        console.print("by role: " + ", ".join(f"{_m(k)} {v} calls / {tokens.get(k, 0)} tokens"
                                              for k, v in by_role.items()))
    if costs.get("cost_usd"):
        console.print(f"cost reported by the backend: ${costs['cost_usd']:.4f}")


def describe_note(stage: str, outputs: dict[str, Any]) -> str:
    """One readable line for a trace note (a correction, a rule that overrode the model, a fallback)."""
    if stage == "decision_changed" and {"model", "applied"} <= outputs.keys():
        return (f"the model chose {outputs['model']}, the caps applied {outputs['applied']} "
                f"(path corrections {outputs.get('attempts', 0)}, replans {outputs.get('replans', 0)})")
    return ", ".join(f"{k}: {v}" for k, v in outputs.items())
