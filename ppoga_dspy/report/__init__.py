"""Showing runs after the fact: `reasoning.py` reads a row's trace back into step cycles, `data.py` and `plots.py`
gather and draw a run's figures, `html.py` (with `report.css`, `report.js`) writes the offline HTML page,
`compare.py` puts runs side by side and `stats.py` gives the intervals and paired tests behind it. May import
`errors`, `text`, `kg` and `evaluation` (its run format and summaries); it never runs the program.
"""
