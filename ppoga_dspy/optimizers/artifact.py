"""One file per LLM backend: compiled prompts and demos, thresholds, and where they came from.

An artifact is JSON (never pickle): each predictor's instructions and demos as DSPy's own
`dump_state` writes them, the `Thresholds`, the LM spec it was compiled/tuned for, the dataset and
split, the scores, library versions and the date. Loading rehearses on a copy of the program first
and only then applies, so a bad file leaves the program as it was. An artifact made for another LM
loads with a warning: it is a fine starting point for compiling again.

Schema 2 adds two optional sections: `knn`, the nearest-neighbour demo pool (`optimizers/knn.py`:
questions, float16 embeddings and stage records, all offline), and `adapter`, a LoRA adapter folder
written by `--optimizer finetune`, stored relative to the artifact so the pair moves together.
Schema 1 files (no such sections) load unchanged.

`stages` records the stage mode the program ran in (`paper` or `fused`, see `PPoGA`); loading
restores it (a file without it is `paper`), and `--stages` overrides it after loading. The fused
predictors (`FUSED_PREDICTORS`) are newer than some files: a file without their state leaves them
as they are (zero-shot), so older artifacts still load.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import platform
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ppoga_dspy.errors import ArtifactError, ConfigError

log = logging.getLogger(__name__)

SCHEMA = "ppoga-dspy/artifact/2"
#: Every schema this version reads; 1 lacks the `knn` and `adapter` sections.
READABLE_SCHEMAS = ("ppoga-dspy/artifact/1", SCHEMA)
#: Predictors of `--stages fused`, absent from artifacts written before it: loading leaves them zero-shot.
FUSED_PREDICTORS = ("planner.decompose_predict", "planner.think_evaluate", "executor.select_relation_pairs")


class ArtifactKGMismatch(UserWarning):
    """The artifact was compiled on another KG: its demos show that graph's relations and entities."""


def kg_label(name: str) -> str:
    """A KG's name without the folders and the cache digest of its path (`names@/root/.cache/.../kb.txt-8ce8...`
    -> `names@kb.txt`), so one KG has one label on every machine."""
    dialect, at, where = name.partition("@")
    if not at:
        return name
    if "://" in where:  # an endpoint: its URL is its identity
        return name
    base = where.rstrip("/").rsplit("/", 1)[-1]
    stem, dash, digest = base.rpartition("-")
    if dash and len(digest) == 16 and all(c in "0123456789abcdef" for c in digest):
        base = stem
    return f"{dialect}@{base}"


class ArtifactLMMismatch(UserWarning):
    """The artifact was compiled for another LM; prompts and thresholds may not transfer well."""


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    found = {"python": platform.python_version()}
    for name in ("ppoga-dspy", "dspy", "optuna", "pyoxigraph"):
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            continue
    return found


def _program_state(program) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the predictors' states, the program's own section): `PPoGA.dump_state`, split as the file stores it."""
    from ppoga_dspy.method.program import STATE_KEY

    state = program.dump_state()
    own = state.pop(STATE_KEY, None) or {}
    for entry in state.values():
        if isinstance(entry, dict):
            entry["lm"] = None  # role LMs are configured at run time, never baked into the file
    return state, own


# Fields written under their own names, in this order (the program state is saved as "program").
_SAVED_AS_IS = ("schema", "created", "lm", "kg", "dataset", "split", "optimizer", "scores", "tuning",
               "thresholds", "stages", "versions")


@dataclass
class Artifact:
    program_state: dict[str, Any]
    thresholds: dict[str, Any]
    lm: str = ""
    kg: str | None = None  # the KG it was compiled on (`kg_label`); None: not recorded (artifacts before it)
    dataset: str | None = None
    split: str | None = None
    optimizer: str | None = None
    scores: dict[str, Any] = field(default_factory=dict)
    tuning: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=versions)
    created: str = field(default_factory=lambda: _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"))
    schema: str = SCHEMA
    stages: str = "paper"  # the stage mode it was compiled/tuned in (StageMode value)
    knn: dict[str, Any] | None = None  # DemoPool.to_dict() of a program compiled with --optimizer knn
    adapter: str | None = None  # LoRA adapter folder, relative to the artifact's own folder
    path: Path | None = None  # where it was loaded from (resolves `adapter`); not saved

    @classmethod
    def from_program(cls, program, *, lm: str, **provenance: Any) -> Artifact:
        predictors, own = _program_state(program)  # the artifact is the program's own state, plus provenance
        knn = own.get("knn")
        if knn and provenance.get("kg") and not knn.get("graphs"):  # each pool question answered on this KG
            knn = {**knn, "graphs": [provenance["kg"]] * len(knn.get("questions") or [])}
        return cls(program_state=predictors, thresholds=own["thresholds"], lm=lm, stages=own["stages"],
                   knn=knn, **provenance)

    def graphs(self) -> list[str]:
        """The KGs its demos were answered on, in the order they were added: the pool's record, else `kg`."""
        found = list(dict.fromkeys((self.knn or {}).get("graphs") or []))
        return found or ([self.kg] if self.kg else [])

    def extend(self, earlier: Artifact) -> None:
        """Put `earlier`'s knn demos before this artifact's own (`ppoga compile --extend`): one artifact whose
        pool holds several KGs' questions, each shown only on its own KG (`DemoPool.only`). The prompts,
        thresholds and switches stay this compile's."""
        from ppoga_dspy.method.knn_demos import DemoPool

        earlier.check_extendable(knn=bool(self.knn), stages=self.stages or "paper")
        first = DemoPool.from_dict(earlier.knn)
        if not first.graphs and earlier.kg:
            first = first.answered_on(earlier.kg)
        self.knn = first.merged(DemoPool.from_dict(self.knn)).to_dict()
        self.dataset = " + ".join(d for d in (earlier.dataset, self.dataset) if d)
        self.kg = earlier.kg or self.kg  # the graph it was first compiled on; `graphs()` lists them all

    def check_extendable(self, *, knn: bool, stages: str) -> None:
        """Refuse (ConfigError) to extend this artifact by a compile that writes no knn pool or another stage mode:
        checked by `ppoga compile` before any work, and by `extend`."""
        if not knn or not self.knn:
            raise ConfigError("--extend merges knn demo pools: both this compile and the artifact it extends must use "
                              "--optimizer knn")
        if (self.stages or "paper") != stages:
            raise ConfigError(f"--extend: the artifact holds {self.stages} stages' demos and this compile would write "
                              f"{stages}; pass --stages {self.stages} or extend a matching artifact")

    def adapter_path(self) -> Path | None:
        """The adapter folder, resolved against the artifact's folder (or the working directory before saving)."""
        if not self.adapter:
            return None
        base = self.path.parent if self.path is not None else Path.cwd()
        return (base / self.adapter).resolve()

    def to_dict(self) -> dict[str, Any]:
        data = {name: getattr(self, name) for name in _SAVED_AS_IS}
        data["program"] = self.program_state
        data.update({name: getattr(self, name) for name in ("knn", "adapter") if getattr(self, name)})
        return data

    def save(self, path: str | Path) -> Path:
        """Write atomically (temp file, then rename) so a crash never leaves half an artifact."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(path.suffix + ".tmp")
        temporary.write_text(json.dumps(self.to_dict(), indent=2, ensure_ascii=False, default=str), encoding="utf-8")
        temporary.replace(path)
        self.path = path
        return path

    def apply(self, program, *, lm_description: str | None = None, kg_name: str | None = None,
              foreign_demos: str = "compiled") -> None:
        """Restore prompts, demos, thresholds, the stage mode and the knn pool into `program` (through
        `program.load_state`, as DSPy's own `load` does); all or nothing. Run on another KG than the one it was
        compiled on, it says so once; with `foreign_demos="unnamed"` its knn demos lose that graph's relation names
        (`method/demo_transfer.py`), which a small model copies."""
        if foreign_demos not in ("compiled", "unnamed"):
            raise ConfigError(f"foreign_demos is 'compiled' or 'unnamed', not {foreign_demos!r}")
        from ppoga_dspy.method.knn_demos import DemoPool

        graphs, knn = self.graphs(), self.knn
        if kg_name and graphs and kg_label(kg_name) not in graphs:
            warnings.warn(
                f"this artifact was compiled on {', '.join(graphs)}, not {kg_label(kg_name)}: its demos show "
                f"{'that graph' if len(graphs) == 1 else 'those graphs'}' relations; compile one for this KG with "
                f"`ppoga compile --kg ... --dataset ...` (as {self.dataset}), or add its demos to this one with "
                f"`--extend`",
                ArtifactKGMismatch,
                stacklevel=2,
            )
            if knn and foreign_demos == "unnamed":  # the plan's shape without the graph's names (demo_transfer.py)
                knn = DemoPool.from_dict(knn).without_graph_names().to_dict()
        elif kg_name and knn and len(graphs) > 1:  # a pool of several KGs shows each KG its own questions
            knn = DemoPool.from_dict(knn).only(kg_label(kg_name)).to_dict()
        if lm_description and self.lm and lm_description != self.lm:
            warnings.warn(
                f"this artifact was compiled for {self.lm}, not {lm_description}; its prompts and thresholds are "
                "used as they are (compile again for this LM to adapt them)",
                ArtifactLMMismatch,
                stacklevel=2,
            )
        adapter = self.adapter_path()
        if adapter is not None and not (adapter / "adapter_config.json").is_file():
            raise ArtifactError(f"the artifact names the LoRA adapter {adapter}, which is missing: copy the "
                                f"{self.adapter}/ folder beside the artifact")
        from ppoga_dspy.method.program import STATE_FORMAT, STATE_KEY

        state = {**_with_fused_defaults(self.program_state, program),
                 STATE_KEY: {"format": STATE_FORMAT, "thresholds": self.thresholds, "stages": self.stages or "paper",
                             "knn": knn}}
        try:
            program.load_state(state)  # checks the section, rehearses on a copy, then applies: all or nothing
        except ArtifactError:
            raise
        except Exception as exc:
            raise ArtifactError(f"the artifact does not fit this program ({type(exc).__name__}: {exc}); "
                                f"it may come from another ppoga-dspy version ({self.versions.get('ppoga-dspy')})"
                                ) from exc


def _with_fused_defaults(state: dict[str, Any], program) -> dict[str, Any]:
    """`state`, plus the program's own state of any fused predictor the file predates (see FUSED_PREDICTORS)."""
    missing = [name for name in FUSED_PREDICTORS if name not in state]
    if not missing:
        return state
    own = program.dump_state()
    return {**state, **{name: own[name] for name in missing if name in own}}


def load_artifact(path: str | Path) -> Artifact:
    """Read and check an artifact whole (ArtifactError, one line, exit 6): a regular file of UTF-8 JSON, not nested
    beyond reason, its text through the incoming rule (`ppoga_dspy.text.clean`), its knn pool valid."""
    from ppoga_dspy.text import clean_tree

    path = Path(path)
    if not path.exists():
        raise ArtifactError(f"no artifact at {path}; `ppoga compile ... --out {path}` writes one")
    if not path.is_file():
        raise ArtifactError(f"{path} is not a regular file; an artifact is a .json file from `ppoga compile`")
    try:
        data = clean_tree(json.loads(path.read_bytes().decode("utf-8")), limit=64)
    except UnicodeDecodeError as exc:
        raise ArtifactError(f"{path} is not a readable JSON artifact: byte {exc.start} is not UTF-8") from None
    except (OSError, json.JSONDecodeError) as exc:
        raise ArtifactError(f"{path} is not a readable JSON artifact: {exc}") from exc
    except (RecursionError, ValueError):
        raise ArtifactError(f"{path} is not a ppoga-dspy artifact: it is nested deeper than any artifact") from None
    if not isinstance(data, dict) or data.get("schema") not in READABLE_SCHEMAS:
        found = data.get("schema") if isinstance(data, dict) else None
        raise ArtifactError(f"{path} is not a ppoga-dspy artifact this version reads (schema {found!r}, expected "
                            f"one of {', '.join(READABLE_SCHEMAS)}); upgrade ppoga-dspy or compile it again")
    missing = [k for k in ("program", "thresholds") if k not in data]
    if missing:
        raise ArtifactError(f"{path} lacks {', '.join(missing)}")
    wrong = [k for k, kind in (("program", dict), ("thresholds", dict), ("knn", (dict, type(None))))
             if not isinstance(data.get(k), kind)]
    if wrong:
        raise ArtifactError(f"{path}: {', '.join(wrong)} is not a JSON object; compile the artifact again")
    if data.get("knn"):
        from ppoga_dspy.optimizers.knn import DemoPool

        DemoPool.from_dict(data["knn"])  # the whole pool is checked now, not at the first question
    return Artifact(
        program_state=data["program"],
        thresholds=data["thresholds"],
        lm=data.get("lm") or "",
        kg=data.get("kg") if isinstance(data.get("kg"), str) else None,
        dataset=data.get("dataset"),
        split=data.get("split"),
        optimizer=data.get("optimizer"),
        scores=data.get("scores") or {},
        tuning=data.get("tuning") or {},
        stages=data.get("stages") or "paper",
        versions=data.get("versions") or {},
        created=data.get("created") or "",
        knn=data.get("knn") or None,
        adapter=data.get("adapter") or None,
        path=path,
    )
