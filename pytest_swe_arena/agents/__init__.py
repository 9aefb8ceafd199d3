"""Each agent's formats, one module per agent (moved from spend/ whole; its transcript reader follows)."""
