"""Stage, StageMode, Decision, Role and StepAction: the method's vocabulary, each defined once.

Defined in `ppoga_dspy.signatures.vocabulary` (the signatures speak it and may import nothing of
the method); import it from here everywhere else: the cycle, the trace, the cost counters, the CLI.
"""

from ppoga_dspy.signatures.vocabulary import Decision, DecisionName, Role, Stage, StageMode, StepAction

__all__ = ["Decision", "DecisionName", "Role", "Stage", "StageMode", "StepAction"]
