"""The PostgreSQL server fixture for the shared-study tests (started once per session, on loopback)."""

from ppoga_dspy.testing.postgres import postgres_server  # noqa: F401  (a pytest fixture)
