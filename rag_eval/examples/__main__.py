"""``python -m rag_eval.examples``: print the folder of the bundled example files (for shell commands)."""

from . import FOLDER

print(FOLDER)
