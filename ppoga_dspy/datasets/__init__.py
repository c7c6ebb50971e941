"""Benchmark datasets read into one shape: every loader returns `dspy.Example`s with `question`, `topic_entities`,
`answers` and the gold path in `metadata` (`examples.py` builds them, splits and draws them), so the program, the
evaluation and the optimizers never look at a file format. `loaders.py` holds the `FORMAT:PATH` specs and the
small formats (PathQuestion, WC2014, CWQ, WebQSP, GrailQA, SimpleQA, QALD-10, the demo); datasets with their own
KG have a module each (`metaqa.py`: templates, gold paths, the reachable ceiling; `nsm.py`: per-question Freebase
subgraphs). May import `errors`, `text`, `kg` and `data`; nothing that runs or scores the method.
"""
