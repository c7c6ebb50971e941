"""Running the program over a dataset and scoring what it did: `evaluate.py` (one JSONL row per question, resume,
summaries), `runs.py` (reading and checking run files), `row_reasoning.py` (what a row keeps of the reasoning),
`shards.py` (a run split across processes), `metrics.py` (Hits@1 strict and PoG's rule, F1), `pog_runs.py` (PoG's
released outputs scored by the same rules), and the cuts that say where a question was lost (`instruments.py`,
`miss_stages.py`). May import `errors`, `text`, `kg`, `signatures`, `lm`, `method` and `datasets`; never the report
or the scripted planners (a run is scored the same whoever answered it).
"""
