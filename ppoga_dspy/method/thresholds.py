"""Every number and switch that shapes a PPoGA run, in one validated, serialisable place.

Thresholds are saved with compiled prompts (one artifact per LLM backend) and tuned by Optuna, so
nothing in the program may hard-code a limit: add it here with a default from the paper (or, when
the paper is silent, from PoG) and a bound that keeps every loop finite.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator


class Thresholds(BaseModel):
    """Limits and ablation switches of the step cycle.

    Loops are bounded three ways: `max_steps` caps every step cycle of a question (retries and
    replanned steps included), `max_path_corrections` caps retries of one step, `max_replans` caps
    plan corrections, and `max_depth` caps how many steps one plan may have.
    """

    # Each field's docstring is its description (in --help, the JSON schema and the artifact's documentation).
    model_config = ConfigDict(extra="forbid", validate_assignment=True, use_attribute_docstrings=True)

    max_steps: int = Field(12, ge=1, le=100)
    """step cycles per question, retries included"""
    max_path_corrections: int = Field(2, ge=0, le=10)
    """retries of one step avoiding failed paths"""
    max_replans: int = Field(2, ge=0, le=10)
    """plan corrections per question"""
    max_depth: int = Field(4, ge=1, le=10)
    """steps one plan may hold (hops from the topic entity)"""
    prune_threshold: int = Field(70, ge=1, le=10_000)
    """candidates kept per (entity, relation) group by embedding pruning (paper: 70)"""
    relations_per_step: int = Field(3, ge=1, le=20)
    """relations the Executor may follow per step"""
    entities_per_step: int = Field(3, ge=1, le=50)
    """entities kept as the next frontier per step"""
    relation_candidates: int = Field(10, ge=1, le=500)
    """relations per frontier entity shown to the model (relations_per_entity), ranked by similarity to
    question + step; the rest are noted in the trace. 10: the smallest width whose first relations held a gold
    relation in every menu measured on dev questions, ranked by the question alone (benchmarks/cut_sizes_bench.py)"""
    neighbor_limit: int = Field(5000, ge=1, le=100_000)
    """neighbours fetched and ranked per (entity, relation): the size budget of ranking a hub's whole group
    (pruning then keeps `prune_threshold`); a group larger than this, or than the 10,000 one KG query returns,
    is counted and the cut traced"""
    frontier_limit: int = Field(3, ge=1, le=50)
    """frontier entities whose relations are explored per step"""
    evidence_limit: int = Field(40, ge=1, le=1000)
    """facts one step's observation keeps, selected first"""
    evidence_tokens: int = Field(500, ge=50, le=100_000)
    """token budget of the evidence the Planner reads: reasoning chains first, then the step's selected facts,
    then other observed facts (PoG keeps its memory to the same order). 500: it held every gold chain, and named
    every gold answer reached, of the 3-hop and mediator walks measured (benchmarks/cut_sizes_bench.py)"""
    gate_margin: float | None = Field(None, ge=0.0, le=2.0)
    """gated choices: no LM call when the best candidate's embedding similarity beats the second's by more than
    this (the best is taken); None: never gate on the margin (a single candidate never needs a call)"""
    follow_named_relations: bool = True
    """gated relation choices: a step whose objective names menu relations as whole names ("follow relation
    written_by") follows them without SelectRelations: the Planner has already chosen, and asking again only lets
    the Executor stray (the embedded model's SelectRelations left relations its own plan named in 8 of 12 MetaQA
    2-hop misses). An objective that names none asks the Executor as the paper does"""
    back_to_named_relation: bool = True
    """back to the candidates that lead on: a step whose objective names a relation its frontier does not have
    takes the last step's other candidates that have it as its frontier (PoG's backtracking, told by the graph what
    to look for), and a step that would end the walk having followed none of the relations it names (its frontier
    had none), whose entities have one, is done again from them, once (the plan skipped a hop). KG queries only,
    never an LM call (method/named_relations.py)"""
    correct_named_mismatch: bool = True
    """a step that followed none of the relations its objective names (its frontier had none) is a mismatch: the
    observation says so to Think and Evaluate, and a decision to end the walk on it becomes a path correction while
    retries are left; a step naming the relation its frontier was reached by (read through a mediator) is done"""
    use_prediction: bool = True
    """ablation: predict each step's outcome before acting"""
    use_path_correction: bool = True
    """ablation: retry a failed step avoiding failed paths"""
    use_plan_correction: bool = True
    """ablation: replan after repeated failures"""
    ground_answers: bool = True
    """keep only answers naming an entity found on the graph (else the last step's entities)"""
    answer_from_knowledge: bool = True
    """when the model names nothing on the graph, keep its own answers, marked ungrounded (PoG and ToG answer
    from the triplets and the model's knowledge); off: answer the last step's entities instead, for a small
    model that invents names or copies them from its demos"""

    answer_reads_plan: bool = True
    """Answer reads the plan with each step's status and what Think concluded, above the facts (what a capable
    model reasons from); off: the facts alone, for a small model that copies a name from the plan lines (the
    embedded 270M model named the question's topic: WC-P2 30 of 35 with them, 34 of 35 without)"""
    answer_at_walk_end: bool = True
    """Answer reads the end of the walk: answers naming the question's topic entity or an entity an earlier step
    reached and the walk moved on from (kept or not: Answer reads both in the facts) are dropped, and when every
    answer names one the last step's entities answer instead: the plan's own walk says the answer lies past them.
    A plan whose last step reads memory (compare, pick: "which of A and B is older") answers what it picked, a topic
    entity included. The embedded model's constrained answer named the first entity it read (PQ-2H 0.640 -> 0.920
    with this rule, benchmarks/compile_bench.py)"""

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, data: Any) -> Any:
        """Artifacts and `--set`s written under a switch's earlier name still load (`RENAMED`)."""
        if isinstance(data, dict):
            return {RENAMED.get(key, key): value for key, value in data.items()}
        return data

    def to_dict(self) -> dict:
        return self.model_dump()

    @classmethod
    def from_dict(cls, data: dict | None) -> Thresholds:
        return cls.model_validate(data or {})


#: Switch names of earlier releases -> today's (each rule is named for what it does, not for the model it was first
#: needed for).
RENAMED: dict[str, str] = {"gate_named_relation": "follow_named_relations",
                           "bridge_named_relation": "back_to_named_relation",
                           "redirect_walked_past": "answer_at_walk_end"}

#: The on/off rules `ppoga compile` chooses for the student by measuring them on dev (`optimizers/switches.py`);
#: with `--dev-limit 0` the defaults above apply, so they are the ones that serve every model.
CHOSEN_ON_DEV: tuple[str, ...] = ("answer_reads_plan", "follow_named_relations", "back_to_named_relation",
                                  "correct_named_mismatch", "answer_at_walk_end", "answer_from_knowledge")
