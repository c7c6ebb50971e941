"""`open_program(settings)`: one context manager that opens the KG, builds the role LMs, loads the artifact,
builds the program, and closes the KG (and any server it started) on the way out, also on error."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ppoga_dspy.errors import ConfigError
from ppoga_dspy.scripted.specs import is_scripted_spec

# Benchmarks that ship their own KG: question file name -> KB file name in the same folder.
_OWN_KG = {
    "PQ-2H.txt": "2H-kb.txt",
    "PQ-3H.txt": "3H-kb.txt",
    "PQL-2H.txt": "PQL2-KB.txt",
    "PQL-3H.txt": "PQL3-KB.txt",
    "WC-P1.txt": "WC2014.txt",
    "WC-P2.txt": "WC2014.txt",
    "WC-C.txt": "WC2014.txt",
}


class ProgramSettings(BaseModel):
    """Everything that decides which program answers: KG, LMs, compiled artifact, threshold overrides."""

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    kg: str | None = Field(None, description="file, store directory or SPARQL URL; None: the dataset's own KG")
    dialect: str | None = None
    timeout: float = 30.0
    retries: int = 3
    breaker: int = Field(3, ge=0, description="failed endpoint attempts in a row before it is marked down; 0: never")
    ontology: str | None = None
    dataset: str | None = Field(None, description="dataset spec, used to find a benchmark's own KG")
    lm: Any = Field(None, description="a model string ('openai/gpt-4o-mini'), an LMSettings, a dict of LMSettings "
                    "fields, a dspy.LM (both roles), or None for the defaults (env, TOML, embedded model)")
    program: str | None = Field(None, description="artifact path from `ppoga compile` / `ppoga tune`; None: the "
                                "artifact shipped for this LM if there is one; 'none': no artifact (zero-shot)")
    overrides: dict[str, str] = Field(default_factory=dict, description="threshold NAME -> VALUE (text)")
    stages: Literal["paper", "fused"] | None = Field(
        None, description="stage mode: paper (one call per paper stage) or fused (calls reading the same inputs "
        "merged); None: the artifact's mode, else paper")
    foreign_demos: Literal["compiled", "unnamed"] = Field(
        "compiled", description="an artifact's knn demos on a KG it was not compiled on: as compiled, or unnamed "
        "(the plan's shape without that graph's relation names; method/demo_transfer.py)")
    seed: int = Field(0, description="seed of the scripted noisy planner (`--lm oracle/noisy:P`)")
    tracing: str | None = Field(None, description="mlflow[:URI], otel:ENDPOINT or off: spans per question, stage and "
                              "LM call (app/tracing.py; needs `pip install ppoga-dspy[mlflow]`)")

    def __init__(self, **data: Any) -> None:
        # A model string or a dict becomes LMSettings (env and TOML fill the rest) before pydantic sees it, so a
        # bad spec is the settings' own one-line LMConfigError, not a validation report.
        lm = data.get("lm")
        if isinstance(lm, (str, dict)):
            from ppoga_dspy.lm import load_lm_settings

            data["lm"] = load_lm_settings(lm=lm) if isinstance(lm, str) else load_lm_settings(**lm)
        super().__init__(**data)

    @field_validator("lm")
    @classmethod
    def _lm_kind(cls, value: Any) -> Any:
        from ppoga_dspy.lm import LMSettings

        if value is None or isinstance(value, LMSettings) or hasattr(value, "model"):  # hasattr: a dspy.LM
            return value
        raise ValueError(f"expected a model string, LMSettings, dict or dspy.LM, not {type(value).__name__}")


@dataclass
class OpenedProgram:
    """What `open_program` yields: the program, its KG, and a one-line description of the LMs it uses."""

    program: Any
    kg: Any
    lm_description: str
    artifact: Any = None
    artifact_path: str | None = None
    role_lms: dict[str, Any] | None = None

    def warm_up(self) -> float:
        """Load the embedded LM and the embedder now (not in the first question); seconds taken."""
        from ppoga_dspy.app.warmup import warm_up

        return warm_up(self.program, self.role_lms)


def default_kg_path(dataset_spec: str | None) -> Path:
    """A benchmark's own KG beside its question file (IRN benchmarks, MetaQA's kb.txt; for the NSM subgraph
    releases, the union of the file's subgraphs), else the demo KG."""
    if dataset_spec and ":" in dataset_spec:
        fmt, _, path = dataset_spec.partition(":")
        own = _OWN_KG.get(Path(path).name)
        if own:
            return Path(path).parent / own
        fmt = fmt.strip().lower()
        if fmt == "metaqa" and (Path(path).parent / "kb.txt").is_file():
            return Path(path).parent / "kb.txt"
        if fmt == "nsm" and Path(path).is_file():
            from ppoga_dspy.datasets.nsm import union_store

            return union_store(Path(path))
        raise ConfigError(f"--kg is required for {dataset_spec}: it does not ship its own KG")
    from ppoga_dspy.data import DEMO_KG

    return DEMO_KG


def thresholds_with(overrides: dict[str, str], base: Any = None):
    """Thresholds: `base` (the artifact's, or the paper defaults), then each NAME=VALUE override."""
    from pydantic import ValidationError

    from ppoga_dspy.method.thresholds import RENAMED, Thresholds

    data = (base or Thresholds()).to_dict()
    for name, value in overrides.items():
        name = RENAMED.get(name, name)  # a switch's earlier name
        if name not in data:
            raise ConfigError(f"--set {name}={value}: unknown threshold; use one of {', '.join(data)}")
        text = str(value).strip()
        data[name] = json.loads(text.lower()) if text.lower() in ("true", "false", "null") else text
        data[name] = None if text.lower() == "none" else data[name]
    try:
        return Thresholds.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first.get("loc", ())) or "threshold"
        reason = first.get("msg", "invalid value")
        raise ConfigError(f"invalid threshold --set {field}={data.get(field)!r}: {reason}") from None


def parse_overrides(items: Sequence[str]) -> dict[str, str]:
    """`["max_replans=0", ...]` -> `{"max_replans": "0"}`; a malformed item is a one-line ConfigError."""
    out: dict[str, str] = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise ConfigError(f"--set {item!r}: use NAME=VALUE, e.g. --set max_replans=0")
        out[name.strip()] = value
    return out


def role_lms_for(
    settings: ProgramSettings, *, examples: list | None = None, kg: Any = None
) -> tuple[dict[str, Any], str]:
    """Role -> LM, and their description; `oracle/gold-path` (perfect) and `oracle/noisy:P` (errs at rate P,
    seeded by `settings.seed`) are scripted planners that follow the examples' gold paths (need examples)."""
    lm_settings = settings.lm
    if lm_settings is not None and not hasattr(lm_settings, "planner_spec"):  # a ready dspy.LM: both roles
        from ppoga_dspy.lm import lm_spec_of

        return {"planner": lm_settings, "executor": lm_settings}, lm_spec_of(lm_settings)
    planner_spec = getattr(lm_settings, "lm", None)
    if planner_spec == "none":  # the no-model baseline: every stage takes the program's fallback
        from ppoga_dspy.lm.no_model import NoModel

        return {"planner": NoModel(), "executor": NoModel()}, "none"
    if is_scripted_spec(planner_spec):
        from ppoga_dspy.scripted.specs import scripted_lm_for_spec

        lm = scripted_lm_for_spec(planner_spec, examples, seed=settings.seed, kg=kg)
        return {"planner": lm, "executor": lm}, planner_spec
    from ppoga_dspy.lm import build_role_lms, lm_spec_of

    role_lms = build_role_lms(lm_settings)
    planner, executor = lm_spec_of(role_lms["planner"]), lm_spec_of(role_lms["executor"])
    return role_lms, planner if planner == executor else f"planner={planner} executor={executor}"


def adapted_role_lms(role_lms: dict[str, Any], artifact: Any) -> dict[str, Any]:
    """The role LMs with the artifact's LoRA adapter (`--optimizer finetune`) merged into each embedded model.

    A role on another LM keeps it as it is, with a warning: the adapter was trained for the embedded model.
    """
    import logging

    from ppoga_dspy.lm import with_adapter
    from ppoga_dspy.lm.embedded import EmbeddedEngine

    adapter = artifact.adapter_path()
    if adapter is None:
        return role_lms
    adapted: dict[int, Any] = {}  # one adapted LM per distinct LM: roles sharing one keep sharing it
    out = {}
    for role, lm in role_lms.items():
        if not isinstance(getattr(lm, "engine", None), EmbeddedEngine):
            logging.getLogger(__name__).warning(
                "the artifact's LoRA adapter %s is for the embedded model; the %s role's LM %s runs without it",
                adapter, role, getattr(lm, "model", lm))
            out[role] = lm
            continue
        if id(lm) not in adapted:
            adapted[id(lm)] = with_adapter(lm, str(adapter))
        out[role] = adapted[id(lm)]
    return out


def open_kg_for(settings: ProgramSettings, examples: list | None = None):
    """The KnowledgeGraph the settings name; without `kg`, the dataset's own KG or the demo KG.

    A dataset whose questions carry their own graphs (`nsm:`, `rog:`; datasets/own_graphs.py) runs on the union of
    the graphs (`--kg union`, nsm's default) or each question on its own (`--kg per-question`, rog's default)."""
    from ppoga_dspy.datasets.own_graphs import open_own_graph, own_graph_mode
    from ppoga_dspy.kg import open_kg

    mode = own_graph_mode(settings.dataset, settings.kg)
    if mode is not None:
        return open_own_graph(settings.dataset, mode, examples, timeout=settings.timeout, retries=settings.retries,
                              breaker=settings.breaker, ontology=settings.ontology)
    spec = settings.kg or str(default_kg_path(settings.dataset))
    return open_kg(spec, dialect=settings.dialect, timeout=settings.timeout, retries=settings.retries,
                   breaker=settings.breaker, ontology=settings.ontology)


@contextmanager
def open_program(settings: ProgramSettings, *, examples: list | None = None) -> Iterator[OpenedProgram]:
    """Open the KG, build the role LMs and the program, apply the artifact and overrides; close the KG after.

    The LM specs' providers, the artifact and the threshold overrides are checked before the KG is
    opened, so a bad flag costs nothing (no server started, no model loaded).
    """
    from ppoga_dspy.app.checks import check_lm_settings

    check_lm_settings(settings.lm)  # an unknown provider is found here, not at the first call
    from ppoga_dspy.method.program import PPoGA
    from ppoga_dspy.method.vocabulary import StageMode
    from ppoga_dspy.optimizers.artifact import load_artifact

    artifact, artifact_path = None, None
    if settings.program and settings.program.lower() != "none":
        artifact, artifact_path = load_artifact(settings.program), settings.program
    thresholds_with(settings.overrides)  # fail fast on a bad --set, before any work
    if settings.tracing:
        from ppoga_dspy.app.tracing import enable_tracing

        enable_tracing(settings.tracing)  # before the KG opens: a missing extra costs nothing
    kg = open_kg_for(settings, examples)
    try:
        role_lms, description = role_lms_for(settings, examples=examples, kg=kg)
        if settings.program is None:  # no --program: the artifact shipped for this LM, if any
            from ppoga_dspy.data import default_artifact

            shipped = default_artifact(description)
            if shipped is not None:
                artifact, artifact_path = load_artifact(shipped), str(shipped)
        if artifact is not None:
            role_lms = adapted_role_lms(role_lms, artifact)
        program = PPoGA(kg, role_lms=role_lms)
        if artifact is not None:
            artifact.apply(program, lm_description=description, kg_name=kg.name,
                           foreign_demos=settings.foreign_demos)
        program.thresholds = thresholds_with(settings.overrides, program.thresholds)
        if settings.stages is not None:  # --stages wins over the artifact's mode
            program.stages = StageMode(settings.stages)
        yield OpenedProgram(program=program, kg=kg, lm_description=description, artifact=artifact,
                            artifact_path=artifact_path, role_lms=role_lms)
    finally:
        kg.close()
