"""rag_eval.adapters: wrap the retrievers and rerankers a user already has as rag_eval stages.

Layer 3 of rag_eval, shipped inside the package as ``rag_eval.adapters`` (this folder is mapped there by
``pyproject.toml``; it is never a top-level ``adapters`` module). Each framework lives in its own module here,
imported only when used, so ``import rag_eval`` stays free of LangChain and LlamaIndex:

- ``rag_eval.adapters.langchain``: LangChain retrievers and vector stores;
- ``rag_eval.adapters.llama_index``: LlamaIndex retrievers and node postprocessors;
- ``rag_eval.adapters.functions``: plain Python callables.

They arrive with the stage harness; until then this package has no public names.
"""

__all__: list[str] = []
