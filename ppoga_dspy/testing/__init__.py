"""Test helpers that are part of the public API: KG server fixtures and the KnowledgeGraph contract suite.

A user adding a KG backend runs the same contract tests as the built-in engines
(`ppoga_dspy.testing.contract.KnowledgeGraphContract`). Importing this package needs pytest.
"""
