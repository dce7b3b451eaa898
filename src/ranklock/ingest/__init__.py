"""Loading, normalising, hashing and chunking documents.

Nothing is imported here: a search imports ``ingest.normalize`` and must not pay for the file
readers (markdown-it, YAML) of ``ingest.loaders``.  Import the submodules, or ``ranklock.Document``.
"""
