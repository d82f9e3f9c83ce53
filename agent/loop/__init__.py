"""The per-shape loop: propose, compile, evaluate and archive one shape's candidates until its budget is spent."""
