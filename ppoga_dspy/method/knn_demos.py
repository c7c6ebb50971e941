"""Nearest-neighbour demos, the runtime half of `--optimizer knn` (`optimizers/knn.py` builds the pool): each
predictor is shown the teacher's stages of the training questions nearest to the current question.

A small model copies its demonstrations. Fixed demos (bootstrap) make it copy the wrong plan for a
question of another template ("follow relation plays_position" for "what is the age of NEYMAR?");
demos from the nearest training questions give it the plan, relations and answers of a question of
the same template, which is the right thing to copy.

- **Pool** (`DemoPool`): the training questions the teacher answered right, their MiniLM embeddings
  (the embedder the Executor already ranks with), and per predictor the teacher's stage records, each
  naming its question by index: the question text is stored once, not once per stage.
- **Runtime** (`KNNPredict`): a `dspy.Predict` that, when called without explicit `demos`, passes
  one demo from each of the `k` nearest pool questions for its own stage (that question's record of
  the stage most like this call) as the call's `demos=` argument. The
  demos are a function of the call's own `question` input, never state set on the shared predictor,
  so parallel evaluation threads cannot see each other's demos. Nearest demos come last, next to the
  question the model answers.

DSPy's `KNNFewShot` shows the idea but bootstraps a whole program per question at run time (a teacher
run for every test question) and keeps nothing to save; here the pool is made once, at compile time,
and travels inside the artifact.
"""

from __future__ import annotations

import base64
import re
import threading
from dataclasses import dataclass, field, replace
from typing import Any

import dspy

from ppoga_dspy.errors import ArtifactError, ConfigError
from ppoga_dspy.method.demo_trim import DemoTrim

EMBEDDER = "all-MiniLM-L6-v2"
POOL_FORMAT = "ppoga-dspy/knn-pool/1"
#: The width of EMBEDDER's vectors: a pool whose vectors have another width cannot be ranked against a question.
EMBEDDING_WIDTH = 384
#: Demos per predictor a pool may give: more only lengthens every prompt (a k of a billion put every demo in).
MAX_K = 32


_WORD = re.compile(r"[^\s?,.!;:]+|[?,.!;:]")


def question_template(question: str) -> str:
    """The question with its names masked: "Where was the director of The Dark Knight born?" ->
    "Where was the director of X born?".

    Neighbours are found by template, not by topic: a copying model needs the demo of a question asked
    the same way about another entity, while raw embeddings rank "Who is the wife of the director of
    Inception?" nearest to "Where was the director of Inception born?" because both name Inception.
    A name is a capitalised word after the first, an all-caps word, or a word with `_` (IRN names).

    >>> question_template("Where was the director of The Dark Knight born?")
    'Where was the director of X born ?'
    >>> question_template("what is the age of NEYMAR?"), question_template("who is robert_e_lee's spouse")
    ('what is the age of X ?', "who is X's spouse")
    """
    out: list[str] = []
    for position, word in enumerate(_WORD.findall(question)):
        stem = word[:-2] if word.endswith("'s") else word
        if position > 0 and stem and (stem[0].isupper() or "_" in stem):
            if out and out[-1] == "X":  # one X for a name of several words
                out.pop()
            out.append("X" + word[len(stem):])
        else:
            out.append(word)
    return " ".join(out)


def embed_questions(questions: list[str]):
    """Unit-length MiniLM embeddings (float32, one row per question) of the questions' templates
    (`question_template`), with the model the Executor ranks with."""
    import numpy as np

    from ppoga_dspy.method.pruning import EmbeddingRanker

    if not questions:
        return np.zeros((0, EMBEDDING_WIDTH), dtype=np.float32)
    questions = [question_template(q) for q in questions]
    vectors = EmbeddingRanker.model().encode(questions, normalize_embeddings=True, batch_size=64,
                                             show_progress_bar=False)
    return np.asarray(vectors, dtype=np.float32)


@dataclass
class DemoPool:
    """Training questions, their embeddings, and per predictor the teacher's stages as (question index, fields).

    Immutable once built and shared by every copy of the program (deep copies return the same pool).
    """

    questions: list[str]
    embeddings: Any  # numpy float32 (n, d), rows unit length
    records: dict[str, list[tuple[int, dict[str, Any]]]]
    k: int = 3
    teacher: str = ""
    embedder: str = EMBEDDER
    trim: DemoTrim = field(default_factory=DemoTrim)
    #: The KG (`artifact.kg_label`) each question was answered on, parallel to `questions`; [] when not recorded
    #: (pools of one compile, whose artifact names its KG).
    graphs: list[str] = field(default_factory=list)
    _cache: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def __deepcopy__(self, memo: dict) -> DemoPool:
        return self

    def __getstate__(self) -> dict[str, Any]:
        """Pickled (`save_program=True`) without its lock and embedding cache, which are per process."""
        return {k: v for k, v in self.__dict__.items() if k not in ("_cache", "_lock")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, _cache={}, _lock=threading.Lock())

    @classmethod
    def from_traces(cls, traces: list[Any], *, k: int, teacher: str = "", trim: DemoTrim | None = None) -> DemoPool:
        """One pool question per trace (`optimizers.traces.QuestionTrace`: `question`, `stages`); duplicate
        question texts keep their first trace."""
        if not 1 <= k <= MAX_K:
            raise ConfigError(f"--k {k}: give 1 to {MAX_K} demos per predictor")
        questions: list[str] = []
        records: dict[str, list[tuple[int, dict[str, Any]]]] = {}
        seen: set[str] = set()
        for trace in traces:
            if trace.question in seen:
                continue
            seen.add(trace.question)
            index = len(questions)
            questions.append(trace.question)
            for stage in trace.stages:
                fields = {k_: v for k_, v in {**stage.inputs, **stage.outputs}.items()
                          if not (k_ == "question" and v == trace.question)}  # stored once, in `questions`
                records.setdefault(stage.predictor, []).append((index, fields))
        # rounded to float16 now, as stored, so the compiled program and its reloaded artifact rank alike
        embeddings = embed_questions(questions).astype("float16").astype("float32")
        return cls(questions=questions, embeddings=embeddings, records=records, k=k, teacher=teacher,
                   trim=trim or DemoTrim())

    def _derived(self, **changes: Any) -> DemoPool:
        """A pool made from this one: the fields changed, its own demo cache and lock (never shared)."""
        return replace(self, _cache={}, _lock=threading.Lock(), **changes)

    def answered_on(self, label: str) -> DemoPool:
        """This pool with every question marked as answered on the KG `label` (a compile's own pool)."""
        return self._derived(graphs=[label] * len(self.questions))

    def merged(self, other: DemoPool) -> DemoPool:
        """This pool's questions, then `other`'s (a question both hold keeps this pool's records); `other`'s k and
        trim. Both must say which KG each question was answered on, so the merged pool can show a KG its own."""
        import numpy as np

        if len(self.graphs) != len(self.questions) or len(other.graphs) != len(other.questions):
            raise ConfigError("a knn pool merged with another must record the KG of each question: compile each "
                              "with this ppoga-dspy version")
        if self.embedder != other.embedder:
            raise ConfigError(f"the two knn pools rank with different embedders ({self.embedder}, {other.embedder})")
        seen = set(self.questions)
        taken = [i for i, q in enumerate(other.questions) if q not in seen]
        index = {old: len(self.questions) + new for new, old in enumerate(taken)}
        records = {name: list(stage) for name, stage in self.records.items()}
        for name, stage in other.records.items():
            records.setdefault(name, []).extend((index[i], fields) for i, fields in stage if i in index)
        embeddings = np.concatenate([self.embeddings, other.embeddings[taken]]) if taken else self.embeddings
        return self._derived(questions=self.questions + [other.questions[i] for i in taken], embeddings=embeddings,
                             records=records, k=other.k, teacher=other.teacher or self.teacher, trim=other.trim,
                             graphs=self.graphs + [other.graphs[i] for i in taken])

    def only(self, label: str) -> DemoPool:
        """The questions answered on the KG `label`, when the pool holds any; else the whole pool.

        A small model copies its demos' names, and only the KG's own names lead anywhere on it: a footballer's
        plan that copies a film graph's `film.film.directed_by` follows nothing. Where the pool holds no question of
        this KG, every question stays (and the artifact says, once, that its demos are another graph's)."""
        keep = [i for i, graph in enumerate(self.graphs) if graph == label]
        if not keep or len(keep) == len(self.questions):
            return self
        index = {old: new for new, old in enumerate(keep)}
        records = {name: [(index[i], fields) for i, fields in stage if i in index]
                   for name, stage in self.records.items()}
        return self._derived(questions=[self.questions[i] for i in keep], embeddings=self.embeddings[keep],
                             records={name: stage for name, stage in records.items() if stage},
                             graphs=[label] * len(keep))

    def without_graph_names(self) -> DemoPool:
        """This pool with its graph's relation names out of the demos' free text, for a KG it holds no question of:
        the plan's shape transfers, another graph's names do not (`method/demo_transfer.py`)."""
        from ppoga_dspy.method.demo_transfer import without_graph_names

        return self._derived(records=without_graph_names(self.records))

    # -- selection ------------------------------------------------------------------------------

    def _vector(self, question: str):
        with self._lock:
            found = self._cache.get(question)
        if found is None:
            found = embed_questions([question])[0]
            with self._lock:
                if len(self._cache) > 10_000:
                    self._cache.clear()
                self._cache[question] = found
        return found

    def nearest(self, question: str) -> list[int]:
        """Pool question indices, most similar first (ties: lower index first, so runs are reproducible)."""
        import numpy as np

        if not self.questions:
            return []
        scores = self.embeddings.astype(np.float32) @ self._vector(question)
        return [int(i) for i in np.argsort(-scores, kind="stable")]

    def demos(self, predictor: str, inputs: dict[str, Any]) -> list[dspy.Example]:
        """`k` demos of `predictor` for a call with these `inputs`: one from each of the `k` nearest questions.

        Of a neighbour's records for this stage (a question walks several hops, so it calls
        `select_relations` more than once) the one whose other inputs agree most with this call's, field by
        field (`_agreement`), is taken: the hop-2 demo for a hop-2 call, the last step's for the last step's.
        The nearest question's demo comes last. Its inputs are cut by the pool's `trim`.
        """
        stage = self.records.get(predictor)
        question = inputs.get("question")
        if not stage or not question:
            return []
        by_question: dict[int, list[dict[str, Any]]] = {}
        for index, fields in stage:
            by_question.setdefault(index, []).append(fields)
        names = [k for k in inputs if k != "question"]
        words = [_words(inputs[k]) for k in names]
        chosen: list[dspy.Example] = []
        for index in self.nearest(question):
            options = by_question.get(index)
            if not options:
                continue
            best = max(options, key=lambda f: _agreement(words, [_words(f.get(k)) for k in names]))
            values = self.trim.apply(best, names)
            values.setdefault("question", self.questions[index])
            chosen.append(dspy.Example(**values))
            if len(chosen) == self.k:
                break
        return list(reversed(chosen))

    # -- storage --------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """Compact JSON: questions once, embeddings once as float16 base64, stage records by question index."""
        import numpy as np

        matrix = np.ascontiguousarray(self.embeddings, dtype=np.float16)
        return {
            "format": POOL_FORMAT,
            "k": self.k,
            "teacher": self.teacher,
            "embedder": self.embedder,
            "trim": self.trim.to_dict(),
            "questions": self.questions,
            "embeddings": {"dtype": "float16", "shape": list(matrix.shape),
                           "base64": base64.b64encode(matrix.tobytes()).decode("ascii")},
            "records": {name: [[index, fields] for index, fields in stage] for name, stage in self.records.items()},
            **({"graphs": self.graphs} if self.graphs else {}),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DemoPool:
        import numpy as np

        if not isinstance(data, dict) or data.get("format") != POOL_FORMAT:
            found = data.get("format") if isinstance(data, dict) else None
            raise ArtifactError(f"the artifact's knn pool has format {found!r}, expected {POOL_FORMAT!r}; "
                                "compile it again with this ppoga-dspy version")
        try:
            stored = data["embeddings"]
            raw = base64.b64decode(stored["base64"])
            matrix = np.frombuffer(raw, dtype=np.float16).reshape(stored["shape"]).astype(np.float32)
            questions = [str(q) for q in data["questions"]]
            records = {str(name): [(int(i), dict(f)) for i, f in stage] for name, stage in data["records"].items()}
            graphs = [str(g) for g in data.get("graphs") or []]
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ArtifactError(f"the artifact's knn pool is damaged ({type(exc).__name__}: {exc}); "
                                "compile it again") from exc
        if matrix.ndim != 2 or matrix.shape[1] != EMBEDDING_WIDTH or not np.isfinite(matrix).all():
            raise ArtifactError(f"the knn pool's vectors have shape {list(matrix.shape)}, not (n, {EMBEDDING_WIDTH}) "
                                f"finite numbers as {EMBEDDER} writes them; compile it again")
        k = data.get("k", 3)
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
            raise ArtifactError(f"the knn pool's k is {k!r}; it must be a whole number from 1 to {MAX_K}")
        if matrix.shape[0] != len(questions):
            raise ArtifactError(f"the knn pool has {len(questions)} questions but {matrix.shape[0]} embeddings; "
                                "compile it again")
        if graphs and len(graphs) != len(questions):
            raise ArtifactError(f"the knn pool names the KG of {len(graphs)} questions, not of its {len(questions)}; "
                                "compile it again")
        bad = [i for stage in records.values() for i, _ in stage if not 0 <= i < len(questions)]
        if bad:
            raise ArtifactError(f"the knn pool names question {bad[0]}, outside its {len(questions)} questions")
        return cls(questions=questions, embeddings=matrix, records=records, k=k,
                   teacher=str(data.get("teacher", "")), embedder=str(data.get("embedder", EMBEDDER)),
                   trim=DemoTrim.from_dict(data.get("trim")), graphs=graphs)


def _words(value: Any) -> set[str]:
    import json

    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return set(re.findall(r"[\w.]+", text.casefold())) - {"null"}


def _agreement(call: list[set[str]], record: list[set[str]]) -> float:
    """How far a record's inputs agree with a call's: the sum over fields of their words' Jaccard overlap (two empty
    fields agree). Earlier records win ties (max keeps the first).

    Field by field, not one bag of all words: a record with a long observation (a step that reached twenty
    actors) shares many words with any call of its question, and in one bag its twenty names diluted the match
    of the short fields that say where the walk is (the step, the next step, the candidates). Picked that way,
    the last step's call was shown first-step demos and, copying them, wrote "proceed" and no answers.
    """
    return sum(len(a & b) / len(a | b) if a or b else 1.0 for a, b in zip(call, record, strict=True))


class KNNPredict(dspy.Predict):
    """A `dspy.Predict` whose demos, when the caller gives none, are the pool's nearest for this call's question.

    It saves and loads exactly as `dspy.Predict` (the pool is stored beside the program state, not
    in it), so an artifact's program state fits a plain program too.
    """

    def __init__(self, signature: Any, *, pool: DemoPool, name: str, **config: Any) -> None:
        super().__init__(signature, **config)
        self.pool = pool
        self.pool_name = name

    def forward(self, **kwargs: Any) -> Any:
        if "demos" not in kwargs:
            kwargs["demos"] = self.pool.demos(self.pool_name, kwargs) or self.demos
        return super().forward(**kwargs)

    async def aforward(self, **kwargs: Any) -> Any:
        if "demos" not in kwargs:
            kwargs["demos"] = self.pool.demos(self.pool_name, kwargs) or self.demos
        return await super().aforward(**kwargs)


def install_pool(program: Any, pool: DemoPool) -> Any:
    """Replace each of `program`'s predictors by a KNNPredict over `pool` (in place; returns the program).

    The replacement keeps the predictor's signature (instructions included), config, LM and saved
    demos (used when the pool has no record for that stage).
    """
    for name, predictor in list(program.named_predictors()):
        if isinstance(predictor, KNNPredict):
            predictor.pool = pool
            continue
        _replace(program, name, predictor, KNNPredict(predictor.signature, pool=pool, name=name, **predictor.config))
    return program


def _replace(program: Any, name: str, old: Any, new: Any) -> None:
    """Put `new` where the predictor `old` stood (its dotted attribute path `name`), with `old`'s state and LM."""
    new.load_state(old.dump_state())
    new.lm = old.lm
    parent = program
    *path, attribute = name.split(".")
    for part in path:
        parent = getattr(parent, part)
    setattr(parent, attribute, new)


def uninstall_pool(program: Any) -> Any:
    """Replace each KNNPredict of `program` by a plain `dspy.Predict` with the same state (in place).

    Loading a state that carries no pool into a program that has one must not leave the old pool
    answering: the loaded program is the saved one, not a mix.
    """
    for name, predictor in list(program.named_predictors()):
        if not isinstance(predictor, KNNPredict):
            continue
        _replace(program, name, predictor, dspy.Predict(predictor.signature, **predictor.config))
    return program


def pool_of(program: Any) -> DemoPool | None:
    """The pool a program's predictors select from, or None for a program without nearest-neighbour demos."""
    for _, predictor in program.named_predictors():
        if isinstance(predictor, KNNPredict):
            return predictor.pool
    return None
