"""Framework integrations: LangChain and LlamaIndex retrievers over a ranklock collection.

Each lives in its own module so that importing one framework never imports the
other: ``ranklock.integrations.langchain`` needs ``ranklock[langchain]``,
``ranklock.integrations.llamaindex`` needs ``ranklock[llamaindex]``.
"""
