"""Test helpers that are part of the public API: KG server fixtures and the KnowledgeGraph contract suite.

A user adding a KG backend runs the same contract tests as the built-in engines
(`ppoga_dspy.testing.contract.KnowledgeGraphContract`). `ppoga_dspy.testing.faults` holds loopback LM
and SPARQL servers that fail on purpose (hang, HTTP 500, garbage, huge replies, ...), standard library only.
The fixtures and the contract suite need pytest.
"""
