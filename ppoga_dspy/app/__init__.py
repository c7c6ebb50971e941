"""The library's front door: settings in, a ready PPoGA program out (KG opened, role LMs bound, artifact applied).

The CLI, notebooks and benchmarks all start here, so "which KG, which LMs, which compiled program,
which thresholds" means the same thing everywhere:

    from ppoga_dspy.app import ProgramSettings, open_program
    with open_program(ProgramSettings(kg="data.nt", lm="openai/gpt-4o-mini")) as opened:
        print(opened.program(question="...").answer)
"""

from ppoga_dspy.app.session import OpenedProgram, ProgramSettings, default_kg_path, open_program, thresholds_with

__all__ = ["OpenedProgram", "ProgramSettings", "default_kg_path", "open_program", "thresholds_with"]
