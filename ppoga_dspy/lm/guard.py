"""`GuardedLM`: a `dspy.LM` that bounds every call, caches by endpoint and engine, and never caches a bad reply.

DSPy's own response cache keys a request by model name and messages only: it ignores `api_base`,
so two servers serving "openai/m" share replies, and it stores every reply, so an empty or
unparseable reply is replayed forever. `GuardedLM` turns DSPy's cache off for its calls and keeps
its own entries in the same store (`dspy.cache`, memory and disk) under a key that adds

* the endpoint (the base URL, or "provider-default"), and
* the engine's identity (the engine spec, or a custom engine's class path and `dump_state()`).

A reply is stored only when it is acceptable: not empty, not cut by the reply cap, and, when the
call runs inside `reply_scope()` (the program's `QuestionRun.call` opens one per predictor call),
only after the caller says the reply parsed (`ReplyScope.commit`); a reply the adapter could not
parse is dropped (`ReplyScope.discard`). Of several calls in one scope (ChatAdapter, then its JSON
fallback) only the last, the one that parsed, is stored.

Every call is bounded: `timeout` seconds per attempt, a total deadline over connecting, the headers and the
whole body (DSPy's `timeout` client setting bounds each socket wait only, so a server that sends its headers
and then one byte a second held a request for minutes; `_within_deadline` runs a remote attempt in a daemon
thread and stops waiting for it at the deadline, the thread ends when the socket does), then `retries` more
attempts for transient errors with exponential backoff (`backoff`, doubling, capped at `MAX_BACKOFF`); after
that the error propagates (the program turns it into a failed question of kind "lm"). DSPy's own retries are off
(`num_retries=0` on the DSPy side) so the budget is exactly `(retries + 1) * timeout + backoffs`.

Replies longer than `reply_cap(max_tokens)` characters (`CHARS_PER_TOKEN * max_tokens *
CAP_FACTOR`) are cut before any parsing; the scope records the cut for the trace.

A circuit breaker stops a run from waiting out a dead server once per question: after `breaker`
consecutive calls that each ran out of retries (default 2), the LM is marked down and every later
call fails at once with `LMUnavailableError` (0 disables the breaker). One reply resets the count.

Once a run is told to stop (`stop_waiting()`: Ctrl-C or SIGTERM in `ppoga eval`, whose questions in flight are
still written), attempts get at most `STOP_GRACE` seconds more and no retry, so a trickling server cannot hold
the run's end.

Usage figures are a hint (`lm/usage.py`): coerced or dropped, never a reason to fail a reply.

`stats` (shared by copies) counts calls, cache hits, retries and cut replies; `ppoga ask` prints
the cache hits.
"""

from __future__ import annotations

import contextvars
import copy
import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import dspy

log = logging.getLogger(__name__)

CACHE_KEY_VERSION = "ppoga_dspy.lm.guard/1"
CHARS_PER_TOKEN = 4
CAP_FACTOR = 2
DEFAULT_REPLY_TOKENS = 1024
MAX_BACKOFF = 8.0
#: Seconds an attempt in flight may still take once the run is stopping (`stop_waiting`).
STOP_GRACE = 2.0
#: Keys that never change what a model answers, or that the key carries in another form.
_NOT_IN_KEY = {"api_key", "api_base", "base_url", "timeout", "cache", "num_retries", "headers", "extra_headers"}


#: Cache entries are {_REPLY: outputs, "usage": {...}}; older entries are the outputs alone.
_REPLY = "ppoga_reply"


class AttemptTimeout(TimeoutError):
    """An attempt ran past its total deadline (or past the grace once the run is stopping)."""


_stopping_since: list[float] = []  # monotonic time of stop_waiting(), while the run is stopping
_stop_lock = threading.Lock()


def stop_waiting() -> None:
    """The run is stopping: attempts in flight get `STOP_GRACE` seconds more, later ones none, and no retries."""
    with _stop_lock:
        if not _stopping_since:
            _stopping_since.append(time.monotonic())


def resume_waiting() -> None:
    """The stop is over (the run that asked for it has ended): attempts get their full deadline again."""
    with _stop_lock:
        _stopping_since.clear()


def _stop_deadline() -> float | None:
    with _stop_lock:
        return _stopping_since[0] + STOP_GRACE if _stopping_since else None


def _within_deadline(call: Any, seconds: float, what: str) -> Any:
    """`call()` in a daemon thread (with the caller's context: DSPy settings, usage tracker, reply scope), waited
    for at most `seconds` in total, or until the stop grace ends; `AttemptTimeout` when it is not done by then.

    The abandoned thread is left to end with its socket (the engine's per-read timeout still bounds each wait);
    nothing waits for it and its reply is dropped."""
    box: dict[str, Any] = {}
    done = threading.Event()
    context = contextvars.copy_context()

    def run() -> None:
        try:
            box["value"] = context.run(call)
        except BaseException as exc:  # handed to the waiting caller
            box["error"] = exc
        finally:
            done.set()

    deadline = time.monotonic() + seconds
    stop = _stop_deadline()
    if stop is not None and time.monotonic() >= stop:
        raise AttemptTimeout(f"{what}: the run is stopping; not sent")
    threading.Thread(target=run, name="ppoga-lm-attempt", daemon=True).start()
    while not done.wait(min(0.2, max(0.0, deadline - time.monotonic()))):
        stop = _stop_deadline()
        now = time.monotonic()
        if now >= deadline or (stop is not None and now >= stop):
            raise AttemptTimeout(f"{what}: no whole reply within {seconds:g}s (timed out)")
    if "error" in box:
        raise box["error"]
    return box["value"]


def reply_cap(max_tokens: int | None) -> int:
    """The most characters of a reply that are parsed: 4 characters a token, twice the budget."""
    return CHARS_PER_TOKEN * CAP_FACTOR * int(max_tokens or DEFAULT_REPLY_TOKENS)


@dataclass
class LMCallStats:
    """Counters of one LM and its copies; shared, never deep-copied (optimizers copy programs)."""

    calls: int = 0
    cache_hits: int = 0
    retries: int = 0
    truncated: int = 0
    failed_in_a_row: int = 0  # calls that ran out of retries, since the last call that got a reply
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, **counts: int) -> None:
        with self._lock:
            for name, value in counts.items():
                setattr(self, name, getattr(self, name) + value)

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return {"calls": self.calls, "cache_hits": self.cache_hits, "retries": self.retries,
                    "truncated": self.truncated}

    def __deepcopy__(self, memo: dict) -> LMCallStats:
        return self

    def __getstate__(self) -> dict[str, Any]:  # picklable (worker processes): the lock is not
        return {k: v for k, v in self.__dict__.items() if k != "_lock"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()


@dataclass
class ReplyScope:
    """What the LM calls inside one `reply_scope()` did: replies waiting to be cached, hits, cuts."""

    pending: list[tuple[dict[str, Any], Any]] = field(default_factory=list)
    cache_hits: int = 0
    truncations: list[dict[str, int]] = field(default_factory=list)
    settled: bool = False

    def commit(self) -> None:
        """The reply parsed: store the last pending reply (the one that was used), drop the rest."""
        if not self.settled and self.pending:
            key, value = self.pending[-1]
            dspy.cache.put(key, value, [])
        self.pending.clear()
        self.settled = True

    def discard(self) -> None:
        """The reply failed validation: store nothing."""
        self.pending.clear()
        self.settled = True


_scope: ContextVar[ReplyScope | None] = ContextVar("ppoga_reply_scope", default=None)


@contextmanager
def reply_scope() -> Iterator[ReplyScope]:
    """Collect the LM calls made inside; nothing they return is cached until `commit()` (discarded if never)."""
    scope = ReplyScope()
    token = _scope.set(scope)
    try:
        yield scope
    finally:
        _scope.reset(token)
        if not scope.settled:
            scope.discard()


def engine_identity(engine: Any) -> Any:
    """What distinguishes one engine from another in the cache key (never a secret)."""
    if isinstance(engine, str):
        return engine
    cls = f"{type(engine).__module__}:{type(engine).__qualname__}"
    named = getattr(engine, "cache_identity", None)
    if named is not None:
        return [cls, named() if callable(named) else named]
    dump = getattr(engine, "dump_state", None)
    if callable(dump):
        try:
            return [cls, dump()]
        except Exception:  # an engine that cannot describe itself is keyed by its object
            pass
    return [cls, f"object-{id(engine)}"]


def _texts(outputs: Any) -> list[str]:
    out = []
    for item in outputs if isinstance(outputs, list) else [outputs]:
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict):
            out.append(str(item.get("text") or ""))
    return out


def _cleaned(outputs: Any) -> Any:
    """Outputs with every text through the incoming-text rule (`ppoga_dspy.text.clean`): a lone surrogate,
    NUL or escape sequence in a reply never reaches the parser, the cache, a run file or a terminal."""
    from ppoga_dspy.text import clean

    if not isinstance(outputs, list):
        return outputs
    out = []
    for item in outputs:
        if isinstance(item, str):
            item = clean(item)
        elif isinstance(item, dict):
            item = {k: clean(v) if isinstance(v, str) and k in ("text", "reasoning_content") else v
                    for k, v in item.items()}
        out.append(item)
    return out


def _cap(outputs: Any, cap: int) -> tuple[Any, list[dict[str, int]]]:
    """Outputs with every text cut to `cap` characters, and a note per cut."""
    if not isinstance(outputs, list):
        return outputs, []
    notes, capped = [], []
    for item in outputs:
        if isinstance(item, str) and len(item) > cap:
            notes.append({"chars": len(item), "kept": cap})
            item = item[:cap]
        elif isinstance(item, dict) and isinstance(item.get("text"), str) and len(item["text"]) > cap:
            notes.append({"chars": len(item["text"]), "kept": cap})
            item = {**item, "text": item["text"][:cap]}
        capped.append(item)
    return capped, notes


def is_transient(exc: BaseException) -> bool:
    """Worth another attempt: DSPy's own classification (transport errors, timeouts, 429, 5xx)."""
    from dspy.utils.exceptions import is_retryable_lm_error

    return is_retryable_lm_error(exc)


class GuardedLM(dspy.LM):
    """A `dspy.LM` with a per-attempt timeout, bounded retries, an endpoint-aware cache and a reply cap.

    Build it with `ppoga_dspy.lm.make_lm`; `cache`, `retries`, `timeout` and `backoff` are its own
    settings (`num_retries` is accepted as another name for `retries`).
    """

    def __init__(
        self,
        model: str,
        *,
        retries: int = 3,
        backoff: float = 0.5,
        breaker: int = 2,
        cache: bool = True,
        num_retries: int | None = None,
        **kwargs: Any,
    ) -> None:
        retries = num_retries if num_retries is not None else retries
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ValueError("retries must be a nonnegative integer")
        super().__init__(model, cache=cache, num_retries=0, **kwargs)
        from ppoga_dspy.lm.usage import install

        install()  # usage figures are a hint (lm/usage.py)
        self.retries = retries
        self.backoff = backoff
        self.breaker = breaker
        self.stats = LMCallStats()

    def copy(self, **kwargs: Any) -> GuardedLM:
        retries = kwargs.pop("num_retries", kwargs.pop("retries", None))
        copied = super().copy(**kwargs)
        if retries is not None:
            copied.retries = retries
        copied.num_retries = 0
        return copied

    def dump_state(self) -> dict[str, Any]:
        """DSPy's state, with our retry count where DSPy keeps its own (0 on the DSPy side)."""
        state = super().dump_state()
        state["num_retries"] = self.retries  # backoff/breaker stay defaults: a plain dspy.LM would send them
        return state

    # -- the cache key -------------------------------------------------------------------------
    def endpoint(self) -> str:
        """Where requests go: the base URL, or the provider's default endpoint."""
        return str(self.kwargs.get("api_base") or self.kwargs.get("base_url") or "provider-default")

    def cache_key(self, prompt: Any, messages: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
        merged = {k: v for k, v in {**self.kwargs, **kwargs}.items() if k not in _NOT_IN_KEY}
        return {
            "_fn_identifier": CACHE_KEY_VERSION,
            "model": self.model,
            "model_type": self.model_type,
            "endpoint": self.endpoint(),
            "engine": engine_identity(self._engine_spec),
            "messages": messages if messages is not None else [{"role": "user", "content": prompt}],
            "settings": merged,
        }

    # -- the call ------------------------------------------------------------------------------
    def __call__(self, prompt: Any = None, *, messages: Any = None, **kwargs: Any) -> Any:
        use_cache = bool(kwargs.pop("cache", self.cache))
        if kwargs.get("request") is not None or not isinstance(prompt, (str, type(None))):
            return super().__call__(prompt, messages=messages, cache=False, **kwargs)  # typed lm15 requests
        scope = _scope.get()
        key = self.cache_key(prompt, messages, kwargs) if use_cache else None
        if key is not None:
            hit = dspy.cache.get(key, [])
            if hit is not None:
                self.stats.add(calls=1, cache_hits=1)
                if scope is not None:
                    scope.cache_hits += 1
                return _cleaned(self._replay(hit))  # an entry cached before the rule existed
        outputs = _cleaned(self._attempts(prompt, messages, kwargs))
        outputs, cuts = _cap(outputs, reply_cap(kwargs.get("max_tokens") or self.kwargs.get("max_tokens")))
        self.stats.add(calls=1, truncated=len(cuts))
        if scope is not None:
            scope.truncations.extend(cuts)
        acceptable = not cuts and all(t.strip() for t in _texts(outputs)) and bool(_texts(outputs))
        if key is not None and acceptable:
            entry = {_REPLY: copy.deepcopy(outputs), "usage": self._last_usage()}
            if scope is not None:
                scope.pending.append((key, entry))
            else:
                dspy.cache.put(key, entry, [])
        return outputs

    def _last_usage(self) -> dict[str, Any]:
        """The token usage of the call just made (DSPy's history), kept with its cache entry."""
        history = getattr(self, "history", None) or []
        usage = history[-1].get("usage") if history and isinstance(history[-1], dict) else None
        from ppoga_dspy.lm.usage import hinted

        return hinted(usage) if isinstance(usage, dict) else {}

    def _replay(self, hit: Any) -> Any:
        """A cached reply, its tokens counted again (a replay costs the tokens its first call did in the
        cost tables, so a cached run and a fresh one report the same tokens per question)."""
        if isinstance(hit, dict) and _REPLY in hit:
            from ppoga_dspy.lm.usage import hinted

            usage = hinted(hit.get("usage") or {})
            if usage and dspy.settings.usage_tracker:
                dspy.settings.usage_tracker.add_usage(self.model, dict(usage))
            return copy.deepcopy(hit[_REPLY])
        return copy.deepcopy(hit)  # an entry written before usage was kept

    def _attempts(self, prompt: Any, messages: Any, kwargs: dict[str, Any]) -> Any:
        from ppoga_dspy.lm.errors import LMUnavailableError

        down = self.stats.failed_in_a_row
        if self.breaker and down >= self.breaker:
            raise LMUnavailableError(
                f"the LM {self.model} at {self.endpoint()} is marked down after {down} calls in a row failed; "
                "start it again, then resume the run: rerun the same `ppoga eval` command with --retry-failed "
                "(finished questions are kept, the failed ones run again)"
            )
        for attempt in range(self.retries + 1):
            try:
                outputs = self._one_attempt(prompt, messages, kwargs)
                self.stats.failed_in_a_row = 0
                return outputs
            except Exception as exc:
                if not isinstance(exc, AttemptTimeout) and not is_transient(exc):
                    raise
                if attempt >= self.retries or _stop_deadline() is not None:
                    self.stats.add(failed_in_a_row=1)
                    raise self._unavailable(exc, attempt + 1) from exc
                delay = min(self.backoff * (2**attempt), MAX_BACKOFF)
                hint = getattr(exc, "retry_after", None)
                if isinstance(hint, (int, float)) and 0 < hint <= MAX_BACKOFF:
                    delay = float(hint)
                log.info("LM %s attempt %d failed (%s); retrying in %.1fs", self.model, attempt + 1,
                         type(exc).__name__, delay)
                self.stats.add(retries=1)
                time.sleep(delay)
        raise AssertionError("unreachable")

    def _one_attempt(self, prompt: Any, messages: Any, kwargs: dict[str, Any]) -> Any:
        """One request; a remote one (a named engine: lm15 or LiteLLM over HTTP) within its total deadline.

        An in-process engine (the embedded model, a scripted planner) is called directly: abandoning it in a
        thread would leave it computing, and it has no socket to trickle."""
        def attempt() -> Any:
            return super(GuardedLM, self).__call__(prompt, messages=messages, cache=False, **kwargs)

        timeout = kwargs.get("timeout", self.kwargs.get("timeout"))
        remote = isinstance(self._engine_spec, str)
        if not remote or isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
            return attempt()
        return _within_deadline(attempt, float(timeout), f"{self.model} at {self.endpoint()}")

    def _unavailable(self, exc: Exception, tries: int) -> Exception:
        from ppoga_dspy.lm.errors import LMUnavailableError

        timeout = self.kwargs.get("timeout")
        within = f"{timeout:g}s" if isinstance(timeout, (int, float)) else "its timeout"
        timed_out = "timed out" in str(exc).lower() or "timeout" in type(exc).__name__.lower()
        where = f"{self.model} at {self.endpoint()}"
        if timed_out:
            return LMUnavailableError(
                f"the LM {where} did not answer within {within}, {tries} tries; check that the server is up "
                "and serving this model, or raise --lm-timeout / --lm-retries"
            )
        from ppoga_dspy.text import for_terminal

        reason = for_terminal(str(exc).strip().splitlines()[0][:200]) if str(exc).strip() else type(exc).__name__
        return LMUnavailableError(
            f"the LM {where} failed {tries} tries (last: {reason}); check the server, or raise --lm-retries"
        )

    async def acall(self, prompt: Any = None, *, messages: Any = None, **kwargs: Any) -> Any:
        """Async calls go straight to DSPy, uncached (DSPy's cache would ignore the endpoint)."""
        kwargs.pop("cache", None)
        return await super().acall(prompt, messages=messages, cache=False, **kwargs)
