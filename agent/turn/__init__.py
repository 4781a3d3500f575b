"""The life of one turn: its plan rows, budget, lineage, approval, question, ledgers, outcome
and progress."""
